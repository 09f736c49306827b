"""``aqmlab validate``: the suites that have published numbers, compared with those numbers.

Each comparison is one :class:`Comparison` in :data:`COMPARISONS`: the suite it needs (and
the filters selecting the runs it needs), the reference CSV in ``aqmlab/reference/``, and a
function that turns the reference rows and the suite's run records into Markdown. Adding a
published table is adding one such function with the :func:`comparison` decorator; the
runner, resume, report writing and the CLI stay as they are.

Every comparison's suite runs in up to two *passes*: on the profile its study ran (the
``stack`` the suite file declares, e.g. ``l4steam-2020``) under ``DIR/<suite>``, and with the
override ``stack=linux`` (today's stack, as the engine models it) under ``DIR/<suite>@linux``.
The report puts the two side by side. The linux pass is left out when the study's profile is
already ``linux``, when the user's own ``--set stack=...`` makes every run ``linux``, or with
``linux=False`` (``--no-linux``). Each pass runs each cell with :data:`DEFAULT_SEEDS` seeds (or
the suite's own number when it is larger) unless ``seeds`` is given.

The report states facts (rows compared, rows where the same flow wins, differences, the spread
over seeds); it does not pass or fail anything, and ``aqmlab validate`` exits 0 whatever the
numbers are.
"""

from __future__ import annotations

import csv
import statistics
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .output import atomic_write_text
from .report import Record, format_ratio, group_by_cell, markdown_table, stat_mean_std, stat_median_iqr
from .runner import is_done, run_suite
from .suite import RunSpec, Suite, SuiteError, get_key, load_suite, override_text, plan_runs, suite_command

VALIDATION_FILE = "VALIDATION.md"
#: Seeds per cell when ``--seeds`` is not given (a suite that declares more keeps its own).
DEFAULT_SEEDS = 5
#: The stack the second pass runs on, and the suffix of its directory.
LINUX = "linux"


@dataclass
class Pass:
    """One set of runs of a comparison's suite: on the study's profile, or on ``linux``.

    ``label`` names the stack(s) the runs used (the column heading in the report); ``kind``
    is ``"profile"`` (the study's own, possibly changed by the user's ``--set stack=...``) or
    ``"linux"`` (the added ``stack=linux`` pass).
    """

    kind: str
    label: str
    records: list[Record] = field(default_factory=list)


Compare = Callable[[list[dict[str, str]], list[Pass], Suite], list[str]]


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
    """Registers a comparison of ``suite``'s runs with ``reference`` (a CSV in aqmlab/reference).

    The function gets the reference rows, one :class:`Pass` per stack run (the study's
    profile first, then ``linux`` when it was run) and the suite; it returns Markdown lines.
    """

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


def _values(records: Sequence[Record], metric: str) -> list[float]:
    return [float(v) for v in (r.value(metric) for r in records) if isinstance(v, (int, float))]


def _ms(rtt: Any) -> str:
    """``"20ms"`` -> ``"20"`` (the reference CSVs give RTTs in ms)."""
    s = str(rtt)
    return s[:-2] if s.endswith("ms") else s


