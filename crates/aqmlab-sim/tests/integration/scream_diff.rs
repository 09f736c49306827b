//! Differential traces: the model's SCReAM controller against SCReAM's own C++ sender
//! (EricssonResearch/scream 76a298a, 2024-10-31), both driven by the same scripted network
//! (`tools/scream-harness`; fixtures `tests/golden/scream/*.csv` recorded from the C++ code,
//! replayed through `aqmlab_sim::apps::scream_script`).
//!
//! Tolerance (docs/algorithms/scream.md, "Differential traces"): per fixture, the mean target
//! bitrate over each comparison window within 10 % of the C++ trace's (or 0.3 Mbit/s, for
//! the windows at the 1 Mbit/s floor), and the time the target first reaches 90 % of its
//! first-window level within 1 s (40 RTTs at 25 ms) of the C++ trace's.

use aqmlab_sim::apps::scream_script::{parse_fixture, run, Row};
use std::path::PathBuf;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/scream")
}

fn mean(rows: &[Row], from: f64, to: f64, f: impl Fn(&Row) -> f64) -> f64 {
    let v: Vec<f64> = rows.iter().filter(|r| r.t >= from && r.t < to).map(f).collect();
    v.iter().sum::<f64>() / v.len() as f64
}

/// Comparison windows (s) per fixture: steady states between the script's events.
fn windows(name: &str, duration: f64) -> Vec<(f64, f64)> {
    match name {
        "rttstep-l4s" => vec![(5.0, 10.0), (13.0, 20.0), (25.0, 30.0)],
        "lossburst-notect" => vec![(5.0, 15.0), (15.5, 17.0), (25.0, 30.0)],
        _ => vec![(duration / 2.0, duration)],
    }
}

fn first_reach(rows: &[Row], level: f64) -> f64 {
    rows.iter().find(|r| r.target_bps >= level).map_or(f64::INFINITY, |r| r.t)
}

#[test]
fn scream_model_follows_the_cpp_sender_on_every_fixture() {
    let mut names: Vec<_> = std::fs::read_dir(fixture_dir()).expect("tests/golden/scream").map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "csv")).collect();
    names.sort();
    assert!(names.len() >= 8, "fixtures missing: {names:?}");
    let mut failures = Vec::new();
    for path in &names {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let (script, cpp) = parse_fixture(&std::fs::read_to_string(path).unwrap()).unwrap();
        let model = run(&script);
        for (from, to) in windows(&name, script.duration) {
            let c = mean(&cpp, from, to, |r| r.target_bps) / 1e6;
            let m = mean(&model, from, to, |r| r.target_bps) / 1e6;
            let cw = mean(&cpp, from, to, |r| r.cwnd);
            let mw = mean(&model, from, to, |r| r.cwnd);
            let ok = (m - c).abs() <= (0.10 * c).max(0.3);
            println!("{name:18} [{from:4.1},{to:4.1}) target C++ {c:7.2} model {m:7.2} Mbit/s ({:+5.1} %)  cwnd C++ {cw:8.0} model {mw:8.0} {}", 100.0 * (m / c - 1.0), if ok { "" } else { "  <-- OUT" });
            if !ok {
                failures.push(format!("{name} [{from},{to}): target {m:.2} vs C++ {c:.2} Mbit/s"));
            }
        }
        let (from, to) = windows(&name, script.duration)[0];
        let level = 0.9 * mean(&cpp, from, to, |r| r.target_bps);
        let (tc, tm) = (first_reach(&cpp, level), first_reach(&model, level));
        println!("{name:18} time to 90 % of the first window: C++ {tc:.2} s, model {tm:.2} s");
        if (tc - tm).abs() > 1.0 {
            failures.push(format!("{name}: reaches 90 % at {tm:.2} s vs C++ {tc:.2} s"));
        }
    }
    assert!(failures.is_empty(), "outside tolerance:\n{}", failures.join("\n"));
}
