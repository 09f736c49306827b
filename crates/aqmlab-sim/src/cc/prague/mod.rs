//! TCP Prague of the L4S team's kernels (`net/ipv4/tcp_prague.c`), the `cwnd_cnt`
//! generation with RTT independence and the optional classic-ECN-AQM detection, in the
//! version the run's era profile names ([`PragueEra`], [`PragueParams::for_stack`]):
//! - `linux` (and `sce-2020`, `l4steam-2024`): MODULE_VERSION 0.6, read at google/bbr@23cbf7e1
//!   (stored id 14268397719; cross-checked with the newer `frac_cwnd` generation at
//!   L4STeam/linux@02573a21);
//! - `l4steam-2020`: MODULE_VERSION 0.5 at L4STeam/linux@b256daed (stored id 9843571704);
//! - `l4steam-2020-04`: MODULE_VERSION 0.5 at L4STeam/linux@e741f5ac (stored id 20070779646).
//! Line numbers "≈ line N" below are approximate, counted in those stored files. See
//! docs/algorithms/prague.md for the per-profile table and the audit list.
//!
//! Prague is a `.cong_control` algorithm: on every ACK it runs its own window update
//! (`prague_update_cwnd`), once per round its α update (`prague_update_alpha`), and sets the
//! pacing rate (`prague_update_pacing_rate`); the sender's PRR is not used and the end of
//! CWR/Recovery leaves cwnd alone (Linux `tcp_end_cwnd_reduction` returns early).
//!
//! - cwnd is tracked with a signed carry `cwnd_cnt` in 2^-20 packets; cwnd moves by at most
//!   one packet per ACK towards cwnd + carry (a decrement also sets ssthresh = cwnd).
//! - Additive increase on every ACK, in every state but a loss reduction (v0.5 of e741f5ac:
//!   in every state): non-CE-marked ACKed packets × `ai_ack_increase`/cwnd (1 packet per
//!   window unscaled), so a window with a fraction p of marks grows by (1 − p). Only while
//!   cwnd-limited (v0.6), or also while pacing-limited with data queued (v0.5).
//! - α: EWMA of the CE fraction with g = 1/16 kept upscaled by 16 in 2^-20 units, updated when
//!   a round (snd_una past the snd_nxt of the previous update) has elapsed, and — once RTT
//!   independent — at least `rtt_target` after the previous update; α stays at its initial 1.0
//!   until the first CE is seen.
//! - CE echo: the sender's CWR (at most once per window) calls `prague_enter_cwr`, which takes
//!   α/2 · cwnd off the carry (rounded half up); once RTT independent, at most once per
//!   `rtt_target`. `ssthresh` returns ssthresh unchanged (e741f5ac: max(cwnd, ssthresh)), so
//!   the generic reduction does nothing.
//! - Loss (entering Recovery, or an RTO): half of cwnd (and of the carry) off the carry, no
//!   growth until the state is Open again (e741f5ac: growth goes on).
//! - RTT independence (`rtt_scaling`: v0.6 default 1 = RATE, `rtt_target` 25 ms, after
//!   `rtt_transition` = 500 rounds out of slow start; v0.5 default 0 = NONE, 15 ms, 100):
//!   `ai_ack_increase` = (srtt/target)² for srtt < target, srtt and target in 128 µs units as
//!   in the kernel.
//! - Pacing always (SK_PACING_NEEDED): rate = MTU · max(cwnd, in flight) / srtt, doubled while
//!   cwnd < ssthresh/2. The GSO burst limit `max_tso_burst` is rate × 2^-`burst_shift` s
//!   (≈ 250 µs); the sender learns it through [`CongestionControl::tso_segs`] (v0.5
//!   `.max_tso_segs`, v0.6 `.tso_segs`).
//! - Classic-ECN-AQM detection (`prague_ecn_fallback`: 0 off — default of v0.6 and of
//!   b256daed, 1 detect and fall back — default of e741f5ac, 2 detect only): see
//!   [`Prague::classic_ecn_detection`].
//! - Without ECN the connection runs Reno (`prague_reno`) unpaced.

