//! Lightweight Fair Queueing with COBALT-SCE: `lfq_cobalt` (chromi/sce
//! `net/sched/sch_lfq_cobalt.c`).
//!
//! Two queues: **sparse** and **bulk**. A packet goes to the sparse queue if its flow (one of
//! 65536 hashed flows) has no packet queued, a non-negative deficit and is not flagged
//! `skip`; otherwise to the bulk queue. The sparse queue has strict priority and no AQM.
//! The bulk queue is served from a **scan pointer**, not its head (`lfq_dequeue`): the scan
//! passes over packets of flows flagged `skip` and sends the first packet of an unflagged
//! flow. Each packet sent (`lfq_send`) takes its length from its flow's deficit; a flow that
//! goes negative is flagged `skip` and credited one MTU. When the scan runs off the tail, a
//! sweep (`lfq_sweep`) clears the skip flags, zeroes the deficits of flows with nothing
//! queued, and the scan restarts at the head. The result is DRR-like byte fairness inside
//! one FIFO. Each flow has its own COBALT-SCE state on the plain sojourn ([`CobaltSce`],
//! low-latency parameters for DSCP 4); the last packet of a flow is never dropped; one idle
//! flow's state decays per dequeue. With `memlimit`, packets are dropped from the head of
//! the bulk queue (then the sparse queue) to make room. The kernel sets `sch->limit = 10240`
//! and never checks it; the model does ([`sce::PACKET_LIMIT`], with a byte bound of
//! [`sce::byte_limit`]), dropping the arriving packet beyond either. CAKE's deficit-mode shaper
//! ([`super::shaper`]) paces the output. See docs/algorithms/sce-qdiscs.md.

use super::cobalt::{CobaltSce, SceParams, Share};
use super::sce::{self, SceTc};
use super::shaper::{Compensation, Shaper};
use super::slab::{Ends, Slab, NIL};
use super::{flow_bucket, BuildCtx, Enqueued, Qdisc, QdiscConfig, QdiscKind, QdiscStats};
#[cfg(test)]
use super::Params;
use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::Time;
use std::sync::Arc;

/// Hashed flows (`LFQ_FLOWS`).
const FLOWS: usize = 65536;
/// DSCP of the low-latency parameters (`DSCP_LL`, TOS "minimise delay").
const DSCP_LL: u8 = 4;
/// The low-latency parameters are the defaults / 5 (`q->divisor`).
const LL_DIVISOR: u64 = 5;

/// A queued packet; the queue's `next` links are the slab's.
#[derive(Clone, Copy, Debug)]
struct Node {
    pkt: Packet,
    flow: u16,
    prev: u32,
    /// Position in arrival order (queue order: packets are only appended).
    seq: u64,
    /// The next bulk packet of the same flow (`NIL`: none); not in the kernel.
    next_same: u32,
}

/// A doubly linked packet FIFO with a scan pointer (`struct lfq_queue`), in a slab.
#[derive(Debug)]
struct ScanQueue {
    slab: Slab<Node>,
    ends: Ends,
    scan: u32,
    len: usize,
    bytes: u64,
    next_seq: u64,
}

impl ScanQueue {
    fn new() -> ScanQueue {
        ScanQueue { slab: Slab::with_capacity(1024), ends: Ends::default(), scan: NIL, len: 0, bytes: 0, next_seq: 0 }
    }

    /// `lfq_push`: appends; an empty queue's scan starts at the new head. Returns the node.
    fn push(&mut self, pkt: Packet, flow: u16) -> u32 {
        let prev = self.ends.tail;
        let i = self.slab.push_back(&mut self.ends, Node { pkt, flow, prev, seq: self.next_seq, next_same: NIL });
        self.next_seq += 1;
        if prev == NIL {
            self.scan = i;
        }
        self.len += 1;
        self.bytes += pkt.wire_len as u64;
        i
    }

