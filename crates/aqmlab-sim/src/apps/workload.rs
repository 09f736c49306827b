//! Short-flow workloads, as heistp/ccafct generates them (`client.go`, algorithms.md 4.1):
//! transfers arrive as a Poisson process (exponential inter-arrival times, the first at
//! `start`), each a new TCP connection that carries one object whose size is lognormal with
//! μ = (ln P5 + ln P95)/2 and σ = (ln P95 − ln P5)/(2·1.645).
//!
//! Connection model (`direction = "down"`, HTTP-style: the server sends the object). The
//! client's SYN is a real packet on the up path; when it reaches the server, the server-side
//! sender opens its half: its SYN stands for the SYN-ACK and the client's SYN-ACK for the
//! ACK carrying the GET, so the object's first byte leaves the server 1.5 RTT after the
//! client's SYN, as with a real HTTP request on a new connection. A client SYN that is lost
//! is resent after `initial_rto`, doubling (Linux `tcp_retransmit_timer` on a request
//! socket); a lost server SYN-ACK is resent by the sender's own SYN timer. With
//! `direction = "up"` the client is the sender and opens the connection itself.
//!
//! FCT is measured as ccafct's client does: from the client's SYN (the request) to the last
//! byte delivered in order to the receiving application.
//!
//! Memory: a transfer's sender and receiver live in a slot of a slab while the connection
//! is open; when the sender has its last byte acknowledged the slot is freed and reused by
//! a later arrival, so connection state is bounded by the peak concurrency. Every transfer
//! keeps only its FCT (and a slot index while live). Endpoint ids are never reused, so a
//! straggler of a closed connection (a duplicate ACK, a timer) finds no slot and is dropped.

use crate::cc::CcSpec;
use std::collections::BTreeMap;
use crate::event::{Event, EventQueue, FlowTimer};
use crate::metrics::FctStats;
use crate::packet::{Direction, Kind, Packet};
use crate::path::Route;
use crate::profile::Stack;
use crate::rng::Stream;
use crate::tcp::{EndpointCtx, TcpConfig, TcpReceiver, TcpSender};
use crate::time::Time;
use serde::Serialize;

/// The z-score of the 95th percentile of the standard normal distribution, as ccafct uses it.
const Z95: f64 = 1.645;

/// Lognormal object sizes given by their 5th and 95th percentiles.
#[derive(Clone, Copy, Debug)]
pub struct SizeDist {
    pub mu: f64,
    pub sigma: f64,
}

impl SizeDist {
    pub fn from_percentiles(p5: u64, p95: u64) -> SizeDist {
        let (l5, l95) = ((p5 as f64).ln(), (p95 as f64).ln());
        SizeDist { mu: (l5 + l95) / 2.0, sigma: (l95 - l5) / (2.0 * Z95) }
    }
    /// exp(μ + σ²/2).
    pub fn mean(&self) -> f64 {
        (self.mu + self.sigma * self.sigma / 2.0).exp()
    }
    /// One size in bytes, rounded to the nearest byte and at least 1 (ccafct truncates to
    /// an int; rounding keeps a zero-width distribution, P5 = P95, exactly at that size).
    pub fn sample(&self, rng: &mut Stream) -> u64 {
        (self.mu + self.sigma * standard_normal(rng)).exp().round().max(1.0) as u64
    }
}

