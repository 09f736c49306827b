//! Every example scenario under `scenarios/` parses and builds.

use aqmlab_sim::{Scenario, Simulation};

#[test]
fn every_example_scenario_parses_and_builds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("scenarios/ exists") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let sc = Scenario::from_toml(&text, &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let _ = Simulation::new(&sc);
            n += 1;
        }
    }
    println!("{n} scenarios");
    assert!(n >= 6);
}
