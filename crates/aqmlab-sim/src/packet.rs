//! Packets: small plain values, copied by value through the engine (no heap allocation).

use crate::packet_ext::{self, PacketExt};
use crate::time::Time;
use serde::Deserialize;

/// The two-bit ECN field of the IP header (RFC 3168 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Ecn {
    #[default]
    NotEct = 0b00,
    Ect1 = 0b01,
    Ect0 = 0b10,
    Ce = 0b11,
}

impl Ecn {
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }
    /// Marks Congestion Experienced if the packet is ECN-capable, as Linux `INET_ECN_set_ce`:
    /// ECT(0)/ECT(1) become CE; returns whether the packet now carries CE (also when it
    /// already did), false for Not-ECT, which an AQM must drop instead.
    pub fn set_ce(&mut self) -> bool {
        if *self == Ecn::NotEct {
            return false;
        }
        *self = Ecn::Ce;
        true
    }
    /// Whether a network element may turn codepoint `from` into `to` (the ECN invariant,
    /// RFC 3168 §5 and §6.1.3 ("the CE codepoint ... MUST NOT be changed to another value"),
    /// RFC 6040 §4.2's decapsulation table, draft-morton-tsvwg-sce §5): unchanged; ECT(0) or
    /// ECT(1) to CE; ECT(0) to ECT(1) (an SCE mark, or RFC 6040's outer ECT(1) over an inner
    /// ECT(0)). Not-ECT never becomes ECN-capable, CE never changes back, nothing becomes
    /// Not-ECT. (A configured bleaching middlebox, `Element::EcnRewrite`, is exempt.)
    pub fn transition_allowed(from: Ecn, to: Ecn) -> bool {
        from == to || matches!((from, to), (Ecn::Ect0 | Ecn::Ect1, Ecn::Ce) | (Ecn::Ect0, Ecn::Ect1))
    }
    /// Panics with "invariant violated: ECN transition" if [`Ecn::transition_allowed`] fails;
    /// `what` names the element (one branch on the common, allowed path).
    #[inline]
    pub fn check_transition(from: Ecn, to: Ecn, what: &str) {
        if from != to && !Ecn::transition_allowed(from, to) {
            panic!("invariant violated: ECN transition: {what} turned {from:?} into {to:?}");
        }
    }
}

// Wire sizes.

/// Bytes of IPv4 + TCP headers with the timestamp option, as Linux sends them.
pub const TCP_IP_HEADER_BYTES: u32 = 52;
/// Ethernet header bytes. Linux qdiscs and shapers count packets with their link-layer
/// header (`qdisc_pkt_len`), and the studies' veth links add no preamble or FCS, so a full
/// segment occupies 1514 bytes of link time and queue space.
pub const ETHERNET_HEADER_BYTES: u32 = 14;
/// Largest frame on the links (Linux `psched_mtu`: 1500-byte MTU + Ethernet header).
pub const LINK_MTU: u32 = 1500 + ETHERNET_HEADER_BYTES;
/// Largest UDP payload in one 1500-byte IPv4 packet.
pub const MAX_UDP_PAYLOAD: u32 = 1500 - 20 - 8;
/// Header bytes below a UDP payload on the wire: UDP 8 + IPv4 20 + Ethernet 14.
pub const UDP_IP_ETH: u32 = 8 + 20 + 14;

/// ECN use of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EcnMode {
    /// Not-ECT: AQMs drop instead of marking.
    Off,
    /// RFC 3168: ECT(0), ECE latched until CWR, one reduction per window.
    Rfc3168,
    /// L4S (RFC 9330/9331): ECT(1) on every data packet, accurate (AccECN-style) feedback of
    /// the number of CE-marked packets; the congestion control decides the response.
    L4s,
    /// SCE (draft-morton-tsvwg-sce): ECT(0) sender; SCE marks (ECT(1)) are echoed as ESCE
    /// with an exact count, CE as in RFC 3168.
    Sce,
}

impl EcnMode {
    /// Whether ECN is negotiated at all.
    pub fn is_on(self) -> bool {
        self != EcnMode::Off
    }
}

/// Which way a packet travels along its flow's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Direction {
    /// Sender to receiver (data).
    Forward = 0,
    /// Receiver to sender (ACKs).
    Reverse = 1,
}

/// A SACK block `[start, end)` in segment numbers (RFC 2018).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SackBlock {
    pub start: u32,
    pub end: u32,
}

/// Maximum SACK blocks per ACK: Linux sends at most 3 when TCP timestamps are on (the default).
pub const MAX_SACK_BLOCKS: usize = 3;

