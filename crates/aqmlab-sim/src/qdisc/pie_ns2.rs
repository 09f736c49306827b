//! PIE as Cisco's 2013 ns-2 code (`Queue/PIE`, `queue/pie.cc`) ran it: the `pie` kind on the
//! `ns2-2013` profile (Järvinen & Kojo's load-transient study).
//!
//! Source read: the Cisco/CableLabs ns-2 `pie.cc` stored as file id 7219863769 ("Copyright (c)
//! 2013-2014, Cisco Systems, Inc.", with the 2014 DOCSIS additions). The 2013 release that the
//! study ran was not found in any public mirror; this model is that file without its DOCSIS
//! branches and with the two places where the 2014 file visibly changed the 2013 logic put
//! back (see docs/algorithms/pie.md, "ns2-2013"):
//!
//! 1. The quiet-queue reset in `calculate_p` (queue delay below half the target for two
//!    updates and p = 0) discards the departure-rate measurement in progress and the estimate
//!    *also when there is no rate estimate yet*. The 2014 file guards the reset with
//!    `!missing_init_flag` (and leaves a cycle in progress running), Linux (3.14 on, from the
//!    same Cisco team) with `avg_dq_rate > 0`; the study reports the unguarded behaviour: "PIE
//!    with its default rate-estimator parameters at 2 Mbit/s never completes a departure-rate
//!    measurement within one update interval, stays in burst allowance and behaves like a
//!    FIFO" (algorithms.md 4.3). This is the `pie2013r` build of the ns-2 reference
//!    (tools/ns2/README.md: the guard removed, `in_measurement = 0` at the reset).
//!
//! The burst allowance is the 2014 file's: set to `max_burst` by the first arrival that
//! reaches `drop_early` in the NO_BURST state (which then protects), lowered by `tupdate` per
//! update, p held at 0 and no early drop while any is left; after it and two quiet updates
//! the state is IN_BURST, and after more than 1.5 s / tupdate further quiet updates NO_BURST
//! again.
//!
//! Everything else follows the file read: real-valued (double) arithmetic; the queue delay
//! is `queue length / avg_dq_rate` (packets and packets per second with a threshold in
//! packets, bytes and bytes per second with one in bytes), 0 with no estimate; a measurement
//! cycle starts at a dequeue that leaves at least `dq_threshold` queued, counts the dequeued
//! packet, ends after `dq_threshold` (sample = count / elapsed, averaged 1/2 old + 1/2 new,
//! the first sample taken as is) and restarts if more than `dq_threshold` is still queued;
//! the update runs from t = 0 (`sUpdate_ 0`) every `tupdate`, holds p at 0 while burst
//! allowance is left, scales the PI step by p's decade with the 2013 table (/32 below 0.1 %,
//! /8 below 1 %, /2 below 10 %, x2 below 1, x8 below 10, x32 above), caps an increase at 2 %
//! once p >= 10 %, decays by 0.98 after two zero delays and adds 2 % above 200 ms; an
//! arrival is dropped with probability p (one uniform draw, no de-randomisation) unless
//! burst allowance is left, the last update's delay is below half the target with p < 20 %,
//! or at most two mean packets (`mean_pktsize_` 1000 B) are queued; a full queue (`limit`
//! packets) drops the arrival.

use super::{BuildCtx, Enqueued, PacketQueue, Qdisc, QdiscStats};
use super::pie::PieConfig;
use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::Time;
use crate::units::Limit;

/// `mean_pktsize_` as the ns-2 PIE scripts of the period set it (e.g. stored ids 49765358528,
/// 49614146569: `Queue/PIE set mean_pktsize_ 1000`): the "two packets queued" floor of
/// `drop_early` and the byte-mode scaling.
pub(super) const MEAN_PKTSIZE: u64 = 1000;
/// ECN marks only below this probability (`mark_p_ 0.1`, `use_mark_p_ true`).
const MARK_P: f64 = 0.1;

/// The 2014 file's burst states (`burst_state_`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Burst {
    NoBurst,
    InBurst,
    Protecting,
}

/// `BURST_RESET_TIMEOUT` (pie.h), seconds.
const BURST_RESET_TIMEOUT: f64 = 1.5;

