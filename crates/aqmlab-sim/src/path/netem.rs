//! netem, the Linux network emulator qdisc (`net/sched/sch_netem.c`, read as of Linux 6.18),
//! as a path element: per-packet delay with jitter (uniform, or from a generated
//! normal/pareto/paretonormal table), correlated random loss, a packet limit, and `slot`
//! (bursty release, a crude model of WiFi/DOCSIS/LTE aggregation).
//!
//! Configured with tc's syntax (iproute2 `tc/q_netem.c`, `netem_parse_opt`):
//! `delay TIME [JITTER [CORR%]] [distribution uniform|normal|pareto|paretonormal]
//! [loss [random] PCT [CORR%]] [slot MIN [MAX] [packets N] [bytes B]]
//! [slot distribution NAME DELAY JITTER [packets N] [bytes B]] [limit N]`.
//! See docs/algorithms/netem.md for the semantics and the differences from Linux.

use crate::event::{Event, Timer};
use super::ElementCtx;
use crate::packet::Packet;
use crate::params::{known_keys, read_one, Param, Params, Type, Value};
use crate::rng::Stream;
use crate::time::Time;
use serde::de::{self, Deserialize, Deserializer};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::OnceLock;

/// `NETEM_DIST_SCALE`: table values are standard deviations scaled by this.
const DIST_SCALE: i64 = 8192;
/// Entries in iproute2's generated tables (`normal.c` keeps every 4th of 16384 quantiles).
const TABLE_SIZE: usize = 4096;
/// tc's default `limit` (packets).
pub const DEFAULT_LIMIT: u32 = 1000;

/// A delay distribution table, as iproute2 generates them (`netem/normal.c`, `pareto.c`,
/// `paretonormal.c`): the inverse CDF of a zero-mean, unit-deviation distribution sampled at
/// 4096 quantiles and scaled by `NETEM_DIST_SCALE`. Built here from the same formulas rather
/// than read from `/usr/lib/tc/*.dist`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    Normal,
    Pareto,
    ParetoNormal,
}

impl Distribution {
    /// `None` is tc's `uniform` (no table).
    fn parse(name: &str) -> Result<Option<Distribution>, String> {
        match name {
            "uniform" => Ok(None),
            "normal" => Ok(Some(Distribution::Normal)),
            "pareto" => Ok(Some(Distribution::Pareto)),
            "paretonormal" => Ok(Some(Distribution::ParetoNormal)),
            _ => Err(format!("unknown distribution '{name}' (known: uniform, normal, pareto, paretonormal)")),
        }
    }

    pub fn table(self) -> &'static [i16] {
        static TABLES: [OnceLock<Box<[i16]>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let (i, build): (usize, fn(usize) -> i64) = match self {
            Distribution::Normal => (0, normal_entry),
            Distribution::Pareto => (1, pareto_entry),
            // paretonormal.c: (normal + 3·pareto) / 4 in C integer arithmetic.
            Distribution::ParetoNormal => (2, |k| (normal_entry(k) + 3 * pareto_entry(k)) / 4),
        };
        TABLES[i].get_or_init(|| (0..TABLE_SIZE).map(|k| build(k).clamp(i16::MIN as i64, i16::MAX as i64) as i16).collect())
    }
}

/// normal.c: entry k is the x whose rounded CDF index `rint(16384·Φ(x))` is 4k, i.e.
/// x ≈ Φ⁻¹((4k + ½)/16384), scaled and rounded (unclamped; the caller clamps).
fn normal_entry(k: usize) -> i64 {
    let p = (4.0 * k as f64 + 0.5) / 16384.0;
    (inverse_normal_cdf(p) * DIST_SCALE as f64).round_ties_even() as i64
}

/// pareto.c (shape a = 3, shifted to zero mean): entry k from u = (65536 − 16k)/65536,
/// (u^(−1/3) − 1.5)·(4/3)·scale, capped at 32767.
fn pareto_entry(k: usize) -> i64 {
    let u = (65536 - 16 * k) as f64 / 65536.0;
    let v = (u.powf(-1.0 / 3.0) - 1.5) * (4.0 / 3.0) * DIST_SCALE as f64;
    v.min(32767.0).round_ties_even() as i64
}

