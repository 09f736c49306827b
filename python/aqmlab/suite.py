"""Suites: named matrices of scenarios defined as data (TOML files under ``aqmlab/suites/``).

A suite file holds an ordinary scenario (``[base]``, the engine's schema), matrix axes whose
values assign scenario keys, optional conditional rules and exclusions, and the report
tables to build. Expanding a suite gives :class:`Cell` objects (one scenario each); each cell
runs once per seed. Every run writes its ``scenario.toml`` next to its results, so any run
can be repeated with ``aqmlab run``.

This module is the suite model only (loading, the matrix, filters and overrides, the run
plan); running the plan is :mod:`aqmlab.runner`, the files of a run are :mod:`aqmlab.output`.

Suite file (see docs/suites.md for the full description)::

    name = "l4s-tests/s1"            # optional; default: the path under aqmlab/suites
    title = "RTT fairness"
    seeds = 1                         # replications per cell (``--seeds`` overrides)

    [base]                            # a scenario; every key of the engine schema
    duration = "180s"
    [base.bottleneck]
    rate = "50Mbit"
    [[base.flows]]
    cc = "prague"
    rtt = "10ms"

    [[axes]]
    name = "rate"
    values = [{ label = "10Mbit", vars = { pfifo_limit = 200 } }, "50Mbit"]
    set = { "bottleneck.rate" = "{rate}" }        # applied for every value

    [[axes]]
    name = "rtt"
    split = "/"                                   # "{rtt[0]}" is the part before the "/"
    values = ["10/10", "20/10"]
    set = { "flows[0].rtt" = "{rtt[0]}ms", "flows[1].rtt" = "{rtt[1]}ms" }

    [[rules]]                                     # conditional assignments
    when = { rate = "10Mbit", rtt = ["20/10"] }
    set = { "duration" = "60s" }

    [[exclude]]                                   # cells that are not run
    rate = "10Mbit"
    rtt = "20/10"

    [[tables]]
    kind = "fairness"                             # a builder in aqmlab.report.TABLES

Templates (``"{name}"``, ``"{name[i]}"``) in ``set`` values, labels' ``show`` and table
options see every axis label and every ``vars`` entry; a string that is exactly one
placeholder takes the variable's own type (an integer stays an integer).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .output import SUMMARY, run_rel_dir

SUITE_SUFFIX = ".toml"


class SuiteError(ValueError):
    """A suite that cannot be loaded or expanded, or a bad filter/override; one line."""


# --------------------------------------------------------------------------------------
# Key paths and templates
# --------------------------------------------------------------------------------------

_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)((?:\[(?:\d+|\*)\])*)")
_INDEX = re.compile(r"\[(\d+|\*)\]")


def parse_key_path(path: str) -> list[str | int]:
    """``"flows[0].rtt"`` -> ``["flows", 0, "rtt"]``; ``[*]`` becomes ``"*"`` (every element)."""
    out: list[str | int] = []
    if not path:
        raise SuiteError("empty key")
    for part in path.split("."):
        m = _PATH_PART.fullmatch(part)
        if not m:
            raise SuiteError(f"bad key '{path}': cannot parse '{part}'")
        out.append(m.group(1))
        for idx in _INDEX.findall(m.group(2)):
            out.append("*" if idx == "*" else int(idx))
    return out


def set_key(doc: dict[str, Any], path: str, value: Any) -> None:
    """Assigns ``value`` at ``path`` (``a.b``, ``flows[1].rtt``, ``flows[*].ecn``) in ``doc``.

    Missing tables are created; list indices must exist. A mapping value assigned onto an
    existing table is merged into it (``"flows[0]" = { cc = "reno", ecn = "off" }``).
    """
    parts = parse_key_path(path)

    def walk(node: Any, i: int) -> None:
        key = parts[i]
        last = i == len(parts) - 1
        if isinstance(key, str) and key != "*":
            if not isinstance(node, dict):
                raise SuiteError(f"key '{path}': '{key}' is inside a value that is not a table")
            if last:
                if isinstance(value, Mapping) and isinstance(node.get(key), dict):
                    node[key].update(_deepcopy(value))
                else:
                    node[key] = _deepcopy(value)
                return
            if key not in node:
                node[key] = [] if isinstance(parts[i + 1], int) or parts[i + 1] == "*" else {}
            walk(node[key], i + 1)
            return
        if not isinstance(node, list):
            raise SuiteError(f"key '{path}': index applied to a value that is not an array")
        targets = range(len(node)) if key == "*" else [key]
        for j in targets:
            if not 0 <= j < len(node):
                raise SuiteError(f"key '{path}': index {j} out of range (the array has {len(node)} entries)")
            if last:
                if isinstance(value, Mapping) and isinstance(node[j], dict):
                    node[j].update(_deepcopy(value))
                else:
                    node[j] = _deepcopy(value)
            else:
                walk(node[j], i + 1)

    walk(doc, 0)


def get_key(doc: Any, path: str, default: Any = None) -> Any:
    """Reads ``path`` (as :func:`set_key`, without ``[*]``) from nested dicts/lists."""
    node = doc
    for key in parse_key_path(path):
        if isinstance(key, int):
            if not isinstance(node, list) or not -len(node) <= key < len(node):
                return default
            node = node[key]
        else:
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
    return node


def parse_value(text: str) -> Any:
    """A ``--set`` value: TOML if it parses (``5``, ``true``, ``"x"``, ``[1, 2]``), else the string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _deepcopy(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {k: _deepcopy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_deepcopy(x) for x in v]
    return v


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?\}")


