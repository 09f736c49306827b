//! An isochronous latency probe: the client sends a small request every `interval`; the
//! server echoes it at once; the client records the round-trip time. Two tools are modelled
//! by the same code, differing in defaults and in what they measure:
//! - irtt (`irtt client -i 10ms`, used by the l4s-tests Skype runs, algorithms.md 5.6): UDP,
//!   also the one-way delay of each direction (exact here, as the simulator has one clock);
//! - ping, as flent runs it (`fping -p <step>` or `ping -i <step>`, flent's `PingRunner`):
//!   ICMP echo, round trip only.
//!
//! Requests and replies carry a chosen ECN codepoint and DSCP, so a probe can ride in a
//! DualPI2 L queue (ECT(1)) or be a sparse flow in fq_codel.

use crate::event::{FlowTimer, Timer};
use crate::metrics::{DelayStats, SeriesId, SeriesRecorder, SojournSummary};
use crate::packet::{Direction, Ecn, Kind, Packet};
use crate::tcp::EndpointCtx;
use crate::time::Time;
use serde::Serialize;

/// Probe settings.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    pub interval: Time,
    /// Bytes on the wire of each request and reply (Ethernet + IP + UDP/ICMP + payload).
    pub wire_len: u32,
    /// Whether the one-way delays are measured (irtt) or only the round trip (ping).
    pub one_way: bool,
    pub ecn: Ecn,
    pub dscp: u8,
    pub stop: Option<Time>,
}

#[derive(Debug, Default)]
pub struct ProbeStats {
    pub sent: u64,
    pub received: u64,
    pub rtt: DelayStats,
    /// Client to server.
    pub owd_up: DelayStats,
    /// Server to client.
    pub owd_down: DelayStats,
}

/// Both ends of a probe session.
#[derive(Debug)]
pub struct Probe {
    id: u32,
    cfg: ProbeConfig,
    seq: u32,
    timer: Timer,
    pub stats: ProbeStats,
}

impl Probe {
    pub fn new(id: u32, cfg: ProbeConfig) -> Self {
        Probe { id, cfg, seq: 0, timer: Timer::default(), stats: ProbeStats::default() }
    }

    fn packet(&self, dir: Direction, kind: Kind, now: Time) -> Packet {
        let mut p = Packet::new(self.id, dir, kind, self.cfg.wire_len);
        p.ecn = self.cfg.ecn;
        p.dscp = self.cfg.dscp;
        p.set_sent_at(now);
        p
    }

    /// Starts the session: the first request goes now.
    pub fn start(&mut self, ctx: &mut EndpointCtx) {
        self.send(ctx);
    }

    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if t == FlowTimer::ProbeSend && self.timer.fire(ctx.now, ctx.event(t), ctx.events) {
            self.send(ctx);
        }
    }

    fn send(&mut self, ctx: &mut EndpointCtx) {
        if self.cfg.stop.is_some_and(|s| ctx.now >= s) {
            return;
        }
        let mut req = self.packet(Direction::Forward, Kind::ProbeRequest, ctx.now);
        req.tcp.seq = self.seq;
        req.set_origin(ctx.now);
        self.seq += 1;
        self.stats.sent += 1;
        ctx.out.push(req);
        self.timer.arm(ctx.now + self.cfg.interval, ctx.event(FlowTimer::ProbeSend), ctx.events);
    }

    /// A request reached the server (forward direction) or a reply the client.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match pkt.kind {
            Kind::ProbeRequest => {
                let mut reply = self.packet(Direction::Reverse, Kind::ProbeReply, ctx.now);
                reply.tcp.seq = pkt.tcp.seq;
                reply.set_origin(pkt.origin());
                ctx.out.push(reply);
            }
            Kind::ProbeReply => {
                self.stats.received += 1;
                self.stats.rtt.record(ctx.now - pkt.origin());
                if self.cfg.one_way {
                    self.stats.owd_up.record(pkt.sent_at() - pkt.origin());
                    self.stats.owd_down.record(ctx.now - pkt.sent_at());
                }
            }
            _ => {}
        }
    }
}

