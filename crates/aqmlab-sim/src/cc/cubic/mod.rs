//! CUBIC congestion control, modelled on Linux `net/ipv4/tcp_cubic.c` ("CUBIC TCP v2.3",
//! read at torvalds/linux commit 617e407cef5b7841de9deafd682b4f4676712067, a 6.x kernel with
//! the `tcp_snd_cwnd()` accessors and the BTF kfunc set) and RFC 9438.
//!
//! What is modelled (Linux function in brackets):
//! - the cubic window curve W(t) = C·(t − K)³ + W_max with C = `bic_scale`·10/1024 ≈ 0.4 and
//!   β = 717/1024, in Linux's fixed point: time in 1/1024 s, K from a cube root of
//!   `cube_factor`·(W_max − cwnd), the target taken one `delay_min` ahead, and
//!   cnt = cwnd / (target − cwnd) ACKs per +1 packet (`bictcp_update`; RFC 9438 §4.2, §4.4, §4.5);
//! - cnt ≤ 20 in the first epoch ever (W_max = 0), the Reno-friendly estimate `tcp_cwnd`
//!   (+1 per cwnd·`beta_scale`/8 ACKed packets ≈ 0.53 packets per RTT) and the final
//!   cnt ≥ 2, i.e. at most 1.5× growth per RTT (`bictcp_update`; RFC 9438 §4.3, §4.2);
//! - recomputation throttling exactly as Linux: with cwnd unchanged nothing (not even the
//!   Reno estimate) is recomputed within HZ/32 = 31 jiffies of the last recomputation, and the
//!   cubic part is recomputed at most once per jiffy (HZ = 1000), where only the Reno-friendly
//!   clamp is refreshed (`bictcp_update`);
//! - multiplicative decrease ssthresh = max(cwnd·β, 2) with fast convergence and the epoch
//!   reset (`cubictcp_recalc_ssthresh`; RFC 9438 §4.6, §4.7), full reset on entering Loss
//!   (`cubictcp_state`; RFC 9438 §4.8), undo to the cwnd before the reduction
//!   (`tcp_reno_undo_cwnd`, which Linux CUBIC uses), idle restart (`cubictcp_cwnd_event`,
//!   CA_EVENT_TX_START; RFC 9438 §5.8);
//! - `delay_min` tracking, ignoring samples in the first second of an epoch, and HyStart with
//!   Linux's ACK-train and delay detectors (`cubictcp_acked`, `hystart_update`,
//!   `hystart_ack_delay`, `bictcp_hystart_reset`). Not HyStart++ (RFC 9406).
//!
//! Differences from Linux kept on purpose (see also `docs/algorithms/cubic.md`):
//! - The cube root is an exact integer floor cube root instead of Linux's table lookup plus
//!   one Newton step (`cubic_root`, ~0.2 % average error): deterministic and no less faithful
//!   to the intended curve.
//! - Products are computed in 128 bits and saturate instead of wrapping in 32/64 bits (Linux
//!   only guarantees no overflow below ~1 million packets / 100 s RTT).

use super::{acked_for_avoidance, cong_avoid_ai, AckSample, CaEvent, CaState, CcConfig, CongestionControl, TcpCcState};
use super::CcKind;
use crate::params::{Args, Param, Params, Type, Value};
use crate::profile::Stack;
use std::sync::Arc;
use crate::time::Time;

/// Linux `BICTCP_BETA_SCALE`: β and the fast-convergence factor are in 1/1024.
const BETA_SCALE: u64 = 1024;
/// Linux `BICTCP_HZ`: the cubic's time unit is 2^-10 s.
const BICTCP_HZ: u32 = 10;
/// Linux jiffies per second (`CONFIG_HZ=1000`, the common distribution setting).
const HZ: u64 = 1000;
/// Linux `HYSTART_ACK_TRAIN` / `HYSTART_DELAY` bits of `hystart_detect`.
pub const HYSTART_ACK_TRAIN: u8 = 0x1;
pub const HYSTART_DELAY: u8 = 0x2;
/// Linux `HYSTART_MIN_SAMPLES`: RTT samples per round before the delay rule may fire.
const HYSTART_MIN_SAMPLES: u8 = 8;
/// Linux `HYSTART_DELAY_MIN` / `HYSTART_DELAY_MAX` (µs): bounds of the delay threshold.
const HYSTART_DELAY_MIN_US: u64 = 4_000;
const HYSTART_DELAY_MAX_US: u64 = 16_000;

