"""Running suites: executing one run, the executors (a local pool of spawned processes, Dask),
progress, resuming, and a suite's orchestration (plan -> run what is missing -> report).

The suite model (loading suite files, the matrix, filters, the run plan) is
:mod:`aqmlab.suite`; the run-directory layout and the writers are :mod:`aqmlab.output`;
results.csv and REPORT.md are :mod:`aqmlab.report`. Imports go one way:
``output <- suite <- report <- runner``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api import run as api_run
from .output import (
    CLI_PCAP, INDEX, MANIFEST, REPORT, RESULTS, RUNS, SCENARIO, SRV_PCAP, SUMMARY, atomic_write_text, pcap_files,
    remove_temporaries, sha256_file, summary_document, write_outputs,
)
from .suite import RunSpec, Suite, SuiteError, check_runs, plan_runs

if TYPE_CHECKING:
    from . import report as rep

# report and htmlreport (statistics, csv, the report tables) are imported where a suite's
# report is written, so that `aqmlab run` (which checks its output directory with this
# module) does not load them.


def run_state(run: RunSpec, pcap: bool = False) -> tuple[str, str]:
    """Where a planned run stands on disk: ``("done", "")``, ``("new", "")`` (nothing of it
    there), ``("stale", why)`` (its scenario.toml is not the scenario this plan would run) or
    ``("damaged", why)`` (something of it is there but it is not a finished run: no
    summary.json, no manifest.json, a file whose SHA-256 is not the one manifest.json records,
    a missing capture when captures are asked for).

    A run is done only when its manifest.json lists scenario.toml and summary.json and every
    file it lists has the hash recorded there: a truncated, emptied or rewritten summary.json,
    an emptied or deleted Parquet file, a run written before manifests existed are redone."""
    d = run.run_dir
    try:
        if not d.is_dir() or not any(not p.name.startswith(".") for p in d.iterdir()):
            return "new", ""
        try:
            if (d / SCENARIO).read_text(encoding="utf-8") != run.text:
                return "stale", "its scenario.toml is not the scenario this command runs"
        except FileNotFoundError:
            return "damaged", "no scenario.toml"
        except UnicodeDecodeError:
            return "damaged", "scenario.toml is not UTF-8 text"
        if not (d / SUMMARY).is_file():
            return "damaged", "no summary.json (killed before it finished?)"
        why = manifest_problem(d)
        if why:
            return "damaged", why
        if pcap:
            missing = [f for f in (CLI_PCAP, SRV_PCAP) if not (d / f).is_file()]
            if missing:
                return "damaged", f"no {missing[0]} (captures were asked for)"
        return "done", ""
    except OSError as e:
        return "damaged", f"cannot read it ({e.strerror or e})"


def manifest_problem(run_dir: Path) -> str | None:
    """None when run_dir's manifest.json lists scenario.toml and summary.json and every file it
    lists has the SHA-256 recorded there; else what is wrong, in a few words."""
    try:
        doc = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "no manifest.json"
    except (OSError, ValueError):
        return "manifest.json is not valid JSON"
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict) or not all(isinstance(h, str) for h in files.values()):
        return "manifest.json has no file list"
    for need in (SCENARIO, SUMMARY):
        if need not in files:
            return f"manifest.json does not list {need}"
    for name, h in files.items():
        if "/" in name or name.startswith("."):
            return f"manifest.json lists a bad file name {name[:40]!r}"
        try:
            if sha256_file(run_dir / name) != h:
                return f"{name} does not match manifest.json"
        except FileNotFoundError:
            return f"{name} is missing"
    return None


def is_done(run: RunSpec, pcap: bool = False) -> bool:
    """Whether the run's files on disk are a finished run of this plan (:func:`run_state`)."""
    return run_state(run, pcap)[0] == "done"


# --------------------------------------------------------------------------------------
# Before any run: the output directory can take the results
# --------------------------------------------------------------------------------------


class OutputDirError(ValueError):
    """The output directory cannot be written, or has too little free space; one line."""


_TIME = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([a-z]*)\s*$")
_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3,
               "us": 1e-6, "usec": 1e-6, "usecs": 1e-6, "ns": 1e-9, "nsec": 1e-9, "nsecs": 1e-9}


def _seconds(v: Any, default: float) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    m = _TIME.match(str(v).lower()) if isinstance(v, str) else None
    if not m or m.group(2) not in _TIME_UNITS:
        return default
    return float(m.group(1)) * _TIME_UNITS[m.group(2)]


#: Bytes per run besides the series: scenario.toml, summary.json, manifest.json.
RUN_FIXED_BYTES = 32 * 1024
#: throughput_rtt.png (about 100 kB).
PLOT_BYTES = 160 * 1024
#: Series per endpoint or link (TCP flows have about five, a link a few more).
COLUMNS_PER_ENTITY = 8
#: Bytes per series value in the Parquet file (long format with dictionary-encoded labels;
#: about 6 measured on two-CUBIC runs).
BYTES_PER_VALUE = 8


