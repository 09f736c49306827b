"""Generated scenarios end to end (issue 14, "Fuzzing" and "No hang"), with Hypothesis.

- ``test_cli_contract``: valid and broken scenarios through ``aqmlab run`` in a subprocess:
  exit 0 with the outputs written, or exit 2 with one line on stderr and nothing written;
  never a traceback; exit 1 (an internal error) fails the test with the scenario.
- ``test_valid_scenarios_finish``: random valid scenarios (every qdisc of the table with
  random parameters, every cc, rates 1 kbit/s to 10 Gbit/s, zero to 2 s delays, 1-byte to
  full-size packets, the shortest intervals allowed) each finish within a wall-clock cap,
  run one after another by a worker subprocess that is killed when one does not.

Both are bounded (examples x short durations) to stay within seconds of ``make test``;
``AQMLAB_FUZZ_EXAMPLES`` raises the counts for a longer run (docs/fuzzing.md).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from aqmlab import _sim
from conftest import REPO

SCALE = int(os.environ.get("AQMLAB_FUZZ_EXAMPLES", "1"))
QDISCS = json.loads(_sim.qdisc_table())
CCS = json.loads(_sim.cc_table())
RATES = ["1kbit", "9600bit", "56kbit", "1Mbit", "10Mbit", "100Mbit", "1Gbit", "10Gbit"]
DELAYS = ["0ms", "1ns", "1us", "1ms", "20ms", "200ms", "2s"]
RTTS = ["2us", "1ms", "20ms", "200ms", "2s"]  # the shortest RTT allowed is 2us
# Per scenario, in packets (rate x duration / size): keeps each run well under a second.
PACKET_BUDGET = 20_000
# A run that takes longer than this (on a loaded 2-core machine) is a hang.
WALL_CAP_S = 30.0

SETTINGS = dict(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each failure names its scenario
)


def _bits(rate: str) -> float:
    m = re.fullmatch(r"(\d+)(bit|kbit|Mbit|Gbit)", rate)
    return int(m.group(1)) * {"bit": 1, "kbit": 1e3, "Mbit": 1e6, "Gbit": 1e9}[m.group(2)]


@st.composite
def param_value(draw, p: dict) -> str | None:
    """A value for a qdisc or cc parameter, by its type text; None for a flag."""
    t = p["type"]
    if t.startswith("flag"):
        return None
    m = re.match(r"(?:real |PERCENTAGE )?(-?\d+)\.\.(\d+)", t)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        return str(draw(st.sampled_from([lo, hi, p.get("default_text") or lo, draw(st.integers(lo, hi))])))
    if t.startswith("time"):
        return draw(st.sampled_from(["0", "1us", "100us", "1ms", "5ms", "100ms", "1s", "100s"]))
    if t.startswith("rate"):
        return draw(st.sampled_from(RATES + ["unlimited"] if "unlimited" in t else RATES))
    if t == "bytes":
        return draw(st.sampled_from(["1", "64", "1514", "64kb", "4294967295"]))
    if t.startswith("packets") or t.startswith("TIME or PACKETS"):
        return draw(st.sampled_from(["1", "5p", "1000", "150000b", "1b", "1ms"]))
    if "|" in t and " " not in t:
        return draw(st.sampled_from(t.split("|")))
    if t == "VALUE/MASK":
        return draw(st.sampled_from(["0x1/0x3", "0/0", "x"]))
    return draw(st.sampled_from(["0", "1", "x"]))


@st.composite
def spec(draw, table: list[dict]) -> str:
    """A tc-style description: a kind of the table and 0-3 of its parameters."""
    kind = draw(st.sampled_from(table))
    params = [p for p in kind["params"] if not p["type"].startswith("not supported")]
    words = [kind["name"]]
    if params:
        for p in draw(st.lists(st.sampled_from(params), max_size=3, unique_by=lambda p: p["name"])):
            v = draw(param_value(p))
            if "|" in p["type"] and " " not in p["type"]:
                words += [v]  # a keyword parameter: the word alone (`diffserv3`, `ethernet`)
            else:
                words += [p["name"]] if v is None else [p["name"], v]
    return " ".join(words)


@st.composite
def scenario_doc(draw) -> dict:
    """A scenario meant to be valid (some parameter combinations are still refused, cleanly)."""
    rate = draw(st.sampled_from(RATES))
    doc: dict = {"seed": draw(st.integers(0, 2**63 - 1))}
    doc["bottleneck"] = {"rate": rate, "qdisc": draw(spec(QDISCS))}
    if draw(st.booleans()):
        doc["bottleneck"]["delay"] = draw(st.sampled_from(DELAYS))
    flows = []
    for _ in range(draw(st.integers(0, 3))):
        f = {"cc": draw(spec(CCS)), "rtt": draw(st.sampled_from(RTTS)), "count": draw(st.integers(1, 3))}
        if draw(st.booleans()):
            f["mss"] = draw(st.sampled_from([64, 536, 1448, 8948, 65483]))
        if draw(st.booleans()):
            f["ecn"] = draw(st.sampled_from(["off", "rfc3168", "l4s", "sce"]))
        if draw(st.booleans()):
            f["initial_cwnd"] = draw(st.sampled_from([1, 10, 10000]))
        flows.append(f)
    udp = []
    for _ in range(draw(st.integers(0, 2))):
        size = draw(st.sampled_from([1, 20, 100, 1472]))
        u = {"rate": draw(st.sampled_from(["1kbit", "64kbit", "1Mbit", "10Mbit"])), "packet_size": size, "rtt": draw(st.sampled_from(RTTS))}
        if draw(st.booleans()):
            # A frame (rate / frame_rate bytes) leaves at once whatever the duration: frames of
            # more than 5000 packets would break the packet budget (test_known_slow_cases).
            rates = [f for f in (1e-3, 1, 30, 1000) if _bits(u["rate"]) / f / 8 / size <= 5000]
            if rates:
                u["kind"] = "video"
                u["frame_rate"] = draw(st.sampled_from(rates))
        udp.append(u)
    probes = [{"interval": draw(st.sampled_from(["1us", "1ms", "100ms"])), "rtt": draw(st.sampled_from(RTTS))}] if draw(st.booleans()) else []
    if not (flows or udp or probes):
        flows = [{"cc": "cubic", "rtt": "20ms"}]
    for key, v in (("flows", flows), ("udp", udp), ("probes", probes)):
        if v:
            doc[key] = v
    if draw(st.booleans()):
        doc["metrics"] = {"step": draw(st.sampled_from(["1ms", "10ms", "50ms"]))}
    # The duration the packet budget allows: TCP at the link rate, UDP and probes at theirs.
    pps = _bits(rate) / 12_000 * 1.5 + sum(_bits(u["rate"]) / (8 * u["packet_size"]) for u in udp)
    pps += sum(1e6 if p["interval"] == "1us" else 1e3 if p["interval"] == "1ms" else 10 for p in probes)
    want = draw(st.sampled_from([0.01, 0.1, 0.5, 2.0]))
    doc["duration"] = f"{max(1, int(min(want, PACKET_BUDGET / pps) * 1e6))}us"
    return doc


def _break(draw, doc: dict) -> str:
    """A broken variant of a scenario: a key removed, a value of the wrong type or out of
    range, an unknown key, or TOML text damaged."""
    how = draw(st.sampled_from(["remove", "type", "range", "unknown", "text"]))
    tables = [("", doc)] + [(k, doc[k]) for k in ("bottleneck", "metrics") if k in doc]
    tables += [(f"{k}[{i}]", t) for k in ("flows", "udp", "probes") for i, t in enumerate(doc.get(k, []))]
    _, t = draw(st.sampled_from(tables))
    key = draw(st.sampled_from(sorted(t)))
    if how == "remove":
        del t[key]
    elif how == "type":
        t[key] = draw(st.sampled_from([[1, 2], {"a": 1}, True, 3.5, "x", -1]))
    elif how == "range":
        t[key] = draw(st.sampled_from(["0s", "-1ms", "0bit", "1bit", "100000000s", "10Tbit", 0, 2**63 - 1, "1e-300", "nan", "a" * 2000]))
    elif how == "unknown":
        t["no_such_key"] = 1
    text = tomli_w.dumps(doc)
    if how == "text":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["\x00", "[", "]]", '"', "=", "\n[[flows]]\n", "\ufffd", "\n[bottleneck]\n"])) + text[i:]
    return text


@st.composite
def scenario_case(draw) -> str:
    doc = draw(scenario_doc())
    if draw(st.booleans()):
        return tomli_w.dumps(doc)
    return _break(draw, doc)


def _aqmlab(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.run([sys.executable, "-m", "aqmlab", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


CLI_COUNTS: dict[int, int] = {}


@settings(max_examples=25 * SCALE, **SETTINGS)
@given(scenario_case())
def test_cli_contract(tmp_path_factory, text):
    d = tmp_path_factory.mktemp("cli")
    src, out = d / "s.toml", d / "out"
    src.write_text(text)
    try:
        p = _aqmlab("run", str(src), "--out", str(out), "-q", "--no-plot", "--no-html", "--no-flent", timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"aqmlab run did not finish in 120 s:\n{text}") from None
    CLI_COUNTS[p.returncode] = CLI_COUNTS.get(p.returncode, 0) + 1
    print(f"cli: exit codes {CLI_COUNTS}")
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode in (0, 2), f"exit {p.returncode}: {p.stderr}\n{text}"
    if p.returncode == 0:
        assert (out / "summary.json").is_file() and (out / "scenario.toml").is_file()
        json.loads((out / "summary.json").read_text())
    else:
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].strip(), f"{p.stderr!r}\n{text}"
        assert len(lines[0]) < 1000, lines[0][:200]
        assert not out.exists() or not any(out.iterdir()), f"written on error: {list(out.iterdir())}"


# The worker: reads one scenario (JSON line) at a time from stdin, runs it with the engine and
# answers one JSON line; a scenario that does not answer within WALL_CAP_S hangs.
WORKER = r"""
import json, sys
from aqmlab import _sim
for line in sys.stdin:
    text = json.loads(line)
    try:
        _sim.run(text)
        r = {"outcome": "ok"}
    except _sim.ScenarioError as e:
        r = {"outcome": "rejected", "msg": str(e)}
    except BaseException as e:
        r = {"outcome": "internal", "msg": type(e).__name__ + ": " + " ".join(str(e).split())}
    print(json.dumps(r), flush=True)
