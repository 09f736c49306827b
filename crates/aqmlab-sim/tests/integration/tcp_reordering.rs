//! Loss detection that tolerates reordering (RACK-TLP, RFC 8985; Linux tcp_recovery.c),
//! D-SACK (RFC 2883), undo of spurious recoveries (tcp_try_undo_*), tail loss probes.

use aqmlab_sim::cc::CaState;
use aqmlab_sim::packet::{Kind, Packet};
use aqmlab_sim::qdisc::{Enqueued, Fifo, Qdisc, QdiscStats};
use aqmlab_sim::{Simulation, Time};
use std::cell::RefCell;
use std::rc::Rc;

use crate::common;
use common::{assert_conserved, Dumbbell, Flow, Rule};

/// The S6 jitter study path: 50 Mbit/s, 80 ms, a pfifo of three BDPs (no AQM drops to
/// confuse the picture), CUBIC, 15 s; `netem` on the flow's path in both directions.
fn jitter_run(netem: Option<&str>) -> (f64, aqmlab_sim::tcp::sender::SenderStats, u32, u64) {
    let flow = Flow::new("cubic").rtt("80ms");
    let flow = match netem {
        Some(n) => flow.netem(n),
        None => flow,
    };
    let sc = Dumbbell::new("50Mbit", "pfifo limit 1000").duration("15s").flow(flow).build();
    let mut sim = Simulation::new(&sc);
    sim.run_until(Time::from_secs(15) - Time(1));
    let s = sim.sender(0);
    let (stats, reordering) = (s.stats, s.reordering());
    let out = sim.run();
    assert_conserved(&out.summary);
    let f = &out.summary.flows[0];
    (f.goodput_mbps, stats, reordering, out.summary.bottleneck.drops)
}

#[test]
fn cubic_through_2ms_jitter_keeps_most_of_the_link() {
    // ±1 ms of jitter on 0.24 ms packet spacing reorders segments by up to ~8 positions.
    // Linux (RACK, tcp_recovery = 1) waits reo_wnd = min_rtt/4 = 20 ms before calling a hole
    // lost once reordering has been seen: 10 x the 2 ms jitter range, so after the first
    // episode no reordering triggers a recovery, and the flow behaves as without jitter
    // (bounded only by slow-start overshoot into the 3-BDP FIFO): > 80 % of 50 Mbit/s.
    let (plain, ps, _, pdrops) = jitter_run(None);
    let (jit, js, reordering, jdrops) = jitter_run(Some("delay 2ms 1ms"));
    println!(
        "no jitter: goodput {plain:.2} Mbit/s, retransmits {}, recoveries {}, drops {pdrops}; \
         delay 2ms 1ms: goodput {jit:.2} Mbit/s, retransmits {}, recoveries {}, D-SACKed {}, undos {}, \
         RTOs {}, reordering {reordering}, drops {jdrops}",
        ps.retransmits, ps.fast_recoveries, js.retransmits, js.fast_recoveries, js.dsack_segments, js.undos, js.rto_events
    );
    assert!(plain > 40.0, "without jitter {plain}");
    assert!(jit > 40.0, "with jitter {jit} Mbit/s (> 80 % of 50)");
    assert!(jit > 0.9 * plain, "jitter {jit} vs plain {plain}");
    // Few spurious retransmissions: those not covered by real drops, well under 0.1 %.
    let spurious = js.retransmits.saturating_sub(jdrops);
    assert!(spurious * 1000 < js.data_packets_sent, "{spurious} spurious of {}", js.data_packets_sent);
    assert!(reordering > 3, "tp->reordering rose to {reordering}");
    assert_eq!(js.rto_events, 0);
}

/// A pfifo that holds back the first transmission of one segment until `k` packets that
/// arrived after it have left (a single reordering event of depth `k`).
struct HoldOne {
    inner: Fifo,
    seq: u32,
    k: u32,
    held: Option<Packet>,
    passed: u32,
    done: bool,
}

