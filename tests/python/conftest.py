"""Shared fixtures: the repository's scenario, a CLI runner and one module-wide CLI run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "two-cubic-pfifo.toml"
#: Keeps every run short so the suite stays well under a minute.
SHORT = ["--set", "duration=5s"]


def run_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m aqmlab ARGS`` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "aqmlab", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=120,
    )


@pytest.fixture(scope="session")
def scenario() -> Path:
    return SCENARIO


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One short CLI run of the demo scenario shared by the output tests."""
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = run_cli("run", SCENARIO, "--out", out, *SHORT)
    assert proc.returncode == 0, proc.stderr
    return proc, out
