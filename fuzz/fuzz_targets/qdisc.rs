//! Fuzz target `qdisc`: a tc-style qdisc description on every era profile, built for three link rates.
//! The properties are `aqmlab_sim::fuzzing::qdisc`'s; a violated one panics.
#![no_main]
use aqmlab_sim::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    fuzzing::qdisc(&text);
});
