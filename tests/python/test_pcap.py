"""``aqmlab run --pcap``: the captures are valid pcap files that Wireshark's TCP analysis
(tshark) reads as the run's summary and series describe them.

The tshark tests need the Debian package ``tshark`` (``make test`` installs it,
``make tools-tshark``); without it they are skipped with a message saying so. The rest of
the file checks the format with a small reader of its own.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from aqmlab.api import run as api_run
from aqmlab.output import CLI_PCAP, SRV_PCAP

from conftest import run_cli

#: Two TCP flows through fq_codel (ECN on by default): "ecn" is CE-marked, "loss" loses
#: packets and retransmits; a ping probe; a workload of short downloads (the client opens
#: them); 8 s of 20 Mbit/s.
SCENARIO = """
name = "pcap-check"
duration = "8s"
seed = 3

[bottleneck]
rate = "20Mbit"
qdisc = "fq_codel"

[[flows]]
name = "ecn"
cc = "cubic"
rtt = "20ms"
ecn = "rfc3168"

[[flows]]
name = "loss"
cc = "cubic"
rtt = "40ms"

[[probes]]
name = "ping"
kind = "ping"
rtt = "20ms"

[[workloads]]
name = "web"
cc = "cubic"
rtt = "30ms"
direction = "down"
mean_interarrival = "500ms"
size_p5 = 20000
size_p95 = 200000
"""

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(
    TSHARK is None, reason="tshark is not installed (run `make tools-tshark`; Debian package tshark): pcap analysis tests skipped"
)


def client_port(endpoint_id: int) -> int:
    """The client end's port of endpoint ``endpoint_id`` (docs/outputs.md)."""
    return 32768 + endpoint_id % 28232


def read_pcap(path: Path) -> tuple[dict, list[tuple[int, bytes, int]]]:
    """A classic nanosecond pcap: its header fields and its records (time ns, bytes, orig_len)."""
    data = path.read_bytes()
    magic, vmaj, vmin, _zone, _sig, snaplen, linktype = struct.unpack_from("<IHHiIII", data, 0)
    records = []
    off = 24
    while off < len(data):
        sec, nsec, incl, orig = struct.unpack_from("<IIII", data, off)
        off += 16
        records.append((sec * 1_000_000_000 + nsec, data[off : off + incl], orig))
        off += incl
    assert off == len(data), "records end at the end of the file"
    return {"magic": magic, "version": (vmaj, vmin), "snaplen": snaplen, "linktype": linktype}, records


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("pcap")
    res = api_run(SCENARIO, pcap=(out / CLI_PCAP, out / SRV_PCAP))
    return res, out


def test_files_are_nanosecond_ethernet_pcaps_and_counts_match(captured) -> None:
    res, out = captured
    cap = res.summary["capture"]
    for name, key in ((CLI_PCAP, "cli_packets"), (SRV_PCAP, "srv_packets")):
        head, recs = read_pcap(out / name)
        assert head == {"magic": 0xA1B23C4D, "version": (2, 4), "snaplen": 128, "linktype": 1}
        assert len(recs) == cap[key] > 1000
        times = [t for t, _, _ in recs]
        assert times == sorted(times), "records in time order"
        assert all(len(b) == min(o, 128) for _, b, o in recs)
        assert times[-1] <= 8_000_000_000
    # Every packet is captured twice (sent and received) except those still in flight or
    # dropped on the way: the drops of the run's links account for the difference.
    sent, delivered = res.summary["packets"]["sent"], res.summary["packets"]["delivered"]
    assert cap["cli_packets"] + cap["srv_packets"] == sent + delivered


def test_capture_does_not_change_the_run(captured) -> None:
    res, _ = captured
    plain = api_run(SCENARIO)
    a = {k: v for k, v in res.summary.items() if k not in ("wall_seconds", "capture")}
    b = {k: v for k, v in plain.summary.items() if k != "wall_seconds"}
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_ce_marks_in_the_server_capture_are_the_receivers_count(captured) -> None:
    """Independent of tshark: the ECN field of data frames (IPv4 byte 1, TCP source port)."""
    res, out = captured
    _, recs = read_pcap(out / SRV_PCAP)
    ce = Counter()
    for _, b, _ in recs:
        if b[23] == 6 and b[15] & 3 == 3:
            ce[struct.unpack_from(">H", b, 34)[0]] += 1
    flows = {f["name"]: f for f in res.summary["flows"]}
    assert flows["ecn"]["ce_received"] > 10
    assert ce[client_port(0)] == flows["ecn"]["ce_received"]
    assert ce[client_port(1)] == flows["loss"]["ce_received"] == 0


