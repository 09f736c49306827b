//! Cheap Nasty Queuing with COBALT-SCE and Approximate Fairness: `cnq_codel_af` and its
//! two-class variant `twin_codel_af` (chromi/sce `net/sched/sch_cnq_codel_af.c`,
//! `sch_twin_codel_af.c`).
//!
//! One CNQ class ([`Class`]) is two FIFOs: **sparse** (strict priority) and **bulk**. Each of
//! 65536 hashed flows has a count of its packets in the bulk queue. A packet of a flow whose
//! count is zero goes to the sparse queue and a dummy clone of it to the bulk queue; the
//! count falls only when the dummy leaves the bulk queue (`enqueue_sparse`, `dequeue_bulk`).
//! So a flow is sparse while its packets are spaced more widely than the bulk queue's sojourn.
//! AQM applies to bulk packets only (a sparse dequeue decays the flow's AQM state), with the
//! sojourn weighted by the flow's share of the queue ([`cobalt::Share`]); the last packet of a
//! flow is never dropped. One idle flow's AQM state decays per dequeue (`decay_index`).
//!
//! `twin_codel_af` has two classes: class 1 takes packets with DSCP 4 (the legacy
//! "minimise delay" TOS 0x10) and runs the low-latency parameters (the normal ones / 5).
//! The classes are served flow-count fair: the class with the smaller deficit is served
//! (class 1 on a tie; the other one if a class is empty), its deficit grows by the other
//! class's number of active flows, and both deficits are reduced by their minimum. Dummies
//! at the head of a class's bulk queue are discarded as soon as no sparse packet is queued.
//! This follows the twin version with those fixes (chromi/sce@acc6ad66); the other stored
//! version (03a785e0) can starve a class whose only flow has a dummy at its bulk head.
//!
//! Each has CAKE's deficit-mode shaper ([`super::shaper`]). The kernel sets `sch->limit =
//! 10240` but never checks it; the model does ([`sce::PACKET_LIMIT`], with a byte bound of
//! [`sce::byte_limit`]): an arriving packet beyond either is dropped. Dummies do not count.
//! See docs/algorithms/sce-qdiscs.md.

use super::cobalt::{CobaltSce, SceParams, SceSignals, Share};
use super::sce::{self, SceTc};
use super::shaper::{Compensation, Shaper};
use super::{flow_bucket, BuildCtx, Enqueued, Qdisc, QdiscConfig, QdiscKind, QdiscStats};
#[cfg(test)]
use super::Params;
use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::Time;
use std::collections::VecDeque;
use std::sync::Arc;

/// Hashed flows (`CNQ_QUEUES`).
const FLOWS: usize = 65536;
/// The low-latency class's DSCP in twin_codel_af ("legacy minimise-delay codepoint").
const DSCP_LL: u8 = 4;
/// twin_codel_af's divisor of the low-latency class's times.
const LL_DIVISOR: u64 = 5;

/// A queued entry: a packet, or (bulk queue only) the dummy clone standing for a sparse one.
#[derive(Clone, Copy, Debug)]
struct Slot {
    pkt: Packet,
    flow: u16,
    dummy: bool,
}

/// One CNQ class (`struct cnq_class_data`; all of `cnq_sched_data` for `cnq_codel_af`).
#[derive(Debug)]
struct Class {
    sparse: VecDeque<Slot>,
    bulk: VecDeque<Slot>,
    /// Entries (packets and dummies) of each flow in the bulk queue (`backlogs[]`).
    backlogs: Vec<u32>,
    /// Flows with a non-zero `backlogs` entry.
    active_flows: u32,
    /// Packets in the sparse queue.
    active_sparse: u32,
    /// Dummies in the bulk queue.
    sparse_dummies: u32,
    /// Bytes of real packets.
    backlog: u64,
    /// Inter-class deficit (twin_codel_af).
    deficit: i64,
    params: SceParams,
}

impl Class {
    fn new(params: SceParams) -> Class {
        Class {
            sparse: VecDeque::with_capacity(256),
            bulk: VecDeque::with_capacity(1024),
            backlogs: vec![0; FLOWS],
            active_flows: 0,
            active_sparse: 0,
            sparse_dummies: 0,
            backlog: 0,
            deficit: 0,
            params,
        }
    }