def estimate_run_bytes(text: str, *, plot: bool = True, html: bool = False, flent: bool = False) -> int:
    """A generous estimate of the bytes one run writes (about twice to three times what
    two-CUBIC runs write): its series (duration / metrics.step points of
    :data:`COLUMNS_PER_ENTITY` series per endpoint and link, :data:`BYTES_PER_VALUE` each),
    twice more with report.html and once more with the flent file, the plot and
    :data:`RUN_FIXED_BYTES`. Captures (``--pcap``) are not estimated."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return RUN_FIXED_BYTES
    duration = _seconds(doc.get("duration"), 60.0)
    metrics = doc.get("metrics") if isinstance(doc.get("metrics"), dict) else {}
    step = max(_seconds(metrics.get("step"), 0.05), 1e-3)
    entities = 3  # bottleneck, return link, time
    for key in ("flows", "udp", "media", "probes", "workloads", "transients"):
        for e in doc.get(key, []) if isinstance(doc.get(key), list) else []:
            n = e.get("count", 1) if isinstance(e, dict) else 1
            entities += n if isinstance(n, int) and n > 0 else 1
    series = int(duration / step + 1) * entities * COLUMNS_PER_ENTITY * BYTES_PER_VALUE
    copies = 1 + 2 * int(html) + int(flent)
    return RUN_FIXED_BYTES + PLOT_BYTES * int(plot) + series * copies


def check_output_dir(out_dir: Path, need_bytes: int = 0) -> None:
    """Raises :class:`OutputDirError` unless ``out_dir`` (created if missing) takes a file
    (one is created and removed: permissions, a read-only filesystem, quotas) and its
    filesystem has ``need_bytes`` free. Called before any run starts."""
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputDirError(f"--out {out_dir}: exists and is not a directory")
    made = [p for p in [out_dir, *out_dir.parents] if not p.exists()]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputDirError(f"--out {out_dir}: cannot create it ({e.strerror or e})") from None
    try:
        try:
            fd, probe = tempfile.mkstemp(dir=out_dir, prefix=".aqmlab-write-check.", suffix=".tmp")
            try:
                os.write(fd, b"x")
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as e:
            raise OutputDirError(f"--out {out_dir}: not writable ({e.strerror or e})") from None
        if need_bytes > 0:
            free = shutil.disk_usage(out_dir).free
            if free < need_bytes:
                raise OutputDirError(
                    f"--out {out_dir}: {_size(free)} free, the runs need about {_size(need_bytes)} "
                    "(free some space, or choose another --out)"
                )
    except OutputDirError:
        for d in made:  # nothing is left behind: the directories made for the check go again
            with contextlib.suppress(OSError):
                d.rmdir()
        raise


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _remove_temporaries_below(out_dir: Path, runs: Sequence[RunSpec]) -> None:
    """Removes the ``.*.tmp`` files a killed suite left in ``out_dir`` and its run directories."""
    remove_temporaries(out_dir)
    for r in runs:
        if r.run_dir.is_dir():
            remove_temporaries(r.run_dir)


# --------------------------------------------------------------------------------------
# Executing one run (in a worker)
# --------------------------------------------------------------------------------------


def execute_run(task: Mapping[str, Any]) -> dict[str, Any]:
    """Runs one scenario and writes its files: the unit of work of the local pool (Dask sends
    them in batches, :func:`execute_batch`).

    ``task`` holds only plain values: ``text`` (scenario TOML), ``run_dir`` (absolute),
    ``plot``, ``flent`` (write the run's ``<name>.flent.gz``; default off in suites), ``html``
    (write the run's report.html, loading plotly.js from ``html_js``; default off in suites),
    ``command`` (the suite's command line, for manifest.json), ``run`` and ``cell`` (labels),
    ``pcap`` (write cli.pcap and srv.pcap).
    Order on disk: the old summary.json goes first, then scenario.toml, then the series and
    the plot, and summary.json last (atomic rename), so a killed run never looks finished.
    ``wall_seconds`` is left out of this summary.json so that the same scenario and seed give
    byte-identical files whatever the executor or the number of jobs.
    The answer: ``ok``, ``run_dir``, ``seconds``, and ``summary`` (summary.json's content,
    :func:`aqmlab.output.summary_document`) or ``error``.
    """
    run_dir = Path(task["run_dir"])
    t0 = time.perf_counter()
    _test_kill_hook(str(run_dir))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        remove_temporaries(run_dir)  # left by a run that was killed while writing
        try:
            (run_dir / SUMMARY).unlink()
        except FileNotFoundError:
            pass
        text = task["text"]
        atomic_write_text(run_dir / SCENARIO, text)
        if task.get("pcap"):
            with pcap_files(run_dir) as paths:
                result = api_run(text, pcap=paths)
        else:
            result = api_run(text)
        result.labels = {"run": task.get("run", run_dir.name), "cell": task.get("cell", run_dir.parent.name), "seed": result.summary.get("seed")}
        result.summary.pop("wall_seconds", None)
        write_outputs(
            result, run_dir, plot=bool(task.get("plot", True)), csv=False, flent=bool(task.get("flent", False)),
            html=bool(task.get("html", False)), html_js=task.get("html_js"), command=task.get("command"),
        )
        # The summary as written (plain JSON data, equal to summary.json read back): the suite
        # process makes the run's record of it instead of reading and parsing the file again
        # (0.6 ms of JSON a J-K run, on a core the workers need).
        return {"ok": True, "run_dir": str(run_dir), "seconds": time.perf_counter() - t0,
                "summary": summary_document(result.summary)}
    except Exception as e:  # noqa: BLE001 - reported per run, the suite goes on
        msg = str(e).replace("\n", " ").strip() or type(e).__name__
        return {"ok": False, "run_dir": str(run_dir), "error": f"{type(e).__name__}: {msg}", "seconds": time.perf_counter() - t0}


#: Test hook: a run whose directory path contains this environment variable's value kills
#: its own worker process (SIGKILL) when it starts, as the OOM killer would. For the tests
#: of a dead worker (tests/python/test_reliability.py); never set in normal use.
KILL_HOOK_ENV = "AQMLAB_TEST_KILL_WORKER"


def _test_kill_hook(run_dir: str) -> None:
    mark = os.environ.get(KILL_HOOK_ENV)
    if mark and mark in run_dir:
        os.kill(os.getpid(), signal.SIGKILL)


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM when the process that started it dies
    (PR_SET_PDEATHSIG), so a SIGKILLed `aqmlab suite run` leaves no worker behind; the
    worker's SIGTERM handler (:func:`_on_sigterm`) removes its temporary files on the way out.
    A watchdog thread ends the worker, cleanly or not, should that not happen within seconds
    (the engine releases the GIL while it runs, so the thread runs beside it)."""
    import ctypes
    import multiprocessing as mp
    import threading

    parent = mp.parent_process()
    if parent is None:
        return  # the CLI process itself (jobs = 1): it must outlive nothing
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError, TypeError):  # TypeError: no CDLL(None) (Windows)
        pass  # not Linux: the watchdog below
    if os.getppid() != parent.pid:
        os._exit(1)  # the parent died before the signal was armed
    ppid = parent.pid

    def watchdog() -> None:
        gone = None
        while True:
            time.sleep(0.5)
            if os.getppid() != ppid:
                if gone is None:
                    gone = time.monotonic()
                    with contextlib.suppress(OSError):
                        os.kill(os.getpid(), signal.SIGTERM)
                elif time.monotonic() - gone > 3.0:
                    os._exit(1)

    threading.Thread(target=watchdog, name="aqmlab-parent-watchdog", daemon=True).start()


def _on_sigterm(signum: int, frame: Any) -> None:
    """A worker told to stop (by the suite process, or by the kernel when that process died):
    leaving by SystemExit runs the ``finally`` blocks that remove the run's temporary files
    (the engine checks for signals once per sampling step). SIGALRM's default action ends the
    worker anyway should that take more than two seconds."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(2)
    raise SystemExit(128 + signum)


#: glibc's malloc in a process that runs a suite's runs one after another (a worker, or the
#: CLI process with -j 1; not a library caller's process: :func:`run_local`): blocks up to this size come from the heap instead of their own
#: mmap, and up to twice this much free heap is kept instead of given back at once.
#: By default glibc gives a freed block above its (dynamic) mmap threshold and the free top
#: of the heap above 128 kiB back to the kernel, so every run faulted its arrays' pages in
#: again: about 700 page faults and 3 ms of system CPU per J-K run (of about 22 ms),
#: 40 per run with these settings. A worker keeps at most this much more memory between runs.
MALLOC_KEEP_BYTES = 32 << 20


def _keep_freed_memory() -> None:
    """Sets :data:`MALLOC_KEEP_BYTES` as glibc's mmap and trim thresholds (mallopt), and turns
    :func:`aqmlab.api.release_memory` off (its ``malloc_trim`` would give the kept memory back
    after every run and writer); nothing elsewhere (another C library, or no ctypes)."""
    from . import api

    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # TypeError: no CDLL(None) (Windows)
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_MMAP_THRESHOLD, MALLOC_KEEP_BYTES)
    mallopt(M_TRIM_THRESHOLD, 2 * MALLOC_KEEP_BYTES)
    api.keep_freed_memory()


def _init_worker(plots: bool = True, keep_freed_memory: bool = True) -> None:
    """Imports matplotlib (when plotting) once per worker process; keeps freed memory for the
    next run (:func:`_keep_freed_memory`) unless told not to (a process aqmlab does not own)."""
    _die_with_parent()
    if keep_freed_memory:
        _keep_freed_memory()
    if plots:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot  # noqa: F401
    # the engine, api and output are imported with this module


def _worker_main(conn: Any, plots: bool) -> None:
    """A local pool's worker: takes ``(index, task)`` from ``conn``, sends back ``(index,
    result)``, until ``None`` or the pipe closes. Ctrl-C at a terminal reaches the whole
    process group: the worker ignores it and lets the suite process stop it (SIGTERM)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _init_worker(plots)
    # The modules' objects, imported once, out of the cyclic GC's generations: its full
    # collections during the runs need not scan them.
    gc.freeze()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        i, task = msg
        conn.send((i, execute_run(task)))


# --------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------

Callback = Callable[[int, dict[str, Any]], None]


class ExecutorUnavailable(RuntimeError):
    pass


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def run_local(tasks: list[dict[str, Any]], jobs: int, on_done: Callback, owns_process: bool = False) -> None:
    """Runs tasks in this process (jobs == 1) or on ``jobs`` spawned worker processes.

    ``owns_process``: this process is aqmlab's own (the CLI), so with one job glibc's malloc
    is tuned here for many runs (:func:`_keep_freed_memory`). Not for a library caller (a
    notebook calling :func:`run_suite`): mallopt's thresholds outlive the call, and glibc
    cannot give the mmap threshold its dynamic behaviour back. Workers are always tuned.

    Each worker holds at most two runs (:attr:`_LocalPool.DEPTH`), runs them in the order sent
    and answers them in that order, so a worker that dies (the OOM killer, a crash, a kill) is
    known to have been running the first run it holds: that run is run again on a fresh
    worker, and a run that kills two workers fails alone; the run waiting behind it goes back
    to the queue uncharged, and the other runs are not touched. A run sent to a worker that had
    already died (idle, between runs) never reached it: the send fails, and the run goes to
    another worker uncharged. The workers are plain
    processes with one pipe each (no semaphore, so no resource tracker). Leaving by any
    exception (Ctrl-C, SIGTERM) stops the workers (SIGTERM, then SIGKILL after a second),
    removes the temporary files of the runs they held, and re-raises."""
    plots = any(t.get("plot", True) for t in tasks)
    if jobs <= 1 or len(tasks) <= 1:
        _init_worker(plots, keep_freed_memory=owns_process)
        for i, t in enumerate(tasks):
            on_done(i, execute_run(t))
        return
    _LocalPool(tasks, min(jobs, len(tasks)), plots, on_done).run()


class _LocalPool:
    #: A run is tried on this many workers before it fails.
    ATTEMPTS = 2
    #: Runs a worker holds at once: the one it runs and the next, waiting in its pipe, so that
    #: it starts the next run as soon as it has sent a result instead of waiting for this
    #: process to be scheduled, read the result and send a task (on 2 cores shared by 2 busy
    #: workers that wait was a scheduling round, and more while this process wrote a record).
    #: A worker runs its runs in the order sent and answers each in that order, so when it
    #: dies the first run it holds is the one it was running: that run alone counts the
    #: death; the next was never started and goes back to the queue as it was.
    DEPTH = 2

    def __init__(self, tasks: list[dict[str, Any]], jobs: int, plots: bool, on_done: Callback) -> None:
        import multiprocessing as mp

        self.ctx = mp.get_context("spawn")
        self.tasks, self.jobs, self.plots, self.on_done = tasks, jobs, plots, on_done
        # [process, conn, deque of the task indices it holds, whether it has answered a run]
        self.workers: list[list[Any]] = []
        self.attempts = [0] * len(tasks)

    def _spawn(self) -> list[Any]:
        from collections import deque

        parent_end, child_end = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker_main, args=(child_end, self.plots), name="aqmlab-worker", daemon=True)
        p.start()
        child_end.close()
        return [p, parent_end, deque(), False]

    def run(self) -> None:
        from collections import deque
        from multiprocessing.connection import wait

        queue = deque(range(len(self.tasks)))
        # Fewer runs than workers x DEPTH: one each, so that no worker waits while another holds two.
        depth = self.DEPTH if len(self.tasks) >= self.DEPTH * self.jobs else 1
        try:
            for _ in range(self.jobs):
                self.workers.append(self._spawn())  # one by one: an interruption stops those started
            while True:
                # Round by round: every worker its first run before any its second (else the
                # first worker took runs 0 and 1, and a long run 0 held run 1 back while the
                # others ran out of work); and a second run only while the queue holds one for
                # every worker, so that the last runs wait in no busy worker's pipe while
                # another worker is idle.
                for want in range(1, depth + 1):
                    for w in list(self.workers):  # a worker found dead by a send is replaced meanwhile
                        while len(w[2]) < want and queue and (want == 1 or len(queue) >= self.jobs):
                            if not self._send(w, queue):
                                break
                busy = [w for w in self.workers if w[2]]
                if queue and len(busy) < len(self.workers):
                    # A worker started in place of one a send found dead (after this round
                    # had passed it) takes the runs queued before anything is waited for.
                    continue
                if not busy:
                    return
                ready = set(wait([w[1] for w in busy] + [w[0].sentinel for w in busy]))
                for w in busy:
                    if w[1] in ready or w[0].sentinel in ready:
                        self._collect(w, ready, queue)
        finally:
            self._stop()

    def _collect(self, w: list[Any], ready: set[Any], queue: Any) -> None:
        proc, conn, held, _ = w
        try:
            if conn.poll():
                j, res = conn.recv()
                w[3] = True
                if held and held[0] == j:
                    held.popleft()
                elif j in held:
                    held.remove(j)
                self.on_done(j, res)
                return
        except (EOFError, OSError):
            pass
        if proc.sentinel not in ready and proc.is_alive():
            return
        self._bury(w, queue)

    def _send(self, w: list[Any], queue: Any) -> bool:
        """Sends worker ``w`` the run at the queue's front. False when the send finds the worker
        dead (its pipe broken: it died idle, or while running the run it holds): the run never
        reached it, so it goes back to the queue's front uncharged, and the worker is buried
        at once (a worker that holds no run is not waited on, so nothing else would find it).
        Unless the worker never answered a run and holds none: then it died starting, and the
        run is charged as if it had killed it, so that workers that cannot start end in failed
        runs rather than in workers started again forever."""
        i = queue.popleft()
        w[2].append(i)
        try:
            w[1].send((i, self.tasks[i]))
            return True
        except OSError:
            if w[3] or len(w[2]) > 1:
                w[2].pop()
                queue.appendleft(i)
            self._bury(w, queue)
            return False

    def _bury(self, w: list[Any], queue: Any) -> None:
        """Removes dead worker ``w`` and starts another while runs are queued. It died holding
        the runs in its deque, running the first of them: that run alone is charged the death
        (the others were never started and go back to the queue's front, in order)."""
        proc, conn, held, _ = w
        proc.join(1.0)
        if proc.is_alive():  # a broken pipe to a live worker: of no use any more
            proc.kill()
            proc.join()
        conn.close()
        self.workers.remove(w)
        if held:
            i = held.popleft()
            queue.extendleft(reversed(held))
            self.attempts[i] += 1
            if self.attempts[i] < self.ATTEMPTS:
                queue.appendleft(i)
            else:
                self.on_done(i, {"ok": False, "run_dir": self.tasks[i]["run_dir"],
                                 "error": f"its worker died {self.attempts[i]} times ({_death(proc.exitcode)}; out of memory?)"})
            remove_temporaries(Path(self.tasks[i]["run_dir"]))
        if queue:
            self.workers.append(self._spawn())

    def _stop(self) -> None:
        held = [i for w in self.workers for i in w[2]]
        for p, conn, h, _ in self.workers:
            try:
                if not h and p.is_alive():
                    conn.send(None)
                elif p.is_alive():
                    p.terminate()  # SIGTERM: the worker removes its temporaries and leaves
            except (OSError, ValueError):
                pass
        _reap([(p, conn) for p, conn, _, _ in self.workers], 1.5)
        for i in held:
            remove_temporaries(Path(self.tasks[i]["run_dir"]))
        self.workers = []


