//! Path elements: what a packet passes through between its sender and its receiver.
//!
//! A flow's route is a list of element indices per direction; the engine hands a packet to
//! each element in turn. Elements hold their packets themselves and ask the event queue to
//! wake them when something is due (usually one pending event per element).

use super::netem::Netem;
use super::tunnel::TunnelElement;
use super::{DelayLine, Link};
use crate::event::EventQueue;
use crate::packet::{Ecn, Packet};
use crate::time::Time;

/// What an element needs from the engine while it handles a packet or a wake-up.
pub struct ElementCtx<'a> {
    pub id: u32,
    pub now: Time,
    pub events: &'a mut EventQueue,
    /// Packets leaving the element, forwarded by the engine to their next hop.
    pub out: &'a mut Vec<Packet>,
}

impl ElementCtx<'_> {
    /// Inlined into its few callers (a link's next serialisation or retry, a delay line's
    /// next exit): as a call, its register saves and restores were about 12 of its 67
    /// instructions per wake-up on (a).
    #[inline(always)]
    pub(crate) fn wake_at(&mut self, t: Time) {
        self.events.wake_element(t, self.id);
    }
}

/// The element kinds, dispatched by `match` (no virtual call on the packet path).
///
/// `repr(u8)`: the kind is a byte of its own, read and jumped on in two instructions at every
/// hop and wake-up; without it the kind hid in a niche of the delay line's ring and took six
/// to decode. The element stays 64 bytes (`tests::elements_are_small`).
#[repr(u8)]
pub enum Element {
    Delay(DelayLine),
    /// Boxed: a link is large (its packet on the wire, its statistics) and there are few,
    /// while per-flow elements (netem, ECN rewriting, a workload's delay lines) can be many;
    /// unboxed, every element took a link's size.
    Link(Box<Link>),
    /// Rewrites the ECN field of every packet passing (the studies' iptables `bleach_ecn`
    /// and `dscp_to_ect1` helpers on the middlebox, ahead of the AQM); no delay.
    EcnRewrite(Ecn),
    /// A tunnel entry or exit (encapsulation, decapsulation, anti-replay); no delay.
    Tunnel(TunnelElement),
    /// Linux netem: delay with jitter (reordering), random loss, limit, slotted release.
    Netem(Box<Netem>),
}

