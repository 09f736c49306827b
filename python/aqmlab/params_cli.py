"""``aqmlab qdisc list|show NAME`` and ``aqmlab cc list|show NAME``: the parameter tables the
engine declares for each queue discipline and congestion control (``params::Kind`` in Rust),
listed as the engine parses them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

#: Families: CLI group -> (what the engine calls it in errors, function of ``aqmlab._sim``).
FAMILIES = {"qdisc": ("qdisc", "qdisc_table"), "cc": ("congestion control", "cc_table")}


def kinds(family: str) -> list[dict[str, Any]]:
    """The engine's declarations of one family ("qdisc" or "cc"), as parsed JSON."""
    from . import _sim

    return json.loads(getattr(_sim, FAMILIES[family][1])())


def find_kind(family: str, name: str) -> dict[str, Any]:
    """The kind called ``name`` (or an alias of it); ``KeyError`` with the known names."""
    table = kinds(family)
    for k in table:
        if name == k["name"] or name in k["aliases"]:
            return k
    known = ", ".join(n for k in table for n in [k["name"], *k["aliases"]])
    raise KeyError(f"unknown {FAMILIES[family][0]} '{name}' (known: {known})")


def _stack_defaults(p: dict[str, Any]) -> str:
    return ", ".join(f"{s}: {_value_text(v)}" for s, v in p["stack_defaults"].items()) or "-"


def _value_text(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _type_text(p: dict[str, Any]) -> str:
    names = [p["name"], *p["aliases"]]
    return p["type"] if len(names) == 1 else f"{p['type']} (alias: {', '.join(p['aliases'])})"


def _print_list(family: str) -> None:
    from rich.console import Console
    from rich.table import Table

    cmd = f"aqmlab {family} show NAME"
    table = Table(title=f"{FAMILIES[family][0].capitalize()} kinds ({cmd})", title_justify="left")
    table.add_column("name")
    table.add_column("parameters", justify="right")
    table.add_column("description")
    for k in kinds(family):
        name = k["name"] + (f" ({', '.join(k['aliases'])})" if k["aliases"] else "")
        table.add_row(name, str(len(k["params"])), k["doc"])
    Console(highlight=False, width=max(100, Console().width)).print(table)


def _print_show(family: str, name: str) -> None:
    from rich.console import Console
    from rich.table import Table

    try:
        k = find_kind(family, name)
    except KeyError as e:
        sys.stderr.write(f"aqmlab: {e.args[0]}\n")
        raise typer.Exit(2) from None
    title = f"{k['name']}: {k['doc']}" + (f" (also: {', '.join(k['aliases'])})" if k["aliases"] else "")
    if not k["params"]:
        print(f"{title}\n  no parameters")
        return
    table = Table(title=title, title_justify="left")
    for col in ("parameter", "type / range", "default", "unit", "stack defaults", "description"):
        table.add_column(col)
    for p in k["params"]:
        table.add_row(p["name"], _type_text(p), p["default_text"], p["unit"] or "-", _stack_defaults(p), p["doc"])
    Console(highlight=False, width=max(140, Console().width)).print(table)


def _family_app(family: str, help_text: str) -> typer.Typer:
    sub = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False, help=help_text)

    @sub.command("list")
    def list_cmd() -> None:
        """List the kinds: name (and aliases), number of parameters, one line."""
        _print_list(family)

    @sub.command("show")
    def show_cmd(name: str = typer.Argument(..., metavar="NAME", help=f"A {FAMILIES[family][0]} name.")) -> None:
        """Show a kind's parameters: type and range, default, unit, per-stack defaults, doc."""
        _print_show(family, name)

    return sub


qdisc_app = _family_app("qdisc", "Queue disciplines and their tc parameters, as the engine parses them.")
cc_app = _family_app("cc", "Congestion controls and their module parameters, as the engine parses them.")
