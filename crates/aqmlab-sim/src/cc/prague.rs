//! TCP Prague as in the L4S team's 2020 kernels (`L4STeam/linux:net/ipv4/tcp_prague.c`,
//! MODULE_VERSION 0.6, the `cwnd_cnt` generation with RTT independence and the optional
//! classic-ECN-AQM detection; read in the copy at google/bbr@23cbf7e1, which is that file,
//! and cross-checked with the newer `frac_cwnd` generation at L4STeam/linux@02573a21).
//! See docs/algorithms/prague.md for the version notes and the audit list.
//!
//! Prague is a `.cong_control` algorithm: on every ACK it runs its own window update
//! (`prague_update_cwnd`), once per round its α update (`prague_update_alpha`), and sets the
//! pacing rate (`prague_update_pacing_rate`); the sender's PRR is not used and the end of
//! CWR/Recovery leaves cwnd alone (Linux `tcp_end_cwnd_reduction` returns early).
//!
//! - cwnd is tracked with a signed carry `cwnd_cnt` in 2^-20 packets; cwnd moves by at most
//!   one packet per ACK towards cwnd + carry (a decrement also sets ssthresh = cwnd).
//! - Additive increase on every ACK, in every state but a loss reduction: non-CE-marked ACKed
//!   packets × `ai_ack_increase`/cwnd (1 packet per window unscaled), so a window with a
//!   fraction p of marks grows by (1 − p).
//! - α: EWMA of the CE fraction with g = 1/16 kept upscaled by 16 in 2^-20 units, updated when
//!   a round (snd_una past the snd_nxt of the previous update) has elapsed, and — once RTT
//!   independent — at least `rtt_target` after the previous update; α stays at its initial 1.0
//!   until the first CE is seen.
//! - CE echo: the sender's CWR (at most once per window) calls `prague_enter_cwr`, which takes
//!   α/2 · cwnd off the carry (rounded half up); once RTT independent, at most once per
//!   `rtt_target`. `ssthresh` returns ssthresh unchanged, so the generic reduction does nothing.
//! - Loss (entering Recovery, or an RTO): half of cwnd (and of the carry) off the carry, no
//!   growth until the state is Open again.
//! - RTT independence (`rtt_scaling`, default 1 = RATE; `rtt_target` 25 ms; after
//!   `rtt_transition` = 500 rounds out of slow start): `ai_ack_increase` = (srtt/target)² for
//!   srtt < target, srtt and target in 128 µs units as in the kernel.
//! - Pacing always (SK_PACING_NEEDED): rate = MTU · max(cwnd, in flight) / srtt, doubled while
//!   cwnd < ssthresh/2. The GSO burst limit is rate × 2^-`burst_shift` s (≈ 250 µs); without
//!   TSO/GSO (as in the studies and here) every departure is one packet and the pacing is per
//!   packet, so the limit only shows as [`Prague::max_tso_burst`].
//! - Classic-ECN-AQM detection (`prague_ecn_fallback`: 0 off — the default of the versions read,
//!   1 detect and fall back, 2 detect only): see [`Prague::classic_ecn_detection`].
//! - Without ECN the connection runs Reno (`prague_reno`) unpaced.

use super::{acked_for_avoidance, cong_avoid_ai, slow_start, AckSample, CaEvent, CaState, CcConfig, CongestionControl, RateSample, TcpCcState};
use crate::params::Params;
use crate::time::Time;
use std::sync::Arc;

const MIN_CWND: u32 = 2;
const ALPHA_BITS: u32 = 20;
/// α = 1.0.
pub const MAX_ALPHA: u64 = 1 << ALPHA_BITS;
const CWND_UNIT: u32 = 20;
/// One packet of `cwnd_cnt`.
pub const ONE_CWND: i64 = 1 << CWND_UNIT;
const SHIFT_G: u32 = 4;
/// RTTs in the RTT-independence code are in units of 2^7 µs.
const RTT_UNIT: u32 = 7;
/// Largest RTT scaled. The kernel compares this µs constant with an RTT in 128 µs units
/// (so the cap is really 12.8 s); modelled as written.
const MAX_SCALED_RTT: u64 = 100_000;

// Classic-ECN detection constants (fixed point as in the kernel).
const MAX_SRTT_BITS: u32 = 18;
const MAX_MDEV_BITS: u32 = MAX_SRTT_BITS + 1;
/// ≈ 2^19.5: the initial geometric carry of the mdev log.
const INIT_MDEV_CARRY: u64 = 741_455;
const INIT_ADJ_US: u64 = 1 << (MAX_MDEV_BITS - 1);
/// Weights 1/2^V and 1/2^D of the two terms.
const V: u32 = 1;
const D: u32 = 1;
/// Score (in α units) up to which the flow behaves as pure L4S: 8.0.
pub const L_STICKY: u64 = 16 << (ALPHA_BITS - V);
/// Score at which the fallback is complete: 9.0.
pub const CLASSIC_ECN: u64 = L_STICKY + MAX_ALPHA;
/// Upper clamp of the score: 17.0.
pub const C_STICKY: u64 = CLASSIC_ECN + L_STICKY;
/// V·log2(V0) with V0 ≈ 750 µs, and D·log2(D0) with D0 ≈ 2 ms, in α units.
const V0_LG: u64 = 10_014_683 >> V;
const D0_LG: u64 = 11_498_458 >> D;

/// `prague_rtt_scaling` values.
pub const RTT_CONTROL_NONE: u8 = 0;
pub const RTT_CONTROL_RATE: u8 = 1;
pub const RTT_CONTROL_SCALABLE: u8 = 2;
pub const RTT_CONTROL_ADDITIVE: u8 = 3;

