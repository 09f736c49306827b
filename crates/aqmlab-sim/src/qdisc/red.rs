//! RED: Random Early Detection (Floyd & Jacobson 1993) as Linux implements it
//! (`net/sched/sch_red.c`, `include/net/red.h`), configured the way tc does it
//! (iproute2 `tc/q_red.c`, `tc/tc_red.c`), plus Adaptive RED (Floyd, Gummadi & Shenker 2001)
//! with the `adaptive` flag.
//!
//! This file also holds the part every RED variant shares: the qdisc wrapper around a FIFO
//! child, the per-arrival average update with idle handling, Floyd's count-based marking with
//! a cached random number (`red_action`), the ECN / `harddrop` / `nodrop` actions
//! (`red_enqueue`) and the Adaptive RED timer. What differs between variants (how the average
//! is kept and what it is compared with) is behind the [`Average`] trait: [`LinuxAverage`]
//! here (Linux fixed point, bytes) and `hred::PacketAverage` (real-valued, packets).
//!
//! Source versions read: `red.h` and `sch_red.c` of torvalds/linux as mirrored in gregkh/linux
//! (2025, with `nodrop`, qevents and `red_check_params`); iproute2 `q_red.c`/`tc_red.c`/
//! `tc_core.c` at ee2a4a86 (2026).

use super::{Args, BuildCtx, Enqueued, PacketQueue, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Type, Value};
use crate::packet::Packet;
use crate::rng::Stream;
use crate::time::Time;
use crate::units::Limit;
use std::fmt;
use std::sync::Arc;

/// Adaptive RED runs every `HZ/2` (`red_adaptative_timer`).
pub const ADAPT_INTERVAL: Time = Time::from_millis(500);

/// `RED_ONE_PERCENT` = DIV_ROUND_CLOSEST(2^32, 100): 1 % in Q0.32.
const ONE_PERCENT: u32 = (((1u64 << 32) + 50) / 100) as u32;
/// `MAX_P_MIN`, `MAX_P_MAX`: Adaptive RED keeps max_P within about [1 %, 50 %].
const MAX_P_MIN: u32 = ONE_PERCENT;
const MAX_P_MAX: u32 = 50 * ONE_PERCENT;

// ---------------------------------------------------------------------------------------------
// Shared RED machinery
// ---------------------------------------------------------------------------------------------

/// The child queue's backlog when a packet arrives (before it is queued).
#[derive(Clone, Copy, Debug)]
pub(super) struct Backlog {
    pub bytes: u64,
    pub packets: usize,
}

/// Where the average stands (`red_cmp_thresh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Zone {
    /// Below min_th: pass, reset the count.
    Below,
    /// The probabilistic region.
    Between,
    /// At or above the hard threshold: mark (or drop) every packet.
    Above,
}

/// What `red_action` decided for an arriving packet (`RED_DONT_MARK`, ...).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    DontMark,
    ProbMark,
    HardMark,
}

/// ns-2 RED's `mark_p_` (with `use_mark_p_` on): ECN marks only while Pb is at most this.
const NS2_MARK_P: f64 = 0.1;

/// The numeric side of a RED variant: how the average queue is kept and compared.
pub(super) trait Average: fmt::Debug {
    /// Average update at an arrival to a busy queue (`red_calc_qavg_no_idle_time`).
    fn update(&mut self, backlog: Backlog);
    /// Average update at the first arrival after `idle` of empty queue.
    fn update_after_idle(&mut self, idle: Time, backlog: Backlog);
    fn zone(&self) -> Zone;
    /// A fresh cached random number `qR` from a uniform 32-bit draw (`red_random`).
    fn draw(&self, r: u32) -> u64;
    /// Floyd's divisionless test (`red_mark_probability`): true when the `count`-th packet
    /// since the last mark is to be marked given the cached `q_r`; i.e. `Pb * count >= U`
    /// with `U` the draw as a fraction of its range.
    fn reached(&self, count: u64, q_r: u64) -> bool;
    /// One Adaptive RED step (`red_adaptative_algo`); `idle` is how long the queue has been
    /// empty, if it is.
    fn adapt(&mut self, _idle: Option<Time>) {}
    /// Whether the hard region always drops, whatever the ECN flags. Linux RED marks there
    /// with `ecn` (unless `harddrop`); ns-2's `REDQueue::enque` makes every packet in the
    /// forced region a `DTYPE_FORCED` drop (only `drop_early` looks at `setbit_`).
    const HARD_REGION_DROPS: bool = false;
    /// Whether the queue sees idle-time dequeues (ns-2's link; not Linux under HTB).
    const DEQUEUES_WHEN_EMPTY: bool = false;
    /// ns-2 `REDQueue::drop_early` instead of the cached-draw test: the probability
    /// (`modify_p`) of marking an arrival of `size` bytes that is the `count`-th
    /// (`count_bytes` bytes) since the last mark, and the unmodified Pb it came from; a fresh
    /// uniform draw per arrival decides. `None` (the default): Linux's [`Average::reached`].
    fn ns2_prob(&self, _count: u64, _count_bytes: u64, _size: u32) -> Option<(f64, f64)> {
        None
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>);
}

/// tc's flags (`TC_RED_ECN`, `TC_RED_HARDDROP`, `TC_RED_ADAPTATIVE`, `TC_RED_NODROP`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flags {
    pub ecn: bool,
    pub harddrop: bool,
    pub nodrop: bool,
    pub adaptive: bool,
}

/// tc's flags as parameters; a `no` prefix turns one off (TOML `ecn = false` becomes
/// `noecn`).
pub(super) const ECN: Param =
    Param::flag("ecn", false).words(&[("noecn", Value::Bool(false))]).doc("mark ECN-capable packets instead of dropping");
pub(super) const HARDDROP: Param = Param::flag("harddrop", false)
    .words(&[("noharddrop", Value::Bool(false))])
    .doc("drop, never mark, above the maximum threshold");
pub(super) const NODROP: Param = Param::flag("nodrop", false)
    .words(&[("nonodrop", Value::Bool(false))])
    .doc("mark instead of dropping even above the maximum (needs ecn)");
const ADAPTIVE: Param = Param::flag("adaptive", false)
    .words(&[("noadaptive", Value::Bool(false)), ("adaptative", Value::Bool(true)), ("noadaptative", Value::Bool(false))])
    .doc("Adaptive RED: adjust max_p towards the target band");

impl Flags {
    /// The flags of `a` (`adaptive` only where the table has it).
    pub(super) fn from_args(a: &Args) -> Flags {
        Flags {
            ecn: a.flag("ecn"),
            harddrop: a.flag("harddrop"),
            nodrop: a.flag("nodrop"),
            adaptive: a.has("adaptive") && a.flag("adaptive"),
        }
    }
    /// `red_validate_flags`: nodrop only makes sense with ECN.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.nodrop && !self.ecn {
            return Err("nodrop is only meaningful with ecn".into());
        }
        Ok(())
    }
}

