//! FQ-CoDel (RFC 8290) as Linux implements it (`net/sched/sch_fq_codel.c`, Linux 6.18):
//! packets hashed into `flows` queues, each managed by CoDel ([`super::codel`]), served by
//! deficit round robin over two lists, new flows ahead of old ones.
//!
//! See docs/algorithms/fq_codel.md for what differs from Linux.

use super::codel::{CodelCounters, CodelFlow, CodelParams, MtuGuard};
use super::flow_table::{codel_totals, FlowEntry, FlowTable};
use super::{codel, Args, BuildCtx, Enqueued, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Type, Value};
use crate::profile::Stack;
use crate::packet::Packet;
use crate::time::Time;
use std::sync::Arc;

/// `FQ_CODEL_QUANTUM_MAX`.
const QUANTUM_MAX: u64 = 1 << 20;

/// One bucket: 104 bytes, aligned, so two cache lines instead of three when they straddle;
/// what an enqueue touches (the credit, the list state, the queue's header and backlog:
/// `CodelFlow` is `repr(C)`) in the first, CoDel's state, which only dequeue reads, in the
/// second (issue #15, session 7).
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct Flow {
    /// DRR credit in bytes (`deficit`).
    deficit: i64,
    /// On `new_flows` or `old_flows` (Linux: `!list_empty(&flow->flowchain)`).
    listed: bool,
    q: CodelFlow,
}

impl FlowEntry for Flow {
    fn queue(&mut self) -> &mut CodelFlow {
        &mut self.q
    }
}

/// `new_flows` or `old_flows` (Linux: a `list_head` chained through the flows'
/// `flowchain`): flow indices in a ring whose size is a power of two, at least the number of
/// flows. A flow is on one list at most, so a list never fills; pushing and popping are a
/// masked index, without `VecDeque`'s wrap-around test and growth check (the DRR moves a
/// flow from the head to the tail of a list about once per packet).
#[derive(Debug)]
struct FlowList {
    slots: Box<[u32]>,
    /// Positions of the head and one past the tail, counted without wrapping at the size
    /// (`u32` wrapping arithmetic; the slot is the position modulo the size).
    head: u32,
    tail: u32,
}

impl FlowList {
    fn new(flows: u32) -> Self {
        FlowList { slots: vec![0; flows.next_power_of_two() as usize].into_boxed_slice(), head: 0, tail: 0 }
    }
    #[inline]
    fn slot(&self, pos: u32) -> &u32 {
        &self.slots[pos as usize & (self.slots.len() - 1)]
    }
    #[inline]
    fn len(&self) -> usize {
        self.tail.wrapping_sub(self.head) as usize
    }
    #[inline]
    fn is_empty(&self) -> bool {
        self.head == self.tail
    }
    /// The `i`-th flow from the head.
    #[inline]
    fn get(&self, i: usize) -> Option<&u32> {
        (i < self.len()).then(|| self.slot(self.head.wrapping_add(i as u32)))
    }
    #[inline]
    fn front(&self) -> Option<&u32> {
        self.get(0)
    }
    #[inline]
    fn pop_front(&mut self) -> Option<u32> {
        let i = *self.front()?;
        self.head = self.head.wrapping_add(1);
        Some(i)
    }
    #[inline]
    fn push_back(&mut self, idx: u32) {
        debug_assert!(self.len() < self.slots.len(), "a flow is on one list at most");
        let mask = self.slots.len() - 1;
        self.slots[self.tail as usize & mask] = idx;
        self.tail = self.tail.wrapping_add(1);
    }
    fn iter(&self) -> impl Iterator<Item = &u32> {
        (0..self.len()).map(|i| self.slot(self.head.wrapping_add(i as u32)))
    }
}

/// Which list a flow was taken from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    New,
    Old,
}

/// The fq_codel discipline.
#[derive(Debug)]
pub struct FqCodel {
    limit: u32,
    quantum: u32,
    memory_limit: u64,
    drop_batch: u32,
    t: FlowTable<Flow>,
    new_flows: FlowList,
    old_flows: FlowList,
    new_flow_count: u64,
    drop_overlimit: u64,
    drop_overmemory: u64,
}