/// Module parameters (`prague_*`), with the defaults of the versions read.
#[derive(Clone, Copy, Debug)]
pub struct PragueParams {
    /// `prague_rtt_scaling`: 0 none, 1 rate (default), 2 scalable, 3 additive.
    pub rtt_scaling: u8,
    /// `prague_rtt_target` (25 ms); zero disables RTT independence.
    pub rtt_target: Time,
    /// `prague_rtt_transition`: rounds after slow start before RTT independence (500).
    pub rtt_transition: u32,
    /// `prague_ecn_fallback`: 0 none (default), 1 detection and fallback, 2 detection only.
    pub ecn_fallback: u8,
    /// `prague_burst_shift`: the GSO burst is at most 2^-shift s of the pacing rate (12).
    pub burst_shift: u32,
}

impl Default for PragueParams {
    fn default() -> Self {
        PragueParams {
            rtt_scaling: RTT_CONTROL_RATE,
            rtt_target: Time::from_millis(25),
            rtt_transition: 500,
            ecn_fallback: 0,
            burst_shift: 12,
        }
    }
}

impl CcConfig for PragueParams {
    fn name(&self) -> &'static str {
        "prague"
    }
    fn build(&self, _rng: crate::rng::Stream, _stack: crate::profile::Stack) -> Box<dyn CongestionControl> {
        Box::new(Prague::new(*self))
    }
}

/// `prague rtt_target 25ms rtt_scaling 1 rtt_transition 500 classic_ecn_detection 1
/// burst_shift 12` (Linux `prague_*` module parameters; `ecn_fallback` is a synonym of
/// `classic_ecn_detection`).
pub fn parse(p: &mut Params) -> Result<Arc<dyn CcConfig>, String> {
    let mut c = PragueParams::default();
    while let Some(k) = p.next_key() {
        match k {
            "rtt_scaling" => c.rtt_scaling = p.uint(k, 0..=3)? as u8,
            "rtt_target" => c.rtt_target = p.time(k)?,
            "rtt_transition" => c.rtt_transition = p.uint(k, 0..=u32::MAX as u64)? as u32,
            "classic_ecn_detection" | "ecn_fallback" => c.ecn_fallback = p.uint(k, 0..=2)? as u8,
            "burst_shift" => c.burst_shift = p.uint(k, 0..=30)? as u32,
            _ => return Err(p.unknown(k, "rtt_scaling, rtt_target, rtt_transition, classic_ecn_detection (ecn_fallback), burst_shift")),
        }
    }
    if c.rtt_target.as_micros() >> RTT_UNIT > u32::MAX as u64 {
        return Err(p.invalid("rtt_target too large"));
    }
    Ok(Arc::new(c))
}

