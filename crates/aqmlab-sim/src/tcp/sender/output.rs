//! Sending: Linux `net/ipv4/tcp_output.c` `tcp_write_xmit`, `tcp_transmit_skb`,
//! `tcp_xmit_retransmit_queue`, `tcp_event_data_sent`, `tcp_cwnd_validate`, pacing
//! (`tcp_update_pacing_rate` in `tcp_input.c`, EDT times as `tcp_update_skb_after_send`), and
//! the ECN codepoints of `tcp_ecn_send`.
//!
//! # Multi-segment sends (GSO skbs)
//!
//! Linux builds each transmission as an skb of up to `tcp_tso_segs` segments; with the
//! veth's offloads off the device segments it in software (`skb_gso_segment` in
//! `validate_xmit_skb`), so the segments leave the host back to back — here, at the same
//! instant, in sequence order (the simulated paths have no host link rate). Modelled as
//! in torvalds/linux `net/ipv4/tcp_output.c` (6.x; stored id 41742925773) and the 5.x files
//! of the 2020 kernels (same functions, stored ids 3489040918 for the 5.18 autosize change,
//! 11791221679 for the 5.x autosize):
//! - `tcp_tso_segs`: `min_tso` = `ca_ops->min_tso_segs` or `tcp_min_tso_segs` (2);
//!   `tcp_tso_autosize`: bytes = `sk_pacing_rate >> sk_pacing_shift` (10: ≈ 1 ms), plus
//!   since 5.18 `gso_max_size >> (min_rtt_us >> tcp_tso_rtt_log)` (halves per 512 µs of min
//!   RTT: 0 bytes above 16 ms, 128 bytes at 5 ms), at most `gso_max_size − 1 −
//!   MAX_TCP_HEADER` (65 215 bytes); segments = max(bytes / mss, min_tso); the congestion
//!   control's hook ([`crate::cc::CongestionControl::tso_segs`]) caps that
//!   (`TsoSegs::AtMost`, the 2020 L4S `.max_tso_segs`) or replaces it (`TsoSegs::Exactly`,
//!   google/bbr's `.tso_segs`); then `gso_max_segs`.
//! - `tcp_write_xmit`: per skb, `tcp_pacing_check`, `tcp_cwnd_test` (quota = min(cwnd −
//!   in_flight, max(cwnd/2, 1))), `tcp_tso_should_defer` when the send-queue skb holds more
//!   than one segment, `tcp_mss_split_point` (send min(quota, tso_segs, receive window, what
//!   the send-queue skb holds)), then one `tcp_transmit_skb`: one delivery-rate snapshot
//!   (`tcp_rate_skb_sent`; `tx.in_flight` = in_flight + pcount as google/bbr's
//!   `tcp_set_tx_in_flight`), one `tcp_event_data_sent`, and the EDT advanced once by the
//!   skb's whole payload / pacing rate (`tcp_update_skb_after_send`), so the next paced send
//!   is scheduled after the whole skb.
//! - The send queue: the application's writes are cut into skbs of `tcp_xmit_size_goal`
//!   (`gso_max_size − 1 − MAX_TCP_HEADER`, bounded by half the peer's largest window:
//!   45 segments of 1448 bytes when the receive window does not limit); a partly sent skb
//!   stays at the head with the rest. `tcp_tso_should_defer` reads that skb's length.
//!
//! Not modelled: TSQ (`tcp_small_queue_check`: the veth orphans the skb when it forwards it,
//! so the limit never holds on the studies' paths); retransmissions go one segment per skb
//! (Linux retransmits an skb's lost part in one `__tcp_retransmit_skb`, up to
//! min(cwnd − in_flight, tso_segs) segments; the model keeps no skb boundaries in the
//! retransmission queue); a loss probe with new data sends one segment.

use super::queue::*;
use super::{EndpointCtx, Phase, TcpSender};
use crate::cc::{CaEvent, CaState, CongestionControl, TsoSegs};
use crate::event::FlowTimer;
use crate::packet::{Direction, Ecn, Kind, Packet};
use crate::packet::EcnMode;
use crate::tcp::CwndValidate;
use crate::time::Time;

