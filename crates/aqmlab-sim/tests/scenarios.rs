//! Every example scenario under scenarios/ parses, and the short-flow ones run.

use aqmlab_sim::{Scenario, Simulation};
use std::path::PathBuf;

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

#[test]
fn every_scenario_file_parses() {
    let mut n = 0;
    for entry in std::fs::read_dir(scenarios_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if let Err(e) = Scenario::from_toml(&text, &[]) {
                panic!("{}: {e}", path.display());
            }
            n += 1;
        }
    }
    assert!(n >= 1);
}

#[test]
fn load_transients_scenario_completes_both_groups() {
    let text = std::fs::read_to_string(scenarios_dir().join("load-transients.toml")).unwrap();
    for qdisc in ["pie limit 100 target 20ms max_burst 100ms dq_rate_estimator dq_threshold 10 tupdate 30ms", "codel limit 100 target 5ms interval 100ms"] {
        let o = vec![format!("bottleneck.qdisc={qdisc}")];
        let s = Simulation::new(&Scenario::from_toml(&text, &o).unwrap()).run().summary;
        for g in &s.transients {
            println!("{qdisc}: {} start {:.3} s response {:?} s", g.name, g.start_s, g.response_s);
            assert!(g.response_s.is_some_and(|r| r < 10.0), "{qdisc}: {g:?}");
        }
    }
}
