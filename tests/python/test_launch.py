"""The command's start with the heap on transparent huge pages (aqmlab.launch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aqmlab.launch import TUNABLE, runs_engine, tunables_with_hugepages

MADVISE = "always [madvise] never\n"


def test_the_tunable_is_added_when_the_kernel_takes_madvise_requests() -> None:
    assert tunables_with_hugepages({}, MADVISE) == TUNABLE
    assert tunables_with_hugepages({"GLIBC_TUNABLES": ""}, MADVISE) == TUNABLE
    assert tunables_with_hugepages({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, MADVISE) == "glibc.malloc.arena_max=2:" + TUNABLE


def test_nothing_changes_when_off_set_by_the_caller_or_not_madvise() -> None:
    assert tunables_with_hugepages({"AQMLAB_HUGEPAGES": "0"}, MADVISE) is None
    assert tunables_with_hugepages({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, MADVISE) is None
    assert tunables_with_hugepages({"GLIBC_TUNABLES": "a=1:glibc.malloc.hugetlb=2"}, MADVISE) is None
    assert tunables_with_hugepages({}, "[always] madvise never\n") is None
    assert tunables_with_hugepages({}, "always madvise [never]\n") is None
    assert tunables_with_hugepages({}, None) is None


def test_only_the_commands_that_run_the_engine_start_again() -> None:
    assert runs_engine(["run", "s.toml", "--out", "x"]) and runs_engine(["-q", "validate"])
    assert runs_engine(["suite", "run", "l4s-tests", "-j", "2"])
    assert not any(runs_engine(a) for a in (["--version"], ["check", "s.toml"], ["suite", "list"], ["suite", "report", "d"], ["plot", "run"], []))


@pytest.mark.skipif(sys.platform != "linux" or not Path("/sys/kernel/mm/transparent_hugepage/enabled").exists(), reason="Linux with THP")
def test_the_command_runs_with_the_tunable_and_its_arguments() -> None:
    """`python -m aqmlab` starts itself again with the tunable (same arguments), once."""
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "AQMLAB_HUGEPAGES")}
    probe = "import os, sys; print(os.environ.get('GLIBC_TUNABLES'), sys.argv[1:])"
    # The entry point's own code path, with a probe in place of the CLI.
    code = f"import aqmlab.launch as l; l.reexec_with_hugepages(); {probe}"
    out = subprocess.run([sys.executable, "-c", code, "x", "--y"], env=env, capture_output=True, text=True, check=True).stdout.split(" ", 1)
    expected = TUNABLE if "[madvise]" in setting and os.confstr("CS_GNU_LIBC_VERSION") else "None"
    assert out[0] == expected
    assert out[1].strip() == "['x', '--y']"
    off = subprocess.run([sys.executable, "-c", code], env=dict(env, AQMLAB_HUGEPAGES="0"), capture_output=True, text=True, check=True).stdout
    assert off.startswith("None ")
