//! System tests of DualPI2 (RFC 9332, Linux `sch_dualpi2.c`) in the dumbbell: the C queue and
//! the PI2 controller with classic senders, and the era profiles' step rule with Prague
//! against CUBIC (l4s-tests S1). Single step decisions are unit-tested in
//! `src/qdisc/dualpi2.rs`.

use crate::common::{Dumbbell, Flow, Metrics};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One CUBIC flow (Not-ECT) at 50 Mbit/s, 20 ms: the PI2 controller holds the classic queue
/// delay at its 15 ms target while keeping the link busy.
#[test]
fn single_cubic_flow_settles_at_the_target_delay() {
    let out = Dumbbell::new("50Mbit", "dualpi2").duration("60s").flow(Flow::new("cubic").rtt("20ms")).run_output();
    let s = &out.summary;
    let b = &s.bottleneck;
    assert_eq!(b.queues.len(), 2);
    assert_eq!((b.queues[0].name.as_str(), b.queues[1].name.as_str()), ("C", "L"));
    assert_eq!(b.queues[1].packets, 0, "Not-ECT traffic never enters L");
    let p50 = b.queues[0].sojourn_ms.p50.expect("C packets");
    // Steady part: per-interval mean C sojourn over the second half of the run.
    let q = out.series.get("bottleneck", "qdelay_C").expect("qdelay_C series");
    let mut half: Vec<f64> = q.values[q.values.len() / 2..].iter().copied().filter(|v| v.is_finite()).collect();
    let steady = median(&mut half);
    let prob = out.series.get("bottleneck", "prob").expect("prob xstat");
    let p_second_half = &prob.values[prob.values.len() / 2..];
    let p_mean = p_second_half.iter().sum::<f64>() / p_second_half.len() as f64;
    let p_max = p_second_half.iter().cloned().fold(0.0, f64::max);
    eprintln!(
        "C p50 {p50:.2} ms, steady median {steady:.2} ms, p95 {:.2} ms, util {:.3}, drops {}, mean p' {p_mean:.4}, max p' {p_max:.4}",
        b.queues[0].sojourn_ms.p95.unwrap(), b.utilization, s.packets.dropped
    );
    assert!((steady - 15.0).abs() <= 0.3 * 15.0, "steady C delay {steady} ms");
    assert!((p50 - 15.0).abs() <= 0.3 * 15.0, "C p50 {p50} ms");
    assert!(b.utilization >= 0.90, "utilisation {}", b.utilization);
    // The drops are the PI2 signal at p'² (no overflow of the 10000-packet limit).
    assert!(s.packets.dropped > 0);
    assert!(p_mean > 0.0 && p_max < 0.2, "p' mean {p_mean} max {p_max}");
}


/// Classic ECN (ECT(0)) also goes to the C queue and is CE-marked with p'² instead of dropped:
/// the same delay control without losses.
#[test]
fn classic_ecn_flow_is_marked_not_dropped() {
    let out = Dumbbell::new("50Mbit", "dualpi2").duration("30s").flow(Flow::new("cubic").rtt("20ms").ecn("rfc3168")).run_output();
    let s = &out.summary;
    let b = &s.bottleneck;
    assert_eq!(b.queues[1].packets, 0, "ECT(0) never enters L");
    let marks = b.ce_marks;
    let q = out.series.get("bottleneck", "qdelay_C").unwrap();
    let mut half: Vec<f64> = q.values[q.values.len() / 2..].iter().copied().filter(|v| v.is_finite()).collect();
    let steady = median(&mut half);
    eprintln!("ECN: drops {}, CE marks {marks}, steady C delay {steady:.2} ms, util {:.3}", s.packets.dropped, b.utilization);
    assert_eq!(s.packets.dropped, 0);
    assert!(marks > 0);
    assert!((steady - 15.0).abs() <= 0.3 * 15.0, "steady C delay {steady} ms");
    assert!(b.utilization >= 0.90);
}

/// One row of l4s-tests Scenario 1 (python/aqmlab/suites/l4s-tests/s1.toml, cc "prague-cubic":
/// flow 1 Prague with L4S ECN, flow 2 CUBIC with RFC 3168 ECN, both starting together), run
/// for `duration` on profile `stack`, with D_SS over the last `window`.
struct S1Row {
    prague_mbps: f64,
    cubic_mbps: f64,
    /// CE marks received by Prague (all its packets go through L) and by CUBIC (C).
    ce_l: u64,
    ce_c: u64,
    /// L packets dequeued, and the step marks among them (dualpi2's `step_marks`).
    l_packets: u64,
    step_marks: f64,
}

