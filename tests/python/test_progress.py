"""Progress and cancellation of one run (`aqmlab.run(progress=..., control=...)`, Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import aqmlab
from aqmlab import RunCancelled, RunControl

from conftest import REPO, SCENARIO

#: A run long enough that it cannot finish within the cancellation bound below on any machine.
LONG = ["duration=3600s", "bottleneck.rate=1Gbit", "flows[*].count=4"]


def test_progress_is_monotonic_and_ends_at_one() -> None:
    seen: list[float] = []
    r = aqmlab.run(SCENARIO, overrides=["duration=2s"], progress=seen.append)
    assert seen[0] == 0.0 and seen[-1] == 1.0
    assert all(a < b for a, b in zip(seen, seen[1:])), seen
    # One call per 50 ms sampling step of the 2 s run, plus the last.
    assert len(seen) == 41
    assert r.summary["sim_seconds"] == pytest.approx(2.0)


def test_an_exception_in_the_callback_stops_the_run() -> None:
    class Stop(Exception):
        pass

    seen: list[float] = []

    def cb(f: float) -> None:
        seen.append(f)
        if len(seen) == 3:
            raise Stop

    with pytest.raises(Stop):
        aqmlab.run(SCENARIO, overrides=LONG, progress=cb)
    assert len(seen) == 3


def test_cancel_from_another_thread_stops_a_long_run() -> None:
    ctl = RunControl()
    outcome: list[BaseException] = []

    def go() -> None:
        try:
            aqmlab.run(SCENARIO, overrides=LONG, control=ctl)
        except BaseException as e:  # noqa: BLE001
            outcome.append(e)

    t = threading.Thread(target=go)
    t.start()
    deadline = time.monotonic() + 30
    while ctl.progress == 0.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 0.0 < ctl.progress < 0.5
    ctl.cancel()
    t.join(timeout=30)
    assert not t.is_alive(), "the run did not stop"
    assert len(outcome) == 1 and isinstance(outcome[0], RunCancelled)
    assert ctl.cancelled and ctl.progress < 0.5


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_stops_the_cli_with_130_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqmlab", "run", str(SCENARIO), "--out", str(out), *sum((["--set", s] for s in LONG), [])],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    # Wait until the run is under way (the output directory is made just before it starts).
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("Ctrl-C did not stop the run")
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not out.exists() or not any(out.iterdir())
