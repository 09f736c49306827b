//! Path elements other than links and delay lines.

pub mod tunnel;
