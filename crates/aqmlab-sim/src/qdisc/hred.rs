//! Harsh RED (HRED; Järvinen, Ding, Nyrhinen & Kojo, "Harsh RED: Improving RED for Limited
//! Aggregate Traffic", IEEE AINA 2012): RED with a packet-based average and thresholds, a
//! small min_th, a large max_p and a fast average (w_q 0.02 or 0.04), so that the slow start
//! of a few flows is signalled in time instead of ending in tail drop.
//!
//! HRED is RED with different parameters and units, so it runs on the shared RED machinery of
//! [`super::red`] (count-based marking with a cached random number, ECN/harddrop/nodrop
//! actions, idle handling, FIFO child). Only the average differs: here it is a real-valued
//! EWMA of the queue length in packets, as in ns-2's `REDQueue` (the simulator the HRED
//! papers used), with an optional "gentle" ramp above max_th (Floyd, "Optimum functions for
//! computing the drop probability", http://icir.org/floyd/red/gentle.html).

use super::red::{self, Average, Backlog, Flags, Red, Zone};
use super::{Args, BuildCtx, Param, Qdisc, QdiscConfig, QdiscKind, Type, Value};
use crate::profile::Stack;
use crate::time::{Rate, Time};
use crate::units::Limit;
use std::sync::Arc;

/// The packet-based, real-valued RED average (ns-2 `REDQueue::estimator`, `calculate_p_new`).
#[derive(Clone, Debug)]
pub(super) struct PacketAverage {
    /// Average queue length, packets.
    pub avg: f64,
    w: f64,
    min: f64,
    max: f64,
    max_p: f64,
    gentle: bool,
    /// Packets of `avpkt` bytes the link sends per second (ns-2 `ptc`), for idle decay.
    ptc: f64,
}

impl PacketAverage {
    /// Floyd's Pb for the current average: 0 .. max_p linearly from min_th to max_th; with
    /// gentle, max_p .. 1 from max_th to 2 max_th; 1 beyond.
    pub fn pb(&self) -> f64 {
        let a = self.avg;
        if a < self.min {
            0.0
        } else if a < self.max {
            self.max_p * (a - self.min) / (self.max - self.min)
        } else if self.gentle {
            (self.max_p + (1.0 - self.max_p) * (a - self.max) / self.max).min(1.0)
        } else {
            1.0
        }
    }
}

impl Average for PacketAverage {
    fn update(&mut self, backlog: Backlog) {
        self.avg = self.avg * (1.0 - self.w) + self.w * backlog.packets as f64;
    }
    /// ns-2: the idle time counts as m = floor(idle * ptc) arrivals to an empty queue, then
    /// the arrival's own update: avg (1-w)^m, then the usual EWMA step.
    fn update_after_idle(&mut self, idle: Time, backlog: Backlog) {
        let m = (self.ptc * idle.as_secs_f64()).floor().min(i32::MAX as f64) as i32;
        self.avg *= (1.0 - self.w).powi(m);
        self.update(backlog);
    }
    fn zone(&self) -> Zone {
        let hard = if self.gentle { 2.0 * self.max } else { self.max };
        if self.avg < self.min {
            Zone::Below
        } else if self.avg >= hard {
            Zone::Above
        } else {
            Zone::Between
        }
    }
    fn draw(&self, r: u32) -> u64 {
        r as u64
    }
    fn reached(&self, count: u64, q_r: u64) -> bool {
        // Pb * count >= U with U = q_r / 2^32 uniform in [0, 1).
        self.pb() * count as f64 * 4294967296.0 >= q_r as f64
    }
    /// ns-2: avg >= 2 max_th (gentle) or >= max_th is a forced drop, ECN or not.
    const HARD_REGION_DROPS: bool = true;
    /// ns-2's link dequeues an empty queue when it goes idle, starting RED's idle period.
    const DEQUEUES_WHEN_EMPTY: bool = true;
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("qavg", self.avg));
        out.push(("pb", self.pb()));
    }
}

/// Parsed `hred` parameters.
#[derive(Clone, Debug, PartialEq)]
struct HredConfig {
    limit: u32,
    min: f64,
    max: f64,
    wq: f64,
    max_p: f64,
    gentle: bool,
    avpkt: u32,
    /// Defaults to the link rate.
    bandwidth: Option<Rate>,
    flags: Flags,
}

impl Default for HredConfig {
    /// The load-transient study's setting (the table's defaults).
    fn default() -> Self {
        HredConfig::from_args(&HRED.defaults(Stack::Linux)).expect("the defaults are valid")
    }
}

