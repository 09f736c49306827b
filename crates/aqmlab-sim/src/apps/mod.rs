//! Traffic: the applications at the endpoints. `bulk.rs` is a TCP transfer (a `[[flows]]`
//! copy or a transient group's member); the others are traffic other than TCP bulk
//! transfers. Each file also holds its endpoint's series and `summary.json` entry.

pub mod bulk;
pub mod media;
pub mod probe;
pub mod scream;
pub mod scream_script;
pub mod transient;
pub mod udp;
pub mod workload;

pub use probe::{Probe, ProbeStats};
pub use udp::{UdpSource, UdpStats};
