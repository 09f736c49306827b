//! Parsing of quantities with units, following tc's conventions (`tc(8)`, "PARAMETERS"):
//! units are case-insensitive; rates use SI prefixes on bits (`50Mbit` = 50e6 bit/s) and
//! `bps` means *bytes* per second; sizes use binary prefixes (`1kb` = 1024 bytes).
//! Times accept `s`, `ms`, `us`, `ns` (and tc's `sec`/`msec`/`usec` spellings).

use crate::time::{Rate, Time};

/// A queue limit, in packets (`1000p`) or bytes (`150000b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Packets(u32),
    Bytes(u64),
}

/// A leading decimal number (digits, a point, an optional exponent `e[+-]digits`: no unit
/// starts with `e`) and the rest, lower-cased.
fn split_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let b = s.as_bytes();
    let digits = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit() || **c == b'.').count();
    let mut end = digits(0);
    if end == 0 {
        return None;
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(end + 1), Some(b'+' | b'-')));
        let exp_end = end + 1 + sign + b[end + 1 + sign..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_end > end + 1 + sign {
            end = exp_end;
        }
    }
    let value: f64 = s[..end].parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    Some((value, s[end..].trim().to_ascii_lowercase()))
}

/// Parses a duration such as `20ms`, `1.5s`, `200us`. `bare_unit` is the multiplier in ns
/// applied when no unit is given (`None` makes the unit mandatory).
pub fn parse_time(s: &str, bare_unit: Option<u64>) -> Result<Time, String> {
    let bad = || format!("invalid time '{s}': expected a number with a unit s, ms, us or ns (e.g. 20ms)");
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: f64 = match unit.as_str() {
        "" => bare_unit.ok_or_else(bad)? as f64,
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "us" | "usec" | "usecs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        _ => return Err(bad()),
    };
    let ns = v * mult;
    if ns > 1e18 {
        return Err(format!("time '{s}' is too large"));
    }
    Ok(Time(ns.round() as u64))
}

/// Parses a rate such as `50Mbit`, `1.5Gbit`, `100kbit`, `1mbps` (bytes/s). A bare number is
/// bits per second, as in tc.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let bad = || format!("invalid rate '{s}': expected a number with a unit bit, kbit, mbit, gbit or bps, kbps, mbps, gbps (e.g. 50Mbit)");
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: f64 = match unit.as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return Err(bad()),
    };
    let bits = (v * mult).round();
    if bits < 1.0 {
        return Err(format!("rate '{s}' must be at least 1 bit/s"));
    }
    if bits > 1e13 {
        return Err(format!("rate '{s}' is too large (at most 10Tbit)"));
    }
    Ok(Rate(bits as u64))
}

/// Longest number an error message repeats as written; a longer one (`1e300` written out, issue
/// 14) is named once or shown in exponent form ([`crate::scenario::short_f64`]).
pub(crate) const LONG_NUMBER_CHARS: usize = 20;

/// Parses a rate that must carry its unit (the scenario's `rate`, `bitrate`, ...): a bare
/// `50` is refused, as times without units are, because reading it as 50 bit/s (tc's rule,
/// kept for tc-syntax qdisc arguments) turns a forgotten `Mbit` into a link a million times
/// slower than meant.
pub fn parse_rate_with_unit(s: &str) -> Result<Rate, String> {
    match split_number(s) {
        Some((_, unit)) if unit.is_empty() => {
            let s = s.trim();
            if s.len() <= LONG_NUMBER_CHARS {
                Err(format!("invalid rate '{s}': a unit is needed, e.g. {s}Mbit or {s}kbit ({s}bit for bits per second)"))
            } else {
                Err(format!("invalid rate '{s}': a unit is needed, e.g. Mbit or kbit after the number (bit for bits per second)"))
            }
        }
        _ => parse_rate(s),
    }
}

