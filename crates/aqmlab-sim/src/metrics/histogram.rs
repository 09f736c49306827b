//! A log-linear histogram of non-negative integers (nanoseconds), HDR-style: exact below
//! 128, then 128 linear sub-buckets per power of two. A bucket spans at most 1/128 of its
//! lower bound, so a reported percentile (the bucket midpoint) is within 0.4 % of the true
//! sample value. Memory is fixed (58 KiB) whatever the number of samples.

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

#[derive(Clone)]
pub struct LogHistogram {
    counts: Box<[u64]>,
    total: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram { counts: vec![0; BUCKETS].into_boxed_slice(), total: 0, sum: 0, min: u64::MAX, max: 0 }
    }
}

impl std::fmt::Debug for LogHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogHistogram(n={}, min={}, max={})", self.total, self.min, self.max)
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let shift = exp - SUB_BITS;
    (SUB + shift as u64 * SUB + ((v >> shift) - SUB)) as usize
}

/// Lowest value and width of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let shift = (i - SUB) / SUB;
    let sub = (i - SUB) % SUB;
    ((SUB + sub) << shift, 1 << shift)
}

impl LogHistogram {
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
    /// Records `v` in its bucket and the minimum only: its count, sum and maximum are added
    /// later, with those of the other samples so recorded, by [`LogHistogram::add_totals`]
    /// (for a caller that keeps them per interval anyway: the link's sojourns, once per
    /// packet, issue 15).
    #[inline]
    pub fn record_bucket(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.min = self.min.min(v);
    }
    /// Adds the count `n`, the `sum` and the maximum `max` of `n` samples recorded with
    /// [`LogHistogram::record_bucket`].
    pub fn add_totals(&mut self, n: u64, sum: u128, max: u64) {
        if n > 0 {
            self.total += n;
            self.sum += sum;
            self.max = self.max.max(max);
        }
    }
    /// Adds another histogram's samples to this one.
    pub fn merge(&mut self, other: &LogHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
    pub fn count(&self) -> u64 {
        self.total
    }
    pub fn max(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max)
    }
    pub fn min(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min)
    }
    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| self.sum as f64 / self.total as f64)
    }
    /// The `q`-quantile (0..=1) by the nearest-rank rule, as the midpoint of its bucket
    /// clamped to the exact minimum and maximum.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        if rank >= self.total {
            return Some(self.max as f64);
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, w) = bounds(i);
                let mid = lo as f64 + (w as f64 - 1.0) / 2.0;
                return Some(mid.clamp(self.min as f64, self.max as f64));
            }
        }
        Some(self.max as f64)
    }

    /// The empirical CDF as `(value, fraction of samples <= value)` points, one per non-empty
    /// bucket (its highest value, clamped to the maximum), ending at `(max, 1.0)`.
    ///
    /// With more than [`CDF_POINTS`] non-empty buckets it is thinned to at most that many
    /// points: the first and last bucket, the bucket where the cumulative count first reaches
    /// each percentile 1..99, 99.1..99.9 and 99.91..99.99 (the bucket [`Self::quantile`]
    /// picks, so those quantiles read off the CDF agree with it to within their bucket), and
    /// buckets at least a factor r above the previous point, with r spreading
    /// [`CDF_VALUE_STEPS`] steps between the smallest non-zero value and the maximum.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let mut points = Vec::new();
        if self.total == 0 {
            return points;
        }
        let nonempty = || self.counts.iter().enumerate().filter(|&(_, &c)| c > 0).map(|(i, &c)| (i, c));
        let top = |i: usize| {
            let (lo, w) = bounds(i);
            (lo + (w - 1)).min(self.max)
        };
        let thin = nonempty().count() > CDF_POINTS;
        let mut ranks: Vec<u64> = Vec::new();
        let mut ratio = 1.0;
        if thin {
            let percents = (1..=99).map(|k| k as f64).chain((1..=9).map(|k| 99.0 + k as f64 / 10.0)).chain((1..=9).map(|k| 99.9 + k as f64 / 100.0));
            ranks = percents.map(|p| ((p / 100.0 * self.total as f64).ceil() as u64).max(1)).collect();
            let smallest = nonempty().map(|(i, _)| top(i)).find(|&v| v > 0).unwrap_or(1) as f64;
            ratio = (self.max as f64 / smallest).powf(1.0 / CDF_VALUE_STEPS as f64);
        }
        let (mut seen, mut next_rank, mut next_value) = (0u64, 0usize, 0.0f64);
        for (i, c) in nonempty() {
            seen += c;
            let v = top(i);
            let rank_reached = ranks.get(next_rank).is_some_and(|&r| seen >= r);
            if !thin || points.is_empty() || seen == self.total || rank_reached || v as f64 >= next_value {
                points.push((v, seen as f64 / self.total as f64));
                while ranks.get(next_rank).is_some_and(|&r| seen >= r) {
                    next_rank += 1;
                }
                next_value = (v.max(1) as f64 * ratio).max(v as f64 + 1.0);
            }
        }
        points
    }
}

