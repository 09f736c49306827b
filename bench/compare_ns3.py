"""aqmlab against ns-3 3.44 on the same dumbbells, side by side:
``python bench/compare_ns3.py [--only a,b] [--skip e] [--repeat N] [--json FILE]``.

Needs the optional benchmark dependencies (``make bench-deps``: the PyPI ``ns3`` wheel, whose
headers and shared libraries this script compiles ``bench/ns3/dumbbell.cc`` against with g++,
once, into ``out/bench/``). ``make test`` never needs them.

Each scenario is run by both tools, alternating (aqmlab first on even repeats, ns-3 first on
odd ones, so that a burst of load from other processes does not always hit the same tool).
Per tool and scenario it prints the minimum over the repeats of

- the whole process's wall time (``aqmlab run ... --no-plot --no-html --no-flent -q``: Python
  start-up, scenario check, engine, summary and series written; the ns-3 binary: loading its
  shared libraries, building the topology, simulating, printing) and its CPU time (user + sys,
  from ``wait4``), the steadier figure on a shared machine;
- the simulation only: aqmlab's ``summary.json`` ``wall_seconds`` (the engine's event loop,
  its summary included), ns-3's ``Simulator::Run()`` timed inside the binary; and the CPU time
  of the same (ns-3: ``CLOCK_PROCESS_CPUTIME_ID`` around ``Run()``; aqmlab, whose summary has
  wall time only: ``bench/engine_cpu.py``, ``time.process_time()`` around the engine call of
  ``aqmlab.run()`` in a second process, so that the process figures above are those of the
  plain command). That engine call also parses the scenario, builds the network, writes the
  summary and hands the series back, which ns-3's ``Run()`` leaves out; the **event loop CPU**
  column is the like-for-like quantity: aqmlab's CPU from the engine's first progress tick
  (network built, no event run) to its last (every event run, no summary yet), in a third
  process (``bench/engine_cpu.py --loop``; it still includes aqmlab's series sampling, which
  ns-3's dumbbell does not do); for ns-3 it is ``Run()``'s CPU again;
- the bottleneck's packets (aqmlab ``bottleneck.packets``, ns-3 the forward queue disc's
  ``nTotalSentPackets``) per simulation wall-second, and events per bottleneck packet;
- goodput (bytes delivered x 8 over the time from the flow's start to the end; aqmlab's
  ``flows[i].goodput_mbps``) summed over the flows, the flows' minimum and maximum, and Jain's
  index of the flows' goodputs, so that one sees the two tools did the same work.

The ratio line is ns-3's time over aqmlab's. Scenario (e) takes ns-3 minutes: ``--skip e``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "ns3" / "dumbbell.cc"
BUILD_DIR = ROOT / "out" / "bench"
NS3_LIBS = ["applications", "internet", "traffic-control", "point-to-point", "network", "core"]


@dataclass(frozen=True)
class Scenario:
    key: str
    rate_mbps: float
    rtt_ms: float
    flows: int
    qdisc: str  # fq_codel | pfifo | codel
    limit: int  # packets; 0 = the discipline's default (fq_codel 10240, codel 1000)
    duration_s: float
    buf_bytes: int  # ns-3 socket buffers (send and receive); large enough never to limit cwnd

    def describe(self) -> str:
        rate = f"{self.rate_mbps / 1000:g} Gbit/s" if self.rate_mbps >= 1000 else f"{self.rate_mbps:g} Mbit/s"
        q = f"pfifo {self.limit}" if self.qdisc == "pfifo" else self.qdisc
        return f"({self.key}) {rate}, {self.rtt_ms:g} ms, {self.flows} CUBIC, {q}, {self.duration_s:g} s"

    def aqmlab_qdisc(self) -> str:
        if self.qdisc == "pfifo":
            return f"pfifo limit {self.limit}"
        return self.qdisc if not self.limit else f"{self.qdisc} limit {self.limit}"

    def toml(self) -> str:
        return (
            f'name = "ns3cmp-{self.key}"\nduration = "{self.duration_s:g}s"\nseed = 1\n\n'
            f'[bottleneck]\nrate = "{self.rate_mbps:g}Mbit"\nqdisc = "{self.aqmlab_qdisc()}"\n\n'
            f'[[flows]]\ncc = "cubic"\nrtt = "{self.rtt_ms:g}ms"\ncount = {self.flows}\n'
        )


MiB = 1 << 20
SCENARIOS = {
    s.key: s
    for s in [
        Scenario("a", 50, 20, 2, "fq_codel", 0, 60, 4 * MiB),
        Scenario("b", 50, 20, 2, "pfifo", 1000, 60, 4 * MiB),
        Scenario("c", 1000, 10, 10, "fq_codel", 0, 10, 4 * MiB),
        Scenario("d", 10, 80, 2, "codel", 0, 60, 4 * MiB),
        # 1000 flows share 1 Gbit/s: about 1 Mbit/s each; 256 KiB is far above any flow's window
        # and keeps ns-3's BulkSend send buffers (filled up front) at 256 MB in all.
        Scenario("e", 1000, 20, 1000, "fq_codel", 0, 10, 256 * 1024),
    ]
}


def ns3_root() -> Path:
    """The ns3 wheel's data directory (``site-packages/ns3`` with include/ and lib64/)."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("ns3")
    except PackageNotFoundError:
        sys.exit("compare_ns3: the ns3 wheel is not installed in this Python: run `make bench-deps` (pip install 'ns3==3.44.post0')")
    root = Path(dist.locate_file("ns3"))
    if not (root / "include" / "ns3" / "core-module.h").exists():
        sys.exit(f"compare_ns3: {root} has no include/ns3/core-module.h: not the ns3 3.44 wheel?")
    return root


