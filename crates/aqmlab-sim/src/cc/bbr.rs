//! BBR v1 (Bottleneck Bandwidth and RTT), modelled on Linux `net/ipv4/tcp_bbr.c` as read at
//! torvalds/linux@02dc96ef6c25 (the version with `bbr_packets_in_net_at_edt` and ACK
//! aggregation, Linux 5.x), with the windowed filter of `lib/win_minmax.c`.
//!
//! The model, in Linux's own fixed point so that rounding matches the kernel:
//! - bandwidth `bw` in packets per µs << 24 (`BW_SCALE`), a windowed max of the delivery-rate
//!   samples over 10 packet-timed rounds (`bbr_update_bw`, `minmax_running_max`);
//! - `min_rtt_us`, refreshed by any sample <= it and otherwise expiring after 10 s
//!   (`bbr_update_min_rtt`), which sends the flow into PROBE_RTT (cwnd 4 for >= 200 ms and
//!   one round);
//! - STARTUP (gain 2/ln 2) until the bandwidth grew < 25 % in 3 rounds
//!   (`bbr_check_full_bw_reached`), DRAIN (gain ln 2 / 2) until the packets in the network at
//!   the next departure time fit one BDP (`bbr_check_drain`), then PROBE_BW gain cycling
//!   [5/4, 3/4, 1 x 6] from a random phase (`bbr_reset_probe_bw_mode`);
//! - cwnd = cwnd_gain x BDP + ACK-aggregation allowance + quantisation budget, approached by
//!   slow start (`bbr_set_cwnd`), packet conservation in the first round of Recovery
//!   (`bbr_set_cwnd_to_recover_or_restore`);
//! - long-term (policer) bandwidth sampling (`bbr_lt_bw_sampling`);
//! - pacing rate = pacing_gain x bw x 99 % (`bbr_set_pacing_rate`).
//!
//! What v1 shares with v3 (`bbr3.rs`) is in [`BbrCore`] (`bbr_common.rs`); this file keeps what
//! only v1 has. Differences from the kernel are listed in docs/algorithms/bbr.md.

use super::bbr_common::*;
use super::{CaEvent, CaState, CcConfig, CongestionControl, RateSample, TcpCcState};
use super::CcKind;
use crate::params::{Args, Param};
use crate::profile::Stack;
use crate::rng::Stream;
use crate::time::Time;
use std::sync::Arc;

/// `bbr_high_gain` = 2/ln 2 (2.885) in BBR_UNIT, rounded up.
pub const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
/// `bbr_cwnd_gain`.
pub const CWND_GAIN: u32 = BBR_UNIT * 2;
/// `bbr_pacing_gain[]`: the PROBE_BW cycle.
pub const PACING_GAIN: [u32; 8] =
    [BBR_UNIT * 5 / 4, BBR_UNIT * 3 / 4, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT];
const CYCLE_LEN: u32 = 8;
/// `bbr_cycle_rand`: the start phase is drawn from 7 of the 8 phases (never the 3/4 one).
const CYCLE_RAND: u32 = 7;
/// `TCP_INIT_CWND`.
const TCP_INIT_CWND: u32 = 10;
/// `bbr_min_tso_rate` in bit/s.
const MIN_TSO_RATE: u64 = 1_200_000;
// Long-term bandwidth sampling.
const LT_INTVL_MIN_RTTS: u32 = 4;
const LT_LOSS_THRESH: u64 = 50;
const LT_BW_RATIO: u64 = BBR_UNIT as u64 / 8;
const LT_BW_DIFF: u64 = 4000 / 8;
const LT_BW_MAX_RTTS: u32 = 48;
/// Linux `lib/win_minmax.c`: Kathleen Nichols' windowed max with three samples (best,
/// second best from a later sub-window, third best), time in rounds here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WinMax {
    s: [(u32, u64); 3],
}

impl WinMax {
    pub fn get(&self) -> u64 {
        self.s[0].1
    }
    /// `minmax_reset`.
    pub fn reset(&mut self, t: u32, v: u64) {
        self.s = [(t, v); 3];
    }
    /// `minmax_running_max`: add sample `v` at time `t` over a window of `win`.
    pub fn update(&mut self, win: u32, t: u32, v: u64) -> u64 {
        let val = (t, v);
        if v >= self.s[0].1 || t.wrapping_sub(self.s[2].0) > win {
            self.reset(t, v);
            return v;
        }
        if v >= self.s[1].1 {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].1 {
            self.s[2] = val;
        }
        // minmax_subwin_update
        let dt = t.wrapping_sub(self.s[0].0);
        if dt > win {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if t.wrapping_sub(self.s[0].0) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].1
    }
}

/// `bbr` parameters. Linux v1 has no module parameters; these are its constants, exposed
/// for experiments under their Linux names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BbrParams {
    /// `bbr_bw_rtts`: bandwidth filter window in rounds (CYCLE_LEN + 2 = 10).
    pub bw_rtts: u32,
    /// `bbr_min_rtt_win_sec`: min-RTT filter window (10 s).
    pub min_rtt_win: Time,
    /// `bbr_probe_rtt_mode_ms`: time at 4 packets in PROBE_RTT (200 ms); 0 disables it.
    pub probe_rtt_mode: Time,
    /// Fixed `bbr_tso_segs_goal()`; 0 (default) uses Linux's formula from the pacing rate.
    pub tso_segs: u32,
    /// `bbr_extra_acked_gain` in BBR_UNIT (256 = 1.0; 0 disables the aggregation allowance).
    pub extra_acked_gain: u32,
}

