use super::*;
use crate::cc::Reno;
use super::queue::*;
use crate::event::EventQueue;
use crate::packet::Direction;
use crate::packet::EcnMode;

/// A sender driven by hand-made ACKs (segment numbers; no timestamps echoed unless set).
struct Harness {
    tx: TcpSender,
    q: EventQueue,
    sent: Vec<Packet>,
}

impl Harness {
    fn new(ecn: EcnMode) -> Self {
        Self::with(TcpConfig { ecn, ..TcpConfig::default() })
    }
    fn with(cfg: TcpConfig) -> Self {
        let mut h = Harness { tx: TcpSender::new(0, cfg, Box::new(Reno)), q: EventQueue::default(), sent: vec![] };
        h.with_ctx(0, |tx, ctx| tx.start(ctx));
        let synack = Packet::new(0, Direction::Reverse, Kind::SynAck, 52);
        h.with_ctx(10, |tx, ctx| tx.on_packet(&synack, ctx));
        h
    }
    fn with_ctx(&mut self, now_ms: u64, f: impl FnOnce(&mut TcpSender, &mut EndpointCtx)) {
        let mut out = vec![];
        let mut ctx = EndpointCtx { flow: 0, now: Time::from_millis(now_ms), events: &mut self.q, out: &mut out };
        f(&mut self.tx, &mut ctx);
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
        for (i, &(start, end)) in sacks.iter().enumerate() {
            p.tcp.sacks[i] = SackBlock { start, end };
        }
        p.tcp.sack_len = sacks.len() as u8;
        self.with_ctx(now_ms, |tx, ctx| tx.on_ack(&p, ctx));
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
    h.tx.tlp_high_seq = Some(10);
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
    assert!(h.tx.tlp_retrans && h.tx.tlp_high_seq == Some(10));
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
