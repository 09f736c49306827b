//! Study metrics from `heistp/l4s-tests:steady_state.go` (algorithms.md 5.1 and 5.2).

/// The interval `(from_s, to_s)` (open at both ends) over which D_SS averages a flow's
/// delivery-rate samples, given the times of its first and last sample.
///
/// `window_s = Some(w)` is l4s-tests' definition: the `w` seconds before `t_last - 1 s`
/// (`steady_state.go`; the suites give `w` = 60 s on 180 s runs).
///
/// `None` (the default, `steady_window = "auto"`) scales the same shape to the flow's life
/// `L = t_last - t_first`, so that a short run does not average its slow start: the tail cut
/// is `e = min(1 s, L / 10)` and the window `w = min(60 s, (L - e) / 2)`, i.e. the second half
/// of the flow's life before the cut. On a 180 s flow this is l4s-tests' window; on a 30 s
/// flow it is (14.5 s, 29 s) after the start, well past slow start at any RTT the studies use.
pub fn steady_window(t_first: f64, t_last: f64, window_s: Option<f64>) -> (f64, f64) {
    match window_s {
        Some(w) => (t_last - w - 1.0, t_last - 1.0),
        None => {
            let life = (t_last - t_first).max(0.0);
            let cut = (life / 10.0).min(1.0);
            let w = ((life - cut) / 2.0).min(60.0);
            (t_last - cut - w, t_last - cut)
        }
    }
}

/// How far back from the latest sample a steady-state window ([`steady_window`]) can reach,
/// with a second of margin: auto windows are at most 60 s long and end at most 1 s before
/// the last sample, a fixed window `w` ends 1 s before it. A flow keeps only its samples this
/// recent (the last sample is at least as late as any sample kept), so its memory is flat in
/// the simulated duration.
pub fn steady_horizon(window_s: Option<f64>) -> f64 {
    window_s.map_or(60.0, |w| w.max(0.0)) + 2.0
}

/// Steady-state delivery rate D_SS: the arithmetic mean of the non-zero samples with
/// `from_s < t < to_s` ([`steady_window`]). `samples` are (time in s, rate), any iterable of
/// them (a flow's ring of kept samples is read in place); returns `None` when the window holds
/// no sample.
pub fn steady_state_rate<'a>(samples: impl IntoIterator<Item = &'a (f64, f64)>, (from_s, to_s): (f64, f64)) -> Option<f64> {
    let (sum, n) = samples
        .into_iter()
        .filter(|&&(t, v)| t > from_s && t < to_s && v != 0.0 && v.is_finite())
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
        assert_eq!(steady_window(0.0, 100.0, Some(60.0)), (39.0, 99.0));
        assert_eq!(steady_state_rate(&s, (39.0, 99.0)), Some(3.0));
        assert_eq!(steady_state_rate(&[], (39.0, 99.0)), None);
    }

    #[test]
    fn auto_window_is_the_second_half_of_the_flow_life_before_the_tail_cut() {
        // l4s-tests' 180 s runs: the same window as the fixed 60 s.
        assert_eq!(steady_window(0.0, 180.0, None), steady_window(0.0, 180.0, Some(60.0)));
        // A 30 s flow: cut 1 s, w = 14.5 s -> (14.5, 29); slow start (the first seconds) is out.
        assert_eq!(steady_window(0.0, 30.0, None), (14.5, 29.0));
        // A flow starting at 10 s of a 30 s run: life 20 s -> w 9.5 s -> (19.5, 29).
        assert_eq!(steady_window(10.0, 30.0, None), (19.5, 29.0));
        // A 2 s run: cut 0.2 s, w 0.9 s -> (0.9, 1.8).
        let (a, b) = steady_window(0.0, 2.0, None);
        assert!((a - 0.9).abs() < 1e-12 && (b - 1.8).abs() < 1e-12, "{a} {b}");
        // Long runs keep 60 s ending 1 s before the end.
        assert_eq!(steady_window(0.0, 1000.0, None), (939.0, 999.0));
    }

    #[test]
    fn jain_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), Some(1.0));
        assert!((jain_index(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        let j = jain_index(&[30.0, 10.0]).unwrap();
        assert!((j - 0.8).abs() < 1e-12, "{j}");
        assert_eq!(jain_index(&[]), None);
    }

    /// No window reaches further back from the last sample than `steady_horizon` less its
    /// one second of margin, whatever the flow's life and the window asked for.
    #[test]
    fn windows_stay_within_the_horizon() {
        for w in [None, Some(0.0), Some(0.5), Some(5.0), Some(60.0), Some(300.0)] {
            for life in [0.0, 0.3, 1.0, 9.99, 10.0, 61.0, 121.0, 500.0, 1e5] {
                let first = 3.25;
                let last = first + life;
                let (from, _) = steady_window(first, last, w);
                assert!(from >= last - (steady_horizon(w) - 1.0), "window {w:?} life {life}: from {from}");
            }
        }
    }
}
