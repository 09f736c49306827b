"""The HTML reports: ``report.html`` of a run and ``index.html`` of a suite.

Both are static files that open from disk (``file://``): no server and no network. The
interactive plots use plotly.js, read from the ``plotly`` Python package (its wheel ships
``plotly.min.js``) and either inlined into the page (a single run: one self-contained file)
or written once into a suite's output directory and referenced relatively by every run's
page (``aqmlab suite run --html``). No CDN link is ever written.

A run's page holds the summary as tables, one plot per group of series (throughput, TCP
RTT, cwnd, queue delay per queue, marks and drops, UDP), and links to every file of the run
directory. A suite's ``index.html`` holds REPORT.md (its tables as HTML tables) and links to
results.csv, REPORT.md and every run's files.
"""

from __future__ import annotations

import html as _html
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import RunResult

#: The plotly.js file a suite's output directory holds when its runs have HTML reports.
PLOTLY_JS = "plotly.min.js"


def _plotly_js_file() -> Path | None:
    """plotly.min.js in the installed ``plotly`` package's files (found without importing
    plotly, whose import takes a quarter of a second), or None in another layout."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    if spec is None:
        raise RuntimeError("the HTML report needs the plotly package (pip install plotly): it ships plotly.min.js")
    for d in spec.submodule_search_locations or []:
        p = Path(d) / "package_data" / "plotly.min.js"
        if p.is_file():
            return p
    return None


def plotly_js() -> str:
    """The text of plotly.min.js as the installed ``plotly`` package ships it."""
    p = _plotly_js_file()
    if p is not None:
        return p.read_text(encoding="utf-8")
    from plotly.offline import get_plotlyjs  # another layout: ask plotly

    return get_plotlyjs()


def _plotly_js_parts() -> Iterator[str]:
    """:func:`plotly_js` in pieces of 1 MB (a page inlines it without a copy of 4.8 MB)."""
    p = _plotly_js_file()
    if p is None:
        yield plotly_js()
        return
    with open(p, encoding="utf-8") as f:
        while part := f.read(1 << 20):
            yield part


def esc(x: Any) -> str:
    return _html.escape("" if x is None else str(x), quote=True)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.2em 2em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{background:#f5f5f5;padding:0 .2em}.plot{width:100%;height:420px}
.files a{margin-right:1em}.note{color:#555;font-size:.9em}
"""


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v).lower()
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.6g}"
    return str(v)


def _cell(v: Any) -> str:
    num = isinstance(v, (int, float)) and not isinstance(v, bool)
    return f'<td class="num">{esc(_fmt(v))}</td>' if num else f"<td>{esc(_fmt(v))}</td>"


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars of a nested dict, keys joined with '.'; lists of scalars joined with ', '."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, list):
            if all(not isinstance(x, (Mapping, list)) for x in v):
                out[key] = ", ".join(_fmt(x) for x in v)
        else:
            out[key] = v
    return out


def kv_table(d: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th>{_cell(v)}</tr>" for k, v in _flatten(d).items())
    return f"<table>{rows}</table>"


def records_table(items: Sequence[Mapping[str, Any]]) -> str:
    """A list of dicts (flows, UDP flows, probes) as one table, a column per scalar key."""
    flat = [_flatten(i) for i in items]
    cols: list[str] = []
    for f in flat:
        for k in f:
            if k not in cols:
                cols.append(k)
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(_cell(f.get(c)) for c in cols) + "</tr>" for f in flat)
    return f"<table><tr>{head}</tr>{body}</table>"


def summary_html(summary: Mapping[str, Any]) -> str:
    """The run's summary: top-level values, the bottleneck, then each list of records."""
    parts = []
    top = {k: v for k, v in summary.items() if not isinstance(v, (Mapping, list))}
    parts.append("<h2>Run</h2>" + kv_table(top))
    for k, v in summary.items():
        if isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
            parts.append(f"<h2>{esc(k)}</h2>" + records_table(v))
        elif isinstance(v, Mapping) and v:
            parts.append(f"<h2>{esc(k)}</h2>" + kv_table(v))
        elif isinstance(v, list) and v:
            parts.append(f"<h2>{esc(k)}</h2><ul>" + "".join(f"<li>{esc(x)}</li>" for x in v) + "</ul>")
    return "\n".join(parts)


# --------------------------------------------------------------------------------------
# Plot data
# --------------------------------------------------------------------------------------


