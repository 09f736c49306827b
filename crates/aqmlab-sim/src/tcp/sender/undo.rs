//! Undo of spurious reductions (Linux `net/ipv4/tcp_input.c`: `tcp_init_undo`,
//! `tcp_may_undo`, `tcp_packet_delayed` (Eifel, RFC 3522), `tcp_undo_cwnd_reduction`,
//! `tcp_try_undo_recovery`, `_dsack`, `_partial`, `_loss`, `tcp_process_loss` without F-RTO).

use super::ack::AckFlags;
use super::queue::*;
use super::{TcpSender, TCP_RACK_RECOVERY_THRESH};
use crate::cc::{CaState, CongestionControl};

impl TcpSender {
    /// Linux `tcp_init_undo`: retransmissions still in flight, a TLP retransmission among
    /// them, may cause D-SACKs later; 0 would mean "can undo now", so none is -1.
    pub(super) fn init_undo(&mut self) {
        self.undo_marker = Some(self.tp.snd_una);
        let mut n = self.tp.retrans_out as i32;
        if self.tlp_high_seq.is_some() && self.tlp_retrans {
            n += 1;
        }
        self.undo_retrans = if n > 0 { n } else { -1 };
    }

    /// Linux `tcp_tsopt_ecr_before`: the ACK echoes a timestamp older than `when`.
    pub(super) fn tsecr_before(&self, when: u32) -> bool {
        self.rcv_tsecr != 0 && (self.rcv_tsecr.wrapping_sub(when) as i32) < 0
    }

    /// Linux `tcp_packet_delayed` (Eifel detection, RFC 3522; 6.12+): the ACK was triggered
    /// by an original transmission sent before the episode's first retransmission, or nothing
    /// was retransmitted at all (no `retrans_stamp`). Linux's exceptions for a cleared stamp
    /// (non-SACK reopening, SYN_SENT) do not arise here: SACK is always on and the handshake
    /// does not use this path.
    pub(super) fn packet_delayed(&self) -> bool {
        match self.retrans_stamp {
            Some(w) => self.tsecr_before(w),
            None => true,
        }
    }

    /// Linux `tcp_skb_spurious_retrans`: a retransmitted segment whose ACK echoes an earlier
    /// transmission (it does not advance RACK).
    pub(super) fn spurious_retrans(&self, seg: &Seg) -> bool {
        seg.flags & EVER_RETRANS != 0 && self.tsecr_before(Self::ts_of(seg.tx_time))
    }

    /// Linux `tcp_may_undo`: no retransmission of the episode was needed (each D-SACKed) or
    /// the timestamps show the original arrived.
    pub(super) fn may_undo(&self) -> bool {
        self.undo_marker.is_some() && (self.undo_retrans == 0 || self.packet_delayed())
    }

    /// Linux `tcp_undo_cwnd_reduction`: restore cwnd (the CC's `undo_cwnd`) and ssthresh.
    pub(super) fn undo_cwnd_reduction(&mut self, unmark_loss: bool) {
        if unmark_loss {
            self.sb.for_each_mut(|s| s.flags &= !LOST);
            self.tp.lost_out = 0;
            self.retransmit_hint = self.tp.snd_una;
        }
        if self.prior_ssthresh != 0 {
            self.tp.cwnd = self.cc.undo_cwnd(&self.tp).min(self.tp.cwnd_clamp);
            if self.prior_ssthresh > self.tp.ssthresh {
                self.tp.ssthresh = self.prior_ssthresh;
                // tcp_ecn_withdraw_cwr.
                self.queue_cwr = false;
            }
        }
        self.undo_marker = None;
        // Force RACK to re-examine losses.
        self.rack_advanced = true;
        self.stats.undos += 1;
    }

    /// Linux `tcp_try_undo_recovery`: at the end of Recovery/Loss, undo if every
    /// retransmission proved unnecessary; then Open.
    pub(super) fn try_undo_recovery(&mut self) {
        if self.may_undo() {
            self.undo_cwnd_reduction(false);
        } else if self.reo_wnd_persist > 0 {
            self.reo_wnd_persist -= 1;
        }
        self.set_state(CaState::Open);
    }

    /// Linux `tcp_try_undo_dsack`: D-SACKs have covered every retransmission.
    pub(super) fn try_undo_dsack(&mut self) -> bool {
        if self.undo_marker.is_some() && self.undo_retrans == 0 {
            self.reo_wnd_persist = (self.reo_wnd_persist + 1).min(TCP_RACK_RECOVERY_THRESH);
            self.undo_cwnd_reduction(false);
            return true;
        }
        false
    }

    /// Linux `tcp_try_undo_partial`: the hole was filled by the delayed original (timestamps):
    /// reordering, and undo once no retransmission is in flight. Returns true to stop
    /// further loss marking on this ACK.
    pub(super) fn try_undo_partial(&mut self, prior_una: u32) -> bool {
        if self.undo_marker.is_some() && self.packet_delayed() {
            self.check_sack_reordering(prior_una, true);
            if self.tp.retrans_out > 0 {
                return true;
            }
            if !self.any_retrans_done() {
                self.retrans_stamp = None;
            }
            self.undo_cwnd_reduction(true);
            self.try_keep_open();
        }
        false
    }

    /// Linux `tcp_try_undo_loss` (without F-RTO).
    pub(super) fn try_undo_loss(&mut self) -> bool {
        if self.may_undo() {
            self.undo_cwnd_reduction(true);
            self.set_state(CaState::Open);
            return true;
        }
        false
    }

    /// Linux `tcp_process_loss` without F-RTO (RFC 5682 is not modelled): undo on forward
    /// progress when the timestamps show a spurious timeout; end of Loss at high_seq.
    pub(super) fn process_loss(&mut self, fl: &AckFlags) {
        let recovered = self.tp.snd_una >= self.high_seq;
        if fl.una_advanced && self.try_undo_loss() {
            return;
        }
        if recovered {
            self.try_undo_recovery();
        }
    }
}