def build_ns3(root: Path) -> Path:
    """Compiles the dumbbell against the wheel (once; again when the source or wheel changes)."""
    exe = BUILD_DIR / "ns3-dumbbell"
    lib = root / "lib64"
    if exe.exists() and exe.stat().st_mtime > max(SOURCE.stat().st_mtime, (lib / "libns3.44-core.so").stat().st_mtime):
        return exe
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        sys.exit("compare_ns3: no C++ compiler (g++) to build the ns-3 dumbbell")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    # The wheel's libraries are ns-3's release profile with logging and asserts compiled in
    # (its CMake targets export these definitions); the headers must see the same ones.
    cmd = [
        cxx, "-O2", "-std=c++20", "-DNS3_BUILD_PROFILE_RELEASE", "-DNS3_LOG_ENABLE", "-DNS3_ASSERT_ENABLE",
        f"-I{root / 'include'}", str(SOURCE), "-o", str(exe), f"-L{lib}", f"-Wl,-rpath,{lib}",
        *[f"-lns3.44-{m}" for m in NS3_LIBS],
    ]  # fmt: skip
    print(f"compare_ns3: building {exe.relative_to(ROOT)} (g++, about a minute)", file=sys.stderr)
    if subprocess.run(cmd).returncode != 0:
        sys.exit(f"compare_ns3: building the ns-3 dumbbell failed (command: {' '.join(cmd)})")
    return exe