impl HredConfig {
    fn average(&self, link_rate: Rate) -> PacketAverage {
        let bw = self.bandwidth.unwrap_or(link_rate);
        PacketAverage {
            avg: 0.0,
            w: self.wq,
            min: self.min,
            max: self.max,
            max_p: self.max_p,
            gentle: self.gentle,
            ptc: bw.bits_per_sec() as f64 / (8.0 * self.avpkt as f64),
        }
    }
}

impl QdiscConfig for HredConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(Red::new(HRED.name, self.average(ctx.link_rate), self.flags, Limit::Packets(self.limit), ctx.rng.clone()))
    }
}

impl HredConfig {
    fn from_args(a: &Args) -> Result<HredConfig, String> {
        let c = HredConfig {
            limit: a.u32("limit"),
            min: a.real("min"),
            max: a.real("max"),
            wq: a.real("wq"),
            max_p: a.real("max_p"),
            gentle: a.flag("gentle"),
            avpkt: a.u32("avpkt"),
            bandwidth: a.rate_opt("bandwidth"),
            flags: Flags::from_args(a),
        };
        if c.max <= c.min {
            return Err(a.invalid(format!("max {} must be above min {}", c.max, c.min)));
        }
        if c.wq <= 0.0 {
            return Err(a.invalid("wq must be above 0"));
        }
        if c.max_p <= 0.0 {
            return Err(a.invalid("max_p must be above 0"));
        }
        c.flags.validate().map_err(|e| a.invalid(e))?;
        Ok(c)
    }
}

const fn real(name: &'static str, max: f64, default: f64) -> Param {
    Param::new(name, Type::Real { min: 0.0, max }, Value::Real(default))
}

/// `hred [limit PACKETS] [min PACKETS] [max PACKETS] [wq W] [max_p P] [gentle|nogentle]
/// [ecn] [harddrop] [nodrop] [avpkt BYTES] [bandwidth RATE]`. Defaults: the load-transient
/// study's setting (limit 100, min 3, max 40, wq 0.02, max_p 0.65), gentle on, ECN off;
/// avpkt 500 B for the idle rule (ns-2 `Queue/RED set mean_pktsize_ 500`, ns-default.tcl).
pub const HRED: QdiscKind = QdiscKind {
    name: "hred",
    doc: "ns-2 RED in packets (gentle, idle-time decay), as the load-transient study ran it",
    params: &[
        Param::uint("limit", 1, u32::MAX as u64, 100).unit("packets").doc("buffer limit"),
        real("min", 1e9, 3.0).unit("packets").doc("minimum threshold of the average queue"),
        real("max", 1e9, 40.0).unit("packets").doc("maximum threshold, above min"),
        real("wq", 1.0, 0.02).doc("weight of the average (above 0)"),
        real("max_p", 1.0, 0.65).doc("marking probability at max (above 0)"),
        Param::flag("gentle", true).words(&[("nogentle", Value::Bool(false))]).doc("probability rises to 1 between max and 2 max"),
        red::ECN,
        red::HARDDROP,
        red::NODROP,
        Param::uint("avpkt", 1, u32::MAX as u64, 500).unit("bytes").doc("mean packet size for the idle-time rule"),
        Param::new("bandwidth", Type::Rate, Value::Unset).doc("rate for the idle-time rule; unset: the link rate"),
    ],
    build: |a| Ok(Arc::new(HredConfig::from_args(a)?)),
};

#[cfg(test)]
mod tests {
    use super::super::red::tests::pkt;
    use super::super::red::Verdict;
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::{Enqueued, QdiscSpec};
    use crate::rng::Stream;

    fn spec(s: &str) -> String {
        format!("{:?}", QdiscSpec::parse(s).unwrap())
    }

    fn hred(c: &HredConfig) -> Red<PacketAverage> {
        Red::new("hred", c.average(Rate(2_000_000)), c.flags, Limit::Packets(c.limit), Stream::new(3, "hred-test"))
    }

