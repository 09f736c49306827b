//! The flow table of the flow-queueing CoDel disciplines (`fq_codel`, `sfq_codel`): packets
//! hashed ([`flow_bucket`]) into per-flow CoDel queues that share one set of parameters,
//! counters and totals ([`CodelShared`]). Each discipline keeps its own scheduler (fq_codel's
//! new and old lists, sfq_codel's ring) over the flows' indices.

use super::codel::{CodelCounters, CodelFlow, CodelParams, CodelShared, MtuGuard};
use super::flow_bucket;
use crate::packet::Packet;
use crate::time::Time;

/// A flow entry: its CoDel queue plus the scheduler's per-flow state.
pub trait FlowEntry: Clone + Default {
    fn queue(&mut self) -> &mut CodelFlow;
}

/// `flows` hashed CoDel queues.
#[derive(Debug)]
pub struct FlowTable<F> {
    perturbation: u32,
    pub flows: Vec<F>,
    pub cd: CodelShared,
}

impl<F: FlowEntry> FlowTable<F> {
    /// `n` flows with CoDel `params` (their `mtu` set), hashing with `perturbation`.
    pub fn new(n: u32, params: CodelParams, perturbation: u32) -> Self {
        FlowTable { perturbation, flows: vec![F::default(); n as usize], cd: CodelShared::new(params) }
    }

    /// The flow a packet hashes to (`fq_codel_hash`).
    pub fn classify(&self, pkt: &Packet) -> u32 {
        flow_bucket(pkt.hash_key, self.perturbation, self.flows.len() as u32)
    }

    /// Appends a packet to the queue of its flow; returns the flow's index and entry.
    pub fn enqueue(&mut self, pkt: Packet) -> (u32, &mut F) {
        let idx = self.classify(&pkt);
        let flow = &mut self.flows[idx as usize];
        self.cd.enqueue(flow.queue(), pkt);
        (idx, flow)
    }

    /// CoDel's dequeue on flow `idx`: the next packet it lets through, or `None` when the
    /// flow is (or its drops left it) empty.
    #[inline]
    pub fn dequeue(&mut self, idx: u32, guard: MtuGuard, now: Time) -> Option<Packet> {
        self.cd.dequeue(self.flows[idx as usize].queue(), guard, now)
    }

    pub fn counters(&self) -> &CodelCounters {
        &self.cd.ctr
    }
}

/// `Qdisc::len`, `backlog_bytes` and `stats` of a discipline whose packets are all counted in
/// the [`CodelShared`] at `self.<path>`.
macro_rules! codel_totals {
    ($($path:ident).+) => {
        fn len(&self) -> usize {
            self.$($path).+.totals.qlen
        }
        fn backlog_bytes(&self) -> u64 {
            self.$($path).+.totals.backlog
        }
        fn stats(&self) -> &QdiscStats {
            &self.$($path).+.stats
        }
        fn stats_mut(&mut self) -> &mut QdiscStats {
            &mut self.$($path).+.stats
        }
    };
}
pub(crate) use codel_totals;
