//! DualPI2, the DualQ Coupled AQM (RFC 9332), modelled on Linux `net/sched/sch_dualpi2.c`
//! as merged upstream (torvalds/linux 6.17+, read at commit 92b9c2b7), with the tc syntax of
//! iproute2 `tc/q_dualpi2.c`. The L4STeam out-of-tree qdisc that the 2020-2024 studies ran is
//! selected by the era profile (`stack`, see [`Era`]): it differs in the step eligibility
//! (`min_qlen_step` 2), the absence of a byte limit and the packet step threshold ×1000.
//! docs/algorithms/dualpi2.md lists the sources and every remaining difference.
//!
//! - Two FIFOs share one limit: C (classic, `Packet::queue` 0) and L (low latency, 1).
//!   A packet goes to L when `ecn & ecn_mask != 0` (`dualpi2_skb_classify`): with the default
//!   mask (`l4s_ect`, the ECT(1) bit) ECT(1) and CE go to L, Not-ECT and ECT(0) to C.
//! - A PI controller (`calculate_probability`, run every `tupdate` by the kernel's hrtimer)
//!   updates the base probability p' from the larger of the two head-of-queue sojourn times:
//!   `p' += alpha·(qdelay − target) + beta·(qdelay − qdelay_prev)`, in the kernel's fixed
//!   point (p' as a u32 fraction of 2^32 − 1, alpha/beta scaled by `dualpi2_scale_alpha_beta`).
//! - `must_drop`: nothing while the total backlog is below 2 MTU; C packets are dropped (Not-ECT
//!   or overload) or CE-marked with probability p'² (two independent rolls); L packets are
//!   marked with probability k·p', or on overload (k·p' > 1) dropped with p'² when
//!   `drop_on_overload` and marked otherwise. Applied at dequeue by default (`drop_dequeue`).
//! - Step AQM on L packets at dequeue (`do_step_aqm`): CE when the sojourn (or the L queue
//!   length, with a threshold in packets) exceeds `step_thresh`.
//! - WRR between the queues by a byte credit (`dequeue_packet`), C guaranteed
//!   `classic_protection` percent (10) of the bytes when both are backlogged.
//!
//! The simulator has no timers inside disciplines: every enqueue/dequeue first runs the PI
//! updates that fell due since the previous call. The queues do not change between calls, so
//! each update sees exactly the head sojourn times it would have seen at its own instant.

use super::{Args, BuildCtx, Enqueued, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Type, Value};
use crate::packet::{Ecn, Packet};
use crate::profile::Stack;
use crate::rng::Stream;
use crate::time::Time;
use crate::units::{parse_time, Limit};
use std::collections::VecDeque;
use std::sync::Arc;

/// Probability 1 in the kernel's fixed point (`MAX_PROB`).
const MAX_PROB: u32 = u32::MAX;
/// alpha/beta on netlink are in units of 1/256 Hz (`ALPHA_BETA_SHIFT`).
const ALPHA_BETA_SHIFT: u32 = 8;
/// Internal alpha/beta carry 6 extra bits (`ALPHA_BETA_GRANULARITY`), removed in `__scale_delta`.
const ALPHA_BETA_GRANULARITY: u32 = 6;
/// Largest netlink alpha/beta (`ALPHA_BETA_MAX`, 2^31 − 1).
const ALPHA_BETA_MAX: u32 = (1 << 31) - 1;
/// Weights are percentages: wc + wl = 100 (`MAX_WC`).
const MAX_WC: u8 = 100;

/// `TC_DUALPI2_ECN_MASK_L4S_ECT`: the ECT(1) bit.
const ECN_MASK_L4S_ECT: u8 = 1;
/// `TC_DUALPI2_ECN_MASK_ANY_ECT`.
const ECN_MASK_ANY_ECT: u8 = 3;

/// Internal gain from the netlink value (`dualpi2_scale_alpha_beta`): units of 2^-32 per
/// 64 ns of delay, i.e. `param/256 Hz · MAX_PROB · 64 / 1e9`, truncated.
fn scale_alpha_beta(param: u32) -> u32 {
    (((param as u64 * MAX_PROB as u64) >> (ALPHA_BETA_SHIFT - ALPHA_BETA_GRANULARITY)) / 1_000_000_000) as u32
}

/// The netlink value tc sends for a gain given in Hz (`parse_alpha_beta`: float times 256,
/// truncated; tc computes in single precision, so `alpha 0.16` gives 40, not the default 41).
fn alpha_beta_from_hz(hz: f64) -> u32 {
    ((hz as f32) * (1u32 << ALPHA_BETA_SHIFT) as f32) as u32
}

/// Step threshold: a sojourn time (ns) or an L-queue length (packets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepThresh {
    Time(u32),
    Packets(u32),
}

/// Which `sch_dualpi2.c` a profile ran (see docs/algorithms/dualpi2.md, "Era profiles").
///
/// Only the defaults and quirks that differ are modelled here; everything else (PI2 with the
/// /64 gain scaling, `must_drop`, the WRR, the classification, overload) was read to be the
/// same in every era and shares one code path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Era {
    /// Upstream Linux (torvalds/linux 92b9c2b7; netdev v9 of 16 Mar 2025 onwards): profiles
    /// `linux` and `sce-2020` (the SCE kernel had no DualPI2 of its own).
    Upstream,
    /// The L4STeam out-of-tree qdisc of 2020-2024 (profiles `l4steam-2020`, `l4steam-2020-04`,
    /// `l4steam-2024`). Read: the L4STeam 5.4 tree as copied in dejeneboru/mdtcp-mprague at
    /// b69a6a70 (15 Mar 2020) and 715833c6 (17 Apr 2020), `net/sched/sch_dualpi2.c`; the netdev
    /// submission "[PATCH net-next 1/1] sched: Add dualpi2 qdisc" of 18 Oct 2024 (stored id
    /// 19582659352); L4STeam/iproute2 b19604c3 `tc/q_dualpi2.c`. The tested commits themselves
    /// (b256daed, e741f5ac, 1014c0e4, the 5.15 kernel of 2024) were not readable; they lie
    /// between copies that behave the same in everything modelled here.
    L4steam,
}

impl Era {
    fn of(stack: Stack) -> Era {
        if stack.is_l4steam() {
            Era::L4steam
        } else {
            Era::Upstream
        }
    }

    /// The byte limit when the scenario gives no `memlimit`.
    ///
    /// Upstream: `limit · 2 · MTU` (`get_memory_limit`, netdev v12 onwards).
    ///
    /// L4STeam: none; `dualpi2_enqueue_skb` (715833c6 ~l.374, 2024-10-18 submission) refuses
    /// a packet only when `qdisc_qlen(sch) >= sch->limit`, and the netlink policy has no
    /// memlimit attribute (added in netdev v5, 22 Feb 2025).
    fn memory_limit(self, limit: u32, mtu: u32) -> u64 {
        match self {
            Era::Upstream => (limit as u64 * 2 * mtu as u64).min(u32::MAX as u64),
            Era::L4steam => u64::MAX,
        }
    }

    /// The stored step threshold for the parsed one.
    ///
    /// L4STeam: `dualpi2_change` (715833c6 ~l.733; same in the 2024-10-18 submission) stores
    /// `nla_get_u32(TCA_DUALPI2_STEP_THRESH) * NSEC_PER_USEC` whatever
    /// `TCA_DUALPI2_STEP_PACKETS` says, and the era's tc (L4STeam/iproute2 b19604c3
    /// `dualpi2_parse_opt`) sends the bare count with `STEP_PACKETS` 1 for `step_thresh 5pkt`.
    /// `do_step_aqm` then compares the L queue length with 5000. Fixed upstream in netdev v5
    /// ("Fix step_thresh in packets"). `step.thresh` is a u32 (715833c6 ~l.76), so the product
    /// wraps modulo 2^32 as the kernel's store does.
    fn step_thresh(self, th: StepThresh) -> StepThresh {
        match (self, th) {
            (Era::L4steam, StepThresh::Packets(n)) => StepThresh::Packets(n.wrapping_mul(1000)),
            (_, th) => th,
        }
    }
}

