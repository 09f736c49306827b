//! Reno / NewReno congestion control (RFC 5681 §3.1; Linux `tcp_reno_*` in
//! `net/ipv4/tcp_cong.c`): slow start up to ssthresh, then +1 packet per cwnd of ACKed
//! packets; on loss or ECN echo, ssthresh = max(cwnd / 2, 2).

use super::{acked_for_avoidance, cong_avoid_ai, CcConfig, CongestionControl, TcpCcState};
use super::CcKind;
use std::sync::Arc;

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Reno;

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        RENO.name
    }
    /// Linux `tcp_reno_ssthresh`.
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        (tp.cwnd >> 1).max(2)
    }
    /// Linux `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        let Some(acked) = acked_for_avoidance(tp, acked) else { return };
        let w = tp.cwnd;
        cong_avoid_ai(tp, w, acked);
    }
    /// Linux `tcp_reno_undo_cwnd`: back to the cwnd before the reduction.
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        tp.cwnd.max(tp.ssthresh.saturating_mul(2))
    }
}

impl CcConfig for Reno {
    fn name(&self) -> &'static str {
        RENO.name
    }
    fn build(&self, _rng: crate::rng::Stream, _stack: crate::profile::Stack) -> super::Cc {
        super::Cc::Reno(Reno)
    }
}

/// `reno` takes no parameters.
pub const RENO: CcKind = CcKind {
    name: "reno",
    doc: "NewReno (RFC 5681, tcp_cong.c)",
    params: &[],
    build: |_| Ok(Arc::new(Reno)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_state;

    #[test]
    fn slow_start_doubles_per_round_and_stops_at_ssthresh() {
        let mut tp = test_state(10, 1000);
        let mut r = Reno;
        r.cong_avoid(&mut tp, 10);
        assert_eq!(tp.cwnd, 20);
        let mut tp = test_state(10, 15);
        r.cong_avoid(&mut tp, 10);
        // 5 packets reach ssthresh, the other 5 count towards congestion avoidance.
        assert_eq!(tp.cwnd, 15);
        assert_eq!(tp.cwnd_cnt, 5);
    }

    #[test]
    fn congestion_avoidance_adds_one_packet_per_window() {
        let mut tp = test_state(100, 50);
        let mut r = Reno;
        for _ in 0..100 {
            r.cong_avoid(&mut tp, 1);
        }
        assert_eq!(tp.cwnd, 101);
        // 101 ACKs to reach 102, 102 more to reach 103, 103 more to reach 104.
        for _ in 0..(101 + 102 + 102) {
            r.cong_avoid(&mut tp, 1);
        }
        assert_eq!(tp.cwnd, 103);
        r.cong_avoid(&mut tp, 1);
        assert_eq!(tp.cwnd, 104);
    }

    #[test]
    fn ssthresh_halves_with_floor_of_two() {
        let mut r = Reno;
        assert_eq!(r.ssthresh(&test_state(101, 0)), 50);
        assert_eq!(r.ssthresh(&test_state(3, 0)), 2);
    }

    #[test]
    fn no_growth_when_not_cwnd_limited() {
        let mut tp = test_state(10, 1000);
        tp.is_cwnd_limited = false;
        Reno.cong_avoid(&mut tp, 10);
        assert_eq!(tp.cwnd, 10);
    }
}
