"""``aqmlab run --pcap``: the captures are valid pcap files that Wireshark's TCP analysis
(tshark) reads as the run's summary and series describe them.

The tshark tests need the Debian package ``tshark`` (``make test`` installs it,
``make test-tools``); without it they are skipped with a message saying so. The rest of
the file checks the format with a small reader of its own.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aqmlab.api import ScenarioError
from aqmlab.api import run as api_run
from aqmlab.output import CLI_PCAP, SRV_PCAP

from conftest import run_cli

#: Two TCP flows through fq_codel (ECN on by default): "ecn" is CE-marked, "loss" loses
#: packets and retransmits; a ping probe; a workload of short downloads (the client opens
#: them); 6 s of 10 Mbit/s.
SCENARIO = """
name = "pcap-check"
duration = "6s"
seed = 3

[bottleneck]
rate = "10Mbit"
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
    TSHARK is None, reason="tshark is not installed (run `make test-tools`; Debian package tshark): pcap analysis tests skipped"
)


def client_port(endpoint_id: int) -> int:
    """The client end's port of endpoint ``endpoint_id`` (docs/pcap.md)."""
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
        assert times[-1] <= 6_000_000_000
    # Data segments echo the receiver's latest TSval (NOP NOP TS at TCP offset 20), which the
    # SYN-ACK already carried: never 0, never ahead of the segment's own clock.
    _, recs = read_pcap(out / CLI_PCAP)
    data = [b for _, b, _ in recs if b[23] == 6 and struct.unpack_from(">H", b, 16)[0] - 20 - (b[46] >> 4) * 4 > 0]
    assert data and all(b[54:58] == bytes([1, 1, 8, 10]) for b in data)
    ts = [struct.unpack_from(">II", b, 58) for b in data]
    assert all(0 < ecr <= val for val, ecr in ts)
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
    import hashlib

    files = json.loads((out / "manifest.json").read_text())["files"]
    for name in (CLI_PCAP, SRV_PCAP):
        assert files[name] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    for name in (CLI_PCAP, SRV_PCAP):
        head, recs = read_pcap(out / name)
        assert head["snaplen"] == 60
        assert recs and all(b[23] == 1 for _, b, _ in recs), "only the ping probe's ICMP"
        assert all(len(b) == 60 and o == 98 for _, b, o in recs)
    with pytest.raises(ScenarioError, match="'nosuch': no such flow \\(known: ecn, loss, ping, web\\)"):
        api_run(SCENARIO, pcap=(tmp_path / "a", tmp_path / "b"), pcap_flows=["nosuch"])


# --------------------------------------------------------------------------------------
# tshark: one pass per file for the per-frame fields, one io,stat pass
# --------------------------------------------------------------------------------------

FIELDS = [
    "frame.time_epoch", "ip.proto", "ip.dsfield.ecn", "tcp.srcport", "tcp.dstport", "tcp.len", "tcp.stream",
    "tcp.flags.syn", "tcp.flags.ack", "tcp.flags.ece", "tcp.flags.cwr",
    "tcp.analysis.retransmission", "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission",
    "tcp.analysis.out_of_order", "tcp.analysis.ack_rtt", "tcp.seq", "tcp.ack",
    "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "icmp.checksum.status", "_ws.malformed",
]


def tshark_frames(path: Path) -> pd.DataFrame:
    """Every frame's FIELDS as tshark dissects them, checksum validation on (status 0 = bad,
    1 = good, 2 = not verified: a frame cut by the snap length)."""
    args = [TSHARK, "-r", str(path), "-n", "-T", "fields", "-E", "occurrence=f"]
    for pref in ("ip.check_checksum", "tcp.check_checksum", "udp.check_checksum"):
        args += ["-o", f"{pref}:TRUE"]
    for f in FIELDS:
        args += ["-e", f]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    df = pd.DataFrame(rows, columns=FIELDS).replace("", np.nan)
    return df.apply(pd.to_numeric)


@pytest.fixture(scope="module")
def tshark_out(captured):
    if TSHARK is None:
        pytest.skip("tshark is not installed (run `make test-tools`; Debian package tshark): pcap analysis tests skipped")
    _, out = captured
    return tshark_frames(out / CLI_PCAP), tshark_frames(out / SRV_PCAP)


