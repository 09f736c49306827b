"""aqmlab: a deterministic packet-level simulator of AQM and TCP congestion control.

The engine is Rust (``aqmlab._sim``); this package turns its output into pandas
DataFrames, files and plots.

>>> import aqmlab
>>> r = aqmlab.run("scenarios/two-cubic-pfifo.toml", overrides=["duration=5s"])
>>> r.summary["bottleneck"]["utilization"]        # doctest: +SKIP
>>> r.series("cubic-0", "goodput")                 # doctest: +SKIP
"""

from ._sim import ScenarioError
from .api import RunResult, resolve, run

__version__ = "0.1.0"

__all__ = ["RunResult", "ScenarioError", "resolve", "run", "__version__"]
