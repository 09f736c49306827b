//! Path elements: what a packet passes through between its sender and its receiver.
//!
//! A flow's route is a list of element indices per direction; the engine hands a packet to
//! each element in turn. Elements hold their packets themselves and ask the event queue to
//! wake them when something is due, so at most one event per element is pending.

use crate::event::{Event, EventQueue};
use crate::metrics::{LogHistogram, SpikeTracker};
use crate::packet::{Ecn, Packet};
use crate::path::netem::Netem;
use crate::path::tunnel::TunnelElement;
use crate::qdisc::{Enqueued, Qdisc};
use crate::time::{Rate, Time};
use std::collections::VecDeque;

/// What an element needs from the engine while it handles a packet or a wake-up.
pub struct ElementCtx<'a> {
    pub id: u32,
    pub now: Time,
    pub events: &'a mut EventQueue,
    /// Packets leaving the element, forwarded by the engine to their next hop.
    pub out: &'a mut Vec<Packet>,
}

impl ElementCtx<'_> {
    fn wake_at(&mut self, t: Time) {
        self.events.schedule(t, Event::Element(self.id));
    }
}

/// A constant propagation delay. Packets keep their order, so a FIFO with one pending
/// wake-up (for its head) suffices.
#[derive(Debug)]
pub struct DelayLine {
    delay: Time,
    line: VecDeque<(Time, Packet)>,
}

impl DelayLine {
    pub fn new(delay: Time) -> Self {
        DelayLine { delay, line: VecDeque::with_capacity(64) }
    }
    pub fn delay(&self) -> Time {
        self.delay
    }
    fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        let due = ctx.now + self.delay;
        if self.line.is_empty() {
            ctx.wake_at(due);
        }
        self.line.push_back((due, pkt));
    }
    fn wake(&mut self, ctx: &mut ElementCtx) {
        while let Some(&(due, pkt)) = self.line.front() {
            if due > ctx.now {
                ctx.wake_at(due);
                return;
            }
            self.line.pop_front();
            ctx.out.push(pkt);
        }
    }
}

/// Per sub-queue statistics (one entry per name in `Qdisc::queue_names` of every discipline
/// the link has had), streamed in fixed memory.
#[derive(Debug, Default)]
pub struct QueueStats {
    pub name: &'static str,
    /// Sojourn time of every dequeued packet, in ns.
    pub sojourn: LogHistogram,
    /// Sojourn sum, count and max since the last sampling tick.
    pub tick_sum: Time,
    pub tick_n: u64,
    pub tick_max: Time,
}

impl QueueStats {
    fn record(&mut self, sojourn: Time) {
        self.sojourn.record(sojourn.as_nanos());
        self.tick_sum += sojourn;
        self.tick_n += 1;
        self.tick_max = self.tick_max.max(sojourn);
    }
    /// Sum, count and maximum of the sojourns since the last call.
    pub fn take_tick(&mut self) -> (Time, u64, Time) {
        let r = (self.tick_sum, self.tick_n, self.tick_max);
        self.tick_sum = Time::ZERO;
        self.tick_n = 0;
        self.tick_max = Time::ZERO;
        r
    }
}

/// Statistics a link keeps about its traffic.
#[derive(Debug, Default)]
pub struct LinkStats {
    /// By sub-queue name; a discipline swap adds the new discipline's names.
    pub queues: Vec<QueueStats>,
    /// Drops and CE marks of the disciplines that have been replaced.
    pub retired_drops: u64,
    pub retired_ce_marks: u64,
    /// Time spent serialising packets.
    pub busy: Time,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Delay-spike durations of the backlog, when asked for (`[metrics] spike_thresholds`).
    pub spikes: Option<SpikeTracker>,
}

