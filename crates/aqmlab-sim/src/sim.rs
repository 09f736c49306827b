//! The engine: the event loop, the dispatch of events and packets to path elements and
//! endpoints, the sampling grid, and the summary and series at the end. `build.rs` builds
//! its parts from a scenario.
//!
//! Topology. Flow i's data goes sender → its forward delay (rtt/2) → the shared bottleneck
//! link (rate + qdisc) → [the bottleneck's own propagation delay] → receiver; its ACKs go
//! receiver → its return delay (rtt/2) → the shared return link → sender. Putting the
//! per-flow delay before each shared link mirrors the studies' harness, which applied netem
//! delay on the middlebox's ingress, ahead of the AQM (algorithms.md 4.0).

pub use crate::apps::bulk::FlowSummary;
pub use crate::apps::media::MediaSummary;
pub use crate::apps::probe::ProbeSummary;
pub use crate::apps::udp::UdpSummary;
pub use crate::metrics::SojournSummary;
pub use crate::path::shared::{BottleneckSummary, QueueSummary};

use crate::capture::{Capture, CaptureSpec, CaptureSummary};
use crate::apps::transient::{TransientGroup, TransientSummary};
use crate::apps::workload::{WorkloadSummary, Workloads};
use crate::endpoint::{Endpoint, EndpointSummary, Endpoints};
use crate::event::{Event, EventQueue};
use crate::metrics::{jain_index, Series, SeriesRecorder, Tick};
use crate::packet::Packet;
use crate::packet_ext::{self, ExtStore};
use crate::build::Built;
use crate::path::shared::{ScheduledChange, SharedLink, BOTTLENECK, RETURN};
use crate::path::tunnel::{TunnelSummary, Tunnels};
use crate::path::{Element, ElementCtx, Link};
use crate::profile::Stack;
use crate::qdisc::{self, FlowCounts};
use crate::scenario::Scenario;
use crate::tcp::{EndpointCtx, TcpReceiver, TcpSender};
use crate::time::Time;
use serde::Serialize;

/// A shared link, as the API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkId {
    /// The forward bottleneck (`[bottleneck]`).
    Bottleneck,
    /// The reverse link (`[return]`).
    Return,
    /// The i-th `[[bottleneck.upstream]]` link.
    Upstream(usize),
}

/// A ready-to-run simulation.
pub struct Simulation {
    now: Time,
    end: Time,
    step: Time,
    /// `[metrics] steady_window`; `None`: "auto" (metrics::steady_window).
    steady_window: Option<Time>,
    seed: u64,
    stack: Stack,
    warnings: Vec<String>,
    name: Option<String>,
    events: EventQueue,
    elements: Vec<Element>,
    /// Every endpoint, indexed by endpoint id; each carries its route.
    endpoints: Endpoints,
    /// Load-transient groups (their flows are TCP endpoints).
    transients: Vec<TransientGroup>,
    tunnels: Tunnels,
    /// Packets emitted during the current event, not yet forwarded (the elements' and
    /// endpoints' outbox).
    out: Vec<Packet>,
    /// The round of `out` being forwarded ([`Simulation::forward_outbox`]).
    round: Vec<Packet>,
    /// The shared links: bottleneck, return link, upstream links.
    links: Vec<SharedLink>,
    /// `[[bottleneck.changes]]`, one per link, in the order they apply.
    changes: Vec<ScheduledChange>,
    recorder: SeriesRecorder,
    /// Reused buffer for the disciplines' xstats.
    xstats_buf: Vec<(&'static str, f64)>,
    /// An invariant the run must report as violated ([`Simulation::break_invariant`]).
    break_invariant: Option<BrokenInvariant>,
    /// The pcap taps at the hosts (`--pcap`); `None` costs one branch per packet hop end.
    capture: Option<Box<Capture>>,
    /// `[limits] max_events` and `max_memory`, enforced while the run goes on.
    max_events: u64,
    max_memory: u64,
    /// Events executed when the ceilings are next looked at: before the first event, then
    /// every [`MEMORY_CHECK_EVENTS`] events (resident memory) and at `max_events`. One
    /// comparison per event.
    next_check: u64,
    /// Set when the run stopped at a ceiling; nothing runs after it.
    stopped: Option<LimitExceeded>,
    /// The packets' out-of-line fields (`crate::packet_ext`): the thread's active store
    /// while the simulation runs, this field in between.
    ext: ExtStore,
}

/// Events between two looks at the process's resident memory (`[limits] max_memory`).
const MEMORY_CHECK_EVENTS: u64 = 1 << 20;

/// A run stopped at a `[limits]` ceiling: the key (`limits.max_events`, `limits.max_memory`)
/// and one line saying what was reached. The run's results are not produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitExceeded {
    pub key: &'static str,
    pub message: String,
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The process's resident memory in bytes (Linux `/proc/self/statm`), if known.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Packet accounting at the end of the run.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct Conservation {
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

impl Conservation {
    /// Every packet sent was delivered, dropped or is still held.
    pub fn conserved(&self) -> bool {
        self.sent == self.delivered + self.dropped + self.in_flight
    }
}

/// An invariant a run reports as violated although it holds, for the tests of how a
/// violation reaches the user ([`Simulation::break_invariant`]; the Python extension sets it
/// from its test-only environment variable, `tests/python/test_invariants_cli.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokenInvariant {
    /// One packet of the first flow that sent any counted as sent twice, just before the
    /// per-flow conservation check at the end of the run.
    FlowConservation,
}

