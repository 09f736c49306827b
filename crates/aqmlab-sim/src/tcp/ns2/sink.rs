//! ns-2.35 `Agent/TCPSink/Sack1/DelAck` (`tcp-sink.cc`): `Acker` bookkeeping, the delayed
//! ACK of `DelAckSink::recv`/`timeout`, and the SACK blocks of `Sacker::append_ack` with its
//! `SackStack` of earlier blocks. Packet numbers are ns-2's (0 = the SYN).

use super::{DELACK_INTERVAL, SINK_SACK_BLOCKS, TCPIP_BASE_HDR_SIZE};
use crate::event::{FlowTimer, Timer};
use crate::packet::{Direction, Ecn, Kind, Packet, SackBlock};
use crate::tcp::EndpointCtx;
use crate::time::Time;

#[derive(Clone, Debug)]
pub struct DelAckSink {
    flow: u32,
    /// `next_` (next expected), `maxseen_` and the `seen_` ring (`wndmask_` + 1 entries).
    pub next: i64,
    pub maxseen: i64,
    seen: Vec<bool>,
    is_dup: bool,
    /// `delay_timer_` and the packet number of `save_` (the ACK it will send).
    timer: Timer,
    save: Option<i64>,
    pub interval: Time,
    /// `SackStack` of earlier blocks (most recent first), `maxSackBlocks_` deep.
    stack: [(i64, i64); SINK_SACK_BLOCKS],
    stack_cnt: usize,
    mss: u32,
    size: Option<u64>,
    pub delivered_bytes: u64,
    pub acks_sent: u64,
    pub duplicates: u64,
    pub ce_received: u32,
}

impl DelAckSink {
    pub fn new(flow: u32, mss: u32, size: Option<u64>) -> Self {
        DelAckSink {
            flow,
            next: 0,
            maxseen: 0,
            seen: vec![false; 64],
            is_dup: false,
            timer: Timer::default(),
            save: None,
            interval: DELACK_INTERVAL,
            stack: [(-1, -1); SINK_SACK_BLOCKS],
            stack_cnt: 0,
            mss,
            size,
            delivered_bytes: 0,
            acks_sent: 0,
            duplicates: 0,
            ce_received: 0,
        }
    }

    fn mask(&self) -> i64 {
        self.seen.len() as i64 - 1
    }

    fn seen(&self, i: i64) -> bool {
        self.seen[(i & self.mask()) as usize]
    }

    fn set_seen(&mut self, i: i64, v: bool) {
        let m = self.mask();
        self.seen[(i & m) as usize] = v;
    }

    /// `Acker::resize_buffers`: double the ring (rare; amortised, as ns-2).
    fn resize(&mut self) {
        let old = std::mem::take(&mut self.seen);
        let old_mask = old.len() as i64 - 1;
        self.seen = vec![false; old.len() * 2];
        for i in self.next..=self.maxseen + 1 {
            let v = old[(i & old_mask) as usize];
            self.set_seen(i, v);
        }
    }

    /// `Seqno()`: the highest in-order packet.
    pub fn seqno(&self) -> i64 {
        self.next - 1
    }

    /// `Acker::update`: record packet `seq`; returns the payload bytes newly in order.
    fn update(&mut self, seq: i64) -> u64 {
        let mut just_marked = false;
        self.is_dup = false;
        while seq + 1 - self.next >= self.mask() {
            self.resize();
        }
        if seq > self.maxseen {
            for i in self.maxseen + 1..seq {
                self.set_seen(i, false);
            }
            self.maxseen = seq;
            self.set_seen(seq, true);
            self.set_seen(seq + 1, false);
            just_marked = true;
        }
        let mut delivered = 0;
        if seq < self.next {
            self.is_dup = true;
        }
        if seq >= self.next && seq <= self.maxseen {
            if self.seen(seq) && !just_marked {
                self.is_dup = true;
            }
            self.set_seen(seq, true);
            while self.seen(self.next) {
                if self.next > 0 {
                    delivered += self.payload_of(self.next) as u64;
                }
                self.next += 1;
            }
        }
        delivered
    }

    fn payload_of(&self, seq: i64) -> u32 {
        match self.size {
            Some(b) if seq as u64 * self.mss as u64 > b => (b - (seq as u64 - 1) * self.mss as u64) as u32,
            _ => self.mss,
        }
    }

