"""Results survive kills and damage (issue 14): damaged or partial runs are found on resume,
redone and reported; a dead worker fails only its own run (local pool and Dask); SIGTERM,
SIGINT and SIGKILL of the suite process leave no process and no temporary file behind; 20
SIGKILLs at random moments then a resume give exactly the results of an uninterrupted run;
an unwritable or full output directory is found before any run starts."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO, run_cli

KILL_SUITE = Path(__file__).resolve().parent / "data" / "kills-suite.toml"
#: 4 runs of 3 s: the damage tests' suite.
TINY = ["l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie", "--set", "duration=3s", "--seeds", "2", "--no-plots"]


# --------------------------------------------------------------------------------------
# Helpers: processes of one test, temporary files
# --------------------------------------------------------------------------------------


def _marked(marker: str) -> list[int]:
    """Live processes whose environment holds ``AQMLAB_TEST_MARK=marker`` (the suite process
    and everything it started, wherever they were re-parented)."""
    want = f"AQMLAB_TEST_MARK={marker}".encode()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if want not in (d / "environ").read_bytes().split(b"\0"):
                continue
            if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        pids.append(int(d.name))
    return pids


def _wait_gone(marker: str, seconds: float = 8.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _start(args: list[str], marker: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aqmlab", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "AQMLAB_TEST_MARK": marker, **env},
    )


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*.tmp")]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """One finished run of TINY (4 runs), copied by the tests that damage it."""
    out = tmp_path_factory.mktemp("tiny") / "s"
    p = run_cli("suite", "run", *TINY, "-q", "-j", "1", "--out", out)
    assert p.returncode == 0, p.stderr
    return out


def _plan(out: Path):
    from aqmlab.suite import load_suite, parse_filters, parse_overrides, plan_runs

    return plan_runs(load_suite("l4s-tests/s6"), out.resolve(), filters=parse_filters(["classic=cubic", "qdisc=pie"]),
                     seeds=2, overrides=parse_overrides(["duration=3s"]))


# --------------------------------------------------------------------------------------
# 1. Damaged and partial runs are redone, and reported
# --------------------------------------------------------------------------------------

DAMAGE = {
    "truncated summary.json": lambda d: (d / "summary.json").write_bytes((d / "summary.json").read_bytes()[:100]),
    "emptied summary.json": lambda d: (d / "summary.json").write_bytes(b""),
    "bogus summary.json": lambda d: (d / "summary.json").write_text('{"format_version": 1, "flows": []}\n'),
    "deleted summary.json": lambda d: (d / "summary.json").unlink(),
    "emptied Parquet": lambda d: (d / "timeseries.parquet").write_bytes(b""),
    "deleted Parquet": lambda d: (d / "timeseries.parquet").unlink(),
    "one flipped Parquet byte": lambda d: _flip(d / "timeseries.parquet"),
    "missing manifest": lambda d: (d / "manifest.json").unlink(),
    "manifest without summary": lambda d: _drop_from_manifest(d, "summary.json"),
    "bogus manifest": lambda d: (d / "manifest.json").write_text("[1, 2]"),
    "only scenario.toml (killed early)": lambda d: [p.unlink() for p in d.iterdir() if p.name != "scenario.toml"],
}


def _flip(p: Path) -> None:
    b = bytearray(p.read_bytes())
    b[len(b) // 2] ^= 0x01
    p.write_bytes(bytes(b))


def _drop_from_manifest(d: Path, name: str) -> None:
    m = json.loads((d / "manifest.json").read_text())
    del m["files"][name]
    (d / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_run_is_not_done(tiny, tmp_path, damage):
    from aqmlab import runner

    out = tmp_path / "s"
    shutil.copytree(tiny, out)
    runs = _plan(out)
    assert [runner.run_state(r) for r in runs] == [("done", "")] * 4
    DAMAGE[damage](runs[1].run_dir)
    state, why = runner.run_state(runs[1])
    assert state == "damaged" and why, (damage, why)
    assert not runner.is_done(runs[1])
    assert [runner.run_state(r)[0] for r in runs[:1] + runs[2:]] == ["done"] * 3


def test_damaged_runs_are_redone_and_reported(tiny, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(tiny, out)
    before = _files(out / "runs")
    runs = sorted((out / "runs").glob("*/*"))
    DAMAGE["truncated summary.json"](runs[0])
    DAMAGE["deleted Parquet"](runs[1])
    DAMAGE["missing manifest"](runs[2])
    (runs[3] / ".timeseries.parquet.x1.tmp").write_text("partial")  # an interrupted write's leftover
    (out / ".results.csv.x2.tmp").write_text("partial")
    p = run_cli("suite", "run", *TINY, "-j", "1", "--out", out)
    assert p.returncode == 0, p.stderr
    assert "(3 run, 1 reused, 3 redone (damaged), 0 failed)" in p.stdout, p.stdout
    assert p.stderr.count("damaged (") == 3, p.stderr
    assert "summary.json does not match manifest.json" in p.stderr and "timeseries.parquet is missing" in p.stderr
    assert _files(out / "runs") == before, "the redone runs are the runs the damage destroyed, byte for byte"
    assert not _temporaries(out)
    p = run_cli("suite", "run", *TINY, "-j", "1", "--out", out)
    assert "(0 run, 4 reused, 0 failed)" in p.stdout, p.stdout


def test_a_stale_run_is_redone_but_not_called_damaged(tiny, tmp_path):
    from aqmlab import runner

    out = tmp_path / "s"
    shutil.copytree(tiny, out)
    runs = _plan(out)
    (runs[0].run_dir / "scenario.toml").write_text(runs[0].text.replace("3s", "4s"))
    assert runner.run_state(runs[0])[0] == "stale"


# --------------------------------------------------------------------------------------
# 2. A dead worker fails only its own run
# --------------------------------------------------------------------------------------


def _killer_args(out: Path, executor: str) -> list[str]:
    return ["suite", "run", str(KILL_SUITE), "--filter", "qdisc=pie", "--no-plots", "-j", "2", "--out", str(out),
            "--executor", executor]


@pytest.mark.parametrize("executor", ["local", "dask"])
def test_a_run_that_kills_its_worker_fails_alone(tmp_path, executor):
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    out = tmp_path / "s"
    marker = uuid.uuid4().hex
    # cell pie_reno, seed 1 kills its worker every time it starts (as the OOM killer would).
    proc = _start(_killer_args(out, executor), marker, AQMLAB_TEST_KILL_WORKER="cell=pie_reno/seed=1")
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 1, stderr
    assert "(3 run, 0 reused, 1 failed)" in stdout, stdout
    failed = [l for l in stderr.splitlines() if "cell=" in l]
    assert len(failed) == 1 and "cell=pie_reno/seed=1" in failed[0], stderr
    want = "its worker died 2 times (killed by SIGKILL" if executor == "local" else "its Dask worker died on every attempt"
    assert want in failed[0], failed[0]
    done = [r.parent for r in out.glob("runs/*/*/summary.json")]
    assert len(done) == 3 and all("cell=pie_reno/seed=1" not in str(r) for r in done)
    assert not _wait_gone(marker)
    # Without the hook the failed run runs, and nothing else.
    p = run_cli(*_killer_args(out, "local"))
    assert p.returncode == 0 and "(1 run, 3 reused" in p.stdout, p.stdout + p.stderr


# --------------------------------------------------------------------------------------
# 3. Killing the suite process leaves nothing behind
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "executor, sig",
    [("local", signal.SIGINT), ("local", signal.SIGTERM), ("local", signal.SIGKILL), ("dask", signal.SIGTERM), ("dask", signal.SIGKILL)],
)
def test_killing_the_suite_process_leaves_no_process_and_no_temporary(tmp_path, executor, sig):
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    out = tmp_path / "s"
    marker = uuid.uuid4().hex
    proc = _start(["suite", "run", str(KILL_SUITE), "--set", "duration=300s", "--no-plots", "-j", "2", "--out", str(out),
                   "--executor", executor], marker)
    try:
        # Wait for one finished run and both workers busy with the next ones (runs of 300 s of
        # simulated time, about a second each: 30 s ones let the whole suite end before this).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            finished = list(out.glob("runs/*/*/summary.json"))
            started = list(out.glob("runs/*/*/scenario.toml"))
            if finished and len(started) >= len(finished) + 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        kept = {p.parent for p in out.glob("runs/*/*/summary.json")}
        assert len(_marked(marker)) >= 3, "the suite process and its two workers"
        t0 = time.monotonic()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not _wait_gone(marker), "a worker (or a resource tracker) outlived the suite process"
    if executor == "local" or sig != signal.SIGKILL:
        # aqmlab's Dask workers die at once when the suite process is SIGKILLed (SIGTERM by
        # PR_SET_PDEATHSIG, its default action): the resume cleans up; otherwise the suite
        # closes its cluster and removes what the workers held.
        assert not _temporaries(out), _temporaries(out)
    if sig != signal.SIGKILL:
        assert proc.returncode == (130 if sig == signal.SIGINT else 143)
        word = "interrupted" if sig == signal.SIGINT else "terminated"
        assert stderr == f"aqmlab: {word} (finished runs are kept; run again to resume)\n"
        assert took < 5.0, f"took {took:.1f} s to stop"  # about one second; generous for a loaded machine
    from aqmlab.runner import manifest_problem

    assert kept and all(manifest_problem(d) is None for d in kept), "the finished runs are kept"


def test_sigterm_stops_a_single_run_like_ctrl_c(tmp_path):
    marker = uuid.uuid4().hex
    out = tmp_path / "o"
    proc = _start(["run", str(REPO / "scenarios" / "two-cubic-pfifo.toml"), "--set", "duration=3000s", "--pcap", "--out", str(out), "-q"], marker)
    deadline = time.monotonic() + 60
    while proc.poll() is None and not _temporaries(out) and time.monotonic() < deadline:
        time.sleep(0.05)  # the captures' temporary files: the engine is running
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 143 and stderr == "aqmlab: terminated\n", (proc.returncode, stderr)
    assert not out.exists(), "nothing is written for a terminated run, its temporary captures included"


# --------------------------------------------------------------------------------------
# 4. The kill test
# --------------------------------------------------------------------------------------


def test_twenty_random_sigkills_then_resume_give_the_uninterrupted_results(tmp_path):
    """Each of 20 suite processes is SIGKILLed at a random (seeded) moment once it has started
    a run: inside a simulation, a worker's writes or the report's; then one resume. Every run
    is there once, its manifest's hashes hold, and every file of the suite directory is
    byte-identical to an uninterrupted run's; no process outlives a kill, no .tmp is left."""
    from aqmlab.runner import manifest_problem

    # Runs of about 0.2 s of CPU (the engine's share grows with the rate; the writes are a few
    # ms since the output is streamed): a kill lands inside one, in its writes or between two.
    args = ["suite", "run", str(KILL_SUITE), "--set", "duration=10s", "--set", "bottleneck.rate=200Mbit", "--no-plots", "-j", "2"]
    ref = tmp_path / "ref"
    p = run_cli(*args, "--out", ref, "-q")
    assert p.returncode == 0, p.stderr
    out = tmp_path / "killed"
    args += ["--out", str(out)]
    git_dir = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    lock = Path(git_dir) / "index.lock" if git_dir else None
    locked_before = lock is not None and lock.exists()
    rng = random.Random(14)
    finished_at_kill = []
    for k in range(20):
        started = {p.parent for p in out.glob("runs/*/*/scenario.toml")}
        finished = len(list(out.glob("runs/*/*/summary.json")))
        marker = uuid.uuid4().hex
        proc = _start([*args, "-q"], marker)
        # The moment: once this process has started a run and finished 0 or 1 more (or
        # the suite), plus a random delay; counted in runs, so that the kills spread over
        # the suite however fast the machine.
        more = rng.choice([0, 0, 0, 1])
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / "results.csv").exists():
                break
            if {p.parent for p in out.glob("runs/*/*/scenario.toml")} - started and len(list(out.glob("runs/*/*/summary.json"))) >= finished + more:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert not _wait_gone(marker), f"kill {k}: a process outlived the suite process"
        finished_at_kill.append(len(list(out.glob("runs/*/*/summary.json"))))
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    assert "kills: 16 runs" in p.stdout, p.stdout
    got, want = _files(out), _files(ref)
    runs = sorted({str(Path(k).parent) for k in want if k.startswith("runs/")})
    assert len(runs) == 16 and sorted({str(Path(k).parent) for k in got if k.startswith("runs/")}) == runs
    assert all(manifest_problem(out / r) is None for r in runs)
    assert got.keys() == want.keys(), "every run present exactly once, nothing else"
    assert [k for k in want if got[k] != want[k]] == [], "byte-identical to the uninterrupted run"
    assert not _temporaries(out)
    if lock is not None and not locked_before:
        assert not lock.exists(), "a killed worker's git (manifest.json's git_commit) left the repository locked"
    during = [n for n in finished_at_kill if 0 < n < 16]
    print("finished runs at each kill:", finished_at_kill)
    assert len(during) >= 5, f"too few kills landed between runs: finished runs at each kill {finished_at_kill}"


