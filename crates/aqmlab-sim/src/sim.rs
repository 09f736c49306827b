//! The engine: builds the dumbbell from a scenario, runs the event loop, and collects the
//! summary and series.
//!
//! Topology. Flow i's data goes sender → its forward delay (rtt/2) → the shared bottleneck
//! link (rate + qdisc) → [the bottleneck's own propagation delay] → receiver; its ACKs go
//! receiver → its return delay (rtt/2) → the shared return link → sender. Putting the
//! per-flow delay before each shared link mirrors the studies' harness, which applied netem
//! delay on the middlebox's ingress, ahead of the AQM (algorithms.md 4.0).

use crate::apps::probe::ProbeConfig;
use crate::apps::scream::{Scream, ScreamConfig};
use crate::apps::transient::{self, TransientSummary};
use crate::apps::udp::{Pattern, UdpConfig};
use crate::apps::workload::{WorkloadSummary, Workloads};
use crate::apps::{Probe, UdpSource};
use crate::event::{Event, EventQueue, FlowTimer};
use crate::link::{DelayLine, Element, ElementCtx, Link};
use crate::metrics::{jain_index, steady_state_rate, LogHistogram, Series, SeriesId, SeriesRecorder, SpikeSummary, SpikeTracker};
use crate::packet::{Direction, Packet};
use crate::path::netem::{Netem, NetemSpec};
use crate::path::tunnel::{TunnelSummary, Tunnels};
use crate::qdisc;
use crate::rng::Stream;
use crate::scenario::{default_return_qdisc, Codepoint, ProbeKind, Scenario, UdpKind, Way, DEFAULT_UDP_FRAME_RATE, LINK_MTU};
use crate::shared_links::{self, ScheduledChange, SharedLink};
use crate::tcp::{EndpointCtx, TcpConfig, TcpReceiver, TcpSender};
use crate::time::Time;
use serde::Serialize;

/// Per-flow series handles.
struct FlowSeries {
    goodput: SeriesId,
    delivery_rate: SeriesId,
    srtt: SeriesId,
    cwnd: SeriesId,
    retransmits: SeriesId,
}

struct Flow {
    name: String,
    rtt: Time,
    start: Time,
    stop: Option<Time>,
    sender: TcpSender,
    receiver: TcpReceiver,
    series: FlowSeries,
    last_delivered: u64,
    last_retransmits: u64,
    /// Delivery-rate samples (s, Mbit/s) while the flow runs, for the steady-state rate.
    rate_samples: Vec<(f64, f64)>,
}

impl Flow {
    /// The flow stops contributing samples after its stop time or its completion.
    fn active_at(&self, t: Time) -> bool {
        t >= self.start && self.stop.map_or(true, |s| t <= s) && self.sender.stats.completed_at.map_or(true, |c| t <= c)
    }
    fn end_time(&self, run_end: Time) -> Time {
        let mut e = run_end;
        if let Some(s) = self.stop {
            e = e.min(s);
        }
        if let Some(c) = self.sender.stats.completed_at {
            e = e.min(c);
        }
        e
    }
}

/// A TCP flow to build: one copy of a `[[flows]]` entry or one member of a transient group.
struct FlowPlan<'a> {
    name: String,
    cc: &'a crate::cc::CcSpec,
    rtt: Time,
    start: Time,
    stop: Option<Time>,
    cfg: TcpConfig,
    direction: Way,
    netem: Option<&'a NetemSpec>,
    ecn_rewrite: Option<Codepoint>,
    host: u16,
    tunnel: Option<&'a str>,
}

/// A load-transient group: its start and its flows (a range of `Simulation::flows`).
struct TransientGroup {
    name: String,
    start: Time,
    flows: std::ops::Range<usize>,
}

/// A latency probe with its series handles.
struct ProbeFlow {
    name: String,
    kind: ProbeKind,
    rtt_base: Time,
    start: Time,
    probe: Probe,
    rtt: SeriesId,
    /// One-way delays (up, down), for the kinds that measure them.
    owd: Option<(SeriesId, SeriesId)>,
}

/// A media flow (SCReAM) with its series handles.
struct MediaFlow {
    name: String,
    ecn: &'static str,
    rtt_base: Time,
    start: Time,
    stop: Option<Time>,
    app: Scream,
    target: SeriesId,
    bitrate: SeriesId,
    qdelay: SeriesId,
    cwnd: SeriesId,
}

impl MediaFlow {
    fn end_time(&self, run_end: Time) -> Time {
        self.stop.map_or(run_end, |s| s.min(run_end))
    }
}

/// An unresponsive UDP flow with its series handles.
struct UdpFlow {
    name: String,
    kind: &'static str,
    start: Time,
    stop: Option<Time>,
    app: UdpSource,
    /// Payload received per tick, Mbit/s.
    rate: SeriesId,
    /// Mean one-way delay per tick, ms.
    owd: SeriesId,
}

/// The way a packet travels through the dumbbell: `Up` from the client side to the server side
/// (over the bottleneck), `Down` back (over the return link).
const UP: usize = 0;
const DOWN: usize = 1;

/// The elements every endpoint pair shares, per travel direction, in path order.
struct SharedPath {
    hops: [Vec<u32>; 2],
}

/// The elements one endpoint pair adds around the shared path, per travel direction.
#[derive(Default)]
struct PathSides {
    /// Between the endpoint's own base delay and the shared path (e.g. ECN rewriting).
    before: [Vec<u32>; 2],
    /// After the shared path, at the far end (e.g. a tunnel exit).
    after: [Vec<u32>; 2],
}

impl PathSides {
    /// The sides of an endpoint pair carried in the tunnel called `name`, if any: the tunnel's
    /// entry first (so per-flow rewriting acts on the outer header), its exit last.
    fn tunnelled(tunnels: &Tunnels, name: Option<&str>) -> PathSides {
        let mut sides = PathSides::default();
        if let Some(i) = name.map(|n| tunnels.index(n)) {
            for way in [UP, DOWN] {
                sides.before[way].push(tunnels.entries(i)[way]);
                sides.after[way].push(tunnels.exits(i)[way]);
            }
        }
        sides
    }
}

