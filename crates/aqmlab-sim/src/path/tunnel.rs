//! Tunnels: encapsulation at an entry element, decapsulation and anti-replay at an exit
//! element (algorithms.md 3.4, 3.5; docs/algorithms/tunnels.md).
//!
//! A `[[tunnels]]` entry has one security association (SA) per travel direction, each with its
//! own entry (sender side) and exit (receiver side) element; every endpoint pair that names the
//! tunnel passes through them, so all of them share one sequence counter per direction, as the
//! flows inside one IPsec SA or WireGuard session do.
//!
//! Entry: the packet gets the tunnel's outer flow key (one key for all inner flows with
//! `sport = "fixed"`; a per-inner-flow source port with `sport = "auto"`, as FOU's
//! `encap-sport auto`), the tunnel's bytes on the wire, the outer ECN field (Linux
//! `INET_ECN_encapsulate`) and DSCP, and the SA's next sequence number. The inner header's
//! fields ride along in [`TunnelTag`].
//!
//! Exit: the anti-replay check (RFC 4303 §3.4.3; Linux `xfrm_replay_check`/`_advance`), then
//! ECN decapsulation (RFC 6040 §4.2 as each kind's Linux code applies it), then the inner
//! header is restored.

use super::ElementCtx;
use crate::packet::{Ecn, Packet, TunnelTag, ETHERNET_HEADER_BYTES};
use crate::qdisc::flow_bucket;
use serde::{Deserialize, Serialize};

/// Tunnel implementations, for their overhead, ECN and anti-replay defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TunnelKind {
    /// WireGuard over IPv4: outer IP 20 + UDP 8 + data header 16 + Poly1305 tag 16 = 60 bytes,
    /// plus the plaintext padded to a multiple of 16 bytes up to the interface MTU.
    Wireguard,
    /// IPsec ESP in tunnel mode with AES-CBC and HMAC-SHA-256 (the l4s-tests `fl` script's
    /// `ip xfrm state ... auth sha256 ... enc aes ... mode tunnel`).
    Ipsec,
    /// IP-in-IP over Foo-over-UDP: outer IP 20 + UDP 8.
    Fou,
    /// Plain IP-in-IP: outer IP 20.
    Ipip,
}

/// How the outer flow key is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourcePort {
    /// One outer 5-tuple per direction: every inner flow lands in one FQ queue.
    #[default]
    Fixed,
    /// A source port per inner flow (FOU `encap-sport auto`, Linux `udp_flow_src_port`).
    Auto,
}

/// A `[[tunnels]]` entry.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TunnelSpec {
    pub name: String,
    pub kind: TunnelKind,
    /// Bytes added to every packet; by default the kind's own per-packet computation.
    #[serde(default)]
    pub overhead: Option<u32>,
    #[serde(default)]
    pub sport: SourcePort,
    /// Anti-replay window at the exit in packets, 0 = off; default by kind.
    #[serde(default)]
    pub replay_window: Option<u32>,
}

/// WireGuard's fixed window: `COUNTER_WINDOW_SIZE` = 8192 bits − 64 redundant bits
/// (drivers/net/wireguard/messages.h since May 2020; 2048 − 64 before).
pub const WIREGUARD_REPLAY_WINDOW: u32 = 8128;
/// The `fl` script's `replay-window 32` (also strongSwan's default).
pub const IPSEC_DEFAULT_REPLAY_WINDOW: u32 = 32;
/// Linux's largest xfrm window, `XFRMA_REPLAY_ESN_MAX` (include/uapi/linux/xfrm.h).
pub const XFRM_REPLAY_ESN_MAX: u32 = 4096;
/// Bits in the exit's fixed bitmap: WireGuard's `COUNTER_BITS_TOTAL`, the largest window any
/// kind accepts.
const REPLAY_BITS: usize = 8192;
/// wg-quick's default interface MTU (1500 minus 80 bytes of IPv6 outer headers); WireGuard
/// pads the plaintext to a multiple of 16 bytes but never beyond it.
const WIREGUARD_MTU: u32 = 1420;
/// Largest `overhead` accepted (it is stored in 16 bits).
pub const MAX_OVERHEAD: u32 = 1000;

