//! The packet FIFO with byte accounting that disciplines build on: it keeps the backlog in
//! bytes and the enqueue/dequeue counters of [`QdiscStats`] consistent.

use super::QdiscStats;
use crate::packet::Packet;
use crate::units::Limit;
use std::collections::VecDeque;

#[derive(Debug)]
pub struct PacketQueue {
    packets: VecDeque<Packet>,
    backlog: u64,
}

impl PacketQueue {
    /// A queue with room for `capacity` packets before it reallocates (capped at 65536).
    pub fn with_capacity(capacity: usize) -> Self {
        PacketQueue { packets: VecDeque::with_capacity(capacity.min(1 << 16)), backlog: 0 }
    }
    /// A queue sized for `limit` (its packets, or its bytes in 1500-byte packets).
    pub fn for_limit(limit: Limit) -> Self {
        Self::with_capacity(match limit {
            Limit::Packets(n) => n as usize,
            Limit::Bytes(b) => (b / 1500) as usize,
        })
    }
    /// Whether `pkt` may join the queue under `limit`: as pfifo, while fewer than `n` packets
    /// are queued; as bfifo, while the backlog with it stays at most `b` bytes
    /// (`sch_fifo.c`).
    pub fn fits(&self, limit: Limit, pkt: &Packet) -> bool {
        match limit {
            Limit::Packets(n) => self.len() < n as usize,
            Limit::Bytes(b) => self.backlog + pkt.wire_len as u64 <= b,
        }
    }
    /// Appends an accepted packet, counting it as enqueued.
    pub fn push(&mut self, pkt: Packet, stats: &mut QdiscStats) {
        self.backlog += pkt.wire_len as u64;
        stats.enqueued += 1;
        self.packets.push_back(pkt);
    }
    /// Removes the head for transmission, counting it as dequeued.
    pub fn pop(&mut self, stats: &mut QdiscStats) -> Option<Packet> {
        let p = self.take();
        if let Some(sent) = &p {
            stats.sent(sent);
        }
        p
    }
    /// Removes the head without counting it as sent (the caller drops it or moves it).
    pub fn take(&mut self) -> Option<Packet> {
        // The `Option` the ring gave is returned as it is (an unwrap and a new `Some` copied
        // the packet once more).
        let p = self.packets.pop_front();
        if let Some(head) = &p {
            crate::qdisc::dec_backlog!(self.backlog, head.wire_len as u64, "queue backlog");
        }
        if self.packets.is_empty() {
            // Back to the ring's first slot (`clear` of an empty ring), so that a queue that
            // drains often (a reverse path's ACKs) reuses the same few cache lines instead of
            // walking its whole capacity (pfifo's 1000 packets: 64 KB).
            self.packets.clear();
        }
        p
    }
    /// Removes the most recently queued packet without counting it as sent.
    pub fn take_back(&mut self) -> Option<Packet> {
        let p = self.packets.pop_back()?;
        crate::qdisc::dec_backlog!(self.backlog, p.wire_len as u64, "queue backlog");
        Some(p)
    }
    pub fn iter(&self) -> impl Iterator<Item = &Packet> {
        self.packets.iter()
    }
    pub fn front(&self) -> Option<&Packet> {
        self.packets.front()
    }
    pub fn len(&self) -> usize {
        self.packets.len()
    }
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
    /// Bytes queued.
    pub fn backlog(&self) -> u64 {
        self.backlog
    }
}
