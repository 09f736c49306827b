//! The TCP receiver, as Linux's `tcp_rcv_established`/`__tcp_ack_snd_check` decide ACKs:
//!
//! - one ACK per two full segments received (RFC 1122 §4.2.3.2, RFC 5681 §4.2);
//! - otherwise a delayed ACK after 40 ms (`TCP_DELACK_MIN`);
//! - immediately while in quick-ACK mode (the first 16 ACKs, `TCP_MAX_QUICKACKS`), for
//!   out-of-order or duplicate data, and while or when a hole is filled (RFC 5681 §4.2);
//! - SACK blocks (RFC 2018), the block with the most recent segment first, at most 3;
//! - a D-SACK block first (RFC 2883, Linux `tcp_dsack_set`) on the ACK after a duplicate
//!   segment, below the cumulative ACK or inside an out-of-order block;
//! - TCP timestamps (RFC 7323 §4.3, Linux `tcp_replace_ts_recent`): `ts_recent` takes the
//!   TSval of a segment that starts at or below the last ACKed point (`rcv_wup`) and is not
//!   older than `ts_recent`; every ACK echoes it as TSecr;
//! - RFC 3168 ECN echo: ECE on every ACK from a CE arrival until a segment with CWR.

use super::{EndpointCtx, TcpConfig, TcpSender};
use crate::event::{FlowTimer, Timer};
use crate::packet::{Direction, Ecn, Kind, Packet, SackBlock, MAX_SACK_BLOCKS};
use crate::packet::EcnMode;

/// A contiguous range of out-of-order data held by the receiver.
#[derive(Clone, Copy, Debug)]
struct OooBlock {
    start: u32,
    end: u32,
    payload_bytes: u64,
}

/// One connection's receiver.
///
/// Layout (`repr(C)`, 152 bytes, three cache lines in a flow): what an in-order data packet
/// reads and writes when it sends no ACK (every other one with delayed ACKs) fills the first
/// line, which the sampling pass reads too (`delivered_bytes`); what the ACK adds (the
/// out-of-order list's header, the D-SACK block, the counts it echoes, the header size) the
/// second; the ns-2 sink's box and what only duplicates read the third. With 1000s of flows
/// each line a packet touches is a cache miss (issue #15; session 12: two lines per packet,
/// three before; session 14: one without an ACK, the out-of-order list gated by
/// `has_holes`; tests `an_unacked_data_packets_receiver_fields_lie_in_one_cache_line`,
/// `what_the_sampling_pass_reads_of_a_flow_lies_in_five_cache_lines`).
#[derive(Debug)]
#[repr(C)]
pub struct TcpReceiver {
    delack: Timer,
    /// Payload bytes delivered in order to the application.
    pub delivered_bytes: u64,
    delayed_ack: crate::time::Time,
    /// Next segment expected.
    pub rcv_nxt: u32,
    /// `rcv_nxt` when the last ACK was sent (Linux `rcv_wup`).
    rcv_wup: u32,
    /// TSval to echo (Linux `rx_opt.ts_recent`).
    ts_recent: u32,
    /// Full segments received since the last ACK sent.
    unacked: u32,
    quick: u32,
    mss: u32,
    /// Whether the ns-2 sink (`ns2`, in the third line) runs this connection: the byte every
    /// packet and timer tests instead of the box.
    ns2_on: bool,
    /// Whether `ooo` holds a block: an in-order packet and its ACK read the list (its header
    /// in the second line, its blocks elsewhere) only when it does.
    has_holes: bool,
    ecn: EcnMode,
    /// (CE, SCE) marking of the last data packet, for change-triggered ACKs.
    last_mark_state: (bool, bool),
    ece_latched: bool,
    /// An ECT or CE packet has arrived (Linux TCP_ECN_SEEN).
    ect_seen: bool,
    // What the ACK adds.
    /// Out-of-order ranges above `rcv_nxt`, most recently changed first.
    ooo: Vec<OooBlock>,
    pub acks_sent: u64,
    /// D-SACK block to report on the next ACK (Linux `duplicate_sack[0]`).
    dsack: Option<SackBlock>,
    flow: u32,
    header_bytes: u32,
    /// CE-marked data packets received (exact count, echoed in every ACK).
    pub ce_received: u32,
    /// SCE-marked (ECT(1)) data packets received on an SCE connection (echoed as a count).
    pub sce_received: u32,
    // Read on duplicates, and with the ns-2 profile, only.
    /// The `ns2-2013` profile's ns-2 sink, which then handles every packet and timer (the
    /// public counters above mirror its own). Set only with `ns2_on`.
    ns2: Option<Box<super::ns2::DelAckSink>>,
    /// Duplicate segments received (each reported by a D-SACK).
    pub duplicates: u64,
    max_quickacks: u32,
}

