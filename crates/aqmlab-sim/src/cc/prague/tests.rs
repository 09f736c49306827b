//! Unit tests of [`super`] (kept apart so that the model reads on its own).

use super::*;
use crate::cc::test_state;

const MS: u64 = 1_000_000;

/// A Prague flow out of slow start (ssthresh = cwnd), srtt `rtt_ms`, α = 1 and CE seen.
fn prague(params: PragueParams, cwnd: u32, rtt_ms: u64) -> (Prague, TcpCcState) {
    let mut tp = test_state(cwnd, u32::MAX);
    tp.srtt = Time(rtt_ms * MS);
    tp.min_rtt = tp.srtt;
    let mut p = Prague::new(params);
    p.init(&mut tp);
    tp.ssthresh = cwnd;
    (p, tp)
}

/// One ACK of `acked` packets of which `ce` were CE-marked, with a window of data kept
/// in flight (snd_nxt = snd_una + cwnd).
fn ack(p: &mut Prague, tp: &mut TcpCcState, acked: u32, ce: u32) {
    tp.snd_una += acked;
    tp.snd_nxt = tp.snd_una + tp.cwnd;
    deliver(p, tp, acked, ce);
}

/// The ACK that completes a round: everything sent so far is acknowledged.
fn round_ack(p: &mut Prague, tp: &mut TcpCcState, acked: u32, ce: u32) {
    tp.snd_una = tp.snd_nxt;
    tp.snd_nxt = tp.snd_una + tp.cwnd;
    deliver(p, tp, acked, ce);
}

fn deliver(p: &mut Prague, tp: &mut TcpCcState, acked: u32, ce: u32) {
    tp.delivered += acked as u64;
    tp.delivered_ce += ce as u64;
    let rs = RateSample { acked_sacked: acked, ece_delta: ce, ..Default::default() };
    assert!(p.cong_control(tp, &rs));
}

/// cwnd plus carry, in packets.
fn window(p: &Prague, tp: &TcpCcState) -> f64 {
    tp.cwnd as f64 + p.cwnd_carry() as f64 / ONE_CWND as f64
}

#[test]
fn alpha_is_an_ewma_of_the_ce_fraction_per_round_after_the_first_mark() {
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
    assert_eq!(p.alpha(), MAX_ALPHA);
    // Rounds without any CE: α is not updated before the first mark (saw_ce).
    for _ in 0..10 {
        round_ack(&mut p, &mut tp, 100, 0);
    }
    assert_eq!(p.alpha(), MAX_ALPHA);
    // F = 1/8 every round (rounds of 96 packets with 12 marks). The real closed form is
    // α_n = F + (1 − F)(15/16)^n; the upscaled fixed point tracks it to a few 2^-20.
    let f = 0.125;
    let mut n = 0;
    for _ in 0..120 {
        round_ack(&mut p, &mut tp, 96, 12);
        n += 1;
        let closed = f + (1.0 - f) * (15.0f64 / 16.0).powi(n);
        let got = p.alpha() as f64 / MAX_ALPHA as f64;
        assert!((got - closed).abs() < 1e-5, "round {n}: α {got} vs {closed}");
    }
}

#[test]
fn alpha_updates_once_per_round() {
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
    round_ack(&mut p, &mut tp, 100, 50);
    let a = p.alpha();
    assert!(a < MAX_ALPHA);
    // The update above started a new round ending at snd_nxt; ACKs inside it leave α.
    for _ in 0..19 {
        ack(&mut p, &mut tp, 5, 5);
        assert_eq!(p.alpha(), a);
    }
    // The ACK that passes the round's end updates it.
    ack(&mut p, &mut tp, 10, 10);
    assert!(p.alpha() > a);
}