impl Default for BbrParams {
    /// Linux's constants (the table's defaults).
    fn default() -> Self {
        BbrParams::from_args(&BBR.defaults(Stack::Linux))
    }
}

impl BbrParams {
    fn from_args(a: &Args) -> Self {
        BbrParams {
            bw_rtts: a.u32("bw_rtts"),
            min_rtt_win: a.time("min_rtt_win"),
            probe_rtt_mode: a.time("probe_rtt_mode"),
            tso_segs: a.u32("tso_segs"),
            extra_acked_gain: a.u32("extra_acked_gain"),
        }
    }
}

#[derive(Debug, PartialEq)]
struct BbrConfig {
    params: BbrParams,
}

impl CcConfig for BbrConfig {
    fn name(&self) -> &'static str {
        BBR.name
    }
    fn build(&self, rng: Stream, _stack: crate::profile::Stack) -> super::Cc {
        super::Cc::Bbr(Box::new(Bbr::new(self.params, rng)))
    }
}

/// A min-RTT window of zero would expire the filter on every sample (and PROBE_RTT with it).
fn positive_window(key: &str, v: crate::params::Value) -> Result<Option<crate::params::Value>, String> {
    match v {
        crate::params::Value::Time(t) if t < Time::from_millis(1) => Err(format!("{key} {t} is below 1ms")),
        v => Ok(Some(v)),
    }
}

/// `bbr [bw_rtts N] [min_rtt_win T] [probe_rtt_mode T] [tso_segs N] [extra_acked_gain N]`:
/// Linux v1 has no module parameters; these are its constants under their Linux names.
pub const BBR: CcKind = CcKind {
    name: "bbr",
    doc: "BBR v1 (tcp_bbr.c)",
    params: &[
        Param::uint("bw_rtts", 1, 1000, (CYCLE_LEN + 2) as u64).unit("rounds").doc("bandwidth filter window (bbr_bw_rtts)"),
        Param::time("min_rtt_win", Time::from_secs(10)).doc("min-RTT filter window (bbr_min_rtt_win_sec; at least 1ms)").check(positive_window),
        Param::time("probe_rtt_mode", Time::from_millis(200)).doc("time at 4 packets in PROBE_RTT; 0 disables it (bbr_probe_rtt_mode_ms)"),
        Param::uint("tso_segs", 0, 127, 0).unit("packets").doc("fixed bbr_tso_segs_goal(); 0: Linux's formula"),
        Param::uint("extra_acked_gain", 0, 1024, BBR_UNIT as u64).unit("1/256").doc("aggregation allowance gain; 0 disables it"),
    ],
    build: |a| Ok(Arc::new(BbrConfig { params: BbrParams::from_args(a) })),
};

/// Linux `struct bbr` (v1).
#[derive(Debug)]
pub struct Bbr {
    pub params: BbrParams,
    rng: Stream,
    pub bw: WinMax,
    pub rtt_cnt: u32,
    pub packet_conservation: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    pub lt_use_bw: bool,
    pub lt_bw: u64,
    lt_last_delivered: u64,
    lt_last_stamp_ms: u64,
    lt_last_lost: u64,
    /// What v1 shares with v3.
    pub c: BbrCore,
}

impl Bbr {
    pub fn new(params: BbrParams, rng: Stream) -> Bbr {
        Bbr {
            params,
            rng,
            bw: WinMax::default(),
            rtt_cnt: 0,
            packet_conservation: false,
            lt_is_sampling: false,
            lt_rtt_cnt: 0,
            lt_use_bw: false,
            lt_bw: 0,
            lt_last_delivered: 0,
            lt_last_stamp_ms: 0,
            lt_last_lost: 0,
            c: BbrCore::new(HIGH_GAIN, HIGH_GAIN, 0),
        }
    }

