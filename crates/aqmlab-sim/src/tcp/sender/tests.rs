use super::*;
use crate::cc::{Reno, TsoSegs};
use super::queue::*;
use crate::event::EventQueue;
use crate::packet::Direction;
use crate::packet::{Ecn, EcnMode};

thread_local! {
    /// Set: every ACK takes the segment-by-segment walk of `tcp_clean_rtx_queue` (the
    /// reference for the in-order path).
    pub(super) static GENERAL_ACK_WALK_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// ACKs the in-order path handled on this thread.
    pub(super) static IN_ORDER_ACKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The last traced ACK's whole `AckState` (flags, rate sample, RTT candidates), printed.
    pub(super) static LAST_ACK_STATE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// A sender driven by hand-made ACKs (segment numbers; no timestamps echoed unless set).
struct Harness {
    tx: TcpSender,
    q: EventQueue,
    sent: Vec<Packet>,
    /// When each packet of `sent` left.
    sent_at: Vec<Time>,
}

impl Harness {
    fn new(ecn: EcnMode) -> Self {
        Self::with(TcpConfig { ecn, ..TcpConfig::default() })
    }
    fn with(cfg: TcpConfig) -> Self {
        Self::with_cc(cfg, Cc::Reno(Reno))
    }
    fn with_cc(cfg: TcpConfig, cc: Cc) -> Self {
        let mut h = Harness { tx: TcpSender::new(0, cfg, cc), q: EventQueue::default(), sent: vec![], sent_at: vec![] };
        h.with_ctx(0, |tx, ctx| tx.start(ctx));
        let synack = Packet::new(0, Direction::Reverse, Kind::SynAck, 52);
        h.with_ctx(10, |tx, ctx| tx.on_packet(&synack, ctx));
        h
    }
    fn with_ctx(&mut self, now_ms: u64, f: impl FnOnce(&mut TcpSender, &mut EndpointCtx)) {
        let mut out = vec![];
        let mut ctx = EndpointCtx { flow: 0, now: Time::from_millis(now_ms), events: &mut self.q, out: &mut out };
        f(&mut self.tx, &mut ctx);
        self.sent_at.extend(out.iter().map(|_| Time::from_millis(now_ms)));
        self.sent.extend(out);
    }
    /// Runs the sender's timers due up to `until`; returns the time of the last one run.
    fn run_timers(&mut self, until: Time) -> Option<Time> {
        let mut last = None;
        while self.q.peek_time().is_some_and(|t| t <= until) {
            let (at, ev) = self.q.pop().unwrap();
            if let crate::event::Event::Flow(_, t) = ev {
                let mut out = vec![];
                let mut ctx = EndpointCtx { flow: 0, now: at, events: &mut self.q, out: &mut out };
                self.tx.on_timer(t, &mut ctx);
                self.sent_at.extend(out.iter().map(|_| at));
                self.sent.extend(out);
                last = Some(at);
            }
        }
        last
    }
    /// An ACK of `ack` with SACK blocks `sacks` (the first may be a D-SACK).
    fn ack(&mut self, now_ms: u64, ack: u32, sacks: &[(u32, u32)], ece: bool) {
        let mut p = Packet::new(0, Direction::Reverse, Kind::Ack, 52);
        p.tcp.seq = ack;
        p.tcp.ece = ece;
        let blocks: Vec<SackBlock> = sacks.iter().map(|&(start, end)| SackBlock { start, end }).collect();
        p.set_sacks(&blocks);
        self.with_ctx(now_ms, |tx, ctx| tx.on_ack(&p, ctx));
        p.release();
    }
}

/// Segments 0 and 1 of the initial window missing, 2..9 SACKed: RACK marks them lost and
/// Recovery retransmits. Returns the harness and the number of retransmissions.
fn into_recovery(ecn: EcnMode) -> (Harness, u32) {
    let mut h = Harness::new(ecn);
    assert_eq!(h.tx.tp.snd_nxt, 10);
    for k in 3..=10 {
        h.ack(20, 0, &[(2, k)], false);
    }
    assert_eq!(h.tx.tp.ca_state, CaState::Recovery);
    let r = h.tx.stats.retransmits as u32;
    assert!(r >= 1);
    (h, r)
}

#[test]
fn an_ecn_echo_in_recovery_blocks_the_dsack_undo() {
    let run = |ece: bool| {
        let (mut h, r) = into_recovery(EcnMode::Rfc3168);
        let reduced = h.tx.tp.ssthresh;
        // The first retransmissions arrive (ECE set or not), then D-SACKs show that the
        // originals had arrived as well: every retransmission was unnecessary.
        h.ack(21, r, &[(2, 10)], ece);
        h.ack(22, r, &[(0, r), (2, 10)], false);
        assert_eq!(h.tx.undo_retrans, 0);
        (reduced, h.tx.tp.ssthresh, h.tx.tp.cwnd)
    };
    let (reduced, ssthresh, _) = run(false);
    assert!(ssthresh > reduced, "control: the D-SACK undo restores ssthresh");
    let (reduced, ssthresh, cwnd) = run(true);
    assert_eq!(ssthresh, reduced, "ECE: the reduction stays");
    assert!(cwnd <= reduced.max(2));
}

#[test]
fn a_dsack_of_a_sacked_retransmission_takes_it_out_of_flight() {
    let (mut h, r) = into_recovery(EcnMode::Off);
    assert_eq!(r, 2, "both holes retransmitted");
    // The losses are unmarked (as an undo does): the retransmissions stay counted in
    // flight (R without L), and a SACK of segment 1 keeps it so (S|R).
    h.tx.undo_cwnd_reduction(true);
    h.ack(21, 0, &[(1, 10)], false);
    assert_eq!(h.tx.seg(1).flags & (SACKED | RETRANS), SACKED | RETRANS);
    let before = h.tx.tp.retrans_out;
    // The receiver reports segment 1 twice: the retransmission was redundant.
    h.ack(22, 0, &[(1, 2), (1, 10)], false);
    assert_eq!(h.tx.seg(1).flags & RETRANS, 0);
    assert_eq!(h.tx.tp.retrans_out, before - 1);
}

#[test]
fn undo_counts_a_tlp_retransmission_in_flight_and_no_retransmission_means_delayed() {
    let mut h = Harness::new(EcnMode::Off);
    h.tx.tlp_high_seq = NonZeroU32::new(10);
    h.tx.tlp_retrans = true;
    h.tx.init_undo();
    assert_eq!(h.tx.undo_retrans, 1, "the TLP retransmission may still be D-SACKed");
    h.tx.tlp_retrans = false;
    h.tx.init_undo();
    assert_eq!(h.tx.undo_retrans, -1);
    // Nothing retransmitted in the episode (no retrans_stamp): the ACK was merely delayed.
    assert!(h.tx.retrans_stamp.is_none());
    assert!(h.tx.packet_delayed() && h.tx.may_undo());
}

#[test]
fn a_loss_probe_retransmits_the_last_segment_even_if_sacked() {
    let mut h = Harness::with(TcpConfig { size: Some(10 * 1448), ..TcpConfig::default() });
    assert_eq!(h.tx.tp.snd_nxt, 10);
    // Segments 0..8 ACKed, the last one SACKed above a hole at 8 (too few for RACK).
    h.ack(20, 8, &[(9, 10)], false);
    assert_eq!(h.tx.tp.ca_state, CaState::Disorder);
    // Make the flow Open so that a probe is scheduled, then run the probe timer.
    h.tx.set_state(CaState::Open);
    let mut out = vec![];
    let mut ctx = EndpointCtx { flow: 0, now: Time::from_millis(20), events: &mut h.q, out: &mut out };
    assert!(h.tx.schedule_loss_probe(true, &mut ctx));
    h.tx.reorder_timer.cancel();
    let sent = h.sent.len();
    let deadline = h.tx.rto_timer.deadline().unwrap();
    h.run_timers(deadline);
    assert_eq!(h.tx.stats.loss_probes, 1);
    assert_eq!(h.sent[sent].tcp.seq, 9, "skb_rb_last, SACKed or not");
    assert!(h.tx.tlp_retrans && h.tx.tlp_high_seq.map(NonZeroU32::get) == Some(10));
}

#[test]
fn a_paced_new_data_probe_waits_for_pacing() {
    let mut h = Harness::with(TcpConfig { pacing: true, ..TcpConfig::default() });
    // The initial window is ACKed and more data sent; the probe timer then finds the
    // pacing horizon in the future.
    h.ack(20, 10, &[], false);
    let probes = h.tx.stats.loss_probes;
    h.tx.tp.edt = Time::from_secs(100);
    h.tx.tlp_pending = true;
    let mut out = vec![];
    let mut ctx = EndpointCtx { flow: 0, now: Time::from_millis(30), events: &mut h.q, out: &mut out };
    h.tx.send_loss_probe(&mut ctx);
    assert!(out.is_empty(), "nothing may leave before the pacing time");
    assert_eq!(h.tx.stats.loss_probes, probes);
    assert!(h.tx.tlp_high_seq.is_none());
    assert!(h.tx.rto_timer.is_armed() && h.tx.pacing_timer.is_armed());
}

#[test]
fn the_reordering_timer_is_capped_at_the_rto() {
    let mut h = Harness::new(EcnMode::Off);
    // One SACK above a hole: RACK waits a reordering window before marking segment 0.
    h.ack(20, 0, &[(1, 2)], false);
    assert!(h.tx.reorder_timer.is_armed());
    // Re-run the detection with an RTO shorter than the remaining window.
    h.tx.reorder_timer.cancel();
    h.tx.rto = Time::from_micros(500);
    h.tx.rack_advanced = true;
    let mut out = vec![];
    let mut ctx = EndpointCtx { flow: 0, now: Time::from_millis(20), events: &mut h.q, out: &mut out };
    assert!(h.tx.rack_mark_lost(&mut ctx));
    assert_eq!(h.tx.reorder_timer.deadline(), Some(Time::from_millis(20) + Time::from_micros(500)));
}

/// A congestion control that paces at a fixed rate and never changes cwnd, with an optional
/// `tso_segs` hook: the send path alone decides the segments per skb.
struct FixedRate {
    rate: f64,
    cap: Option<TsoSegs>,
    /// Whether the rate is enforced (internal pacing) or only sizes the skbs.
    paced: bool,
}

impl CongestionControl for FixedRate {
    fn name(&self) -> &'static str {
        "fixed-rate"
    }
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        tp.cwnd
    }
    fn cong_avoid(&mut self, _tp: &mut TcpCcState, _acked: u32) {}
    fn pacing_rate(&self, _tp: &TcpCcState) -> Option<f64> {
        Some(self.rate)
    }
    fn needs_pacing(&self) -> bool {
        self.paced
    }
    fn tso_segs(&self, _tp: &TcpCcState) -> Option<TsoSegs> {
        self.cap
    }
}

