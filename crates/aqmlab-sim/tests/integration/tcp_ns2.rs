//! The `ns2-2013` profile's TCP against ns-2.35 itself: one flow of 360 packets, or four of
//! 90 packets starting 100 ms apart, of `Agent/TCP/Sack1` into `Agent/TCPSink/Sack1/DelAck`
//! over the Järvinen & Kojo path (2 Mbit/s, 2 x 81 ms), with DropTail buffers that never
//! overflow and buffers that overflow in slow start (1-40 retransmissions per flow: SACK
//! fast recovery with `pipe_`, limited transmit, timeouts).
//!
//! Reference values: Debian's ns2 2.35+dfsg-5, `ns tools/ns2/tcp_flows.tcl <k> <packets>
//! <qlim>` (per flow the time of its last ACK and its retransmitted packets). The scenario
//! rebuilds the script's path: the 1 Gbit/s, 11 ms sender link as an upstream link, the
//! 2 Mbit/s bottleneck, ACKs serialised on a 2 Mbit/s return link; ns-2's `queue-limit` q
//! holds at most q - 1 waiting packets (`DropTail::enque` drops when `length() + 1 >= qlim_`),
//! so the model's pfifo gets q - 1. The model ends each flow within microseconds of ns-2
//! (ns-2 computes in double seconds): the test allows 0.1 ms and wants the retransmissions
//! exactly.

use aqmlab_sim::run_toml;

/// (flows, packets per flow, ns-2 queue-limit, per flow: (time of the last ACK in s,
/// retransmitted packets)).
type Case = (u32, u32, u32, &'static [(f64, u64)]);
const NS2: [Case; 7] = [
    (1, 360, 5, &[(4.516_344_896, 4)]),
    (1, 360, 20, &[(2.957_504_256, 30)]),
    (1, 360, 40, &[(2.882_599_424, 40)]),
    (1, 360, 100, &[(2.720_309_760, 0)]),
    (4, 90, 5, &[(2.682_601_920, 5), (2.133_799_104, 1), (3.161_083_328, 3), (3.464_620_608, 4)]),
    (4, 90, 40, &[(1.984_203_840, 4), (2.308_733_504, 13), (2.084_036_608, 2), (2.587_542_144, 1)]),
    (4, 90, 100, &[(1.817_803_840, 0), (2.046_603_840, 0), (2.171_403_840, 0), (2.225_412_480, 0)]),
];

fn ns2_path(flows: u32, packets: u32, qlim: u32) -> String {
    let mut s = format!(
        r#"
stack = "ns2-2013"
duration = "20s"
[host]
jitter = "0s"
start_spread = "0s"
[bottleneck]
rate = "2Mbit"
qdisc = "pfifo limit {}"
[[bottleneck.upstream]]
rate = "1000Mbit"
qdisc = "pfifo limit 1000"
[return]
rate = "2Mbit"
"#,
        qlim - 1
    );
    for i in 0..flows {
        s += &format!(
            "[[flows]]\ncc = \"reno\"\nrtt = \"162ms\"\nsize = {}\ninitial_cwnd = 3\ninitial_rto = \"3s\"\nmss = 1000\nstart = \"{}ms\"\n",
            packets * 1000,
            i * 100
        );
    }
    s
}

#[test]
fn sack1_flows_finish_when_ns2s_do() {
    for (k, packets, qlim, expected) in NS2 {
        let out = run_toml(&ns2_path(k, packets, qlim), None, &[]).unwrap();
        for (i, (f, &(done, rexmit))) in out.summary.flows.iter().zip(expected).enumerate() {
            let end = f.start_s + f.fct_s.expect("the transfer completes");
            assert!((end - done).abs() < 1e-4, "{k} flows, queue-limit {qlim}, flow {i}: model {end:.6} s, ns-2 {done:.6} s");
            assert_eq!(f.retransmits, rexmit, "{k} flows, queue-limit {qlim}, flow {i}");
            assert_eq!(f.bytes_delivered, packets as u64 * 1000);
        }
    }
}

#[test]
fn the_ns2_profile_takes_only_reno_without_ecn() {
    let text = ns2_path(1, 10, 100).replace("cc = \"reno\"", "cc = \"cubic\"");
    let e = run_toml(&text, None, &[]).err().expect("cubic is refused on ns2-2013").to_string();
    assert!(e.contains("flows[0].cc") && e.contains("Sack1"), "{e}");
    let text = ns2_path(1, 10, 100).replace("mss = 1000", "mss = 1000\necn = \"rfc3168\"");
    let e = run_toml(&text, None, &[]).err().expect("ECN is refused on ns2-2013").to_string();
    assert!(e.contains("flows[0].ecn") && e.contains("without ECN"), "{e}");
}

/// Every kind of TCP connection runs ns-2's agents on the profile: the study's 6+6 groups
/// through CoDel all finish, and a short-flow workload completes its transfers.
#[test]
fn transients_and_workloads_run_on_ns2_agents() {
    let text = r#"
stack = "ns2-2013"
duration = "30s"
seed = 7
[host]
jitter = "0s"
start_spread = "0s"
[bottleneck]
rate = "2Mbit"
qdisc = "codel limit 100 target 5ms interval 100ms"
[[transients]]
name = "g1"
flows = 6
total = 360000
cc = "reno"
rtt = "162ms"
initial_cwnd = 3
initial_rto = "3s"
mss = 1000
[[transients]]
name = "g2"
flows = 6
total = 360000
cc = "reno"
rtt = "162ms"
start_jitter = "650ms"
initial_cwnd = 3
initial_rto = "3s"
mss = 1000
[[workloads]]
cc = "reno"
rtt = "162ms"
mean_interarrival = "2s"
size_p5 = "2KB"
size_p95 = "20KB"
start = "10s"
"#;
    let out = run_toml(text, None, &[]).unwrap();
    for g in &out.summary.transients {
        let r = g.response_s.expect("every flow of the group finishes");
        // 360 kB at 2 Mbit/s take 1.44 s of link time; two groups share the link.
        assert!(r > 1.44 && r < 15.0, "{}: {r}", g.name);
    }
    let w = &out.summary.workloads[0];
    assert!(w.completed >= 3 && w.completed + w.incomplete == w.started, "{} of {}", w.completed, w.started);
}