impl Qdisc for HoldOne {
    fn kind(&self) -> &'static str {
        "test-hold-one"
    }
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Enqueued {
        if pkt.kind == Kind::Data && pkt.tcp.seq == self.seq && !self.done {
            self.done = true;
            self.held = Some(pkt);
            // Released after the packets already queued ahead of it and then k more.
            self.k += self.inner.len() as u32;
            return Enqueued::Queued;
        }
        self.inner.enqueue(pkt, now)
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        if self.held.is_some() && (self.passed >= self.k || self.inner.len() == 0) {
            return self.held.take();
        }
        let p = self.inner.dequeue(now);
        if p.is_some() && self.held.is_some() {
            self.passed += 1;
        }
        p
    }
    fn len(&self) -> usize {
        self.inner.len() + self.held.is_some() as usize
    }
    fn backlog_bytes(&self) -> u64 {
        self.inner.backlog_bytes() + self.held.map_or(0, |p| p.wire_len as u64)
    }
    fn stats(&self) -> &QdiscStats {
        self.inner.stats()
    }
    fn stats_mut(&mut self) -> &mut QdiscStats {
        self.inner.stats_mut()
    }
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        self.inner.for_each_packet(f);
        if let Some(p) = &self.held {
            f(p);
        }
    }
}

#[test]
fn a_spurious_fast_recovery_from_one_reordered_segment_is_undone() {
    // Segment 300 overtaken by 10 others (12 ms at 10 Mbit/s): before any reordering was
    // seen, 3 SACKs zero the RACK window (tcp_rack_reo_wnd), so it is marked lost and
    // retransmitted. The original then fills the hole: its ACK echoes the original's
    // timestamp (Eifel, tcp_packet_delayed) and the retransmission comes back D-SACKed, so the
    // recovery is undone and cwnd returns to its value before the recovery.
    let sc = Dumbbell::new("10Mbit", "pfifo limit 1000").duration("10s").flow(Flow::new("cubic").rtt("40ms").rwnd(100000)).build();
    let mut sim = Simulation::new(&sc);
    sim.replace_bottleneck_qdisc(Box::new(HoldOne { inner: Fifo::pfifo(1000), seq: 300, k: 10, held: None, passed: 0, done: false }));
    let mut prev = (CaState::Open, 0u32);
    let mut before_recovery = None;
    let mut after_undo = None;
    let mut t_undo = 0;
    for us in (100..4_000_000u64).step_by(100) {
        sim.run_until(Time(us * 1000));
        let s = sim.sender(0);
        if s.ca_state() == CaState::Recovery && prev.0 != CaState::Recovery && before_recovery.is_none() {
            before_recovery = Some(prev.1);
        }
        if s.stats.undos > 0 && after_undo.is_none() {
            after_undo = Some(s.tp.cwnd);
            t_undo = us;
        }
        prev = (s.ca_state(), s.tp.cwnd);
    }
    let s = sim.sender(0);
    println!(
        "cwnd before recovery {before_recovery:?}, after undo {after_undo:?} at {:.1} ms; retransmits {}, D-SACKed {}, \
         undos {}, recoveries {}, reordering {}, reord_seen {}, reo_wnd {}",
        t_undo as f64 / 1000.0,
        s.stats.retransmits,
        s.stats.dsack_segments,
        s.stats.undos,
        s.stats.fast_recoveries,
        s.reordering(),
        s.reord_seen(),
        s.reo_wnd()
    );
    let (before, after) = (before_recovery.expect("a recovery"), after_undo.expect("an undo"));
    assert_eq!(s.stats.fast_recoveries, 1);
    assert_eq!(s.stats.retransmits, 1, "one spurious retransmission");
    assert_eq!(s.stats.dsack_segments, 1, "the retransmission was D-SACKed");
    assert!(s.stats.undos >= 1);
    assert!(after >= before, "cwnd {after} after undo, {before} before the recovery");
    // The hole was 10 segments below the highest SACK: tp->reordering follows, and RACK
    // keeps a min_rtt/4 window from now on...
    assert!(s.reordering() >= 10, "reordering {}", s.reordering());
    assert!(s.reord_seen() >= 1);
    // ...and the D-SACK (after reordering was seen) added one min_rtt/4 step
    // (tcp_rack_update_reo_wnd).
    assert_eq!(s.reo_wnd(), Time(s.tp.min_rtt.0 / 4 * 2).min(s.srtt()));
    assert_eq!(s.stats.rto_events, 0);
}