/// Which generation of `tcp_cubic.c`'s HyStart runs. The later generations are the earlier
/// one plus the named upstream changes; everything outside HyStart (the curve, β, fast
/// convergence, the Reno-friendly region, throttling, undo, idle restart) is the same in all
/// of them apart from the `delay_min` unit that `bictcp_update` reads (see [`CubicVersion::V5_4`]).
///
/// Sources: v5.4-era `tcp_cubic.c` as carried in chromi/sce's `tcp_cubic_sce.c` (commits
/// 0139ea04, stored id 10669998327, and 1280a6d0, id 9884018069: `bictcp_clock`,
/// `hystart_update`, `bictcp_acked`, `bictcp_cong_avoid`) and a pre-5.6 annotated copy of
/// `tcp_cubic.c` (stored id 18625528402, same functions); Eric Dumazet's "tcp_cubic: various
/// fixes" series (net-next, 23 Dec 2019, in Linux 5.6; stored ids 11617556045, 10978921937);
/// Neal Cardwell's "tcp_cubic: fix spurious HYSTART_DELAY exit upon drop in min RTT" (24 Jun
/// 2020, 5.8-rc3; stored id 15090591538); Eric Dumazet 4e1fddc98d25 "tcp_cubic: fix spurious
/// Hystart ACK train detections for not-cwnd-limited flows" (Nov 2021, 5.16; id 65861707318);
/// today's `tcp_cubic.c` at torvalds 617e407c (the [`CubicVersion::Current`] model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CubicVersion {
    /// Linux ≤ 5.5 (the base of every 2020 testbed kernel: L4STeam's trees were on 5.4-rc3,
    /// chromi/sce's master on v5.4; cubic-sce's own copy has this HyStart in every version).
    /// HyStart on a millisecond clock (`bictcp_clock` = jiffies in ms); `delay_min` and the
    /// RTT samples in 1/8 ms, truncated (`(rtt_us << 3) / 1000`); ACK train: ACKs at most
    /// `hystart_ack_delta` = 2 ms apart, exit once the train since the round's start exceeds
    /// `delay_min >> 4` (half the minimum RTT in ms), with no `hystart_ack_delay` cushion and no
    /// pacing distinction; delay rule: `curr_rtt` is the minimum of the round's first 8 samples
    /// only, compared from the 9th sample on against `delay_min + clamp(delay_min >> 3, 4 ms,
    /// 16 ms)`; the round restarts in `bictcp_cong_avoid` (only when cwnd-limited, after the
    /// ACK's own HyStart check); `bictcp_update` looks ahead by `msecs_to_jiffies(delay_min >> 3)`,
    /// i.e. the minimum RTT truncated to whole ms.
    V5_4,
    /// Linux 5.6 .. 5.8-rc2: Eric Dumazet's series (µs clock and `delay_min`, `hystart_ack_delta_us`
    /// 2000, ACK-train threshold `delay_min + hystart_ack_delay`, halved when unpaced), but
    /// `curr_rtt` still the minimum of the first 8 samples and the round reset still in
    /// `cong_avoid`.
    V5_6,
    /// Linux 5.8-rc3 .. 5.15: `curr_rtt` is the running minimum of the round (Cardwell's fix);
    /// the round reset still in `cong_avoid`.
    V5_8,
    /// Linux 5.16 and later as the engine has modelled it (torvalds 617e407c as read): round
    /// reset in `hystart_update` (4e1fddc98d25), but `hystart_update` only called from
    /// `hystart_low_window` on, so no round restarts below cwnd 16 and the rounds that follow
    /// start mid-flight. The `l4steam-2024` profile's CUBIC (and the `linux` one's until
    /// 2026-11).
    Current,
    /// Mahdi Arghavani's 25c1a9ca53db "tcp_cubic: fix incorrect HyStart round start detection"
    /// (upstream Dec 2024, release UNVERIFIED, named 6.13 here; backported to 6.1 stable Feb
    /// 2025, stored id 7862183863): `hystart_update` runs at every cwnd, restarts the round
    /// first and only then returns below `hystart_low_window`. Today's Linux: the `linux`
    /// profile's CUBIC.
    V6_13,
}

impl CubicVersion {
    /// The `tcp_cubic.c` HyStart generation of each profile's kernel.
    ///
    /// - `linux`: today's, with 25c1a9ca53db ([`CubicVersion::V6_13`]).
    /// - `l4steam-2020`, `l4steam-2020-04`, `sce-2020`: v5.4. Evidence: L4STeam/linux issue #3
    ///   (Nov 2020): a kernel built from the L4STeam testing tree reports `uname -r`
    ///   `5.4.0-rc3+`, three months after b256daed (4 Aug 2020) and seven after e741f5ac;
    ///   L4STeam's stored history lists no change to `net/ipv4/tcp_cubic.c`. chromi/sce PR #2
    ///   "Linux v5.4" (heistp, 17 Dec 2019) merged net-next's v5.4 tag into master and the
    ///   next upstream merge is PR #4 "Linux v5.10-rc4" (27 Nov 2020), so 0eddf2ad (9 Mar
    ///   2020) is on v5.4. The µs series reached net-next on 26 Dec 2019 (Linux 5.6): in none.
    /// - `l4steam-2024`: [`CubicVersion::Current`] (a v5.15.72-based tree; whether 4e1fddc98d25
    ///   was in that stable release is UNVERIFIED, and it only matters for flows that are not
    ///   cwnd-limited).
    ///
    /// These are the per-stack defaults of `version` in [`CUBIC`]'s table.
    pub fn for_stack(stack: Stack) -> CubicVersion {
        CubicVersion::from_word(CUBIC.defaults(stack).word("version"))
    }

