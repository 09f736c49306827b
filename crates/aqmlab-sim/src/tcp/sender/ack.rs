//! One ACK (Linux `net/ipv4/tcp_input.c` `tcp_ack`).

use super::queue::*;
use super::sack::is_dsack;
use super::{EndpointCtx, TcpSender, TCP_REORDERING};
use crate::cc::{AckSample, CaState, RateSample};
use crate::packet::{Packet, SackBlock, MAX_SACK_BLOCKS};
use crate::scenario::EcnMode;
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

impl TcpSender {
    pub(super) fn on_ack(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        let ack = pkt.tcp.seq;
        if ack > self.tp.snd_nxt {
            return; // Acknowledges data never sent; Linux discards it.
        }
        self.tp.now = now;
        self.rcv_tsecr = pkt.tcp.ts_ecr;
        let old_ack = ack < self.tp.snd_una;
        let prior_in_flight = self.in_flight();
        let prior_una = self.tp.snd_una;
        let prior_fack = self.fack();
        let lost_before = self.tp.lost;
        let mut fl = AckFlags { prior_una, ..AckFlags::default() };
        let mut rs = RateSample { prior_in_flight, ..RateSample::default() };
        let mut prior: Option<(u64, u64, Time)> = None;
        let mut delivered_now = 0u32;
        // Send times of the oldest and newest newly ACKed / SACKed never-retransmitted
        // segments (Linux first_ackt/last_ackt, first_sackt/last_sackt).
        let mut ackt: Option<(Time, Time)> = None;
        let mut sackt: Option<(Time, Time)> = None;
        let widen = |r: Option<(Time, Time)>, t: Time| Some(r.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));

        // SACK blocks (Linux tcp_sacktag_write_queue), the lowest reordered segment in `reord`.
        let n = pkt.tcp.sack_len as usize;
        let blocks = pkt.tcp.sacks;
        let mut reord = self.tp.snd_nxt;
        let mut first = 0;
        // The part of a D-SACK block still in the window (segments not cumulatively ACKed).
        let mut dsack_in_window = 0..0;
        if n > 0 && is_dsack(&blocks[..n], ack) {
            // tcp_check_dsack: the first block reports a duplicate (RFC 2883).
            first = 1;
            let d = blocks[0];
            let dup_segs = self.dsack_seen(d, &mut fl);
            if dup_segs > 0 {
                fl.dsack = true;
                // "A spurious retransmission is delivered" (sack_delivered).
                delivered_now += dup_segs;
                self.tp.delivered += dup_segs as u64;
                // D-SACK for data already cumulatively ACKed: dumb counting.
                if let Some(m) = self.undo_marker {
                    if self.undo_retrans > 0 && d.end <= prior_una && d.end > m {
                        self.undo_retrans = (self.undo_retrans - dup_segs as i32).max(0);
                    }
                }
                // tcp_sacktag_one with dup_sack for segments still in the window.
                dsack_in_window = d.start.max(self.tp.snd_una)..d.end.min(self.tp.snd_nxt);
                for s in dsack_in_window.clone() {
                    let f = self.seg(s).flags;
                    if f & EVER_RETRANS != 0 {
                        if let Some(m) = self.undo_marker {
                            if self.undo_retrans > 0 && s + 1 > m {
                                self.undo_retrans -= 1;
                            }
                        }
                        if f & SACKED != 0 && s < reord {
                            reord = s;
                        }
                    }
                }
            }
        }
        let mut regular = [SackBlock::default(); MAX_SACK_BLOCKS];
        let nreg = n.saturating_sub(first);
        regular[..nreg].copy_from_slice(&blocks[first..n]);
        regular[..nreg].sort_by_key(|b| b.start);
        for b in &regular[..nreg] {
            let start = b.start.max(self.tp.snd_una);
            let end = b.end.min(self.tp.snd_nxt);
            let mut s = start;
            while s < end {
                // Jump over any range processed for the previous ACK.
                if let Some(c) = self.sack_cache.iter().find(|c| c.start <= s && s < c.end) {
                    s = c.end;
                    continue;
                }
                let seg = *self.seg(s);
                if seg.flags & SACKED == 0 {
                    self.rack_advance(seg.flags, s, seg.tx_time, now);
                    if seg.flags & EVER_RETRANS == 0 {
                        // A never-retransmitted segment SACKed below the highest SACKed one
                        // filled a hole: reordering.
                        if s < self.fack() && s < reord {
                            reord = s;
                        }
                        sackt = widen(sackt, seg.tx_time);
                    }
                    self.mark_sacked(s);
                    fl.data_sacked = true;
                    delivered_now += 1;
                    self.rate_skb_delivered(&seg, &mut rs, &mut prior);
                }
                s += 1;
            }
        }
        // The end of tcp_sacktag_one with dup_sack: a D-SACKed segment that is SACKed (here
        // by a regular block, of this or an earlier ACK) and still counted as a
        // retransmission in flight (S|R) was a redundant retransmission: it is not in flight.
        for s in dsack_in_window {
            let f = self.seg(s).flags;
            if f & (SACKED | RETRANS) == SACKED | RETRANS {
                self.seg_mut(s).flags &= !RETRANS;
                self.tp.retrans_out -= 1;
            }
        }
        if n > 0 {
            self.sack_cache = [SackBlock::default(); MAX_SACK_BLOCKS];
            self.sack_cache[..nreg].copy_from_slice(&regular[..nreg]);
            if self.tp.ca_state != CaState::Loss || self.undo_marker.is_some() {
                self.check_sack_reordering(reord, false);
            }
        }
        if old_ack {
            // Linux tcp_ack: an old ACK's SACK information is still used.
            if n > 0 {
                self.fastretrans_alert(&mut fl, ctx);
                self.try_send(ctx);
            }
            return;
        }

