"""A bounded view of a run's series for the pictures: ``throughput_rtt.png`` and ``report.html``.

A picture has a few thousand pixels across; a long run has millions of points per series
(10,000 s at a 10 ms step: a million). :func:`view` reads the engine's series
(:class:`aqmlab.api.SeriesData`: its buffers and spill file) a block of ticks at a time and
reduces every series on the fly to at most four points per bucket of ticks: the first, the
lowest, the highest and the last value of the bucket, in time order (the "M4" reduction of
Jugel et al., VLDB 2014: drawn at one bucket per pixel column or finer, the line's pixels are
those of the whole series, its minimum/maximum envelope included). So memory is bounded by
the number of buckets, not by the run's duration.

A series short enough (at most four points per bucket anyway) is kept as recorded, value for
value, so the pictures of ordinary runs are those drawn from the whole series.

With more than :data:`MAX_DRAWN_FLOWS` TCP flows, only that many flows' own series are kept
(:func:`drawn_flows`, evenly spread over the flow list); the total is summed over all flows.

Series derived from others are computed at full resolution in the same pass and then reduced:
the total throughput (the series ``plot.throughput_parts`` names, summed in the order
``plot.total_throughput`` sums them) and each flow's goodput moving average
(``plot.MovingAverage``, which ``plot._smooth`` runs over a whole series, here fed a block at a
time with its running sums carried over), so they are bit for bit what the whole-series
functions give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import RunResult

#: Buckets per series: a series of more than 4x this many points is reduced to at most 4 points
#: per bucket (the plot's axes are about 900 pixels wide, report.html's at most 1400).
BUCKETS = 2000
#: Fewest buckets per series, however many series (a 1000-flow run's lines).
MIN_BUCKETS = 250
#: Points of all series of one view together (2 Mi points: 32 MB of time and value arrays): with
#: many series each gets fewer buckets, down to :data:`MIN_BUCKETS`.
TOTAL_POINTS = 1 << 21
#: Values read per block (ticks x series; 2 MB).
BLOCK_VALUES = 1 << 18
#: The most TCP flows whose own lines the pictures draw. Above it (a run of 100,000 flows has
#: 500,000 per-flow series: 387 s and 2.6 GB to draw and encode them all, for lines no one can
#: tell apart) the plot and report.html draw this many flows, evenly spread over the flow
#: list, and say so; the total throughput is still the sum over every flow, and
#: timeseries.parquet, timeseries.csv and the flent file hold every series.
MAX_DRAWN_FLOWS = 1000

Series = tuple[Any, Any]


class View(dict):
    """``{(entity, metric): (time, values)}`` as :func:`aqmlab.plot.series_map` gives it, each
    series reduced (see the module docs), plus what is derived at full resolution:

    - ``total``: ``(time, values)`` of :func:`aqmlab.plot.total_throughput`, or None;
    - ``smoothed``: per TCP flow with a goodput series, ``(time, values, window)`` of
      :func:`aqmlab.plot._smooth` over ``smooth_s``;
    - ``step``: the sampling step (s); ``bucket_ticks``: ticks per bucket (1: every series as
      recorded);
    - ``flows_total``, ``flows_drawn``: the TCP flows, and how many of them have their own
      series here (:func:`drawn_flows`; the others' series are left out).
    """

    total: Series | None = None
    smoothed: dict[str, tuple[Any, Any, int]]
    step: float = 0.0
    bucket_ticks: int = 1
    flows_total: int = 0
    flows_drawn: int = 0

    @property
    def reduced(self) -> bool:
        return self.bucket_ticks > 1


def usable(result: RunResult) -> bool:
    """Whether ``result``'s series are the engine's (:attr:`RunResult.series_data`), which a
    view reads; a result built from a DataFrame goes through ``plot.series_map``."""
    return result.engine_series is not None


class _Envelope:
    """One series' reduction: blocks of ticks in, at most four points per bucket kept."""

    def __init__(self) -> None:
        self.t: list[Any] = []
        self.v: list[Any] = []

    def add(self, t: Any, v: Any, k: int) -> None:
        import numpy as np

        n = len(v)
        nb = -(-n // k)
        pad = nb * k - n
        if pad:
            v = np.concatenate((v, np.full(pad, np.nan)))
        vb = v.reshape(nb, k)
        ok = ~np.isnan(vb)
        have = ok.any(axis=1)
        first = ok.argmax(axis=1)
        last = k - 1 - ok[:, ::-1].argmax(axis=1)
        lo = np.where(ok, vb, np.inf).argmin(axis=1)
        hi = np.where(ok, vb, -np.inf).argmax(axis=1)
        idx = np.sort(np.stack((first, lo, hi, last), axis=1), axis=1)
        idx[~have] = 0  # a bucket without a value: one NaN point (a gap in the line)
        keep = np.ones(idx.shape, dtype=bool)
        keep[:, 1:] = idx[:, 1:] != idx[:, :-1]
        pos = (idx + (np.arange(nb) * k)[:, None])[keep]
        self.t.append(t[pos])
        self.v.append(v[pos])

    def series(self) -> Series:
        """The kept points."""
        import numpy as np

        if not self.t:
            return np.zeros(0), np.zeros(0)
        if len(self.t) == 1:
            return self.t[0], self.v[0]
        return np.concatenate(self.t), np.concatenate(self.v)


def bucket_ticks(n_ticks: int, n_series: int, buckets: int = BUCKETS) -> int:
    """Ticks per bucket for ``n_series`` series of ``n_ticks`` ticks: 1 (as recorded) when that
    is at most 4 points per bucket, else enough ticks that each series has at most
    ``buckets`` buckets (fewer when many series share :data:`TOTAL_POINTS`)."""
    b = max(MIN_BUCKETS, min(buckets, TOTAL_POINTS // (4 * max(n_series, 1))))
    return 1 if n_ticks <= 4 * b else -(-n_ticks // b)


def drawn_flows(flows: list[str], limit: int | None = None) -> list[str]:
    """The TCP flows whose own lines the pictures draw: all of them up to ``limit`` (default
    :data:`MAX_DRAWN_FLOWS`), else ``limit`` of them evenly spread over the list (the first,
    then every ``len(flows) / limit``-th), in their order."""
    limit = MAX_DRAWN_FLOWS if limit is None else limit
    if len(flows) <= limit:
        return list(flows)
    return [flows[i * len(flows) // limit] for i in range(limit)]


def view(result: RunResult, smooth_s: float | None = None, buckets: int | None = None, max_flows: int | None = None) -> View:
    """The run's series reduced for drawing (see the module docs); ``smooth_s``: the window of
    the flows' goodput moving average (default ``plot.GOODPUT_SMOOTHING_S``); ``max_flows``:
    the most TCP flows whose own series are kept (default :data:`MAX_DRAWN_FLOWS`; the total
    is summed over every flow). The result is kept on ``result``, so the plot and report.html
    read the series once."""
    import numpy as np

    from . import plot as _plot

    smooth_s = _plot.GOODPUT_SMOOTHING_S if smooth_s is None else smooth_s
    buckets = BUCKETS if buckets is None else buckets
    max_flows = MAX_DRAWN_FLOWS if max_flows is None else max_flows
    cached = getattr(result, "_series_view", None)
    if cached is not None and cached[0] == (smooth_s, buckets, max_flows):
        return cached[1]
    data = result.series_data
    index = data.index()
    n = data.n_ticks
    out = View()
    out.smoothed = {}
    head = data.time(0, min(2, n))
    out.step = float(head[1] - head[0]) if len(head) > 1 else 0.0

    # Which series are kept: every series but those of the TCP flows not drawn.
    flows = _plot.tcp_flows(result, index)
    drawn = drawn_flows(flows, max_flows)
    out.flows_total, out.flows_drawn = len(flows), len(drawn)
    skipped = set(flows) - set(drawn) if len(drawn) < len(flows) else set()
    keys = [key for key in index if key[0] not in skipped] if skipped else list(index)

    # What is derived: the total (plot.total_throughput's parts, in its order, over every flow)
    # and the drawn flows' goodput moving averages (plot._smooth's window).
    parts = [index[key] for key in _plot.throughput_parts(result, index)]
    win = _plot.smoothing_window(out.step, smooth_s)
    smooth_cols = {f: index[(f, "goodput")] for f in drawn if (f, "goodput") in index}
    n_series = len(keys) + len(smooth_cols) + (1 if parts else 0)
    k = bucket_ticks(n, n_series, buckets)
    out.bucket_ticks = k
    # The drawn flows' goodput averages, all of them at once (a row each); the total's sum
    # over the parts in plot.total_throughput's order: for each tick, 0.0 + the first part +
    # the second + ..., which np.add.accumulate down the rows computes in that order (a loop
    # of np.nan_to_num per part took 16 s for 20,000 flows).
    smooth_idx = np.array(list(smooth_cols.values()), dtype=np.intp)
    averaging = n >= 2 and win > 1
    smoother = _plot.MovingAverage(win) if averaging else None
    parts_idx = np.array(parts, dtype=np.intp)

    def derived(x: Any) -> tuple[Any, Any]:
        tot = None
        if len(parts_idx):
            tot = np.zeros(x.shape[1])
            tot += np.add.accumulate(np.nan_to_num(x[parts_idx], copy=False), axis=0)[-1]
        sm = x[smooth_idx]
        return tot, (smoother.add(sm) if smoother is not None else sm)

    ncols = len(data.keys)
    block = max(k, (BLOCK_VALUES // max(ncols, 1)) // k * k)
    if k == 1:
        # Every series as recorded: one array of all of them, filled a block at a time (no
        # per-block pieces held until a concatenation copies them).
        kept = np.empty((len(keys), n))
        tot_row = np.zeros(n) if parts else None
        smooth_rows = np.empty((len(smooth_cols), n))
        sel = np.array([index[key] for key in keys], dtype=np.intp)
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            x = data._block(0, ncols, lo, hi)
            kept[:, lo:hi] = x[sel]
            tot, sm = derived(x)
            if tot_row is not None:
                tot_row[lo:hi] = tot
            smooth_rows[:, lo:hi] = sm
            del x
        grid = data.time()
        for i, key in enumerate(keys):
            out[key] = (grid, kept[i])
        out.total = (grid, tot_row) if tot_row is not None else None
        out.smoothed = {f: (grid, smooth_rows[j], win if averaging else 1) for j, f in enumerate(smooth_cols)}
    else:
        envs = {key: _Envelope() for key in keys}
        total_env = _Envelope() if parts else None
        smooth_envs = {f: _Envelope() for f in smooth_cols}
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            t = data.time(lo, hi)
            x = data._block(0, ncols, lo, hi)
            for key in keys:
                envs[key].add(t, x[index[key]], k)
            tot, sm = derived(x)
            if total_env is not None:
                total_env.add(t, tot, k)
            for j, f in enumerate(smooth_cols):
                smooth_envs[f].add(t, sm[j], k)
        for key in keys:
            out[key] = envs.pop(key).series()
        out.total = total_env.series() if total_env is not None else None
        out.smoothed = {f: (*smooth_envs[f].series(), win if averaging else 1) for f in smooth_cols}
    try:
        result._series_view = ((smooth_s, buckets, max_flows), out)
    except AttributeError:
        pass
    return out


def describe(v: View) -> str | None:
    """What the pictures leave out, in a sentence, or None when they draw every series as
    recorded."""
    said = []
    if v.flows_drawn < v.flows_total:
        said.append(
            f"{v.flows_drawn} of the {v.flows_total} TCP flows have their own lines (evenly spread over the "
            f"flow list; the total is the sum over all of them)"
        )
    if v.reduced:
        span = v.bucket_ticks * v.step
        said.append(
            f"{'Long series are' if not said else 'long series are'} drawn from their first, lowest, highest and last "
            f"value in each {span:g} s ({v.bucket_ticks} steps)"
        )
    if not said:
        return None
    return "; ".join(said) + "; timeseries.parquet holds every value."