impl BrokenInvariant {
    /// By the invariant's name in the violation message (`flow conservation`).
    pub fn from_name(name: &str) -> Option<BrokenInvariant> {
        match name {
            "flow conservation" => Some(BrokenInvariant::FlowConservation),
            _ => None,
        }
    }
}

/// The per-flow packet conservation invariant, checked at the end of every run: for every
/// flow (endpoint id, workload transfers included, so every finite transfer is checked with
/// its final counts; a closed transfer whose packets had all ended was checked then and its
/// counts forgotten, `Workloads::retire_ended`, so it must have none left), packets sent = delivered to an endpoint + dropped by an element (queue
/// disciplines, the ones replaced by a `tc qdisc replace` with the packets they held, netem
/// loss and limit, tunnel anti-replay and ECN drops) + still held by an element (queues, the
/// packet on a link's wire, delay lines, netem). Drops are counted by flow where they happen
/// (`QdiscStats::drop`, one indexed increment); the packets held are counted by walking every
/// element's queues (`Element::for_each_held`), once. `kind` names an endpoint's kind for the
/// message. `dropped` holds the drops already moved out of the elements (a run with
/// workloads moves them once per sampling step: `Simulation::collect_flow_drops`). Panics with
/// "invariant violated: flow conservation: flow <id> (<kind>) sent N, delivered D, dropped K,
/// in flight F". Only the flows with a count are looked at.
pub fn check_flow_conservation(sent: &FlowCounts, delivered: &FlowCounts, mut dropped: FlowCounts, elements: &[Element], kind: impl Fn(u32) -> &'static str) {
    let mut held = FlowCounts::counting_apart_from(sent.apart_from());
    for e in elements {
        e.add_flow_drops(&mut dropped);
        e.for_each_held(&mut |p| held.add(p.flow));
    }
    let mut flows = Vec::new();
    for c in [sent, delivered, &dropped, &held] {
        c.for_each(|f, _| flows.push(f));
    }
    flows.sort_unstable();
    flows.dedup();
    for f in flows {
        let (n, d, k, h) = (sent.get(f), delivered.get(f), dropped.get(f), held.get(f));
        if n != d + k + h {
            panic!("invariant violated: flow conservation: flow {f} ({}) sent {n}, delivered {d}, dropped {k}, in flight {h}", kind(f));
        }
    }
}

/// `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub name: Option<String>,
    pub sim_seconds: f64,
    pub wall_seconds: f64,
    pub events: u64,
    pub seed: u64,
    /// The era profile the run modelled (`stack`, docs/profiles.md).
    pub stack: &'static str,
    /// Things the scenario asked for that run differently than it may seem (also printed
    /// on stderr by the CLI), e.g. `prague` without L4S ECN running as Reno.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub flows: Vec<FlowSummary>,
    pub bottleneck: BottleneckSummary,
    /// The reverse link (the default one when `[return]` is absent).
    pub return_link: BottleneckSummary,
    /// The `[[bottleneck.upstream]]` links, in path order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<BottleneckSummary>,
    /// Jain's index of the flows' D_SS; null when flows go both ways (uploads and
    /// downloads do not share a bottleneck queue), which `jain_steady_by_direction` reports.
    pub jain_steady: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain_steady_by_direction: Option<JainByDirection>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<MediaSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tunnels: Vec<TunnelSummary>,
    pub udp: Vec<UdpSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transients: Vec<TransientSummary>,
    pub packets: Conservation,
    /// The packet capture, when one was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureSummary>,
}

/// Jain's index per direction of a run with uploads and downloads.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct JainByDirection {
    pub up: Option<f64>,
    pub down: Option<f64>,
}

/// Jain's index of the flows' D_SS (`None` if a flow has none); per direction when the flows
/// go both ways.
fn jain_of(flows: &[FlowSummary]) -> (Option<f64>, Option<JainByDirection>) {
    let of = |dir: Option<&str>| -> Option<f64> {
        let steady: Option<Vec<f64>> = flows.iter().filter(|f| dir.map_or(true, |d| f.direction == d)).map(|f| f.steady_mbps).collect();
        steady.and_then(|s| jain_index(&s))
    };
    let mixed = flows.iter().any(|f| f.direction != flows[0].direction);
    if mixed {
        (None, Some(JainByDirection { up: of(Some("up")), down: of(Some("down")) }))
    } else {
        (of(None), None)
    }
}

/// Everything a run produces.
#[derive(Debug)]
pub struct RunOutput {
    pub summary: Summary,
    pub series: Series,
}

impl Simulation {
    /// Builds the run a scenario describes (`build.rs`).
    pub fn new(sc: &Scenario) -> Simulation {
        let Built { events, elements, endpoints, transients, tunnels, links, changes, recorder } = Built::new(sc);
        Simulation {
            now: Time::ZERO,
            end: sc.duration,
            step: sc.metrics.step,
            steady_window: sc.metrics.steady_window,
            seed: sc.seed,
            stack: sc.stack,
            warnings: sc.warnings(),
            name: sc.name.clone(),
            events,
            elements,
            endpoints,
            transients,
            tunnels,
            out: Vec::with_capacity(256),
            round: Vec::with_capacity(256),
            links,
            changes,
            recorder,
            xstats_buf: Vec::new(),
            break_invariant: None,
            capture: None,
            max_events: sc.limits.max_events,
            max_memory: sc.limits.max_memory,
            next_check: 0,
            stopped: None,
            ext: ExtStore::new(),
        }
    }

