//! BBR v3, modelled on google/bbr branch v3 `net/ipv4/tcp_bbr.c` (`BBR_VERSION 3`, as read at
//! google/bbr@001a430b3ddb), sharing with v1 the fixed point and
//! [`BbrCore`](super::bbr_common::BbrCore), the logic both `tcp_bbr.c` files write the same way.
//!
//! Beyond v1 (see `bbr.rs`), v3 bounds its model:
//! - `bw_hi` (max of the last 1-2 bandwidth-probing cycles) and `inflight_hi`, a long-term
//!   upper bound cut when a probe sees loss above 2 % (`bbr_loss_thresh`) or CE above 50 %
//!   (`bbr_ecn_thresh`): inflight_hi = max(tx_in_flight, (1 - beta) x target), beta 0.3
//!   (`bbr_handle_inflight_too_high`, with `bbr_inflight_hi_from_lost_skb` locating the
//!   packet at which the loss rate crossed 2 %);
//! - `bw_lo` / `inflight_lo`, short-term lower bounds cut once per round with loss by
//!   (1 - beta) (never below the latest round's delivery) and with CE by
//!   (1 - ecn_factor x ecn_alpha), ecn_factor 1/3, ecn_alpha a gain-1/16 EWMA of the CE
//!   fraction (`bbr_adapt_lower_bounds`, `bbr_update_ecn_alpha`) — the ECN logic only once
//!   min_rtt <= 5 ms (`bbr_ecn_max_rtt_us`) on a connection with shallow-threshold ECN;
//! - PROBE_BW as DOWN (0.91) / CRUISE / REFILL / UP (1.25, cwnd gain 2.25), a new probe
//!   2-3 s (random) after the last, or after min(63, BDP) rounds (Reno coexistence);
//! - STARTUP pacing gain 2.77 (4 ln 2) with cwnd gain 2, left also on 6 loss events in a
//!   round with > 2 % loss, or 2 rounds of > 50 % CE;
//! - PROBE_RTT when no lower RTT was seen for 5 s (`bbr_probe_rtt_win_ms`), at
//!   cwnd = max(4, BDP / 2) for 200 ms and a round.
//!
//! Differences from the source are listed in docs/algorithms/bbr.md.

use super::bbr_common::*;
use super::{CaEvent, CaState, CcConfig, CongestionControl, LostSkb, RateSample, TcpCcState, TsoSegs};
use super::CcKind;
use crate::params::{Args, Param};
use crate::profile::Stack;
use crate::rng::Stream;
use crate::packet::EcnMode;
use crate::time::Time;
use std::sync::Arc;

/// `bbr_startup_pacing_gain` = 2.77 (4 ln 2), rounded up.
pub const STARTUP_PACING_GAIN: u32 = BBR_UNIT * 277 / 100 + 1;
/// `bbr_startup_cwnd_gain`.
pub const STARTUP_CWND_GAIN: u32 = BBR_UNIT * 2;
/// `bbr_cwnd_gain`.
pub const CWND_GAIN: u32 = BBR_UNIT * 2;
/// `bbr_pacing_gain[]` by `enum bbr_pacing_gain_phase`: UP, DOWN, CRUISE, REFILL.
pub const PACING_GAIN: [u32; 4] = [BBR_UNIT * 5 / 4, BBR_UNIT * 91 / 100, BBR_UNIT, BBR_UNIT];
pub const UP: u32 = 0;
pub const DOWN: u32 = 1;
pub const CRUISE: u32 = 2;
pub const REFILL: u32 = 3;
/// `bbr_probe_rtt_cwnd_gain`: PROBE_RTT holds half a BDP.
const PROBE_RTT_CWND_GAIN: u32 = BBR_UNIT / 2;
/// `bbr_tso_rtt_shift`.
const TSO_RTT_SHIFT: u32 = 9;
/// `GSO_LEGACY_MAX_SIZE`.
const GSO_LEGACY_MAX_SIZE: u64 = 65_536;
/// `sysctl_tcp_min_tso_segs` default.
const MIN_TSO_SEGS: u32 = 2;
/// `bbr_full_loss_cnt`, `bbr_full_ecn_cnt`.
const FULL_LOSS_CNT: u32 = 6;
const FULL_ECN_CNT: u32 = 2;
/// `bbr_ecn_reprobe_gain`.
const ECN_REPROBE_GAIN: u32 = BBR_UNIT / 2;
/// `bbr_bw_probe_cwnd_gain` in BBR_UNIT / 4.
const BW_PROBE_CWND_GAIN: u32 = 1;
/// `bbr_bw_probe_rand_rounds`.
const BW_PROBE_RAND_ROUNDS: u32 = 2;

/// How the ACK stream relates to bandwidth probing (`enum bbr_ack_phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// `bbr2`/`bbr3` parameters: the v3 constants (`bbr_param()`), in Linux units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bbr3Params {
    /// `bbr_min_rtt_win_sec` (10 s).
    pub min_rtt_win: Time,
    /// `bbr_probe_rtt_win_ms` (5 s): PROBE_RTT when no lower RTT for this long.
    pub probe_rtt_win: Time,
    /// `bbr_probe_rtt_mode_ms` (200 ms).
    pub probe_rtt_mode: Time,
    /// `bbr_beta` in BBR_UNIT (76 = 0.30).
    pub beta: u32,
    /// `bbr_loss_thresh` in BBR_UNIT (5 = 2 %).
    pub loss_thresh: u32,
    /// `bbr_ecn_alpha_gain` (16 = 1/16), `bbr_ecn_factor` (85 = 1/3), `bbr_ecn_thresh`
    /// (128 = 50 %), all in BBR_UNIT.
    pub ecn_alpha_gain: u32,
    pub ecn_factor: u32,
    pub ecn_thresh: u32,
    /// `bbr_ecn_max_rtt_us` (5 ms): ECN logic only at or below this min RTT; 0 = any RTT.
    pub ecn_max_rtt: Time,
    /// Treat RFC 3168 / SCE ECN as shallow-threshold (`TCP_ECN_LOW`, a route feature in
    /// Linux). The `l4s` ECN mode always is (ECT(1), exact CE counts).
    pub ecn_low: bool,
    /// `bbr_inflight_headroom` in BBR_UNIT (38 = 15 %).
    pub inflight_headroom: u32,
    /// `bbr_bw_probe_max_rounds` (63), `bbr_bw_probe_base_us` (2 s), `bbr_bw_probe_rand_us` (1 s).
    pub bw_probe_max_rounds: u32,
    pub bw_probe_base: Time,
    pub bw_probe_rand: Time,
    /// `bbr_extra_acked_gain` in BBR_UNIT.
    pub extra_acked_gain: u32,
}

impl Default for Bbr3Params {
    /// The v3 constants (the table's defaults).
    fn default() -> Self {
        Bbr3Params::from_args(&BBR3.defaults(Stack::Linux))
    }
}

impl Bbr3Params {
    fn from_args(a: &Args) -> Self {
        Bbr3Params {
            min_rtt_win: a.time("min_rtt_win"),
            probe_rtt_win: a.time("probe_rtt_win"),
            probe_rtt_mode: a.time("probe_rtt_mode"),
            beta: a.u32("beta"),
            loss_thresh: a.u32("loss_thresh"),
            ecn_alpha_gain: a.u32("ecn_alpha_gain"),
            ecn_factor: a.u32("ecn_factor"),
            ecn_thresh: a.u32("ecn_thresh"),
            ecn_max_rtt: a.time("ecn_max_rtt"),
            ecn_low: a.uint("ecn_low") == 1,
            inflight_headroom: a.u32("inflight_headroom"),
            bw_probe_max_rounds: a.u32("bw_probe_max_rounds"),
            bw_probe_base: a.time("bw_probe_base"),
            bw_probe_rand: a.time("bw_probe_rand"),
            extra_acked_gain: a.u32("extra_acked_gain"),
        }
    }
}

