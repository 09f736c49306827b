//! CAKE, Common Applications Kept Enhanced (Linux `net/sched/sch_cake.c`, read as of v6.18;
//! tc syntax from iproute2 `tc/q_cake.c` and tc-cake(8)).
//!
//! What is modelled, per the kernel functions named:
//! - `cake_hash`: flows go to 1024 queues per tin through an 8-way set-associative hash of
//!   `Packet::hash_key` perturbed by a value drawn from the discipline's stream; host slots
//!   (1024, also 8-way) count bulk flows per source and destination host
//!   (`Packet::src_host`/`dst_host`) for triple-isolate, dual-srchost and dual-dsthost.
//! - `cake_enqueue` / `cake_dequeue`: DRR++ with new (sparse), old (bulk) and decaying flow
//!   lists, the sparse-wait state, host-load-scaled quantum with random dithering
//!   (`cake_get_flow_quantum`), COBALT per queue ([`super::cobalt`]), the last packet of a
//!   queue never dropped by the AQM.
//! - `cake_advance_shaper`: deficit-mode (virtual clock) shaper, global and per tin, in the
//!   kernel's fixed-point time-per-byte; framing compensation (`cake_calc_overhead`:
//!   overhead, mpu, ATM cells, PTM 64b/65b). The link retries when the shaper holds packets
//!   ([`Qdisc::ready_at`]).
//! - `cake_drop`: over the memory limit, the queue with the largest byte backlog (over all
//!   tins) is head-dropped, and its BLUE is raised (`cobalt_queue_full`).
//! - Tins: `besteffort` (one tin) and `diffserv3` (the kernel default: Best Effort, Bulk for
//!   LE/CS1 at 1/16 of the rate, Voice for TOS4/VA/EF/CS6/CS7 at 1/4), with the shaped-mode
//!   tin choice (highest-priority tin on schedule, else the earliest) and the unlimited-mode
//!   tin DRR (`tin_quantum`).
//!
//! See docs/algorithms/cake.md for what is not modelled.

use super::cobalt::{self, Cobalt, Verdict};
use super::shaper::{self, Compensation, CompensationParser, Framing, Shaper, TimePerByte};
use super::slab::{Ends, Slab};
use super::{Args, BuildCtx, Enqueued, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Type, Value};
use crate::profile::Stack;
use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::{Rate, Time};
use std::sync::Arc;

/// Queues per tin (`CAKE_QUEUES`).
const QUEUES: usize = 1024;
/// Associativity of the flow and host hash tables (`CAKE_SET_WAYS`).
const SET_WAYS: usize = 8;
/// `cake_set_rate`'s flow quantum cap (a full Ethernet frame, hard-coded in Linux).
const MAX_FLOW_QUANTUM: u64 = 1514;
const MIN_FLOW_QUANTUM: u64 = 300;
/// `sch->limit` set by `cake_init`; it only caps the memory limit (limit x MTU).
const PACKET_LIMIT: u64 = 10240;

/// Flow-isolation modes, as Linux's `CAKE_FLOW_*` bits (src host 1, dst host 2, flows 4).
const FLOW_NONE: u8 = 0;
const FLOW_FLOWS: u8 = 4;
const FLOW_DUAL_SRC: u8 = 5;
const FLOW_DUAL_DST: u8 = 6;
const FLOW_TRIPLE: u8 = 7;

fn dual_src(mode: u8) -> bool {
    mode & FLOW_DUAL_SRC == FLOW_DUAL_SRC
}
fn dual_dst(mode: u8) -> bool {
    mode & FLOW_DUAL_DST == FLOW_DUAL_DST
}

/// Priority-tin layouts (`CAKE_DIFFSERV_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TinMode {
    BestEffort,
    Diffserv3,
}

impl TinMode {
    /// `tin_index[dscp]` (`cake_select_tin`): the `diffserv3` table sends LE (1) and CS1 (8)
    /// to Bulk, TOS4 (4), VA (44), EF (46), CS6 (48) and CS7 (56) to Voice.
    fn tin(self, dscp: u8) -> usize {
        match (self, dscp & 63) {
            (TinMode::BestEffort, _) => 0,
            (TinMode::Diffserv3, 1 | 8) => 1,
            (TinMode::Diffserv3, 4 | 44 | 46 | 48 | 56) => 2,
            (TinMode::Diffserv3, _) => 0,
        }
    }
    /// (rate shift, tin_quantum) per tin (`cake_config_besteffort`, `cake_config_diffserv3`).
    fn tins(self) -> &'static [(u32, i32)] {
        match self {
            TinMode::BestEffort => &[(0, 65535)],
            TinMode::Diffserv3 => &[(0, 1024), (4, 64), (2, 256)],
        }
    }
    fn names(self) -> &'static [&'static str] {
        match self {
            TinMode::BestEffort => &["BestEffort"],
            TinMode::Diffserv3 => &["BestEffort", "Bulk", "Voice"],
        }
    }
}

/// Which set a queue is in (`CAKE_SET_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlowSet {
    None,
    Sparse,
    /// Counted as sparse but rotating in the bulk list.
    SparseWait,
    Bulk,
    Decaying,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListId {
    New = 0,
    Old = 1,
    Decaying = 2,
}

const NO_FLOW: u16 = u16::MAX;

/// One queue (`struct cake_flow` plus its backlog and the intrusive list links).
#[derive(Clone, Copy, Debug)]
struct Flow {
    /// The queued packets, a list in the shared slab.
    q: Ends,
    backlog: u32,
    deficit: i32,
    dropped: u32,
    cvars: Cobalt,
    srchost: u16,
    dsthost: u16,
    set: FlowSet,
    list: Option<ListId>,
    prev: u16,
    next: u16,
}

impl Default for Flow {
    fn default() -> Flow {
        Flow {
            q: Ends::default(),
            backlog: 0,
            deficit: 0,
            dropped: 0,
            cvars: Cobalt::default(),
            srchost: 0,
            dsthost: 0,
            set: FlowSet::None,
            list: None,
            prev: NO_FLOW,
            next: NO_FLOW,
        }
    }
}

/// `struct cake_host`.
#[derive(Clone, Copy, Debug, Default)]
struct Host {
    src_tag: u32,
    dst_tag: u32,
    src_bulk: u16,
    dst_bulk: u16,
}

#[derive(Clone, Copy, Debug)]
struct List {
    head: u16,
    tail: u16,
}

/// One priority tin (`struct cake_tin_data`).
#[derive(Debug)]
struct Tin {
    flows: Vec<Flow>,
    tags: Vec<u32>,
    hosts: Vec<Host>,
    lists: [List; 3],
    flow_quantum: u32,
    cparams: cobalt::Params,
    rate: TimePerByte,
    tin_quantum: i32,
    tin_deficit: i32,
    time_next_packet: Time,
    backlog: u64,
    sparse: u32,
    bulk: u32,
    decaying: u32,
    unresponsive: u32,
    // tc -s statistics.
    ecn_marks: u64,
    dropped: u64,
    avg_delay: u64,
    peak_delay: u64,
    base_delay: u64,
    way_directs: u64,
    way_hits: u64,
    way_misses: u64,
    way_collisions: u64,
}

