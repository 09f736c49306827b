//! Parameter lists in tc style (`kind key value flag ...`), shared by queue disciplines and
//! congestion controls: one parser for a tc-style string and for the equivalent TOML table.
//!
//! Each discipline and congestion control declares its parameters once, as a [`Kind`]: a
//! table of [`Param`]s (tc name, [`Type`] and range, default, per-[`Stack`] defaults, unit,
//! one-line doc). Parsing, the "unknown key (known: ...)" and range errors, the kind names
//! and the `aqmlab qdisc|cc list|show` listings all derive from these tables; a kind's
//! `build` function only turns the parsed [`Args`] into its configuration (conversions and
//! checks across parameters).

use crate::profile::Stack;
use crate::time::{Rate, Time};
use crate::units::{parse_bytes, parse_limit, parse_rate, parse_time, Limit};
use serde::de::{self, Deserialize, Deserializer};
use std::any::Any;
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
                // A huge or tiny number in exponent form, not 300 digits (issue 14).
                Err(format!("{} is out of range {}..{}", crate::scenario::short_f64(x), range.start(), range.end()))
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

// ------------------------------------------------------------------------ parameter tables

/// How a parameter's value is written, and its range.
#[derive(Clone, Copy, Debug)]
pub enum Type {
    /// A keyword alone (`ecn`) turns it on; the parameter's `words` may turn it off (`noecn`).
    Flag,
    /// Set only by one of the parameter's `words` (`besteffort`, `diffserv3`); the name only
    /// labels the choice.
    Choice,
    /// A whole number within `min..=max`.
    Uint { min: u64, max: u64 },
    /// A real number within `min..=max`.
    Real { min: f64, max: f64 },
    /// A time; a bare number is microseconds (tc's `get_time`).
    Time,
    /// A time; a bare number is nanoseconds (iproute2's `get_time64`).
    Time64,
    /// A rate (`100Mbit`).
    Rate,
    /// A size in bytes (`1514`, `64kb`).
    Bytes,
    /// A limit in packets (`1000`, `1000p`) or bytes (`150000b`).
    Limit,
    /// A value in the syntax shown, read by `parse(key, text)`; its errors name the key.
    Custom { syntax: &'static str, parse: fn(&str, &str) -> Result<Value, String> },
    /// Several tokens in the syntax shown (netem's `delay TIME [JITTER [CORRELATION]]`,
    /// where tc looks ahead with `NEXT_IS_NUMBER`): declared here for the "known" lists and
    /// listings, read by the kind's own reader; [`read_one`] refuses to read it.
    Tokens { syntax: &'static str },
    /// Accepted and ignored: no effect in this model.
    Ignored,
    /// Refused, for the reason given.
    Unsupported(&'static str),
    /// Not a parameter of this kind although a relative has it: refused as an unknown key,
    /// with the note.
    Absent(&'static str),
}

/// A parameter value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// No value: off, unlimited or derived when built (the parameter's doc says which).
    Unset,
    Bool(bool),
    Uint(u64),
    Real(f64),
    Time(Time),
    Rate(Rate),
    Bytes(u64),
    Limit(Limit),
    /// One of a [`Type::Choice`]'s words.
    Word(&'static str),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Unset => f.write_str("-"),
            Value::Bool(b) => f.write_str(if b { "on" } else { "off" }),
            Value::Uint(n) => write!(f, "{n}"),
            Value::Real(x) => write!(f, "{x}"),
            Value::Time(t) => write!(f, "{t}"),
            Value::Rate(r) => write!(f, "{r}"),
            Value::Bytes(b) => write!(f, "{b}"),
            Value::Limit(Limit::Packets(n)) => write!(f, "{n}p"),
            Value::Limit(Limit::Bytes(b)) => write!(f, "{b}b"),
            Value::Word(w) => f.write_str(w),
        }
    }
}

/// One parameter of a discipline or congestion control, declared once.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// The Linux/tc name.
    pub name: &'static str,
    pub ty: Type,
    /// The default (Linux's, unless the doc says otherwise).
    pub default: Value,
    /// Defaults of particular stacks, overriding `default`; an explicit value overrides both.
    pub defaults: &'static [(Stack, Value)],
    /// Unit of the value ("packets", "1/1024"), or "".
    pub unit: &'static str,
    /// One line.
    pub doc: &'static str,
    /// Other names that take a value the same way (`ecn_fallback` for
    /// `classic_ecn_detection`).
    pub aliases: &'static [&'static str],
    /// Keywords that set this parameter on their own, and the value each sets (`noecn` ->
    /// off, `internet` -> 100ms).
    pub words: &'static [(&'static str, Value)],
    /// Validates or normalises a value read from a token, as the kernel or tc does at that
    /// point (e.g. a quantum raised to 256); `None` when tc would send nothing (the value
    /// before stays). Its error is reported as `kind: error`.
    pub check: Option<fn(&str, Value) -> Result<Option<Value>, String>>,
}

