//! Fuzz target `scenario`: a scenario text (TOML): parse, validate, resolve.
//! The properties are `aqmlab_sim::fuzzing::scenario`'s; a violated one panics.
#![no_main]
use aqmlab_sim::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    fuzzing::scenario(&text, &[]);
});
