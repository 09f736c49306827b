"""Provenance and honest defaults: scenario.toml as run, manifest.json, `aqmlab check`,
stdin, `--version`, warnings, the steady window actually used, --set meaning the same in
`run` and `suite run`."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO, SCENARIO, SHORT, run_cli

import aqmlab
from aqmlab.suite import load_suite, parse_overrides, plan_runs


def test_scenario_toml_is_the_scenario_as_run_and_reruns_identically(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    p = run_cli("run", SCENARIO, "--out", a, "--seed", "9", "--set", "duration=3s", "--set", "flows[*].rtt=30ms", "--no-plot")
    assert p.returncode == 0, p.stderr
    doc = tomllib.loads((a / "scenario.toml").read_text())
    assert (doc["seed"], doc["duration"], doc["flows"][0]["rtt"]) == (9, "3s", "30ms")
    # Rerunning the written scenario gives the same summary (but for the wall clock).
    p = run_cli("run", a / "scenario.toml", "--out", b, "--no-plot")
    assert p.returncode == 0, p.stderr
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for s in (sa, sb):
        s.pop("wall_seconds")
    assert sa == sb


def test_manifest_names_versions_command_and_hashes_every_file(demo_run):
    _, out = demo_run
    m = json.loads((out / "manifest.json").read_text())
    assert m["aqmlab_version"] == aqmlab.__version__ and m["engine_version"]
    assert m["command"].startswith("aqmlab run ") and "duration=5s" in m["command"]
    assert (m["seed"], m["stack"], m["sim_seconds"]) == (1, "linux", 5.0)
    # git_commit: a 40-hex sha (maybe -dirty) in a checkout, else null.
    assert m["git_commit"] is None or len(m["git_commit"].split("-")[0]) == 40
    files = set(p.name for p in out.iterdir()) - {"manifest.json"}
    assert set(m["files"]) == files
    for name, digest in m["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    # The window D_SS used is recorded, in the summary and the manifest alike.
    s = json.loads((out / "summary.json").read_text())
    for f in s["flows"]:
        assert m["steady_windows_s"][f["name"]] == [f["steady_from_s"], f["steady_to_s"]]


def test_auto_steady_window_leaves_out_slow_start():
    r = aqmlab.run(SCENARIO, overrides=["duration=30s"])
    for f in r.summary["flows"]:
        # Samples from 0.05 s to 30 s: cut 1 s, window 14.475 s.
        assert f["steady_from_s"] == pytest.approx(14.525, abs=0.06) and f["steady_to_s"] == pytest.approx(29.0, abs=0.06)
    fixed = aqmlab.run(SCENARIO, overrides=["duration=30s", "metrics.steady_window=60s"])
    assert fixed.summary["flows"][0]["steady_from_s"] < 0  # the old default: the whole run


def test_check_validates_without_running_or_writing(tmp_path):
    p = run_cli("check", SCENARIO, "--set", "duration=5s")
    assert p.returncode == 0 and "ok (2 TCP flows, duration 5s" in p.stdout, p.stdout + p.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(SCENARIO.read_text().replace('rate = "50Mbit"', 'rate = "50"'))
    p = run_cli("check", bad)
    assert p.returncode == 2 and "bottleneck.rate" in p.stderr and "a unit is needed" in p.stderr
    assert p.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == [bad]
    p = run_cli("check", SCENARIO, "--print", "--seed", "4")
    assert p.returncode == 0 and tomllib.loads(p.stdout)["seed"] == 4


def test_scenario_from_stdin(tmp_path):
    out = tmp_path / "o"
    p = subprocess.run(
        [sys.executable, "-m", "aqmlab", "run", "-", "--out", str(out), "--no-plot", "-q", *SHORT],
        input=SCENARIO.read_text(), capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "summary.json").read_text())["name"] == "two-cubic-pfifo"
    p = subprocess.run([sys.executable, "-m", "aqmlab", "run", "-", "--out", str(tmp_path / "x")],
                       input="duration = 5\n", capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("<stdin>: ") and not (tmp_path / "x").exists()


def test_version_option():
    p = run_cli("--version")
    assert p.returncode == 0 and p.stdout.startswith(f"aqmlab {aqmlab.__version__}")


def test_prague_without_l4s_ecn_warns_and_records_the_controller_that_ran(tmp_path):
    p = run_cli("run", SCENARIO, "--out", tmp_path / "o", "--set", "flows[0].cc=prague", "--set", "duration=2s", "--no-plot", "-q")
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith("aqmlab: warning: flows[0]: cc = \"prague\" without ecn = \"l4s\"")
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["warnings"] and {f["cc"] for f in s["flows"]} == {"prague-reno"}


def test_jain_is_per_direction_when_flows_go_both_ways():
    text = SCENARIO.read_text().replace("count = 2", "count = 1") + (
        '\n[[flows]]\ncc = "cubic"\nrtt = "20ms"\ncount = 2\ndirection = "down"\n'
    )
    s = aqmlab.run(text, overrides=["duration=10s"]).summary
    assert [f["direction"] for f in s["flows"]] == ["up", "down", "down"]
    assert s["jain_steady"] is None
    assert s["jain_steady_by_direction"]["up"] == pytest.approx(1.0)
    assert 0.5 <= s["jain_steady_by_direction"]["down"] <= 1.0
    assert 0.0 < s["bottleneck"]["utilization"] <= 1.0


def test_set_means_the_same_in_run_and_suite_run():
    suite = load_suite("l4s-tests/s6")
    sets = ["flows[*].rtt=40ms", 'flows[0]={ ecn = "off" }', "duration=7s"]
    run = plan_runs(suite, Path("/tmp/x"), seeds=1, overrides=parse_overrides(sets))[0]
    base = plan_runs(suite, Path("/tmp/x"), seeds=1)[0]
    want = tomllib.loads(aqmlab.resolve(base.text, overrides=sets))
    got = tomllib.loads(run.text)
    assert got == want
    assert all(f["rtt"] == "40ms" for f in got["flows"]) and got["flows"][0]["ecn"] == "off"
    assert got["flows"][0]["cc"] == tomllib.loads(base.text)["flows"][0]["cc"]  # merged, not replaced


def test_a_suite_set_typo_fails_before_any_run(tmp_path):
    p = run_cli("suite", "run", "l4s-tests/s6", "--set", "flows[0].rtt=40", "--out", tmp_path / "s", "-q")
    assert p.returncode == 2 and "flows[0].rtt" in p.stderr
    assert not (tmp_path / "s" / "runs").exists()