    #[test]
    fn parameters_defaults_and_errors() {
        assert_eq!(spec("hred"), format!("Spec {{ text: \"hred\", config: {:?} }}", HredConfig::default()));
        let s = spec("hred limit 50 min 5 max 30 wq 0.04 max_p 0.5 nogentle ecn avpkt 1500 bandwidth 2Mbit");
        assert!(s.contains("limit: 50, min: 5.0, max: 30.0, wq: 0.04, max_p: 0.5, gentle: false, avpkt: 1500, bandwidth: Some(Rate(2000000))"), "{s}");
        assert!(s.contains("ecn: true"), "{s}");
        let t: toml::Table = toml::from_str("kind = \"hred\"\nwq = 0.04\ngentle = false").unwrap();
        assert!(format!("{:?}", QdiscSpec::from_table(&t).unwrap()).contains("wq: 0.04, max_p: 0.65, gentle: false"));
        let err = |s: &str| QdiscSpec::parse(s).unwrap_err();
        assert!(err("hred min 50 max 40").contains("max 40 must be above min 50"));
        assert!(err("hred wq 0").contains("wq"));
        assert!(err("hred max_p 1.5").contains("max_p"));
        assert!(err("hred adaptive").contains("'adaptive'"));
        assert!(err("hred limit 0").contains("limit"));
        assert!(err("hred nodrop").contains("nodrop"));
    }

    #[test]
    fn gentle_ramp_and_hard_threshold() {
        let mut a = HredConfig::default().average(Rate(2_000_000));
        let mut at = |avg: f64| {
            a.avg = avg;
            (a.zone(), a.pb())
        };
        assert_eq!(at(2.9), (Zone::Below, 0.0));
        assert_eq!(at(3.0), (Zone::Between, 0.0));
        let (z, pb) = at(21.5);
        assert_eq!(z, Zone::Between);
        assert!((pb - 0.65 * 18.5 / 37.0).abs() < 1e-12);
        // Gentle: max_p at max_th, rising linearly to 1 at 2 max_th.
        let (z, pb) = at(40.0);
        assert_eq!(z, Zone::Between);
        assert!((pb - 0.65).abs() < 1e-12);
        let (_, pb) = at(60.0);
        assert!((pb - 0.825).abs() < 1e-12);
        let (_, pb) = at(79.9);
        assert!((pb - (0.65 + 0.35 * 39.9 / 40.0)).abs() < 1e-12);
        assert_eq!(at(80.0).0, Zone::Above);
        // Without gentle, max_th is the hard threshold.
        let mut a = HredConfig { gentle: false, ..HredConfig::default() }.average(Rate(2_000_000));
        a.avg = 39.99;
        assert_eq!(a.zone(), Zone::Between);
        a.avg = 40.0;
        assert_eq!(a.zone(), Zone::Above);
    }

    /// The shared count-based marking with a real Pb: the c-th packet after a mark is marked
    /// with probability Pb / (1 - (c-1) Pb); in the gentle region (Pb 0.825) every mark gap is
    /// 1 (probability 0.825) or 2.
    #[test]
    #[allow(clippy::needless_range_loop)]
    fn marking_in_the_linear_and_gentle_regions() {
        for (avg, pb) in [(21.5, 0.325), (60.0, 0.825)] {
            let mut q = hred(&HredConfig::default());
            q.avg.avg = avg;
            assert_eq!(q.action(), Verdict::DontMark, "first packet in the region only draws");
            let (mut gaps, mut since) = (vec![0u64; 8], 0usize);
            let n = 200_000;
            for _ in 0..n {
                since += 1;
                if q.action() == Verdict::ProbMark {
                    gaps[since.min(7)] += 1;
                    since = 0;
                }
            }
            let m: u64 = gaps.iter().sum();
            let mut at_risk = m as f64;
            for c in 1..=((1.0 / pb) as usize).min(4) {
                let want = (pb / (1.0 - (c - 1) as f64 * pb)).min(1.0);
                let got = gaps[c] as f64 / at_risk;
                assert!((got - want).abs() < 0.01, "avg {avg} c {c}: {got} vs {want}");
                at_risk -= gaps[c] as f64;
            }
            assert!(gaps[(1.0 / pb) as usize + 2..].iter().all(|&g| g == 0), "{gaps:?}");
        }
    }

