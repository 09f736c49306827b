//! System tests of DCTCP (RFC 8257, Linux tcp_dctcp.c) and TCP Prague (L4STeam tcp_prague.c,
//! 2020) through the dumbbell. Each checks an outcome that follows from the definitions and
//! would fail if the model were wrong.
//!
//! The tests that need `dualpi2` or `fq_codel` skip themselves (with a message) until those
//! disciplines are registered on the branch; they run unchanged once merged.

use aqmlab_sim::packet::{Ecn, Packet};
use aqmlab_sim::rng::Stream;
use aqmlab_sim::{Simulation, Time};

use crate::common;
use common::{assert_conserved, run, Dumbbell, Flow, Metrics, Rule};


const MS: u64 = 1_000_000;

/// Average cwnd of one DCTCP/Prague flow whose every ECT data packet is CE-marked with
/// probability `p` (a seeded stream), over a fast link that never queues.
fn mean_cwnd_under_random_marking(cc: &str, p: f64, secs: u64) -> (f64, u64) {
    let sc = Dumbbell::new("200Mbit", "pfifo limit 10000").duration(&format!("{secs}s")).flow(Flow::new(cc).rtt("20ms").ecn("l4s")).build();
    let mut sim = Simulation::new(&sc);
    let mut rng = Stream::new(7, "marks");
    sim.replace_bottleneck_qdisc(Rule::new(10_000, move |pkt: &mut Packet, _, _| {
        if matches!(pkt.ecn, Ecn::Ect0 | Ecn::Ect1) && rng.uniform() < p {
            pkt.ecn = Ecn::Ce;
        }
        true
    }));
    let (mut sum, mut n) = (0.0, 0u64);
    for ms in 1..=secs * 1000 {
        sim.run_until(Time(ms * MS));
        if ms > 5_000 {
            sum += sim.sender(0).tp.cwnd as f64;
            n += 1;
        }
    }
    let out = sim.run();
    assert_conserved(&out.summary);
    (sum / n as f64, out.summary.bottleneck.drops)
}


/// `prague` (flow 0, L4S ECN) and CUBIC (flow 1, no ECN), both 20 ms, through a 50 Mbit/s
/// `qdisc` for 60 s with a 40 s steady window.
fn prague_and_cubic(qdisc: &str, prague: &str) -> Dumbbell {
    Dumbbell::new("50Mbit", qdisc)
        .duration("60s")
        .metrics(Metrics::new().steady_window("40s"))
        .flow(Flow::new(prague).rtt("20ms").ecn("l4s"))
        .flow(Flow::new("cubic").rtt("20ms"))
}

/// Whether a qdisc kind is registered (the AQMs are merged from other branches).
fn has_qdisc(kind: &str) -> bool {
    let ok = aqmlab_sim::qdisc::REGISTRY.iter().any(|(k, _)| *k == kind);
    if !ok {
        eprintln!("SKIPPED: qdisc '{kind}' is not registered on this branch yet");
    }
    ok
}

