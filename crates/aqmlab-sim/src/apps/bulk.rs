//! A TCP transfer between two endpoints: a `[[flows]]` copy (bulk or finite) or one member of
//! a load-transient group, with its series and its `summary.json` entry.

use crate::event::FlowTimer;
use crate::metrics::{steady_horizon, steady_state_rate, steady_window, SeriesId, SeriesRecorder, Tick};
use std::collections::VecDeque;
use crate::packet::{Direction, Packet};
use crate::tcp::{EndpointCtx, TcpReceiver, TcpSender};
use crate::time::Time;
use serde::Serialize;

/// Per-flow series handles.
pub struct FlowSeries {
    pub goodput: SeriesId,
    pub delivery_rate: SeriesId,
    pub srtt: SeriesId,
    pub cwnd: SeriesId,
    pub retransmits: SeriesId,
}

impl FlowSeries {
    pub fn register(recorder: &mut SeriesRecorder, name: &str) -> FlowSeries {
        FlowSeries {
            goodput: recorder.register(name, "goodput", "Mbit/s"),
            delivery_rate: recorder.register(name, "delivery_rate", "Mbit/s"),
            srtt: recorder.register(name, "srtt", "ms"),
            cwnd: recorder.register(name, "cwnd", "packets"),
            retransmits: recorder.register(name, "retransmits", "packets"),
        }
    }
}

/// Both ends of one TCP connection.
///
/// `repr(C)`: the receiver, the sender, then what the sampling pass reads at every tick
/// in two cache lines (with 1000s of flows each is a miss at every tick; issue #15, session
/// 12, test `what_the_sampling_pass_reads_of_a_flow_lies_in_five_cache_lines`), and last
/// what only the summary reads.
#[repr(C)]
pub struct TcpFlow {
    pub receiver: TcpReceiver,
    pub sender: TcpSender,
    pub start: Time,
    pub stop: Option<Time>,
    last_delivered: u64,
    last_retransmits: u64,
    /// Delivery-rate samples (s, Mbit/s) while the flow runs, for the steady-state rate:
    /// those of the last [`steady_horizon`] seconds ([`Tick::horizon_s`]; older ones cannot
    /// be in the window), so a flow's memory is flat in the simulated duration (issue #14: 16
    /// bytes per flow and tick were 3.2 GB for 100,000 flows over 100 s), and the first one's
    /// time.
    rate_samples: VecDeque<(f64, f64)>,
    first_sample_s: Option<f64>,
    pub series: FlowSeries,
    pub name: String,
    /// Base RTT plus the shared links' delays.
    pub rtt: Time,
    /// Whether the flow is listed under `flows[]` (a transient group's flows are reported
    /// under `transients[]` instead).
    pub listed: bool,
    /// The data crosses the return link (`direction = "down"`).
    pub down: bool,
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
    /// Which way the data went: `up` (client to server, over the bottleneck) or `down`
    /// (`direction = "down"`: the data crosses the return link).
    pub direction: &'static str,
    /// Steady-state delivery rate D_SS (algorithms.md 5.2); null if the window is empty.
    pub steady_mbps: Option<f64>,
    /// The interval D_SS averaged over, in seconds of the run (`[metrics] steady_window`);
    /// null when the flow has no rate sample.
    pub steady_from_s: Option<f64>,
    pub steady_to_s: Option<f64>,
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

impl TcpFlow {
    /// TCP sequence invariants, checked once per connection at the end of every run (a few
    /// comparisons): the receiver never holds a segment the sender never sent; the bytes
    /// delivered to the application are exactly those of the in-order segments below
    /// `rcv_nxt` (no byte delivered twice, no hole below it: delivery is only ever added to,
    /// so it cannot go back either); a finite transfer delivers at most its size, and all of
    /// it once the sender saw it fully acknowledged. The segment checks are skipped on the
    /// `ns2-2013` profile, whose ns-2 agents number segments their own way.
    pub fn check_invariants(&self) {
        check_tcp_invariants(&self.name, &self.sender, &self.receiver);
    }

