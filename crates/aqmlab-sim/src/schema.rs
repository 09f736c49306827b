//! The JSON Schema of the scenario format (`aqmlab scenario schema`), generated from the
//! serde structs of [`crate::scenario`] with `schemars`: the structs stay the one place the
//! format is defined, and their doc comments become the schema's descriptions.
//!
//! The schema describes shape (keys, types, enums, unit-carrying strings); the engine's
//! checks (ranges, cross-key rules, a qdisc's parameters) stay in `Scenario::from_toml`,
//! which `aqmlab check` runs. Values parsed from text (times, rates, sizes, tc-syntax
//! qdisc/cc descriptions) get a schema here that says what the parser accepts.

use crate::params::{Registered, Spec};
use crate::path::netem::NetemSpec;
use crate::profile::Stack;
use crate::scenario::Scenario;
use crate::time::{Rate, Time};
use schemars::gen::{SchemaGenerator, SchemaSettings};
use schemars::schema::Schema;
use schemars::JsonSchema;
use serde_json::{json, Value};

fn schema(v: Value) -> Schema {
    serde_json::from_value(v).expect("a valid schema literal")
}

/// A pattern for a number followed by one of `units`, any case, as `units::split_number`
/// reads it (JSON Schema patterns have no flags, so each letter becomes a class).
fn unit_pattern(units: &[&str]) -> String {
    let ci = |w: &str| -> String {
        w.chars().map(|c| if c.is_ascii_alphabetic() { format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase()) } else { c.to_string() }).collect()
    };
    let alts: Vec<String> = units.iter().map(|u| ci(u)).collect();
    format!(r"^\s*[0-9]*\.?[0-9]+\s*({})\s*$", alts.join("|"))
}

const TIME_UNITS: &[&str] = &["s", "sec", "secs", "ms", "msec", "msecs", "us", "usec", "usecs", "ns", "nsec", "nsecs"];
const RATE_UNITS: &[&str] =
    &["bit", "kbit", "mbit", "gbit", "tbit", "kibit", "mibit", "gibit", "bps", "kbps", "mbps", "gbps"];

