//! System tests of TCP through the dumbbell: each checks an outcome that follows from the
//! definitions (RFC 5681/6675/6937/6298/3168, Linux) and would fail if the model were wrong.

use aqmlab_sim::cc::CaState;
use aqmlab_sim::packet::{Ecn, Packet};
use aqmlab_sim::qdisc::Fifo;
use aqmlab_sim::{Simulation, Time};

use crate::common;
use common::{assert_conserved, run, Dumbbell, Flow, Rule};

const MS: u64 = 1_000_000;

#[test]
fn reno_through_one_bdp_fifo_keeps_link_busy_and_halves_cwnd_per_loss() {
    // 20 Mbit/s x 40 ms = 100 000 B = 66.7 packets of 1500 B: pfifo of one BDP.
    let sc = Dumbbell::new("20Mbit", "pfifo limit 67").duration("40s").flow(Flow::new("reno").rtt("40ms")).build();
    let mut sim = Simulation::new(&sc);
    let mut prev_cwnd = 0;
    let mut prev_state = CaState::Open;
    let mut recoveries = 0;
    let mut busy_at_5s = Time::ZERO;
    for ms in 1..=40_000u64 {
        sim.run_until(Time(ms * MS));
        if ms == 5_000 {
            busy_at_5s = sim.bottleneck().stats.busy;
        }
        let s = sim.sender(0);
        let state = s.ca_state();
        if state == CaState::Recovery && prev_state != CaState::Recovery && ms > 5_000 {
            // ssthresh = cwnd / 2 (cwnd sampled up to 1 ms before the loss was detected).
            let expect = prev_cwnd / 2;
            assert!(s.tp.ssthresh.abs_diff(expect) <= 1, "ssthresh {} vs cwnd {prev_cwnd}", s.tp.ssthresh);
            recoveries += 1;
        }
        if prev_state == CaState::Recovery && state == CaState::Open {
            assert!(s.tp.cwnd.abs_diff(s.tp.ssthresh) <= 1, "cwnd {} after recovery, ssthresh {}", s.tp.cwnd, s.tp.ssthresh);
        }
        prev_cwnd = s.tp.cwnd;
        prev_state = state;
    }
    let util = (sim.bottleneck().stats.busy - busy_at_5s).as_secs_f64() / 35.0;
    assert!(util > 0.95, "utilisation {util}");
    assert!(recoveries >= 5, "expected a Reno sawtooth, saw {recoveries} recoveries");
    let out = sim.run();
    assert_conserved(&out.summary);
    assert_eq!(out.summary.flows[0].rto_events, 0);
}

#[test]
fn rto_fires_and_backs_off_exponentially_when_the_path_goes_silent() {
    let sc = Dumbbell::new("10Mbit", "pfifo limit 100").duration("60s").flow(Flow::new("cubic").rtt("20ms")).build();
    let mut sim = Simulation::new(&sc);
    sim.run_until(Time::from_secs(2));
    let rto0 = sim.sender(0).rto();
    assert!(rto0 >= Time::from_millis(200) && rto0 < Time::from_millis(400), "rto {rto0}");
    // Black hole: a byte FIFO too small for any packet.
    sim.replace_bottleneck_qdisc(Box::new(Fifo::bfifo(1)));
    let mut fired = vec![];
    let mut count = 0;
    // The RTO in force when the first one fires (srtt may have grown with the queue).
    let (mut rto_armed, mut srtt) = (rto0, sim.sender(0).srtt());
    for ms in 2_001..=60_000u64 {
        sim.run_until(Time(ms * MS));
        let c = sim.sender(0).stats.rto_events;
        if c > count {
            fired.push(ms);
            count = c;
        } else if count == 0 {
            (rto_armed, srtt) = (sim.sender(0).rto(), sim.sender(0).srtt());
        }
    }
    assert!(fired.len() >= 6, "RTOs at {fired:?}");
    // The last ACK arrives at the latest once the 100-packet queue (120 ms at 10 Mbit/s) and
    // the 20 ms path have drained; a tail loss probe may fire 2 srtt later (the PTO,
    // tcp_schedule_loss_probe) and re-arm the RTO, which fires one RTO after that.
    let bound = 120 + 20 + 2 * srtt.as_micros() / 1000 + rto_armed.as_micros() / 1000 + 2;
    assert!(fired[0] - 2_000 <= bound, "first RTO at {} ms (bound {bound} ms, rto {rto_armed}, srtt {srtt})", fired[0]);
    for w in fired.windows(3) {
        let (a, b) = ((w[1] - w[0]) as f64, (w[2] - w[1]) as f64);
        assert!((b / a - 2.0).abs() < 0.02, "intervals {a} ms then {b} ms: not doubling ({fired:?})");
    }
    let out = sim.run();
    assert_conserved(&out.summary);
}

