//! Load transients (Järvinen & Kojo, "Evaluating CoDel, PIE, and HRED AQM Techniques with
//! Load Transients"; algorithms.md 4.3): a group of `flows` simultaneous finite TCP
//! transfers splitting `total` bytes, all opening their connections at one instant,
//! start + U(0, start_jitter), drawn once per group from the stream `transient/<name>`.
//!
//! The engine runs a group's transfers as ordinary flows (with series, named
//! `<group>-<k>`), reported under `transients[]` instead of `flows[]`.
//!
//! Response time, as the paper defines it: from the group's first SYN to the last ACK of
//! its last flow, i.e. until the last sender has its final byte acknowledged (the sender
//! learning that everything was delivered). Each flow's FCT is measured the same way, from
//! its SYN to its last ACK.

use crate::rng::Stream;
use crate::time::Time;
use serde::Serialize;

/// A load-transient group of a run: its start and its flows (a range of endpoint ids, TCP
/// flows all).
pub struct TransientGroup {
    pub name: String,
    pub start: Time,
    pub flows: std::ops::Range<usize>,
}

/// When a group opens its connections: `start` + U(0, `jitter`).
pub fn group_start(seed: u64, name: &str, start: Time, jitter: Time) -> Time {
    let u = Stream::new(seed, &format!("transient/{name}")).uniform();
    start + Time((u * jitter.0 as f64) as u64)
}

/// Bytes of each of `flows` transfers splitting `total`: `total / flows`, the remainder
/// spread one byte each over the first flows so the group carries exactly `total`.
pub fn split(total: u64, flows: u32) -> impl Iterator<Item = u64> {
    let (each, rest) = (total / flows as u64, total % flows as u64);
    (0..flows as u64).map(move |k| each + u64::from(k < rest))
}

/// A group in `summary.json` → `transients[]`.
#[derive(Clone, Debug, Serialize)]
pub struct TransientSummary {
    pub name: String,
    /// The instant the group's flows sent their SYNs.
    pub start_s: f64,
    /// First SYN to the last ACK of the group's last flow; null unless every flow finished.
    pub response_s: Option<f64>,
    /// Per flow, SYN to its last ACK; null for a flow unfinished at the end of the run.
    pub fct_s: Vec<Option<f64>>,
}

impl TransientSummary {
    /// `completed`: when each flow's sender had its last byte acknowledged.
    pub fn of(name: &str, start: Time, completed: impl Iterator<Item = Option<Time>>) -> TransientSummary {
        let fct: Vec<Option<Time>> = completed.map(|c| c.map(|c| c - start)).collect();
        let all: Option<Vec<Time>> = fct.iter().copied().collect();
        TransientSummary {
            name: name.to_string(),
            start_s: start.as_secs_f64(),
            response_s: all.and_then(|a| a.into_iter().max()).map(Time::as_secs_f64),
            fct_s: fct.iter().map(|f| f.map(Time::as_secs_f64)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_the_total() {
        assert_eq!(split(360_000, 4).collect::<Vec<_>>(), vec![90_000; 4]);
        assert_eq!(split(10, 4).collect::<Vec<_>>(), vec![3, 3, 2, 2]);
    }

    #[test]
    fn response_needs_every_flow() {
        let s = Time::from_secs(1);
        let r = TransientSummary::of("g", s, [Some(Time::from_secs(3)), Some(Time::from_secs(2))].into_iter());
        assert_eq!((r.response_s, r.fct_s.clone()), (Some(2.0), vec![Some(2.0), Some(1.0)]));
        let r = TransientSummary::of("g", s, [Some(Time::from_secs(3)), None].into_iter());
        assert_eq!(r.response_s, None);
    }
}