# --------------------------------------------------------------------------------------
# 5. An unwritable or full output directory is found before any run starts
# --------------------------------------------------------------------------------------


def test_a_full_output_directory_is_found_before_any_run(tmp_path, monkeypatch):
    from aqmlab import runner
    from aqmlab.suite import load_suite

    real = shutil.disk_usage

    def tiny_disk(path):
        u = real(path)
        return type(u)(u.total, u.total - 100_000, 100_000)  # 100 kB free

    monkeypatch.setattr(runner.shutil, "disk_usage", tiny_disk)
    out = tmp_path / "s"
    with pytest.raises(runner.OutputDirError, match=r"^--out .*: 97\.7 KiB free, the runs need about [0-9.]+ (KiB|MiB)"):
        runner.run_suite(load_suite(str(KILL_SUITE)), out, jobs=1, plots=False, progress=False)
    assert not out.exists(), "no run started, nothing left"
    # The estimate is an upper bound of what the runs write.
    monkeypatch.setattr(runner.shutil, "disk_usage", real)
    res = runner.run_suite(load_suite(str(KILL_SUITE)), out, filters={"qdisc": ["pie"]}, jobs=1, plots=False, progress=False)
    written = sum(p.stat().st_size for r in res.runs for p in r.run_dir.iterdir())
    need = sum(runner.estimate_run_bytes(r.text, plot=False) for r in res.runs)
    assert written < need < 10 * written