/// A latency probe as an endpoint of the run: the probe and its series.
pub struct ProbeFlow {
    pub name: String,
    /// `irtt` or `ping`.
    pub kind: &'static str,
    /// Propagation delay of the probe's path (its `rtt` plus the shared links' delays).
    pub rtt_base: Time,
    pub start: Time,
    pub probe: Probe,
    pub rtt: SeriesId,
    /// One-way delays (up, down), for the kinds that measure them.
    pub owd: Option<(SeriesId, SeriesId)>,
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

impl ProbeFlow {
    /// Registers the series of a probe called `name` (the one-way delays if `one_way`).
    pub fn new(name: String, kind: &'static str, rtt_base: Time, start: Time, probe: Probe, recorder: &mut SeriesRecorder) -> Self {
        let one_way = probe.cfg.one_way;
        ProbeFlow {
            rtt: recorder.register(&name, "rtt", "ms"),
            owd: one_way.then(|| (recorder.register(&name, "owd_up", "ms"), recorder.register(&name, "owd_down", "ms"))),
            name,
            kind,
            rtt_base,
            start,
            probe,
        }
    }

    pub fn on_timer(&mut self, timer: FlowTimer, ctx: &mut EndpointCtx) {
        match timer {
            FlowTimer::Start => self.probe.start(ctx),
            _ => self.probe.on_timer(timer, ctx),
        }
    }

    pub fn sample(&mut self, recorder: &mut SeriesRecorder) {
        let st = &mut self.probe.stats;
        recorder.set(self.rtt, st.rtt.take_tick_mean_ms());
        if let Some((up, down)) = self.owd {
            recorder.set(up, st.owd_up.take_tick_mean_ms());
            recorder.set(down, st.owd_down.take_tick_mean_ms());
        }
    }

    pub fn summary(&self) -> ProbeSummary {
        let st = &self.probe.stats;
        let one_way = self.owd.is_some();
        let rtt = SojournSummary::of(&st.rtt.all);
        ProbeSummary {
            name: self.name.clone(),
            kind: self.kind,
            rtt_base_ms: self.rtt_base.as_millis_f64(),
            sent: st.sent,
            received: st.received,
            induced_ms: rtt.minus(self.rtt_base.as_millis_f64()),
            rtt_ms: rtt,
            owd_up_ms: one_way.then(|| SojournSummary::of(&st.owd_up.all)),
            owd_down_ms: one_way.then(|| SojournSummary::of(&st.owd_down.all)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventQueue};

    #[test]
    fn sends_every_interval_until_stop_and_measures_each_direction() {
        let cfg = ProbeConfig { interval: Time::from_millis(10), wire_len: 100, one_way: true, ecn: Ecn::Ect1, dscp: 4, stop: Some(Time::from_millis(35)) };
        let mut p = Probe::new(3, cfg);
        let mut q = EventQueue::default();
        let mut out = vec![];
        p.start(&mut EndpointCtx { flow: 3, now: Time::ZERO, events: &mut q, out: &mut out });
        while let Some((t, ev)) = q.pop() {
            let Event::Flow(_, timer) = ev else { panic!() };
            p.on_timer(timer, &mut EndpointCtx { flow: 3, now: t, events: &mut q, out: &mut out });
        }
        let sent: Vec<(u32, Time)> = out.iter().map(|r| (r.tcp.seq, r.sent_at())).collect();
        let ms = Time::from_millis;
        assert_eq!(sent, vec![(0, ms(0)), (1, ms(10)), (2, ms(20)), (3, ms(30))]);
        assert!(out.iter().all(|r| r.ecn == Ecn::Ect1 && r.dscp == 4 && r.dir == Direction::Forward));
        // Request 1 arrives after 7 ms; the reply after 5 more.
        let mut replies = vec![];
        p.on_packet(&out[1], &mut EndpointCtx { flow: 3, now: ms(17), events: &mut q, out: &mut replies });
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].dir, Direction::Reverse);
        p.on_packet(&replies[0], &mut EndpointCtx { flow: 3, now: ms(22), events: &mut q, out: &mut vec![] });
        assert_eq!(p.stats.rtt.all.max(), Some(ms(12).as_nanos()));
        assert_eq!(p.stats.owd_up.all.max(), Some(ms(7).as_nanos()));
        assert_eq!(p.stats.owd_down.all.max(), Some(ms(5).as_nanos()));
        assert_eq!((p.stats.sent, p.stats.received), (4, 1));
    }
}
