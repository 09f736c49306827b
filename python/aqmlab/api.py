"""Python API: ``aqmlab.run(...) -> RunResult``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
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


@dataclass
class RunResult:
    """The outcome of one simulation run.

    ``summary`` is the engine's summary as a dict (keys in engine order, the same content as
    ``summary.json``); ``timeseries`` is a tidy DataFrame with columns ``time`` (s),
    ``flow`` (the entity: a flow name or ``"bottleneck"``), ``metric`` and ``value``;
    ``units`` maps ``(flow, metric)`` to the unit of its values.
    """

    summary: dict[str, Any]
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


def _tidy(time: list[float], columns: list[tuple[str, str, str, list[float]]]) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    t = np.asarray(time, dtype=np.float64)
    n = len(t)
    if not columns:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(TIDY_COLUMNS, ["f8", "str", "str", "f8"])})
    # Codes by dict look-up: linear in the number of columns (list.index made 20k flows quadratic).
    e_index: dict[str, int] = {}
    m_index: dict[str, int] = {}
    e_codes = [e_index.setdefault(c[0], len(e_index)) for c in columns]
    m_codes = [m_index.setdefault(c[1], len(m_index)) for c in columns]
    entities, metrics = list(e_index), list(m_index)
    e_code = np.repeat(np.array(e_codes, dtype=np.int32), n)
    m_code = np.repeat(np.array(m_codes, dtype=np.int32), n)
    values = np.concatenate([np.asarray(c[3], dtype=np.float64) for c in columns])
    return pd.DataFrame(
        {
            "time": np.tile(t, len(columns)),
            "flow": pd.Categorical.from_codes(e_code, categories=entities),
            "metric": pd.Categorical.from_codes(m_code, categories=metrics),
            "value": values,
        }
    )


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
        raise InternalError(f"internal error in the engine: {msg} (please report it with the scenario)") from None


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
    try:
        summary_json, time, columns = _call_engine(
            _sim.run, text, seed, overrides, pcap_paths, pcap_flows, int(pcap_snaplen), progress, control
        )
    except ScenarioError as e:
        if prefix is not None:
            raise ScenarioError(f"{prefix}: {e}") from None
        raise
    summary = json.loads(summary_json)
    err = (summary.get("capture") or {}).get("error")
    if err:
        raise OSError(f"writing the packet capture failed: {err}")
    if name is not None:
        summary["name"] = name
    elif summary.get("name") is None and default_name is not None:
        summary["name"] = default_name
    units = {(c[0], c[1]): c[2] for c in columns}
    run_name = summary.get("name") or "run"
    labels = {"run": run_name, "cell": run_name, "seed": summary.get("seed")}
    return RunResult(
        summary=summary, timeseries=_tidy(time, columns), units=units, name=summary.get("name"),
        labels=labels, scenario=text, overrides=overrides,
    )