/// RED's own counters (`struct red_stats`; `tc -s` prints marked = prob_mark + forced_mark,
/// early = prob_drop + forced_drop, pdrop).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedStats {
    pub prob_drop: u64,
    pub prob_mark: u64,
    pub forced_drop: u64,
    pub forced_mark: u64,
    /// Drops by the child FIFO (queue limit).
    pub pdrop: u64,
}

/// A RED-family discipline: a FIFO child guarded by a RED average of its backlog.
#[derive(Debug)]
pub(super) struct Red<A: Average> {
    kind: &'static str,
    pub(super) avg: A,
    flags: Flags,
    /// The child FIFO's limit: bfifo for `red`, pfifo for `hred`.
    limit: Limit,
    /// The child FIFO.
    queue: PacketQueue,
    /// Packets since the last mark; -1 = just entered the probabilistic region.
    qcount: i64,
    /// Cached random number.
    q_r: u64,
    /// ns-2 `edv_.count`, `edv_.count_bytes` and `edv_.old` (only with [`Average::ns2_prob`]).
    ns2_count: u64,
    ns2_count_bytes: u64,
    ns2_old: bool,
    /// Start of the current idle period (`qidlestart`), if the queue is idle.
    idle_since: Option<Time>,
    /// Next Adaptive RED tick (the kernel timer), armed at the first call.
    next_adapt: Option<Time>,
    /// Whether the Adaptive RED timer runs when `flags.adaptive` is set (see
    /// [`Red::with_adaptive_timer`]).
    adaptive_timer: bool,
    rng: Stream,
    stats: QdiscStats,
    pub(super) red: RedStats,
}

impl<A: Average> Red<A> {
    pub(super) fn new(kind: &'static str, avg: A, flags: Flags, limit: Limit, rng: Stream) -> Self {
        Red {
            kind,
            avg,
            flags,
            limit,
            queue: PacketQueue::for_limit(limit),
            qcount: -1,
            q_r: 0,
            ns2_count: 0,
            ns2_count_bytes: 0,
            ns2_old: false,
            // `__red_change` starts an idle period when the child is empty at creation.
            idle_since: Some(Time::ZERO),
            next_adapt: None,
            adaptive_timer: true,
            rng,
            stats: QdiscStats::default(),
            red: RedStats::default(),
        }
    }

    /// Whether the Adaptive RED timer runs when `adaptive` is set. Current Linux
    /// (`__red_change`) starts it only if the legacy `tc_red_qopt.flags` has
    /// `TC_RED_ADAPTATIVE`; iproute2 from about 5.7/5.8 sends the flags only in
    /// `TCA_RED_FLAGS` (legacy field 0), so with new tc and kernel `adaptive` is stored but
    /// the timer never starts and max_P stays at its initial value. `false` models that.
    pub(super) fn with_adaptive_timer(mut self, on: bool) -> Self {
        self.adaptive_timer = on;
        self
    }

    /// Runs the Adaptive RED timer ticks due by `now`. Nothing else changes the state between
    /// two calls, so running them late (before handling the event at `now`) is exact.
    fn run_timers(&mut self, now: Time) {
        if !self.flags.adaptive || !self.adaptive_timer {
            return;
        }
        let mut next = *self.next_adapt.get_or_insert(now + ADAPT_INTERVAL);
        while next <= now {
            let idle = self.idle_since.map(|t0| next - t0);
            self.avg.adapt(idle);
            next += ADAPT_INTERVAL;
        }
        self.next_adapt = Some(next);
    }

    /// `red_action`: Floyd's count-based decision with a cached random number.
    pub(super) fn action(&mut self) -> Verdict {
        match self.avg.zone() {
            Zone::Below => {
                self.qcount = -1;
                Verdict::DontMark
            }
            Zone::Between => {
                self.qcount += 1;
                if self.qcount == 0 {
                    // First packet in the region: draw, never mark.
                    self.q_r = self.avg.draw(self.rng.next_u32());
                } else if self.avg.reached(self.qcount as u64, self.q_r) {
                    self.qcount = 0;
                    self.q_r = self.avg.draw(self.rng.next_u32());
                    return Verdict::ProbMark;
                }
                Verdict::DontMark
            }
            Zone::Above => {
                self.qcount = -1;
                Verdict::HardMark
            }
        }
    }

    /// ns-2 `REDQueue::enque`'s drop logic for an arrival of `size` bytes with `qlen`
    /// packets queued: count the arrival; in the region (average at least min_th and more
    /// than one packet queued) the first arrival only starts the count, later ones are marked
    /// with `modify_p`'s probability (a fresh draw each), ECN only while Pb <= `mark_p_` 0.1
    /// (beyond, [`Verdict::HardMark`], a drop); outside the region the count restarts.
    /// `use_mark_p_` is on (ns-default.tcl), so a high average forces nothing by itself.
    fn ns2_action(&mut self, qlen: usize, size: u32) -> Verdict {
        self.ns2_count += 1;
        self.ns2_count_bytes += size as u64;
        if self.avg.zone() == Zone::Below || qlen <= 1 {
            self.ns2_old = false;
            return Verdict::DontMark;
        }
        if !self.ns2_old {
            self.ns2_count = 1;
            self.ns2_count_bytes = size as u64;
            self.ns2_old = true;
            return Verdict::DontMark;
        }
        let (pa, pb) = self.avg.ns2_prob(self.ns2_count, self.ns2_count_bytes, size).expect("ns-2 RED");
        if self.rng.uniform() <= pa {
            self.ns2_count = 0;
            self.ns2_count_bytes = 0;
            return if self.flags.ecn && pb > NS2_MARK_P { Verdict::HardMark } else { Verdict::ProbMark };
        }
        Verdict::DontMark
    }

    fn congestion_drop(&mut self, pkt: &Packet) -> Enqueued {
        self.stats.drop(pkt);
        Enqueued::Dropped
    }
}

