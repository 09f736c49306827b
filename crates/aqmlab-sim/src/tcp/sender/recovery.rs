//! The congestion state machine (Linux `net/ipv4/tcp_input.c` `tcp_fastretrans_alert`,
//! `tcp_enter_recovery`, `tcp_try_to_open`) and the cwnd reduction of CWR and Recovery:
//! `tcp_init_cwnd_reduction`, PRR (RFC 6937, `tcp_cwnd_reduction`), `tcp_end_cwnd_reduction`.

use super::ack::AckFlags;
use super::queue::*;
use super::{EndpointCtx, TcpSender};
use crate::cc::{CaEvent, CaState};
use crate::packet::EcnMode;

impl TcpSender {
    pub(super) fn set_state(&mut self, s: CaState) {
        if self.tp.ca_state != s {
            self.cc.set_state(&mut self.tp, s);
            self.tp.ca_state = s;
        }
    }

    /// Linux `tcp_fastretrans_alert` with SACK and RACK: end of episodes and undo (D), then
    /// per state loss detection and entry into Recovery (E). RFC 6675's DupThresh marking
    /// (`tcp_update_scoreboard`) is not used with RACK; DupThresh only zeroes the RACK
    /// reordering window (`tcp_rack_reo_wnd`).
    pub(super) fn fastretrans_alert(&mut self, fl: &mut AckFlags, ctx: &mut EndpointCtx) {
        // A. An ECN echo (with accurate feedback, a CE counter increase) requires the
        // reduction: no later undo may restore cwnd/ssthresh.
        if fl.ece {
            self.prior_ssthresh = 0;
        }
        // D. Check state exit conditions.
        if self.tp.ca_state == CaState::Open {
            self.retrans_stamp = None;
        } else if self.tp.snd_una >= self.high_seq {
            match self.tp.ca_state {
                // CWR is held until something *above* high_seq is ACKed, so that the CWR
                // flag has reached the receiver.
                CaState::Cwr if self.tp.snd_una != self.high_seq => {
                    self.end_cwnd_reduction();
                    self.set_state(CaState::Open);
                }
                CaState::Recovery => {
                    self.try_undo_recovery();
                    self.end_cwnd_reduction();
                }
                _ => {}
            }
        }
        // E. Process state.
        match self.tp.ca_state {
            CaState::Recovery => {
                if fl.una_advanced && self.try_undo_partial(fl.prior_una) {
                    return;
                }
                if self.try_undo_dsack() {
                    self.try_to_open(fl.ece);
                }
                self.identify_packet_loss(fl, ctx);
                if self.tp.ca_state != CaState::Recovery {
                    if self.tp.lost_out == 0 {
                        return;
                    }
                    // Undo reverted the recovery; evident loss starts a new one.
                    self.enter_recovery(fl.ece);
                }
            }
            CaState::Loss => {
                self.process_loss(fl);
                let lost_retrans = self.identify_packet_loss(fl, ctx);
                // Change state if cwnd is undone or retransmissions are lost.
                if self.tp.ca_state == CaState::Open || lost_retrans {
                    self.alert_open_disorder_cwr(fl, ctx);
                }
            }
            _ => self.alert_open_disorder_cwr(fl, ctx),
        }
    }

    /// The `default:` branch of `tcp_fastretrans_alert` (Open, Disorder, CWR).
    pub(super) fn alert_open_disorder_cwr(&mut self, fl: &mut AckFlags, ctx: &mut EndpointCtx) {
        if matches!(self.tp.ca_state, CaState::Open | CaState::Disorder) {
            self.try_undo_dsack();
        }
        self.identify_packet_loss(fl, ctx);
        // tcp_time_to_recover with RACK: "the loss is proven".
        if self.tp.lost_out == 0 {
            self.try_to_open(fl.ece);
            return;
        }
        self.enter_recovery(fl.ece);
    }

    /// Linux `tcp_try_to_open`: enter CWR on an ECN echo (at most once per window), else Open
    /// or Disorder.
    pub(super) fn try_to_open(&mut self, ece: bool) {
        if !self.any_retrans_done() {
            self.retrans_stamp = None;
        }
        if ece && matches!(self.tp.ca_state, CaState::Open | CaState::Disorder) {
            // tcp_enter_cwr.
            self.prior_ssthresh = 0;
            self.undo_marker = None;
            self.init_cwnd_reduction();
            self.stats.cwr_reductions += 1;
            self.set_state(CaState::Cwr);
        }
        if self.tp.ca_state != CaState::Cwr {
            self.try_keep_open();
        }
    }