@contextlib.contextmanager
def _tmpfs(path: Path, options: str):
    path.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="mounting a tmpfs needs root on Linux")
def test_a_tiny_filesystem_is_found_before_any_run(tmp_path):
    with _tmpfs(tmp_path / "mnt", "size=512k") as mnt:
        for args in (["suite", "run", str(KILL_SUITE), "--no-plots", "-j", "1"], ["run", str(REPO / "scenarios" / "two-cubic-pfifo.toml")]):
            p = run_cli(*args, "--out", mnt / "o")
            assert p.returncode == 2, p.stderr
            assert p.stderr.count("\n") == 1 and "free, the run" in p.stderr, p.stderr
            assert not (mnt / "o").exists(), "nothing written, the directory made for the check removed"


def test_an_unwritable_output_directory_is_found_before_any_run(tmp_path):
    ro = tmp_path / "ro"
    if os.geteuid() == 0:
        cm = _tmpfs(ro, "ro,size=64k")
    else:
        ro.mkdir()
        ro.chmod(0o555)
        cm = contextlib.nullcontext(ro)
    try:
        with cm:
            for args in (["suite", "run", str(KILL_SUITE), "--no-plots"], ["run", str(REPO / "scenarios" / "two-cubic-pfifo.toml")]):
                # the directory itself, and a directory to be made below it
                for out in (ro, ro / "o"):
                    p = run_cli(*args, "--out", out)
                    assert p.returncode == 2, p.stderr
                    assert p.stderr.count("\n") == 1 and f"--out {out}: " in p.stderr, p.stderr
                    assert "not writable" in p.stderr or "cannot create" in p.stderr, p.stderr
    finally:
        if ro.exists() and os.geteuid() != 0:
            ro.chmod(0o755)


@pytest.mark.parametrize("when", ["creating", "writing", "renaming"])
def test_a_write_stopped_at_any_step_leaves_no_temporary(tmp_path, monkeypatch, when):
    """SystemExit (a worker's SIGTERM) raised while the temporary is created, written or moved
    into place leaves neither the temporary nor a final file (the window between creating the
    file and entering the cleanup's ``try`` is gone)."""
    from aqmlab import output

    real_open, real_replace = os.open, os.replace

    def open_then_stop(path, flags, mode=0o777):
        os.close(real_open(path, flags, mode))  # the file exists when the signal lands
        raise SystemExit(143)

    def replace_stopped(src, dst):
        raise SystemExit(143)

    final = tmp_path / "summary.json"
    if when == "creating":
        monkeypatch.setattr(output.os, "open", open_then_stop)
    if when == "renaming":
        monkeypatch.setattr(output.os, "replace", replace_stopped)
    with pytest.raises(SystemExit):
        with output.atomic_path(final) as tmp:
            monkeypatch.setattr(output.os, "open", real_open)
            tmp.write_text("{}")
            if when == "writing":
                raise SystemExit(143)
    monkeypatch.setattr(output.os, "replace", real_replace)
    assert list(tmp_path.iterdir()) == []
