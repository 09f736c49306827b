"""The ``aqmlab run`` command: files, summary keys, determinism, exit codes, --set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from conftest import SCENARIO, SHORT, run_cli

OUTPUTS = {"scenario.toml", "manifest.json", "summary.json", "timeseries.parquet", "timeseries.csv", "throughput_rtt.png",
           "two-cubic-pfifo.flent.gz", "report.html"}


def test_writes_every_output_file(demo_run):
    proc, out = demo_run
    assert {p.name for p in out.iterdir()} == OUTPUTS  # and no temporary files left behind
    for name in OUTPUTS:
        assert (out / name).stat().st_size > 0, name
    assert (out / "throughput_rtt.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "two-cubic-pfifo.flent.gz").read_bytes()[:2] == b"\x1f\x8b"  # gzip
    assert "Jain" in proc.stdout and "cubic-0" in proc.stdout
    assert proc.stderr == ""


def test_summary_keys(demo_run):
    _, out = demo_run
    s = json.loads((out / "summary.json").read_text())
    for key in ("sim_seconds", "wall_seconds", "events", "seed", "flows", "bottleneck", "jain_steady"):
        assert key in s, key
    assert s["sim_seconds"] == pytest.approx(5.0)
    assert s["seed"] == 1
    assert s["events"] > 0
    assert [f["name"] for f in s["flows"]] == ["cubic-0", "cubic-1"]
    for f in s["flows"]:
        for key in ("name", "cc", "rtt_ms", "goodput_mbps", "steady_mbps", "retransmits", "ce_received"):
            assert key in f, key
        assert f["cc"] == "cubic"
        assert f["rtt_ms"] == pytest.approx(20.0)
        assert f["goodput_mbps"] > 1.0
    bn = s["bottleneck"]
    for key in ("packets", "drops", "ce_marks", "utilization"):
        assert key in bn, key
    assert 0.5 < bn["utilization"] <= 1.0
    for q in ("p50", "p95", "p99", "max"):
        assert q in bn["sojourn_ms"], q
    assert bn["sojourn_ms"]["p50"] <= bn["sojourn_ms"]["p99"] <= bn["sojourn_ms"]["max"]
    assert 0.5 <= s["jain_steady"] <= 1.0


def test_summary_json_format(demo_run):
    _, out = demo_run
    text = (out / "summary.json").read_text()
    assert text.startswith('{\n  "')  # indent 2
    assert text.endswith("}\n")
    keys = list(json.loads(text))
    assert keys.index("sim_seconds") < keys.index("flows") < keys.index("bottleneck")  # engine order


def test_parquet_reads_back_tidy(demo_run):
    _, out = demo_run
    df = pd.read_parquet(out / "timeseries.parquet")
    assert list(df.columns) == ["run", "cell", "seed", "time", "flow", "metric", "value"]
    assert set(df["seed"]) == {1} and set(df["run"].astype(str)) == {"two-cubic-pfifo"}
    assert set(df["flow"].astype(str)) >= {"cubic-0", "cubic-1", "bottleneck"}
    assert {"goodput", "delivery_rate", "srtt", "qdelay"} <= set(df["metric"].astype(str))
    assert df["time"].max() <= 5.0 + 1e-9
    csv = pd.read_csv(out / "timeseries.csv")
    assert list(csv.columns) == ["time", "flow", "metric", "value"]
    assert len(csv) == len(df)


def _summary_without_wall(path: Path) -> bytes:
    s = json.loads(path.read_text())
    del s["wall_seconds"]
    return json.dumps(s, indent=2).encode()


def test_same_seed_is_byte_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        proc = run_cli("run", SCENARIO, "--out", d, "--seed", "7", "--quiet", *SHORT)
        assert proc.returncode == 0, proc.stderr
    lines_a = [l for l in (a / "summary.json").read_bytes().splitlines() if b'"wall_seconds"' not in l]
    lines_b = [l for l in (b / "summary.json").read_bytes().splitlines() if b'"wall_seconds"' not in l]
    assert lines_a == lines_b
    assert _summary_without_wall(a / "summary.json") == _summary_without_wall(b / "summary.json")
    assert json.loads((a / "summary.json").read_text())["seed"] == 7
    assert (a / "timeseries.csv").read_bytes() == (b / "timeseries.csv").read_bytes()


BAD_SCENARIO = """\
name = "bad"
duration = "5s"

[bottleneck]
rate = "{rate}"
qdisc = "pfifo limit 1000"

