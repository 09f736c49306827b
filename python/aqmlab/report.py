"""Suite results: per-run metrics, ``results.csv`` and ``REPORT.md`` with the studies' tables.

Report tables are built by *table builders*: one function per table kind, registered in
:data:`TABLES` and chosen by ``kind`` in a suite file's ``[[tables]]`` entry. A builder gets
the table's options (the TOML table), the suite and the run records grouped by cell, and
returns a :class:`Table`. Adding a table kind is adding one function with ``@table("name")``.

Metrics of a run (:func:`run_metrics`) are flat names (``dss1``, ``jain``, ``ratio``,
``sojourn_p99``, ...); a table column may also name any value of summary.json by its key
path (``bottleneck.queues[1].sojourn_ms.p99``). Over several seeds a cell's value is
aggregated by a statistic (:data:`STATS`): ``mean_std`` (default), ``median_iqr``,
``min_max``, ``mean``, ``median``.
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .analysis import FCT_STATISTICS, fct_harm, fct_stats
from .output import PARQUET, PLOT, RESULTS, SCENARIO, SUMMARY, atomic_path, atomic_write_text, read_summary, run_rel_dir
from .suite import Cell, RunSpec, Suite, SuiteError, get_key

# --------------------------------------------------------------------------------------
# Records and metrics
# --------------------------------------------------------------------------------------


@dataclass
class Record:
    """A run of a suite with its summary (None when it has not finished or failed)."""

    run: RunSpec
    summary: dict[str, Any] | None
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def cell(self) -> Cell:
        return self.run.cell

    def value(self, name: str) -> Any:
        """A metric by flat name, else a summary.json value by key path; None if absent."""
        if name in self.metrics:
            return self.metrics[name]
        if self.summary is None:
            return None
        try:
            return get_key(self.summary, name)
        except SuiteError:
            return None


_PCTS = ("p50", "p95", "p99", "p999", "max", "mean")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def run_metrics(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The flat per-run metrics of results.csv (flows numbered from 1, as in the studies' tables)."""
    m: dict[str, Any] = {}
    flows = summary.get("flows", []) or []
    for i, f in enumerate(flows, 1):
        m[f"name{i}"] = f.get("name")
        m[f"cc{i}"] = f.get("cc")
        m[f"rtt{i}_ms"] = f.get("rtt_ms")
        m[f"start{i}_s"] = f.get("start_s")
        m[f"dss{i}"] = f.get("steady_mbps")
        m[f"dss{i}_from_s"] = f.get("steady_from_s")
        m[f"dss{i}_to_s"] = f.get("steady_to_s")
        m[f"goodput{i}"] = f.get("goodput_mbps")
        m[f"retrans{i}"] = f.get("retransmits")
        m[f"ce{i}"] = f.get("ce_received")
        if f.get("fct_s") is not None:
            m[f"fct{i}_s"] = f.get("fct_s")
    m["jain"] = summary.get("jain_steady")
    for way, j in (summary.get("jain_steady_by_direction") or {}).items():
        m[f"jain_{way}"] = j
    d1, d2 = (_num(flows[0].get("steady_mbps")), _num(flows[1].get("steady_mbps"))) if len(flows) >= 2 else (None, None)
    m["ratio"] = d1 / d2 if d1 is not None and d2 else None
    m["share1"] = d1 / (d1 + d2) if d1 is not None and d2 is not None and d1 + d2 > 0 else None
    bn = summary.get("bottleneck", {}) or {}
    m["util"] = bn.get("utilization")
    m["drops"] = bn.get("drops")
    m["ce_marks"] = bn.get("ce_marks")
    soj = bn.get("sojourn_ms", {}) or {}
    for p in _PCTS:
        if p in soj:
            m[f"sojourn_{p}"] = soj[p]
    for q in bn.get("queues", []) or []:
        qs = q.get("sojourn_ms", {}) or {}
        for p in ("p50", "p99", "max"):
            if p in qs:
                m[f"sojourn_{q.get('name')}_{p}"] = qs[p]
    for sp in bn.get("spikes", []) or []:
        thr = sp.get("threshold_ms")
        for k in ("longest_s", "total_s", "peak_ms"):
            if k in sp:
                m[f"spike{thr:g}ms_{k}"] = sp[k]
    rl = summary.get("return_link") or {}
    if "utilization" in rl:
        m["return_util"] = rl["utilization"]
    for i, p in enumerate(summary.get("probes", []) or [], 1):
        for part in ("rtt", "induced"):
            r = p.get(f"{part}_ms") or {}
            for k in ("p50", "p95", "p99", "max"):
                if k in r:
                    m[f"probe{i}_{part}_{k}"] = r[k]
    # Per-group sums over flows that share a name stem (`count = 4` flows "up.1" .. "up.4").
    sums: dict[str, float] = {}
    for f in flows:
        g = _num(f.get("goodput_mbps"))
        stem = _flow_stem(str(f.get("name") or ""))
        if g is not None and stem:
            sums[stem] = sums.get(stem, 0.0) + g
    for stem, v in sums.items():
        m[f"goodput_{stem}_sum"] = v
    resp = []
    for i, t in enumerate(summary.get("transients", []) or [], 1):
        m[f"response{i}_s"] = t.get("response_s")
        resp.append(_num(t.get("response_s")))
    if len(resp) >= 2 and all(x is not None for x in resp):
        m["response_jain"] = sum(resp) ** 2 / (len(resp) * sum(x * x for x in resp))
    for i, md in enumerate(summary.get("media", []) or [], 1):
        m[f"media{i}_mbps"] = md.get("mean_bitrate_mbps")
    for i, u in enumerate(summary.get("tunnels", []) or [], 1):
        for k in ("replay_drops", "ecn_drops", "max_reorder"):
            m[f"tunnel{i}_{k}"] = u.get(k)
    return m


