//! The TCP sender, modelled on Linux `net/ipv4/tcp_input.c`, `tcp_output.c`, `tcp_timer.c`
//! and `tcp_rate.c`.
//!
//! - Scoreboard of every segment in flight with SACKed / lost / retransmitted flags; SACK
//!   blocks already processed are skipped with a cache of the previous ACK's blocks (as
//!   Linux's `recv_sack_cache`).
//! - Loss detection: RFC 6675 `IsLost` with DupThresh 3 (a segment is lost once 3 segments
//!   above it are SACKed; Linux `tcp_mark_head_lost`), plus detection of lost
//!   retransmissions the way RACK (RFC 8985 §6.2) does it: a retransmission is lost when a
//!   segment sent after it is delivered and a reordering window has passed.
//! - Fast recovery with Proportional Rate Reduction (RFC 6937, Linux `tcp_cwnd_reduction`),
//!   which also drives the RFC 3168 CWR reduction on ECN echo.
//! - RTO: Linux `tcp_rtt_estimator` (RFC 6298 with Linux's per-window variance and
//!   RTO = srtt + max(rttvar, rto_min)), exponential backoff up to 120 s, `tcp_enter_loss`.
//! - Pacing: Linux `tcp_update_pacing_rate` (factor 2 while cwnd < ssthresh/2, else 1.2, times
//!   max(cwnd, packets_out) · mss / srtt) with earliest-departure times as
//!   `tcp_update_skb_after_send`.
//! - Delivery-rate samples (`tcp_rate.c`), which give `tcpi_delivery_rate`, the quantity
//!   flent samples and the steady-state metric averages.

use super::{EndpointCtx, TcpConfig};
use crate::cc::{AckSample, CaEvent, CaState, CongestionControl, LostSkb, RateSample, TcpCcState};
use crate::event::{FlowTimer, Timer};
use crate::packet::{Direction, Ecn, Kind, Packet, SackBlock, MAX_SACK_BLOCKS};
use crate::scenario::EcnMode;
use crate::time::Time;
use std::collections::VecDeque;

/// RFC 6675 DupThresh (Linux `tcp_reordering` default).
const DUP_THRESH: u32 = 3;

const SACKED: u8 = 1;
const LOST: u8 = 2;
/// A retransmission of this segment is in flight (Linux `TCPCB_SACKED_RETRANS`).
const RETRANS: u8 = 4;
/// The segment has been retransmitted at least once (Linux `TCPCB_EVER_RETRANS`).
const EVER_RETRANS: u8 = 8;
const APP_LIMITED: u8 = 16;

/// Per-segment scoreboard entry (Linux keeps these in `tcp_skb_cb`).
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    /// Last (re)transmission time.
    tx_time: Time,
    /// `tcp_rate.c` snapshot at transmission: delivered count, its time, and the send time
    /// of the first packet of the current flight.
    delivered: u64,
    delivered_ce: u64,
    delivered_time: Option<Time>,
    first_tx: Time,
    /// Packets in flight just after this transmission, itself included (google/bbr
    /// `tx.in_flight`), and `tp->lost` at that moment (`tx.lost`).
    tx_in_flight: u32,
    tx_lost: u64,
    flags: u8,
}

/// Connection phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    SynSent,
    Established,
}

/// Counters reported per flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenderStats {
    pub data_packets_sent: u64,
    pub retransmits: u64,
    pub rto_events: u64,
    pub fast_recoveries: u64,
    pub cwr_reductions: u64,
    /// Data packets that reached the receiver CE-marked, as fed back.
    pub ce_echoed: u64,
    /// Time the transfer's last byte was acknowledged (finite transfers).
    pub completed_at: Option<Time>,
}

pub struct TcpSender {
    flow: u32,
    cfg: TcpConfig,
    cc: Box<dyn CongestionControl>,
    /// The socket fields shared with the congestion control.
    pub tp: TcpCcState,
    phase: Phase,
    /// Whether the application still offers new data (false after `stop`).
    app_open: bool,
    /// Segments the transfer has in total (`None`: unlimited).
    total_segs: Option<u32>,
    last_seg_payload: u32,
    snd_una: u32,
    snd_nxt: u32,
    sb: VecDeque<Seg>,
    sacked_out: u32,
    lost_out: u32,
    retrans_out: u32,
    /// Segments (re)marked lost since the start (Linux `tp->lost`).
    lost_total: u64,
    /// Lowest segment that may be lost and not yet retransmitted.
    retransmit_hint: u32,
    /// Segments below this have been judged by `IsLost` (lost or SACKed).
    loss_frontier: u32,
    /// SACKed segments in `[snd_una, loss_frontier)`.
    sacked_below_frontier: u32,
    /// Retransmitted segments in retransmission order, for lost-retransmit detection.
    retrans_queue: VecDeque<u32>,
    /// Send time of the most recently sent segment known delivered (RACK.xmit_ts).
    rack_xmit_time: Time,
    /// RTT of that delivery (RACK.rtt).
    rack_rtt: Time,
    sack_cache: [SackBlock; MAX_SACK_BLOCKS],
    /// Recovery point (`high_seq`): snd_nxt when a reduction or loss episode began.
    high_seq: u32,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
    /// Queue CWR on the next new data segment (`TCP_ECN_QUEUE_CWR`).
    queue_cwr: bool,
    ce_count_seen: u32,
    sce_count_seen: u32,
    // RTT estimation (`tcp_rtt_estimator`), in ns.
    srtt: Time,
    mdev: Time,
    mdev_max: Time,
    rttvar: Time,
    rtt_seq: u32,
    rto: Time,
    backoff: u32,
    rto_timer: Timer,
    syn_sent_at: Time,
    syn_retransmitted: bool,
    /// RTO while there is no RTT sample (`TCP_TIMEOUT_INIT`, or 3 s after a lost handshake).
    no_sample_rto: Time,
    // Pacing.
    pacing_timer: Timer,
    wstamp: Time,
    reorder_timer: Timer,
    // cwnd validation (`tcp_cwnd_validate`): `tp->is_cwnd_limited`, `max_packets_out`.
    cwnd_limited: bool,
    max_packets_out: u32,
    cwnd_usage_seq: u32,
    // Delivery-rate estimation (`tcp_rate.c`).
    delivered_time: Time,
    first_tx_time: Time,
    /// Non-zero while the flow is application-limited: the delivered count to pass.
    app_limited_until: u64,
    rate_delivered: u64,
    rate_interval: Time,
    pub stats: SenderStats,
}

