"""Writing a run's files crash-safely.

Every file is written to a temporary file in the output directory and then moved into
place with ``os.replace``, so an interrupted run never leaves a half-written file under
its final name. ``summary.json`` is written last: its presence means the run's files
are complete.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from .api import RunResult

SUMMARY = "summary.json"
PARQUET = "timeseries.parquet"
CSV = "timeseries.csv"
PLOT = "throughput_rtt.png"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yields a temporary path beside ``final``; on success moves it to ``final``."""
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual mode
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


def atomic_write(final: Path, write: Callable[[IO[bytes]], None]) -> None:
    with atomic_path(final) as tmp, open(tmp, "wb") as f:
        write(f)


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_outputs(result: RunResult, out_dir: Path, *, plot: bool = True, csv: bool = True) -> list[Path]:
    """Writes timeseries.parquet, timeseries.csv (unless ``csv=False``), throughput_rtt.png
    (unless ``plot=False``) and, last, summary.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    ts = result.timeseries

    p = out_dir / PARQUET
    with atomic_path(p) as tmp:
        ts.to_parquet(tmp, index=False, engine="pyarrow")
    written.append(p)

    if csv:
        p = out_dir / CSV
        with atomic_path(p) as tmp:
            ts.to_csv(tmp, index=False, lineterminator="\n")
        written.append(p)

    if plot:
        from .plot import plot_throughput_rtt

        p = out_dir / PLOT
        with atomic_path(p) as tmp:
            plot_throughput_rtt(result, tmp)
        written.append(p)

    p = out_dir / SUMMARY
    text = result.summary_json(indent=2) + "\n"
    atomic_write(p, lambda f: f.write(text.encode("utf-8")))
    written.append(p)
    _fsync_dir(out_dir)
    return written