def _flow_stem(name: str) -> str:
    """A flow's group name: its name without a trailing instance number (``up.3``, ``up#3``, ``up-3``)."""
    return re.sub(r"[.#\-_/\[]?\d+\]?$", "", name)


def load_record(run: RunSpec) -> Record:
    """A run's record: its summary.json as on disk now (None when absent) and its metrics."""
    s = read_summary(run.run_dir)
    return Record(run, s, run_metrics(s) if s is not None else {})


def record_of_summary(run: RunSpec, summary: dict[str, Any]) -> Record:
    """A finished run's record from the summary its worker wrote (``execute_run``'s answer):
    the same record :func:`load_record` reads from summary.json, without reading it."""
    if not isinstance(summary, dict):
        raise TypeError("a run's summary is a dict")
    return Record(run, summary, run_metrics(summary))


def load_records(runs: Sequence[RunSpec]) -> list[Record]:
    return [load_record(r) for r in runs]


def group_by_cell(records: Sequence[Record]) -> list[list[Record]]:
    """Records grouped per cell, in plan order (cells in matrix order, seeds ascending)."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.cell.id, []).append(r)
    return list(groups.values())


def with_baseline(records: Sequence[Record], axis: str, baseline: str) -> list[tuple[list[Record], list[Record] | None]]:
    """Each cell whose ``axis`` is not ``baseline``, paired with the cell that has the same
    labels on every other axis and ``baseline`` on ``axis`` (None when that cell is absent).

    For tables built from runs that belong together, e.g. FCT harm: a ``competitor`` axis
    with values ``none`` (the solo run), ``cubic`` and ``prague``, and
    ``with_baseline(records, "competitor", "none")``.
    """
    groups = group_by_cell(records)
    index = {}
    for g in groups:
        p = g[0].cell.params
        if p.get(axis) == baseline:
            index[tuple(sorted((k, v) for k, v in p.items() if k != axis))] = g
    out = []
    for g in groups:
        p = g[0].cell.params
        if p.get(axis) != baseline:
            out.append((g, index.get(tuple(sorted((k, v) for k, v in p.items() if k != axis)))))
    return out


def select(records: Sequence[Record], where: Mapping[str, Any] | None) -> list[Record]:
    """Records whose cell has the given axis labels (a label or a list of labels per axis)."""
    if not where:
        return list(records)
    want = {k: [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in where.items()}
    return [r for r in records if all(r.cell.params.get(k) in v for k, v in want.items())]


# --------------------------------------------------------------------------------------
# results.csv
# --------------------------------------------------------------------------------------


def _csv_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_results_csv(records: Sequence[Record], suite: Suite, path: Path) -> None:
    """One row per run: suite, cell, seed, every axis, the metrics, the run directory."""
    metric_cols: list[str] = []
    for r in records:
        for k in r.metrics:
            if k not in metric_cols:
                metric_cols.append(k)
    header = ["suite", "cell", "seed", "replicate", *suite.axis_names, *metric_cols, "run_dir", "status"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in records:
        row = [suite.name, r.cell.id, r.run.seed, r.run.replicate]
        row += [r.cell.params[a] for a in suite.axis_names]
        row += [_csv_value(r.metrics.get(k)) for k in metric_cols]
        row += [r.run.rel_dir, "ok" if r.summary is not None else "missing"]
        w.writerow(row)
    atomic_write_text(path, buf.getvalue())


# --------------------------------------------------------------------------------------
# Statistics over seeds and formatting
# --------------------------------------------------------------------------------------


def _clean(values: Sequence[Any]) -> list[float]:
    return [x for x in (_num(v) for v in values) if x is not None]


def _fmt(x: float, spec: str) -> str:
    return format(x, spec)


def stat_mean_std(values: Sequence[float], spec: str) -> str:
    """``mean ± sample standard deviation`` (just the value for one seed)."""
    if len(values) == 1:
        return _fmt(values[0], spec)
    return f"{_fmt(statistics.fmean(values), spec)} ± {_fmt(statistics.stdev(values), spec)}"


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def stat_median_iqr(values: Sequence[float], spec: str) -> str:
    """``median [lower quartile–upper quartile]``."""
    if len(values) == 1:
        return _fmt(values[0], spec)
    q1, q2, q3 = _quartiles(values)
    return f"{_fmt(q2, spec)} [{_fmt(q1, spec)}–{_fmt(q3, spec)}]"


def stat_min_max(values: Sequence[float], spec: str) -> str:
    """``mean (min–max)``."""
    if len(values) == 1:
        return _fmt(values[0], spec)
    return f"{_fmt(statistics.fmean(values), spec)} ({_fmt(min(values), spec)}–{_fmt(max(values), spec)})"


STATS: dict[str, Callable[[Sequence[float], str], str]] = {
    "mean_std": stat_mean_std,
    "median_iqr": stat_median_iqr,
    "min_max": stat_min_max,
    "mean": lambda v, s: _fmt(statistics.fmean(v), s),
    "median": lambda v, s: _fmt(statistics.median(v), s),
}

STAT_NOTES = {
    "mean_std": "mean ± sample standard deviation over the seeds",
    "median_iqr": "median [lower quartile–upper quartile] over the seeds",
    "min_max": "mean (minimum–maximum) over the seeds",
    "mean": "mean over the seeds",
    "median": "median over the seeds",
}


def aggregate(records: Sequence[Record], metric: str, *, stat: str = "mean_std", spec: str = ".2f", scale: float = 1.0) -> str:
    """One cell's value of ``metric`` over its seeds, formatted; ``-`` if no run has it."""
    vals = [v * scale for v in _clean([r.value(metric) for r in records])]
    if not vals:
        return "-"
    try:
        return STATS[stat](vals, spec)
    except KeyError:
        raise SuiteError(f"unknown stat '{stat}' (known: {', '.join(STATS)})") from None