#[test]
fn cwr_takes_alpha_half_of_cwnd_once_and_cwnd_steps_down_one_per_ack() {
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
    // α = 1 (initial): the carry loses cwnd/2 = 50 packets.
    tp.ca_state = CaState::Open;
    p.set_state(&mut tp, CaState::Cwr);
    tp.ca_state = CaState::Cwr;
    assert_eq!(p.cwnd_carry(), -50 * ONE_CWND);
    // ACKs of CE-marked packets do not grow; each one takes one packet off cwnd.
    for i in 1..=50 {
        ack(&mut p, &mut tp, 1, 1);
        assert_eq!(tp.cwnd, 100 - i);
        assert_eq!(tp.ssthresh, tp.cwnd, "a decrement sets ssthresh = cwnd");
    }
    ack(&mut p, &mut tp, 1, 1);
    assert_eq!(tp.cwnd, 50);
    // α = 0.25 exactly: cwnd 80 loses 80 · 0.125 = 10 packets.
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 80, 20);
    p.upscaled_alpha = (MAX_ALPHA / 4) << SHIFT_G;
    p.set_state(&mut tp, CaState::Cwr);
    assert_eq!(p.cwnd_carry(), -10 * ONE_CWND);
    // Rounded half up: α = 2^-20, cwnd 1 → 2^-21 packet → rounds to 1 unit.
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 1, 20);
    p.upscaled_alpha = 1 << SHIFT_G;
    p.set_state(&mut tp, CaState::Cwr);
    assert_eq!(p.cwnd_carry(), -1);
    // No CE, no CWR: a whole window of unmarked ACKs only grows.
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
    for _ in 0..100 {
        ack(&mut p, &mut tp, 1, 0);
    }
    assert!(tp.cwnd == 101 && p.cwnd_carry().abs() < 100, "cwnd {} carry {}", tp.cwnd, p.cwnd_carry());
}

#[test]
fn additive_increase_counts_only_unmarked_packets() {
    // A window of 100 ACKed packets of which 30 were marked: +0.7 packet.
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
    for i in 0..100 {
        ack(&mut p, &mut tp, 1, (i % 10 < 3) as u32);
    }
    let grown = window(&p, &tp) - 100.0;
    assert!((grown - 0.7).abs() < 1e-4, "grew {grown}");
    // Growth continues during CWR (no PRR), but not in a loss reduction.
    let (mut p, mut tp) = prague(PragueParams { rtt_scaling: 0, ..Default::default() }, 100, 20);
    p.set_state(&mut tp, CaState::Recovery);
    tp.ca_state = CaState::Recovery;
    let before = window(&p, &tp);
    for _ in 0..100 {
        ack(&mut p, &mut tp, 1, 0);
    }
    assert!((window(&p, &tp) - before).abs() < 1e-9);
    p.set_state(&mut tp, CaState::Open);
    tp.ca_state = CaState::Open;
    for _ in 0..50 {
        ack(&mut p, &mut tp, 1, 0);
    }
    assert!(window(&p, &tp) > before + 0.9);
}

#[test]
fn loss_halves_cwnd() {
    let (mut p, mut tp) = prague(PragueParams::default(), 120, 20);
    p.set_state(&mut tp, CaState::Recovery);
    tp.ca_state = CaState::Recovery;
    assert_eq!(p.cwnd_carry(), -60 * ONE_CWND);
    for _ in 0..80 {
        ack(&mut p, &mut tp, 1, 0);
    }
    assert_eq!(tp.cwnd, 60);
    assert_eq!(tp.ssthresh, 60);
    // An RTO (CA_EVENT_LOSS before the sender sets cwnd = in flight + 1) likewise, and
    // cwnd is floored at 2.
    let (mut p, mut tp) = prague(PragueParams::default(), 40, 20);
    p.cwnd_event(&mut tp, CaEvent::Loss);
    tp.cwnd = 1;
    ack(&mut p, &mut tp, 1, 0);
    assert_eq!(tp.cwnd, 2);
    assert_eq!(p.cwnd_carry(), 0);
}

