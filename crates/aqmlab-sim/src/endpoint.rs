//! The endpoints of a run, in one table indexed by endpoint id (in the style of smoltcp's
//! socket set): each entry is one kind of traffic with both of its ends; beside it the table
//! keeps the entry's route (its elements and the client host its packets carry), a plain
//! field looked up on every hop (`Endpoints::route`). The engine hands every timer and every
//! packet that reaches the end of its route to `Endpoints::get_mut(id)`, and dispatches by
//! `match` (no virtual call).
//!
//! Ids, which packets carry (`Packet::flow`) and which name random streams (`cc/<id>`) and
//! flow hashes, run in table order: TCP flows (the `[[flows]]` copies, then the transient
//! groups' flows), probes, media, UDP sources, and last the workloads' slot set, which owns
//! every id from its own on (an arrival clock per workload, then the transfers in arrival
//! order). A new kind of traffic is one application file in `apps/`, one spec in the
//! scenario, one arm here and its construction in `build.rs`.

use crate::apps::bulk::{FlowSummary, TcpFlow};
use crate::apps::media::{MediaFlow, MediaSummary};
use crate::apps::probe::{ProbeFlow, ProbeSummary};
use crate::apps::udp::{UdpFlow, UdpSummary};
use crate::apps::workload::{WorkloadSummary, Workloads};
use crate::event::{Event, EventQueue, FlowTimer};
use crate::metrics::{SeriesRecorder, Tick};
use crate::packet::{EcnMode, Packet};
use crate::path::Route;
use crate::qdisc::FlowCounts;
use crate::tcp::EndpointCtx;
use crate::time::Time;

/// One entry of the endpoint table.
pub enum Endpoint {
    /// A TCP connection (sender and receiver).
    Tcp(TcpFlow),
    /// A latency probe (client and echo server).
    Probe(ProbeFlow),
    /// A real-time media flow (SCReAM sender and receiver).
    Media(Box<MediaFlow>),
    /// An unresponsive UDP source and its receiver.
    Udp(UdpFlow),
    /// The short-flow workloads: their arrival clocks and a slab of connection slots.
    Workloads(Box<Workloads>),
}

/// How an endpoint's packets look on the wire (`capture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// `receiver_opens`: the data receiver sends the first SYN (a workload's client
    /// requesting data from the server).
    Tcp { mss: u32, ecn: EcnMode, rwnd_bytes: Option<u64>, receiver_opens: bool },
    /// ICMP echo (ping probes).
    Icmp,
    /// UDP to or from `server_port` on the server side.
    Udp { server_port: u16 },
}

impl Wire {
    fn tcp(cfg: &crate::tcp::TcpConfig, receiver_opens: bool) -> Wire {
        Wire::Tcp { mss: cfg.mss, ecn: cfg.ecn, rwnd_bytes: cfg.rwnd_packets.map(|n| n as u64 * cfg.mss as u64), receiver_opens }
    }
}

/// What an endpoint reports in `summary.json`.
pub enum EndpointSummary {
    Flow(FlowSummary),
    Probe(ProbeSummary),
    Media(MediaSummary),
    Udp(UdpSummary),
    Workloads(Vec<WorkloadSummary>),
}

impl Endpoint {
    /// Schedules the endpoint's start (and stop) as endpoint `id`.
    pub fn schedule(&self, id: u32, events: &mut EventQueue) {
        let start = |at: Time, events: &mut EventQueue| events.schedule(at, Event::Flow(id, FlowTimer::Start));
        match self {
            Endpoint::Tcp(f) => {
                start(f.start, events);
                if let Some(s) = f.stop {
                    events.schedule(s, Event::Flow(id, FlowTimer::Stop));
                }
            }
            Endpoint::Probe(p) => start(p.start, events),
            Endpoint::Media(m) => start(m.start, events),
            Endpoint::Udp(u) => start(u.start, events),
            Endpoint::Workloads(w) => w.schedule(events),
        }
    }

    /// A timer of endpoint `ctx.flow` fired (`FlowTimer::Start` starts it).
    #[inline]
    pub fn on_timer(&mut self, timer: FlowTimer, ctx: &mut EndpointCtx) {
        match self {
            Endpoint::Tcp(f) => f.on_timer(timer, ctx),
            Endpoint::Probe(p) => p.on_timer(timer, ctx),
            Endpoint::Media(m) => m.on_timer(timer, ctx),
            Endpoint::Udp(u) => u.on_timer(timer, ctx),
            Endpoint::Workloads(w) => w.on_timer(timer, ctx),
        }
    }

