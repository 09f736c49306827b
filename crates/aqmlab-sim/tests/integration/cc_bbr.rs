//! System tests of BBR v1 (`cc = "bbr"`) and BBR v3 (`cc = "bbr3"`, alias `bbr2`) through
//! the dumbbell. Each checks an outcome that follows from the definitions (Linux
//! `tcp_bbr.c`, google/bbr v3) and would fail if the model were wrong.

use crate::common::{assert_conserved, Dumbbell, Flow};
use aqmlab_sim::sim::Summary;
use aqmlab_sim::{Scenario, Simulation, Time};

const MS: u64 = 1_000_000;

/// Runs a single flow in 1 ms steps, returning the summary and the cwnd per ms.
fn run_with_cwnd(sc: &Scenario) -> (Summary, Vec<u32>) {
    let mut sim = Simulation::new(sc);
    let end = sc.duration.0 / MS;
    let mut cwnd = Vec::with_capacity(end as usize);
    for ms in 1..=end {
        sim.run_until(Time(ms * MS));
        cwnd.push(sim.sender(0).tp.cwnd);
    }
    let out = sim.run();
    assert_conserved(&out.summary);
    (out.summary, cwnd)
}

/// Start times (ms) of runs where cwnd <= `thresh`, after `skip` ms.
fn dips(cwnd: &[u32], thresh: u32, skip: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut inside = false;
    for (i, &c) in cwnd.iter().enumerate().skip(skip) {
        if c <= thresh && !inside {
            v.push(i + 1);
        }
        inside = c <= thresh;
    }
    v
}

use crate::common::Rule;
use aqmlab_sim::packet::{Ecn, Packet};

/// One flow alone at 50 Mbit/s, 40 ms, pfifo 1000.
fn alone(cc: &str) -> (Summary, Vec<u32>) {
    // Quiet hosts: on an ideal path every RTT sample equals the minimum, so min_rtt never
    // expires; with host jitter it does, and PROBE_RTT comes every 10 s as on a testbed.
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("60s").flow(Flow::new(cc).rtt("40ms")).quiet_host().build();
    run_with_cwnd(&sc)
}

#[test]
fn bbr1_alone_fills_the_link_with_a_small_queue_and_probes_rtt_once() {
    let (s, cwnd) = alone("bbr");
    let b = &s.bottleneck;
    eprintln!("bbr alone: util {:.4} sojourn {:?} drops {} cwnd dips {:?}", b.utilization, b.sojourn_ms, b.drops, dips(&cwnd, 4, 1000));
    assert!(b.utilization >= 0.95, "utilisation {}", b.utilization);
    // Standing queue far below the 1000-packet (240 ms) buffer: p95 < 2 x base RTT.
    let p95 = b.sojourn_ms.p95.unwrap();
    assert!(p95 < 80.0, "p95 sojourn {p95} ms");
    assert_eq!(b.drops, 0);
    // cwnd = 2 BDP + 3 x tso_segs_goal (4 at this rate), rounded up to even, +2 in the 5/4
    // phase: BDP = 50e6 / 8 / 1514 x 1448 / 1448 pkt/s x 40.5 ms ~ 167-174 packets.
    let steady = &cwnd[12_000..];
    let (lo, hi) = (*steady.iter().filter(|&&c| c > 4).min().unwrap(), *steady.iter().max().unwrap());
    assert!((330..=370).contains(&lo) && (330..=370).contains(&hi), "cwnd {lo}..{hi}");
    // PROBE_RTT: the handshake's RTT (small SYN packets) is below any data RTT, so the
    // min_rtt filter expires at 10 s: cwnd 4 for 200 ms plus a round.
    let d = dips(&cwnd, 4, 1000);
    assert!(!d.is_empty() && (10_000..10_300).contains(&d[0]), "{d:?}");
    let len = cwnd[d[0] - 1..].iter().take_while(|&&c| c <= 4).count();
    assert!((200..=300).contains(&len), "PROBE_RTT lasted {len} ms");
    // Afterwards min_rtt is the data RTT and the 3/4 gain phase drains the queue to zero
    // every cycle, so RTT samples equal to min_rtt keep refreshing it (`<=` in
    // bbr_update_min_rtt): no further PROBE_RTT on this jitter-free path.
    assert_eq!(d.len(), 1, "{d:?}");
}