    /// `enqueue_bulk`.
    fn push_bulk(&mut self, slot: Slot) {
        let b = &mut self.backlogs[slot.flow as usize];
        if *b == 0 {
            self.active_flows += 1;
        }
        *b += 1;
        self.bulk.push_back(slot);
    }

    /// `cnq_enqueue` for this class: to the bulk queue if the flow has entries there, else to
    /// the sparse queue with a dummy clone in the bulk queue (`enqueue_sparse`). Returns
    /// whether it went to the sparse queue. `Packet::queue` is set to `queue` (sparse) or
    /// `queue + 1` (bulk).
    fn enqueue(&mut self, mut pkt: Packet, flow: u16, queue: u8) -> bool {
        self.backlog += pkt.wire_len as u64;
        if self.backlogs[flow as usize] != 0 {
            pkt.queue = queue + 1;
            self.push_bulk(Slot { pkt, flow, dummy: false });
            return false;
        }
        pkt.queue = queue;
        self.push_bulk(Slot { pkt, flow, dummy: true });
        self.sparse_dummies += 1;
        self.sparse.push_back(Slot { pkt, flow, dummy: false });
        self.active_sparse += 1;
        true
    }

    /// `dequeue_sparse`, else `dequeue_bulk` (which discards the dummies it meets, each
    /// lowering its flow's count). Returns the packet, its flow and whether it was sparse.
    fn dequeue(&mut self) -> Option<(Packet, u16, bool)> {
        if let Some(s) = self.sparse.pop_front() {
            self.active_sparse -= 1;
            crate::qdisc::dec_backlog!(self.backlog, s.pkt.wire_len as u64, "cnq class backlog");
            return Some((s.pkt, s.flow, true));
        }
        while let Some(s) = self.bulk.pop_front() {
            let b = &mut self.backlogs[s.flow as usize];
            crate::qdisc::dec_backlog!(*b, 1, "cnq flow backlog");
            if *b == 0 {
                self.active_flows -= 1;
            }
            if s.dummy {
                self.sparse_dummies -= 1;
                continue;
            }
            crate::qdisc::dec_backlog!(self.backlog, s.pkt.wire_len as u64, "cnq class backlog");
            return Some((s.pkt, s.flow, false));
        }
        None
    }

    /// Active flows as the AQM's fair share counts them (`active_flows - sparse_dummies`:
    /// a flow whose only bulk entry is a dummy is not counted).
    fn bulk_flows(&self) -> u32 {
        self.active_flows.saturating_sub(self.sparse_dummies)
    }

    /// What serving this class adds to the other's deficit (twin_codel_af:
    /// `active_flows + active_sparse - sparse_dummies`).
    fn weight(&self) -> i64 {
        self.active_flows as i64 + self.active_sparse as i64 - self.sparse_dummies as i64
    }

    /// twin_codel_af's "try to drain the queue of dummy packets": while no sparse packet is
    /// queued, dummies at the head of the bulk queue are discarded at once (each lowering its
    /// flow's count), so that flows are counted by their real packets.
    fn drain_dummies(&mut self) {
        while self.sparse_dummies != 0 && self.active_sparse == 0 {
            match self.bulk.front() {
                Some(s) if s.dummy => {
                    let f = s.flow as usize;
                    self.bulk.pop_front();
                    crate::qdisc::dec_backlog!(self.backlogs[f], 1, "cnq flow backlog");
                    if self.backlogs[f] == 0 {
                        self.active_flows -= 1;
                    }
                    self.sparse_dummies -= 1;
                }
                _ => break,
            }
        }
    }
}

/// `cnq_codel_af` (one class) or `twin_codel_af` (two).
#[derive(Debug)]
pub struct Cnq {
    kind: &'static str,
    classes: Vec<Class>,
    /// Per-flow COBALT-SCE state, shared by the classes (`cvars[]`).
    cvars: Vec<CobaltSce>,
    decay_index: usize,
    shaper: Shaper,
    comp: Compensation,
    perturb: u32,
    rng: Stream,
    qlen: usize,
    /// Bytes the classes may hold ([`sce::byte_limit`]).
    byte_limit: u64,
    hold_until: Option<Time>,
    stats: QdiscStats,
    sce_marks: u64,
}