/// fq_codel's configuration (`fq_codel_init` defaults, `fq_codel_change` limits).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqCodelConfig {
    pub limit: u32,
    pub flows: u32,
    /// `None`: the link's `psched_mtu`, clamped to [256, QUANTUM_MAX].
    pub quantum: Option<u32>,
    pub memory_limit: u64,
    pub drop_batch: u32,
    /// `mtu` is set from the link at build time.
    pub codel: CodelParams,
}

impl Default for FqCodelConfig {
    /// `fq_codel_init`'s defaults (Linux's table defaults).
    fn default() -> Self {
        FqCodelConfig::from_args(&FQ_CODEL.defaults(Stack::Linux))
    }
}

impl FqCodelConfig {
    fn from_args(a: &Args) -> Self {
        FqCodelConfig {
            limit: a.u32("limit"),
            flows: a.u32("flows"),
            quantum: a.uint_opt("quantum").map(|q| q as u32),
            memory_limit: a.bytes("memory_limit"),
            drop_batch: drop_batch_of(a),
            codel: CodelParams::from_args(a),
        }
    }
}

/// The batch `fq_codel_drop` takes: `drop_batch` as given, at least 1 (`fq_codel_change`:
/// `max(1U, value)`), 64 when not given (`fq_codel_init`).
///
/// The 5.4-based kernels of 2020 (profiles `l4steam-2020`, `l4steam-2020-04`, `sce-2020`) had
/// `min(1U, value)` there since the batch drop came in (4.7, 9d18562a2278) until 14695212d4cd
/// ("fq_codel: fix TCA_FQ_CODEL_DROP_BATCH_SIZE sanitizing", 25 Apr 2020; stored patch id
/// 29406290727, in 5.4 stable only from 13 May 2020, id 46533645992): a `drop_batch` given to
/// `tc` there dropped one packet per overflow whatever its value; not giving it kept 64.
fn drop_batch_of(a: &Args) -> u32 {
    let n = a.u32("drop_batch");
    match a.stack() {
        Stack::L4steam2020 | Stack::L4steam2020Apr | Stack::Sce2020 if a.given("drop_batch") => n.min(1),
        _ => n,
    }
}

impl FqCodel {
    /// An instance for a link whose `psched_mtu` is `mtu`, hashing with `perturbation`.
    pub fn new(c: &FqCodelConfig, mtu: u32, perturbation: u32) -> Self {
        let mtu = mtu.clamp(256, QUANTUM_MAX as u32);
        FqCodel {
            limit: c.limit,
            quantum: c.quantum.unwrap_or(mtu),
            memory_limit: c.memory_limit,
            drop_batch: c.drop_batch,
            t: FlowTable::new(c.flows, c.codel.with_mtu(mtu), perturbation),
            new_flows: FlowList::new(c.flows),
            old_flows: FlowList::new(c.flows),
            new_flow_count: 0,
            drop_overlimit: 0,
            drop_overmemory: 0,
        }
    }

    /// The flow queue a packet hashes to (`fq_codel_hash`).
    pub fn classify(&self, pkt: &Packet) -> u32 {
        self.t.classify(pkt)
    }

    pub fn counters(&self) -> &CodelCounters {
        self.t.counters()
    }
    /// Flows that became active (`new_flow_count`).
    pub fn new_flow_count(&self) -> u64 {
        self.new_flow_count
    }
    /// Packets dropped by the overflow handler (`drop_overlimit`), and of those, because of
    /// the memory limit (`drop_overmemory`).
    pub fn overflow_drops(&self) -> (u64, u64) {
        (self.drop_overlimit, self.drop_overmemory)
    }
    /// CoDel count of a flow queue.
    pub fn flow_count(&self, idx: u32) -> u32 {
        self.t.flows[idx as usize].q.vars.count()
    }

