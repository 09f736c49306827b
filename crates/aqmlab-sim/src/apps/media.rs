//! A real-time media flow (`[[media]]`) as an endpoint of the run: the media application
//! (SCReAM, `scream.rs`), its series and `summary.json` entry.

use super::scream::Scream;
use crate::event::FlowTimer;
use crate::metrics::{SeriesId, SeriesRecorder, Tick};
use crate::packet::Packet;
use crate::tcp::EndpointCtx;
use crate::time::Time;
use serde::Serialize;

/// A media flow (SCReAM) with its series handles.
pub struct MediaFlow {
    pub name: String,
    /// The codepoint it sends, as the scenario names it (`ect1`, ...).
    pub ecn: &'static str,
    pub rtt_base: Time,
    pub start: Time,
    pub stop: Option<Time>,
    pub app: Scream,
    target: SeriesId,
    bitrate: SeriesId,
    qdelay: SeriesId,
    cwnd: SeriesId,
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

impl MediaFlow {
    /// Registers the series of a flow called `name`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(name: String, ecn: &'static str, rtt_base: Time, start: Time, stop: Option<Time>, app: Scream, recorder: &mut SeriesRecorder) -> Self {
        MediaFlow {
            target: recorder.register(&name, "target_bitrate", "Mbit/s"),
            bitrate: recorder.register(&name, "bitrate", "Mbit/s"),
            qdelay: recorder.register(&name, "qdelay_estimate", "ms"),
            cwnd: recorder.register(&name, "cwnd", "bytes"),
            app,
            name,
            ecn,
            rtt_base,
            start,
            stop,
        }
    }

    fn end_time(&self, run_end: Time) -> Time {
        self.stop.map_or(run_end, |s| s.min(run_end))
    }

    pub fn on_timer(&mut self, timer: FlowTimer, ctx: &mut EndpointCtx) {
        match timer {
            FlowTimer::Start => self.app.start(ctx),
            _ => self.app.on_timer(timer, ctx),
        }
    }

    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        self.app.on_packet(pkt, ctx);
    }

    pub fn sample(&mut self, tick: &Tick, recorder: &mut SeriesRecorder) {
        let (now, nan) = (tick.now, f64::NAN);
        let active = now > self.start && self.stop.map_or(true, |s| now <= s);
        let st = &mut self.app.stats;
        let rate = st.step_bytes_sent as f64 * 8.0 / tick.step_s / 1e6;
        st.step_bytes_sent = 0;
        let tx = &self.app.tx;
        recorder.set(self.target, if active { tx.target_bitrate / 1e6 } else { nan });
        recorder.set(self.bitrate, if now > self.start { rate } else { nan });
        recorder.set(self.qdelay, if active { tx.queue_delay * 1e3 } else { nan });
        recorder.set(self.cwnd, if active { tx.cwnd as f64 } else { nan });
    }

    /// Closes the time average of the target bitrate at the flow's end (hence `&mut`).
    pub fn summary(&mut self, end: Time) -> MediaSummary {
        let stop = self.end_time(end);
        let span = (stop - self.start).as_secs_f64();
        let mbps = |bytes: u64| if span > 0.0 { bytes as f64 * 8.0 / span / 1e6 } else { 0.0 };
        let st = &self.app.stats;
        let (sent, received) = (mbps(st.bytes_sent), mbps(st.bytes_received));
        MediaSummary {
            name: self.name.clone(),
            kind: "scream".to_string(),
            ecn: self.ecn.to_string(),
            rtt_base_ms: self.rtt_base.as_millis_f64(),
            start_s: self.start.as_secs_f64(),
            frames: st.frames,
            packets_sent: st.packets_sent,
            packets_received: st.packets_received,
            rtp_queue_discards: st.rtp_queue_discards,
            losses: self.app.tx.losses,
            ce_marked: self.app.tx.ce_marked,
            mean_bitrate_mbps: sent,
            mean_received_mbps: received,
            mean_target_mbps: self.app.mean_target(stop, self.start) / 1e6,
        }
    }
}
