//! Queue-discipline specifications: a tc-style string (`"pfifo limit 1000"`) or the
//! equivalent TOML table (`{ kind = "pfifo", limit = 1000 }`), parsed by the discipline's own
//! parser from [`super::REGISTRY`] into a configuration implementing [`QdiscConfig`].

use super::{BuildCtx, Qdisc};
pub use crate::params::Params;
use crate::params::{Registered, Spec};
use std::fmt;
use std::sync::Arc;

/// A parsed, validated discipline configuration that can build instances.
pub trait QdiscConfig: fmt::Debug + Send + Sync {
    /// The tc kind, e.g. `"fq_codel"`.
    fn kind(&self) -> &'static str;
    /// A new instance for a link described by `ctx`.
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc>;
}

/// A discipline's parser: reads its parameters and returns its configuration.
pub type Parser = fn(&mut Params) -> Result<Arc<dyn QdiscConfig>, String>;

impl Registered for dyn QdiscConfig {
    const WHAT: &'static str = "qdisc";
    fn registry() -> &'static [(&'static str, Parser)] {
        super::REGISTRY
    }
}

/// A discipline with its parameters.
pub type QdiscSpec = Spec<dyn QdiscConfig>;

impl QdiscSpec {
    /// The tc kind.
    pub fn kind(&self) -> &'static str {
        self.config().kind()
    }
    /// A new instance of the discipline.
    pub fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        self.config().build(ctx)
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
