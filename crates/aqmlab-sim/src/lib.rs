//! aqmlab-sim: a deterministic packet-level simulator of a dumbbell bottleneck, its queue
//! discipline and the TCP flows through it, modelled on Linux.
//!
//! See `docs/architecture.md` for what each module owns and how a packet moves.

/// Layout tests: the `(offset, size)` in bytes of each named field of `$ty`, each offset
/// plus `$base` (where that `$ty` lies in the struct the test measures; `0` for the struct
/// itself).
#[cfg(test)]
macro_rules! field_spans {
    ($ty:ty, $base:expr; $($f:ident),* $(,)?) => {{
        fn size<F>(_: fn(&$ty) -> &F) -> usize {
            std::mem::size_of::<F>()
        }
        [$(($base + std::mem::offset_of!($ty, $f), size(|s| &s.$f))),*]
    }};
}

pub mod apps;
pub mod build;
pub mod capture;
pub mod cc;
pub mod endpoint;
pub mod event;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod metrics;
pub mod packet;
pub mod packet_ext;
pub mod params;
pub mod path;
pub mod profile;
pub mod qdisc;
pub mod rng;
pub mod scenario;
pub mod schema;
pub mod sim;
pub mod tcp;
pub mod time;
pub mod units;

pub use scenario::{resolve_toml, Scenario, ScenarioError};
pub use sim::{RunOutput, Simulation};
pub use time::{Rate, Time};

/// Parses a scenario (with `--set` overrides and an optional seed override) and runs it.
/// A run that reaches a `[limits]` ceiling is a `ScenarioError` on that key (no line).
pub fn run_toml(text: &str, seed: Option<u64>, overrides: &[String]) -> Result<RunOutput, ScenarioError> {
    prepare(text, seed, overrides, None)?.try_run().map_err(limit_error)
}

/// A `[limits]` ceiling reached while running, as the error validation would have given.
fn limit_error(e: sim::LimitExceeded) -> ScenarioError {
    ScenarioError { key: e.key.to_string(), line: None, message: e.message }
}

/// [`run_toml`] writing a packet capture (`capture`) and with a progress/cancellation hook:
/// `tick(fraction of simulated time done)` is called once per sampling step (see
/// [`Simulation::run_with`]); returning `false` cancels the run, which then yields `Ok(None)`.
/// A bad capture request (an unknown flow name, a file that cannot be created) is a
/// `ScenarioError` on key `capture`; a run that reaches a `[limits]` ceiling one on that key.
pub fn run_toml_with(
    text: &str,
    seed: Option<u64>,
    overrides: &[String],
    capture: Option<&capture::CaptureSpec>,
    tick: impl FnMut(f64) -> bool,
) -> Result<Option<RunOutput>, ScenarioError> {
    run_toml_streaming(text, seed, overrides, capture, None, None, tick)
}

/// [`run_toml_with`], handing the series to a sink in chunks of about `n` values while the
/// run goes on when `stream` is `Some((sink, n))` ([`Simulation::stream_series`]): the
/// output's `series` then holds only the ticks after the last chunk. `break_invariant`: the
/// run reports that invariant as violated ([`Simulation::break_invariant`], tests only).
pub fn run_toml_streaming(
    text: &str,
    seed: Option<u64>,
    overrides: &[String],
    capture: Option<&capture::CaptureSpec>,
    stream: Option<(metrics::ChunkSink, usize)>,
    break_invariant: Option<sim::BrokenInvariant>,
    tick: impl FnMut(f64) -> bool,
) -> Result<Option<RunOutput>, ScenarioError> {
    let mut sim = prepare(text, seed, overrides, capture)?;
    if let Some(b) = break_invariant {
        sim.break_invariant(b);
    }
    if let Some((sink, n)) = stream {
        sim.stream_series(sink, n);
    }
    sim.run_with(tick).map_err(limit_error)
}