impl Element {
    /// Inlined into the engine's loop, so a packet goes to the element's own `receive`
    /// (and a wake-up to its `wake`) in one call instead of two (per hop of every packet).
    /// The packet is borrowed where the engine holds it; each element copies it once, into
    /// its own queue or the outbox.
    ///
    /// Links, then delay lines, are tested first, each by a compare and a conditional
    /// branch; the other kinds go through [`Element::receive_other`]'s `match`, out of
    /// line. A `match` over all five kinds was a jump table: one indirect jump at every hop
    /// whose target alternates between link and delay line along a route, which a
    /// predictor keyed by the branch's address alone (cachegrind's; a CPU's without enough
    /// history) misses almost every time, where a conditional branch's history predicts
    /// the alternation (issue #15, session 10).
    #[inline]
    pub fn receive(&mut self, pkt: &Packet, ctx: &mut ElementCtx) {
        if let Element::Link(l) = self {
            l.receive(*pkt, ctx)
        } else if let Element::Delay(d) = self {
            d.receive(*pkt, ctx)
        } else {
            self.receive_other(pkt, ctx)
        }
    }
    /// [`Element::receive`] for the kinds other than links and delay lines.
    #[inline(never)]
    fn receive_other(&mut self, pkt: &Packet, ctx: &mut ElementCtx) {
        match self {
            Element::Delay(_) | Element::Link(_) => unreachable!("links and delay lines are tested first"),
            Element::EcnRewrite(to) => {
                let mut pkt = *pkt;
                pkt.ecn = *to;
                ctx.out.push(pkt);
            }
            Element::Tunnel(t) => t.receive(*pkt, ctx),
            Element::Netem(n) => n.receive(*pkt, ctx),
        }
    }
    /// As [`Element::receive`]: links and delay lines tested first, the rest out of line.
    #[inline]
    pub fn wake(&mut self, ctx: &mut ElementCtx) {
        if let Element::Link(l) = self {
            l.wake(ctx)
        } else if let Element::Delay(d) = self {
            d.wake(ctx)
        } else {
            self.wake_other(ctx)
        }
    }
    /// [`Element::wake`] for the kinds other than links and delay lines.
    #[inline(never)]
    fn wake_other(&mut self, ctx: &mut ElementCtx) {
        match self {
            Element::Delay(_) | Element::Link(_) => unreachable!("links and delay lines are tested first"),
            Element::EcnRewrite(_) | Element::Tunnel(_) => {}
            Element::Netem(n) => n.wake(ctx),
        }
    }
    /// Packets currently inside the element (for the conservation check).
    pub fn held(&self) -> usize {
        match self {
            Element::Delay(d) => d.held(),
            Element::Link(l) => l.held(),
            Element::EcnRewrite(_) | Element::Tunnel(_) => 0,
            Element::Netem(n) => n.held(),
        }
    }
    /// Calls `f` for each packet [`Element::held`] counts (the per-flow conservation check).
    pub fn for_each_held(&self, f: &mut dyn FnMut(&Packet)) {
        match self {
            Element::Delay(d) => d.for_each_held(f),
            Element::Link(l) => l.for_each_held(f),
            Element::EcnRewrite(_) | Element::Tunnel(_) => {}
            Element::Netem(n) => n.for_each_held(f),
        }
    }
    /// [`Element::drops`] by flow, added to `into`.
    pub fn add_flow_drops(&self, into: &mut crate::qdisc::FlowCounts) {
        match self {
            Element::Delay(_) | Element::EcnRewrite(_) => {}
            Element::Link(l) => l.add_flow_drops(into),
            Element::Tunnel(t) => {
                if let Some(d) = t.flow_drops() {
                    into.add_all(d);
                }
            }
            Element::Netem(n) => into.add_all(&n.stats.flow_drops),
        }
    }
    /// Hands [`Element::add_flow_drops`]'s counts to `f(flow, count)` and forgets them, so
    /// that what the element holds by flow does not grow with the workloads' transfer ids;
    /// the flows from `apart_from` on (the transfers) are then counted apart
    /// (`FlowCounts::drain`, `Simulation::collect_flow_drops`).
    pub fn drain_flow_drops(&mut self, apart_from: u32, f: &mut dyn FnMut(u32, u64)) {
        match self {
            Element::Delay(_) | Element::EcnRewrite(_) => {}
            Element::Link(l) => l.drain_flow_drops(apart_from, f),
            Element::Tunnel(t) => {
                if let Some(d) = t.flow_drops_mut() {
                    d.drain(apart_from, f);
                }
            }
            Element::Netem(n) => n.stats.flow_drops.drain(apart_from, f),
        }
    }
    /// The link this element is; panics for another kind (shared links are links).
    pub fn as_link(&self) -> &Link {
        match self {
            Element::Link(l) => &**l,
            _ => unreachable!("shared links are links"),
        }
    }
    pub fn as_link_mut(&mut self) -> &mut Link {
        match self {
            Element::Link(l) => &mut **l,
            _ => unreachable!("shared links are links"),
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
    use crate::event::Event;
    use crate::metrics::SpikeTracker;
    use crate::time::Rate;
    use crate::packet::{Direction, Kind};
    use crate::qdisc::{Fifo, Qdisc};

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

    /// A broken discipline that CE-marks every packet, Not-ECT included (as a bug writing
    /// `ecn = Ce` directly would): the link's dequeue check names the invariant.
    struct MarksEverything(Fifo);
    impl Qdisc for MarksEverything {
        fn kind(&self) -> &'static str {
            "marks-everything"
        }
        fn enqueue(&mut self, pkt: Packet, now: Time) -> crate::qdisc::Enqueued {
            self.0.enqueue(pkt, now)
        }
        fn dequeue(&mut self, now: Time) -> Option<Packet> {
            let mut p = self.0.dequeue(now)?;
            p.ecn = Ecn::Ce;
            Some(p)
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn backlog_bytes(&self) -> u64 {
            self.0.backlog_bytes()
        }
        fn stats(&self) -> &crate::qdisc::QdiscStats {
            self.0.stats()
        }
        fn stats_mut(&mut self) -> &mut crate::qdisc::QdiscStats {
            self.0.stats_mut()
        }
        fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
            self.0.for_each_packet(f)
        }
    }

    #[test]
    fn link_rejects_a_qdisc_that_marks_not_ect() {
        let send = |ecn: Ecn| {
            let mut q = EventQueue::default();
            let mut link = Element::Link(Box::new(Link::new(Rate(12_000_000), Box::new(MarksEverything(Fifo::pfifo(10))))));
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1500);
            p.ecn = ecn;
            let mut out = vec![];
            link.receive(&p, &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        };
        send(Ecn::Ect0);
        send(Ecn::Ect1);
        let err = std::panic::catch_unwind(move || send(Ecn::NotEct)).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert_eq!(msg, "invariant violated: ECN transition: marks-everything turned NotEct into Ce");
    }

    /// A broken discipline that accepts packets and loses some: it reports them neither
    /// queued, sent nor dropped; and one whose byte counter went below zero.
    struct Leaky {
        inner: Fifo,
        lose_every: u64,
        seen: u64,
        wrapped_bytes: bool,
    }
    impl Qdisc for Leaky {
        fn kind(&self) -> &'static str {
            "leaky"
        }
        fn enqueue(&mut self, pkt: Packet, now: Time) -> crate::qdisc::Enqueued {
            self.seen += 1;
            if self.seen % self.lose_every == 0 {
                return crate::qdisc::Enqueued::Dropped; // but not counted in stats().drops
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
            if self.wrapped_bytes {
                self.inner.backlog_bytes().wrapping_sub(10_000)
            } else {
                self.inner.backlog_bytes()
            }
        }
        fn stats(&self) -> &crate::qdisc::QdiscStats {
            self.inner.stats()
        }
        fn stats_mut(&mut self) -> &mut crate::qdisc::QdiscStats {
            self.inner.stats_mut()
        }
        fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
            self.inner.for_each_packet(f)
        }
    }

