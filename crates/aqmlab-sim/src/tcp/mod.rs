//! TCP modelled on Linux: the sender ([`sender`]: SACK scoreboard, RACK-TLP loss detection
//! with an adaptive reordering window, undo of spurious recoveries, PRR, RTO, pacing,
//! delivery-rate samples) and the receiver ([`receiver`]: delayed and quick ACKs, SACK and
//! D-SACK blocks, timestamps, ECN echo).
//!
//! Sequence numbers count segments. Every segment but the last of a finite transfer carries
//! one MSS of payload. A send may carry several segments at once, as Linux's GSO skbs do
//! (`gso`, on by default): the studies turned the veths' offloads off (`ethtool -K … gso off
//! tso off`), but TCP kept building GSO skbs (until Nov 2021 `tcp_init_sock` forced
//! `sk_route_forced_caps = NETIF_F_GSO`; since then `sk_setup_caps` sets `NETIF_F_GSO` for
//! every TCP socket) and the device segmented them in software, so their segments leave the
//! host back to back. See [`sender`]'s `tcp_tso_segs` and `docs/algorithms/tcp.md`.

pub mod ns2;
pub mod receiver;
pub mod sender;

pub use receiver::TcpReceiver;
pub use sender::TcpSender;

use crate::event::{Event, EventQueue, FlowTimer};
use crate::packet::Packet;
use crate::packet::{EcnMode, ETHERNET_HEADER_BYTES, TCP_IP_HEADER_BYTES};
use crate::time::Time;

/// Per-connection settings, with Linux defaults.
///
/// `repr(C)`, the fields the sender reads on every ACK last (from `rto_min` on, at byte 64):
/// the sender ([`TcpSender`]) places its copy just before its own per-ACK fields, so that
/// these share their cache lines and the rest (read at set-up, by the receiver, or on rare
/// paths) stays apart, one line of it.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct TcpConfig {
    /// Bytes to transfer; `None` is an unlimited bulk transfer.
    pub size: Option<u64>,
    /// RTO before the first RTT sample (`TCP_TIMEOUT_INIT`, 1 s, RFC 6298 §2.1).
    pub rto_initial: Time,
    /// Receiver's delayed-ACK timeout (`TCP_DELACK_MIN`/`TCP_ATO_MIN`, 40 ms).
    pub delayed_ack: Time,
    /// Initial window in packets (RFC 6928, Linux `TCP_INIT_CWND`).
    pub initial_cwnd: u32,
    /// Quick ACKs at connection start (`TCP_MAX_QUICKACKS`, 16).
    pub quickacks: u32,
    /// The `ns2-2013` profile: ns-2.35's `Agent/TCP/Sack1` and `Agent/TCPSink/Sack1/DelAck`
    /// ([`ns2`]) replace the Linux sender and receiver; `None` everywhere else.
    pub ns2: Option<ns2::Ns2Config>,
    /// Lower bound of the RTO variance term (`tcp_rto_min`, 200 ms).
    pub rto_min: Time,
    /// Upper bound of the RTO (`TCP_RTO_MAX`, 120 s).
    pub rto_max: Time,
    /// Payload bytes per full segment (`mss_cache`).
    pub mss: u32,
    /// Header bytes per packet on the wire: Ethernet, IPv4 and TCP with timestamps.
    pub header_bytes: u32,
    /// Pacing rate factor in slow start, percent (`tcp_pacing_ss_ratio`).
    pub pacing_ss_ratio: u32,
    /// Pacing rate factor otherwise, percent (`tcp_pacing_ca_ratio`).
    pub pacing_ca_ratio: u32,
    /// Receive window in packets; `None` never limits.
    pub rwnd_packets: Option<u32>,
    pub ecn: EcnMode,
    /// Multi-segment (GSO) sends: each `tcp_write_xmit` step sends an skb of up to
    /// `tcp_tso_segs` segments, which leave the host together. Off: one segment per send.
    pub gso: bool,
    /// Which Linux `tcp_cwnd_validate` bookkeeping the kernel runs ([`CwndValidate`]).
    pub cwnd_validate: CwndValidate,
    // Three flags of rarer paths, here in what would be the struct's tail padding, so that
    // the set-up fields above are 64 bytes and the per-ACK ones start on a cache line of the
    // sender (session 14).
    /// `tcp_tso_autosize`'s min-RTT allowance (`gso_max_size >> (min_rtt_us >> 9)` bytes,
    /// Linux 5.18+, "tcp: adjust TSO packet sizes based on min_rtt"); off in the 2020-era
    /// (5.x) kernels of the era profiles.
    pub tso_rtt_allowance: bool,
    /// Which Linux `tcp_cwnd_reduction` (PRR) the kernel runs ([`PrrVersion`]).
    pub prr: PrrVersion,
    /// Linux internal pacing (`tcp_update_pacing_rate`, EDT departure times).
    pub pacing: bool,
}