/// Rate-mode RTT independence: per window, the increase is (srtt/target)² packets for
/// srtt < target, 1 otherwise — so cwnd/srtt grows by 1/target² packets/s² at any RTT
/// below the target: the rate growth of a 25 ms flow.
#[test]
fn rtt_scaling_closed_form_for_5_25_and_100_ms() {
    let cases = [(5u64, 0.04), (25, 1.0), (100, 1.0)];
    for (rtt_ms, per_rtt) in cases {
        for scaling in [true, false] {
            let params = PragueParams { rtt_scaling: if scaling { RTT_CONTROL_RATE } else { 0 }, ..Default::default() };
            let (mut p, mut tp) = prague(params, 200, rtt_ms);
            // Before the transition (500 rounds out of slow start) growth is unscaled.
            assert_eq!(p.ai_ack_increase(), ONE_CWND as u64);
            for _ in 0..500 {
                round_ack(&mut p, &mut tp, 1, 0);
            }
            tp.cwnd = 200;
            p.cwnd_cnt = 0;
            assert!(p.round() >= 500);
            let want = if scaling { per_rtt } else { 1.0 };
            let ai = p.ai_ack_increase() as f64 / ONE_CWND as f64;
            // srtt and target in 128 µs units: 5 ms = 39, 25 ms = 195 (39/195 = 0.2).
            assert!((ai - want).abs() < 1e-6, "{rtt_ms} ms scaling {scaling}: {ai} vs {want}");
            assert_eq!(p.is_rtt_indep(&tp), scaling);
            // One window of unmarked ACKs.
            for _ in 0..200 {
                ack(&mut p, &mut tp, 1, 0);
            }
            let grown = window(&p, &tp) - 200.0;
            assert!((grown - want).abs() < 2e-4, "{rtt_ms} ms scaling {scaling}: grew {grown} per RTT");
            if scaling {
                // Rate acceleration (packets/s per s) = growth per RTT / rtt².
                let accel = want / (rtt_ms as f64 / 1e3).powi(2);
                let expect = if rtt_ms < 25 { 1.0 / 0.025f64.powi(2) } else { 1.0 / (rtt_ms as f64 / 1e3).powi(2) };
                assert!((accel - expect).abs() / expect < 1e-9);
            }
        }
    }
}

#[test]
fn rtt_independent_flows_reduce_and_update_alpha_at_most_once_per_target() {
    let (mut p, mut tp) = prague(PragueParams::default(), 100, 5);
    p.round = 500;
    p.saw_ce = true;
    tp.now = Time::from_secs(1);
    tp.snd_una = tp.snd_nxt;
    assert!(p.is_rtt_indep(&tp));
    p.set_state(&mut tp, CaState::Cwr);
    let c = p.cwnd_carry();
    assert!(c < 0);
    // 20 ms later (< 25 ms target): a second CWR entry is ignored.
    tp.now = Time::from_millis(1020);
    p.set_state(&mut tp, CaState::Cwr);
    assert_eq!(p.cwnd_carry(), c);
    // 25 ms (195 · 128 µs = 24.96 ms) after the first, it applies.
    tp.now = Time::from_millis(1025);
    p.set_state(&mut tp, CaState::Cwr);
    assert!(p.cwnd_carry() < c);
    // α: a round has elapsed but not the target since the last update.
    p.alpha_stamp_us = 1_025_000;
    tp.now = Time::from_millis(1030);
    assert!(tp.snd_una >= p.next_seq);
    assert!(!p.should_update_ewma(&tp));
    tp.now = Time::from_millis(1050);
    assert!(p.should_update_ewma(&tp));
}

#[test]
fn pacing_is_mtu_times_window_over_srtt_doubled_in_slow_start() {
    let mut tp = test_state(100, u32::MAX);
    tp.srtt = Time(20 * MS);
    let mut p = Prague::new(PragueParams::default());
    p.init(&mut tp);
    assert!(p.needs_pacing() && p.has_cong_control());
    // Slow start (cwnd < ssthresh/2): 2 · 1500 B · 100 / 20 ms.
    assert!((p.pacing_rate(&tp).unwrap() - 2.0 * 1500.0 * 100.0 / 0.02).abs() < 1e-6);
    tp.ssthresh = 150;
    tp.packets_out = 120;
    ack(&mut p, &mut tp, 0, 0);
    assert!((p.pacing_rate(&tp).unwrap() - 1500.0 * 120.0 / 0.02).abs() < 1e-6);
    // 7.5 MB/s = 5000 packets/s: a 250 µs burst is 1.2 packets -> 1.
    assert_eq!(p.max_tso_burst(), 1);
    tp.cwnd = 2000;
    tp.srtt = Time(MS);
    ack(&mut p, &mut tp, 0, 0);
    // 2000 packets/ms = 2e6/s; >> 12 = 488 packets.
    assert_eq!(p.max_tso_burst(), 488);
}

