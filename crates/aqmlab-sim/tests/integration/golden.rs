//! Golden output hashes: the guard rail for restructurings that must not change results.
//!
//! Every scenario under `scenarios/` and under `tests/golden/scenarios/` (the `l4s-tests/s6`
//! suite's cells and a `jarvinen-kojo` slice, as the suite runner wrote their `scenario.toml`)
//! is run; the SHA-256 of its summary JSON (with `wall_seconds` zeroed) and of its series
//! (time grid and every column's entity, metric, unit and values as little-endian f64 bits)
//! must equal `tests/golden/hashes.json`.
//!
//! A change that is meant to move results re-baselines deliberately:
//! `AQMLAB_REBASELINE=1 cargo test --profile test-release -p aqmlab-sim golden` rewrites the file,
//! and the commit says why the numbers moved.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aqmlab_sim::run_toml;
use sha2::{Digest, Sha256};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every scenario file the guard covers, keyed by its path relative to the repository root.
fn golden_scenarios() -> Vec<String> {
    let root = repo_root();
    let mut files = Vec::new();
    let mut dirs = vec![root.join("scenarios"), root.join("tests/golden/scenarios")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("scenario directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "toml") {
                let rel = path.strip_prefix(&root).expect("under the root");
                files.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files.sort();
    files
}

fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// (summary hash, series hash) of one scenario file.
fn hashes(rel: &str) -> (String, String) {
    let text = std::fs::read_to_string(repo_root().join(rel)).expect("readable scenario");
    let mut out = run_toml(&text, None, &[]).unwrap_or_else(|e| panic!("{rel}: {e}"));
    out.summary.wall_seconds = 0.0;
    let summary = serde_json::to_string(&out.summary).expect("summary serialises");
    let mut series = Sha256::new();
    for t in &out.series.time {
        series.update(t.to_le_bytes());
    }
    for column in &out.series.columns {
        for field in [column.entity.as_str(), column.metric.as_str(), &column.unit.to_string()] {
            series.update(field.as_bytes());
            series.update([0u8]);
        }
        for v in &column.values {
            series.update(v.to_le_bytes());
        }
    }
    (hex(Sha256::digest(summary.as_bytes())), hex(series.finalize()))
}

#[test]
fn outputs_match_the_recorded_hashes() {
    let path = repo_root().join("tests/golden/hashes.json");
    let mut now: BTreeMap<String, [String; 2]> = BTreeMap::new();
    for rel in golden_scenarios() {
        let (summary, series) = hashes(&rel);
        now.insert(rel, [summary, series]);
    }
    if std::env::var_os("AQMLAB_REBASELINE").is_some() {
        let text = serde_json::to_string_pretty(&now).expect("hashes serialise");
        std::fs::write(&path, text + "\n").expect("hashes.json written");
        return;
    }
    let recorded: BTreeMap<String, [String; 2]> =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("tests/golden/hashes.json"))
            .expect("hashes.json parses");
    let mut differ = Vec::new();
    for (rel, [summary, series]) in &now {
        match recorded.get(rel) {
            None => differ.push(format!("{rel}: not recorded")),
            Some([s, _]) if s != summary => differ.push(format!("{rel}: summary differs")),
            Some([_, c]) if c != series => differ.push(format!("{rel}: series differ")),
            Some(_) => {}
        }
    }
    for rel in recorded.keys().filter(|k| !now.contains_key(*k)) {
        differ.push(format!("{rel}: recorded but no longer present"));
    }
    assert!(differ.is_empty(), "outputs changed (re-baseline only on purpose):\n{}", differ.join("\n"));
}
