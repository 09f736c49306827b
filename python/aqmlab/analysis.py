"""Metrics that combine runs: FCT statistics and FCT harm (algorithms.md 5.3).

The definitions follow heistp/ccafct: ``stats.go`` (geometric mean, median and P95 of the
completed transfers' FCTs, with gonum's empirical quantile) and ``harm/harm.go`` (harm of
a "less is better" metric, after Ware et al., HotNets 2019). The engine's summary
(``workloads[i].fct_geomean_s`` etc.) uses the same definitions, so ``fct_stats`` on a
run's ``fct_s`` list reproduces it; use ``fct_stats`` to pool the FCTs of several runs.

>>> solo = aqmlab.run(solo_scenario).summary["workloads"][0]        # doctest: +SKIP
>>> loaded = aqmlab.run(loaded_scenario).summary["workloads"][0]    # doctest: +SKIP
>>> workload_harm(solo, loaded)     # {"geomean": ..., "median": ..., "p95": ...}  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

#: The statistics ``fct_stats`` returns, in order.
FCT_STATISTICS = ("geomean", "median", "p95")


def empirical_quantile(sorted_values: list[float], p: float) -> float:
    """gonum's ``stat.Quantile(p, stat.Empirical, ...)``: the smallest sample whose 1-based
    rank ``i`` satisfies ``i >= p * n`` (no interpolation; the median of an even count is
    the lower of the middle two). ``sorted_values`` must be sorted and non-empty."""
    rank = max(math.ceil(p * len(sorted_values)), 1)
    return sorted_values[min(rank, len(sorted_values)) - 1]


def fct_stats(fcts: Iterable[float]) -> dict[str, float]:
    """Geometric mean, median and P95 of a set of FCTs, as ccafct's ``Analyze``.

    Raises ``ValueError`` for an empty set (ccafct refuses to analyse one) or a
    non-positive or non-finite FCT (its logarithm is undefined).
    """
    values = sorted(float(x) for x in fcts)
    if not values:
        raise ValueError("no FCTs to analyse")
    if not all(math.isfinite(x) and x > 0 for x in values):
        raise ValueError("FCTs must be positive and finite")
    # Summed in ascending order, as ccafct sorts before gonum's GeometricMean.
    mean_log = 0.0
    for x in values:
        mean_log += math.log(x)
    mean_log /= len(values)
    return {
        "geomean": math.exp(mean_log),
        "median": empirical_quantile(values, 0.5),
        "p95": empirical_quantile(values, 0.95),
    }


def fct_harm(solo: float, loaded: float) -> float:
    """Harm to a "less is better" metric such as FCT (ccafct ``harm.LessIsBetter``):
    ``(loaded - solo) / loaded`` when ``loaded >= solo``, else 0 (competition that helps is
    no harm). A ``loaded`` value of 0 gives ``math.inf``, which ccafct reports as invalid
    (valid harm lies in [0, 1])."""
    solo, loaded = float(solo), float(loaded)
    if loaded == 0:
        return math.inf
    if loaded < solo:
        return 0.0
    return (loaded - solo) / loaded


def workload_harm(solo: Mapping, loaded: Mapping) -> dict[str, float]:
    """FCT harm per statistic between two runs' ``summary["workloads"][i]`` entries (the
    same workload without and with competition)."""
    return {k: fct_harm(solo[f"fct_{k}_s"], loaded[f"fct_{k}_s"]) for k in FCT_STATISTICS}
