//! Traffic sources other than TCP bulk transfers.

pub mod probe;

pub use probe::{Probe, ProbeStats};
