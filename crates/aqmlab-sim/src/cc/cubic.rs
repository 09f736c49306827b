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

/// The module parameters of `tcp_cubic.c`, with Linux's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    fn build(&self, _rng: crate::rng::Stream, stack: Stack) -> Box<dyn CongestionControl> {
        Box::new(Cubic::new(self.resolved(stack)))
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
#[derive(Clone, Debug)]
pub struct Cubic {
    params: CubicParams,
    /// The HyStart generation (`params.version`, today's when unset).
    version: CubicVersion,
    /// `beta_scale` = 8(1024+β)/3/(1024−β) in integers (15 for β = 717).
    beta_scale: u64,
    /// `cube_rtt_scale` = bic_scale·10 (C in 1/1024).
    cube_rtt_scale: u64,
    /// `cube_factor` = 2^40 / (bic_scale·10), so K = ∛(cube_factor·(W_max − cwnd)) in 2^-10 s.
    cube_factor: u64,
    ca: Epoch,
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

/// ⌊∛a⌋, exact, by bisection (stands in for Linux `cubic_root`).
fn cube_root(a: u128) -> u64 {
    let (mut lo, mut hi) = (0u64, 1u64 << 43); // (2^43)^3 > 2^128 > a
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let m = mid as u128;
        match m.checked_mul(m).and_then(|x| x.checked_mul(m)) {
            Some(c) if c <= a => lo = mid,
            _ => hi = mid,
        }
    }
    lo
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
mod tests {
    use super::*;
    use crate::cc::test_state;

    const BETA: f64 = 717.0 / 1024.0;
    const C: f64 = 0.4;

    /// A flow driven by synthetic ACKs: one ACK per packet, all of cwnd in flight.
    #[derive(Clone)]
    struct Flow {
        tp: TcpCcState,
        cc: Cubic,
    }

    impl Flow {
        fn new(cwnd: u32, ssthresh: u32) -> Flow {
            let mut tp = test_state(cwnd, ssthresh);
            let mut cc = Cubic::default();
            cc.init(&mut tp);
            Flow { tp, cc }
        }
        /// One ACK `dt` after the previous one, acknowledging `acked` packets with RTT `rtt`.
        fn ack_n(&mut self, dt: Time, rtt: Option<Time>, acked: u32) {
            self.tp.now += dt;
            self.tp.snd_una += acked;
            self.tp.delivered += acked as u64;
            let sample = AckSample { acked, rtt, prior_in_flight: self.tp.cwnd, ..AckSample::default() };
            self.cc.pkts_acked(&mut self.tp, &sample);
            // As the sender: cong_avoid only when snd_una advanced.
            if acked > 0 {
                self.cc.cong_avoid(&mut self.tp, acked);
            }
            self.tp.snd_nxt = self.tp.snd_una + self.tp.cwnd;
            self.tp.packets_out = self.tp.cwnd;
        }
        fn ack(&mut self, dt: Time, rtt: Time) {
            self.ack_n(dt, Some(rtt), 1);
        }
        /// One round trip of an ACK clock at constant `rtt` with no queue: cwnd ACKs spread
        /// evenly over the RTT (each spacing uses the cwnd current at that ACK).
        fn round(&mut self, rtt: Time) {
            let n = self.tp.cwnd;
            for _ in 0..n {
                let dt = rtt.mul_div(1, self.tp.cwnd as u64);
                self.ack(dt, rtt);
            }
        }
        /// A loss at the current cwnd, with the recovery finishing at once at ssthresh.
        fn loss(&mut self) -> u32 {
            let s = self.cc.ssthresh(&self.tp);
            self.tp.ssthresh = s;
            self.tp.cwnd = s;
            self.tp.cwnd_cnt = 0;
            s
        }
        /// Growth over one RTT is at most half of cwnd at the RTT's start; the extra packet
        /// allowed is the ABC carry (`cwnd_cnt`) left from the previous RTT.
        fn assert_at_most_1_5x(before: u32, after: u32) {
            assert!((after - before) * 2 <= before + 1, "more than 1.5x in one RTT: {before} -> {after}");
        }
        fn epoch_start(&self) -> Time {
            Time::from_millis(self.cc.ca.epoch_start.expect("in an epoch"))
        }
    }

    #[test]
    fn cube_root_is_exact_floor() {
        for a in [0u128, 1, 7, 8, 26, 27, 28, 999, 1000, 1001, u64::MAX as u128] {
            let r = cube_root(a) as u128;
            assert!(r * r * r <= a && (r + 1) * (r + 1) * (r + 1) > a, "cbrt({a}) = {r}");
        }
        // K for W_max − cwnd = 300 packets: ∛(300/C) s with C = 410/1024, in 2^-10 s.
        let k = cube_root(Cubic::default().cube_factor as u128 * 300);
        let exact = (300.0 * 1024.0 / 410.0f64).cbrt() * 1024.0;
        assert!((k as f64 - exact).abs() <= 1.0, "K {k} vs {exact}");
    }

