//! PIE, Proportional Integral controller Enhanced (RFC 8033), as Linux implements it in
//! `net/sched/sch_pie.c` and `include/net/pie.h` (torvalds/linux, read 2025; see
//! docs/algorithms/pie.md for the version notes and every known difference).
//!
//! One FIFO. Every `tupdate` a timer recomputes the drop probability from the queue delay
//! (`pie_calculate_probability`); each arrival is dropped, or CE-marked, with that probability
//! (`pie_drop_early`). The queue delay is either the sojourn time of the last dequeued packet
//! (Linux default) or, with `dq_rate_estimator`, backlog / departure rate (Little's law,
//! RFC 8033 §5.2 as Linux does it).
//!
//! The arithmetic is Linux's: probabilities are integers scaled to `MAX_PROB = 2^56 - 1`,
//! times are psched ticks of 64 ns, the departure rate is bytes per tick scaled by 2^8. So a
//! run reproduces the kernel's rounding, not an idealised real-valued controller.
//!
//! The timer is modelled lazily: every elapsed update instant is processed, in order, before
//! the next enqueue or dequeue. Between packet events nothing the update reads can change, so
//! this is exact, except that `xstats` (which has no clock) shows the values as of the last
//! packet event.

use super::{Args, BuildCtx, Enqueued, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Type, Value};
use crate::profile::Stack;
use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::Time;
use crate::units::Limit;
use super::PacketQueue;
use std::sync::Arc;

/// Probability 1 (`MAX_PROB` in pie.h: `U64_MAX >> BITS_PER_BYTE`).
pub const MAX_PROB: u64 = u64::MAX >> 8;
/// psched time is ns >> 6 (`PSCHED_SHIFT`).
const PSCHED_SHIFT: u32 = 6;
const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// Fixed-point shift of the departure rate (`PIE_SCALE`).
const PIE_SCALE: u32 = 8;
/// Linux's measurement threshold for the departure-rate estimator (`QUEUE_THRESHOLD`), bytes.
pub const QUEUE_THRESHOLD: u64 = 16384;
/// `pie_init` arms the first update HZ/2 after the qdisc is created; the model arms it HZ/2
/// after the first packet event (as `red` and `dualpi2` do).
const FIRST_UPDATE: Time = Time::from_millis(500);
/// Delay above which `pie_calculate_probability` adds a further 2 % per update.
const HIGH_DELAY: Time = Time::from_millis(250);

fn ticks(t: Time) -> u64 {
    t.as_nanos() >> PSCHED_SHIFT
}

fn ticks_to_ms(t: u64) -> f64 {
    (t << PSCHED_SHIFT) as f64 / 1e6
}

/// Parsed `pie` parameters (tc names; `max_burst` and `dq_threshold` are extensions, see
/// [`parse_pie`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PieConfig {
    /// Queue limit in packets.
    pub limit: u32,
    /// Target queue delay (`QDELAY_REF`).
    pub target: Time,
    /// Probability update interval.
    pub tupdate: Time,
    /// Integral gain in units of 1/16 Hz (tc: 0..32; 2 = 0.125 Hz).
    pub alpha: u32,
    /// Proportional gain in units of 1/16 Hz (20 = 1.25 Hz).
    pub beta: u32,
    pub ecn: bool,
    pub bytemode: bool,
    /// Queue delay from the departure rate instead of packet timestamps.
    pub dq_rate_estimator: bool,
    /// Size of a departure-rate measurement cycle (Linux: fixed 16384 bytes).
    pub dq_threshold: Limit,
    /// Burst allowance (Linux: fixed 150 ms).
    pub max_burst: Time,
}

impl Default for PieConfig {
    /// `pie_params_init` and `pie_vars_init` (the table's Linux defaults).
    fn default() -> Self {
        PieConfig::from_args(&PIE.defaults(Stack::Linux)).expect("the defaults are valid")
    }
}

impl PieConfig {
    fn from_args(a: &Args) -> Result<Self, String> {
        let c = PieConfig {
            limit: a.u32("limit"),
            target: a.time("target"),
            tupdate: a.time("tupdate"),
            alpha: a.u32("alpha"),
            beta: a.u32("beta"),
            ecn: a.flag("ecn"),
            bytemode: a.flag("bytemode"),
            dq_rate_estimator: a.flag("dq_rate_estimator"),
            dq_threshold: a.limit("dq_threshold"),
            max_burst: a.time("max_burst"),
        };
        if matches!(c.dq_threshold, Limit::Packets(0) | Limit::Bytes(0)) {
            return Err(a.invalid("dq_threshold must be at least 1 packet or byte"));
        }
        if a.given("dq_threshold") && !c.dq_rate_estimator {
            return Err(a.invalid("dq_threshold only applies with dq_rate_estimator"));
        }
        Ok(c)
    }
    /// The target in ticks: tc passes it in microseconds; the kernel converts it.
    fn target_ticks(&self) -> u64 {
        (self.target.as_micros() * 1_000) >> PSCHED_SHIFT
    }
    /// tupdate is kept in jiffies (`usecs_to_jiffies` rounds up); HZ = 1000 here.
    fn tupdate_jiffies(&self) -> Time {
        Time::from_millis(self.tupdate.as_micros().div_ceil(1_000).max(1))
    }
}

impl QdiscConfig for PieConfig {
    /// Linux's PIE, or on the `ns2-2013` profile the 2013 ns-2 code ([`super::pie_ns2`]).
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        match ctx.stack {
            Stack::Ns2_2013 => super::pie_ns2::build(self, ctx),
            _ => Box::new(Pie::new(*self, ctx.mtu, ctx.rng.clone())),
        }
    }
}