/// Parsed `dualpi2` parameters, in the units the kernel receives them over netlink.
#[derive(Clone, Debug, PartialEq)]
struct DualPi2Config {
    /// Shared packet limit of both queues (`limit`, default 10000).
    limit: u32,
    /// Byte limit (`memlimit`); `None`: the profile's default (see [`Era::memory_limit`]).
    memlimit: Option<u32>,
    /// PI target delay, µs (`target`, 15 ms).
    target_us: u32,
    /// PI update interval, µs (`tupdate`, 16 ms).
    tupdate_us: u32,
    /// Integral gain, 1/256 Hz (`alpha`, 41 ≈ 0.16 Hz).
    alpha: u32,
    /// Proportional gain, 1/256 Hz (`beta`, 819 ≈ 3.2 Hz).
    beta: u32,
    /// L-queue step threshold (`step_thresh`, 1 ms).
    step_thresh: StepThresh,
    /// Step marking only for packets that found at least this many packets in L
    /// (`min_qlen_step`); `None`: the profile's default (the table's per-stack default).
    min_qlen_step: Option<u32>,
    /// k (`coupling_factor`, 2).
    coupling_factor: u8,
    /// `drop_on_overload` (true) or `overflow`.
    drop_overload: bool,
    /// `drop_enqueue` (true) or `drop_dequeue` (false, default).
    drop_early: bool,
    /// C-queue WRR weight in percent (`classic_protection`, 10).
    c_protection: u8,
    /// Which ECN bits select the L queue (`l4s_ect` = 1, default; `any_ect` = 3).
    ecn_mask: u8,
    /// `split_gso` / `no_split_gso`: accepted, no effect (the simulator has no GSO packets).
    split_gso: bool,
}

impl Default for DualPi2Config {
    /// `dualpi2_reset_default` (the table's Linux defaults).
    fn default() -> Self {
        DualPi2Config::from_args(&DUALPI2.defaults(Stack::Linux)).expect("the defaults are valid")
    }
}

impl QdiscConfig for DualPi2Config {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(DualPi2::new(self, ctx.stack, ctx.mtu, ctx.rng.clone()))
    }
}

/// A time tc sends in microseconds as a u32.
fn micros(key: &str, v: Value) -> Result<Option<Value>, String> {
    match v {
        Value::Time(t) if u32::try_from(t.as_micros()).is_err() => Err(format!("{key} is too large (at most {} us)", u32::MAX)),
        v => Ok(Some(v)),
    }
}

fn as_micros(a: &Args, key: &str) -> u32 {
    a.time(key).as_micros() as u32
}

/// alpha and beta: Hz, sent in 1/256 Hz within the kernel's netlink range.
fn gain(key: &str, v: Value) -> Result<Option<Value>, String> {
    let Value::Real(hz) = v else { return Ok(Some(v)) };
    let scaled = alpha_beta_from_hz(hz);
    if scaled == 0 {
        return Err(format!("{key} must be at least 1/256 Hz (0.00390625)"));
    }
    if scaled > ALPHA_BETA_MAX {
        // The kernel's netlink policy refuses it.
        return Err(format!("{key} must be below 2^23 Hz"));
    }
    Ok(Some(v))
}

/// `step_thresh`: tc tries a time first (a bare number is µs), then a packet count.
fn parse_step_thresh(_key: &str, v: &str) -> Result<Value, String> {
    match parse_time(v, Some(1_000)) {
        Ok(t) => Ok(Value::Time(t)),
        Err(_) => parse_packets(v).map(|n| Value::Limit(Limit::Packets(n))).ok_or_else(|| {
            format!("step_thresh '{v}' is neither a time (e.g. 1ms) nor a packet count (e.g. 5p)")
        }),
    }
}

/// `classic_protection PERCENTAGE` (`%` optional), rounded.
fn parse_percentage(_key: &str, v: &str) -> Result<Value, String> {
    let pct = v.strip_suffix('%').unwrap_or(v).parse::<f64>().ok().filter(|x| (0.0..=100.0).contains(x));
    let pct = pct.ok_or_else(|| format!("classic_protection '{v}' is not a percentage 0..100"))?;
    Ok(Value::Uint(pct.round() as u64))
}

const fn hz(name: &'static str, default_scaled: u32) -> Param {
    Param::new(name, Type::Real { min: 0.0, max: ((1u32 << 24) - 1) as f64 }, Value::Real(default_scaled as f64 / 256.0))
        .unit("Hz")
        .check(gain)
}

/// `tc qdisc add ... dualpi2 [limit PACKETS] [memlimit BYTES] [coupling_factor NUMBER]
/// [step_thresh TIME|PACKETS] [min_qlen_step PACKETS] [drop_on_overload|overflow]
/// [drop_enqueue|drop_dequeue] [classic_protection PERCENTAGE] [max_rtt TIME [typical_rtt TIME]]
/// [target TIME] [tupdate TIME] [alpha ALPHA] [beta BETA] [l4s_ect|any_ect]
/// [split_gso|no_split_gso]`, as iproute2's `dualpi2_parse_opt`.
pub const DUALPI2: QdiscKind = QdiscKind {
    name: "dualpi2",
    doc: "DualQ Coupled AQM: PI2 on the classic queue, coupled L4S marking (sch_dualpi2.c, RFC 9332)",
    params: &[
        Param::uint("limit", 1, u32::MAX as u64, 10_000).unit("packets").doc("shared packet limit of both queues"),
        Param::new("memlimit", Type::Bytes, Value::Unset)
            .unit("bytes")
            .doc("byte limit; unset: limit x 2 x MTU on linux and sce-2020, none on the L4STeam profiles")
            .check(|_, v| match v {
                Value::Bytes(b) if b == 0 || b > u32::MAX as u64 => Err("memlimit must be 1..4294967295 bytes".into()),
                v => Ok(Some(v)),
            }),
        Param::time("target", Time::from_millis(15)).doc("PI target delay of the classic queue (0: keep the default)").check(micros),
        Param::time("tupdate", Time::from_millis(16)).doc("PI update interval (0: keep the default)").check(micros),
        hz("alpha", 41).doc("integral gain (kernel: 1/256 Hz units)"),
        hz("beta", 819).doc("proportional gain (kernel: 1/256 Hz units)"),
        Param::uint("coupling_factor", 1, 255, 2).doc("k: L4S marking = k x the classic PI's p'"),
        Param::new("step_thresh", Type::Custom { syntax: "TIME or PACKETS (5p)", parse: parse_step_thresh }, Value::Time(Time::from_millis(1)))
            .doc("L-queue step marking threshold, a sojourn time or a queue length (0: keep the value)")
            .check(|_, v| Ok(match v {
                Value::Time(t) if t.as_micros() == 0 => None,
                Value::Limit(Limit::Packets(0)) => None,
                v => Some(v),
            })),
        // `min_qlen_step`'s default per profile.
        //
        // Upstream: 0 (`dualpi2_reset_default`: "Always apply step mark in L-queue"; tested in
        // `skb_apply_step` as `qdisc_qlen(q->l_queue) >= q->min_qlen_step`).
        //
        // L4STeam: the era had no such option; `dualpi2_enqueue_skb` (715833c6 ~l.394; the
        // 2024-10-18 submission, same function) sets `apply_step = skb_is_l4s(skb) &&
        // qdisc_qlen(q->l_queue) > 1` before `qdisc_enqueue_tail` adds the packet, and b69a6a70
        // `dualpi2_qdisc_enqueue` (~l.314) has the same test on the L queue only. `qdisc_qlen` of
        // the L child counts the packets still queued in L (not the one on the wire, not the C
        // queue), which is exactly what `DualPi2::enqueue` compares with `min_qlen_step`
        // before pushing, so the era's rule is `min_qlen_step` 2. `do_step_aqm` (715833c6
        // ~l.520-539) then marks at dequeue only if `apply_step && qdelay > step.thresh`.
        Param::uint("min_qlen_step", 0, u32::MAX as u64, 0)
            .unit("packets")
            .doc("step marking only when L holds at least this many")
            .stack_defaults(&[
                (Stack::L4steam2020, Value::Uint(2)),
                (Stack::L4steam2020Apr, Value::Uint(2)),
                (Stack::L4steam2024, Value::Uint(2)),
            ]),
        Param::flag("drop_on_overload", true)
            .words(&[("overflow", Value::Bool(false))])
            .doc("drop on overload (overflow: let the queue grow to the limit)"),
        Param::flag("drop_enqueue", false).words(&[("drop_dequeue", Value::Bool(false))]).doc("drop at enqueue instead of dequeue"),
        Param::new("classic_protection", Type::Custom { syntax: "PERCENTAGE 0..100", parse: parse_percentage }, Value::Uint(10))
            .unit("%")
            .doc("classic queue's WRR weight"),
        Param::new("max_rtt", Type::Time, Value::Time(Time::ZERO))
            .doc("auto-configure target/tupdate/alpha/beta for this RTT (RFC 9332 A.1); 0: off")
            .check(micros),
        Param::new("typical_rtt", Type::Time, Value::Time(Time::ZERO)).doc("with max_rtt: the typical RTT; 0: max_rtt / 6").check(micros),
        Param::flag("l4s_ect", true).words(&[("any_ect", Value::Bool(false))]).doc("ECT(1) selects the L queue (any_ect: ECT(0) too)"),
        Param::flag("split_gso", true).words(&[("no_split_gso", Value::Bool(false))]).doc("accepted; no effect (no GSO packets)"),
    ],
    build: |a| Ok(Arc::new(DualPi2Config::from_args(a)?)),
};