    fn unlink_head(&mut self, list: List) {
        match list {
            List::New => self.new_flows.pop_front(),
            List::Old => self.old_flows.pop_front(),
        };
    }

    /// The flow `fq_codel_drop` picks: the largest byte backlog, the lowest index on ties.
    ///
    /// Linux (`net/sched/sch_fq_codel.c` `fq_codel_drop`, the same in 4.7 to 6.18; read in
    /// 5.4, unifreq/linux-5.4.y 80a0c84e, stored id 2674111489, and 6.18, stored id
    /// 68643827253) scans all `flows_cnt` buckets with `if (q->backlogs[i] > maxbacklog)`, so the
    /// first (lowest-index) bucket of the largest backlog wins. A bucket with a backlog is
    /// always on `new_flows` or `old_flows` (enqueue links it; dequeue unlinks a flow only when
    /// it found it empty), so scanning those lists, with the lowest index breaking ties, picks
    /// the same bucket in O(listed flows) instead of O(buckets): with `flows 65536
    /// memory_limit 1` every packet overflows, and the full scan cost 65536 visits per packet.
    fn fattest(&self) -> usize {
        let (mut idx, mut max) = (usize::MAX, 0);
        for &i in self.new_flows.iter().chain(self.old_flows.iter()) {
            let (i, b) = (i as usize, self.t.flows[i as usize].q.backlog);
            if b > max || (b == max && b > 0 && i < idx) {
                (idx, max) = (i, b);
            }
        }
        idx
    }

    /// Linux's own scan over every bucket (what [`FqCodel::fattest`] must agree with).
    #[cfg(test)]
    fn fattest_by_full_scan(&self) -> usize {
        let (mut idx, mut max) = (0, 0);
        for (i, f) in self.t.flows.iter().enumerate() {
            if f.q.backlog > max {
                (idx, max) = (i, f.q.backlog);
            }
        }
        idx
    }

    /// `fq_codel_drop`: head-drop from the flow with the largest byte backlog (first one on
    /// ties) until half its backlog or `max_packets` are gone (at least one packet), and add
    /// the number dropped to its CoDel count. Returns the flow's index.
    fn drop_from_fattest(&mut self, max_packets: u32) -> u32 {
        let idx = self.fattest();
        let max = self.t.flows[idx].q.backlog;
        let threshold = max >> 1;
        let flow = &mut self.t.flows[idx];
        let (mut n, mut len) = (0u32, 0u64);
        loop {
            let p = flow.q.pop(&mut self.t.cd.totals).expect("fattest flow has packets");
            self.t.cd.stats.overlimit_drop(&p);
            len += p.wire_len as u64;
            n += 1;
            if n >= max_packets || len >= threshold {
                break;
            }
        }
        flow.q.vars.add_count(n);
        idx as u32
    }
}