/// `sysctl_tcp_min_tso_segs` default.
pub(crate) const TCP_MIN_TSO_SEGS: u32 = 2;
/// `sk_pacing_shift` default: an skb holds about 2^-10 s of the pacing rate.
const SK_PACING_SHIFT: u32 = 10;
/// Largest skb payload: `gso_max_size` (`GSO_MAX_SIZE`, 64 KiB, a veth's) − 1 −
/// `MAX_TCP_HEADER` (`L1_CACHE_ALIGN(128 + MAX_HEADER)` = 320 on x86-64 distribution
/// configurations; the same constant as BBR's `GSO_BYTES_CAP`).
pub(crate) const GSO_MAX_BYTES: u64 = 65_536 - 1 - 320;
/// `sysctl_tcp_tso_rtt_log` (5.18+): the min-RTT allowance halves per 2^9 µs.
const TCP_TSO_RTT_LOG: u32 = 9;
/// `gso_max_segs` of a veth (`GSO_MAX_SEGS`).
const GSO_MAX_SEGS: u32 = 65_535;
// The sender keeps the send-queue head's segments in a `u16` (`TcpSender::wq_left`).
const _: () = assert!(GSO_MAX_SEGS <= u16::MAX as u32);
/// `sysctl_tcp_tso_win_divisor` default.
const TCP_TSO_WIN_DIVISOR: u64 = 3;

/// Linux `tcp_tso_autosize`: segments per skb for a pacing rate of `rate` bytes/s, `min_rtt`
/// (the 5.18+ allowance when `rtt_allowance`), floored at `min_tso`.
pub fn tso_autosize(rate: f64, mss: u32, min_rtt: Time, min_tso: u32, rtt_allowance: bool) -> u32 {
    let bytes = ((rate as u64) >> SK_PACING_SHIFT) + tso_rtt_allowance(min_rtt, rtt_allowance);
    let bytes = bytes.min(GSO_MAX_BYTES);
    ((bytes / mss as u64) as u32).max(min_tso)
}

/// The bytes [`tso_autosize`] adds to `rate >> SK_PACING_SHIFT` for a small `min_rtt` (the
/// 5.18+ allowance, `tcp_tso_rtt_log`): `GSO_MAX_BYTES >> (tcp_min_rtt(tp) >> tcp_tso_rtt_log)`, none
/// before the first sample (`~0U`) or without the allowance.
fn tso_rtt_allowance(min_rtt: Time, rtt_allowance: bool) -> u64 {
    if !rtt_allowance {
        return 0;
    }
    let r = if min_rtt == Time::MAX { u64::MAX } else { (min_rtt.0 / 1000) >> TCP_TSO_RTT_LOG };
    if r < 32 {
        GSO_MAX_BYTES >> r
    } else {
        0
    }
}

/// [`tso_autosize`]'s result for `rate` with the pacing rates that give the same result at the
/// same `mss`, `min_rtt`, `min_tso` and allowance: every rate in `[lo, hi)`. The result
/// depends on the rate only through `bytes / mss`, a step function of the rate's integer
/// part, so the range is that step's (`hi` infinite on the last, capped step): integers, so
/// `lo <= rate < hi` holds exactly when `rate as u64` is on the step (NaN is on none).
pub(super) fn tso_autosize_step(rate: f64, mss: u32, min_rtt: Time, min_tso: u32, rtt_allowance: bool) -> TsoStep {
    let segs = tso_autosize(rate, mss, min_rtt, min_tso, rtt_allowance);
    let mss = mss as u64;
    let extra = tso_rtt_allowance(min_rtt, rtt_allowance);
    let bytes = ((rate as u64) >> SK_PACING_SHIFT).saturating_add(extra).min(GSO_MAX_BYTES);
    let q = bytes / mss;
    // bytes / mss == q  <=>  q·mss <= (rate >> 10) + extra < (q+1)·mss, or the cap holds.
    let lo = (q * mss).saturating_sub(extra) << SK_PACING_SHIFT;
    let hi = if q == GSO_MAX_BYTES / mss { f64::INFINITY } else { (((q + 1) * mss - extra) << SK_PACING_SHIFT) as f64 };
    TsoStep { lo: lo as f64, hi, min_rtt, min_tso, segs }
}