    /// `ticks`: the points of the sampling grid, `step_s` its step; `window_s` the
    /// steady-state window (`None`: auto), which bounds the rate samples kept.
    #[allow(clippy::too_many_arguments)]
    pub fn new(name: String, rtt: Time, start: Time, stop: Option<Time>, listed: bool, down: bool, sender: TcpSender, receiver: TcpReceiver, series: FlowSeries, ticks: usize, step_s: f64, window_s: Option<f64>) -> Self {
        let keep = ((steady_horizon(window_s) / step_s.max(1e-9)).ceil() as usize).saturating_add(2).min(ticks);
        TcpFlow {
            name,
            rtt,
            start,
            stop,
            listed,
            down,
            sender,
            receiver,
            series,
            last_delivered: 0,
            last_retransmits: 0,
            rate_samples: VecDeque::with_capacity(keep),
            first_sample_s: None,
        }
    }

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

    pub fn on_timer(&mut self, timer: FlowTimer, ctx: &mut EndpointCtx) {
        match timer {
            FlowTimer::Start => self.sender.start(ctx),
            FlowTimer::Stop => self.sender.stop(),
            FlowTimer::DelayedAck => self.receiver.on_timer(timer, ctx),
            _ => self.sender.on_timer(timer, ctx),
        }
    }

    /// Data reaches the receiver, ACKs the sender.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match pkt.dir {
            Direction::Forward => self.receiver.on_packet(pkt, ctx),
            Direction::Reverse => self.sender.on_packet(pkt, ctx),
        }
    }

    pub fn sample(&mut self, tick: &Tick, recorder: &mut SeriesRecorder) {
        let (now, t, nan) = (tick.now, tick.t, f64::NAN);
        let active = self.active_at(now) && now > self.start;
        let delivered = self.receiver.delivered_bytes;
        let goodput = (delivered - self.last_delivered) as f64 * 8.0 / tick.step_s / 1e6;
        self.last_delivered = delivered;
        let rate = self.sender.delivery_rate_bps() / 1e6;
        if active {
            let first = *self.first_sample_s.get_or_insert(t);
            // No kept sample is older than the first one, so while the first is within the
            // horizon nothing is dropped, and the ring's front (a cache line of its own, cold
            // at every tick with 1000s of flows) is not read.
            if first < t - tick.horizon_s {
                while self.rate_samples.front().is_some_and(|&(t0, _)| t0 < t - tick.horizon_s) {
                    self.rate_samples.pop_front();
                }
            }
            self.rate_samples.push_back((t, rate));
        }
        let s = &self.series;
        recorder.set(s.goodput, if now > self.start { goodput } else { nan });
        recorder.set(s.delivery_rate, if active { rate } else { nan });
        let srtt = self.sender.srtt();
        recorder.set(s.srtt, if active && srtt > Time::ZERO { srtt.as_millis_f64() } else { nan });
        recorder.set(s.cwnd, if active { self.sender.tp.cwnd as f64 } else { nan });
        let rtx = self.sender.stats.retransmits;
        recorder.set(s.retransmits, (rtx - self.last_retransmits) as f64);
        self.last_retransmits = rtx;
    }

    /// `end`: the end of the run; `window_s`: the steady-state window (`None`: "auto",
    /// [`steady_window`]).
    pub fn summary(&self, end: Time, window_s: Option<f64>) -> FlowSummary {
        let active = self.end_time(end) - self.start;
        let bytes = self.receiver.delivered_bytes;
        let window = match (self.first_sample_s, self.rate_samples.back()) {
            (Some(first), Some(&(last, _))) => Some(steady_window(first, last, window_s)),
            _ => None,
        };
        FlowSummary {
            name: self.name.clone(),
            cc: self.sender.cc_name().to_string(),
            rtt_ms: self.rtt.as_millis_f64(),
            start_s: self.start.as_secs_f64(),
            goodput_mbps: if active > Time::ZERO { bytes as f64 * 8.0 / active.as_secs_f64() / 1e6 } else { 0.0 },
            direction: if self.down { "down" } else { "up" },
            steady_mbps: window.and_then(|w| steady_state_rate(&self.rate_samples, w)),
            steady_from_s: window.map(|w| w.0),
            steady_to_s: window.map(|w| w.1),
            bytes_delivered: bytes,
            retransmits: self.sender.stats.retransmits,
            rto_events: self.sender.stats.rto_events,
            fast_recoveries: self.sender.stats.fast_recoveries,
            ce_received: self.receiver.ce_received as u64,
            sce_received: self.receiver.sce_received as u64,
            fct_s: self.sender.stats.completed_at.map(|c| (c - self.start).as_secs_f64()),
        }
    }
}

