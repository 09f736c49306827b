//! System tests of RED and HRED at the bottleneck: the average queue is held between the
//! thresholds by early signals, the link stays busy, and ECN-capable traffic is marked
//! rather than dropped.

use crate::common::{Dumbbell, Flow};
use aqmlab_sim::sim::RunOutput;

/// Values of a bottleneck series from `from` seconds on (NaN samples skipped).
fn series_after(out: &RunOutput, metric: &str, from: f64) -> Vec<f64> {
    let col = out.series.get("bottleneck", metric).unwrap_or_else(|| panic!("no bottleneck {metric} series"));
    out.series.time.iter().zip(&col.values).filter(|(t, v)| **t >= from && !v.is_nan()).map(|(_, v)| *v).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

const RED_400K: &str = "red limit 400000 avpkt 1000 adaptive bandwidth 50Mbit ecn";
/// tc's derivation for RED_400K (see the unit tests): min 33 333 B, max 100 000 B.
const MIN_TH: f64 = 33_333.0;
const MAX_TH: f64 = 100_000.0;

/// Mean of the qavg series and the fraction of its samples inside [min_th, max_th).
fn band(qavg: &[f64]) -> (f64, f64) {
    let inside = qavg.iter().filter(|&&q| (MIN_TH..MAX_TH).contains(&q)).count() as f64 / qavg.len() as f64;
    (mean(qavg), inside)
}

/// Adaptive RED keeps max_P within [~1 %, ~51 %].
fn check_max_p(out: &RunOutput) {
    let prob = series_after(out, "prob", 0.0);
    assert!(prob.iter().all(|&p| (0.009..0.52).contains(&p)), "max_P out of range");
}

/// One CUBIC flow, 50 Mbit/s, 20 ms. RED acts between the thresholds: in every CUBIC cycle
/// the average climbs past min_th and an early drop comes before it reaches max_th (so there
/// are no forced drops and no tail drops), and the link stays busy. Between drops the
/// average is below min_th: after each drop a single CUBIC flow (beta 0.7) drains the queue,
/// since 0.7 (BDP + 33 kB) < BDP = 125 kB.
#[test]
fn red_acts_between_the_thresholds_for_one_cubic_flow() {
    let out = Dumbbell::new("50Mbit", RED_400K).duration("30s").flow(Flow::new("cubic").rtt("20ms")).run_output();
    let b = &out.summary.bottleneck;
    let qavg = series_after(&out, "qavg", 3.0);
    let peak = qavg.iter().cloned().fold(0.0, f64::max);
    assert!(peak < MAX_TH, "qavg reached max_th: {peak}");
    // Each whole 2-s window (longer than a CUBIC cycle here) has its peak between the
    // thresholds; the last 1 s (27 s of samples) is shorter than a cycle and left out.
    for (i, w) in qavg.chunks_exact(40).enumerate() {
        let p = w.iter().cloned().fold(0.0, f64::max);
        assert!((MIN_TH..MAX_TH).contains(&p), "window {i}: peak qavg {p}");
    }
    assert!(b.utilization >= 0.9, "utilisation {}", b.utilization);
    assert!(b.drops >= 10, "early drops {}", b.drops);
    assert_eq!(b.ce_marks, 0, "Not-ECT flow");
    // The queue never got near max_th either: 100 kB at 50 Mbit/s is 16 ms.
    let p99 = b.sojourn_ms.p99.unwrap();
    assert!(p99 < 16.0, "p99 sojourn {p99} ms");
    check_max_p(&out);
    let (m, inside) = band(&qavg);
    eprintln!("1 flow: qavg mean {m:.0} B peak {peak:.0} B ({:.0} % in band), util {:.3}, drops {}, p99 {p99:.1} ms", inside * 100.0, b.utilization, b.drops);
}

/// Eight CUBIC flows: the desynchronised aggregate keeps the average itself between the
/// thresholds.
#[test]
fn red_holds_the_average_between_the_thresholds_for_eight_flows() {
    let out = Dumbbell::new("50Mbit", RED_400K).duration("30s").flow(Flow::new("cubic").rtt("20ms").count(8)).run_output();
    let b = &out.summary.bottleneck;
    let qavg = series_after(&out, "qavg", 5.0);
    let (m, inside) = band(&qavg);
    assert!(m > MIN_TH && m < MAX_TH, "mean qavg {m} B outside [{MIN_TH}, {MAX_TH})");
    assert!(inside > 0.8, "qavg inside the thresholds only {:.0} % of the time", inside * 100.0);
    assert!(b.utilization >= 0.9, "utilisation {}", b.utilization);
    check_max_p(&out);
    eprintln!("8 flows: qavg mean {m:.0} B ({:.0} % in band), util {:.3}, drops {}", inside * 100.0, b.utilization, b.drops);
}

/// ECN-capable CUBIC flows are CE-marked instead of dropped (the `ecn` flag), with the
/// average again kept below max_th.
#[test]
fn red_marks_ecn_flows_instead_of_dropping() {
    let flows = Flow::new("cubic").rtt("20ms").ecn("rfc3168").count(4);
    let out = Dumbbell::new("50Mbit", RED_400K).duration("30s").flow(flows).run_output();
    let b = &out.summary.bottleneck;
    let qavg = series_after(&out, "qavg", 3.0);
    let (m, inside) = band(&qavg);
    let peak = qavg.iter().cloned().fold(0.0, f64::max);
    assert!(peak < MAX_TH, "qavg reached max_th: {peak}");
    assert!(m > MIN_TH, "mean qavg {m} B below min_th");
    assert!(b.ce_marks > 50, "ce marks {}", b.ce_marks);
    // ECT data is marked, never dropped early; the child FIFO never overflows.
    assert!(b.drops <= 2, "drops {} with {} marks", b.drops, b.ce_marks);
    assert!(b.utilization >= 0.9, "utilisation {}", b.utilization);
    check_max_p(&out);
    eprintln!("4 ECN flows: qavg mean {m:.0} B peak {peak:.0} B ({:.0} % in band), util {:.3}, marks {}, drops {}", inside * 100.0, b.utilization, b.ce_marks, b.drops);
}

/// HRED (min 3, max 40 packets, w_q 0.02, max_p 0.65) at the load-transient study's 2 Mbit/s
/// and ~160 ms RTT keeps a much shorter queue than the 100-packet tail-drop buffer it sits in.
#[test]
fn hred_keeps_the_queue_short_at_a_slow_access_link() {
    let flow = Flow::new("cubic").rtt("162ms");
    let fifo = Dumbbell::new("2Mbit", "pfifo limit 100").duration("40s").flow(flow.clone()).run_output();
    let hred = Dumbbell::new("2Mbit", "hred").duration("40s").flow(flow).run_output();
    let (f, h) = (&fifo.summary.bottleneck, &hred.summary.bottleneck);
    let qavg = series_after(&hred, "qavg", 5.0);
    assert!(qavg.iter().all(|&q| q < 80.0), "HRED average beyond 2 max_th");
    assert!(h.drops > 0 && h.ce_marks == 0);
    let (fp95, hp95) = (f.sojourn_ms.p95.unwrap(), h.sojourn_ms.p95.unwrap());
    assert!(hp95 < 0.5 * fp95, "HRED p95 {hp95} ms vs pfifo {fp95} ms");
    assert!(h.utilization > 0.7, "HRED utilisation {}", h.utilization);
    eprintln!(
        "2 Mbit/s: pfifo p95 {fp95:.0} ms util {:.3}; hred p95 {hp95:.0} ms util {:.3}, mean qavg {:.1} pkts",
        f.utilization, h.utilization, mean(&qavg)
    );
}