@needs_tshark
def test_tshark_reads_the_files_without_malformed_frames_or_bad_checksums(captured, tshark_out) -> None:
    res, _ = captured
    for df, key in zip(tshark_out, ("cli_packets", "srv_packets")):
        assert len(df) == res.summary["capture"][key]
        assert df["_ws.malformed"].isna().all()
        for c in ("ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "icmp.checksum.status"):
            assert not (df[c] == 0).any(), c
        # Frames kept whole (ACKs, SYNs, ICMP) are verified, and good.
        assert (df["tcp.checksum.status"] == 1).sum() > 1000
        assert (df["icmp.checksum.status"] == 1).sum() > 10


@needs_tshark
def test_tshark_counts_the_summarys_retransmissions_and_ce_marks(captured, tshark_out) -> None:
    res, _ = captured
    cli, srv = tshark_out
    flows = {f["name"]: f for f in res.summary["flows"]}
    # Retransmissions, seen leaving the sender (client side). Wireshark calls a resent
    # segment "out-of-order" instead of "retransmission" when it follows the highest
    # segment by less than its RTT estimate (tcp_analyze_sequence_number's ooo heuristic);
    # nothing reorders packets between a sender and its own tap, so at the sender every
    # segment below the highest seen is a retransmission and all four flags count.
    flags = ["tcp.analysis.retransmission", "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission", "tcp.analysis.out_of_order"]
    data = cli[cli["tcp.len"] > 0]
    rtx = data[data[flags].notna().any(axis=1)]["tcp.srcport"].value_counts()
    fast = data[data["tcp.analysis.fast_retransmission"].notna()]["tcp.srcport"].value_counts()
    assert flows["loss"]["retransmits"] > 5
    for i, name in enumerate(("ecn", "loss")):
        assert rtx.get(client_port(i), 0) == flows[name]["retransmits"], (name, rtx.to_dict())
    assert 0 < fast.get(client_port(1), 0) <= flows["loss"]["retransmits"]
    # CE marks, seen arriving at the receiver (server side).
    sdata = srv[(srv["tcp.len"] > 0) & (srv["ip.dsfield.ecn"] == 3)]
    ce = sdata["tcp.srcport"].value_counts()
    for i, name in enumerate(("ecn", "loss")):
        assert ce.get(client_port(i), 0) == flows[name]["ce_received"], (name, ce.to_dict())
    # ECE on the ACKs of the ECN flow and CWR on its data; neither on the other flow.
    est = cli[cli["tcp.flags.syn"] == 0]
    ece = est[est["tcp.flags.ece"] == 1]["tcp.dstport"].value_counts()
    cwr = est[est["tcp.flags.cwr"] == 1]["tcp.srcport"].value_counts()
    assert ece.get(client_port(0), 0) > 0 and cwr.get(client_port(0), 0) > 0
    assert ece.get(client_port(1), 0) == cwr.get(client_port(1), 0) == 0
    # The handshakes: one SYN per TCP connection (the workload's client opens its own).
    web = res.summary["workloads"][0]
    syns = cli[(cli["tcp.flags.syn"] == 1) & (cli["tcp.flags.ack"] == 0)]
    assert syns["tcp.stream"].nunique() == len(syns) == 2 + web["started"]


def linux_rtt_samples(frames: pd.DataFrame, port: int) -> np.ndarray:
    """(time, ms) per ACK that advances: the ACK's time less the last send time of the
    earliest newly acknowledged segment (Linux tcp_clean_rtx_queue's seq_rtt), from the
    sender-side frames of the connection with client port ``port``."""
    conn = frames[(frames["tcp.srcport"] == port) | (frames["tcp.dstport"] == port)]
    sent: dict[int, float] = {}
    una, out = 1, []
    for t, sport, seq, length, ack in conn[["frame.time_epoch", "tcp.srcport", "tcp.seq", "tcp.len", "tcp.ack"]].itertuples(index=False):
        if sport == port:
            if length > 0:
                sent[int(seq)] = t
        elif ack > una:
            if una in sent:
                out.append((t, (t - sent[una]) * 1e3))
            una = int(ack)
    return np.array(out)


def _bins(t: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    idx = np.digitize(t, edges) - 1
    out = np.full(len(edges) - 1, np.nan)
    for k in range(len(edges) - 1):
        sel = v[(idx == k) & ~np.isnan(v)]
        if len(sel):
            out[k] = sel.mean()
    return out


@needs_tshark
def test_tshark_rtt_and_throughput_match_the_series(captured, tshark_out) -> None:
    """tshark's ack_rtt (the RTT graph's data) and io,stat bytes per second (the I/O graph's)
    against the run's srtt and goodput series, per flow, in 1 s bins after the first second.

    Tolerances: RTT bin means within 10 %: ack_rtt times the ACK against the last segment
    it covers, Linux's RTT sample (and so srtt) against the earliest newly acked one, so
    srtt runs higher with delayed ACKs (5-8 % here); the Linux-style sample computed from
    the same frames (`linux_rtt_samples`) is within 3 % of srtt. Throughput within 3 % +
    0.2 Mbit/s (goodput counts in-order delivery, tshark payload as it arrives, and
    io,stat's intervals start at the file's first frame)."""
    res, out = captured
    cli, _ = tshark_out
    duration = int(res.summary["sim_seconds"])
    edges = np.arange(1.0, duration + 1e-9, 1.0)
    ports = [client_port(i) for i in range(2)]
    # One io,stat pass for both flows. (tshark 4.0 sums a field only when the filter names it.)
    cols = ",".join(f"SUM(tcp.len)tcp.len && tcp.srcport=={p}" for p in ports)
    proc = subprocess.run(
        [TSHARK, "-r", str(out / SRV_PCAP), "-n", "-q", "-z", f"io,stat,1,{cols}"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    per_s: dict[int, list[float]] = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and "<>" in cells[0]:
            start = cells[0].split("<>")[0].strip()
            if start.isdigit():
                per_s[int(start)] = [int(c) * 8 / 1e6 for c in cells[1:3]]
    report = []
    for i, name in enumerate(("ecn", "loss")):
        acks = cli[(cli["tcp.dstport"] == ports[i]) & cli["tcp.analysis.ack_rtt"].notna()]
        got = _bins(acks["frame.time_epoch"].to_numpy(), acks["tcp.analysis.ack_rtt"].to_numpy() * 1e3, edges)
        srtt = res.series(name, "srtt")
        want = _bins(srtt.index.to_numpy(), srtt.to_numpy(), edges)
        report.append((name, "ack_rtt_ms", np.round(got, 2).tolist(), np.round(want, 2).tolist()))
        assert np.all(np.abs(got - want) <= 0.10 * want), report[-1]
        lx = linux_rtt_samples(cli, ports[i])
        got = _bins(lx[:, 0], lx[:, 1], edges)
        report.append((name, "first_acked_rtt_ms", np.round(got, 2).tolist(), np.round(want, 2).tolist()))
        assert np.all(np.abs(got - want) <= 0.03 * want), report[-1]

        got = np.array([per_s[k][i] for k in range(1, duration)])
        goodput = res.series(name, "goodput")
        # Goodput samples cover (t - step, t]: a bin [k, k+1) is the samples at t in (k, k+1].
        tt = goodput.index.to_numpy()
        want = np.array([goodput.to_numpy()[(tt > k) & (tt <= k + 1)].mean() for k in range(1, duration)])
        report.append((name, "mbps", np.round(got, 3).tolist(), np.round(want, 3).tolist()))
        assert np.all(np.abs(got - want) <= 0.03 * want + 0.2), report[-1]
    print(report)


L4S = """
duration = "3s"
seed = 1
[bottleneck]
rate = "20Mbit"
qdisc = "dualpi2"
[[flows]]
name = "prague"
cc = "prague"
rtt = "20ms"
ecn = "l4s"
"""


@needs_tshark
def test_tshark_decodes_accecn_and_its_ace_counts_the_ce_marks(tmp_path: Path) -> None:
    """An L4S connection's ACKs carry AccECN's ACE counter (RFC 9768); summing its increments
    (mod 8) over the receiver's ACKs, as an AccECN sender does, gives the CE count."""
    res = api_run(L4S, pcap=(tmp_path / CLI_PCAP, tmp_path / SRV_PCAP))
    ce_received = res.summary["flows"][0]["ce_received"]
    assert ce_received > 50
    args = [TSHARK, "-r", str(tmp_path / SRV_PCAP), "-n", "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.flags.syn",
            "-e", "tcp.flags.ae", "-e", "tcp.flags.cwr", "-e", "tcp.flags.ece", "-e", "tcp.flags.ace", "-e", "ip.dsfield.ecn", "-e", "tcp.len"]
    rows = [r.split("\t") for r in subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()]
    syn = [r for r in rows if r[1] == "1" and r[0] != "5201"]
    assert syn and syn[0][2:5] == ["1", "1", "1"], "AccECN SYN: AE, CWR and ECE"
    acks = [r for r in rows if r[0] == "5201" and r[1] == "0"]
    aces = [int(r[5]) for r in acks]
    assert aces[0] == 5, "ACE starts at 5"
    total = sum((b - a) % 8 for a, b in zip(aces, aces[1:]))
    assert total == ce_received
    data = [r for r in rows if r[0] != "5201" and r[7] not in ("", "0")]
    assert data and all(r[6] in ("1", "3") for r in data), "data is ECT(1) or CE"
    assert sum(r[6] == "3" for r in data) >= ce_received


def test_suite_runs_write_captures_and_resume_on_them(tmp_path: Path) -> None:
    from aqmlab import runner
    from aqmlab import suite as S

    f = tmp_path / "mini.toml"
    f.write_text(
        """
title = "mini"
[base]
duration = "1s"
bottleneck = { rate = "10Mbit", qdisc = "pfifo" }
flows = [{ cc = "cubic", rtt = "20ms" }]
[[axes]]
name = "q"
values = ["pfifo", "fq_codel"]
set = { "bottleneck.qdisc" = "{q}" }
"""
    )
    suite = S.load_suite(str(f))
    out = tmp_path / "out"
    res = runner.run_suite(suite, out, plots=False, pcap=True, progress=False, report=False)
    assert res.ran == 2 and not res.failed
    for r in res.runs:
        head, recs = read_pcap(r.run_dir / CLI_PCAP)
        assert head["magic"] == 0xA1B23C4D and len(recs) > 100
        assert runner.is_done(r, pcap=True)
    (res.runs[0].run_dir / SRV_PCAP).unlink()
    again = runner.run_suite(suite, out, plots=False, pcap=True, progress=False, report=False)
    assert (again.ran, again.reused) == (1, 1), "the run without its capture runs again"
    assert (res.runs[0].run_dir / SRV_PCAP).is_file()
