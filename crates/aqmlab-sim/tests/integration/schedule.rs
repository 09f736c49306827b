//! Scheduled link changes (`[[bottleneck.changes]]`): HTB-style rate steps and
//! `tc qdisc replace` swaps.
use crate::common;
use aqmlab_sim::event::EventQueue;
use aqmlab_sim::path::{Element, ElementCtx, Link};
use aqmlab_sim::metrics::Series;
use aqmlab_sim::packet::{Direction, Kind, Packet};
use aqmlab_sim::qdisc::Fifo;
use aqmlab_sim::sim::LinkId;
use aqmlab_sim::{Rate, Scenario, Simulation, Time};
use common::{assert_conserved, scenario};

/// Mean of a series over the ticks in [from, to] seconds (NaN ticks skipped).
fn mean_over(series: &Series, entity: &str, metric: &str, from: f64, to: f64) -> f64 {
    let col = series.get(entity, metric).unwrap_or_else(|| panic!("no series {entity}.{metric}"));
    let v: Vec<f64> = (series.time.iter().zip(&col.values))
        .filter(|(t, v)| **t > from && **t <= to && !v.is_nan())
        .map(|(_, v)| *v)
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

/// The value sampled at `t` seconds (a sample shows the state after the events at its time).
fn value_at(series: &Series, entity: &str, metric: &str, t: f64) -> f64 {
    let i = series.time.iter().position(|&x| (x - t).abs() < 1e-9).expect("a tick at t");
    series.get(entity, metric).unwrap().values[i]
}

fn sum_over(series: &Series, entity: &str, metric: &str, from: f64, to: f64) -> f64 {
    let col = series.get(entity, metric).unwrap();
    (series.time.iter().zip(&col.values)).filter(|(t, _)| **t > from && **t <= to).map(|(_, v)| *v).sum()
}

/// Payload share of a full segment on the wire: 1448 of 1514 bytes.
const PAYLOAD: f64 = 1448.0 / 1514.0;

/// l4s-tests S2: 50 -> 25 Mbit/s at 30 s under fq_codel. The one CUBIC flow fills the link
/// before the step and, within 5 s after it, delivers what the new rate carries.
#[test]
fn a_rate_step_halves_the_delivered_rate_within_five_seconds() {
    let sc = scenario(
        r#"duration = "40s"
[bottleneck]
rate = "50Mbit"
qdisc = "fq_codel"
[[bottleneck.changes]]
at = "30s"
rate = "25Mbit"
[[flows]]
cc = "cubic"
rtt = "20ms"
name = "f"
"#,
    );
    let out = Simulation::new(&sc).run();
    assert_conserved(&out.summary);
    let before = mean_over(&out.series, "f", "goodput", 20.0, 30.0);
    let after = mean_over(&out.series, "f", "goodput", 35.0, 40.0);
    let rate_before = value_at(&out.series, "bottleneck", "rate", 29.95);
    let rate_after = value_at(&out.series, "bottleneck", "rate", 30.0);
    println!("goodput {before:.2} Mbit/s before, {after:.2} Mbit/s after; rate series {rate_before} -> {rate_after}");
    assert_eq!((rate_before, rate_after), (50.0, 25.0));
    assert!((before / (50.0 * PAYLOAD) - 1.0).abs() < 0.05, "before {before}");
    assert!((after / (25.0 * PAYLOAD) - 1.0).abs() < 0.05, "after {after}");
    // The summary keeps the configured rate; utilisation counts busy time at either rate.
    assert_eq!(out.summary.bottleneck.rate_mbps, 50.0);
    assert!(out.summary.bottleneck.utilization > 0.95, "{}", out.summary.bottleneck.utilization);
}

/// A packet on the wire when the rate changes completes at the old rate; the next one is
/// serialised at the new rate (HTB `tc class change`), and the queue is kept.
#[test]
fn the_packet_on_the_wire_completes_at_the_old_rate() {
    let mut q = EventQueue::default();
    let mut link = Element::Link(Box::new(Link::new(Rate(12_000_000), Box::new(Fifo::pfifo(10)))));
    let mut out = vec![];
    for _ in 0..3 {
        let p = Packet::new(0, Direction::Forward, Kind::Data, 1500);
        link.receive(&p, &mut ElementCtx { id: 0, now: Time::ZERO, events: &mut q, out: &mut out });
    }
    let mut done = vec![];
    let mut changed = false;
    while let Some((t, _)) = q.pop() {
        // 1500 B take 1 ms at 12 Mbit/s; the rate halves half-way through the first.
        if !changed && t > Time::from_micros(500) {
            let Element::Link(l) = &mut link else { unreachable!() };
            l.set_rate(Rate(6_000_000), t);
            changed = true;
        }
        let mut ctx = ElementCtx { id: 0, now: t, events: &mut q, out: &mut out };
        link.wake(&mut ctx);
        done.extend(out.drain(..).map(|_| t));
    }
    let ms = Time::from_millis;
    assert_eq!(done, vec![ms(1), ms(3), ms(5)]);
}

/// sce-l4s-ect1 S3: dualpi2 -> `pie noecn` -> dualpi2 under one Prague flow. Each swap drops
/// exactly the packets queued at that instant, the run conserves packets, and while PIE
/// without ECN is installed the ECT(1) traffic is dropped, not marked.
#[test]
fn a_qdisc_swap_drops_the_queue_and_the_new_discipline_takes_over() {
    let text = r#"duration = "30s"
[bottleneck]
rate = "50Mbit"
qdisc = "dualpi2"
[[bottleneck.changes]]
at = "10s"
qdisc = "pie noecn"
[[bottleneck.changes]]
at = "20s"
qdisc = "dualpi2"
[[flows]]
cc = "prague"
ecn = "l4s"
rtt = "20ms"
"#;
    let sc = scenario(text);
    let mut sim = Simulation::new(&sc);
    let mut discarded = vec![];
    for at in [10, 20] {
        let at = Time::from_secs(at);
        sim.run_until(at - Time(1));
        let (queued, drops) = (sim.bottleneck().qdisc().len() as u64, sim.bottleneck().drops());
        // The change was scheduled when the run was built, so it runs first of the events
        // at its instant.
        sim.run_until(at);
        let l = sim.bottleneck();
        println!("swap at {at}: {queued} packets queued, drops {drops} -> {}, now {}", l.drops(), l.qdisc().kind());
        assert!(queued > 0, "the swap should find a queue");
        assert_eq!(l.drops(), drops + queued);
        assert_eq!(l.qdisc().len(), 0);
        discarded.push(queued as f64);
    }
    assert_eq!(sim.bottleneck().qdisc().kind(), "dualpi2");
    let out = sim.run();
    assert_conserved(&out.summary);
    let marks = |a, b| sum_over(&out.series, "bottleneck", "ce_marks", a, b);
    let drops = |a, b| sum_over(&out.series, "bottleneck", "drops", a, b);
    // A sample shows the state after the events at its time, so the window (10 s, 20 s]
    // holds the second swap's discards and (0, 10 s] the first's.
    let pie_drops = drops(10.0, 20.0) - discarded[1];
    println!(
        "CE marks {} / {} / {}; drops {} / {} / {} (dualpi2 / pie noecn / dualpi2; swaps discarded {discarded:?}); sub-queues {:?}",
        marks(0.0, 10.0),
        marks(10.0, 20.0),
        marks(20.0, 30.0),
        drops(0.0, 10.0),
        drops(10.0, 20.0),
        drops(20.0, 30.0),
        out.summary.bottleneck.queues.iter().map(|q| (&q.name, q.packets)).collect::<Vec<_>>()
    );
    assert!(marks(0.0, 10.0) > 100.0 && marks(20.0, 30.0) > 100.0);
    assert_eq!(marks(10.0, 20.0), 0.0, "pie noecn never marks");
    assert!(pie_drops > 0.0, "pie noecn drops the ECT(1) traffic: {pie_drops}");
    // Sojourns are kept per sub-queue name across the swaps: dualpi2's C and L, pie's q.
    let names: Vec<&str> = out.summary.bottleneck.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["C", "L", "q"]);
    assert!(out.series.get("bottleneck", "qdelay_q").is_some());
}