#[test]
fn classic_ecn_detection_scores_rtt_variation_and_queue_depth() {
    // Steady 20 ms RTT: mdev -> 0, the score stays at 0 and α is untouched.
    let params = PragueParams { ecn_fallback: 1, rtt_scaling: 0, ..Default::default() };
    let (mut p, mut tp) = prague(params, 50, 20);
    p.ssthresh(&tp); // gains from ssthresh 50: g = 5 + 2 + 1 = 8
    for _ in 0..200 {
        p.pkts_acked(&mut tp, &AckSample { rtt: Some(Time(20 * MS)), ..Default::default() });
    }
    for _ in 0..50 {
        ack(&mut p, &mut tp, 50, 1);
    }
    assert_eq!(p.classic_ecn(), 0);
    // RTT samples alternating 20 and 26 ms (mean abs deviation ≈ 3 ms = 4 × 750 µs) and a
    // standing queue of ≈ 3 ms over min_rtt: + 0.5·log2(4) + 0.5·log2(1.5)... per round
    // on average, clamped to C_STICKY.
    let (mut p, mut tp) = prague(params, 50, 20);
    p.ssthresh(&tp);
    let mut rounds = 0;
    while p.classic_ecn() <= L_STICKY {
        for i in 0..50 {
            let r = if i % 2 == 0 { 20 } else { 26 };
            p.pkts_acked(&mut tp, &AckSample { rtt: Some(Time(r * MS)), ..Default::default() });
        }
        ack(&mut p, &mut tp, 50, 1);
        rounds += 1;
        assert!(rounds < 100, "score {}", p.classic_ecn());
    }
    // ≥ 1 per round once the estimator has converged: crossing 8 takes ~10 rounds.
    assert!((8..=30).contains(&rounds), "{rounds} rounds");
    for _ in 0..100 {
        for i in 0..50 {
            let r = if i % 2 == 0 { 20 } else { 26 };
            p.pkts_acked(&mut tp, &AckSample { rtt: Some(Time(r * MS)), ..Default::default() });
        }
        ack(&mut p, &mut tp, 50, 1);
    }
    assert_eq!(p.classic_ecn(), C_STICKY);
    // Fallback: with α ≈ 0.02 the reduction uses max(α, 0.625) -> cwnd·0.3125.
    p.upscaled_alpha = (MAX_ALPHA / 50) << SHIFT_G;
    p.cwnd_cnt = 0;
    tp.cwnd = 64;
    p.set_state(&mut tp, CaState::Cwr);
    assert_eq!(p.cwnd_carry(), -20 * ONE_CWND);
    // Detection only (mode 2): same score, no fallback.
    let (mut p2, tp2) = prague(PragueParams { ecn_fallback: 2, ..params }, 64, 20);
    p2.classic_ecn = C_STICKY;
    p2.upscaled_alpha = (MAX_ALPHA / 64) << SHIFT_G;
    p2.set_state(&mut tp2.clone(), CaState::Cwr);
    assert_eq!(p2.cwnd_carry(), -(ONE_CWND / 2));
}

#[test]
fn without_ecn_it_is_unpaced_reno() {
    let mut tp = test_state(100, 1000);
    tp.ecn = crate::packet::EcnMode::Off;
    tp.srtt = Time(20 * MS);
    let mut p = Prague::new(PragueParams::default());
    p.init(&mut tp);
    assert_eq!(p.name(), "prague-reno");
    assert!(!p.needs_pacing() && !p.has_cong_control());
    assert!(!p.cong_control(&mut tp, &RateSample::default()));
    assert_eq!(p.ssthresh(&tp), 50);
}

