"""The machine's own ceiling for N CPU-bound processes: ``python bench/cpu_ceiling.py
[--seconds S] [--repeat R] [--max-procs N]``.

Runs the same fixed amount of pure CPU work (a Python integer loop, no memory traffic, no
system calls) in 1, 2, ... N processes at once (N defaults to the CPU count) and prints, per
count: the wall time of the batch, each process's CPU time (user + sys) and the efficiency
``wall(1) / wall(N)`` (1.0 = N processes finish in the time one takes: N cores each as fast
as one alone). CPU time per process growing with N means the cores are slower when busy
together (SMT siblings on the host, frequency, a hypervisor's steal); wall above CPU means
the processes waited for a core (other load). ``steal`` is the hypervisor's stolen time
from /proc/stat during the batch, in CPU-seconds.

A sweep of N workers cannot be more efficient than this ceiling (bench/scaling.py's
"efficiency vs 1 worker" column); measure both in the same quiet minute.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time


def _work(n: int, q: "mp.Queue[tuple[float, float]]") -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    x = 0
    for i in range(n):
        x = (x + i * i) & 0xFFFF
    q.put((time.perf_counter() - t0, time.process_time() - c0))


def _steal() -> float:
    """CPU-seconds stolen by the hypervisor so far (all CPUs), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def batch(procs: int, n: int) -> tuple[float, list[float], float]:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=_work, args=(n, q)) for _ in range(procs)]
    s0 = _steal()
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    out = [q.get() for _ in ps]
    wall = time.perf_counter() - t0
    for p in ps:
        p.join()
    return wall, [c for _, c in out], _steal() - s0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="work per process, about (default 3)")
    ap.add_argument("--repeat", type=int, default=3, help="alternations; the minimum is printed (default 3)")
    ap.add_argument("--max-procs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    # calibrate: iterations per second in one process
    n0 = 2_000_000
    t0 = time.process_time()
    x = 0
    for i in range(n0):
        x = (x + i * i) & 0xFFFF
    rate = n0 / max(time.process_time() - t0, 1e-6)
    n = int(rate * a.seconds)
    counts = list(range(1, a.max_procs + 1))
    best: dict[int, tuple[float, list[float], float]] = {}
    allw: dict[int, list[float]] = {k: [] for k in counts}
    for _ in range(a.repeat):
        for k in counts:  # alternated, so slow minutes of other load hit every count
            r = batch(k, n)
            allw[k].append(r[0])
            if k not in best or r[0] < best[k][0]:
                best[k] = r
    print(f"{n:,} loop iterations per process (about {a.seconds:g} s alone); load average before: "
          f"{os.getloadavg()[0]:.2f}; minimum of {a.repeat} alternated batches")
    print("| processes | wall s (min) | wall s (all) | CPU s per process | steal s | efficiency wall(1)/wall(N) |")
    print("|---:|---:|---|---|---:|---:|")
    w1 = best[1][0]
    for k in counts:
        wall, cpus, steal = best[k]
        print(f"| {k} | {wall:.3f} | {', '.join(f'{w:.2f}' for w in allw[k])} | {', '.join(f'{c:.3f}' for c in cpus)} | "
              f"{steal:.2f} | {w1 / wall:.3f} |")


if __name__ == "__main__":
    main()