def format_ratio(values: Sequence[float]) -> str:
    """The S6 ratio ``N:1`` (rounded; ``1:N`` when below one), with ``± sd`` over seeds."""
    vals = _clean(values)
    if not vals:
        return "-"
    m = statistics.fmean(vals)
    if m >= 1:
        text = f"{m:.0f}:1"
        sd = statistics.stdev(vals) if len(vals) > 1 else None
    else:
        inv = [1 / v for v in vals if v > 0]
        text = f"1:{statistics.fmean(inv):.0f}" if inv else "0:1"
        sd = statistics.stdev(inv) if len(inv) > 1 else None
    return f"{text} ± {sd:.0f}" if sd is not None else text


def plot_links(group: Sequence[Record]) -> str:
    """``[plot](runs/.../throughput_rtt.png)``; one numbered link per seed with several seeds."""
    have = [r for r in group if r.summary is not None and (r.run.run_dir / PLOT).is_file()]
    if not have:
        return "-"
    if len(group) == 1:
        return f"[plot]({have[0].run.rel_dir}/{PLOT})"
    return " ".join(f"[{r.run.seed}]({r.run.rel_dir}/{PLOT})" for r in have)


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> str:
    """A Markdown (GFM) table; ``align`` is ``"l"`` or ``"r"`` per column (default left).
    A ``|`` inside a row's cell is escaped; headers are written as given."""
    align = list(align) if align is not None else ["l"] * len(headers)
    out = ["| " + " | ".join(headers) + " |"]
    out.append("| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |")
    for row in rows:
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(out)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    align: list[str] | None = None  # "l" or "r" per column

    def markdown(self, drop: Sequence[str] = ()) -> str:
        keep = [i for i, h in enumerate(self.headers) if h not in drop]
        align = self.align or ["l"] * len(self.headers)
        return markdown_table(
            [self.headers[i] for i in keep], [[row[i] for i in keep] for row in self.rows], [align[i] for i in keep]
        )


