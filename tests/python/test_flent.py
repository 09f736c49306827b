"""The flent data file (``<name>.flent.gz``): flent 2.3 itself loads it and plots it.

flent comes from PyPI (the ``test`` extra of pyproject.toml, installed by ``make test``'s
set-up). The plots are drawn by flent's own command line, which exits 0 on many errors, so
each render also checks that flent printed no error and wrote a PNG that is not blank.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aqmlab
from aqmlab import flentfile, output

flent_resultset = pytest.importorskip(
    "flent.resultset", reason="flent is not installed: pip install 'flent>=2.3' (make test installs it)"
)
from flent.settings import load as flent_settings  # noqa: E402

#: Two CUBIC uploads and an ICMP ping (flent's tcp_2up), on a queue with stats, 4 s.
TWO_UP = """
name = "two-up"
duration = "4s"
seed = 1
[bottleneck]
rate = "20Mbit"
qdisc = "fq_codel"
[[flows]]
cc = "cubic"
rtt = "20ms"
count = 2
[[probes]]
kind = "ping"
rtt = "20ms"
"""

#: l4s-tests S4 (scenarios/rrul-be-asym.toml, flent's rrul_be), shortened.
RRUL_BE = Path(__file__).resolve().parents[2] / "scenarios" / "rrul-be-asym.toml"


def _testbed_file(name: str) -> Path:
    """A data file recorded on a testbed, shipped in flent's wheel (``unittests/test_data``)."""
    for f in importlib.metadata.files("flent") or []:
        if f.name == name:
            return Path(f.locate())
    pytest.skip(f"flent's wheel has no {name}")


def _load_json(path: Path) -> dict:
    def no_constants(name: str) -> None:
        raise AssertionError(f"{path.name}: JSON has {name}, flent/jq/Go readers want null")

    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_constant=no_constants)


@pytest.fixture(scope="module")
def two_up(tmp_path_factory) -> tuple[aqmlab.RunResult, Path]:
    result = aqmlab.run(TWO_UP)
    out = tmp_path_factory.mktemp("flent")
    output.write_outputs(result, out, plot=False, csv=False)
    return result, out / "two-up.flent.gz"