/// The last [`tso_autosize`] step the sender computed ([`tso_autosize_step`]) and the inputs
/// other than the rate it holds for. The pacing rate changes on nearly every ACK (with srtt),
/// the step about once per 1024·mss bytes/s of change.
#[derive(Clone, Copy, Debug)]
pub(super) struct TsoStep {
    pub(super) lo: f64,
    pub(super) hi: f64,
    min_rtt: Time,
    min_tso: u32,
    pub(super) segs: u32,
}

impl Default for TsoStep {
    /// Holds for no rate.
    fn default() -> Self {
        TsoStep { lo: f64::INFINITY, hi: 0.0, min_rtt: Time::MAX, min_tso: 0, segs: 0 }
    }
}

/// The ECN codepoint of data by [`EcnMode`] (its discriminant) and kind (a retransmission or
/// probe, new data): ECT only on new data with RFC 3168 and SCE, never on retransmissions
/// (RFC 3168 §6.1.2, Linux `tcp_ecn_send`); L4S's ECT(1) on every data packet,
/// retransmissions included (AccECN, RFC 9768 §3.1.5). A look-up instead of a `match`
/// (compiled to about ten instructions per skb).
const DATA_ECN: [[Ecn; 2]; 4] = {
    let modes = [EcnMode::Off, EcnMode::Rfc3168, EcnMode::L4s, EcnMode::Sce];
    let mut t = [[Ecn::NotEct; 2]; 4];
    let mut i = 0;
    while i < modes.len() {
        // Exhaustive: a new mode fails to compile here until it has its row (and a fifth
        // mode's index, past the table, fails the const evaluation).
        t[modes[i] as usize] = match modes[i] {
            EcnMode::Off => [Ecn::NotEct, Ecn::NotEct],
            EcnMode::Rfc3168 | EcnMode::Sce => [Ecn::NotEct, Ecn::Ect0],
            EcnMode::L4s => [Ecn::Ect1, Ecn::Ect1],
        };
        i += 1;
    }
    t
};

/// Why `tcp_tso_should_defer` held the send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Defer {
    CwndLimited,
    Other,
}

/// What `transmit` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TxKind {
    New,
    /// A retransmission of a segment marked lost (`tcp_retransmit_skb`).
    Retrans,
    /// A loss probe re-sending the last segment (`__tcp_retransmit_skb`: not counted in
    /// `retrans_out`, not marked lost).
    Probe,
}

impl TcpSender {
    pub(super) fn has_new_data(&self) -> bool {
        self.app_open && self.total_segs.map_or(true, |n| self.tp.snd_nxt < n.get())
    }

