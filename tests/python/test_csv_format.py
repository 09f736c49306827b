"""timeseries.csv's numbers: the extension's writer (``_sim.CsvRows``) must write exactly what
pandas' ``to_csv`` writes for a float64 column (Python's ``repr()`` of each float, NaN as the
empty field), the bytes the writer made before it moved to Rust."""

from __future__ import annotations

import numpy as np
import pytest

import aqmlab
from aqmlab import _sim, output
from aqmlab.api import SeriesData

EDGES = [
    0.0, -0.0, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 1.0, -1.0, 5.0, 10.0, 123.0, 123.456, 0.5, 1.5e-3,
    1e-4, 1.2345e-4, 9.999e-5, 1e-5, 1e-7, 1.5e-7, 1e-10, 1e-100, 1e-300, 5e-324, 2.2250738585072014e-308,
    1e15, 999999999999999.9, 9999999999999998.0, 1e16, 1.5e16, 12345678901234567.0, 123456789012345680.0,
    1e17, 1e21, 1e22, 1e100, 1e300, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2, 2.0**63, 2.0**64,
    1e23, 9007199254740993.0, 0.30000000000000004, 100.0, 1e5, 12.5, 0.01, 0.001, 0.000123,
    float("inf"), float("-inf"), 299792458.0, 4.35, 2.675, 1.0000000000000002, 0.9999999999999999,
]


def _values(rng: np.random.Generator) -> np.ndarray:
    """Edge values, random bit patterns (every exponent), and short decimals at every scale
    (ties and near-ties of the shortest-digits choice)."""
    bits = rng.integers(0, 2**64, size=200_000, dtype=np.uint64).view(np.float64)
    bits = bits[np.isfinite(bits)]
    short = rng.integers(-(10**6), 10**6, size=50_000) / 10.0 ** rng.integers(0, 6, size=50_000) * 10.0 ** rng.integers(-25, 25, size=50_000)
    ints = rng.integers(-(2**62), 2**62, size=20_000).astype(np.float64)
    return np.concatenate([np.array(EDGES), -np.array(EDGES), bits, short, ints])


def test_float_reprs_are_pythons_repr():
    v = _values(np.random.default_rng(15))
    got = _sim.float_reprs(v.tobytes()).decode().split("\n")[:-1]
    want = [repr(x) for x in v.tolist()]
    bad = [(w, g) for w, g in zip(want, got) if w != g]
    assert len(got) == len(want) and not bad, bad[:10]
    assert _sim.float_reprs(np.array([np.nan, -np.nan]).tobytes()) == b"nan\nnan\n"


def _result(time: np.ndarray, columns: list[tuple[str, str, np.ndarray]]) -> aqmlab.RunResult:
    data = SeriesData.from_columns(time, [(e, m, "x", v) for e, m, v in columns])
    return aqmlab.RunResult(summary={}, timeseries=None, units={}, name="syn", series_data=data)


@pytest.mark.parametrize("block", [7, 1 << 16])  # blocks splitting columns; one block
def test_csv_is_pandas_to_csv_byte_for_byte(block, tmp_path, monkeypatch):
    rng = np.random.default_rng(14)
    v = _values(rng)
    n = 1000
    v = np.concatenate([v[: 4 * n - 20], [np.nan] * 20])
    rng.shuffle(v)
    time = np.concatenate([[0.0, 0.05, 1e-7, np.nan, 1e16], np.arange(5, n) * 0.05])
    # names CSV must quote (a comma, a quote, a newline), non-ASCII, a plain one, an empty one
    cols = [("flow,1", 'cwnd "x"', v[:n]), ("flöw 2", "rtt", v[n : 2 * n]), ("a\nb", "tput", v[2 * n : 3 * n]), ("bottleneck", "q", v[3 * n :]), ("", "empty flow name", v[:n])]
    r = _result(time, cols)
    monkeypatch.setattr(output, "CSV_BLOCK_ROWS", block)
    output.write_csv(r, tmp_path / "s.csv")
    r.timeseries  # noqa: B018 - builds the DataFrame, so the writer takes pandas' to_csv
    output.write_csv(r, tmp_path / "w.csv")
    s, w = (tmp_path / "s.csv").read_bytes(), (tmp_path / "w.csv").read_bytes()
    assert s.count(b"\n") > 5 * n and s == w


def test_csv_rows_rejects_a_column_index_out_of_range():
    rows = _sim.CsvRows([",a,b,"])
    t = np.zeros(2).tobytes()
    assert rows.format(t, t, np.zeros(2, dtype=np.int64).tobytes()) == b"0.0,a,b,0.0\n0.0,a,b,0.0\n"
    with pytest.raises(ValueError, match="column index 1 out of range"):
        rows.format(t, t, np.array([0, 1], dtype=np.int64).tobytes())
