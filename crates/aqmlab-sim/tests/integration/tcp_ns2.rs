//! The `ns2-2013` profile's TCP against ns-2.35 itself: one `Agent/TCP/Sack1` flow of 360
//! packets into a `Agent/TCPSink/Sack1/DelAck` sink over the Järvinen & Kojo path
//! (2 Mbit/s, 2 x 81 ms), with a DropTail buffer that never overflows and two that overflow
//! in slow start (30 and 40 retransmissions: SACK fast recovery, `pipe_`, limited transmit).
//!
//! Reference values: Debian's ns2 2.35+dfsg-5, `ns tools/ns2/tcp_one_flow.tcl 360 <qlim>`
//! (prints the time of the last ACK and the retransmitted packets). ns-2's `queue-limit`
//! q holds at most q - 1 waiting packets (`DropTail::enque` drops when `length() + 1 >=
//! qlim_`), so the model's pfifo gets q - 1. The model's path has no serialisation on the
//! 1 Gbit/s access link nor for the ACKs on the 2 Mbit/s return (ns-2: 0.16 ms per ACK),
//! hence the tolerance of 2 ms on a transfer of about 3 s.

use aqmlab_sim::run_toml;

/// (ns-2 queue-limit, ns-2's time of the last ACK in s, ns-2's retransmitted packets).
const NS2: [(u32, f64, u64); 3] = [(20, 2.957_504_256, 30), (40, 2.882_599_424, 40), (100, 2.720_309_760, 0)];

fn one_flow(qlim: u32) -> String {
    format!(
        r#"
stack = "ns2-2013"
duration = "10s"
[host]
jitter = "0s"
start_spread = "0s"
[bottleneck]
rate = "2Mbit"
qdisc = "pfifo limit {}"
[[flows]]
cc = "reno"
rtt = "162ms"
size = 360000
initial_cwnd = 3
initial_rto = "3s"
mss = 1000
"#,
        qlim - 1
    )
}

#[test]
fn one_sack1_flow_finishes_when_ns2s_does() {
    for (qlim, done, rexmit) in NS2 {
        let out = run_toml(&one_flow(qlim), None, &[]).unwrap();
        let f = &out.summary.flows[0];
        let fct = f.fct_s.expect("the transfer completes");
        assert!((fct - done).abs() < 0.002, "queue-limit {qlim}: model {fct:.6} s, ns-2 {done:.6} s");
        assert_eq!(f.retransmits, rexmit, "queue-limit {qlim}");
        assert_eq!(f.bytes_delivered, 360_000);
    }
}

#[test]
fn the_ns2_profile_takes_only_reno() {
    let text = one_flow(100).replace("cc = \"reno\"", "cc = \"cubic\"");
    let e = run_toml(&text, None, &[]).err().expect("cubic is refused on ns2-2013").to_string();
    assert!(e.contains("flows[0].cc") && e.contains("Sack1"), "{e}");
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
