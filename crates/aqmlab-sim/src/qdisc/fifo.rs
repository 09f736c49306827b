//! pfifo and bfifo: tail-drop FIFOs (Linux `net/sched/sch_fifo.c`).
//!
//! pfifo drops an arriving packet when `qlen >= limit` (packets); bfifo when
//! `backlog + len > limit` (bytes). No AQM, no ECN marking.

use super::queue::PacketQueue;
use super::{Args, BuildCtx, Enqueued, Param, QdiscConfig, QdiscKind, QdiscStats, Qdisc, Type, Value};
use crate::packet::Packet;
use crate::profile::Stack;
use crate::time::Time;
use crate::units::Limit;
use std::sync::Arc;

/// A tail-drop FIFO limited in packets (pfifo) or bytes (bfifo).
#[derive(Debug)]
pub struct Fifo {
    limit: Limit,
    queue: PacketQueue,
    stats: QdiscStats,
}

impl Fifo {
    /// `pfifo limit N` (Linux default limit: the device txqueuelen, 1000).
    pub fn pfifo(limit: u32) -> Self {
        Self::new(Limit::Packets(limit))
    }
    /// `bfifo limit BYTES` (Linux default: txqueuelen x MTU).
    pub fn bfifo(limit: u64) -> Self {
        Self::new(Limit::Bytes(limit))
    }
    fn new(limit: Limit) -> Self {
        Fifo { limit, queue: PacketQueue::for_limit(limit), stats: QdiscStats::default() }
    }
}

impl Qdisc for Fifo {
    fn kind(&self) -> &'static str {
        match self.limit {
            Limit::Packets(_) => PFIFO.name,
            Limit::Bytes(_) => BFIFO.name,
        }
    }
    fn enqueue(&mut self, pkt: Packet, _now: Time) -> Enqueued {
        if !self.queue.fits(self.limit, &pkt) {
            self.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        self.queue.push(pkt, &mut self.stats);
        Enqueued::Queued
    }
    fn dequeue(&mut self, _now: Time) -> Option<Packet> {
        self.queue.pop(&mut self.stats)
    }
    super::packet_queue_accessors!(queue, stats);
    /// Linux `fifo_init` as `.change`: the new limit applies to arrivals; nothing queued is
    /// dropped.
    fn change(&mut self, new: &Args) -> bool {
        match FifoConfig::from_args(new) {
            Ok(c) if c.limit_kind_matches(self.limit) => {
                self.limit = c.limit;
                true
            }
            _ => false,
        }
    }
}

/// Parsed `pfifo`/`bfifo` parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
struct FifoConfig {
    limit: Limit,
}

impl FifoConfig {
    /// pfifo's or bfifo's parameters (told apart by the table they were parsed with).
    fn from_args(a: &Args) -> Result<FifoConfig, String> {
        match a.get("limit") {
            Value::Uint(n) => Ok(FifoConfig { limit: Limit::Packets(n as u32) }),
            Value::Bytes(0) => Err(a.invalid("limit must be at least 1 byte")),
            Value::Bytes(b) => Ok(FifoConfig { limit: Limit::Bytes(b) }),
            v => unreachable!("fifo limit {v:?}"),
        }
    }
    fn limit_kind_matches(&self, other: Limit) -> bool {
        matches!((self.limit, other), (Limit::Packets(_), Limit::Packets(_)) | (Limit::Bytes(_), Limit::Bytes(_)))
    }
}

impl QdiscConfig for FifoConfig {
    fn build(&self, _ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(match self.limit {
            Limit::Packets(n) => Fifo::pfifo(n),
            Limit::Bytes(b) => Fifo::bfifo(b),
        })
    }
}

fn build(a: &Args) -> Result<Arc<dyn QdiscConfig>, String> {
    Ok(Arc::new(FifoConfig::from_args(a)?))
}

/// `pfifo [limit PACKETS]`.
pub const PFIFO: QdiscKind = QdiscKind {
    name: "pfifo",
    doc: "tail-drop FIFO limited in packets (sch_fifo.c)",
    params: &[Param::uint("limit", 1, u32::MAX as u64, 1000)
        .unit("packets")
        .stack_defaults(&[(Stack::Ns2_2013, Value::Uint(50))])
        .doc("queue limit (Linux default: the device txqueuelen; ns2-2013: DropTail's ns-default.tcl Queue limit_ 50)")],
    build,
};

/// `bfifo [limit BYTES]`.
pub const BFIFO: QdiscKind = QdiscKind {
    name: "bfifo",
    doc: "tail-drop FIFO limited in bytes (sch_fifo.c)",
    params: &[Param::new("limit", Type::Bytes, Value::Bytes(1000 * 1500))
        .unit("bytes")
        .doc("queue limit, at least 1 byte (Linux default: txqueuelen x MTU)")],
    build,
};

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
    fn tc_strings() {
        use crate::qdisc::QdiscSpec;
        let pf = |s: &str| format!("{:?}", QdiscSpec::parse(s).unwrap());
        assert_eq!(QdiscSpec::parse("pfifo limit 1000").unwrap(), QdiscSpec::parse("pfifo").unwrap());
        assert!(pf("bfifo limit 64kb").contains("Bytes(65536)"));
        assert!(pf("bfifo limit 150000").contains("Bytes(150000)"));
        assert!(QdiscSpec::parse("bfifo limit 0").is_err());
    }

    #[test]
    fn pfifo_tail_drops_at_limit_and_keeps_order() {
        let mut q = Fifo::pfifo(3);
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
        let mut q = Fifo::bfifo(3000);
        assert_eq!(q.enqueue(pkt(1500, 0), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.enqueue(pkt(1500, 1), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.enqueue(pkt(64, 2), Time::ZERO), Enqueued::Dropped);
        q.dequeue(Time::ZERO);
        assert_eq!(q.enqueue(pkt(64, 3), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.backlog_bytes(), 1564);
        assert_eq!(q.stats().overlimits, 1);
    }
}
