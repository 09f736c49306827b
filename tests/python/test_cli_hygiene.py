"""Errors are one line everywhere, CLI option errors included (exit 2 for bad input, 1 for an
internal error, the traceback only with --debug); no command opens a port, except a Dask
cluster aqmlab starts, which binds to 127.0.0.1 (issue 14)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, SCENARIO, run_cli

KILL_SUITE = Path(__file__).resolve().parent / "data" / "kills-suite.toml"


@pytest.mark.parametrize(
    "args, want",
    [
        (["suite", "run", "l4s-tests/s6", "--jobs", "0"], "aqmlab: suite run: Invalid value for '--jobs' / '-j'"),
        (["suite", "run", "l4s-tests/s6", "--seeds", "x"], "aqmlab: suite run: Invalid value for '--seeds'"),
        (["suite", "run", "l4s-tests/s6", "--bogus"], "aqmlab: suite run: No such option: --bogus"),
        (["suite", "run"], "aqmlab: suite run: Missing argument 'NAME'"),
        (["suite", "show", "l4s-tests/s6", "--filter"], "aqmlab: suite show: Option '--filter' requires an argument"),
        (["suite", "report", "l4s-tests/s6", "--seeds", "-3"], "aqmlab: suite report: Invalid value for '--seeds'"),
        (["plot", "--kind"], "aqmlab: plot: Option '--kind' requires an argument"),
        (["plot", "--overlay=maybe"], "aqmlab: plot: Option '--overlay' does not take a value"),
        (["check", str(SCENARIO), "--seed", "x"], "aqmlab: check: Invalid value for '--seed'"),
        (["check"], "aqmlab: check: Missing argument 'SCENARIO.toml'"),
        (["validate", "--jobs", "many"], "aqmlab: validate: Invalid value for '--jobs' / '-j'"),
        (["validate", "--seeds", "0"], "aqmlab: validate: Invalid value for '--seeds'"),
        (["scenario", "schema", "--bogus"], "aqmlab: scenario schema: No such option: --bogus"),
        (["scenario", "bogus"], "aqmlab: scenario: No such command 'bogus'"),
        (["run", str(SCENARIO), "--out", "x", "--pcap-snaplen", "big"], "aqmlab: run: Invalid value for '--pcap-snaplen'"),
        (["qdisc", "show"], "aqmlab: qdisc show: Missing argument"),
    ],
)
def test_option_errors_are_one_line_with_exit_2(args, want, tmp_path):
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith(want) and proc.stderr.count("\n") == 1, proc.stderr
    assert "╭" not in proc.stderr and "Traceback" not in proc.stderr and proc.stdout == ""
    assert list(tmp_path.iterdir()) == [], "nothing written"


@pytest.mark.parametrize(
    "args, want",
    [
        (["suite", "run", "no-such-suite", "--out", "o"], "aqmlab: unknown suite 'no-such-suite'"),
        (["suite", "run", "l4s-tests/s6", "--filter", "qdisc=nope", "--out", "o"], "aqmlab: --filter qdisc=nope: not a value"),
        (["suite", "run", "l4s-tests/s6", "--executor", "slurm"], "aqmlab: --executor slurm: expected local or dask"),
        (["plot", "nowhere"], "nowhere: no finished run here"),
        (["plot", ".", "--kind", "nope"], "--kind nope: unknown"),
        (["check", "missing.toml"], "missing.toml: no such file"),
        (["validate", "--only", "nope", "--dry-run"], "aqmlab: --only nope: no such comparison"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(args, want, tmp_path):
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith(want) and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "runs").exists()


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one") / "run"
    p = run_cli("run", SCENARIO, "--set", "duration=2s", "--out", out, "-q", "--no-plot", "--no-html", "--no-flent")
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.parametrize("cmd", ["plot", "suite report"])
def test_an_internal_error_is_one_line_exit_1_and_debug_shows_the_traceback(one_run, tmp_path, cmd):
    if cmd == "plot":
        run = tmp_path / "run"
        shutil.copytree(one_run, run)
        (run / "timeseries.parquet").write_bytes(b"PAR1 not parquet")  # a damaged file, read as if whole
        args = ["plot", str(run), "--out", str(tmp_path / "x.png")]
    else:
        out = tmp_path / "s"
        (out / "REPORT.md").mkdir(parents=True)  # the report cannot replace a directory
        args = ["suite", "report", str(KILL_SUITE), "--filter", "qdisc=pie", "--out", str(out)]
    proc = run_cli(*args)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("aqmlab: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.rstrip().endswith("(run with --debug for a traceback)")
    proc = run_cli(*args, "--debug")
    assert proc.returncode == 1 and "Traceback (most recent call last)" in proc.stderr


# --------------------------------------------------------------------------------------
# Nothing listens where it should not
# --------------------------------------------------------------------------------------

#: Loaded by every Python process of a command (PYTHONPATH), workers included: records each
#: socket bind() and listen() with the process and the address.
SITECUSTOMIZE = textwrap.dedent(
    """
    import json, os, socket
    _log = os.environ.get("AQMLAB_TEST_SOCKET_LOG")
    if _log:
        _bind, _listen = socket.socket.bind, socket.socket.listen

        def _record(op, sock, address):
            with open(_log, "a") as f:
                f.write(json.dumps({"pid": os.getpid(), "op": op, "family": int(sock.family), "address": repr(address)}) + "\\n")

        def bind(self, address):
            _record("bind", self, address)
            return _bind(self, address)

        def listen(self, *a):
            _record("listen", self, self.getsockname())
            return _listen(self, *a)

        socket.socket.bind = bind
        socket.socket.listen = listen
    """
)


def _sockets(tmp_path: Path, *args: str | Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / f"sockets-{len(list(tmp_path.glob('sockets-*')))}.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), "AQMLAB_TEST_SOCKET_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-m", "aqmlab", *map(str, args)], capture_output=True, text=True, cwd=REPO, env=env, timeout=240)
    entries = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
    return proc, entries


def test_the_socket_recorder_sees_a_bind(tmp_path):
    """The recorder itself works (else the tests below would pass vacuously)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "PYTHONPATH": str(site), "AQMLAB_TEST_SOCKET_LOG": str(log)}
    subprocess.run([sys.executable, "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()"], env=env, check=True)
    ops = [json.loads(l)["op"] for l in log.read_text().splitlines()]
    assert ops == ["bind", "listen"]