use super::{acked_for_avoidance, cong_avoid_ai, slow_start, AckSample, CaEvent, CaState, CcConfig, CongestionControl, RateSample, TcpCcState, TsoSegs};
use super::CcKind;
use crate::params::{parse_args, Args, Param, Params, Value};
use crate::profile::Stack;
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

/// Which `tcp_prague.c` an instance follows (chosen by the era profile, [`crate::profile::Stack`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PragueEra {
    /// MODULE_VERSION 0.6, the `cwnd_cnt` generation read at google/bbr@23cbf7e1 (stored id
    /// 14268397719; "generation D"): profiles `linux`, `sce-2020` (no Prague of its own) and
    /// `l4steam-2024` (its kernel's Prague is not pinned; see docs/algorithms/prague.md).
    #[default]
    V06,
    /// MODULE_VERSION 0.5 at L4STeam/linux@b256daed (4 Aug 2020, stored id 9843571704):
    /// profile `l4steam-2020`. As V06 except the growth gate of `prague_update_cwnd`
    /// (≈ line 456) and the TSO hook `.max_tso_segs` (`prague_max_tso_seg`, ≈ line 677).
    V05Aug2020,
    /// MODULE_VERSION 0.5 at L4STeam/linux@e741f5ac (8 Apr 2020, stored id 20070779646):
    /// profile `l4steam-2020-04`. As V05Aug2020 and also: `struct prague` has no `in_loss`
    /// (≈ lines 163-183), `prague_state` has no `TCP_CA_Open` case (≈ line 620), and
    /// `prague_ssthresh` returns max(cwnd, ssthresh) (≈ line 658).
    V05Apr2020,
}

impl PragueEra {
    /// The version a profile ran.
    pub fn of(stack: Stack) -> Self {
        match stack {
            Stack::L4steam2020 => PragueEra::V05Aug2020,
            Stack::L4steam2020Apr => PragueEra::V05Apr2020,
            Stack::Linux | Stack::Sce2020 | Stack::L4steam2024 | Stack::Ns2_2013 => PragueEra::V06,
        }
    }
    fn is_v05(self) -> bool {
        matches!(self, PragueEra::V05Aug2020 | PragueEra::V05Apr2020)
    }
    /// `struct prague` has the `in_loss` bit (no growth from a loss until Open again).
    fn has_in_loss(self) -> bool {
        self != PragueEra::V05Apr2020
    }
}

/// Module parameters (`prague_*`) as one instance uses them, and the era of the code.
#[derive(Clone, Copy, Debug)]
pub struct PragueParams {
    /// `prague_rtt_scaling`: 0 none, 1 rate, 2 scalable, 3 additive.
    pub rtt_scaling: u8,
    /// `prague_rtt_target`; zero disables RTT independence.
    pub rtt_target: Time,
    /// `prague_rtt_transition`: rounds after slow start before RTT independence.
    pub rtt_transition: u32,
    /// `prague_ecn_fallback`: 0 none, 1 detection and fallback, 2 detection only.
    pub ecn_fallback: u8,
    /// `prague_burst_shift`: the GSO burst is at most 2^-shift s of the pacing rate (12 in
    /// every version read).
    pub burst_shift: u32,
    /// Which version of the code runs.
    pub era: PragueEra,
}