#[derive(Debug, PartialEq)]
struct Bbr3Config {
    params: Bbr3Params,
}

impl CcConfig for Bbr3Config {
    fn name(&self) -> &'static str {
        BBR3.name
    }
    fn build(&self, rng: Stream, _stack: crate::profile::Stack) -> super::Cc {
        super::Cc::Bbr3(Box::new(Bbr3::new(self.params, rng)))
    }
}

/// `bbr3 [beta N] [loss_thresh N] [ecn_alpha_gain N] [ecn_factor N] [ecn_thresh N]
/// [ecn_max_rtt T] [ecn_low 0|1] [inflight_headroom N] [probe_rtt_win T] [probe_rtt_mode T]
/// [min_rtt_win T] [bw_probe_max_rounds N] [bw_probe_base T] [bw_probe_rand T]
/// [extra_acked_gain N]`; fractions in 1/256 as in Linux. `bbr2` is the same model.
pub const BBR3: CcKind = CcKind {
    name: "bbr3",
    doc: "BBRv3 (google/bbr v3 tcp_bbr.c); also listed as bbr2",
    params: &[
        Param::uint("beta", 0, 255, (BBR_UNIT * 30 / 100) as u64).unit("1/256").doc("multiplicative decrease on loss or ECN (bbr_beta)"),
        Param::uint("loss_thresh", 1, 255, (BBR_UNIT * 2 / 100) as u64).unit("1/256").doc("loss rate that ends probing (bbr_loss_thresh)"),
        Param::uint("ecn_alpha_gain", 0, 256, (BBR_UNIT / 16) as u64).unit("1/256").doc("gain of the ECN mark-rate average"),
        Param::uint("ecn_factor", 0, 256, (BBR_UNIT / 3) as u64).unit("1/256").doc("response to the ECN mark rate"),
        Param::uint("ecn_thresh", 0, 256, (BBR_UNIT / 2) as u64).unit("1/256").doc("ECN mark rate that ends probing"),
        Param::time("ecn_max_rtt", Time::from_micros(5_000)).doc("ECN logic only at or below this min RTT; 0: any RTT"),
        Param::uint("ecn_low", 0, 1, 0).doc("treat RFC 3168 / SCE ECN as shallow-threshold (TCP_ECN_LOW); l4s always is"),
        Param::uint("inflight_headroom", 0, 255, (BBR_UNIT * 15 / 100) as u64).unit("1/256").doc("headroom below inflight_hi"),
        Param::time("probe_rtt_win", Time::from_millis(5_000)).doc("PROBE_RTT when no lower RTT for this long (at most min_rtt_win)"),
        Param::time("probe_rtt_mode", Time::from_millis(200)).doc("time at the PROBE_RTT cwnd"),
        Param::time("min_rtt_win", Time::from_secs(10)).doc("min-RTT filter window"),
        Param::uint("bw_probe_max_rounds", 1, 255, 63).unit("rounds").doc("longest wait between bandwidth probes"),
        Param::time("bw_probe_base", Time::from_secs(2)).doc("base wait between bandwidth probes"),
        Param::time("bw_probe_rand", Time::from_secs(1)).doc("random extra wait between bandwidth probes"),
        Param::uint("extra_acked_gain", 0, 1024, BBR_UNIT as u64).unit("1/256").doc("aggregation allowance gain"),
    ],
    build: |a| {
        let c = Bbr3Params::from_args(a);
        if c.probe_rtt_win > c.min_rtt_win {
            return Err(a.invalid("probe_rtt_win must not exceed min_rtt_win"));
        }
        Ok(Arc::new(Bbr3Config { params: c }))
    },
};

/// "No bound" for the u32 bounds (`~0U`).
const NONE: u32 = u32::MAX;

/// google/bbr v3 `struct bbr` (PLB, the app-limited fast path and TLP state left out).
#[derive(Debug)]
pub struct Bbr3 {
    pub params: Bbr3Params,
    rng: Stream,
    pub probe_rtt_min_us: u32,
    pub probe_rtt_min_stamp: Time,
    bw_probe_up_rounds: u32,
    init_cwnd: u32,
    full_bw_now: bool,
    startup_ecn_rounds: u32,
    loss_in_cycle: bool,
    ecn_in_cycle: bool,
    loss_round_delivered: u64,
    undo_bw_lo: u64,
    undo_inflight_lo: u32,
    undo_inflight_hi: u32,
    pub bw_latest: u64,
    /// Lower bound on bandwidth (`u64::MAX`: none).
    pub bw_lo: u64,
    pub bw_hi: [u64; 2],
    pub inflight_latest: u32,
    pub inflight_lo: u32,
    pub inflight_hi: u32,
    bw_probe_up_cnt: u32,
    bw_probe_up_acks: u32,
    pub probe_wait: Time,
    pub ecn_eligible: bool,
    /// EWMA of the CE fraction, BBR_UNIT = 1.
    pub ecn_alpha: u32,
    pub bw_probe_samples: bool,
    prev_probe_too_high: bool,
    stopped_risky_probe: bool,
    rounds_since_probe: u32,
    loss_round_start: bool,
    pub loss_in_round: bool,
    pub ecn_in_round: bool,
    pub ack_phase: AckPhase,
    loss_events_in_round: u32,
    alpha_last_delivered: u64,
    alpha_last_delivered_ce: u64,
    /// `bbr_context.sample_bw` of the ACK being processed.
    sample_bw: u64,
    /// What v3 shares with v1.
    pub c: BbrCore,
}

impl Bbr3 {
    pub fn new(params: Bbr3Params, rng: Stream) -> Bbr3 {
        Bbr3 {
            params,
            rng,
            probe_rtt_min_us: NONE,
            probe_rtt_min_stamp: Time::ZERO,
            bw_probe_up_rounds: 0,
            init_cwnd: 10,
            full_bw_now: false,
            startup_ecn_rounds: 0,
            loss_in_cycle: false,
            ecn_in_cycle: false,
            loss_round_delivered: 0,
            undo_bw_lo: 0,
            undo_inflight_lo: 0,
            undo_inflight_hi: 0,
            bw_latest: 0,
            bw_lo: u64::MAX,
            bw_hi: [0; 2],
            inflight_latest: 0,
            inflight_lo: NONE,
            inflight_hi: NONE,
            bw_probe_up_cnt: NONE,
            bw_probe_up_acks: 0,
            probe_wait: Time::ZERO,
            ecn_eligible: false,
            ecn_alpha: BBR_UNIT,
            bw_probe_samples: false,
            prev_probe_too_high: false,
            stopped_risky_probe: false,
            rounds_since_probe: 0,
            loss_round_start: false,
            loss_in_round: false,
            ecn_in_round: false,
            ack_phase: AckPhase::Init,
            loss_events_in_round: 0,
            alpha_last_delivered: 0,
            alpha_last_delivered_ce: 0,
            sample_bw: 0,
            c: BbrCore::new(STARTUP_PACING_GAIN, STARTUP_CWND_GAIN, 1),
        }
    }

