"""A run as a flent data file (``<name>.flent.gz``), so flent plots it as it plots a testbed's.

The file is what ``flent`` 2.3 writes (data format version 4): gzip-compressed JSON with the
five top-level keys ``version``, ``metadata``, ``x_values``, ``results`` and ``raw_values``.
Everything here was read off flent 2.3.0's own source (PyPI wheel ``flent-2.3.0``):

- ``flent/resultset.py``: ``FILEFORMAT_VERSION = 4``, ``RECORDED_SETTINGS``, the date format
  ``%Y-%m-%dT%H:%M:%S.%fZ`` (``util.format_date(..., utc=True)``), and that ``x`` of a raw
  sample is its ``t`` (UNIX seconds) minus ``T0``;
- ``flent/tests/*.conf``: the test names and their ``DATA_SETS`` series names
  (``tcp_1up.conf``: ``TCP upload``; ``tcp_nup.conf``: ``TCP upload::<n>`` from
  ``upload_streams``; ``tcp_ndown.conf``, ``tcp_1down.conf``, ``tcp_bidirectional.conf``;
  ``rrul_be.conf``: ``TCP upload BE``, ``BE2``..``BE4``, ``Ping (ms) UDP BE1``..``BE3``;
  ``rrul_be_nflows.conf``: ``TCP upload BE::<n>`` (``testenv.expand_duplicates``);
  ``Ping (ms) ICMP``; ``ping.inc``: ``Ping (ms) ICMP <host> (extra)``; ``qdisc_stats.inc``:
  ``qdisc_stats_<host>`` from ``qdisc_stats_hosts``/``qdisc_stats_interfaces``);
- ``flent/runners.py``: the raw samples' keys: ``NetperfDemoRunner`` ``{t, val, dur}``
  (Mbit/s over the last ``dur`` seconds); ``SsRunner`` ``{t, tcp_cwnd, tcp_rtt,
  tcp_delivery_rate, ...}`` merged into each TCP series (rtt in ms, rates in Mbit/s);
  ``PingRunner`` ``{t, val, seq}``; ``IrttRunner`` adds ``owd_up``/``owd_down``; ``TcRunner``
  ``{t, backlog_pkts, dropped, ecn_mark, delay, ...}`` with ``dropped``/``ecn_mark`` per
  interval (the v4 format's convention);
- ``flent/aggregators.py``: ``results`` holds one value per ``x_values`` point (``null`` where
  there is none) and ``<series>::<key>`` for runners with several values.

Time layout. flent starts the pings at ``T0`` and the transfers ``DELAY`` (5 s, flent's
default ``--delay``) later; they run ``LENGTH`` seconds and the pings stop ``DELAY`` after
them (``TOTAL_LENGTH = LENGTH + 2*DELAY``). A simulated run is laid out the same way: its time
0 is at ``x = DELAY`` and its end at ``x = DELAY + LENGTH``, so a simulated and a testbed file
line up in one plot and flent's ``cutoff: (DELAY, -DELAY)`` of the box and CDF plots keeps
exactly the simulated interval. ``T0`` is a fixed instant (2000-01-01T00:00:00Z): a
simulation has no wall clock, and a fixed one keeps the file byte-reproducible.

What is not here: flent's ``backlog`` plot reads ``backlog_bytes``, which the engine does not
record per tick (``backlog_pkts`` is the queue length in packets); netperf's rate is the
sender's, ``val`` here is the receiver's goodput per step; UDP and media flows have no flent
series and are left out (they are in the run's other files).
"""

from __future__ import annotations

import gzip
import heapq
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .api import RunResult

#: flent's data format (``flent/resultset.py`` ``FILEFORMAT_VERSION``).
FILEFORMAT_VERSION = 4
#: flent's default ``--delay``: the transfers start this long after the pings.
DELAY_S = 5.0
#: ``T0`` and ``TIME`` of every file: 2000-01-01T00:00:00Z.
EPOCH_S = 946684800.0
#: How the client and the server are named in the plots' annotation ("Local/remote: ...").
LOCAL_HOST = "aqmlab-client"
HOST = "aqmlab-server"

