//! Congestion control, shaped like Linux's `struct tcp_congestion_ops`
//! (`include/net/tcp.h`): one trait, one file per algorithm.
//!
//! The sender ([`crate::tcp::sender`]) owns loss detection, recovery and the PRR descent of
//! cwnd, as Linux's `tcp_input.c` does; an algorithm supplies `ssthresh` (the reduction),
//! `cong_avoid` (the growth), and observes ACKs, state changes and events. An algorithm that
//! wants full control (BBR) implements `cong_control` instead, as in Linux.

mod reno;
pub mod cubic;
pub mod bbr;
pub mod bbr3;
mod bbr_common;
pub mod sce;
pub mod dctcp;
pub mod prague;

pub use reno::Reno;
pub use cubic::Cubic;
pub use bbr::Bbr;
pub use bbr3::Bbr3;
pub use dctcp::Dctcp;
pub use prague::Prague;

use crate::params::{ConfigEq, Kind, Registered, Spec};
use crate::rng::Stream;
use crate::packet::EcnMode;
use crate::time::Time;


/// Linux `enum tcp_ca_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    Open,
    /// Duplicate ACKs / SACKs seen, no loss inferred yet.
    Disorder,
    /// Reducing cwnd after an ECN echo (RFC 3168).
    Cwr,
    /// Fast recovery (RFC 6675 + PRR).
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

/// Linux `enum tcp_ca_event` (the subset the modelled algorithms react to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaEvent {
    /// First transmission when no packet was in flight (restart after idle).
    TxStart,
    /// The cwnd reduction of CWR or Recovery has completed.
    CompleteCwr,
    /// A retransmission timeout.
    Loss,
}

/// The socket (Linux `struct tcp_sock`): the sender's one copy of the connection state, which
/// the sender ([`crate::tcp::sender`]) updates in place and a congestion control reads and
/// writes through the hooks below; nothing is copied between the two. Windows are in packets.
///
/// Layout (`repr(C)`, 168 bytes, the 8-byte fields, the 4-byte ones, the flags): every field
/// is read per ACK, so the order matters only for the sampling pass, which reads the latest
/// rate sample, `srtt`, `cwnd` and `mss` at every tick; they are adjacent, so one cache line
/// of the sender holds them (issue #15, session 12).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct TcpCcState {
    /// The clock of the event being processed (Linux `tp->tcp_mstamp`, refreshed when a
    /// packet arrives or a timer fires).
    pub now: Time,
    /// Minimum RTT seen (Linux keeps a windowed min; the flows here never change path).
    pub min_rtt: Time,
    /// Packets delivered (cumulatively or selectively ACKed) since the start.
    pub delivered: u64,
    /// Of `delivered`, packets that arrived CE-marked (exact, AccECN-style feedback).
    pub delivered_ce: u64,
    /// Packets that arrived SCE-marked (ECT(1) on an SCE connection), as echoed.
    pub delivered_sce: u64,
    /// Time of the last data transmission (`lsndtime`); during a `TxStart` event it is still
    /// the previous one, as in Linux `tcp_event_data_sent`.
    pub lsndtime: Time,
    /// Current pacing rate in bytes per second (0 before the first RTT sample).
    pub pacing_rate: f64,
    /// Packets marked lost since the start (Linux `tp->lost`).
    pub lost: u64,
    /// Time of the latest delivery (Linux `tp->delivered_mstamp`).
    pub delivered_mstamp: Time,
    /// Linux `tp->app_limited`: non-zero while the flow is application-limited, the
    /// delivered count that ends it. A `cong_control` algorithm may set it (BBR PROBE_RTT).
    pub app_limited: u64,
    /// Earliest departure time of the next paced packet (Linux `tcp_wstamp_ns`).
    pub edt: Time,
    /// The latest delivery-rate sample kept (Linux `tp->rate_delivered`, `tp->rate_interval_us`;
    /// `tcp_rate_gen`): packets delivered over the interval, zero before the first. Written by
    /// the sender only (the reported delivery rate); congestion controls read them.
    pub rate_delivered: u64,
    pub rate_interval: Time,
    /// Smoothed RTT; zero before the first sample.
    pub srtt: Time,
    pub cwnd: u32,
    pub mss: u32,
    pub ssthresh: u32,
    /// Linux `snd_cwnd_cnt`: ACKed packets counted towards the next +1 in congestion avoidance.
    pub cwnd_cnt: u32,
    /// Largest cwnd allowed (`snd_cwnd_clamp`).
    pub cwnd_clamp: u32,
    /// Segments sent and not yet cumulatively acknowledged (`packets_out`).
    pub packets_out: u32,
    /// Of `packets_out`: SACKed (`sacked_out`), marked lost (`lost_out`), and retransmissions
    /// in flight (`retrans_out`).
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// First segment not cumulatively acknowledged, next segment to send (segment numbers).
    pub snd_una: u32,
    pub snd_nxt: u32,
    /// Linux `tcp_is_cwnd_limited()`: growth is only allowed while cwnd is the limit. The
    /// sender evaluates it once per ACK, at the `tcp_cong_control` stage; the hooks called
    /// before that stage (`pkts_acked`) see the previous ACK's value.
    pub is_cwnd_limited: bool,
    /// The raw `tp->is_cwnd_limited` flag, kept by `tcp_cwnd_validate` (BBRv3 reads it).
    pub cwnd_limited_flag: bool,
    pub ca_state: CaState,
    /// True when the socket paces (changes HyStart's ACK-train threshold, as in Linux).
    pub paced: bool,
    /// The connection's ECN mode (negotiated at the handshake).
    pub ecn: EcnMode,
    /// Linux `tcp_write_queue_empty()`: the application has no data queued that was not yet
    /// sent (`write_seq == snd_nxt`). A bulk flow always has some; a sized flow runs out at
    /// its end, a stopped one at once. Evaluated with `is_cwnd_limited`, once per ACK at the
    /// `tcp_cong_control` stage (2020 Prague's growth gate reads it).
    pub write_queue_empty: bool,
}