impl JsonSchema for Time {
    fn schema_name() -> String {
        "Time".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema(json!({
            "type": "string",
            "description": "A time with its unit: s, ms, us or ns (e.g. \"20ms\", \"1.5s\").",
            "pattern": unit_pattern(TIME_UNITS),
            "examples": ["20ms", "1.5s", "200us"],
        }))
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> String {
        "Rate".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema(json!({
            "type": "string",
            "description": "A rate with its unit: bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps, gbps \
                            (bytes/s), any case (e.g. \"50Mbit\"). A bare number is refused.",
            "pattern": unit_pattern(RATE_UNITS),
            "examples": ["50Mbit", "1Gbit", "100kbit"],
        }))
    }
}

impl JsonSchema for Stack {
    fn schema_name() -> String {
        "Stack".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Stack::ALL.iter().map(|s| s.name()).collect();
        schema(json!({
            "type": "string",
            "description": "The era profile: which kernel's version of each algorithm runs (docs/profiles; default \"linux\").",
            "enum": names,
        }))
    }
}

impl JsonSchema for NetemSpec {
    fn schema_name() -> String {
        "Netem".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema(json!({
            "type": "string",
            "description": "A netem description in tc syntax, e.g. \"delay 10ms 2ms distribution normal loss 1%\" \
                            or \"slot 800us 1.2ms packets 42\".",
        }))
    }
}

/// A qdisc or congestion control: tc-style text whose first word is a kind of the family, or
/// a table with `kind` and the kind's parameters. The parameters are checked by the engine
/// (`aqmlab qdisc show KIND` / `aqmlab cc show KIND` list them), not by the schema.
impl<C: ?Sized + Registered> JsonSchema for Spec<C> {
    fn schema_name() -> String {
        let what: String = C::WHAT.split_whitespace().map(|w| w[..1].to_uppercase() + &w[1..]).collect();
        format!("{what}Spec")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = C::registry().iter().map(|(n, _)| *n).collect();
        let what = C::WHAT;
        let escaped: Vec<String> = names.iter().map(|n| regex_escape(n)).collect();
        schema(json!({
            "description": format!(
                "A {what}: tc-style text \"KIND [PARAM VALUE | FLAG]...\" or a table {{ kind = \"KIND\", PARAM = VALUE }}. \
                 Kinds: {}.", names.join(", ")),
            "anyOf": [
                {
                    "type": "string",
                    "pattern": format!(r"^\s*({})(\s|$)", escaped.join("|")),
                    "examples": names,
                },
                {
                    "type": "object",
                    "required": ["kind"],
                    "properties": { "kind": { "type": "string", "enum": names } },
                },
            ],
        }))
    }
}

fn regex_escape(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// `schema_with` for sizes in bytes (`de_bytes`): an integer or text with a unit.
pub(crate) fn bytes(_: &mut SchemaGenerator) -> Schema {
    schema(json!({
        "description": "A size in bytes: an integer, or text with a unit b, kb, mb, gb (1024-based, as tc; KiB, MiB too), e.g. \"2mb\".",
        "anyOf": [{ "type": "integer", "minimum": 0 }, { "type": "string" }],
    }))
}

/// `schema_with` for the `[limits]` counts: an integer, a whole float such as 1e10, or its text.
pub(crate) fn count(_: &mut SchemaGenerator) -> Schema {
    schema(json!({
        "description": "A count: a whole number from 1, e.g. 2000000000 or 2e9.",
        "anyOf": [{ "type": "integer", "minimum": 1 }, { "type": "number", "minimum": 1 }, { "type": "string" }],
    }))
}

/// `schema_with` for `seed`: a TOML integer, or decimal text above TOML's i64 range.
pub(crate) fn seed(_: &mut SchemaGenerator) -> Schema {
    schema(json!({
        "description": "Seed of every random stream of the run (default 1): an integer 0..2^64-1 (text above 2^63-1).",
        "anyOf": [{ "type": "integer", "minimum": 0 }, { "type": "string", "pattern": r"^\s*[0-9]+\s*$" }],
    }))
}

/// `schema_with` for `metrics.steady_window`: a time or "auto".
pub(crate) fn steady_window(gen: &mut SchemaGenerator) -> Schema {
    schema(json!({
        "description": "Window at the end of the run over which steady-state statistics are taken, or \"auto\".",
        "anyOf": [serde_json::to_value(gen.subschema_for::<Time>()).unwrap(), { "const": "auto" }],
    }))
}

/// `schema_with` for `flows`: a `[[flows]]` entry is a TCP flow, or a media flow written as a
/// flow with `cc = "scream"` (moved to `[[media]]` before parsing; see `move_media_flows`).
pub(crate) fn flows(gen: &mut SchemaGenerator) -> Schema {
    let flow = serde_json::to_value(gen.subschema_for::<crate::scenario::FlowSpec>()).unwrap();
    schema(json!({
        "type": "array",
        "items": {
            "anyOf": [
                flow,
                {
                    "type": "object",
                    "description": "A SCReAM media flow written as a flow: the keys of [[media]], with cc = \"scream\".",
                    "required": ["cc"],
                    "properties": { "cc": { "const": "scream" } },
                },
            ],
        },
    }))
}

/// The scenario format's JSON Schema (draft-07), pretty-printed.
pub fn scenario_schema() -> Value {
    let settings = SchemaSettings::draft07().with(|s| {
        s.option_add_null_type = false;
    });
    let root = settings.into_generator().into_root_schema_for::<Scenario>();
    let mut v = serde_json::to_value(root).expect("schema serialises");
    drop_null_defaults(&mut v);
    if let Value::Object(m) = &mut v {
        m.insert("$id".into(), json!("https://aqmlab.invalid/aqmlab-scenario.schema.json"));
        m.insert("title".into(), json!("aqmlab scenario"));
    }
    v
}

/// Removes `"default": null` (what schemars writes for an omitted `Option` key): TOML has no
/// null, so an editor must not offer it.
fn drop_null_defaults(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("default") == Some(&Value::Null) {
                m.remove("default");
            }
            m.values_mut().for_each(drop_null_defaults);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_null_defaults),
        _ => {}
    }
}

/// [`scenario_schema`] as pretty JSON text.
pub fn scenario_schema_text() -> String {
    serde_json::to_string_pretty(&scenario_schema()).expect("schema serialises") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_lists_the_top_level_keys_and_refuses_others() {
        let v = scenario_schema();
        let props = v["properties"].as_object().expect("properties");
        for key in ["name", "duration", "seed", "stack", "bottleneck", "return", "metrics", "flows", "probes", "media", "udp", "workloads", "transients", "tunnels", "host"] {
            assert!(props.contains_key(key), "missing {key}");
        }
        assert!(!props.contains_key("return_path"), "serde's rename is used");
        assert_eq!(v["additionalProperties"], json!(false));
        let req: Vec<&str> = v["required"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
        assert_eq!(req, ["bottleneck", "duration"]);
        assert!(!scenario_schema_text().contains("\"default\": null"), "TOML has no null");
        // Doc comments become descriptions.
        assert!(props["probes"]["description"].as_str().unwrap().contains("Latency probes"));
    }

    #[test]
    fn spec_schemas_name_the_registered_kinds() {
        let v = scenario_schema();
        let qd = &v["definitions"]["QdiscSpec"];
        let kinds = qd["anyOf"][1]["properties"]["kind"]["enum"].as_array().unwrap();
        assert!(kinds.contains(&json!("dualpi2")) && kinds.contains(&json!("pfifo")), "{kinds:?}");
        let cc = &v["definitions"]["CongestionControlSpec"];
        assert!(cc["anyOf"][1]["properties"]["kind"]["enum"].as_array().unwrap().contains(&json!("cubic")));
    }
}
