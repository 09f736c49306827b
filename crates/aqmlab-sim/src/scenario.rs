//! The scenario schema: one definition, in one place, deserialised from TOML with serde.
//!
//! Every key is checked: unknown keys, missing keys and malformed or out-of-range values
//! are reported as one line naming the key path and the file line (see [`ScenarioError`]).

use crate::packet::{EcnMode, MAX_UDP_PAYLOAD};
use crate::path::netem::NetemSpec;
use crate::path::tunnel::{self, TunnelSpec};
use crate::profile::Stack;
use crate::qdisc::QdiscSpec;
use crate::time::{Rate, Time};
use crate::units::{parse_bytes, parse_rate_with_unit, parse_time};
use serde::de::{self, Deserializer};
use schemars::JsonSchema;
use serde::Deserialize;
use std::fmt;

/// A whole run.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Optional label used in reports.
    #[serde(default)]
    pub name: Option<String>,
    /// Simulated duration.
    #[serde(deserialize_with = "de_time")]
    pub duration: Time,
    /// Seed of every random stream of the run.
    #[serde(default = "default_seed", deserialize_with = "de_seed")]
    #[schemars(schema_with = "crate::schema::seed")]
    pub seed: u64,
    /// The era profile: which version of each algorithm runs (`profile.rs`; default `linux`).
    #[serde(default)]
    pub stack: Stack,
    pub bottleneck: Bottleneck,
    /// Path from receivers back to senders; uncongested by default.
    #[serde(default, rename = "return")]
    pub return_path: Option<ReturnPath>,
    #[serde(default)]
    pub metrics: Metrics,
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::flows")]
    pub flows: Vec<FlowSpec>,
    /// Latency probes (isochronous UDP request/response, irtt-like).
    #[serde(default)]
    pub probes: Vec<ProbeSpec>,
    /// Real-time media flows over UDP (SCReAM).
    #[serde(default)]
    pub media: Vec<MediaSpec>,
    /// Unresponsive UDP sources (video-like frame bursts, constant bit rate).
    #[serde(default)]
    pub udp: Vec<UdpSpec>,
    /// Short-flow workloads: Poisson arrivals of finite TCP transfers (algorithms.md 4.1).
    #[serde(default)]
    pub workloads: Vec<WorkloadSpec>,
    /// Load-transient groups of simultaneous finite transfers (algorithms.md 4.3).
    #[serde(default)]
    pub transients: Vec<TransientSpec>,
    /// Tunnels flows, probes and media can be carried in (`tunnel = "<name>"`).
    #[serde(default)]
    pub tunnels: Vec<TunnelSpec>,
    /// The end hosts (`[host]`): GSO bursts, start-time spread, per-packet timing noise.
    #[serde(default)]
    pub host: HostSpec,
    /// Ceilings on what the run may cost, checked before it starts (`[limits]`).
    #[serde(default)]
    pub limits: Limits,
}

fn default_seed() -> u64 {
    1
}

/// Ceilings on what a run may cost (`[limits]`), checked by validation before any work, so
/// that a scenario that would run for hours or exhaust memory is refused with one line
/// instead. Raise them for a run that really needs more. The CLI's `--max-events` and
/// `--max-memory` override the scenario's values. Defaults are sized for a 2-core, 23 GB
/// machine running two runs at once (docs/limits.md).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Packets the run may put on the bottleneck and return links, estimated from the links'
    /// highest rates in full-size packets (and ACKs) and the UDP and media sources' rates in
    /// their own packet sizes, over the duration. The default, 2e9, is about ten minutes of
    /// engine time at 3 M packets per second.
    #[serde(default = "default_max_packets", deserialize_with = "de_count")]
    #[schemars(schema_with = "crate::schema::count")]
    pub max_packets: u64,
    /// Events the engine may execute: checked against an estimate before the run
    /// ([`Scenario::event_estimate`]) and counted while it runs; a run that reaches it stops
    /// with an error naming `limits.max_events` and writes nothing. The default, 1e10, is
    /// 30 to 60 minutes of engine time (3 to 6 M events per second).
    #[serde(default = "default_max_events", deserialize_with = "de_count")]
    #[schemars(schema_with = "crate::schema::count")]
    pub max_events: u64,
    /// Memory the run may need, in bytes (`"4GiB"`): checked against an estimate before
    /// the run ([`Scenario::memory_estimate`]: flow state, full queues, packets in flight,
    /// open transfers, media queues, series with their Python copy) and, while it runs,
    /// against the process's resident memory once per 2^20 events; a run that reaches it
    /// stops with an error naming `limits.max_memory`. Default 4 GiB.
    #[serde(default = "default_max_memory", deserialize_with = "de_bytes")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub max_memory: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_packets: default_max_packets(), max_events: default_max_events(), max_memory: default_max_memory() }
    }
}

fn default_max_packets() -> u64 {
    2_000_000_000
}
fn default_max_events() -> u64 {
    10_000_000_000
}
fn default_max_memory() -> u64 {
    4 << 30
}

/// A count (`[limits]`): a TOML integer, a whole float such as `1e10`, or its text.
fn de_count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = expect_str(d, "a whole number such as 1000000 or 1e10")?;
    let v: f64 = s.trim().parse().map_err(|_| de::Error::custom(format!("'{s}' is not a whole number")))?;
    if !(v >= 1.0 && v.fract() == 0.0 && v < 1.8e19) {
        return Err(de::Error::custom(format!("'{s}' is not a whole number from 1 to 1.8e19")));
    }
    Ok(v as u64)
}

/// The end hosts (`[host]`): how their network stack hands packets to the path, and when
/// their applications start. Defaults are those of a Linux netns testbed run by flent
/// (docs/host.md has the mapping and the evidence).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// TCP sends GSO skbs of `tcp_tso_segs` segments that leave the host back to back
    /// (Linux: always on for TCP, also with `ethtool -K <veth> gso off`, which only moves
    /// the segmentation into software). `false` sends one segment at a time. A flow's own
    /// `gso` overrides it.
    #[serde(default = "default_true")]
    pub gso: bool,
    /// Every bulk flow, probe, media and UDP source starts a uniformly drawn U[0,
    /// `start_spread`) after its `start` (flent launches one netperf/irtt process per flow;
    /// they open their connections milliseconds apart). `"0s"`: exact starts.
    #[serde(default = "default_start_spread", deserialize_with = "de_time")]
    pub start_spread: Time,
    /// Per-packet timing noise of the hosts: each send instant's packets leave U[0, `jitter`)
    /// late, never reordered (veth transmit and softirq scheduling). `"0s"`: none.
    #[serde(default = "default_host_jitter", deserialize_with = "de_time")]
    pub jitter: Time,
}

impl Default for HostSpec {
    fn default() -> Self {
        HostSpec { gso: true, start_spread: default_start_spread(), jitter: default_host_jitter() }
    }
}

fn default_start_spread() -> Time {
    Time::from_millis(5)
}

fn default_host_jitter() -> Time {
    Time::from_micros(50)
}

fn default_true() -> bool {
    true
}

/// The shared forward bottleneck.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bottleneck {
    #[serde(deserialize_with = "de_rate")]
    pub rate: Rate,
    #[serde(default = "default_qdisc")]
    pub qdisc: QdiscSpec,
    /// Propagation delay of the bottleneck link itself (added to every flow's RTT).
    #[serde(default, deserialize_with = "de_time")]
    pub delay: Time,
    /// Scheduled rate changes and discipline swaps (`tc class change` / `tc qdisc replace`).
    #[serde(default)]
    pub changes: Vec<LinkChange>,
    /// Links in front of the bottleneck on the forward direction, in path order.
    #[serde(default)]
    pub upstream: Vec<UpstreamLink>,
    /// netem (tc syntax) on both travel directions, shared by every flow, after each flow's
    /// own base delay and ahead of the bottleneck discipline: the studies' child netem on
    /// the middlebox ingress (algorithms.md 3.2).
    #[serde(default)]
    pub netem: Option<NetemSpec>,
    /// The bottleneck as an HTB class (rate = ceil = `rate`) with this burst in bytes on an
    /// ifb device, as a receiver-side `tc ... ingress` + `mirred ... redirect dev ifb0` +
    /// `htb` set-up builds it: the qdisc is dequeued while the class's tokens last and each
    /// packet passes on at once (`path::link`, `HtbBucket`). tc's default burst is 1600 on
    /// kernels with high-resolution timers. Unset: a serialiser at `rate` (no burst).
    #[serde(default)]
    pub htb_burst: Option<u32>,
}

/// One scheduled change of a shared link (see `docs/path.md`).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkChange {
    #[serde(deserialize_with = "de_time")]
    pub at: Time,
    /// New link rate, as HTB `tc class change ... rate R ceil R`.
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub rate: Option<Rate>,
    /// New discipline, as `tc qdisc replace` (the queued packets are dropped).
    #[serde(default)]
    pub qdisc: Option<QdiscSpec>,
    #[serde(default)]
    pub direction: ChangeDirection,
}

/// Which shared link a change applies to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeDirection {
    /// The bottleneck (`[bottleneck]`, client to server).
    #[default]
    Forward,
    /// The return link (`[return]`, server to client).
    Return,
    /// Both, as the studies' "bidir" rate steps.
    Both,
}

impl ChangeDirection {
    pub fn forward(self) -> bool {
        self != ChangeDirection::Return
    }
    pub fn ret(self) -> bool {
        self != ChangeDirection::Forward
    }
}

/// A link ahead of the bottleneck (a cascaded bottleneck), shared by every flow's forward
/// path.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamLink {
    #[serde(deserialize_with = "de_rate")]
    pub rate: Rate,
    #[serde(default = "default_qdisc")]
    pub qdisc: QdiscSpec,
    /// Propagation delay after this link (added to every flow's RTT).
    #[serde(default, deserialize_with = "de_time")]
    pub delay: Time,
}

fn default_qdisc() -> QdiscSpec {
    QdiscSpec::parse("pfifo limit 1000").expect("valid default")
}

/// The shared reverse link carrying ACKs.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReturnPath {
    /// Defaults to the bottleneck rate.
    #[serde(default, deserialize_with = "de_opt_rate")]
    pub rate: Option<Rate>,
    #[serde(default = "default_return_qdisc")]
    pub qdisc: QdiscSpec,
}

pub(crate) fn default_return_qdisc() -> QdiscSpec {
    QdiscSpec::parse("pfifo limit 10000").expect("valid default")
}

/// Measurement settings.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Sampling grid of every series (flent's step_size).
    #[serde(default = "default_step", deserialize_with = "de_time")]
    pub step: Time,
    /// Window of the steady-state delivery rate (algorithms.md 5.2): a time (l4s-tests'
    /// `60s`, the window before the last second of the flow), or `"auto"` (the default): the
    /// second half of each flow's life, at most 60 s (`metrics::steady_window`). `None` is auto.
    #[serde(default, deserialize_with = "de_steady_window")]
    #[schemars(schema_with = "crate::schema::steady_window")]
    pub steady_window: Option<Time>,
    /// Delay-spike thresholds (algorithms.md 5.5 / 4.3): for each, the longest contiguous
    /// time the bottleneck backlog exceeds this much time's worth of bytes at the link rate.
    #[serde(default, deserialize_with = "de_times")]
    pub spike_thresholds: Vec<Time>,
    /// Spikes are measured from this time on.
    #[serde(default, deserialize_with = "de_time")]
    pub spike_after: Time,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            step: default_step(),
            steady_window: None,
            spike_thresholds: Vec::new(),
            spike_after: Time::ZERO,
        }
    }
}

fn default_step() -> Time {
    Time::from_millis(50)
}
/// A seed: a TOML integer, or (above TOML's i64 range, as a resolved scenario writes it)
/// decimal text.
fn de_seed<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = expect_str(d, "an integer 0..2^64-1")?;
    s.trim().parse::<u64>().map_err(|_| de::Error::custom(format!("'{s}' is not an integer 0..2^64-1")))
}

fn de_steady_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    let s = expect_str(d, "a time such as \"60s\", or \"auto\"")?;
    if s.trim() == "auto" {
        return Ok(None);
    }
    let t = parse_time(&s, None).map_err(|e| de::Error::custom(format!("{e}, or \"auto\"")))?;
    if t == Time::ZERO {
        return Err(de::Error::custom("must be greater than zero (or \"auto\")"));
    }
    Ok(Some(t))
}