impl Qdisc for FqCodel {
    fn kind(&self) -> &'static str {
        FQ_CODEL.name
    }

    /// `fq_codel_enqueue` (RFC 8290 §4.1).
    fn enqueue(&mut self, pkt: Packet, _now: Time) -> Enqueued {
        let (idx, flow) = self.t.enqueue(pkt);
        if !flow.listed {
            flow.listed = true;
            flow.deficit = self.quantum as i64;
            self.new_flows.push_back(idx);
            self.new_flow_count += 1;
        }
        // Memory is accounted as wire bytes (Linux: skb->truesize), so it equals the backlog.
        let memory_limited = self.t.cd.totals.backlog > self.memory_limit;
        if self.t.cd.totals.qlen <= self.limit as usize && !memory_limited {
            return Enqueued::Queued;
        }
        let before = self.t.cd.totals.qlen;
        let fat = self.drop_from_fattest(self.drop_batch);
        let dropped = (before - self.t.cd.totals.qlen) as u64;
        self.drop_overlimit += dropped;
        if memory_limited {
            self.drop_overmemory += dropped;
        }
        // The arriving packet is at its flow's tail: it was dropped only if the batch emptied
        // that flow.
        if fat == idx && self.t.flows[idx as usize].q.queue.is_empty() {
            Enqueued::Dropped
        } else {
            Enqueued::Queued
        }
    }

    /// `fq_codel_dequeue` (RFC 8290 §4.2): new flows first, DRR with `quantum` credit, CoDel
    /// on the chosen flow; a flow that empties while new is moved to the old list (if that is
    /// non-empty) so that it cannot starve the old flows by re-entering as new.
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        loop {
            let (list, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (List::New, i),
                (None, Some(&i)) => (List::Old, i),
                (None, None) => return None,
            };
            let flow = &mut self.t.flows[idx as usize];
            if flow.deficit <= 0 {
                flow.deficit += self.quantum as i64;
                self.unlink_head(list);
                self.old_flows.push_back(idx);
                continue;
            }
            // Returned as CoDel returned it (not unwrapped and wrapped again: a packet copy).
            let pkt = self.t.dequeue(idx, MtuGuard::Qdisc, now);
            let Some(sent) = &pkt else {
                self.unlink_head(list);
                if list == List::New && !self.old_flows.is_empty() {
                    self.old_flows.push_back(idx);
                } else {
                    self.t.flows[idx as usize].listed = false;
                }
                continue;
            };
            self.t.flows[idx as usize].deficit -= sent.wire_len as i64;
            self.prefetch_next(list);
            return pkt;
        }
    }

    codel_totals!(t.cd);
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        self.t.flows.iter().flat_map(|fl| fl.q.queue.iter()).for_each(f)
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("new_flows_len", self.new_flows.len() as f64));
        out.push(("old_flows_len", self.old_flows.len() as f64));
    }
}

impl FqCodel {
    /// Starts loading the head packet of the flow the round robin serves after this one (the
    /// next on the same list: with a quantum of one MTU each flow sends one packet a turn),
    /// and the second line of its entry, CoDel's state, which that dequeue reads first
    /// (`should_drop`). With 1000 flows, each flow's queue is its own allocation and its head
    /// packet was a cache miss in two thirds of `CodelFlow::dequeue`'s samples (perf
    /// annotate); the next dequeue is one packet's serialisation later, time enough for the
    /// load (the entry's first line, which it reads the head from, was prefetched one call
    /// earlier). A hint only: a wrong guess costs a wasted load, never a different result.
    #[inline]
    fn prefetch_next(&self, list: List) {
        let (next, after) = match list {
            List::New => (self.new_flows.get(1).or(self.old_flows.front()), None),
            List::Old => (self.old_flows.get(1), self.old_flows.get(2)),
        };
        if let Some(&i) = next {
            let flow = &self.t.flows[i as usize];
            // Session 11: at f1000 the write of `ldelay` missed the 1 MiB L2 on 0.67 of the
            // packets (cachegrind), a load that waited on every such miss.
            prefetch_line(flow.codel_line());
            if let Some(head) = flow.q.queue.front() {
                prefetch_line(head);
            }
        }
        // And the queue header of the one after it, read by the next call's prefetch.
        if let Some(&i) = after {
            prefetch_line(&self.t.flows[i as usize].q.queue);
        }
    }
}

impl Flow {
    /// The address of the entry's second cache line, most of CoDel's state ([`Flow`]'s layout:
    /// 128 bytes aligned to 64).
    #[inline(always)]
    fn codel_line(&self) -> *const i8 {
        const _: () = assert!(std::mem::size_of::<Flow>() == 128 && std::mem::align_of::<Flow>() == 64);
        (self as *const Flow as *const i8).wrapping_add(64)
    }
}

/// A cache prefetch of the line holding `p` (no effect on results; a no-op off x86_64). A
/// packet queued here fills one line ([`super::queue::LineQueue`]).
#[inline(always)]
fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl QdiscConfig for FqCodelConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(FqCodel::new(self, ctx.mtu, ctx.rng.next_u32()))
    }
}