    /// `bbr_can_use_ecn`: ECN negotiated and marked as shallow-threshold.
    fn can_use_ecn(&self, tp: &TcpCcState) -> bool {
        match tp.ecn {
            EcnMode::Off => false,
            EcnMode::L4s => true,
            _ => self.params.ecn_low,
        }
    }
    /// `bbr_max_bw`.
    pub fn max_bw(&self) -> u64 {
        self.bw_hi[0].max(self.bw_hi[1])
    }
    /// `bbr_bw`: the max filter, bounded by `bw_lo`.
    pub fn bw(&self) -> u64 {
        self.max_bw().min(self.bw_lo)
    }
    /// v3 `bbr_tso_segs_goal`: ~1 ms of data plus an allowance that halves per 512 µs of
    /// min RTT, at least `tcp_min_tso_segs`.
    pub fn tso_segs_goal(&self, tp: &TcpCcState) -> u32 {
        let mut bytes = self.c.pacing_rate >> PACING_SHIFT;
        let r = self.c.min_rtt_us >> TSO_RTT_SHIFT;
        if r < 32 {
            bytes += GSO_LEGACY_MAX_SIZE >> r;
        }
        let bytes = bytes.min(GSO_BYTES_CAP);
        ((bytes / tp.mss as u64) as u32).max(MIN_TSO_SEGS)
    }
    pub fn bdp(&self, bw: u64, gain: u32) -> u32 {
        bdp(bw, self.c.min_rtt_us, gain, self.init_cwnd)
    }
    /// v3 `bbr_quantization_budget`: at least 3 TSO bursts and 4 packets; +2 in PROBE_UP.
    fn quantization_budget(&self, tp: &TcpCcState, cwnd: u32) -> u32 {
        let mut cwnd = cwnd.max(3 * self.tso_segs_goal(tp)).max(CWND_MIN_TARGET);
        if self.c.mode == Mode::ProbeBw && self.c.cycle_idx == UP {
            cwnd += 2;
        }
        cwnd
    }
    pub fn inflight(&self, tp: &TcpCcState, bw: u64, gain: u32) -> u32 {
        self.quantization_budget(tp, self.bdp(bw, gain))
    }
    fn packets_in_net_at_edt(&self, tp: &TcpCcState, inflight_now: u32) -> u32 {
        self.c.packets_in_net_at_edt(tp, inflight_now, self.bw(), self.tso_segs_goal(tp))
    }
    /// `bbr_probe_rtt_cwnd`.
    pub fn probe_rtt_cwnd(&self) -> u32 {
        CWND_MIN_TARGET.max(self.bdp(self.bw(), PROBE_RTT_CWND_GAIN))
    }

    /// v3 `bbr_set_cwnd` (no packet conservation: losses act through the bounds; the
    /// aggregation allowance also before the pipe is full).
    fn set_cwnd(&mut self, tp: &mut TcpCcState, acked: u32, bw: u64, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked > 0 {
            let aggr = self.c.ack_aggregation_cwnd(self.bw(), self.params.extra_acked_gain, false);
            let target = self.quantization_budget(tp, self.bdp(bw, gain) + aggr);
            cwnd = self.c.grow_cwnd(cwnd, acked, target, cwnd < 2 * self.init_cwnd);
        }
        self.c.apply_cwnd(tp, cwnd, self.probe_rtt_cwnd());
    }

    /// `bbr_update_round_start`.
    fn update_round_start(&mut self, tp: &TcpCcState, rs: &RateSample) {
        self.c.round_start = false;
        if rs.interval > Time::ZERO && rs.prior_delivered >= self.c.next_rtt_delivered {
            self.c.next_rtt_delivered = tp.delivered;
            self.c.round_start = true;
        }
    }

    /// `bbr_calculate_bw_sample`: rounded up.
    fn calculate_bw_sample(&mut self, rs: &RateSample) {
        self.sample_bw = 0;
        let i = us(rs.interval);
        if i > 0 && rs.delivered >= 0 {
            self.sample_bw = (rs.delivered as u64 * BW_UNIT).div_ceil(i);
        }
    }

    /// `bbr_update_ack_aggregation` (v3: a 1-round window before the pipe is full).
    fn update_ack_aggregation(&mut self, tp: &TcpCcState, rs: &RateSample) {
        let win = if self.c.full_bw_reached { EXTRA_ACKED_WIN_RTTS } else { 1 };
        self.c.update_ack_aggregation(tp, rs, self.bw(), self.params.extra_acked_gain, win);
    }

    /// `bbr_check_probe_rtt_done` done: v3 restamps its 5 s filter and exits PROBE_RTT.
    fn probe_rtt_done(&mut self, tp: &TcpCcState) {
        self.probe_rtt_min_stamp = tp.now;
        self.exit_probe_rtt(tp);
    }

