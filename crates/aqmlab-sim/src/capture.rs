//! Packet captures: classic pcap files of what the client side and the server side of the
//! dumbbell send and receive, as the studies' `tcpdump -s 128` on the client's and the
//! server's interface (`cli.pcap`, `srv.pcap`; shared/docs/ecosystem.md §2).
//!
//! The taps sit at the hosts: a packet is captured when its endpoint emits it and when it
//! reaches the end of its route, in the file of that end's side (client hosts are the
//! `src_host`/`dst_host` numbers ≥ 1, the server side is host 0). A data packet the
//! bottleneck drops is thus in the sender's file only, and a CE mark shows only in the
//! receiver's. Tunnels, netem and ECN rewriting act between the taps, so the files show
//! the inner (clear-text) packets, as a capture on the end hosts does.
//!
//! Format: classic pcap (not pcapng), little-endian, nanosecond timestamps (magic
//! `0xa1b23c4d`, version 2.4), link type 1 (Ethernet). Every frame is built from the
//! packet's modelled header fields; payload bytes are zeros, cut at the snap length
//! (`DEFAULT_SNAPLEN`, the studies' 128 bytes: every header fits). IPv4 and TCP/UDP/ICMP
//! checksums are real (a zero payload adds nothing to a ones'-complement sum), so
//! Wireshark's checksum validation passes when turned on.
//!
//! Wire numbers (deterministic, documented in docs/pcap.md):
//! - client host h (≥ 1): IPv4 `10.0.0.0 + h` (10.0.0.1, ...), MAC `02:00:0a:00:00:h`;
//!   server side: `10.0.1.1`, MAC `02:00:0a:00:01:01`.
//! - ports: the client end uses `32768 + id mod 28232` (Linux's ephemeral range) for
//!   endpoint id `id`; the server end 5201 for TCP and UDP sources (iperf3's), 2112 for irtt
//!   probes (irtt's), 5004 for media (RTP, RTCP multiplexed). Ping probes are ICMP echo
//!   (identifier = id, sequence = the probe's sequence number).
//! - TCP: the model counts segments; byte sequence numbers are `ISN + 1 + seg × MSS`, and
//!   an ACK (or SACK edge) past a transfer's short last segment is its end byte. ISNs are
//!   derived from the seed and endpoint id (splitmix64), per direction. SYNs carry MSS
//!   (MSS + 12, the timestamp option's room), SACK-permitted, timestamps and window scale 7,
//!   in Linux's option order; other segments carry NOP, NOP, timestamps (the model's 1 ms
//!   TSval; data echo the receiver's latest TSval, ACKs its `ts_recent`) and NOP, NOP,
//!   SACK blocks. Windows: 64240 on the SYN, 65160 on the SYN-ACK,
//!   then 502 (× 128) from the data sender and from the receiver `rwnd` (× 128, capped at
//!   65535) or 65535 when the model does not limit it.
//! - ECN: the IP ECN field and DSCP as the packet carries them; ECE and CWR as modelled
//!   (RFC 3168). L4S (`ecn = "l4s"`) connections show AccECN (RFC 9768): AE+CWR+ECE on the
//!   SYN, (AE,CWR,ECE) = (0,1,0) on the SYN-ACK (a Not-ECT SYN), and on every later segment
//!   the three bits as the ACE counter, `(5 + CE packets received) mod 8` (the data sender
//!   receives no CE, so its ACE stays 5). SCE connections show ESCE in the AE (former NS)
//!   bit (draft-morton-tsvwg-sce).
//!
//! Streaming: each side has a 1 MiB buffered file writer; a frame is encoded into a stack
//! buffer and written, with no allocation per packet. The only state per endpoint id is
//! the end byte of a finite transfer (a `Vec<u64>` grown as ids appear).

use crate::endpoint::{Endpoints, Wire};
use crate::packet::{Direction, EcnMode, Kind, Packet};
use crate::time::Time;
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// tcpdump's `-s 128` of the studies' captures.
pub const DEFAULT_SNAPLEN: u32 = 128;
/// Largest snap length accepted (tcpdump's default, 262144).
pub const MAX_SNAPLEN: u32 = 262_144;
/// Nanosecond-resolution pcap magic (written little-endian).
pub const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest header stack a frame has: Ethernet 14 + IPv4 20 + TCP 60, plus an RTP header.
const MAX_HEADERS: usize = 14 + 20 + 60 + 12;
/// TCP window scale the hosts advertise (Linux's with the default rmem).
const WSCALE: u8 = 7;

