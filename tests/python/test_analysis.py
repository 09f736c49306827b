"""aqmlab.analysis: ccafct's FCT statistics and harm, and their agreement with the engine."""

from __future__ import annotations

import math
import tomllib

import pytest

import aqmlab
from aqmlab.analysis import empirical_quantile, fct_harm, fct_stats, workload_harm
from conftest import REPO

FCT_SCENARIO = REPO / "scenarios" / "fct-workload.toml"


def test_empirical_quantile_picks_a_sample():
    x = [float(i) for i in range(1, 21)]
    # p·n = 10 → the 10th sample (the lower middle one); 0.95·20 = 19 → the 19th.
    assert empirical_quantile(x, 0.5) == 10.0
    assert empirical_quantile(x, 0.95) == 19.0
    assert empirical_quantile(x[:19], 0.95) == 19.0  # 18.05 → rank 19
    assert empirical_quantile([7.0], 0.95) == 7.0


def test_fct_stats_values():
    s = fct_stats([4.0, 1.0, 2.0])
    assert s["geomean"] == pytest.approx(2.0, rel=1e-15)
    assert (s["median"], s["p95"]) == (2.0, 4.0)
    with pytest.raises(ValueError):
        fct_stats([])
    with pytest.raises(ValueError):
        fct_stats([1.0, 0.0])


def test_fct_harm_follows_ccafct():
    # ccafct README, 10 ms, cubic competitor: solo / loaded (harm) per statistic.
    for solo, loaded, harm in [(176.2, 339.3, 0.481), (154.3, 314.9, 0.510), (1061.3, 2002.7, 0.470)]:
        assert round(fct_harm(solo, loaded), 3) == harm
    assert fct_harm(2.0, 1.0) == 0.0  # faster with competition: no harm
    assert fct_harm(1.0, 1.0) == 0.0
    assert fct_harm(1.0, 0.0) == math.inf  # ccafct: invalid
    assert workload_harm(
        {"fct_geomean_s": 1.0, "fct_median_s": 1.0, "fct_p95_s": 2.0},
        {"fct_geomean_s": 2.0, "fct_median_s": 4.0, "fct_p95_s": 2.0},
    ) == {"geomean": 0.5, "median": 0.75, "p95": 0.0}


def _fct_scenario(competitor: bool) -> dict:
    """The ccafct scenario shortened to 60 s of arrivals (about 300 transfers)."""
    sc = tomllib.loads(FCT_SCENARIO.read_text())
    sc["duration"] = "100s"
    sc["workloads"][0]["stop"] = "80s"
    if not competitor:
        del sc["flows"]
    return sc


@pytest.fixture(scope="module")
def loaded() -> aqmlab.RunResult:
    return aqmlab.run(_fct_scenario(True))


def test_python_stats_reproduce_the_engine_summary(loaded):
    w = loaded.summary["workloads"][0]
    assert w["completed"] == len(w["fct_s"]) > 200
    s = fct_stats(w["fct_s"])
    for k in ("geomean", "median", "p95"):
        assert s[k] == pytest.approx(w[f"fct_{k}_s"], rel=1e-12), k


def test_a_bulk_cubic_competitor_harms_the_workload(loaded):
    solo = aqmlab.run(_fct_scenario(False)).summary["workloads"][0]
    w = loaded.summary["workloads"][0]
    # The same seed gives the same arrivals and sizes with and without the competitor.
    assert solo["started"] == w["started"]
    harm = workload_harm(solo, w)
    print("solo", {k: solo[f"fct_{k}_s"] for k in harm}, "loaded", {k: w[f"fct_{k}_s"] for k in harm}, "harm", harm)
    assert all(0.0 < h < 1.0 for h in harm.values()), harm
    # Reproducible: a second run gives the same summary.
    first, again = dict(loaded.summary), aqmlab.run(_fct_scenario(True)).summary
    first.pop("wall_seconds"), again.pop("wall_seconds")
    assert again == first