/// PIE's state (`struct pie_vars`), in Linux units.
#[derive(Clone, Copy, Debug, Default)]
struct Vars {
    /// Current queue delay, ticks.
    qdelay: u64,
    /// Queue delay at the previous update, ticks.
    qdelay_old: u64,
    /// Remaining burst allowance, ticks.
    burst_time: u64,
    /// Timestamp mode: time of the last dequeue; rate mode: start of the measurement cycle.
    /// `None` is `DTIME_INVALID`.
    dq_tstamp: Option<u64>,
    /// Drop probability, scaled to `MAX_PROB` (may exceed it, as in Linux).
    prob: u64,
    /// De-randomisation accumulator.
    accu_prob: u64,
    /// Bytes dequeued in the current measurement cycle; `None` is `DQCOUNT_INVALID`.
    dq_count: Option<u64>,
    /// Packets dequeued in the current measurement cycle (for a threshold in packets).
    dq_packets: u64,
    /// Average departure rate, bytes per tick << `PIE_SCALE`; 0 = no estimate yet.
    avg_dq_rate: u32,
}

impl Vars {
    /// `pie_vars_init`: what is reset when the queue has been quiet (prob, qdelay and
    /// qdelay_old are kept).
    fn init(&mut self, max_burst: u64) {
        self.burst_time = max_burst;
        self.dq_tstamp = None;
        self.accu_prob = 0;
        self.dq_count = None;
        self.dq_packets = 0;
        self.avg_dq_rate = 0;
    }
}

/// The PIE discipline.
pub struct Pie {
    cfg: PieConfig,
    /// `psched_mtu`: largest frame on the link, bytes.
    mtu: u32,
    target: u64,
    max_burst: u64,
    /// Update period after jiffy rounding.
    tupdate: Time,
    rng: Stream,
    queue: PacketQueue,
    vars: Vars,
    /// When the timer fires next; `None` until the first packet event arms it.
    next_update: Option<Time>,
    stats: QdiscStats,
}

impl Pie {
    pub fn new(cfg: PieConfig, mtu: u32, rng: Stream) -> Pie {
        let target = cfg.target_ticks();
        let tupdate = cfg.tupdate_jiffies();
        let max_burst = ticks(cfg.max_burst);
        let mut vars = Vars::default();
        vars.init(max_burst);
        Pie {
            cfg,
            mtu,
            target,
            max_burst,
            tupdate,
            rng,
            queue: PacketQueue::with_capacity(cfg.limit as usize),
            vars,
            next_update: None,
            stats: QdiscStats::default(),
        }
    }

    /// Current drop probability as a fraction (may exceed 1 transiently, as in Linux).
    pub fn prob(&self) -> f64 {
        self.vars.prob as f64 / MAX_PROB as f64
    }

    /// Runs every update the timer would have run up to `now`. The first call arms the timer
    /// for `FIRST_UPDATE` later.
    fn run_timer(&mut self, now: Time) {
        let mut next = *self.next_update.get_or_insert(now + FIRST_UPDATE);
        while next <= now {
            self.calculate_probability(self.queue.backlog());
            next += self.tupdate;
        }
        self.next_update = Some(next);
    }

    /// alpha and beta in probability units per tick, after RFC 8033's auto-scaling by the
    /// current probability (`pie_calculate_probability`): halved below 10 %, then a further
    /// quarter per decade down to 0.0001 % (/2, /8, /32, /128, /512, /2048).
    fn scaled_gains(&self) -> (u64, u64) {
        let unit = MAX_PROB / PSCHED_TICKS_PER_SEC;
        let mut alpha = (self.cfg.alpha as u64 * unit) >> 4;
        let mut beta = (self.cfg.beta as u64 * unit) >> 4;
        let p = self.vars.prob;
        if p < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power = 100u64;
            while p < MAX_PROB / power && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }
        (alpha, beta)
    }

    /// The periodic update (`pie_calculate_probability`), given the backlog in bytes.
    fn calculate_probability(&mut self, backlog: u64) {
        let rate_mode = self.cfg.dq_rate_estimator;
        let (qdelay, qdelay_old) = if rate_mode {
            let old = self.vars.qdelay;
            self.vars.qdelay_old = old;
            let q = match self.vars.avg_dq_rate {
                0 => 0,
                r => (backlog << PIE_SCALE) / r as u64,
            };
            (q, old)
        } else {
            (self.vars.qdelay, self.vars.qdelay_old)
        };
        // A backlog too small to show any delay: no decay this round.
        let mut update_prob = !(qdelay == 0 && backlog != 0);

        let (alpha, beta) = self.scaled_gains();
        // Two's-complement arithmetic on u64, as the kernel's s64 delta.
        let mut delta = alpha.wrapping_mul(qdelay.wrapping_sub(self.target)) as i64;
        delta = delta.wrapping_add(beta.wrapping_mul(qdelay.wrapping_sub(qdelay_old)) as i64);

        let oldprob = self.vars.prob;
        // Increase by at most 2 % per update once p >= 10 % (RFC 8033 §5.5).
        if delta > (MAX_PROB / 50) as i64 && self.vars.prob >= MAX_PROB / 10 {
            delta = ((MAX_PROB / 100) * 2) as i64;
        }
        if qdelay > ticks(HIGH_DELAY) {
            delta = delta.wrapping_add((MAX_PROB / 50) as i64);
        }
        self.vars.prob = self.vars.prob.wrapping_add(delta as u64);
        if delta > 0 {
            if self.vars.prob < oldprob {
                self.vars.prob = MAX_PROB;
                update_prob = false;
            }
        } else if self.vars.prob > oldprob {
            self.vars.prob = 0;
        }
        // Two idle intervals in a row: decay to 63/64.
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.vars.prob -= self.vars.prob / 64;
        }
        self.vars.qdelay = qdelay;
        // Quiet for two updates and p = 0: restore the burst allowance, restart estimation.
        if self.vars.qdelay < self.target / 2
            && self.vars.qdelay_old < self.target / 2
            && self.vars.prob == 0
            && (!rate_mode || self.vars.avg_dq_rate > 0)
        {
            self.vars.init(self.max_burst);
        }
        if !rate_mode {
            self.vars.qdelay_old = qdelay;
        }
    }

    /// Whether an arriving packet of `size` bytes is to be dropped or marked
    /// (`pie_drop_early`), with `backlog` bytes queued before it.
    fn drop_early(&mut self, backlog: u64, size: u32) -> bool {
        let v = &mut self.vars;
        if v.burst_time > 0 {
            return false;
        }
        if v.qdelay < self.target / 2 && v.prob < MAX_PROB / 5 {
            return false;
        }
        if backlog < 2 * self.mtu as u64 {
            return false;
        }
        let local = if self.cfg.bytemode && size <= self.mtu { size as u64 * (v.prob / self.mtu as u64) } else { v.prob };
        // De-randomisation (RFC 8033 §5.4): never below 0.85 accumulated, always from 8.5.
        if local == 0 {
            v.accu_prob = 0;
        } else {
            v.accu_prob = v.accu_prob.wrapping_add(local);
        }
        if v.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if v.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        if (self.rng.next_u64() >> 8) < local {
            self.vars.accu_prob = 0;
            return true;
        }
        false
    }

    /// Threshold test of the departure-rate estimator, in the configured unit.
    fn at_threshold(&self, bytes: u64, packets: u64) -> bool {
        match self.cfg.dq_threshold {
            Limit::Bytes(b) => bytes >= b,
            Limit::Packets(n) => packets >= n as u64,
        }
    }

    /// Delay estimation and burst-allowance accounting at dequeue (`pie_process_dequeue`),
    /// with `backlog` the bytes left after `pkt` was removed.
    fn process_dequeue(&mut self, pkt: &Packet, backlog: u64, now: Time) {
        let now = ticks(now);
        let dtime;
        if !self.cfg.dq_rate_estimator {
            let v = &mut self.vars;
            v.qdelay = if backlog == 0 { 0 } else { now - ticks(pkt.enqueued_at) };
            dtime = v.dq_tstamp.map_or(0, |t| now - t);
            v.dq_tstamp = Some(now);
            if dtime == 0 {
                return;
            }
        } else {
            let qlen = self.queue.len() as u64;
            if self.vars.dq_count.is_none() && self.at_threshold(backlog, qlen) {
                self.vars.dq_tstamp = Some(now);
                self.vars.dq_count = Some(0);
                self.vars.dq_packets = 0;
            }
            let Some(count) = self.vars.dq_count else {
                return;
            };
            let count = count + pkt.wire_len as u64;
            self.vars.dq_count = Some(count);
            self.vars.dq_packets += 1;
            if !self.at_threshold(count, self.vars.dq_packets) {
                return;
            }
            dtime = now - self.vars.dq_tstamp.unwrap_or(now);
            if dtime == 0 {
                return;
            }
            let sample = ((count << PIE_SCALE) / dtime).min(u32::MAX as u64) as u32;
            let v = &mut self.vars;
            v.avg_dq_rate = if v.avg_dq_rate == 0 { sample } else { v.avg_dq_rate - (v.avg_dq_rate >> 3) + (sample >> 3) };
            // Keep measuring only while enough is queued to complete another cycle.
            if self.at_threshold(backlog, qlen) {
                self.vars.dq_count = Some(0);
                self.vars.dq_packets = 0;
                self.vars.dq_tstamp = Some(now);
            } else {
                self.vars.dq_count = None;
            }
        }
        self.vars.burst_time = self.vars.burst_time.saturating_sub(dtime);
    }
}