/// One flow (or `count` identical flows).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Congestion control by Linux name, optionally with parameters (`"cubic hystart 0"`).
    pub cc: crate::cc::CcSpec,
    /// Base round-trip time (split evenly between the two directions).
    #[serde(deserialize_with = "de_time")]
    pub rtt: Time,
    #[serde(default, deserialize_with = "de_time")]
    pub start: Time,
    /// Stop sending new data at this time (default: run to the end).
    #[serde(default, deserialize_with = "de_opt_time")]
    pub stop: Option<Time>,
    /// Transfer this many bytes, then finish (default: unlimited bulk).
    #[serde(default, deserialize_with = "de_opt_bytes")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub size: Option<u64>,
    #[serde(default = "default_ecn")]
    pub ecn: EcnMode,
    /// Identical flows to create from this entry.
    #[serde(default = "default_count")]
    pub count: u32,
    /// Label; defaults to `<cc>-<index>`.
    #[serde(default)]
    pub name: Option<String>,
    /// TCP payload bytes per segment (Linux MSS with timestamps on a 1500-byte MTU).
    #[serde(default = "default_mss")]
    pub mss: u32,
    /// Initial congestion window in packets (RFC 6928).
    #[serde(default = "default_iw")]
    pub initial_cwnd: u32,
    /// Retransmission timeout before the first RTT sample (Linux `TCP_TIMEOUT_INIT`, 1 s,
    /// RFC 6298 §2.1); it also times the SYN.
    #[serde(default = "default_initial_rto", deserialize_with = "de_time")]
    pub initial_rto: Time,
    /// Linux internal pacing (`tcp_update_pacing_rate`).
    #[serde(default)]
    pub pacing: bool,
    /// Receive window limit in bytes (default: the profile's autotuning ceiling,
    /// [`Stack::default_rwnd_bytes`]: not limiting on `linux`, 3 MiB on the 2020-2024 kernels).
    #[serde(default, deserialize_with = "de_opt_bytes")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub rwnd: Option<u64>,
    /// Multi-segment GSO sends for this flow (default: `[host] gso`, on).
    #[serde(default)]
    pub gso: Option<bool>,
    /// Rewrite the ECN field of this flow's data on the way to the bottleneck, as the
    /// studies' middlebox did with iptables (`"not-ect"` bleaches: the "cubic-noecn" cases;
    /// `"ect1"` is their `dscp_to_ect1`).
    #[serde(default)]
    pub ecn_rewrite: Option<Codepoint>,
    /// The client host the flow runs from (its server is host 0 on the other side). Flows
    /// with the same `host` share it, as the studies' flows all ran between one client and
    /// one server; host-fair disciplines (CAKE's triple-isolate) see it.
    #[serde(default)]
    pub host: u16,
    /// Which way the data goes: `up` from the client over the bottleneck (the studies'
    /// uploads), or `down` from the server over the return link (downloads, with the ACKs
    /// queueing at the bottleneck).
    #[serde(default)]
    pub direction: Way,
    /// netem (tc syntax) of this flow's own, on both travel directions after its base delay
    /// (e.g. `"delay 2ms 1ms 10%"`, the SCE S6 jitter runs).
    #[serde(default)]
    pub netem: Option<NetemSpec>,
    /// Carry this traffic in the `[[tunnels]]` entry of this name.
    #[serde(default)]
    pub tunnel: Option<String>,
}

/// A short-flow workload as heistp/ccafct runs it: transfers arrive as a Poisson process
/// (exponential inter-arrival times, first arrival at `start`), each a new TCP connection
/// carrying a lognormally sized object. Defaults are ccafct's.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Label; defaults to `workload-<index>`. Names the random stream (`workload/<name>`).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "default_workload_cc")]
    pub cc: crate::cc::CcSpec,
    /// Base round-trip time (split evenly between the two directions).
    #[serde(deserialize_with = "de_time")]
    pub rtt: Time,
    /// `down` (default): the server sends the object to the client, as HTTP.
    #[serde(default = "default_workload_direction")]
    pub direction: Way,
    #[serde(default = "default_ecn")]
    pub ecn: EcnMode,
    #[serde(default = "default_mean_interarrival", deserialize_with = "de_time")]
    pub mean_interarrival: Time,
    /// 5th and 95th percentiles of the lognormal object size.
    #[serde(default = "default_size_p5", deserialize_with = "de_bytes")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub size_p5: u64,
    #[serde(default = "default_size_p95", deserialize_with = "de_bytes")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub size_p95: u64,
    /// First arrival.
    #[serde(default, deserialize_with = "de_time")]
    pub start: Time,
    /// No arrivals at or after this time (default: the end of the run).
    #[serde(default, deserialize_with = "de_opt_time")]
    pub stop: Option<Time>,
    #[serde(default = "default_mss")]
    pub mss: u32,
    #[serde(default = "default_iw")]
    pub initial_cwnd: u32,
    #[serde(default = "default_initial_rto", deserialize_with = "de_time")]
    pub initial_rto: Time,
}

fn default_workload_cc() -> crate::cc::CcSpec {
    crate::cc::CcSpec::parse("cubic").expect("valid default")
}
fn default_workload_direction() -> Way {
    Way::Down
}
fn default_mean_interarrival() -> Time {
    Time::from_millis(200)
}
fn default_size_p5() -> u64 {
    64 << 10
}
fn default_size_p95() -> u64 {
    2 << 20
}

/// A load-transient group (Järvinen & Kojo): `flows` simultaneous finite transfers that
/// split `total` bytes, all starting at `start` + U(0, `start_jitter`) (one draw per group).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransientSpec {
    /// Label; defaults to `transient-<index>`. Its flows are `<name>-<k>`.
    #[serde(default)]
    pub name: Option<String>,
    pub flows: u32,
    /// Bytes of the whole group; each flow carries `total / flows` (the remainder goes to
    /// the first flows, one byte each).
    #[serde(deserialize_with = "de_bytes")]
    #[schemars(schema_with = "crate::schema::bytes")]
    pub total: u64,
    pub cc: crate::cc::CcSpec,
    #[serde(deserialize_with = "de_time")]
    pub rtt: Time,
    #[serde(default, deserialize_with = "de_time")]
    pub start: Time,
    #[serde(default, deserialize_with = "de_time")]
    pub start_jitter: Time,
    #[serde(default)]
    pub direction: Way,
    #[serde(default = "default_ecn")]
    pub ecn: EcnMode,
    #[serde(default = "default_mss")]
    pub mss: u32,
    #[serde(default = "default_iw")]
    pub initial_cwnd: u32,
    #[serde(default = "default_initial_rto", deserialize_with = "de_time")]
    pub initial_rto: Time,
}

/// Which way a flow's data travels through the dumbbell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    /// Client to server, over the bottleneck (`[bottleneck]`).
    #[default]
    Up,
    /// Server to client, over the return link (`[return]`).
    Down,
}

/// An ECN codepoint, for traffic that sets it directly (probes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum Codepoint {
    #[serde(rename = "not-ect")]
    NotEct,
    #[serde(rename = "ect0")]
    Ect0,
    #[serde(rename = "ect1")]
    Ect1,
    #[serde(rename = "ce")]
    Ce,
}

impl Codepoint {
    pub fn ecn(self) -> crate::packet::Ecn {
        use crate::packet::Ecn;
        match self {
            Codepoint::NotEct => Ecn::NotEct,
            Codepoint::Ect0 => Ecn::Ect0,
            Codepoint::Ect1 => Ecn::Ect1,
            Codepoint::Ce => Ecn::Ce,
        }
    }
}

/// What a probe imitates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// irtt: UDP request/response; RTT and both one-way delays.
    #[default]
    Irtt,
    /// ICMP echo as flent runs it (`fping -p <step>` / `ping -i <step>`): RTT only.
    Ping,
}

/// A latency probe: a request every `interval`, echoed by the far end.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Label; defaults to `probe-<index>`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub kind: ProbeKind,
    /// Base round-trip time of the probe's path.
    #[serde(deserialize_with = "de_time")]
    pub rtt: Time,
    /// Default: 10 ms for irtt (the l4s-tests' `irtt client -i 10ms`); the sampling step
    /// (`metrics.step`, flent's step size) for ping, as flent passes it to ping.
    #[serde(default, deserialize_with = "de_opt_time")]
    pub interval: Option<Time>,
    /// Bytes on the wire per request and reply (Ethernet + IP + UDP/ICMP + payload).
    /// Default: 102 for irtt, 98 for ping.
    #[serde(default)]
    pub size: Option<u32>,
    #[serde(default = "default_probe_ecn")]
    pub ecn: Codepoint,
    #[serde(default)]
    pub dscp: u8,
    #[serde(default, deserialize_with = "de_time")]
    pub start: Time,
    #[serde(default, deserialize_with = "de_opt_time")]
    pub stop: Option<Time>,
    /// netem of the probe's own path, both directions (to measure jitter).
    #[serde(default)]
    pub netem: Option<NetemSpec>,
    /// Carry this traffic in the `[[tunnels]]` entry of this name.
    #[serde(default)]
    pub tunnel: Option<String>,
}

impl ProbeSpec {
    /// The request interval, given or the kind's default.
    pub fn interval(&self, step: Time) -> Time {
        self.interval.unwrap_or(match self.kind {
            ProbeKind::Irtt => Time::from_millis(10),
            ProbeKind::Ping => step,
        })
    }
    /// Bytes on the wire, given or the kind's default: irtt's request is 14 (Ethernet) + 20
    /// (IP) + 8 (UDP) + 60 bytes of irtt header; ping's echo is 14 + 20 + 8 (ICMP) + 56
    /// bytes of payload (iputils' and fping's default data size).
    pub fn size(&self) -> u32 {
        self.size.unwrap_or(match self.kind {
            ProbeKind::Irtt => 102,
            ProbeKind::Ping => 98,
        })
    }
}
fn default_probe_ecn() -> Codepoint {
    Codepoint::NotEct
}

/// Media congestion controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MediaKind {
    /// SCReAM v2 (`apps::scream`); ECT(1) selects its L4S mode.
    Scream,
}

/// A real-time video flow: an RTP-like source at a target bitrate set by its congestion
/// control, with per-packet feedback from the receiver. Defaults are the SCReAM test tool's.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MediaSpec {
    /// Label; defaults to `<kind>-<index>`.
    #[serde(default)]
    pub name: Option<String>,
    pub kind: MediaKind,
    /// Base round-trip time of the path.
    #[serde(deserialize_with = "de_time")]
    pub rtt: Time,
    #[serde(default, deserialize_with = "de_time")]
    pub start: Time,
    #[serde(default, deserialize_with = "de_opt_time")]
    pub stop: Option<Time>,
    /// Codepoint of the media packets: "ect1" for L4S mode, "ect0" classic ECN, "not-ect".
    #[serde(default = "default_probe_ecn")]
    pub ecn: Codepoint,
    #[serde(default)]
    pub dscp: u8,
    #[serde(default = "default_media_min", deserialize_with = "de_rate")]
    pub min_bitrate: Rate,
    #[serde(default = "default_media_min", deserialize_with = "de_rate")]
    pub start_bitrate: Rate,
    #[serde(default = "default_media_max", deserialize_with = "de_rate")]
    pub max_bitrate: Rate,
    /// Frames per second.
    #[serde(default = "default_frame_rate")]
    pub frame_rate: f64,
    /// Frame size variation in percent, as the tool's `-rand X`: each frame is
    /// nominal × (1 + (u − ½)·X/100) with u uniform in [0, 1).
    #[serde(default)]
    pub frame_size_variation: f64,
    /// Pacing microburst: packets leave back to back until their pacing intervals add up to this.
    #[serde(default = "default_microburst", deserialize_with = "de_time")]
    pub microburst_interval: Time,
    /// Largest RTP payload in bytes (the tool's `-mtu`).
    #[serde(default = "default_media_packet")]
    pub packet_size: u32,
    #[serde(default = "default_media_qdelay_target", deserialize_with = "de_time")]
    pub queue_delay_target: Time,
    /// Pacing rate = this × the target bitrate (the tool's `-paceheadroom`, 1.5).
    #[serde(default = "default_media_pacing_headroom")]
    pub pacing_headroom: f64,
    /// Host time the tool's transmit loop spends on each packet (its `isOkToTransmit`,
    /// `sendto` and `addTransmitted` calls) before it can send the next. The loop's sleeps
    /// do not subtract it (`scream_sender.cpp` 76a298a `transmitRtpThread`: the measured
    /// `diff` is overwritten by a constant 100 µs before use), so it lengthens every
    /// microburst cycle. Default 0 (not known for the test record's laptops).
    #[serde(default, deserialize_with = "de_time")]
    pub send_time: Time,
    /// Carry this traffic in the `[[tunnels]]` entry of this name.
    #[serde(default)]
    pub tunnel: Option<String>,
}

fn default_media_min() -> Rate {
    Rate(1_000_000)
}
/// `scream_sender.cpp`'s `maxRate = 200000` kbit/s at EricssonResearch/scream 76a298a.
fn default_media_max() -> Rate {
    Rate(200_000_000)
}
fn default_frame_rate() -> f64 {
    50.0
}
fn default_microburst() -> Time {
    Time::from_micros(500)
}
/// `scream_sender.cpp`'s `packetPacingHeadroom = 1.5f` at EricssonResearch/scream 76a298a.
fn default_media_pacing_headroom() -> f64 {
    1.5
}
fn default_media_packet() -> u32 {
    1200
}
fn default_media_qdelay_target() -> Time {
    Time::from_millis(60)
}

/// What an unresponsive UDP source sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UdpKind {
    /// Frames at `frame_rate`, each `rate / frame_rate` bytes sent as a burst of packets
    /// (or spread over the frame interval when `paced`).
    Video,
    /// Evenly spaced packets at `rate`.
    Cbr,
}

impl UdpKind {
    pub fn name(self) -> &'static str {
        match self {
            UdpKind::Video => "video",
            UdpKind::Cbr => "cbr",
        }
    }
}

/// An unresponsive UDP source and its receiver (`apps::udp`). `rate` counts UDP payload, as
/// an encoder's bitrate or `iperf3 -u -b` does; each packet adds 42 bytes of UDP, IPv4 and
/// Ethernet headers on the wire.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UdpSpec {
    /// Label; defaults to `<kind>-<index>`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "default_udp_kind")]
    pub kind: UdpKind,
    /// Payload bit rate. Default 2.5 Mbit/s: a 720p/1080p videoconference stream.
    #[serde(default = "default_udp_rate", deserialize_with = "de_rate")]
    pub rate: Rate,
    /// Video frames per second (default 30); video only.
    #[serde(default)]
    pub frame_rate: Option<f64>,
    /// Video: spread each frame's packets evenly over the frame interval instead of sending
    /// them back to back.
    #[serde(default)]
    pub paced: Option<bool>,
    /// Video: frame size variation in percent; each frame is nominal × (1 + (u − ½)·X/100)
    /// with u uniform in [0, 1), as `[[media]]`'s key.
    #[serde(default)]
    pub frame_size_variation: Option<f64>,
    /// UDP payload bytes per packet (a frame's last packet carries the remainder). Default
    /// 1200, libwebrtc's video packet size (`kVideoMtu`).
    #[serde(default = "default_media_packet")]
    pub packet_size: u32,
    /// Base round-trip time of the path (half each way; only the forward half is used).
    #[serde(deserialize_with = "de_time")]
    pub rtt: Time,
    #[serde(default, deserialize_with = "de_time")]
    pub start: Time,
    #[serde(default, deserialize_with = "de_opt_time")]
    pub stop: Option<Time>,
    #[serde(default = "default_probe_ecn")]
    pub ecn: Codepoint,
    #[serde(default)]
    pub dscp: u8,
    #[serde(default)]
    pub direction: Way,
    /// Carry this traffic in the `[[tunnels]]` entry of this name.
    #[serde(default)]
    pub tunnel: Option<String>,
}

