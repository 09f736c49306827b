"""The ``aqmlab`` command's entry point: the engine's heap on transparent huge pages.

With many flows the engine's per-flow state (senders, scoreboards, queues, delay lines) spans
tens of MB, touched in no particular order; mapped in 4 KiB pages that is far more than the
TLB covers, and a page walk per miss is a large part of each packet's cost. Linux backs memory
with 2 MiB pages on request when ``/sys/kernel/mm/transparent_hugepage/enabled`` is
``madvise`` (the usual distribution default), and glibc 2.35 on makes that request for its
heap when started with the tunable ``glibc.malloc.hugetlb=1`` (``GLIBC_TUNABLES``, read once
at process start). So the commands that run the engine (``run``, ``suite run``,
``validate``), when the kernel takes ``madvise`` requests and the tunable is not set, start
themselves again (``execve``: same process id, arguments and descriptors) with it added, about
40 ms of CPU; their worker processes (local pool, local Dask cluster) inherit it. The other
commands start as they are. Results do not depend
on it: only where the memory lies. ``AQMLAB_HUGEPAGES=0`` turns it off; a
``glibc.malloc.hugetlb`` setting of the caller's own is kept as it is. Measured effect:
docs/performance.md, "Session 10: huge pages".

A program that imports :mod:`aqmlab` (a notebook) runs in its own process, whose environment
was fixed when it started: ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1 jupyter lab`` gives it
the same.
"""

from __future__ import annotations

import os
import sys

TUNABLE = "glibc.malloc.hugetlb=1"
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"


def tunables_with_hugepages(env: dict[str, str] | os._Environ[str], thp_setting: str | None) -> str | None:
    """The ``GLIBC_TUNABLES`` value to start again with, or None when nothing would change:
    huge pages turned off (``AQMLAB_HUGEPAGES=0``), the caller's own ``glibc.malloc.hugetlb``,
    or a kernel that does not take ``madvise`` requests (``thp_setting``, the contents of
    :data:`THP_SETTING`: ``always`` backs the heap with huge pages anyway, ``never`` never;
    None: not Linux or not readable)."""
    if env.get("AQMLAB_HUGEPAGES") == "0" or thp_setting is None or "[madvise]" not in thp_setting:
        return None
    current = env.get("GLIBC_TUNABLES", "")
    if any(t.startswith("glibc.malloc.hugetlb=") for t in current.split(":")):
        return None
    return f"{current}:{TUNABLE}" if current else TUNABLE


def runs_engine(args: list[str]) -> bool:
    """Whether the command line (the arguments after the program) runs simulations."""
    words = [a for a in args if not a.startswith("-")][:2]
    return words[:1] in (["run"], ["validate"]) or words == ["suite", "run"]


def _uses_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError, AttributeError):
        return False


def reexec_with_hugepages() -> None:
    """Starts this process again with :func:`tunables_with_hugepages`'s value, if any (never
    returns then); else returns at once."""
    if sys.platform != "linux" or not _uses_glibc():
        return
    try:
        with open(THP_SETTING) as f:
            setting: str | None = f.read()
    except OSError:
        setting = None
    tunables = tunables_with_hugepages(os.environ, setting)
    argv = getattr(sys, "orig_argv", None)
    if tunables is None or not argv:
        return
    env = dict(os.environ, GLIBC_TUNABLES=tunables)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, argv, env)
    except OSError:
        return  # could not start again: run as started


def main() -> None:
    if runs_engine(sys.argv[1:]):
        reexec_with_hugepages()
    from .cli import main as cli_main

    cli_main(prog_name="aqmlab")
