//! The era-profile pathologies of issue 11 §3 that remained after the profiles landed: each
//! test reproduces one and asserts only what the era's source (or the testbed's
//! configuration) implies. Findings: docs/validation-notes.md.
use crate::common::*;
use aqmlab_sim::{Simulation, Time};

/// sce-l4s-ect1 S1's L4S row (`ect1.batch` [Batch::l4s-s1-oneflow]): Prague with
/// classic-ECN detection over a bare DualPI2 behind the rate.
fn sce_s1(stack: &str, rate: &str, rtt_ms: u64, secs: u64) -> String {
    format!(
        "stack = \"{stack}\"\nduration = \"{secs}s\"\n[bottleneck]\nrate = \"{rate}\"\nqdisc = \"dualpi2\"\n\
         [[flows]]\ncc = \"prague classic_ecn_detection 1\"\nrtt = \"{rtt_ms}ms\"\necn = \"l4s\"\n"
    )
}

/// Runs a scenario in `step_ms` steps; returns (max packets_out, the cwnd at each step).
fn window_trace(text: &str, step_ms: u64) -> (u32, Vec<u32>, aqmlab_sim::sim::Summary) {
    let sc = scenario(text);
    let mut sim = Simulation::new(&sc);
    let end = sc.duration.0 / 1_000_000;
    let (mut t, mut max_out, mut cwnd) = (0, 0, Vec::new());
    while t < end {
        t += step_ms;
        sim.run_until(Time::from_millis(t));
        let s = sim.sender(0);
        max_out = max_out.max(s.packets_out());
        cwnd.push(s.tp.cwnd);
    }
    let out = sim.run().summary;
    assert_conserved(&out);
    (max_out, cwnd, out)
}

/// The testbeds' receivers autotune their buffer up to the 5.x default `tcp_rmem[2]` = 6 MiB
/// with `tcp_adv_win_scale` 1, a 3 MiB window (profile.rs `default_rwnd_bytes`): 2172
/// segments of 1448 bytes. sce-l4s-ect1 S1 at 250 Mbit/s and 160 ms (BDP ≈ 3300 packets)
/// is then receive-window limited on the 2020 profile, and never on `linux`. An explicit
/// `rwnd` still wins over the profile ("1MB" = 2^20 bytes: 724 segments).
#[test]
fn the_2020_receivers_window_stops_at_3_mib() {
    let limit = 3 * 1024 * 1024 / 1448;
    let (era_max, _, era) = window_trace(&sce_s1("l4steam-2020-04", "250Mbit", 160, 20), 10);
    let (linux_max, _, linux) = window_trace(&sce_s1("linux", "250Mbit", 160, 20), 10);
    let explicit = sce_s1("l4steam-2020-04", "250Mbit", 160, 5).replace("ecn = \"l4s\"\n", "ecn = \"l4s\"\nrwnd = \"1MB\"\n");
    let (explicit_max, _, _) = window_trace(&explicit, 10);
    for (name, max, s) in [("l4steam-2020-04", era_max, &era), ("linux", linux_max, &linux)] {
        eprintln!(
            "sce S1 250 Mbit/s 160 ms, 20 s, {name}: max packets_out {max}, goodput {:.1} Mbit/s, steady {:.1}",
            s.flows[0].goodput_mbps,
            s.flows[0].steady_mbps.unwrap_or(0.0)
        );
    }
    eprintln!("l4steam-2020-04 with rwnd 1MB: max packets_out {explicit_max}");
    assert_eq!(era_max, limit, "the 2020 window reaches and stops at {limit} packets");
    assert!(linux_max > limit, "linux: not limited ({linux_max})");
    assert_eq!(explicit_max, 1024 * 1024 / 1448, "an explicit rwnd overrides the profile");
}
