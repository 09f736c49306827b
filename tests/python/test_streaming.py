"""The series stream out of the engine (issues 14 and 15): a run's series are handed over in
chunks of bounded size while it runs and written a row group at a time, and the files are the
files the whole in-memory table gives."""

from __future__ import annotations

import json
import sys
import subprocess

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import aqmlab
from aqmlab import _sim, api, output
from conftest import SCENARIO

# A qdisc swap at 1 s: the new discipline's series are NaN before it. (A column registered
# mid-run, over chunks already drained, is the Rust tests' case: metrics::series.)
SWAP = """
name = "swap"
duration = "3s"
[bottleneck]
rate = "20Mbit"
qdisc = "pie"
[[bottleneck.changes]]
at = "1s"
qdisc = "fq_codel"
[[flows]]
cc = "cubic"
rtt = "20ms"
count = 2
"""


SHORT = ["duration=4s"]


def _streamed(text, chunk: int, monkeypatch) -> aqmlab.RunResult:
    monkeypatch.setattr(api, "CHUNK_VALUES", chunk)
    return aqmlab.run(text, overrides=SHORT)


@pytest.mark.parametrize("text", [SCENARIO, SWAP])
def test_streamed_series_are_the_in_memory_series(text, monkeypatch):
    whole = aqmlab.run(text, overrides=SHORT)
    assert not whole.series_data.streamed
    small = _streamed(text, 500, monkeypatch)
    data = small.series_data
    assert data.streamed and len(data._spill) >= 2
    # Every chunk is bounded by the chunk size (ticks x columns, one tick of slack).
    assert all(n * cols <= 500 + cols for _, _, n, cols in data._spill)
    # What stays in memory is less than one chunk, not the run.
    assert data._tail.size <= 500 + len(data.keys)
    assert data.n_ticks == whole.series_data.n_ticks
    pd.testing.assert_frame_equal(small.timeseries, whole.timeseries)
    for i, k in enumerate(whole.series_data.keys):
        assert np.array_equal(small.series_data.column(i, 7, 93), whole.series_data.column(i, 7, 93), equal_nan=True), k


def test_swapped_in_series_are_nan_before_the_swap(monkeypatch):
    r = _streamed(SWAP, 300, monkeypatch)
    keys = r.series_data.keys
    late = [i for i, (e, m) in enumerate(keys) if e == "bottleneck" and m.startswith("new_flows")]
    assert late, keys
    t = r.series_data.time()
    v = r.series_data.column(late[0])
    assert np.isnan(v[t < 0.99]).all() and not np.isnan(v[t > 1.01]).any()
    assert len(r.series_data._spill) >= 2


@pytest.mark.parametrize("text", [SCENARIO, SWAP])
def test_streamed_files_equal_the_whole_table_files(text, tmp_path, monkeypatch):
    """The Parquet and CSV written from streamed chunks are byte for byte the files of the
    whole tidy DataFrame (labelled_table / to_csv, the writers before streaming)."""
    r = _streamed(text, 700, monkeypatch)
    r.labels = {"run": "a,b", "cell": "c", "seed": 7}
    output.write_parquet(r, tmp_path / "s.parquet")
    output.write_csv(r, tmp_path / "s.csv")
    # The same result through the DataFrame path.
    r.timeseries  # noqa: B018 - builds the DataFrame, so the writers take the old path
    pq.write_table(output.labelled_table(r), tmp_path / "w.parquet", row_group_size=output.ROW_GROUP_ROWS, **output.PARQUET_OPTIONS)
    r.timeseries.to_csv(tmp_path / "w.csv", index=False, lineterminator="\n")
    assert (tmp_path / "s.parquet").read_bytes() == (tmp_path / "w.parquet").read_bytes()
    assert (tmp_path / "s.csv").read_bytes() == (tmp_path / "w.csv").read_bytes()
    a, b = pq.read_table(tmp_path / "s.parquet"), pq.read_table(tmp_path / "w.parquet")
    assert a.schema.equals(b.schema, check_metadata=True) and a.equals(b)


