//! The TCP receiver, as Linux's `tcp_rcv_established`/`__tcp_ack_snd_check` decide ACKs:
//!
//! - one ACK per two full segments received (RFC 1122 §4.2.3.2, RFC 5681 §4.2);
//! - otherwise a delayed ACK after 40 ms (`TCP_DELACK_MIN`);
//! - immediately while in quick-ACK mode (the first 16 ACKs, `TCP_MAX_QUICKACKS`), for
//!   out-of-order or duplicate data, and while or when a hole is filled (RFC 5681 §4.2);
//! - SACK blocks (RFC 2018), the block with the most recent segment first, at most 3;
//! - RFC 3168 ECN echo: ECE on every ACK from a CE arrival until a segment with CWR.

use super::{EndpointCtx, TcpConfig};
use crate::event::{FlowTimer, Timer};
use crate::packet::{Direction, Ecn, Kind, Packet, SackBlock, MAX_SACK_BLOCKS};
use crate::scenario::EcnMode;

/// A contiguous range of out-of-order data held by the receiver.
#[derive(Clone, Copy, Debug)]
struct OooBlock {
    start: u32,
    end: u32,
    payload_bytes: u64,
}

#[derive(Debug)]
pub struct TcpReceiver {
    flow: u32,
    header_bytes: u32,
    ecn: EcnMode,
    delayed_ack: crate::time::Time,
    /// Next segment expected.
    pub rcv_nxt: u32,
    /// Out-of-order ranges above `rcv_nxt`, most recently changed first.
    ooo: Vec<OooBlock>,
    /// Full segments received since the last ACK sent.
    unacked: u32,
    quick: u32,
    delack: Timer,
    ece_latched: bool,
    /// CE-marked data packets received (exact count, echoed in every ACK).
    pub ce_received: u32,
    /// Payload bytes delivered in order to the application.
    pub delivered_bytes: u64,
    pub acks_sent: u64,
}

impl TcpReceiver {
    pub fn new(flow: u32, cfg: &TcpConfig) -> Self {
        TcpReceiver {
            flow,
            header_bytes: cfg.header_bytes,
            ecn: cfg.ecn,
            delayed_ack: cfg.delayed_ack,
            rcv_nxt: 0,
            ooo: Vec::with_capacity(8),
            unacked: 0,
            quick: cfg.quickacks,
            delack: Timer::default(),
            ece_latched: false,
            ce_received: 0,
            delivered_bytes: 0,
            acks_sent: 0,
        }
    }

    /// Handles a packet arriving from the sender.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match pkt.kind {
            Kind::Syn => {
                let mut reply = Packet::new(self.flow, Direction::Reverse, Kind::SynAck, self.header_bytes);
                // RFC 3168 §6.1.1: an ECN-setup SYN (ECE+CWR) is answered with ECE.
                reply.tcp.ece = pkt.tcp.ece && pkt.tcp.cwr && self.ecn != EcnMode::Off;
                ctx.out.push(reply);
            }
            Kind::Data => self.on_data(pkt, ctx),
            Kind::SynAck | Kind::Ack => {}
        }
    }

    fn on_data(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let seq = pkt.tcp.seq;
        // Linux tcp_ecn_accept_cwr, then tcp_ecn_check_ce: CWR clears the latch, CE sets it
        // (entering quick-ACK mode for a couple of ACKs on a new CE episode).
        if pkt.tcp.cwr {
            self.ece_latched = false;
        }
        if pkt.ecn == Ecn::Ce {
            self.ce_received += 1;
            if self.ecn == EcnMode::Rfc3168 && !self.ece_latched {
                self.ece_latched = true;
                self.quick = self.quick.max(2);
            }
        }
        let ack_now = if seq == self.rcv_nxt {
            let had_holes = !self.ooo.is_empty();
            self.rcv_nxt += 1;
            self.delivered_bytes += pkt.tcp.payload as u64;
            // Pull in out-of-order data now contiguous.
            if let Some(i) = self.ooo.iter().position(|b| b.start == self.rcv_nxt) {
                let b = self.ooo.remove(i);
                self.delivered_bytes += b.payload_bytes;
                self.rcv_nxt = b.end;
            }
            self.unacked += 1;
            // A hole was (partly) filled, or holes remain: ACK at once (RFC 5681 §4.2).
            had_holes
        } else if seq > self.rcv_nxt {
            self.insert_ooo(seq, pkt.tcp.payload);
            true
        } else {
            // Duplicate: Linux sends an immediate (D-SACK) ACK.
            true
        };
        if ack_now || self.unacked >= 2 || self.quick > 0 {
            self.send_ack(ctx);
        } else {
            self.delack.arm(ctx.now + self.delayed_ack, ctx.event(FlowTimer::DelayedAck), ctx.events);
        }
    }

    fn insert_ooo(&mut self, seq: u32, payload: u32) {
        let p = payload as u64;
        // Extend an adjacent block (and merge if it now touches another), else add a new one.
        let pos = self.ooo.iter().position(|b| b.end == seq || b.start == seq + 1 || (b.start <= seq && seq < b.end));
        let mut blk = match pos {
            Some(i) => {
                let mut b = self.ooo.remove(i);
                if seq >= b.start && seq < b.end {
                    b // already held
                } else {
                    b.start = b.start.min(seq);
                    b.end = b.end.max(seq + 1);
                    b.payload_bytes += p;
                    b
                }
            }
            None => OooBlock { start: seq, end: seq + 1, payload_bytes: p },
        };
        if let Some(j) = self.ooo.iter().position(|b| b.start == blk.end || b.end == blk.start) {
            let o = self.ooo.remove(j);
            blk.start = blk.start.min(o.start);
            blk.end = blk.end.max(o.end);
            blk.payload_bytes += o.payload_bytes;
        }
        self.ooo.insert(0, blk);
    }

    fn send_ack(&mut self, ctx: &mut EndpointCtx) {
        let n = self.ooo.len().min(MAX_SACK_BLOCKS);
        let mut ack = Packet::new(self.flow, Direction::Reverse, Kind::Ack, self.header_bytes + if n > 0 { 4 + 8 * n as u32 } else { 0 });
        ack.tcp.seq = self.rcv_nxt;
        ack.tcp.ece = self.ece_latched;
        ack.tcp.ce_count = self.ce_received;
        ack.tcp.sack_len = n as u8;
        for (dst, src) in ack.tcp.sacks.iter_mut().zip(&self.ooo) {
            *dst = SackBlock { start: src.start, end: src.end };
        }
        ctx.out.push(ack);
        self.acks_sent += 1;
        self.unacked = 0;
        self.quick = self.quick.saturating_sub(1);
        self.delack.cancel();
    }

    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if t == FlowTimer::DelayedAck && self.delack.fire(ctx.now, ctx.event(t), ctx.events) && self.unacked > 0 {
            self.send_ack(ctx);
        }
    }
}
