//! Queue disciplines. Each lives in its own file behind the [`Qdisc`] trait, takes the Linux
//! kernel's parameter names and defaults, and is built from a [`QdiscSpec`] parsed from a
//! tc-style string (`"pfifo limit 1000"`) or an equivalent TOML table.
//!
//! Adding a discipline: a file with the discipline (implementing [`Qdisc`]), its configuration
//! (implementing [`QdiscConfig`]) and its declaration (a [`QdiscKind`]: the parameter table
//! and a builder from the parsed [`Args`]), plus one line in [`REGISTRY`].

mod cake;
pub mod cobalt;
pub mod codel;
mod cnq;
mod dualpi2;
mod fifo;
mod flow_table;
pub mod fq_codel;
mod hred;
mod lfq;
mod pie;
mod pie_ns2;
mod queue;
mod red;
mod sce;
pub mod shaper;
pub mod sfq_codel;
mod slab;
mod spec;

pub use dualpi2::DualPi2;
pub use fifo::Fifo;
pub use pie::{Pie, PieConfig};
pub use queue::PacketQueue;
pub use red::{RedStats, TcRed};
pub use spec::{table_json, Args, Kind, Param, Params, QdiscConfig, QdiscKind, QdiscSpec, Type, Value};

use std::collections::BTreeMap;
use crate::packet::Packet;
use crate::profile::Stack;
use crate::rng::Stream;
use crate::time::{Rate, Time};

/// Lists kinds under their own names: `registry![a::A, b::B]`.
macro_rules! registry {
    ($($kind:path),* $(,)?) => { &[$(($kind.name, &$kind)),*] };
}

/// The tc kinds, each declared once in its file.
pub const REGISTRY: &[(&str, &QdiscKind)] = registry![
    fifo::PFIFO,
    fifo::BFIFO,
    red::RED,
    hred::HRED,
    pie::PIE,
    dualpi2::DUALPI2,
    codel::CODEL,
    fq_codel::FQ_CODEL,
    sfq_codel::SFQ_CODEL,
    cake::CAKE,
    cnq::CNQ_CODEL_AF,
    cnq::TWIN_CODEL_AF,
    lfq::LFQ_COBALT,
];

/// Flow hash of a packet for flow-queueing disciplines: `hash_key` (the 5-tuple stand-in)
/// mixed with a per-instance `perturbation` drawn from the discipline's stream (Linux keys
/// `skb_get_hash` with a random seed), then reduced to `[0, buckets)` as Linux
/// `reciprocal_scale` does: `(hash * buckets) >> 32`.
pub fn flow_bucket(hash_key: u32, perturbation: u32, buckets: u32) -> u32 {
    // murmur3's 32-bit finaliser: a bijection, so distinct keys never share a hash, only a
    // bucket.
    let mut h = hash_key ^ perturbation;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    ((h as u64 * buckets as u64) >> 32) as u32
}

/// What a discipline may know about where it is installed.
pub struct BuildCtx {
    /// Rate of the link the discipline feeds (the HTB parent rate in the studies' harness).
    pub link_rate: Rate,
    /// Largest packet on the link, in bytes (Linux `psched_mtu`: MTU + link-layer header).
    pub mtu: u32,
    /// The discipline's own random stream (flow-hash perturbation, RED/PIE/DualPI2 draws).
    pub rng: Stream,
    /// The era profile: disciplines whose code differed in that kernel take its defaults
    /// for parameters the scenario does not set.
    pub stack: Stack,
}

/// Decrements a backlog counter (bytes or packets) by `$by`, panicking with
/// "invariant violated: queue backlog: <what> would go below zero" instead of wrapping (an
/// optimised build has no overflow checks). One branch on the usual path.
macro_rules! dec_backlog {
    ($c:expr, $by:expr, $what:expr) => {
        $c = match $c.checked_sub($by) {
            Some(v) => v,
            None => $crate::qdisc::backlog_underflow($what),
        }
    };
}
pub(crate) use dec_backlog;

#[cold]
#[inline(never)]
pub(crate) fn backlog_underflow(what: &str) -> ! {
    panic!("invariant violated: queue backlog: {what} would go below zero")
}

/// A count per flow (indexed by `Packet::flow`, an endpoint id), for the per-flow packet
/// conservation check: the drops of a discipline or path element. Holds the range of flows it
/// has counted, from the lowest to the highest id (amortised: no allocation per packet once
/// the flows have been seen), so an element that only one flow crosses (a flow's own netem)
/// holds one count, not one per endpoint id below it; one indexed increment per packet.
/// In a run with workloads, the flows from the first transfer id on (ids that only grow) are
/// counted apart, in an ordered map, so that the range does not stretch from the run's
/// long-lived flows to its latest transfer ([`FlowCounts::drain`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowCounts {
    /// The flow id of `counts[0]`.
    base: u32,
    counts: Vec<u64>,
    /// The counts of the flows from `apart_from` on (none unless set).
    apart: BTreeMap<u32, u64>,
    apart_from: u32,
}

