//! ns-2.35's one-way TCP, as the `ns2-2013` profile runs it: the `Agent/TCP/Sack1` sender
//! ([`Sack1Agent`]) and the `Agent/TCPSink/Sack1/DelAck` receiver ([`DelAckSink`]).
//!
//! Järvinen & Kojo ran ns-2.35 (released 4 Nov 2011) with these agents; their semantics
//! differ from Linux's in almost every detail that shapes a load transient, so the profile
//! replaces the Linux model of [`super::sender`] and [`super::receiver`] as a whole rather
//! than switching parts of it. Sources read (ns-2.35, stored ids for `read_file`):
//! - `tcp/tcp.cc` v1.182 (2011/06/20; stored id 39483653): `TcpAgent` — `output`, `opencwnd`
//!   (`windowOption_` 1), `slowdown`, `newack`, `newtimer`, `rtt_update`, `rtt_timeout`,
//!   `rtt_backoff`, `timeout`, `send_one`, `initial_window`, `reset`, `rtt_init`;
//! - `tcp/tcp-sack1.cc` (stored id 739356139): `Sack1TcpAgent::recv`, `dupack_action`,
//!   `timeout`, `send_much`;
//! - `tcp/scoreboard-rq.{h,cc}` (stored ids 647450362, 239342414) and the reassembly queue
//!   it wraps, `tcp/rq.cc` (stored id 1198583439): the sender's SACK scoreboard;
//! - `tcp/tcp-sink.cc` (stored id 612885038): `Acker::update`, `TcpSink::ack`,
//!   `DelAckSink::recv`/`timeout`, `Sacker::append_ack`, `SackStack`;
//! - the defaults of `tcl/lib/ns-default.tcl`, read from Debian's `ns2` 2.35+dfsg-5 binary
//!   (`Agent/TCP set window_` etc. in an `ns` script): `window_` 20, `windowInit_` 2,
//!   `packetSize_` 1000, `tcpip_base_hdr_size_` 40, `tcpTick_` 0.01, `rtxcur_init_` 3.0,
//!   `minrto_` 0.2, `maxrto_` 60, `rfc2988_` true, `srtt_init_` 0, `rttvar_init_` 12,
//!   `T_SRTT_BITS` 3, `T_RTTVAR_BITS` 2, `rttvar_exp_` 2, `windowOption_` 1, `increase_num_`
//!   1, `decrease_num_` 0.5, `precisionReduce_` true, `numdupacks_` 3, `numdupacksFrac_` -1,
//!   `singledup_` 1 (limited transmit), `LimTransmitFix_` false, `bugFix_` true,
//!   `bugfix_ss_` 1, `timerfix_` true, `syn_` true, `delay_growth_` true, `maxburst_` 0,
//!   `aggressive_maxburst_` 1, `overhead_` 0, `timestamps_` false, `slow_start_restart_` true,
//!   `restart_bugfix_` true, `max_ssthresh_` 0, `maxcwnd_` 0, `useHeaders_` true, Sack1
//!   `partial_ack_` 0; sink `packetSize_` 40, `interval_` 100 ms, `maxSackBlocks_` 3,
//!   `RFC2581_immediate_ack_` true, `SYN_immediate_ack_` true, `generateDSacks_` false.
//!
//! Numbering: ns-2 counts packets from 0, and with `syn_` packet 0 is a 40-byte SYN; data
//! packets are 1..=N and an ACK carries the highest in-order packet number. On the engine's
//! wire the SYN is a [`Kind::Syn`](crate::packet::Kind), data packet `s` is engine segment
//! `s - 1`, and an ACK's number `a` is the engine's next expected segment (the same value);
//! SACK blocks are converted likewise. Every data packet is `packetSize_` + 40 bytes on the
//! wire (ns-2 sends whole packets; the last one's payload is counted as what remains of the
//! transfer for the delivered-bytes metric only); ACKs are 40 bytes + 8 per SACK block.

pub mod sack1;
pub mod sink;
#[cfg(test)]
mod tests;

pub use sack1::Sack1Agent;
pub use sink::DelAckSink;

use crate::time::Time;

/// `tcpip_base_hdr_size_`: IP + TCP header bytes of every ns-2 TCP packet (no link header).
pub const TCPIP_BASE_HDR_SIZE: u32 = 40;
/// `tcpTick_`: the RTT estimator's clock granularity (10 ms).
pub const TCP_TICK: Time = Time(10_000_000);
/// `minrto_` (0.2 s) and `maxrto_` (60 s).
pub const MINRTO: Time = Time(200_000_000);
pub const MAXRTO: Time = Time(60_000_000_000);
/// `numdupacks_`.
pub const NUMDUPACKS: i32 = 3;
/// `DelAckSink::interval_`.
pub const DELACK_INTERVAL: Time = Time(100_000_000);
/// `maxSackBlocks_` of the sink.
pub const SINK_SACK_BLOCKS: usize = 3;
/// `window_` when the scenario gives no receive window: large enough never to limit. The
/// ns-2 default is 20 packets, but the study's published delays cannot come from 20-packet
/// windows (two flows of at most 20 packets over a 162 ms, 2 Mbit/s path, about 39 packets
/// of bandwidth-delay product, would queue almost nothing, yet the paper's 1+1 95th
/// percentiles are 60-230 ms); the paper does not say what it set, so the profile assumes
/// it raised `window_` out of the way. `rwnd` (bytes) sets it explicitly.
pub const WINDOW_NOT_LIMITING: u32 = 100_000;

/// What the `ns2-2013` profile gives a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ns2Config {
    /// `window_`: the receiver's window in packets (also the initial `ssthresh_`).
    pub window: u32,
    /// Seed for `boot_time_` (`Random::uniform(tcp_tick_)` per agent in `TcpAgent::reset`).
    pub seed: u64,
}
