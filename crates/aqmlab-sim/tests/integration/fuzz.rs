//! Bounded fuzzing on stable Rust (issue 14): a few thousand generated and mutated inputs per
//! target of `aqmlab_sim::fuzzing` (scenario text, `--set` overrides, qdisc and cc strings),
//! from a seeded ChaCha mutator, so that `make test` checks the fuzz properties on a machine
//! without nightly or cargo-fuzz. `make fuzz` (fuzz/) runs the same targets under libFuzzer
//! for longer. Seeds: scenarios/*.toml, the built-in suites' cells (fuzz/seeds/scenario, written
//! by tools/fuzz_seeds.py), the qdisc and cc registries' parameter tables, and every crash
//! input found so far (fuzz/regressions/<target>/), which must stay fixed.
//!
//! Counts per target and outcome are printed (`--nocapture`); docs/fuzzing.md records them.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use aqmlab_sim::fuzzing::{self, Outcome};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Inputs per target in `make test` (AQMLAB_FUZZ_CASES scales them for a longer run).
const CASES: usize = 3_000;

fn cases() -> usize {
    std::env::var("AQMLAB_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(CASES)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text of every file in `dir` (sorted by name), or none if it does not exist.
fn read_dir(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect();
    paths.sort();
    paths.iter().map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned()).collect()
}

struct Gen {
    rng: ChaCha8Rng,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen { rng: ChaCha8Rng::seed_from_u64(seed) }
    }
    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.rng.next_u64() % 100 < percent
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Numbers at and past the edges of every range the parsers know.
const NUMBERS: &[&str] = &[
    "0", "1", "-1", "2", "3.7", "0.5", "1e-300", "1e-9", "1e300", "1e9", "255", "256", "1024", "1025", "65535", "65536",
    "4294967295", "4294967296", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
    "18446744073709551616", "nan", "inf", "-inf", "-0", "0x10", "1_000", "+5", "00", "1.", ".5", "1e", "",
];
/// Unit suffixes for times, rates and sizes, and some that mean nothing.
const UNITS: &[&str] = &[
    "", "ns", "us", "ms", "s", "bit", "kbit", "Mbit", "Gbit", "Tbit", "bps", "b", "kb", "k", "K", "M", "mb", "Mb", "MB", "GB",
    "p", "pkts", "%", "x", "min", "h",
];

impl Gen {
    fn number(&mut self) -> String {
        if self.chance(30) {
            (self.rng.next_u64() >> self.below(64)).to_string()
        } else {
            self.pick(NUMBERS).to_string()
        }
    }
    /// A value token for a tc-style parameter: a number with a unit, a word or garbage.
    fn token(&mut self, words: &[String]) -> String {
        match self.below(10) {
            0..=5 => format!("{}{}", self.number(), self.pick(UNITS)),
            6 if !words.is_empty() => self.pick(words).clone(),
            7 => ["on", "off", "true", "false", "yes", "-", "=", "\u{0}", "é", "∞"][self.below(10)].to_string(),
            8 => "9".repeat(1 + self.below(3000)),
            _ => self.number(),
        }
    }
    /// A value for a scenario key: a TOML literal at or past some edge.
    fn toml_value(&mut self, tc: &[String]) -> String {
        match self.below(12) {
            0..=2 => self.number(),
            3..=5 => format!("\"{}{}\"", self.number(), self.pick(UNITS)),
            6 => format!("\"{}\"", self.pick(tc)),
            7 => ["true", "false", "[]", "{}", "[1, 2]", "\"\"", "\"x\"", "\"bottleneck\"", "{ kind = \"cubic\" }", "\"up\"", "\"down\"", "\"l4s\""][self.below(12)].to_string(),
            8 => format!("\"{}\"", "a".repeat(1 + self.below(5000))),
            9 => format!("[{}]", (0..self.below(4)).map(|_| format!("\"{}ms\"", self.number())).collect::<Vec<_>>().join(", ")),
            10 => format!("{}-11-24T00:00:00Z", 1 + self.below(3000)),
            _ => format!("\"{}\"", self.number()),
        }
    }
}

/// A registry (qdisc or cc) as the generators need it: kind names with their parameters'
/// names and words, read from the registry's JSON listing (`aqmlab qdisc list`).
struct Registry {
    kinds: Vec<(String, Vec<String>)>,
    words: Vec<String>,
}

impl Registry {
    fn from_json(v: serde_json::Value) -> Registry {
        let mut kinds = Vec::new();
        let mut words = Vec::new();
        for k in v.as_array().unwrap() {
            let mut names = vec![k["name"].as_str().unwrap().to_string()];
            names.extend(k["aliases"].as_array().into_iter().flatten().filter_map(|a| a.as_str()).map(str::to_string));
            let mut params = Vec::new();
            for p in k["params"].as_array().unwrap() {
                params.push(p["name"].as_str().unwrap().to_string());
                for key in ["aliases", "keywords"] {
                    params.extend(p[key].as_array().into_iter().flatten().filter_map(|a| a.as_str()).map(str::to_string));
                }
                if let Some(w) = p["words"].as_object() {
                    words.extend(w.keys().cloned());
                }
                if let Some(d) = p["default_text"].as_str() {
                    words.push(d.to_string());
                }
            }
            for n in names {
                kinds.push((n, params.clone()));
            }
        }
        words.sort();
        words.dedup();
        Registry { kinds, words }
    }

    /// A description: a kind and some of its parameters, with values near and past their
    /// edges, sometimes with a parameter of another kind, a repeat, or a missing value.
    fn generate(&self, g: &mut Gen) -> String {
        let (kind, params) = g.pick(&self.kinds);
        let mut out = vec![if g.chance(3) { g.token(&self.words) } else { kind.clone() }];
        for _ in 0..g.below(6) {
            let name = if params.is_empty() || g.chance(5) { g.pick(&self.kinds).1.first().cloned().unwrap_or_default() } else { g.pick(params).clone() };
            out.push(name);
            if !g.chance(8) {
                let v = g.token(&self.words);
                out.push(v);
            }
        }
        out.join(" ")
    }
}

/// Byte- and token-level mutations of a text.
fn mutate(g: &mut Gen, text: &str, dict: &[String]) -> String {
    let mut s: Vec<u8> = text.as_bytes().to_vec();
    for _ in 0..1 + g.below(3) {
        let n = s.len();
        match g.below(7) {
            0 if n > 0 => {
                let i = g.below(n);
                s[i] ^= 1 << g.below(8);
            }
            1 if n > 0 => {
                let i = g.below(n);
                let len = g.below((n - i).min(16) + 1);
                s.drain(i..i + len);
            }
            2 => {
                let i = g.below(n + 1);
                let w = g.pick(dict).clone();
                s.splice(i..i, w.bytes());
            }
            3 if n > 0 => {
                // Duplicate a chunk.
                let i = g.below(n);
                let len = g.below((n - i).min(64) + 1);
                let chunk: Vec<u8> = s[i..i + len].to_vec();
                let j = g.below(n + 1);
                s.splice(j..j, chunk);
            }
            4 => {
                let i = g.below(n + 1);
                let b = [b'"', b'\'', b'[', b']', b'{', b'}', b'=', b'\n', b'#', b'.', b',', b'\\', 0u8, 0xff][g.below(14)];
                s.insert(i, b);
            }
            _ => {
                // Replace a whitespace-separated token.
                let t = String::from_utf8_lossy(&s).into_owned();
                let toks: Vec<&str> = t.split(' ').collect();
                let i = g.below(toks.len());
                let mut toks: Vec<String> = toks.iter().map(|x| x.to_string()).collect();
                toks[i] = g.pick(dict).clone();
                s = toks.join(" ").into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

/// Scenario-level mutations: set a key of some table to an edge value, add a table, repeat
/// or drop a line, or splice in a table of another seed.
fn mutate_scenario(g: &mut Gen, text: &str, seeds: &[String], keys: &[String], tc: &[String]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + g.below(4) {
        let n = lines.len();
        match g.below(9) {
            0..=2 if n > 0 => {
                // A value replaced (the key's line kept).
                let i = g.below(n);
                if let Some((k, _)) = lines[i].split_once('=') {
                    let k = k.to_string();
                    lines[i] = format!("{k}= {}", g.toml_value(tc));
                }
            }
            3 => {
                let i = g.below(n + 1);
                let line = format!("{} = {}", g.pick(keys), g.toml_value(tc));
                lines.insert(i, line);
            }
            4 => {
                let header = g.pick(HEADERS).to_string();
                let body: Vec<String> = (0..g.below(5)).map(|_| format!("{} = {}", g.pick(keys), g.toml_value(tc))).collect();
                lines.push(header);
                lines.extend(body);
            }
            5 if n > 0 => {
                let i = g.below(n);
                let l = lines[i].clone();
                lines.insert(g.below(n + 1), l);
            }
            6 if n > 0 => {
                lines.remove(g.below(n));
            }
            7 => {
                let other: Vec<&str> = g.pick(seeds).lines().collect();
                if !other.is_empty() {
                    let a = g.below(other.len());
                    let b = a + g.below(other.len() - a + 1);
                    lines.extend(other[a..b].iter().map(|x| x.to_string()));
                }
            }
            _ => {
                let t = mutate(g, &lines.join("\n"), keys);
                lines = t.lines().map(str::to_string).collect();
            }
        }
    }
    lines.join("\n") + "\n"
}

const HEADERS: &[&str] = &[
    "[[flows]]", "[[udp]]", "[[media]]", "[[probes]]", "[[workloads]]", "[[transients]]", "[[tunnels]]", "[bottleneck]",
    "[[bottleneck.changes]]", "[limits]", "[metrics]", "[return_path]", "[netem]", "[flows]", "[[bottleneck]]", "[a.b.c]",
];

/// The keys that the seeds set (`key =` at the start of a line).
fn keys_of(seeds: &[String]) -> Vec<String> {
    let mut keys: Vec<String> = seeds
        .iter()
        .flat_map(|s| s.lines())
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_string()))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// `--set` assignments the seeds make: `path=value` for every `key = value` line, the path
/// qualified by its table (`bottleneck.rate`, `flows[0].cc` or `flows[*].cc`).
fn assignments_of(seeds: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for s in seeds {
        let mut prefix = String::new();
        for l in s.lines().map(|l| l.split(" #").next().unwrap_or("").trim()) {
            if let Some(h) = l.strip_prefix("[[").and_then(|h| h.strip_suffix("]]")) {
                prefix = format!("{}[{}].", h.trim(), if out.len() % 2 == 0 { "0" } else { "*" });
            } else if let Some(h) = l.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                prefix = format!("{}.", h.trim());
            } else if let Some((k, v)) = l.split_once('=') {
                if !k.trim().is_empty() && !v.trim().is_empty() {
                    out.push(format!("{prefix}{}={}", k.trim(), v.trim()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Runs `target` on every input, counting outcomes; a violated property fails the test with
/// the input (as a Rust string literal, ready for fuzz/regressions/).
fn drive(name: &str, inputs: impl Iterator<Item = String>, target: fn(&str) -> Outcome) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    for (i, input) in inputs.enumerate() {
        match catch_unwind(AssertUnwindSafe(|| target(&input))) {
            Ok(Outcome::Accepted) => *counts.entry("accepted").or_default() += 1,
            Ok(Outcome::Rejected) => *counts.entry("rejected").or_default() += 1,
            Err(p) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                *counts.entry("crash").or_default() += 1;
                failure.get_or_insert((i, input.clone(), msg));
            }
        }
    }
    std::panic::set_hook(hook);
    println!("fuzz {name}: {counts:?}");
    if let Some((i, input, msg)) = failure {
        panic!("{name}: input {i} broke a property: {msg}\n--- input\n{input:?}");
    }
    counts
}

fn scenario_seeds() -> Vec<String> {
    let mut seeds = read_dir(&repo().join("scenarios"));
    seeds.extend(read_dir(&repo().join("fuzz/seeds/scenario")));
    assert!(seeds.len() > 10, "scenario seeds not found under {}", repo().display());
    seeds
}

fn qdisc_registry() -> Registry {
    Registry::from_json(aqmlab_sim::qdisc::table_json())
}

fn cc_registry() -> Registry {
    Registry::from_json(aqmlab_sim::cc::table_json())
}

/// tc strings for scenario mutations: generated ones of both registries.
fn tc_strings(g: &mut Gen) -> Vec<String> {
    let (q, c) = (qdisc_registry(), cc_registry());
    (0..200).map(|i| if i % 2 == 0 { q.generate(g) } else { c.generate(g) }).collect()
}

fn regressions(target: &str) -> Vec<String> {
    read_dir(&repo().join("fuzz/regressions").join(target))
}

/// Every crash input kept in fuzz/regressions/ through its target, and with AQMLAB_FUZZ_REPLAY
/// set (`make fuzz-replay`) the corpus `make fuzz` grew in fuzz/corpus/<target> (not
/// committed), counted apart: docs/fuzzing.md's outcome table.
#[test]
fn replay_regressions_and_fuzz_corpus() {
    let targets: [(&str, fn(&str) -> Outcome); 4] =
        [("scenario", |t| fuzzing::scenario(t, &[])), ("overrides", fuzzing::overrides), ("qdisc", fuzzing::qdisc), ("cc", fuzzing::cc)];
    for (name, target) in targets {
        let kept = regressions(name);
        assert!(!kept.is_empty(), "no inputs in fuzz/regressions/{name}");
        drive(&format!("{name} regressions"), kept.into_iter(), target);
        if std::env::var_os("AQMLAB_FUZZ_REPLAY").is_some() {
            drive(&format!("{name} corpus"), read_dir(&repo().join("fuzz/corpus").join(name)).into_iter(), target);
        }
    }
}

fn assert_both_outcomes(name: &str, c: &BTreeMap<&str, usize>) {
    // A generator that only ever produces one outcome tests little.
    assert!(c.get("accepted").copied().unwrap_or(0) > 0 && c.get("rejected").copied().unwrap_or(0) > 0, "{name}: {c:?}");
}

#[test]
fn fuzz_scenario_text() {
    let seeds = scenario_seeds();
    let keys = keys_of(&seeds);
    let mut g = Gen::new(14);
    let tc = tc_strings(&mut g);
    let n = cases();
    let mut inputs: Vec<String> = seeds.clone();
    inputs.extend(regressions("scenario"));
    for _ in 0..n {
        let base = g.pick(&seeds).clone();
        inputs.push(mutate_scenario(&mut g, &base, &seeds, &keys, &tc));
    }
    let c = drive("scenario", inputs.into_iter(), |t| fuzzing::scenario(t, &[]));
    assert_both_outcomes("scenario", &c);
}

#[test]
fn fuzz_overrides() {
    let seeds = scenario_seeds();
    let mut keys = keys_of(&seeds);
    // Paths with indices, as `--set` and suites write them.
    for k in ["flows[0].cc", "flows[*].rtt", "flows[1].count", "udp[0].rate", "bottleneck.changes[0].at", "media[0].packet_size", "limits.max_packets", "flows[99999999999].rtt", "flows[].x", "a..b", "[0]", "flows[0][1]"] {
        keys.push(k.to_string());
    }
    let valid = assignments_of(&seeds);
    let mut g = Gen::new(15);
    let tc = tc_strings(&mut g);
    let mut inputs = regressions("overrides");
    for _ in 0..cases() {
        let sets: Vec<String> = (0..1 + g.below(3))
            .map(|_| {
                let set = if g.chance(50) {
                    g.pick(&valid).clone()
                } else {
                    let k = if g.chance(50) { g.pick(&valid).split('=').next().unwrap().to_string() } else { g.pick(&keys).clone() };
                    format!("{k}={}", g.toml_value(&tc))
                };
                if g.chance(15) { mutate(&mut g, &set, &keys) } else { set }
            })
            .collect();
        let input = if g.chance(50) { format!("{}\n\n{}", sets.join("\n"), g.pick(&seeds)) } else { sets.join("\n") };
        inputs.push(input);
    }
    let c = drive("overrides", inputs.into_iter(), fuzzing::overrides);
    assert_both_outcomes("overrides", &c);
}

fn fuzz_spec(name: &str, reg: Registry, target: fn(&str) -> Outcome, seed: u64) {
    let mut g = Gen::new(seed);
    let mut dict: Vec<String> = reg.words.clone();
    dict.extend(reg.kinds.iter().flat_map(|(k, p)| std::iter::once(k.clone()).chain(p.iter().cloned())));
    dict.extend(NUMBERS.iter().map(|s| s.to_string()));
    let mut inputs: Vec<String> = regressions(name);
    // The descriptions the scenarios and suites use, every kind bare, then generated
    // descriptions and mutated seeds.
    let seeds = read_dir(&repo().join("fuzz/seeds").join(name));
    assert!(!seeds.is_empty(), "no seeds in fuzz/seeds/{name}");
    inputs.extend(seeds.iter().cloned());
    inputs.extend(reg.kinds.iter().map(|(k, _)| k.clone()));
    for _ in 0..cases() {
        let d = if g.chance(25) { g.pick(&seeds).clone() } else { reg.generate(&mut g) };
        inputs.push(if g.chance(30) { mutate(&mut g, &d, &dict) } else { d });
    }
    let c = drive(name, inputs.into_iter(), target);
    assert_both_outcomes(name, &c);
}

#[test]
fn fuzz_qdisc_strings() {
    fuzz_spec("qdisc", qdisc_registry(), fuzzing::qdisc, 16);
}

#[test]
fn fuzz_cc_strings() {
    fuzz_spec("cc", cc_registry(), fuzzing::cc, 17);
}

/// Runs a scenario on a thread and fails if it has not finished within `secs` of wall clock
/// (the test binary then exits with the failure; the stuck thread goes with it).
fn finishes_within(text: &'static str, secs: u64) -> aqmlab_sim::RunOutput {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(aqmlab_sim::run_toml(text, None, &[]).expect("valid scenario"));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).unwrap_or_else(|_| panic!("no result within {secs} s (a hang):\n{text}"))
}

/// Found by the no-hang property test (tests/python/test_fuzz_e2e.py): an MSS above
/// GSO_MAX_BYTES (65215) made the size goal zero segments and the sender loop forever at one
/// instant. Linux sends one segment per skb then.
#[test]
fn an_mss_above_the_gso_size_sends_one_segment_per_skb() {
    let out = finishes_within("duration = \"3s\"\n[bottleneck]\nrate = \"10Mbit\"\nqdisc = \"pfifo\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\nmss = 65483\n", 60);
    let goodput = out.summary.flows[0].goodput_mbps;
    assert!(goodput > 5.0, "{goodput} Mbit/s");
}
