//! System tests of DualPI2 (RFC 9332, Linux `sch_dualpi2.c`) in the dumbbell. Only classic
//! senders exist so far, so these exercise the C queue and the PI2 controller; the L queue,
//! coupling and step AQM are covered by the unit tests in `src/qdisc/dualpi2.rs`.

use aqmlab_sim::sim::Summary;
use aqmlab_sim::{Scenario, Simulation};

fn dumbbell(rate: &str, qdisc: &str, duration: &str, flows: &str) -> Scenario {
    let text = format!("duration = \"{duration}\"\n[bottleneck]\nrate = \"{rate}\"\nqdisc = \"{qdisc}\"\n{flows}");
    Scenario::from_toml(&text, &[]).expect("valid scenario")
}

fn assert_conserved(s: &Summary) {
    let p = s.packets;
    assert_eq!(p.sent, p.delivered + p.dropped + p.in_flight, "packet conservation: {p:?}");
    assert!(p.sent > 0);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One CUBIC flow (Not-ECT) at 50 Mbit/s, 20 ms: the PI2 controller holds the classic queue
/// delay at its 15 ms target while keeping the link busy.
#[test]
fn single_cubic_flow_settles_at_the_target_delay() {
    let sc = dumbbell("50Mbit", "dualpi2", "60s", "[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n");
    let out = Simulation::new(&sc).run();
    let s = &out.summary;
    assert_conserved(s);
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
    let sc = dumbbell("50Mbit", "dualpi2", "30s", "[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\necn = \"rfc3168\"\n");
    let out = Simulation::new(&sc).run();
    let s = &out.summary;
    assert_conserved(s);
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
