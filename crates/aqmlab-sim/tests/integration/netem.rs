//! netem (sch_netem.c): jitter statistics, correlation, reordering, limit, loss and slotted
//! release, driven directly with synthetic arrivals, and through scenarios.

use crate::common;

use aqmlab_sim::event::EventQueue;
use aqmlab_sim::path::ElementCtx;
use aqmlab_sim::packet::{Direction, Kind, Packet};
use aqmlab_sim::path::netem::{Crandom, Netem, NetemConfig};
use aqmlab_sim::rng::Stream;
use aqmlab_sim::{Scenario, Time};

/// One release: when, which arrival, and how many packets netem still held afterwards.
struct Release {
    at: Time,
    seq: u32,
    held_after: usize,
}

/// Feeds `n` packets of `len` bytes spaced `spacing` apart (from t = 0) into a netem and runs
/// its wake-ups until it is empty. Arrivals at the same instant as a wake-up come first.
fn drive(cfg: &str, n: u32, spacing: Time, len: u32, seed: u64) -> (Vec<Release>, Netem) {
    let mut netem = Netem::new(NetemConfig::parse(cfg).unwrap(), Stream::new(seed, "netem/test"));
    let mut events = EventQueue::default();
    let mut out = Vec::new();
    let mut got = Vec::new();
    let mut next = 0u32;
    loop {
        let arrival = (next < n).then(|| Time(spacing.0 * next as u64));
        let wake = events.peek_time();
        let now = match (arrival, wake) {
            (None, None) => break,
            (Some(a), Some(w)) => a.min(w),
            (a, w) => a.or(w).unwrap(),
        };
        let mut ctx = ElementCtx { id: 0, now, events: &mut events, out: &mut out };
        if arrival == Some(now) {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, len);
            p.tcp.seq = next;
            netem.receive(p, &mut ctx);
            next += 1;
        } else {
            ctx.events.pop();
            netem.wake(&mut ctx);
        }
        let held = netem.held();
        got.extend(out.drain(..).map(|p| Release { at: now, seq: p.tcp.seq, held_after: held }));
    }
    (got, netem)
}

/// Per-packet delays (release − arrival) in ms, in arrival order.
fn delays_ms(r: &[Release], spacing: Time) -> Vec<f64> {
    let mut d = vec![0.0; r.len()];
    for x in r {
        d[x.seq as usize] = (x.at - Time(spacing.0 * x.seq as u64)).as_millis_f64();
    }
    d
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    (m, x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0))
}

fn lag1_autocorrelation(x: &[f64]) -> f64 {
    let (m, v) = mean_var(x);
    let c: f64 = x.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>() / (x.len() - 1) as f64;
    c / v
}

/// Adjacent arrivals released in the opposite order.
fn inversions(r: &[Release]) -> usize {
    let mut pos = vec![0usize; r.len()];
    for (i, x) in r.iter().enumerate() {
        pos[x.seq as usize] = i;
    }
    pos.windows(2).filter(|w| w[1] < w[0]).count()
}

#[test]
fn uniform_jitter_has_the_configured_mean_and_spread() {
    // Packets 20 ms apart: wider than the 10 ms jitter range, so none is overtaken.
    let spacing = Time::from_millis(20);
    let (r, _) = drive("delay 10ms 5ms", 50_000, spacing, 100, 1);
    let d = delays_ms(&r, spacing);
    let (mean, var) = mean_var(&d);
    let (min, max) = d.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    // tabledist without a table: uniform on [mu − sigma, mu + sigma), variance (2·5 ms)²/12.
    let want_var = 10.0f64.powi(2) / 12.0;
    println!("delay 10ms 5ms: mean {mean:.4} ms, var {var:.4} ms² (uniform {want_var:.4}), min {min:.4}, max {max:.4}");
    assert!((mean - 10.0).abs() < 0.02 * 10.0, "{mean}");
    assert!((var - want_var).abs() < 0.03 * want_var, "{var}");
    assert!((5.0..5.01).contains(&min) && max < 15.0 && max > 14.99, "{min} {max}");
    assert_eq!(inversions(&r), 0);
}

#[test]
fn normal_table_gives_the_configured_deviation() {
    let spacing = Time::from_millis(50);
    let (r, _) = drive("delay 20ms 5ms distribution normal", 40_000, spacing, 100, 2);
    let d = delays_ms(&r, spacing);
    let (mean, var) = mean_var(&d);
    let within_1sd = d.iter().filter(|&&x| (x - 20.0).abs() < 5.0).count() as f64 / d.len() as f64;
    println!("delay 20ms 5ms normal: mean {mean:.4} ms, sd {:.4} ms, within 1 sd {within_1sd:.4}", var.sqrt());
    assert!((mean - 20.0).abs() < 0.1, "{mean}");
    assert!((var.sqrt() - 5.0).abs() < 0.1, "{}", var.sqrt());
    assert!((within_1sd - 0.6827).abs() < 0.01, "{within_1sd}");
}

