//! DCTCP (RFC 8257; Linux `net/ipv4/tcp_dctcp.c`, read at torvalds/linux@01581a21, v6.2-era;
//! the algorithm is unchanged since the `delivered`/`delivered_ce` rewrite of v5.1).
//!
//! - α, the EWMA of the fraction of CE-marked packets, in 1/1024 units (`DCTCP_MAX_ALPHA`),
//!   updated once per window of data (when `snd_una` passes the `snd_nxt` recorded at the last
//!   update, `dctcp_update_alpha`) with gain g = 2^-`shift_g` (default 1/16):
//!   α ← α − max-not-zero(α >> g) + ⌊Δdelivered_ce · 2^(10−g) / Δdelivered⌋, capped at 1024.
//!   Linux's `min_not_zero` makes an α below 2^g drop straight to zero in a window without
//!   marks; the integer division truncates F to multiples of 2^-(10−g) per window (1/64).
//! - ECN echo (the sender's CWR, at most once per window, PRR descent): ssthresh =
//!   max(cwnd − ⌊cwnd·α/2048⌋, 2), i.e. cwnd·(1 − α/2) truncated (`dctcp_ssthresh`).
//! - Growth: Reno (`tcp_reno_cong_avoid`).
//! - Loss: entering Recovery or an RTO sets ssthresh = max(cwnd/2, 2) (`dctcp_react_to_loss`),
//!   overriding the α-based value the sender just took from `ssthresh`.
//! - Without ECN (scenario `ecn = "off"`) the connection uses plain Reno (`dctcp_reno`).
//!
//! The receiver side of DCTCP (`dctcp_ece_ack_update`: an immediate ACK whenever the CE state
//! of arriving data flips) is the receiver's `l4s` ACK policy; with `ecn = "l4s"` the sender
//! has exact CE counts (AccECN), with `ecn = "rfc3168"` it reacts to the latched ECE flag.

use super::{acked_for_avoidance, cong_avoid_ai, AckSample, CaEvent, CaState, CcConfig, CongestionControl, TcpCcState};
use super::CcKind;
use crate::params::{Args, Param, Params};
use crate::profile::Stack;
use std::sync::Arc;

/// `DCTCP_MAX_ALPHA`: α = 1.0.
pub const MAX_ALPHA: u32 = 1024;

/// Module parameters (`dctcp_shift_g`, `dctcp_alpha_on_init`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DctcpParams {
    pub shift_g: u32,
    pub alpha_on_init: u32,
}

impl Default for DctcpParams {
    /// The module parameter defaults (the table's).
    fn default() -> Self {
        DctcpParams::from_args(&DCTCP.defaults(Stack::Linux))
    }
}

impl DctcpParams {
    fn from_args(a: &Args) -> Self {
        DctcpParams { shift_g: a.u32("shift_g"), alpha_on_init: a.u32("alpha_on_init") }
    }
}

impl CcConfig for DctcpParams {
    fn name(&self) -> &'static str {
        DCTCP.name
    }
    fn build(&self, _rng: crate::rng::Stream, _stack: crate::profile::Stack) -> super::Cc {
        super::Cc::Dctcp(Dctcp::new(*self))
    }
}

/// `dctcp shift_g 4 alpha_on_init 1024` (Linux module parameter names without the prefix).
pub const DCTCP: CcKind = CcKind {
    name: "dctcp",
    doc: "Data Center TCP (tcp_dctcp.c, RFC 8257)",
    params: &[
        // Linux allows any value, but 2^(10 - g) must stay an integer.
        Param::uint("shift_g", 0, 10, 4).doc("weight of the new mark fraction in alpha: 2^-shift_g"),
        Param::uint("alpha_on_init", 0, MAX_ALPHA as u64, MAX_ALPHA as u64).unit("1/1024").doc("initial alpha"),
    ],
    build: |a| Ok(Arc::new(DctcpParams::from_args(a))),
};

/// `dctcp ...` read from `p`.
pub fn parse(p: &mut Params) -> Result<Arc<dyn CcConfig>, String> {
    DCTCP.parse(p)
}

