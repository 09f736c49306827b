"""Per-plot time of the per-run throughput_rtt.png: ``python bench/plot_time.py RUN_DIR [OLD_PLOT.py] [-n N]``.

Loads a finished run (``aqmlab.load``), draws its plot N times and prints the median wall and CPU
time per plot; with OLD_PLOT.py (a plot.py of another commit, e.g. ``git show REV:python/aqmlab/plot.py``)
it times that module's ``plot_throughput_rtt`` on the same run too. CPU time is the steadier
figure on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=True)
import matplotlib.pyplot  # noqa: E402,F401  (imported once, as a suite worker does)

import aqmlab  # noqa: E402
from aqmlab import plot as new_plot  # noqa: E402


def _load_module(path: Path):
    src = path.read_text().replace("from .api import", "from aqmlab.api import")
    spec = importlib.util.spec_from_loader("old_plot", loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod


def _time(fn, result, n: int) -> tuple[float, float]:
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as d:
        fn(result, Path(d) / "warm.png")
        for i in range(n):
            w, c = time.perf_counter(), time.process_time()
            fn(result, Path(d) / f"{i}.png")
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("old", type=Path, nargs="?")
    ap.add_argument("-n", type=int, default=10)
    a = ap.parse_args()
    r = aqmlab.load(a.run_dir)
    print(f"{a.run_dir}: {len(r.timeseries)} rows, {len(r.flows)} flows, {len(r.units)} series")
    if a.old:
        w, c = _time(_load_module(a.old).plot_throughput_rtt, r, a.n)
        print(f"old ({a.old}): {w * 1e3:.0f} ms wall, {c * 1e3:.0f} ms CPU per plot (median of {a.n})")
    w, c = _time(new_plot.plot_throughput_rtt, r, a.n)
    print(f"new (aqmlab.plot): {w * 1e3:.0f} ms wall, {c * 1e3:.0f} ms CPU per plot (median of {a.n})")


if __name__ == "__main__":
    sys.exit(main())
