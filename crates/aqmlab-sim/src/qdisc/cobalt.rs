//! COBALT: CoDel and BLUE run side by side on one queue, as in Linux `net/sched/sch_cake.c`
//! (`struct cobalt_vars`, `cobalt_should_drop`, `cobalt_queue_full`, `cobalt_queue_empty`).
//!
//! The pieces are separate so that other COBALT variants (the SCE qdiscs' `lfq_cobalt`, which
//! runs two CoDel schedules and triggers BLUE on sojourn) can reuse them:
//! - [`inv_sqrt`] / [`control`]: 1/sqrt(count) in Q0.32 (16-entry cache built with four Newton
//!   steps per count, then one Newton step per count change) and the CoDel control law `t + interval/sqrt(count)`;
//! - [`Blue`]: the BLUE drop probability with its rate-limited increment and decrement;
//! - [`Schedule`]: CoDel's count / next-signal time / dropping flag;
//! - [`Cobalt`]: CAKE's combination, with its three entry points.
//!
//! COBALT's CoDel differs from RFC 8289 CoDel: one `next` time serves both as the delay
//! before the first signal and as the signal schedule; when the sojourn falls back below
//! target the count is not reset but decays by one per elapsed schedule step; and BLUE's
//! drops ignore ECN ("lack of ECN is deliberate"). Version read: torvalds/linux
//! `sch_cake.c` as of v6.18 (BLUE draw only for packets not already dropped).

use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::Time;

/// Count values whose 1/sqrt is taken from the exact cache (`REC_INV_SQRT_CACHE`).
const INV_SQRT_CACHE_LEN: u32 = 16;

/// One Newton iteration towards 1/sqrt(count), Q0.32 fixed point (`cobalt_newton_step`):
/// `x' = x/2 * (3 - count * x^2)`.
pub const fn newton_step(count: u32, isqrt: u32) -> u32 {
    let isqrt2 = (isqrt as u64 * isqrt as u64) >> 32;
    let val = (3u64 << 32).wrapping_sub(count as u64 * isqrt2) >> 2;
    ((val * isqrt as u64) >> (32 - 2 + 1)) as u32
}

/// `cobalt_cache_init`: four Newton steps per count, carried over from the previous count,
/// starting from ~1.0 (so entries 0 and 1 are both 0xFFFFFFFF).
const fn build_cache() -> [u32; INV_SQRT_CACHE_LEN as usize] {
    let mut cache = [0u32; INV_SQRT_CACHE_LEN as usize];
    let mut isqrt = u32::MAX;
    cache[0] = isqrt;
    let mut count = 1;
    while count < INV_SQRT_CACHE_LEN {
        let mut i = 0;
        while i < 4 {
            isqrt = newton_step(count, isqrt);
            i += 1;
        }
        cache[count as usize] = isqrt;
        count += 1;
    }
    cache
}

static INV_SQRT_CACHE: [u32; INV_SQRT_CACHE_LEN as usize] = build_cache();

/// 1/sqrt(count) after `count` changed by one from the count whose value was `prev`
/// (`cobalt_invsqrt`): from the cache below 16, one Newton step above.
pub fn inv_sqrt(count: u32, prev: u32) -> u32 {
    if count < INV_SQRT_CACHE_LEN {
        INV_SQRT_CACHE[count as usize]
    } else {
        newton_step(count, prev)
    }
}

/// The CoDel control law `t + interval * isqrt` (`cobalt_control`, `reciprocal_scale`).
/// Linux truncates `interval` to 32 bits of ns (4.29 s); here it is not truncated.
pub fn control(t: Time, interval: Time, isqrt: u32) -> Time {
    t + Time(((interval.0 as u128 * isqrt as u128) >> 32) as u64)
}

/// Signed `a - b` in ns (`ktime_sub`).
fn signed_sub(a: Time, b: Time) -> i128 {
    a.0 as i128 - b.0 as i128
}

/// `p_inc` default, 1/256 in Q0.32 (`cake_set_rate`).
pub const P_INC: u32 = 1 << 24;
/// `p_dec` default, 1/4096 in Q0.32.
pub const P_DEC: u32 = 1 << 20;