fn default_udp_kind() -> UdpKind {
    UdpKind::Video
}
fn default_udp_rate() -> Rate {
    Rate(2_500_000)
}
/// Default video frame rate of `[[udp]]` sources.
pub const DEFAULT_UDP_FRAME_RATE: f64 = 30.0;

fn default_ecn() -> EcnMode {
    EcnMode::Off
}
fn default_count() -> u32 {
    1
}
fn default_mss() -> u32 {
    1448
}
fn default_iw() -> u32 {
    10
}
fn default_initial_rto() -> Time {
    Time::from_secs(1)
}

fn expect_str<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<String, D::Error> {
    struct V<'a>(&'a str);
    impl<'de> de::Visitor<'de> for V<'_> {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{}", self.0)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    d.deserialize_any(V(what))
}

fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
    let s = expect_str(d, "a time such as \"20ms\"")?;
    parse_time(&s, None).map_err(de::Error::custom)
}
fn de_opt_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    de_time(d).map(Some)
}
/// A list of times, e.g. `["60ms", "100ms"]`.
fn de_times<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Time>, D::Error> {
    #[derive(Deserialize)]
    struct TimeText(#[serde(deserialize_with = "de_time")] Time);
    Ok(Vec::<TimeText>::deserialize(d)?.into_iter().map(|t| t.0).collect())
}
fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    let s = expect_str(d, "a rate such as \"50Mbit\"")?;
    parse_rate_with_unit(&s).map_err(de::Error::custom)
}
fn de_opt_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    de_rate(d).map(Some)
}
fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = expect_str(d, "a size in bytes such as 1000000 or \"2mb\"")?;
    parse_bytes(&s).map_err(de::Error::custom)
}
fn de_opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_bytes(d).map(Some)
}

/// A scenario that cannot run: one line naming where and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// Dotted key path, e.g. `flows[1].rtt`.
    pub key: String,
    /// 1-based line in the source, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.key.is_empty()) {
            (Some(l), false) => write!(f, "line {l}: {}: {}", self.key, self.message),
            (Some(l), true) => write!(f, "line {l}: {}", self.message),
            (None, false) => write!(f, "{}: {}", self.key, self.message),
            (None, true) => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// At most 60 characters of a value quoted in a message (`"…"` marks the cut), so that a
/// 1 MB qdisc string is not echoed back whole.
pub(crate) fn excerpt(v: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 60;
    match v.char_indices().nth(MAX) {
        None => v.into(),
        Some((cut, _)) => format!("{}…", &v[..cut]).into(),
    }
}

/// A number as a message quotes it: as written (`0.5`, `25`) when that is short, else in
/// exponent form (`{}` of 1e-300 or 1e300 is a 300-digit line; issue 14).
pub(crate) fn short_f64(v: f64) -> String {
    let plain = format!("{v}");
    if plain.len() <= crate::units::LONG_NUMBER_CHARS { plain } else { format!("{v:e}") }
}