def _reap(procs: Sequence[tuple[Any, Any]], grace: float) -> None:
    """Waits for worker processes that were asked to end, ``grace`` seconds for all of them,
    kills those still running, and closes their pipes (the local pool's and aqmlab's Dask
    workers)."""
    deadline = time.monotonic() + grace
    for p, conn in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
        with contextlib.suppress(OSError):
            conn.close()


#: With Dask, one task runs a batch of runs (:func:`execute_batch`): each task costs about 20 ms
#: of CPU in the client, the scheduler and the worker (messages, transitions, serialisation;
#: measured on J-K runs), as much as a short run. A batch is sized to take about this long on
#: its worker, from the seconds per run of the last batch that came back (the runs of a cell,
#: next to each other in the plan, take about as long as each other).
DASK_BATCH_SECONDS = 1.0
#: ... and to hold at most 1 / DASK_ROUNDS of the runs not yet sent per worker, so that the
#: batches shrink towards the end and the last ones end together on every worker.
DASK_ROUNDS = 4


#: Dask settings of the cluster aqmlab starts for itself (set in each of its workers,
#: :func:`_dask_worker_main`): off, Dask's sampling profiler, which takes the GIL every 10 ms to walk each
#: worker's stack for a dashboard aqmlab does not open; less often, the event loop's health
#: tick (20 ms) and the system monitor (500 ms). An idle cluster of 2 workers used 0.14 CPU-s
#: a second with Dask's defaults, 0.04 with these.
DASK_QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
              "distributed.admin.system-monitor.interval": "1s"}


