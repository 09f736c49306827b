//! Flow-completion-time statistics as heistp/ccafct reports them (`stats.go`, with gonum's
//! `stat.GeometricMean` and `stat.Quantile(p, stat.Empirical, ..)`): the geometric mean,
//! the median and the 95th percentile of the completed transfers' FCTs. The Python
//! `aqmlab.analysis.fct_stats` computes the same numbers, for combining runs.

use serde::Serialize;

/// Geometric mean, median and P95 of a set of FCTs (seconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FctStats {
    pub geomean: f64,
    pub median: f64,
    pub p95: f64,
}

impl FctStats {
    /// `None` for an empty set (ccafct refuses to analyse one).
    pub fn of(fcts: &[f64]) -> Option<FctStats> {
        if fcts.is_empty() {
            return None;
        }
        let mut sorted = fcts.to_vec();
        sorted.sort_by(f64::total_cmp);
        // exp of the mean log, summed in ascending order as ccafct does after sorting.
        let mean_log = sorted.iter().map(|x| x.ln()).sum::<f64>() / sorted.len() as f64;
        Some(FctStats { geomean: mean_log.exp(), median: empirical_quantile(&sorted, 0.5), p95: empirical_quantile(&sorted, 0.95) })
    }
}

/// The empirical quantile (no interpolation): the smallest sample whose 1-based rank i
/// satisfies i >= p·n. For an even count the median is the lower of the middle two.
pub fn empirical_quantile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_pick_samples_without_interpolation() {
        let x: Vec<f64> = (1..=20).map(f64::from).collect();
        // p·n = 10 → the 10th sample; 0.95·20 = 19 → the 19th.
        assert_eq!((empirical_quantile(&x, 0.5), empirical_quantile(&x, 0.95)), (10.0, 19.0));
        let odd = [3.0, 1.0, 2.0];
        let s = FctStats::of(&odd).unwrap();
        assert_eq!((s.median, s.p95), (2.0, 3.0));
        assert!((s.geomean - 6f64.powf(1.0 / 3.0)).abs() < 1e-12);
        assert_eq!(FctStats::of(&[]), None);
    }
}
