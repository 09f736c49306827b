//! Per-packet delays of an application flow.

use super::LogHistogram;
use crate::time::Time;

/// A delay record (one-way or round trip), streamed: every sample in a histogram, plus the
/// sum and count since the last sampling tick for the per-tick mean.
#[derive(Debug, Default)]
pub struct DelayStats {
    pub all: LogHistogram,
    tick_sum: Time,
    tick_n: u64,
}

impl DelayStats {
    pub fn record(&mut self, d: Time) {
        self.all.record(d.as_nanos());
        self.tick_sum += d;
        self.tick_n += 1;
    }
    /// Mean delay in ms of the samples since the last call (NaN if none).
    pub fn take_tick_mean_ms(&mut self) -> f64 {
        let m = if self.tick_n > 0 { self.tick_sum.as_millis_f64() / self.tick_n as f64 } else { f64::NAN };
        self.tick_sum = Time::ZERO;
        self.tick_n = 0;
        m
    }
}
