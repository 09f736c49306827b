//! Study metrics from `heistp/l4s-tests:steady_state.go` (algorithms.md 5.1 and 5.2).

/// Steady-state delivery rate D_SS: the arithmetic mean of the non-zero samples with
/// `t_last - window - 1 s < t < t_last - 1 s`, where `t_last` is the time of the flow's last
/// sample. `samples` are (time in s, rate); returns `None` when the window holds no sample.
pub fn steady_state_rate(samples: &[(f64, f64)], window_s: f64) -> Option<f64> {
    let t_last = samples.last()?.0;
    let (lo, hi) = (t_last - window_s - 1.0, t_last - 1.0);
    let (sum, n) = samples
        .iter()
        .filter(|&&(t, v)| t > lo && t < hi && v != 0.0 && v.is_finite())
        .fold((0.0, 0usize), |(s, n), &(_, v)| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Jain's fairness index (Σx)² / (n Σx²), in [1/n, 1]; `None` for no flows or all zero.
pub fn jain_index(x: &[f64]) -> Option<f64> {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && s2 > 0.0).then(|| s * s / (x.len() as f64 * s2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_ends_one_second_before_last_sample_and_skips_zeros() {
        // Samples every 0.5 s from 0 to 100 s: value 1 before 39 s, 3 from 39 s to 99 s, 100 after.
        let s: Vec<(f64, f64)> = (0..=200)
            .map(|i| {
                let t = i as f64 * 0.5;
                (t, if t < 39.0 { 1.0 } else if t < 99.0 { if i % 2 == 0 { 3.0 } else { 0.0 } } else { 100.0 })
            })
            .collect();
        // Window (39, 99): only 3s and skipped zeros.
        assert_eq!(steady_state_rate(&s, 60.0), Some(3.0));
        assert_eq!(steady_state_rate(&[], 60.0), None);
    }

    #[test]
    fn jain_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), Some(1.0));
        assert!((jain_index(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        let j = jain_index(&[30.0, 10.0]).unwrap();
        assert!((j - 0.8).abs() < 1e-12, "{j}");
        assert_eq!(jain_index(&[]), None);
    }
}