/// `cake_ewma`.
fn ewma(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

impl Tin {
    /// `cake_set_rate`: the tin's shaper rate and its COBALT parameters, auto-tuned so that
    /// target is at least 1.5 MTU times and interval grows by the same amount.
    fn new(bytes_per_sec: u64, mtu: u32, target: Time, rtt: Time, tin_quantum: i32) -> Tin {
        let rate = TimePerByte::new(bytes_per_sec);
        let flow_quantum = if bytes_per_sec == 0 { MAX_FLOW_QUANTUM } else { (bytes_per_sec >> 12).clamp(MIN_FLOW_QUANTUM, MAX_FLOW_QUANTUM) };
        let mtu_time = rate.duration(mtu);
        let tin_target = (mtu_time.mul_div(3, 2)).max(target);
        let interval = (rtt + tin_target - target).max(tin_target.mul_div(2, 1));
        Tin {
            flows: vec![Flow::default(); QUEUES],
            tags: vec![0; QUEUES],
            hosts: vec![Host::default(); QUEUES],
            lists: [List { head: NO_FLOW, tail: NO_FLOW }; 3],
            flow_quantum: flow_quantum as u32,
            cparams: cobalt::Params::new(tin_target, interval, mtu_time),
            rate,
            tin_quantum,
            tin_deficit: 0,
            time_next_packet: Time::ZERO,
            backlog: 0,
            sparse: 0,
            bulk: 0,
            decaying: 0,
            unresponsive: 0,
            ecn_marks: 0,
            dropped: 0,
            avg_delay: 0,
            peak_delay: 0,
            base_delay: 0,
            way_directs: 0,
            way_hits: 0,
            way_misses: 0,
            way_collisions: 0,
        }
    }

    fn active(&self) -> bool {
        self.sparse + self.bulk != 0
    }

    fn first(&self, l: ListId) -> Option<usize> {
        let h = self.lists[l as usize].head;
        (h != NO_FLOW).then_some(h as usize)
    }

    fn unlink(&mut self, f: usize) {
        let Some(l) = self.flows[f].list.take() else { return };
        let (prev, next) = (self.flows[f].prev, self.flows[f].next);
        match prev {
            NO_FLOW => self.lists[l as usize].head = next,
            p => self.flows[p as usize].next = next,
        }
        match next {
            NO_FLOW => self.lists[l as usize].tail = prev,
            n => self.flows[n as usize].prev = prev,
        }
    }

    /// `list_move_tail` (also `list_add_tail` for a queue on no list).
    fn move_tail(&mut self, f: usize, l: ListId) {
        self.unlink(f);
        let tail = self.lists[l as usize].tail;
        let flow = &mut self.flows[f];
        flow.list = Some(l);
        flow.prev = tail;
        flow.next = NO_FLOW;
        match tail {
            NO_FLOW => self.lists[l as usize].head = f as u16,
            t => self.flows[t as usize].next = f as u16,
        }
        self.lists[l as usize].tail = f as u16;
    }

    /// `cake_inc_{src,dst}host_bulk_flow_count` (saturating at the number of queues).
    fn host_bulk_inc(&mut self, f: usize, mode: u8) {
        let (s, d) = (self.flows[f].srchost as usize, self.flows[f].dsthost as usize);
        if dual_src(mode) && (self.hosts[s].src_bulk as usize) < QUEUES {
            self.hosts[s].src_bulk += 1;
        }
        if dual_dst(mode) && (self.hosts[d].dst_bulk as usize) < QUEUES {
            self.hosts[d].dst_bulk += 1;
        }
    }

    /// `cake_dec_{src,dst}host_bulk_flow_count` (saturating at zero).
    fn host_bulk_dec(&mut self, f: usize, mode: u8) {
        let (s, d) = (self.flows[f].srchost as usize, self.flows[f].dsthost as usize);
        if dual_src(mode) {
            self.hosts[s].src_bulk = self.hosts[s].src_bulk.saturating_sub(1);
        }
        if dual_dst(mode) {
            self.hosts[d].dst_bulk = self.hosts[d].dst_bulk.saturating_sub(1);
        }
    }

    /// `cake_get_flow_quantum`: the flow quantum divided by the larger bulk-flow count of the
    /// flow's two hosts (`quantum_div[n] = 65535 / n`), dithered by a random 16-bit value.
    fn flow_quantum_for(&self, f: usize, mode: u8, rng: &mut Stream) -> i32 {
        let flow = &self.flows[f];
        let mut load: u32 = 1;
        if dual_src(mode) {
            load = load.max(self.hosts[flow.srchost as usize].src_bulk as u32);
        }
        if dual_dst(mode) {
            load = load.max(self.hosts[flow.dsthost as usize].dst_bulk as u32);
        }
        let div = 65535 / load;
        ((self.flow_quantum * div + (rng.next_u32() >> 16)) >> 16) as i32
    }

    /// Finds or allocates the host slot for `hash` in the set of `hash % QUEUES`
    /// (`cake_hash`, host part): a slot tagged with this host, else one with no bulk flows,
    /// else the home slot.
    fn host_slot(&mut self, hash: u32, src: bool) -> u16 {
        let home = hash as usize % QUEUES;
        let (outer, inner) = (home - home % SET_WAYS, home % SET_WAYS);
        let tag = |h: &Host| if src { h.src_tag } else { h.dst_tag };
        let bulk = |h: &Host| if src { h.src_bulk } else { h.dst_bulk };
        let ways = (0..SET_WAYS).map(|i| outer + (inner + i) % SET_WAYS);
        if let Some(k) = ways.clone().find(|&k| tag(&self.hosts[k]) == hash) {
            return k as u16;
        }
        let k = ways.clone().find(|&k| bulk(&self.hosts[k]) == 0).unwrap_or(home);
        if src {
            self.hosts[k].src_tag = hash;
        } else {
            self.hosts[k].dst_tag = hash;
        }
        k as u16
    }

    /// `cake_hash`, queue part: the queue for `flow_hash` in the 8-way set of its home slot.
    /// A queue already tagged with this hash keeps it; else an unused queue in the set is
    /// taken; else the flow shares its home queue (a collision).
    fn queue_for(&mut self, mode: u8, flow_hash: u32, src_hash: u32, dst_hash: u32) -> usize {
        if mode == FLOW_NONE {
            return 0;
        }
        let home = flow_hash as usize % QUEUES;
        if self.tags[home] == flow_hash && self.flows[home].set != FlowSet::None {
            self.way_directs += 1;
            return home;
        }
        let (outer, inner) = (home - home % SET_WAYS, home % SET_WAYS);
        let ways = (0..SET_WAYS).map(|i| outer + (inner + i) % SET_WAYS);
        let mut allocate = true;
        let q = if let Some((i, k)) = ways.clone().enumerate().find(|&(_, k)| self.tags[k] == flow_hash) {
            if i > 0 {
                self.way_hits += 1;
            }
            // A queue still reserved for this flow keeps its host slots while in use.
            allocate = self.flows[k].set == FlowSet::None;
            k
        } else if let Some(k) = ways.clone().find(|&k| self.flows[k].set == FlowSet::None) {
            self.way_misses += 1;
            k
        } else {
            self.way_collisions += 1;
            if self.flows[home].set == FlowSet::Bulk {
                self.host_bulk_dec(home, mode);
            }
            home
        };
        self.tags[q] = flow_hash;
        if allocate {
            if dual_src(mode) {
                self.flows[q].srchost = self.host_slot(src_hash, true);
            }
            if dual_dst(mode) {
                self.flows[q].dsthost = self.host_slot(dst_hash, false);
            }
            // A bulk queue taken over by a colliding flow counts towards its new hosts.
            if self.flows[q].set == FlowSet::Bulk {
                self.host_bulk_inc(q, mode);
            }
        }
        q
    }
}

/// A queued packet in the shared slab; queues are singly linked lists of slots.
#[derive(Clone, Copy, Debug)]
struct Slot {
    pkt: Packet,
    /// Length as the shaper counts it (`cobalt_skb_cb.adjusted_len`).
    adj_len: u32,
}

/// murmur3's 32-bit finaliser: a bijective mix.
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// CAKE.
#[derive(Debug)]
pub struct Cake {
    cfg: CakeConfig,
    tins: Vec<Tin>,
    slab: Slab<Slot>,
    qlen: usize,
    backlog: u64,
    /// Memory in use and its limit (`buffer_used`, `buffer_limit`), counted in wire bytes.
    buffer_used: u64,
    buffer_limit: u64,
    /// Global shaper (`rate_ns`, `time_next_packet`).
    shaper: Shaper,
    cur_tin: usize,
    /// Hash perturbation, drawn once at build (stands for the kernel's random flow-hash key).
    perturb: u32,
    rng: Stream,
    /// When the last dequeue returned nothing because the shaper held packets back.
    hold_until: Option<Time>,
    stats: QdiscStats,
}

impl Cake {
    fn new(cfg: CakeConfig, mtu: u32, mut rng: Stream) -> Cake {
        let bytes_per_sec = cfg.bandwidth.map_or(0, |r| r.bits_per_sec() / 8);
        let tins: Vec<Tin> =
            cfg.tin_mode.tins().iter().map(|&(shift, quantum)| Tin::new(bytes_per_sec >> shift, mtu, cfg.target, cfg.rtt, quantum)).collect();
        // cake_reconfigure: 4 x rate x rtt (at least 4 MiB) when shaped, capped by limit x MTU.
        let auto = match (cfg.memlimit, bytes_per_sec) {
            (Some(m), _) => m,
            (None, 0) => u32::MAX as u64,
            (None, r) => ((r as u128 * cfg.rtt.as_micros() as u128 / 250_000) as u64).max(4 << 20),
        };
        let buffer_limit = auto.min((PACKET_LIMIT * mtu as u64).max(cfg.memlimit.unwrap_or(0)));
        let perturb = rng.next_u32();
        Cake {
            shaper: Shaper::new(bytes_per_sec),
            tins,
            slab: Slab::with_capacity(1024),
            qlen: 0,
            backlog: 0,
            buffer_used: 0,
            buffer_limit,
            cur_tin: 0,
            perturb,
            rng,
            hold_until: None,
            stats: QdiscStats::default(),
            cfg,
        }
    }

    /// The flow hash of a packet, and its source and destination host hashes. Without
    /// addresses every flow is its own host pair.
    /// Flow, source-host and destination-host hashes (Linux hashes the 5-tuple and the
    /// addresses).
    fn hashes(&self, pkt: &Packet) -> (u32, u32, u32) {
        (self.hash(pkt.hash_key, 0), self.hash(pkt.src_host as u32, 0x5352_4348), self.hash(pkt.dst_host as u32, 0x4453_5448))
    }
    fn hash(&self, key: u32, salt: u32) -> u32 {
        mix32(mix32(key ^ salt) ^ self.perturb)
    }

    /// `cake_classify`: (tin, queue) for a packet.
    fn classify(&mut self, pkt: &Packet) -> (usize, usize) {
        let t = self.cfg.tin_mode.tin(pkt.dscp);
        let (fh, sh, dh) = self.hashes(pkt);
        (t, self.tins[t].queue_for(self.cfg.flow_mode, fh, sh, dh))
    }

    /// `cake_calc_overhead`: the length the shaper and the DRR deficits count.
    fn adjusted_len(&self, wire_len: u32) -> u32 {
        let c = &self.cfg;
        Compensation { overhead: c.overhead, overhead_flag: c.overhead_flag, mpu: c.mpu, framing: c.framing }.adjusted_len(wire_len)
    }

    fn push(&mut self, t: usize, f: usize, pkt: Packet, adj_len: u32) {
        let len = pkt.wire_len;
        let tin = &mut self.tins[t];
        let flow = &mut tin.flows[f];
        self.slab.push_back(&mut flow.q, Slot { pkt, adj_len });
        flow.backlog += len;
        tin.backlog += len as u64;
        self.backlog += len as u64;
        self.buffer_used += len as u64;
        self.qlen += 1;
    }

    /// `cake_dequeue_one` / `dequeue_head`: the head packet of a queue.
    fn pop(&mut self, t: usize, f: usize) -> Option<(Packet, u32)> {
        let tin = &mut self.tins[t];
        let flow = &mut tin.flows[f];
        let slot = self.slab.pop_front(&mut flow.q)?;
        let len = slot.pkt.wire_len;
        crate::qdisc::dec_backlog!(flow.backlog, len, "cake flow backlog");
        crate::qdisc::dec_backlog!(tin.backlog, len as u64, "cake tin backlog");
        crate::qdisc::dec_backlog!(self.backlog, len as u64, "cake backlog");
        crate::qdisc::dec_backlog!(self.buffer_used, len as u64, "cake buffer_used");
        crate::qdisc::dec_backlog!(self.qlen, 1, "cake qlen");
        Some((slot.pkt, slot.adj_len))
    }

    /// `cake_drop`: head-drops one packet from the queue with the largest byte backlog and
    /// raises its BLUE. Returns the (tin, queue) pruned.
    fn drop_fattest(&mut self, now: Time) -> (usize, usize) {
        let mut fattest = (0, 0, 0);
        for (t, tin) in self.tins.iter().enumerate() {
            for (f, flow) in tin.flows.iter().enumerate() {
                if flow.backlog > fattest.2 {
                    fattest = (t, f, flow.backlog);
                }
            }
        }
        let (t, f, _) = fattest;
        let (dropped, _) = self.pop(t, f).expect("over the memory limit with nothing queued");
        let tin = &mut self.tins[t];
        if tin.flows[f].cvars.queue_full(&tin.cparams, now) {
            tin.unresponsive += 1;
        }
        tin.flows[f].dropped += 1;
        tin.dropped += 1;
        self.stats.overlimit_drop(&dropped);
        (t, f)
    }

    /// The tin to serve (`cake_dequeue`, "Choose a class to work on").
    fn choose_tin(&mut self, now: Time) -> Option<usize> {
        if self.shaper.unlimited() {
            // Weighted DRR between tins.
            let (mut wrapped, mut empty) = (false, true);
            loop {
                let tin = &mut self.tins[self.cur_tin];
                if tin.tin_deficit >= 0 && tin.active() {
                    return Some(self.cur_tin);
                }
                if tin.tin_deficit <= 0 {
                    tin.tin_deficit += tin.tin_quantum;
                }
                if tin.active() {
                    empty = false;
                }
                self.cur_tin += 1;
                if self.cur_tin == self.tins.len() {
                    self.cur_tin = 0;
                    if wrapped && empty {
                        return None;
                    }
                    wrapped = true;
                }
            }
        }
        // Shaped: the highest-priority (last) tin whose schedule has come, else the earliest.
        let mut best: Option<(usize, i128)> = None;
        for (t, tin) in self.tins.iter().enumerate().filter(|(_, tin)| tin.active()) {
            let wait = tin.time_next_packet.0 as i128 - now.0 as i128;
            if wait <= 0 || best.is_none_or(|(_, b)| wait <= b) {
                best = Some((t, wait));
            }
        }
        self.cur_tin = best?.0;
        Some(self.cur_tin)
    }

    /// Moves a queue found empty at dequeue to the decaying list while its COBALT state is
    /// not at rest, else off all lists (`cake_dequeue`, "this queue was actually empty").
    fn retire(&mut self, t: usize, f: usize, now: Time) {
        let mode = self.cfg.flow_mode;
        let tin = &mut self.tins[t];
        if tin.flows[f].cvars.queue_empty(&tin.cparams, now) {
            tin.unresponsive = tin.unresponsive.saturating_sub(1);
        }
        let set = tin.flows[f].set;
        if set == FlowSet::Bulk {
            tin.bulk -= 1;
            tin.host_bulk_dec(f, mode);
        } else if matches!(set, FlowSet::Sparse | FlowSet::SparseWait) {
            tin.sparse -= 1;
        } else {
            tin.decaying -= 1;
        }
        if tin.flows[f].cvars.is_active(now) {
            tin.move_tail(f, ListId::Decaying);
            tin.decaying += 1;
            tin.flows[f].set = FlowSet::Decaying;
        } else {
            tin.unlink(f);
            tin.flows[f].set = FlowSet::None;
        }
    }

    /// Charges a sent packet to the tin and global shaper (`cake_advance_shaper`).
    fn advance_shaper(&mut self, t: usize, len: u32, now: Time) {
        if self.shaper.unlimited() {
            return;
        }
        let tin = &mut self.tins[t];
        let tin_dur = tin.rate.duration(len);
        if tin.time_next_packet < now {
            tin.time_next_packet += tin_dur;
        } else if tin.time_next_packet < now + tin_dur {
            tin.time_next_packet = now + tin_dur;
        }
        self.shaper.advance(len);
    }
}

impl Qdisc for Cake {
    fn kind(&self) -> &'static str {
        CAKE.name
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        let (t, f) = self.classify(&pkt);
        // Ensure the shaper state is not stale.
        if self.tins[t].backlog == 0 {
            let tin = &mut self.tins[t];
            tin.time_next_packet = tin.time_next_packet.max(now);
            if self.qlen == 0 {
                self.shaper.unstale(now);
            }
        }
        pkt.queue = t as u8;
        let adj = self.adjusted_len(pkt.wire_len);
        self.push(t, f, pkt, adj);
        self.stats.enqueued += 1;

        let mode = self.cfg.flow_mode;
        let tin = &mut self.tins[t];
        match tin.flows[f].set {
            FlowSet::None | FlowSet::Decaying => {
                if tin.flows[f].set == FlowSet::Decaying {
                    tin.decaying -= 1;
                }
                tin.move_tail(f, ListId::New);
                tin.flows[f].set = FlowSet::Sparse;
                tin.sparse += 1;
                tin.flows[f].deficit = tin.flow_quantum_for(f, mode, &mut self.rng);
            }
            FlowSet::SparseWait => {
                tin.flows[f].set = FlowSet::Bulk;
                tin.sparse -= 1;
                tin.bulk += 1;
                tin.host_bulk_inc(f, mode);
            }
            FlowSet::Sparse | FlowSet::Bulk => {}
        }

        let mut arrival_dropped = false;
        while self.buffer_used > self.buffer_limit {
            // The arriving packet is its queue's tail: it went if its queue was emptied.
            arrival_dropped |= self.drop_fattest(now) == (t, f) && self.tins[t].flows[f].q.is_empty();
        }
        if arrival_dropped {
            // Pruned at once: not counted as accepted (its drop is in `drops`).
            self.stats.enqueued -= 1;
            Enqueued::Dropped
        } else {
            Enqueued::Queued
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.hold_until = None;
        let mode = self.cfg.flow_mode;
        let mut first_flow = true;
        'begin: loop {
            if self.qlen == 0 {
                return None;
            }
            if let Some(t) = self.shaper.held_until(now) {
                self.hold_until = Some(t);
                return None;
            }
            let t = self.choose_tin(now)?;
            // Pick a queue: one decaying queue first (to age its state), then new, old.
            let f = loop {
                let tin = &mut self.tins[t];
                let order = if first_flow {
                    [ListId::Decaying, ListId::New, ListId::Old]
                } else {
                    [ListId::New, ListId::Old, ListId::Decaying]
                };
                let Some(f) = order.iter().find_map(|&l| tin.first(l)) else {
                    debug_assert!(false, "active tin without queues");
                    return None;
                };
                first_flow = false;
                if tin.flows[f].deficit > 0 {
                    break f;
                }
                // Out of deficit: a sparse queue with packets becomes bulk (an empty one
                // keeps counting as sparse), then it gets a quantum and goes to the back.
                if tin.flows[f].set == FlowSet::Sparse {
                    if !tin.flows[f].q.is_empty() {
                        tin.sparse -= 1;
                        tin.bulk += 1;
                        tin.host_bulk_inc(f, mode);
                        tin.flows[f].set = FlowSet::Bulk;
                    } else {
                        tin.flows[f].set = FlowSet::SparseWait;
                    }
                }
                tin.flows[f].deficit += tin.flow_quantum_for(f, mode, &mut self.rng);
                tin.move_tail(f, ListId::Old);
            };

            // Retrieve a packet via the AQM.
            let (mut pkt, adj, verdict) = loop {
                let Some((mut pkt, adj)) = self.pop(t, f) else {
                    self.retire(t, f, now);
                    continue 'begin;
                };
                let tin = &mut self.tins[t];
                let flow = &mut tin.flows[f];
                let verdict = flow.cvars.should_drop(&tin.cparams, now, &mut pkt, 0, &mut self.rng);
                // The last packet of a queue is never dropped.
                if !verdict.is_drop() || flow.q.is_empty() {
                    break (pkt, adj, verdict);
                }
                flow.dropped += 1;
                tin.dropped += 1;
                self.stats.drop(&pkt);
            };

            let tin = &mut self.tins[t];
            // Linux counts `flow->cvars.ecn_marked`, not the verdict: a CE-marked last packet
            // that BLUE chose to drop but is delivered (as the queue's last) counts too.
            debug_assert!(verdict != Verdict::Marked || tin.flows[f].cvars.ecn_marked);
            if tin.flows[f].cvars.ecn_marked {
                tin.ecn_marks += 1;
                self.stats.ce_marks += 1;
            }
            let delay = (now - pkt.enqueued_at).0;
            tin.avg_delay = ewma(tin.avg_delay, delay, 8);
            tin.peak_delay = ewma(tin.peak_delay, delay, if delay > tin.peak_delay { 2 } else { 8 });
            tin.base_delay = ewma(tin.base_delay, delay, if delay < tin.base_delay { 2 } else { 8 });
            tin.flows[f].deficit -= adj as i32;
            tin.tin_deficit -= adj as i32;
            self.advance_shaper(t, adj, now);
            pkt.queue = t as u8;
            self.stats.sent(&pkt);
            return Some(pkt);
        }
    }

    fn len(&self) -> usize {
        self.qlen
    }
    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        for flow in self.tins.iter().flat_map(|t| t.flows.iter()) {
            self.slab.for_each(&flow.q, |s| f(&s.pkt));
        }
    }
    fn ready_at(&self) -> Option<Time> {
        self.hold_until
    }
    fn queue_names(&self) -> &'static [&'static str] {
        self.cfg.tin_mode.names()
    }
    /// Flow counts over all tins (sparse includes decaying, as tc shows them), the largest
    /// BLUE probability of any queue, and the Best Effort tin's delay averages (ms).
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        let sum = |f: fn(&Tin) -> u32| self.tins.iter().map(f).sum::<u32>() as f64;
        let p_max = self.tins.iter().flat_map(|t| t.flows.iter()).map(|f| f.cvars.blue.p_drop).max().unwrap_or(0);
        let be = &self.tins[0];
        let ms = |ns: u64| ns as f64 / 1e6;
        out.extend([
            ("sparse_flows", sum(|t| t.sparse + t.decaying)),
            ("bulk_flows", sum(|t| t.bulk)),
            ("unresponsive_flows", sum(|t| t.unresponsive)),
            ("p_drop_max", p_max as f64 / 4_294_967_296.0),
            ("avg_delay_ms", ms(be.avg_delay)),
            ("peak_delay_ms", ms(be.peak_delay)),
            ("base_delay_ms", ms(be.base_delay)),
            ("memory_used", self.buffer_used as f64),
        ]);
    }
}