/// A flow of the given era in slow start (ssthresh infinite, no CE seen yet), cwnd
/// `cwnd`, srtt 20 ms, always cwnd-limited.
fn slow_start_flow(stack: Stack, cwnd: u32) -> (Prague, TcpCcState) {
    let mut tp = test_state(cwnd, u32::MAX);
    tp.srtt = Time(20 * MS);
    tp.min_rtt = tp.srtt;
    let mut p = Prague::new(PragueParams::for_stack(stack));
    p.init(&mut tp);
    (p, tp)
}

/// What the sender does on a loss (Linux `tcp_enter_recovery`): `tcp_init_cwnd_reduction`
/// stores `.ssthresh`, then `tcp_set_ca_state(Recovery)`.
fn enter_recovery(p: &mut Prague, tp: &mut TcpCcState) {
    tp.ssthresh = p.ssthresh(tp);
    p.set_state(tp, CaState::Recovery);
    tp.ca_state = CaState::Recovery;
}

/// Each profile's module-parameter defaults, as written in the era's tcp_prague.c
/// (b256daed and e741f5ac: `prague_rtt_scaling = RTT_CONTROL_NONE`, `prague_rtt_target =
/// 15 * USEC_PER_MSEC`, `DEFAULT_RTT_TRANSITION 100`, `prague_ecn_fallback` 0 and 1;
/// google/bbr@23cbf7e1: RATE, 25 ms, 500, 0).
#[test]
fn each_profile_takes_its_eras_defaults() {
    let want = [
        (Stack::Linux, RTT_CONTROL_RATE, 25, 500, 0, PragueEra::V06),
        (Stack::Sce2020, RTT_CONTROL_RATE, 25, 500, 0, PragueEra::V06),
        (Stack::L4steam2024, RTT_CONTROL_RATE, 25, 500, 0, PragueEra::V06),
        (Stack::L4steam2020, RTT_CONTROL_NONE, 15, 100, 0, PragueEra::V05Aug2020),
        (Stack::L4steam2020Apr, RTT_CONTROL_NONE, 15, 100, 1, PragueEra::V05Apr2020),
    ];
    for (stack, scaling, target_ms, transition, fallback, era) in want {
        let c = PragueConfig::default().resolve(stack);
        assert_eq!((c.rtt_scaling, c.rtt_target, c.rtt_transition, c.ecn_fallback, c.burst_shift, c.era),
            (scaling, Time::from_millis(target_ms), transition, fallback, 12, era), "{stack}");
    }
    assert_eq!(PragueParams::for_stack(Stack::Linux).rtt_scaling, PragueParams::default().rtt_scaling);
    // 15 ms in the kernel's 128 µs units: 15000 >> 7 = 117.
    assert_eq!(Prague::new(PragueParams::for_stack(Stack::L4steam2020)).rtt_target, 117);
}

/// With the 2020 defaults RTT independence never starts: after 1000 rounds out of slow
/// start at 5 ms the increase is still one packet per window (2^20), and a second CWR
/// 1 ms after the first still reduces (no 15 ms gate). On `linux` (RATE, 25 ms, 500) the
/// same flow is RTT-independent: (39/195)² of a packet (5 ms = 39, 25 ms = 195 units).
#[test]
fn rtt_independence_is_off_on_the_2020_profiles() {
    for (stack, indep) in [(Stack::L4steam2020, false), (Stack::L4steam2020Apr, false), (Stack::Linux, true)] {
        let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 100, 5);
        for _ in 0..1000 {
            tp.now = tp.now + Time(5 * MS);
            round_ack(&mut p, &mut tp, 1, 0);
        }
        // Once RTT-independent (linux) a new round also waits for the 25 ms target.
        assert!(p.round() >= 500, "{stack}: round {}", p.round());
        assert_eq!(p.is_rtt_indep(&tp), indep, "{stack}");
        let want = if indep { ((39u64 << 20) * 39 + 195 * 195 / 2) / (195 * 195) } else { ONE_CWND as u64 };
        assert_eq!(p.ai_ack_increase(), want, "{stack}");
        p.saw_ce = true;
        tp.now = Time::from_secs(10);
        p.set_state(&mut tp, CaState::Cwr);
        let c = p.cwnd_carry();
        assert!(c < 0);
        tp.now = Time::from_millis(10_001);
        p.set_state(&mut tp, CaState::Cwr);
        assert_eq!(p.cwnd_carry() < c, !indep, "{stack}: second CWR 1 ms later");
    }
}