impl TcpCcState {
    /// The socket of a connection that has sent nothing yet: `cwnd` = the initial window,
    /// ssthresh infinite (`TCP_INFINITE_SSTHRESH`), no RTT sample (srtt 0, min_rtt unset),
    /// nothing in flight, Open, no pacing rate yet. The sender starts from it, and so do the
    /// algorithms' unit tests (`test_state`), which then set what their case needs.
    pub fn new(cwnd: u32, mss: u32, ecn: EcnMode, paced: bool) -> Self {
        TcpCcState {
            now: Time::ZERO,
            cwnd,
            ssthresh: u32::MAX,
            cwnd_cnt: 0,
            cwnd_clamp: u32::MAX,
            mss,
            srtt: Time::ZERO,
            min_rtt: Time::MAX,
            packets_out: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            delivered: 0,
            delivered_ce: 0,
            delivered_sce: 0,
            snd_una: 0,
            snd_nxt: 0,
            is_cwnd_limited: false,
            cwnd_limited_flag: false,
            lsndtime: Time::ZERO,
            ca_state: CaState::Open,
            paced,
            pacing_rate: 0.0,
            lost: 0,
            delivered_mstamp: Time::ZERO,
            app_limited: 0,
            edt: Time::ZERO,
            rate_delivered: 0,
            rate_interval: Time::ZERO,
            ecn,
            write_queue_empty: true,
        }
    }
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
    /// Linux `tcp_packets_in_flight`: packets_out − (sacked_out + lost_out) + retrans_out.
    pub fn packets_in_flight(&self) -> u32 {
        self.packets_out + self.retrans_out - self.sacked_out - self.lost_out
    }
}

/// Linux `struct ack_sample`: what one ACK newly acknowledged.
#[derive(Clone, Copy, Debug, Default)]
pub struct AckSample {
    /// Packets newly acknowledged cumulatively (Linux `pkts_acked`).
    pub acked: u32,
    /// Data packets newly reported CE-marked by the receiver's counter.
    pub acked_ce: u32,
    /// Data packets newly reported SCE-marked (SCE connections).
    pub acked_sce: u32,
    /// RTT of the most recently sent, never-retransmitted packet this ACK covers (Linux
    /// `ca_rtt_us`), if any.
    pub rtt: Option<Time>,
    /// Packets in flight before this ACK.
    pub prior_in_flight: u32,
    /// The ACK carried the RFC 3168 ECN-Echo flag (Linux `CA_ACK_ECE` of `in_ack_event`; SCE
    /// transports respond to it per ACK).
    pub ece: bool,
}