# flent ships fixed-N tests that only set upload_streams / download_streams and include
# tcp_nup.conf / tcp_ndown.conf (tests/tcp_<n>up.conf, tcp_<n>down.conf).
_FIXED_UP = {2: "tcp_2up", 4: "tcp_4up", 6: "tcp_6up", 8: "tcp_8up", 12: "tcp_12up", 50: "tcp_50up"}
_FIXED_DOWN = {2: "tcp_2down", 4: "tcp_4down", 6: "tcp_6down", 8: "tcp_8down", 12: "tcp_12down"}


@dataclass
class Shape:
    """The flent test a run's traffic corresponds to and its series names."""

    test: str
    up: list[str]
    down: list[str]
    #: Names for irtt probes in order (flent's UDP RTT series of this test); more irtt probes
    #: than names get ``Ping (ms) UDP <probe name>``.
    udp: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)


def choose_shape(n_up: int, n_down: int) -> Shape:
    """The flent test for ``n_up`` upload and ``n_down`` download TCP flows.

    One direction: ``tcp_1up``/``tcp_<n>up``/``tcp_nup`` (and the download twins); one flow
    each way: ``tcp_bidirectional``; four each way: ``rrul_be``; any other mix:
    ``rrul_be_nflows``; no TCP flows: ``ping``.
    """
    if n_up < 0 or n_down < 0:
        raise ValueError("flow counts must be non-negative")
    if n_up == 0 and n_down == 0:
        return Shape("ping", [], [], udp=["Ping (ms) UDP"])
    if n_down == 0:
        if n_up == 1:
            return Shape("tcp_1up", ["TCP upload"], [])
        return Shape(
            _FIXED_UP.get(n_up, "tcp_nup"),
            [f"TCP upload::{i}" for i in range(1, n_up + 1)],
            [],
            params={"upload_streams": str(n_up)},
        )
    if n_up == 0:
        if n_down == 1:
            return Shape("tcp_1down", [], ["TCP download"])
        return Shape(
            _FIXED_DOWN.get(n_down, "tcp_ndown"),
            [],
            [f"TCP download::{i}" for i in range(1, n_down + 1)],
            params={"download_streams": str(n_down)},
        )
    if n_up == 1 and n_down == 1:
        return Shape("tcp_bidirectional", ["TCP upload"], ["TCP download"])
    if n_up == 4 and n_down == 4:
        be = ["BE", "BE2", "BE3", "BE4"]
        return Shape(
            "rrul_be",
            [f"TCP upload {b}" for b in be],
            [f"TCP download {b}" for b in be],
            udp=[f"Ping (ms) UDP BE{i}" for i in (1, 2, 3)],
        )
    return Shape(
        "rrul_be_nflows",
        [f"TCP upload BE::{i}" for i in range(1, n_up + 1)],
        [f"TCP download BE::{i}" for i in range(1, n_down + 1)],
        udp=["Ping (ms) UDP BE"],
        params={"upload_streams": str(n_up), "download_streams": str(n_down)},
    )


def _date(t: float) -> str:
    """flent's UTC date format (``util.format_date(..., utc=True)``): ``...%fZ``."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _num(v: float) -> float | None:
    """A JSON number, or None for NaN/inf (flent and jq/Go readers want null, not NaN)."""
    v = float(v)
    return v if math.isfinite(v) else None


def _safe_name(name: str) -> str:
    """A file name component: runs of characters outside ``[A-Za-z0-9._-]`` become ``_``."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return s or "run"


def file_name(result: RunResult) -> str:
    """``<run name>.flent.gz`` (``run.flent.gz`` for an unnamed run)."""
    return f"{_safe_name(str(result.name or result.summary.get('name') or 'run'))}.flent.gz"