impl Param {
    pub const fn new(name: &'static str, ty: Type, default: Value) -> Param {
        Param { name, ty, default, defaults: &[], unit: "", doc: "", aliases: &[], words: &[], check: None }
    }
    /// A flag, `on` by default or not.
    pub const fn flag(name: &'static str, on: bool) -> Param {
        Param::new(name, Type::Flag, Value::Bool(on))
    }
    /// A whole number in `min..=max`.
    pub const fn uint(name: &'static str, min: u64, max: u64, default: u64) -> Param {
        Param::new(name, Type::Uint { min, max }, Value::Uint(default))
    }
    /// A time (a bare number is microseconds).
    pub const fn time(name: &'static str, default: Time) -> Param {
        Param::new(name, Type::Time, Value::Time(default))
    }
    /// A keyword accepted with no effect.
    pub const fn ignored(name: &'static str) -> Param {
        Param::new(name, Type::Ignored, Value::Unset)
    }
    /// A keyword refused, with the reason.
    pub const fn unsupported(name: &'static str, why: &'static str) -> Param {
        Param::new(name, Type::Unsupported(why), Value::Unset)
    }
    pub const fn unit(mut self, unit: &'static str) -> Param {
        self.unit = unit;
        self
    }
    pub const fn doc(mut self, doc: &'static str) -> Param {
        self.doc = doc;
        self
    }
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Param {
        self.aliases = aliases;
        self
    }
    pub const fn words(mut self, words: &'static [(&'static str, Value)]) -> Param {
        self.words = words;
        self
    }
    pub const fn stack_defaults(mut self, defaults: &'static [(Stack, Value)]) -> Param {
        self.defaults = defaults;
        self
    }
    pub const fn check(mut self, check: fn(&str, Value) -> Result<Option<Value>, String>) -> Param {
        self.check = Some(check);
        self
    }

    /// The default on `stack`: its own default if the parameter declares one, else the base.
    pub fn default_for(&self, stack: Stack) -> Value {
        self.defaults.iter().find(|(s, _)| *s == stack).map_or(self.default, |&(_, v)| v)
    }

    /// Whether `key` names this parameter (by name or alias) with a value to follow.
    fn takes(&self, key: &str) -> bool {
        !matches!(self.ty, Type::Choice) && (self.name == key || self.aliases.contains(&key))
    }

    /// The keywords this parameter accepts, for "known: ..." lists (none if refused).
    fn keys(&self) -> impl Iterator<Item = String> + '_ {
        let own = match self.ty {
            Type::Choice | Type::Unsupported(_) | Type::Absent(_) => None,
            _ if self.aliases.is_empty() => Some(self.name.to_string()),
            _ => Some(format!("{} ({})", self.name, self.aliases.join(", "))),
        };
        let words = (!matches!(self.ty, Type::Unsupported(_) | Type::Absent(_))).then_some(self.words).unwrap_or(&[]);
        own.into_iter().chain(words.iter().map(|(w, _)| w.to_string()))
    }

    /// The type and range as a listing shows it (`0..1023`, `time`, `flag`).
    pub fn type_text(&self) -> String {
        let words = || self.words.iter().map(|(w, _)| *w).collect::<Vec<_>>().join("|");
        match self.ty {
            Type::Flag if self.words.is_empty() => "flag".into(),
            Type::Flag => format!("flag (also {})", words()),
            Type::Choice => words(),
            Type::Uint { min, max } => format!("{min}..{max}"),
            Type::Real { min, max } => format!("real {min}..{max}"),
            Type::Time | Type::Time64 if !self.words.is_empty() => format!("time or {}", words()),
            Type::Time => "time (bare: us)".into(),
            Type::Time64 => "time (bare: ns)".into(),
            Type::Rate if !self.words.is_empty() => format!("rate or {}", words()),
            Type::Rate => "rate".into(),
            Type::Bytes => "bytes".into(),
            Type::Limit => "packets (N, Np) or bytes (Nb)".into(),
            Type::Custom { syntax, .. } | Type::Tokens { syntax } => syntax.into(),
            Type::Ignored => "keyword (no effect)".into(),
            Type::Unsupported(why) => format!("not supported: {why}"),
            Type::Absent(note) => format!("absent: {note}"),
        }
    }
}