fn s1_row(stack: &str, rate: &str, rtt: &str, duration: &str, window: &str) -> S1Row {
    let out = Dumbbell::new(rate, "dualpi2")
        .duration(duration)
        .stack(stack)
        .metrics(Metrics::new().steady_window(window))
        .flow(Flow::new("prague").ecn("l4s").rtt(rtt))
        .flow(Flow::new("cubic").ecn("rfc3168").rtt(rtt))
        .run_output();
    let s = &out.summary;
    let last = |m: &str| *out.series.get("bottleneck", m).expect(m).values.last().unwrap();
    let f = &s.flows;
    assert_eq!((f[0].cc.as_str(), f[1].cc.as_str()), ("prague", "cubic"));
    let row = S1Row {
        prague_mbps: f[0].steady_mbps.unwrap(),
        cubic_mbps: f[1].steady_mbps.unwrap(),
        ce_l: f[0].ce_received,
        ce_c: f[1].ce_received,
        l_packets: s.bottleneck.queues[1].packets,
        step_marks: last("step_marks"),
    };
    eprintln!(
        "S1 {rate} {rtt}/{rtt} prague-cubic, stack {stack:>13}: Prague {:6.2} Mbit/s, CUBIC {:6.2} Mbit/s (D_SS over {window}); \
         CE at the receivers: L (Prague) {}, C (CUBIC) {}; L packets {}, step marks {} ({:.1} %), qdisc ecn_mark {}",
        row.prague_mbps,
        row.cubic_mbps,
        row.ce_l,
        row.ce_c,
        row.l_packets,
        row.step_marks,
        100.0 * row.step_marks / row.l_packets.max(1) as f64,
        last("ecn_mark"),
    );
    row
}

/// Issue 11's pathology: at 10 Mbit/s one C packet on the wire (1.21 ms) outlasts the 1 ms
/// step, so upstream's rule (`min_qlen_step` 0) step-marks nearly every L packet that waited
/// behind one, lone or not, and Prague's window is pinned low. The L4STeam kernel the study ran
/// (`stack = "l4steam-2020"`) step-marked only packets that found >= 2 packets in L, so a
/// Prague flow with a window of a few packets, spread by pacing, sees the step only when its
/// own queue builds. What that must cause: far fewer step marks per L packet, and a larger
/// Prague share. The factors asserted are the mechanism's, not the testbed's numbers: step
/// marks per L packet at least halve, and Prague's throughput at least doubles.
#[test]
fn s1_10mbit_prague_vs_cubic_l4steam_step_rule() {
    let linux = s1_row("linux", "10Mbit", "80ms", "60s", "30s");
    let era = s1_row("l4steam-2020", "10Mbit", "80ms", "60s", "30s");
    let frac = |r: &S1Row| r.step_marks / r.l_packets as f64;
    assert!(frac(&era) <= 0.5 * frac(&linux), "step marks per L packet: era {} vs linux {}", frac(&era), frac(&linux));
    assert!(era.prague_mbps >= 2.0 * linux.prague_mbps, "Prague: era {} vs linux {}", era.prague_mbps, linux.prague_mbps);
    // The link stays shared: CUBIC gives up what Prague gains (both near capacity in sum).
    for r in [&linux, &era] {
        assert!(r.prague_mbps + r.cubic_mbps > 8.5, "sum {}", r.prague_mbps + r.cubic_mbps);
    }
    // At 50 Mbit/s, 20/20 ms (printed for the record; a packet lasts 0.24 ms there, so the
    // lone-packet exemption matters less).
    let linux50 = s1_row("linux", "50Mbit", "20ms", "60s", "30s");
    let era50 = s1_row("l4steam-2020", "50Mbit", "20ms", "60s", "30s");
    for r in [&linux50, &era50] {
        assert!(r.prague_mbps + r.cubic_mbps > 45.0, "sum {}", r.prague_mbps + r.cubic_mbps);
        // Below 1 ms of sojourn nothing is step-marked, and at 50 Mbit/s that takes >= 4
        // packets ahead: the step is rare under either rule, the coupled marks dominate.
        assert!(r.step_marks < 0.01 * r.l_packets as f64 && r.step_marks < 0.1 * r.ce_l as f64);
    }
}