/// Most points [`LogHistogram::cdf`] returns (1 + 117 percentiles + 81 value steps + 1).
pub const CDF_POINTS: usize = 200;
/// Value-spaced points of a thinned CDF.
const CDF_VALUE_STEPS: u32 = 80;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_round_trip() {
        for v in [0u64, 1, 127, 128, 129, 255, 256, 1000, 123_456_789, u64::MAX / 3] {
            let (lo, w) = bounds(index(v));
            assert!(lo <= v && v < lo + w, "{v} not in [{lo}, {})", lo + w);
            assert!(w as f64 <= (lo as f64 / SUB as f64).max(1.0));
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_within_one_percent_of_exact() {
        // A deterministic skewed sample: x^3 spread over 10 us .. 200 ms.
        let mut h = LogHistogram::default();
        let mut exact: Vec<u64> = (0..100_000u64)
            .map(|i| {
                let x = (i * 7919 % 100_000) as f64 / 100_000.0;
                (10_000.0 + x * x * x * 200e6) as u64
            })
            .collect();
        for &v in &exact {
            h.record(v);
        }
        exact.sort_unstable();
        for q in [0.01, 0.5, 0.9, 0.95, 0.99, 0.999] {
            let rank = (q * exact.len() as f64).ceil() as usize;
            let truth = exact[rank - 1] as f64;
            let got = h.quantile(q).unwrap();
            assert!((got - truth).abs() / truth < 0.01, "q{q}: {got} vs {truth}");
        }
        assert_eq!(h.max(), exact.last().copied());
        assert_eq!(h.quantile(1.0).unwrap(), *exact.last().unwrap() as f64);
        assert_eq!(h.count(), 100_000);
    }

    #[test]
    fn cdf_is_monotone_bounded_and_agrees_with_quantiles() {
        // Few distinct values: one point per value, exact.
        let mut h = LogHistogram::default();
        for v in [5u64, 5, 7, 1000, 1000, 1000] {
            h.record(v);
        }
        assert_eq!(h.cdf(), vec![(5, 2.0 / 6.0), (7, 0.5), (1000, 1.0)]);
        // Many: thinned, yet every listed quantile lands in the bucket `quantile` reports.
        let mut h = LogHistogram::default();
        for i in 0..200_000u64 {
            let x = (i * 7919 % 200_000) as f64 / 200_000.0;
            h.record((1_000.0 + x.powi(4) * 300e6) as u64);
        }
        let cdf = h.cdf();
        assert!(cdf.len() <= CDF_POINTS && cdf.len() > 100, "{} points", cdf.len());
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert_eq!(*cdf.last().unwrap(), (h.max().unwrap(), 1.0));
        for q in [0.5, 0.9, 0.95, 0.99, 0.999] {
            let (v, _) = cdf.iter().copied().find(|&(_, f)| f >= q).unwrap();
            let want = h.quantile(q).unwrap();
            assert!((v as f64 - want).abs() <= want / 128.0, "q{q}: cdf {v} vs quantile {want}");
        }
        // Value spacing: no gap between points wider than the value step (about 1.16x here)
        // unless the percentiles fill it.
        let worst = cdf.windows(2).map(|w| w[1].0 as f64 / w[0].0 as f64).fold(0.0, f64::max);
        assert!(worst < 1.2, "{worst}");
    }

    #[test]
    fn empty_has_no_quantiles() {
        assert_eq!(LogHistogram::default().quantile(0.5), None);
    }
}
