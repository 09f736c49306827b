//! System tests of PIE (RFC 8033, Linux sch_pie.c) at the bottleneck of the dumbbell.

use crate::common::{Dumbbell, Flow};
use aqmlab_sim::sim::RunOutput;

/// Mean of a series' finite values over the time window [from, to) seconds.
fn mean_between(out: &RunOutput, metric: &str, from: f64, to: f64) -> f64 {
    let col = out.series.get("bottleneck", metric).unwrap_or_else(|| panic!("no series bottleneck/{metric}"));
    let v: Vec<f64> = out.series.time.iter().zip(&col.values).filter(|(t, v)| **t >= from && **t < to && v.is_finite()).map(|(_, v)| *v).collect();
    assert!(!v.is_empty());
    v.iter().sum::<f64>() / v.len() as f64
}

fn cubic(n: u32, rtt: &str, ecn: &str) -> Flow {
    Flow::new("cubic").rtt(rtt).ecn(ecn).count(n)
}

/// Largest value a series took.
fn max_of(out: &RunOutput, metric: &str) -> f64 {
    out.series.get("bottleneck", metric).unwrap().values.iter().cloned().filter(|v| v.is_finite()).fold(f64::MIN, f64::max)
}

/// Within `frac` of `target`.
fn near(x: f64, target: f64, frac: f64) -> bool {
    (x - target).abs() <= frac * target
}

#[test]
fn single_cubic_flow_settles_at_the_15ms_target() {
    let out = Dumbbell::new("50Mbit", "pie").duration("60s").flow(cubic(1, "20ms", "off")).run_output();
    let s = &out.summary;
    // Queue delay: mean per-packet sojourn over the second half, from the series and from
    // the summary (whole run), and PIE's own estimate (xstat).
    let qdelay = mean_between(&out, "qdelay", 30.0, 60.0);
    let estimate = mean_between(&out, "pie_qdelay", 30.0, 60.0);
    let sojourn = s.bottleneck.sojourn_ms.mean.unwrap();
    assert!(near(qdelay, 15.0, 0.3), "second-half mean queue delay {qdelay} ms");
    assert!(near(sojourn, 15.0, 0.3), "mean sojourn {sojourn} ms");
    assert!(near(estimate, 15.0, 0.3), "PIE's delay estimate {estimate} ms");
    assert!(s.bottleneck.utilization >= 0.9, "utilisation {}", s.bottleneck.utilization);
    // Control by early drops, not by the 1000-packet tail (which would mean >200 ms of queue).
    assert!(s.bottleneck.drops > 0);
    assert_eq!(s.bottleneck.ce_marks, 0);
    assert!(s.bottleneck.sojourn_ms.p99.unwrap() < 60.0);
}

#[test]
fn ecn_flow_is_marked_instead_of_dropped_while_p_is_small() {
    let out = Dumbbell::new("50Mbit", "pie ecn").duration("60s").flow(cubic(1, "20ms", "rfc3168")).run_output();
    let s = &out.summary;
    let pmax = max_of(&out, "prob");
    assert!(pmax <= 0.1, "a single flow keeps p below the 10 % ECN limit (max {pmax})");
    assert!(s.bottleneck.ce_marks > 0);
    assert_eq!(s.bottleneck.drops, 0, "every early signal is a mark");
    let qdelay = mean_between(&out, "qdelay", 30.0, 60.0);
    assert!(near(qdelay, 15.0, 0.3), "second-half mean queue delay {qdelay} ms");
    assert!(s.bottleneck.utilization >= 0.9);
    // The same ECN-capable flow through PIE without `ecn` is dropped, never marked.
    let out = Dumbbell::new("50Mbit", "pie noecn").duration("60s").flow(cubic(1, "20ms", "rfc3168")).run_output();
    assert!(out.summary.bottleneck.drops > 0);
    assert_eq!(out.summary.bottleneck.ce_marks, 0);
}

