//! Unresponsive UDP traffic: a source that ignores congestion, and its receiver.
//!
//! - `video`: a frame every 1/`frame_rate` s of `rate / frame_rate` payload bytes (optionally
//!   varied per frame), cut into packets of `packet_size` payload bytes (the last carries the
//!   remainder). The packets of a frame leave back to back, as a videoconference sender hands
//!   a whole encoded frame to the socket at once (there is no access link in the model, so
//!   they reach the bottleneck together: a burst of one frame); with `paced` they are spread
//!   evenly over the frame interval instead.
//! - `cbr`: packets of `packet_size` payload bytes evenly spaced at `rate` (as `iperf3 -u`).
//!
//! `rate` counts UDP payload; each packet adds [`UDP_IP_ETH`] header bytes on the wire.
//! Send times and frame sizes are computed from the start time and the packet or frame index
//! (not by adding rounded intervals), so the long-run rate is exact.
//!
//! The receiver counts packets and payload bytes, the one-way delay of each packet, and
//! losses as RTP does (RFC 3550 A.3): expected = highest sequence number + 1, lost =
//! expected − received, so a late (reordered) packet is not a loss.

use crate::event::FlowTimer;
use crate::metrics::{DelayStats, SeriesId, SeriesRecorder, SojournSummary, Tick};
use crate::packet::{Direction, Ecn, Kind, Packet, UDP_IP_ETH};
use crate::rng::Stream;
use crate::tcp::EndpointCtx;
use crate::time::{Rate, Time};
use serde::Serialize;

/// What the source sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    Video {
        frame_rate: f64,
        paced: bool,
        /// Frame size variation as a fraction: nominal × (1 + (u − ½)·variation).
        variation: f64,
    },
    Cbr,
}

#[derive(Clone, Debug)]
pub struct UdpConfig {
    pub pattern: Pattern,
    /// Payload bit rate.
    pub rate: Rate,
    /// Payload bytes per packet.
    pub packet_size: u32,
    pub ecn: Ecn,
    pub dscp: u8,
    pub stop: Option<Time>,
}

/// Counters of both ends.
#[derive(Debug, Default)]
pub struct UdpStats {
    pub sent: u64,
    pub frames: u64,
    pub bytes_sent: u64,
    pub received: u64,
    pub bytes_received: u64,
    /// Highest sequence number received.
    pub highest: Option<u32>,
    /// One-way delay of every received packet.
    pub owd: DelayStats,
    /// Payload bytes received since the last sampling tick.
    pub tick_bytes: u64,
}

impl UdpStats {
    /// Packets missing below the highest received sequence number (RFC 3550 A.3).
    pub fn lost(&self) -> u64 {
        self.highest.map_or(0, |h| h as u64 + 1 - self.received)
    }
}

/// Both ends of one UDP flow.
#[derive(Debug)]
pub struct UdpSource {
    id: u32,
    cfg: UdpConfig,
    rng: Stream,
    start: Time,
    seq: u32,
    /// CBR: packets sent. Video: frames begun.
    index: u64,
    /// Video: the current frame's start, end (the next frame's start), payload bytes not yet
    /// sent, packets and packets sent.
    frame_start: Time,
    frame_end: Time,
    frame_bytes_left: u64,
    frame_packets: u64,
    frame_sent: u64,
    pub stats: UdpStats,
}

impl UdpSource {
    pub fn new(id: u32, cfg: UdpConfig, rng: Stream) -> Self {
        UdpSource {
            id,
            cfg,
            rng,
            start: Time::ZERO,
            seq: 0,
            index: 0,
            frame_start: Time::ZERO,
            frame_end: Time::ZERO,
            frame_bytes_left: 0,
            frame_packets: 0,
            frame_sent: 0,
            stats: UdpStats::default(),
        }
    }

