//! Queue-discipline specifications, parsed from tc syntax or a TOML table.
//!
//! Both forms go through one parser: a table `{ kind = "pfifo", limit = 1000 }` is turned into
//! the token list `pfifo limit 1000` (a `true` value becomes a bare flag such as `ecn`, a
//! `false` one `noecn`). Each discipline parses its own parameters from a [`Params`] cursor
//! into a configuration implementing [`QdiscConfig`]; [`super::REGISTRY`] maps tc kinds to
//! those parsers.

use super::{BuildCtx, Qdisc};
use crate::time::{Rate, Time};
use crate::units::{parse_bytes, parse_limit, parse_rate, parse_time, Limit};
use serde::de::{self, Deserialize, Deserializer};
use std::fmt;
use std::sync::Arc;

/// A parsed, validated discipline configuration that can build instances.
pub trait QdiscConfig: fmt::Debug + Send + Sync {
    /// The tc kind, e.g. `"fq_codel"`.
    fn kind(&self) -> &'static str;
    /// A new instance for a link described by `ctx`.
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc>;
}

/// A discipline with its parameters; cheap to clone.
#[derive(Clone, Debug)]
pub struct QdiscSpec {
    text: String,
    config: Arc<dyn QdiscConfig>,
}

impl PartialEq for QdiscSpec {
    /// Two specs are equal when their parsed configurations are.
    fn eq(&self, other: &Self) -> bool {
        format!("{:?}", self.config) == format!("{:?}", other.config)
    }
}

/// Cursor over the `key value` tokens after the kind, with typed readers that produce
/// one-line errors naming the discipline and the parameter.
pub struct Params<'a> {
    kind: &'a str,
    tokens: std::slice::Iter<'a, String>,
}

impl<'a> Params<'a> {
    /// The next parameter name (or flag), if any.
    pub fn next_key(&mut self) -> Option<&'a str> {
        self.tokens.next().map(|s| s.as_str())
    }
    /// The raw value following `key`.
    pub fn value(&mut self, key: &str) -> Result<&'a str, String> {
        self.tokens.next().map(|s| s.as_str()).ok_or_else(|| format!("{} parameter '{key}' needs a value", self.kind))
    }
    fn typed<T>(&mut self, key: &str, parse: impl FnOnce(&str) -> Result<T, String>) -> Result<T, String> {
        let v = self.value(key)?;
        parse(v).map_err(|e| format!("{} {key}: {e}", self.kind))
    }
    /// A time; a bare number is microseconds, as in tc.
    pub fn time(&mut self, key: &str) -> Result<Time, String> {
        self.typed(key, |v| parse_time(v, Some(1_000)))
    }
    pub fn rate(&mut self, key: &str) -> Result<Rate, String> {
        self.typed(key, parse_rate)
    }
    /// A size in bytes (`1514`, `64kb`).
    pub fn bytes(&mut self, key: &str) -> Result<u64, String> {
        self.typed(key, parse_bytes)
    }
    /// A limit in packets (`1000`, `1000p`) or bytes (`150000b`).
    pub fn limit(&mut self, key: &str) -> Result<Limit, String> {
        self.typed(key, parse_limit)
    }
    /// An unsigned integer within `range`.
    pub fn uint(&mut self, key: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
        self.typed(key, |v| {
            let n: u64 = v.parse().map_err(|_| format!("'{v}' is not a whole number"))?;
            if range.contains(&n) {
                Ok(n)
            } else {
                Err(format!("{n} is out of range {}..{}", range.start(), range.end()))
            }
        })
    }
    /// A real number within `range`.
    pub fn real(&mut self, key: &str, range: std::ops::RangeInclusive<f64>) -> Result<f64, String> {
        self.typed(key, |v| {
            let x: f64 = v.parse().map_err(|_| format!("'{v}' is not a number"))?;
            if x.is_finite() && range.contains(&x) {
                Ok(x)
            } else {
                Err(format!("{x} is out of range {}..{}", range.start(), range.end()))
            }
        })
    }
    /// The error for a parameter this discipline does not have.
    pub fn unknown(&self, key: &str, known: &str) -> String {
        format!("{} has no parameter '{key}' (known: {known})", self.kind)
    }
    /// An error about this discipline's parameters as a whole.
    pub fn invalid(&self, msg: impl fmt::Display) -> String {
        format!("{}: {msg}", self.kind)
    }
}