/// (departure time, segments) of each group of data packets that left at the same instant.
fn bursts(h: &Harness) -> Vec<(Time, usize)> {
    let mut v: Vec<(Time, usize)> = vec![];
    for (&t, _) in h.sent_at.iter().zip(&h.sent).filter(|(_, p)| p.kind == Kind::Data) {
        match v.last_mut() {
            Some((at, n)) if *at == t => *n += 1,
            _ => v.push((t, 1)),
        }
    }
    v
}

/// Linux `tcp_tso_autosize` at hand-computed points (mss 1448):
/// 50 Mbit/s = 6 250 000 B/s >> 10 = 6103 B = 4 segments; 10 Mbit/s: 1220 B = 0 -> floor 2;
/// 1 Gbit/s: 122 070 B, capped at 65 215 B = 45 segments. The 5.18+ allowance
/// 65 215 >> (min_rtt_us >> 9): 0 B at 20 ms (r = 39), 127 B at 5 ms (r = 9: 6230 B, still
/// 4 segments), 32 607 B at 1 ms (r = 1: 10 Mbit/s gives 33 827 B = 23 segments).
#[test]
fn tso_autosize_is_a_millisecond_of_the_pacing_rate() {
    let ms = Time::from_millis;
    let mbit = |m: f64| m * 1e6 / 8.0;
    for allowance in [false, true] {
        assert_eq!(output::tso_autosize(mbit(50.0), 1448, ms(20), 2, allowance), 4);
        assert_eq!(output::tso_autosize(mbit(10.0), 1448, ms(20), 2, allowance), 2);
        assert_eq!(output::tso_autosize(mbit(10.0), 1448, ms(20), 1, allowance), 1, "a CC's min_tso_segs of 1");
        assert_eq!(output::tso_autosize(mbit(1000.0), 1448, ms(20), 2, allowance), 45);
        assert_eq!(output::tso_autosize(mbit(50.0), 1448, ms(5), 2, allowance), 4);
        assert_eq!(output::tso_autosize(0.0, 1448, Time::MAX, 2, allowance), 2, "no RTT sample yet");
    }
    assert_eq!(output::tso_autosize(mbit(10.0), 1448, ms(1), 2, false), 2);
    assert_eq!(output::tso_autosize(mbit(10.0), 1448, ms(1), 2, true), 23);
}