TableBuilder = Callable[[Mapping[str, Any], Suite, list[Record]], Table]
TABLES: dict[str, TableBuilder] = {}


def table(kind: str) -> Callable[[TableBuilder], TableBuilder]:
    """Registers a table builder under ``kind`` (the suite file's ``[[tables]] kind``)."""

    def deco(fn: TableBuilder) -> TableBuilder:
        TABLES[kind] = fn
        return fn

    return deco


def build_table(spec: Mapping[str, Any], suite: Suite, records: Sequence[Record]) -> Table:
    kind = spec.get("kind")
    if kind not in TABLES:
        raise SuiteError(f"{suite.name}: unknown table kind '{kind}' (known: {', '.join(sorted(TABLES))})")
    return TABLES[kind](spec, suite, select(records, spec.get("where")))


def _rate(cell: Cell, spec: Mapping[str, Any]) -> str:
    if "rate" in spec:
        return str(cell.render(spec["rate"]))
    if "rate" in cell.shown:
        return cell.shown["rate"]
    return str(get_key(cell.scenario, "bottleneck.rate", "-"))


def _qdisc(cell: Cell, spec: Mapping[str, Any]) -> str:
    if "qdisc" in spec:
        return str(cell.render(spec["qdisc"]))
    if "qdisc" in cell.shown:
        return cell.shown["qdisc"]
    return str(get_key(cell.scenario, "bottleneck.qdisc", "-"))


def _cc_rtt(cell: Cell, spec: Mapping[str, Any], i: int) -> str:
    """``cc (rtt)`` of flow i (0-based) from the scenario; ``cc_labels`` templates override the name."""
    labels = spec.get("cc_labels")
    flow = get_key(cell.scenario, f"flows[{i}]", {}) or {}
    name = str(cell.render(labels[i])) if labels and i < len(labels) else str(flow.get("cc", "?"))
    return f"{name}({flow.get('rtt', '?')})"


def _window_note(records: Sequence[Record]) -> str:
    """The steady-state windows the D_SS columns actually averaged over, and the run length."""
    spans = sorted(
        {
            (r.value(f"dss{i}_from_s"), r.value(f"dss{i}_to_s"), r.value("sim_seconds"))
            for r in records
            for i in (1, 2)
            if isinstance(r.value(f"dss{i}_from_s"), (int, float))
        }
    )
    if not spans:
        return "no steady window (no flow had a delivery-rate sample)"
    if len(spans) == 1:
        a, b, d = spans[0]
        return f"D_SS window {a:g}-{b:g} s of {d:g} s runs"
    return (
        f"D_SS windows from {min(x[0] for x in spans):g}-{min(x[1] for x in spans):g} s to "
        f"{max(x[0] for x in spans):g}-{max(x[1] for x in spans):g} s (runs of "
        f"{min(x[2] for x in spans):g}-{max(x[2] for x in spans):g} s)"
    )


def _stat_note(spec: Mapping[str, Any], groups: Sequence[Sequence[Record]], default: str = "mean_std") -> list[str]:
    if any(len(g) > 1 for g in groups):
        n = max(len(g) for g in groups)
        return [f"Over {n} seeds per row: {STAT_NOTES.get(spec.get('stat', default), spec.get('stat', default))}."]
    return []


