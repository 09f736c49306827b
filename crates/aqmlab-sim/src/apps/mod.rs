//! Traffic sources other than TCP bulk transfers.

pub mod probe;
pub mod scream;
pub mod udp;
pub mod transient;
pub mod workload;

pub use probe::{Probe, ProbeStats};
pub use udp::{UdpSource, UdpStats};

/// Header bytes below a UDP payload on the wire: UDP 8 + IPv4 20 + Ethernet 14.
pub const UDP_IP_ETH: u32 = 8 + 20 + 14;
