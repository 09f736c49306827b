"""Suites: file parsing, matrix expansion, filters, the runner (parallel, resume, seeds,
determinism), REPORT.md / results.csv, ``aqmlab validate`` and the error paths."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aqmlab import _sim
from aqmlab import runner
from aqmlab import suite as S
from aqmlab.cli import app
from conftest import run_cli


def cli(*args: str | Path):
    """``aqmlab ARGS`` in this process (faster than a subprocess); returns (code, stdout, stderr)."""
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr

# A small piece of S6: 2 ECN variants x 2 qdiscs = 4 runs of 4 s.
TINY = ["l4s-tests/s6", "--filter", "classic=cubic", "--filter", "qdisc=pie,red_400000", "--set", "duration=4s"]
RATIO_HEADER = "| Rate | qdisc | CC1 (RTT) | DSS1 | CC2 (RTT) | DSS2 | Ratio | Plot |"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --------------------------------------------------------------------------------------
# Parsing and expansion
# --------------------------------------------------------------------------------------


def test_builtin_suites_and_matrix_sizes():
    names = list(S.builtin_suites())
    assert {"l4s-tests/s1", "l4s-tests/s6", "l4s-tests/s8", "l4s-tests/s13"} <= set(names)
    sizes = {n: len(S.load_suite(n).cells()) for n in names}
    assert sizes["l4s-tests/s1"] == 192
    assert sizes["l4s-tests/s6"] == 24
    assert sizes["l4s-tests/s8"] == 24
    assert sizes["l4s-tests/s13"] == 8
    expected = {
        "l4s-tests/s2": 64, "l4s-tests/s3": 8, "l4s-tests/s4": 36, "l4s-tests/s5": 6, "l4s-tests/s9": 15, "l4s-tests/fct": 15,
        "sce-l4s-ect1/s1": 18, "sce-l4s-ect1/s2": 81, "sce-l4s-ect1/s3": 2, "sce-l4s-ect1/s4": 8,
        "sce-l4s-ect1/s5": 8, "sce-l4s-ect1/s6": 8,
        "jarvinen-kojo": 56, "scream": 16, "fq-interaction": 8,
    }
    assert {n: sizes[n] for n in expected} == expected
    assert S.load_suite("jarvinen-kojo").seeds == 100


def test_filters_reduce_the_matrix():
    s1 = S.load_suite("l4s-tests/s1")
    assert len(s1.cells({"rate": ["50Mbit"]})) == 96
    assert len(s1.cells({"rate": ["50Mbit"], "qdisc": ["pfifo"]})) == 24
    assert len(s1.cells(S.parse_filters(["cc=prague-prague,cubic-cubic", "rtt=20/20"]))) == 2 * 4 * 2


def test_bad_filter_key_is_one_clear_error():
    s1 = S.load_suite("l4s-tests/s1")
    with pytest.raises(S.SuiteError) as e:
        s1.cells({"bandwidth": ["50Mbit"]})
    msg = str(e.value)
    assert "\n" not in msg and "no axis 'bandwidth'" in msg and "rate, qdisc, rtt, cc" in msg
    with pytest.raises(S.SuiteError, match="not a value of rate"):
        s1.cells({"rate": ["40Mbit"]})


def test_s1_cells_map_axis_values_onto_scenario_keys():
    s1 = S.load_suite("l4s-tests/s1")
    by = {c.id: c for c in s1.cells()}
    c = by["10Mbit_pfifo_160-10_cubic-prague"]
    sc = c.scenario
    assert sc["bottleneck"] == {"rate": "10Mbit", "qdisc": "pfifo limit 200"}
    assert c.shown["qdisc"] == "pfifo(200)"
    assert [f["rtt"] for f in sc["flows"]] == ["160ms", "10ms"]
    assert [(f["cc"], f["ecn"]) for f in sc["flows"]] == [("cubic", "rfc3168"), ("prague", "l4s")]
    assert sc["duration"] == "180s" and sc["metrics"]["steady_window"] == "60s"
    assert by["50Mbit_pfifo_10-10_cubic-cubic"].scenario["bottleneck"]["qdisc"] == "pfifo limit 1000"
    assert by["50Mbit_cnq_codel_af_10-10_cubic-cubic"].scenario["bottleneck"][
        "qdisc"
    ] == "cnq_codel_af bandwidth 50Mbit"
    s6 = S.load_suite("l4s-tests/s6")
    noecn = [c for c in s6.cells() if c.params["ecn"] == "noecn"]
    assert noecn and all(c.scenario["flows"][1]["ecn_rewrite"] == "not-ect" for c in noecn)
    assert all("ecn_rewrite" not in c.scenario["flows"][1] for c in s6.cells() if c.params["ecn"] == "ecn")
    s13 = S.load_suite("l4s-tests/s13")
    c = s13.cells({"rtt": ["80ms"], "classic": ["reno"], "ecn": ["noecn"]})[0]
    assert [f["rtt"] for f in c.scenario["flows"]] == ["80ms", "80ms"]
    assert c.scenario["flows"][0] == {"cc": "reno", "ecn": "rfc3168", "rtt": "80ms", "ecn_rewrite": "not-ect"}
    assert c.scenario["flows"][1]["start"] == "10s"


def test_every_builtin_scenario_is_accepted_by_the_engine():
    for name in S.builtin_suites():
        for run in S.plan_runs(S.load_suite(name), Path("unused"), seeds=1):
            # a 1 ms run checks every key (ScenarioError if one is wrong); starts after it are moved to 0
            _sim.run(run.text, None, ["duration=1ms", *_early(run.cell.scenario)])


def _early(sc: dict) -> list[str]:
    """Overrides that move every start, stop and change time into a 1 ms run."""
    out = []
    for key in ("flows", "workloads", "transients", "media", "udp"):
        for i, f in enumerate(sc.get(key, [])):
            out += [f"{key}[{i}].{k}={v}" for k, v in (("start", "0s"), ("stop", "1ms"), ("start_jitter", "100us")) if k in f or (key == "workloads" and k == "stop")]
    for i, _ in enumerate(sc.get("bottleneck", {}).get("changes", [])):
        out.append(f"bottleneck.changes[{i}].at=500us")
    if "spike_after" in sc.get("metrics", {}):
        out.append("metrics.spike_after=0s")
    return out


def test_key_paths_templates_rules_and_exclusions(tmp_path):
    doc = {"flows": [{"cc": "cubic"}, {"cc": "reno"}]}
    S.set_key(doc, "flows[*].rtt", "20ms")
    S.set_key(doc, "flows[1]", {"cc": "prague", "ecn": "l4s"})
    S.set_key(doc, "metrics.step", "10ms")
    assert doc == {
        "flows": [{"cc": "cubic", "rtt": "20ms"}, {"cc": "prague", "rtt": "20ms", "ecn": "l4s"}],
        "metrics": {"step": "10ms"},
    }
    with pytest.raises(S.SuiteError, match="out of range"):
        S.set_key(doc, "flows[2].cc", "x")
    ctx = {"n": S.TVar(3), "rtt": S.TVar("20/10", ("20", "10"))}
    assert S.render("{n}", ctx) == 3 and S.render("x{n}", ctx) == "x3" and S.render("{rtt[1]}ms", ctx) == "10ms"
    with pytest.raises(S.SuiteError, match="unknown variable 'm'"):
        S.render("{m}", ctx)

    f = tmp_path / "mini.toml"
    f.write_text(
        """