/// DCTCP's response to a fixed marking probability p (every ECT packet CE-marked
/// independently with probability p, no queue): the average window W ≈ 2/p.
///
/// The formula: with per-packet marking p, DCTCP's α converges to p, and the fluid model
/// (RFC 8257 §3.3's cwnd·(1 − α/2) once per RTT against +1 per RTT; Alizadeh et al.; the
/// "scalable" law of RFC 9330) balances pW/2 = 1 per RTT, i.e. W = 2/p.
/// Linux DCTCP gets there by a different route that pins W at the same value: it reduces
/// at most once per window through CWR, grows only outside CWR (≈ 1/p ACKs → 1/(pW) packets
/// per cycle), and truncates the cut to ⌊cwnd·α/2048⌋ packets. Without the truncation the
/// per-cycle balance would settle at √2/p, where the cut αW/2 ≈ 0.7 packet truncates to 0;
/// so W climbs until ⌊Wα/2⌋ = 1, i.e. W ≈ 2/α ≈ 2/p, and hovers just below it. A
/// model without the truncation or with growth during CWR would miss the 20 % band (√2/p is
/// 29 % below, Prague's law below is ≥ 25 % above).
/// Below p ≈ 1/40 the per-window F resolution of 1/64 (⌊Δce·64/Δdelivered⌋) biases α down
/// and W overshoots 2/p (W ≈ 133 at p = 0.02) — Linux behaviour, left out of the assertion.
#[test]
fn dctcp_window_follows_two_over_p_under_random_marking() {
    for p in [0.03, 0.05, 0.1] {
        let (w, drops) = mean_cwnd_under_random_marking("dctcp", p, 30);
        let model = 2.0 / p;
        eprintln!("dctcp p {p}: mean cwnd {w:.2}, model 2/p = {model:.1} ({:+.1} %)", 100.0 * (w / model - 1.0));
        assert_eq!(drops, 0);
        assert!((w / model - 1.0).abs() <= 0.20, "p {p}: W {w:.2} vs 2/p {model:.1}");
    }
}

/// Prague's response to the same random marking, without RTT scaling. Prague keeps growing
/// during CWR by (1 − p) packets per RTT (only unmarked ACKs count), and cuts αW/2 on the
/// fractional window at each CWR entry; a CWR episode lasts one RTT plus the wait for the
/// next mark (1/p packets = 1/(pW) RTT). With x = pW the balance per RTT is
/// (1 − p) = (x/2)·x/(x + 1), so x = (1 − p) + √((1 − p)² + 2(1 − p)) ≈ 2.7 for small p:
/// W ≈ 2.7/p, not DCTCP's 2/p.
#[test]
fn prague_window_follows_its_response_law_under_random_marking() {
    for p in [0.03, 0.05, 0.1] {
        let (w, drops) = mean_cwnd_under_random_marking("prague rtt_scaling 0", p, 30);
        let q = 1.0 - p;
        let model = (q + (q * q + 2.0 * q).sqrt()) / p;
        eprintln!("prague p {p}: mean cwnd {w:.2}, model {model:.1} ({:+.1} %), 2/p = {:.1}", 100.0 * (w / model - 1.0), 2.0 / p);
        assert_eq!(drops, 0);
        assert!((w / model - 1.0).abs() <= 0.10, "p {p}: W {w:.2} vs model {model:.1}");
    }
}

/// Without ECN DCTCP is Linux's `dctcp_reno`: the run is identical to Reno's.
#[test]
fn dctcp_without_ecn_falls_back_to_reno() {
    let pair = |cc: &str| Dumbbell::new("20Mbit", "pfifo limit 60").duration("20s").flow(Flow::new(cc).rtt("20ms")).flow(Flow::new(cc).rtt("40ms")).run();
    let (a, b) = (pair("dctcp"), pair("reno"));
    assert!(a.bottleneck.drops > 0);
    for (x, y) in a.flows.iter().zip(&b.flows) {
        assert_eq!(x.bytes_delivered, y.bytes_delivered);
        assert_eq!(x.retransmits, y.retransmits);
        assert_eq!(x.fast_recoveries, y.fast_recoveries);
    }
}

