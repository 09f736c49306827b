//! COBALT: CoDel and BLUE run side by side on one queue, as in Linux `net/sched/sch_cake.c`
//! (`struct cobalt_vars`, `cobalt_should_drop`, `cobalt_queue_full`, `cobalt_queue_empty`).
//!
//! The pieces are separate so that other COBALT variants (the SCE qdiscs' `lfq_cobalt`, which
//! runs two CoDel schedules and triggers BLUE on sojourn) can reuse them:
//! - [`inv_sqrt`] / [`control`]: 1/sqrt(count) in Q0.32 (16-entry cache built with four Newton
//!   steps per count, then one Newton step per count change) and the CoDel control law `t + interval/sqrt(count)`;
//! - [`Blue`]: the BLUE drop probability with its rate-limited increment and decrement;
//! - [`Schedule`]: CoDel's count / next-signal time / dropping flag;
//! - [`Cobalt`]: CAKE's combination, with its three entry points;
//! - [`CobaltSce`]: the SCE qdiscs' development of it (chromi/sce `sch_cnq_codel_af.c`,
//!   `sch_twin_codel_af.c`, `sch_lfq_cobalt.c`): a second CoDel schedule that marks ECT(0)
//!   packets ECT(1) at a lower target and "reflects" its schedule when it stops and restarts,
//!   a CE schedule, BLUE raised when the sojourn passes a threshold, and Approximate Fairness
//!   (sojourn weighted by the flow's share of the queue, [`Share`]).
//!
//! COBALT's CoDel differs from RFC 8289 CoDel: one `next` time serves both as the delay
//! before the first signal and as the signal schedule; when the sojourn falls back below
//! target the count is not reset but decays by one per elapsed schedule step; and BLUE's
//! drops ignore ECN ("lack of ECN is deliberate"). Version read: torvalds/linux
//! `sch_cake.c` as of v6.18 (BLUE draw only for packets not already dropped).

use crate::packet::{Ecn, Packet};
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
    /// Whether the last `should_drop` CE-marked its packet (`cobalt_vars.ecn_marked`). Set
    /// even when BLUE then decided to drop it, so CAKE can count the mark on a last packet
    /// that is delivered anyway (`tin_ecn_mark += !!flow->cvars.ecn_marked`).
    pub ecn_marked: bool,
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
        self.ecn_marked = false;
        if next_due && c.dropping {
            self.ecn_marked = pkt.ecn.set_ce();
            verdict = if self.ecn_marked { Verdict::Marked } else { Verdict::CodelDrop };
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

/// `cobalt_reflect` (chromi/sce): `2·now − t + interval/sqrt(count)`. A schedule that was
/// due at `t` in the future is mirrored about `now`, so the time that was left before the
/// next signal becomes time already elapsed towards the next one.
pub fn reflect(now: Time, t: Time, interval: Time, isqrt: u32) -> Time {
    let then = (2 * now.0 as i128 - t.0 as i128).max(0) as u64;
    control(Time(then), interval, isqrt)
}

/// COBALT-SCE parameters (`struct cobalt_params` of the SCE qdiscs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SceParams {
    /// CE schedule (CoDel with CE marking, or drop for Not-ECT).
    pub ce_interval: Time,
    pub ce_target: Time,
    /// SCE schedule; `None` = SCE marking off (the kernel's `sce_interval == 0`).
    pub sce_interval: Option<Time>,
    pub sce_target: Time,
    /// BLUE is raised when the (weighted) sojourn exceeds this.
    pub blue_thresh: Time,
    /// Left at 0 by these qdiscs (so the 2/4 x MTU-time sojourn floors are inert).
    pub mtu_time: Time,
    pub p_inc: u32,
    pub p_dec: u32,
}

impl SceParams {
    /// `cnq_init` / `lfq_init_cparams`: CE 5 ms / 100 ms, SCE off (target 2.5 ms), BLUE
    /// threshold 400 ms, p_inc 1/256, p_dec 1/4096.
    pub fn new() -> SceParams {
        SceParams {
            ce_interval: Time::from_millis(100),
            ce_target: Time::from_millis(5),
            sce_interval: None,
            sce_target: Time::from_micros(2500),
            blue_thresh: Time::from_millis(400),
            mtu_time: Time::ZERO,
            p_inc: P_INC,
            p_dec: P_DEC,
        }
    }
}

