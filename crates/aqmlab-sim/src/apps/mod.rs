//! Traffic sources other than TCP bulk transfers.

pub mod probe;
pub mod scream;
pub mod udp;
pub mod transient;
pub mod workload;

pub use probe::{Probe, ProbeStats};
pub use udp::{UdpSource, UdpStats};