@table("fairness")
def table_fairness(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """The l4s-tests Scenario 1 table: Rate, qdisc, CC1 (RTT), DSS1, CC2 (RTT), DSS2, Jain's.

    Options: ``title``, ``cc_labels`` (templates for the two flows' names), ``rate``,
    ``qdisc`` (templates replacing the axis values), ``stat``.
    """
    stat = spec.get("stat", "mean_std")
    groups = group_by_cell(records)
    rows = []
    for g in groups:
        c = g[0].cell
        rows.append(
            [
                _rate(c, spec),
                _qdisc(c, spec),
                _cc_rtt(c, spec, 0),
                aggregate(g, "dss1", stat=stat, spec=".2f"),
                _cc_rtt(c, spec, 1),
                aggregate(g, "dss2", stat=stat, spec=".2f"),
                aggregate(g, "jain", stat=stat, spec=".3f"),
                plot_links(g),
            ]
        )
    notes = [
        "D_SS: steady-state delivery rate in Mbit/s (mean of the non-zero delivery-rate samples over "
        f"the steady window: {_window_note(records)}); Jain's index of the two D_SS."
    ] + _stat_note(spec, groups)
    return Table(
        spec.get("title", "Fairness"),
        ["Rate", "qdisc", "CC1 (RTT)", "DSS1", "CC2 (RTT)", "DSS2", "Jain's", "Plot"],
        rows,
        notes,
        ["l", "l", "l", "r", "l", "r", "r", "l"],
    )


@table("ratio")
def table_ratio(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """The l4s-tests Scenario 6 table: Rate, qdisc, CC1 (RTT), DSS1, CC2 (RTT), DSS2, DSS1:DSS2 as "N:1".

    Options as :func:`table_fairness`, plus ``columns``: extra axes shown after qdisc.
    """
    stat = spec.get("stat", "mean_std")
    extra = list(spec.get("columns", []))
    groups = group_by_cell(records)
    rows = []
    for g in groups:
        c = g[0].cell
        rows.append(
            [_rate(c, spec), _qdisc(c, spec)]
            + [c.shown.get(a, "-") for a in extra]
            + [
                _cc_rtt(c, spec, 0),
                aggregate(g, "dss1", stat=stat, spec=".2f"),
                _cc_rtt(c, spec, 1),
                aggregate(g, "dss2", stat=stat, spec=".2f"),
                format_ratio([r.value("ratio") for r in g]),
                plot_links(g),
            ]
        )
    notes = [
        f"D_SS: steady-state delivery rate in Mbit/s over the steady window ({_window_note(records)}); "
        "Ratio: DSS1:DSS2 rounded to an integer."
    ] + _stat_note(spec, groups)
    titles = [suite.axis(a).title or a for a in extra]
    return Table(
        spec.get("title", "Throughput ratio"),
        ["Rate", "qdisc", *titles, "CC1 (RTT)", "DSS1", "CC2 (RTT)", "DSS2", "Ratio", "Plot"],
        rows,
        notes,
        ["l", "l", *["l"] * len(extra), "l", "r", "l", "r", "r", "l"],
    )


def _metric_columns(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    cols = []
    for c in spec.get("metrics", []):
        if isinstance(c, str):
            cols.append({"metric": c, "title": c})
        else:
            cols.append({"title": c.get("title", c["metric"]), **c})
    return cols


@table("metrics")
def table_metrics(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """One row per cell: every axis (or ``axes = [...]``) and the listed ``metrics``.

    ``metrics`` entries are a name (``"dss1"``, ``"bottleneck.sojourn_ms.p99"``) or a table
    ``{ metric, title, format = ".2f", stat, scale }``.
    """
    axes = list(spec.get("axes", suite.axis_names))
    cols = _metric_columns(spec) or [{"metric": "goodput1", "title": "goodput1"}, {"metric": "util", "title": "util"}]
    dstat = spec.get("stat", "mean_std")
    groups = group_by_cell(records)
    rows = []
    for g in groups:
        c = g[0].cell
        row = [c.shown.get(a, "-") for a in axes]
        for col in cols:
            row.append(
                aggregate(g, col["metric"], stat=col.get("stat", dstat), spec=col.get("format", ".2f"), scale=col.get("scale", 1.0))
            )
        row.append(plot_links(g))
        rows.append(row)
    headers = [suite.axis(a).title or a for a in axes] + [c["title"] for c in cols] + ["Plot"]
    align = ["l"] * len(axes) + ["r"] * len(cols) + ["l"]
    return Table(spec.get("title", "Results"), headers, rows, _stat_note(spec, groups), align)


@table("pivot")
def table_pivot(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """A metric with one axis down and one across (e.g. an AQM per row, the load per column).

    Options: ``rows``, ``columns`` (axis names), ``metric``, ``stat`` (default
    ``median_iqr``), ``format``, ``scale``. Cells that differ in other axes are pooled.
    """
    ra, ca, metric = spec.get("rows"), spec.get("columns"), spec.get("metric")
    if ra not in suite.axis_names or ca not in suite.axis_names or not metric:
        raise SuiteError(f"{suite.name}: a pivot table needs rows and columns (axis names) and a metric")
    stat = spec.get("stat", "median_iqr")
    # The records of each (row, column) entry, in record order, gathered in one pass (a scan
    # of every record per entry took 6 s of J-K's 5,600-run report).
    entries: dict[tuple[str, str], list[Record]] = {}
    shown: dict[tuple[str, str], str] = {}
    for r in records:
        c = r.run.cell
        entries.setdefault((c.params[ra], c.params[ca]), []).append(r)
        for a in (ra, ca):
            shown[(a, c.params[a])] = c.shown[a]
    rlabels = [v for v in suite.axis(ra).labels() if (ra, v) in shown]
    clabels = [v for v in suite.axis(ca).labels() if (ca, v) in shown]
    rows = []
    for rv in rlabels:
        row = [shown[(ra, rv)]]
        for cv in clabels:
            sel = entries.get((rv, cv), [])
            row.append(aggregate(sel, metric, stat=stat, spec=spec.get("format", ".3f"), scale=spec.get("scale", 1.0)))
        rows.append(row)
    headers = [suite.axis(ra).title or ra] + [shown[(ca, v)] for v in clabels]
    n = max((len(entries.get((rv, cv), [])) for rv in rlabels for cv in clabels), default=0)
    notes = [f"{spec.get('metric_title', metric)}; {STAT_NOTES.get(stat, stat).replace('seeds', 'runs')} ({n} per entry)."]
    return Table(spec.get("title", metric), headers, rows, notes, ["l"] + ["r"] * len(clabels))


def _other_axes(suite: Suite, records: Sequence[Record], skip: Sequence[str]) -> list[str]:
    """The axes (other than ``skip``) that take more than one value among the records."""
    return [a for a in suite.axis_names if a not in skip and len({r.cell.params[a] for r in records}) > 1]


@table("fct_harm")
def table_fct_harm(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """FCT harm (algorithms.md 5.3): a derived row per loaded cell, from that cell's runs and
    the runs of its solo cell (same labels on every other axis, ``baseline`` on ``axis``).

    The FCTs of a cell's seeds are pooled before the statistics (geometric mean, median, P95,
    :func:`aqmlab.analysis.fct_stats`); harm per statistic is :func:`aqmlab.analysis.fct_harm`.
    Options: ``axis`` (default ``competitor``), ``baseline`` (``none``), ``workload`` (index, 0).
    """
    axis, base, w = spec.get("axis", "competitor"), str(spec.get("baseline", "none")), int(spec.get("workload", 0))

    def pooled(group: Sequence[Record]) -> tuple[dict[str, float] | None, int, int]:
        fcts, started, done = [], 0, 0
        for r in group:
            wl = (r.summary or {}).get("workloads") or []
            if len(wl) > w:
                fcts += [x for x in wl[w].get("fct_s", []) if _num(x) is not None and x > 0]
                started += int(wl[w].get("started", 0) or 0)
                done += int(wl[w].get("completed", 0) or 0)
        return (fct_stats(fcts) if fcts else None), done, started

    others = [a for a in suite.axis_names if a != axis]
    rows = []
    for loaded, solo in with_baseline(records, axis, base):
        c = loaded[0].cell
        ls, ldone, lstarted = pooled(loaded)
        ss, _, _ = pooled(solo) if solo else (None, 0, 0)
        row = [c.shown.get(a, "-") for a in others] + [c.shown.get(axis, "-")]
        for k in FCT_STATISTICS:
            row.append(f"{ss[k]:.3f}" if ss else "-")
            row.append(f"{ls[k]:.3f}" if ls else "-")
        for k in FCT_STATISTICS:
            row.append(f"{fct_harm(ss[k], ls[k]):.3f}" if ss and ls else "-")
        row.append(f"{ldone}/{lstarted}")
        row.append(plot_links(loaded))
        rows.append(row)
    headers = [suite.axis(a).title or a for a in others] + [suite.axis(axis).title or axis]
    for k in FCT_STATISTICS:
        headers += [f"solo {k} (s)", f"loaded {k} (s)"]
    headers += [f"harm {k}" for k in FCT_STATISTICS] + ["completed", "Plot"]
    notes = [
        f"Each row pairs a cell with its solo run ({axis} = {base}); FCTs of the completed transfers "
        "(pooled over the seeds), harm = (loaded - solo)/loaded when loaded >= solo, else 0 "
        "(heistp/ccafct harm.LessIsBetter)."
    ]
    align = ["l"] * (len(others) + 1) + ["r"] * (2 * len(FCT_STATISTICS) + len(FCT_STATISTICS) + 1) + ["l"]
    return Table(spec.get("title", "FCT harm"), headers, rows, notes, align)


def run_series(record: Record, entity: str, metric: str) -> tuple[list[float], list[float]] | None:
    """One series of a finished run (times in s, values) from its timeseries.parquet; None if absent."""
    import pandas as pd

    path = record.run.run_dir / PARQUET
    if record.summary is None or not path.is_file():
        return None
    ts = pd.read_parquet(path, columns=["time", "flow", "metric", "value"])
    sel = ts[(ts["flow"] == entity) & (ts["metric"] == metric)].dropna(subset=["value"])
    if sel.empty:
        return None
    return sel["time"].astype(float).tolist(), sel["value"].astype(float).tolist()


def longest_above(t: Sequence[float], v: Sequence[float], threshold: float, after: float = 0.0) -> float:
    """The longest contiguous time (s) a sampled series stays above ``threshold`` after ``after``
    (a run of samples above it counts from its first sample to the first sample below)."""
    best, begin = 0.0, None
    for ti, vi in zip(t, v):
        if ti < after:
            continue
        if vi > threshold:
            begin = ti if begin is None else begin
        elif begin is not None:
            best, begin = max(best, ti - begin), None
    if begin is not None and t:
        best = max(best, t[-1] - begin)
    return best


@table("series")
def table_series(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """Per cell, statistics of one time series of each run (timeseries.parquet).

    Options: ``entity`` (a flow, probe or media name, ``bottleneck``; a template), ``metric``
    (the series, e.g. ``bitrate``, ``rtt``), ``axes`` (shown), ``columns``: a list of
    ``{ title, mean = [from_s, to_s] }`` (time average over a window) or
    ``{ title, above = THRESHOLD, after = s }`` (longest time above), with ``format``,
    ``offset`` (subtracted from the values first; a template) and ``stat``.
    """
    axes = list(spec.get("axes", suite.axis_names))
    dstat = spec.get("stat", "mean_std")
    groups = group_by_cell(records)
    rows = []
    for g in groups:
        c = g[0].cell
        row = [c.shown.get(a, "-") for a in axes]
        series = [run_series(r, str(c.render(spec["entity"])), str(c.render(spec["metric"]))) for r in g]
        for col in spec.get("columns", []):
            off = float(c.render(col.get("offset", spec.get("offset", 0))))
            vals = []
            for s in series:
                if s is None:
                    continue
                t, v = s[0], [x - off for x in s[1]]
                if "mean" in col:
                    a, b = col["mean"]
                    w = [x for ti, x in zip(t, v) if a <= ti < b]
                    if w:
                        vals.append(statistics.fmean(w))
                else:
                    vals.append(longest_above(t, v, float(col["above"]), float(col.get("after", 0))))
            spec_fmt = col.get("format", ".2f")
            row.append(STATS[col.get("stat", dstat)](vals, spec_fmt) if vals else "-")
        row.append(plot_links(g))
        rows.append(row)
    cols = spec.get("columns", [])
    headers = [suite.axis(a).title or a for a in axes] + [str(c["title"]) for c in cols] + ["Plot"]
    notes = list(spec.get("notes", [])) + _stat_note(spec, groups)
    return Table(spec.get("title", "Series"), headers, rows, notes, ["l"] * len(axes) + ["r"] * len(cols) + ["l"])


def _suite_dir(record: Record) -> Path:
    """The suite's output directory (the run directory less its relative path)."""
    return Path(str(record.run.run_dir)[: -len(record.run.rel_dir)] or ".")


@table("cdf")
def table_cdf(spec: Mapping[str, Any], suite: Suite, records: list[Record]) -> Table:
    """A CDF plot (``file``, PNG in the suite directory) of a summary CDF (``metric``, a list of
    ``[x, fraction]`` points such as ``bottleneck.sojourn_ms.cdf``), one curve per value of
    axis ``by``; the runs of a value are pooled with equal weight (the mean of their CDFs on a
    common grid). The table lists each curve's pooled median, p95, p99 and maximum."""
    import numpy as np

    by, metric = spec["by"], spec.get("metric", "bottleneck.sojourn_ms.cdf")
    curves = []
    for label in suite.axis(by).labels():
        runs = [r for r in records if r.cell.params[by] == label]
        cdfs = [c for c in (r.value(metric) for r in runs) if c]
        if not cdfs:
            continue
        xmax = max(c[-1][0] for c in cdfs)
        grid = np.unique(np.concatenate([[0.0], *[np.asarray(c)[:, 0] for c in cdfs], [xmax]]))
        ys = [np.interp(grid, np.asarray(c)[:, 0], np.asarray(c)[:, 1], left=0.0, right=1.0) for c in cdfs]
        curves.append((runs[0].cell.shown[by], grid, np.mean(ys, axis=0), len(cdfs)))
    rows = []
    for name, x, y, n in curves:
        q = lambda p: float(x[min(np.searchsorted(y, p), len(x) - 1)])  # noqa: E731
        rows.append([name, f"{q(0.5):.1f}", f"{q(0.95):.1f}", f"{q(0.99):.1f}", f"{x[-1]:.1f}", str(n)])
    notes = []
    if curves and records:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, x, y, _ in curves:
            ax.step(x, y, where="post", label=name)
        ax.set_xlabel(spec.get("xlabel", metric))
        ax.set_ylabel("fraction at or below")
        ax.grid(alpha=0.3)
        ax.legend()
        ax.set_title(spec.get("title", "CDF"))
        fig.tight_layout()
        path = _suite_dir(records[0]) / spec.get("file", "cdf.png")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)
        notes.append(f"![{spec.get('title', 'CDF')}]({path.name})")
    notes.append(f"Curves pool the runs of each {by} with equal weight; values in the unit of `{metric}`.")
    headers = [suite.axis(by).title or by, "median", "p95", "p99", "max", "runs"]
    return Table(spec.get("title", "CDF"), headers, rows, notes, ["l", "r", "r", "r", "r", "r"])


# --------------------------------------------------------------------------------------
# REPORT.md
# --------------------------------------------------------------------------------------


def report_markdown(outcome: Any, command: str | None = None, *, plot_links_column: bool = True) -> str:
    suite: Suite = outcome.suite
    records: list[Record] = outcome.records
    runs: list[RunSpec] = outcome.runs
    cells = len({r.cell.id for r in runs})
    seeds = sorted({r.replicate for r in runs})
    lines = [f"# {suite.title} (`{suite.name}`)", ""]
    if suite.description:
        lines += [suite.description, ""]
    if suite.source:
        lines += [f"Source: {suite.source}", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    # name the plot (and the HTML report) only when the runs have them (big suites skip plots)
    extra = [f for f in (PLOT, "report.html") if any((r.run_dir / f).is_file() for r in runs)]
    lines += [
        f"{len(runs)} runs: {cells} cells x {len(seeds)} seed{'s' if len(seeds) != 1 else ''}. "
        f"Per-run files are in `{run_rel_dir('<cell>', '<seed>')}/` ({', '.join([SCENARIO, SUMMARY, PARQUET, *extra])}); "
        f"every run's metrics are in `{RESULTS}`; `index.html` is this report as HTML with links to every run's files.",
        "",
    ]
    specs = suite.tables or [{"kind": "metrics"}]
    for spec in specs:
        t = build_table(spec, suite, records)
        lines += [f"## {t.title}", ""]
        for n in t.notes:
            lines += [n, ""]
        lines += [t.markdown(drop=() if plot_links_column else ("Plot",)), ""]
    missing = [r for r in records if r.summary is None]
    failed = dict((r.run_dir, e) for r, e in getattr(outcome, "failed", []))
    if missing:
        lines += ["## Runs without results", ""]
        for r in missing:
            lines.append(f"- `{r.run.rel_dir}`: {failed.get(r.run.run_dir, 'not run')}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_report(outcome: Any, path: Path, command: str | None = None) -> None:
    atomic_write_text(path, report_markdown(outcome, command))
