//! Delay-spike durations at a link (algorithms.md 5.5, and the Järvinen–Kojo load-transient
//! study, 4.3): for each threshold θ, the longest contiguous interval after a start time
//! during which the link's backlog exceeds θ worth of bytes at the link rate, the total time
//! above, and the peak backlog.
//!
//! The link reports its backlog after every enqueue and dequeue. The backlog only changes at
//! those instants, so the intervals are exact. Below every threshold and below the peak so
//! far, an observation costs one comparison.
//!
//! A threshold is a queueing delay: the backlog is above θ when it takes longer than θ to drain
//! at the link's *current* rate. The byte thresholds are recomputed when the link's rate
//! changes ([`SpikeTracker::set_rate`]); converting once at the starting rate made a 50 -> 1
//! Mbit/s step (l4s-tests S2) read 0 s above 100 ms while the sojourn maximum was 4.3 s.

use crate::time::{Rate, Time};
use serde::Serialize;

/// One threshold's record.
#[derive(Clone, Debug)]
struct Level {
    threshold: Time,
    /// θ × rate, in bytes; "above" means strictly more.
    bytes: u64,
    /// Start of the current interval above the threshold.
    above_since: Option<Time>,
    longest: Time,
    total: Time,
}

impl Level {
    /// Adds the interval `[since, until]`, counted from `after` on.
    fn close(&mut self, since: Time, until: Time, after: Time) {
        let from = since.max(after);
        if until > from {
            let d = until - from;
            self.longest = self.longest.max(d);
            self.total += d;
        }
    }
}

/// Spike measurement of one link, in fixed memory.
#[derive(Clone, Debug)]
pub struct SpikeTracker {
    levels: Vec<Level>,
    /// The link's current rate, which the byte thresholds are computed from.
    rate: Rate,
    after: Time,
    /// Largest backlog seen at or after `after`, as ms of transmission at the rate of its time.
    peak_ms: f64,
    /// `peak_ms` as bytes at the current rate (rounded down): smaller backlogs cannot raise it.
    peak_bytes: u64,
    /// Backlogs below this change nothing: the lowest threshold and the peak, while no level
    /// is above its threshold; zero (every observation) while one is.
    gate: u64,
}

/// One threshold's result (`summary.json` → `bottleneck.spikes[]`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SpikeSummary {
    pub threshold_ms: f64,
    /// Longest contiguous time above the threshold after `spike_after`, s.
    pub longest_s: f64,
    /// Total time above the threshold after `spike_after`, s.
    pub total_s: f64,
    /// Largest backlog after `spike_after`, as ms of transmission at the rate (the same for
    /// every threshold).
    pub peak_ms: f64,
}

impl SpikeTracker {
    /// Thresholds are times at the link's rate, `rate` until [`set_rate`](Self::set_rate)
    /// changes it. Intervals count from `after`.
    pub fn new(thresholds: &[Time], rate: Rate, after: Time) -> Self {
        let levels: Vec<Level> = thresholds
            .iter()
            .map(|&t| Level {
                threshold: t,
                bytes: bytes_at(t, rate),
                above_since: None,
                longest: Time::ZERO,
                total: Time::ZERO,
            })
            .collect();
        SpikeTracker { levels, rate, after, peak_ms: 0.0, peak_bytes: 0, gate: 0 }
    }

    /// The link serialises at `rate` from `now` on, with `backlog` bytes queued: the byte
    /// thresholds move so that each still means the same queueing delay, and the backlog is
    /// re-judged against them at once (a rate drop can put a standing queue above θ).
    pub fn set_rate(&mut self, now: Time, rate: Rate, backlog: u64) {
        self.rate = rate;
        for l in &mut self.levels {
            l.bytes = bytes_at(l.threshold, rate);
        }
        self.peak_bytes = (self.peak_ms * rate.0 as f64 / 8e3) as u64;
        self.update(now, backlog);
    }

    /// The link's backlog is `backlog` bytes from `now` on.
    #[inline]
    pub fn observe(&mut self, now: Time, backlog: u64) {
        if backlog >= self.gate {
            self.update(now, backlog);
        }
    }

    fn update(&mut self, now: Time, backlog: u64) {
        if now >= self.after && backlog > self.peak_bytes {
            self.peak_bytes = backlog;
            self.peak_ms = self.peak_ms.max(backlog as f64 * 8e3 / self.rate.0 as f64);
        }
        let mut any_above = false;
        let mut lowest = u64::MAX;
        for l in &mut self.levels {
            let above = backlog > l.bytes;
            match (l.above_since, above) {
                (None, true) => l.above_since = Some(now),
                (Some(since), false) => {
                    l.close(since, now, self.after);
                    l.above_since = None;
                }
                _ => {}
            }
            any_above |= above;
            lowest = lowest.min(l.bytes);
        }
        // Before `after` the peak is not tracked, so every non-empty backlog is looked at.
        let peak = if now >= self.after { self.peak_bytes } else { 0 };
        self.gate = if any_above { 0 } else { lowest.min(peak).saturating_add(1) };
    }

