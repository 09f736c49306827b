//! System tests of SCReAM (`[[media]] kind = "scream"`): alone through DualPI2 in L4S mode,
//! against Prague flows joining one by one, and alone through a tail-drop FIFO where only its
//! delay signal limits it.

use crate::common::{Dumbbell, Flow, Media};
use aqmlab_sim::RunOutput;

/// Mean of a series over [from, to) seconds (NaN samples skipped).
fn mean(out: &RunOutput, entity: &str, metric: &str, from: f64, to: f64) -> f64 {
    let col = out.series.get(entity, metric).expect("series");
    let v: Vec<f64> = out.series.time.iter().zip(&col.values).filter(|(t, x)| **t >= from && **t < to && x.is_finite()).map(|(_, x)| *x).collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn video_l4s() -> Media {
    Media::new("scream").name("video").rtt("25ms").ecn("ect1").max_bitrate("200Mbit")
}

#[test]
fn scream_alone_through_dualpi2_uses_55_to_95_percent_of_the_link() {
    let sc = Dumbbell::new("100Mbit", "dualpi2").duration("30s").media(video_l4s());
    let out = sc.run_output();
    let m = &out.summary.media[0];
    let rate = mean(&out, "video", "bitrate", 10.0, 30.0);
    let target = mean(&out, "video", "target_bitrate", 10.0, 30.0);
    println!("bitrate {rate:.1} Mbit/s, target {target:.1}, {m:?}");
    assert!((55.0..=95.0).contains(&rate), "RTP bitrate {rate} Mbit/s on a 100 Mbit/s link");
    assert!((rate / target - 1.0).abs() < 0.15, "the encoder follows the target: {rate} vs {target}");
    // L4S: CE marks drive it, the L queue stays shallow, nothing is lost.
    assert!(m.ce_marked > 100 && m.losses == 0 && m.rtp_queue_discards == 0, "{m:?}");
    let l = out.summary.bottleneck.queues.iter().find(|q| q.name == "L").expect("L queue");
    assert!(l.sojourn_ms.p99.unwrap() < 3.0, "L-queue p99 {:?}", l.sojourn_ms);
    // Deterministic.
    let again = sc.run_output();
    assert_eq!(format!("{:?}", again.summary.media), format!("{:?}", out.summary.media));
}

#[test]
fn scream_keeps_a_share_as_prague_flows_join_and_the_l_queue_stays_short() {
    if !aqmlab_sim::cc::REGISTRY.iter().any(|(n, _)| *n == "prague") {
        eprintln!("SKIPPED: cc \"prague\" is not registered on this branch yet");
        return;
    }
    let prague = |k: u32| Flow::new("prague").name(format!("prague{k}")).ecn("l4s").rtt("25ms").start(format!("{}s", 20 * k))
        // gso = false: Prague's GSO pairs lower SCReAM's share further (issue 11).
        .gso(false);
    let out = Dumbbell::new("100Mbit", "dualpi2").duration("100s").media(video_l4s()).flows((1..=4).map(prague)).run_output();
    for k in 0..5 {
        let (from, to) = (20.0 * k as f64 + 5.0, 20.0 * (k + 1) as f64);
        let rate = mean(&out, "video", "bitrate", from, to);
        println!("{} Prague flows: SCReAM {rate:.1} Mbit/s", k);
        // The 2024 controller (76a298a) keeps more than 45 % of an equal share (the 2026 one
        // read before kept 20-30 %; the test record reports more than an equal share).
        assert!(rate > 0.45 * 100.0 / (k + 1) as f64, "{k} Prague flows: SCReAM at {rate} Mbit/s");
    }
    let l = out.summary.bottleneck.queues.iter().find(|q| q.name == "L").expect("L queue");
    assert!(l.sojourn_ms.p99.unwrap() < 5.0, "L-queue p99 {:?}", l.sojourn_ms);
}

#[test]
fn scream_through_pfifo_settles_with_the_queue_delay_below_its_target() {
    let out = Dumbbell::new("100Mbit", "pfifo limit 1000")
        .duration("30s")
        .media(Media::new("scream").name("video").rtt("25ms").max_bitrate("200Mbit"))
        .run_output();
    let m = &out.summary.media[0];
    let rate = mean(&out, "video", "bitrate", 10.0, 30.0);
    let qd = mean(&out, "video", "qdelay_estimate", 10.0, 30.0);
    println!("bitrate {rate:.1} Mbit/s, queue delay estimate {qd:.1} ms, {m:?}");
    assert!(rate > 75.0 && rate < 100.0, "{rate}");
    // The delay signal (virtual CE from target/2 = 30 ms on) holds the queue: its estimate
    // stays below the 60 ms target on average and the FIFO (121 ms deep) never overflows.
    assert!(qd > 1.0 && qd < 60.0, "queue delay estimate {qd} ms");
    assert_eq!((out.summary.bottleneck.drops, m.losses, m.rtp_queue_discards), (0, 0, 0));
    // Settled: 5-s means of the bitrate within ±15 % of the 20-s mean.
    for k in 0..4 {
        let r = mean(&out, "video", "bitrate", 10.0 + 5.0 * k as f64, 15.0 + 5.0 * k as f64);
        assert!((r / rate - 1.0).abs() < 0.15, "window {k}: {r} vs {rate}");
    }
}

#[test]
fn classic_ecn_scream_runs_in_the_c_queue() {
    // ECT(0) through DualPI2 goes to the C queue (classic marking at the PI2 probability):
    // the CE response is the fixed β and the flow still uses the link.
    let out = Dumbbell::new("50Mbit", "dualpi2")
        .duration("30s")
        .media(Media::new("scream").name("video").rtt("25ms").ecn("ect0").max_bitrate("100Mbit"))
        .run_output();
    let m = &out.summary.media[0];
    let rate = mean(&out, "video", "bitrate", 10.0, 30.0);
    println!("bitrate {rate:.1} Mbit/s {m:?}");
    let c = out.summary.bottleneck.queues.iter().find(|q| q.name == "C").expect("C queue");
    assert!(c.packets > 0 && m.losses == 0, "{m:?}");
    assert!(rate > 25.0 && rate < 50.0, "{rate}");
}

#[test]
fn cc_scream_in_flows_runs_the_media_application() {
    let text = "duration = \"10s\"\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"dualpi2\"\n\
                [[flows]]\ncc = \"scream\"\nrtt = \"25ms\"\necn = \"l4s\"\nname = \"video\"\n\
                [[flows]]\ncc = \"cubic\"\nrtt = \"25ms\"\n";
    let sc = aqmlab_sim::Scenario::from_toml(text, &[]).unwrap();
    assert_eq!(sc.flows.len(), 1);
    assert_eq!(sc.media.len(), 1);
    assert_eq!(sc.media[0].ecn.ecn(), aqmlab_sim::packet::Ecn::Ect1);
    let out = aqmlab_sim::Simulation::new(&sc).run();
    assert_eq!(out.summary.media[0].name, "video");
    assert!(out.series.get("video", "bitrate").is_some());
}
