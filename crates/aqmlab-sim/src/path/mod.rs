//! Path effects and elements between the endpoints and the bottleneck: emulated delay, jitter,
//! loss and bursty release (as the studies' harness applied them with Linux qdiscs on the
//! middlebox), and tunnels.

pub mod netem;
pub mod tunnel;
