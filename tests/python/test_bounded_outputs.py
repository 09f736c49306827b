"""The default outputs (throughput_rtt.png, <name>.flent.gz, report.html, the Parquet and CSV
files) work from a bounded view of a run's series (issues 14 and 15): a run's peak memory does
not grow with its simulated duration, and what the data defines is what the whole series give."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import pytest

import aqmlab
from aqmlab import api, flentfile, htmlreport, output, plot, seriesview

# Few packets (1 Mbit/s) and many points (a 1 ms step): the series dominate the run's memory.
POINTS = """
duration = "{d}s"
[metrics]
step = "1ms"
[bottleneck]
rate = "1Mbit"
qdisc = "fq_codel"
[[flows]]
cc = "cubic"
rtt = "20ms"
"""

PEAK = """
import resource, sys
from pathlib import Path
import aqmlab
from aqmlab import output
r = aqmlab.run(sys.argv[1])
output.write_outputs(r, Path(sys.argv[2]))  # every writer: parquet, csv, plot, flent, html
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kb(text: str, out) -> int:
    proc = subprocess.run([sys.executable, "-c", PEAK, text, str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


def test_peak_memory_of_a_run_with_every_output_is_flat_in_duration(tmp_path):
    """10x the simulated duration (4,000 -> 40,000 points per series) within 10 % of the peak
    RSS. Before the outputs read bounded views: 159 -> 225 MB for 4 -> 40 s (the flent file's
    dict per tick, whole columns for the plot and the page, the Parquet float dictionaries)."""
    short = _peak_kb(POINTS.format(d=4), tmp_path / "short")
    long = _peak_kb(POINTS.format(d=40), tmp_path / "long")
    assert (tmp_path / "long" / "summary.json").is_file()
    assert long <= 1.10 * short, f"peak RSS {short / 1024:.0f} MB for 4 s, {long / 1024:.0f} MB for 40 s"


# --------------------------------------------------------------------------------------
# The view: reduced series keep what the picture needs, and nothing that is not the data
# --------------------------------------------------------------------------------------


def _synthetic(n: int, step: float = 0.01):
    rng = np.random.default_rng(5)
    t = np.arange(n) * step
    a = np.cumsum(rng.normal(size=n))
    a[n // 3 : n // 3 + 57] = np.nan  # a gap longer than a bucket
    a[rng.integers(0, n, 40)] = np.nan  # and single missing values
    b = rng.random(n) * 10.0
    good = np.abs(rng.normal(size=n)) * 5.0
    good[:30] = np.nan
    cols = [("f", "delivery_rate", "Mbit/s", b), ("f", "goodput", "Mbit/s", good), ("f", "srtt", "ms", a),
            ("bottleneck", "qdelay", "ms", a * 2.0)]
    data = api.SeriesData.from_columns(t, cols)
    summary = {"name": "syn", "flows": [{"name": "f"}], "bottleneck": {}}
    units = {(e, m): u for e, m, u, _ in cols}
    return aqmlab.RunResult(summary=summary, timeseries=None, units=units, name="syn", series_data=data), t, dict(
        ((e, m), v) for e, m, _, v in cols
    )


def test_reduced_series_keep_each_buckets_first_lowest_highest_and_last_value(monkeypatch):
    monkeypatch.setattr(seriesview, "BLOCK_VALUES", 4 * 700)  # blocks of 700 ticks: many blocks
    n, buckets = 50_003, 500
    result, t, cols = _synthetic(n)
    v = seriesview.view(result, buckets=buckets)
    k = v.bucket_ticks
    assert v.reduced and k == -(-n // buckets)
    for key, whole in cols.items():
        rt, rv = v[key]
        assert len(rt) <= 4 * buckets
        idx = np.searchsorted(t, rt)
        assert np.array_equal(t[idx], rt) and np.all(np.diff(idx) > 0)  # ticks of the run, in order
        assert np.array_equal(rv, whole[idx], equal_nan=True)  # their values, nothing made up
        for b in range(0, n, k):
            seg = whole[b : b + k]
            kept = rv[(idx >= b) & (idx < b + k)]
            ok = seg[~np.isnan(seg)]
            if not len(ok):
                assert len(kept) == 1 and np.isnan(kept[0])  # a gap stays a gap
                continue
            assert np.nanmin(kept) == ok.min() and np.nanmax(kept) == ok.max()
            assert kept[0] == ok[0] and kept[-1] == ok[-1]


def test_short_series_are_kept_as_recorded_and_derived_series_are_the_whole_series_functions(monkeypatch):
    monkeypatch.setattr(seriesview, "BLOCK_VALUES", 4 * 333)  # many blocks: sums carried across them
    result, t, cols = _synthetic(5000)
    v = seriesview.view(result)
    assert not v.reduced
    for key, whole in cols.items():
        assert np.array_equal(v[key][0], t) and np.array_equal(v[key][1], whole, equal_nan=True)
    # bit for bit what the plot computes from whole series
    sv, win = plot._smooth(t, cols[("f", "goodput")], plot.GOODPUT_SMOOTHING_S)
    st, svv, swin = v.smoothed["f"]
    assert win == swin == 100 and np.array_equal(svv, sv, equal_nan=True) and np.array_equal(st, t)
    tt, tot = plot.total_throughput(result, {k: (t, c) for k, c in cols.items()})
    assert np.array_equal(v.total[0], tt) and np.array_equal(v.total[1], tot)


# --------------------------------------------------------------------------------------
# The files: the streamed writers give what the whole series give
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spilled():
    """A run whose series went to the spill file in many chunks, and the same run with its
    series as a DataFrame (the writers' whole-table path)."""
    mp = pytest.MonkeyPatch()
    mp.setattr(api, "CHUNK_VALUES", 2000)
    try:
        text = POINTS.format(d=3).replace('step = "1ms"', 'step = "5ms"') + '[[probes]]\nkind = "ping"\nrtt = "20ms"\n'
        streamed = aqmlab.run(text, name="sp")
        whole = aqmlab.run(text, name="sp")
    finally:
        mp.undo()
    assert streamed.series_data.streamed and len(streamed.series_data._spill) >= 3
    whole.timeseries  # noqa: B018 - the DataFrame: the writers take the whole-table path
    whole.summary = streamed.summary
    return streamed, whole


def test_flent_file_streamed_in_slices_is_the_whole_series_file(spilled, tmp_path, monkeypatch):
    streamed, whole = spilled
    monkeypatch.setattr(flentfile, "CHUNK_TICKS", 97)  # slices that cut the spill chunks anywhere
    flentfile.write(streamed, tmp_path / "s.flent.gz")
    monkeypatch.setattr(flentfile, "CHUNK_TICKS", 1 << 30)
    flentfile.write(whole, tmp_path / "w.flent.gz")
    assert (tmp_path / "s.flent.gz").read_bytes() == (tmp_path / "w.flent.gz").read_bytes()
    doc = json.loads(gzip.decompress((tmp_path / "s.flent.gz").read_bytes()))
    assert doc == json.loads(flentfile.dumps(flentfile.build(whole)))
    # one value per step, the engine's own (rounded to six decimals)
    rtt = np.round(whole.series("probe-0", "rtt").to_numpy(), 6)
    got = [e["val"] for e in doc["raw_values"]["Ping (ms) ICMP"]]
    assert got == [x for x in rtt.tolist() if np.isfinite(x)] and len(got) > 200


def test_report_and_plot_of_streamed_series_are_those_of_the_whole_series(spilled, tmp_path):
    streamed, whole = spilled
    assert htmlreport.run_report(streamed, ["a"], "p.js") == htmlreport.run_report(whole, ["a"], "p.js")
    plot.plot_throughput_rtt(streamed, tmp_path / "s.png")
    plot.plot_throughput_rtt(whole, tmp_path / "w.png")
    assert (tmp_path / "s.png").read_bytes() == (tmp_path / "w.png").read_bytes()


def test_long_report_says_how_its_series_were_reduced(tmp_path, monkeypatch):
    monkeypatch.setattr(seriesview, "BUCKETS", 300)
    r = aqmlab.run(POINTS.format(d=3), name="long")
    page = htmlreport.run_report(r, ["a"], "p.js")
    assert "lowest, highest and last value in each" in page
    data = json.loads(page.split('id="aqmlab-data">')[1].split("</script>")[0])
    for spec in data:
        for tr in spec["traces"]:
            assert len(tr["x"]) <= 4 * 300 < r.series_data.n_ticks
    # the reduced throughput trace still reaches the series' maximum
    tp = {tr["name"]: tr for s in data for tr in s["traces"]}
    top = np.nanmax(r.series("cubic-0", "delivery_rate").to_numpy())
    assert max(y for y in tp["cubic-0 delivery rate"]["y"] if y is not None) == pytest.approx(top, rel=1e-4)
