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
import json
import math
import re
from collections.abc import Mapping, Sequence
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


class _Grid:
    """The run's sampling grid placed on flent's x axis (``x = DELAY + t``)."""

    def __init__(self, sim_t: np.ndarray):
        self.sim_t = sim_t
        self.step = float(sim_t[1] - sim_t[0]) if len(sim_t) > 1 else 1.0
        # DELAY on the grid: the smallest multiple of the step not below 5 s, so every
        # simulated sample sits on a point of x_values.
        self.lead = max(1, math.ceil(DELAY_S / self.step - 1e-9))
        self.delay = self.lead * self.step
        self.first = self.lead + int(round(sim_t[0] / self.step)) if len(sim_t) else self.lead
        self.n = self.first + len(sim_t) + self.lead
        self.x = [round(i * self.step, 9) for i in range(self.n)]

    def x_of(self, i: int) -> float:
        """x of the simulated sample ``i``."""
        return self.x[self.first + i]

    def full(self, values: np.ndarray) -> list[float | None]:
        """One value per x point: the simulated values in place, null elsewhere (and for NaN)."""
        out = np.full(self.n, np.nan)
        out[self.first : self.first + len(values)] = values
        return [v if math.isfinite(v) else None for v in out.tolist()]


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
    """The run's time grid and every ``(entity, metric)`` series as an array on it.

    The engine's tidy table is one block of rows per series over the same grid
    (``api._tidy``); that layout is read directly, and anything else goes through
    :meth:`RunResult.wide`.
    """
    data = result.series_data
    if data is not None and result._timeseries is None:  # the engine's columns, read directly
        return data.time(), data.columns()
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


def build(result: RunResult) -> dict[str, Any]:
    """The flent data file's JSON object for a run (see the module docs)."""
    summary = result.summary
    sim_t, columns = _columns(result)
    # Six decimals (1 ns in ms, 1 bit/s in Mbit/s): more than any measuring tool gives, and
    # the file is smaller and faster to write than with 17 digits.
    columns = {k: np.round(v, 6) for k, v in columns.items()}
    grid = _Grid(sim_t)

    def col(entity: str, metric: str) -> np.ndarray | None:
        return columns.get((entity, metric))

    flows = summary.get("flows", [])
    ups = [f for f in flows if f.get("direction", "up") != "down"]
    downs = [f for f in flows if f.get("direction", "up") == "down"]
    shape = choose_shape(len(ups), len(downs))
    params: dict[str, str] = dict(shape.params)

    results: dict[str, list[float | None]] = {}
    raw: dict[str, list[dict[str, Any]]] = {}
    meta: dict[str, dict[str, Any]] = {}
    t0 = EPOCH_S
    # The raw samples' UNIX times, rounded to the microsecond as flent's runners give them.
    times = [round(t0 + grid.x_of(i), 6) for i in range(len(sim_t))]

    # --- TCP flows: netperf's throughput samples and ss's socket stats, merged per flow.
    ss_keys = (("tcp_cwnd", "cwnd"), ("tcp_delivery_rate", "delivery_rate"), ("tcp_rtt", "srtt"))
    for series_names, group in ((shape.up, ups), (shape.down, downs)):
        for sname, flow in zip(series_names, group):
            fname = flow["name"]
            goodput = col(fname, "goodput")
            if goodput is not None:
                results[sname] = grid.full(goodput)
            stats = {k: col(fname, m) for k, m in ss_keys}
            for k, v in stats.items():
                if v is not None:
                    results[f"{sname}::{k}"] = grid.full(v)
            netperf = _samples(times, {"val": goodput})
            for e in netperf:
                e["dur"] = grid.step
            # netperf's and ss's samples in one list, in time order (netperf's first at a tie)
            entries = sorted(netperf + _samples(times, stats), key=lambda e: e["t"])
            raw[sname] = entries
            goodputs = goodput[np.isfinite(goodput)] if goodput is not None else np.array([])
            meta[sname] = {
                "RUNNER": "aqmlab",
                "UNITS": "Mbits/s",
                "CONG_CONTROL": flow.get("cc"),
                "MEAN_VALUE": _num(flow.get("goodput_mbps", float("nan"))),
                "MIN_VALUE": _num(goodputs.min()) if len(goodputs) else None,
                "MAX_VALUE": _num(goodputs.max()) if len(goodputs) else None,
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
        cols = {"val": rtt, "owd_up": col(pname, "owd_up"), "owd_down": col(pname, "owd_down")}
        entries = [e for e in _samples(times, cols) if "val" in e]
        for seq, e in enumerate(entries):
            e["seq"] = float(seq)
        raw[sname] = entries
        results[sname] = grid.full(rtt)
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
        cols = {k: col(link, m) for k, m in qdisc_keys}
        # The discipline's own statistics (fq_codel's new_flows_len, pie's prob, ...).
        for (e, m), unit in result.units.items():
            if e == link and unit == "" and m not in cols:
                cols[m] = col(link, m)
        raw[sname] = _samples(times, cols)
        for k, v in cols.items():
            if v is not None:
                results[f"{sname}::{k}"] = grid.full(v)
        for k in ("dropped", "ecn_mark"):
            raw[f"{sname}::{k}"] = []  # flent's null runners of qdisc_stats.inc
        meta[sname] = {"RUNNER": "aqmlab", "UNITS": "misc", "AQMLAB_LINK": link}
    if links:
        params["qdisc_stats_hosts"] = ",".join(links)
        params["qdisc_stats_interfaces"] = ",".join(links)

    length = float(summary.get("sim_seconds") or (sim_t[-1] if len(sim_t) else 0.0))
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
        "x_values": grid.x,
    }


def dumps(obj: Mapping[str, Any]) -> str:
    """JSON text with sorted keys as flent writes it, but compact (flent indents by 2; its
    reader does not care, and compact text is half the size and time). NaN is refused."""
    return json.dumps(obj, sort_keys=True, allow_nan=False, separators=(",", ":"))


def write(result: RunResult, path: str | Path) -> None:
    """Writes the run's flent data file (gzip level 6, no timestamp in the gzip header, so
    the same run gives the same bytes)."""
    data = dumps(build(result)).encode("utf-8")
    with open(path, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=6) as gz:
        gz.write(data)


def series_names(obj: Mapping[str, Any]) -> Sequence[str]:
    """The measured series of a built file (the keys of ``raw_values`` with samples)."""
    return [k for k, v in obj["raw_values"].items() if v]