/// Linux `struct dctcp`.
#[derive(Clone, Debug)]
pub struct Dctcp {
    params: DctcpParams,
    /// α in 1/1024 (`dctcp_alpha`).
    alpha: u32,
    /// `snd_nxt`, `delivered` and `delivered_ce` when the current window began.
    next_seq: u32,
    old_delivered: u64,
    old_delivered_ce: u64,
    loss_cwnd: u32,
    /// ECN was not negotiated: Reno (`dctcp_reno`).
    reno: bool,
}

impl Dctcp {
    pub fn new(params: DctcpParams) -> Self {
        Dctcp {
            params,
            alpha: params.alpha_on_init.min(MAX_ALPHA),
            next_seq: 0,
            old_delivered: 0,
            old_delivered_ce: 0,
            loss_cwnd: 0,
            reno: false,
        }
    }

    /// α in 1/1024 units.
    pub fn alpha(&self) -> u32 {
        self.alpha
    }

    /// Linux `dctcp_reset`: a new observation window starts.
    fn reset(&mut self, tp: &TcpCcState) {
        self.next_seq = tp.snd_nxt;
        self.old_delivered = tp.delivered;
        self.old_delivered_ce = tp.delivered_ce;
    }

    /// Linux `dctcp_update_alpha` (the `.in_ack_event` hook): once per window of data.
    fn update_alpha(&mut self, tp: &TcpCcState) {
        if tp.snd_una < self.next_seq {
            return;
        }
        let g = self.params.shift_g;
        let mut alpha = self.alpha;
        // min_not_zero(alpha, alpha >> g): all of alpha once alpha >> g rounds to zero.
        let decay = if alpha >> g == 0 { alpha } else { alpha >> g };
        alpha -= decay;
        let ce = tp.delivered_ce - self.old_delivered_ce;
        if ce > 0 {
            let delivered = (tp.delivered - self.old_delivered).max(1);
            let f = ((ce << (10 - g)) / delivered) as u32;
            alpha = (alpha + f).min(MAX_ALPHA);
        }
        self.alpha = alpha;
        self.reset(tp);
    }

    /// Linux `dctcp_react_to_loss`: Reno's halving on loss.
    fn react_to_loss(&mut self, tp: &mut TcpCcState) {
        self.loss_cwnd = tp.cwnd;
        tp.ssthresh = (tp.cwnd >> 1).max(2);
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        if self.reno {
            "dctcp-reno"
        } else {
            DCTCP.name
        }
    }

    /// Linux `dctcp_init`: without ECN, switch to the Reno operations.
    fn init(&mut self, tp: &mut TcpCcState) {
        if !tp.ecn.is_on() {
            self.reno = true;
            return;
        }
        self.alpha = self.params.alpha_on_init.min(MAX_ALPHA);
        self.loss_cwnd = 0;
        self.reset(tp);
    }

