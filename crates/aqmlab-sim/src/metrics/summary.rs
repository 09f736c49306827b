//! Delay percentiles as `summary.json` reports them.

use super::LogHistogram;
use serde::Serialize;

/// Delay percentiles in milliseconds (queue sojourn, probe and UDP delays).
#[derive(Clone, Debug, Serialize)]
pub struct SojournSummary {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// The distribution as `[ms, fraction of packets at or below]` points (at most 200, see
    /// `LogHistogram::cdf`); bottleneck queues only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cdf: Option<Vec<[f64; 2]>>,
}

impl SojournSummary {
    /// The percentiles of a histogram of nanoseconds.
    pub fn of(h: &LogHistogram) -> Self {
        let ms = |v: Option<f64>| v.map(|x| x * 1e-6);
        SojournSummary {
            p50: ms(h.quantile(0.50)),
            p95: ms(h.quantile(0.95)),
            p99: ms(h.quantile(0.99)),
            p999: ms(h.quantile(0.999)),
            max: ms(h.max().map(|x| x as f64)),
            mean: ms(h.mean()),
            cdf: None,
        }
    }
    /// Every value less `base_ms` (the delay a probe adds over its base RTT).
    pub fn minus(&self, base_ms: f64) -> Self {
        let d = |v: Option<f64>| v.map(|x| x - base_ms);
        SojournSummary { p50: d(self.p50), p95: d(self.p95), p99: d(self.p99), p999: d(self.p999), max: d(self.max), mean: d(self.mean), cdf: None }
    }
    /// With the CDF.
    pub fn with_cdf(h: &LogHistogram) -> Self {
        let cdf = h.cdf().into_iter().map(|(v, f)| [v as f64 * 1e-6, f]).collect();
        SojournSummary { cdf: Some(cdf), ..Self::of(h) }
    }
}
