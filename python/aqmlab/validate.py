"""``aqmlab validate``: the suites that have published numbers, compared with those numbers.

Each comparison is one :class:`Comparison` in :data:`COMPARISONS`: the suite it needs (and
the filters selecting the runs it needs), the reference CSV in ``aqmlab/reference/``, and a
function that turns the reference rows and the suite's run records into Markdown. Adding a
published table is adding one such function with the :func:`comparison` decorator; the
runner, resume, report writing and the CLI stay as they are.

The report states facts (rows compared, rows where the same flow wins, differences); it does
not pass or fail anything, and ``aqmlab validate`` exits 0 whatever the numbers are.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .output import atomic_write_text
from .report import Record, group_by_cell, markdown_table
from .runner import run_suite
from .suite import Suite, SuiteError, get_key, load_suite, override_text, suite_command

VALIDATION_FILE = "VALIDATION.md"

Compare = Callable[[list[dict[str, str]], list[Record], Suite], list[str]]


@dataclass
class Comparison:
    key: str
    title: str
    suite: str
    reference: str
    compare: Compare
    filters: dict[str, list[str]] = field(default_factory=dict)
    origin: str = ""


COMPARISONS: list[Comparison] = []


def comparison(key: str, *, title: str, suite: str, reference: str, filters: Mapping[str, Sequence[str]] | None = None, origin: str = "") -> Callable[[Compare], Compare]:
    """Registers a comparison of ``suite``'s runs with ``reference`` (a CSV in aqmlab/reference)."""

    def deco(fn: Compare) -> Compare:
        COMPARISONS.append(Comparison(key, title, suite, reference, fn, {k: list(v) for k, v in (filters or {}).items()}, origin))
        return fn

    return deco