/// Linux `struct rate_sample` (`net/ipv4/tcp_rate.c`): a delivery-rate sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSample {
    /// Packets delivered over `interval`; negative if no valid sample.
    pub delivered: i64,
    pub delivered_ce: i64,
    pub interval: Time,
    pub rtt: Option<Time>,
    pub losses: u32,
    pub acked_sacked: u32,
    pub prior_in_flight: u32,
    pub is_app_limited: bool,
    pub is_retrans: bool,
    /// Packets this ACK newly reported CE-marked (the L4S kernel's AccECN `rs->ece_delta`).
    pub ece_delta: u32,
    /// `tp->delivered` when the packet that set this sample was sent (`prior_delivered`).
    pub prior_delivered: u64,
    /// Packets in flight just after that packet was sent, itself included
    /// (google/bbr `tx_in_flight`, `tcp_set_tx_in_flight`).
    pub tx_in_flight: u32,
    /// Packets marked lost since that packet was sent (google/bbr `rs->lost`).
    pub lost: u64,
    /// The ACK carried an ECN echo (Linux `FLAG_ECE`: the ECE flag, or a CE-count increase
    /// with accurate feedback).
    pub is_ece: bool,
}

/// What a congestion control learns when a packet is marked lost (google/bbr
/// `.skb_marked_lost`): the snapshot taken when that packet was last sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct LostSkb {
    /// Packets in flight just after it was sent, itself included.
    pub tx_in_flight: u32,
    /// Packets marked lost since it was sent, itself included (`tp->lost - tx.lost`).
    pub lost: u64,
    pub is_app_limited: bool,
}

impl RateSample {
    /// Delivery rate in bytes/s, if the sample is valid.
    pub fn rate_bytes_per_sec(&self, mss: u32) -> Option<f64> {
        (self.delivered > 0 && self.interval > Time::ZERO)
            .then(|| self.delivered as f64 * mss as f64 / self.interval.as_secs_f64())
    }
}

/// How a congestion control sizes one send (one GSO/TSO skb: segments handed to the device
/// at once, which leave back to back when offloads are off). The sender takes the result,
/// then `min(…, gso_max_segs)` as Linux `tcp_tso_segs` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsoSegs {
    /// At most this many segments: `min(tcp_tso_autosize(sk, mss, tcp_min_tso_segs), n)`.
    /// The `.max_tso_segs` hook of the 2020 L4S trees (L4STeam/linux@b256daed and @e741f5ac
    /// `prague_max_tso_seg`; consumer `tcp_tso_segs` read in the sibling tree
    /// dboru/linux@b9acb4cf `net/ipv4/tcp_output.c`, stored id 9164548996). `n` ≥ 1.
    AtMost(u32),
    /// Exactly this many segments, replacing `tcp_tso_autosize` altogether: the `.tso_segs`
    /// hook of the google/bbr v2alpha tree (`tcp_tso_segs`: `ca_ops->tso_segs ?
    /// ca_ops->tso_segs(sk, mss_now) : tcp_tso_autosize(...)`), used by its Prague
    /// (google/bbr@23cbf7e1 `prague_tso_segs`, stored id 14268397719). `n` ≥ 1.
    Exactly(u32),
}