    /// Test 1 (RFC 9438 §4.2). After a loss at W_max = 1000 with RTT 100 ms, cwnd observed at
    /// an ACK arriving t seconds after the epoch's start (the jiffy of the first congestion-
    /// avoidance ACK) must equal W(t) = C·(t−K)³ + W_max within 1 %, K = ∛(W_max(1−β)/C),
    /// C = 0.4, β = 717/1024, for RTT ≤ t ≤ 2K (cwnd from 700 up through W_max to ~1300).
    ///
    /// Linux sets cnt so that cwnd would reach W(t + delay_min) one RTT later; since an
    /// ACK-clocked increase takes one RTT to happen, that look-ahead makes cwnd(t) itself
    /// track W(t). Without it cwnd would lag W by W'(t)·RTT ≈ 10 packets (≈ 1.4 %) early in
    /// the epoch, which this test would reject.
    #[test]
    fn window_follows_the_cubic_curve_between_losses() {
        let rtt = Time::from_millis(100);
        let mut f = Flow::new(1000, 1000);
        f.ack_n(Time::ZERO, Some(rtt), 0); // one RTT sample before the loss: delay_min = RTT
        assert_eq!(f.cc.delay_min(), rtt);
        f.tp.now = Time::from_secs(1);
        assert_eq!(f.loss(), 700);
        let w_max = 1000.0;
        let k = (w_max * (1.0 - BETA) / C).cbrt();
        let mut max_err: f64 = 0.0;
        let mut checked = 0;
        f.round(rtt);
        let t0 = f.epoch_start();
        loop {
            let before = f.tp.cwnd;
            f.round(rtt);
            Flow::assert_at_most_1_5x(before, f.tp.cwnd);
            let t = (f.tp.now - t0).as_secs_f64();
            if t > 2.0 * k {
                break;
            }
            let w = C * (t - k).powi(3) + w_max;
            let err = (f.tp.cwnd as f64 - w).abs() / w;
            max_err = max_err.max(err);
            checked += 1;
            assert!(err < 0.01, "t={t:.2}s cwnd={} W(t)={w:.1} err={:.2}%", f.tp.cwnd, err * 100.0);
        }
        assert!(checked > 150, "compared {checked} RTTs");
        assert!(f.tp.cwnd > 1250, "convex region reached: cwnd {}", f.tp.cwnd);
        eprintln!("closed form: {checked} RTTs compared, max error {:.3}%", max_err * 100.0);
    }

    /// Test 2 (RFC 9438 §4.6, §4.7).
    #[test]
    fn ssthresh_is_beta_times_cwnd_and_fast_convergence_lowers_w_max() {
        let mut f = Flow::new(1000, 1);
        // Exact integer: ⌊cwnd·717/1024⌋, floor 2.
        assert_eq!(f.cc.ssthresh(&test_state(1000, 0)), 700);
        assert_eq!(f.cc.ssthresh(&test_state(1001, 0)), 700); // 700.89 → 700
        assert_eq!(f.cc.ssthresh(&test_state(1463, 0)), 1024); // 1024.4 → 1024
        assert_eq!(f.cc.ssthresh(&test_state(2, 0)), 2);

        let mut f2 = Flow::new(1000, 1);
        assert_eq!(f2.loss(), 700);
        assert_eq!(f2.cc.w_max(), 1000); // no previous W_max: W_max = cwnd
        // Second loss below the previous W_max: W_max = ⌊900·(1024+717)/2048⌋ = 765.
        f2.tp.cwnd = 900;
        assert_eq!(f2.loss(), 630);
        assert_eq!(f2.cc.w_max(), 765);
        // The next epoch's plateau is the reduced W_max.
        f2.ack(Time::from_millis(1), Time::from_millis(50));
        assert_eq!(f2.cc.ca.origin_point, 765);
        // A loss above the previous W_max remembers cwnd itself.
        f2.tp.cwnd = 800;
        assert_eq!(f2.loss(), 560);
        assert_eq!(f2.cc.w_max(), 800);
        // Without fast convergence W_max = cwnd.
        let mut f3 = Flow::new(1000, 1);
        f3.cc = Cubic::new(CubicParams { fast_convergence: false, ..CubicParams::default() });
        f3.loss();
        f3.tp.cwnd = 900;
        f3.loss();
        assert_eq!(f3.cc.w_max(), 900);
        // Undo restores the cwnd before the reduction.
        assert_eq!(f2.cc.undo_cwnd(&f2.tp), 800);
    }