    /// `bbr_max_bw`.
    pub fn max_bw(&self) -> u64 {
        self.bw.get()
    }
    /// `bbr_bw`: the long-term rate while policed, else the max filter.
    pub fn bw(&self) -> u64 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.max_bw()
        }
    }




    /// `bbr_tso_segs_goal` (with `bbr_min_tso_segs`), or the fixed `tso_segs` parameter.
    pub fn tso_segs_goal(&self, tp: &TcpCcState) -> u32 {
        if self.params.tso_segs > 0 {
            return self.params.tso_segs;
        }
        let bytes = (self.c.pacing_rate >> PACING_SHIFT).min(GSO_BYTES_CAP);
        let min_segs = if self.c.pacing_rate < MIN_TSO_RATE >> 3 { 1 } else { 2 };
        ((bytes / tp.mss as u64) as u32).max(min_segs).min(0x7f)
    }


    /// `bbr_bdp`.
    pub fn bdp(&self, bw: u64, gain: u32) -> u32 {
        bdp(bw, self.c.min_rtt_us, gain, TCP_INIT_CWND)
    }

    /// `bbr_quantization_budget`.
    fn quantization_budget(&self, tp: &TcpCcState, cwnd: u32) -> u32 {
        let mut cwnd = cwnd + 3 * self.tso_segs_goal(tp);
        cwnd = (cwnd + 1) & !1;
        if self.c.mode == Mode::ProbeBw && self.c.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`.
    pub fn inflight(&self, tp: &TcpCcState, bw: u64, gain: u32) -> u32 {
        let i = self.bdp(bw, gain);
        self.quantization_budget(tp, i)
    }

    /// `bbr_packets_in_net_at_edt`.
    fn packets_in_net_at_edt(&self, tp: &TcpCcState, inflight_now: u32) -> u32 {
        self.c.packets_in_net_at_edt(tp, inflight_now, self.bw(), self.tso_segs_goal(tp))
    }


    /// `bbr_set_cwnd_to_recover_or_restore`: packet conservation in the first round of
    /// Recovery, restore the pre-recovery cwnd when it ends. Returns the cwnd and whether
    /// packet conservation applies.
    fn set_cwnd_to_recover_or_restore(&mut self, tp: &TcpCcState, rs: &RateSample, acked: u32) -> (u32, bool) {
        let prev = self.c.prev_ca_state;
        let state = tp.ca_state;
        let mut cwnd = tp.cwnd;
        if rs.losses > 0 {
            cwnd = (cwnd as i64 - rs.losses as i64).max(1) as u32;
        }
        if state == CaState::Recovery && prev != CaState::Recovery {
            self.packet_conservation = true;
            self.c.next_rtt_delivered = tp.delivered;
            cwnd = tp.packets_in_flight() + acked;
        } else if ca_rank(prev) >= ca_rank(CaState::Recovery) && ca_rank(state) < ca_rank(CaState::Recovery) {
            cwnd = cwnd.max(self.c.prior_cwnd);
            self.packet_conservation = false;
        }
        self.c.prev_ca_state = state;
        if self.packet_conservation {
            return (cwnd.max(tp.packets_in_flight() + acked), true);
        }
        (cwnd, false)
    }

    /// `bbr_set_cwnd`: slow start towards the target, or snap down to it once the pipe is
    /// full; 4 packets in PROBE_RTT. v1 keeps packet conservation in Recovery (v3 has none).
    fn set_cwnd(&mut self, tp: &mut TcpCcState, rs: &RateSample, acked: u32, bw: u64, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked > 0 {
            let (c, conserving) = self.set_cwnd_to_recover_or_restore(tp, rs, acked);
            cwnd = c;
            if !conserving {
                let aggr = self.c.ack_aggregation_cwnd(self.bw(), self.params.extra_acked_gain, true);
                let target = self.quantization_budget(tp, self.bdp(bw, gain) + aggr);
                cwnd = self.c.grow_cwnd(cwnd, acked, target, tp.delivered < TCP_INIT_CWND as u64);
            }
        }
        self.c.apply_cwnd(tp, cwnd, CWND_MIN_TARGET);
    }

    /// `bbr_is_next_cycle_phase`.
    fn is_next_cycle_phase(&self, tp: &TcpCcState, rs: &RateSample) -> bool {
        let is_full_length = us(tp.delivered_mstamp.saturating_sub(self.c.cycle_mstamp)) > self.c.min_rtt_us as u64;
        if self.c.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(tp, rs.prior_in_flight);
        let bw = self.max_bw();
        if self.c.pacing_gain > BBR_UNIT {
            return is_full_length && (rs.losses > 0 || inflight >= self.inflight(tp, bw, self.c.pacing_gain));
        }
        is_full_length || inflight <= self.inflight(tp, bw, BBR_UNIT)
    }

    fn advance_cycle_phase(&mut self, tp: &TcpCcState) {
        self.c.cycle_idx = (self.c.cycle_idx + 1) & (CYCLE_LEN - 1);
        self.c.cycle_mstamp = tp.delivered_mstamp;
    }

    /// `bbr_reset_probe_bw_mode`: a random start phase other than the draining 3/4 one.
    fn reset_probe_bw_mode(&mut self, tp: &TcpCcState) {
        self.c.mode = Mode::ProbeBw;
        self.c.cycle_idx = CYCLE_LEN - 1 - rand_below(&mut self.rng, CYCLE_RAND);
        self.advance_cycle_phase(tp);
    }

    fn reset_mode(&mut self, tp: &TcpCcState) {
        if !self.c.full_bw_reached {
            self.c.mode = Mode::Startup;
        } else {
            self.reset_probe_bw_mode(tp);
        }
    }

    fn reset_lt_bw_sampling_interval(&mut self, tp: &TcpCcState) {
        self.lt_last_stamp_ms = us(tp.delivered_mstamp) / 1_000;
        self.lt_last_delivered = tp.delivered;
        self.lt_last_lost = tp.lost;
        self.lt_rtt_cnt = 0;
    }

    fn reset_lt_bw_sampling(&mut self, tp: &TcpCcState) {
        self.lt_bw = 0;
        self.lt_use_bw = false;
        self.lt_is_sampling = false;
        self.reset_lt_bw_sampling_interval(tp);
    }

    /// `bbr_lt_bw_interval_done`: two consistent lossy intervals mean a policer.
    fn lt_bw_interval_done(&mut self, tp: &TcpCcState, bw: u64) {
        if self.lt_bw > 0 {
            let diff = bw.abs_diff(self.lt_bw);
            if diff * BBR_UNIT as u64 <= LT_BW_RATIO * self.lt_bw
                || rate_bytes_per_sec(diff, tp.mss, BBR_UNIT, PACING_MARGIN_PERCENT) <= LT_BW_DIFF
            {
                self.lt_bw = (bw + self.lt_bw) >> 1;
                self.lt_use_bw = true;
                self.c.pacing_gain = BBR_UNIT;
                self.lt_rtt_cnt = 0;
                return;
            }
        }
        self.lt_bw = bw;
        self.reset_lt_bw_sampling_interval(tp);
    }

    /// `bbr_lt_bw_sampling`: token-bucket policer detection.
    fn lt_bw_sampling(&mut self, tp: &TcpCcState, rs: &RateSample) {
        if self.lt_use_bw {
            if self.c.mode == Mode::ProbeBw && self.c.round_start {
                self.lt_rtt_cnt += 1;
                if self.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt_bw_sampling(tp);
                    self.reset_probe_bw_mode(tp);
                }
            }
            return;
        }
        if !self.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval(tp);
            self.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        if self.c.round_start {
            self.lt_rtt_cnt += 1;
        }
        if self.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        if rs.losses == 0 {
            return;
        }
        let lost = tp.lost - self.lt_last_lost;
        let delivered = tp.delivered - self.lt_last_delivered;
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH * delivered {
            return;
        }
        let t_ms = (us(tp.delivered_mstamp) / 1_000) as i64 - self.lt_last_stamp_ms as i64;
        if t_ms < 1 {
            return;
        }
        let bw = delivered * BW_UNIT / (t_ms as u64 * 1_000);
        self.lt_bw_interval_done(tp, bw);
    }

    /// `bbr_update_bw`: round counting and the max filter.
    fn update_bw(&mut self, tp: &TcpCcState, rs: &RateSample) {
        self.c.round_start = false;
        let interval_us = us(rs.interval);
        if rs.delivered < 0 || interval_us == 0 {
            return;
        }
        if rs.prior_delivered >= self.c.next_rtt_delivered {
            self.c.next_rtt_delivered = tp.delivered;
            self.rtt_cnt += 1;
            self.c.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(tp, rs);
        let bw = rs.delivered as u64 * BW_UNIT / interval_us;
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw.update(self.params.bw_rtts, self.rtt_cnt, bw);
        }
    }

    /// `bbr_update_ack_aggregation` (a 5-round window).
    fn update_ack_aggregation(&mut self, tp: &TcpCcState, rs: &RateSample) {
        self.c.update_ack_aggregation(tp, rs, self.bw(), self.params.extra_acked_gain, EXTRA_ACKED_WIN_RTTS);
    }

    /// `bbr_check_full_bw_reached`: 3 rounds without 25 % growth.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.c.full_bw_reached || !self.c.round_start || rs.is_app_limited {
            return;
        }
        let thresh = (self.c.full_bw * FULL_BW_THRESH as u64) >> BBR_SCALE;
        if self.max_bw() >= thresh {
            self.c.full_bw = self.max_bw();
            self.c.full_bw_cnt = 0;
            return;
        }
        self.c.full_bw_cnt += 1;
        self.c.full_bw_reached = self.c.full_bw_cnt >= FULL_BW_CNT;
    }

    /// `bbr_check_drain`.
    fn check_drain(&mut self, tp: &mut TcpCcState) {
        if self.c.mode == Mode::Startup && self.c.full_bw_reached {
            self.c.mode = Mode::Drain;
            tp.ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT);
        }
        if self.c.mode == Mode::Drain
            && self.packets_in_net_at_edt(tp, tp.packets_in_flight()) <= self.inflight(tp, self.max_bw(), BBR_UNIT)
        {
            self.reset_probe_bw_mode(tp);
        }
    }

    /// `bbr_check_probe_rtt_done` done: v1 restamps its one min-RTT filter and resets the mode.
    fn probe_rtt_done(&mut self, tp: &TcpCcState) {
        self.c.min_rtt_stamp = tp.now;
        self.reset_mode(tp);
    }

    /// `bbr_update_min_rtt`: the 10 s min filter and PROBE_RTT.
    fn update_min_rtt(&mut self, tp: &mut TcpCcState, rs: &RateSample) {
        let expired = tp.now > self.c.min_rtt_stamp + self.params.min_rtt_win;
        if let Some(rtt) = rs.rtt {
            let rtt_us = us(rtt).min(u32::MAX as u64 - 1) as u32;
            // Linux also requires !rs->is_ack_delayed for an expired refresh; the receiver
            // model does not flag delayed ACKs (see the docs).
            if rtt_us <= self.c.min_rtt_us || expired {
                self.c.min_rtt_us = rtt_us;
                self.c.min_rtt_stamp = tp.now;
            }
        }
        self.c.enter_probe_rtt(tp, expired, self.params.probe_rtt_mode);
        // v1 holds PROBE_RTT at bbr_cwnd_min_target (4 packets).
        if self.c.probe_rtt(tp, rs, self.params.probe_rtt_mode, CWND_MIN_TARGET) {
            self.probe_rtt_done(tp);
        }
    }

    /// `bbr_update_gains`.
    fn update_gains(&mut self) {
        (self.c.pacing_gain, self.c.cwnd_gain) = match self.c.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (if self.lt_use_bw { BBR_UNIT } else { PACING_GAIN[self.c.cycle_idx as usize] }, CWND_GAIN),
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    /// `bbr_update_model`.
    fn update_model(&mut self, tp: &mut TcpCcState, rs: &RateSample) {
        self.update_bw(tp, rs);
        self.update_ack_aggregation(tp, rs);
        if self.c.mode == Mode::ProbeBw && self.is_next_cycle_phase(tp, rs) {
            self.advance_cycle_phase(tp);
        }
        self.check_full_bw_reached(rs);
        self.check_drain(tp);
        self.update_min_rtt(tp, rs);
        self.update_gains();
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        BBR.name
    }

    /// `bbr_init`.
    fn init(&mut self, tp: &mut TcpCcState) {
        self.c.init(tp);
        self.rtt_cnt = 0;
        self.packet_conservation = false;
        self.bw.reset(self.rtt_cnt, 0);
        self.reset_lt_bw_sampling(tp);
        self.update_gains();
        tp.pacing_rate = self.c.pacing_rate as f64;
    }

    /// `bbr_ssthresh`: remember cwnd for the end of recovery; ssthresh is left alone.
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        self.c.save_cwnd(tp);
        tp.ssthresh
    }

    /// Never called: BBR implements `cong_control`.
    fn cong_avoid(&mut self, _tp: &mut TcpCcState, _acked: u32) {}

    /// `bbr_set_state`: an RTO ends the round and counts as a loss for policer detection.
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        if new == CaState::Loss {
            self.c.prev_ca_state = CaState::Loss;
            self.c.full_bw = 0;
            self.c.round_start = true;
            let rs = RateSample { losses: 1, ..RateSample::default() };
            self.lt_bw_sampling(tp, &rs);
        }
    }

    /// `bbr_cwnd_event`: restart from idle.
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        if self.c.cwnd_event(tp, ev, self.bw()) {
            self.probe_rtt_done(tp);
        }
    }

    /// `bbr_main`.
    fn cong_control(&mut self, tp: &mut TcpCcState, rs: &RateSample) -> bool {
        self.update_model(tp, rs);
        let bw = self.bw();
        self.c.set_pacing_rate(tp, bw, self.c.pacing_gain);
        self.set_cwnd(tp, rs, rs.acked_sacked, bw, self.c.cwnd_gain);
        tp.pacing_rate = self.c.pacing_rate as f64;
        true
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_undo_cwnd`: a spurious slow-down resets full-pipe and policer detection.
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        self.c.full_bw = 0;
        self.c.full_bw_cnt = 0;
        self.reset_lt_bw_sampling(tp);
        tp.cwnd
    }

    fn pacing_rate(&self, _tp: &TcpCcState) -> Option<f64> {
        Some(self.c.pacing_rate as f64)
    }

    fn needs_pacing(&self) -> bool {
        true
    }

    /// `bbr_min_tso_segs` (`.min_tso_segs`, torvalds/linux `net/ipv4/tcp_bbr.c`): one segment
    /// per skb below `bbr_min_tso_rate` (1.2 Mbit/s = 150 kB/s of pacing rate), else 2.
    fn min_tso_segs(&self, tp: &TcpCcState) -> Option<u32> {
        Some(if (tp.pacing_rate as u64) < MIN_TSO_RATE >> 3 { 1 } else { 2 })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cc::{test_state, CcSpec};

    pub(crate) const MSS: u32 = 1448;

    /// Bandwidth in BBR units for `pps` packets per second.
    pub(crate) fn bw_of_pps(pps: f64) -> u64 {
        (pps / 1e6 * BW_UNIT as f64) as u64
    }

    /// A synthetic path: a bottleneck of `pps` packets/s and base RTT `rtt`, one ACK per
    /// `per_ack` packets; the sender keeps min(cwnd, what the pacing rate allows per RTT)
    /// in flight. Enough to drive the state machine with consistent rate samples.
    pub(crate) struct Path {
        pub tp: TcpCcState,
        pub pps: f64,
        pub rtt: Time,
        pub per_ack: u32,
    }

    impl Path {
        pub fn new(pps: f64, rtt: Time) -> Path {
            let mut tp = test_state(10, u32::MAX);
            tp.mss = MSS;
            tp.srtt = rtt;
            tp.min_rtt = rtt;
            tp.now = Time::from_millis(1);
            tp.packets_out = 10;
            Path { tp, pps, rtt, per_ack: 2 }
        }
        /// One round: the sender keeps `flight` = min(cwnd, pacing rate x base RTT) in
        /// flight, refilling as ACKs arrive; the flight is ACKed in `per_ack` chunks at the
        /// bottleneck rate (or the sending rate if lower), after a queueing delay when the
        /// flight exceeds the BDP.
        pub fn round(&mut self, cc: &mut dyn CongestionControl) {
            let send_pps = (cc.pacing_rate(&self.tp).unwrap_or(0.0) / MSS as f64).max(1.0);
            let paced = (send_pps * self.rtt.as_secs_f64()).ceil() as u32;
            let flight = self.tp.cwnd.min(paced).max(4);
            let pps = self.pps.min(send_pps);
            // Queueing delay when the flight exceeds the BDP.
            let bdp = self.pps * self.rtt.as_secs_f64();
            let queue_s = ((flight as f64 - bdp) / self.pps).max(0.0);
            let rtt = self.rtt + Time::from_secs_f64(queue_s);
            let round_start_delivered = self.tp.delivered;
            let start = self.tp.now;
            let mut acked = 0;
            while acked < flight {
                let n = self.per_ack.min(flight - acked);
                acked += n;
                self.tp.now = start + Time::from_secs_f64(acked as f64 / pps);
                self.tp.delivered += n as u64;
                self.tp.delivered_mstamp = self.tp.now;
                let interval = rtt.max(Time::from_secs_f64(flight as f64 / pps));
                let rs = RateSample {
                    delivered: flight as i64,
                    interval,
                    rtt: Some(rtt),
                    acked_sacked: n,
                    prior_in_flight: flight,
                    prior_delivered: round_start_delivered,
                    tx_in_flight: flight,
                    ..RateSample::default()
                };
                self.tp.packets_out = flight;
                self.tp.edt = self.tp.now;
                cc.cong_control(&mut self.tp, &rs);
                if self.tp.app_limited != 0 && self.tp.delivered > self.tp.app_limited {
                    self.tp.app_limited = 0;
                }
            }
            self.tp.now = start + rtt.max(Time::from_secs_f64(flight as f64 / pps));
        }
    }

    pub(crate) fn bbr() -> Bbr {
        Bbr::new(BbrParams::default(), Stream::new(1, "cc/0"))
    }

    #[test]
    fn windowed_max_forgets_a_peak_after_the_window() {
        let mut f = WinMax::default();
        f.reset(0, 0);
        f.update(10, 1, 100);
        for t in 2..=11 {
            assert_eq!(f.update(10, t, 50), 100, "round {t}: the peak is still in the window");
        }
        // Round 12: the peak (round 1) is more than 10 rounds old.
        assert_eq!(f.update(10, 12, 50), 50);
        // A new max replaces everything at once.
        assert_eq!(f.update(10, 13, 70), 70);
        // Decreasing samples: the best of the window survives, later ones take over in order.
        let mut g = WinMax::default();
        g.reset(0, 90);
        let mut seen = Vec::new();
        for t in 1..=30 {
            seen.push(g.update(10, t, 90 - 3 * t as u64));
        }
        assert_eq!(seen[9], 90, "round 10 still sees round 0");
        assert!(seen[10] < 90, "round 11 has forgotten round 0");
        assert!(seen.windows(2).all(|w| w[1] <= w[0]));
        // The filter never reports a value older than the window.
        for (i, v) in seen.iter().enumerate() {
            let t = i as u64 + 1;
            assert!(*v <= 90 - 3 * t.saturating_sub(10).min(30), "round {t}: {v}");
        }
    }

    #[test]
    fn gains_and_fixed_point_match_linux() {
        assert_eq!(HIGH_GAIN, 739);
        assert_eq!(DRAIN_GAIN, 88);
        assert_eq!(PACING_GAIN, [320, 192, 256, 256, 256, 256, 256, 256]);
        // 50 Mbit/s of 1448-byte payload = 4316.3 pkt/s; BDP at 40 ms = 172.65 -> 173.
        let bw = bw_of_pps(4316.3);
        assert_eq!(bdp(bw, 40_000, BBR_UNIT, 10), 173);
        assert_eq!(bdp(bw, 40_000, CWND_GAIN, 10), 346);
        // Pacing at 99 % of bw x gain, in bytes/s.
        let r = rate_bytes_per_sec(bw, MSS, BBR_UNIT, 1) as f64;
        assert!((r / (4316.3 * 1448.0 * 0.99) - 1.0).abs() < 1e-4, "{r}");
    }

    #[test]
    fn startup_drain_probe_bw_on_a_plateau() {
        let mut cc = bbr();
        let mut p = Path::new(4316.0, Time::from_millis(40));
        cc.init(&mut p.tp);
        let mut modes = vec![cc.c.mode];
        let mut full_at = None;
        for r in 0..40 {
            p.round(&mut cc);
            if modes.last() != Some(&cc.c.mode) {
                modes.push(cc.c.mode);
            }
            if cc.c.full_bw_reached && full_at.is_none() {
                full_at = Some(r);
            }
        }
        assert_eq!(modes, vec![Mode::Startup, Mode::Drain, Mode::ProbeBw], "{modes:?}");
        // The bottleneck is reached when 2.89x growth per round hits 4316 pkt/s x 40 ms;
        // then 3 rounds without 25 % growth.
        let full_at = full_at.unwrap();
        assert!((7..=11).contains(&full_at), "full pipe after {full_at} rounds");
        // The estimate is the plateau.
        let est = cc.max_bw() as f64 / BW_UNIT as f64 * 1e6;
        assert!((est / 4316.0 - 1.0).abs() < 0.02, "bw estimate {est} pkt/s");
        // Steady state: cwnd = 2 BDP + quantisation budget (+2 in the 5/4 phase).
        let target = cc.inflight(&p.tp, cc.max_bw(), CWND_GAIN);
        assert!(p.tp.cwnd + 2 >= target && p.tp.cwnd <= target + 2, "cwnd {} vs target {target}", p.tp.cwnd);
        // DRAIN exported ssthresh = one BDP plus the quantisation budget, for monitoring.
        assert!(p.tp.ssthresh < 250, "ssthresh {}", p.tp.ssthresh);
    }

    #[test]
    fn gain_cycle_order_and_one_min_rtt_per_phase() {
        let mut cc = bbr();
        let mut p = Path::new(4316.0, Time::from_millis(40));
        cc.init(&mut p.tp);
        while cc.c.mode != Mode::ProbeBw {
            p.round(&mut cc);
        }
        // Drive one ACK per 10 ms at the plateau with a flight of one BDP and watch the
        // phase changes: each 1.0 phase lasts just over one min_rtt (40 ms).
        let mut changes: Vec<(u32, Time)> = vec![(cc.c.cycle_idx, p.tp.now)];
        for _ in 0..400 {
            p.tp.now += Time::from_millis(10);
            p.tp.delivered += 43;
            p.tp.delivered_mstamp = p.tp.now;
            p.tp.edt = p.tp.now;
            let rs = RateSample {
                delivered: 173,
                interval: Time::from_millis(40),
                rtt: Some(Time::from_millis(40)),
                acked_sacked: 43,
                // The 5/4 phase ends with 1.25 BDP (quantised) in flight, the 3/4 phase as
                // soon as the flight is back to one BDP.
                prior_in_flight: if cc.c.cycle_idx == 1 { 150 } else { 260 },
                prior_delivered: p.tp.delivered - 173,
                ..RateSample::default()
            };
            p.tp.packets_out = 173;
            cc.cong_control(&mut p.tp, &rs);
            if cc.c.cycle_idx != changes.last().unwrap().0 {
                changes.push((cc.c.cycle_idx, p.tp.now));
            }
        }
        let idx: Vec<u32> = changes.iter().map(|c| c.0).collect();
        for w in idx.windows(2) {
            assert_eq!(w[1], (w[0] + 1) % 8, "phases advance in order: {idx:?}");
        }
        assert!(idx.len() >= 20, "{idx:?}");
        for w in changes.windows(2).skip(1) {
            let d = w[1].1 - w[0].1;
            // Phase 1 (3/4) ends as soon as inflight <= BDP: at its first ACK here. The
            // others last > min_rtt (40 ms), i.e. 50 ms with one ACK per 10 ms.
            if w[0].0 == 1 {
                assert_eq!(d, Time::from_millis(10), "drain phase");
            } else {
                assert_eq!(d, Time::from_millis(50), "phase {} lasted {d:?}", w[0].0);
            }
        }
        // Pacing gain follows the table.
        assert_eq!(cc.c.pacing_gain, PACING_GAIN[cc.c.cycle_idx as usize]);
    }

    #[test]
    fn random_start_phase_is_never_the_drain_phase_and_is_seeded() {
        let mut counts = [0u32; 8];
        for seed in 0..400 {
            let mut cc = Bbr::new(BbrParams::default(), Stream::new(seed, "cc/0"));
            let tp = test_state(10, u32::MAX);
            cc.reset_probe_bw_mode(&tp);
            counts[cc.c.cycle_idx as usize] += 1;
        }
        assert_eq!(counts[1], 0, "{counts:?}");
        for (i, c) in counts.iter().enumerate() {
            if i != 1 {
                assert!(*c > 30, "phase {i} drawn {c} times: {counts:?}");
            }
        }
        let draw = |seed| {
            let mut cc = Bbr::new(BbrParams::default(), Stream::new(seed, "cc/3"));
            let tp = test_state(10, u32::MAX);
            (0..5).map(|_| { cc.reset_probe_bw_mode(&tp); cc.c.cycle_idx }).collect::<Vec<_>>()
        };
        assert_eq!(draw(9), draw(9));
    }

    #[test]
    fn min_rtt_expires_after_ten_seconds_and_probe_rtt_holds_four_packets() {
        // Without the ACK-aggregation allowance, so that the restored cwnd is exactly the
        // 2 BDP target (the synthetic ACK rate below differs from the bw estimate).
        let mut cc = Bbr::new(BbrParams { extra_acked_gain: 0, ..BbrParams::default() }, Stream::new(1, "cc/0"));
        let mut p = Path::new(4316.0, Time::from_millis(40));
        cc.init(&mut p.tp);
        while cc.c.mode != Mode::ProbeBw {
            p.round(&mut cc);
        }
        let stamp = cc.c.min_rtt_stamp;
        assert_eq!(cc.c.min_rtt_us, 40_000);
        // Samples above min_rtt (a standing queue) never refresh it...
        let mut entered = None;
        let mut t = p.tp.now;
        while entered.is_none() {
            t += Time::from_millis(5);
            p.tp.now = t;
            p.tp.delivered += 20;
            p.tp.delivered_mstamp = t;
            let rs = RateSample {
                delivered: 173,
                interval: Time::from_millis(45),
                rtt: Some(Time::from_millis(45)),
                acked_sacked: 20,
                prior_in_flight: 200,
                prior_delivered: p.tp.delivered - 173,
                ..RateSample::default()
            };
            p.tp.packets_out = 200;
            cc.cong_control(&mut p.tp, &rs);
            if cc.c.mode == Mode::ProbeRtt {
                entered = Some(t);
            }
        }
        // ...so PROBE_RTT starts at the first ACK after stamp + 10 s, and the expired
        // filter takes the current sample.
        let e = entered.unwrap();
        assert!(e > stamp + Time::from_secs(10) && e <= stamp + Time::from_secs(10) + Time::from_millis(5), "{e:?} vs {stamp:?}");
        assert_eq!(cc.c.min_rtt_us, 45_000);
        assert_eq!(p.tp.cwnd, 4);
        assert!(p.tp.app_limited > 0, "PROBE_RTT marks the flow app-limited");
        let saved = cc.c.prior_cwnd;
        assert!(saved > 300, "cwnd saved for the exit: {saved}");
        // Flight drains to 4: the 200 ms timer starts; exit needs 200 ms and a round.
        p.tp.packets_out = 4;
        let ack = |p: &mut Path, cc: &mut Bbr, dt_ms: u64| {
            p.tp.now += Time::from_millis(dt_ms);
            p.tp.delivered += 2;
            p.tp.delivered_mstamp = p.tp.now;
            let rs = RateSample {
                delivered: 4,
                interval: Time::from_millis(40),
                rtt: Some(Time::from_millis(40)),
                acked_sacked: 2,
                prior_in_flight: 4,
                prior_delivered: p.tp.delivered - 4,
                is_app_limited: true,
                ..RateSample::default()
            };
            cc.cong_control(&mut p.tp, &rs);
        };
        ack(&mut p, &mut cc, 5);
        let done = cc.c.probe_rtt_done_stamp.expect("timer armed");
        assert_eq!(done, p.tp.now + Time::from_millis(200));
        // A fresh 40 ms sample resets the filter but not the mode.
        assert_eq!(cc.c.min_rtt_us, 40_000);
        while p.tp.now <= done {
            assert_eq!(cc.c.mode, Mode::ProbeRtt);
            assert_eq!(p.tp.cwnd, 4);
            ack(&mut p, &mut cc, 10);
        }
        ack(&mut p, &mut cc, 10);
        assert_eq!(cc.c.mode, Mode::ProbeBw, "back to PROBE_BW (the pipe was full)");
        // cwnd = max(cwnd, prior_cwnd), then (same ACK, as in bbr_main) capped by the target.
        let target = cc.inflight(&p.tp, cc.bw(), CWND_GAIN) + cc.c.ack_aggregation_cwnd(cc.bw(), cc.params.extra_acked_gain, true);
        assert_eq!(p.tp.cwnd, saved.min(target), "cwnd restored");
        // The exit restarts the 10 s clock, and 40 ms samples (= min_rtt) keep refreshing it.
        assert_eq!(cc.c.min_rtt_stamp, p.tp.now);
    }

    #[test]
    fn a_sample_equal_to_min_rtt_refreshes_the_filter() {
        let mut cc = bbr();
        let mut tp = test_state(10, u32::MAX);
        tp.min_rtt = Time::from_millis(40);
        tp.srtt = Time::from_millis(40);
        cc.init(&mut tp);
        tp.now = Time::from_secs(9);
        let rs = RateSample { rtt: Some(Time::from_millis(40)), delivered: -1, ..RateSample::default() };
        cc.cong_control(&mut tp, &rs);
        assert_eq!(cc.c.min_rtt_stamp, Time::from_secs(9));
        tp.now = Time::from_secs(18);
        cc.cong_control(&mut tp, &rs);
        assert_ne!(cc.c.mode, Mode::ProbeRtt);
    }

    #[test]
    fn packet_conservation_in_first_recovery_round_then_restore() {
        let mut cc = bbr();
        let mut p = Path::new(4316.0, Time::from_millis(40));
        cc.init(&mut p.tp);
        while cc.c.mode != Mode::ProbeBw {
            p.round(&mut cc);
        }
        let before = p.tp.cwnd;
        // Loss detected: the sender calls ssthresh (saves cwnd) and enters Recovery.
        // bbr_ssthresh leaves snd_ssthresh as it is (the BDP exported by DRAIN).
        assert_eq!(cc.ssthresh(&p.tp), p.tp.ssthresh);
        assert_eq!(cc.c.prior_cwnd, before);
        p.tp.ca_state = CaState::Recovery;
        p.tp.packets_out = 150;
        let rs = RateSample { acked_sacked: 3, losses: 2, delivered: 100, interval: Time::from_millis(40), prior_in_flight: 155, prior_delivered: 0, ..RateSample::default() };
        cc.cong_control(&mut p.tp, &rs);
        // cwnd = in flight + acked: send one packet per packet delivered.
        assert_eq!(p.tp.cwnd, 153);
        assert!(cc.packet_conservation);
        p.tp.packets_out = 151;
        let rs2 = RateSample { acked_sacked: 2, ..rs };
        let rs2 = RateSample { losses: 0, ..rs2 };
        cc.cong_control(&mut p.tp, &rs2);
        assert_eq!(p.tp.cwnd, 153, "max(cwnd, in_flight + acked)");
        // Recovery ends: cwnd back to at least the saved one.
        p.tp.ca_state = CaState::Open;
        let rs3 = RateSample { prior_delivered: p.tp.delivered, ..rs2 };
        cc.cong_control(&mut p.tp, &rs3);
        assert!(!cc.packet_conservation);
        assert!(p.tp.cwnd >= before.min(cc.inflight(&p.tp, cc.bw(), CWND_GAIN)), "{} vs {before}", p.tp.cwnd);
    }

    #[test]
    fn policer_is_detected_from_two_consistent_lossy_intervals() {
        let mut cc = bbr();
        let mut tp = test_state(100, u32::MAX);
        tp.min_rtt = Time::from_millis(40);
        tp.srtt = Time::from_millis(40);
        cc.init(&mut tp);
        cc.c.full_bw_reached = true;
        cc.c.mode = Mode::ProbeBw;
        // 1000 pkt/s delivered with 25 % loss, one round per 40 ms, losses on every ACK.
        for i in 1..=40u64 {
            tp.now = Time::from_millis(40 * i);
            tp.delivered += 40;
            tp.lost += 10;
            tp.delivered_mstamp = tp.now;
            cc.c.round_start = true;
            let rs = RateSample { losses: 10, delivered: 40, interval: Time::from_millis(40), ..RateSample::default() };
            cc.lt_bw_sampling(&tp, &rs);
            if cc.lt_use_bw {
                break;
            }
        }
        assert!(cc.lt_use_bw);
        let lt = cc.lt_bw as f64 / BW_UNIT as f64 * 1e6;
        assert!((lt - 1000.0).abs() < 5.0, "{lt}");
        cc.update_gains();
        assert_eq!(cc.c.pacing_gain, BBR_UNIT, "no probing while policed");
    }

    #[test]
    fn parses_parameters() {
        let s = CcSpec::parse("bbr min_rtt_win 5s probe_rtt_mode 100ms tso_segs 1 bw_rtts 8").unwrap();
        assert_eq!(s.config().name(), "bbr");
        let d = format!("{:?}", s.config());
        assert!(d.contains("tso_segs: 1") && d.contains("bw_rtts: 8"), "{d}");
        assert!(CcSpec::parse("bbr").is_ok());
        assert!(CcSpec::parse("bbr beta 3").unwrap_err().contains("min_rtt_win"));
        assert!(CcSpec::parse("bbr tso_segs 500").is_err());
    }

    /// `bbr_min_tso_segs`: 1 below `bbr_min_tso_rate` (1.2 Mbit/s = 150 000 B/s), else 2.
    #[test]
    fn min_tso_segs_is_one_below_the_min_tso_rate() {
        let cc = Bbr::new(BbrParams::default(), Stream::new(1, "cc/0"));
        let mut tp = crate::cc::test_state(10, u32::MAX);
        tp.pacing_rate = 149_999.0;
        assert_eq!(cc.min_tso_segs(&tp), Some(1));
        tp.pacing_rate = 150_000.0;
        assert_eq!(cc.min_tso_segs(&tp), Some(2));
    }
}