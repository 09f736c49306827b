//! The SCE transports of the chromi/sce kernel: `reno-sce` and `cubic-sce`, used with
//! `ecn = "sce"` (draft-morton-tsvwg-sce: an AQM re-marks ECT(0) packets ECT(1) as "Some
//! Congestion Experienced"; the receiver echoes it as ESCE, draft-grimes-tcpmwg-tcpsce).
//!
//! Source read: `chromi/sce:net/ipv4/tcp_reno_sce.c` (stored versions 07bbe597 and 63982553)
//! and `tcp_cubic_sce.c` (versions 0139ea04 and 1280a6d0, identical SCE logic), with the SCE
//! kernel's `tcp_input.c` (4b2c3632) for when the hook runs: `tcp_ack` calls the
//! congestion control's `in_ack_event(flags)` with `CA_ACK_ESCE` / `CA_ACK_ECE` on every
//! ACK, *before* `tcp_clean_rtx_queue` (`pkts_acked`) and `tcp_fastretrans_alert` (which
//! still enters CWR on ECE, as RFC 3168). Here `in_ack_event` is the start of
//! [`CongestionControl::pkts_acked`], which the sender calls at the same point; ESCE is
//! `AckSample::acked_sce > 0` and ECE `AckSample::ece`.
//!
//! Both transports keep a *signed byte counter* and move cwnd by whole packets when it runs a
//! full window (`cnt_over = rcv_mss · cwnd` bytes) over or under, and an integer √cwnd that is
//! stepped by one alongside cwnd ([`shrink`]). A full window of ESCE-marked ACKs therefore
//! costs about √cwnd (CUBIC-SCE) or √cwnd/2 (Reno-SCE, version 07bbe597) packets.
//!
//! `rcv_mss`: the source measures ACKed data in real bytes (`snd_una` deltas) but sizes the
//! counter with `icsk_ack.rcv_mss`, the receive-side MSS estimate. A bulk sender receives no
//! data, so Linux leaves it at its initial hint `min(advmss, TCP_MSS_DEFAULT = 536)`
//! (`tcp_initialize_rcv_mss`): the growth and the SCE response are then larger than the
//! comments say by mss/536 ≈ 2.7 with a 1448-byte MSS. That is modelled (parameter
//! `rcv_mss`, default 536); `rcv_mss 1448` gives the intended unit behaviour.

use super::cubic::{self, jiffies, CubicParams, CubicVersion};
use super::{slow_start, AckSample, CaEvent, CaState, CcConfig, CongestionControl, Cubic, TcpCcState};
use super::CcKind;
use crate::params::{Args, Param, Params, Value};
use crate::profile::Stack;
use crate::rng::Stream;
use std::sync::Arc;

/// Linux `TCP_MSS_DEFAULT`, what `icsk_ack.rcv_mss` stays at on a sender that receives no data.
pub const DEFAULT_RCV_MSS: u32 = 536;

/// The shrink loop shared by both transports ("underflow of counter -> shrink cwnd"):
/// while the counter is a whole window (`over` bytes) in debt, repay one window and take one
/// packet off cwnd (never below 2), stepping √cwnd down when it no longer fits. Returns the
/// number of windows repaid (CUBIC-SCE lowers its plateau by as many packets).
fn shrink(cnt: &mut i64, over: i64, cwnd: &mut u32, sqrt: &mut u32) -> u32 {
    let mut n = 0;
    while *cnt <= -over {
        *cnt += over;
        n += 1;
        if *cwnd > 2 {
            *cwnd -= 1;
            if *sqrt * *sqrt >= *cwnd {
                *sqrt = sqrt.saturating_sub(1);
            }
        }
    }
    n
}

/// Bytes an ACK accounts for in `in_ack_event`: the newly cumulatively ACKed data, or one
/// (receive-side) MSS for a duplicate ACK. Window updates are not modelled, so a duplicate
/// ACK always counts.
fn acked_bytes(tp: &TcpCcState, s: &AckSample, rcv_mss: u32) -> i64 {
    if s.acked > 0 {
        s.acked as i64 * tp.mss as i64
    } else {
        rcv_mss as i64
    }
}

/// `rcv_mss`, the one parameter of both SCE congestion controls.
const RCV_MSS: Param = Param::uint("rcv_mss", 64, 65_535, DEFAULT_RCV_MSS as u64)
    .unit("bytes")
    .doc("bytes per packet of the window counter (icsk_ack.rcv_mss)");