    /// Results with intervals still open at `end` closed there.
    pub fn summary(&self, end: Time) -> Vec<SpikeSummary> {
        let peak_ms = self.peak_ms;
        self.levels
            .iter()
            .map(|l| {
                let mut l = l.clone();
                if let Some(since) = l.above_since {
                    l.close(since, end, self.after);
                }
                SpikeSummary {
                    threshold_ms: l.threshold.as_millis_f64(),
                    longest_s: l.longest.as_secs_f64(),
                    total_s: l.total.as_secs_f64(),
                    peak_ms,
                }
            })
            .collect()
    }
}

/// θ worth of bytes at `rate`: "above" the threshold means strictly more than this.
fn bytes_at(threshold: Time, rate: Rate) -> u64 {
    (threshold.as_nanos() as u128 * rate.0 as u128 / 8_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_bytes_at_the_rate_and_intervals_count_from_after() {
        let ms = Time::from_millis;
        // J-K: 60 ms and 100 ms at 2 Mbit/s.
        let mut s = SpikeTracker::new(&[ms(60), ms(100)], Rate(2_000_000), ms(1000));
        assert_eq!(s.levels.iter().map(|l| l.bytes).collect::<Vec<_>>(), vec![15_000, 25_000]);
        // Above 15000 from 900 ms to 1300 ms (counted from 1000 ms: 300 ms), at 30000 B
        // (above both) from 1100 ms to 1200 ms; then above 15000 again from 2000 to 2100 ms.
        for (t, b) in [(0, 0), (500, 15_000), (900, 15_001), (1100, 30_000), (1200, 20_000), (1300, 15_000), (1500, 0), (2000, 16_000), (2100, 1_000)] {
            s.observe(ms(t), b);
        }
        let r = s.summary(ms(3000));
        assert_eq!(r[0], SpikeSummary { threshold_ms: 60.0, longest_s: 0.3, total_s: 0.4, peak_ms: 120.0 });
        assert_eq!(r[1], SpikeSummary { threshold_ms: 100.0, longest_s: 0.1, total_s: 0.1, peak_ms: 120.0 });
        // An interval still open at the end is closed there.
        s.observe(ms(2500), 40_000);
        let r = s.summary(ms(3000));
        assert_eq!((r[0].longest_s, r[1].longest_s, r[1].total_s), (0.5, 0.5, 0.6));
        assert_eq!(r[0].peak_ms, 160.0);
    }

    #[test]
    fn the_peak_ignores_backlog_before_after() {
        let ms = Time::from_millis;
        let mut s = SpikeTracker::new(&[ms(10)], Rate(8_000_000), ms(100));
        s.observe(ms(50), 50_000);
        s.observe(ms(60), 0);
        s.observe(ms(150), 2_000);
        s.observe(ms(160), 0);
        let r = s.summary(ms(200));
        assert_eq!((r[0].longest_s, r[0].peak_ms), (0.0, 2.0));
    }

    #[test]
    fn a_rate_drop_moves_the_thresholds_and_rejudges_the_standing_queue() {
        let ms = Time::from_millis;
        let mut s = SpikeTracker::new(&[ms(100)], Rate(50_000_000), Time::ZERO);
        // 100 kB drains in 16 ms at 50 Mbit/s: below 100 ms.
        s.observe(ms(0), 100_000);
        // At 1 Mbit/s from 1 s on, the same backlog is 800 ms of queue: above at once.
        s.set_rate(ms(1000), Rate(1_000_000), 100_000);
        // 10 kB at 1 Mbit/s is 80 ms: below again from 2 s.
        s.observe(ms(2000), 10_000);
        let r = s.summary(ms(3000));
        assert_eq!((r[0].longest_s, r[0].total_s), (1.0, 1.0));
        assert_eq!(r[0].peak_ms, 800.0, "the peak is judged at the rate of its time");
        // Back at 50 Mbit/s, 800 ms worth would be 5 MB; 200 kB (32 ms) is below.
        s.set_rate(ms(2500), Rate(50_000_000), 200_000);
        let r = s.summary(ms(3000));
        assert_eq!((r[0].longest_s, r[0].peak_ms), (1.0, 800.0));
    }
}
