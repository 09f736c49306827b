"""aqmlab: a deterministic packet-level simulator of AQM and TCP congestion control.

The engine is Rust (``aqmlab._sim``); this package turns its output into pandas
DataFrames, files and plots.

>>> import aqmlab
>>> r = aqmlab.run("scenarios/two-cubic-pfifo.toml", overrides=["duration=5s"])
>>> r.summary["bottleneck"]["utilization"]        # doctest: +SKIP
>>> r.series("cubic-0", "goodput")                 # doctest: +SKIP

``aqmlab.load(run_dir)`` and ``aqmlab.load_suite(out_dir)`` read results back (``aqmlab.data``).

``run``, ``resolve``, ``load`` and ``RunResult`` are imported on first use, so that ``aqmlab --help``
and ``aqmlab check`` start without loading pandas.
"""

from typing import Any

from ._sim import RunCancelled, RunControl, ScenarioError

__version__ = "0.1.0"

__all__ = ["RunCancelled", "RunControl", "RunResult", "ScenarioError", "scenario_schema", "load", "load_suite", "resolve", "run", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("RunResult", "resolve", "run"):
        from . import api

        return getattr(api, name)
    if name == "scenario_schema":
        from ._sim import scenario_schema

        return scenario_schema
    if name in ("load", "load_suite"):
        from . import data

        return getattr(data, name)
    raise AttributeError(f"module 'aqmlab' has no attribute {name!r}")