/// The sender reuses `tcp_tso_autosize`'s result while the pacing rate stays on the step it
/// was computed on: every rate of the step gives that result, and the rates just outside it
/// give another (so the step is exactly the set of rates with that result), at both
/// allowances, both floors, short and long min_rtt, below and at the 65 215-byte cap.
#[test]
fn tso_autosize_step_holds_exactly_the_rates_with_its_result() {
    let ms = Time::from_millis;
    let mut checked = 0;
    for allowance in [false, true] {
        for (mss, min_rtt, min_tso) in [(1448, ms(20), 2), (1448, ms(1), 2), (1448, Time::from_micros(600), 1), (536, ms(5), 2), (1448, Time::MAX, 2)] {
            let mut rate = 0.0;
            while rate < 2e8 {
                let c = output::tso_autosize_step(rate, mss, min_rtt, min_tso, allowance);
                let f = |r: f64| output::tso_autosize(r, mss, min_rtt, min_tso, allowance);
                assert_eq!(c.segs, f(rate));
                assert!(c.lo <= rate && rate < c.hi, "rate {rate} outside its own step [{}, {})", c.lo, c.hi);
                // The step's ends and points inside it.
                for r in [c.lo, c.lo + 0.5, (c.lo + c.hi.min(3e8)) / 2.0, c.hi.min(3e8) - 0.25] {
                    if r >= c.lo && r < c.hi {
                        assert_eq!(f(r), c.segs, "rate {r} on the step of {rate}");
                        checked += 1;
                    }
                }
                // Just outside: the quotient bytes / mss differs (the result too unless the
                // floor hides it, so compare without the floor).
                let g = |r: f64| output::tso_autosize(r, mss, min_rtt, 0, allowance);
                if c.lo > 0.0 {
                    assert_ne!(g(c.lo - 0.5), g(c.lo), "step of {rate} could start lower");
                }
                if c.hi.is_finite() {
                    assert_ne!(g(c.hi), g(c.hi - 0.5), "step of {rate} could end higher");
                }
                rate = rate * 1.37 + 1001.3;
            }
        }
    }
    assert!(checked > 1000);
}

/// Pacing at 50 Mbit/s with room in cwnd: every send is one skb of 4 segments (≈ 1 ms of
/// the rate) leaving at one instant, and the next send waits for the whole skb's time,
/// 4 × 1448 B / 6.25 MB/s = 926.72 µs. The application's data sits in 45-segment skbs
/// (`tcp_xmit_size_goal`, 65 215 B), so every 45th segment leaves alone (the rest of an
/// skb), and the next send follows 231.68 µs later. The initial window (first 10 segments,
/// unpaced as `tcp_update_skb_after_send`) leaves in skbs of 4 + 4 + 4. GSO off: one
/// segment every 231.68 µs (whatever the hook says); a congestion control's `AtMost(2)`: two
/// every 463.36 µs; `AtMost(8)` leaves autosize's 4; `Exactly(6)` replaces it (six every
/// 1390.08 µs, above autosize), `Exactly(1)` too.
#[test]
fn a_paced_sender_sends_skbs_of_tso_segs_spaced_by_the_whole_skb() {
    let rate = 50e6 / 8.0;
    for (gso, cap, first, per_send) in [
        (true, None, 12, 4),
        (false, None, 10, 1),
        (false, Some(TsoSegs::Exactly(6)), 10, 1),
        (true, Some(TsoSegs::AtMost(2)), 10, 2),
        (true, Some(TsoSegs::AtMost(8)), 12, 4),
        (true, Some(TsoSegs::Exactly(6)), 12, 6),
        (true, Some(TsoSegs::Exactly(1)), 10, 1),
    ] {
        let cfg = TcpConfig { initial_cwnd: 100, gso, ..TcpConfig::default() };
        let mut h = Harness::with_cc(cfg, Cc::Test(Box::new(FixedRate { rate, cap, paced: true })));
        assert_eq!(h.tx.tso_segs() as usize, per_send);
        h.run_timers(Time::from_millis(30));
        let b = bursts(&h);
        assert_eq!(b[0], (Time::from_millis(10), first), "gso {gso} cap {cap:?}: {:?}", &b[..3]);
        let goal = if gso { 45 } else { 1 };
        let (mut left, mut t, mut prev) = (goal - first % goal, Time::from_millis(10), per_send);
        for (k, &(at, n)) in b.iter().enumerate().skip(1) {
            t += Time::from_secs_f64(prev as f64 * 1448.0 / rate);
            let want = per_send.min(left);
            assert_eq!((at, n), (t, want), "gso {gso} cap {cap:?}: send {k}");
            left = if left == want { goal } else { left - want };
            prev = n;
        }
        assert!(b.len() > 10, "gso {gso} cap {cap:?}: {} sends", b.len());
        assert_eq!(h.tx.stats.data_skbs_sent as usize, first / per_send + b.len() - 1);
    }
}