/// `fq_codel [limit PACKETS] [flows NUMBER] [target TIME] [interval TIME] [quantum BYTES]
/// [ecn|noecn] [ce_threshold TIME] [ce_threshold_selector VALUE/MASK] [memory_limit BYTES]
/// [drop_batch SIZE]`.
pub const FQ_CODEL: QdiscKind = QdiscKind {
    name: "fq_codel",
    doc: "Flow-queue CoDel: DRR over hashed flows, CoDel per flow (sch_fq_codel.c)",
    params: &[
        Param::uint("limit", 1, u32::MAX as u64, 10 * 1024).unit("packets").doc("queue limit, all flows"),
        Param::uint("flows", 1, 65536, 1024).doc("number of flow queues (hash buckets)"),
        // fq_codel_change: quantum = max(256, value), at most QUANTUM_MAX.
        Param::new("quantum", Type::Uint { min: 0, max: QUANTUM_MAX }, Value::Unset)
            .unit("bytes")
            .doc("DRR quantum, raised to 256; unset: the link's psched_mtu")
            .check(|_, v| {
                Ok(Some(match v {
                    Value::Uint(q) => Value::Uint(q.max(256)),
                    v => v,
                }))
            }),
        Param::new("memory_limit", Type::Bytes, Value::Bytes(32 << 20)).unit("bytes").doc("memory limit, at most 2^31").check(
            |_, v| {
                Ok(Some(match v {
                    Value::Bytes(b) => Value::Bytes(b.min(1 << 31)),
                    v => v,
                }))
            },
        ),
        Param::uint("drop_batch", 0, u32::MAX as u64, 64)
            .unit("packets")
            .doc("packets dropped at once from the fattest flow when over limit (at least 1)")
            .check(|_, v| {
                Ok(Some(match v {
                    Value::Uint(n) => Value::Uint(n.max(1)),
                    v => v,
                }))
            }),
        codel::TARGET,
        codel::INTERVAL,
        codel::ecn(true),
        codel::CE_THRESHOLD,
        codel::CE_THRESHOLD_SELECTOR,
    ],
    build: |a| Ok(Arc::new(FqCodelConfig::from_args(a))),
};

#[cfg(test)]
mod tests {
    use super::super::codel::testutil::{self, enq, pkt};
    use super::super::codel::Codel;
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::QdiscSpec;

    const MS: u64 = 1_000_000;

    fn fq(c: FqCodelConfig) -> FqCodel {
        FqCodel::new(&c, 1514, 0x1234_5678)
    }

    /// Flow ids whose packets land in distinct buckets of `q`.
    fn distinct_flows(q: &FqCodel, n: usize) -> Vec<u32> {
        testutil::distinct_flows(|p| q.classify(p), n)
    }

    #[test]
    fn hashing_spreads_flows_and_depends_on_perturbation() {
        let a = fq(FqCodelConfig::default());
        let b = FqCodel::new(&FqCodelConfig::default(), 1514, 99);
        let buckets = |q: &FqCodel| (0..64).map(|f| q.classify(&pkt(f, 100, 0, Ecn::NotEct))).collect::<Vec<_>>();
        let (ba, bb) = (buckets(&a), buckets(&b));
        assert_ne!(ba, bb);
        let mut u = ba.clone();
        u.sort();
        u.dedup();
        assert!(u.len() >= 60, "64 flows in {} buckets", u.len());
        assert!(ba.iter().all(|&x| x < 1024));
        let one = fq(FqCodelConfig { flows: 1, ..Default::default() });
        assert!((0..64).all(|f| one.classify(&pkt(f, 100, 0, Ecn::NotEct)) == 0));
    }