/// Φ⁻¹ by P. J. Acklam's rational approximation (relative error < 1.2e-9, far below the
/// table's 1/8192 resolution).
fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00];
    const B: [f64; 5] = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01];
    const C: [f64; 6] = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00];
    const D: [f64; 4] = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    const P_LOW: f64 = 0.02425;
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    }
}

/// `slot` settings (`struct tc_netem_slot`).
#[derive(Clone, Debug, PartialEq)]
pub struct SlotConfig {
    pub min_delay: Time,
    pub max_delay: Time,
    /// `slot distribution NAME DELAY JITTER`: slot gaps drawn from the table instead.
    pub dist: Option<(Distribution, Time, Time)>,
    /// Packets per slot; the kernel turns 0 (unset) into INT_MAX.
    pub max_packets: i64,
    /// Bytes per slot (link-layer length, `qdisc_pkt_len`); 0 (unset) becomes INT_MAX.
    pub max_bytes: i64,
}

/// A parsed netem configuration, in the kernel's units: times in ns, probabilities and
/// correlations as fractions of 2³² − 1 (iproute2 `set_percent`: rint(p · UINT32_MAX)).
#[derive(Clone, Debug, PartialEq)]
pub struct NetemConfig {
    pub latency: Time,
    /// Capped at INT_MAX ns, as `netem_change` caps it for `tabledist`.
    pub jitter: Time,
    pub delay_corr: u32,
    pub dist: Option<Distribution>,
    pub loss: u32,
    pub loss_corr: u32,
    pub slot: Option<SlotConfig>,
    /// Packets held at most (delayed and waiting for a slot); arrivals beyond are dropped.
    pub limit: u32,
}

/// tc's `NEXT_IS_NUMBER()`: the next token starts with a digit.
fn next_is_number(p: &Params) -> bool {
    p.peek().is_some_and(|t| t.starts_with(|c: char| c.is_ascii_digit()))
}

/// iproute2 `get_percent`: `10`, `10%` or `0.5%` → rint(fraction · UINT32_MAX).
fn percent(p: &mut Params, key: &str) -> Result<u32, String> {
    let v = p.value(key)?;
    let n: f64 = v.strip_suffix('%').unwrap_or(v).parse().map_err(|_| format!("netem {key}: '{v}' is not a percentage"))?;
    if !(0.0..=100.0).contains(&n) {
        return Err(format!("netem {key}: {v} is out of range 0..100%"));
    }
    Ok((n / 100.0 * u32::MAX as f64).round_ties_even() as u32)
}

/// `distribution NAME`: the table's name as a word (`uniform` = no table).
fn parse_distribution_word(_key: &str, v: &str) -> Result<Value, String> {
    const NAMES: [&str; 4] = ["uniform", "normal", "pareto", "paretonormal"];
    Distribution::parse(v)?;
    Ok(Value::Word(NAMES.into_iter().find(|n| *n == v).expect("parsed names are listed")))
}

/// Why the options tc's netem has are refused here (the error adds the supported list).
const NOT_MODELLED: &str = "not modelled";

/// netem's options (iproute2 `netem_parse_opt`), declared as the qdiscs and congestion
/// controls declare theirs (params.rs): the "known" list and the refusals come from this
/// table. `delay`, `loss` and `slot` take several tokens, with tc's look-ahead
/// (`NEXT_IS_NUMBER`) and sub-keywords, and are read by [`NetemConfig::parse`] itself
/// (`Type::Tokens`); `distribution` and `limit` by the shared reader.
pub const PARAMS: &[Param] = &[
    Param::new("delay", Type::Tokens { syntax: "TIME [JITTER [CORRELATION%]] (bare: us)" }, Value::Time(Time::ZERO))
        .aliases(&["latency"])
        .doc("fixed delay, optional jitter (uniform or the distribution's table) and its correlation"),
    Param::new("distribution", Type::Custom { syntax: "uniform|normal|pareto|paretonormal", parse: parse_distribution_word }, Value::Word("uniform"))
        .doc("jitter distribution table (needs delay and jitter)"),
    Param::new("loss", Type::Tokens { syntax: "[random] PERCENT [CORRELATION%]" }, Value::Uint(0))
        .aliases(&["drop"])
        .doc("random loss and its correlation (the Markov models are refused)"),
    Param::new("slot", Type::Tokens { syntax: "MIN [MAX] | distribution NAME DELAY JITTER, then [packets N] [bytes B] (bare: ns)" }, Value::Unset)
        .doc("bursty release: slots after gaps of MIN..MAX, each of at most N packets / B bytes"),
    Param::uint("limit", 0, u32::MAX as u64, DEFAULT_LIMIT as u64).unit("packets").doc("packets held at most"),
    Param::unsupported("duplicate", NOT_MODELLED),
    Param::unsupported("corrupt", NOT_MODELLED),
    Param::unsupported("reorder", NOT_MODELLED),
    Param::unsupported("gap", NOT_MODELLED),
    Param::unsupported("rate", NOT_MODELLED),
    Param::unsupported("ecn", NOT_MODELLED),
    Param::unsupported("seed", NOT_MODELLED),
];