/// Runs `size` bytes through a FIFO that drops the first transmission of `seq`, with a
/// receive window of about one BDP so that no queue inflates the RTT; returns
/// (time of the drop, time the retransmission reached the bottleneck, summary of flow 0,
/// min RTT).
fn drop_one(seq: u32, size: u64, rate: &str, rtt: &str, rwnd: u32) -> (Time, Time, aqmlab_sim::tcp::sender::SenderStats, Time) {
    // One segment per send: the bounds below allow one serialisation, not an skb's.
    let sc = Dumbbell::new(rate, "pfifo limit 10000").duration("20s").flow(Flow::new("cubic").rtt(rtt).size(size).rwnd(rwnd).gso(false)).build();
    let mut sim = Simulation::new(&sc);
    let seen: Rc<RefCell<Vec<Time>>> = Rc::default();
    let log = seen.clone();
    sim.replace_bottleneck_qdisc(Rule::new(10_000, move |p: &mut Packet, now, _| {
        if p.tcp.seq == seq {
            log.borrow_mut().push(now);
            return log.borrow().len() > 1;
        }
        true
    }));
    sim.run_until(Time::from_secs(19));
    let s = sim.sender(0);
    let (stats, min_rtt) = (s.stats, s.tp.min_rtt);
    let out = sim.run();
    assert_conserved(&out.summary);
    assert_eq!(out.summary.flows[0].bytes_delivered, size);
    let t = seen.borrow();
    assert_eq!(t.len(), 2, "dropped once, retransmitted once: {t:?}");
    (t[0], t[1], stats, min_rtt)
}

#[test]
fn a_real_loss_is_repaired_within_an_rtt_and_a_reordering_window() {
    // Mid-transfer drop: the segments behind it are SACKed within one RTT; with no
    // reordering seen and 3 SACKs the RACK window is zero, so the retransmission leaves one
    // RTT (+ the serialisation of the SACKed segments) after the drop.
    let (drop_at, rtx_at, st, min_rtt) = drop_one(500, 1448 * 3000, "10Mbit", "20ms", 30_000);
    let gap = rtx_at - drop_at;
    println!("mid-flow drop: retransmitted {:.2} ms after the drop (min RTT {:.2} ms)", gap.as_millis_f64(), min_rtt.as_millis_f64());
    assert!(gap < min_rtt + Time(min_rtt.0 / 4) + Time::from_millis(10), "{gap}");
    assert_eq!((st.retransmits, st.rto_events, st.fast_recoveries), (1, 0, 1));

    // Second-to-last segment of a transfer: only one segment above it gets SACKed, fewer
    // than DupThresh, so RACK waits RACK.rtt + min_rtt/4 (reordering timer) - Linux's
    // early retransmit, where RFC 6675 alone would wait for the RTO.
    let n = 200u32;
    let (drop_at, rtx_at, st, min_rtt) = drop_one(n - 2, 1448 * n as u64, "10Mbit", "40ms", 60_000);
    let gap = rtx_at - drop_at;
    println!("tail-1 drop: retransmitted {:.2} ms after the drop (min RTT {:.2} ms)", gap.as_millis_f64(), min_rtt.as_millis_f64());
    assert!(gap < min_rtt + Time(min_rtt.0 / 4) + Time::from_millis(10), "{gap}");
    assert!(gap > min_rtt, "{gap}");
    assert_eq!((st.retransmits, st.rto_events), (1, 0));
}

