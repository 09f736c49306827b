//! System tests of the SCE transports (reno-sce, cubic-sce with `ecn = "sce"`) through a
//! test qdisc that SCE-marks (ECT(0) → ECT(1)) every data packet arriving to a queue of at
//! least `K` packets, and CE-marks above a second threshold: the closed loop must hold the
//! queue near K by the √cwnd response alone, where a transport that ignores SCE fills it.

use crate::common::{assert_conserved, Dumbbell, Flow, Rule};
use aqmlab_sim::packet::{Ecn, Packet};
use aqmlab_sim::sim::Summary;

fn run_step_marked(cc: &str, ecn: &str, ce_at: usize) -> (Summary, u64) {
    let mut sim = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("20s").flow(Flow::new(cc).rtt("20ms").ecn(ecn)).sim();
    // pfifo with step marking: SCE (ECT(0) → ECT(1)) at 20 packets queued, CE at `ce_at`.
    sim.replace_bottleneck_qdisc(Rule::new(1000, move |p: &mut Packet, _, q| {
        if p.ecn.is_ect() {
            if q.len() >= ce_at {
                p.ecn = Ecn::Ce;
            } else if q.len() >= 20 && p.ecn == Ecn::Ect0 {
                p.ecn = Ecn::Ect1;
            }
        }
        true
    }));
    let out = sim.run();
    assert_conserved(&out.summary);
    let cwr = out.summary.flows[0].ce_received;
    (out.summary, cwr)
}

#[test]
fn sce_transports_hold_the_queue_at_the_sce_threshold_without_ce() {
    // 50 Mbit/s, 20 ms: BDP ≈ 83 packets. SCE above 20 queued packets, no CE below 1000.
    for cc in ["reno-sce", "cubic-sce"] {
        let (s, ce) = run_step_marked(cc, "sce", 10_000);
        let f = &s.flows[0];
        let p50 = s.bottleneck.sojourn_ms.p50.unwrap();
        let p99 = s.bottleneck.sojourn_ms.p99.unwrap();
        // 20 packets of 1514 B at 50 Mbit/s = 4.8 ms of queue.
        assert!(p50 < 8.0 && p99 < 15.0, "{cc}: sojourn p50 {p50} p99 {p99} ms");
        assert!(f.goodput_mbps > 0.9 * 50.0 * 1448.0 / 1514.0 * 0.95, "{cc}: {} Mbit/s", f.goodput_mbps);
        assert_eq!((s.bottleneck.drops, ce, f.fast_recoveries), (0, 0, 0), "{cc}: no loss or CE needed");
    }
    // Reno with RFC 3168 ECN ignores ECT(1): the FIFO fills to its limit (hundreds of ms).
    let (s, _) = run_step_marked("reno", "rfc3168", 10_000);
    assert!(s.bottleneck.sojourn_ms.p99.unwrap() > 100.0, "{:?}", s.bottleneck.sojourn_ms);
}

#[test]
fn sce_transports_still_respond_to_ce_and_runs_repeat() {
    // CE from 30 packets: CE responses happen, the queue stays below the CE threshold mostly.
    for cc in ["reno-sce", "cubic-sce"] {
        let (a, ce) = run_step_marked(cc, "sce", 30);
        assert!(a.bottleneck.sojourn_ms.p99.unwrap() < 12.0, "{cc}: {:?}", a.bottleneck.sojourn_ms);
        assert!(a.flows[0].goodput_mbps > 40.0, "{cc}: {}", a.flows[0].goodput_mbps);
        let (b, ce_b) = run_step_marked(cc, "sce", 30);
        assert_eq!((a.flows[0].bytes_delivered, ce), (b.flows[0].bytes_delivered, ce_b), "{cc}: deterministic");
    }
}

