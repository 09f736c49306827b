"""Python API: ``aqmlab.run(...) -> RunResult``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from typing import TYPE_CHECKING

from . import _sim
from ._sim import ScenarioError

if TYPE_CHECKING:  # pandas is imported where a DataFrame is made, so `aqmlab check` starts fast
    import pandas as pd

ScenarioSource = Union[str, os.PathLike, Mapping[str, Any]]

#: Columns of the tidy time-series table, in order.
TIDY_COLUMNS = ["time", "flow", "metric", "value"]

#: The engine hands the series over in chunks of this many values (ticks x columns, 2 MB)
#: while it runs; a run with fewer keeps them in memory.
CHUNK_VALUES = 1 << 18


@dataclass
class RunResult:
    """The outcome of one simulation run.

    ``summary`` is the engine's summary as a dict (keys in engine order, the same content as
    ``summary.json``); ``timeseries`` is a tidy DataFrame with columns ``time`` (s),
    ``flow`` (the entity: a flow name or ``"bottleneck"``), ``metric`` and ``value``;
    ``units`` maps ``(flow, metric)`` to the unit of its values.
    """

    summary: dict[str, Any]
    #: The tidy DataFrame; for a run made by :func:`run` it is built on first use from
    #: ``series_data`` (the writers read ``series_data`` directly).
    timeseries: pd.DataFrame
    units: dict[tuple[str, str], str] = field(default_factory=dict)
    name: str | None = None
    #: Which run of what this is: ``run`` (a suite run's directory below ``runs/``, else the
    #: run's name), ``cell`` (the suite cell; a single run is its own) and ``seed``. The
    #: Parquet file carries them as columns so that a whole suite globs into one table.
    labels: dict[str, Any] = field(default_factory=dict)
    #: The scenario TOML as given (before ``overrides``), and the ``key=value`` overrides
    #: applied to it; None / empty when the result was built by hand.
    scenario: str | None = None
    overrides: list[str] = field(default_factory=list)
    #: The series as the engine gave them (:class:`SeriesData`), or None for a result built
    #: from a DataFrame (:func:`aqmlab.load`, by hand).
    series_data: SeriesData | None = field(default=None, repr=False, compare=False)

    @property
    def engine_series(self) -> SeriesData | None:
        """The engine's series when they are what this result holds (no DataFrame set in their
        place), read directly by the writers; None otherwise."""
        return self.series_data if self._timeseries is None else None

    @property
    def flows(self) -> list[str]:
        """Flow names in engine order."""
        return [f["name"] for f in self.summary.get("flows", [])]

    @property
    def metrics(self) -> list[tuple[str, str]]:
        """Every ``(flow, metric)`` pair that has a series, in engine order."""
        return list(self.units)

    def series(self, entity: str, metric: str) -> pd.Series:
        """One series as a ``pd.Series`` indexed by time (s), e.g. ``series("cubic-0", "srtt")``."""
        import pandas as pd

        if (entity, metric) not in self.units:
            known = ", ".join(f"{e}/{m}" for e, m in self.units)
            raise KeyError(f"no series {entity}/{metric} (known: {known})")
        import numpy as np

        data = self.engine_series
        if data is not None and data.keys.count((entity, metric)) == 1:
            v = data.column(data.keys.index((entity, metric)))
            s = pd.Series(np.array(v), index=pd.Index(data.time(), name="time"))
            s.name = f"{entity}/{metric}"
            return s
        ts = self.timeseries
        sel = ts[(ts["flow"] == entity) & (ts["metric"] == metric)]
        s = pd.Series(sel["value"].to_numpy(), index=pd.Index(sel["time"].to_numpy(), name="time"))
        s.name = f"{entity}/{metric}"
        return s

    def wide(self) -> pd.DataFrame:
        """The series as one wide DataFrame: index time, columns ``(flow, metric)``."""
        ts = self.timeseries
        return ts.pivot_table(
            index="time", columns=["flow", "metric"], values="value", dropna=False, observed=True, sort=False
        )

    def summary_json(self, indent: int | None = 2) -> str:
        """The summary as JSON text (keys in engine order)."""
        return json.dumps(self.summary, indent=indent, allow_nan=False)


def _get_timeseries(self: RunResult) -> pd.DataFrame:
    if self._timeseries is None and self.series_data is not None:
        self._timeseries = self.series_data.tidy()
    return self._timeseries


def _set_timeseries(self: RunResult, value: pd.DataFrame | None) -> None:
    self._timeseries = value


# The dataclass field ``timeseries`` is a property: built from ``series_data`` on first use,
# so a run whose series only go to files never makes the DataFrame.
RunResult._timeseries = None  # type: ignore[attr-defined]
RunResult.timeseries = property(_get_timeseries, _set_timeseries, doc=RunResult.__doc__)  # type: ignore[assignment]


def _is_path_string(s: str) -> bool:
    """A one-line string naming an existing file, or ending in ``.toml`` and not TOML itself."""
    if "\n" in s or not s.strip():
        return False
    if Path(s).is_file():
        return True
    return s.endswith(".toml") and "=" not in s


def load_scenario(source: ScenarioSource) -> tuple[str, str | None, str | None]:
    """Resolves a scenario source to ``(toml_text, error_prefix, default_name)``.

    A mapping is serialised with ``tomli_w``; a ``Path``/``os.PathLike``, or a one-line
    string that names a file (or ends in ``.toml``), is read from disk; any other string
    is TOML text.
    """
    if isinstance(source, Mapping):
        import tomli_w

        try:
            return tomli_w.dumps(dict(source)), None, None
        except TypeError as e:  # values tomli_w cannot encode
            raise ScenarioError(f"cannot convert scenario dict to TOML: {e}") from None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _is_path_string(source)):
        path = Path(source)
        shown = os.fspath(source)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ScenarioError(f"{shown}: no such file") from None
        except IsADirectoryError:
            raise ScenarioError(f"{shown}: is a directory, not a scenario file") from None
        except PermissionError:
            raise ScenarioError(f"{shown}: permission denied") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ScenarioError(f"{shown}: not UTF-8 text (byte {e.start})") from None
        return text, shown, path.stem
    if isinstance(source, str):
        return source, None, None
    raise TypeError(f"scenario must be a path, a dict or TOML text, not {type(source).__name__}")


class SeriesData:
    """A run's series as the engine gave them: ``keys`` (``(entity, metric)`` per column, in
    engine order), ``units``, and the values on the shared time grid, column after column,
    either in memory or, for a run long enough to have streamed them (``api.run``'s
    ``spill_dir``), partly in an unlinked spill file read back a column at a time, so that
    nothing needs the whole run's series in memory at once.

    The tidy table is one block of rows per column (``time``, ``flow``, ``metric``,
    ``value``), columns in engine order: :meth:`blocks` yields it in that order, bounded in
    size, for the writers; :meth:`tidy` builds it whole.
    """

    def __init__(
        self,
        keys: list[tuple[str, str]],
        units: list[str],
        time: Any,
        values: Any,
        first_tick: int = 0,
        spill: list[tuple[int, int, int, int]] | None = None,
        spill_file: Any = None,
    ) -> None:
        import numpy as np

        self.keys = keys
        self.units = units
        self._tail_time = np.asarray(time, dtype=np.float64)
        self._tail = np.asarray(values, dtype=np.float64).reshape(len(keys), len(self._tail_time))
        self._first_tick = first_tick
        self._spill = list(spill or [])
        self._file = spill_file
        self.n_ticks = first_tick + len(self._tail_time)

    @property
    def n_rows(self) -> int:
        """Rows of the tidy table: one per tick and series."""
        return self.n_ticks * len(self.keys)

    @classmethod
    def from_columns(cls, time: Any, columns: list[tuple[str, str, str, Any]]) -> SeriesData:
        """From ``(entity, metric, unit, values)`` columns on one time grid."""
        import numpy as np

        t = np.asarray(time, dtype=np.float64)
        vals = np.concatenate([np.asarray(c[3], dtype=np.float64) for c in columns]) if columns else np.zeros(0)
        return cls([(c[0], c[1]) for c in columns], [c[2] for c in columns], t, vals)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a result sent between processes) with every value in memory: the spill
        file does not travel."""
        state = dict(self.__dict__)
        if self._spill:
            state.update(_tail_time=self.time(), _tail=self.all_values().reshape(len(self.keys), -1), _first_tick=0, _spill=[], _file=None)
        return state

    @property
    def streamed(self) -> bool:
        """Whether part of the series is in the spill file."""
        return bool(self._spill)

    def _read(self, offset: int, count: int) -> Any:
        import numpy as np

        raw = os.pread(self._file.fileno(), 8 * count, offset)
        if len(raw) != 8 * count:
            raise OSError("the series spill file is shorter than its index")
        return np.frombuffer(raw, dtype=np.float64)

    def time(self, start: int = 0, stop: int | None = None) -> Any:
        """The time grid (s), or its ticks ``start:stop``."""
        import numpy as np

        stop = self.n_ticks if stop is None else stop
        parts = [self._read(off, n)[max(start - first, 0) : max(stop - first, 0)] for off, first, n, _ in self._spill if first < stop and first + n > start]
        parts.append(self._tail_time[max(start - self._first_tick, 0) : max(stop - self._first_tick, 0)])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def column(self, i: int, start: int = 0, stop: int | None = None) -> Any:
        """Column ``i``'s values (its ticks ``start:stop``); NaN where it had no value."""
        import numpy as np

        stop = self.n_ticks if stop is None else stop
        parts = []
        for off, first, n, ncols in self._spill:
            if first >= stop or first + n <= start:
                continue
            a, b = max(start - first, 0), min(stop - first, n)
            if i < ncols:  # a column registered after this chunk (a qdisc swap) is NaN there
                parts.append(self._read(off + 8 * (n * (1 + i) + a), b - a))
            else:
                parts.append(np.full(b - a, np.nan))
        parts.append(self._tail[i, max(start - self._first_tick, 0) : max(stop - self._first_tick, 0)])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _block(self, c0: int, c1: int, lo: int, hi: int) -> Any:
        """Columns ``c0:c1`` over ticks ``lo:hi`` as a 2-D array (column, tick)."""
        import numpy as np

        parts = []
        for off, first, n, ncols in self._spill:
            if first >= hi or first + n <= lo:
                continue
            a, b = max(lo - first, 0), min(hi - first, n)
            have = max(min(c1, ncols) - c0, 0)
            part = np.full((c1 - c0, b - a), np.nan)
            if have:
                part[:have] = self._read(off + 8 * n * (1 + c0), n * have).reshape(have, n)[:, a:b]
            parts.append(part)
        parts.append(self._tail[c0:c1, max(lo - self._first_tick, 0) : max(hi - self._first_tick, 0)])
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def all_values(self) -> Any:
        """Every column's values one after the other (the tidy table's ``value``)."""
        import numpy as np

        if not self._spill:
            return self._tail.reshape(-1)
        return np.concatenate([self.column(i) for i in range(len(self.keys))])

    def index(self) -> dict[tuple[str, str], int]:
        """Each ``(entity, metric)``'s column index (the first of a repeated key)."""
        out: dict[tuple[str, str], int] = {}
        for i, k in enumerate(self.keys):
            out.setdefault(k, i)
        return out

    def columns(self) -> dict[tuple[str, str], Any]:
        """Every column as an array, by ``(entity, metric)`` (the first of a repeated key)."""
        return {k: self.column(i) for k, i in self.index().items()}

    def rows(self, a: int, b: int, cols: bool = True) -> tuple[Any, Any, Any]:
        """Rows ``a:b`` of the tidy table (one block of rows per column, column after column)
        as ``(time, value, column index)`` arrays (the column index None when not ``cols``)."""
        import numpy as np

        n, total = self.n_ticks, self.n_rows
        b = min(b, total)
        if a == 0 and b == total and not self._spill:  # the whole table, from the buffers
            return np.tile(self.time(), len(self.keys)), self.all_values(), np.repeat(np.arange(len(self.keys)), n) if cols else None
        if a >= b:
            return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.intp) if cols else None
        i0, s0 = divmod(a, n)
        i1, s1 = divmod(b - 1, n)
        lo, hi = (0, n) if i1 > i0 else (s0, s1 + 1)
        if (i1 + 1 - i0) * (hi - lo) <= 2 * (b - a):
            # Many short columns: one read per spill chunk for all of them (the columns of a
            # chunk are contiguous in the file), instead of one per column and chunk. Only where
            # that reads at most twice the rows asked for: two long columns were read whole (with
            # the time grid tiled and the column index repeated: 9 MB for a 128 Ki-row group of a
            # 200,001-tick run), which made the Parquet writer's peak grow with the duration.
            block = self._block(i0, i1 + 1, lo, hi).reshape(-1)
            first, last = s0 - lo, (i1 - i0) * (hi - lo) + s1 - lo + 1
            t = np.tile(self.time(lo, hi), i1 + 1 - i0)[first:last]
            col = np.repeat(np.arange(i0, i1 + 1), hi - lo)[first:last] if cols else None
            return t, block[first:last], col
        times, values, idx, lens = [], [], [], []
        r = a
        while r < b:  # the pieces of columns rows a..b cover
            i, start = divmod(r, n)
            stop = min(n, start + (b - r))
            times.append(self.time(start, stop))
            values.append(self.column(i, start, stop))
            idx.append(i)
            lens.append(stop - start)
            r += stop - start
        col = np.repeat(np.array(idx, dtype=np.intp), lens) if cols else None
        return np.concatenate(times), np.concatenate(values), col

    def codes(self) -> tuple[list[str], list[str], Any, Any]:
        """The entity and metric categories (in order of first appearance) and each column's
        codes into them."""
        import numpy as np

        e_index: dict[str, int] = {}
        m_index: dict[str, int] = {}
        e_codes = np.array([e_index.setdefault(e, len(e_index)) for e, _ in self.keys], dtype=np.int32)
        m_codes = np.array([m_index.setdefault(m, len(m_index)) for _, m in self.keys], dtype=np.int32)
        return list(e_index), list(m_index), e_codes, m_codes

    def tidy(self) -> pd.DataFrame:
        """The tidy DataFrame: ``time``, ``flow`` and ``metric`` (categoricals) and ``value``."""
        import numpy as np
        import pandas as pd

        if not self.keys:
            return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(TIDY_COLUMNS, ["f8", "str", "str", "f8"])})
        n = self.n_ticks
        entities, metrics, e_codes, m_codes = self.codes()
        values = self.all_values()
        return pd.DataFrame(
            {
                "time": np.tile(self.time(), len(self.keys)),
                "flow": pd.Categorical.from_codes(np.repeat(e_codes, n), categories=entities),
                "metric": pd.Categorical.from_codes(np.repeat(m_codes, n), categories=metrics),
                "value": values,
            }
        )