impl Qdisc for Pie {
    fn kind(&self) -> &'static str {
        PIE.name
    }

    /// `pie_qdisc_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        self.run_timer(now);
        let accept = if self.queue.len() >= self.cfg.limit as usize {
            self.stats.overlimits += 1;
            false
        } else if !self.drop_early(self.queue.backlog(), pkt.wire_len) {
            true
        } else if self.cfg.ecn && self.vars.prob <= MAX_PROB / 10 && pkt.ecn.set_ce() {
            self.stats.ce_marks += 1;
            true
        } else {
            false
        };
        if !accept {
            self.stats.drop(&pkt);
            self.vars.accu_prob = 0;
            return Enqueued::Dropped;
        }
        pkt.enqueued_at = now;
        self.queue.push(pkt, &mut self.stats);
        Enqueued::Queued
    }

    /// `pie_qdisc_dequeue`.
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.run_timer(now);
        let pkt = self.queue.pop(&mut self.stats)?;
        self.process_dequeue(&pkt, self.queue.backlog(), now);
        Some(pkt)
    }

    super::packet_queue_accessors!(queue, stats);
    /// Linux `pie_change`: new limit, target, tupdate, alpha, beta, ecn, bytemode and rate
    /// estimator; the probability, burst allowance and queue are kept, except that packets
    /// over a lower limit are dropped from the head. (`max_burst` has no netlink attribute
    /// and stays.)
    fn change(&mut self, new: &Args) -> bool {
        let Ok(n) = PieConfig::from_args(new) else { return false };
        self.cfg = PieConfig { max_burst: self.cfg.max_burst, ..n };
        self.target = n.target_ticks();
        self.tupdate = n.tupdate_jiffies();
        while self.queue.len() > self.cfg.limit as usize {
            if let Some(p) = self.queue.take() {
                self.stats.drop(&p);
            }
        }
        true
    }

    /// As `pie_dump_stats`: `prob` (fraction), `pie_qdelay` (the controller's delay estimate,
    /// ms), `burst_allowance` (ms) and, with the rate estimator, `avg_dq_rate` (bytes/s).
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("prob", self.prob()));
        out.push(("pie_qdelay", ticks_to_ms(self.vars.qdelay)));
        out.push(("burst_allowance", ticks_to_ms(self.vars.burst_time)));
        if self.cfg.dq_rate_estimator {
            let bps = (self.vars.avg_dq_rate as u64 * PSCHED_TICKS_PER_SEC) >> PIE_SCALE;
            out.push(("avg_dq_rate", bps as f64));
        }
    }
}

/// `target` and `tupdate`: tc silently ignores a zero value (keeping the kernel default), so
/// zero is rejected.
fn at_least_1us(key: &str, v: Value) -> Result<Option<Value>, String> {
    match v {
        Value::Time(t) if t.as_micros() == 0 => Err(format!("{key} must be at least 1us (tc ignores 0)")),
        v => Ok(Some(v)),
    }
}