def _dask_worker_main(conn: Any, host: str) -> None:
    """A worker of the Dask cluster aqmlab starts for itself (:class:`_DaskWorkers`). Started
    before the suite process has imported Dask, it imports Dask meanwhile (about 0.5 CPU-s, the
    bulk of a worker's start), then takes the scheduler's address from ``conn``, says ``"up"``
    once its Dask worker (one thread, listening on ``host``, no memory limit: ``--max-memory``
    bounds a run) has joined the scheduler, and serves until it is stopped. It dies with the
    suite process (:func:`_die_with_parent`; SIGTERM's default action: the run it was writing
    leaves temporary files, removed by the suite process or the next run of the command, as
    with Dask's own workers). Its batches tune its malloc (:func:`execute_batch`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group: the suite process stops it
    _die_with_parent()
    import asyncio

    import dask
    from dask.distributed import Worker

    try:
        address = conn.recv()
    except (EOFError, OSError):
        return
    dask.config.set(DASK_QUIET)
    # Its log (joining, a lost connection when stopped) stays off stderr, as the scheduler's:
    # a run that fails is reported as one line like any other failed run.
    logging.getLogger("distributed").setLevel(logging.CRITICAL)

    async def serve() -> None:
        async with Worker(address, nthreads=1, host=host, memory_limit=0) as worker:
            conn.send("up")
            await worker.finished()

    asyncio.run(serve())


#: aqmlab's own Dask cluster gives up replacing a worker once this many started in a row in its
#: place died before joining the scheduler (a broken install): the scheduler charges no run for
#: a worker that never joined, so without a bound a sweep would wait forever for workers that
#: cannot start. The local pool's workers that cannot start end in failed runs the same way
#: (``_LocalPool._send``).
DASK_WORKER_STARTS = 3
#: ... and once spawning a worker has failed (``OSError``) for this long.
DASK_SPAWN_RETRY_SECONDS = 30.0


@dataclass(eq=False)
class _DaskWorker:
    """One of aqmlab's own Dask worker processes (:class:`_DaskWorkers`)."""

    proc: Any
    #: The suite process's end of its pipe: the scheduler's address goes out, ``"up"`` comes back.
    conn: Any
    #: It said ``"up"``: it has joined the scheduler.
    joined: bool = False
    #: Workers started in a row in this slot that died before joining.
    failed_starts: int = 0


