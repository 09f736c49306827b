"""The HTML reports: a run's report.html and a suite's index.html open from disk, hold the
run's data and tables, link only to files that exist, and render in headless Chromium (Debian's
``chromium``, installed by ``make test``'s set-up, ``make test-tools``) without script errors
and with drawn plots."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

import aqmlab
from aqmlab import htmlreport

TINY = ["l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie", "--set", "duration=3s", "--seeds", "1", "--no-plots"]


@pytest.fixture(scope="module")
def suite_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "s6"
    proc = run_cli("suite", "run", *TINY, "--html", "--jobs", "1", "--out", out, "-q")
    assert proc.returncode == 0, proc.stderr
    return out


def _data(page: Path) -> list[dict]:
    text = page.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="aqmlab-data">(.*?)</script>', text, re.S)
    assert m, "no plot data in the page"
    return json.loads(m.group(1))


def _markup(page: Path) -> str:
    """The page without its inlined scripts (plotly.js holds markup-like strings)."""
    return re.sub(r"<script>.*?</script>", "", page.read_text(encoding="utf-8"), flags=re.S)


def _links(page: Path) -> list[str]:
    return re.findall(r'<a href="([^"]+)"', _markup(page))


def _external(page: Path) -> list[str]:
    """src/href attributes of the page's own markup that point off the machine."""
    return re.findall(r'(?:src|href)="((?:https?:)?//[^"]*)"', _markup(page))


def test_run_report_holds_the_series_and_links_every_file(demo_run):
    _, out = demo_run
    page = out / "report.html"
    assert page.is_file()
    assert _external(page) == []
    links = _links(page)
    on_disk = sorted(p.name for p in out.iterdir() if p.is_file() and not p.name.startswith("."))
    assert sorted(links) == on_disk  # every file, and only files that exist
    specs = {s["id"]: s for s in _data(page)}
    r = aqmlab.load(out)
    assert {"throughput", "rtt", "cwnd", "qdelay"} <= set(specs)
    traces = {t["name"]: t for t in specs["throughput"]["traces"]}
    for f in r.flows:
        s = r.series(f, "delivery_rate")
        # 5 significant digits of the series' largest value (6 for the times)
        tol = 1e-4 * np.nanmax(np.abs(s.to_numpy()))
        np.testing.assert_allclose(np.array(traces[f"{f} delivery rate"]["y"], dtype=float), s.to_numpy(), rtol=0, atol=tol)
        np.testing.assert_allclose(traces[f"{f} delivery rate"]["x"], s.index.to_numpy(), rtol=0, atol=1e-5 * s.index.max())
        assert f"{f} srtt" in {t["name"] for t in specs["rtt"]["traces"]}
        assert f"{f} cwnd" in {t["name"] for t in specs["cwnd"]["traces"]}
    total = sum(np.nan_to_num(r.series(f, "delivery_rate").to_numpy()) for f in r.flows)  # a flow without a sample adds 0
    np.testing.assert_allclose(np.array(traces["total"]["y"], dtype=float), total, rtol=0, atol=1e-4 * total.max())
    # the summary's per-flow table has a row per flow
    text = page.read_text(encoding="utf-8")
    for f in r.flows:
        assert f"<td>{f}</td>" in text


def test_suite_index_holds_the_report_tables_and_links(suite_out):
    index = suite_out / "index.html"
    assert index.is_file() and (suite_out / htmlreport.PLOTLY_JS).is_file()
    assert _external(index) == []
    text = index.read_text(encoding="utf-8")
    md = (suite_out / "REPORT.md").read_text(encoding="utf-8")
    for header in re.findall(r"^## (.+)$", md, re.M):
        assert f"<h2>{htmlreport._inline(header)}</h2>" in text
    n_tables = len(re.findall(r"^\|\s*-{3}", md, re.M)) + len(re.findall(r"^\| (?:-{3}|:?-+:?) \|", md, re.M))
    assert text.count("<table>") >= 1 + min(1, n_tables)
    for link in _links(index):
        assert (suite_out / link).is_file(), link
    run_pages = [suite_out / link for link in _links(index) if link.endswith("report.html")]
    assert run_pages, "no run's report.html linked"
    for page in run_pages:
        srcs = re.findall(r'<script src="([^"]+)"', page.read_text(encoding="utf-8"))
        assert srcs == ["../../../plotly.min.js"] and (page.parent / srcs[0]).resolve().is_file()