// ------------------------------------------------------------------------------ Reno-SCE

/// `reno-sce [rcv_mss N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenoSceParams {
    /// Bytes per packet of the window counter (`icsk_ack.rcv_mss`), default 536.
    pub rcv_mss: u32,
}

impl Default for RenoSceParams {
    fn default() -> Self {
        RenoSceParams::from_args(&RENO_SCE.defaults(Stack::Linux))
    }
}

impl RenoSceParams {
    fn from_args(a: &Args) -> Self {
        RenoSceParams { rcv_mss: a.u32("rcv_mss") }
    }
}

impl CcConfig for RenoSceParams {
    fn name(&self) -> &'static str {
        RENO_SCE.name
    }
    fn build(&self, _rng: Stream, _stack: crate::profile::Stack) -> super::Cc {
        super::Cc::RenoSce(RenoSce::new(*self))
    }
}

/// `reno-sce [rcv_mss N]`.
pub const RENO_SCE: CcKind = CcKind {
    name: "reno-sce",
    doc: "NewReno with the SCE response (chromi/sce tcp_reno_sce.c)",
    params: &[RCV_MSS],
    build: |a| Ok(Arc::new(RenoSceParams::from_args(a))),
};

/// `reno-sce ...` read from `p`.
pub fn parse_reno_sce(p: &mut Params) -> Result<Arc<dyn CcConfig>, String> {
    RENO_SCE.parse(p)
}

/// NewReno with the SCE response (chromi/sce `tcp_reno_sce.c`, version 07bbe597).
#[derive(Clone, Debug)]
pub struct RenoSce {
    params: RenoSceParams,
    /// Signed byte counter (`snd_cwnd_cnt`).
    cnt: i64,
    /// cwnd at the last congestion signal, or the largest since (`loss_cwnd`).
    loss_cwnd: u32,
    /// ACKs left in which SCE counts as recent (`recent_sce`, set to cwnd + 1 on ESCE).
    recent_sce: u32,
    /// Incrementally tracked √cwnd (`sqrt_cwnd`), 1 at start.
    sqrt_cwnd: u32,
}

impl RenoSce {
    pub fn new(params: RenoSceParams) -> Self {
        RenoSce { params, cnt: 0, loss_cwnd: 0, recent_sce: 0, sqrt_cwnd: 1 }
    }
    pub fn sqrt_cwnd(&self) -> u32 {
        self.sqrt_cwnd
    }
    pub fn recent_sce(&self) -> u32 {
        self.recent_sce
    }
}