    /// Linux `tcp_try_keep_open`: Disorder while SACKed/lost segments or retransmissions
    /// remain, else Open.
    pub(super) fn try_keep_open(&mut self) {
        let state = if self.tp.sacked_out + self.tp.lost_out > 0 || self.any_retrans_done() { CaState::Disorder } else { CaState::Open };
        if self.tp.ca_state != state {
            self.set_state(state);
            self.high_seq = self.tp.snd_nxt;
        }
    }

    /// Linux `tcp_any_retrans_done`.
    pub(super) fn any_retrans_done(&self) -> bool {
        self.tp.retrans_out > 0 || self.sb.front().is_some_and(|s| s.flags & EVER_RETRANS != 0)
    }

    /// Linux `tcp_enter_recovery`: a reduction already under way (CWR) continues with its
    /// ssthresh and recovery point; otherwise remember ssthresh for undo and start PRR.
    pub(super) fn enter_recovery(&mut self, ece: bool) {
        // tcp_retrans_stamp_cleanup: start the clock with this episode's fast retransmit
        // (for undo) unless retransmissions of an earlier one are still out.
        if !self.any_retrans_done() {
            self.retrans_stamp = None;
        }
        self.stats.fast_recoveries += 1;
        self.prior_ssthresh = 0;
        self.init_undo();
        if !matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            if !ece {
                self.prior_ssthresh = self.current_ssthresh();
            }
            self.init_cwnd_reduction();
        }
        self.set_state(CaState::Recovery);
    }

    /// Linux `tcp_current_ssthresh`.
    pub(super) fn current_ssthresh(&self) -> u32 {
        if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.tp.ssthresh
        } else {
            self.tp.ssthresh.max((self.tp.cwnd >> 1) + (self.tp.cwnd >> 2))
        }
    }

    /// Linux `tcp_init_cwnd_reduction`: recovery point, PRR state, ssthresh, queue CWR.
    pub(super) fn init_cwnd_reduction(&mut self) {
        self.high_seq = self.tp.snd_nxt;
        self.tlp_high_seq = None;
        self.tp.cwnd_cnt = 0;
        self.prior_cwnd = self.tp.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        self.queue_cwr = matches!(self.cfg.ecn, EcnMode::Rfc3168 | EcnMode::Sce);
    }

    /// PRR (RFC 6937 §3, Linux `tcp_cwnd_reduction`): spread the reduction over the ACKs of
    /// one round, with the slow-start reduction bound once pipe falls below ssthresh.
    pub(super) fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: u32, una_advanced: bool) {
        if newly_acked_sacked == 0 || self.prior_cwnd == 0 {
            return;
        }
        let in_flight = self.in_flight() as i64;
        let ssthresh = self.tp.ssthresh as i64;
        let delta = ssthresh - in_flight;
        self.prr_delivered += newly_acked_sacked;
        let prr_delivered = self.prr_delivered as i64;
        let prr_out = self.prr_out as i64;
        let mut sndcnt = if delta < 0 {
            let dividend = ssthresh * prr_delivered + self.prior_cwnd as i64 - 1;
            dividend / self.prior_cwnd as i64 - prr_out
        } else {
            // Slow-start reduction bound, +1 only on forward progress without new loss.
            let bound = (prr_delivered - prr_out).max(newly_acked_sacked as i64) + (una_advanced && newly_lost == 0) as i64;
            delta.min(bound)
        };
        // Force a fast retransmit upon entering recovery.
        sndcnt = sndcnt.max(if self.prr_out > 0 { 0 } else { 1 });
        self.tp.cwnd = ((in_flight + sndcnt).max(1) as u32).min(self.tp.cwnd_clamp);
    }

    /// Linux `tcp_end_cwnd_reduction`: cwnd = ssthresh after CWR or an un-undone Recovery.
    pub(super) fn end_cwnd_reduction(&mut self) {
        if self.cc.has_cong_control() {
            return;
        }
        if self.tp.ssthresh < u32::MAX && (self.tp.ca_state == CaState::Cwr || self.undo_marker.is_some()) {
            self.tp.cwnd = self.tp.ssthresh.max(1).min(self.tp.cwnd_clamp);
        }
        self.cc.cwnd_event(&mut self.tp, CaEvent::CompleteCwr);
    }
}