impl SharedPath {
    /// Builds an endpoint pair's routes: in each travel direction its base delay (half the
    /// RTT each way), its own elements, the shared hops, its far-end elements. The data
    /// (`Direction::Forward`) travels up unless `data_down`.
    fn route(&self, elements: &mut Vec<Element>, rtt: Time, sides: PathSides, data_down: bool) -> [Box<[u32]>; 2] {
        let half = [Time(rtt.0 / 2), rtt - Time(rtt.0 / 2)];
        let mut ways: [Vec<u32>; 2] = Default::default();
        for way in [UP, DOWN] {
            elements.push(Element::Delay(DelayLine::new(half[way])));
            let r = &mut ways[way];
            r.push((elements.len() - 1) as u32);
            r.extend(&sides.before[way]);
            r.extend(&self.hops[way]);
            r.extend(&sides.after[way]);
        }
        let [up, down] = ways.map(Vec::into_boxed_slice);
        if data_down {
            [down, up]
        } else {
            [up, down]
        }
    }
}

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

/// Indices of the bottleneck and the return link in `Simulation::links`; the upstream links
/// follow.
const BOTTLENECK: usize = 0;
const RETURN: usize = 1;

/// The link at a shared link's element index.
fn link_at(elements: &[Element], i: usize) -> &Link {
    match &elements[i] {
        Element::Link(l) => l,
        _ => unreachable!("shared links are links"),
    }
}

fn link_at_mut(elements: &mut [Element], i: usize) -> &mut Link {
    match &mut elements[i] {
        Element::Link(l) => l,
        _ => unreachable!("shared links are links"),
    }
}

/// Adds one netem element per travel direction (indexed by `UP`/`DOWN`), each drawing from
/// its own stream `netem/<label>/up|down`.
fn netem_pair(elements: &mut Vec<Element>, spec: &NetemSpec, seed: u64, label: &str) -> [u32; 2] {
    [UP, DOWN].map(|way| {
        let stream = Stream::new(seed, &format!("netem/{label}/{}", ["up", "down"][way]));
        elements.push(Element::Netem(Box::new(Netem::new(spec.config.clone(), stream))));
        (elements.len() - 1) as u32
    })
}