impl<A: Average> Qdisc for Red<A> {
    fn dequeues_when_empty(&self) -> bool {
        A::DEQUEUES_WHEN_EMPTY
    }
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// `red_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        self.run_timers(now);
        let backlog = Backlog { bytes: self.queue.backlog(), packets: self.queue.len() };
        match self.idle_since.take() {
            Some(t0) => self.avg.update_after_idle(now - t0, backlog),
            None => self.avg.update(backlog),
        }
        let ns2 = self.avg.ns2_prob(1, 0, 0).is_some();
        let verdict = if ns2 { self.ns2_action(backlog.packets, pkt.wire_len) } else { self.action() };
        match verdict {
            Verdict::DontMark => {}
            Verdict::ProbMark => {
                if !self.flags.ecn {
                    self.red.prob_drop += 1;
                    return self.congestion_drop(&pkt);
                }
                if pkt.ecn.set_ce() {
                    self.red.prob_mark += 1;
                    self.stats.ce_marks += 1;
                } else if !self.flags.nodrop {
                    self.red.prob_drop += 1;
                    return self.congestion_drop(&pkt);
                }
            }
            Verdict::HardMark => {
                if A::HARD_REGION_DROPS || self.flags.harddrop || !self.flags.ecn {
                    self.red.forced_drop += 1;
                    return self.congestion_drop(&pkt);
                }
                if pkt.ecn.set_ce() {
                    self.red.forced_mark += 1;
                    self.stats.ce_marks += 1;
                } else if !self.flags.nodrop {
                    self.red.forced_drop += 1;
                    return self.congestion_drop(&pkt);
                }
            }
        }
        if !self.queue.fits(self.limit, &pkt) {
            if ns2 {
                // ns-2: a forced drop restarts the count (Philip Liu's fix).
                self.ns2_count = 0;
                self.ns2_count_bytes = 0;
            }
            self.red.pdrop += 1;
            self.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        self.queue.push(pkt, &mut self.stats);
        Enqueued::Queued
    }

    /// `red_dequeue`: an empty child starts an idle period.
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.run_timers(now);
        let pkt = self.queue.pop(&mut self.stats);
        if pkt.is_none() && self.idle_since.is_none() {
            self.idle_since = Some(now);
        }
        pkt
    }
    super::packet_queue_accessors!(queue, stats);
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        self.avg.xstats(out);
    }
}

// ---------------------------------------------------------------------------------------------
// tc's derivation of the kernel parameters (iproute2 tc/q_red.c, tc/tc_red.c, tc/tc_core.c)
// ---------------------------------------------------------------------------------------------

/// psched ticks per microsecond as tc computes it from `/proc/net/psched` on current kernels
/// (`t2us` = 1000, `us2t` = 64, clock_res = 10^6: `tick_in_usec` = 1000/64).
const TC_TICK_IN_USEC: f64 = 1000.0 / 64.0;

/// The values tc sends to the kernel (`struct tc_red_qopt`, `TCA_RED_STAB`, `TCA_RED_MAX_P`).
#[derive(Clone, Debug, PartialEq)]
pub struct TcRed {
    /// Child bfifo limit, bytes.
    pub limit: u32,
    /// Thresholds in bytes.
    pub qth_min: u32,
    pub qth_max: u32,
    /// Only used to derive `wlog`.
    pub burst: u32,
    pub avpkt: u32,
    /// W = 2^-wlog.
    pub wlog: u8,
    /// Legacy max_P encoding (max_P = (max-min)/2^Plog); the kernel uses it only if max_P is 0.
    pub plog: u8,
    pub scell_log: u8,
    /// Idle-decay table: right shift of qavg per `2^scell_log` µs of idle time.
    pub stab: [u8; 256],
    /// Initial max_P, Q0.32.
    pub max_p: u32,
    /// `bandwidth` in bytes/s (tc's unit; default 10 Mbit), used only for `stab`.
    pub bandwidth: u32,
}

/// `tc_red_eval_ewma`: the smallest Wlog >= 1 with `burst + 1 - min/avpkt <= (1-(1-W)^burst)/W`.
pub fn tc_red_eval_ewma(qmin: u32, burst: u32, avpkt: u32) -> Result<u8, String> {
    let a = burst as f64 + 1.0 - qmin as f64 / avpkt as f64;
    if a < 1.0 {
        return Err(format!("burst {burst} is too small; try burst {}", 1 + qmin / avpkt));
    }
    let mut w = 0.5f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powf(burst as f64)) / w {
            return Ok(wlog);
        }
        w /= 2.0;
    }
    Err(format!("failed to calculate the EWMA constant for burst {burst}"))
}

/// `tc_red_eval_P`: Plog with probability/(max-min) ~ 2^-Plog.
pub fn tc_red_eval_p(qmin: u32, qmax: u32, prob: f64) -> Result<u8, String> {
    let i = qmax as i64 - qmin as i64;
    if i == 0 {
        return Ok(0);
    }
    if i < 0 {
        return Err("max must not be below min".into());
    }
    let mut p = prob / i as f64;
    for plog in 0..32u8 {
        if p > 1.0 {
            return Ok(plog);
        }
        p *= 2.0;
    }
    Err(format!("failed to calculate Plog for probability {prob}"))
}

/// `tc_red_eval_idle_damping`: Scell_log and the 256-entry table
/// `Stab[i] = -ln(1-W) * (i << Scell_log) / xmit_time`, with `xmit_time` the avpkt
/// transmission time at `bandwidth` in psched ticks (`tc_calc_xmittime`), capped at 31.
pub fn tc_red_eval_idle_damping(wlog: u8, avpkt: u32, bandwidth: u32) -> Result<(u8, [u8; 256]), String> {
    let time_us = 1_000_000.0 * (avpkt as f64 / bandwidth as f64);
    let xmit_time = (time_us * TC_TICK_IN_USEC).ceil().min(u32::MAX as f64);
    let lw = -(1.0 - 1.0 / (1u64 << wlog) as f64).ln() / xmit_time;
    let maxtime = 31.0 / lw;
    let clog = (0..32u8)
        .find(|&c| maxtime / ((1u64 << c) as f64) < 512.0)
        .ok_or_else(|| "failed to calculate the idle damping table".to_string())?;
    let mut stab = [0u8; 256];
    for (i, s) in stab.iter_mut().enumerate().take(255).skip(1) {
        let v = ((i as u64) << clog) as f64 * lw;
        *s = (v as u8).min(31);
    }
    stab[255] = 31;
    Ok((clog, stab))
}

/// `fls`: position of the most significant set bit (1-based), 0 for 0.
fn fls(x: u32) -> u32 {
    32 - x.leading_zeros()
}

impl TcRed {
    /// tc's defaults and derivations (`red_parse_opt`), then the kernel's
    /// `red_check_params` / `red_validate_flags` checks. Zero means "not given".
    #[allow(clippy::too_many_arguments)]
    pub fn derive(limit: u32, min: u32, max: u32, avpkt: u32, burst: u32, probability: f64, bandwidth: Option<u32>) -> Result<TcRed, String> {
        if limit == 0 || avpkt == 0 {
            return Err("required parameter (limit, avpkt) is missing".into());
        }
        // Sally Floyd's recommendations (http://www.icir.org/floyd/REDparameters.txt).
        let qth_max = if max != 0 { max } else if min != 0 { min.saturating_mul(3) } else { limit / 4 };
        let qth_min = if min != 0 { min } else { qth_max / 3 };
        let burst = if burst != 0 { burst } else { (2 * qth_min as u64 + qth_max as u64) as u32 / (3 * avpkt) };
        let bandwidth = bandwidth.unwrap_or(10_000_000 / 8);
        let wlog = tc_red_eval_ewma(qth_min, burst, avpkt)?;
        let plog = tc_red_eval_p(qth_min, qth_max, probability)?;
        let (scell_log, stab) = tc_red_eval_idle_damping(wlog, avpkt, bandwidth)?;
        let max_p = (probability * 4294967296.0) as u32;
        // red_check_params.
        if fls(qth_min) + wlog as u32 >= 32 || fls(qth_max) + wlog as u32 >= 32 {
            return Err(format!("thresholds too large for Wlog {wlog} (min {qth_min}, max {qth_max})"));
        }
        if qth_max < qth_min {
            return Err(format!("max {qth_max} is below min {qth_min}"));
        }
        Ok(TcRed { limit, qth_min, qth_max, burst, avpkt, wlog, plog, scell_log, stab, max_p, bandwidth })
    }
}