    /// Starts sending now.
    pub fn start(&mut self, ctx: &mut EndpointCtx) {
        self.start = ctx.now;
        self.send_due(ctx);
    }

    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if t == FlowTimer::UdpSend {
            self.send_due(ctx);
        }
    }

    /// Sends what is due now and schedules the next transmission (one pending event).
    fn send_due(&mut self, ctx: &mut EndpointCtx) {
        if self.cfg.stop.is_some_and(|s| ctx.now >= s) {
            return;
        }
        let next = match self.cfg.pattern {
            Pattern::Cbr => {
                self.send(self.cfg.packet_size, ctx);
                self.index += 1;
                // Packet k leaves at start + k·size·8/rate.
                let bits = self.index as u128 * self.cfg.packet_size as u128 * 8;
                self.start + Time((bits * 1_000_000_000 / self.cfg.rate.0 as u128) as u64)
            }
            Pattern::Video { paced, .. } => {
                if self.frame_sent == self.frame_packets {
                    self.begin_frame(ctx.now);
                }
                let burst = if paced { 1 } else { self.frame_packets - self.frame_sent };
                for _ in 0..burst.min(self.frame_packets - self.frame_sent) {
                    let payload = self.frame_bytes_left.min(self.cfg.packet_size as u64) as u32;
                    self.frame_bytes_left -= payload as u64;
                    self.frame_sent += 1;
                    self.send(payload, ctx);
                }
                if self.frame_sent < self.frame_packets {
                    // Packet j of n at frame start + j/n of the frame interval.
                    let span = (self.frame_end - self.frame_start).0 as u128;
                    self.frame_start + Time((span * self.frame_sent as u128 / self.frame_packets as u128) as u64)
                } else {
                    self.frame_end
                }
            }
        };
        ctx.events.schedule(next, ctx.event(FlowTimer::UdpSend));
    }

    /// Frame k spans [start + k/fps, start + (k+1)/fps) and carries the payload bytes
    /// between k·rate/(8·fps) and (k+1)·rate/(8·fps), varied if asked.
    fn begin_frame(&mut self, now: Time) {
        let Pattern::Video { frame_rate, variation, .. } = self.cfg.pattern else { return };
        let k = self.index as f64;
        let at = |k: f64| self.start + Time::from_secs_f64(k / frame_rate);
        let bytes_by = |k: f64| (k * self.cfg.rate.0 as f64 / (8.0 * frame_rate)).floor();
        let mut bytes = bytes_by(k + 1.0) - bytes_by(k);
        if variation > 0.0 {
            bytes = (bytes * (1.0 + (self.rng.uniform() - 0.5) * variation)).round();
        }
        self.frame_start = now;
        self.frame_end = at(k + 1.0).max(now + Time(1));
        self.frame_bytes_left = bytes.max(0.0) as u64;
        self.frame_packets = self.frame_bytes_left.div_ceil(self.cfg.packet_size as u64);
        self.frame_sent = 0;
        self.index += 1;
        self.stats.frames += 1;
    }

    fn send(&mut self, payload: u32, ctx: &mut EndpointCtx) {
        let mut p = Packet::new(self.id, Direction::Forward, Kind::Udp, payload + UDP_IP_ETH);
        p.ecn = self.cfg.ecn;
        p.dscp = self.cfg.dscp;
        p.set_sent_at(ctx.now);
        p.tcp.seq = self.seq;
        p.tcp.payload = payload;
        self.seq += 1;
        self.stats.sent += 1;
        self.stats.bytes_sent += payload as u64;
        ctx.out.push(p);
    }

    /// A packet reached the receiver.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        if pkt.kind != Kind::Udp {
            return;
        }
        let st = &mut self.stats;
        st.received += 1;
        st.bytes_received += pkt.tcp.payload as u64;
        st.tick_bytes += pkt.tcp.payload as u64;
        st.highest = Some(st.highest.map_or(pkt.tcp.seq, |h| h.max(pkt.tcp.seq)));
        st.owd.record(ctx.now - pkt.sent_at());
    }
}