    /// v3 `bbr_update_min_rtt`: a 5 s filter that times PROBE_RTT, feeding the 10 s one.
    fn update_min_rtt(&mut self, tp: &mut TcpCcState, rs: &RateSample) {
        let probe_rtt_expired = tp.now > self.probe_rtt_min_stamp + self.params.probe_rtt_win;
        if let Some(rtt) = rs.rtt {
            let rtt_us = us(rtt).min(NONE as u64 - 1) as u32;
            // Linux also requires !rs->is_ack_delayed for an expired refresh.
            if rtt_us < self.probe_rtt_min_us || probe_rtt_expired {
                self.probe_rtt_min_us = rtt_us;
                self.probe_rtt_min_stamp = tp.now;
            }
        }
        let min_rtt_expired = tp.now > self.c.min_rtt_stamp + self.params.min_rtt_win;
        if self.probe_rtt_min_us <= self.c.min_rtt_us || min_rtt_expired {
            self.c.min_rtt_us = self.probe_rtt_min_us;
            self.c.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
        if self.c.enter_probe_rtt(tp, probe_rtt_expired, self.params.probe_rtt_mode) {
            self.ack_phase = AckPhase::ProbeStopping;
            self.c.next_rtt_delivered = tp.delivered;
        }
        // v3 holds PROBE_RTT at bbr_probe_rtt_cwnd (max(4, BDP / 2)).
        if self.c.probe_rtt(tp, rs, self.params.probe_rtt_mode, self.probe_rtt_cwnd()) {
            self.probe_rtt_done(tp);
        }
    }

    fn update_gains(&mut self) {
        (self.c.pacing_gain, self.c.cwnd_gain) = match self.c.mode {
            Mode::Startup => (STARTUP_PACING_GAIN, STARTUP_CWND_GAIN),
            Mode::Drain => (DRAIN_GAIN, STARTUP_CWND_GAIN),
            Mode::ProbeBw => {
                let up = if self.c.cycle_idx == UP { BBR_UNIT * BW_PROBE_CWND_GAIN / 4 } else { 0 };
                (PACING_GAIN[self.c.cycle_idx as usize], CWND_GAIN + up)
            }
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    /// `bbr_advance_max_bw_filter`: keep the max of the last 1-2 probing cycles.
    fn advance_max_bw_filter(&mut self) {
        if self.bw_hi[1] == 0 {
            return;
        }
        self.bw_hi[0] = self.bw_hi[1];
        self.bw_hi[1] = 0;
    }
    fn reset_full_bw(&mut self) {
        self.c.full_bw = 0;
        self.c.full_bw_cnt = 0;
        self.full_bw_now = false;
    }
    /// `bbr_target_inflight`: the BDP, unless congestion cut cwnd.
    fn target_inflight(&self, tp: &TcpCcState) -> u32 {
        self.inflight(tp, self.bw(), BBR_UNIT).min(tp.cwnd)
    }
    fn is_probing_bandwidth(&self) -> bool {
        self.c.mode == Mode::Startup || (self.c.mode == Mode::ProbeBw && (self.c.cycle_idx == REFILL || self.c.cycle_idx == UP))
    }
    fn has_elapsed_in_phase(&self, tp: &TcpCcState, interval: Time) -> bool {
        tp.now > self.c.cycle_mstamp + interval
    }
    fn handle_queue_too_high_in_startup(&mut self, tp: &TcpCcState) {
        self.c.full_bw_reached = true;
        let bdp = self.inflight(tp, self.max_bw(), BBR_UNIT);
        self.inflight_hi = bdp.max(self.inflight_latest);
    }
    fn check_ecn_too_high_in_startup(&mut self, tp: &TcpCcState, ce_ratio: u32) {
        if self.c.full_bw_reached || !self.ecn_eligible || self.params.ecn_thresh == 0 {
            return;
        }
        if ce_ratio >= self.params.ecn_thresh {
            self.startup_ecn_rounds += 1;
        } else {
            self.startup_ecn_rounds = 0;
        }
        if self.startup_ecn_rounds >= FULL_ECN_CNT {
            self.handle_queue_too_high_in_startup(tp);
        }
    }
    /// `bbr_update_ecn_alpha`, once per round: the EWMA of the CE fraction, and whether the
    /// connection is ECN-eligible (min RTT <= `ecn_max_rtt`).
    fn update_ecn_alpha(&mut self, tp: &TcpCcState) {
        let max_rtt_us = us(self.params.ecn_max_rtt);
        if !self.ecn_eligible
            && self.can_use_ecn(tp)
            && self.params.ecn_factor > 0
            && (max_rtt_us == 0 || (self.c.min_rtt_us as u64) <= max_rtt_us)
        {
            self.ecn_eligible = true;
        }
        if !self.ecn_eligible {
            return;
        }
        let delivered = tp.delivered - self.alpha_last_delivered;
        let delivered_ce = tp.delivered_ce - self.alpha_last_delivered_ce;
        if delivered == 0 {
            return;
        }
        let ce_ratio = ((delivered_ce << BBR_SCALE) / delivered) as u32;
        let gain = self.params.ecn_alpha_gain;
        let alpha = (((BBR_UNIT - gain) * self.ecn_alpha) >> BBR_SCALE) + ((gain * ce_ratio) >> BBR_SCALE);
        self.ecn_alpha = alpha.min(BBR_UNIT);
        self.alpha_last_delivered = tp.delivered;
        self.alpha_last_delivered_ce = tp.delivered_ce;
        self.check_ecn_too_high_in_startup(tp, ce_ratio);
    }
    /// `bbr_raise_inflight_hi_slope`: double the probing volume each round of PROBE_UP.
    fn raise_inflight_hi_slope(&mut self, tp: &TcpCcState) {
        let growth = 1u32 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.bw_probe_up_cnt = (tp.cwnd / growth).max(1);
    }
    fn probe_inflight_hi_upward(&mut self, tp: &TcpCcState, rs: &RateSample) {
        if !tp.cwnd_limited_flag || tp.cwnd < self.inflight_hi {
            return;
        }
        self.bw_probe_up_acks += rs.acked_sacked;
        if self.bw_probe_up_acks >= self.bw_probe_up_cnt {
            let delta = self.bw_probe_up_acks / self.bw_probe_up_cnt;
            self.bw_probe_up_acks -= delta * self.bw_probe_up_cnt;
            self.inflight_hi = self.inflight_hi.saturating_add(delta);
        }
        if self.c.round_start {
            self.raise_inflight_hi_slope(tp);
        }
    }
    /// `bbr_is_inflight_too_high`: loss > 2 % of what was in flight, or CE > 50 % of the
    /// delivered packets (ECN-eligible connections only).
    pub fn is_inflight_too_high(&self, lost: u64, tx_in_flight: u32, delivered: i64, delivered_ce: i64) -> bool {
        if lost > 0 && tx_in_flight > 0 {
            let loss_thresh = (tx_in_flight as u64 * self.params.loss_thresh as u64) >> BBR_SCALE;
            if lost > loss_thresh {
                return true;
            }
        }
        if delivered_ce > 0 && delivered > 0 && self.ecn_eligible && self.params.ecn_thresh > 0 {
            let ecn_thresh = (delivered as u64 * self.params.ecn_thresh as u64) >> BBR_SCALE;
            if delivered_ce as u64 > ecn_thresh {
                return true;
            }
        }
        false
    }
    /// `bbr_inflight_hi_from_lost_skb`: the inflight at which the loss rate crossed the
    /// threshold inside this (one-packet) skb.
    pub fn inflight_hi_from_lost_skb(&self, tx_in_flight: u32, lost: u64) -> u32 {
        let pcount = 1u64;
        let Some(inflight_prev) = (tx_in_flight as u64).checked_sub(pcount) else { return NONE };
        let Some(lost_prev) = lost.checked_sub(pcount) else { return NONE };
        let thresh = self.params.loss_thresh as u64;
        let loss_budget = (inflight_prev * thresh + BBR_UNIT as u64 - 1) >> BBR_SCALE;
        let lost_prefix =
            if lost_prev >= loss_budget { 0 } else { ((loss_budget - lost_prev) << BBR_SCALE) / (BBR_UNIT as u64 - thresh) };
        (inflight_prev + lost_prefix).min(NONE as u64) as u32
    }
    /// `bbr_inflight_with_headroom`: leave 15 % of inflight_hi free.
    pub fn inflight_with_headroom(&self) -> u32 {
        if self.inflight_hi == NONE {
            return NONE;
        }
        let headroom = ((self.inflight_hi as u64 * self.params.inflight_headroom as u64) >> BBR_SCALE).max(1) as u32;
        self.inflight_hi.saturating_sub(headroom).max(CWND_MIN_TARGET)
    }
    /// `bbr_bound_cwnd_for_inflight_model`.
    fn bound_cwnd_for_inflight_model(&self, tp: &mut TcpCcState) {
        let mut cap = NONE;
        if self.c.mode == Mode::ProbeBw && self.c.cycle_idx != CRUISE {
            cap = self.inflight_hi;
        } else if self.c.mode == Mode::ProbeRtt || (self.c.mode == Mode::ProbeBw && self.c.cycle_idx == CRUISE) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo).max(CWND_MIN_TARGET);
        tp.cwnd = tp.cwnd.min(cap);
    }
    fn ecn_cut(&self) -> u32 {
        BBR_UNIT - ((self.ecn_alpha * self.params.ecn_factor) >> BBR_SCALE)
    }
    fn init_lower_bounds(&mut self, tp: &TcpCcState, init_bw: bool) {
        if init_bw && self.bw_lo == u64::MAX {
            self.bw_lo = self.max_bw();
        }
        if self.inflight_lo == NONE {
            self.inflight_lo = tp.cwnd;
        }
    }
    /// `bbr_adapt_lower_bounds`: once per round with loss or CE, outside bandwidth probing.
    fn adapt_lower_bounds(&mut self, tp: &TcpCcState) {
        if self.is_probing_bandwidth() {
            return;
        }
        let mut ecn_inflight_lo = NONE;
        if self.ecn_in_round && self.params.ecn_factor > 0 {
            self.init_lower_bounds(tp, false);
            ecn_inflight_lo = ((self.inflight_lo as u64 * self.ecn_cut() as u64) >> BBR_SCALE) as u32;
        }
        if self.loss_in_round {
            self.init_lower_bounds(tp, true);
            let cut = (BBR_UNIT - self.params.beta) as u64;
            self.bw_lo = self.bw_latest.max(((self.bw_lo as u128 * cut as u128) >> BBR_SCALE) as u64);
            self.inflight_lo = self.inflight_latest.max(((self.inflight_lo as u64 * cut) >> BBR_SCALE) as u32);
        }
        self.inflight_lo = self.inflight_lo.min(ecn_inflight_lo);
        self.bw_lo = self.bw_lo.max(1);
    }
    fn reset_lower_bounds(&mut self) {
        self.bw_lo = u64::MAX;
        self.inflight_lo = NONE;
    }
    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.ecn_in_round = false;
        self.loss_in_cycle = false;
        self.ecn_in_cycle = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }
    /// `bbr_update_latest_delivery_signals`.
    fn update_latest_delivery_signals(&mut self, tp: &TcpCcState, rs: &RateSample) {
        self.loss_round_start = false;
        if rs.interval == Time::ZERO || us(rs.interval) == 0 || rs.acked_sacked == 0 {
            return;
        }
        self.bw_latest = self.bw_latest.max(self.sample_bw);
        self.inflight_latest = self.inflight_latest.max(rs.delivered.max(0) as u32);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = tp.delivered;
            self.loss_round_start = true;
        }
    }
    fn advance_latest_delivery_signals(&mut self, rs: &RateSample) {
        if self.loss_round_start {
            self.bw_latest = self.sample_bw;
            self.inflight_latest = rs.delivered.max(0) as u32;
        }
    }
    /// `bbr_update_congestion_signals`.
    fn update_congestion_signals(&mut self, tp: &TcpCcState, rs: &RateSample) {
        if us(rs.interval) == 0 || rs.acked_sacked == 0 {
            return;
        }
        let bw = self.sample_bw;
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw_hi[1] = self.bw_hi[1].max(bw);
        }
        self.loss_in_round |= rs.losses > 0;
        if !self.loss_round_start {
            return;
        }
        self.adapt_lower_bounds(tp);
        self.loss_in_round = false;
        self.ecn_in_round = false;
    }
    /// `bbr_is_reno_coexistence_probe_time`.
    fn is_reno_coexistence_probe_time(&self, tp: &TcpCcState) -> bool {
        let rounds = self.params.bw_probe_max_rounds.min(self.target_inflight(tp));
        self.rounds_since_probe >= rounds
    }
    /// `bbr_pick_probe_wait`: 0-1 extra rounds, 2-3 s of wall clock.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_probe = rand_below(&mut self.rng, BW_PROBE_RAND_ROUNDS);
        let rand_us = us(self.params.bw_probe_rand).min(u32::MAX as u64) as u32;
        let extra = if rand_us > 0 { rand_below(&mut self.rng, rand_us) } else { 0 };
        self.probe_wait = self.params.bw_probe_base + Time::from_micros(extra as u64);
    }
    fn start_bw_probe_refill(&mut self, tp: &TcpCcState, bw_probe_up_rounds: u32) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = bw_probe_up_rounds;
        self.bw_probe_up_acks = 0;
        self.stopped_risky_probe = false;
        self.ack_phase = AckPhase::Refilling;
        self.c.next_rtt_delivered = tp.delivered;
        self.c.cycle_idx = REFILL;
    }
    fn start_bw_probe_up(&mut self, tp: &TcpCcState) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.c.next_rtt_delivered = tp.delivered;
        self.c.cycle_mstamp = tp.now;
        self.reset_full_bw();
        self.c.full_bw = self.sample_bw;
        self.c.cycle_idx = UP;
        self.raise_inflight_hi_slope(tp);
    }
    fn start_bw_probe_down(&mut self, tp: &TcpCcState) {
        self.reset_congestion_signals();
        self.bw_probe_up_cnt = NONE;
        self.pick_probe_wait();
        self.c.cycle_mstamp = tp.now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.c.next_rtt_delivered = tp.delivered;
        self.c.cycle_idx = DOWN;
    }
    fn start_bw_probe_cruise(&mut self) {
        if self.inflight_lo != NONE {
            self.inflight_lo = self.inflight_lo.min(self.inflight_hi);
        }
        self.c.cycle_idx = CRUISE;
    }
    /// `bbr_handle_inflight_too_high`: cut inflight_hi to max(tx_in_flight, 0.7 x target),
    /// once per probe, and stop probing.
    fn handle_inflight_too_high(&mut self, tp: &TcpCcState, tx_in_flight: u32, is_app_limited: bool) {
        self.prev_probe_too_high = true;
        self.bw_probe_samples = false;
        if !is_app_limited {
            let cut = ((self.target_inflight(tp) as u64 * (BBR_UNIT - self.params.beta) as u64) >> BBR_SCALE) as u32;
            self.inflight_hi = tx_in_flight.max(cut);
        }
        if self.c.mode == Mode::ProbeBw && self.c.cycle_idx == UP {
            self.start_bw_probe_down(tp);
        }
    }
    /// `bbr_adapt_upper_bounds`. Returns true when it decided a state transition.
    fn adapt_upper_bounds(&mut self, tp: &TcpCcState, rs: &RateSample) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.c.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.c.round_start {
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.c.mode == Mode::ProbeBw && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            if self.c.mode == Mode::ProbeBw && self.stopped_risky_probe && !self.prev_probe_too_high {
                self.start_bw_probe_refill(tp, 0);
                return true;
            }
        }
        if self.is_inflight_too_high(rs.lost, rs.tx_in_flight, rs.delivered, rs.delivered_ce) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(tp, rs.tx_in_flight, rs.is_app_limited);
            }
        } else {
            if self.inflight_hi == NONE {
                return false;
            }
            if rs.tx_in_flight > self.inflight_hi {
                self.inflight_hi = rs.tx_in_flight;
            }
            if self.c.mode == Mode::ProbeBw && self.c.cycle_idx == UP {
                self.probe_inflight_hi_upward(tp, rs);
            }
        }
        false
    }
    /// `bbr_check_time_to_probe_bw`.
    fn check_time_to_probe_bw(&mut self, tp: &TcpCcState) -> bool {
        if ECN_REPROBE_GAIN > 0 && self.ecn_eligible && self.ecn_in_cycle && !self.loss_in_cycle && tp.ca_state == CaState::Open {
            let v = ((self.inflight_hi as u64 * ECN_REPROBE_GAIN as u64) >> BBR_SCALE).max(1);
            let n = 63 - v.leading_zeros();
            self.start_bw_probe_refill(tp, n);
            return true;
        }
        if self.has_elapsed_in_phase(tp, self.probe_wait) || self.is_reno_coexistence_probe_time(tp) {
            self.start_bw_probe_refill(tp, 0);
            return true;
        }
        false
    }
    fn check_time_to_cruise(&self, tp: &TcpCcState, inflight: u32, bw: u64) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        inflight <= self.inflight(tp, bw, BBR_UNIT)
    }
    /// `bbr_update_cycle_phase`: the PROBE_BW state machine.
    fn update_cycle_phase(&mut self, tp: &TcpCcState, rs: &RateSample) {
        if !self.c.full_bw_reached {
            return;
        }
        if self.adapt_upper_bounds(tp, rs) {
            return;
        }
        if self.c.mode != Mode::ProbeBw {
            return;
        }
        let inflight = self.packets_in_net_at_edt(tp, rs.prior_in_flight);
        let bw = self.max_bw();
        match self.c.cycle_idx {
            CRUISE => {
                self.check_time_to_probe_bw(tp);
            }
            REFILL => {
                if self.c.round_start {
                    self.bw_probe_samples = true;
                    self.start_bw_probe_up(tp);
                }
            }
            UP => {
                let mut done = false;
                if self.prev_probe_too_high && inflight >= self.inflight_hi {
                    self.stopped_risky_probe = true;
                    done = true;
                } else if tp.cwnd_limited_flag && tp.cwnd >= self.inflight_hi {
                    self.reset_full_bw();
                    self.c.full_bw = self.sample_bw;
                } else if self.full_bw_now {
                    done = true;
                }
                if done {
                    self.prev_probe_too_high = false;
                    self.start_bw_probe_down(tp);
                }
            }
            _ => {
                if self.check_time_to_probe_bw(tp) {
                    return;
                }
                if self.check_time_to_cruise(tp, inflight, bw) {
                    self.start_bw_probe_cruise();
                }
            }
        }
    }
    fn exit_probe_rtt(&mut self, tp: &TcpCcState) {
        self.reset_lower_bounds();
        if self.c.full_bw_reached {
            self.c.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tp);
            self.start_bw_probe_cruise();
        } else {
            self.c.mode = Mode::Startup;
        }
    }
    /// `bbr_check_loss_too_high_in_startup`.
    fn check_loss_too_high_in_startup(&mut self, tp: &TcpCcState, rs: &RateSample) {
        if self.c.full_bw_reached {
            return;
        }
        if rs.losses > 0 && self.loss_events_in_round < 0xf {
            self.loss_events_in_round += 1;
        }
        if self.loss_round_start
            && tp.ca_state == CaState::Recovery
            && self.loss_events_in_round >= FULL_LOSS_CNT
            && self.is_inflight_too_high(rs.lost, rs.tx_in_flight, rs.delivered, rs.delivered_ce)
        {
            self.handle_queue_too_high_in_startup(tp);
            return;
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }
    /// v3 `bbr_check_full_bw_reached`: on the per-ACK sample, also used in PROBE_UP.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_now || rs.is_app_limited {
            return;
        }
        let thresh = (self.c.full_bw * FULL_BW_THRESH as u64) >> BBR_SCALE;
        if self.sample_bw >= thresh {
            self.reset_full_bw();
            self.c.full_bw = self.sample_bw;
            return;
        }
        if !self.c.round_start {
            return;
        }
        self.c.full_bw_cnt += 1;
        self.full_bw_now = self.c.full_bw_cnt >= FULL_BW_CNT;
        self.c.full_bw_reached |= self.full_bw_now;
    }
    fn check_drain(&mut self, tp: &mut TcpCcState) {
        if self.c.mode == Mode::Startup && self.c.full_bw_reached {
            self.c.mode = Mode::Drain;
            tp.ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT);
            self.reset_congestion_signals();
        }
        if self.c.mode == Mode::Drain
            && self.packets_in_net_at_edt(tp, tp.packets_in_flight()) <= self.inflight(tp, self.max_bw(), BBR_UNIT)
        {
            self.c.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tp);
        }
    }
    fn update_model(&mut self, tp: &mut TcpCcState, rs: &RateSample) {
        self.update_congestion_signals(tp, rs);
        self.update_ack_aggregation(tp, rs);
        self.check_loss_too_high_in_startup(tp, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(tp);
        self.update_cycle_phase(tp, rs);
        self.update_min_rtt(tp, rs);
    }
    /// Note a loss in this round (`bbr_note_loss`).
    fn note_loss(&mut self, tp: &TcpCcState) {
        if !self.loss_in_round {
            self.loss_round_delivered = tp.delivered;
        }
        self.loss_in_round = true;
        self.loss_in_cycle = true;
    }
}