@pytest.mark.parametrize("group", [30, 1000])  # a row group inside one or two columns; many columns
def test_long_table_is_written_in_bounded_row_groups_with_the_same_content(group, tmp_path, monkeypatch):
    monkeypatch.setattr(output, "ROW_GROUP_ROWS", group)
    r = _streamed(SCENARIO, 900, monkeypatch)
    output.write_parquet(r, tmp_path / "s.parquet")
    f = pq.ParquetFile(tmp_path / "s.parquet")
    rows = [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)]
    total = r.series_data.n_rows
    assert max(rows) == group and sum(rows) == total
    r.timeseries  # noqa: B018
    pq.write_table(output.labelled_table(r), tmp_path / "w.parquet", row_group_size=group, **output.PARQUET_OPTIONS)
    assert (tmp_path / "s.parquet").read_bytes() == (tmp_path / "w.parquet").read_bytes()
    got, want = pq.read_table(tmp_path / "s.parquet"), pq.read_table(tmp_path / "w.parquet")
    assert got.schema.equals(want.schema, check_metadata=True)
    pd.testing.assert_frame_equal(got.to_pandas()[["time", "value"]], r.timeseries[["time", "value"]])


@pytest.mark.parametrize("n", [1, 126, 127, 128, 32766, 32767])
def test_written_out_schema_is_from_pandas(n):
    """The Parquet schema made without pandas (codes' width, pandas metadata) is pyarrow's
    from_pandas of the tidy DataFrame, label columns added."""
    names = [f"f{i}" for i in range(n)]
    df = pd.DataFrame(
        {
            "time": pd.Series([0.0], dtype="f8"),
            "flow": pd.Categorical.from_codes([0], categories=names),
            "metric": pd.Categorical.from_codes([0], categories=["m"]),
            "value": pd.Series([1.0], dtype="f8"),
        }
    )
    want = pa.Schema.from_pandas(df, preserve_index=False)
    got = output._tidy_schema_cached(n, 1, "i64")
    assert got.remove_metadata().field("flow").type == want.field("flow").type
    assert got.metadata[b"pandas"] == want.metadata[b"pandas"]
    want = want.insert(0, pa.field("run", pa.dictionary(pa.int32(), pa.string()))).insert(
        1, pa.field("cell", pa.dictionary(pa.int32(), pa.string()))
    ).insert(2, pa.field("seed", pa.int64()))
    assert got.equals(want, check_metadata=True)


def test_parquet_is_written_without_importing_pandas(tmp_path):
    """pandas costs 110 MB of a run's memory: the Parquet, the manifest and the summary do not
    need it."""
    code = (
        "import sys, aqmlab\n"
        "from pathlib import Path\n"
        "from aqmlab import output\n"
        f"r = aqmlab.run({str(SCENARIO)!r}, overrides=['duration=1s'])\n"
        f"output.write_outputs(r, Path({str(tmp_path)!r}), plot=False, flent=False, html=False)\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["name"]


def test_engine_spill_index_describes_the_file(tmp_path):
    """The bindings' chunk index: offsets, first ticks, ticks and columns of each chunk, and
    what is left after the last one; chunks are no larger than asked."""
    import tempfile

    with tempfile.TemporaryFile() as f:
        text = SCENARIO.read_text()
        _, (keys, time, values, first, index) = _sim.run(text, None, ["duration=3s"], series_fd=f.fileno(), chunk_values=200)
        size = f.seek(0, 2)
    assert index and index[0][:2] == (0, 0)
    end = 0
    tick = 0
    for off, first_tick, n, cols in index:
        assert off == end and first_tick == tick and n * cols <= 200 + cols and cols == len(keys)
        end += 8 * n * (1 + cols)
        tick += n
    assert end == size and first == tick
    assert len(values) == 8 * len(keys) * (len(time) // 8)


def test_a_streamed_result_pickles_with_its_values(monkeypatch):
    import pickle

    r = _streamed(SCENARIO, 400, monkeypatch)
    assert r.series_data.streamed
    back = pickle.loads(pickle.dumps(r.series_data))
    assert not back.streamed and back.keys == r.series_data.keys
    for i in range(len(back.keys)):
        assert np.array_equal(back.column(i), r.series_data.column(i), equal_nan=True)


def test_rows_are_the_tidy_table_rows(monkeypatch):
    """Any row range of the streamed series is that range of the tidy table."""
    r = _streamed(SWAP, 250, monkeypatch)
    data = r.series_data
    whole = r.timeseries
    codes = np.repeat(np.arange(len(data.keys)), data.n_ticks)
    total = len(whole)
    for a, b in [(0, total), (0, 1), (5, 17), (70, 400), (81, 162), (100, total - 3), (total - 1, total), (3, 3)]:
        t, v, col = data.rows(a, b)
        assert np.array_equal(t, whole["time"].to_numpy()[a:b])
        assert np.array_equal(v, whole["value"].to_numpy()[a:b], equal_nan=True)
        assert np.array_equal(col, codes[a:b])
