"""The `ns2-2013` profile against ns-2.35 itself: the Järvinen & Kojo cells run by aqmlab on
the study's profile, compared with the recorded ns-2 fixtures (tests/golden/ns2/, tools/ns2).

Tolerance: the median over 20 seeds of each run's 95th-percentile queueing delay within 15 % of
ns-2's median over its 100 seeds (seed-to-seed quartiles in both are about ±5-10 %), for the
AQMs whose ns-2 code the profile models and agrees with: CoDel and the two PIE variants that
measure (PIE as ns2-ref's `pie2013r` reconstruction). Default PIE must be the FIFO ns-2 makes
of it at 2 Mbit/s. HRED and SFQ-CoDel are not within this tolerance yet and are listed in
docs/validation-notes.md (open), so they are not asserted here.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

import ns2ref

import aqmlab
from aqmlab.suite import load_suite, plan_runs

SEEDS = 20


def _p95_seconds(aqm: str, load: str) -> list[float]:
    suite = load_suite("jarvinen-kojo")
    runs = plan_runs(suite, Path("unused"), filters={"path": ["11ms"], "aqm": [aqm], "load": [load]}, seeds=SEEDS)
    assert len(runs) == SEEDS
    out = []
    for r in runs:
        s = aqmlab.run(r.text).summary
        assert s["stack"] == "ns2-2013"
        out.append(s["bottleneck"]["sojourn_ms"]["p95"] / 1e3)
    return out


@pytest.mark.parametrize("aqm", ["codel", "pie_update60ms", "pie_thresh5pkts"])
@pytest.mark.parametrize("load", ["2+2", "4+4"])
def test_modelled_aqms_match_ns2_within_15_percent(aqm, load):
    n = int(load.split("+")[0])
    ref = ns2ref.summary("11ms")[(ns2ref.reference_label(aqm), n)]["sojourn_p95_median"] / 1e3
    got = statistics.median(_p95_seconds(aqm, load))
    assert got == pytest.approx(ref, rel=0.15), f"{aqm} {load}: aqmlab {got:.3f} s, ns-2 {ref:.3f} s"


def test_default_pie_is_the_fifo_ns2_makes_of_it():
    ref = ns2ref.summary("11ms")[(ns2ref.reference_label("pie"), 2)]["sojourn_p95_median"] / 1e3
    got = statistics.median(_p95_seconds("pie", "2+2"))
    assert ref > 0.40 and got > 0.40, (got, ref)