/// A link: a queue discipline feeding a serialiser of the given rate. A packet is dequeued
/// when the serialiser is free (so its sojourn excludes its own transmission, as in Linux
/// where the qdisc hands the packet to the device) and leaves after `len / rate`. A shaping
/// discipline may hold packets back; the link then retries when it says.
pub struct Link {
    rate: Rate,
    qdisc: Box<dyn Qdisc>,
    in_tx: Option<Packet>,
    tx_end: Time,
    /// A pending retry for a shaping discipline.
    retry_at: Option<Time>,
    /// `stats.queues` index of each of the current discipline's sub-queues.
    queue_slots: Vec<usize>,
    pub stats: LinkStats,
}

impl Link {
    pub fn new(rate: Rate, qdisc: Box<dyn Qdisc>) -> Self {
        let mut link = Link { rate, qdisc, in_tx: None, tx_end: Time::ZERO, retry_at: None, queue_slots: Vec::new(), stats: LinkStats::default() };
        link.map_queues();
        link
    }
    /// Points each sub-queue of the current discipline at the statistics of that name.
    fn map_queues(&mut self) {
        let queues = &mut self.stats.queues;
        self.queue_slots = (self.qdisc.queue_names().iter())
            .map(|&name| {
                queues.iter().position(|q| q.name == name).unwrap_or_else(|| {
                    queues.push(QueueStats { name, ..QueueStats::default() });
                    queues.len() - 1
                })
            })
            .collect();
    }
    pub fn rate(&self) -> Rate {
        self.rate
    }
    /// Changes the rate at `now`, as HTB `tc class change`: the packet on the wire completes at
    /// the old rate, the next one is serialised at the new rate; the discipline is not touched.
    /// The spike tracker's delay thresholds follow the rate.
    pub fn set_rate(&mut self, rate: Rate, now: Time) {
        self.rate = rate;
        if let Some(s) = &mut self.stats.spikes {
            s.set_rate(now, rate, self.qdisc.backlog_bytes());
        }
    }
    /// Packets dropped by this link's disciplines, the replaced ones included.
    pub fn drops(&self) -> u64 {
        self.stats.retired_drops + self.qdisc.stats().drops
    }
    /// Packets CE-marked by this link's disciplines, the replaced ones included.
    pub fn ce_marks(&self) -> u64 {
        self.stats.retired_ce_marks + self.qdisc.stats().ce_marks
    }
    pub fn qdisc(&self) -> &dyn Qdisc {
        self.qdisc.as_ref()
    }
    /// Packets held: queued plus the one being serialised.
    pub fn held(&self) -> usize {
        self.qdisc.len() + self.in_tx.is_some() as usize
    }
    /// `tc qdisc replace` (Linux `tc_modify_qdisc`). A discipline of another kind is swapped
    /// in: the old one's queue is discarded (counted as its drops); the packet on the wire
    /// completes. One of the same kind is a `qdisc_change`: the installed discipline keeps
    /// its queue and state and takes the new parameters where it models the change
    /// (`Qdisc::change`: pfifo/bfifo, pie), else it is kept as it is. Returns the packets
    /// discarded by a swap.
    pub fn replace_qdisc(&mut self, qdisc: Box<dyn Qdisc>, now: Time) -> u64 {
        self.replace_qdisc_with(qdisc, None, now)
    }
    /// [`Link::replace_qdisc`] given the new discipline's parsed parameters, which a
    /// same-kind change passes to `Qdisc::change` (without them the installed discipline is
    /// kept as it is).
    pub fn replace_qdisc_with(&mut self, qdisc: Box<dyn Qdisc>, params: Option<&crate::qdisc::Args>, now: Time) -> u64 {
        if qdisc.kind() == self.qdisc.kind() {
            if let Some(p) = params {
                self.qdisc.change(p);
            }
            self.observe_backlog(now);
            return 0;
        }
        let old = std::mem::replace(&mut self.qdisc, qdisc);
        let discarded = old.len() as u64;
        self.stats.retired_drops += old.stats().drops + discarded;
        self.stats.retired_ce_marks += old.stats().ce_marks;
        self.map_queues();
        self.observe_backlog(now);
        discarded
    }
    /// Tells the spike tracker the backlog from `now` on; called after every event that can
    /// change it (an arrival, a dequeue with the drops the discipline makes then, a replacement).
    pub fn observe_backlog(&mut self, now: Time) {
        if let Some(s) = &mut self.stats.spikes {
            s.observe(now, self.qdisc.backlog_bytes());
        }
    }
    fn receive(&mut self, mut pkt: Packet, ctx: &mut ElementCtx) {
        pkt.enqueued_at = ctx.now;
        if self.qdisc.enqueue(pkt, ctx.now) == Enqueued::Queued {
            self.start_next(ctx);
        }
        self.observe_backlog(ctx.now);
    }
    fn start_next(&mut self, ctx: &mut ElementCtx) {
        // The link asks for a packet only when the discipline holds one, as an HTB class
        // does for its leaf qdisc (the studies' "htb" placement): an empty discipline is
        // never dequeued, so it sees no idle-time dequeue (RED does not start an idle period,
        // DualPI2 keeps its WRR credit, fq_codel keeps a drained flow listed). Disciplines
        // modelled on ns-2 (HRED) ask for idle dequeues, as ns-2's link makes them.
        if self.in_tx.is_some() || (self.qdisc.is_empty() && !self.qdisc.dequeues_when_empty()) {
            return;
        }
        let Some(pkt) = self.qdisc.dequeue(ctx.now) else {
            if let Some(t) = self.qdisc.ready_at().filter(|_| !self.qdisc.is_empty()) {
                let t = t.max(ctx.now);
                if self.retry_at.map_or(true, |r| r <= ctx.now || r > t) {
                    self.retry_at = Some(t);
                    ctx.wake_at(t);
                }
            }
            return;
        };
        let q = self.queue_slots[(pkt.queue as usize).min(self.queue_slots.len() - 1)];
        self.stats.queues[q].record(ctx.now - pkt.enqueued_at);
        let tx = self.rate.serialisation(pkt.wire_len);
        self.stats.busy += tx;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += pkt.wire_len as u64;
        self.in_tx = Some(pkt);
        self.tx_end = ctx.now + tx;
        ctx.wake_at(self.tx_end);
    }
    fn wake(&mut self, ctx: &mut ElementCtx) {
        if let Some(pkt) = self.in_tx {
            if ctx.now < self.tx_end {
                return; // A shaper retry that came while a packet is on the wire.
            }
            self.in_tx = None;
            ctx.out.push(pkt);
        }
        self.start_next(ctx);
        self.observe_backlog(ctx.now);
    }
}