def timed(cmd: list[str], cwd: Path | None = None, timeout: float | None = None) -> tuple[float, float, str]:
    """Runs cmd; returns (wall s, CPU s of the process (user + sys), stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=errf, cwd=cwd)
        try:
            _, status, ru = _wait4(p, timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errf.seek(0)
            err = errf.read().decode(errors="replace")
            raise RuntimeError(f"{cmd[0]} exited {code}: {err.strip()[-500:]}")
        out.seek(0)
        return wall, ru.ru_utime + ru.ru_stime, out.read().decode()


def _wait4(p: subprocess.Popen, timeout: float | None):
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return pid, status, ru
        if deadline is not None and time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(p.args, timeout)
        time.sleep(0.005)


def aqmlab_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "aqmlab"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "aqmlab"]


def run_aqmlab(s: Scenario, work: Path) -> dict:
    scen = work / f"{s.key}.toml"
    scen.write_text(s.toml())
    out = work / f"aqmlab-{s.key}"
    shutil.rmtree(out, ignore_errors=True)
    wall, cpu, _ = timed([*aqmlab_cmd(), "run", str(scen), "--out", str(out), "--no-plot", "--no-html", "--no-flent", "-q"])
    summary = json.loads((out / "summary.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    engine_cpu = [sys.executable, str(ROOT / "bench" / "engine_cpu.py")]
    _, _, engine = timed([*engine_cpu, str(scen)])
    _, _, loop = timed([*engine_cpu, "--loop", str(scen)])
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "sim_wall_s": summary["wall_seconds"],
        "sim_cpu_s": float(engine.split()[0]),
        "loop_cpu_s": float(loop.split()[0]),
        "events": summary["events"],
        "bottleneck_packets": summary["bottleneck"]["packets"],
        "goodput_mbps": [f["goodput_mbps"] for f in summary["flows"]],
    }


def run_ns3(s: Scenario, exe: Path, timeout: float | None) -> dict:
    cmd = [
        str(exe), f"--rate={s.rate_mbps:g}", f"--rtt={s.rtt_ms:g}", f"--flows={s.flows}", f"--qdisc={s.qdisc}",
        f"--limit={s.limit}", f"--duration={s.duration_s:g}", f"--buf={s.buf_bytes}", "--seed=1",
    ]  # fmt: skip
    wall, cpu, out = timed(cmd, timeout=timeout)
    r = json.loads(out.strip().splitlines()[-1])
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "sim_wall_s": r["sim_wall_s"],
        "sim_cpu_s": r["sim_cpu_s"],
        "loop_cpu_s": r["sim_cpu_s"],  # Simulator::Run() is the event loop
        "events": r["events"],
        "bottleneck_packets": r["bottleneck_packets"],
        "goodput_mbps": r["goodput_mbps"],
    }


def jain(xs: list[float]) -> float:
    s, q = sum(xs), sum(x * x for x in xs)
    return s * s / (len(xs) * q) if q > 0 else float("nan")


def best(runs: list[dict]) -> dict:
    """Minimum of each time over the repeats; counts and goodputs of the first run (both tools
    are deterministic for a seed, so every repeat does the same work)."""
    b = dict(runs[0])
    for k in ("wall_s", "cpu_s", "sim_wall_s", "sim_cpu_s", "loop_cpu_s"):
        values = [r[k] for r in runs if k in r]
        if values:
            b[k] = min(values)
    return b


def rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k"


def table(s: Scenario, res: dict[str, dict]) -> str:
    lines = [
        f"### {s.describe()}",
        "",
        "| tool | process wall s | process CPU s | simulation wall s | simulation CPU s | event loop CPU s | bottleneck pkts | pkts per sim wall-s | pkts per sim CPU-s | pkts per loop CPU-s | events/pkt | goodput Mbit/s (sum) | per flow min..max | Jain |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tool in ("aqmlab", "ns-3"):
        r = res.get(tool)
        if r is None:
            lines.append(f"| {tool} |" + " - |" * 13)
            continue
        if "error" in r:
            lines.append(f"| {tool} | {r['error']} |" + "  |" * 12)
            continue
        g = r["goodput_mbps"]
        pkts = r["bottleneck_packets"]

        def cpu(key: str) -> tuple[str, str]:  # (seconds, packets per second); old --json files lack some
            x = r.get(key)
            return ("-", "-") if x is None else (f"{x:.3f}", rate(pkts / x) if x > 0 else "-")

        sim_cpu, sim_rate = cpu("sim_cpu_s")
        loop_cpu, loop_rate = cpu("loop_cpu_s")
        lines.append(
            f"| {tool} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['sim_wall_s']:.3f} | {sim_cpu} | {loop_cpu} | {pkts:,} | "
            f"{rate(pkts / r['sim_wall_s'])} | {sim_rate} | {loop_rate} | {r['events'] / max(pkts, 1):.1f} | {sum(g):.2f} | "
            f"{min(g):.2f}..{max(g):.2f} | {jain(g):.4f} |"
        )
    a, n = res.get("aqmlab"), res.get("ns-3")
    if a and n and "error" not in a and "error" not in n:
        cpu = "".join(
            f"{what} {n[k] / a[k]:.0f}x, "
            for k, what in (("sim_cpu_s", "simulation CPU"), ("loop_cpu_s", "event loop CPU"))
            if a.get(k) and n.get(k)
        )
        lines += [
            "",
            f"ns-3 / aqmlab: simulation wall {n['sim_wall_s'] / a['sim_wall_s']:.0f}x, {cpu}"
            f"process wall {n['wall_s'] / a['wall_s']:.1f}x, process CPU {n['cpu_s'] / a['cpu_s']:.1f}x",
        ]
    return "\n".join(lines) + "\n"


def print_saved(files: list[Path]) -> int:
    pooled: dict[str, dict[str, list[dict]]] = {}
    for f in files:
        try:
            saved = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            print(f"compare_ns3: --from-json {f}: {e}", file=sys.stderr)
            return 2
        for k, entry in saved.items():
            for tool, runs in entry.get("runs", {}).items():
                if tool == "ns-3":  # files from before the event loop column: Run() is the loop
                    runs = [{"loop_cpu_s": r["sim_cpu_s"], **r} if "sim_cpu_s" in r else r for r in runs]
                pooled.setdefault(k, {}).setdefault(tool, []).extend(runs)
    for k in SCENARIOS:
        if k in pooled:
            print(table(SCENARIOS[k], {t: best(r) for t, r in pooled[k].items() if r}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(SCENARIOS), help="scenarios to run, e.g. a,b (default: all, a..e)")
    ap.add_argument("--skip", default="", help="scenarios to leave out, e.g. e (ns-3 takes minutes on it)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and scenario; the minimum is reported (default 3)")
    ap.add_argument("--tools", default="aqmlab,ns-3", help="aqmlab, ns-3 or both (default)")
    ap.add_argument("--ns3-timeout", type=float, default=3600, help="seconds before an ns-3 run is abandoned (default 3600)")
    ap.add_argument("--json", type=Path, help="also write every run's measurements here")
    ap.add_argument(
        "--from-json", type=Path, nargs="+", metavar="FILE",
        help="run nothing: print the tables of earlier --json files (runs of one scenario and tool pooled across the files)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.from_json:
        return print_saved(args.from_json)

    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    skip = {k.strip() for k in args.skip.split(",") if k.strip()}
    for k in [*keys, *skip]:
        if k not in SCENARIOS:
            print(f"compare_ns3: scenario {k!r}: expected one of {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
    keys = [k for k in keys if k not in skip]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if not tools or any(t not in ("aqmlab", "ns-3") for t in tools):
        print(f"compare_ns3: --tools {args.tools}: expected aqmlab, ns-3 or both", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print("compare_ns3: --repeat: expected at least 1", file=sys.stderr)
        return 2

    exe = build_ns3(ns3_root()) if "ns-3" in tools else None
    print(f"# aqmlab vs ns-3 3.44 (min of {args.repeat} alternating runs; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start)\n")
    everything: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="aqmlab-ns3cmp-") as tmp:
        work = Path(tmp)
        for k in keys:
            s = SCENARIOS[k]
            runs: dict[str, list[dict]] = {t: [] for t in tools}
            errors: dict[str, str] = {}
            for rep in range(args.repeat):
                order = tools if rep % 2 == 0 else tools[::-1]
                for tool in order:
                    if tool in errors:
                        continue
                    try:
                        r = run_aqmlab(s, work) if tool == "aqmlab" else run_ns3(s, exe, args.ns3_timeout)
                    except subprocess.TimeoutExpired:
                        errors[tool] = f"over {args.ns3_timeout:g} s, abandoned"
                        continue
                    except (RuntimeError, OSError, KeyError, ValueError) as e:
                        errors[tool] = f"failed: {e}"
                        continue
                    runs[tool].append(r)
                    print(f"  {k} {tool} run {rep + 1}: process {r['wall_s']:.2f} s, simulation {r['sim_wall_s']:.3f} s", file=sys.stderr)
            res = {t: ({"error": errors[t]} if t in errors else best(runs[t])) for t in tools}
            everything[k] = {"scenario": s.describe(), "runs": runs, "errors": errors}
            print(table(s, res), flush=True)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