def _tidy(time: list[float], columns: list[tuple[str, str, str, list[float]]]) -> pd.DataFrame:
    return SeriesData.from_columns(time, columns).tidy()


#: glibc's ``malloc_trim`` (None: not looked up yet; False: none, or this process keeps its
#: freed memory: :func:`keep_freed_memory`).
_TRIM: Any = None


def keep_freed_memory() -> None:
    """Makes :func:`release_memory` do nothing in this process from now on: a process that runs
    many runs one after another (a suite's worker, or the suite process with ``-j 1``) keeps
    its freed memory for the next run (``runner._keep_freed_memory``: glibc's mmap and trim
    thresholds), and a ``malloc_trim`` after the engine and after each writer would give it
    all back: about 1,000 page faults and 3 ms of system CPU per J-K run again."""
    global _TRIM
    _TRIM = False


def release_memory() -> None:
    """Gives the C heap's free pages back to the system (glibc's ``malloc_trim(0)``; nothing
    elsewhere). glibc keeps what is freed for reuse: after a run the engine's freed state
    (17 MB of a 1000-flow run's 51 MB, much of it in the engine thread's own arena, which is
    never trimmed by itself) and after a writer what it freed (Arrow's buffers under
    ``ARROW_DEFAULT_MEMORY_POOL=system``, a plot's arrays) stay in the process's RSS, and the
    next writer's libraries and arrays add to them. Called after the engine returns and
    between writers (about 1 ms on a 100 MB heap; docs/performance.md, "Session 6: memory and
    start-up"); not in a process that keeps its freed memory (:func:`keep_freed_memory`)."""
    global _TRIM
    if _TRIM is None:
        _TRIM = False
        import sys

        if sys.platform.startswith("linux"):
            import ctypes

            try:
                _TRIM = ctypes.CDLL(None).malloc_trim
                _TRIM.argtypes = [ctypes.c_size_t]
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                _TRIM = False
    if _TRIM:
        _TRIM(0)