impl CongestionControl for RenoSce {
    fn name(&self) -> &'static str {
        RENO_SCE.name
    }

    /// `reno_sce_init`.
    fn init(&mut self, _tp: &mut TcpCcState) {
        *self = RenoSce::new(self.params);
    }

    /// `reno_sce_ssthresh`: half the cwnd of the last congestion signal (RFC 3168 / loss).
    fn ssthresh(&mut self, _tp: &TcpCcState) -> u32 {
        (self.loss_cwnd >> 1).max(2)
    }

    /// `reno_sce_handle_ack` (`.in_ack_event`), then nothing else: Reno-SCE has no
    /// `.pkts_acked`.
    fn pkts_acked(&mut self, tp: &mut TcpCcState, s: &AckSample) {
        let rcv_mss = self.params.rcv_mss as i64;
        let over = rcv_mss * tp.cwnd as i64;
        let bytes = acked_bytes(tp, s, self.params.rcv_mss);
        let esce = s.acked_sce > 0;
        if esce || s.ece {
            // SCE: a full window costs √cwnd/2 packets ("pro-rata sqrt(cwnd)"). CE (ECE is
            // sticky, RFC 3168): cwnd/4 per window, cwnd/8 if SCE was seen within the last
            // cwnd ACKs; the generic CWR reduction (ssthresh below) applies on top.
            let scaled = if esce {
                self.recent_sce = tp.cwnd + 1;
                bytes * self.sqrt_cwnd as i64 / 2
            } else {
                bytes * tp.cwnd as i64 / if self.recent_sce > 0 { 8 } else { 4 }
            };
            self.cnt -= scaled;
            self.loss_cwnd = tp.cwnd;
            tp.ssthresh = self.ssthresh(tp);
        } else if !tp.in_slow_start() && tp.is_cwnd_limited {
            // Reno linear growth: one window of bytes per +1.
            self.cnt += bytes;
            self.loss_cwnd = self.loss_cwnd.max(tp.cwnd);
        }
        shrink(&mut self.cnt, over, &mut tp.cwnd, &mut self.sqrt_cwnd);
        while self.cnt >= over {
            self.cnt -= over;
            if tp.cwnd < tp.cwnd_clamp {
                tp.cwnd += 1;
                if self.sqrt_cwnd * self.sqrt_cwnd < tp.cwnd {
                    self.sqrt_cwnd += 1;
                }
            }
        }
        self.recent_sce = self.recent_sce.saturating_sub(1);
    }

    /// `reno_sce_cong_avoid`: slow start only; what it leaves over goes into the counter.
    /// Congestion avoidance happens in `pkts_acked`.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        if !tp.is_cwnd_limited {
            return;
        }
        if tp.in_slow_start() {
            let left = slow_start(tp, acked);
            self.cnt += left as i64 * self.params.rcv_mss as i64;
        }
    }

    /// `reno_sce_cwnd_event` (CA_EVENT_LOSS → `reno_sce_react_to_loss(sk, 1)`): remember
    /// cwnd, clear the counter and step √cwnd down to the halved window. The halved cwnd
    /// itself is overwritten by the RTO (`tcp_enter_loss`: in flight + 1), as in Linux.
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        if ev == CaEvent::Loss {
            self.loss_cwnd = tp.cwnd;
            self.cnt = 0;
            let halved = tp.cwnd.saturating_sub((tp.cwnd >> 1).max(1)).max(2);
            while self.sqrt_cwnd > 0 && self.sqrt_cwnd * self.sqrt_cwnd >= halved {
                self.sqrt_cwnd -= 1;
            }
        }
    }

    /// `reno_sce_cwnd_undo`.
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        tp.cwnd.max(self.loss_cwnd)
    }
}

// ----------------------------------------------------------------------------- CUBIC-SCE

/// `cubic-sce [rcv_mss N] [version 5.4|5.6|5.8|5.16]` (CUBIC's module parameters at their
/// defaults).
///
/// `version`: the HyStart generation of the embedded CUBIC, default 5.4 on every profile.
/// `tcp_cubic_sce.c` carries its own copy of CUBIC rather than calling the kernel's, and both
/// stored versions (0139ea04, id 10669998327; 1280a6d0, id 9884018069) have the pre-5.6
/// HyStart: `bictcp_clock` in ms, `delay_min` in ms << 3, `hystart_ack_delta` = 2 ms, ACK
/// train past `delay_min >> 4`, `curr_rtt` from the first 8 samples, round reset in
/// `bictcp_cong_avoid` ([`CubicVersion::V5_4`]). So it is not a property of a profile's base
/// kernel. (Until this was modelled the engine's cubic-sce ran today's µs HyStart; `version
/// 5.16` gives that back.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CubicSceParams {
    pub rcv_mss: u32,
    pub version: CubicVersion,
}

impl Default for CubicSceParams {
    fn default() -> Self {
        CubicSceParams::from_args(&CUBIC_SCE.defaults(Stack::Linux))
    }
}

impl CubicSceParams {
    fn from_args(a: &Args) -> Self {
        CubicSceParams { rcv_mss: a.u32("rcv_mss"), version: CubicVersion::from_word(a.word("version")) }
    }
}

impl CcConfig for CubicSceParams {
    fn name(&self) -> &'static str {
        CUBIC_SCE.name
    }
    fn build(&self, _rng: Stream, _stack: crate::profile::Stack) -> super::Cc {
        super::Cc::CubicSce(Box::new(CubicSce::new(*self)))
    }
}

/// `cubic-sce [rcv_mss N] [version V]` (CUBIC's module parameters at their defaults; its own
/// copy of HyStart is the 5.4 one in every chromi/sce version).
pub const CUBIC_SCE: CcKind = CcKind {
    name: "cubic-sce",
    doc: "CUBIC with the SCE response (chromi/sce tcp_cubic_sce.c)",
    params: &[RCV_MSS, cubic::version(Value::Word("5.4"))],
    build: |a| Ok(Arc::new(CubicSceParams::from_args(a))),
};