    /// `DelAckSink::recv`.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let seq = match pkt.kind {
            Kind::Syn => 0,
            Kind::Data => pkt.tcp.seq as i64 + 1,
            _ => return,
        };
        if pkt.ecn == Ecn::Ce {
            self.ce_received += 1;
        }
        self.delivered_bytes += self.update(seq);
        if self.is_dup {
            self.duplicates += 1;
        }
        if !self.timer.is_armed() && seq == self.seqno() {
            // RFC2581_immediate_ack_: not while filling a gap; SYN_immediate_ack_.
            if seq < self.maxseen || seq == 0 {
            } else {
                self.save = Some(seq);
                self.timer.arm(ctx.now + self.interval, ctx.event(FlowTimer::DelayedAck), ctx.events);
                return;
            }
        }
        self.timer.cancel();
        self.ack(seq, ctx);
        self.save = None;
    }

    /// `DelAckSink::timeout`: ACK the saved packet.
    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if t != FlowTimer::DelayedAck || !self.timer.fire(ctx.now, ctx.event(t), ctx.events) {
            return;
        }
        if let Some(s) = self.save.take() {
            self.ack(s, ctx);
        }
    }

    /// `TcpSink::ack` with `Sacker::append_ack(old_seqno)`.
    fn ack(&mut self, old_seqno: i64, ctx: &mut EndpointCtx) {
        let seqno = self.seqno();
        let mut blocks = [(0i64, 0i64); SINK_SACK_BLOCKS];
        let mut n = 0;
        if seqno >= self.maxseen && self.stack_cnt != 0 {
            self.stack_reset();
        } else if seqno < self.maxseen || self.is_dup {
            // First block: the one holding the packet just received.
            let mut right = -1;
            for i in old_seqno..=self.maxseen {
                if !self.seen(i) {
                    right = i;
                    break;
                }
            }
            if right == -1 {
                right = self.maxseen + 1;
            }
            let mut left = -1;
            if old_seqno <= seqno {
                left = 0;
            } else {
                let mut i = right - 1;
                while i > seqno {
                    if !self.seen(i) {
                        left = i + 1;
                        break;
                    }
                    i -= 1;
                }
                blocks[n] = (left, right);
                n += 1;
            }
            let (recent_left, recent_right) = (left, right);
            // Earlier blocks from the stack, dropping those the newest covers.
            let mut k = 0;
            while n < SINK_SACK_BLOCKS && k < self.stack_cnt {
                let (l, r) = self.stack[k];
                if l < 0 || r < 0 || r > self.maxseen + 1 {
                    break;
                }
                if recent_left <= l && recent_right >= r {
                    self.stack_pop(k);
                    continue;
                }
                blocks[n] = (l, r);
                n += 1;
                k += 1;
            }
            if old_seqno > seqno {
                self.stack_push(recent_left, recent_right);
            }
        }
        let mut a = Packet::new(self.flow, Direction::Reverse, Kind::Ack, TCPIP_BASE_HDR_SIZE + 8 * n as u32);
        a.tcp.seq = seqno.max(0) as u32;
        let mut sacks = [SackBlock::default(); crate::packet::MAX_SACK_BLOCKS];
        for (i, &(l, r)) in blocks[..n].iter().enumerate() {
            sacks[i] = SackBlock { start: (l - 1).max(0) as u32, end: (r - 1).max(0) as u32 };
        }
        a.set_sacks(&sacks[..n]);
        a.tcp.ce_count = self.ce_received;
        ctx.out.push(a);
        self.acks_sent += 1;
    }

    fn stack_reset(&mut self) {
        self.stack = [(-1, -1); SINK_SACK_BLOCKS];
        self.stack_cnt = 0;
    }

    /// `SackStack::push(0)`: the oldest entry falls off when full.
    fn stack_push(&mut self, l: i64, r: i64) {
        if self.stack_cnt >= SINK_SACK_BLOCKS {
            self.stack_cnt = SINK_SACK_BLOCKS - 1;
        }
        let mut i = self.stack_cnt;
        while i > 0 {
            self.stack[i] = self.stack[i - 1];
            i -= 1;
        }
        self.stack[0] = (l, r);
        self.stack_cnt += 1;
    }

    /// `SackStack::pop(k)`.
    fn stack_pop(&mut self, k: usize) {
        for i in k..self.stack_cnt - 1 {
            self.stack[i] = self.stack[i + 1];
        }
        self.stack[self.stack_cnt - 1] = (-1, -1);
        self.stack_cnt -= 1;
    }
}
