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
//! The classes are served flow-count fair: after a class is served its deficit grows by the
//! other class's number of active flows, both deficits are reduced by their minimum, and
//! the class with the smaller deficit goes next (class 1 on a tie).
//!
//! Each has CAKE's deficit-mode shaper ([`super::shaper`]) and no packet limit (the kernel
//! sets `sch->limit` but never checks it). See docs/algorithms/sce-qdiscs.md.

use super::cobalt::{CobaltSce, SceParams, SceSignals, Share};
use super::sce::{self, SceTc};
use super::shaper::{Compensation, Shaper};
use super::{flow_bucket, BuildCtx, Enqueued, Params, Qdisc, QdiscConfig, QdiscStats};
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
            self.backlog -= s.pkt.wire_len as u64;
            return Some((s.pkt, s.flow, true));
        }
        while let Some(s) = self.bulk.pop_front() {
            let b = &mut self.backlogs[s.flow as usize];
            *b -= 1;
            if *b == 0 {
                self.active_flows -= 1;
            }
            if s.dummy {
                self.sparse_dummies -= 1;
                continue;
            }
            self.backlog -= s.pkt.wire_len as u64;
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
    hold_until: Option<Time>,
    stats: QdiscStats,
    sce_marks: u64,
}

impl Cnq {
    fn new(cfg: &CnqConfig, mut rng: Stream) -> Cnq {
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

    /// The class to serve (`cnq_dequeue`, "choose class to service"): class 1 if backlogged
    /// and its deficit is not above class 0's. An empty class 0 is never chosen while class 1
    /// has packets (the guard of the later chromi/sce version; without it the kernel version
    /// read can return nothing with packets queued).
    fn choose_class(&self) -> usize {
        match &self.classes[..] {
            [_] => 0,
            [c0, c1] => (c1.backlog != 0 && (c0.backlog == 0 || c0.deficit >= c1.deficit)) as usize,
            _ => unreachable!("one or two classes"),
        }
    }

    /// twin_codel_af's flow-fair class deficits after serving class `c`.
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
            let (mut pkt, flow, sparse) = self.classes[c].dequeue().expect("a class with a backlog has a packet");
            self.qlen -= 1;
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
                    self.stats.drops += 1;
                    continue;
                }
            }
            self.count_marks(sig);
            self.charge_class(c);
            self.shaper.advance(self.comp.adjusted_len(pkt.wire_len));
            // Decay one idle flow's AQM state (with class 0's parameters).
            let i = self.decay_index;
            if self.classes.iter().all(|k| k.backlogs[i] == 0) {
                self.cvars[i].queue_empty(&self.classes[0].params, now);
            }
            self.decay_index = (i + 1) % FLOWS;
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
        if self.kind == "cnq_codel_af" {
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
            c1.sce_target = Time((c1.ce_target.0 + 1) / 2);
        }
        let sce_only = SceTc { rtt: None, ..self.tc };
        vec![sce_only.apply(c0), sce_only.apply(c1)]
    }
}

impl QdiscConfig for CnqConfig {
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(Cnq::new(self, ctx.rng.clone()))
    }
}

/// `cnq_codel_af [bandwidth RATE | unlimited] [rtt TIME | PRESET] [sce | no-sce |
/// sce-thresh N] [overhead N | FRAMING ...] [mpu N]` (SCE off by default).
pub fn parse_cnq_codel_af(p: &mut Params) -> Result<Arc<dyn QdiscConfig>, String> {
    Ok(Arc::new(CnqConfig { kind: "cnq_codel_af", tc: sce::parse(p, false)? }))
}

/// `twin_codel_af`, the same parameters (SCE on by default: sce-thresh 4).
pub fn parse_twin_codel_af(p: &mut Params) -> Result<Arc<dyn QdiscConfig>, String> {
    Ok(Arc::new(CnqConfig { kind: "twin_codel_af", tc: sce::parse(p, false)? }))
}
