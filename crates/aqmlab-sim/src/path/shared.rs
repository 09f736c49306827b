//! The links every flow shares — the bottleneck, the return link and the links cascaded in
//! front of the bottleneck — as the engine observes and changes them: one set of series per
//! link, sampled on the measurement grid, and the scheduled rate changes and discipline swaps
//! of `[[bottleneck.changes]]` (docs/path.md).
//!
//! A rate change is HTB's `tc class change … rate R ceil R` (the studies' `fl` script): the
//! class rate changes, the packet being sent completes at the old rate, and the child
//! discipline is not touched, so it keeps its state and any rate it was configured with
//! (RED's or CAKE's `bandwidth`, HRED's link rate). A discipline swap is `tc qdisc replace`:
//! the old discipline's queue is dropped and the new one starts empty, built for the link's
//! rate at that time with its own random stream (`qdisc/<link>/change/<index>`).

use super::Link;
use crate::metrics::{LogHistogram, SeriesId, SeriesRecorder, SojournSummary, SpikeSummary};
use serde::Serialize;
use crate::qdisc::{Args, Qdisc};
use crate::time::{Rate, Time};
use std::sync::Arc;

/// Indices of the bottleneck and the return link in the engine's shared links; the upstream
/// links follow.
pub const BOTTLENECK: usize = 0;
pub const RETURN: usize = 1;

/// A shared link and its series.
pub struct SharedLink {
    /// The series entity: `bottleneck`, `return_link`, `upstream-<i>`.
    pub name: String,
    /// Index of the link in the engine's elements.
    pub element: usize,
    /// The discipline it started with, as given (tc syntax).
    pub qdisc_text: String,
    /// The rate it started with.
    pub start_rate: Rate,
    series: Option<LinkSeries>,
}

