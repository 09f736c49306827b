//! Helpers shared by the system tests: scenario builders, the packet-conservation check, and
//! `Rule`, a pfifo that applies a test rule (mark or drop) to each arriving data packet.
//!
//! The builders assemble the same TOML document a scenario file holds, key by key, and parse it
//! with `Scenario::from_toml`, so a built scenario gets exactly the defaults and checks a file
//! gets; the key names are methods (a typo does not compile) and no text is formatted by hand:
//!
//! ```ignore
//! let s = Dumbbell::new("50Mbit", "fq_codel").duration("30s")
//!     .flow(Flow::new("cubic").rtt("20ms").ecn("rfc3168").count(2))
//!     .probe(Probe::new().rtt("20ms"))
//!     .run();
//! ```
#![allow(dead_code)]

use aqmlab_sim::packet::{Ecn, Kind, Packet};
use aqmlab_sim::qdisc::{Enqueued, Fifo, Qdisc, QdiscStats};
use aqmlab_sim::sim::{RunOutput, Summary};
use aqmlab_sim::{Scenario, Simulation, Time};
use toml::{Table, Value};

/// Parses scenario text (for tests of the TOML format itself; build the others).
pub fn scenario(text: &str) -> Scenario {
    Scenario::from_toml(text, &[]).expect("valid scenario")
}

/// A value of a scenario key: text (times, rates, names, specs), a number or a flag.
pub trait Val {
    fn val(self) -> Value;
}
macro_rules! val {
    ($($t:ty => $e:expr),* $(,)?) => { $(impl Val for $t { fn val(self) -> Value { let f: fn($t) -> Value = $e; f(self) } })* };
}
val! {
    &str => |v| Value::String(v.into()),
    String => Value::String,
    &String => |v| Value::String(v.clone()),
    bool => Value::Boolean,
    f64 => Value::Float,
    i32 => |v| Value::Integer(v.into()),
    i64 => Value::Integer,
    u8 => |v| Value::Integer(v.into()),
    u16 => |v| Value::Integer(v.into()),
    u32 => |v| Value::Integer(v.into()),
    u64 => |v| Value::Integer(i64::try_from(v).expect("fits a TOML integer")),
    usize => |v| Value::Integer(i64::try_from(v).expect("fits a TOML integer")),
}
impl Val for Value {
    fn val(self) -> Value {
        self
    }
}
impl<const N: usize> Val for [&str; N] {
    fn val(self) -> Value {
        Value::Array(self.iter().map(|s| s.val()).collect())
    }
}