        // Cumulative ACK (Linux tcp_clean_rtx_queue).
        let mut retrans_acked = false;
        let mut reord = self.tp.snd_nxt;
        while self.tp.snd_una < ack {
            self.ts_unlink(self.tp.snd_una);
            let seg = self.sb.pop_front().expect("scoreboard covers snd_una..snd_nxt");
            if seg.flags & SACKED != 0 {
                self.tp.sacked_out -= 1;
            } else {
                delivered_now += 1;
                self.tp.delivered += 1;
                self.rate_skb_delivered(&seg, &mut rs, &mut prior);
                if !self.spurious_retrans(&seg) {
                    self.rack_advance(seg.flags, self.tp.snd_una, seg.tx_time, now);
                }
                if seg.flags & EVER_RETRANS != 0 {
                    retrans_acked = true;
                } else {
                    ackt = widen(ackt, seg.tx_time);
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
        let pkts_acked = self.tp.snd_una - prior_una;
        self.retransmit_hint = self.retransmit_hint.max(self.tp.snd_una);
        let una_advanced = pkts_acked > 0;
        fl.una_advanced = una_advanced;
        if una_advanced && reord < prior_fack {
            // Non-retransmitted hole got filled: that's reordering.
            self.check_sack_reordering(reord, false);
        }
        if prior.is_some() {
            self.rack_update_reo_wnd(rs.prior_delivered);
        }

        // ECN feedback.
        let ce_delta = pkt.tcp.ce_count.wrapping_sub(self.ce_count_seen);
        self.ce_count_seen = pkt.tcp.ce_count;
        self.stats.ce_echoed += ce_delta as u64;
        self.tp.delivered_ce += ce_delta as u64;
        let sce_delta = pkt.tcp.sce_count.wrapping_sub(self.sce_count_seen);
        self.sce_count_seen = pkt.tcp.sce_count;
        self.tp.delivered_sce += sce_delta as u64;
        // The echo that starts a CWR reduction (Linux FLAG_ECE): the ECE flag, or with
        // accurate feedback an increase of the CE counter.
        let ece = match self.cfg.ecn {
            EcnMode::Off => false,
            EcnMode::Rfc3168 | EcnMode::Sce => pkt.tcp.ece,
            EcnMode::L4s => ce_delta > 0,
        };
        fl.ece = ece;

        // RTT (Linux tcp_clean_rtx_queue + tcp_ack_update_rtt): the estimator takes the oldest
        // newly ACKed segment, unless the ACK covers retransmitted data (Karn), else the oldest
        // newly SACKed; the congestion control gets the newest (`ca_rtt_us`).
        let seq_rtt = ackt.filter(|_| !retrans_acked).map(|(first, _)| now - first);
        let sack_rtt = sackt.map(|(first, _)| now - first);
        let ca_rtt = match (sackt, ackt) {
            (Some((_, last)), _) => Some(now - last),
            (None, Some((_, last))) if !retrans_acked => Some(now - last),
            _ => None,
        };
        if let Some(r) = seq_rtt.or(sack_rtt) {
            self.rtt_sample(r);
        }
        if let Some(r) = ca_rtt {
            self.tp.min_rtt = self.tp.min_rtt.min(r);
        }
        // Re-arm the RTO (or schedule a loss probe) on forward progress, or when a SACK reports
        // data sent before the head's latest retransmission (Linux FLAG_SET_XMIT_TIMER).
        let head_sent_after_sacked = sack_rtt.is_some_and(|r| self.sb.front().is_some_and(|h| r > now - h.tx_time));
        fl.set_xmit_timer = una_advanced || head_sent_after_sacked;

        let sample = AckSample { acked: pkts_acked, acked_ce: ce_delta, acked_sce: sce_delta, rtt: ca_rtt, prior_in_flight, ece: pkt.tcp.ece && self.cfg.ecn.is_on() };
        self.cc.pkts_acked(&mut self.tp, &sample);

        // Tail loss probe outcome (Linux tcp_process_tlp_ack), then loss detection and the
        // state machine (tcp_fastretrans_alert) when the ACK is "dubious".
        if let Some(h) = self.tlp_high_seq {
            self.process_tlp_ack(ack, h, &fl);
        }
        if !una_advanced || fl.data_sacked || fl.dsack || ece || self.tp.ca_state != CaState::Open {
            self.fastretrans_alert(&mut fl, ctx);
        }
        if fl.set_xmit_timer {
            self.set_xmit_timer(ctx);
        }
        let newly_lost = (self.tp.lost - lost_before) as u32;

        // Rate sample (Linux tcp_rate_gen).
        if self.tp.app_limited != 0 && self.tp.delivered > self.tp.app_limited {
            self.tp.app_limited = 0;
        }
        if delivered_now > 0 {
            self.tp.delivered_mstamp = now;
        }
        rs.acked_sacked = delivered_now;
        rs.ece_delta = ce_delta;
        rs.losses = newly_lost;
        rs.rtt = ca_rtt;
        rs.is_ece = ece;
        self.finish_rate_sample(&mut rs, prior, now);

        // cwnd (Linux tcp_cong_control). A `cong_control` algorithm sees the raw
        // `tp->is_cwnd_limited` flag and may mark the flow application-limited.
        // Linux tcp_is_cwnd_limited() and the raw tp->is_cwnd_limited flag it starts from.
        self.tp.is_cwnd_limited = self.is_cwnd_limited();
        if self.cc.cong_control(&mut self.tp, &rs) {
            // The algorithm has set cwnd and pacing (and may have set `tp.app_limited`).
        } else if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.cwnd_reduction(delivered_now, newly_lost, una_advanced);
        } else if self.may_raise_cwnd(&fl) {
            self.cc.cong_avoid(&mut self.tp, delivered_now);
        }
        self.update_pacing_rate();

        if let Some(n) = self.total_segs {
            if self.tp.snd_una >= n && self.stats.completed_at.is_none() {
                self.stats.completed_at = Some(now);
                self.rto_timer.cancel();
                self.tlp_pending = false;
            }
        }
        self.try_send(ctx);
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
}