impl TcpSender {
    pub fn new(flow: u32, cfg: TcpConfig, cc: Box<dyn CongestionControl>) -> Self {
        let (total_segs, last_seg_payload) = match cfg.size {
            Some(b) => {
                let n = b.div_ceil(cfg.mss as u64) as u32;
                (Some(n), (b - (n as u64 - 1) * cfg.mss as u64) as u32)
            }
            None => (None, cfg.mss),
        };
        let paced = cfg.pacing || cc.needs_pacing();
        let tp = TcpCcState {
            now: Time::ZERO,
            cwnd: cfg.initial_cwnd,
            ssthresh: u32::MAX,
            cwnd_cnt: 0,
            cwnd_clamp: u32::MAX,
            mss: cfg.mss,
            srtt: Time::ZERO,
            min_rtt: Time::MAX,
            packets_in_flight: 0,
            delivered: 0,
            delivered_ce: 0,
            delivered_sce: 0,
            snd_una: 0,
            snd_nxt: 0,
            is_cwnd_limited: false,
            cwnd_limited_flag: false,
            lsndtime: Time::ZERO,
            ca_state: CaState::Open,
            paced,
            pacing_rate: 0.0,
            lost: 0,
            delivered_mstamp: Time::ZERO,
            app_limited: 0,
            edt: Time::ZERO,
            ecn: cfg.ecn,
        };
        TcpSender {
            flow,
            rto: cfg.rto_initial,
            no_sample_rto: cfg.rto_initial,
            cfg,
            cc,
            tp,
            phase: Phase::Idle,
            app_open: false,
            total_segs,
            last_seg_payload,
            snd_una: 0,
            snd_nxt: 0,
            sb: VecDeque::with_capacity(256),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            lost_total: 0,
            retransmit_hint: 0,
            loss_frontier: 0,
            sacked_below_frontier: 0,
            retrans_queue: VecDeque::with_capacity(64),
            rack_xmit_time: Time::ZERO,
            rack_rtt: Time::ZERO,
            sack_cache: [SackBlock::default(); MAX_SACK_BLOCKS],
            high_seq: 0,
            prior_cwnd: 0,
            prr_delivered: 0,
            prr_out: 0,
            queue_cwr: false,
            ce_count_seen: 0,
            sce_count_seen: 0,
            srtt: Time::ZERO,
            mdev: Time::ZERO,
            mdev_max: Time::ZERO,
            rttvar: Time::ZERO,
            rtt_seq: 0,
            backoff: 0,
            rto_timer: Timer::default(),
            syn_sent_at: Time::ZERO,
            syn_retransmitted: false,
            pacing_timer: Timer::default(),
            wstamp: Time::ZERO,
            reorder_timer: Timer::default(),
            cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
            delivered_time: Time::ZERO,
            first_tx_time: Time::ZERO,
            app_limited_until: 0,
            rate_delivered: 0,
            rate_interval: Time::ZERO,
            stats: SenderStats::default(),
        }
    }