/// `pie [limit PACKETS] [target TIME] [tupdate TIME] [alpha 1..32] [beta 1..32] [ecn|noecn]
/// [bytemode|nobytemode] [dq_rate_estimator|no_dq_rate_estimator] [max_burst TIME]
/// [dq_threshold PACKETS|BYTES]`.
///
/// As tc (`q_pie.c`): a bare time is microseconds; alpha and beta are integers in 1/16 Hz.
/// tc silently ignores a zero limit, target, tupdate, alpha or beta (keeping the kernel
/// default), so zero is rejected here. `max_burst` and `dq_threshold` are not tc parameters
/// (the kernel hard-codes 150 ms and 16384 bytes); they exist for the ns-2-era study settings.
/// `dq_threshold` takes packets (`10`, `10p`) or bytes (`16kb`, `16384b`) and needs
/// `dq_rate_estimator`.
pub const PIE: QdiscKind = QdiscKind {
    name: "pie",
    doc: "Proportional Integral controller Enhanced (sch_pie.c, RFC 8033)",
    params: &[
        Param::uint("limit", 1, u32::MAX as u64, 1000)
            .unit("packets")
            .stack_defaults(&[(Stack::Ns2_2013, Value::Uint(50))])
            .doc("queue limit (ns2-2013: ns-default.tcl Queue limit_ 50)"),
        Param::time("target", Time::from_millis(15))
            .stack_defaults(&[(Stack::Ns2_2013, Value::Time(Time::from_millis(20)))])
            .doc("target queue delay (QDELAY_REF; ns2-2013: qdelay_ref_ 20ms)")
            .check(at_least_1us),
        Param::time("tupdate", Time::from_millis(15))
            .stack_defaults(&[(Stack::Ns2_2013, Value::Time(Time::from_millis(30)))])
            .doc("probability update interval (ns2-2013: tUpdate_ 30ms)")
            .check(at_least_1us),
        Param::uint("alpha", 1, 32, 2).unit("1/16 Hz").doc("integral gain"),
        Param::uint("beta", 1, 32, 20).unit("1/16 Hz").doc("proportional gain"),
        Param::flag("ecn", false).words(&[("noecn", Value::Bool(false))]).doc("mark ECN-capable packets instead of dropping"),
        Param::flag("bytemode", false).words(&[("nobytemode", Value::Bool(false))]).doc("scale the probability by packet size"),
        Param::flag("dq_rate_estimator", false)
            .words(&[("no_dq_rate_estimator", Value::Bool(false)), ("nodq_rate_estimator", Value::Bool(false))])
            .stack_defaults(&[(Stack::Ns2_2013, Value::Bool(true))])
            .doc("queue delay from the departure rate instead of packet timestamps (ns2-2013: always, the flag is ignored)"),
        Param::time("max_burst", Time::from_millis(150))
            .stack_defaults(&[(Stack::Ns2_2013, Value::Time(Time::from_millis(100)))])
            .doc("burst allowance (not tc: Linux fixes 150ms; ns2-2013: burst_allowance_ 100ms)"),
        Param::new("dq_threshold", Type::Limit, Value::Limit(Limit::Bytes(QUEUE_THRESHOLD)))
            .stack_defaults(&[(Stack::Ns2_2013, Value::Limit(Limit::Packets(10)))])
            .doc("departure-rate measurement cycle, needs dq_rate_estimator (not tc: Linux fixes 16384 bytes; ns2-2013: 10 packets)"),
    ],
    build: |a| Ok(Arc::new(PieConfig::from_args(a)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::qdisc::QdiscSpec;

    const MTU: u32 = 1514;

    fn pie(cfg: PieConfig) -> Pie {
        Pie::new(cfg, MTU, Stream::new(1, "pie-test"))
    }

    fn pkt(ecn: Ecn) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, MTU);
        p.ecn = ecn;
        p
    }

    fn ms(x: u64) -> Time {
        Time::from_millis(x)
    }

    fn us(x: u64) -> Time {
        Time::from_micros(x)
    }

    fn config(s: &str) -> String {
        format!("{:?}", QdiscSpec::parse(s).unwrap())
    }

    // ---- parsing ----

    #[test]
    fn tc_strings_and_defaults() {
        let d = PieConfig::default();
        assert_eq!(d.target, ms(15));
        assert_eq!(d.tupdate, ms(15));
        assert_eq!((d.limit, d.alpha, d.beta), (1000, 2, 20));
        assert!(!d.ecn && !d.bytemode && !d.dq_rate_estimator);
        assert_eq!(d.max_burst, ms(150));
        assert_eq!(d.dq_threshold, Limit::Bytes(16384));
        assert_eq!(QdiscSpec::parse("pie").unwrap(), QdiscSpec::parse("pie noecn").unwrap());
        assert!(config("pie ecn").contains("ecn: true"));
        let s = config("pie limit 100 target 5ms tupdate 32ms alpha 2 beta 20 ecn");
        assert!(s.contains("limit: 100") && s.contains("target: Time(5000000)") && s.contains("tupdate: Time(32000000)"), "{s}");
        let s = config("pie limit 1000 target 20ms tupdate 32ms alpha 2 beta 20 ecn");
        assert!(s.contains("target: Time(20000000)") && s.contains("ecn: true"), "{s}");
        // Load-transient study variants.
        let s = config("pie target 20ms max_burst 100ms dq_rate_estimator dq_threshold 10 tupdate 30ms");
        assert!(s.contains("dq_threshold: Packets(10)") && s.contains("max_burst: Time(100000000)") && s.contains("dq_rate_estimator: true"), "{s}");
        assert!(config("pie target 20ms max_burst 100ms dq_rate_estimator dq_threshold 5p tupdate 60ms").contains("Packets(5)"));
        assert!(config("pie dq_rate_estimator dq_threshold 16kb").contains("Bytes(16384)"));
        // A bare time is microseconds, as in tc.
        assert!(config("pie target 15000").contains("target: Time(15000000)"));
        // TOML booleans become flags.
        let t: toml::Table = toml::from_str("kind = \"pie\"\necn = true\ndq_rate_estimator = false").unwrap();
        assert_eq!(QdiscSpec::from_table(&t).unwrap(), QdiscSpec::parse("pie ecn").unwrap());
    }

    #[test]
    fn bad_values_are_one_line_errors_naming_the_parameter() {
        let e = |s: &str| QdiscSpec::parse(s).unwrap_err();
        assert!(e("pie alpha 33").contains("alpha"));
        assert!(e("pie beta 0").contains("beta"));
        assert!(e("pie target 0ms").contains("target"));
        assert!(e("pie limit 0").contains("limit"));
        assert!(e("pie tupdate fast").contains("tupdate"));
        assert!(e("pie dq_threshold 10").contains("dq_rate_estimator"));
        assert!(e("pie dq_rate_estimator dq_threshold 0").contains("dq_threshold"));
        assert!(e("pie interval 100ms").contains("interval"));
        assert!(!e("pie alpha 33").contains('\n'));
    }

    // ---- probability update ----

    /// The RFC 8033 update in real arithmetic, written from the RFC's description rather than
    /// from the code above: p += s(p) * (alpha (d - target) + beta (d - d_old)), with s the
    /// auto-scaling table, the 2 % cap once p >= 10 %, +2 % above 250 ms, clamped at 0.
    fn reference_update(p: f64, d: f64, d_old: f64, target: f64) -> f64 {
        let (alpha, beta) = (2.0 / 16.0, 20.0 / 16.0);
        let s = [(1e-6, 1.0 / 2048.0), (1e-5, 1.0 / 512.0), (1e-4, 1.0 / 128.0), (1e-3, 1.0 / 32.0), (1e-2, 1.0 / 8.0), (1e-1, 0.5)]
            .iter()
            .find(|(lim, _)| p < *lim)
            .map_or(1.0, |&(_, s)| s);
        let mut dp = s * (alpha * (d - target) + beta * (d - d_old));
        if p >= 0.1 && dp > 0.02 {
            dp = 0.02;
        }
        if d > 0.25 {
            dp += 0.02;
        }
        let mut p = (p + dp).max(0.0);
        if d == 0.0 && d_old == 0.0 {
            p *= 1.0 - 1.0 / 64.0;
        }
        p
    }

    #[test]
    fn probability_update_follows_the_pi_law_with_linux_scaling() {
        let mut q = pie(PieConfig::default());
        // Delays in ms, all multiples of 1 ms = 15625 ticks exactly. The sequence crosses the
        // auto-scaling tiers upwards, hits the 2 % cap and the 250 ms boost, then falls.
        let seq = [20u64, 40, 60, 80, 100, 120, 150, 200, 260, 300, 300, 200, 100, 50, 20, 10, 10, 5, 0, 0, 0, 0];
        let mut p = 0.0f64;
        let mut d_old = 0.0f64;
        let mut p_max = 0.0f64;
        for (i, &d_ms) in seq.iter().enumerate() {
            q.vars.qdelay = ticks(ms(d_ms));
            // Backlog must be non-zero while delay is; zero delay with an empty queue.
            let backlog = if d_ms == 0 { 0 } else { 100_000 };
            q.calculate_probability(backlog);
            let d = d_ms as f64 / 1000.0;
            p = reference_update(p, d, d_old, 0.015);
            d_old = d;
            p_max = p_max.max(p);
            let got = q.prob();
            assert!((got - p).abs() <= 1e-9 + 1e-6 * p, "step {i} (delay {d_ms} ms): PIE {got}, expected {p}");
        }
        assert!(p_max > 0.1, "the sequence should have raised p past the 10 % tier: {p_max}");
        assert!(p < p_max / 2.0, "and let it fall again: {p}");
    }

    #[test]
    fn first_increment_from_zero_is_alpha_beta_over_2048() {
        // From p = 0 with delay 25 ms after 15 ms: dp = (0.125*0.010 + 1.25*0.010)/2048.
        let mut q = pie(PieConfig::default());
        q.vars.qdelay = ticks(ms(15));
        q.vars.qdelay_old = ticks(ms(15));
        q.calculate_probability(50_000);
        assert_eq!(q.vars.prob, 0, "at target with no change, p stays 0");
        q.vars.qdelay = ticks(ms(25));
        q.calculate_probability(50_000);
        let expect = (0.125 * 0.010 + 1.25 * 0.010) / 2048.0;
        assert!((q.prob() - expect).abs() < expect * 1e-6, "{} vs {expect}", q.prob());
    }

    #[test]
    fn auto_scaling_tiers() {
        // At each p, a fixed error of +10 ms against target with no change in delay raises p by
        // alpha * 0.010 / s, with s the RFC 8033 divisor for that decade.
        let cases = [
            (0.5, 1.0),
            (0.1, 1.0),
            (0.05, 2.0),
            (0.005, 8.0),
            (0.0005, 32.0),
            (0.00005, 128.0),
            (0.000005, 512.0),
            (0.0000005, 2048.0),
            (0.0, 2048.0),
        ];
        for (p0, div) in cases {
            let mut q = pie(PieConfig::default());
            q.vars.prob = (p0 * MAX_PROB as f64) as u64;
            q.vars.qdelay = ticks(ms(25));
            q.vars.qdelay_old = ticks(ms(25));
            q.calculate_probability(50_000);
            let dp = q.prob() - p0;
            let expect = 0.125 * 0.010 / div;
            assert!((dp - expect).abs() < expect * 1e-4, "p {p0}: dp {dp}, expected {expect}");
        }
    }

    #[test]
    fn increase_capped_at_two_percent_above_ten_percent() {
        let mut q = pie(PieConfig::default());
        q.vars.prob = MAX_PROB / 5; // 20 %
        q.vars.qdelay_old = ticks(ms(15));
        q.vars.qdelay = ticks(ms(200)); // raw dp = 0.125*0.185 + 1.25*0.185 = 0.254
        q.calculate_probability(500_000);
        assert!((q.prob() - 0.22).abs() < 1e-9, "{}", q.prob());
    }

    #[test]
    fn idle_decay_and_reset_of_burst_allowance() {
        let mut q = pie(PieConfig::default());
        q.vars.prob = MAX_PROB / 100; // 1 %
        q.vars.burst_time = 0;
        // Empty queue, delay 0 on consecutive updates: the PI step (-alpha * target, scaled)
        // and then the decay to 63/64; the burst allowance stays spent while p > 0.
        let mut p = 0.01;
        for _ in 0..3 {
            q.calculate_probability(0);
            p = reference_update(p, 0.0, 0.0, 0.015);
            assert!((q.prob() - p).abs() < 1e-9, "{} vs {p}", q.prob());
        }
        assert!(p < 0.01 * (63.0f64 / 64.0).powi(3));
        assert_eq!(q.vars.burst_time, 0);
        // Once p reaches 0 the allowance is restored.
        q.vars.prob = 0;
        q.calculate_probability(0);
        assert_eq!(q.vars.burst_time, ticks(ms(150)));
    }

    #[test]
    fn timer_runs_first_after_half_a_second_then_every_tupdate() {
        let cfg = PieConfig { tupdate: ms(32), ..PieConfig::default() };
        let mut q = pie(cfg);
        q.vars.burst_time = 0;
        // A standing 40 ms sojourn: packets enqueued at t, dequeued at t + 40 ms.
        let mut t = ms(0);
        let mut updates = vec![];
        let mut last = 0;
        while t < ms(700) {
            q.enqueue(pkt(Ecn::NotEct), t);
            q.enqueue(pkt(Ecn::NotEct), t);
            if t >= ms(40) {
                q.dequeue(t);
            }
            if q.vars.prob != last {
                updates.push(t.as_nanos() / 1_000_000);
                last = q.vars.prob;
            }
            t += ms(1);
        }
        assert_eq!(updates[0], 500, "{updates:?}");
        assert!(updates.windows(2).all(|w| w[1] - w[0] == 32), "{updates:?}");
    }

    /// The timer is armed by the first packet event, not at absolute 500 ms: with traffic
    /// from t = 3 s the first update is at 3.5 s, then every tupdate.
    #[test]
    fn first_update_is_half_a_second_after_the_first_packet_event() {
        let cfg = PieConfig { tupdate: ms(15), ..PieConfig::default() };
        let mut q = pie(cfg);
        q.vars.burst_time = 0;
        let start = ms(3000);
        let mut t = start;
        let mut updates = vec![];
        let mut last = q.vars.prob;
        while t < start + ms(600) {
            q.enqueue(pkt(Ecn::NotEct), t);
            q.enqueue(pkt(Ecn::NotEct), t);
            if t >= start + ms(40) {
                q.dequeue(t);
            }
            if q.vars.prob != last {
                updates.push(t.as_nanos() / 1_000_000);
                last = q.vars.prob;
            }
            t += ms(1);
        }
        assert_eq!(q.next_update.map(|n| n > start + ms(500)), Some(true));
        assert_eq!(updates[0], 3500, "{updates:?}");
        assert!(updates.windows(2).all(|w| w[1] - w[0] == 15), "{updates:?}");
    }

    // ---- enqueue decisions ----

    /// A PIE with the timer out of the way and a fixed probability and delay estimate.
    fn frozen(cfg: PieConfig, prob: f64, qdelay: Time) -> Pie {
        let mut q = pie(cfg);
        q.next_update = Some(Time::MAX);
        q.vars.burst_time = 0;
        q.vars.prob = (prob * MAX_PROB as f64) as u64;
        q.vars.qdelay = ticks(qdelay);
        q
    }

    /// Long-run fraction of arrivals dropped (or marked) at a constant probability `p`, from
    /// RFC 8033's de-randomisation rule: with the accumulated probability k*p after the k-th
    /// arrival since the last drop, no drop while it is below 0.85, a certain drop from 8.5,
    /// otherwise a drop with probability p. Rate = 1 / E[gap].
    fn derandomised_rate(p: f64) -> f64 {
        let (mut survive, mut mean_gap) = (1.0f64, 0.0f64);
        for k in 1.. {
            mean_gap += survive; // P(gap >= k)
            let acc = k as f64 * p;
            if acc >= 8.5 {
                break;
            }
            if acc >= 0.85 {
                survive *= 1.0 - p;
            }
        }
        1.0 / mean_gap
    }

    #[test]
    fn derandomised_rate_reference_is_sane() {
        // Far below p for small p (at least 0.85/p arrivals between drops), p for p >= 0.85.
        assert!((derandomised_rate(0.05) - 1.0 / (16.0 + 20.0)).abs() < 1e-3);
        assert!((derandomised_rate(0.9) - 0.9).abs() < 1e-9);
    }

    /// Offers `n` packets to a queue that never drains below `keep` packets; returns
    /// (accepted, marked).
    fn offer(q: &mut Pie, n: usize, ecn: Ecn, keep: usize) -> (u64, u64) {
        let (e0, m0) = (q.stats.enqueued, q.stats.ce_marks);
        for _ in 0..n {
            q.enqueue(pkt(ecn), Time::ZERO);
            while q.queue.len() > keep {
                q.queue.take();
            }
        }
        (q.stats.enqueued - e0, q.stats.ce_marks - m0)
    }

    #[test]
    fn no_early_drop_below_half_target_with_p_under_20_percent() {
        let mut q = frozen(PieConfig::default(), 0.19, ms(7));
        assert_eq!(offer(&mut q, 2000, Ecn::NotEct, 50).0, 2000);
        // Same p with the delay at half the target: drops resume at about p.
        let mut q = frozen(PieConfig::default(), 0.19, us(7500));
        let acc = offer(&mut q, 20_000, Ecn::NotEct, 50).0;
        let drop_rate = 1.0 - acc as f64 / 20_000.0;
        let expect = derandomised_rate(0.19);
        assert!((drop_rate - expect).abs() < 0.1 * expect, "{drop_rate} vs {expect}");
        // At p >= 20 % drops happen whatever the delay.
        let mut q = frozen(PieConfig::default(), 0.2, ms(1));
        assert!(offer(&mut q, 2000, Ecn::NotEct, 50).0 < 1800);
    }

    #[test]
    fn no_early_drop_with_less_than_two_mtu_queued() {
        // Backlog of at most one packet before each arrival (< 2 MTU): never dropped even at p=1.
        let mut q = frozen(PieConfig::default(), 1.0, ms(100));
        assert_eq!(offer(&mut q, 1000, Ecn::NotEct, 1).0, 1000);
        // Two full packets queued (= 2 MTU) is enough to drop: p = 1 drops every arrival.
        let mut q = frozen(PieConfig::default(), 1.0, ms(100));
        q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        assert_eq!(offer(&mut q, 1000, Ecn::NotEct, 2).0, 0);
    }

    #[test]
    fn derandomisation_bounds_the_gap_between_drops() {
        // At p = 10 % the accumulator forbids a drop within 8 arrivals of the last (0.85/0.1)
        // and forces one by the 85th (8.5/0.1).
        let mut q = frozen(PieConfig::default(), 0.1, ms(30));
        for _ in 0..2 {
            q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        }
        let mut since = 0u32;
        let mut gaps = vec![];
        for _ in 0..20_000 {
            since += 1;
            if q.enqueue(pkt(Ecn::NotEct), Time::ZERO) == Enqueued::Dropped {
                gaps.push(since);
                since = 0;
            } else {
                q.queue.take();
            }
        }
        assert!(gaps.iter().all(|&g| (9..=85).contains(&g)), "{:?}", gaps.iter().min());
        let mean = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
        // Linux's scheme gives a mean gap of 8 + 1/p's geometric tail = about 18.
        assert!(mean > 12.0 && mean < 25.0, "{mean}");
    }

    #[test]
    fn ecn_marks_while_p_at_most_10_percent_and_drops_above() {
        let cfg = PieConfig { ecn: true, ..PieConfig::default() };
        for (p, ecn_marks) in [(0.05, true), (0.1, true), (0.1001, false), (0.3, false)] {
            let mut q = frozen(cfg, p, ms(40));
            if p == 0.1 {
                q.vars.prob = MAX_PROB / 10; // exactly the threshold (f64 rounding aside)
            }
            let (acc, marks) = offer(&mut q, 20_000, Ecn::Ect0, 50);
            if ecn_marks {
                assert_eq!(acc, 20_000, "p {p}: ECT packets are marked, not dropped");
                // At least the de-randomised rate; more once the accumulator sticks (below).
                let rate = marks as f64 / 20_000.0;
                let expect = derandomised_rate(p);
                assert!(rate > 0.9 * expect, "p {p}: mark rate {rate} vs {expect}");
                assert_eq!(q.stats.drops, 0);
            } else {
                assert_eq!(marks, 0, "p {p}");
                let expect = derandomised_rate(p) * 20_000.0;
                assert!((q.stats.drops as f64 - expect).abs() < 0.1 * expect, "p {p}: drops {} vs {expect}", q.stats.drops);
            }
            // Not-ECT packets are dropped at any p.
            let mut q = frozen(cfg, p, ms(40));
            let (acc, marks) = offer(&mut q, 5_000, Ecn::NotEct, 50);
            assert_eq!(marks, 0);
            assert!(acc < 5_000);
        }
        // ECT(1) is ECN-capable too; the packet leaves with CE set.
        let mut q = frozen(cfg, 0.05, ms(40));
        offer(&mut q, 300, Ecn::Ect1, 500);
        assert!(q.queue.iter().any(|p| p.ecn == Ecn::Ce));
        // Without `ecn`, ECT packets are dropped.
        let mut q = frozen(PieConfig::default(), 0.05, ms(40));
        assert_eq!(offer(&mut q, 5_000, Ecn::Ect0, 50).1, 0);
        assert!(q.stats.drops > 0);
    }

    #[test]
    fn a_forced_mark_leaves_the_accumulator_high_until_a_drop() {
        // Linux resets accu_prob after a random-test success and after an actual drop, but
        // not after the forced (accu >= 8.5) verdict turns into a CE mark: every following ECT
        // arrival is then marked, until a drop (e.g. of a Not-ECT packet) resets it.
        let cfg = PieConfig { ecn: true, ..PieConfig::default() };
        let mut q = frozen(cfg, 0.05, ms(40));
        offer(&mut q, 3, Ecn::Ect0, 50);
        q.vars.accu_prob = (MAX_PROB / 2) * 17;
        assert_eq!(offer(&mut q, 100, Ecn::Ect0, 50), (100, 100));
        assert_eq!(q.enqueue(pkt(Ecn::NotEct), Time::ZERO), Enqueued::Dropped);
        assert_eq!(q.vars.accu_prob, 0);
        let (_, marks) = offer(&mut q, 16, Ecn::Ect0, 50);
        assert_eq!(marks, 0, "back below 0.85 accumulated");
    }

    #[test]
    fn bytemode_scales_p_by_size_over_mtu() {
        let cfg = PieConfig { bytemode: true, ..PieConfig::default() };
        let mut q = frozen(cfg, 0.3, ms(40));
        offer(&mut q, 3, Ecn::NotEct, 50);
        let mut small = 0;
        for _ in 0..40_000 {
            let mut p = pkt(Ecn::NotEct);
            p.wire_len = 378; // a quarter of 1514 (to within rounding)
            if q.enqueue(p, Time::ZERO) == Enqueued::Dropped {
                small += 1;
            } else {
                q.queue.take_back();
            }
        }
        let rate = small as f64 / 40_000.0;
        let expect = derandomised_rate(0.3 * 378.0 / 1514.0);
        assert!((rate - expect).abs() < 0.05 * expect, "{rate} vs {expect}");
    }

    #[test]
    fn tail_drop_at_limit() {
        let cfg = PieConfig { limit: 5, ..PieConfig::default() };
        let mut q = pie(cfg);
        for _ in 0..8 {
            q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        }
        assert_eq!(q.len(), 5);
        assert_eq!((q.stats.drops, q.stats.overlimits), (3, 3));
    }

    // ---- burst allowance ----

    #[test]
    fn burst_allowance_suppresses_drops_for_max_burst_after_the_queue_starts() {
        for max_burst in [150u64, 100] {
            let cfg = PieConfig { max_burst: ms(max_burst), ..PieConfig::default() };
            let mut q = pie(cfg);
            q.next_update = Some(Time::MAX);
            q.vars.prob = MAX_PROB / 2;
            q.vars.qdelay = ticks(ms(100));
            // Overload from t = 10 ms: 2 arrivals and 1 departure every 0.25 ms.
            let start = ms(10);
            let mut first_drop = None;
            let mut t = start;
            while t < ms(400) && first_drop.is_none() {
                for _ in 0..2 {
                    if q.enqueue(pkt(Ecn::NotEct), t) == Enqueued::Dropped {
                        first_drop = Some(t);
                    }
                }
                q.dequeue(t);
                t += us(250);
            }
            // The allowance is spent by dequeue time, counted from the first dequeue.
            let elapsed = first_drop.expect("drops after the allowance").as_nanos() - start.as_nanos();
            let mb = ms(max_burst).as_nanos();
            assert!(elapsed >= mb && elapsed <= mb + ms(2).as_nanos(), "max_burst {max_burst} ms: first drop after {elapsed} ns");
        }
    }

    // ---- delay estimators ----

    #[test]
    fn timestamp_mode_delay_is_the_last_sojourn_and_zero_when_emptied() {
        let mut q = pie(PieConfig::default());
        q.enqueue(pkt(Ecn::NotEct), ms(1));
        q.enqueue(pkt(Ecn::NotEct), ms(2));
        q.dequeue(ms(10));
        assert_eq!(q.vars.qdelay, ticks(ms(10)) - ticks(ms(1)));
        q.dequeue(ms(12));
        assert_eq!(q.vars.qdelay, 0, "the queue emptied");
    }

    /// One 1514-byte frame every 242.24 us: 50 Mbit/s.
    const GAP: Time = Time(242_240);

    /// Dequeues `n` packets, one per [`GAP`], the first at `from`; returns the times.
    fn drain_at_50mbit(q: &mut Pie, from: Time, n: usize) -> Vec<Time> {
        let times: Vec<Time> = (0..n as u64).map(|i| from + Time(GAP.0 * i)).collect();
        for &t in &times {
            q.dequeue(t);
        }
        times
    }

    #[test]
    fn rate_estimator_measures_over_dq_threshold_bytes() {
        let cfg = PieConfig { dq_rate_estimator: true, ..PieConfig::default() };
        let mut q = pie(cfg);
        q.next_update = Some(Time::MAX);
        for _ in 0..40 {
            q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        }
        let t1 = drain_at_50mbit(&mut q, Time::ZERO, 11);
        // The cycle starts at the first dequeue (backlog 39 x 1514 >= 16384) and counts that
        // packet's bytes; it completes when 16384 bytes have left: 11 frames = 16654 bytes,
        // over the 10 gaps from the first to the eleventh dequeue.
        let bytes = 11 * 1514u64;
        let sample1 = (bytes << 8) / (ticks(t1[10]) - ticks(t1[0]));
        assert_eq!(q.vars.avg_dq_rate as u64, sample1);
        // 29 frames are still queued, so a second cycle starts at the eleventh dequeue; it
        // counts the next 11 frames over 11 gaps and is averaged in with weight 1/8.
        let t2 = drain_at_50mbit(&mut q, t1[10] + GAP, 11);
        let sample2 = (bytes << 8) / (ticks(t2[10]) - ticks(t1[10]));
        assert_eq!(q.vars.avg_dq_rate as u64, sample1 - (sample1 >> 3) + (sample2 >> 3));
        // Delay = backlog / rate at the next update.
        let backlog = q.queue.backlog();
        q.calculate_probability(backlog);
        assert_eq!(q.vars.qdelay, (backlog << 8) / q.vars.avg_dq_rate as u64);
        // Close to backlog / (1514 B per 242.24 us), a little low: the first cycle counts
        // n frames over n - 1 gaps, and integer rates truncate.
        let d_ms = ticks_to_ms(q.vars.qdelay);
        let ideal = backlog as f64 / 1514.0 * 0.24224;
        assert!(d_ms > ideal * 0.9 && d_ms < ideal * 1.01, "{d_ms} vs {ideal}");
    }

    #[test]
    fn rate_estimator_with_threshold_in_packets() {
        let cfg = PieConfig { dq_rate_estimator: true, dq_threshold: Limit::Packets(5), ..PieConfig::default() };
        let mut q = pie(cfg);
        q.next_update = Some(Time::MAX);
        for _ in 0..7 {
            q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        }
        // First dequeue leaves 6 >= 5 queued: a cycle starts; it completes at the 5th packet.
        let times = drain_at_50mbit(&mut q, Time::ZERO, 5);
        let dt = ticks(times[4]) - ticks(times[0]);
        assert_eq!(q.vars.avg_dq_rate as u64, ((5 * 1514u64) << 8) / dt);
        // Two packets remain (< 5): no new cycle.
        assert_eq!(q.vars.dq_count, None);
        // With fewer than 5 queued no cycle starts at all.
        let mut q = pie(cfg);
        q.next_update = Some(Time::MAX);
        for _ in 0..5 {
            q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        }
        drain_at_50mbit(&mut q, Time::ZERO, 5);
        assert_eq!(q.vars.avg_dq_rate, 0);
    }

    #[test]
    fn rate_mode_burst_allowance_is_spent_per_completed_cycle() {
        let cfg = PieConfig { dq_rate_estimator: true, ..PieConfig::default() };
        let mut q = pie(cfg);
        q.next_update = Some(Time::MAX);
        for _ in 0..40 {
            q.enqueue(pkt(Ecn::NotEct), Time::ZERO);
        }
        drain_at_50mbit(&mut q, Time::ZERO, 10);
        assert_eq!(q.vars.burst_time, ticks(ms(150)), "no cycle completed yet: allowance untouched");
        drain_at_50mbit(&mut q, Time(GAP.0 * 10), 1);
        let spent = ticks(ms(150)) - q.vars.burst_time;
        assert_eq!(spent, ticks(Time(GAP.0 * 10)));
    }

    #[test]
    fn xstats_names_are_stable() {
        let mut out = vec![];
        pie(PieConfig::default()).xstats(&mut out);
        let names: Vec<_> = out.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["prob", "pie_qdelay", "burst_allowance"]);
        out.clear();
        pie(PieConfig { dq_rate_estimator: true, ..PieConfig::default() }).xstats(&mut out);
        assert_eq!(out.last().unwrap().0, "avg_dq_rate");
    }
}
