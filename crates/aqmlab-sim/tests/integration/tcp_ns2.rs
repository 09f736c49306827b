//! The `ns2-2013` profile end to end: ns-2.35 Sack1 senders and DelAck sinks over the
//! Järvinen & Kojo path (2 Mbit/s, 100-packet buffer, 162 ms base RTT).

use aqmlab_sim::run_toml;

fn jk(stack: &str, flows: u32, qdisc: &str) -> String {
    format!(
        r#"
stack = "{stack}"
duration = "30s"
seed = 3
[bottleneck]
rate = "2Mbit"
qdisc = "{qdisc}"
[[transients]]
name = "g1"
flows = {flows}
total = 360000
cc = "reno"
rtt = "162ms"
start = "0s"
initial_cwnd = 3
initial_rto = "3s"
mss = 1000
"#
    )
}

#[test]
fn ns2_profile_smoke() {
    for q in [4, 9, 19, 39, 99] {
        let out = run_toml(&jk("ns2-2013", 1, &format!("pfifo limit {q}")), None, &[]).unwrap();
        let s = serde_json::to_string(&out.summary.transients).unwrap();
        eprintln!("q={q}: {s}");
    }
}