/// A change on the return link (`direction = "return"`) leaves the bottleneck alone, and
/// `both` changes both; the return link's series appear.
#[test]
fn changes_apply_to_the_links_their_direction_names() {
    let sc = scenario(
        r#"duration = "3s"
[bottleneck]
rate = "20Mbit"
[[bottleneck.changes]]
at = "1s"
rate = "10Mbit"
direction = "return"
[[bottleneck.changes]]
at = "2s"
rate = "5Mbit"
qdisc = "fq_codel"
direction = "both"
[[flows]]
cc = "cubic"
rtt = "20ms"
"#,
    );
    let mut sim = Simulation::new(&sc);
    let rates = |sim: &Simulation| (sim.link(LinkId::Bottleneck).rate().as_mbps(), sim.link(LinkId::Return).rate().as_mbps());
    sim.run_until(Time::from_millis(1500));
    assert_eq!(rates(&sim), (20.0, 10.0));
    sim.run_until(Time::from_millis(2500));
    assert_eq!(rates(&sim), (5.0, 5.0));
    assert_eq!(sim.link(LinkId::Return).qdisc().kind(), "fq_codel");
    assert_eq!(sim.link(LinkId::Bottleneck).qdisc().kind(), "fq_codel");
    let out = sim.run();
    assert_conserved(&out.summary);
    let return_rate = |t| value_at(&out.series, "return_link", "rate", t);
    assert_eq!((return_rate(0.95), return_rate(1.0), return_rate(2.0)), (20.0, 10.0, 5.0));
    assert_eq!(out.summary.return_link.rate_mbps, 20.0);
}

