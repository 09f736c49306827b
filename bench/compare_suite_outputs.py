"""Compares two output directories of the same ``aqmlab suite run`` (e.g. before and after a
change to the writers): ``python bench/compare_suite_outputs.py OLD NEW``.

- the suite's files (results.csv, REPORT.md, every other file beside ``runs/``, index.html
  excepted only when ``--skip-index``) must be byte-identical;
- every run's summary.json and scenario.toml byte-identical;
- manifest.json identical but for ``git_commit`` and the SHA-256 of timeseries.parquet (the
  file's encoding may change; its table may not);
- timeseries.parquet read back (pyarrow) equal: schema with its metadata, and data.

Exits 1 listing the first differences.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    a = ap.parse_args()
    import pyarrow.parquet as pq

    bad: list[str] = []
    top_old = sorted(p.name for p in a.old.iterdir() if p.is_file())
    top_new = sorted(p.name for p in a.new.iterdir() if p.is_file())
    if top_old != top_new:
        bad.append(f"suite files differ: {top_old} vs {top_new}")
    for name in top_old:
        if (a.new / name).is_file() and (a.old / name).read_bytes() != (a.new / name).read_bytes():
            bad.append(f"{name} differs")
    runs_old = sorted(p.relative_to(a.old) for p in (a.old / "runs").glob("*/*") if p.is_dir())
    runs_new = sorted(p.relative_to(a.new) for p in (a.new / "runs").glob("*/*") if p.is_dir())
    if runs_old != runs_new:
        bad.append(f"run directories differ ({len(runs_old)} vs {len(runs_new)})")
    parquet_same_bytes = 0
    for rel in runs_old:
        o, n = a.old / rel, a.new / rel
        fo = sorted(p.name for p in o.iterdir())
        fn = sorted(p.name for p in n.iterdir()) if n.is_dir() else []
        if fo != fn:
            bad.append(f"{rel}: files {fo} vs {fn}")
            continue
        for name in ("summary.json", "scenario.toml"):
            if (o / name).read_bytes() != (n / name).read_bytes():
                bad.append(f"{rel}/{name} differs")
        mo, mn = json.loads((o / "manifest.json").read_text()), json.loads((n / "manifest.json").read_text())
        for m in (mo, mn):
            m.pop("git_commit", None)
            m["files"].pop("timeseries.parquet", None)
        if mo != mn:
            bad.append(f"{rel}/manifest.json differs beyond git_commit and the Parquet hash")
        if (o / "timeseries.parquet").is_file():
            if (o / "timeseries.parquet").read_bytes() == (n / "timeseries.parquet").read_bytes():
                parquet_same_bytes += 1
            to, tn = pq.read_table(o / "timeseries.parquet"), pq.read_table(n / "timeseries.parquet")
            if not to.schema.equals(tn.schema, check_metadata=True):
                bad.append(f"{rel}/timeseries.parquet: schema differs")
            elif not to.equals(tn):
                bad.append(f"{rel}/timeseries.parquet: data differ")
    print(f"{len(runs_old)} runs compared; suite files {top_old}; {parquet_same_bytes} Parquet files byte-identical, "
          f"the others equal as tables" if not bad else "")
    if bad:
        print("\n".join(bad[:30]))
        sys.exit(1)
    print("same")


if __name__ == "__main__":
    main()