struct LinkSeries {
    qdelay: SeriesId,
    qdelay_max: SeriesId,
    qlen: SeriesId,
    drops: SeriesId,
    ce_marks: SeriesId,
    rate: SeriesId,
    /// Mean sojourn per sub-queue name (`qdelay_<name>`), when the link's disciplines have
    /// more than one sub-queue in all.
    queue_qdelay: Vec<(&'static str, SeriesId)>,
    /// Every xstat any of the link's disciplines reports, by name.
    xstats: Vec<(&'static str, SeriesId)>,
    last_drops: u64,
    last_marks: u64,
}

impl SharedLink {
    pub fn new(name: &str, element: usize, qdisc_text: &str, start_rate: Rate) -> Self {
        SharedLink { name: name.to_string(), element, qdisc_text: qdisc_text.to_string(), start_rate, series: None }
    }

    /// Registers this link's series. `disciplines` are all it will have (the first and
    /// those its changes install), so a column exists for each of their sub-queues and
    /// xstats; a column is NaN while its discipline is not installed.
    pub fn register_series(&mut self, recorder: &mut SeriesRecorder, disciplines: &[&dyn Qdisc]) {
        let e = &self.name;
        let mut queue_names: Vec<&'static str> = Vec::new();
        let mut xstat_names: Vec<&'static str> = Vec::new();
        let mut buf = Vec::new();
        for q in disciplines {
            for n in q.queue_names() {
                if !queue_names.contains(n) {
                    queue_names.push(n);
                }
            }
            buf.clear();
            q.xstats(&mut buf);
            for (n, _) in &buf {
                if !xstat_names.contains(n) {
                    xstat_names.push(n);
                }
            }
        }
        if queue_names.len() < 2 {
            queue_names.clear();
        }
        self.series = Some(LinkSeries {
            qdelay: recorder.register(e, "qdelay", "ms"),
            qdelay_max: recorder.register(e, "qdelay_max", "ms"),
            qlen: recorder.register(e, "qlen", "packets"),
            drops: recorder.register(e, "drops", "packets"),
            ce_marks: recorder.register(e, "ce_marks", "packets"),
            rate: recorder.register(e, "rate", "Mbit/s"),
            queue_qdelay: queue_names.iter().map(|&n| (n, recorder.register(e, &format!("qdelay_{n}"), "ms"))).collect(),
            xstats: xstat_names.iter().map(|&n| (n, recorder.register(e, n, ""))).collect(),
            last_drops: 0,
            last_marks: 0,
        });
    }

    /// Records one grid tick: the sojourns since the last tick, the backlog, drops and marks
    /// in the step, the rate, and the discipline's xstats. `xstats` is a reused buffer.
    pub fn sample(&mut self, link: &mut Link, recorder: &mut SeriesRecorder, xstats: &mut Vec<(&'static str, f64)>) {
        let Some(s) = &mut self.series else { return };
        let nan = f64::NAN;
        let (mut sum, mut n, mut max) = (Time::ZERO, 0u64, Time::ZERO);
        for q in &mut link.stats.queues {
            let (qs, qn, qm) = q.take_tick();
            if let Some(&(_, id)) = s.queue_qdelay.iter().find(|(name, _)| *name == q.name) {
                recorder.set(id, if qn > 0 { qs.as_millis_f64() / qn as f64 } else { nan });
            }
            sum += qs;
            n += qn;
            max = max.max(qm);
        }
        recorder.set(s.qdelay, if n > 0 { sum.as_millis_f64() / n as f64 } else { nan });
        recorder.set(s.qdelay_max, if n > 0 { max.as_millis_f64() } else { nan });
        recorder.set(s.qlen, link.qdisc().len() as f64);
        let (drops, marks) = (link.drops(), link.ce_marks());
        recorder.set(s.drops, (drops - s.last_drops) as f64);
        recorder.set(s.ce_marks, (marks - s.last_marks) as f64);
        (s.last_drops, s.last_marks) = (drops, marks);
        recorder.set(s.rate, link.rate().as_mbps());
        xstats.clear();
        link.qdisc().xstats(xstats);
        for &(name, id) in &s.xstats {
            recorder.set(id, xstats.iter().find(|(n, _)| *n == name).map_or(nan, |&(_, v)| v));
        }
    }
}

/// A change due at a time, for one link.
pub struct ScheduledChange {
    pub at: Time,
    /// Index into the engine's shared links.
    pub link: usize,
    rate: Option<Rate>,
    /// Built when the schedule is made (for the rate the link will have then), installed
    /// when due.
    qdisc: Option<Box<dyn Qdisc>>,
    /// Its parsed parameters, for a same-kind change (`Qdisc::change`).
    params: Option<Arc<Args>>,
}

impl ScheduledChange {
    pub fn new(at: Time, link: usize, rate: Option<Rate>, qdisc: Option<Box<dyn Qdisc>>) -> Self {
        ScheduledChange { at, link, rate, qdisc, params: None }
    }

    /// The change with the new discipline's parsed parameters (from its spec).
    pub fn with_params(self, params: Option<&Args>) -> Self {
        ScheduledChange { params: params.map(|a| Arc::new(a.clone())), ..self }
    }

    /// The change's discipline, for registering series before it is installed.
    pub fn qdisc(&self) -> Option<&dyn Qdisc> {
        self.qdisc.as_deref()
    }

    /// Applies the change: the rate first, so that a discipline swapped in at the same
    /// moment sees the new rate. Returns the packets the swap discarded.
    pub fn apply(&mut self, link: &mut Link, now: Time) -> u64 {
        if let Some(r) = self.rate {
            link.set_rate(r, now);
        }
        self.qdisc.take().map_or(0, |q| link.replace_qdisc_with(q, self.params.as_deref(), now))
    }
}

/// A shared link (`summary.json` → `bottleneck`, `return_link`, `upstream[]`).
#[derive(Clone, Debug, Serialize)]
pub struct BottleneckSummary {
    /// The rate at the start of the run (`[[bottleneck.changes]]` may change it; the `rate`
    /// series has it over time).
    pub rate_mbps: f64,
    /// The discipline at the start of the run, as given.
    pub qdisc: String,
    /// Packets that left the bottleneck.
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub ce_marks: u64,
    /// Busy fraction from the first flow's start to the end of the run.
    pub utilization: f64,
    pub sojourn_ms: SojournSummary,
    /// Per sub-queue sojourn (e.g. DualPI2's C and L queues); empty for single-queue disciplines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSummary>,
    /// Delay-spike durations per `[metrics] spike_thresholds` entry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spikes: Vec<SpikeSummary>,
}

impl BottleneckSummary {
    /// `rate` is the link's rate at the start; utilisation counts from `first_start` to `end`.
    pub fn of(link: &Link, qdisc_text: &str, rate: Rate, first_start: Time, end: Time) -> Self {
        let span = end - first_start;
        let mut all = LogHistogram::default();
        for q in &link.stats.queues {
            all.merge(&q.sojourn());
        }
        let queues = if link.stats.queues.len() > 1 {
            (link.stats.queues.iter())
                .map(|q| {
                    let sojourn = q.sojourn();
                    QueueSummary { name: q.name.to_string(), packets: sojourn.count(), sojourn_ms: SojournSummary::with_cdf(&sojourn) }
                })
                .collect()
        } else {
            Vec::new()
        };
        BottleneckSummary {
            rate_mbps: rate.as_mbps(),
            qdisc: qdisc_text.to_string(),
            packets: link.stats.tx_packets,
            bytes: link.stats.tx_bytes,
            drops: link.drops(),
            ce_marks: link.ce_marks(),
            utilization: if span > Time::ZERO { (link.busy_until(end).as_secs_f64() / span.as_secs_f64()).min(1.0) } else { 0.0 },
            sojourn_ms: SojournSummary::with_cdf(&all),
            queues,
            spikes: link.stats.spikes.as_ref().map_or_else(Vec::new, |s| s.summary(end)),
        }
    }
}

/// One sub-queue of the bottleneck discipline.
#[derive(Clone, Debug, Serialize)]
pub struct QueueSummary {
    pub name: String,
    /// Packets dequeued from this sub-queue.
    pub packets: u64,
    pub sojourn_ms: SojournSummary,
}