/// The 2013 departure-rate measurement (`dq_start`, `dq_count`, `in_measurement`,
/// `avg_dq_rate`).
#[derive(Clone, Copy, Debug, Default)]
struct Measure {
    /// Start of the current cycle; `None` when not measuring.
    start: Option<Time>,
    /// Packets (threshold in packets) or bytes dequeued in the cycle.
    count: u64,
    /// Packets or bytes per second; 0 = no estimate.
    avg_rate: f64,
}

/// The ns-2 PIE discipline.
pub struct Ns2Pie {
    cfg: PieConfig,
    /// Threshold in packets (true) or bytes.
    packets: bool,
    threshold: u64,
    /// Target and update period in seconds, as ns-2's doubles.
    qdelay_ref: f64,
    a: f64,
    b: f64,
    drop_prob: f64,
    qdelay: f64,
    qdelay_old: f64,
    burst_allowance: Time,
    burst_state: Burst,
    burst_reset: u32,
    m: Measure,
    next_update: Time,
    rng: Stream,
    queue: PacketQueue,
    stats: QdiscStats,
}

impl Ns2Pie {
    pub fn new(cfg: PieConfig, rng: Stream) -> Ns2Pie {
        let (packets, threshold) = match cfg.dq_threshold {
            Limit::Packets(n) => (true, n as u64),
            Limit::Bytes(b) => (false, b),
        };
        Ns2Pie {
            cfg,
            packets,
            threshold,
            qdelay_ref: cfg.target.as_secs_f64(),
            // tc's 1/16 Hz units: alpha 2 = 0.125, beta 20 = 1.25 (the ns-2 a_ and b_).
            a: cfg.alpha as f64 / 16.0,
            b: cfg.beta as f64 / 16.0,
            drop_prob: 0.0,
            qdelay: 0.0,
            qdelay_old: 0.0,
            burst_allowance: Time::ZERO,
            burst_state: Burst::NoBurst,
            burst_reset: 0,
            m: Measure::default(),
            next_update: Time::ZERO,
            rng,
            queue: PacketQueue::with_capacity(cfg.limit as usize),
            stats: QdiscStats::default(),
        }
    }

    /// Queue length in the measurement's unit.
    fn qlen(&self) -> u64 {
        if self.packets {
            self.queue.len() as u64
        } else {
            self.queue.backlog()
        }
    }

    /// Runs every update of the `CalcTimer` up to `now` (the first at t = 0).
    fn run_timer(&mut self, now: Time) {
        while self.next_update <= now {
            self.calculate_p();
            self.next_update += self.cfg.tupdate;
        }
    }

    /// `PIEQueue::calculate_p`.
    fn calculate_p(&mut self) {
        let qdelay = if self.m.avg_rate > 0.0 { self.qlen() as f64 / self.m.avg_rate } else { 0.0 };
        if self.burst_allowance > Time::ZERO {
            self.drop_prob = 0.0;
        } else {
            let mut p = self.a * (qdelay - self.qdelay_ref) + self.b * (qdelay - self.qdelay_old);
            let d = self.drop_prob;
            p = if d < 0.001 {
                p / 32.0
            } else if d < 0.01 {
                p / 8.0
            } else if d < 0.1 {
                p / 2.0
            } else if d < 1.0 {
                p / 0.5
            } else if d < 10.0 {
                p / 0.125
            } else {
                p / 0.03125
            };
            if d >= 0.1 && p > 0.02 {
                p = 0.02;
            }
            p += d;
            if qdelay == 0.0 && self.qdelay_old == 0.0 {
                p *= 0.98;
            } else if qdelay > 0.2 {
                p += 0.02;
            }
            self.drop_prob = p.max(0.0);
        }
        self.burst_allowance = self.burst_allowance.saturating_sub(self.cfg.tupdate);
        let quiet = qdelay < 0.5 * self.qdelay_ref && self.qdelay_old < 0.5 * self.qdelay_ref && self.drop_prob == 0.0;
        // 2013: the quiet-queue reset also fires with no rate estimate (qdelay 0 then), and
        // ends the cycle in progress.
        if quiet {
            self.m = Measure::default();
        }
        let reset_limit = (BURST_RESET_TIMEOUT / self.cfg.tupdate.as_secs_f64()) as u32;
        if quiet && self.burst_allowance == Time::ZERO {
            match self.burst_state {
                Burst::Protecting => {
                    self.burst_state = Burst::InBurst;
                    self.burst_reset = 0;
                }
                Burst::InBurst => {
                    self.burst_reset += 1;
                    if self.burst_reset > reset_limit {
                        self.burst_reset = 0;
                        self.burst_state = Burst::NoBurst;
                    }
                }
                Burst::NoBurst => {}
            }
        } else if self.burst_state == Burst::InBurst {
            self.burst_reset = 0;
        }
        self.qdelay = qdelay;
        self.qdelay_old = qdelay;
    }