    /// Unlinks node `i` and returns its contents.
    fn unlink(&mut self, i: u32) -> (Packet, u16) {
        let (Node { pkt, flow, prev, .. }, next) = self.slab.release(i);
        match prev {
            NIL => self.ends.head = next,
            p => self.slab.set_next(p, next),
        }
        match next {
            NIL => self.ends.tail = prev,
            n => self.slab.get_mut(n).prev = prev,
        }
        if self.scan == i {
            self.scan = next;
        }
        crate::qdisc::dec_backlog!(self.len, 1, "lfq qlen");
        crate::qdisc::dec_backlog!(self.bytes, pkt.wire_len as u64, "lfq backlog");
        (pkt, flow)
    }

    /// `lfq_pop`: removes the head (the scan moves on if it pointed there).
    fn pop(&mut self) -> Option<(Packet, u16)> {
        (!self.ends.is_empty()).then(|| self.unlink(self.ends.head))
    }

    /// `lfq_pull`: removes the packet at the scan pointer; the scan moves to the next.
    fn pull(&mut self) -> (Packet, u16) {
        self.unlink(self.scan)
    }

    fn scan_wire_len(&self) -> u32 {
        self.slab.get(self.scan).pkt.wire_len
    }
}

/// `struct lfq_flow_data`.
#[derive(Clone, Copy, Debug)]
struct FlowData {
    deficit: i32,
    backlog: u32,
    /// The flow's first and last packet in the bulk queue, linked by `Node::next_same`
    /// (`NIL`: none; not in the kernel: they feed [`Lfq::ready`]).
    bulk_head: u32,
    bulk_tail: u32,
    skip: bool,
    dirty: bool,
}

impl Default for FlowData {
    fn default() -> Self {
        FlowData { deficit: 0, backlog: 0, bulk_head: NIL, bulk_tail: NIL, skip: false, dirty: false }
    }
}

/// `lfq_cobalt`.
#[derive(Debug)]
pub struct Lfq {
    sparse: ScanQueue,
    bulk: ScanQueue,
    flows: Vec<FlowData>,
    /// Flows whose data changed since the last sweep (`dirty_flows`).
    dirty: Vec<u16>,
    /// (arrival position of its first bulk packet, flow) of every flow that has bulk packets
    /// and is not flagged `skip`. Every bulk packet before the scan pointer belongs to a
    /// skipped flow (the scan passed it while its flow was skipped, and flags are only
    /// cleared by a sweep, which restarts the scan at the head), so the packet the kernel's
    /// scan walks to is the first of this set, and with the set empty the walk runs off the
    /// tail and sweeps. The model goes there at once: the walk over skipped packets cost
    /// O(queue) per packet under unresponsive overload.
    ready: std::collections::BTreeSet<(u64, u16)>,
    cvars: Vec<CobaltSce>,
    params: SceParams,
    params_ll: SceParams,
    decay_index: usize,
    /// `psched_mtu`: the deficit credit per round.
    mtu: u32,
    buffer_limit: Option<u64>,
    /// Bytes the queues may hold ([`sce::byte_limit`]).
    byte_limit: u64,
    shaper: Shaper,
    comp: Compensation,
    perturb: u32,
    rng: Stream,
    hold_until: Option<Time>,
    stats: QdiscStats,
    sce_marks: u64,
}

impl Lfq {
    fn new(cfg: &LfqConfig, mtu: u32, mut rng: Stream) -> Lfq {
        let perturb = rng.next_u32();
        let (params, params_ll) = cfg.params();
        Lfq {
            sparse: ScanQueue::new(),
            bulk: ScanQueue::new(),
            flows: vec![FlowData::default(); FLOWS],
            dirty: Vec::with_capacity(FLOWS),
            ready: std::collections::BTreeSet::new(),
            cvars: vec![CobaltSce::default(); FLOWS],
            params,
            params_ll,
            decay_index: 0,
            mtu,
            buffer_limit: cfg.tc.memlimit,
            byte_limit: sce::byte_limit(mtu, cfg.tc.memlimit),
            shaper: Shaper::new(cfg.tc.bytes_per_sec()),
            comp: cfg.tc.comp,
            perturb,
            rng,
            hold_until: None,
            stats: QdiscStats::default(),
            sce_marks: 0,
        }
    }

