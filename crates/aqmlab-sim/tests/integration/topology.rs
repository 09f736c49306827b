//! Dumbbell topology: flows in both directions over asymmetric links.
use crate::common;
use common::{run, Dumbbell, Flow, Probe, Return};

/// A download's data crosses the return link and its ACKs the bottleneck: with 1 Mbit/s up
/// and 10 Mbit/s down, the download gets nearly 10 Mbit/s while its ACKs share the uplink with
/// the upload's data, which leaves the upload well short of 1 Mbit/s (its own ACKs also
/// wait behind the download's data in the downlink FIFO) (l4s-tests S4's situation).
#[test]
fn downloads_use_the_return_link_and_their_acks_queue_at_the_bottleneck() {
    let sc = Dumbbell::new("1Mbit", "pfifo limit 20")
        .duration("30s")
        .return_path(Return::new().rate("10Mbit").qdisc("pfifo limit 200"))
        .flow(Flow::new("cubic").rtt("20ms").name("up"))
        .flow(Flow::new("cubic").rtt("20ms").name("down").direction("down"))
        .build();
    let s = run(&sc);
    let (up, down) = (&s.flows[0], &s.flows[1]);
    println!("up {:.3} Mbit/s, down {:.3} Mbit/s, bottleneck packets {}", up.goodput_mbps, down.goodput_mbps, s.bottleneck.packets);
    assert!((0.3..0.9).contains(&up.goodput_mbps), "up {}", up.goodput_mbps);
    assert!((8.0..9.6).contains(&down.goodput_mbps), "down {}", down.goodput_mbps);
    // Delayed ACKs: about one ACK per two data segments of the download crossed the uplink.
    let down_segments = down.bytes_delivered / 1448;
    let up_segments = up.bytes_delivered / 1448;
    let acks = s.bottleneck.packets - up_segments;
    assert!(acks as f64 > 0.35 * down_segments as f64, "acks {acks} for {down_segments} segments");
}

fn rrul_be(up_qdisc: &str, down_qdisc: &str) -> aqmlab_sim::sim::Summary {
    Dumbbell::new("1Mbit", up_qdisc)
        .duration("30s")
        .return_path(Return::new().rate("10Mbit").qdisc(down_qdisc))
        .flow(Flow::new("cubic").rtt("20ms").name("up").count(4))
        .flow(Flow::new("cubic").rtt("20ms").name("down").count(4).direction("down"))
        .probe(Probe::new().kind("ping").rtt("20ms"))
        .run()
}

/// l4s-tests S4: rrul_be (4 uploads, 4 downloads, flent's ping) over 1/10 Mbit/s.
///
/// With fq_codel on both links both stay busy and the sparse ping sees little queue.
/// With pfifo (limits 20 up / 200 down) the downloads' ACKs share the uplink FIFO with the
/// uploads' data: they are most of its packets, and the ping's round trip is the two FIFOs'
/// queues. The uploads, whose data is dropped from a FIFO full of ACKs, back off into
/// retransmission timeouts, and the uplink idles part of the time.
#[test]
fn rrul_be_keeps_both_links_busy_and_download_acks_share_the_uplink() {
    for (up_q, down_q) in [("fq_codel", "fq_codel"), ("pfifo limit 20", "pfifo limit 200")] {
        let s = rrul_be(up_q, down_q);
        let (bn, ret, ping) = (&s.bottleneck, &s.return_link, &s.probes[0]);
        let up: u64 = s.flows[..4].iter().map(|f| f.bytes_delivered / 1448).sum();
        let down: u64 = s.flows[4..].iter().map(|f| f.bytes_delivered / 1448).sum();
        let upload_rtos: u64 = s.flows[..4].iter().map(|f| f.rto_events).sum();
        // What else crossed the uplink: the downloads' ACKs and the uploads' retransmissions.
        let acks = bn.packets - up - ping.sent;
        println!(
            "{up_q} / {down_q}: uplink util {:.3} ({} packets: {up} upload segments, {acks} others, {upload_rtos} upload RTOs), \
             downlink util {:.3} ({down} download segments); sojourn p50 up {:?} down {:?} ms; ping induced p50 {:?} ms",
            bn.utilization, bn.packets, ret.utilization, bn.sojourn_ms.p50, ret.sojourn_ms.p50, ping.induced_ms.p50
        );
        assert_eq!(ret.qdisc, down_q);
        assert!(acks as f64 > 0.3 * down as f64 && acks > 2 * up, "{acks} ACKs for {down} download segments");
        let induced = ping.induced_ms.p50.unwrap();
        if up_q == "fq_codel" {
            assert!(bn.utilization > 0.95 && ret.utilization > 0.9, "{} {}", bn.utilization, ret.utilization);
            assert!(induced < 30.0, "{induced}");
        } else {
            assert!(bn.utilization > 0.75 && ret.utilization > 0.9, "{} {}", bn.utilization, ret.utilization);
            let queues = bn.sojourn_ms.p50.unwrap() + ret.sojourn_ms.p50.unwrap();
            assert!(queues > 100.0 && (induced - queues).abs() < 0.3 * queues, "{induced} vs {queues}");
            assert!(upload_rtos > 10);
        }
    }
}
