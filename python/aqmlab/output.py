"""The output directory: its layout, writing a run's files crash-safely, reading them back.

This module is the one place that names the files of a run directory and of a suite's
output directory; the runner, the report and the CLI use these names.

A run directory (``aqmlab run --out DIR``, or ``runs/cell=<cell>/seed=<seed>/`` of a suite,
laid out hive-style so that DuckDB, polars and pyarrow glob a suite's Parquet files into one
table with ``cell`` and ``seed`` columns)::

    scenario.toml         the scenario that ran, with --set and --seed written in (written first)
    timeseries.parquet    the tidy series (run, cell, seed, time, flow, metric, value; the
                          units in the file's metadata)                  writer "parquet"
    timeseries.csv        the same as CSV                                 writer "csv"
    throughput_rtt.png    the flent-style throughput/RTT plot             writer "plot"
    <name>.flent.gz       flent's data file (format 4) of the run          writer "flent"
    report.html           the run's static HTML report: summary tables, interactive plots,
                          links to every file (plotly.js inlined, or ``../../../plotly.min.js``
                          in a suite run with ``--html``)                  writer "html"
    cli.pcap, srv.pcap    packet captures at the client and the server side (``--pcap``;
                          written by the engine while it runs, see :func:`pcap_files`)
    manifest.json         provenance: versions, git commit, command, seed, profile, the
                          steady-state windows used, every file with its SHA-256
    summary.json          the engine's summary + ``format_version``; written last

A suite's output directory holds ``REPORT.md``, ``index.html`` (REPORT.md as HTML, with links
to every run's files), ``results.csv``, ``runs/`` and, with ``--html``, ``plotly.min.js``.

Every file is written to a temporary file in the output directory and then moved into
place with ``os.replace``, so an interrupted run never leaves a half-written file under
its final name. ``summary.json`` is written last: its presence means the run's files
are complete.

Output formats are *writers*: one function per format, registered with
``@writer("name", file=...)`` in :data:`WRITERS`. A writer gets the run's result and a
temporary path and writes its file there; :func:`write_outputs` moves it into place.
Adding a format is adding one function.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import RunResult

# --------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------

#: Files of a run directory.
SUMMARY = "summary.json"
SCENARIO = "scenario.toml"
MANIFEST = "manifest.json"
PARQUET = "timeseries.parquet"
CSV = "timeseries.csv"
PLOT = "throughput_rtt.png"
HTML = "report.html"
#: The flent data file's name pattern (``flentfile.file_name``: the run's name, sanitised).
FLENT = "<name>.flent.gz"
#: Packet captures (``aqmlab run --pcap``), named as the studies' cli.pcap / srv.pcap.
CLI_PCAP = "cli.pcap"
SRV_PCAP = "srv.pcap"

#: Files of a suite's output directory.
REPORT = "REPORT.md"
INDEX = "index.html"
RESULTS = "results.csv"
RUNS = "runs"


def run_rel_dir(cell_id: str, seed: int | str) -> str:
    """A suite run's directory relative to the suite's output directory."""
    return f"{RUNS}/cell={cell_id}/seed={seed}"


#: The version of the run-directory format, written into summary.json as ``format_version``.
#: Bump it when the meaning of a file or of a summary key changes; summaries written before
#: the field existed read as version 0 (the same layout as version 1).
FORMAT_VERSION = 1


class SummaryFormatError(ValueError):
    """A summary.json this version of aqmlab cannot read (newer or malformed format_version)."""


# --------------------------------------------------------------------------------------
# Writing files atomically
# --------------------------------------------------------------------------------------


#: Whether each file is fsync'ed before it is renamed into place (``AQMLAB_FSYNC=1``). Off by
#: default: the rename alone makes a killed process leave no half-written file under its final
#: name, and after a machine crash a run whose files did not reach the disk is found by the
#: resume's hash check (manifest.json) and run again; the five fsyncs cost more than the rest of
#: a short suite run's writing.
FSYNC = os.environ.get("AQMLAB_FSYNC", "") not in ("", "0")


def _temporary_name(final: Path) -> Path:
    return final.parent / f".{final.name}.{secrets.token_hex(6)}.tmp"


def _create_temporary(tmp_path: Path, final: Path) -> tuple[Path, int]:
    """Creates ``tmp_path`` (O_EXCL; while that name is taken, another from
    :func:`_temporary_name`) and returns its path and a descriptor open for writing.
    ``os.open``'s mode 0o666 takes the umask as any new file does."""
    while True:
        try:
            return tmp_path, os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            tmp_path = _temporary_name(final)


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yields a temporary path beside ``final``; on success moves it to ``final``.

    The temporary's name is chosen before the file exists and the file is created inside the
    ``try``, so a worker stopped by a signal at any moment (SIGTERM raises SystemExit between
    any two bytecodes) leaves no ``.*.tmp`` behind: the cleanup either removes the file or
    finds there was none yet. (A name found taken is replaced by another: so unlikely, with 48
    random bits, that the window it leaves is not worth closing.)"""
    tmp_path = _temporary_name(final)
    try:
        tmp_path, fd = _create_temporary(tmp_path, final)
        os.close(fd)
        yield tmp_path
        if FSYNC:
            with open(tmp_path, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp_path, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


def atomic_write_bytes(final: Path, data: bytes) -> None:
    """Writes ``data`` to ``final`` as :func:`atomic_path` does, through the descriptor that
    created the temporary (one ``open`` a file instead of two: a suite run writes three small
    files this way)."""
    tmp_path = _temporary_name(final)
    try:
        tmp_path, fd = _create_temporary(tmp_path, final)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if FSYNC:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp_path, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


def atomic_write_text(final: Path, text: str) -> None:
    atomic_write_bytes(final, text.encode("utf-8"))


@contextlib.contextmanager
def pcap_files(out_dir: Path) -> Iterator[tuple[Path, Path]]:
    """Temporary paths for the engine's two captures; on success moved to ``cli.pcap`` and
    ``srv.pcap`` in ``out_dir``. The captures are streamed by the engine during the run, so
    they are not a writer of :data:`WRITERS` (which get a finished :class:`RunResult`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        cli = stack.enter_context(atomic_path(out_dir / CLI_PCAP))
        srv = stack.enter_context(atomic_path(out_dir / SRV_PCAP))
        yield cli, srv


def _fsync_dir(d: Path) -> None:
    if not FSYNC:
        return
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------------------

WriteFn = Callable[["RunResult", Path], None]


@dataclass(frozen=True)
class Writer:
    """An output format: ``write(result, path)`` writes ``file`` at ``path`` (a temporary name).

    ``file`` is the file's name, or its pattern (e.g. ``<name>.flent.gz``) when the name
    depends on the run: then ``file_for(result)`` gives it."""

    name: str
    file: str
    write: WriteFn
    file_for: Callable[[RunResult], str] | None = None

    def filename(self, result: RunResult) -> str:
        """The name of this writer's file for ``result``."""
        return self.file_for(result) if self.file_for is not None else self.file


#: The registered writers in registration order (the order manifest.json lists their files in;
#: :func:`write_outputs` writes those of :data:`VIEW_WRITERS` first).
WRITERS: dict[str, Writer] = {}


def writer(
    name: str, *, file: str, file_for: Callable[[RunResult], str] | None = None
) -> Callable[[WriteFn], WriteFn]:
    """Registers an output format ``name`` that writes the run-directory file ``file``
    (named by ``file_for(result)`` when given; ``file`` is then its pattern)."""

    def deco(fn: WriteFn) -> WriteFn:
        if name in WRITERS:
            raise ValueError(f"writer '{name}' is registered twice")
        WRITERS[name] = Writer(name, file, fn, file_for)
        return fn

    return deco


#: The key of the Parquet schema metadata that holds aqmlab's JSON (units, format version).
PARQUET_META_KEY = b"aqmlab"


#: Rows per Parquet row group (128 Ki, about 5 MB of arrays): the file is written a row group at
#: a time, so this bounds the writer's memory whatever the run's length. A table up to this size
#: is one row group, byte for byte the file ``pq.write_table`` (row groups of 1 Mi rows, with
#: :data:`PARQUET_OPTIONS`) writes of the whole table; a longer one has the same content in more
#: row groups.
ROW_GROUP_ROWS = 1 << 17

#: How timeseries.parquet is written (``pq.ParquetWriter`` / ``pq.write_table`` options):
#: - zstd level 1 for ``time`` and ``value`` (as fast as snappy, a quarter of the size of a J-K
#:   run's file); the label and categorical columns are not compressed: their pages are a few
#:   bytes of run-length-encoded dictionary indices, and each compressed page made zstd set up
#:   a compression context (about 1 ms of a J-K run's 10 ms of writing for 5 of 7 columns);
#: - dictionary encoding for the labels and the categoricals only, whose values repeat. The
#:   floats (``time``, ``value``) are plain: the tiled time grid's dictionary indices were 95 %
#:   of a J-K run's file (zstd compresses the plain grid's repeats instead), and a dictionary of
#:   a row group's distinct floats (up to 128 Ki of them once a series is longer than a row
#:   group) took 30 MB of Arrow's pool while it was built, so the writer's peak grew with the
#:   run's duration (issue 15: 126 MB for 1,000 s, 193 MB for 10,000 s; plain: 110 and 127 MB);
#: - min/max statistics for ``time`` and ``value`` only (those of the dictionary columns cost
#:   40 % of the writing; ``cell`` and ``seed`` are the hive partition anyway).
#: The table read back is the same (docs/performance.md).
_LABEL_COLUMNS = ["run", "cell", "seed", "flow", "metric"]
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": {**{c: "none" for c in _LABEL_COLUMNS}, "time": "zstd", "value": "zstd"},
    "compression_level": {"time": 1, "value": 1},
    "use_dictionary": list(_LABEL_COLUMNS),
    "write_statistics": ["time", "value"],
}


