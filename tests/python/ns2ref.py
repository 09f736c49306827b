"""Loader for the ns-2.35 reference fixtures of the Järvinen & Kojo study (tests/golden/ns2/,
recorded by tools/ns2/jk.py; format in tools/ns2/README.md), for the `ns2-2013` profile's tests.

    from ns2ref import runs, summary, cell, quartiles
    rows = runs("11ms")                          # every per-seed row, numbers parsed
    hred = cell("hred_wq0.02", 4, "11ms")        # the per-seed rows of one cell (seed order)
    s = summary("11ms")[("hred_wq0.02", 4)]      # Q1/median/Q3 over all recorded seeds
    s["sojourn_p95_median"], s["seeds"]
    rank_order("sojourn_p95", 4)                 # suite AQM labels by ns-2's median, PIE -> pie2013r*

Metric names are those of aqmlab.report.run_metrics (sojourn_* in ms, spike*_s, response*_s,
response_jain); AQM labels are the `jarvinen-kojo` suite's `aqm` axis labels plus `droptail`.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "golden" / "ns2"
JK_PY = REPO / "tools" / "ns2" / "jk.py"


@functools.cache
def jk():
    """tools/ns2/jk.py as a module (the recorder: run_case, queue_metrics, quartiles, ...)."""
    spec = importlib.util.spec_from_file_location("aqmlab_tools_ns2_jk", JK_PY)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@functools.cache
def runs(path: str = "11ms") -> tuple[dict, ...]:
    """The per-seed rows of `jk_runs_<path>.csv`."""
    return tuple(jk().read_csv(FIXTURES / f"jk_runs_{path}.csv"))


@functools.cache
def summary(path: str = "11ms") -> dict[tuple[str, int], dict]:
    """`jk_summary_<path>.csv` keyed by (aqm, flows per group): seeds, unfinished, and
    <metric>_q1 / _median / _q3 over all recorded seeds (more seeds than `runs` keeps)."""
    return {(r["aqm"], r["n"]): r for r in jk().read_csv_summary(FIXTURES / f"jk_summary_{path}.csv")}


def cell(aqm: str, n: int, path: str = "11ms") -> list[dict]:
    """The per-seed rows of one AQM x load cell, by seed."""
    return sorted((r for r in runs(path) if r["aqm"] == aqm and r["n"] == n), key=lambda r: r["seed"])


def quartiles(vals) -> tuple[float, float, float]:
    """(Q1, median, Q3) the way the summary computes them."""
    return jk().quartiles(list(vals))


#: The suite's AQM labels, in the suite's order.
SUITE_AQMS = ("codel", "pie", "pie_update60ms", "pie_thresh5pkts", "hred_wq0.02", "hred_wq0.04", "sfq_codel")


def reference_label(aqm: str, pie_ref: str = "pie2013r") -> str:
    """The fixture row a suite AQM label is compared with: the suite's PIE cells against
    `pie2013r*` (the paper's behaviour, tools/ns2/README.md "PIE") unless pie_ref="pie"."""
    return aqm.replace("pie", pie_ref, 1) if aqm.startswith("pie") else aqm


def rank_order(metric: str, n: int, path: str = "11ms", aqms=SUITE_AQMS, pie_ref: str = "pie2013r") -> list[str]:
    """The suite AQM labels sorted by the ns-2 median of `metric` at n+n flows (lowest first)."""
    s = summary(path)
    return sorted(aqms, key=lambda a: (s[(reference_label(a, pie_ref), n)][f"{metric}_median"], a))
