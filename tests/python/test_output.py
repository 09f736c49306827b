"""Crash safety of the output writer: a failure mid-way leaves no partial files."""

from __future__ import annotations

import enum
import json
import math

import pytest

import aqmlab
from aqmlab import output
from conftest import SCENARIO


@pytest.fixture(scope="module")
def result() -> aqmlab.RunResult:
    return aqmlab.run(SCENARIO, overrides=["duration=2s"])


@pytest.mark.parametrize(
    ("module", "writer", "kept"),
    [
        # The plot is written first (write_outputs: VIEW_WRITERS): nothing half-written stays.
        ("plot", "plot_throughput_rtt", set()),
        # The flent file comes last: the files written before it stay, complete.
        ("flentfile", "write", {"throughput_rtt.png", "report.html", "timeseries.parquet", "timeseries.csv"}),
    ],
)
def test_a_failing_writer_leaves_no_summary_no_temporary_and_only_complete_files(result, tmp_path, monkeypatch, module, writer, kept):
    import importlib

    def boom(res, path):
        with open(path, "wb") as f:
            f.write(b"half a file")
        raise RuntimeError(f"killed in {module}.{writer}")

    monkeypatch.setattr(importlib.import_module(f"aqmlab.{module}"), writer, boom)
    with pytest.raises(RuntimeError):
        output.write_outputs(result, tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == kept
    assert not (tmp_path / "summary.json").exists()


def test_failed_rewrite_keeps_previous_file(result, tmp_path, monkeypatch):
    output.write_outputs(result, tmp_path, plot=False)
    before = (tmp_path / "summary.json").read_bytes()

    def fail_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(output.os, "replace", fail_replace)
    with pytest.raises(OSError):
        output.write_outputs(result, tmp_path, plot=False)
    assert (tmp_path / "summary.json").read_bytes() == before
    assert json.loads(before)["sim_seconds"] == pytest.approx(2.0)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --------------------------------------------------------------------------------------
# The writer registry
# --------------------------------------------------------------------------------------


def test_builtin_writers_name_the_layout_files():
    assert {n: w.file for n, w in output.WRITERS.items()} == {
        "parquet": output.PARQUET,
        "csv": output.CSV,
        "plot": output.PLOT,
        "flent": output.FLENT,
        "html": output.HTML,
    }
    assert [output.PARQUET, output.CSV, output.PLOT, output.HTML, output.SUMMARY] == [
        "timeseries.parquet", "timeseries.csv", "throughput_rtt.png", "report.html", "summary.json"
    ]


def test_new_format_is_one_function_written_atomically_before_the_summary(result, tmp_path, monkeypatch):
    monkeypatch.setattr(output, "WRITERS", dict(output.WRITERS))
    seen = []

    @output.writer("flows", file="flows.txt")
    def write_flows(res, path):
        # a temporary name beside the final file, and summary.json not there yet
        seen.append((path.parent, path.name, (tmp_path / "summary.json").exists(), (tmp_path / "flows.txt").exists()))
        path.write_text("\n".join(res.flows) + "\n")

    written = output.write_outputs(result, tmp_path, plot=False, flent=False, html=False)
    assert [p.name for p in written] == ["timeseries.parquet", "timeseries.csv", "flows.txt", "manifest.json", "summary.json"]
    assert len(seen) == 1
    parent, name, summary_existed, final_existed = seen[0]
    assert parent == tmp_path and name != "flows.txt" and name.startswith(".flows.txt.")
    assert not summary_existed and not final_existed
    assert (tmp_path / "flows.txt").read_text() == "cubic-0\ncubic-1\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_failing_new_writer_leaves_no_summary(result, tmp_path, monkeypatch):
    monkeypatch.setattr(output, "WRITERS", dict(output.WRITERS))

    @output.writer("broken", file="broken.bin")
    def write_broken(res, path):
        path.write_bytes(b"half")
        raise RuntimeError("disk went away")

    with pytest.raises(RuntimeError):
        output.write_outputs(result, tmp_path, plot=False, csv=False, flent=False, html=False)
    assert {p.name for p in tmp_path.iterdir()} == {"timeseries.parquet"}


def test_formats_select_writers_and_unknown_or_duplicate_names_are_errors(result, tmp_path, monkeypatch):
    written = output.write_outputs(result, tmp_path, formats=["csv"])
    assert [p.name for p in written] == ["timeseries.csv", "manifest.json", "summary.json"]
    assert {p.name for p in tmp_path.iterdir()} == {"timeseries.csv", "manifest.json", "summary.json"}
    with pytest.raises(ValueError, match="unknown output format pcap"):
        output.write_outputs(result, tmp_path, formats=["csv", "pcap"])
    monkeypatch.setattr(output, "WRITERS", dict(output.WRITERS))
    with pytest.raises(ValueError, match="registered twice"):
        output.writer("csv", file="other.csv")(lambda res, path: None)


# --------------------------------------------------------------------------------------
# format_version
# --------------------------------------------------------------------------------------


def test_summary_json_starts_with_format_version_then_the_engine_summary(result, tmp_path):
    output.write_outputs(result, tmp_path, plot=False, csv=False)
    text = (tmp_path / "summary.json").read_text()
    doc = json.loads(text)
    assert list(doc)[0] == "format_version"
    assert doc["format_version"] == output.FORMAT_VERSION == 1
    rest = {k: v for k, v in doc.items() if k != "format_version"}
    assert rest == result.summary and list(rest) == list(result.summary)
    # apart from the new first line, the text is the engine summary as before
    lines = text.splitlines()
    assert lines[1] == '  "format_version": 1,'
    assert "\n".join([lines[0], *lines[2:]]) + "\n" == result.summary_json(indent=2) + "\n"


def _write_summary(d, doc):
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps(doc))


