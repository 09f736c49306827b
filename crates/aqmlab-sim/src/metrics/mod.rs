//! Streaming measurement: fixed-size histograms for per-packet quantities, grid-sampled
//! series, and the study metrics computed from them (algorithms.md section 5).

mod delay;
mod fct;
mod histogram;
mod series;
mod spikes;
mod steady;
mod summary;

pub use delay::DelayStats;
pub use fct::{empirical_quantile, FctStats};
pub use histogram::LogHistogram;
pub use spikes::{SpikeSummary, SpikeTracker};
pub use series::{ChunkSink, Column, Series, SeriesChunk, SeriesId, SeriesRecorder, Tick};
pub use steady::{jain_index, steady_horizon, steady_state_rate, steady_window};
pub use summary::SojournSummary;