impl PragueParams {
    /// The module-parameter defaults of the code a profile ran:
    /// - `linux`, `sce-2020`, `l4steam-2024` (v0.6, google/bbr@23cbf7e1): RATE / 25 ms / 500
    ///   rounds, detection off;
    /// - `l4steam-2020` (L4STeam/linux@b256daed `tcp_prague.c` ≈ lines 139-161:
    ///   `prague_rtt_scaling = RTT_CONTROL_NONE`, `prague_rtt_target = 15 * USEC_PER_MSEC`,
    ///   `DEFAULT_RTT_TRANSITION 100`, `prague_ecn_fallback = 0`): NONE / 15 ms / 100, off;
    /// - `l4steam-2020-04` (L4STeam/linux@e741f5ac, same lines, but `prague_ecn_fallback = 1`):
    ///   NONE / 15 ms / 100, detection and fallback on.
    ///
    /// These are the per-stack defaults declared in [`PRAGUE`]'s table.
    pub fn for_stack(stack: Stack) -> Self {
        PragueParams::from_args(&PRAGUE.defaults(stack))
    }
}

impl Default for PragueParams {
    /// Today's model (profile `linux`): v0.6 defaults (the table's).
    fn default() -> Self {
        PragueParams::from_args(&PRAGUE.defaults(Stack::Linux))
    }
}

impl PragueParams {
    fn from_args(a: &Args) -> Self {
        PragueParams {
            rtt_scaling: a.uint("rtt_scaling") as u8,
            rtt_target: a.time("rtt_target"),
            rtt_transition: a.u32("rtt_transition"),
            ecn_fallback: a.uint("classic_ecn_detection") as u8,
            burst_shift: a.u32("burst_shift"),
            era: PragueEra::of(a.stack()),
        }
    }
}

/// The parsed `prague ...` configuration: a parameter left unset takes the default of the
/// run's profile when an instance is built; one given explicitly always wins.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PragueConfig {
    pub rtt_scaling: Option<u8>,
    pub rtt_target: Option<Time>,
    pub rtt_transition: Option<u32>,
    pub ecn_fallback: Option<u8>,
    pub burst_shift: Option<u32>,
}

impl PragueConfig {
    /// The parameters an instance uses on `stack`: explicit values over the profile's defaults.
    pub fn resolve(&self, stack: Stack) -> PragueParams {
        let d = PragueParams::for_stack(stack);
        PragueParams {
            rtt_scaling: self.rtt_scaling.unwrap_or(d.rtt_scaling),
            rtt_target: self.rtt_target.unwrap_or(d.rtt_target),
            rtt_transition: self.rtt_transition.unwrap_or(d.rtt_transition),
            ecn_fallback: self.ecn_fallback.unwrap_or(d.ecn_fallback),
            burst_shift: self.burst_shift.unwrap_or(d.burst_shift),
            era: d.era,
        }
    }
}

impl CcConfig for PragueConfig {
    fn name(&self) -> &'static str {
        PRAGUE.name
    }
    fn build(&self, _rng: crate::rng::Stream, stack: Stack) -> super::Cc {
        super::Cc::Prague(Prague::new(self.resolve(stack)))
    }
}

/// `prague rtt_target 25ms rtt_scaling 1 rtt_transition 500 classic_ecn_detection 1
/// burst_shift 12` (Linux `prague_*` module parameters; `ecn_fallback` is a synonym of
/// `classic_ecn_detection`). Unset parameters take the profile's defaults at build time
/// (the per-stack defaults of this table).
pub const PRAGUE: CcKind = CcKind {
    name: "prague",
    doc: "TCP Prague, the L4S scalable congestion control (L4STeam/linux tcp_prague.c)",
    params: &[
        Param::uint("rtt_scaling", 0, 3, RTT_CONTROL_RATE as u64)
            .doc("RTT independence: 0 none, 1 rate, 2 scalable, 3 additive")
            .stack_defaults(&V05_RTT_SCALING),
        Param::time("rtt_target", Time::from_millis(25))
            .doc("RTT that flows behave as if they had; 0 disables RTT independence")
            .stack_defaults(&V05_RTT_TARGET),
        Param::uint("rtt_transition", 0, u32::MAX as u64, 500)
            .unit("rounds")
            .doc("rounds after slow start before RTT independence")
            .stack_defaults(&V05_RTT_TRANSITION),
        Param::uint("classic_ecn_detection", 0, 2, 0)
            .aliases(&["ecn_fallback"])
            .doc("classic ECN AQM detection: 0 off, 1 detect and fall back, 2 detect only")
            .stack_defaults(&[(Stack::L4steam2020Apr, Value::Uint(1))]),
        Param::uint("burst_shift", 0, 30, 12).doc("GSO burst at most 2^-shift s of the pacing rate"),
    ],
    build: |a| Ok(Arc::new(PragueConfig::from_args(a)?)),
};