/// Parses a size in bytes such as `1448`, `150000b`, `64kb` (1024-based, as tc; the IEC
/// spellings `64KiB`, `2MiB` mean the same).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let bad = || format!("invalid size '{s}': expected bytes, e.g. 1500, 150000b, 64kb, 2mb");
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    Ok((v * mult).round() as u64)
}

/// Parses a queue limit: `1000p` (packets) or a byte size (`150000b`, `64kb`).
/// A bare number is taken as packets, the unit of pfifo's `limit`.
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    let t = s.trim().to_ascii_lowercase();
    if let Some(n) = t.strip_suffix('p') {
        return n
            .parse::<u32>()
            .map(Limit::Packets)
            .map_err(|_| format!("invalid limit '{s}': expected e.g. 1000p or 150000b"));
    }
    if t.chars().all(|c| c.is_ascii_digit()) && !t.is_empty() {
        return t
            .parse::<u32>()
            .map(Limit::Packets)
            .map_err(|_| format!("invalid limit '{s}'"));
    }
    parse_bytes(s).map(Limit::Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("20ms", None).unwrap(), Time::from_millis(20));
        assert_eq!(parse_time("1.5s", None).unwrap(), Time::from_millis(1500));
        assert_eq!(parse_time("200us", None).unwrap(), Time::from_micros(200));
        assert_eq!(parse_time("7", Some(1000)).unwrap(), Time::from_micros(7));
        assert!(parse_time("7", None).is_err());
        assert!(parse_time("20mz", None).unwrap_err().contains("20mz"));
        assert!(parse_time("-3ms", None).is_err());
    }

    #[test]
    fn rates_follow_tc() {
        assert_eq!(parse_rate("50Mbit").unwrap(), Rate(50_000_000));
        assert_eq!(parse_rate("1.5Gbit").unwrap(), Rate(1_500_000_000));
        assert_eq!(parse_rate("100kbit").unwrap(), Rate(100_000));
        assert_eq!(parse_rate("1mbps").unwrap(), Rate(8_000_000));
        assert!(parse_rate("50Mbot").is_err());
        assert!(parse_rate("0bit").is_err());
        assert_eq!(parse_rate("50").unwrap(), Rate(50), "tc syntax: a bare number is bit/s");
    }

    #[test]
    fn scenario_rates_need_a_unit() {
        assert_eq!(parse_rate_with_unit("50Mbit").unwrap(), Rate(50_000_000));
        assert_eq!(parse_rate_with_unit("50bit").unwrap(), Rate(50));
        for bare in ["50", " 50 ", "1.5"] {
            let e = parse_rate_with_unit(bare).unwrap_err();
            assert!(e.contains("a unit is needed") && e.contains(&format!("{}Mbit", bare.trim())), "{e}");
        }
        assert!(parse_rate_with_unit("50Mbot").unwrap_err().contains("expected a number with a unit"));
        // Exponents: 1e300s is too large (not "expected a number with a unit"), 1.5e-3s is 1.5 ms.
        assert_eq!(parse_time("1e300s", None).unwrap_err(), "time '1e300s' is too large");
        assert_eq!(parse_time("1.5e-3s", None), Ok(Time(1_500_000)));
        assert_eq!(parse_rate("2E+6"), parse_rate("2Mbit"));
        assert!(parse_time("1es", None).is_err());
    }

    #[test]
    fn sizes_and_limits() {
        assert_eq!(parse_bytes("64kb").unwrap(), 65536);
        assert_eq!((parse_bytes("64KiB").unwrap(), parse_bytes("2MiB").unwrap()), (65536, 2 << 20));
        assert_eq!(parse_limit("1000p").unwrap(), Limit::Packets(1000));
        assert_eq!(parse_limit("1000").unwrap(), Limit::Packets(1000));
        assert_eq!(parse_limit("150000b").unwrap(), Limit::Bytes(150000));
        assert!(parse_limit("12x").is_err());
    }
}