/// Shortens every quoted value in a message with [`excerpt`]: our own ('…'), and serde's and
/// toml's ("…" for a string value, `…` for a variant or field name), which quote the input too.
pub(crate) fn shorten_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(1024));
    let mut rest = msg;
    while let Some(open) = rest.find(['\'', '"', '`']) {
        let q = rest[open..].chars().next().unwrap_or('\'');
        out.push_str(&rest[..open + 1]);
        rest = &rest[open + 1..];
        // A double-quoted value is escaped (`\"` inside does not close it).
        let mut escaped = false;
        // A quote inside the value (`'it's'`) closes nothing: a closing quote is followed by
        // the end, a space or punctuation.
        let close = rest.char_indices().find(|&(i, c)| {
            let end = c == q && !escaped && rest[i + 1..].chars().next().map_or(true, |n| !n.is_alphanumeric());
            escaped = q == '"' && c == '\\' && !escaped;
            end
        });
        match close {
            Some((close, _)) => {
                out.push_str(&excerpt(&rest[..close]));
                out.push(q);
                rest = &rest[close + 1..];
            }
            None => {
                out.push_str(&excerpt(rest));
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    // Quotes inside a value can still pair up wrongly; whatever the input, a message is cut
    // at MAX_MESSAGE characters.
    match out.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => format!("{}…", &out[..cut]),
        None => out,
    }
}

/// The longest error message (the longest legitimate one, a list of parameters, is about
/// 600 characters).
pub(crate) const MAX_MESSAGE: usize = 800;

/// Collapses a possibly multi-line parser message into one line.
fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Finds the line of a dotted key path in the source, for errors raised after parsing: the
/// leaf key inside the table the path names (`flows[1].rtt`: the `rtt =` line after the second
/// `[[flows]]` header; `bottleneck.changes[0].qdisc`: after the first `[[bottleneck.changes]]`),
/// else the first line that sets the leaf anywhere.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let (table, leaf) = key.rsplit_once('.').unwrap_or(("", key));
    let leaf = leaf.split('[').next()?;
    if leaf.is_empty() {
        return None;
    }
    let sets_leaf = |l: &str| {
        let t = l.trim_start();
        t.starts_with(leaf) && t[leaf.len()..].trim_start().starts_with('=')
    };
    let header = |l: &str| -> Option<String> {
        let t = l.split('#').next().unwrap_or("").trim();
        let inner = t.strip_prefix("[[").and_then(|x| x.strip_suffix("]]")).or_else(|| t.strip_prefix('[').and_then(|x| x.strip_suffix(']')))?;
        Some(inner.trim().to_string())
    };
    let (name, index) = match table.rsplit_once('[') {
        Some((h, rest)) if rest.ends_with(']') => (h, rest[..rest.len() - 1].parse::<usize>().ok()),
        _ => (table, None),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut start = if table.is_empty() { Some(0) } else { None };
    let mut seen = 0usize;
    for (i, l) in lines.iter().enumerate() {
        if start.is_some() {
            break;
        }
        if header(l).as_deref() == Some(name) {
            if index.map_or(true, |n| n == seen) {
                start = Some(i + 1);
            }
            seen += 1;
        }
    }
    if let Some(start) = start {
        for (i, l) in lines.iter().enumerate().skip(start) {
            if header(l).is_some() {
                break;
            }
            if sets_leaf(l) {
                return Some(i + 1);
            }
        }
        // The table is there but does not set the key (a missing field): its header's line,
        // not another table's line that sets a key of the same name.
        if !table.is_empty() {
            return Some(start);
        }
    }
    lines.iter().position(|l| sets_leaf(l)).map(|i| i + 1)
}

/// Parses TOML text into a table and applies `--set key=value` overrides to it.
fn parse_with_overrides(text: &str, overrides: &[String]) -> Result<toml::Table, ScenarioError> {
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| ScenarioError {
        key: String::new(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: shorten_quoted(&one_line(e.message())),
    })?;
    for o in overrides {
        apply_override(&mut doc, o)?;
    }
    Ok(doc)
}

/// The scenario that runs for `text` with `--set` overrides and `--seed`: the same TOML
/// document with the overrides (and the seed) written in, after checking that it is valid.
/// Keys left out keep their defaults, which depend on the aqmlab version (a run's
/// manifest.json names it).
pub fn resolve_toml(text: &str, seed: Option<u64>, overrides: &[String]) -> Result<String, ScenarioError> {
    Scenario::from_toml(text, overrides)?;
    let mut doc = parse_with_overrides(text, overrides)?;
    if let Some(seed) = seed {
        // TOML integers are i64; larger seeds are written as text, which `seed` accepts too.
        let v = i64::try_from(seed).map_or_else(|_| toml::Value::String(seed.to_string()), toml::Value::Integer);
        doc.insert("seed".into(), v);
    }
    toml::to_string(&doc).map_err(|e| ScenarioError { key: String::new(), line: None, message: one_line(&e.to_string()) })
}

impl Scenario {
    /// Parses TOML text, applying `--set key=value` overrides first.
    pub fn from_toml(text: &str, overrides: &[String]) -> Result<Scenario, ScenarioError> {
        let mut doc = parse_with_overrides(text, overrides)?;
        move_media_flows(&mut doc)?;
        let overridden = !overrides.is_empty();
        let value = toml::Value::Table(doc);
        let mut sc: Scenario = serde_path_to_error::deserialize(value).map_err(|e| {
            let key = e.path().to_string();
            let key = if key == "." { String::new() } else { key };
            let msg = shorten_quoted(&one_line(e.inner().message()));
            // serde names a missing key only in its message, at the path of the table that
            // lacks it: the key is that path plus the field (`duration`, `flows[0].cc`).
            let key = match msg.strip_prefix("missing field `").and_then(|r| r.split_once('`')) {
                Some((field, _)) if key.is_empty() => field.to_string(),
                Some((field, _)) => format!("{key}.{field}"),
                None => key,
            };
            let line = if overridden { None } else { line_of_key(text, &key) };
            // The path holds the input's own key names (an unknown key of any length).
            ScenarioError { key: one_line(&excerpt(&key)), line, message: msg }
        })?;
        sc.read_qdiscs_for_stack().map_err(|(key, message)| ScenarioError {
            line: if overridden { None } else { line_of_key(text, &key) },
            key,
            message: shorten_quoted(&message),
        })?;
        sc.validate().map_err(|(key, message)| ScenarioError {
            line: line_of_key(text, &key),
            key,
            message: shorten_quoted(&message),
        })?;
        Ok(sc)
    }

    /// Every discipline read again with the defaults of the scenario's `stack` (serde read
    /// them with Linux's before `stack` was known), so that a parameter's per-stack default
    /// (`aqmlab qdisc show KIND`: e.g. `hred`'s `wait` and `pie`'s `limit` on `ns2-2013`)
    /// applies unless the scenario gives the parameter. Nothing changes on `linux`.
    fn read_qdiscs_for_stack(&mut self) -> Result<(), (String, String)> {
        let stack = self.stack;
        let reread = |spec: &mut QdiscSpec, key: String| -> Result<(), (String, String)> {
            *spec = spec.for_stack(stack).map_err(|m| (key, m))?;
            Ok(())
        };
        reread(&mut self.bottleneck.qdisc, "bottleneck.qdisc".into())?;
        for (i, u) in self.bottleneck.upstream.iter_mut().enumerate() {
            reread(&mut u.qdisc, format!("bottleneck.upstream[{i}].qdisc"))?;
        }
        for (i, c) in self.bottleneck.changes.iter_mut().enumerate() {
            if let Some(q) = c.qdisc.as_mut() {
                reread(q, format!("bottleneck.changes[{i}].qdisc"))?;
            }
        }
        if let Some(r) = self.return_path.as_mut() {
            reread(&mut r.qdisc, "return.qdisc".into())?;
        }
        Ok(())
    }

    /// What runs differently than the scenario may seem to say: summary.json's `warnings`,
    /// printed on stderr by the CLI. Not errors: each is what Linux would do too.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, f) in self.flows.iter().enumerate() {
            if f.cc.kind_name() == "prague" && f.ecn != EcnMode::L4s {
                let what = match f.ecn {
                    EcnMode::Off => "runs as Linux's prague-reno fallback (Reno, unpaced)",
                    _ => "gets classic ECN feedback (ECE until CWR), not the per-packet CE counts Prague is built for",
                };
                out.push(format!("flows[{i}]: cc = \"prague\" without ecn = \"l4s\" {what}; set ecn = \"l4s\" for TCP Prague"));
            }
        }
        out.extend(self.undeliverable());
        out
    }

    /// Endpoints whose path cannot deliver anything before the run ends (issue 14: an RTT of
    /// 1,000,000 s, an upstream link of 1 bit/s ran to zero goodput without a word): their
    /// first packet's one-way propagation (a TCP flow's after its handshake, 1.5 RTT) or a
    /// full-size packet's serialisation at the slowest link on the way is not shorter than
    /// the time from their start to the end. One warning each.
    fn undeliverable(&self) -> Vec<String> {
        let links_delay = self.bottleneck.delay + self.bottleneck.upstream.iter().fold(Time::ZERO, |a, u| a + u.delay);
        let up_rate = self.bottleneck.upstream.iter().map(|u| u.rate).fold(self.bottleneck.rate, Rate::min);
        let down_rate = self.return_path.as_ref().and_then(|r| r.rate).unwrap_or(self.bottleneck.rate);
        let mut out = Vec::new();
        let mut check = |what: String, start: Time, first_arrival: Time, way: Way, size: u32| {
            let left = self.duration.saturating_sub(start);
            let rate = if way == Way::Up { up_rate } else { down_rate };
            let wire = rate.serialisation(size);
            if first_arrival >= left {
                out.push(format!("{what}: nothing it sends can arrive before the end: its first packet needs {first_arrival} of path delay, the run has {left} left after its start"));
            } else if wire >= left {
                out.push(format!("{what}: nothing it sends can arrive before the end: one {size}-byte packet takes {wire} at {rate}, the run has {left} left after its start"));
            }
        };
        for (i, f) in self.flows.iter().enumerate() {
            check(format!("flows[{i}]"), f.start, Time(f.rtt.0 / 2 * 3) + links_delay, f.direction, f.mss + 66);
        }
        for (i, u) in self.udp.iter().enumerate() {
            check(format!("udp[{i}]"), u.start, Time(u.rtt.0 / 2) + links_delay, u.direction, u.packet_size + 42);
        }
        for (i, m) in self.media.iter().enumerate() {
            check(format!("media[{i}]"), m.start, Time(m.rtt.0 / 2) + links_delay, Way::Up, m.packet_size + 42);
        }
        for (i, p) in self.probes.iter().enumerate() {
            check(format!("probes[{i}]"), p.start, Time(p.rtt.0 / 2) + links_delay, Way::Up, p.size());
        }
        out
    }

    /// The estimate `[limits] max_packets` is checked against: TCP at the highest bottleneck
    /// (and, with downloads, return-link) rate in 1500-byte packets plus one ACK per two
    /// segments, and every UDP and media source at its own rate and packet size.
    pub fn packet_estimate(&self) -> f64 {
        let secs = self.duration.as_secs_f64();
        let peak = |base: Rate, changes: &[LinkChange]| changes.iter().filter_map(|c| c.rate).fold(base.0, |m, r| m.max(r.0)) as f64;
        let mut bits_per_s = peak(self.bottleneck.rate, &self.bottleneck.changes);
        let downloads = self.flows.iter().any(|f| f.direction == Way::Down) || self.workloads.iter().any(|w| w.direction == Way::Down);
        if downloads {
            bits_per_s += self.return_path.as_ref().and_then(|r| r.rate).map_or(bits_per_s, |r| r.0 as f64);
        }
        let tcp = bits_per_s / (8.0 * 1500.0) * 1.5;
        let udp: f64 = self.udp.iter().map(|u| u.rate.0 as f64 / (8.0 * u.packet_size as f64)).sum();
        let media: f64 = self.media.iter().map(|m| m.max_bitrate.0 as f64 / (8.0 * m.packet_size as f64)).sum();
        (tcp + udp + media) * secs
    }

    /// The estimate `[limits] max_events` is checked against before the run: two events per
    /// packet of [`Scenario::packet_estimate`] (measured: 0.8 to 1.3), one per sampling step
    /// and two per probe request.
    pub fn event_estimate(&self) -> f64 {
        let secs = self.duration.as_secs_f64();
        let probes: f64 = self.probes.iter().map(|p| 2.0 * secs / p.interval(self.metrics.step).as_secs_f64()).sum();
        2.0 * self.packet_estimate() + secs / self.metrics.step.as_secs_f64() + probes
    }

    /// The estimate `[limits] max_memory` is checked against: bytes, as (what, bytes) parts
    /// in a fixed order (flow state, series, queues, packets in flight, open transfers,
    /// media queues). Each part is an upper bound of what that part can hold in the run (full
    /// queues, every packet a source can have on its way), from sizes measured on this
    /// engine (docs/limits.md).
    pub fn memory_estimate(&self) -> Vec<(&'static str, f64)> {
        let secs = self.duration.as_secs_f64();
        let tcp_flows = self.flows.iter().map(|f| f.count as f64).sum::<f64>() + self.transients.iter().map(|t| t.flows as f64).sum::<f64>();
        let links = 2.0 + self.bottleneck.upstream.len() as f64;
        let columns = 5.0 * tcp_flows + 3.0 * self.probes.len() as f64 + 4.0 * self.media.len() as f64 + 2.0 * self.udp.len() as f64 + 4.0 * self.workloads.len() as f64 + 10.0 * links;
        let points = secs / self.metrics.step.as_secs_f64() + 2.0;
        // Queues: every discipline full, the largest of a link's changes counted.
        let ret_qdisc = self.return_path.as_ref().map_or_else(default_return_qdisc, |r| r.qdisc.clone());
        let fwd = (self.bottleneck.changes.iter().filter(|c| c.direction.forward()).filter_map(|c| c.qdisc.as_ref())).fold(queue_packets(&self.bottleneck.qdisc), |m, q| m.max(queue_packets(q)));
        let ret = (self.bottleneck.changes.iter().filter(|c| c.direction.ret()).filter_map(|c| c.qdisc.as_ref())).fold(queue_packets(&ret_qdisc), |m, q| m.max(queue_packets(q)));
        let queued = fwd + ret + self.bottleneck.upstream.iter().map(|u| queue_packets(&u.qdisc)).sum::<f64>();
        // In flight on the propagation delays: TCP at most the links' rates for an RTT (data
        // and ACKs), each UDP or media source its own rate for half its RTT, and a video
        // frame's burst at once; none longer than the run.
        let peak = |base: Rate, changes: &[LinkChange]| changes.iter().filter_map(|c| c.rate).fold(base.0, |m, r| m.max(r.0)) as f64;
        let fwd_rate = peak(self.bottleneck.rate, &self.bottleneck.changes);
        let ret_rate = self.return_path.as_ref().and_then(|r| r.rate).map_or(fwd_rate, |r| r.0 as f64);
        let tcp_rtt = (self.flows.iter().map(|f| f.rtt).chain(self.workloads.iter().map(|w| w.rtt)).chain(self.transients.iter().map(|t| t.rtt)))
            .max()
            .map_or(0.0, |r| r.as_secs_f64().min(secs));
        let tcp_inflight = if tcp_flows > 0.0 || !self.workloads.is_empty() { (fwd_rate + ret_rate) / (8.0 * 1500.0) * tcp_rtt * 2.0 } else { 0.0 };
        let udp_inflight: f64 = (self.udp.iter())
            .map(|u| {
                let pps = u.rate.0 as f64 / (8.0 * u.packet_size as f64);
                let frame = match u.kind {
                    UdpKind::Video => u.rate.0 as f64 / 8.0 / u.frame_rate.unwrap_or(DEFAULT_UDP_FRAME_RATE) / u.packet_size as f64,
                    UdpKind::Cbr => 0.0,
                };
                pps * (u.rtt.as_secs_f64() / 2.0).min(secs) + frame
            })
            .sum();
        let media_pps = |m: &MediaSpec| m.max_bitrate.0 as f64 / (8.0 * m.packet_size as f64);
        let media_inflight: f64 = self.media.iter().map(|m| media_pps(m) * (m.rtt.as_secs_f64() / 2.0).min(secs)).sum();
        // SCReAM's RTP queue: discarded beyond 0.2 s of delay (max_rtp_queue_delay), plus a frame.
        let media_queues: f64 = self.media.iter().map(|m| media_pps(m) * (0.2 + 1.0 / m.frame_rate) * MEDIA_QUEUE_ENTRY_BYTES).sum();
        let transfers: f64 = self.workloads.iter().map(|w| self.open_transfers(w)).sum();
        vec![
            ("flow state", tcp_flows * TCP_FLOW_BYTES),
            ("series", columns * (points.min(SERIES_POINTS_HELD) * SERIES_POINT_BYTES + SERIES_COLUMN_BYTES)),
            ("queues", queued * PACKET_BYTES),
            ("packets in flight", (tcp_inflight + udp_inflight + media_inflight) * PACKET_BYTES),
            ("open transfers", transfers * TRANSFER_BYTES),
            ("media queues", media_queues),
        ]
    }

    /// Transfers of workload `w` open at once at most, estimated: all its arrivals when the
    /// offered load reaches the link (they pile up), else the processor-sharing number in
    /// service ρ/(1−ρ) plus the arrivals of three RTTs (handshake and slow start); never more
    /// than the arrivals.
    fn open_transfers(&self, w: &WorkloadSpec) -> f64 {
        let window = (w.stop.unwrap_or(self.duration).min(self.duration) - w.start).as_secs_f64();
        let per_s = 1.0 / w.mean_interarrival.as_secs_f64();
        let arrivals = window * per_s;
        // Lognormal through P5 and P95: μ midway, σ = half the spread / z(0.95).
        let (l5, l95) = ((w.size_p5 as f64).ln(), (w.size_p95 as f64).ln());
        let sigma = (l95 - l5) / (2.0 * 1.644_853_6);
        let mean_bytes = ((l5 + l95) / 2.0 + sigma * sigma / 2.0).exp();
        let link = match w.direction {
            Way::Up => self.bottleneck.rate.0 as f64,
            Way::Down => self.return_path.as_ref().and_then(|r| r.rate).unwrap_or(self.bottleneck.rate).0 as f64,
        };
        let rho = per_s * mean_bytes * 8.0 / link;
        let in_service = if rho < 0.99 { rho / (1.0 - rho) } else { f64::INFINITY };
        let piled = arrivals * (1.0 - 1.0 / rho).max(0.0);
        (piled + in_service + per_s * 3.0 * w.rtt.as_secs_f64()).min(arrivals)
    }

    /// `[limits]`: the packet, event and memory estimates against their ceilings.
    fn check_limits(&self) -> Result<(), (String, String)> {
        let l = &self.limits;
        let packets = self.packet_estimate();
        if packets > l.max_packets as f64 {
            return Err((
                "limits.max_packets".into(),
                format!("this run would send about {packets:.2e} packets, above the limit of {:.2e} (hours of engine time); shorten it, lower the rates, or raise [limits] max_packets", l.max_packets as f64),
            ));
        }
        let events = self.event_estimate();
        if events > l.max_events as f64 {
            return Err((
                "limits.max_events".into(),
                format!("this run would execute about {events:.2e} events, above the limit of {:.2e}; shorten it, lower the rates, or raise [limits] max_events (--max-events)", l.max_events as f64),
            ));
        }
        let parts = self.memory_estimate();
        let total: f64 = parts.iter().map(|p| p.1).sum();
        if total > l.max_memory as f64 {
            let (what, most) = parts.iter().fold(("", 0.0), |m, &(w, b)| if b > m.1 { (w, b) } else { m });
            return Err((
                "limits.max_memory".into(),
                format!(
                    "this run would need about {} of memory ({} of it {what}), above the limit of {}; make it smaller or shorter, or raise [limits] max_memory (--max-memory)",
                    gib(total),
                    gib(most),
                    gib(l.max_memory as f64)
                ),
            ));
        }
        Ok(())
    }

    /// Range checks that serde cannot express.
    fn validate<'a>(&'a self) -> Result<(), (String, String)> {
        let err = |k: &str, m: String| Err((k.to_string(), m));
        if self.duration == Time::ZERO {
            return err("duration", "must be greater than zero".into());
        }
        if self.duration > Time::from_secs(100_000) {
            return err("duration", "must be at most 100000s".into());
        }
        if self.flows.is_empty() && self.probes.is_empty() && self.media.is_empty() && self.udp.is_empty() && self.workloads.is_empty() && self.transients.is_empty() {
            return err("flows", "at least one [[flows]], [[probes]], [[media]], [[udp]], [[workloads]] or [[transients]] entry is needed".into());
        }
        for (i, u) in self.udp.iter().enumerate() {
            let k = |name: &str| format!("udp[{i}].{name}");
            self.check_endpoint(&k, u.rtt, u.dscp, u.start, u.stop)?;
            if !(1..=MAX_UDP_PAYLOAD).contains(&u.packet_size) {
                return err(&k("packet_size"), format!("{} is out of range 1..{MAX_UDP_PAYLOAD} bytes", u.packet_size));
            }
            // Packets at most one per nanosecond, the clock's resolution.
            if u.rate.0 < 1_000 || u.rate.0 > u.packet_size as u64 * 8_000_000_000 {
                return err(&k("rate"), format!("{} is out of range 1kbit..{}Gbit for this packet_size", u.rate, u.packet_size * 8));
            }
            if u.kind == UdpKind::Cbr {
                for (set, name) in [(u.frame_rate.is_some(), "frame_rate"), (u.paced.is_some(), "paced"), (u.frame_size_variation.is_some(), "frame_size_variation")] {
                    if set {
                        return err(&k(name), "applies only to kind = \"video\"".into());
                    }
                }
            }
            if let Some(f) = u.frame_rate {
                if !(f > 0.0 && f <= 1000.0) {
                    return err(&k("frame_rate"), format!("{} is out of range (0, 1000]", short_f64(f)));
                }
                check_frame(&k("frame_rate"), u.rate, f)?;
            }
            if let Some(v) = u.frame_size_variation {
                if !(0.0..=200.0).contains(&v) {
                    return err(&k("frame_size_variation"), format!("{} is out of range 0..200 %", short_f64(v)));
                }
            }
        }
        for (i, t) in self.metrics.spike_thresholds.iter().enumerate() {
            if *t == Time::ZERO {
                return err(&format!("metrics.spike_thresholds[{i}]"), "must be greater than zero".into());
            }
        }
        if self.metrics.spike_thresholds.len() > 16 {
            return err("metrics.spike_thresholds", "at most 16 thresholds".into());
        }
        if self.metrics.spike_after >= self.duration {
            return err("metrics.spike_after", format!("{} is not before the end of the run ({})", self.metrics.spike_after, self.duration));
        }
        self.validate_short_flows()?;
        for (i, m) in self.media.iter().enumerate() {
            let k = |name: &str| format!("media[{i}].{name}");
            self.check_endpoint(&k, m.rtt, m.dscp, m.start, m.stop)?;
            if m.min_bitrate.0 == 0 || m.min_bitrate > m.start_bitrate || m.start_bitrate > m.max_bitrate {
                return err(&k("start_bitrate"), "need 0 < min_bitrate <= start_bitrate <= max_bitrate".into());
            }
            if !(m.frame_rate > 0.0 && m.frame_rate <= 1000.0) {
                return err(&k("frame_rate"), format!("{} is out of range (0, 1000]", short_f64(m.frame_rate)));
            }
            check_frame(&k("frame_rate"), m.max_bitrate, m.frame_rate)?;
            if !(0.0..=200.0).contains(&m.frame_size_variation) {
                return err(&k("frame_size_variation"), format!("{} is out of range 0..200 %", short_f64(m.frame_size_variation)));
            }
            if m.microburst_interval < Time::from_micros(1) || m.microburst_interval > Time::from_millis(100) {
                return err(&k("microburst_interval"), "must be within 1us..100ms".into());
            }
            if !(20..=1460).contains(&m.packet_size) {
                return err(&k("packet_size"), format!("{} is out of range 20..1460 bytes", m.packet_size));
            }
            if m.queue_delay_target < Time::from_millis(1) {
                return err(&k("queue_delay_target"), "must be at least 1ms".into());
            }
            if !(1.0..=10.0).contains(&m.pacing_headroom) {
                return err(&k("pacing_headroom"), format!("{} is out of range 1..10", short_f64(m.pacing_headroom)));
            }
            if m.send_time > Time::from_millis(1) {
                return err(&k("send_time"), "must be at most 1ms".into());
            }
        }
        for (i, p) in self.probes.iter().enumerate() {
            let k = |name: &str| format!("probes[{i}].{name}");
            self.check_endpoint(&k, p.rtt, p.dscp, p.start, p.stop)?;
            if p.interval.is_some_and(|i| i < Time::from_micros(1)) {
                return err(&k("interval"), "must be at least 1us".into());
            }
            if p.size.is_some_and(|s| !(42..=65_535).contains(&s)) {
                return err(&k("size"), format!("{} is out of range 42..65535 bytes", p.size()));
            }
        }
        // tc reads `burst 0` as no burst given (its default, 1600 with high-resolution timers):
        // a zero bucket cannot be configured (iproute2 tc/q_htb.c `if (!buffer)`).
        if let Some(b) = self.bottleneck.htb_burst.filter(|&b| b == 0 || b > 100_000_000) {
            return err("bottleneck.htb_burst", format!("{b} is out of range 1..100000000 bytes (tc takes 0 as its default burst, 1600)"));
        }
        for (i, c) in self.bottleneck.changes.iter().enumerate() {
            let k = |name: &str| format!("bottleneck.changes[{i}].{name}");
            if c.at >= self.duration {
                return err(&k("at"), format!("{} is not before the end of the run ({})", c.at, self.duration));
            }
            if c.rate.is_none() && c.qdisc.is_none() {
                return err(&format!("bottleneck.changes[{i}]"), "needs a rate, a qdisc or both".into());
            }
        }
        if self.metrics.step < Time::from_millis(1) {
            return err("metrics.step", "must be at least 1ms".into());
        }
        let total: u64 = self.flows.iter().map(|f| f.count as u64).sum();
        if total > 100_000 {
            return err("flows", format!("{total} flows in total; at most 100000"));
        }
        for (i, f) in self.flows.iter().enumerate() {
            let k = |name: &str| format!("flows[{i}].{name}");
            check_tcp(&k, f.rtt, f.mss, f.initial_cwnd, f.initial_rto)?;
            if f.count == 0 {
                return err(&k("count"), "must be at least 1".into());
            }
            if f.start >= self.duration {
                return err(&k("start"), format!("{} is not before the end of the run ({})", f.start, self.duration));
            }
            if let Some(stop) = f.stop {
                if stop <= f.start {
                    return err(&k("stop"), format!("{stop} is not after start ({})", f.start));
                }
            }
            if f.size == Some(0) {
                return err(&k("size"), "must be at least 1 byte".into());
            }
            // Client hosts are numbered host + 1 (the server side is 0): 65535 would wrap.
            if f.host == u16::MAX {
                return err(&k("host"), format!("{} is out of range 0..{}", f.host, u16::MAX - 1));
            }
            if let Some(r) = f.rwnd {
                if r < f.mss as u64 {
                    return err(&k("rwnd"), format!("{r} bytes is smaller than one segment ({} bytes)", f.mss));
                }
            }
        }
        let named = |list: &'static str, names: Vec<Option<&'a str>>| {
            names.into_iter().enumerate().filter_map(move |(i, t)| Some((format!("{list}[{i}].tunnel"), t?)))
        };
        let refs = named("flows", self.flows.iter().map(|f| f.tunnel.as_deref()).collect())
            .chain(named("probes", self.probes.iter().map(|p| p.tunnel.as_deref()).collect()))
            .chain(named("media", self.media.iter().map(|m| m.tunnel.as_deref()).collect()))
            .chain(named("udp", self.udp.iter().map(|u| u.tunnel.as_deref()).collect()));
        tunnel::validate(&self.tunnels, refs)?;
        if self.stack == Stack::Ns2_2013 {
            // ns-2's Agent/TCP/Sack1 has its own (Reno) window arithmetic; no other
            // congestion control ran in that simulator's study.
            let ccs = (self.flows.iter().enumerate().map(|(i, f)| (format!("flows[{i}].cc"), f.cc.config().name())))
                .chain(self.workloads.iter().enumerate().map(|(i, w)| (format!("workloads[{i}].cc"), w.cc.config().name())))
                .chain(self.transients.iter().enumerate().map(|(i, t)| (format!("transients[{i}].cc"), t.cc.config().name())));
            for (key, name) in ccs {
                if name != "reno" {
                    return err(&key, format!("'{name}' does not exist on the ns2-2013 profile: its TCP is ns-2's Agent/TCP/Sack1, whose window arithmetic is Reno's (cc = \"reno\")"));
                }
            }
            // The model leaves out ns-2's ECN (`ecn_`, off in the study).
            let ecns = (self.flows.iter().enumerate().map(|(i, f)| (format!("flows[{i}].ecn"), f.ecn)))
                .chain(self.workloads.iter().enumerate().map(|(i, w)| (format!("workloads[{i}].ecn"), w.ecn)))
                .chain(self.transients.iter().enumerate().map(|(i, t)| (format!("transients[{i}].ecn"), t.ecn)));
            for (key, ecn) in ecns {
                if ecn != EcnMode::Off {
                    return err(&key, "the ns2-2013 profile's TCP (ns-2's Agent/TCP/Sack1) is modelled without ECN".into());
                }
            }
        }
        self.check_names()?;
        self.check_limits()?;
        Ok(())
    }
}