/// The v0.5 module-parameter defaults of both 2020 L4STeam kernels (b256daed and e741f5ac
/// `tcp_prague.c` ≈ lines 139-161).
const V05_RTT_SCALING: [(Stack, Value); 2] =
    [(Stack::L4steam2020, Value::Uint(RTT_CONTROL_NONE as u64)), (Stack::L4steam2020Apr, Value::Uint(RTT_CONTROL_NONE as u64))];
const V05_RTT_TARGET: [(Stack, Value); 2] =
    [(Stack::L4steam2020, Value::Time(Time::from_millis(15))), (Stack::L4steam2020Apr, Value::Time(Time::from_millis(15)))];
const V05_RTT_TRANSITION: [(Stack, Value); 2] = [(Stack::L4steam2020, Value::Uint(100)), (Stack::L4steam2020Apr, Value::Uint(100))];

impl PragueConfig {
    /// The parameters given in `a`; the others stay unset for the profile to fill in.
    fn from_args(a: &Args) -> Result<Self, String> {
        let given = |k: &str| a.given(k).then(|| a.get(k));
        let uint = |k: &str| given(k).map(|_| a.uint(k));
        let c = PragueConfig {
            rtt_scaling: uint("rtt_scaling").map(|n| n as u8),
            rtt_target: given("rtt_target").map(|_| a.time("rtt_target")),
            rtt_transition: uint("rtt_transition").map(|n| n as u32),
            ecn_fallback: uint("classic_ecn_detection").map(|n| n as u8),
            burst_shift: uint("burst_shift").map(|n| n as u32),
        };
        if c.rtt_target.is_some_and(|t| t.as_micros() >> RTT_UNIT > u32::MAX as u64) {
            return Err(a.invalid("rtt_target too large"));
        }
        Ok(c)
    }
}

