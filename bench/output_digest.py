"""Digests of the engine's outputs through the installed extension, to check that a build
(profile-guided, ``target-cpu``, LTO: docs/performance.md, "Session 7: the build") computes
exactly what the reference build computes.

``python bench/output_digest.py [FILE.toml ...]`` prints one line per scenario (default: every
golden scenario, ``scenarios/`` and ``tests/golden/scenarios/``, and ``aqmlab-bench``'s cases
a, f10 and f1000): a SHA-256 over the summary (``wall_seconds`` removed) and every series' key,
unit and float64 values. Two builds agree when their outputs are the same text (``diff``); the
golden hashes (tests/golden/hashes.json) are computed by the Rust test from the same data, so
equal digests against a build that passes ``make test`` mean the golden hashes hold.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def digest(text: str) -> str:
    import aqmlab

    r = aqmlab.run(text)
    h = hashlib.sha256()
    summary = dict(r.summary)
    summary.pop("wall_seconds", None)
    h.update(json.dumps(summary, sort_keys=False).encode())
    data = r.series_data
    h.update(data.time().tobytes())
    for i, (key, unit) in enumerate(zip(data.keys, data.units)):
        h.update(f"{key[0]}\0{key[1]}\0{unit}\0".encode())
        h.update(data.column(i).tobytes())
    return h.hexdigest()


def main() -> None:
    from pgo_train import bench_case

    if len(sys.argv) > 1:
        runs = [(f, Path(f).read_text()) for f in sys.argv[1:]]
    else:
        files = sorted((ROOT / "scenarios").glob("*.toml")) + sorted((ROOT / "tests/golden/scenarios").rglob("*.toml"))
        runs = [(str(p.relative_to(ROOT)), p.read_text()) for p in files]
        runs += [
            ("bench a", bench_case("60s", "50Mbit", 2)),
            ("bench f10", bench_case("10s", "1Gbit", 10)),
            ("bench f1000", bench_case("10s", "1Gbit", 1000)),
        ]
    for name, text in runs:
        print(f"{digest(text)}  {name}", flush=True)


if __name__ == "__main__":
    main()