#[test]
fn a_single_drop_is_repaired_by_exactly_one_retransmission() {
    let size = 1448 * 3000;
    // rwnd caps the queue (and so the RTT) well below the RTO.
    let sc = Dumbbell::new("10Mbit", "pfifo limit 10000").duration("20s").flow(Flow::new("cubic").rtt("20ms").size(size).rwnd(60000)).build();
    let mut sim = Simulation::new(&sc);
    let mut dropped = false;
    sim.replace_bottleneck_qdisc(Rule::new(10_000, move |p: &mut Packet, _, _| {
        if p.tcp.seq == 500 && !dropped {
            dropped = true;
            return false;
        }
        true
    }));
    let out = sim.run();
    assert_conserved(&out.summary);
    let f = &out.summary.flows[0];
    assert_eq!(out.summary.bottleneck.drops, 1);
    assert_eq!(f.retransmits, 1);
    assert_eq!(f.rto_events, 0);
    assert_eq!(f.fast_recoveries, 1);
    assert_eq!(f.bytes_delivered, size);
    assert!(f.fct_s.is_some());
}

#[test]
fn a_burst_of_drops_is_repaired_by_sack_without_timeout() {
    let size = 1448 * 4000;
    let sc = Dumbbell::new("10Mbit", "pfifo limit 10000").duration("20s").flow(Flow::new("reno").rtt("40ms").size(size).rwnd(150000)).build();
    let mut sim = Simulation::new(&sc);
    let mut seen = std::collections::HashSet::new();
    // Drop every other first transmission of segments 800..840 (20 holes in one window).
    sim.replace_bottleneck_qdisc(Rule::new(10_000, move |p: &mut Packet, _, _| {
        let s = p.tcp.seq;
        !((800..840).contains(&s) && s % 2 == 0 && seen.insert(s))
    }));
    let out = sim.run();
    let f = &out.summary.flows[0];
    assert_eq!(out.summary.bottleneck.drops, 20);
    assert_eq!(f.retransmits, 20, "one retransmission per hole");
    assert_eq!(f.rto_events, 0);
    assert_eq!(f.fast_recoveries, 1, "all holes of one window in one recovery");
    assert_eq!(f.bytes_delivered, size);
}

#[test]
fn a_lost_retransmission_is_detected_without_timeout() {
    let size = 1448 * 3000;
    // Without a receive-window limit so that new data keeps flowing after the retransmission
    // and RACK sees it delivered (with the window full, a tail loss probe would be needed).
    let sc = Dumbbell::new("100Mbit", "pfifo limit 1000").duration("20s").flow(Flow::new("reno").rtt("20ms").size(size)).build();
    let mut sim = Simulation::new(&sc);
    let mut copies = 0;
    // Drop the original and the first retransmission of segment 700.
    sim.replace_bottleneck_qdisc(Rule::new(1000, move |p: &mut Packet, _, _| {
        if p.tcp.seq == 700 && copies < 2 {
            copies += 1;
            return false;
        }
        true
    }));
    let out = sim.run();
    let f = &out.summary.flows[0];
    assert_eq!(f.retransmits, 2);
    assert_eq!(f.rto_events, 0, "RACK-style detection repairs it before the RTO");
    assert_eq!(f.bytes_delivered, size);
}

#[test]
fn two_cubic_flows_with_equal_rtt_share_fairly() {
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("60s").flow(Flow::new("cubic").rtt("20ms").count(2)).build();
    let s = run(&sc);
    let j = s.jain_steady.unwrap();
    assert!(j >= 0.95, "Jain {j}");
    assert!(s.bottleneck.utilization > 0.95, "{}", s.bottleneck.utilization);
}

#[test]
fn the_short_rtt_flow_wins() {
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("60s").flow(Flow::new("cubic").rtt("10ms")).flow(Flow::new("cubic").rtt("160ms")).build();
    let s = run(&sc);
    let (a, b) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    assert!(a > b, "10 ms flow {a} Mbit/s vs 160 ms flow {b} Mbit/s");
}

#[test]
fn same_seed_gives_identical_results() {
    let sc = Dumbbell::new("50Mbit", "pfifo limit 200").duration("10s").flow(Flow::new("cubic").rtt("20ms").count(3)).flow(Flow::new("reno").rtt("50ms")).build();
    let mut a = Simulation::new(&sc).run();
    let mut b = Simulation::new(&sc).run();
    a.summary.wall_seconds = 0.0;
    b.summary.wall_seconds = 0.0;
    assert_eq!(serde_json::to_string(&a.summary).unwrap(), serde_json::to_string(&b.summary).unwrap());
    let bits = |s: &aqmlab_sim::metrics::Series| -> Vec<u64> { s.columns.iter().flat_map(|c| c.values.iter().map(|v| v.to_bits())).collect() };
    assert_eq!(bits(&a.series), bits(&b.series));
}