    #[test]
    fn sparse_flow_is_served_ahead_of_a_backlogged_flow() {
        let mut q = fq(FqCodelConfig::default());
        let ids = distinct_flows(&q, 2);
        let (bulk, sparse) = (ids[0], ids[1]);
        let bulk_idx = q.classify(&pkt(bulk, 1, 0, Ecn::NotEct));
        let t = Time::ZERO;
        for i in 0..100 {
            enq(&mut q, pkt(bulk, 300, i, Ecn::NotEct), t);
        }
        // Six 300-byte packets use up the bulk flow's first quantum (1514); the seventh dequeue
        // moves it to the old list with a fresh quantum and serves it there.
        for _ in 0..7 {
            assert_eq!(q.dequeue(t).unwrap().flow, bulk);
        }
        assert_eq!((q.new_flows.len(), q.old_flows.len()), (0, 1));
        // A packet of a new flow jumps the 93 queued bulk packets.
        enq(&mut q, pkt(sparse, 200, 0, Ecn::NotEct), t);
        assert_eq!(q.dequeue(t).unwrap().flow, sparse);
        // Found empty at the head of the new list while old flows wait, it moves to the old list
        // (it is not unlinked), and the bulk flow is served.
        assert_eq!((q.new_flows.len(), q.old_flows.len()), (1, 1));
        assert_eq!(q.dequeue(t).unwrap().flow, bulk);
        assert_eq!((q.new_flows.len(), q.old_flows.len()), (0, 2));
        // So its next packet is not new: it waits until the bulk flow's credit (628 bytes) is
        // spent: three more bulk packets.
        enq(&mut q, pkt(sparse, 200, 1, Ecn::NotEct), t);
        let before: Vec<u32> = std::iter::from_fn(|| q.dequeue(t)).take(5).map(|p| p.flow).collect();
        assert_eq!(before, vec![bulk, bulk, bulk, sparse, bulk]);
        // Found empty on its old-list turn, it was unlinked; its next packet is new again.
        assert_eq!(q.old_flows.iter().copied().collect::<Vec<_>>(), vec![bulk_idx]);
        assert_eq!(q.new_flow_count(), 2);
        enq(&mut q, pkt(sparse, 200, 2, Ecn::NotEct), t);
        assert_eq!(q.dequeue(t).unwrap().flow, sparse);
        assert_eq!(q.new_flow_count(), 3);
    }

    #[test]
    fn drr_gives_equal_bytes_to_flows_with_different_packet_sizes() {
        let mut q = fq(FqCodelConfig::default());
        let ids = distinct_flows(&q, 2);
        let t = Time::ZERO;
        for i in 0..2000 {
            enq(&mut q, pkt(ids[0], 1514, i, Ecn::NotEct), t);
            enq(&mut q, pkt(ids[1], 300, i, Ecn::NotEct), t);
        }
        let mut bytes = [0u64; 2];
        for _ in 0..1500 {
            let p = q.dequeue(t).unwrap();
            bytes[(p.flow == ids[1]) as usize] += p.wire_len as u64;
        }
        // DRR: the byte counts differ by at most one quantum plus one packet.
        let diff = bytes[0].abs_diff(bytes[1]);
        assert!(diff <= 1514 + 1514, "{bytes:?}");
        assert!(bytes[1] > 100_000, "{bytes:?}");
        assert_eq!(q.stats().drops, 0);
    }