/// Against a step marker at K = 20 packets (DCTCP's own AQM, RFC 8257 §3.1) on a 100 Mbit/s,
/// 2 ms path (BDP ≈ 17 packets), DCTCP keeps the link busy by cutting only α/2, while Reno
/// (same ECN feedback, halving) drains the queue below the BDP and under-utilises.
#[test]
fn dctcp_keeps_the_link_busy_behind_a_step_marker() {
    let step = |cc: &str| {
        let sc = Dumbbell::new("100Mbit", "pfifo limit 1000").duration("20s").flow(Flow::new(cc).rtt("2ms").ecn("l4s")).build();
        let mut sim = Simulation::new(&sc);
        // Mark on arrival when more than K = 20 packets are queued (instantaneous, as
        // DCTCP's recommended AQM).
        sim.replace_bottleneck_qdisc(Rule::new(1000, |p: &mut Packet, _, q| {
            if q.backlog_bytes() > 20 * 1514 && matches!(p.ecn, Ecn::Ect0 | Ecn::Ect1) {
                p.ecn = Ecn::Ce;
            }
            true
        }));
        let out = sim.run();
        assert_conserved(&out.summary);
        out.summary
    };
    let d = step("dctcp");
    let r = step("reno");
    eprintln!(
        "step marker K=20 at 100 Mbit/s, 2 ms: dctcp util {:.3} p99 {:?} ms; reno util {:.3}",
        d.bottleneck.utilization, d.bottleneck.sojourn_ms.p99, r.bottleneck.utilization
    );
    assert_eq!(d.bottleneck.drops, 0);
    assert!(d.bottleneck.utilization >= 0.95, "dctcp utilisation {}", d.bottleneck.utilization);
    assert!(r.bottleneck.utilization < d.bottleneck.utilization - 0.03, "reno {} vs dctcp {}", r.bottleneck.utilization, d.bottleneck.utilization);
}

/// Prague responds to loss like Reno (the 2020 build studied by sce-l4s-ect1 was reported to
/// ignore loss in L4S mode; the versions read halve): through a drop-tail FIFO it runs a
/// sawtooth of fast recoveries, each halving cwnd, without timeouts.
#[test]
fn prague_halves_on_loss_through_a_drop_tail_fifo() {
    let sc = Dumbbell::new("20Mbit", "pfifo limit 40").duration("30s").flow(Flow::new("prague").rtt("20ms").ecn("l4s")).build();
    let mut sim = Simulation::new(&sc);
    let mut prev_state = aqmlab_sim::cc::CaState::Open;
    let mut peak = 0u32;
    let mut ratios = vec![];
    let mut trough: Option<u32> = None;
    for ms in 1..=30_000u64 {
        sim.run_until(Time(ms * MS));
        let s = sim.sender(0);
        let st = s.ca_state();
        use aqmlab_sim::cc::CaState::*;
        if st == Recovery && prev_state != Recovery {
            trough = Some(u32::MAX);
        }
        if let Some(t) = trough.as_mut() {
            *t = (*t).min(s.tp.cwnd);
        }
        if st == Open && prev_state == Recovery {
            if ms > 3_000 {
                ratios.push(trough.unwrap() as f64 / peak as f64);
            }
            trough = None;
            peak = 0;
        }
        if st == Open {
            peak = peak.max(s.tp.cwnd);
        }
        prev_state = st;
    }
    let out = sim.run();
    assert_conserved(&out.summary);
    let f = &out.summary.flows[0];
    eprintln!("prague through pfifo 40: {} recoveries, cwnd after/before {:?}, util {:.3}", f.fast_recoveries, ratios, out.summary.bottleneck.utilization);
    assert_eq!(f.rto_events, 0);
    assert!(ratios.len() >= 5, "{ratios:?}");
    for r in &ratios {
        assert!((0.4..=0.6).contains(r), "cwnd after a loss / before: {r} ({ratios:?})");
    }
}

/// TCP Prague alone through DualPI2 (defaults) at 50 Mbit/s, 20 ms: the L queue's step AQM
/// (1 ms) and Prague's scalable response keep the link busy with a sub-2 ms L sojourn.
#[test]
fn prague_alone_through_dualpi2_fills_the_link_with_a_shallow_l_queue() {
    if !has_qdisc("dualpi2") {
        return;
    }
    let sc = Dumbbell::new("50Mbit", "dualpi2").duration("30s").flow(Flow::new("prague").rtt("20ms").ecn("l4s")).build();
    let s = run(&sc);
    let b = &s.bottleneck;
    assert_eq!(b.queues[1].name, "L");
    let l = &b.queues[1].sojourn_ms;
    eprintln!("prague/dualpi2: util {:.4}, L p50 {:?} p99 {:?} ms, C packets {}, drops {}", b.utilization, l.p50, l.p99, b.queues[0].packets, b.drops);
    assert!(b.utilization >= 0.95, "utilisation {}", b.utilization);
    assert!(l.p99.unwrap() <= 2.0, "L sojourn p99 {:?} ms", l.p99);
    assert!(b.queues[0].packets <= 1, "only the (Not-ECT) SYN goes to C: {}", b.queues[0].packets);
}

