"""Crash safety of the output writer: a failure mid-way leaves no partial files."""

from __future__ import annotations

import json

import pytest

import aqmlab
from aqmlab import output, plot
from conftest import SCENARIO


@pytest.fixture(scope="module")
def result() -> aqmlab.RunResult:
    return aqmlab.run(SCENARIO, overrides=["duration=2s"])


def test_failure_while_plotting_leaves_no_summary_and_no_temp_files(result, tmp_path, monkeypatch):
    def boom(res, path):
        with open(path, "wb") as f:
            f.write(b"half a png")
        raise RuntimeError("killed while plotting")

    monkeypatch.setattr(plot, "plot_throughput_rtt", boom)
    with pytest.raises(RuntimeError):
        output.write_outputs(result, tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"timeseries.parquet", "timeseries.csv"}  # written before the failure, complete
    assert not (tmp_path / "summary.json").exists()


def test_failed_rewrite_keeps_previous_file(result, tmp_path, monkeypatch):
    output.write_outputs(result, tmp_path, plot=False)
    before = (tmp_path / "summary.json").read_bytes()

    def fail_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(output.os, "replace", fail_replace)
    with pytest.raises(OSError):
        output.write_outputs(result, tmp_path, plot=False)
    assert (tmp_path / "summary.json").read_bytes() == before
    assert json.loads(before)["sim_seconds"] == pytest.approx(2.0)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
