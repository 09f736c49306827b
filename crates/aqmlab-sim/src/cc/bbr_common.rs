//! What BBR v1 (`bbr.rs`, Linux `net/ipv4/tcp_bbr.c` at torvalds/linux@02dc96ef6c25) and BBR
//! v3 (`bbr3.rs`, google/bbr branch v3 `net/ipv4/tcp_bbr.c` at google/bbr@001a430b3ddb) share
//! to the letter: the fixed point, the constants v3 kept, and [`BbrCore`], the state and logic
//! the two `tcp_bbr.c` files write the same way: round and mode bookkeeping, the pacing rate
//! (`bbr_init_pacing_rate_from_rtt`, `bbr_set_pacing_rate`), `bbr_save_cwnd`,
//! `bbr_packets_in_net_at_edt`, the ACK-aggregation estimate (`bbr_update_ack_aggregation`,
//! `bbr_ack_aggregation_cwnd`), the common steps of `bbr_set_cwnd`, PROBE_RTT entry, hold and
//! exit (the PROBE_RTT half of `bbr_update_min_rtt`, `bbr_check_probe_rtt_done`) and the
//! restart from idle of `bbr_cwnd_event`.
//!
//! Where the versions differ, the caller passes the difference in: its bandwidth estimate
//! (`bbr_bw`: v1 the max filter or the policer rate, v3 bounded by `bw_lo`), its TSO goal, its
//! PROBE_RTT cwnd (v1 4 packets, v3 max(4, BDP / 2)), its slow-start allowance, and whether
//! the aggregation allowance waits for a full pipe (v1) or not (v3). What is left in each
//! version's file (the min-RTT filters, gain cycling, v1's packet conservation and policer
//! detection, v3's bounds and ECN) is where the two sources differ.

use super::{CaEvent, CaState, RateSample, TcpCcState};
use crate::rng::Stream;
use crate::time::Time;

/// Bandwidth fixed point: packets per µs << 24 (Linux `BW_SCALE`).
pub(crate) const BW_SCALE: u32 = 24;
pub(crate) const BW_UNIT: u64 = 1 << BW_SCALE;
/// Gain fixed point (Linux `BBR_SCALE`): 256 = 1.0.
pub(crate) const BBR_SCALE: u32 = 8;
pub(crate) const BBR_UNIT: u32 = 1 << BBR_SCALE;

/// `bbr_drain_gain` = 1 / 2.885.
pub const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
/// `bbr_cwnd_min_target`.
pub(crate) const CWND_MIN_TARGET: u32 = 4;
/// `bbr_full_bw_thresh` (x1.25) and `bbr_full_bw_cnt` (3 rounds).
pub(crate) const FULL_BW_THRESH: u32 = BBR_UNIT * 5 / 4;
pub(crate) const FULL_BW_CNT: u32 = 3;
/// `bbr_pacing_margin_percent`.
pub(crate) const PACING_MARGIN_PERCENT: u64 = 1;
/// `GSO_MAX_SIZE - 1 - MAX_TCP_HEADER` (65536 - 1 - 320).
pub(crate) const GSO_BYTES_CAP: u64 = 65_536 - 1 - 320;
/// `sk_pacing_shift` default (pacing_rate >> 10 ~ 1 ms of data).
pub(crate) const PACING_SHIFT: u32 = 10;
// ACK aggregation.
pub(crate) const EXTRA_ACKED_WIN_RTTS: u32 = 5;
pub(crate) const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
pub(crate) const EXTRA_ACKED_MAX_US: u64 = 100_000;

/// Linux `bbr_rate_bytes_per_sec`: bw (pkts/µs << 24) x mss x gain, less `margin` percent.
pub(crate) fn rate_bytes_per_sec(bw: u64, mss: u32, gain: u32, margin: u64) -> u64 {
    let r = (bw as u128 * mss as u128 * gain as u128) >> BBR_SCALE;
    ((r * (1_000_000 / 100 * (100 - margin)) as u128) >> BW_SCALE) as u64
}