impl Cnq {
    fn new(cfg: &CnqConfig, mtu: u32, mut rng: Stream) -> Cnq {
        let classes = cfg.class_params().into_iter().map(Class::new).collect();
        let perturb = rng.next_u32();
        Cnq {
            kind: cfg.kind,
            classes,
            cvars: vec![CobaltSce::default(); FLOWS],
            decay_index: 0,
            shaper: Shaper::new(cfg.tc.bytes_per_sec()),
            comp: cfg.tc.comp,
            perturb,
            rng,
            qlen: 0,
            byte_limit: sce::byte_limit(mtu, None),
            hold_until: None,
            stats: QdiscStats::default(),
            sce_marks: 0,
        }
    }

    fn flow_of(&self, pkt: &Packet) -> u16 {
        flow_bucket(pkt.hash_key, self.perturb, FLOWS as u32) as u16
    }

    /// The class a packet belongs to: twin_codel_af sends DSCP 4 to class 1.
    fn class_of(&self, pkt: &Packet) -> usize {
        (self.classes.len() == 2 && pkt.dscp == DSCP_LL) as usize
    }

    /// The class to serve (`cnq_dequeue`, "choose class to service"): the backlogged one if
    /// only one is, else class 1 if its deficit is not above class 0's.
    fn choose_class(&self) -> usize {
        match &self.classes[..] {
            [_] => 0,
            [c0, c1] => (c1.backlog != 0 && (c0.backlog == 0 || c0.deficit >= c1.deficit)) as usize,
            _ => unreachable!("one or two classes"),
        }
    }

    /// twin_codel_af's flow-fair class deficits when class `c` is chosen (before its packet
    /// is dequeued, so again for each packet the AQM drops).
    fn charge_class(&mut self, c: usize) {
        if self.classes.len() < 2 {
            return;
        }
        let other = 1 - c;
        self.classes[c].deficit += self.classes[other].weight();
        let m = self.classes[0].deficit.min(self.classes[1].deficit);
        self.classes[0].deficit -= m;
        self.classes[1].deficit -= m;
    }

    fn count_marks(&mut self, sig: SceSignals) {
        self.stats.ce_marks += sig.ce_marked as u64;
        self.sce_marks += sig.sce_marked as u64;
    }
}

impl Qdisc for Cnq {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Enqueued {
        if self.qlen >= sce::PACKET_LIMIT || self.backlog_bytes() + pkt.wire_len as u64 > self.byte_limit {
            self.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        if self.qlen == 0 {
            self.shaper.unstale(now);
        }
        let c = self.class_of(&pkt);
        let flow = self.flow_of(&pkt);
        self.classes[c].enqueue(pkt, flow, (2 * c) as u8);
        self.qlen += 1;
        self.stats.enqueued += 1;
        Enqueued::Queued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.hold_until = None;
        loop {
            if self.qlen == 0 {
                return None;
            }
            if let Some(t) = self.shaper.held_until(now) {
                self.hold_until = Some(t);
                return None;
            }
            let c = self.choose_class();
            self.charge_class(c);
            let (mut pkt, flow, sparse) = self.classes[c].dequeue().expect("a class with a backlog has a packet");
            crate::qdisc::dec_backlog!(self.qlen, 1, "cnq qlen");
            let cls = &self.classes[c];
            let vars = &mut self.cvars[flow as usize];
            let mut sig = SceSignals::default();
            if sparse {
                vars.queue_empty(&cls.params, now);
            } else {
                let share = Share {
                    flow_backlog: cls.backlogs[flow as usize] + 1,
                    active_flows: cls.bulk_flows(),
                    total_backlog: self.qlen as u32 + 1,
                };
                sig = vars.should_drop(&cls.params, now, &mut pkt, share, &mut self.rng);
                // Drop, and try again with the next packet, unless it was the flow's last.
                if sig.drop && cls.backlogs[flow as usize] != 0 {
                    self.stats.drop(&pkt);
                    continue;
                }
            }
            self.count_marks(sig);
            self.shaper.advance(self.comp.adjusted_len(pkt.wire_len));
            // Decay one idle flow's AQM state (with class 0's parameters).
            let i = self.decay_index;
            if self.classes.iter().all(|k| k.backlogs[i] == 0) {
                self.cvars[i].queue_empty(&self.classes[0].params, now);
            }
            self.decay_index = (i + 1) % FLOWS;
            if self.classes.len() == 2 {
                self.classes.iter_mut().for_each(Class::drain_dummies);
            }
            self.stats.dequeued += 1;
            self.stats.dequeued_bytes += pkt.wire_len as u64;
            return Some(pkt);
        }
    }