def test_flow_filter_and_snaplen(tmp_path: Path) -> None:
    out = tmp_path / "run"
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    proc = run_cli("run", scen, "--out", out, "--no-plot", "--pcap-flows", "ping", "--pcap-snaplen", "60", "--set", "duration=2s")
    assert proc.returncode == 0, proc.stderr
    assert "cli.pcap" in proc.stdout
    for name in (CLI_PCAP, SRV_PCAP):
        head, recs = read_pcap(out / name)
        assert head["snaplen"] == 60
        assert recs and all(b[23] == 1 for _, b, _ in recs), "only the ping probe's ICMP"
        assert all(len(b) == 60 and o == 98 for _, b, o in recs)
    bad = run_cli("run", scen, "--out", tmp_path / "bad", "--pcap-flows", "nosuch", "--set", "duration=1s")
    assert bad.returncode != 0 and "nosuch" in bad.stderr and "known: ecn, loss, ping, web" in bad.stderr
    assert not (tmp_path / "bad" / CLI_PCAP).exists()


# --------------------------------------------------------------------------------------
# tshark
# --------------------------------------------------------------------------------------


def tshark_fields(path: Path, display_filter: str, *fields: str) -> list[list[str]]:
    args = [TSHARK, "-r", str(path), "-n", "-Y", display_filter, "-T", "fields"]
    for f in fields:
        args += ["-e", f]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    return [line.split("\t") for line in proc.stdout.splitlines() if line]