impl NetemConfig {
    /// Parses tc netem options; a leading `netem` is allowed.
    pub fn parse(text: &str) -> Result<NetemConfig, String> {
        let tokens: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        let tokens = if tokens.first().map(String::as_str) == Some("netem") { &tokens[1..] } else { &tokens[..] };
        let mut p = Params::new("netem", tokens);
        let mut c = NetemConfig { latency: Time::ZERO, jitter: Time::ZERO, delay_corr: 0, dist: None, loss: 0, loss_corr: 0, slot: None, limit: DEFAULT_LIMIT };
        while let Some(key) = p.next_key() {
            if let Some(Param { ty: Type::Unsupported(why), .. }) = PARAMS.iter().find(|q| q.name == key) {
                return Err(p.invalid(format!("'{key}' is {why} (supported: {})", known_keys(PARAMS))));
            }
            let multi = PARAMS.iter().find(|q| matches!(q.ty, Type::Tokens { .. }) && (q.name == key || q.aliases.contains(&key)));
            match multi.map(|q| q.name) {
                Some("delay") => {
                    c.latency = p.time("delay")?;
                    if next_is_number(&p) {
                        c.jitter = p.time("jitter")?.min(Time(i32::MAX as u64));
                        if next_is_number(&p) {
                            c.delay_corr = percent(&mut p, "delay correlation")?;
                        }
                    }
                }
                Some("loss") => {
                    if c.loss > 0 {
                        return Err(p.invalid("duplicate loss argument"));
                    }
                    match p.peek() {
                        Some("random") => {
                            p.next_key();
                        }
                        Some(m @ ("state" | "gemodel")) => return Err(p.invalid(format!("loss model '{m}' is not modelled (only 'loss random PERCENT [CORRELATION]')"))),
                        _ => {}
                    }
                    c.loss = percent(&mut p, "loss")?;
                    if next_is_number(&p) {
                        c.loss_corr = percent(&mut p, "loss correlation")?;
                    }
                }
                Some("slot") => c.slot = Some(parse_slot(&mut p)?),
                _ => match read_one(PARAMS, key, &mut p)? {
                    Some((i, Some(v))) => match (PARAMS[i].name, v) {
                        ("limit", Value::Uint(n)) => c.limit = n as u32,
                        ("distribution", Value::Word(w)) => c.dist = Distribution::parse(w)?,
                        _ => unreachable!("netem parameter {} read as {v:?}", PARAMS[i].name),
                    },
                    Some((_, None)) => {}
                    None => return Err(p.unknown(key, &known_keys(PARAMS))),
                },
            }
        }
        // iproute2: "distribution specified but no latency and jitter values".
        if c.dist.is_some() && (c.latency == Time::ZERO || c.jitter == Time::ZERO) {
            return Err(p.invalid("distribution specified but no latency and jitter values"));
        }
        Ok(c)
    }
}