#[test]
fn bad_changes_are_reported_with_their_key() {
    let base = "duration = \"10s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n[[bottleneck.changes]]\n";
    let err = |change: &str| Scenario::from_toml(&format!("{base}{change}"), &[]).unwrap_err().to_string();
    let e = err("at = \"10s\"\nrate = \"5Mbit\"\n");
    assert!(e.contains("bottleneck.changes[0].at") && e.contains("not before the end"), "{e}");
    let e = err("at = \"5s\"\n");
    assert!(e.contains("bottleneck.changes[0]: needs a rate, a qdisc or both"), "{e}");
    let e = err("at = \"5s\"\nrate = \"0Mbit\"\n");
    assert!(e.contains("bottleneck.changes[0].rate") && e.contains("at least 1 bit/s"), "{e}");
    let e = err("at = \"5s\"\nqdisc = \"pie bogus 3\"\n");
    assert!(e.contains("bottleneck.changes[0].qdisc"), "{e}");
    let e = err("at = \"5s\"\nrate = \"5Mbit\"\ndirection = \"sideways\"\n");
    assert!(e.contains("bottleneck.changes[0].direction"), "{e}");
    assert_eq!(e.lines().count(), 1);
}

/// `tc qdisc replace` with the same kind is Linux `qdisc_change`: the queue and the state are
/// kept. pfifo takes the new limit (for arrivals; nothing queued is dropped); a kind whose
/// in-place change is not modelled (dualpi2) keeps its instance.
#[test]
fn a_same_kind_qdisc_change_keeps_the_queue() {
    for (first, second, new_limit) in [("pfifo limit 1000", "pfifo limit 20", Some(20usize)), ("dualpi2", "dualpi2 target 5ms", None)] {
        let text = format!(
            r#"duration = "12s"
[bottleneck]
rate = "20Mbit"
qdisc = "{first}"
[[bottleneck.changes]]
at = "5s"
qdisc = "{second}"
[[flows]]
cc = "cubic"
rtt = "40ms"
"#
        );
        let sc = scenario(&text);
        let mut sim = Simulation::new(&sc);
        let at = Time::from_secs(5);
        sim.run_until(at - Time(1));
        let (queued, drops) = (sim.bottleneck().qdisc().len(), sim.bottleneck().drops());
        sim.run_until(at);
        let l = sim.bottleneck();
        println!("{first} -> {second}: {queued} queued before, {} after; drops {drops} -> {}", l.qdisc().len(), l.drops());
        assert!(queued > 5, "the change should find a standing queue: {queued}");
        assert_eq!(l.drops(), drops, "nothing discarded");
        assert!(l.qdisc().len() + 1 >= queued, "the queue is kept");
        if let Some(limit) = new_limit {
            sim.run_until(Time::from_secs(8));
            assert!(sim.bottleneck().qdisc().len() <= limit, "the new limit applies");
        }
        let out = sim.run();
        assert_conserved(&out.summary);
    }
}

/// After a rate drop the spike thresholds mean the same queueing delay at the new rate: the
/// standing queue of l4s-tests S2 (Prague in fq_codel, 50 -> 1 Mbit/s) is above 100 ms for most
/// of the time its largest sojourn says it took to drain (it read 0 s when the thresholds were
/// bytes at the starting rate).
#[test]
fn spike_thresholds_follow_a_rate_step() {
    let sc = scenario(
        r#"
duration = "40s"
[metrics]
spike_thresholds = ["20ms", "100ms"]
spike_after = "30s"
[bottleneck]
rate = "50Mbit"
qdisc = "fq_codel"
[[bottleneck.changes]]
at = "30s"
rate = "1Mbit"
direction = "both"
[[flows]]
cc = "prague"
ecn = "l4s"
rtt = "20ms"
start = "5s"
"#,
    );
    let s = Simulation::new(&sc).run().summary;
    assert_conserved(&s);
    let max_sojourn_s = s.bottleneck.sojourn_ms.max.expect("packets crossed") / 1e3;
    let [s20, s100] = [&s.bottleneck.spikes[0], &s.bottleneck.spikes[1]];
    println!("max sojourn {max_sojourn_s:.3} s; longest > 20 ms {:.3} s, > 100 ms {:.3} s; peak {:.0} ms", s20.longest_s, s100.longest_s, s100.peak_ms);
    assert!(max_sojourn_s > 1.0, "the step leaves a standing queue of seconds ({max_sojourn_s} s)");
    // A packet that waited S behind a queue draining at 1 Mbit/s saw more than 100 ms of
    // backlog for S - 100 ms before it; the spike cannot be shorter than half of that.
    assert!(s100.longest_s > 0.5 * (max_sojourn_s - 0.1), "{} s above 100 ms", s100.longest_s);
    assert!(s20.longest_s >= s100.longest_s && s100.longest_s <= 10.0);
    // The peak backlog, judged at 1 Mbit/s, is within a packet or two of the largest sojourn.
    assert!((s100.peak_ms / 1e3 - max_sojourn_s).abs() < 0.05, "peak {} ms", s100.peak_ms);
}