/// COBALT's parameters for one queue (`struct cobalt_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// CoDel interval: delay before the first signal and scale of the signal schedule.
    pub interval: Time,
    /// Sojourn above which the queue is over target; also BLUE's update hold-off.
    pub target: Time,
    /// Serialisation time of an MTU-sized packet at the queue's rate (0 when unshaped).
    pub mtu_time: Time,
    /// BLUE increment and decrement of `p_drop`, Q0.32.
    pub p_inc: u32,
    pub p_dec: u32,
}

impl Params {
    pub fn new(target: Time, interval: Time, mtu_time: Time) -> Params {
        Params { interval, target, mtu_time, p_inc: P_INC, p_dec: P_DEC }
    }
}

/// BLUE: a drop probability raised on overload and lowered when the queue is found empty,
/// each at most once per hold-off time (`p_drop`, `blue_timer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Blue {
    /// Drop probability, Q0.32.
    pub p_drop: u32,
    /// Time of the last change; `None` before the first (Linux's `blue_timer` starts at 0,
    /// which is long before any `now` measured from boot).
    pub timer: Option<Time>,
}

impl Blue {
    fn held(&self, now: Time, hold: Time) -> bool {
        self.timer.is_some_and(|t| signed_sub(now, t) <= hold.0 as i128)
    }
    /// Adds `p_inc` (saturating at 1) unless the last change was within `hold`. Returns true
    /// when BLUE went from quiescent to active.
    pub fn raise(&mut self, now: Time, hold: Time, p_inc: u32) -> bool {
        if self.held(now, hold) {
            return false;
        }
        let up = self.p_drop == 0;
        self.p_drop = self.p_drop.saturating_add(p_inc);
        self.timer = Some(now);
        up
    }
    /// Subtracts `p_dec` (down to 0) if active and the last change was not within `hold`.
    /// Returns true when BLUE went from active to quiescent.
    pub fn lower(&mut self, now: Time, hold: Time, p_dec: u32) -> bool {
        if self.p_drop == 0 || self.held(now, hold) {
            return false;
        }
        self.p_drop = self.p_drop.saturating_sub(p_dec);
        self.timer = Some(now);
        self.p_drop == 0
    }
    /// One BLUE draw: true (drop) with probability `p_drop`. Draws only when active.
    pub fn draw(&self, rng: &mut Stream) -> bool {
        self.p_drop != 0 && rng.next_u32() < self.p_drop
    }
    /// `p_drop` as a probability in [0, 1).
    pub fn probability(&self) -> f64 {
        self.p_drop as f64 / 4_294_967_296.0
    }
}

/// CoDel's signalling state as COBALT keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Signals in the current episode; decays by one per schedule step while not dropping.
    pub count: u32,
    /// 1/sqrt(count), Q0.32. Starts at 0 as in Linux (`cobalt_vars_init` zeroes the
    /// struct), so a never-used queue's first `next` is `now`, not `now + interval`.
    pub isqrt: u32,
    /// Time of the next signal, or an activity timeout when `count` is 0 (`drop_next`).
    pub next: Time,
    pub dropping: bool,
}

impl Schedule {
    /// count += 1 (saturating) and its 1/sqrt.
    pub fn count_up(&mut self) {
        self.count = self.count.saturating_add(1);
        self.isqrt = inv_sqrt(self.count, self.isqrt);
    }
    /// count -= 1 and its 1/sqrt.
    pub fn count_down(&mut self) {
        self.count -= 1;
        self.isqrt = inv_sqrt(self.count, self.isqrt);
    }
    /// `next` advanced by one step of the control law at the current count.
    pub fn advance(&mut self, interval: Time) {
        self.next = control(self.next, interval, self.isqrt);
    }
    /// Whether a step is due: a count is held and `now` has reached `next`.
    pub fn due(&self, now: Time) -> bool {
        self.count != 0 && now >= self.next
    }
}

/// What COBALT decided about a dequeued packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Passed with CE set by the CoDel schedule.
    Marked,
    /// CoDel signal on a Not-ECT packet.
    CodelDrop,
    /// BLUE drop (regardless of ECN).
    BlueDrop,
}

