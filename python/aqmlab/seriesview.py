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

Series derived from others are computed at full resolution in the same pass and then reduced:
the total throughput (``plot.total_throughput``: the sum over the flows) and each flow's
goodput moving average (``plot._smooth``), with the same floating-point operations in the same
order as the whole-series functions (a running sum carried from block to block), so they are
bit for bit what those functions give.
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

Series = tuple[Any, Any]


class View(dict):
    """``{(entity, metric): (time, values)}`` as :func:`aqmlab.plot.series_map` gives it, each
    series reduced (see the module docs), plus what is derived at full resolution:

    - ``total``: ``(time, values)`` of :func:`aqmlab.plot.total_throughput`, or None;
    - ``smoothed``: per TCP flow with a goodput series, ``(time, values, window)`` of
      :func:`aqmlab.plot._smooth` over ``smooth_s``;
    - ``step``: the sampling step (s); ``bucket_ticks``: ticks per bucket (1: every series as
      recorded).
    """

    total: Series | None = None
    smoothed: dict[str, tuple[Any, Any, int]]
    step: float = 0.0
    bucket_ticks: int = 1

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

        if k == 1:
            self.t.append(t)
            self.v.append(v)
            return
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

    def series(self, time: Any = None) -> Series:
        """The kept points; ``time``: the whole grid, which the points are (every tick kept),
        shared by the series instead of a copy each."""
        import numpy as np

        if not self.t:
            return np.zeros(0), np.zeros(0)
        if len(self.t) == 1:
            return self.t[0] if time is None else time, self.v[0]
        return np.concatenate(self.t) if time is None else time, np.concatenate(self.v)


class _Smoother:
    """``plot._smooth``'s trailing moving average over ``win`` ticks (``min_periods=1``, NaN
    skipped), a block at a time: the running sums are carried over, so each value is the one
    the whole-series ``np.cumsum`` gives."""

    def __init__(self, win: int) -> None:
        import numpy as np

        self.win = win
        self.pos = 0
        self.c = np.zeros(0)
        self.n = np.zeros(0, dtype=np.int64)

    def add(self, v: Any) -> Any:
        import numpy as np

        x = np.nan_to_num(v)
        ok = ~np.isnan(v)
        if self.pos == 0:
            c = np.cumsum(x)
            n = np.cumsum(ok)
        else:
            c = np.cumsum(np.concatenate((self.c[-1:], x)))[1:]
            n = self.n[-1] + np.cumsum(ok)
        s, k = c.copy(), n.copy()
        w, h = self.win, len(self.c)
        j0 = max(0, w - self.pos)  # the first tick of the block with a full window behind it
        if j0 < len(v):
            hist_c, hist_n = np.concatenate((self.c, c)), np.concatenate((self.n, n))
            s[j0:] = c[j0:] - hist_c[h + j0 - w : h + len(v) - w]
            k[j0:] = n[j0:] - hist_n[h + j0 - w : h + len(v) - w]
            self.c, self.n = hist_c[-w:], hist_n[-w:]
        else:
            self.c, self.n = np.concatenate((self.c, c))[-w:], np.concatenate((self.n, n))[-w:]
        self.pos += len(v)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(k > 0, s / np.maximum(k, 1), np.nan)


def bucket_ticks(n_ticks: int, n_series: int, buckets: int = BUCKETS) -> int:
    """Ticks per bucket for ``n_series`` series of ``n_ticks`` ticks: 1 (as recorded) when that
    is at most 4 points per bucket, else enough ticks that each series has at most
    ``buckets`` buckets (fewer when many series share :data:`TOTAL_POINTS`)."""
    b = max(MIN_BUCKETS, min(buckets, TOTAL_POINTS // (4 * max(n_series, 1))))
    return 1 if n_ticks <= 4 * b else -(-n_ticks // b)


def view(result: RunResult, smooth_s: float | None = None, buckets: int | None = None) -> View:
    """The run's series reduced for drawing (see the module docs); ``smooth_s``: the window of
    the flows' goodput moving average (default ``plot.GOODPUT_SMOOTHING_S``). The result is
    kept on ``result``, so the plot and report.html read the series once."""
    import numpy as np

    from . import plot as _plot

    smooth_s = _plot.GOODPUT_SMOOTHING_S if smooth_s is None else smooth_s
    buckets = BUCKETS if buckets is None else buckets
    cached = getattr(result, "_series_view", None)
    if cached is not None and cached[0] == (smooth_s, buckets):
        return cached[1]
    data = result.series_data
    index = data.index()
    keys = list(index)
    n = data.n_ticks
    out = View()
    out.smoothed = {}
    head = data.time(0, min(2, n))
    out.step = float(head[1] - head[0]) if len(head) > 1 else 0.0

    # What is derived: the total (plot.total_throughput's parts, in its order) and the goodput
    # moving averages (plot._smooth's window).
    flows = _plot.tcp_flows(result, index)
    parts = []
    for f in flows:
        key = (f, "delivery_rate") if (f, "delivery_rate") in index else (f, "goodput") if (f, "goodput") in index else None
        if key is not None:
            parts.append(index[key])
    parts += [index[(u, "rate")] for u in _plot._udp_names(result.summary) if (u, "rate") in index]
    win = max(1, int(round(smooth_s / out.step))) if out.step > 0 else 1
    smooth_cols = {f: index[(f, "goodput")] for f in flows if (f, "goodput") in index}
    n_series = len(keys) + len(smooth_cols) + (1 if parts else 0)
    k = bucket_ticks(n, n_series, buckets)
    out.bucket_ticks = k

    envs = {key: _Envelope() for key in keys}
    total_env = _Envelope() if parts else None
    smooth_envs = {f: _Envelope() for f in smooth_cols}
    smoothers = {f: _Smoother(win) for f in smooth_cols} if n >= 2 and win > 1 else {}
    ncols = len(data.keys)
    block = max(k, (BLOCK_VALUES // max(ncols, 1)) // k * k)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        t = data.time(lo, hi)
        x = data._block(0, ncols, lo, hi)
        for key, i in index.items():
            envs[key].add(t, x[i], k)
        if total_env is not None:
            tot = np.zeros(hi - lo)
            for i in parts:
                tot += np.nan_to_num(x[i])
            total_env.add(t, tot, k)
        for f, i in smooth_cols.items():
            smooth_envs[f].add(t, smoothers[f].add(x[i]) if f in smoothers else x[i], k)
    grid = data.time() if k == 1 else None
    for key in keys:
        out[key] = envs.pop(key).series(grid)
    out.total = total_env.series(grid) if total_env is not None else None
    out.smoothed = {f: (*smooth_envs[f].series(grid), win if f in smoothers else 1) for f in smooth_cols}
    try:
        result._series_view = ((smooth_s, buckets), out)
    except AttributeError:
        pass
    return out


def describe(v: View) -> str | None:
    """One sentence saying how the series were reduced, or None when they were not."""
    if not v.reduced:
        return None
    span = v.bucket_ticks * v.step
    return (
        f"Long series are drawn from their first, lowest, highest and last value in each "
        f"{span:g} s ({v.bucket_ticks} steps); timeseries.parquet holds every value."
    )
