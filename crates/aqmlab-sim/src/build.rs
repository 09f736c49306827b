//! Building the parts of a simulation from a [`Scenario`] (`Simulation::new` assembles
//! them): the shared links and their schedule of changes, the tunnels, and the endpoint
//! table with each endpoint's route (its base delay, its own elements and the shared hops,
//! per direction).
//!
//! Endpoint ids and random-stream labels depend on the order things are built in, and
//! equal-time events run in the order they are scheduled, so this order is part of the
//! results (the golden-hash test guards it): TCP flows (the `[[flows]]` copies, then the
//! transient groups' flows), probes, media, UDP sources, workloads.

use crate::cc::CcSpec;
use crate::apps::bulk::{FlowSeries, TcpFlow};
use crate::apps::media::MediaFlow;
use crate::apps::probe::{ProbeConfig, ProbeFlow};
use crate::apps::scream::{Scream, ScreamConfig};
use crate::apps::transient::{self, TransientGroup};
use crate::apps::udp::{Pattern, UdpConfig, UdpFlow};
use crate::apps::workload::{WorkloadConfig, Workloads};
use crate::apps::{Probe, UdpSource};
use crate::endpoint::{Endpoint, Endpoints};
use crate::event::{Event, EventQueue};
use crate::host::{self, HostJitter};
use crate::metrics::{SeriesRecorder, SpikeTracker};
use crate::packet::{Direction, LINK_MTU};
use crate::path::netem::{Netem, NetemSpec};
use crate::path::shared::{ScheduledChange, SharedLink, BOTTLENECK, RETURN};
use crate::path::tunnel::Tunnels;
use crate::path::{DelayLine, Element, Link, Route};
use crate::qdisc;
use crate::rng::Stream;
use crate::scenario::{default_return_qdisc, flow_label, Codepoint, MediaKind, ProbeKind, Scenario, UdpKind, Way, DEFAULT_UDP_FRAME_RATE};
use crate::tcp::{TcpConfig, TcpReceiver, TcpSender};
use crate::time::{Rate, Time};

/// A TCP flow to build: one copy of a `[[flows]]` entry or one member of a transient group.
struct FlowPlan<'a> {
    name: String,
    cc: &'a CcSpec,
    rtt: Time,
    start: Time,
    stop: Option<Time>,
    cfg: TcpConfig,
    direction: Way,
    netem: Option<&'a NetemSpec>,
    ecn_rewrite: Option<Codepoint>,
    host: u16,
    tunnel: Option<&'a str>,
    /// Listed under `flows[]` (false for a transient group's flow).
    listed: bool,
}

/// The way a packet travels through the dumbbell: `Up` from the client side to the server side
/// (over the bottleneck), `Down` back (over the return link).
const UP: usize = 0;
const DOWN: usize = 1;

/// The elements every endpoint pair shares, per travel direction, in path order.
struct SharedPath {
    hops: [Vec<u32>; 2],
    /// The endpoints' own base delays: one delay line per distinct delay and travel
    /// direction (`UP`, `DOWN`), shared by every endpoint with that delay, as (delay, way,
    /// element index) (issue 15: [`DelayLine`] says why and how each endpoint keeps its exit
    /// times). Per way, so that one flow's data and its ACKs, whose jittered exits
    /// interleave, do not share a line: each line then mostly appends at its tail.
    base_lines: Vec<(Time, usize, u32)>,
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
    /// (`Direction::Forward`) travels up unless `data_down`; `host` is the client host. The
    /// base delay is the line shared by every endpoint with that delay when `shared` (an
    /// endpoint with its own id; not a workload, whose transfers take ids as they start and
    /// share its one host path), else a line of its own.
    fn route(&mut self, elements: &mut Vec<Element>, rtt: Time, sides: PathSides, host: u16, data_down: bool, shared: bool) -> Route {
        let half = [Time(rtt.0 / 2), rtt - Time(rtt.0 / 2)];
        let mut ways: [Vec<u32>; 2] = Default::default();
        for way in [UP, DOWN] {
            let known = self.base_lines.iter().find(|l| (l.0, l.1) == (half[way], way)).map(|l| l.2);
            let line = match known.filter(|_| shared) {
                Some(line) => line,
                None => {
                    elements.push(Element::Delay(DelayLine::new(half[way])));
                    let line = (elements.len() - 1) as u32;
                    if shared {
                        self.base_lines.push((half[way], way, line));
                    }
                    line
                }
            };
            let r = &mut ways[way];
            r.push(line);
            r.extend(&sides.before[way]);
            r.extend(&self.hops[way]);
            r.extend(&sides.after[way]);
        }
        let [up, down] = ways.map(Vec::into_boxed_slice);
        Route::new(if data_down { [down, up] } else { [up, down] }, host, data_down)
    }
}

