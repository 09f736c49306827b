//! Tail loss probe (RFC 8985 §7): Linux `net/ipv4/tcp_output.c` `tcp_schedule_loss_probe`,
//! `tcp_send_loss_probe`, `net/ipv4/tcp_input.c` `tcp_set_xmit_timer`, `tcp_process_tlp_ack`.

use super::ack::AckFlags;
use super::output::TxKind;
use super::{jiffies_up, EndpointCtx, TcpSender, TCP_TIMEOUT_MIN};
use crate::cc::CaState;
use crate::event::FlowTimer;
use crate::time::Time;
use std::num::NonZeroU32;

/// The probe timeout of `tcp_schedule_loss_probe`: 2·srtt rounded up to jiffies plus `extra`
/// (`rto_initial` before the first RTT sample), but no later than `rto_delta` (the time left
/// to the RTO) rounded up to jiffies, when that is positive.
pub(super) fn loss_probe_timeout(srtt: Time, extra: Time, rto_initial: Time, rto_delta: Time) -> Time {
    let timeout = if srtt > Time::ZERO { jiffies_up(Time(2 * srtt.0)) + extra } else { rto_initial };
    // min(timeout, jiffies_up(rto_delta)), whose rounding never goes down: an RTO delta at or
    // past the timeout leaves it, without the rounding's division (the usual case: the RTO
    // is srtt plus 200 ms or more).
    if rto_delta > Time::ZERO && rto_delta < timeout {
        timeout.min(jiffies_up(rto_delta))
    } else {
        timeout
    }
}

impl TcpSender {
    /// Linux `tcp_set_xmit_timer`: a loss probe if one may be scheduled, else the RTO.
    pub(super) fn set_xmit_timer(&mut self, ctx: &mut EndpointCtx) {
        if !self.schedule_loss_probe(true, ctx) {
            self.rearm_rto(ctx);
        }
    }

    /// Linux `tcp_schedule_loss_probe` (RFC 8985 §7.2, `tcp_early_retrans` = 3): in Open or
    /// CWR with data outstanding, PTO = 2·srtt plus `TCP_RTO_MIN` when one segment is out
    /// (delayed-ACK allowance) or `TCP_TIMEOUT_MIN` otherwise, but no later than the RTO.
    #[inline]
    pub(super) fn schedule_loss_probe(&mut self, advancing_rto: bool, ctx: &mut EndpointCtx) -> bool {
        if self.packets_out() == 0 || !matches!(self.tp.ca_state, CaState::Open | CaState::Cwr) {
            return false;
        }
        let extra = if self.packets_out() == 1 { self.cfg.rto_min } else { TCP_TIMEOUT_MIN };
        let rto_delta = if advancing_rto {
            self.rto
        } else {
            let head = self.sb.front().map_or(ctx.now, |h| h.tx_time);
            (head + self.rto).saturating_sub(ctx.now)
        };
        let timeout = loss_probe_timeout(self.tp.srtt, extra, self.cfg.rto_initial, rto_delta);
        self.tlp_pending = true;
        self.rto_timer.arm(ctx.now + timeout, ctx.event(FlowTimer::Retransmit), ctx.events);
        true
    }

    /// Linux `tcp_send_loss_probe`: one probe per tail-loss episode, new data if the
    /// application has some and the receive window allows (`tcp_write_xmit` with push_one = 2:
    /// cwnd ignored, pacing honoured), else a retransmission of the last segment, SACKed or
    /// not (`skb_rb_last`). When pacing holds the new segment back, no probe is recorded and
    /// the RTO is re-armed from the head's transmission.
    pub(super) fn send_loss_probe(&mut self, ctx: &mut EndpointCtx) {
        if self.tlp_high_seq.is_none() && self.packets_out() > 0 {
            self.tlp_retrans = false;
            let mut sent = false;
            if self.has_new_data() && self.cfg.rwnd_packets.map_or(true, |w| self.packets_out() < w) {
                let paced = self.tp.paced && self.tp.pacing_rate > 0.0;
                if paced && self.tp.edt > ctx.now {
                    // tcp_pacing_check: the pacing timer sends it later.
                    self.pacing_timer.arm(self.tp.edt, ctx.event(FlowTimer::Pacing), ctx.events);
                } else {
                    let seq = self.tp.snd_nxt;
                    self.transmit(seq, 1, TxKind::New, paced, ctx);
                    self.wq_left = self.wq_left.saturating_sub(1);
                    sent = true;
                }
            } else {
                let last = self.tp.snd_nxt - 1;
                self.transmit(last, 1, TxKind::Probe, false, ctx);
                self.tlp_retrans = true;
                sent = true;
            }
            if sent {
                // snd_nxt is past the segment just sent, never 0.
                self.tlp_high_seq = Some(NonZeroU32::new(self.tp.snd_nxt).expect("a probe was sent"));
                self.stats.loss_probes += 1;
                // Restart the RTO from now.
                self.tlp_pending = false;
            }
        }
        self.rearm_rto(ctx);
    }

    /// Linux `tcp_process_tlp_ack`: a probe that repaired a loss (the ACK goes beyond it)
    /// costs one cwnd reduction; a D-SACK or a pure duplicate ACK shows no loss.
    pub(super) fn process_tlp_ack(&mut self, ack: u32, tlp_high_seq: u32, fl: &AckFlags) {
        if ack < tlp_high_seq {
            return;
        }
        if !self.tlp_retrans || fl.dsack_tlp {
            self.tlp_high_seq = None;
        } else if ack > tlp_high_seq {
            self.init_cwnd_reduction();
            self.set_state(CaState::Cwr);
            self.end_cwnd_reduction();
            self.try_keep_open();
        } else if !(fl.una_advanced || fl.data_sacked) {
            self.tlp_high_seq = None;
        }
    }
}