    pub(super) fn send_syn(&mut self, ctx: &mut EndpointCtx) {
        let mut syn = Packet::new(self.flow, Direction::Forward, Kind::Syn, self.cfg.header_bytes);
        // RFC 3168 §6.1.1: request ECN with ECE and CWR on the SYN.
        if self.cfg.ecn.is_on() {
            syn.tcp.ece = true;
            syn.tcp.cwr = true;
        }
        // Linux puts its timestamp option on the SYN too (tcp_syn_options); nothing in the
        // model reads it, captures show it.
        syn.tcp.ts_val = Self::ts_of(ctx.now);
        self.syn_sent_at = ctx.now;
        ctx.out.push(syn);
        self.rto_timer.arm(ctx.now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
    }

    /// Linux `tcp_update_pacing_rate`.
    pub(super) fn update_pacing_rate(&mut self) {
        if let Some(r) = self.cc.pacing_rate(&self.tp) {
            self.tp.pacing_rate = r;
            return;
        }
        let ratio = if self.tp.cwnd < self.tp.ssthresh / 2 { self.cfg.pacing_ss_ratio } else { self.cfg.pacing_ca_ratio };
        let window = self.tp.cwnd.max(self.packets_out()) as f64;
        self.tp.pacing_rate = if self.tp.srtt > Time::ZERO {
            self.cfg.mss as f64 * window * ratio as f64 / 100.0 / self.tp.srtt.as_secs_f64()
        } else {
            0.0
        };
    }

    /// Next lost segment not yet retransmitted (Linux `tcp_xmit_retransmit_queue`).
    pub(super) fn next_retransmit(&mut self) -> Option<u32> {
        if self.tp.lost_out == 0 {
            return None;
        }
        let mut seq = self.retransmit_hint.max(self.tp.snd_una);
        while seq < self.tp.snd_nxt {
            if self.seg(seq).flags & (LOST | RETRANS | SACKED) == LOST {
                self.retransmit_hint = seq;
                return Some(seq);
            }
            seq += 1;
        }
        self.retransmit_hint = seq;
        None
    }

    /// Linux `tcp_tso_segs`: the segments one skb may carry (1 with GSO off).
    #[inline]
    pub fn tso_segs(&self) -> u32 {
        if !self.cfg.gso {
            return 1;
        }
        let autosize = || {
            let min_tso = self.cc.min_tso_segs(&self.tp).unwrap_or(TCP_MIN_TSO_SEGS);
            // tcp_tso_autosize, from the step of the last call when the rate is still on it.
            let rate = self.tp.pacing_rate;
            let c = self.tso_step.get();
            if rate >= c.lo && rate < c.hi && c.min_rtt == self.tp.min_rtt && c.min_tso == min_tso {
                return c.segs;
            }
            let c = tso_autosize_step(rate, self.cfg.mss, self.tp.min_rtt, min_tso, self.cfg.tso_rtt_allowance);
            self.tso_step.set(c);
            c.segs
        };
        // The CC's hook (`crate::cc::TsoSegs`): the 2020 L4S trees' `.max_tso_segs` caps
        // autosize; the google/bbr tree's `.tso_segs` replaces it. Then `sk_gso_max_segs`.
        let segs = match self.cc.tso_segs(&self.tp) {
            None => autosize(),
            Some(TsoSegs::AtMost(n)) => autosize().min(n.max(1)),
            Some(TsoSegs::Exactly(n)) => n.max(1),
        };
        segs.min(GSO_MAX_SEGS)
    }

    /// Linux `tcp_xmit_size_goal`: the segments of each skb the application's writes are cut
    /// into (1 without GSO), bounded by half the peer's window (`tcp_bound_to_half_wnd`).
    fn size_goal(&self) -> u32 {
        if !self.cfg.gso {
            return 1;
        }
        let goal = (GSO_MAX_BYTES / self.cfg.mss as u64) as u32;
        // Linux ends with `return max(size_goal, mss_now)` (net/ipv4/tcp.c, tcp_xmit_size_goal):
        // at least one segment, also when the MSS exceeds GSO_MAX_BYTES (mss > 65215; zero
        // here made try_send loop forever without sending, issue 14's no-hang property test).
        self.cfg.rwnd_packets.map_or(goal, |w| goal.min((w / 2).max(1))).min(GSO_MAX_SEGS).max(1)
    }

    /// New segments the application has still to send (`u32::MAX`: unlimited).
    fn new_segs_left(&self) -> u32 {
        self.total_segs.map_or(u32::MAX, |n| n.get() - self.tp.snd_nxt)
    }

    /// Linux `tcp_tso_should_defer` ("TSO Nagle", John Heffner): for the send-queue skb of
    /// `skb_segs` segments (the last one of a finite transfer carries the FIN when
    /// `is_tail`), whether to wait for more cwnd so that a fuller skb goes out. `None`: send.
    /// `in_flight` is `tcp_packets_in_flight` now (the caller's `tcp_cwnd_test` computed it).
    fn tso_should_defer(&self, now: Time, skb_segs: u32, is_tail: bool, max_segs: u32, in_flight: u32) -> Option<Defer> {
        if matches!(self.tp.ca_state, CaState::Recovery | CaState::Loss) {
            return None;
        }
        // Defer only if the last write was recent (1 ms); tcp_wstamp_ns is the last
        // transmission's time, or the next paced departure (EDT) when pacing.
        let wstamp = self.tp.edt.max(self.tp.lsndtime);
        if now > wstamp + Time::from_millis(1) {
            return None;
        }
        let mss = self.cfg.mss as u64;
        debug_assert_eq!(in_flight, self.in_flight());
        let send_win = self.cfg.rwnd_packets.map_or(u64::MAX, |w| w.saturating_sub(self.packets_out()) as u64 * mss);
        let cong_win = (self.tp.cwnd - in_flight) as u64 * mss;
        let limit = send_win.min(cong_win);
        // A full-sized TSO skb can be sent.
        if limit >= max_segs as u64 * mss {
            return None;
        }
        let skb_len = self.payload_upto(self.tp.snd_nxt + skb_segs) - self.payload_upto(self.tp.snd_nxt);
        // Middle of the queue: it will get no more data, and all of it fits.
        if !is_tail && limit >= skb_len {
            return None;
        }
        // At least a third of the window is available (`tcp_tso_win_divisor`).
        let snd_wnd = self.cfg.rwnd_packets.map_or(u64::MAX, |w| w as u64 * mss);
        if limit >= snd_wnd.min(self.tp.cwnd as u64 * mss) / TCP_TSO_WIN_DIVISOR {
            return None;
        }
        // The next ACK is likely to come too late: the head left less than srtt/2 ago.
        let Some(head) = self.sb.front() else { return None };
        if now - head.tx_time < Time(self.tp.srtt.0 / 2) {
            return None;
        }
        if cong_win < send_win {
            if cong_win <= skb_len {
                return Some(Defer::CwndLimited);
            }
        } else if send_win <= skb_len {
            return Some(Defer::Other);
        }
        // This skb gets no more data (the FIN): do not wait.
        if is_tail {
            return None;
        }
        Some(Defer::Other)
    }

    /// Sends what cwnd, pacing and the receive window allow (Linux `tcp_write_xmit`), one skb
    /// per step (see the module's doc).
    pub(super) fn try_send(&mut self, ctx: &mut EndpointCtx) {
        if self.phase != Phase::Established {
            return;
        }
        let now = ctx.now;
        let paced = self.tp.paced && self.tp.pacing_rate > 0.0;
        let max_segs = self.tso_segs();
        let mut cwnd_limited = false;
        let mut sent = 0;
        let mut sent_new = 0;
        // The loop ends with the flight it leaves (the turn's tcp_cwnd_test value when that turn
        // sent nothing).
        let end_flight = loop {
            if paced && self.tp.edt > now {
                self.pacing_timer.arm(self.tp.edt, ctx.event(FlowTimer::Pacing), ctx.events);
                break self.in_flight();
            }
            // tcp_cwnd_test.
            let in_flight = self.in_flight();
            if in_flight >= self.tp.cwnd {
                break in_flight;
            }
            let quota = (self.tp.cwnd - in_flight).min((self.tp.cwnd >> 1).max(1));
            if let Some(seq) = self.next_retransmit() {
                self.transmit(seq, 1, TxKind::Retrans, paced, ctx);
                sent += 1;
                continue;
            }
            let rwnd_room = self.cfg.rwnd_packets.map_or(u32::MAX, |w| w.saturating_sub(self.packets_out()));
            if !self.has_new_data() || rwnd_room == 0 {
                // Nothing to send while cwnd has room: application-limited (tcp_rate_check_app_limited).
                if !self.has_new_data() {
                    self.tp.app_limited = (self.tp.delivered + in_flight as u64).max(1);
                }
                break in_flight;
            }
            // The send-queue head: the rest of a partly sent skb, or a new one.
            let left = self.new_segs_left();
            if self.wq_left == 0 {
                // At most GSO_MAX_SEGS (`size_goal`), so the `u16` holds it exactly.
                self.wq_left = self.size_goal().min(left) as u16;
            }
            let skb_segs = self.wq_left as u32;
            if skb_segs > 1 {
                if let Some(why) = self.tso_should_defer(now, skb_segs, left <= skb_segs, max_segs, in_flight) {
                    cwnd_limited |= why == Defer::CwndLimited;
                    break in_flight;
                }
            }
            // tcp_mss_split_point.
            let n = quota.min(max_segs).min(rwnd_room).min(skb_segs);
            self.transmit(self.tp.snd_nxt, n, TxKind::New, paced, ctx);
            self.wq_left -= n as u16;
            sent += n;
            sent_new += n;
        };
        debug_assert_eq!(end_flight, self.in_flight());
        // tcp_write_xmit: new data sent schedules a loss probe (one per tail-loss episode).
        if sent_new > 0 {
            self.schedule_loss_probe(false, ctx);
        }
        cwnd_limited |= end_flight >= self.tp.cwnd;
        self.cwnd_validate(sent, sent_new, cwnd_limited);
    }

    /// Linux `tcp_cwnd_validate`'s tracking of `is_cwnd_limited`, per kernel generation
    /// (`TcpConfig::cwnd_validate`). `cwnd_usage_seq` is the older kernels' `max_packets_seq`.
    /// `sent` counts everything this call sent, `sent_new` the new data only (Linux's
    /// `sent_pkts` of `tcp_write_xmit`; retransmissions go out of `tcp_xmit_retransmit_queue`,
    /// which does not validate).
    fn cwnd_validate(&mut self, sent: u32, sent_new: u32, cwnd_limited: bool) {
        match self.cfg.cwnd_validate {
            // Today's: called when something was sent or cwnd is the limit; a cwnd-limited
            // window stays so.
            CwndValidate::Sticky => {
                if (sent > 0 || cwnd_limited)
                    && (self.tp.snd_una >= self.cwnd_usage_seq || cwnd_limited || (!self.tp.cwnd_limited_flag && self.packets_out() > self.max_packets_out))
                {
                    self.tp.cwnd_limited_flag = cwnd_limited;
                    self.max_packets_out = self.packets_out();
                    self.cwnd_usage_seq = self.tp.snd_nxt;
                }
            }
            // Before Dec 2020: only after new data was sent; rewritten at each new window or a
            // new maximum of packets_out, whatever the send found.
            CwndValidate::SentOnly2015 => {
                if sent_new > 0 && (self.tp.snd_una >= self.cwnd_usage_seq || self.packets_out() > self.max_packets_out) {
                    self.tp.cwnd_limited_flag = cwnd_limited;
                    self.max_packets_out = self.packets_out();
                    self.cwnd_usage_seq = self.tp.snd_nxt;
                }
            }
        }
    }

    /// One `tcp_transmit_skb`: `segs` segments from `seq` (only new data goes more than one
    /// at a time), leaving the host together.
    pub(super) fn transmit(&mut self, seq: u32, segs: u32, kind: TxKind, paced: bool, ctx: &mut EndpointCtx) {
        // A retransmission or probe is one segment (what `prr_out` and the counters below
        // count as `segs`): checked in every build.
        assert!(segs >= 1 && (segs == 1 || kind == TxKind::New), "an skb of {segs} segments that is not new data");
        let now = ctx.now;
        if self.packets_out() == 0 {
            // tcp_rate_skb_sent: a new flight starts.
            self.first_tx_time = now;
            self.tp.delivered_mstamp = now;
        }
        // tcp_event_data_sent: restart after idle, then note the send time. The event may
        // change the pacing rate (BBR paces at the estimated bandwidth after idle).
        let mut in_flight = self.in_flight();
        if in_flight == 0 {
            self.cc.cwnd_event(&mut self.tp, CaEvent::TxStart);
            if let Some(r) = self.cc.pacing_rate(&self.tp) {
                self.tp.pacing_rate = r;
            }
            // The event hands the algorithm the socket: read the flight again after it.
            in_flight = self.in_flight();
        }
        self.tp.lsndtime = now;
        // One delivery-rate snapshot for the whole skb.
        let snap = Seg {
            tx_time: now,
            delivered: self.tp.delivered,
            delivered_ce: self.tp.delivered_ce,
            delivered_time: self.tp.delivered_mstamp,
            first_tx: self.first_tx_time,
            tx_in_flight: in_flight + segs,
            tx_lost: self.tp.lost,
            flags: if self.tp.app_limited != 0 { APP_LIMITED } else { 0 },
            ts_prev: NIL,
            ts_next: NIL,
        };
        // What every segment of the skb carries alike: the timestamp, and the ECN codepoint
        // (`DATA_ECN`).
        let ts_val = Self::ts_of(now);
        let ecn = DATA_ECN[self.cfg.ecn as usize][(kind == TxKind::New) as usize];
        let mut bytes = 0u64;
        if kind == TxKind::New {
            // New data: the skb's scoreboard entries, counters and send-ordered list once for
            // the skb, then its segments, CWR with RFC 3168 ECN (the new data that is ECT(0))
            // on the first only (software GSO, tcp_gso_segment, clears it on the others).
            for _ in 0..segs {
                self.sb.push_back(snap);
            }
            self.tp.snd_nxt += segs;
            self.tp.packets_out += segs;
            self.ts_append_run(seq, segs);
            let mut cwr = ecn == Ecn::Ect0 && self.queue_cwr;
            self.queue_cwr &= !cwr;
            for seq in seq..seq + segs {
                let payload = self.payload_of(seq);
                bytes += payload as u64;
                let mut pkt = self.data_packet(seq, payload, ts_val, ecn);
                pkt.tcp.cwr = cwr;
                cwr = false;
                ctx.out.push(pkt);
            }
        } else {
            let payload = self.payload_of(seq);
            bytes = payload as u64;
            self.retransmit_one(seq, payload, kind, &snap, ts_val, ecn, ctx);
        }
        if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.prr_out += segs;
        }
        self.stats.data_packets_sent += segs as u64;
        self.stats.data_skbs_sent += 1;
        if !self.rto_timer.is_armed() {
            self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
        }
        if paced {
            // tcp_update_skb_after_send: EDT departure times spaced by the skb's payload /
            // rate, with up to half of that forgiven after idle, from the 10th data segment on.
            let prior = self.tp.edt;
            self.tp.edt = self.tp.edt.max(now);
            if self.stats.data_packets_sent >= 10 {
                let len_ns = Time::from_secs_f64(bytes as f64 / self.tp.pacing_rate);
                let credit = self.tp.edt - prior;
                self.tp.edt += len_ns - Time(len_ns.0 / 2).min(credit);
            }
        }
    }