/// The element kinds, dispatched by `match` (no virtual call on the packet path).
pub enum Element {
    Delay(DelayLine),
    Link(Link),
    /// Rewrites the ECN field of every packet passing (the studies' iptables `bleach_ecn`
    /// and `dscp_to_ect1` helpers on the middlebox, ahead of the AQM); no delay.
    EcnRewrite(Ecn),
    /// A tunnel entry or exit (encapsulation, decapsulation, anti-replay); no delay.
    Tunnel(TunnelElement),
    /// Linux netem: delay with jitter (reordering), random loss, limit, slotted release.
    Netem(Box<Netem>),
}

impl Element {
    pub fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        match self {
            Element::Delay(d) => d.receive(pkt, ctx),
            Element::Link(l) => l.receive(pkt, ctx),
            Element::EcnRewrite(to) => {
                let mut pkt = pkt;
                pkt.ecn = *to;
                ctx.out.push(pkt);
            }
            Element::Tunnel(t) => t.receive(pkt, ctx),
            Element::Netem(n) => n.receive(pkt, ctx),
        }
    }
    pub fn wake(&mut self, ctx: &mut ElementCtx) {
        match self {
            Element::Delay(d) => d.wake(ctx),
            Element::Link(l) => l.wake(ctx),
            Element::EcnRewrite(_) | Element::Tunnel(_) => {}
            Element::Netem(n) => n.wake(ctx),
        }
    }
    /// Packets currently inside the element (for the conservation check).
    pub fn held(&self) -> usize {
        match self {
            Element::Delay(d) => d.line.len(),
            Element::Link(l) => l.held(),
            Element::EcnRewrite(_) | Element::Tunnel(_) => 0,
            Element::Netem(n) => n.held(),
        }
    }
    /// Packets this element has dropped.
    pub fn drops(&self) -> u64 {
        match self {
            Element::Delay(_) | Element::EcnRewrite(_) => 0,
            Element::Link(l) => l.drops(),
            Element::Tunnel(t) => t.drops(),
            Element::Netem(n) => n.drops(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Kind};
    use crate::qdisc::Fifo;

    fn drain(e: &mut Element, q: &mut EventQueue) -> Vec<(Time, u32)> {
        let mut got = vec![];
        while let Some((t, ev)) = q.pop() {
            assert_eq!(ev, Event::Element(0));
            let mut out = vec![];
            e.wake(&mut ElementCtx { id: 0, now: t, events: q, out: &mut out });
            got.extend(out.iter().map(|p| (t, p.tcp.seq)));
        }
        got
    }

    #[test]
    fn link_serialises_back_to_back_at_its_rate() {
        let mut q = EventQueue::default();
        let mut link = Element::Link(Link::new(Rate(12_000_000), Box::new(Fifo::pfifo(10))));
        let mut out = vec![];
        for seq in 0..3 {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1500);
            p.tcp.seq = seq;
            link.receive(p, &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        let got = drain(&mut link, &mut q);
        let ms = Time::from_millis;
        assert_eq!(got, vec![(ms(1), 0), (ms(2), 1), (ms(3), 2)]);
        if let Element::Link(l) = &link {
            assert_eq!(l.stats.busy, ms(3));
            // Sojourns 0, 1 ms, 2 ms.
            assert_eq!(l.stats.queues[0].sojourn.max(), Some(ms(2).as_nanos()));
        }
    }

    #[test]
    fn link_reports_its_backlog_to_the_spike_tracker() {
        let ms = Time::from_millis;
        let mut q = EventQueue::default();
        let mut l = Link::new(Rate(12_000_000), Box::new(Fifo::pfifo(10)));
        // 1 ms at 12 Mbit/s = 1500 bytes; 2 ms = 3000 bytes.
        l.stats.spikes = Some(SpikeTracker::new(&[ms(1), ms(2)], Rate(12_000_000), Time::ZERO));
        let mut link = Element::Link(l);
        let mut out = vec![];
        for _ in 0..3 {
            link.receive(Packet::new(0, Direction::Forward, Kind::Data, 1500), &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        // Queued behind the one on the wire: 3000 bytes until 1 ms, 1500 until 2 ms.
        drain(&mut link, &mut q);
        let Element::Link(l) = &link else { unreachable!() };
        let r = l.stats.spikes.as_ref().unwrap().summary(ms(10));
        assert_eq!((r[0].longest_s, r[0].total_s, r[0].peak_ms), (0.001, 0.001, 2.0));
        assert_eq!(r[1].longest_s, 0.0, "3000 bytes is not above 2 ms worth");
    }

    #[test]
    fn delay_line_keeps_order_and_delay() {
        let mut q = EventQueue::default();
        let mut d = Element::Delay(DelayLine::new(Time::from_millis(10)));
        let mut out = vec![];
        for (t, seq) in [(0, 0), (1, 1), (1, 2), (5, 3)] {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 100);
            p.tcp.seq = seq;
            d.receive(p, &mut ElementCtx { id: 0, now: Time::from_millis(t), events: &mut q, out: &mut out });
        }
        let got = drain(&mut d, &mut q);
        let ms = Time::from_millis;
        assert_eq!(got, vec![(ms(10), 0), (ms(11), 1), (ms(11), 2), (ms(15), 3)]);
    }
}
