//! Dumbbell topology: flows in both directions over asymmetric links.
mod common;
use common::{run, scenario};

/// A download's data crosses the return link and its ACKs the bottleneck: with 1 Mbit/s up
/// and 10 Mbit/s down, the download gets nearly 10 Mbit/s while its ACKs share the uplink with
/// the upload's data, which leaves the upload well short of 1 Mbit/s (its own ACKs also
/// wait behind the download's data in the downlink FIFO) (l4s-tests S4's situation).
#[test]
fn downloads_use_the_return_link_and_their_acks_queue_at_the_bottleneck() {
    let sc = scenario(
        r#"duration = "30s"
[bottleneck]
rate = "1Mbit"
qdisc = "pfifo limit 20"
[return]
rate = "10Mbit"
qdisc = "pfifo limit 200"
[[flows]]
cc = "cubic"
rtt = "20ms"
name = "up"
[[flows]]
cc = "cubic"
rtt = "20ms"
name = "down"
direction = "down"
"#,
    );
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