/// Gives the delay line right after each host of `route` (its first element per direction)
/// that host's timing noise (`[host] jitter`, streams `jitter/<label>/fwd|rev`): the lane of
/// endpoint `id` on a shared line, or (`id` `None`: a workload's own line) the whole line.
fn host_jitter(elements: &mut [Element], route: &Route, sc: &Scenario, label: &str, id: Option<u32>) {
    if sc.host.jitter == Time::ZERO {
        return;
    }
    for (dir, name) in [(Direction::Forward, "fwd"), (Direction::Reverse, "rev")] {
        let first = route.hops(dir)[0] as usize;
        if let Element::Delay(d) = &mut elements[first] {
            let jitter = HostJitter::new(sc.host.jitter, Stream::new(sc.seed, &format!("jitter/{label}/{name}")));
            match id {
                Some(id) => d.with_lane_jitter(id, dir, jitter),
                None => d.with_jitter(jitter),
            }
        }
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

/// The scenario's `[[bottleneck.changes]]` as one change per link, in the order they apply
/// (time, then listing order). `bottleneck` and `return_link` index the engine's shared
/// links, whose starting rates are `rates`.
fn schedule_changes(sc: &Scenario, bottleneck: usize, return_link: usize, mut rates: Vec<Rate>) -> Vec<ScheduledChange> {
    let mut order: Vec<usize> = (0..sc.bottleneck.changes.len()).collect();
    order.sort_by_key(|&i| sc.bottleneck.changes[i].at);
    let mut out = Vec::new();
    for i in order {
        let c = &sc.bottleneck.changes[i];
        let targets = [(c.direction.forward(), bottleneck, "bottleneck"), (c.direction.ret(), return_link, "return")];
        for (_, link, label) in targets.into_iter().filter(|t| t.0) {
            if let Some(r) = c.rate {
                rates[link] = r;
            }
            let qdisc = c.qdisc.as_ref().map(|spec| {
                let rng = Stream::new(sc.seed, &format!("qdisc/{label}/change/{i}"));
                spec.build(&mut qdisc::BuildCtx { link_rate: rates[link], mtu: LINK_MTU, rng, stack: sc.stack })
            });
            out.push(ScheduledChange::new(c.at, link, c.rate, qdisc).with_params(c.qdisc.as_ref().map(|spec| spec.args())));
        }
    }
    out
}

/// What a scenario builds: the path, the endpoints, the shared links and their series, and
/// the events scheduled before the run starts.
pub struct Built {
    pub events: EventQueue,
    pub elements: Vec<Element>,
    pub endpoints: Endpoints,
    pub transients: Vec<TransientGroup>,
    pub tunnels: Tunnels,
    pub links: Vec<SharedLink>,
    pub changes: Vec<ScheduledChange>,
    pub recorder: SeriesRecorder,
}

impl Built {
    pub fn new(sc: &Scenario) -> Built {
        let ticks = (sc.duration.0 / sc.metrics.step.0) as usize + 1;
        let mut recorder = SeriesRecorder::with_ticks(ticks);
        let mut elements = Vec::new();
        let mut links = Vec::new();
        let mut add_link = |elements: &mut Vec<Element>, name: &str, spec: &qdisc::QdiscSpec, rate, label: &str| {
            let mut ctx = qdisc::BuildCtx { link_rate: rate, mtu: LINK_MTU, rng: Stream::new(sc.seed, label), stack: sc.stack };
            elements.push(Element::Link(Box::new(Link::new(rate, spec.build(&mut ctx)))));
            links.push(SharedLink::new(name, elements.len() - 1, spec.text(), rate));
            (elements.len() - 1) as u32
        };
        let bottleneck = add_link(&mut elements, "bottleneck", &sc.bottleneck.qdisc, sc.bottleneck.rate, "qdisc/bottleneck");
        if let Some(burst) = sc.bottleneck.htb_burst {
            elements[bottleneck as usize].as_link_mut().set_htb_burst(burst);
        }
        if !sc.metrics.spike_thresholds.is_empty() {
            let tracker = SpikeTracker::new(&sc.metrics.spike_thresholds, sc.bottleneck.rate, sc.metrics.spike_after);
            elements[bottleneck as usize].as_link_mut().stats.spikes = Some(tracker);
        }
        let (ret_rate, ret_qdisc) = match &sc.return_path {
            Some(r) => (r.rate.unwrap_or(sc.bottleneck.rate), r.qdisc.clone()),
            None => (sc.bottleneck.rate, default_return_qdisc()),
        };
        let return_link = add_link(&mut elements, "return_link", &ret_qdisc, ret_rate, "qdisc/return");
        // Upstream links come first on the way up, each followed by its own delay.
        let mut shared = SharedPath { hops: [Vec::new(), vec![return_link]], base_lines: Vec::new() };
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
        let changes = schedule_changes(sc, BOTTLENECK, RETURN, rates);
        for (i, link) in links.iter_mut().enumerate() {
            // The return link is observed when configured (or changed); the others always.
            let changed = changes.iter().any(|c| c.link == i);
            if i == RETURN && sc.return_path.is_none() && !changed {
                continue;
            }
            let mut disciplines = vec![elements[link.element].as_link().qdisc()];
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
                let name = flow_label(spec.name.as_deref(), spec.count, k, spec.cc.config().name(), plans.len());
                let cfg = TcpConfig {
                    pacing: spec.pacing,
                    rwnd_packets: spec.rwnd.or(sc.stack.default_rwnd_bytes()).map(|b| (b / spec.mss as u64).max(1) as u32),
                    ..TcpConfig::connection(spec.mss, spec.initial_cwnd, spec.initial_rto, spec.ecn, spec.size)
                }
                .on_host(spec.gso.unwrap_or(sc.host.gso), sc.stack)
                .for_stack(sc.stack, spec.rwnd, sc.seed);
                let start = host::spread_start(sc.seed, sc.host.start_spread, &format!("flow/{}", plans.len()), spec.start);
                let (rtt, stop, direction, ecn_rewrite, host) = (spec.rtt, spec.stop, spec.direction, spec.ecn_rewrite, spec.host);
                plans.push(FlowPlan { name, cc: &spec.cc, rtt, start, stop, cfg, direction, netem: spec.netem.as_ref(), ecn_rewrite, host, tunnel: spec.tunnel.as_deref(), listed: true });
            }
        }
        let mut transients = Vec::new();
        for (i, t) in sc.transients.iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(|| format!("transient-{i}"));
            let start = transient::group_start(sc.seed, &name, t.start, t.start_jitter);
            let first = plans.len();
            for (k, size) in transient::split(t.total, t.flows).enumerate() {
                let cfg = TcpConfig::connection(t.mss, t.initial_cwnd, t.initial_rto, t.ecn, Some(size)).on_host(sc.host.gso, sc.stack).for_stack(sc.stack, None, sc.seed);
                let (rtt, direction) = (t.rtt, t.direction);
                plans.push(FlowPlan { name: format!("{name}-{k}"), cc: &t.cc, rtt, start, stop: None, cfg, direction, netem: None, ecn_rewrite: None, host: 0, tunnel: None, listed: false });
            }
            transients.push(TransientGroup { name, start, flows: first..plans.len() });
        }
        // The TCP flows (ids from 0), then the other entries (ids from `tcp.len()`).
        let mut tcp = Vec::new();
        let mut endpoints = Vec::new();
        let mut routes = Vec::new();
        let tcp_flows = plans.len();
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
            let route = shared.route(&mut elements, p.rtt, sides, p.host, data_down, true);
            host_jitter(&mut elements, &route, sc, &format!("flow/{id}"), Some(id));
            let series = FlowSeries::register(&mut recorder, &p.name);
            let (sender, receiver) = (TcpSender::new(id, p.cfg.clone(), cc), TcpReceiver::new(id, &p.cfg));
            routes.push(route);
            tcp.push(TcpFlow::new(p.name, p.rtt + path_delay, p.start, p.stop, p.listed, data_down, sender, receiver, series, ticks, sc.metrics.step.as_secs_f64(), sc.metrics.steady_window.map(Time::as_secs_f64)));
        }
        for (i, spec) in sc.probes.iter().enumerate() {
            let id = (tcp.len() + endpoints.len()) as u32;
            let name = spec.name.clone().unwrap_or_else(|| format!("probe-{i}"));
            let mut sides = PathSides::tunnelled(&tunnels, spec.tunnel.as_deref());
            if let Some(n) = &spec.netem {
                for (way, el) in netem_pair(&mut elements, n, sc.seed, &format!("probe/{i}")).into_iter().enumerate() {
                    sides.before[way].push(el);
                }
            }
            let route = shared.route(&mut elements, spec.rtt, sides, 0, false, true);
            host_jitter(&mut elements, &route, sc, &format!("probe/{i}"), Some(id));
            let start = host::spread_start(sc.seed, sc.host.start_spread, &format!("probe/{i}"), spec.start);
            let one_way = spec.kind == ProbeKind::Irtt;
            let cfg = ProbeConfig { interval: spec.interval(sc.metrics.step), wire_len: spec.size(), one_way, ecn: spec.ecn.ecn(), dscp: spec.dscp, stop: spec.stop };
            let kind = match spec.kind {
                ProbeKind::Irtt => "irtt",
                ProbeKind::Ping => "ping",
            };
            routes.push(route);
            endpoints.push(Endpoint::Probe(ProbeFlow::new(name, kind, spec.rtt + path_delay, start, Probe::new(id, cfg), &mut recorder)));
        }
        for (i, spec) in sc.media.iter().enumerate() {
            let id = (tcp.len() + endpoints.len()) as u32;
            let kind = match spec.kind {
                MediaKind::Scream => "scream",
            };
            let name = spec.name.clone().unwrap_or_else(|| format!("{kind}-{i}"));
            let route = shared.route(&mut elements, spec.rtt, PathSides::tunnelled(&tunnels, spec.tunnel.as_deref()), 0, false, true);
            host_jitter(&mut elements, &route, sc, &format!("media/{i}"), Some(id));
            let start = host::spread_start(sc.seed, sc.host.start_spread, &format!("media/{i}"), spec.start);
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
                pacing_headroom: spec.pacing_headroom,
                send_time: spec.send_time,
                stop: spec.stop,
                ..ScreamConfig::default()
            };
            let ecn = match spec.ecn {
                Codepoint::NotEct => "not-ect",
                Codepoint::Ect0 => "ect0",
                Codepoint::Ect1 => "ect1",
                Codepoint::Ce => "ce",
            };
            let app = Scream::new(id, cfg, Stream::new(sc.seed, &format!("scream/{name}")));
            routes.push(route);
            endpoints.push(Endpoint::Media(Box::new(MediaFlow::new(name, ecn, spec.rtt + path_delay, start, spec.stop, app, &mut recorder))));
        }
        for (i, spec) in sc.udp.iter().enumerate() {
            let id = (tcp.len() + endpoints.len()) as u32;
            let kind = spec.kind.name();
            let name = spec.name.clone().unwrap_or_else(|| format!("{kind}-{i}"));
            let data_down = spec.direction == Way::Down;
            let route = shared.route(&mut elements, spec.rtt, PathSides::tunnelled(&tunnels, spec.tunnel.as_deref()), 0, data_down, true);
            host_jitter(&mut elements, &route, sc, &format!("udp/{i}"), Some(id));
            let start = host::spread_start(sc.seed, sc.host.start_spread, &format!("udp/{i}"), spec.start);
            let pattern = match spec.kind {
                UdpKind::Cbr => Pattern::Cbr,
                UdpKind::Video => Pattern::Video {
                    frame_rate: spec.frame_rate.unwrap_or(DEFAULT_UDP_FRAME_RATE),
                    paced: spec.paced.unwrap_or(false),
                    variation: spec.frame_size_variation.unwrap_or(0.0) / 100.0,
                },
            };
            let cfg = UdpConfig { pattern, rate: spec.rate, packet_size: spec.packet_size, ecn: spec.ecn.ecn(), dscp: spec.dscp, stop: spec.stop };
            let app = UdpSource::new(id, cfg, Stream::new(sc.seed, &format!("udp/{name}")));
            routes.push(route);
            endpoints.push(Endpoint::Udp(UdpFlow::new(name, kind, start, spec.stop, app, &mut recorder)));
        }
        let configs = (sc.workloads.iter().enumerate())
            .map(|(i, s)| {
                let name = s.name.clone().unwrap_or_else(|| format!("workload-{i}"));
                let route = shared.route(&mut elements, s.rtt, PathSides::default(), 0, s.direction == Way::Down, false);
                host_jitter(&mut elements, &route, sc, &format!("workload/{name}"), None);
                (name, route)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .zip(&sc.workloads)
            .map(|((name, route), s)| WorkloadConfig {
                name,
                cc: s.cc.clone(),
                tcp: TcpConfig::connection(s.mss, s.initial_cwnd, s.initial_rto, s.ecn, None).on_host(sc.host.gso, sc.stack).for_stack(sc.stack, None, sc.seed),
                data_down: s.direction == Way::Down,
                mean_interarrival: s.mean_interarrival,
                size_p5: s.size_p5,
                size_p95: s.size_p95,
                start: s.start,
                stop: s.stop.unwrap_or(sc.duration).min(sc.duration),
                route,
            })
            .collect();
        let base = (tcp.len() + endpoints.len()) as u32;
        endpoints.push(Endpoint::Workloads(Box::new(Workloads::new(sc.seed, sc.stack, base, configs))));

        let mut events = EventQueue::with_capacity(1024 + 4 * tcp_flows);
        let endpoints = Endpoints::new(tcp, endpoints, routes);
        // The link changes are scheduled after the media's starts and before the UDP
        // sources' (an equal-time tie runs in this order).
        endpoints.schedule(&mut events, |events| {
            for (i, c) in changes.iter().enumerate() {
                events.schedule(c.at, Event::LinkChange(i as u32));
            }
        });
        events.schedule(Time::ZERO, Event::Sample);
        events.schedule(sc.duration, Event::End);
        Built { events, elements, endpoints, transients, tunnels, links, changes, recorder }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Direction::{Forward, Reverse};

    /// The endpoints' own base delays: one line per distinct delay and way, shared across
    /// endpoints; a workload keeps lines of its own; each endpoint's jitter is its own lane
    /// (checked through the exit times in `path::delay`).
    #[test]
    fn endpoints_of_equal_base_delay_share_one_line() {
        let toml = "duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\n\
            [[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ncount = 30\n\
            [[flows]]\ncc = \"cubic\"\nrtt = \"31ms\"\ncount = 3\n\
            [[probes]]\nkind = \"ping\"\nrtt = \"20ms\"\n\
            [[workloads]]\ncc = \"cubic\"\nrtt = \"20ms\"\nmean_interarrival = \"200ms\"\nsize_p5 = \"64KiB\"\nsize_p95 = \"2MiB\"\n";
        let b = Built::new(&Scenario::from_toml(toml, &[]).unwrap());
        let first = |id: u32, dir| b.endpoints.route(id).hops(dir)[0];
        let (line, back) = (first(0, Forward), first(0, Reverse));
        assert_ne!(line, back, "one line per way");
        for id in 0..30 {
            assert_eq!((first(id, Forward), first(id, Reverse)), (line, back), "10 ms each way: one line per way");
        }
        assert_eq!((first(33, Forward), first(33, Reverse)), (line, back), "the probe's 10 ms too");
        // 31 ms: 15.5 ms up, 15.5 ms down; lines of its own, shared by the three.
        let (other, other_back) = (first(30, Forward), first(30, Reverse));
        assert!(![line, back].contains(&other) && ![line, back].contains(&other_back));
        assert!((30..33).all(|id| first(id, Forward) == other && first(id, Reverse) == other_back));
        let delay = |el: u32| match &b.elements[el as usize] {
            Element::Delay(d) => d.delay(),
            _ => panic!("a base delay is a delay line"),
        };
        assert_eq!((delay(line), delay(other)), (Time::from_millis(10), Time(15_500_000)));
        let lines = b.elements.iter().filter(|e| matches!(e, Element::Delay(_))).count();
        assert_eq!(lines, 4 + 2, "two shared lines per way and the workload's own two");
    }

    /// Endpoints of distinct base delays each get lines of their own: each line holds the
    /// jitter lanes of its own endpoints only, not one slot per endpoint id below them
    /// (n endpoints of distinct delays were n^2 slots, 24 bytes each: gigabytes at 5000).
    #[test]
    fn a_shared_line_holds_only_its_own_endpoints_lanes() {
        let mut toml = String::from("duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\n");
        for i in 0..40 {
            toml += &format!("[[flows]]\ncc = \"cubic\"\nrtt = \"{}ms\"\n", 20 + 2 * i);
        }
        let b = Built::new(&Scenario::from_toml(&toml, &[]).unwrap());
        let slots: usize = b.elements.iter().map(|e| if let Element::Delay(d) = e { d.lane_slots() } else { 0 }).sum();
        assert_eq!(slots, 2 * 40, "one lane per flow and direction");
    }
}
