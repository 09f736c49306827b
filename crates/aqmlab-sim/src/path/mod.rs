//! The path between the endpoints: the elements a packet passes through (`Element`: delay
//! lines, links with their queue discipline, ECN rewriting, netem, tunnel ends), dispatched
//! by `match`, and the shared links as the engine observes and changes them. Path effects
//! model what the studies' harness applied with Linux qdiscs on the middlebox (emulated
//! delay, jitter, loss, bursty release) and tunnels.

pub mod delay;
pub mod element;
pub mod link;
pub mod netem;
pub mod route;
pub mod shared;
pub mod tunnel;

pub use delay::DelayLine;
pub use element::{Element, ElementCtx};
pub use link::{Link, LinkStats, QueueStats};
pub use route::Route;
