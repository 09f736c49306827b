//! Every example scenario under scenarios/ parses and runs, conserving packets.

use crate::common;

use aqmlab_sim::{Scenario, Simulation};

#[test]
fn every_example_scenario_parses_and_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let sc = Scenario::from_toml(&text, &[]).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let out = Simulation::new(&sc).run();
        common::assert_conserved(&out.summary);
        println!("{}: {} events, {:.2} s wall", f.display(), out.summary.events, out.summary.wall_seconds);
    }
}

/// `stack` names a profile; an unknown one is one line naming the key and the known names.
#[test]
fn stack_is_checked() {
    let base = "duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\nqdisc = \"pfifo\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n";
    let sc = Scenario::from_toml(&format!("stack = \"l4steam-2020\"\n{base}"), &[]).expect("known profile");
    assert_eq!(sc.stack, aqmlab_sim::profile::Stack::L4steam2020);
    assert_eq!(Scenario::from_toml(base, &[]).unwrap().stack, aqmlab_sim::profile::Stack::Linux);
    let e = Scenario::from_toml(&format!("stack = \"l4s\"\n{base}"), &[]).unwrap_err().to_string();
    assert!(e.contains("stack") && e.contains("unknown stack 'l4s'") && e.contains("l4steam-2024"), "{e}");
}
