//! Queue-discipline specifications: a tc-style string (`"pfifo limit 1000"`) or the
//! equivalent TOML table (`{ kind = "pfifo", limit = 1000 }`), parsed against the
//! discipline's parameter table ([`Kind`] in [`super::REGISTRY`]) into a configuration
//! implementing [`QdiscConfig`].

use super::{BuildCtx, Qdisc};
pub use crate::params::{Args, Kind, Param, Params, Type, Value};
use crate::params::{ConfigEq, Registered, Spec};
use std::fmt;

/// A parsed, validated discipline configuration that can build instances.
pub trait QdiscConfig: fmt::Debug + Send + Sync + ConfigEq {
    /// A new instance for a link described by `ctx`.
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc>;
}

/// A discipline's declaration: tc name, parameter table and builder.
pub type QdiscKind = Kind<dyn QdiscConfig>;

impl Registered for dyn QdiscConfig {
    const WHAT: &'static str = "qdisc";
    fn registry() -> &'static [(&'static str, &'static QdiscKind)] {
        super::REGISTRY
    }
    fn config_eq(a: &Self, b: &Self) -> bool {
        a.config_eq(b.as_any())
    }
}

/// A discipline with its parameters.
pub type QdiscSpec = Spec<dyn QdiscConfig>;

impl QdiscSpec {
    /// The tc kind.
    pub fn kind(&self) -> &'static str {
        self.kind_name()
    }
    /// A new instance of the discipline.
    pub fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        self.config().build(ctx)
    }
}

/// Every discipline's declaration as JSON (for `aqmlab qdisc list|show`).
pub fn table_json() -> serde_json::Value {
    crate::params::registry_json::<dyn QdiscConfig>()
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