@needs_tshark
def test_tshark_reads_the_files_without_malformed_frames(captured) -> None:
    _, out = captured
    for name in (CLI_PCAP, SRV_PCAP):
        assert tshark_fields(out / name, "_ws.malformed || _ws.expert.severity == error", "frame.number") == []
        # The checksums are real: with validation on, none is bad.
        args = [TSHARK, "-r", str(out / name), "-n", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                "-o", "ip.check_checksum:TRUE", "-Y", "tcp.checksum.status == 0 || udp.checksum.status == 0 || ip.checksum.status == 0 || icmp.checksum.status == 0"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
        assert proc.stdout.strip() == "", proc.stdout[:500]


@needs_tshark
def test_tshark_counts_the_summarys_retransmissions_and_ce_marks(captured) -> None:
    res, out = captured
    flows = {f["name"]: f for f in res.summary["flows"]}
    # Retransmissions, seen leaving the sender (client side). Wireshark calls a resent
    # segment "out-of-order" instead of "retransmission" when it follows the highest
    # segment by less than its RTT estimate (tcp_analyze_sequence_number's ooo heuristic);
    # nothing reorders packets between a sender and its own tap, so at the sender every
    # segment below the highest seen is a retransmission and all four flags count.
    rtx = Counter(
        int(r[0])
        for r in tshark_fields(
            out / CLI_PCAP,
            "tcp.len > 0 && (tcp.analysis.retransmission || tcp.analysis.fast_retransmission"
            " || tcp.analysis.spurious_retransmission || tcp.analysis.out_of_order)",
            "tcp.srcport",
        )
    )
    fast = Counter(int(r[0]) for r in tshark_fields(out / CLI_PCAP, "tcp.analysis.fast_retransmission", "tcp.srcport"))
    assert 0 < fast[client_port(1)] <= flows["loss"]["fast_recoveries"] + flows["loss"]["rto_events"] + flows["loss"]["retransmits"]
    assert flows["loss"]["retransmits"] > 5
    for i, name in enumerate(("ecn", "loss")):
        assert rtx[client_port(i)] == flows[name]["retransmits"], (name, rtx)
    # CE marks, seen arriving at the receiver (server side).
    ce = Counter(int(r[0]) for r in tshark_fields(out / SRV_PCAP, "ip.dsfield.ecn == 3 && tcp.len > 0", "tcp.srcport"))
    for i, name in enumerate(("ecn", "loss")):
        assert ce[client_port(i)] == flows[name]["ce_received"], (name, ce)
    # ECE on the ACKs of the ECN flow and CWR on its data; neither on the other flow.
    ece = Counter(int(r[0]) for r in tshark_fields(out / CLI_PCAP, "tcp.flags.ece == 1 && tcp.flags.syn == 0", "tcp.dstport"))
    cwr = Counter(int(r[0]) for r in tshark_fields(out / CLI_PCAP, "tcp.flags.cwr == 1 && tcp.flags.syn == 0", "tcp.srcport"))
    assert ece[client_port(0)] > 0 and cwr[client_port(0)] > 0
    assert ece[client_port(1)] == cwr[client_port(1)] == 0
    # The handshakes: one SYN per TCP connection and tshark's stream index counts them.
    web = res.summary["workloads"][0]
    streams = {r[0] for r in tshark_fields(out / CLI_PCAP, "tcp.flags.syn == 1 && tcp.flags.ack == 0", "tcp.stream")}
    assert len(streams) == 2 + web["started"]


def _bins(t: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    idx = np.digitize(t, edges) - 1
    out = np.full(len(edges) - 1, np.nan)
    for k in range(len(edges) - 1):
        sel = v[(idx == k) & ~np.isnan(v)]
        if len(sel):
            out[k] = sel.mean()
    return out


@needs_tshark
def test_tshark_rtt_and_throughput_match_the_series(captured) -> None:
    """tshark's ack_rtt (the I/O graph's RTT) and io,stat bytes per second against the run's
    srtt and goodput series, per flow, in 1 s bins after the first second.

    Tolerances: RTT bin means within 10 % (srtt is Linux's 1/8-gain smoothing of the
    samples, ack_rtt the raw per-ACK samples, both from the same send/ACK times);
    throughput within 3 % + 0.2 Mbit/s (goodput counts in-order delivery, tshark payload
    as it arrives)."""
    res, out = captured
    edges = np.arange(1.0, 8.0 + 1e-9, 1.0)
    report = []
    for i, name in enumerate(("ecn", "loss")):
        port = client_port(i)
        rows = tshark_fields(out / CLI_PCAP, f"tcp.analysis.ack_rtt && tcp.dstport == {port}", "frame.time_epoch", "tcp.analysis.ack_rtt")
        t = np.array([float(r[0]) for r in rows])
        rtt_ms = np.array([float(r[1]) * 1e3 for r in rows])
        srtt = res.series(name, "srtt")
        got = _bins(t, rtt_ms, edges)
        want = _bins(srtt.index.to_numpy(), srtt.to_numpy(), edges)
        report.append((name, "rtt", np.round(got, 2).tolist(), np.round(want, 2).tolist()))
        assert np.all(np.abs(got - want) <= 0.10 * want), report[-1]

        # Throughput: io,stat with 1 s intervals (the I/O graph's data), payload bytes at the
        # receiver. (tshark 4.0 sums a field only when the filter names it: "tcp.len && ...".)
        proc = subprocess.run(
            [TSHARK, "-r", str(out / SRV_PCAP), "-n", "-q", "-z", f"io,stat,1,SUM(tcp.len)tcp.len && tcp.srcport=={port}"],
            capture_output=True, text=True, timeout=60, check=True,
        )
        per_s = {}
        for line in proc.stdout.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and "<>" in cells[0]:
                start = cells[0].split("<>")[0].strip()
                if start.replace(".", "").isdigit():
                    per_s[int(float(start))] = int(cells[1]) * 8 / 1e6
        got = np.array([per_s.get(k, 0.0) for k in range(1, 8)])
        goodput = res.series(name, "goodput")
        # Goodput samples cover (t - step, t]: a bin [k, k+1) is the samples at t in (k, k+1].
        tt = goodput.index.to_numpy()
        want = np.array([goodput.to_numpy()[(tt > k) & (tt <= k + 1)].mean() for k in range(1, 8)])
        report.append((name, "mbps", np.round(got, 3).tolist(), np.round(want, 3).tolist()))
        assert np.all(np.abs(got - want) <= 0.03 * want + 0.2), report[-1]
    print(report)
