"""Issue 15, session 6: the pictures of runs with very many flows draw a bounded set of flows
and say so; the plot and report.html share one choice of the total's series and one moving
average; write_outputs writes the view's writers first and lists the files as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

import aqmlab
from aqmlab import api, htmlreport, output, plot, seriesview

MANY = """
name = "many"
duration = "1s"
[bottleneck]
rate = "20Mbit"
qdisc = "fq_codel"
[[flows]]
cc = "cubic"
rtt = "20ms"
count = 12
[[probes]]
kind = "ping"
rtt = "20ms"
"""


@pytest.fixture(scope="module")
def many():
    return aqmlab.run(MANY)


def test_drawn_flows_are_all_up_to_the_limit_then_evenly_spread():
    names = [f"f{i}" for i in range(10)]
    assert seriesview.drawn_flows(names, 10) == names
    assert seriesview.drawn_flows(names, 4) == ["f0", "f2", "f5", "f7"]  # i * 10 // 4
    picked = seriesview.drawn_flows([f"f{i}" for i in range(100_000)], 1000)
    assert len(picked) == 1000 == len(set(picked)) and picked[0] == "f0" and picked[1] == "f100" and picked[-1] == "f99900"


def test_a_capped_view_keeps_the_drawn_flows_and_every_other_series_and_totals_all_flows(many):
    full = seriesview.view(many, max_flows=1000)
    capped = seriesview.view(many, max_flows=4)
    flows = plot.tcp_flows(many)
    drawn = seriesview.drawn_flows(flows, 4)
    assert (capped.flows_total, capped.flows_drawn) == (12, 4) and (full.flows_total, full.flows_drawn) == (12, 12)
    assert set(capped) == {k for k in full if k[0] in drawn or k[0] not in flows}
    assert ("probe-0", "rtt") in capped and ("bottleneck", "qdelay") in capped
    assert sorted(capped.smoothed) == sorted(drawn)
    # the total is still the sum over all 12 flows, bit for bit the whole-series function's
    tt, tot = plot.total_throughput(many, plot.series_map(many))
    assert np.array_equal(capped.total[1], tot) and np.array_equal(capped.total[0], tt)
    for k in capped:
        assert np.array_equal(capped[k][1], full[k][1], equal_nan=True)
    assert "4 of the 12 TCP flows have their own lines" in seriesview.describe(capped)
    assert seriesview.describe(full) is None


def test_the_page_and_the_figure_say_how_many_flows_they_draw(many, monkeypatch):
    monkeypatch.setattr(seriesview, "MAX_DRAWN_FLOWS", 4)
    many.__dict__.pop("_series_view", None)
    try:
        page = htmlreport.run_report(many, ["a"], "p.js")
        data = json.loads(page.split('id="aqmlab-data">')[1].split("</script>")[0])
        names = {tr["name"] for s in data for tr in s["traces"]}
        assert "4 of the 12 TCP flows have their own lines" in page
        assert sum(n.endswith(" srtt") for n in names) == 4 and "total" in names
        v = seriesview.view(many)
        fig = plot.plot([many], None, series=[v])
        try:
            labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
        assert "4 of 12 TCP flows (evenly spread; total over all)" in labels
    finally:
        many.__dict__.pop("_series_view", None)


def test_smooth_is_the_moving_average_fed_whole_and_in_blocks():
    rng = np.random.default_rng(3)
    v = rng.random(997) * 7.0
    v[rng.integers(0, 997, 60)] = np.nan
    v[400:470] = np.nan
    t = np.arange(997) * 0.01
    sv, win = plot._smooth(t, v, 0.25)
    assert win == 25
    m = plot.MovingAverage(win)
    blocks = np.concatenate([m.add(v[a : a + 13]) for a in range(0, 997, 13)])
    assert np.array_equal(blocks, sv, equal_nan=True)
    # what it computes: the mean of the non-NaN values of the trailing window
    for i in (0, 10, 24, 25, 300, 420, 480, 996):
        w = v[max(0, i - win + 1) : i + 1]
        ok = w[~np.isnan(w)]
        assert (np.isnan(sv[i]) and not len(ok)) or sv[i] == pytest.approx(ok.mean(), rel=1e-12)


def test_an_unreduced_view_holds_its_series_in_one_array_without_copies(many, monkeypatch):
    monkeypatch.setattr(seriesview, "BLOCK_VALUES", 64)  # many blocks
    many.__dict__.pop("_series_view", None)
    v = seriesview.view(many)
    many.__dict__.pop("_series_view", None)
    assert not v.reduced
    assert all(arr.base is not None for _, arr in v.values())
    assert len({id(arr.base) for _, arr in v.values()}) == 1  # rows of one array
    assert len({id(t) for t, _ in v.values()}) == 1  # one time grid
    data = many.series_data
    for key, i in data.index().items():
        assert np.array_equal(v[key][1], data.column(i), equal_nan=True)


def test_write_outputs_writes_the_views_writers_first_and_lists_files_in_registration_order(many, tmp_path, monkeypatch):
    order = []
    for name, w in list(output.WRITERS.items()):
        def wrapped(r, p, fn=w.write, name=name):
            order.append((name, "_series_view" in r.__dict__))
            fn(r, p)

        monkeypatch.setitem(output.WRITERS, name, output.Writer(w.name, w.file, wrapped, w.file_for))
    output.write_outputs(many, tmp_path)
    assert [n for n, _ in order] == ["plot", "html", "parquet", "csv", "flent"]
    assert [had for n, had in order if n in ("parquet", "csv", "flent")] == [False] * 3  # the view is gone by then
    files = list(json.loads((tmp_path / "manifest.json").read_text())["files"])
    want = [output.WRITERS[n].filename(many) for n in ("parquet", "csv", "plot", "flent", "html")] + ["summary.json"]
    assert files == want


def test_release_memory_runs_and_a_run_still_reads_back(many):
    api.release_memory()
    api.release_memory()
    assert many.series("probe-0", "rtt").notna().any()


def test_release_memory_trims_unless_the_process_keeps_its_freed_memory(monkeypatch):
    """``malloc_trim(0)`` each call; none once the process keeps its freed memory (a suite
    worker: runner._keep_freed_memory), whose kept heap a trim would give back."""
    calls = []
    monkeypatch.setattr(api, "_TRIM", calls.append)
    api.release_memory()
    api.release_memory()
    assert calls == [0, 0]
    api.keep_freed_memory()
    api.release_memory()
    assert calls == [0, 0]


def test_flent_file_read_through_small_column_blocks_is_the_whole_series_file(tmp_path, monkeypatch):
    """The flent writer reads a spilled run's columns a block of neighbours at a time and keeps
    a few blocks; with tiny blocks and few kept (evictions all the time) the file is the one
    written from the whole series."""
    from aqmlab import flentfile

    monkeypatch.setattr(api, "CHUNK_VALUES", 300)
    streamed = aqmlab.run(MANY)
    monkeypatch.undo()
    whole = aqmlab.run(MANY)
    whole.timeseries  # noqa: B018 - the DataFrame: the writers' whole-table path
    whole.summary = streamed.summary
    assert streamed.series_data.streamed and not whole.series_data.streamed
    monkeypatch.setattr(flentfile, "BLOCK_VALUES", 40)
    monkeypatch.setattr(flentfile, "BLOCKS_KEPT", 2)
    flentfile.write(streamed, tmp_path / "s.flent.gz")
    flentfile.write(whole, tmp_path / "w.flent.gz")
    assert (tmp_path / "s.flent.gz").read_bytes() == (tmp_path / "w.flent.gz").read_bytes()