impl TunnelKind {
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Wireguard => "wireguard",
            TunnelKind::Ipsec => "ipsec",
            TunnelKind::Fou => "fou",
            TunnelKind::Ipip => "ipip",
        }
    }

    /// Bytes the tunnel adds to an inner IP packet of `ip_len` bytes.
    pub fn overhead(self, ip_len: u32) -> u32 {
        match self {
            // wireguard/send.c calculate_skb_padding: ALIGN(len, MESSAGE_PADDING_MULTIPLE = 16),
            // capped at the MTU; packets at or above it are not padded.
            TunnelKind::Wireguard => 20 + 8 + 16 + 16 + ip_len.next_multiple_of(16).min(ip_len.max(WIREGUARD_MTU)) - ip_len,
            // esp4.c: outer IP 20 + ESP header (SPI, sequence) 8 + AES-CBC IV 16; the payload plus
            // the 2-byte pad-length/next-header trailer padded to the 16-byte cipher block; ICV
            // 12 bytes, because `ip xfrm ... auth sha256` (XFRMA_ALG_AUTH) takes hmac(sha256)'s
            // `icv_truncbits` = 96 from net/xfrm/xfrm_algo.c (auth-trunc would be needed for 128).
            TunnelKind::Ipsec => 20 + 8 + 16 + (ip_len + 2).next_multiple_of(16) - ip_len + 12,
            TunnelKind::Fou => 20 + 8,
            TunnelKind::Ipip => 20,
        }
    }

    /// The anti-replay window when `replay_window` is not given.
    pub fn default_replay_window(self) -> u32 {
        match self {
            TunnelKind::Wireguard => WIREGUARD_REPLAY_WINDOW,
            TunnelKind::Ipsec => IPSEC_DEFAULT_REPLAY_WINDOW,
            TunnelKind::Fou | TunnelKind::Ipip => 0,
        }
    }

    /// The largest window the kind supports (0: it carries no sequence number).
    pub fn max_replay_window(self) -> u32 {
        match self {
            TunnelKind::Wireguard => REPLAY_BITS as u32,
            TunnelKind::Ipsec => XFRM_REPLAY_ESN_MAX,
            TunnelKind::Fou | TunnelKind::Ipip => 0,
        }
    }

    /// Outer DSCP: xfrm tunnel mode copies the inner DS field (xfrm4_tunnel_encap_add);
    /// WireGuard (`ip_tunnel_ecn_encap(0, ...)`) and ipip/FOU without `tos inherit` send 0.
    fn outer_dscp(self, inner: u8) -> u8 {
        match self {
            TunnelKind::Ipsec => inner,
            TunnelKind::Wireguard | TunnelKind::Fou | TunnelKind::Ipip => 0,
        }
    }

    /// The inner ECN field after decapsulation, `None` to drop, as each kind's Linux receive
    /// path applies RFC 6040 §4.2.
    pub fn decapsulate(self, outer: Ecn, inner: Ecn) -> Option<Ecn> {
        match self {
            // ip_tunnel_rcv: IP_ECN_decapsulate, dropping when it returns 2.
            TunnelKind::Fou | TunnelKind::Ipip => rfc6040_decapsulate(outer, inner),
            // wireguard/receive.c calls INET_ECN_decapsulate and ignores its result: the
            // drop case delivers the inner packet unchanged (the CE mark is lost).
            TunnelKind::Wireguard => Some(rfc6040_decapsulate(outer, inner).unwrap_or(inner)),
            // xfrm4_remove_tunnel_encap → ipip_ecn_decapsulate: only CE is propagated, and only
            // to an ECN-capable inner header (RFC 4301 §5.1.2.1 / RFC 3168 behaviour).
            TunnelKind::Ipsec => Some(if outer == Ecn::Ce && inner.is_ect() { Ecn::Ce } else { inner }),
        }
    }
}