/// `tcp_tso_should_defer` for an ACK-clocked (unpaced) sender sizing skbs at 50 Mbit/s
/// (4 segments), cwnd 40, ACKs freeing 2 segments an RTT after the window left: it sends
/// at once when its last send is more than 1 ms old; otherwise it waits until a full skb
/// fits or the rest of the send-queue skb does.
#[test]
fn tso_defer_holds_small_sends_until_a_full_skb_fits() {
    let rate = 50e6 / 8.0;
    let cfg = TcpConfig { initial_cwnd: 40, ..TcpConfig::default() };
    let mut h = Harness::with_cc(cfg, Cc::Test(Box::new(FixedRate { rate, cap: None, paced: false })));
    // The initial window leaves at 10 ms in 10 skbs of 4 (quota min(40, 20), tso_segs 4).
    assert_eq!(h.tx.tp.snd_nxt, 40);
    assert_eq!((h.tx.stats.data_skbs_sent, bursts(&h)), (10, vec![(Time::from_millis(10), 40)]));
    // 30 ms: 2 segments free; the last send was 20 ms ago (> 1 ms): no deferral.
    h.ack(30, 2, &[], false);
    assert_eq!(h.tx.tp.snd_nxt, 42);
    // 2 more free, last send just now: quota 2 < 4 segments, < cwnd/3 (13), the head left
    // 20 ms ago (> srtt/2): deferred, and the flow counts as cwnd-limited.
    h.ack(30, 4, &[], false);
    assert_eq!(h.tx.tp.snd_nxt, 42, "deferred");
    assert!(h.tx.tp.cwnd_limited_flag);
    // 4 free: the 3 left of the 45-segment send-queue skb all fit: sent as one skb; the
    // 1 segment left free is deferred again (a new 45-segment skb is at the head).
    h.ack(30, 6, &[], false);
    assert_eq!(h.tx.tp.snd_nxt, 45);
    assert_eq!(h.tx.stats.data_skbs_sent, 12);
    // 2 ms later the last send is old: the 3 free go at once.
    h.ack(32, 8, &[], false);
    assert_eq!(h.tx.tp.snd_nxt, 48);
    assert_eq!(h.tx.stats.data_skbs_sent, 13);
}

/// GSO off: Linux's `tcp_xmit_size_goal` is one MSS, so no skb ever holds more than one
/// segment and nothing is deferred: every freed segment leaves at once.
#[test]
fn without_gso_every_freed_segment_leaves_at_once() {
    let cfg = TcpConfig { initial_cwnd: 40, gso: false, ..TcpConfig::default() };
    let mut h = Harness::with_cc(cfg, Cc::Test(Box::new(FixedRate { rate: 50e6 / 8.0, cap: None, paced: false })));
    assert_eq!(h.tx.stats.data_skbs_sent, 40);
    for (t, ack) in [(30, 2), (30, 4), (30, 6)] {
        h.ack(t, ack, &[], false);
        assert_eq!(h.tx.tp.snd_nxt, 40 + ack);
    }
}

/// `tcp_cwnd_validate` per generation, on the deferral of `tso_defer_holds_small_sends_…`:
/// after the send at 30 ms the window's flag is made false (as a window that ended rwnd- or
/// application-limited leaves it). The next ACK frees 2 segments and TSO deferral sends
/// nothing. Today's code (after Neal Cardwell's Dec-2020 "tcp: fix cwnd-limited bug for TSO
/// deferral where we send nothing") validates anyway and marks the window cwnd-limited; the
/// 5.4 code is only called after a send, so the flag stays false and `cong_avoid` stays
/// gated until something is sent.
#[test]
fn a_deferral_that_sends_nothing_marks_cwnd_limited_only_after_the_dec_2020_fix() {
    use crate::tcp::CwndValidate;
    for (v, expect) in [(CwndValidate::Sticky, true), (CwndValidate::SentOnly2015, false)] {
        let cfg = TcpConfig { initial_cwnd: 40, cwnd_validate: v, ..TcpConfig::default() };
        let mut h = Harness::with_cc(cfg, Cc::Test(Box::new(FixedRate { rate: 50e6 / 8.0, cap: None, paced: false })));
        h.ack(30, 2, &[], false);
        assert_eq!(h.tx.tp.snd_nxt, 42);
        assert!(h.tx.tp.cwnd_limited_flag, "{v:?}: a send that fills cwnd is cwnd-limited");
        h.tx.tp.cwnd_limited_flag = false;
        h.ack(30, 4, &[], false);
        assert_eq!(h.tx.tp.snd_nxt, 42, "{v:?}: deferred");
        assert_eq!(h.tx.tp.cwnd_limited_flag, expect, "{v:?}");
    }
}

/// The 5.4 `tcp_cwnd_validate` rewrites the flag whenever packets_out reaches a new maximum,
/// whatever the send found; today's keeps a cwnd-limited window cwnd-limited. Window of 40,
/// all sent (cwnd-limited); cwnd is raised to 50 and an ACK frees 2: 12 segments may go, the
/// application has only 6 more (a finite transfer of 46): packets_out 44 > 40, in_flight 44 <
/// cwnd 50. 5.4: the flag becomes false; today: it stays true until snd_una passes the window.
#[test]
fn a_new_packets_out_maximum_clears_cwnd_limited_only_in_the_2015_code() {
    use crate::tcp::CwndValidate;
    for (v, expect) in [(CwndValidate::Sticky, true), (CwndValidate::SentOnly2015, false)] {
        let cfg = TcpConfig { initial_cwnd: 40, cwnd_validate: v, size: Some(46 * 1448), gso: false, ..TcpConfig::default() };
        let mut h = Harness::with_cc(cfg, Cc::Test(Box::new(FixedRate { rate: 50e6 / 8.0, cap: None, paced: false })));
        assert_eq!(h.tx.tp.snd_nxt, 40);
        assert!(h.tx.tp.cwnd_limited_flag, "{v:?}");
        h.tx.tp.cwnd = 50;
        h.ack(30, 2, &[], false);
        assert_eq!(h.tx.tp.snd_nxt, 46, "{v:?}: the application's last 6 segments");
        assert_eq!(h.tx.tp.cwnd_limited_flag, expect, "{v:?}");
    }
}