    #[test]
    fn overflow_drops_half_of_the_fattest_flow_from_its_head() {
        let mut q = fq(FqCodelConfig { limit: 10, ..Default::default() });
        let ids = distinct_flows(&q, 2);
        let (fat, thin) = (ids[0], ids[1]);
        let t = Time::ZERO;
        for i in 0..8 {
            enq(&mut q, pkt(fat, 1514, i, Ecn::NotEct), t);
        }
        for i in 0..2 {
            enq(&mut q, pkt(thin, 1514, i, Ecn::NotEct), t);
        }
        assert_eq!(q.stats().drops, 0);
        // The 11th packet (of the thin flow) overflows: 4 of the fat flow's 8 packets (half its
        // bytes) go, from the head, and its CoDel count rises by 4.
        assert_eq!(enq(&mut q, pkt(thin, 1514, 2, Ecn::NotEct), t), Enqueued::Queued);
        assert_eq!((q.stats().drops, q.stats().overlimits, q.len()), (4, 4, 7));
        assert_eq!(q.overflow_drops(), (4, 0));
        let fat_idx = q.classify(&pkt(fat, 1, 0, Ecn::NotEct));
        assert_eq!(q.flow_count(fat_idx), 4);
        let first_fat = std::iter::from_fn(|| q.dequeue(t)).find(|p| p.flow == fat).unwrap();
        assert_eq!(first_fat.tcp.seq, 4);

        // drop_batch caps the batch; a fat flow that is the arriving packet's own flow loses its
        // head, not the new packet.
        let mut q = fq(FqCodelConfig { limit: 20, drop_batch: 3, ..Default::default() });
        for i in 0..20 {
            enq(&mut q, pkt(fat, 1514, i, Ecn::NotEct), t);
        }
        assert_eq!(enq(&mut q, pkt(fat, 1514, 20, Ecn::NotEct), t), Enqueued::Queued);
        assert_eq!((q.stats().drops, q.len()), (3, 18));
        assert_eq!(q.dequeue(t).unwrap().tcp.seq, 3);

        // Memory limit (bytes): exceeded by the backlog, same handler.
        let mut q = fq(FqCodelConfig { memory_limit: 4 * 1514, ..Default::default() });
        for i in 0..5 {
            enq(&mut q, pkt(fat, 1514, i, Ecn::NotEct), t);
        }
        // 5 x 1514 > 4 x 1514: drop from the head until half of 7570 bytes are gone (3 packets).
        assert_eq!(q.overflow_drops(), (3, 3));
    }

    /// The fattest flow found on the lists is the one Linux's scan of every bucket finds
    /// (ties included: equal-size packets make equal backlogs common), at every step of a
    /// random mix of arrivals over 16 of 64 buckets, overflow drops, CoDel drops (a 1 ms
    /// target) and flows that empty and are unlinked.
    #[test]
    fn fattest_flow_on_the_lists_is_the_full_scans() {
        let mut q = fq(FqCodelConfig { flows: 64, limit: 40, drop_batch: 3, codel: CodelParams { target: Time(MS), interval: Time(10 * MS), ..CodelParams::new(1514) }, ..Default::default() });
        let mut rng = crate::rng::Stream::new(7, "test");
        let (mut t, mut checked, mut ties) = (Time::ZERO, 0, 0);
        for seq in 0..20_000u32 {
            if rng.next_u32() % 3 != 0 {
                let len = if rng.next_u32() % 2 == 0 { 1514 } else { 600 };
                enq(&mut q, pkt(rng.next_u32() % 16, len, seq, Ecn::NotEct), t);
            } else {
                q.dequeue(t);
            }
            if !q.is_empty() {
                let want = q.fattest_by_full_scan();
                assert_eq!(q.fattest(), want, "step {seq}");
                let b = q.t.flows[want].q.backlog;
                ties += q.t.flows.iter().filter(|f| f.q.backlog == b).count() as u32 - 1;
                checked += 1;
            }
            t += Time(MS / 5);
        }
        assert!(checked > 10_000 && ties > 100 && q.stats().drops > 100, "{checked} {ties} {:?}", q.stats());
    }

    /// The arriving packet's flow is linked before the overflow handler runs (Linux:
    /// `list_add_tail(&flow->flowchain, &q->new_flows)` precedes `fq_codel_drop`): a new flow
    /// whose one packet is the fattest backlog loses that packet, and the arrival is reported
    /// dropped.
    #[test]
    fn a_new_flow_fatter_than_all_others_loses_its_own_arrival() {
        let mut q = fq(FqCodelConfig { limit: 2, ..Default::default() });
        let ids = distinct_flows(&q, 2);
        let t = Time::ZERO;
        enq(&mut q, pkt(ids[0], 100, 0, Ecn::NotEct), t);
        enq(&mut q, pkt(ids[0], 100, 1, Ecn::NotEct), t);
        assert_eq!(enq(&mut q, pkt(ids[1], 1514, 0, Ecn::NotEct), t), Enqueued::Dropped);
        assert_eq!((q.len(), q.stats().drops), (2, 1));
        assert!(std::iter::from_fn(|| q.dequeue(t)).all(|p| p.flow == ids[0]));
    }