/// A standard normal draw (Box–Muller, one of the pair).
fn standard_normal(rng: &mut Stream) -> f64 {
    let u1 = 1.0 - rng.uniform(); // (0, 1]: ln is finite
    let u2 = rng.uniform();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The arrival process of one workload: the first transfer at `start`, then exponential
/// gaps of mean `mean`; none at or after `stop`. Each arrival draws its size, then the gap
/// to the next, from the workload's own stream.
#[derive(Clone, Debug)]
pub struct Arrivals {
    next: Option<Time>,
    mean: Time,
    stop: Time,
    sizes: SizeDist,
    rng: Stream,
}

impl Arrivals {
    pub fn new(start: Time, stop: Time, mean: Time, sizes: SizeDist, rng: Stream) -> Arrivals {
        Arrivals { next: (start < stop).then_some(start), mean, stop, sizes, rng }
    }
    /// Time of the next arrival, if any.
    pub fn peek(&self) -> Option<Time> {
        self.next
    }
    /// The next arrival's time and object size.
    pub fn pop(&mut self) -> Option<(Time, u64)> {
        let at = self.next?;
        let size = self.sizes.sample(&mut self.rng);
        let gap = -(1.0 - self.rng.uniform()).ln() * self.mean.0 as f64;
        let next = at + Time(gap as u64);
        self.next = (next < self.stop).then_some(next);
        Some((at, size))
    }
}

/// One workload's settings, as the scenario gives them (`[[workloads]]`).
#[derive(Debug)]
pub struct WorkloadConfig {
    /// Names the random stream (`workload/<name>`) and the summary entry.
    pub name: String,
    pub cc: CcSpec,
    /// Connection settings; the size is set per transfer.
    pub tcp: TcpConfig,
    pub data_down: bool,
    pub mean_interarrival: Time,
    /// 5th and 95th percentiles of the lognormal object size.
    pub size_p5: u64,
    pub size_p95: u64,
    /// First arrival.
    pub start: Time,
    /// No arrivals at or after this time.
    pub stop: Time,
    /// The route all its transfers share.
    pub route: Route,
}

/// One workload's configuration and results.
struct Workload {
    name: String,
    start: Time,
    cc: CcSpec,
    /// Connection settings; the size is set per transfer.
    cfg: TcpConfig,
    data_down: bool,
    route: Route,
    arrivals: Arrivals,
    /// FCT of every transfer started, in arrival order (`None` while unfinished).
    fct: Vec<Option<Time>>,
}

/// An open connection.
struct Transfer {
    workload: u32,
    /// Position in the workload's arrival order.
    index: u32,
    start: Time,
    size: u64,
    /// Whether the client's SYN has reached the server (data down) or the client has
    /// opened the connection itself (data up).
    opened: bool,
    client_syns: u32,
    sender: TcpSender,
    receiver: TcpReceiver,
    packets: TransferPackets,
}

const CLOSED: u32 = u32::MAX;

/// A transfer's packets for the per-flow conservation check (`sim::check_flow_conservation`):
/// sent by its two ends, delivered to them, and dropped by an element (moved here from the
/// elements' counts once per sampling step, `Simulation::collect_flow_drops`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferPackets {
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
}

impl TransferPackets {
    /// Every packet sent has been delivered or dropped.
    fn ended(&self) -> bool {
        self.sent == self.delivered + self.dropped
    }
}

/// Every workload of a run, with the connection slab they share: the last entry of the
/// engine's endpoint table, which owns every endpoint id from its own on.
///
/// Endpoint ids: `base + w` is workload w's arrival clock (its `FlowTimer::Start` events
/// are arrivals); transfers get `base + workloads + k` in order of arrival over all
/// workloads. Workload w's traffic travels on its route.
pub struct Workloads {
    seed: u64,
    stack: Stack,
    base: u32,
    list: Vec<Workload>,
    /// (workload, slot or CLOSED) of every transfer, indexed by `id - first transfer id`.
    owner: Vec<(u32, u32)>,
    slots: Vec<Option<Transfer>>,
    free: Vec<u32>,
    live: usize,
    peak_live: usize,
    /// The packet counts of the transfers closed with packets still in the network, until
    /// those have ended (then they are checked and forgotten: [`Workloads::retire_ended`]);
    /// an open transfer's are in its slot. So the counts held grow with the transfers open
    /// at once, not with the transfers a run makes.
    draining: BTreeMap<u32, TransferPackets>,
    /// Packets of a transfer counted after it was checked and forgotten: a conservation bug,
    /// reported by the end-of-run check.
    late: BTreeMap<u32, TransferPackets>,
    /// Packets the transfers sent and were delivered, over the run.
    sent_total: u64,
    delivered_total: u64,
}

