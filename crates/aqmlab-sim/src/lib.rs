//! aqmlab-sim: a deterministic packet-level simulator of a dumbbell bottleneck, its queue
//! discipline and the TCP flows through it, modelled on Linux.
//!
//! See `docs/architecture.md` for what each module owns and how a packet moves.

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
pub fn run_toml(text: &str, seed: Option<u64>, overrides: &[String]) -> Result<RunOutput, ScenarioError> {
    Ok(prepare(text, seed, overrides, None)?.run())
}

/// [`run_toml`] writing a packet capture (`capture`) and with a progress/cancellation hook:
/// `tick(fraction of simulated time done)` is called once per sampling step (see
/// [`Simulation::run_with`]); returning `false` cancels the run, which then yields `Ok(None)`.
/// A bad capture request (an unknown flow name, a file that cannot be created) is a
/// `ScenarioError` on key `capture`.
pub fn run_toml_with(
    text: &str,
    seed: Option<u64>,
    overrides: &[String],
    capture: Option<&capture::CaptureSpec>,
    tick: impl FnMut(f64) -> bool,
) -> Result<Option<RunOutput>, ScenarioError> {
    Ok(prepare(text, seed, overrides, capture)?.run_with(tick))
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
}