fn parse_slot(p: &mut Params) -> Result<SlotConfig, String> {
    let mut s = SlotConfig { min_delay: Time::ZERO, max_delay: Time::ZERO, dist: None, max_packets: 0, max_bytes: 0 };
    if next_is_number(p) {
        // iproute2 reads slot times with get_time64: a bare number is nanoseconds.
        s.min_delay = p.time64("slot min_delay")?;
        s.max_delay = if next_is_number(p) { p.time64("slot max_delay")? } else { s.min_delay };
        if s.max_delay < s.min_delay {
            return Err(p.invalid("slot max_delay is smaller than min_delay"));
        }
    } else if p.peek() == Some("distribution") {
        p.next_key();
        let Some(dist) = Distribution::parse(p.value("slot distribution")?).map_err(|e| p.invalid(e))? else {
            return Err(p.invalid("slot distribution needs a table (normal, pareto, paretonormal); use 'slot MIN MAX' for uniform"));
        };
        let delay = p.time64("slot delay")?;
        let jitter = p.time64("slot jitter")?;
        if jitter == Time::ZERO {
            return Err(p.invalid("slot distribution needs a positive jitter"));
        }
        s.dist = Some((dist, delay, jitter.min(Time(i32::MAX as u64))));
    } else {
        return Err(p.invalid("slot needs MIN_DELAY [MAX_DELAY] or 'distribution NAME DELAY JITTER'"));
    }
    if p.peek() == Some("packets") {
        p.next_key();
        s.max_packets = p.uint("slot packets", 0..=i32::MAX as u64)? as i64;
    }
    if p.peek() == Some("bytes") {
        p.next_key();
        s.max_bytes = p.bytes("slot bytes")?.min(i32::MAX as u64) as i64;
    }
    // get_slot: 0 means unlimited.
    for v in [&mut s.max_packets, &mut s.max_bytes] {
        if *v == 0 {
            *v = i32::MAX as i64;
        }
    }
    Ok(s)
}

/// A netem description as written in a scenario (tc syntax) and its parsed form.
#[derive(Clone, Debug, PartialEq)]
pub struct NetemSpec {
    pub text: String,
    pub config: NetemConfig,
}

impl<'de> Deserialize<'de> for NetemSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let config = NetemConfig::parse(&text).map_err(de::Error::custom)?;
        Ok(NetemSpec { text, config })
    }
}

/// `struct crndstate` and `get_crandom`: a uniform 32-bit source blended with its previous
/// output, `next = (u·(2³² − ρ) + last·ρ) >> 32` with ρ = corr + 1 in 32-bit fixed point.
/// The blend is unchanged in current Linux; since 6.6 the uniform source is the qdisc's own
/// seedable `prandom` state (TCA_NETEM_PRNG_SEED) rather than `get_random_u32`. Here it is
/// the element's seeded stream.
#[derive(Clone, Copy, Debug)]
pub struct Crandom {
    rho: u32,
    last: u32,
}

impl Crandom {
    /// `init_crandom`: the previous value starts random.
    pub fn new(rho: u32, rng: &mut Stream) -> Self {
        Crandom { rho, last: rng.next_u32() }
    }
    pub fn next(&mut self, rng: &mut Stream) -> u32 {
        let value = rng.next_u32() as u64;
        if self.rho == 0 {
            return value as u32;
        }
        let rho = self.rho as u64 + 1;
        // Both terms are below 2³²·(2³² − ρ) and 2³²·ρ, so the sum stays below 2⁶⁴.
        let answer = ((value * ((1u64 << 32) - rho) + self.last as u64 * rho) >> 32) as u32;
        self.last = answer;
        answer
    }
}

/// `tabledist`: mu + a value of spread sigma. Without a table, uniform on [mu − sigma,
/// mu + sigma) as `(rnd % 2σ) + mu − σ`; with one, mu + sigma·table[rnd % size]/8192, the
/// product split in two to avoid overflow and rounded half away from zero, as the kernel does.
fn tabledist(mu: i64, sigma: i64, rnd: &mut dyn FnMut() -> u32, dist: Option<Distribution>) -> i64 {
    if sigma == 0 {
        return mu;
    }
    let r = rnd();
    let Some(dist) = dist else {
        return (r % (2 * sigma as u32)) as i64 + mu - sigma;
    };
    let table = dist.table();
    let t = table[r as usize % table.len()] as i64;
    let mut x = (sigma % DIST_SCALE) * t;
    x += if x >= 0 { DIST_SCALE / 2 } else { -DIST_SCALE / 2 };
    x / DIST_SCALE + (sigma / DIST_SCALE) * t + mu
}

/// A packet in the time-ordered queue: by time to send, then arrival.
#[derive(Debug)]
struct Held {
    time_to_send: Time,
    seq: u64,
    pkt: Packet,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.time_to_send == o.time_to_send && self.seq == o.seq
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    /// Reversed so that `BinaryHeap` pops the earliest.
    fn cmp(&self, o: &Self) -> Ordering {
        o.time_to_send.cmp(&self.time_to_send).then_with(|| o.seq.cmp(&self.seq))
    }
}