    /// The version a table word names (one of [`CubicVersion::name`]'s).
    pub(crate) fn from_word(w: &str) -> CubicVersion {
        CubicVersion::parse(w).unwrap_or_else(|| panic!("cubic version '{w}'"))
    }

    /// The name used in scenarios (`cubic version 5.4`).
    pub fn name(self) -> &'static str {
        match self {
            CubicVersion::V5_4 => "5.4",
            CubicVersion::V5_6 => "5.6",
            CubicVersion::V5_8 => "5.8",
            CubicVersion::Current => "5.16",
            CubicVersion::V6_13 => "6.13",
        }
    }

    fn parse(s: &str) -> Option<CubicVersion> {
        [CubicVersion::V5_4, CubicVersion::V5_6, CubicVersion::V5_8, CubicVersion::Current, CubicVersion::V6_13].into_iter().find(|v| v.name() == s)
    }

    /// HyStart's clock and `delay_min` in ms (1/8 ms) rather than µs.
    fn ms_clock(self) -> bool {
        self == CubicVersion::V5_4
    }
    /// `curr_rtt` is the running minimum of the round (Cardwell, 5.8-rc3).
    fn running_min(self) -> bool {
        self >= CubicVersion::V5_8
    }
    /// The round restarts inside `hystart_update` (4e1fddc98d25, 5.16) instead of `cong_avoid`.
    fn reset_in_update(self) -> bool {
        self >= CubicVersion::Current
    }
    /// `hystart_update` runs below `hystart_low_window` too (round restarts; 25c1a9ca53db).
    fn update_below_low_window(self) -> bool {
        self == CubicVersion::V6_13
    }
}

/// The module parameters of `tcp_cubic.c`, with Linux's defaults. `repr(C)`: the flags an
/// ACK reads (`fast_convergence`, `tcp_friendliness`, `hystart`) in the first 24 bytes,
/// which share a cache line with CUBIC's epoch ([`Cubic`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct CubicParams {
    pub fast_convergence: bool,
    /// Multiplicative decrease factor in 1/1024 (`beta`, 717 ≈ 0.7).
    pub beta: u32,
    /// Initial ssthresh in packets, used only when HyStart is off; 0 = leave it (`initial_ssthresh`).
    pub initial_ssthresh: u32,
    /// C in 1/1024 divided by 10 (`bic_scale`, 41 → C = 410/1024 ≈ 0.4).
    pub bic_scale: u32,
    pub tcp_friendliness: bool,
    pub hystart: bool,
    /// Bit set of [`HYSTART_ACK_TRAIN`] and [`HYSTART_DELAY`] (`hystart_detect`).
    pub hystart_detect: u8,
    /// HyStart only runs from this cwnd on (`hystart_low_window`).
    pub hystart_low_window: u32,
    /// Largest ACK spacing that continues an ACK train, µs (`hystart_ack_delta_us`).
    pub hystart_ack_delta_us: u64,
    /// `sk_gso_max_size` in bytes, used by `hystart_ack_delay` (Linux default 65536).
    pub gso_max_size: u64,
    /// The HyStart generation; `None` = the profile's ([`CubicVersion::for_stack`]), resolved
    /// when the instance is built. A [`Cubic`] built directly with `None` runs today's.
    pub version: Option<CubicVersion>,
}

impl Default for CubicParams {
    /// Linux's module parameter defaults (the table's).
    fn default() -> Self {
        CubicParams::from_args(&CUBIC.defaults(Stack::Linux))
    }
}

impl CubicParams {
    fn from_args(a: &Args) -> Self {
        CubicParams {
            fast_convergence: a.uint("fast_convergence") == 1,
            beta: a.u32("beta"),
            initial_ssthresh: a.u32("initial_ssthresh"),
            bic_scale: a.u32("bic_scale"),
            tcp_friendliness: a.uint("tcp_friendliness") == 1,
            hystart: a.uint("hystart") == 1,
            hystart_detect: a.uint("hystart_detect") as u8,
            hystart_low_window: a.u32("hystart_low_window"),
            hystart_ack_delta_us: a.uint("hystart_ack_delta_us"),
            gso_max_size: 65_536,
            version: a.given("version").then(|| CubicVersion::from_word(a.word("version"))),
        }
    }
}