impl Default for SceParams {
    fn default() -> Self {
        SceParams::new()
    }
}

/// Approximate Fairness: the flow's queue occupancy relative to its fair share. The AQM
/// compares `sojourn · flow_backlog · active_flows` with `threshold · total_backlog`
/// (`cobalt_should_drop` of cnq/twin_codel_af: "weighted sojourn is compared against weighted
/// targets; this penalises queue occupancy beyond fair share").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Packets of this flow in the queue (counting the one being dequeued).
    pub flow_backlog: u32,
    /// Flows with packets in the queue.
    pub active_flows: u32,
    /// Packets in the queue (counting the one being dequeued).
    pub total_backlog: u32,
}

impl Share {
    /// No weighting (lfq_cobalt): the plain sojourn is compared.
    pub const PLAIN: Share = Share { flow_backlog: 1, active_flows: 1, total_backlog: 1 };

    /// Whether the weighted sojourn exceeds the weighted `threshold`.
    pub fn exceeds(&self, sojourn: Time, threshold: Time) -> bool {
        sojourn.0 as u128 * self.flow_backlog as u128 * self.active_flows as u128 > threshold.0 as u128 * self.total_backlog as u128
    }
}

/// What COBALT-SCE did to a dequeued packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SceSignals {
    /// ECT(0) was changed to ECT(1) by the SCE schedule.
    pub sce_marked: bool,
    /// CE was set by the CE schedule.
    pub ce_marked: bool,
    /// Drop it: a CE-schedule signal on a Not-ECT packet, or a BLUE drop.
    pub drop: bool,
}

/// The per-flow state of COBALT-SCE (`struct cobalt_vars` of the SCE qdiscs): two CoDel
/// schedules and BLUE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CobaltSce {
    pub ce: Schedule,
    pub sce: Schedule,
    pub blue: Blue,
}

/// Changes `this.count` by one and, as `cobalt_invsqrt` does, refreshes both schedules'
/// 1/sqrt (the other one's count is unchanged; above the cache it gets one more Newton step).
fn recount(this: &mut Schedule, other: &mut Schedule, up: bool) {
    this.count = if up { this.count.saturating_add(1) } else { this.count - 1 };
    this.isqrt = inv_sqrt(this.count, this.isqrt);
    other.isqrt = inv_sqrt(other.count, other.isqrt);
}

/// One schedule's half of the SCE qdiscs' `cobalt_should_drop`, up to the signal: enters the
/// signalling state when over target (first signal one step from now), leaves it otherwise;
/// on either transition the next time restarts one step from now, or, with `reflecting`
/// (the SCE schedule) and no signal overdue, is reflected ([`reflect`]). When no signal is
/// due, each elapsed step takes one off the count. Returns whether a signal is due on this
/// packet and the kernel's `schedule` (now − next, as last computed).
fn half_step(this: &mut Schedule, other: &mut Schedule, over: bool, now: Time, interval: Time, reflecting: bool) -> (bool, i128) {
    let mut schedule = signed_sub(now, this.next);
    let mut next_due = this.count != 0 && schedule >= 0;
    let restart = |s: &Schedule, due: bool| {
        if reflecting && !due {
            reflect(now, s.next, interval, s.isqrt)
        } else {
            control(now, interval, s.isqrt)
        }
    };
    if over {
        if !this.dropping {
            this.dropping = true;
            this.next = restart(this, next_due);
            next_due = false;
        }
        if this.count == 0 {
            this.count = 1;
        }
    } else if this.dropping {
        this.next = restart(this, next_due);
        this.dropping = false;
    }
    if next_due && this.dropping {
        return (true, schedule);
    }
    while next_due {
        recount(this, other, false);
        this.next = control(this.next, interval, this.isqrt);
        schedule = signed_sub(now, this.next);
        next_due = this.count != 0 && schedule >= 0;
    }
    (false, schedule)
}

