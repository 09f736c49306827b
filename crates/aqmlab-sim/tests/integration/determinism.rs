//! Every congestion controller, queue discipline and application gives byte-identical
//! results for the same scenario and seed (issue 4: "each controller's run is
//! byte-identical for the same seed").

use aqmlab_sim::{Scenario, Simulation};

fn summary_and_series(text: &str) -> (String, Vec<u64>) {
    let mut out = Simulation::new(&Scenario::from_toml(text, &[]).unwrap()).run();
    out.summary.wall_seconds = 0.0;
    let bits = out.series.columns.iter().flat_map(|c| c.values.iter().map(|v| v.to_bits())).collect();
    (serde_json::to_string(&out.summary).unwrap(), bits)
}

#[test]
fn every_controller_is_deterministic() {
    for (cc, ecn, qdisc) in [
        ("reno", "rfc3168", "fq_codel"),
        ("cubic", "off", "pie"),
        ("dctcp", "l4s", "dualpi2"),
        ("prague", "l4s", "dualpi2"),
        ("bbr", "off", "pfifo limit 200"),
        ("bbr3", "l4s", "dualpi2"),
        ("reno-sce", "sce", "lfq_cobalt bandwidth 20Mbit"),
        ("cubic-sce", "sce", "twin_codel_af bandwidth 20Mbit sce-thresh 4"),
        ("scream", "l4s", "dualpi2"),
    ] {
        let text = format!(
            "duration = \"8s\"\nseed = 7\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"{qdisc}\"\n\
             [[flows]]\ncc = \"{cc}\"\nrtt = \"20ms\"\necn = \"{ecn}\"\n\
             [[flows]]\ncc = \"cubic\"\nrtt = \"40ms\"\nstart = \"1s\"\n[[probes]]\nrtt = \"20ms\"\n"
        );
        let a = summary_and_series(&text);
        let b = summary_and_series(&text);
        assert_eq!(a, b, "{cc} through {qdisc} is not deterministic");
    }
}

#[test]
fn netem_runs_are_deterministic_and_seeded() {
    let text = |seed: u64| {
        format!(
            "duration = \"5s\"\nseed = {seed}\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"fq_codel\"\n\
             netem = \"delay 200us slot 800us 5ms packets 16 limit 10000\"\n\
             [[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\nnetem = \"delay 2ms 1ms 10% loss 0.5%\"\n\
             [[probes]]\nrtt = \"20ms\"\nnetem = \"delay 5ms 2ms distribution normal\"\n"
        )
    };
    assert_eq!(summary_and_series(&text(3)), summary_and_series(&text(3)));
    assert_ne!(summary_and_series(&text(3)).0, summary_and_series(&text(4)).0);
}

#[test]
fn other_seeds_change_randomised_runs() {
    // RED draws from the discipline's stream: a different seed gives a different run.
    let text = |seed: u64| {
        format!("duration = \"10s\"\nseed = {seed}\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"red limit 400000 avpkt 1000 adaptive bandwidth 20Mbit\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ncount = 4\n")
    };
    assert_ne!(summary_and_series(&text(1)).0, summary_and_series(&text(2)).0);
}

#[test]
fn link_changes_upstream_links_and_ping_are_deterministic() {
    // The swapped-in RED and the upstream PIE draw from their own streams.
    let text = |seed: u64| {
        format!(
            "duration = \"8s\"\nseed = {seed}\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"fq_codel\"\n\
             [[bottleneck.changes]]\nat = \"3s\"\nrate = \"10Mbit\"\nqdisc = \"red limit 400000 avpkt 1000 adaptive bandwidth 10Mbit\"\ndirection = \"both\"\n\
             [[bottleneck.upstream]]\nrate = \"15Mbit\"\nqdisc = \"pie\"\n\
             [[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ncount = 3\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ndirection = \"down\"\n\
             [[probes]]\nkind = \"ping\"\nrtt = \"20ms\"\n"
        )
    };
    assert_eq!(summary_and_series(&text(1)), summary_and_series(&text(1)));
    assert_ne!(summary_and_series(&text(1)).0, summary_and_series(&text(2)).0);
}

#[test]
fn udp_sources_and_queue_metrics_are_deterministic() {
    // Frame sizes vary from the source's own stream: same seed, same run; another seed, not.
    let text = |seed: u64| {
        format!(
            "duration = \"6s\"\nseed = {seed}\n[metrics]\nspike_thresholds = [\"5ms\", \"20ms\"]\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"dualpi2\"\n\
             [[flows]]\ncc = \"prague\"\necn = \"l4s\"\nrtt = \"20ms\"\n\
             [[udp]]\nkind = \"video\"\nrate = \"4Mbit\"\nframe_size_variation = 80.0\necn = \"ect1\"\nrtt = \"20ms\"\n\
             [[udp]]\nkind = \"cbr\"\nrate = \"2Mbit\"\nrtt = \"30ms\"\ndirection = \"down\"\n"
        )
    };
    let a = summary_and_series(&text(3));
    assert_eq!(a, summary_and_series(&text(3)));
    assert_ne!(a.0, summary_and_series(&text(4)).0);
}

#[test]
fn workloads_and_transients_are_deterministic() {
    // Random arrivals, sizes and group start draws; a bulk flow competing.
    let text = |seed: u64| {
        format!(
            "duration = \"8s\"\nseed = {seed}\n[bottleneck]\nrate = \"20Mbit\"\nqdisc = \"fq_codel flows 1\"\n\
             [[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\ndirection = \"down\"\n\
             [[workloads]]\nname = \"web\"\nrtt = \"20ms\"\nmean_interarrival = \"100ms\"\nstart = \"1s\"\n\
             [[transients]]\nname = \"g\"\nflows = 3\ntotal = 300000\ncc = \"reno\"\nrtt = \"50ms\"\nstart = \"2s\"\nstart_jitter = \"650ms\"\n"
        )
    };
    let a = summary_and_series(&text(3));
    assert_eq!(a, summary_and_series(&text(3)));
    assert_ne!(a.0, summary_and_series(&text(4)).0);
}