    /// Test 3 (RFC 9438 §4.3). W_max = 20 and RTT 10 ms: the cubic curve would add < 0.05
    /// packets per RTT here (K ≈ 2.5 s), so the Reno-friendly estimate rules and cwnd must
    /// grow by 3(1−β)/(1+β) ≈ 0.53 packets per RTT (Linux: 8/beta_scale = 8/15).
    #[test]
    fn reno_friendly_region_grows_like_aimd() {
        let rtt = Time::from_millis(10);
        let mut f = Flow::new(20, 20);
        f.ack_n(Time::ZERO, Some(rtt), 0);
        f.tp.now = Time::from_secs(1);
        assert_eq!(f.loss(), 14);
        for _ in 0..20 {
            f.round(rtt);
        }
        let (c0, t0) = (f.tp.cwnd, f.tp.now);
        let rounds = 100;
        for _ in 0..rounds {
            let before = f.tp.cwnd;
            f.round(rtt);
            Flow::assert_at_most_1_5x(before, f.tp.cwnd);
        }
        let elapsed_rtts = (f.tp.now - t0).as_secs_f64() / rtt.as_secs_f64();
        let per_rtt = (f.tp.cwnd - c0) as f64 / elapsed_rtts;
        let alpha = 3.0 * (1.0 - BETA) / (1.0 + BETA);
        eprintln!("reno-friendly: {per_rtt:.3} packets/RTT (alpha {alpha:.3}), cwnd {c0} -> {}", f.tp.cwnd);
        assert!((per_rtt - alpha).abs() < 0.1 * alpha, "{per_rtt:.3} packets per RTT");
        // Without the Reno-friendly region the same flow stays on the flat cubic curve.
        let mut g = Flow::new(20, 20);
        g.cc = Cubic::new(CubicParams { tcp_friendliness: false, ..CubicParams::default() });
        g.ack_n(Time::ZERO, Some(rtt), 0);
        g.tp.now = Time::from_secs(1);
        g.loss();
        for _ in 0..120 {
            g.round(rtt);
        }
        assert!(g.tp.cwnd <= 20, "pure cubic stays at or below W_max: {}", g.tp.cwnd);
    }

    /// Test 4 (RFC 9438 §4.2 target ≤ 1.5·cwnd; Linux cnt ≥ 2). Far past K the cubic target
    /// is huge; per RTT cwnd must still grow by at most half, and by exactly that much (the
    /// clamp is what binds), also with stretch ACKs covering several packets.
    #[test]
    fn growth_never_exceeds_one_and_a_half_per_rtt() {
        for acked_per_ack in [1u32, 2, 3, 8] {
            let rtt = Time::from_millis(50);
            let mut f = Flow::new(100, 100);
            f.ack_n(Time::ZERO, Some(rtt), 0);
            f.tp.now = Time::from_secs(1);
            f.loss(); // W_max = 100, cwnd 70
            f.ack(Time::from_millis(1), rtt); // epoch starts
            f.tp.now += Time::from_secs(60); // long after K: target ≈ 100 + 0.4·57³
            for _ in 0..8 {
                let before = f.tp.cwnd;
                let mut acked = 0;
                while acked < before {
                    let n = acked_per_ack.min(before - acked);
                    f.ack_n(rtt.mul_div(n as u64, before as u64), Some(rtt), n);
                    acked += n;
                }
                Flow::assert_at_most_1_5x(before, f.tp.cwnd);
                let grown = f.tp.cwnd - before;
                assert!(grown * 2 + 2 >= before, "clamp should bind: {before} -> {}", f.tp.cwnd);
            }
            // Over several RTTs the carry cannot accumulate: exactly one packet per 2 ACKed.
            let (c0, d0) = (f.tp.cwnd, f.tp.delivered);
            for _ in 0..4 {
                f.round(rtt);
            }
            assert!((f.tp.cwnd - c0) as u64 * 2 <= f.tp.delivered - d0 + 1);
        }
    }

    /// Slow-start driver for the HyStart tests: ACKs every `spacing`, each with RTT `rtt(i)`;
    /// returns the ACK index and the round's age (µs) at which slow start ended, if it did.
    fn slow_start_until_exit(f: &mut Flow, spacing: Time, max_acks: usize, rtt: impl Fn(&Flow) -> Time) -> Option<(usize, u64, u32)> {
        for i in 0..max_acks {
            let cwnd_before = f.tp.cwnd;
            let r = rtt(f);
            f.ack(spacing, r);
            if f.cc.hystart_found() {
                assert_eq!(f.tp.ssthresh, cwnd_before, "HyStart sets ssthresh = cwnd");
                assert!(!f.tp.in_slow_start());
                // The round's age in µs (HyStart's clock is in ms before 5.6).
                let age = f.cc.hystart_clock(f.tp.now) - f.cc.round.start;
                return Some((i, if f.cc.version.ms_clock() { age * 1000 } else { age }, cwnd_before));
            }
        }
        None
    }