/// An unresponsive UDP flow as an endpoint of the run: the source and receiver and its
/// series.
pub struct UdpFlow {
    pub name: String,
    /// `video` or `cbr`.
    pub kind: &'static str,
    pub start: Time,
    pub stop: Option<Time>,
    pub app: UdpSource,
    /// Payload received per tick, Mbit/s.
    rate: SeriesId,
    /// Mean one-way delay per tick, ms.
    owd: SeriesId,
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

impl UdpFlow {
    /// Registers the series of a flow called `name`.
    pub fn new(name: String, kind: &'static str, start: Time, stop: Option<Time>, app: UdpSource, recorder: &mut SeriesRecorder) -> Self {
        UdpFlow { rate: recorder.register(&name, "rate", "Mbit/s"), owd: recorder.register(&name, "owd", "ms"), name, kind, start, stop, app }
    }

    pub fn on_timer(&mut self, timer: FlowTimer, ctx: &mut EndpointCtx) {
        match timer {
            FlowTimer::Start => self.app.start(ctx),
            _ => self.app.on_timer(timer, ctx),
        }
    }

    pub fn sample(&mut self, tick: &Tick, recorder: &mut SeriesRecorder) {
        let st = &mut self.app.stats;
        let rate = st.tick_bytes as f64 * 8.0 / tick.step_s / 1e6;
        st.tick_bytes = 0;
        recorder.set(self.rate, if tick.now > self.start { rate } else { f64::NAN });
        recorder.set(self.owd, st.owd.take_tick_mean_ms());
    }