    fn len(&self) -> usize {
        self.qlen
    }
    fn backlog_bytes(&self) -> u64 {
        self.classes.iter().map(|c| c.backlog).sum()
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
    /// The real packets (a sparse packet's dummy in the bulk queue is not one).
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        for c in &self.classes {
            c.sparse.iter().chain(c.bulk.iter()).filter(|s| !s.dummy).for_each(|s| f(&s.pkt));
        }
    }
    fn ready_at(&self) -> Option<Time> {
        self.hold_until
    }
    fn queue_names(&self) -> &'static [&'static str] {
        if self.classes.len() == 2 {
            &["sparse", "bulk", "ll_sparse", "ll_bulk"]
        } else {
            &["sparse", "bulk"]
        }
    }
    /// Cumulative SCE marks, bulk flows (as the AQM counts them) and the largest BLUE
    /// probability of any flow.
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        let p_max = self.cvars.iter().map(|v| v.blue.p_drop).max().unwrap_or(0);
        out.extend([
            ("sce_marks", self.sce_marks as f64),
            ("bulk_flows", self.classes.iter().map(|c| c.bulk_flows()).sum::<u32>() as f64),
            ("p_drop_max", p_max as f64 / 4_294_967_296.0),
        ]);
    }
}

/// Parsed `cnq_codel_af` / `twin_codel_af` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CnqConfig {
    kind: &'static str,
    tc: SceTc,
}

impl CnqConfig {
    /// COBALT-SCE parameters per class, as `cnq_init` then `cnq_change` set them.
    fn class_params(&self) -> Vec<SceParams> {
        let normal = SceParams::new();
        if self.kind == CNQ_CODEL_AF.name {
            return vec![self.tc.apply(normal)];
        }
        // twin_codel_af: SCE on by default (25 ms); the low-latency class's times are the
        // normal ones / 5 (20 ms, 1 ms, SCE 5 ms / 0.5 ms, BLUE 80 ms).
        let ms = Time::from_millis;
        let mut c0 = SceParams { sce_interval: Some(ms(25)), ..normal };
        let mut c1 = SceParams {
            ce_interval: ms(20),
            ce_target: ms(1),
            sce_interval: Some(ms(5)),
            sce_target: Time::from_micros(500),
            blue_thresh: ms(80),
            ..normal
        };
        // cnq_change: rtt and target go to class 0 as given and to class 1 divided by the
        // divisor (at least 1 ns); sce-thresh divides each class's own CE interval.
        if let Some((interval, target)) = self.tc.rtt {
            c0 = SceTc { sce: None, ..self.tc }.apply(c0);
            c1.ce_interval = Time(interval.0 / LL_DIVISOR).max(Time(1));
            c1.blue_thresh = Time(c1.ce_interval.0 * 4);
            c1.ce_target = Time(target.0 / LL_DIVISOR).max(Time(1));
            c1.sce_target = Time(c1.ce_target.0.div_ceil(2));
        }
        let sce_only = SceTc { rtt: None, ..self.tc };
        vec![sce_only.apply(c0), sce_only.apply(c1)]
    }
}

impl QdiscConfig for CnqConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(Cnq::new(self, ctx.mtu, ctx.rng.clone()))
    }
}