@dataclass(frozen=True)
class TVar:
    """A template variable: its value and, for split axes, its parts."""

    value: Any
    parts: tuple[str, ...] = ()

    def get(self, index: str | None, name: str) -> Any:
        if index is None:
            return self.value
        i = int(index)
        if not self.parts:
            raise SuiteError(f"template '{{{name}[{i}]}}': '{name}' has no parts (give its axis a 'split')")
        if i >= len(self.parts):
            raise SuiteError(f"template '{{{name}[{i}]}}': '{self.value}' has only {len(self.parts)} parts")
        return self.parts[i]


def render(template: Any, ctx: Mapping[str, TVar]) -> Any:
    """Fills ``{name}`` / ``{name[i]}`` placeholders in strings (recursively in tables/arrays)."""
    if isinstance(template, Mapping):
        return {k: render(v, ctx) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, ctx) for v in template]
    if not isinstance(template, str) or "{" not in template:
        return template

    def lookup(m: re.Match[str]) -> Any:
        name, idx = m.group(1), m.group(2)
        if name not in ctx:
            known = ", ".join(sorted(ctx)) or "none"
            raise SuiteError(f"template '{template}': unknown variable '{name}' (known: {known})")
        return ctx[name].get(idx, name)

    whole = _PLACEHOLDER.fullmatch(template)
    if whole:
        return lookup(whole)
    return _PLACEHOLDER.sub(lambda m: str(lookup(m)), template)


# --------------------------------------------------------------------------------------
# Suite model
# --------------------------------------------------------------------------------------


@dataclass
class AxisValue:
    label: str
    show: str | None = None  # display form (a template); default: the label
    set: dict[str, Any] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass
class Axis:
    name: str
    values: list[AxisValue]
    set: dict[str, Any] = field(default_factory=dict)
    split: str | None = None
    title: str | None = None

    def labels(self) -> list[str]:
        return [v.label for v in self.values]


@dataclass
class Rule:
    when: dict[str, list[str]]
    set: dict[str, Any]

    def matches(self, params: Mapping[str, str]) -> bool:
        return all(params.get(k) in v for k, v in self.when.items())


