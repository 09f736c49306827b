"""Command line: ``aqmlab run SCENARIO.toml --out DIR [--seed N] [--set key=value ...]``.

Exit codes: 0 success; 2 bad input (one line on stderr, nothing written); 1 anything else
(a short message; the traceback only with ``--debug``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="aqmlab: deterministic packet-level simulator of AQM and TCP congestion control.",
)


@app.callback()
def _root() -> None:
    """aqmlab: deterministic packet-level simulator of AQM and TCP congestion control."""


def _fmt(v: Any, spec: str = ".2f", none: str = "-") -> str:
    if v is None:
        return none
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def print_summary(summary: dict[str, Any], out_dir: Path | None = None) -> None:
    """A short human summary of a run on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    bn = summary.get("bottleneck", {})
    title = (
        f"{summary.get('name') or 'run'}: {bn.get('qdisc', '?')} @ {_fmt(bn.get('rate_mbps'), 'g')} Mbit/s, "
        f"{_fmt(summary.get('sim_seconds'), 'g')} s simulated in {_fmt(summary.get('wall_seconds'), '.2f')} s "
        f"(seed {summary.get('seed')})"
    )
    flows = summary.get("flows", [])
    table = Table(title=title, title_justify="left")
    table.add_column("flow")
    table.add_column("cc")
    table.add_column("rtt ms", justify="right")
    table.add_column("goodput Mbit/s", justify="right")
    table.add_column("steady Mbit/s", justify="right")
    table.add_column("retrans", justify="right")
    table.add_column("CE", justify="right")
    shown = flows if len(flows) <= 20 else flows[:20]
    for f in shown:
        table.add_row(
            str(f.get("name")),
            str(f.get("cc")),
            _fmt(f.get("rtt_ms"), "g"),
            _fmt(f.get("goodput_mbps")),
            _fmt(f.get("steady_mbps")),
            str(f.get("retransmits", "-")),
            str(f.get("ce_received", "-")),
        )
    if len(flows) > len(shown):
        table.add_row(f"... {len(flows) - len(shown)} more", "", "", "", "", "", "")
    console.print(table)
    soj = bn.get("sojourn_ms", {}) or {}
    util = bn.get("utilization")
    console.print(
        f"utilisation {_fmt(util * 100 if util is not None else None, '.1f')}%, "
        f"sojourn p50 {_fmt(soj.get('p50'), '.1f')} ms / p99 {_fmt(soj.get('p99'), '.1f')} ms, "
        f"drops {bn.get('drops', '-')}, CE {bn.get('ce_marks', '-')}"
    )
    console.print(f"Jain fairness (steady): {_fmt(summary.get('jain_steady'), '.4f')}")
    ms = lambda s: None if s is None else s * 1e3  # noqa: E731
    for w in summary.get("workloads", []):
        console.print(
            f"workload {w['name']}: {w['completed']} of {w['started']} transfers completed; FCT geomean "
            f"{_fmt(ms(w.get('fct_geomean_s')), '.1f')} ms, median {_fmt(ms(w.get('fct_median_s')), '.1f')} ms, "
            f"p95 {_fmt(ms(w.get('fct_p95_s')), '.1f')} ms"
        )
    for g in summary.get("transients", []):
        console.print(
            f"transient {g['name']}: start {_fmt(g.get('start_s'), '.3f')} s, response {_fmt(g.get('response_s'), '.3f')} s"
        )
    if out_dir is not None:
        console.print(f"wrote {out_dir}/: summary.json, timeseries.parquet/.csv, throughput_rtt.png")


def _bad_input(msg: str) -> None:
    sys.stderr.write(msg.replace("\n", " ").strip() + "\n")
    raise typer.Exit(EXIT_BAD_INPUT)


@app.command("run")
def run_cmd(
    scenario: str = typer.Argument(..., metavar="SCENARIO.toml", help="Scenario file (TOML)."),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="Directory for the output files."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Replace the scenario's seed."),
    set_: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="Override a scenario key, e.g. duration=5s or flows[0].rtt=40ms."
    ),
    name: Optional[str] = typer.Option(None, "--name", help="Label of the run (default: the scenario's name)."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip throughput_rtt.png."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on success."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Run a scenario; write summary.json, timeseries.parquet, timeseries.csv and throughput_rtt.png to DIR."""
    try:
        from .api import run as api_run
        from .output import write_outputs
        from ._sim import ScenarioError

        for s in set_:
            if "=" not in s:
                _bad_input(f"--set {s}: expected KEY=VALUE")
        if seed is not None and not (0 <= seed < 2**64):
            _bad_input(f"--seed {seed}: out of range 0..2^64-1")
        sp = Path(scenario)
        if not sp.exists():
            _bad_input(f"{scenario}: no such file")
        if not sp.is_file():
            _bad_input(f"{scenario}: not a regular file")
        if out.exists() and not out.is_dir():
            _bad_input(f"--out {out}: exists and is not a directory")
        try:
            result = api_run(scenario, seed=seed, overrides=set_, name=name)
        except ScenarioError as e:
            _bad_input(str(e))
            return
        write_outputs(result, out, plot=not no_plot)
        if not quiet:
            print_summary(result.summary, out)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("aqmlab: interrupted\n")
        raise typer.Exit(130)
    except Exception as e:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            raise
        msg = str(e).replace("\n", " ").strip() or type(e).__name__
        sys.stderr.write(f"aqmlab: error: {type(e).__name__}: {msg} (run with --debug for a traceback)\n")
        raise typer.Exit(EXIT_FAILURE)


@app.command("version")
def version_cmd() -> None:
    """Print the aqmlab version."""
    from . import __version__

    print(__version__)


def main(prog_name: str = "aqmlab") -> None:
    app(prog_name=prog_name)


if __name__ == "__main__":
    main()
