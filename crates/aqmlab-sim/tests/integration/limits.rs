//! Issue 14, resources: a running simulation stops at `[limits] max_events` / `max_memory`
//! with an error and no results; the SCE qdiscs' queues stay bounded under 1-byte UDP
//! overload; inputs that could make a loop spin without simulated time advancing either are
//! refused (scenario.rs tests) or run to the end within their event estimate; a path that
//! cannot deliver anything runs with a warning in the summary.
use crate::common::*;
use aqmlab_sim::{run_toml, Scenario, Simulation};

const TWO_CUBIC: &str = "duration = \"2s\"\n[bottleneck]\nrate = \"20Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ncount = 2\n";

#[test]
fn a_run_stops_cleanly_at_the_event_ceiling() {
    let mut sc = scenario(TWO_CUBIC);
    let full = Simulation::new(&sc).run().summary.events;
    assert!(full > 4_000, "{full}");
    sc.limits.max_events = 2_000;
    let e = Simulation::new(&sc).try_run().unwrap_err();
    assert_eq!(e.key, "limits.max_events");
    assert!(e.message.contains("reached 2000 events") && e.message.contains("nothing was written") && !e.message.contains('\n'), "{e}");
    // run_until does nothing more once stopped.
    let mut sim = Simulation::new(&sc);
    sim.run_until(aqmlab_sim::Time::from_secs(1));
    let now = sim.now();
    assert!(sim.stopped().is_some());
    sim.run_until(aqmlab_sim::Time::from_secs(2));
    assert_eq!(sim.now(), now);
    // Through the text API it is a ScenarioError on the key (the CLI's exit 2): validation
    // refuses what its estimate sees ...
    let e = run_toml(&format!("{TWO_CUBIC}[limits]\nmax_events = 1e10\n"), None, &["limits.max_events=2000".into()]).unwrap_err();
    assert!(e.message.contains("would execute about") && e.key == "limits.max_events", "{e}");
    // ... and the engine stops what the estimate missed (timers: 3239 events, estimated 2770).
    let timers = "duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n\
                  [[udp]]\nrtt = \"20ms\"\nframe_rate = 1000.0\nrate = \"1kbit\"\nframe_size_variation = 200.0\npacket_size = 1\n\
                  [limits]\nmax_events = 3000\n";
    let e = run_toml(timers, None, &[]).unwrap_err();
    assert_eq!((e.key.as_str(), e.line), ("limits.max_events", None), "{e}");
    assert!(e.message.contains("reached 3000 events"), "{e}");
    // At the ceiling exactly the run completes.
    sc.limits.max_events = full + 1;
    assert_eq!(Simulation::new(&sc).try_run().unwrap().summary.events, full);
}

#[test]
fn a_run_stops_cleanly_at_the_memory_ceiling() {
    let mut sc = scenario(TWO_CUBIC);
    sc.limits.max_memory = 1 << 20; // below any process's resident memory
    let e = Simulation::new(&sc).try_run().unwrap_err();
    assert_eq!(e.key, "limits.max_memory");
    assert!(e.message.contains("above the limit of 0.00 GiB"), "{e}");
    assert!(Simulation::new(&scenario(TWO_CUBIC)).try_run().is_ok());
}

/// Issue 14 item 5: 1-byte UDP at 100 Mbit/s into the SCE qdiscs (no kernel limit) grew the
/// queue to 1 GB and 5 M packets in a second. Now each holds at most 10240 packets.
#[test]
fn sce_queues_stay_bounded_under_one_byte_udp_overload() {
    for q in ["cnq_codel_af", "twin_codel_af", "lfq_cobalt"] {
        let text = format!("duration = \"0.1s\"\n[bottleneck]\nrate = \"10Mbit\"\nqdisc = \"{q}\"\n[[udp]]\nkind = \"cbr\"\nrate = \"100Mbit\"\npacket_size = 1\nrtt = \"2ms\"\n");
        let out = Simulation::new(&scenario(&text)).run();
        let s = &out.summary;
        assert_conserved(s);
        let qlen = out.series.columns.iter().find(|c| c.entity == "bottleneck" && c.metric == "qlen").unwrap();
        let max = qlen.values.iter().cloned().filter(|v| v.is_finite()).fold(0.0, f64::max);
        assert!(max <= 10240.0 && max > 5000.0, "{q}: queue peaked at {max} packets");
        // Held: the queue plus about 1 ms of 12.5 M packets/s on the forward delay.
        assert!(s.packets.in_flight <= 10240 + 14_000, "{q}: {:?}", s.packets);
    }
}

