//! Unresponsive UDP traffic (video frame bursts, CBR) and the queue metrics it exercises:
//! the sojourn CDF and the delay-spike durations.

use crate::common;

use aqmlab_sim::Scenario;
use common::{Dumbbell, Flow, Metrics, Udp};

/// Wire bytes of a UDP packet with `payload` bytes: UDP 8 + IPv4 20 + Ethernet 14.
fn wire(payload: f64) -> f64 {
    payload + 42.0
}

/// A `rate` bottleneck with `qdisc` for `duration` and one UDP source with a 20 ms RTT, on
/// quiet hosts (the expectations are exact times of an ideal path).
fn udp_link(rate: &str, qdisc: &str, duration: &str, udp: Udp) -> Dumbbell {
    Dumbbell::new(rate, qdisc).duration(duration).udp(udp.rtt("20ms")).quiet_host()
}

#[test]
fn cbr_through_an_idle_link_arrives_whole_at_its_rate_after_base_delay_and_serialisation() {
    let out = Dumbbell::link("50Mbit").duration("4s").udp(Udp::new().name("cbr").kind("cbr").rate("10Mbit").rtt("20ms")).quiet_host().run_output();
    let u = &out.summary.udp[0];
    // One 1200-byte packet every 960 us; those sent in the last 10 ms are still travelling.
    let owd = 10.0 + wire(1200.0) * 8.0 / 50e6 * 1e3;
    println!("cbr: sent {} received {} lost {} mean {:.4} Mbit/s owd {:?} (want {owd} ms)", u.sent, u.received, u.lost, u.mean_mbps, u.owd_ms.max);
    assert_eq!(u.sent, 4167);
    let in_flight = (0..u.sent).filter(|&k| k as f64 * 0.96 + owd > 4000.0).count() as u64;
    assert_eq!((u.lost, u.sent - u.received), (0, in_flight));
    assert!((u.mean_mbps / 10.0 - 1.0).abs() < 0.005, "{}", u.mean_mbps);
    // No queue: every packet takes exactly half the RTT plus 198.72 us on the wire.
    for v in [u.owd_ms.max, u.owd_ms.mean, u.owd_ms.p50, u.owd_ms.p99] {
        assert!((v.unwrap() - owd).abs() < 1e-9, "{v:?} vs {owd}");
    }
    assert_eq!(out.summary.bottleneck.sojourn_ms.max, Some(0.0));
    // The per-tick received rate over the middle of the run.
    let rate = out.series.get("cbr", "rate").unwrap();
    let mid: Vec<f64> = rate.values[20..60].to_vec();
    let mean = mid.iter().sum::<f64>() / mid.len() as f64;
    assert!((mean / 10.0 - 1.0).abs() < 0.005 && mid.iter().all(|v| (v / 10.0 - 1.0).abs() < 0.02), "{mid:?}");
    assert!((out.series.get("cbr", "owd").unwrap().values[30] - owd).abs() < 1e-9);
}

