//! Parameter lists in tc style (`kind key value flag ...`), shared by queue disciplines and
//! congestion controls: one parser for a tc-style string and for the equivalent TOML table.

use crate::time::{Rate, Time};
use crate::units::{parse_bytes, parse_limit, parse_rate, parse_time, Limit};
use serde::de::{self, Deserialize, Deserializer};
use std::fmt;
use std::sync::Arc;

/// Cursor over the `key value` tokens after the kind, with typed readers that produce
/// one-line errors naming the discipline and the parameter.
pub struct Params<'a> {
    kind: &'a str,
    tokens: std::slice::Iter<'a, String>,
}

impl<'a> Params<'a> {
    pub fn new(kind: &'a str, tokens: &'a [String]) -> Self {
        Params { kind, tokens: tokens.iter() }
    }
    /// The next parameter name (or flag), if any.
    pub fn next_key(&mut self) -> Option<&'a str> {
        self.tokens.next().map(|s| s.as_str())
    }
    /// The next token without taking it (tc's `NEXT_IS_NUMBER` look-ahead).
    pub fn peek(&self) -> Option<&'a str> {
        self.tokens.clone().next().map(|s| s.as_str())
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
    /// A time parsed as iproute2's `get_time64`: a bare number is nanoseconds.
    pub fn time64(&mut self, key: &str) -> Result<Time, String> {
        self.typed(key, |v| parse_time(v, Some(1)))
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


/// Turns a TOML table `{ kind = "x", key = value, flag = true }` into the tokens
/// `x key value flag` (a `false` flag becomes `noflag`). `what` names the table in errors.
pub fn table_to_tokens(t: &toml::Table, what: &str) -> Result<Vec<String>, String> {
    let kind = match t.get("kind") {
        Some(toml::Value::String(k)) => k.clone(),
        Some(_) => return Err(format!("{what} 'kind' must be a string")),
        None => return Err(format!("{what} table needs a 'kind' key")),
    };
    let mut tokens = vec![kind];
    for (k, v) in t.iter().filter(|(k, _)| k.as_str() != "kind") {
        match v {
            toml::Value::Boolean(true) => tokens.push(k.clone()),
            toml::Value::Boolean(false) => tokens.push(format!("no{k}")),
            toml::Value::String(s) => tokens.extend([k.clone(), s.clone()]),
            toml::Value::Integer(i) => tokens.extend([k.clone(), i.to_string()]),
            toml::Value::Float(f) => tokens.extend([k.clone(), f.to_string()]),
            _ => return Err(format!("{what} parameter '{k}' must be a string, number or boolean")),
        }
    }
    Ok(tokens)
}

/// A family of configurable components selected by name (queue disciplines, congestion
/// controls): its registry of names and parsers.
pub trait Registered: fmt::Debug + Send + Sync + 'static {
    /// What the family is called in error messages ("qdisc", "congestion control").
    const WHAT: &'static str;
    /// Names and parsers.
    fn registry() -> &'static [(&'static str, fn(&mut Params) -> Result<Arc<Self>, String>)];
}

/// A parsed component description: the text as given and the validated configuration.
/// Cheap to clone.
#[derive(Debug)]
pub struct Spec<C: ?Sized> {
    text: String,
    config: Arc<C>,
}

impl<C: ?Sized> Clone for Spec<C> {
    fn clone(&self) -> Self {
        Spec { text: self.text.clone(), config: self.config.clone() }
    }
}

impl<C: ?Sized + fmt::Debug> PartialEq for Spec<C> {
    /// Two specs are equal when their parsed configurations are.
    fn eq(&self, other: &Self) -> bool {
        format!("{:?}", self.config) == format!("{:?}", other.config)
    }
}

impl<C: ?Sized + Registered> Spec<C> {
    /// Parses tc-style text, e.g. `"fq_codel flows 1 target 1ms"` or `"prague"`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        Self::from_tokens(&tokens)
    }

    fn from_tokens(tokens: &[String]) -> Result<Self, String> {
        let (kind, rest) = tokens.split_first().ok_or_else(|| format!("empty {} description", C::WHAT))?;
        let parser = C::registry().iter().find(|(k, _)| *k == kind.as_str()).map(|(_, p)| *p).ok_or_else(|| {
            let known: Vec<&str> = C::registry().iter().map(|(k, _)| *k).collect();
            format!("unknown {} '{kind}' (known: {})", C::WHAT, known.join(", "))
        })?;
        let config = parser(&mut Params::new(kind.as_str(), rest))?;
        Ok(Spec { text: tokens.join(" "), config })
    }

    /// Parses a TOML table `{ kind = "...", key = value, flag = true }`.
    pub fn from_table(t: &toml::Table) -> Result<Self, String> {
        Self::from_tokens(&table_to_tokens(t, C::WHAT)?)
    }

    /// The description as given (tokens joined by single spaces).
    pub fn text(&self) -> &str {
        &self.text
    }
    pub fn config(&self) -> &C {
        &self.config
    }
}

impl<'de, C: ?Sized + Registered> Deserialize<'de> for Spec<C> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => Spec::parse(&s).map_err(de::Error::custom),
            toml::Value::Table(t) => Spec::from_table(&t).map_err(de::Error::custom),
            _ => Err(de::Error::custom(format!("{} must be a tc-style string or a table with 'kind'", C::WHAT))),
        }
    }
}