class _DaskWorkers:
    """The worker processes of the Dask cluster aqmlab starts for itself: started first (they
    import Dask while the suite process imports it and starts the scheduler, instead of after),
    without Dask's nanny; a thread replaces a worker that dies (the scheduler, seeing its
    connection close, sends its task elsewhere or fails it as with a nanny's restart), up to
    :data:`DASK_WORKER_STARTS` failed starts in a row (or spawns failing for
    :data:`DASK_SPAWN_RETRY_SECONDS`). Once no worker is left and none can be
    started, :attr:`lost` says why (:meth:`tell_when_lost`)."""

    def __init__(self, n: int, host: str) -> None:
        import multiprocessing as mp
        import threading

        self.ctx = mp.get_context("spawn")
        self.host = host
        self.address: str | None = None
        self.lock = threading.Lock()
        self.closing = False
        self.stopping = threading.Event()  # set first by stop_watch: ends a pause between spawns
        self.procs: list[_DaskWorker] = []
        self.wake_r, self.wake_w = self.ctx.Pipe(duplex=False)
        self.watch: Any = None  # the thread that replaces dead workers, once they are up
        #: Why the sweep has no worker left (set once by the watch), else None.
        self.lost: str | None = None
        self.on_lost: Callable[[], None] | None = None  # see :meth:`tell_when_lost`
        try:
            for _ in range(n):
                self.procs.append(self._spawn())
        except BaseException:  # interrupted, or a spawn failed: those started stop
            self.close()
            raise

    def _spawn(self, failed_starts: int = 0) -> _DaskWorker:
        parent_end, child_end = self.ctx.Pipe()
        p = self.ctx.Process(target=_dask_worker_main, args=(child_end, self.host), name="aqmlab-dask-worker", daemon=True)
        p.start()
        child_end.close()
        if self.address is not None:
            with contextlib.suppress(OSError):  # died already: the watch replaces it
                parent_end.send(self.address)
        return _DaskWorker(p, parent_end, failed_starts=failed_starts)

    def start(self, address: str, timeout: float = 120.0) -> None:
        """Gives the workers the scheduler's address and waits until each has joined it, as
        Dask's LocalCluster does; a worker that dies first (or none within ``timeout``) makes
        this raise :class:`ExecutorUnavailable`. Then watches them."""
        import threading
        from multiprocessing.connection import wait

        self.address = address
        waiting = {}
        for w in self.procs:
            with contextlib.suppress(OSError):
                w.conn.send(address)
            waiting[w.conn] = w
            waiting[w.proc.sentinel] = w
        deadline = time.monotonic() + timeout
        while not all(w.joined for w in self.procs):
            ready = wait([r for r, w in waiting.items() if not w.joined], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise ExecutorUnavailable(f"the Dask workers did not start within {timeout:.0f} s")
            for r in ready:
                w = waiting[r]
                if r is w.proc.sentinel or not w.proc.is_alive():
                    w.proc.join()
                    raise ExecutorUnavailable(f"a Dask worker died while starting ({_death(w.proc.exitcode)})")
                with contextlib.suppress(EOFError, OSError):
                    r.recv()
                    w.joined = True
        self.watch = threading.Thread(target=self._watch, name="aqmlab-dask-workers", daemon=True)
        self.watch.start()

    def _watch(self) -> None:
        from multiprocessing.connection import wait

        while True:
            with self.lock:
                if self.closing:
                    return
                by_sentinel = {w.proc.sentinel: w for w in self.procs}
                joining = {w.conn: w for w in self.procs if not w.joined and not w.conn.closed}
            ready = wait([*by_sentinel, *joining, self.wake_r])
            with self.lock:
                if self.closing:
                    return
                for r in ready:
                    if r in joining:
                        self._hear(joining[r])
                for r in ready:
                    if r in by_sentinel:
                        self._replace(by_sentinel[r])
                tell = self.on_lost if self.lost is not None else None
            if tell is not None:
                tell()
                return  # no worker left to watch

    @staticmethod
    def _hear(w: _DaskWorker) -> None:
        """Reads a starting worker's ``"up"``; at the end of its pipe (it is dying: its
        sentinel follows) the pipe is closed, so that it is not waited on again."""
        try:
            w.conn.recv()
            w.joined = True
        except (EOFError, OSError):
            w.conn.close()

    def _replace(self, w: _DaskWorker) -> None:
        """A worker in place of ``w``, which died, unless :data:`DASK_WORKER_STARTS` in a row
        died in its slot before joining. This thread must live on whatever happens: the
        workers it started die with it (``PR_SET_PDEATHSIG`` follows the thread that forked),
        so a spawn that fails (no memory, no file descriptors: likely just after the OOM
        killer struck) is tried again, with longer pauses, for
        :data:`DASK_SPAWN_RETRY_SECONDS` (the close interrupts the pauses)."""
        if not w.joined and not w.conn.closed and w.conn.poll():  # said "up" just before dying
            self._hear(w)
        w.proc.join()
        w.conn.close()
        self.procs.remove(w)
        failed = 0 if w.joined else w.failed_starts + 1
        if failed >= DASK_WORKER_STARTS:
            why = (f"{DASK_WORKER_STARTS} started in a row in place of one that died did not join the "
                   f"scheduler (the last: {_death(w.proc.exitcode)})")
        else:
            deadline, pause = time.monotonic() + DASK_SPAWN_RETRY_SECONDS, 0.25
            while True:
                try:
                    self.procs.append(self._spawn(failed))
                    return
                except OSError as e:
                    why = f"none could be started in place of one that died ({e})"
                if time.monotonic() + pause > deadline or self.stopping.wait(pause):
                    break
                pause = min(2 * pause, 4.0)
        if not self.procs:
            self.lost = f"no Dask worker left: {why}"

    def tell_when_lost(self, callback: Callable[[], None]) -> None:
        """``callback()`` once :attr:`lost` is set: from the watch thread then, or now if it
        already is."""
        with self.lock:
            self.on_lost = callback
            now = self.lost is not None
        if now:
            callback()

    def stop_watch(self) -> None:
        """Stops replacing workers that die: first step of the cluster's close, before the
        scheduler's (which the workers then see closing, quietly) and :meth:`stop`."""
        self.stopping.set()
        with self.lock:
            self.closing = True
        with contextlib.suppress(OSError):
            self.wake_w.send(None)
        if self.watch is not None:
            self.watch.join()  # before its pipe is closed

    def close(self) -> None:
        """:meth:`stop_watch`, then :meth:`stop`."""
        self.stop_watch()
        self.stop()

    def stop(self) -> None:
        """Stops the workers (SIGTERM, SIGKILL after a second); after :meth:`stop_watch`."""
        with self.lock:
            procs = [(w.proc, w.conn) for w in self.procs]
        for p, _ in procs:
            if p.is_alive():
                p.terminate()
        _reap(procs, 1.0)
        self.wake_r.close()
        self.wake_w.close()


def execute_batch(tasks: Sequence[Mapping[str, Any]], keep_freed_memory: bool = False) -> list[dict[str, Any]]:
    """Runs the runs of one Dask task one after another (:func:`execute_run` each); their
    answers in the same order. ``keep_freed_memory``: the worker is one of the cluster aqmlab
    started for itself, tuned like a local pool's worker (:func:`_keep_freed_memory`, set
    again by every batch: a worker that died is replaced by a fresh process); a worker of
    a cluster of the user's own is left as it is."""
    if keep_freed_memory:
        _keep_freed_memory()
    return [execute_run(t) for t in tasks]


def dask_batch_size(remaining: int, workers: int, run_seconds: float | None) -> int:
    """Runs in the next Dask task: enough for :data:`DASK_BATCH_SECONDS` at ``run_seconds`` a
    run (one while no run has come back), at most ``remaining / (DASK_ROUNDS x workers)``,
    at least one."""
    if run_seconds is None:
        return 1
    by_time = int(DASK_BATCH_SECONDS / max(run_seconds, 1e-6))
    by_balance = remaining // (DASK_ROUNDS * max(1, workers))
    return max(1, min(by_time, by_balance))


def _finished_since(task: Mapping[str, Any], since_ns: int) -> dict[str, Any] | None:
    """The answer to ``task`` from its files when a worker finished it after ``since_ns``
    (``time.time_ns()`` when its batch was sent), else None: its scenario.toml is the task's,
    its manifest.json holds (:func:`manifest_problem`), its captures are there when asked for,
    and its summary.json was written after the batch was sent, so that a finished run of an
    earlier command (``--force`` runs it again) is not taken for this one. A run killed while
    writing has no summary.json (written last). The summary is summary.json read back, what
    the worker would have sent (:func:`execute_run`). A file system whose clock lags the
    client's (a remote NFS server) makes the run go again: what would happen without this."""
    run_dir = Path(task["run_dir"])
    try:
        if (run_dir / SCENARIO).read_text(encoding="utf-8") != task["text"]:
            return None
        if (run_dir / SUMMARY).stat().st_mtime_ns < since_ns or manifest_problem(run_dir) is not None:
            return None
        if task.get("pcap") and not all((run_dir / f).is_file() for f in (CLI_PCAP, SRV_PCAP)):
            return None
        summary = json.loads((run_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {"ok": True, "run_dir": str(run_dir), "summary": summary}


MISSING_DASK = "the dask executor needs dask.distributed: pip install 'dask[distributed]'"


def _close_dask(client: Any, workers: _DaskWorkers | None, cluster: Any) -> None:
    """Closes what :func:`run_dask` opened, in this order: the client; the watch that replaces
    aqmlab's workers; the scheduler, while its log is still silenced (``silence_logs``
    holds until the cluster's close ends), so that its workers' connections close in order and
    nothing reaches stderr (killed first, they left the scheduler a ``CommClosedError`` traceback
    to log once its log was back: the kill test's one line of stderr failed 1 time in 8);
    then the workers themselves."""
    if client is not None:
        client.close()
    if workers is not None:
        workers.stop_watch()
    if cluster is not None:
        cluster.close()
    if workers is not None:
        workers.stop()


def run_dask(tasks: list[dict[str, Any]], jobs: int, on_done: Callback, address: str | None, host: str = "127.0.0.1") -> None:
    """Runs tasks on a Dask cluster (``address``), or a local one with ``jobs`` workers whose
    scheduler and workers listen on ``host`` only (loopback unless asked otherwise).

    The runs go in batches, one Dask task each (:func:`dask_batch_size`), answered run by run
    when their task comes back. At most two tasks per worker thread are out at once (one
    running, one queued on the scheduler), so each batch is sized when a worker is about to
    need it, from the threads the cluster has then (a cluster of the user's own is asked again
    when a batch comes back, at most once a second: one that grows gets more tasks). A batch
    whose worker died on every attempt (``KilledWorker``) is the verdict on none of its runs:
    those whose files a worker finished meanwhile are answered from them
    (:func:`_finished_since`), the others go again one task each, so that a run that kills its
    workers fails alone and the others finish. Any other failure of a task (a lost scheduler, aqmlab missing on a remote
    worker) fails each of its runs with that one line, as a task of one run did: such a task
    may still be running, and a second one writing the same run directories would race it."""
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        raise ExecutorUnavailable(MISSING_DASK)
    from collections import deque
    from concurrent.futures import CancelledError

    # Started before this process imports Dask: their imports run beside its own.
    workers = None if address else _DaskWorkers(max(1, jobs), host)
    cluster = client = None
    try:
        try:
            from dask.distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise ExecutorUnavailable(MISSING_DASK) from None
        if address:
            client = Client(address)
        else:
            # Bound to loopback: the cluster aqmlab starts for itself accepts no outside
            # connection. One task per worker at a time (worker-saturation 1.0), so that a
            # worker that dies takes only its own task; that task is tried on a fresh worker
            # once more (allowed-failures 1) and then fails (a batch's runs then go one task
            # each). The scheduler runs here, the workers are :class:`_DaskWorkers`.
            import dask

            with dask.config.set({"distributed.scheduler.worker-saturation": 1.0, "distributed.scheduler.allowed-failures": 1,
                                  **DASK_QUIET}):
                # Its log (a lost worker, a rescheduled run) stays off stderr: a run that
                # fails is reported as one line like any other failed run.
                cluster = LocalCluster(n_workers=0, processes=True, dashboard_address=None, host=host, silence_logs=logging.CRITICAL)
            assert workers is not None
            workers.start(cluster.scheduler_address)
            client = Client(cluster)
    except BaseException:
        _close_dask(client, workers, cluster)
        raise
    import threading

    out: dict[Any, tuple[list[int], int]] = {}  # future -> the runs of its task, when it was submitted (time.time_ns())
    left: list[int] = []  # failed runs, whose temporaries the owned cluster's close frees
    alone: deque[int] = deque()  # runs of a batch whose workers died, one task each
    # Held while a task is sent, and by the watch of aqmlab's workers when none is left: it
    # cancels every task sent (no worker would run them), which wakes the loop below; a task
    # sent after that would wait forever, so none is.
    sending = threading.Lock()

    def cancel_sent() -> None:
        with sending:
            futures = list(out)
        with contextlib.suppress(Exception):  # the client closing meanwhile
            client.cancel(futures)

    try:
        if workers is not None:
            workers.tell_when_lost(cancel_sent)
        fresh = deque(range(len(tasks)))  # not sent yet, in plan order
        pending = as_completed()
        run_seconds: float | None = None
        threads, counted = max(1, jobs), -1.0

        def send() -> None:
            nonlocal threads, counted
            if address and time.monotonic() - counted > 1.0:
                # A scheduler that does not answer now keeps the last count: the answers of
                # the batch just back must still be handed on.
                with contextlib.suppress(OSError, TimeoutError):
                    threads = max(1, sum(client.nthreads().values()))
                counted = time.monotonic()
            while (fresh or alone) and len(out) < 2 * threads:
                with sending:
                    if workers is not None and workers.lost is not None:
                        return
                    if alone:
                        batch = [alone.popleft()]
                    else:
                        n = dask_batch_size(len(fresh), threads, run_seconds)
                        batch = [fresh.popleft() for _ in range(min(n, len(fresh)))]
                    f = client.submit(execute_batch, [tasks[i] for i in batch], keep_freed_memory=cluster is not None, pure=False)
                    out[f] = batch, time.time_ns()
                pending.add(f)

        send()
        while out:
            f = next(pending)
            batch, since = out[f]
            try:
                # Until its result is here, a task stays in `out`: a result lost with the
                # worker that held it makes the task run again, so it must stay cancellable.
                results = f.result()
            except Exception as e:  # noqa: BLE001
                with sending:
                    del out[f]
                killed = type(e).__name__ == "KilledWorker"
                cancelled = isinstance(e, CancelledError)  # by cancel_sent: no worker left
                if killed and len(batch) > 1 or cancelled:
                    # The runs its workers finished before dying are answered from their files;
                    # the others go again one task each (or, no worker being left, fail below).
                    finished = {i: _finished_since(tasks[i], since) for i in batch}
                    alone.extend(i for i in batch if finished[i] is None)
                    send()
                    for i in batch:
                        if finished[i] is not None:
                            on_done(i, finished[i])
                    continue
                if killed:
                    msg = "its Dask worker died on every attempt (killed, or out of memory?)"
                else:
                    msg = "dask task failed: " + (" ".join(str(e).split()) or type(e).__name__)
                results = [{"ok": False, "run_dir": tasks[i]["run_dir"], "error": msg} for i in batch]
            else:
                with sending:
                    del out[f]
                run_seconds = sum(r.get("seconds", 0.0) for r in results) / len(results)
            send()  # before the answers are handled: the workers need their next batch now
            for i, res in zip(batch, results, strict=True):
                on_done(i, res)
                if not res["ok"]:
                    left.append(i)
        lost = workers.lost if workers is not None else None
        while lost is not None and (fresh or alone):  # never sent: no worker is left to run them
            i = (alone or fresh).popleft()
            on_done(i, {"ok": False, "run_dir": tasks[i]["run_dir"], "error": lost})
            left.append(i)
    finally:
        _close_dask(client, workers, cluster)
        if cluster is not None:
            # Its workers are gone now: the runs they held (the suite interrupted), died in or
            # were to run again leave no temporary files, as with the local pool. A cluster of the user's own
            # may still be writing: its leftovers go at the next run of the command.
            for i in [*left, *alone, *(i for batch, _ in out.values() for i in batch)]:
                remove_temporaries(Path(tasks[i]["run_dir"]))


# --------------------------------------------------------------------------------------
# Running a suite
# --------------------------------------------------------------------------------------


#: ``suite run`` without --plots/--no-plots plots each run only up to this many runs (a plot
#: costs about as much as a short run; J-K's 5,600 plots took 12 of its 15 minutes).
AUTO_PLOTS_MAX_RUNS = 200


@dataclass
class SuiteOutcome:
    suite: Suite
    out_dir: Path
    runs: list[RunSpec]
    ran: int
    reused: int
    failed: list[tuple[RunSpec, str]]
    seconds: float
    records: list[rep.Record] = field(default_factory=list)
    #: Runs found damaged or partial (not finished, yet something of them on disk) and run again.
    damaged: list[RunSpec] = field(default_factory=list)


#: With Dask, run_suite freezes the records it has loaded (gc.freeze) after a collection, once
#: every this many records (see there).
DASK_FREEZE_EVERY = 32


def run_suite(
    suite: Suite,
    out_dir: Path,
    *,
    filters: Mapping[str, Sequence[str]] | None = None,
    seeds: int | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
    jobs: int = 1,
    plots: bool | None = True,
    flent: bool = False,
    pcap: bool = False,
    html: bool = False,
    executor: str = "local",
    dask_address: str | None = None,
    dask_host: str = "127.0.0.1",
    force: bool = False,
    progress: bool = True,
    report: bool = True,
    command: str | None = None,
    owns_process: bool = False,
) -> SuiteOutcome:
    """Runs the suite's missing runs, then writes results.csv, REPORT.md and index.html (REPORT.md
    as HTML with links to every run's files) into ``out_dir``. ``html``: every run also writes
    report.html, which loads the one plotly.min.js written into ``out_dir``. ``plots`` None:
    plot each run when the suite has at most :data:`AUTO_PLOTS_MAX_RUNS` runs.

    Every cell is checked before any run starts. Run directories are absolute paths, so a
    worker in another directory (Dask) writes where the report reads; a run whose
    summary.json is then not found there counts as failed (Dask workers need a filesystem
    shared with this process: docs/suites.md). ``owns_process``: the caller is aqmlab's CLI
    (:func:`run_local`); a library caller leaves it False.
    """
    from . import htmlreport
    from . import report as rep

    out_dir = out_dir.resolve()
    runs = plan_runs(suite, out_dir, filters=filters, seeds=seeds, overrides=overrides)
    check_runs(runs)
    if plots is None:
        plots = len(runs) <= AUTO_PLOTS_MAX_RUNS
        if not plots and progress:
            sys.stderr.write(
                f"aqmlab: {len(runs)} runs > {AUTO_PLOTS_MAX_RUNS}: no per-run throughput_rtt.png (--plots writes them; "
                "`aqmlab plot RUN_DIR` draws one later)\n"
            )
    states = [("new", "") if force else run_state(r, pcap) for r in runs]
    todo = [r for r, (st, _) in zip(runs, states) if st != "done"]
    damaged = [(r, why) for r, (st, why) in zip(runs, states) if st == "damaged"]
    reused = len(runs) - len(todo)
    if damaged and progress:
        for r, why in damaged[:5]:
            sys.stderr.write(f"aqmlab: {r.rel_dir}: damaged ({why}): running it again\n")
        if len(damaged) > 5:
            sys.stderr.write(f"aqmlab: ... and {len(damaged) - 5} more damaged runs: running them again\n")
    failed: list[tuple[RunSpec, str]] = []
    t0 = time.perf_counter()
    tasks = [
        {"text": r.text, "run_dir": str(r.run_dir), "plot": plots, "flent": flent, "command": command,
         "run": r.rel_dir.removeprefix("runs/"), "cell": r.cell.id, "pcap": pcap, "html": html,
         "html_js": "../" * (r.rel_dir.count("/") + 1) + htmlreport.PLOTLY_JS}
        for r in todo
    ]

    # Once per cell: the runs of a cell differ only in their seed (parsing each run's TOML
    # took 14 s of J-K's 5,600 runs before any run started).
    per_cell: dict[str, int] = {}
    for r in todo:
        if r.cell.id not in per_cell:
            per_cell[r.cell.id] = estimate_run_bytes(r.text, plot=bool(plots), html=html, flent=flent)
    need = sum(per_cell[r.cell.id] for r in todo)
    check_output_dir(out_dir, need)
    _remove_temporaries_below(out_dir, runs)
    if html:
        atomic_write_text(out_dir / htmlreport.PLOTLY_JS, htmlreport.plotly_js())
    prog = _Progress(suite.name, len(runs), reused, enabled=progress)
    # The report's record of each run that finishes, read while the other runs go on (J-K's
    # 5,600 summaries took 4 s to read after the last run, with the workers idle).
    loaded: dict[int, rep.Record] = {}
    # Not when the caller froze objects of its own, nor when the runs run in this process
    # (run_local with one job or one task): a freeze after a run would also take that run's
    # uncollected garbage (a closed figure's reference cycles) out of the collector until the
    # report is written, so the process would grow with every run.
    in_process = executor == "local" and not dask_address and (jobs <= 1 or len(tasks) <= 1)
    freeze = report and not in_process and gc.get_freeze_count() == 0
    # Dask's client runs in this process and leaves cyclic garbage behind as results come in
    # (about 55 objects a run; frozen with the records, 300,000 objects over J-K's 5,600 runs,
    # held until the report). With Dask, every DASK_FREEZE_EVERY records: a collection (of what
    # is not frozen yet: about 25 ms under load, 0.8 ms a run), then the freeze. The local pool
    # leaves almost none (about 150 objects after 224 runs): each record is frozen as it comes.
    on_dask = executor == "dask" or bool(dask_address)
    freeze_every = DASK_FREEZE_EVERY if on_dask else 1
    try:
        with prog:

            # pyplot for the report's figures is imported while the workers run: with Dask once
            # the first run is back, not while the cluster starts (its start, which this process
            # drives, took 0.5-1 s longer: the import thread held the GIL); with the local pool
            # at once, while its workers start.
            import_plotting = bool(tasks and report and on_dask)

            def on_done(i: int, res: dict[str, Any]) -> None:
                nonlocal import_plotting
                if import_plotting:
                    import_plotting = False
                    _import_report_plotting_meanwhile(suite)
                if res.get("ok") and not todo[i].summary_path.is_file():
                    res = {"ok": False, "error": f"the worker reported success but {todo[i].summary_path} does not exist "
                           "(do the workers share this filesystem?)"}
                if res.get("ok"):
                    if report:
                        try:
                            record = rep.record_of_summary(todo[i], res["summary"])
                        except Exception:  # noqa: BLE001 - read with the others, which reports it
                            record = None
                        if record is not None:
                            loaded[i] = record
                            if freeze:
                                # The records live until the report is written: out of the cyclic
                                # GC's generations, so that its collections (every few records: a
                                # summary is about a thousand lists) do not scan them again and again.
                                if freeze_every == 1:
                                    gc.freeze()
                                elif len(loaded) % freeze_every == 0:
                                    gc.collect()
                                    gc.freeze()
                if not res.get("ok"):
                    failed.append((todo[i], str(res.get("error"))))
                prog.advance(ok=bool(res.get("ok")))

            if tasks and report and jobs > 1 and not on_dask:
                _import_report_plotting_meanwhile(suite)
            if tasks:
                if on_dask:
                    run_dask(tasks, jobs, on_done, dask_address, host=dask_host)
                elif executor == "local":
                    run_local(tasks, jobs, on_done, owns_process=owns_process)
                else:
                    raise SuiteError(f"--executor {executor}: expected local or dask")
        failed.sort(key=lambda f: runs.index(f[0]))
        outcome = SuiteOutcome(suite, out_dir, runs, len(todo) - len(failed), reused, failed, time.perf_counter() - t0,
                               damaged=[r for r, _ in damaged])
        if report:
            done = {id(todo[i]): rec for i, rec in loaded.items()}
            outcome.records = [done.get(id(r)) or rep.load_record(r) for r in runs]
            rep.write_results_csv(outcome.records, suite, out_dir / RESULTS)
            rep.write_report(outcome, out_dir / REPORT, command=command)
            write_index(outcome, command=command)
        return outcome
    finally:
        if freeze:
            gc.unfreeze()


def _import_report_plotting_meanwhile(suite: Suite) -> None:
    """Imports matplotlib's pyplot (about 1 s of CPU) in a thread while the workers run, when
    the suite's report draws a figure (a ``cdf`` table): after the last run this process
    would import it alone, with the workers idle. The import system's locks make the report's
    own ``import matplotlib.pyplot`` wait for this one; the workers hold their next run in
    their pipe (``_LocalPool.DEPTH``), so they do not wait for this process meanwhile."""
    if not any(t.get("kind") == "cdf" for t in suite.tables) or "matplotlib.pyplot" in sys.modules:
        return
    import threading

    def imp() -> None:
        with contextlib.suppress(Exception):
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401

    threading.Thread(target=imp, name="aqmlab-import-pyplot", daemon=True).start()


def write_index(outcome: SuiteOutcome, command: str | None = None) -> None:
    """The suite's index.html: REPORT.md as HTML, links to the suite's files and every run's."""
    from . import htmlreport
    from . import report as rep

    out_dir = outcome.out_dir
    runs = []
    for r in outcome.runs:
        # scandir: the directory's entries know their type, so listing a run's files costs no
        # stat per file (22,400 of them for J-K's 5,600 runs, after the last run).
        try:
            with os.scandir(r.run_dir) as entries:
                files = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_file())
        except (FileNotFoundError, NotADirectoryError):
            continue
        runs.append((r.rel_dir, files))
    top = [f for f in (REPORT, RESULTS, htmlreport.PLOTLY_JS) if (out_dir / f).is_file()]
    md = (out_dir / REPORT).read_text(encoding="utf-8") if (out_dir / REPORT).is_file() else rep.report_markdown(outcome, command)
    atomic_write_text(out_dir / INDEX, htmlreport.suite_index(f"{outcome.suite.title} ({outcome.suite.name})", md, runs, top))


class _Progress:
    """A rich progress bar on stderr (a plain final line when stderr is not a terminal)."""

    def __init__(self, name: str, total: int, done: int, enabled: bool) -> None:
        self.enabled = enabled
        self.total, self.done, self.failed = total, done, 0
        self.name = name
        self._p = None

    def __enter__(self) -> "_Progress":
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._p = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._p.start()
            self._task = self._p.add_task(self.name, total=self.total, completed=self.done, failed="")
        return self

    def advance(self, ok: bool) -> None:
        self.done += 1
        if not ok:
            self.failed += 1
        if self._p is not None:
            self._p.update(self._task, advance=1, failed=f"[red]{self.failed} failed" if self.failed else "")

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()