/// `prague ...` read from `p` without the type erasure (unset parameters stay unset).
pub fn parse_config(p: &mut Params) -> Result<PragueConfig, String> {
    PragueConfig::from_args(&parse_args(PRAGUE.name, PRAGUE.params, p, Stack::Linux)?)
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

    /// The growth gate of `prague_update_cwnd` (after `acked > 0` and `!in_loss`).
    /// - V06 (google/bbr@23cbf7e1): grow only while cwnd-limited (`tcp_is_cwnd_limited`).
    /// - V05 (L4STeam/linux@b256daed ≈ lines 458-470, e741f5ac the same): when not
    ///   cwnd-limited, still grow if the socket needs internal pacing
    ///   (`tcp_needs_internal_pacing`: `SK_PACING_NEEDED`, which `prague_init` sets and no
    ///   `fq` on the sender overrides — the testbeds had no qdisc on the endpoints) and the
    ///   write queue is not empty ("a poor man's attempt at bypassing" the pacing-limited
    ///   case; it also grows when rwnd-limited, as the kernel's comment says). In the
    ///   simulator a non-Reno Prague always paces internally, so `tp.paced` stands for it.
    fn may_grow(&self, tp: &TcpCcState) -> bool {
        tp.is_cwnd_limited || (self.params.era.is_v05() && tp.paced && !tp.write_queue_empty)
    }

    /// `prague_update_cwnd`.
    fn update_cwnd(&mut self, tp: &mut TcpCcState, rs: &RateSample) {
        let mut acked = rs.acked_sacked as i64;
        if rs.ece_delta > 0 {
            self.saw_ce = true;
            acked -= rs.ece_delta as i64;
        }
        if acked > 0 && !self.in_loss && self.may_grow(tp) {
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

    /// `prague_enter_loss`: take half of cwnd (and of the carry) off the carry; stop growth
    /// until Open (`in_loss`) except in the e741f5ac version.
    fn enter_loss(&mut self, tp: &TcpCcState) {
        self.loss_cwnd = tp.cwnd;
        self.loss_cwnd_cnt = self.cwnd_cnt;
        self.cwnd_cnt -= ((tp.cwnd as i64) << (CWND_UNIT - 1)) + (self.cwnd_cnt >> 1);
        // e741f5ac `prague_enter_loss` (≈ line 506) sets no flag: growth goes on in Recovery.
        self.in_loss = self.params.era.has_in_loss();
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
            PRAGUE.name
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
    /// The e741f5ac version (`prague_ssthresh` ≈ line 658) returns max(cwnd, ssthresh) and
    /// rescales the detection's gains with that: a loss before the first CE (ssthresh still
    /// infinite) leaves ssthresh infinite, so slow start goes on, consumes every ACK and
    /// returns before `adjust:` — the halving put on the carry is never applied.
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        if self.reno {
            return (tp.cwnd >> 1).max(2);
        }
        let ssthresh = if self.params.era == PragueEra::V05Apr2020 { tp.cwnd.max(tp.ssthresh) } else { tp.ssthresh };
        self.update_rtt_scaling(ssthresh);
        ssthresh
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
            // e741f5ac's `prague_state` (≈ line 620) has no Open case (and no `in_loss`).
            CaState::Open if self.params.era.has_in_loss() => self.in_loss = false,
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

    /// The GSO/TSO hook, from `max_tso_burst` (≈ 2^-`burst_shift` s at the pacing rate, at
    /// least 1, recomputed by `prague_update_pacing_rate` on every ACK):
    /// - V05 (b256daed/e741f5ac `.max_tso_segs = prague_max_tso_seg`, ≈ line 677/667):
    ///   `AtMost(max_tso_burst)` — caps `tcp_tso_autosize`, may be 1;
    /// - V06 (google/bbr@23cbf7e1 `.tso_segs = prague_tso_segs`): `Exactly(max(max_tso_burst,
    ///   tcp_min_tso_segs = 2))`, replacing autosize (`prague_max_tso_segs` cap, default 0 =
    ///   none, not modelled).
    /// The Reno fallback has no hook.
    /// α (fraction), the carry (packets), the classic-ECN score (units of 1.0), the AI per
    /// window (packets), `max_tso_burst`, `in_loss`, `round`.
    fn trace_vars(&self, out: &mut Vec<(&'static str, f64)>) {
        let one = ONE_CWND as f64;
        out.extend([
            ("alpha", self.alpha() as f64 / MAX_ALPHA as f64),
            ("cwnd_carry", self.cwnd_cnt as f64 / one),
            ("classic_ecn", self.classic_ecn as f64 / MAX_ALPHA as f64),
            ("ai_per_rtt", self.ai_ack_increase as f64 / one),
            ("max_tso_burst", self.max_tso_burst as f64),
            ("in_loss", self.in_loss as u8 as f64),
            ("round", self.round as f64),
        ]);
    }

    fn tso_segs(&self, _tp: &TcpCcState) -> Option<TsoSegs> {
        if self.reno {
            return None;
        }
        Some(match self.params.era {
            PragueEra::V05Aug2020 | PragueEra::V05Apr2020 => TsoSegs::AtMost(self.max_tso_burst.max(1)),
            PragueEra::V06 => TsoSegs::Exactly(self.max_tso_burst.max(2)),
        })
    }
}

#[cfg(test)]
mod tests;