#[test]
fn video_frames_queue_as_one_burst_unless_paced() {
    // 2.5 Mbit/s at 30 fps: 9 packets a frame (8 x 1200 B + 816/817 B) through 10 Mbit/s.
    let tx = |payload: f64| wire(payload) * 8.0 / 10e6 * 1e3;
    let bursty = udp_link("10Mbit", "pfifo", "2s", Udp::new().kind("video")).run();
    let paced = udp_link("10Mbit", "pfifo", "2s", Udp::new().kind("video").paced(true)).run();
    let u = &bursty.udp[0];
    assert_eq!((u.sent, u.received, u.lost), (60 * 9, 60 * 9, 0));
    assert!((u.mean_mbps - 2.5).abs() < 1e-9, "{}", u.mean_mbps);
    // Paced, the last frame's packets 7 and 8 leave 22.2 and 25.9 ms after its start at
    // 1966.7 ms and are still on their way at 2 s.
    let u = &paced.udp[0];
    assert_eq!((u.sent, u.received, u.lost), (60 * 9, 60 * 9 - 2, 0));
    // Bursty: the frame's last packet waits for the 8 full ones ahead of it.
    let b = &bursty.bottleneck.sojourn_ms;
    let burst = 8.0 * tx(1200.0);
    println!("bursty: max sojourn {:?} ms (want {burst}), p50 {:?}; owd max {:?}", b.max, b.p50, bursty.udp[0].owd_ms.max);
    assert!((b.max.unwrap() - burst).abs() < 1e-6);
    assert!((b.p50.unwrap() - 4.0 * tx(1200.0)).abs() < 0.005 * b.p50.unwrap(), "median: the 5th of 9");
    assert!((bursty.udp[0].owd_ms.max.unwrap() - (10.0 + burst + tx(817.0))).abs() < 1e-6);
    // Paced: 3.7 ms between packets, each sent in under 1 ms, so no packet ever waits and
    // the one-way delay is the base delay plus one packet's serialisation.
    let p = &paced.bottleneck.sojourn_ms;
    println!("paced: max sojourn {:?} ms; owd max {:?}", p.max, paced.udp[0].owd_ms.max);
    assert_eq!(p.max, Some(0.0));
    assert!((paced.udp[0].owd_ms.max.unwrap() - (10.0 + tx(1200.0))).abs() < 1e-6);
}

#[test]
fn cbr_overload_loses_the_excess_over_the_link_rate() {
    // 60 Mbit/s of payload is 62.1 Mbit/s on the wire: a 50 Mbit/s link passes 50/62.1 of the
    // packets (the loss is 1/6 only if the headers are forgotten).
    let s = udp_link("50Mbit", "pfifo limit 20", "5s", Udp::new().kind("cbr").rate("60Mbit")).run();
    let u = &s.udp[0];
    let want = 1.0 - 50.0 / (60.0 * wire(1200.0) / 1200.0);
    let got = u.lost as f64 / (u.lost + u.received) as f64;
    println!("overload: sent {} received {} lost {} -> {got:.5} (want {want:.5}); qdisc drops {}", u.sent, u.received, u.lost, s.bottleneck.drops);
    assert!((got - want).abs() < 0.002, "{got} vs {want}");
    assert!((u.mean_mbps - 50.0 * 1200.0 / wire(1200.0)).abs() < 0.1, "{}", u.mean_mbps);
    // Every loss is a qdisc drop; the drops of the last few ms have no later arrival yet.
    assert!(s.bottleneck.drops >= u.lost && s.bottleneck.drops - u.lost < 25);
}

#[test]
fn the_sojourn_cdf_is_monotone_ends_at_one_and_matches_the_quantiles() {
    let s = Dumbbell::new("20Mbit", "dualpi2")
        .duration("6s")
        .flow(Flow::new("cubic").rtt("20ms"))
        .flow(Flow::new("prague").ecn("l4s").rtt("20ms"))
        .udp(Udp::new().rtt("20ms").ecn("ect1"))
        .run();
    let mut all = vec![&s.bottleneck.sojourn_ms];
    all.extend(s.bottleneck.queues.iter().map(|q| &q.sojourn_ms));
    assert_eq!(all.len(), 3, "overall, C and L");
    for q in all {
        let cdf = q.cdf.as_ref().unwrap();
        println!("{} points; p50 {:?} p99 {:?} p999 {:?} max {:?}", cdf.len(), q.p50, q.p99, q.p999, q.max);
        assert!(cdf.len() > 10 && cdf.len() <= 200);
        assert!(cdf.windows(2).all(|w| w[0][0] < w[1][0] && w[0][1] < w[1][1]), "monotone");
        assert_eq!(*cdf.last().unwrap(), [q.max.unwrap(), 1.0]);
        for (p, want) in [(0.5, q.p50), (0.99, q.p99), (0.999, q.p999)] {
            let at = cdf.iter().find(|pt| pt[1] >= p).unwrap()[0];
            let want = want.unwrap();
            // The CDF gives the top of the quantile's histogram bucket, the quantile its
            // middle: within one bucket (1/128 of the value) apart.
            assert!((at - want).abs() <= want / 128.0 + 1e-6, "p{p}: cdf {at} vs {want}");
        }
    }
    // Probes and UDP flows report p999 but no CDF.
    assert!(s.udp[0].owd_ms.p999.is_some() && s.udp[0].owd_ms.cdf.is_none());
}