impl Verdict {
    pub fn is_drop(self) -> bool {
        matches!(self, Verdict::CodelDrop | Verdict::BlueDrop)
    }
}

/// CAKE's per-queue COBALT state (`struct cobalt_vars`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cobalt {
    pub codel: Schedule,
    pub blue: Blue,
}

impl Cobalt {
    /// `cobalt_queue_full`: the queue overflowed and was pruned. Raises BLUE (rate-limited by
    /// `target`) and arms CoDel to signal from now on. Returns true if BLUE became active.
    pub fn queue_full(&mut self, p: &Params, now: Time) -> bool {
        let up = self.blue.raise(now, p.target, p.p_inc);
        self.codel.dropping = true;
        self.codel.next = now;
        if self.codel.count == 0 {
            self.codel.count = 1;
        }
        up
    }

    /// `cobalt_queue_empty`: the queue was serviced and found empty. Lowers BLUE (rate-limited
    /// by `target`), leaves the dropping state and lets the count decay by one step if due.
    /// Returns true if BLUE became quiescent.
    pub fn queue_empty(&mut self, p: &Params, now: Time) -> bool {
        let down = self.blue.lower(now, p.target, p.p_dec);
        self.codel.dropping = false;
        if self.codel.due(now) {
            self.codel.count_down();
            self.codel.advance(p.interval);
        }
        down
    }

    /// Whether the queue still holds state that must decay before it can be forgotten
    /// (CAKE keeps such empty queues on its "decaying" list).
    pub fn is_active(&self, now: Time) -> bool {
        self.blue.p_drop != 0 || self.codel.count != 0 || now < self.codel.next
    }

