//! exploratory
use aqmlab_sim::sim::Summary;
use aqmlab_sim::{Scenario, Simulation};

fn run(text: &str) -> Summary {
    let sc = Scenario::from_toml(text, &[]).expect("valid scenario");
    let out = Simulation::new(&sc).run();
    let p = out.summary.packets;
    assert_eq!(p.sent, p.delivered + p.dropped + p.in_flight, "packet conservation: {p:?}");
    out.summary
}

fn dumbbell(rate: &str, qdisc: &str, duration: &str, window: &str, flows: &str) -> String {
    format!("duration = \"{duration}\"\n[bottleneck]\nrate = \"{rate}\"\nqdisc = \"{qdisc}\"\n[metrics]\nsteady_window = \"{window}\"\n{flows}")
}

#[test]
fn explore() {
    let two = "[[flows]]\ncc = \"cubic\"\nrtt = \"10ms\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"160ms\"\n";
    for q in ["cnq_codel_af bandwidth 50Mbit", "lfq_cobalt bandwidth 50Mbit", "twin_codel_af bandwidth 50Mbit sce-thresh 4", "pfifo limit 1000", "cake bandwidth 50Mbit"] {
        let rate = if q.starts_with("pfifo") { "50Mbit" } else { "1Gbit" };
        let t = std::time::Instant::now();
        let s = run(&dumbbell(rate, q, "60s", "30s", two));
        let r: Vec<f64> = s.flows.iter().map(|f| f.steady_mbps.unwrap()).collect();
        eprintln!("{q}: rates {r:?} jain {:?} drops {} ce {} sojourn p50 {:?} p99 {:?} wall {:?}", s.jain_steady, s.bottleneck.drops, s.bottleneck.ce_marks, s.bottleneck.sojourn_ms.p50, s.bottleneck.sojourn_ms.p99, t.elapsed());
    }
    let sce = "[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\necn = \"sce\"\n";
    for q in ["cnq_codel_af bandwidth 50Mbit sce-thresh 4", "lfq_cobalt bandwidth 50Mbit sce-thresh 8", "twin_codel_af bandwidth 50Mbit sce-thresh 4"] {
        let s = run(&dumbbell("1Gbit", q, "20s", "10s", sce));
        let f = &s.flows[0];
        eprintln!("{q}: sce {} ce {} drops {} rate {:?} p50 {:?}", f.sce_received, f.ce_received, s.bottleneck.drops, f.steady_mbps, s.bottleneck.sojourn_ms.p50);
    }
}