title = "mini"
[base]
duration = "2s"
[base.bottleneck]
rate = "10Mbit"
[[base.flows]]
cc = "cubic"
rtt = "10ms"
count = 1
[[axes]]
name = "n"
values = [{ label = "one", vars = { k = 1 } }, { label = "two", vars = { k = 2 } }]
set = { "flows[0].count" = "{k}" }
[[axes]]
name = "q"
values = ["pfifo", "fq_codel"]
set = { "bottleneck.qdisc" = "{q}" }
[[rules]]
when = { q = "fq_codel" }
set = { "duration" = "3s" }
[[exclude]]
n = "two"
q = "pfifo"
"""
    )
    mini = S.load_suite(str(f))
    cells = mini.cells()
    assert [c.id for c in cells] == ["one_pfifo", "one_fq_codel", "two_fq_codel"]
    assert cells[2].scenario["flows"][0]["count"] == 2
    assert [c.scenario["duration"] for c in cells] == ["2s", "3s", "3s"]


def test_unknown_keys_in_a_suite_file_are_errors(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[base]\nduration = "1s"\n[[axes]]\nname = "a"\nvalues = ["x"]\nsett = {}\n')
    with pytest.raises(S.SuiteError, match="unknown key"):
        S.load_suite(str(f))


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "s6"
    proc = run_cli("suite", "run", *TINY, "--jobs", "2", "--out", out)
    assert proc.returncode == 0, proc.stderr
    return proc, out


def test_tiny_suite_writes_report_results_and_run_files(tiny):
    proc, out = tiny
    assert "4 runs (4 run, 0 reused, 0 failed)" in proc.stdout
    report = (out / "REPORT.md").read_text()
    assert RATIO_HEADER in report
    lines = [l for l in report.splitlines() if l.startswith("| 50Mbit |")]
    assert len(lines) == 4
    assert "| pie | prague(20ms) |" in lines[0] and "cubic-ecn(20ms)" in lines[0]
    assert "cubic-noecn(20ms)" in lines[2]
    assert ":1 | [plot](runs/cell=cubic_ecn_pie/seed=1/throughput_rtt.png) |" in lines[0]
    assert "Made by `aqmlab suite run l4s-tests/s6 --filter classic=cubic --filter qdisc=pie,red_400000 --set duration=4s`" in report
    rows = _rows(out / "results.csv")
    assert len(rows) == 4
    for col in ("suite", "cell", "seed", "classic", "ecn", "qdisc", "dss1", "dss2", "goodput1", "jain", "ratio", "util", "sojourn_p50", "sojourn_p99", "run_dir"):
        assert col in rows[0], col
    assert {r["qdisc"] for r in rows} == {"pie", "red_400000"} and {r["ecn"] for r in rows} == {"ecn", "noecn"}
    assert all(float(r["dss1"]) > 0 and r["status"] == "ok" for r in rows)
    run_dir = out / rows[0]["run_dir"]
    assert {p.name for p in run_dir.iterdir()} == {"scenario.toml", "manifest.json", "summary.json", "timeseries.parquet", "throughput_rtt.png"}
    # the run directory's scenario re-runs with the plain CLI
    code, _, stderr = cli("run", run_dir / "scenario.toml", "--out", run_dir.parent / "rerun", "--quiet", "--no-plot")
    assert code == 0, stderr
    a = json.loads((run_dir / "summary.json").read_text())
    b = json.loads((run_dir.parent / "rerun" / "summary.json").read_text())
    b.pop("wall_seconds")
    assert a == b


def test_resume_skips_finished_runs_and_reruns_stale_ones(tiny, tmp_path):
    _, out = tiny
    summaries = sorted(out.glob("runs/*/seed=*/summary.json"))
    before = {p: p.stat().st_mtime_ns for p in summaries}
    code, stdout, stderr = cli("suite", "run", *TINY, "--jobs", "2", "--out", out, "--no-plots")
    assert code == 0, stderr
    assert "(0 run, 4 reused, 0 failed)" in stdout
    assert {p: p.stat().st_mtime_ns for p in summaries} == before
    # a half-finished run (no summary.json) and a run of another scenario are not "done"
    runs = S.plan_runs(S.load_suite("l4s-tests/s6"), out, filters={"classic": ["cubic"], "qdisc": ["pie", "red_400000"]},
                       overrides=S.parse_overrides(["duration=4s"]))
    assert all(runner.is_done(r) for r in runs)
    other = S.plan_runs(S.load_suite("l4s-tests/s6"), out, filters={"classic": ["cubic"], "qdisc": ["pie"]},
                        overrides=S.parse_overrides(["duration=3s"]))
    assert not any(runner.is_done(r) for r in other)
    d = tmp_path / "half"
    d.mkdir()
    (d / "scenario.toml").write_text(runs[0].text)
    half = S.RunSpec(runs[0].cell, runs[0].seed, 0, d, "half", runs[0].text)
    assert not runner.is_done(half)



def test_runs_from_before_format_version_are_reused_and_reported_alike(tiny, tmp_path):
    import shutil

    _, done = tiny
    out = tmp_path / "s6"
    shutil.copytree(done, out)
    import hashlib

    for p in out.glob("runs/*/seed=*/summary.json"):
        doc = json.loads(p.read_text())
        assert doc.pop("format_version") == 1
        p.write_text(json.dumps(doc, indent=2) + "\n")  # as written before the field existed
        m = json.loads((p.parent / "manifest.json").read_text())  # and hashed as such
        m["files"]["summary.json"] = hashlib.sha256(p.read_bytes()).hexdigest()
        (p.parent / "manifest.json").write_text(json.dumps(m))
    code, stdout, stderr = cli("suite", "run", *TINY, "--jobs", "2", "--out", out)
    assert code == 0, stderr
    assert "(0 run, 4 reused, 0 failed)" in stdout
    assert (out / "REPORT.md").read_bytes() == (done / "REPORT.md").read_bytes()
    assert (out / "results.csv").read_bytes() == (done / "results.csv").read_bytes()


def test_a_summary_from_a_newer_format_stops_the_report_with_one_line(tiny, tmp_path):
    import shutil

    _, done = tiny
    out = tmp_path / "s6"
    shutil.copytree(done, out)
    p = sorted(out.glob("runs/*/seed=*/summary.json"))[0]
    doc = json.loads(p.read_text())
    doc["format_version"] = 99
    p.write_text(json.dumps(doc, indent=2) + "\n")
    code, stdout, stderr = cli("suite", "report", *TINY, "--out", out)
    assert code == 2
    assert stderr.count("\n") == 1 and "format_version 99 is newer than this aqmlab reads (1)" in stderr
    assert str(p) in stderr


def test_suite_command_quotes_like_a_shell_whatever_the_form():
    from aqmlab import report as R

    typed = S.suite_command("l4s-tests/s6", ["classic=cubic", "qdisc=pie,red_400000"], 3, ["duration=4s", "flows[0].rtt=a b"])
    parsed = S.suite_command(
        "l4s-tests/s6", {"classic": ["cubic"], "qdisc": ["pie", "red_400000"]}, 3, [("duration", "4s"), ("flows[0].rtt", "a b")]
    )
    assert typed == parsed == (
        "aqmlab suite run l4s-tests/s6 --filter classic=cubic --filter qdisc=pie,red_400000 --seeds 3 "
        "--set duration=4s --set 'flows[0].rtt=a b'"
    )
    assert S.suite_command("x", {}, None, [("k", [1, 2]), ("on", True)]) == "aqmlab suite run x --set 'k=[1, 2]' --set on=true"
    # one Markdown renderer for the report's and the validation's tables
    assert R.markdown_table(["a", "b|c"], [["x|y", "1"]], ["l", "r"]) == "| a | b|c |\n| --- | ---: |\n| x\\|y | 1 |"
    assert R.Table("t", ["a", "Plot"], [["1", "p"]], align=["r", "l"]).markdown(drop=("Plot",)) == "| a |\n| ---: |\n| 1 |"

def test_seeds_give_rows_per_seed_and_mean_spread(tmp_path):
    out = tmp_path / "seeds"
    code, _, stderr = cli("suite", "run", "l4s-tests/s6", "--filter", "classic=reno", "--filter", "ecn=noecn", "--filter",
                          "qdisc=pie", "--set", "duration=4s", "--seeds", "2", "--jobs", "1", "--no-plots", "--out", out)
    assert code == 0, stderr
    rows = _rows(out / "results.csv")
    assert [r["seed"] for r in rows] == ["1", "2"] and rows[0]["cell"] == rows[1]["cell"]
    assert rows[0]["dss2"] != rows[1]["dss2"]  # different seeds, different runs
    report = (out / "REPORT.md").read_text()
    line = next(l for l in report.splitlines() if l.startswith("| 50Mbit |"))
    assert line.count(" ± ") >= 3  # DSS1, DSS2 and the ratio
    assert "Over 2 seeds per row: mean ± sample standard deviation" in report


def test_same_cell_is_byte_identical_with_one_or_two_jobs(tmp_path):
    args = ["l4s-tests/s13", "--filter", "rtt=20ms", "--filter", "classic=cubic", "--set", "duration=3s",
            "--set", "flows[1].start=1s", "--no-plots"]
    a, b = tmp_path / "a", tmp_path / "b"
    for out, jobs in ((a, "1"), (b, "2")):
        code, _, stderr = cli("suite", "run", *args, "--jobs", jobs, "--out", out)
        assert code == 0, stderr
    files = sorted(p.relative_to(a) for p in a.glob("runs/*/seed=*/summary.json"))
    assert len(files) == 2
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
        assert "wall_seconds" not in json.loads((a / rel).read_text())
    assert (a / "results.csv").read_bytes() == (b / "results.csv").read_bytes()
    assert (a / "REPORT.md").read_bytes() == (b / "REPORT.md").read_bytes()


# One S1 row and one S6 row of 3 s (the other comparisons are left out to stay fast).
VAL_TINY = ["--set", "duration=3s", "--no-plots", "--jobs", "2", "--only", "l4s-tests-s1", "--only", "l4s-tests-s6",
            "--filter", "qdisc=dualpi2,pie", "--filter", "rtt=10/10", "--filter", "cc=prague-cubic",
            "--filter", "classic=cubic", "--filter", "ecn=ecn"]


def _stack_of(run) -> str:
    import tomllib

    return tomllib.loads(run.text).get("stack", "linux")


def test_validate_plans_five_seeds_on_the_study_profile_and_on_linux(tmp_path):
    """Nothing runs: the plan of a default validation has 5 seeds per cell (a suite that
    declares more keeps its own), the study's profile under DIR/<suite> and stack=linux under
    DIR/<suite>@linux."""
    from aqmlab.validate import plan_validation

    plan = {c.key: passes for c, _, passes in plan_validation(tmp_path, filters={"qdisc": ["pie"]})}
    s6 = plan["l4s-tests-s6"]
    assert [(p.kind, p.label) for p in s6] == [("profile", "l4steam-2020"), ("linux", "linux")]
    assert [p.out_dir for p in s6] == [tmp_path / "l4s-tests/s6", tmp_path / "l4s-tests/s6@linux"]
    for p, stack in zip(s6, ("l4steam-2020", "linux")):
        assert p.seeds == 5
        assert len(p.runs) == 5 * len({r.cell.id for r in p.runs}) > 0
        assert sorted({r.seed for r in p.runs}) == [1, 2, 3, 4, 5]
        assert {_stack_of(r) for r in p.runs} == {stack}
        assert all(r.run_dir.is_relative_to(p.out_dir) for r in p.runs)
    assert "--set stack=linux" in s6[1].command and "stack" not in s6[0].command
    # Järvinen & Kojo (ns-2.35: the ns2-2013 profile): its own 100 replications on the
    # study's profile and again on linux
    jk = plan["jarvinen-kojo-q95"]
    assert [(p.kind, p.label, p.seeds) for p in jk] == [("profile", "ns2-2013", 100), ("linux", "linux", 100)]
    # --seeds overrides both passes
    s1 = {c.key: ps for c, _, ps in plan_validation(tmp_path, seeds=2, only=["l4s-tests-s1"])}["l4s-tests-s1"]
    assert [p.seeds for p in s1] == [2, 2] and {r.seed for r in s1[1].runs} == {1, 2}


def test_validate_linux_pass_is_dropped_or_not_doubled(tmp_path):
    from aqmlab.validate import plan_validation

    def passes(**kw):
        return next(ps for c, _, ps in plan_validation(tmp_path, only=["l4s-tests-s6"], **kw))

    assert [p.label for p in passes(linux=False)] == ["l4steam-2020"]
    # the user's own stack=linux: one pass, in the linux directory (reusing a full validation's)
    only = passes(overrides=[("duration", "3s"), ("stack", "linux")])
    assert [(p.kind, p.label, p.out_dir) for p in only] == [("linux", "linux", tmp_path / "l4s-tests/s6@linux")]
    assert {_stack_of(r) for r in only[0].runs} == {"linux"}
    full = passes(overrides=[("duration", "3s")])
    assert [r.text for r in only[0].runs] == [r.text for r in full[1].runs]
    # another stack replaces the study's in the first pass; the linux pass stays linux
    other = passes(overrides=[("stack", "l4steam-2024")])
    assert [p.label for p in other] == ["l4steam-2024", "linux"]
    assert {_stack_of(r) for r in other[1].runs} == {"linux"}


def test_validate_dry_run_prints_the_plan(tmp_path):
    code, stdout, stderr = cli("validate", "--dry-run", "--out", tmp_path, "--only", "l4s-tests-s6", "--filter", "qdisc=pie")
    assert code == 0, stderr
    assert stdout.splitlines() == [
        f"l4s-tests-s6: l4steam-2020 (study): 4 cells x 5 seeds = 20 runs (0 finished) -> {tmp_path / 'l4s-tests/s6'}",
        f"l4s-tests-s6: linux (linux pass): 4 cells x 5 seeds = 20 runs (0 finished) -> {tmp_path / 'l4s-tests/s6@linux'}",
    ]
    assert not any(tmp_path.iterdir())


def test_validate_on_a_tiny_subset(tmp_path):
    out = tmp_path / "val"
    code, _, stderr = cli("validate", "--out", out, *VAL_TINY, "--seeds", "2")
    assert code == 0, stderr
    text = (out / "VALIDATION.md").read_text()
    assert "## l4s-tests Scenario 1 fairness table, 50 Mbit/s (stack: l4steam-2020 vs linux)" in text
    assert "## l4s-tests Scenario 6: Prague vs a classic flow in one RFC3168 queue (stack: l4steam-2020 vs linux)" in text
    assert "| measure | l4steam-2020 (study's profile) | linux (today's stack) |" in text
    assert "| rows compared | 1 of 96 published (95 without a simulated run) | 1 of 96 published (95 without a simulated run) |" in text
    assert "| rows compared | 1 of 24 published (23 without a simulated run) | 1 of 24 published (23 without a simulated run) |" in text
    assert "| rows where the same flow wins |" in text and "ΔJain" in text
    assert "| simulated ratio within a factor of 2 of the published |" in text
    assert ("| qdisc | CC1 (RTT) | CC2 (RTT) | DSS1 published / l4steam-2020 / linux | DSS2 published / l4steam-2020 / linux "
            "| Jain's published / l4steam-2020 / linux | same winner (l4steam-2020 / linux) |") in text
    assert "| qdisc | CC2 (RTT) | DSS1 (prague) published / l4steam-2020 / linux | DSS2 published / l4steam-2020 / linux | ratio published / l4steam-2020 / linux |" in text
    # every simulated number carries its spread over the 2 seeds
    s1_row = next(l for l in text.splitlines() if l.startswith("| dualpi2 | prague(10ms) | cubic(10ms) |"))
    s6_row = next(l for l in text.splitlines() if l.startswith("| pie | cubic-ecn(20ms) |"))
    assert s1_row.count(" ± ") == 6, s1_row  # DSS1, DSS2, Jain on both stacks
    assert s6_row.count(" ± ") == 6, s6_row  # DSS1, DSS2, ratio on both stacks
    for d in ("l4s-tests/s1", "l4s-tests/s1@linux", "l4s-tests/s6", "l4s-tests/s6@linux"):
        assert len(list((out / d).glob("runs/*/seed=*/summary.json"))) == 2, d
        assert (out / d / "REPORT.md").is_file() and (out / d / "results.csv").is_file()
    assert 'stack = "linux"' in next((out / "l4s-tests/s6@linux").glob("runs/*/seed=1/scenario.toml")).read_text()
    assert 'stack = "l4steam-2020"' in next((out / "l4s-tests/s6").glob("runs/*/seed=1/scenario.toml")).read_text()

    # --no-linux: the same runs (reused), no linux column
    code, _, stderr = cli("validate", "--out", out, *VAL_TINY, "--seeds", "2", "--no-linux", "--report", tmp_path / "nolinux.md")
    assert code == 0, stderr
    text = (tmp_path / "nolinux.md").read_text()
    assert "(stack: l4steam-2020)" in text and "| DSS1 published / l4steam-2020 |" in text
    assert "/ linux" not in text and "the linux pass was left out (`--no-linux`)" in text
    # the user's own stack=linux: one pass, reusing the linux runs
    code, _, stderr = cli("validate", "--out", out, *VAL_TINY, "--seeds", "2", "--set", "stack=linux", "--report", tmp_path / "linux.md")
    assert code == 0, stderr
    text = (tmp_path / "linux.md").read_text()
    assert "(stack: linux)" in text and "| DSS1 published / linux |" in text and "l4steam-2020" not in text
    assert text.count("`aqmlab suite run l4s-tests/s6 ") == 1


# --------------------------------------------------------------------------------------
# Error paths
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (["suite", "run", "l4s-tests/s99"], "unknown suite 'l4s-tests/s99'"),
        (["suite", "run", "l4s-tests/s1", "--filter", "bandwidth=50Mbit"], "has no axis 'bandwidth'"),
        (["suite", "run", "l4s-tests/s1", "--filter", "rate"], "expected AXIS=VALUE"),
        (["suite", "run", "l4s-tests/s1", "--filter", "rate=5Mbit"], "not a value of rate"),
        (["suite", "run", "l4s-tests/s1", "--set", "duration"], "expected KEY=VALUE"),
        (["suite", "run", "l4s-tests/s1", "--executor", "slurm"], "expected local or dask"),
        (["validate", "--filter", "nope=1"], "no validated suite has an axis 'nope'"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle, tmp_path):
    code, stdout, stderr = cli(*args, "--out", tmp_path / "o")
    assert code == 2, (stdout, stderr)
    assert stderr.count("\n") == 1 and needle in stderr, stderr
    assert not (tmp_path / "o").exists()


def test_bad_input_from_the_real_command_line(tmp_path):
    proc = run_cli("suite", "run", "l4s-tests/s1", "--filter", "bandwidth=50Mbit", "--out", tmp_path / "o")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "has no axis 'bandwidth'" in proc.stderr


def test_dask_executor_without_dask_is_a_clean_error(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dask", None)  # as if not installed: importing it fails
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    code, _, stderr = cli("suite", "run", *TINY, "--executor", "dask", "--out", tmp_path / "o")
    assert code == 2
    assert stderr.strip() == "aqmlab: the dask executor needs dask.distributed: pip install 'dask[distributed]'"


def test_suite_list_and_show():
    code, stdout, stderr = cli("suite", "list")
    assert code == 0, stderr
    for name in ("l4s-tests/s1", "l4s-tests/s6", "l4s-tests/s8", "l4s-tests/s13"):
        assert name in stdout
    assert "192" in stdout
    code, stdout, stderr = cli("suite", "show", "l4s-tests/s1", "--filter", "rate=10Mbit", "--filter", "rtt=20/10",
                               "--filter", "cc=cubic-cubic", "--scenario")
    assert code == 0, stderr
    assert "4 cells" in stdout and 'qdisc = "dualpi2"' in stdout


def test_pivot_and_baseline_helpers_on_synthetic_records(tmp_path):
    """The table kinds the next suites need (J-K's median/quartile pivot, FCT's solo pairing)
    work on records without running anything."""
    from aqmlab import report as R

    f = tmp_path / "p.toml"
    f.write_text(
        '[base]\nduration = "1s"\n[base.bottleneck]\nrate = "2Mbit"\n'
        '[[axes]]\nname = "aqm"\nvalues = ["codel", "pie"]\n'
        '[[axes]]\nname = "load"\nvalues = [{ label = "1", show = "1+1" }, { label = "2", show = "2+2" }]\n'
        '[[axes]]\nname = "competitor"\nvalues = ["none", "cubic"]\n'
        '[[tables]]\nkind = "pivot"\nrows = "aqm"\ncolumns = "load"\nmetric = "bottleneck.sojourn_ms.p95"\nscale = 0.001\n'
        'where = { competitor = "none" }\n'
    )
    suite = S.load_suite(str(f))
    runs = S.plan_runs(suite, tmp_path / "o", seeds=3)
    recs = []
    for r in runs:
        p95 = {"codel": 90.0, "pie": 230.0}[r.cell.params["aqm"]] + 10 * r.replicate + (100 if r.cell.params["competitor"] == "cubic" else 0)
        recs.append(R.Record(r, {"bottleneck": {"sojourn_ms": {"p95": p95}}}, {}))
    t = R.build_table(suite.tables[0], suite, recs)
    assert t.headers == ["aqm", "1+1", "2+2"]
    assert t.rows[0] == ["codel", "0.100 [0.095–0.105]", "0.100 [0.095–0.105]"]
    pairs = R.with_baseline(recs, "competitor", "none")
    assert len(pairs) == 4 and all(b is not None and b[0].cell.params["competitor"] == "none" for _, b in pairs)
    assert all(g[0].cell.params["aqm"] == b[0].cell.params["aqm"] for g, b in pairs)


def test_pivot_lines_compare_values_and_rank_order():
    from aqmlab.validate import pivot_lines

    pub = {("codel", "1+1"): 0.090, ("pie", "1+1"): 0.234, ("codel", "2+2"): 0.126, ("pie", "2+2"): 0.252}
    sim = {("codel", "1+1"): 0.100, ("pie", "1+1"): 0.200, ("codel", "2+2"): 0.300, ("pie", "2+2"): 0.250}
    text = "\n".join(pivot_lines(pub, sim, ["codel", "pie"], ["1+1", "2+2"], row_title="AQM"))
    assert "- values compared: 4 of 4 published" in text
    assert "- columns with the same rank order: 1 of 2" in text
    assert "| codel | 0.090 / 0.100 | 0.126 / 0.300 |" in text
    assert "| 2+2 | codel, pie | pie, codel | **no** |" in text
    # two stacks side by side, each value shown with its spread
    lx = {k: v * 2 for k, v in pub.items()}
    text = "\n".join(pivot_lines(pub, {"l4steam-2020": sim, "linux": lx}, ["codel", "pie"], ["1+1", "2+2"], row_title="AQM",
                                  shown={"linux": {("codel", "1+1"): "0.180 [0.170–0.190]"}}))
    assert "- l4steam-2020: columns with the same rank order: 1 of 2" in text
    assert "- linux: columns with the same rank order: 2 of 2" in text
    assert "- linux: absolute difference: median 0.180, worst 0.252" in text
    assert "| codel | 0.090 / 0.100 / 0.180 [0.170–0.190] | 0.126 / 0.300 / 0.252 |" in text
    assert "| column | published | l4steam-2020 | linux | same order (l4steam-2020 / linux) |" in text
    assert "| 2+2 | codel, pie | pie, codel | codel, pie | **no** / yes |" in text


def test_fct_harm_rows_are_derived_from_the_solo_run(tmp_path):
    """l4s-tests/fct at one RTT with short durations: each loaded cell's harm row pairs it with
    the solo cell of the same RTT (report.with_baseline) and matches analysis.fct_harm."""
    from aqmlab.analysis import fct_harm

    out = tmp_path / "fct"
    code, _, stderr = cli("suite", "run", "l4s-tests/fct", "--filter", "rtt=20", "--out", out, "--no-plots", "--jobs", "2",
                          "--set", "duration=12s", "--set", "workloads[0].start=2s", "--set", "workloads[0].stop=8s",
                          "--set", "workloads[0].mean_interarrival=100ms")
    assert code == 0, stderr
    text = (out / "REPORT.md").read_text()
    section = text.split("## FCT harm per RTT and competitor")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| 20 |")]
    assert [r.split(" | ")[1] for r in rows] == ["cubic", "prague"]
    summ = {c: json.loads((out / f"runs/cell=20_{c}/seed=1/summary.json").read_text())["workloads"][0] for c in ("none", "cubic", "prague")}
    for row, c in zip(rows, ("cubic", "prague")):
        cells = [x.strip() for x in row.strip("|").split("|")]
        assert float(cells[2]) == pytest.approx(summ["none"]["fct_geomean_s"], abs=6e-4)
        assert float(cells[3]) == pytest.approx(summ[c]["fct_geomean_s"], abs=6e-4)
        assert float(cells[8]) == pytest.approx(fct_harm(summ["none"]["fct_geomean_s"], summ[c]["fct_geomean_s"]), abs=6e-4)
    assert "| RTT (ms) | competitor | solo geomean (s) | loaded geomean (s) |" in section


def test_a_one_process_suite_does_not_freeze_its_runs_garbage(tmp_path, monkeypatch):
    """run_suite freezes the records it loads out of the cyclic GC (gc.freeze) while the runs go
    on. At -j 1 the runs run in this process: freezing there would also freeze each run's
    uncollected garbage (a closed matplotlib figure's reference cycles, ...) until the report
    is written, so the process would grow with every run. Each run here leaves a reference
    cycle behind; the next run checks that the collector can still free it."""
    import gc
    import weakref

    assert gc.get_freeze_count() == 0
    real = runner.execute_run
    left: list[weakref.ref] = []

    class Cycle:
        pass

    def execute(task):
        gc.collect()
        assert all(r() is None for r in left), "an earlier run's garbage was frozen out of the collector"
        res = real(task)
        c = Cycle()  # garbage in a cycle, left for the collector, as the run's last act
        c.me = c
        left.append(weakref.ref(c))
        del c
        return res

    monkeypatch.setattr(runner, "execute_run", execute)
    args = ["l4s-tests/s13", "--filter", "rtt=20ms", "--filter", "classic=cubic", "--set", "duration=2s", "--set", "flows[1].start=1s", "--no-plots"]
    gc.disable()  # no automatic collection between a run's end and the suite's handling of it
    try:
        code, stdout, stderr = cli("suite", "run", *args, "--jobs", "1", "--out", tmp_path / "s")
    finally:
        gc.enable()
    assert code == 0, stderr + stdout
    assert len(left) == 2
    assert gc.get_freeze_count() == 0  # unfrozen once the report is written


_FAULTS = r"""
import json, resource, sys, tempfile
from pathlib import Path
from aqmlab import runner, suite as S
runner._init_worker(False)
runs = S.plan_runs(S.load_suite("jarvinen-kojo"), Path(tempfile.mkdtemp()), seeds=8)[:8]
tasks = [{"text": r.text, "run_dir": str(r.run_dir), "plot": False, "flent": False, "command": None,
          "run": r.rel_dir.removeprefix("runs/"), "cell": r.cell.id, "pcap": False, "html": False, "html_js": ""}
         for r in runs]
faults = []
for t in tasks:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    assert runner.execute_run(t)["ok"]
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


def test_a_worker_keeps_its_freed_memory_between_runs():
    """A suite worker keeps freed memory for its next run (runner._keep_freed_memory: glibc's
    mmap and trim thresholds); api.release_memory's malloc_trim after the engine and after each
    writer would give it back, and every run would fault its pages in again (about 1,000 page
    faults a J-K run instead of a few). glibc only."""
    import ctypes
    import subprocess
    import sys

    try:
        ctypes.CDLL(None).mallopt  # noqa: B018
        ctypes.CDLL(None).malloc_trim  # noqa: B018
    except (OSError, AttributeError, TypeError):
        pytest.skip("not glibc")
    p = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    faults = json.loads(p.stdout)
    # The first runs fault the heap in; after them, a run reuses what the previous one freed.
    # The mean of the later runs, not their maximum: a run larger than every one before it
    # (these are different cells) grows the heap once (245 faults seen in a clean CI run),
    # while giving the heap back makes every run fault about 1,000 pages in.
    later = faults[4:]
    assert sum(later) / len(later) < 200, faults


class _FakeLibc:
    """ctypes.CDLL(None) with a recording mallopt (and no malloc_trim)."""

    def __init__(self, calls: list) -> None:
        self.mallopt = lambda option, value: calls.append((option, value))


def _record_mallopt(monkeypatch) -> list:
    import ctypes

    from aqmlab import api

    calls: list = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: _FakeLibc(calls))
    monkeypatch.setattr(api, "_TRIM", api._TRIM)  # api.keep_freed_memory() is undone after the test
    return calls


