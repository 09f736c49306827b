"""The ns-2.35 reference fixtures of the Järvinen & Kojo study (tests/golden/ns2/): that the
recorder measures what docs/metrics.md defines, that the committed fixtures are what ns-2
itself produces with tools/ns2/jk.tcl (provenance: reruns a few cases on Debian's ns, which
`make test-tools` installs), and that they are physically consistent."""

from __future__ import annotations

import math
import shutil

import pytest

import ns2ref

WIRE = 1040  # bytes of a data packet in jk.tcl (1000-byte segment + 40-byte TCP/IP header)
BUFFER_S = 100 * WIRE * 8 / 2e6  # a full 100-packet buffer drained at 2 Mbit/s


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(a, b, rel_tol=2e-5, abs_tol=1e-9)


def test_queue_metrics_follow_the_definitions(tmp_path):
    # A hand-made ns-2 queue trace of a 2 Mbit/s link: three packets; uid 2 is dropped at
    # enqueue ("+" then "d"), so it neither has a sojourn nor leaves backlog behind.
    lines = [
        "+ 1.000 1 2 tcp 10000 ------- 101 0.0 2.0 0 1",
        "+ 1.000 1 2 tcp 6000 ------- 101 0.0 2.0 1 2",
        "d 1.000 1 2 tcp 6000 ------- 101 0.0 2.0 1 2",
        "- 1.010 1 2 tcp 10000 ------- 101 0.0 2.0 0 1",
        "+ 1.020 1 2 tcp 10000 ------- 101 0.0 2.0 2 3",
        "+ 1.030 1 2 tcp 16000 ------- 101 0.0 2.0 3 4",  # backlog 26000 > 25000 and > 15000
        "- 1.050 1 2 tcp 10000 ------- 101 0.0 2.0 2 3",  # backlog 16000: > 15000 only
        "+ 2.000 1 2 tcp 100 ------- 101 0.0 2.0 4 5",  # 16100, still above 15000 at the end
    ]
    qt = tmp_path / "q.tr"
    qt.write_text("\n".join(lines) + "\n")
    m = ns2ref.jk().queue_metrics(qt, duration=3.0)
    assert (m["packets"], m["drops"]) == (2, 1)
    # Sojourns 10 ms and 30 ms: nearest-rank p50 = the first, p95 = p99 = max = the second.
    assert m["sojourn_p50"] == pytest.approx(10.0) and m["sojourn_max"] == pytest.approx(30.0)
    assert m["sojourn_p95"] == pytest.approx(30.0) and m["sojourn_mean"] == pytest.approx(20.0)
    # > 25000 bytes from 1.030 to 1.050; > 15000 from 1.030 until the end of the run (3.0).
    assert m["spike100ms_longest_s"] == pytest.approx(0.020)
    assert m["spike60ms_longest_s"] == pytest.approx(1.970)
    assert m["spike60ms_total_s"] == pytest.approx(1.970)
    assert m["peak_ms"] == pytest.approx(26000 * 8 / 2e6 * 1000)


def test_response_times_from_the_flows_file(tmp_path):
    f = tmp_path / "flows.txt"
    f.write_text(
        "meta aqm droptail n 2\nmeta g2start 0.25\n"
        "flow 1 1 180000 0.0 3.0\nflow 1 2 180000 0.0 4.0\n"
        "flow 2 1 180000 0.25 4.25\nflow 2 2 180000 0.25 2.25\n"
    )
    m = ns2ref.jk().flow_metrics(f)
    assert (m["response1_s"], m["response2_s"]) == (4.0, 4.0) and m["response_jain"] == pytest.approx(1.0)
    f.write_text(f.read_text().replace("2.25\n", "-1\n"))  # an unfinished flow: no response time
    m = ns2ref.jk().flow_metrics(f)
    assert m["response2_s"] is None and m["response_jain"] is None


@pytest.mark.parametrize("path", ["11ms", "101ms"])
def test_fixtures_are_complete_and_physical(path):
    rows = ns2ref.runs(path)
    summ = ns2ref.summary(path)
    assert rows and summ
    for (aqm, n), s in summ.items():
        cell = ns2ref.cell(aqm, n, path)
        assert cell, (aqm, n)
        assert [r["seed"] for r in cell] == list(range(1, len(cell) + 1))
        assert s["seeds"] >= len(cell)
    for r in rows:
        key = (r["aqm"], r["n"], r["seed"])
        # 360 kB per group in 1000-byte segments all crossed the bottleneck (plus SYNs and
        # retransmissions) when both groups finished.
        if r["response1_s"] is not None and r["response2_s"] is not None:
            assert r["packets"] >= 720 + 2 * r["n"], key
        assert r["sojourn_p50"] <= r["sojourn_p95"] <= r["sojourn_p99"] <= r["sojourn_max"], key
        # No packet waits longer than a full buffer takes to drain (the SYNs are smaller).
        assert r["sojourn_max"] <= BUFFER_S * 1000 + 1e-6, key
        assert r["spike100ms_longest_s"] <= r["spike60ms_longest_s"] <= r["spike60ms_total_s"] + 1e-9, key
        assert 0 <= r["g2start_s"] <= 0.65, key


# Cases rerun on Debian's stock ns-2.35 (DropTail and RED only: CoDel, sfqCoDel and PIE were
# recorded with a patched ns-2 that CI does not build). Each takes well under a second.
PROVENANCE = [("droptail", 2, 1), ("hred_wq0.02", 1, 3), ("hred_wq0.04", 4, 2)]


@pytest.mark.parametrize("aqm,n,seed", PROVENANCE)
def test_fixture_rows_are_what_ns2_produces(aqm, n, seed):
    ns = shutil.which("ns")
    if ns is None:
        pytest.skip("ns-2 is not installed (Debian package ns2; `make test-tools` installs it)")
    want = next(r for r in ns2ref.cell(aqm, n, "11ms") if r["seed"] == seed)
    got = ns2ref.jk().run_case(aqm, n, seed, want["duration_s"], 11, ns=ns)
    assert want["ns"] == got["ns"] == "debian-2.35"
    diff = {k: (want[k], got.get(k)) for k in want if not _close(want[k], got.get(k))}
    assert not diff, f"fixture row differs from ns-2's output: {diff}"


# The rows recorded on the patched build (tools/ns2/build-patched-ns2.sh), checked only where
# that build exists: AQMLAB_NS2_PATCHED / AQMLAB_NS2_PIE2013R name its two binaries.
PATCHED = [("codel", 4, 3, 11), ("sfq_codel", 6, 5, 11), ("pie", 2, 7, 11), ("pie2013r_update60ms", 6, 30, 101)]


@pytest.mark.parametrize("aqm,n,seed,rest", PATCHED)
def test_patched_rows_are_what_patched_ns2_produces(aqm, n, seed, rest):
    import os

    var = "AQMLAB_NS2_PIE2013R" if aqm.startswith("pie2013r") else "AQMLAB_NS2_PATCHED"
    ns = os.environ.get(var)
    if not ns:
        pytest.skip(f"{var} not set (the patched ns-2 of tools/ns2/build-patched-ns2.sh; CI does not build it)")
    path = "11ms" if rest == 11 else "101ms"
    want = next(r for r in ns2ref.cell(aqm, n, path) if r["seed"] == seed)
    got = ns2ref.jk().run_case(aqm, n, seed, want["duration_s"], rest, ns=ns)
    diff = {k: (want[k], got.get(k)) for k in want if not _close(want[k], got.get(k))}
    assert not diff, f"fixture row differs from the patched ns-2's output: {diff}"
