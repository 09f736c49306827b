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
use crate::params::{Args, Param};
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
        }
    }
}

impl CcConfig for CubicParams {
    fn name(&self) -> &'static str {
        CUBIC.name
    }
    fn build(&self, _rng: crate::rng::Stream, _stack: crate::profile::Stack) -> Box<dyn CongestionControl> {
        Box::new(Cubic::new(*self))
    }
}

/// `cubic [fast_convergence 0|1] [beta N] [bic_scale N] [tcp_friendliness 0|1] [hystart 0|1]
/// [hystart_detect N] [hystart_low_window N] [hystart_ack_delta_us N] [initial_ssthresh N]`:
/// the module parameters of `tcp_cubic.c`, by their Linux names and units.
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
    ],
    build: |a| Ok(Arc::new(CubicParams::from_args(a))),
};

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
    /// Minimum RTT sample in µs, 0 = none yet (`delay_min`).
    delay_min_us: u64,
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
#[derive(Clone, Copy, Debug, Default)]
struct Round {
    start_us: u64,
    end_seq: u32,
    last_ack_us: u64,
    curr_rtt_us: u64,
    sample_cnt: u8,
}

/// Linux CUBIC (`cubictcp`).
#[derive(Clone, Debug)]
pub struct Cubic {
    params: CubicParams,
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
    /// Minimum RTT CUBIC has seen (`delay_min`), zero before the first accepted sample.
    pub fn delay_min(&self) -> Time {
        Time::from_micros(self.ca.delay_min_us)
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
    fn hystart_reset(&mut self, tp: &TcpCcState) {
        let now = tp.now.as_micros();
        self.round = Round { start_us: now, end_seq: tp.snd_nxt, last_ack_us: now, curr_rtt_us: u64::MAX, sample_cnt: 0 };
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

            // Elapsed epoch time plus one delay_min (target one RTT ahead), in 2^-10 s.
            let elapsed_j = now_j.saturating_sub(epoch_start) + usecs_to_jiffies(ca.delay_min_us);
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

    /// Linux `hystart_update`: the ACK-train and delay-increase exits from slow start.
    fn hystart_update(&mut self, tp: &mut TcpCcState, delay_us: u64) {
        if seq_after(tp.snd_una, self.round.end_seq) {
            self.hystart_reset(tp);
        }
        let now = tp.now.as_micros();
        if self.params.hystart_detect & HYSTART_ACK_TRAIN != 0
            && (now as i64 - self.round.last_ack_us as i64) <= self.params.hystart_ack_delta_us as i64
        {
            self.round.last_ack_us = now;
            let mut threshold = self.ca.delay_min_us + self.hystart_ack_delay_us(tp);
            // Unpaced, the train of a full window arrives within about half an RTT.
            if !tp.paced {
                threshold >>= 1;
            }
            if now as i64 - self.round.start_us as i64 > threshold as i64 {
                self.ca.found = true;
                tp.ssthresh = tp.cwnd;
            }
        }
        if self.params.hystart_detect & HYSTART_DELAY != 0 {
            self.round.curr_rtt_us = self.round.curr_rtt_us.min(delay_us);
            if self.round.sample_cnt < HYSTART_MIN_SAMPLES {
                self.round.sample_cnt += 1;
            } else {
                let dm = self.ca.delay_min_us;
                let thresh = (dm >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
                if self.round.curr_rtt_us > dm + thresh {
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

    /// Linux `cubictcp_cong_avoid`: slow start, then +1 packet per `cnt` ACKed packets.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
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
        let delay_us = rtt.as_micros().max(1);
        if self.ca.delay_min_us == 0 || self.ca.delay_min_us > delay_us {
            self.ca.delay_min_us = delay_us;
        }
        if !self.ca.found && tp.in_slow_start() && self.params.hystart && tp.cwnd >= self.params.hystart_low_window {
            self.hystart_update(tp, delay_us);
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
                return Some((i, f.tp.now.as_micros() - f.cc.round.start_us, cwnd_before));
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
        assert_eq!(f.cc.round.curr_rtt_us, 113_000);
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
}
