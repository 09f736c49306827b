//! pfifo and bfifo: tail-drop FIFOs (Linux `net/sched/sch_fifo.c`).
//!
//! pfifo drops an arriving packet when `qlen >= limit` (packets); bfifo when
//! `backlog + len > limit` (bytes). No AQM, no ECN marking.

use super::{Enqueued, Qdisc, QdiscStats};
use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// The FIFO both disciplines share; they differ only in their admission test.
#[derive(Debug)]
struct Fifo {
    queue: VecDeque<Packet>,
    backlog: u64,
    stats: QdiscStats,
}

impl Fifo {
    fn new(capacity: usize) -> Self {
        Fifo { queue: VecDeque::with_capacity(capacity), backlog: 0, stats: QdiscStats::default() }
    }
    fn admit(&mut self, pkt: Packet, fits: bool) -> Enqueued {
        if !fits {
            self.stats.drops += 1;
            self.stats.overlimits += 1;
            return Enqueued::Dropped;
        }
        self.backlog += pkt.wire_len as u64;
        self.stats.enqueued += 1;
        self.queue.push_back(pkt);
        Enqueued::Queued
    }
    fn dequeue(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        self.backlog -= p.wire_len as u64;
        self.stats.dequeued += 1;
        self.stats.dequeued_bytes += p.wire_len as u64;
        Some(p)
    }
}

/// Packet-limited FIFO (`pfifo limit N`; Linux default limit is the device txqueuelen, 1000).
#[derive(Debug)]
pub struct Pfifo {
    limit: u32,
    fifo: Fifo,
}

impl Pfifo {
    pub fn new(limit: u32) -> Self {
        Pfifo { limit, fifo: Fifo::new(limit.min(1 << 16) as usize) }
    }
}

impl Qdisc for Pfifo {
    fn kind(&self) -> &'static str {
        "pfifo"
    }
    fn enqueue(&mut self, pkt: Packet, _now: Time) -> Enqueued {
        let fits = (self.fifo.queue.len() as u64) < self.limit as u64;
        self.fifo.admit(pkt, fits)
    }
    fn dequeue(&mut self, _now: Time) -> Option<Packet> {
        self.fifo.dequeue()
    }
    fn len(&self) -> usize {
        self.fifo.queue.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.fifo.backlog
    }
    fn stats(&self) -> &QdiscStats {
        &self.fifo.stats
    }
}

/// Byte-limited FIFO (`bfifo limit BYTES`; Linux default is txqueuelen x MTU).
#[derive(Debug)]
pub struct Bfifo {
    limit: u64,
    fifo: Fifo,
}

impl Bfifo {
    pub fn new(limit: u64) -> Self {
        Bfifo { limit, fifo: Fifo::new(((limit / 1500) as usize).min(1 << 16)) }
    }
}

impl Qdisc for Bfifo {
    fn kind(&self) -> &'static str {
        "bfifo"
    }
    fn enqueue(&mut self, pkt: Packet, _now: Time) -> Enqueued {
        let fits = self.fifo.backlog + pkt.wire_len as u64 <= self.limit;
        self.fifo.admit(pkt, fits)
    }
    fn dequeue(&mut self, _now: Time) -> Option<Packet> {
        self.fifo.dequeue()
    }
    fn len(&self) -> usize {
        self.fifo.queue.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.fifo.backlog
    }
    fn stats(&self) -> &QdiscStats {
        &self.fifo.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Kind};

    fn pkt(len: u32, seq: u32) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
        p.tcp.seq = seq;
        p
    }

    #[test]
    fn pfifo_tail_drops_at_limit_and_keeps_order() {
        let mut q = Pfifo::new(3);
        for i in 0..5 {
            let r = q.enqueue(pkt(1500, i), Time::ZERO);
            assert_eq!(r, if i < 3 { Enqueued::Queued } else { Enqueued::Dropped });
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.backlog_bytes(), 4500);
        assert_eq!(q.stats().drops, 2);
        let seqs: Vec<u32> = std::iter::from_fn(|| q.dequeue(Time::ZERO)).map(|p| p.tcp.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2]);
        assert_eq!(q.backlog_bytes(), 0);
    }

    #[test]
    fn bfifo_admits_while_backlog_plus_len_fits() {
        let mut q = Bfifo::new(3000);
        assert_eq!(q.enqueue(pkt(1500, 0), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.enqueue(pkt(1500, 1), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.enqueue(pkt(64, 2), Time::ZERO), Enqueued::Dropped);
        q.dequeue(Time::ZERO);
        assert_eq!(q.enqueue(pkt(64, 3), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.backlog_bytes(), 1564);
        assert_eq!(q.stats().overlimits, 1);
    }
}
