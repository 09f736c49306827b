//! Simulated time and link rates.
//!
//! Time is an integer count of nanoseconds since the start of the run, so that event
//! ordering is exact and results are identical on every platform. A `u64` covers 584
//! years of simulated time.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time or a duration, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }
    pub const fn from_micros(us: u64) -> Time {
        Time(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Time {
        Time(s * 1_000_000_000)
    }
    /// Nearest nanosecond to `s` seconds (negative values clamp to zero).
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s * 1e9).round().max(0.0) as u64)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
    /// `self * num / den` without intermediate overflow.
    pub fn mul_div(self, num: u64, den: u64) -> Time {
        Time(((self.0 as u128 * num as u128) / den as u128) as u64)
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}
impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}
impl Sub for Time {
    type Output = Time;
    /// Saturating: a negative duration is a logic error upstream, never a wrap-around.
    fn sub(self, rhs: Time) -> Time {
        Time(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns % 1_000_000_000 == 0 {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns % 1_000_000 == 0 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns % 1_000 == 0 {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{}ns", ns)
        }
    }
}

/// A link or pacing rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    pub const fn bits_per_sec(self) -> u64 {
        self.0
    }
    /// Time to serialise `bytes` at this rate, rounded to the nearest nanosecond.
    ///
    /// 1500 B at 12 Mbit/s is exactly 1 ms.
    pub fn serialisation(self, bytes: u32) -> Time {
        let bits = bytes as u128 * 8 * 1_000_000_000;
        let r = self.0 as u128;
        Time(((bits + r / 2) / r) as u64)
    }
    /// Bytes that fit in `t` at this rate (floor).
    pub fn bytes_in(self, t: Time) -> u64 {
        ((self.0 as u128 * t.0 as u128) / 8_000_000_000) as u64
    }
    pub fn as_mbps(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b % 1_000_000_000 == 0 {
            write!(f, "{}Gbit", b / 1_000_000_000)
        } else if b % 1_000_000 == 0 {
            write!(f, "{}Mbit", b / 1_000_000)
        } else if b % 1_000 == 0 {
            write!(f, "{}Kbit", b / 1_000)
        } else {
            write!(f, "{}bit", b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_of_1500_bytes_at_12_mbit_is_exactly_1ms() {
        assert_eq!(Rate(12_000_000).serialisation(1500), Time::from_millis(1));
    }

    #[test]
    fn serialisation_rounds_to_nearest_ns() {
        // 1500 B at 50 Mbit/s = 240 us exactly; 64 B at 1 Gbit/s = 512 ns.
        assert_eq!(Rate(50_000_000).serialisation(1500), Time::from_micros(240));
        assert_eq!(Rate(1_000_000_000).serialisation(64), Time(512));
        // 1 B at 3 bit/s = 2.666.. s -> rounds up.
        assert_eq!(Rate(3).serialisation(1), Time(2_666_666_667));
    }

    #[test]
    fn time_arithmetic_saturates() {
        assert_eq!(Time(5) - Time(7), Time::ZERO);
        assert_eq!(Time::MAX + Time(1), Time::MAX);
        assert_eq!(Time::from_secs(3).mul_div(1, 3), Time::from_secs(1));
    }
}