/// l4s-tests scenario 6: Prague vs CUBIC (Not-ECT) sharing one CoDel queue (`fq_codel flows
/// 1`), 50 Mbit/s, 20 ms, 60 s, steady rate over 40 s. CoDel marks Prague's ECT(1) packets
/// with classic semantics at a rate that is tiny for a scalable CC, while it drops CUBIC's:
/// Prague dominates (testbed 45.81 : 1.81 Mbit/s = 25:1).
#[test]
fn prague_dominates_cubic_in_a_single_codel_queue() {
    if !has_qdisc("fq_codel") {
        return;
    }
    let s = prague_and_cubic("fq_codel flows 1", "prague").run();
    let (a, b) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    eprintln!("fq_codel flows 1: prague {a:.2} Mbit/s, cubic {b:.2} Mbit/s, ratio {:.1}:1 (testbed 25:1)", a / b);
    assert!(a > 10.0 * b, "prague {a} vs cubic {b}");
}

/// The same pair through fq_codel with flow queues: per-flow DRR isolates them, so the
/// shares are equal (testbed Jain 1.000).
#[test]
fn prague_and_cubic_share_fairly_through_fq_codel() {
    if !has_qdisc("fq_codel") {
        return;
    }
    let s = prague_and_cubic("fq_codel", "prague").run();
    let j = s.jain_steady.unwrap();
    eprintln!("fq_codel: prague {:.2}, cubic {:.2} Mbit/s, Jain {j:.4}", s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    assert!(j >= 0.98, "Jain {j}");
}

/// l4s-tests scenario 1 row: CUBIC vs Prague, both 10 ms, through DualPI2 at 50 Mbit/s for
/// 180 s (60 s steady window). The coupling (k = 2) with Prague's smaller marking response
/// favours Prague: testbed 34.57 vs 12.65 Mbit/s (2.7:1). With the default RATE-mode RTT
/// independence Prague at 10 ms grows only (10/25)² packets per RTT after 500 rounds, which
/// narrows the gap; run without it too (`rtt_scaling 0`) and report both.
#[test]
fn prague_gets_more_than_cubic_through_dualpi2_at_equal_rtt() {
    if !has_qdisc("dualpi2") {
        return;
    }
    for prague in ["prague", "prague rtt_scaling 0"] {
        let sc = Dumbbell::new("50Mbit", "dualpi2").duration("180s").flow(Flow::new("cubic").rtt("10ms")).flow(Flow::new(prague).rtt("10ms").ecn("l4s")).build();
        let s = run(&sc);
        let (c, p) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
        eprintln!(
            "dualpi2 10 ms, {prague}: cubic {c:.2}, prague {p:.2} Mbit/s, ratio {:.2} (testbed 34.57/12.65 = 2.73), Jain {:.3} (testbed 0.823)",
            p / c,
            s.jain_steady.unwrap()
        );
        assert!(p > c, "{prague}: prague {p} vs cubic {c}");
    }
}

/// The classic-ECN-AQM detection (`classic_ecn_detection 1`, as the sce-l4s-ect1 study ran
/// Prague) against CUBIC in one CoDel queue, 50 Mbit/s, 20 ms: at CoDel's default 5 ms target
/// the RTT variation and queue depth of a classic AQM raise the score past L_STICKY and Prague
/// falls back to a Reno-like α, so the shares come close; with CoDel tightened to 1 ms / 20 ms
/// the delay signal is too weak and Prague still dominates (the study's "false negative");
/// through DualPI2 alone it is not triggered (no false positive on a clean 50 Mbit/s path).
#[test]
fn classic_ecn_detection_falls_back_at_default_codel_but_misses_tightened_codel() {
    if !has_qdisc("fq_codel") || !has_qdisc("dualpi2") {
        return;
    }
    let pair = |qdisc: &str, prague: &str| {
        let s = prague_and_cubic(qdisc, prague).run();
        let (a, b) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
        eprintln!("{qdisc}, {prague}: prague {a:.2} cubic {b:.2} Mbit/s ({:.1}:1)", a / b);
        a / b
    };
    let det = "prague classic_ecn_detection 1";
    assert!(pair("fq_codel flows 1", "prague") > 10.0);
    assert!(pair("fq_codel flows 1", det) < 2.0, "detected and fell back");
    assert!(pair("fq_codel flows 1 target 1ms interval 20ms", det) > 10.0, "not detected (false negative)");
    let alone = |prague: &str| {
        let s = Dumbbell::new("50Mbit", "dualpi2").duration("30s").flow(Flow::new(prague).rtt("20ms").ecn("l4s")).run();
        s.flows[0].bytes_delivered
    };
    assert_eq!(alone(det), alone("prague"), "no fallback through DualPI2");
}

/// Same scenario twice: identical summaries.
#[test]
fn dctcp_and_prague_runs_are_deterministic() {
    let sc = Dumbbell::new("50Mbit", "pfifo limit 100").duration("10s").flow(Flow::new("dctcp").rtt("20ms").ecn("l4s")).flow(Flow::new("prague classic_ecn_detection 1").rtt("30ms").ecn("l4s")).build();
    let mut a = Simulation::new(&sc).run();
    let mut b = Simulation::new(&sc).run();
    a.summary.wall_seconds = 0.0;
    b.summary.wall_seconds = 0.0;
    assert_eq!(serde_json::to_string(&a.summary).unwrap(), serde_json::to_string(&b.summary).unwrap());
}

/// One two-flow DualPI2 run (flow 0 Prague, flow 1 CUBIC with classic ECN, as the
/// l4s-tests endpoints with tcp_ecn=3) on a given era profile: steady Mbit/s of both.
fn dualpi2_pair(stack: &str, rate: &str, prague: &str, rtt_ms: (u32, u32), duration: &str, window: &str) -> (f64, f64) {
    let s = Dumbbell::new(rate, "dualpi2")
        .stack(stack)
        .duration(duration)
        .metrics(Metrics::new().steady_window(window))
        .flow(Flow::new(prague).rtt(format!("{}ms", rtt_ms.0)).ecn("l4s"))
        .flow(Flow::new("cubic").rtt(format!("{}ms", rtt_ms.1)).ecn("rfc3168"))
        .run();
    (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap())
}

/// The `l4steam-2020` profile runs the Prague of L4STeam/linux@b256daed (v0.5): RTT
/// independence off by default (`prague_rtt_scaling = RTT_CONTROL_NONE`). Printed for both
/// stacks: the S1 row (10 Mbit/s, prague 80 ms vs cubic 80 ms, 60 s; linux model
/// 0.27 vs 9.0 Mbit/s before) and the 50 Mbit/s 10/10 and 20/20 ms rows (180 s, 60 s window;
/// testbed 2.73:1 at 10/10).
///
/// What the change must cause, independent of DualPI2 (whose per-profile behaviour another
/// change may alter, so no fairness bound is asserted): on the same profile, same DualPI2,
/// the 10/10 ms Prague:CUBIC ratio with the era's default (no RTT scaling: one packet per RTT
/// at 10 ms) is higher than with RATE-mode scaling switched on explicitly (`rtt_scaling 1`,
/// which at 10 ms grows only (10/15)² ≈ 0.44 packet per RTT after 100 rounds), and an
/// explicit parameter is honoured on the profile (the two runs differ).
#[test]
fn l4steam_2020_prague_has_rtt_independence_off_in_dualpi2() {
    if !has_qdisc("dualpi2") {
        return;
    }
    for stack in ["linux", "l4steam-2020"] {
        let (p, c) = dualpi2_pair(stack, "10Mbit", "prague", (80, 80), "60s", "40s");
        eprintln!("S1 10Mbit dualpi2 80/80 ms, stack {stack}: prague {p:.2} cubic {c:.2} Mbit/s (ratio {:.2})", p / c);
    }
    let mut ratio = std::collections::HashMap::new();
    for stack in ["linux", "l4steam-2020"] {
        for rtt in [10, 20] {
            let (p, c) = dualpi2_pair(stack, "50Mbit", "prague", (rtt, rtt), "180s", "60s");
            eprintln!("S1 50Mbit dualpi2 {rtt}/{rtt} ms, stack {stack}: prague {p:.2} cubic {c:.2} Mbit/s, ratio {:.2}", p / c);
            ratio.insert((stack, rtt), p / c);
        }
    }
    let (p, c) = dualpi2_pair("l4steam-2020", "50Mbit", "prague rtt_scaling 1", (10, 10), "180s", "60s");
    let rate_mode = p / c;
    eprintln!("S1 50Mbit dualpi2 10/10 ms, stack l4steam-2020, prague rtt_scaling 1: prague {p:.2} cubic {c:.2}, ratio {rate_mode:.2}");
    let era = ratio[&("l4steam-2020", 10)];
    assert!(era > rate_mode, "l4steam-2020 10/10 ms: era default ratio {era:.2} should exceed RATE mode's {rate_mode:.2}");
}

/// sce-l4s-ect1's "ignoring packet loss" (L4STeam/linux@e741f5ac): through a drop-tail FIFO
/// no CE ever arrives, so ssthresh is still infinite at the first loss; e741f5ac's
/// `prague_ssthresh` returns max(cwnd, ∞) and, without `in_loss`, slow start swallows every
/// ACK before the halving can be applied — the flow never leaves slow start and keeps
/// losing. b256daed (`l4steam-2020`, `in_loss`) halves and settles. rwnd bounds the window
/// as on the testbed ("at full rwnd").
#[test]
fn l4steam_2020_04_prague_ignores_loss_through_drop_tail() {
    let mut out = Vec::new();
    for stack in ["l4steam-2020", "l4steam-2020-04"] {
        let sc = Dumbbell::new("20Mbit", "pfifo limit 100").stack(stack).duration("20s").flow(Flow::new("prague").rtt("20ms").ecn("l4s").rwnd("2MB")).build();
        let mut sim = Simulation::new(&sc);
        sim.run_until(Time::from_secs(20));
        let (cwnd, ssthresh) = (sim.sender(0).tp.cwnd, sim.sender(0).tp.ssthresh);
        let s = sim.run().summary;
        assert_conserved(&s);
        let f = &s.flows[0];
        eprintln!(
            "{stack}: pfifo 100, 20 Mbit/s: goodput {:.2} Mbit/s, retransmits {}, drops {}, final cwnd {cwnd} ssthresh {ssthresh}",
            f.goodput_mbps, f.retransmits, s.bottleneck.drops
        );
        out.push((ssthresh, s.bottleneck.drops, f.ce_received));
    }
    let ((ss20, drops20, ce20), (ss04, drops04, ce04)) = (out[0], out[1]);
    assert_eq!((ce20, ce04), (0, 0), "drop-tail never marks");
    assert!(ss20 < 1000, "b256daed leaves slow start on loss (ssthresh {ss20})");
    assert_eq!(ss04, u32::MAX, "e741f5ac never leaves slow start");
    assert!(drops04 > 5 * drops20, "e741f5ac keeps losing: {drops04} vs {drops20} drops");
}