@dataclass
class Suite:
    name: str
    path: Path | None
    title: str
    description: str
    source: str
    base: dict[str, Any]
    axes: list[Axis]
    rules: list[Rule]
    exclude: list[dict[str, list[str]]]
    tables: list[dict[str, Any]]
    vars: dict[str, Any]
    seeds: int = 1

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def axis_names(self) -> list[str]:
        return [a.name for a in self.axes]

    def cells(self, filters: Mapping[str, Sequence[str]] | None = None) -> list["Cell"]:
        """The matrix (minus exclusions, restricted by ``filters``) in file order, last axis fastest."""
        filters = check_filters(self, filters or {})
        cells: list[Cell] = []
        seen: dict[str, dict[str, str]] = {}
        choices = [[v for v in a.values if a.name not in filters or v.label in filters[a.name]] for a in self.axes]
        for combo in itertools.product(*choices):
            params = {a.name: v.label for a, v in zip(self.axes, combo)}
            if any(all(params.get(k) in v for k, v in ex.items()) for ex in self.exclude):
                continue
            cell = self._make_cell(combo)
            if cell.id in seen:
                raise SuiteError(
                    f"{self.name}: cells {seen[cell.id]} and {params} both get the directory name '{cell.id}'"
                )
            seen[cell.id] = params
            cells.append(cell)
        return cells

    def _make_cell(self, combo: Sequence[AxisValue]) -> "Cell":
        ctx: dict[str, TVar] = {k: TVar(v) for k, v in self.vars.items()}
        for a, v in zip(self.axes, combo):
            for k, x in v.vars.items():
                ctx[k] = TVar(x)
        for a, v in zip(self.axes, combo):
            parts = tuple(v.label.split(a.split)) if a.split else ()
            ctx[a.name] = TVar(v.label, parts)
        params = {a.name: v.label for a, v in zip(self.axes, combo)}
        shown = {a.name: str(render(v.show, ctx)) if v.show is not None else v.label for a, v in zip(self.axes, combo)}
        scenario = _deepcopy(self.base)
        try:
            for a, v in zip(self.axes, combo):
                for key, val in {**a.set, **v.set}.items():
                    set_key(scenario, key, render(val, ctx))
            for rule in self.rules:
                if rule.matches(params):
                    for key, val in rule.set.items():
                        set_key(scenario, key, render(val, ctx))
        except SuiteError as e:
            raise SuiteError(f"{self.name}: cell {params}: {e}") from None
        cid = "_".join(_slug(v.label) for v in combo) or "base"
        return Cell(suite=self.name, id=cid, params=params, shown=shown, ctx=ctx, scenario=scenario)


@dataclass
class Cell:
    """One point of a suite's matrix: its axis labels and its scenario (without the seed)."""

    suite: str
    id: str
    params: dict[str, str]
    shown: dict[str, str]
    ctx: dict[str, TVar]
    scenario: dict[str, Any]

    def render(self, template: Any) -> Any:
        return render(template, self.ctx)


def _slug(label: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._+-]+", "-", label).strip("-")
    return s or "x"


def _as_list(v: Any) -> list[str]:
    if isinstance(v, list):
        return [str(x) for x in v]
    return [str(v)]


def _parse_suite(data: dict[str, Any], name: str, path: Path | None) -> Suite:
    where = str(path) if path else name
    known = {"name", "title", "description", "source", "base", "axes", "rules", "exclude", "tables", "vars", "seeds"}
    unknown = set(data) - known
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})")
    if "base" not in data or not isinstance(data["base"], dict):
        raise SuiteError(f"{where}: missing [base] scenario table")
    axes: list[Axis] = []
    for i, ad in enumerate(data.get("axes", [])):
        if not isinstance(ad, dict) or "name" not in ad or "values" not in ad:
            raise SuiteError(f"{where}: axes[{i}] needs 'name' and 'values'")
        extra = set(ad) - {"name", "values", "set", "split", "title"}
        if extra:
            raise SuiteError(f"{where}: axes[{i}] ({ad['name']}): unknown key(s) {', '.join(sorted(extra))}")
        values: list[AxisValue] = []
        for j, vd in enumerate(ad["values"]):
            if isinstance(vd, dict):
                extra = set(vd) - {"label", "show", "set", "vars"}
                if "label" not in vd or extra:
                    raise SuiteError(
                        f"{where}: axis {ad['name']} value {j}: a table needs 'label' (and only show, set, vars)"
                    )
                values.append(
                    AxisValue(str(vd["label"]), vd.get("show"), dict(vd.get("set", {})), dict(vd.get("vars", {})))
                )
            else:
                values.append(AxisValue(str(vd)))
        labels = [v.label for v in values]
        if len(set(labels)) != len(labels) or not labels:
            raise SuiteError(f"{where}: axis {ad['name']}: labels must be unique and non-empty")
        axes.append(Axis(str(ad["name"]), values, dict(ad.get("set", {})), ad.get("split"), ad.get("title")))
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise SuiteError(f"{where}: axis names must be unique")
    reserved = {"suite", "cell", "seed", "replicate", "run_dir"}
    if reserved & set(names):
        raise SuiteError(f"{where}: axis names {sorted(reserved & set(names))} are reserved")

    def check_sel(sel: Mapping[str, Any], what: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for k, v in sel.items():
            if k not in names:
                raise SuiteError(f"{where}: {what}: '{k}' is not an axis ({', '.join(names)})")
            vals = _as_list(v)
            bad = [x for x in vals if x not in axes[names.index(k)].labels()]
            if bad:
                raise SuiteError(f"{where}: {what}: {k} has no value {', '.join(bad)}")
            out[k] = vals
        return out

    rules = []
    for i, rd in enumerate(data.get("rules", [])):
        if set(rd) - {"when", "set"} or "set" not in rd:
            raise SuiteError(f"{where}: rules[{i}] takes 'when' and 'set'")
        rules.append(Rule(check_sel(rd.get("when", {}), f"rules[{i}].when"), dict(rd["set"])))
    exclude = [check_sel(ex, f"exclude[{i}]") for i, ex in enumerate(data.get("exclude", []))]
    tables = [dict(t) for t in data.get("tables", [])]
    for i, t in enumerate(tables):
        if "kind" not in t:
            raise SuiteError(f"{where}: tables[{i}] needs a 'kind'")
    seeds = data.get("seeds", 1)
    if not isinstance(seeds, int) or seeds < 1:
        raise SuiteError(f"{where}: seeds must be a positive integer")
    return Suite(
        name=str(data.get("name", name)),
        path=path,
        title=str(data.get("title", name)),
        description=str(data.get("description", "")).strip(),
        source=str(data.get("source", "")).strip(),
        base=data["base"],
        axes=axes,
        rules=rules,
        exclude=exclude,
        tables=tables,
        vars=dict(data.get("vars", {})),
        seeds=seeds,
    )


def _suites_root():
    return resources.files("aqmlab") / "suites"


def builtin_suites() -> dict[str, Any]:
    """Names of the suites shipped with aqmlab -> their resource (``l4s-tests/s1`` -> file)."""
    out: dict[str, Any] = {}

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(SUITE_SUFFIX):
                out[prefix + child.name[: -len(SUITE_SUFFIX)]] = child

    root = _suites_root()
    if root.is_dir():
        walk(root, "")
    return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))


