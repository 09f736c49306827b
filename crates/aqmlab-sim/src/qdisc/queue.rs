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

/// A packet in a slot of its own cache line ([`LineQueue`]).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct OnLine(Packet);

/// A FIFO of packets, each in a 64-byte slot aligned to a cache line: the queue of a CoDel
/// flow ([`super::codel::CodelFlow`]).
///
/// A `VecDeque<Packet>`'s buffer is aligned to 8 bytes only, so most of its 64-byte packets
/// straddle two cache lines: an enqueue wrote two lines, a dequeue read two. With 1000 flows
/// each flow's slots were last touched a round of the flows earlier and are out of the 1 MiB L2
/// by then (issue 15, session 11: fq_codel's enqueue wrote 1.46 lines missing L2 per packet at
/// f1000). One line per packet halves that traffic; the packets, their order and the
/// capacity are the same.
#[derive(Clone, Debug, Default)]
pub struct LineQueue(VecDeque<OnLine>);

const _: () = assert!(std::mem::size_of::<OnLine>() == 64, "a packet fills its line: the slots are no larger than before");

impl LineQueue {
    /// A queue with room for `capacity` packets before it reallocates.
    pub fn with_capacity(capacity: usize) -> Self {
        LineQueue(VecDeque::with_capacity(capacity))
    }
    #[inline]
    pub fn push_back(&mut self, pkt: Packet) {
        self.0.push_back(OnLine(pkt));
    }
    #[inline]
    pub fn pop_front(&mut self) -> Option<Packet> {
        self.0.pop_front().map(|OnLine(p)| p)
    }
    #[inline]
    pub fn pop_back(&mut self) -> Option<Packet> {
        self.0.pop_back().map(|OnLine(p)| p)
    }
    #[inline]
    pub fn front(&self) -> Option<&Packet> {
        self.0.front().map(|l| &l.0)
    }
    #[inline]
    pub fn front_mut(&mut self) -> Option<&mut Packet> {
        self.0.front_mut().map(|l| &mut l.0)
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Empties the queue, keeping its buffer.
    #[inline]
    pub fn clear(&mut self) {
        self.0.clear();
    }
    pub fn iter(&self) -> impl Iterator<Item = &Packet> {
        self.0.iter().map(|l| &l.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Kind};

    /// Packets leave in order from either end, each slot on a line of its own, across the
    /// ring's wrap and growth.
    #[test]
    fn a_line_queue_is_a_fifo_with_a_packet_per_cache_line() {
        let pkt = |i: u32| Packet::new(i, Direction::Forward, Kind::Data, 1000 + i);
        let mut q = LineQueue::with_capacity(2);
        let mut next = 0;
        for i in 0..50 {
            q.push_back(pkt(i));
            if i % 3 == 2 {
                assert_eq!(q.pop_front().map(|p| p.flow), Some(next));
                next += 1;
            }
            let head = q.front().expect("not empty") as *const Packet as usize;
            assert_eq!(head % 64, 0, "the head starts a cache line");
        }
        assert_eq!(q.len(), 50 - next as usize);
        assert_eq!(q.iter().map(|p| p.flow).collect::<Vec<_>>(), (next..50).collect::<Vec<_>>());
        assert_eq!(q.pop_back().map(|p| p.wire_len), Some(1049));
        q.front_mut().expect("not empty").wire_len = 7;
        assert_eq!(q.pop_front().map(|p| (p.flow, p.wire_len)), Some((next, 7)));
        q.clear();
        assert!(q.is_empty() && q.pop_front().is_none());
    }
}