    fn qlen(&self) -> usize {
        self.sparse.len + self.bulk.len
    }
    fn backlog(&self) -> u64 {
        self.sparse.bytes + self.bulk.bytes
    }

    /// `lfq_set_dirty`.
    fn set_dirty(&mut self, flow: u16) {
        let d = &mut self.flows[flow as usize];
        if !d.dirty {
            d.dirty = true;
            self.dirty.push(flow);
        }
    }

    /// `lfq_sweep`: a new round. Skip flags are cleared; unflagged flows with nothing queued
    /// lose their deficit. The scan restarts at the head of the bulk queue.
    fn sweep(&mut self) {
        for &f in &self.dirty {
            let d = &mut self.flows[f as usize];
            if d.skip {
                d.skip = false;
                if d.bulk_head != NIL {
                    self.ready.insert((self.bulk.slab.get(d.bulk_head).seq, f));
                }
            } else if d.backlog == 0 {
                d.deficit = 0;
            }
            d.dirty = false;
        }
        self.dirty.clear();
        self.bulk.scan = self.bulk.ends.head;
    }

    /// `lfq_send`: charges a departing packet to its flow; a flow out of deficit is skipped
    /// until the next sweep and credited one MTU.
    fn send(&mut self, flow: u16, len: u32) {
        let d = &mut self.flows[flow as usize];
        crate::qdisc::dec_backlog!(d.backlog, 1, "lfq flow backlog");
        d.deficit -= len as i32;
        if d.deficit < 0 {
            if !d.skip && d.bulk_head != NIL {
                self.ready.remove(&(self.bulk.slab.get(d.bulk_head).seq, flow));
            }
            d.skip = true;
            d.deficit += self.mtu as i32;
        }
        self.set_dirty(flow);
    }

    /// Packet `i` of `flow` joined the bulk queue.
    fn bulk_joined(&mut self, flow: u16, i: u32) {
        let d = &mut self.flows[flow as usize];
        if d.bulk_head == NIL {
            d.bulk_head = i;
            if !d.skip {
                self.ready.insert((self.bulk.slab.get(i).seq, flow));
            }
        } else {
            self.bulk.slab.get_mut(d.bulk_tail).next_same = i;
        }
        d.bulk_tail = i;
    }

    /// Packet `i`, `flow`'s first in the bulk queue, is about to leave it.
    fn bulk_leaving(&mut self, flow: u16, i: u32) {
        let Node { seq, next_same, .. } = *self.bulk.slab.get(i);
        self.ready.remove(&(seq, flow));
        let d = &mut self.flows[flow as usize];
        debug_assert_eq!(d.bulk_head, i, "a flow's bulk packets leave in order");
        d.bulk_head = next_same;
        if next_same == NIL {
            d.bulk_tail = NIL;
        } else if !d.skip {
            self.ready.insert((self.bulk.slab.get(next_same).seq, flow));
        }
    }

    /// The bulk packet the scan serves next (`lfq_dequeue`'s scan loop): sends and removes it.
    fn take_bulk(&mut self) -> (Packet, u16) {
        // A scan past the tail sweeps; so does one with every bulk packet skipped, after
        // walking to the tail (see `ready`).
        if self.bulk.scan == NIL || self.ready.is_empty() {
            self.sweep();
        }
        let &(_, flow) = self.ready.first().expect("after a sweep every flow with bulk packets is ready");
        let i = self.flows[flow as usize].bulk_head;
        // Where the kernel's walk over skipped flows' packets stops.
        self.bulk.scan = i;
        let len = self.bulk.scan_wire_len();
        self.send(flow, len);
        self.bulk_leaving(flow, i);
        self.bulk.pull()
    }
}