    /// A packet reached the end of its route: the data side for `Direction::Forward`, the
    /// other side for `Direction::Reverse`.
    #[inline]
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match self {
            Endpoint::Tcp(f) => f.on_packet(pkt, ctx),
            Endpoint::Probe(p) => p.probe.on_packet(pkt, ctx),
            Endpoint::Media(m) => m.on_packet(pkt, ctx),
            Endpoint::Udp(u) => u.app.on_packet(pkt, ctx),
            Endpoint::Workloads(w) => w.on_packet(pkt, ctx),
        }
    }

    /// Records this endpoint's series at a grid tick.
    pub fn sample(&mut self, tick: &Tick, recorder: &mut SeriesRecorder) {
        match self {
            Endpoint::Tcp(f) => f.sample(tick, recorder),
            Endpoint::Probe(p) => p.sample(recorder),
            Endpoint::Media(m) => m.sample(tick, recorder),
            Endpoint::Udp(u) => u.sample(tick, recorder),
            Endpoint::Workloads(_) => {}
        }
    }

    /// The earliest time the endpoint starts.
    pub fn first_start(&self) -> Option<Time> {
        match self {
            Endpoint::Tcp(f) => Some(f.start),
            Endpoint::Probe(p) => Some(p.start),
            Endpoint::Media(m) => Some(m.start),
            Endpoint::Udp(u) => Some(u.start),
            Endpoint::Workloads(w) => w.starts().min(),
        }
    }

    /// The `summary.json` entry at the end of the run (`end`); `window_s` is the
    /// steady-state window (`None`: auto). `None` for a transient group's flow (its group
    /// reports it).
    pub fn summary(&mut self, end: Time, window_s: Option<f64>) -> Option<EndpointSummary> {
        Some(match self {
            Endpoint::Tcp(f) if !f.listed => return None,
            Endpoint::Tcp(f) => EndpointSummary::Flow(f.summary(end, window_s)),
            Endpoint::Probe(p) => EndpointSummary::Probe(p.summary()),
            Endpoint::Media(m) => EndpointSummary::Media(m.summary(end)),
            Endpoint::Udp(u) => EndpointSummary::Udp(u.summary(end)),
            Endpoint::Workloads(w) => EndpointSummary::Workloads(w.summaries()),
        })
    }
}

/// What the engine reads and writes for each packet of an endpoint (other than the
/// workloads') wherever its packet is: its route and its packet counts, in one aligned
/// 64-byte cache line (issue #15, session 7: the counts were two tables of their own beside
/// the route table, three lines a packet; at 1000 flows 2.7 L1 misses per packet).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct FlowRecord {
    route: Route,
    /// Packets the endpoint sent, and packets delivered to it (both ends).
    sent: u64,
    delivered: u64,
}

/// The endpoint table. Its last entry is always the workloads' slot set, which owns every id
/// from its index on and keeps its workloads' routes; `records[i]` holds entry `i`'s route and
/// packet counts for every other entry.
pub struct Endpoints {
    list: Vec<Endpoint>,
    records: Vec<FlowRecord>,
    /// Drops of the entries before the workloads moved out of the elements
    /// ([`Endpoints::count_dropped`]); the transfers' counts are the workloads'.
    dropped: FlowCounts,
}