/// An explicit module parameter wins over the profile's default; the others keep it.
#[test]
fn explicit_parameters_override_the_profile() {
    let cfg = |text: &str| -> PragueConfig {
        let tokens: Vec<String> = text.split_whitespace().map(String::from).collect();
        parse_config(&mut Params::new("prague", &tokens[1..])).unwrap()
    };
    assert_eq!(cfg("prague").resolve(Stack::L4steam2020).rtt_scaling, RTT_CONTROL_NONE);
    let r = cfg("prague rtt_scaling 1").resolve(Stack::L4steam2020);
    assert_eq!((r.rtt_scaling, r.rtt_target, r.rtt_transition, r.era), (1, Time::from_millis(15), 100, PragueEra::V05Aug2020));
    let r = cfg("prague classic_ecn_detection 0").resolve(Stack::L4steam2020Apr);
    assert_eq!((r.ecn_fallback, r.rtt_scaling, r.era), (0, RTT_CONTROL_NONE, PragueEra::V05Apr2020));
    let r = cfg("prague rtt_scaling 0 rtt_target 25ms").resolve(Stack::Linux);
    assert_eq!((r.rtt_scaling, r.rtt_target, r.rtt_transition), (0, Time::from_millis(25), 500));
    let r = cfg("prague rtt_transition 7 burst_shift 10").resolve(Stack::L4steam2020Apr);
    assert_eq!((r.rtt_transition, r.burst_shift, r.ecn_fallback), (7, 10, 1));
}

/// The v0.5 growth gate (b256daed/e741f5ac `prague_update_cwnd` ≈ lines 458-470): a flow
/// that is not cwnd-limited still grows while it paces internally and has queued data;
/// v0.6 does not; with an empty write queue neither does v0.5.
#[test]
fn v05_grows_when_pacing_limited_with_queued_data() {
    for (stack, queued, grows) in [
        (Stack::L4steam2020, true, true),
        (Stack::L4steam2020Apr, true, true),
        (Stack::L4steam2020, false, false),
        (Stack::Linux, true, false),
    ] {
        let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 50, 20);
        tp.paced = true;
        tp.is_cwnd_limited = false;
        tp.write_queue_empty = !queued;
        // 50 unmarked ACKs of one packet: +1 packet (50 × ⌊(2^20 + 25)/50⌋ = 50 × 20972 =
        // 1 048 600 ≥ 2^20) when the gate is open, nothing otherwise.
        for _ in 0..50 {
            ack(&mut p, &mut tp, 1, 0);
        }
        let want = if grows { (51, 50 * 20972 - ONE_CWND) } else { (50, 0) };
        assert_eq!((tp.cwnd, p.cwnd_carry()), want, "{stack} queued {queued}");
    }
}