#[test]
fn rfc3168_ecn_reduces_once_per_window_without_retransmissions() {
    for cc in ["reno", "cubic"] {
        ecn_once_per_window(cc);
    }
}

fn ecn_once_per_window(cc: &str) {
    // A 100-packet FIFO keeps the RTT between 40 and 100 ms.
    let sc = Dumbbell::new("20Mbit", "pfifo limit 100").duration("10s").flow(Flow::new(cc).rtt("40ms").ecn("rfc3168")).build();
    let mut sim = Simulation::new(&sc);
    // Mark every ECT packet CE between 3 s and 4 s.
    sim.replace_bottleneck_qdisc(Rule::new(100, move |p: &mut Packet, now, _| {
        if p.ecn == Ecn::Ect0 && now >= Time::from_secs(3) && now < Time::from_secs(4) {
            p.ecn = Ecn::Ce;
        }
        true
    }));
    // RFC 3168 §6.1.2: at most one reduction per window of data. Each reduction starts on
    // an ACK at or beyond the recovery point (snd_nxt) of the previous one.
    let mut reductions = 0;
    let mut last_point = 0;
    sim.run_until(Time::from_secs(3));
    let retransmits_before = sim.sender(0).stats.retransmits;
    for ms in 3_000..=4_100u64 {
        sim.run_until(Time(ms * MS));
        let s = sim.sender(0);
        if s.stats.cwr_reductions > reductions {
            assert_eq!(s.stats.cwr_reductions, reductions + 1, "two reductions within 1 ms");
            // Linux holds CWR until data *above* the recovery point is ACKed (so the CWR flag
            // has reached the receiver).
            assert!(reductions == 0 || s.tp.snd_una > last_point, "reduction at una {} within the previous episode (recovery point {last_point})", s.tp.snd_una);
            reductions = s.stats.cwr_reductions;
            last_point = s.recovery_point();
        }
    }
    assert!(reductions >= 9, "{reductions} CWR reductions in 1 s of full marking at RTT <= 100 ms");
    assert!(sim.sender(0).tp.cwnd <= 4, "cwnd {} after 1 s of marking", sim.sender(0).tp.cwnd);
    assert_eq!(sim.sender(0).stats.retransmits, retransmits_before, "CE is not a loss");
    let out = sim.run();
    assert_conserved(&out.summary);
    assert!(out.summary.flows[0].ce_received > 0);
}

#[test]
fn receiver_acks_every_second_segment() {
    let size = 1448 * 20_000;
    let sc = Dumbbell::new("20Mbit", "pfifo limit 100000").duration("30s").flow(Flow::new("reno").rtt("20ms").size(size)).build();
    let mut sim = Simulation::new(&sc);
    sim.run_until(Time::from_secs(30));
    let acks = sim.receiver(0).acks_sent;
    // 20 000 segments, one ACK per two plus the 16 quick ACKs at the start.
    assert!((10_000..=10_020).contains(&acks), "{acks} ACKs for 20000 segments");
}

#[test]
fn pacing_spreads_packets_so_a_fast_link_never_queues() {
    let run_with = |pacing: bool| {
        // 5 MB keeps slow start's paced rate (2 cwnd / srtt) below the link rate.
        // One segment per send: with GSO, pacing spaces skbs of `tcp_tso_segs` segments,
        // which queue behind each other (tcp_gso.rs).
        let sc = Dumbbell::new("1Gbit", "pfifo limit 10000").duration("5s").flow(Flow::new("cubic").rtt("100ms").size(5000000).pacing(pacing).gso(false)).build();
        run(&sc).bottleneck.sojourn_ms.p99.unwrap()
    };
    let (paced, unpaced) = (run_with(true), run_with(false));
    // The rate itself: Linux tcp_update_pacing_rate, factor 1.2 outside slow start.
    let sc = Dumbbell::new("100Mbit", "pfifo limit 100").duration("10s").flow(Flow::new("reno").rtt("40ms").pacing(true)).build();
    let mut sim = Simulation::new(&sc);
    sim.run_until(Time::from_secs(9));
    let s = sim.sender(0);
    assert!(s.tp.cwnd >= s.tp.ssthresh / 2, "out of slow start");
    let expect = 1448.0 * 1.2 * s.tp.cwnd.max(s.packets_out()) as f64 / s.srtt().as_secs_f64();
    assert!((s.tp.pacing_rate / expect - 1.0).abs() < 1e-9, "{} vs {expect}", s.tp.pacing_rate);
    // One 1500-byte packet takes 12 us at 1 Gbit/s.
    assert!(paced < 0.013, "paced p99 sojourn {paced} ms");
    assert!(unpaced > 0.020, "unpaced p99 sojourn {unpaced} ms");
}

