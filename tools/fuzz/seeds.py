"""Writes the fuzzers' seed corpora (issue 14) into fuzz/seeds/: every built-in suite's cells
as scenario texts (fuzz/seeds/scenario/), every qdisc and cc description those and
scenarios/*.toml use (fuzz/seeds/qdisc/, fuzz/seeds/cc/), and `--set` lines on each of
scenarios/*.toml (fuzz/seeds/overrides/: the lines, an empty line, the scenario). Each file is named by a hash of its
content, so rerunning after a suite changes adds and removes only what changed.

    .venv/bin/python tools/fuzz/seeds.py
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from aqmlab.suite import builtin_suites, load_suite, plan_runs  # noqa: E402


def _specs(doc, key: str, out: set[str]) -> None:
    """Every string value of `key` anywhere in a parsed scenario."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == key and isinstance(v, str):
                out.add(v)
            else:
                _specs(v, key, out)
    elif isinstance(doc, list):
        for v in doc:
            _specs(v, key, out)


def _write(dir_: Path, texts: set[str], suffix: str) -> None:
    shutil.rmtree(dir_, ignore_errors=True)
    dir_.mkdir(parents=True)
    for t in sorted(texts):
        (dir_ / (hashlib.sha256(t.encode()).hexdigest()[:16] + suffix)).write_text(t)


def main() -> None:
    scenarios: set[str] = set()
    for name in builtin_suites():
        for run in plan_runs(load_suite(name), Path("unused"), seeds=1):
            scenarios.add(run.text)
    qdiscs: set[str] = set()
    ccs: set[str] = set()
    for text in list(scenarios) + [p.read_text() for p in (REPO / "scenarios").glob("*.toml")]:
        doc = tomllib.loads(text)
        _specs(doc, "qdisc", qdiscs)
        _specs(doc, "cc", ccs)
    _write(REPO / "fuzz/seeds/scenario", scenarios, ".toml")
    _write(REPO / "fuzz/seeds/qdisc", qdiscs, ".txt")
    _write(REPO / "fuzz/seeds/cc", ccs, ".txt")
    sets = [
        "duration=1s\nflows[0].rtt=40ms",
        "flows[*].ecn=l4s\nbottleneck.qdisc=\"dualpi2 target 15ms\"",
        "bottleneck.rate=1Gbit\nseed=7",
        "flows[0]={cc=\"reno\", count=2}",
        "bottleneck.changes[0].at=1s",
        "udp[0].packet_size=100\nudp[0].rate=1Mbit",
        "limits.max_packets=1000",
        "metrics.step=10ms\nname=x",
    ]
    overrides = set(sets)  # on the built-in base scenario (fuzzing::split_overrides)
    for i, p in enumerate(sorted((REPO / "scenarios").glob("*.toml"))):
        overrides.add(sets[i % len(sets)] + "\n\n" + p.read_text())
    _write(REPO / "fuzz/seeds/overrides", overrides, ".txt")
    print(f"{len(scenarios)} scenarios, {len(qdiscs)} qdisc and {len(ccs)} cc descriptions, {len(overrides)} override sets -> fuzz/seeds/")


if __name__ == "__main__":
    main()
