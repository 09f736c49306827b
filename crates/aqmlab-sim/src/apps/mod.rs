//! Traffic sources other than TCP bulk transfers.

pub mod probe;
pub mod scream;

pub use probe::{Probe, ProbeStats};