impl CcConfig for CubicParams {
    fn name(&self) -> &'static str {
        CUBIC.name
    }
    fn build(&self, _rng: crate::rng::Stream, stack: Stack) -> super::Cc {
        super::Cc::Cubic(Cubic::new(self.resolved(stack)))
    }
}

impl CubicParams {
    /// These parameters with the profile's [`CubicVersion`] filled in unless one was given.
    pub fn resolved(&self, stack: Stack) -> CubicParams {
        CubicParams { version: Some(self.version.unwrap_or(CubicVersion::for_stack(stack))), ..*self }
    }
}

/// `cubic [fast_convergence 0|1] [beta N] [bic_scale N] [tcp_friendliness 0|1] [hystart 0|1]
/// [hystart_detect N] [hystart_low_window N] [hystart_ack_delta_us N] [initial_ssthresh N]
/// [version 5.4|5.6|5.8|5.16|6.13]`: the module parameters of `tcp_cubic.c`, by their Linux names
/// and units, and the HyStart generation (default: the profile's). Under `version 5.4` the
/// ACK spacing is Linux's `hystart_ack_delta` in whole ms: `hystart_ack_delta_us / 1000`.
pub const CUBIC: CcKind = CcKind {
    name: "cubic",
    doc: "CUBIC with HyStart (tcp_cubic.c, RFC 9438)",
    params: &[
        Param::uint("fast_convergence", 0, 1, 1).doc("release bandwidth faster when cwnd is below the last maximum"),
        Param::uint("beta", 1, 1023, 717).unit("1/1024").doc("multiplicative decrease factor (717: 0.7)"),
        Param::uint("bic_scale", 1, 1024, 41).unit("1/1024 / 10").doc("C of the cubic (41: C = 0.4)"),
        Param::uint("tcp_friendliness", 0, 1, 1).doc("grow at least as fast as Reno would"),
        Param::uint("hystart", 0, 1, 1).doc("leave slow start early on HyStart's signals"),
        Param::uint("hystart_detect", 0, 3, (HYSTART_ACK_TRAIN | HYSTART_DELAY) as u64).doc("bit set: 1 ACK train, 2 delay increase"),
        Param::uint("hystart_low_window", 2, 1_000_000, 16).unit("packets").doc("HyStart only from this cwnd on"),
        Param::uint("hystart_ack_delta_us", 1, 100_000, 2_000).unit("us").doc("largest ACK spacing that continues an ACK train"),
        Param::uint("initial_ssthresh", 0, u32::MAX as u64, 0).unit("packets").doc("initial ssthresh when HyStart is off; 0: none"),
        version(Value::Word("6.13")).stack_defaults(&[
            (Stack::L4steam2024, Value::Word("5.16")),
            (Stack::L4steam2020, Value::Word("5.4")),
            (Stack::L4steam2020Apr, Value::Word("5.4")),
            (Stack::Sce2020, Value::Word("5.4")),
        ]),
    ],
    build: |a| Ok(Arc::new(CubicParams::from_args(a))),
};

/// `cubic ...` read from `p` (Linux's defaults).
pub fn parse(p: &mut Params) -> Result<Arc<dyn CcConfig>, String> {
    CUBIC.parse(p)
}

/// `version 5.4|5.6|5.8|5.16|6.13`: the HyStart generation of `tcp_cubic.c` (see
/// [`CubicVersion`]), defaulting to `default`.
pub(crate) const fn version(default: Value) -> Param {
    Param::new("version", Type::Custom { syntax: "5.4|5.6|5.8|5.16|6.13", parse: parse_version }, default)
        .doc("HyStart generation of tcp_cubic.c (kernel version that introduced it)")
}

fn parse_version(k: &str, v: &str) -> Result<Value, String> {
    CubicVersion::parse(v).map(|c| Value::Word(c.name())).ok_or_else(|| format!("{k} '{v}': expected 5.4, 5.6, 5.8, 5.16 or 6.13"))
}