/// Linux `INET_ECN_encapsulate`: the inner ECN field is copied to the outer header, except CE,
/// which becomes ECT(0) (RFC 3168 §9.1.1 full functionality; RFC 6040 normal mode would copy
/// CE, but an inner CE cannot reach a tunnel entry in this topology, which sits ahead of every
/// AQM).
pub fn encapsulate(inner: Ecn) -> Ecn {
    if inner == Ecn::Ce {
        Ecn::Ect0
    } else {
        inner
    }
}

/// RFC 6040 §4.2, Figure 4: the ECN field of the outgoing inner header from the arriving inner
/// and outer fields; `None` means drop (outer CE on a Not-ECT inner packet: the congestion
/// signal cannot be passed on). The (!!!) cells (Not-ECT inner with ECT outer, CE inner with
/// ECT(1) outer) are forwarded as the table says; Linux only logs them.
pub fn rfc6040_decapsulate(outer: Ecn, inner: Ecn) -> Option<Ecn> {
    use Ecn::*;
    match (inner, outer) {
        (NotEct, Ce) => None,
        (NotEct, _) => Some(NotEct),
        (_, Ce) | (Ce, _) => Some(Ce),
        // Outer ECT(1) turns an ECT(0) inner into ECT(1) (L4S, RFC 9331 §B).
        (Ect0, Ect1) => Some(Ect1),
        (inner, _) => Some(inner),
    }
}

/// The first outer source port `sport = "auto"` draws from and the size of the range: Linux's
/// default `ip_local_port_range` 32768–60999, as `udp_flow_src_port` uses it.
const AUTO_PORT_BASE: u32 = 32768;
const AUTO_PORT_RANGE: u32 = 60999 - 32768;
/// Outer flow keys live above every inner key (inner keys are `flow * 2 + direction`, flows ≤
/// 100000): bit 31, then the SA index, then the source port.
const OUTER_KEY_BASE: u32 = 1 << 31;
/// Most `[[tunnels]]` entries (the SA index has 14 bits of the outer key).
pub const MAX_TUNNELS: usize = 1000;

/// The sender side of one SA.
#[derive(Debug)]
pub struct TunnelEntry {
    kind: TunnelKind,
    /// A fixed `overhead`, overriding the kind's computation.
    overhead: Option<u32>,
    sport: SourcePort,
    /// Outer key with the source port bits clear.
    key: u32,
    /// Sequence number of the last packet sent (RFC 4303 §3.3.3: the first packet gets 1).
    last_seq: u64,
}

impl TunnelEntry {
    fn receive(&mut self, mut pkt: Packet, ctx: &mut ElementCtx) {
        let overhead = self.overhead.unwrap_or_else(|| self.kind.overhead(pkt.wire_len.saturating_sub(ETHERNET_HEADER_BYTES)));
        self.last_seq += 1;
        pkt.set_tunnel(TunnelTag { seq: self.last_seq as u32, inner_key: pkt.hash_key, overhead: overhead as u16, inner_ecn: pkt.ecn, inner_dscp: pkt.dscp });
        pkt.hash_key = match self.sport {
            SourcePort::Fixed => self.key,
            SourcePort::Auto => self.key | (AUTO_PORT_BASE + flow_bucket(pkt.hash_key, 0, AUTO_PORT_RANGE)),
        };
        pkt.wire_len += overhead;
        pkt.ecn = encapsulate(pkt.ecn);
        pkt.dscp = self.kind.outer_dscp(pkt.dscp);
        ctx.out.push(pkt);
    }
}

/// RFC 4303 §3.4.3 receive window over a 64-bit (extended) sequence space: the right edge is
/// the highest sequence number accepted; a packet is accepted if it is beyond it (the window
/// slides) or within the `window` packets ending there and not yet seen. The bitmap is a
/// fixed ring of [`REPLAY_BITS`] bits indexed by sequence number (RFC 6479's layout: sliding
/// clears bits instead of shifting), so the check allocates nothing.
#[derive(Clone)]
pub struct ReplayWindow {
    window: u32,
    /// Highest sequence number accepted; 0 before the first (sequence numbers start at 1).
    highest: u64,
    seen: [u64; REPLAY_BITS / 64],
}