/// What to capture and where.
#[derive(Clone, Debug)]
pub struct CaptureSpec {
    /// The client side's file (`cli.pcap`).
    pub cli: PathBuf,
    /// The server side's file (`srv.pcap`).
    pub srv: PathBuf,
    /// Names of the endpoints to capture (`[[flows]]` copies, probes, media, UDP sources,
    /// workloads, transient flows); empty captures every one.
    pub flows: Vec<String>,
    /// Bytes kept of each frame.
    pub snaplen: u32,
}

/// The capture's entry in `summary.json`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CaptureSummary {
    pub snaplen: u32,
    /// The captured endpoints' names (empty: all).
    pub flows: Vec<String>,
    pub cli_packets: u64,
    pub srv_packets: u64,
    /// The first write error, if any (the files are then incomplete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A classic pcap file being written.
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    pub packets: u64,
    error: Option<io::Error>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header.
    pub fn new(mut out: W, snaplen: u32) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone, sigfigs: 0.
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, snaplen, packets: 0, error: None })
    }

    /// One record: `headers` (the frame's first bytes) followed by zero payload up to the
    /// frame's length `frame_len`, cut at the snap length.
    pub fn record(&mut self, t: Time, headers: &[u8], frame_len: u32) {
        if self.error.is_some() {
            return;
        }
        let incl = frame_len.min(self.snaplen);
        let mut rh = [0u8; 16];
        rh[0..4].copy_from_slice(&((t.0 / 1_000_000_000) as u32).to_le_bytes());
        rh[4..8].copy_from_slice(&((t.0 % 1_000_000_000) as u32).to_le_bytes());
        rh[8..12].copy_from_slice(&incl.to_le_bytes());
        rh[12..16].copy_from_slice(&frame_len.to_le_bytes());
        let head = (incl as usize).min(headers.len());
        let mut res = self.out.write_all(&rh).and_then(|_| self.out.write_all(&headers[..head]));
        let mut zeros = incl as usize - head;
        static ZEROS: [u8; 4096] = [0; 4096];
        while res.is_ok() && zeros > 0 {
            let n = zeros.min(ZEROS.len());
            res = self.out.write_all(&ZEROS[..n]);
            zeros -= n;
        }
        match res {
            Ok(()) => self.packets += 1,
            Err(e) => self.error = Some(e),
        }
    }

    /// Flushes; returns the first error of the whole file.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// splitmix64: a fixed hash for the ISNs (no random stream is consumed, so a capture does
/// not change the run).
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The initial sequence numbers of endpoint `id`'s data sender and receiver.
pub fn isns(seed: u64, id: u32) -> [u32; 2] {
    let h = splitmix64(seed ^ splitmix64(id as u64 + 1));
    [h as u32, (h >> 32) as u32]
}

/// A host's IPv4 address: client hosts `10.0.0.0 + h`, the server side `10.0.1.1`.
pub fn ip_of(host: u16) -> [u8; 4] {
    if host == 0 {
        [10, 0, 1, 1]
    } else {
        let a = 0x0a00_0000u32 + host as u32;
        a.to_be_bytes()
    }
}

fn mac_of(host: u16) -> [u8; 6] {
    let ip = ip_of(host);
    [0x02, 0x00, ip[0], ip[1], ip[2], ip[3]]
}

