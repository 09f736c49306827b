//! One ACK (Linux `net/ipv4/tcp_input.c` `tcp_ack`), stage by stage as Linux runs them:
//! `tcp_sacktag_write_queue` ([`sack`](super::sack)), `tcp_clean_rtx_queue`,
//! `tcp_rack_update_reo_wnd`, the ECN echo (`tcp_ecn_rcv_ecn_echo`, AccECN counters),
//! `tcp_ack_update_rtt` ([`rto`](super::rto)), `tcp_in_ack_event`/`.pkts_acked`,
//! `tcp_process_tlp_ack` ([`tlp`](super::tlp)), `tcp_fastretrans_alert`
//! ([`recovery`](super::recovery)), `tcp_set_xmit_timer`, `tcp_rate_gen`
//! ([`rate`](super::rate)), `tcp_cong_control`, and `tcp_data_snd_check` ([`output`](super::output)).

use super::queue::*;
use super::{EndpointCtx, TcpSender, TCP_REORDERING};
#[cfg(test)]
use super::tests;
use crate::cc::{AckSample, CaState, CongestionControl, RateSample};
use crate::packet::Packet;
use crate::packet::EcnMode;
use crate::time::Time;

/// What one ACK did (Linux `FLAG_*` of `tcp_ack`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AckFlags {
    pub(super) prior_una: u32,
    pub(super) una_advanced: bool,
    pub(super) data_sacked: bool,
    pub(super) dsack: bool,
    pub(super) dsack_tlp: bool,
    pub(super) ece: bool,
    pub(super) set_xmit_timer: bool,
    pub(super) lost_retrans: bool,
}

/// One ACK on its way through the stages of `tcp_ack`: its flags, the rate sample being built
/// (Linux `struct rate_sample`), and what the SACK and cumulative-ACK stages found (Linux
/// `struct tcp_sacktag_state` and the locals of `tcp_clean_rtx_queue`). Lives on the stack.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AckState {
    pub(super) fl: AckFlags,
    pub(super) rs: RateSample,
    /// (delivered, delivered_ce, delivered time) recorded when the most recently sent of the
    /// newly delivered segments was sent (`tcp_rate_skb_delivered`), if any.
    pub(super) prior: Option<(u64, u64, Time)>,
    /// Segments newly delivered: cumulatively ACKed, SACKed or D-SACKed.
    pub(super) delivered: u32,
    /// Send times of the oldest and newest newly ACKed / SACKed never-retransmitted segments
    /// (Linux first_ackt/last_ackt, first_sackt/last_sackt).
    pub(super) ackt: Option<(Time, Time)>,
    pub(super) sackt: Option<(Time, Time)>,
    /// The cumulative ACK covers retransmitted data (Karn).
    pub(super) retrans_acked: bool,
    /// Linux `FLAG_RETRANS_DATA_ACKED`: the cumulative ACK covers a segment ever
    /// retransmitted, SACKed before or not (`tcp_clean_rtx_queue`: `sacked & TCPCB_RETRANS`).
    pub(super) retrans_data_acked: bool,
    /// Segments newly ACKed cumulatively (`pkts_acked`).
    pub(super) pkts_acked: u32,
    /// `tcp_highest_sack_seq` before this ACK.
    pub(super) prior_fack: u32,
    /// `tp->lost` before this ACK.
    pub(super) prior_lost: u64,
    /// Data packets newly reported CE- and SCE-marked by the receiver's counters.
    pub(super) ce_delta: u32,
    pub(super) sce_delta: u32,
    /// RTT for the congestion control (`ca_rtt_us`).
    pub(super) ca_rtt: Option<Time>,
}

/// Whether a test asked for the segment-by-segment walk on every ACK (the reference the in-order
/// path is compared with).
#[inline]
fn general_ack_walk_only() -> bool {
    #[cfg(test)]
    return tests::GENERAL_ACK_WALK_ONLY.with(|c| c.get());
    #[cfg(not(test))]
    false
}