impl DualPi2Config {
    fn from_args(a: &Args) -> Result<DualPi2Config, String> {
        let default_us = |k: &str| match a.default_of(k) {
            Value::Time(t) => t.as_micros() as u32,
            v => unreachable!("{k} default {v:?}"),
        };
        let scaled = |k: &str| alpha_beta_from_hz(a.real(k));
        let (mut target, mut tupdate, mut alpha, mut beta) = (as_micros(a, "target"), as_micros(a, "tupdate"), scaled("alpha"), scaled("beta"));
        let (mut max_rtt, mut typical_rtt) = (as_micros(a, "max_rtt"), as_micros(a, "typical_rtt"));
        if max_rtt > 0 || typical_rtt > 0 {
            // tc's auto-configuration from RFC 9332 App. A.1; it overrides target/tupdate/alpha/beta.
            if typical_rtt == 0 {
                typical_rtt = (max_rtt / 6).max(1);
            } else if max_rtt == 0 {
                max_rtt = typical_rtt.saturating_mul(6);
            } else if typical_rtt > max_rtt {
                return Err(a.invalid("typical_rtt must be <= max_rtt"));
            }
            let (typ, max) = (typical_rtt as f64, max_rtt as f64);
            let tu = (if typ < max / 3.0 { typ } else { max / 3.0 } as u32).max(1);
            let al = tu as f64 / max / max * 1e6 * 0.1f32 as f64;
            let be = 0.3f32 as f64 / max * 1e6;
            if be > ((1u32 << 24) - 1) as f64 {
                return Err(a.invalid(format!("max_rtt {max_rtt}us is too low: beta would overflow")));
            }
            if al < 1.0 / 256.0 || be < 1.0 / 256.0 {
                return Err(a.invalid(format!("max_rtt {max_rtt}us is too large: alpha/beta round down to 0")));
            }
            target = typical_rtt;
            tupdate = tu;
            alpha = (al * 256.0) as u32;
            beta = (be * 256.0) as u32;
        }
        // tc sends no attribute for a zero target/tupdate, so the default stays.
        if target == 0 {
            target = default_us("target");
        }
        if tupdate == 0 {
            tupdate = default_us("tupdate");
        }
        let step_thresh = match a.get("step_thresh") {
            Value::Time(t) => StepThresh::Time(u32::try_from(t.as_micros()).unwrap_or(u32::MAX).saturating_mul(1000)),
            Value::Limit(Limit::Packets(n)) => StepThresh::Packets(n),
            v => unreachable!("step_thresh {v:?}"),
        };
        Ok(DualPi2Config {
            limit: a.u32("limit"),
            memlimit: a.bytes_opt("memlimit").map(|b| b as u32),
            target_us: target,
            tupdate_us: tupdate,
            alpha,
            beta,
            step_thresh,
            min_qlen_step: a.given("min_qlen_step").then(|| a.uint("min_qlen_step") as u32),
            coupling_factor: a.uint("coupling_factor") as u8,
            drop_overload: a.flag("drop_on_overload"),
            drop_early: a.flag("drop_enqueue"),
            c_protection: a.uint("classic_protection") as u8,
            ecn_mask: if a.flag("l4s_ect") { ECN_MASK_L4S_ECT } else { ECN_MASK_ANY_ECT },
            split_gso: a.flag("split_gso"),
        })
    }
}

/// A packet count with one of tc's suffixes (`get_packets`: p, pkt, pkts, packet, packets).
fn parse_packets(v: &str) -> Option<u32> {
    let end = v.find(|c: char| !c.is_ascii_digit())?;
    if end == 0 || !["p", "pkt", "pkts", "packet", "packets"].contains(&&v[end..]) {
        return None;
    }
    v[..end].parse().ok()
}

/// Which queue a packet was classified into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Classic,
    L4s,
}

/// The DualPI2 discipline.
pub struct DualPi2 {
    // Configuration, in kernel units.
    limit: u32,
    memory_limit: u64,
    target: u64,
    tupdate: u64,
    alpha: u32,
    beta: u32,
    step_thresh: StepThresh,
    min_qlen_step: u32,
    coupling_factor: u8,
    drop_overload: bool,
    drop_early: bool,
    wc: i64,
    wl: i64,
    credit_init: i64,
    ecn_mask: u8,
    mtu: u32,
    // State.
    c_queue: VecDeque<Packet>,
    /// L packets with their `apply_step` flag.
    l_queue: VecDeque<(Packet, bool)>,
    backlog: u64,
    memory_used: u64,
    /// Base probability p' (`pi2_prob`), fraction of `MAX_PROB`.
    prob: u32,
    /// Queue delay at the previous update (`last_qdelay`), ns.
    last_qdelay: u64,
    /// WRR credit (`c_protection_credit`): C is served when positive and both are backlogged.
    credit: i64,
    /// Time of the next PI update; set on the first call (the kernel arms its timer at init).
    next_update: Option<Time>,
    /// Time of the latest enqueue/dequeue, for the delay xstats.
    last_now: Time,
    rng: Stream,
    stats: QdiscStats,
    packets_in_c: u64,
    packets_in_l: u64,
    maxq: u32,
    ecn_mark: u64,
    step_marks: u64,
}

impl DualPi2 {
    /// Builds the discipline of profile `stack`; parameters the scenario left unset take
    /// that profile's defaults ([`Era`]), explicit ones are used as given.
    fn new(c: &DualPi2Config, stack: Stack, mtu: u32, rng: Stream) -> Self {
        let era = Era::of(stack);
        let wc = c.c_protection.min(MAX_WC) as i64;
        let wl = MAX_WC as i64 - wc;
        let cap = (c.limit as usize).min(1 << 14);
        DualPi2 {
            limit: c.limit,
            memory_limit: c.memlimit.map_or_else(|| era.memory_limit(c.limit, mtu), |m| m as u64),
            target: c.target_us as u64 * 1000,
            tupdate: (c.tupdate_us as u64 * 1000).min(u32::MAX as u64),
            alpha: scale_alpha_beta(c.alpha),
            beta: scale_alpha_beta(c.beta),
            step_thresh: era.step_thresh(c.step_thresh),
            min_qlen_step: c.min_qlen_step.unwrap_or_else(|| DUALPI2.defaults(stack).uint("min_qlen_step") as u32),
            coupling_factor: c.coupling_factor.max(1),
            drop_overload: c.drop_overload,
            drop_early: c.drop_early,
            wc,
            wl,
            credit_init: mtu as i64 * (wc - wl),
            ecn_mask: c.ecn_mask,
            mtu,
            c_queue: VecDeque::with_capacity(cap),
            l_queue: VecDeque::with_capacity(cap),
            backlog: 0,
            memory_used: 0,
            prob: 0,
            last_qdelay: 0,
            credit: mtu as i64 * (wc - wl),
            next_update: None,
            last_now: Time::ZERO,
            rng,
            stats: QdiscStats::default(),
            packets_in_c: 0,
            packets_in_l: 0,
            maxq: 0,
            ecn_mark: 0,
            step_marks: 0,
        }
    }

    /// Base probability p' in the kernel's fixed point (1 = `u32::MAX`).
    pub fn prob_raw(&self) -> u32 {
        self.prob
    }