impl Qdisc for Lfq {
    fn kind(&self) -> &'static str {
        LFQ_COBALT.name
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        let flow = flow_bucket(pkt.hash_key, self.perturb, FLOWS as u32) as u16;
        if let Some(limit) = self.buffer_limit {
            // Make room by dropping from the head of the bulk queue, then the sparse queue.
            while self.backlog() + pkt.wire_len as u64 > limit {
                let (dropped, f) = if !self.bulk.ends.is_empty() {
                    let head = self.bulk.ends.head;
                    let f = self.bulk.slab.get(head).flow;
                    self.bulk_leaving(f, head);
                    self.bulk.pop().expect("a bulk head")
                } else if let Some(x) = self.sparse.pop() {
                    x
                } else {
                    self.stats.overlimit_drop(&pkt);
                    return Enqueued::Dropped;
                };
                crate::qdisc::dec_backlog!(self.flows[f as usize].backlog, 1, "lfq flow backlog");
                self.set_dirty(f);
                self.stats.overlimit_drop(&dropped);
            }
        }
        if self.qlen() >= sce::PACKET_LIMIT || self.backlog() + pkt.wire_len as u64 > self.byte_limit {
            self.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        if self.qlen() == 0 {
            self.shaper.unstale(now);
        }
        let d = self.flows[flow as usize];
        if d.backlog == 0 && d.deficit >= 0 && !d.skip {
            pkt.queue = 0;
            self.sparse.push(pkt, flow);
        } else {
            pkt.queue = 1;
            let i = self.bulk.push(pkt, flow);
            self.bulk_joined(flow, i);
        }
        self.flows[flow as usize].backlog += 1;
        self.set_dirty(flow);
        self.stats.enqueued += 1;
        Enqueued::Queued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.hold_until = None;
        loop {
            if self.qlen() == 0 {
                return None;
            }
            if let Some(t) = self.shaper.held_until(now) {
                self.hold_until = Some(t);
                return None;
            }
            let pkt = if let Some((pkt, flow)) = self.sparse.pop() {
                self.send(flow, pkt.wire_len);
                pkt
            } else {
                let (mut pkt, flow) = self.take_bulk();
                let empty = self.backlog() == 0;
                let vars = &mut self.cvars[flow as usize];
                if empty {
                    vars.queue_empty(&self.params, now);
                } else {
                    let p = if pkt.dscp == DSCP_LL { &self.params_ll } else { &self.params };
                    let sig = vars.should_drop(p, now, &mut pkt, Share::PLAIN, &mut self.rng);
                    if sig.drop && self.flows[flow as usize].backlog != 0 {
                        self.stats.drop(&pkt);
                        continue;
                    }
                    self.stats.ce_marks += sig.ce_marked as u64;
                    self.sce_marks += sig.sce_marked as u64;
                }
                pkt
            };
            self.shaper.advance(self.comp.adjusted_len(pkt.wire_len));
            let i = self.decay_index;
            if self.flows[i].backlog == 0 {
                self.cvars[i].queue_empty(&self.params, now);
            }
            self.decay_index = (i + 1) % FLOWS;
            self.stats.dequeued += 1;
            self.stats.dequeued_bytes += pkt.wire_len as u64;
            return Some(pkt);
        }
    }

    fn len(&self) -> usize {
        self.qlen()
    }
    fn backlog_bytes(&self) -> u64 {
        self.backlog()
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        for q in [&self.sparse, &self.bulk] {
            q.slab.for_each(&q.ends, |n| f(&n.pkt));
        }
    }
    fn ready_at(&self) -> Option<Time> {
        self.hold_until
    }
    fn queue_names(&self) -> &'static [&'static str] {
        &["sparse", "bulk"]
    }
    /// Cumulative SCE marks and the largest BLUE probability of any flow.
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        let p_max = self.cvars.iter().map(|v| v.blue.p_drop).max().unwrap_or(0);
        out.extend([("sce_marks", self.sce_marks as f64), ("p_drop_max", p_max as f64 / 4_294_967_296.0)]);
    }
}

/// Parsed `lfq_cobalt` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LfqConfig {
    tc: SceTc,
}

