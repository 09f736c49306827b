"""Training runs for the profile-guided build of the engine (``make pgo``, docs/performance.md,
"Session 7: the build").

``python bench/pgo_train.py`` runs, through whatever ``aqmlab._sim`` is importable (the
instrumented extension while ``make pgo`` trains), a set of engine runs meant to cover what
users run, so that no model is laid out as cold code:

* ``aqmlab-bench``'s cases (a) (50 Mbit/s, 20 ms, 2 CUBIC, fq_codel, 60 s) and the 1 Gbit/s
  fq_codel dumbbell at 10 and 1000 flows (the issue 15 targets);
* ``bench/compare_ns3.py``'s other dumbbells (b)-(e): pfifo 1000, 10 flows at 1 Gbit/s and
  10 ms, CoDel alone at 10 Mbit/s and 80 ms, 1000 flows at 20 ms (the runs the ns-3
  comparison times; held out until session 9, see docs/performance.md, "Session 9: ns-3
  ratios, PGO and the flow-count regime");
* every example scenario under ``scenarios/`` (Prague/DualPI2, CAKE, PIE, tunnels, Wi-Fi,
  video, workloads, ...);
* a grid of every congestion control (CUBIC, Reno, DCTCP, Prague, BBRv1, BBRv3) over every
  queue discipline family, 10 s at 50 Mbit/s with two flows, ECN as each needs.

``tests/golden/scenarios`` (the ``jarvinen-kojo`` and ``l4s-tests/s6`` cells) are left out on
purpose: they are the held-out check that scenarios the profile did not see are not slower.

``--quick`` runs only the first half of the grid and shortens the 1000-flow cases;
``--list`` prints the names. Every run must succeed: a scenario the engine rejects stops the
training (the grid is part of the repository and must stay valid).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))  # compare_ns3, also when this file is loaded from elsewhere (tests)

from compare_ns3 import SCENARIOS as NS3_DUMBBELLS  # noqa: E402 - needs the path above


def bench_case(duration: str, rate: str, flows: int) -> str:
    """The same scenario text as aqmlab-bench's cases (crates/aqmlab-sim/src/bin/bench.rs)."""
    return (
        f'duration = "{duration}"\n[bottleneck]\nrate = "{rate}"\nqdisc = "fq_codel"\n'
        f'[[flows]]\ncc = "cubic"\nrtt = "20ms"\ncount = {flows}\n'
    )


# (cc, ecn) pairs: each congestion control with the ECN mode it is used with.
CCS = [
    ("cubic", "off"),
    ("cubic", "rfc3168"),
    ("reno", "off"),
    ("dctcp", "l4s"),
    ("prague", "l4s"),
    ("bbr", "off"),
    ("bbr3", "l4s"),
]
QDISCS = [
    "pfifo limit 1000",
    "fq_codel",
    "codel",
    "pie",
    "red limit 400000 avpkt 1000 adaptive bandwidth 50Mbit ecn",
    "dualpi2",
    "cake bandwidth 50Mbit",
    "sfq_codel",
    "hred",
]


def grid_case(cc: str, ecn: str, qdisc: str) -> str:
    return (
        f'duration = "10s"\nseed = 3\n[bottleneck]\nrate = "50Mbit"\nqdisc = "{qdisc}"\n'
        f'[[flows]]\ncc = "{cc}"\necn = "{ecn}"\nrtt = "20ms"\ncount = 2\n'
        f'[[flows]]\ncc = "{cc}"\necn = "{ecn}"\nrtt = "60ms"\n'
    )


def training_set(quick: bool) -> list[tuple[str, str]]:
    runs = [
        ("bench a", bench_case("60s", "50Mbit", 2)),
        ("bench f10", bench_case("10s", "1Gbit", 10)),
        ("bench f1000", bench_case("3s" if quick else "10s", "1Gbit", 1000)),
    ]
    for key in "bcde":
        s = NS3_DUMBBELLS[key]
        if quick and s.flows >= 1000:
            s = dataclasses.replace(s, duration_s=3)
        runs.append((f"compare_ns3 {key}", s.toml()))
    runs += [(f"scenarios/{p.name}", p.read_text()) for p in sorted((ROOT / "scenarios").glob("*.toml"))]
    grid = [(f"grid {cc}/{ecn} {q}", grid_case(cc, ecn, q)) for cc, ecn in CCS for q in QDISCS]
    return runs + (grid[::2] if quick else grid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="half the grid, a shorter 1000-flow case")
    ap.add_argument("--list", action="store_true", help="print the runs' names and exit")
    args = ap.parse_args()
    runs = training_set(args.quick)
    if args.list:
        print("\n".join(name for name, _ in runs))
        return
    import aqmlab

    t0 = time.perf_counter()
    for name, text in runs:
        c = time.process_time()
        try:
            aqmlab.run(text)
        except Exception as e:  # noqa: BLE001 - name the run, then stop
            sys.exit(f"pgo_train: {name}: {e}")
        print(f"pgo_train: {name}: {time.process_time() - c:.2f} CPU-s", file=sys.stderr)
    print(f"pgo_train: {len(runs)} runs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
