//! System tests of codel, fq_codel and sfq_codel with TCP through the dumbbell: outcomes that
//! follow from the algorithms' definitions (RFC 8289/8290, Linux) and would fail if the model
//! were wrong.

use crate::common::{rtt_pair, Dumbbell, Flow};

#[test]
fn codel_keeps_one_cubic_flow_near_target_at_full_rate() {
    let s = Dumbbell::new("50Mbit", "codel").duration("30s").flow(Flow::new("cubic").rtt("20ms")).run();
    let b = &s.bottleneck;
    let p50 = b.sojourn_ms.p50.unwrap();
    println!(
        "codel 1 cubic: p50 {p50:.2} ms p99 {:.2} ms util {:.3} drops {}",
        b.sojourn_ms.p99.unwrap(),
        b.utilization,
        s.packets.dropped
    );
    assert!(p50 <= 2.0 * 5.0, "median sojourn {p50} ms");
    assert!(b.utilization >= 0.90, "utilisation {}", b.utilization);
    assert!(s.packets.dropped > 0);
}

#[test]
fn fq_codel_equalises_10ms_and_160ms_rtt_flows() {
    let s = Dumbbell::new("50Mbit", "fq_codel").duration("60s").flows(rtt_pair("cubic")).run();
    let j = s.jain_steady.unwrap();
    let (a, b) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    println!("fq_codel: 10 ms {a:.2} Mbit/s, 160 ms {b:.2} Mbit/s, Jain {j:.4}, util {:.3}", s.bottleneck.utilization);
    assert!(j >= 0.98, "Jain {j} ({a} vs {b} Mbit/s)");
}

#[test]
fn fq_codel_with_one_flow_queue_is_clearly_less_fair() {
    let fq = Dumbbell::new("50Mbit", "fq_codel").duration("60s").flows(rtt_pair("cubic")).run().jain_steady.unwrap();
    let s = Dumbbell::new("50Mbit", "fq_codel flows 1").duration("60s").flows(rtt_pair("cubic")).run();
    let j = s.jain_steady.unwrap();
    let (a, b) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
    println!("fq_codel flows 1: 10 ms {a:.2} Mbit/s, 160 ms {b:.2} Mbit/s, Jain {j:.4} (fq_codel {fq:.4})");
    assert!(a > 2.0 * b, "the short-RTT flow should dominate a shared CoDel queue: {a} vs {b}");
    assert!(j < fq - 0.1, "Jain {j} vs {fq} with flow queueing");
}

#[test]
fn fq_codel_marks_ecn_flows_instead_of_dropping() {
    let s = Dumbbell::new("50Mbit", "fq_codel").duration("20s").flow(Flow::new("cubic").rtt("20ms").ecn("rfc3168").count(2)).run();
    println!(
        "fq_codel ecn: drops {} ce_marks {} p50 {:.2} ms",
        s.packets.dropped,
        s.bottleneck.ce_marks,
        s.bottleneck.sojourn_ms.p50.unwrap()
    );
    assert_eq!(s.packets.dropped, 0);
    assert!(s.bottleneck.ce_marks > 10, "{}", s.bottleneck.ce_marks);
    assert!(s.bottleneck.sojourn_ms.p50.unwrap() <= 10.0);
    // The same flows without ECN are dropped instead.
    let s = Dumbbell::new("50Mbit", "fq_codel").duration("20s").flow(Flow::new("cubic").rtt("20ms").count(2)).run();
    assert!(s.packets.dropped > 10 && s.bottleneck.ce_marks == 0);
}

#[test]
fn sfq_codel_shares_and_controls_delay() {
    let s = Dumbbell::new("50Mbit", "sfq_codel").duration("60s").flows(rtt_pair("cubic")).run();
    let j = s.jain_steady.unwrap();
    let p50 = s.bottleneck.sojourn_ms.p50.unwrap();
    println!("sfq_codel: Jain {j:.4}, p50 {p50:.2} ms, util {:.3}", s.bottleneck.utilization);
    assert!(j >= 0.95, "Jain {j}");
    assert!(p50 <= 10.0, "median sojourn {p50} ms");
}