    #[test]
    fn link_checks_queue_conservation_and_backlog() {
        let run = |lose_every: u64, wrapped_bytes: bool| {
            let mut q = EventQueue::default();
            let leaky = Leaky { inner: Fifo::pfifo(3), lose_every, seen: 0, wrapped_bytes };
            let mut link = Link::new(Rate(12_000_000), Box::new(leaky));
            let mut out = vec![];
            for seq in 0..6 {
                let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1500);
                p.tcp.seq = seq;
                link.receive(p, &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
            }
            link
        };
        // pfifo(3) refuses (and counts) 2 of 6, one is on the wire, 3 queued: conserved.
        let ok = run(u64::MAX, false);
        assert_eq!((ok.stats.arrivals, ok.stats.tx_packets, ok.drops(), ok.qdisc().len()), (6, 1, 2, 3));
        ok.check_invariants();
        let lossy = run(2, false);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lossy.check_invariants())).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert_eq!(msg, "invariant violated: queue conservation: leaky: 6 packets arrived but 1 were sent, 0 dropped and 2 are queued");
        let wrapped = run(u64::MAX, true);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wrapped.check_invariants())).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(msg.starts_with("invariant violated: queue backlog: leaky: 3 packets queued hold 18446744073709"), "{msg}");
    }

    /// A broken one-packet pfifo that counts its drops but charges them to the wrong flow
    /// (flow 7, which sent nothing): the totals, and so packet and queue conservation, hold.
    struct Misattributes {
        q: std::collections::VecDeque<Packet>,
        stats: crate::qdisc::QdiscStats,
    }
    impl Qdisc for Misattributes {
        fn kind(&self) -> &'static str {
            "misattributes"
        }
        fn enqueue(&mut self, pkt: Packet, _now: Time) -> crate::qdisc::Enqueued {
            if !self.q.is_empty() {
                self.stats.drop(&Packet { flow: 7, ..pkt });
                return crate::qdisc::Enqueued::Dropped;
            }
            self.stats.enqueued += 1;
            self.q.push_back(pkt);
            crate::qdisc::Enqueued::Queued
        }
        fn dequeue(&mut self, _now: Time) -> Option<Packet> {
            let p = self.q.pop_front()?;
            self.stats.sent(&p);
            Some(p)
        }
        fn len(&self) -> usize {
            self.q.len()
        }
        fn backlog_bytes(&self) -> u64 {
            self.q.iter().map(|p| p.wire_len as u64).sum()
        }
        fn stats(&self) -> &crate::qdisc::QdiscStats {
            &self.stats
        }
        fn stats_mut(&mut self) -> &mut crate::qdisc::QdiscStats {
            &mut self.stats
        }
        fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
            self.q.iter().for_each(f)
        }
    }

    /// Per-flow conservation (`sim::check_flow_conservation`): two flows through a link whose
    /// discipline drops; a correct pfifo passes; one that charges its drops to another flow
    /// passes the link's own checks but not the per-flow one, which names the flow.
    #[test]
    fn flow_conservation_catches_drops_charged_to_the_wrong_flow() {
        use crate::qdisc::FlowCounts;
        let run = |qdisc: Box<dyn Qdisc>| {
            let mut q = EventQueue::default();
            let mut link = Element::Link(Box::new(Link::new(Rate(12_000_000), qdisc)));
            let (mut out, mut sent) = (vec![], FlowCounts::default());
            for (seq, flow) in [0, 0, 1, 0, 1].into_iter().enumerate() {
                let mut p = Packet::new(flow, Direction::Forward, Kind::Data, 1500);
                p.tcp.seq = seq as u32;
                sent.add(flow);
                link.receive(&p, &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
            }
            // The first packet is on the wire, the second queued, the other three dropped.
            assert_eq!((link.held(), link.drops()), (2, 3));
            link.as_link().check_invariants();
            let elements = [link];
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::sim::check_flow_conservation(&sent, &FlowCounts::default(), FlowCounts::default(), &elements, |_| "test")
            }))
        };
        assert!(run(Box::new(Fifo::pfifo(1))).is_ok());
        let err = run(Box::new(Misattributes { q: Default::default(), stats: Default::default() })).unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().unwrap(),
            "invariant violated: flow conservation: flow 0 (test) sent 3, delivered 0, dropped 0, in flight 2"
        );
    }

    #[test]
    fn backlog_decrements_below_zero_are_reported() {
        let mut c: u64 = 1000;
        crate::qdisc::dec_backlog!(c, 1000, "test backlog");
        assert_eq!(c, 0);
        let err = std::panic::catch_unwind(move || {
            let mut c = c;
            crate::qdisc::dec_backlog!(c, 1, "test backlog");
            c
        })
        .unwrap_err();
        assert_eq!(err.downcast_ref::<String>().unwrap(), "invariant violated: queue backlog: test backlog would go below zero");
    }

    #[test]
    fn link_serialises_back_to_back_at_its_rate() {
        let mut q = EventQueue::default();
        let mut link = Element::Link(Box::new(Link::new(Rate(12_000_000), Box::new(Fifo::pfifo(10)))));
        let mut out = vec![];
        for seq in 0..3 {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1500);
            p.tcp.seq = seq;
            link.receive(&p, &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        let got = drain(&mut link, &mut q);
        let ms = Time::from_millis;
        assert_eq!(got, vec![(ms(1), 0), (ms(2), 1), (ms(3), 2)]);
        if let Element::Link(l) = &link {
            assert_eq!(l.stats.busy, ms(3));
            // Sojourns 0, 1 ms, 2 ms.
            assert_eq!(l.stats.queues[0].sojourn().max(), Some(ms(2).as_nanos()));
        }
    }

    /// HTB with tc's default burst (1600 B) on an ifb at 100 Mbit/s, by hand: the bucket holds
    /// 1600·8/100e6 = 128 µs; a 1414-byte packet costs 113.12 µs. Three arriving at once on an
    /// idle link: the first leaves at 0 (tokens 14.88 µs), the second too (tokens ≥ 0 before
    /// the charge; −98.24 µs after), the third when the tokens are back at 0, 98.24 µs. A
    /// fourth at 1 ms finds the bucket refilled (capped at 128 µs) and leaves at once. A
    /// serialiser would have delivered them at 113.12, 226.24, 339.36 µs and 1.11312 ms.
    #[test]
    fn htb_link_dequeues_while_its_tokens_last_and_passes_packets_on_at_once() {
        let mut q = EventQueue::default();
        let mut l = Link::new(Rate(100_000_000), Box::new(Fifo::pfifo(10)));
        l.set_htb_burst(1600);
        let mut link = Element::Link(Box::new(l));
        let mut got = vec![];
        let send = |link: &mut Element, q: &mut EventQueue, seq: u32, at: Time, got: &mut Vec<(Time, u32)>| {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1414);
            p.tcp.seq = seq;
            let mut out = vec![];
            link.receive(&p, &mut ElementCtx { id: 0, now: at, events: q, out: &mut out });
            got.extend(out.iter().map(|p| (at, p.tcp.seq)));
        };
        for seq in 0..3 {
            send(&mut link, &mut q, seq, Time::ZERO, &mut got);
        }
        assert_eq!(got, vec![(Time::ZERO, 0), (Time::ZERO, 1)]);
        got.extend(drain(&mut link, &mut q));
        assert_eq!(got[2], (Time(98_240), 2));
        send(&mut link, &mut q, 3, Time::from_millis(1), &mut got);
        assert_eq!(got[3], (Time::from_millis(1), 3));
        let Element::Link(l) = &link else { unreachable!() };
        assert_eq!(l.stats.queues[0].sojourn().max(), Some(98_240));
        // Without the burst the same link serialises.
        let mut s = Element::Link(Box::new(Link::new(Rate(100_000_000), Box::new(Fifo::pfifo(10)))));
        let mut out = vec![];
        for _ in 0..3 {
            s.receive(&Packet::new(0, Direction::Forward, Kind::Data, 1414), &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        assert!(out.is_empty());
        assert_eq!(drain(&mut s, &mut q).iter().map(|g| g.0).collect::<Vec<_>>(), vec![Time(113_120), Time(226_240), Time(339_360)]);
    }

    #[test]
    fn busy_time_counts_only_the_part_of_a_packet_sent_by_the_end() {
        // 1500 B at 12 Mbit/s: 1 ms on the wire. The run ends 0.25 ms into the second packet.
        let (ms, us) = (Time::from_millis, Time::from_micros);
        let mut q = EventQueue::default();
        let mut l = Link::new(Rate(12_000_000), Box::new(Fifo::pfifo(10)));
        let mut out = vec![];
        for _ in 0..2 {
            l.receive(Packet::new(0, Direction::Forward, Kind::Data, 1500), &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        l.wake(&mut ElementCtx { id: 0, now: ms(1), events: &mut q, out: &mut out });
        assert_eq!(l.stats.busy, ms(2), "the second packet's whole time is booked when it starts");
        assert_eq!(l.busy_until(us(1250)), us(1250));
        assert_eq!(l.busy_until(ms(2)), ms(2));
        assert_eq!(l.busy_until(ms(5)), ms(2));
    }

    #[test]
    fn link_reports_its_backlog_to_the_spike_tracker() {
        let ms = Time::from_millis;
        let mut q = EventQueue::default();
        let mut l = Link::new(Rate(12_000_000), Box::new(Fifo::pfifo(10)));
        // 1 ms at 12 Mbit/s = 1500 bytes; 2 ms = 3000 bytes.
        l.stats.spikes = Some(SpikeTracker::new(&[ms(1), ms(2)], Rate(12_000_000), Time::ZERO));
        let mut link = Element::Link(Box::new(l));
        let mut out = vec![];
        for _ in 0..3 {
            link.receive(&Packet::new(0, Direction::Forward, Kind::Data, 1500), &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        // Queued behind the one on the wire: 3000 bytes until 1 ms, 1500 until 2 ms.
        drain(&mut link, &mut q);
        let Element::Link(l) = &link else { unreachable!() };
        let r = l.stats.spikes.as_ref().unwrap().summary(ms(10));
        assert_eq!((r[0].longest_s, r[0].total_s, r[0].peak_ms), (0.001, 0.001, 2.0));
        assert_eq!(r[1].longest_s, 0.0, "3000 bytes is not above 2 ms worth");
    }

    #[test]
    fn elements_are_small() {
        // Per-flow elements (netem, ECN rewriting, tunnel ends, a workload's delay lines)
        // should pack densely in the element table.
        assert!(std::mem::size_of::<Element>() <= 64, "{}", std::mem::size_of::<Element>());
    }

    #[test]
    fn delay_line_keeps_order_and_delay() {
        let mut q = EventQueue::default();
        let mut d = Element::Delay(DelayLine::new(Time::from_millis(10)));
        let mut out = vec![];
        for (t, seq) in [(0, 0), (1, 1), (1, 2), (5, 3)] {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 100);
            p.tcp.seq = seq;
            d.receive(&p, &mut ElementCtx { id: 0, now: Time::from_millis(t), events: &mut q, out: &mut out });
        }
        let got = drain(&mut d, &mut q);
        let ms = Time::from_millis;
        assert_eq!(got, vec![(ms(10), 0), (ms(11), 1), (ms(11), 2), (ms(15), 3)]);
    }
}