/// Runs `f` and returns its panic message (the test fails if it does not panic).
fn panic_message(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("no invariant violation reported");
    err.downcast_ref::<String>().cloned().unwrap_or_default()
}

/// The end-of-run TCP invariants (`apps::bulk::check_tcp_invariants`): a receiver fed the
/// sender's own segments passes; a segment the sender never sent, a byte delivered twice and a
/// completed transfer with a hole each fail, naming the invariant.
#[test]
fn tcp_invariants_catch_a_broken_receiver() {
    use crate::apps::bulk::check_tcp_invariants;
    use crate::tcp::TcpReceiver;
    let cfg = TcpConfig { size: Some(5 * 1448 + 100), ..TcpConfig::default() };
    let h = Harness::with(cfg.clone());
    let total = h.tx.snd_nxt();
    assert_eq!(total, 6, "the whole 6-segment transfer fits the initial window");
    let mut q = EventQueue::default();
    let feed = |rx: &mut TcpReceiver, q: &mut EventQueue, seqs: &[u32]| {
        let mut out = vec![];
        for &seq in seqs {
            let mut p = h.sent.iter().find(|p| p.kind == Kind::Data && p.tcp.seq == seq).copied().unwrap_or(h.sent[1]);
            p.tcp.seq = seq;
            rx.on_packet(&p, &mut EndpointCtx { flow: 0, now: Time::from_millis(20), events: q, out: &mut out });
        }
    };
    // In order, out of order and duplicated: all fine, and all 5·1448 + 100 bytes delivered.
    let mut rx = TcpReceiver::new(0, &cfg);
    feed(&mut rx, &mut q, &[0, 2, 1, 1, 3, 5, 4]);
    assert_eq!(rx.delivered_bytes, 5 * 1448 + 100);
    check_tcp_invariants("ok", &h.tx, &rx);

    // A segment beyond snd_nxt.
    let mut rx = TcpReceiver::new(0, &cfg);
    feed(&mut rx, &mut q, &[0, 1, 2, 3, 4, 5, 6]);
    let msg = panic_message(|| check_tcp_invariants("f", &h.tx, &rx));
    assert!(msg.starts_with("invariant violated: TCP sequence: flow \"f\""), "{msg}");

    // A segment delivered twice to the application.
    let mut rx = TcpReceiver::new(0, &cfg);
    feed(&mut rx, &mut q, &[0, 1]);
    rx.delivered_bytes += 1448;
    let msg = panic_message(|| check_tcp_invariants("f", &h.tx, &rx));
    assert!(msg.starts_with("invariant violated: TCP delivery: flow \"f\": 4344 bytes delivered to the application for 2 in-order segments of 2896"), "{msg}");

    // The sender completed but the receiver has a hole (segment 2 never delivered).
    let mut rx = TcpReceiver::new(0, &cfg);
    feed(&mut rx, &mut q, &[0, 1, 3, 4, 5]);
    let mut done = Harness::with(cfg.clone());
    done.tx.stats.completed_at = Some(Time::from_millis(30));
    let msg = panic_message(|| check_tcp_invariants("f", &done.tx, &rx));
    assert!(msg.contains("invariant violated: TCP delivery: flow \"f\": the transfer completed with 2896 of 7340 bytes delivered (a hole)"), "{msg}");
}

/// The window invariant: a congestion control that let cwnd reach 0 is reported at the next ACK.
#[test]
fn tcp_window_invariant_catches_a_zero_cwnd() {
    let mut h = Harness::new(EcnMode::Off);
    h.tx.check_cwnd();
    h.tx.tp.cwnd = 0;
    let msg = panic_message(|| h.tx.check_cwnd());
    assert!(msg.starts_with("invariant violated: TCP window: flow 0: cwnd fell to 0"), "{msg}");
}

/// The cache lines that fields at `spans` ((offset, size) pairs, from a line-aligned start)
/// occupy.
pub(crate) fn cache_lines(spans: &[(usize, usize)]) -> std::collections::BTreeSet<usize> {
    spans.iter().flat_map(|&(at, n)| at / 64..=(at + n - 1) / 64).collect()
}

/// Fields of the sender: (offset, size) each.
macro_rules! sender_fields {
    ($($f:ident),*) => { field_spans!(TcpSender, 0; $($f),*) };
}