/// `cubic-sce ...` read from `p`.
pub fn parse_cubic_sce(p: &mut Params) -> Result<Arc<dyn CcConfig>, String> {
    CUBIC_SCE.parse(p)
}

/// CUBIC with the SCE response (chromi/sce `tcp_cubic_sce.c`): the crate's Linux CUBIC
/// ([`Cubic`]) plus `bictcp_handle_ack`, the 7/8 β after recent SCE, and √cwnd tracking.
#[derive(Clone, Debug)]
pub struct CubicSce {
    inner: Cubic,
    rcv_mss: u32,
    /// Bytes of SCE debit not yet a whole `rcv_mss` (the source counts CUBIC's `ack_cnt` in
    /// bytes of `rcv_mss`; the crate's CUBIC counts it in packets).
    debt_frac: i64,
    /// Largest s with s² < cwnd, refreshed after growth (`sqrt_cnt`).
    sqrt_cnt: u32,
    recent_sce: u32,
}

impl CubicSce {
    pub fn new(p: CubicSceParams) -> Self {
        let inner = Cubic::new(CubicParams { version: Some(p.version), ..CubicParams::default() });
        CubicSce { inner, rcv_mss: p.rcv_mss, debt_frac: 0, sqrt_cnt: 1, recent_sce: 0 }
    }
    pub fn cubic(&self) -> &Cubic {
        &self.inner
    }
    pub fn sqrt_cnt(&self) -> u32 {
        self.sqrt_cnt
    }
    pub fn recent_sce(&self) -> u32 {
        self.recent_sce
    }

    /// `bictcp_handle_ack` for an ACK with ESCE.
    fn on_esce(&mut self, tp: &mut TcpCcState, bytes: i64) {
        let Some((es, k, origin)) = self.inner.curve_mut().map(|(a, b, c)| (*a, *b, *c)) else {
            // No epoch yet (slow start): just leave slow start.
            tp.ssthresh = tp.cwnd / 2;
            return;
        };
        // Reduce the gradient of the cubic: move its inflection point to now, keeping W(now).
        // With `acked_bytes ≥ sqrt_cnt` (always: bytes against a packet count) the source
        // moves it all the way. Above the inflection point it shifts epoch_start by K and sets
        // K to the elapsed time past it; below, it restarts the epoch now with K = 0.
        let now_j = jiffies(tp.now);
        let t = (now_j.saturating_sub(es) << 10) / 1000;
        let (es, k, origin) = if t < k {
            (now_j, 0, origin.saturating_sub(self.inner.cubic_delta(k - t)))
        } else {
            (es + ((k * 1000) >> 10), t - k, origin.saturating_add(self.inner.cubic_delta(t - k)))
        };
        // A full window of ESCE costs √cwnd packets, taken off cwnd and the plateau alike.
        // The debit goes into CUBIC's `ack_cnt`, so it also holds back the Reno-friendly
        // estimate until congestion-avoidance ACKs have repaid it.
        let total = self.debt_frac + bytes * self.sqrt_cnt as i64;
        let rcv_mss = self.rcv_mss as i64;
        self.debt_frac = total % rcv_mss;
        self.recent_sce = tp.cwnd + 1;
        let over = tp.cwnd as i64;
        let cnt = self.inner.ack_cnt_mut();
        *cnt -= total / rcv_mss;
        let n = shrink(cnt, over, &mut tp.cwnd, &mut self.sqrt_cnt);
        if let Some((e, kk, o)) = self.inner.curve_mut() {
            *e = es;
            *kk = k;
            *o = origin.saturating_sub(n);
        }
        tp.ssthresh = tp.cwnd / 2;
    }
}

