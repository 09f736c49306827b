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
            Stack::Linux | Stack::Sce2020 | Stack::L4steam2024 => PragueEra::V06,
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
    fn build(&self, _rng: crate::rng::Stream, stack: Stack) -> Box<dyn CongestionControl> {
        Box::new(Prague::new(self.resolve(stack)))
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

    /// A flow of the given era in slow start (ssthresh infinite, no CE seen yet), cwnd
    /// `cwnd`, srtt 20 ms, always cwnd-limited.
    fn slow_start_flow(stack: Stack, cwnd: u32) -> (Prague, TcpCcState) {
        let mut tp = test_state(cwnd, u32::MAX);
        tp.srtt = Time(20 * MS);
        tp.min_rtt = tp.srtt;
        let mut p = Prague::new(PragueParams::for_stack(stack));
        p.init(&mut tp);
        (p, tp)
    }

    /// What the sender does on a loss (Linux `tcp_enter_recovery`): `tcp_init_cwnd_reduction`
    /// stores `.ssthresh`, then `tcp_set_ca_state(Recovery)`.
    fn enter_recovery(p: &mut Prague, tp: &mut TcpCcState) {
        tp.ssthresh = p.ssthresh(tp);
        p.set_state(tp, CaState::Recovery);
        tp.ca_state = CaState::Recovery;
    }

    /// Each profile's module-parameter defaults, as written in the era's tcp_prague.c
    /// (b256daed and e741f5ac: `prague_rtt_scaling = RTT_CONTROL_NONE`, `prague_rtt_target =
    /// 15 * USEC_PER_MSEC`, `DEFAULT_RTT_TRANSITION 100`, `prague_ecn_fallback` 0 and 1;
    /// google/bbr@23cbf7e1: RATE, 25 ms, 500, 0).
    #[test]
    fn each_profile_takes_its_eras_defaults() {
        let want = [
            (Stack::Linux, RTT_CONTROL_RATE, 25, 500, 0, PragueEra::V06),
            (Stack::Sce2020, RTT_CONTROL_RATE, 25, 500, 0, PragueEra::V06),
            (Stack::L4steam2024, RTT_CONTROL_RATE, 25, 500, 0, PragueEra::V06),
            (Stack::L4steam2020, RTT_CONTROL_NONE, 15, 100, 0, PragueEra::V05Aug2020),
            (Stack::L4steam2020Apr, RTT_CONTROL_NONE, 15, 100, 1, PragueEra::V05Apr2020),
        ];
        for (stack, scaling, target_ms, transition, fallback, era) in want {
            let c = PragueConfig::default().resolve(stack);
            assert_eq!((c.rtt_scaling, c.rtt_target, c.rtt_transition, c.ecn_fallback, c.burst_shift, c.era),
                (scaling, Time::from_millis(target_ms), transition, fallback, 12, era), "{stack}");
        }
        assert_eq!(PragueParams::for_stack(Stack::Linux).rtt_scaling, PragueParams::default().rtt_scaling);
        // 15 ms in the kernel's 128 µs units: 15000 >> 7 = 117.
        assert_eq!(Prague::new(PragueParams::for_stack(Stack::L4steam2020)).rtt_target, 117);
    }

    /// With the 2020 defaults RTT independence never starts: after 1000 rounds out of slow
    /// start at 5 ms the increase is still one packet per window (2^20), and a second CWR
    /// 1 ms after the first still reduces (no 15 ms gate). On `linux` (RATE, 25 ms, 500) the
    /// same flow is RTT-independent: (39/195)² of a packet (5 ms = 39, 25 ms = 195 units).
    #[test]
    fn rtt_independence_is_off_on_the_2020_profiles() {
        for (stack, indep) in [(Stack::L4steam2020, false), (Stack::L4steam2020Apr, false), (Stack::Linux, true)] {
            let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 100, 5);
            for _ in 0..1000 {
                tp.now = tp.now + Time(5 * MS);
                round_ack(&mut p, &mut tp, 1, 0);
            }
            // Once RTT-independent (linux) a new round also waits for the 25 ms target.
            assert!(p.round() >= 500, "{stack}: round {}", p.round());
            assert_eq!(p.is_rtt_indep(&tp), indep, "{stack}");
            let want = if indep { ((39u64 << 20) * 39 + 195 * 195 / 2) / (195 * 195) } else { ONE_CWND as u64 };
            assert_eq!(p.ai_ack_increase(), want, "{stack}");
            p.saw_ce = true;
            tp.now = Time::from_secs(10);
            p.set_state(&mut tp, CaState::Cwr);
            let c = p.cwnd_carry();
            assert!(c < 0);
            tp.now = Time::from_millis(10_001);
            p.set_state(&mut tp, CaState::Cwr);
            assert_eq!(p.cwnd_carry() < c, !indep, "{stack}: second CWR 1 ms later");
        }
    }

    /// An explicit module parameter wins over the profile's default; the others keep it.
    #[test]
    fn explicit_parameters_override_the_profile() {
        let cfg = |text: &str| -> PragueConfig {
            let tokens: Vec<String> = text.split_whitespace().map(String::from).collect();
            parse_config(&mut Params::new("prague", &tokens[1..])).unwrap()
        };
        assert_eq!(cfg("prague").resolve(Stack::L4steam2020).rtt_scaling, RTT_CONTROL_NONE);
        let r = cfg("prague rtt_scaling 1").resolve(Stack::L4steam2020);
        assert_eq!((r.rtt_scaling, r.rtt_target, r.rtt_transition, r.era), (1, Time::from_millis(15), 100, PragueEra::V05Aug2020));
        let r = cfg("prague classic_ecn_detection 0").resolve(Stack::L4steam2020Apr);
        assert_eq!((r.ecn_fallback, r.rtt_scaling, r.era), (0, RTT_CONTROL_NONE, PragueEra::V05Apr2020));
        let r = cfg("prague rtt_scaling 0 rtt_target 25ms").resolve(Stack::Linux);
        assert_eq!((r.rtt_scaling, r.rtt_target, r.rtt_transition), (0, Time::from_millis(25), 500));
        let r = cfg("prague rtt_transition 7 burst_shift 10").resolve(Stack::L4steam2020Apr);
        assert_eq!((r.rtt_transition, r.burst_shift, r.ecn_fallback), (7, 10, 1));
    }

    /// The v0.5 growth gate (b256daed/e741f5ac `prague_update_cwnd` ≈ lines 458-470): a flow
    /// that is not cwnd-limited still grows while it paces internally and has queued data;
    /// v0.6 does not; with an empty write queue neither does v0.5.
    #[test]
    fn v05_grows_when_pacing_limited_with_queued_data() {
        for (stack, queued, grows) in [
            (Stack::L4steam2020, true, true),
            (Stack::L4steam2020Apr, true, true),
            (Stack::L4steam2020, false, false),
            (Stack::Linux, true, false),
        ] {
            let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 50, 20);
            tp.paced = true;
            tp.is_cwnd_limited = false;
            tp.write_queue_empty = !queued;
            // 50 unmarked ACKs of one packet: +1 packet (50 × ⌊(2^20 + 25)/50⌋ = 50 × 20972 =
            // 1 048 600 ≥ 2^20) when the gate is open, nothing otherwise.
            for _ in 0..50 {
                ack(&mut p, &mut tp, 1, 0);
            }
            let want = if grows { (51, 50 * 20972 - ONE_CWND) } else { (50, 0) };
            assert_eq!((tp.cwnd, p.cwnd_carry()), want, "{stack} queued {queued}");
        }
    }

    /// Prague's first reduction after slow start (any era; here e741f5ac, whose `.ssthresh`
    /// returns max(cwnd, ssthresh) = ∞ at this CWR entry, and b256daed, which returns ∞ too).
    /// cwnd 40 in slow start; the first CE enters CWR with α = 1.0: carry −= (2^20·40·2^20 +
    /// 2^20) >> 21 = 20 packets. Unmarked ACKs are then consumed by `tcp_slow_start` (cwnd +1
    /// each, return before `adjust:`), so the carry waits; the next fully marked ACK (acked
    /// − CE = 0) goes to `adjust:`: cwnd −1 and ssthresh = cwnd, which ends slow start.
    #[test]
    fn first_reduction_after_slow_start_waits_for_a_fully_marked_ack() {
        for stack in [Stack::L4steam2020Apr, Stack::L4steam2020] {
            let (mut p, mut tp) = slow_start_flow(stack, 40);
            ack(&mut p, &mut tp, 1, 1);
            assert_eq!((tp.cwnd, p.cwnd_carry()), (40, 0), "a CE-only ACK neither grows nor shrinks");
            tp.ssthresh = p.ssthresh(&tp);
            assert_eq!(tp.ssthresh, u32::MAX, "{stack}");
            p.set_state(&mut tp, CaState::Cwr);
            tp.ca_state = CaState::Cwr;
            assert_eq!(p.cwnd_carry(), -20 * ONE_CWND);
            for i in 1..=5 {
                ack(&mut p, &mut tp, 1, 0);
                assert_eq!((tp.cwnd, p.cwnd_carry()), (40 + i, -20 * ONE_CWND), "{stack}: slow start swallows ACK {i}");
            }
            ack(&mut p, &mut tp, 1, 1);
            assert_eq!((tp.cwnd, tp.ssthresh, p.cwnd_carry()), (44, 44, -19 * ONE_CWND), "{stack}");
            // Out of slow start: every ACK now adds ⌊(2^20 + 22)/44⌋ = 23 831 and takes one
            // packet off while the carry is ≤ −1 packet.
            ack(&mut p, &mut tp, 1, 0);
            assert_eq!((tp.cwnd, p.cwnd_carry()), (43, -18 * ONE_CWND + 23_831), "{stack}");
        }
    }

    /// A loss before any CE: ssthresh is still infinite. b256daed (`in_loss`): the carry's
    /// −cwnd/2 is applied one packet per ACK, each decrement setting ssthresh = cwnd. e741f5ac
    /// (no `in_loss`, ssthresh = max(cwnd, ∞) = ∞): slow start goes on and swallows every
    /// ACK, the halving is never applied — the loss is ignored (sce-l4s-ect1's "ignoring
    /// packet loss").
    #[test]
    fn a_loss_before_any_ce_is_ignored_by_e741f5ac_but_not_by_b256daed() {
        let (mut p, mut tp) = slow_start_flow(Stack::L4steam2020Apr, 20);
        enter_recovery(&mut p, &mut tp);
        assert_eq!(tp.ssthresh, u32::MAX);
        assert_eq!(p.cwnd_carry(), -10 * ONE_CWND);
        for i in 1..=30 {
            ack(&mut p, &mut tp, 1, 0);
            assert_eq!((tp.cwnd, p.cwnd_carry()), (20 + i, -10 * ONE_CWND));
        }
        // Recovery ends: no Open hook, nothing changes; slow start continues.
        p.set_state(&mut tp, CaState::Open);
        tp.ca_state = CaState::Open;
        ack(&mut p, &mut tp, 1, 0);
        assert_eq!((tp.cwnd, tp.ssthresh, p.cwnd_carry()), (51, u32::MAX, -10 * ONE_CWND));

        let (mut p, mut tp) = slow_start_flow(Stack::L4steam2020, 20);
        enter_recovery(&mut p, &mut tp);
        assert_eq!((tp.ssthresh, p.cwnd_carry()), (u32::MAX, -10 * ONE_CWND));
        for i in 1..=10 {
            ack(&mut p, &mut tp, 1, 0);
            assert_eq!((tp.cwnd, tp.ssthresh), (20 - i, 20 - i));
        }
        assert_eq!(p.cwnd_carry(), 0);
        // in_loss: no growth until Open.
        for _ in 0..30 {
            ack(&mut p, &mut tp, 1, 0);
        }
        assert_eq!((tp.cwnd, p.cwnd_carry()), (10, 0));
        p.set_state(&mut tp, CaState::Open);
        tp.ca_state = CaState::Open;
        ack(&mut p, &mut tp, 1, 0);
        // ⌊(2^20 + 5)/10⌋ = 104 858.
        assert_eq!(p.cwnd_carry(), 104_858);
    }

    /// A loss in congestion avoidance. e741f5ac: `.ssthresh` = max(cwnd 120, ssthresh 100) =
    /// 120 (b256daed: 100); both take 60 packets off the carry; e741f5ac keeps adding
    /// ⌊(2^20 + c/2)/c⌋ per unmarked ACK during Recovery (c = cwnd before that ACK's
    /// decrement), b256daed adds nothing.
    #[test]
    fn e741f5ac_keeps_growing_in_recovery_and_returns_max_cwnd_ssthresh() {
        for (stack, ss) in [(Stack::L4steam2020Apr, 120), (Stack::L4steam2020, 100)] {
            let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 120, 20);
            tp.ssthresh = 100;
            enter_recovery(&mut p, &mut tp);
            assert_eq!((tp.ssthresh, p.cwnd_carry()), (ss, -60 * ONE_CWND), "{stack}");
            // cwnd ≥ ssthresh: congestion avoidance; 10 ACKs take 10 packets off.
            for _ in 0..10 {
                ack(&mut p, &mut tp, 1, 0);
            }
            let grown: i64 = if stack == Stack::L4steam2020Apr { (111..=120).map(|c: i64| (ONE_CWND + c / 2) / c).sum() } else { 0 };
            assert_eq!((tp.cwnd, tp.ssthresh, p.cwnd_carry()), (110, 110, -50 * ONE_CWND + grown), "{stack}");
        }
    }

    /// The GSO/TSO hook per era, from `max_tso_burst` = max(1, (rate/MTU) >> 12): v0.5
    /// `.max_tso_segs` caps autosize (may be 1), v0.6 `.tso_segs` replaces it with
    /// max(burst, 2); the Reno fallback has none.
    #[test]
    fn tso_segs_per_era() {
        for (stack, low, high) in [
            (Stack::L4steam2020, TsoSegs::AtMost(1), TsoSegs::AtMost(488)),
            (Stack::L4steam2020Apr, TsoSegs::AtMost(1), TsoSegs::AtMost(488)),
            (Stack::Linux, TsoSegs::Exactly(2), TsoSegs::Exactly(488)),
            (Stack::L4steam2024, TsoSegs::Exactly(2), TsoSegs::Exactly(488)),
        ] {
            let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 100, 20);
            tp.ssthresh = 150;
            tp.packets_out = 120;
            // 1500 B · 120 / 20 ms = 9 MB/s = 6000 packets/s; >> 12 = 1.
            ack(&mut p, &mut tp, 0, 0);
            assert_eq!(p.tso_segs(&tp), Some(low), "{stack}");
            // 2000 packets per 1 ms = 2e6 packets/s; >> 12 = 488.
            tp.cwnd = 2000;
            tp.srtt = Time(MS);
            ack(&mut p, &mut tp, 0, 0);
            assert_eq!(p.tso_segs(&tp), Some(high), "{stack}");
        }
        let mut tp = test_state(10, u32::MAX);
        tp.ecn = crate::packet::EcnMode::Off;
        let mut p = Prague::new(PragueParams::for_stack(Stack::L4steam2020));
        p.init(&mut tp);
        assert_eq!(p.tso_segs(&tp), None);
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
}