/// Widens a (first, last) send-time range by one more segment's send time.
pub(super) fn widen(r: Option<(Time, Time)>, t: Time) -> Option<(Time, Time)> {
    Some(r.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
}

impl TcpSender {
    /// Linux `tcp_ack`.
    pub(super) fn on_ack(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let ack = pkt.tcp.seq;
        if ack > self.tp.snd_nxt {
            return; // Acknowledges data never sent; Linux discards it.
        }
        self.tp.now = ctx.now;
        self.rcv_tsecr = pkt.tcp.ts_ecr;
        let old_ack = ack < self.tp.snd_una;
        let prior_in_flight = self.in_flight();
        let mut st = AckState {
            fl: AckFlags { prior_una: self.tp.snd_una, ..AckFlags::default() },
            rs: RateSample { prior_in_flight, ..RateSample::default() },
            prior_fack: self.fack(),
            prior_lost: self.tp.lost,
            ..AckState::default()
        };
        let sacked = pkt.tcp.sack_len > 0;
        if sacked {
            self.sacktag_write_queue(pkt, &mut st);
        }
        if old_ack {
            // An old ACK's SACK information is still used.
            if sacked {
                self.fastretrans_alert(&mut st.fl, ctx);
                self.try_send(ctx);
            }
            return;
        }
        self.clean_rtx_queue(ack, &mut st);
        if st.prior.is_some() {
            self.rack_update_reo_wnd(st.rs.prior_delivered);
        }
        self.ecn_rcv_echo(pkt, &mut st);
        self.ack_update_rtt(&mut st);

        // tcp_in_ack_event and .pkts_acked.
        let sample = AckSample {
            acked: st.pkts_acked,
            acked_ce: st.ce_delta,
            acked_sce: st.sce_delta,
            rtt: st.ca_rtt,
            prior_in_flight,
            ece: pkt.tcp.ece && self.cfg.ecn.is_on(),
        };
        self.cc.pkts_acked(&mut self.tp, &sample);

        // Tail loss probe outcome, then loss detection and the state machine when the ACK is
        // "dubious" (tcp_ack_is_dubious).
        if let Some(h) = self.tlp_high_seq {
            self.process_tlp_ack(ack, h.get(), &st.fl);
        }
        let fl = &st.fl;
        if !fl.una_advanced || fl.data_sacked || fl.dsack || fl.ece || self.tp.ca_state != CaState::Open {
            self.fastretrans_alert(&mut st.fl, ctx);
        }
        if st.fl.set_xmit_timer {
            self.set_xmit_timer(ctx);
        }
        self.rate_gen(&mut st);
        self.cong_control(&st);
        if self.extras {
            self.record_ack(&st);
        }
        self.check_complete();
        // tcp_data_snd_check.
        self.try_send(ctx);
    }

    /// Linux `tcp_clean_rtx_queue`: drop the cumulatively ACKed segments from the queue,
    /// counting deliveries, RTT candidates and RACK progress; a never-retransmitted segment
    /// ACKed below the highest SACKed one filled a hole: reordering. The common ACK (segments
    /// sent once, in order, none SACKed or marked) takes [`TcpSender::clean_rtx_queue_in_order`],
    /// the others the segment-by-segment walk; both leave the same state.
    fn clean_rtx_queue(&mut self, ack: u32, st: &mut AckState) {
        let reord = match self.clean_rtx_queue_in_order(ack, st) {
            Some(reord) => reord,
            None => self.clean_rtx_queue_walk(ack, st),
        };
        st.pkts_acked = self.tp.snd_una - st.fl.prior_una;
        self.retransmit_hint = self.retransmit_hint.max(self.tp.snd_una);
        st.fl.una_advanced = st.pkts_acked > 0;
        if st.fl.una_advanced && reord < st.prior_fack {
            self.check_sack_reordering(reord, false);
        }
    }

    /// The walk of `tcp_clean_rtx_queue` over the ACKed segments, one at a time; returns the
    /// lowest never-retransmitted segment delivered by this ACK (`snd_nxt` if none).
    fn clean_rtx_queue_walk(&mut self, ack: u32, st: &mut AckState) -> u32 {
        let now = self.tp.now;
        let mut reord = self.tp.snd_nxt;
        while self.tp.snd_una < ack {
            self.ts_unlink_acked(self.tp.snd_una);
            let seg = *self.seg(self.tp.snd_una);
            self.sb.pop_front();
            if seg.flags & (EVER_RETRANS | RETRANS) != 0 {
                st.retrans_data_acked = true;
            }
            if seg.flags & SACKED != 0 {
                self.tp.sacked_out -= 1;
            } else {
                st.delivered += 1;
                self.tp.delivered += 1;
                self.rate_skb_delivered(&seg, &mut st.rs, &mut st.prior);
                if !self.spurious_retrans(&seg) {
                    self.rack_advance(seg.flags, self.tp.snd_una, seg.tx_time, now);
                }
                if seg.flags & EVER_RETRANS != 0 {
                    st.retrans_acked = true;
                } else {
                    st.ackt = widen(st.ackt, seg.tx_time);
                    reord = reord.min(self.tp.snd_una);
                }
            }
            if seg.flags & LOST != 0 {
                self.tp.lost_out -= 1;
            }
            if seg.flags & RETRANS != 0 {
                self.tp.retrans_out -= 1;
            }
            self.tp.snd_una += 1;
            self.tp.packets_out -= 1;
        }
        reord
    }

    /// [`TcpSender::clean_rtx_queue_walk`] for the common ACK, in one pass over the ACKed
    /// segments' flags and snapshots instead of a state update per segment: every segment
    /// `snd_una .. ack` sent once (never retransmitted or probed), none SACKed or marked lost,
    /// the send-ordered list in sequence, no rate sample from SACKs yet. Such segments left in
    /// sequence order, so their send times and `tx.delivered` snapshots do not decrease
    /// along the sequence (checked here; any other case returns `None` having changed
    /// nothing, and the walk runs). The walk's result then follows from the ends of the run:
    /// the rate sample from the first segment with the largest `tx.delivered` (the walk's
    /// strict `>` keeps the first), RACK from the last (the most recently sent: its (send time,
    /// sequence) is the largest, and RACK.rtt is the last segment's), the RTT range from the
    /// first and last send times, `reord` = `snd_una`. Test
    /// `the_in_order_ack_path_leaves_the_state_the_segment_walk_leaves`.
    #[inline]
    fn clean_rtx_queue_in_order(&mut self, ack: u32, st: &mut AckState) -> Option<u32> {
        let una = self.tp.snd_una;
        if ack <= una || st.prior.is_some() || !self.ts_in_sequence() || general_ack_walk_only() {
            return None;
        }
        debug_assert!(st.ackt.is_none());
        let first = self.seg(una);
        let (first_tx, mut best) = (first.tx_time, first.delivered);
        let (mut flags, mut last_tx, mut last_delivered, mut chosen) = (first.flags, first.tx_time, first.delivered, una);
        let mut in_order = true;
        for seq in una + 1..ack {
            let s = self.seg(seq);
            flags |= s.flags;
            in_order &= s.tx_time >= last_tx && s.delivered >= last_delivered;
            if s.delivered > best {
                best = s.delivered;
                chosen = seq;
            }
            (last_tx, last_delivered) = (s.tx_time, s.delivered);
        }
        if flags & (SACKED | LOST | RETRANS | EVER_RETRANS) != 0 || !in_order {
            return None;
        }
        let n = ack - una;
        let sample = *self.seg(chosen);
        self.rate_skb_delivered(&sample, &mut st.rs, &mut st.prior);
        self.rack_advance(0, ack - 1, last_tx, self.tp.now);
        st.ackt = Some((first_tx, last_tx));
        st.delivered += n;
        self.tp.delivered += n as u64;
        self.sb.pop_front_n(n);
        self.tp.snd_una = ack;
        self.tp.packets_out -= n;
        #[cfg(test)]
        tests::IN_ORDER_ACKS.with(|c| c.set(c.get() + 1));
        Some(una)
    }

    /// The ECN echo: the receiver's CE and SCE counters (exact, AccECN-style feedback), and
    /// the echo that starts a CWR reduction (Linux `FLAG_ECE`): the ECE flag, or with
    /// accurate feedback an increase of the CE counter.
    ///
    /// An ACK overtaken on the return path by a later one (netem jitter, reordering) carries
    /// older counts than those already seen: it adds nothing and the counts seen stay. Linux
    /// ignores the ACE field of such an ACK too (`__tcp_accecn_process`, "Reordered ACK":
    /// no forward progress, no delta). Taken as a wrapped u32 the backward step would add
    /// 2^32 - 1 marks.
    fn ecn_rcv_echo(&mut self, pkt: &Packet, st: &mut AckState) {
        let ce_delta = counter_advance(pkt.tcp.ce_count, &mut self.ce_count_seen);
        self.tp.delivered_ce += ce_delta as u64;
        let sce_delta = counter_advance(pkt.tcp.sce_count, &mut self.sce_count_seen);
        self.tp.delivered_sce += sce_delta as u64;
        st.ce_delta = ce_delta;
        st.sce_delta = sce_delta;
        // RFC 3168 and SCE: the ECE flag; L4S: the CE counter's increase. Written without
        // a `match`, which compiled to a jump through a table on every ACK.
        let ecn = self.cfg.ecn;
        st.fl.ece = (pkt.tcp.ece & matches!(ecn, EcnMode::Rfc3168 | EcnMode::Sce)) | ((ecn == EcnMode::L4s) & (ce_delta > 0));
    }

    /// Linux `tcp_cong_control`: a `cong_control` algorithm (BBR, Prague) decides alone and
    /// sees the raw `tp->is_cwnd_limited` flag; otherwise PRR during a CWR/Recovery
    /// reduction, else `cong_avoid` when `tcp_may_raise_cwnd`. Then the pacing rate.
    fn cong_control(&mut self, st: &AckState) {
        // Linux tcp_is_cwnd_limited() and tcp_write_queue_empty(), evaluated for this ACK.
        self.tp.is_cwnd_limited = self.is_cwnd_limited();
        self.tp.write_queue_empty = !self.has_new_data();
        if self.cc.cong_control(&mut self.tp, &st.rs) {
            // The algorithm has set cwnd and pacing (and may have set `tp.app_limited`).
        } else if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.cwnd_reduction(st.delivered, st.rs.losses, st.fl.una_advanced, st.retrans_data_acked, st.fl.lost_retrans);
        } else if self.may_raise_cwnd(&st.fl) {
            self.cc.cong_avoid(&mut self.tp, st.delivered);
        }
        self.update_pacing_rate();
    }

    /// Linux `tcp_may_raise_cwnd`: with a reordering degree above the default, grow cwnd on any
    /// forward progress (ACKed or SACKed), otherwise only on in-order delivery (RFC 5681).
    pub(super) fn may_raise_cwnd(&self, fl: &AckFlags) -> bool {
        if self.reordering > TCP_REORDERING {
            fl.una_advanced || fl.data_sacked
        } else {
            fl.una_advanced
        }
    }

    /// A finite transfer whose last segment is ACKed is complete: no more timers.
    fn check_complete(&mut self) {
        if let Some(n) = self.total_segs {
            if self.tp.snd_una >= n.get() && self.stats.completed_at.is_none() {
                self.stats.completed_at = Some(self.tp.now);
                self.rto_timer.cancel();
                self.tlp_pending = false;
            }
        }
    }
}

/// How far an ACK's cumulative echo counter moves past `seen` (wrapping at 2^32), which it
/// then becomes; an older count (a reordered ACK, behind by less than 2^31) moves nothing.
#[inline(always)]
fn counter_advance(count: u32, seen: &mut u32) -> u32 {
    let delta = count.wrapping_sub(*seen);
    if (delta as i32) < 0 {
        return 0;
    }
    *seen = count;
    delta
}