impl TcpReceiver {
    pub fn new(flow: u32, cfg: &TcpConfig) -> Self {
        TcpReceiver {
            ns2_on: cfg.ns2.is_some(),
            ns2: cfg.ns2.map(|_| Box::new(super::ns2::DelAckSink::new(flow, cfg.mss, cfg.size))),
            flow,
            header_bytes: cfg.header_bytes,
            ecn: cfg.ecn,
            delayed_ack: cfg.delayed_ack,
            rcv_nxt: 0,
            ooo: Vec::with_capacity(8),
            has_holes: false,
            unacked: 0,
            quick: cfg.quickacks,
            delack: Timer::default(),
            ece_latched: false,
            ect_seen: false,
            mss: cfg.mss,
            max_quickacks: cfg.quickacks,
            ce_received: 0,
            sce_received: 0,
            last_mark_state: (false, false),
            delivered_bytes: 0,
            acks_sent: 0,
            rcv_wup: 0,
            ts_recent: 0,
            dsack: None,
            duplicates: 0,
        }
    }

    /// Handles a packet arriving from the sender.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        if self.ns2_on {
            if let Some(s) = self.ns2.as_deref_mut() {
                s.on_packet(pkt, ctx);
                self.mirror_ns2();
                return;
            }
        }
        match pkt.kind {
            Kind::Syn => {
                let mut reply = Packet::new(self.flow, Direction::Reverse, Kind::SynAck, self.header_bytes);
                // RFC 3168 §6.1.1: an ECN-setup SYN (ECE+CWR) is answered with ECE.
                reply.tcp.ece = pkt.tcp.ece && pkt.tcp.cwr && self.ecn.is_on();
                // Timestamps on the SYN-ACK (tcp_synack_options): the receiver's clock, the
                // SYN's TSval echoed. Only captures read them.
                reply.tcp.ts_val = TcpSender::ts_of(ctx.now);
                reply.tcp.ts_ecr = pkt.tcp.ts_val;
                ctx.out.push(reply);
            }
            Kind::Data => self.on_data(pkt, ctx),
            Kind::SynAck | Kind::Ack | Kind::ProbeRequest | Kind::ProbeReply | Kind::Media | Kind::MediaFeedback | Kind::Udp => {}
        }
    }

    fn on_data(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let seq = pkt.tcp.seq;
        let is_duplicate = seq < self.rcv_nxt;
        // tcp_replace_ts_recent: the segment passed tcp_sequence (end >= rcv_wup) and starts at
        // or below rcv_wup; PAWS keeps ts_recent from going back.
        if seq <= self.rcv_wup && seq + 1 >= self.rcv_wup && pkt.tcp.ts_val.wrapping_sub(self.ts_recent) as i32 >= 0 {
            self.ts_recent = pkt.tcp.ts_val;
        }
        // Linux tcp_ecn_accept_cwr: CWR clears the latch and is ACKed at once.
        let mut ack_now = false;
        if pkt.tcp.cwr {
            self.ece_latched = false;
            ack_now = true;
        }
        if pkt.ecn == Ecn::Ce && !is_duplicate {
            self.ce_received += 1;
        }
        if self.ecn.is_on() && !is_duplicate {
            // Change-triggered ACKs for exact feedback (RFC 9768 §3.2.2.5.1, DCTCP's
            // receiver): ACK at once when the CE (or SCE) state flips.
            let state = (pkt.ecn == Ecn::Ce, self.ecn == EcnMode::Sce && pkt.ecn == Ecn::Ect1);
            if matches!(self.ecn, EcnMode::L4s | EcnMode::Sce) && state != self.last_mark_state {
                ack_now = true;
            }
            self.last_mark_state = state;
            if state.1 {
                self.sce_received += 1;
            }
            // Linux __tcp_ecn_check_ce (new data only, ECN connections only).
            match pkt.ecn {
                Ecn::Ce => {
                    // RFC 3168 ECE latch (SCE transports use it for CE too); L4S feedback is
                    // the exact counter instead.
                    if self.ecn != EcnMode::L4s && !self.ece_latched {
                        // Better not delay ACKs: the sender may have a very low cwnd.
                        self.quick = self.quick.max(2);
                        self.ece_latched = true;
                    }
                    self.ect_seen = true;
                }
                // ECN-capable traffic that arrives Not-ECT (a retransmission): quick ACKs.
                Ecn::NotEct if self.ect_seen => self.quick = self.quick.max(2),
                Ecn::NotEct => {}
                Ecn::Ect0 | Ecn::Ect1 => self.ect_seen = true,
            }
        }
        // A segment shorter than a full one (the end of a transfer) is ACKed when the
        // application reads it (Linux ICSK_ACK_PUSHED in tcp_measure_rcv_mss/tcp_cleanup_rbuf).
        ack_now |= pkt.tcp.payload < self.mss;
        ack_now |= if seq == self.rcv_nxt {
            let had_holes = self.has_holes;
            self.rcv_nxt += 1;
            self.delivered_bytes += pkt.tcp.payload as u64;
            // Pull in out-of-order data now contiguous.
            if had_holes {
                if let Some(i) = self.ooo.iter().position(|b| b.start == self.rcv_nxt) {
                    let b = self.ooo.remove(i);
                    self.delivered_bytes += b.payload_bytes;
                    self.rcv_nxt = b.end;
                }
                self.has_holes = !self.ooo.is_empty();
            }
            self.unacked += 1;
            // A hole was (partly) filled, or holes remain: ACK at once (RFC 5681 §4.2).
            had_holes
        } else if seq > self.rcv_nxt {
            if self.has_holes && self.ooo.iter().any(|b| b.start <= seq && seq < b.end) {
                // tcp_data_queue_ofo: already queued out of order, D-SACK it.
                self.duplicates += 1;
                self.dsack = Some(SackBlock { start: seq, end: seq + 1 });
            }
            self.insert_ooo(seq, pkt.tcp.payload);
            true
        } else {
            // Duplicate: Linux tcp_send_dupack sends an immediate D-SACK ACK and enters
            // quick-ACK mode.
            self.quick = self.quick.max(self.max_quickacks);
            self.duplicates += 1;
            self.dsack = Some(SackBlock { start: seq, end: seq + 1 });
            true
        };
        if ack_now || self.unacked >= 2 || self.quick > 0 {
            self.send_ack(ctx);
        } else {
            self.delack.arm(ctx.now + self.delayed_ack, ctx.event(FlowTimer::DelayedAck), ctx.events);
        }
    }

    /// Whether `has_holes` says what the out-of-order list holds (checked at the end of every
    /// run by [`crate::apps::bulk::check_tcp_invariants`]): a stale `false` would hide held
    /// blocks from in-order delivery and from the ACKs' SACK blocks.
    pub fn holes_flag_is_consistent(&self) -> bool {
        self.has_holes != self.ooo.is_empty()
    }

    fn mirror_ns2(&mut self) {
        if let Some(s) = self.ns2.as_deref() {
            self.delivered_bytes = s.delivered_bytes;
            self.acks_sent = s.acks_sent;
            self.duplicates = s.duplicates;
            self.ce_received = s.ce_received;
            self.rcv_nxt = s.next.max(1) as u32 - 1;
        }
    }

    fn insert_ooo(&mut self, seq: u32, payload: u32) {
        let p = payload as u64;
        // Extend an adjacent block (and merge if it now touches another), else add a new one.
        let pos = self.ooo.iter().position(|b| b.end == seq || b.start == seq + 1 || (b.start <= seq && seq < b.end));
        let mut blk = match pos {
            Some(i) => {
                let mut b = self.ooo.remove(i);
                if seq >= b.start && seq < b.end {
                    b // already held
                } else {
                    b.start = b.start.min(seq);
                    b.end = b.end.max(seq + 1);
                    b.payload_bytes += p;
                    b
                }
            }
            None => OooBlock { start: seq, end: seq + 1, payload_bytes: p },
        };
        if let Some(j) = self.ooo.iter().position(|b| b.start == blk.end || b.end == blk.start) {
            let o = self.ooo.remove(j);
            blk.start = blk.start.min(o.start);
            blk.end = blk.end.max(o.end);
            blk.payload_bytes += o.payload_bytes;
        }
        self.ooo.insert(0, blk);
        self.has_holes = true;
    }

    #[inline(always)]
    fn send_ack(&mut self, ctx: &mut EndpointCtx) {
        // tcp_build_sack / tcp_established_options: the D-SACK block first, then the
        // out-of-order blocks, at most MAX_SACK_BLOCKS in all.
        let mut blocks = [SackBlock::default(); MAX_SACK_BLOCKS];
        let mut n = 0;
        if let Some(d) = self.dsack.take() {
            blocks[0] = d;
            n = 1;
        }
        let holes: &[OooBlock] = if self.has_holes { &self.ooo } else { &[] };
        for b in holes {
            if n == MAX_SACK_BLOCKS {
                break;
            }
            blocks[n] = SackBlock { start: b.start, end: b.end };
            n += 1;
        }
        let mut ack = Packet::new(self.flow, Direction::Reverse, Kind::Ack, self.header_bytes + if n > 0 { 4 + 8 * n as u32 } else { 0 });
        ack.tcp.seq = self.rcv_nxt;
        ack.tcp.ece = self.ece_latched;
        ack.tcp.ce_count = self.ce_received;
        ack.tcp.sce_count = self.sce_received;
        ack.tcp.esce = self.last_mark_state.1;
        // A new packet has no SACK blocks (`sack_len` 0, no out-of-line slot): most ACKs
        // carry none and skip the call.
        if n > 0 {
            ack.set_sacks(&blocks[..n]);
        }
        ack.tcp.ts_ecr = self.ts_recent;
        // Linux ACKs carry the receiver's own TSval (tcp_established_options); the sender
        // never reads it (its RTT comes from TSecr), captures show it.
        ack.tcp.ts_val = TcpSender::ts_of(ctx.now);
        self.rcv_wup = self.rcv_nxt;
        ctx.out.push(ack);
        self.acks_sent += 1;
        self.unacked = 0;
        self.quick = self.quick.saturating_sub(1);
        self.delack.cancel();
    }

    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if self.ns2_on {
            if let Some(s) = self.ns2.as_deref_mut() {
                s.on_timer(t, ctx);
                self.mirror_ns2();
                return;
            }
        }
        if t == FlowTimer::DelayedAck && self.delack.fire(ctx.now, ctx.event(t), ctx.events) && self.unacked > 0 {
            self.send_ack(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventQueue};
    use crate::time::Time;

    fn data(seq: u32) -> Packet {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1500);
        p.tcp.seq = seq;
        p.tcp.payload = 1448;
        p
    }

    struct Harness {
        rx: TcpReceiver,
        q: EventQueue,
        acks: Vec<Packet>,
    }

    impl Harness {
        fn new(quickacks: u32) -> Self {
            let cfg = TcpConfig { quickacks, ..TcpConfig::default() };
            Harness { rx: TcpReceiver::new(0, &cfg), q: EventQueue::default(), acks: vec![] }
        }
        fn deliver(&mut self, seq: u32, now_ms: u64) -> usize {
            let mut out = vec![];
            let mut ctx = EndpointCtx { flow: 0, now: Time::from_millis(now_ms), events: &mut self.q, out: &mut out };
            self.rx.on_packet(&data(seq), &mut ctx);
            let n = out.len();
            self.acks.extend(out);
            n
        }
    }

    /// `has_holes` follows the out-of-order list through holes opened, widened, merged,
    /// partly and wholly filled, and a duplicate of held data; the ACKs carry the blocks
    /// while there are any and none after.
    #[test]
    fn the_holes_flag_follows_the_out_of_order_list() {
        let mut h = Harness::new(0);
        // The last ACK so far (quick ACKs off: every second in-order segment, every other one
        // at once) carries SACK blocks exactly while the list holds blocks.
        fn check(h: &mut Harness, seq: u32, holes: bool) {
            h.deliver(seq, 0);
            assert!(h.rx.holes_flag_is_consistent(), "after segment {seq}");
            assert_eq!(h.rx.has_holes, holes, "after segment {seq}");
            assert_eq!(h.acks.last().is_some_and(|a| a.tcp.sack_len > 0), holes, "SACK blocks after segment {seq}");
        }
        check(&mut h, 0, false);
        check(&mut h, 1, false);
        check(&mut h, 3, true);
        check(&mut h, 6, true);
        check(&mut h, 4, true);
        check(&mut h, 5, true);
        check(&mut h, 4, true);
        check(&mut h, 2, false);
        assert_eq!(h.rx.rcv_nxt, 7);
        check(&mut h, 7, false);
        check(&mut h, 9, true);
        check(&mut h, 8, false);
        assert_eq!(h.rx.rcv_nxt, 10);
    }

    #[test]
    fn acks_every_second_segment_after_quickacks_and_delays_a_lone_one() {
        let mut h = Harness::new(2);
        assert_eq!(h.deliver(0, 0), 1, "quick ack");
        assert_eq!(h.deliver(1, 0), 1, "quick ack");
        assert_eq!(h.deliver(2, 1), 0);
        assert_eq!(h.deliver(3, 1), 1, "second full segment");
        assert_eq!(h.acks.last().unwrap().tcp.seq, 4);
        assert_eq!(h.deliver(4, 2), 0);
        // The delayed-ACK timer fires 40 ms later (a stale entry from the cancelled timer
        // armed at 1 ms pops first and re-queues itself).
        let mut acked_at = vec![];
        while let Some((t, ev)) = h.q.pop() {
            let Event::Flow(_, timer) = ev else { panic!("{ev:?}") };
            let mut out = vec![];
            h.rx.on_timer(timer, &mut EndpointCtx { flow: 0, now: t, events: &mut h.q, out: &mut out });
            acked_at.extend(out.iter().map(|a| (t, a.tcp.seq)));
        }
        assert_eq!(acked_at, vec![(Time::from_millis(42), 5)]);
    }

    #[test]
    fn out_of_order_data_is_acked_at_once_with_most_recent_sack_block_first() {
        let mut h = Harness::new(0);
        h.deliver(0, 0);
        h.deliver(1, 0);
        assert_eq!(h.deliver(3, 0), 1);
        assert_eq!(h.deliver(6, 0), 1);
        assert_eq!(h.deliver(4, 0), 1);
        let a = h.acks.last().unwrap().tcp;
        assert_eq!(a.seq, 2);
        assert_eq!(a.sack_len, 2);
        let sacks = h.acks.last().unwrap().sacks();
        assert_eq!(sacks[0], SackBlock { start: 3, end: 5 });
        assert_eq!(sacks[1], SackBlock { start: 6, end: 7 });
        // Filling 5 merges both blocks; filling 2 then delivers everything.
        h.deliver(5, 0);
        assert_eq!(h.acks.last().unwrap().sacks()[0], SackBlock { start: 3, end: 7 });
        assert_eq!(h.deliver(2, 0), 1, "hole filled: immediate ACK");
        let a = h.acks.last().unwrap().tcp;
        assert_eq!((a.seq, a.sack_len), (7, 0));
        assert_eq!(h.rx.delivered_bytes, 7 * 1448);
    }

    #[test]
    fn a_short_final_segment_is_acked_at_once() {
        let mut h = Harness::new(0);
        assert_eq!(h.deliver(0, 0), 0, "first full segment waits for a second one");
        let mut last = data(1);
        last.tcp.payload = 100;
        let mut out = vec![];
        h.rx.on_packet(&last, &mut EndpointCtx { flow: 0, now: Time::from_millis(1), events: &mut h.q, out: &mut out });
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].tcp.seq, 2);
        assert_eq!(h.rx.delivered_bytes, 1448 + 100);
    }

    #[test]
    fn ece_is_latched_until_cwr() {
        let cfg = TcpConfig { ecn: EcnMode::Rfc3168, quickacks: 0, ..TcpConfig::default() };
        let mut rx = TcpReceiver::new(0, &cfg);
        let mut q = EventQueue::default();
        let mut out = vec![];
        let mut send = |rx: &mut TcpReceiver, seq: u32, ce: bool, cwr: bool, out: &mut Vec<Packet>| {
            let mut p = data(seq);
            p.ecn = if ce { Ecn::Ce } else { Ecn::Ect0 };
            p.tcp.cwr = cwr;
            rx.on_packet(&p, &mut EndpointCtx { flow: 0, now: Time::ZERO, events: &mut q, out });
        };
        send(&mut rx, 0, true, false, &mut out);
        send(&mut rx, 1, false, false, &mut out);
        send(&mut rx, 2, false, false, &mut out);
        send(&mut rx, 3, false, false, &mut out);
        assert!(out.iter().all(|a| a.tcp.ece), "ECE on every ACK until CWR");
        out.clear();
        send(&mut rx, 4, false, true, &mut out);
        send(&mut rx, 5, false, false, &mut out);
        assert!(!out.is_empty() && out.iter().all(|a| !a.tcp.ece));
        assert_eq!(rx.ce_received, 1);
    }

    fn feed(rx: &mut TcpReceiver, marks: &[Ecn]) -> Vec<Packet> {
        let mut q = EventQueue::default();
        let mut out = vec![];
        for (i, &m) in marks.iter().enumerate() {
            let mut p = data(i as u32);
            p.ecn = m;
            rx.on_packet(&p, &mut EndpointCtx { flow: 0, now: Time::ZERO, events: &mut q, out: &mut out });
        }
        out
    }

    #[test]
    fn l4s_feedback_is_an_exact_ce_count_with_change_triggered_acks() {
        let cfg = TcpConfig { ecn: EcnMode::L4s, quickacks: 0, ..TcpConfig::default() };
        let mut rx = TcpReceiver::new(0, &cfg);
        use Ecn::{Ce, Ect1};
        let acks = feed(&mut rx, &[Ect1, Ect1, Ce, Ce, Ce, Ect1, Ect1, Ect1]);
        // ACKs: 2nd segment (two full), 3rd (CE starts), 4th... (every second), 6th (CE ends), 8th.
        let covered: Vec<(u32, u32)> = acks.iter().map(|a| (a.tcp.seq, a.tcp.ce_count)).collect();
        assert_eq!(covered, vec![(2, 0), (3, 1), (5, 3), (6, 3), (8, 3)]);
        assert!(acks.iter().all(|a| !a.tcp.ece), "no RFC 3168 latch in L4S mode");
    }

    #[test]
    fn sce_marks_are_counted_and_echoed() {
        let cfg = TcpConfig { ecn: EcnMode::Sce, quickacks: 0, ..TcpConfig::default() };
        let mut rx = TcpReceiver::new(0, &cfg);
        use Ecn::{Ect0, Ect1};
        let acks = feed(&mut rx, &[Ect0, Ect1, Ect1, Ect0]);
        assert_eq!(rx.sce_received, 2);
        let last = acks.last().unwrap().tcp;
        assert_eq!(last.sce_count, 2);
        assert!(acks.iter().any(|a| a.tcp.esce));
        assert!(acks.iter().all(|a| !a.tcp.ece));
    }

    /// What a data packet in order that sends no ACK reads and writes (ECN included) lies in
    /// the receiver's first cache line, and what the ACK adds in the second (session 14; in
    /// session 12 the two together filled both lines, so every packet touched two; three
    /// before, when the delayed-ACK timer was 32 bytes and the compiler's order put `rcv_wup`
    /// and `ts_recent` in the third). A per-packet field placed after its line, or a cold one
    /// before it, fails it.
    #[test]
    fn an_unacked_data_packets_receiver_fields_lie_in_one_cache_line() {
        use std::mem::{offset_of, size_of};
        use crate::tcp::sender::tests::cache_lines;
        let packet = field_spans!(TcpReceiver, 0;
            delack, delivered_bytes, delayed_ack, rcv_nxt, rcv_wup, ts_recent, unacked, quick, mss, ns2_on, has_holes, ecn, last_mark_state,
            ece_latched, ect_seen
        );
        assert_eq!(cache_lines(&packet).into_iter().collect::<Vec<_>>(), [0], "packet {packet:?}");
        let ack = field_spans!(TcpReceiver, 0; ooo, acks_sent, dsack, flow, header_bytes, ce_received, sce_received);
        assert_eq!(cache_lines(&ack).into_iter().collect::<Vec<_>>(), [1], "ack {ack:?}");
        assert_eq!(size_of::<Timer>(), 16);
        assert!(offset_of!(TcpReceiver, delivered_bytes) + 8 <= 64, "the sampling pass reads delivered_bytes with the first line");
        // The lines as counted only where the receiver starts one: in a flow, at a line boundary.
        use crate::apps::bulk::TcpFlow;
        assert_eq!((std::mem::align_of::<TcpFlow>(), offset_of!(TcpFlow, receiver) % 64), (64, 0));
    }
}