def reference_rows(name: str) -> list[dict[str, str]]:
    """The rows of a shipped reference CSV (``aqmlab/reference/<name>``)."""
    text = (resources.files("aqmlab") / "reference" / name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


# --------------------------------------------------------------------------------------
# Helpers shared by the comparisons
# --------------------------------------------------------------------------------------


def _mean(records: Sequence[Record], metric: str) -> float | None:
    vals = [v for v in (r.value(metric) for r in records) if isinstance(v, (int, float))]
    return statistics.fmean(vals) if vals else None


def _ms(rtt: Any) -> str:
    """``"20ms"`` -> ``"20"`` (the reference CSVs give RTTs in ms)."""
    s = str(rtt)
    return s[:-2] if s.endswith("ms") else s


def _f(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _winner(a: float, b: float) -> int:
    return (a > b) - (a < b)


def _stats_line(label: str, diffs: Sequence[float], spec: str) -> str:
    if not diffs:
        return f"- {label}: no rows"
    return f"- {label}: median {format(statistics.median(diffs), spec)}, worst {format(max(diffs), spec)}"


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """:func:`aqmlab.report.markdown_table` as lines, the columns ``right`` right-aligned."""
    return markdown_table(headers, rows, ["r" if i in right else "l" for i in range(len(headers))]).split("\n")


@dataclass
class Pair:
    """A published two-flow row and its simulated counterpart (means over seeds)."""

    ref: dict[str, str]
    label: list[str]
    sim1: float
    sim2: float
    sim_extra: float | None = None

    @property
    def pub1(self) -> float:
        return float(self.ref["dss1_mbps"])

    @property
    def pub2(self) -> float:
        return float(self.ref["dss2_mbps"])

    @property
    def same_winner(self) -> bool:
        return _winner(self.pub1, self.pub2) == _winner(self.sim1, self.sim2)

    @property
    def share_diff(self) -> float:
        """|flow 1's share of the two D_SS, published - simulated|, in percentage points."""
        return abs(self.pub1 / (self.pub1 + self.pub2) - self.sim1 / (self.sim1 + self.sim2)) * 100

    @property
    def near_tie(self) -> bool:
        """The published split is within 45-55 %: which flow wins is within run-to-run noise."""
        return abs(self.pub1 / (self.pub1 + self.pub2) - 0.5) < 0.05


def _pairs(ref: list[dict[str, str]], records: list[Record], key_of_ref: Callable[[dict[str, str]], tuple], key_of_cell: Callable[[Record], tuple], extra: str | None = None) -> tuple[list[Pair], int]:
    """Matches reference rows with simulated cells by key; returns the pairs and the number of
    reference rows with no finished simulated counterpart."""
    sim: dict[tuple, list[Record]] = {}
    for g in group_by_cell(records):
        done = [r for r in g if r.summary is not None]
        if done:
            sim[key_of_cell(done[0])] = done
    pairs, missing = [], 0
    for row in ref:
        g = sim.get(key_of_ref(row))
        if not g:
            missing += 1
            continue
        d1, d2 = _mean(g, "dss1"), _mean(g, "dss2")
        if d1 is None or d2 is None or d1 + d2 <= 0:
            missing += 1
            continue
        pairs.append(Pair(row, [], d1, d2, _mean(g, extra) if extra else None))
    return pairs, missing


def _summary_lines(pairs: Sequence[Pair], missing: int, n_ref: int) -> list[str]:
    same = sum(p.same_winner for p in pairs)
    ties = [p for p in pairs if p.near_tie]
    same_clear = sum(p.same_winner for p in pairs if not p.near_tie)
    lines = [
        f"- rows compared: {len(pairs)} of {n_ref} published" + (f" ({missing} without a simulated run)" if missing else ""),
        f"- rows where the same flow wins: {same} of {len(pairs)}"
        + (f"; {same_clear} of {len(pairs) - len(ties)} leaving out the {len(ties)} rows whose published split is within 45-55 %" if ties else ""),
        _stats_line("absolute difference in flow 1's share of the throughput (percentage points)", [p.share_diff for p in pairs], ".1f"),
    ]
    return lines


def pivot_lines(
    published: Mapping[tuple[str, str], float],
    simulated: Mapping[tuple[str, str], float],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    row_title: str = "",
    spec: str = ".3f",
) -> list[str]:
    """A published row x column table (e.g. AQM x load) beside the simulated one: the values
    as "published / simulated", the absolute differences, and per column the rank order of
    the rows (smallest first) in both, with whether they agree.

    For tables like Järvinen & Kojo's Table II: ``published[(aqm, load)] = seconds``.
    """
    lines: list[str] = []
    diffs = [abs(published[k] - simulated[k]) for k in published if k in simulated]
    lines.append(f"- values compared: {len(diffs)} of {len(published)} published")
    if diffs:
        lines.append(_stats_line("absolute difference", diffs, spec))
    body = []
    for r in rows:
        cells = [r]
        for c in columns:
            p, s = published.get((r, c)), simulated.get((r, c))
            cells.append(f"{_f(p, spec)} / {_f(s, spec)}")
        body.append(cells)
    lines += ["", "Published / simulated:", ""]
    lines += _md_table([row_title, *columns], body, right=range(1, len(columns) + 1))
    lines += ["", "Rank order per column (smallest first):", ""]
    same = 0
    body = []
    for c in columns:
        have = [r for r in rows if (r, c) in published and (r, c) in simulated]
        po = sorted(have, key=lambda r: (published[(r, c)], r))
        so = sorted(have, key=lambda r: (simulated[(r, c)], r))
        same += po == so
        body.append([c, ", ".join(po), ", ".join(so), "yes" if po == so else "**no**"])
    lines += _md_table(["column", "published", "simulated", "same order"], body)
    lines.insert(2 if diffs else 1, f"- columns with the same rank order: {same} of {len(columns)}")
    return lines


# --------------------------------------------------------------------------------------
# The published tables
# --------------------------------------------------------------------------------------


def _flow_key(rec: Record, qdisc: str) -> tuple:
    sc = rec.cell.scenario
    return (
        qdisc,
        str(get_key(sc, "flows[0].cc")),
        _ms(get_key(sc, "flows[0].rtt")),
        str(get_key(sc, "flows[1].cc")),
        _ms(get_key(sc, "flows[1].rtt")),
    )


@comparison(
    "l4s-tests-s1",
    title="l4s-tests Scenario 1 fairness table, 50 Mbit/s",
    suite="l4s-tests/s1",
    reference="l4s-tests_s1_fairness_50mbit.csv",
    filters={"rate": ["50Mbit"]},
    origin="heistp/l4s-tests README, Scenario 1 fairness table (s1_table.md)",
)
def compare_s1(ref: list[dict[str, str]], records: list[Record], suite: Suite) -> list[str]:
    ref = [r for r in ref if r["rate"] == "50Mbit"]
    pairs, missing = _pairs(
        ref,
        records,
        lambda r: (r["qdisc"], r["cc1"], r["rtt1_ms"], r["cc2"], r["rtt2_ms"]),
        lambda rec: _flow_key(rec, rec.cell.shown.get("qdisc", "")),
        extra="jain",
    )
    jdiff = [abs(float(p.ref["jain"]) - p.sim_extra) for p in pairs if p.sim_extra is not None]
    lines = _summary_lines(pairs, missing, len(ref))
    lines.append(_stats_line("absolute difference in Jain's index", jdiff, ".3f"))
    lines += ["", "Per qdisc:", ""]
    rows = []
    for q in dict.fromkeys(r["qdisc"] for r in ref):
        ps = [p for p in pairs if p.ref["qdisc"] == q]
        if not ps:
            continue
        jd = [abs(float(p.ref["jain"]) - p.sim_extra) for p in ps if p.sim_extra is not None]
        sd = [p.share_diff for p in ps]
        rows.append(
            [
                q,
                str(len(ps)),
                f"{sum(p.same_winner for p in ps)}",
                f"{statistics.median(jd):.3f}" if jd else "-",
                f"{max(jd):.3f}" if jd else "-",
                f"{statistics.median(sd):.1f}",
                f"{max(sd):.1f}",
            ]
        )
    lines += _md_table(
        ["qdisc", "rows", "same winner", "median \\|ΔJain\\|", "worst \\|ΔJain\\|", "median \\|Δshare\\| (pp)", "worst \\|Δshare\\| (pp)"],
        rows,
        right=range(1, 7),
    )
    lines += ["", "Row by row (published / simulated):", ""]
    rows = []
    for p in pairs:
        r = p.ref
        rows.append(
            [
                r["qdisc"],
                f"{r['cc1']}({r['rtt1_ms']}ms)",
                f"{r['cc2']}({r['rtt2_ms']}ms)",
                f"{p.pub1:.2f} / {p.sim1:.2f}",
                f"{p.pub2:.2f} / {p.sim2:.2f}",
                f"{float(r['jain']):.3f} / {_f(p.sim_extra, '.3f')}",
                "yes" if p.same_winner else "**no**",
            ]
        )
    lines += _md_table(["qdisc", "CC1 (RTT)", "CC2 (RTT)", "DSS1", "DSS2", "Jain's", "same winner"], rows, right=(3, 4, 5))
    return lines


def _ratio(a: float, b: float) -> str:
    if b <= 0:
        return "inf"
    r = a / b
    return f"{r:.0f}:1" if r >= 1 else f"1:{1 / r:.0f}"


@comparison(
    "l4s-tests-s6",
    title="l4s-tests Scenario 6: Prague vs a classic flow in one RFC3168 queue",
    suite="l4s-tests/s6",
    reference="l4s-tests_s6_rfc3168_aqms.csv",
    origin="heistp/l4s-tests README, Scenario 6 table (s6_steady_state.md)",
)
def compare_s6(ref: list[dict[str, str]], records: list[Record], suite: Suite) -> list[str]:
    pairs, missing = _pairs(
        ref,
        records,
        lambda r: (r["qdisc"], r["cc2"]),
        lambda rec: (rec.cell.shown.get("qdisc", ""), f"{rec.cell.params.get('classic')}-{rec.cell.params.get('ecn')}"),
    )
    lines = _summary_lines(pairs, missing, len(ref))
    factors = [max(p.sim1 / p.sim2, 1e-9) / float(p.ref["ratio"]) for p in pairs if p.sim2 > 0]
    within2 = sum(0.5 <= f <= 2 for f in factors)
    lines.append(f"- simulated ratio within a factor of 2 of the published ratio: {within2} of {len(factors)}")
    if factors:
        lines.append(f"- simulated / published ratio: median {statistics.median(factors):.2f}, range {min(factors):.2f}-{max(factors):.2f}")
    lines += ["", "Published and simulated side by side:", ""]
    rows = []
    for p in pairs:
        r = p.ref
        rows.append(
            [
                r["qdisc"],
                f"{r['cc2']}({r['rtt2_ms']}ms)",
                f"{p.pub1:.2f} / {p.sim1:.2f}",
                f"{p.pub2:.2f} / {p.sim2:.2f}",
                f"{r['ratio']}:1",
                _ratio(p.sim1, p.sim2),
            ]
        )
    lines += _md_table(["qdisc", "CC2 (RTT)", "DSS1 (prague)", "DSS2", "published ratio", "simulated ratio"], rows, right=(2, 3, 4, 5))
    return lines


@comparison(
    "jarvinen-kojo-q95",
    title="Järvinen & Kojo Table II: 95th percentile queueing delay",
    suite="jarvinen-kojo",
    reference="jarvinen-kojo_table2_q95.csv",
    filters={"path": ["11ms"], "aqm": ["codel", "pie_update60ms", "pie_thresh5pkts", "hred_wq0.02", "hred_wq0.04", "sfq_codel"]},
    origin="Järvinen & Kojo, Table II (median over 100 replications, seconds)",
)
def compare_jk(ref: list[dict[str, str]], records: list[Record], suite: Suite) -> list[str]:
    loads = [c for c in ref[0] if c != "aqm"] if ref else []
    label = {c: c.removeprefix("flows_").removesuffix("_s").replace("p", "+") for c in loads}
    published = {(r["aqm"], label[c]): float(r[c]) for r in ref for c in loads if r.get(c)}
    simulated: dict[tuple[str, str], float] = {}
    seeds = 0
    for g in group_by_cell(records):
        vals = [v for v in (r.value("bottleneck.sojourn_ms.p95") for r in g) if isinstance(v, (int, float))]
        if vals:
            p = g[0].cell.params
            simulated[(p["aqm"], p["load"])] = statistics.median(vals) / 1000.0
            seeds = max(seeds, len(vals))
    rows = [r["aqm"] for r in ref]
    lines = [f"- simulated: median over {seeds} replication(s) per entry of each run's 95th percentile (s)"]
    return lines + pivot_lines(published, simulated, rows, [label[c] for c in loads], row_title="AQM")


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


def _merge_filters(suite: Suite, base: Mapping[str, list[str]], user: Mapping[str, list[str]]) -> dict[str, list[str]] | None:
    """The comparison's filters narrowed by the user's (the axes and values this suite has);
    None when nothing is left."""
    out = {k: list(v) for k, v in base.items()}
    for k, vals in user.items():
        if k not in suite.axis_names:
            continue
        vals = [v for v in vals if v in suite.axis(k).labels()]
        out[k] = [v for v in out[k] if v in vals] if k in out else vals
        if not out[k]:
            return None
    return out


def validate(
    out_dir: Path,
    *,
    jobs: int = 1,
    filters: Mapping[str, list[str]] | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
    seeds: int | None = None,
    plots: bool = True,
    only: Sequence[str] = (),
    progress: bool = True,
    report_path: Path | None = None,
    command: str | None = None,
) -> Path:
    """Runs (or reuses) every comparison's suite under ``out_dir/<suite>`` and writes VALIDATION.md."""
    filters = dict(filters or {})
    comps = [c for c in COMPARISONS if not only or c.key in only or c.suite in only]
    if only and not comps:
        raise SuiteError(f"--only {', '.join(only)}: no such comparison (known: {', '.join(c.key for c in COMPARISONS)})")
    suites = {c.suite: load_suite(c.suite) for c in comps}
    for k in filters:
        if not any(k in s.axis_names for s in suites.values()):
            axes = sorted({a for s in suites.values() for a in s.axis_names})
            raise SuiteError(f"--filter {k}=...: no validated suite has an axis '{k}' (axes: {', '.join(axes)})")
    for k, vals in filters.items():
        known = {v for s in suites.values() if k in s.axis_names for v in s.axis(k).labels()}
        bad = [v for v in vals if v not in known]
        if bad:
            raise SuiteError(f"--filter {k}={','.join(bad)}: not a value of {k} in any validated suite (values: {', '.join(sorted(known))})")
    lines = [
        "# Validation against published measurements",
        "",
        "Each section compares one published table with the simulated runs of the matching suite. "
        "The numbers are reported, not judged: the published tables are evidence of what real "
        "testbeds measured, not targets to tune to. Simulated values are means over the seeds run. "
        "Reference data: `python/aqmlab/reference/` (origins in its README).",
        "",
    ]
    if command:
        lines += [f"Made by `{command}`.", ""]
    for c in comps:
        suite = suites[c.suite]
        flt = _merge_filters(suite, c.filters, filters)
        lines += [f"## {c.title}", ""]
        sel = ", ".join(f"{k}={','.join(v)}" for k, v in (flt or {}).items())
        lines += [f"Published: {c.origin} (`{c.reference}`). Simulated: suite `{c.suite}`" + (f", runs with {sel}" if sel else "") + ".", ""]
        if flt is None:
            lines += ["No runs selected by the filters.", ""]
            continue
        outcome = run_suite(
            suite,
            out_dir / c.suite,
            filters=flt,
            seeds=seeds,
            overrides=overrides,
            jobs=jobs,
            plots=plots,
            progress=progress,
            command=suite_command(c.suite, flt, seeds, overrides),
        )
        if overrides:
            lines += ["Overrides: " + ", ".join(f"`{k}={override_text(v)}`" for k, v in overrides) + " (the runs differ from the study's).", ""]
        lines += c.compare(reference_rows(c.reference), outcome.records, suite)
        lines.append("")
    path = report_path or out_dir / VALIDATION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path

