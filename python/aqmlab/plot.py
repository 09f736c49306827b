"""Plots of finished runs: the per-run ``throughput_rtt.png`` (flent's ``tcp_delivery_with_rtt``
shape) and the kinds of ``aqmlab plot`` (named after flent's plots where one maps).

Every kind takes one or several :class:`~aqmlab.api.RunResult` (several: overlaid in one figure,
each run's lines prefixed with its label). The series are read once per run with one
``groupby`` (:func:`series_map`), not with one boolean filter of the whole table per line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .api import RunResult
from .seriesview import View

#: Above this many flows the per-flow lines are drawn thin and without a legend entry each.
MAX_LEGEND_FLOWS = 8

#: Points of a figure (all its series) above which :func:`plot_throughput_rtt` frees the
#: closed figure at once (a full garbage collection, about 45 ms) instead of leaving it to the
#: collector: a 1000 s run of two flows (200,000 points, its lines' copies 17 MB) and a
#: 1000-flow run (1 M points, 14 MB) are above it, a suite's 30 s runs (6,000) below.
BIG_FIGURE_POINTS = 1 << 15

#: Goodput per sampling step is bursty (a whole window of in-order data can arrive at once
#: after a loss is repaired), so it is drawn as a moving average over about this long.
GOODPUT_SMOOTHING_S = 1.0

Series = tuple[Any, Any]  # (time s, values) numpy arrays

#: The bottleneck's per-interval drop and mark counts (packets); the qdisc's own counters
#: (e.g. DualPI2's cumulative ``step_marks``) are other series.
MARKS_DROPS = ("drops", "ce_marks", "sce_marks")


def series_map(result: RunResult) -> dict[tuple[str, str], Series]:
    """Every series of a run as ``{(entity, metric): (time, value)}``, sorted by time."""
    out: dict[tuple[str, str], Series] = {}
    data = result.engine_series
    if data is not None:  # the engine's columns, read directly
        t = data.time()
        return {k: (t, v) for k, v in data.columns().items()}
    ts = result.timeseries
    if ts is None or not len(ts):
        return out
    t = ts["time"].to_numpy()
    v = ts["value"].to_numpy(dtype=float)
    for key, idx in ts.groupby(["flow", "metric"], observed=True, sort=False).indices.items():
        out[(str(key[0]), str(key[1]))] = (t[idx], v[idx])
    return out


def smoothing_window(step: float, seconds: float) -> int:
    """Ticks of the goodput moving average over about ``seconds`` at sampling ``step`` s."""
    return max(1, int(round(seconds / step))) if step > 0 else 1


class MovingAverage:
    """The trailing moving average over ``win`` ticks (``min_periods=1``, NaN skipped), fed a
    block of ticks at a time: the running sums (``np.cumsum``) are carried from block to block,
    so each value is the one a single pass over the whole series gives, bit for bit. One block
    is the whole series (:func:`_smooth`); :func:`aqmlab.seriesview.view` feeds it the blocks it
    reads, of many series at once (a 2-D block: one row per series, each row on its own)."""

    def __init__(self, win: int) -> None:
        self.win = win
        self.pos = 0
        self.c: Any = None  # the last ``win`` running sums and counts (None before any block)
        self.n: Any = None

    def add(self, v: Any) -> Any:
        import numpy as np

        x = np.nan_to_num(v)
        ok = ~np.isnan(v)
        if self.pos == 0:
            c = np.cumsum(x, axis=-1)
            n = np.cumsum(ok, axis=-1)
        else:
            c = np.cumsum(np.concatenate((self.c[..., -1:], x), axis=-1), axis=-1)[..., 1:]
            n = self.n[..., -1:] + np.cumsum(ok, axis=-1)
        s, k = c.copy(), n.copy()
        w, m = self.win, v.shape[-1]
        h = 0 if self.c is None else self.c.shape[-1]
        hist_c = c if self.c is None else np.concatenate((self.c, c), axis=-1)
        hist_n = n if self.n is None else np.concatenate((self.n, n), axis=-1)
        j0 = max(0, w - self.pos)  # the first tick of the block with a full window behind it
        if j0 < m:
            s[..., j0:] = c[..., j0:] - hist_c[..., h + j0 - w : h + m - w]
            k[..., j0:] = n[..., j0:] - hist_n[..., h + j0 - w : h + m - w]
        self.c, self.n = hist_c[..., -w:], hist_n[..., -w:]
        self.pos += m
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(k > 0, s / np.maximum(k, 1), np.nan)


def _smooth(t, v, seconds: float):
    """A trailing moving average over about ``seconds`` (``min_periods=1``), and its window."""
    if len(t) < 2:
        return v, 1
    win = smoothing_window(float(t[1] - t[0]), seconds)
    if win <= 1:
        return v, 1
    return MovingAverage(win).add(v), win


def _title(summary: dict[str, Any]) -> str:
    name = summary.get("name") or "aqmlab run"
    bn = summary.get("bottleneck", {})
    detail = []
    if bn.get("qdisc"):
        detail.append(str(bn["qdisc"]))
    if bn.get("rate_mbps") is not None:
        detail.append(f"{bn['rate_mbps']:g} Mbit/s")
    return " \u2014 ".join([str(name)] + ([" @ ".join(detail)] if detail else []))


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _join(parts: Sequence[str]) -> str:
    parts = list(dict.fromkeys(parts))
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _udp_names(summary: dict[str, Any]) -> list[str]:
    return [u["name"] for u in summary.get("udp", [])]


def _probe_names(summary: dict[str, Any]) -> list[str]:
    return [p["name"] for p in summary.get("probes", [])]


def tcp_flows(result: RunResult, sm: dict[tuple[str, str], Series] | None = None) -> list[str]:
    """The TCP flows: the summary's ``flows``, then every other entity with TCP series (the
    flows of ``[[transients]]`` and workloads, which the summary lists elsewhere)."""
    names = list(result.flows)
    seen = set(names)  # membership by set: a list search made 100,000 flows quadratic (hours)
    keys = sm.keys() if sm is not None else result.units.keys()
    for e, m in keys:
        if m in ("srtt", "cwnd", "delivery_rate") and e not in seen:
            names.append(e)
            seen.add(e)
    return names


def throughput_parts(result: RunResult, keys: Any) -> list[tuple[str, str]]:
    """The series :func:`total_throughput` sums, in its order: each TCP flow's delivery rate
    (else its goodput), then each UDP flow's received rate; ``keys``: the series there are (a
    series map or :meth:`SeriesData.index`). :func:`aqmlab.seriesview.view` sums the same."""
    parts = []
    for f in tcp_flows(result, keys):
        key = (f, "delivery_rate") if (f, "delivery_rate") in keys else (f, "goodput") if (f, "goodput") in keys else None
        if key is not None:
            parts.append(key)
    parts += [(u, "rate") for u in _udp_names(result.summary) if (u, "rate") in keys]
    return parts


def total_throughput(result: RunResult, sm: dict[tuple[str, str], Series] | None = None) -> Series | None:
    """The sum over every TCP flow (delivery rate, else goodput) and UDP flow (received rate),
    on the sampling grid of the first series; None when the run has no rate series."""
    import numpy as np

    sm = series_map(result) if sm is None else sm
    parts = [sm[key] for key in throughput_parts(result, sm)]
    if not parts:
        return None
    t = max((p[0] for p in parts), key=len)
    tot = np.zeros(len(t))
    for pt, pv in parts:
        tot += np.interp(t, pt, np.nan_to_num(pv), left=0.0, right=0.0) if len(pt) != len(t) or not np.array_equal(pt, t) else np.nan_to_num(pv)
    return t, tot


# --------------------------------------------------------------------------------------
# Kinds
# --------------------------------------------------------------------------------------


@dataclass
class _Run:
    result: RunResult
    label: str  # prefix of every line of this run ("" for a single run)
    sm: dict[tuple[str, str], Series]
    style: str  # line style of this run when overlaid


_STYLES = ["-", "--", ":", "-."]


@dataclass(frozen=True)
class Kind:
    name: str
    help: str
    panels: int
    draw: Callable[[list[Any], list[_Run]], list[str]]  # returns each panel's title


KINDS: dict[str, Kind] = {}


def kind(name: str, help: str, panels: int = 1):
    def deco(fn):
        KINDS[name] = Kind(name, help, panels, fn)
        return fn

    return deco


def _lbl(run: _Run, text: str, show: bool = True) -> str | None:
    if not show:
        return None
    return f"{run.label}: {text}" if run.label else text


def _color(colors: list[str], i: int) -> str:
    return colors[i % len(colors)]


class _Lines:
    """``ax.plot`` for the per-flow lines; with ``batched`` (more than :data:`MAX_LEGEND_FLOWS`
    flows, drawn without a legend entry each) the lines of one style go into one
    ``LineCollection`` instead (:meth:`flush`): the same lines in the same order and layers,
    without a ``Line2D`` of about 14 KB each (3,000 of them for 1,000 flows: 40 MB)."""

    def __init__(self, ax, batched: bool) -> None:
        self.ax, self.batched = ax, batched
        self.groups: dict[tuple[Any, ...], tuple[list[Any], list[str]]] = {}

    def plot(self, t, v, *, color: str, lw: float, ls: str, zorder: float, alpha: float | None = None, label: str | None = None) -> None:
        if not self.batched:
            self.ax.plot(t, v, color=color, lw=lw, ls=ls, zorder=zorder, alpha=alpha, label=label)
            return
        import numpy as np

        segs, cols = self.groups.setdefault((lw, ls, zorder, alpha), ([], []))
        t, v = np.asarray(t, dtype=float), np.asarray(v, dtype=float)
        # A NaN breaks a Line2D's line: the collection gets the runs between NaNs.
        ok = ~(np.isnan(t) | np.isnan(v))
        edges = np.flatnonzero(np.diff(np.concatenate(([0], ok.astype(np.int8), [0]))))
        for a, b in zip(edges[::2], edges[1::2]):
            if b - a >= 2:
                segs.append(np.column_stack((t[a:b], v[a:b])))
                cols.append(color)

    def flush(self) -> None:
        if not self.groups:
            return
        from matplotlib.collections import LineCollection

        for (lw, ls, zorder, alpha), (segs, cols) in self.groups.items():
            if segs:
                self.ax.add_collection(LineCollection(segs, colors=cols, linewidths=lw, linestyles=ls, zorder=zorder, alpha=alpha), autolim=True)
        self.groups = {}
        self.ax.autoscale_view()


def _flows_label(sm: Any, n_flows: int) -> str:
    """The legend entry of many flows' lines: how many, and how many of them are drawn when a
    :class:`~aqmlab.seriesview.View` left some out."""
    if isinstance(sm, View) and sm.flows_drawn < sm.flows_total:
        return f"{sm.flows_drawn} of {sm.flows_total} TCP flows (evenly spread; total over all)"
    return f"{n_flows} TCP flows"


def _draw_throughput(ax, runs: list[_Run], colors: list[str], *, per_flow: bool = True, totals: bool = True) -> list[str]:
    drawn: list[str] = []
    for r_i, run in enumerate(runs):
        res, sm = run.result, run.sm
        flows = tcp_flows(res, sm)
        many = len(flows) > MAX_LEGEND_FLOWS
        lw = 0.6 if many else 1.2
        ls = run.style
        # UDP/media first, thin and translucent, so that they do not hide the TCP lines.
        for u in _udp_names(res.summary):
            if per_flow and (u, "rate") in sm:
                t, v = sm[(u, "rate")]
                ax.plot(t, v, color="tab:brown", lw=0.7, alpha=0.5, ls=ls, zorder=1, label=_lbl(run, f"{u} received"))
                drawn.append("UDP received rate")
        has_goodput = False
        lines = _Lines(ax, many)
        for i, f in enumerate(flows if per_flow else []):
            c = _color(colors, i)
            show = not many
            # One legend entry per flow (its colour); the line styles are keyed once below.
            if (f, "delivery_rate") in sm:
                t, v = sm[(f, "delivery_rate")]
                lines.plot(t, v, color=c, lw=lw, ls=ls, zorder=3, label=_lbl(run, f, show))
                drawn.append("TCP delivery rate")
                show = False
            if (f, "goodput") in sm:
                if isinstance(sm, View):  # the moving average computed before the reduction
                    t, sv, win = sm.smoothed[f]
                    step = sm.step
                else:
                    t, v = sm[(f, "goodput")]
                    sv, win = _smooth(t, v, GOODPUT_SMOOTHING_S)
                    step = float(t[1] - t[0]) if win > 1 else 0.0
                avg = f" ({win * step:g} s avg)" if win > 1 else ""
                lines.plot(t, sv, color=c, lw=lw * 0.8, ls="--" if ls == "-" else ls, alpha=0.8, zorder=2, label=_lbl(run, f, show))
                drawn.append(f"goodput{avg}")
                has_goodput = True
        lines.flush()
        if has_goodput and "TCP delivery rate" in drawn and r_i == len(runs) - 1 and len(runs) == 1:
            ax.plot([], [], color="grey", lw=1.2, label="delivery rate (solid)")
            ax.plot([], [], color="grey", lw=1.0, ls="--", label=f"goodput{avg} (dashed)")
        if many and per_flow and flows:
            ax.plot([], [], color="grey", lw=lw, label=_lbl(run, _flows_label(sm, len(flows))))
        if totals:
            tot = sm.total if isinstance(sm, View) else total_throughput(res, sm)
            if tot is not None and (len(flows) + len(_udp_names(res.summary)) > 1 or not per_flow):
                ax.plot(tot[0], tot[1], color="black" if len(runs) == 1 else _color(colors, r_i), lw=1.6, ls=ls,
                        alpha=0.9, zorder=4, label=_lbl(run, "total"))
                drawn.append("total")
        rate = res.summary.get("bottleneck", {}).get("rate_mbps")
        if r_i == 0 or len(runs) > 1:
            if ("bottleneck", "rate") in sm:
                t, v = sm[("bottleneck", "rate")]
                ax.step(t, v, where="post", color="grey", lw=0.8, ls="-.", zorder=1, label=_lbl(run, "link rate"))
                drawn.append("link rate")
            elif rate:
                ax.axhline(rate, color="grey", lw=0.8, ls="-.", zorder=1, label=_lbl(run, f"link rate ({rate:g} Mbit/s)"))
                drawn.append("link rate")
    ax.set_ylabel("Throughput (Mbit/s)")
    return drawn


def _queue_metrics(sm: dict[tuple[str, str], Series]) -> list[str]:
    """The bottleneck's per-sub-queue delays (e.g. DualPI2's C and L), else its one queue delay."""
    subs = sorted(m for (e, m) in sm if e == "bottleneck" and m.startswith("qdelay_") and m != "qdelay_max")
    return subs or (["qdelay"] if ("bottleneck", "qdelay") in sm else [])


def _draw_delay(ax, runs: list[_Run], colors: list[str], *, tcp: bool = True, probes: bool = True, udp: bool = True,
                queues: bool = True, flow_labels: bool = True) -> list[str]:
    """``flow_labels`` False: the TCP lines get one legend entry (the flows' colours are keyed
    in the panel above)."""
    drawn: list[str] = []
    for run in runs:
        res, sm = run.result, run.sm
        flows = tcp_flows(res, sm)
        many = len(flows) > MAX_LEGEND_FLOWS
        lw = 0.6 if many else 1.2
        ls = run.style
        if udp:
            for u in _udp_names(res.summary):
                if (u, "owd") in sm:
                    t, v = sm[(u, "owd")]
                    ax.plot(t, v, color="tab:brown", lw=0.7, alpha=0.5, ls=ls, zorder=1, label=_lbl(run, f"{u} one-way delay"))
                    drawn.append("UDP one-way delay")
        if tcp:
            keyed = False
            lines = _Lines(ax, many)
            for i, f in enumerate(flows):
                if (f, "srtt") in sm:
                    t, v = sm[(f, "srtt")]
                    lines.plot(t, v, color=_color(colors, i), lw=lw, ls=ls, zorder=3,
                               label=_lbl(run, f"{f} srtt", not many and flow_labels))
                    drawn.append("TCP RTT (srtt)")
                    if not keyed and (many or not flow_labels):
                        ax.plot([], [], color="grey", lw=lw, ls=ls, label=_lbl(run, "TCP srtt (flow colours)"))
                        keyed = True
            lines.flush()
        if probes:
            for p in _probe_names(res.summary):
                if (p, "rtt") in sm:
                    t, v = sm[(p, "rtt")]
                    ax.plot(t, v, color="grey", lw=0.8, ls=ls, zorder=2, label=_lbl(run, f"{p} RTT"))
                    drawn.append("ping RTT")
        if queues:
            for j, m in enumerate(_queue_metrics(sm)):
                t, v = sm[("bottleneck", m)]
                name = "bottleneck" if m == "qdelay" else m[len("qdelay_"):]
                ax.plot(t, v, color="black", lw=1.0, ls=[":", "--", "-."][j % 3] if len(runs) == 1 else ls, zorder=2,
                        label=_lbl(run, f"{name} queue delay"))
                drawn.append("queue delay")
    ax.set_ylabel("Delay (ms)")
    return drawn


@kind("tcp_delivery_with_rtt", "per-flow throughput (delivery rate, goodput, total) over TCP RTT and queue delay", panels=2)
def _k_delivery_with_rtt(axes, runs):
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    a = _draw_throughput(axes[0], runs, colors)
    b = _draw_delay(axes[1], runs, colors, flow_labels=False)
    return ["Throughput: " + _join(a) if a else "Throughput", _cap(_join(b)) if b else "Delay"]


@kind("totals", "total throughput of every flow, and the ping / mean TCP RTT", panels=2)
def _k_totals(axes, runs):
    import numpy as np
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    a = _draw_throughput(axes[0], runs, colors, per_flow=False)
    drawn = []
    for r_i, run in enumerate(runs):
        probes = [run.sm[(p, "rtt")] for p in _probe_names(run.result.summary) if (p, "rtt") in run.sm]
        if probes:
            for t, v in probes:
                axes[1].plot(t, v, color=_color(colors, r_i), lw=1.0, ls=run.style, label=_lbl(run, "ping RTT"))
            drawn.append("ping RTT")
            continue
        rtts = [run.sm[(f, "srtt")] for f in tcp_flows(run.result, run.sm) if (f, "srtt") in run.sm]
        if rtts:
            t = rtts[0][0]
            stack = np.vstack([np.interp(t, a_, b_) for a_, b_ in rtts])
            n = np.sum(~np.isnan(stack), axis=0)
            m = np.where(n > 0, np.nansum(stack, axis=0) / np.maximum(n, 1), np.nan)
            axes[1].plot(t, m, color=_color(colors, r_i), lw=1.0, ls=run.style, label=_lbl(run, "mean TCP srtt"))
            drawn.append("mean TCP RTT")
    axes[1].set_ylabel("Delay (ms)")
    return ["Total throughput" if a else "Throughput", _cap(_join(drawn)) or "Delay"]


@kind("tcp_rtt", "per-flow TCP RTT (srtt)")
def _k_tcp_rtt(axes, runs):
    import matplotlib.pyplot as plt

    b = _draw_delay(axes[0], runs, plt.rcParams["axes.prop_cycle"].by_key()["color"], probes=False, udp=False, queues=False)
    axes[0].set_ylabel("TCP RTT (ms)")
    return [_join(b) or "TCP RTT"]


@kind("tcp_cwnd", "per-flow congestion window")
def _k_tcp_cwnd(axes, runs):
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    unit = None
    for run in runs:
        for i, f in enumerate(tcp_flows(run.result, run.sm)):
            if (f, "cwnd") in run.sm:
                t, v = run.sm[(f, "cwnd")]
                unit = unit or run.result.units.get((f, "cwnd"))
                axes[0].plot(t, v, color=_color(colors, i), lw=1.0, ls=run.style, label=_lbl(run, f"{f} cwnd"))
    axes[0].set_ylabel(f"cwnd ({unit})" if unit else "cwnd")
    return ["TCP congestion window"]


@kind("qdelay", "bottleneck queue delay per queue (e.g. DualPI2's C and L)")
def _k_qdelay(axes, runs):
    b = _draw_delay(axes[0], runs, [], tcp=False, probes=False, udp=False)
    axes[0].set_ylabel("Queue delay (ms)")
    return [_cap(_join(b)) or "Queue delay"]


@kind("ping_cdf", "CDF of the ping RTT (of the TCP srtt samples when the run has no ping probe)")
def _k_ping_cdf(axes, runs):
    import numpy as np
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    what = []
    for r_i, run in enumerate(runs):
        vals = [run.sm[(p, "rtt")][1] for p in _probe_names(run.result.summary) if (p, "rtt") in run.sm]
        name = "ping RTT"
        if not vals:
            vals = [run.sm[(f, "srtt")][1] for f in tcp_flows(run.result, run.sm) if (f, "srtt") in run.sm]
            name = "TCP srtt"
        if not vals:
            continue
        v = np.sort(np.concatenate(vals))
        v = v[~np.isnan(v)]
        if not len(v):
            continue
        axes[0].plot(v, np.arange(1, len(v) + 1) / len(v), color=_color(colors, r_i), ls=run.style, label=_lbl(run, name) or name)
        what.append(name)
    axes[0].set_xlabel("Delay (ms)")
    axes[0].set_ylabel("Cumulative probability")
    axes[0].set_ylim(0, 1.02)
    return ["CDF of " + _join(what) if what else "CDF"]


@kind("marks_drops", "bottleneck ECN marks and drops per interval")
def _k_marks_drops(axes, runs):
    drawn = []
    for run in runs:
        for m in [m for m in MARKS_DROPS if ("bottleneck", m) in run.sm]:
            t, v = run.sm[("bottleneck", m)]
            axes[0].plot(t, v, lw=1.0, ls=run.style, label=_lbl(run, m))
            drawn.append(m.replace("_", " "))
    axes[0].set_ylabel("packets per interval")
    return ["Bottleneck " + _join(drawn) if drawn else "No marks or drops recorded"]


# --------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------


def run_label(result: RunResult, i: int) -> str:
    lab = result.labels or {}
    run = lab.get("run") or result.name or result.summary.get("name") or f"run {i + 1}"
    seed = lab.get("seed", result.summary.get("seed"))
    return f"{run}" + (f" (seed {seed})" if seed is not None and f"seed={seed}" not in str(run) else "")


def plot(results: Sequence[RunResult], path: str | os.PathLike | None, kind_name: str = "tcp_delivery_with_rtt",
         labels: Sequence[str] | None = None, series: Sequence[dict[tuple[str, str], Series]] | None = None):
    """Draws ``kind_name`` for ``results`` (several: overlaid, each run a line style) into ``path``
    (a PNG). ``path`` None returns the figure instead (the caller closes it). ``series``: each
    run's series map if not :func:`series_map`'s (e.g. a :class:`~aqmlab.seriesview.View`)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if kind_name not in KINDS:
        raise KeyError(f"unknown plot kind '{kind_name}' (known: {', '.join(KINDS)})")
    k = KINDS[kind_name]
    overlay = len(results) > 1
    labels = list(labels) if labels is not None else [run_label(r, i) for i, r in enumerate(results)]
    sms = list(series) if series is not None else [series_map(r) for r in results]
    runs = [_Run(r, labels[i] if overlay else "", sms[i], _STYLES[i % len(_STYLES)] if overlay else "-")
            for i, r in enumerate(results)]
    fig, axes = plt.subplots(k.panels, 1, sharex=kind_name != "ping_cdf", figsize=(12, 3.8 * k.panels + 0.4), dpi=100,
                             squeeze=False)
    axes = list(axes[:, 0])
    try:
        titles = k.draw(axes, runs)
        for ax, title in zip(axes, titles):
            # an explicit y skips matplotlib's title placement, which measures the tick labels
            # of every axis (a fifth of the plotting time)
            ax.set_title(title, fontsize=10, y=1.0, pad=6)
            ax.grid(True, alpha=0.3)
            if kind_name != "ping_cdf":
                ax.set_ylim(bottom=0)
                ax.set_xlim(left=0)
            handles, labs = ax.get_legend_handles_labels()
            if handles:
                # Outside the axes, on the right, so it never covers the data.
                ax.legend(handles, labs, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, frameon=False,
                          ncol=1 if len(labs) <= 14 else 2)
        if kind_name != "ping_cdf":
            axes[-1].set_xlabel("Time (s)")
        fig.suptitle(_title(results[0].summary) if not overlay else f"{k.name}: {len(results)} runs", fontsize=12)
        # Fixed margins instead of tight_layout(), which measures every tick label (a third
        # of the plotting time when suites plot every run); the right margin holds the legend.
        fig.subplots_adjust(left=0.06, right=0.8, bottom=0.08 if k.panels > 1 else 0.13, top=0.9 if k.panels > 1 else 0.84,
                            hspace=0.22)
        if path is None:
            return fig
        # zlib level 1: a third of the PNG-writing time for a file about 1.3x larger
        # (overlays carry long labels: let the figure grow to hold the legend)
        fig.savefig(path, format="png", pil_kwargs={"compress_level": 1}, bbox_inches="tight" if overlay else None)
    except BaseException:
        plt.close(fig)
        raise
    plt.close(fig)
    return None


def plot_throughput_rtt(result: RunResult, path: str | os.PathLike) -> None:
    """Writes the run's two-panel PNG: throughput (per flow, total, link rate) on top, TCP RTT,
    ping, UDP one-way delay and queue delay below (flent's ``tcp_delivery_with_rtt``).

    A run's engine series are read through :func:`aqmlab.seriesview.view`: a block at a time,
    each line reduced to its envelope when it has more points than pixels (the picture is the
    same; memory does not grow with the run's duration)."""
    from . import seriesview

    sm = seriesview.view(result) if seriesview.usable(result) else None
    plot([result], path, "tcp_delivery_with_rtt", series=None if sm is None else [sm])
    if sm is not None and sum(len(v) for _, v in sm.values()) > BIG_FIGURE_POINTS:
        # A figure's artists hold each other (and their line data) in reference cycles: closed,
        # they wait for the cyclic collector, and the writers that follow (report.html, the
        # Parquet file with pyarrow loaded) would add to them.
        import gc

        gc.collect()
