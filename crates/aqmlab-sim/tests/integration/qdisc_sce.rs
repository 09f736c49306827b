//! System tests of the SCE qdiscs of chromi/sce (`cnq_codel_af`, `twin_codel_af`,
//! `lfq_cobalt`) through the dumbbell: each one's own CAKE-style shaper gives the same
//! throughput as a link of that rate, RTT fairness between 10 ms and 160 ms CUBIC flows
//! (lfq's scan/skip fair queueing; cnq's Approximate Fairness against a plain FIFO), and the
//! signals each kind of sender sees (SCE marks for `ecn = "sce"`, CE for RFC 3168, drops
//! for Not-ECT).

use crate::common::{rtt_pair, Dumbbell, Flow, Metrics};
use aqmlab_sim::sim::Summary;

/// A `rate` bottleneck with `qdisc`, run for `duration` with a steady window of `window`.
fn sce_link(rate: &str, qdisc: &str, duration: &str, window: &str) -> Dumbbell {
    Dumbbell::new(rate, qdisc).duration(duration).metrics(Metrics::new().steady_window(window))
}

fn total(s: &Summary) -> f64 {
    s.flows.iter().map(|f| f.steady_mbps.unwrap()).sum()
}

/// `KIND bandwidth 50Mbit` on a 1 Gbit/s link delivers what `KIND` (unshaped) on a 50 Mbit/s
/// link delivers, within 2 %, for each of the three disciplines.
#[test]
fn own_shaper_gives_the_same_rate_as_a_link_of_that_rate() {
    let flows = [Flow::new("cubic").rtt("20ms").ecn("rfc3168"), Flow::new("cubic").rtt("40ms")];
    // Payload share of a 1514-byte frame: 1448 / 1514 of 50 Mbit/s = 47.8 Mbit/s.
    let payload = 50.0 * 1448.0 / 1514.0;
    for (kind, args) in [("cnq_codel_af", ""), ("twin_codel_af", " sce-thresh 4"), ("lfq_cobalt", " sce-thresh 8")] {
        let shaped = sce_link("1Gbit", &format!("{kind} bandwidth 50Mbit{args}"), "20s", "15s").flows(flows.clone()).run();
        let link = sce_link("50Mbit", &format!("{kind}{args}"), "20s", "15s").flows(flows.clone()).run();
        let (a, b) = (total(&shaped), total(&link));
        eprintln!("{kind}: shaped {a:.2} Mbit/s, link {b:.2} Mbit/s, shaped p50 sojourn {:?} ms", shaped.bottleneck.sojourn_ms.p50);
        assert!((a - b).abs() / b < 0.02, "{kind}: shaped {a:.2} vs link {b:.2} Mbit/s");
        assert!(a > 0.97 * payload && a <= payload * 1.001, "{kind}: shaped total {a:.2} Mbit/s");
        // The shaper, not the 1 Gbit/s link, is the bottleneck: about 5 % busy.
        assert!(shaped.bottleneck.utilization < 0.06, "{kind}: {}", shaped.bottleneck.utilization);
        assert!(shaped.bottleneck.ce_marks > 0 && shaped.bottleneck.drops > 0, "{kind}: one ECN flow, one not");
        assert!(shaped.bottleneck.sojourn_ms.p50.unwrap() < 10.0, "{kind}: {:?}", shaped.bottleneck.sojourn_ms);
    }
}

