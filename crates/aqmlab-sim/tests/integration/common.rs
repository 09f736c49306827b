//! Helpers shared by the system tests: scenario builders, the packet-conservation check, and
//! `Rule`, a pfifo that applies a test rule (mark or drop) to each arriving data packet.
#![allow(dead_code)]

use aqmlab_sim::packet::{Kind, Packet};
use aqmlab_sim::qdisc::{Enqueued, Fifo, Qdisc, QdiscStats};
use aqmlab_sim::sim::Summary;
use aqmlab_sim::{Scenario, Simulation, Time};

pub fn scenario(text: &str) -> Scenario {
    Scenario::from_toml(text, &[]).expect("valid scenario")
}

pub fn dumbbell(rate: &str, qdisc: &str, duration: &str, flows: &str) -> Scenario {
    scenario(&format!(
        "duration = \"{duration}\"\n[bottleneck]\nrate = \"{rate}\"\nqdisc = \"{qdisc}\"\n{flows}"
    ))
}

/// Sent = delivered + dropped + still inside the network, for every run.
pub fn assert_conserved(s: &Summary) {
    let p = s.packets;
    assert_eq!(p.sent, p.delivered + p.dropped + p.in_flight, "packet conservation: {p:?}");
    assert!(p.sent > 0);
}

pub fn run(sc: &Scenario) -> Summary {
    let out = Simulation::new(sc).run();
    assert_conserved(&out.summary);
    out.summary
}

/// A pfifo that first applies a test rule to each arriving data packet (which may mark it),
/// dropping the packet when the rule returns false.
pub struct Rule<F: FnMut(&mut Packet, Time) -> bool> {
    inner: Fifo,
    rule: F,
    rule_drops: u64,
    stats: QdiscStats,
}

impl<F: FnMut(&mut Packet, Time) -> bool> Rule<F> {
    pub fn new(limit: u32, rule: F) -> Box<Self> {
        Box::new(Rule { inner: Fifo::pfifo(limit), rule, rule_drops: 0, stats: QdiscStats::default() })
    }
    fn sync(&mut self) {
        self.stats = *self.inner.stats();
        self.stats.drops += self.rule_drops;
    }
}

impl<F: FnMut(&mut Packet, Time) -> bool> Qdisc for Rule<F> {
    fn kind(&self) -> &'static str {
        "test-rule"
    }
    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        let r = if pkt.kind == Kind::Data && !(self.rule)(&mut pkt, now) {
            self.rule_drops += 1;
            Enqueued::Dropped
        } else {
            self.inner.enqueue(pkt, now)
        };
        self.sync();
        r
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let p = self.inner.dequeue(now);
        self.sync();
        p
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.inner.backlog_bytes()
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
}