/// A discipline or congestion control: its name, its parameters and how they build its
/// configuration `C`.
pub struct Kind<C: ?Sized + 'static> {
    /// The Linux/tc name (a registry may list the kind under further names, e.g. `bbr2`).
    pub name: &'static str,
    /// One line.
    pub doc: &'static str,
    pub params: &'static [Param],
    /// The configuration from parsed parameters (checks across parameters go here).
    pub build: fn(&Args) -> Result<Arc<C>, String>,
}

impl<C: ?Sized> fmt::Debug for Kind<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl<C: ?Sized> Kind<C> {
    /// Parses the parameters after the kind's name; `name` is the name as given (the kind's
    /// or its registry alias), used in errors.
    pub fn parse_args(&'static self, name: &'static str, p: &mut Params, stack: Stack) -> Result<Args, String> {
        parse_args(name, self.params, p, stack)
    }
    /// Parses the parameters left in `p` (Linux's defaults) and builds the configuration.
    pub fn parse(&'static self, p: &mut Params) -> Result<Arc<C>, String> {
        (self.build)(&parse_args(self.name, self.params, p, Stack::Linux)?)
    }
    /// The parameters at their defaults on `stack`.
    pub fn defaults(&'static self, stack: Stack) -> Args {
        Args::defaults(self.name, self.params, stack)
    }
}

/// The keywords of a table for "known: ..." lists (`delay (latency), limit, ...`; none for
/// refused parameters).
pub fn known_keys(params: &[Param]) -> String {
    let known: Vec<String> = params.iter().flat_map(Param::keys).collect();
    if known.is_empty() {
        "none".to_string()
    } else {
        known.join(", ")
    }
}

/// Reads `p`'s tokens against the table `params`: every key must name a parameter (or be
/// one of its words); values are read by the parameter's type and range. `kind` names the
/// discipline in errors.
pub fn parse_args(kind: &'static str, params: &'static [Param], p: &mut Params, stack: Stack) -> Result<Args, String> {
    let mut args = Args::defaults(kind, params, stack);
    while let Some(key) = p.next_key() {
        match read_one(params, key, p)? {
            Some((i, Some(v))) => args.set(i, v),
            Some((_, None)) => {}
            None => return Err(p.unknown(key, &known_keys(params))),
        }
    }
    Ok(args)
}