/// Ones'-complement sum of 16-bit big-endian words (an odd last byte padded with zero).
fn sum16(mut acc: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = chunks.remainder() {
        acc += (*b as u32) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// What the encoder needs besides the packet: the endpoint's wire identity and state.
#[derive(Clone, Copy, Debug)]
pub struct FrameCtx {
    pub wire: Wire,
    /// ISNs of the data sender and of the receiver.
    pub isn: [u32; 2],
    /// Byte offset of the end of a finite transfer once its short last segment was seen.
    pub data_end: u64,
}

const TCP_SYN: u8 = 0x02;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_ECE: u8 = 0x40;
const TCP_CWR: u8 = 0x80;

/// Encodes the frame of `pkt` into `buf`: returns (header bytes written, frame length).
/// The frame is `buf[..n]` followed by zero payload up to the frame length.
pub fn encode(pkt: &Packet, cx: &FrameCtx, buf: &mut [u8; MAX_HEADERS]) -> (usize, u32) {
    let (src, dst) = (pkt.src_host, pkt.dst_host);
    buf[0..6].copy_from_slice(&mac_of(dst));
    buf[6..12].copy_from_slice(&mac_of(src));
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let client_port = (32768 + pkt.flow % 28232) as u16;
    let port = |host: u16, server: u16| if host == 0 { server } else { client_port };
    // The layer-4 header after the 20-byte IPv4 header at offset 14.
    let l4 = 34;
    let (proto, l4_len, payload): (u8, usize, u32) = match (cx.wire, pkt.kind) {
        (Wire::Tcp { mss, ecn, rwnd_bytes, receiver_opens }, _) => {
            let n = encode_tcp(pkt, cx, mss, ecn, rwnd_bytes, receiver_opens, port(src, 5201), port(dst, 5201), &mut buf[l4..]);
            let payload = if pkt.kind == Kind::Data { pkt.tcp.payload } else { 0 };
            (6, n, payload)
        }
        (Wire::Icmp, _) => {
            let b = &mut buf[l4..l4 + 8];
            b[0] = if pkt.kind == Kind::ProbeReply { 0 } else { 8 };
            b[1] = 0;
            b[2..4].fill(0);
            b[4..6].copy_from_slice(&(pkt.flow as u16).to_be_bytes());
            b[6..8].copy_from_slice(&(pkt.tcp.seq as u16).to_be_bytes());
            let ck = fold(sum16(0, b));
            b[2..4].copy_from_slice(&ck.to_be_bytes());
            (1, 8, pkt.wire_len.saturating_sub(14 + 20 + 8))
        }
        (Wire::Udp { server_port }, kind) => {
            let payload = pkt.wire_len.saturating_sub(14 + 20 + 8);
            let mut n = 8;
            if kind == Kind::Media && payload >= 12 {
                // RTP (RFC 3550): V=2, marker, dynamic PT 96, sequence, 90 kHz timestamp
                // of the frame's capture time, SSRC = the endpoint id.
                let r = &mut buf[l4 + 8..l4 + 20];
                r[0] = 0x80;
                r[1] = 96 | if pkt.tcp.cwr { 0x80 } else { 0 };
                r[2..4].copy_from_slice(&(pkt.tcp.seq as u16).to_be_bytes());
                r[4..8].copy_from_slice(&((pkt.origin().0 * 9 / 100_000) as u32).to_be_bytes());
                r[8..12].copy_from_slice(&pkt.flow.to_be_bytes());
                n += 12;
            }
            let (sp, dp) = (port(src, server_port), port(dst, server_port));
            let len = (8 + payload) as u16;
            let b = &mut buf[l4..l4 + 8];
            b[0..2].copy_from_slice(&sp.to_be_bytes());
            b[2..4].copy_from_slice(&dp.to_be_bytes());
            b[4..6].copy_from_slice(&len.to_be_bytes());
            b[6..8].fill(0);
            // Checksum over the pseudo-header and the bytes written (the rest is zeros).
            let mut acc = sum16(0, &ip_of(src));
            acc = sum16(acc, &ip_of(dst));
            acc += 17 + len as u32;
            acc = sum16(acc, &buf[l4..l4 + n]);
            let ck = match fold(acc) {
                0 => 0xffff,
                c => c,
            };
            buf[l4 + 6..l4 + 8].copy_from_slice(&ck.to_be_bytes());
            (17, 8, payload)
        }
    };
    let ip_len = 20 + l4_len as u32 + payload;
    let ip = &mut buf[14..34];
    ip[0] = 0x45;
    ip[1] = (pkt.dscp << 2) | pkt.ecn as u8;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[4..6].fill(0); // identification
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = 64;
    ip[9] = proto;
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&ip_of(src));
    ip[16..20].copy_from_slice(&ip_of(dst));
    let ck = fold(sum16(0, ip));
    ip[10..12].copy_from_slice(&ck.to_be_bytes());
    if proto == 6 {
        // TCP checksum: pseudo-header + header (the zero payload adds nothing).
        let mut acc = sum16(0, &ip_of(src));
        acc = sum16(acc, &ip_of(dst));
        acc += 6 + (l4_len as u32 + payload);
        acc = sum16(acc, &buf[l4..l4 + l4_len]);
        buf[l4 + 16..l4 + 18].copy_from_slice(&fold(acc).to_be_bytes());
    }
    let written = match (cx.wire, pkt.kind) {
        (Wire::Udp { .. }, Kind::Media) if payload >= 12 => l4 + 20,
        _ => l4 + l4_len,
    };
    (written, 14 + ip_len)
}

/// The TCP header (with options) of `pkt` at the start of `b`; returns its length. The
/// checksum is left zero (the caller fills it in).
#[allow(clippy::too_many_arguments)]
fn encode_tcp(pkt: &Packet, cx: &FrameCtx, mss: u32, ecn: EcnMode, rwnd_bytes: Option<u64>, receiver_opens: bool, sport: u16, dport: u16, b: &mut [u8]) -> usize {
    let t = &pkt.tcp;
    let [isn_s, isn_r] = cx.isn;
    let mss64 = mss as u64;
    let byte = |seg: u32| (seg as u64 * mss64).min(cx.data_end);
    let from_sender = pkt.dir == Direction::Forward;
    let l4s = ecn == EcnMode::L4s;
    // The segment's role on the wire. A connection the receiver opens (a workload whose
    // client requests data from the server: `receiver_opens`) shows its request SYN as the
    // client's SYN, the data sender's SYN as the SYN-ACK and the receiver's SYN-ACK as the
    // handshake's final ACK.
    #[derive(PartialEq)]
    enum Role {
        Syn,
        SynAck,
        Data,
        Ack,
    }
    let role = match (pkt.kind, pkt.dir, receiver_opens) {
        (Kind::Syn, Direction::Forward, false) | (Kind::Syn, Direction::Reverse, true) => Role::Syn,
        (Kind::Syn, Direction::Forward, true) | (Kind::SynAck, _, false) => Role::SynAck,
        (Kind::Data, ..) => Role::Data,
        _ => Role::Ack,
    };
    let (isn_mine, isn_peer) = if from_sender { (isn_s, isn_r) } else { (isn_r, isn_s) };
    // (seq, ack, flags, window)
    let (seq, ack, mut flags, window): (u32, u32, u8, u16) = match role {
        Role::Syn => (isn_mine, 0, TCP_SYN, 64240),
        Role::SynAck => (isn_mine, isn_peer.wrapping_add(1), TCP_SYN | TCP_ACK, 65160),
        Role::Data => {
            let psh = if t.payload < mss { TCP_PSH } else { 0 };
            (isn_s.wrapping_add(1).wrapping_add(byte(t.seq) as u32), isn_r.wrapping_add(1), TCP_ACK | psh, 502)
        }
        Role::Ack if pkt.kind != Kind::Ack => (isn_r.wrapping_add(1), isn_s.wrapping_add(1), TCP_ACK, 502),
        Role::Ack => {
            let win = rwnd_bytes.map_or(65535, |w| (w >> WSCALE).min(65535) as u16);
            (isn_r.wrapping_add(1), isn_s.wrapping_add(1).wrapping_add(byte(t.seq) as u32), TCP_ACK, win)
        }
    };
    // Byte 12's low bit is AE (the former NS).
    let mut ae = false;
    match (&role, l4s) {
        (Role::Syn, true) => {
            flags |= TCP_ECE | TCP_CWR;
            ae = true;
        }
        // RFC 3168 §6.1.1: ECE and CWR on the SYN, ECE on the SYN-ACK.
        (Role::Syn, false) if ecn.is_on() => flags |= TCP_ECE | TCP_CWR,
        (Role::SynAck, false) if ecn.is_on() => flags |= TCP_ECE,
        (Role::Syn | Role::SynAck, false) => {}
        // RFC 9768 Table 2: the SYN-ACK's reply to a Not-ECT SYN.
        (Role::SynAck, true) => flags |= TCP_CWR,
        (_, true) => {
            let ace = if from_sender { 5 } else { (5 + t.ce_count) & 7 };
            ae = ace & 4 != 0;
            if ace & 2 != 0 {
                flags |= TCP_CWR;
            }
            if ace & 1 != 0 {
                flags |= TCP_ECE;
            }
        }
        (_, false) => {
            if t.ece {
                flags |= TCP_ECE;
            }
            if t.cwr {
                flags |= TCP_CWR;
            }
            ae = ecn == EcnMode::Sce && !from_sender && t.esce;
        }
    }
    b[0..2].copy_from_slice(&sport.to_be_bytes());
    b[2..4].copy_from_slice(&dport.to_be_bytes());
    b[4..8].copy_from_slice(&seq.to_be_bytes());
    b[8..12].copy_from_slice(&ack.to_be_bytes());
    b[14..16].copy_from_slice(&window.to_be_bytes());
    b[16..20].fill(0); // checksum, urgent pointer
    let mut n = 20;
    let mut put = |bytes: &[u8], n: &mut usize| {
        b[*n..*n + bytes.len()].copy_from_slice(bytes);
        *n += bytes.len();
    };
    if matches!(role, Role::Syn | Role::SynAck) {
        let m = ((mss + 12).min(65535) as u16).to_be_bytes();
        put(&[2, 4, m[0], m[1], 4, 2, 8, 10], &mut n);
        put(&t.ts_val.to_be_bytes(), &mut n);
        put(&t.ts_ecr.to_be_bytes(), &mut n);
        put(&[1, 3, 3, WSCALE], &mut n);
    } else {
        if t.ts_val != 0 || t.ts_ecr != 0 {
            put(&[1, 1, 8, 10], &mut n);
            put(&t.ts_val.to_be_bytes(), &mut n);
            put(&t.ts_ecr.to_be_bytes(), &mut n);
        }
        let sacks = pkt.sacks();
        let k = (t.sack_len as usize).min(sacks.len());
        if pkt.kind == Kind::Ack && k > 0 {
            put(&[1, 1, 5, 2 + 8 * k as u8], &mut n);
            let base = isn_s.wrapping_add(1);
            for s in &sacks[..k] {
                put(&base.wrapping_add(byte(s.start) as u32).to_be_bytes(), &mut n);
                put(&base.wrapping_add(byte(s.end) as u32).to_be_bytes(), &mut n);
            }
        }
    }
    b[12] = ((n / 4) as u8) << 4 | ae as u8;
    b[13] = flags;
    n
}

/// The taps of a run: both files, the endpoint selection and the transfers' end bytes.
pub struct Capture {
    cli: PcapWriter<BufWriter<File>>,
    srv: PcapWriter<BufWriter<File>>,
    seed: u64,
    /// Per endpoint group (`Endpoints::group`): captured or not; empty: all.
    selected: Vec<bool>,
    flows: Vec<String>,
    snaplen: u32,
    /// End byte of each finite transfer seen so far, by endpoint id (u64::MAX: not yet).
    data_end: Vec<u64>,
}

impl Capture {
    /// Opens both files; `Err` names the unknown flow or the file that could not be created.
    pub fn open(spec: &CaptureSpec, endpoints: &Endpoints, seed: u64) -> Result<Capture, String> {
        if spec.snaplen == 0 || spec.snaplen > MAX_SNAPLEN {
            return Err(format!("pcap snap length {}: expected 1..={MAX_SNAPLEN}", spec.snaplen));
        }
        let names = endpoints.group_names();
        let mut selected = Vec::new();
        if !spec.flows.is_empty() {
            selected = vec![false; names.len()];
            for f in &spec.flows {
                match names.iter().position(|n| n == f) {
                    Some(i) => selected[i] = true,
                    None => return Err(format!("pcap flow '{f}': no such flow (known: {})", names.join(", "))),
                }
            }
        }
        let open = |p: &PathBuf| -> Result<PcapWriter<BufWriter<File>>, String> {
            let f = File::create(p).map_err(|e| format!("pcap {}: {e}", p.display()))?;
            PcapWriter::new(BufWriter::with_capacity(1 << 20, f), spec.snaplen).map_err(|e| format!("pcap {}: {e}", p.display()))
        };
        Ok(Capture { cli: open(&spec.cli)?, srv: open(&spec.srv)?, seed, selected, flows: spec.flows.clone(), snaplen: spec.snaplen, data_end: Vec::new() })
    }

    /// A packet at a host: `emitted` by its endpoint (its source's side) or delivered (its
    /// destination's side).
    #[inline]
    pub fn tap(&mut self, pkt: &Packet, now: Time, endpoints: &Endpoints, emitted: bool) {
        let Some((group, wire)) = endpoints.wire(pkt.flow) else { return };
        if !self.selected.is_empty() && !self.selected.get(group as usize).copied().unwrap_or(false) {
            return;
        }
        let id = pkt.flow as usize;
        let mut data_end = u64::MAX;
        if let Wire::Tcp { mss, .. } = wire {
            if self.data_end.len() <= id {
                self.data_end.resize(id + 1, u64::MAX);
            }
            if pkt.kind == Kind::Data && pkt.tcp.payload < mss {
                self.data_end[id] = pkt.tcp.seq as u64 * mss as u64 + pkt.tcp.payload as u64;
            }
            data_end = self.data_end[id];
        }
        let cx = FrameCtx { wire, isn: isns(self.seed, pkt.flow), data_end };
        let mut buf = [0u8; MAX_HEADERS];
        let (n, len) = encode(pkt, &cx, &mut buf);
        let host = if emitted { pkt.src_host } else { pkt.dst_host };
        let file = if host == 0 { &mut self.srv } else { &mut self.cli };
        file.record(now, &buf[..n], len);
    }

    /// Flushes both files.
    pub fn finish(mut self) -> CaptureSummary {
        let error = [self.cli.finish().err(), self.srv.finish().err()].into_iter().flatten().next().map(|e| e.to_string());
        CaptureSummary { snaplen: self.snaplen, flows: self.flows, cli_packets: self.cli.packets, srv_packets: self.srv.packets, error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Ecn, SackBlock};

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
    }

    /// An ACK with two SACK blocks, timestamps, ECE, on an RFC 3168 flow, byte for byte.
    #[test]
    fn ack_with_sack_and_timestamps_is_encoded_byte_exact() {
        let mut p = Packet::new(3, Direction::Reverse, Kind::Ack, 66 + 4 + 16);
        p.src_host = 0;
        p.dst_host = 2;
        p.ecn = Ecn::NotEct;
        p.tcp.seq = 10; // cumulative ACK: segment 10
        p.tcp.ece = true;
        p.tcp.ts_val = 0x0102_0304;
        p.tcp.ts_ecr = 0x0a0b_0c0d;
        p.set_sacks(&[SackBlock { start: 12, end: 14 }, SackBlock { start: 15, end: 16 }]);
        let cx = FrameCtx { wire: Wire::Tcp { mss: 1000, ecn: EcnMode::Rfc3168, rwnd_bytes: None, receiver_opens: false }, isn: [1000, 5000], data_end: u64::MAX };
        let mut buf = [0u8; MAX_HEADERS];
        let (n, len) = encode(&p, &cx, &mut buf);
        // Hand-built: Ethernet, IPv4 (10.0.1.1 -> 10.0.0.2, len 72, DF, TTL 64, proto 6),
        // TCP 5201 -> 32771, seq 5001, ack 1001 + 10 * 1000 = 11001, data offset 13 words,
        // ACK|ECE, window 65535, options NOP NOP TS(val, ecr) NOP NOP SACK 18 bytes with
        // [13001, 15001) and [16001, 17001).
        let want = "02 00 0a 00 00 02 02 00 0a 00 01 01 08 00 \
            45 00 00 48 00 00 40 00 40 06 25 ae 0a 00 01 01 0a 00 00 02 \
            14 51 80 03 00 00 13 89 00 00 2a f9 d0 50 ff ff 00 00 00 00 \
            01 01 08 0a 01 02 03 04 0a 0b 0c 0d \
            01 01 05 12 00 00 32 c9 00 00 3a 99 00 00 3e 81 00 00 42 69";
        let mut want = want.split_whitespace().map(|h| u8::from_str_radix(h, 16).unwrap()).collect::<Vec<u8>>();
        // The checksum, computed independently here over the pseudo-header and the segment.
        let mut acc: u32 = 0x0a00 + 0x0101 + 0x0a00 + 0x0002 + 6 + 52;
        for c in want[34..].chunks(2) {
            acc += u16::from_be_bytes([c[0], c[1]]) as u32;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        want[34 + 16..34 + 18].copy_from_slice(&(!(acc as u16)).to_be_bytes());
        assert_eq!(hex(&buf[..n]), hex(&want));
        assert_eq!(len, 86);
        // The IPv4 header checksum verifies (sums to 0xffff).
        assert_eq!(fold(sum16(0, &buf[14..34])), 0);
    }

    #[test]
    fn accecn_ace_counts_ce_and_sce_uses_the_ae_bit() {
        let cx = |ecn| FrameCtx { wire: Wire::Tcp { mss: 1448, ecn, rwnd_bytes: None, receiver_opens: false }, isn: [0, 0], data_end: u64::MAX };
        let mut buf = [0u8; MAX_HEADERS];
        let mut ack = Packet::new(0, Direction::Reverse, Kind::Ack, 66);
        ack.dst_host = 1;
        for (ce, bits) in [(0u32, 0b101u8), (1, 0b110), (3, 0b000), (10, 0b111)] {
            ack.tcp.ce_count = ce;
            encode(&ack, &cx(EcnMode::L4s), &mut buf);
            let got = (buf[34 + 12] & 1) << 2 | (buf[34 + 13] & TCP_CWR != 0) as u8 * 2 | (buf[34 + 13] & TCP_ECE != 0) as u8;
            assert_eq!(got, bits, "ce {ce}");
        }
        ack.tcp.ce_count = 0;
        ack.tcp.esce = true;
        encode(&ack, &cx(EcnMode::Sce), &mut buf);
        assert_eq!((buf[34 + 12] & 1, buf[34 + 13] & (TCP_ECE | TCP_CWR)), (1, 0));
        encode(&ack, &cx(EcnMode::Rfc3168), &mut buf);
        assert_eq!(buf[34 + 12] & 1, 0, "ESCE only on SCE connections");
    }

    #[test]
    fn last_short_segment_bounds_acks_and_the_file_is_pcap_ns() {
        let mut w = PcapWriter::new(Vec::new(), 96).unwrap();
        let cx = FrameCtx { wire: Wire::Tcp { mss: 1448, ecn: EcnMode::Off, rwnd_bytes: Some(1 << 20), receiver_opens: false }, isn: [u32::MAX, 7], data_end: 2 * 1448 + 100 };
        let mut ack = Packet::new(0, Direction::Reverse, Kind::Ack, 66);
        ack.dst_host = 1;
        ack.tcp.seq = 3;
        let mut buf = [0u8; MAX_HEADERS];
        let (n, len) = encode(&ack, &cx, &mut buf);
        // ISN u32::MAX + 1 wraps to 0: the ACK is the transfer's end byte, 2996.
        assert_eq!(u32::from_be_bytes(buf[34 + 8..34 + 12].try_into().unwrap()), 2 * 1448 + 100);
        assert_eq!(u16::from_be_bytes([buf[34 + 14], buf[34 + 15]]), 8192, "1 MiB >> 7");
        w.record(Time(1_500_000_123), &buf[..n], len);
        let mut data = Packet::new(0, Direction::Forward, Kind::Data, 1514);
        data.src_host = 1;
        data.tcp.payload = 1448;
        let (n, len) = encode(&data, &cx, &mut buf);
        assert_eq!((n, len), (54, 1502), "no timestamps: 20-byte TCP header");
        w.record(Time(2_000_000_000), &buf[..n], len);
        let f = w.into_inner();
        assert_eq!(&f[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(f[16..20].try_into().unwrap()), 96);
        // First record: 1 s + 500000123 ns, 54 bytes kept of 54 (no timestamps set).
        assert_eq!(&f[24..40], &[1, 0, 0, 0, 0x7b, 0x65, 0xcd, 0x1d, 54, 0, 0, 0, 54, 0, 0, 0]);
        // Second: cut at 96 of 1502, zero payload after the headers.
        let r2 = 24 + 16 + 54;
        assert_eq!(u32::from_le_bytes(f[r2 + 8..r2 + 12].try_into().unwrap()), 96);
        assert_eq!(u32::from_le_bytes(f[r2 + 12..r2 + 16].try_into().unwrap()), 1502);
        assert_eq!(f.len(), r2 + 16 + 96);
        assert!(f[r2 + 16 + 54..].iter().all(|&b| b == 0));
    }
}