/// Prague's first reduction after slow start (any era; here e741f5ac, whose `.ssthresh`
/// returns max(cwnd, ssthresh) = ∞ at this CWR entry, and b256daed, which returns ∞ too).
/// cwnd 40 in slow start; the first CE enters CWR with α = 1.0: carry −= (2^20·40·2^20 +
/// 2^20) >> 21 = 20 packets. Unmarked ACKs are then consumed by `tcp_slow_start` (cwnd +1
/// each, return before `adjust:`), so the carry waits; the next fully marked ACK (acked
/// − CE = 0) goes to `adjust:`: cwnd −1 and ssthresh = cwnd, which ends slow start.
#[test]
fn first_reduction_after_slow_start_waits_for_a_fully_marked_ack() {
    for stack in [Stack::L4steam2020Apr, Stack::L4steam2020] {
        let (mut p, mut tp) = slow_start_flow(stack, 40);
        ack(&mut p, &mut tp, 1, 1);
        assert_eq!((tp.cwnd, p.cwnd_carry()), (40, 0), "a CE-only ACK neither grows nor shrinks");
        tp.ssthresh = p.ssthresh(&tp);
        assert_eq!(tp.ssthresh, u32::MAX, "{stack}");
        p.set_state(&mut tp, CaState::Cwr);
        tp.ca_state = CaState::Cwr;
        assert_eq!(p.cwnd_carry(), -20 * ONE_CWND);
        for i in 1..=5 {
            ack(&mut p, &mut tp, 1, 0);
            assert_eq!((tp.cwnd, p.cwnd_carry()), (40 + i, -20 * ONE_CWND), "{stack}: slow start swallows ACK {i}");
        }
        ack(&mut p, &mut tp, 1, 1);
        assert_eq!((tp.cwnd, tp.ssthresh, p.cwnd_carry()), (44, 44, -19 * ONE_CWND), "{stack}");
        // Out of slow start: every ACK now adds ⌊(2^20 + 22)/44⌋ = 23 831 and takes one
        // packet off while the carry is ≤ −1 packet.
        ack(&mut p, &mut tp, 1, 0);
        assert_eq!((tp.cwnd, p.cwnd_carry()), (43, -18 * ONE_CWND + 23_831), "{stack}");
    }
}

/// A loss before any CE: ssthresh is still infinite. b256daed (`in_loss`): the carry's
/// −cwnd/2 is applied one packet per ACK, each decrement setting ssthresh = cwnd. e741f5ac
/// (no `in_loss`, ssthresh = max(cwnd, ∞) = ∞): slow start goes on and swallows every
/// ACK, the halving is never applied — the loss is ignored (sce-l4s-ect1's "ignoring
/// packet loss").
#[test]
fn a_loss_before_any_ce_is_ignored_by_e741f5ac_but_not_by_b256daed() {
    let (mut p, mut tp) = slow_start_flow(Stack::L4steam2020Apr, 20);
    enter_recovery(&mut p, &mut tp);
    assert_eq!(tp.ssthresh, u32::MAX);
    assert_eq!(p.cwnd_carry(), -10 * ONE_CWND);
    for i in 1..=30 {
        ack(&mut p, &mut tp, 1, 0);
        assert_eq!((tp.cwnd, p.cwnd_carry()), (20 + i, -10 * ONE_CWND));
    }
    // Recovery ends: no Open hook, nothing changes; slow start continues.
    p.set_state(&mut tp, CaState::Open);
    tp.ca_state = CaState::Open;
    ack(&mut p, &mut tp, 1, 0);
    assert_eq!((tp.cwnd, tp.ssthresh, p.cwnd_carry()), (51, u32::MAX, -10 * ONE_CWND));

    let (mut p, mut tp) = slow_start_flow(Stack::L4steam2020, 20);
    enter_recovery(&mut p, &mut tp);
    assert_eq!((tp.ssthresh, p.cwnd_carry()), (u32::MAX, -10 * ONE_CWND));
    for i in 1..=10 {
        ack(&mut p, &mut tp, 1, 0);
        assert_eq!((tp.cwnd, tp.ssthresh), (20 - i, 20 - i));
    }
    assert_eq!(p.cwnd_carry(), 0);
    // in_loss: no growth until Open.
    for _ in 0..30 {
        ack(&mut p, &mut tp, 1, 0);
    }
    assert_eq!((tp.cwnd, p.cwnd_carry()), (10, 0));
    p.set_state(&mut tp, CaState::Open);
    tp.ca_state = CaState::Open;
    ack(&mut p, &mut tp, 1, 0);
    // ⌊(2^20 + 5)/10⌋ = 104 858.
    assert_eq!(p.cwnd_carry(), 104_858);
}