/// [`TcpFlow::check_invariants`] for any connection (also the workloads' short flows, each
/// when it completes). `name` is formatted only on a violation.
pub fn check_tcp_invariants(name: impl std::fmt::Display, tx: &TcpSender, rx: &TcpReceiver) {
    let delivered = rx.delivered_bytes;
    if tx.config().ns2.is_none() {
        if rx.rcv_nxt > tx.snd_nxt() {
            panic!("invariant violated: TCP sequence: flow \"{name}\": the receiver has segments up to {} but the sender sent only up to {}", rx.rcv_nxt, tx.snd_nxt());
        }
        if !rx.holes_flag_is_consistent() {
            panic!("invariant violated: TCP receiver: flow \"{name}\": the out-of-order flag disagrees with the list");
        }
        let want = tx.payload_before(rx.rcv_nxt);
        if delivered != want {
            panic!("invariant violated: TCP delivery: flow \"{name}\": {delivered} bytes delivered to the application for {} in-order segments of {want} bytes", rx.rcv_nxt);
        }
    }
    if let Some(size) = tx.config().size {
        if delivered > size {
            panic!("invariant violated: TCP delivery: flow \"{name}\": {delivered} bytes delivered of a {size}-byte transfer");
        }
        if tx.is_complete() && delivered != size {
            panic!("invariant violated: TCP delivery: flow \"{name}\": the transfer completed with {delivered} of {size} bytes delivered (a hole)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// What the sampling pass reads of a flow at every tick lies in five cache lines: the
    /// receiver's first (`delivered_bytes`), two of the sender's, and two after both ends
    /// (`start` to `series`).
    /// With 1000s of flows none of them is still cached at the next tick, so each is a miss
    /// per flow and tick (session 11 measured about 13 lines a flow; session 12 brought them
    /// to five, plus the rate ring's newest entry).
    #[test]
    fn what_the_sampling_pass_reads_of_a_flow_lies_in_five_cache_lines() {
        assert_eq!(std::mem::align_of::<TcpFlow>(), 64);
        let receiver = (offset_of!(TcpFlow, receiver) + offset_of!(TcpReceiver, delivered_bytes), size_of::<u64>());
        assert!(receiver.0 + receiver.1 <= 64, "delivered_bytes at {}", receiver.0);
        let tail = field_spans!(TcpFlow, 0; start, stop, last_delivered, last_retransmits, rate_samples, first_sample_s, series);
        use crate::tcp::sender::tests::{cache_lines as lines, sampled_fields};
        assert_eq!(lines(&tail).len(), 2, "tail {tail:?}");
        let sender = offset_of!(TcpFlow, sender);
        let mut all: Vec<(usize, usize)> = sampled_fields().into_iter().map(|(at, n)| (sender + at, n)).collect();
        all.push(receiver);
        all.extend(tail);
        assert_eq!(lines(&all).len(), 5, "lines {:?}", lines(&all));
    }
}