def test_read_summary_versions(tmp_path):
    legacy = {"sim_seconds": 2.0, "flows": []}
    _write_summary(tmp_path / "old", legacy)
    s = output.read_summary(tmp_path / "old")
    assert s == legacy and output.summary_version(s) == 0
    _write_summary(tmp_path / "v1", {"format_version": 1, **legacy})
    assert output.summary_version(output.read_summary(tmp_path / "v1")) == 1
    _write_summary(tmp_path / "new", {"format_version": output.FORMAT_VERSION + 1, **legacy})
    with pytest.raises(output.SummaryFormatError, match=r"format_version 2 is newer than this aqmlab reads \(1\)"):
        output.read_summary(tmp_path / "new")
    for bad in ("1", 1.5, True, -1):
        _write_summary(tmp_path / "bad", {"format_version": bad})
        with pytest.raises(output.SummaryFormatError, match="not a non-negative integer"):
            output.read_summary(tmp_path / "bad")
    # an unfinished run: no summary.json, or one that is not JSON
    assert output.read_summary(tmp_path / "missing") is None
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "summary.json").write_text('{"sim_sec')
    assert output.read_summary(tmp_path / "torn") is None


class IntSub(int):
    pass


class FloatSub(float):
    def __repr__(self) -> str:
        return "FloatSub"


class StrSub(str):
    pass


class Flag(enum.IntEnum):
    ON = 1


JSON_CASES = [
    {}, [], {"a": []}, {"a": {}}, [[]], [{}], [[], [1]], {"é": "ü\u2028\x00\"\\"}, [True, 1, 1.5], [False, None],
    [1e-05, -0.0, 1e300, 2**70, -5, 0.1 + 0.2], {"x": [1, [2, 3], {"y": None}]}, "s", 3, 1.0, None, True,
    [[1, 2], [3]], [[1, [2]], [3]], [[1, 2], []], [[1, "a"]], [[1, True]], [[1, None]], [[1e-7, -2], [3.5, 4]],
    [[1, 2], [3, {}]], [[[1, 2]], [[3, 4]]],
    {"astral": "a\U0001F600b", "controls": "".join(map(chr, range(32))) + "\x7f\x80\u2028\uffff", "quote": '"\\/'},
    [2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**40, 0, -0.0, 5e-324, 1.7976931348623157e308, 1e16, 1e15, 1e-4, 1e-5],
    {"deep": [[[[[[[[[[{"x": [1.5]}]]]]]]]]]]},
    # what json.dumps encodes its own way or rejects: the fast path must hand these over
    "\ud800", {"lone": ["\udfff"]}, [Flag.ON], {"k": IntSub(3)}, [FloatSub(1.5)], StrSub("s"), {StrSub("k"): 1},
    (1, 2), {1: 2}, {"a": (1,)}, [[1, 2], (3, 4)], [float("nan")], {"a": float("inf")}, [[1, float("-inf")]], {"a": {1, 2}},
]


