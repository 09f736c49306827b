//! The endpoints of a run, in one table indexed by endpoint id (in the style of smoltcp's
//! socket set): each entry is one kind of traffic with both of its ends; beside it the table
//! keeps the entry's route (its elements and the client host its packets carry), a plain
//! field looked up on every hop (`Endpoints::route`). The engine hands every timer and every
//! packet that reaches the end of its route to `Endpoints::on_timer` and
//! `Endpoints::on_packet`, which dispatch by id range and `match` (no virtual call).
//!
//! The TCP flows, which come first, are a vector of their own (`TcpFlow`, no enum tag): a
//! packet's or timer's dispatch to one is a compare of its id with their count, not a load of
//! the entry's tag and a jump through the variants (issue #15, session 12: about 18
//! instructions per bottleneck packet fewer on (a) and f10, 27 on f1000: 0.8 %).
//!
//! Ids, which packets carry (`Packet::flow`) and which name random streams (`cc/<id>`) and
//! flow hashes, run in table order: TCP flows (the `[[flows]]` copies, then the transient
//! groups' flows), probes, media, UDP sources, and last the workloads' slot set, which owns
//! every id from its own on (an arrival clock per workload, then the transfers in arrival
//! order). A new kind of traffic is one application file in `apps/`, one spec in the
//! scenario, one arm here and its construction in `build.rs`.

use crate::apps::bulk::TcpFlow;
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