/// The simulation a scenario text describes, with the seed replaced and the capture set up.
fn prepare(text: &str, seed: Option<u64>, overrides: &[String], capture: Option<&capture::CaptureSpec>) -> Result<Simulation, ScenarioError> {
    let mut sc = Scenario::from_toml(text, overrides)?;
    if let Some(s) = seed {
        sc.seed = s;
    }
    let mut sim = Simulation::new(&sc);
    if let Some(spec) = capture {
        sim.capture(spec).map_err(|message| ScenarioError { key: "capture".into(), line: None, message })?;
    }
    Ok(sim)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CUBIC: &str = r#"
duration = "3s"
[bottleneck]
rate = "20Mbit"
qdisc = "pfifo limit 100"
[[flows]]
cc = "cubic"
rtt = "20ms"
count = 2
"#;

    #[test]
    fn run_with_ticks_monotonically_to_one_and_gives_the_same_run() {
        let plain = run_toml(TWO_CUBIC, None, &[]).unwrap();
        let mut seen = Vec::new();
        let ticked = run_toml_with(TWO_CUBIC, None, &[], None, |f| {
            seen.push(f);
            true
        })
        .unwrap()
        .expect("not cancelled");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert_eq!((seen[0], *seen.last().unwrap()), (0.0, 1.0));
        // One tick per 50 ms sampling step of the 3 s run, plus the final 1.0.
        assert_eq!(seen.len(), 61);
        let strip = |o: &RunOutput| {
            let mut v = serde_json::to_value(&o.summary).unwrap();
            v.as_object_mut().unwrap().remove("wall_seconds");
            v
        };
        assert_eq!(strip(&plain), strip(&ticked));
        assert_eq!(plain.series.time, ticked.series.time);
        // Bit patterns: gaps in a series are NaN.
        let bits = |o: &RunOutput| -> Vec<Vec<u64>> {
            o.series.columns.iter().map(|c| c.values.iter().map(|x| x.to_bits()).collect()).collect()
        };
        assert!(!plain.series.columns.is_empty());
        assert_eq!(bits(&plain), bits(&ticked));
    }

    #[test]
    fn run_with_stops_when_the_tick_says_so() {
        let mut calls = 0;
        let out = run_toml_with(TWO_CUBIC, None, &[], None, |f| {
            calls += 1;
            f < 0.5
        })
        .unwrap();
        assert!(out.is_none());
        assert_eq!(calls, 31, "stopped at the first tick at or past half of the run");
    }
    /// A streaming run hands its series over in chunks no larger than asked for and keeps
    /// only the ticks after the last one; put together they are the plain run's series.
    #[test]
    fn streaming_run_gives_the_same_series_in_bounded_chunks() {
        use std::sync::{Arc, Mutex};
        let plain = run_toml(TWO_CUBIC, None, &["duration=20s".into()]).unwrap();
        let chunks = Arc::new(Mutex::new(Vec::<metrics::SeriesChunk>::new()));
        let sink = chunks.clone();
        let stream: (metrics::ChunkSink, usize) = (Box::new(move |c| sink.lock().unwrap().push(c)), 2_000);
        let out = run_toml_streaming(TWO_CUBIC, None, &["duration=20s".into()], None, Some(stream), None, |_| true).unwrap().unwrap();
        let chunks = chunks.lock().unwrap();
        let cols = plain.series.columns.len();
        assert!(chunks.len() >= 2 && chunks.iter().all(|c| c.values.len() <= 2_000 && c.columns == cols));
        assert_eq!(out.series.first_tick, chunks.iter().map(|c| c.time.len()).sum::<usize>());
        assert!(out.series.time.len() * (cols + 1) <= 2_000 + cols + 1, "kept {} ticks", out.series.time.len());
        let mut time: Vec<f64> = chunks.iter().flat_map(|c| c.time.iter().copied()).collect();
        time.extend(&out.series.time);
        assert_eq!(time, plain.series.time);
        for k in 0..cols {
            let mut v: Vec<u64> = Vec::new();
            for c in chunks.iter() {
                let n = c.time.len();
                v.extend(c.values[k * n..(k + 1) * n].iter().map(|x| x.to_bits()));
            }
            v.extend(out.series.columns[k].values.iter().map(|x| x.to_bits()));
            assert_eq!(v, plain.series.columns[k].values.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "column {k}");
        }
    }

    /// A flow keeps only the rate samples a steady-state window can reach
    /// (`metrics::steady_horizon`): over runs longer than that horizon, auto and fixed
    /// windows, D_SS is still the mean of the window's samples taken from the whole
    /// `delivery_rate` series (the same (t, rate) points, NaN while the flow is inactive).
    #[test]
    fn steady_rate_from_the_kept_samples_equals_the_whole_series() {
        for window in [None, Some("5s")] {
            let mut set = vec!["duration=150s".to_string(), "bottleneck.rate=2Mbit".to_string(), "flows[0].start=7s".to_string()];
            if let Some(w) = window {
                set.push(format!("metrics.steady_window={w}"));
            }
            let out = run_toml(TWO_CUBIC, None, &set).unwrap();
            let w_s = window.map(|_| 5.0);
            for f in &out.summary.flows {
                let col = out.series.get(&f.name, "delivery_rate").unwrap();
                let pts: Vec<(f64, f64)> = (out.series.time.iter().zip(&col.values)).filter(|(_, v)| !v.is_nan()).map(|(&t, &v)| (t, v)).collect();
                assert!(pts.len() > 2_000, "{} samples", pts.len());
                let win = metrics::steady_window(pts[0].0, pts.last().unwrap().0, w_s);
                assert_eq!((f.steady_from_s, f.steady_to_s), (Some(win.0), Some(win.1)));
                let want = metrics::steady_state_rate(&pts, win).unwrap();
                assert_eq!(f.steady_mbps.unwrap().to_bits(), want.to_bits(), "{} window {window:?}", f.name);
            }
        }
    }
}
