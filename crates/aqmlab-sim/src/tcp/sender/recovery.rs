//! The congestion state machine (Linux `net/ipv4/tcp_input.c` `tcp_fastretrans_alert`,
//! `tcp_enter_recovery`, `tcp_try_to_open`) and the cwnd reduction of CWR and Recovery:
//! `tcp_init_cwnd_reduction`, PRR (RFC 6937, `tcp_cwnd_reduction`), `tcp_end_cwnd_reduction`.

use super::ack::AckFlags;
use super::queue::*;
use super::{EndpointCtx, TcpSender};
use crate::cc::{CaEvent, CaState, CongestionControl};
use crate::packet::EcnMode;
use crate::tcp::PrrVersion;

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
    /// one round, with a reduction bound once pipe falls to ssthresh that depends on the
    /// kernel's generation (`TcpConfig::prr`, [`PrrVersion`]). `retrans_data_acked` and
    /// `lost_retrans` are Linux's `FLAG_RETRANS_DATA_ACKED` and `FLAG_LOST_RETRANS`.
    pub(super) fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: u32, una_advanced: bool, retrans_data_acked: bool, lost_retrans: bool) {
        if newly_acked_sacked == 0 || self.prior_cwnd == 0 {
            return;
        }
        let in_flight = self.in_flight();
        self.prr_delivered += newly_acked_sacked;
        let sndcnt = prr_sndcnt(
            self.cfg.prr,
            PrrInput {
                ssthresh: self.tp.ssthresh,
                in_flight,
                prior_cwnd: self.prior_cwnd,
                prr_delivered: self.prr_delivered,
                prr_out: self.prr_out,
                newly_acked_sacked,
                newly_lost,
                una_advanced,
                retrans_data_acked,
                lost_retrans,
            },
        );
        self.tp.cwnd = ((in_flight as i64 + sndcnt).max(1) as u32).min(self.tp.cwnd_clamp);
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

/// What one ACK gives `tcp_cwnd_reduction` (after `prr_delivered` has counted this ACK).
#[derive(Clone, Copy, Debug)]
pub(super) struct PrrInput {
    pub(super) ssthresh: u32,
    pub(super) in_flight: u32,
    pub(super) prior_cwnd: u32,
    pub(super) prr_delivered: u32,
    pub(super) prr_out: u32,
    pub(super) newly_acked_sacked: u32,
    pub(super) newly_lost: u32,
    pub(super) una_advanced: bool,
    pub(super) retrans_data_acked: bool,
    pub(super) lost_retrans: bool,
}

/// Linux `tcp_cwnd_reduction`'s `sndcnt`: how many packets this ACK lets out beyond the pipe
/// (cwnd = in_flight + sndcnt), per kernel generation ([`PrrVersion`]).
pub(super) fn prr_sndcnt(v: PrrVersion, x: PrrInput) -> i64 {
    let ssthresh = x.ssthresh as i64;
    let delta = ssthresh - x.in_flight as i64;
    let (delivered, out, newly) = (x.prr_delivered as i64, x.prr_out as i64, x.newly_acked_sacked as i64);
    let sndcnt = if delta < 0 {
        // Proportional: ⌈ssthresh · prr_delivered / prior_cwnd⌉ − prr_out.
        (ssthresh * delivered + x.prior_cwnd as i64 - 1) / x.prior_cwnd as i64 - out
    } else {
        let slow_start_bound = (delivered - out).max(newly) + 1;
        match v {
            PrrVersion::RetransAcked if x.retrans_data_acked && !x.lost_retrans => delta.min(slow_start_bound),
            PrrVersion::UnaAdvanced if x.una_advanced && x.newly_lost == 0 => delta.min(slow_start_bound),
            PrrVersion::RetransAcked | PrrVersion::UnaAdvanced => delta.min(newly),
            PrrVersion::Crb => delta.min((delivered - out).max(newly) + (x.una_advanced && x.newly_lost == 0) as i64),
        }
    };
    // Force a fast retransmit upon entering recovery.
    sndcnt.max(if x.prr_out > 0 { 0 } else { 1 })
}

#[cfg(test)]
mod prr_tests {
    use super::*;

    /// A CWR reduction (ECN, nothing retransmitted) whose pipe has fallen below ssthresh:
    /// ssthresh 10, 6 in flight, prior_cwnd 20, 12 delivered and 10 sent so far in the
    /// episode, this ACK delivers 2 and advances snd_una with no loss.
    fn below_ssthresh() -> PrrInput {
        PrrInput {
            ssthresh: 10,
            in_flight: 6,
            prior_cwnd: 20,
            prr_delivered: 12,
            prr_out: 10,
            newly_acked_sacked: 2,
            newly_lost: 0,
            una_advanced: true,
            retrans_data_acked: false,
            lost_retrans: false,
        }
    }

    #[test]
    fn below_ssthresh_each_generation_bounds_the_send_as_its_source_says() {
        let x = below_ssthresh();
        // delta = 10 - 6 = 4.
        // 2015 (5.4): no retransmitted data ACKed -> conservation: min(4, 2) = 2.
        assert_eq!(prr_sndcnt(PrrVersion::RetransAcked, x), 2);
        // Oct 2020 (5.11): snd_una advanced, no loss -> min(4, max(12-10, 2) + 1) = 3.
        assert_eq!(prr_sndcnt(PrrVersion::UnaAdvanced, x), 3);
        // May 2022 (5.19+): min(4, max(2, 2) + 1) = 3.
        assert_eq!(prr_sndcnt(PrrVersion::Crb, x), 3);
        // With 5 banked (prr_delivered - prr_out = 5): 2022 sends min(4, 5 + 1) = 4; the
        // Oct-2020 form the same; 2015 still conserves: 2.
        let banked = PrrInput { prr_delivered: 15, ..x };
        assert_eq!(prr_sndcnt(PrrVersion::Crb, banked), 4);
        assert_eq!(prr_sndcnt(PrrVersion::UnaAdvanced, banked), 4);
        assert_eq!(prr_sndcnt(PrrVersion::RetransAcked, banked), 2);
        // A new loss on this ACK: 2022 -> min(4, max(5, 2)) = 4 (CRB, no +1); Oct 2020 -> 2.
        let lossy = PrrInput { newly_lost: 1, ..banked };
        assert_eq!(prr_sndcnt(PrrVersion::Crb, lossy), 4);
        assert_eq!(prr_sndcnt(PrrVersion::UnaAdvanced, lossy), 2);
    }

    #[test]
    fn the_2015_form_slow_starts_only_when_retransmitted_data_is_acked_without_lost_retransmissions() {
        let x = PrrInput { retrans_data_acked: true, ..below_ssthresh() };
        // min(4, max(2, 2) + 1) = 3.
        assert_eq!(prr_sndcnt(PrrVersion::RetransAcked, x), 3);
        // A retransmission was found lost on the same ACK: conservation again.
        assert_eq!(prr_sndcnt(PrrVersion::RetransAcked, PrrInput { lost_retrans: true, ..x }), 2);
        // snd_una did not advance (a SACK-only ACK): the 2015 form does not look at it.
        assert_eq!(prr_sndcnt(PrrVersion::RetransAcked, PrrInput { una_advanced: false, ..x }), 3);
    }

    #[test]
    fn above_ssthresh_all_generations_send_the_proportional_share() {
        // ssthresh 10, 14 in flight, prior 20, delivered 7, sent 3: ceil(70/20) - 3 = 1.
        let x = PrrInput { in_flight: 14, prr_delivered: 7, prr_out: 3, ..below_ssthresh() };
        for v in [PrrVersion::RetransAcked, PrrVersion::UnaAdvanced, PrrVersion::Crb] {
            assert_eq!(prr_sndcnt(v, x), 1, "{v:?}");
        }
        // Nothing sent yet in the episode and a proportional share of 0 (⌈10·0/20⌉ = 0): the
        // fast retransmit is forced, 1.
        let first = PrrInput { in_flight: 19, prr_delivered: 0, prr_out: 0, ..below_ssthresh() };
        assert_eq!(prr_sndcnt(PrrVersion::RetransAcked, first), 1);
    }
}