class InternalError(RuntimeError):
    """The engine failed where it should not (a bug): the message names what failed."""


def _call_engine(fn: Any, *args: Any) -> Any:
    """Calls into the engine; a Rust panic (pyo3's PanicException, a BaseException) becomes
    one :class:`InternalError` with a one-line message instead of escaping every handler."""
    try:
        return fn(*args)
    except (ScenarioError, OSError, ValueError, RuntimeError, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001 - PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        msg = " ".join(str(e).split()) or "panic"
        raise InternalError(f"internal error: {msg} (a bug in the engine; please report it with the scenario)") from None


def resolve(scenario: ScenarioSource, seed: int | None = None, overrides: Iterable[str] = ()) -> str:
    """The scenario :func:`run` would run, as TOML text: ``overrides`` (``key=value``, as
    ``--set``) and ``seed`` written in, checked as a run checks it (raises
    :class:`aqmlab.ScenarioError`); runs nothing. Keys left out keep their defaults."""
    if isinstance(overrides, str):
        overrides = [overrides]
    text, prefix, _ = load_scenario(scenario)
    try:
        return _call_engine(_sim.resolve, text, None if seed is None else int(seed), [str(o) for o in overrides])
    except ScenarioError as e:
        if prefix is not None:
            raise ScenarioError(f"{prefix}: {e}") from None
        raise


def run(
    scenario: ScenarioSource,
    seed: int | None = None,
    overrides: Iterable[str] = (),
    name: str | None = None,
    pcap: tuple[str | os.PathLike, str | os.PathLike] | None = None,
    pcap_flows: Iterable[str] = (),
    pcap_snaplen: int = 128,
    progress: Callable[[float], Any] | None = None,
    control: _sim.RunControl | None = None,
    spill_dir: str | os.PathLike | None = None,
) -> RunResult:
    """Runs one scenario and returns its :class:`RunResult`.

    ``scenario`` is a path to a TOML file, TOML text, or a dict with the same structure.
    ``seed`` replaces the scenario's seed; ``overrides`` are ``key=value`` assignments
    applied before validation (like the CLI's ``--set``, e.g. ``"duration=5s"``,
    ``"flows[0].rtt=40ms"``); ``name`` labels the run (default: the scenario's ``name``,
    else the file's stem). ``pcap=(cli_path, srv_path)`` writes packet captures of the client
    side and the server side (classic pcap, nanosecond timestamps; see docs/pcap.md),
    limited to the endpoints named in ``pcap_flows`` if any, each frame cut at
    ``pcap_snaplen`` bytes. Bad input raises :class:`aqmlab.ScenarioError` (a ``ValueError``)
    whose message is one line, prefixed with the file name when read from a file.

    ``progress``, if given, is called with the fraction of simulated time done (0.0 to 1.0,
    increasing, the last call 1.0) once per sampling step (``[metrics] step``), from the
    calling thread; an exception it raises stops the run and propagates. ``control`` (an
    :class:`aqmlab.RunControl`) lets another thread read ``control.progress`` and stop the run
    with ``control.cancel()``, which makes this call raise :class:`aqmlab.RunCancelled`.
    Ctrl-C (``KeyboardInterrupt``) stops a run at the next step too.

    The series are streamed out of the engine while it runs: once more than
    :data:`CHUNK_VALUES` values are held they go, a chunk at a time, to an unlinked
    temporary file in ``spill_dir`` (default: the system's temporary directory), so that a
    run's memory does not grow with its simulated duration; :attr:`RunResult.series_data`
    reads them back a column at a time, and the file disappears with the result.
    """
    if isinstance(overrides, str):
        overrides = [overrides]
    overrides = [str(o) for o in overrides]
    if seed is not None:
        seed = int(seed)
        if seed < 0 or seed >= 2**64:
            raise ScenarioError(f"seed: {seed} is out of range 0..2^64-1")
    text, prefix, default_name = load_scenario(scenario)
    if isinstance(pcap_flows, str):
        pcap_flows = [pcap_flows]
    pcap_flows = [str(f) for f in pcap_flows]
    pcap_paths = None if pcap is None else (os.fspath(pcap[0]), os.fspath(pcap[1]))
    if not 1 <= int(pcap_snaplen) <= 262144:
        raise ScenarioError(f"pcap snap length {pcap_snaplen}: expected 1..262144")
    import tempfile

    # The spill file is unlinked at once: a killed run leaves nothing behind.
    spill = tempfile.TemporaryFile(dir=None if spill_dir is None else os.fspath(spill_dir), prefix=".series.", suffix=".tmp")
    try:
        summary_json, (keys, time, values, first_tick, index) = _call_engine(
            _sim.run, text, seed, overrides, pcap_paths, pcap_flows, int(pcap_snaplen), progress, control,
            spill.fileno(), CHUNK_VALUES,
        )
    except ScenarioError as e:
        spill.close()
        if prefix is not None:
            raise ScenarioError(f"{prefix}: {e}") from None
        raise
    except BaseException:
        spill.close()
        raise
    if not index:
        spill.close()
        spill = None
    release_memory()  # the engine's freed state (its thread's arena is never trimmed otherwise)
    summary = json.loads(summary_json)
    err = (summary.get("capture") or {}).get("error")
    if err:
        raise OSError(f"writing the packet capture failed: {err}")
    if name is not None:
        summary["name"] = name
    elif summary.get("name") is None and default_name is not None:
        summary["name"] = default_name
    import numpy as np

    data = SeriesData(
        [(e, m) for e, m, _ in keys], [u for _, _, u in keys], np.frombuffer(time, dtype=np.float64),
        np.frombuffer(values, dtype=np.float64), first_tick, index, spill,
    )
    units = {(e, m): u for e, m, u in keys}
    run_name = summary.get("name") or "run"
    labels = {"run": run_name, "cell": run_name, "seed": summary.get("seed")}
    return RunResult(
        summary=summary, timeseries=None, units=units, name=summary.get("name"),
        labels=labels, scenario=text, overrides=overrides, series_data=data,
    )