/// A ready-to-run simulation.
pub struct Simulation {
    now: Time,
    end: Time,
    step: Time,
    steady_window: Time,
    seed: u64,
    name: Option<String>,
    events: EventQueue,
    elements: Vec<Element>,
    /// Element indices of each flow's route, per direction.
    routes: Vec<[Box<[u32]>; 2]>,
    /// TCP flows: the `[[flows]]` copies (the first `bulk_flows`), then the transient groups'.
    flows: Vec<Flow>,
    bulk_flows: usize,
    transients: Vec<TransientGroup>,
    /// Short-flow workloads; their endpoint ids follow the media flows'.
    workloads: Workloads,
    /// Client host of each TCP flow (scenario `host`) and whether its data travels down
    /// (from the server side to the client).
    client_hosts: Vec<(u16, bool)>,
    /// Probes; their endpoint ids follow the TCP flows' (`flows.len() + i`).
    probes: Vec<ProbeFlow>,
    /// Media flows; their endpoint ids follow the probes' (`flows.len() + probes.len() + i`).
    media: Vec<MediaFlow>,
    tunnels: Tunnels,
    /// UDP flows; their endpoint ids follow the media flows'.
    udp: Vec<UdpFlow>,
    out: Vec<Packet>,
    /// The shared links: bottleneck, return link, upstream links.
    links: Vec<SharedLink>,
    /// `[[bottleneck.changes]]`, one per link, in the order they apply.
    changes: Vec<ScheduledChange>,
    recorder: SeriesRecorder,
    /// Reused buffer for the disciplines' xstats.
    xstats_buf: Vec<(&'static str, f64)>,
    packets_sent: u64,
    packets_delivered: u64,
}

/// Summary of one flow (`summary.json` → `flows[]`).
#[derive(Clone, Debug, Serialize)]
pub struct FlowSummary {
    pub name: String,
    pub cc: String,
    pub rtt_ms: f64,
    pub start_s: f64,
    /// Mean goodput (in-order payload at the receiver) from start to the flow's end.
    pub goodput_mbps: f64,
    /// Steady-state delivery rate D_SS (algorithms.md 5.2); null if the window is empty.
    pub steady_mbps: Option<f64>,
    pub bytes_delivered: u64,
    pub retransmits: u64,
    pub rto_events: u64,
    pub fast_recoveries: u64,
    pub ce_received: u64,
    /// SCE-marked (ECT(1)) data packets received, on `ecn = "sce"` flows.
    pub sce_received: u64,
    /// Flow completion time of a finite transfer, from its start.
    pub fct_s: Option<f64>,
}

/// Delay percentiles in milliseconds (queue sojourn, probe and UDP delays).
#[derive(Clone, Debug, Serialize)]
pub struct SojournSummary {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// The distribution as `[ms, fraction of packets at or below]` points (at most 200, see
    /// `LogHistogram::cdf`); bottleneck queues only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cdf: Option<Vec<[f64; 2]>>,
}

impl SojournSummary {
    fn of(h: &LogHistogram) -> Self {
        let ms = |v: Option<f64>| v.map(|x| x * 1e-6);
        SojournSummary {
            p50: ms(h.quantile(0.50)),
            p95: ms(h.quantile(0.95)),
            p99: ms(h.quantile(0.99)),
            p999: ms(h.quantile(0.999)),
            max: ms(h.max().map(|x| x as f64)),
            mean: ms(h.mean()),
            cdf: None,
        }
    }
    /// Every value less `base_ms` (the delay a probe adds over its base RTT).
    fn minus(&self, base_ms: f64) -> Self {
        let d = |v: Option<f64>| v.map(|x| x - base_ms);
        SojournSummary { p50: d(self.p50), p95: d(self.p95), p99: d(self.p99), p999: d(self.p999), max: d(self.max), mean: d(self.mean), cdf: None }
    }
    /// With the CDF.
    fn with_cdf(h: &LogHistogram) -> Self {
        let cdf = h.cdf().into_iter().map(|(v, f)| [v as f64 * 1e-6, f]).collect();
        SojournSummary { cdf: Some(cdf), ..Self::of(h) }
    }
}

/// A shared link (`summary.json` → `bottleneck`, `return_link`, `upstream[]`).
#[derive(Clone, Debug, Serialize)]
pub struct BottleneckSummary {
    /// The rate at the start of the run (`[[bottleneck.changes]]` may change it; the `rate`
    /// series has it over time).
    pub rate_mbps: f64,
    /// The discipline at the start of the run, as given.
    pub qdisc: String,
    /// Packets that left the bottleneck.
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub ce_marks: u64,
    /// Busy fraction from the first flow's start to the end of the run.
    pub utilization: f64,
    pub sojourn_ms: SojournSummary,
    /// Per sub-queue sojourn (e.g. DualPI2's C and L queues); empty for single-queue disciplines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSummary>,
    /// Delay-spike durations per `[metrics] spike_thresholds` entry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spikes: Vec<SpikeSummary>,
}

impl BottleneckSummary {
    /// `rate` is the link's rate at the start; utilisation counts from `first_start` to `end`.
    fn of(link: &Link, qdisc_text: &str, rate: crate::time::Rate, first_start: Time, end: Time) -> Self {
        let span = end - first_start;
        let mut all = LogHistogram::default();
        for q in &link.stats.queues {
            all.merge(&q.sojourn);
        }
        let queues = if link.stats.queues.len() > 1 {
            (link.stats.queues.iter())
                .map(|q| QueueSummary { name: q.name.to_string(), packets: q.sojourn.count(), sojourn_ms: SojournSummary::with_cdf(&q.sojourn) })
                .collect()
        } else {
            Vec::new()
        };
        BottleneckSummary {
            rate_mbps: rate.as_mbps(),
            qdisc: qdisc_text.to_string(),
            packets: link.stats.tx_packets,
            bytes: link.stats.tx_bytes,
            drops: link.drops(),
            ce_marks: link.ce_marks(),
            utilization: if span > Time::ZERO { link.stats.busy.as_secs_f64() / span.as_secs_f64() } else { 0.0 },
            sojourn_ms: SojournSummary::with_cdf(&all),
            queues,
            spikes: link.stats.spikes.as_ref().map_or_else(Vec::new, |s| s.summary(end)),
        }
    }
}

/// One sub-queue of the bottleneck discipline.
#[derive(Clone, Debug, Serialize)]
pub struct QueueSummary {
    pub name: String,
    /// Packets dequeued from this sub-queue.
    pub packets: u64,
    pub sojourn_ms: SojournSummary,
}

/// Packet accounting at the end of the run.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct Conservation {
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

/// `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub name: Option<String>,
    pub sim_seconds: f64,
    pub wall_seconds: f64,
    pub events: u64,
    pub seed: u64,
    pub flows: Vec<FlowSummary>,
    pub bottleneck: BottleneckSummary,
    /// The reverse link (the default one when `[return]` is absent).
    pub return_link: BottleneckSummary,
    /// The `[[bottleneck.upstream]]` links, in path order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<BottleneckSummary>,
    pub jain_steady: Option<f64>,
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
}

/// An unresponsive UDP flow (`summary.json` → `udp[]`).
#[derive(Clone, Debug, Serialize)]
pub struct UdpSummary {
    pub name: String,
    pub kind: String,
    /// Packets sent and received.
    pub sent: u64,
    pub received: u64,
    /// Packets missing below the highest sequence number received (RFC 3550 A.3).
    pub lost: u64,
    /// Payload received over the flow's span (start to stop or the end of the run), Mbit/s.
    pub mean_mbps: f64,
    pub owd_ms: SojournSummary,
}

/// A media flow (`summary.json` → `media[]`); rates in Mbit/s over its active span.
#[derive(Clone, Debug, Serialize)]
pub struct MediaSummary {
    pub name: String,
    pub kind: String,
    pub ecn: String,
    pub rtt_base_ms: f64,
    pub start_s: f64,
    /// Time average of the congestion control's target bitrate.
    pub mean_target_mbps: f64,
    /// RTP bitrate sent (what the encoder produced and the pacer released).
    pub mean_bitrate_mbps: f64,
    /// RTP bitrate received.
    pub mean_received_mbps: f64,
    pub frames: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Losses the sender detected from the feedback.
    pub losses: u64,
    pub ce_marked: u64,
    /// Times the RTP queue was cleared because it grew too old.
    pub rtp_queue_discards: u64,
}

/// A latency probe (`summary.json` → `probes[]`); delays in ms.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeSummary {
    pub name: String,
    /// `irtt` or `ping`.
    pub kind: &'static str,
    /// Propagation delay of the probe's path (its `rtt` plus the shared links' delays).
    pub rtt_base_ms: f64,
    pub sent: u64,
    pub received: u64,
    pub rtt_ms: SojournSummary,
    /// RTT less `rtt_base_ms` (algorithms.md 5.6): queueing plus the probe's own
    /// serialisation on each link.
    pub induced_ms: SojournSummary,
    /// One-way delays; null for ping, which measures the round trip only.
    pub owd_up_ms: Option<SojournSummary>,
    pub owd_down_ms: Option<SojournSummary>,
}