#[test]
fn ecn_flows_are_dropped_once_p_exceeds_10_percent() {
    // 20 flows on 10 Mbit/s x 20 ms (a BDP of 17 packets) need p well above 10 %.
    let out = Dumbbell::new("10Mbit", "pie ecn").duration("20s").flow(cubic(20, "20ms", "rfc3168")).run_output();
    let s = &out.summary;
    let p = mean_between(&out, "prob", 10.0, 20.0);
    assert!(p > 0.1, "mean p {p}");
    assert!(s.bottleneck.drops > 10 * s.bottleneck.ce_marks, "drops {} marks {}", s.bottleneck.drops, s.bottleneck.ce_marks);
    let qdelay = mean_between(&out, "qdelay", 10.0, 20.0);
    assert!(near(qdelay, 15.0, 0.3), "second-half mean queue delay {qdelay} ms");
}

#[test]
fn departure_rate_estimator_measures_the_link_rate_and_holds_the_target() {
    let out = Dumbbell::new("50Mbit", "pie dq_rate_estimator").duration("30s").flow(cubic(1, "20ms", "off")).run_output();
    let s = &out.summary;
    // avg_dq_rate in bytes/s: the 50 Mbit/s link drains 6.25 MB/s while backlogged.
    let rate = mean_between(&out, "avg_dq_rate", 15.0, 30.0);
    assert!(near(rate, 6.25e6, 0.03), "avg_dq_rate {rate} B/s");
    let qdelay = mean_between(&out, "qdelay", 15.0, 30.0);
    assert!(near(qdelay, 15.0, 0.3), "second-half mean queue delay {qdelay} ms");
    assert!(s.bottleneck.utilization >= 0.9);
}

#[test]
fn load_transient_study_variants_run() {
    // Järvinen & Kojo's PIE settings on their 2 Mbit/s bottleneck with a 100-packet buffer.
    for q in [
        "pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 10 tupdate 30ms",
        "pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 5 tupdate 30ms",
        "pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 10 tupdate 60ms",
    ] {
        let out = Dumbbell::new("2Mbit", q).duration("30s").flow(Flow::new("reno").rtt("162ms").count(2)).run_output();
        let s = &out.summary;
        assert!(s.bottleneck.drops > 0, "{q}");
        assert!(s.bottleneck.utilization > 0.7, "{q}: utilisation {}", s.bottleneck.utilization);
        // Far below the 600 ms a full 100-packet buffer holds at 2 Mbit/s.
        let mean = s.bottleneck.sojourn_ms.mean.unwrap();
        assert!(mean < 60.0, "{q}: mean sojourn {mean} ms");
        assert!(out.series.get("bottleneck", "avg_dq_rate").is_some());
    }
}

/// On the `ns2-2013` profile (the 2013 ns-2 PIE, docs/algorithms/pie.md) the study's default
/// PIE never completes a departure-rate measurement at 2 Mbit/s: a 10-packet cycle lasts
/// longer than tUpdate 30 ms and every update without an estimate restarts it. So there is
/// never an estimate, p stays 0 and only the buffer limits the queue. PIEthresh (5 packets)
/// measures, raises p and keeps the queue well below that.
#[test]
fn ns2_2013_default_pie_is_a_fifo_at_2_mbit_and_pie_thresh_is_not() {
    let run = |q: &str| {
        Dumbbell::new("2Mbit", q).stack("ns2-2013").duration("20s").flow(Flow::new("reno").rtt("162ms").count(2)).run_output()
    };
    let fifo = run("pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 10 tupdate 30ms");
    assert_eq!(max_of(&fifo, "prob"), 0.0);
    assert_eq!(max_of(&fifo, "avg_dq_rate"), 0.0);
    assert!(fifo.summary.bottleneck.drops > 0, "tail drops only");
    let thresh = run("pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 5 tupdate 30ms");
    assert!(max_of(&thresh, "prob") > 0.0);
    assert!(max_of(&thresh, "avg_dq_rate") > 0.0);
    let (f, t) = (fifo.summary.bottleneck.sojourn_ms.mean.unwrap(), thresh.summary.bottleneck.sojourn_ms.mean.unwrap());
    eprintln!("ns2-2013 2 Mbit/s, 2 reno: mean sojourn default PIE {f:.0} ms, PIEthresh {t:.0} ms");
    assert!(t < 0.5 * f, "PIEthresh {t} ms vs default {f} ms");
}
