"""Command line: ``aqmlab run SCENARIO.toml --out DIR [--seed N] [--set key=value ...]``,
``aqmlab suite list|show|run|report``, ``aqmlab qdisc|cc list|show`` and ``aqmlab validate``.

Exit codes: 0 success; 2 bad input (one line on stderr, nothing written); 1 anything else
(a short message; the traceback only with ``--debug``).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

# Arrow's default allocator keeps what a Parquet file's writing freed (30 MB on a 1000-flow
# run); the system allocator gives it back. Set before pyarrow loads (the commands import it
# lazily); suite workers inherit it.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

app = typer.Typer(
    add_completion=True,
    rich_markup_mode=None,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="aqmlab: deterministic packet-level simulator of AQM and TCP congestion control.",
)


def _print_version(value: bool) -> None:
    if value:
        from . import __version__
        from .output import source_commit

        commit = source_commit()
        print(f"aqmlab {__version__}" + (f" ({commit})" if commit else ""))
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """aqmlab: deterministic packet-level simulator of AQM and TCP congestion control."""


def _fmt(v: Any, spec: str = ".2f", none: str = "-") -> str:
    if v is None:
        return none
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def print_summary(summary: dict[str, Any], out_dir: Path | None = None, files: list[str] | None = None) -> None:
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
    by_dir = summary.get("jain_steady_by_direction")
    if by_dir:
        console.print("Jain fairness (steady): " + ", ".join(f"{d} {_fmt(v, '.4f')}" for d, v in by_dir.items()))
    else:
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
        names = files if files else sorted(p.name for p in out_dir.iterdir() if p.is_file() and not p.name.startswith("."))
        console.print(f"wrote {out_dir}/: {', '.join(names)}")


def _bad_input(msg: str) -> None:
    sys.stderr.write(msg.replace("\n", " ").strip() + "\n")
    raise typer.Exit(EXIT_BAD_INPUT)


def _read_scenario_arg(scenario: str) -> tuple[str | Path, str]:
    """The scenario source of a SCENARIO argument (``-``: TOML text from stdin) and the name
    to show in messages."""
    if scenario == "-":
        try:
            return sys.stdin.read(), "<stdin>"
        except UnicodeDecodeError as e:
            _bad_input(f"<stdin>: not UTF-8 text (byte {e.start})")
    sp = Path(scenario)
    if not sp.exists():
        _bad_input(f"{scenario}: no such file")
    if not sp.is_file():
        _bad_input(f"{scenario}: not a regular file")
    return sp, scenario


def _resolved_scenario(scenario: str, seed: Optional[int], set_: list[str]) -> tuple[str | Path, str, str]:
    """Checks a SCENARIO argument with its --seed and --set and returns (source, the name to
    show, the scenario TOML as it would run); bad input exits 2 with one line."""
    from .api import resolve
    from ._sim import ScenarioError

    for s in set_:
        if "=" not in s:
            _bad_input(f"--set {s}: expected KEY=VALUE")
    if seed is not None and not (0 <= seed < 2**64):
        _bad_input(f"--seed {seed}: out of range 0..2^64-1")
    source, shown = _read_scenario_arg(scenario)
    try:
        text = resolve(source, seed=seed, overrides=set_)
    except ScenarioError as e:
        _bad_input(str(e) if isinstance(source, Path) else f"{shown}: {e}")
    return source, shown, text


_MAX_EVENTS_HELP = "Stop (exit 2, nothing written) a run that would execute more events; overrides [limits] max_events (default 1e10)."
_MAX_MEMORY_HELP = "Refuse or stop (exit 2, nothing written) a run that would need more memory, e.g. 8GiB; overrides [limits] max_memory (default 4GiB)."


def _limit_overrides(max_events: Optional[str], max_memory: Optional[str]) -> list[str]:
    """``--max-events`` / ``--max-memory`` as ``--set limits.*`` overrides (the CLI's value
    wins over the scenario's); a malformed value exits 2 with one line naming the option."""
    out = []
    if max_events is not None:
        try:
            v = float(max_events)
        except ValueError:
            v = float("nan")
        if not (1 <= v < 1.8e19 and v == int(v)):
            _bad_input(f"--max-events {max_events[:40]}: expected a whole number such as 1000000000 or 1e10")
        out.append(f"limits.max_events={int(v)}")
    if max_memory is not None:
        if not re.fullmatch(r"\s*[0-9]+(\.[0-9]+)?\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\s*", max_memory, re.IGNORECASE):
            _bad_input(f"--max-memory {max_memory[:40]}: expected a size such as 8GiB, 512mb or 4000000000")
        out.append(f'limits.max_memory="{max_memory.strip()}"')
    return out


def _warn(summary_or_warnings: Any) -> None:
    """Prints a run's warnings (summary.json ``warnings``) on stderr."""
    ws = summary_or_warnings.get("warnings", []) if isinstance(summary_or_warnings, dict) else summary_or_warnings
    for w in ws:
        sys.stderr.write(f"aqmlab: warning: {w}\n")


def _check_out_dir(out: Path, text: str | None = None, **outputs: bool) -> None:
    """Creates ``out`` and checks, before any work is done, that it takes a file and that its
    filesystem has room for the run's files (estimated from the scenario ``text``)."""
    from .runner import OutputDirError, check_output_dir, estimate_run_bytes

    try:
        check_output_dir(out, estimate_run_bytes(text, **outputs) if text is not None else 0)
    except OutputDirError as e:
        _bad_input(str(e))


class _RunProgress:
    """A progress bar for one run on a terminal (stderr), shown only once the run has taken
    more than a second: quick runs print nothing extra."""

    DELAY = 1.0

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def update(self, fraction: float) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.monotonic() - self.start < self.DELAY or fraction >= 1.0:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("simulating"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("run", total=1.0)
        self.bar.update(self.task, completed=fraction)

    def __enter__(self) -> "_RunProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()


@app.command("run")
def run_cmd(
    scenario: str = typer.Argument(..., metavar="SCENARIO.toml", help="Scenario file (TOML); - reads it from stdin."),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="Directory for the output files."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Replace the scenario's seed."),
    set_: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="Override a scenario key, e.g. duration=5s, flows[0].rtt=40ms or flows[*].ecn=l4s."
    ),
    name: Optional[str] = typer.Option(None, "--name", help="Label of the run (default: the scenario's name)."),
    max_events: Optional[str] = typer.Option(None, "--max-events", metavar="N", help=_MAX_EVENTS_HELP),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", metavar="SIZE", help=_MAX_MEMORY_HELP),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip throughput_rtt.png."),
    flent: bool = typer.Option(True, "--flent/--no-flent", help="Write <name>.flent.gz, the run as a flent data file."),
    pcap: bool = typer.Option(
        False, "--pcap", help="Also write cli.pcap and srv.pcap: the packets at the client and the server side (open in Wireshark)."
    ),
    pcap_flows: list[str] = typer.Option(
        [], "--pcap-flows", metavar="NAME[,NAME...]", help="Capture only these flows/probes/workloads (implies --pcap; repeatable)."
    ),
    pcap_snaplen: int = typer.Option(128, "--pcap-snaplen", metavar="BYTES", help="Bytes kept of each frame (implies --pcap; default 128, as the studies' tcpdump -s 128)."),
    html: bool = typer.Option(True, "--html/--no-html", help="Write report.html (tables, interactive plots; opens from disk)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on success."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Run a scenario; write scenario.toml (as run), the series, the plot, <name>.flent.gz (flent's
    data file), report.html, manifest.json and summary.json to DIR."""
    _debug_panics(debug)
    try:
        import contextlib

        from .api import run as api_run
        from .output import SCENARIO, atomic_write_text, pcap_files, write_outputs
        from ._sim import ScenarioError

        flows = [f.strip() for item in pcap_flows for f in item.split(",") if f.strip()]
        capture = pcap or bool(flows) or pcap_snaplen != 128
        if not 1 <= pcap_snaplen <= 262144:
            _bad_input(f"--pcap-snaplen {pcap_snaplen}: expected 1..262144")
        source, _, text = _resolved_scenario(scenario, seed, set_ + _limit_overrides(max_events, max_memory))
        existed = out.exists()
        _check_out_dir(out, text, plot=not no_plot, html=html, flent=flent)
        try:
            with contextlib.ExitStack() as stack, _RunProgress(enabled=not quiet) as bar:
                paths = stack.enter_context(pcap_files(out)) if capture else None
                result = api_run(
                    text, name=name, pcap=paths, pcap_flows=flows, pcap_snaplen=pcap_snaplen, progress=bar.update
                )
        except ScenarioError as e:
            # A --pcap-flows name the scenario does not have, or a [limits] ceiling reached
            # while running: the with has removed the temporary captures; a directory made for
            # the run goes too.
            _remove_if_made(out, existed)
            _bad_input(str(e))
            return
        except BaseException:
            # Nothing is written for an interrupted run or one the engine failed (an internal
            # error, e.g. an invariant violated): the with has removed the captures' temporary
            # files; a directory made for the run goes too.
            _remove_if_made(out, existed)
            raise
        atomic_write_text(out / SCENARIO, text)
        if result.summary.get("name") is None and isinstance(source, Path):
            result.summary["name"] = result.name = source.stem
        write_outputs(result, out, plot=not no_plot, flent=flent, html=html, command=shlex.join(["aqmlab", *sys.argv[1:]]))
        _warn(result.summary)
        if not quiet:
            print_summary(result.summary, out)  # lists the directory: the writers' files and the captures
    except typer.Exit:
        raise
    except KeyboardInterrupt as e:
        sys.stderr.write(f"aqmlab: {_interrupted(e)}\n")
        raise typer.Exit(_interrupt_code(e))
    except Exception as e:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            raise
        sys.stderr.write(_unexpected_error_line(e))
        raise typer.Exit(EXIT_FAILURE)


def _debug_panics(debug: bool) -> None:
    """With ``--debug``, an engine panic also prints Rust's own report (its location; a
    backtrace with RUST_BACKTRACE) before the traceback: the extension's panic hook is silent
    unless ``AQMLAB_DEBUG`` is set (crates/aqmlab-py, ``quiet_panics``). Suite workers inherit it."""
    if debug:
        os.environ["AQMLAB_DEBUG"] = "1"


def _remove_if_made(out: Path, existed: bool) -> None:
    """Removes ``out`` if this command created it and it is still empty."""
    if not existed:
        try:
            out.rmdir()
        except OSError:
            pass


def _unexpected_error_line(e: Exception) -> str:
    """The one line an unexpected error prints (exit 1): an engine failure (``api.InternalError``,
    e.g. "internal error: invariant violated: ...") as its own message, anything else with its
    type."""
    msg = " ".join(str(e).split()) or type(e).__name__
    if type(e).__name__ == "InternalError":
        return f"aqmlab: {msg}\n"
    return f"aqmlab: error: {type(e).__name__}: {msg} (run with --debug for a traceback)\n"


@app.command("check")
def check_cmd(
    scenario: str = typer.Argument(..., metavar="SCENARIO.toml", help="Scenario file (TOML); - reads it from stdin."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Replace the scenario's seed."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a scenario key, as in 'run'."),
    print_: bool = typer.Option(False, "--print", help="Print the scenario as it would run (TOML)."),
    max_events: Optional[str] = typer.Option(None, "--max-events", metavar="N", help=_MAX_EVENTS_HELP),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", metavar="SIZE", help=_MAX_MEMORY_HELP),
) -> None:
    """Check a scenario without running it: exit 0 and one line if it would run, else exit 2
    with the error (the same one 'run' gives)."""
    _, shown, text = _resolved_scenario(scenario, seed, set_ + _limit_overrides(max_events, max_memory))
    import tomllib

    doc = tomllib.loads(text)
    if print_:
        sys.stdout.write(text)
    else:
        flows = sum(int(f.get("count", 1)) if isinstance(f.get("count", 1), int) else 1 for f in doc.get("flows", []))
        print(f"{shown}: ok ({flows} TCP flows, duration {doc.get('duration')}, stack {doc.get('stack', 'linux')})")


scenario_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="The scenario format: its JSON Schema (for editors).",
)
app.add_typer(scenario_app, name="scenario")


@scenario_app.command("schema")
def scenario_schema_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="FILE", help="Write the schema to FILE instead of stdout."),
) -> None:
    """Print the JSON Schema (draft-07) of the scenario TOML format, generated from the engine's
    scenario structs. Editors that read JSON Schema for TOML (Taplo, VS Code's Even Better TOML)
    then complete and check keys: put '#:schema ./aqmlab-scenario.schema.json' on a scenario's
    first line, or map scenarios/*.toml to it in .taplo.toml (README)."""
    from ._sim import scenario_schema

    text = scenario_schema()
    if out is None:
        sys.stdout.write(text)
        return
    from .output import atomic_write_text

    try:
        atomic_write_text(out, text)
    except OSError as e:
        _bad_input(f"--out {out}: cannot write it ({e.strerror})")


suite_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Suites: named matrices of scenarios (the studies' experiments). See docs/suites.md.",
)
app.add_typer(suite_app, name="suite")

from .params_cli import cc_app, qdisc_app  # noqa: E402

app.add_typer(qdisc_app, name="qdisc")
app.add_typer(cc_app, name="cc")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so that both stop the work
    the same way (workers stopped, temporary files removed); exit status 143 instead of 130."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _interrupted(e: BaseException) -> str:
    return "terminated" if isinstance(e, Terminated) else "interrupted"


def _interrupt_code(e: BaseException) -> int:
    return 128 + 15 if isinstance(e, Terminated) else 130


def _guard(debug: bool, fn) -> None:
    """Runs ``fn``; bad input (SuiteError, ScenarioError) -> exit 2 with one line."""
    from ._sim import ScenarioError
    from .output import SummaryFormatError
    from .runner import ExecutorUnavailable, OutputDirError
    from .suite import SuiteError

    _debug_panics(debug)
    try:
        fn()
    except typer.Exit:
        raise
    except (SuiteError, ScenarioError, ExecutorUnavailable, SummaryFormatError, OutputDirError) as e:
        _bad_input(f"aqmlab: {e}")
    except KeyboardInterrupt as e:
        sys.stderr.write(f"aqmlab: {_interrupted(e)} (finished runs are kept; run again to resume)\n")
        raise typer.Exit(_interrupt_code(e))
    except Exception as e:  # noqa: BLE001
        if debug:
            raise
        sys.stderr.write(_unexpected_error_line(e))
        raise typer.Exit(EXIT_FAILURE)


def _default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@suite_app.command("list")
def suite_list() -> None:
    """List the built-in suites: name, number of runs, title."""
    from rich.console import Console
    from rich.table import Table

    from .suite import builtin_suites, load_suite

    table = Table(title="Suites (aqmlab suite run NAME)", title_justify="left")
    table.add_column("name")
    table.add_column("runs", justify="right")
    table.add_column("axes")
    table.add_column("title")
    for name in builtin_suites():
        s = load_suite(name)
        n = len(s.cells()) * s.seeds
        table.add_row(name, str(n), " x ".join(f"{a.name}({len(a.values)})" for a in s.axes), s.title)
    Console(highlight=False, width=max(100, Console().width)).print(table)


@suite_app.command("show")
def suite_show(
    name: str = typer.Argument(..., metavar="NAME", help="Suite name (see 'aqmlab suite list') or a suite .toml file."),
    filter_: list[str] = typer.Option([], "--filter", metavar="AXIS=VALUE[,VALUE]", help="Keep only cells with these axis values."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a scenario key in every run."),
    scenario: bool = typer.Option(False, "--scenario", help="Also print the first run's scenario TOML."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Show a suite's axes and the cells a filter selects."""

    def go() -> None:
        from .output import SCENARIO
        from .suite import load_suite, parse_filters, parse_overrides, plan_runs

        s = load_suite(name)
        runs = plan_runs(s, Path("."), filters=parse_filters(filter_), seeds=1, overrides=parse_overrides(set_))
        print(f"{s.name}: {s.title}")
        for a in s.axes:
            print(f"  {a.name}: {', '.join(a.labels())}")
        print(f"{len(runs)} cells (x {s.seeds} seed{'s' if s.seeds != 1 else ''} by default):")
        for r in runs:
            print(f"  {r.cell.id}")
        if scenario and runs:
            print(f"\n# {runs[0].rel_dir}/{SCENARIO}\n{runs[0].text}", end="")

    _guard(debug, go)


@suite_app.command("run")
def suite_run(
    name: str = typer.Argument(..., metavar="NAME", help="Suite name (see 'aqmlab suite list') or a suite .toml file."),
    filter_: list[str] = typer.Option(
        [], "--filter", metavar="AXIS=VALUE[,VALUE]", help="Keep only cells with these axis values (repeatable)."
    ),
    jobs: int = typer.Option(_default_jobs(), "--jobs", "-j", min=1, help="Runs in parallel (worker processes)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="Seeds per cell: the scenario's seed + 0..K-1."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="Output directory (default: out/NAME)."),
    set_: list[str] = typer.Option(
        [], "--set", metavar="KEY=VALUE", help="Override a scenario key in every run, e.g. duration=5s (repeatable)."
    ),
    plots: Optional[bool] = typer.Option(
        None, "--plots/--no-plots", help="Write each run's throughput_rtt.png (default: on up to 200 runs, off above)."
    ),
    flent: bool = typer.Option(False, "--flent/--no-flent", help="Write each run's <name>.flent.gz (flent's data file)."),
    pcap: bool = typer.Option(False, "--pcap", help="Also write each run's cli.pcap and srv.pcap (all flows, snap length 128)."),
    html: bool = typer.Option(False, "--html/--no-html", help="Write each run's report.html (interactive plots; one plotly.min.js in DIR)."),
    executor: str = typer.Option("local", "--executor", help="local (a process pool) or dask."),
    dask: Optional[str] = typer.Option(None, "--dask", metavar="ADDRESS", help="Run on this Dask scheduler (implies --executor dask)."),
    dask_host: str = typer.Option(
        "127.0.0.1", "--dask-host", metavar="HOST",
        help="The interface the Dask cluster aqmlab starts (--executor dask) listens on (default: loopback only).",
    ),
    force: bool = typer.Option(False, "--force", help="Re-run runs that already have results."),
    max_events: Optional[str] = typer.Option(None, "--max-events", metavar="N", help=_MAX_EVENTS_HELP + " Per run."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", metavar="SIZE", help=_MAX_MEMORY_HELP + " Per run."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary line."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Run a suite's matrix (skipping finished runs) and write REPORT.md and results.csv."""
    set_ = set_ + _limit_overrides(max_events, max_memory)

    def go() -> None:
        from .runner import run_suite
        from .suite import SuiteError, load_suite, parse_filters, parse_overrides, suite_command

        if executor not in ("local", "dask"):
            raise SuiteError(f"--executor {executor}: expected local or dask")
        s = load_suite(name)
        filters = parse_filters(filter_)
        overrides = parse_overrides(set_)
        out_dir = out if out is not None else Path("out") / s.name
        if out_dir.exists() and not out_dir.is_dir():
            raise SuiteError(f"--out {out_dir}: exists and is not a directory")
        t0 = time.perf_counter()
        res = run_suite(
            s,
            out_dir,
            filters=filters,
            seeds=seeds,
            overrides=overrides,
            jobs=jobs,
            plots=plots,
            flent=flent,
            pcap=pcap,
            html=html,
            executor=executor,
            dask_address=dask,
            dask_host=dask_host,
            force=force,
            progress=not quiet,
            command=suite_command(name, filter_, seeds, set_),
            owns_process=True,  # with -j 1 the runs run here: malloc is tuned for them
        )
        if not quiet:
            redone = f", {len(res.damaged)} redone (damaged)" if res.damaged else ""
            print(
                f"{s.name}: {len(res.runs)} runs ({res.ran} run, {res.reused} reused{redone}, {len(res.failed)} failed) "
                f"in {time.perf_counter() - t0:.1f} s; wrote {out_dir}/REPORT.md, {out_dir}/index.html and {out_dir}/results.csv"
            )
        for run, err in res.failed[:10]:
            sys.stderr.write(f"aqmlab: {run.rel_dir}: {err}\n")
        if len(res.failed) > 10:
            sys.stderr.write(f"aqmlab: ... and {len(res.failed) - 10} more failed runs (see REPORT.md)\n")
        if res.failed:
            raise typer.Exit(EXIT_FAILURE)

    _guard(debug, go)


@suite_app.command("report")
def suite_report(
    name: str = typer.Argument(..., metavar="NAME", help="Suite name or a suite .toml file."),
    filter_: list[str] = typer.Option([], "--filter", metavar="AXIS=VALUE[,VALUE]", help="As given to 'suite run'."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="As given to 'suite run'."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="The run's output directory (default: out/NAME)."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="As given to 'suite run'."),
    plot_links: bool = typer.Option(True, "--plot-links/--no-plot-links", help="Keep the tables' Plot column."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Rewrite REPORT.md and results.csv from finished runs (nothing is run) and print the report."""

    def go() -> None:
        from . import report as rep
        from .output import REPORT, RESULTS
        from .runner import SuiteOutcome
        from .suite import load_suite, parse_filters, parse_overrides, plan_runs, suite_command

        s = load_suite(name)
        out_dir = out if out is not None else Path("out") / s.name
        runs = plan_runs(s, out_dir, filters=parse_filters(filter_), seeds=seeds, overrides=parse_overrides(set_))
        outcome = SuiteOutcome(s, out_dir, runs, 0, 0, [], 0.0, rep.load_records(runs))
        cmd = suite_command(name, filter_, seeds, set_)
        out_dir.mkdir(parents=True, exist_ok=True)
        rep.write_results_csv(outcome.records, s, out_dir / RESULTS)
        rep.write_report(outcome, out_dir / REPORT, command=cmd)
        sys.stdout.write(rep.report_markdown(outcome, cmd, plot_links_column=plot_links))

    _guard(debug, go)


@app.command("validate")
def validate_cmd(
    out: Path = typer.Option(Path("out/validate"), "--out", "-o", metavar="DIR", help="Directory of the suites' runs."),
    jobs: int = typer.Option(_default_jobs(), "--jobs", "-j", min=1, help="Runs in parallel (worker processes)."),
    report: Optional[Path] = typer.Option(None, "--report", metavar="FILE", help="Where to write VALIDATION.md (default: DIR/VALIDATION.md)."),
    filter_: list[str] = typer.Option([], "--filter", metavar="AXIS=VALUE[,VALUE]", help="Restrict the runs (axes of any validated suite)."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a scenario key in every run (for quick checks)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="Seeds per cell (default: 5, or the suite's own number when larger)."),
    only: list[str] = typer.Option([], "--only", metavar="KEY", help="Only this comparison or suite (repeatable)."),
    linux: bool = typer.Option(
        True, "--linux/--no-linux", help="Also rerun each suite with stack=linux (today's stack) into DIR/<suite>@linux and show it beside the study's profile."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the passes and runs that would be run (and how many are finished); run nothing."),
    plots: Optional[bool] = typer.Option(
        None, "--plots/--no-plots", help="Write each run's throughput_rtt.png (default: in suites of up to 200 runs)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Run (or reuse) the suites with published numbers, on each study's profile and on linux,
    and write VALIDATION.md; exits 0 whatever they show."""

    def go() -> None:
        from .suite import parse_filters, parse_overrides
        from .validate import plan_text, plan_validation, validate

        if dry_run:
            plan = plan_validation(
                out, filters=parse_filters(filter_), overrides=parse_overrides(set_), seeds=seeds, only=only, linux=linux
            )
            sys.stdout.write(plan_text(plan))
            return
        parts = ["aqmlab", "validate"]
        for f in filter_:
            parts += ["--filter", f]
        for s in set_:
            parts += ["--set", s]
        if seeds is not None:
            parts += ["--seeds", str(seeds)]
        for o in only:
            parts += ["--only", o]
        if not linux:
            parts += ["--no-linux"]
        path = validate(
            out,
            jobs=jobs,
            filters=parse_filters(filter_),
            overrides=parse_overrides(set_),
            seeds=seeds,
            plots=plots,
            only=only,
            linux=linux,
            progress=not quiet,
            report_path=report,
            command=shlex.join(parts),
        )
        if not quiet:
            print(f"wrote {path}")

    _guard(debug, go)


@app.command("plot")
def plot_cmd(
    run_dirs: list[Path] = typer.Argument(None, metavar="RUN_DIR...", help="Finished run directories (with summary.json)."),
    kind: str = typer.Option("tcp_delivery_with_rtt", "--kind", "-k", metavar="NAME", help="Plot kind (flent's names; --list)."),
    overlay: bool = typer.Option(False, "--overlay", help="Draw every run in one figure (each run a line style)."),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", metavar="FILE",
        help="Output PNG (default: RUN_DIR/<kind>.png per run; with --overlay, <kind>-overlay.png here). "
        "Several runs without --overlay: FILE's name gets -1, -2, ...",
    ),
    list_: bool = typer.Option(False, "--list", help="List the plot kinds and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of unexpected errors."),
) -> None:
    """Re-plot finished runs, or overlay several in one figure (flent's plot names)."""

    def go() -> None:
        from . import plot as _plot
        from .data import load

        if list_:
            for k in _plot.KINDS.values():
                print(f"{k.name:24s} {k.help}")
            return
        if not run_dirs:
            _bad_input("plot: give at least one RUN_DIR (or --list)")
        if kind not in _plot.KINDS:
            _bad_input(f"--kind {kind}: unknown (known: {', '.join(_plot.KINDS)})")
        results = []
        for d in run_dirs:
            try:
                results.append(load(d))
            except FileNotFoundError as e:
                _bad_input(str(e))
        if overlay or len(results) == 1 and out is not None:
            path = out if out is not None else (run_dirs[0] / f"{kind}.png" if len(results) == 1 else Path(f"{kind}-overlay.png"))
            labels = [str(d).rstrip("/") for d in run_dirs] if len(run_dirs) > 1 else None
            _plot.plot(results, path, kind, labels=labels)
            print(f"wrote {path}")
            return
        for i, (d, r) in enumerate(zip(run_dirs, results), start=1):
            path = d / f"{kind}.png" if out is None else out.with_name(f"{out.stem}-{i}{out.suffix or '.png'}")
            _plot.plot([r], path, kind)
            print(f"wrote {path}")

    _guard(debug, go)


@app.command("version")
def version_cmd() -> None:
    """Print the aqmlab version."""
    from . import __version__

    print(__version__)


def _command_path(prog_name: str, argv: list[str]) -> str:
    """The subcommand an argument list names (``aqmlab suite run``), for a parser error that
    carries no context (an option missing its value)."""
    import typer.main

    cmd: Any = typer.main.get_command(app)
    path = [prog_name]
    for tok in argv:
        sub = getattr(cmd, "commands", {}).get(tok) if not tok.startswith("-") else None
        if sub is None:
            break
        path.append(tok)
        cmd = sub
    return " ".join(path)


def main(prog_name: str = "aqmlab") -> None:
    """The console entry point: command-line errors (an unknown option, a bad ``--seed``)
    are one line on stderr with exit 2, not the parser's boxed help. SIGTERM stops a command
    as Ctrl-C does (exit 143)."""
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        rv = app(prog_name=prog_name, standalone_mode=False)
    except Exception as e:  # noqa: BLE001 - the parser's errors are matched by shape below
        kind = type(e).__name__
        if kind == "NoArgsIsHelpError":  # `aqmlab` or `aqmlab suite` alone: the help
            ctx = getattr(e, "ctx", None)
            if ctx is not None:  # plain help (rich_markup_mode=None) is not printed by the parser here
                sys.stdout.write(ctx.get_help() + "\n")
            sys.exit(EXIT_OK)
        if kind == "Abort":  # Ctrl-C or SIGTERM outside a command's own handler (click wraps it)
            cause = e.__cause__ or e.__context__
            sys.stderr.write(f"aqmlab: {_interrupted(cause) if cause else 'interrupted'}\n")
            sys.exit(_interrupt_code(cause) if cause else 130)
        if not (hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int)):
            raise
        ctx = getattr(e, "ctx", None)
        path = ctx.command_path if ctx is not None else _command_path(prog_name, sys.argv[1:])
        sub = path.split(" ", 1)[1] if " " in path else ""
        where = f"{sub}: " if sub else ""
        sys.stderr.write(f"aqmlab: {where}{' '.join(e.format_message().split())} (see '{path} --help')\n")
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:
        sys.stderr.write(f"aqmlab: {_interrupted(e)}\n")
        sys.exit(_interrupt_code(e))
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


if __name__ == "__main__":
    main()