impl CobaltSce {
    /// `cobalt_should_drop` of the SCE qdiscs on a dequeued packet; may set ECT(1) or CE on
    /// it. `share` weights the sojourn for Approximate Fairness ([`Share::PLAIN`]: none).
    pub fn should_drop(&mut self, p: &SceParams, now: Time, pkt: &mut Packet, share: Share, rng: &mut Stream) -> SceSignals {
        let sojourn = now - pkt.enqueued_at;
        let mut out = SceSignals::default();

        // SCE schedule, if enabled: marks by turning ECT(0) into ECT(1) (INET_ECN_set_ect1);
        // a due signal that finds no ECT(0) packet stays due.
        let over = p.sce_interval.is_some() && share.exceeds(sojourn, p.sce_target) && sojourn.0 > p.mtu_time.0.saturating_mul(2);
        let sce_interval = p.sce_interval.unwrap_or(Time::ZERO);
        let (due, _) = half_step(&mut self.sce, &mut self.ce, over, now, sce_interval, true);
        if due && pkt.ecn == Ecn::Ect0 {
            pkt.mark_sce();
            out.sce_marked = true;
            recount(&mut self.sce, &mut self.ce, true);
            self.sce.advance(sce_interval);
        }

        // CE schedule: CE-marks ECN-capable packets, drops the others.
        let over = share.exceeds(sojourn, p.ce_target) && sojourn.0 > p.mtu_time.0.saturating_mul(4);
        let (due, mut schedule) = half_step(&mut self.ce, &mut self.sce, over, now, p.ce_interval, false);
        if due {
            out.ce_marked = pkt.ecn.set_ce();
            out.drop = !out.ce_marked;
            recount(&mut self.ce, &mut self.sce, true);
            self.ce.advance(p.ce_interval);
            schedule = signed_sub(now, self.ce.next);
        }

        // BLUE: raised by a (weighted) sojourn above its threshold; drops regardless of ECN.
        if share.exceeds(sojourn, p.blue_thresh) {
            self.queue_full(p, now);
        }
        if self.blue.draw(rng) {
            out.drop = true;
        }

        // The CE schedule's next time doubles as an activity timeout.
        if self.ce.count == 0 {
            self.ce.next = now + p.ce_interval;
        } else if schedule > 0 && !out.drop {
            self.ce.next = now;
        }
        out
    }

    /// `cobalt_queue_full`: raises BLUE (at most once per CE target) and arms both schedules
    /// to signal from now. Returns true if BLUE became active.
    pub fn queue_full(&mut self, p: &SceParams, now: Time) -> bool {
        let up = self.blue.raise(now, p.ce_target, p.p_inc);
        let arm = |s: &mut Schedule| {
            s.dropping = true;
            s.next = now;
            if s.count == 0 {
                s.count = 1;
            }
        };
        arm(&mut self.ce);
        if p.sce_interval.is_some() {
            arm(&mut self.sce);
        }
        up
    }

