//! Queue disciplines. Each lives in its own file behind the [`Qdisc`] trait, takes the Linux
//! kernel's parameter names and defaults, and is built from a [`QdiscSpec`] parsed from a
//! tc-style string (`"pfifo limit 1000"`) or an equivalent TOML table.

mod fifo;
mod spec;

pub use fifo::Fifo;
pub use spec::QdiscSpec;

use crate::packet::Packet;
use crate::time::Time;

/// Counters every discipline keeps, named after `tc -s qdisc` output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets accepted by enqueue.
    pub enqueued: u64,
    /// Packets handed to the link by dequeue.
    pub dequeued: u64,
    pub dequeued_bytes: u64,
    /// Packets dropped, at enqueue (tail/overlimit) or dequeue (AQM head drop).
    pub drops: u64,
    /// Of `drops`, those refused at enqueue because the queue was full.
    pub overlimits: u64,
    /// Packets whose ECN field was set to CE.
    pub ce_marks: u64,
}

/// Outcome of an enqueue.
#[derive(Debug, PartialEq, Eq)]
pub enum Enqueued {
    Queued,
    /// The arriving packet was dropped.
    Dropped,
}

/// A queue discipline at a link's egress, as Linux `struct Qdisc_ops` (enqueue/dequeue).
///
/// Packets are moved in and out by value. Disciplines that drop or mark at dequeue do it
/// inside `dequeue` and count it in their stats. `now` is the current simulated time.
pub trait Qdisc {
    /// The kind as tc names it, e.g. `"pfifo"`.
    fn kind(&self) -> &'static str;
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Enqueued;
    fn dequeue(&mut self, now: Time) -> Option<Packet>;
    /// Backlog in packets (`qlen`).
    fn len(&self) -> usize;
    /// Backlog in bytes (`backlog`).
    fn backlog_bytes(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn stats(&self) -> &QdiscStats;
}

/// Builds the discipline a spec describes. `mtu` is the link's maximum packet size.
pub fn build(spec: &QdiscSpec, mtu: u32) -> Box<dyn Qdisc> {
    let _ = mtu;
    match spec {
        QdiscSpec::Pfifo { limit } => Box::new(Fifo::pfifo(*limit)),
        QdiscSpec::Bfifo { limit } => Box::new(Fifo::bfifo(*limit)),
    }
}