/// Slot state (`struct slotstate`).
#[derive(Clone, Copy, Debug)]
struct SlotState {
    next: Time,
    packets_left: i64,
    bytes_left: i64,
}

/// What netem did (`tc -s qdisc show` drops split by cause).
#[derive(Clone, Debug, Default)]
pub struct NetemStats {
    pub loss_drops: u64,
    pub limit_drops: u64,
    pub sent: u64,
    /// Both kinds of drops by flow (the per-flow conservation check).
    pub flow_drops: crate::qdisc::FlowCounts,
}

/// The netem element. Packets are kept as the kernel's tfifo keeps them: a linear list for
/// arrivals whose time to send is not earlier than the tail's (the common case: no jitter),
/// and a tree (here a heap) for the others; the head is the earlier of the two, the list on a
/// tie. That is a stable sort by time to send, so jitter wider than the packet spacing
/// reorders packets.
pub struct Netem {
    cfg: NetemConfig,
    rng: Stream,
    delay_cor: Crandom,
    loss_cor: Crandom,
    linear: VecDeque<Held>,
    tree: BinaryHeap<Held>,
    arrivals: u64,
    /// `None` when no slot is configured (the kernel's `slot_next == 0`).
    slot: Option<SlotState>,
    /// The qdisc watchdog: re-arming replaces the deadline, as `qdisc_watchdog_schedule_ns`.
    watchdog: Timer,
    pub stats: NetemStats,
}

impl Netem {
    /// A netem configured at time zero with its own random stream.
    pub fn new(cfg: NetemConfig, mut rng: Stream) -> Self {
        let delay_cor = Crandom::new(cfg.delay_corr, &mut rng);
        let loss_cor = Crandom::new(cfg.loss_corr, &mut rng);
        // get_slot: the first slot is open from configuration time.
        let slot = cfg.slot.as_ref().map(|s| SlotState { next: Time::ZERO, packets_left: s.max_packets, bytes_left: s.max_bytes });
        let cap = (cfg.limit as usize).min(1024);
        Netem { delay_cor, loss_cor, linear: VecDeque::with_capacity(cap), tree: BinaryHeap::with_capacity(cap), arrivals: 0, slot, watchdog: Timer::default(), stats: NetemStats::default(), cfg, rng }
    }

    pub fn config(&self) -> &NetemConfig {
        &self.cfg
    }
    pub fn held(&self) -> usize {
        self.linear.len() + self.tree.len()
    }
    pub fn for_each_held(&self, f: &mut dyn FnMut(&Packet)) {
        self.linear.iter().chain(self.tree.iter()).for_each(|h| f(&h.pkt))
    }
    pub fn drops(&self) -> u64 {
        self.stats.loss_drops + self.stats.limit_drops
    }

