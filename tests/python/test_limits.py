"""Issue 14, resources: ``--max-events``/``--max-memory`` (and ``[limits]``) refuse a run
before it starts, or stop it while it runs, with one line and exit 2, writing nothing; a path
that cannot deliver anything runs with a warning on stderr that summary.json records."""

from __future__ import annotations

import json

from conftest import run_cli

BASE = """duration = "1s"
[bottleneck]
rate = "10Mbit"
[[flows]]
cc = "cubic"
rtt = "20ms"
"""

# Timers make this run execute more events (3239) than validation estimates (2770): a ceiling
# of 3000 is reached while it runs.
TIMERS = BASE + """[[udp]]
rtt = "20ms"
frame_rate = 1000.0
rate = "1kbit"
frame_size_variation = 200.0
packet_size = 1
"""

PILE = """duration = "10s"
[bottleneck]
rate = "50Mbit"
[[workloads]]
rtt = "20ms"
mean_interarrival = "11us"
"""


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_run_over_the_memory_estimate_is_refused_before_it_starts(tmp_path):
    sc = tmp_path / "pile.toml"
    sc.write_text(PILE)
    out = tmp_path / "out"
    p = run_cli("run", sc, "--out", out)
    assert p.returncode == 2
    line = _one_line(p.stderr)
    assert "limits.max_memory" in line and "open transfers" in line, line
    assert not out.exists()
    # --max-memory overrides the scenario's (default) limit; check runs nothing.
    p = run_cli("check", sc, "--max-memory", "8GiB")
    assert p.returncode == 0, p.stderr
    p = run_cli("check", sc, "--max-memory", "lots")
    assert p.returncode == 2 and "--max-memory lots" in _one_line(p.stderr)


def test_a_run_that_reaches_max_events_stops_with_nothing_written(tmp_path):
    sc = tmp_path / "timers.toml"
    sc.write_text(TIMERS)
    out = tmp_path / "out"
    p = run_cli("run", sc, "--out", out, "--max-events", "3000", "--no-plot", "--no-html")
    assert p.returncode == 2, p.stderr
    line = _one_line(p.stderr)
    assert line.startswith("limits.max_events: the run reached 3000 events"), line
    assert not out.exists(), list(out.iterdir())
    # An existing --out directory is left as it was (empty here), captures included.
    out.mkdir()
    assert run_cli("run", sc, "--out", out, "--max-events", "3e3", "--pcap").returncode == 2
    assert list(out.iterdir()) == []
    # The estimate refuses lower ceilings before the run; a bad value names the option.
    p = run_cli("run", sc, "--out", out, "--max-events", "100")
    assert p.returncode == 2 and "would execute about" in _one_line(p.stderr)
    p = run_cli("run", sc, "--out", out, "--max-events", "1.5")
    assert p.returncode == 2 and _one_line(p.stderr).startswith("--max-events 1.5:")
    # The scenario's own [limits] works the same way, and the CLI's value wins over it.
    sc.write_text(TIMERS + "[limits]\nmax_events = 3000\n")
    assert run_cli("run", sc, "--out", out).returncode == 2
    assert run_cli("run", sc, "--out", out, "--max-events", "1e6", "--no-plot", "--no-html", "-q").returncode == 0


def test_an_undeliverable_path_runs_with_a_warning_the_summary_records(tmp_path):
    sc = tmp_path / "far.toml"
    sc.write_text(BASE.replace('rtt = "20ms"', 'rtt = "1000000s"'))
    out = tmp_path / "out"
    p = run_cli("run", sc, "--out", out, "--no-plot", "--no-html", "-q")
    assert p.returncode == 0, p.stderr
    warning = _one_line(p.stderr)
    assert warning.startswith("aqmlab: warning: flows[0]: nothing it sends can arrive before the end"), warning
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warnings"] == [warning.removeprefix("aqmlab: warning: ")]


def test_suite_run_takes_the_limits_per_run(tmp_path):
    tiny = ["l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie", "--set", "duration=3s", "--no-plots", "-q"]
    out = tmp_path / "s"
    p = run_cli("suite", "run", *tiny, "--out", out, "--max-events", "1000")
    assert p.returncode == 2
    assert "limits.max_events" in _one_line(p.stderr)
    assert not out.exists()
    p = run_cli("suite", "run", *tiny, "--out", out, "--max-events", "1e9", "--max-memory", "2GiB", "-j", "1")
    assert p.returncode == 0, p.stderr
    for sc in out.glob("runs/*/*/scenario.toml"):
        text = sc.read_text()
        assert "max_events = 1000000000" in text and 'max_memory = "2GiB"' in text, text