/// Reads parameter `key` (already taken from `p`) and its value, if any, against `params`:
/// `None` if no parameter has that key; else the parameter's index and the value to set
/// (`None`: nothing to set, for an ignored keyword or a value tc would not send).
pub fn read_one(params: &[Param], key: &str, p: &mut Params) -> Result<Option<(usize, Option<Value>)>, String> {
    let found = params.iter().enumerate().find_map(|(i, par)| {
        if par.takes(key) {
            Some((i, None))
        } else {
            par.words.iter().find(|(w, _)| *w == key).map(|&(_, v)| (i, Some(v)))
        }
    });
    let Some((i, word)) = found else { return Ok(None) };
    let par = &params[i];
    let v = match (par.ty, word) {
        (Type::Unsupported(why), _) => return Err(p.invalid(format!("'{key}' is not supported: {why}"))),
        (Type::Absent(note), _) => {
            let known: Vec<String> = params.iter().flat_map(Param::keys).collect();
            return Err(format!("{} ({note})", p.unknown(key, &known.join(", "))));
        }
        (Type::Ignored, _) => return Ok(Some((i, None))),
        (_, Some(v)) => return Ok(Some((i, Some(v)))),
        (Type::Flag, None) => Value::Bool(true),
        (Type::Choice, None) => unreachable!("a choice is set by its words"),
        (Type::Uint { min, max }, None) => Value::Uint(p.uint(key, min..=max)?),
        (Type::Real { min, max }, None) => Value::Real(p.real(key, min..=max)?),
        (Type::Time, None) => Value::Time(p.time(key)?),
        (Type::Time64, None) => Value::Time(p.time64(key)?),
        (Type::Rate, None) => Value::Rate(p.rate(key)?),
        (Type::Bytes, None) => Value::Bytes(p.bytes(key)?),
        (Type::Limit, None) => Value::Limit(p.limit(key)?),
        (Type::Custom { parse, .. }, None) => {
            let text = p.value(key)?;
            parse(key, text).map_err(|e| p.invalid(e))?
        }
        (Type::Tokens { .. }, None) => return Err(p.invalid(format!("'{key}' is read by its kind's own reader"))),
    };
    let v = match par.check {
        Some(check) => check(key, v).map_err(|e| p.invalid(e))?,
        None => Some(v),
    };
    Ok(Some((i, v)))
}

/// Parsed parameters of one kind: every parameter's value (given, else the stack's default),
/// which were given, and the given ones in the order they were written.
#[derive(Clone, Debug)]
pub struct Args {
    kind: &'static str,
    params: &'static [Param],
    stack: Stack,
    values: Vec<Value>,
    given: Vec<bool>,
    order: Vec<(usize, Value)>,
}

impl PartialEq for Args {
    /// Same kind and the same values (given or by default).
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.params, other.params) && self.values == other.values
    }
}

