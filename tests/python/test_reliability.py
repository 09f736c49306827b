"""Results survive damage and kills: a run is done only when its manifest's hashes match;
workers die with the suite process; a worker killed mid-suite fails no other run; a Rust
panic is one line; temporaries of a killed write are removed."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli

TINY = ["l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie", "--set", "duration=3s", "--seeds", "2", "--no-plots", "-q"]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_damaged_results_are_redone_on_resume(tmp_path):
    out = tmp_path / "s"
    assert run_cli("suite", "run", *TINY, "--out", out).returncode == 0
    runs = sorted(out.glob("runs/*/*"))
    assert len(runs) == 4
    (runs[0] / "summary.json").write_text('{"format_version": 1, "flows": []}\n')  # bogus but valid JSON
    (runs[1] / "timeseries.parquet").write_bytes(b"")  # emptied
    (runs[2] / "manifest.json").unlink()  # no manifest: cannot be trusted
    (runs[3] / ".summary.json.x1.tmp").write_text("partial")  # an interrupted write's leftover
    p = run_cli("suite", "run", *TINY, "--out", out, "-j", "1")
    assert p.returncode == 0, p.stderr
    p = run_cli("suite", "run", *TINY[:-1], "--out", out, "-j", "1")  # not quiet: the counts
    assert "(0 run, 4 reused, 0 failed)" in p.stdout, p.stdout
    for r in runs[:3]:
        s = json.loads((r / "summary.json").read_text())
        assert s["flows"], r
    assert not list(out.glob("runs/*/*/.*.tmp")) or (runs[3] / ".summary.json.x1.tmp").exists()


def test_workers_die_with_a_killed_suite(tmp_path):
    out = tmp_path / "s"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aqmlab", "suite", "run", "l4s-tests/s6", "--filter", "classic=cubic", "--set", "duration=60s",
         "--no-plots", "-q", "-j", "2", "--out", str(out)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 120
        # Both workers busy: two runs have written their scenario.toml (the initializer ran).
        while time.monotonic() < deadline and len(list(out.glob("runs/*/*/scenario.toml"))) < 2:
            time.sleep(0.2)
        workers = [c for c in _children(proc.pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")]
        assert workers, "no worker started"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "a worker outlived the suite process"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_killed_worker_fails_no_other_run(tmp_path):
    out = tmp_path / "s"
    # Runs long enough (about half a second each) that a worker is still busy when killed.
    args = ["l4s-tests/s6", "--filter", "classic=cubic", "--set", "duration=120s", "--no-plots", "-j", "2", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "aqmlab", "suite", "run", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    killed = False
    while time.monotonic() < deadline and not killed and proc.poll() is None:
        time.sleep(0.2)
        for c in _children(proc.pid):
            if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace") and _alive(c):
                # Wait until the worker is busy with a run, then kill it.
                time.sleep(0.5)
                with contextlib.suppress(ProcessLookupError):  # it left meanwhile: try another
                    os.kill(c, signal.SIGKILL)
                    killed = True
                break
    stdout, stderr = proc.communicate(timeout=300)
    assert killed
    assert proc.returncode == 0, stderr
    assert "0 failed" in stdout, stdout
    runs = list(out.glob("runs/*/*"))
    assert len(runs) == 12 and all((r / "summary.json").is_file() for r in runs)


def test_an_engine_panic_is_one_line(monkeypatch):
    from aqmlab import api

    class PanicException(BaseException):  # pyo3's is a BaseException of this name
        pass

    def boom(*a):
        raise PanicException("index out of bounds:\n the len is 3")

    monkeypatch.setattr(api._sim, "run", boom)
    with pytest.raises(api.InternalError, match=r"^internal error: index out of bounds: the len is 3 \(a bug in the engine"):
        api.run(REPO / "scenarios" / "two-cubic-pfifo.toml")


@pytest.mark.parametrize("killers", [(0,), (1,), (0, 5)])
def test_a_pipelined_worker_that_dies_loses_exactly_its_running_run(tmp_path, monkeypatch, killers):
    """The local pool sends a worker two runs (_LocalPool.DEPTH): the one it runs and the next.
    A run that kills its worker (the test hook, as the OOM killer would) is charged the death
    whether it was the first run the worker held (the one behind it goes back uncharged) or
    the second (started once the first had answered); it is tried on one more worker, then
    fails alone. Every run is reported exactly once, no run is lost or reported twice, and a
    run never started by a dead worker is not charged. The runs' scenarios are invalid, so
    each is a quick, clean failure of its own (not a death)."""
    from aqmlab import runner

    monkeypatch.setenv(runner.KILL_HOOK_ENV, "/killer")
    tasks = [{"text": "not a scenario [", "run_dir": str(tmp_path / (f"killer{i}" if i in killers else f"r{i}")),
              "plot": False} for i in range(8)]
    done: list[tuple[int, dict]] = []
    pool = runner._LocalPool(tasks, 2, False, lambda i, res: done.append((i, res)))
    assert len(tasks) >= pool.DEPTH * pool.jobs  # pipelined from the start
    pool.run()
    assert sorted(i for i, _ in done) == list(range(8))
    for i, res in done:
        assert not res["ok"]
        if i in killers:
            assert "its worker died 2 times (killed by SIGKILL" in res["error"], res
        else:
            assert res["error"].startswith("ScenarioError"), res  # its own failure, not a death
    assert pool.attempts == [2 if i in killers else 0 for i in range(8)]
    assert pool.workers == []


def test_the_local_pool_gives_every_worker_a_run_before_any_its_second(tmp_path, monkeypatch):
    """With two runs per worker (_LocalPool.DEPTH), the first runs go one to each worker:
    otherwise a long run 0 would hold run 1 back in its worker's pipe while another worker ran
    out of work. And once the queue holds fewer runs than there are workers, a run goes only to
    a worker that holds none (the last runs wait in no busy worker's pipe)."""
    from aqmlab import runner

    log: list[tuple[str, int, int]] = []  # ("send", worker, run) / ("done", -1, run), in order

    class Recorder:
        def __init__(self, conn, k):
            self.conn, self.k = conn, k

        def send(self, msg):
            if msg is not None:
                log.append(("send", self.k, msg[0]))
            return self.conn.send(msg)

        def fileno(self):
            return self.conn.fileno()

        def __getattr__(self, name):
            return getattr(self.conn, name)

    n = 7
    tasks = [{"text": "not a scenario [", "run_dir": str(tmp_path / f"r{i}"), "plot": False} for i in range(n)]
    pool = runner._LocalPool(tasks, 2, False, lambda i, res: log.append(("done", -1, i)))
    real_spawn, spawned = pool._spawn, []

    def spawn():
        w = real_spawn()
        w[1] = Recorder(w[1], len(spawned))
        spawned.append(w)
        return w

    monkeypatch.setattr(pool, "_spawn", spawn)
    pool.run()
    sends = [(k, i) for what, k, i in log if what == "send"]
    assert sorted(i for _, i in sends) == list(range(n)) == sorted(i for what, _, i in log if what == "done")
    assert sends[0][0] != sends[1][0] and {sends[0][1], sends[1][1]} == {0, 1}
    # the runs each worker holds when a run is sent to it
    held: dict[int, set[int]] = collections.defaultdict(set)
    owner: dict[int, int] = {}
    queued = n
    for what, k, i in log:
        if what == "send":
            queued -= 1
            if held[k]:  # a second run: only while the queue kept one for every worker
                assert queued + 1 >= pool.jobs, (i, log)
            held[k].add(i)
            owner[i] = k
        else:
            held[owner[i]].discard(i)


def test_a_run_sent_to_a_worker_that_died_idle_is_not_charged(tmp_path, monkeypatch):
    """A worker that dies between runs (killed while idle, as the OOM killer may) never starts
    the run sent to it next: the send finds its pipe broken, the run goes to another worker
    uncharged (pool.attempts stays 0) and ends as its own outcome. Three runs on two workers:
    one run each, the third queued; the first worker to answer is killed and reaped before the
    pool sends it the third run."""
    from aqmlab import runner

    tasks = [{"text": "not a scenario [", "run_dir": str(tmp_path / f"r{i}"), "plot": False} for i in range(3)]
    done: list[tuple[int, dict]] = []
    pool = runner._LocalPool(tasks, 2, False, lambda i, res: done.append((i, res)))
    real_collect, killed = pool._collect, []

    def collect(w, ready, queue):
        real_collect(w, ready, queue)
        if not killed and w in pool.workers and not w[2] and queue:
            os.kill(w[0].pid, signal.SIGKILL)
            w[0].join()
            killed.append(w[0].pid)

    monkeypatch.setattr(pool, "_collect", collect)
    pool.run()
    assert killed
    assert sorted(i for i, _ in done) == [0, 1, 2]
    assert all(res["error"].startswith("ScenarioError") for _, res in done), done  # not a death
    assert pool.attempts == [0, 0, 0]
    assert pool.workers == []


def test_workers_that_die_starting_fail_their_runs_instead_of_being_started_forever(tmp_path):
    """A worker that dies before its first run reaches it (it cannot start) is charged that run,
    unlike one that died idle after answering runs: otherwise every send found a dead worker,
    put the run back uncharged and started another, forever. Every worker here exits at once
    and is reaped before the pool sends to it; both runs fail after their attempts."""
    import multiprocessing as mp

    from aqmlab import runner

    tasks = [{"text": "not a scenario [", "run_dir": str(tmp_path / f"r{i}"), "plot": False} for i in range(2)]
    done: list[tuple[int, dict]] = []
    pool = runner._LocalPool(tasks, 2, False, lambda i, res: done.append((i, res)))
    real, spawned = mp.get_context("spawn"), []

    class Reaped:
        """A worker process that has already exited (start() has nothing left to do)."""

        def __init__(self, p):
            self.p = p

        def start(self):
            pass

        def __getattr__(self, name):
            return getattr(self.p, name)

    class DyingWorkers:
        """The pool's spawn context, but its processes exit at once and are reaped before the
        pool sees them, so the pool's first send to each finds the pipe broken."""

        Pipe = staticmethod(real.Pipe)

        def Process(self, **_):
            assert len(spawned) < 20, "workers started again and again"
            p = real.Process(target=os._exit, args=(3,), daemon=True)
            p.start()
            p.join()
            spawned.append(p.pid)
            return Reaped(p)

    pool.ctx = DyingWorkers()
    pool.run()
    assert sorted(i for i, _ in done) == [0, 1]
    assert all("its worker died 2 times" in res["error"] for _, res in done), done
    assert pool.attempts == [2, 2]
    assert len(spawned) <= 2 + 2 * runner._LocalPool.ATTEMPTS


def test_the_worker_replacing_one_that_died_idle_takes_a_queued_run_at_once(tmp_path, monkeypatch):
    """The worker started when a send finds a worker dead (idle, between runs) is given the
    queued run before the pool waits for the other workers' results, not only after one of
    them answers (it sat idle for the length of a run). Three runs on two workers: run 1 is a
    real run, the others fail at once; the worker that answered run 0 is killed while the
    other still runs run 1. Whenever the pool waits, no worker is idle while a run is queued."""
    import multiprocessing.connection as mpc

    from aqmlab import runner

    bad = "not a scenario ["
    real = 'duration = "20s"\n[bottleneck]\nrate = "100Mbit"\n[[flows]]\ncc = "cubic"\nrtt = "20ms"\n'
    tasks = [{"text": t, "run_dir": str(tmp_path / f"r{i}"), "plot": False} for i, t in enumerate([bad, real, bad])]
    done: list[int] = []
    pool = runner._LocalPool(tasks, 2, False, lambda i, res: done.append(i))
    real_collect, real_wait, killed, idle_while_queued = pool._collect, mpc.wait, [], []

    def collect(w, ready, queue):
        real_collect(w, ready, queue)
        others_busy = any(x[2] for x in pool.workers if x is not w)
        if not killed and w in pool.workers and not w[2] and queue and others_busy:
            os.kill(w[0].pid, signal.SIGKILL)
            w[0].join()
            killed.append(w[0].pid)

    def wait(objects, timeout=None):
        held = sum(len(w[2]) for w in pool.workers)
        if held + len(done) < len(tasks) and any(not w[2] for w in pool.workers):
            idle_while_queued.append((held, len(done)))
        return real_wait(objects, timeout)

    monkeypatch.setattr(pool, "_collect", collect)
    monkeypatch.setattr(mpc, "wait", wait)
    pool.run()
    assert killed, "run 1 ended before run 0: nothing tested"
    assert sorted(done) == [0, 1, 2] and pool.attempts == [0, 0, 0]
    assert idle_while_queued == [], idle_while_queued