/// A workload in `summary.json` → `workloads[]`.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSummary {
    pub name: String,
    /// Transfers that arrived (sent their SYN).
    pub started: u64,
    /// Transfers whose last byte reached the client before the end of the run.
    pub completed: u64,
    /// Started but not completed by the end of the run (no FCT).
    pub incomplete: u64,
    /// FCT of each completed transfer, in arrival order.
    pub fct_s: Vec<f64>,
    pub fct_geomean_s: Option<f64>,
    pub fct_median_s: Option<f64>,
    pub fct_p95_s: Option<f64>,
}

impl Workloads {
    /// `base` is the endpoint id of the first workload's arrival clock; `stack` the era
    /// profile the transfers' congestion controls are built for.
    pub fn new(seed: u64, stack: Stack, base: u32, configs: Vec<WorkloadConfig>) -> Workloads {
        let list = configs
            .into_iter()
            .map(|c| {
                let rng = Stream::new(seed, &format!("workload/{}", c.name));
                Workload {
                    start: c.start,
                    arrivals: Arrivals::new(c.start, c.stop, c.mean_interarrival, SizeDist::from_percentiles(c.size_p5, c.size_p95), rng),
                    cc: c.cc,
                    cfg: c.tcp,
                    data_down: c.data_down,
                    route: c.route,
                    fct: Vec::new(),
                    name: c.name,
                }
            })
            .collect();
        Workloads {
            seed,
            stack,
            base,
            list,
            owner: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            peak_live: 0,
            draining: BTreeMap::new(),
            late: BTreeMap::new(),
            sent_total: 0,
            delivered_total: 0,
        }
    }

    /// Schedules each workload's first arrival.
    pub fn schedule(&self, events: &mut EventQueue) {
        for (w, wl) in self.list.iter().enumerate() {
            if let Some(t) = wl.arrivals.peek() {
                events.schedule(t, Event::Flow(self.base + w as u32, FlowTimer::Start));
            }
        }
    }