@pytest.mark.parametrize("value", JSON_CASES, ids=range(len(JSON_CASES)))
def test_json_indent2_is_json_dumps_indent2(value):
    try:
        want = json.dumps(value, indent=2, allow_nan=False)
    except (ValueError, TypeError) as e:
        with pytest.raises(type(e), match="."):
            output.json_indent2(value)
        return
    assert output.json_indent2(value) == want


def test_json_indent2_writes_floats_as_json_dumps_does():
    """Random bit patterns (finite doubles of every exponent, subnormals included) and
    decimal-looking values, in lists and dicts: the extension's float text is Python's repr."""
    import random
    import struct

    rng = random.Random(15)
    xs = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    xs = [x for x in xs if math.isfinite(x)]
    xs += [round(rng.uniform(-1e6, 1e6), rng.randint(0, 9)) for _ in range(5000)]
    xs += [rng.randint(1, 10**6) / 10**rng.randint(0, 20) for _ in range(5000)]
    value = {"xs": xs, "rows": [[x, -x] for x in xs[:2000]], "by": {str(i): x for i, x in enumerate(xs[:2000])}}
    assert output.json_indent2(value) == json.dumps(value, indent=2, allow_nan=False)


def test_json_indent2_hands_a_cycle_to_json_dumps():
    """A list that contains itself is not plain data: json.dumps reports it (the extension
    stops at a fixed depth instead of recursing forever)."""
    cyc: list = [1]
    cyc.append(cyc)
    with pytest.raises(ValueError, match="Circular reference"):
        output.json_indent2({"a": cyc})


def test_summary_and_manifest_text_are_json_dumps_indent2(result, tmp_path):
    """The fast encoder writes what json.dumps(indent=2) wrote, for a real summary (CDF
    points, nested tables, flows) and its manifest."""
    output.write_outputs(result, tmp_path, plot=False, csv=False, flent=False, html=False)
    for name in ("summary.json", "manifest.json"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, allow_nan=False) + "\n"
    doc = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert doc["bottleneck"]["sojourn_ms"]["cdf"], "the summary has CDF points (the list-of-rows path)"


def test_parquet_float_arrays_turn_nan_and_only_nan_into_nulls():
    """output._numbers looks for NaN only when the array's sum is NaN (the common case, no NaN,
    needs no mask): NaN must still become null wherever it is, and infinities (whose sum can be
    NaN or overflow) stay values."""
    import numpy as np
    import pyarrow as pa

    cases = [
        [1.0, np.nan, 3.0],
        [np.nan] * 4,
        [np.inf, -np.inf, 2.0],  # sum NaN, no NaN
        [1e308, 1e308, np.nan],  # the sum overflows to inf before the NaN
        [1e308, 1e308, -np.inf],  # inf + -inf: NaN sum, no NaN
        [0.5, -0.0, 7.0],
        [],
    ]
    import warnings

    for values in cases:
        a = np.array(values, dtype=np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no RuntimeWarning from the NaN test's sum
            arr = output._numbers(a, pa.float64(), nan_is_null=True)
        assert arr.null_count == int(np.isnan(a).sum()), values
        assert arr.to_pylist() == [None if np.isnan(v) else v for v in a], values
        plain = output._numbers(a, pa.float64())
        assert plain.null_count == 0 and np.array_equal(plain.to_numpy(zero_copy_only=False), a, equal_nan=True)