def _natural(name: str) -> list[Any]:
    """``s2`` before ``s10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def load_suite(name_or_path: str | os.PathLike) -> Suite:
    """A built-in suite by name (``l4s-tests/s1``) or a suite file by path."""
    s = os.fspath(name_or_path)
    known = builtin_suites()
    if s in known:
        res = known[s]
        text = res.read_text(encoding="utf-8")
        path = None
        name = s
    else:
        p = Path(s)
        if not (s.endswith(SUITE_SUFFIX) and p.is_file()):
            names = ", ".join(known) or "none"
            raise SuiteError(f"unknown suite '{s}' (built-in: {names}; or give a path to a .toml suite file)")
        text = p.read_text(encoding="utf-8")
        path = p
        name = p.stem
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SuiteError(f"{path or s}: {e}") from None
    return _parse_suite(data, name, path)


# --------------------------------------------------------------------------------------
# Filters, overrides, run planning
# --------------------------------------------------------------------------------------


def parse_filters(items: Iterable[str]) -> dict[str, list[str]]:
    """``["rate=50Mbit", "cc=prague-prague,cubic-cubic"]`` -> ``{"rate": [...], "cc": [...]}``."""
    out: dict[str, list[str]] = {}
    for item in items:
        if "=" not in item:
            raise SuiteError(f"--filter {item}: expected AXIS=VALUE[,VALUE...]")
        k, v = item.split("=", 1)
        k = k.strip()
        vals = [x.strip() for x in v.split(",") if x.strip()]
        if not k or not vals:
            raise SuiteError(f"--filter {item}: expected AXIS=VALUE[,VALUE...]")
        out.setdefault(k, []).extend(vals)
    return out


def check_filters(suite: Suite, filters: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, vals in filters.items():
        try:
            axis = suite.axis(k)
        except KeyError:
            raise SuiteError(
                f"--filter {k}=...: {suite.name} has no axis '{k}' (axes: {', '.join(suite.axis_names) or 'none'})"
            ) from None
        bad = [v for v in vals if v not in axis.labels()]
        if bad:
            raise SuiteError(f"--filter {k}={','.join(bad)}: not a value of {k} (values: {', '.join(axis.labels())})")
        out[k] = list(vals)
    return out


def parse_overrides(items: Iterable[str]) -> list[tuple[str, Any]]:
    out = []
    for item in items:
        if "=" not in item:
            raise SuiteError(f"--set {item}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        k = k.strip()
        parse_key_path(k)  # validates the syntax
        out.append((k, parse_value(v.strip())))
    return out


def toml_value(value: Any) -> str:
    """A value as TOML inline text (the right-hand side of ``key = ...``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, (int, float)):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(value, "nan" if value != value else repr(value))
    if isinstance(value, Mapping):
        keys = (k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in value)
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in zip(keys, value.values())) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise SuiteError(f"cannot write {value!r} as a TOML value")