impl Default for FlowCounts {
    fn default() -> FlowCounts {
        FlowCounts::counting_apart_from(u32::MAX)
    }
}

impl FlowCounts {
    /// Counts that keep the flows from `first` on apart (a run's workload transfers).
    pub fn counting_apart_from(first: u32) -> FlowCounts {
        FlowCounts { base: 0, counts: Vec::new(), apart: BTreeMap::new(), apart_from: first }
    }
    /// The first flow counted apart ([`FlowCounts::counting_apart_from`]).
    pub fn apart_from(&self) -> u32 {
        self.apart_from
    }
    /// Counts one packet of `flow`.
    #[inline]
    pub fn add(&mut self, flow: u32) {
        self.add_n(flow, 1)
    }
    /// Widens the range to hold `flow` (or counts it apart: [`FlowCounts::counting_apart_from`]),
    /// then adds `n` to its count.
    #[cold]
    #[inline(never)]
    fn add_outside(&mut self, flow: u32, n: u64) {
        if flow >= self.apart_from {
            *self.apart.entry(flow).or_insert(0) += n;
            return;
        }
        if self.counts.is_empty() {
            self.base = flow;
        } else if flow < self.base {
            let grow = (self.base - flow) as usize;
            self.counts.splice(0..0, std::iter::repeat(0).take(grow));
            self.base = flow;
        }
        let i = (flow - self.base) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
    }
    /// Adds `n` packets of `flow` (nothing when `n` is 0).
    #[inline]
    pub fn add_n(&mut self, flow: u32, n: u64) {
        if n == 0 {
            return;
        }
        match flow.checked_sub(self.base).and_then(|i| self.counts.get_mut(i as usize)) {
            Some(c) => *c += n,
            None => self.add_outside(flow, n),
        }
    }
    /// Adds every count of `other`.
    pub fn add_all(&mut self, other: &FlowCounts) {
        other.for_each(|flow, n| self.add_n(flow, n));
    }
    /// Calls `f(flow, count)` for every flow with a count, in the order of their ids within
    /// the range, then for those counted apart.
    pub fn for_each(&self, mut f: impl FnMut(u32, u64)) {
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                f(self.base + i as u32, n);
            }
        }
        for (&flow, &n) in &self.apart {
            f(flow, n);
        }
    }
    /// [`FlowCounts::for_each`], then forgets every count (and frees their memory); from
    /// then on the flows from `apart_from` on are counted apart.
    pub fn drain(&mut self, apart_from: u32, f: impl FnMut(u32, u64)) {
        self.for_each(f);
        *self = FlowCounts::counting_apart_from(apart_from);
    }
    pub fn get(&self, flow: u32) -> u64 {
        match flow.checked_sub(self.base).and_then(|i| self.counts.get(i as usize)) {
            Some(&n) => n,
            None => self.apart.get(&flow).copied().unwrap_or(0),
        }
    }
    /// The sum over all flows.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.apart.values().sum::<u64>()
    }
    /// One past the largest flow counted.
    pub fn flows(&self) -> usize {
        let range = if self.counts.is_empty() { 0 } else { self.base as usize + self.counts.len() };
        range.max(self.apart.keys().next_back().map_or(0, |&f| f as usize + 1))
    }
    /// The counts held (the range's, zeros included, and those apart): its memory, in counts.
    pub fn held(&self) -> usize {
        self.counts.len() + self.apart.len()
    }
}

/// Counters every discipline keeps, named after `tc -s qdisc` output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// `drops` by flow (the per-flow conservation check); [`QdiscStats::drop`] counts both.
    pub flow_drops: FlowCounts,
}

impl QdiscStats {
    /// Counts a packet handed to the link.
    pub fn sent(&mut self, pkt: &Packet) {
        self.dequeued += 1;
        self.dequeued_bytes += pkt.wire_len as u64;
    }
    /// Counts a packet dropped (at enqueue or dequeue), for its flow too. Every drop goes
    /// through here (or [`QdiscStats::overlimit_drop`]): a `drops` increment that does not
    /// breaks the per-flow conservation check at the end of the run.
    #[inline]
    pub fn drop(&mut self, pkt: &Packet) {
        self.drops += 1;
        self.flow_drops.add(pkt.flow);
        // The packet ends here: its out-of-line fields' slot goes back (crate::packet_ext).
        pkt.release();
    }
    /// Counts an arriving (or queued, for disciplines that make room) packet dropped because
    /// the queue was full.
    #[inline]
    pub fn overlimit_drop(&mut self, pkt: &Packet) {
        self.drop(pkt);
        self.overlimits += 1;
    }
}