/// A congestion-control algorithm (Linux `tcp_congestion_ops`).
pub trait CongestionControl {
    /// Name as in Linux (`"reno"`, `"cubic"`).
    fn name(&self) -> &'static str;
    /// Called once when the connection starts.
    fn init(&mut self, _tp: &mut TcpCcState) {}
    /// The slow-start threshold to use on a loss or ECN echo (`.ssthresh`).
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32;
    /// Grow cwnd for `acked` newly acknowledged packets (`.cong_avoid`). Only called in
    /// Open/Disorder/Loss, never during a CWR or Recovery reduction.
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32);
    /// Every ACK (`.pkts_acked`), with the packets it cumulatively acknowledged and the RTT of
    /// the most recently sent packet it (S)ACKed. May set ssthresh (HyStart does).
    fn pkts_acked(&mut self, _tp: &mut TcpCcState, _sample: &AckSample) {}
    /// The sender changes `ca_state` (`.set_state`), called before the change. As in Linux
    /// the algorithm may write the socket (DCTCP sets ssthresh on entering Recovery, BBRv3
    /// restores cwnd when leaving Loss).
    fn set_state(&mut self, _tp: &mut TcpCcState, _new: CaState) {}
    /// An event (`.cwnd_event`); may write the socket (DCTCP sets ssthresh on an RTO, BBR
    /// leaves PROBE_RTT on TxStart).
    fn cwnd_event(&mut self, _tp: &mut TcpCcState, _ev: CaEvent) {}
    /// Full control of cwnd and pacing on every ACK (`.cong_control`, BBR). Returning true
    /// replaces the sender's `cong_avoid` and PRR handling for this ACK.
    fn cong_control(&mut self, _tp: &mut TcpCcState, _rs: &RateSample) -> bool {
        false
    }
    /// Whether the algorithm implements `cong_control` (Linux tests the op pointer): then
    /// the end of a CWR/Recovery episode leaves cwnd alone (Linux `tcp_end_cwnd_reduction`
    /// returns early) and no `CompleteCwr` event is sent.
    fn has_cong_control(&self) -> bool {
        false
    }
    /// A packet was just marked lost (google/bbr `.skb_marked_lost`, BBRv3).
    fn skb_marked_lost(&mut self, _tp: &TcpCcState, _skb: &LostSkb) {}
    /// cwnd to restore when a reduction is undone (`.undo_cwnd`).
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        tp.cwnd
    }
    /// Pacing rate override in bytes/s; `None` keeps Linux's `tcp_update_pacing_rate`.
    fn pacing_rate(&self, _tp: &TcpCcState) -> Option<f64> {
        None
    }
    /// Whether the algorithm needs pacing regardless of the flow's setting (BBR, Prague).
    fn needs_pacing(&self) -> bool {
        false
    }
    /// The floor of the segments per GSO/TSO skb (Linux `ca_ops->min_tso_segs`, read by
    /// `tcp_tso_segs` in `net/ipv4/tcp_output.c` and passed to `tcp_tso_autosize`); `None`
    /// keeps `sysctl_tcp_min_tso_segs` (2). Upstream BBR returns 1 below 150 kB/s of pacing
    /// rate (`bbr_min_tso_segs`). Only read when the flow sends GSO skbs (`gso` on).
    fn min_tso_segs(&self, _tp: &TcpCcState) -> Option<u32> {
        None
    }
    /// The controller's say in how many MSS-sized segments one send (one GSO/TSO skb) may
    /// carry, for its current state. Units: segments (packets of `tp.mss` payload), not bytes.
    /// When called: by the sender each time it sizes a send (Linux calls `tcp_tso_segs` once
    /// per `tcp_write_xmit`), i.e. after the latest ACK's `cong_control`/`cong_avoid` and
    /// pacing update, so a value derived from the pacing rate is current. `None` (the
    /// default): the controller has no hook and Linux's `tcp_tso_autosize` (≈ 1 ms of the
    /// pacing rate, at least `tcp_min_tso_segs` = 2) applies unchanged. See [`TsoSegs`] for
    /// the two kernel hooks (`.max_tso_segs` caps autosize, `.tso_segs` replaces it).
    fn tso_segs(&self, _tp: &TcpCcState) -> Option<TsoSegs> {
        None
    }
    /// The algorithm's private state, for a per-ACK trace (what `ss -ti` would show, e.g.
    /// Prague's α): appended to `out` as (name, value). Only called while a trace is on
    /// ([`crate::tcp::TcpSender::trace_acks`]), never in a normal run.
    fn trace_vars(&self, _out: &mut Vec<(&'static str, f64)>) {}
}

/// Linux `tcp_slow_start()` (`net/ipv4/tcp_cong.c`): grow cwnd by the acked packets up to
/// ssthresh and return the acked packets left over for congestion avoidance.
pub fn slow_start(tp: &mut TcpCcState, acked: u32) -> u32 {
    let cwnd = tp.cwnd.saturating_add(acked).min(tp.ssthresh);
    let left = acked - (cwnd - tp.cwnd).min(acked);
    tp.cwnd = cwnd.min(tp.cwnd_clamp);
    left
}

/// The common start of Linux's `cong_avoid` implementations: nothing while not cwnd-limited,
/// slow start below ssthresh, and the ACKed packets left for congestion avoidance (if any).
pub fn acked_for_avoidance(tp: &mut TcpCcState, acked: u32) -> Option<u32> {
    if !tp.is_cwnd_limited {
        return None;
    }
    let left = if tp.in_slow_start() { slow_start(tp, acked) } else { acked };
    (left > 0).then_some(left)
}

/// Linux `tcp_cong_avoid_ai()`: +1 packet per `w` packets acked (Appropriate Byte Counting in
/// packets, RFC 3465), carrying the remainder in `cwnd_cnt`.
pub fn cong_avoid_ai(tp: &mut TcpCcState, w: u32, acked: u32) {
    let w = w.max(1);
    if tp.cwnd_cnt >= w {
        tp.cwnd_cnt = 0;
        tp.cwnd += 1;
    }
    tp.cwnd_cnt += acked;
    if tp.cwnd_cnt >= w {
        let delta = tp.cwnd_cnt / w;
        tp.cwnd_cnt -= delta * w;
        tp.cwnd += delta;
    }
    tp.cwnd = tp.cwnd.min(tp.cwnd_clamp);
}

/// A parsed congestion-control configuration (name and parameters) that builds instances.
pub trait CcConfig: std::fmt::Debug + Send + Sync + ConfigEq {
    /// The Linux name, e.g. `"cubic"` (the kind's name in [`REGISTRY`]).
    fn name(&self) -> &'static str;
    /// A new instance for one connection, with its own seeded random stream (labelled
    /// `cc/<flow index>`; algorithms that draw no random numbers ignore it) and the run's era
    /// profile (algorithms whose code differed in that kernel take its defaults).
    fn build(&self, rng: Stream, stack: crate::profile::Stack) -> Cc;
}

/// One connection's congestion control: the built-in algorithms, one variant each, held
/// inline by the sender and dispatched with a `match`. Each algorithm implements
/// [`CongestionControl`] (the one interface, as Linux's `tcp_congestion_ops`); this enum
/// implements it too, by forwarding. Against a `Box<dyn CongestionControl>` a hook costs a
/// compare on the variant instead of the box's and the vtable's loads and an indirect call,
/// and CUBIC's and Reno's per-ACK hooks (`pkts_acked`, `cong_avoid`) inline into the
/// sender's ACK path. The algorithms whose state is larger than CUBIC's (the BBRs, CUBIC-SCE) stay
/// boxed inside their variant so that the enum, and every sender, stays the size of the
/// largest small one.
pub enum Cc {
    Reno(Reno),
    Cubic(Cubic),
    Dctcp(Dctcp),
    Prague(Prague),
    Bbr(Box<Bbr>),
    Bbr3(Box<Bbr3>),
    RenoSce(sce::RenoSce),
    CubicSce(Box<sce::CubicSce>),
    /// A controller written for a test (the sender's tests drive it with fixed rates).
    #[cfg(test)]
    Test(Box<dyn CongestionControl>),
}

/// `$body` with `$c` bound to the variant's algorithm, for every variant of [`Cc`]. CUBIC,
/// the default and every benchmark's algorithm, is tested first, with the other variants'
/// branch marked cold: without that hint the compiler decodes the variant and jumps through
/// a table on every hook (about 8 instructions, more than the virtual call it replaces); with
/// it CUBIC's hooks cost one compare and inline, and the others take the table.
macro_rules! each_cc {
    ($cc:expr, $c:ident => $body:expr) => {
        match $cc {
            Cc::Cubic($c) => $body,
            other => {
                not_cubic();
                match other {
                    Cc::Cubic(_) => unreachable!("CUBIC is dispatched first"),
                    Cc::Reno($c) => $body,
                    Cc::Dctcp($c) => $body,
                    Cc::Prague($c) => $body,
                    Cc::Bbr($c) => $body,
                    Cc::Bbr3($c) => $body,
                    Cc::RenoSce($c) => $body,
                    Cc::CubicSce($c) => $body,
                    #[cfg(test)]
                    Cc::Test($c) => $body,
                }
            }
        }
    };
}

/// Marks the branch of [`each_cc!`] that dispatches the algorithms other than CUBIC as the
/// unlikely one (a call to a cold function is the stable branch-weight hint).
#[cold]
#[inline(never)]
fn not_cubic() {}

impl CongestionControl for Cc {
    fn name(&self) -> &'static str {
        match self {
            // `Reno` is also its own `CcConfig`, which has a `name` too.
            Cc::Reno(c) => CongestionControl::name(c),
            Cc::Cubic(c) => c.name(),
            Cc::Dctcp(c) => c.name(),
            Cc::Prague(c) => c.name(),
            Cc::Bbr(c) => c.name(),
            Cc::Bbr3(c) => c.name(),
            Cc::RenoSce(c) => c.name(),
            Cc::CubicSce(c) => c.name(),
            #[cfg(test)]
            Cc::Test(c) => c.name(),
        }
    }
    #[inline]
    fn init(&mut self, tp: &mut TcpCcState) {
        each_cc!(self, c => c.init(tp))
    }
    #[inline]
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        each_cc!(self, c => c.ssthresh(tp))
    }
    #[inline]
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        each_cc!(self, c => c.cong_avoid(tp, acked))
    }
    #[inline]
    fn pkts_acked(&mut self, tp: &mut TcpCcState, sample: &AckSample) {
        each_cc!(self, c => c.pkts_acked(tp, sample))
    }
    #[inline]
    fn set_state(&mut self, tp: &mut TcpCcState, new: CaState) {
        each_cc!(self, c => c.set_state(tp, new))
    }
    #[inline]
    fn cwnd_event(&mut self, tp: &mut TcpCcState, ev: CaEvent) {
        each_cc!(self, c => c.cwnd_event(tp, ev))
    }
    #[inline]
    fn cong_control(&mut self, tp: &mut TcpCcState, rs: &RateSample) -> bool {
        each_cc!(self, c => c.cong_control(tp, rs))
    }
    #[inline]
    fn has_cong_control(&self) -> bool {
        each_cc!(self, c => c.has_cong_control())
    }
    #[inline]
    fn skb_marked_lost(&mut self, tp: &TcpCcState, skb: &LostSkb) {
        each_cc!(self, c => c.skb_marked_lost(tp, skb))
    }
    #[inline]
    fn undo_cwnd(&mut self, tp: &TcpCcState) -> u32 {
        each_cc!(self, c => c.undo_cwnd(tp))
    }
    #[inline]
    fn pacing_rate(&self, tp: &TcpCcState) -> Option<f64> {
        each_cc!(self, c => c.pacing_rate(tp))
    }
    #[inline]
    fn needs_pacing(&self) -> bool {
        each_cc!(self, c => c.needs_pacing())
    }
    #[inline]
    fn min_tso_segs(&self, tp: &TcpCcState) -> Option<u32> {
        each_cc!(self, c => c.min_tso_segs(tp))
    }
    #[inline]
    fn tso_segs(&self, tp: &TcpCcState) -> Option<TsoSegs> {
        each_cc!(self, c => c.tso_segs(tp))
    }
    fn trace_vars(&self, out: &mut Vec<(&'static str, f64)>) {
        each_cc!(self, c => c.trace_vars(out))
    }
}