    /// Linux `dctcp_ssthresh` (or `tcp_reno_ssthresh` in Reno mode).
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        if self.reno {
            return (tp.cwnd >> 1).max(2);
        }
        self.loss_cwnd = tp.cwnd;
        let cut = ((tp.cwnd as u64 * self.alpha as u64) >> 11) as u32;
        (tp.cwnd - cut).max(2)
    }

    /// `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        let Some(acked) = acked_for_avoidance(tp, acked) else { return };
        let w = tp.cwnd;
        cong_avoid_ai(tp, w, acked);
    }

    /// Linux calls `dctcp_update_alpha` from `tcp_in_ack_event` on every ACK, before the
    /// state machine (so before a CWR that this ACK starts); here on every ACK likewise.
    fn pkts_acked(&mut self, tp: &mut TcpCcState, _sample: &AckSample) {
        if !self.reno {
            self.update_alpha(tp);
        }
    }

    /// Linux `dctcp_state`: the first entry into Recovery halves (ssthresh = cwnd/2).
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        if !self.reno && new == CaState::Recovery && tp.ca_state != CaState::Recovery {
            self.react_to_loss(tp);
        }
    }

    /// Linux `dctcp_cwnd_event`: an RTO halves as well.
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        if !self.reno && ev == CaEvent::Loss {
            self.react_to_loss(tp);
        }
    }

    /// Linux `dctcp_cwnd_undo` (`tcp_reno_undo_cwnd` in Reno mode).
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        if self.reno {
            return tp.cwnd.max(tp.ssthresh.saturating_mul(2));
        }
        tp.cwnd.max(self.loss_cwnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_state;
    use crate::params::Params;

    fn dctcp() -> (Dctcp, TcpCcState) {
        let mut tp = test_state(100, 50);
        let mut d = Dctcp::new(DctcpParams::default());
        d.init(&mut tp);
        (d, tp)
    }

    /// Deliver one window of `w` packets of which `ce` are CE-marked, then the ACK that ends
    /// the window (snd_una reaches the recorded snd_nxt).
    fn window(d: &mut Dctcp, tp: &mut TcpCcState, w: u64, ce: u64) {
        tp.delivered += w;
        tp.delivered_ce += ce;
        tp.snd_una = tp.snd_nxt;
        tp.snd_nxt += w as u32;
        d.pkts_acked(tp, &AckSample::default());
    }

    #[test]
    fn alpha_starts_at_one_and_follows_the_ewma_closed_form() {
        let (mut d, mut tp) = dctcp();
        assert_eq!(d.alpha(), 1024);
        // Constant marking fraction F = 1/4 over windows of 256 packets: F·64 = 16 exactly,
        // so α_n = α_{n-1} − ⌊α_{n-1}/16⌋ + 16, whose real-valued closed form is
        // α_n = 1024·F + (α_0 − 1024·F)(15/16)^n. Integer truncation of α/16 keeps the
        // kernel value at or above the real one by less than 16 units.
        let f = 0.25;
        let mut alpha = 1024u32;
        for n in 1..=200 {
            window(&mut d, &mut tp, 256, 64);
            alpha = alpha - (alpha >> 4) + 16;
            assert_eq!(d.alpha(), alpha, "window {n}: exact kernel recursion");
            let closed = 1024.0 * f + (1024.0 - 1024.0 * f) * (15.0f64 / 16.0).powi(n);
            let got = d.alpha() as f64;
            assert!(got >= closed - 1e-9 && got < closed + 16.0, "window {n}: α {got} vs closed form {closed}");
        }
        // Converged: within the truncation band of F = 0.25 (256 of 1024).
        assert!((256..272).contains(&d.alpha()), "α {}", d.alpha());
    }

    #[test]
    fn alpha_converges_to_the_marking_fraction_from_below_too() {
        let mut tp = test_state(100, 50);
        let mut d = Dctcp::new(DctcpParams { alpha_on_init: 0, ..Default::default() });
        d.init(&mut tp);
        assert_eq!(d.alpha(), 0);
        // F = 1/2 over windows of 100 packets: ⌊50·64/100⌋ = 32 per window.
        for _ in 0..300 {
            window(&mut d, &mut tp, 100, 50);
        }
        // Fixed point of α = α − ⌊α/16⌋ + 32: α in [512, 528).
        assert!((512..528).contains(&d.alpha()), "α {}", d.alpha());
    }

    #[test]
    fn alpha_decays_to_zero_without_marks_via_min_not_zero() {
        let (mut d, mut tp) = dctcp();
        // α ← α − ⌊α/16⌋ until α < 16, then α − α = 0 in one window.
        let mut expect = vec![1024u32];
        while *expect.last().unwrap() >= 16 {
            let a = *expect.last().unwrap();
            expect.push(a - a / 16);
        }
        expect.push(0);
        for (n, &want) in expect.iter().enumerate().skip(1) {
            window(&mut d, &mut tp, 50, 0);
            assert_eq!(d.alpha(), want, "window {n}");
        }
        // The last non-zero value is 15 (not ~1024·(15/16)^n → 0 asymptotically).
        assert_eq!(expect[expect.len() - 2], 15);
        window(&mut d, &mut tp, 50, 0);
        assert_eq!(d.alpha(), 0);
    }

    #[test]
    fn alpha_updates_only_once_per_window() {
        let (mut d, mut tp) = dctcp();
        window(&mut d, &mut tp, 100, 100);
        let a = d.alpha();
        // ACKs inside the window (snd_una below the recorded snd_nxt) leave α alone.
        tp.snd_una += 10;
        tp.delivered += 10;
        tp.delivered_ce += 10;
        d.pkts_acked(&mut tp, &AckSample::default());
        assert_eq!(d.alpha(), a);
    }

    #[test]
    fn ssthresh_is_cwnd_times_one_minus_alpha_over_two() {
        let (mut d, tp) = dctcp();
        // α = 1: halve.
        assert_eq!(d.ssthresh(&test_state(100, 0)), 50);
        for (alpha, cwnd, want) in [(512, 100, 75), (256, 100, 88), (100, 1000, 952), (0, 100, 100), (1024, 3, 2), (20, 50, 50)] {
            d.alpha = alpha;
            let mut t = tp;
            t.cwnd = cwnd;
            // cwnd − ⌊cwnd·α/2048⌋ (Linux truncates the cut, not the result).
            assert_eq!(d.ssthresh(&t), want, "α {alpha}, cwnd {cwnd}");
            assert_eq!(want, (cwnd - cwnd * alpha / 2048).max(2));
        }
    }

    #[test]
    fn no_ce_no_reduction_and_reno_growth() {
        let (mut d, mut tp) = dctcp();
        // Without CE the sender never enters CWR, so only cong_avoid runs: +1 per window.
        for _ in 0..100 {
            d.cong_avoid(&mut tp, 1);
        }
        assert_eq!(tp.cwnd, 101);
        assert_eq!(tp.ssthresh, 50);
    }

    #[test]
    fn loss_halves_regardless_of_alpha() {
        let (mut d, mut tp) = dctcp();
        d.alpha = 64;
        tp.cwnd = 80;
        // The sender first takes the ECN-style ssthresh, then the state change overrides it.
        tp.ssthresh = d.ssthresh(&tp);
        assert_eq!(tp.ssthresh, 78);
        d.set_state(&mut tp, CaState::Recovery);
        tp.ca_state = CaState::Recovery;
        assert_eq!(tp.ssthresh, 40);
        // An RTO likewise.
        let (mut d, mut tp) = dctcp();
        d.alpha = 0;
        tp.cwnd = 30;
        tp.ssthresh = d.ssthresh(&tp);
        d.cwnd_event(&mut tp, CaEvent::Loss);
        assert_eq!(tp.ssthresh, 15);
        assert_eq!(d.undo_cwnd(&tp), 30);
    }

    #[test]
    fn without_ecn_it_is_reno() {
        let mut tp = test_state(100, 1000);
        tp.ecn = crate::packet::EcnMode::Off;
        let mut d = Dctcp::new(DctcpParams::default());
        d.init(&mut tp);
        assert_eq!(d.name(), "dctcp-reno");
        d.alpha = 0;
        assert_eq!(d.ssthresh(&tp), 50);
    }

    #[test]
    fn parses_module_parameters() {
        let toks: Vec<String> = "shift_g 5 alpha_on_init 0".split(' ').map(String::from).collect();
        let c = parse(&mut Params::new("dctcp", &toks)).unwrap();
        assert_eq!(c.name(), "dctcp");
        let toks: Vec<String> = "shift_g 11".split(' ').map(String::from).collect();
        assert!(parse(&mut Params::new("dctcp", &toks)).is_err());
        let toks: Vec<String> = "gain 4".split(' ').map(String::from).collect();
        assert!(parse(&mut Params::new("dctcp", &toks)).is_err());
        let spec = crate::cc::CcSpec::parse("dctcp alpha_on_init 512").unwrap();
        let mut cc = spec.config().build(crate::rng::Stream::new(1, "test"), Default::default());
        let mut tp = test_state(100, 1000);
        cc.init(&mut tp);
        assert_eq!(cc.ssthresh(&tp), 75);
    }
}