def _round(values: Any, digits: int = 5) -> list[float | None]:
    """Values as JSON numbers, rounded to ``digits`` significant digits of the series' largest
    magnitude (one decimal count per series, vectorised; an integer count divided by a power
    of ten is the double nearest the short decimal, so JSON prints it short); NaN -> null."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x)
    big = float(np.max(np.abs(x[finite]))) if finite.any() else 0.0
    decimals = max(0, digits - 1 - int(math.floor(math.log10(big)))) if big > 0 else 0
    scale = 10.0 ** min(decimals, 15)
    r = np.where(finite, np.rint(np.where(finite, x, 0.0) * scale) / scale, np.nan)
    return [None if v != v else v for v in r.tolist()]


class _Numbers:
    """A trace's ``x`` or ``y`` before :func:`_round` makes it a list: kept as an array until its
    trace is written, so that the page's data never exists whole as Python numbers."""

    __slots__ = ("values", "digits")

    def __init__(self, values: Any, digits: int = 5) -> None:
        self.values, self.digits = values, digits

    def json(self) -> list[float | None]:
        return _round(self.values, self.digits)


def _series(result: RunResult) -> Any:
    """The run's series for the page: the engine's through a bounded
    :func:`aqmlab.seriesview.view` (read a block at a time, long series reduced to their
    envelope), a result built from a DataFrame through :func:`aqmlab.plot.series_map`."""
    from . import seriesview
    from .plot import series_map

    return seriesview.view(result) if seriesview.usable(result) else series_map(result)


def _plot_specs(result: RunResult, sm: Any) -> list[dict[str, Any]]:
    """The run's plots as ``{"id", "title", "ylabel", "traces": [{"name", "x", "y", ...}]}``,
    each trace's ``x`` and ``y`` as :class:`_Numbers`."""
    from .plot import MARKS_DROPS, _probe_names, _queue_metrics, _udp_names, tcp_flows, total_throughput
    from .seriesview import View

    summary = result.summary
    flows = tcp_flows(result, sm)

    def trace(key: tuple[str, str], name: str, **kw: Any) -> dict[str, Any]:
        t, v = sm[key]
        return {"name": name, "x": _Numbers(t, 6), "y": _Numbers(v), **kw}

    udp = _udp_names(summary)
    specs: list[dict[str, Any]] = []
    tp = [trace((u, "rate"), f"{u} received", opacity=0.5, width=1) for u in udp if (u, "rate") in sm]
    for f in flows:
        if (f, "delivery_rate") in sm:
            tp.append(trace((f, "delivery_rate"), f"{f} delivery rate"))
        if (f, "goodput") in sm:
            tp.append(trace((f, "goodput"), f"{f} goodput", dash="dot", visible="legendonly"))
    tot = sm.total if isinstance(sm, View) else total_throughput(result, sm)
    if tot is not None and len(flows) + len(udp) > 1:
        tp.append({"name": "total", "x": _Numbers(tot[0], 6), "y": _Numbers(tot[1]), "color": "black", "width": 2})
    if ("bottleneck", "rate") in sm:
        tp.append(trace(("bottleneck", "rate"), "link rate", color="grey", dash="dashdot", shape="hv"))
    specs.append({"id": "throughput", "title": "Throughput", "ylabel": "Mbit/s", "traces": tp})
    rtt = [trace((f, "srtt"), f"{f} srtt") for f in flows if (f, "srtt") in sm]
    pings = [trace((p, "rtt"), f"{p} RTT", color="grey") for p in _probe_names(summary) if (p, "rtt") in sm]
    title = " and ".join(t for t, have in (("TCP RTT (srtt)", rtt), ("ping RTT", pings)) if have)
    specs.append({"id": "rtt", "title": title, "ylabel": "ms", "traces": rtt + pings})
    cwnd = [trace((f, "cwnd"), f"{f} cwnd") for f in flows if (f, "cwnd") in sm]
    unit = next((result.units.get((f, "cwnd")) for f in flows if (f, "cwnd") in sm), None)
    specs.append({"id": "cwnd", "title": "TCP congestion window", "ylabel": unit or "", "traces": cwnd})
    q = []
    for m in _queue_metrics(sm):
        q.append(trace(("bottleneck", m), "bottleneck queue delay" if m == "qdelay" else f"{m[len('qdelay_'):]} queue delay"))
    if ("bottleneck", "qdelay_max") in sm:
        q.append(trace(("bottleneck", "qdelay_max"), "max queue delay per interval", visible="legendonly"))
    q += [trace((u, "owd"), f"{u} one-way delay", opacity=0.5, width=1) for u in udp if (u, "owd") in sm]
    udp_owd = any((u, "owd") in sm for u in udp)
    specs.append({"id": "qdelay", "title": "Queue delay per queue" + (" and UDP one-way delay" if udp_owd else ""), "ylabel": "ms",
                  "traces": q})
    md = [trace(("bottleneck", m), m.replace("_", " ")) for m in MARKS_DROPS if ("bottleneck", m) in sm]
    specs.append({"id": "marks_drops", "title": "Bottleneck drops and ECN marks", "ylabel": "packets per interval", "traces": md})
    # every other series, so that nothing recorded is missing from the page
    shown = {"rate", "delivery_rate", "goodput", "srtt", "cwnd", "owd", "qdelay", "qdelay_max"}
    other = [
        trace((e, m), f"{e} {m}" + (f" ({result.units.get((e, m))})" if result.units.get((e, m)) else ""), visible="legendonly")
        for (e, m) in sm
        if m not in shown and not m.startswith("qdelay_") and not (e == "bottleneck" and m in MARKS_DROPS)
        and not (e in _probe_names(summary) and m == "rtt")
    ]
    if other:
        specs.append({"id": "other", "title": "Other series (click a legend entry to show it)", "ylabel": "", "traces": other})
    return [s for s in specs if s["traces"]]