    /// `cobalt_should_drop` on a freshly dequeued packet: may set CE on it. `bulk_flows`
    /// scales the minimum sojourn (CAKE passes 0 unless in ingress mode).
    pub fn should_drop(&mut self, p: &Params, now: Time, pkt: &mut Packet, bulk_flows: u32, rng: &mut Stream) -> Verdict {
        let c = &mut self.codel;
        let sojourn = now - pkt.enqueued_at;
        let mut schedule = signed_sub(now, c.next);
        let over_target = sojourn > p.target
            && sojourn.0 > p.mtu_time.0.saturating_mul(bulk_flows as u64 * 2)
            && sojourn.0 > p.mtu_time.0.saturating_mul(4);
        let next_due = c.count != 0 && schedule >= 0;

        if over_target {
            if !c.dropping {
                c.dropping = true;
                c.next = control(now, p.interval, c.isqrt);
            }
            if c.count == 0 {
                c.count = 1;
            }
        } else if c.dropping {
            c.dropping = false;
        }

        let mut verdict = Verdict::Pass;
        if next_due && c.dropping {
            verdict = if pkt.ecn.set_ce() { Verdict::Marked } else { Verdict::CodelDrop };
            c.count_up();
            c.advance(p.interval);
            schedule = signed_sub(now, c.next);
        } else {
            // Not signalling: each schedule step that has passed takes one off the count.
            let mut due = next_due;
            while due {
                c.count_down();
                c.advance(p.interval);
                schedule = signed_sub(now, c.next);
                due = c.count != 0 && schedule >= 0;
            }
        }

        if !verdict.is_drop() && self.blue.draw(rng) {
            verdict = Verdict::BlueDrop;
        }

        // drop_next doubles as an activity timeout.
        if c.count == 0 {
            c.next = now + p.interval;
        } else if schedule > 0 && !verdict.is_drop() {
            c.next = now;
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};

    const MS: u64 = 1_000_000;

    fn params() -> Params {
        Params::new(Time::from_millis(5), Time::from_millis(100), Time::ZERO)
    }

    fn pkt(enqueued_at: Time, ecn: Ecn) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1514);
        p.enqueued_at = enqueued_at;
        p.ecn = ecn;
        p
    }

    #[test]
    fn inv_sqrt_cache_and_newton_steps_approximate_one_over_sqrt_count() {
        assert_eq!(INV_SQRT_CACHE[0], u32::MAX);
        assert_eq!(INV_SQRT_CACHE[1], u32::MAX);
        // Four Newton steps per count, carried from the previous count: within 0.1 % at
        // count 2 (the slowest to converge from 1.0) and 1e-6 from count 4.
        for n in 2..16u32 {
            let exact = (1u64 << 32) as f64 / (n as f64).sqrt();
            let err = (INV_SQRT_CACHE[n as usize] as f64 - exact).abs() / exact;
            assert!(err < if n < 4 { 1e-3 } else { 1e-6 }, "count {n}: {err}");
        }
        // Stepping up one count at a time beyond the cache, one Newton step each, stays within
        // 0.2 % of 1/sqrt(n) (the largest error is at 16, the first uncached count).
        let mut x = INV_SQRT_CACHE[15];
        for n in 16..2000u32 {
            x = inv_sqrt(n, x);
            let exact = (1u64 << 32) as f64 / (n as f64).sqrt();
            assert!((x as f64 - exact).abs() / exact < 2e-3, "count {n}: {x} vs {exact}");
        }
    }

    /// With a standing queue, COBALT signals at the CoDel control law: the k-th signal after
    /// the first comes interval/sqrt(k+1) after the previous one (count 2, 3, ...).
    #[test]
    fn codel_part_signals_at_interval_over_sqrt_count() {
        let p = params();
        let mut c = Cobalt::default();
        // A queue that has signalled before (its 1/sqrt is the cached 1.0 rather than Linux's
        // never-used 0, tested below) and was active just now (activity timeout pending).
        c.codel.isqrt = u32::MAX;
        c.codel.next = Time::from_secs(1) + p.interval;
        let mut rng = Stream::new(1, "cobalt");
        let step = Time::from_micros(100);
        let mut now = Time::from_secs(1);
        let mut signals = vec![];
        while now < Time::from_secs(3) {
            // Every packet waited 20 ms: always over target.
            let mut pk = pkt(now - Time::from_millis(20), Ecn::Ect0);
            match c.should_drop(&p, now, &mut pk, 0, &mut rng) {
                Verdict::Marked => {
                    assert_eq!(pk.ecn, Ecn::Ce);
                    signals.push(now)
                }
                v => assert_eq!(v, Verdict::Pass),
            }
            now += step;
        }
        // The first signal comes one interval after the sojourn first exceeded target.
        assert_eq!(signals[0], Time::from_secs(1) + Time::from_millis(100));
        for (k, w) in signals.windows(2).enumerate().take(40) {
            let count = k as f64 + 2.0;
            let expect = 100.0 * MS as f64 / count.sqrt();
            let got = (w[1] - w[0]).0 as f64;
            // Packets arrive every 100 us, so a signal lands on the first packet at or after
            // the scheduled time.
            assert!(got >= expect - step.0 as f64 - 1.0 && got <= expect + step.0 as f64 + 1.0, "signal {k}: gap {got} ns, law {expect}");
        }
    }

    #[test]
    fn never_signalled_queue_signals_on_the_second_over_target_packet() {
        // Linux zeroes cobalt_vars, so rec_inv_sqrt is 0 until the count first steps:
        // entering the dropping state then schedules the first signal at `now`, although the
        // queue was active (activity timeout pending) and below target until now.
        let p = params();
        let mut c = Cobalt::default();
        let mut rng = Stream::new(1, "cobalt");
        let t = Time::from_secs(1);
        c.codel.next = t + Time::from_millis(50);
        let mut a = pkt(t - Time::from_millis(20), Ecn::NotEct);
        assert_eq!(c.should_drop(&p, t, &mut a, 0, &mut rng), Verdict::Pass);
        assert_eq!(c.codel.next, t);
        let mut b = pkt(t - Time::from_millis(20), Ecn::NotEct);
        assert_eq!(c.should_drop(&p, t + Time(1), &mut b, 0, &mut rng), Verdict::CodelDrop);
        assert_eq!(c.codel.count, 2);
    }

    #[test]
    fn count_decays_one_step_per_schedule_when_below_target() {
        let p = params();
        let mut c = Cobalt::default();
        c.codel = Schedule { count: 9, isqrt: INV_SQRT_CACHE[9], next: Time::from_secs(1), dropping: false };
        let mut rng = Stream::new(1, "cobalt");
        // Below target, at exactly the scheduled time: one decrement, next += interval/sqrt(8).
        let mut pk = pkt(Time::from_secs(1), Ecn::Ect0);
        assert_eq!(c.should_drop(&p, Time::from_secs(1), &mut pk, 0, &mut rng), Verdict::Pass);
        assert_eq!(c.codel.count, 8);
        assert_eq!(c.codel.next, control(Time::from_secs(1), p.interval, INV_SQRT_CACHE[8]));
        // Long after: the count runs all the way down and the activity timeout is set.
        let later = Time::from_secs(10);
        let mut pk = pkt(later, Ecn::Ect0);
        c.should_drop(&p, later, &mut pk, 0, &mut rng);
        assert_eq!(c.codel.count, 0);
        assert_eq!(c.codel.next, later + p.interval);
        assert!(c.is_active(later) && !c.is_active(later + p.interval));
    }

    #[test]
    fn sojourn_must_exceed_target_and_four_mtu_times() {
        let mut p = params();
        p.mtu_time = Time::from_millis(2); // 4 x mtu_time = 8 ms > target
        let mut c = Cobalt::default();
        let mut rng = Stream::new(1, "cobalt");
        let now = Time::from_secs(1);
        let mut pk = pkt(now - Time::from_millis(7), Ecn::Ect0);
        c.should_drop(&p, now, &mut pk, 0, &mut rng);
        assert!(!c.codel.dropping);
        let mut pk = pkt(now - Time::from_millis(9), Ecn::Ect0);
        c.should_drop(&p, now, &mut pk, 0, &mut rng);
        assert!(c.codel.dropping);
        // With 3 bulk flows the floor is 2 x 3 x mtu_time = 12 ms.
        let mut c = Cobalt::default();
        c.should_drop(&p, now, &mut pk, 3, &mut rng);
        assert!(!c.codel.dropping);
    }

    #[test]
    fn blue_rises_on_overflow_and_decays_when_empty_rate_limited_by_target() {
        let p = params();
        let mut c = Cobalt::default();
        let t0 = Time::from_secs(1);
        assert!(c.queue_full(&p, t0));
        assert_eq!(c.blue.p_drop, P_INC);
        assert!(c.codel.dropping && c.codel.count == 1 && c.codel.next == t0);
        // A second overflow within `target` does not raise it again; after target it does.
        assert!(!c.queue_full(&p, t0 + p.target));
        assert_eq!(c.blue.p_drop, P_INC);
        c.queue_full(&p, t0 + p.target + Time(1));
        assert_eq!(c.blue.p_drop, 2 * P_INC);
        assert!((c.blue.probability() - 2.0 / 256.0).abs() < 1e-12);
        // Empty: -1/4096 per target period; 32 decrements bring 2/256 back to zero.
        let mut now = t0 + p.target + Time(1);
        let mut steps = 0;
        loop {
            now += p.target + Time(1);
            steps += 1;
            if c.queue_empty(&p, now) {
                break;
            }
            assert!(!c.queue_empty(&p, now), "rate-limited within target");
        }
        assert_eq!((steps, c.blue.p_drop), (32, 0));
        assert!(!c.codel.dropping);
        // Saturates at 1.
        let mut b = Blue { p_drop: u32::MAX - 5, timer: None };
        b.raise(t0, p.target, P_INC);
        assert_eq!(b.p_drop, u32::MAX);
    }

    #[test]
    fn blue_drops_ect_packets_at_p_drop() {
        let p = params();
        let mut c = Cobalt::default();
        c.blue.p_drop = 1 << 30; // 1/4
        let mut rng = Stream::new(3, "blue");
        let n = 40_000;
        let mut drops = 0;
        for i in 0..n {
            let now = Time::from_secs(1) + Time::from_micros(i);
            let mut pk = pkt(now, Ecn::Ect0); // no queueing delay: CoDel stays quiet
            match c.should_drop(&p, now, &mut pk, 0, &mut rng) {
                Verdict::BlueDrop => drops += 1,
                v => assert_eq!(v, Verdict::Pass),
            }
        }
        let frac = drops as f64 / n as f64;
        assert!((frac - 0.25).abs() < 0.01, "{frac}");
    }
}