/// One entry of the endpoint table after the TCP flows.
pub enum Endpoint {
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

/// What an endpoint other than a TCP flow reports in `summary.json`.
pub enum EndpointSummary {
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
            Endpoint::Probe(p) => p.probe.on_packet(pkt, ctx),
            Endpoint::Media(m) => m.on_packet(pkt, ctx),
            Endpoint::Udp(u) => u.app.on_packet(pkt, ctx),
            Endpoint::Workloads(w) => w.on_packet(pkt, ctx),
        }
    }

    /// Records this endpoint's series at a grid tick.
    pub fn sample(&mut self, tick: &Tick, recorder: &mut SeriesRecorder) {
        match self {
            Endpoint::Probe(p) => p.sample(recorder),
            Endpoint::Media(m) => m.sample(tick, recorder),
            Endpoint::Udp(u) => u.sample(tick, recorder),
            Endpoint::Workloads(_) => {}
        }
    }

    /// The earliest time the endpoint starts.
    pub fn first_start(&self) -> Option<Time> {
        match self {
            Endpoint::Probe(p) => Some(p.start),
            Endpoint::Media(m) => Some(m.start),
            Endpoint::Udp(u) => Some(u.start),
            Endpoint::Workloads(w) => w.starts().min(),
        }
    }

    /// The `summary.json` entry at the end of the run (`end`).
    pub fn summary(&mut self, end: Time) -> EndpointSummary {
        match self {
            Endpoint::Probe(p) => EndpointSummary::Probe(p.summary()),
            Endpoint::Media(m) => EndpointSummary::Media(m.summary(end)),
            Endpoint::Udp(u) => EndpointSummary::Udp(u.summary(end)),
            Endpoint::Workloads(w) => EndpointSummary::Workloads(w.summaries()),
        }
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

/// The endpoint table: the TCP flows (ids `0..tcp.len()`), then the other entries. Its last
/// entry is always the workloads' slot set, which owns every id from its index on and keeps
/// its workloads' routes; `records[i]` holds endpoint `i`'s route and packet counts for every
/// id before the workloads'.
pub struct Endpoints {
    tcp: Vec<TcpFlow>,
    list: Vec<Endpoint>,
    records: Vec<FlowRecord>,
    /// Drops of the entries before the workloads moved out of the elements
    /// ([`Endpoints::count_dropped`]); the transfers' counts are the workloads'.
    dropped: FlowCounts,
}

impl Endpoints {
    /// `tcp` holds the TCP flows (ids from 0), `list` the entries after them and must end
    /// with the `Endpoint::Workloads` entry; `routes` holds the route of each id before the
    /// workloads'.
    pub fn new(tcp: Vec<TcpFlow>, list: Vec<Endpoint>, routes: Vec<Route>) -> Endpoints {
        assert!(matches!(list.last(), Some(Endpoint::Workloads(_))), "the endpoint table ends with the workloads");
        assert_eq!(routes.len() + 1, tcp.len() + list.len(), "a route per endpoint before the workloads");
        // Dispatch finds a TCP flow at its id's index: a flow built out of order would
        // receive another's packets.
        assert!(tcp.iter().enumerate().all(|(i, f)| f.sender.flow() as usize == i), "the TCP flows in id order from 0");
        let records = routes.into_iter().map(|route| FlowRecord { route, sent: 0, delivered: 0 }).collect();
        Endpoints { tcp, list, records, dropped: FlowCounts::default() }
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
    /// The index in `list` of the entry that owns id `id` (not a TCP flow's).
    #[inline]
    fn index(&self, id: u32) -> usize {
        debug_assert!(id as usize >= self.tcp.len(), "id {id} is a TCP flow's");
        (id as usize - self.tcp.len()).min(self.list.len() - 1)
    }
    /// A timer of endpoint `ctx.flow` = `id` fired (`FlowTimer::Start` starts it).
    #[inline]
    pub fn on_timer(&mut self, id: u32, timer: FlowTimer, ctx: &mut EndpointCtx) {
        match self.tcp.get_mut(id as usize) {
            Some(f) => f.on_timer(timer, ctx),
            None => {
                let i = self.index(id);
                self.list[i].on_timer(timer, ctx)
            }
        }
    }
    /// A packet reached the end of its route at endpoint `id` (`pkt.flow`): the data side
    /// for `Direction::Forward`, the other side for `Direction::Reverse`.
    #[inline]
    pub fn on_packet(&mut self, id: u32, pkt: &Packet, ctx: &mut EndpointCtx) {
        match self.tcp.get_mut(id as usize) {
            Some(f) => f.on_packet(pkt, ctx),
            None => {
                let i = self.index(id);
                self.list[i].on_packet(pkt, ctx)
            }
        }
    }
    /// Schedules every endpoint's start (and stop), in id order; `before_udp` runs once, just
    /// before the first UDP source's or the workloads' (an equal-time tie runs in this order).
    pub fn schedule(&self, events: &mut EventQueue, before_udp: impl FnOnce(&mut EventQueue)) {
        for (id, f) in self.tcp.iter().enumerate() {
            events.schedule(f.start, Event::Flow(id as u32, FlowTimer::Start));
            if let Some(s) = f.stop {
                events.schedule(s, Event::Flow(id as u32, FlowTimer::Stop));
            }
        }
        let mut before_udp = Some(before_udp);
        for (i, e) in self.list.iter().enumerate() {
            if matches!(e, Endpoint::Udp(_) | Endpoint::Workloads(_)) {
                if let Some(f) = before_udp.take() {
                    f(events);
                }
            }
            e.schedule((self.tcp.len() + i) as u32, events);
        }
    }
    /// What kind of endpoint owns id `id`, as messages name it.
    pub fn kind_name(&self, id: u32) -> &'static str {
        if (id as usize) < self.tcp.len() {
            return "TCP";
        }
        match &self.list[self.index(id)] {
            Endpoint::Probe(_) => "probe",
            Endpoint::Media(_) => "media",
            Endpoint::Udp(_) => "UDP",
            Endpoint::Workloads(_) => "workload transfer",
        }
    }
    /// The TCP flows, in id order (ids from 0).
    pub fn tcp_flows(&self) -> &[TcpFlow] {
        &self.tcp
    }
    /// [`Endpoints::tcp_flows`], mutable.
    pub fn tcp_flows_mut(&mut self) -> &mut [TcpFlow] {
        &mut self.tcp
    }
    /// The entries after the TCP flows, in id order.
    pub fn others(&self) -> &[Endpoint] {
        &self.list
    }
    /// [`Endpoints::others`], mutable.
    pub fn others_mut(&mut self) -> &mut [Endpoint] {
        &mut self.list
    }
    /// The TCP flow with id `id`; panics if that endpoint is not one.
    pub fn tcp(&self, id: usize) -> &TcpFlow {
        self.tcp.get(id).unwrap_or_else(|| panic!("endpoint {id} is not a TCP flow"))
    }
    /// [`Endpoints::tcp`], mutable.
    pub fn tcp_mut(&mut self, id: usize) -> &mut TcpFlow {
        self.tcp.get_mut(id).unwrap_or_else(|| panic!("endpoint {id} is not a TCP flow"))
    }
    /// The names captures select endpoints by, indexed by group (see [`Endpoints::wire`]):
    /// every entry before the workloads, then each workload.
    pub fn group_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tcp.iter().map(|f| f.name.clone()).collect();
        names.extend(self.list.iter().filter_map(|e| match e {
            Endpoint::Probe(p) => Some(p.name.clone()),
            Endpoint::Media(m) => Some(m.name.clone()),
            Endpoint::Udp(u) => Some(u.name.clone()),
            Endpoint::Workloads(_) => None,
        }));
        names.extend(self.workloads().names().map(str::to_string));
        names
    }
    /// Endpoint `id`'s group (its table index; for a workload's transfer, the table's
    /// length less one plus the workload's index) and wire identity; `None` for ids that
    /// send nothing (the workloads' arrival clocks).
    #[inline]
    pub fn wire(&self, id: u32) -> Option<(u32, Wire)> {
        if let Some(f) = self.tcp.get(id as usize) {
            return Some((id, Wire::tcp(f.sender.config(), false)));
        }
        let i = self.index(id);
        let group = (self.tcp.len() + i) as u32;
        Some(match &self.list[i] {
            Endpoint::Probe(p) => (group, if p.kind == "ping" { Wire::Icmp } else { Wire::Udp { server_port: 2112 } }),
            Endpoint::Media(_) => (group, Wire::Udp { server_port: 5004 }),
            Endpoint::Udp(_) => (group, Wire::Udp { server_port: 5201 }),
            Endpoint::Workloads(w) => {
                let (k, cfg, data_down) = w.transfer_config(id)?;
                (group + k as u32, Wire::tcp(cfg, data_down))
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