def _trace_json(trace: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.json() if isinstance(v, _Numbers) else v for k, v in trace.items()}


#: Counts the page's script errors on <html data-js-errors> (a test reads it from the DOM).
_ERRORS_JS = (
    "window.addEventListener('error',function(e){var d=document.documentElement;"
    "d.setAttribute('data-js-errors',String(+(d.getAttribute('data-js-errors')||0)+1));"
    "d.setAttribute('data-js-error',String(e.message));});"
)

_PLOT_JS = """
(function(){
  var specs = JSON.parse(document.getElementById('aqmlab-data').textContent);
  specs.forEach(function(s){
    var traces = s.traces.map(function(t){
      var line = {width: t.width || 1.5};
      if (t.color) line.color = t.color;
      if (t.dash) line.dash = t.dash;
      if (t.shape) line.shape = t.shape;
      return {type: 'scatter', mode: 'lines', name: t.name, x: t.x, y: t.y, line: line,
              opacity: t.opacity || 1, visible: t.visible || true};
    });
    Plotly.newPlot(s.id, traces, {
      title: {text: s.title, font: {size: 14}}, margin: {l: 60, r: 20, t: 40, b: 80},
      xaxis: {title: {text: 'Time (s)'}, rangemode: 'tozero'},
      yaxis: {title: {text: s.ylabel}, rangemode: 'tozero'},
      legend: {orientation: 'h', y: -0.25}, showlegend: true, hovermode: 'x unified'
    }, {responsive: true, displaylogo: false});
  });
  document.body.setAttribute('data-plots-done', String(specs.length));
})();
"""


def _json_script(obj: Any) -> str:
    # '</' never appears inside the script element
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def _specs_json(specs: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """The JSON text of :func:`_plot_specs`'s specs in pieces, a trace at a time."""
    yield "["
    for i, spec in enumerate(specs):
        yield ("," if i else "") + "{"
        for j, (k, v) in enumerate(spec.items()):
            yield ("," if j else "") + _json_script(k) + ":"
            if k == "traces":
                yield "["
                for n, t in enumerate(v):
                    yield ("," if n else "") + _json_script(_trace_json(t))
                yield "]"
            else:
                yield _json_script(v)
        yield "}"
    yield "]"


def files_html(files: Sequence[str], base: str = "") -> str:
    return '<p class="files">' + " ".join(f'<a href="{esc(base + f)}">{esc(f)}</a>' for f in files) + "</p>"


def run_report_parts(result: RunResult, files: Sequence[str], js_src: str | None = None) -> Iterator[str]:
    """:func:`run_report`'s text in pieces (the plot data a trace at a time), for writing the
    page without holding it whole."""
    from .plot import _title
    from .seriesview import View, describe

    summary = result.summary
    sm = _series(result)
    specs = _plot_specs(result, sm)
    reduced = describe(sm) if isinstance(sm, View) else None
    title = _title(summary)
    divs = "\n".join(f'<div id="{s["id"]}" class="plot"></div>' for s in specs)
    note = f'\n<p class="note">{esc(reduced)}</p>' if reduced else ""
    yield f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_CSS}</style>
