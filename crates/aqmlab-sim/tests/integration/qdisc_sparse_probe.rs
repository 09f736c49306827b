//! A sparse latency probe through flow-queueing AQMs (issue 3): fq_codel serves it ahead of
//! bulk flows, so it sees almost no queue; with `flows 1` it shares the one CoDel queue.

use crate::common::{rtt_pair, Dumbbell, Probe};
use aqmlab_sim::sim::Summary;

/// The RTT pair of CUBIC flows and a 10 ms probe through a 50 Mbit/s `qdisc`, 30 s.
fn bulk_and_probe(qdisc: &str) -> Summary {
    Dumbbell::new("50Mbit", qdisc)
        .duration("30s")
        .flows(rtt_pair("cubic"))
        .probe(Probe::new().rtt("20ms").interval("10ms").size(102))
        .run()
}

/// Queueing delay the probe saw on the way up at the 99th percentile, in ms: its one-way
/// delay minus the 10 ms propagation and its own 16 us serialisation at 50 Mbit/s.
fn probe_queueing_p99(s: &Summary) -> f64 {
    s.probes[0].owd_up_ms.as_ref().unwrap().p99.unwrap() - 10.0 - 102.0 * 8.0 / 50e6 * 1e3
}

#[test]
fn fq_codel_serves_a_sparse_probe_ahead_of_bulk_flows() {
    let s = bulk_and_probe("fq_codel");
    let q = probe_queueing_p99(&s);
    // At most one bulk packet (242 us at 50 Mbit/s) ahead of it, plus scheduling.
    assert!(q < 1.0, "probe queueing p99 {q} ms");
    assert!(s.bottleneck.sojourn_ms.p50.unwrap() > 1.0, "the bulk flows do queue");
    assert!(s.probes[0].received + 2 >= s.probes[0].sent, "{:?}", s.probes[0]);
}

#[test]
fn with_flows_1_the_probe_shares_the_single_codel_queue() {
    let fq = bulk_and_probe("fq_codel");
    let single = bulk_and_probe("fq_codel flows 1");
    let q = probe_queueing_p99(&single);
    // The probe now waits behind the bulk packets: its queueing follows the shared queue.
    let shared_p99 = single.bottleneck.sojourn_ms.p99.unwrap();
    assert!(q > 2.0 && (q - shared_p99).abs() < 0.3 * shared_p99, "probe {q} ms vs queue p99 {shared_p99} ms");
    // In one queue the 10 ms flow takes more than in per-flow queues.
    let (j_fq, j_single) = (fq.jain_steady.unwrap(), single.jain_steady.unwrap());
    assert!(j_single < j_fq - 0.1, "Jain fq {j_fq} vs single queue {j_single}");
    assert!(single.flows[0].steady_mbps.unwrap() > 2.0 * single.flows[1].steady_mbps.unwrap());
}
