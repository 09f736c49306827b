//! Helpers shared by the system tests: scenario builders, the packet-conservation check, and
//! `Rule`, a pfifo that applies a test rule (mark or drop) to each arriving data packet.
#![allow(dead_code)]

use aqmlab_sim::packet::{Kind, Packet};
use aqmlab_sim::qdisc::{Enqueued, Fifo, Qdisc, QdiscStats};
use aqmlab_sim::sim::Summary;
use aqmlab_sim::{Scenario, Simulation, Time};

/// A `[host]` table without timing noise: exact starts, no per-packet jitter. For tests
/// whose expectation is an exact time on an ideal path (host.rs covers the noise).
pub const QUIET_HOST: &str = "\n[host]\nstart_spread = \"0s\"\njitter = \"0s\"\n";

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


/// A discipline that logs every data packet's arrival (time, flow) before handing it to the
/// discipline it wraps: what the bottleneck sees of the senders' bursts.
pub struct Recorder {
    inner: Box<dyn Qdisc>,
    pub log: std::rc::Rc<std::cell::RefCell<Vec<(Time, u32)>>>,
}

impl Qdisc for Recorder {
    /// Not the inner kind: `Link::replace_qdisc` would then `change` the existing one.
    fn kind(&self) -> &'static str {
        "recorder"
    }
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Enqueued {
        if pkt.kind == Kind::Data {
            self.log.borrow_mut().push((now, pkt.flow));
        }
        self.inner.enqueue(pkt, now)
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.inner.dequeue(now)
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.inner.backlog_bytes()
    }
    fn stats(&self) -> &QdiscStats {
        self.inner.stats()
    }
    fn ready_at(&self) -> Option<Time> {
        self.inner.ready_at()
    }
    fn queue_names(&self) -> &'static [&'static str] {
        self.inner.queue_names()
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        self.inner.xstats(out)
    }
}

/// A simulation of `sc` whose bottleneck discipline (built as the engine builds it, same
/// random stream) logs the data arrivals.
pub fn recorded(sc: &Scenario) -> (Simulation, std::rc::Rc<std::cell::RefCell<Vec<(Time, u32)>>>) {
    use aqmlab_sim::qdisc::BuildCtx;
    let mut sim = Simulation::new(sc);
    let mut ctx = BuildCtx {
        link_rate: sc.bottleneck.rate,
        mtu: aqmlab_sim::packet::LINK_MTU,
        rng: aqmlab_sim::rng::Stream::new(sc.seed, "qdisc/bottleneck"),
        stack: sc.stack,
    };
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    sim.replace_bottleneck_qdisc(Box::new(Recorder { inner: sc.bottleneck.qdisc.build(&mut ctx), log: log.clone() }));
    (sim, log)
}

/// The bursts in an arrival log: runs of packets of one flow arriving at one instant, as
/// (flow, size), in arrival order.
pub fn bursts(log: &[(Time, u32)]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = Vec::new();
    let mut last: Option<(Time, u32)> = None;
    for &(t, f) in log {
        match v.last_mut() {
            Some((lf, n)) if last == Some((t, f)) && *lf == f => *n += 1,
            _ => v.push((f, 1)),
        }
        last = Some((t, f));
    }
    v
}

/// Packets of `flow` by burst size: `h[n]` = packets that arrived in bursts of `n`.
pub fn burst_histogram(b: &[(u32, u32)], flow: u32) -> Vec<u64> {
    let mut h = vec![0u64; 2];
    for &(f, n) in b.iter().filter(|(f, _)| *f == flow) {
        let n = n as usize;
        if h.len() <= n {
            h.resize(n + 1, 0);
        }
        h[n] += n as u64;
        let _ = f;
    }
    h
}