/// One TOML table (a `[section]` or `[[list]]` entry) with a setter per key it may hold.
macro_rules! table {
    ($(#[$m:meta])* $name:ident { $($key:ident $(= $toml:literal)?),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default)]
        pub struct $name(pub Table);
        impl $name {
            $(pub fn $key(mut self, v: impl Val) -> Self {
                self.0.insert(table!(@key $key $($toml)?).into(), v.val());
                self
            })*
        }
    };
    (@key $key:ident $toml:literal) => { $toml };
    (@key $key:ident) => { stringify!($key) };
}

table!(
    /// A `[[flows]]` entry: one TCP flow (or `count` identical ones).
    Flow { cc, rtt, start, stop, size, ecn, count, name, mss, initial_cwnd, initial_rto, pacing, rwnd, ecn_rewrite, host, direction, netem, tunnel, gso }
);
table!(
    /// A `[[probes]]` entry: an irtt (default) or ping latency probe.
    Probe { name, kind, rtt, interval, size, ecn, dscp, start, stop, netem, tunnel }
);
table!(
    /// A `[[media]]` entry (SCReAM).
    Media { name, kind, rtt, start, stop, ecn, dscp, min_bitrate, start_bitrate, max_bitrate, frame_rate, frame_size_variation, microburst_interval, packet_size, queue_delay_target, tunnel }
);
table!(
    /// A `[[udp]]` entry: an unresponsive video or CBR source.
    Udp { name, kind, rate, frame_rate, paced, frame_size_variation, packet_size, rtt, start, stop, ecn, dscp, direction, tunnel }
);
table!(
    /// A `[[workloads]]` entry: Poisson arrivals of finite transfers.
    Workload { name, cc, rtt, direction, ecn, mean_interarrival, size_p5, size_p95, start, stop, mss, initial_cwnd, initial_rto }
);
table!(
    /// A `[[transients]]` entry: a group of simultaneous finite transfers.
    Transient { name, flows, total, cc, rtt, start, start_jitter, direction, ecn, mss, initial_cwnd, initial_rto }
);
table!(
    /// A `[[tunnels]]` entry.
    Tunnel { name, kind, overhead, sport, replay_window }
);
table!(
    /// A `[[bottleneck.changes]]` entry: the bottleneck's rate and/or qdisc from `at` on.
    Change { rate, qdisc, direction }
);
table!(
    /// A `[[bottleneck.upstream]]` link in front of the bottleneck.
    Upstream { rate, qdisc, delay }
);
table!(
    /// The `[return]` path carrying ACKs.
    Return { rate, qdisc }
);
table!(
    /// The `[host]` section: GSO sends and the hosts' timing noise (docs/host.md).
    Host { gso, start_spread, jitter }
);
table!(
    /// The `[metrics]` section.
    Metrics { step, steady_window, spike_thresholds, spike_after }
);

impl Flow {
    pub fn new(cc: &str) -> Self {
        Flow::default().cc(cc)
    }
}
impl Probe {
    pub fn new() -> Self {
        Probe::default()
    }
}
impl Media {
    pub fn new(kind: &str) -> Self {
        Media::default().kind(kind)
    }
}
impl Udp {
    pub fn new() -> Self {
        Udp::default()
    }
}
impl Workload {
    pub fn new() -> Self {
        Workload::default()
    }
}
impl Transient {
    pub fn new() -> Self {
        Transient::default()
    }
}
impl Tunnel {
    pub fn new(name: &str, kind: &str) -> Self {
        Tunnel::default().name(name).kind(kind)
    }
}
impl Change {
    pub fn at(at: &str) -> Self {
        let mut c = Change::default();
        c.0.insert("at".into(), at.val());
        c
    }
}
impl Upstream {
    pub fn new(rate: &str) -> Self {
        Upstream::default().rate(rate)
    }
}
impl Return {
    pub fn new() -> Self {
        Return::default()
    }
}
impl Metrics {
    pub fn new() -> Self {
        Metrics::default()
    }
}
impl Host {
    pub fn new() -> Self {
        Host::default()
    }
    /// No timing noise: exact starts, no per-packet jitter (GSO as the default).
    pub fn quiet() -> Self {
        Host::default().start_spread("0s").jitter("0s")
    }
}

/// A whole scenario: the dumbbell's bottleneck and what runs through it.
#[derive(Clone, Debug)]
pub struct Dumbbell {
    doc: Table,
}

impl Dumbbell {
    /// A bottleneck of `rate` with queue discipline `qdisc`.
    pub fn new(rate: &str, qdisc: &str) -> Self {
        Dumbbell::link(rate).qdisc(qdisc)
    }
    /// A bottleneck of `rate` with the default queue discipline (no `qdisc` key).
    pub fn link(rate: &str) -> Self {
        let mut bottleneck = Table::new();
        bottleneck.insert("rate".into(), rate.val());
        let mut doc = Table::new();
        doc.insert("bottleneck".into(), Value::Table(bottleneck));
        Dumbbell { doc }
    }
    fn top(mut self, key: &str, v: impl Val) -> Self {
        self.doc.insert(key.into(), v.val());
        self
    }
    fn bottleneck(&mut self) -> &mut Table {
        self.doc["bottleneck"].as_table_mut().unwrap()
    }
    fn bn(mut self, key: &str, v: impl Val) -> Self {
        self.bottleneck().insert(key.into(), v.val());
        self
    }
    fn push(table: &mut Table, list: &str, entry: Table) {
        let v = table.entry(list).or_insert_with(|| Value::Array(Vec::new()));
        v.as_array_mut().unwrap().push(Value::Table(entry));
    }
    fn add(mut self, list: &str, entry: Table) -> Self {
        Self::push(&mut self.doc, list, entry);
        self
    }

    pub fn duration(self, d: &str) -> Self {
        self.top("duration", d)
    }
    pub fn seed(self, seed: u64) -> Self {
        self.top("seed", seed)
    }
    pub fn name(self, name: &str) -> Self {
        self.top("name", name)
    }
    pub fn stack(self, stack: &str) -> Self {
        self.top("stack", stack)
    }
    pub fn qdisc(self, qdisc: &str) -> Self {
        self.bn("qdisc", qdisc)
    }
    /// The bottleneck link's own propagation delay.
    pub fn delay(self, d: &str) -> Self {
        self.bn("delay", d)
    }
    /// netem on the bottleneck.
    pub fn netem(self, netem: &str) -> Self {
        self.bn("netem", netem)
    }
    pub fn change(mut self, c: Change) -> Self {
        Self::push(self.bottleneck(), "changes", c.0);
        self
    }
    pub fn upstream(mut self, u: Upstream) -> Self {
        Self::push(self.bottleneck(), "upstream", u.0);
        self
    }
    pub fn return_path(self, r: Return) -> Self {
        self.top("return", Value::Table(r.0))
    }
    pub fn metrics(self, m: Metrics) -> Self {
        self.top("metrics", Value::Table(m.0))
    }
    pub fn host(self, h: Host) -> Self {
        self.top("host", Value::Table(h.0))
    }
    /// Hosts without timing noise (`[host] start_spread = jitter = "0s"`), for tests whose
    /// expectation is an exact time on an ideal path (host_noise.rs covers the noise).
    pub fn quiet_host(self) -> Self {
        self.host(Host::quiet())
    }
    pub fn flow(self, f: Flow) -> Self {
        self.add("flows", f.0)
    }
    pub fn flows(self, fs: impl IntoIterator<Item = Flow>) -> Self {
        fs.into_iter().fold(self, Self::flow)
    }
    pub fn probe(self, p: Probe) -> Self {
        self.add("probes", p.0)
    }
    pub fn media(self, m: Media) -> Self {
        self.add("media", m.0)
    }
    pub fn udp(self, u: Udp) -> Self {
        self.add("udp", u.0)
    }
    pub fn workload(self, w: Workload) -> Self {
        self.add("workloads", w.0)
    }
    pub fn transient(self, t: Transient) -> Self {
        self.add("transients", t.0)
    }
    pub fn tunnel(self, t: Tunnel) -> Self {
        self.add("tunnels", t.0)
    }

    /// The scenario file this builds.
    pub fn toml(&self) -> String {
        toml::to_string(&self.doc).expect("serialisable")
    }
    /// Parses the built document, panicking with the parser's message if it is invalid.
    pub fn build(&self) -> Scenario {
        self.try_build().unwrap_or_else(|e| panic!("invalid scenario: {e}\n{}", self.toml()))
    }
    /// The parser's verdict, for tests of its checks.
    pub fn try_build(&self) -> Result<Scenario, aqmlab_sim::ScenarioError> {
        Scenario::from_toml(&self.toml(), &[])
    }
    pub fn sim(&self) -> Simulation {
        Simulation::new(&self.build())
    }
    /// Runs it and checks packet conservation (see [`run`]).
    pub fn run(&self) -> Summary {
        run(&self.build())
    }
    /// Runs it, checks packet conservation and returns the series too.
    pub fn run_output(&self) -> RunOutput {
        run_output(&self.build())
    }
}

/// Two flows of `cc` whose RTTs differ (10 ms and 160 ms), the RTT-fairness pair.
pub fn rtt_pair(cc: &str) -> [Flow; 2] {
    [Flow::new(cc).rtt("10ms"), Flow::new(cc).rtt("160ms")]
}

/// Sent = delivered + dropped + still inside the network, for every run.
pub fn assert_conserved(s: &Summary) {
    let p = s.packets;
    assert_eq!(p.sent, p.delivered + p.dropped + p.in_flight, "packet conservation: {p:?}");
    assert!(p.sent > 0);
}

pub fn run(sc: &Scenario) -> Summary {
    run_output(sc).summary
}

/// Runs a scenario, checks packet conservation and returns the series too.
pub fn run_output(sc: &Scenario) -> RunOutput {
    let out = Simulation::new(sc).run();
    assert_conserved(&out.summary);
    out
}

/// The one test discipline: a rule applied to each arriving data packet in front of the
/// discipline it wraps (a pfifo for [`Rule::new`]). The rule sees the packet, the time and
/// the wrapped discipline as the packet finds it; it may mark the packet, and drops it by
/// returning false. Its drops and the CE marks it sets are added to the wrapped
/// discipline's counters; everything else is the wrapped discipline's.
pub struct Rule<F: FnMut(&mut Packet, Time, &dyn Qdisc) -> bool> {
    inner: Box<dyn Qdisc>,
    rule: F,
    /// Not the inner kind: `Link::replace_qdisc` would then `change` the existing one.
    kind: &'static str,
    rule_drops: u64,
    rule_marks: u64,
    stats: QdiscStats,
}

impl<F: FnMut(&mut Packet, Time, &dyn Qdisc) -> bool> Rule<F> {
    /// The rule in front of a pfifo of `limit` packets.
    pub fn new(limit: u32, rule: F) -> Box<Self> {
        Self::wrap(Box::new(Fifo::pfifo(limit)), "test-rule", rule)
    }
    /// The rule in front of `inner`, reported as `kind`.
    pub fn wrap(inner: Box<dyn Qdisc>, kind: &'static str, rule: F) -> Box<Self> {
        Box::new(Rule { inner, rule, kind, rule_drops: 0, rule_marks: 0, stats: QdiscStats::default() })
    }
    fn sync(&mut self) {
        // The wrapped discipline's drops by flow are moved into the wrapper's (which the
        // engine drains in a run with workloads, `Qdisc::stats_mut`), only when it dropped.
        let inner = self.inner.stats_mut();
        if inner.drops + self.rule_drops != self.stats.drops {
            let own = &mut self.stats.flow_drops;
            inner.flow_drops.drain(own.apart_from(), |f, n| own.add_n(f, n));
        }
        let s = self.inner.stats();
        let drops = s.drops + self.rule_drops;
        self.stats.enqueued = s.enqueued;
        self.stats.dequeued = s.dequeued;
        self.stats.dequeued_bytes = s.dequeued_bytes;
        self.stats.overlimits = s.overlimits;
        self.stats.drops = drops;
        self.stats.ce_marks = s.ce_marks + self.rule_marks;
    }
}

impl<F: FnMut(&mut Packet, Time, &dyn Qdisc) -> bool> Qdisc for Rule<F> {
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        let r = if pkt.kind != Kind::Data {
            self.inner.enqueue(pkt, now)
        } else {
            let was_ce = pkt.ecn == Ecn::Ce;
            let pass = (self.rule)(&mut pkt, now, &*self.inner);
            self.rule_marks += (!was_ce && pkt.ecn == Ecn::Ce) as u64;
            if pass {
                self.inner.enqueue(pkt, now)
            } else {
                self.rule_drops += 1;
                self.stats.flow_drops.add(pkt.flow);
                Enqueued::Dropped
            }
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
    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        self.inner.for_each_packet(f)
    }
    fn ready_at(&self) -> Option<Time> {
        self.inner.ready_at()
    }
    fn dequeues_when_empty(&self) -> bool {
        self.inner.dequeues_when_empty()
    }
    fn queue_names(&self) -> &'static [&'static str] {
        self.inner.queue_names()
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        self.inner.xstats(out)
    }
}

/// A simulation of `sc` whose bottleneck discipline (built as the engine builds it, same
/// random stream) logs the data arrivals (time, flow): what the bottleneck sees of the
/// senders' bursts.
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
    let rec = log.clone();
    sim.replace_bottleneck_qdisc(Rule::wrap(sc.bottleneck.qdisc.build(&mut ctx), "recorder", move |p: &mut Packet, now, _| {
        rec.borrow_mut().push((now, p.flow));
        true
    }));
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
