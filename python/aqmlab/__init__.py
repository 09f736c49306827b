"""aqmlab: a deterministic packet-level simulator of AQM and TCP congestion control.

The engine is Rust (``aqmlab._sim``); this package turns its output into pandas
DataFrames, files and plots.

>>> import aqmlab
>>> r = aqmlab.run("scenarios/two-cubic-pfifo.toml", overrides=["duration=5s"])
>>> r.summary["bottleneck"]["utilization"]        # doctest: +SKIP
>>> r.series("cubic-0", "goodput")                 # doctest: +SKIP

``run``, ``resolve`` and ``RunResult`` are imported on first use, so that ``aqmlab --help``
and ``aqmlab check`` start without loading pandas.
"""

from typing import Any

from ._sim import ScenarioError

__version__ = "0.1.0"

__all__ = ["RunResult", "ScenarioError", "resolve", "run", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("RunResult", "resolve", "run"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'aqmlab' has no attribute {name!r}")
