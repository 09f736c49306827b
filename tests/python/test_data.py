"""Reading results back: aqmlab.load / load_suite, Parquet labels and units, hive layout
(a whole suite is one DuckDB glob)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import run_cli

import aqmlab

TINY = ["l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie", "--set", "duration=3s", "--seeds", "2", "--no-plots"]


@pytest.fixture(scope="module")
def suite_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "s6"
    proc = run_cli("suite", "run", *TINY, "--jobs", "1", "--out", out, "-q")
    assert proc.returncode == 0, proc.stderr
    return out


def test_load_round_trips_a_single_run(demo_run):
    _, out = demo_run
    r = aqmlab.load(out)
    s = json.loads((out / "summary.json").read_text())
    assert r.summary == s and r.name == "two-cubic-pfifo"
    assert list(r.timeseries.columns[:3]) == ["run", "cell", "seed"]
    assert r.labels == {"run": "two-cubic-pfifo", "cell": "two-cubic-pfifo", "seed": 1}
    # Units come from the file's metadata, and match what a fresh run reports.
    fresh = aqmlab.run(out / "scenario.toml")
    assert r.units == fresh.units and r.units[("cubic-0", "srtt")] == "ms"
    pd.testing.assert_series_equal(r.series("cubic-0", "goodput"), fresh.series("cubic-0", "goodput"))


def test_load_of_an_unfinished_run_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no finished run"):
        aqmlab.load(tmp_path)


def test_suite_runs_are_hive_partitioned_and_load_as_one_table(suite_out):
    dirs = sorted(p.relative_to(suite_out).as_posix() for p in suite_out.glob("runs/*/*"))
    assert dirs == [f"runs/cell={c}/seed={s}" for c in ("cubic_ecn_pie", "cubic_noecn_pie") for s in (1, 2)]
    sd = aqmlab.load_suite(suite_out)
    assert len(sd.results) == 4 and {"name1", "name2", "dss1", "dss1_from_s"} <= set(sd.results.columns)
    ts = sd.timeseries
    assert set(zip(ts["cell"].astype(str), ts["seed"])) == {(c, s) for c in ("cubic_ecn_pie", "cubic_noecn_pie") for s in (1, 2)}
    one = sd.run("cubic_ecn_pie", 2)
    assert one.summary["seed"] == 2 and one.labels["cell"] == "cubic_ecn_pie"
    n = len(one.timeseries)
    assert (ts["run"].astype(str) == "cell=cubic_ecn_pie/seed=2").sum() == n


def test_duckdb_globs_a_whole_suite_with_hive_partitioning(suite_out):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is a test dependency (pyproject [test])")
    q = f"""select cell, seed, count(*) as n, avg(value) filter (where metric = 'goodput') as g
            from read_parquet('{suite_out}/runs/*/*/timeseries.parquet', hive_partitioning = true)
            group by cell, seed order by cell, seed"""
    rows = duckdb.sql(q).fetchall()
    assert [(c, int(s)) for c, s, _, _ in rows] == [(c, s) for c in ("cubic_ecn_pie", "cubic_noecn_pie") for s in (1, 2)]
    sd = aqmlab.load_suite(suite_out)
    for cell, seed, n, g in rows:
        one = sd.run(cell, int(seed)).timeseries
        assert n == len(one)
        assert g == pytest.approx(one.loc[one["metric"] == "goodput", "value"].mean(), nan_ok=True)
