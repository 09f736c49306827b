//! RACK loss detection (RFC 8985) as Linux `net/ipv4/tcp_recovery.c` with `tcp_recovery` = 1:
//! `tcp_rack_advance`, `tcp_rack_reo_wnd`, `tcp_rack_detect_loss`, `tcp_rack_mark_lost`,
//! `tcp_rack_reo_timeout`, `tcp_rack_update_reo_wnd`; and `tcp_identify_packet_loss`.

use super::ack::AckFlags;
use super::queue::*;
use super::{jiffies_up, EndpointCtx, TcpSender, TCP_RACK_RECOVERY_THRESH, TCP_TIMEOUT_MIN};
use crate::cc::{CaState, CongestionControl};
use crate::event::FlowTimer;
use crate::time::Time;

/// Linux `tcp_skb_sent_after`: t1/seq1 was sent after t2/seq2.
fn sent_after(t1: Time, t2: Time, seq1: u32, seq2: u32) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl TcpSender {
    /// Linux `tcp_rack_advance` (RFC 8985 §6.2 step 2): every delivered segment updates
    /// RACK.rtt, the most recently sent one RACK.xmit_ts / end_seq. A retransmission
    /// delivered in less than min_rtt is ambiguous (the original may have arrived) and is
    /// ignored.
    pub(super) fn rack_advance(&mut self, flags: u8, seq: u32, xmit: Time, now: Time) {
        let rtt = now - xmit;
        if flags & EVER_RETRANS != 0 && rtt < self.tp.min_rtt {
            return;
        }
        self.rack_advanced = true;
        self.rack_rtt = rtt;
        if sent_after(xmit, self.rack_mstamp, seq, self.rack_end_seq) {
            self.rack_mstamp = xmit;
            self.rack_end_seq = seq;
        }
    }

    /// Linux `tcp_rack_reo_wnd` (RFC 8985 §6.2 step 4): no window while reordering has never
    /// been seen and the flow is in Recovery/Loss or has DupThresh (`tp->reordering`)
    /// segments SACKed; otherwise min_rtt/4 times the D-SACK-driven steps, at most srtt.
    pub(super) fn rack_reo_wnd(&self) -> Time {
        if self.reord_seen == 0 {
            if matches!(self.tp.ca_state, CaState::Recovery | CaState::Loss) {
                return Time::ZERO;
            }
            if self.tp.sacked_out >= self.reordering {
                return Time::ZERO;
            }
        }
        if self.tp.min_rtt == Time::MAX {
            return self.tp.srtt;
        }
        Time((self.tp.min_rtt.0 / 4).saturating_mul(self.reo_wnd_steps as u64)).min(self.tp.srtt)
    }

    /// Linux `tcp_rack_detect_loss` (RFC 8985 §6.2 step 5): walk the segments in send order;
    /// every one sent before the most recently sent delivered segment and outstanding longer
    /// than RACK.rtt + reo_wnd is lost. Returns the longest remaining wait of the others.
    pub(super) fn rack_detect_loss(&mut self, now: Time) -> Time {
        let reo_wnd = self.rack_reo_wnd();
        let mut timeout = Time::ZERO;
        let mut seq = self.ts_first();
        while seq != NIL {
            let seg = *self.seg(seq);
            let next = self.ts_after(seq, &seg);
            // Skip ones marked lost but not yet retransmitted.
            if seg.flags & (LOST | RETRANS) == LOST {
                seq = next;
                continue;
            }
            if !sent_after(self.rack_mstamp, seg.tx_time, self.rack_end_seq, seq) {
                break;
            }
            let deadline = seg.tx_time + self.rack_rtt + reo_wnd;
            if deadline <= now {
                self.mark_skb_lost(seq);
                self.ts_unlink(seq);
            } else {
                timeout = timeout.max(deadline - now);
            }
            seq = next;
        }
        timeout
    }

    /// Linux `tcp_rack_mark_lost`: detect losses when RACK advanced; arm the reordering timer
    /// (`ICSK_TIME_REO_TIMEOUT`, jiffies-rounded + `TCP_TIMEOUT_MIN`) for the others.
    pub(super) fn rack_mark_lost(&mut self, ctx: &mut EndpointCtx) -> bool {
        if !self.rack_advanced {
            return false;
        }
        self.rack_advanced = false;
        let timeout = self.rack_detect_loss(ctx.now);
        if timeout > Time::ZERO {
            // inet_csk_reset_xmit_timer(.., max_when = icsk_rto): no later than one RTO.
            let at = ctx.now + (jiffies_up(timeout) + TCP_TIMEOUT_MIN).min(self.rto);
            self.reorder_timer.arm(at, ctx.event(FlowTimer::Reorder), ctx.events);
            return true;
        }
        false
    }

    /// Linux `tcp_rack_reo_timeout`: the reordering window has passed; mark the expired
    /// segments lost, enter Recovery if not in it yet, and retransmit.
    pub(super) fn rack_reo_timeout(&mut self, ctx: &mut EndpointCtx) {
        let prior_inflight = self.in_flight();
        self.rack_detect_loss(ctx.now);
        if prior_inflight != self.in_flight() {
            if self.tp.ca_state != CaState::Recovery {
                self.enter_recovery(false);
                if !self.cc.has_cong_control() {
                    self.cwnd_reduction(1, 0, false, false, false);
                }
            }
            self.try_send(ctx);
        }
    }

    /// Linux `tcp_rack_update_reo_wnd`: a D-SACK seen (after reordering) grows the window by
    /// one min_rtt/4 step, at most once per round trip; the steps persist for 16 recoveries
    /// (`TCP_RACK_RECOVERY_THRESH`) and then fall back to one.
    pub(super) fn rack_update_reo_wnd(&mut self, prior_delivered: u64) {
        if prior_delivered == 0 {
            return;
        }
        // Disregard a D-SACK if a round trip has not passed since the last adjustment.
        if prior_delivered < self.rack_last_delivered {
            self.rack_dsack_seen = false;
        }
        if self.rack_dsack_seen {
            self.reo_wnd_steps = self.reo_wnd_steps.saturating_add(1);
            self.rack_dsack_seen = false;
            self.rack_last_delivered = self.tp.delivered;
            self.reo_wnd_persist = TCP_RACK_RECOVERY_THRESH;
        } else if self.reo_wnd_persist == 0 {
            self.reo_wnd_steps = 1;
        }
    }

    /// Linux `tcp_identify_packet_loss` with RACK (`tcp_recovery` = 1); returns whether a
    /// retransmission was found lost (FLAG_LOST_RETRANS).
    pub(super) fn identify_packet_loss(&mut self, fl: &mut AckFlags, ctx: &mut EndpointCtx) -> bool {
        if self.packets_out() == 0 {
            return false;
        }
        let prior_retrans = self.tp.retrans_out;
        if self.rack_mark_lost(ctx) {
            fl.set_xmit_timer = false;
        }
        let lost_retrans = prior_retrans > self.tp.retrans_out;
        fl.lost_retrans |= lost_retrans;
        lost_retrans
    }
}