    /// Looks at the ceilings (when `next_check` events have run): stops the run at
    /// `max_events`, or when the process's resident memory exceeds `max_memory`.
    #[cold]
    fn check_limits(&mut self) {
        let done = self.events.processed();
        if done >= self.max_events {
            self.stopped = Some(LimitExceeded {
                key: "limits.max_events",
                message: format!(
                    "the run reached {done} events at {} of {} simulated and was stopped; nothing was written. Raise [limits] max_events (--max-events) or make the run smaller",
                    self.now, self.end
                ),
            });
            return;
        }
        if let Some(rss) = resident_bytes().filter(|&r| r > self.max_memory) {
            self.stopped = Some(LimitExceeded {
                key: "limits.max_memory",
                message: format!(
                    "the process holds {:.2} GiB at {} of {} simulated, above the limit of {:.2} GiB, and the run was stopped; nothing was written. Raise [limits] max_memory (--max-memory) or make the run smaller",
                    rss as f64 / (1u64 << 30) as f64,
                    self.now,
                    self.end,
                    self.max_memory as f64 / (1u64 << 30) as f64
                ),
            });
            return;
        }
        self.next_check = self.max_events.min(done + MEMORY_CHECK_EVENTS);
    }

    /// Why the run stopped early, if it reached a `[limits]` ceiling.
    pub fn stopped(&self) -> Option<&LimitExceeded> {
        self.stopped.as_ref()
    }

    /// Makes the run report `invariant` as violated at its end although it holds (tests of
    /// how a violation reaches the user only); an explicit option of the caller, never read
    /// from the environment here.
    pub fn break_invariant(&mut self, invariant: BrokenInvariant) {
        self.break_invariant = Some(invariant);
    }

    /// Captures the run's packets at the hosts into two pcap files (`capture`); call
    /// before running. `Err` names an unknown flow or a file that cannot be created.
    pub fn capture(&mut self, spec: &CaptureSpec) -> Result<(), String> {
        self.capture = Some(Box::new(Capture::open(spec, &self.endpoints, self.seed)?));
        Ok(())
    }

    /// Hands the series to `sink` in chunks of about `chunk_values` values while the run goes
    /// on, instead of keeping them all ([`SeriesRecorder::stream_to`]): the memory they take is
    /// then bounded by the chunk, not by the simulated duration. The run's [`RunOutput`] keeps
    /// the ticks after the last chunk (`series.first_tick` says where they start). Call before
    /// running.
    pub fn stream_series(&mut self, sink: crate::metrics::ChunkSink, chunk_values: usize) {
        self.recorder.stream_to(sink, chunk_values);
    }