def _labels(result: RunResult) -> dict[str, Any]:
    return result.labels or {"run": result.name or "run", "cell": result.name or "run", "seed": result.summary.get("seed")}


def _parquet_meta(result: RunResult) -> bytes:
    meta = {
        "format_version": FORMAT_VERSION,
        "units": [{"flow": e, "metric": m, "unit": u} for (e, m), u in result.units.items()],
    }
    return json.dumps(meta).encode()


def _strings(strings: list[str], type_: Any) -> Any:
    """A pyarrow (large) string array made from its buffers: ``pa.array`` of Python strings
    imports pandas (110 MB) to look for its missing values."""
    import numpy as np
    import pyarrow as pa

    enc = [x.encode("utf-8") for x in strings]
    width = np.int64 if type_ == pa.large_string() else np.int32
    offsets = np.zeros(len(enc) + 1, dtype=width)
    np.cumsum([len(e) for e in enc], out=offsets[1:])
    return pa.Array.from_buffers(type_, len(enc), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(enc))])


def _numbers(a: Any, type_: Any, nan_is_null: bool = False) -> Any:
    """A pyarrow array on a numpy array's buffer (NaN as null, as ``from_pandas`` makes it,
    when ``nan_is_null``), made from its buffers: ``pa.array`` imports pandas (110 MB)."""
    import numpy as np
    import pyarrow as pa

    a = np.ascontiguousarray(a, dtype=type_.to_pandas_dtype())
    validity, nulls = None, 0
    # The sum is NaN when a value is NaN (or when infinities cancel: then the exact count
    # below says); it needs no array of n booleans, and a J-K run's series have no NaN.
    # errstate: inf - inf and an overflowing sum are expected here, not worth a RuntimeWarning.
    with np.errstate(invalid="ignore", over="ignore"):
        maybe_nan = nan_is_null and len(a) and np.isnan(np.add.reduce(a))
    if maybe_nan:
        ok = ~np.isnan(a)
        nulls = len(a) - int(np.count_nonzero(ok))
        if nulls:
            validity = pa.py_buffer(np.packbits(ok, bitorder="little"))
    return pa.Array.from_buffers(type_, len(a), [validity, pa.py_buffer(a)], null_count=nulls)


