//! RTT estimation and the retransmission timeout: Linux `net/ipv4/tcp_input.c`
//! `tcp_rtt_estimator`, `tcp_set_rto`, `tcp_rearm_rto`, `tcp_enter_loss`,
//! `tcp_timeout_mark_lost`, and `net/ipv4/tcp_timer.c` `tcp_retransmit_timer`.

use super::ack::AckState;
use super::queue::*;
use super::{EndpointCtx, Phase, TcpSender, TCP_REORDERING};
use crate::cc::{CaEvent, CaState, CongestionControl};
use crate::event::FlowTimer;
use crate::packet::EcnMode;
use crate::time::Time;

impl TcpSender {
    /// Linux `tcp_ack_update_rtt` with the RTT candidates of `tcp_clean_rtx_queue` and
    /// `tcp_sacktag_write_queue`: the estimator takes the oldest newly ACKed segment, unless
    /// the ACK covers retransmitted data (Karn), else the oldest newly SACKed; the congestion
    /// control gets the newest (`ca_rtt_us`). The RTO is re-armed (or a loss probe scheduled)
    /// on forward progress, or when a SACK reports data sent before the head's latest
    /// retransmission (`FLAG_SET_XMIT_TIMER`).
    pub(super) fn ack_update_rtt(&mut self, st: &mut AckState) {
        let now = self.tp.now;
        let retrans_acked = st.retrans_acked;
        let seq_rtt = st.ackt.filter(|_| !retrans_acked).map(|(first, _)| now - first);
        let sack_rtt = st.sackt.map(|(first, _)| now - first);
        let ca_rtt = match (st.sackt, st.ackt) {
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
        st.ca_rtt = ca_rtt;
        let head_sent_after_sacked = sack_rtt.is_some_and(|r| self.sb.front().is_some_and(|h| r > now - h.tx_time));
        st.fl.set_xmit_timer = st.fl.una_advanced || head_sent_after_sacked;
    }

    /// Linux `tcp_rtt_estimator` + `tcp_set_rto`, in nanoseconds. As in Linux, `mdev`,
    /// `mdev_max` and `rttvar` hold 4 x the RFC 6298 RTTVAR: srtt gain 1/8, deviation gain 1/4
    /// (1/32 for decreases below srtt), `rttvar` the largest deviation of the last window but
    /// never below `rto_min`, and RTO = srtt + rttvar (3 x RTT after the first sample).
    /// A valid sample also resets the backoff (RFC 6298 §5.7).
    #[inline]
    pub(super) fn rtt_sample(&mut self, sample: Time) {
        let m = sample.0.max(1) as i64;
        let rto_min = self.cfg.rto_min.0 as i64;
        if self.tp.srtt == Time::ZERO {
            self.tp.srtt = Time(m as u64);
            self.mdev = Time(2 * m as u64);
            self.mdev_max = Time(self.mdev.0.max(rto_min as u64));
            self.rttvar = self.mdev_max;
            self.rtt_seq = self.tp.snd_nxt;
        } else {
            let srtt = self.tp.srtt.0 as i64;
            let err = m - srtt;
            self.tp.srtt = Time((srtt + err / 8).max(1) as u64);
            let mdev = self.mdev.0 as i64;
            let mut step = err.abs() - mdev / 4;
            if err < 0 && step > 0 {
                step /= 8;
            }
            self.mdev = Time((mdev + step).max(0) as u64);
            if self.mdev > self.mdev_max {
                self.mdev_max = self.mdev;
                if self.mdev_max > self.rttvar {
                    self.rttvar = self.mdev_max;
                }
            }
            if self.tp.snd_una > self.rtt_seq {
                if self.mdev_max < self.rttvar {
                    self.rttvar = Time(self.rttvar.0 - (self.rttvar.0 - self.mdev_max.0) / 4);
                }
                self.rtt_seq = self.tp.snd_nxt;
                self.mdev_max = Time(rto_min as u64);
            }
        }
        self.backoff = 0;
        self.rto = self.computed_rto();
    }

    pub(super) fn computed_rto(&self) -> Time {
        if self.tp.srtt == Time::ZERO {
            return self.no_sample_rto;
        }
        let base = self.tp.srtt + self.rttvar;
        let backed = Time(base.0.saturating_mul(1u64 << self.backoff.min(20)));
        backed.min(self.cfg.rto_max)
    }

    /// Linux `tcp_rearm_rto`: the RTO from now, or (after a probe or reordering timer) from
    /// the head's transmission.
    pub(super) fn rearm_rto(&mut self, ctx: &mut EndpointCtx) {
        if self.packets_out() == 0 {
            self.rto_timer.cancel();
            self.tlp_pending = false;
            return;
        }
        let mut rto = self.rto;
        if self.tlp_pending {
            let head = self.sb.front().map_or(ctx.now, |h| h.tx_time);
            rto = (head + self.rto).saturating_sub(ctx.now).max(Time(1));
        }
        self.tlp_pending = false;
        self.rto_timer.arm(ctx.now + rto, ctx.event(FlowTimer::Retransmit), ctx.events);
    }

    /// Retransmission timeout (Linux `tcp_retransmit_timer` + `tcp_enter_loss`).
    pub(super) fn on_rto(&mut self, ctx: &mut EndpointCtx) {
        self.stats.rto_events += 1;
        self.backoff += 1;
        if self.phase == Phase::SynSent {
            self.syn_retransmitted = true;
            self.rto = Time(self.cfg.rto_initial.0 << self.backoff.min(20)).min(self.cfg.rto_max);
            self.send_syn(ctx);
            return;
        }
        if self.packets_out() == 0 {
            return;
        }
        let state = self.tp.ca_state;
        // tcp_enter_loss: a new episode saves what undo needs and reduces ssthresh.
        if matches!(state, CaState::Open | CaState::Disorder) || self.tp.snd_una >= self.high_seq || (state == CaState::Loss && self.backoff == 1) {
            self.prior_ssthresh = self.current_ssthresh();
            self.prior_cwnd = self.tp.cwnd;
            self.tp.ssthresh = self.cc.ssthresh(&self.tp);
            self.cc.cwnd_event(&mut self.tp, CaEvent::Loss);
            self.init_undo();
        }
        // A timeout in Disorder after many SACKs: the reordering degree was over-estimated.
        if matches!(state, CaState::Open | CaState::Disorder) && self.tp.sacked_out >= TCP_REORDERING {
            self.reordering = self.reordering.min(TCP_REORDERING);
        }
        // tcp_timeout_mark_lost: every segment not SACKed is lost, except (with RACK) those
        // sent within the last RACK.rtt, the head always included.
        for seq in self.tp.snd_una..self.tp.snd_nxt {
            let seg = *self.seg(seq);
            if seg.flags & SACKED != 0 {
                continue;
            }
            if seq != self.tp.snd_una && seg.tx_time + self.rack_rtt > ctx.now {
                continue;
            }
            self.mark_skb_lost(seq);
        }
        self.retransmit_hint = self.tp.snd_una;
        self.tlp_high_seq = None;
        self.high_seq = self.tp.snd_nxt;
        self.set_state(CaState::Loss);
        self.tp.cwnd = self.in_flight() + 1;
        self.tp.cwnd_cnt = 0;
        self.queue_cwr = matches!(self.cfg.ecn, EcnMode::Rfc3168 | EcnMode::Sce);
        self.rto = self.computed_rto();
        self.rto_timer.arm(ctx.now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
        self.update_pacing_rate();
        self.tp.edt = ctx.now;
        self.try_send(ctx);
    }
}