    /// `PIEQueue::drop_early`: whether the arriving `pkt` is to be dropped; sets CE instead
    /// when it may mark.
    fn drop_early(&mut self, pkt: &mut Packet) -> bool {
        if self.burst_allowance > Time::ZERO {
            return false;
        }
        if self.burst_state == Burst::NoBurst {
            self.burst_state = Burst::Protecting;
            self.burst_allowance = self.cfg.max_burst;
        }
        let mut p = self.drop_prob;
        if self.cfg.bytemode {
            p = p * pkt.wire_len as f64 / MEAN_PKTSIZE as f64;
        }
        let u = self.rng.uniform();
        if self.qdelay_old < 0.5 * self.qdelay_ref && self.drop_prob < 0.2 {
            return false;
        }
        if self.queue.backlog() <= 2 * MEAN_PKTSIZE {
            return false;
        }
        if u > p {
            return false;
        }
        if self.cfg.ecn && p < MARK_P && pkt.ecn.is_ect() {
            pkt.ecn.set_ce();
            self.stats.ce_marks += 1;
            return false;
        }
        true
    }

    /// The rate measurement of `PIEQueue::deque`, after `pkt` left.
    fn measure(&mut self, pkt: &Packet, now: Time) {
        if self.m.start.is_none() && self.qlen() >= self.threshold {
            self.m.start = Some(now);
            self.m.count = 0;
        }
        let Some(start) = self.m.start else { return };
        self.m.count += if self.packets { 1 } else { pkt.wire_len as u64 };
        if self.m.count < self.threshold {
            return;
        }
        let elapsed = (now - start).as_secs_f64();
        // ns-2 would divide by zero for a one-packet cycle; such a cycle gives no sample.
        if elapsed > 0.0 {
            let sample = self.m.count as f64 / elapsed;
            self.m.avg_rate = if self.m.avg_rate == 0.0 { sample } else { 0.5 * self.m.avg_rate + 0.5 * sample };
        }
        self.m.count = 0;
        self.m.start = (self.qlen() > self.threshold).then_some(now);
    }
}

impl Qdisc for Ns2Pie {
    fn kind(&self) -> &'static str {
        super::pie::PIE.name
    }

    /// `PIEQueue::enque`.
    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        self.run_timer(now);
        if self.queue.len() >= self.cfg.limit as usize {
            self.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        if self.drop_early(&mut pkt) {
            self.stats.drop(&pkt);
            return Enqueued::Dropped;
        }
        pkt.enqueued_at = now;
        self.queue.push(pkt, &mut self.stats);
        Enqueued::Queued
    }

    /// `PIEQueue::deque`.
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.run_timer(now);
        let pkt = self.queue.pop(&mut self.stats)?;
        self.measure(&pkt, now);
        Some(pkt)
    }

    super::packet_queue_accessors!(queue, stats);

    /// `prob`, `pie_qdelay` (the last update's estimate, ms), `burst_allowance` (ms) and
    /// `avg_dq_rate` (the estimate in bytes/s, or packets/s with a threshold in packets).
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("prob", self.drop_prob));
        out.push(("pie_qdelay", self.qdelay * 1e3));
        out.push(("burst_allowance", self.burst_allowance.as_millis_f64()));
        out.push(("avg_dq_rate", self.m.avg_rate));
    }
}