/// Bytes per packet the engine holds in a queue or on a propagation delay (`Packet`, 64
/// bytes in a ring slot, plus, for the packets that carry one, a 36-byte slot of
/// `packet_ext`'s slab).
const PACKET_BYTES: f64 = 128.0;
/// State of one TCP flow (sender, receiver, their queues, timers, summary), measured: 20,000
/// CUBIC flows for 1 s take 375 MB.
const TCP_FLOW_BYTES: f64 = 20_000.0;
/// One open transfer of a workload, measured: 150,000 piled-up transfers take 820 MB (issue
/// 14: "about 6 KB per open transfer").
const TRANSFER_BYTES: f64 = 6_000.0;
/// Points of one series the front end holds at most, whatever the run's duration. The series no
/// longer stay in memory: the engine hands them to the Python front end in chunks of 2 MB
/// (`api.CHUNK_VALUES`, an unlinked spill file), the Parquet, CSV and flent writers read them a
/// slice at a time, and the view the plot and report.html draw from
/// (`python/aqmlab/seriesview.py`) keeps a series whole up to 4 x 2000 points and beyond that
/// at most 4 points per bucket of 2000 buckets (fewer with many series). Before they streamed,
/// every point of the run was held (72 B each: 8 in the engine, 64 in the Python conversion;
/// issue 14: 334 MB in the engine, 2.86 GB in the CLI), and this part grew with the duration.
/// A Rust caller of `run_toml` or `Simulation::run`, which keeps the series in memory (8 B a
/// point), is not covered by this bound; the resident-memory check while running still is.
const SERIES_POINTS_HELD: f64 = 8000.0;
/// One held point: its time and value as f64 in the view (a series held whole shares the time
/// grid, so this is an upper bound).
const SERIES_POINT_BYTES: f64 = 16.0;
/// One series beyond its points: its key and arrays in the view and the writers' objects for it;
/// measured 560 B in the view of a 1000-flow run (10.9 MB for 5008 series of 201 points),
/// rounded up for the writers.
const SERIES_COLUMN_BYTES: f64 = 1024.0;
/// One packet in SCReAM's RTP queue (size, time, sequence, marker, with the deque's slack).
const MEDIA_QUEUE_ENTRY_BYTES: f64 = 64.0;
/// The smallest packet on a wire (1 byte of UDP payload and 42 of headers): a byte-limited
/// queue holds at most its limit / this many packets.
const MIN_WIRE_BYTES: f64 = 43.0;
/// Packets a discipline without a `limit` parameter holds at most: CAKE's and the SCE
/// qdiscs' `sch->limit` (qdisc/cake.rs, qdisc/sce.rs).
const UNNAMED_LIMIT: f64 = 10240.0;

/// Packets a discipline can hold when full: its `limit` (packets, or bytes over the smallest
/// packet), else [`UNNAMED_LIMIT`].
fn queue_packets(q: &QdiscSpec) -> f64 {
    use crate::params::Value;
    use crate::units::Limit;
    let a = q.args();
    let limit = if a.has("limit") { a.get("limit") } else { Value::Unset };
    match limit {
        Value::Uint(n) => n as f64,
        Value::Limit(Limit::Packets(n)) => n as f64,
        Value::Bytes(b) | Value::Limit(Limit::Bytes(b)) => b as f64 / MIN_WIRE_BYTES,
        _ => UNNAMED_LIMIT,
    }
}

/// Bytes as GiB (or MiB below one GiB) for a message.
fn gib(b: f64) -> String {
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.0} MiB", b / (1u64 << 20) as f64)
    }
}

/// The name of flow `k` of a `[[flows]]` entry: its `name` (with `-k` when `count` > 1), else
/// `<cc>-<index>` with `index` the flow's position among all TCP flows. One rule for the
/// engine (build.rs) and for validation, which refuses two series under one name.
pub fn flow_label(name: Option<&str>, count: u32, k: u32, cc: &str, index: usize) -> String {
    match (name, count) {
        (Some(n), 1) => n.to_string(),
        (Some(n), _) => format!("{n}-{k}"),
        (None, _) => format!("{cc}-{index}"),
    }
}

/// Largest video frame a source may build (rate / frame_rate): beyond this a frame is no
/// frame but a backlog that grows without bound.
const MAX_FRAME_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

fn check_frame(key: &str, rate: Rate, frame_rate: f64) -> Result<(), (String, String)> {
    let bytes = rate.0 as f64 / 8.0 / frame_rate;
    if bytes > MAX_FRAME_BYTES {
        return Err((key.to_string(), format!("{} frames/s at {rate} makes frames of {bytes:.3e} bytes; at most 64 MiB", short_f64(frame_rate))));
    }
    Ok(())
}

/// Entity names the engine's own series use (the shared links); no endpoint may take them.
const RESERVED_NAMES: [&str; 2] = ["bottleneck", "return_link"];

impl Scenario {
    /// Every endpoint's series name with the key that names it, in the engine's order; the
    /// names must be unique (two flows under one name would merge their series) and not be
    /// a link's (`bottleneck`, `return_link`, `upstream-<i>`).
    fn check_names(&self) -> Result<(), (String, String)> {
        let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        let mut index = 0usize;
        let mut check = |key: String, name: String| -> Result<(), (String, String)> {
            let reserved = RESERVED_NAMES.contains(&name.as_str())
                || name.strip_prefix("upstream-").is_some_and(|i| i.parse::<usize>().is_ok_and(|i| i < self.bottleneck.upstream.len()));
            if name.is_empty() {
                return Err((key, "must not be empty".into()));
            }
            if reserved {
                return Err((key, format!("'{}' is the name of a link's series; choose another", excerpt(&name))));
            }
            if let Some(first) = seen.get(&name) {
                return Err((key, format!("'{}' is already the name of {first}; names must be unique", excerpt(&name))));
            }
            seen.insert(name, key);
            Ok(())
        };
        for (i, f) in self.flows.iter().enumerate() {
            for k in 0..f.count {
                check(format!("flows[{i}].name"), flow_label(f.name.as_deref(), f.count, k, f.cc.config().name(), index))?;
                index += 1;
            }
        }
        for (i, t) in self.transients.iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(|| format!("transient-{i}"));
            for k in 0..t.flows {
                check(format!("transients[{i}].name"), format!("{name}-{k}"))?;
            }
        }
        for (i, p) in self.probes.iter().enumerate() {
            check(format!("probes[{i}].name"), p.name.clone().unwrap_or_else(|| format!("probe-{i}")))?;
        }
        for (i, m) in self.media.iter().enumerate() {
            check(format!("media[{i}].name"), m.name.clone().unwrap_or_else(|| format!("scream-{i}")))?;
        }
        for (i, u) in self.udp.iter().enumerate() {
            check(format!("udp[{i}].name"), u.name.clone().unwrap_or_else(|| format!("{}-{i}", u.kind.name())))?;
        }
        Ok(())
    }

    /// The keys every non-TCP endpoint (`[[probes]]`, `[[media]]`, `[[udp]]`) shares.
    fn check_endpoint(&self, k: &dyn Fn(&str) -> String, rtt: Time, dscp: u8, start: Time, stop: Option<Time>) -> Result<(), (String, String)> {
        if rtt < Time::from_micros(2) {
            return Err((k("rtt"), "must be at least 2us".into()));
        }
        if dscp > 63 {
            return Err((k("dscp"), format!("{dscp} is out of range 0..63")));
        }
        if start >= self.duration {
            return Err((k("start"), format!("{start} is not before the end of the run ({})", self.duration)));
        }
        if stop.is_some_and(|s| s <= start) {
            return Err((k("stop"), "must be after start".into()));
        }
        Ok(())
    }
}