    /// Runs the PI updates due at or before `now` (the kernel's `dualpi2_timer`).
    pub fn advance(&mut self, now: Time) {
        let tupdate = Time(self.tupdate.max(1));
        let mut next = *self.next_update.get_or_insert(now + tupdate);
        while next <= now {
            if self.is_empty() && self.prob == 0 && self.last_qdelay == 0 {
                // Idle with p' = 0: every further update computes qdelay = 0 and clamps p' to 0.
                let n = (now.0 - next.0) / tupdate.0 + 1;
                next = Time(next.0 + n * tupdate.0);
                break;
            }
            self.update_probability(next);
            next += tupdate;
        }
        self.next_update = Some(next);
    }

    /// Sojourn times of the C and L head packets at `t` (0 for an empty queue), ns
    /// (`get_queue_delays`).
    fn head_delays(&self, t: Time) -> (u64, u64) {
        let c = self.c_queue.front().map_or(0, |p| (t - p.enqueued_at).0);
        let l = self.l_queue.front().map_or(0, |(p, _)| (t - p.enqueued_at).0);
        (c, l)
    }

    /// `calculate_probability` at time `t`.
    fn update_probability(&mut self, t: Time) {
        let (qc, ql) = self.head_delays(t);
        let qdelay = qc.max(ql);
        let delta = (qdelay as i128 - self.target as i128) * self.alpha as i128
            + (qdelay as i128 - self.last_qdelay as i128) * self.beta as i128;
        self.last_qdelay = qdelay;
        // `__scale_delta` divides the magnitude by 64 (truncation towards zero), then the
        // result is bounded to [0, MAX_PROB].
        let scaled = delta / (1i128 << ALPHA_BETA_GRANULARITY);
        let mut p = (self.prob as i128 + scaled).clamp(0, MAX_PROB as i128) as u32;
        if !self.drop_overload {
            // Keep the L probability k·p' at most 100 %.
            p = p.min(MAX_PROB / self.coupling_factor as u32);
        }
        self.prob = p;
    }

    fn classify(&self, pkt: &Packet) -> Class {
        if pkt.ecn as u8 & self.ecn_mask != 0 {
            Class::L4s
        } else {
            Class::Classic
        }
    }

    /// `dualpi2_roll`: true with probability (prob + 1) / 2^32.
    fn roll(&mut self, prob: u32) -> bool {
        self.rng.next_u32() <= prob
    }

    /// `dualpi2_mark` (`INET_ECN_set_ce`): ECT becomes CE; CE counts as marked; Not-ECT fails.
    fn mark(&mut self, pkt: &mut Packet) -> bool {
        let was_ce = pkt.ecn == Ecn::Ce;
        if !pkt.ecn.set_ce() {
            return false;
        }
        self.ecn_mark += 1;
        if !was_ce {
            self.stats.ce_marks += 1;
        }
        true
    }

    /// `must_drop`: the PI2 decision for one packet, given the current backlog. Marks the
    /// packet when it is to be signalled by CE; returns true when it must be dropped.
    fn must_drop(&mut self, pkt: &mut Packet, class: Class) -> bool {
        if self.backlog < 2 * self.mtu as u64 {
            return false;
        }
        let prob = self.prob;
        let l_prob = prob as u64 * self.coupling_factor as u64;
        let overload = l_prob > MAX_PROB as u64;
        match class {
            // `dualpi2_classic_marking`: p'² by two rolls; drop Not-ECT, and everything on overload.
            Class::Classic => {
                if self.roll(prob) && self.roll(prob) {
                    if overload || pkt.ecn == Ecn::NotEct {
                        return true;
                    }
                    self.mark(pkt);
                }
                false
            }
            // `dualpi2_scalable_marking`.
            Class::L4s => {
                if overload {
                    if self.drop_overload && self.roll(prob) && self.roll(prob) {
                        return true;
                    }
                    self.mark(pkt);
                    return false;
                }
                if self.roll(l_prob as u32) {
                    if pkt.ecn == Ecn::NotEct {
                        return true;
                    }
                    self.mark(pkt);
                }
                false
            }
        }
    }

    /// `dequeue_packet`: WRR choice; returns the packet, its class, its step flag and the
    /// credit change to apply if it is sent.
    fn pick(&mut self) -> Option<(Packet, Class, bool, i64)> {
        let c_len = self.c_queue.len();
        let (pkt, class, apply_step, change) = if !self.l_queue.is_empty() && (c_len == 0 || self.credit <= 0) {
            let (pkt, step) = self.l_queue.pop_front().expect("non-empty");
            let change = if c_len > 0 { self.wc * pkt.wire_len as i64 } else { 0 };
            (pkt, Class::L4s, step, change)
        } else if c_len > 0 {
            let pkt = self.c_queue.pop_front().expect("non-empty");
            let change = if self.l_queue.is_empty() { 0 } else { -self.wl * pkt.wire_len as i64 };
            (pkt, Class::Classic, false, change)
        } else {
            self.credit = self.credit_init;
            return None;
        };
        crate::qdisc::dec_backlog!(self.backlog, pkt.wire_len as u64, "dualpi2 backlog");
        crate::qdisc::dec_backlog!(self.memory_used, pkt.wire_len as u64, "dualpi2 memory_used");
        Some((pkt, class, apply_step, change))
    }

    /// `do_step_aqm`: returns true when the packet must be dropped (a Not-ECT packet over the
    /// threshold; unreachable without tc filters, which the simulator does not model).
    fn step_aqm(&mut self, pkt: &mut Packet, apply_step: bool, now: Time) -> bool {
        let over = match self.step_thresh {
            StepThresh::Packets(n) => self.l_queue.len() as u64 > n as u64,
            StepThresh::Time(ns) => (now - pkt.enqueued_at).0 > ns as u64,
        };
        if apply_step && over {
            if pkt.ecn == Ecn::NotEct {
                return true;
            }
            if self.mark(pkt) {
                self.step_marks += 1;
            }
        }
        false
    }

    #[cfg(test)]
    fn set_prob(&mut self, p: u32) {
        self.prob = p;
    }
}

