#!/usr/bin/env python3
"""Runs tools/ns2/jk.tcl (the Järvinen & Kojo scenario on ns-2.35) and measures what aqmlab's
`jarvinen-kojo` suite measures, with aqmlab's definitions (docs/metrics.md):

- sojourn: per packet dequeued from the bottleneck queue, dequeue time - enqueue time (ns-2's
  "-" minus "+" trace events of the same packet uid; dropped packets excluded). Every packet
  counts, the 40-byte SYNs included. Percentiles are nearest-rank over the run (exact values,
  where aqmlab reports its histogram bucket's middle, within 0.4 %).
- spikes: the queue's backlog in bytes (not counting the packet on the wire: ns-2 takes a
  packet out of the queue at "-") after every enqueue ("+"), dequeue ("-") and drop ("d");
  for θ = 60 ms and 100 ms, the longest and the total time with backlog > θ x 2 Mbit/s / 8
  (15000 and 25000 bytes), an interval still open at the end closed at `duration`.
- response time per group: from the group's start (its flows' SYNs) to the time the last of
  its senders had its last byte acknowledged (ns-2's `done` callback); None if a flow did
  not finish within `duration`. Jain's index of the two groups' response times.

Stdlib only (no aqmlab import): the fixtures must be reproducible from ns-2 alone.

  python3 tools/ns2/jk.py run --aqm hred_wq0.02 --n 2 --seed 1          # one case -> JSON
  python3 tools/ns2/jk.py record --out tests/golden/ns2/jk_runs.csv ...  # a sweep -> CSV
  python3 tools/ns2/jk.py trace --aqm droptail --n 2 --seed 1 --out DIR  # per-packet traces
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "jk.tcl"

RATE_BPS = 2_000_000
SPIKE_MS = (60, 100)
#: The AQMs jk.tcl knows, and the ones Debian's stock ns-2.35 can run.
AQMS = ("droptail", "hred_wq0.02", "hred_wq0.04", "codel", "sfq_codel", "pie", "pie_update60ms", "pie_thresh5pkts",
        "pie2013r", "pie2013r_update60ms", "pie2013r_thresh5pkts")
STOCK_AQMS = ("droptail", "hred_wq0.02", "hred_wq0.04")
LOADS = (1, 2, 4, 6)
#: Rest-of-path one-way delay (ms) -> the suite's `path` label.
PATHS = {11: "11ms", 101: "101ms"}

#: Column order of the fixture CSV (tools/ns2/README.md documents each).
COLUMNS = (
    "aqm", "load", "n", "path", "seed", "duration_s", "ns", "g2start_s",
    "packets", "drops",
    "sojourn_p50", "sojourn_p95", "sojourn_p99", "sojourn_max", "sojourn_mean",
    "spike60ms_longest_s", "spike60ms_total_s", "spike100ms_longest_s", "spike100ms_total_s", "peak_ms",
    "response1_s", "response2_s", "response_jain",
)


def nearest_rank(sorted_vals: list[float], p: float) -> float:
    """The nearest-rank p-th percentile (0 < p <= 100) of an ascending list."""
    k = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[k - 1]


def queue_metrics(qtrace: Path, duration: float) -> dict:
    """Sojourn statistics and spike durations from an ns-2 queue trace of one link."""
    enq: dict[int, float] = {}
    soj: list[float] = []
    drops = 0
    backlog = 0
    peak = 0
    thr = {ms: ms / 1000.0 * RATE_BPS / 8 for ms in SPIKE_MS}
    since: dict[int, float | None] = {ms: None for ms in SPIKE_MS}
    longest = {ms: 0.0 for ms in SPIKE_MS}
    total = {ms: 0.0 for ms in SPIKE_MS}
    with open(qtrace) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 12:
                continue
            ev, t, size, uid = parts[0], float(parts[1]), int(parts[5]), int(parts[11])
            if ev == "+":
                enq[uid] = t
                backlog += size
            elif ev == "-":
                soj.append((t - enq.pop(uid)) * 1000.0)
                backlog -= size
            elif ev == "d":
                drops += 1
                enq.pop(uid, None)
                backlog -= size
            else:
                continue
            peak = max(peak, backlog)
            for ms in SPIKE_MS:
                above = backlog > thr[ms]
                if above and since[ms] is None:
                    since[ms] = t
                elif not above and since[ms] is not None:
                    d = t - since[ms]
                    longest[ms] = max(longest[ms], d)
                    total[ms] += d
                    since[ms] = None
    for ms in SPIKE_MS:
        if since[ms] is not None:
            d = max(0.0, duration - since[ms])
            longest[ms] = max(longest[ms], d)
            total[ms] += d
    soj.sort()
    m: dict = {"packets": len(soj), "drops": drops}
    if soj:
        for p in (50, 95, 99):
            m[f"sojourn_p{p}"] = nearest_rank(soj, p)
        m["sojourn_max"] = soj[-1]
        m["sojourn_mean"] = sum(soj) / len(soj)
    for ms in SPIKE_MS:
        m[f"spike{ms}ms_longest_s"] = longest[ms]
        m[f"spike{ms}ms_total_s"] = total[ms]
    m["peak_ms"] = peak * 8 / RATE_BPS * 1000.0
    return m


def flow_metrics(flows: Path) -> dict:
    """Group response times (and their Jain's index) from jk.tcl's flows file."""
    meta: dict[str, str] = {}
    groups: dict[int, list[tuple[float, float]]] = {}
    with open(flows) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "meta":
                for k, v in zip(parts[1::2], parts[2::2]):
                    meta[k] = v
            elif parts[0] == "flow":
                g, start, done = int(parts[1]), float(parts[4]), float(parts[5])
                groups.setdefault(g, []).append((start, done))
    m: dict = {"g2start_s": float(meta["g2start"])}
    resp = []
    for g in (1, 2):
        fl = groups.get(g, [])
        r = None if not fl or any(d < 0 for _, d in fl) else max(d for _, d in fl) - min(s for s, _ in fl)
        m[f"response{g}_s"] = r
        resp.append(r)
    m["response_jain"] = (
        sum(resp) ** 2 / (len(resp) * sum(x * x for x in resp)) if all(r is not None for r in resp) else None
    )
    return m


def ns_binary(aqm: str, ns: str | None = None) -> str:
    """The ns binary for an AQM: `ns` if given; else $AQMLAB_NS2_PIE2013R for the pie2013r
    variants, $AQMLAB_NS2_PATCHED for the other AQMs only a patched ns-2 has, else `ns` from
    PATH."""
    if ns:
        return ns
    if aqm.startswith("pie2013r") and os.environ.get("AQMLAB_NS2_PIE2013R"):
        return os.environ["AQMLAB_NS2_PIE2013R"]
    if aqm not in STOCK_AQMS and not aqm.startswith("pie2013r") and os.environ.get("AQMLAB_NS2_PATCHED"):
        return os.environ["AQMLAB_NS2_PATCHED"]
    found = shutil.which("ns")
    if not found:
        raise FileNotFoundError("ns-2 not found: install Debian's ns2 package (make test-tools)")
    return found


def run_case(aqm: str, n: int, seed: int, duration: float = 30.0, rest_ms: int = 11, *,
             ns: str | None = None, keep: Path | None = None, cwnd: bool = False,
             g2start: float | None = None, red: bool = False) -> dict:
    """Runs one case and returns its fixture row (a dict keyed by COLUMNS).

    `keep`: a directory to keep the raw outputs in (queue.tr, flows.txt, cwnd.tr, and with
    `red` for the RED cases red.tr, ns-2 RED's own trace of ave_, prob1_ and curq_)."""
    binary = ns_binary(aqm, ns)
    with tempfile.TemporaryDirectory(prefix="jk-ns2-") as tmp:
        d = Path(keep) if keep else Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        args = [binary, str(SCRIPT), f"aqm={aqm}", f"n={n}", f"seed={seed}", f"duration={duration:g}",
                f"rest={rest_ms}", f"qtrace={d / 'queue.tr'}", f"flows={d / 'flows.txt'}"]
        if cwnd:
            args.append(f"cwnd={d / 'cwnd.tr'}")
        if red and aqm.startswith("hred"):
            args.append(f"redtrace={d / 'red.tr'}")
        if g2start is not None:
            args.append(f"g2start={g2start!r}")
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        stock = shutil.which("ns")
        row = {"aqm": aqm, "load": f"{n}+{n}", "n": n, "path": PATHS.get(rest_ms, f"{rest_ms}ms"),
               "seed": seed, "duration_s": duration,
               "ns": "debian-2.35" if stock and os.path.realpath(binary) == os.path.realpath(stock)
               else "patched-2.35-pie2013r" if aqm.startswith("pie2013r") else "patched-2.35"}
        row.update(flow_metrics(d / "flows.txt"))
        row.update(queue_metrics(d / "queue.tr", duration))
    return row


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _run_tuple(t):
    aqm, n, seed, duration, rest, ns = t
    return run_case(aqm, n, seed, duration, rest, ns=ns)


def record(out: Path, aqms, loads, seeds, duration: float, rests, jobs: int, ns_patched: str | None) -> None:
    cases = []
    for rest in rests:
        for aqm in aqms:
            ns = ns_patched if (aqm not in STOCK_AQMS and ns_patched) else None
            for n in loads:
                for s in seeds:
                    cases.append((aqm, n, s, duration, rest, ns))
    out.parent.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        rows = list(ex.map(_run_tuple, cases, chunksize=4))
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([_fmt(r.get(c)) for c in COLUMNS])
    print(f"{out}: {len(rows)} runs", file=sys.stderr)


def trace(out: Path, aqm: str, n: int, seed: int, duration: float, rest: int, ns: str | None) -> None:
    """Compact per-packet traces: queue.csv (t, event, uid, flow, seq, size, backlog bytes,
    sojourn ms on dequeue), cwnd.csv (t, cwnd of group 1's first flow) and for HRED red.csv
    (t, var, value: ns-2 RED's `ave_`, `prob1_` and `curq_` as REDQueue::trace writes them,
    one row per change, 6 significant digits)."""
    with tempfile.TemporaryDirectory(prefix="jk-trace-") as tmp:
        row = run_case(aqm, n, seed, duration, rest, ns=ns, keep=Path(tmp), cwnd=True, red=True)
        if (Path(tmp) / "red.tr").exists():
            out.mkdir(parents=True, exist_ok=True)
            names = {"a": "ave", "p": "prob1", "Q": "curq"}
            with open(Path(tmp) / "red.tr") as f, \
                    open(out / f"{aqm}_{n}+{n}_s{seed}_red.csv", "w", newline="") as g:
                w = csv.writer(g)
                w.writerow(("t_s", "var", "value"))
                for line in f:
                    p = line.split()
                    if len(p) == 3 and p[0] in names:
                        w.writerow((p[1], names[p[0]], p[2]))
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{aqm}_{n}+{n}_s{seed}"
        enq: dict[int, float] = {}
        backlog = 0
        with open(Path(tmp) / "queue.tr") as f, open(out / f"{stem}_queue.csv", "w", newline="") as g:
            w = csv.writer(g)
            w.writerow(("t_s", "event", "uid", "fid", "seq", "size", "backlog_bytes", "sojourn_ms"))
            for line in f:
                p = line.split()
                if len(p) < 12 or p[0] not in "+-d":
                    continue
                ev, t, size, fid, seq, uid = p[0], float(p[1]), int(p[5]), int(p[7]), int(p[10]), int(p[11])
                soj = ""
                if ev == "+":
                    enq[uid] = t
                    backlog += size
                else:
                    t0 = enq.pop(uid, t)
                    backlog -= size
                    if ev == "-":
                        soj = f"{(t - t0) * 1000.0:.6f}"
                w.writerow((f"{t:.6f}", ev, uid, fid, seq, size, backlog, soj))
        with open(Path(tmp) / "cwnd.tr") as f, open(out / f"{stem}_cwnd.csv", "w", newline="") as g:
            w = csv.writer(g)
            w.writerow(("t_s", "cwnd_pkts"))
            for line in f:
                p = line.split()
                if len(p) >= 7 and p[5] == "cwnd_":
                    w.writerow((p[0], p[6]))
        with open(out / f"{stem}_summary.json", "w") as g:
            json.dump(row, g, indent=1, sort_keys=True)
            g.write("\n")
    print(f"{out}/{stem}_*.csv", file=sys.stderr)


#: Metrics summarised per cell (median and quartiles over the seeds).
SUMMARY_METRICS = COLUMNS[COLUMNS.index("packets"):]


def _read_typed_csv(path: Path, ints: tuple[str, ...]) -> list[dict]:
    """A fixture CSV as dicts: text columns kept, `ints` as int, the rest float (empty -> None)."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row: dict = {}
            for k, v in r.items():
                if k in ("aqm", "load", "path", "ns"):
                    row[k] = v
                elif v == "":
                    row[k] = None
                elif k in ints:
                    row[k] = int(v)
                else:
                    row[k] = float(v)
            out.append(row)
    return out


def read_csv(path: Path) -> list[dict]:
    """A per-seed fixture CSV as dicts with numbers parsed (empty cells -> None)."""
    return _read_typed_csv(path, ("n", "seed", "packets", "drops"))


def quartiles(vals: list[float]) -> tuple[float, float, float]:
    """(Q1, median, Q3) by linear interpolation between order statistics (numpy's default,
    statistics.quantiles(method="inclusive"))."""
    v = sorted(vals)
    if len(v) == 1:
        return v[0], v[0], v[0]
    import statistics
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[1], q[2]


def summarize(rows: list[dict]) -> list[dict]:
    """Per (path, aqm, load): seeds, unfinished groups, and Q1/median/Q3 of every metric."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["path"], r["aqm"], r["n"]), []).append(r)
    out = []
    for (path, aqm, n), rs in cells.items():
        s = {"aqm": aqm, "load": f"{n}+{n}", "n": n, "path": path, "seeds": len(rs), "ns": rs[0]["ns"],
             "unfinished": sum(1 for r in rs if r["response1_s"] is None or r["response2_s"] is None)}
        for m in SUMMARY_METRICS:
            vals = [r[m] for r in rs if r.get(m) is not None]
            q = quartiles(vals) if vals else (None, None, None)
            s[f"{m}_q1"], s[f"{m}_median"], s[f"{m}_q3"] = q
        out.append(s)
    return out


def write_csv(path: Path, rows: list[dict], columns) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow([_fmt(r.get(c)) for c in columns])


def read_csv_summary(path: Path) -> list[dict]:
    """A summary fixture CSV as dicts with numbers parsed (empty cells -> None)."""
    return _read_typed_csv(path, ("n", "seeds", "unfinished"))


def summary_columns() -> list[str]:
    cols = ["aqm", "load", "n", "path", "seeds", "ns", "unfinished"]
    for m in SUMMARY_METRICS:
        cols += [f"{m}_q1", f"{m}_median", f"{m}_q3"]
    return cols


def table(summary: list[dict], metric: str = "sojourn_p95", path: str = "11ms", scale: float = 0.001) -> str:
    """A Table II-like text table: median (over seeds) of `metric` per AQM and load, then the
    AQMs ranked per load (lowest first)."""
    cells = {(s["aqm"], s["n"]): s for s in summary if s["path"] == path}
    aqms = [a for a in AQMS if any(k[0] == a for k in cells)]
    loads = sorted({k[1] for k in cells})
    lines = [f"median {metric} x {scale:g} ({path}); [Q1 Q3]",
             "aqm".ljust(22) + "".join(f"{n}+{n}".rjust(22) for n in loads)]
    for a in aqms:
        row = a.ljust(22)
        for n in loads:
            c = cells.get((a, n))
            if c is None or c.get(f"{metric}_median") is None:
                row += "-".rjust(22)
            else:
                row += (f"{c[f'{metric}_median'] * scale:.3f} [{c[f'{metric}_q1'] * scale:.3f} "
                        f"{c[f'{metric}_q3'] * scale:.3f}]").rjust(22)
        lines.append(row)
    for n in loads:
        ranked = sorted((cells[(a, n)][f"{metric}_median"], a) for a in aqms
                        if (a, n) in cells and cells[(a, n)].get(f"{metric}_median") is not None)
        lines.append(f"rank {n}+{n}: " + " < ".join(a for _, a in ranked))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--duration", type=float, default=30.0)
    common.add_argument("--ns", help="ns binary (default: $AQMLAB_NS2_PATCHED for CoDel/sfqCoDel/PIE, else ns on PATH)")
    r = sub.add_parser("run", parents=[common], help="one case -> JSON on stdout")
    r.add_argument("--aqm", required=True, choices=AQMS)
    r.add_argument("--n", type=int, required=True)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--rest", type=int, default=11, help="rest-of-path one-way delay, ms")
    r.add_argument("--g2start", type=float)
    rec = sub.add_parser("record", parents=[common], help="a sweep -> fixture CSV")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--aqm", nargs="+", default=list(AQMS), choices=AQMS)
    rec.add_argument("--loads", nargs="+", type=int, default=list(LOADS))
    rec.add_argument("--seeds", type=int, default=10, help="seeds 1..N")
    rec.add_argument("--rest", nargs="+", type=int, default=[11])
    rec.add_argument("--jobs", type=int, default=2)
    t = sub.add_parser("trace", parents=[common], help="per-packet traces of one case")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--aqm", required=True, choices=AQMS)
    t.add_argument("--n", type=int, required=True)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--rest", type=int, default=11)
    sm = sub.add_parser("summarize", help="sweep CSVs -> per-seed fixture (seeds <= --max-seed) + summary")
    sm.add_argument("inputs", nargs="+", type=Path)
    sm.add_argument("--runs-out", type=Path, required=True)
    sm.add_argument("--summary-out", type=Path, required=True)
    sm.add_argument("--max-seed", type=int, default=30)
    tb = sub.add_parser("table", help="Table II-like text from a summary CSV")
    tb.add_argument("summary", type=Path)
    tb.add_argument("--metric", default="sojourn_p95")
    tb.add_argument("--path", default="11ms")
    tb.add_argument("--scale", type=float, default=0.001)
    a = ap.parse_args(argv)
    if a.cmd == "summarize":
        rows = [r for p in a.inputs for r in read_csv(p)]
        order = {x: i for i, x in enumerate(AQMS)}
        rows.sort(key=lambda r: (r["path"], order[r["aqm"]], r["n"], r["seed"]))
        write_csv(a.runs_out, [r for r in rows if r["seed"] <= a.max_seed], COLUMNS)
        write_csv(a.summary_out, summarize(rows), summary_columns())
        print(f"{a.runs_out}, {a.summary_out}: {len(rows)} runs", file=sys.stderr)
        return 0
    if a.cmd == "table":
        print(table(read_csv_summary(a.summary), a.metric, a.path, a.scale))
        return 0
    if a.cmd == "run":
        row = run_case(a.aqm, a.n, a.seed, a.duration, a.rest, ns=a.ns, g2start=a.g2start)
        json.dump(row, sys.stdout, indent=1)
        print()
    elif a.cmd == "record":
        record(a.out, a.aqm, a.loads, range(1, a.seeds + 1), a.duration, a.rest, a.jobs, a.ns)
    else:
        trace(a.out, a.aqm, a.n, a.seed, a.duration, a.rest, a.ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