    /// Test 5a: the delay rule. delay_min = 100 ms gives a threshold of
    /// clamp(100/8, 4, 16) = 12.5 ms: RTTs of 112 ms never end slow start; RTTs of 113 ms do, on
    /// the ninth sample of the first round that saw no smaller RTT.
    #[test]
    fn hystart_delay_rule() {
        let base = Time::from_millis(100);
        // Below the threshold: no exit.
        let mut f = Flow::new(10, u32::MAX);
        let r = slow_start_until_exit(&mut f, Time::from_millis(5), 400, |f| {
            if f.tp.cwnd < 30 { base } else { Time::from_millis(112) }
        });
        assert!(r.is_none() && f.tp.cwnd > 400);

        let mut f = Flow::new(10, u32::MAX);
        let (_, _, cwnd) = slow_start_until_exit(&mut f, Time::from_millis(5), 400, |f| {
            if f.tp.cwnd < 30 { base } else { Time::from_millis(113) }
        })
        .expect("delay increase ends slow start");
        assert_eq!(f.cc.round.sample_cnt, HYSTART_MIN_SAMPLES);
        assert_eq!(f.cc.round.curr_rtt, 113_000);
        assert!(cwnd > 30);

        // Clamps: delay_min 10 ms → threshold 4 ms (not 1.25); 200 ms → 16 ms (not 25).
        for (dmin, no, yes) in [(10, 13_900, 14_100), (200, 215_000, 217_000)] {
            let run = |late: u64| {
                let mut f = Flow::new(10, u32::MAX);
                slow_start_until_exit(&mut f, Time::from_millis(5), 300, |f| {
                    if f.tp.cwnd < 30 { Time::from_millis(dmin) } else { Time::from_micros(late) }
                })
            };
            assert!(run(no).is_none(), "delay_min {dmin} ms, rtt {no} us");
            assert!(run(yes).is_some(), "delay_min {dmin} ms, rtt {yes} us");
        }
    }

    /// Test 5b: the ACK-train rule. ACKs 1 ms apart (≤ 2 ms) with delay_min = 40 ms: unpaced,
    /// the threshold is (40 ms + ack_delay)/2 and slow start ends once the train since the
    /// round's start is longer; paced, it is not halved. With a pacing rate of 10 MB/s
    /// ack_delay = min(4·65536 B / rate, 1 ms) = 1 ms. ACKs 3 ms apart never form a train.
    #[test]
    fn hystart_ack_train_rule() {
        let rtt = Time::from_millis(40);
        let run = |paced: bool, spacing_ms: u64| {
            let mut f = Flow::new(10, u32::MAX);
            f.tp.paced = paced;
            f.tp.pacing_rate = 10e6;
            slow_start_until_exit(&mut f, Time::from_millis(spacing_ms), 2000, |_| rtt)
        };
        let (_, age, cwnd) = run(false, 1).expect("train exit, unpaced");
        assert_eq!(age, 21_000, "first train length above 20.5 ms");
        assert!(cwnd >= 21);
        let (_, age, _) = run(true, 1).expect("train exit, paced");
        assert_eq!(age, 42_000, "first train length above 41 ms");
        assert!(run(false, 3).is_none(), "3 ms spacing is no train");
        // Without a pacing rate there is no ack_delay cushion: threshold 20 ms.
        let mut f = Flow::new(10, u32::MAX);
        let (_, age, _) = slow_start_until_exit(&mut f, Time::from_millis(1), 2000, |_| rtt).unwrap();
        assert_eq!(age, 21_000);
        let mut f = Flow::new(10, u32::MAX);
        f.tp.paced = true;
        let (_, age, _) = slow_start_until_exit(&mut f, Time::from_millis(1), 2000, |_| rtt).unwrap();
        assert_eq!(age, 41_000);
    }

    /// Test 5c: HyStart is off below cwnd 16 (`hystart_low_window`), whatever the signals.
    #[test]
    fn hystart_waits_for_low_window() {
        let mut f = Flow::new(15, u32::MAX);
        f.tp.is_cwnd_limited = false; // cwnd stays at 15
        f.ack(Time::from_millis(1), Time::from_millis(40));
        for i in 0..300u64 {
            // 1 ms ACK trains and RTTs far above delay_min + 5 ms.
            f.ack(Time::from_millis(1), Time::from_millis(80 + i % 3));
            assert!(!f.cc.hystart_found());
        }
        assert_eq!(f.tp.cwnd, 15);
        f.tp.cwnd = 16;
        let mut exited = false;
        for _ in 0..40 {
            f.ack(Time::from_millis(1), Time::from_millis(80));
            if f.cc.hystart_found() {
                exited = true;
                break;
            }
        }
        assert!(exited, "HyStart runs from cwnd 16");
        assert_eq!(f.tp.ssthresh, 16);
    }

