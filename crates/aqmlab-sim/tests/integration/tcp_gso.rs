//! Linux's multi-segment (GSO) sends in the dumbbell: what the bottleneck sees of them, and
//! what they change (DualPI2's step marking, pfifo competition). `tcp/sender/output.rs`
//! has the model; its unit tests check the per-send sizes at fixed pacing rates.

use crate::common::*;
use aqmlab_sim::sim::Summary;

/// Runs `sc` with the bottleneck recording arrivals; returns the summary, the bursts and
/// the bottleneck's final `step_marks` xstat (if it has one).
fn run_bursts(sc: &aqmlab_sim::Scenario) -> (Summary, Vec<(u32, u32)>, Option<f64>) {
    let (sim, log) = recorded(sc);
    let out = sim.run();
    assert_conserved(&out.summary);
    let b = bursts(&log.borrow());
    let step = out.series.get("bottleneck", "step_marks").and_then(|s| s.values.iter().rev().find(|v| v.is_finite()).copied());
    (out.summary, b, step)
}

/// A `rate` bottleneck with `qdisc` for `duration` and the flows `specs` (cc, rtt, ecn), each
/// with `gso`, on quiet hosts (no start spread, no jitter: the expectations below are derived
/// for an ideal path; host jitter may merge separate sends into one arrival).
fn gso_link(rate: &str, qdisc: &str, duration: &str, gso: bool, specs: &[(&str, &str, &str)]) -> Dumbbell {
    let flows = specs.iter().map(|&(cc, rtt, ecn)| Flow::new(cc).rtt(rtt).ecn(ecn).gso(gso));
    Dumbbell::new(rate, qdisc).duration(duration).flows(flows).quiet_host()
}

/// Bursts of `flow` other than its initial window (the first 10 segments leave unpaced
/// and unsplit, `tcp_update_skb_after_send` paces from the 10th segment on).
fn after_iw(b: &[(u32, u32)], flow: u32) -> Vec<u32> {
    b.iter().filter(|(f, _)| *f == flow).skip(1).map(|&(_, n)| n).collect()
}

/// The most common burst size, counted in packets.
fn mode(sizes: &[u32]) -> u32 {
    let mut h = vec![0u64; 65];
    for &n in sizes {
        h[n as usize] += n as u64;
    }
    (0..h.len()).max_by_key(|&n| (h[n], std::cmp::Reverse(n))).unwrap() as u32
}

/// What the bottleneck sees. Prague (generation D, `linux` profile) bounds its skbs at
/// max(`max_tso_burst`, 2), and `max_tso_burst` = (rate / MTU) >> 12 is 0-1 below
/// ~147 Mbit/s: so at 10 and 50 Mbit/s its data arrives in pairs (the pacing timer finds
/// room for 2, and `tcp_tso_should_defer` holds a lone free segment back until 2 fit),
/// never more than 2. Unpaced CUBIC at 50 Mbit/s sizes its skbs from its pacing rate,
/// 1.2 × cwnd × mss / srtt ≈ 1.2 × the delivery rate (50 Mbit/s × 1448/1514 of payload) =
/// 7.17 MB/s, i.e. `tcp_tso_autosize` = 7004 B / 1448 = 4 segments, and defers until they fit:
/// its most common burst is 4. GSO off: Prague sends single packets and CUBIC what each ACK
/// frees, 2 segments (delayed ACKs).
#[test]
fn the_bottleneck_sees_bursts_of_tso_segs_and_single_packets_without_gso() {
    let autosize = aqmlab_sim::tcp::sender::tso_autosize(1.2 * 50e6 / 8.0 * 1448.0 / 1514.0, 1448, aqmlab_sim::Time::from_millis(20), 2, true);
    assert_eq!(autosize, 4);
    for gso in [true, false] {
        for rate in ["10Mbit", "50Mbit"] {
            let (s, b, _) = run_bursts(&gso_link(rate, "dualpi2", "20s", gso, &[("prague", "20ms", "l4s")]).build());
            let sizes = after_iw(&b, 0);
            let pairs = sizes.iter().filter(|&&n| n == 2).count() as f64 * 2.0 / sizes.iter().sum::<u32>() as f64;
            eprintln!("prague {rate} dualpi2 gso {gso}: {:.2} Mbit/s, bursts {:?}, share in pairs {pairs:.3}", s.flows[0].goodput_mbps, burst_histogram(&b, 0));
            if gso {
                assert!(sizes.iter().all(|&n| n <= 2), "{rate}: a Prague burst above 2");
                assert_eq!(mode(&sizes), 2, "{rate}");
            } else {
                assert!(sizes.iter().all(|&n| n == 1), "{rate}: GSO off, a burst above 1");
            }
        }
        let (s, b, _) = run_bursts(&gso_link("50Mbit", "pfifo limit 1000", "20s", gso, &[("cubic", "20ms", "off")]).build());
        let sizes = after_iw(&b, 0);
        eprintln!("cubic 50Mbit pfifo gso {gso}: {:.2} Mbit/s, bursts {:?}", s.flows[0].goodput_mbps, burst_histogram(&b, 0));
        assert_eq!(mode(&sizes), if gso { autosize } else { 2 });
    }
}