    /// avg <- (1 - wq) avg + wq q on each arrival, q in packets before the arrival; after an
    /// idle period t, avg (1-wq)^floor(t ptc) first (ns-2), ptc = bandwidth / (8 avpkt) with
    /// ns-2's default mean_pktsize_ of 500 B.
    #[test]
    fn packet_average_and_idle_decay() {
        let c = HredConfig::default();
        assert_eq!(c.avpkt, 500, "ns-2 Queue/RED mean_pktsize_");
        let mut q = hred(&c);
        let mut want = 0.0f64;
        for k in 0..30u32 {
            let before = q.len();
            q.enqueue(pkt(1514, Ecn::NotEct), Time::from_micros(k as u64));
            want = want * 0.98 + 0.02 * before as f64;
            assert_eq!(q.avg.avg, want, "arrival {k}");
        }
        while q.len() > 0 {
            q.dequeue(Time::from_millis(1));
        }
        assert!(q.dequeue(Time::from_millis(2)).is_none());
        // 2 Mbit/s, 500 B: ptc 500 packets/s; 101 ms idle = 50.5 -> 50 dummy arrivals.
        q.enqueue(pkt(1514, Ecn::NotEct), Time::from_millis(103));
        let expect = want * 0.98f64.powi(50) * 0.98;
        assert!((q.avg.avg - expect).abs() < 1e-12 * want, "{} vs {expect}", q.avg.avg);
        // An explicit avpkt 1000 halves ptc: 25 dummy arrivals.
        let mut q = hred(&HredConfig { avpkt: 1000, ..c });
        q.enqueue(pkt(1514, Ecn::NotEct), Time::ZERO);
        q.avg.avg = 10.0;
        let a0 = q.avg.avg;
        q.dequeue(Time::from_millis(1));
        assert!(q.dequeue(Time::from_millis(2)).is_none());
        q.enqueue(pkt(1514, Ecn::NotEct), Time::from_millis(103));
        assert!((q.avg.avg - a0 * 0.98f64.powi(26)).abs() < 1e-12, "{} vs {}", q.avg.avg, a0 * 0.98f64.powi(26));
    }

    /// ns-2 `REDQueue::enque`: in the forced region (avg >= 2 max_th with gentle, >= max_th
    /// without) every arrival is a DTYPE_FORCED drop, even an ECT one with ECN on (only
    /// `drop_early` looks at setbit_). Linux RED would CE-mark it instead.
    #[test]
    fn forced_region_drops_ect_packets_even_with_ecn() {
        for gentle in [true, false] {
            let c = HredConfig { gentle, flags: Flags { ecn: true, ..Flags::default() }, ..HredConfig::default() };
            let mut q = hred(&c);
            // Each arrival's own EWMA step takes 2 % off; all three stay in the forced region.
            q.avg.avg = if gentle { 100.0 } else { 50.0 };
            for e in [Ecn::Ect0, Ecn::Ect1, Ecn::NotEct] {
                assert_eq!(q.enqueue(pkt(1514, e), Time::ZERO), Enqueued::Dropped, "gentle {gentle} {e:?}");
            }
            assert_eq!((q.red.forced_drop, q.red.forced_mark, q.stats().ce_marks, q.len()), (3, 0, 0, 0));
        }
        // The probabilistic region still marks ECT packets with ECN.
        let c = HredConfig { flags: Flags { ecn: true, ..Flags::default() }, ..HredConfig::default() };
        let mut q = hred(&c);
        q.avg.avg = 79.0;
        let mut marked = 0;
        for _ in 0..50 {
            q.avg.avg = 79.0;
            if q.enqueue(pkt(1514, Ecn::Ect0), Time::ZERO) == Enqueued::Queued {
                marked += (q.dequeue(Time::ZERO).unwrap().ecn == Ecn::Ce) as u32;
            }
        }
        assert!(marked > 20 && q.red.prob_mark == marked as u64 && q.red.prob_drop == 0, "{marked}");
    }

    #[test]
    fn ecn_marks_and_drops_at_packet_thresholds() {
        let c = HredConfig { flags: Flags { ecn: true, ..Flags::default() }, limit: 5, ..HredConfig::default() };
        let mut q = hred(&c);
        q.avg.avg = 100.0; // above 2 max_th: forced drops, ECT or not (ns-2)
        for _ in 0..3 {
            assert_eq!(q.enqueue(pkt(1514, Ecn::Ect0), Time::ZERO), Enqueued::Dropped);
        }
        assert_eq!(q.enqueue(pkt(1514, Ecn::NotEct), Time::ZERO), Enqueued::Dropped);
        assert_eq!((q.stats().ce_marks, q.red.forced_mark, q.red.forced_drop), (0, 0, 4));
        // The packet limit of the child FIFO.
        q.avg.avg = 0.0;
        for _ in 0..5 {
            q.enqueue(pkt(66, Ecn::NotEct), Time::ZERO);
        }
        assert_eq!(q.enqueue(pkt(66, Ecn::NotEct), Time::ZERO), Enqueued::Dropped);
        assert_eq!((q.len(), q.red.pdrop, q.stats().drops, q.stats().overlimits), (5, 1, 5, 1));
        let mut out = Vec::new();
        q.xstats(&mut out);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec!["qavg", "pb"]);
    }
}