@pytest.fixture(scope="module")
def two_up_seed2(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("flent2")
    path = out / "two-up.flent.gz"
    flentfile.write(aqmlab.run(TWO_UP, seed=2), path)
    return path


@pytest.fixture(scope="module")
def rrul_be(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rrul")
    path = out / "rrul-be-asym.flent.gz"
    flentfile.write(aqmlab.run(RRUL_BE, overrides=["duration=6s"]), path)
    return path


# --------------------------------------------------------------------------------------
# The file itself
# --------------------------------------------------------------------------------------


def test_file_is_format_4_with_null_not_nan(two_up):
    result, path = two_up
    doc = _load_json(path)  # fails on NaN / Infinity
    assert doc["version"] == 4
    assert set(doc) == {"version", "metadata", "x_values", "results", "raw_values"}
    md = doc["metadata"]
    assert md["NAME"] == "tcp_2up"
    assert md["T0"].endswith("Z") and md["TIME"].endswith("Z")
    assert md["LENGTH"] == pytest.approx(4.0)
    assert md["TOTAL_LENGTH"] == pytest.approx(4.0 + 2 * flentfile.DELAY_S)
    assert md["STEP_SIZE"] == pytest.approx(0.05)
    # the scenario is in the metadata
    assert md["AQMLAB"]["scenario"] == TWO_UP
    assert md["AQMLAB"]["flows"] == {"TCP upload::1": "cubic-0", "TCP upload::2": "cubic-1"}
    # every results array is on x_values; the grid before the transfers start holds null
    n = len(doc["x_values"])
    assert all(len(v) == n for v in doc["results"].values())
    assert doc["results"]["TCP upload::1"][0] is None
    # and a NaN of the engine (srtt before the first ACK) is null, not dropped or NaN
    srtt = result.series("cubic-0", "srtt").to_numpy()
    assert np.isnan(srtt[0])
    first = int(round(flentfile.DELAY_S / md["STEP_SIZE"]))
    assert doc["results"]["TCP upload::1::tcp_rtt"][first] is None


def test_same_run_gives_the_same_bytes(two_up, tmp_path):
    result, path = two_up
    again = tmp_path / "again.flent.gz"
    flentfile.write(result, again)
    assert again.read_bytes() == path.read_bytes()


def test_flent_loads_it_and_reads_the_engine_series(two_up):
    """flent's own reader (flent.resultset.load) gives back the engine's values at
    x = DELAY + simulated time, under flent's series names and ss/ping keys."""
    result, path = two_up
    r = flent_resultset.load(str(path))
    assert r.meta("NAME") == "tcp_2up"
    step = r.meta("STEP_SIZE")
    for i, flow in enumerate(result.flows, start=1):
        name = f"TCP upload::{i}"
        for raw_key, metric in (("val", "goodput"), ("tcp_rtt", "srtt"), ("tcp_cwnd", "cwnd"),
                                ("tcp_delivery_rate", "delivery_rate")):
            got = dict(r.raw_series(name, raw_key=raw_key))
            s = result.series(flow, metric)
            want = {round(flentfile.DELAY_S + t, 6): v for t, v in s.items() if np.isfinite(v)}
            assert len(got) == len(want) > 0, (name, raw_key)
            xs = sorted(got)
            np.testing.assert_allclose(xs, sorted(want), atol=1e-5)
            np.testing.assert_allclose([got[x] for x in xs], [want[k] for k in sorted(want)], rtol=1e-6, atol=1e-6)
        # netperf's samples carry their interval
        durs = [e["dur"] for e in r.raw_values[name] if "val" in e]
        assert durs and all(d == pytest.approx(step) for d in durs)
    ping = dict(r.raw_series("Ping (ms) ICMP"))
    rtt = result.series("probe-0", "rtt").dropna()
    assert len(ping) == len(rtt)
    assert min(ping.values()) == pytest.approx(rtt.min(), abs=1e-6)
    # the bottleneck as flent's tc poller: backlog in packets, drops per interval
    drops = sum(v for _, v in r.raw_series("qdisc_stats_bottleneck", raw_key="dropped"))
    assert drops == result.summary["bottleneck"]["drops"]
    qlen = [v for _, v in r.raw_series("qdisc_stats_bottleneck", raw_key="backlog_pkts")]
    assert qlen == pytest.approx(result.series("bottleneck", "qlen").dropna().tolist(), abs=1e-6)


def _flent_data_sets(path: Path) -> list[str]:
    """The series flent's test definition declares for a file (tests/<NAME>.conf run with the
    file's metadata, as ``flent -i`` does)."""
    r = flent_resultset.load(str(path))
    s = flent_settings(["-i", str(path)])
    s.update(r.meta())
    s.load_test(informational=True)
    return list(s.DATA_SETS)


@pytest.mark.parametrize(
    "up, down, test",
    [(1, 0, "tcp_1up"), (2, 0, "tcp_2up"), (3, 0, "tcp_nup"), (4, 0, "tcp_4up"), (0, 1, "tcp_1down"),
     (0, 3, "tcp_ndown"), (1, 1, "tcp_bidirectional"), (4, 4, "rrul_be"), (2, 3, "rrul_be_nflows")],
)
def test_every_series_is_one_flent_declares(up, down, test, tmp_path):
    flows = ""
    if up:
        flows += f'[[flows]]\ncc = "cubic"\nrtt = "20ms"\ncount = {up}\n'
    if down:
        flows += f'[[flows]]\ncc = "cubic"\nrtt = "20ms"\ncount = {down}\ndirection = "down"\n'
    text = (
        'duration = "1s"\n[bottleneck]\nrate = "10Mbit"\n[return]\nrate = "10Mbit"\n'
        '[[probes]]\nkind = "ping"\nrtt = "20ms"\n[[probes]]\nkind = "ping"\nrtt = "40ms"\nname = "far"\n'
        + flows
    )
    path = tmp_path / "x.flent.gz"
    flentfile.write(aqmlab.run(text), path)
    doc = _load_json(path)
    assert doc["metadata"]["NAME"] == test
    declared = set(_flent_data_sets(path))
    measured = [k for k, v in doc["raw_values"].items() if v]
    assert len([k for k in measured if k.startswith("TCP ")]) == up + down
    assert "Ping (ms) ICMP" in measured and "Ping (ms) ICMP far (extra)" in measured
    assert "qdisc_stats_bottleneck" in measured and "qdisc_stats_return_link" in measured
    # flent's tcp_1down.conf includes none of common.inc's mixins (extra pings, qdisc stats):
    # flent ignores those series there (they are still in the file)
    mixins = ("qdisc_stats_", "Ping (ms) ICMP far")
    undeclared = [k for k in measured if k not in declared and not (test == "tcp_1down" and k.startswith(mixins))]
    assert not undeclared, f"{test}: series flent does not know: {undeclared} (declared: {sorted(declared)})"


def test_file_name_is_the_run_name():
    r = aqmlab.run(TWO_UP, name="a b/c")
    assert flentfile.file_name(r) == "a_b_c.flent.gz"
    assert output.WRITERS["flent"].filename(r) == "a_b_c.flent.gz"


# --------------------------------------------------------------------------------------
# flent's command line draws it (alone, and beside a testbed's file)
# --------------------------------------------------------------------------------------


def _render(inputs: list[Path], plot: str, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "flent"]
    for i in inputs:
        cmd += ["-i", str(i)]
    cmd += ["-p", plot, "-o", str(out)]
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _check_png(returncode: int, text: str, out: Path, what: str) -> None:
    assert returncode == 0, f"{what}: flent exited {returncode}:\n{text}"
    lowered = text.lower()
    assert "error" not in lowered and "traceback" not in lowered, f"{what}: flent printed:\n{text}"
    assert out.is_file() and out.stat().st_size > 0, f"{what}: no PNG (flent said:\n{text})"
    import matplotlib.image

    img = matplotlib.image.imread(out)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100, what
    assert float(img[..., :3].std()) > 0.01, f"{what}: the PNG is blank"


def test_flent_plots_a_simulated_run_and_combines_runs(two_up, two_up_seed2, rrul_be, tmp_path):
    _, path = two_up
    jobs = {
        f"{plot} of {path.name}": ([path], plot)
        for plot in ("tcp_delivery_with_rtt", "totals", "ping_cdf", "tcp_rtt", "tcp_cwnd")
    }
    # two simulated runs (seeds 1 and 2) in one box plot
    jobs["box_combine of two seeds"] = ([path, two_up_seed2], "box_combine")
    # a simulated rrul_be beside the testbed's rrul_be file shipped with flent
    testbed = _testbed_file("test-rrul_be-socket_stats.flent.gz")
    jobs["box_combine of simulation + testbed"] = ([rrul_be, testbed], "box_combine")
    items = list(jobs.items())
    for k in range(0, len(items), 2):  # two at a time (CI has 2 cores)
        running = []
        for i, (what, (inputs, plot)) in enumerate(items[k : k + 2], start=k):
            out = tmp_path / f"{i}-{plot}.png"
            running.append((what, out, _render(inputs, plot, out)))
        for what, out, proc in running:
            text, _ = proc.communicate(timeout=180)
            _check_png(proc.returncode, text, out, what)


# --------------------------------------------------------------------------------------
# Where the file is written: aqmlab run (default on), suite run (--flent)
# --------------------------------------------------------------------------------------


def test_run_writes_it_unless_no_flent_and_suite_only_with_flent(tmp_path):
    from typer.testing import CliRunner

    from aqmlab.cli import app

    def cli(*args):
        r = CliRunner().invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output
        return r

    scenario = tmp_path / "two-up.toml"
    scenario.write_text(TWO_UP)
    cli("run", scenario, "--out", tmp_path / "on", "--quiet", "--no-plot")
    cli("run", scenario, "--out", tmp_path / "off", "--quiet", "--no-plot", "--no-flent")
    assert (tmp_path / "on" / "two-up.flent.gz").is_file()
    assert not list((tmp_path / "off").glob("*.flent.gz"))

    suite = ["suite", "run", "l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie",
             "--set", "duration=2s", "--no-plots", "--jobs", "1", "--quiet"]
    cli(*suite, "--out", tmp_path / "s-off")
    assert not list((tmp_path / "s-off").rglob("*.flent.gz"))
    cli(*suite, "--flent", "--out", tmp_path / "s-on")
    files = sorted((tmp_path / "s-on").rglob("*.flent.gz"))
    runs = sorted((tmp_path / "s-on").rglob("summary.json"))
    assert len(files) == len(runs) > 0
    for f in files:
        assert f.parent.name == "seed=1"
        r = flent_resultset.load(str(f))
        assert r.meta("NAME") == "tcp_2up"  # S6: one classic and one L4S flow, both uploads