/// Linux `bbr_bdp`: ceil(bw x min_rtt x gain) in packets; `None` min RTT gives `init`.
pub(crate) fn bdp(bw: u64, min_rtt_us: u32, gain: u32, init: u32) -> u32 {
    if min_rtt_us == u32::MAX {
        return init;
    }
    let w = bw as u128 * min_rtt_us as u128;
    ((w * gain as u128) >> BBR_SCALE).div_ceil(BW_UNIT as u128).min(u32::MAX as u128) as u32
}

/// Microseconds, truncated as Linux's `tcp_stamp_us_delta`.
pub(crate) fn us(t: Time) -> u64 {
    t.0 / 1_000
}

/// Ordering of Linux `enum tcp_ca_state` (Open < Disorder < CWR < Recovery < Loss).
pub(crate) fn ca_rank(s: CaState) -> u8 {
    match s {
        CaState::Open => 0,
        CaState::Disorder => 1,
        CaState::Cwr => 2,
        CaState::Recovery => 3,
        CaState::Loss => 4,
    }
}

/// Linux `prandom_u32_max(n)` / `get_random_u32_below(n)` from the flow's seeded stream.
pub(crate) fn rand_below(rng: &mut Stream, n: u32) -> u32 {
    ((rng.next_u32() as u64 * n as u64) >> 32) as u32
}

/// `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// The state both versions keep under the same names (`struct bbr`).
#[derive(Debug)]
pub struct BbrCore {
    /// Start-up pacing gain (`bbr_high_gain` in v1, `bbr_startup_pacing_gain` in v3), used by
    /// `bbr_init_pacing_rate_from_rtt`.
    startup_pacing_gain: u32,
    /// The least pacing rate in bytes/s (v3's `bbr_rate_bytes_per_sec` returns at least 1;
    /// v1's may return 0).
    min_pacing_rate: u64,
    pub min_rtt_us: u32,
    pub min_rtt_stamp: Time,
    pub probe_rtt_done_stamp: Option<Time>,
    pub next_rtt_delivered: u64,
    pub cycle_mstamp: Time,
    pub mode: Mode,
    pub prev_ca_state: CaState,
    pub round_start: bool,
    pub idle_restart: bool,
    pub probe_rtt_round_done: bool,
    pub pacing_gain: u32,
    pub cwnd_gain: u32,
    pub full_bw_reached: bool,
    pub full_bw_cnt: u32,
    pub cycle_idx: u32,
    pub has_seen_rtt: bool,
    pub prior_cwnd: u32,
    pub full_bw: u64,
    pub ack_epoch_mstamp: Time,
    pub extra_acked: [u32; 2],
    pub ack_epoch_acked: u32,
    pub extra_acked_win_rtts: u32,
    pub extra_acked_win_idx: usize,
    /// `sk->sk_pacing_rate`, bytes per second.
    pub pacing_rate: u64,
}

impl BbrCore {
    /// The state before `init`: STARTUP at `pacing_gain` / `cwnd_gain`.
    pub fn new(pacing_gain: u32, cwnd_gain: u32, min_pacing_rate: u64) -> BbrCore {
        BbrCore {
            startup_pacing_gain: pacing_gain,
            min_pacing_rate,
            min_rtt_us: u32::MAX,
            min_rtt_stamp: Time::ZERO,
            probe_rtt_done_stamp: None,
            next_rtt_delivered: 0,
            cycle_mstamp: Time::ZERO,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            round_start: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            pacing_gain,
            cwnd_gain,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: 0,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: Time::ZERO,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            pacing_rate: 0,
        }
    }

    /// The part of `bbr_init` both versions share; each then sets its own state and gains.
    pub fn init(&mut self, tp: &mut TcpCcState) {
        self.prior_cwnd = 0;
        tp.ssthresh = u32::MAX;
        self.next_rtt_delivered = tp.delivered;
        self.prev_ca_state = CaState::Open;
        self.probe_rtt_done_stamp = None;
        self.probe_rtt_round_done = false;
        self.min_rtt_us = if tp.min_rtt == Time::MAX { u32::MAX } else { us(tp.min_rtt) as u32 };
        self.min_rtt_stamp = tp.now;
        self.has_seen_rtt = false;
        self.init_pacing_rate_from_rtt(tp);
        self.round_start = false;
        self.idle_restart = false;
        self.full_bw_reached = false;
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.cycle_mstamp = Time::ZERO;
        self.cycle_idx = 0;
        self.mode = Mode::Startup;
        self.ack_epoch_mstamp = tp.now;
        self.ack_epoch_acked = 0;
        self.extra_acked_win_rtts = 0;
        self.extra_acked_win_idx = 0;
        self.extra_acked = [0; 2];
    }