    /// `cobalt_queue_empty` of the SCE qdiscs: lowers BLUE (at most once per CE target),
    /// takes every elapsed step off both counts, and leaves the signalling states: the CE
    /// schedule restarts one step from now, the SCE schedule is reflected. Returns true if
    /// BLUE became quiescent.
    pub fn queue_empty(&mut self, p: &SceParams, now: Time) -> bool {
        let down = self.blue.lower(now, p.ce_target, p.p_dec);
        let sce_interval = p.sce_interval.unwrap_or(Time::ZERO);
        while self.ce.due(now) {
            recount(&mut self.ce, &mut self.sce, false);
            self.ce.advance(p.ce_interval);
        }
        if self.ce.dropping {
            self.ce.next = control(now, p.ce_interval, self.ce.isqrt);
            self.ce.dropping = false;
        }
        while self.sce.due(now) {
            recount(&mut self.sce, &mut self.ce, false);
            self.sce.advance(sce_interval);
        }
        if self.sce.dropping {
            self.sce.next = reflect(now, self.sce.next, sce_interval, self.sce.isqrt);
            self.sce.dropping = false;
        }
        down
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
        let mut c = Cobalt {
            codel: Schedule { count: 9, isqrt: INV_SQRT_CACHE[9], next: Time::from_secs(1), dropping: false },
            ..Cobalt::default()
        };
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
    // ---- COBALT-SCE (chromi/sce) ----

    fn sce_params() -> SceParams {
        SceParams { sce_interval: Some(Time::from_millis(25)), ..SceParams::new() }
    }

    /// A flow that has signalled before: 1/sqrt at the cached 1.0 for both schedules.
    fn used() -> CobaltSce {
        let mut c = CobaltSce::default();
        c.ce.isqrt = u32::MAX;
        c.sce.isqrt = u32::MAX;
        c
    }

    /// Standing queue between the SCE and CE targets: only the SCE schedule signals, turning
    /// ECT(0) into ECT(1) at the CoDel law on the SCE interval: the first mark one interval
    /// after entering (the schedule reflected about a neutral `next = now`), then
    /// 25 ms / sqrt(k) apart.
    #[test]
    fn sce_schedule_marks_ect1_at_interval_over_sqrt_count() {
        let p = sce_params();
        let mut c = used();
        let t0 = Time::from_secs(1);
        c.sce.next = t0;
        c.ce.next = t0 + p.ce_interval;
        let mut rng = Stream::new(1, "sce");
        let step = Time::from_micros(100);
        let mut now = t0;
        let mut marks = vec![];
        while now < t0 + Time::from_secs(2) {
            let mut pk = pkt(now - Time::from_millis(3), Ecn::Ect0);
            let s = c.should_drop(&p, now, &mut pk, Share::PLAIN, &mut rng);
            assert!(!s.ce_marked && !s.drop, "3 ms is below the CE target");
            assert_eq!(s.sce_marked, pk.ecn == Ecn::Ect1);
            if s.sce_marked {
                marks.push(now);
            }
            now += step;
        }
        assert_eq!(marks[0], t0 + p.sce_interval.unwrap());
        for (k, w) in marks.windows(2).enumerate().take(40) {
            let expect = 25e6 / (k as f64 + 2.0).sqrt();
            let got = (w[1] - w[0]).0 as f64;
            assert!((got - expect).abs() <= step.0 as f64 + 1.0, "mark {k}: gap {got} ns, law {expect}");
        }
        assert_eq!(c.sce.count as usize, marks.len() + 1);
        // A due signal that meets a packet it cannot mark (Not-ECT, or already ECT(1)) stays
        // due for the next ECT(0) packet.
        let mut c = used();
        c.sce = Schedule { count: 3, isqrt: inv_sqrt(3, 0), next: t0, dropping: true };
        let mut a = pkt(t0 - Time::from_millis(3), Ecn::NotEct);
        assert_eq!(c.should_drop(&p, t0, &mut a, Share::PLAIN, &mut rng), SceSignals::default());
        assert_eq!((a.ecn, c.sce.count), (Ecn::NotEct, 3));
        let mut b = pkt(t0 - Time::from_millis(3), Ecn::Ect0);
        assert!(c.should_drop(&p, t0, &mut b, Share::PLAIN, &mut rng).sce_marked);
        assert_eq!(c.sce.count, 4);
    }

    /// Leaving and re-entering the SCE state reflects the schedule about now: a signal that
    /// was 10 ms away becomes 10 ms ago, plus one step. The CE schedule instead restarts one
    /// step from now.
    #[test]
    fn sce_schedule_reflects_on_leaving_and_reentering() {
        let p = sce_params();
        let sce_iv = p.sce_interval.unwrap();
        let mut rng = Stream::new(1, "sce");
        let t = Time::from_secs(5);
        let mut c = used();
        let isqrt4 = inv_sqrt(4, 0);
        c.sce = Schedule { count: 4, isqrt: isqrt4, next: t + Time::from_millis(10), dropping: true };
        c.ce = Schedule { count: 4, isqrt: isqrt4, next: t + Time::from_millis(10), dropping: true };
        // Below both targets: leave. count 4: step = 25 ms / 2 = 12.5 ms (CE: 50 ms).
        let mut a = pkt(t, Ecn::Ect0);
        c.should_drop(&p, t, &mut a, Share::PLAIN, &mut rng);
        assert!(!c.sce.dropping && !c.ce.dropping);
        assert_eq!(c.sce.next, t - Time::from_millis(10) + control(Time::ZERO, sce_iv, isqrt4));
        assert!(c.sce.next.0.abs_diff((t + Time::from_micros(2_500)).0) <= 1, "{:?}", c.sce.next);
        assert_eq!(c.ce.next, control(t, p.ce_interval, isqrt4));
        // Re-enter 1 ms later (3 ms sojourn: SCE only), about 1.5 ms before the reflected
        // time: reflected again, to about 1.5 ms ago + 12.5 ms (not 1 ms + 12.5 ms).
        let t1 = t + Time::from_millis(1);
        let before = c.sce.next;
        let mut b = pkt(t1 - Time::from_millis(3), Ecn::Ect0);
        c.should_drop(&p, t1, &mut b, Share::PLAIN, &mut rng);
        assert!(c.sce.dropping && !c.ce.dropping);
        assert_eq!(c.sce.next, Time(2 * t1.0 - before.0) + control(Time::ZERO, sce_iv, isqrt4));
        assert!(c.sce.next.0.abs_diff((t + Time::from_millis(12)).0) <= 2);
        // Re-entering with a signal overdue restarts one step from now instead.
        let mut c = used();
        c.sce = Schedule { count: 4, isqrt: isqrt4, next: t - Time::from_millis(1), dropping: false };
        let mut d = pkt(t - Time::from_millis(3), Ecn::Ect0);
        let s = c.should_drop(&p, t, &mut d, Share::PLAIN, &mut rng);
        assert!(!s.sce_marked, "entering never signals at once");
        assert_eq!(c.sce.next, control(t, sce_iv, isqrt4));
        // queue_empty reflects the SCE schedule too, and restarts the CE one.
        let mut c = used();
        c.sce = Schedule { count: 4, isqrt: isqrt4, next: t + Time::from_millis(10), dropping: true };
        c.ce = Schedule { count: 4, isqrt: isqrt4, next: t + Time::from_millis(10), dropping: true };
        c.queue_empty(&p, t);
        assert_eq!(c.sce.next, t - Time::from_millis(10) + control(Time::ZERO, sce_iv, isqrt4));
        assert_eq!(c.ce.next, control(t, p.ce_interval, isqrt4));
    }

    /// The CE schedule: above the CE target, CE on ECN-capable packets (also those the SCE
    /// schedule just made ECT(1)) and drops of Not-ECT ones, 100 ms / sqrt(k) apart; the
    /// first one interval after entering.
    #[test]
    fn ce_schedule_marks_or_drops_at_interval_over_sqrt_count() {
        let p = sce_params();
        for ecn in [Ecn::Ect0, Ecn::NotEct] {
            let mut c = used();
            let t0 = Time::from_secs(1);
            c.ce.next = t0 + p.ce_interval;
            c.sce.next = t0;
            let mut rng = Stream::new(1, "ce");
            let step = Time::from_micros(100);
            let mut now = t0;
            let mut signals = vec![];
            while now < t0 + Time::from_secs(3) {
                let mut pk = pkt(now - Time::from_millis(20), ecn);
                let s = c.should_drop(&p, now, &mut pk, Share::PLAIN, &mut rng);
                if ecn == Ecn::Ect0 {
                    assert!(!s.drop);
                    assert_eq!(s.ce_marked, pk.ecn == Ecn::Ce);
                } else {
                    assert!(!s.ce_marked && !s.sce_marked && pk.ecn == Ecn::NotEct);
                }
                if s.ce_marked || s.drop {
                    signals.push(now);
                }
                now += step;
            }
            assert_eq!(signals[0], t0 + p.ce_interval, "{ecn:?}");
            for (k, w) in signals.windows(2).enumerate().take(40) {
                let expect = 100e6 / (k as f64 + 2.0).sqrt();
                let got = (w[1] - w[0]).0 as f64;
                assert!((got - expect).abs() <= step.0 as f64 + 1.0, "{ecn:?} signal {k}: gap {got}, law {expect}");
            }
        }
    }

    /// Approximate Fairness, closed form: over target iff
    /// sojourn · flow_backlog · active_flows > target · total_backlog. With 4 active flows and
    /// 100 packets queued, a flow holding 50 (twice its fair share of 25) is over the 5 ms CE
    /// target from 2.5 ms of sojourn; one holding 10 only from 12.5 ms.
    #[test]
    fn approximate_fairness_signals_a_flow_above_its_fair_share_earlier() {
        let p = SceParams::new();
        let fat = Share { flow_backlog: 50, active_flows: 4, total_backlog: 100 };
        let thin = Share { flow_backlog: 10, active_flows: 4, total_backlog: 100 };
        let fair = Share { flow_backlog: 25, active_flows: 4, total_backlog: 100 };
        let us = Time::from_micros;
        assert!(!fat.exceeds(us(2_500), p.ce_target) && fat.exceeds(us(2_500) + Time(1), p.ce_target));
        assert!(!thin.exceeds(us(12_500), p.ce_target) && thin.exceeds(us(12_500) + Time(1), p.ce_target));
        assert!(!fair.exceeds(us(5_000), p.ce_target) && fair.exceeds(us(5_000) + Time(1), p.ce_target));
        assert_eq!(Share::PLAIN.exceeds(us(5_001), p.ce_target), fair.exceeds(us(5_001), p.ce_target));
        // Through should_drop: at 4 ms of sojourn the fat flow enters the CE state, the thin
        // one does not.
        let mut rng = Stream::new(1, "af");
        let now = Time::from_secs(1);
        for (share, enters) in [(fat, true), (thin, false), (fair, false)] {
            let mut c = used();
            let mut pk = pkt(now - us(4_000), Ecn::Ect0);
            c.should_drop(&p, now, &mut pk, share, &mut rng);
            assert_eq!(c.ce.dropping, enters, "{share:?}");
        }
        // BLUE likewise: the fat flow raises it from 200 ms of sojourn (threshold 400 ms).
        let mut c = used();
        let mut pk = pkt(now - us(200_001), Ecn::Ect0);
        c.should_drop(&p, now, &mut pk, fat, &mut rng);
        assert_eq!(c.blue.p_drop, P_INC);
        let mut c = used();
        let mut pk = pkt(now - us(399_000), Ecn::Ect0);
        c.should_drop(&p, now, &mut pk, Share::PLAIN, &mut rng);
        assert_eq!(c.blue.p_drop, 0);
    }

    /// BLUE in COBALT-SCE: a sojourn above the threshold raises p_drop (once per CE target)
    /// and arms both schedules to signal at once; a sparse or idle dequeue lowers it.
    #[test]
    fn sojourn_triggered_blue_arms_both_schedules() {
        let p = sce_params();
        let mut c = used();
        let mut rng = Stream::new(1, "blue");
        let t = Time::from_secs(2);
        let mut pk = pkt(t - Time::from_millis(450), Ecn::Ect0);
        c.should_drop(&p, t, &mut pk, Share::PLAIN, &mut rng);
        assert_eq!(c.blue.p_drop, P_INC);
        assert!(c.ce.dropping && c.sce.dropping && c.ce.count >= 1 && c.sce.count >= 1);
        assert_eq!(c.sce.next, t);
        // With SCE off the SCE schedule is left alone.
        let mut c = used();
        let off = SceParams::new();
        c.queue_full(&off, t);
        assert!(c.ce.dropping && !c.sce.dropping && c.sce.count == 0);
        assert!(!c.queue_empty(&off, t + off.ce_target));
        assert_eq!(c.blue.p_drop, P_INC, "held for one CE target");
        assert!(!c.queue_empty(&off, t + off.ce_target + Time(1)));
        assert_eq!(c.blue.p_drop, P_INC - P_DEC);
    }
}