impl LfqConfig {
    /// (normal, low-latency) parameters. `lfq_init` sets both to the defaults (SCE off) and
    /// divides every time of the low-latency set by 5; `lfq_change` then changes only the
    /// normal set, so `sce-thresh` does not turn SCE on for DSCP 4.
    fn params(&self) -> (SceParams, SceParams) {
        let d = SceParams::new();
        let div = |t: Time| Time(t.0 / LL_DIVISOR);
        let ll = SceParams {
            ce_interval: div(d.ce_interval),
            ce_target: div(d.ce_target),
            sce_interval: d.sce_interval.map(div),
            sce_target: div(d.sce_target),
            blue_thresh: div(d.blue_thresh),
            ..d
        };
        (self.tc.apply(d), ll)
    }
}

impl QdiscConfig for LfqConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(Lfq::new(self, ctx.mtu, ctx.rng.clone()))
    }
}

/// `lfq_cobalt [bandwidth RATE | unlimited] [rtt TIME | PRESET] [sce | no-sce |
/// sce-thresh N] [memlimit SIZE] [overhead N | FRAMING ...] [mpu N]` (SCE off by default).
pub const LFQ_COBALT: QdiscKind = QdiscKind {
    name: "lfq_cobalt",
    doc: "SCE fork's Lightweight Fair Queueing with COBALT (chromi/sce sch_lfq_cobalt.c)",
    params: sce::PARAMS_LFQ,
    build: |a| Ok(Arc::new(LfqConfig { tc: SceTc::from_args(a) })),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::qdisc::QdiscSpec;

    const MTU: u32 = 1514;

    fn build(s: &str) -> Lfq {
        QdiscSpec::parse(s).unwrap();
        let tokens: Vec<String> = s.split_whitespace().skip(1).map(str::to_string).collect();
        let tc = sce::parse(&mut Params::new("lfq_cobalt", &tokens), true).unwrap();
        Lfq::new(&LfqConfig { tc }, MTU, Stream::new(1, "lfq-test"))
    }

    fn pkt(key: u32, len: u32, seq: u32, at: Time) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
        p.hash_key = key;
        p.tcp.seq = seq;
        p.enqueued_at = at;
        p.ecn = Ecn::Ect0;
        p
    }

    /// The scan pointer with skip flags shares bytes like DRR with a one-MTU quantum: two
    /// backlogged flows of 1514- and 500-byte packets get equal bytes (within two MTUs at
    /// every point), although they share one FIFO.
    #[test]
    fn scan_and_skip_share_bytes_fairly_between_packet_sizes() {
        let mut q = build("lfq_cobalt");
        let t = Time::from_secs(1);
        // Interleaved arrivals: 1 big then 3 small, repeated (equal bytes offered).
        for i in 0..300 {
            q.enqueue(pkt(1, 1514, i, t), t);
            for j in 0..3 {
                q.enqueue(pkt(2, 500, 3 * i + j, t), t);
            }
        }
        // Now a big-packet-heavy arrival order: 3 big then 1 small.
        let (mut big, mut small) = (0i64, 0i64);
        for _ in 0..600 {
            let p = q.dequeue(t).unwrap();
            if p.hash_key == 1 {
                big += p.wire_len as i64;
            } else {
                small += p.wire_len as i64;
            }
            assert!((big - small).abs() <= 2 * MTU as i64, "{big} vs {small}");
        }
        assert!(big > 150_000 && small > 150_000);
        // A FIFO would serve them in arrival order; with 3 big : 1 small arrivals DRR still
        // equalises bytes.
        let mut q = build("lfq_cobalt");
        for i in 0..300 {
            for j in 0..3 {
                q.enqueue(pkt(1, 1514, 3 * i + j, t), t);
            }
            q.enqueue(pkt(2, 500, i, t), t);
        }
        let (mut big, mut small) = (0i64, 0i64);
        for _ in 0..350 {
            let p = q.dequeue(t).unwrap();
            *(if p.hash_key == 1 { &mut big } else { &mut small }) += p.wire_len as i64;
        }
        assert!((big - small).abs() <= 2 * MTU as i64, "{big} vs {small}");
        assert_eq!(q.stats().drops, 0);
    }

    /// Skip flags and deficits follow lfq_send and lfq_sweep exactly.
    #[test]
    fn send_flags_skip_and_sweep_clears_it() {
        let mut q = build("lfq_cobalt");
        let t = Time::from_secs(1);
        for i in 0..4 {
            q.enqueue(pkt(1, 500, i, t), t);
        }
        let f = flow_bucket(1, q.perturb, FLOWS as u32) as usize;
        // First packet sparse (empty flow, deficit 0): sent, deficit 0 - 500 < 0 -> skip, +MTU.
        assert_eq!(q.sparse.len, 1);
        q.dequeue(t).unwrap();
        assert_eq!((q.flows[f].deficit, q.flows[f].skip), (1014, true));
        // The scan finds only skipped packets, sweeps (clearing skip) and sends from the head.
        q.dequeue(t).unwrap();
        assert_eq!((q.flows[f].deficit, q.flows[f].skip), (514, false));
        q.dequeue(t).unwrap();
        assert_eq!((q.flows[f].deficit, q.flows[f].skip), (14, false));
        q.dequeue(t).unwrap();
        assert_eq!((q.flows[f].deficit, q.flows[f].skip), (1028, true));
        // Flagged skip, the flow's next packet is bulk even with nothing queued.
        q.enqueue(pkt(1, 500, 9, t), t);
        assert_eq!((q.sparse.len, q.bulk.len), (0, 1));
        q.dequeue(t).unwrap();
        // After a sweep with nothing queued the deficit is forgotten: sparse again.
        q.sweep();
        assert_eq!(q.flows[f].deficit, 0);
        q.enqueue(pkt(1, 500, 10, t), t);
        assert_eq!(q.sparse.len, 1);
    }

    /// A new flow's first packet is sparse and jumps the bulk queue; sparse packets get no
    /// AQM. DSCP 4 packets use the low-latency parameters (which `sce-thresh` leaves off).
    #[test]
    fn sparse_first_packets_and_low_latency_parameters() {
        let mut q = build("lfq_cobalt sce-thresh 8");
        let t = Time::from_secs(1);
        for i in 0..5 {
            q.enqueue(pkt(1, 1514, i, t), t);
        }
        q.dequeue(t).unwrap();
        q.dequeue(t).unwrap();
        q.enqueue(pkt(2, 100, 0, t), t);
        let p = q.dequeue(t).unwrap();
        assert_eq!((p.hash_key, p.queue), (2, 0));
        let ms = Time::from_millis;
        assert_eq!((q.params.sce_interval, q.params.sce_target), (Some(Time::from_micros(12_500)), Time::from_micros(2500)));
        assert_eq!((q.params_ll.ce_target, q.params_ll.ce_interval, q.params_ll.blue_thresh, q.params_ll.sce_interval), (ms(1), ms(20), ms(80), None));
        // A DSCP 4 bulk packet with 2 ms of sojourn enters the LL CE state (1 ms target);
        // a normal one does not (5 ms).
        for (dscp, enters) in [(4u8, true), (0, false)] {
            let mut q = build("lfq_cobalt");
            for i in 0..3 {
                let mut p = pkt(3, 1514, i, t);
                p.dscp = dscp;
                q.enqueue(p, t);
            }
            q.dequeue(t).unwrap(); // sparse
            q.dequeue(t + ms(2)).unwrap();
            let f = flow_bucket(3, q.perturb, FLOWS as u32) as usize;
            assert_eq!(q.cvars[f].ce.dropping, enters, "dscp {dscp}");
        }
    }

    #[test]
    fn memlimit_drops_from_the_bulk_head() {
        let mut q = build("lfq_cobalt memlimit 6056");
        let t = Time::from_secs(1);
        for i in 0..4 {
            assert_eq!(q.enqueue(pkt(1, 1514, i, t), t), Enqueued::Queued);
        }
        assert_eq!(q.stats().drops, 0);
        assert_eq!(q.enqueue(pkt(1, 1514, 4, t), t), Enqueued::Queued);
        assert_eq!((q.stats().drops, q.len()), (1, 4));
        // Seq 0 was sparse; seq 1, the bulk head, was dropped.
        let seqs: Vec<u32> = (0..4).map(|_| q.dequeue(t).unwrap().tcp.seq).collect();
        assert_eq!(seqs, [0, 2, 3, 4]);
    }

    #[test]
    fn parser_defaults_and_errors() {
        let q = build("lfq_cobalt");
        assert!(q.shaper.unlimited() && q.buffer_limit.is_none());
        assert_eq!(q.params, SceParams::new());
        assert!(QdiscSpec::parse("lfq_cobalt bandwidth 50Mbit sce-thresh 8").is_ok());
        let e = QdiscSpec::parse("lfq_cobalt sce-thresh 0").unwrap_err();
        assert!(e.contains("sce-thresh"), "{e}");
        let e = QdiscSpec::parse("lfq_cobalt flows 4").unwrap_err();
        assert!(e.contains("'flows'"), "{e}");
    }

    #[test]
    fn queues_are_bounded_in_packets_and_bytes() {
        let t = Time::from_secs(1);
        let mut q = build("lfq_cobalt");
        for i in 0..sce::PACKET_LIMIT as u32 {
            assert_eq!(q.enqueue(pkt(i % 5, 43, i, t), t), Enqueued::Queued);
        }
        assert_eq!(q.enqueue(pkt(9, 43, 0, t), t), Enqueued::Dropped);
        assert_eq!((q.len(), q.stats().drops, q.stats().overlimits), (sce::PACKET_LIMIT, 1, 1));
        let mut q = build("lfq_cobalt");
        let n = (0..1000).take_while(|&i| q.enqueue(pkt(1, 65_000, i, t), t) == Enqueued::Queued).count();
        assert_eq!(n as u64, sce::byte_limit(MTU, None) / 65_000);
        // A larger memlimit raises the byte bound (CAKE's max(limit x MTU, memlimit)).
        let mut q = build("lfq_cobalt memlimit 32mb");
        let n = (0..1000).take_while(|&i| q.enqueue(pkt(1, 65_000, i, t), t) == Enqueued::Queued).count();
        assert!(n as u64 > sce::byte_limit(MTU, None) / 65_000, "{n}");
    }

    /// `ready` (the set that takes the scan straight to the packet the kernel's walk would
    /// reach) equals a recount after every operation of a mixed run of flows and packet
    /// sizes, with memlimit drops, and every bulk packet before the scan pointer belongs to a
    /// skipped flow (the invariant that makes it exact); a single backlogged flow (always
    /// skipped after its first packet, the case that walked the whole queue) is served in
    /// order.
    #[test]
    fn ready_set_matches_a_recount() {
        let check = |q: &Lfq| {
            let mut want = std::collections::BTreeSet::new();
            let (mut i, mut before_scan) = (q.bulk.ends.head, q.bulk.scan != NIL);
            while i != NIL {
                let n = q.bulk.slab.get(i);
                let d = &q.flows[n.flow as usize];
                before_scan &= i != q.bulk.scan;
                if before_scan {
                    assert!(d.skip, "an unskipped flow's packet before the scan");
                }
                if !d.skip && d.bulk_head == i {
                    want.insert((n.seq, n.flow));
                }
                i = q.bulk.slab.next(i);
            }
            want
        };
        let mut q = build("lfq_cobalt memlimit 40000");
        let mut rng = Stream::new(7, "lfq-recount");
        let mut now = Time::from_secs(1);
        for i in 0..20_000u32 {
            now = now + Time(rng.next_u32() as u64 % 20_000);
            if rng.next_u32() % 5 < 3 {
                let len = [64, 500, 1514][rng.next_u32() as usize % 3];
                q.enqueue(pkt(rng.next_u32() % 6, len, i, now), now);
            } else {
                q.dequeue(now);
            }
            assert_eq!(q.ready, check(&q), "after operation {i}");
        }
        let mut q = build("lfq_cobalt");
        for i in 0..sce::PACKET_LIMIT as u32 {
            q.enqueue(pkt(1, 43, i, t0()), t0());
        }
        let seqs: Vec<u32> = (0..sce::PACKET_LIMIT).map(|_| q.dequeue(t0()).unwrap().tcp.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "FIFO order within the flow");
        assert!(q.ready.is_empty());
    }

    fn t0() -> Time {
        Time::from_secs(1)
    }
}
