//! Fuzz and property targets (issue 14): the scenario parser and validator, the tc-string
//! (qdisc) and cc-string parsers, and `--set` overrides, each with the properties every input
//! must have. A violated property panics, which is what a fuzzer reports as a crash.
//!
//! Two drivers call these functions: the cargo-fuzz targets in `fuzz/` (nightly, `make
//! fuzz`), and a bounded stable-Rust run of generated and mutated inputs in the integration
//! tests (`tests/integration/fuzz.rs`, part of `make test`). `docs/fuzzing.md` has the commands
//! and the counts.
//!
//! Properties:
//! - no input panics (nor aborts on allocation: the fuzzer's RSS limit catches that);
//! - an error is one non-empty line of at most [`MAX_ERROR_CHARS`] characters, and a scenario
//!   error names a key (a dotted path) or, for TOML syntax, a line of the text;
//! - an accepted scenario resolves (`aqmlab check`'s text), and the resolved text is accepted
//!   again as the same scenario and resolves to itself;
//! - an accepted qdisc or cc description re-parses from its own text to an equal
//!   configuration on every era profile, and its instance can be built.

use crate::cc::CcConfig;
use crate::params::{Registered, Spec};
use crate::profile::Stack;
use crate::qdisc::{BuildCtx, QdiscConfig};
use crate::rng::Stream;
use crate::scenario::{resolve_toml, Scenario, ScenarioError};
use crate::time::Rate;

/// The longest error message allowed: values are quoted as excerpts, so a message stays short
/// whatever the input's size (the longest legitimate one lists the known qdiscs).
pub const MAX_ERROR_CHARS: usize = 1000;

/// What an input came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Accepted (and every property of an accepted input held).
    Accepted,
    /// Refused with a clean one-line error.
    Rejected,
}

/// Panics unless `msg` is one non-empty line of at most [`MAX_ERROR_CHARS`] characters.
pub fn check_one_line(what: &str, input: &str, msg: &str) {
    let show = crate::scenario::excerpt(input);
    assert!(!msg.trim().is_empty(), "{what}: empty error for input {show:?}");
    assert!(!msg.contains(['\n', '\r']), "{what}: error is not one line: {msg:?} (input {show:?})");
    let n = msg.chars().count();
    assert!(n <= MAX_ERROR_CHARS, "{what}: error of {n} characters (input {show:?}): {}", crate::scenario::excerpt(msg));
}

/// Panics unless a scenario error is one line naming a key or a line of `text`.
pub fn check_scenario_error(text: &str, e: &ScenarioError) {
    check_one_line("scenario", text, &e.to_string());
    assert!(!e.key.is_empty() || e.line.is_some(), "scenario error names neither a key nor a line: {e}");
    if let Some(l) = e.line {
        let lines = text.lines().count().max(1);
        assert!(l >= 1 && l <= lines + 1, "line {l} of a {lines}-line text: {e}");
    }
}

/// The scenario target: parse and validate `text` with `overrides`; an accepted scenario
/// must resolve to a text that is accepted again as the same scenario and resolves to itself.
pub fn scenario(text: &str, overrides: &[String]) -> Outcome {
    let sc = match Scenario::from_toml(text, overrides) {
        Ok(sc) => sc,
        Err(e) => {
            if overrides.is_empty() {
                check_scenario_error(text, &e);
            } else {
                check_one_line("override", text, &e.to_string());
                // An override without a key path (an empty `--set`) is named as an override.
                assert!(!e.key.is_empty() || e.line.is_some() || e.message.contains("override"), "override error names neither a key nor a line: {e}");
            }
            return Outcome::Rejected;
        }
    };
    for w in sc.warnings() {
        check_one_line("warning", text, &w);
    }
    let resolved = match resolve_toml(text, None, overrides) {
        Ok(r) => r,
        Err(e) => panic!("accepted scenario does not resolve: {e}\n--- input\n{text}"),
    };
    let again = match Scenario::from_toml(&resolved, &[]) {
        Ok(s) => s,
        Err(e) => panic!("resolved text is refused: {e}\n--- input\n{text}\n--- resolved\n{resolved}"),
    };
    assert_eq!(format!("{sc:?}"), format!("{again:?}"), "resolved text is another scenario\n--- input\n{text}\n--- resolved\n{resolved}");
    let twice = resolve_toml(&resolved, None, &[]).expect("resolved text resolves");
    assert_eq!(twice, resolved, "resolving is not idempotent");
    Outcome::Accepted
}

/// Splits a fuzz input into `--set` overrides (the lines before the first empty line, at most
/// 16) and a scenario text (the rest); without an empty line, the whole input is overrides
/// applied to a small valid scenario.
pub fn split_overrides(input: &str) -> (Vec<String>, std::borrow::Cow<'_, str>) {
    const BASE: &str = "duration = \"1s\"\n[bottleneck]\nrate = \"10Mbit\"\nqdisc = \"fq_codel\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"20ms\"\n";
    let (sets, text) = match input.split_once("\n\n") {
        Some((s, t)) => (s, t.into()),
        None => (input, BASE.into()),
    };
    (sets.lines().take(16).map(str::to_string).collect(), text)
}

/// The override target: [`scenario`] on [`split_overrides`] of the input.
pub fn overrides(input: &str) -> Outcome {
    let (sets, text) = split_overrides(input);
    scenario(&text, &sets)
}

/// Link rates the built instances see: the smallest bottleneck a scenario may have, a common
/// one and the largest.
const RATES: [u64; 3] = [1_000, 50_000_000, 100_000_000_000];

/// The qdisc target: parse a tc-style description on every era profile; an accepted one
/// re-parses from its own text to an equal configuration and can be built for any link.
pub fn qdisc(text: &str) -> Outcome {
    spec_target::<dyn QdiscConfig>("qdisc", text, |config, stack| {
        for rate in RATES {
            let mut ctx = BuildCtx { link_rate: Rate(rate), mtu: 1514, rng: Stream::new(1, "fuzz"), stack };
            drop(config.build(&mut ctx));
        }
    })
}

/// The cc target: as [`qdisc`], for congestion-control descriptions.
pub fn cc(text: &str) -> Outcome {
    spec_target::<dyn CcConfig>("cc", text, |config, stack| drop(config.build(Stream::new(1, "cc/0"), stack)))
}

/// One description target for either family ([`crate::qdisc::QdiscSpec`], [`crate::cc::CcSpec`]): parsed on every
/// profile, an error must be one line; an accepted description re-parses from its own text to
/// an equal configuration, and `build` instantiates it.
fn spec_target<C: ?Sized + Registered>(what: &str, text: &str, build: impl Fn(&C, Stack)) -> Outcome {
    let mut outcome = Outcome::Rejected;
    for stack in Stack::ALL {
        match Spec::<C>::parse_for(text, stack) {
            Err(e) => check_one_line(what, text, &e),
            Ok(spec) => {
                outcome = Outcome::Accepted;
                let again = Spec::<C>::parse_for(spec.text(), stack).unwrap_or_else(|e| panic!("{:?} re-parses as: {e}", spec.text()));
                assert!(again == spec, "{:?} re-parses to another configuration", spec.text());
                build(spec.config(), stack);
            }
        }
    }
    outcome
}