"""

COUNTS: dict[str, int] = {}


# Found by test_valid_scenarios_finish with AQMLAB_FUZZ_EXAMPLES=4 (docs/fuzzing.md): fq_codel_drop
# looks for the fattest flow on each over-limit enqueue; with `flows 65536 memory_limit 1` every
# packet is over the limit, and one 125,000-packet video frame (1 kbit/s at 0.001 frames/s,
# 1-byte packets) took 8e9 bucket visits (over 30 s) when every bucket was scanned as Linux
# does. The engine now scans only the flows on the new/old lists (the same flow, FqCodel::fattest)
# and the run takes well under a second of engine time; WALL_CAP_S only guards against a hang.
SLOW_FQ_CODEL = """
duration = "500ms"
[bottleneck]
rate = "100Mbit"
qdisc = "fq_codel flows 65536 memory_limit 1"
[[udp]]
rate = "1kbit"
packet_size = 1
rtt = "200ms"
kind = "video"
frame_rate = 0.001
"""


def test_known_slow_cases():
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    subprocess.run([sys.executable, "-c", "import sys; from aqmlab import _sim; _sim.run(sys.stdin.read())"], input=SLOW_FQ_CODEL, text=True, env=env, timeout=WALL_CAP_S, check=True)


@settings(max_examples=4 * SCALE, **SETTINGS)
@given(st.lists(scenario_doc(), min_size=20, max_size=20))
def test_valid_scenarios_finish(docs):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    w = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        for doc in docs:
            text = tomli_w.dumps(doc)
            w.stdin.write(json.dumps(text) + "\n")
            w.stdin.flush()
            t0 = time.monotonic()
            ready, _, _ = select.select([w.stdout], [], [], WALL_CAP_S)
            if not ready:
                raise AssertionError(f"no result within {WALL_CAP_S:.0f} s (a hang):\n{text}")
            line = w.stdout.readline()
            assert line, f"the worker died (exit {w.poll()}) on:\n{text}"
            r = json.loads(line)
            COUNTS[r["outcome"]] = COUNTS.get(r["outcome"], 0) + 1
            assert r["outcome"] != "internal", f"{r['msg']}\n{text}"
            if r["outcome"] == "rejected":
                if os.environ.get("AQMLAB_FUZZ_VERBOSE"):
                    print("rejected:", r["msg"][:160])
                assert "\n" not in r["msg"] and len(r["msg"]) < 1000, r["msg"][:200]
            COUNTS["wall_max_ms"] = max(COUNTS.get("wall_max_ms", 0), int((time.monotonic() - t0) * 1e3))
    finally:
        w.kill()
        w.wait()
    print(f"no-hang: {COUNTS}")