/// Parsed `cake` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CakeConfig {
    /// Shaper rate; `None` = unlimited.
    bandwidth: Option<Rate>,
    /// `rtt` (the COBALT interval before auto-tuning) and the target.
    rtt: Time,
    target: Time,
    tin_mode: TinMode,
    flow_mode: u8,
    /// `rate_overhead`, and whether the MAC header is removed first (`CAKE_FLAG_OVERHEAD`).
    overhead: i32,
    overhead_flag: bool,
    mpu: u32,
    framing: Framing,
    memlimit: Option<u64>,
}

impl Default for CakeConfig {
    /// `cake_init` defaults (the table's Linux defaults).
    fn default() -> CakeConfig {
        CakeConfig::from_args(&CAKE.defaults(Stack::Linux))
    }
}

impl CakeConfig {
    fn from_args(a: &Args) -> CakeConfig {
        let (rtt, target) = shaper::rtt_pair(a.time("rtt"));
        let tin_mode = match a.word("diffserv_mode") {
            "besteffort" => TinMode::BestEffort,
            _ => TinMode::Diffserv3,
        };
        let flow_mode = match a.word("flow_mode") {
            "dual-srchost" => FLOW_DUAL_SRC,
            "dual-dsthost" => FLOW_DUAL_DST,
            "flows" => FLOW_FLOWS,
            "flowblind" => FLOW_NONE,
            _ => FLOW_TRIPLE,
        };
        let comp = CompensationParser::from_args(a);
        CakeConfig {
            bandwidth: a.rate_opt("bandwidth"),
            rtt,
            target,
            tin_mode,
            flow_mode,
            overhead: comp.overhead,
            overhead_flag: comp.overhead_flag,
            mpu: comp.mpu,
            framing: comp.framing,
            memlimit: a.bytes_opt("memlimit"),
        }
    }
}