    pub fn cc_name(&self) -> &'static str {
        self.cc.name()
    }
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }
    pub fn srtt(&self) -> Time {
        self.srtt
    }
    pub fn rto(&self) -> Time {
        self.rto
    }
    /// Packets sent and not yet cumulatively acknowledged (`packets_out`).
    pub fn packets_out(&self) -> u32 {
        self.snd_nxt - self.snd_una
    }
    /// Linux `tcp_packets_in_flight`: packets_out − (sacked_out + lost_out) + retrans_out.
    pub fn in_flight(&self) -> u32 {
        self.packets_out() + self.retrans_out - self.sacked_out - self.lost_out
    }
    /// The recovery point (`high_seq`) of the current or last reduction episode.
    pub fn recovery_point(&self) -> u32 {
        self.high_seq
    }
    pub fn ca_state(&self) -> CaState {
        self.tp.ca_state
    }
    /// `tcpi_delivery_rate` in bits per second (0 before the first valid sample).
    pub fn delivery_rate_bps(&self) -> f64 {
        if self.rate_interval == Time::ZERO {
            return 0.0;
        }
        self.rate_delivered as f64 * self.cfg.mss as f64 * 8.0 / self.rate_interval.as_secs_f64()
    }
    /// Bytes cumulatively acknowledged.
    pub fn bytes_acked(&self) -> u64 {
        self.payload_upto(self.snd_una)
    }
    /// Whether a finite transfer has been fully acknowledged.
    pub fn is_complete(&self) -> bool {
        self.stats.completed_at.is_some()
    }

    fn payload_upto(&self, seq: u32) -> u64 {
        match self.total_segs {
            Some(n) if seq >= n => (n as u64 - 1) * self.cfg.mss as u64 + self.last_seg_payload as u64,
            _ => seq as u64 * self.cfg.mss as u64,
        }
    }
    fn payload_of(&self, seq: u32) -> u32 {
        match self.total_segs {
            Some(n) if seq + 1 == n => self.last_seg_payload,
            _ => self.cfg.mss,
        }
    }
    fn seg(&self, seq: u32) -> &Seg {
        &self.sb[(seq - self.snd_una) as usize]
    }
    fn seg_mut(&mut self, seq: u32) -> &mut Seg {
        &mut self.sb[(seq - self.snd_una) as usize]
    }
    fn sync_tp(&mut self, now: Time) {
        self.tp.now = now;
        self.tp.srtt = self.srtt;
        self.tp.snd_una = self.snd_una;
        self.tp.snd_nxt = self.snd_nxt;
        self.tp.packets_in_flight = self.in_flight();
        self.sync_counters();
    }
    /// The socket counters a `cong_control` algorithm reads (kept current before each hook).
    fn sync_counters(&mut self) {
        self.tp.lost = self.lost_total;
        self.tp.delivered_mstamp = self.delivered_time;
        self.tp.app_limited = self.app_limited_until;
        self.tp.edt = self.wstamp;
    }
    fn set_state(&mut self, s: CaState) {
        if self.tp.ca_state != s {
            self.sync_counters();
            self.tp.packets_in_flight = self.in_flight();
            self.cc.set_state(&mut self.tp, s);
            self.tp.ca_state = s;
        }
    }
    fn has_new_data(&self) -> bool {
        self.app_open && self.total_segs.map_or(true, |n| self.snd_nxt < n)
    }

    /// The application opens the connection: send the SYN.
    pub fn start(&mut self, ctx: &mut EndpointCtx) {
        if self.phase != Phase::Idle {
            return;
        }
        self.phase = Phase::SynSent;
        self.app_open = true;
        self.send_syn(ctx);
    }

    /// The application stops offering new data (what is in flight is still delivered).
    pub fn stop(&mut self) {
        self.app_open = false;
    }

    fn send_syn(&mut self, ctx: &mut EndpointCtx) {
        let mut syn = Packet::new(self.flow, Direction::Forward, Kind::Syn, self.cfg.header_bytes);
        // RFC 3168 §6.1.1: request ECN with ECE and CWR on the SYN.
        if self.cfg.ecn.is_on() {
            syn.tcp.ece = true;
            syn.tcp.cwr = true;
        }
        self.syn_sent_at = ctx.now;
        ctx.out.push(syn);
        self.rto_timer.arm(ctx.now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
    }

    /// Handles a packet from the receiver.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match pkt.kind {
            Kind::SynAck if self.phase == Phase::SynSent => {
                self.phase = Phase::Established;
                self.rto_timer.cancel();
                // Karn: no sample if the SYN was retransmitted (Linux `tcp_synack_rtt_meas`);
                // then the RTO falls back to 3 s and, after two or more SYN retransmissions,
                // the initial window to 1 (Linux `tcp_init_metrics`, `tcp_init_transfer`).
                if self.syn_retransmitted {
                    self.no_sample_rto = Time::from_secs(3);
                    if self.stats.rto_events > 1 {
                        self.tp.cwnd = 1;
                    }
                } else {
                    let r = ctx.now - self.syn_sent_at;
                    self.rtt_sample(r);
                    self.tp.min_rtt = r;
                }
                self.backoff = 0;
                self.rto = self.computed_rto();
                self.sync_tp(ctx.now);
                self.cc.init(&mut self.tp);
                // An algorithm may decide at init whether it paces (Prague releases pacing
                // when it falls back to Reno without ECN, Linux `prague_release`).
                self.tp.paced = self.cfg.pacing || self.cc.needs_pacing();
                self.update_pacing_rate();
                self.try_send(ctx);
            }
            Kind::Ack if self.phase == Phase::Established => self.on_ack(pkt, ctx),
            _ => {}
        }
    }

    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        match t {
            FlowTimer::Retransmit => {
                if self.rto_timer.fire(ctx.now, ctx.event(t), ctx.events) {
                    self.on_rto(ctx);
                }
            }
            FlowTimer::Pacing => {
                if self.pacing_timer.fire(ctx.now, ctx.event(t), ctx.events) {
                    self.try_send(ctx);
                }
            }
            FlowTimer::Reorder => {
                if self.reorder_timer.fire(ctx.now, ctx.event(t), ctx.events) && self.phase == Phase::Established {
                    self.tp.now = ctx.now;
                    self.mark_lost_retransmits(ctx);
                    self.try_send(ctx);
                }
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------- ACK processing

    fn on_ack(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        let ack = pkt.tcp.seq;
        if ack > self.snd_nxt || ack < self.snd_una {
            return; // Old or impossible ACK; Linux discards it.
        }
        self.tp.now = now;
        let prior_in_flight = self.in_flight();
        let prior_una = self.snd_una;
        let lost_before = self.lost_total;
        let mut rs = RateSample { prior_in_flight, ..RateSample::default() };
        let mut prior: Option<(u64, u64, Time)> = None;
        let mut delivered_now = 0u32;
        // Send times of the oldest and newest newly ACKed / SACKed never-retransmitted
        // segments (Linux first_ackt/last_ackt, first_sackt/last_sackt).
        let mut ackt: Option<(Time, Time)> = None;
        let mut sackt: Option<(Time, Time)> = None;
        let widen = |r: Option<(Time, Time)>, t: Time| Some(r.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));

        // SACK blocks (Linux tcp_sacktag_write_queue), skipping what the cache says is done.
        let blocks = pkt.tcp.sacks;
        for b in &blocks[..pkt.tcp.sack_len as usize] {
            let start = b.start.max(self.snd_una);
            let end = b.end.min(self.snd_nxt);
            let mut s = start;
            while s < end {
                // Jump over any range processed for the previous ACK.
                if let Some(c) = self.sack_cache.iter().find(|c| c.start <= s && s < c.end) {
                    s = c.end;
                    continue;
                }
                let seg = *self.seg(s);
                if seg.flags & SACKED == 0 {
                    self.mark_sacked(s, now);
                    delivered_now += 1;
                    self.rate_skb_delivered(&seg, &mut rs, &mut prior);
                    if seg.flags & EVER_RETRANS == 0 {
                        sackt = widen(sackt, seg.tx_time);
                    }
                }
                s += 1;
            }
        }
        self.sack_cache = [SackBlock::default(); MAX_SACK_BLOCKS];
        self.sack_cache[..pkt.tcp.sack_len as usize].copy_from_slice(&blocks[..pkt.tcp.sack_len as usize]);

        // Cumulative ACK (Linux tcp_clean_rtx_queue).
        let mut retrans_acked = false;
        while self.snd_una < ack {
            let seg = self.sb.pop_front().expect("scoreboard covers snd_una..snd_nxt");
            if seg.flags & SACKED != 0 {
                self.sacked_out -= 1;
                if self.snd_una < self.loss_frontier {
                    self.sacked_below_frontier -= 1;
                }
            } else {
                delivered_now += 1;
                self.tp.delivered += 1;
                self.rate_skb_delivered(&seg, &mut rs, &mut prior);
                self.note_rack(&seg, now);
                if seg.flags & EVER_RETRANS != 0 {
                    retrans_acked = true;
                } else {
                    ackt = widen(ackt, seg.tx_time);
                }
            }
            if seg.flags & LOST != 0 {
                self.lost_out -= 1;
            }
            if seg.flags & RETRANS != 0 {
                self.retrans_out -= 1;
            }
            self.snd_una += 1;
        }
        let pkts_acked = self.snd_una - prior_una;
        self.loss_frontier = self.loss_frontier.max(self.snd_una);
        self.retransmit_hint = self.retransmit_hint.max(self.snd_una);
        let una_advanced = pkts_acked > 0;

        // ECN feedback.
        let ce_delta = pkt.tcp.ce_count.wrapping_sub(self.ce_count_seen);
        self.ce_count_seen = pkt.tcp.ce_count;
        self.stats.ce_echoed += ce_delta as u64;
        self.tp.delivered_ce += ce_delta as u64;
        let sce_delta = pkt.tcp.sce_count.wrapping_sub(self.sce_count_seen);
        self.sce_count_seen = pkt.tcp.sce_count;
        self.tp.delivered_sce += sce_delta as u64;
        // The echo that starts a CWR reduction (Linux FLAG_ECE): the ECE flag, or with
        // accurate feedback an increase of the CE counter.
        let ece = match self.cfg.ecn {
            EcnMode::Off => false,
            EcnMode::Rfc3168 | EcnMode::Sce => pkt.tcp.ece,
            EcnMode::L4s => ce_delta > 0,
        };

        // RTT (Linux tcp_clean_rtx_queue + tcp_ack_update_rtt): the estimator takes the oldest
        // newly ACKed segment, unless the ACK covers retransmitted data (Karn), else the oldest
        // newly SACKed; the congestion control gets the newest (`ca_rtt_us`).
        let seq_rtt = ackt.filter(|_| !retrans_acked).map(|(first, _)| now - first);
        let sack_rtt = sackt.map(|(first, _)| now - first);
        let ca_rtt = match (sackt, ackt) {
            (Some((_, last)), _) => Some(now - last),
            (None, Some((_, last))) if !retrans_acked => Some(now - last),
            _ => None,
        };
        if let Some(r) = seq_rtt.or(sack_rtt) {
            self.rtt_sample(r);
        }
        if let Some(r) = ca_rtt {
            self.tp.min_rtt = self.tp.min_rtt.min(r);
        }
        // Re-arm the RTO on forward progress, or when a SACK reports data sent before the
        // head's latest retransmission (Linux FLAG_SET_XMIT_TIMER).
        let head_sent_after_sacked = sack_rtt.is_some_and(|r| self.sb.front().is_some_and(|h| r > now - h.tx_time));
        if una_advanced || head_sent_after_sacked {
            if self.packets_out() > 0 {
                self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
            } else {
                self.rto_timer.cancel();
            }
        }

        // Loss detection.
        self.mark_lost_by_sack();
        self.mark_lost_retransmits(ctx);
        let newly_lost = (self.lost_total - lost_before) as u32;

        // Rate sample (Linux tcp_rate_gen).
        if self.app_limited_until != 0 && self.tp.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        if delivered_now > 0 {
            self.delivered_time = now;
        }
        rs.acked_sacked = delivered_now;
        rs.ece_delta = ce_delta;
        rs.losses = newly_lost;
        rs.rtt = ca_rtt;
        rs.is_ece = ece;
        self.finish_rate_sample(&mut rs, prior, now);

        self.sync_tp(now);
        let sample = AckSample { acked: pkts_acked, acked_ce: ce_delta, acked_sce: sce_delta, rtt: ca_rtt, prior_in_flight, ece: pkt.tcp.ece && self.cfg.ecn.is_on() };
        self.cc.pkts_acked(&mut self.tp, &sample);

        // State machine (Linux tcp_fastretrans_alert).
        self.update_state(ece);

        // cwnd (Linux tcp_cong_control). A `cong_control` algorithm sees the raw
        // `tp->is_cwnd_limited` flag and may mark the flow application-limited.
        self.sync_tp(now);
        // Linux tcp_is_cwnd_limited() and the raw tp->is_cwnd_limited flag it starts from.
        self.tp.is_cwnd_limited = self.is_cwnd_limited();
        self.tp.cwnd_limited_flag = self.cwnd_limited;
        if self.cc.cong_control(&mut self.tp, &rs) {
            self.app_limited_until = self.tp.app_limited;
        } else {
            if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
                self.cwnd_reduction(delivered_now, newly_lost, una_advanced);
            } else if una_advanced {
                self.cc.cong_avoid(&mut self.tp, delivered_now);
            }
        }
        self.update_pacing_rate();

        if let Some(n) = self.total_segs {
            if self.snd_una >= n && self.stats.completed_at.is_none() {
                self.stats.completed_at = Some(now);
                self.rto_timer.cancel();
            }
        }
        self.try_send(ctx);
    }

    fn mark_sacked(&mut self, seq: u32, now: Time) {
        let seg = *self.seg(seq);
        if seg.flags & LOST != 0 {
            self.lost_out -= 1;
        }
        if seg.flags & RETRANS != 0 {
            self.retrans_out -= 1;
        }
        self.seg_mut(seq).flags = (seg.flags | SACKED) & !(LOST | RETRANS);
        self.sacked_out += 1;
        self.tp.delivered += 1;
        if seq < self.loss_frontier {
            self.sacked_below_frontier += 1;
        }
        self.note_rack(&seg, now);
    }

    /// RACK (RFC 8985 §6.1): remember the latest send time among delivered segments.
    fn note_rack(&mut self, seg: &Seg, now: Time) {
        if seg.tx_time >= self.rack_xmit_time {
            self.rack_xmit_time = seg.tx_time;
            self.rack_rtt = now - seg.tx_time;
        }
    }

    /// RFC 6675 §4 `IsLost` with DupThresh segments: walk the frontier forward while at least
    /// DupThresh SACKed segments lie above it, marking un-SACKed segments lost.
    fn mark_lost_by_sack(&mut self) {
        while self.loss_frontier < self.snd_nxt && self.sacked_out - self.sacked_below_frontier >= DUP_THRESH {
            let seq = self.loss_frontier;
            let flags = self.seg(seq).flags;
            if flags & SACKED != 0 {
                self.sacked_below_frontier += 1;
            } else if flags & (LOST | RETRANS) == 0 {
                self.mark_lost(seq);
            }
            self.loss_frontier += 1;
        }
    }

    fn mark_lost(&mut self, seq: u32) {
        let seg = self.seg_mut(seq);
        seg.flags |= LOST;
        let seg = *seg;
        self.lost_out += 1;
        self.lost_total += 1;
        self.retransmit_hint = self.retransmit_hint.min(seq);
        self.notify_lost(&seg);
    }

    /// google/bbr `tcp_mark_skb_lost` -> `.skb_marked_lost`, after `tp->lost` counts it.
    fn notify_lost(&mut self, seg: &Seg) {
        self.tp.lost = self.lost_total;
        let skb = LostSkb {
            tx_in_flight: seg.tx_in_flight,
            lost: self.lost_total - seg.tx_lost,
            is_app_limited: seg.flags & APP_LIMITED != 0,
        };
        self.cc.skb_marked_lost(&self.tp, &skb);
    }

    /// RFC 8985 §6.2 applied to retransmissions: a retransmission sent before a segment now
    /// known delivered is lost once RACK.rtt plus a reordering window (min_rtt/4) has passed
    /// since it was sent; until then the reordering timer waits for that moment.
    fn mark_lost_retransmits(&mut self, ctx: &mut EndpointCtx) {
        // Linux tcp_rack_reo_wnd: no reordering window in Recovery/Loss (none seen).
        let reo_wnd = if matches!(self.tp.ca_state, CaState::Recovery | CaState::Loss) { Time::ZERO } else { Time(self.tp.min_rtt.0 / 4) };
        while let Some(&seq) = self.retrans_queue.front() {
            if seq < self.snd_una || self.seg(seq).flags & RETRANS == 0 {
                self.retrans_queue.pop_front();
                continue;
            }
            let seg = *self.seg(seq);
            if seg.tx_time >= self.rack_xmit_time {
                break;
            }
            let deadline = seg.tx_time + self.rack_rtt + reo_wnd;
            if ctx.now < deadline {
                self.reorder_timer.arm(deadline, ctx.event(FlowTimer::Reorder), ctx.events);
                break;
            }
            // Still marked LOST (and counted in lost_out): due for another retransmission.
            self.lost_total += 1;
            self.retrans_queue.pop_front();
            self.seg_mut(seq).flags &= !RETRANS;
            self.retrans_out -= 1;
            self.retransmit_hint = self.retransmit_hint.min(seq);
            let seg = *self.seg(seq);
            self.notify_lost(&seg);
        }
    }

    fn update_state(&mut self, ece: bool) {
        // End of an episode once the recovery point is acknowledged (Linux
        // tcp_fastretrans_alert, "D. Check state exit conditions"). CWR is held until
        // something *above* high_seq is ACKed, so that the CWR flag has reached the receiver.
        let ended = match self.tp.ca_state {
            CaState::Recovery | CaState::Loss => self.snd_una >= self.high_seq,
            CaState::Cwr => self.snd_una > self.high_seq,
            _ => false,
        };
        if ended {
            // Linux tcp_end_cwnd_reduction returns at once for a `cong_control` algorithm.
            if self.tp.ca_state != CaState::Loss && !self.cc.has_cong_control() {
                // Linux tcp_end_cwnd_reduction: settle at ssthresh.
                self.tp.cwnd = self.tp.ssthresh.max(1).min(self.tp.cwnd_clamp);
                self.cc.cwnd_event(&mut self.tp, CaEvent::CompleteCwr);
            }
            self.set_state(CaState::Open);
        }
        if self.lost_out > 0 && matches!(self.tp.ca_state, CaState::Open | CaState::Disorder | CaState::Cwr) {
            // Linux tcp_enter_recovery: a reduction already under way (CWR) continues with
            // its ssthresh and recovery point.
            if self.tp.ca_state != CaState::Cwr {
                self.init_cwnd_reduction();
            }
            self.stats.fast_recoveries += 1;
            self.set_state(CaState::Recovery);
            return;
        }
        if ece && matches!(self.tp.ca_state, CaState::Open | CaState::Disorder) {
            // Linux tcp_try_to_open -> tcp_enter_cwr: at most one ECN reduction per window.
            self.init_cwnd_reduction();
            self.stats.cwr_reductions += 1;
            self.set_state(CaState::Cwr);
            return;
        }
        match self.tp.ca_state {
            CaState::Open if self.sacked_out > 0 => self.set_state(CaState::Disorder),
            CaState::Disorder if self.sacked_out == 0 => self.set_state(CaState::Open),
            _ => {}
        }
    }

    /// Linux `tcp_init_cwnd_reduction`: recovery point, PRR state, ssthresh, queue CWR.
    fn init_cwnd_reduction(&mut self) {
        self.sync_tp(self.tp.now);
        self.high_seq = self.snd_nxt;
        self.tp.cwnd_cnt = 0;
        self.prior_cwnd = self.tp.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        self.queue_cwr = matches!(self.cfg.ecn, EcnMode::Rfc3168 | EcnMode::Sce);
    }

    /// PRR (RFC 6937 §3, Linux `tcp_cwnd_reduction`): spread the reduction over the ACKs of
    /// one round, with the slow-start reduction bound once pipe falls below ssthresh.
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: u32, una_advanced: bool) {
        if newly_acked_sacked == 0 || self.prior_cwnd == 0 {
            return;
        }
        let in_flight = self.in_flight() as i64;
        let ssthresh = self.tp.ssthresh as i64;
        let delta = ssthresh - in_flight;
        self.prr_delivered += newly_acked_sacked;
        let prr_delivered = self.prr_delivered as i64;
        let prr_out = self.prr_out as i64;
        let mut sndcnt = if delta < 0 {
            let dividend = ssthresh * prr_delivered + self.prior_cwnd as i64 - 1;
            dividend / self.prior_cwnd as i64 - prr_out
        } else {
            // Slow-start reduction bound, +1 only on forward progress without new loss.
            let bound = (prr_delivered - prr_out).max(newly_acked_sacked as i64) + (una_advanced && newly_lost == 0) as i64;
            delta.min(bound)
        };
        // Force a fast retransmit upon entering recovery.
        sndcnt = sndcnt.max(if self.prr_out > 0 { 0 } else { 1 });
        self.tp.cwnd = ((in_flight + sndcnt).max(1) as u32).min(self.tp.cwnd_clamp);
    }

    /// Linux `tcp_is_cwnd_limited`: the flag from `tcp_cwnd_validate`, or in slow start
    /// while cwnd is below twice the largest flight of the window.
    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited || (self.tp.in_slow_start() && self.tp.cwnd < 2 * self.max_packets_out)
    }

    // ---------------------------------------------------------------- RTT and RTO

    /// Linux `tcp_rtt_estimator` + `tcp_set_rto`, in nanoseconds. As in Linux, `mdev`,
    /// `mdev_max` and `rttvar` hold 4 x the RFC 6298 RTTVAR: srtt gain 1/8, deviation gain 1/4
    /// (1/32 for decreases below srtt), `rttvar` the largest deviation of the last window but
    /// never below `rto_min`, and RTO = srtt + rttvar (3 x RTT after the first sample).
    /// A valid sample also resets the backoff (RFC 6298 §5.7).
    fn rtt_sample(&mut self, sample: Time) {
        let m = sample.0.max(1) as i64;
        let rto_min = self.cfg.rto_min.0 as i64;
        if self.srtt == Time::ZERO {
            self.srtt = Time(m as u64);
            self.mdev = Time(2 * m as u64);
            self.mdev_max = Time(self.mdev.0.max(rto_min as u64));
            self.rttvar = self.mdev_max;
            self.rtt_seq = self.snd_nxt;
        } else {
            let srtt = self.srtt.0 as i64;
            let err = m - srtt;
            self.srtt = Time((srtt + err / 8).max(1) as u64);
            let mdev = self.mdev.0 as i64;
            let mut step = err.abs() - mdev / 4;
            if err < 0 && step > 0 {
                step /= 8;
            }
            self.mdev = Time((mdev + step).max(0) as u64);
            if self.mdev > self.mdev_max {
                self.mdev_max = self.mdev;
                if self.mdev_max > self.rttvar {
                    self.rttvar = self.mdev_max;
                }
            }
            if self.snd_una > self.rtt_seq {
                if self.mdev_max < self.rttvar {
                    self.rttvar = Time(self.rttvar.0 - (self.rttvar.0 - self.mdev_max.0) / 4);
                }
                self.rtt_seq = self.snd_nxt;
                self.mdev_max = Time(rto_min as u64);
            }
        }
        self.backoff = 0;
        self.rto = self.computed_rto();
    }

    fn computed_rto(&self) -> Time {
        if self.srtt == Time::ZERO {
            return self.no_sample_rto;
        }
        let base = self.srtt + self.rttvar;
        let backed = Time(base.0.saturating_mul(1u64 << self.backoff.min(20)));
        backed.min(self.cfg.rto_max)
    }

    /// Retransmission timeout (Linux `tcp_retransmit_timer` + `tcp_enter_loss`).
    fn on_rto(&mut self, ctx: &mut EndpointCtx) {
        self.stats.rto_events += 1;
        self.backoff += 1;
        if self.phase == Phase::SynSent {
            self.syn_retransmitted = true;
            self.rto = Time(self.cfg.rto_initial.0 << self.backoff.min(20)).min(self.cfg.rto_max);
            self.send_syn(ctx);
            return;
        }
        if self.packets_out() == 0 {
            return;
        }
        self.sync_tp(ctx.now);
        let state = self.tp.ca_state;
        if matches!(state, CaState::Open | CaState::Disorder) || self.snd_una >= self.high_seq || (state == CaState::Loss && self.backoff == 1) {
            self.prior_cwnd = self.tp.cwnd;
            self.tp.ssthresh = self.cc.ssthresh(&self.tp);
            self.cc.cwnd_event(&mut self.tp, CaEvent::Loss);
        }
        // Every segment not SACKed is lost; retransmissions in flight are forgotten.
        for i in 0..self.sb.len() {
            let seg = &mut self.sb[i];
            if seg.flags & SACKED == 0 {
                let newly = seg.flags & LOST == 0;
                seg.flags = (seg.flags | LOST) & !RETRANS;
                if newly {
                    self.lost_out += 1;
                    self.lost_total += 1;
                    let seg = self.sb[i];
                    self.notify_lost(&seg);
                }
            }
        }
        self.retrans_out = 0;
        self.retrans_queue.clear();
        self.retransmit_hint = self.snd_una;
        self.loss_frontier = self.snd_nxt;
        self.sacked_below_frontier = self.sacked_out;
        self.high_seq = self.snd_nxt;
        self.set_state(CaState::Loss);
        self.tp.cwnd = self.in_flight() + 1;
        self.tp.cwnd_cnt = 0;
        self.queue_cwr = matches!(self.cfg.ecn, EcnMode::Rfc3168 | EcnMode::Sce);
        self.rto = self.computed_rto();
        self.rto_timer.arm(ctx.now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
        self.update_pacing_rate();
        self.wstamp = ctx.now;
        self.try_send(ctx);
    }

    // ---------------------------------------------------------------- sending

    /// Linux `tcp_update_pacing_rate`.
    fn update_pacing_rate(&mut self) {
        if let Some(r) = self.cc.pacing_rate(&self.tp) {
            self.tp.pacing_rate = r;
            return;
        }
        let ratio = if self.tp.cwnd < self.tp.ssthresh / 2 { self.cfg.pacing_ss_ratio } else { self.cfg.pacing_ca_ratio };
        let window = self.tp.cwnd.max(self.packets_out()) as f64;
        self.tp.pacing_rate = if self.srtt > Time::ZERO {
            self.cfg.mss as f64 * window * ratio as f64 / 100.0 / self.srtt.as_secs_f64()
        } else {
            0.0
        };
    }

    /// Next lost segment not yet retransmitted (Linux `tcp_xmit_retransmit_queue`).
    fn next_retransmit(&mut self) -> Option<u32> {
        if self.lost_out == 0 {
            return None;
        }
        let mut seq = self.retransmit_hint.max(self.snd_una);
        while seq < self.snd_nxt {
            if self.seg(seq).flags & (LOST | RETRANS | SACKED) == LOST {
                self.retransmit_hint = seq;
                return Some(seq);
            }
            seq += 1;
        }
        self.retransmit_hint = seq;
        None
    }

    /// Sends what cwnd, pacing and the receive window allow (Linux `tcp_write_xmit`).
    fn try_send(&mut self, ctx: &mut EndpointCtx) {
        if self.phase != Phase::Established {
            return;
        }
        let now = ctx.now;
        let paced = self.tp.paced && self.tp.pacing_rate > 0.0;
        let mut cwnd_limited = false;
        let mut sent = 0;
        loop {
            if paced && self.wstamp > now {
                self.pacing_timer.arm(self.wstamp, ctx.event(FlowTimer::Pacing), ctx.events);
                break;
            }
            if self.in_flight() >= self.tp.cwnd {
                break;
            }
            let (seq, is_retrans) = if let Some(s) = self.next_retransmit() {
                (s, true)
            } else if self.has_new_data() && self.cfg.rwnd_packets.map_or(true, |w| self.packets_out() < w) {
                (self.snd_nxt, false)
            } else {
                // Nothing to send while cwnd has room: application-limited (tcp_rate_check_app_limited).
                if !self.has_new_data() {
                    self.app_limited_until = (self.tp.delivered + self.in_flight() as u64).max(1);
                }
                break;
            };
            self.transmit(seq, is_retrans, paced, ctx);
            sent += 1;
        }
        cwnd_limited |= self.in_flight() >= self.tp.cwnd;
        // Linux tcp_cwnd_validate, called when something was sent or cwnd is the limit.
        if sent > 0 || cwnd_limited {
            if self.snd_una >= self.cwnd_usage_seq || cwnd_limited || (!self.cwnd_limited && self.packets_out() > self.max_packets_out) {
                self.cwnd_limited = cwnd_limited;
                self.max_packets_out = self.packets_out();
                self.cwnd_usage_seq = self.snd_nxt;
            }
        }
    }

    fn transmit(&mut self, seq: u32, is_retrans: bool, paced: bool, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        self.tp.now = now;
        if self.packets_out() == 0 {
            // tcp_rate_skb_sent: a new flight starts.
            self.first_tx_time = now;
            self.delivered_time = now;
        }
        // tcp_event_data_sent: restart after idle, then note the send time. The event may
        // change the pacing rate (BBR paces at the estimated bandwidth after idle).
        if self.in_flight() == 0 {
            self.sync_counters();
            self.cc.cwnd_event(&mut self.tp, CaEvent::TxStart);
            if let Some(r) = self.cc.pacing_rate(&self.tp) {
                self.tp.pacing_rate = r;
            }
        }
        self.tp.lsndtime = now;
        let snap = Seg {
            tx_time: now,
            delivered: self.tp.delivered,
            delivered_ce: self.tp.delivered_ce,
            delivered_time: Some(self.delivered_time),
            first_tx: self.first_tx_time,
            tx_in_flight: self.in_flight() + 1,
            tx_lost: self.lost_total,
            flags: if self.app_limited_until != 0 { APP_LIMITED } else { 0 },
        };
        let payload = self.payload_of(seq);
        let mut pkt = Packet::new(self.flow, Direction::Forward, Kind::Data, payload + self.cfg.header_bytes);
        pkt.tcp.seq = seq;
        pkt.tcp.payload = payload;
        if is_retrans {
            let seg = self.seg_mut(seq);
            seg.flags = (seg.flags & SACKED) | LOST | RETRANS | EVER_RETRANS | snap.flags;
            seg.tx_time = snap.tx_time;
            seg.delivered = snap.delivered;
            seg.delivered_ce = snap.delivered_ce;
            seg.delivered_time = snap.delivered_time;
            seg.first_tx = snap.first_tx;
            seg.tx_in_flight = snap.tx_in_flight;
            seg.tx_lost = snap.tx_lost;
            self.retrans_out += 1;
            self.retrans_queue.push_back(seq);
            self.stats.retransmits += 1;
            // tcp_xmit_retransmit_queue re-arms the RTO when the head is retransmitted.
            if seq == self.snd_una {
                self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
            }
        } else {
            self.sb.push_back(snap);
            self.snd_nxt += 1;
            // RFC 3168 §6.1.2: ECT only on new data, never on retransmissions (Linux tcp_ecn_send).
            if matches!(self.cfg.ecn, EcnMode::Rfc3168 | EcnMode::Sce) {
                pkt.ecn = Ecn::Ect0;
                if self.queue_cwr {
                    pkt.tcp.cwr = true;
                    self.queue_cwr = false;
                }
            }
        }
        // L4S: ECT(1) on every data packet, retransmissions included (AccECN, RFC 9768 §3.1.5).
        if self.cfg.ecn == EcnMode::L4s {
            pkt.ecn = Ecn::Ect1;
        }
        if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.prr_out += 1;
        }
        self.stats.data_packets_sent += 1;
        if !self.rto_timer.is_armed() {
            self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
        }
        if paced {
            // tcp_update_skb_after_send: EDT departure times spaced by payload / rate, with
            // up to half a packet's time forgiven after idle, from the 10th data segment on.
            let prior = self.wstamp;
            self.wstamp = self.wstamp.max(now);
            if self.stats.data_packets_sent >= 10 {
                let len_ns = Time::from_secs_f64(payload as f64 / self.tp.pacing_rate);
                let credit = self.wstamp - prior;
                self.wstamp += len_ns - Time(len_ns.0 / 2).min(credit);
            }
        }
        ctx.out.push(pkt);
    }

    // ---------------------------------------------------------------- delivery rate

    /// Linux `tcp_rate_skb_delivered`: the most recently sent delivered packet sets the sample.
    /// `prior` is (delivered, delivered_ce, delivered time) at that packet's transmission.
    fn rate_skb_delivered(&mut self, seg: &Seg, rs: &mut RateSample, prior: &mut Option<(u64, u64, Time)>) {
        let Some(dt) = seg.delivered_time else { return };
        if prior.map_or(true, |(p, _, _)| seg.delivered > p) {
            *prior = Some((seg.delivered, seg.delivered_ce, dt));
            rs.is_app_limited = seg.flags & APP_LIMITED != 0;
            rs.is_retrans = seg.flags & EVER_RETRANS != 0;
            rs.prior_delivered = seg.delivered;
            rs.tx_in_flight = seg.tx_in_flight;
            // The snapshot for now; finish_rate_sample turns it into losses since then.
            rs.lost = seg.tx_lost;
            self.first_tx_time = seg.tx_time;
            rs.interval = seg.tx_time - seg.first_tx;
        }
    }

    /// Linux `tcp_rate_gen`.
    fn finish_rate_sample(&mut self, rs: &mut RateSample, prior: Option<(u64, u64, Time)>, now: Time) {
        let Some((p, p_ce, prior_time)) = prior else {
            rs.delivered = -1;
            return;
        };
        rs.lost = self.lost_total - rs.lost;
        rs.delivered = (self.tp.delivered - p) as i64;
        rs.delivered_ce = (self.tp.delivered_ce - p_ce) as i64;
        let ack_elapsed = now - prior_time;
        rs.interval = rs.interval.max(ack_elapsed);
        if rs.interval < self.tp.min_rtt {
            rs.delivered = -1;
            rs.interval = Time::ZERO;
            return;
        }
        let d = rs.delivered as u64;
        if !rs.is_app_limited || d as u128 * self.rate_interval.0 as u128 >= self.rate_delivered as u128 * rs.interval.0 as u128 {
            self.rate_delivered = d;
            self.rate_interval = rs.interval;
        }
    }
}