/// `Qdisc::len`, `backlog_bytes`, `stats` and `for_each_packet` of a discipline that keeps its
/// packets in one [`PacketQueue`] at `self.$queue` and its counters at `self.$stats`
/// (pfifo/bfifo, RED, HRED, PIE, ns-2 PIE).
macro_rules! packet_queue_accessors {
    ($queue:ident, $stats:ident) => {
        fn len(&self) -> usize {
            self.$queue.len()
        }
        fn backlog_bytes(&self) -> u64 {
            self.$queue.backlog()
        }
        fn stats(&self) -> &$crate::qdisc::QdiscStats {
            &self.$stats
        }
        fn stats_mut(&mut self) -> &mut $crate::qdisc::QdiscStats {
            &mut self.$stats
        }
        fn for_each_packet(&self, f: &mut dyn FnMut(&$crate::packet::Packet)) {
            self.$queue.iter().for_each(f)
        }
    };
}
pub(crate) use packet_queue_accessors;

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
    /// [`Qdisc::stats`], to move its per-flow drops out (`Element::drain_flow_drops`).
    fn stats_mut(&mut self) -> &mut QdiscStats;
    /// Calls `f` for every packet queued (any order), for the per-flow conservation check
    /// at the end of a run and the packets a `tc qdisc replace` discards. Not on the packet
    /// path.
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet));
    /// For disciplines that shape (CAKE, the SCE qdiscs): when `dequeue` returned nothing
    /// although packets are queued, the earliest time a packet may leave.
    fn ready_at(&self) -> Option<Time> {
        None
    }
    /// Whether the link should also dequeue when the discipline is empty. Linux under an HTB
    /// parent never does (the default); ns-2's link does, which is how ns-2 RED (HRED) sees
    /// idle periods.
    fn dequeues_when_empty(&self) -> bool {
        false
    }
    /// Names of the sub-queues that `Packet::queue` indexes (e.g. `["C", "L"]` for DualPI2),
    /// so that per-queue sojourn times can be reported.
    fn queue_names(&self) -> &'static [&'static str] {
        &["q"]
    }
    /// Extended statistics (`tc -s` xstats, e.g. PIE's drop probability), sampled on the
    /// series grid. The names must be the same at every call.
    fn xstats(&self, _out: &mut Vec<(&'static str, f64)>) {}
    /// `tc qdisc replace` by a discipline of the same kind (Linux `tc_modify_qdisc` ->
    /// `qdisc_change`): take the new parsed parameters `new`, keeping the queue and the
    /// state. Returns false when this discipline has no in-place change (the link then keeps
    /// it unchanged).
    fn change(&mut self, _new: &Args) -> bool {
        false
    }
}


#[cfg(test)]
mod flow_counts_tests {
    use super::FlowCounts;

    /// Counts in any order of flow ids read back exactly; an element only one high-numbered
    /// flow crosses holds one count (not one per lower id), and merging keeps every count.
    #[test]
    fn counts_hold_only_the_range_of_flows_seen() {
        let mut a = FlowCounts::default();
        for _ in 0..3 {
            a.add(70_000);
        }
        assert_eq!((a.counts.len(), a.get(70_000), a.get(0), a.total(), a.flows()), (1, 3, 0, 3, 70_001));
        a.add(69_998);
        a.add(70_002);
        assert_eq!((a.counts.len(), a.get(69_998), a.get(69_999), a.get(70_002), a.total()), (5, 1, 0, 1, 5));
        let mut sum = FlowCounts::default();
        sum.add(5);
        sum.add_all(&a);
        sum.add_all(&a);
        assert_eq!((sum.get(5), sum.get(70_000), sum.get(70_002), sum.total(), sum.flows()), (1, 6, 2, 11, 70_003));
        assert_eq!(FlowCounts::default().flows(), 0);
    }

    /// The flows from the first one counted apart (a run's workload transfers, beside its
    /// flow 3) do not widen the range over every id between; draining hands over every count
    /// once, leaves nothing held and keeps counting apart from the id it is given.
    #[test]
    fn transfers_are_counted_apart_and_drained() {
        let far = 90_000;
        let mut a = FlowCounts::counting_apart_from(10);
        a.add(3);
        a.add(far);
        a.add_n(far, 2);
        a.add(5);
        a.add(12);
        assert_eq!((a.held(), a.get(3), a.get(5), a.get(far), a.total(), a.flows()), (5, 1, 1, 3, 6, far as usize + 1));
        let mut seen = Vec::new();
        a.drain(10, |f, n| seen.push((f, n)));
        assert_eq!(seen, [(3, 1), (5, 1), (12, 1), (far, 3)]);
        assert_eq!((a.held(), a.total(), a.flows(), a.apart_from()), (0, 0, 0, 10));
        a.add(far + 1);
        a.add(4);
        assert_eq!((a.held(), a.get(far + 1), a.get(4)), (2, 1, 1));
        // Unset (the default), every flow is in the range, as in a run without workloads.
        let mut b = FlowCounts::default();
        b.add(3);
        b.add(far);
        assert_eq!(b.held(), far as usize - 2);
    }
}