/// The fields an ACK of a flow in Open reads or writes (with the sends it releases, CUBIC,
/// no SACK, no trace on, no pacing) lie in nine cache lines of the sender: two of CUBIC's,
/// then seven from byte 256: the configuration's tail, the socket, the sender's own per-ACK
/// state, its RTO timer and the first counters (`repr(C)` order); a paced flow's pacing timer
/// adds one. Session 8 brought them from thirteen lines plus CUBIC's two behind a box to
/// twelve; session 11 to ten: RACK's reordering timer, the send-ordered list's ends and
/// `reord_seen` (all used only around losses) moved to the loss state, the pacing timer
/// after the counters, the trace boxed, the ECN CWR flag each new-data skb reads among the
/// per-ACK fields. Session 12: the 16-byte timers let the sampled counters into its last line
/// (and the write-only `ce_echoed` counter is gone). Session 14: nine, the per-ACK fields
/// exactly seven lines (448 bytes from a line's start): the ns-2 agent and the trace boxes out
/// of them behind the `extras` byte, `total_segs` and `tlp_high_seq` as `Option<NonZeroU32>`,
/// RACK's step counts `u8`, `wq_left` `u16`, three configuration flags in its tail padding so
/// that its per-ACK tail starts the sender's fifth line; the sampled counters are in the line
/// after; `extras` and the RTO timer share a line. A field added to the per-ACK group, or a
/// cold one placed among them, fails it.
#[test]
fn an_acks_sender_fields_lie_in_nine_cache_lines() {
    use std::mem::{align_of, offset_of};
    assert_eq!(align_of::<TcpSender>(), 64);
    let mut spans = vec![(offset_of!(TcpSender, cc), 128)];
    spans.extend(field_spans!(TcpConfig, offset_of!(TcpSender, cfg); rto_min, rto_max, mss, header_bytes, pacing_ss_ratio, pacing_ca_ratio, rwnd_packets, ecn, gso, cwnd_validate));
    spans.extend(sender_fields!(
        tp, sb, retransmit_hint, ts_in_order_from, highest_sack, flow, phase, app_open, queue_cwr, extras, total_segs, last_seg_payload,
        rack_end_seq, rack_mstamp, rack_rtt, rack_last_delivered, reo_wnd_steps, reo_wnd_persist, rack_advanced, rack_dsack_seen, tlp_pending,
        wq_left, reordering, rcv_tsecr, tlp_high_seq, ce_count_seen, sce_count_seen, rtt_seq, mdev, mdev_max, rttvar, rto, backoff, peer_ts,
        max_packets_out, cwnd_usage_seq, tso_step, first_tx_time, rto_timer
    ));
    spans.extend(field_spans!(SenderStats, offset_of!(TcpSender, stats); data_packets_sent, data_skbs_sent));
    let lines = cache_lines(&spans);
    // At most: taking fields out of the group (the timers, to a per-flow table) may only
    // lower the count.
    assert!(lines.len() <= 9, "lines {lines:?}");
    spans.extend(sender_fields!(pacing_timer));
    let paced = cache_lines(&spans);
    assert!(paced.len() <= 10, "lines with pacing {paced:?}");
    // A timer's event tests `extras`, then (an RTO or probe timer) the timer: one line, which
    // is all that most of them (found moved or cancelled) touch.
    let timer = cache_lines(&sender_fields!(extras, rto_timer));
    assert_eq!(timer.len(), 1, "extras and the RTO timer: lines {timer:?}");
}

/// The state `tcp_fastretrans_alert`, PRR and undo read and write on the ACKs of a loss
/// episode (at 1000 flows about half of all ACKs) lies in one cache line of the sender, and
/// what SACK processing and RACK add (the SACK cache, the send-ordered list's ends, the
/// reordering timer) in one more.
#[test]
fn the_loss_state_lies_in_two_cache_lines() {
    let recovery = cache_lines(&sender_fields!(undo_marker, undo_retrans, prior_ssthresh, retrans_stamp, high_seq, prior_cwnd, prr_delivered, prr_out));
    assert_eq!(recovery.len(), 1, "recovery: lines {recovery:?}");
    let sack = cache_lines(&sender_fields!(reorder_timer, sack_cache, ts_head, ts_tail));
    assert_eq!(sack.len(), 1, "SACK and RACK: lines {sack:?}");
}

/// The fields of the sender the sampling pass (`TcpFlow::sample`, every flow at every tick)
/// reads: (offset, size) in `TcpSender`.
pub(crate) fn sampled_fields() -> Vec<(usize, usize)> {
    use crate::cc::TcpCcState;
    use std::mem::offset_of;
    let mut spans = field_spans!(TcpCcState, offset_of!(TcpSender, tp); rate_delivered, rate_interval, srtt, cwnd, mss).to_vec();
    spans.extend(field_spans!(SenderStats, offset_of!(TcpSender, stats); completed_at, retransmits));
    spans
}

/// What the sampling pass reads of the sender lies in two cache lines: the socket's latest
/// delivery-rate sample, srtt, cwnd and MSS (adjacent in `TcpCcState`), and the completion
/// time and the retransmission count (seven lines before session 11, five before session
/// 12: the MSS was the configuration's, srtt and cwnd in two lines of the socket, the rate
/// sample the sender's own, in a fourth).
#[test]
fn what_the_sampling_pass_reads_of_the_sender_lies_in_two_cache_lines() {
    let lines = cache_lines(&sampled_fields());
    assert!(lines.len() <= 2, "lines {lines:?}");
    // The size `TcpCcState`'s doc gives (no padding between its three groups).
    assert_eq!(std::mem::size_of::<crate::cc::TcpCcState>(), 168);
}

/// The send-ordered list as RACK walks it.
fn ts_order(tx: &TcpSender) -> Vec<u32> {
    let mut order = vec![];
    let mut seq = tx.ts_first();
    while seq != NIL {
        order.push(seq);
        seq = tx.ts_after(seq, tx.seg(seq));
    }
    order
}

/// What Linux's `tsorted_sent_queue` holds when no RTO has run: the outstanding segments not
/// SACKed and not marked lost by RACK (lost and not retransmitted since), by last send time,
/// then number.
fn ts_expected(tx: &TcpSender) -> Vec<u32> {
    let mut on: Vec<u32> = (tx.tp.snd_una..tx.tp.snd_nxt).filter(|&s| tx.seg(s).flags & SACKED == 0 && tx.seg(s).flags & (LOST | RETRANS) != LOST).collect();
    on.sort_by_key(|&s| (tx.seg(s).tx_time, s));
    on
}