    /// Each workload's first arrival time.
    pub fn starts(&self) -> impl Iterator<Item = Time> + '_ {
        self.list.iter().map(|w| w.start)
    }

    fn first_transfer(&self) -> u32 {
        self.base + self.list.len() as u32
    }

    /// The workload an endpoint id (arrival clock or transfer) belongs to.
    fn workload_of(&self, id: u32) -> usize {
        match id.checked_sub(self.first_transfer()) {
            Some(k) => self.owner[k as usize].0 as usize,
            None => (id - self.base) as usize,
        }
    }

    /// The route of an endpoint id (arrival clock or transfer): its workload's.
    #[inline]
    pub fn route(&self, id: u32) -> &Route {
        &self.list[self.workload_of(id)].route
    }

    /// The workloads' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|w| w.name.as_str())
    }

    /// A transfer's workload index, connection settings and whether its client opens it
    /// (data down); `None` for an arrival clock.
    pub fn transfer_config(&self, id: u32) -> Option<(usize, &TcpConfig, bool)> {
        id.checked_sub(self.first_transfer())?;
        let w = self.workload_of(id);
        Some((w, &self.list[w].cfg, self.list[w].data_down))
    }

    /// Connection slots allocated so far (the peak number of simultaneously open transfers).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }
    /// Transfers open now.
    pub fn open(&self) -> usize {
        self.live
    }
    /// The most transfers open at once.
    pub fn peak_live(&self) -> usize {
        self.peak_live
    }

    fn transfer_mut(&mut self, id: u32) -> Option<&mut Transfer> {
        let k = id.checked_sub(self.first_transfer())?;
        let slot = self.owner.get(k as usize)?.1;
        if slot == CLOSED {
            return None;
        }
        self.slots[slot as usize].as_mut()
    }

    /// A timer of a workload endpoint: an arrival, a client SYN retry, or a connection timer.
    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if ctx.flow < self.first_transfer() {
            self.arrive((ctx.flow - self.base) as usize, ctx);
            return;
        }
        let Some(tr) = self.transfer_mut(ctx.flow) else { return };
        match t {
            FlowTimer::Start => {
                if !tr.opened {
                    send_client_syn(tr, ctx);
                }
            }
            FlowTimer::DelayedAck => tr.receiver.on_timer(t, ctx),
            _ => tr.sender.on_timer(t, ctx),
        }
    }

    /// Opens the next transfer of workload `w` and schedules the arrival after it.
    fn arrive(&mut self, w: usize, ctx: &mut EndpointCtx) {
        let id = self.first_transfer() + self.owner.len() as u32;
        let wl = &mut self.list[w];
        let Some((at, size)) = wl.arrivals.pop() else { return };
        if let Some(next) = wl.arrivals.peek() {
            ctx.events.schedule(next, ctx.event(FlowTimer::Start));
        }
        let index = wl.fct.len() as u32;
        wl.fct.push(None);
        let cfg = TcpConfig { size: Some(size), ..wl.cfg.clone() };
        let cc = wl.cc.config().build(Stream::new(self.seed, &format!("cc/{}/{index}", wl.name)), self.stack);
        let mut tr = Transfer {
            workload: w as u32,
            index,
            start: at,
            size,
            opened: false,
            client_syns: 0,
            sender: TcpSender::new(id, cfg.clone(), cc),
            receiver: TcpReceiver::new(id, &cfg),
            packets: TransferPackets::default(),
        };
        let mut ctx = EndpointCtx { flow: id, now: ctx.now, events: &mut *ctx.events, out: &mut *ctx.out };
        if wl.data_down {
            send_client_syn(&mut tr, &mut ctx);
        } else {
            tr.opened = true;
            tr.sender.start(&mut ctx);
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(tr);
                s
            }
            None => {
                self.slots.push(Some(tr));
                (self.slots.len() - 1) as u32
            }
        };
        self.owner.push((w as u32, slot));
        self.live += 1;
        self.peak_live = self.peak_live.max(self.live);
    }

    /// A packet reaching a workload endpoint.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let Some(tr) = self.transfer_mut(pkt.flow) else { return };
        match pkt.dir {
            Direction::Forward => {
                tr.receiver.on_packet(pkt, ctx);
                if tr.receiver.delivered_bytes >= tr.size {
                    let (w, i, fct) = (tr.workload as usize, tr.index as usize, ctx.now - tr.start);
                    self.list[w].fct[i].get_or_insert(fct);
                }
            }
            Direction::Reverse if pkt.kind == Kind::Syn => {
                if !tr.opened {
                    tr.opened = true;
                    tr.sender.start(ctx);
                }
            }
            Direction::Reverse => {
                tr.sender.on_packet(pkt, ctx);
                if tr.sender.is_complete() {
                    // Named by position (workloads[w], transfer i): the names are borrowed here.
                    crate::apps::bulk::check_tcp_invariants(format_args!("workloads[{}] transfer {}", tr.workload, tr.index), &tr.sender, &tr.receiver);
                    self.close(pkt.flow);
                }
            }
        }
    }

    /// Frees a finished connection's slot for later arrivals.
    fn close(&mut self, id: u32) {
        let k = (id - self.first_transfer()) as usize;
        let slot = std::mem::replace(&mut self.owner[k].1, CLOSED);
        let tr = self.slots[slot as usize].take().expect("an open transfer's slot holds it");
        // Kept until its packets in flight have ended (the ones this event sends included).
        self.draining.insert(id, tr.packets);
        self.free.push(slot);
        self.live -= 1;
    }

    /// The packet counts of transfer `id`: in its slot while open, then while draining;
    /// after that, counts that come late.
    fn packets_mut(&mut self, id: u32) -> &mut TransferPackets {
        let slot = id.checked_sub(self.first_transfer()).and_then(|k| self.owner.get(k as usize)).map_or(CLOSED, |o| o.1);
        if slot != CLOSED {
            if let Some(tr) = self.slots[slot as usize].as_mut() {
                return &mut tr.packets;
            }
        }
        match self.draining.get_mut(&id) {
            Some(p) => p,
            None => self.late.entry(id).or_default(),
        }
    }
    /// Counts a packet transfer `id` sent.
    #[inline]
    pub fn count_sent(&mut self, id: u32) {
        self.sent_total += 1;
        self.packets_mut(id).sent += 1;
    }
    /// Counts a packet delivered to transfer `id`.
    #[inline]
    pub fn count_delivered(&mut self, id: u32) {
        self.delivered_total += 1;
        self.packets_mut(id).delivered += 1;
    }
    /// Counts `n` packets of transfer `id` dropped by an element.
    pub fn count_dropped(&mut self, id: u32, n: u64) {
        self.packets_mut(id).dropped += n;
    }
    /// Forgets the counts of the closed transfers whose every packet has ended (delivered,
    /// or dropped with the drops moved here): they hold, and a packet of one counted after
    /// this is a bug the end-of-run check reports (it lands in `late`). Call when the
    /// elements' drops have just been moved here, between events.
    pub fn retire_ended(&mut self) {
        self.draining.retain(|_, p| !p.ended());
    }
    /// Packets every transfer sent and packets delivered to them, over the run.
    pub fn packet_totals(&self) -> (u64, u64) {
        (self.sent_total, self.delivered_total)
    }
    /// Calls `f(id, counts)` for every transfer whose counts are held: open, draining, late.
    pub fn for_each_packet_counts(&self, mut f: impl FnMut(u32, &TransferPackets)) {
        let first = self.first_transfer();
        for (k, &(_, slot)) in self.owner.iter().enumerate() {
            if let Some(Some(tr)) = (slot != CLOSED).then(|| self.slots[slot as usize].as_ref()) {
                f(first + k as u32, &tr.packets);
            }
        }
        for (&id, p) in self.draining.iter().chain(&self.late) {
            f(id, p);
        }
    }
    /// Transfers whose packet counts are held (open, draining, late): bounded by the
    /// transfers open at once and the packets in flight, not by the run's transfers.
    pub fn packet_counts_held(&self) -> usize {
        self.live + self.draining.len() + self.late.len()
    }
    /// Whether the run has workloads (whose transfers' drops are moved out of the elements).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `summary.json` → `workloads[]`.
    pub fn summaries(&self) -> Vec<WorkloadSummary> {
        self.list
            .iter()
            .map(|w| {
                let fct_s: Vec<f64> = w.fct.iter().flatten().map(|t| t.as_secs_f64()).collect();
                let stats = FctStats::of(&fct_s);
                WorkloadSummary {
                    name: w.name.clone(),
                    started: w.fct.len() as u64,
                    completed: fct_s.len() as u64,
                    incomplete: (w.fct.len() - fct_s.len()) as u64,
                    fct_geomean_s: stats.map(|s| s.geomean),
                    fct_median_s: stats.map(|s| s.median),
                    fct_p95_s: stats.map(|s| s.p95),
                    fct_s,
                }
            })
            .collect()
    }
}