impl ProbeSummary {
    fn of(p: &ProbeFlow) -> Self {
        let st = &p.probe.stats;
        let one_way = p.owd.is_some();
        let rtt = SojournSummary::of(&st.rtt.all);
        ProbeSummary {
            name: p.name.clone(),
            kind: match p.kind {
                ProbeKind::Irtt => "irtt",
                ProbeKind::Ping => "ping",
            },
            rtt_base_ms: p.rtt_base.as_millis_f64(),
            sent: st.sent,
            received: st.received,
            induced_ms: rtt.minus(p.rtt_base.as_millis_f64()),
            rtt_ms: rtt,
            owd_up_ms: one_way.then(|| SojournSummary::of(&st.owd_up.all)),
            owd_down_ms: one_way.then(|| SojournSummary::of(&st.owd_down.all)),
        }
    }
}

/// Everything a run produces.
#[derive(Debug)]
pub struct RunOutput {
    pub summary: Summary,
    pub series: Series,
}

impl Simulation {
    pub fn new(sc: &Scenario) -> Simulation {
        let ticks = (sc.duration.0 / sc.metrics.step.0) as usize + 1;
        let mut recorder = SeriesRecorder::with_ticks(ticks);
        let mut elements = Vec::new();
        let mut links = Vec::new();
        let mut add_link = |elements: &mut Vec<Element>, name: &str, spec: &qdisc::QdiscSpec, rate, label: &str| {
            let mut ctx = qdisc::BuildCtx { link_rate: rate, mtu: LINK_MTU, rng: Stream::new(sc.seed, label), stack: sc.stack };
            elements.push(Element::Link(Link::new(rate, spec.build(&mut ctx))));
            links.push(SharedLink::new(name, elements.len() - 1, spec.text(), rate));
            (elements.len() - 1) as u32
        };
        let bottleneck = add_link(&mut elements, "bottleneck", &sc.bottleneck.qdisc, sc.bottleneck.rate, "qdisc/bottleneck");
        if !sc.metrics.spike_thresholds.is_empty() {
            let tracker = SpikeTracker::new(&sc.metrics.spike_thresholds, sc.bottleneck.rate, sc.metrics.spike_after);
            link_at_mut(&mut elements, bottleneck as usize).stats.spikes = Some(tracker);
        }
        let (ret_rate, ret_qdisc) = match &sc.return_path {
            Some(r) => (r.rate.unwrap_or(sc.bottleneck.rate), r.qdisc.clone()),
            None => (sc.bottleneck.rate, default_return_qdisc()),
        };
        let return_link = add_link(&mut elements, "return_link", &ret_qdisc, ret_rate, "qdisc/return");
        // Upstream links come first on the way up, each followed by its own delay.
        let mut shared = SharedPath { hops: [Vec::new(), vec![return_link]] };
        let mut path_delay = sc.bottleneck.delay;
        for (i, u) in sc.bottleneck.upstream.iter().enumerate() {
            let l = add_link(&mut elements, &format!("upstream-{i}"), &u.qdisc, u.rate, &format!("qdisc/upstream/{i}"));
            shared.hops[UP].push(l);
            if u.delay > Time::ZERO {
                elements.push(Element::Delay(DelayLine::new(u.delay)));
                shared.hops[UP].push((elements.len() - 1) as u32);
            }
            path_delay += u.delay;
        }
        shared.hops[UP].push(bottleneck);
        if sc.bottleneck.delay > Time::ZERO {
            elements.push(Element::Delay(DelayLine::new(sc.bottleneck.delay)));
            shared.hops[UP].push((elements.len() - 1) as u32);
        }
        if let Some(spec) = &sc.bottleneck.netem {
            for (way, el) in netem_pair(&mut elements, spec, sc.seed, "bottleneck").into_iter().enumerate() {
                shared.hops[way].insert(0, el);
            }
        }
        let rates = links.iter().map(|l| l.start_rate).collect();
        let changes = shared_links::schedule(sc, BOTTLENECK, RETURN, rates);
        for (i, link) in links.iter_mut().enumerate() {
            // The return link is observed when configured (or changed); the others always.
            let changed = changes.iter().any(|c| c.link == i);
            if i == RETURN && sc.return_path.is_none() && !changed {
                continue;
            }
            let mut disciplines = vec![link_at(&elements, link.element).qdisc()];
            disciplines.extend(changes.iter().filter(|c| c.link == i).filter_map(ScheduledChange::qdisc));
            link.register_series(&mut recorder, &disciplines);
        }

        let tunnels = Tunnels::build(&sc.tunnels, |t| {
            elements.push(Element::Tunnel(t));
            (elements.len() - 1) as u32
        });

        let mut plans = Vec::new();
        for spec in &sc.flows {
            for k in 0..spec.count {
                let name = match (&spec.name, spec.count) {
                    (Some(n), 1) => n.clone(),
                    (Some(n), _) => format!("{n}-{k}"),
                    (None, _) => format!("{}-{}", spec.cc.config().name(), plans.len()),
                };
                let cfg = TcpConfig {
                    pacing: spec.pacing,
                    rwnd_packets: spec.rwnd.map(|b| (b / spec.mss as u64).max(1) as u32),
                    ..TcpConfig::connection(spec.mss, spec.initial_cwnd, spec.initial_rto, spec.ecn, spec.size)
                }
                .on_host(spec.gso.unwrap_or(sc.host.gso), sc.stack);
                let (rtt, start, stop, direction, ecn_rewrite, host) = (spec.rtt, spec.start, spec.stop, spec.direction, spec.ecn_rewrite, spec.host);
                plans.push(FlowPlan { name, cc: &spec.cc, rtt, start, stop, cfg, direction, netem: spec.netem.as_ref(), ecn_rewrite, host, tunnel: spec.tunnel.as_deref() });
            }
        }
        let bulk_flows = plans.len();
        let mut transients = Vec::new();
        for (i, t) in sc.transients.iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(|| format!("transient-{i}"));
            let start = transient::group_start(sc.seed, &name, t.start, t.start_jitter);
            let first = plans.len();
            for (k, size) in transient::split(t.total, t.flows).enumerate() {
                let cfg = TcpConfig::connection(t.mss, t.initial_cwnd, t.initial_rto, t.ecn, Some(size)).on_host(sc.host.gso, sc.stack);
                let (rtt, direction) = (t.rtt, t.direction);
                plans.push(FlowPlan { name: format!("{name}-{k}"), cc: &t.cc, rtt, start, stop: None, cfg, direction, netem: None, ecn_rewrite: None, host: 0, tunnel: None });
            }
            transients.push(TransientGroup { name, start, flows: first..plans.len() });
        }
        let mut flows = Vec::new();
        let mut routes = Vec::new();
        let mut client_hosts = Vec::new();
        for (id, p) in plans.into_iter().enumerate() {
            let id = id as u32;
            let cc = p.cc.config().build(Stream::new(sc.seed, &format!("cc/{id}")), sc.stack);
            let data_down = p.direction == Way::Down;
            let data_way = if data_down { DOWN } else { UP };
            let mut sides = PathSides::tunnelled(&tunnels, p.tunnel);
            if let Some(n) = p.netem {
                for (way, el) in netem_pair(&mut elements, n, sc.seed, &format!("flow/{id}")).into_iter().enumerate() {
                    sides.before[way].push(el);
                }
            }
            if let Some(cp) = p.ecn_rewrite {
                elements.push(Element::EcnRewrite(cp.ecn()));
                sides.before[data_way].push((elements.len() - 1) as u32);
            }
            routes.push(shared.route(&mut elements, p.rtt, sides, data_down));
            client_hosts.push((p.host, data_down));
            let name = p.name;
            let series = FlowSeries {
                goodput: recorder.register(&name, "goodput", "Mbit/s"),
                delivery_rate: recorder.register(&name, "delivery_rate", "Mbit/s"),
                srtt: recorder.register(&name, "srtt", "ms"),
                cwnd: recorder.register(&name, "cwnd", "packets"),
                retransmits: recorder.register(&name, "retransmits", "packets"),
            };
            flows.push(Flow {
                name,
                rtt: p.rtt + path_delay,
                start: p.start,
                stop: p.stop,
                sender: TcpSender::new(id, p.cfg.clone(), cc),
                receiver: TcpReceiver::new(id, &p.cfg),
                series,
                last_delivered: 0,
                last_retransmits: 0,
                rate_samples: Vec::with_capacity(ticks),
            });
        }
        let mut probes = Vec::new();
        for (i, spec) in sc.probes.iter().enumerate() {
            let id = (flows.len() + i) as u32;
            let name = spec.name.clone().unwrap_or_else(|| format!("probe-{i}"));
            let mut sides = PathSides::tunnelled(&tunnels, spec.tunnel.as_deref());
            if let Some(n) = &spec.netem {
                for (way, el) in netem_pair(&mut elements, n, sc.seed, &format!("probe/{i}")).into_iter().enumerate() {
                    sides.before[way].push(el);
                }
            }
            routes.push(shared.route(&mut elements, spec.rtt, sides, false));
            let one_way = spec.kind == ProbeKind::Irtt;
            let cfg = ProbeConfig { interval: spec.interval(sc.metrics.step), wire_len: spec.size(), one_way, ecn: spec.ecn.ecn(), dscp: spec.dscp, stop: spec.stop };
            probes.push(ProbeFlow {
                rtt: recorder.register(&name, "rtt", "ms"),
                owd: one_way.then(|| (recorder.register(&name, "owd_up", "ms"), recorder.register(&name, "owd_down", "ms"))),
                kind: spec.kind,
                name,
                rtt_base: spec.rtt + path_delay,
                start: spec.start,
                probe: Probe::new(id, cfg),
            });
        }
        let mut media = Vec::new();
        for (i, spec) in sc.media.iter().enumerate() {
            let id = (flows.len() + probes.len() + i) as u32;
            let kind = match spec.kind {
                crate::scenario::MediaKind::Scream => "scream",
            };
            let name = spec.name.clone().unwrap_or_else(|| format!("{kind}-{i}"));
            routes.push(shared.route(&mut elements, spec.rtt, PathSides::tunnelled(&tunnels, spec.tunnel.as_deref()), false));
            let cfg = ScreamConfig {
                ecn: spec.ecn.ecn(),
                dscp: spec.dscp,
                min_bitrate: spec.min_bitrate.0 as f64,
                start_bitrate: spec.start_bitrate.0 as f64,
                max_bitrate: spec.max_bitrate.0 as f64,
                frame_rate: spec.frame_rate,
                frame_size_variation: spec.frame_size_variation / 100.0,
                microburst_interval: spec.microburst_interval,
                packet_size: spec.packet_size,
                queue_delay_target: spec.queue_delay_target.as_secs_f64(),
                stop: spec.stop,
                ..ScreamConfig::default()
            };
            let ecn = match spec.ecn {
                crate::scenario::Codepoint::NotEct => "not-ect",
                crate::scenario::Codepoint::Ect0 => "ect0",
                crate::scenario::Codepoint::Ect1 => "ect1",
                crate::scenario::Codepoint::Ce => "ce",
            };
            media.push(MediaFlow {
                target: recorder.register(&name, "target_bitrate", "Mbit/s"),
                bitrate: recorder.register(&name, "bitrate", "Mbit/s"),
                qdelay: recorder.register(&name, "qdelay_estimate", "ms"),
                cwnd: recorder.register(&name, "cwnd", "bytes"),
                app: Scream::new(id, cfg, Stream::new(sc.seed, &format!("scream/{name}"))),
                name,
                ecn,
                rtt_base: spec.rtt + path_delay,
                start: spec.start,
                stop: spec.stop,
            });
        }
        let mut udp = Vec::new();
        for (i, spec) in sc.udp.iter().enumerate() {
            let id = (flows.len() + probes.len() + media.len() + i) as u32;
            let kind = spec.kind.name();
            let name = spec.name.clone().unwrap_or_else(|| format!("{kind}-{i}"));
            routes.push(shared.route(&mut elements, spec.rtt, PathSides::tunnelled(&tunnels, spec.tunnel.as_deref()), spec.direction == Way::Down));
            let pattern = match spec.kind {
                UdpKind::Cbr => Pattern::Cbr,
                UdpKind::Video => Pattern::Video {
                    frame_rate: spec.frame_rate.unwrap_or(DEFAULT_UDP_FRAME_RATE),
                    paced: spec.paced.unwrap_or(false),
                    variation: spec.frame_size_variation.unwrap_or(0.0) / 100.0,
                },
            };
            let cfg = UdpConfig { pattern, rate: spec.rate, packet_size: spec.packet_size, ecn: spec.ecn.ecn(), dscp: spec.dscp, stop: spec.stop };
            udp.push(UdpFlow {
                rate: recorder.register(&name, "rate", "Mbit/s"),
                owd: recorder.register(&name, "owd", "ms"),
                app: UdpSource::new(id, cfg, Stream::new(sc.seed, &format!("udp/{name}"))),
                name,
                kind,
                start: spec.start,
                stop: spec.stop,
            });
        }
        client_hosts.extend(std::iter::repeat((0, false)).take(probes.len() + media.len()));
        client_hosts.extend(sc.udp.iter().map(|u| (0, u.direction == Way::Down)));
        let workloads = Workloads::new(sc.seed, sc.stack, sc.host.gso, routes.len() as u32, &sc.workloads, sc.duration);
        for w in &sc.workloads {
            routes.push(shared.route(&mut elements, w.rtt, PathSides::default(), w.direction == Way::Down));
        }
        let mut events = EventQueue::with_capacity(1024 + 4 * flows.len());
        for (i, f) in flows.iter().enumerate() {
            events.schedule(f.start, Event::Flow(i as u32, FlowTimer::Start));
            if let Some(s) = f.stop {
                events.schedule(s, Event::Flow(i as u32, FlowTimer::Stop));
            }
        }
        for (i, p) in probes.iter().enumerate() {
            events.schedule(p.start, Event::Flow((flows.len() + i) as u32, FlowTimer::Start));
        }
        for (i, m) in media.iter().enumerate() {
            events.schedule(m.start, Event::Flow((flows.len() + probes.len() + i) as u32, FlowTimer::Start));
        }
        for (i, c) in changes.iter().enumerate() {
            events.schedule(c.at, Event::LinkChange(i as u32));
        }
        for (i, u) in udp.iter().enumerate() {
            events.schedule(u.start, Event::Flow((flows.len() + probes.len() + media.len() + i) as u32, FlowTimer::Start));
        }
        workloads.schedule(&mut events);
        events.schedule(Time::ZERO, Event::Sample);
        events.schedule(sc.duration, Event::End);
        Simulation {
            now: Time::ZERO,
            end: sc.duration,
            step: sc.metrics.step,
            steady_window: sc.metrics.steady_window,
            seed: sc.seed,
            events,
            elements,
            routes,
            client_hosts,
            flows,
            bulk_flows,
            transients,
            workloads,
            probes,
            media,
            tunnels,
            udp,
            out: Vec::with_capacity(256),
            links,
            changes,
            name: sc.name.clone(),
            recorder,
            xstats_buf: Vec::new(),
            packets_sent: 0,
            packets_delivered: 0,
        }
    }

    /// Runs to the end and returns the summary and series.
    pub fn run(mut self) -> RunOutput {
        let wall = std::time::Instant::now();
        self.run_until(self.end);
        self.now = self.end;
        self.sample();
        self.finish(wall.elapsed().as_secs_f64())
    }

    /// Executes every event up to and including time `t` (or the end of the run).
    pub fn run_until(&mut self, t: Time) {
        while let Some(at) = self.events.peek_time() {
            if at > t.min(self.end) {
                break;
            }
            let (at, ev) = self.events.pop().expect("peeked");
            self.now = at;
            match ev {
                Event::End => break,
                Event::Sample => {
                    self.sample();
                    let next = at + self.step;
                    if next < self.end {
                        self.events.schedule(next, Event::Sample);
                    }
                }
                Event::LinkChange(i) => {
                    let c = &mut self.changes[i as usize];
                    c.apply(link_at_mut(&mut self.elements, self.links[c.link].element), at);
                }
                Event::Element(id) => {
                    let mut ctx = ElementCtx { id, now: at, events: &mut self.events, out: &mut self.out };
                    self.elements[id as usize].wake(&mut ctx);
                }
                Event::Flow(f, timer) => {
                    let mut ctx = EndpointCtx { flow: f, now: at, events: &mut self.events, out: &mut self.out };
                    let (n_flows, n_probes) = (self.flows.len(), self.probes.len());
                    match self.flows.get_mut(f as usize) {
                        Some(flow) => match timer {
                            FlowTimer::Start => flow.sender.start(&mut ctx),
                            FlowTimer::Stop => flow.sender.stop(),
                            FlowTimer::DelayedAck => flow.receiver.on_timer(timer, &mut ctx),
                            _ => flow.sender.on_timer(timer, &mut ctx),
                        },
                        None if (f as usize) < n_flows + n_probes => {
                            let p = &mut self.probes[f as usize - n_flows].probe;
                            match timer {
                                FlowTimer::Start => p.start(&mut ctx),
                                _ => p.on_timer(timer, &mut ctx),
                            }
                        }
                        None if (f as usize) < n_flows + n_probes + self.media.len() => {
                            let m = &mut self.media[f as usize - n_flows - n_probes].app;
                            match timer {
                                FlowTimer::Start => m.start(&mut ctx),
                                _ => m.on_timer(timer, &mut ctx),
                            }
                        }
                        None if (f as usize) < self.workloads.base() => {
                            let u = &mut self.udp[f as usize - n_flows - n_probes - self.media.len()].app;
                            match timer {
                                FlowTimer::Start => u.start(&mut ctx),
                                _ => u.on_timer(timer, &mut ctx),
                            }
                        }
                        None => self.workloads.on_timer(timer, &mut ctx),
                    }
                }
            }
            self.forward_outbox();
        }
        self.now = self.now.max(t.min(self.end));
    }

    /// Current simulated time.
    pub fn now(&self) -> Time {
        self.now
    }
    pub fn sender(&self, flow: usize) -> &TcpSender {
        &self.flows[flow].sender
    }
    pub fn receiver(&self, flow: usize) -> &TcpReceiver {
        &self.flows[flow].receiver
    }
    /// The short-flow workloads (connection slots, peak concurrency).
    pub fn workloads(&self) -> &Workloads {
        &self.workloads
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
        link_at(&self.elements, self.links[self.link_index(id)].element)
    }

    /// Replaces a shared link's queue discipline now, as `tc qdisc replace` does: the
    /// packets queued in the old discipline are dropped (the one being serialised completes).
    /// Returns the packets dropped.
    pub fn replace_qdisc(&mut self, id: LinkId, qdisc: Box<dyn qdisc::Qdisc>) -> u64 {
        let element = self.links[self.link_index(id)].element;
        link_at_mut(&mut self.elements, element).replace_qdisc(qdisc, self.now)
    }

    /// [`Simulation::replace_qdisc`] of the bottleneck.
    pub fn replace_bottleneck_qdisc(&mut self, qdisc: Box<dyn qdisc::Qdisc>) -> u64 {
        self.replace_qdisc(LinkId::Bottleneck, qdisc)
    }

    /// Moves every packet emitted during this event to its next hop (or endpoint), which
    /// may emit more; they are handled in emission order.
    fn forward_outbox(&mut self) {
        let mut i = 0;
        while i < self.out.len() {
            let mut pkt = self.out[i];
            i += 1;
            if pkt.hop == 0 {
                self.packets_sent += 1;
                // Client hosts are numbered from 1 on the sender side; the server side is 0.
                let (host, data_down) = self.client_hosts.get(pkt.flow as usize).copied().unwrap_or_else(|| (0, self.workloads.data_down(pkt.flow)));
                let client = host + 1;
                let up = (pkt.dir == Direction::Forward) != data_down;
                (pkt.src_host, pkt.dst_host) = if up { (client, 0) } else { (0, client) };
            }
            let r = if (pkt.flow as usize) < self.workloads.base() { pkt.flow as usize } else { self.workloads.route_of(pkt.flow) };
            let route = &self.routes[r][pkt.dir as usize];
            if let Some(&el) = route.get(pkt.hop as usize) {
                pkt.hop += 1;
                let mut ctx = ElementCtx { id: el, now: self.now, events: &mut self.events, out: &mut self.out };
                self.elements[el as usize].receive(pkt, &mut ctx);
            } else {
                self.packets_delivered += 1;
                let mut ctx = EndpointCtx { flow: pkt.flow, now: self.now, events: &mut self.events, out: &mut self.out };
                let (n_flows, n_probes) = (self.flows.len(), self.probes.len());
                match self.flows.get_mut(pkt.flow as usize) {
                    Some(flow) => match pkt.dir {
                        Direction::Forward => flow.receiver.on_packet(&pkt, &mut ctx),
                        Direction::Reverse => flow.sender.on_packet(&pkt, &mut ctx),
                    },
                    None if (pkt.flow as usize) < n_flows + n_probes => self.probes[pkt.flow as usize - n_flows].probe.on_packet(&pkt, &mut ctx),
                    None if (pkt.flow as usize) < n_flows + n_probes + self.media.len() => self.media[pkt.flow as usize - n_flows - n_probes].app.on_packet(&pkt, &mut ctx),
                    None if (pkt.flow as usize) < self.workloads.base() => self.udp[pkt.flow as usize - n_flows - n_probes - self.media.len()].app.on_packet(&pkt, &mut ctx),
                    None => self.workloads.on_packet(&pkt, &mut ctx),
                }
            }
        }
        self.out.clear();
    }

    fn sample(&mut self) {
        let now = self.now;
        let t = now.as_secs_f64();
        let step_s = self.step.as_secs_f64();
        self.recorder.tick(t);
        let nan = f64::NAN;
        for f in &mut self.flows {
            let active = f.active_at(now) && now > f.start;
            let delivered = f.receiver.delivered_bytes;
            let goodput = (delivered - f.last_delivered) as f64 * 8.0 / step_s / 1e6;
            f.last_delivered = delivered;
            let rate = f.sender.delivery_rate_bps() / 1e6;
            if active {
                f.rate_samples.push((t, rate));
            }
            let s = &f.series;
            self.recorder.set(s.goodput, if now > f.start { goodput } else { nan });
            self.recorder.set(s.delivery_rate, if active { rate } else { nan });
            let srtt = f.sender.srtt();
            self.recorder.set(s.srtt, if active && srtt > Time::ZERO { srtt.as_millis_f64() } else { nan });
            self.recorder.set(s.cwnd, if active { f.sender.tp.cwnd as f64 } else { nan });
            let rtx = f.sender.stats.retransmits;
            self.recorder.set(s.retransmits, (rtx - f.last_retransmits) as f64);
            f.last_retransmits = rtx;
        }
        for p in &mut self.probes {
            let st = &mut p.probe.stats;
            self.recorder.set(p.rtt, st.rtt.take_tick_mean_ms());
            if let Some((up, down)) = p.owd {
                self.recorder.set(up, st.owd_up.take_tick_mean_ms());
                self.recorder.set(down, st.owd_down.take_tick_mean_ms());
            }
        }
        for m in &mut self.media {
            let active = now > m.start && m.stop.map_or(true, |s| now <= s);
            let st = &mut m.app.stats;
            let rate = st.step_bytes_sent as f64 * 8.0 / step_s / 1e6;
            st.step_bytes_sent = 0;
            let tx = &m.app.tx;
            self.recorder.set(m.target, if active { tx.target_bitrate / 1e6 } else { nan });
            self.recorder.set(m.bitrate, if now > m.start { rate } else { nan });
            self.recorder.set(m.qdelay, if active { tx.queue_delay * 1e3 } else { nan });
            self.recorder.set(m.cwnd, if active { tx.cwnd as f64 } else { nan });
        }
        for u in &mut self.udp {
            let st = &mut u.app.stats;
            let rate = st.tick_bytes as f64 * 8.0 / step_s / 1e6;
            st.tick_bytes = 0;
            self.recorder.set(u.rate, if now > u.start { rate } else { nan });
            self.recorder.set(u.owd, st.owd.take_tick_mean_ms());
        }
        for link in &mut self.links {
            link.sample(link_at_mut(&mut self.elements, link.element), &mut self.recorder, &mut self.xstats_buf);
        }
    }

    fn finish(mut self, wall_seconds: f64) -> RunOutput {
        let end = self.end;
        let media: Vec<MediaSummary> = self
            .media
            .iter_mut()
            .map(|m| {
                let stop = m.end_time(end);
                let span = (stop - m.start).as_secs_f64();
                let mbps = |bytes: u64| if span > 0.0 { bytes as f64 * 8.0 / span / 1e6 } else { 0.0 };
                let st = &m.app.stats;
                let (sent, received) = (mbps(st.bytes_sent), mbps(st.bytes_received));
                MediaSummary {
                    name: m.name.clone(),
                    kind: "scream".to_string(),
                    ecn: m.ecn.to_string(),
                    rtt_base_ms: m.rtt_base.as_millis_f64(),
                    start_s: m.start.as_secs_f64(),
                    frames: st.frames,
                    packets_sent: st.packets_sent,
                    packets_received: st.packets_received,
                    rtp_queue_discards: st.rtp_queue_discards,
                    losses: m.app.tx.losses,
                    ce_marked: m.app.tx.ce_marked,
                    mean_bitrate_mbps: sent,
                    mean_received_mbps: received,
                    mean_target_mbps: m.app.mean_target(stop, m.start) / 1e6,
                }
            })
            .collect();
        let window_s = self.steady_window.as_secs_f64();
        let flows: Vec<FlowSummary> = self.flows[..self.bulk_flows]
            .iter()
            .map(|f| {
                let active = f.end_time(end) - f.start;
                let bytes = f.receiver.delivered_bytes;
                FlowSummary {
                    name: f.name.clone(),
                    cc: f.sender.cc_name().to_string(),
                    rtt_ms: f.rtt.as_millis_f64(),
                    start_s: f.start.as_secs_f64(),
                    goodput_mbps: if active > Time::ZERO { bytes as f64 * 8.0 / active.as_secs_f64() / 1e6 } else { 0.0 },
                    steady_mbps: steady_state_rate(&f.rate_samples, window_s),
                    bytes_delivered: bytes,
                    retransmits: f.sender.stats.retransmits,
                    rto_events: f.sender.stats.rto_events,
                    fast_recoveries: f.sender.stats.fast_recoveries,
                    ce_received: f.receiver.ce_received as u64,
                    sce_received: f.receiver.sce_received as u64,
                    fct_s: f.sender.stats.completed_at.map(|c| (c - f.start).as_secs_f64()),
                }
            })
            .collect();
        let steady: Option<Vec<f64>> = flows.iter().map(|f| f.steady_mbps).collect();
        let jain_steady = steady.and_then(|s| jain_index(&s));
        let first_start = self
            .flows
            .iter()
            .map(|f| f.start)
            .chain(self.probes.iter().map(|p| p.start))
            .chain(self.media.iter().map(|m| m.start))
            .chain(self.udp.iter().map(|u| u.start))
            .chain(self.workloads.starts())
            .min()
            .unwrap_or(Time::ZERO);
        let mut links: Vec<BottleneckSummary> = (self.links.iter())
            .map(|l| BottleneckSummary::of(link_at(&self.elements, l.element), &l.qdisc_text, l.start_rate, first_start, end))
            .collect();
        let upstream = links.split_off(RETURN + 1);
        let return_link = links.pop().expect("return link");
        let bottleneck = links.pop().expect("bottleneck");
        let packets = Conservation {
            sent: self.packets_sent,
            delivered: self.packets_delivered,
            dropped: self.elements.iter().map(Element::drops).sum::<u64>(),
            in_flight: self.elements.iter().map(|e| e.held() as u64).sum(),
        };
        let summary = Summary {
            name: self.name.clone(),
            sim_seconds: end.as_secs_f64(),
            wall_seconds,
            events: self.events.processed(),
            seed: self.seed,
            flows,
            bottleneck,
            return_link,
            upstream,
            jain_steady,
            probes: self.probes.iter().map(ProbeSummary::of).collect(),
            media,
            tunnels: self.tunnels.summary(|i| match &self.elements[i as usize] {
                Element::Tunnel(t) => t,
                _ => unreachable!("tunnel element indices point at tunnel elements"),
            }),
            udp: self
                .udp
                .iter()
                .map(|u| {
                    let span = (u.stop.map_or(end, |s| s.min(end)) - u.start).as_secs_f64();
                    let st = &u.app.stats;
                    UdpSummary {
                        name: u.name.clone(),
                        kind: u.kind.to_string(),
                        sent: st.sent,
                        received: st.received,
                        lost: st.lost(),
                        mean_mbps: if span > 0.0 { st.bytes_received as f64 * 8.0 / span / 1e6 } else { 0.0 },
                        owd_ms: SojournSummary::of(&st.owd.all),
                    }
                })
                .collect(),
            workloads: self.workloads.summaries(),
            transients: self
                .transients
                .iter()
                .map(|g| TransientSummary::of(&g.name, g.start, self.flows[g.flows.clone()].iter().map(|f| f.sender.stats.completed_at)))
                .collect(),
            packets,
        };
        RunOutput { summary, series: self.recorder.finish() }
    }
}
