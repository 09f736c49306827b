"""Running suites: executing one run, the executors (a local pool of spawned processes, Dask),
progress, resuming, and a suite's orchestration (plan -> run what is missing -> report).

The suite model (loading suite files, the matrix, filters, the run plan) is
:mod:`aqmlab.suite`; the run-directory layout and the writers are :mod:`aqmlab.output`;
results.csv and REPORT.md are :mod:`aqmlab.report`. Imports go one way:
``output <- suite <- report <- runner``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import htmlreport
from . import report as rep
from .api import run as api_run
from .output import (
    CLI_PCAP, INDEX, REPORT, RESULTS, RUNS, SCENARIO, SRV_PCAP, SUMMARY, atomic_write_text, manifest_matches, pcap_files,
    remove_temporaries, write_outputs,
)
from .suite import RunSpec, Suite, SuiteError, check_runs, plan_runs


def is_done(run: RunSpec, pcap: bool = False) -> bool:
    """A run is done when its summary.json exists (written last, atomically), its
    scenario.toml is the scenario this plan would run (else the results are stale), when
    captures are asked for its cli.pcap and srv.pcap exist, and every file its manifest.json
    lists has the hash recorded there (else it was damaged: a truncated summary, an emptied
    Parquet file). A run written before manifests existed (no manifest.json) is redone."""
    try:
        if not run.summary_path.is_file():
            return False
        if pcap and not all((run.run_dir / f).is_file() for f in (CLI_PCAP, SRV_PCAP)):
            return False
        if (run.run_dir / SCENARIO).read_text(encoding="utf-8") != run.text:
            return False
        return manifest_matches(run.run_dir)
    except OSError:
        return False


# --------------------------------------------------------------------------------------
# Executing one run (in a worker)
# --------------------------------------------------------------------------------------


def execute_run(task: Mapping[str, Any]) -> dict[str, Any]:
    """Runs one scenario and writes its files; the unit of work sent to every executor.

    ``task`` holds only plain values: ``text`` (scenario TOML), ``run_dir`` (absolute),
    ``plot``, ``flent`` (write the run's ``<name>.flent.gz``; default off in suites), ``html``
    (write the run's report.html, loading plotly.js from ``html_js``; default off in suites),
    ``command`` (the suite's command line, for manifest.json), ``run`` and ``cell`` (labels),
    ``pcap`` (write cli.pcap and srv.pcap).
    Order on disk: the old summary.json goes first, then scenario.toml, then the series and
    the plot, and summary.json last (atomic rename), so a killed run never looks finished.
    ``wall_seconds`` is left out of this summary.json so that the same scenario and seed give
    byte-identical files whatever the executor or the number of jobs.
    """
    run_dir = Path(task["run_dir"])
    t0 = time.perf_counter()
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
        return {"ok": True, "run_dir": str(run_dir), "seconds": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - reported per run, the suite goes on
        msg = str(e).replace("\n", " ").strip() or type(e).__name__
        return {"ok": False, "run_dir": str(run_dir), "error": f"{type(e).__name__}: {msg}", "seconds": 0.0}


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the process that started it dies
    (PR_SET_PDEATHSIG), so a SIGKILLed `aqmlab suite run` leaves no worker behind."""
    import ctypes
    import multiprocessing as mp
    import os
    import signal

    parent = mp.parent_process()
    if parent is None:
        return  # the CLI process itself (jobs = 1): it must outlive nothing
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return  # not Linux: workers end when their pipes close
    if os.getppid() != parent.pid:
        os._exit(1)  # the parent died before the signal was armed


def _init_worker(plots: bool = True) -> None:
    """Imports matplotlib (when plotting) once per worker process."""
    _die_with_parent()
    if plots:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot  # noqa: F401
    # the engine, api and output are imported with this module


# --------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------

Callback = Callable[[int, dict[str, Any]], None]


class ExecutorUnavailable(RuntimeError):
    pass


def run_local(tasks: list[dict[str, Any]], jobs: int, on_done: Callback) -> None:
    """Runs tasks in this process (jobs == 1) or a pool of ``jobs`` spawned worker processes."""
    plots = any(t.get("plot", True) for t in tasks)
    if jobs <= 1 or len(tasks) <= 1:
        _init_worker(plots)
        for i, t in enumerate(tasks):
            on_done(i, execute_run(t))
        return
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("spawn")
    attempts = [0] * len(tasks)
    todo = list(range(len(tasks)))
    while todo:
        # A worker that dies (OOM killer, a crash) breaks the whole pool: the runs it took
        # down with it are run again on a fresh pool, and a run that breaks two pools fails.
        retry: list[int] = []
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx, initializer=_init_worker, initargs=(plots,)) as pool:
            futures = {pool.submit(execute_run, tasks[i]): i for i in todo}
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        i = futures[f]
                        try:
                            res = f.result()
                        except BrokenProcessPool:
                            attempts[i] += 1
                            if attempts[i] < 2:
                                retry.append(i)
                                continue
                            res = {"ok": False, "run_dir": tasks[i]["run_dir"], "error": "its worker died twice (killed, or out of memory?)"}
                        except Exception as e:  # noqa: BLE001 - an error outside execute_run
                            res = {"ok": False, "run_dir": tasks[i]["run_dir"], "error": f"worker failed: {e}"}
                        on_done(i, res)
            except BaseException:
                for f in pending:
                    f.cancel()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        todo = sorted(retry)


def run_dask(tasks: list[dict[str, Any]], jobs: int, on_done: Callback, address: str | None) -> None:
    """Runs tasks on a Dask cluster (``address``), or a local one with ``jobs`` workers."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ExecutorUnavailable(
            "the dask executor needs dask.distributed: pip install 'dask[distributed]'"
        ) from None
    cluster = None
    if address:
        client = Client(address)
    else:
        # Bound to loopback: the cluster aqmlab starts for itself accepts no outside connection.
        cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1")
        client = Client(cluster)
    try:
        futures = client.map(execute_run, tasks, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for f in as_completed(futures):
            i = index[f.key]
            try:
                res = f.result()
            except Exception as e:  # noqa: BLE001
                res = {"ok": False, "run_dir": tasks[i]["run_dir"], "error": f"dask task failed: {e}"}
            on_done(i, res)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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
    force: bool = False,
    progress: bool = True,
    report: bool = True,
    command: str | None = None,
) -> SuiteOutcome:
    """Runs the suite's missing runs, then writes results.csv, REPORT.md and index.html (REPORT.md
    as HTML with links to every run's files) into ``out_dir``. ``html``: every run also writes
    report.html, which loads the one plotly.min.js written into ``out_dir``. ``plots`` None:
    plot each run when the suite has at most :data:`AUTO_PLOTS_MAX_RUNS` runs.

    Every cell is checked before any run starts. Run directories are absolute paths, so a
    worker in another directory (Dask) writes where the report reads; a run whose
    summary.json is then not found there counts as failed (Dask workers need a filesystem
    shared with this process: docs/suites.md).
    """
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
    todo = [r for r in runs if force or not is_done(r, pcap)]
    reused = len(runs) - len(todo)
    failed: list[tuple[RunSpec, str]] = []
    t0 = time.perf_counter()
    tasks = [
        {"text": r.text, "run_dir": str(r.run_dir), "plot": plots, "flent": flent, "command": command,
         "run": r.rel_dir.removeprefix("runs/"), "cell": r.cell.id, "pcap": pcap, "html": html,
         "html_js": "../" * (r.rel_dir.count("/") + 1) + htmlreport.PLOTLY_JS}
        for r in todo
    ]

    out_dir.mkdir(parents=True, exist_ok=True)
    if html:
        atomic_write_text(out_dir / htmlreport.PLOTLY_JS, htmlreport.plotly_js())
    prog = _Progress(suite.name, len(runs), reused, enabled=progress)
    with prog:

        def on_done(i: int, res: dict[str, Any]) -> None:
            if res.get("ok") and not todo[i].summary_path.is_file():
                res = {"ok": False, "error": f"the worker reported success but {todo[i].summary_path} does not exist "
                       "(do the workers share this filesystem?)"}
            if not res.get("ok"):
                failed.append((todo[i], str(res.get("error"))))
            prog.advance(ok=bool(res.get("ok")))

        if tasks:
            if executor == "dask" or dask_address:
                run_dask(tasks, jobs, on_done, dask_address)
            elif executor == "local":
                run_local(tasks, jobs, on_done)
            else:
                raise SuiteError(f"--executor {executor}: expected local or dask")
    failed.sort(key=lambda f: runs.index(f[0]))
    outcome = SuiteOutcome(suite, out_dir, runs, len(todo) - len(failed), reused, failed, time.perf_counter() - t0)
    if report:
        outcome.records = rep.load_records(runs)
        rep.write_results_csv(outcome.records, suite, out_dir / RESULTS)
        rep.write_report(outcome, out_dir / REPORT, command=command)
        write_index(outcome, command=command)
    return outcome


def write_index(outcome: SuiteOutcome, command: str | None = None) -> None:
    """The suite's index.html: REPORT.md as HTML, links to the suite's files and every run's."""
    out_dir = outcome.out_dir
    runs = []
    for r in outcome.runs:
        if r.run_dir.is_dir():
            files = sorted(p.name for p in r.run_dir.iterdir() if p.is_file() and not p.name.startswith("."))
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