/// The TCP keys `[[flows]]`, `[[workloads]]` and `[[transients]]` share.
fn check_tcp(k: &dyn Fn(&str) -> String, rtt: Time, mss: u32, initial_cwnd: u32, initial_rto: Time) -> Result<(), (String, String)> {
    if rtt < Time::from_micros(2) {
        return Err((k("rtt"), "must be at least 2us".into()));
    }
    if !(64..=65_483).contains(&mss) {
        return Err((k("mss"), format!("{mss} is out of range 64..65483 bytes")));
    }
    if initial_cwnd == 0 || initial_cwnd > 10_000 {
        return Err((k("initial_cwnd"), format!("{initial_cwnd} is out of range 1..10000 packets")));
    }
    if initial_rto < Time::from_millis(200) || initial_rto > Time::from_secs(60) {
        return Err((k("initial_rto"), format!("{initial_rto} is out of range 200ms..60s")));
    }
    Ok(())
}

/// Most transfers one workload may start (its arrival list is kept for the FCT report).
pub const MAX_WORKLOAD_ARRIVALS: f64 = 1e6;

impl Scenario {
    /// Range checks of `[[workloads]]` and `[[transients]]`.
    fn validate_short_flows(&self) -> Result<(), (String, String)> {
        let err = |k: String, m: String| Err((k, m));
        let mut names = std::collections::HashSet::new();
        for (i, w) in self.workloads.iter().enumerate() {
            let k = |name: &str| format!("workloads[{i}].{name}");
            check_tcp(&k, w.rtt, w.mss, w.initial_cwnd, w.initial_rto)?;
            if w.mean_interarrival < Time::from_micros(1) {
                return err(k("mean_interarrival"), "must be at least 1us".into());
            }
            if w.size_p5 == 0 {
                return err(k("size_p5"), "must be at least 1 byte".into());
            }
            if w.size_p95 < w.size_p5 {
                return err(k("size_p95"), format!("{} bytes is below size_p5 ({} bytes)", w.size_p95, w.size_p5));
            }
            if w.size_p95 > 1 << 40 {
                return err(k("size_p95"), "must be at most 1TiB".into());
            }
            if w.start >= self.duration {
                return err(k("start"), format!("{} is not before the end of the run ({})", w.start, self.duration));
            }
            if w.stop.is_some_and(|s| s <= w.start) {
                return err(k("stop"), "must be after start".into());
            }
            let window = w.stop.unwrap_or(self.duration).min(self.duration) - w.start;
            let expected = window.as_secs_f64() / w.mean_interarrival.as_secs_f64();
            if expected > MAX_WORKLOAD_ARRIVALS {
                return err(k("mean_interarrival"), format!("{expected:.0} arrivals expected; at most {MAX_WORKLOAD_ARRIVALS:.0}"));
            }
            if !names.insert(w.name.clone().unwrap_or_else(|| format!("workload-{i}"))) {
                return err(k("name"), "names must be unique among [[workloads]]".into());
            }
        }
        names.clear();
        for (i, t) in self.transients.iter().enumerate() {
            let k = |name: &str| format!("transients[{i}].{name}");
            check_tcp(&k, t.rtt, t.mss, t.initial_cwnd, t.initial_rto)?;
            if t.flows == 0 || t.flows > 10_000 {
                return err(k("flows"), format!("{} is out of range 1..10000", t.flows));
            }
            if t.total < t.flows as u64 {
                return err(k("total"), format!("{} bytes cannot give each of {} flows a byte", t.total, t.flows));
            }
            if t.start + t.start_jitter >= self.duration {
                return err(k("start_jitter"), format!("start + start_jitter ({}) is not before the end of the run ({})", t.start + t.start_jitter, self.duration));
            }
            if !names.insert(t.name.clone().unwrap_or_else(|| format!("transient-{i}"))) {
                return err(k("name"), "names must be unique among [[transients]]".into());
            }
        }
        Ok(())
    }
}

/// SCReAM is a media application, not a TCP congestion control, but researchers name it with
/// the controllers: a `[[flows]]` entry with `cc = "scream"` becomes a `[[media]]` entry of
/// kind `scream` (its `ecn` mode mapped to the codepoint SCReAM sends: `l4s` → ECT(1),
/// `rfc3168`/`sce` → ECT(0), `off` → Not-ECT; `count` copies it), keeping its other keys.
/// At most this many media flows from one `[[flows]] cc = "scream"` entry.
const MAX_MEDIA_FLOWS: i64 = 1000;

fn move_media_flows(doc: &mut toml::Table) -> Result<(), ScenarioError> {
    let Some(toml::Value::Array(flows)) = doc.get_mut("flows") else { return Ok(()) };
    let is_media = |f: &toml::Value| f.get("cc").and_then(toml::Value::as_str) == Some("scream");
    let moved: Vec<(usize, toml::Value)> = flows.iter().enumerate().filter(|(_, f)| is_media(f)).map(|(i, f)| (i, f.clone())).collect();
    if moved.is_empty() {
        return Ok(());
    }
    flows.retain(|f| !is_media(f));
    let mut media = Vec::new();
    for (i, f) in moved {
        let toml::Value::Table(mut t) = f else { continue };
        t.remove("cc");
        t.insert("kind".into(), toml::Value::String("scream".into()));
        if let Some(toml::Value::String(e)) = t.get("ecn") {
            let cp = match e.as_str() {
                "l4s" => "ect1",
                "rfc3168" | "sce" => "ect0",
                "off" => "not-ect",
                other => other,
            };
            t.insert("ecn".into(), toml::Value::String(cp.into()));
        }
        let count = match t.remove("count") {
            None => 1,
            Some(toml::Value::Integer(n)) if (1..=MAX_MEDIA_FLOWS).contains(&n) => n,
            Some(v) => {
                let message = format!("{v} is not a whole number in 1..{MAX_MEDIA_FLOWS} (each scream flow is a media source)");
                return Err(ScenarioError { key: format!("flows[{i}].count"), line: None, message });
            }
        };
        let name = t.get("name").and_then(toml::Value::as_str).map(str::to_string);
        for k in 0..count {
            let mut copy = t.clone();
            if let (Some(n), true) = (&name, count > 1) {
                copy.insert("name".into(), toml::Value::String(format!("{n}-{k}")));
            }
            media.push(toml::Value::Table(copy));
        }
    }
    match doc.entry("media").or_insert_with(|| toml::Value::Array(Vec::new())) {
        toml::Value::Array(a) => a.extend(media),
        _ => {}
    }
    Ok(())
}

/// Applies `a.b[2].c=value` to the document. The value is parsed as TOML (so `60`,
/// `true`, `"x"` work) and taken as a plain string otherwise (`20ms`, `50Mbit`).
fn apply_override(doc: &mut toml::Table, assignment: &str) -> Result<(), ScenarioError> {
    // The key path names the error (an excerpt: the whole assignment may be a 1 MB value).
    // Control characters in it are escaped, so that the error stays one line.
    let key_of = |a: &str| excerpt(&a.split_once('=').map_or(a, |(k, _)| k).trim().escape_debug().to_string()).into_owned();
    let fail = |m: String| ScenarioError { key: key_of(assignment), line: None, message: shorten_quoted(&one_line(&m)) };
    let (path, raw) = assignment
        .split_once('=')
        .ok_or_else(|| fail("an override must look like key=value".into()))?;
    if path.trim().is_empty() {
        return Err(fail("an override must look like key=value; the key is empty".into()));
    }
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let mut steps = Vec::new();
    for part in path.trim().split('.') {
        let (name, mut rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        let name_ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(fail(format!("bad key '{}': cannot parse '{part}'", path.trim())));
        }
        steps.push(Step::Key(name));
        while !rest.is_empty() {
            let (idx, after) = rest.split_once(']').ok_or_else(|| fail(format!("bad index in '{part}'")))?;
            steps.push(match idx {
                "*" => Step::Every,
                i => Step::Index(i.parse().map_err(|_| fail(format!("bad index in '{part}'")))?),
            });
            rest = match after {
                "" => "",
                a => a.strip_prefix('[').ok_or_else(|| fail(format!("bad index in '{part}'")))?,
            };
        }
    }
    let mut node = toml::Value::Table(std::mem::take(doc));
    let r = assign(&mut node, &steps, &value).map_err(fail);
    if let toml::Value::Table(t) = node {
        *doc = t;
    }
    r
}

/// One step of an override's key path: `name`, `[i]` or `[*]` (every element).
enum Step<'a> {
    Key(&'a str),
    Index(usize),
    Every,
}