/// The three generations of Linux `tcp_cwnd_reduction` (PRR, RFC 6937). They differ only
/// when the pipe is at or below ssthresh (`delta` = ssthresh − in_flight ≥ 0); above it all
/// three send the proportional share `⌈ssthresh·prr_delivered/prior_cwnd⌉ − prr_out`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrrVersion {
    /// Linux 4.5-5.10 (Yuchung Cheng, 3759824da87b "tcp: PRR uses CRB mode by default and SS
    /// mode conditionally", 2015): the slow-start bound `min(delta, max(prr_delivered −
    /// prr_out, newly_acked_sacked) + 1)` only on an ACK that cumulatively ACKs retransmitted
    /// data without a lost retransmission (`(flag & (FLAG_RETRANS_DATA_ACKED |
    /// FLAG_LOST_RETRANS)) == FLAG_RETRANS_DATA_ACKED`), else packet conservation
    /// `min(delta, newly_acked_sacked)`. So a CWR reduction (ECN: nothing is retransmitted)
    /// never refills the pipe above what is delivered. Read: 5.x `tcp_input.c`
    /// `tcp_cwnd_reduction` (stored id 14065428767) and the removed lines of the next patch.
    RetransAcked,
    /// Linux 5.11-5.18 (Yuchung Cheng, "tcp: avoid slow start during fast recovery on new
    /// losses", net-next 31 Oct 2020, stored id 49654411348): the slow-start bound on any ACK
    /// that advances snd_una without newly detected losses, else conservation.
    UnaAdvanced,
    /// Linux 5.19+ (Yuchung Cheng, "tcp: improve PRR loss recovery", net-next 18 May 2022,
    /// stored id 49330741046): `max(prr_delivered − prr_out, newly_acked_sacked)`, +1 when
    /// snd_una advances without new losses, at most delta. Today's Linux.
    #[default]
    Crb,
}

/// Generations of Linux `tcp_cwnd_validate`'s tracking of `tp->is_cwnd_limited`, which gates
/// every `cong_avoid` (`tcp_is_cwnd_limited`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CwndValidate {
    /// Before Dec 2020 (Linux ≤ 5.10, and 5.4-based development trees): called from
    /// `tcp_write_xmit` only when something was sent; the flag is rewritten (true or false)
    /// when snd_una has passed the window's `max_packets_seq` or `packets_out` exceeds the
    /// window's maximum. Read: the 5.4 `tcp_cwnd_validate` (stored id 24126625156) and the
    /// removed lines of Neal Cardwell's "tcp: fix cwnd-limited bug for TSO deferral where we
    /// send nothing" (9 Dec 2020, stored id 49405185745; Reported-by Ingemar Johansson).
    SentOnly2015,
    /// Today's (Neal Cardwell, "tcp: fix tcp_cwnd_validate() to not forget is_cwnd_limited",
    /// 2022, stored id 39045859429, after the Dec 2020 fix): also called when cwnd-limited
    /// with nothing sent; a cwnd-limited window stays so until the next window.
    #[default]
    Sticky,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            header_bytes: ETHERNET_HEADER_BYTES + TCP_IP_HEADER_BYTES,
            initial_cwnd: 10,
            ecn: EcnMode::Off,
            pacing: false,
            pacing_ss_ratio: 200,
            pacing_ca_ratio: 120,
            rwnd_packets: None,
            size: None,
            rto_min: Time::from_millis(200),
            rto_initial: Time::from_secs(1),
            rto_max: Time::from_secs(120),
            delayed_ack: Time::from_millis(40),
            quickacks: 16,
            gso: true,
            tso_rtt_allowance: true,
            ns2: None,
            prr: PrrVersion::Crb,
            cwnd_validate: CwndValidate::Sticky,
        }
    }
}

impl TcpConfig {
    /// The settings a scenario gives a connection (`[[flows]]`, `[[workloads]]`,
    /// `[[transients]]`); everything else keeps the Linux default.
    pub fn connection(mss: u32, initial_cwnd: u32, initial_rto: Time, ecn: EcnMode, size: Option<u64>) -> TcpConfig {
        TcpConfig { mss, initial_cwnd, rto_initial: initial_rto, ecn, size, ..TcpConfig::default() }
    }

    /// The send-path settings of the run's kernel and hosts: GSO on or off (`[host] gso`,
    /// `[[flows]] gso`), and the `tcp_tso_autosize` of the profile's kernel (the min-RTT
    /// allowance arrived in 5.18; every era profile is older).
    /// The loss-recovery code of the profile's kernel: its PRR and cwnd validation
    /// (`Stack::prr_version`, `Stack::cwnd_validate`).
    pub fn on_host(self, gso: bool, stack: crate::profile::Stack) -> TcpConfig {
        TcpConfig {
            gso,
            tso_rtt_allowance: stack == crate::profile::Stack::Linux,
            prr: stack.prr_version(),
            cwnd_validate: stack.cwnd_validate(),
            ..self
        }
    }

    /// The `ns2-2013` profile's agents for this connection (a no-op on every other
    /// profile): ns-2's whole-packet sizes (`packetSize_` = `mss`, 40 header bytes), no GSO,
    /// no pacing, `window_` from `rwnd` (bytes; [`ns2::WINDOW_NOT_LIMITING`] when unset),
    /// and the run's seed for the agents' `boot_time_`.
    pub fn for_stack(self, stack: crate::profile::Stack, rwnd_bytes: Option<u64>, seed: u64) -> TcpConfig {
        if stack != crate::profile::Stack::Ns2_2013 {
            return self;
        }
        let window = rwnd_bytes.map_or(ns2::WINDOW_NOT_LIMITING, |b| (b / self.mss as u64).max(1) as u32);
        TcpConfig {
            header_bytes: ns2::TCPIP_BASE_HDR_SIZE,
            gso: false,
            pacing: false,
            delayed_ack: ns2::DELACK_INTERVAL,
            quickacks: 0,
            rwnd_packets: None,
            ns2: Some(ns2::Ns2Config { window, seed }),
            ..self
        }
    }
}

/// What an endpoint needs from the engine: the clock, timers, and a way to send.
pub struct EndpointCtx<'a> {
    pub flow: u32,
    pub now: Time,
    pub events: &'a mut EventQueue,
    /// Packets sent, routed by the engine from the first hop of their direction.
    pub out: &'a mut Vec<Packet>,
}

impl EndpointCtx<'_> {
    pub fn event(&self, t: FlowTimer) -> Event {
        Event::Flow(self.flow, t)
    }
}
