//! The tc parameters shared by the SCE qdiscs of chromi/sce (`cnq_codel_af`,
//! `twin_codel_af`, `lfq_cobalt`): CAKE's netlink attributes (`TCA_CAKE_BASE_RATE64`, `_RTT`,
//! `_TARGET`, `_SCE`, `_OVERHEAD`, `_MPU`, `_ATM`, `_RAW`, lfq also `_MEMORY`) as the SCE
//! fork's tc (`q_cnq_cobalt.c`, `cnq_parse_opt`) writes them, and how each qdisc's `change`
//! function turns them into COBALT-SCE parameters.

use super::cobalt::SceParams;
use super::shaper::{self, Compensation, CompensationParser};
use super::{Args, Param, Value};
#[cfg(test)]
use super::Params;
#[cfg(test)]
use crate::params::parse_args;
#[cfg(test)]
use crate::profile::Stack;
use crate::time::{Rate, Time};

/// Parsed tc parameters of an SCE qdisc.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SceTc {
    /// `bandwidth RATE` (`None`: unlimited, the default).
    pub bandwidth: Option<Rate>,
    pub comp: Compensation,
    /// `rtt TIME` or a preset: (interval, target = rtt / 20), sent as `TCA_CAKE_RTT` and
    /// `TCA_CAKE_TARGET`.
    pub rtt: Option<(Time, Time)>,
    /// `sce-thresh N` (1..=1024), `sce` (1) or `no-sce` (0): `TCA_CAKE_SCE`.
    pub sce: Option<u32>,
    /// `memlimit SIZE` (lfq_cobalt only): `TCA_CAKE_MEMORY`.
    pub memlimit: Option<u64>,
}

/// The packet bound of the three SCE qdiscs: `sch->limit = 10240`, as `cnq_init` (chromi/sce
/// `sch_twin_codel_af.c`, stored file 14002178221) and `lfq_init` (`sch_lfq_cobalt.c`,
/// 14009602287) set it, CAKE's value. Their enqueue functions never check it: the kernel
/// queue grows until memory runs out (issue 14: 1 GB and 5 M packets after 1 s of 1-byte
/// UDP at 100 Mbit/s). The model enforces it, and a byte bound of [`byte_limit`], dropping
/// the arriving packet (an overlimit drop); below the bounds nothing changes.
pub const PACKET_LIMIT: usize = 10240;

/// The byte bound that goes with [`PACKET_LIMIT`]: CAKE's cap on its own buffer,
/// `max(sch->limit × psched_mtu, memlimit)` (`cake_reconfigure`), which the SCE qdiscs'
/// shared CAKE code base suggests and which only applies where the kernel would grow without
/// bound.
pub fn byte_limit(mtu: u32, memlimit: Option<u64>) -> u64 {
    (PACKET_LIMIT as u64 * mtu as u64).max(memlimit.unwrap_or(0))
}

/// `sce-thresh N` (1..=1024), `sce` (1) or `no-sce` (0).
const SCE_THRESH: Param = Param::new("sce-thresh", crate::params::Type::Uint { min: 1, max: 1024 }, Value::Unset)
    .words(&[("sce", Value::Uint(1)), ("no-sce", Value::Uint(0))])
    .doc("SCE interval = CE interval / N; 0 (no-sce): SCE marking off; unset: the qdisc's default");

/// The parameters of `cnq_codel_af` and `twin_codel_af`.
pub const PARAMS: &[Param] = &[
    shaper::BANDWIDTH,
    shaper::rtt(Value::Unset),
    SCE_THRESH,
    shaper::OVERHEAD,
    shaper::MPU,
    shaper::ATM,
    shaper::FRAMING,
    shaper::VIA_ETHERNET,
];

/// The parameters of `lfq_cobalt` (also `memlimit`).
pub const PARAMS_LFQ: &[Param] = &[
    shaper::BANDWIDTH,
    shaper::rtt(Value::Unset),
    SCE_THRESH,
    shaper::MEMLIMIT,
    shaper::OVERHEAD,
    shaper::MPU,
    shaper::ATM,
    shaper::FRAMING,
    shaper::VIA_ETHERNET,
];