/// TCP header fields a segment carries. Sequence numbers count segments, not bytes: every
/// segment but a transfer's last carries exactly one MSS, as Linux sends without TSO here.
/// The SACK blocks are out of line ([`Packet::sacks`], [`crate::packet_ext`]); their count is
/// here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TcpHeader {
    /// Data: this segment's number. ACK: cumulative ACK (next segment expected).
    pub seq: u32,
    /// Data: payload bytes.
    pub payload: u32,
    /// ECN-Echo flag (RFC 3168 §6.1.3).
    pub ece: bool,
    /// Congestion Window Reduced flag (RFC 3168 §6.1.2).
    pub cwr: bool,
    /// ACK: number of CE-marked data packets received so far (an AccECN-style counter,
    /// RFC 9768's r.cep), for senders that want exact CE feedback.
    pub ce_count: u32,
    /// ACK: number of SCE-marked (ECT(1)) data packets received so far, on SCE connections.
    pub sce_count: u32,
    /// ACK: ESCE, the SCE echo flag: the segment that triggered this ACK was SCE-marked.
    pub esce: bool,
    /// Number of SACK blocks ([`Packet::sacks`]); set by [`Packet::set_sacks`].
    pub sack_len: u8,
    /// TCP timestamps option (RFC 7323) in 1 ms ticks (`TCP_TS_HZ`): data carries the send
    /// time as TSval, ACKs echo the receiver's `ts_recent` as TSecr. Zero means absent.
    pub ts_val: u32,
    pub ts_ecr: u32,
}

/// What a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Connection request (carries the ECN negotiation flags, RFC 3168 §6.1.1).
    Syn,
    SynAck,
    Data,
    Ack,
    /// Latency-probe request and its echo (UDP, irtt-like).
    ProbeRequest,
    ProbeReply,
    /// An RTP media packet (`tcp.seq` = RTP sequence number, `tcp.payload` = RTP bytes,
    /// `tcp.cwr` = RTP marker bit, `origin` = the frame's capture time) and its RTCP
    /// congestion-control feedback (RFC 8888; `sacks()[0]` = the reported sequence range).
    Media,
    MediaFeedback,
    /// An unresponsive UDP datagram (`apps::udp`; `tcp.seq` = sequence number,
    /// `tcp.payload` = UDP payload bytes).
    Udp,
}

/// The inner header a tunnelled packet carries while it is encapsulated (`path::tunnel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TunnelTag {
    /// Low 32 bits of the SA's sequence number (ESP's Sequence Number field; WireGuard's
    /// counter); the exit infers the high bits (RFC 4303 Appendix A, ESN).
    pub seq: u32,
    /// The inner packet's flow key.
    pub inner_key: u32,
    /// Bytes the entry added to `wire_len`.
    pub overhead: u16,
    pub inner_ecn: Ecn,
    pub inner_dscp: u8,
}

/// A packet in flight. `Copy` and 64 bytes (one cache line), so queues hold packets inline
/// and every move of one copies a cache line. Fields only some packets need (SACK blocks, a
/// tunnel's tag) live out of line ([`crate::packet_ext`]), behind the accessors below; the
/// apps' `sent_at` and `origin` share TCP-only fields ([`Packet::sent_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Index of the flow this packet belongs to.
    pub flow: u32,
    /// Flow-hash input standing for the 5-tuple; tunnels rewrite it.
    pub hash_key: u32,
    /// Source and destination host (stand-ins for the IP addresses, for host-fair
    /// disciplines such as CAKE); set by the engine from the flow's `host`.
    pub src_host: u16,
    pub dst_host: u16,
    pub dir: Direction,
    pub kind: Kind,
    /// Index of the next path element on this packet's route.
    pub hop: u8,
    pub ecn: Ecn,
    pub dscp: u8,
    /// Sub-queue of the last qdisc that held it (for per-queue metrics, e.g. DualPI2 L/C).
    pub queue: u8,
    /// Bytes on the wire (IP packet length).
    pub wire_len: u32,
    /// Time of entry into the current qdisc (set by the link on enqueue).
    pub enqueued_at: Time,
    pub tcp: TcpHeader,
    /// ECN field on entry into the current qdisc (set by the link on enqueue, checked against
    /// `ecn` at dequeue: [`Ecn::check_transition`]).
    pub ecn_at_enqueue: Ecn,
    /// Handle of this packet's out-of-line fields in the running simulation's slab
    /// ([`crate::packet_ext`]); 0: none (all of them at their defaults).
    pub(crate) ext: u32,
}