def test_malloc_is_tuned_only_in_processes_aqmlab_owns(tmp_path, monkeypatch):
    """glibc's mmap and trim thresholds (runner._keep_freed_memory) outlive the call that sets
    them, and the dynamic mmap threshold cannot be restored: run_suite with one job, which runs
    the runs in the caller's process, leaves malloc alone for a library caller (a notebook) and
    tunes it for the CLI (owns_process) and in pool workers (_init_worker)."""
    from aqmlab import runner

    calls = _record_mallopt(monkeypatch)
    monkeypatch.setattr(runner, "execute_run", lambda t: {"ok": False, "run_dir": t["run_dir"], "error": "not run"})
    s = S.load_suite("l4s-tests/s6")
    kw = dict(filters={"classic": ["cubic"]}, jobs=1, plots=False, progress=False, report=False)
    out = runner.run_suite(s, tmp_path / "lib", **kw)
    assert len(out.failed) > 1 and calls == []
    runner.run_suite(s, tmp_path / "cli", owns_process=True, **kw)
    tuned = [(-3, runner.MALLOC_KEEP_BYTES), (-1, 2 * runner.MALLOC_KEEP_BYTES)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    assert calls == tuned
    calls.clear()
    runner._init_worker(False)  # what every pool worker runs first
    assert calls == tuned


def test_the_cli_runs_a_suite_as_the_owner_of_its_process(monkeypatch):
    from types import SimpleNamespace

    from aqmlab import cli, runner

    seen: dict = {}

    def fake_run_suite(suite, out_dir, **kw):
        seen.update(kw)
        return SimpleNamespace(failed=[])

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    cli.app(["suite", "run", "l4s-tests/s6", "-j", "1", "-q"], prog_name="aqmlab", standalone_mode=False)
    assert seen["owns_process"] is True and seen["jobs"] == 1


def _typed(o):
    """A JSON value with every node's type and every dict's key order spelt out."""
    if isinstance(o, dict):
        return ("dict", [(k, _typed(v)) for k, v in o.items()])
    if isinstance(o, list):
        return ("list", [_typed(v) for v in o])
    return (type(o).__name__, repr(o))


def test_a_runs_answer_carries_exactly_the_summary_on_disk(tmp_path):
    """run_suite makes a finished run's record from the summary in execute_run's answer instead
    of reading summary.json again: that summary must be what json.loads gives of the file (same
    keys in the same order, same types, same values: floats to the bit, -0.0 included), and the
    record the same as load_record's."""
    import pickle

    from aqmlab import report as rep

    runs = S.plan_runs(S.load_suite("jarvinen-kojo"), tmp_path, seeds=1, overrides=S.parse_overrides(["duration=3s"]))
    for r in (runs[0], runs[-1]):  # one flow each way, and six each way with another qdisc
        task = {"text": r.text, "run_dir": str(r.run_dir), "plot": False, "command": "test", "run": r.rel_dir, "cell": r.cell.id}
        res = runner.execute_run(task)
        assert res["ok"], res
        sent = pickle.loads(pickle.dumps(res["summary"]))  # as the pool's pipe carries it
        on_disk = json.loads(r.summary_path.read_text(encoding="utf-8"))
        assert _typed(sent) == _typed(on_disk)
        assert rep.record_of_summary(r, sent) == rep.load_record(r)
