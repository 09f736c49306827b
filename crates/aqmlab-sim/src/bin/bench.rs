//! `make bench`: throughput of the engine on two reference scenarios (issue #2):
//! (a) 50 Mbit/s, 20 ms, 2 CUBIC flows, pfifo 1000p, 60 s;
//! (b) 1 Gbit/s, 10 ms, 10 CUBIC flows, pfifo 1000p, 10 s.
//! Prints bottleneck packets per wall-clock second, events per second and peak RSS.
//! Each scenario runs 3 times; the median wall time is reported.

use aqmlab_sim::{Scenario, Simulation};
use std::time::Instant;

const CASES: [(&str, &str); 2] = [
    (
        "a: 50Mbit 20ms 2xCUBIC pfifo1000 60s",
        "duration = \"60s\"\n[bottleneck]\nrate = \"50Mbit\"\nqdisc = \"pfifo limit 1000\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ncount = 2\n",
    ),
    (
        "b: 1Gbit 10ms 10xCUBIC pfifo1000 10s",
        "duration = \"10s\"\n[bottleneck]\nrate = \"1Gbit\"\nqdisc = \"pfifo limit 1000\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"10ms\"\ncount = 10\n",
    ),
];

/// Peak resident set size of this process in KiB (Linux `VmHWM`).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    println!("{:<40} {:>14} {:>14} {:>10} {:>9}", "scenario", "bneck pkt/s", "events/s", "wall s", "sim s");
    for (label, text) in CASES {
        let sc = Scenario::from_toml(text, &[]).expect("bench scenario is valid");
        let mut runs: Vec<(f64, u64, u64)> = (0..3)
            .map(|_| {
                let t0 = Instant::now();
                let out = Simulation::new(&sc).run();
                (t0.elapsed().as_secs_f64(), out.summary.bottleneck.packets, out.summary.events)
            })
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (wall, pkts, events) = runs[1];
        println!(
            "{:<40} {:>14.0} {:>14.0} {:>10.3} {:>9.0}",
            label,
            pkts as f64 / wall,
            events as f64 / wall,
            wall,
            sc.duration.as_secs_f64()
        );
    }
    match peak_rss_kib() {
        Some(k) => println!("peak RSS: {:.1} MiB", k as f64 / 1024.0),
        None => println!("peak RSS: unavailable"),
    }
}