#[test]
fn bbr1_probe_rtt_every_ten_seconds_with_a_standing_queue() {
    // Two flows keep a standing queue (neither sees the base RTT again), so min_rtt expires
    // every 10 s; both flows dip together (the queue drains only when they do).
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("60s").flow(Flow::new("bbr").rtt("40ms").count(2)).build();
    let (s, cwnd) = run_with_cwnd(&sc);
    let d = dips(&cwnd, 4, 1000);
    eprintln!("2 x bbr: util {:.4} p95 {:?} dips {d:?}", s.bottleneck.utilization, s.bottleneck.sojourn_ms.p95);
    assert!(d.len() >= 5, "{d:?}");
    for w in d.windows(2) {
        let gap = w[1] - w[0];
        // 10 s window + 200 ms at 4 packets + a round (and the wait for the flight to drain).
        assert!((10_000..=10_600).contains(&gap), "PROBE_RTT spacing {gap} ms: {d:?}");
    }
    let (a, b) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    assert!((a / b - 1.0).abs() < 0.15, "{a} vs {b}");
    assert!(s.bottleneck.utilization >= 0.95);
}

#[test]
fn bbr3_alone_probes_rtt_every_five_seconds_at_half_bdp() {
    let (s, cwnd) = alone("bbr3");
    let b = &s.bottleneck;
    // PROBE_RTT in v3 holds cwnd = max(4, BDP/2) ~ 84-87 packets.
    let d = dips(&cwnd, 100, 1000);
    eprintln!("bbr3 alone: util {:.4} sojourn {:?} drops {} dips {d:?}", b.utilization, b.sojourn_ms, b.drops);
    assert!(b.utilization >= 0.95, "utilisation {}", b.utilization);
    assert!(b.sojourn_ms.p95.unwrap() < 80.0);
    assert_eq!(b.drops, 0);
    assert!(dips(&cwnd, 4, 1000).is_empty(), "v3 never goes down to 4 packets");
    assert!(d.len() >= 10, "{d:?}");
    for w in d.windows(2) {
        let gap = w[1] - w[0];
        assert!((5_000..=5_500).contains(&gap), "PROBE_RTT spacing {gap} ms: {d:?}");
    }
    let floor = *cwnd[d[1] - 1..d[1] + 150].iter().min().unwrap();
    assert!((80..=90).contains(&floor), "PROBE_RTT cwnd {floor}");
}

#[test]
fn bbr1_versus_cubic_in_a_deep_fifo() {
    // 1000 packets = 240 ms = 6 BDP: CUBIC fills the buffer, BBRv1's inflight is capped at
    // 2 x its BDP estimate, so CUBIC gets the larger share (Hock et al. 2017).
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("60s").flows([Flow::new("bbr").rtt("40ms"), Flow::new("cubic").rtt("40ms")]).build();
    let (s, _) = run_with_cwnd(&sc);
    let (bbr, cubic) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    eprintln!("deep FIFO: bbr {bbr:.2} cubic {cubic:.2} Mbit/s, util {:.4}, p95 {:?}", s.bottleneck.utilization, s.bottleneck.sojourn_ms.p95);
    assert!(s.bottleneck.utilization > 0.97);
    assert!(bbr > 5.0 && cubic > bbr, "bbr {bbr} cubic {cubic}");
    // In a shallow FIFO (100 packets = 0.6 BDP) it is the other way round.
    let sc = Dumbbell::new("50Mbit", "pfifo limit 100").duration("60s").flows([Flow::new("bbr").rtt("40ms"), Flow::new("cubic").rtt("40ms")]).build();
    let (s, _) = run_with_cwnd(&sc);
    let (bbr, cubic) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    eprintln!("shallow FIFO: bbr {bbr:.2} cubic {cubic:.2} Mbit/s", );
    assert!(bbr > 3.0 * cubic, "bbr {bbr} cubic {cubic}");
}

#[test]
fn bbr3_keeps_loss_below_its_two_percent_threshold_in_a_shallow_fifo() {
    // pfifo 20 = 0.12 BDP. BBRv1 does not react to loss (beyond recovery) and loses ~3 %;
    // v3 cuts inflight_hi / inflight_lo on loss and stays well below 2 %.
    let loss = |cc: &str| {
        let sc = Dumbbell::new("50Mbit", "pfifo limit 20").duration("30s").flow(Flow::new(cc).rtt("40ms")).build();
        let (s, _) = run_with_cwnd(&sc);
        let b = &s.bottleneck;
        (b.drops as f64 / b.packets as f64, b.utilization)
    };
    let (l1, u1) = loss("bbr");
    let (l3, u3) = loss("bbr3");
    eprintln!("pfifo 20: bbr loss {:.2} % util {u1:.3}; bbr3 loss {:.2} % util {u3:.3}", 100.0 * l1, 100.0 * l3);
    assert!(l3 < 0.01, "bbr3 loss {l3}");
    assert!(l1 > 3.0 * l3, "bbr {l1} vs bbr3 {l3}");
    assert!(u3 > 0.9);
}