def test_markdown_subset():
    md = "# T `x`\n\nA [plot](runs/cell=a/seed=1/x.png) and **b**.\n\n| a | b |\n| --- | ---: |\n| 1 \\| 2 | <3> |\n\n- one\n- two\n"
    h = htmlreport.markdown_html(md)
    assert "<h1>T <code>x</code></h1>" in h
    assert '<a href="runs/cell=a/seed=1/x.png">plot</a>' in h and "<b>b</b>" in h
    assert "<tr><th>a</th><th>b</th></tr>" in h
    assert '<td class="">1 | 2</td><td class="num">&lt;3&gt;</td>' in h
    assert "<ul><li>one</li><li>two</li></ul>" in h


# --------------------------------------------------------------------------------------
# Headless Chromium
# --------------------------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _browse(page: Path, *, screenshot: Path | None = None) -> tuple[str, str]:
    """Loads ``page`` from file:// headless; returns (DOM after scripts ran, stderr log)."""
    exe = _chromium()
    with tempfile.TemporaryDirectory() as profile:
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
                "--window-size=1200,1800"]
        args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        proc = subprocess.run(args + [page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    return proc.stdout, proc.stderr


def _problems(dom: str, log: str) -> list[str]:
    """Script errors the page counted, and console/resource errors Chromium logged."""
    out = []
    m = re.search(r'data-js-errors="(\d+)"', dom)
    if m:
        e = re.search(r'data-js-error="([^"]*)"', dom)
        out.append(f"{m.group(1)} script error(s): {e.group(1) if e else '?'}")
    for line in log.splitlines():
        if "CONSOLE" in line and re.search(r"Uncaught|Error|Failed to load|ERR_", line):
            out.append(line.strip())
    return out


def _coloured_pixels(png: Path) -> int:
    import matplotlib.image

    img = matplotlib.image.imread(png)[..., :3]
    spread = img.max(axis=2) - img.min(axis=2)  # 0 for white, grey, black text
    return int((spread > 0.25).sum())


needs_chromium = pytest.mark.skipif(
    _chromium() is None,
    reason="chromium is not installed and `make test-tools` could not install it (apt-get install chromium)",
)


@needs_chromium
def test_reports_render_in_headless_chromium(demo_run, suite_out, tmp_path):
    _, run_dir = demo_run
    run_page = run_dir / "report.html"
    suite_run_page = next((suite_out / "runs").glob("*/*/report.html"))
    index = suite_out / "index.html"
    broken = tmp_path / "broken.html"  # the checks must catch a failing page
    broken.write_text('<!DOCTYPE html><html><head><script>' + htmlreport._ERRORS_JS + '</script>'
                      '<script src="missing.js"></script></head><body><script>Plotly.newPlot("x", [])</script></body></html>')
    jobs = {
        "run": (run_page, None), "suite run": (suite_run_page, None), "index": (index, None), "broken": (broken, None),
        "run shot": (run_page, tmp_path / "run.png"), "blank shot": (broken, tmp_path / "blank.png"),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        res = dict(zip(jobs, pool.map(lambda j: _browse(j[0], screenshot=j[1]), jobs.values())))

    assert len(_problems(*res["broken"])) >= 2, res["broken"]  # the thrown error and the missing file
    for name, page in (("run", run_page), ("suite run", suite_run_page), ("index", index)):
        dom, log = res[name]
        assert "<body" in dom, f"{name}: no DOM dumped: {log[-2000:]}"
        assert _problems(dom, log) == [], name
    for name, page in (("run", run_page), ("suite run", suite_run_page)):
        dom, _ = res[name]
        n = len(_data(page))
        assert f'data-plots-done="{n}"' in dom, name
        # plotly draws each plot as SVG with one path per trace
        assert dom.count('class="main-svg"') >= n, name
        assert dom.count('class="js-line"') >= sum(len(s["traces"]) for s in _data(page) if s["id"] == "throughput")
    # The screenshot shows coloured plot lines; a page without plots shows none.
    assert _coloured_pixels(tmp_path / "run.png") > 2000
    assert _coloured_pixels(tmp_path / "blank.png") < 50