/// Linux `struct bictcp` minus the HyStart round fields: what `bictcp_reset` clears.
#[derive(Clone, Copy, Debug, Default)]
struct Epoch {
    /// ACKs per +1 packet of cwnd (`cnt`).
    cnt: u32,
    /// W_max (`last_max_cwnd`).
    last_max_cwnd: u32,
    /// cwnd and jiffy of the last recomputation (`last_cwnd`, `last_time`).
    last_cwnd: u32,
    last_time: u64,
    /// The curve's plateau (`bic_origin_point`) and K in 2^-10 s (`bic_K`).
    origin_point: u32,
    k: u64,
    /// Minimum RTT sample, 0 = none yet (`delay_min`): in µs, or in 1/8 ms under
    /// [`CubicVersion::V5_4`].
    delay_min: u64,
    /// Jiffy the current epoch started; `None` is Linux's `epoch_start == 0`.
    epoch_start: Option<u64>,
    /// Packets ACKed towards the Reno estimate (`ack_cnt`); signed because CUBIC-SCE runs
    /// its SCE debt through it (`cc::sce`).
    ack_cnt: i64,
    /// Reno-friendly window estimate W_est (`tcp_cwnd`).
    tcp_cwnd: u32,
    /// HyStart has found the exit point (`found`).
    found: bool,
}

/// HyStart's per-round state (`round_start`, `end_seq`, `last_ack`, `curr_rtt`, `sample_cnt`).
/// Times and `curr_rtt` are in µs, or in ms and 1/8 ms under [`CubicVersion::V5_4`].
#[derive(Clone, Copy, Debug, Default)]
struct Round {
    start: u64,
    end_seq: u32,
    last_ack: u64,
    curr_rtt: u64,
    sample_cnt: u8,
}

/// Linux CUBIC (`cubictcp`).
///
/// Laid out in the order an ACK in congestion avoidance reads it, from an aligned cache
/// line (issue #15, session 7): the epoch, the version and the scales, then the parameters
/// (their flags first: `CubicParams` is `repr(C)`) fill the first two lines; HyStart's round
/// (slow start only) and `prior_cwnd` (reductions) come last. With Rust's own order the
/// state spread over four lines of its box, about three L1 misses per ACK at 1000 flows.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Cubic {
    ca: Epoch,
    /// The HyStart generation (`params.version`, today's when unset).
    version: CubicVersion,
    /// `beta_scale` = 8(1024+β)/3/(1024−β) in integers (15 for β = 717).
    beta_scale: u64,
    /// `cube_rtt_scale` = bic_scale·10 (C in 1/1024).
    cube_rtt_scale: u64,
    /// `cube_factor` = 2^40 / (bic_scale·10), so K = ∛(cube_factor·(W_max − cwnd)) in 2^-10 s.
    cube_factor: u64,
    params: CubicParams,
    round: Round,
    /// cwnd when the last reduction started (`tp->prior_cwnd`, for `tcp_reno_undo_cwnd`).
    prior_cwnd: u32,
}

impl Default for Cubic {
    fn default() -> Self {
        Cubic::new(CubicParams::default())
    }
}

/// Jiffies (HZ = 1000) at `t`, like `tcp_jiffies32` without the wrap-around.
pub(crate) fn jiffies(t: Time) -> u64 {
    t.as_nanos() / (1_000_000_000 / HZ)
}

/// Linux `usecs_to_jiffies`: rounds up.
fn usecs_to_jiffies(us: u64) -> u64 {
    let per = 1_000_000 / HZ;
    us.div_ceil(per)
}

/// Wrap-safe `after(a, b)` on sequence numbers.
fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// ⌊∛a⌋, exact (stands in for Linux `cubic_root`): the floating-point cube root as the first
/// guess, then corrected in integers to the exact floor. The guess is within one or two of it
/// (`a as f64` and `cbrt` each err by about an ulp, and the root is below 2^43), and the
/// correction loops make the result exact whatever the guess. The bisection over 43 bits it
/// replaces (kept in the tests as the reference) cost about 1,000 instructions per epoch
/// start (this about 230, most in libm's `cbrt`), and f1000 (1000 flows, 8 % losses) starts
/// 32,745 epochs.
fn cube_root(a: u128) -> u64 {
    let cube = |r: u64| (r as u128).checked_mul(r as u128).and_then(|x| x.checked_mul(r as u128));
    let mut r = (a as f64).cbrt() as u64;
    while !cube(r).is_some_and(|c| c <= a) {
        r -= 1;
    }
    while cube(r + 1).is_some_and(|c| c <= a) {
        r += 1;
    }
    r
}

impl Cubic {
    /// CUBIC with the given module parameters; the scale factors are derived as in
    /// `cubictcp_register`.
    pub fn new(params: CubicParams) -> Self {
        let beta = params.beta.min(1023) as u64;
        let bic_scale = params.bic_scale.max(1) as u64;
        Cubic {
            params,
            version: params.version.unwrap_or(CubicVersion::for_stack(Stack::Linux)),
            beta_scale: 8 * (BETA_SCALE + beta) / 3 / (BETA_SCALE - beta),
            cube_rtt_scale: bic_scale * 10,
            cube_factor: (1u64 << (10 + 3 * BICTCP_HZ)) / (bic_scale * 10),
            ca: Epoch::default(),
            round: Round::default(),
            prior_cwnd: 0,
        }
    }