#: Zeros for the label columns' dictionary indices (every row's label is the dictionary's
#: one string), a slice of which every row group shares; never written to.
_ZEROS: list[Any] = []


def _zero_codes(n: int) -> Any:
    import numpy as np
    import pyarrow as pa

    if not _ZEROS or len(_ZEROS[0]) < n:
        z = np.zeros(max(n, ROW_GROUP_ROWS), dtype=np.int32)
        z.flags.writeable = False
        _ZEROS[:] = [z]
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(_ZEROS[0][:n])], null_count=0)


def _label_arrays(labels: Mapping[str, Any], n: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    seed = labels.get("seed")
    zeros = _zero_codes(n)
    if seed is None:
        seed_arr = pa.nulls(n, pa.int64())
    else:
        big = seed >= 2**63
        seed_arr = _numbers(np.full(n, seed, dtype=np.uint64 if big else np.int64), pa.uint64() if big else pa.int64())
    # safe=False: the indices (all 0) are known to be in the one-string dictionary
    return {
        "run": pa.DictionaryArray.from_arrays(zeros, _strings([str(labels.get("run"))], pa.string()), safe=False),
        "cell": pa.DictionaryArray.from_arrays(zeros, _strings([str(labels.get("cell"))], pa.string()), safe=False),
        "seed": seed_arr,
    }


def labelled_table(result: RunResult) -> Any:
    """The tidy series as a pyarrow Table with the run's ``run``, ``cell`` and ``seed``
    columns first and, in the schema metadata under ``aqmlab``, the unit of each series.
    (The Parquet writer streams the same table a row group at a time: :func:`_stream_parquet`.)"""
    import pyarrow as pa

    ts = result.timeseries
    n = len(ts)
    table = pa.Table.from_pandas(ts, preserve_index=False)
    for i, (name, arr) in enumerate(_label_arrays(_labels(result), n).items()):
        table = table.add_column(i, name, arr)
    return table.replace_schema_metadata({**(table.schema.metadata or {}), PARQUET_META_KEY: _parquet_meta(result)})


def _codes_type(n_categories: int) -> str:
    """The integer type pandas gives the codes of a categorical with this many categories
    (``pandas.core.dtypes.cast.coerce_indexer_dtype``: below each type's maximum)."""
    for t, top in (("int8", 2**7 - 1), ("int16", 2**15 - 1), ("int32", 2**31 - 1)):
        if n_categories < top:
            return t
    return "int64"


@functools.lru_cache(maxsize=1)
def _pandas_version() -> str:
    """The installed pandas' version (read from its metadata once: 10 ms a time)."""
    from importlib.metadata import version

    return version("pandas")


@functools.lru_cache(maxsize=64)
def _tidy_schema_cached(n_entities: int, n_metrics: int, seed_type: str) -> Any:
    """The schema of the labelled tidy table (without the aqmlab metadata): the one
    ``pa.Table.from_pandas`` gives the tidy DataFrame plus the label columns, pandas metadata
    included, written out here so that writing a run's Parquet file does not import pandas
    (110 MB); tests/python/test_output.py checks it against ``from_pandas``."""
    import pyarrow as pa

    e_t, m_t = _codes_type(n_entities), _codes_type(n_metrics)

    def num(name: str) -> dict[str, Any]:
        return {"name": name, "field_name": name, "pandas_type": "float64", "numpy_type": "float64", "metadata": None}

    def cat(name: str, t: str, n: int) -> dict[str, Any]:
        meta = {"num_categories": n, "ordered": False}
        return {"name": name, "field_name": name, "pandas_type": "categorical", "numpy_type": t, "metadata": meta}

    pandas_meta = {
        "index_columns": [],
        "column_indexes": [],
        "columns": [num("time"), cat("flow", e_t, n_entities), cat("metric", m_t, n_metrics), num("value")],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": _pandas_version(),
    }
    seed = {"null": pa.int64(), "u64": pa.uint64(), "i64": pa.int64()}[seed_type]
    label = pa.dictionary(pa.int32(), pa.string())
    # pandas 3's string categories are Arrow large strings (pandas 2's objects: strings).
    text = pa.large_string() if int(pandas_meta["pandas_version"].split(".")[0]) >= 3 else pa.string()
    return pa.schema(
        [
            ("run", label), ("cell", label), ("seed", seed), ("time", pa.float64()),
            ("flow", pa.dictionary(getattr(pa, e_t)(), text)),
            ("metric", pa.dictionary(getattr(pa, m_t)(), text)),
            ("value", pa.float64()),
        ],
        metadata={b"pandas": json.dumps(pandas_meta).encode()},
    )


def tidy_batches(result: RunResult, rows: int = ROW_GROUP_ROWS) -> tuple[Any, Iterator[Any]]:
    """The labelled tidy table of a run with :attr:`RunResult.series_data` as its schema and
    an iterator of tables of ``rows`` rows each (the last shorter), made from the engine's
    buffers a slice at a time (never the whole table: a long run's series stay on disk)."""
    import numpy as np
    import pyarrow as pa

    data = result.series_data
    labels = _labels(result)
    entities, metrics, e_codes, m_codes = data.codes()
    seed = labels.get("seed")
    seed_type = "null" if seed is None else "u64" if seed >= 2**63 else "i64"
    schema = _tidy_schema_cached(len(entities), len(metrics), seed_type)
    schema = schema.with_metadata({**schema.metadata, PARQUET_META_KEY: _parquet_meta(result)})
    n, total = data.n_ticks, data.n_rows
    fields = {f.name: f.type for f in schema}
    e_dict = _strings(entities, fields["flow"].value_type)
    m_dict = _strings(metrics, fields["metric"].value_type)
    e_codes = e_codes.astype(fields["flow"].index_type.to_pandas_dtype())
    m_codes = m_codes.astype(fields["metric"].index_type.to_pandas_dtype())

    def batches() -> Iterator[Any]:
        for a in range(0, total, rows):
            b = min(a + rows, total)
            time, value, _ = data.rows(a, b, cols=False)
            # rows a..b are the end of column a // n, whole columns, the start of column (b-1) // n
            i0, i1 = a // n, (b - 1) // n
            lens = np.full(i1 + 1 - i0, n)
            lens[0] -= a - i0 * n
            lens[-1] -= (i1 + 1) * n - b
            flow, metric = np.repeat(e_codes[i0 : i1 + 1], lens), np.repeat(m_codes[i0 : i1 + 1], lens)
            arrays = _label_arrays(labels, b - a)
            arrays["time"] = _numbers(time, pa.float64(), nan_is_null=True)
            # safe=False: the codes index the categories they were made from (SeriesData.codes)
            arrays["flow"] = pa.DictionaryArray.from_arrays(_numbers(flow, fields["flow"].index_type), e_dict, safe=False)
            arrays["metric"] = pa.DictionaryArray.from_arrays(_numbers(metric, fields["metric"].index_type), m_dict, safe=False)
            arrays["value"] = _numbers(value, pa.float64(), nan_is_null=True)
            yield pa.Table.from_arrays([arrays[f.name] for f in schema], schema=schema)

    return schema, batches()


def _stream_parquet(result: RunResult, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema, batches = tidy_batches(result)
    # Through a 1 MiB buffer: given the path, the writer made one write(2) per page and
    # column chunk and an lseek(2) per position query (about 250 system calls per J-K run).
    with pa.OSFile(str(path), "wb") as raw, pa.BufferedOutputStream(raw, 1 << 20) as f:
        with pq.ParquetWriter(f, schema, **PARQUET_OPTIONS) as w:
            for t in batches:
                w.write_table(t, row_group_size=ROW_GROUP_ROWS)
    # Arrow's allocator keeps what the encoders freed for reuse (10 MB for a 1,000-flow run);
    # the writers that follow (plot, report.html) are not Arrow's: give it back (0.3 ms) after a
    # file of more than two row groups. Not after a smaller one (a suite's short runs): the
    # next run's writer would fault the same pages in again (2 MB huge pages, cleared by the
    # kernel: about 2 ms of a J-K run's CPU), and what is kept is at most two row groups' worth.
    if result.series_data.n_rows > 2 * ROW_GROUP_ROWS:
        pa.default_memory_pool().release_unused()


@writer("parquet", file=PARQUET)
def write_parquet(result: RunResult, path: Path) -> None:
    """The labelled tidy table; a run's engine series (:attr:`RunResult.series_data`) are
    written a row group at a time straight from the engine's buffers, so a long run needs no
    more memory than a short one; a result built from a DataFrame goes through
    :func:`labelled_table`. Both give the same file."""
    import pyarrow.parquet as pq

    if result.engine_series is not None and result.engine_series.keys:
        _stream_parquet(result, path)
    else:
        pq.write_table(labelled_table(result), path, row_group_size=ROW_GROUP_ROWS, **PARQUET_OPTIONS)


TIDY_COLUMNS_CSV = ["time", "flow", "metric", "value"]
#: Rows of timeseries.csv formatted at once: about 2 MB of text and 1.5 MB of numbers.
CSV_BLOCK_ROWS = 1 << 16


@writer("csv", file=CSV)
def write_csv(result: RunResult, path: Path) -> None:
    """The tidy table as CSV; a run's engine series are written a block of rows at a time."""
    data = result.series_data
    if data is None or not data.keys or result._timeseries is not None:
        result.timeseries.to_csv(path, index=False, lineterminator="\n")
        return
    import csv as csvmod
    import io

    import numpy as np

    def middle(e: str, m: str) -> str:
        # ",<flow>,<metric>," as pandas' to_csv quotes them (csv.QUOTE_MINIMAL with its
        # lineterminator "\n": a name with a newline is quoted, an empty one left empty)
        buf = io.StringIO()
        csvmod.writer(buf, lineterminator="\n").writerow([e, m])
        return f",{buf.getvalue()[:-1]},"

    from . import _sim

    # Each row is "<time>,<flow>,<metric>,<value>"; the middle is one string per column.
    rows_text = _sim.CsvRows([middle(e, m) for e, m in data.keys])
    total = data.n_rows
    # The extension writes each number as pandas' to_csv does for a float64 column: numpy's
    # str() of the value, which is Python's repr() of the float, and NaN as the empty string
    # (pandas.core.internals.blocks.get_values_for_csv). It was repr() in Python, a value at a
    # time: about 17 minutes for the 100 M rows of a 100,000-flow run.
    rows = CSV_BLOCK_ROWS
    with open(path, "wb") as f:
        f.write((",".join(TIDY_COLUMNS_CSV) + "\n").encode())
        for a in range(0, total, rows):
            time, value, col = data.rows(a, a + rows)
            f.write(
                rows_text.format(
                    np.ascontiguousarray(time, dtype=np.float64).tobytes(),
                    np.ascontiguousarray(value, dtype=np.float64).tobytes(),
                    np.ascontiguousarray(col, dtype=np.int64).tobytes(),
                )
            )


@writer("plot", file=PLOT)
def write_plot(result: RunResult, path: Path) -> None:
    from . import plot as _plot  # matplotlib only where a plot is made

    _plot.plot_throughput_rtt(result, path)


def _flent_file_name(result: RunResult) -> str:
    from . import flentfile

    return flentfile.file_name(result)


@writer("flent", file=FLENT, file_for=_flent_file_name)
def write_flent(result: RunResult, path: Path) -> None:
    from . import flentfile  # numpy only where a flent file is made

    flentfile.write(result, path)


#: What the html writer needs besides the result, set by :func:`write_outputs`: ``files``
#: (every file name the run directory will hold) and ``js_src`` (None: inline plotly.js).
_HTML_CONTEXT: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("aqmlab_html_context", default={})


@writer("html", file=HTML)
def write_html(result: RunResult, path: Path) -> None:
    from . import htmlreport  # plotly only where a report is made

    ctx = _HTML_CONTEXT.get()
    files = ctx.get("files") or [HTML, SUMMARY]
    # written a piece at a time (the plot data a trace at a time): the page is never held whole
    with open(path, "w", encoding="utf-8") as f:
        for part in htmlreport.run_report_parts(result, files, ctx.get("js_src")):
            f.write(part)


def json_indent2(obj: Any) -> str:
    """``json.dumps(obj, indent=2, allow_nan=False)``, character for character, about 30x faster.

    With ``indent`` set, the standard library encodes in pure Python (its C encoder serves
    only ``indent=None``): about 8 ms of a J-K suite run's 30 for a 15 kB summary.json, and
    still 0.7 ms with a Python encoder of plain data. Plain JSON data (dicts with string keys,
    lists, str, int, finite floats, bool, None: what ``json.loads`` makes) is encoded by the
    extension (``_sim.json_indent2``); anything else, NaN included, goes to ``json.dumps``,
    which encodes or rejects it as before. tests/python/test_output.py compares the two."""
    from ._sim import json_indent2 as plain_json_indent2

    text = plain_json_indent2(obj)
    return text if text is not None else json.dumps(obj, indent=2, allow_nan=False)


def summary_document(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What summary.json holds: ``format_version`` first, then the summary in engine order.
    For a summary of plain JSON data (what ``json.loads`` makes: every run's, which is the
    engine's JSON parsed, plus its name), ``json.loads`` of summary.json gives this dict back:
    same keys in the same order, same types, same values."""
    return {"format_version": FORMAT_VERSION, **{k: v for k, v in summary.items() if k != "format_version"}}


def summary_text(summary: Mapping[str, Any]) -> str:
    """summary.json's text (:func:`summary_document`, indented by 2)."""
    return json_indent2(summary_document(summary)) + "\n"


#: The writers that draw from :func:`aqmlab.seriesview.view` (written first; see write_outputs).
VIEW_WRITERS = ("plot", "html")


def write_outputs(
    result: RunResult,
    out_dir: Path,
    *,
    plot: bool = True,
    csv: bool = True,
    flent: bool = True,
    html: bool = True,
    formats: Iterable[str] | None = None,
    command: str | None = None,
    html_js: str | None = None,
) -> list[Path]:
    """Writes the files of the writers in ``formats`` (default: every registered writer,
    less ``csv``, ``plot``, ``flent`` or ``html`` when that argument is False): those of
    :data:`VIEW_WRITERS` first, the others in registration order; then manifest.json
    (``command``: the command line that made the run; it lists the files in registration
    order) and, last, summary.json. ``html_js``: where report.html loads plotly.js from (a relative path; None
    inlines it)."""
    names = list(WRITERS) if formats is None else list(formats)
    unknown = [n for n in names if n not in WRITERS]
    if unknown:
        raise ValueError(f"unknown output format {', '.join(unknown)} (known: {', '.join(WRITERS)})")
    skip = {n for n, on in (("csv", csv), ("plot", plot), ("flent", flent), ("html", html)) if not on}
    out_dir.mkdir(parents=True, exist_ok=True)
    active = [w for w in WRITERS.values() if w.name in names and w.name not in skip]
    planned = ([SCENARIO] if (out_dir / SCENARIO).is_file() else []) + [w.filename(result) for w in active] + [MANIFEST, SUMMARY]
    token = _HTML_CONTEXT.set({"files": planned, "js_src": html_js})
    try:
        from .api import release_memory

        # The writers of the series view (seriesview.view, kept on the result) first, then the
        # view goes, then the others: matplotlib's and pyarrow's libraries stay loaded once
        # imported, so the view and the figure are made before pyarrow's 40 MB are there
        # (issue 15: 9 MB less peak RSS for 1000 flows). The files and manifest.json are the
        # same; manifest.json lists them in registration order as before.
        first = [w for w in active if w.name in VIEW_WRITERS]
        for w in first + [w for w in active if w.name not in VIEW_WRITERS]:
            p = out_dir / w.filename(result)
            with atomic_path(p) as tmp:
                w.write(result, tmp)
            if first and w is first[-1]:
                result.__dict__.pop("_series_view", None)
            release_memory()  # what this writer freed, before the next one's libraries load
        written: list[Path] = [out_dir / w.filename(result) for w in active]
    finally:
        _HTML_CONTEXT.reset(token)
        # the plot's and the page's bounded view of the series (seriesview.view keeps it on the
        # result for the writers that follow): not kept beyond the writing
        result.__dict__.pop("_series_view", None)

    summary = summary_text(result.summary)
    hashed = ([out_dir / SCENARIO] if (out_dir / SCENARIO).is_file() else []) + written
    if result.summary.get("capture"):  # the engine's captures of this run (--pcap)
        hashed += [out_dir / f for f in (CLI_PCAP, SRV_PCAP) if (out_dir / f).is_file()]
    files = {p.name: sha256_file(p) for p in hashed}
    files[SUMMARY] = hashlib.sha256(summary.encode("utf-8")).hexdigest()
    p = out_dir / MANIFEST
    atomic_write_text(p, manifest_text(result.summary, files, command))
    written.append(p)

    p = out_dir / SUMMARY
    atomic_write_text(p, summary)
    written.append(p)
    _fsync_dir(out_dir)
    return written


# --------------------------------------------------------------------------------------
# Provenance
# --------------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def source_commit() -> str | None:
    """The git commit of the aqmlab source this package runs from (``<sha>`` or
    ``<sha>-dirty``), or None outside a git checkout (an installed wheel) or without git."""
    here = Path(__file__).resolve().parent
    # GIT_OPTIONAL_LOCKS=0: `git status` then takes no index.lock, so a worker stopped
    # while it runs (its git child killed) leaves no stale lock in the user's repository.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        sha = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True, env=env
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True, env=env,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None


def manifest(summary: Mapping[str, Any], files: Mapping[str, str], command: str | None) -> dict[str, Any]:
    """manifest.json's content. It holds nothing that changes between two runs of the same
    command at the same source (no clock time, no host name), so reruns stay byte-identical."""
    from . import __version__
    from ._sim import __version__ as engine_version

    flows = summary.get("flows", [])
    return {
        "format_version": FORMAT_VERSION,
        "aqmlab_version": __version__,
        "engine_version": engine_version,
        "git_commit": source_commit(),
        "command": command,
        "name": summary.get("name"),
        "seed": summary.get("seed"),
        "stack": summary.get("stack"),
        "sim_seconds": summary.get("sim_seconds"),
        "steady_windows_s": {f["name"]: [f.get("steady_from_s"), f.get("steady_to_s")] for f in flows},
        "warnings": list(summary.get("warnings", [])),
        "files": dict(files),
    }


def remove_temporaries(run_dir: Path) -> None:
    """Removes the temporary files (``.<name>.*.tmp``) an interrupted write left in run_dir."""
    for p in run_dir.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            p.unlink()


def manifest_text(summary: Mapping[str, Any], files: Mapping[str, str], command: str | None) -> str:
    return json_indent2(manifest(summary, files, command)) + "\n"


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def summary_version(summary: Mapping[str, Any], where: str = "summary.json") -> int:
    """The ``format_version`` of a summary (0 when absent: written before the field existed).

    Raises :class:`SummaryFormatError` for a version newer than :data:`FORMAT_VERSION` or
    a value that is not a non-negative integer.
    """
    v = summary.get("format_version", 0)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SummaryFormatError(f"{where}: format_version {v!r} is not a non-negative integer")
    if v > FORMAT_VERSION:
        raise SummaryFormatError(
            f"{where}: format_version {v} is newer than this aqmlab reads ({FORMAT_VERSION}); "
            "use a newer aqmlab, or run again with --force"
        )
    return v


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's summary.json, or None when it is absent or not valid JSON (a run that
    has not finished); raises :class:`SummaryFormatError` when its format is newer."""
    path = run_dir / SUMMARY
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict):
        return None
    summary_version(summary, str(path))
    return summary
