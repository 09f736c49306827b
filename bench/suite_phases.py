"""CPU time per phase of a suite's runs, in one process: ``python bench/suite_phases.py
[--suite jarvinen-kojo] [--filter AXIS=V ...] [--seeds K] [--runs N] [--profile FILE]``.

Calls :func:`aqmlab.runner.execute_run` (what every executor's worker runs per task) on the
suite's first N planned runs, in this process, into a temporary directory, with the phases
wrapped in CPU timers (``time.process_time``: the figure that other load on the machine
disturbs least), and prints the CPU milliseconds per run of each phase:

- ``engine``: the ``_sim.run`` call;
- ``api.run rest``: the rest of ``aqmlab.run`` (spill file, summary parse, SeriesData);
- each writer (``parquet``, ...), ``summary text``, ``hash files`` (manifest.json's SHA-256s),
  ``manifest+summary write`` (both written atomically);
- ``rest``: everything else in ``execute_run`` (directories, scenario.toml, temporaries).

The first run of every phase is left out (imports, caches). ``--profile FILE`` writes a
cProfile (CPU timer) of the same loop instead of timing phases.
"""

from __future__ import annotations

import argparse
import cProfile
import contextlib
import functools
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="jarvinen-kojo")
    ap.add_argument("--filter", action="append", default=[])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=0, help="at most this many runs (default all planned)")
    ap.add_argument("--profile", default=None)
    a = ap.parse_args()

    from aqmlab import _sim, api, output, runner
    from aqmlab.suite import load_suite, parse_filters, plan_runs

    tmp = Path(tempfile.mkdtemp(prefix="aqmlab-phases."))
    try:
        suite = load_suite(a.suite)
        runs = plan_runs(suite, tmp, filters=parse_filters(a.filter), seeds=a.seeds)
        if a.runs:
            runs = runs[: a.runs + 1]
        tasks = [{"text": r.text, "run_dir": str(r.run_dir), "plot": False, "command": "bench", "run": r.rel_dir.removeprefix("runs/"),
                  "cell": r.cell.id} for r in runs]
        runner._init_worker(plots=False)
        if a.profile:
            runner.execute_run(tasks[0])
            pr = cProfile.Profile(time.process_time)
            pr.enable()
            for t in tasks[1:]:
                runner.execute_run(t)
            pr.disable()
            pr.dump_stats(a.profile)
            print(f"{len(tasks) - 1} runs profiled into {a.profile}")
            return

        acc: dict[str, float] = defaultdict(float)
        counting = [False]

        def timed(name: str, fn):
            @functools.wraps(fn)
            def wrap(*args, **kw):
                c0 = time.process_time()
                try:
                    return fn(*args, **kw)
                finally:
                    if counting[0]:
                        acc[name] += time.process_time() - c0
            return wrap

        # the engine, inside api.run
        api._sim = type("S", (), {})()  # a namespace that forwards to _sim, with run timed
        for k in dir(_sim):
            if not k.startswith("__"):
                setattr(api._sim, k, getattr(_sim, k))
        api._sim.run = timed("engine", _sim.run)
        runner.api_run = timed("aqmlab.run (all)", runner.api_run)
        for w in list(output.WRITERS.values()):
            output.WRITERS[w.name] = output.Writer(w.name, w.file, timed("writer " + w.name, w.write), w.file_for)
        output.summary_text = timed("summary text", output.summary_text)
        output.sha256_file = timed("hash files", output.sha256_file)
        output.manifest_text = timed("manifest text", output.manifest_text)
        output.atomic_write_text = timed("atomic_write_text (manifest, summary)", output.atomic_write_text)
        runner.write_outputs = timed("write_outputs (all)", output.write_outputs)
        execute = timed("execute_run (all)", runner.execute_run)

        execute(tasks[0])
        counting[0] = True
        w0, r0 = time.perf_counter(), __import__("resource").getrusage(0)
        for t in tasks[1:]:
            res = execute(t)
            if not res["ok"]:
                sys.exit(f"run failed: {res['error']}")
        wall = time.perf_counter() - w0
        r1 = __import__("resource").getrusage(0)
        n = len(tasks) - 1
        acc["api.run rest"] = acc["aqmlab.run (all)"] - acc["engine"]
        user, sys_ = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
        print(f"{n} runs of {a.suite} (filters {a.filter or 'none'}, seeds {a.seeds}); wall {wall:.2f} s, "
              f"user {user:.2f} s, sys {sys_:.2f} s")
        print("| phase | CPU ms per run |")
        print("|---|---:|")
        order = ["engine", "api.run rest", *[k for k in acc if k.startswith("writer ")], "summary text", "hash files",
                 "manifest text", "atomic_write_text (manifest, summary)", "write_outputs (all)", "execute_run (all)"]
        for k in order:
            if k in acc:
                print(f"| {k} | {1000 * acc[k] / n:.2f} |")
        print(f"| user + sys per run (getrusage) | {1000 * (user + sys_) / n:.2f} |")
        print(f"| of which sys | {1000 * sys_ / n:.2f} |")
        print(f"| minor page faults per run | {(r1.ru_minflt - r0.ru_minflt) / n:.0f} |")
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
