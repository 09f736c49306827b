//! aqmlab-sim: a deterministic packet-level simulator of a dumbbell bottleneck, its queue
//! discipline and the TCP flows through it, modelled on Linux.
//!
//! See `docs/architecture.md` for what each module owns and how a packet moves.

pub mod apps;
pub mod build;
pub mod cc;
pub mod endpoint;
pub mod event;
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
    let mut sc = Scenario::from_toml(text, overrides)?;
    if let Some(s) = seed {
        sc.seed = s;
    }
    Ok(Simulation::new(&sc).run())
}