impl CongestionControl for CubicSce {
    fn name(&self) -> &'static str {
        CUBIC_SCE.name
    }
    /// `bictcp_init` (+ the SCE fields of `bictcp_reset`).
    fn init(&mut self, tp: &mut TcpCcState) {
        self.inner.init(tp);
        self.debt_frac = 0;
        self.sqrt_cnt = 1;
        self.recent_sce = 0;
    }
    /// `bictcp_recalc_ssthresh`: CUBIC's epoch end and W_max, and β = 7/8 instead of 717/1024
    /// while SCE is recent.
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        let s = self.inner.ssthresh(tp);
        if self.recent_sce > 0 {
            (tp.cwnd * 7 / 8).max(2)
        } else {
            s
        }
    }
    /// `bictcp_cong_avoid`: CUBIC (whose ACK counter repays any SCE debt first), then √cwnd
    /// refreshed after congestion-avoidance growth.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        let (cwnd0, ssthresh, was_ss) = (tp.cwnd, tp.ssthresh, tp.in_slow_start());
        self.inner.cong_avoid(tp, acked);
        let left = if was_ss { acked.saturating_sub(ssthresh.saturating_sub(cwnd0)) } else { acked };
        if !tp.is_cwnd_limited || left == 0 {
            return;
        }
        while self.sqrt_cnt * self.sqrt_cnt < tp.cwnd {
            self.sqrt_cnt += 1;
        }
        while self.sqrt_cnt > 0 && self.sqrt_cnt * self.sqrt_cnt >= tp.cwnd {
            self.sqrt_cnt -= 1;
        }
    }
    /// `.in_ack_event` (`bictcp_handle_ack`) runs before `.pkts_acked` (`bictcp_acked`).
    fn pkts_acked(&mut self, tp: &mut TcpCcState, s: &AckSample) {
        if s.acked_sce > 0 {
            let bytes = acked_bytes(tp, s, self.rcv_mss);
            self.on_esce(tp, bytes);
        }
        self.recent_sce = self.recent_sce.saturating_sub(1);
        self.inner.pkts_acked(tp, s);
    }
    /// `bictcp_state`: an RTO resets CUBIC and the SCE state.
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        self.inner.set_state(tp, new);
        if new == CaState::Loss {
            self.debt_frac = 0;
            self.sqrt_cnt = 1;
            self.recent_sce = 0;
        }
    }
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        self.inner.cwnd_event(tp, ev);
    }
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        self.inner.undo_cwnd(tp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_state;
    use crate::params::Params;
    use crate::time::Time;

    fn esce(acked: u32) -> AckSample {
        AckSample { acked, acked_sce: acked, ..AckSample::default() }
    }
    fn plain(acked: u32) -> AckSample {
        AckSample { acked, ..AckSample::default() }
    }

    /// Largest k with `over_unit · Σ_{i<k} (w − i) ≤ debt`: packets a debt of `debt` bytes
    /// removes from a window `w` when each removal costs one window of `over_unit` bytes.
    fn decrements(debt: i64, w: i64, over_unit: i64) -> i64 {
        let mut k = 0;
        while over_unit * ((k + 1) * w - (k + 1) * k / 2) <= debt {
            k += 1;
        }
        k
    }

    #[test]
    fn reno_sce_full_window_of_esce_costs_half_sqrt_cwnd() {
        // √cwnd tracker at 100 for cwnd 10200 (its state after one step down from 101).
        for (mss, rcv_mss) in [(1000u32, 1000u32), (1448, 536)] {
            let w = 10_200u32;
            let mut tp = test_state(w, 100);
            tp.mss = mss;
            let mut r = RenoSce::new(RenoSceParams { rcv_mss });
            r.sqrt_cwnd = 100;
            for _ in 0..w {
                r.pkts_acked(&mut tp, &esce(1));
            }
            let k = decrements(w as i64 * mss as i64 * 100 / 2, w as i64, rcv_mss as i64);
            assert_eq!((w - tp.cwnd) as i64, k, "mss {mss} rcv_mss {rcv_mss}");
            assert_eq!(r.sqrt_cwnd(), 100, "cwnd stayed above 100²");
            if mss == rcv_mss {
                assert_eq!(k, 50, "√10200 / 2 packets");
            } else {
                assert_eq!(k, 135, "× 1448/536 with Linux's rcv_mss hint");
            }
            // ssthresh follows half the cwnd of the last mark; SCE is recent.
            assert!((tp.cwnd / 2..=(tp.cwnd + 1) / 2).contains(&tp.ssthresh), "{}", tp.ssthresh);
            assert!(r.recent_sce() >= tp.cwnd);
        }
    }

    #[test]
    fn reno_sce_grows_one_packet_per_window_without_marks_and_never_shrinks() {
        let mut tp = test_state(100, 50);
        let mut r = RenoSce::new(RenoSceParams { rcv_mss: 1448 });
        for _ in 0..100 {
            r.pkts_acked(&mut tp, &plain(1));
            r.cong_avoid(&mut tp, 1);
        }
        assert_eq!(tp.cwnd, 101);
        // Linux's rcv_mss hint: 1448/536 ≈ 2.7 packets per window.
        let mut tp = test_state(100, 50);
        let mut r = RenoSce::new(RenoSceParams::default());
        for _ in 0..100 {
            r.pkts_acked(&mut tp, &plain(1));
        }
        assert_eq!(tp.cwnd, 102);
        for _ in 0..102 {
            r.pkts_acked(&mut tp, &plain(1));
        }
        assert_eq!(tp.cwnd, 105);
        // Not cwnd-limited: nothing moves.
        let mut tp = test_state(100, 50);
        tp.is_cwnd_limited = false;
        let mut r = RenoSce::new(RenoSceParams::default());
        for _ in 0..1000 {
            r.pkts_acked(&mut tp, &plain(1));
            r.cong_avoid(&mut tp, 1);
        }
        assert_eq!(tp.cwnd, 100);
    }

    #[test]
    fn reno_sce_ce_halves_through_cwr_and_slow_start_is_reno() {
        let mut tp = test_state(80, 1000);
        let mut r = RenoSce::new(RenoSceParams::default());
        r.cong_avoid(&mut tp, 10);
        assert_eq!(tp.cwnd, 90, "slow start as Reno");
        let s = AckSample { acked: 1, ece: true, ..AckSample::default() };
        r.pkts_acked(&mut tp, &s);
        // The sender then enters CWR with this ssthresh (Reno halving).
        assert_eq!(r.ssthresh(&tp), 45);
        assert_eq!(tp.ssthresh, 45);
        // The per-ACK CE term: 1448 · 90 / 4 bytes against a window of 536 · 90.
        assert_eq!(tp.cwnd, 90);
        for _ in 0..1 {
            r.pkts_acked(&mut tp, &s);
        }
        assert_eq!(tp.cwnd, 89, "2 · 1448/4 ≥ 536 bytes: one packet");
        // Undo restores the cwnd of the signal.
        tp.cwnd = 45;
        assert_eq!(r.undo_cwnd(&tp), 90);
    }

    #[test]
    fn cubic_sce_esce_in_slow_start_only_ends_slow_start() {
        let mut tp = test_state(40, u32::MAX);
        let mut c = CubicSce::new(CubicSceParams::default());
        c.init(&mut tp);
        c.pkts_acked(&mut tp, &esce(1));
        assert_eq!((tp.cwnd, tp.ssthresh), (40, 20));
    }

    /// A CUBIC-SCE flow in congestion avoidance with an epoch running.
    fn cubic_in_ca(w: u32, mss: u32, rcv_mss: u32) -> (TcpCcState, CubicSce) {
        let mut tp = test_state(w, w / 2);
        tp.mss = mss;
        let mut c = CubicSce::new(CubicSceParams { rcv_mss, ..CubicSceParams::default() });
        c.init(&mut tp);
        tp.now = Time::from_secs(10);
        c.cong_avoid(&mut tp, 1); // starts the epoch, sets √cwnd
        (tp, c)
    }

    #[test]
    fn cubic_sce_full_window_of_esce_costs_sqrt_cwnd() {
        for (mss, rcv_mss) in [(1000u32, 1000u32), (1448, 536)] {
            let (mut tp, mut c) = cubic_in_ca(10_200, mss, rcv_mss);
            let w = tp.cwnd;
            assert_eq!(c.sqrt_cnt(), 100, "largest s with s² < cwnd");
            let origin0 = c.inner.curve_mut().map(|(_, _, o)| *o).unwrap();
            for _ in 0..w {
                c.pkts_acked(&mut tp, &esce(1));
            }
            let k = decrements(w as i64 * mss as i64 * 100, w as i64, rcv_mss as i64);
            assert_eq!((w - tp.cwnd) as i64, k, "mss {mss} rcv_mss {rcv_mss}");
            if mss == rcv_mss {
                assert_eq!(k, 100, "≈ √10200");
            }
            assert_eq!(tp.ssthresh, tp.cwnd / 2);
            // The plateau came down with cwnd (the curve was re-centred at the current point).
            let origin = c.inner.curve_mut().map(|(_, _, o)| *o).unwrap();
            assert!(origin <= origin0 - k as u32, "{origin} vs {origin0} - {k}");
        }
    }

    #[test]
    fn cubic_sce_moves_the_inflection_point_to_now() {
        let (mut tp, mut c) = cubic_in_ca(1000, 1448, 536);
        // Fake a curve: epoch began 1 s ago, K = 3 s, plateau 1200 (concave region).
        let now_j = jiffies(tp.now);
        {
            let (es, k, o) = c.inner.curve_mut().unwrap();
            *es = now_j - 1000;
            *k = 3 << 10;
            *o = 1200;
        }
        let below = 1200 - c.inner.cubic_delta(2 << 10);
        c.pkts_acked(&mut tp, &AckSample { acked: 1, acked_sce: 1, ..AckSample::default() });
        let (es, k, o) = c.inner.curve_mut().map(|(a, b, c)| (*a, *b, *c)).unwrap();
        assert_eq!((es, k), (now_j, 0), "epoch restarts now at the inflection point");
        assert_eq!(o, below, "W(now) is kept: {o} vs {below}");
        // Convex region: epoch 5 s ago, K = 2 s → inflection moved to now, W(now) kept.
        {
            let (es, k, o) = c.inner.curve_mut().unwrap();
            *es = now_j - 5000;
            *k = 2 << 10;
            *o = 900;
        }
        let t = (5000u64 << 10) / 1000;
        let above = 900 + c.inner.cubic_delta(t - (2 << 10));
        c.pkts_acked(&mut tp, &AckSample { acked: 1, acked_sce: 1, ..AckSample::default() });
        let (es, k, o) = c.inner.curve_mut().map(|(a, b, c)| (*a, *b, *c)).unwrap();
        let inflection = es + ((k * 1000) >> 10);
        assert!(inflection.abs_diff(now_j) <= 1, "inflection at {inflection}, now {now_j}");
        assert_eq!(o, above, "W(now) is kept");
    }

    #[test]
    fn cubic_sce_ce_uses_cubic_beta_or_seven_eighths_after_sce() {
        let (tp, mut c) = cubic_in_ca(1000, 1448, 536);
        assert_eq!(c.ssthresh(&tp), 1000 * 717 / 1024);
        let (mut tp, mut c) = cubic_in_ca(1000, 1448, 536);
        c.pkts_acked(&mut tp, &esce(1));
        let w = tp.cwnd;
        assert_eq!(c.ssthresh(&tp), w * 7 / 8);
        // Recent for cwnd ACKs only.
        for _ in 0..w {
            c.pkts_acked(&mut tp, &plain(1));
        }
        assert_eq!(c.recent_sce(), 0);
        assert_eq!(c.ssthresh(&tp), tp.cwnd * 717 / 1024);
    }

    #[test]
    fn cubic_sce_without_marks_is_cubic() {
        let mut a = test_state(10, u32::MAX);
        let mut b = a;
        let mut sce = CubicSce::new(CubicSceParams::default());
        let mut cubic = Cubic::default();
        sce.init(&mut a);
        cubic.init(&mut b);
        let rtt = Time::from_millis(20);
        for i in 0..20_000u64 {
            for tp in [&mut a, &mut b] {
                tp.now = Time::from_micros(i * 500);
                tp.snd_una += 1;
                tp.snd_nxt = tp.snd_una + tp.cwnd;
            }
            if i == 3000 {
                a.ssthresh = sce.ssthresh(&a);
                b.ssthresh = cubic.ssthresh(&b);
                a.cwnd = a.ssthresh;
                b.cwnd = b.ssthresh;
            }
            let s = AckSample { acked: 1, rtt: Some(rtt), ..AckSample::default() };
            sce.pkts_acked(&mut a, &s);
            cubic.pkts_acked(&mut b, &s);
            sce.cong_avoid(&mut a, 1);
            cubic.cong_avoid(&mut b, 1);
            assert_eq!((a.cwnd, a.ssthresh), (b.cwnd, b.ssthresh), "ACK {i}");
        }
        assert!(a.cwnd > 100);
    }

    #[test]
    fn parse_rcv_mss() {
        let t = vec!["rcv_mss".to_string(), "1448".to_string()];
        let c = parse_reno_sce(&mut Params::new("reno-sce", &t)).unwrap();
        assert_eq!(c.name(), "reno-sce");
        let t = vec!["beta".to_string(), "3".to_string()];
        let e = parse_cubic_sce(&mut Params::new("cubic-sce", &t)).unwrap_err();
        assert!(e.contains("rcv_mss"), "{e}");
    }
}
