"""`aqmlab scenario schema`: the JSON Schema generated from the engine's scenario structs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from aqmlab._sim import resolve, scenario_schema
from aqmlab.suite import builtin_suites, load_suite, plan_runs

from conftest import REPO, run_cli

SCENARIOS = sorted((REPO / "scenarios").glob("*.toml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(scenario_schema())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def _errors(validator: jsonschema.Draft7Validator, doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_shipped_scenario_validates(validator: jsonschema.Draft7Validator, path: Path) -> None:
    assert _errors(validator, tomllib.loads(path.read_text())) == []


def test_every_suite_cell_validates(validator: jsonschema.Draft7Validator) -> None:
    suites = builtin_suites()
    assert len(suites) > 3
    checked = 0
    for name in suites:
        runs = plan_runs(load_suite(name), Path("/nonexistent"), seeds=1)
        assert runs, name
        for r in runs:
            errs = _errors(validator, tomllib.loads(r.text))
            assert errs == [], f"{name} {r.rel_dir}: {errs}"
            checked += 1
    assert checked > 100


def test_schema_refuses_what_the_engine_refuses(validator: jsonschema.Draft7Validator) -> None:
    good = tomllib.loads((REPO / "scenarios" / "two-cubic-pfifo.toml").read_text())
    assert _errors(validator, good) == []
    cases = {
        "unknown top-level key": {**good, "durration": "5s"},
        "unknown bottleneck key": {**good, "bottleneck": {**good["bottleneck"], "qdsic": "pfifo"}},
        "unknown flow key": {**good, "flows": [{**good["flows"][0], "rt": "20ms"}]},
        "time without unit": {**good, "duration": "30"},
        "rate without unit": {**good, "bottleneck": {**good["bottleneck"], "rate": "50"}},
        "unknown qdisc kind": {**good, "bottleneck": {**good["bottleneck"], "qdisc": "fq_kodel"}},
        "unknown stack": {**good, "stack": "linux-1.0"},
        "bad ecn mode": {**good, "flows": [{**good["flows"][0], "ecn": "l5s"}]},
        "missing duration": {k: v for k, v in good.items() if k != "duration"},
    }
    text_of = {"durration": 'durration = "5s"'}
    for what, doc in cases.items():
        assert _errors(validator, doc), what
    # ... and the engine refuses the first one too: the schema is not stricter than the engine.
    with pytest.raises(ValueError, match="durration"):
        resolve((REPO / "scenarios" / "two-cubic-pfifo.toml").read_text() + "\n" + text_of["durration"] + "\n")


def test_the_qdisc_table_form_and_legacy_media_flows_validate(validator: jsonschema.Draft7Validator) -> None:
    doc = {
        "duration": "2s",
        "seed": 3,
        "bottleneck": {"rate": "10Mbit", "qdisc": {"kind": "fq_codel", "target": "5ms"}},
        "flows": [
            {"cc": {"kind": "prague"}, "rtt": "20ms", "ecn": "l4s"},
            {"cc": "scream", "rtt": "25ms", "max_bitrate": "20Mbit"},
        ],
        "metrics": {"steady_window": "auto", "spike_thresholds": ["60ms"]},
    }
    assert _errors(validator, doc) == []


def test_cli_prints_and_writes_the_schema(tmp_path: Path) -> None:
    proc = run_cli("scenario", "schema")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["properties"]["bottleneck"] and printed["additionalProperties"] is False
    out = tmp_path / "aqmlab-scenario.schema.json"
    proc = run_cli("scenario", "schema", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == printed


def test_a_command_group_alone_prints_its_help() -> None:
    for args in [(), ("scenario",), ("suite",)]:
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"Usage: aqmlab {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND"), proc.stdout
        assert "Commands:" in proc.stdout