/// `cnq_codel_af [bandwidth RATE | unlimited] [rtt TIME | PRESET] [sce | no-sce |
/// sce-thresh N] [overhead N | FRAMING ...] [mpu N]` (SCE off by default).
pub const CNQ_CODEL_AF: QdiscKind = QdiscKind {
    name: "cnq_codel_af",
    doc: "SCE fork's Cooperative Non-Queue-building CoDel (chromi/sce sch_cnq_codel_af.c)",
    params: sce::PARAMS,
    build: |a| Ok(Arc::new(CnqConfig { kind: CNQ_CODEL_AF.name, tc: SceTc::from_args(a) })),
};

/// `twin_codel_af`, the same parameters (SCE on by default: sce-thresh 4).
pub const TWIN_CODEL_AF: QdiscKind = QdiscKind {
    name: "twin_codel_af",
    doc: "SCE fork's two-class CoDel with a low-latency class (chromi/sce sch_twin_codel_af.c)",
    params: sce::PARAMS,
    build: |a| Ok(Arc::new(CnqConfig { kind: TWIN_CODEL_AF.name, tc: SceTc::from_args(a) })),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::qdisc::QdiscSpec;

    fn build(s: &str) -> Cnq {
        let spec = QdiscSpec::parse(s).unwrap();
        let cfg = format!("{:?}", spec.config());
        let tokens: Vec<String> = s.split_whitespace().skip(1).map(str::to_string).collect();
        let tc = sce::parse(&mut Params::new("x", &tokens), false).unwrap();
        let kind = if s.starts_with("twin") { "twin_codel_af" } else { "cnq_codel_af" };
        assert!(cfg.contains(kind));
        Cnq::new(&CnqConfig { kind, tc }, 1514, Stream::new(1, "cnq-test"))
    }

    fn pkt(key: u32, len: u32, seq: u32, at: Time) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
        p.hash_key = key;
        p.tcp.seq = seq;
        p.enqueued_at = at;
        p.ecn = Ecn::Ect0;
        p
    }

    /// Dequeues at `now` (no shaper) and returns (key, seq, queue).
    fn next(q: &mut Cnq, now: Time) -> (u32, u32, u8) {
        let p = q.dequeue(now).expect("a packet");
        (p.hash_key, p.tcp.seq, p.queue)
    }

    /// A flow is sparse while its packets are spaced wider than the bulk queue's sojourn: its
    /// packet to an empty flow goes to the sparse queue (served first) with a dummy in the
    /// bulk queue; until the dummy has left the bulk queue, the flow's packets go to bulk.
    #[test]
    fn dummy_clone_rule_classifies_sparse_and_bulk() {
        let mut q = build("cnq_codel_af");
        let t = Time::from_secs(1);
        // Flow A: 4 packets; its first is sparse (with a dummy), the rest bulk.
        for i in 0..4 {
            q.enqueue(pkt(1, 1514, i, t), t);
        }
        let c = &q.classes[0];
        assert_eq!((c.sparse.len(), c.bulk.len(), c.sparse_dummies, c.active_flows), (1, 4, 1, 1));
        // Flow B arrives: sparse, and goes before A's bulk packets.
        q.enqueue(pkt(2, 100, 0, t), t);
        assert_eq!(next(&mut q, t), (1, 0, 0));
        assert_eq!(next(&mut q, t), (2, 0, 0), "B's sparse packet jumps A's bulk backlog");
        // B's dummy is still queued behind A's packets: B's next packet is bulk.
        q.enqueue(pkt(2, 100, 1, t), t);
        assert_eq!(q.classes[0].sparse.len(), 0);
        // Both flows have a dummy in the bulk queue, and active_flows - sparse_dummies counts
        // neither (as the kernel's fair-share divisor does).
        let c = &q.classes[0];
        assert_eq!((c.active_flows, c.sparse_dummies, c.bulk_flows()), (2, 2, 0));
        // Bulk order: A's dummy, A1..A3, B's dummy, B1.
        for seq in 1..4 {
            assert_eq!(next(&mut q, t), (1, seq, 1));
        }
        assert_eq!(next(&mut q, t), (2, 1, 1));
        assert!(q.is_empty());
        let c = &q.classes[0];
        assert_eq!((c.sparse_dummies, c.active_flows, c.active_sparse, c.backlog), (0, 0, 0, 0));
        // Now that its dummy has gone, B is sparse again.
        q.enqueue(pkt(1, 1514, 9, t), t);
        q.enqueue(pkt(1, 1514, 10, t), t);
        q.enqueue(pkt(2, 100, 2, t), t);
        assert_eq!(q.classes[0].sparse.len(), 2);
    }

    /// The AQM runs on bulk packets with the sojourn weighted by the flow's share; sparse
    /// packets are never signalled, and a flow's last packet is never dropped.
    #[test]
    fn aqm_weights_bulk_packets_and_spares_sparse_and_last_packets() {
        let mut q = build("cnq_codel_af");
        let t0 = Time::from_secs(1);
        // Two Not-ECT flows with 20 ms of sojourn; flow 1 holds 30 packets, flow 2 holds 3.
        for i in 0..30 {
            let mut p = pkt(1, 1514, i, t0);
            p.ecn = Ecn::NotEct;
            q.enqueue(p, t0);
        }
        for i in 0..3 {
            let mut p = pkt(2, 1514, i, t0);
            p.ecn = Ecn::NotEct;
            q.enqueue(p, t0);
        }
        // Mark both flows' COBALT state as used (1/sqrt cached at 1.0).
        for k in [1, 2] {
            let f = q.flow_of(&pkt(k, 0, 0, t0)) as usize;
            q.cvars[f].ce.isqrt = u32::MAX;
            q.cvars[f].ce.next = t0;
        }
        let now = t0 + Time::from_millis(20);
        let mut got = vec![];
        while let Some(p) = q.dequeue(now + Time::from_micros(got.len() as u64)) {
            got.push((p.hash_key, p.tcp.seq, p.queue));
        }
        // Sparse heads of both flows first, untouched.
        assert_eq!(&got[..2], &[(1, 0, 0), (2, 0, 0)]);
        let drops = q.stats().drops;
        assert_eq!(got.len() as u64 + drops, 33);
        assert!(drops >= 1, "flow 1, 30/33 of the queue with 2 flows, is far over target");
        // Flow 2 (3 packets, below its fair share of 16.5) sees no signal; each flow's last
        // packet is delivered.
        assert_eq!(got.iter().filter(|g| g.0 == 2).count(), 3);
        assert!(got.contains(&(1, 29, 1)));
    }

    /// twin_codel_af: DSCP 4 selects the low-latency class; the classes are served in
    /// proportion to their flow counts (after serving a class its deficit grows by the other
    /// class's active flows).
    #[test]
    fn twin_selects_ll_class_by_dscp_and_shares_by_flow_count() {
        let mut q = build("twin_codel_af");
        let t = Time::from_secs(1);
        let with_dscp = |key, dscp, seq| {
            let mut p = pkt(key, 1000, seq, t);
            p.dscp = dscp;
            p
        };
        // Three normal flows and one DSCP 4 flow, all backlogged.
        for i in 0..200 {
            for k in 1..=3 {
                q.enqueue(with_dscp(k, 0, i), t);
            }
            q.enqueue(with_dscp(9, 4, i), t);
        }
        assert_eq!(q.classes[1].bulk.len(), 200, "DSCP 4 went to class 1");
        let mut per_class = [0u32; 2];
        for _ in 0..400 {
            let p = q.dequeue(t).unwrap();
            assert_eq!(p.dscp == 4, p.queue >= 2);
            per_class[(p.queue >= 2) as usize] += 1;
        }
        // Class 0 has 3 active flows, class 1 one: 3 : 1 (one packet each per round).
        assert!((per_class[0] as i32 - 300).abs() <= 3, "{per_class:?}");
        // Low-latency parameters: CE 1 ms / 20 ms, SCE 0.5 ms / 5 ms, BLUE 80 ms.
        let ll = q.classes[1].params;
        let ms = Time::from_millis;
        assert_eq!((ll.ce_target, ll.ce_interval, ll.sce_interval, ll.blue_thresh), (ms(1), ms(20), Some(ms(5)), ms(80)));
        assert_eq!(q.classes[0].params.sce_interval, Some(ms(25)));
        // An empty class 0 is not chosen while class 1 has packets, whatever the deficits.
        let mut q = build("twin_codel_af");
        q.classes[1].deficit = 5;
        q.enqueue(with_dscp(9, 4, 0), t);
        assert!(q.dequeue(t).is_some());
    }

    #[test]
    fn tc_strings_of_the_test_suites_and_defaults() {
        let d = |s: &str| build(s).classes.iter().map(|c| c.params).collect::<Vec<_>>();
        let ms = Time::from_millis;
        // l4s-tests: RFC 3168-only AQM (SCE off).
        let c = d("cnq_codel_af bandwidth 50Mbit");
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].ce_target, c[0].ce_interval, c[0].sce_interval, c[0].blue_thresh), (ms(5), ms(100), None, ms(400)));
        assert_eq!(build("cnq_codel_af bandwidth 50Mbit").shaper.rate().duration(1), Time(160));
        // sce-l4s-ect1.
        let t = d("twin_codel_af bandwidth 50Mbit sce-thresh 4");
        assert_eq!((t[0].sce_interval, t[0].sce_target, t[1].sce_interval), (Some(ms(25)), Time::from_micros(2500), Some(ms(5))));
        let t = d("twin_codel_af rtt 50ms sce-thresh 2");
        assert_eq!((t[0].ce_interval, t[0].ce_target, t[0].sce_interval, t[0].blue_thresh), (ms(50), Time::from_micros(2500), Some(ms(25)), ms(200)));
        assert_eq!((t[1].ce_interval, t[1].ce_target, t[1].sce_interval, t[1].sce_target), (ms(10), Time::from_micros(500), Some(ms(5)), Time::from_micros(250)));
        assert!(build("cnq_codel_af").shaper.unlimited());
        assert!(QdiscSpec::parse("twin_codel_af sce-thresh four").unwrap_err().contains("sce-thresh"));
        assert!(QdiscSpec::parse("cnq_codel_af limit 100").unwrap_err().contains("'limit'"));
        let mut v = vec![];
        build("twin_codel_af").xstats(&mut v);
        assert_eq!(v.iter().map(|x| x.0).collect::<Vec<_>>(), ["sce_marks", "bulk_flows", "p_drop_max"]);
    }

    /// Issue 14: 1-byte UDP at 100 Mbit/s grew these queues to 1 GB in a second (the kernel
    /// never checks `sch->limit`). The model holds at most 10240 packets (dummies not counted)
    /// and 10240 MTUs of bytes, dropping the arriving packet beyond them.
    #[test]
    fn queues_are_bounded_in_packets_and_bytes() {
        let t = Time::from_secs(1);
        for kind in ["cnq_codel_af", "twin_codel_af"] {
            let mut q = build(kind);
            for i in 0..sce::PACKET_LIMIT as u32 {
                // Many flows, both classes of twin: sparse packets and their dummies too.
                let mut p = pkt(i % 7, 43, i, t);
                p.dscp = if i % 3 == 0 { DSCP_LL } else { 0 };
                assert_eq!(q.enqueue(p, t), Enqueued::Queued, "{kind} packet {i}");
            }
            assert_eq!(q.enqueue(pkt(99, 43, 0, t), t), Enqueued::Dropped, "{kind}");
            assert_eq!((q.len(), q.stats().drops, q.stats().overlimits), (sce::PACKET_LIMIT, 1, 1), "{kind}");
            // Room again after a dequeue.
            q.dequeue(t).unwrap();
            assert_eq!(q.enqueue(pkt(99, 43, 1, t), t), Enqueued::Queued, "{kind}");
            // Bytes: 64 KB GSO packets hit 10240 x 1514 bytes first (236 of them).
            let mut q = build(kind);
            let n = (0..1000).take_while(|&i| q.enqueue(pkt(1, 65_000, i, t), t) == Enqueued::Queued).count();
            assert_eq!(n as u64, sce::byte_limit(1514, None) / 65_000, "{kind}");
            assert!(q.backlog_bytes() <= sce::byte_limit(1514, None));
        }
    }
}