/// What the window says about a sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    Accept,
    /// At or left of the window's left edge (Linux counts `replay_window`).
    TooOld,
    /// Seen before (Linux counts `replay`).
    Duplicate,
}

impl ReplayWindow {
    /// `window` packets (at most 8192); 0 disables the check.
    pub fn new(window: u32) -> Self {
        assert!(window as usize <= REPLAY_BITS, "replay window above {REPLAY_BITS}");
        ReplayWindow { window, highest: 0, seen: [0; REPLAY_BITS / 64] }
    }

    /// Extends a 32-bit sequence number to the 64-bit one nearest the right edge (RFC 4303
    /// Appendix A2.2 infers the high bits the same way, from the window position).
    pub fn extend(&self, low: u32) -> u64 {
        let candidate = (self.highest & !0xFFFF_FFFF) | low as u64;
        if candidate + (1 << 31) < self.highest {
            candidate + (1 << 32)
        } else if candidate > self.highest + (1 << 31) && candidate >= 1 << 32 {
            candidate - (1 << 32)
        } else {
            candidate
        }
    }

    /// Checks a sequence number and, if accepted, records it (`xfrm_replay_check` followed by
    /// `xfrm_replay_advance`; the ICV check between them always passes here).
    pub fn check(&mut self, seq: u64) -> Replay {
        if self.window == 0 {
            // Off: nothing is dropped, but the right edge still moves (for `extend` and the
            // exit's reordering measure).
            self.highest = self.highest.max(seq);
            return Replay::Accept;
        }
        if seq > self.highest {
            // Clear the bits of the numbers the right edge passes over, then take this one.
            let gap = (seq - self.highest).min(REPLAY_BITS as u64);
            for s in seq + 1 - gap..=seq {
                self.set(s, false);
            }
            self.set(seq, true);
            self.highest = seq;
            return Replay::Accept;
        }
        if self.highest - seq >= self.window as u64 || seq == 0 {
            return Replay::TooOld;
        }
        if self.get(seq) {
            return Replay::Duplicate;
        }
        self.set(seq, true);
        Replay::Accept
    }

    fn get(&self, seq: u64) -> bool {
        let bit = (seq % REPLAY_BITS as u64) as usize;
        self.seen[bit / 64] & (1 << (bit % 64)) != 0
    }
    fn set(&mut self, seq: u64, on: bool) {
        let bit = (seq % REPLAY_BITS as u64) as usize;
        let mask = 1u64 << (bit % 64);
        if on {
            self.seen[bit / 64] |= mask;
        } else {
            self.seen[bit / 64] &= !mask;
        }
    }
}

/// The receiver side of one SA.
pub struct TunnelExit {
    kind: TunnelKind,
    replay: ReplayWindow,
    pub replay_drops: u64,
    /// Outer CE on a Not-ECT inner packet (RFC 6040's drop cell).
    pub ecn_drops: u64,
    /// Both kinds of drops by flow (the per-flow conservation check).
    pub flow_drops: crate::qdisc::FlowCounts,
    /// Largest distance below the right edge of any arriving packet: the window this
    /// direction would have needed to drop nothing is `max_reorder + 1`.
    pub max_reorder: u64,
}

impl TunnelExit {
    fn receive(&mut self, mut pkt: Packet, ctx: &mut ElementCtx) {
        let tag = pkt.take_tunnel();
        let seq = self.replay.extend(tag.seq);
        self.max_reorder = self.max_reorder.max(self.replay.highest.saturating_sub(seq));
        if self.replay.check(seq) != Replay::Accept {
            self.replay_drops += 1;
            self.flow_drops.add(pkt.flow);
            pkt.release();
            return;
        }
        let Some(ecn) = self.kind.decapsulate(pkt.ecn, tag.inner_ecn) else {
            self.ecn_drops += 1;
            self.flow_drops.add(pkt.flow);
            pkt.release();
            return;
        };
        Ecn::check_transition(tag.inner_ecn, ecn, "tunnel decapsulation");
        pkt.ecn = ecn;
        pkt.dscp = tag.inner_dscp;
        pkt.hash_key = tag.inner_key;
        pkt.wire_len -= tag.overhead as u32;
        ctx.out.push(pkt);
    }
    pub fn drops(&self) -> u64 {
        self.replay_drops + self.ecn_drops
    }
}

