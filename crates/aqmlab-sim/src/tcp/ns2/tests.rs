//! Hand-computed expectations from ns-2.35's formulas (tcp.cc, tcp-sack1.cc,
//! scoreboard-rq.cc, tcp-sink.cc); see the module doc of `super`.

use super::sack1::ScoreBoardRq;
use super::*;
use crate::cc::test_state;
use crate::event::{Event, EventQueue};
use crate::packet::{Direction, Kind, Packet, SackBlock};
use crate::tcp::sender::SenderStats;
use crate::tcp::EndpointCtx;

fn agent() -> Sack1Agent {
    let mut a = Sack1Agent::new(0, 1000, 3, Time::from_secs(3), Some(360_000), Ns2Config { window: WINDOW_NOT_LIMITING, seed: 1 });
    a.boot_time = Time::ZERO;
    a
}

#[test]
fn opencwnd_adds_one_per_ack_in_slow_start_and_one_over_cwnd_after() {
    let mut a = agent();
    a.cwnd = 3.0;
    a.ssthresh = 20;
    for _ in 0..17 {
        a.opencwnd();
    }
    assert_eq!(a.cwnd, 20.0);
    a.opencwnd();
    a.opencwnd();
    // 20 + 1/20 + 1/20.05
    assert!((a.cwnd - 20.099_875_311_7).abs() < 1e-9, "{}", a.cwnd);
}

#[test]
fn slowdown_halves_the_window_in_recovery_and_restarts_from_one_on_timeout() {
    let mut a = agent();
    a.cwnd = 17.0;
    a.ssthresh = 10;
    a.slowdown(true, false);
    assert_eq!((a.ssthresh, a.cwnd), (8, 8.5));
    a.slowdown(false, false);
    // int(8.5 / 2) = 4; CLOSE_CWND_RESTART: wnd_restart_ = 1.
    assert_eq!((a.ssthresh, a.cwnd), (4, 1.0));
    a.cwnd = 2.5;
    a.slowdown(true, false);
    // int(1.25) = 1 is raised to the floor of 2.
    assert_eq!((a.ssthresh, a.cwnd), (2, 1.25));
}

#[test]
fn rto_follows_ns2s_tick_estimator() {
    let mut a = agent();
    assert_eq!(a.rtt_timeout(), Time::from_secs(3), "rtxcur_init_");
    // 162 ms sent on a tick boundary: 16 ticks; srtt 16, rttvar 8 (16 << 1 quarters),
    // RTO = (8 x 32 + 128) >> 3 = 48 ticks.
    a.rtt_update(Time::from_millis(162), Time::from_millis(162));
    assert_eq!((a.t_rtt, a.t_srtt, a.t_rttvar), (16, 128, 32));
    assert_eq!(a.rtt_timeout(), Time::from_millis(480));
    // 250 ms sent 5 ms into a tick: (250 + 5) / 10 = 25 ticks; delta 9: srtt 137,
    // rttvar 32 + (9 - 8) = 33; RTO = (264 + 137) >> 3 = 50 ticks.
    a.rtt_update(Time::from_millis(1255), Time::from_millis(250));
    assert_eq!((a.t_rtt, a.t_srtt, a.t_rttvar), (25, 137, 33));
    assert_eq!(a.rtt_timeout(), Time::from_millis(500));
    // 100 ms: delta 10 - 17 = -7: srtt 130, rttvar 33 + (7 - 8) = 32; RTO 48 ticks.
    a.rtt_update(Time::from_millis(2100), Time::from_millis(100));
    assert_eq!((a.t_rtt, a.t_srtt, a.t_rttvar), (10, 130, 32));
    assert_eq!(a.rtt_timeout(), Time::from_millis(480));
    a.t_backoff = 2;
    assert_eq!(a.rtt_timeout(), Time::from_millis(960));
}

#[test]
fn the_sample_counts_the_tick_offset_of_the_send_time() {
    let mut a = agent();
    // Sent 6 ms into a tick: (165 + 6) / 10 = 17 ticks, not 16.
    a.rtt_update(Time::from_millis(171), Time::from_millis(165));
    assert_eq!(a.t_rtt, 17);
    let mut b = agent();
    b.boot_time = Time::from_millis(4);
    b.rtt_update(Time::from_millis(171), Time::from_millis(165));
    // Send time 6 ms + boot 4 ms = a tick boundary: 16 ticks.
    assert_eq!(b.t_rtt, 16);
    // A short RTO is raised to minrto_, times the backoff.
    b.t_rtxcur = Time::from_millis(50);
    b.t_backoff = 4;
    assert_eq!(b.rtt_timeout(), Time::from_millis(800));
}

