"""Reading results back: ``aqmlab.load(run_dir)`` and ``aqmlab.load_suite(out_dir)``.

A run directory's ``timeseries.parquet`` carries ``run``, ``cell`` and ``seed`` columns and
the unit of every series in its metadata; a suite's runs are laid out hive-style
(``runs/cell=<cell>/seed=<seed>/``), so a whole suite is also one glob for DuckDB or polars::

    duckdb.sql("select * from read_parquet('out/s1/runs/*/*/timeseries.parquet', hive_partitioning=true)")
    polars.scan_parquet("out/s1/runs/**/timeseries.parquet", hive_partitioning=True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .output import PARQUET, PARQUET_META_KEY, RESULTS, RUNS, SUMMARY, read_summary

if TYPE_CHECKING:
    import pandas as pd

    from .api import RunResult


def _units(path: Path) -> dict[tuple[str, str], str]:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PARQUET_META_KEY)
    if raw is None:
        return {}
    return {(u["flow"], u["metric"]): u["unit"] for u in json.loads(raw).get("units", [])}


def load(run_dir: str | Path) -> RunResult:
    """A finished run directory as a :class:`aqmlab.RunResult`: ``summary`` (summary.json),
    ``timeseries`` (the tidy DataFrame: run, cell, seed, time, flow, metric, value), ``units``.

    Raises ``FileNotFoundError`` for a directory without a finished run (no summary.json)."""
    import pandas as pd

    from .api import RunResult

    d = Path(run_dir)
    summary = read_summary(d)
    if summary is None:
        raise FileNotFoundError(f"{d}: no finished run here ({SUMMARY} is missing or unreadable)")
    pq_path = d / PARQUET
    ts = pd.read_parquet(pq_path) if pq_path.is_file() else pd.DataFrame(columns=["time", "flow", "metric", "value"])
    labels = {k: ts[k].iloc[0] for k in ("run", "cell", "seed") if k in ts.columns and len(ts)}
    return RunResult(summary=summary, timeseries=ts, units=_units(pq_path) if pq_path.is_file() else {}, name=summary.get("name"), labels=labels)


@dataclass
class SuiteData:
    """A suite's output directory: ``results`` (results.csv: one row per run, the axes and
    metrics) and ``timeseries`` (every run's series in one tidy DataFrame with its ``run``,
    ``cell`` and ``seed``), read on first use."""

    out_dir: Path
    _results: Any = None
    _timeseries: Any = None

    @property
    def results(self) -> pd.DataFrame:
        import pandas as pd

        if self._results is None:
            self._results = pd.read_csv(self.out_dir / RESULTS)
        return self._results

    @property
    def timeseries(self) -> pd.DataFrame:
        import pandas as pd

        if self._timeseries is None:
            files = sorted((self.out_dir / RUNS).glob(f"*/*/{PARQUET}"))
            done = [f for f in files if (f.parent / SUMMARY).is_file()]
            frames = [pd.read_parquet(f) for f in done]
            self._timeseries = (
                pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "cell", "seed", "time", "flow", "metric", "value"])
            )
        return self._timeseries

    def run(self, cell: str, seed: int) -> RunResult:
        """One run of the suite (:func:`load` of ``runs/cell=<cell>/seed=<seed>``)."""
        return load(self.out_dir / RUNS / f"cell={cell}" / f"seed={seed}")


def load_suite(out_dir: str | Path) -> SuiteData:
    """A suite's output directory (as ``aqmlab suite run --out DIR`` wrote it)."""
    d = Path(out_dir)
    if not (d / RESULTS).is_file() and not (d / RUNS).is_dir():
        raise FileNotFoundError(f"{d}: not a suite output directory (no {RESULTS} or {RUNS}/)")
    return SuiteData(d)