    /// `delay_min` is the minimum sample, samples in the first second of an epoch are ignored,
    /// and an RTO forgets it together with W_max and HyStart's verdict.
    #[test]
    fn delay_min_tracking_and_rto_reset() {
        let mut f = Flow::new(100, 100);
        f.ack_n(Time::ZERO, Some(Time::from_millis(30)), 0);
        f.ack_n(Time::ZERO, Some(Time::from_millis(20)), 0);
        f.ack_n(Time::ZERO, Some(Time::from_millis(25)), 0);
        assert_eq!(f.cc.delay_min(), Time::from_millis(20));
        f.tp.now = Time::from_secs(1);
        f.loss();
        f.ack(Time::from_millis(1), Time::from_millis(20)); // epoch starts at 1001 ms
        f.ack(Time::from_millis(500), Time::from_millis(10));
        assert_eq!(f.cc.delay_min(), Time::from_millis(20), "ignored within 1 s of the epoch");
        f.ack(Time::from_millis(500), Time::from_millis(10));
        assert_eq!(f.cc.delay_min(), Time::from_millis(10), "accepted after 1 s");

        f.cc.ca.found = true;
        let s = f.cc.ssthresh(&f.tp);
        f.tp.ssthresh = s;
        f.cc.set_state(&mut f.tp, CaState::Loss);
        assert_eq!(f.cc.w_max(), 0);
        assert_eq!(f.cc.delay_min(), Time::ZERO);
        assert!(!f.cc.hystart_found());
        assert!(f.cc.ca.epoch_start.is_none());
        assert_eq!(f.cc.round.end_seq, f.tp.snd_nxt);
    }

    /// Idle restart: the epoch moves forward by the time since the last send, so the curve
    /// resumes where it was (Linux `cubictcp_cwnd_event`) instead of jumping by the idle time.
    #[test]
    fn idle_restart_shifts_the_epoch() {
        let rtt = Time::from_millis(100);
        let mut f = Flow::new(1000, 1000);
        f.ack_n(Time::ZERO, Some(rtt), 0);
        f.tp.now = Time::from_secs(1);
        f.loss();
        for _ in 0..5 {
            f.round(rtt);
        }
        let es = f.epoch_start();
        let cwnd = f.tp.cwnd;
        // Everything ACKed, then 3 s of idle. The last packet was sent one RTT before the
        // last ACK, so Linux's idle time (now − lsndtime) is 3 s + RTT.
        f.tp.lsndtime = f.tp.now - rtt;
        f.tp.now += Time::from_secs(3);
        let mut no_event = f.clone();
        f.cc.cwnd_event(&mut f.tp, CaEvent::TxStart);
        assert_eq!(f.epoch_start() - es, Time::from_secs(3) + rtt);
        // The sender then records that transmission: another TxStart shifts nothing more.
        f.tp.lsndtime = f.tp.now;
        f.cc.cwnd_event(&mut f.tp, CaEvent::TxStart);
        assert_eq!(f.epoch_start() - es, Time::from_secs(3) + rtt);
        f.round(rtt);
        no_event.round(rtt);
        // On the concave curve (~60 packets/s) one RTT adds a few packets; without the shift
        // the target would be W(3.6 s) ≈ 934 and cwnd would jump towards it.
        assert!(f.tp.cwnd > cwnd && f.tp.cwnd - cwnd < 10, "{cwnd} -> {}", f.tp.cwnd);
        assert!(no_event.tp.cwnd - cwnd > 100, "without the shift: {cwnd} -> {}", no_event.tp.cwnd);
        // No epoch, nothing to shift.
        let mut h = Flow::new(10, u32::MAX);
        h.tp.now = Time::from_secs(5);
        h.cc.cwnd_event(&mut h.tp, CaEvent::TxStart);
        assert!(h.cc.ca.epoch_start.is_none());
    }

    /// First epoch ever (no W_max yet): at least 5 % growth per RTT (cnt ≤ 20).
    #[test]
    fn first_epoch_grows_at_least_five_percent_per_rtt() {
        let rtt = Time::from_millis(100);
        let mut f = Flow::new(200, 200);
        f.ack_n(Time::ZERO, Some(rtt), 0);
        f.cc.ca.found = true;
        for _ in 0..10 {
            let before = f.tp.cwnd;
            f.round(rtt);
            assert!(f.tp.cwnd >= before + before / 20, "{before} -> {}", f.tp.cwnd);
        }
        assert_eq!(f.cc.ca.cnt, 20);
    }