/// The send-ordered list kept implicit while it is the sequence order: it is, and walks as,
/// `snd_una .. snd_nxt` until a SACK; linked through a loss episode (SACKed segments out,
/// retransmissions at the tail, as Linux's list); implicit again once the cumulative ACK has
/// passed every segment sent before the last out-of-order change, and linked afresh at the
/// next one.
#[test]
fn the_send_ordered_list_is_implicit_only_while_it_is_the_sequence_order() {
    let mut h = Harness::new(EcnMode::Off);
    assert!(h.tx.ts_in_sequence());
    assert_eq!(ts_order(&h.tx), (0..10).collect::<Vec<_>>());
    h.ack(20, 4, &[], false);
    assert!(h.tx.ts_in_sequence());
    assert_eq!(ts_order(&h.tx), (4..h.tx.tp.snd_nxt).collect::<Vec<_>>());
    // Segments 4 and 5 lost, the rest SACKed one by one: RACK marks the holes lost and
    // Recovery retransmits them.
    // (One ACK per millisecond: the expected order breaks send-time ties by number, which
    // holds within one ACK's sends, not across ACKs of the same instant.)
    let top = h.tx.tp.snd_nxt;
    for k in 7..=top {
        h.ack(14 + k as u64, 4, &[(6, k)], false);
        assert!(!h.tx.ts_in_sequence());
        assert_eq!(ts_order(&h.tx), ts_expected(&h.tx), "SACK up to {k}");
    }
    assert_eq!(h.tx.tp.ca_state, CaState::Recovery);
    assert!(h.tx.stats.retransmits >= 1);
    // The holes repaired: the cumulative ACK passes everything sent before the last change.
    let mut now = 15 + top as u64;
    while !h.tx.ts_in_sequence() {
        let nxt = h.tx.tp.snd_nxt;
        h.ack(now, nxt, &[], false);
        assert_eq!(ts_order(&h.tx), ts_expected(&h.tx), "cumulative ACK of {nxt}");
        now += 1;
    }
    let (una, nxt) = (h.tx.tp.snd_una, h.tx.tp.snd_nxt);
    assert!(nxt > una, "new data in flight");
    assert_eq!(ts_order(&h.tx), (una..nxt).collect::<Vec<_>>());
    // The next SACK links the list again, as it stands.
    h.ack(now, una, &[(una + 1, una + 2)], false);
    assert!(!h.tx.ts_in_sequence());
    assert_eq!(ts_order(&h.tx), ts_expected(&h.tx));
    assert!(!ts_order(&h.tx).contains(&(una + 1)));
}

#[test]
fn the_loss_probe_timeout_skips_the_rto_rounding_only_where_it_cannot_win() {
    // tcp_schedule_loss_probe written out: min(PTO, jiffies_up(rto_delta)) when the delta is
    // positive, with both roundings always computed.
    let direct = |srtt: Time, extra: Time, init: Time, delta: Time| {
        let pto = if srtt > Time::ZERO { jiffies_up(Time(2 * srtt.0)) + extra } else { init };
        if delta > Time::ZERO {
            pto.min(jiffies_up(delta))
        } else {
            pto
        }
    };
    let init = Time::from_secs(1);
    let mut rounded_delta_won = 0;
    for srtt_us in [0u64, 1, 999, 1_000, 1_001, 10_500, 20_000, 99_999, 150_000, 600_000] {
        let srtt = Time(srtt_us * 1_000 + srtt_us % 7);
        for extra in [TCP_TIMEOUT_MIN, Time::from_millis(200), Time(200_000_123)] {
            // Deltas around the PTO (both sides of each jiffy boundary) and far from it.
            let pto = direct(srtt, extra, init, Time::ZERO);
            let mut deltas = vec![Time::ZERO, Time(1), Time(999_999), Time(1_000_000), Time::from_secs(120)];
            for d in [-2_000_001i64, -1_000_000, -999_999, -1, 0, 1, 999_999, 1_000_001] {
                deltas.push(Time((pto.0 as i64 + d).max(0) as u64));
            }
            for delta in deltas {
                let want = direct(srtt, extra, init, delta);
                assert_eq!(tlp::loss_probe_timeout(srtt, extra, init, delta), want, "srtt {srtt:?} extra {extra:?} delta {delta:?}");
                rounded_delta_won += (want < pto) as u32;
            }
        }
    }
    // The grid reaches the case where the RTO's rounding is the answer.
    assert!(rounded_delta_won > 0);
}

/// Each data packet's ECN codepoint (decided once per skb, in `transmit`): RFC 3168 §6.1.2
/// and SCE ECT(0) on new data and Not-ECT on retransmissions (Linux `tcp_ecn_send`), L4S
/// ECT(1) on both, none without ECN; and after an ECN echo, CWR on the first segment of the
/// next new skb only (software GSO clears it on the others), every segment ECT(0).
#[test]
fn ecn_codepoints_by_mode_and_cwr_on_the_first_segment_of_an_skb_only() {
    use std::collections::HashSet;
    for (ecn, new, retransmitted) in [
        (EcnMode::Off, Ecn::NotEct, Ecn::NotEct),
        (EcnMode::Rfc3168, Ecn::Ect0, Ecn::NotEct),
        (EcnMode::Sce, Ecn::Ect0, Ecn::NotEct),
        (EcnMode::L4s, Ecn::Ect1, Ecn::Ect1),
    ] {
        let (mut h, _) = into_recovery(ecn);
        h.run_timers(Time::from_secs(3));
        let mut seen = HashSet::new();
        let (mut news, mut retransmissions) = (0, 0);
        for p in h.sent.iter().filter(|p| p.kind == Kind::Data) {
            let first = seen.insert(p.tcp.seq);
            assert_eq!(p.ecn, if first { new } else { retransmitted }, "{ecn:?}: segment {} first sent {first}", p.tcp.seq);
            if first { news += 1 } else { retransmissions += 1 }
        }
        assert!(news >= 10 && retransmissions >= 2, "{ecn:?}: {news} new, {retransmissions} retransmitted");
    }
    let rate = 50e6 / 8.0;
    let cfg = TcpConfig { initial_cwnd: 40, ecn: EcnMode::Rfc3168, ..TcpConfig::default() };
    let mut h = Harness::with_cc(cfg, Cc::Test(Box::new(FixedRate { rate, cap: None, paced: false })));
    let (before, skbs) = (h.sent.len(), h.tx.stats.data_skbs_sent);
    h.ack(30, 12, &[], true);
    let after: Vec<&Packet> = h.sent[before..].iter().filter(|p| p.kind == Kind::Data).collect();
    // Skbs of several segments (4 at 50 Mbit/s): the first one's others must not carry CWR.
    assert!(h.tx.tso_segs() >= 2 && after.len() > (h.tx.stats.data_skbs_sent - skbs) as usize, "{} segments after the echo", after.len());
    assert!(after[0].tcp.cwr && after[1..].iter().all(|p| !p.tcp.cwr));
    assert!(after.iter().all(|p| p.ecn == Ecn::Ect0));
}

