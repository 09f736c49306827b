//! SFQ-CoDel: stochastic fair queueing with a CoDel instance per hash bucket, as the ns-2
//! `Queue/sfqCoDel` (K. Nichols, `queue/sfqcodel.{cc,h}`) used by Järvinen & Kojo's
//! load-transient study. There is no Linux qdisc of this name; `sfq_codel` is our tc-style
//! kind.
//!
//! Scheduling follows ns-2 sfqcodel: packets are hashed into `flows` bins; active bins form a
//! ring served one packet per turn (`quantum 0`, the ns-2 default) or by deficit round robin
//! with `quantum` bytes of credit. A bin that becomes active is inserted at the current ring
//! position, after any other newly active bins that have not been served yet, so it is served
//! next; unlike fq_codel there is no separate new list, no quantum of priority and no
//! sparse-flow rule. When the whole buffer (`limit` packets) is full, the arriving packet is
//! admitted after tail-dropping one packet from the bin with the most packets.
//!
//! Each bin runs the shared Linux CoDel ([`super::codel`]) with the ns-2 addition that a packet
//! which empties its own bin is never above target. See docs/algorithms/sfq_codel.md.

use super::codel::{CodelCounters, CodelFlow, CodelParams, MtuGuard};
use super::flow_table::{codel_totals, FlowEntry, FlowTable};
use super::{codel, Args, BuildCtx, Enqueued, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Value};
use crate::profile::Stack;
use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
struct Bin {
    q: CodelFlow,
    /// DRR credit in bytes (only with `quantum > 0`).
    deficit: i64,
    /// On the service ring (ns-2 `on_sched_`).
    on_sched: bool,
    /// Became active and not yet served (ns-2 `newflag`).
    new: bool,
}

impl FlowEntry for Bin {
    fn queue(&mut self) -> &mut CodelFlow {
        &mut self.q
    }
}

/// The sfq_codel discipline.
#[derive(Debug)]
pub struct SfqCodel {
    limit: u32,
    quantum: u32,
    /// The bins (`t.flows`).
    t: FlowTable<Bin>,
    /// Active bins in service order; the front is served next (ns-2 `binsched_`).
    ring: VecDeque<u32>,
    /// Bin of the last overflow drop (ns-2 `maxbinid_`).
    maxbin: u32,
}

/// sfq_codel's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SfqCodelConfig {
    pub limit: u32,
    /// Number of hash bins (ns-2 `maxbins_`).
    pub flows: u32,
    /// 0: one packet per turn; otherwise DRR credit per turn in bytes (ns-2 `quantum_`).
    pub quantum: u32,
    /// `mtu` is set from the link at build time.
    pub codel: CodelParams,
}

impl Default for SfqCodelConfig {
    /// The table defaults.
    fn default() -> Self {
        SfqCodelConfig::from_args(&SFQ_CODEL.defaults(Stack::Linux))
    }
}

impl SfqCodelConfig {
    fn from_args(a: &Args) -> Self {
        SfqCodelConfig { limit: a.u32("limit"), flows: a.u32("flows"), quantum: a.u32("quantum"), codel: CodelParams::from_args(a) }
    }
}

impl SfqCodel {
    pub fn new(c: &SfqCodelConfig, mtu: u32, perturbation: u32) -> Self {
        SfqCodel {
            limit: c.limit,
            quantum: c.quantum,
            t: FlowTable::new(c.flows, c.codel.with_mtu(mtu), perturbation),
            ring: VecDeque::with_capacity(c.flows as usize),
            maxbin: 0,
        }
    }

    /// The bin a packet hashes to.
    pub fn classify(&self, pkt: &Packet) -> u32 {
        self.t.classify(pkt)
    }

    pub fn counters(&self) -> &CodelCounters {
        self.t.counters()
    }

    /// ns-2 `enque` on a full buffer: tail-drop from the bin with the most packets. Ties go to
    /// the highest-numbered such bin other than the previous victim.
    fn drop_from_longest(&mut self) {
        let bins = &mut self.t.flows;
        let mut m = self.maxbin as usize;
        for j in 0..bins.len() {
            if j != self.maxbin as usize && bins[j].on_sched && bins[j].q.queue.len() >= bins[m].q.queue.len() {
                m = j;
            }
        }
        self.maxbin = m as u32;
        if let Some(p) = bins[m].q.pop_tail(&mut self.t.cd.totals) {
            self.t.cd.stats.overlimit_drop(&p);
        }
    }

    /// Rotates the ring by one turn.
    fn advance(&mut self) {
        self.ring.rotate_left(1.min(self.ring.len()));
    }
}