impl Args {
    /// Every parameter of the table at its default on `stack`.
    pub fn defaults(kind: &'static str, params: &'static [Param], stack: Stack) -> Args {
        Args {
            kind,
            params,
            stack,
            values: params.iter().map(|p| p.default_for(stack)).collect(),
            given: vec![false; params.len()],
            order: Vec::new(),
        }
    }
    fn set(&mut self, i: usize, v: Value) {
        self.values[i] = v;
        self.given[i] = true;
        self.order.push((i, v));
    }
    fn index(&self, name: &str) -> usize {
        self.params
            .iter()
            .position(|p| p.name == name)
            .unwrap_or_else(|| panic!("{} has no parameter '{name}' in its table", self.kind))
    }
    /// The kind's name as written.
    pub fn kind(&self) -> &'static str {
        self.kind
    }
    pub fn stack(&self) -> Stack {
        self.stack
    }
    /// Whether the table has a parameter `name`.
    pub fn has(&self, name: &str) -> bool {
        self.params.iter().any(|p| p.name == name)
    }
    /// The value of parameter `name` (panics if the table has no such parameter).
    pub fn get(&self, name: &str) -> Value {
        self.values[self.index(name)]
    }
    /// Whether `name` was given explicitly.
    pub fn given(&self, name: &str) -> bool {
        self.given[self.index(name)]
    }
    /// The default of `name` on this stack (what a value tc does not send leaves).
    pub fn default_of(&self, name: &str) -> Value {
        self.params[self.index(name)].default_for(self.stack)
    }
    /// The parameters given, by name, in the order written (for keywords whose effects
    /// accumulate, such as CAKE's overhead compensation).
    pub fn settings(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        self.order.iter().map(|&(i, v)| (self.params[i].name, v))
    }
    /// An error about the parameters as a whole: `kind: msg`.
    pub fn invalid(&self, msg: impl fmt::Display) -> String {
        format!("{}: {msg}", self.kind)
    }
    fn wrong(&self, name: &str, want: &str) -> ! {
        panic!("{} parameter '{name}' is {:?}, not {want}", self.kind, self.get(name))
    }
    pub fn flag(&self, name: &str) -> bool {
        match self.get(name) {
            Value::Bool(b) => b,
            _ => self.wrong(name, "a flag"),
        }
    }
    pub fn uint(&self, name: &str) -> u64 {
        self.uint_opt(name).unwrap_or_else(|| self.wrong(name, "a number"))
    }
    /// A whole number that fits a `u32` by its table range.
    pub fn u32(&self, name: &str) -> u32 {
        self.uint(name) as u32
    }
    pub fn uint_opt(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Value::Uint(n) => Some(n),
            Value::Unset => None,
            _ => self.wrong(name, "a number"),
        }
    }
    pub fn real(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::Real(x) => x,
            _ => self.wrong(name, "a real number"),
        }
    }
    pub fn time(&self, name: &str) -> Time {
        self.time_opt(name).unwrap_or_else(|| self.wrong(name, "a time"))
    }
    pub fn time_opt(&self, name: &str) -> Option<Time> {
        match self.get(name) {
            Value::Time(t) => Some(t),
            Value::Unset => None,
            _ => self.wrong(name, "a time"),
        }
    }
    pub fn rate_opt(&self, name: &str) -> Option<Rate> {
        match self.get(name) {
            Value::Rate(r) => Some(r),
            Value::Unset => None,
            _ => self.wrong(name, "a rate"),
        }
    }
    pub fn bytes(&self, name: &str) -> u64 {
        self.bytes_opt(name).unwrap_or_else(|| self.wrong(name, "a size"))
    }
    pub fn bytes_opt(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Value::Bytes(b) => Some(b),
            Value::Unset => None,
            _ => self.wrong(name, "a size"),
        }
    }
    pub fn limit(&self, name: &str) -> Limit {
        match self.get(name) {
            Value::Limit(l) => l,
            _ => self.wrong(name, "a limit"),
        }
    }
    pub fn word(&self, name: &str) -> &'static str {
        match self.get(name) {
            Value::Word(w) => w,
            _ => self.wrong(name, "a word"),
        }
    }
}

/// Equality of configurations behind a trait object, by their `PartialEq`.
pub trait ConfigEq: Any {
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is a configuration of the same type and equal to this one.
    fn config_eq(&self, other: &dyn Any) -> bool;
}

impl<T: PartialEq + Any> ConfigEq for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn config_eq(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
}

// ------------------------------------------------------------------------ registries, specs

/// A family of configurable components selected by name (queue disciplines, congestion
/// controls): its kinds.
pub trait Registered: fmt::Debug + Send + Sync + 'static {
    /// What the family is called in error messages ("qdisc", "congestion control").
    const WHAT: &'static str;
    /// The kinds by name, each with its parameter table (a kind listed under a second name
    /// has an alias).
    fn registry() -> &'static [(&'static str, &'static Kind<Self>)];
    /// Whether two configurations are equal.
    fn config_eq(a: &Self, b: &Self) -> bool;
}

/// The kind called `name` in the registry, and the name as the registry spells it.
pub fn find_kind<C: ?Sized + Registered>(name: &str) -> Option<(&'static str, &'static Kind<C>)> {
    C::registry().iter().copied().find(|(n, _)| *n == name)
}

/// The registry's other names of `kind` (`bbr2` for `bbr3`).
pub fn aliases_of<C: ?Sized + Registered>(kind: &Kind<C>) -> Vec<&'static str> {
    C::registry().iter().filter(|(n, k)| std::ptr::eq(*k, kind) && *n != kind.name).map(|(n, _)| *n).collect()
}

/// A parsed component description: the text as given, the parsed parameters and the
/// validated configuration. Cheap to clone.
pub struct Spec<C: ?Sized + 'static> {
    text: String,
    kind: &'static Kind<C>,
    args: Arc<Args>,
    config: Arc<C>,
}

impl<C: ?Sized> Clone for Spec<C> {
    fn clone(&self) -> Self {
        Spec { text: self.text.clone(), kind: self.kind, args: self.args.clone(), config: self.config.clone() }
    }
}