#[test]
fn a_lost_tail_is_repaired_by_a_tail_loss_probe_not_a_timeout() {
    // The last two segments of a transfer are dropped: nothing above them can be SACKed, so
    // RACK has nothing to go on. With two segments out the probe timeout is PTO = 2·srtt +
    // TCP_TIMEOUT_MIN (tcp_schedule_loss_probe), re-armed by each ACK: the probe (a copy of
    // the last segment) leaves about one RTT + 2·srtt after the drop, long before the RTO
    // (srtt + 200 ms after the last ACK). Its SACK then lets RACK mark the other one lost.
    let n = 200u32;
    let size = 1448 * n as u64;
    let sc = Dumbbell::new("10Mbit", "pfifo limit 10000").duration("20s").flow(Flow::new("cubic").rtt("40ms").size(size).rwnd(60000)).build();
    let mut sim = Simulation::new(&sc);
    let seen: Rc<RefCell<Vec<(u32, Time)>>> = Rc::default();
    let log = seen.clone();
    sim.replace_bottleneck_qdisc(Rule::new(10_000, move |p: &mut Packet, now, _| {
        if p.tcp.seq >= n - 2 {
            let first = !log.borrow().iter().any(|&(s, _)| s == p.tcp.seq);
            log.borrow_mut().push((p.tcp.seq, now));
            return !first;
        }
        true
    }));
    sim.run_until(Time::from_secs(19));
    let s = sim.sender(0);
    let (st, min_rtt, srtt) = (s.stats, s.tp.min_rtt, s.srtt());
    let out = sim.run();
    assert_eq!(out.summary.flows[0].bytes_delivered, size);
    let t = seen.borrow();
    let at = |seq: u32| t.iter().filter(|&&(s, _)| s == seq).map(|&(_, t)| t).collect::<Vec<_>>();
    let (last, prev) = (at(n - 1), at(n - 2));
    let probe_gap = last[1] - last[0];
    let rack_gap = prev[1] - prev[0];
    println!(
        "tail drop of 2: probe {:.2} ms after the drop, the other repaired after {:.2} ms (min RTT {:.2}, srtt {:.2} ms), probes {}, RTOs {}",
        probe_gap.as_millis_f64(),
        rack_gap.as_millis_f64(),
        min_rtt.as_millis_f64(),
        srtt.as_millis_f64(),
        st.loss_probes,
        st.rto_events
    );
    assert_eq!((st.loss_probes, st.rto_events, st.retransmits), (1, 0, 2));
    // The last ACK comes about srtt after the drop, the probe 2·srtt + 2 ms after it.
    assert!(probe_gap < Time(3 * srtt.0) + Time::from_millis(10), "{probe_gap}");
    // The RTO would have fired srtt + 200 ms after that last ACK.
    assert!(probe_gap + Time::from_millis(50) < srtt + srtt + Time::from_millis(200), "well before the RTO");
    assert!(rack_gap < probe_gap + min_rtt + Time(min_rtt.0 / 4) + Time::from_millis(10), "{rack_gap}");

    // One segment out: Linux adds TCP_RTO_MIN (delayed-ACK allowance) to the PTO, which the
    // RTO then caps: the probe leaves at the RTO time, but as a probe (no Loss state, no
    // cwnd collapse).
    let (drop_at, rtx_at, st, _) = drop_one(n - 1, 1448 * n as u64, "10Mbit", "40ms", 60_000);
    println!("last-segment drop: probe {:.2} ms after the drop", (rtx_at - drop_at).as_millis_f64());
    assert_eq!((st.loss_probes, st.rto_events), (1, 0));
}

#[test]
fn a_burst_of_tail_drops_is_repaired_without_timeout() {
    // The last 5 segments lost: the probe (last segment) is SACKed, RACK then marks the 4
    // below it lost and fast recovery repairs them.
    let n = 300u32;
    let size = 1448 * n as u64;
    let sc = Dumbbell::new("10Mbit", "pfifo limit 10000").duration("20s").flow(Flow::new("cubic").rtt("40ms").size(size)).build();
    let mut sim = Simulation::new(&sc);
    let mut seen = std::collections::HashSet::new();
    sim.replace_bottleneck_qdisc(Rule::new(10_000, move |p: &mut Packet, _, _| !(p.tcp.seq >= n - 5 && seen.insert(p.tcp.seq))));
    sim.run_until(Time::from_secs(19));
    let st = sim.sender(0).stats;
    let out = sim.run();
    let f = &out.summary.flows[0];
    println!("tail burst: retransmits {}, probes {}, RTOs {}, FCT {:?}", f.retransmits, st.loss_probes, f.rto_events, f.fct_s);
    assert_eq!(f.bytes_delivered, size);
    assert_eq!(f.rto_events, 0);
    assert_eq!(st.loss_probes, 1);
    assert_eq!(f.retransmits, 5);
}

