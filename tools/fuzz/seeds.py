"""Writes the fuzzers' seed corpora (issue 14) into fuzz/seeds/: every built-in suite's cells
as scenario texts (fuzz/seeds/scenario/), and every qdisc and cc description those and
scenarios/*.toml use (fuzz/seeds/qdisc/, fuzz/seeds/cc/). Each file is named by a hash of its
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
    print(f"{len(scenarios)} scenarios, {len(qdiscs)} qdisc and {len(ccs)} cc descriptions -> fuzz/seeds/")


if __name__ == "__main__":
    main()