impl QdiscConfig for CakeConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(Cake::new(*self, ctx.mtu, ctx.rng.clone()))
    }
}

const TINS_NOT_MODELLED: &str = "only besteffort and diffserv3 tins are modelled";
const ACK_FILTER: &str = "the ACK filter is not modelled";

/// `cake [bandwidth RATE | unlimited] [rtt TIME | PRESET] [besteffort | diffserv3]
/// [triple-isolate | dual-srchost | dual-dsthost | flows | flowblind] [memlimit SIZE]
/// [overhead N | conservative | raw | FRAMING] [mpu N] [atm | ptm | noatm]`, as tc-cake(8).
/// Keywords that select a default or have no effect on this model are accepted; those of
/// features not modelled are refused with the reason.
pub const CAKE: QdiscKind = QdiscKind {
    name: "cake",
    doc: "Common Applications Kept Enhanced: shaper, tins, flow isolation, COBALT (sch_cake.c)",
    params: &[
        shaper::BANDWIDTH,
        shaper::rtt(Value::Time(Time::from_millis(100))),
        Param::new("diffserv_mode", Type::Choice, Value::Word("diffserv3"))
            .words(&[("besteffort", Value::Word("besteffort")), ("diffserv3", Value::Word("diffserv3"))])
            .doc("priority tins by DSCP"),
        Param::new("flow_mode", Type::Choice, Value::Word("triple-isolate"))
            .words(&[
                ("triple-isolate", Value::Word("triple-isolate")),
                ("dual-srchost", Value::Word("dual-srchost")),
                ("dual-dsthost", Value::Word("dual-dsthost")),
                ("flows", Value::Word("flows")),
                ("flowblind", Value::Word("flowblind")),
            ])
            .doc("flow isolation"),
        shaper::MEMLIMIT,
        shaper::OVERHEAD,
        shaper::MPU,
        shaper::ATM,
        shaper::FRAMING,
        shaper::VIA_ETHERNET,
        Param::ignored("egress")
            .words(&[
                ("nonat", Value::Unset),
                ("nowash", Value::Unset),
                ("no-ack-filter", Value::Unset),
                ("split-gso", Value::Unset),
                ("no-split-gso", Value::Unset),
            ])
            .doc("the defaults, or no effect in this model"),
        Param::unsupported("diffserv4", TINS_NOT_MODELLED)
            .words(&[("diffserv8", Value::Unset), ("diffserv", Value::Unset), ("precedence", Value::Unset)]),
        Param::unsupported("srchost", "host-only isolation (no per-flow queues) is not modelled; use dual-srchost"),
        Param::unsupported("dsthost", "host-only isolation (no per-flow queues) is not modelled; use dual-dsthost"),
        Param::unsupported("hosts", "host-only isolation (no per-flow queues) is not modelled; use triple-isolate"),
        Param::unsupported("nat", "there is no NAT/conntrack in the simulator"),
        Param::unsupported("wash", "DSCP washing is not modelled"),
        Param::unsupported("ack-filter", ACK_FILTER).words(&[("ack-filter-aggressive", Value::Unset)]),
        Param::unsupported("ingress", "ingress mode is not modelled"),
        Param::unsupported("autorate-ingress", "autorate-ingress is not modelled"),
        Param::unsupported("fwmark", "firewall marks are not modelled"),
    ],
    build: |a| Ok(Arc::new(CakeConfig::from_args(a))),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::qdisc::shaper::testutil::drain;
    use crate::qdisc::QdiscSpec;

    const MTU: u32 = 1514;

    fn cake(cfg: CakeConfig) -> Cake {
        Cake::new(cfg, MTU, Stream::new(1, "cake-test"))
    }

    fn besteffort(bandwidth: Option<&str>) -> Cake {
        let bandwidth = bandwidth.map(|b| crate::units::parse_rate(b).unwrap());
        cake(CakeConfig { bandwidth, tin_mode: TinMode::BestEffort, ..CakeConfig::default() })
    }

    fn pkt(key: u32, len: u32, seq: u32, at: Time) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
        p.hash_key = key;
        p.tcp.seq = seq;
        p.enqueued_at = at;
        p.ecn = Ecn::Ect0;
        p
    }

    fn parsed(s: &str) -> String {
        format!("{:?}", QdiscSpec::parse(s).unwrap())
    }

    #[test]
    fn tc_strings_and_defaults() {
        let d = parsed("cake");
        for want in ["bandwidth: None", "rtt: Time(100000000)", "target: Time(5000000)", "Diffserv3", "flow_mode: 7", "memlimit: None", "overhead_flag: false"] {
            assert!(d.contains(want), "{want} in {d}");
        }
        assert_eq!(QdiscSpec::parse("cake unlimited rtt 100ms diffserv3 triple-isolate nonat nowash egress").unwrap(), QdiscSpec::parse("cake").unwrap());
        let s = parsed("cake bandwidth 50Mbit besteffort rtt 50ms flows");
        for want in ["Rate(50000000)", "rtt: Time(50000000)", "target: Time(2500000)", "BestEffort", "flow_mode: 4"] {
            assert!(s.contains(want), "{want} in {s}");
        }
        assert!(parsed("cake lan").contains("rtt: Time(1000000), target: Time(50000)"));
        // overhead N sets and removes the MAC header; keywords add; raw clears the flag.
        let o = parsed("cake overhead 18 mpu 64");
        assert!(o.contains("overhead: 18, overhead_flag: true, mpu: 64"), "{o}");
        let e = parsed("cake ethernet ether-vlan");
        assert!(e.contains("overhead: 42, overhead_flag: true, mpu: 84"), "{e}");
        assert!(parsed("cake overhead 18 raw").contains("overhead: 0, overhead_flag: false"));
        assert!(parsed("cake conservative").contains("overhead: 48, overhead_flag: true, mpu: 0, framing: Atm"));
        assert!(parsed("cake memlimit 4mb").contains("memlimit: Some(4194304)"));
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = QdiscSpec::parse("cake bandwidth fast").unwrap_err();
        assert!(e.contains("bandwidth"), "{e}");
        let e = QdiscSpec::parse("cake overhead 300").unwrap_err();
        assert!(e.contains("overhead"), "{e}");
        let e = QdiscSpec::parse("cake ack-filter").unwrap_err();
        assert!(e.contains("ack-filter") && e.contains("not modelled"), "{e}");
        let e = QdiscSpec::parse("cake diffserv4").unwrap_err();
        assert!(e.contains("diffserv4"), "{e}");
        let e = QdiscSpec::parse("cake bandwith 1Mbit").unwrap_err();
        assert!(e.contains("bandwith"), "{e}");
        assert!(QdiscSpec::parse("cake mpu 300").is_err());
    }

    #[test]
    fn rate_sets_quantum_target_interval_and_memory_as_cake_set_rate() {
        // 50 Mbit/s = 6 250 000 B/s: 160 ns per byte, quantum min(1525, 1514).
        let c = besteffort(Some("50Mbit"));
        let b = &c.tins[0];
        assert_eq!((b.rate.duration(1), b.flow_quantum), (Time(160), 1514));
        assert_eq!(b.cparams.mtu_time, Time(1514 * 160));
        assert_eq!((b.cparams.target, b.cparams.interval), (Time::from_millis(5), Time::from_millis(100)));
        assert_eq!(c.buffer_limit, 4 << 20);
        // 1 Mbit/s: an MTU takes 12.112 ms, so target = 1.5 x that and interval grows alike.
        let c = besteffort(Some("1Mbit"));
        let b = &c.tins[0];
        assert_eq!(b.flow_quantum, 300);
        assert_eq!(b.cparams.mtu_time, Time(12_112_000));
        assert_eq!(b.cparams.target, Time(18_168_000));
        assert_eq!(b.cparams.interval, Time(113_168_000));
        // 1 Gbit/s: 4 x rate x rtt = 50 MB, capped at 10240 x MTU; unlimited: the same cap.
        assert_eq!(besteffort(Some("1Gbit")).buffer_limit, 10240 * 1514);
        assert_eq!(besteffort(None).buffer_limit, 10240 * 1514);
        let d3 = cake(CakeConfig { bandwidth: Some(Rate(50_000_000)), ..CakeConfig::default() });
        let shifts: Vec<Time> = d3.tins.iter().map(|t| t.rate.duration(1000)).collect();
        assert_eq!(shifts, vec![Time(160_000), Time(16 * 160_000), Time(4 * 160_000)]);
    }

    #[test]
    fn framing_compensation_as_cake_calc_overhead() {
        let with = |overhead: i32, flag: bool, mpu: u32, framing: Framing| {
            cake(CakeConfig { overhead, overhead_flag: flag, mpu, framing, ..CakeConfig::default() })
        };
        assert_eq!(with(0, false, 0, Framing::None).adjusted_len(1514), 1514);
        assert_eq!(with(38, true, 84, Framing::None).adjusted_len(1514), 1538);
        assert_eq!(with(38, true, 84, Framing::None).adjusted_len(54), 84);
        // ATM: 1500 + 32 = 1532 bytes -> 32 cells of 48 -> 1696 bytes on the wire.
        assert_eq!(with(32, true, 0, Framing::Atm).adjusted_len(1514), 1696);
        // PTM: 1530 + ceil(1530/64) = 1554.
        assert_eq!(with(30, true, 0, Framing::Ptm).adjusted_len(1514), 1554);
    }

    /// Hash keys whose flow hash lands on `home` (or, with `set_only`, in its set).
    fn keys_hashing_to(c: &Cake, home: usize, set_only: bool, n: usize) -> Vec<u32> {
        (0u32..)
            .filter(|&k| {
                let q = c.hash(k, 0) as usize % QUEUES;
                if set_only {
                    q / SET_WAYS == home / SET_WAYS
                } else {
                    q == home
                }
            })
            .take(n)
            .collect()
    }

    #[test]
    fn set_associative_hash_gives_colliding_flows_their_own_ways() {
        let mut c = besteffort(None);
        let home = c.hash(0, 0) as usize % QUEUES;
        let same_home = keys_hashing_to(&c, home, false, 2);
        let qa = c.classify(&pkt(same_home[0], 100, 0, Time::ZERO)).1;
        assert_eq!(qa, home);
        c.enqueue(pkt(same_home[0], 100, 0, Time::ZERO), Time::ZERO);
        let qb = c.classify(&pkt(same_home[1], 100, 0, Time::ZERO)).1;
        assert_ne!(qa, qb, "a second flow with the same home slot gets another way");
        assert_eq!(qa / SET_WAYS, qb / SET_WAYS, "in the same set");
        // Eight flows of one set fill its eight ways; a ninth has to share.
        let mut c = besteffort(None);
        let set = keys_hashing_to(&c, home, true, 9);
        let mut queues = vec![];
        for &k in &set {
            let p = pkt(k, 100, 0, Time::ZERO);
            queues.push(c.classify(&p).1);
            c.enqueue(p, Time::ZERO);
        }
        let mut distinct = queues[..8].to_vec();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 8, "{queues:?}");
        assert!(queues.iter().all(|q| q / SET_WAYS == home / SET_WAYS));
        assert_eq!(queues[8], c.hash(set[8], 0) as usize % QUEUES, "the ninth takes its home slot");
        assert_eq!(c.tins[0].way_collisions, 1);
        // The same flow keeps its queue.
        assert_eq!(c.classify(&pkt(set[3], 100, 0, Time::ZERO)).1, queues[3]);
    }

    #[test]
    fn drr_shares_bytes_fairly_between_different_packet_sizes() {
        let mut c = besteffort(None);
        let (big, small) = (1, 2);
        for i in 0..400 {
            c.enqueue(pkt(big, 1514, i, Time::ZERO), Time::ZERO);
        }
        for i in 0..1200 {
            c.enqueue(pkt(small, 500, i, Time::ZERO), Time::ZERO);
        }
        let (mut bytes_big, mut bytes_small) = (0i64, 0i64);
        // No queueing delay (now = enqueue time): COBALT stays quiet.
        for _ in 0..600 {
            let p = c.dequeue(Time::ZERO).unwrap();
            if p.hash_key == big {
                bytes_big += p.wire_len as i64;
            } else {
                bytes_small += p.wire_len as i64;
            }
            assert!((bytes_big - bytes_small).abs() <= 2 * 1514, "{bytes_big} vs {bytes_small}");
        }
        assert!(bytes_big > 200_000 && bytes_small > 200_000);
        assert_eq!(c.stats().drops, 0);
    }

    #[test]
    fn a_sparse_flow_is_served_before_bulk_flows() {
        let mut c = besteffort(None);
        for i in 0..50 {
            c.enqueue(pkt(1, 1514, i, Time::ZERO), Time::ZERO);
            c.enqueue(pkt(2, 1514, i, Time::ZERO), Time::ZERO);
        }
        for _ in 0..10 {
            c.dequeue(Time::ZERO).unwrap();
        }
        assert_eq!((c.tins[0].bulk, c.tins[0].sparse), (2, 0));
        c.enqueue(pkt(3, 200, 0, Time::ZERO), Time::ZERO);
        assert_eq!(c.tins[0].sparse, 1);
        assert_eq!(c.dequeue(Time::ZERO).unwrap().hash_key, 3, "the new flow goes first");
        // Having sent less than its quantum it stays sparse: its next packet also goes first.
        c.enqueue(pkt(3, 200, 1, Time::ZERO), Time::ZERO);
        assert_eq!(c.dequeue(Time::ZERO).unwrap().hash_key, 3);
    }

    #[test]
    fn overflow_drops_from_the_fattest_queue_and_raises_its_blue() {
        let mut c = cake(CakeConfig { tin_mode: TinMode::BestEffort, memlimit: Some(10 * 1514), ..CakeConfig::default() });
        let now = Time::from_secs(1);
        for i in 0..10 {
            assert_eq!(c.enqueue(pkt(1, 1514, i, now), now), Enqueued::Queued);
        }
        assert_eq!(c.stats().drops, 0);
        // The eleventh packet, of another flow, pushes memory over: flow 1 loses its head.
        assert_eq!(c.enqueue(pkt(2, 1514, 0, now), now), Enqueued::Queued);
        assert_eq!((c.stats().drops, c.stats().overlimits, c.len()), (1, 1, 10));
        let (_, f1) = c.classify(&pkt(1, 1514, 0, now));
        let (_, f2) = c.classify(&pkt(2, 1514, 0, now));
        assert_eq!(c.tins[0].flows[f1].cvars.blue.p_drop, cobalt::P_INC);
        assert_eq!(c.tins[0].flows[f2].cvars.blue.p_drop, 0);
        assert_eq!(c.tins[0].unresponsive, 1);
        assert_eq!(c.dequeue(now).unwrap().tcp.seq, 1, "seq 0 was head-dropped");
        // A lone packet of the fattest flow is itself the one dropped.
        let mut c = cake(CakeConfig { tin_mode: TinMode::BestEffort, memlimit: Some(1000), ..CakeConfig::default() });
        assert_eq!(c.enqueue(pkt(1, 1514, 0, now), now), Enqueued::Dropped);
        assert!(c.is_empty());
    }

    /// An arrival pruned by the memory limit in its own enqueue is not counted as accepted;
    /// one whose queue keeps it is, even when another packet is pruned for it.
    #[test]
    fn a_pruned_arrival_is_not_counted_as_enqueued() {
        let now = Time::from_secs(1);
        let mut c = cake(CakeConfig { tin_mode: TinMode::BestEffort, memlimit: Some(1000), ..CakeConfig::default() });
        assert_eq!(c.enqueue(pkt(1, 1514, 0, now), now), Enqueued::Dropped);
        assert_eq!((c.stats().enqueued, c.stats().drops, c.stats().overlimits), (0, 1, 1));
        let mut c = cake(CakeConfig { tin_mode: TinMode::BestEffort, memlimit: Some(3 * 1514), ..CakeConfig::default() });
        for i in 0..3 {
            assert_eq!(c.enqueue(pkt(1, 1514, i, now), now), Enqueued::Queued);
        }
        assert_eq!(c.enqueue(pkt(2, 1514, 0, now), now), Enqueued::Queued, "flow 1 loses its head");
        assert_eq!((c.stats().enqueued, c.stats().drops, c.len()), (4, 1, 3));
        // enqueued = dequeued + backlog + drops of queued packets holds again.
        while c.dequeue(now).is_some() {}
        assert_eq!(c.stats().enqueued, c.stats().dequeued + 1);
    }

    /// `cake_dequeue`: the last packet of a queue is delivered even if COBALT says drop, and
    /// Linux counts it as an ECN mark when CoDel CE-marked it before BLUE decided to drop it
    /// (`b->tin_ecn_mark += !!flow->cvars.ecn_marked`).
    #[test]
    fn a_ce_marked_last_packet_that_blue_would_drop_counts_as_a_mark() {
        let now = Time::from_secs(2);
        let mut c = besteffort(None);
        assert_eq!(c.enqueue(pkt(1, 1514, 0, now - Time::from_millis(20)), now), Enqueued::Queued);
        let (_, f) = c.classify(&pkt(1, 1514, 0, now));
        // CoDel in its dropping state with a signal due now; BLUE at (almost) certain drop.
        let cv = &mut c.tins[0].flows[f].cvars;
        cv.codel = cobalt::Schedule { count: 3, isqrt: cobalt::inv_sqrt(3, 0), next: now - Time::from_millis(1), dropping: true };
        cv.blue.p_drop = u32::MAX;
        let p = c.dequeue(now).expect("the last packet is never dropped");
        assert_eq!(p.ecn, Ecn::Ce);
        assert!(c.tins[0].flows[f].cvars.ecn_marked);
        assert_eq!((c.stats().ce_marks, c.tins[0].ecn_marks, c.stats().drops), (1, 1, 0));
        // A Not-ECT last packet under the same state is delivered unmarked and not counted.
        let mut c = besteffort(None);
        let mut q = pkt(1, 1514, 0, now - Time::from_millis(20));
        q.ecn = Ecn::NotEct;
        c.enqueue(q, now);
        let cv = &mut c.tins[0].flows[f].cvars;
        cv.codel = cobalt::Schedule { count: 3, isqrt: cobalt::inv_sqrt(3, 0), next: now - Time::from_millis(1), dropping: true };
        cv.blue.p_drop = u32::MAX;
        assert_eq!(c.dequeue(now).unwrap().ecn, Ecn::NotEct);
        assert_eq!((c.stats().ce_marks, c.tins[0].ecn_marks), (0, 0));
    }

    #[test]
    fn empty_queue_with_cobalt_state_decays_then_leaves() {
        let mut c = besteffort(None);
        let t0 = Time::from_secs(1);
        // Standing queue: sojourn 20 ms for a long while makes COBALT mark.
        let mut now = t0;
        let mut seq = 0;
        while now < t0 + Time::from_millis(400) {
            c.enqueue(pkt(1, 1514, seq, now - Time::from_millis(20)), now);
            c.enqueue(pkt(1, 1514, seq + 1, now - Time::from_millis(20)), now);
            seq += 2;
            c.dequeue(now).unwrap();
            now += Time::from_millis(1);
        }
        assert!(c.stats().ce_marks > 0);
        while c.dequeue(now).is_some() {}
        // Emptied, but CAKE only notices when the rotation next reaches the queue; another
        // bulk flow brings it there.
        let (_, f) = c.classify(&pkt(1, 1514, 0, now));
        assert_eq!(c.tins[0].flows[f].set, FlowSet::Bulk);
        for i in 0..3 {
            c.enqueue(pkt(2, 1514, i, now), now);
        }
        for _ in 0..3 {
            assert_eq!(c.dequeue(now).unwrap().hash_key, 2);
            if c.tins[0].flows[f].set != FlowSet::Bulk {
                break;
            }
        }
        assert!(c.tins[0].flows[f].cvars.codel.count > 0);
        assert_eq!(c.tins[0].flows[f].set, FlowSet::Decaying);
        assert_eq!((c.tins[0].decaying, c.tins[0].bulk), (1, 1));
        // New traffic of that flow makes it sparse again.
        c.enqueue(pkt(1, 100, seq, now), now);
        assert_eq!((c.tins[0].flows[f].set, c.tins[0].decaying, c.tins[0].sparse), (FlowSet::Sparse, 0, 1));
        while c.len() > 1 {
            c.dequeue(now).unwrap();
        }
        // Long idle: each dequeue visits the decaying queue first and ages its state away.
        c.dequeue(now).unwrap();
        for s in 1..100 {
            let later = now + Time::from_secs(s);
            c.enqueue(pkt(9, 100, s as u32, later), later);
            c.dequeue(later).unwrap();
        }
        assert_eq!(c.tins[0].flows[f].set, FlowSet::None);
        assert_eq!(c.tins[0].decaying, 0);
    }

    #[test]
    fn diffserv3_classifies_by_dscp_and_weights_tins() {
        let mut c = cake(CakeConfig::default());
        let with_dscp = |key, dscp, seq| {
            let mut p = pkt(key, 1000, seq, Time::ZERO);
            p.dscp = dscp;
            p
        };
        assert_eq!(c.classify(&with_dscp(1, 0, 0)).0, 0);
        assert_eq!(c.classify(&with_dscp(1, 8, 0)).0, 1);
        assert_eq!(c.classify(&with_dscp(1, 46, 0)).0, 2);
        // Unlimited: Best Effort and Bulk both backlogged share by tin quantum, 1024 : 64.
        for i in 0..2000 {
            c.enqueue(with_dscp(1, 0, i), Time::ZERO);
            c.enqueue(with_dscp(2, 8, i), Time::ZERO);
        }
        let mut per_tin = [0u64; 3];
        for _ in 0..1700 {
            per_tin[c.dequeue(Time::ZERO).unwrap().queue as usize] += 1;
        }
        let ratio = per_tin[0] as f64 / per_tin[1] as f64;
        assert!((ratio - 16.0).abs() < 1.5, "{per_tin:?}");
        // Shaped: Voice, on schedule, goes before a backlogged Best Effort.
        let mut c = cake(CakeConfig { bandwidth: Some(Rate(50_000_000)), ..CakeConfig::default() });
        for i in 0..10 {
            c.enqueue(with_dscp(1, 0, i), Time::ZERO);
        }
        c.dequeue(Time::ZERO).unwrap();
        c.enqueue(with_dscp(3, 46, 0), Time::ZERO);
        let out = drain(&mut c, Time::ZERO);
        assert_eq!(out[0].1.queue, 2);
    }

    #[test]
    fn xstats_names_are_stable() {
        let c = besteffort(None);
        let mut v = vec![];
        c.xstats(&mut v);
        let names: Vec<&str> = v.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["sparse_flows", "bulk_flows", "unresponsive_flows", "p_drop_max", "avg_delay_ms", "peak_delay_ms", "base_delay_ms", "memory_used"]);
    }
}
