"""The benchmark scripts' own logic (bench/compare_ns3.py, bench/scaling.py), without timing
anything and without ns-3: the aqmlab side of each comparison scenario is the dumbbell the
ns-3 side builds, bad arguments exit 2, and Jain's index is Jain's index."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

import aqmlab.api as api

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


cmp = _load("compare_ns3")
scaling = _load("scaling")


@pytest.mark.parametrize("key", sorted(cmp.SCENARIOS))
def test_comparison_scenario_is_the_ns3_dumbbell(key):
    s = cmp.SCENARIOS[key]
    d = tomllib.loads(api.resolve(s.toml()))  # checked as a run checks it
    assert d["duration"] == f"{s.duration_s:g}s"
    assert d["bottleneck"]["rate"] == f"{s.rate_mbps:g}Mbit"
    (flows,) = d["flows"]
    assert (flows["cc"], flows["rtt"], flows["count"]) == ("cubic", f"{s.rtt_ms:g}ms", s.flows)
    q = d["bottleneck"]["qdisc"].split()
    assert q[0] == s.qdisc
    if s.limit:
        assert q[q.index("limit") + 1] == str(s.limit)


def test_issue_scenarios():
    # issue 15's list: (a) 50 Mbit/s 20 ms 2 CUBIC fq_codel 60 s ... (e) 1 Gbit/s 1000 flows
    got = {k: (s.rate_mbps, s.rtt_ms, s.flows, s.qdisc, s.limit, s.duration_s) for k, s in cmp.SCENARIOS.items()}
    assert got == {
        "a": (50, 20, 2, "fq_codel", 0, 60),
        "b": (50, 20, 2, "pfifo", 1000, 60),
        "c": (1000, 10, 10, "fq_codel", 0, 10),
        "d": (10, 80, 2, "codel", 0, 60),
        "e": (1000, 20, 1000, "fq_codel", 0, 10),
    }


def test_ns3_program_knows_every_qdisc():
    src = (BENCH / "ns3" / "dumbbell.cc").read_text()
    names = set(re.findall(r'qdisc == "(\w+)"', src))
    assert {s.qdisc for s in cmp.SCENARIOS.values()} <= names


def test_jain():
    assert cmp.jain([3.0, 3.0, 3.0]) == pytest.approx(1.0)
    assert cmp.jain([1.0, 0.0]) == pytest.approx(0.5)
    assert cmp.jain([1.0, 2.0]) == pytest.approx(9 / 10)


def test_best_takes_minimum_times_and_first_counts():
    runs = [
        {"wall_s": 2.0, "cpu_s": 1.0, "sim_wall_s": 0.5, "bottleneck_packets": 10},
        {"wall_s": 1.0, "cpu_s": 1.5, "sim_wall_s": 0.7, "bottleneck_packets": 10},
    ]
    b = cmp.best(runs)
    assert (b["wall_s"], b["cpu_s"], b["sim_wall_s"], b["bottleneck_packets"]) == (1.0, 1.0, 0.5, 10)


@pytest.mark.parametrize(
    "argv", [["--only", "z"], ["--skip", "q"], ["--tools", "ns2"], ["--repeat", "0"]]
)
def test_compare_bad_arguments_exit_2(argv, capsys):
    assert cmp.main(argv) == 2
    assert "compare_ns3:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--only", "speed"], ["--repeat", "0"], ["--flows", "10,x"], ["--flows", "0"]])
def test_scaling_bad_arguments_exit_2(argv, capsys):
    assert scaling.main(argv) == 2
    assert "scaling:" in capsys.readouterr().err


def test_scaling_scenarios_are_accepted():
    for _, mbps, dur in scaling.RATES:
        api.resolve(scaling.scenario(mbps, 2, dur))
    api.resolve(scaling.scenario(1000, max(scaling.FLOWS), 5))


def test_bench_extra_has_what_the_scripts_import():
    # make bench-deps installs pyproject's [bench] extra; compare_ns3.py needs the ns3 wheel
    # (3.44: the dumbbell links libns3.44-*), scaling.py's Dask rows dask.distributed
    root = BENCH.parent
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]
    assert any(re.fullmatch(r"ns3==3\.44(\.post\d+)?", d) for d in extra)
    assert any(d.startswith("dask[distributed]") for d in extra)
    assert "libns3.44-" in (BENCH / "compare_ns3.py").read_text()
    assert re.search(r"^bench-deps:", (root / "Makefile").read_text(), re.M)


def test_pgo_training_runs_are_accepted_and_hold_the_golden_cells_out():
    # make setup's profile-guided build stops when a training run fails (bench/pgo_train.py):
    # every one must be a valid scenario; the golden suite cells are the held-out check
    train = _load("pgo_train")
    runs = train.training_set(quick=False)
    for _, text in runs:
        api.resolve(text)
    names = [n for n, _ in runs]
    assert not any("golden" in n or "jarvinen" in n or "l4s-tests" in n for n in names)
    ccs = {cc for cc, _ in train.CCS}
    assert {"cubic", "reno", "dctcp", "prague", "bbr", "bbr3"} <= ccs
    assert len(train.training_set(quick=True)) < len(runs)
    # the ns-3 comparison's dumbbells are trained (session 9), each as compare_ns3.py runs it
    for key in "bcde":
        assert (f"compare_ns3 {key}", cmp.SCENARIOS[key].toml()) in runs


def test_event_loop_measure_brackets_the_events_between_the_first_and_last_tick():
    # bench/engine_cpu.py --loop reads the clock at the engine's progress calls of 0.0 and 1.0
    # only, taking them for "network built, no event run" and "every event run": the first
    # call must come before any simulated time passes and the last after all of it
    engine_cpu = _load("engine_cpu")
    text = 'duration = "1s"\n[bottleneck]\nrate = "10Mbit"\nqdisc = "codel"\n[[flows]]\ncc = "cubic"\nrtt = "80ms"\n'
    calls: list[float] = []
    api.run(text, progress=calls.append)
    assert calls[0] == 0.0 and calls[-1] == 1.0
    assert 0.0 not in calls[1:] and 1.0 not in calls[:-1]
    assert len(calls) == 1 / 0.05 + 1  # one per 50 ms sampling step, then the end
    assert engine_cpu.event_loop_cpu_seconds(text) >= 0.0


def test_saved_ns3_runs_without_the_loop_column_count_run_as_the_loop(tmp_path, capsys):
    # --json files from before the event loop column: ns-3's Run() CPU is its event loop
    aq = {"wall_s": 1.0, "cpu_s": 1.0, "sim_wall_s": 0.02, "sim_cpu_s": 0.02, "loop_cpu_s": 0.01, "events": 9,
          "bottleneck_packets": 3, "goodput_mbps": [1.0, 1.0]}  # fmt: skip
    ns = {"wall_s": 4.0, "cpu_s": 4.0, "sim_wall_s": 3.0, "sim_cpu_s": 3.0, "events": 50, "bottleneck_packets": 3,
          "goodput_mbps": [1.0, 1.0]}  # fmt: skip
    f = tmp_path / "old.json"
    f.write_text(json.dumps({"d": {"runs": {"aqmlab": [aq], "ns-3": [ns]}}}))
    assert cmp.main(["--from-json", str(f)]) == 0
    out = capsys.readouterr().out
    assert "simulation CPU 150x, event loop CPU 300x" in out