// ---------------------------------------------------------------------------------------------
// Linux RED's average and marking arithmetic (include/net/red.h)
// ---------------------------------------------------------------------------------------------

/// `struct red_parms` plus `qavg`: the byte-based average in Linux fixed point.
#[derive(Clone, Debug)]
pub(super) struct LinuxAverage {
    /// Average backlog in bytes, scaled by 2^wlog.
    pub qavg: u64,
    pub wlog: u8,
    /// Thresholds scaled by 2^wlog.
    qth_min: u64,
    qth_max: u64,
    /// max_th - min_th in bytes (at least 1).
    qth_delta: u32,
    /// Q0.32.
    pub max_p: u32,
    /// max_P / qth_delta: qR = rand32 / max_p_delta (`max_P_reciprocal`).
    pub max_p_delta: u32,
    pub target_min: u32,
    pub target_max: u32,
    scell_log: u8,
    scell_max: u64,
    stab: [u8; 256],
}

impl LinuxAverage {
    /// `red_set_parms` + `red_set_vars`.
    pub(super) fn new(tc: &TcRed) -> Self {
        let delta = (tc.qth_max as i64 - tc.qth_min as i64).max(1) as u32;
        let max_p = if tc.max_p != 0 {
            tc.max_p
        } else {
            let base = if tc.plog < 32 { u32::MAX >> tc.plog } else { u32::MAX };
            base.wrapping_mul(delta)
        };
        let fifth = delta / 5;
        LinuxAverage {
            qavg: 0,
            wlog: tc.wlog,
            qth_min: (tc.qth_min as u64) << tc.wlog,
            qth_max: (tc.qth_max as u64) << tc.wlog,
            qth_delta: delta,
            max_p,
            max_p_delta: (max_p / delta).max(1),
            target_min: tc.qth_min + 2 * fifth,
            target_max: tc.qth_min + 3 * fifth,
            scell_log: tc.scell_log,
            scell_max: 255u64 << tc.scell_log,
            stab: tc.stab,
        }
    }

    /// `red_calc_qavg_from_idle_time`: qavg after `idle` of empty queue. The table index is
    /// the idle time in microseconds (`ktime_us_delta`) while tc built the table in psched
    /// ticks (64 ns), so the decay is that of m = idle_us / xmit_ticks dummy packets.
    pub(super) fn decayed(&self, idle: Time) -> u64 {
        let us = idle.as_micros().min(self.scell_max);
        let shift = self.stab[((us >> self.scell_log) & 0xff) as usize];
        if shift != 0 {
            self.qavg >> shift
        } else {
            // (1-W)^m ~ 1 - mW for short idle periods, floored at qavg/2.
            let d = ((self.qavg as u128 * us as u128) >> self.scell_log) as u64;
            if d < self.qavg >> 1 {
                self.qavg - d
            } else {
                self.qavg >> 1
            }
        }
    }

    /// Average backlog in bytes (the fixed-point value unscaled).
    pub fn qavg_bytes(&self) -> f64 {
        self.qavg as f64 / (1u64 << self.wlog) as f64
    }
}

impl Average for LinuxAverage {
    fn update(&mut self, backlog: Backlog) {
        // qavg = qavg*(1-W) + backlog*W, in fixed point with the point at Wlog.
        self.qavg = self.qavg + backlog.bytes - (self.qavg >> self.wlog);
    }
    fn update_after_idle(&mut self, idle: Time, _backlog: Backlog) {
        self.qavg = self.decayed(idle);
    }
    fn zone(&self) -> Zone {
        if self.qavg < self.qth_min {
            Zone::Below
        } else if self.qavg >= self.qth_max {
            Zone::Above
        } else {
            Zone::Between
        }
    }
    fn draw(&self, r: u32) -> u64 {
        // reciprocal_divide(prandom, max_P_reciprocal): exact floor division.
        (r / self.max_p_delta) as u64
    }
    fn reached(&self, count: u64, q_r: u64) -> bool {
        ((self.qavg - self.qth_min) >> self.wlog).saturating_mul(count) >= q_r
    }
    fn adapt(&mut self, idle: Option<Time>) {
        let qavg = match idle {
            Some(t) => self.decayed(t),
            None => self.qavg,
        } >> self.wlog;
        if qavg > self.target_max as u64 && self.max_p <= MAX_P_MAX {
            self.max_p += MAX_P_MIN.min(self.max_p / 4);
        } else if qavg < self.target_min as u64 && self.max_p >= MAX_P_MIN {
            self.max_p = (self.max_p / 10) * 9;
        }
        // DIV_ROUND_CLOSEST here (the initial value in red_set_parms truncates).
        let d = (self.max_p as u64 + self.qth_delta as u64 / 2) / self.qth_delta as u64;
        self.max_p_delta = (d as u32).max(1);
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("qavg", self.qavg_bytes()));
        out.push(("prob", self.max_p as f64 / 4294967296.0));
    }
}

// ---------------------------------------------------------------------------------------------
// The `red` kind
// ---------------------------------------------------------------------------------------------

/// Parsed `red` parameters.
#[derive(Clone, Debug, PartialEq)]
struct RedConfig {
    tc: TcRed,
    flags: Flags,
    /// With `adaptive`: whether the kernel's Adaptive RED timer runs (`noadaptive_timer`:
    /// the new-tc/new-kernel case in which it never starts). Default: it runs.
    adaptive_timer: bool,
}

impl QdiscConfig for RedConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(
            Red::new(RED.name, LinuxAverage::new(&self.tc), self.flags, Limit::Bytes(self.tc.limit as u64), ctx.rng.clone())
                .with_adaptive_timer(self.adaptive_timer),
        )
    }
}

/// A size tc sends as a u32.
fn u32_bytes(key: &str, v: Value) -> Result<Option<Value>, String> {
    match v {
        Value::Bytes(b) if b > u32::MAX as u64 => Err(format!("{key} {b} is too large (at most {} bytes)", u32::MAX)),
        v => Ok(Some(v)),
    }
}