def _f(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _spread(vals: Sequence[float], spec: str) -> str:
    """``mean ± sample standard deviation`` over seeds (the value alone for one seed)."""
    return stat_mean_std(vals, spec) if vals else "-"


def _winner(a: float, b: float) -> int:
    return (a > b) - (a < b)


def _stats_line(label: str, diffs: Sequence[float], spec: str) -> str:
    if not diffs:
        return f"- {label}: no rows"
    return f"- {label}: median {format(statistics.median(diffs), spec)}, worst {format(max(diffs), spec)}"


def _median_worst(diffs: Sequence[float], spec: str) -> str:
    return f"{format(statistics.median(diffs), spec)} / {format(max(diffs), spec)}" if diffs else "-"


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """:func:`aqmlab.report.markdown_table` as lines, the columns ``right`` right-aligned."""
    return markdown_table(headers, rows, ["r" if i in right else "l" for i in range(len(headers))]).split("\n")


def _by_pass(label: str, passes: Sequence[Pass]) -> str:
    """A column heading: ``"DSS1 published / l4steam-2020 / linux"``."""
    return " / ".join([f"{label} published", *(p.label for p in passes)])


def _pass_heading(p: Pass) -> str:
    return f"{p.label} (study's profile)" if p.kind == "profile" else f"{p.label} (today's stack)"


@dataclass
class Pair:
    """A published two-flow row and its simulated counterpart: the per-seed values."""

    ref: dict[str, str]
    dss1: list[float]
    dss2: list[float]
    extra: list[float] = field(default_factory=list)

    @property
    def sim1(self) -> float:
        return statistics.fmean(self.dss1)

    @property
    def sim2(self) -> float:
        return statistics.fmean(self.dss2)

    @property
    def sim_extra(self) -> float | None:
        return statistics.fmean(self.extra) if self.extra else None

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


@dataclass
class Pairs:
    """One pass's pairs, keyed by the index of the reference row, and the rows it lacks."""

    by_row: dict[int, Pair]
    missing: int
    n_ref: int

    @property
    def pairs(self) -> list[Pair]:
        return list(self.by_row.values())


def _pairs(ref: list[dict[str, str]], records: list[Record], key_of_ref: Callable[[dict[str, str]], tuple], key_of_cell: Callable[[Record], tuple], extra: str | None = None) -> Pairs:
    """Matches reference rows with simulated cells by key; the reference rows with no finished
    simulated counterpart are counted as missing."""
    sim: dict[tuple, list[Record]] = {}
    for g in group_by_cell(records):
        done = [r for r in g if r.summary is not None]
        if done:
            sim[key_of_cell(done[0])] = done
    by_row, missing = {}, 0
    for i, row in enumerate(ref):
        g = sim.get(key_of_ref(row))
        d1, d2 = (_values(g, "dss1"), _values(g, "dss2")) if g else ([], [])
        if not d1 or not d2 or statistics.fmean(d1) + statistics.fmean(d2) <= 0:
            missing += 1
            continue
        by_row[i] = Pair(row, d1, d2, _values(g, extra) if extra else [])
    return Pairs(by_row, missing, len(ref))


def _pair_summary(ps: Pairs) -> dict[str, str]:
    """The summary of one pass's pairs: what each row of the summary table says."""
    pairs = ps.pairs
    ties = [p for p in pairs if p.near_tie]
    same = sum(p.same_winner for p in pairs)
    same_clear = sum(p.same_winner for p in pairs if not p.near_tie)
    return {
        "rows compared": f"{len(pairs)} of {ps.n_ref} published" + (f" ({ps.missing} without a simulated run)" if ps.missing else ""),
        "rows where the same flow wins": f"{same} of {len(pairs)}"
        + (f"; {same_clear} of {len(pairs) - len(ties)} without the {len(ties)} published 45–55 % splits" if ties else ""),
        "|Δshare| of flow 1 (pp), median / worst": _median_worst([p.share_diff for p in pairs], ".1f"),
    }


def _summary_table(passes: Sequence[Pass], per_pass: Sequence[Mapping[str, str]]) -> list[str]:
    """Rows: the summary's items; columns: the passes."""
    keys = list(dict.fromkeys(k for d in per_pass for k in d))
    rows = [[k, *(d.get(k, "-") for d in per_pass)] for k in keys]
    return _md_table(["measure", *(_pass_heading(p) for p in passes)], rows)


def pivot_lines(
    published: Mapping[tuple[str, str], float],
    simulated: Mapping[tuple[str, str], float] | Mapping[str, Mapping[tuple[str, str], float]],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    row_title: str = "",
    spec: str = ".3f",
    shown: Mapping[str, Mapping[tuple[str, str], str]] | None = None,
) -> list[str]:
    """A published row x column table (e.g. AQM x load) beside the simulated one(s): the
    values as "published / simulated", the absolute differences, and per column the rank order
    of the rows (smallest first) in each, with whether they agree.

    For tables like Järvinen & Kojo's Table II: ``published[(aqm, load)] = seconds``.
    ``simulated`` is one mapping like ``published``, or ``{label: mapping}`` for several passes
    (e.g. ``{"linux": ...}``), shown side by side; ``shown[label][key]`` replaces a simulated
    value's text (e.g. with its spread over seeds).
    """
    sims: dict[str, Mapping[tuple[str, str], float]]
    if simulated and all(isinstance(v, Mapping) for v in simulated.values()):
        sims = dict(simulated)  # type: ignore[arg-type]
    else:
        sims = {"simulated": simulated}  # type: ignore[dict-item]
    shown = shown or {}
    several = len(sims) > 1
    lines: list[str] = []
    for label, sim in sims.items():
        pre = f"{label}: " if several else ""
        diffs = [abs(published[k] - sim[k]) for k in published if k in sim]
        lines.append(f"- {pre}values compared: {len(diffs)} of {len(published)} published")
        if diffs:
            lines.append(_stats_line(f"{pre}absolute difference", diffs, spec))
        order_line_at = len(lines)
        same = 0
        for c in columns:
            have = [r for r in rows if (r, c) in published and (r, c) in sim]
            same += sorted(have, key=lambda r: (published[(r, c)], r)) == sorted(have, key=lambda r: (sim[(r, c)], r))
        lines.insert(order_line_at, f"- {pre}columns with the same rank order: {same} of {len(columns)}")
    body = []
    for r in rows:
        cells = [r]
        for c in columns:
            p = published.get((r, c))
            vals = [shown.get(label, {}).get((r, c)) or _f(sim.get((r, c)), spec) for label, sim in sims.items()]
            cells.append(" / ".join([_f(p, spec), *vals]))
        body.append(cells)
    lines += ["", "Published / " + " / ".join(sims) + ":", ""]
    lines += _md_table([row_title, *columns], body, right=range(1, len(columns) + 1))
    lines += ["", "Rank order per column (smallest first):", ""]
    body = []
    for c in columns:
        po_all = [r for r in rows if (r, c) in published]
        cells = [c]
        agree = []
        for label, sim in sims.items():
            have = [r for r in po_all if (r, c) in sim]
            po = sorted(have, key=lambda r: (published[(r, c)], r))
            so = sorted(have, key=lambda r: (sim[(r, c)], r))
            if label == next(iter(sims)):
                cells.append(", ".join(po))
            cells.append(", ".join(so))
            agree.append("yes" if po == so else "**no**")
        body.append([*cells, " / ".join(agree)])
    lines += _md_table(["column", "published", *sims, "same order" + (" (" + " / ".join(sims) + ")" if several else "")], body)
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


def _row_indices(per_pass: Sequence[Pairs]) -> list[int]:
    """The reference rows that at least one pass has, in reference order."""
    return sorted({i for ps in per_pass for i in ps.by_row})


def _yes_no(p: Pair | None) -> str:
    return "-" if p is None else ("yes" if p.same_winner else "**no**")


@comparison(
    "l4s-tests-s1",
    title="l4s-tests Scenario 1 fairness table, 50 Mbit/s",
    suite="l4s-tests/s1",
    reference="l4s-tests_s1_fairness_50mbit.csv",
    filters={"rate": ["50Mbit"]},
    origin="heistp/l4s-tests README, Scenario 1 fairness table (s1_table.md)",
)
def compare_s1(ref: list[dict[str, str]], passes: list[Pass], suite: Suite) -> list[str]:
    ref = [r for r in ref if r["rate"] == "50Mbit"]
    per_pass = [
        _pairs(
            ref,
            p.records,
            lambda r: (r["qdisc"], r["cc1"], r["rtt1_ms"], r["cc2"], r["rtt2_ms"]),
            lambda rec: _flow_key(rec, rec.cell.shown.get("qdisc", "")),
            extra="jain",
        )
        for p in passes
    ]
    summaries = []
    for ps in per_pass:
        d = _pair_summary(ps)
        jdiff = [abs(float(p.ref["jain"]) - p.sim_extra) for p in ps.pairs if p.sim_extra is not None]
        d["|ΔJain|, median / worst"] = _median_worst(jdiff, ".3f")
        summaries.append(d)
    lines = _summary_table(passes, summaries)
    lines += ["", "Per qdisc:", ""]
    rows = []
    for q in dict.fromkeys(r["qdisc"] for r in ref):
        for p, ps in zip(passes, per_pass):
            pq = [x for x in ps.pairs if x.ref["qdisc"] == q]
            if not pq:
                continue
            jd = [abs(float(x.ref["jain"]) - x.sim_extra) for x in pq if x.sim_extra is not None]
            sd = [x.share_diff for x in pq]
            rows.append(
                [
                    q,
                    p.label,
                    str(len(pq)),
                    f"{sum(x.same_winner for x in pq)}",
                    f"{statistics.median(jd):.3f}" if jd else "-",
                    f"{max(jd):.3f}" if jd else "-",
                    f"{statistics.median(sd):.1f}",
                    f"{max(sd):.1f}",
                ]
            )
    lines += _md_table(
        ["qdisc", "stack", "rows", "same winner", "median \\|ΔJain\\|", "worst \\|ΔJain\\|", "median \\|Δshare\\| (pp)", "worst \\|Δshare\\| (pp)"],
        rows,
        right=range(2, 8),
    )
    lines += ["", "Row by row (published / " + " / ".join(p.label for p in passes) + "; simulated: mean ± sample standard deviation over the seeds):", ""]
    rows = []
    for i in _row_indices(per_pass):
        r = ref[i]
        got = [ps.by_row.get(i) for ps in per_pass]
        rows.append(
            [
                r["qdisc"],
                f"{r['cc1']}({r['rtt1_ms']}ms)",
                f"{r['cc2']}({r['rtt2_ms']}ms)",
                " / ".join([f"{float(r['dss1_mbps']):.2f}", *(_spread(x.dss1, ".2f") if x else "-" for x in got)]),
                " / ".join([f"{float(r['dss2_mbps']):.2f}", *(_spread(x.dss2, ".2f") if x else "-" for x in got)]),
                " / ".join([f"{float(r['jain']):.3f}", *(_spread(x.extra, ".3f") if x else "-" for x in got)]),
                " / ".join(_yes_no(x) for x in got),
            ]
        )
    lines += _md_table(
        ["qdisc", "CC1 (RTT)", "CC2 (RTT)", _by_pass("DSS1", passes), _by_pass("DSS2", passes), _by_pass("Jain's", passes),
         "same winner (" + " / ".join(p.label for p in passes) + ")"],
        rows,
        right=(3, 4, 5),
    )
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
def compare_s6(ref: list[dict[str, str]], passes: list[Pass], suite: Suite) -> list[str]:
    per_pass = [
        _pairs(
            ref,
            p.records,
            lambda r: (r["qdisc"], r["cc2"]),
            lambda rec: (rec.cell.shown.get("qdisc", ""), f"{rec.cell.params.get('classic')}-{rec.cell.params.get('ecn')}"),
            extra="ratio",
        )
        for p in passes
    ]
    summaries = []
    for ps in per_pass:
        d = _pair_summary(ps)
        factors = [max(p.sim1 / p.sim2, 1e-9) / float(p.ref["ratio"]) for p in ps.pairs if p.sim2 > 0]
        d["simulated ratio within a factor of 2 of the published"] = f"{sum(0.5 <= f <= 2 for f in factors)} of {len(factors)}"
        d["simulated / published ratio, median (range)"] = (
            f"{statistics.median(factors):.2f} ({min(factors):.2f}–{max(factors):.2f})" if factors else "-"
        )
        summaries.append(d)
    lines = _summary_table(passes, summaries)
    lines += [
        "",
        "Published and simulated side by side (published / " + " / ".join(p.label for p in passes)
        + "; simulated: mean ± sample standard deviation over the seeds; the ratio's mean and spread are over the runs' own ratios):",
        "",
    ]
    rows = []
    for i in _row_indices(per_pass):
        r = ref[i]
        got = [ps.by_row.get(i) for ps in per_pass]
        rows.append(
            [
                r["qdisc"],
                f"{r['cc2']}({r['rtt2_ms']}ms)",
                " / ".join([f"{float(r['dss1_mbps']):.2f}", *(_spread(x.dss1, ".2f") if x else "-" for x in got)]),
                " / ".join([f"{float(r['dss2_mbps']):.2f}", *(_spread(x.dss2, ".2f") if x else "-" for x in got)]),
                " / ".join([f"{r['ratio']}:1", *((format_ratio(x.extra) if x.extra else _ratio(x.sim1, x.sim2)) if x else "-" for x in got)]),
            ]
        )
    lines += _md_table(
        ["qdisc", "CC2 (RTT)", _by_pass("DSS1 (prague)", passes), _by_pass("DSS2", passes), _by_pass("ratio", passes)],
        rows,
        right=(2, 3, 4),
    )
    return lines


@comparison(
    "jarvinen-kojo-q95",
    title="Järvinen & Kojo Table II: 95th percentile queueing delay",
    suite="jarvinen-kojo",
    reference="jarvinen-kojo_table2_q95.csv",
    filters={"path": ["11ms"], "aqm": ["codel", "pie_update60ms", "pie_thresh5pkts", "hred_wq0.02", "hred_wq0.04", "sfq_codel"]},
    origin="Järvinen & Kojo, Table II (median over 100 replications, seconds)",
)
def compare_jk(ref: list[dict[str, str]], passes: list[Pass], suite: Suite) -> list[str]:
    loads = [c for c in ref[0] if c != "aqm"] if ref else []
    label = {c: c.removeprefix("flows_").removesuffix("_s").replace("p", "+") for c in loads}
    published = {(r["aqm"], label[c]): float(r[c]) for r in ref for c in loads if r.get(c)}
    simulated: dict[str, dict[tuple[str, str], float]] = {}
    shown: dict[str, dict[tuple[str, str], str]] = {}
    seeds = 0
    for p in passes:
        sim, txt = simulated.setdefault(p.label, {}), shown.setdefault(p.label, {})
        for g in group_by_cell(p.records):
            vals = [v / 1000.0 for v in _values(g, "bottleneck.sojourn_ms.p95")]
            if vals:
                key = (g[0].cell.params["aqm"], g[0].cell.params["load"])
                sim[key] = statistics.median(vals)
                txt[key] = stat_median_iqr(vals, ".3f")
                seeds = max(seeds, len(vals))
    rows = [r["aqm"] for r in ref]
    lines = [f"- simulated: median [lower quartile–upper quartile] over {seeds} replication(s) per entry of each run's 95th percentile (s)"]
    return lines + pivot_lines(published, simulated, rows, [label[c] for c in loads], row_title="AQM", shown=shown)


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


def _stacks(runs: Sequence[RunSpec]) -> list[str]:
    """The stacks (profiles) the runs use, in plan order (``linux`` when a scenario has none)."""
    return list(dict.fromkeys(str(tomllib.loads(r.text).get("stack", LINUX)) for r in runs if r.replicate == 0))


@dataclass
class PlannedPass:
    """One pass of one comparison: where it runs, with what, and its planned runs."""

    comparison: Comparison
    suite: Suite
    kind: str
    label: str
    out_dir: Path
    filters: dict[str, list[str]]
    seeds: int
    overrides: list[tuple[str, Any]]
    runs: list[RunSpec]

    @property
    def command(self) -> str:
        return suite_command(self.comparison.suite, self.filters, self.seeds, self.overrides)


def plan_passes(
    comp: Comparison,
    suite: Suite,
    out_dir: Path,
    flt: Mapping[str, list[str]],
    *,
    overrides: Sequence[tuple[str, Any]] = (),
    seeds: int | None = None,
    linux: bool = True,
) -> list[PlannedPass]:
    """The passes of one comparison: on the study's profile under ``out_dir/<suite>``, and
    with ``stack=linux`` under ``out_dir/<suite>@linux`` (see the module docstring for when
    the second is left out). A user's ``--set stack=linux`` on a study that ran another stack
    gives only the linux pass, in the ``@linux`` directory (so it reuses a full validation's)."""
    k = seeds if seeds is not None else max(DEFAULT_SEEDS, suite.seeds)
    overrides = list(overrides)
    flt = {a: list(v) for a, v in flt.items()}
    declared = _stacks(plan_runs(suite, out_dir, filters=flt, seeds=1))
    runs = plan_runs(suite, out_dir / comp.suite, filters=flt, seeds=k, overrides=overrides)
    stacks = _stacks(runs)
    label = " + ".join(stacks) or LINUX
    if stacks == [LINUX] and declared != [LINUX]:
        lx = plan_runs(suite, out_dir / f"{comp.suite}@{LINUX}", filters=flt, seeds=k, overrides=overrides)
        return [PlannedPass(comp, suite, "linux", LINUX, out_dir / f"{comp.suite}@{LINUX}", flt, k, overrides, lx)]
    passes = [PlannedPass(comp, suite, "profile", label, out_dir / comp.suite, flt, k, overrides, runs)]
    if linux and stacks != [LINUX]:
        lx_over = [(key, v) for key, v in overrides if key != "stack"] + [("stack", LINUX)]
        lx_dir = out_dir / f"{comp.suite}@{LINUX}"
        lx = plan_runs(suite, lx_dir, filters=flt, seeds=k, overrides=lx_over)
        passes.append(PlannedPass(comp, suite, "linux", LINUX, lx_dir, flt, k, lx_over, lx))
    return passes


def _select(only: Sequence[str]) -> list[Comparison]:
    comps = [c for c in COMPARISONS if not only or c.key in only or c.suite in only]
    if only and not comps:
        raise SuiteError(f"--only {', '.join(only)}: no such comparison (known: {', '.join(c.key for c in COMPARISONS)})")
    return comps


def _check_filters(suites: Mapping[str, Suite], filters: Mapping[str, list[str]]) -> None:
    for k in filters:
        if not any(k in s.axis_names for s in suites.values()):
            axes = sorted({a for s in suites.values() for a in s.axis_names})
            raise SuiteError(f"--filter {k}=...: no validated suite has an axis '{k}' (axes: {', '.join(axes)})")
    for k, vals in filters.items():
        known = {v for s in suites.values() if k in s.axis_names for v in s.axis(k).labels()}
        bad = [v for v in vals if v not in known]
        if bad:
            raise SuiteError(f"--filter {k}={','.join(bad)}: not a value of {k} in any validated suite (values: {', '.join(sorted(known))})")


def plan_validation(
    out_dir: Path,
    *,
    filters: Mapping[str, list[str]] | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
    seeds: int | None = None,
    only: Sequence[str] = (),
    linux: bool = True,
) -> list[tuple[Comparison, dict[str, list[str]] | None, list[PlannedPass]]]:
    """Every comparison with its merged filters (None: nothing selected) and its passes;
    nothing is run. ``aqmlab validate --dry-run`` prints this."""
    filters = dict(filters or {})
    comps = _select(only)
    suites = {c.suite: load_suite(c.suite) for c in comps}
    _check_filters(suites, filters)
    out = []
    for c in comps:
        suite = suites[c.suite]
        flt = _merge_filters(suite, c.filters, filters)
        passes = [] if flt is None else plan_passes(c, suite, out_dir, flt, overrides=overrides, seeds=seeds, linux=linux)
        out.append((c, flt, passes))
    return out


def plan_text(plan: Sequence[tuple[Comparison, dict[str, list[str]] | None, list[PlannedPass]]]) -> str:
    """One line per pass: comparison, stack, cells x seeds, finished runs, directory."""
    lines = []
    for c, flt, passes in plan:
        if flt is None:
            lines.append(f"{c.key}: no runs selected by the filters")
        for p in passes:
            cells = len({r.cell.id for r in p.runs})
            done = sum(is_done(r) for r in p.runs)
            lines.append(
                f"{c.key}: {p.label} ({'study' if p.kind == 'profile' else 'linux pass'}): {cells} cells x {p.seeds} seeds = "
                f"{len(p.runs)} runs ({done} finished) -> {p.out_dir}"
            )
    return "\n".join(lines) + "\n"


def validate(
    out_dir: Path,
    *,
    jobs: int = 1,
    filters: Mapping[str, list[str]] | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
    seeds: int | None = None,
    plots: bool | None = None,
    only: Sequence[str] = (),
    linux: bool = True,
    progress: bool = True,
    report_path: Path | None = None,
    command: str | None = None,
) -> Path:
    """Runs (or reuses) every comparison's suite under ``out_dir/<suite>`` (the study's
    profile) and ``out_dir/<suite>@linux`` (``stack=linux``; not with ``linux=False``), and
    writes VALIDATION.md."""
    plan = plan_validation(out_dir, filters=filters, overrides=overrides, seeds=seeds, only=only, linux=linux)
    lines = [
        "# Validation against published measurements",
        "",
        "Each section compares one published table with the simulated runs of the matching suite, "
        "on the stack (era profile) the study ran and, beside it, on today's stack (`stack=linux`). "
        "The numbers are reported, not judged: the published tables are evidence of what real "
        "testbeds measured, not targets to tune to. Simulated values are the mean ± sample standard "
        "deviation over the seeds run (Järvinen & Kojo: median [lower quartile–upper quartile]); the "
        "summaries use the means. Reference data: `python/aqmlab/reference/` (origins in its README).",
        "",
    ]
    if command:
        lines += [f"Made by `{command}`.", ""]
    for c, flt, planned in plan:
        stacks = " vs ".join(p.label for p in planned)
        lines += [f"## {c.title}" + (f" (stack: {stacks})" if planned else ""), ""]
        sel = ", ".join(f"{k}={','.join(v)}" for k, v in (flt or {}).items())
        lines += [f"Published: {c.origin} (`{c.reference}`). Simulated: suite `{c.suite}`" + (f", runs with {sel}" if sel else "") + ".", ""]
        if flt is None:
            lines += ["No runs selected by the filters.", ""]
            continue
        passes = []
        for pp in planned:
            outcome = run_suite(
                pp.suite,
                pp.out_dir,
                filters=pp.filters,
                seeds=pp.seeds,
                overrides=pp.overrides,
                jobs=jobs,
                plots=plots,
                progress=progress,
                command=pp.command,
            )
            passes.append(Pass(pp.kind, pp.label, outcome.records))
            what = "the study's profile" if pp.kind == "profile" else "today's stack"
            lines.append(f"- {what}, `{pp.label}`: {pp.seeds} seed(s) per cell, `{pp.command}`")
        if all(p.kind == "profile" for p in planned) and planned[0].label == LINUX:
            lines.append("- the study's profile is today's stack (`linux`): no separate linux pass")
        elif not any(p.kind == "linux" for p in planned):
            lines.append("- the linux pass was left out (`--no-linux`)")
        lines.append("")
        if overrides:
            lines += ["Overrides: " + ", ".join(f"`{k}={override_text(v)}`" for k, v in overrides) + " (the runs differ from the study's).", ""]
        lines += c.compare(reference_rows(c.reference), passes, planned[0].suite)
        lines.append("")
    path = report_path or out_dir / VALIDATION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path