#[cold]
#[inline(never)]
fn not_an_app_packet(kind: Kind, what: &str) -> ! {
    panic!("{what} is a field of the apps' packets (probes, media, UDP), not of a TCP {kind:?}")
}

/// Every move of a packet is one cache line.
const _: () = assert!(std::mem::size_of::<Packet>() <= 64);

impl Packet {
    pub fn new(flow: u32, dir: Direction, kind: Kind, wire_len: u32) -> Packet {
        Packet {
            flow,
            hash_key: flow * 2 + dir as u32,
            src_host: 0,
            dst_host: 0,
            dir,
            kind,
            hop: 0,
            ecn: Ecn::NotEct,
            dscp: 0,
            queue: 0,
            wire_len,
            enqueued_at: Time::ZERO,
            tcp: TcpHeader::default(),
            ecn_at_enqueue: Ecn::NotEct,
            ext: 0,
        }
    }
    /// The out-of-line fields (their defaults if the packet has none).
    #[inline]
    pub fn ext(&self) -> PacketExt {
        if self.ext == 0 {
            return PacketExt::default();
        }
        packet_ext::with(|s| *s.get(self.ext))
    }
    /// Writes the out-of-line fields through `f`, taking a slot first if the packet has none.
    pub fn ext_mut<R>(&mut self, f: impl FnOnce(&mut PacketExt) -> R) -> R {
        packet_ext::with(|s| {
            if self.ext == 0 {
                self.ext = s.alloc();
            }
            f(s.get_mut(self.ext))
        })
    }
    /// Sets one out-of-line field: a packet without a slot takes one holding `f` applied to
    /// the defaults (one write of the slot), else `f` writes into its slot.
    #[inline]
    fn set_ext(&mut self, f: impl FnOnce(&mut PacketExt)) {
        packet_ext::with(|s| {
            if self.ext == 0 {
                let mut e = PacketExt::default();
                f(&mut e);
                self.ext = s.alloc_with(e);
            } else {
                f(s.get_mut(self.ext));
            }
        })
    }
    /// Whether the packet holds a slot of the out-of-line store.
    #[inline]
    pub fn has_ext(&self) -> bool {
        self.ext != 0
    }
    /// The packet ends (delivered, dropped, discarded): its out-of-line slot, if any, is
    /// given back. Call once per packet, where it ends.
    #[inline]
    pub fn release(&self) {
        if self.ext != 0 {
            packet_ext::with(|s| s.free(self.ext));
        }
    }
    /// The SACK blocks (`tcp.sack_len` of them are valid; the rest are zero).
    #[inline]
    pub fn sacks(&self) -> [SackBlock; MAX_SACK_BLOCKS] {
        if self.tcp.sack_len == 0 {
            return [SackBlock::default(); MAX_SACK_BLOCKS];
        }
        self.ext().sacks
    }
    /// Sets the SACK blocks (at most [`MAX_SACK_BLOCKS`]) and `tcp.sack_len`; none takes no
    /// slot.
    pub fn set_sacks(&mut self, blocks: &[SackBlock]) {
        self.tcp.sack_len = blocks.len() as u8;
        if blocks.is_empty() && self.ext == 0 {
            return;
        }
        self.set_ext(|e| {
            e.sacks = [SackBlock::default(); MAX_SACK_BLOCKS];
            e.sacks[..blocks.len()].copy_from_slice(blocks);
        });
    }
    /// The tunnel tag (default: not tunnelled).
    pub fn tunnel(&self) -> TunnelTag {
        self.ext().tunnel
    }
    pub fn set_tunnel(&mut self, tag: TunnelTag) {
        self.set_ext(|e| e.tunnel = tag);
    }
    /// Decapsulation: the tunnel tag, taken off the packet. A packet whose slot held nothing
    /// else (no SACK blocks) gives the slot back here, in the same access.
    pub fn take_tunnel(&mut self) -> TunnelTag {
        if self.ext == 0 {
            return TunnelTag::default();
        }
        let sacked = self.tcp.sack_len > 0;
        let (tag, free) = packet_ext::with(|s| {
            let e = s.get_mut(self.ext);
            let tag = std::mem::take(&mut e.tunnel);
            let free = !sacked;
            if free {
                s.free(self.ext);
            }
            (tag, free)
        });
        if free {
            self.ext = 0;
        }
        tag
    }
    /// When the endpoint sent this packet (probes, media, UDP: one-way delay).
    ///
    /// The apps' packets (probes, media, UDP) keep `sent_at` in `tcp.ts_val` (low 32 bits)
    /// and `tcp.ts_ecr` (high), and `origin` in `tcp.ce_count` and `tcp.sce_count`: TCP
    /// fields that only TCP segments use, as the apps already carry their sequence number in
    /// `tcp.seq` (see [`Kind`]). A TCP segment has neither and panics.
    #[inline]
    pub fn sent_at(&self) -> Time {
        self.check_app("sent_at");
        Time(self.tcp.ts_val as u64 | (self.tcp.ts_ecr as u64) << 32)
    }
    #[inline]
    pub fn set_sent_at(&mut self, t: Time) {
        self.check_app("sent_at");
        (self.tcp.ts_val, self.tcp.ts_ecr) = (t.0 as u32, (t.0 >> 32) as u32);
    }
    /// Probe replies: when the request was sent (round-trip time); media: the frame's
    /// capture time. Kept in line, as [`Packet::sent_at`] says.
    #[inline]
    pub fn origin(&self) -> Time {
        self.check_app("origin");
        Time(self.tcp.ce_count as u64 | (self.tcp.sce_count as u64) << 32)
    }
    #[inline]
    pub fn set_origin(&mut self, t: Time) {
        self.check_app("origin");
        (self.tcp.ce_count, self.tcp.sce_count) = (t.0 as u32, (t.0 >> 32) as u32);
    }
    #[inline]
    fn check_app(&self, what: &str) {
        if matches!(self.kind, Kind::Syn | Kind::SynAck | Kind::Data | Kind::Ack) {
            not_an_app_packet(self.kind, what);
        }
    }
    /// CE-marks an ECN-capable packet ([`Ecn::set_ce`]); false for Not-ECT.
    #[inline]
    pub fn mark_ce(&mut self) -> bool {
        self.ecn.set_ce()
    }
    /// An SCE mark (Linux `INET_ECN_set_ect1`): ECT(0) becomes ECT(1). Only ECT(0) may be
    /// SCE-marked; any other codepoint panics with "invariant violated: ECN transition".
    #[inline]
    pub fn mark_sce(&mut self) {
        if self.ecn != Ecn::Ect0 {
            panic!("invariant violated: ECN transition: SCE mark on a {:?} packet (only ECT(0) may become ECT(1))", self.ecn);
        }
        self.ecn = Ecn::Ect1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_ce_marks_only_ect() {
        for (from, to, ok) in [(Ecn::NotEct, Ecn::NotEct, false), (Ecn::Ect0, Ecn::Ce, true), (Ecn::Ect1, Ecn::Ce, true), (Ecn::Ce, Ecn::Ce, true)] {
            let mut e = from;
            assert_eq!(e.set_ce(), ok);
            assert_eq!(e, to);
        }
    }

    /// The ECN invariant's table, all 16 pairs: what RFC 3168/6040 and SCE allow, nothing else.
    #[test]
    fn ecn_transitions_allowed_are_exactly_the_legal_ones() {
        use Ecn::*;
        let all = [NotEct, Ect0, Ect1, Ce];
        let legal = [(Ect0, Ce), (Ect1, Ce), (Ect0, Ect1)];
        for from in all {
            for to in all {
                let want = from == to || legal.contains(&(from, to));
                assert_eq!(Ecn::transition_allowed(from, to), want, "{from:?} -> {to:?}");
            }
        }
        for (from, to) in [(NotEct, Ce), (Ce, Ect0), (Ect1, Ect0), (Ect0, NotEct)] {
            let err = std::panic::catch_unwind(|| Ecn::check_transition(from, to, "test")).unwrap_err();
            let msg = err.downcast_ref::<String>().unwrap();
            assert!(msg.starts_with("invariant violated: ECN transition: test turned"), "{msg}");
        }
    }

    #[test]
    fn mark_sce_only_on_ect0() {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1514);
        p.ecn = Ecn::Ect0;
        p.mark_sce();
        assert_eq!(p.ecn, Ecn::Ect1);
        for e in [Ecn::NotEct, Ecn::Ect1, Ecn::Ce] {
            p.ecn = e;
            let err = std::panic::catch_unwind(move || p.mark_sce()).unwrap_err();
            let msg = err.downcast_ref::<String>().unwrap();
            assert!(msg.starts_with("invariant violated: ECN transition: SCE mark on a"), "{msg}");
        }
        p.ecn = Ecn::Ect1;
        assert!(p.mark_ce());
        assert_eq!(p.ecn, Ecn::Ce);
    }

    #[test]
    fn packet_is_one_cache_line() {
        assert!(std::mem::size_of::<Packet>() <= 64, "{}", std::mem::size_of::<Packet>());
    }
}