/// Builds the profile's PIE: the 2013 ns-2 code on `ns2-2013`, Linux's otherwise.
pub(super) fn build(cfg: &PieConfig, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
    Box::new(Ns2Pie::new(*cfg, ctx.rng.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::profile::Stack;
    use crate::qdisc::{QdiscSpec, QdiscConfig};
    use crate::time::Rate;

    /// A 1000-byte segment with 40 bytes of TCP/IP header, as in the study.
    const SIZE: u32 = 1040;
    /// Its serialisation at 2 Mbit/s: 4.16 ms.
    const TX: Time = Time(4_160_000);

    fn pkt() -> Packet {
        Packet::new(0, Direction::Forward, Kind::Data, SIZE)
    }

    /// The suite's PIE string parsed with the ns2-2013 defaults.
    fn cfg(s: &str) -> PieConfig {
        let spec = QdiscSpec::parse_for(s, Stack::Ns2_2013).unwrap();
        *(spec.config() as &dyn std::any::Any).downcast_ref::<PieConfig>().expect("a pie config")
    }

    fn pie(s: &str) -> Ns2Pie {
        Ns2Pie::new(cfg(s), Stream::new(7, "pie-ns2-test"))
    }

    #[test]
    fn ns2_2013_defaults_are_the_2013_code_s() {
        let c = cfg("pie");
        assert_eq!((c.target, c.tupdate, c.max_burst), (Time::from_millis(20), Time::from_millis(30), Time::from_millis(100)));
        assert_eq!(c.dq_threshold, Limit::Packets(10));
        assert!(c.dq_rate_estimator);
        assert_eq!(c.limit, 50, "ns-default.tcl Queue limit_");
        // Linux keeps its own.
        let l = *(QdiscSpec::parse("pie").unwrap().config() as &dyn std::any::Any).downcast_ref::<PieConfig>().unwrap();
        assert_eq!((l.target, l.tupdate, l.dq_threshold), (Time::from_millis(15), Time::from_millis(15), Limit::Bytes(16384)));
        // The profile builds the ns-2 code, Linux the kernel's.
        let mut ctx = BuildCtx { link_rate: Rate(2_000_000), mtu: 1514, rng: Stream::new(1, "x"), stack: Stack::Ns2_2013 };
        let mut out = vec![];
        c.build(&mut ctx).xstats(&mut out);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), ["prob", "pie_qdelay", "burst_allowance", "avg_dq_rate"]);
        assert_eq!(out[2].1, 0.0, "no burst allowance before the first arrival");
    }

    /// A queue of `n` packets with a given rate estimate and no burst allowance.
    fn loaded(n: usize, rate_pps: f64) -> Ns2Pie {
        let mut q = pie("pie limit 100");
        for _ in 0..n {
            q.queue.push(pkt(), &mut q.stats);
        }
        q.m.avg_rate = rate_pps;
        q.burst_allowance = Time::ZERO;
        q.burst_state = Burst::InBurst;
        q
    }

    /// The 2014 burst states: the first arrival arms max_burst (NO_BURST -> protecting); once
    /// spent and quiet, IN_BURST; after more than 1.5 s / 30 ms = 50 further quiet updates,
    /// NO_BURST, so the next arrival arms it again. A busy update in IN_BURST restarts the
    /// count.
    #[test]
    fn burst_allowance_is_armed_by_an_arrival_and_rearmed_after_1_5_s_quiet() {
        let mut q = pie("pie limit 100");
        q.next_update = Time::MAX;
        assert!(!q.drop_early(&mut pkt()));
        assert_eq!((q.burst_state, q.burst_allowance), (Burst::Protecting, Time::from_millis(100)));
        for _ in 0..4 {
            q.calculate_p();
        }
        assert_eq!((q.burst_state, q.burst_allowance), (Burst::InBurst, Time::ZERO));
        for k in 1..=51 {
            q.calculate_p();
            let want = if k <= 50 { Burst::InBurst } else { Burst::NoBurst };
            assert_eq!(q.burst_state, want, "quiet update {k}");
            if k == 20 {
                // A busy update (delay 80 ms) restarts the count.
                for _ in 0..20 {
                    q.queue.push(pkt(), &mut q.stats);
                }
                q.m.avg_rate = 250.0;
                q.calculate_p();
                assert_eq!((q.burst_state, q.burst_reset), (Burst::InBurst, 0));
                while q.queue.take().is_some() {}
                q.m.avg_rate = 0.0;
                q.drop_prob = 0.0;
                q.qdelay_old = 0.0;
                q.burst_reset = 20;
            }
        }
        assert!(!q.drop_early(&mut pkt()));
        assert_eq!((q.burst_state, q.burst_allowance), (Burst::Protecting, Time::from_millis(100)));
    }

    /// The PI step scaled by the 2013 table: from p = 0, /32; from [0.001, 0.01), /8.
    #[test]
    fn probability_after_k_updates_at_a_fixed_delay() {
        // 20 packets at 250 packets/s: qdelay 80 ms.
        let mut q = loaded(20, 250.0);
        q.calculate_p();
        // (0.125 (0.08 - 0.02) + 1.25 (0.08 - 0)) / 32
        let p1 = (0.125 * 0.06 + 1.25 * 0.08) / 32.0;
        assert!((q.drop_prob - p1).abs() < 1e-15, "{} vs {p1}", q.drop_prob);
        assert!((p1 - 0.003359375).abs() < 1e-15);
        q.calculate_p();
        let p2 = p1 + 0.125 * 0.06 / 8.0;
        assert!((q.drop_prob - p2).abs() < 1e-15, "{} vs {p2}", q.drop_prob);
        // Three more updates at /8 cross 1 % (0.0043 + 3 x 0.0009375 = 0.0071, then 0.0080,
        // 0.0090, 0.0099, 0.0108); from there /2.
        let mut p = p2;
        for _ in 0..20 {
            q.calculate_p();
            let step: f64 = 0.125 * 0.06;
            p += if p < 0.01 { step / 8.0 } else if p < 0.1 { step / 2.0 } else { (step * 2.0).min(0.02) };
            assert!((q.drop_prob - p).abs() < 1e-12, "{} vs {p}", q.drop_prob);
        }
        assert!(p > 0.05 && p < 0.1, "the /2 tier reached: {p}");
    }

    #[test]
    fn above_ten_percent_the_step_doubles_and_is_capped_above_200_ms_two_percent_more() {
        // 60 packets at 250/s: 240 ms. p = 0.5: step 2 x (0.125 x 0.22) = 0.055, capped at
        // 0.02, plus 0.02 above 200 ms.
        let mut q = loaded(60, 250.0);
        q.drop_prob = 0.5;
        q.qdelay_old = 0.24;
        q.calculate_p();
        assert!((q.drop_prob - 0.54).abs() < 1e-12, "{}", q.drop_prob);
        // Falling delay: 30 packets (120 ms) after 240 ms: 2 x (0.125 x 0.1 - 1.25 x 0.12).
        let mut q = loaded(30, 250.0);
        q.drop_prob = 0.5;
        q.qdelay_old = 0.24;
        q.calculate_p();
        let want = 0.5 + 2.0 * (0.125 * 0.1 - 1.25 * 0.12);
        assert!((q.drop_prob - want).abs() < 1e-12, "{} vs {want}", q.drop_prob);
        // Two zero delays: x 0.98 after the (negative, /2) step.
        let mut q = loaded(0, 250.0);
        q.drop_prob = 0.05;
        q.calculate_p();
        let want = (0.05 + 0.125 * (0.0 - 0.02) / 2.0) * 0.98;
        assert!((q.drop_prob - want).abs() < 1e-15, "{} vs {want}", q.drop_prob);
    }

    #[test]
    fn burst_allowance_holds_p_at_zero_and_drains_by_tupdate() {
        let mut q = loaded(60, 250.0);
        q.burst_allowance = Time::from_millis(100);
        let mut left = vec![];
        for _ in 0..5 {
            q.calculate_p();
            left.push((q.burst_allowance.as_nanos() / 1_000_000, q.drop_prob));
        }
        // 100 -> 70 -> 40 -> 10 -> 0: p stays 0 while any is left at the update's start, then
        // the first PI step: (0.125 x 0.22 + 1.25 x 0) / 32 + 0.02 (above 200 ms).
        assert_eq!(left[..4].iter().map(|x| x.0).collect::<Vec<_>>(), [70, 40, 10, 0]);
        assert!(left[..4].iter().all(|x| x.1 == 0.0));
        assert!((left[4].1 - (0.125 * 0.22 / 32.0 + 0.02)).abs() < 1e-15, "{:?}", left[4]);
    }

    /// Drives a standing overload at 2 Mbit/s: two arrivals per 4.16 ms departure, from
    /// t = 1 ms to `until`; returns (drops, the largest queue).
    fn overload(q: &mut Ns2Pie, until: Time) -> (u64, usize) {
        let mut t = Time::from_millis(1);
        let mut maxq = 0;
        while t < until {
            q.enqueue(pkt(), t);
            q.enqueue(pkt(), t);
            q.dequeue(t + Time(1));
            maxq = maxq.max(q.len());
            t += TX;
        }
        (q.stats.drops - q.stats.overlimits, maxq)
    }

    /// The study's observation, from the code: a 10-packet cycle at 2 Mbit/s spans 9 x 4.16 =
    /// 37.44 ms, longer than tUpdate 30 ms, and every update without an estimate (delay 0, p
    /// 0) restarts it, so no estimate ever forms, p stays 0 and the queue fills: a FIFO.
    #[test]
    fn default_pie_at_2_mbit_never_measures_and_acts_as_a_fifo() {
        let mut q = pie("pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 10 tupdate 30ms");
        let (early, maxq) = overload(&mut q, Time::from_secs(3));
        assert_eq!(q.m.avg_rate, 0.0);
        assert_eq!(early, 0, "no early drop");
        assert_eq!(maxq, 99, "the buffer fills (100 packets, less the one just sent)");
        assert!(q.stats.overlimits > 100);
    }

    /// tUpdate 60 ms ("PIEupdate") lets a 37.44 ms cycle complete; a 5-packet threshold
    /// ("PIEthresh", 4 x 4.16 = 16.64 ms) completes within 30 ms. The first sample counts n
    /// packets over n - 1 departure gaps.
    #[test]
    fn the_papers_variants_measure_and_drop_early() {
        for (s, n) in [("dq_threshold 10 tupdate 60ms", 10u32), ("dq_threshold 5 tupdate 30ms", 5)] {
            let mut q = pie(&format!("pie limit 100 target 20ms max_burst 100ms dq_rate_estimator {s}"));
            // Fill past the threshold, then drain at the link rate until the first estimate.
            let mut t = Time::from_millis(1);
            while q.m.avg_rate == 0.0 && t < Time::from_secs(1) {
                q.enqueue(pkt(), t);
                q.enqueue(pkt(), t);
                q.dequeue(t + Time(1));
                t += TX;
            }
            let first = n as f64 / ((n - 1) as f64 * TX.as_secs_f64());
            assert!((q.m.avg_rate - first).abs() < 1e-9 * first, "{s}: {} vs {first}", q.m.avg_rate);
            let (early, _) = overload(&mut q, Time::from_secs(4));
            assert!(early > 20, "{s}: {early} early drops");
        }
    }

    #[test]
    fn no_early_drop_at_low_delay_or_two_packets_and_ecn_below_mark_p() {
        // p 0.15 (< 20 %) with the last delay under half the target: no drop.
        let mut q = loaded(10, 250.0);
        q.drop_prob = 0.15;
        q.qdelay_old = 0.009;
        q.next_update = Time::MAX;
        assert!((0..1000).all(|_| !q.drop_early(&mut pkt())));
        // At p = 1 with two packets (2080 B > 2000 B) every arrival goes; with one, none.
        let mut q = loaded(2, 250.0);
        q.drop_prob = 1.0;
        q.qdelay_old = 0.1;
        assert!((0..100).all(|_| q.drop_early(&mut pkt())));
        let mut q = loaded(1, 250.0);
        q.drop_prob = 1.0;
        q.qdelay_old = 0.1;
        assert!((0..100).all(|_| !q.drop_early(&mut pkt())));
        // One uniform draw per arrival: the drop rate is p (no de-randomisation).
        let mut q = loaded(50, 250.0);
        q.drop_prob = 0.3;
        q.qdelay_old = 0.1;
        let drops = (0..40_000).filter(|_| q.drop_early(&mut pkt())).count() as f64 / 40_000.0;
        assert!((drops - 0.3).abs() < 0.01, "{drops}");
        // ECN: an ECT packet is marked while p < 0.1, dropped from 0.1.
        let mut q = pie("pie limit 100 ecn");
        for _ in 0..50 {
            q.queue.push(pkt(), &mut q.stats);
        }
        q.burst_allowance = Time::ZERO;
        q.burst_state = Burst::InBurst;
        q.qdelay_old = 0.1;
        q.drop_prob = 0.09;
        let mut marked = 0;
        for _ in 0..2000 {
            let mut p = pkt();
            p.ecn = Ecn::Ect0;
            assert!(!q.drop_early(&mut p));
            marked += (p.ecn == Ecn::Ce) as u32;
        }
        assert!(marked > 100 && marked < 260, "{marked}");
        q.drop_prob = 0.1;
        let mut p = pkt();
        p.ecn = Ecn::Ect0;
        assert!((0..200).any(|_| q.drop_early(&mut p)));
    }
}