impl Qdisc for DualPi2 {
    fn kind(&self) -> &'static str {
        DUALPI2.name
    }

    /// `dualpi2_qdisc_enqueue` / `dualpi2_enqueue_skb`.
    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Enqueued {
        self.advance(now);
        self.last_now = now;
        let class = self.classify(&pkt);
        let len = pkt.wire_len as u64;
        if self.len() >= self.limit as usize || self.memory_used + len > self.memory_limit {
            self.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        if self.drop_early && self.must_drop(&mut pkt, class) {
            self.stats.drop(&pkt);
            return Enqueued::Dropped;
        }
        pkt.enqueued_at = now;
        self.memory_used += len;
        self.maxq = self.maxq.max(self.len() as u32);
        self.backlog += len;
        self.stats.enqueued += 1;
        match class {
            Class::L4s => {
                let apply_step = self.l_queue.len() as u64 >= self.min_qlen_step as u64;
                pkt.queue = 1;
                self.packets_in_l += 1;
                self.l_queue.push_back((pkt, apply_step));
            }
            Class::Classic => {
                pkt.queue = 0;
                self.packets_in_c += 1;
                self.c_queue.push_back(pkt);
            }
        }
        Enqueued::Queued
    }

    /// `dualpi2_qdisc_dequeue`: WRR pick, PI2 drop/mark (unless `drop_enqueue`), step AQM on L;
    /// a dropped packet is replaced by the next pick.
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.advance(now);
        self.last_now = now;
        while let Some((mut pkt, class, apply_step, change)) = self.pick() {
            if !self.drop_early && self.must_drop(&mut pkt, class) {
                self.stats.drop(&pkt);
                continue;
            }
            if class == Class::L4s && self.step_aqm(&mut pkt, apply_step, now) {
                self.stats.drop(&pkt);
                continue;
            }
            self.credit += change;
            self.stats.sent(&pkt);
            return Some(pkt);
        }
        None
    }

    fn len(&self) -> usize {
        self.c_queue.len() + self.l_queue.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }
    fn stats(&self) -> &QdiscStats {
        &self.stats
    }
    fn stats_mut(&mut self) -> &mut QdiscStats {
        &mut self.stats
    }
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        self.c_queue.iter().for_each(&mut *f);
        self.l_queue.iter().for_each(|(p, _)| f(p));
    }
    fn queue_names(&self) -> &'static [&'static str] {
        &["C", "L"]
    }

    /// `dualpi2_dump_stats`, plus the derived probabilities: `prob` p', `p_c` = p'²,
    /// `p_l` = min(1, k·p') (fractions); `delay_c`/`delay_l` head sojourns (ms) at the latest
    /// enqueue/dequeue; counters as in `tc -s`.
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        let p = self.prob as f64 / MAX_PROB as f64;
        let (qc, ql) = self.head_delays(self.last_now);
        out.push(("prob", p));
        out.push(("p_c", p * p));
        out.push(("p_l", (p * self.coupling_factor as f64).min(1.0)));
        out.push(("delay_c", qc as f64 / 1e6));
        out.push(("delay_l", ql as f64 / 1e6));
        out.push(("packets_in_c", self.packets_in_c as f64));
        out.push(("packets_in_l", self.packets_in_l as f64));
        out.push(("maxq", self.maxq as f64));
        out.push(("ecn_mark", self.ecn_mark as f64));
        out.push(("step_marks", self.step_marks as f64));
        out.push(("credit", self.credit as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Direction, Kind};
    use crate::qdisc::QdiscSpec;

    const MTU: u32 = 1514;

    /// Whether the tc string parses to exactly `c` (the spec's Debug output embeds the config).
    fn parses_to(s: &str, c: &DualPi2Config) -> bool {
        format!("{:?}", QdiscSpec::parse(s).unwrap()).contains(&format!("{c:?}"))
    }

    fn cfg(f: impl FnOnce(&mut DualPi2Config)) -> DualPi2Config {
        let mut c = DualPi2Config::default();
        f(&mut c);
        c
    }

    fn build(f: impl FnOnce(&mut DualPi2Config)) -> DualPi2 {
        build_on(Stack::Linux, f)
    }

    fn build_on(stack: Stack, f: impl FnOnce(&mut DualPi2Config)) -> DualPi2 {
        DualPi2::new(&cfg(f), stack, MTU, Stream::new(1, "dualpi2-test"))
    }

    fn dflt() -> DualPi2 {
        build(|_| {})
    }

    fn pkt(ecn: Ecn, len: u32, seq: u32) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
        p.ecn = ecn;
        p.tcp.seq = seq;
        p
    }

    fn ms(x: u64) -> Time {
        Time::from_millis(x)
    }

    #[test]
    fn defaults_and_tc_strings() {
        let d = DualPi2Config::default();
        assert!(parses_to("dualpi2", &d));
        // Spelled-out defaults: tc truncates 0.16·256 = 40.96 (single precision) to 40.
        let s = "dualpi2 target 15ms tupdate 16ms alpha 0.16 beta 3.2 coupling_factor 2 limit 10000";
        assert!(parses_to(s, &cfg(|c| c.alpha = 40)));
        assert!(parses_to("dualpi2 alpha 0.1602", &d));
        assert!(parses_to("dualpi2 step_thresh 5ms", &cfg(|c| c.step_thresh = StepThresh::Time(5_000_000))));
        assert!(parses_to("dualpi2 step_thresh 200", &cfg(|c| c.step_thresh = StepThresh::Time(200_000))), "bare = us");
        assert!(parses_to("dualpi2 step_thresh 5p", &cfg(|c| c.step_thresh = StepThresh::Packets(5))));
        assert!(parses_to("dualpi2 step_thresh 7packets", &cfg(|c| c.step_thresh = StepThresh::Packets(7))));
        let f = "dualpi2 overflow drop_enqueue classic_protection 25% any_ect min_qlen_step 2 memlimit 1mb no_split_gso";
        assert!(parses_to(
            f,
            &cfg(|c| {
                c.drop_overload = false;
                c.drop_early = true;
                c.c_protection = 25;
                c.ecn_mask = 3;
                c.min_qlen_step = Some(2);
                c.memlimit = Some(1 << 20);
                c.split_gso = false;
            })
        ));
        assert!(parses_to("dualpi2 drop_on_overload drop_dequeue l4s_ect split_gso classic_protection 10", &d));
        let t: toml::Table = toml::from_str("kind = \"dualpi2\"\nstep_thresh = \"5ms\"\nany_ect = true").unwrap();
        let want = cfg(|c| {
            c.step_thresh = StepThresh::Time(5_000_000);
            c.ecn_mask = 3;
        });
        assert!(format!("{:?}", QdiscSpec::from_table(&t).unwrap()).contains(&format!("{want:?}")));
        // max_rtt 100ms: typical = max/6 = 16666 us, tupdate = typical (< max/3),
        // alpha = 0.1·tupdate/max², beta = 0.3/max (RFC 9332 App. A.1 as tc computes it).
        let alpha = (0.1f32 as f64 * 16_666.0 / 1e5 / 1e5 * 1e6 * 256.0) as u32;
        assert_eq!(alpha, 42);
        let g = cfg(|c| {
            c.target_us = 16_666;
            c.tupdate_us = 16_666;
            c.alpha = alpha;
            c.beta = 768;
        });
        assert!(parses_to("dualpi2 max_rtt 100ms", &g));
        assert!(parses_to("dualpi2 typical_rtt 16666us alpha 5 beta 5", &g), "auto-config overrides the gains");
        for bad in [
            "dualpi2 alpha abc",
            "dualpi2 beta 0",
            "dualpi2 coupling_factor 0",
            "dualpi2 classic_protection 101",
            "dualpi2 step_thresh 5x",
            "dualpi2 limit 0",
            "dualpi2 k 2",
            "dualpi2 typical_rtt 200ms max_rtt 100ms",
            "dualpi2 target",
            "dualpi2 alpha 9000000",
        ] {
            let e = QdiscSpec::parse(bad).unwrap_err();
            assert!(!e.contains('\n') && e.contains("dualpi2"), "{bad}: {e}");
        }
        assert!(QdiscSpec::parse("dualpi2 alpha abc").unwrap_err().contains("alpha"));
        assert!(QdiscSpec::parse("dualpi2 k 2").unwrap_err().contains("'k'"));
        assert!(QdiscSpec::parse("dualpi2 step_thresh 5x").unwrap_err().contains("step_thresh"));
    }

    #[test]
    fn kernel_gain_scaling() {
        // dualpi2_scale_alpha_beta: param · (2^32 − 1) >> 2 / 1e9.
        assert_eq!(scale_alpha_beta(41), 44);
        assert_eq!(scale_alpha_beta(819), 879);
        let q = dflt();
        assert_eq!((q.alpha, q.beta, q.target, q.tupdate), (44, 879, 15_000_000, 16_000_000));
        assert_eq!(q.memory_limit, 10_000 * 2 * 1514);
    }

    /// With the head of the C queue held at a prescribed sojourn d_k at each update instant
    /// t_k, p' follows p' += alpha·(d_k − target) + beta·(d_k − d_{k−1}), bounded to [0, 1].
    #[test]
    fn pi_update_follows_the_control_law() {
        let mut q = dflt();
        q.dequeue(Time::ZERO); // arms the update timer: updates at k·16 ms
        let tu = ms(16).0;
        // Delay profile (ms): above target, holds, falls below (p' clamps at 0), rises again;
        // steps of less than tupdate keep the enqueue times in order, d_0 <= t_0 keeps them >= 0.
        let delays: Vec<u64> =
            [10, 20, 30, 40, 40, 40, 35, 25, 15, 10, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 10, 20, 30, 30].iter().map(|&d| ms(d).0).collect();
        // Packet k is enqueued at t_k − d_k and the previous head leaves just before t_k, so at
        // t_k the head has sojourn d_k (small packets: backlog < 2 MTU, nothing is signalled).
        let mut events: Vec<(u64, bool, usize)> = Vec::new(); // (time, is_enqueue, k)
        for (i, &d) in delays.iter().enumerate() {
            let tk = (i as u64 + 1) * tu;
            events.push((tk - d, true, i));
            if i > 0 {
                events.push((tk - 1, false, i - 1));
            }
        }
        events.sort();
        // Reference 1, kernel units: alpha 44 and beta 879 per 64 ns of delay, p in 2^-32.
        let (mut p_ref, mut last) = (0i128, 0i128);
        // Reference 2, real numbers with the nominal gains 41/256 Hz and 819/256 Hz.
        let (mut p_real, mut last_real) = (0f64, 0f64);
        let mut ev = events.into_iter().peekable();
        let mut saw_zero = false;
        for (i, &d) in delays.iter().enumerate() {
            let tk = (i as u64 + 1) * tu;
            while let Some(&(t, enq, k)) = ev.peek() {
                if t >= tk {
                    break;
                }
                ev.next();
                if enq {
                    assert_eq!(q.enqueue(pkt(Ecn::NotEct, 100, k as u32), Time(t)), Enqueued::Queued);
                } else {
                    assert_eq!(q.dequeue(Time(t)).unwrap().tcp.seq, k as u32);
                }
            }
            q.advance(Time(tk));
            let d = d as i128;
            let delta = (d - 15_000_000) * 44 + (d - last) * 879;
            p_ref = (p_ref + delta / 64).clamp(0, u32::MAX as i128);
            last = d;
            assert_eq!(q.prob_raw() as i128, p_ref, "update {i}");
            let ds = d as f64 / 1e9;
            p_real = (p_real + 41.0 / 256.0 * (ds - 0.015) + 819.0 / 256.0 * (ds - last_real)).clamp(0.0, 1.0);
            last_real = ds;
            let p = q.prob_raw() as f64 / u32::MAX as f64;
            assert!((p - p_real).abs() <= 2e-3 * p_real + 1e-8, "update {i}: {p} vs {p_real}");
            saw_zero |= p_ref == 0 && i > 0;
        }
        assert!(saw_zero && q.prob_raw() > 0);
        assert_eq!(q.stats().drops + q.stats().ce_marks, 0);
    }

    /// The controller uses the larger of the two head sojourns, whichever queue holds it.
    #[test]
    fn pi_uses_the_larger_head_delay() {
        let d = ms(14).0 as i128;
        let expect = ((d - 15_000_000) * 44 + d * 879) / 64;
        for (first, second) in [(Ecn::Ect1, Ecn::NotEct), (Ecn::NotEct, Ecn::Ect1)] {
            let mut q = dflt();
            q.dequeue(Time::ZERO); // update at 16 ms
            q.enqueue(pkt(first, 100, 0), ms(2)); // head sojourn 14 ms at the update
            q.enqueue(pkt(second, 100, 1), ms(10)); // 6 ms
            q.advance(ms(16));
            assert_eq!(q.prob_raw() as i128, expect);
        }
    }

    #[test]
    fn overflow_mode_caps_p_at_one_over_k() {
        let mut q = build(|c| {
            c.drop_overload = false;
            c.coupling_factor = 4;
        });
        q.enqueue(pkt(Ecn::NotEct, 100, 0), Time::ZERO);
        q.advance(Time::from_secs(5)); // head sojourn grows to 5 s: p' saturates
        assert_eq!(q.prob_raw(), u32::MAX / 4);
        let mut q = dflt();
        q.enqueue(pkt(Ecn::NotEct, 100, 0), Time::ZERO);
        q.advance(Time::from_secs(5));
        assert_eq!(q.prob_raw(), u32::MAX);
    }

    /// Dequeues until `n` packets of class `ecn` have been decided at probability `p`, all at
    /// one instant (no update, no step mark); returns (dropped, marked) fractions. The queue
    /// holds 3 packets more, so every counted packet is above the 2-MTU floor.
    fn signal_fractions(f: impl FnOnce(&mut DualPi2Config), ecn: Ecn, p: f64, n: u32) -> (f64, f64) {
        let mut q = build(|c| {
            c.limit = 100_000;
            f(c)
        });
        let t = ms(1);
        for i in 0..n + 3 {
            assert_eq!(q.enqueue(pkt(ecn, 1514, i), t), Enqueued::Queued);
        }
        q.set_prob((p * u32::MAX as f64) as u32);
        let (mut sent, mut marked) = (0u32, 0u32);
        while q.stats().dequeued + q.stats().drops < n as u64 {
            let out = q.dequeue(t).unwrap();
            sent += 1;
            marked += (out.ecn == Ecn::Ce) as u32;
        }
        let drops = q.stats().drops as f64;
        let total = drops + sent as f64;
        (drops / total, marked as f64 / total)
    }

    fn assert_binomial(x: f64, p: f64, n: u32, what: &str) {
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        assert!((x - p).abs() < 5.0 * sd + 1e-9, "{what}: {x} vs {p} (sd {sd})");
    }

    #[test]
    fn classic_signal_is_p_squared_and_l_signal_is_k_p() {
        let n = 40_000;
        for p in [0.1, 0.3, 0.45] {
            let (drop, mark) = signal_fractions(|_| {}, Ecn::NotEct, p, n);
            assert_binomial(drop, p * p, n, "classic Not-ECT drop");
            assert_eq!(mark, 0.0);
            let (drop, mark) = signal_fractions(|_| {}, Ecn::Ect0, p, n);
            assert_eq!(drop, 0.0);
            assert_binomial(mark, p * p, n, "classic ECT(0) mark");
            let (drop, mark) = signal_fractions(|_| {}, Ecn::Ect1, p, n);
            assert_eq!(drop, 0.0);
            assert_binomial(mark, 2.0 * p, n, "L mark k·p'");
        }
        let (_, mark) = signal_fractions(|c| c.coupling_factor = 3, Ecn::Ect1, 0.2, n);
        assert_binomial(mark, 0.6, n, "L mark, k = 3");
    }

    #[test]
    fn overload_drops_p_squared_in_both_queues() {
        let n = 40_000;
        let p = 0.7; // k·p' = 1.4 > 1
        // L: dropped with p'², every other packet marked.
        let (drop, mark) = signal_fractions(|_| {}, Ecn::Ect1, p, n);
        assert_binomial(drop, p * p, n, "L overload drop");
        assert!((drop + mark - 1.0).abs() < 1e-12);
        // C, ECT(0): no marks on overload, drops with p'².
        let (drop, mark) = signal_fractions(|_| {}, Ecn::Ect0, p, n);
        assert_binomial(drop, p * p, n, "C ECT overload drop");
        assert_eq!(mark, 0.0);
        // L in `overflow` mode: marked, never dropped (the controller keeps p' <= 1/k anyway).
        let (drop, mark) = signal_fractions(|c| c.drop_overload = false, Ecn::Ect1, p, n);
        assert_eq!((drop, mark), (0.0, 1.0));
    }

    #[test]
    fn no_signal_below_two_mtu_of_backlog() {
        for (n, expect_drop) in [(2u32, false), (3, true)] {
            let mut q = dflt();
            for i in 0..n {
                q.enqueue(pkt(Ecn::NotEct, 1514, i), Time::ZERO);
            }
            q.set_prob(u32::MAX);
            let first = q.dequeue(Time::ZERO);
            // With 3 packets the backlog left after taking the head is exactly 2 MTU: signalled.
            assert_eq!(q.stats().drops > 0, expect_drop, "{n} packets");
            if !expect_drop {
                assert_eq!(first.unwrap().tcp.seq, 0);
            }
        }
        // L: never marked while the backlog is below 2 MTU, even at p' = 1/k.
        let mut q = build(|c| c.step_thresh = StepThresh::Time(1_000_000_000));
        q.set_prob(u32::MAX / 2);
        for i in 0..1000 {
            q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO);
            q.enqueue(pkt(Ecn::Ect1, 1513, i), Time::ZERO);
            assert_eq!(q.dequeue(Time::ZERO).unwrap().ecn, Ecn::Ect1);
            assert_eq!(q.dequeue(Time::ZERO).unwrap().ecn, Ecn::Ect1);
        }
        assert_eq!(q.ecn_mark, 0);
    }

    #[test]
    fn classification_by_ecn() {
        let mut q = dflt();
        for (i, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce].into_iter().enumerate() {
            q.enqueue(pkt(e, 100, i as u32), Time::ZERO);
        }
        assert_eq!((q.c_queue.len(), q.l_queue.len()), (2, 2));
        assert!(q.c_queue.iter().all(|p| p.queue == 0 && matches!(p.ecn, Ecn::NotEct | Ecn::Ect0)));
        assert!(q.l_queue.iter().all(|(p, _)| p.queue == 1 && matches!(p.ecn, Ecn::Ect1 | Ecn::Ce)));
        let mut q = build(|c| c.ecn_mask = ECN_MASK_ANY_ECT);
        for (i, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce].into_iter().enumerate() {
            q.enqueue(pkt(e, 100, i as u32), Time::ZERO);
        }
        assert_eq!((q.c_queue.len(), q.l_queue.len()), (1, 3));
    }

    #[test]
    fn step_marking_above_threshold() {
        // Time threshold (strictly greater than), with p' = 0.
        let mut q = build(|c| c.step_thresh = StepThresh::Time(5_000_000));
        for i in 0..10 {
            q.enqueue(pkt(Ecn::Ect1, 1514, i), ms(i as u64));
        }
        // At t = 10 ms packet i has sojourn 10 − i ms: i < 5 (> 5 ms) marked; i = 5 (5 ms) not.
        let got: Vec<bool> = (0..10).map(|_| q.dequeue(ms(10)).unwrap().ecn == Ecn::Ce).collect();
        assert_eq!(got, (0..10).map(|i| i < 5).collect::<Vec<_>>());
        assert_eq!((q.step_marks, q.stats().ce_marks), (5, 5));
        // Packet threshold: marked while the L queue left behind holds more than 3 packets.
        let mut q = build(|c| c.step_thresh = StepThresh::Packets(3));
        for i in 0..8 {
            q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO);
        }
        let got: Vec<bool> = (0..8).map(|_| q.dequeue(Time::ZERO).unwrap().ecn == Ecn::Ce).collect();
        assert_eq!(got, vec![true, true, true, true, false, false, false, false]);
        // min_qlen_step 2: only packets that found at least 2 packets in L are eligible.
        let mut q = build(|c| c.min_qlen_step = Some(2));
        for i in 0..4 {
            q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO);
        }
        let got: Vec<bool> = (0..4).map(|_| q.dequeue(ms(5)).unwrap().ecn == Ecn::Ce).collect();
        assert_eq!(got, vec![false, false, true, true]);
        // Classic packets are never step-marked.
        let mut q = dflt();
        q.enqueue(pkt(Ecn::Ect0, 1514, 0), Time::ZERO);
        assert_eq!(q.dequeue(ms(500)).unwrap().ecn, Ecn::Ect0);
    }

    /// Serialisation time of one 1514-byte packet at `mbit` Mbit/s, ns.
    fn wire_ns(mbit: u64) -> u64 {
        1514 * 8 * 1000 / mbit
    }

    const L4STEAM: [Stack; 3] = [Stack::L4steam2020, Stack::L4steam2020Apr, Stack::L4steam2024];

    /// The HTB-like link: a C packet is taken for the wire at t = 0; `n` ECT(1) packets arrive
    /// at 0.1 ms, each dequeued when the previous one has been serialised. Returns which of
    /// them left CE and the step_marks counter.
    fn l_burst_behind_c(q: &mut dyn Qdisc, mbit: u64, n: u32) -> (Vec<bool>, f64) {
        let wire = wire_ns(mbit);
        q.enqueue(pkt(Ecn::NotEct, 1514, 0), Time::ZERO);
        assert_eq!(q.dequeue(Time::ZERO).unwrap().queue, 0);
        for i in 0..n {
            assert_eq!(q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::from_micros(100)), Enqueued::Queued);
        }
        let marks = (1..=n as u64).map(|k| q.dequeue(Time(k * wire)).unwrap().ecn == Ecn::Ce).collect();
        let mut v = Vec::new();
        q.xstats(&mut v);
        (marks, v.iter().find(|(k, _)| *k == "step_marks").unwrap().1)
    }

    /// Issue 11's question at 10 Mbit/s: a lone L packet that waited 1.1112 ms (> the 1 ms
    /// step) behind a C packet on the wire (1.2112 ms) is step-marked by upstream
    /// (`min_qlen_step` 0) but not by the L4STeam code, which set `apply_step` only when the L
    /// queue already held more than one packet at enqueue.
    #[test]
    fn lone_l_packet_behind_the_wire_step_marked_only_upstream() {
        assert_eq!(wire_ns(10), 1_211_200);
        assert!(wire_ns(10) - 100_000 > 1_000_000, "the lone packet's sojourn exceeds the step");
        for stack in [Stack::Linux, Stack::Sce2020] {
            assert_eq!(l_burst_behind_c(&mut build_on(stack, |_| {}), 10, 1), (vec![true], 1.0), "{stack}");
        }
        for stack in L4STEAM {
            assert_eq!(l_burst_behind_c(&mut build_on(stack, |_| {}), 10, 1), (vec![false], 0.0), "{stack}");
        }
    }

    /// Three back-to-back L packets behind the same C packet at 10 Mbit/s, sojourns 1.1112,
    /// 2.3224 and 3.5336 ms: upstream marks all three; the L4STeam code only the third, the
    /// first that found 2 packets in L. At 50 Mbit/s (0.24224 ms per packet) the sojourns are
    /// 0.14224 + k·0.24224 ms: the first four stay below 1 ms, so both eras mark only the 5th
    /// and 6th (both found at least 2 packets).
    #[test]
    fn l_burst_step_marks_from_the_third_packet_in_l4steam_eras() {
        for stack in L4STEAM {
            assert_eq!(l_burst_behind_c(&mut build_on(stack, |_| {}), 10, 3), (vec![false, false, true], 1.0), "{stack}");
            let (m, steps) = l_burst_behind_c(&mut build_on(stack, |_| {}), 50, 6);
            assert_eq!((m, steps), (vec![false, false, false, false, true, true], 2.0), "{stack}");
        }
        assert_eq!(l_burst_behind_c(&mut dflt(), 10, 3), (vec![true, true, true], 3.0));
        assert_eq!(l_burst_behind_c(&mut dflt(), 50, 6), (vec![false, false, false, false, true, true], 2.0));
    }

    /// The exemption covers the step only: a lone L packet behind a standing C queue still
    /// gets the coupled mark k·p' (here k·p' = 1 − 2^-31) in the L4STeam eras.
    #[test]
    fn lone_l_packet_still_gets_the_coupled_mark() {
        let mut q = build_on(Stack::L4steam2020, |_| {});
        for i in 0..3 {
            q.enqueue(pkt(Ecn::NotEct, 1514, i), Time::ZERO);
        }
        q.enqueue(pkt(Ecn::Ect1, 1514, 9), Time::from_micros(100));
        q.set_prob(u32::MAX / 2);
        // WRR: the initial credit is negative, so L goes first; 3 C packets stay (>= 2 MTU).
        let out = q.dequeue(ms(5)).unwrap();
        assert_eq!((out.queue, out.ecn), (1, Ecn::Ce));
        assert_eq!((q.step_marks, q.ecn_mark), (0, 1));
    }

    /// Builds a tc string on a profile, as the simulator does.
    fn spec_on(stack: Stack, tc: &str) -> Box<dyn Qdisc> {
        let mut ctx = BuildCtx { link_rate: crate::time::Rate(10_000_000), mtu: MTU, rng: Stream::new(1, "dualpi2-test"), stack };
        QdiscSpec::parse(tc).unwrap().build(&mut ctx)
    }

    /// A parameter given in the scenario beats the profile's default, in both directions.
    #[test]
    fn explicit_min_qlen_step_overrides_the_profile() {
        for stack in L4STEAM {
            assert_eq!(l_burst_behind_c(spec_on(stack, "dualpi2").as_mut(), 10, 1).0, vec![false], "{stack}");
            assert_eq!(l_burst_behind_c(spec_on(stack, "dualpi2 min_qlen_step 0").as_mut(), 10, 1).0, vec![true], "{stack}");
        }
        assert_eq!(l_burst_behind_c(spec_on(Stack::Linux, "dualpi2").as_mut(), 10, 1).0, vec![true]);
        let mut q = spec_on(Stack::Linux, "dualpi2 min_qlen_step 2");
        assert_eq!(l_burst_behind_c(q.as_mut(), 10, 3).0, vec![false, false, true]);
        // The resolved values.
        let c = cfg(|_| {});
        assert_eq!(DualPi2::new(&c, Stack::L4steam2024, MTU, Stream::new(1, "t")).min_qlen_step, 2);
        assert_eq!(DualPi2::new(&c, Stack::Linux, MTU, Stream::new(1, "t")).min_qlen_step, 0);
        let c = cfg(|c| c.min_qlen_step = Some(7));
        assert_eq!(DualPi2::new(&c, Stack::L4steam2020, MTU, Stream::new(1, "t")).min_qlen_step, 7);
    }

    /// Upstream refuses a packet once the bytes queued would exceed limit·2·MTU
    /// (`get_memory_limit`); the L4STeam code had the packet limit only. With a small
    /// psched MTU (100 B, limit 10: a 2000-byte memlimit) full-size packets hit it at once.
    #[test]
    fn memory_limit_only_upstream_unless_given() {
        let fill = |stack: Stack, memlimit: Option<u32>| {
            let c = cfg(|c| {
                c.limit = 10;
                c.memlimit = memlimit;
            });
            let mut q = DualPi2::new(&c, stack, 100, Stream::new(1, "t"));
            let ok = (0..12).filter(|&i| q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO) == Enqueued::Queued).count();
            (ok, q.stats().overlimits, q.memory_limit)
        };
        assert_eq!(fill(Stack::Linux, None), (1, 11, 2000));
        assert_eq!(fill(Stack::Sce2020, None), (1, 11, 2000));
        for stack in L4STEAM {
            assert_eq!(fill(stack, None), (10, 2, u64::MAX), "{stack}");
            // An explicit memlimit applies on every profile: 5 packets fit in 8000 bytes.
            assert_eq!(fill(stack, Some(8000)), (5, 7, 8000), "{stack}");
        }
    }

    /// `step_thresh 1pkt`: upstream marks while more than 1 packet stays in L; the L4STeam
    /// kernels stored 1·1000 and compared the L queue length with 1000. With 1005 L packets
    /// queued at once, the L4STeam eras mark only packets 2 and 3 (eligible: found >= 2;
    /// left 1002 and 1001 > 1000 behind); upstream marks every packet that leaves > 1 behind.
    #[test]
    fn packet_step_threshold_is_stored_times_1000_in_l4steam_eras() {
        let marked = |stack: Stack| {
            let mut q = spec_on(stack, "dualpi2 step_thresh 1pkt");
            for i in 0..1005 {
                q.enqueue(pkt(Ecn::Ect1, 100, i), Time::ZERO);
            }
            (0..1005).filter_map(|_| q.dequeue(Time::ZERO)).filter(|p| p.ecn == Ecn::Ce).map(|p| p.tcp.seq).collect::<Vec<_>>()
        };
        assert_eq!(marked(Stack::Linux), (0..=1002).collect::<Vec<u32>>());
        for stack in L4STEAM {
            assert_eq!(marked(stack), vec![2, 3], "{stack}");
        }
        assert_eq!(build_on(Stack::L4steam2020, |c| c.step_thresh = StepThresh::Packets(5)).step_thresh, StepThresh::Packets(5000));
        assert_eq!(build_on(Stack::L4steam2020, |c| c.step_thresh = StepThresh::Time(2_000_000)).step_thresh, StepThresh::Time(2_000_000));
        assert_eq!(build_on(Stack::Linux, |c| c.step_thresh = StepThresh::Packets(5)).step_thresh, StepThresh::Packets(5));
    }

    #[test]
    fn l_marking_is_step_or_coupled() {
        let n = 20_000;
        let p = (0.1 * u32::MAX as f64) as u32;
        // Below the step threshold (1 ms) the L mark rate is k·p' ...
        let mut q = build(|c| c.limit = 100_000);
        for i in 0..n + 3 {
            q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO);
        }
        q.set_prob(p);
        let marked = (0..n).filter(|_| q.dequeue(Time::from_micros(500)).unwrap().ecn == Ecn::Ce).count();
        assert_binomial(marked as f64 / n as f64, 0.2, n, "below step");
        // ... above it every packet is marked.
        let mut q = build(|c| c.limit = 100_000);
        for i in 0..1000 {
            q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO);
        }
        q.set_prob(p);
        assert!((0..1000).all(|_| q.dequeue(ms(2)).unwrap().ecn == Ecn::Ce));
    }

    #[test]
    fn wrr_gives_classic_its_weight() {
        // Equal sizes: from the initial credit 1514·(10 − 90), 9 L packets then 1 C, repeated.
        let mut q = build(|c| c.limit = 100_000);
        for i in 0..5000 {
            q.enqueue(pkt(Ecn::NotEct, 1514, i), Time::ZERO);
            q.enqueue(pkt(Ecn::Ect1, 1514, i), Time::ZERO);
        }
        q.step_thresh = StepThresh::Time(u32::MAX);
        let order: Vec<u8> = (0..1000).map(|_| q.dequeue(Time::ZERO).unwrap().queue).collect();
        for (i, &c) in order.iter().enumerate() {
            assert_eq!(c, if i % 10 == 9 { 0 } else { 1 }, "position {i}");
        }
        // Unequal sizes: the byte share of C is wc = 25 % (within a packet or two).
        let mut q = build(|c| {
            c.limit = 100_000;
            c.c_protection = 25;
        });
        for i in 0..20_000 {
            q.enqueue(pkt(Ecn::NotEct, 1514, i), Time::ZERO);
            q.enqueue(pkt(Ecn::Ect1, 300, i), Time::ZERO);
        }
        let (mut c, mut l) = (0u64, 0u64);
        for _ in 0..10_000 {
            let p = q.dequeue(Time::ZERO).unwrap();
            *(if p.queue == 0 { &mut c } else { &mut l }) += p.wire_len as u64;
        }
        let share = c as f64 / (c + l) as f64;
        assert!((share - 0.25).abs() < 2.0 * 1514.0 / (c + l) as f64, "{share}");
        // One queue backlogged: it gets everything; both empty resets the credit.
        let mut q = dflt();
        for i in 0..10 {
            q.enqueue(pkt(Ecn::NotEct, 1514, i), Time::ZERO);
        }
        assert_eq!((0..10).filter_map(|_| q.dequeue(Time::ZERO)).count(), 10);
        assert!(q.dequeue(Time::ZERO).is_none());
        assert_eq!(q.credit, 1514 * (10 - 90));
    }

    #[test]
    fn shared_limit_and_drop_enqueue() {
        let mut q = build(|c| c.limit = 5);
        for i in 0..4 {
            q.enqueue(pkt(Ecn::NotEct, 100, i), Time::ZERO);
        }
        assert_eq!(q.enqueue(pkt(Ecn::Ect1, 100, 4), Time::ZERO), Enqueued::Queued);
        assert_eq!(q.enqueue(pkt(Ecn::Ect1, 100, 5), Time::ZERO), Enqueued::Dropped);
        assert_eq!(q.enqueue(pkt(Ecn::NotEct, 100, 6), Time::ZERO), Enqueued::Dropped);
        assert_eq!((q.stats().drops, q.stats().overlimits), (2, 2));
        // drop_enqueue: the PI2 decision is taken on arrival, on the backlog before it.
        let mut q = build(|c| c.drop_early = true);
        for i in 0..2 {
            q.enqueue(pkt(Ecn::NotEct, 1514, i), Time::ZERO);
        }
        q.set_prob(u32::MAX);
        assert_eq!(q.enqueue(pkt(Ecn::NotEct, 1514, 2), Time::ZERO), Enqueued::Dropped);
        assert_eq!(q.stats().overlimits, 0);
        // ... and not again at dequeue.
        q.enqueue(pkt(Ecn::NotEct, 1514, 3), Time::ZERO);
        assert_eq!(q.dequeue(Time::ZERO).unwrap().tcp.seq, 0);
    }

    #[test]
    fn xstats_names_and_values() {
        let mut q = dflt();
        q.enqueue(pkt(Ecn::NotEct, 100, 0), Time::ZERO);
        q.enqueue(pkt(Ecn::Ect1, 100, 0), ms(2));
        q.set_prob(u32::MAX / 4);
        q.enqueue(pkt(Ecn::Ect1, 100, 1), ms(5));
        let mut v = Vec::new();
        q.xstats(&mut v);
        let get = |n: &str| v.iter().find(|(k, _)| *k == n).unwrap().1;
        assert!((get("prob") - 0.25).abs() < 1e-9);
        assert!((get("p_c") - 0.0625).abs() < 1e-9);
        assert!((get("p_l") - 0.5).abs() < 1e-9);
        assert_eq!((get("delay_c"), get("delay_l")), (5.0, 3.0));
        assert_eq!((get("packets_in_c"), get("packets_in_l")), (1.0, 2.0));
    }
}