const fn size(name: &'static str, doc: &'static str) -> Param {
    Param::new(name, Type::Bytes, Value::Bytes(0)).unit("bytes").doc(doc).check(u32_bytes)
}

/// `red limit BYTES [min BYTES] [max BYTES] avpkt BYTES [burst PACKETS] [adaptive]
/// [probability P] [bandwidth RATE] [ecn] [harddrop] [nodrop]` (tc-red(8)), plus the
/// simulator's `noadaptive_timer` (with `adaptive`: the Adaptive RED timer never runs, as
/// with iproute2 >= ~5.8 on current kernels; `adaptive_timer`, the default, lets it run).
pub const RED: QdiscKind = QdiscKind {
    name: "red",
    doc: "Random Early Detection as tc configures it (sch_red.c, q_red.c)",
    params: &[
        size("limit", "hard queue limit (required)"),
        size("min", "minimum average queue for marking; 0: derived as tc does (max / 3)"),
        size("max", "maximum average queue; 0: derived as tc does (limit / 4)"),
        size("avpkt", "average packet size (required)"),
        Param::uint("burst", 0, u32::MAX as u64, 0).unit("packets").doc("burst allowance for the average; 0: derived as tc does"),
        Param::new("probability", Type::Real { min: 0.0, max: 1.0 }, Value::Real(0.02))
            .doc("max_p, above 0 and below 1")
            .check(|_, v| match v {
                Value::Real(p) if p <= 0.0 || p >= 1.0 => Err(format!("probability {p} must be above 0 and below 1")),
                v => Ok(Some(v)),
            }),
        Param::new("bandwidth", Type::Rate, Value::Unset).doc("rate for the idle-time average decay; unset: tc's default"),
        ADAPTIVE,
        Param::flag("adaptive_timer", true)
            .words(&[("noadaptive_timer", Value::Bool(false))])
            .doc("with adaptive: whether the kernel's Adaptive RED timer runs (not tc)"),
        ECN,
        HARDDROP,
        NODROP,
    ],
    build: |a| {
        let size = |k| a.bytes(k) as u32;
        let (limit, avpkt) = (size("limit"), size("avpkt"));
        if limit == 0 {
            return Err(a.invalid("required parameter 'limit' (bytes) is missing"));
        }
        if avpkt == 0 {
            return Err(a.invalid("required parameter 'avpkt' (bytes) is missing"));
        }
        let flags = Flags::from_args(a);
        flags.validate().map_err(|e| a.invalid(e))?;
        // tc keeps the rate in bytes/s (u32).
        let bandwidth = a.rate_opt("bandwidth");
        let bw = bandwidth.map(|r| (r.bits_per_sec() / 8).min(u32::MAX as u64) as u32).filter(|&b| b > 0);
        if bandwidth.is_some() && bw.is_none() {
            return Err(a.invalid("bandwidth must be at least 8bit"));
        }
        let tc = TcRed::derive(limit, size("min"), size("max"), avpkt, a.u32("burst"), a.real("probability"), bw)
            .map_err(|e| a.invalid(e))?;
        Ok(Arc::new(RedConfig { tc, flags, adaptive_timer: a.flag("adaptive_timer") }))
    },
};

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::qdisc::QdiscSpec;

    pub(in crate::qdisc) fn pkt(len: u32, ecn: Ecn) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
        p.ecn = ecn;
        p
    }

    const MBIT50: Option<u32> = Some(50_000_000 / 8);

    fn tc(limit: u32, probability: f64) -> TcRed {
        TcRed::derive(limit, 0, 0, 1000, 0, probability, MBIT50).unwrap()
    }

    fn linux(tc: &TcRed, flags: Flags) -> Red<LinuxAverage> {
        Red::new("red", LinuxAverage::new(tc), flags, Limit::Bytes(tc.limit as u64), Stream::new(1, "red-test"))
    }

    fn spec(s: &str) -> String {
        format!("{:?}", QdiscSpec::parse(s).unwrap())
    }

    #[test]
    fn tc_derivation_reproduces_the_dossier_table() {
        // limit, min, max, burst, Wlog, ARED band, plus what tc also sends: Plog, Scell_log,
        // max_P (0.02 * 2^32 truncated) and the kernel's max_P/(max-min).
        let cases = [(400_000, 33_333, 100_000, 55, 5, 59_999, 73_332, 22, 13, 1288), (150_000, 12_500, 37_500, 20, 4, 22_500, 27_500, 21, 12, 3435)];
        for (limit, min, max, burst, wlog, tmin, tmax, plog, scell, mpd) in cases {
            let t = tc(limit, 0.02);
            assert_eq!((t.qth_min, t.qth_max, t.burst, t.wlog), (min, max, burst, wlog), "limit {limit}");
            assert_eq!((t.plog, t.scell_log, t.max_p), (plog, scell, 85_899_345), "limit {limit}");
            let a = LinuxAverage::new(&t);
            assert_eq!((a.target_min, a.target_max, a.max_p_delta), (tmin, tmax, mpd), "limit {limit}");
            // The exact strings of the l4s-tests S6/S8 runs parse to the same values.
            let s = spec(&format!("red limit {limit} avpkt 1000 adaptive bandwidth 50Mbit ecn"));
            assert!(s.contains(&format!("limit: {limit}, qth_min: {min}, qth_max: {max}, burst: {burst}, avpkt: 1000, wlog: {wlog}, plog: {plog}, scell_log: {scell}")), "{s}");
            assert!(s.contains("ecn: true, harddrop: false, nodrop: false, adaptive: true"), "{s}");
            assert!(s.contains("bandwidth: 6250000"), "{s}");
        }
        // Without `bandwidth` tc assumes 10 Mbit: avpkt takes 12 500 ticks, so Scell_log 15.
        let s = spec("red limit 400000 avpkt 1000");
        assert!(s.contains("scell_log: 15") && s.contains("bandwidth: 1250000"), "{s}");
        assert!(s.contains("ecn: false") && s.contains("adaptive: false"), "{s}");
    }

    #[test]
    fn explicit_parameters_and_partial_defaults() {
        let t = TcRed::derive(600_000, 30_000, 90_000, 1500, 30, 0.1, Some(12_500_000)).unwrap();
        // a = 30 + 1 - 20 = 11 <= (1 - (15/16)^30) * 16 = 13.7, but > 7.85 for W = 1/8.
        assert_eq!((t.qth_min, t.qth_max, t.burst, t.wlog), (30_000, 90_000, 30, 4));
        assert_eq!(t.max_p, 429_496_729);
        assert_eq!(LinuxAverage::new(&t).max_p_delta, 429_496_729 / 60_000);
        // Only min: max = 3 min; only max: min = max / 3; burst from both.
        let m = TcRed::derive(600_000, 30_000, 0, 1000, 0, 0.02, None).unwrap();
        assert_eq!((m.qth_min, m.qth_max, m.burst), (30_000, 90_000, 50));
        let m = TcRed::derive(600_000, 0, 90_000, 1000, 0, 0.02, None).unwrap();
        assert_eq!((m.qth_min, m.qth_max), (30_000, 90_000));
        let s = spec("red limit 600000 min 30000 max 90000 avpkt 1500 burst 30 probability 0.1 bandwidth 100Mbit harddrop nodrop ecn");
        assert!(s.contains("max_p: 429496729") && s.contains("harddrop: true, nodrop: true"), "{s}");
        // TOML booleans become flags and their `no` negations.
        let t: toml::Table = toml::from_str("kind = \"red\"\nlimit = 400000\navpkt = 1000\necn = true\nadaptive = false").unwrap();
        let s = format!("{:?}", QdiscSpec::from_table(&t).unwrap());
        assert!(s.contains("ecn: true") && s.contains("adaptive: false"), "{s}");
    }

    #[test]
    fn bad_parameters_give_one_line_errors_naming_them() {
        let err = |s: &str| QdiscSpec::parse(s).unwrap_err();
        assert!(err("red limit 400000").contains("avpkt"));
        assert!(err("red avpkt 1000").contains("limit"));
        assert!(err("red limit 400000 avpkt 1000 probability 0").contains("probability"));
        assert!(err("red limit 400000 avpkt 1000 probability 1.5").contains("probability"));
        assert!(err("red limit 400000 avpkt 1000 burst 10").contains("burst 10 is too small; try burst 34"));
        assert!(err("red limit 400000 avpkt 1000 nodrop").contains("nodrop"));
        assert!(err("red limit 400000 avpkt 1000 min 50000 max 40000 burst 100").contains("max must not be below min"));
        assert!(err("red limit 400000 avpkt 1000 gentle").contains("'gentle'"));
        assert!(err("red limit 400000 avpkt 1000 bandwidth 50Mbot").contains("bandwidth"));
        let e = err("red limit 400000 avpkt 1000 min 300000000 max 900000000 burst 400000 probability 0.5");
        assert!(e.contains("too large"), "{e}");
        for s in ["red limit 400000", "red limit 400000 avpkt 1000 burst 10"] {
            assert!(!err(s).contains('\n'));
        }
    }

    /// The average follows `qavg += backlog - qavg >> Wlog` on every arrival, with the backlog
    /// in bytes (Ethernet header included) before the packet is queued; the fixed-point value
    /// stays within one byte of the real-valued EWMA with W = 1/32.
    #[test]
    fn average_is_the_linux_fixed_point_ewma_of_the_byte_backlog() {
        let t = tc(400_000, 0.02);
        let mut q = linux(&t, Flags::default());
        let (mut expect, mut real) = (0u64, 0f64);
        let w = 1.0 / 32.0;
        // A synthetic arrival/departure pattern with the queue never empty after the first
        // arrival: 3 in, 1 out, ... then 1 in, 2 out, with mixed packet sizes.
        let mut now = Time::ZERO;
        for step in 0..400u32 {
            now += Time::from_micros(50);
            let b = q.backlog_bytes();
            let len = [1514, 66, 1000, 1514][step as usize % 4];
            let first = step == 0;
            q.enqueue(pkt(len, Ecn::NotEct), now);
            if !first {
                expect = expect + b - (expect >> 5);
                real = real * (1.0 - w) + w * b as f64;
            }
            assert_eq!(q.avg.qavg, expect, "step {step}");
            assert!((q.avg.qavg_bytes() - real).abs() < 1.0, "step {step}: {} vs {real}", q.avg.qavg_bytes());
            let departures = if step < 200 { (step % 3 == 0) as u32 } else { 2 };
            for _ in 0..departures {
                if q.len() > 1 {
                    q.dequeue(now);
                }
            }
        }
        assert!(expect > 0 && q.stats().enqueued > 100);
    }

    /// Idle decay as Linux does it: the table tc computed (Stab[i] = -ln(1-W) * (i << Scell_log)
    /// / xmit_ticks), indexed by idle microseconds, applied as a right shift, with the linear
    /// `qavg (1 - t / 2^Scell_log)` (floored at qavg/2) for the first cell.
    #[test]
    fn idle_decay_follows_the_tc_table() {
        let t = tc(400_000, 0.02);
        // 1000 B at 6.25 MB/s = 160 us = 2500 ticks of 64 ns.
        let lw = -(1.0f64 - 1.0 / 32.0).ln() / 2500.0;
        for i in 1..255usize {
            let want = (((i << 13) as f64 * lw) as u8).min(31);
            assert_eq!(t.stab[i], want, "Stab[{i}]");
        }
        assert_eq!((t.stab[0], t.stab[9], t.stab[10], t.stab[255]), (0, 0, 1, 31));
        let start = |idle: Time| -> (u64, u64) {
            let mut q = linux(&t, Flags::default());
            for k in 0..30 {
                q.enqueue(pkt(1514, Ecn::NotEct), Time::from_micros(k));
            }
            while q.len() > 0 {
                q.dequeue(Time::from_millis(1));
            }
            let before = q.avg.qavg;
            // The link asks again when the last packet has left: the idle period starts.
            assert!(q.dequeue(Time::from_millis(2)).is_none());
            q.enqueue(pkt(1514, Ecn::NotEct), Time::from_millis(2) + idle);
            (before, q.avg.qavg)
        };
        let (q0, q) = start(Time::from_micros(2000));
        assert_eq!(q, q0 - ((q0 * 2000) >> 13));
        let (q0, q) = start(Time::from_micros(5000));
        assert_eq!(q, q0 >> 1, "linear part floored at one half");
        let (q0, q) = start(Time::from_millis(100)); // cell 12: shift 1
        assert_eq!(q, q0 >> 1);
        let (q0, q) = start(Time::from_secs(1)); // cell 122: floor(12.69) = 12
        assert_eq!(q, q0 >> 12);
        let (q0, q) = start(Time::from_millis(3000)); // beyond Scell_max: shift 31
        assert_eq!(q, q0 >> 31);
        // No idle period without an empty dequeue: then a plain EWMA step with backlog 0.
        let mut q = linux(&t, Flags::default());
        for k in 0..30 {
            q.enqueue(pkt(1514, Ecn::NotEct), Time::from_micros(k));
        }
        while q.len() > 0 {
            q.dequeue(Time::from_millis(1));
        }
        let q0 = q.avg.qavg;
        q.enqueue(pkt(1514, Ecn::NotEct), Time::from_secs(1));
        assert_eq!(q.avg.qavg, q0 - (q0 >> 5));
    }

    /// Holds the average at `min + x` bytes and returns the gaps (packets from one mark to the
    /// next, the marked one included) over `n` arrivals.
    fn gaps(t: &TcRed, x: u64, n: usize, seed: u64) -> Vec<u64> {
        let mut q = linux(t, Flags::default());
        q.rng = Stream::new(seed, "red-gaps");
        q.avg.qavg = (t.qth_min as u64 + x) << t.wlog;
        // Entering the region: the first packet only draws qR.
        assert_eq!(q.action(), Verdict::DontMark);
        let (mut out, mut since) = (Vec::new(), 0u64);
        for _ in 0..n {
            since += 1;
            if q.action() == Verdict::ProbMark {
                out.push(since);
                since = 0;
            }
        }
        out
    }

    /// Exact mean gap for red.h's method: qR = floor(r / d) for r uniform on 2^32 values,
    /// and the mark comes at the first count c >= 1 with x c >= qR, so G = max(1, ceil(qR/x)).
    /// (With U = qR/(x/Pb) uniform on [0,1), G = ceil(U/Pb): uniform on {1..1/Pb}, mean
    /// (1/Pb + 1)/2, and hazard Pb/(1 - (c-1) Pb) at the c-th packet: Floyd's Pa.)
    fn exact_mean_gap(d: u64, x: u64) -> f64 {
        let total = 1u64 << 32;
        let kmax = (total - 1) / d;
        let mut sum = 0u128;
        for k in 0..=kmax {
            let weight = if k < kmax { d } else { total - kmax * d };
            sum += weight as u128 * k.div_ceil(x).max(1) as u128;
        }
        sum as f64 / total as f64
    }

    #[test]
    fn marking_follows_floyds_uniform_gap_law_between_the_thresholds() {
        for (prob, n) in [(0.1, 600_000), (0.02, 1_500_000)] {
            let t = tc(400_000, prob);
            let a = LinuxAverage::new(&t);
            let delta = (t.qth_max - t.qth_min) as u64;
            for (i, frac) in [0.25, 0.5, 0.75].into_iter().enumerate() {
                let x = (delta as f64 * frac) as u64;
                // Pb grows linearly with the average between the thresholds.
                let pb = t.max_p as f64 / 4294967296.0 * x as f64 / delta as f64;
                let g = gaps(&t, x, n, 10 + i as u64);
                let m = g.len() as f64;
                let mean = g.iter().sum::<u64>() as f64 / m;
                let exact = exact_mean_gap(a.max_p_delta as u64, x);
                // Floyd's closed form (1/Pb + 1)/2, up to the integer rounding of d and x.
                assert!((exact / ((1.0 / pb + 1.0) / 2.0) - 1.0).abs() < 2e-3, "exact {exact} pb {pb}");
                let se = exact / 3f64.sqrt() / m.sqrt();
                assert!((mean - exact).abs() < 4.0 * se, "p {prob} x {x}: mean gap {mean} vs exact {exact} (se {se})");
                // Per-packet probability at count c (c-1 unmarked packets since the last mark):
                // Pb / (1 - (c-1) Pb).
                for c in [1u64, 2, 3, (0.5 / pb) as u64, (0.9 / pb) as u64] {
                    let at_risk = g.iter().filter(|&&v| v >= c).count() as f64;
                    let hit = g.iter().filter(|&&v| v == c).count() as f64;
                    let want = pb / (1.0 - (c - 1) as f64 * pb);
                    let se = (want * (1.0 - want) / at_risk).sqrt();
                    assert!((hit / at_risk - want).abs() < 4.5 * se + 1e-3, "p {prob} x {x} c {c}: {} vs {want}", hit / at_risk);
                }
                // Survival P(G > c) = 1 - c Pb: the gaps are uniform on 1..1/Pb.
                for f in [0.25, 0.5, 0.75] {
                    let c = (f / pb) as u64;
                    let s = g.iter().filter(|&&v| v > c).count() as f64 / m;
                    assert!((s - (1.0 - c as f64 * pb)).abs() < 0.015, "survival at {c}: {s}");
                }
                assert!(g.iter().all(|&v| v as f64 <= 1.0 / pb + 1.0));
            }
        }
    }

    #[test]
    fn above_max_every_packet_is_marked_or_dropped_per_flags() {
        let t = tc(400_000, 0.02);
        let run = |flags: Flags, ecn: Ecn| -> (Enqueued, Ecn, RedStats) {
            let mut q = linux(&t, flags);
            q.idle_since = None;
            q.avg.qavg = 2 * ((t.qth_max as u64) << t.wlog);
            let mut p = pkt(1514, ecn);
            let r = q.enqueue(p, Time::ZERO);
            if r == Enqueued::Queued {
                p = q.dequeue(Time::ZERO).unwrap();
            }
            assert_eq!(q.qcount, -1);
            (r, p.ecn, q.red)
        };
        let ecn = Flags { ecn: true, ..Flags::default() };
        let (r, e, s) = run(ecn, Ecn::Ect0);
        assert_eq!((r, e, s.forced_mark), (Enqueued::Queued, Ecn::Ce, 1));
        let (r, _, s) = run(ecn, Ecn::NotEct);
        assert_eq!((r, s.forced_drop), (Enqueued::Dropped, 1));
        let (r, _, s) = run(Flags { harddrop: true, ..ecn }, Ecn::Ect1);
        assert_eq!((r, s.forced_drop), (Enqueued::Dropped, 1));
        let (r, _, _) = run(Flags::default(), Ecn::Ect0);
        assert_eq!(r, Enqueued::Dropped, "without ecn RED drops");
        let (r, e, _) = run(Flags { nodrop: true, ..ecn }, Ecn::NotEct);
        assert_eq!((r, e), (Enqueued::Queued, Ecn::NotEct), "nodrop lets Not-ECT pass");
        // Many arrivals: all marked while the average stays above max_th.
        let mut q = linux(&t, ecn);
        q.idle_since = None;
        q.avg.qavg = 4 * ((t.qth_max as u64) << t.wlog);
        for _ in 0..20 {
            assert_eq!(q.enqueue(pkt(1514, Ecn::Ect0), Time::ZERO), Enqueued::Queued);
        }
        assert_eq!((q.red.forced_mark, q.stats().ce_marks, q.stats().drops), (20, 20, 0));
        // Below min_th nothing happens and the count is reset.
        let mut q = linux(&t, ecn);
        for _ in 0..20 {
            q.enqueue(pkt(1514, Ecn::Ect0), Time::ZERO);
        }
        assert_eq!((q.red, q.qcount), (RedStats::default(), -1));
    }

    #[test]
    fn probabilistic_marks_mark_ect_and_drop_the_rest() {
        let t = tc(400_000, 0.4);
        let mut q = linux(&t, Flags { ecn: true, ..Flags::default() });
        q.idle_since = None;
        let mid = ((t.qth_min as u64 + t.qth_max as u64) / 2) << t.wlog;
        let (mut ce, mut dropped) = (0, 0);
        for i in 0..2000 {
            // The child is kept empty, so the arrival's update only takes qavg/32 off.
            q.avg.qavg = mid;
            let e = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
            let r = q.enqueue(pkt(100, e), Time::ZERO);
            if r == Enqueued::Dropped {
                dropped += 1;
                assert_eq!(e, Ecn::NotEct);
            } else if let Some(p) = q.dequeue(Time::ZERO) {
                ce += (p.ecn == Ecn::Ce) as u32;
            }
            q.idle_since = None;
        }
        assert!(ce > 50 && dropped > 50, "ce {ce} dropped {dropped}");
        assert_eq!(q.red.prob_mark, ce as u64);
        assert_eq!(q.red.prob_drop, dropped as u64);
        assert_eq!(q.red.forced_mark + q.red.forced_drop, 0);
    }

    #[test]
    fn adaptive_red_moves_max_p_by_the_rules() {
        let t = tc(400_000, 0.02);
        let mut a = LinuxAverage::new(&t);
        assert_eq!(MAX_P_MIN, 42_949_673);
        // Above the target band: + min(1 %, max_P/4) while max_P <= 50 %.
        a.qavg = ((a.target_max as u64) + 1) << a.wlog;
        let mut prev = a.max_p;
        let mut steps = 0;
        while prev <= MAX_P_MAX {
            a.adapt(None);
            assert_eq!(a.max_p, prev + (prev / 4).min(MAX_P_MIN));
            assert_eq!(a.max_p_delta, ((a.max_p as u64 + 66_667 / 2) / 66_667) as u32);
            prev = a.max_p;
            steps += 1;
        }
        // 0.02 -> 0.025 -> 0.03125 -> 0.0390625 -> 0.048828125 (+ quarter), then +1 % to 50 %.
        assert_eq!(steps, 4 + 46);
        a.adapt(None);
        assert_eq!(a.max_p, prev, "no increase above 50 %");
        // Inside the band: unchanged.
        a.qavg = (a.target_min as u64) << a.wlog;
        a.adapt(None);
        assert_eq!(a.max_p, prev);
        a.qavg = (a.target_max as u64) << a.wlog;
        a.adapt(None);
        assert_eq!(a.max_p, prev);
        // Below the band: x 0.9 (as (max_P/10)*9) while max_P >= 1 %.
        a.qavg = ((a.target_min as u64) - 1) << a.wlog;
        while prev >= MAX_P_MIN {
            a.adapt(None);
            assert_eq!(a.max_p, (prev / 10) * 9);
            prev = a.max_p;
        }
        a.adapt(None);
        assert_eq!(a.max_p, prev, "no decrease below 1 %");
        assert!(prev as f64 > 0.009 * 4294967296.0);
        // An idle queue is judged by its decayed average.
        let mut b = LinuxAverage::new(&t);
        b.qavg = ((b.target_max as u64) * 2) << b.wlog;
        b.adapt(Some(Time::from_secs(1)));
        assert_eq!(b.max_p, (85_899_345 / 10) * 9);
    }

    #[test]
    fn adaptive_timer_ticks_every_500ms_of_simulated_time() {
        let t = tc(400_000, 0.02);
        let mut q = linux(&t, Flags { adaptive: true, ..Flags::default() });
        q.enqueue(pkt(1514, Ecn::NotEct), Time::ZERO); // arms the timer for 0.5 s
        q.avg.qavg = ((q.avg.target_max as u64) + 100) << t.wlog;
        let mut want = q.avg.max_p;
        q.enqueue(pkt(1514, Ecn::NotEct), Time::from_millis(499));
        assert_eq!(q.avg.max_p, want);
        // Ticks at 0.5, 1.0, 1.5 and 2.0 s, all before the arrival at 2.2 s is counted.
        q.avg.qavg = ((q.avg.target_max as u64) + 100) << t.wlog;
        q.enqueue(pkt(1514, Ecn::NotEct), Time::from_millis(2200));
        for _ in 0..4 {
            want += (want / 4).min(MAX_P_MIN);
        }
        assert_eq!(q.avg.max_p, want);
        // Not adaptive: max_P never moves.
        let mut q = linux(&t, Flags::default());
        q.avg.qavg = ((q.avg.target_max as u64) + 100) << t.wlog;
        q.idle_since = None;
        q.enqueue(pkt(1514, Ecn::NotEct), Time::from_secs(5));
        assert_eq!(q.avg.max_p, 85_899_345);
    }

    /// `noadaptive_timer`: `adaptive` is stored but the timer never starts (current kernel
    /// with iproute2 >= ~5.8, which leaves the legacy `tc_red_qopt.flags` 0), so max_P stays
    /// at the configured 0.02 however long the average sits above the band.
    #[test]
    fn adaptive_timer_off_keeps_max_p_at_its_initial_value() {
        let s = spec("red limit 400000 avpkt 1000 adaptive bandwidth 50Mbit ecn noadaptive_timer");
        assert!(s.contains("adaptive: true }, adaptive_timer: false"), "{s}");
        assert!(spec("red limit 400000 avpkt 1000 adaptive").contains("adaptive_timer: true"));
        let t: toml::Table = toml::from_str("kind = \"red\"\nlimit = 400000\navpkt = 1000\nadaptive = true\nadaptive_timer = false").unwrap();
        assert!(format!("{:?}", QdiscSpec::from_table(&t).unwrap()).contains("adaptive_timer: false"));
        let t = tc(400_000, 0.02);
        for timer in [true, false] {
            let mut q = linux(&t, Flags { adaptive: true, ..Flags::default() }).with_adaptive_timer(timer);
            q.enqueue(pkt(1514, Ecn::NotEct), Time::ZERO);
            q.avg.qavg = ((q.avg.target_max as u64) + 100) << t.wlog;
            q.enqueue(pkt(1514, Ecn::NotEct), Time::from_secs(10));
            let mut out = Vec::new();
            q.xstats(&mut out);
            if timer {
                assert!(q.avg.max_p > 85_899_345 && out[1].1 > 0.02, "the timer runs: {}", q.avg.max_p);
            } else {
                assert_eq!(q.avg.max_p, 85_899_345);
                assert_eq!(out[1], ("prob", 85_899_345.0 / 4294967296.0), "tc -d would show probability 0.02");
            }
        }
    }

    #[test]
    fn xstats_report_qavg_in_bytes_and_max_p() {
        let t = tc(400_000, 0.02);
        let mut q = linux(&t, Flags::default());
        q.avg.qavg = 50_000 << t.wlog;
        let mut out = Vec::new();
        q.xstats(&mut out);
        assert_eq!(out, vec![("qavg", 50_000.0), ("prob", 85_899_345.0 / 4294967296.0)]);
    }
}