impl Qdisc for SfqCodel {
    fn kind(&self) -> &'static str {
        SFQ_CODEL.name
    }

    fn enqueue(&mut self, pkt: Packet, _now: Time) -> Enqueued {
        if self.t.cd.totals.qlen >= self.limit as usize {
            self.drop_from_longest();
        }
        let (i, bin) = self.t.enqueue(pkt);
        if !bin.on_sched {
            bin.on_sched = true;
            bin.new = true;
            if self.quantum > 0 {
                bin.deficit = self.quantum as i64;
            }
            // Served next, after the newly active bins that are still waiting.
            let pos = self.ring.iter().take_while(|&&b| self.t.flows[b as usize].new).count();
            self.ring.insert(pos, i);
        }
        Enqueued::Queued
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        loop {
            let &b = self.ring.front()?;
            let bin = &mut self.t.flows[b as usize];
            if !bin.q.queue.is_empty() {
                if self.quantum > 0 && bin.deficit <= 0 {
                    // Top up and pass the turn to the next non-empty bin (empty ones are
                    // skipped, not removed, as in ns-2).
                    bin.deficit += self.quantum as i64;
                    self.advance();
                    while self.t.flows[self.ring[0] as usize].q.queue.is_empty() {
                        self.advance();
                    }
                    continue;
                }
                bin.new = false;
            }
            let Some(pkt) = self.t.dequeue(b, MtuGuard::QdiscOrQueueEmpty, now) else {
                // The bin was empty when it reached the head of the ring (ns-2 readybin), or
                // CoDel's drops emptied it: it leaves the ring (and is new on its next
                // arrival). CoDel found no packet and left the dropping state, as ns-2
                // `removebin` does.
                self.ring.pop_front();
                self.t.flows[b as usize].on_sched = false;
                continue;
            };
            if self.quantum > 0 {
                self.t.flows[b as usize].deficit -= pkt.wire_len as i64;
            } else {
                // One packet per turn: the next bin is served next.
                self.advance();
            }
            return Some(pkt);
        }
    }

    codel_totals!(t.cd);
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        self.t.flows.iter().flat_map(|b| b.q.queue.iter()).for_each(f)
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("active_bins", self.ring.len() as f64));
    }
}

impl QdiscConfig for SfqCodelConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        // The ns2-2013 profile runs sfqcodel.cc's own CoDel law per bin.
        let c = SfqCodelConfig { codel: CodelParams { law: codel::Law::sfq(ctx.stack), ..self.codel }, ..*self };
        Box::new(SfqCodel::new(&c, ctx.mtu, ctx.rng.next_u32()))
    }
}

/// `sfq_codel [limit PACKETS] [flows BINS] [quantum BYTES] [target TIME] [interval TIME]
/// [ecn|noecn] [ce_threshold TIME] [ce_threshold_selector VALUE/MASK]`; defaults limit 1000,
/// flows 1024, quantum 0 (packet round robin), target 5ms, interval 100ms, noecn.
pub const SFQ_CODEL: QdiscKind = QdiscKind {
    name: "sfq_codel",
    doc: "ns-2's SFQ-CoDel: stochastic fair queueing over bins, CoDel per bin",
    params: &[
        Param::uint("limit", 1, u32::MAX as u64, 1000)
            .unit("packets")
            .stack_defaults(&[(Stack::Ns2_2013, Value::Uint(50))])
            .doc("buffer limit, all bins (ns2-2013: ns-default.tcl Queue limit_ 50)"),
        Param::uint("flows", 1, 65536, 1024).doc("number of hash bins (ns-2 maxbins_)"),
        Param::uint("quantum", 0, 1 << 20, 0).unit("bytes").doc("DRR credit per turn; 0: one packet per turn"),
        codel::TARGET,
        codel::INTERVAL,
        codel::ecn(false),
        codel::CE_THRESHOLD,
        codel::CE_THRESHOLD_SELECTOR,
    ],
    build: |a| Ok(Arc::new(SfqCodelConfig::from_args(a))),
};

#[cfg(test)]
mod tests {
    use super::super::codel::testutil::{self, enq, pkt};
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::QdiscSpec;

    const MS: u64 = 1_000_000;

    fn sfq(c: SfqCodelConfig) -> SfqCodel {
        SfqCodel::new(&c, 1514, 0x9abc_def0)
    }

    fn distinct_flows(q: &SfqCodel, n: usize) -> Vec<u32> {
        testutil::distinct_flows(|p| q.classify(p), n)
    }

    fn serve(q: &mut SfqCodel, n: usize, t: Time) -> Vec<u32> {
        std::iter::from_fn(|| q.dequeue(t)).take(n).map(|p| p.flow).collect()
    }

    #[test]
    fn round_robin_one_packet_per_turn() {
        let mut q = sfq(SfqCodelConfig::default());
        let f = distinct_flows(&q, 2);
        let t = Time::ZERO;
        for i in 0..50 {
            enq(&mut q, pkt(f[0], 1514, i, Ecn::NotEct), t);
            enq(&mut q, pkt(f[1], 300, i, Ecn::NotEct), t);
        }
        // Equal packets, not equal bytes.
        let order = serve(&mut q, 20, t);
        assert_eq!(order, [f[0], f[1]].repeat(10));
    }

