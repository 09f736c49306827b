//! Every example under scenarios/ parses and passes validation.
use aqmlab_sim::Scenario;

#[test]
fn every_example_scenario_parses() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("scenarios/ exists") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if let Err(e) = Scenario::from_toml(&text, &[]) {
                panic!("{}: {e}", path.display());
            }
            n += 1;
        }
    }
    assert!(n >= 3, "only {n} scenarios found");
}