#: Ticks of the run read, encoded and compressed at a time: the file is written a slice at a
#: time, so a long run needs no more memory than a short one (issue 15: the whole-file build
#: held a dict per tick and series, 700 MB for 10,000 s of two flows).
CHUNK_TICKS = 4096
#: Values of a block of neighbouring columns read from the spill file at once (2 MB), and how
#: many such blocks are kept (the series are encoded in name order, which visits a few regions
#: of the columns at once: "TCP upload::1", "::10", "::100", ...).
BLOCK_VALUES = 1 << 18
BLOCKS_KEPT = 8


class _Grid:
    """The run's sampling grid placed on flent's x axis (``x = DELAY + t``): ``count`` ticks
    from ``t0`` s, ``step`` s apart (the grid's first two times give the step)."""

    def __init__(self, t0: float | None, t1: float | None, count: int):
        self.count = count
        self.step = float(t1 - t0) if count > 1 else 1.0
        # DELAY on the grid: the smallest multiple of the step not below 5 s, so every
        # simulated sample sits on a point of x_values.
        self.lead = max(1, math.ceil(DELAY_S / self.step - 1e-9))
        self.delay = self.lead * self.step
        self.first = self.lead + int(round(t0 / self.step)) if count else self.lead
        self.n = self.first + count + self.lead

    def x_at(self, i: int) -> float:
        """x_values[i]."""
        return round(i * self.step, 9)

    def x_of(self, i: int) -> float:
        """x of the simulated sample ``i``."""
        return self.x_at(self.first + i)


class _Lazy:
    """A JSON list produced a slice at a time (``chunks()`` yields lists); :func:`_encode`
    writes it without holding it whole, :func:`_materialise` makes it a list."""

    def __init__(self, chunks: Callable[[], Iterator[list[Any]]]):
        self.chunks = chunks