/// DualPI2's step (1 ms of L sojourn, today's `min_qlen_step` 0) and Prague alone at
/// 10 Mbit/s, 20 ms. One 1514-byte packet takes 1.21 ms to serialise, so the second
/// packet of every back-to-back pair waits longer than the step behind the first: every
/// packet after the first of a burst must be CE-marked, whatever the queue held before.
/// Printed: throughput, step marks and CE marks with and without GSO.
#[test]
fn every_packet_behind_another_in_a_burst_is_step_marked_at_10_mbit() {
    for gso in [true, false] {
        let (s, b, step) = run_bursts(&gso_link("10Mbit", "dualpi2", "30s", gso, &[("prague", "20ms", "l4s")]).build());
        let behind: u64 = b.iter().map(|&(_, n)| n as u64 - 1).sum();
        let l = &s.bottleneck.queues[1];
        eprintln!(
            "prague alone, dualpi2 10 Mbit/s 20 ms, gso {gso}: {:.2} Mbit/s, packets {}, step marks {:?}, CE {}, packets behind another in a burst {behind}, L sojourn p50 {:?} p99 {:?} ms",
            s.flows[0].goodput_mbps, s.bottleneck.packets, step, s.bottleneck.ce_marks, l.sojourn_ms.p50, l.sojourn_ms.p99
        );
        assert!(step.unwrap() as u64 >= behind, "step marks {step:?} < {behind} packets queued behind their burst's first");
        if gso {
            assert!(behind * 3 > s.bottleneck.packets, "pairs: about half the packets are behind another");
        }
    }
}

/// The l4s-tests S1 pfifo row (tail drop, limit 1000, 50 Mbit/s, CUBIC vs Prague at
/// 20/20 ms, 180 s, D_SS over 60 s) with and without GSO, on the study's profile and on
/// today's. Issue 11: the model's Prague got 3-5 Mbit/s, the testbed's 8-12. Printed; the
/// test asserts only what the bursts imply: both flows deliver, the link is shared, and
/// Prague's arrivals are pairs with GSO on `linux`, mostly single packets on `l4steam-2020`
/// (its 2020 cap), single packets without GSO.
#[test]
fn pfifo_cubic_vs_prague_with_and_without_bursts() {
    for stack in ["l4steam-2020", "linux"] {
        for gso in [true, false] {
            let sc = gso_link("50Mbit", "pfifo limit 1000", "180s", gso, &[("cubic", "20ms", "rfc3168"), ("prague", "20ms", "l4s")])
                .stack(stack)
                .metrics(Metrics::new().steady_window("60s"))
                .build();
            let (s, b, _) = run_bursts(&sc);
            let (c, p) = (s.flows[0].steady_mbps.unwrap(), s.flows[1].steady_mbps.unwrap());
            let (hc, hp) = (burst_histogram(&b, 0), burst_histogram(&b, 1));
            eprintln!(
                "pfifo(1000) 50 Mbit/s 20/20 ms, stack {stack}, gso {gso}: cubic {c:.2}, prague {p:.2} Mbit/s (testbed prague 8-12); retransmits cubic {} prague {}; drops {}; bursts cubic {hc:?} prague {hp:?}",
                s.flows[0].retransmits, s.flows[1].retransmits, s.bottleneck.drops
            );
            assert!(c > 0.0 && p > 0.0 && c + p <= 50.0);
            let sizes = after_iw(&b, 1);
            // With GSO, generation D (`linux`) sends pairs (`Exactly(max(burst, 2))`); the
            // 2020 code (`l4steam-2020`) caps autosize at the burst, floor 1
            // (`AtMost(max_tso_burst)`), 1 at these rates: mostly single packets.
            match (gso, stack) {
                (true, "linux") => assert_eq!(mode(&sizes), 2),
                (true, _) => assert_eq!(mode(&sizes), 1),
                (false, _) => assert!(sizes.iter().all(|&n| n == 1)),
            }
        }
    }
}