    pub fn params(&self) -> &CubicParams {
        &self.params
    }
    /// W_max, the window remembered at the last reduction (`last_max_cwnd`).
    pub fn w_max(&self) -> u32 {
        self.ca.last_max_cwnd
    }
    /// Minimum RTT CUBIC has seen (`delay_min`), zero before the first accepted sample
    /// (to 1/8 ms under [`CubicVersion::V5_4`]).
    pub fn delay_min(&self) -> Time {
        if self.version.ms_clock() {
            Time::from_micros(self.ca.delay_min * 125)
        } else {
            Time::from_micros(self.ca.delay_min)
        }
    }
    /// The HyStart generation this instance runs.
    pub fn version(&self) -> CubicVersion {
        self.version
    }
    /// HyStart's clock: µs, or ms (`bictcp_clock`, jiffies at HZ = 1000) under V5_4.
    fn hystart_clock(&self, now: Time) -> u64 {
        if self.version.ms_clock() { jiffies(now) } else { now.as_micros() }
    }
    /// Whether HyStart has ended slow start since the last reset.
    pub fn hystart_found(&self) -> bool {
        self.ca.found
    }

    /// The current cubic curve for CUBIC-SCE (`cc::sce`), which reshapes it on SCE feedback:
    /// the epoch start in jiffies, K in 2^-10 s and the plateau W_max (`bic_origin_point`);
    /// `None` while no epoch runs (slow start, or right after a reduction).
    pub(crate) fn curve_mut(&mut self) -> Option<(&mut u64, &mut u64, &mut u32)> {
        let ca = &mut self.ca;
        ca.epoch_start.as_mut().map(|es| (es, &mut ca.k, &mut ca.origin_point))
    }
    /// The Reno-estimate ACK counter (`ack_cnt`), which CUBIC-SCE also debits.
    pub(crate) fn ack_cnt_mut(&mut self) -> &mut i64 {
        &mut self.ca.ack_cnt
    }
    /// C·offs³ in packets for `offs` in 2^-10 s, in the fixed point of `bictcp_update`.
    pub(crate) fn cubic_delta(&self, offs: u64) -> u32 {
        let o = offs as u128;
        ((self.cube_rtt_scale as u128 * o * o * o) >> (10 + 3 * BICTCP_HZ)).min(u32::MAX as u128) as u32
    }

    /// Linux `bictcp_reset`.
    fn reset(&mut self) {
        self.ca = Epoch::default();
    }

    /// Linux `bictcp_hystart_reset`: a new round starts now and ends once `snd_nxt` is ACKed.
    /// (Before 5.6 `curr_rtt` restarts at 0 and "0 or larger" takes the sample; a sample is
    /// at least 1, so the running minimum from `u64::MAX` is the same rule.)
    fn hystart_reset(&mut self, tp: &TcpCcState) {
        let now = self.hystart_clock(tp.now);
        self.round = Round { start: now, end_seq: tp.snd_nxt, last_ack: now, curr_rtt: u64::MAX, sample_cnt: 0 };
    }