#[test]
fn get_crandom_blend_has_lag1_correlation_rho_but_the_jitter_modulo_hides_it() {
    // The blend is an AR(1) process with coefficient r = (rho + 1)/2^32: lag-1 autocorrelation
    // r and variance (1 − r)/(1 + r) of the uniform's.
    let n = 200_000;
    for pct in [0.0, 10.0, 50.0] {
        let rho = (pct / 100.0 * u32::MAX as f64).round() as u32;
        let r = if rho == 0 { 0.0 } else { (rho as f64 + 1.0) / 4_294_967_296.0 };
        let mut rng = Stream::new(3, "crandom");
        let mut c = Crandom::new(rho, &mut rng);
        let x: Vec<f64> = (0..n).map(|_| c.next(&mut rng) as f64 / 4_294_967_296.0).collect();
        let (_, var) = mean_var(&x);
        let acf = lag1_autocorrelation(&x);
        let want_var = (1.0 - r) / (1.0 + r) / 12.0;
        println!("crandom {pct}%: lag-1 acf {acf:.4} (expected {r:.4}), var {var:.5} (expected {want_var:.5})");
        assert!((acf - r).abs() < 0.01, "{pct}%: {acf}");
        assert!((var - want_var).abs() < 0.02 * want_var, "{pct}%: {var}");
    }
    // tabledist takes the blended value modulo 2·sigma (10^7 ns here); consecutive values
    // differ by (1 − r)·U·2^32, hundreds of periods, so the delays come out uncorrelated:
    // expected lag-1 autocorrelation ≈ 2σ/((1 − r)·2^32) ≈ 0.003, for 0 % as for 10 %.
    let spacing = Time::from_millis(20);
    for cfg in ["delay 10ms 5ms", "delay 10ms 5ms 10%"] {
        let (r, _) = drive(cfg, 50_000, spacing, 100, 4);
        let d = delays_ms(&r, spacing);
        let acf = lag1_autocorrelation(&d);
        let (mean, var) = mean_var(&d);
        println!("{cfg}: delay lag-1 acf {acf:.4}, mean {mean:.4} ms, var {var:.4} ms²");
        assert!(acf.abs() < 0.015, "{cfg}: {acf}");
        assert!((var - 100.0 / 12.0).abs() < 0.03 * 100.0 / 12.0, "{cfg}: {var}");
    }
}

#[test]
fn jitter_wider_than_the_spacing_reorders() {
    // Packets 1 ms apart, delays uniform over 10 ms: a packet overtakes its predecessor when
    // D[i] − D[i+1] > 1 ms, probability (1 − 1/10)²/2 = 0.405.
    let (r, _) = drive("delay 10ms 5ms", 40_000, Time::from_millis(1), 1514, 5);
    let frac = inversions(&r) as f64 / (r.len() - 1) as f64;
    println!("1 ms spacing, 10 ms jitter range: adjacent inversions {frac:.4} (expected 0.405)");
    assert!((frac - 0.405).abs() < 0.01, "{frac}");
    // Jitter range (10 ms) narrower than the spacing (11 ms): no reordering.
    let (r, _) = drive("delay 10ms 5ms", 10_000, Time::from_millis(11), 1514, 5);
    assert_eq!(inversions(&r), 0);
    // No jitter: packets arriving together leave together, in arrival order.
    let (r, _) = drive("delay 10ms", 1000, Time::ZERO, 1514, 5);
    assert!(r.iter().enumerate().all(|(i, x)| x.seq == i as u32 && x.at == Time::from_millis(10)));
}

#[test]
fn limit_drops_arrivals_beyond_it() {
    let (r, netem) = drive("delay 100ms limit 10", 25, Time::ZERO, 1514, 6);
    assert_eq!(r.len(), 10);
    assert_eq!((netem.stats.limit_drops, netem.drops(), netem.held()), (15, 15, 0));
    // The default limit is tc's 1000 packets.
    let (r, netem) = drive("delay 1s", 1200, Time::from_micros(10), 1514, 6);
    assert_eq!((r.len(), netem.drops()), (1000, 200));
}