/// Floor of log2 (x > 0), Linux `ilog2`.
fn ilog2(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

/// Linux `struct prague`, plus the `tcp_sock` fields the L4S kernel added for the detection
/// (`g_srtt_shift`, `srtt_pace_us`, `classic_ecn`, ...).
#[derive(Clone, Debug)]
pub struct Prague {
    params: PragueParams,
    reno: bool,
    cwr_stamp_us: u64,
    alpha_stamp_us: u64,
    /// α · 16 in 2^-20 units.
    upscaled_alpha: u64,
    /// Increase per non-CE ACKed packet, before the division by cwnd, in 2^-20 packets.
    ai_ack_increase: u64,
    /// Fractional carry of cwnd, 2^-20 packets (`cwnd_cnt`).
    cwnd_cnt: i64,
    loss_cwnd_cnt: i64,
    loss_cwnd: u32,
    max_tso_burst: u32,
    old_delivered: u64,
    old_delivered_ce: u64,
    next_seq: u32,
    /// Rounds since the end of slow start (`round`).
    round: u32,
    rtt_transition_delay: u32,
    /// Target RTT in 128 µs units.
    rtt_target: u64,
    saw_ce: bool,
    rtt_indep: u8,
    in_loss: bool,
    pacing_rate: f64,
    // Classic-ECN detection state.
    g_srtt_shift: u32,
    g_mdev_shift: u32,
    srtt_pace: i64,
    mdev_pace: i64,
    rest_mdev: u64,
    rest_depth: u64,
    classic_ecn: u64,
}

impl Prague {
    pub fn new(params: PragueParams) -> Self {
        Prague {
            params,
            reno: false,
            cwr_stamp_us: 0,
            alpha_stamp_us: 0,
            upscaled_alpha: MAX_ALPHA << SHIFT_G,
            ai_ack_increase: ONE_CWND as u64,
            cwnd_cnt: 0,
            loss_cwnd_cnt: 0,
            loss_cwnd: 0,
            max_tso_burst: 1,
            old_delivered: 0,
            old_delivered_ce: 0,
            next_seq: 0,
            round: 0,
            rtt_transition_delay: params.rtt_transition,
            rtt_target: params.rtt_target.as_micros() >> RTT_UNIT,
            saw_ce: false,
            rtt_indep: RTT_CONTROL_NONE,
            in_loss: false,
            pacing_rate: 0.0,
            g_srtt_shift: MAX_SRTT_BITS,
            g_mdev_shift: MAX_MDEV_BITS,
            srtt_pace: 0,
            mdev_pace: 0,
            rest_mdev: INIT_MDEV_CARRY,
            rest_depth: INIT_MDEV_CARRY >> 1,
            classic_ecn: 0,
        }
    }

    /// α in 2^-20 units (what `ss` shows as prague_alpha).
    pub fn alpha(&self) -> u64 {
        self.upscaled_alpha >> SHIFT_G
    }
    /// The fractional part of cwnd still to apply, in 2^-20 packets.
    pub fn cwnd_carry(&self) -> i64 {
        self.cwnd_cnt
    }
    /// Current additive increase per window, in 2^-20 packets.
    pub fn ai_ack_increase(&self) -> u64 {
        self.ai_ack_increase
    }
    /// Rounds counted since slow start ended.
    pub fn round(&self) -> u32 {
        self.round
    }
    /// The classic-ECN score (8.0 = L_STICKY, 9.0 = full fallback) in α units.
    pub fn classic_ecn(&self) -> u64 {
        self.classic_ecn
    }
    /// The GSO burst limit in packets (`max_tso_burst`).
    pub fn max_tso_burst(&self) -> u32 {
        self.max_tso_burst
    }
    /// Whether RTT independence is in force (`prague_is_rtt_indep`).
    pub fn is_rtt_indep(&self, tp: &TcpCcState) -> bool {
        self.rtt_indep != RTT_CONTROL_NONE && !tp.in_slow_start() && self.round >= self.rtt_transition_delay
    }

    fn now_us(tp: &TcpCcState) -> u64 {
        tp.now.0 / 1000
    }
    fn srtt_us(tp: &TcpCcState) -> u64 {
        tp.srtt.0 / 1000
    }

    /// `prague_target_rtt`, in 128 µs units: the additive mode targets rtt_target + srtt.
    fn target_rtt(&self, tp: &TcpCcState) -> u64 {
        if self.rtt_indep == RTT_CONTROL_ADDITIVE {
            self.rtt_target + (Self::srtt_us(tp) >> RTT_UNIT)
        } else {
            self.rtt_target
        }
    }

    /// `prague_should_update_ewma`: a round has elapsed and, once RTT independent, also the
    /// target RTT since the last update (`prague_target_rtt_elapsed`).
    fn should_update_ewma(&self, tp: &TcpCcState) -> bool {
        tp.snd_una >= self.next_seq
            && (self.rtt_indep == RTT_CONTROL_NONE
                || !self.is_rtt_indep(tp)
                || (self.target_rtt(tp) << RTT_UNIT) <= Self::now_us(tp).saturating_sub(self.alpha_stamp_us))
    }

    /// `prague_ai_ack_increase` with the per-mode scaling functions.
    fn compute_ai_ack_increase(&mut self, tp: &TcpCcState) {
        let one = ONE_CWND as u64;
        let rtt = Self::srtt_us(tp) >> RTT_UNIT;
        self.ai_ack_increase = if self.rtt_indep == RTT_CONTROL_NONE
            || self.round < self.rtt_transition_delay
            || rtt == 0
            || rtt > MAX_SCALED_RTT
        {
            one
        } else {
            match self.rtt_indep {
                RTT_CONTROL_SCALABLE => {
                    // R0 ≈ 16 ms, R1 ≈ 1.5 ms: at least 1/8 packet per R0, scaled by rtt/R0.
                    let (r0, r1) = ((1u64 << 14) >> RTT_UNIT, ((1u64 << 10) + (1 << 9)) >> RTT_UNIT);
                    let inc = ((one >> 3) * r0 + one * rtt.saturating_sub(r1).min(r0)) * rtt;
                    let div = r0 * r0;
                    (inc + div / 2) / div
                }
                // RATE and ADDITIVE (`prague_rate_scaled_ai_ack_increase`): (rtt/target)².
                _ => {
                    let target = self.target_rtt(tp);
                    if rtt >= target {
                        one
                    } else {
                        let div = target * target;
                        ((rtt << CWND_UNIT) * rtt + div / 2) / div
                    }
                }
            }
        };
    }

    /// `prague_update_pacing_rate`: MTU · max(cwnd, in flight) / srtt, ×2 while
    /// cwnd < ssthresh/2; the GSO burst is bounded to 2^-burst_shift s at that rate.
    fn update_pacing_rate(&mut self, tp: &TcpCcState) {
        let mtu = (tp.mss + crate::packet::TCP_IP_HEADER_BYTES) as f64;
        let factor = if tp.cwnd < tp.ssthresh / 2 { 2.0 } else { 1.0 };
        let window = tp.cwnd.max(tp.packets_in_flight()) as f64;
        let srtt = tp.srtt.as_secs_f64();
        if srtt <= 0.0 {
            return;
        }
        let rate = mtu * factor * window / srtt;
        self.pacing_rate = rate;
        self.max_tso_burst = (((rate / mtu) as u64) >> self.params.burst_shift).max(1) as u32;
    }

    /// `prague_new_round`.
    fn new_round(&mut self, tp: &TcpCcState) {
        self.next_seq = tp.snd_nxt;
        self.old_delivered = tp.delivered;
        self.old_delivered_ce = tp.delivered_ce;
        if !tp.in_slow_start() {
            self.round = self.round.wrapping_add(1);
            if self.round == 0 {
                self.round = self.rtt_transition_delay;
            }
        }
        self.compute_ai_ack_increase(tp);
    }

    /// `prague_update_alpha`: upscaled α ← upscaled α − upscaled α/16 + F (F in 2^-20).
    fn update_alpha(&mut self, tp: &TcpCcState) {
        if self.saw_ce {
            if self.params.ecn_fallback > 0 {
                self.classic_ecn_detection(tp);
            }
            let ce = tp.delivered_ce - self.old_delivered_ce;
            let f = if ce > 0 { (ce << ALPHA_BITS) / (tp.delivered - self.old_delivered).max(1) } else { 0 };
            let a = self.upscaled_alpha - (self.upscaled_alpha >> SHIFT_G) + f;
            self.alpha_stamp_us = Self::now_us(tp);
            self.upscaled_alpha = a.min(MAX_ALPHA << SHIFT_G);
        }
        self.new_round(tp);
    }

    /// `prague_update_cwnd`.
    fn update_cwnd(&mut self, tp: &mut TcpCcState, rs: &RateSample) {
        let mut acked = rs.acked_sacked as i64;
        if rs.ece_delta > 0 {
            self.saw_ce = true;
            acked -= rs.ece_delta as i64;
        }
        if acked > 0 && !self.in_loss && tp.is_cwnd_limited {
            if tp.in_slow_start() {
                acked = slow_start(tp, acked as u32) as i64;
                if acked == 0 {
                    self.compute_ai_ack_increase(tp);
                    return;
                }
            }
            let cwnd = tp.cwnd.max(1) as u64;
            let inc = (acked as u64 * self.ai_ack_increase + cwnd / 2) / cwnd;
            self.cwnd_cnt += inc.max(acked as u64) as i64;
        }
        // One packet per ACK at most, either way.
        if self.cwnd_cnt <= -ONE_CWND {
            self.cwnd_cnt += ONE_CWND;
            tp.cwnd -= 1;
            if tp.cwnd < MIN_CWND {
                tp.cwnd = MIN_CWND;
                self.cwnd_cnt = 0;
            }
            tp.ssthresh = tp.cwnd;
            self.compute_ai_ack_increase(tp);
        } else if self.cwnd_cnt >= ONE_CWND {
            self.cwnd_cnt -= ONE_CWND;
            tp.cwnd = (tp.cwnd + 1).min(tp.cwnd_clamp);
            self.compute_ai_ack_increase(tp);
        }
    }

    /// `prague_enter_loss`: take half of cwnd (and of the carry) off the carry.
    fn enter_loss(&mut self, tp: &TcpCcState) {
        self.loss_cwnd = tp.cwnd;
        self.loss_cwnd_cnt = self.cwnd_cnt;
        self.cwnd_cnt -= ((tp.cwnd as i64) << (CWND_UNIT - 1)) + (self.cwnd_cnt >> 1);
        self.in_loss = true;
        self.compute_ai_ack_increase(tp);
    }

    /// `prague_enter_cwr`: take α/2 · cwnd off the carry (rounded half up); once RTT
    /// independent, at most once per target RTT.
    fn enter_cwr(&mut self, tp: &TcpCcState) {
        let now = Self::now_us(tp);
        if self.is_rtt_indep(tp) && (self.target_rtt(tp) << RTT_UNIT) > now.saturating_sub(self.cwr_stamp_us) {
            return;
        }
        self.cwr_stamp_us = now;
        let mut alpha = self.alpha();
        if self.params.ecn_fallback == 1 && self.classic_ecn > L_STICKY {
            // `prague_classic_ecn_fallback`: α ≥ 0.625 · (score − 8), up to 0.625.
            let c = self.classic_ecn.min(CLASSIC_ECN) - L_STICKY;
            alpha = alpha.max((c >> 1) + (c >> 3));
        }
        let reduction = (alpha * ((tp.cwnd as u64) << CWND_UNIT) + MAX_ALPHA) >> (ALPHA_BITS + 1);
        self.cwnd_cnt -= reduction as i64;
    }

    /// `prague_update_rtt_scaling` (from `.ssthresh`): the gains of the detection's slow
    /// RTT estimator follow log2(ssthresh) (g = ⌊lg⌋ + ⌊lg⌋/2 + 1, at most 18).
    fn update_rtt_scaling(&mut self, ssthresh: u32) {
        let lg = ilog2(ssthresh.max(1) as u64);
        let g = (lg + (lg >> 1) + 1).min(MAX_SRTT_BITS);
        let old = self.g_srtt_shift;
        self.g_srtt_shift = g;
        self.g_mdev_shift = g + 1;
        if g > old {
            let d = g - old;
            self.srtt_pace <<= d;
            self.mdev_pace <<= d;
            self.rest_depth <<= d;
            self.rest_mdev <<= d;
        } else if g < old {
            let d = old - g;
            self.srtt_pace >>= d;
            self.mdev_pace >>= d;
            self.rest_depth >>= d;
            self.rest_mdev >>= d;
        }
    }

    /// `prague_rtt_estimator`: a slow EWMA of the per-ACK RTT (gain 2^-g_srtt_shift) and of
    /// its mean absolute deviation (gain 2^-g_mdev_shift), kept upscaled.
    fn rtt_estimator(&mut self, m_us: i64) {
        if self.srtt_pace != 0 {
            let mut m = m_us - (self.srtt_pace >> self.g_srtt_shift);
            self.srtt_pace += m;
            m = m.abs() - (self.mdev_pace >> self.g_mdev_shift);
            self.mdev_pace += m;
        } else {
            self.srtt_pace = m_us << self.g_srtt_shift;
            self.mdev_pace = 1 << self.g_mdev_shift;
        }
        self.srtt_pace = self.srtt_pace.max(1);
    }

    /// `prague_classic_ecn_detection`, once per α update: the score moves by
    /// V·(log2(mdev) − log2(750 µs)) and, when the queue (srtt − min_rtt) exceeds 2 ms, by
    /// D·log2(depth/2 ms); V = D = 1/2; clamped to [0, C_STICKY]. The logs are integer logs
    /// with a geometric carry (the residue multiplies into the next round), so their average
    /// is the real log2.
    pub fn classic_ecn_detection(&mut self, tp: &TcpCcState) {
        let min_rtt_us = if tp.min_rtt == Time::MAX { u64::MAX } else { tp.min_rtt.0 / 1000 };
        let gs = self.g_srtt_shift;
        let gm = self.g_mdev_shift;
        let srtt_us = (self.srtt_pace >> gs) as u64;
        let mdev_us = (self.mdev_pace.max(0) >> gm) as u64;
        if srtt_us == 0 || min_rtt_us == u64::MAX {
            return;
        }
        let adj = INIT_ADJ_US >> (MAX_MDEV_BITS - gm);
        let mut score = self.classic_ecn as i64;
        let x = mdev_us * self.rest_mdev + adj;
        let lg = ilog2(x).max(gm) - gm;
        self.rest_mdev = x >> lg;
        score += ((lg as i64) << (ALPHA_BITS - V)) - V0_LG as i64;
        if srtt_us > min_rtt_us {
            let y = (srtt_us - min_rtt_us) * self.rest_depth + (adj >> 1);
            let lg = ilog2(y).max(gs) - gs;
            self.rest_depth = y >> lg;
            let lg = (lg as u64) << (ALPHA_BITS - D);
            if lg > D0_LG {
                score += (lg - D0_LG) as i64;
            }
        }
        self.classic_ecn = score.clamp(0, C_STICKY as i64) as u64;
    }
}

impl CongestionControl for Prague {
    fn name(&self) -> &'static str {
        if self.reno {
            "prague-reno"
        } else {
            "prague"
        }
    }

    /// `prague_init`: without ECN, Reno (`prague_reno`) and no forced pacing.
    fn init(&mut self, tp: &mut TcpCcState) {
        if !tp.ecn.is_on() {
            self.reno = true;
            return;
        }
        if tp.srtt > Time::ZERO {
            self.update_pacing_rate(tp);
        }
        let p = self.params;
        *self = Prague { pacing_rate: self.pacing_rate, max_tso_burst: 1, ..Prague::new(p) };
        self.alpha_stamp_us = Self::now_us(tp);
        self.rtt_indep = if self.rtt_target != 0 { p.rtt_scaling } else { RTT_CONTROL_NONE };
        self.saw_ce = tp.delivered_ce > 0;
        let srtt_us = Self::srtt_us(tp) as i64;
        self.srtt_pace = srtt_us << self.g_srtt_shift;
        self.mdev_pace = 1 << self.g_mdev_shift;
        self.new_round(tp);
    }

    /// `prague_ssthresh`: ssthresh unchanged (the reduction is Prague's own, on the carry).
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        if self.reno {
            return (tp.cwnd >> 1).max(2);
        }
        self.update_rtt_scaling(tp.ssthresh);
        tp.ssthresh
    }

    /// Only the Reno fallback grows here; Prague itself uses `cong_control`.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        let Some(acked) = acked_for_avoidance(tp, acked) else { return };
        let w = tp.cwnd;
        cong_avoid_ai(tp, w, acked);
    }

    /// `prague_pkts_acked`: feed the detection's RTT estimator.
    fn pkts_acked(&mut self, _tp: &mut TcpCcState, sample: &AckSample) {
        if self.reno {
            return;
        }
        if let Some(r) = sample.rtt {
            self.rtt_estimator((r.0 / 1000) as i64);
        }
    }

    /// `prague_state`.
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        if self.reno || new == tp.ca_state {
            return;
        }
        match new {
            CaState::Recovery => self.enter_loss(tp),
            CaState::Cwr => self.enter_cwr(tp),
            CaState::Open => self.in_loss = false,
            _ => {}
        }
    }

    /// `prague_cwnd_event`: an RTO is a loss.
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        if !self.reno && ev == CaEvent::Loss {
            self.enter_loss(tp);
        }
    }

    /// `prague_cong_control`.
    fn cong_control(&mut self, tp: &mut TcpCcState, rs: &RateSample) -> bool {
        if self.reno {
            return false;
        }
        self.update_cwnd(tp, rs);
        if self.should_update_ewma(tp) {
            self.update_alpha(tp);
        }
        self.update_pacing_rate(tp);
        true
    }

    fn has_cong_control(&self) -> bool {
        !self.reno
    }

    /// `prague_cwnd_undo` (as written: the carry gains its progress since the loss again).
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        if self.reno {
            return tp.cwnd.max(tp.ssthresh.saturating_mul(2));
        }
        self.cwnd_cnt += self.cwnd_cnt - self.loss_cwnd_cnt;
        self.loss_cwnd.max(tp.cwnd)
    }

    fn pacing_rate(&self, _tp: &TcpCcState) -> Option<f64> {
        (!self.reno && self.pacing_rate > 0.0).then_some(self.pacing_rate)
    }

    fn needs_pacing(&self) -> bool {
        !self.reno
    }

    /// Generation D `prague_tso_segs` (`.tso_segs`, google/bbr@23cbf7e1
    /// `net/ipv4/tcp_prague.c`): max(`max_tso_burst`, `tcp_min_tso_segs` = 2), with
    /// `prague_max_tso_segs` = 0 (no further cap). It replaces `tcp_tso_autosize` in that
    /// tree's `tcp_tso_segs`; `max_tso_burst` = 2^-`burst_shift` s of the pacing rate in
    /// packets (≈ 244 µs) is a quarter of autosize's ≈ 1 ms, so the minimum the sender takes
    /// equals the replacement. The Reno fallback (`prague_reno`) has no hook. (The 2020
    /// L4STeam code's `.max_tso_segs` returned `max_tso_burst` without the floor of 2.)
    fn max_tso_segs(&self, _tp: &TcpCcState) -> Option<u32> {
        (!self.reno).then(|| self.max_tso_burst.max(2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_state;

    const MS: u64 = 1_000_000;

    /// A Prague flow out of slow start (ssthresh = cwnd), srtt `rtt_ms`, α = 1 and CE seen.
    fn prague(params: PragueParams, cwnd: u32, rtt_ms: u64) -> (Prague, TcpCcState) {
        let mut tp = test_state(cwnd, u32::MAX);
        tp.srtt = Time(rtt_ms * MS);
        tp.min_rtt = tp.srtt;
        let mut p = Prague::new(params);
        p.init(&mut tp);
        tp.ssthresh = cwnd;
        (p, tp)
    }

    /// One ACK of `acked` packets of which `ce` were CE-marked, with a window of data kept
    /// in flight (snd_nxt = snd_una + cwnd).
    fn ack(p: &mut Prague, tp: &mut TcpCcState, acked: u32, ce: u32) {
        tp.snd_una += acked;
        tp.snd_nxt = tp.snd_una + tp.cwnd;
        deliver(p, tp, acked, ce);
    }

    /// The ACK that completes a round: everything sent so far is acknowledged.
    fn round_ack(p: &mut Prague, tp: &mut TcpCcState, acked: u32, ce: u32) {
        tp.snd_una = tp.snd_nxt;
        tp.snd_nxt = tp.snd_una + tp.cwnd;
        deliver(p, tp, acked, ce);
    }

    fn deliver(p: &mut Prague, tp: &mut TcpCcState, acked: u32, ce: u32) {
        tp.delivered += acked as u64;
        tp.delivered_ce += ce as u64;
        let rs = RateSample { acked_sacked: acked, ece_delta: ce, ..Default::default() };
        assert!(p.cong_control(tp, &rs));
    }

    /// cwnd plus carry, in packets.
    fn window(p: &Prague, tp: &TcpCcState) -> f64 {
        tp.cwnd as f64 + p.cwnd_carry() as f64 / ONE_CWND as f64
    }

    #[test]
    fn alpha_is_an_ewma_of_the_ce_fraction_per_round_after_the_first_mark() {
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
        assert_eq!(p.alpha(), MAX_ALPHA);
        // Rounds without any CE: α is not updated before the first mark (saw_ce).
        for _ in 0..10 {
            round_ack(&mut p, &mut tp, 100, 0);
        }
        assert_eq!(p.alpha(), MAX_ALPHA);
        // F = 1/8 every round (rounds of 96 packets with 12 marks). The real closed form is
        // α_n = F + (1 − F)(15/16)^n; the upscaled fixed point tracks it to a few 2^-20.
        let f = 0.125;
        let mut n = 0;
        for _ in 0..120 {
            round_ack(&mut p, &mut tp, 96, 12);
            n += 1;
            let closed = f + (1.0 - f) * (15.0f64 / 16.0).powi(n);
            let got = p.alpha() as f64 / MAX_ALPHA as f64;
            assert!((got - closed).abs() < 1e-5, "round {n}: α {got} vs {closed}");
        }
    }

    #[test]
    fn alpha_updates_once_per_round() {
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
        round_ack(&mut p, &mut tp, 100, 50);
        let a = p.alpha();
        assert!(a < MAX_ALPHA);
        // The update above started a new round ending at snd_nxt; ACKs inside it leave α.
        for _ in 0..19 {
            ack(&mut p, &mut tp, 5, 5);
            assert_eq!(p.alpha(), a);
        }
        // The ACK that passes the round's end updates it.
        ack(&mut p, &mut tp, 10, 10);
        assert!(p.alpha() > a);
    }

    #[test]
    fn cwr_takes_alpha_half_of_cwnd_once_and_cwnd_steps_down_one_per_ack() {
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
        // α = 1 (initial): the carry loses cwnd/2 = 50 packets.
        tp.ca_state = CaState::Open;
        p.set_state(&mut tp, CaState::Cwr);
        tp.ca_state = CaState::Cwr;
        assert_eq!(p.cwnd_carry(), -50 * ONE_CWND);
        // ACKs of CE-marked packets do not grow; each one takes one packet off cwnd.
        for i in 1..=50 {
            ack(&mut p, &mut tp, 1, 1);
            assert_eq!(tp.cwnd, 100 - i);
            assert_eq!(tp.ssthresh, tp.cwnd, "a decrement sets ssthresh = cwnd");
        }
        ack(&mut p, &mut tp, 1, 1);
        assert_eq!(tp.cwnd, 50);
        // α = 0.25 exactly: cwnd 80 loses 80 · 0.125 = 10 packets.
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 80, 20);
        p.upscaled_alpha = (MAX_ALPHA / 4) << SHIFT_G;
        p.set_state(&mut tp, CaState::Cwr);
        assert_eq!(p.cwnd_carry(), -10 * ONE_CWND);
        // Rounded half up: α = 2^-20, cwnd 1 → 2^-21 packet → rounds to 1 unit.
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 1, 20);
        p.upscaled_alpha = 1 << SHIFT_G;
        p.set_state(&mut tp, CaState::Cwr);
        assert_eq!(p.cwnd_carry(), -1);
        // No CE, no CWR: a whole window of unmarked ACKs only grows.
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
        for _ in 0..100 {
            ack(&mut p, &mut tp, 1, 0);
        }
        assert!(tp.cwnd == 101 && p.cwnd_carry().abs() < 100, "cwnd {} carry {}", tp.cwnd, p.cwnd_carry());
    }

    #[test]
    fn additive_increase_counts_only_unmarked_packets() {
        // A window of 100 ACKed packets of which 30 were marked: +0.7 packet.
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
        for i in 0..100 {
            ack(&mut p, &mut tp, 1, (i % 10 < 3) as u32);
        }
        let grown = window(&p, &tp) - 100.0;
        assert!((grown - 0.7).abs() < 1e-4, "grew {grown}");
        // Growth continues during CWR (no PRR), but not in a loss reduction.
        let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
        p.set_state(&mut tp, CaState::Recovery);
        tp.ca_state = CaState::Recovery;
        let before = window(&p, &tp);
        for _ in 0..100 {
            ack(&mut p, &mut tp, 1, 0);
        }
        assert!((window(&p, &tp) - before).abs() < 1e-9);
        p.set_state(&mut tp, CaState::Open);
        tp.ca_state = CaState::Open;
        for _ in 0..50 {
            ack(&mut p, &mut tp, 1, 0);
        }
        assert!(window(&p, &tp) > before + 0.9);
    }

    #[test]
    fn loss_halves_cwnd() {
        let (mut p, mut tp) = prague(PragueParams::default(), 120, 20);
        p.set_state(&mut tp, CaState::Recovery);
        tp.ca_state = CaState::Recovery;
        assert_eq!(p.cwnd_carry(), -60 * ONE_CWND);
        for _ in 0..80 {
            ack(&mut p, &mut tp, 1, 0);
        }
        assert_eq!(tp.cwnd, 60);
        assert_eq!(tp.ssthresh, 60);
        // An RTO (CA_EVENT_LOSS before the sender sets cwnd = in flight + 1) likewise, and
        // cwnd is floored at 2.
        let (mut p, mut tp) = prague(PragueParams::default(), 40, 20);
        p.cwnd_event(&mut tp, CaEvent::Loss);
        tp.cwnd = 1;
        ack(&mut p, &mut tp, 1, 0);
        assert_eq!(tp.cwnd, 2);
        assert_eq!(p.cwnd_carry(), 0);
    }

    /// Rate-mode RTT independence: per window, the increase is (srtt/target)² packets for
    /// srtt < target, 1 otherwise — so cwnd/srtt grows by 1/target² packets/s² at any RTT
    /// below the target: the rate growth of a 25 ms flow.
    #[test]
    fn rtt_scaling_closed_form_for_5_25_and_100_ms() {
        let cases = [(5u64, 0.04), (25, 1.0), (100, 1.0)];
        for (rtt_ms, per_rtt) in cases {
            for scaling in [true, false] {
                let params = PragueParams { rtt_scaling: if scaling { RTT_CONTROL_RATE } else { 0 }, ..Default::default() };
                let (mut p, mut tp) = prague(params, 200, rtt_ms);
                // Before the transition (500 rounds out of slow start) growth is unscaled.
                assert_eq!(p.ai_ack_increase(), ONE_CWND as u64);
                for _ in 0..500 {
                    round_ack(&mut p, &mut tp, 1, 0);
                }
                tp.cwnd = 200;
                p.cwnd_cnt = 0;
                assert!(p.round() >= 500);
                let want = if scaling { per_rtt } else { 1.0 };
                let ai = p.ai_ack_increase() as f64 / ONE_CWND as f64;
                // srtt and target in 128 µs units: 5 ms = 39, 25 ms = 195 (39/195 = 0.2).
                assert!((ai - want).abs() < 1e-6, "{rtt_ms} ms scaling {scaling}: {ai} vs {want}");
                assert_eq!(p.is_rtt_indep(&tp), scaling);
                // One window of unmarked ACKs.
                for _ in 0..200 {
                    ack(&mut p, &mut tp, 1, 0);
                }
                let grown = window(&p, &tp) - 200.0;
                assert!((grown - want).abs() < 2e-4, "{rtt_ms} ms scaling {scaling}: grew {grown} per RTT");
                if scaling {
                    // Rate acceleration (packets/s per s) = growth per RTT / rtt².
                    let accel = want / (rtt_ms as f64 / 1e3).powi(2);
                    let expect = if rtt_ms < 25 { 1.0 / 0.025f64.powi(2) } else { 1.0 / (rtt_ms as f64 / 1e3).powi(2) };
                    assert!((accel - expect).abs() / expect < 1e-9);
                }
            }
        }
    }

    #[test]
    fn rtt_independent_flows_reduce_and_update_alpha_at_most_once_per_target() {
        let (mut p, mut tp) = prague(PragueParams::default(), 100, 5);
        p.round = 500;
        p.saw_ce = true;
        tp.now = Time::from_secs(1);
        tp.snd_una = tp.snd_nxt;
        assert!(p.is_rtt_indep(&tp));
        p.set_state(&mut tp, CaState::Cwr);
        let c = p.cwnd_carry();
        assert!(c < 0);
        // 20 ms later (< 25 ms target): a second CWR entry is ignored.
        tp.now = Time::from_millis(1020);
        p.set_state(&mut tp, CaState::Cwr);
        assert_eq!(p.cwnd_carry(), c);
        // 25 ms (195 · 128 µs = 24.96 ms) after the first, it applies.
        tp.now = Time::from_millis(1025);
        p.set_state(&mut tp, CaState::Cwr);
        assert!(p.cwnd_carry() < c);
        // α: a round has elapsed but not the target since the last update.
        p.alpha_stamp_us = 1_025_000;
        tp.now = Time::from_millis(1030);
        assert!(tp.snd_una >= p.next_seq);
        assert!(!p.should_update_ewma(&tp));
        tp.now = Time::from_millis(1050);
        assert!(p.should_update_ewma(&tp));
    }

    #[test]
    fn pacing_is_mtu_times_window_over_srtt_doubled_in_slow_start() {
        let mut tp = test_state(100, u32::MAX);
        tp.srtt = Time(20 * MS);
        let mut p = Prague::new(PragueParams::default());
        p.init(&mut tp);
        assert!(p.needs_pacing() && p.has_cong_control());
        // Slow start (cwnd < ssthresh/2): 2 · 1500 B · 100 / 20 ms.
        assert!((p.pacing_rate(&tp).unwrap() - 2.0 * 1500.0 * 100.0 / 0.02).abs() < 1e-6);
        tp.ssthresh = 150;
        tp.packets_out = 120;
        ack(&mut p, &mut tp, 0, 0);
        assert!((p.pacing_rate(&tp).unwrap() - 1500.0 * 120.0 / 0.02).abs() < 1e-6);
        // 7.5 MB/s = 5000 packets/s: a 250 µs burst is 1.2 packets -> 1.
        assert_eq!(p.max_tso_burst(), 1);
        tp.cwnd = 2000;
        tp.srtt = Time(MS);
        ack(&mut p, &mut tp, 0, 0);
        // 2000 packets/ms = 2e6/s; >> 12 = 488 packets.
        assert_eq!(p.max_tso_burst(), 488);
    }

    #[test]
    fn classic_ecn_detection_scores_rtt_variation_and_queue_depth() {
        // Steady 20 ms RTT: mdev -> 0, the score stays at 0 and α is untouched.
        let params = PragueParams { ecn_fallback: 1, rtt_scaling: 0, ..Default::default() };
        let (mut p, mut tp) = prague(params, 50, 20);
        p.ssthresh(&tp); // gains from ssthresh 50: g = 5 + 2 + 1 = 8
        for _ in 0..200 {
            p.pkts_acked(&mut tp, &AckSample { rtt: Some(Time(20 * MS)), ..Default::default() });
        }
        for _ in 0..50 {
            ack(&mut p, &mut tp, 50, 1);
        }
        assert_eq!(p.classic_ecn(), 0);
        // RTT samples alternating 20 and 26 ms (mean abs deviation ≈ 3 ms = 4 × 750 µs) and a
        // standing queue of ≈ 3 ms over min_rtt: + 0.5·log2(4) + 0.5·log2(1.5)... per round
        // on average, clamped to C_STICKY.
        let (mut p, mut tp) = prague(params, 50, 20);
        p.ssthresh(&tp);
        let mut rounds = 0;
        while p.classic_ecn() <= L_STICKY {
            for i in 0..50 {
                let r = if i % 2 == 0 { 20 } else { 26 };
                p.pkts_acked(&mut tp, &AckSample { rtt: Some(Time(r * MS)), ..Default::default() });
            }
            ack(&mut p, &mut tp, 50, 1);
            rounds += 1;
            assert!(rounds < 100, "score {}", p.classic_ecn());
        }
        // ≥ 1 per round once the estimator has converged: crossing 8 takes ~10 rounds.
        assert!((8..=30).contains(&rounds), "{rounds} rounds");
        for _ in 0..100 {
            for i in 0..50 {
                let r = if i % 2 == 0 { 20 } else { 26 };
                p.pkts_acked(&mut tp, &AckSample { rtt: Some(Time(r * MS)), ..Default::default() });
            }
            ack(&mut p, &mut tp, 50, 1);
        }
        assert_eq!(p.classic_ecn(), C_STICKY);
        // Fallback: with α ≈ 0.02 the reduction uses max(α, 0.625) -> cwnd·0.3125.
        p.upscaled_alpha = (MAX_ALPHA / 50) << SHIFT_G;
        p.cwnd_cnt = 0;
        tp.cwnd = 64;
        p.set_state(&mut tp, CaState::Cwr);
        assert_eq!(p.cwnd_carry(), -20 * ONE_CWND);
        // Detection only (mode 2): same score, no fallback.
        let (mut p2, tp2) = prague(PragueParams { ecn_fallback: 2, ..params }, 64, 20);
        p2.classic_ecn = C_STICKY;
        p2.upscaled_alpha = (MAX_ALPHA / 64) << SHIFT_G;
        p2.set_state(&mut tp2.clone(), CaState::Cwr);
        assert_eq!(p2.cwnd_carry(), -(ONE_CWND / 2));
    }

    #[test]
    fn without_ecn_it_is_unpaced_reno() {
        let mut tp = test_state(100, 1000);
        tp.ecn = crate::packet::EcnMode::Off;
        tp.srtt = Time(20 * MS);
        let mut p = Prague::new(PragueParams::default());
        p.init(&mut tp);
        assert_eq!(p.name(), "prague-reno");
        assert!(!p.needs_pacing() && !p.has_cong_control());
        assert!(!p.cong_control(&mut tp, &RateSample::default()));
        assert_eq!(p.ssthresh(&tp), 50);
    }

    #[test]
    fn parses_module_parameters() {
        let spec = crate::cc::CcSpec::parse("prague rtt_target 10ms classic_ecn_detection 1 rtt_scaling 2").unwrap();
        assert_eq!(spec.config().name(), "prague");
        assert!(crate::cc::CcSpec::parse("prague rtt_scaling 4").is_err());
        assert!(crate::cc::CcSpec::parse("prague classic_ecn_detection 3").is_err());
        assert!(crate::cc::CcSpec::parse("prague alpha 1").is_err());
        // rtt_target 0 turns RTT independence off.
        let spec = crate::cc::CcSpec::parse("prague rtt_target 0ms").unwrap();
        let mut cc = spec.config().build(crate::rng::Stream::new(1, "test"), Default::default());
        let mut tp = test_state(10, u32::MAX);
        tp.srtt = Time(5 * MS);
        cc.init(&mut tp);
        assert_eq!(cc.name(), "prague");
    }

    /// Generation D `prague_tso_segs`: max(`max_tso_burst`, 2) where `max_tso_burst` =
    /// max(1, (rate / MTU) >> 12). cwnd 10 at 20 ms srtt: 1500 B × 10 / 20 ms = 500 pkt/s
    /// >> 12 = 0 → 1 → 2. cwnd 100 at 1 ms: 100 000 pkt/s >> 12 = 24. The Reno fallback has
    /// no hook.
    #[test]
    fn tso_segs_hook_is_the_burst_floored_at_two() {
        let (mut p, mut tp) = prague(PragueParams::default(), 10, 20);
        p.update_pacing_rate(&tp);
        assert_eq!(p.max_tso_burst(), 1);
        assert_eq!(p.max_tso_segs(&tp), Some(2));
        tp.cwnd = 100;
        tp.ssthresh = 100;
        tp.srtt = Time(MS);
        p.update_pacing_rate(&tp);
        assert_eq!((p.max_tso_burst(), p.max_tso_segs(&tp)), (24, Some(24)));
        let mut reno = Prague::new(PragueParams::default());
        let mut tp = test_state(10, u32::MAX);
        tp.ecn = crate::packet::EcnMode::Off;
        reno.init(&mut tp);
        assert_eq!(reno.max_tso_segs(&tp), None);
    }
}