def override_text(value: Any) -> str:
    """A parsed ``--set`` value written back as the user would type it."""
    return value if isinstance(value, str) else toml_value(value)


@dataclass
class RunSpec:
    """One run: a cell with a seed; ``text`` is the complete scenario TOML it runs."""

    cell: Cell
    seed: int
    replicate: int
    run_dir: Path
    rel_dir: str
    text: str

    @property
    def summary_path(self) -> Path:
        return self.run_dir / SUMMARY


def _toml_dumps(doc: Mapping[str, Any]) -> str:
    import tomli_w

    try:
        return tomli_w.dumps(dict(doc))
    except TypeError as e:
        raise SuiteError(f"cannot write scenario as TOML: {e}") from None


def plan_runs(
    suite: Suite,
    out_dir: Path,
    *,
    filters: Mapping[str, Sequence[str]] | None = None,
    seeds: int | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
) -> list[RunSpec]:
    """Every run of the (filtered) suite: cells x seeds, with the scenario text each runs.

    Seeds are the scenario's seed (default 1) + k for k = 0..seeds-1.
    """
    k_seeds = suite.seeds if seeds is None else seeds
    if k_seeds < 1:
        raise SuiteError("--seeds must be at least 1")
    runs: list[RunSpec] = []
    assignments = [f"{key}={override_text(val)}" for key, val in overrides]
    for cell in suite.cells(filters):
        doc = _deepcopy(cell.scenario)
        if assignments:
            # --set is applied by the engine, as `aqmlab run --set` applies it (one meaning).
            from ._sim import ScenarioError, resolve

            try:
                doc = tomllib.loads(resolve(_toml_dumps(doc), None, assignments))
            except ScenarioError as e:
                raise SuiteError(f"--set: {cell.id}: {e}") from None
        base_seed = doc.get("seed", 1)
        if not isinstance(base_seed, int) or base_seed < 0:
            raise SuiteError(f"{suite.name}: seed must be a non-negative integer")
        # name and seed first, so scenario.toml reads like the hand-written ones; the cell's
        # text is made once (TOML writing was most of the planning: 3 ms a run) and each seed
        # written into its second line.
        rest = {k: v for k, v in doc.items() if k not in ("name", "seed")}
        head = f"name = {_toml_dumps({'name': f'{suite.name}:{cell.id}'}).split(' = ', 1)[1]}"
        template = head + _toml_dumps({"seed": _SEED_MARK, **rest})
        for k in range(k_seeds):
            seed = base_seed + k
            rel = run_rel_dir(cell.id, seed)
            text = template.replace(f"seed = {_SEED_MARK}\n", f"seed = {seed}\n", 1)
            runs.append(RunSpec(cell=cell, seed=seed, replicate=k, run_dir=out_dir / rel, rel_dir=rel, text=text))
    return runs


#: A seed no suite has, replaced in a cell's scenario text by each run's seed.
_SEED_MARK = 8_765_432_109_876_543_210


def check_runs(runs: Sequence[RunSpec]) -> None:
    """Checks every cell's scenario as a run would (one seed per cell: the seed changes no
    check), so that a bad key fails the suite before any run starts, naming the cell."""
    from ._sim import ScenarioError, resolve

    seen: set[str] = set()
    for r in runs:
        if r.cell.id in seen:
            continue
        seen.add(r.cell.id)
        try:
            resolve(r.text, None, [])
        except ScenarioError as e:
            raise SuiteError(f"{r.rel_dir}: {e}") from None


def suite_command(
    name: str,
    filters: Mapping[str, Sequence[str]] | Iterable[str] = (),
    seeds: int | None = None,
    overrides: Iterable[str | tuple[str, Any]] = (),
) -> str:
    """The ``aqmlab suite run`` command line that reproduces a report, quoted for a POSIX
    shell (``shlex.join``); options that do not change results (jobs, plots, out) are left out.

    ``filters`` are ``AXIS=VALUES`` strings as typed, or a mapping axis -> labels;
    ``overrides`` are ``KEY=VALUE`` strings as typed, or parsed ``(key, value)`` pairs.
    """
    parts = ["aqmlab", "suite", "run", name]
    items = [f"{k}={','.join(v)}" for k, v in filters.items()] if isinstance(filters, Mapping) else list(filters)
    for f in items:
        parts += ["--filter", f]
    if seeds is not None:
        parts += ["--seeds", str(seeds)]
    for o in overrides:
        parts += ["--set", o if isinstance(o, str) else f"{o[0]}={override_text(o[1])}"]
    return shlex.join(parts)