impl Endpoints {
    /// `list` must end with the `Endpoint::Workloads` entry; `routes` holds the route of each
    /// entry before it.
    pub fn new(list: Vec<Endpoint>, routes: Vec<Route>) -> Endpoints {
        assert!(matches!(list.last(), Some(Endpoint::Workloads(_))), "the endpoint table ends with the workloads");
        assert_eq!(routes.len() + 1, list.len(), "a route per endpoint before the workloads");
        let records = routes.into_iter().map(|route| FlowRecord { route, sent: 0, delivered: 0 }).collect();
        Endpoints { list, records, dropped: FlowCounts::default() }
    }
    /// The route endpoint `id` travels on: a field of the table, or (ids of the workloads'
    /// arrival clocks and transfers) its workload's.
    #[inline]
    pub fn route(&self, id: u32) -> &Route {
        match self.records.get(id as usize) {
            Some(r) => &r.route,
            None => self.workloads().route(id),
        }
    }
    /// Counts a packet endpoint `id` sent (the per-flow conservation check) and returns its
    /// route: one look-up for both, at a packet's first hop.
    #[inline]
    pub fn count_sent(&mut self, id: u32) -> &Route {
        match self.records.get_mut(id as usize) {
            Some(r) => r.sent += 1,
            None => self.workloads_mut().count_sent(id),
        }
        self.route(id)
    }
    /// Counts a packet delivered to endpoint `id`.
    #[inline]
    pub fn count_delivered(&mut self, id: u32) {
        match self.records.get_mut(id as usize) {
            Some(r) => r.delivered += 1,
            None => self.workloads_mut().count_delivered(id),
        }
    }
    /// Counts `n` packets of endpoint `id` dropped by an element, moved out of the elements'
    /// counts (`Simulation::collect_flow_drops`).
    pub fn count_dropped(&mut self, id: u32, n: u64) {
        if (id as usize) < self.records.len() {
            self.dropped.add_n(id, n);
        } else {
            self.workloads_mut().count_dropped(id, n);
        }
    }
    /// The packets sent, delivered, and dropped as moved out of the elements, by endpoint id:
    /// every entry before the workloads, and the transfers whose counts are held (open,
    /// draining, or counted late: `Workloads::retire_ended`).
    pub fn flow_counts(&self) -> (FlowCounts, FlowCounts, FlowCounts) {
        let apart = FlowCounts::counting_apart_from(self.records.len() as u32);
        let (mut sent, mut delivered, mut dropped) = (apart.clone(), apart.clone(), apart);
        dropped.add_all(&self.dropped);
        for (i, r) in self.records.iter().enumerate() {
            sent.add_n(i as u32, r.sent);
            delivered.add_n(i as u32, r.delivered);
        }
        self.workloads().for_each_packet_counts(|id, p| {
            sent.add_n(id, p.sent);
            delivered.add_n(id, p.delivered);
            dropped.add_n(id, p.dropped);
        });
        (sent, delivered, dropped)
    }
    /// The first id beyond the table's records: the workloads' arrival clocks, then their
    /// transfers.
    pub fn first_beyond_records(&self) -> u32 {
        self.records.len() as u32
    }
    /// Packets sent and delivered over the run, every endpoint's.
    pub fn packet_totals(&self) -> (u64, u64) {
        let (sent, delivered) = self.workloads().packet_totals();
        self.records.iter().fold((sent, delivered), |(s, d), r| (s + r.sent, d + r.delivered))
    }
    #[inline]
    fn index(&self, id: u32) -> usize {
        (id as usize).min(self.list.len() - 1)
    }
    /// The endpoint that owns id `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &Endpoint {
        &self.list[self.index(id)]
    }
    #[inline]
    pub fn get_mut(&mut self, id: u32) -> &mut Endpoint {
        let i = self.index(id);
        &mut self.list[i]
    }
    pub fn iter(&self) -> impl Iterator<Item = &Endpoint> {
        self.list.iter()
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Endpoint> {
        self.list.iter_mut()
    }
    /// The TCP flow with id `id`; panics if that endpoint is not one.
    pub fn tcp(&self, id: usize) -> &TcpFlow {
        match &self.list[id] {
            Endpoint::Tcp(f) => f,
            _ => panic!("endpoint {id} is not a TCP flow"),
        }
    }
    /// [`Endpoints::tcp`], mutable.
    pub fn tcp_mut(&mut self, id: usize) -> &mut TcpFlow {
        match &mut self.list[id] {
            Endpoint::Tcp(f) => f,
            _ => panic!("endpoint {id} is not a TCP flow"),
        }
    }
    /// The names captures select endpoints by, indexed by group (see [`Endpoints::wire`]):
    /// every entry before the workloads, then each workload.
    pub fn group_names(&self) -> Vec<String> {
        let mut names: Vec<String> = (self.list.iter())
            .filter_map(|e| match e {
                Endpoint::Tcp(f) => Some(f.name.clone()),
                Endpoint::Probe(p) => Some(p.name.clone()),
                Endpoint::Media(m) => Some(m.name.clone()),
                Endpoint::Udp(u) => Some(u.name.clone()),
                Endpoint::Workloads(_) => None,
            })
            .collect();
        names.extend(self.workloads().names().map(str::to_string));
        names
    }
    /// Endpoint `id`'s group (its table index; for a workload's transfer, the table's
    /// length less one plus the workload's index) and wire identity; `None` for ids that
    /// send nothing (the workloads' arrival clocks).
    #[inline]
    pub fn wire(&self, id: u32) -> Option<(u32, Wire)> {
        let i = self.index(id);
        Some(match &self.list[i] {
            Endpoint::Tcp(f) => (i as u32, Wire::tcp(f.sender.config(), false)),
            Endpoint::Probe(p) => (i as u32, if p.kind == "ping" { Wire::Icmp } else { Wire::Udp { server_port: 2112 } }),
            Endpoint::Media(_) => (i as u32, Wire::Udp { server_port: 5004 }),
            Endpoint::Udp(_) => (i as u32, Wire::Udp { server_port: 5201 }),
            Endpoint::Workloads(w) => {
                let (k, cfg, data_down) = w.transfer_config(id)?;
                ((i + k) as u32, Wire::tcp(cfg, data_down))
            }
        })
    }
    /// The workloads' slot set.
    pub fn workloads(&self) -> &Workloads {
        match self.list.last() {
            Some(Endpoint::Workloads(w)) => w,
            _ => unreachable!("the endpoint table ends with the workloads"),
        }
    }
    /// [`Endpoints::workloads`], mutable.
    pub fn workloads_mut(&mut self) -> &mut Workloads {
        match self.list.last_mut() {
            Some(Endpoint::Workloads(w)) => w,
            _ => unreachable!("the endpoint table ends with the workloads"),
        }
    }
}