impl CongestionControl for Bbr3 {
    fn name(&self) -> &'static str {
        BBR3.name
    }

    /// v3 `bbr_init`.
    fn init(&mut self, tp: &mut TcpCcState) {
        self.init_cwnd = tp.cwnd.min(0x7f);
        self.c.init(tp);
        self.probe_rtt_min_us = self.c.min_rtt_us;
        self.probe_rtt_min_stamp = tp.now;
        self.loss_round_delivered = tp.delivered + 1;
        self.loss_round_start = false;
        self.undo_bw_lo = 0;
        self.undo_inflight_lo = 0;
        self.undo_inflight_hi = 0;
        self.loss_events_in_round = 0;
        self.startup_ecn_rounds = 0;
        self.reset_congestion_signals();
        self.bw_lo = u64::MAX;
        self.bw_hi = [0; 2];
        self.inflight_lo = NONE;
        self.inflight_hi = NONE;
        self.reset_full_bw();
        self.bw_probe_up_cnt = NONE;
        self.bw_probe_up_acks = 0;
        self.bw_probe_up_rounds = 0;
        self.probe_wait = Time::ZERO;
        self.stopped_risky_probe = false;
        self.ack_phase = AckPhase::Init;
        self.rounds_since_probe = 0;
        self.bw_probe_samples = false;
        self.prev_probe_too_high = false;
        self.ecn_eligible = false;
        self.ecn_alpha = BBR_UNIT;
        self.alpha_last_delivered = 0;
        self.alpha_last_delivered_ce = 0;
        self.update_gains();
        tp.pacing_rate = self.c.pacing_rate as f64;
    }

    /// v3 `bbr_ssthresh`: save cwnd and the bounds for undo.
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        self.c.save_cwnd(tp);
        self.undo_bw_lo = self.bw_lo;
        self.undo_inflight_lo = self.inflight_lo;
        self.undo_inflight_hi = self.inflight_hi;
        tp.ssthresh
    }

    fn cong_avoid(&mut self, _tp: &mut TcpCcState, _acked: u32) {}

    /// v3 `bbr_set_state`.
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        if new == CaState::Loss {
            self.c.prev_ca_state = CaState::Loss;
            self.reset_full_bw();
            if !self.is_probing_bandwidth() && self.inflight_lo == NONE {
                self.inflight_lo = tp.cwnd.max(self.c.prior_cwnd);
            }
        } else if self.c.prev_ca_state == CaState::Loss {
            // bbr_exit_loss_recovery
            tp.cwnd = tp.cwnd.max(self.c.prior_cwnd);
        }
    }

    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        if self.c.cwnd_event(tp, ev, self.bw()) {
            self.probe_rtt_done(tp);
        }
    }

    /// v3 `bbr_main`.
    fn cong_control(&mut self, tp: &mut TcpCcState, rs: &RateSample) -> bool {
        self.update_round_start(tp, rs);
        if self.c.round_start {
            self.rounds_since_probe = (self.rounds_since_probe + 1).min(0xff);
            self.update_ecn_alpha(tp);
        }
        self.ecn_in_round |= self.ecn_eligible && rs.is_ece;
        self.calculate_bw_sample(rs);
        self.update_latest_delivery_signals(tp, rs);
        self.update_model(tp, rs);
        self.update_gains();
        let bw = self.bw();
        self.c.set_pacing_rate(tp, bw, self.c.pacing_gain);
        self.set_cwnd(tp, rs.acked_sacked, bw, self.c.cwnd_gain);
        self.bound_cwnd_for_inflight_model(tp);
        self.advance_latest_delivery_signals(rs);
        self.c.prev_ca_state = tp.ca_state;
        self.loss_in_cycle |= rs.lost > 0;
        self.ecn_in_cycle |= rs.delivered_ce > 0;
        tp.pacing_rate = self.c.pacing_rate as f64;
        true
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_skb_marked_lost`: while probing, find where the loss rate crossed 2 %.
    fn skb_marked_lost(&mut self, tp: &TcpCcState, skb: &LostSkb) {
        self.note_loss(tp);
        if !self.bw_probe_samples {
            return;
        }
        if self.is_inflight_too_high(skb.lost, skb.tx_in_flight, 0, 0) {
            let hi = self.inflight_hi_from_lost_skb(skb.tx_in_flight, skb.lost);
            self.handle_inflight_too_high(tp, hi, skb.is_app_limited);
        }
    }

    /// v3 `bbr_undo_cwnd`.
    fn undo_cwnd(&mut self, _tp: &TcpCcState) -> u32 {
        self.reset_full_bw();
        self.loss_in_round = false;
        self.bw_lo = self.bw_lo.max(self.undo_bw_lo);
        self.inflight_lo = self.inflight_lo.max(self.undo_inflight_lo);
        self.inflight_hi = self.inflight_hi.max(self.undo_inflight_hi);
        self.c.prior_cwnd
    }

    fn pacing_rate(&self, _tp: &TcpCcState) -> Option<f64> {
        Some(self.c.pacing_rate as f64)
    }

    fn needs_pacing(&self) -> bool {
        true
    }

    /// google/bbr v3 `.tso_segs = bbr_tso_segs` (`net/ipv4/tcp_bbr.c`,
    /// `bbr_tso_segs_generic` with the socket's `gso_max_size`, 64 KiB on a veth): it
    /// replaces `tcp_tso_autosize` in that tree's `tcp_tso_segs` (then `gso_max_segs`).
    fn tso_segs(&self, tp: &TcpCcState) -> Option<TsoSegs> {
        Some(TsoSegs::Exactly(self.tso_segs_goal(tp)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::bbr::tests::{bw_of_pps, Path};
    use crate::cc::{test_state, CcSpec};

    fn bbr3() -> Bbr3 {
        Bbr3::new(Bbr3Params::default(), Stream::new(1, "cc/0"))
    }

    #[test]
    fn constants_match_the_v3_source() {
        assert_eq!(STARTUP_PACING_GAIN, 710); // 2.77
        assert_eq!(STARTUP_CWND_GAIN, 512);
        assert_eq!(PACING_GAIN, [320, 232, 256, 256]);
        let p = Bbr3Params::default();
        assert_eq!((p.beta, p.loss_thresh, p.ecn_alpha_gain, p.ecn_factor, p.ecn_thresh, p.inflight_headroom), (76, 5, 16, 85, 128, 38));
    }

    /// Reaches PROBE_BW on a synthetic 4316 pkt/s, 40 ms path.
    fn steady() -> (Bbr3, Path) {
        let mut cc = bbr3();
        let mut p = Path::new(4316.0, Time::from_millis(40));
        cc.init(&mut p.tp);
        let mut modes = vec![cc.c.mode];
        for _ in 0..40 {
            p.round(&mut cc);
            if modes.last() != Some(&cc.c.mode) {
                modes.push(cc.c.mode);
            }
        }
        assert_eq!(&modes[..3], &[Mode::Startup, Mode::Drain, Mode::ProbeBw], "{modes:?}");
        (cc, p)
    }

    #[test]
    fn startup_drain_probe_bw_and_cruise_on_a_plateau() {
        let (cc, p) = steady();
        let est = cc.max_bw() as f64 / BW_UNIT as f64 * 1e6;
        assert!((est / 4316.0 - 1.0).abs() < 0.02, "{est}");
        assert_eq!(cc.c.min_rtt_us, 40_000);
        assert!(cc.inflight_hi == NONE && cc.inflight_lo == NONE, "no loss: no bounds");
        assert!(p.tp.cwnd <= cc.inflight(&p.tp, cc.max_bw(), CWND_GAIN + 64) + 2);
        // A probe is scheduled 2-3 s ahead.
        assert!(cc.probe_wait >= Time::from_secs(2) && cc.probe_wait < Time::from_secs(3));
    }

    #[test]
    fn loss_above_two_percent_in_a_probe_cuts_inflight_hi_in_closed_form() {
        let mut cc = bbr3();
        let mut tp = test_state(200, u32::MAX);
        tp.min_rtt = Time::from_millis(40);
        tp.srtt = Time::from_millis(40);
        cc.init(&mut tp);
        // Steady PROBE_UP with a 173-packet BDP and 200 packets of cwnd.
        cc.bw_hi = [bw_of_pps(4316.3), 0];
        cc.c.full_bw_reached = true;
        cc.c.mode = Mode::ProbeBw;
        cc.c.cycle_idx = UP;
        cc.bw_probe_samples = true;
        cc.c.pacing_rate = 6_000_000;
        // 3 of 100 in flight lost (3 % > 2 %): too high. 1 of 100 is not (1 % < 5/256).
        assert!(cc.is_inflight_too_high(3, 100, 0, 0));
        assert!(!cc.is_inflight_too_high(1, 100, 0, 0));
        assert!(cc.is_inflight_too_high(2, 100, 0, 0), "2 > floor(100 x 5/256) = 1");
        // The packet at which the loss rate crossed the threshold: inflight_prev 199 with
        // 2 earlier losses: budget = ceil(199 x 5/256) = 4; prefix = (4 - 2) x 256/251 = 2.
        assert_eq!(cc.inflight_hi_from_lost_skb(200, 3), 201);
        // Earlier losses already over the budget: the prefix is zero.
        assert_eq!(cc.inflight_hi_from_lost_skb(100, 10), 99);
        // A lost packet sent with 100 in flight, 10 lost since: inflight_hi = max(99,
        // 0.7 x target) where target = min(BDP + budget, cwnd) = 175, so 0.7 x 175 = 123.
        // (+2 packets of quantisation budget in PROBE_UP.)
        let target = cc.inflight(&tp, cc.bw(), BBR_UNIT).min(tp.cwnd);
        assert_eq!(target, 175);
        cc.skb_marked_lost(&tp, &LostSkb { tx_in_flight: 100, lost: 10, is_app_limited: false });
        assert_eq!(cc.inflight_hi, (175 * (256 - 76)) >> 8);
        assert_eq!(cc.inflight_hi, 123);
        assert_eq!(cc.c.cycle_idx, DOWN, "probing stops");
        // The loss was noted, then PROBE_DOWN reset the round's congestion signals.
        assert!(!cc.bw_probe_samples && !cc.loss_in_round);
        // Only once per probe: a second loss leaves inflight_hi alone.
        cc.skb_marked_lost(&tp, &LostSkb { tx_in_flight: 300, lost: 50, is_app_limited: false });
        assert_eq!(cc.inflight_hi, 123);
        // With a large tx_in_flight the bound keeps what was in flight.
        let mut c2 = bbr3();
        c2.init(&mut tp);
        c2.bw_hi = cc.bw_hi;
        c2.c.full_bw_reached = true;
        c2.c.mode = Mode::ProbeBw;
        c2.c.cycle_idx = UP;
        c2.bw_probe_samples = true;
        c2.skb_marked_lost(&tp, &LostSkb { tx_in_flight: 300, lost: 30, is_app_limited: false });
        // budget = ceil(299 x 5 / 256) = 6 < 29: prefix 0 -> 299.
        assert_eq!(c2.inflight_hi, 299);
    }

    #[test]
    fn loss_outside_probing_cuts_lower_bounds_by_beta_once_per_round() {
        let (mut cc, mut p) = steady();
        while cc.c.cycle_idx != CRUISE && cc.c.cycle_idx != DOWN {
            p.round(&mut cc);
        }
        let cwnd = p.tp.cwnd;
        let max_bw = cc.max_bw();
        // One ACK reporting a loss, then the start of the next loss round.
        cc.skb_marked_lost(&p.tp, &LostSkb { tx_in_flight: cwnd, lost: 1, is_app_limited: false });
        cc.bw_latest = 0;
        cc.inflight_latest = 0;
        cc.loss_round_delivered = 0;
        p.tp.now += Time::from_millis(1);
        let rs = RateSample {
            delivered: 1,
            interval: Time::from_millis(40),
            acked_sacked: 1,
            prior_delivered: p.tp.delivered,
            prior_in_flight: cwnd,
            ..RateSample::default()
        };
        cc.cong_control(&mut p.tp, &rs);
        assert_eq!(cc.inflight_lo, ((cwnd as u64 * 180) >> 8) as u32, "inflight_lo = 0.7 cwnd");
        // bw_lo = max(bw_latest, 0.7 x max_bw); bw_latest is this ACK's 1-packet sample.
        assert_eq!(cc.bw_lo, ((max_bw as u128 * 180) >> 8) as u64);
        assert!(p.tp.cwnd <= cc.inflight_lo);
        assert!(!cc.loss_in_round, "the round's signal is consumed");
    }

    fn ecn_flow(min_rtt: Time, ecn: EcnMode) -> (Bbr3, TcpCcState) {
        let mut cc = bbr3();
        let mut tp = test_state(100, u32::MAX);
        tp.min_rtt = min_rtt;
        tp.srtt = min_rtt;
        tp.ecn = ecn;
        cc.init(&mut tp);
        cc.bw_hi = [bw_of_pps(10_000.0), 0];
        cc.c.full_bw_reached = true;
        cc.c.mode = Mode::ProbeBw;
        cc.start_bw_probe_down(&tp);
        cc.start_bw_probe_cruise();
        (cc, tp)
    }

    /// One round of 100 packets with `ce` of them CE-marked, as one ACK.
    fn ecn_round(cc: &mut Bbr3, tp: &mut TcpCcState, ce: u64) {
        tp.now += tp.min_rtt;
        let prior = tp.delivered;
        tp.delivered += 100;
        tp.delivered_ce += ce;
        tp.delivered_mstamp = tp.now;
        let rs = RateSample {
            delivered: 100,
            delivered_ce: ce as i64,
            interval: tp.min_rtt,
            rtt: Some(tp.min_rtt),
            acked_sacked: 100,
            prior_delivered: prior,
            prior_in_flight: 100,
            tx_in_flight: 100,
            is_ece: ce > 0,
            ..RateSample::default()
        };
        tp.packets_out = 0;
        cc.cong_control(tp, &rs);
    }

    #[test]
    fn ecn_response_only_below_five_ms_min_rtt() {
        // A clean round (eligibility is decided at a round start), then a round with 20 %
        // CE: at the next loss-round start in CRUISE, inflight_lo = cwnd x (1 - alpha/3).
        let (mut cc, mut tp) = ecn_flow(Time::from_millis(4), EcnMode::L4s);
        ecn_round(&mut cc, &mut tp, 0);
        assert!(cc.ecn_eligible);
        assert_eq!(cc.c.cycle_idx, CRUISE);
        let cwnd = tp.cwnd as u64;
        ecn_round(&mut cc, &mut tp, 20);
        // Updated at each round start: 0 % CE, then 20 % (51/256).
        let alpha = ((256 - 16) * 256) >> 8;
        let alpha = (((256 - 16) * alpha) >> 8) + ((16 * ((20 << 8) / 100)) >> 8);
        assert_eq!(cc.ecn_alpha, alpha);
        let cut = 256 - ((alpha * 85) >> 8) as u64;
        assert_eq!(cc.inflight_lo, ((cwnd * cut) >> 8) as u32, "CE cut inflight_lo");
        // Marks without loss: the next ACK re-probes at once (bbr_ecn_reprobe_gain).
        ecn_round(&mut cc, &mut tp, 20);
        assert_eq!(cc.c.cycle_idx, REFILL);
        // 6 ms: ECN ignored entirely.
        let (mut c6, mut t6) = ecn_flow(Time::from_millis(6), EcnMode::L4s);
        ecn_round(&mut c6, &mut t6, 0);
        for _ in 0..3 {
            ecn_round(&mut c6, &mut t6, 20);
        }
        assert!(!c6.ecn_eligible);
        assert_eq!(c6.inflight_lo, NONE);
        assert_eq!(c6.c.cycle_idx, CRUISE);
        assert_eq!(c6.ecn_alpha, BBR_UNIT, "alpha not updated");
        // Exactly 5 ms is eligible (`<=` in the source).
        let (mut c5, mut t5) = ecn_flow(Time::from_millis(5), EcnMode::L4s);
        ecn_round(&mut c5, &mut t5, 0);
        assert!(c5.ecn_eligible);
        // RFC 3168 ECN is not shallow-threshold unless ecn_low is set.
        let (mut cr, mut trr) = ecn_flow(Time::from_millis(4), EcnMode::Rfc3168);
        ecn_round(&mut cr, &mut trr, 0);
        assert!(!cr.ecn_eligible);
        let mut cl = Bbr3::new(Bbr3Params { ecn_low: true, ..Bbr3Params::default() }, Stream::new(1, "x"));
        let mut tl = trr;
        tl.delivered = 0;
        tl.delivered_ce = 0;
        cl.init(&mut tl);
        ecn_round(&mut cl, &mut tl, 0);
        assert!(cl.ecn_eligible);
    }

    #[test]
    fn ecn_alpha_is_a_one_sixteenth_ewma_of_the_ce_fraction() {
        let (mut cc, mut tp) = ecn_flow(Time::from_millis(1), EcnMode::L4s);
        ecn_round(&mut cc, &mut tp, 0);
        // From 1 (after the clean round: 15/16), the EWMA converges to F = 25 % = 64/256,
        // whatever the state machine does meanwhile.
        let mut alpha = cc.ecn_alpha;
        for _ in 0..150 {
            ecn_round(&mut cc, &mut tp, 25);
            alpha = (((256 - 16) * alpha) >> 8) + ((16 * 64) >> 8);
            assert_eq!(cc.ecn_alpha, alpha);
        }
        assert!(cc.ecn_alpha.abs_diff(64) <= 4, "alpha {} vs F = 64/256", cc.ecn_alpha);
    }

    #[test]
    fn probe_rtt_every_five_seconds_at_half_bdp() {
        let (mut cc, mut p) = steady();
        let stamp = cc.probe_rtt_min_stamp;
        // RTT samples equal to min_rtt do not refresh the 5 s filter (strict `<`).
        let mut entered = None;
        for _ in 0..2_000 {
            p.tp.now += Time::from_millis(5);
            p.tp.delivered += 20;
            p.tp.delivered_mstamp = p.tp.now;
            let rs = RateSample {
                delivered: 173,
                interval: Time::from_millis(40),
                rtt: Some(Time::from_millis(40)),
                acked_sacked: 20,
                prior_in_flight: 173,
                prior_delivered: p.tp.delivered - 173,
                tx_in_flight: 173,
                ..RateSample::default()
            };
            p.tp.packets_out = 173;
            cc.cong_control(&mut p.tp, &rs);
            if cc.c.mode == Mode::ProbeRtt {
                entered = Some(p.tp.now);
                break;
            }
        }
        let e = entered.expect("PROBE_RTT");
        assert!(e > stamp + Time::from_secs(5) && e <= stamp + Time::from_secs(5) + Time::from_millis(5), "{e:?} {stamp:?}");
        // cwnd = max(4, BDP/2) = ceil(172.65 / 2) = 87.
        assert_eq!(cc.probe_rtt_cwnd(), 87);
        assert_eq!(p.tp.cwnd, 87);
    }

    #[test]
    fn parses_parameters_and_bbr2_alias() {
        let s = CcSpec::parse("bbr2 beta 128 ecn_max_rtt 10ms ecn_low 1").unwrap();
        assert_eq!(s.config().name(), "bbr3");
        let d = format!("{:?}", s.config());
        assert!(d.contains("beta: 128") && d.contains("ecn_low: true"), "{d}");
        assert!(CcSpec::parse("bbr3").is_ok());
        assert!(CcSpec::parse("bbr3 probe_rtt_win 20s").is_err());
        assert!(CcSpec::parse("bbr3 gain 2").unwrap_err().contains("beta"));
    }
}
