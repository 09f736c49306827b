"""The flent-style ``tcp_delivery_with_rtt`` plot: per-flow throughput over per-flow RTT."""

from __future__ import annotations

import os
from typing import Any

from .api import RunResult

#: Above this many flows the per-flow lines are drawn thin and without a legend entry each.
MAX_LEGEND_FLOWS = 12


#: Goodput per sampling step is bursty (a whole window of in-order data can arrive at once
#: after a loss is repaired), so it is drawn as a moving average over about this long.
GOODPUT_SMOOTHING_S = 1.0


def _step(s) -> float:
    idx = s.index.to_numpy()
    return float(idx[1] - idx[0]) if len(idx) > 1 else 0.0


def _smoothing_ticks(s) -> int:
    step = _step(s)
    if step <= 0:
        return 1
    return max(1, int(round(GOODPUT_SMOOTHING_S / step)))


def _secs(win: int, s) -> str:
    return f"{win * _step(s):g} s"


def _title(summary: dict[str, Any]) -> str:
    name = summary.get("name") or "aqmlab run"
    bn = summary.get("bottleneck", {})
    parts = [str(name)]
    qdisc = bn.get("qdisc")
    rate = bn.get("rate_mbps")
    detail = []
    if qdisc:
        detail.append(str(qdisc))
    if rate is not None:
        detail.append(f"{rate:g} Mbit/s")
    if detail:
        parts.append(" @ ".join(detail))
    return " \u2014 ".join(parts)


def plot_throughput_rtt(result: RunResult, path: str | os.PathLike) -> None:
    """Writes a two-panel PNG: throughput (Mbit/s) on top, TCP RTT and queue delay (ms) below."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    summary = result.summary
    flows = result.flows
    many = len(flows) > MAX_LEGEND_FLOWS
    have = set(result.units)

    fig, (ax_tp, ax_rtt) = plt.subplots(2, 1, sharex=True, figsize=(10, 7.5), dpi=100)
    try:
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        lw = 0.6 if many else 1.2
        for i, flow in enumerate(flows):
            c = colors[i % len(colors)]
            label = None if many else flow
            if (flow, "delivery_rate") in have:
                s = result.series(flow, "delivery_rate")
                ax_tp.plot(s.index, s.values, color=c, lw=lw, label=f"{label} delivery rate" if label else None)
            if (flow, "goodput") in have:
                s = result.series(flow, "goodput")
                win = _smoothing_ticks(s)
                sm = s.rolling(win, min_periods=1).mean() if win > 1 else s
                avg = f" ({_secs(win, s)} avg)" if win > 1 else ""
                ax_tp.plot(
                    sm.index, sm.values, color=c, lw=lw * 0.8, ls="--", alpha=0.8,
                    label=f"{label} goodput{avg}" if label else None,
                )
            if (flow, "srtt") in have:
                s = result.series(flow, "srtt")
                ax_rtt.plot(s.index, s.values, color=c, lw=lw, label=f"{label} srtt" if label else None)
        # Per sub-queue delay (e.g. DualPI2's C and L queues) when the discipline has several.
        # (qdelay_max is the per-interval maximum of the whole queue, not a sub-queue)
        sub_queues = sorted(m for (e, m) in have if e == "bottleneck" and m.startswith("qdelay_") and m != "qdelay_max")
        for j, metric in enumerate(sub_queues):
            s = result.series("bottleneck", metric)
            ax_rtt.plot(s.index, s.values, color="black", lw=1.0, ls=[":", "--", "-."][j % 3],
                        label=f"{metric[len('qdelay_'):]} queue delay")
        if not sub_queues and ("bottleneck", "qdelay") in have:
            s = result.series("bottleneck", "qdelay")
            ax_rtt.plot(s.index, s.values, color="black", lw=1.0, ls=":", label="bottleneck queue delay")
        for probe in summary.get("probes", []):
            name = probe["name"]
            if (name, "rtt") in have:
                s = result.series(name, "rtt")
                ax_rtt.plot(s.index, s.values, color="grey", lw=0.8, label=f"{name} RTT")

        for udp in summary.get("udp", []):
            name = udp["name"]
            if (name, "rate") in have:
                s = result.series(name, "rate")
                ax_tp.plot(s.index, s.values, color="tab:brown", lw=0.8, label=f"{name} received")
            if (name, "owd") in have:
                s = result.series(name, "owd")
                ax_rtt.plot(s.index, s.values, color="tab:brown", lw=0.8, label=f"{name} one-way delay")

        rate = summary.get("bottleneck", {}).get("rate_mbps")
        if rate:
            ax_tp.axhline(rate, color="grey", lw=0.8, ls="-.", label=f"link rate ({rate:g} Mbit/s)")

        ax_tp.set_ylabel("Throughput (Mbit/s)")
        ax_tp.set_title("Per-flow throughput: delivery rate and goodput" + (f" ({len(flows)} flows)" if many else ""), fontsize=10)
        ax_rtt.set_ylabel("TCP RTT / queue delay (ms)")
        ax_rtt.set_title("TCP RTT (srtt), probe RTT, UDP one-way delay and bottleneck queue delay", fontsize=10)
        ax_rtt.set_xlabel("Time (s)")
        for ax in (ax_tp, ax_rtt):
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
            ax.set_xlim(left=0)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper right", fontsize=8, ncol=2 if not many else 1, framealpha=0.8)
        fig.suptitle(_title(summary), fontsize=12)
        # Fixed margins instead of tight_layout(), which measures every tick label and took
        # about a third of the plotting time (suites plot every run).
        fig.subplots_adjust(left=0.075, right=0.98, bottom=0.07, top=0.91, hspace=0.16)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