#[test]
fn a_cbr_overload_burst_gives_the_spike_duration_computed_by_hand() {
    // CBR 60 Mbit/s (62.1 on the wire) for 2 s into a 50 Mbit/s FIFO that holds it all: the
    // backlog grows at 12.1 Mbit/s from the first arrival (10 ms) to the last (2.01 s), then
    // drains at 50 Mbit/s.
    let spikes = |after: &str| {
        udp_link("50Mbit", "pfifo limit 10000", "3s", Udp::new().kind("cbr").rate("60Mbit").stop("2s"))
            .metrics(Metrics::new().spike_thresholds(["60ms", "100ms"]).spike_after(after))
            .run()
            .bottleneck
            .spikes
    };
    let (c, arrival) = (50e6 / 8.0, 60e6 * wire(1200.0) / 1200.0 / 8.0);
    let (first, last) = (0.010, 0.010 + 2.0 - 1200.0 * 8.0 / 60e6);
    let peak = (arrival - c) * (last - first);
    let interval = |theta: f64| {
        let up = first + theta * c / (arrival - c);
        let down = last + (peak - theta * c) / c;
        (up, down)
    };
    let r = spikes("0s");
    println!("{r:?}");
    assert_eq!(r.len(), 2);
    for (s, theta) in r.iter().zip([0.060, 0.100]) {
        let (up, down) = interval(theta);
        println!("{} ms: above {up:.4}..{down:.4} s = {:.4} s, got {:.4} s; peak {:.2} ms, got {:.2}", s.threshold_ms, down - up, s.longest_s, peak / c * 1e3, s.peak_ms);
        assert!((s.longest_s - (down - up)).abs() < 0.002);
        // One spike, give or take the instants where arrivals and departures alternate
        // across the threshold as it is crossed.
        assert!(s.total_s >= s.longest_s && s.total_s - s.longest_s < 0.001);
        assert!((s.peak_ms - peak / c * 1e3).abs() < 1.0);
    }
    // Counting from 1 s: the part after it.
    let r = spikes("1s");
    let (_, down) = interval(0.060);
    assert!((r[0].longest_s - (down - 1.0)).abs() < 0.002, "{r:?}");
}

#[test]
fn udp_and_spike_options_are_checked() {
    let base = "duration = \"2s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[udp]]\nrtt = \"20ms\"\n";
    let err = |extra: &str| Scenario::from_toml(&format!("{base}{extra}"), &[]).unwrap_err().to_string();
    let e = err("packet_size = 1473\n");
    assert!(e.contains("udp[0].packet_size") && e.contains("1473"), "{e}");
    let e = err("kind = \"cbr\"\nframe_rate = 25.0\n");
    assert!(e.contains("udp[0].frame_rate") && e.contains("video"), "{e}");
    let e = err("kind = \"audio\"\n");
    assert!(e.contains("udp[0].kind"), "{e}");
    let e = err("frame_rate = 0.0\n");
    assert!(e.contains("udp[0].frame_rate"), "{e}");
    let e = err("rate = \"1Tbit\"\npacket_size = 10\n");
    assert!(e.contains("udp[0].rate"), "{e}");
    let e = err("[metrics]\nspike_thresholds = [\"60ms\", \"x\"]\n");
    assert!(e.contains("metrics.spike_thresholds[1]"), "{e}");
    let e = err("[metrics]\nspike_thresholds = [\"0ms\"]\n");
    assert!(e.contains("metrics.spike_thresholds[0]") && e.contains("greater than zero"), "{e}");
    let e = err("[metrics]\nspike_after = \"5s\"\n");
    assert!(e.contains("metrics.spike_after"), "{e}");
    assert_eq!(e.lines().count(), 1);
}