    /// Recomputation throttling: with cwnd unchanged, `cnt` is not recomputed within 31
    /// jiffies (HZ/32), even though time runs on.
    #[test]
    fn recomputation_is_throttled_like_linux() {
        let rtt = Time::from_millis(100);
        let mut f = Flow::new(1000, 1000);
        f.ack_n(Time::ZERO, Some(rtt), 0);
        f.tp.now = Time::from_secs(1);
        f.loss();
        f.ack(Time::from_millis(1), rtt);
        let (cnt, last) = (f.cc.ca.cnt, f.cc.ca.last_time);
        f.tp.is_cwnd_limited = true;
        // Call update directly with an unchanged cwnd 31 ms later: skipped.
        f.cc.update(last + 31, f.tp.cwnd, 1);
        assert_eq!((f.cc.ca.cnt, f.cc.ca.last_time), (cnt, last));
        f.cc.update(last + 32, f.tp.cwnd, 1);
        assert_eq!(f.cc.ca.last_time, last + 32);
        // cwnd changed but same jiffy: cubic part not recomputed.
        f.cc.update(last + 32, f.tp.cwnd + 1, 1);
        assert_eq!(f.cc.ca.last_cwnd, f.tp.cwnd);
    }

    // ------------------------------------------------------------------ HyStart generations

    fn flow_v(v: CubicVersion) -> Flow {
        let mut tp = test_state(10, u32::MAX);
        let mut cc = Cubic::new(CubicParams { version: Some(v), ..CubicParams::default() });
        cc.init(&mut tp);
        Flow { tp, cc }
    }

    /// The first-8-samples rule (Linux < 5.8-rc3) against the running minimum (Cardwell's fix,
    /// 24 Jun 2020). delay_min = 100 ms, so the exit threshold is 100 + clamp(12.5, 4, 16) =
    /// 112.5 ms (1/8-ms units under 5.4: 800 + clamp(100, 32, 128) = 900). A round whose first
    /// 8 samples are 113 ms (904) and whose later samples are back at 100 ms:
    /// - 5.4 and 5.6 keep curr_rtt = 113 ms from the first 8 and exit on the 9th sample;
    /// - 5.8 and today fold the 9th sample (100 ms) in first: curr_rtt = 100, no exit.
    #[test]
    fn hystart_first_eight_samples_vs_running_min() {
        for v in [CubicVersion::V5_4, CubicVersion::V5_6, CubicVersion::V5_8, CubicVersion::Current] {
            let mut f = flow_v(v);
            f.tp.cwnd = 20; // above hystart_low_window
            f.tp.is_cwnd_limited = false; // hold cwnd: the round must not end on its own
            f.ack_n(Time::ZERO, Some(Time::from_millis(100)), 0); // delay_min = 100 ms
            // A fresh round at the next ACK (both reset points need an ACK past end_seq).
            f.tp.snd_nxt = f.tp.snd_una + 1000;
            f.cc.hystart_reset(&f.tp);
            for i in 0..8 {
                f.ack_n(Time::from_millis(5), Some(Time::from_millis(113)), 0);
                assert!(!f.cc.hystart_found(), "{v:?}: sample {i} is one of the first 8");
            }
            f.ack_n(Time::from_millis(5), Some(Time::from_millis(100)), 0);
            let era = v < CubicVersion::V5_8;
            assert_eq!(f.cc.hystart_found(), era, "{v:?}: 9th sample 100 ms after eight of 113 ms");
            assert_eq!(f.cc.round.curr_rtt, if v.ms_clock() { 904 } else if era { 113_000 } else { 100_000 });
            if era {
                assert_eq!(f.tp.ssthresh, 20);
            }
        }
    }

    /// The 1/8-ms truncation of Linux ≤ 5.5 (`delay = (rtt_us << 3) / 1000`), the other way
    /// round: delay_min = 24 ms gives the 4 ms floor (24/8 = 3 < 4), threshold 28 ms. A round
    /// of 28.1 ms RTTs ends slow start today (28 100 µs > 28 000 µs) but not under 5.4
    /// ((28 100 << 3) / 1000 = 224 = 192 + 32, not above); 28.125 ms (225) does.
    #[test]
    fn hystart_delay_rule_in_eighths_of_a_ms() {
        let run = |v: CubicVersion, late_us: u64| {
            let mut f = flow_v(v);
            slow_start_until_exit(&mut f, Time::from_millis(5), 300, |f| {
                if f.tp.cwnd < 30 { Time::from_millis(24) } else { Time::from_micros(late_us) }
            })
        };
        assert!(run(CubicVersion::Current, 28_100).is_some());
        assert!(run(CubicVersion::V5_4, 28_100).is_none());
        assert!(run(CubicVersion::V5_4, 28_125).is_some());
        // delay_min is kept in 1/8 ms: 40 ms exactly.
        let mut f = flow_v(CubicVersion::V5_4);
        f.ack_n(Time::ZERO, Some(Time::from_micros(40_110)), 0);
        assert_eq!(f.cc.ca.delay_min, 320);
        assert_eq!(f.cc.delay_min(), Time::from_millis(40));
    }

