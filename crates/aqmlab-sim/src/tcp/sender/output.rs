//! Sending: Linux `net/ipv4/tcp_output.c` `tcp_write_xmit`, `tcp_transmit_skb`,
//! `tcp_xmit_retransmit_queue`, `tcp_event_data_sent`, `tcp_cwnd_validate`, pacing
//! (`tcp_update_pacing_rate` in `tcp_input.c`, EDT times as `tcp_update_skb_after_send`), and
//! the ECN codepoints of `tcp_ecn_send`.

use super::queue::*;
use super::{EndpointCtx, Phase, TcpSender};
use crate::cc::{CaEvent, CaState};
use crate::event::FlowTimer;
use crate::packet::{Direction, Ecn, Kind, Packet};
use crate::packet::EcnMode;
use crate::time::Time;

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
        self.app_open && self.total_segs.map_or(true, |n| self.tp.snd_nxt < n)
    }

    pub(super) fn send_syn(&mut self, ctx: &mut EndpointCtx) {
        let mut syn = Packet::new(self.flow, Direction::Forward, Kind::Syn, self.cfg.header_bytes);
        // RFC 3168 §6.1.1: request ECN with ECE and CWR on the SYN.
        if self.cfg.ecn.is_on() {
            syn.tcp.ece = true;
            syn.tcp.cwr = true;
        }
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

    /// Sends what cwnd, pacing and the receive window allow (Linux `tcp_write_xmit`).
    pub(super) fn try_send(&mut self, ctx: &mut EndpointCtx) {
        if self.phase != Phase::Established {
            return;
        }
        let now = ctx.now;
        let paced = self.tp.paced && self.tp.pacing_rate > 0.0;
        let mut cwnd_limited = false;
        let mut sent = 0;
        let mut sent_new = 0;
        loop {
            if paced && self.tp.edt > now {
                self.pacing_timer.arm(self.tp.edt, ctx.event(FlowTimer::Pacing), ctx.events);
                break;
            }
            if self.in_flight() >= self.tp.cwnd {
                break;
            }
            let (seq, kind) = if let Some(s) = self.next_retransmit() {
                (s, TxKind::Retrans)
            } else if self.has_new_data() && self.cfg.rwnd_packets.map_or(true, |w| self.packets_out() < w) {
                sent_new += 1;
                (self.tp.snd_nxt, TxKind::New)
            } else {
                // Nothing to send while cwnd has room: application-limited (tcp_rate_check_app_limited).
                if !self.has_new_data() {
                    self.tp.app_limited = (self.tp.delivered + self.in_flight() as u64).max(1);
                }
                break;
            };
            self.transmit(seq, kind, paced, ctx);
            sent += 1;
        }
        // tcp_write_xmit: new data sent schedules a loss probe (one per tail-loss episode).
        if sent_new > 0 {
            self.schedule_loss_probe(false, ctx);
        }
        cwnd_limited |= self.in_flight() >= self.tp.cwnd;
        // Linux tcp_cwnd_validate, called when something was sent or cwnd is the limit.
        if sent > 0 || cwnd_limited {
            if self.tp.snd_una >= self.cwnd_usage_seq || cwnd_limited || (!self.tp.cwnd_limited_flag && self.packets_out() > self.max_packets_out) {
                self.tp.cwnd_limited_flag = cwnd_limited;
                self.max_packets_out = self.packets_out();
                self.cwnd_usage_seq = self.tp.snd_nxt;
            }
        }
    }

    pub(super) fn transmit(&mut self, seq: u32, kind: TxKind, paced: bool, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        if self.packets_out() == 0 {
            // tcp_rate_skb_sent: a new flight starts.
            self.first_tx_time = now;
            self.tp.delivered_mstamp = now;
        }
        // tcp_event_data_sent: restart after idle, then note the send time. The event may
        // change the pacing rate (BBR paces at the estimated bandwidth after idle).
        if self.in_flight() == 0 {
            self.cc.cwnd_event(&mut self.tp, CaEvent::TxStart);
            if let Some(r) = self.cc.pacing_rate(&self.tp) {
                self.tp.pacing_rate = r;
            }
        }
        self.tp.lsndtime = now;
        let snap = Seg {
            tx_time: now,
            delivered: self.tp.delivered,
            delivered_ce: self.tp.delivered_ce,
            delivered_time: Some(self.tp.delivered_mstamp),
            first_tx: self.first_tx_time,
            tx_in_flight: self.in_flight() + 1,
            tx_lost: self.tp.lost,
            flags: if self.tp.app_limited != 0 { APP_LIMITED } else { 0 },
            ts_prev: NIL,
            ts_next: NIL,
        };
        let payload = self.payload_of(seq);
        let mut pkt = Packet::new(self.flow, Direction::Forward, Kind::Data, payload + self.cfg.header_bytes);
        pkt.tcp.seq = seq;
        pkt.tcp.payload = payload;
        pkt.tcp.ts_val = Self::ts_of(now);
        if kind != TxKind::New {
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
        } else {
            self.sb.push_back(snap);
            self.tp.snd_nxt += 1;
            self.tp.packets_out += 1;
            self.ts_push_back(seq);
            // RFC 3168 §6.1.2: ECT only on new data, never on retransmissions (Linux tcp_ecn_send).
            if matches!(self.cfg.ecn, EcnMode::Rfc3168 | EcnMode::Sce) {
                pkt.ecn = Ecn::Ect0;
                if self.queue_cwr {
                    pkt.tcp.cwr = true;
                    self.queue_cwr = false;
                }
            }
        }
        // L4S: ECT(1) on every data packet, retransmissions included (AccECN, RFC 9768 §3.1.5).
        if self.cfg.ecn == EcnMode::L4s {
            pkt.ecn = Ecn::Ect1;
        }
        if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.prr_out += 1;
        }
        self.stats.data_packets_sent += 1;
        if !self.rto_timer.is_armed() {
            self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
        }
        if paced {
            // tcp_update_skb_after_send: EDT departure times spaced by payload / rate, with
            // up to half a packet's time forgiven after idle, from the 10th data segment on.
            let prior = self.tp.edt;
            self.tp.edt = self.tp.edt.max(now);
            if self.stats.data_packets_sent >= 10 {
                let len_ns = Time::from_secs_f64(payload as f64 / self.tp.pacing_rate);
                let credit = self.tp.edt - prior;
                self.tp.edt += len_ns - Time(len_ns.0 / 2).min(credit);
            }
        }
        ctx.out.push(pkt);
    }

    /// TCP timestamps in 1 ms ticks, offset by one so that zero means "no timestamp".
    pub(super) fn ts_of(t: Time) -> u32 {
        (t.0 / 1_000_000) as u32 + 1
    }

    /// Linux `tcp_is_cwnd_limited`: the flag from `tcp_cwnd_validate`, or in slow start
    /// while cwnd is below twice the largest flight of the window.
    pub(super) fn is_cwnd_limited(&self) -> bool {
        self.tp.cwnd_limited_flag || (self.tp.in_slow_start() && self.tp.cwnd < 2 * self.max_packets_out)
    }
}