def test_no_command_opens_a_port(tmp_path):
    out = tmp_path / "o"
    commands = [
        ["run", SCENARIO, "--set", "duration=2s", "--out", out / "run", "-q"],
        ["suite", "run", KILL_SUITE, "--filter", "qdisc=pie", "--no-plots", "-j", "2", "-q", "--out", out / "suite"],
        ["plot", out / "run", "--kind", "totals", "--out", out / "p.png"],
        ["validate", "--dry-run", "--out", out / "v"],
    ]
    for args in commands:
        proc, entries = _sockets(tmp_path, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        inet = [e for e in entries if e["family"] in (2, 10)]  # AF_INET, AF_INET6
        assert inet == [], (args, inet)
    engine = [p for p in (REPO / "crates").rglob("*.rs") if "std::net" in p.read_text(errors="replace")]
    assert engine == [], "the engine opens no socket"


@pytest.mark.parametrize("host", [None, "127.0.0.2"])
def test_a_dask_cluster_aqmlab_starts_binds_to_loopback_only(tmp_path, host):
    """By default on 127.0.0.1; --dask-host moves it (tested with another loopback address)."""
    pytest.importorskip("dask.distributed")
    proc, entries = _sockets(
        tmp_path, "suite", "run", KILL_SUITE, "--filter", "qdisc=pie", "--filter", "cc=cubic", "--no-plots", "-j", "1",
        "--executor", "dask", "-q", "--out", tmp_path / "o", *(["--dask-host", host] if host else []),
    )
    assert proc.returncode == 0, proc.stderr
    inet = [e for e in entries if e["family"] in (2, 10)]
    assert any(e["op"] == "listen" for e in inet), "the scheduler and the worker listen"
    want = host or "127.0.0.1"
    assert all(e["address"].startswith(f"('{want}', ") for e in inet), inet