    /// `drop_batch` as each profile's `fq_codel_change` read it: given, it is one packet on the
    /// 5.4-based kernels of 2020 (`min(1U, value)`) and itself elsewhere; not given, 64.
    #[test]
    fn drop_batch_follows_the_kernel_of_each_profile() {
        let batch = |s: &str, stack: Stack| {
            let spec = QdiscSpec::parse_for(s, stack).unwrap();
            drop_batch_of(spec.args())
        };
        for stack in Stack::ALL {
            let given = if matches!(stack, Stack::L4steam2020 | Stack::L4steam2020Apr | Stack::Sce2020) { 1 } else { 8 };
            assert_eq!(batch("fq_codel drop_batch 8", stack), given, "{stack:?}");
            assert_eq!(batch("fq_codel", stack), 64, "{stack:?}");
        }
    }

    #[test]
    fn one_flow_is_a_single_codel_queue() {
        // fq_codel flows 1 and codel ecn see the same arrivals (several flows, a mix of ECT and
        // Not-ECT) and must make the same decisions packet by packet.
        let mut a = fq(FqCodelConfig { flows: 1, ..Default::default() });
        let mut b = Codel::new(10240, CodelParams { ecn: true, ..CodelParams::new(1514) });
        let mut t = Time::ZERO;
        let mut seq = 0;
        for step in 0..40_000u64 {
            // 4/3 of the service rate for 1.5 s (CoDel drops and marks), then 1/2 (drains).
            let arrivals = if step < 15_000 { 1 + (step % 3 == 0) as u32 } else { (step % 2 == 0) as u32 };
            for k in 0..arrivals {
                let ecn = if (seq / 3) % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
                let p = pkt(seq % 5, if k == 0 { 1514 } else { 600 }, seq, ecn);
                seq += 1;
                assert_eq!(enq(&mut a, p, t), enq(&mut b, p, t));
            }
            assert_eq!(a.dequeue(t), b.dequeue(t), "at {t}");
            t += Time(MS / 10);
        }
        assert!(a.is_empty());
        assert_eq!(a.stats(), b.stats());
        assert!(a.stats().drops > 0 && a.stats().ce_marks > 0, "{:?}", a.stats());
    }

    #[test]
    fn tc_strings() {
        let dbg = |s: &str| format!("{:?}", QdiscSpec::parse(s).unwrap());
        assert_eq!(
            QdiscSpec::parse("fq_codel").unwrap(),
            QdiscSpec::parse(
                "fq_codel limit 10240 flows 1024 target 5ms interval 100ms ecn memory_limit 32mb drop_batch 64"
            )
            .unwrap()
        );
        for s in [
            "fq_codel flows 1",
            "fq_codel flows 1 target 1ms interval 20ms",
            "fq_codel target 3ms interval 40ms",
            "fq_codel noecn",
        ] {
            QdiscSpec::parse(s).unwrap();
        }
        let d = dbg("fq_codel flows 1 target 1ms interval 20ms noecn");
        assert!(
            d.contains("flows: 1")
                && d.contains("target: Time(1000000)")
                && d.contains("interval: Time(20000000)")
                && d.contains("ecn: false"),
            "{d}"
        );
        assert!(dbg("fq_codel quantum 100").contains("quantum: Some(256)"));
        assert!(dbg("fq_codel ce_threshold 1ms").contains("ce_threshold: Some(Time(1000000))"));
        assert!(QdiscSpec::parse("fq_codel flows 0").unwrap_err().contains("flows"));
        assert!(QdiscSpec::parse("fq_codel flows 70000").unwrap_err().contains("flows"));
        assert!(QdiscSpec::parse("fq_codel quantum 2mb").unwrap_err().contains("quantum"));
        assert!(QdiscSpec::parse("fq_codel interval soon").unwrap_err().contains("interval"));
        assert!(QdiscSpec::parse("fq_codel buckets 4").unwrap_err().contains("buckets"));
    }
}