    /// The ACK-train rule of Linux ≤ 5.5: ms clock, threshold `delay_min >> 4` = half the
    /// minimum RTT in ms, no `hystart_ack_delay` cushion, no pacing distinction. delay_min =
    /// 40 ms (320 eighths) → 20 ms: with ACKs 1 ms apart slow start ends when the round is
    /// 21 ms old, paced or not. Today's paced threshold is 40 + 1 = 41 ms (exit at 42 ms, test
    /// 5b), so a paced CUBIC (e.g. under fq) leaves slow start at half the window in 5.4.
    #[test]
    fn hystart_ack_train_pre_5_6() {
        let rtt = Time::from_millis(40);
        for paced in [false, true] {
            let mut f = flow_v(CubicVersion::V5_4);
            f.tp.paced = paced;
            f.tp.pacing_rate = 10e6;
            let (_, age, cwnd) = slow_start_until_exit(&mut f, Time::from_millis(1), 2000, |_| rtt).expect("train exit");
            // Round ages are in ms under 5.4.
            assert_eq!(age, 21_000, "paced {paced}");
            assert!(cwnd >= 21);
            let mut g = flow_v(CubicVersion::Current);
            g.tp.paced = paced;
            g.tp.pacing_rate = 10e6;
            let (_, age_now, _) = slow_start_until_exit(&mut g, Time::from_millis(1), 2000, |_| rtt).unwrap();
            assert_eq!(age_now, if paced { 42_000 } else { 21_000 });
        }
        // 3 ms apart is no train on the ms clock either.
        let mut f = flow_v(CubicVersion::V5_4);
        assert!(slow_start_until_exit(&mut f, Time::from_millis(3), 2000, |_| rtt).is_none());
    }

    /// Before 5.16 the round restarts in `cong_avoid`, i.e. only while cwnd-limited; today it
    /// restarts in `hystart_update` on any ACK past the round's end (4e1fddc98d25).
    #[test]
    fn hystart_round_reset_point() {
        for v in [CubicVersion::V5_8, CubicVersion::Current] {
            let mut f = flow_v(v);
            f.tp.cwnd = 20;
            f.tp.is_cwnd_limited = false;
            f.ack_n(Time::ZERO, Some(Time::from_millis(40)), 0);
            f.tp.snd_nxt = f.tp.snd_una;
            f.cc.hystart_reset(&f.tp); // a round that ends at the next ACK
            let start = f.cc.round.start;
            f.ack(Time::from_millis(50), Time::from_millis(40)); // snd_una passes end_seq
            let reset = f.cc.round.start != start;
            assert_eq!(reset, v == CubicVersion::Current, "{v:?}");
            // Cwnd-limited, the older code restarts the round in cong_avoid.
            f.tp.is_cwnd_limited = true;
            f.ack(Time::from_millis(50), Time::from_millis(40));
            assert_eq!(f.cc.round.start, f.tp.now.as_micros());
        }
    }

    /// Below `hystart_low_window` the 5.16 model never restarts a round (hystart_update is not
    /// called); 25c1a9ca53db (6.13) and every pre-5.16 generation (reset in cong_avoid) do.
    #[test]
    fn hystart_round_restarts_below_low_window() {
        for v in [CubicVersion::V5_4, CubicVersion::V5_8, CubicVersion::Current, CubicVersion::V6_13] {
            let mut f = flow_v(v); // cwnd 10 < 16, cwnd-limited
            f.ack_n(Time::ZERO, Some(Time::from_millis(40)), 0);
            f.tp.snd_nxt = f.tp.snd_una;
            f.cc.hystart_reset(&f.tp);
            f.ack(Time::from_millis(50), Time::from_millis(40)); // past end_seq, cwnd 10 -> 11
            let restarted = f.cc.round.start == f.cc.hystart_clock(f.tp.now);
            assert_eq!(restarted, v != CubicVersion::Current, "{v:?}");
        }
    }