/// Inputs at the edges that validation accepts (1 bit/s, an RTT of a million seconds, 1 us
/// probes, 0-sized varied frames, sub-nanosecond serialisation, zero AQM intervals) finish,
/// within twice their event estimate (timers make small runs exceed the per-packet part).
#[test]
fn edge_inputs_run_to_the_end_within_their_event_estimate() {
    let base = "duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n";
    let cases: &[(&str, &[&str])] = &[
        ("1 bit/s bottleneck", &["bottleneck.rate=1bit"]),
        ("1 bit/s upstream", &["bottleneck.upstream=[{rate=\"1bit\"}]"]),
        ("1 bit/s return", &["return={rate=\"1bit\"}", "flows[0].direction=down"]),
        ("RTT 1e6 s", &["flows[0].rtt=1000000s"]),
        ("1 us probes", &["probes=[{rtt=\"20ms\",interval=\"1us\"}]", "duration=0.2s"]),
        ("varied 1 kbit/s frames", &["udp=[{rtt=\"20ms\",frame_rate=1000.0,rate=\"1kbit\",frame_size_variation=200.0,packet_size=1}]"]),
        ("media at its floor", &["media=[{kind=\"scream\",rtt=\"20ms\",min_bitrate=\"1bit\",start_bitrate=\"1bit\",max_bitrate=\"1kbit\",frame_rate=1000.0,frame_size_variation=200.0}]"]),
        ("sub-ns serialisation", &["bottleneck.rate=10Tbit", "duration=0.002s", "udp=[{kind=\"cbr\",rtt=\"20us\",rate=\"2Gbit\",packet_size=1}]"]),
        ("zero CoDel times", &["bottleneck.qdisc=codel interval 0us target 0us"]),
        ("zero fq_codel times", &["bottleneck.qdisc=fq_codel interval 0us target 0us"]),
        ("zero dualpi2 tupdate", &["bottleneck.qdisc=dualpi2 tupdate 0us"]),
        ("zero cake rtt", &["bottleneck.qdisc=cake rtt 0us"]),
        ("zero netem", &["bottleneck.netem=delay 0us slot 0us 0us"]),
        ("no host noise", &["host.jitter=0us", "host.start_spread=0us"]),
    ];
    for (what, set) in cases {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        let sc = Scenario::from_toml(base, &set).unwrap_or_else(|e| panic!("{what}: {e}"));
        let s = Simulation::new(&sc).run().summary;
        assert!(s.packets.conserved(), "{what}: {:?}", s.packets);
        assert!((s.events as f64) <= 2.0 * sc.event_estimate() + 10_000.0, "{what}: {} events, estimate {}", s.events, sc.event_estimate());
    }
}

/// The warning of a path that cannot deliver reaches summary.json's `warnings`.
#[test]
fn an_undeliverable_path_runs_with_a_warning_in_the_summary() {
    let s = Simulation::new(&scenario(&format!("{TWO_CUBIC}[[bottleneck.upstream]]\nrate = \"1bit\"\n"))).run().summary;
    // One warning per [[flows]] entry (this one has count = 2).
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert!(s.warnings[0].starts_with("flows[0]: nothing it sends can arrive"), "{:?}", s.warnings);
    assert_eq!(s.flows.iter().map(|f| f.goodput_mbps).sum::<f64>(), 0.0);
}
