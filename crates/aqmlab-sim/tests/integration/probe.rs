//! The latency probe measures the path: base RTT plus serialisation when idle, the queue when
//! bulk flows fill it. The runs are on quiet hosts (`[host]` without timing noise): the
//! expectations are exact times of an ideal path.

use crate::common::{Dumbbell, Flow, Metrics, Probe, Return, Upstream};
use aqmlab_sim::Scenario;

#[test]
fn an_idle_path_gives_base_rtt_plus_serialisation() {
    let s = Dumbbell::link("10Mbit").duration("2s").probe(Probe::new().rtt("30ms").interval("10ms").size(125).ecn("ect1")).quiet_host().run();
    let p = &s.probes[0];
    assert_eq!(p.sent, 200);
    // Replies to the requests sent at 1970, 1980 and 1990 ms would arrive after 2 s.
    assert_eq!(p.received, 197);
    // 125 B at 10 Mbit/s = 100 us on each of the two links.
    let rtt = p.rtt_ms.max.unwrap();
    assert!((rtt - 30.2).abs() < 1e-6 && (p.rtt_ms.p50.unwrap() - 30.2).abs() < 0.2, "{rtt}");
    assert!((p.owd_up_ms.as_ref().unwrap().max.unwrap() - 15.1).abs() < 1e-6);
    assert!((p.owd_down_ms.as_ref().unwrap().max.unwrap() - 15.1).abs() < 1e-6);
}

/// Milliseconds from the summary as whole nanoseconds.
fn ns(ms: Option<f64>) -> u64 {
    (ms.unwrap() * 1e6).round() as u64
}

/// irtt and ping on an idle path with three links of different rates (20 Mbit/s upstream,
/// 10 Mbit/s bottleneck, 5 Mbit/s return): every round trip is the base RTT plus the
/// serialisation of the request on the two forward links and of the reply on the return
/// link, to the nanosecond.
#[test]
fn irtt_and_ping_on_an_idle_path_measure_base_rtt_plus_serialisation_exactly() {
    let s = Dumbbell::link("10Mbit")
        .duration("2s")
        .metrics(Metrics::new().step("100ms"))
        .upstream(Upstream::new("20Mbit"))
        .return_path(Return::new().rate("5Mbit"))
        .probe(Probe::new().name("irtt").rtt("30ms"))
        .probe(Probe::new().name("ping").kind("ping").rtt("30ms").start("5ms"))
        .quiet_host()
        .run();
    // Bits on the wire over each link's rate, in ns: 8 x size x 1e9 / rate.
    let serialisation = |size: u64| [20_000_000u64, 10_000_000, 5_000_000].iter().map(|r| 8 * size * 1_000_000_000 / r).sum::<u64>();
    for (p, size, interval_ms) in [(&s.probes[0], 102, 10), (&s.probes[1], 98, 100)] {
        let expect = 30_000_000 + serialisation(size);
        let r = &p.rtt_ms;
        println!("{} ({}): {} sent, {} received, RTT {:?} ms, induced {:?} ms", p.name, p.kind, p.sent, p.received, r.max, p.induced_ms.max);
        assert_eq!((ns(r.p50), ns(r.p99), ns(r.max), ns(r.mean)), (expect, expect, expect, expect), "{}", p.name);
        assert_eq!(ns(p.induced_ms.max), serialisation(size));
        assert_eq!(p.sent, 2000 / interval_ms, "{} interval", p.name);
    }
    assert_eq!((s.probes[0].kind, s.probes[1].kind), ("irtt", "ping"));
    // Ping measures the round trip only.
    assert!(s.probes[1].owd_up_ms.is_none() && s.probes[1].owd_down_ms.is_none());
    assert_eq!(ns(s.probes[0].owd_down_ms.as_ref().unwrap().max), 15_000_000 + serialisation(102) - 8 * 102 * 1000 / 20 - 8 * 102 * 1000 / 10);
}

#[test]
fn a_probe_behind_bulk_flows_sees_the_fifo_queue() {
    let s = Dumbbell::new("50Mbit", "pfifo limit 200").duration("20s").flow(Flow::new("cubic").rtt("20ms").count(2)).probe(Probe::new().rtt("20ms")).quiet_host().run();
    let p = &s.probes[0];
    // The FIFO holds up to 200 x 1514 B = 48 ms at 50 Mbit/s; the probe's upstream delay
    // tracks the bottleneck sojourn, its downstream delay does not.
    let queue_p50 = s.bottleneck.sojourn_ms.p50.unwrap();
    let up_p50 = p.owd_up_ms.as_ref().unwrap().p50.unwrap() - 10.0;
    assert!(queue_p50 > 20.0, "{queue_p50}");
    assert!((up_p50 - queue_p50).abs() < 0.15 * queue_p50, "probe {up_p50} vs queue {queue_p50}");
    assert!(p.owd_down_ms.as_ref().unwrap().max.unwrap() < 10.1);
}

#[test]
fn probe_options_are_checked() {
    let e = Scenario::from_toml("duration = \"2s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[probes]]\nrtt = \"30ms\"\nsize = 10\n", &[]).unwrap_err();
    assert!(e.to_string().contains("probes[0].size"), "{e}");
    let e = Scenario::from_toml("duration = \"2s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[probes]]\nrtt = \"30ms\"\necn = \"ect2\"\n", &[]).unwrap_err();
    assert!(e.to_string().contains("probes[0].ecn"), "{e}");
}