#[test]
fn scoreboard_offers_holes_below_sacked_blocks_once() {
    let mut s = ScoreBoardRq::default();
    s.update(5, &[(8, 10)]);
    assert!(s.check_update());
    assert_eq!(s.next_retran(), 6);
    s.mark_retran(6);
    assert_eq!(s.next_retran(), 7);
    s.mark_retran(7);
    // Nothing SACKed above 10: no further candidate.
    assert_eq!(s.next_retran(), -1);
    s.update(5, &[(8, 10)]);
    assert!(!s.check_update(), "the same blocks again change nothing");
    s.update(5, &[(12, 13), (8, 10)]);
    assert!(s.check_update());
    assert_eq!(s.next_retran(), 10);
    // The cumulative ACK moves past the first block: it is cleared away.
    s.update(10, &[(12, 13)]);
    assert_eq!(s.blocks(), &[(12, 13)]);
    assert_eq!(s.sack_min, 11);
}

struct Net {
    q: EventQueue,
    out: Vec<Packet>,
}

impl Net {
    fn ctx(&mut self, ms: u64) -> EndpointCtx<'_> {
        self.out.clear();
        EndpointCtx { flow: 0, now: Time::from_millis(ms), events: &mut self.q, out: &mut self.out }
    }
}

fn ack(a: u32, sacks: &[(u32, u32)]) -> Packet {
    let mut p = Packet::new(0, Direction::Reverse, Kind::Ack, 40);
    p.tcp.seq = a;
    let blocks: Vec<SackBlock> = sacks.iter().map(|&(l, r)| SackBlock { start: l, end: r }).collect();
    p.set_sacks(&blocks);
    p
}

#[test]
fn the_syn_ack_opens_windowinit_and_each_ack_grows_cwnd_by_one() {
    let mut a = agent();
    let (mut tp, mut st) = (test_state(1, 1), SenderStats::default());
    let mut n = Net { q: EventQueue::default(), out: vec![] };
    a.start(&mut n.ctx(0), &mut tp, &mut st);
    assert_eq!(n.out.len(), 1);
    assert_eq!((n.out[0].kind, n.out[0].wire_len), (Kind::Syn, 40));
    // ACK of the SYN (ns-2 ack 0): opencwnd then cwnd_ = windowInit_ = 3; packets 1-3.
    a.on_ack(&ack(0, &[]), &mut n.ctx(162), &mut tp, &mut st);
    let seqs: Vec<u32> = n.out.iter().map(|p| p.tcp.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2]);
    assert!(n.out.iter().all(|p| p.kind == Kind::Data && p.wire_len == 1040));
    assert_eq!(a.cwnd, 3.0);
    // The SYN's RTT sample (162 ms, 16 ticks) set the RTO: 480 ms.
    assert_eq!(a.rtt_timeout(), Time::from_millis(480));
    // A delayed ACK for two packets grows cwnd by one (ns-2 counts ACKs, not packets):
    // cwnd 4, window up to ack 2 + 4 = 6: packets 4, 5, 6 (engine 3, 4, 5).
    a.on_ack(&ack(2, &[]), &mut n.ctx(330), &mut tp, &mut st);
    assert_eq!(a.cwnd, 4.0);
    let seqs: Vec<u32> = n.out.iter().map(|p| p.tcp.seq).collect();
    assert_eq!(seqs, vec![3, 4, 5]);
    assert_eq!((tp.cwnd, tp.snd_una, tp.snd_nxt), (4, 2, 6));
    // Packet 1 was timed (sent at 162 ms, 2 ms into a tick): (168 + 2) / 10 = 17 ticks;
    // srtt 128 + 1 = 129, rttvar 32 + (1 - 8) = 25; RTO = (200 + 129) >> 3 = 41 ticks.
    assert_eq!((a.t_rtt, a.t_srtt, a.t_rttvar), (17, 129, 25));
    assert_eq!(a.rtt_timeout(), Time::from_millis(410));
}

#[test]
fn three_sacked_duplicate_acks_retransmit_and_halve() {
    let mut a = agent();
    let (mut tp, mut st) = (test_state(1, 1), SenderStats::default());
    let mut n = Net { q: EventQueue::default(), out: vec![] };
    a.start(&mut n.ctx(0), &mut tp, &mut st);
    a.on_ack(&ack(0, &[]), &mut n.ctx(162), &mut tp, &mut st);
    // Grow to cwnd 10 with ACKs of one packet each: 7 more ACKs (packets 1..=7).
    for k in 1..=7 {
        a.on_ack(&ack(k, &[]), &mut n.ctx(200 + k as u64), &mut tp, &mut st);
    }
    assert_eq!(a.cwnd, 10.0);
    let maxseq = a.maxseq;
    assert_eq!(maxseq, 17, "ack 7 + window 10");
    // Packet 8 is lost; 9, 10, 11 arrive: dupacks of 7 with growing SACK blocks (engine
    // numbering: ns-2 packet s is engine s - 1). The first two send one new packet each
    // (limited transmit), the third retransmits 8 and halves.
    a.on_ack(&ack(7, &[(8, 9)]), &mut n.ctx(300), &mut tp, &mut st);
    assert_eq!(n.out.iter().map(|p| p.tcp.seq).collect::<Vec<_>>(), vec![17]);
    a.on_ack(&ack(7, &[(8, 10)]), &mut n.ctx(301), &mut tp, &mut st);
    assert_eq!(n.out.iter().map(|p| p.tcp.seq).collect::<Vec<_>>(), vec![18]);
    a.on_ack(&ack(7, &[(8, 11)]), &mut n.ctx(302), &mut tp, &mut st);
    assert_eq!(n.out.iter().map(|p| p.tcp.seq).collect::<Vec<_>>(), vec![7], "retransmit of packet 8");
    assert!(a.fastrecov);
    assert_eq!((a.cwnd, a.ssthresh), (5.0, 5));
    // pipe_ = maxseq_ - highest_ack_ - numdupacks_ = 19 - 7 - 3, plus the retransmission.
    assert_eq!(a.pipe, 9);
    assert_eq!(st.fast_recoveries, 1);
    // The ACK that covers everything sent before the loss (recover_ = 19) ends recovery
    // with cwnd_ = 5 (no opencwnd on that ACK).
    a.on_ack(&ack(19, &[]), &mut n.ctx(500), &mut tp, &mut st);
    assert!(!a.fastrecov);
    assert_eq!(a.cwnd, 5.0);
}