#[test]
fn random_loss_drops_the_configured_fraction() {
    let n = 200_000;
    let (r, netem) = drive("loss random 10%", n, Time::from_micros(100), 1514, 7);
    let frac = netem.stats.loss_drops as f64 / n as f64;
    println!("loss 10%: dropped {frac:.4}");
    assert!((frac - 0.10).abs() < 0.003, "{frac}");
    assert_eq!(r.len() as u64 + netem.drops(), n as u64);
    // Without delay or slot, survivors leave at once and in order.
    assert!(r.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[test]
fn slots_release_batches_of_at_most_16_after_uniform_gaps() {
    // 50 Mbit/s of 1514-byte frames: one every 242.24 us.
    let spacing = Time(242_240);
    let (r, netem) = drive("delay 200us slot 800us 5ms packets 16", 80_000, spacing, 1514, 8);
    assert_eq!((r.len(), netem.drops()), (80_000, 0));
    // Group releases into batches by instant.
    let mut batches: Vec<(Time, usize, usize)> = Vec::new();
    for x in &r {
        match batches.last_mut() {
            Some(b) if b.0 == x.at => {
                b.1 += 1;
                b.2 = x.held_after;
            }
            _ => batches.push((x.at, 1, x.held_after)),
        }
    }
    let largest = batches.iter().map(|b| b.1).max().unwrap();
    let full = batches.iter().filter(|b| b.1 == 16).count();
    // After a batch that left packets behind, the next slot was drawn at the batch instant
    // (get_slot_next on budget exhaustion, or because the head is due after slot_next), so the
    // gap is exactly U(800us, 5ms). After a batch that emptied netem, the slot is drawn when
    // the next packet arrives, up to one spacing later.
    let mut exact: Vec<f64> = batches.windows(2).filter(|w| w[0].2 > 0).map(|w| (w[1].0 - w[0].0).as_millis_f64()).collect();
    let all: Vec<f64> = batches.windows(2).map(|w| (w[1].0 - w[0].0).as_millis_f64()).collect();
    exact.sort_by(f64::total_cmp);
    let (mean, _) = mean_var(&exact);
    let n = exact.len() as f64;
    // Kolmogorov-Smirnov distance to U(0.8, 5).
    let ks = exact.iter().enumerate().map(|(i, &g)| {
        let f = (g - 0.8) / 4.2;
        (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
    });
    let ks = ks.fold(0.0, f64::max);
    let (amin, amax) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    println!(
        "slot 800us 5ms packets 16: {} batches, largest {largest}, {full} full; {} exact gaps: mean {mean:.4} ms, min {:.4}, max {:.4}, KS {ks:.4} (1% critical {:.4}); all gaps min {amin:.4} max {amax:.4}",
        batches.len(),
        exact.len(),
        exact[0],
        exact[exact.len() - 1],
        1.63 / n.sqrt()
    );
    assert_eq!(largest, 16);
    assert!(full > 100, "{full}");
    assert!(exact.len() > 3000);
    assert!(exact[0] >= 0.8 && exact[exact.len() - 1] < 5.0);
    assert!((mean - 2.9).abs() < 0.02 * 2.9, "{mean}");
    assert!(ks < 1.63 / n.sqrt(), "{ks}");
    assert!(amin >= 0.8 && amax < 5.0 + spacing.as_millis_f64(), "{amin} {amax}");
}

#[test]
fn slot_byte_budget_closes_the_slot() {
    // 3000-byte budget: the second 1514-byte frame overdraws it (bytes_left ≤ 0), so slots
    // carry two frames; 20 frames arriving together leave in 10 batches.
    let (r, _) = drive("slot 1ms 2ms bytes 3000", 20, Time::ZERO, 1514, 9);
    let mut times: Vec<Time> = r.iter().map(|x| x.at).collect();
    times.dedup();
    assert_eq!(times.len(), 10);
    assert_eq!(times[0], Time::ZERO, "the first slot is open from configuration time");
}

fn probe_scenario(netem: &str) -> String {
    format!("duration = \"60s\"\n[bottleneck]\nrate = \"100Mbit\"\n[[probes]]\nrtt = \"20ms\"\ninterval = \"50ms\"\nnetem = \"{netem}\"\n")
}

#[test]
fn a_probe_through_netem_measures_its_jitter() {
    let s = common::run(&common::scenario(&probe_scenario("delay 10ms 5ms")));
    let up = s.probes[0].owd_up_ms.as_ref().expect("irtt measures one-way delays");
    // One way: 10 ms base + 10 ms ± 5 ms uniform + 102 B at 100 Mbit/s (8 us).
    let (mean, p50, p95, max) = (up.mean.unwrap(), up.p50.unwrap(), up.p95.unwrap(), up.max.unwrap());
    println!("probe owd_up: mean {mean:.3} p50 {p50:.3} p95 {p95:.3} max {max:.3} ms");
    assert!((mean - 20.0).abs() < 0.02 * 20.0, "{mean}");
    assert!((p50 - 20.0).abs() < 0.3 && (p95 - 24.5).abs() < 0.3, "{p50} {p95}");
    assert!(max < 25.1 && up.p99.unwrap() > 24.5);
    let rtt = &s.probes[0].rtt_ms;
    assert!(rtt.max.unwrap() < 50.1 && rtt.max.unwrap() > 45.0, "{:?}", rtt.max);
}

#[test]
fn one_tcp_flow_through_a_bursty_slot_path() {
    // sce-l4s-ect1 S5: child netem on both directions ahead of the AQM.
    let sc = common::scenario(
        "duration = \"15s\"\n[bottleneck]\nrate = \"50Mbit\"\nqdisc = \"fq_codel\"\n\
         netem = \"delay 200us slot 800us 10ms packets 42 limit 512\"\n\
         [[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n[[probes]]\nrtt = \"20ms\"\ninterval = \"20ms\"\n",
    );
    let s = common::run(&sc);
    let f = &s.flows[0];
    let rtt = &s.probes[0].rtt_ms;
    println!(
        "slot 800us 10ms packets 42: goodput {:.2} Mbit/s, probe RTT p50 {:.2} p99 {:.2} ms, retransmits {}, packets {:?}",
        f.goodput_mbps,
        rtt.p50.unwrap(),
        rtt.p99.unwrap(),
        f.retransmits,
        s.packets
    );
    assert!(f.goodput_mbps > 30.0, "{}", f.goodput_mbps);
    // Each direction adds 0.2 ms plus a wait for the next slot (0.8..10 ms after the last).
    assert!(rtt.p50.unwrap() > 21.0 && rtt.p50.unwrap() < 45.0, "{rtt:?}");
}

#[test]
fn one_tcp_flow_with_per_flow_jitter() {
    // sce-l4s-ect1 S6: correlated jitter on the flow's path, both directions.
    let sc = common::scenario(
        "duration = \"15s\"\n[bottleneck]\nrate = \"50Mbit\"\nqdisc = \"fq_codel\"\n\
         [[flows]]\ncc = \"cubic\"\nrtt = \"80ms\"\nnetem = \"delay 2ms 1ms 10%\"\n",
    );
    let s = common::run(&sc);
    let f = &s.flows[0];
    println!("delay 2ms 1ms 10%: goodput {:.2} Mbit/s, retransmits {}, rtt {} ms, packets {:?}", f.goodput_mbps, f.retransmits, f.rtt_ms, s.packets);
    // ±1 ms of jitter on 0.24 ms packet spacing reorders most segments. As Linux, the sender
    // tolerates it: RACK waits min_rtt/4 = 20 ms once reordering has been seen, and
    // tp->reordering rises (tests/tcp_reordering.rs), so only CoDel's drops cost recoveries
    // (with DupThresh 3 and no undo the flow got about 1.5 Mbit/s).
    assert!(f.goodput_mbps > 30.0, "{f:?}");
}

#[test]
fn netem_drops_count_in_the_conservation_check() {
    let sc = common::scenario(
        "duration = \"5s\"\n[bottleneck]\nrate = \"20Mbit\"\nnetem = \"loss 2%\"\n[[flows]]\ncc = \"reno\"\nrtt = \"20ms\"\n",
    );
    let s = common::run(&sc);
    println!("loss 2%: {:?}, bottleneck drops {}", s.packets, s.bottleneck.drops);
    assert!(s.packets.dropped > s.bottleneck.drops, "netem's losses are counted");
}

#[test]
fn bad_netem_options_name_the_key() {
    let text = "duration = \"5s\"\n[bottleneck]\nrate = \"20Mbit\"\nnetem = \"delay 10ms reorder 5%\"\n[[flows]]\ncc = \"reno\"\nrtt = \"20ms\"\n";
    let e = Scenario::from_toml(text, &[]).unwrap_err().to_string();
    assert!(e.starts_with("line 4: bottleneck.netem: netem: 'reorder' is not modelled"), "{e}");
    let e = Scenario::from_toml(&probe_scenario("delay 5ms 1ms distribution gamma"), &[]).unwrap_err().to_string();
    assert!(e.contains("probes[0].netem") && e.contains("unknown distribution 'gamma'"), "{e}");
    let e = Scenario::from_toml(&text.replace("netem = \"delay 10ms reorder 5%\"\n", "").replace("rtt = \"20ms\"\n", "rtt = \"20ms\"\nnetem = \"slot\"\n"), &[]).unwrap_err().to_string();
    assert!(e.contains("flows[0].netem") && e.contains("slot needs"), "{e}");
}
