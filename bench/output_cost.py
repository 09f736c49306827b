"""Memory and time of a run's output side (issues 14 and 15): ``python bench/output_cost.py [rss|flows|suite|all]``.

``rss``: peak RSS (``/usr/bin/time -v``) of whole ``aqmlab run`` processes of 2 CUBIC at 50 Mbit/s
(scenarios/two-cubic-pfifo.toml) for ``--duration`` seconds and ten times that, with the series
outputs only (Parquet, CSV; ``--no-plot --no-flent --no-html``) and, with ``--all-outputs``, every
default output. The series stream out of the engine in chunks, so the two peaks should be within
10 % of each other.

``flows``: ``--flows`` CUBIC flows (default 1000) through a 1 Gbit/s fq_codel bottleneck, 20 ms,
10 s, in this process: the engine's time (summary ``wall_seconds``), the time of ``api.run``
(engine and the series' transfer), and the time to write the run directory's Parquet, manifest
and summary, then with the CSV too (``write_outputs`` without plot, flent and HTML), as wall and
CPU time, the minimum of ``--repeat`` runs, the writing's CPU time as a share of ``api.run``'s;
then the peak RSS of the same run as a whole ``aqmlab run`` process.

``suite``: ``--suite`` (default jarvinen-kojo) with ``--seeds`` (default 10: 560 runs) and
``--no-plots``: wall time and the CPU time of the main process and of the workers, per run.

Wall times on a shared machine are noisy: take the minimum of repeats, and read the CPU times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TWO_CUBIC = ROOT / "scenarios" / "two-cubic-pfifo.toml"


def aqmlab_exe() -> str:
    exe = Path(sys.executable).parent / "aqmlab"
    return str(exe) if exe.exists() else "aqmlab"


def time_v(cmd: list[str]) -> tuple[int, float]:
    """Peak RSS (kB) and elapsed wall seconds of a command, from GNU time -v."""
    out = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", out.stderr)
    wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    return rss, wall


def run_rss(scenario: Path | str, sets: list[str], extra: list[str]) -> tuple[int, float, float]:
    """(peak RSS kB, process wall s, engine wall s) of one ``aqmlab run``."""
    with tempfile.TemporaryDirectory(prefix="aqmlab-bench-") as d:
        out = Path(d) / "run"
        cmd = [aqmlab_exe(), "run", str(scenario), "--out", str(out), "-q", *extra]
        for s in sets:
            cmd += ["--set", s]
        rss, wall = time_v(cmd)
        engine = json.loads((out / "summary.json").read_text())["wall_seconds"]
    return rss, wall, engine


def bench_rss(duration: float, all_outputs: bool) -> None:
    extra = [] if all_outputs else ["--no-plot", "--no-flent", "--no-html"]
    what = "every default output" if all_outputs else "Parquet + CSV + summary (--no-plot --no-flent --no-html)"
    print(f"2 CUBIC, 50 Mbit/s, pfifo 1000 ({what}); peak RSS of the whole aqmlab run process")
    print(f"{'duration':>10} {'ticks':>9} {'peak RSS':>10} {'process':>9} {'engine':>9}")
    rows = []
    for d in (duration, 10 * duration):
        rss, wall, engine = run_rss(TWO_CUBIC, [f"duration={d:g}s"], extra)
        rows.append(rss)
        print(f"{d:>9g}s {int(d / 0.05) + 1:>9d} {rss / 1024:>8.1f}MB {wall:>8.1f}s {engine:>8.1f}s")
    print(f"10x duration / 1x: peak RSS x{rows[1] / rows[0]:.3f}")


def flows_scenario(n: int) -> str:
    return f"""name = "flows-{n}"