    /// Linux `bictcp_update`: recompute `cnt`, the ACKs needed per +1 packet of cwnd.
    #[inline]
    fn update(&mut self, now_j: u64, cwnd: u32, acked: u32) {
        let ca = &mut self.ca;
        ca.ack_cnt += acked as i64;

        let since = now_j as i64 - ca.last_time as i64;
        if ca.last_cwnd == cwnd && since <= (HZ / 32) as i64 {
            return;
        }
        // The cubic part at most once per jiffy; a reduction (epoch_start cleared) forces it.
        if !(ca.epoch_start.is_some() && now_j == ca.last_time) {
            ca.last_cwnd = cwnd;
            ca.last_time = now_j;

            let epoch_start = *ca.epoch_start.get_or_insert_with(|| {
                ca.ack_cnt = acked as i64;
                ca.tcp_cwnd = cwnd;
                if ca.last_max_cwnd <= cwnd {
                    ca.k = 0;
                    ca.origin_point = cwnd;
                } else {
                    let dw = (ca.last_max_cwnd - cwnd) as u128;
                    ca.k = cube_root(self.cube_factor as u128 * dw);
                    ca.origin_point = ca.last_max_cwnd;
                }
                now_j
            });

            // Elapsed epoch time plus one delay_min (target one RTT ahead), in 2^-10 s. Before
            // 5.6: `msecs_to_jiffies(delay_min >> 3)`, the whole ms of the 1/8-ms delay_min.
            let ahead_j = if self.version.ms_clock() { ca.delay_min >> 3 } else { usecs_to_jiffies(ca.delay_min) };
            let elapsed_j = now_j.saturating_sub(epoch_start) + ahead_j;
            let t = (elapsed_j << BICTCP_HZ) / HZ;
            let offs = t.abs_diff(ca.k) as u128;
            let delta = (self.cube_rtt_scale as u128 * offs * offs * offs) >> (10 + 3 * BICTCP_HZ);
            let delta = delta.min(u32::MAX as u128) as u32;
            let target = if t < ca.k { ca.origin_point.saturating_sub(delta) } else { ca.origin_point.saturating_add(delta) };

            ca.cnt = if target > cwnd { cwnd / (target - cwnd) } else { cwnd.saturating_mul(100) };
            // First epoch ever: at least 5 % growth per RTT while the capacity is unknown.
            if ca.last_max_cwnd == 0 && ca.cnt > 20 {
                ca.cnt = 20;
            }
        }

        // Reno-friendly region (RFC 9438 §4.3): W_est grows by 1 per cwnd·beta_scale/8 ACKs,
        // i.e. 8/beta_scale ≈ 3(1−β)/(1+β) packets per RTT.
        if self.params.tcp_friendliness {
            let per = ((cwnd as u64 * self.beta_scale) >> 3).max(1);
            if ca.ack_cnt > per as i64 {
                let n = (ca.ack_cnt as u64 - 1) / per;
                ca.ack_cnt -= (n * per) as i64;
                ca.tcp_cwnd = ca.tcp_cwnd.saturating_add(n.min(u32::MAX as u64) as u32);
            }
            if ca.tcp_cwnd > cwnd {
                let max_cnt = cwnd / (ca.tcp_cwnd - cwnd);
                ca.cnt = ca.cnt.min(max_cnt);
            }
        }
        // At most +1 packet per 2 ACKed: 1.5× per RTT.
        ca.cnt = ca.cnt.max(2);
    }

    /// Linux `hystart_ack_delay`: a TSO/GRO cushion of 4 GSO packets at the pacing rate,
    /// at most 1 ms; zero without a pacing rate.
    fn hystart_ack_delay_us(&self, tp: &TcpCcState) -> u64 {
        let rate = if tp.pacing_rate.is_finite() && tp.pacing_rate >= 1.0 { tp.pacing_rate as u64 } else { 0 };
        if rate == 0 {
            return 0;
        }
        (self.params.gso_max_size * 4 * 1_000_000 / rate).min(1_000)
    }

    /// Linux `hystart_update`: the ACK-train and delay-increase exits from slow start, in the
    /// instance's [`CubicVersion`] (today's: torvalds 617e407c `hystart_update`; V5_4: the
    /// pre-5.6 function, chromi/sce `tcp_cubic_sce.c` 0139ea04 `hystart_update` ~l.330-375).
    fn hystart_update(&mut self, tp: &mut TcpCcState, delay: u64) {
        let v = self.version;
        if v.reset_in_update() && seq_after(tp.snd_una, self.round.end_seq) {
            self.hystart_reset(tp);
        }
        if tp.cwnd < self.params.hystart_low_window {
            return;
        }
        let now = self.hystart_clock(tp.now);
        // ACK spacing that continues a train: 2000 µs, or Linux ≤ 5.5's `hystart_ack_delta`
        // = 2 ms on the ms clock.
        let ack_delta = if v.ms_clock() { self.params.hystart_ack_delta_us / 1000 } else { self.params.hystart_ack_delta_us };
        if self.params.hystart_detect & HYSTART_ACK_TRAIN != 0 && (now as i64 - self.round.last_ack as i64) <= ack_delta as i64 {
            self.round.last_ack = now;
            let threshold = if v.ms_clock() {
                // `delay_min >> 4`: half the minimum RTT, in ms (delay_min is in 1/8 ms).
                self.ca.delay_min >> 4
            } else {
                let t = self.ca.delay_min + self.hystart_ack_delay_us(tp);
                // Unpaced, the train of a full window arrives within about half an RTT.
                if tp.paced { t } else { t >> 1 }
            };
            if now as i64 - self.round.start as i64 > threshold as i64 {
                self.ca.found = true;
                tp.ssthresh = tp.cwnd;
            }
        }
        if self.params.hystart_detect & HYSTART_DELAY != 0 {
            // Until 5.8-rc3 only the round's first 8 samples enter curr_rtt; later samples are
            // compared against that minimum (the "spurious HYSTART_DELAY exit" Cardwell fixed).
            if v.running_min() || self.round.sample_cnt < HYSTART_MIN_SAMPLES {
                self.round.curr_rtt = self.round.curr_rtt.min(delay);
            }
            if self.round.sample_cnt < HYSTART_MIN_SAMPLES {
                self.round.sample_cnt += 1;
            } else {
                let dm = self.ca.delay_min;
                // clamp(delay_min/8, 4 ms, 16 ms), in the version's unit.
                let (lo, hi) = if v.ms_clock() { (4 << 3, 16 << 3) } else { (HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US) };
                if self.round.curr_rtt > dm + (dm >> 3).clamp(lo, hi) {
                    self.ca.found = true;
                    tp.ssthresh = tp.cwnd;
                }
            }
        }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        CUBIC.name
    }