    pub fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1])
    }

    /// `bbr_rate_bytes_per_sec` with the pacing margin.
    fn pacing_rate_for(&self, tp: &TcpCcState, bw: u64, gain: u32) -> u64 {
        rate_bytes_per_sec(bw, tp.mss, gain, PACING_MARGIN_PERCENT).max(self.min_pacing_rate)
    }

    /// `bbr_init_pacing_rate_from_rtt`: start-up gain x cwnd / srtt (1 ms before any sample).
    pub fn init_pacing_rate_from_rtt(&mut self, tp: &TcpCcState) {
        let rtt_us = if tp.srtt > Time::ZERO {
            self.has_seen_rtt = true;
            us(tp.srtt).max(1)
        } else {
            1_000
        };
        let bw = tp.cwnd as u64 * BW_UNIT / rtt_us;
        self.pacing_rate = self.pacing_rate_for(tp, bw, self.startup_pacing_gain);
    }

    /// `bbr_set_pacing_rate`: only raise the rate until the pipe is known full.
    pub fn set_pacing_rate(&mut self, tp: &TcpCcState, bw: u64, gain: u32) {
        let rate = self.pacing_rate_for(tp, bw, gain);
        if !self.has_seen_rtt && tp.srtt > Time::ZERO {
            self.init_pacing_rate_from_rtt(tp);
        }
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// `bbr_save_cwnd`.
    pub fn save_cwnd(&mut self, tp: &TcpCcState) {
        if ca_rank(self.prev_ca_state) < ca_rank(CaState::Recovery) && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tp.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(tp.cwnd);
        }
    }

    /// `bbr_packets_in_net_at_edt`: what will still be in the network when the next paced
    /// packet departs, at bandwidth `bw` with TSO bursts of `tso_segs_goal`.
    pub fn packets_in_net_at_edt(&self, tp: &TcpCcState, inflight_now: u32, bw: u64, tso_segs_goal: u32) -> u32 {
        let edt = tp.edt.max(tp.now);
        let interval_delivered = ((bw as u128 * us(edt - tp.now) as u128) >> BW_SCALE) as u64;
        let mut at_edt = inflight_now as u64;
        if self.pacing_gain > BBR_UNIT {
            at_edt += tso_segs_goal as u64;
        }
        at_edt.saturating_sub(interval_delivered) as u32
    }

    /// `bbr_ack_aggregation_cwnd` at bandwidth `bw`; v1 (`needs_full_bw`) allows nothing
    /// before the pipe is full.
    pub fn ack_aggregation_cwnd(&self, bw: u64, extra_acked_gain: u32, needs_full_bw: bool) -> u32 {
        if extra_acked_gain == 0 || (needs_full_bw && !self.full_bw_reached) {
            return 0;
        }
        let max_aggr = bw as u128 * EXTRA_ACKED_MAX_US as u128 / BW_UNIT as u128;
        let aggr = (extra_acked_gain as u128 * self.extra_acked() as u128) >> BBR_SCALE;
        aggr.min(max_aggr) as u32
    }

    /// `bbr_update_ack_aggregation` at bandwidth `bw`, with a max filter over `win_rtts`
    /// rounds (v1: always 5; v3: 1 until the pipe is full).
    pub fn update_ack_aggregation(&mut self, tp: &TcpCcState, rs: &RateSample, bw: u64, extra_acked_gain: u32, win_rtts: u32) {
        if extra_acked_gain == 0 || rs.acked_sacked == 0 || rs.delivered < 0 || us(rs.interval) == 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1f);
            if self.extra_acked_win_rtts >= win_rtts {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = us(tp.delivered_mstamp.saturating_sub(self.ack_epoch_mstamp));
        let mut expected = (bw as u128 * epoch_us as u128 / BW_UNIT as u128) as u64;
        if self.ack_epoch_acked as u64 <= expected || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = tp.delivered_mstamp;
            expected = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xfffff);
        let extra = (self.ack_epoch_acked as u64 - expected.min(self.ack_epoch_acked as u64)).min(tp.cwnd as u64) as u32;
        let slot = &mut self.extra_acked[self.extra_acked_win_idx];
        if extra > *slot {
            *slot = extra;
        }
    }

    /// The growth step of `bbr_set_cwnd`: towards `target`, capped by it once the pipe is full;
    /// before that, also while `slow_start` (v1: fewer than `TCP_INIT_CWND` packets delivered;
    /// v3: cwnd below twice the initial cwnd); at least 4 packets.
    pub fn grow_cwnd(&self, cwnd: u32, acked: u32, target: u32, slow_start: bool) -> u32 {
        let mut cwnd = cwnd;
        if self.full_bw_reached {
            cwnd = (cwnd + acked).min(target);
        } else if cwnd < target || slow_start {
            cwnd += acked;
        }
        cwnd.max(CWND_MIN_TARGET)
    }

    /// The end of `bbr_set_cwnd`: apply the clamp, and `probe_rtt_cwnd` in PROBE_RTT.
    pub fn apply_cwnd(&self, tp: &mut TcpCcState, cwnd: u32, probe_rtt_cwnd: u32) {
        tp.cwnd = cwnd.min(tp.cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            tp.cwnd = tp.cwnd.min(probe_rtt_cwnd);
        }
    }

    /// PROBE_RTT entry in `bbr_update_min_rtt`: when `expired` (and enabled, not restarting
    /// from idle, not already there). Returns whether it entered.
    pub fn enter_probe_rtt(&mut self, tp: &TcpCcState, expired: bool, probe_rtt_mode: Time) -> bool {
        if probe_rtt_mode > Time::ZERO && expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(tp);
            self.probe_rtt_done_stamp = None;
            return true;
        }
        false
    }

    /// The rest of `bbr_update_min_rtt`: in PROBE_RTT, mark the flow app-limited, start the
    /// `probe_rtt_mode` hold once at most `probe_rtt_cwnd` packets are in flight, and after it
    /// and a round, `check_probe_rtt_done`. Returns true when PROBE_RTT is done: the caller
    /// then leaves it (v1 `bbr_reset_mode`, v3 `bbr_exit_probe_rtt`).
    pub fn probe_rtt(&mut self, tp: &mut TcpCcState, rs: &RateSample, probe_rtt_mode: Time, probe_rtt_cwnd: u32) -> bool {
        let mut done = false;
        if self.mode == Mode::ProbeRtt {
            tp.app_limited = (tp.delivered + tp.packets_in_flight() as u64).max(1);
            if self.probe_rtt_done_stamp.is_none() && tp.packets_in_flight() <= probe_rtt_cwnd {
                self.probe_rtt_done_stamp = Some(tp.now + probe_rtt_mode);
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = tp.delivered;
            } else if self.probe_rtt_done_stamp.is_some() {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    done = self.check_probe_rtt_done(tp);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
        done
    }

    /// `bbr_check_probe_rtt_done`: once the hold is over, restore the cwnd saved on entry.
    /// Returns true when PROBE_RTT is done (the caller restamps its min-RTT filter and
    /// leaves PROBE_RTT).
    pub fn check_probe_rtt_done(&mut self, tp: &mut TcpCcState) -> bool {
        match self.probe_rtt_done_stamp {
            Some(done) if tp.now > done => {}
            _ => return false,
        }
        tp.cwnd = tp.cwnd.max(self.prior_cwnd);
        true
    }

    /// `bbr_cwnd_event`: on a restart from idle, reset the ACK epoch and pace at `bw` in
    /// PROBE_BW, or check whether PROBE_RTT is done (the return value, as
    /// `check_probe_rtt_done`).
    pub fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent, bw: u64) -> bool {
        if ev == CaEvent::TxStart && tp.app_limited != 0 {
            self.idle_restart = true;
            self.ack_epoch_mstamp = tp.now;
            self.ack_epoch_acked = 0;
            if self.mode == Mode::ProbeBw {
                self.set_pacing_rate(tp, bw, BBR_UNIT);
            } else if self.mode == Mode::ProbeRtt {
                return self.check_probe_rtt_done(tp);
            }
        }
        false
    }
}