duration = "10s"
seed = 1
[bottleneck]
rate = "1Gbit"
qdisc = "fq_codel"
[[flows]]
cc = "cubic"
rtt = "20ms"
count = {n}
"""


def bench_flows(n: int, repeat: int) -> None:
    from aqmlab import api
    from aqmlab.output import write_outputs

    text = flows_scenario(n)
    best: dict[str, tuple[float, float]] = {}

    def keep(k: str, wall: float, cpu: float) -> None:
        w, c = best.get(k, (float("inf"), float("inf")))
        best[k] = (min(w, wall), min(c, cpu))

    rows = 0
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        r = api.run(text)
        w1, c1 = time.perf_counter(), time.process_time()
        engine = r.summary["wall_seconds"]
        keep("engine (summary wall_seconds)", engine, float("inf"))
        keep("api.run (engine + series transfer)", w1 - w0, c1 - c0)
        data = getattr(r, "series_data", None)  # (an older aqmlab: the DataFrame)
        rows = data.n_rows if data is not None else len(r.timeseries)
        for csv in (False, True):
            with tempfile.TemporaryDirectory(prefix="aqmlab-bench-") as d:
                w0, c0 = time.perf_counter(), time.process_time()
                write_outputs(r, Path(d), plot=False, csv=csv, flent=False, html=False)
                what = "Parquet, CSV, manifest, summary" if csv else "Parquet, manifest, summary"
                keep(f"write_outputs ({what})", time.perf_counter() - w0, time.process_time() - c0)
    eng = best["api.run (engine + series transfer)"][1]
    print(f"{n} CUBIC flows, 1 Gbit/s fq_codel, 20 ms, 10 s: {rows} series rows; minimum of {repeat}")
    print(f"{'':48} {'wall':>9} {'cpu':>9} {'of api.run cpu':>15}")
    for k, (w, c) in best.items():
        share = f"{100 * c / eng:>14.1f}%" if k.startswith("write") else ""
        cpu = f"{c * 1e3:>7.0f}ms" if c != float("inf") else f"{'-':>9}"
        print(f"{k:48} {w * 1e3:>7.0f}ms {cpu} {share}")
    with tempfile.TemporaryDirectory(prefix="aqmlab-bench-") as d:
        sc = Path(d) / "flows.toml"
        sc.write_text(text)
        rss, wall, engine = run_rss(sc, [], ["--no-plot", "--no-flent", "--no-html"])
        print(f"aqmlab run (--no-plot --no-flent --no-html): peak RSS {rss / 1024:.1f} MB, process {wall:.1f}s, engine {engine:.1f}s")
        rss, wall, engine = run_rss(sc, [], [])
        print(f"aqmlab run (every default output):           peak RSS {rss / 1024:.1f} MB, process {wall:.1f}s, engine {engine:.1f}s")


def bench_suite(name: str, seeds: int, jobs: int) -> None:
    """A suite without plots in a fresh output directory: CPU of the main process and of the
    workers (getrusage), wall time, CPU per run."""
    code = (
        "import resource, sys, time\n"
        "from aqmlab.cli import main\n"
        "if __name__ == '__main__':\n"
        "    sys.argv = ['aqmlab'] + sys.argv[1:]\n"
        "    t0 = time.perf_counter()\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "    print(s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime, time.perf_counter() - t0)\n"
    )
    with tempfile.TemporaryDirectory(prefix="aqmlab-bench-") as d:
        script = Path(d) / "suite_cpu.py"
        script.write_text(code)
        out = Path(d) / "out"
        args = [sys.executable, str(script), "suite", "run", name, "--seeds", str(seeds), "-j", str(jobs), "-q", "--no-plots", "--out", str(out)]
        res = subprocess.run(args, capture_output=True, text=True)
        if res.returncode != 0 or not res.stdout.strip():
            raise SystemExit(f"failed: {' '.join(args)}\n{res.stderr[-2000:]}")
        main_cpu, workers_cpu, wall = map(float, res.stdout.split()[-3:])
        runs = len(list((out / "runs").glob("*/*/summary.json")))
    print(f"{name} --seeds {seeds} --no-plots -j {jobs}: {runs} runs, wall {wall:.1f}s; CPU main process {main_cpu:.1f}s, "
          f"workers {workers_cpu:.1f}s, {1e3 * (main_cpu + workers_cpu) / max(runs, 1):.1f} ms of CPU per run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", default="all", choices=["rss", "flows", "suite", "all"])
    ap.add_argument("--suite", default="jarvinen-kojo", help="suite: the suite (default jarvinen-kojo)")
    ap.add_argument("--seeds", type=int, default=10, help="suite: seeds per cell (default 10: 560 J-K runs)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=1000.0, help="1x duration in s for rss (default 1000)")
    ap.add_argument("--all-outputs", action="store_true", help="rss: every default output too")
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if not shutil.which("/usr/bin/time"):
        raise SystemExit("needs GNU time (/usr/bin/time; Debian package 'time')")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    if a.what in ("rss", "all"):
        bench_rss(a.duration, False)
        if a.all_outputs:
            bench_rss(a.duration, True)
    if a.what in ("flows", "all"):
        bench_flows(a.flows, a.repeat)
    if a.what in ("suite", "all"):
        bench_suite(a.suite, a.seeds, a.jobs)


if __name__ == "__main__":
    main()
