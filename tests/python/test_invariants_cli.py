"""An invariant the engine finds violated reaches the user as one line (issue 14): the CLI prints
``aqmlab: internal error: invariant violated: <name>: ...``, exits 1, prints no traceback and
leaves nothing in --out; the API raises ``aqmlab.api.InternalError`` with the same message.

The violation is made on purpose from outside with the test-only environment variable
``AQMLAB_TEST_BREAK_INVARIANT`` (docs/architecture.md, "Invariants checked in every run"): its
value names the invariant the run must report; the engine reads it once when a run is built and
then counts one packet of the first flow as sent twice at the end of the run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, SCENARIO

HOOK = "AQMLAB_TEST_BREAK_INVARIANT"
# Flow 0 is the first CUBIC flow: the hook counts one of its packets twice.
WANT = "aqmlab: internal error: invariant violated: flow conservation: flow 0 (TCP) sent "


def _cli(*args, env_extra: dict[str, str], cwd):
    # RUST_BACKTRACE set: the one line must not depend on the user's environment.
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), RUST_BACKTRACE="1", **env_extra)
    env.pop("AQMLAB_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "aqmlab", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.mark.parametrize("out_exists", [False, True])
def test_an_invariant_violation_is_one_line_exit_1_nothing_written(tmp_path, out_exists):
    out = tmp_path / "out"
    if out_exists:
        out.mkdir()
    p = _cli("run", SCENARIO, "--set", "duration=1s", "--out", out, env_extra={HOOK: "flow conservation"}, cwd=tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.startswith(WANT), p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and "panicked" not in p.stderr, p.stderr
    # The counts: sent = delivered + dropped + in flight + 1 (the packet counted twice).
    counts = p.stderr[len("aqmlab: internal error: invariant violated: flow conservation: flow 0 (TCP) "):].split(" (a bug")[0]
    n, d, k, f = (int(part.split()[-1]) for part in counts.split(", "))
    assert n == d + k + f + 1 and d > 1000, counts
    if out_exists:
        assert list(out.iterdir()) == [], "nothing written"
    else:
        assert not out.exists(), "the directory made for the run is removed"


def test_debug_shows_the_panic_location_and_the_traceback(tmp_path):
    p = _cli("run", SCENARIO, "--set", "duration=200ms", "--out", tmp_path / "out", "--debug", env_extra={HOOK: "flow conservation"}, cwd=tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "panicked at crates/aqmlab-sim/src/sim.rs" in p.stderr and "Traceback" in p.stderr, p.stderr
    assert "InternalError: internal error: invariant violated: flow conservation: flow 0 (TCP)" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_the_api_raises_internal_error_and_runs_normally_without_the_hook(monkeypatch):
    from aqmlab import api

    text = SCENARIO.read_text().replace('duration = "60s"', 'duration = "500ms"')
    monkeypatch.setenv(HOOK, "flow conservation")
    with pytest.raises(api.InternalError, match=r"^internal error: invariant violated: flow conservation: flow 0 \(TCP\) sent \d+"):
        api.run(text)
    # The same run without the hook (or with it empty) conserves every flow's packets.
    monkeypatch.setenv(HOOK, "")
    r = api.run(text)
    p = r.summary["packets"]
    assert p["sent"] == p["delivered"] + p["dropped"] + p["in_flight"] and p["sent"] > 1000
