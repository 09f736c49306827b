//! Cascaded bottlenecks (`[[bottleneck.upstream]]`): a dumb FIFO ahead of fq_codel, as in
//! the l4s-tests FQ-interaction experiment. The slower of the two links holds the queue.
use crate::common;
use aqmlab_sim::{RunOutput, Scenario};
use common::{Dumbbell, Flow, Upstream};

fn cascade(fifo_rate: &str) -> RunOutput {
    Dumbbell::new("50Mbit", "fq_codel")
        .duration("20s")
        .upstream(Upstream::new(fifo_rate).qdisc("pfifo limit 1000"))
        // One segment per send, on quiet hosts (see the first test).
        .flow(Flow::new("cubic").rtt("20ms").gso(false))
        .quiet_host()
        .run_output()
}

/// Largest and mean value of a series after `from` seconds.
fn max_mean_after(out: &RunOutput, entity: &str, metric: &str, from: f64) -> (f64, f64) {
    let col = out.series.get(entity, metric).unwrap();
    let v: Vec<f64> = (out.series.time.iter().zip(&col.values)).filter(|(t, v)| **t > from && !v.is_nan()).map(|(_, v)| *v).collect();
    (v.iter().cloned().fold(0.0, f64::max), v.iter().sum::<f64>() / v.len() as f64)
}

/// One segment per send (`gso = false`: with GSO the FIFO also holds each skb's segments
/// behind each other, up to `tcp_tso_segs` - 1 transmissions; tcp_gso.rs covers bursts),
/// on quiet hosts (host jitter may merge two sends into one arrival).
/// Slow start overruns the FIFO (the sender's bursts arrive at twice the ACK rate); after it,
/// segments arrive at the bottleneck's pace, at most two back to back (one per delayed ACK),
/// and the FIFO at 105 % only ever delays the second of a pair by one transmission (0.23 ms).
#[test]
fn a_faster_fifo_ahead_stays_empty_and_fq_codel_holds_the_queue() {
    let out = cascade("52.5Mbit");
    let s = &out.summary;
    let (fifo, fq) = (&s.upstream[0], &s.bottleneck);
    let (fifo_max, _) = max_mean_after(&out, "upstream-0", "qdelay_max", 5.0);
    let (_, fq_mean) = max_mean_after(&out, "bottleneck", "qdelay", 5.0);
    println!(
        "105 %: FIFO sojourn p50 {:?} p99 {:?} ms (max after 5 s {fifo_max:.3} ms), util {:.3}, drops {}; \
         fq_codel sojourn p50 {:?} p99 {:?} ms (mean after 5 s {fq_mean:.3} ms), util {:.3}, drops {}",
        fifo.sojourn_ms.p50, fifo.sojourn_ms.p99, fifo.utilization, fifo.drops, fq.sojourn_ms.p50, fq.sojourn_ms.p99, fq.utilization, fq.drops
    );
    assert_eq!(fifo.qdisc, "pfifo limit 1000");
    assert_eq!(fifo.drops, 0);
    assert!(fifo.sojourn_ms.p50.unwrap() < 0.25, "FIFO p50 {:?}", fifo.sojourn_ms.p50);
    assert!(fifo_max < 0.5, "FIFO steady-state max {fifo_max}");
    assert!(fq_mean > 1.0 && fq.sojourn_ms.p50.unwrap() > 1.0, "fq_codel {fq_mean} {:?}", fq.sojourn_ms.p50);
    assert!(fq.drops + fq.ce_marks > 0);
    assert!(fq.utilization > 0.95 && fifo.utilization < fq.utilization);
}

#[test]
fn a_slower_fifo_ahead_becomes_the_bottleneck() {
    let out = cascade("47.5Mbit");
    let s = &out.summary;
    let (fifo, fq) = (&s.upstream[0], &s.bottleneck);
    println!(
        "95 %: FIFO sojourn p50 {:?} p99 {:?} ms, util {:.3}, drops {}; fq_codel sojourn p50 {:?} p99 {:?} ms, util {:.3}, drops {}",
        fifo.sojourn_ms.p50, fifo.sojourn_ms.p99, fifo.utilization, fifo.drops, fq.sojourn_ms.p50, fq.sojourn_ms.p99, fq.utilization, fq.drops
    );
    // CUBIC fills the 1000-packet FIFO (up to 255 ms at 47.5 Mbit/s) and drops there.
    assert!(fifo.sojourn_ms.p50.unwrap() > 50.0, "FIFO p50 {:?}", fifo.sojourn_ms.p50);
    assert!(fifo.drops > 0 && fifo.utilization > 0.95);
    // Packets reach fq_codel spaced at 47.5 Mbit/s and leave at 50: no queue, no AQM action.
    assert!(fq.sojourn_ms.p99.unwrap() < 0.05, "fq_codel p99 {:?}", fq.sojourn_ms.p99);
    assert_eq!(fq.drops + fq.ce_marks, 0);
    assert!(fq.utilization < 0.96);
    // Packets dropped at the FIFO are in the conservation check (`cascade` asserts it).
    assert!(s.packets.dropped >= fifo.drops);
}

#[test]
fn upstream_links_add_their_delay_and_are_checked() {
    let s = Dumbbell::link("10Mbit").duration("1s").delay("1ms").upstream(Upstream::new("20Mbit").delay("2ms")).flow(Flow::new("cubic").rtt("20ms")).run();
    assert_eq!(s.flows[0].rtt_ms, 23.0);
    assert_eq!(s.upstream[0].qdisc, "pfifo limit 1000");
    let e = Scenario::from_toml("duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[bottleneck.upstream]]\nqdisc = \"pfifo\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bottleneck.upstream[0]") && e.contains("rate"), "{e}");
}