/// The client's SYN (data down): a packet to the server, resent with exponential backoff
/// from the initial RTO until the server has it.
fn send_client_syn(tr: &mut Transfer, ctx: &mut EndpointCtx) {
    let cfg = tr.sender.config();
    let mut syn = Packet::new(ctx.flow, Direction::Reverse, Kind::Syn, cfg.header_bytes);
    // Its timestamp option (only captures read it).
    syn.tcp.ts_val = TcpSender::ts_of(ctx.now);
    ctx.out.push(syn);
    let backoff = Time(cfg.rto_initial.0 << tr.client_syns.min(20)).min(cfg.rto_max);
    tr.client_syns += 1;
    ctx.events.schedule(ctx.now + backoff, ctx.event(FlowTimer::Start));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::empirical_quantile;

    #[test]
    fn ccafct_distribution_parameters() {
        let d = SizeDist::from_percentiles(64 << 10, 2 << 20);
        // P5 = 2^16, P95 = 2^21: μ = 18.5·ln 2 ≈ 12.82, σ = 5·ln 2 / 3.29 ≈ 1.053; ccafct
        // prints the mean as 645683 B (algorithms.md 4.1).
        let ln2 = std::f64::consts::LN_2;
        assert!((d.mu - 18.5 * ln2).abs() < 1e-12 && (d.sigma - 5.0 * ln2 / 3.29).abs() < 1e-12, "{d:?}");
        assert_eq!(d.mean() as u64, 645_683);
    }

    #[test]
    fn zero_width_distribution_gives_the_exact_size() {
        let d = SizeDist::from_percentiles(100_000, 100_000);
        let mut rng = Stream::new(1, "t");
        assert!((0..100).all(|_| d.sample(&mut rng) == 100_000));
    }

    #[test]
    fn size_percentiles_match_the_specification() {
        let d = SizeDist::from_percentiles(64 << 10, 2 << 20);
        let mut rng = Stream::new(7, "workload/sizes");
        let n = 200_000;
        let mut x: Vec<f64> = (0..n).map(|_| d.sample(&mut rng) as f64).collect();
        x.sort_by(f64::total_cmp);
        let (p5, p95) = (empirical_quantile(&x, 0.05), empirical_quantile(&x, 0.95));
        let mean = x.iter().sum::<f64>() / n as f64;
        println!("sizes: P5 {p5:.0} (65536), P95 {p95:.0} (2097152), mean {mean:.0} ({:.0})", d.mean());
        // The sample quantile's standard error at p = 0.05 with n = 2e5 is about 0.6 % of
        // the value here (sqrt(p(1-p)/n) / (f(q) q) with f the lognormal density); 2 % is > 3σ.
        assert!((p5 / 65536.0 - 1.0).abs() < 0.02, "P5 {p5}");
        assert!((p95 / 2_097_152.0 - 1.0).abs() < 0.02, "P95 {p95}");
        assert!((mean / d.mean() - 1.0).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn arrivals_are_poisson_over_the_window() {
        let d = SizeDist::from_percentiles(1000, 1000);
        let (start, stop, mean) = (Time::from_secs(20), Time::from_secs(200), Time::from_millis(200));
        let expected: f64 = 900.0;
        let sigma = expected.sqrt();
        let mut gaps = Vec::new();
        for seed in 1..=5 {
            let mut a = Arrivals::new(start, stop, mean, d, Stream::new(seed, "workload/web"));
            let mut times = Vec::new();
            while let Some((t, _)) = a.pop() {
                times.push(t);
            }
            assert_eq!(times[0], start);
            assert!(times.iter().all(|&t| t >= start && t < stop));
            let n = times.len() as f64;
            println!("seed {seed}: {n} arrivals in [20 s, 200 s) (expected {expected} ± {sigma:.0})");
            assert!((n - expected).abs() < 3.0 * sigma, "{n}");
            gaps.extend(times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()));
        }
        // Exponential gaps: mean 0.2 s and coefficient of variation 1.
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        println!("gaps: mean {m:.4} s, cv {:.3}", sd / m);
        assert!((m - 0.2).abs() < 3.0 * 0.2 / (gaps.len() as f64).sqrt(), "{m}");
        assert!((sd / m - 1.0).abs() < 0.08, "{}", sd / m);
    }
}