#[test]
fn delack_sink_acks_every_second_packet_or_after_100ms_and_gaps_at_once() {
    let mut s = DelAckSink::new(0, 1000, None);
    let mut n = Net { q: EventQueue::default(), out: vec![] };
    let data = |seq: u32| {
        let mut p = Packet::new(0, Direction::Forward, Kind::Data, 1040);
        p.tcp.seq = seq;
        p.tcp.payload = 1000;
        p
    };
    let syn = Packet::new(0, Direction::Forward, Kind::Syn, 40);
    s.on_packet(&syn, &mut n.ctx(0));
    assert_eq!(n.out.len(), 1, "SYN_immediate_ack_");
    assert_eq!(n.out[0].tcp.seq, 0);
    s.on_packet(&data(0), &mut n.ctx(10));
    assert!(n.out.is_empty(), "first in-order packet waits");
    s.on_packet(&data(1), &mut n.ctx(20));
    assert_eq!((n.out.len(), n.out[0].tcp.seq, n.out[0].wire_len), (1, 2, 40), "second packet: ACK");
    s.on_packet(&data(2), &mut n.ctx(30));
    assert!(n.out.is_empty());
    // The timer armed at 30 ms fires at 130 ms (a stale entry from 10 ms pops first).
    let mut acked = vec![];
    while let Some((t, ev)) = n.q.pop() {
        let Event::Flow(_, timer) = ev else { panic!() };
        let mut out = vec![];
        s.on_timer(timer, &mut EndpointCtx { flow: 0, now: t, events: &mut n.q, out: &mut out });
        acked.extend(out.iter().map(|a| (t, a.tcp.seq)));
    }
    assert_eq!(acked, vec![(Time::from_millis(130), 3)]);
    // Packet 4 (engine 3) is lost: packet 5 is ACKed at once with a SACK block for it.
    s.on_packet(&data(4), &mut n.ctx(200));
    let a = n.out[0].tcp;
    assert_eq!((a.seq, a.sack_len, n.out[0].sacks()[0]), (3, 1, SackBlock { start: 4, end: 5 }));
    assert_eq!(n.out[0].wire_len, 48, "40 + 8 per block");
    // The retransmission fills the gap: ACKed at once (RFC2581_immediate_ack_), no blocks.
    s.on_packet(&data(3), &mut n.ctx(300));
    assert_eq!((n.out.len(), n.out[0].tcp.seq, n.out[0].tcp.sack_len), (1, 5, 0));
    assert_eq!(s.delivered_bytes, 5000);
}

#[test]
fn a_timeout_goes_back_to_the_first_unacked_packet_with_cwnd_one_and_doubles_the_rto() {
    let mut a = agent();
    let (mut tp, mut st) = (test_state(1, 1), SenderStats::default());
    let mut n = Net { q: EventQueue::default(), out: vec![] };
    a.start(&mut n.ctx(0), &mut tp, &mut st);
    a.on_ack(&ack(0, &[]), &mut n.ctx(162), &mut tp, &mut st);
    assert_eq!(n.out.len(), 3);
    // No ACK comes back: the timer set with the first data packet (162 ms + RTO 480 ms)
    // fires at 642 ms (earlier entries of the SYN's timer are stale).
    let mut fired = vec![];
    while let Some((t, ev)) = n.q.pop() {
        let Event::Flow(_, timer) = ev else { panic!() };
        let mut out = vec![];
        a.on_timer(&mut EndpointCtx { flow: 0, now: t, events: &mut n.q, out: &mut out }, &mut tp, &mut st);
        if !out.is_empty() {
            fired.push((t, out.iter().map(|p| p.tcp.seq).collect::<Vec<_>>()));
            break;
        }
        let _ = timer;
    }
    assert_eq!(fired, vec![(Time::from_millis(642), vec![0])], "packet 1 again, alone (cwnd 1)");
    // ssthresh = max(int(3 / 2), 2); backoff 2: the next timeout 960 ms later.
    assert_eq!((a.cwnd, a.ssthresh, a.t_backoff), (1.0, 2, 2));
    assert_eq!(a.rtt_timeout(), Time::from_millis(960));
    assert_eq!((st.rto_events, st.retransmits), (1, 1));
}
