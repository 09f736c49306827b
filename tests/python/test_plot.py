"""Plots: the per-run throughput_rtt.png (legend outside the data, titles naming what is drawn,
a totals line, UDP under TCP) and ``aqmlab plot`` (flent's kinds, overlays)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO, run_cli

import aqmlab
from aqmlab import plot


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """A TCP flow and a UDP video flow over DualPI2 (two sub-queues)."""
    out = tmp_path_factory.mktemp("plot") / "video"
    proc = run_cli("run", REPO / "scenarios" / "video-dualpi2.toml", "--out", out, "--set", "duration=4s", "--set", "metrics.spike_after=1s", "-q",
                   "--no-plot", "--no-html", "--no-flent")
    assert proc.returncode == 0, proc.stderr
    return out


def _fig(results, kind="tcp_delivery_with_rtt", **kw):
    return plot.plot(results, None, kind, **kw)


def test_default_plot_legend_outside_titles_totals_and_udp_below(demo_run, video):
    import matplotlib.pyplot as plt

    _, two = demo_run
    r = aqmlab.load(two)
    fig = _fig([r])
    try:
        top, bottom = fig.axes
        fig.canvas.draw()
        for ax in (top, bottom):
            leg = ax.get_legend()
            assert leg is not None
            # the legend box lies right of the axes: it covers no data
            assert leg.get_window_extent().x0 >= ax.get_window_extent().x1
        # titles name only what is drawn: no UDP, no ping in this scenario
        assert "UDP" not in top.get_title() and "UDP" not in bottom.get_title()
        assert "ping" not in bottom.get_title().lower() and "queue delay" in bottom.get_title()
        assert "total" in top.get_title()
        lines = {ln.get_label(): ln for ln in top.get_lines()}
        total = sum(np.nan_to_num(r.series(f, "delivery_rate").to_numpy()) for f in r.flows)
        np.testing.assert_allclose(lines["total"].get_ydata(), total)
    finally:
        plt.close(fig)

    v = aqmlab.load(video)
    fig = _fig([v])
    try:
        top, bottom = fig.axes
        assert "UDP" in top.get_title() and "UDP" in bottom.get_title()
        lines = {ln.get_label(): ln for ln in top.get_lines()}
        udp, tcp = lines["video received"], lines["prague"]
        assert udp.get_zorder() < tcp.get_zorder() and udp.get_alpha() < 1 and udp.get_linewidth() < tcp.get_linewidth()
        # DualPI2: one delay line per sub-queue
        labels = [ln.get_label() for ln in bottom.get_lines()]
        assert "C queue delay" in labels and "L queue delay" in labels
    finally:
        plt.close(fig)


def test_overlay_draws_every_run_with_its_label(demo_run, video):
    import matplotlib.pyplot as plt

    _, two = demo_run
    runs = [aqmlab.load(two), aqmlab.load(video)]
    fig = _fig(runs, "tcp_rtt", labels=["A", "B"])
    try:
        labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
        assert {"A: cubic-0 srtt", "A: cubic-1 srtt", "B: prague srtt"} <= set(labels)
        styles = {ln.get_label()[0]: ln.get_linestyle() for ln in fig.axes[0].get_lines()}
        assert styles["A"] != styles["B"]
    finally:
        plt.close(fig)


def test_ping_cdf_is_a_cdf_of_the_samples(video):
    import matplotlib.pyplot as plt

    v = aqmlab.load(video)
    fig = _fig([v], "ping_cdf")
    try:
        (ln,) = fig.axes[0].get_lines()
        x, y = ln.get_xdata(), ln.get_ydata()
        s = v.series("prague", "srtt").dropna().to_numpy()  # no ping probe here: the srtt samples
        assert len(x) == len(s) and np.all(np.diff(x) >= 0) and y[-1] == 1.0
        assert np.median(s) == pytest.approx(np.interp(0.5, y, x), rel=0.05)
    finally:
        plt.close(fig)


def test_plot_cli_lists_kinds_writes_pngs_and_overlays(demo_run, video, tmp_path):
    _, two = demo_run
    proc = run_cli("plot", "--list")
    assert proc.returncode == 0
    for k in ("tcp_delivery_with_rtt", "totals", "ping_cdf", "tcp_rtt", "tcp_cwnd", "qdelay"):
        assert k in proc.stdout
    out = tmp_path / "o.png"
    proc = run_cli("plot", two, video, "--overlay", "--kind", "totals", "--out", out)
    assert proc.returncode == 0, proc.stderr
    import matplotlib.image

    img = matplotlib.image.imread(out)
    assert img.shape[0] > 300 and (img[..., :3].max(axis=2) - img[..., :3].min(axis=2) > 0.25).sum() > 500
    r = aqmlab.load(two)
    plot.plot([r], tmp_path / "c.png", "tcp_cwnd")  # in-process: each CLI call costs a second of imports
    assert (tmp_path / "c.png").stat().st_size > 10_000
    proc = run_cli("plot", two, "--kind", "nope")
    assert proc.returncode == 2 and "unknown" in proc.stderr
    proc = run_cli("plot", tmp_path)
    assert proc.returncode == 2 and "no finished run" in proc.stderr


def test_suites_above_the_limit_are_not_plotted_unless_asked(tmp_path, monkeypatch):
    from aqmlab import runner
    from aqmlab import suite as S

    s6 = S.load_suite("l4s-tests/s6")
    kw = dict(filters={"classic": ["cubic"], "qdisc": ["pie"], "ecn": ["ecn"]}, seeds=2, overrides=[("duration", "1s")], jobs=1,
              progress=False)
    monkeypatch.setattr(runner, "AUTO_PLOTS_MAX_RUNS", 1)
    out = runner.run_suite(s6, tmp_path / "auto", plots=None, **kw)
    assert len(out.runs) == 2 and not out.failed
    assert not list((tmp_path / "auto").rglob("throughput_rtt.png"))
    assert (tmp_path / "auto" / "index.html").is_file()
    monkeypatch.setattr(runner, "AUTO_PLOTS_MAX_RUNS", 2)
    runner.run_suite(s6, tmp_path / "small", plots=None, **kw)
    assert len(list((tmp_path / "small").rglob("throughput_rtt.png"))) == 2
