//! Fuzz target `overrides`: `--set` lines, an empty line, a scenario text (see `fuzzing::split_overrides`).
//! The properties are `aqmlab_sim::fuzzing::overrides`'s; a violated one panics.
#![no_main]
use aqmlab_sim::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    fuzzing::overrides(&text);
});