/// Two CUBIC flows, 10 ms and 160 ms RTT, 50 Mbit/s (the l4s-tests S1 placement, 120 s with a
/// 60 s steady window). lfq_cobalt's scan/skip queueing is fair; cnq_codel_af is one FIFO
/// whose Approximate Fairness signals the flow holding more than its share of the queue
/// earlier, which makes it far fairer than a plain FIFO (pfifo limit 1000, as in S1).
#[test]
fn rtt_fairness_between_10ms_and_160ms_cubic() {
    let jain = |rate: &str, qdisc: &str| {
        let s = sce_link(rate, qdisc, "120s", "60s").flows(rtt_pair("cubic")).run();
        let rates: Vec<f64> = s.flows.iter().map(|f| f.steady_mbps.unwrap()).collect();
        let j = s.jain_steady.unwrap();
        eprintln!("{qdisc}: Jain {j:.3}, rates {rates:?}, p50 sojourn {:?} ms", s.bottleneck.sojourn_ms.p50);
        assert!(rates.iter().sum::<f64>() > 45.0, "{qdisc}: {rates:?}");
        j
    };
    let lfq = jain("1Gbit", "lfq_cobalt bandwidth 50Mbit");
    let cnq = jain("1Gbit", "cnq_codel_af bandwidth 50Mbit");
    let fifo = jain("50Mbit", "pfifo limit 1000");
    assert!(lfq >= 0.90, "lfq_cobalt Jain {lfq:.3}");
    assert!(cnq >= 0.90, "cnq_codel_af Jain {cnq:.3}");
    // Measured: lfq 0.926, cnq 0.967, pfifo 0.865.
    assert!(cnq > fifo + 0.05, "cnq_codel_af {cnq:.3} vs pfifo {fifo:.3}");
}

/// An `ecn = "sce"` CUBIC flow (a non-SCE-aware CC that counts the marks) receives SCE marks
/// from each discipline with SCE on, and the receiver's count matches the qdisc's
/// `sce_marks` xstat; an RFC 3168 flow's ECT(0) packets are SCE-marked too but its receiver
/// ignores ECT(1), so it reacts to CE only; a Not-ECT flow sees drops.
#[test]
fn sce_marks_reach_sce_flows_and_ce_or_drops_reach_the_others() {
    for qdisc in ["cnq_codel_af bandwidth 50Mbit sce-thresh 4", "twin_codel_af bandwidth 50Mbit sce-thresh 4", "lfq_cobalt bandwidth 50Mbit sce-thresh 8"] {
        for ecn in ["sce", "rfc3168", "off"] {
            let out = sce_link("1Gbit", qdisc, "20s", "10s").flow(Flow::new("cubic").rtt("20ms").ecn(ecn)).run_output();
            let (s, b) = (&out.summary, &out.summary.bottleneck);
            let f = &s.flows[0];
            let sce_marks = *out.series.get("bottleneck", "sce_marks").expect("sce_marks xstat").values.last().unwrap();
            eprintln!(
                "{qdisc} / {ecn}: sce_marks {sce_marks}, flow sce {} ce {}, qdisc ce {} drops {}, {:.1} Mbit/s, p50 {:?} ms",
                f.sce_received, f.ce_received, b.ce_marks, b.drops, f.steady_mbps.unwrap(), b.sojourn_ms.p50
            );
            assert!(f.steady_mbps.unwrap() > 40.0);
            match ecn {
                "sce" => {
                    assert!(f.sce_received > 100, "{qdisc}: {f:?}");
                    // Marked packets all reach the receiver, bar those CE-marked afterwards.
                    assert!(f.sce_received as f64 <= sce_marks && f.sce_received as f64 >= 0.95 * sce_marks);
                    assert!(b.drops == 0 && b.ce_marks > 0);
                }
                "rfc3168" => {
                    // ECT(0) packets are SCE-marked too, but an RFC 3168 endpoint ignores it.
                    assert!(sce_marks > 0.0 && f.sce_received == 0);
                    assert!(b.ce_marks > 0 && b.drops == 0 && f.ce_received > 0);
                }
                _ => {
                    assert!(sce_marks == 0.0 && b.ce_marks == 0 && b.drops > 0);
                }
            }
        }
    }
    // Without sce-thresh (the l4s-tests use of cnq_codel_af) nothing is SCE-marked.
    let s = sce_link("1Gbit", "cnq_codel_af bandwidth 50Mbit", "10s", "5s").flow(Flow::new("cubic").rtt("20ms").ecn("sce")).run();
    assert!(s.flows[0].sce_received == 0 && s.bottleneck.ce_marks > 0);
}
