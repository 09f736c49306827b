//! Unit tests of [`super`] (kept apart so that the model reads on its own).

use super::*;
use crate::cc::{test_state, Cc};

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

/// ⌊∛a⌋ by bisection: the reference `cube_root` is compared with.
fn cube_root_by_bisection(a: u128) -> u64 {
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

/// The floating-point guess corrected in integers gives bisection's exact floor: every value
/// below 2^17, each perfect cube and its neighbours from 1 to the largest root in `u128`
/// (about 2^42.7) in steps of about 0.1 %, pseudo-random values of every bit length, and
/// the largest `u128`.
#[test]
fn cube_root_equals_bisection() {
    let check = |a: u128| assert_eq!(cube_root(a), cube_root_by_bisection(a), "cbrt({a})");
    for a in 0..1u128 << 17 {
        check(a);
    }
    let mut n = 1u128;
    while let Some(c) = n.checked_mul(n).and_then(|x| x.checked_mul(n)) {
        check(c - 1);
        check(c);
        check(c.saturating_add(1));
        n += n / 1000 + 1;
    }
    let mut x = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834u128;
    for bits in 1..=128u32 {
        for _ in 0..200 {
            x = x.wrapping_mul(0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645).wrapping_add(0x5851_f42d_4c95_7f2d_1405_7b7e_f767_814f);
            check(if bits == 128 { x } else { x & ((1u128 << bits) - 1) });
        }
    }
    check(u128::MAX);
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
    let exit_age = |mut cc: Cc| {
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
    let of = |v: CubicVersion| exit_age(Cc::Cubic(Cubic::new(CubicParams { version: Some(v), ..CubicParams::default() })));
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

/// What an ACK in congestion avoidance reads (the epoch, the version, the scales, the
/// parameters' flags) lies in the first two cache lines of an aligned `Cubic`.
#[test]
fn an_acks_cubic_state_lies_in_two_cache_lines() {
    use std::mem::{align_of, offset_of};
    assert_eq!(align_of::<Cubic>(), 64);
    assert!(offset_of!(Cubic, cube_factor) + 8 <= 128);
    assert!(offset_of!(Cubic, version) < 128);
    let params = offset_of!(Cubic, params);
    for flag in [offset_of!(CubicParams, fast_convergence), offset_of!(CubicParams, tcp_friendliness), offset_of!(CubicParams, hystart)] {
        assert!(params + flag < 128);
    }
}