    pub fn summary(&self, end: Time) -> UdpSummary {
        let span = (self.stop.map_or(end, |s| s.min(end)) - self.start).as_secs_f64();
        let st = &self.app.stats;
        UdpSummary {
            name: self.name.clone(),
            kind: self.kind.to_string(),
            sent: st.sent,
            received: st.received,
            lost: st.lost(),
            mean_mbps: if span > 0.0 { st.bytes_received as f64 * 8.0 / span / 1e6 } else { 0.0 },
            owd_ms: SojournSummary::of(&st.owd.all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventQueue};

    /// Runs a source alone until `until`, returning its packets.
    fn emit(pattern: Pattern, rate: u64, until: Time) -> (UdpSource, Vec<Packet>) {
        let cfg = UdpConfig { pattern, rate: Rate(rate), packet_size: 1200, ecn: Ecn::Ect1, dscp: 0, stop: Some(until) };
        let mut s = UdpSource::new(0, cfg, Stream::new(1, "udp/test"));
        let mut q = EventQueue::default();
        let mut out = vec![];
        s.start(&mut EndpointCtx { flow: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        while let Some((t, ev)) = q.pop() {
            let Event::Flow(_, timer) = ev else { panic!() };
            s.on_timer(timer, &mut EndpointCtx { flow: 0, now: t, events: &mut q, out: &mut out });
        }
        (s, out)
    }

    fn video(paced: bool, variation: f64) -> Pattern {
        Pattern::Video { frame_rate: 30.0, paced, variation }
    }

    #[test]
    fn video_frames_are_bursts_of_full_packets_and_a_remainder() {
        // 2.5 Mbit/s at 30 fps: 10416.67 bytes a frame = 8 x 1200 + 816 or 817.
        let (s, out) = emit(video(false, 0.0), 2_500_000, Time::from_secs(1));
        assert_eq!(s.stats.frames, 30);
        assert_eq!(out.len(), 30 * 9);
        assert_eq!(s.stats.bytes_sent, 2_500_000 / 8, "one second carries the rate exactly");
        for (k, frame) in out.chunks(9).enumerate() {
            let at = Time((k as u64 * 1_000_000_000 + 15) / 30);
            assert!(frame.iter().all(|p| p.sent_at() == at), "frame {k} is one burst at {at}");
            assert!(frame[..8].iter().all(|p| p.tcp.payload == 1200 && p.wire_len == 1242));
            assert!((816..=817).contains(&frame[8].tcp.payload));
        }
        assert!(out.iter().enumerate().all(|(i, p)| p.tcp.seq == i as u32 && p.ecn == Ecn::Ect1 && p.kind == Kind::Udp));
    }

    #[test]
    fn paced_video_spreads_each_frame_over_its_interval() {
        let (s, out) = emit(video(true, 0.0), 2_500_000, Time::from_secs(1));
        assert_eq!((out.len(), s.stats.bytes_sent), (270, 312_500));
        // Packet j of frame 1 at 33.333 ms + j x 3.7037 ms.
        let frame1: Vec<u64> = out[9..18].iter().map(|p| p.sent_at().0).collect();
        let want: Vec<u64> = (0..9).map(|j| 33_333_333 + j * 33_333_334 / 9).collect();
        assert_eq!(frame1, want);
    }

    #[test]
    fn cbr_is_evenly_spaced_at_the_payload_rate() {
        // 1200 B at 10 Mbit/s: one packet every 960 us.
        let (_, out) = emit(Pattern::Cbr, 10_000_000, Time::from_millis(100));
        assert_eq!(out.len(), 105);
        assert!(out.iter().enumerate().all(|(k, p)| p.sent_at() == Time::from_micros(960 * k as u64) && p.wire_len == 1242));
    }

    #[test]
    fn frame_sizes_vary_uniformly_around_the_nominal() {
        let (s, out) = emit(video(false, 0.5), 2_500_000, Time::from_secs(20));
        let mut sizes = vec![0u64; 600];
        // Frames start with a sequence of packets sharing a send time.
        let mut frame = 0;
        for w in out.windows(2) {
            sizes[frame] += w[0].tcp.payload as u64;
            if w[1].sent_at() != w[0].sent_at() {
                frame += 1;
            }
        }
        sizes[frame] += out.last().unwrap().tcp.payload as u64;
        assert_eq!(s.stats.frames, 600);
        let (lo, hi) = (*sizes.iter().min().unwrap() as f64, *sizes.iter().max().unwrap() as f64);
        let nominal = 2.5e6 / 8.0 / 30.0;
        // ±25 %: within [0.75, 1.25] x nominal, and nearly spanning it.
        assert!(lo >= 0.75 * nominal - 1.0 && hi <= 1.25 * nominal + 1.0, "{lo} {hi}");
        assert!(lo < 0.77 * nominal && hi > 1.23 * nominal, "{lo} {hi}");
        let mean = s.stats.bytes_sent as f64 / 600.0;
        assert!((mean / nominal - 1.0).abs() < 0.02, "mean frame {mean} vs {nominal}");
    }

    #[test]
    fn reordering_is_not_loss() {
        let cfg = UdpConfig { pattern: Pattern::Cbr, rate: Rate(1_000_000), packet_size: 100, ecn: Ecn::NotEct, dscp: 0, stop: None };
        let mut s = UdpSource::new(0, cfg, Stream::new(1, "udp/test"));
        let mut q = EventQueue::default();
        let mut out = vec![];
        for seq in [0u32, 2, 1, 5] {
            let mut p = Packet::new(0, Direction::Forward, Kind::Udp, 142);
            p.tcp.seq = seq;
            p.tcp.payload = 100;
            p.set_sent_at(Time::from_millis(seq as u64));
            s.on_packet(&p, &mut EndpointCtx { flow: 0, now: Time::from_millis(seq as u64 + 3), events: &mut q, out: &mut out });
        }
        // 3 and 4 are missing below 5; 1 came late.
        assert_eq!((s.stats.received, s.stats.lost(), s.stats.bytes_received), (4, 2, 400));
        assert_eq!(s.stats.owd.all.max(), Some(Time::from_millis(3).as_nanos()));
    }
}