impl<C: ?Sized + fmt::Debug> fmt::Debug for Spec<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spec").field("text", &self.text).field("config", &self.config).finish()
    }
}

impl<C: ?Sized + Registered> PartialEq for Spec<C> {
    /// Two specs are equal when they are of the same kind and their parsed configurations
    /// are equal.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.kind, other.kind) && C::config_eq(&self.config, &other.config)
    }
}

impl<C: ?Sized + Registered> Spec<C> {
    /// Parses tc-style text, e.g. `"fq_codel flows 1 target 1ms"` or `"prague"`, with
    /// Linux's defaults.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::parse_for(s, Stack::Linux)
    }

    /// Parses tc-style text with the defaults of `stack`.
    pub fn parse_for(s: &str, stack: Stack) -> Result<Self, String> {
        let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        Self::from_tokens(&tokens, stack)
    }

    fn from_tokens(tokens: &[String], stack: Stack) -> Result<Self, String> {
        let (name, rest) = tokens.split_first().ok_or_else(|| format!("empty {} description", C::WHAT))?;
        let (name, kind) = find_kind::<C>(name).ok_or_else(|| {
            let known: Vec<&str> = C::registry().iter().map(|(n, _)| *n).collect();
            format!("unknown {} '{}' (known: {})", C::WHAT, crate::scenario::excerpt(name), known.join(", "))
        })?;
        // Values are quoted in errors as excerpts: a 1 MB token is not echoed back whole.
        let short = |e: String| crate::scenario::shorten_quoted(&e);
        let args = kind.parse_args(name, &mut Params::new(name, rest), stack).map_err(short)?;
        let config = (kind.build)(&args).map_err(short)?;
        Ok(Spec { text: tokens.join(" "), kind, args: Arc::new(args), config })
    }

    /// The same description read with the defaults of `stack`: a scenario's specs are
    /// deserialised before its `stack` key is applied, so with Linux's defaults; the
    /// scenario re-reads them here ([`crate::scenario::Scenario::from_toml`]), else a
    /// parameter's per-stack default would never reach a run.
    pub fn for_stack(&self, stack: Stack) -> Result<Self, String> {
        if self.args.stack() == stack {
            return Ok(self.clone());
        }
        Self::parse_for(&self.text, stack)
    }

    /// Parses a TOML table `{ kind = "...", key = value, flag = true }` (Linux's defaults).
    pub fn from_table(t: &toml::Table) -> Result<Self, String> {
        Self::from_table_for(t, Stack::Linux)
    }

    /// Parses a TOML table with the defaults of `stack`.
    pub fn from_table_for(t: &toml::Table, stack: Stack) -> Result<Self, String> {
        Self::from_tokens(&table_to_tokens(t, C::WHAT)?, stack)
    }

    /// The description as given (tokens joined by single spaces).
    pub fn text(&self) -> &str {
        &self.text
    }
    /// The kind's name (an alias given in the text resolves to the kind).
    pub fn kind_name(&self) -> &'static str {
        self.kind.name
    }
    /// The kind's declaration (name, parameter table).
    pub fn kind_def(&self) -> &'static Kind<C> {
        self.kind
    }
    /// The parsed parameters.
    pub fn args(&self) -> &Args {
        &self.args
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

// ------------------------------------------------------------------------------ listings

fn value_json(v: Value) -> serde_json::Value {
    match v {
        Value::Unset => serde_json::Value::Null,
        Value::Bool(b) => b.into(),
        Value::Uint(n) => n.into(),
        Value::Real(x) => x.into(),
        v => v.to_string().into(),
    }
}

/// A kind's declaration as JSON: name, aliases, doc and each parameter's name, type/range,
/// default, per-stack defaults, unit, doc, aliases and keywords.
pub fn kind_json<C: ?Sized + Registered>(k: &Kind<C>) -> serde_json::Value {
    let params: Vec<serde_json::Value> = k
        .params
        .iter()
        .map(|p| {
            let defaults: serde_json::Map<String, serde_json::Value> =
                p.defaults.iter().map(|&(s, v)| (s.to_string(), value_json(v))).collect();
            let words: serde_json::Map<String, serde_json::Value> =
                p.words.iter().map(|&(w, v)| (w.to_string(), value_json(v))).collect();
            serde_json::json!({
                "name": p.name,
                "type": p.type_text(),
                "default": value_json(p.default),
                "default_text": p.default.to_string(),
                "stack_defaults": defaults,
                "unit": p.unit,
                "doc": p.doc,
                "aliases": p.aliases,
                "words": words,
            })
        })
        .collect();
    serde_json::json!({ "name": k.name, "aliases": aliases_of(k), "doc": k.doc, "params": params })
}

/// Every kind of a family as a JSON array (see [`kind_json`]).
pub fn registry_json<C: ?Sized + Registered>() -> serde_json::Value {
    let kinds = C::registry().iter().filter(|(n, k)| *n == k.name).map(|(_, k)| kind_json(*k));
    serde_json::Value::Array(kinds.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table with a per-stack default, a flag with its negation, a range and a preset word.
    const TEST_PARAMS: &[Param] = &[
        Param::uint("limit", 1, 100, 10).unit("packets").doc("a limit").stack_defaults(&[(Stack::L4steam2020, Value::Uint(50))]),
        Param::flag("ecn", false).words(&[("noecn", Value::Bool(false))]),
        Param::time("rtt", Time::from_millis(100)).words(&[("lan", Value::Time(Time::from_millis(1)))]),
        Param::new("gain", Type::Real { min: 0.0, max: 1.0 }, Value::Real(0.5)).aliases(&["g"]),
        Param::unsupported("nat", "no NAT here"),
        Param::ignored("egress"),
    ];

    fn parse(s: &str, stack: Stack) -> Result<Args, String> {
        let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        parse_args("toy", TEST_PARAMS, &mut Params::new("toy", &tokens), stack)
    }

    #[test]
    fn defaults_come_from_the_table_and_the_stack() {
        let a = parse("", Stack::Linux).unwrap();
        assert_eq!((a.uint("limit"), a.flag("ecn"), a.time("rtt"), a.real("gain")), (10, false, Time::from_millis(100), 0.5));
        assert!(!a.given("limit"));
        // The 2020 L4S kernel's default overrides the base default; other stacks keep it.
        assert_eq!(parse("", Stack::L4steam2020).unwrap().uint("limit"), 50);
        assert_eq!(parse("", Stack::Sce2020).unwrap().uint("limit"), 10);
        assert_eq!(parse("", Stack::L4steam2020).unwrap().default_of("limit"), Value::Uint(50));
    }

    #[test]
    fn an_explicit_value_overrides_the_stack_default() {
        for stack in Stack::ALL {
            let a = parse("limit 7", stack).unwrap();
            assert_eq!(a.uint("limit"), 7, "{stack}");
            assert!(a.given("limit"));
        }
    }

    #[test]
    fn keys_words_aliases_and_order() {
        let a = parse("ecn lan g 0.25 noecn egress", Stack::Linux).unwrap();
        assert!(!a.flag("ecn"));
        assert_eq!(a.time("rtt"), Time::from_millis(1));
        assert_eq!(a.real("gain"), 0.25);
        let order: Vec<&str> = a.settings().map(|(n, _)| n).collect();
        assert_eq!(order, ["ecn", "rtt", "gain", "ecn"], "the ignored keyword sets nothing");
        assert_eq!(parse("rtt lan", Stack::Linux).unwrap_err(), "toy rtt: invalid time 'lan': expected a number with a unit s, ms, us or ns (e.g. 20ms)");
        // A bare time is microseconds.
        assert_eq!(parse("rtt 250", Stack::Linux).unwrap().time("rtt"), Time::from_micros(250));
    }

    #[test]
    fn unknown_keys_list_what_the_table_accepts() {
        let e = parse("limt 3", Stack::Linux).unwrap_err();
        assert_eq!(e, "toy has no parameter 'limt' (known: limit, ecn, noecn, rtt, lan, gain (g), egress)");
        let e = parse("nat", Stack::Linux).unwrap_err();
        assert_eq!(e, "toy: 'nat' is not supported: no NAT here");
    }

    #[test]
    fn range_and_value_errors_name_the_parameter() {
        assert_eq!(parse("limit 0", Stack::Linux).unwrap_err(), "toy limit: 0 is out of range 1..100");
        assert_eq!(parse("limit 101", Stack::Linux).unwrap_err(), "toy limit: 101 is out of range 1..100");
        assert_eq!(parse("limit lots", Stack::Linux).unwrap_err(), "toy limit: 'lots' is not a whole number");
        assert_eq!(parse("g 2", Stack::Linux).unwrap_err(), "toy g: 2 is out of range 0..1");
        assert_eq!(parse(&format!("g 1{}", "0".repeat(300)), Stack::Linux).unwrap_err(), "toy g: 1e300 is out of range 0..1");
        assert_eq!(parse("rtt", Stack::Linux).unwrap_err(), "toy parameter 'rtt' needs a value");
    }

    /// Every registered kind builds from its table's defaults on every stack (red with its
    /// two required parameters): each builder's reads match its table's names and types.
    #[test]
    fn every_kind_builds_from_its_defaults() {
        use crate::cc::CcConfig;
        use crate::qdisc::QdiscConfig;
        for stack in Stack::ALL {
            for (name, k) in <dyn QdiscConfig as Registered>::registry() {
                let required: Vec<String> = match *name {
                    "red" => ["limit", "400000", "avpkt", "1000"].map(String::from).to_vec(),
                    _ => vec![],
                };
                let a = k.parse_args(name, &mut Params::new(name, &required), stack).unwrap();
                (k.build)(&a).unwrap_or_else(|e| panic!("{name} on {stack}: {e}"));
            }
            for (name, k) in <dyn CcConfig as Registered>::registry() {
                (k.build)(&k.defaults(stack)).unwrap_or_else(|e| panic!("{name} on {stack}: {e}"));
            }
        }
    }

    /// Names are unique, every keyword belongs to one parameter, and defaults lie in range.
    #[test]
    fn tables_are_consistent() {
        use crate::cc::CcConfig;
        use crate::qdisc::QdiscConfig;
        let kinds: Vec<(&str, &[Param])> = <dyn QdiscConfig as Registered>::registry()
            .iter()
            .map(|(n, k)| (*n, k.params))
            .chain(<dyn CcConfig as Registered>::registry().iter().map(|(n, k)| (*n, k.params)))
            .collect();
        for (kind, params) in kinds {
            let mut keys: Vec<&str> = Vec::new();
            for p in params {
                if !matches!(p.ty, Type::Choice) {
                    keys.push(p.name);
                }
                keys.extend(p.aliases.iter().copied());
                keys.extend(p.words.iter().map(|(w, _)| *w));
                for v in std::iter::once(p.default).chain(p.defaults.iter().map(|&(_, v)| v)) {
                    match (p.ty, v) {
                        (Type::Uint { min, max }, Value::Uint(n)) => assert!((min..=max).contains(&n), "{kind} {}", p.name),
                        (Type::Real { min, max }, Value::Real(x)) => assert!((min..=max).contains(&x), "{kind} {}", p.name),
                        _ => {}
                    }
                }
            }
            let n = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), n, "{kind}: a keyword is declared twice");
        }
    }

    #[test]
    fn listings_carry_every_parameter() {
        let j = crate::qdisc::table_json();
        let kinds = j.as_array().unwrap();
        let pie = kinds.iter().find(|k| k["name"] == "pie").unwrap();
        let target = pie["params"].as_array().unwrap().iter().find(|p| p["name"] == "target").unwrap();
        assert_eq!(target["default_text"], "15ms");
        let cc = crate::cc::table_json();
        let bbr3 = cc.as_array().unwrap().iter().find(|k| k["name"] == "bbr3").unwrap();
        assert_eq!(bbr3["aliases"], serde_json::json!(["bbr2"]));
        assert!(!cc.as_array().unwrap().iter().any(|k| k["name"] == "bbr2"), "an alias is not a second kind");
    }
}
