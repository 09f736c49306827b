"""The engine's CPU time for one scenario, in seconds of CPU (``time.process_time``):

1. ``python bench/engine_cpu.py SCENARIO.toml``: the **engine call**, the call into the engine
   that ``aqmlab.run()`` makes (``aqmlab.api._call_engine``): parsing and checking the
   scenario, building the network, the event loop, the summary (with the end-of-run invariant
   checks) and the series handed back to Python (the Python front end's DataFrame left out);
   the whole ``aqmlab.run()`` when that hook is not there;
2. ``python bench/engine_cpu.py --loop SCENARIO.toml``: the **event loop**, from the engine's
   first progress tick (fraction 0.0, called once the network is built, before the first
   event) to its last (1.0, after the last event, before the final sample and the summary):
   the quantity ns-3's ``Simulator::Run()`` is in ``bench/compare_ns3.py``. It includes
   aqmlab's series sampling (every ``[metrics] step``, which ns-3's dumbbell does not do) and,
   per step, the engine taking the GIL to check for signals and calling the progress function
   that reads the clock (about 1,000 instructions a step: 1 % of scenario (d)'s loop, measured
   with callgrind). The engine call of 1. runs without that function, as ``aqmlab run`` does,
   so each is measured in a process of its own.

``summary.json`` has the engine's wall time (``wall_seconds``); on a machine with more
runnable processes than cores most of a sub-second wall time is waiting, and CPU time is the
figure that still compares. bench/compare_ns3.py and bench/scaling.py run this in a process of
its own next to the timed ``aqmlab run`` command, so that the command's own figures are
unchanged. The run is the process's first, as ``aqmlab run``'s is (no warm-up run; on (d) a
second run in the same process measured no faster).
"""

from __future__ import annotations

import sys
import time

if __name__ == "__main__":
    # Measured as `aqmlab run` runs the engine: with its heap on huge pages (aqmlab.launch).
    from aqmlab.launch import reexec_with_hugepages

    reexec_with_hugepages()

import aqmlab.api as api  # noqa: E402


def engine_cpu_seconds(text: str) -> float:
    """CPU s of the engine call (no progress function, as ``aqmlab run``)."""
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


def event_loop_cpu_seconds(text: str) -> float:
    """CPU s from the engine's first progress tick to its last.

    Between the two ticks run every event, the series sampling and the writes of the series
    chunks (of `api.CHUNK_VALUES` values each) to the spill file `api.run` streams them to: all
    part of every aqmlab run, none of it in ns-3's `Run()`."""
    marks: list[float] = []

    def progress(fraction: float, clock=time.process_time) -> None:
        # Called once per sampling step: only the first and the last call read the clock.
        if fraction == 0.0 or fraction == 1.0:
            marks.append(clock())

    api.run(text, progress=progress)
    return marks[-1] - marks[0]


if __name__ == "__main__":
    args = sys.argv[1:]
    loop = args[:1] == ["--loop"]
    if loop:
        args = args[1:]
    if len(args) != 1:
        sys.exit("usage: python bench/engine_cpu.py [--loop] SCENARIO.toml")
    with open(args[0], encoding="utf-8") as f:
        text = f.read()
    print(f"{(event_loop_cpu_seconds if loop else engine_cpu_seconds)(text):.6f}")