/// A tunnel element, for `path::Element`.
pub enum TunnelElement {
    Entry(TunnelEntry),
    Exit(Box<TunnelExit>),
}

impl TunnelElement {
    pub fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        match self {
            TunnelElement::Entry(e) => e.receive(pkt, ctx),
            TunnelElement::Exit(x) => x.receive(pkt, ctx),
        }
    }
    pub fn drops(&self) -> u64 {
        match self {
            TunnelElement::Entry(_) => 0,
            TunnelElement::Exit(x) => x.drops(),
        }
    }
    /// [`TunnelElement::drops`] by flow.
    pub fn flow_drops(&self) -> Option<&crate::qdisc::FlowCounts> {
        match self {
            TunnelElement::Entry(_) => None,
            TunnelElement::Exit(x) => Some(&x.flow_drops),
        }
    }
    /// [`TunnelElement::flow_drops`], to move them out.
    pub fn flow_drops_mut(&mut self) -> Option<&mut crate::qdisc::FlowCounts> {
        match self {
            TunnelElement::Entry(_) => None,
            TunnelElement::Exit(x) => Some(&mut x.flow_drops),
        }
    }
}

/// `summary.json` → `tunnels[]`, both directions together.
#[derive(Clone, Debug, Serialize)]
pub struct TunnelSummary {
    pub name: String,
    pub kind: &'static str,
    /// Packets encapsulated.
    pub packets: u64,
    /// Packets the anti-replay check dropped.
    pub replay_drops: u64,
    /// Packets dropped at decapsulation (outer CE, inner Not-ECT).
    pub ecn_drops: u64,
    /// Largest reordering seen at an exit, in packets of sequence space: a replay window of
    /// `max_reorder + 1` would have dropped nothing.
    pub max_reorder: u64,
}

/// Element indices of each tunnel's entry and exit per travel direction (`[up, down]`).
pub struct Tunnels {
    names: Vec<(String, TunnelKind)>,
    entries: Vec<[u32; 2]>,
    exits: Vec<[u32; 2]>,
}

impl Tunnels {
    /// Adds an entry and an exit element per direction for every tunnel; `push` appends an
    /// element and returns its index.
    pub fn build(specs: &[TunnelSpec], mut push: impl FnMut(TunnelElement) -> u32) -> Tunnels {
        let mut t = Tunnels { names: Vec::new(), entries: Vec::new(), exits: Vec::new() };
        for (i, spec) in specs.iter().enumerate() {
            let window = spec.replay_window.unwrap_or(spec.kind.default_replay_window());
            let sa = |way: usize| OUTER_KEY_BASE | (((i * 2 + way) as u32) << 16);
            let entry = |way| TunnelElement::Entry(TunnelEntry { kind: spec.kind, overhead: spec.overhead, sport: spec.sport, key: sa(way), last_seq: 0 });
            let exit = || TunnelElement::Exit(Box::new(TunnelExit { kind: spec.kind, replay: ReplayWindow::new(window), replay_drops: 0, ecn_drops: 0, flow_drops: Default::default(), max_reorder: 0 }));
            t.entries.push([push(entry(0)), push(entry(1))]);
            t.exits.push([push(exit()), push(exit())]);
            t.names.push((spec.name.clone(), spec.kind));
        }
        t
    }

    /// The index of the tunnel called `name` (names are checked when the scenario is read).
    pub fn index(&self, name: &str) -> usize {
        self.names.iter().position(|(n, _)| n == name).expect("tunnel names are validated")
    }
    /// Entry elements of tunnel `i` per travel direction: the first of an endpoint's own hops.
    pub fn entries(&self, i: usize) -> [u32; 2] {
        self.entries[i]
    }
    /// Exit elements of tunnel `i` per travel direction: the last hops before the far end.
    pub fn exits(&self, i: usize) -> [u32; 2] {
        self.exits[i]
    }