    /// Runs to the end and returns the summary and series. Panics if the run reaches a
    /// `[limits]` ceiling ([`Simulation::try_run`] returns it instead).
    pub fn run(self) -> RunOutput {
        self.try_run().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Simulation::run`], or the `[limits]` ceiling the run reached (then no results).
    pub fn try_run(mut self) -> Result<RunOutput, LimitExceeded> {
        let wall = std::time::Instant::now();
        self.run_until(self.end);
        if let Some(e) = self.stopped.take() {
            return Err(e);
        }
        self.now = self.end;
        self.sample();
        Ok(self.finish(wall.elapsed().as_secs_f64()))
    }

    /// [`Simulation::run`], stopping every sampling step (`[metrics] step` of simulated
    /// time, at least 1 ms) to call `tick(fraction done)`; `tick` returning `false` cancels
    /// the run (`None`). The events run in the same order as in `run` (the slices only stop
    /// between events), so the results are the same; the cost is one call per step, none per
    /// packet. The last call reports 1.0. `Err`: the run reached a `[limits]` ceiling.
    pub fn run_with(mut self, mut tick: impl FnMut(f64) -> bool) -> Result<Option<RunOutput>, LimitExceeded> {
        let wall = std::time::Instant::now();
        let slice = self.step.max(Time::from_millis(1));
        let mut t = Time::ZERO;
        while t < self.end {
            if !tick(t.as_secs_f64() / self.end.as_secs_f64()) {
                return Ok(None);
            }
            t = Time(t.0.saturating_add(slice.0)).min(self.end);
            self.run_until(t);
            if let Some(e) = self.stopped.take() {
                return Err(e);
            }
        }
        if !tick(1.0) {
            return Ok(None);
        }
        self.now = self.end;
        self.sample();
        Ok(Some(self.finish(wall.elapsed().as_secs_f64())))
    }

    /// Runs `f` with this simulation's packet store active (`crate::packet_ext`): every
    /// entry point that moves, ends or inspects packets goes through it.
    /// The store goes back when `f` returns or panics (an invariant violation unwinds through
    /// here): a caught panic must not leave this simulation's store active in the thread and the
    /// thread's in this simulation (a later call on it would then read the wrong slots).
    fn with_ext<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        /// Gives the store back when dropped, on return or unwind.
        struct Active<'a>(&'a mut Simulation);
        impl Drop for Active<'_> {
            fn drop(&mut self) {
                packet_ext::swap_active(&mut self.0.ext);
            }
        }
        packet_ext::swap_active(&mut self.ext);
        let active = Active(self);
        f(&mut *active.0)
    }

    /// Executes every event up to and including time `t` (or the end of the run). Once the
    /// run has reached a `[limits]` ceiling ([`Simulation::stopped`]) it does nothing.
    pub fn run_until(&mut self, t: Time) {
        self.with_ext(|s| s.run_events(t))
    }

    fn run_events(&mut self, t: Time) {
        if self.stopped.is_some() {
            return;
        }
        let limit = t.min(self.end);
        loop {
            if self.events.processed() >= self.next_check {
                self.check_limits();
                if self.stopped.is_some() {
                    return;
                }
            }
            // Element wake-ups (most events) first: the same event `pop_due` would return,
            // handed to its element without an `Event` built and matched on the way.
            if let Some((at, id)) = self.events.pop_wake_due(limit) {
                self.advance_to(at);
                self.wake_element(id);
                continue;
            }
            let Some((at, ev)) = self.events.pop_due(limit) else { break };
            self.advance_to(at);
            match ev {
                Event::End => break,
                Event::Sample => {
                    self.sample();
                    let next = at + self.step;
                    if next < self.end {
                        self.events.schedule(next, Event::Sample);
                    }
                    self.forward_outbox();
                }
                Event::LinkChange(i) => {
                    let c = &mut self.changes[i as usize];
                    c.apply(self.elements[self.links[c.link].element].as_link_mut(), at);
                    self.forward_outbox();
                }
                Event::Element(id) => self.wake_element(id),
                Event::Flow(f, timer) => {
                    let mut ctx = EndpointCtx { flow: f, now: at, events: &mut self.events, out: &mut self.out };
                    self.endpoints.on_timer(f, timer, &mut ctx);
                    // Most timer events send nothing (at 1000 flows 284 k of 310 k: a timer
                    // whose deadline moved, or one cancelled): no call, no context built.
                    if !self.out.is_empty() {
                        self.forward_outbox();
                    }
                }
            }
        }
        self.now = self.now.max(t.min(self.end));
    }

    /// Moves simulated time to an event's instant.
    #[inline(always)]
    fn advance_to(&mut self, at: Time) {
        // Invariant, checked in every run: simulated time never goes back (an event
        // scheduled in the past is a bug that would otherwise go unnoticed).
        assert!(at >= self.now, "invariant violated: monotonic time: an event at {at} popped at {}", self.now);
        self.now = at;
    }

    /// Element `id`'s wake-up at the current time, and the packets it lets go on their way.
    #[inline(always)]
    fn wake_element(&mut self, id: u32) {
        let Simulation { now, events, out, round, elements, endpoints, capture, .. } = self;
        let mut ctx = ElementCtx { id, now: *now, events, out };
        elements[id as usize].wake(&mut ctx);
        forward(&mut ctx, Hops { round, elements, endpoints, capture });
    }

    /// Current simulated time.
    pub fn now(&self) -> Time {
        self.now
    }
    /// The sender of TCP flow `flow` (an endpoint id below the probes').
    pub fn sender(&self, flow: usize) -> &TcpSender {
        &self.endpoints.tcp(flow).sender
    }
    /// [`Simulation::sender`], mutable (to switch on its per-ACK trace,
    /// [`TcpSender::trace_acks`]).
    pub fn sender_mut(&mut self, flow: usize) -> &mut TcpSender {
        &mut self.endpoints.tcp_mut(flow).sender
    }
    pub fn receiver(&self, flow: usize) -> &TcpReceiver {
        &self.endpoints.tcp(flow).receiver
    }
    /// The short-flow workloads (connection slots, peak concurrency).
    pub fn workloads(&self) -> &Workloads {
        self.endpoints.workloads()
    }
    /// The forward bottleneck link.
    pub fn bottleneck(&self) -> &Link {
        self.link(LinkId::Bottleneck)
    }

    fn link_index(&self, id: LinkId) -> usize {
        match id {
            LinkId::Bottleneck => BOTTLENECK,
            LinkId::Return => RETURN,
            LinkId::Upstream(i) => RETURN + 1 + i,
        }
    }

    /// A shared link. Panics for an upstream link the scenario does not have.
    pub fn link(&self, id: LinkId) -> &Link {
        self.elements[self.links[self.link_index(id)].element].as_link()
    }

    /// Replaces a shared link's queue discipline now, as `tc qdisc replace` does: the
    /// packets queued in the old discipline are dropped (the one being serialised completes).
    /// Returns the packets dropped.
    pub fn replace_qdisc(&mut self, id: LinkId, qdisc: Box<dyn qdisc::Qdisc>) -> u64 {
        let element = self.links[self.link_index(id)].element;
        self.with_ext(|s| s.elements[element].as_link_mut().replace_qdisc(qdisc, s.now))
    }

    /// [`Simulation::replace_qdisc`] of the bottleneck.
    pub fn replace_bottleneck_qdisc(&mut self, qdisc: Box<dyn qdisc::Qdisc>) -> u64 {
        self.replace_qdisc(LinkId::Bottleneck, qdisc)
    }

    /// Forwards the packets an endpoint's timer or a link change emitted ([`forward`]).
    fn forward_outbox(&mut self) {
        let Simulation { now, events, out, round, elements, endpoints, capture, .. } = self;
        // The id is set at each hop.
        let mut ctx = ElementCtx { id: 0, now: *now, events, out };
        forward(&mut ctx, Hops { round, elements, endpoints, capture });
    }

    /// The out-of-line store's invariant, checked at the end of every run: the slots in use
    /// are exactly those of the packets the elements still hold (a slot not given back where
    /// its packet ended is a leak; one given back twice panicked when it happened). Panics
    /// with "invariant violated: packet extension conservation".
    fn check_ext_conservation(&self) {
        let mut carrying = 0usize;
        for e in &self.elements {
            e.for_each_held(&mut |p| carrying += p.has_ext() as usize);
        }
        let in_use = packet_ext::with(|s| s.in_use());
        if in_use != carrying {
            panic!("invariant violated: packet extension conservation: {in_use} slots in use, {carrying} held packets carry one");
        }
    }

    /// Moves the elements' drops by flow to the endpoint table and forgets the counts of the
    /// workload transfers whose packets have all ended: what the run holds by flow then grows
    /// with the transfers open at once, not with the transfer ids, which only grow. Once per
    /// sampling step in a run with workloads, and at its end.
    fn collect_flow_drops(&mut self) {
        let endpoints = &mut self.endpoints;
        let apart_from = endpoints.first_beyond_records();
        for e in &mut self.elements {
            e.drain_flow_drops(apart_from, &mut |f, n| endpoints.count_dropped(f, n));
        }
        endpoints.workloads_mut().retire_ended();
    }

    fn sample(&mut self) {
        if !self.endpoints.workloads().is_empty() {
            self.collect_flow_drops();
        }
        let now = self.now;
        let horizon_s = crate::metrics::steady_horizon(self.steady_window.map(Time::as_secs_f64));
        let tick = Tick { now, t: now.as_secs_f64(), step_s: self.step.as_secs_f64(), horizon_s };
        self.recorder.tick(tick.t);
        for f in self.endpoints.tcp_flows_mut() {
            f.sample(&tick, &mut self.recorder);
        }
        for e in self.endpoints.others_mut() {
            e.sample(&tick, &mut self.recorder);
        }
        for link in &mut self.links {
            link.sample(self.elements[link.element].as_link_mut(), &mut self.recorder, &mut self.xstats_buf);
        }
    }

    fn finish(mut self, wall_seconds: f64) -> RunOutput {
        self.with_ext(|s| s.check_ext_conservation());

        let end = self.end;
        let window_s = self.steady_window.map(Time::as_secs_f64);
        let (mut flows, mut probes, mut media, mut udp, mut workloads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // A transient group's flows are reported by their group.
        flows.extend(self.endpoints.tcp_flows().iter().filter(|f| f.listed).map(|f| f.summary(end, window_s)));
        for e in self.endpoints.others_mut() {
            match e.summary(end) {
                EndpointSummary::Probe(s) => probes.push(s),
                EndpointSummary::Media(s) => media.push(s),
                EndpointSummary::Udp(s) => udp.push(s),
                EndpointSummary::Workloads(s) => workloads = s,
            }
        }
        let (jain_steady, jain_steady_by_direction) = jain_of(&flows);
        let tcp_starts = self.endpoints.tcp_flows().iter().map(|f| f.start);
        let first_start = tcp_starts.chain(self.endpoints.others().iter().filter_map(Endpoint::first_start)).min().unwrap_or(Time::ZERO);
        let mut links: Vec<BottleneckSummary> = (self.links.iter())
            .map(|l| BottleneckSummary::of(self.elements[l.element].as_link(), &l.qdisc_text, l.start_rate, first_start, end))
            .collect();
        let upstream = links.split_off(RETURN + 1);
        let return_link = links.pop().expect("return link");
        let bottleneck = links.pop().expect("bottleneck");
        // Packets sent by endpoints, delivered to them and dropped (as moved out of the
        // elements), by flow (endpoint id): the per-flow conservation check's counts.
        if !self.endpoints.workloads().is_empty() {
            self.collect_flow_drops();
        }
        let (mut flow_sent, flow_delivered, flow_dropped) = self.endpoints.flow_counts();
        let (sent, delivered) = self.endpoints.packet_totals();
        let packets = Conservation {
            sent,
            delivered,
            dropped: self.elements.iter().map(Element::drops).sum::<u64>(),
            in_flight: self.elements.iter().map(|e| e.held() as u64).sum(),
        };
        // Invariant, checked in every run: every packet sent is delivered, dropped or still
        // held by an element. A panic reaches the user as one "internal error" line.
        assert!(packets.conserved(), "invariant violated: packet conservation: {packets:?}");
        if self.break_invariant == Some(BrokenInvariant::FlowConservation) {
            // The test hook: one packet of the first flow that sent any counted twice.
            if let Some(f) = (0..flow_sent.flows() as u32).find(|&f| flow_sent.get(f) > 0) {
                flow_sent.add(f);
            }
        }
        let endpoints = &self.endpoints;
        check_flow_conservation(&flow_sent, &flow_delivered, flow_dropped, &self.elements, |f| endpoints.kind_name(f));
        for f in self.endpoints.tcp_flows() {
            f.check_invariants();
        }
        for e in &self.elements {
            if let Element::Link(l) = e {
                l.check_invariants();
            }
        }
        let endpoints = &self.endpoints;
        let summary = Summary {
            name: self.name.clone(),
            sim_seconds: end.as_secs_f64(),
            wall_seconds,
            events: self.events.processed(),
            seed: self.seed,
            stack: self.stack.name(),
            warnings: std::mem::take(&mut self.warnings),
            flows,
            bottleneck,
            return_link,
            upstream,
            jain_steady,
            jain_steady_by_direction,
            probes,
            media,
            tunnels: self.tunnels.summary(|i| match &self.elements[i as usize] {
                Element::Tunnel(t) => t,
                _ => unreachable!("tunnel element indices point at tunnel elements"),
            }),
            udp,
            workloads,
            transients: (self.transients.iter())
                .map(|g| TransientSummary::of(&g.name, g.start, g.flows.clone().map(|i| endpoints.tcp(i).sender.stats.completed_at)))
                .collect(),
            packets,
            capture: self.capture.take().map(|c| c.finish()),
        };
        RunOutput { summary, series: self.recorder.finish() }
    }
}

/// What a packet's hops reach besides the event queue and the outbox (which the elements'
/// context holds): the simulation's fields, borrowed apart.
struct Hops<'a> {
    round: &'a mut Vec<Packet>,
    elements: &'a mut [Element],
    endpoints: &'a mut Endpoints,
    capture: &'a mut Option<Box<Capture>>,
}

/// Moves every packet emitted during this event (in `ctx.out`) to its next hop (or
/// endpoint), which may emit more; they are handled in emission order. In rounds: the
/// packets emitted so far are swapped out of the outbox and handed on by reference where
/// they lie, while what they cause is emitted into the emptied outbox for the next round
/// (the same order as one growing list). A packet read out of the list being appended to
/// had to be copied out first, and again into the call (two copies of the packet per hop).
///
/// One element context serves every hop of the event (its id set per hop; its time is the
/// event's and its queue and outbox the run's): built per hop, it was six stores each.
#[inline(always)]
fn forward(ctx: &mut ElementCtx, hops: Hops) {
    let Hops { round, elements, endpoints, capture } = hops;
    let now = ctx.now;
    while !ctx.out.is_empty() {
        std::mem::swap(ctx.out, round);
        for pkt in round.iter_mut() {
            let route = if pkt.hop == 0 {
                // The packet counts share the route's cache line (`endpoint::FlowRecord`):
                // one look-up counts the packet and finds its route.
                let route = endpoints.count_sent(pkt.flow);
                route.address(pkt);
                match capture {
                    None => route,
                    Some(c) => {
                        c.tap(pkt, now, endpoints, true);
                        endpoints.route(pkt.flow)
                    }
                }
            } else {
                endpoints.route(pkt.flow)
            };
            if let Some(el) = route.hop(pkt.dir, pkt.hop) {
                pkt.hop += 1;
                ctx.id = el;
                elements[el as usize].receive(pkt, ctx);
            } else {
                endpoints.count_delivered(pkt.flow);
                if let Some(c) = capture {
                    c.tap(pkt, now, endpoints, false);
                }
                let mut ectx = EndpointCtx { flow: pkt.flow, now, events: &mut *ctx.events, out: &mut *ctx.out };
                endpoints.on_packet(pkt.flow, pkt, &mut ectx);
                // The packet ends here: its out-of-line slot, if any, goes back.
                pkt.release();
            }
        }
        round.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way a packet carrying out-of-line fields (`crate::packet_ext`) can end, in one
    /// run: SACK ACKs dropped by a small return queue, tunnelled packets (their tag) lost in
    /// a netem and dropped by the anti-replay window after that netem's jitter reorders them,
    /// and at the bottleneck, where a UDP flood fills the queue, a `tc qdisc replace` that
    /// discards a full queue, deliveries, and the tunnel exit, where a tunnelled packet without
    /// SACK blocks gives its slot back. Probes, media and UDP carry none (their timestamps are
    /// in line) but the media feedback's range is a SACK block. The end-of-run check (slots
    /// in use = held packets carrying one) fails if any of these sites leaked its slot; one
    /// freeing a slot twice panics when it happens.
    const EXT_ENDS: &str = r#"duration = "3s"
[bottleneck]
rate = "10Mbit"
qdisc = "pfifo limit 30"
[return]
rate = "300kbit"
qdisc = "pfifo limit 4"
[[tunnels]]
name = "vpn"
kind = "ipsec"
replay_window = 2
[[flows]]
cc = "cubic"
rtt = "20ms"
tunnel = "vpn"
netem = "delay 5ms 5ms loss 2%"
[[flows]]
cc = "cubic"
rtt = "30ms"
[[probes]]
rtt = "20ms"
interval = "5ms"
netem = "loss 20%"
[[udp]]
kind = "cbr"
rate = "6Mbit"
rtt = "10ms"
[[media]]
kind = "scream"
rtt = "20ms"
"#;

    #[test]
    fn every_end_of_a_packet_gives_its_extension_slot_back() {
        let sc = Scenario::from_toml(EXT_ENDS, &[]).unwrap();
        let mut sim = Simulation::new(&sc);
        // Run until the bottleneck's queue holds tunnelled packets (each carries a slot).
        let queued_with_ext = |sim: &Simulation| {
            let mut n = 0;
            sim.bottleneck().qdisc().for_each_packet(&mut |p| n += p.has_ext() as usize);
            n
        };
        let mut t = Time::from_millis(1000);
        while queued_with_ext(&sim) == 0 && t < Time::from_millis(2500) {
            t = t + Time::from_millis(1);
            sim.run_until(t);
        }
        let (in_use, capacity, queued) = (sim.ext.in_use(), sim.ext.capacity(), queued_with_ext(&sim));
        assert!(queued > 0, "the bottleneck queues tunnelled packets");
        let discarded = sim.replace_bottleneck_qdisc(Box::new(qdisc::Fifo::bfifo(45_000)));
        assert!(discarded >= queued as u64, "the replacement discards the queue");
        assert_eq!(sim.ext.in_use(), in_use - queued, "the discarded packets' slots came back");
        sim.run_until(sim.end);
        let held_with_ext = || {
            let mut n = 0;
            sim.elements.iter().for_each(|e| e.for_each_held(&mut |p| n += p.has_ext() as usize));
            n
        };
        assert_eq!(sim.ext.in_use(), held_with_ext());
        // The slab is sized by the packets carrying a slot at once, not by those sent.
        assert!(capacity > 0 && sim.ext.capacity() < 2000, "{capacity} {}", sim.ext.capacity());
        let out = sim.run();
        let s = &out.summary;
        let sacked_acks_dropped = s.return_link.drops;
        println!(
            "return drops {sacked_acks_dropped}, bottleneck drops {}, replay drops {}, probes {}/{}, udp {}/{}, slots at most {capacity}",
            s.bottleneck.drops, s.tunnels[0].replay_drops, s.probes[0].received, s.probes[0].sent, s.udp[0].received, s.udp[0].sent
        );
        assert!(sacked_acks_dropped > 0 && s.bottleneck.drops > 0 && s.tunnels[0].replay_drops > 0);
        assert!(s.probes[0].received < s.probes[0].sent, "netem lost probes");
        assert!(s.udp[0].received < s.udp[0].sent && s.media[0].frames > 0);
    }

    /// The end-of-run check sees a leaked slot (one taken and never given back).
    #[test]
    fn a_leaked_extension_slot_is_an_invariant_violation() {
        let sc = Scenario::from_toml(EXT_ENDS, &[]).unwrap();
        let mut sim = Simulation::new(&sc);
        sim.run_until(Time::from_millis(200));
        sim.ext.alloc();
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || sim.run())).unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.starts_with("invariant violated: packet extension conservation: "), "{msg}");
    }

    /// Frees the slot of the first held packet carrying one (as a second free of it would
    /// leave it); its handle.
    fn free_a_held_packets_slot(sim: &mut Simulation) -> u32 {
        let mut victim = 0;
        sim.elements.iter().for_each(|e| {
            e.for_each_held(&mut |p| {
                if victim == 0 && p.has_ext() {
                    victim = p.ext;
                }
            })
        });
        assert_ne!(victim, 0, "some held packet carries a slot");
        sim.ext.free(victim);
        victim
    }

    /// The message `f` panics with.
    fn panic_message(f: impl FnOnce()) -> String {
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        err.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    /// A slot given back while its packet is still in the network (as a second free would
    /// leave it) is caught when that packet ends.
    #[test]
    fn a_slot_freed_twice_is_an_invariant_violation() {
        let sc = Scenario::from_toml(EXT_ENDS, &[]).unwrap();
        let mut sim = Simulation::new(&sc);
        sim.run_until(Time::from_millis(200));
        let victim = free_a_held_packets_slot(&mut sim);
        let msg = panic_message(move || {
            sim.run();
        });
        assert!(msg.starts_with(&format!("invariant violated: packet extension: slot {victim} ")), "{msg}");
    }

    /// A run that panics (here at an invariant: a held packet's slot freed behind its back)
    /// gives the thread its own packet store back as it unwinds, and the simulation keeps
    /// its own: Python turns the panic into an exception and the worker process goes on
    /// with the next run in the same thread. Before, the panicking run's store stayed
    /// active in the thread and the thread's sat in the simulation, so a later call on that
    /// simulation read and freed slots of the wrong store.
    #[test]
    fn a_panicking_run_gives_the_packet_store_back() {
        let sc = Scenario::from_toml(EXT_ENDS, &[]).unwrap();
        let thread_store = || packet_ext::with(|s| (s.capacity(), s.in_use()));
        let before = thread_store();
        let mut sim = Simulation::new(&sc);
        sim.run_until(Time::from_millis(200));
        let victim = free_a_held_packets_slot(&mut sim);
        let own = sim.ext.capacity();
        let end = sim.end;
        let msg = panic_message(|| sim.run_until(end));
        assert!(msg.starts_with(&format!("invariant violated: packet extension: slot {victim} ")), "{msg}");
        assert_eq!(thread_store(), before, "the thread's own store is active again");
        assert!(own > 0 && sim.ext.capacity() >= own, "the simulation kept its own store ({own}, now {})", sim.ext.capacity());
        // Another simulation in the same thread runs to its end-of-run checks.
        let other = Simulation::new(&sc).run();
        assert!(other.summary.bottleneck.packets > 0);
        assert_eq!(thread_store(), before);
    }

    /// The test hook of how a violation reaches the user is an explicit option of the caller
    /// (the Python extension reads its environment variable): set, the run reports flow 0's
    /// conservation as broken by exactly one packet; not set, the same run passes its checks.
    #[test]
    fn a_broken_invariant_is_asked_for_explicitly() {
        let sc = Scenario::from_toml("duration = \"300ms\"\n[bottleneck]\nrate = \"10Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n", &[]).unwrap();
        let clean = Simulation::new(&sc).run();
        let p = clean.summary.packets;
        assert!(p.conserved() && p.sent > 100, "{p:?}");
        let mut sim = Simulation::new(&sc);
        sim.break_invariant(BrokenInvariant::FlowConservation);
        let msg = panic_message(|| {
            sim.run();
        });
        let counts = msg.strip_prefix("invariant violated: flow conservation: flow 0 (TCP) ").unwrap_or_else(|| panic!("{msg}"));
        let n: Vec<u64> = counts.split(", ").map(|c| c.rsplit(' ').next().unwrap().parse().unwrap()).collect();
        assert_eq!(n[0], n[1] + n[2] + n[3] + 1, "{msg}");
        assert_eq!(BrokenInvariant::from_name("flow conservation"), Some(BrokenInvariant::FlowConservation));
        assert_eq!(BrokenInvariant::from_name("packet conservation"), None);
    }

    /// A workload transfer's counts are forgotten once its packets have all ended; a packet
    /// of it counted after that (as a bug would) is still caught by the end-of-run check and
    /// named by its transfer id, as before the counts were forgotten.
    #[test]
    fn a_packet_counted_after_its_transfer_was_retired_breaks_flow_conservation() {
        let text = "duration = \"3s\"\n[bottleneck]\nrate = \"20Mbit\"\n[[workloads]]\nname = \"w\"\nrtt = \"20ms\"\nmean_interarrival = \"50ms\"\nsize_p5 = 5000\nsize_p95 = 5000\nstop = \"2s\"\n";
        let sc = Scenario::from_toml(text, &[]).unwrap();
        let mut sim = Simulation::new(&sc);
        sim.run_until(Time::from_millis(2500));
        let w = sim.endpoints.workloads();
        let started = w.summaries()[0].started as usize;
        assert!(started > 20 && w.packet_counts_held() < started / 4, "{} of {started} held", w.packet_counts_held());
        // The first two transfers (after the one arrival clock) finished long ago: one packet
        // delivered to the first that the second is counted as having sent (the totals hold).
        let first = sim.endpoints.first_beyond_records() + 1;
        sim.endpoints.count_delivered(first);
        sim.endpoints.count_sent(first + 1);
        let msg = panic_message(|| {
            sim.run();
        });
        assert!(msg.starts_with(&format!("invariant violated: flow conservation: flow {first} (workload transfer) sent 0, delivered 1")), "{msg}");
    }

    /// Two simulations stepped in turn in one thread (each `run_until` swaps its own packet
    /// store in and out, `crate::packet_ext`) give exactly the results each gives alone: no
    /// slot of one is read, freed or reused by the other. The scenario's tunnelled flow and
    /// SACK ACKs keep slots alive across the steps.
    #[test]
    fn simulations_stepped_in_turn_keep_their_own_packet_stores() {
        let fingerprint = |out: RunOutput| {
            let mut summary = serde_json::to_value(&out.summary).unwrap();
            summary["wall_seconds"] = serde_json::Value::Null;
            let values: Vec<u64> = out.series.columns.iter().flat_map(|c| c.values.iter().map(|v| v.to_bits())).collect();
            (summary.to_string(), values)
        };
        let scenario = |seed: u64| Scenario::from_toml(&format!("seed = {seed}\n{EXT_ENDS}"), &[]).unwrap();
        let (a, b) = (scenario(1), scenario(2));
        let alone = (fingerprint(Simulation::new(&a).run()), fingerprint(Simulation::new(&b).run()));
        assert_ne!(alone.0, alone.1, "the seeds give different runs");
        let (mut sa, mut sb) = (Simulation::new(&a), Simulation::new(&b));
        let (mut t, mut both_hold_slots) = (Time::ZERO, 0);
        while t < sa.end {
            t = t + Time::from_millis(7);
            sa.run_until(t);
            sb.run_until(t);
            both_hold_slots += (sa.ext.in_use() > 0 && sb.ext.in_use() > 0) as u32;
        }
        assert!(both_hold_slots > 10, "{both_hold_slots}");
        assert_eq!((fingerprint(sa.run()), fingerprint(sb.run())), alone);
    }

    /// Issue 14, "Invariants": the event queue accepted times in the past and the loop never
    /// checked. An event scheduled behind the current time now stops the run with the
    /// monotonic-time invariant (in builds with debug assertions, the queue's own check
    /// fires first), where it used to be executed with simulated time going back.
    #[test]
    fn an_event_in_the_past_is_reported_as_an_invariant_violation() {
        let sc = Scenario::from_toml("duration = \"2s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n", &[]).unwrap();
        let mut sim = Simulation::new(&sc);
        sim.run_until(Time::from_millis(500));
        assert!(sim.now() >= Time::from_millis(499), "{:?}", sim.now());
        // Undisturbed, the rest of the run keeps time monotonic.
        let mut clean = Simulation::new(&sc);
        clean.run_until(Time::from_millis(1500));
        let past = sim.now() - Time::from_millis(300);
        // Debug builds catch it when it is scheduled, release builds when it pops.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sim.events.schedule(past, Event::Sample);
            sim.run_until(Time::from_millis(1500))
        }));
        let msg = r.expect_err("an event in the past must not run silently");
        let msg = msg.downcast_ref::<String>().cloned().or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        assert!(msg.contains("invariant violated: monotonic time") || msg.contains("scheduled in the past"), "{msg}");
    }
}