/// A congestion control's declaration: Linux name, module parameters and builder.
pub type CcKind = Kind<dyn CcConfig>;

/// Congestion controls by name, each declared once in its file.
///
/// `bbr2` is an alias of `bbr3`: the studies' "BBR2" rows run with the BBRv3 model.
pub const REGISTRY: &[(&str, &CcKind)] = &[
    (reno::RENO.name, &reno::RENO),
    (cubic::CUBIC.name, &cubic::CUBIC),
    (dctcp::DCTCP.name, &dctcp::DCTCP),
    (prague::PRAGUE.name, &prague::PRAGUE),
    (bbr::BBR.name, &bbr::BBR),
    (bbr3::BBR3.name, &bbr3::BBR3),
    ("bbr2", &bbr3::BBR3),
    (sce::RENO_SCE.name, &sce::RENO_SCE),
    (sce::CUBIC_SCE.name, &sce::CUBIC_SCE),
];

impl Registered for dyn CcConfig {
    const WHAT: &'static str = "congestion control";
    fn registry() -> &'static [(&'static str, &'static CcKind)] {
        REGISTRY
    }
    fn config_eq(a: &Self, b: &Self) -> bool {
        a.config_eq(b.as_any())
    }
}

/// Every congestion control's declaration as JSON (for `aqmlab cc list|show`).
pub fn table_json() -> serde_json::Value {
    crate::params::registry_json::<dyn CcConfig>()
}

/// A congestion control with its parameters: `cc = "cubic"`, or with parameters
/// `cc = "prague rtt_target 25ms"` / `cc = { kind = "prague", rtt_target = "25ms" }`.
pub type CcSpec = Spec<dyn CcConfig>;

/// A window of `cwnd` packets all in flight, cwnd-limited, with data queued (mss 1448, L4S
/// ECN, min_rtt 0, not paced): the state the algorithms' unit tests start from.
#[cfg(test)]
pub(crate) fn test_state(cwnd: u32, ssthresh: u32) -> TcpCcState {
    TcpCcState {
        ssthresh,
        min_rtt: Time::ZERO,
        packets_out: cwnd,
        snd_nxt: cwnd,
        is_cwnd_limited: true,
        cwnd_limited_flag: true,
        write_queue_empty: false,
        ..TcpCcState::new(cwnd, 1448, EcnMode::L4s, false)
    }
}