    /// `netem_enqueue`, then the dequeue run the kernel starts after an enqueue.
    pub fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        let held = self.held();
        let (rng, cfg) = (&mut self.rng, &self.cfg);
        if cfg.loss > 0 && cfg.loss >= self.loss_cor.next(rng) {
            self.stats.loss_drops += 1;
            self.stats.flow_drops.add(pkt.flow);
            pkt.release();
        } else if held >= cfg.limit as usize {
            self.stats.limit_drops += 1;
            self.stats.flow_drops.add(pkt.flow);
            pkt.release();
        } else {
            let cor = &mut self.delay_cor;
            let delay = tabledist(cfg.latency.0 as i64, cfg.jitter.0 as i64, &mut || cor.next(rng), cfg.dist);
            let time_to_send = Time((ctx.now.0 as i64 + delay).max(0) as u64);
            self.tfifo_enqueue(Held { time_to_send, seq: self.arrivals, pkt });
            self.arrivals += 1;
        }
        self.run(ctx);
    }

    /// A wake-up: the watchdog fired (or a stale entry, which re-queues itself).
    pub fn wake(&mut self, ctx: &mut ElementCtx) {
        if self.watchdog.fire(ctx.now, Event::Element(ctx.id), ctx.events) {
            self.run(ctx);
        }
    }

    fn run(&mut self, ctx: &mut ElementCtx) {
        while let Some(pkt) = self.dequeue(ctx) {
            self.stats.sent += 1;
            ctx.out.push(pkt);
        }
    }

    fn tfifo_enqueue(&mut self, h: Held) {
        if self.linear.back().map_or(true, |t| h.time_to_send >= t.time_to_send) {
            self.linear.push_back(h);
        } else {
            self.tree.push(h);
        }
    }

    /// `netem_peek`: the earlier of the tree's first and the list's head (the list on a tie).
    fn head_time(&self) -> Option<(Time, bool)> {
        match (self.tree.peek(), self.linear.front()) {
            (None, None) => None,
            (Some(t), None) => Some((t.time_to_send, true)),
            (None, Some(l)) => Some((l.time_to_send, false)),
            (Some(t), Some(l)) => Some(if t.time_to_send < l.time_to_send { (t.time_to_send, true) } else { (l.time_to_send, false) }),
        }
    }

    /// `get_slot_next`: the next slot opens after a gap drawn uniformly from
    /// [min, max) (`min + (max − min)·u32 >> 32`) or from the slot table, with a fresh budget.
    fn next_slot(&mut self, now: Time) {
        let cfg = self.cfg.slot.as_ref().expect("slot configured");
        let gap = match cfg.dist {
            None => {
                let span = (cfg.max_delay - cfg.min_delay).0 as u128;
                cfg.min_delay.0 as i64 + ((span * self.rng.next_u32() as u128) >> 32) as i64
            }
            Some((dist, delay, jitter)) => {
                let rng = &mut self.rng;
                tabledist(delay.0 as i64, jitter.0 as i64, &mut || rng.next_u32(), Some(dist))
            }
        };
        self.slot = Some(SlotState { next: Time((now.0 as i64 + gap).max(0) as u64), packets_left: cfg.max_packets, bytes_left: cfg.max_bytes });
    }

    /// `netem_dequeue`: the head leaves when its time to send has come and the slot (if any)
    /// is open. A slot whose start is earlier than the head's time to send is redrawn from
    /// now, so slots open lazily relative to the packets; a slot closes when its packet or
    /// byte budget is spent. Otherwise the watchdog is set for the later of the two times.
    fn dequeue(&mut self, ctx: &mut ElementCtx) -> Option<Packet> {
        let now = ctx.now;
        let (time_to_send, in_tree) = self.head_time()?;
        if self.slot.is_some_and(|s| s.next < time_to_send) {
            self.next_slot(now);
        }
        let slot_next = self.slot.map_or(Time::ZERO, |s| s.next);
        if time_to_send <= now && slot_next <= now {
            let h = if in_tree { self.tree.pop() } else { self.linear.pop_front() }.expect("head exists");
            if let Some(s) = &mut self.slot {
                s.packets_left -= 1;
                s.bytes_left -= h.pkt.wire_len as i64;
                if s.packets_left <= 0 || s.bytes_left <= 0 {
                    self.next_slot(now);
                }
            }
            return Some(h.pkt);
        }
        self.watchdog.arm(time_to_send.max(slot_next), Event::Element(ctx.id), ctx.events);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tc_syntax_in_kernel_units() {
        let c = NetemConfig::parse("delay 10ms 5ms 10% loss random 1% 25% limit 200").unwrap();
        assert_eq!((c.latency, c.jitter), (Time::from_millis(10), Time::from_millis(5)));
        assert_eq!(c.delay_corr, (0.1 * u32::MAX as f64).round() as u32);
        assert_eq!((c.loss, c.limit), ((0.01 * u32::MAX as f64).round() as u32, 200));
        assert_eq!(c.loss_corr, (0.25 * u32::MAX as f64).round() as u32);
        let c = NetemConfig::parse("netem delay 200us slot 800us 5ms packets 16 limit 10000").unwrap();
        let s = c.slot.unwrap();
        assert_eq!((s.min_delay, s.max_delay, s.max_packets, s.max_bytes), (Time::from_micros(800), Time::from_millis(5), 16, i32::MAX as i64));
        assert_eq!(c.limit, 10000);
        // tc's old loss syntax and a bare number of microseconds.
        let c = NetemConfig::parse("delay 1500 loss 0.5").unwrap();
        assert_eq!((c.latency, c.loss), (Time::from_micros(1500), (0.005 * u32::MAX as f64).round() as u32));
        assert_eq!(NetemConfig::parse("slot 2ms bytes 64kb").unwrap().slot.unwrap().max_delay, Time::from_millis(2));
        // Slot times are read with get_time64: a bare number is nanoseconds.
        let s = NetemConfig::parse("slot 800 5000").unwrap().slot.unwrap();
        assert_eq!((s.min_delay, s.max_delay), (Time(800), Time(5000)));
        let s = NetemConfig::parse("slot distribution normal 2000000 500us").unwrap().slot.unwrap();
        assert_eq!(s.dist.map(|d| (d.1, d.2)), Some((Time::from_millis(2), Time::from_micros(500))));
        assert_eq!(NetemConfig::parse("delay 10ms 2ms distribution normal").unwrap().dist, Some(Distribution::Normal));
    }

    #[test]
    fn bad_options_are_named() {
        for (text, needle) in [
            ("delay 10ms reorder 25%", "netem: 'reorder' is not modelled (supported: delay (latency), distribution, loss (drop), slot, limit)"),
            ("delay 10x", "netem delay: invalid time"),
            ("loss 120%", "out of range"),
            ("slot 5ms 1ms", "max_delay is smaller"),
            ("delay 10ms distribution normal", "no latency and jitter"),
            ("delay 10ms 1ms distribution gauss", "unknown distribution 'gauss'"),
            ("loss state 1%", "loss model 'state'"),
            ("jitter 1ms", "netem has no parameter 'jitter' (known: delay (latency), distribution, loss (drop), slot, limit)"),
        ] {
            let e = NetemConfig::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    /// The declared table drives the refusals and the "known" list, and every option tc's
    /// netem has that the element does not model is refused by name.
    #[test]
    fn the_declared_table_refuses_what_is_not_modelled() {
        for k in ["duplicate", "corrupt", "reorder", "gap", "rate", "ecn", "seed"] {
            let e = NetemConfig::parse(&format!("delay 1ms {k} 1")).unwrap_err();
            assert_eq!(e, format!("netem: '{k}' is not modelled (supported: delay (latency), distribution, loss (drop), slot, limit)"));
        }
        assert_eq!(known_keys(PARAMS), "delay (latency), distribution, loss (drop), slot, limit");
        // Aliases read as their parameter; `distribution uniform` is no table.
        let c = NetemConfig::parse("latency 5ms 1ms drop 2% distribution uniform limit 7").unwrap();
        assert_eq!((c.latency, c.jitter, c.dist, c.limit), (Time::from_millis(5), Time::from_millis(1), None, 7));
        assert_eq!(c.loss, (0.02 * u32::MAX as f64).round() as u32);
        assert!(NetemConfig::parse("limit").unwrap_err().contains("netem parameter 'limit' needs a value"));
    }

    #[test]
    fn generated_tables_match_the_generators() {
        assert!((inverse_normal_cdf(0.975) - 1.959_963_985).abs() < 1e-7);
        let n = Distribution::Normal.table();
        assert_eq!(n.len(), 4096);
        // normal.c's first entry is Φ⁻¹(0.5/16384) = −4.01 σ, clamped to SHRT_MIN; the middle
        // one Φ⁻¹(2048.125/4096) ≈ 0.
        assert_eq!(n[0], i16::MIN);
        assert!(n[2048].abs() <= 3, "{}", n[2048]);
        let p = Distribution::Pareto.table();
        // pareto.c: u = 1 gives (1 − 1.5)·(4/3)·8192 = −5461.33.
        assert_eq!(p[0], -5461);
        assert_eq!(*p.last().unwrap(), 32767);
        let pn = Distribution::ParetoNormal.table();
        assert_eq!(pn[2048] as i64, (normal_entry(2048) + 3 * pareto_entry(2048)) / 4);
        for t in [n, p, pn] {
            assert!(t.windows(2).all(|w| w[0] <= w[1]), "tables are inverse CDFs");
        }
    }

    #[test]
    fn uniform_tabledist_covers_mu_plus_minus_sigma() {
        let mut r = [0u32, 9_999_999, 10_000_000, u32::MAX].into_iter();
        let got: Vec<i64> = (0..4).map(|_| tabledist(10_000_000, 5_000_000, &mut || r.next().unwrap(), None)).collect();
        // 2^32 − 1 = 429·10^7 + 4_967_295.
        assert_eq!(got, vec![5_000_000, 14_999_999, 5_000_000, 9_967_295]);
    }
}