/// `KIND [bandwidth RATE | unlimited] [rtt TIME | PRESET] [sce | no-sce | sce-thresh N]
/// [overhead N | conservative | raw | FRAMING] [mpu N] [atm | ptm | noatm]` (and
/// `[memlimit SIZE]` when `memlimit` is true), as `cnq_parse_opt` (for the unit tests; the
/// qdiscs parse through their [`QdiscKind`](super::QdiscKind)).
#[cfg(test)]
pub fn parse(p: &mut Params, memlimit: bool) -> Result<SceTc, String> {
    let (kind, params) = if memlimit { ("lfq_cobalt", PARAMS_LFQ) } else { ("cnq_codel_af", PARAMS) };
    Ok(SceTc::from_args(&parse_args(kind, params, p, Stack::Linux)?))
}

impl SceTc {
    /// The parameters of `a` (a table of [`PARAMS`] or [`PARAMS_LFQ`]).
    pub fn from_args(a: &Args) -> SceTc {
        SceTc {
            bandwidth: a.rate_opt("bandwidth"),
            comp: CompensationParser::from_args(a),
            rtt: a.time_opt("rtt").map(shaper::rtt_pair),
            sce: a.uint_opt("sce-thresh").map(|n| n as u32),
            memlimit: if a.has("memlimit") { a.bytes_opt("memlimit") } else { None },
        }
    }
    /// Shaper rate in bytes per second (0: unlimited).
    pub fn bytes_per_sec(&self) -> u64 {
        self.bandwidth.map_or(0, |r| r.bits_per_sec() / 8)
    }

    /// `cnq_change` / `lfq_change` applied to `p`: `rtt` sets the CE interval (at least 1 ns)
    /// and BLUE's threshold to 4 intervals; the target sets the CE target (at least 1 ns) and
    /// the SCE target to half of it, rounded up; `sce-thresh N` sets the SCE interval to the
    /// CE interval / N (at least 1 ns), 0 turns SCE marking off.
    pub fn apply(&self, mut p: SceParams) -> SceParams {
        if let Some((interval, target)) = self.rtt {
            p.ce_interval = interval.max(Time(1));
            p.blue_thresh = Time(p.ce_interval.0 * 4);
            p.ce_target = target.max(Time(1));
            p.sce_target = Time(p.ce_target.0.div_ceil(2));
        }
        if let Some(n) = self.sce {
            p.sce_interval = (n > 0).then(|| Time(p.ce_interval.0 / n as u64).max(Time(1)));
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tc(s: &str, memlimit: bool) -> Result<SceTc, String> {
        let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        parse(&mut Params::new("lfq_cobalt", &tokens), memlimit)
    }

    #[test]
    fn sce_thresh_divides_the_ce_interval_and_rtt_sets_targets() {
        let d = SceParams::new();
        let p = tc("sce-thresh 4", false).unwrap().apply(d);
        assert_eq!(p.sce_interval, Some(Time::from_millis(25)));
        let p = tc("sce-thresh 8", false).unwrap().apply(d);
        assert_eq!(p.sce_interval, Some(Time::from_micros(12_500)));
        assert_eq!(tc("sce", false).unwrap().apply(d).sce_interval, Some(Time::from_millis(100)));
        assert_eq!(tc("sce no-sce", false).unwrap().apply(d).sce_interval, None);
        let p = tc("rtt 20ms sce-thresh 4", false).unwrap().apply(d);
        assert_eq!((p.ce_interval, p.ce_target, p.sce_target), (Time::from_millis(20), Time::from_millis(1), Time::from_micros(500)));
        assert_eq!((p.blue_thresh, p.sce_interval), (Time::from_millis(80), Some(Time::from_millis(5))));
        // Unchanged without parameters.
        assert_eq!(tc("", false).unwrap().apply(d), d);
    }

    #[test]
    fn errors_name_the_parameter() {
        assert!(tc("sce-thresh 0", false).unwrap_err().contains("sce-thresh"));
        assert!(tc("sce-thresh 2000", false).unwrap_err().contains("sce-thresh"));
        assert!(tc("bandwidth fast", false).unwrap_err().contains("bandwidth"));
        let e = tc("memlimit 1mb", false).unwrap_err();
        assert!(e.contains("'memlimit'"), "{e}");
        assert_eq!(tc("memlimit 1mb", true).unwrap().memlimit, Some(1 << 20));
        assert!(tc("target 5ms", false).unwrap_err().contains("'target'"));
    }
}