    /// Linux `cubictcp_init`.
    fn init(&mut self, tp: &mut TcpCcState) {
        self.reset();
        self.prior_cwnd = 0;
        if self.params.hystart {
            self.hystart_reset(tp);
        } else if self.params.initial_ssthresh != 0 {
            tp.ssthresh = self.params.initial_ssthresh;
        }
    }

    /// Linux `cubictcp_recalc_ssthresh` (RFC 9438 §4.6, §4.7): end the epoch, remember W_max
    /// (reduced to cwnd·(1+β)/2 by fast convergence when cwnd fell short of the previous
    /// W_max), and return max(cwnd·β, 2).
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        let cwnd = tp.cwnd as u64;
        let beta = self.params.beta as u64;
        self.prior_cwnd = tp.cwnd;
        self.ca.epoch_start = None;
        self.ca.last_max_cwnd = if tp.cwnd < self.ca.last_max_cwnd && self.params.fast_convergence {
            (cwnd * (BETA_SCALE + beta) / (2 * BETA_SCALE)) as u32
        } else {
            tp.cwnd
        };
        ((cwnd * beta / BETA_SCALE) as u32).max(2)
    }

    /// Linux `cubictcp_cong_avoid`: slow start, then +1 packet per `cnt` ACKed packets. Before
    /// 5.16 HyStart's round also restarts here, when cwnd-limited in slow start and the ACK
    /// passed the round's end (`bictcp_cong_avoid`: `if (hystart && after(ack, ca->end_seq))`).
    #[inline]
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        if !self.version.reset_in_update()
            && self.params.hystart
            && tp.is_cwnd_limited
            && tp.in_slow_start()
            && seq_after(tp.snd_una, self.round.end_seq)
        {
            self.hystart_reset(tp);
        }
        let Some(acked) = acked_for_avoidance(tp, acked) else { return };
        self.update(jiffies(tp.now), tp.cwnd, acked);
        cong_avoid_ai(tp, self.ca.cnt, acked);
    }

    /// Linux `cubictcp_acked`: track `delay_min` and run HyStart.
    #[inline]
    fn pkts_acked(&mut self, tp: &mut TcpCcState, sample: &AckSample) {
        let Some(rtt) = sample.rtt else { return };
        // Discard delay samples right after a reduction: the first second of an epoch.
        if let Some(es) = self.ca.epoch_start {
            if (jiffies(tp.now) as i64 - es as i64) < HZ as i64 {
                return;
            }
        }
        // µs, or before 5.6 `(rtt_us << 3) / USEC_PER_MSEC`: 1/8 ms, truncated; at least 1.
        let delay = if self.version.ms_clock() { (rtt.as_micros() << 3) / 1000 } else { rtt.as_micros() }.max(1);
        if self.ca.delay_min == 0 || self.ca.delay_min > delay {
            self.ca.delay_min = delay;
        }
        if !self.ca.found
            && tp.in_slow_start()
            && self.params.hystart
            && (tp.cwnd >= self.params.hystart_low_window || self.version.update_below_low_window())
        {
            self.hystart_update(tp, delay);
        }
    }

    /// Linux `cubictcp_state`: an RTO (entering Loss) forgets everything, HyStart included.
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        if new == CaState::Loss {
            self.reset();
            self.hystart_reset(tp);
        }
    }

    /// Linux `cubictcp_cwnd_event`: after idle, shift the epoch so that the curve resumes
    /// where it left off instead of jumping by the idle time (RFC 9438 §5.8).
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        if ev != CaEvent::TxStart {
            return;
        }
        let now = jiffies(tp.now);
        let delta = now as i64 - jiffies(tp.lsndtime) as i64;
        if let Some(es) = self.ca.epoch_start.as_mut() {
            if delta > 0 {
                *es = (*es + delta as u64).min(now);
            }
        }
    }

    /// Linux `tcp_reno_undo_cwnd` (CUBIC's `.undo_cwnd`): back to the cwnd before the reduction.
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        tp.cwnd.max(self.prior_cwnd)
    }
}

#[cfg(test)]
mod tests;
