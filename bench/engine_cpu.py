"""The engine's CPU time for one scenario: ``python bench/engine_cpu.py SCENARIO.toml`` prints
the seconds of CPU (``time.process_time``) spent in the call into the engine that
``aqmlab.run()`` makes (``aqmlab.api._call_engine``: the Rust simulation and the summary and
series it hands back; the Python front end's DataFrame left out), or in the whole
``aqmlab.run()`` when that hook is not there.

``summary.json`` has the engine's wall time (``wall_seconds``); on a machine with more
runnable processes than cores most of a sub-second wall time is waiting, and CPU time is the
figure that still compares. bench/compare_ns3.py and bench/scaling.py run this in a process of
its own next to the timed ``aqmlab run`` command, so that the command's own figures are
unchanged.
"""

from __future__ import annotations

import sys
import time

import aqmlab.api as api


def engine_cpu_seconds(text: str) -> float:
    spent: list[float] = []
    inner = getattr(api, "_call_engine", None)
    if inner is not None:

        def timed_call(fn, *args):
            c = time.process_time()
            try:
                return inner(fn, *args)
            finally:
                spent.append(time.process_time() - c)

        api._call_engine = timed_call
    c = time.process_time()
    try:
        api.run(text)
    finally:
        if inner is not None:
            api._call_engine = inner
    return spent[-1] if spent else time.process_time() - c


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/engine_cpu.py SCENARIO.toml")
    with open(sys.argv[1], encoding="utf-8") as f:
        print(f"{engine_cpu_seconds(f.read()):.6f}")