[[flows]]
cc = "cubic"
rtt = "20ms"
{extra}"""


def _bad(tmp_path: Path, text: str) -> tuple[int, str, str, Path]:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    out = tmp_path / "out"
    proc = run_cli("run", f, "--out", out)
    return proc.returncode, proc.stdout, proc.stderr, out


def _assert_bad_input(rc: int, stdout: str, stderr: str, out: Path) -> str:
    assert rc == 2, stderr
    assert not out.exists(), "nothing may be written on bad input"
    assert stdout == ""
    assert stderr.endswith("\n") and stderr.count("\n") == 1, repr(stderr)
    assert "Traceback" not in stderr
    assert stderr.startswith(str(out.parent / "bad.toml") + ": ")
    return stderr


def test_bad_rate_exits_2_naming_key_and_line(tmp_path):
    err = _assert_bad_input(*_bad(tmp_path, BAD_SCENARIO.format(rate="50Mbot", extra="")))
    assert "line 5: bottleneck.rate:" in err
    assert "50Mbot" in err


def test_unknown_key_exits_2(tmp_path):
    err = _assert_bad_input(*_bad(tmp_path, BAD_SCENARIO.format(rate="50Mbit", extra="colour = 3\n")))
    assert "line 11:" in err
    assert "colour" in err


def test_missing_duration_exits_2(tmp_path):
    text = BAD_SCENARIO.format(rate="50Mbit", extra="").replace('duration = "5s"\n', "")
    err = _assert_bad_input(*_bad(tmp_path, text))
    assert "duration" in err


def test_toml_syntax_error_exits_2(tmp_path):
    err = _assert_bad_input(*_bad(tmp_path, 'name = "x"\nduration = \n'))
    assert "line 2" in err


def test_missing_file_exits_2(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("run", tmp_path / "nope.toml", "--out", out)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "nope.toml" in proc.stderr
    assert not out.exists()


def test_bad_override_exits_2(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("run", SCENARIO, "--out", out, "--set", "bottleneck.rate=50Mbot")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "bottleneck.rate" in proc.stderr and "50Mbot" in proc.stderr
    assert not out.exists()


def test_set_overrides(tmp_path):
    out = tmp_path / "out"
    proc = run_cli(
        "run", SCENARIO, "--out", out, "--quiet",
        "--set", "duration=3s", "--set", "bottleneck.rate=20Mbit", "--set", "flows[0].rtt=40ms",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    s = json.loads((out / "summary.json").read_text())
    assert s["sim_seconds"] == pytest.approx(3.0)
    assert s["bottleneck"]["rate_mbps"] == pytest.approx(20.0)
    assert [f["rtt_ms"] for f in s["flows"]] == pytest.approx([40.0, 40.0])  # count=2 copies the entry
    assert sum(f["goodput_mbps"] for f in s["flows"]) <= 20.0 * 1.01


def test_an_out_dir_that_cannot_be_made_is_bad_input_found_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = blocker / "sub"  # a directory cannot be created below a file
    proc = run_cli("run", SCENARIO, "--out", out, *SHORT)
    assert proc.returncode == 2 and "--out" in proc.stderr and "cannot create" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_unexpected_error_exits_1_without_traceback(tmp_path):
    out = tmp_path / "out"
    (out / "summary.json").mkdir(parents=True)  # the run's last file cannot replace a directory
    proc = run_cli("run", SCENARIO, "--out", out, *SHORT)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
    proc = run_cli("run", SCENARIO, "--out", out, "--debug", *SHORT)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr


def test_overwrites_existing_outputs_atomically(demo_run, tmp_path):
    _, first = demo_run
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("stale")
    proc = run_cli("run", SCENARIO, "--out", out, "--quiet", *SHORT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["sim_seconds"] == pytest.approx(5.0)
    assert {p.name for p in out.iterdir()} == OUTPUTS
    assert oct((out / "summary.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_console_script_entry_point():
    import shutil
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "aqmlab"
    if not exe.exists() and shutil.which("aqmlab") is None:
        pytest.skip("console script not installed")
    proc = subprocess.run([str(exe) if exe.exists() else "aqmlab", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "run" in proc.stdout


@pytest.mark.parametrize(
    "args, want",
    [
        (["run", str(SCENARIO), "--out", "x", "--seed", "x"], "aqmlab: run: Invalid value for '--seed'"),
        (["run", "--nosuch"], "aqmlab: run: No such option: --nosuch"),
        (["bogus"], "aqmlab: No such command 'bogus'"),
    ],
)
def test_command_line_errors_are_one_line_with_exit_2(args, want):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(want) and proc.stderr.count("\n") == 1, proc.stderr
    assert "╭" not in proc.stderr and proc.stdout == ""
