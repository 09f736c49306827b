#!/usr/bin/env python3
"""aqmlab's `jarvinen-kojo` cells on a given stack profile beside the ns-2.35 reference
(tests/golden/ns2/jk_summary_<path>.csv): per metric, a table of medians [Q1 Q3] over seeds per
AQM and load, aqmlab | ns-2, then the rank order of the AQMs per load on each side.

    .venv/bin/python tools/ns2/compare.py --profile ns2-2013 --seeds 10
    .venv/bin/python tools/ns2/compare.py --profile linux --aqm codel hred_wq0.02 --metric sojourn_p95 sojourn_max

Runs go to --out (default out/jk-compare/<profile>) and are reused when rerun, as `aqmlab suite
run` does. Needs the aqmlab package (make setup). The ns-2 side summarises 100 seeds; aqmlab's
side as many as --seeds (its seeds are aqmlab's, so group 2's start times differ run by run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import jk  # noqa: E402

#: metric -> (title, scale, format)
METRICS = {
    "sojourn_p95": ("95th percentile queueing delay (s) (paper Table II)", 0.001, "{:.3f}"),
    "sojourn_max": ("maximum queueing delay (s)", 0.001, "{:.3f}"),
    "sojourn_p50": ("median queueing delay (s)", 0.001, "{:.3f}"),
    "spike60ms_longest_s": ("longest delay spike above 60 ms of queue (s)", 1.0, "{:.2f}"),
    "spike100ms_longest_s": ("longest delay spike above 100 ms of queue (s)", 1.0, "{:.2f}"),
    "response1_s": ("group 1 response time (s)", 1.0, "{:.2f}"),
    "response2_s": ("group 2 response time (s)", 1.0, "{:.2f}"),
    "response_jain": ("Jain's index of the groups' response times", 1.0, "{:.3f}"),
}


def run_aqmlab(profile: str, path: str, aqms: list[str], seeds: int, jobs: int, out: Path) -> dict:
    """{(aqm, n): {metric: [values over seeds]}} from aqmlab's suite runs."""
    from aqmlab.runner import run_suite
    from aqmlab.suite import load_suite

    suite = load_suite("jarvinen-kojo")
    labels = {v.label for ax in suite.axes if ax.name == "aqm" for v in ax.values}
    filters = {"path": [path], "aqm": [a for a in aqms if a in labels]}
    res = run_suite(suite, out, filters=filters, seeds=seeds, overrides=[("stack", profile)], jobs=jobs,
                    plots=False, progress=sys.stderr.isatty(), report=True)
    for run, err in res.failed:
        print(f"aqmlab run failed: {run.rel_dir}: {err}", file=sys.stderr)
    cells: dict = {}
    for rec in res.records:
        n = int(rec.cell.params["load"].split("+")[0])
        c = cells.setdefault((rec.cell.params["aqm"], n), {})
        for m in METRICS:
            v = rec.metrics.get(m)
            if v is not None:
                c.setdefault(m, []).append(float(v))
    return cells


def fmt_q(vals, scale, f) -> str:
    if not vals:
        return "-"
    q1, med, q3 = jk.quartiles(vals)
    return f"{f.format(med * scale)} [{f.format(q1 * scale)} {f.format(q3 * scale)}]"


def ranks(medians: dict[str, float]) -> list[str]:
    return [a for _, a in sorted((v, a) for a, v in medians.items())]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="ns2-2013", help="aqmlab stack profile (--set stack=...)")
    ap.add_argument("--path", default="11ms", choices=["11ms", "101ms"])
    ap.add_argument("--aqm", nargs="+", default=["codel", "sfq_codel", "pie", "pie_update60ms", "pie_thresh5pkts",
                                                 "hred_wq0.02", "hred_wq0.04"], help="the suite's aqm labels")
    ap.add_argument("--pie-ref", default="pie2013r", choices=["pie2013r", "pie"],
                    help="ns-2 rows the suite's PIE cells are compared with: pie2013r* (the paper's "
                         "behaviour, README.md 'PIE') or pie* (the 2014 code as found)")
    ap.add_argument("--metric", nargs="+", default=["sojourn_p95", "sojourn_max", "spike100ms_longest_s", "response1_s"],
                    choices=list(METRICS))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    out = a.out or REPO / "out" / "jk-compare" / a.profile
    def ref_label(aqm: str) -> str:
        return aqm.replace("pie", a.pie_ref, 1) if aqm.startswith("pie") else aqm

    rows = jk.read_csv_summary(REPO / "tests" / "golden" / "ns2" / f"jk_summary_{a.path}.csv")
    by_label = {(r["aqm"], r["n"]): r for r in rows}
    # Keyed by the suite's labels.
    ref = {(aqm, n): by_label[(ref_label(aqm), n)] for aqm in a.aqm for (_, n) in by_label if (ref_label(aqm), n) in by_label}
    sim = run_aqmlab(a.profile, a.path, a.aqm, a.seeds, a.jobs, out)
    loads = sorted({n for (_, n) in ref})
    for m in a.metric:
        title, scale, f = METRICS[m]
        print(f"\n## {title}, {a.path}: aqmlab ({a.profile}, {a.seeds} seeds) | ns-2.35 (median [Q1 Q3]; "
              f"PIE rows: {a.pie_ref}*)\n")
        print("| AQM | " + " | ".join(f"{n}+{n} aqmlab | {n}+{n} ns-2" for n in loads) + " |")
        print("|---" * (1 + 2 * len(loads)) + "|")
        for aqm in a.aqm:
            cells = []
            for n in loads:
                cells.append(fmt_q(sim.get((aqm, n), {}).get(m, []), scale, f))
                r = ref.get((aqm, n))
                cells.append("-" if r is None or r.get(f"{m}_median") is None else
                             f"{f.format(r[f'{m}_median'] * scale)} [{f.format(r[f'{m}_q1'] * scale)} {f.format(r[f'{m}_q3'] * scale)}]")
            print(f"| {aqm} | " + " | ".join(cells) + " |")
        print()
        agree = 0
        for n in loads:
            sm = {aqm: jk.quartiles(sim[(aqm, n)][m])[1] for aqm in a.aqm if sim.get((aqm, n), {}).get(m)}
            rm = {aqm: ref[(aqm, n)][f"{m}_median"] for aqm in a.aqm
                  if (aqm, n) in ref and ref[(aqm, n)].get(f"{m}_median") is not None}
            common = set(sm) & set(rm)
            rs, rr = ranks({k: sm[k] for k in common}), ranks({k: rm[k] for k in common})
            agree += rs == rr
            print(f"- {n}+{n} aqmlab: {' < '.join(rs)}")
            print(f"- {n}+{n} ns-2:   {' < '.join(rr)}{'  (same order)' if rs == rr else ''}")
        print(f"\nrank order agrees in {agree} of {len(loads)} loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