/// Assigns `value` at `steps` below `node`. Missing tables are created; list indices must
/// exist. A table assigned onto a table is merged into it (`flows[0]={cc="reno"}` keeps the
/// flow's other keys), as the suites' `set` tables do.
fn assign(node: &mut toml::Value, steps: &[Step], value: &toml::Value) -> Result<(), String> {
    let Some((step, rest)) = steps.split_first() else {
        match (node, value) {
            (toml::Value::Table(t), toml::Value::Table(v)) => t.extend(v.iter().map(|(k, x)| (k.clone(), x.clone()))),
            (n, v) => *n = v.clone(),
        }
        return Ok(());
    };
    match (step, node) {
        (Step::Key(k), toml::Value::Table(t)) => {
            let child = t.entry(k.to_string()).or_insert_with(|| match rest.first() {
                Some(Step::Index(_) | Step::Every) => toml::Value::Array(Vec::new()),
                _ => toml::Value::Table(Default::default()),
            });
            assign(child, rest, value)
        }
        (Step::Key(k), _) => Err(format!("'{k}' is inside a value that is not a table")),
        (Step::Index(i), toml::Value::Array(a)) => {
            let n = a.len();
            let el = a.get_mut(*i).ok_or_else(|| format!("no element {i} (the list has {n})"))?;
            assign(el, rest, value)
        }
        (Step::Every, toml::Value::Array(a)) => a.iter_mut().try_for_each(|el| assign(el, rest, value)),
        (_, _) => Err("an index applied to a value that is not a list".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"duration = "60s"
seed = 1
[bottleneck]
rate = "50Mbit"
qdisc = "pfifo limit 1000"
[[flows]]
cc = "cubic"
rtt = "20ms"
count = 2        # optional: this many identical flows
"#;

    #[test]
    fn minimal_file_parses() {
        let s = Scenario::from_toml(MINIMAL, &[]).unwrap();
        assert_eq!(s.duration, Time::from_secs(60));
        assert_eq!(s.bottleneck.rate, Rate(50_000_000));
        assert_eq!(s.bottleneck.qdisc, QdiscSpec::parse("pfifo limit 1000").unwrap());
        assert_eq!(s.flows[0].count, 2);
        assert_eq!(s.flows[0].rtt, Time::from_millis(20));
        assert_eq!(s.flows[0].mss, 1448);
    }

    fn err(text: &str) -> String {
        Scenario::from_toml(text, &[]).unwrap_err().to_string()
    }

    /// Every discipline of the scenario gets its kind's per-stack defaults (read after
    /// `stack`), an explicit value still wins, and `linux` keeps the base defaults.
    #[test]
    fn qdiscs_take_the_stacks_defaults() {
        let text = MINIMAL.replace("cubic", "reno").replace("qdisc = \"pfifo limit 1000\"", "qdisc = \"hred\"")
            + "[[bottleneck.upstream]]\nrate = \"100Mbit\"\nqdisc = \"pie\"\n\
               [[bottleneck.changes]]\nat = \"1s\"\nqdisc = { kind = \"codel\" }\n\
               [return]\nqdisc = \"pie limit 70\"\n";
        let ns2 = Scenario::from_toml(&format!("stack = \"ns2-2013\"\n{text}"), &[]).unwrap();
        assert!(ns2.bottleneck.qdisc.args().flag("wait"), "ns-2 RED's wait_ (ns-default.tcl)");
        assert_eq!(ns2.bottleneck.upstream[0].qdisc.args().uint("limit"), 50);
        assert_eq!(ns2.bottleneck.changes[0].qdisc.as_ref().unwrap().args().uint("limit"), 50);
        assert_eq!(ns2.return_path.as_ref().unwrap().qdisc.args().uint("limit"), 70, "given: kept");
        // ns-default.tcl `Queue set limit_ 50`, inherited by Queue/RED and Queue/DropTail.
        assert_eq!(ns2.bottleneck.qdisc.args().uint("limit"), 50, "hred on ns2-2013");
        let fifo = Scenario::from_toml(&format!("stack = \"ns2-2013\"\n{}", text.replace("\"hred\"", "\"pfifo\"")), &[]).unwrap();
        assert_eq!(fifo.bottleneck.qdisc.args().uint("limit"), 50, "pfifo on ns2-2013 (DropTail)");
        let linux = Scenario::from_toml(&text, &[]).unwrap();
        assert!(!linux.bottleneck.qdisc.args().flag("wait"));
        assert_eq!(linux.bottleneck.qdisc.args().uint("limit"), 100, "hred's own default on linux");
        assert_eq!(linux.bottleneck.upstream[0].qdisc.args().uint("limit"), 1000);
        let nowait = Scenario::from_toml(&format!("stack = \"ns2-2013\"\n{}", text.replace("\"hred\"", "\"hred nowait\"")), &[]).unwrap();
        assert!(!nowait.bottleneck.qdisc.args().flag("wait"));
    }

    #[test]
    fn a_missing_key_is_named() {
        let e = Scenario::from_toml(&MINIMAL.replace("duration = \"60s\"\n", ""), &[]).unwrap_err();
        assert_eq!(e.key, "duration", "{e}");
        let e = Scenario::from_toml(&MINIMAL.replace("cc = \"cubic\"\n", ""), &[]).unwrap_err();
        assert_eq!(e.key, "flows[0].cc", "{e}");
    }

    #[test]
    fn override_errors_are_one_short_line() {
        let long = format!("flows[0].nosuch={}", "x".repeat(100_000));
        let e = Scenario::from_toml(MINIMAL, &[long]).unwrap_err();
        assert_eq!(e.key, "flows[0].nosuch");
        assert!(e.to_string().len() < 1000, "{}", e.to_string().len());
        let e = Scenario::from_toml(MINIMAL, &["a\rb".into()]).unwrap_err();
        assert!(!e.to_string().contains(['\r', '\n']), "{e:?}");
        let e = Scenario::from_toml(MINIMAL, &["=1".into()]).unwrap_err();
        assert!(e.to_string().contains("the key is empty"), "{e}");
    }

    #[test]
    fn serde_quoted_values_are_excerpts() {
        let e = err(&MINIMAL.replace("cc = \"cubic\"", &format!("cc = [\"{}\"]", "b".repeat(5000))));
        assert!(e.len() < 300, "{e}");
        let e = err(&MINIMAL.replace("cc = \"cubic\"", &format!("cc = \"cubic\"\ndirection = \"{}\"", "a".repeat(5000))));
        assert!(e.len() < 300 && e.contains("flows[0].direction"), "{e}");
    }

    #[test]
    fn errors_name_key_and_line() {
        let e = err(&MINIMAL.replace("50Mbit", "50Mbot"));
        assert!(e.starts_with("line 4: bottleneck.rate: invalid rate '50Mbot'"), "{e}");
        let e = err(&MINIMAL.replace("rtt = \"20ms\"", "rtt = \"20ms\"\nrtx = 3"));
        assert!(e.contains("unknown field `rtx`"), "{e}");
        let e = err(&MINIMAL.replace("cc = \"cubic\"", "cc = \"vegas\""));
        assert!(e.starts_with("line 7: flows[0].cc: unknown congestion control 'vegas'"), "{e}");
        let e = err(&MINIMAL.replace("cc = \"cubic\"", "cc = \"cubic beta 2000\""));
        assert!(e.starts_with("line 7: flows[0].cc: cubic beta: 2000 is out of range"), "{e}");
        let e = err(&MINIMAL.replace("duration = \"60s\"\n", ""));
        assert!(e.contains("missing field `duration`"), "{e}");
        let e = err(&MINIMAL.replace("pfifo limit 1000", "pfifo limit -3"));
        assert!(e.contains("bottleneck.qdisc") && e.contains("-3"), "{e}");
        let e = err("duration = \n");
        assert!(e.starts_with("line 1:"), "{e}");
        assert_eq!(e.lines().count(), 1);
    }

    #[test]
    fn overrides_apply_before_validation() {
        let o = vec!["bottleneck.rate=10Mbit".to_string(), "flows[0].count=3".to_string(), "duration=5s".to_string()];
        let s = Scenario::from_toml(MINIMAL, &o).unwrap();
        assert_eq!(s.bottleneck.rate, Rate(10_000_000));
        assert_eq!(s.flows[0].count, 3);
        assert_eq!(s.duration, Time::from_secs(5));
        let e = Scenario::from_toml(MINIMAL, &["flows[4].cc=reno".to_string()]).unwrap_err();
        assert!(e.to_string().contains("no element 4"));
    }

    #[test]
    fn overrides_reach_every_element_and_merge_tables() {
        let two = format!("{MINIMAL}[[flows]]\ncc = \"reno\"\nrtt = \"10ms\"\n");
        let s = Scenario::from_toml(&two, &["flows[*].rtt=40ms".to_string()]).unwrap();
        assert_eq!((s.flows[0].rtt, s.flows[1].rtt), (Time::from_millis(40), Time::from_millis(40)));
        // A table merges into the flow: rtt and count stay.
        let s = Scenario::from_toml(MINIMAL, &["flows[0]={ cc = \"reno\", ecn = \"off\" }".to_string()]).unwrap();
        assert_eq!((s.flows[0].cc.kind_name(), s.flows[0].rtt, s.flows[0].count), ("reno", Time::from_millis(20), 2));
        // Nested indices and new tables.
        let s = Scenario::from_toml(MINIMAL, &["metrics.step=10ms".to_string()]).unwrap();
        assert_eq!(s.metrics.step, Time::from_millis(10));
        for (bad, want) in [("flows[x].rtt=1ms", "bad index"), ("flows[0.rtt=1ms", "bad index"), ("a..b=1", "bad key"), ("duration.x=1", "not a table")] {
            let e = Scenario::from_toml(MINIMAL, &[bad.to_string()]).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn media_table_parses_with_tool_defaults_and_checks_ranges() {
        let text = format!("{MINIMAL}[[media]]\nkind = \"scream\"\nrtt = \"25ms\"\necn = \"ect1\"\nmax_bitrate = \"100Mbit\"\n");
        let s = Scenario::from_toml(&text, &[]).unwrap();
        let m = &s.media[0];
        assert_eq!((m.kind, m.ecn, m.frame_rate, m.packet_size), (MediaKind::Scream, Codepoint::Ect1, 50.0, 1200));
        assert_eq!((m.min_bitrate, m.max_bitrate, m.microburst_interval), (Rate(1_000_000), Rate(100_000_000), Time::from_micros(500)));
        let e = err(&text.replace("max_bitrate = \"100Mbit\"", "max_bitrate = \"100kbit\""));
        assert!(e.contains("media[0].start_bitrate"), "{e}");
        let e = err(&text.replace("kind = \"scream\"", "kind = \"gcc\""));
        assert!(e.contains("media[0].kind"), "{e}");
        // The tool's -paceheadroom and the loop's host time per packet.
        assert_eq!((m.pacing_headroom, m.send_time), (1.5, Time::ZERO));
        let s = Scenario::from_toml(&text, &["media[0].send_time=20us".to_string(), "media[0].pacing_headroom=1.25".to_string()]).unwrap();
        assert_eq!((s.media[0].pacing_headroom, s.media[0].send_time), (1.25, Time::from_micros(20)));
        let e = err(&format!("{text}pacing_headroom = 0.5\n"));
        assert!(e.contains("media[0].pacing_headroom"), "{e}");
        let e = err(&format!("{text}send_time = \"2ms\"\n"));
        assert!(e.contains("media[0].send_time"), "{e}");
    }

    #[test]
    fn bottleneck_htb_burst_is_optional_and_bounded() {
        assert_eq!(Scenario::from_toml(MINIMAL, &[]).unwrap().bottleneck.htb_burst, None);
        let s = Scenario::from_toml(MINIMAL, &["bottleneck.htb_burst=1600".to_string()]).unwrap();
        assert_eq!(s.bottleneck.htb_burst, Some(1600));
        let e = Scenario::from_toml(MINIMAL, &["bottleneck.htb_burst=200000000".to_string()]).unwrap_err().to_string();
        assert!(e.contains("bottleneck.htb_burst"), "{e}");
        let e = Scenario::from_toml(MINIMAL, &["bottleneck.htb_burst=0".to_string()]).unwrap_err().to_string();
        assert!(e.contains("bottleneck.htb_burst") && e.contains("default"), "tc reads 0 as its default: {e}");
    }

    #[test]
    fn resolved_text_carries_overrides_and_seed_and_runs_the_same_scenario() {
        let o = vec!["bottleneck.rate=10Mbit".to_string(), "flows[0].rtt=40ms".to_string()];
        let text = resolve_toml(MINIMAL, Some(7), &o).unwrap();
        let r = Scenario::from_toml(&text, &[]).unwrap();
        assert_eq!((r.bottleneck.rate, r.flows[0].rtt, r.seed), (Rate(10_000_000), Time::from_millis(40), 7));
        // A seed beyond TOML's i64 is written as text and read back.
        let text = resolve_toml(MINIMAL, Some(u64::MAX), &[]).unwrap();
        assert!(text.contains("seed = \"18446744073709551615\""), "{text}");
        assert_eq!(Scenario::from_toml(&text, &[]).unwrap().seed, u64::MAX);
        // Invalid overrides are refused as from_toml refuses them.
        assert!(resolve_toml(MINIMAL, None, &["flows[0].rtt=40".to_string()]).unwrap_err().to_string().contains("flows[0].rtt"));
    }

    #[test]
    fn rates_without_a_unit_are_refused_with_the_key() {
        let e = err(&MINIMAL.replace("rate = \"50Mbit\"", "rate = \"50\""));
        assert!(e.contains("bottleneck.rate") && e.contains("a unit is needed"), "{e}");
        let e = err(&MINIMAL.replace("rate = \"50Mbit\"", "rate = 50"));
        assert!(e.contains("bottleneck.rate") && e.contains("a unit is needed"), "{e}");
        // tc-syntax qdisc arguments keep tc's rule (a bare number is bit/s).
        assert!(Scenario::from_toml(&MINIMAL.replace("pfifo limit 1000", "cake bandwidth 50000000"), &[]).is_ok());
    }

    #[test]
    fn steady_window_is_auto_unless_given() {
        assert_eq!(Scenario::from_toml(MINIMAL, &[]).unwrap().metrics.steady_window, None);
        let with = |v: &str| Scenario::from_toml(&format!("{MINIMAL}[metrics]\nsteady_window = {v}\n"), &[]);
        assert_eq!(with("\"auto\"").unwrap().metrics.steady_window, None);
        assert_eq!(with("\"60s\"").unwrap().metrics.steady_window, Some(Time::from_secs(60)));
        assert!(with("\"0s\"").unwrap_err().to_string().contains("metrics.steady_window"));
        assert!(with("\"often\"").unwrap_err().to_string().contains("auto"));
    }

    #[test]
    fn prague_without_l4s_ecn_is_warned_about() {
        let s = |ecn: &str| Scenario::from_toml(&MINIMAL.replace("cc = \"cubic\"", &format!("cc = \"prague\"\necn = \"{ecn}\"")), &[]).unwrap();
        assert_eq!(s("l4s").warnings(), Vec::<String>::new());
        let w = s("off").warnings();
        assert!(w.len() == 1 && w[0].starts_with("flows[0]: ") && w[0].contains("prague-reno"), "{w:?}");
        assert!(s("rfc3168").warnings()[0].contains("classic ECN feedback"));
        assert!(Scenario::from_toml(MINIMAL, &[]).unwrap().warnings().is_empty());
    }

    #[test]
    fn names_are_unique_and_not_a_links() {
        let two = |a: &str, b: &str| format!("{MINIMAL}[[flows]]\ncc = \"reno\"\nrtt = \"10ms\"\n{a}\n[[probes]]\nkind = \"ping\"\nrtt = \"10ms\"\n{b}\n");
        assert!(Scenario::from_toml(&two("", ""), &[]).is_ok());
        let e = err(&two("name = \"x\"", "name = \"x\""));
        assert!(e.contains("probes[0].name") && e.contains("'x' is already the name of flows[1].name"), "{e}");
        // Default names count: cubic-0, cubic-1, then reno-2; a probe named cubic-1 clashes.
        let e = err(&two("", "name = \"cubic-1\""));
        assert!(e.contains("probes[0].name") && e.contains("flows[0].name"), "{e}");
        let e = err(&two("name = \"bottleneck\"", ""));
        assert!(e.contains("flows[1].name") && e.contains("name of a link"), "{e}");
        let e = err(&two("name = \"\"", ""));
        assert!(e.contains("flows[1].name: must not be empty"), "{e}");
        // count > 1 adds -k: "x" and "x-0" side by side clash only if spelled so.
        assert!(Scenario::from_toml(&two("name = \"x\"\ncount = 2", "name = \"x\""), &[]).is_ok());
    }

    #[test]
    fn silent_nonsense_is_refused_with_the_key() {
        let e = err(&MINIMAL.replace("count = 2", "count = 2\nhost = 65535"));
        assert!(e.contains("flows[0].host") && e.contains("out of range 0..65534"), "{e}");
        let e = err(&MINIMAL.replace("seed = 1", "seed = 3.7"));
        assert!(e.contains("seed") && e.contains("not an integer"), "{e}");
        let e = err(&MINIMAL.replace("cc = \"cubic\"", "cc = \"dctcp alpha_on_init 4294967295\""));
        assert!(e.contains("alpha_on_init"), "{e}");
        let e = err(&MINIMAL.replace("cc = \"cubic\"", "cc = \"bbr min_rtt_win 0\""));
        assert!(e.contains("min_rtt_win") && e.contains("below 1ms"), "{e}");
        let media = |count: &str| format!("{MINIMAL}[[flows]]\ncc = \"scream\"\nrtt = \"20ms\"\ncount = {count}\n");
        for bad in ["1000000000", "0", "\"x\""] {
            let e = err(&media(bad));
            assert!(e.contains("flows[1].count") && e.contains("1..1000"), "{bad}: {e}");
        }
        assert_eq!(Scenario::from_toml(&media("3"), &[]).unwrap().media.len(), 3);
        let udp = format!("{MINIMAL}[[udp]]\nkind = \"video\"\nrtt = \"20ms\"\nrate = \"10Mbit\"\nframe_rate = 1e-9\n");
        let e = err(&udp);
        assert!(e.contains("udp[0].frame_rate") && e.contains("at most 64 MiB"), "{e}");
    }

    #[test]
    fn long_values_are_quoted_as_an_excerpt() {
        let long = "x".repeat(100_000);
        let e = err(&MINIMAL.replace("pfifo limit 1000", &long));
        assert!(e.len() < 400 && e.contains("…"), "{} chars: {}", e.len(), &e[..200.min(e.len())]);
    }

    #[test]
    fn error_lines_point_into_the_table_that_holds_the_key() {
        let text = format!("{MINIMAL}[[flows]]\ncc = \"reno\"\nrtt = \"1ns\"\n[[bottleneck.changes]]\nat = \"1s\"\nqdisc = \"codel\"\n");
        let lines: Vec<&str> = text.lines().collect();
        let line_of = |needle: &str, nth: usize| lines.iter().enumerate().filter(|(_, l)| l.starts_with(needle)).nth(nth).unwrap().0 + 1;
        let e = Scenario::from_toml(&text, &[]).unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("flows[1].rtt", Some(line_of("rtt", 1))), "{e}");
        assert_eq!(line_of_key(&text, "bottleneck.changes[0].qdisc"), Some(line_of("qdisc", 1)));
        assert_eq!(line_of_key(&text, "bottleneck.qdisc"), Some(line_of("qdisc", 0)));
        assert_eq!(line_of_key(&text, "duration"), Some(1));
        // A second flow without `rtt`: its own [[flows]] header, not the first flow's rtt line.
        let missing = format!("{MINIMAL}[[flows]]\ncc = \"reno\"\n");
        let header = missing.lines().enumerate().filter(|(_, l)| l.starts_with("[[flows]]")).nth(1).unwrap().0 + 1;
        let e = Scenario::from_toml(&missing, &[]).unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("flows[1].rtt", Some(header)), "{e}");
    }

    #[test]
    fn runs_beyond_the_packet_limit_are_refused_before_any_work() {
        // 100 Gbit/s for an hour: 1e11 / 12000 * 1.5 * 3600 = 4.5e10 packets.
        let big = MINIMAL.replace("duration = \"60s\"", "duration = \"3600s\"").replace("50Mbit", "100Gbit");
        let e = err(&big);
        assert!(e.contains("limits.max_packets") && e.contains("4.50e10"), "{e}");
        // Raising the ceiling meets the next one (9e10 events); raising both accepts it. The
        // default accepts the minimal run (3.8e5 packets).
        let e = err(&format!("{big}[limits]\nmax_packets = 100000000000\n"));
        assert!(e.contains("limits.max_events") && e.contains("9.00e10"), "{e}");
        assert!(Scenario::from_toml(&format!("{big}[limits]\nmax_packets = 1e11\nmax_events = 1e11\n"), &[]).is_ok());
        let s = Scenario::from_toml(MINIMAL, &[]).unwrap();
        assert!((s.packet_estimate() - 50e6 / 12000.0 * 1.5 * 60.0).abs() < 1.0, "{}", s.packet_estimate());
        // A media source of 20 Gbit/s in 20-byte packets for 60 s: 7.5e9 packets. (At 10 Tbit/s
        // its frames alone are refused: media[0].frame_rate.)
        let media = |rate: &str| format!("{MINIMAL}[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\nmax_bitrate = \"{rate}\"\npacket_size = 20\n");
        assert!(err(&media("20Gbit")).contains("limits.max_packets"), "{}", err(&media("20Gbit")));
        assert!(err(&media("10Tbit")).contains("media[0].frame_rate"), "{}", err(&media("10Tbit")));
    }

    #[test]
    fn limits_parse_counts_and_sizes_and_refuse_zero() {
        let with = |l: &str| Scenario::from_toml(&format!("{MINIMAL}[limits]\n{l}\n"), &[]);
        let s = with("max_events = 1e10\nmax_memory = \"8GiB\"\nmax_packets = \"3e9\"").unwrap();
        assert_eq!((s.limits.max_events, s.limits.max_memory, s.limits.max_packets), (10_000_000_000, 8 << 30, 3_000_000_000));
        let d = Scenario::from_toml(MINIMAL, &[]).unwrap().limits;
        assert_eq!((d.max_events, d.max_memory, d.max_packets), (10_000_000_000, 4 << 30, 2_000_000_000));
        for (bad, key) in [("max_events = 0", "limits.max_events"), ("max_events = 1.5", "limits.max_events"), ("max_memory = \"lots\"", "limits.max_memory")] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains(key), "{bad}: {e}");
        }
        // The CLI's --max-events/--max-memory arrive as overrides and win over the file.
        let o = ["limits.max_events=2000".to_string(), "limits.max_memory=\"1GiB\"".to_string()];
        let e = Scenario::from_toml(&format!("{MINIMAL}[limits]\nmax_events = 1e12\n"), &o).unwrap_err().to_string();
        assert!(e.contains("limits.max_events") && e.contains("above the limit of 2.00e3"), "{e}");
    }

    /// Issue 14's abort inputs that memory, not packets, makes dangerous: each refused with
    /// one line naming limits.max_memory and its largest part, before any allocation.
    #[test]
    fn runs_beyond_the_memory_limit_are_refused_naming_the_largest_part() {
        // 11 us mean inter-arrival over 10 s: 909,091 transfers pile up (5.5 GB).
        let wl = "duration = \"10s\"\n[bottleneck]\nrate = \"50Mbit\"\n[[workloads]]\nrtt = \"20ms\"\nmean_interarrival = \"11us\"\n";
        let e = err(wl);
        assert!(e.contains("limits.max_memory") && e.contains("open transfers") && e.contains("5.1 GiB"), "{e}");
        assert!(!e.contains('\n'));
        // The same at the default 200 ms needs little; 8 GiB lets the 11 us one run.
        assert!(Scenario::from_toml(&wl.replace("11us", "200ms"), &[]).is_ok());
        assert!(Scenario::from_toml(&format!("{wl}[limits]\nmax_memory = \"8GiB\"\n"), &[]).is_ok());
        // 100,000 flows (the documented maximum) for 60 s: the views of their 500,000 series of
        // 1202 points alone are 10 GB.
        let e = err(&MINIMAL.replace("count = 2", "count = 100000"));
        assert!(e.contains("limits.max_memory") && e.contains("of it series"), "{e}");
        // A queue that may hold 4e9 packets.
        let e = err(&MINIMAL.replace("pfifo limit 1000", "pfifo limit 4000000000"));
        assert!(e.contains("limits.max_memory") && e.contains("of it queues"), "{e}");
        // A 1-byte-packet video source with 60 MB frames: 6e7 packets in one burst.
        let udp = format!("{MINIMAL}[[udp]]\nrtt = \"20ms\"\nrate = \"100Mbit\"\nframe_rate = 0.2\npacket_size = 1\n");
        let e = err(&udp);
        assert!(e.contains("limits.max_memory") && e.contains("of it packets in flight"), "{e}");
        // The minimal run needs a few MB.
        let parts = Scenario::from_toml(MINIMAL, &[]).unwrap().memory_estimate();
        assert!(parts.iter().map(|p| p.1).sum::<f64>() < 50e6, "{parts:?}");
    }

    #[test]
    fn the_event_estimate_is_checked_against_max_events() {
        let s = Scenario::from_toml(MINIMAL, &[]).unwrap();
        // 2 per packet, one per 50 ms step: 2 x 375,000 + 1200.
        assert!((s.event_estimate() - (2.0 * s.packet_estimate() + 1200.0)).abs() < 1.0);
        let e = err(&format!("{MINIMAL}[limits]\nmax_events = 100000\n"));
        assert!(e.contains("limits.max_events") && e.contains("7.51e5"), "{e}");
    }

    /// Issue 14: an RTT of 1,000,000 s or an upstream link of 1 bit/s ran to zero goodput
    /// without a word; they run, with one warning each (summary.json `warnings`, stderr).
    #[test]
    fn a_path_that_cannot_deliver_anything_is_warned_about() {
        let w = |t: &str| Scenario::from_toml(t, &[]).unwrap().warnings();
        assert!(w(MINIMAL).is_empty());
        let far = w(&MINIMAL.replace("rtt = \"20ms\"", "rtt = \"1000000s\""));
        assert_eq!(far.len(), 1, "{far:?}");
        assert!(far[0].starts_with("flows[0]: nothing it sends can arrive") && far[0].contains("path delay"), "{far:?}");
        let slow = w(&format!("{MINIMAL}[[bottleneck.upstream]]\nrate = \"1bit\"\n"));
        assert!(slow.len() == 1 && slow[0].contains("1bit") && slow[0].contains("takes"), "{slow:?}");
        // A 40 s RTT in a 60 s run delivers (1.5 RTT < 60 s); 41 s does not.
        assert!(w(&MINIMAL.replace("rtt = \"20ms\"", "rtt = \"39s\"")).is_empty());
        assert_eq!(w(&MINIMAL.replace("rtt = \"20ms\"", "rtt = \"41s\"")).len(), 1);
        // UDP, media and probes are checked too; a download uses the return link's rate.
        let udp = w(&format!("{MINIMAL}[[udp]]\nrtt = \"200s\"\n[[probes]]\nrtt = \"20ms\"\nstart = \"59.9999s\"\n"));
        assert!(udp.len() == 2 && udp[0].starts_with("udp[0]") && udp[1].starts_with("probes[0]"), "{udp:?}");
        let down = w(&format!("{}\ndirection = \"down\"\n[return]\nrate = \"1bit\"\n", MINIMAL.trim_end()));
        assert!(down.len() == 1 && down[0].starts_with("flows[0]"), "{down:?}");
    }

    /// Loops that could spin without simulated time advancing are impossible by validation:
    /// zero-size packets, zero rates and zero intervals are refused with the key.
    #[test]
    fn zero_sizes_rates_and_intervals_are_refused() {
        let cases = [
            ("[[udp]]\nrtt = \"20ms\"\npacket_size = 0\n", "udp[0].packet_size"),
            ("[[udp]]\nrtt = \"20ms\"\nrate = \"0bit\"\n", "udp[0].rate"),
            ("[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\npacket_size = 0\n", "media[0].packet_size"),
            ("[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\nmicroburst_interval = \"0s\"\n", "media[0].microburst_interval"),
            ("[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\nframe_rate = 0.0\n", "media[0].frame_rate"),
            ("[[probes]]\nrtt = \"20ms\"\ninterval = \"0s\"\n", "probes[0].interval"),
            ("[[probes]]\nrtt = \"20ms\"\nsize = 0\n", "probes[0].size"),
            ("[[workloads]]\nrtt = \"20ms\"\nmean_interarrival = \"0s\"\n", "workloads[0].mean_interarrival"),
            ("[metrics]\nstep = \"0s\"\n", "metrics.step"),
            ("[return]\nrate = \"0bit\"\n", "return.rate"),
            ("[[bottleneck.upstream]]\nrate = \"0bit\"\n", "bottleneck.upstream[0].rate"),
            ("[[bottleneck.changes]]\nat = \"1s\"\nrate = \"0bit\"\n", "bottleneck.changes[0].rate"),
        ];
        for (extra, key) in cases {
            let e = err(&format!("{MINIMAL}{extra}"));
            assert!(e.contains(key), "{extra}: {e}");
        }
        for (from, to, key) in [("50Mbit", "0bit", "bottleneck.rate"), ("count = 2", "count = 2\nmss = 0", "flows[0].mss"), ("20ms", "0s", "flows[0].rtt")] {
            let e = err(&MINIMAL.replace(from, to));
            assert!(e.contains(key), "{to}: {e}");
        }
        let e = err(&MINIMAL.replace("pfifo limit 1000", "pie tupdate 0us"));
        assert!(e.contains("tupdate"), "{e}");
    }

    /// Issue 14's "inputs that abort the process", items 1-4, each refused with one line
    /// naming the key (item 5, 1-byte UDP into the SCE qdiscs, is bounded by their queue
    /// limit: qdisc::cnq/lfq tests and tests/integration/limits.rs).
    #[test]
    fn the_inputs_that_aborted_the_process_are_refused() {
        let cases = [
            ("[[flows]]\ncc = \"scream\"\nrtt = \"20ms\"\ncount = 1000000000\n", "flows[1].count"),
            ("[[udp]]\nrtt = \"20ms\"\nframe_rate = 1e-300\n", "udp[0].frame_rate"),
            ("[[udp]]\nrtt = \"20ms\"\nframe_rate = 1e-9\n", "udp[0].frame_rate"),
            ("[[workloads]]\nrtt = \"20ms\"\nmean_interarrival = \"11us\"\nstop = \"10s\"\n", "limits.max_memory"),
            ("[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\nmax_bitrate = \"10Tbit\"\npacket_size = 20\nmicroburst_interval = \"1us\"\n", "media[0].frame_rate"),
        ];
        for (extra, key) in cases {
            let e = err(&format!("{MINIMAL}{extra}"));
            assert!(e.contains(key) && !e.contains('\n') && e.len() < 300, "{extra}: {e}");
        }
        // Tiny and huge numbers are quoted in exponent form, not as 300 digits.
        assert!(err(&format!("{MINIMAL}{}", cases[1].0)).contains("1e-300 frames/s"));
        for (extra, want) in [
            ("[[udp]]\nrtt = \"20ms\"\nframe_rate = 1e300\n", "udp[0].frame_rate: 1e300 is out of range"),
            ("[[udp]]\nrtt = \"20ms\"\nframe_size_variation = -1e-300\n", "udp[0].frame_size_variation: -1e-300 is out of range"),
            ("[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\npacing_headroom = 1e-300\n", "media[0].pacing_headroom: 1e-300 is out of range"),
            ("[[media]]\nkind = \"scream\"\nrtt = \"20ms\"\nframe_rate = 1.7976931348623157e308\n", "media[0].frame_rate: 1.7976931348623157e308 is out"),
        ] {
            let e = err(&format!("{MINIMAL}{extra}"));
            assert!(e.contains(want) && e.len() < 200, "{extra}: {e}");
        }
        assert_eq!((short_f64(0.5), short_f64(25.0), short_f64(1e-9)), ("0.5".into(), "25".into(), "0.000000001".into()));
        let e = err(&MINIMAL.replace("\"50Mbit\"", "1e300"));
        assert!(e.contains("bottleneck.rate") && e.contains("a unit is needed") && e.len() < 250, "{e}");
    }
}