    #[test]
    fn quantum_gives_equal_bytes() {
        let mut q = sfq(SfqCodelConfig { quantum: 1514, ..Default::default() });
        let f = distinct_flows(&q, 2);
        let t = Time::ZERO;
        for i in 0..1000 {
            enq(&mut q, pkt(f[0], 1514, i, Ecn::NotEct), t);
            enq(&mut q, pkt(f[1], 300, i, Ecn::NotEct), t);
        }
        let mut bytes = [0u64; 2];
        for _ in 0..600 {
            let p = q.dequeue(t).unwrap();
            bytes[(p.flow == f[1]) as usize] += p.wire_len as u64;
        }
        assert!(bytes[0].abs_diff(bytes[1]) <= 2 * 1514, "{bytes:?}");
    }

    #[test]
    fn newly_active_bins_are_served_next_in_arrival_order() {
        let mut q = sfq(SfqCodelConfig::default());
        let f = distinct_flows(&q, 5);
        let t = Time::ZERO;
        for i in 0..10 {
            enq(&mut q, pkt(f[0], 1514, i, Ecn::NotEct), t);
            enq(&mut q, pkt(f[1], 1514, i, Ecn::NotEct), t);
        }
        assert_eq!(serve(&mut q, 3, t), vec![f[0], f[1], f[0]]);
        // Ring: f1, f0. Three bins become active: each is served before the old bins, in the
        // order they arrived; then the ring continues where it was.
        for &x in &f[2..5] {
            enq(&mut q, pkt(x, 1514, 0, Ecn::NotEct), t);
        }
        assert_eq!(serve(&mut q, 6, t), vec![f[2], f[3], f[4], f[1], f[0], f[1]]);
        // Once served, an active bin is an ordinary member of the ring.
        enq(&mut q, pkt(f[2], 1514, 1, Ecn::NotEct), t);
        assert_eq!(serve(&mut q, 3, t), vec![f[2], f[0], f[1]]);
    }

    #[test]
    fn full_buffer_tail_drops_from_the_longest_bin() {
        let mut q = sfq(SfqCodelConfig { limit: 10, ..Default::default() });
        let f = distinct_flows(&q, 2);
        let t = Time::ZERO;
        for i in 0..7 {
            enq(&mut q, pkt(f[0], 1514, i, Ecn::NotEct), t);
        }
        for i in 0..3 {
            enq(&mut q, pkt(f[1], 1514, i, Ecn::NotEct), t);
        }
        // The arriving packet (of the short bin) is admitted; the long bin loses its tail.
        assert_eq!(enq(&mut q, pkt(f[1], 1514, 3, Ecn::NotEct), t), Enqueued::Queued);
        assert_eq!((q.stats().drops, q.stats().overlimits, q.len()), (1, 1, 10));
        let mut seqs = [Vec::new(), Vec::new()];
        while let Some(p) = q.dequeue(t) {
            seqs[(p.flow == f[1]) as usize].push(p.tcp.seq);
        }
        assert_eq!(seqs[0], (0..6).collect::<Vec<_>>());
        assert_eq!(seqs[1], (0..4).collect::<Vec<_>>());
    }

    #[test]
    fn codel_runs_per_bin() {
        // Every 10 ms: two departures, then three arrivals in a heavy bin and one in a light bin.
        // The heavy bin's sojourn grows without bound and CoDel drops from it. Each light packet
        // waits 10 ms (above target, with a large qdisc backlog) but leaves its bin empty, which
        // ns-2 sfqcodel counts as below target: it is never dropped.
        let mut q = sfq(SfqCodelConfig { limit: 1_000_000, ..Default::default() });
        let f = distinct_flows(&q, 2);
        let mut t = Time::ZERO;
        let mut dropped = [0u32; 2];
        let mut sent = [0u32; 2];
        let mut next_seq = [0u32; 2];
        for _ in 0..2000 {
            for _ in 0..2 {
                if let Some(p) = q.dequeue(t) {
                    let k = (p.flow == f[1]) as usize;
                    dropped[k] += p.tcp.seq - sent[k];
                    sent[k] = p.tcp.seq + 1;
                }
            }
            for k in [0, 0, 0, 1] {
                enq(&mut q, pkt(f[k], 1514, next_seq[k], Ecn::NotEct), t);
                next_seq[k] += 1;
            }
            t += Time(10 * MS);
        }
        assert!(dropped[0] > 50, "{dropped:?}");
        assert_eq!(dropped[1], 0);
        assert_eq!(sent[1], next_seq[1] - 1);
        assert_eq!(q.stats().drops, dropped[0] as u64);
    }

    #[test]
    fn tc_strings() {
        let dbg = |s: &str| format!("{:?}", QdiscSpec::parse(s).unwrap());
        assert_eq!(
            QdiscSpec::parse("sfq_codel").unwrap(),
            QdiscSpec::parse("sfq_codel limit 1000 flows 1024 quantum 0 target 5ms interval 100ms noecn").unwrap()
        );
        let d = dbg("sfq_codel limit 100 flows 16 quantum 1514 ecn");
        assert!(
            d.contains("limit: 100")
                && d.contains("flows: 16")
                && d.contains("quantum: 1514")
                && d.contains("ecn: true"),
            "{d}"
        );
        assert!(QdiscSpec::parse("sfq_codel flows 0").unwrap_err().contains("flows"));
        assert!(QdiscSpec::parse("sfq_codel perturb 10").unwrap_err().contains("perturb"));
    }
}