/// A loss in congestion avoidance. e741f5ac: `.ssthresh` = max(cwnd 120, ssthresh 100) =
/// 120 (b256daed: 100); both take 60 packets off the carry; e741f5ac keeps adding
/// ⌊(2^20 + c/2)/c⌋ per unmarked ACK during Recovery (c = cwnd before that ACK's
/// decrement), b256daed adds nothing.
#[test]
fn e741f5ac_keeps_growing_in_recovery_and_returns_max_cwnd_ssthresh() {
    for (stack, ss) in [(Stack::L4steam2020Apr, 120), (Stack::L4steam2020, 100)] {
        let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 120, 20);
        tp.ssthresh = 100;
        enter_recovery(&mut p, &mut tp);
        assert_eq!((tp.ssthresh, p.cwnd_carry()), (ss, -60 * ONE_CWND), "{stack}");
        // cwnd ≥ ssthresh: congestion avoidance; 10 ACKs take 10 packets off.
        for _ in 0..10 {
            ack(&mut p, &mut tp, 1, 0);
        }
        let grown: i64 = if stack == Stack::L4steam2020Apr { (111..=120).map(|c: i64| (ONE_CWND + c / 2) / c).sum() } else { 0 };
        assert_eq!((tp.cwnd, tp.ssthresh, p.cwnd_carry()), (110, 110, -50 * ONE_CWND + grown), "{stack}");
    }
}

/// The GSO/TSO hook per era, from `max_tso_burst` = max(1, (rate/MTU) >> 12): v0.5
/// `.max_tso_segs` caps autosize (may be 1), v0.6 `.tso_segs` replaces it with
/// max(burst, 2); the Reno fallback has none.
#[test]
fn tso_segs_per_era() {
    for (stack, low, high) in [
        (Stack::L4steam2020, TsoSegs::AtMost(1), TsoSegs::AtMost(488)),
        (Stack::L4steam2020Apr, TsoSegs::AtMost(1), TsoSegs::AtMost(488)),
        (Stack::Linux, TsoSegs::Exactly(2), TsoSegs::Exactly(488)),
        (Stack::L4steam2024, TsoSegs::Exactly(2), TsoSegs::Exactly(488)),
    ] {
        let (mut p, mut tp) = prague(PragueParams::for_stack(stack), 100, 20);
        tp.ssthresh = 150;
        tp.packets_out = 120;
        // 1500 B · 120 / 20 ms = 9 MB/s = 6000 packets/s; >> 12 = 1.
        ack(&mut p, &mut tp, 0, 0);
        assert_eq!(p.tso_segs(&tp), Some(low), "{stack}");
        // 2000 packets per 1 ms = 2e6 packets/s; >> 12 = 488.
        tp.cwnd = 2000;
        tp.srtt = Time(MS);
        ack(&mut p, &mut tp, 0, 0);
        assert_eq!(p.tso_segs(&tp), Some(high), "{stack}");
    }
    let mut tp = test_state(10, u32::MAX);
    tp.ecn = crate::packet::EcnMode::Off;
    let mut p = Prague::new(PragueParams::for_stack(Stack::L4steam2020));
    p.init(&mut tp);
    assert_eq!(p.tso_segs(&tp), None);
}

#[test]
fn parses_module_parameters() {
    let spec = crate::cc::CcSpec::parse("prague rtt_target 10ms classic_ecn_detection 1 rtt_scaling 2").unwrap();
    assert_eq!(spec.config().name(), "prague");
    assert!(crate::cc::CcSpec::parse("prague rtt_scaling 4").is_err());
    assert!(crate::cc::CcSpec::parse("prague classic_ecn_detection 3").is_err());
    assert!(crate::cc::CcSpec::parse("prague alpha 1").is_err());
    // rtt_target 0 turns RTT independence off.
    let spec = crate::cc::CcSpec::parse("prague rtt_target 0ms").unwrap();
    let mut cc = spec.config().build(crate::rng::Stream::new(1, "test"), Default::default());
    let mut tp = test_state(10, u32::MAX);
    tp.srtt = Time(5 * MS);
    cc.init(&mut tp);
    assert_eq!(cc.name(), "prague");
}