<script>{_ERRORS_JS}</script>
"""
    if js_src:
        yield f'<script src="{esc(js_src)}"></script>'
    else:
        yield "<script>"
        yield from _plotly_js_parts()
        yield "</script>"
    yield f"""
</head><body>
<h1>{esc(title)}</h1>
<p class="note">seed {esc(summary.get('seed'))}, {esc(_fmt(summary.get('sim_seconds')))} s simulated. Click a legend
entry to hide or show a line, drag to zoom, double-click to reset.</p>
<h2>Files</h2>
{files_html(files)}
<h2>Time series</h2>{note}
{divs}
{summary_html(summary)}
<script type="application/json" id="aqmlab-data">"""
    yield from _specs_json(specs)
    yield f"""</script>
<script>{_PLOT_JS}</script>
</body></html>
"""


def run_report(result: RunResult, files: Sequence[str], js_src: str | None = None) -> str:
    """A run's report.html: plotly inlined (``js_src`` None) or loaded from ``js_src`` (a
    relative path to plotly.min.js, e.g. ``../../../plotly.min.js`` in a suite)."""
    return "".join(run_report_parts(result, files, js_src))


# --------------------------------------------------------------------------------------
# Markdown (REPORT.md's subset) to HTML
# --------------------------------------------------------------------------------------

_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
_CODE = re.compile(r"`([^`]*)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _bold(text: str) -> str:
    return _BOLD.sub(r"<b>\1</b>", esc(text))


def _inline(text: str) -> str:
    """Inline Markdown of REPORT.md: `code`, [text](url), **bold**; everything else escaped."""
    out = []
    pos = 0
    for m in re.finditer(r"`[^`]*`|\[[^\]]*\]\([^)\s]*\)", text):
        out.append(_bold(text[pos:m.start()]))
        tok = m.group(0)
        if tok.startswith("`"):
            out.append(f"<code>{esc(tok[1:-1])}</code>")
        else:
            lm = _LINK.fullmatch(tok)
            out.append(f'<a href="{esc(lm.group(2))}">{_bold(lm.group(1))}</a>')
        pos = m.end()
    out.append(_bold(text[pos:]))
    return "".join(out)


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|") if line.strip().endswith("|") else line.strip().lstrip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


def markdown_html(md: str) -> str:
    """REPORT.md's Markdown (headings, paragraphs, lists, GFM tables) as HTML."""
    lines = md.splitlines()
    out: list[str] = []
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append("<p>" + _inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if not s:
            flush()
            i += 1
        elif s.startswith("#"):
            flush()
            level = min(len(s) - len(s.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(s[level:].strip())}</h{level}>")
            i += 1
        elif s.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?", lines[i + 1].strip()):
            flush()
            head = _split_row(s)
            aligns = ["num" if c.strip().endswith(":") else "" for c in _split_row(lines[i + 1])]
            i += 2
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            th = "".join(f"<th>{_inline(h)}</th>" for h in head)
            body = "".join(
                "<tr>" + "".join(
                    f'<td class="{aligns[j] if j < len(aligns) else ""}">{_inline(c)}</td>' for j, c in enumerate(r)
                ) + "</tr>"
                for r in rows
            )
            out.append(f"<table><tr>{th}</tr>{body}</table>")
        elif s.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            para.append(s)
            i += 1
    flush()
    return "\n".join(out)


def suite_index(title: str, report_md: str, runs: Sequence[tuple[str, Sequence[str]]], top_files: Sequence[str]) -> str:
    """A suite's index.html: REPORT.md as HTML, then links to the suite's files and to every
    run's files (``runs``: ``(rel_dir, [file names])``)."""
    run_rows = "".join(
        f"<tr><td><code>{esc(rel)}</code></td><td>{files_html(files, rel + '/')}</td></tr>" for rel, files in runs
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{_CSS}</style></head><body>
{markdown_html(report_md)}
<h2>Files</h2>
{files_html(top_files)}
<h2>Runs</h2>
<table><tr><th>run</th><th>files</th></tr>{run_rows}</table>
</body></html>
"""