class _Columns:
    """The run's series as slices of ticks: ``get(key, a, b)`` is ticks ``a:b`` of series
    ``key`` rounded to six decimals, or None when the run has no such series. The engine's
    series (:attr:`RunResult.series_data`) are read from its buffers and spill file a slice at
    a time; a result built from a DataFrame is read into arrays once."""

    def __init__(self, result: RunResult):
        data = result.engine_series
        self._data = data
        self._blocks: dict[tuple[int, int, int], np.ndarray] = {}
        if data is not None:  # the engine's columns, read directly
            self.n = data.n_ticks
            self._index = data.index()
            head = data.time(0, min(2, self.n))
        else:
            self._time, self._cols = _columns(result)
            self.n = len(self._time)
            self._index = {k: i for i, k in enumerate(self._cols)}
            head = self._time[:2]
        self.t0 = float(head[0]) if len(head) else None
        self.t1 = float(head[1]) if len(head) > 1 else None
        if not self.n:
            self.last_t = 0.0
        else:
            self.last_t = float(data.time(self.n - 1, self.n)[0]) if data is not None else float(self._time[-1])

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._index

    def get(self, key: tuple[str, str], a: int, b: int) -> np.ndarray | None:
        # Six decimals (1 ns in ms, 1 bit/s in Mbit/s): more than any measuring tool gives, and
        # the file is smaller and faster to write than with 17 digits.
        if key not in self._index:
            return None
        if self._data is not None:
            if self._data.streamed:
                return np.round(self._spilled(self._index[key], a, b), 6)
            return np.round(self._data.column(self._index[key], a, b), 6)
        return np.round(self._cols[key][a:b], 6)

    def _spilled(self, i: int, a: int, b: int) -> np.ndarray:
        """Column ``i``'s ticks ``a:b`` of series partly in the spill file, from a block of
        neighbouring columns read at once and kept for the next series (the file's series are
        in column order within each of its chunks). Read a column at a time, a run of
        100,000 flows and 21 ticks (a chunk per tick) made 10 M ``pread`` of one value."""
        width = max(1, BLOCK_VALUES // max(b - a, 1))
        c0 = i // width * width
        k = (c0, a, b)
        block = self._blocks.get(k)
        if block is None:
            block = self._data._block(c0, min(c0 + width, len(self._data.keys)), a, b)
            self._blocks[k] = block
            while len(self._blocks) > BLOCKS_KEPT:  # the oldest first
                del self._blocks[next(iter(self._blocks))]
        else:
            self._blocks[k] = self._blocks.pop(k)  # most recently used last
        return block[i - c0]

    def slices(self) -> Iterator[tuple[int, int]]:
        for a in range(0, self.n, CHUNK_TICKS):
            yield a, min(a + CHUNK_TICKS, self.n)


def _samples(times: Sequence[float], cols: Mapping[str, np.ndarray | None]) -> list[dict[str, Any]]:
    """One raw sample ``{t, key: value...}`` per tick with at least one finite value (NaN and
    missing values leave their key out, as flent's runners do)."""
    named = [(k, v.tolist()) for k, v in cols.items() if v is not None]
    inf = math.inf
    out: list[dict[str, Any]] = []
    for i, t in enumerate(times):
        e = {k: vals[i] for k, vals in named if -inf < vals[i] < inf}
        if e:
            e["t"] = t
            out.append(e)
    return out


def _columns(result: RunResult) -> tuple[np.ndarray, dict[tuple[str, str], np.ndarray]]:
    """A result built from a DataFrame: its time grid and every ``(entity, metric)`` series as
    an array on it.

    The engine's tidy table is one block of rows per series over the same grid
    (``api._tidy``); that layout is read directly, and anything else goes through
    :meth:`RunResult.wide`.
    """
    ts = result.timeseries
    keys = list(result.units)
    n_rows = len(ts)
    if keys and n_rows and n_rows % len(keys) == 0:
        n = n_rows // len(keys)
        time = ts["time"].to_numpy(dtype=np.float64)
        values = ts["value"].to_numpy(dtype=np.float64).reshape(len(keys), n)
        flow = ts["flow"].to_numpy()[::n]
        metric = ts["metric"].to_numpy()[::n]
        grid = time[:n]
        if (
            [(str(f), str(m)) for f, m in zip(flow, metric)] == keys
            and np.array_equal(time.reshape(len(keys), n), np.broadcast_to(grid, (len(keys), n)))
        ):
            return grid, {k: values[i] for i, k in enumerate(keys)}
    wide = result.wide()
    grid = wide.index.to_numpy(dtype=np.float64)
    return grid, {k: wide[k].to_numpy(dtype=np.float64) for k in keys if k in wide.columns}


def _lazy_build(result: RunResult) -> dict[str, Any]:
    """The flent data file's JSON object for a run, its long lists (``x_values``, every
    ``results`` and ``raw_values`` list) as :class:`_Lazy` slices of the run (see the module
    docs). :func:`build` materialises it; :func:`write` streams it."""
    summary = result.summary
    cols = _Columns(result)
    grid = _Grid(cols.t0, cols.t1, cols.n)

    def col(entity: str, metric: str) -> tuple[str, str] | None:
        return (entity, metric) if (entity, metric) in cols else None

    last_times: list[Any] = [None, None]

    def times(a: int, b: int) -> list[float]:
        # The raw samples' UNIX times, rounded to the microsecond as flent's runners give them;
        # the last slice's kept (every series of a run of one slice asks for the same: a third
        # of the file's time for many flows), not more, so a long run's memory stays flat.
        if last_times[0] != (a, b):
            last_times[:] = [(a, b), [round(t0 + grid.x_of(i), 6) for i in range(a, b)]]
        return last_times[1]

    def samples(named: Mapping[str, tuple[str, str] | None], extra: Callable[[dict[str, Any]], None] | None = None) -> Iterator[dict[str, Any]]:
        """The raw samples of the series ``named`` (raw key -> series key), tick after tick."""
        for a, b in cols.slices():
            for e in _samples(times(a, b), {k: cols.get(key, a, b) for k, key in named.items() if key is not None}):
                if extra is not None:
                    extra(e)
                yield e

    def chunked(entries: Callable[[], Iterator[dict[str, Any]]]) -> _Lazy:
        def chunks() -> Iterator[list[Any]]:
            buf: list[Any] = []
            for e in entries():
                buf.append(e)
                if len(buf) >= CHUNK_TICKS:
                    yield buf
                    buf = []
            yield buf

        return _Lazy(chunks)

    def full(key: tuple[str, str]) -> _Lazy:
        """One value per x point: the simulated values in place, null elsewhere (and for NaN)."""

        def chunks() -> Iterator[list[Any]]:
            yield [None] * grid.first
            for a, b in cols.slices():
                yield [v if math.isfinite(v) else None for v in cols.get(key, a, b).tolist()]
            yield [None] * (grid.n - grid.first - grid.count)

        return _Lazy(chunks)

    def x_values() -> Iterator[list[Any]]:
        for a in range(0, grid.n, CHUNK_TICKS):
            yield [grid.x_at(i) for i in range(a, min(a + CHUNK_TICKS, grid.n))]

    flows = summary.get("flows", [])
    ups = [f for f in flows if f.get("direction", "up") != "down"]
    downs = [f for f in flows if f.get("direction", "up") == "down"]
    shape = choose_shape(len(ups), len(downs))
    params: dict[str, str] = dict(shape.params)

    results: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    meta: dict[str, dict[str, Any]] = {}
    t0 = EPOCH_S

    def min_max(key: tuple[str, str] | None) -> tuple[float | None, float | None]:
        lo, hi = math.inf, -math.inf
        if key is not None:
            for a, b in cols.slices():
                v = cols.get(key, a, b)
                v = v[np.isfinite(v)]
                if len(v):
                    lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
        return (_num(lo), _num(hi)) if hi >= lo else (None, None)

    # --- TCP flows: netperf's throughput samples and ss's socket stats, merged per flow.
    ss_keys = (("tcp_cwnd", "cwnd"), ("tcp_delivery_rate", "delivery_rate"), ("tcp_rtt", "srtt"))
    for series_names, group in ((shape.up, ups), (shape.down, downs)):
        for sname, flow in zip(series_names, group):
            fname = flow["name"]
            goodput = col(fname, "goodput")
            if goodput is not None:
                results[sname] = full(goodput)
            stats = {k: col(fname, m) for k, m in ss_keys}
            for k, v in stats.items():
                if v is not None:
                    results[f"{sname}::{k}"] = full(v)

            def entries(goodput=goodput, stats=stats) -> Iterator[dict[str, Any]]:
                def dur(e: dict[str, Any]) -> None:
                    e["dur"] = grid.step

                # netperf's and ss's samples in one list, in time order (netperf's first at a
                # tie: heapq.merge keeps the order of its inputs, as a stable sort would)
                return heapq.merge(samples({"val": goodput}, dur), samples(stats), key=lambda e: e["t"])

            raw[sname] = chunked(entries)
            lo, hi = min_max(goodput)
            meta[sname] = {
                "RUNNER": "aqmlab",
                "UNITS": "Mbits/s",
                "CONG_CONTROL": flow.get("cc"),
                "MEAN_VALUE": _num(flow.get("goodput_mbps", float("nan"))),
                "MIN_VALUE": lo,
                "MAX_VALUE": hi,
                "AQMLAB_FLOW": fname,
                "TCPI_RETRANS": flow.get("retransmits"),
            }
            if len(group) == 1 and shape.test == "tcp_1up":
                params.setdefault("tcp_cong_control", str(flow.get("cc")))

    # --- Probes: ping -> flent's ICMP ping series, irtt -> its UDP RTT series.
    extra_hosts: list[str] = []
    udp_names = iter(shape.udp)
    icmp_done = False
    for probe in summary.get("probes", []):
        pname = probe["name"]
        rtt = col(pname, "rtt")
        if rtt is None:
            continue
        if probe.get("kind") == "irtt":
            sname = next(udp_names, f"Ping (ms) UDP {pname}")
            runner = "IrttRunner"
        elif not icmp_done:
            sname, icmp_done, runner = "Ping (ms) ICMP", True, "PingRunner"
        else:
            sname, runner = f"Ping (ms) ICMP {pname} (extra)", "PingRunner"
            extra_hosts.append(pname)
        # A tick without an RTT (the reply was lost or is late) has no sample, as with ping.
        named = {"val": rtt, "owd_up": col(pname, "owd_up"), "owd_down": col(pname, "owd_down")}

        def pings(named=named) -> Iterator[dict[str, Any]]:
            seq = 0
            for e in samples(named):
                if "val" in e:
                    e["seq"] = float(seq)
                    seq += 1
                    yield e

        raw[sname] = chunked(pings)
        results[sname] = full(rtt)
        rtt_ms = probe.get("rtt_ms") or {}
        meta[sname] = {
            "RUNNER": "aqmlab",
            "UNITS": "ms",
            "MEAN_VALUE": _num(rtt_ms.get("mean", float("nan"))),
            "MAX_VALUE": _num(rtt_ms.get("max", float("nan"))),
            "AQMLAB_PROBE": pname,
            "AQMLAB_KIND": probe.get("kind"),
            "PACKETS_SENT": probe.get("sent"),
            "PACKETS_RECEIVED": probe.get("received"),
        }
    if extra_hosts:
        params["ping_hosts"] = ",".join(extra_hosts)

    # --- The queues: flent's tc poller (qdisc_stats_<host>) for every link with series.
    links = [e for (e, m) in result.units if m == "qlen"]
    qdisc_keys = (("backlog_pkts", "qlen"), ("dropped", "drops"), ("ecn_mark", "ce_marks"), ("delay", "qdelay"))
    for link in links:
        sname = f"qdisc_stats_{link}"
        named = {k: col(link, m) for k, m in qdisc_keys}
        # The discipline's own statistics (fq_codel's new_flows_len, pie's prob, ...).
        for (e, m), unit in result.units.items():
            if e == link and unit == "" and m not in named:
                named[m] = col(link, m)
        raw[sname] = chunked(lambda named=named: samples(named))
        for k, v in named.items():
            if v is not None:
                results[f"{sname}::{k}"] = full(v)
        for k in ("dropped", "ecn_mark"):
            raw[f"{sname}::{k}"] = []  # flent's null runners of qdisc_stats.inc
        meta[sname] = {"RUNNER": "aqmlab", "UNITS": "misc", "AQMLAB_LINK": link}
    if links:
        params["qdisc_stats_hosts"] = ",".join(links)
        params["qdisc_stats_interfaces"] = ",".join(links)

    length = float(summary.get("sim_seconds") or cols.last_t)
    bn = summary.get("bottleneck", {})
    title_parts = [str(result.name or summary.get("name") or "aqmlab run")]
    if bn.get("qdisc"):
        title_parts.append(f"qdisc:{bn['qdisc']}")
    if bn.get("rate_mbps") is not None:
        title_parts.append(f"rate:{bn['rate_mbps']:g}Mbit")
    ccs = sorted({str(f.get("cc")) for f in flows})
    if ccs:
        title_parts.append(f"cc:{','.join(ccs)}")
    title_parts.append(f"seed:{summary.get('seed')}")
    from . import __version__

    metadata: dict[str, Any] = {
        "NAME": shape.test,
        "TITLE": " ".join(title_parts),
        "NOTE": "simulated by aqmlab (not measured on a testbed)",
        "TIME": _date(t0),
        "T0": _date(t0),
        "LENGTH": length,
        "TOTAL_LENGTH": round(length + 2 * grid.delay, 9),
        "STEP_SIZE": grid.step,
        "HOST": HOST,
        "HOSTS": [HOST],
        "LOCAL_HOST": LOCAL_HOST,
        "IP_VERSION": 4,
        "TEST_PARAMETERS": params,
        "SERIES_META": meta,
        "FAILED_RUNNERS": 0,
        "DATA_FILENAME": file_name(result),
        "AQMLAB": {
            "version": __version__,
            "name": result.name or summary.get("name"),
            "seed": summary.get("seed"),
            "delay_s": grid.delay,
            "scenario": result.scenario,
            "overrides": list(result.overrides),
            "flows": {sn: f["name"] for names, group in ((shape.up, ups), (shape.down, downs)) for sn, f in zip(names, group)},
        },
    }
    return {
        "metadata": metadata,
        "raw_values": raw,
        "results": results,
        "version": FILEFORMAT_VERSION,
        "x_values": _Lazy(x_values),
    }


def _materialise(obj: Any) -> Any:
    if isinstance(obj, _Lazy):
        return [x for chunk in obj.chunks() for x in chunk]
    if isinstance(obj, dict):
        return {k: _materialise(v) for k, v in obj.items()}
    return obj


def build(result: RunResult) -> dict[str, Any]:
    """The flent data file's JSON object for a run (see the module docs), whole in memory
    (:func:`write` streams the same object instead)."""
    return _materialise(_lazy_build(result))


def _dumps_value(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, allow_nan=False, separators=(",", ":"))


def _has_lazy(obj: Any) -> bool:
    return isinstance(obj, _Lazy) or (isinstance(obj, dict) and any(_has_lazy(v) for v in obj.values()))


def _encode(obj: Any, out: Callable[[str], Any]) -> None:
    """Writes :func:`dumps`'s text of ``obj`` to ``out`` piece by piece: a :class:`_Lazy`
    list a slice at a time (``json.dumps`` of a slice is the slice of the whole list's text),
    a dict's keys sorted as ``sort_keys`` sorts them."""
    if isinstance(obj, _Lazy):
        out("[")
        first = True
        for chunk in obj.chunks():
            if chunk:
                out(("" if first else ",") + _dumps_value(chunk)[1:-1])
                first = False
        out("]")
    elif isinstance(obj, dict) and _has_lazy(obj):
        out("{")
        for i, (k, v) in enumerate(sorted(obj.items(), key=lambda kv: kv[0])):
            out(("," if i else "") + json.dumps(k) + ":")
            _encode(v, out)
        out("}")
    else:
        out(_dumps_value(obj))


def dumps(obj: Mapping[str, Any]) -> str:
    """JSON text with sorted keys as flent writes it, but compact (flent indents by 2; its
    reader does not care, and compact text is half the size and time). NaN is refused."""
    parts: list[str] = []
    _encode(obj, parts.append)
    return "".join(parts)


def write(result: RunResult, path: str | Path) -> None:
    """Writes the run's flent data file (gzip level 6, no timestamp in the gzip header, so
    the same run gives the same bytes), encoded and compressed a slice of the run at a time:
    the text is :func:`dumps` of :func:`build`, never held whole."""
    obj = _lazy_build(result)
    with open(path, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=6) as gz:
        buf: list[str] = []
        size = 0

        def out(s: str) -> None:
            nonlocal size
            buf.append(s)
            size += len(s)
            if size >= 1 << 20:
                gz.write("".join(buf).encode("utf-8"))
                buf.clear()
                size = 0

        _encode(obj, out)
        gz.write("".join(buf).encode("utf-8"))


def series_names(obj: Mapping[str, Any]) -> Sequence[str]:
    """The measured series of a built file (the keys of ``raw_values`` with samples)."""
    return [k for k, v in obj["raw_values"].items() if v]