/// A discipline's parser: reads its parameters and returns its configuration.
pub type Parser = fn(&mut Params) -> Result<Arc<dyn QdiscConfig>, String>;

impl QdiscSpec {
    /// Parses tc syntax, e.g. `"fq_codel flows 1 target 1ms interval 20ms"`.
    pub fn parse(s: &str) -> Result<QdiscSpec, String> {
        let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        Self::from_tokens(&tokens)
    }

    fn from_tokens(tokens: &[String]) -> Result<QdiscSpec, String> {
        let (kind, rest) = tokens.split_first().ok_or("empty qdisc description")?;
        let parser = super::REGISTRY.iter().find(|(k, _)| *k == kind.as_str()).map(|(_, p)| *p).ok_or_else(|| {
            let known: Vec<&str> = super::REGISTRY.iter().map(|(k, _)| *k).collect();
            format!("unknown qdisc '{kind}' (known: {})", known.join(", "))
        })?;
        let mut p = Params { kind: kind.as_str(), tokens: rest.iter() };
        let config = parser(&mut p)?;
        Ok(QdiscSpec { text: tokens.join(" "), config })
    }

    /// Parses a TOML table `{ kind = "...", key = value, flag = true }`.
    pub fn from_table(t: &toml::Table) -> Result<QdiscSpec, String> {
        let kind = match t.get("kind") {
            Some(toml::Value::String(k)) => k.clone(),
            Some(_) => return Err("qdisc 'kind' must be a string such as \"pfifo\"".into()),
            None => return Err("qdisc table needs a 'kind' key, e.g. kind = \"pfifo\"".into()),
        };
        let mut tokens = vec![kind];
        for (k, v) in t.iter().filter(|(k, _)| k.as_str() != "kind") {
            match v {
                toml::Value::Boolean(true) => tokens.push(k.clone()),
                toml::Value::Boolean(false) => tokens.push(format!("no{k}")),
                toml::Value::String(s) => tokens.extend([k.clone(), s.clone()]),
                toml::Value::Integer(i) => tokens.extend([k.clone(), i.to_string()]),
                toml::Value::Float(f) => tokens.extend([k.clone(), f.to_string()]),
                _ => return Err(format!("qdisc parameter '{k}' must be a string, number or boolean")),
            }
        }
        Self::from_tokens(&tokens)
    }

    /// The tc kind.
    pub fn kind(&self) -> &'static str {
        self.config.kind()
    }
    /// The description in tc syntax, as given.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// A new instance of the discipline.
    pub fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        self.config.build(ctx)
    }
}

impl<'de> Deserialize<'de> for QdiscSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => QdiscSpec::parse(&s).map_err(de::Error::custom),
            toml::Value::Table(t) => QdiscSpec::from_table(&t).map_err(de::Error::custom),
            _ => Err(de::Error::custom("qdisc must be a tc-style string (\"pfifo limit 1000\") or a table")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_string_agree() {
        let t: toml::Table = toml::from_str("kind = \"pfifo\"\nlimit = 200").unwrap();
        assert_eq!(QdiscSpec::from_table(&t).unwrap(), QdiscSpec::parse("pfifo limit 200").unwrap());
        assert_ne!(QdiscSpec::parse("pfifo limit 201").unwrap(), QdiscSpec::parse("pfifo limit 200").unwrap());
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(QdiscSpec::parse("pfifo limt 3").unwrap_err().contains("limt"));
        assert!(QdiscSpec::parse("pfifo limit").unwrap_err().contains("needs a value"));
        assert!(QdiscSpec::parse("fq_kodel").unwrap_err().contains("unknown qdisc"));
        assert!(QdiscSpec::parse("pfifo limit 0").is_err());
        assert!(QdiscSpec::parse("").is_err());
    }
}