    /// A data segment as it leaves.
    #[inline]
    fn data_packet(&self, seq: u32, payload: u32, ts_val: u32, ecn: Ecn) -> Packet {
        let mut pkt = Packet::new(self.flow, Direction::Forward, Kind::Data, payload + self.cfg.header_bytes);
        pkt.tcp.seq = seq;
        pkt.tcp.payload = payload;
        pkt.tcp.ts_val = ts_val;
        pkt.tcp.ts_ecr = self.peer_ts;
        pkt.ecn = ecn;
        pkt
    }

    /// A retransmission or probe of segment `seq` on the wire, with its scoreboard entry
    /// rewritten.
    #[allow(clippy::too_many_arguments)]
    fn retransmit_one(&mut self, seq: u32, payload: u32, kind: TxKind, snap: &Seg, ts_val: u32, ecn: Ecn, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        let pkt = self.data_packet(seq, payload, ts_val, ecn);
        let seg = self.seg_mut(seq);
        seg.flags = if kind == TxKind::Retrans {
            (seg.flags & (SACKED | TSORTED)) | LOST | RETRANS | EVER_RETRANS | snap.flags
        } else {
            (seg.flags & (SACKED | LOST | RETRANS | TSORTED)) | EVER_RETRANS | snap.flags
        };
        seg.tx_time = snap.tx_time;
        seg.delivered = snap.delivered;
        seg.delivered_ce = snap.delivered_ce;
        seg.delivered_time = snap.delivered_time;
        seg.first_tx = snap.first_tx;
        seg.tx_in_flight = snap.tx_in_flight;
        seg.tx_lost = snap.tx_lost;
        self.ts_push_back(seq);
        self.stats.retransmits += 1;
        if kind == TxKind::Retrans {
            self.tp.retrans_out += 1;
            // The first retransmission of an episode (Linux tcp_retransmit_skb).
            if self.retrans_stamp.is_none() {
                self.retrans_stamp = Some(pkt.tcp.ts_val);
            }
            // Retransmissions of the episode that D-SACKs may prove unnecessary.
            self.undo_retrans = self.undo_retrans.max(0) + 1;
            // tcp_xmit_retransmit_queue re-arms the RTO when the head is retransmitted.
            if seq == self.tp.snd_una {
                self.tlp_pending = false;
                self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
            }
        }
        ctx.out.push(pkt);
    }

    /// TCP timestamps in 1 ms ticks, offset by one so that zero means "no timestamp".
    pub(crate) fn ts_of(t: Time) -> u32 {
        (t.0 / 1_000_000) as u32 + 1
    }

    /// Linux `tcp_is_cwnd_limited`: the flag from `tcp_cwnd_validate`, or in slow start
    /// while cwnd is below twice the largest flight of the window.
    pub(super) fn is_cwnd_limited(&self) -> bool {
        self.tp.cwnd_limited_flag || (self.tp.in_slow_start() && self.tp.cwnd < 2 * self.max_packets_out)
    }
}
