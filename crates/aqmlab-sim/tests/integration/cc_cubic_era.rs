//! CUBIC's HyStart generation per era profile, seen in a whole system: one CUBIC flow alone at
//! 50 Mbit/s, 80 ms through fq_codel (a 330-packet BDP), on today's stack (`linux`, HyStart
//! of Linux ≥ 5.16) and on `l4steam-2020` (a 5.4-based kernel: ms clock, ACK train past half
//! the minimum RTT with no ack-delay cushion, `curr_rtt` from the first 8 samples of a round).

use crate::common::{Dumbbell, Flow};
use aqmlab_sim::Time;

/// How slow start ended: the first time ssthresh is set, cwnd and ssthresh then, whether a
/// loss/mark recovery was under way (else HyStart ended it), and the flow after 10 s.
#[derive(Debug)]
struct SlowStartExit {
    at_ms: u64,
    cwnd: u32,
    ssthresh: u32,
    by_recovery: bool,
    retransmits_10s: u64,
    recoveries_10s: u64,
    acked_mb_10s: f64,
}

fn slow_start_exit(stack: &str, cc: &str) -> SlowStartExit {
    let mut sim = Dumbbell::new("50Mbit", "fq_codel").duration("10s").stack(stack).flow(Flow::new(cc).rtt("80ms")).sim();
    let mut exit = None;
    let mut t = Time::ZERO;
    while t < Time::from_secs(10) {
        t += Time::from_millis(1);
        sim.run_until(t);
        let s = sim.sender(0);
        if exit.is_none() && s.tp.ssthresh != u32::MAX {
            exit = Some((t.as_micros() / 1000, s.tp.cwnd, s.tp.ssthresh, s.stats.fast_recoveries > 0 || s.stats.retransmits > 0 || s.stats.cwr_reductions > 0));
        }
    }
    let (at_ms, cwnd, ssthresh, by_recovery) = exit.expect("slow start ends within 10 s");
    let s = sim.sender(0);
    let r = SlowStartExit {
        at_ms,
        cwnd,
        ssthresh,
        by_recovery,
        retransmits_10s: s.stats.retransmits,
        recoveries_10s: s.stats.fast_recoveries,
        acked_mb_10s: s.bytes_acked() as f64 / 1e6,
    };
    eprintln!(
        "CUBIC alone, 50 Mbit/s 80 ms fq_codel, stack {stack:>13}, cc {cc:<18}: slow start ends at {} ms, cwnd {} ssthresh {} ({}); \
         after 10 s: {:.1} MB ACKed, {} retransmits, {} recoveries",
        r.at_ms,
        r.cwnd,
        r.ssthresh,
        if r.by_recovery { "loss/mark recovery" } else { "HyStart" },
        r.acked_mb_10s,
        r.retransmits_10s,
        r.recoveries_10s
    );
    r
}

/// Printed comparison (issue 11 §1): the `linux` profile (today's upstream, with 25c1a9ca53db,
/// `version 6.13`), `l4steam-2020` (5.4) and the engine's CUBIC before 2026-11 (`version
/// 5.16`), which restarts no HyStart round below cwnd 16, so its rounds start mid-flight; 5.4
/// (reset in `cong_avoid`) and 6.13 restart one at every round from the first, so both see
/// the same rounds. What must then hold by construction: every 5.4 difference (ACK-train
/// threshold delay_min/2 instead of (delay_min + 1 ms)/2, no pacing term; curr_rtt from the
/// first 8 samples, never below the running minimum) can only end slow start earlier for the
/// same ACK stream, and HyStart (not a loss) ends it in all three.
#[test]
fn cubic_slow_start_exit_linux_vs_l4steam_2020() {
    let linux = slow_start_exit("linux", "cubic");
    let era = slow_start_exit("l4steam-2020", "cubic");
    let v516 = slow_start_exit("linux", "cubic version 5.16");
    for r in [&linux, &era, &v516] {
        assert!(!r.by_recovery, "HyStart, not a loss, ends slow start: {r:?}");
        assert_eq!(r.ssthresh, r.cwnd, "HyStart sets ssthresh = cwnd: {r:?}");
        // Somewhere between the low window and twice the 330-packet BDP.
        assert!(r.cwnd > 16 && r.cwnd < 660, "{r:?}");
    }
    assert!(era.at_ms <= linux.at_ms, "5.4 HyStart exits no later than 6.13 on the same rounds: {era:?} vs {linux:?}");
    assert_ne!((v516.at_ms, v516.cwnd), (linux.at_ms, linux.cwnd), "rounds restarted below cwnd 16 change the exit");
}
