"""The Python API: aqmlab.run(...) -> RunResult."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

import aqmlab
from conftest import SCENARIO

SHORT = ["duration=3s"]

DICT_SCENARIO = {
    "name": "from-dict",
    "duration": "2s",
    "seed": 3,
    "bottleneck": {"rate": "20Mbit", "qdisc": "bfifo limit 100000"},
    "flows": [{"cc": "reno", "rtt": "10ms"}, {"cc": "cubic", "rtt": "30ms"}],
}


@pytest.fixture(scope="module")
def result() -> aqmlab.RunResult:
    return aqmlab.run(SCENARIO, overrides=SHORT)


def test_returns_dataframes(result):
    assert isinstance(result.summary, dict)
    assert result.summary["name"] == "two-cubic-pfifo"
    ts = result.timeseries
    assert isinstance(ts, pd.DataFrame)
    assert list(ts.columns) == ["time", "flow", "metric", "value"]
    assert len(ts) > 0
    assert set(ts["flow"].astype(str)) == {"cubic-0", "cubic-1", "bottleneck"}
    assert result.flows == ["cubic-0", "cubic-1"]


def test_series_convenience(result):
    s = result.series("cubic-0", "srtt")
    assert isinstance(s, pd.Series)
    assert s.index.name == "time"
    assert s.dropna().between(19.0, 1000.0).all()  # at least the base RTT of 20 ms
    q = result.series("bottleneck", "qdelay")
    assert len(q) == len(s)
    assert result.units[("cubic-0", "goodput")] == "Mbit/s"
    with pytest.raises(KeyError):
        result.series("cubic-9", "srtt")
    wide = result.wide()
    assert ("cubic-1", "goodput") in wide.columns


def test_path_text_and_dict_inputs_agree():
    text = SCENARIO.read_text()
    a = aqmlab.run(str(SCENARIO), overrides=SHORT)
    b = aqmlab.run(text, overrides=SHORT)
    a.summary.pop("wall_seconds"), b.summary.pop("wall_seconds")
    assert a.summary == b.summary
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)


def test_dict_input_and_name():
    r = aqmlab.run(DICT_SCENARIO, name="label")
    assert r.summary["name"] == "label"
    assert list(r.summary)[0] == "name"  # engine key order is kept
    assert [f["cc"] for f in r.summary["flows"]] == ["reno", "cubic"]
    assert r.summary["bottleneck"]["qdisc"] == "bfifo limit 100000"
    assert r.summary["seed"] == 3


def test_seed_argument():
    r = aqmlab.run(DICT_SCENARIO, seed=11)
    assert r.summary["seed"] == 11


def test_scenario_error_is_value_error_with_file_prefix(tmp_path):
    assert issubclass(aqmlab.ScenarioError, ValueError)
    f = tmp_path / "s.toml"
    f.write_text(SCENARIO.read_text().replace("50Mbit", "50Mbot"))
    with pytest.raises(aqmlab.ScenarioError) as e:
        aqmlab.run(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: line ")
    assert "bottleneck.rate" in msg and "\n" not in msg
    with pytest.raises(ValueError, match="unknown field"):
        aqmlab.run({**DICT_SCENARIO, "colour": 1})
    with pytest.raises(aqmlab.ScenarioError, match="no such file"):
        aqmlab.run(tmp_path / "missing.toml")


def test_gil_is_released_during_the_run():
    """A Python thread keeps running while the engine simulates (py.allow_threads)."""
    from aqmlab import _sim

    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    text = SCENARIO.read_text()
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        before = ticks
        time.sleep(0.1)  # sleeping releases the GIL: calibrates the spinner's speed
        rate = (ticks - before) / 0.1
        before = ticks
        t0 = time.perf_counter()
        _sim.run(text, None, ["duration=300s"])
        wall = time.perf_counter() - t0
        during = ticks - before
    finally:
        stop.set()
        t.join()
    if wall < 0.05:
        pytest.skip(f"simulation too fast ({wall:.3f} s) to tell")
    # Holding the GIL would let the spinner run for one switch interval (5 ms) at most.
    assert during > 0.25 * rate * wall, (during, rate, wall)