#[test]
fn bbr3_responds_to_ecn_only_when_min_rtt_is_at_most_five_ms() {
    // Step marking at k packets, L4S ECN (ECT(1), exact CE counts) vs no ECN, same qdisc.
    // 1 ms and 4 ms paths: min_rtt <= 5 ms (bbr_ecn_max_rtt_us), the DCTCP-like response
    // (inflight_lo x (1 - alpha/3), inflight_hi on > 50 % CE) holds the queue near k.
    let (on1, _) = bbr3_step_k("1ms", "l4s", 10);
    let (off1, _) = bbr3_step_k("1ms", "off", 10);
    let (on4, _) = bbr3_step_k("4ms", "l4s", 5);
    let (off4, _) = bbr3_step_k("4ms", "off", 5);
    // 6 ms and 40 ms paths (min_rtt above 5 ms): the marks are ignored.
    let (on6, m6) = bbr3_step_k("6ms", "l4s", 5);
    let (off6, _) = bbr3_step_k("6ms", "off", 5);
    let (on40, m40) = bbr3_step_k("40ms", "l4s", 20);
    let (off40, _) = bbr3_step_k("40ms", "off", 20);
    eprintln!("p95 sojourn ms, ECN vs none: 1 ms {on1:.2}/{off1:.2}, 4 ms {on4:.2}/{off4:.2}, 6 ms {on6:.2}/{off6:.2} ({m6} marks), 40 ms {on40:.2}/{off40:.2} ({m40} marks)");
    assert!(on1 < 0.3 * off1, "1 ms: {on1} vs {off1}");
    assert!(on4 < 0.7 * off4, "4 ms: {on4} vs {off4}");
    assert!(m6 > 1000 && (on6 / off6 - 1.0).abs() < 0.05, "6 ms: {on6} vs {off6}");
    assert!(m40 > 1000 && (on40 / off40 - 1.0).abs() < 0.05, "40 ms: {on40} vs {off40}");
}

/// BBRv3 through a FIFO that marks CE at >= k queued packets: (p95 sojourn ms, CE marks).
fn bbr3_step_k(rtt: &str, ecn: &str, k: usize) -> (f64, u64) {
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("20s").flow(Flow::new("bbr3").rtt(rtt).ecn(ecn)).quiet_host().build();
    let mut sim = Simulation::new(&sc);
    // A DCTCP-style step: CE on ECT packets that find `k` or more packets queued.
    sim.replace_bottleneck_qdisc(Rule::new(1000, move |p: &mut Packet, _, q| {
        if q.len() >= k && matches!(p.ecn, Ecn::Ect0 | Ecn::Ect1) {
            p.ecn = Ecn::Ce;
        }
        true
    }));
    let out = sim.run();
    assert_conserved(&out.summary);
    (out.summary.bottleneck.sojourn_ms.p95.unwrap(), out.summary.bottleneck.ce_marks)
}

#[test]
fn same_seed_same_result_and_bbr2_is_bbr3() {
    let three = |v3: &str| [Flow::new("bbr").rtt("40ms"), Flow::new(v3).rtt("30ms"), Flow::new("cubic").rtt("20ms")];
    let sc = Dumbbell::new("50Mbit", "pfifo limit 200").duration("15s").flows(three("bbr3")).build();
    let mut a = Simulation::new(&sc).run();
    let mut b = Simulation::new(&sc).run();
    a.summary.wall_seconds = 0.0;
    b.summary.wall_seconds = 0.0;
    assert_eq!(serde_json::to_string(&a.summary).unwrap(), serde_json::to_string(&b.summary).unwrap());
    let bits = |s: &aqmlab_sim::metrics::Series| -> Vec<u64> { s.columns.iter().flat_map(|c| c.values.iter().map(|v| v.to_bits())).collect() };
    assert_eq!(bits(&a.series), bits(&b.series));
    // The alias builds the same model.
    let sc2 = Dumbbell::new("50Mbit", "pfifo limit 200").duration("15s").flows(three("bbr2")).build();
    let mut c = Simulation::new(&sc2).run();
    c.summary.wall_seconds = 0.0;
    assert_eq!(serde_json::to_string(&a.summary.flows).unwrap(), serde_json::to_string(&c.summary.flows).unwrap());
}
