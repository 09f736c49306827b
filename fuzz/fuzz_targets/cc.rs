//! Fuzz target `cc`: a congestion-control description on every era profile, built.
//! The properties are `aqmlab_sim::fuzzing::cc`'s; a violated one panics.
#![no_main]
use aqmlab_sim::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    fuzzing::cc(&text);
});