    /// One summary per tunnel; `element` looks an element index up.
    pub fn summary<'a>(&self, element: impl Fn(u32) -> &'a TunnelElement) -> Vec<TunnelSummary> {
        let mut out = Vec::with_capacity(self.names.len());
        for (i, (name, kind)) in self.names.iter().enumerate() {
            let mut s = TunnelSummary { name: name.clone(), kind: kind.name(), packets: 0, replay_drops: 0, ecn_drops: 0, max_reorder: 0 };
            for way in 0..2 {
                if let TunnelElement::Entry(e) = element(self.entries[i][way]) {
                    s.packets += e.last_seq;
                }
                if let TunnelElement::Exit(x) = element(self.exits[i][way]) {
                    s.replay_drops += x.replay_drops;
                    s.ecn_drops += x.ecn_drops;
                    s.max_reorder = s.max_reorder.max(x.max_reorder);
                }
            }
            out.push(s);
        }
        out
    }
}

/// Checks the `[[tunnels]]` entries and the `tunnel` references (`refs`: key path and name);
/// returns the offending key and the problem.
pub fn validate<'a>(specs: &[TunnelSpec], refs: impl Iterator<Item = (String, &'a str)>) -> Result<(), (String, String)> {
    if specs.len() > MAX_TUNNELS {
        return Err(("tunnels".into(), format!("{} entries; at most {MAX_TUNNELS}", specs.len())));
    }
    for (i, t) in specs.iter().enumerate() {
        let k = |name: &str| format!("tunnels[{i}].{name}");
        if t.name.is_empty() {
            return Err((k("name"), "must not be empty".into()));
        }
        if specs[..i].iter().any(|o| o.name == t.name) {
            return Err((k("name"), format!("'{}' is used by an earlier [[tunnels]] entry", t.name)));
        }
        if let Some(o) = t.overhead.filter(|&o| o > MAX_OVERHEAD) {
            return Err((k("overhead"), format!("{o} is out of range 0..{MAX_OVERHEAD} bytes")));
        }
        let max = t.kind.max_replay_window();
        match t.replay_window {
            Some(w) if w > 0 && max == 0 => {
                return Err((k("replay_window"), format!("{} carries no sequence number; replay_window must be 0", t.kind.name())));
            }
            Some(w) if w > max => {
                return Err((k("replay_window"), format!("{w} is above the largest {} window, {max} packets", t.kind.name())));
            }
            _ => {}
        }
    }
    for (key, name) in refs {
        if !specs.iter().any(|t| t.name == name) {
            let known: Vec<&str> = specs.iter().map(|t| t.name.as_str()).collect();
            let known = if known.is_empty() { "there are no [[tunnels]] entries".to_string() } else { format!("known: {}", known.join(", ")) };
            return Err((key, format!("no [[tunnels]] entry named '{name}' ({known})")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ecn::*;

    /// Out-of-line slots through a tunnel (`crate::packet_ext`): a packet whose slot holds
    /// only the tag gives it back at the exit; an ACK with SACK blocks keeps its slot, and
    /// gives it back when the anti-replay window drops it. Runs on this thread's own store.
    #[test]
    fn the_exit_gives_slots_back() {
        use crate::event::EventQueue;
        use crate::packet::{Direction, Kind, SackBlock};
        use crate::packet_ext;
        use crate::time::Time;
        let spec = TunnelSpec { name: "t".into(), kind: TunnelKind::Ipsec, overhead: None, sport: SourcePort::Fixed, replay_window: Some(1) };
        let mut elements = Vec::new();
        let tunnels = Tunnels::build(&[spec], |e| {
            elements.push(e);
            elements.len() as u32 - 1
        });
        let (entry, exit) = (tunnels.entries(0)[1] as usize, tunnels.exits(0)[1] as usize);
        let (mut q, mut out) = (EventQueue::default(), Vec::new());
        let in_use = || packet_ext::with(|s| s.in_use());
        let before = in_use();
        let mut through = |i: usize, pkt: Packet, out: &mut Vec<Packet>| {
            elements[i].receive(pkt, &mut ElementCtx { id: i as u32, now: Time::ZERO, events: &mut q, out });
        };
        let mut acks = Vec::new();
        for k in 0..3 {
            let mut a = Packet::new(0, Direction::Reverse, Kind::Ack, 66);
            a.tcp.seq = k;
            if k > 0 {
                a.set_sacks(&[SackBlock { start: 5, end: 6 + k }]);
            }
            through(entry, a, &mut out);
            acks.push(out.pop().unwrap());
        }
        assert_eq!(in_use(), before + 3, "every tunnelled packet carries its tag out of line");
        // In order: seq 1 (tag only) leaves without a slot; seq 3 (SACK blocks) keeps one.
        through(exit, acks[0], &mut out);
        assert!(!out[0].has_ext());
        through(exit, acks[2], &mut out);
        assert!(out[1].has_ext());
        assert_eq!(out[1].sacks()[0], SackBlock { start: 5, end: 8 });
        assert_eq!(in_use(), before + 2);
        // Seq 2 after 3, behind a 1-packet window: dropped, its slot given back.
        through(exit, acks[1], &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(in_use(), before + 1);
        out[1].release();
        assert_eq!(in_use(), before);
    }

    /// Every tunnel kind's decapsulation keeps the ECN invariant across the tunnel: for each
    /// inner codepoint and each outer codepoint the network may legally make of the encapsulated
    /// one, the delivered codepoint is a legal transition from the inner one at entry.
    #[test]
    fn decapsulation_keeps_the_ecn_invariant() {
        let all = [NotEct, Ect0, Ect1, Ce];
        for kind in [TunnelKind::Wireguard, TunnelKind::Ipsec, TunnelKind::Fou, TunnelKind::Ipip] {
            for inner in all {
                for outer in all.into_iter().filter(|&o| Ecn::transition_allowed(encapsulate(inner), o)) {
                    if let Some(got) = kind.decapsulate(outer, inner) {
                        assert!(Ecn::transition_allowed(inner, got), "{kind:?}: inner {inner:?} outer {outer:?} -> {got:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn rfc6040_decapsulation_table() {
        // RFC 6040 Figure 4: rows are the arriving inner header, columns the arriving outer
        // header in the order Not-ECT, ECT(0), ECT(1), CE; None = drop.
        let outer = [NotEct, Ect0, Ect1, Ce];
        let table = [
            (NotEct, [Some(NotEct), Some(NotEct), Some(NotEct), None]),
            (Ect0, [Some(Ect0), Some(Ect0), Some(Ect1), Some(Ce)]),
            (Ect1, [Some(Ect1), Some(Ect1), Some(Ect1), Some(Ce)]),
            (Ce, [Some(Ce), Some(Ce), Some(Ce), Some(Ce)]),
        ];
        for (inner, row) in table {
            for (o, want) in outer.iter().zip(row) {
                assert_eq!(rfc6040_decapsulate(*o, inner), want, "inner {inner:?}, outer {o:?}");
                assert_eq!(TunnelKind::Fou.decapsulate(*o, inner), want);
                assert_eq!(TunnelKind::Wireguard.decapsulate(*o, inner), want.or(Some(inner)));
            }
        }
        // xfrm propagates only CE, and only onto an ECN-capable inner header.
        assert_eq!(TunnelKind::Ipsec.decapsulate(Ce, NotEct), Some(NotEct));
        assert_eq!(TunnelKind::Ipsec.decapsulate(Ce, Ect1), Some(Ce));
        assert_eq!(TunnelKind::Ipsec.decapsulate(Ect1, Ect0), Some(Ect0));
        assert_eq!(TunnelKind::Ipsec.decapsulate(NotEct, Ect0), Some(Ect0));
    }

    #[test]
    fn encapsulation_copies_ecn_except_ce() {
        for (inner, outer) in [(NotEct, NotEct), (Ect0, Ect0), (Ect1, Ect1), (Ce, Ect0)] {
            assert_eq!(encapsulate(inner), outer);
        }
    }

    #[test]
    fn per_packet_overheads() {
        // A full 1500-byte inner packet: ESP pads 1502 to 1504 → 20 + 8 + 16 + 4 + 12 = 60.
        assert_eq!(TunnelKind::Ipsec.overhead(1500), 60);
        // A 52-byte pure ACK: 54 → 64, 12 bytes of trailer → 68.
        assert_eq!(TunnelKind::Ipsec.overhead(52), 68);
        assert_eq!(TunnelKind::Ipsec.overhead(1486), 58);
        // WireGuard: unpadded at or above its 1420-byte MTU, padded to 16 below it.
        assert_eq!(TunnelKind::Wireguard.overhead(1500), 60);
        assert_eq!(TunnelKind::Wireguard.overhead(1420), 60);
        assert_eq!(TunnelKind::Wireguard.overhead(52), 72);
        assert_eq!(TunnelKind::Wireguard.overhead(64), 60);
        assert_eq!((TunnelKind::Fou.overhead(52), TunnelKind::Ipip.overhead(1500)), (28, 20));
    }

    fn run(window: u32, seqs: &[u64]) -> Vec<Replay> {
        let mut w = ReplayWindow::new(window);
        seqs.iter().map(|&s| w.check(s)).collect()
    }
    use Replay::*;

    #[test]
    fn window_accepts_in_order_and_reordered_within_it() {
        assert_eq!(run(32, &[1, 2, 3, 4, 5]), vec![Accept; 5]);
        // 40 overtakes 9..39; those arrive late but within 32 of the edge (40 − 9 = 31).
        let mut seqs: Vec<u64> = (1..=8).collect();
        seqs.push(40);
        seqs.extend(9..40);
        assert!(run(32, &seqs).iter().all(|&r| r == Accept));
    }

    #[test]
    fn window_drops_older_than_its_left_edge() {
        // Edge 40, window 32: the left edge is 9; 8 is too old, 9 is not.
        let got = run(32, &[40, 8, 9]);
        assert_eq!(got, vec![Accept, TooOld, Accept]);
        // A window of W keeps exactly W numbers: highest − W + 1 ..= highest.
        assert_eq!(run(4, &[10, 7, 6]), vec![Accept, Accept, TooOld]);
        // Window 1: only in-order arrival survives.
        assert_eq!(run(1, &[1, 3, 2, 4]), vec![Accept, Accept, TooOld, Accept]);
    }

    #[test]
    fn window_drops_duplicates() {
        assert_eq!(run(32, &[1, 2, 2, 5, 3, 3, 5, 1]), vec![Accept, Accept, Duplicate, Accept, Accept, Duplicate, Duplicate, Duplicate]);
        // A jump larger than the ring clears every old bit.
        assert_eq!(run(8192, &[1, 20_000, 19_000, 19_000, 11_808, 11_809]), vec![Accept, Accept, Accept, Duplicate, TooOld, Accept]);
    }

    #[test]
    fn window_zero_accepts_everything() {
        assert_eq!(run(0, &[5, 5, 1, 1]), vec![Accept; 4]);
    }

    #[test]
    fn sequence_numbers_extend_across_32_bit_wrap() {
        let mut w = ReplayWindow::new(64);
        for s in [u32::MAX as u64 - 1, u32::MAX as u64] {
            assert_eq!(w.check(s), Accept);
        }
        assert_eq!(w.extend(3), (1 << 32) + 3);
        assert_eq!(w.extend(u32::MAX - 10), u32::MAX as u64 - 10);
        assert_eq!(w.check(w.extend(3)), Accept);
        assert_eq!(w.extend(u32::MAX - 10), u32::MAX as u64 - 10, "a late pre-wrap number stays below the edge");
        assert_eq!(ReplayWindow::new(64).extend(7), 7);
    }
}