    /// `bictcp_update` looks ahead by the minimum RTT: today `usecs_to_jiffies(delay_min)`
    /// (rounded up), before 5.6 `msecs_to_jiffies(delay_min >> 3)` (whole ms, truncated). With
    /// delay_min = 80.6 ms the epoch's first target is computed at t = 81 vs 80 jiffies, in
    /// 2^-10 s: ⌊81·1024/1000⌋ = 82 vs ⌊80·1024/1000⌋ = 81.
    #[test]
    fn cubic_look_ahead_unit() {
        for (v, t) in [(CubicVersion::Current, 82u64), (CubicVersion::V5_4, 81)] {
            let mut f = flow_v(v);
            f.tp.cwnd = 1000;
            f.tp.ssthresh = 1000;
            f.cc.ca.found = true;
            f.ack_n(Time::ZERO, Some(Time::from_micros(80_600)), 0);
            f.tp.now = Time::from_secs(1);
            f.loss();
            f.ack(Time::from_millis(1), Time::from_micros(80_600));
            let k = f.cc.ca.k;
            let want = 1000 - f.cc.cubic_delta(k - t);
            // target − cwnd = 1000 − C·(K − t)³ − 700; cnt = cwnd / that.
            assert_eq!(f.cc.ca.cnt, (700 / (want - 700)).max(2), "{v:?}");
        }
    }

    /// The profile picks the generation; an explicit `version` wins; `cubic-sce` has its own.
    #[test]
    fn version_from_profile_and_explicit_override() {
        use crate::params::Params;
        use crate::rng::Stream;
        let build = |text: &str, stack: Stack| {
            let t: Vec<String> = text.split_whitespace().map(String::from).collect();
            parse(&mut Params::new("cubic", &t)).unwrap().build(Stream::new(1, "t"), stack)
        };
        // Drive the built instance: paced, ACKs 1 ms apart at 40 ms RTT; the train exits at a
        // round age of 21 ms under 5.4 and 42 ms today (test above), so the time since the
        // start at which slow start ends tells the generations apart.
        let exit_age = |mut cc: Box<dyn CongestionControl>| {
            let mut tp = test_state(10, u32::MAX);
            tp.paced = true;
            tp.pacing_rate = 10e6;
            cc.init(&mut tp);
            let start = tp.now;
            for _ in 0..2000 {
                tp.now += Time::from_millis(1);
                tp.snd_una += 1;
                let s = AckSample { acked: 1, rtt: Some(Time::from_millis(40)), prior_in_flight: tp.cwnd, ..AckSample::default() };
                cc.pkts_acked(&mut tp, &s);
                if !tp.in_slow_start() {
                    return Some((tp.now - start).as_micros() / 1000);
                }
                cc.cong_avoid(&mut tp, 1);
                tp.snd_nxt = tp.snd_una + tp.cwnd;
            }
            None
        };
        let of = |v: CubicVersion| exit_age(Box::new(Cubic::new(CubicParams { version: Some(v), ..CubicParams::default() })));
        let (old, now) = (of(CubicVersion::V5_4), of(CubicVersion::Current));
        assert!(old.is_some() && now.is_some() && old < now, "5.4 {old:?} vs today {now:?}");
        assert_eq!(exit_age(build("", Stack::Linux)), now);
        assert_eq!(exit_age(build("", Stack::L4steam2024)), now);
        for st in [Stack::L4steam2020, Stack::L4steam2020Apr, Stack::Sce2020] {
            assert_eq!(exit_age(build("", st)), old, "{st}");
            assert_eq!(exit_age(build("version 5.16", st)), now, "explicit beats {st}");
        }
        assert_eq!(exit_age(build("version 5.4", Stack::Linux)), old);
        assert_eq!(CubicParams::default().resolved(Stack::L4steam2020).version, Some(CubicVersion::V5_4));
        let explicit = CubicParams { version: Some(CubicVersion::V5_8), ..CubicParams::default() };
        assert_eq!(explicit.resolved(Stack::L4steam2020).version, Some(CubicVersion::V5_8));
        let t = vec!["version".to_string(), "5.5".to_string()];
        let e = parse(&mut Params::new("cubic", &t)).unwrap_err();
        assert!(e.contains("6.13"), "{e}");
        // cubic-sce: 5.4 on every profile (its own copy), 5.16 on request.
        let sce = |text: &str, stack: Stack| {
            let t: Vec<String> = text.split_whitespace().map(String::from).collect();
            crate::cc::sce::parse_cubic_sce(&mut Params::new("cubic-sce", &t)).unwrap().build(Stream::new(1, "t"), stack)
        };
        assert_eq!(exit_age(sce("", Stack::Linux)), old);
        assert_eq!(exit_age(sce("version 5.16", Stack::Sce2020)), now);
    }
}