#[test]
fn finite_transfer_delivers_exactly_its_size() {
    let sc = Dumbbell::new("50Mbit", "pfifo limit 30").duration("20s").flow(Flow::new("cubic").rtt("30ms").size("5mb")).flow(Flow::new("reno").rtt("30ms")).build();
    let s = run(&sc);
    assert_eq!(s.flows[0].bytes_delivered, 5 * 1024 * 1024);
    let fct = s.flows[0].fct_s.unwrap();
    // At least 5 MiB at the full 50 Mbit/s plus the handshake.
    assert!(fct > 5.0 * 1024.0 * 1024.0 * 8.0 / 50e6 + 0.03, "fct {fct}");
}

#[test]
fn receive_window_caps_throughput_at_rwnd_per_rtt() {
    let sc = Dumbbell::new("100Mbit", "pfifo limit 1000").duration("20s").flow(Flow::new("cubic").rtt("100ms").rwnd(28960)).build();
    let s = run(&sc);
    // 20 segments per 100 ms round trip.
    let expect = 20.0 * 1448.0 * 8.0 / 0.1 / 1e6;
    let got = s.flows[0].steady_mbps.unwrap();
    assert!((got / expect - 1.0).abs() < 0.05, "{got} Mbit/s vs {expect}");
}

#[test]
fn series_cover_the_grid_and_drops_add_up() {
    let sc = Dumbbell::new("20Mbit", "pfifo limit 50").duration("10s").flow(Flow::new("cubic").rtt("20ms").count(2)).build();
    let out = Simulation::new(&sc).run();
    let ticks = out.series.time.len();
    assert_eq!(ticks, 201, "0 to 10 s every 50 ms");
    assert!(out.series.columns.iter().all(|c| c.values.len() == ticks));
    let drops: f64 = out.series.get("bottleneck", "drops").unwrap().values.iter().sum();
    assert_eq!(drops as u64, out.summary.bottleneck.drops);
    let rtx: f64 = ["cubic-0", "cubic-1"].iter().map(|f| out.series.get(f, "retransmits").unwrap().values.iter().sum::<f64>()).sum();
    assert_eq!(rtx as u64, out.summary.flows.iter().map(|f| f.retransmits).sum::<u64>());
    // Goodput integrates to the bytes delivered.
    let g: f64 = out.series.get("cubic-0", "goodput").unwrap().values.iter().filter(|v| v.is_finite()).sum();
    let bytes = g * 1e6 * 0.05 / 8.0;
    assert!((bytes - out.summary.flows[0].bytes_delivered as f64).abs() < 1.0);
}

#[test]
fn l4s_senders_mark_every_data_packet_ect1_and_reduce_on_ce_counts() {
    let sc = Dumbbell::new("20Mbit", "pfifo limit 100").duration("10s").flow(Flow::new("reno").rtt("40ms").ecn("l4s")).build();
    let mut sim = Simulation::new(&sc);
    let mut not_ect1 = 0u64;
    let mut n = 0u64;
    sim.replace_bottleneck_qdisc(Rule::new(100, move |p: &mut Packet, now, _| {
        n += 1;
        if p.ecn != Ecn::Ect1 {
            not_ect1 += 1;
        }
        assert_eq!(not_ect1, 0, "data packet {n} not ECT(1)");
        // One CE mark in 50 between 3 s and 4 s.
        if now >= Time::from_secs(3) && now < Time::from_secs(4) && n % 50 == 0 {
            p.ecn = Ecn::Ce;
        }
        true
    }));
    sim.run_until(Time::from_secs(3));
    let before = sim.sender(0).stats.cwr_reductions;
    sim.run_until(Time::from_millis(4_200));
    let reductions = sim.sender(0).stats.cwr_reductions - before;
    assert!(reductions >= 3, "{reductions}");
    let out = sim.run();
    assert_conserved(&out.summary);
    let f = &out.summary.flows[0];
    // Every reduction was caused by a newly counted CE mark, at most one per window.
    assert!(f.ce_received >= 5 && reductions as u64 <= f.ce_received, "{f:?} {reductions}");
}

#[test]
fn ecn_rewrite_bleaches_a_flow_so_the_aqm_drops_instead_of_marking() {
    let flow = Flow::new("cubic").rtt("20ms").ecn("rfc3168");
    let fq_codel = |flow: Flow| Dumbbell::new("20Mbit", "fq_codel").duration("10s").flow(flow).run();
    let marked = fq_codel(flow.clone());
    assert!(marked.bottleneck.ce_marks > 0 && marked.bottleneck.drops == 0, "{:?}", marked.bottleneck);
    let bleached = fq_codel(flow.ecn_rewrite("not-ect"));
    assert!(bleached.bottleneck.ce_marks == 0 && bleached.bottleneck.drops > 0, "{:?}", bleached.bottleneck);
    assert!(bleached.flows[0].retransmits > 0);
}