/// The in-order ACK path (`clean_rtx_queue_in_order`) against the segment-by-segment walk of
/// `tcp_clean_rtx_queue`: two senders get the same ACKs, one with the walk forced on every
/// ACK. The ACKs are cumulative ACKs of 1 to 5 segments at 1-3 ms steps (so that one ACK
/// covers segments of skbs sent at different times, with different delivery snapshots), and
/// now and then three SACKs of the segments after `snd_una`: RACK marks, retransmissions, the
/// linked send-ordered list, and later ACKs over SACKed and retransmitted segments, which the
/// in-order path must leave to the walk (SACKs over a gap; a clean cumulative ACK below a SACK,
/// while the send-ordered list is linked: without that guard the test panics). After every step (an ACK, or a burst of three SACKs)
/// the last ACK's whole state (`AckState`: flags, rate sample, RTT range), the trace, the
/// socket, RACK, the rate estimator and the scoreboard must be the same, and at the end every
/// packet sent.
#[test]
fn the_in_order_ack_path_leaves_the_state_the_segment_walk_leaves() {
    let run = |walk_only: bool| {
        GENERAL_ACK_WALK_ONLY.with(|c| c.set(walk_only));
        IN_ORDER_ACKS.with(|c| c.set(0));
        let mut h = Harness::new(EcnMode::Off);
        h.tx.trace_acks();
        let mut log = vec![];
        let mut advancing = 0;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut now = 10;
        for step in 0..800u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            now += 1 + x % 3;
            let (una, out) = (h.tx.tp.snd_una, h.tx.tp.packets_out);
            if step % 61 == 30 && out > 5 {
                for k in 2..=4 {
                    h.ack(now, una, &[(una + 1, una + k)], false);
                }
            } else if step % 61 == 45 && out > 8 {
                // One SACK above a gap: the send-ordered list is linked, below dupthresh ...
                h.ack(now, una, &[(una + 3, una + 5)], false);
            } else if step % 61 == 46 && out > 8 {
                // ... then a cumulative ACK of clean segments below it: the in-order path
                // must leave it to the walk while the list is linked (`ts_in_sequence`).
                h.ack(now, una + 2, &[], false);
            } else {
                h.ack(now, una + (1 + (x >> 8) % 5).min(out as u64) as u32, &[], false);
            }
            advancing += (h.tx.tp.snd_una > una) as u32;
            let tx = &h.tx;
            log.push(format!(
                "{:?}\n{}\n{:?}\n{:?}\n{:?}",
                tx.trace,
                LAST_ACK_STATE.with(|c| c.borrow().clone()),
                tx.tp,
                (tx.rack_mstamp, tx.rack_rtt, tx.rack_end_seq, tx.rack_advanced, tx.reo_wnd_steps, tx.first_tx_time, tx.tp.rate_delivered, tx.tp.rate_interval),
                (tx.retransmit_hint, tx.reordering, tx.rto, &tx.sb, tx.ts_head, tx.ts_tail, tx.ts_in_order_from),
            ));
            h.tx.take_ack_trace();
        }
        GENERAL_ACK_WALK_ONLY.with(|c| c.set(false));
        log.push(format!("{:?}", h.sent));
        (log, IN_ORDER_ACKS.with(|c| c.get()), advancing, h.tx.stats.retransmits)
    };
    let (walk, walk_in_order, _, _) = run(true);
    let (fast, in_order, advancing, retransmits) = run(false);
    assert_eq!(walk_in_order, 0, "the reference run walks every ACK");
    assert!(in_order > 400, "the in-order path ran on {in_order} ACKs");
    assert!(in_order < advancing as u64 && retransmits > 5, "ACKs over SACKed or retransmitted segments walked ({in_order} of {advancing}, {retransmits} retransmissions)");
    assert_eq!(walk.len(), fast.len());
    for (i, (w, f)) in walk.iter().zip(&fast).enumerate() {
        assert_eq!(w, f, "step {i}");
    }
}

/// An ACK overtaken on the return path carries older CE and SCE counts than one already
/// processed: it adds no marks and does not move the counts seen back, so the next ACK adds
/// only its own increase; counts that wrap past 2^32 still count forward. (Taken as a wrapped
/// difference, the older count added 2^32 - 1 marks.)
#[test]
fn a_reordered_acks_older_ecn_counts_add_nothing() {
    let mut h = Harness::new(EcnMode::L4s);
    let ack = |h: &mut Harness, now_ms: u64, seq: u32, ce: u32, sce: u32| {
        let mut p = Packet::new(0, Direction::Reverse, Kind::Ack, 52);
        (p.tcp.seq, p.tcp.ce_count, p.tcp.sce_count) = (seq, ce, sce);
        h.with_ctx(now_ms, |tx, ctx| tx.on_ack(&p, ctx));
        (h.tx.tp.delivered_ce, h.tx.tp.delivered_sce)
    };
    assert_eq!(ack(&mut h, 20, 2, 1, 1), (1, 1));
    assert_eq!(ack(&mut h, 21, 2, 0, 0), (1, 1), "the overtaken ACK");
    assert_eq!(ack(&mut h, 22, 3, 3, 2), (3, 2));
    h.tx.ce_count_seen = u32::MAX - 1;
    assert_eq!(ack(&mut h, 23, 4, 1, 2), (6, 2), "u32::MAX - 1 -> 1 is three marks");
}


