//! Queue-discipline specifications, parsed from tc syntax or a TOML table.
//!
//! Both forms go through one parser: a table `{ kind = "pfifo", limit = 1000 }` is turned into
//! the token list `pfifo limit 1000` (a `true` value becomes a bare flag such as `ecn`).

use crate::units::{parse_bytes, parse_limit, Limit};
use serde::de::{self, Deserialize, Deserializer};

/// A parsed discipline with its parameters (kernel names, kernel defaults).
#[derive(Clone, Debug, PartialEq)]
pub enum QdiscSpec {
    /// `pfifo [limit PACKETS]`, default limit 1000 (Linux txqueuelen).
    Pfifo { limit: u32 },
    /// `bfifo [limit BYTES]`, default 1000 x 1500 bytes (txqueuelen x MTU).
    Bfifo { limit: u64 },
}

/// Cursor over `key value` pairs after the kind.
struct Params<'a> {
    kind: &'a str,
    tokens: std::slice::Iter<'a, String>,
}

impl<'a> Params<'a> {
    fn next_key(&mut self) -> Option<&'a str> {
        self.tokens.next().map(|s| s.as_str())
    }
    fn value(&mut self, key: &str) -> Result<&'a str, String> {
        self.tokens
            .next()
            .map(|s| s.as_str())
            .ok_or_else(|| format!("{} parameter '{key}' needs a value", self.kind))
    }
    fn unknown(&self, key: &str, known: &str) -> String {
        format!("{} has no parameter '{key}' (known: {known})", self.kind)
    }
}

impl QdiscSpec {
    /// Parses tc syntax, e.g. `"pfifo limit 1000"`.
    pub fn parse(s: &str) -> Result<QdiscSpec, String> {
        let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        Self::from_tokens(&tokens)
    }

    fn from_tokens(tokens: &[String]) -> Result<QdiscSpec, String> {
        let (kind, rest) = tokens.split_first().ok_or("empty qdisc description")?;
        let mut p = Params { kind: kind.as_str(), tokens: rest.iter() };
        match kind.as_str() {
            "pfifo" => {
                let mut limit = 1000u32;
                while let Some(key) = p.next_key() {
                    match key {
                        "limit" => {
                            let v = p.value(key)?;
                            limit = match parse_limit(v) {
                                Ok(Limit::Packets(n)) => n,
                                _ => return Err(format!("pfifo limit '{v}' must be a packet count, e.g. 1000")),
                            };
                        }
                        _ => return Err(p.unknown(key, "limit")),
                    }
                }
                if limit == 0 {
                    return Err("pfifo limit must be at least 1 packet".into());
                }
                Ok(QdiscSpec::Pfifo { limit })
            }
            "bfifo" => {
                let mut limit = 1000 * 1500u64;
                while let Some(key) = p.next_key() {
                    match key {
                        "limit" => limit = parse_bytes(p.value(key)?).map_err(|e| format!("bfifo limit: {e}"))?,
                        _ => return Err(p.unknown(key, "limit")),
                    }
                }
                if limit == 0 {
                    return Err("bfifo limit must be at least 1 byte".into());
                }
                Ok(QdiscSpec::Bfifo { limit })
            }
            other => Err(format!("unknown qdisc '{other}' (known: pfifo, bfifo)")),
        }
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
            let k = k.replace('_', "-");
            match v {
                toml::Value::Boolean(true) => tokens.push(k),
                toml::Value::Boolean(false) => tokens.push(format!("no{k}")),
                toml::Value::String(s) => tokens.extend([k, s.clone()]),
                toml::Value::Integer(i) => tokens.extend([k, i.to_string()]),
                toml::Value::Float(f) => tokens.extend([k, f.to_string()]),
                _ => return Err(format!("qdisc parameter '{k}' must be a string, number or boolean")),
            }
        }
        Self::from_tokens(&tokens)
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
    fn tc_strings() {
        assert_eq!(QdiscSpec::parse("pfifo limit 1000").unwrap(), QdiscSpec::Pfifo { limit: 1000 });
        assert_eq!(QdiscSpec::parse("pfifo").unwrap(), QdiscSpec::Pfifo { limit: 1000 });
        assert_eq!(QdiscSpec::parse("bfifo limit 150000").unwrap(), QdiscSpec::Bfifo { limit: 150000 });
        assert_eq!(QdiscSpec::parse("bfifo limit 64kb").unwrap(), QdiscSpec::Bfifo { limit: 65536 });
    }

    #[test]
    fn table_and_string_agree() {
        let t: toml::Table = toml::from_str("kind = \"pfifo\"\nlimit = 200").unwrap();
        assert_eq!(QdiscSpec::from_table(&t).unwrap(), QdiscSpec::parse("pfifo limit 200").unwrap());
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(QdiscSpec::parse("pfifo limt 3").unwrap_err().contains("limt"));
        assert!(QdiscSpec::parse("pfifo limit").unwrap_err().contains("needs a value"));
        assert!(QdiscSpec::parse("fq_kodel").unwrap_err().contains("unknown qdisc"));
        assert!(QdiscSpec::parse("pfifo limit 0").is_err());
    }
}
