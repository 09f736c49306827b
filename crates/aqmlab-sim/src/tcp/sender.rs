//! The TCP sender, modelled on Linux `net/ipv4/tcp_input.c`, `tcp_output.c`, `tcp_timer.c`
//! and `tcp_rate.c`.
//!
//! - Scoreboard of every segment in flight with SACKed / lost / retransmitted flags; SACK
//!   blocks already processed are skipped with a cache of the previous ACK's blocks (as
//!   Linux's `recv_sack_cache`).
//! - Loss detection: RACK-TLP (RFC 8985) as Linux `net/ipv4/tcp_recovery.c` with
//!   `tcp_recovery` = 1: every segment (original or retransmission) sent before the most
//!   recently sent delivered one is lost once RACK.rtt + reo_wnd has passed since it was
//!   sent; reo_wnd = min_rtt/4 × D-SACK-driven steps (at most srtt), zero while no
//!   reordering has been seen and the flow is in Recovery or has `tp->reordering` segments
//!   SACKed (the DupThresh rule that remains). `tp->reordering` adapts to observed
//!   reordering (`tcp_check_sack_reordering`, up to `tcp_max_reordering` 300). Tail loss
//!   probes (`tcp_schedule_loss_probe`, `tcp_send_loss_probe`).
//! - Undo of spurious recoveries (`tcp_try_undo_recovery`, `_dsack`, `_partial`, `_loss`)
//!   from D-SACKs (RFC 2883) and TCP timestamps (Eifel detection, RFC 3522), restoring cwnd
//!   through the congestion control's `undo_cwnd`. F-RTO (RFC 5682) is not modelled.
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
use crate::packet::EcnMode;
use crate::time::Time;
use std::collections::VecDeque;

/// Initial reordering degree, the DupThresh of RFC 6675 (sysctl `tcp_reordering`).
const TCP_REORDERING: u32 = 3;
/// Upper bound of `tp->reordering` (sysctl `tcp_max_reordering`).
const TCP_MAX_REORDERING: u32 = 300;
/// Recoveries a D-SACK-widened RACK window persists for (`TCP_RACK_RECOVERY_THRESH`).
const TCP_RACK_RECOVERY_THRESH: u32 = 16;
/// Linux `TCP_TIMEOUT_MIN`: 2 jiffies, taken at HZ = 1000.
const TCP_TIMEOUT_MIN: Time = Time(2_000_000);
/// End of the send-ordered list.
const NIL: u32 = u32::MAX;

const SACKED: u8 = 1;
const LOST: u8 = 2;
/// A retransmission of this segment is in flight (Linux `TCPCB_SACKED_RETRANS`).
const RETRANS: u8 = 4;
/// The segment has been retransmitted at least once (Linux `TCPCB_EVER_RETRANS`).
const EVER_RETRANS: u8 = 8;
const APP_LIMITED: u8 = 16;
/// The segment is on the send-ordered list RACK walks (Linux `tsorted_sent_queue`).
const TSORTED: u8 = 32;

/// Linux `tcp_skb_sent_after`: t1/seq1 was sent after t2/seq2.
fn sent_after(t1: Time, t2: Time, seq1: u32, seq2: u32) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

/// Linux `usecs_to_jiffies` at HZ = 1000: round up to whole milliseconds.
fn jiffies_up(t: Time) -> Time {
    Time(t.0.div_ceil(1_000_000) * 1_000_000)
}

/// Whether the first SACK block is a D-SACK (Linux `tcp_check_dsack`, RFC 2883 §4): below
/// the cumulative ACK, or inside the second block.
fn is_dsack(blocks: &[SackBlock], ack: u32) -> bool {
    let b0 = blocks[0];
    b0.start < ack || (blocks.len() > 1 && b0.end <= blocks[1].end && b0.start >= blocks[1].start)
}

/// What one ACK did (Linux `FLAG_*` of `tcp_ack`).
#[derive(Clone, Copy, Debug, Default)]
struct AckFlags {
    prior_una: u32,
    una_advanced: bool,
    data_sacked: bool,
    dsack: bool,
    dsack_tlp: bool,
    ece: bool,
    set_xmit_timer: bool,
    lost_retrans: bool,
}

/// What `transmit` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxKind {
    New,
    /// A retransmission of a segment marked lost (`tcp_retransmit_skb`).
    Retrans,
    /// A loss probe re-sending the last segment (`__tcp_retransmit_skb`: not counted in
    /// `retrans_out`, not marked lost).
    Probe,
}

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
    /// Neighbours on the send-ordered list (segment numbers, `NIL` at the ends).
    ts_prev: u32,
    ts_next: u32,
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
    /// Duplicate segments reported by (non-dubious) D-SACKs: spurious retransmissions.
    pub dsack_segments: u64,
    /// Reductions undone (`tcp_undo_cwnd_reduction`).
    pub undos: u64,
    /// Tail loss probes sent.
    pub loss_probes: u64,
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
    /// Send-ordered list of outstanding segments (Linux `tsorted_sent_queue`).
    ts_head: u32,
    ts_tail: u32,
    /// End of the highest SACKed segment (Linux `tcp_highest_sack_seq`).
    highest_sack: u32,
    // RACK (`tp->rack`): send time and number of the most recently sent delivered segment,
    // RTT of the latest delivery, and the reordering-window state.
    rack_mstamp: Time,
    rack_end_seq: u32,
    rack_rtt: Time,
    rack_advanced: bool,
    reo_wnd_steps: u32,
    reo_wnd_persist: u32,
    rack_dsack_seen: bool,
    rack_last_delivered: u64,
    /// Reordering degree in segments (`tp->reordering`) and times reordering was seen
    /// (`tp->reord_seen`).
    reordering: u32,
    reord_seen: u32,
    // Undo (`undo_marker`, `undo_retrans`, `prior_ssthresh`, `retrans_stamp` in TS ticks).
    undo_marker: Option<u32>,
    undo_retrans: i32,
    prior_ssthresh: u32,
    retrans_stamp: Option<u32>,
    /// Duplicate segments D-SACKed so far (`tp->dsack_dups`).
    dsack_dups: u64,
    /// TSecr of the ACK being processed (`rx_opt.rcv_tsecr`).
    rcv_tsecr: u32,
    // Tail loss probe: the RTO timer currently runs as the probe timer
    // (`ICSK_TIME_LOSS_PROBE`), `tlp_high_seq`, `tlp_retrans`.
    tlp_pending: bool,
    tlp_high_seq: Option<u32>,
    tlp_retrans: bool,
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
            ts_head: NIL,
            ts_tail: NIL,
            highest_sack: 0,
            rack_mstamp: Time::ZERO,
            rack_end_seq: 0,
            rack_rtt: Time::ZERO,
            rack_advanced: false,
            reo_wnd_steps: 1,
            reo_wnd_persist: 0,
            rack_dsack_seen: false,
            rack_last_delivered: 0,
            reordering: TCP_REORDERING,
            reord_seen: 0,
            undo_marker: None,
            undo_retrans: 0,
            prior_ssthresh: 0,
            retrans_stamp: None,
            dsack_dups: 0,
            rcv_tsecr: 0,
            tlp_pending: false,
            tlp_high_seq: None,
            tlp_retrans: false,
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
    /// The reordering degree in segments (`tp->reordering`).
    pub fn reordering(&self) -> u32 {
        self.reordering
    }
    /// How often reordering was seen (`tp->reord_seen`).
    pub fn reord_seen(&self) -> u32 {
        self.reord_seen
    }
    /// The current RACK reordering window (`tcp_rack_reo_wnd`).
    pub fn reo_wnd(&self) -> Time {
        self.rack_reo_wnd()
    }
    /// Linux `tcp_packets_in_flight` inputs: (sacked_out, lost_out, retrans_out).
    pub fn scoreboard_counts(&self) -> (u32, u32, u32) {
        (self.sacked_out, self.lost_out, self.retrans_out)
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
                    if self.tlp_pending && self.phase == Phase::Established {
                        self.tp.now = ctx.now;
                        self.send_loss_probe(ctx);
                    } else {
                        self.tlp_pending = false;
                        self.on_rto(ctx);
                    }
                }
            }
            FlowTimer::Pacing => {
                if self.pacing_timer.fire(ctx.now, ctx.event(t), ctx.events) {
                    self.try_send(ctx);
                }
            }
            FlowTimer::Reorder => {
                if self.reorder_timer.fire(ctx.now, ctx.event(t), ctx.events) && self.phase == Phase::Established && self.packets_out() > 0 {
                    self.rack_reo_timeout(ctx);
                }
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------- ACK processing

    fn on_ack(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        let ack = pkt.tcp.seq;
        if ack > self.snd_nxt {
            return; // Acknowledges data never sent; Linux discards it.
        }
        self.tp.now = now;
        self.rcv_tsecr = pkt.tcp.ts_ecr;
        let old_ack = ack < self.snd_una;
        let prior_in_flight = self.in_flight();
        let prior_una = self.snd_una;
        let prior_fack = self.fack();
        let lost_before = self.lost_total;
        let mut fl = AckFlags { prior_una, ..AckFlags::default() };
        let mut rs = RateSample { prior_in_flight, ..RateSample::default() };
        let mut prior: Option<(u64, u64, Time)> = None;
        let mut delivered_now = 0u32;
        // Send times of the oldest and newest newly ACKed / SACKed never-retransmitted
        // segments (Linux first_ackt/last_ackt, first_sackt/last_sackt).
        let mut ackt: Option<(Time, Time)> = None;
        let mut sackt: Option<(Time, Time)> = None;
        let widen = |r: Option<(Time, Time)>, t: Time| Some(r.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));

        // SACK blocks (Linux tcp_sacktag_write_queue), the lowest reordered segment in `reord`.
        let n = pkt.tcp.sack_len as usize;
        let blocks = pkt.tcp.sacks;
        let mut reord = self.snd_nxt;
        let mut first = 0;
        // The part of a D-SACK block still in the window (segments not cumulatively ACKed).
        let mut dsack_in_window = 0..0;
        if n > 0 && is_dsack(&blocks[..n], ack) {
            // tcp_check_dsack: the first block reports a duplicate (RFC 2883).
            first = 1;
            let d = blocks[0];
            let dup_segs = self.dsack_seen(d, &mut fl);
            if dup_segs > 0 {
                fl.dsack = true;
                // "A spurious retransmission is delivered" (sack_delivered).
                delivered_now += dup_segs;
                self.tp.delivered += dup_segs as u64;
                // D-SACK for data already cumulatively ACKed: dumb counting.
                if let Some(m) = self.undo_marker {
                    if self.undo_retrans > 0 && d.end <= prior_una && d.end > m {
                        self.undo_retrans = (self.undo_retrans - dup_segs as i32).max(0);
                    }
                }
                // tcp_sacktag_one with dup_sack for segments still in the window.
                dsack_in_window = d.start.max(self.snd_una)..d.end.min(self.snd_nxt);
                for s in dsack_in_window.clone() {
                    let f = self.seg(s).flags;
                    if f & EVER_RETRANS != 0 {
                        if let Some(m) = self.undo_marker {
                            if self.undo_retrans > 0 && s + 1 > m {
                                self.undo_retrans -= 1;
                            }
                        }
                        if f & SACKED != 0 && s < reord {
                            reord = s;
                        }
                    }
                }
            }
        }
        let mut regular = [SackBlock::default(); MAX_SACK_BLOCKS];
        let nreg = n.saturating_sub(first);
        regular[..nreg].copy_from_slice(&blocks[first..n]);
        regular[..nreg].sort_by_key(|b| b.start);
        for b in &regular[..nreg] {
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
                    self.rack_advance(seg.flags, s, seg.tx_time, now);
                    if seg.flags & EVER_RETRANS == 0 {
                        // A never-retransmitted segment SACKed below the highest SACKed one
                        // filled a hole: reordering.
                        if s < self.fack() && s < reord {
                            reord = s;
                        }
                        sackt = widen(sackt, seg.tx_time);
                    }
                    self.mark_sacked(s);
                    fl.data_sacked = true;
                    delivered_now += 1;
                    self.rate_skb_delivered(&seg, &mut rs, &mut prior);
                }
                s += 1;
            }
        }
        // The end of tcp_sacktag_one with dup_sack: a D-SACKed segment that is SACKed (here
        // by a regular block, of this or an earlier ACK) and still counted as a
        // retransmission in flight (S|R) was a redundant retransmission: it is not in flight.
        for s in dsack_in_window {
            let f = self.seg(s).flags;
            if f & (SACKED | RETRANS) == SACKED | RETRANS {
                self.seg_mut(s).flags &= !RETRANS;
                self.retrans_out -= 1;
            }
        }
        if n > 0 {
            self.sack_cache = [SackBlock::default(); MAX_SACK_BLOCKS];
            self.sack_cache[..nreg].copy_from_slice(&regular[..nreg]);
            if self.tp.ca_state != CaState::Loss || self.undo_marker.is_some() {
                self.check_sack_reordering(reord, false);
            }
        }
        if old_ack {
            // Linux tcp_ack: an old ACK's SACK information is still used.
            if n > 0 {
                self.sync_tp(now);
                self.fastretrans_alert(&mut fl, ctx);
                self.try_send(ctx);
            }
            return;
        }

        // Cumulative ACK (Linux tcp_clean_rtx_queue).
        let mut retrans_acked = false;
        let mut reord = self.snd_nxt;
        while self.snd_una < ack {
            self.ts_unlink(self.snd_una);
            let seg = self.sb.pop_front().expect("scoreboard covers snd_una..snd_nxt");
            if seg.flags & SACKED != 0 {
                self.sacked_out -= 1;
            } else {
                delivered_now += 1;
                self.tp.delivered += 1;
                self.rate_skb_delivered(&seg, &mut rs, &mut prior);
                if !self.spurious_retrans(&seg) {
                    self.rack_advance(seg.flags, self.snd_una, seg.tx_time, now);
                }
                if seg.flags & EVER_RETRANS != 0 {
                    retrans_acked = true;
                } else {
                    ackt = widen(ackt, seg.tx_time);
                    reord = reord.min(self.snd_una);
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
        self.retransmit_hint = self.retransmit_hint.max(self.snd_una);
        let una_advanced = pkts_acked > 0;
        fl.una_advanced = una_advanced;
        if una_advanced && reord < prior_fack {
            // Non-retransmitted hole got filled: that's reordering.
            self.check_sack_reordering(reord, false);
        }
        if prior.is_some() {
            self.rack_update_reo_wnd(rs.prior_delivered);
        }

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
        fl.ece = ece;

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
        // Re-arm the RTO (or schedule a loss probe) on forward progress, or when a SACK reports
        // data sent before the head's latest retransmission (Linux FLAG_SET_XMIT_TIMER).
        let head_sent_after_sacked = sack_rtt.is_some_and(|r| self.sb.front().is_some_and(|h| r > now - h.tx_time));
        fl.set_xmit_timer = una_advanced || head_sent_after_sacked;

        self.sync_tp(now);
        let sample = AckSample { acked: pkts_acked, acked_ce: ce_delta, acked_sce: sce_delta, rtt: ca_rtt, prior_in_flight, ece: pkt.tcp.ece && self.cfg.ecn.is_on() };
        self.cc.pkts_acked(&mut self.tp, &sample);

        // Tail loss probe outcome (Linux tcp_process_tlp_ack), then loss detection and the
        // state machine (tcp_fastretrans_alert) when the ACK is "dubious".
        if let Some(h) = self.tlp_high_seq {
            self.process_tlp_ack(ack, h, &fl);
        }
        if !una_advanced || fl.data_sacked || fl.dsack || ece || self.tp.ca_state != CaState::Open {
            self.fastretrans_alert(&mut fl, ctx);
        }
        if fl.set_xmit_timer {
            self.set_xmit_timer(ctx);
        }
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

        // cwnd (Linux tcp_cong_control). A `cong_control` algorithm sees the raw
        // `tp->is_cwnd_limited` flag and may mark the flow application-limited.
        self.sync_tp(now);
        // Linux tcp_is_cwnd_limited() and the raw tp->is_cwnd_limited flag it starts from.
        self.tp.is_cwnd_limited = self.is_cwnd_limited();
        self.tp.cwnd_limited_flag = self.cwnd_limited;
        if self.cc.cong_control(&mut self.tp, &rs) {
            self.app_limited_until = self.tp.app_limited;
        } else if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.cwnd_reduction(delivered_now, newly_lost, una_advanced);
        } else if self.may_raise_cwnd(&fl) {
            self.cc.cong_avoid(&mut self.tp, delivered_now);
        }
        self.update_pacing_rate();

        if let Some(n) = self.total_segs {
            if self.snd_una >= n && self.stats.completed_at.is_none() {
                self.stats.completed_at = Some(now);
                self.rto_timer.cancel();
                self.tlp_pending = false;
            }
        }
        self.try_send(ctx);
    }

    /// Linux `tcp_may_raise_cwnd`: with a reordering degree above the default, grow cwnd on any
    /// forward progress (ACKed or SACKed), otherwise only on in-order delivery (RFC 5681).
    fn may_raise_cwnd(&self, fl: &AckFlags) -> bool {
        if self.reordering > TCP_REORDERING {
            fl.una_advanced || fl.data_sacked
        } else {
            fl.una_advanced
        }
    }

    /// Linux `tcp_sacktag_one` for a newly SACKed segment: a retransmission not marked lost
    /// is still believed in flight (RETRANS kept until the cumulative ACK).
    fn mark_sacked(&mut self, seq: u32) {
        let mut flags = self.seg(seq).flags;
        if flags & RETRANS != 0 {
            if flags & LOST != 0 {
                flags &= !(LOST | RETRANS);
                self.lost_out -= 1;
                self.retrans_out -= 1;
            }
        } else if flags & LOST != 0 {
            flags &= !LOST;
            self.lost_out -= 1;
        }
        self.seg_mut(seq).flags = flags | SACKED;
        self.ts_unlink(seq);
        self.sacked_out += 1;
        self.tp.delivered += 1;
        self.highest_sack = self.highest_sack.max(seq + 1);
    }

    /// Linux `tcp_highest_sack_seq`: the end of the highest SACKed segment, or snd_una.
    fn fack(&self) -> u32 {
        self.highest_sack.max(self.snd_una)
    }

    /// Linux `tcp_check_sack_reordering`: a hole at `low_seq` below the highest SACKed
    /// segment was filled by the original transmission; raise `tp->reordering` to that
    /// distance (at most `tcp_max_reordering`) and remember that reordering was seen.
    fn check_sack_reordering(&mut self, low_seq: u32, _ts: bool) {
        let fack = self.fack();
        if low_seq >= fack {
            return;
        }
        let metric = fack - low_seq;
        if metric > self.reordering {
            self.reordering = metric.min(TCP_MAX_REORDERING);
        }
        self.reord_seen += 1;
    }

    /// Linux `tcp_dsack_seen`: the number of duplicate segments a D-SACK block reports, 0 for
    /// a dubious one (more duplicates than retransmissions); arms the RACK window growth
    /// when reordering has been seen and the D-SACK is not for a loss probe.
    fn dsack_seen(&mut self, d: SackBlock, fl: &mut AckFlags) -> u32 {
        if d.start >= d.end {
            return 0;
        }
        let dup_segs = d.end - d.start;
        if dup_segs == 1 && self.tlp_high_seq == Some(d.end) {
            fl.dsack_tlp = true;
        }
        self.dsack_dups += dup_segs as u64;
        if self.dsack_dups > self.stats.retransmits {
            return 0;
        }
        if self.reord_seen > 0 && !fl.dsack_tlp {
            self.rack_dsack_seen = true;
        }
        self.stats.dsack_segments += dup_segs as u64;
        dup_segs
    }

    /// Linux `tcp_mark_skb_lost`: mark a segment lost, or a lost retransmission lost again.
    fn mark_skb_lost(&mut self, seq: u32) {
        let flags = self.seg(seq).flags;
        if flags & SACKED != 0 {
            return;
        }
        if flags & LOST != 0 {
            if flags & RETRANS == 0 {
                return;
            }
            // A retransmission lost again: due for another retransmission.
            self.seg_mut(seq).flags &= !RETRANS;
            self.retrans_out -= 1;
        } else {
            self.seg_mut(seq).flags |= LOST;
            self.lost_out += 1;
        }
        self.lost_total += 1;
        self.retransmit_hint = self.retransmit_hint.min(seq);
        let seg = *self.seg(seq);
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

    // ---------------------------------------------------------------- RACK (RFC 8985)

    /// Linux `tcp_rack_advance` (RFC 8985 §6.2 step 2): every delivered segment updates
    /// RACK.rtt, the most recently sent one RACK.xmit_ts / end_seq. A retransmission
    /// delivered in less than min_rtt is ambiguous (the original may have arrived) and is
    /// ignored.
    fn rack_advance(&mut self, flags: u8, seq: u32, xmit: Time, now: Time) {
        let rtt = now - xmit;
        if flags & EVER_RETRANS != 0 && rtt < self.tp.min_rtt {
            return;
        }
        self.rack_advanced = true;
        self.rack_rtt = rtt;
        if sent_after(xmit, self.rack_mstamp, seq, self.rack_end_seq) {
            self.rack_mstamp = xmit;
            self.rack_end_seq = seq;
        }
    }

    /// Linux `tcp_rack_reo_wnd` (RFC 8985 §6.2 step 4): no window while reordering has never
    /// been seen and the flow is in Recovery/Loss or has DupThresh (`tp->reordering`)
    /// segments SACKed; otherwise min_rtt/4 times the D-SACK-driven steps, at most srtt.
    fn rack_reo_wnd(&self) -> Time {
        if self.reord_seen == 0 {
            if matches!(self.tp.ca_state, CaState::Recovery | CaState::Loss) {
                return Time::ZERO;
            }
            if self.sacked_out >= self.reordering {
                return Time::ZERO;
            }
        }
        if self.tp.min_rtt == Time::MAX {
            return self.srtt;
        }
        Time((self.tp.min_rtt.0 / 4).saturating_mul(self.reo_wnd_steps as u64)).min(self.srtt)
    }

    /// Linux `tcp_rack_detect_loss` (RFC 8985 §6.2 step 5): walk the segments in send order;
    /// every one sent before the most recently sent delivered segment and outstanding longer
    /// than RACK.rtt + reo_wnd is lost. Returns the longest remaining wait of the others.
    fn rack_detect_loss(&mut self, now: Time) -> Time {
        let reo_wnd = self.rack_reo_wnd();
        let mut timeout = Time::ZERO;
        let mut seq = self.ts_head;
        while seq != NIL {
            let seg = *self.seg(seq);
            let next = seg.ts_next;
            // Skip ones marked lost but not yet retransmitted.
            if seg.flags & (LOST | RETRANS) == LOST {
                seq = next;
                continue;
            }
            if !sent_after(self.rack_mstamp, seg.tx_time, self.rack_end_seq, seq) {
                break;
            }
            let deadline = seg.tx_time + self.rack_rtt + reo_wnd;
            if deadline <= now {
                self.mark_skb_lost(seq);
                self.ts_unlink(seq);
            } else {
                timeout = timeout.max(deadline - now);
            }
            seq = next;
        }
        timeout
    }

    /// Linux `tcp_rack_mark_lost`: detect losses when RACK advanced; arm the reordering timer
    /// (`ICSK_TIME_REO_TIMEOUT`, jiffies-rounded + `TCP_TIMEOUT_MIN`) for the others.
    fn rack_mark_lost(&mut self, ctx: &mut EndpointCtx) -> bool {
        if !self.rack_advanced {
            return false;
        }
        self.rack_advanced = false;
        let timeout = self.rack_detect_loss(ctx.now);
        if timeout > Time::ZERO {
            // inet_csk_reset_xmit_timer(.., max_when = icsk_rto): no later than one RTO.
            let at = ctx.now + (jiffies_up(timeout) + TCP_TIMEOUT_MIN).min(self.rto);
            self.reorder_timer.arm(at, ctx.event(FlowTimer::Reorder), ctx.events);
            return true;
        }
        false
    }

    /// Linux `tcp_rack_reo_timeout`: the reordering window has passed; mark the expired
    /// segments lost, enter Recovery if not in it yet, and retransmit.
    fn rack_reo_timeout(&mut self, ctx: &mut EndpointCtx) {
        self.sync_tp(ctx.now);
        let prior_inflight = self.in_flight();
        self.rack_detect_loss(ctx.now);
        if prior_inflight != self.in_flight() {
            if self.tp.ca_state != CaState::Recovery {
                self.enter_recovery(false);
                if !self.cc.has_cong_control() {
                    self.cwnd_reduction(1, 0, false);
                }
            }
            self.try_send(ctx);
        }
    }

    /// Linux `tcp_rack_update_reo_wnd`: a D-SACK seen (after reordering) grows the window by
    /// one min_rtt/4 step, at most once per round trip; the steps persist for 16 recoveries
    /// (`TCP_RACK_RECOVERY_THRESH`) and then fall back to one.
    fn rack_update_reo_wnd(&mut self, prior_delivered: u64) {
        if prior_delivered == 0 {
            return;
        }
        // Disregard a D-SACK if a round trip has not passed since the last adjustment.
        if prior_delivered < self.rack_last_delivered {
            self.rack_dsack_seen = false;
        }
        if self.rack_dsack_seen {
            self.reo_wnd_steps = (self.reo_wnd_steps + 1).min(0xFF);
            self.rack_dsack_seen = false;
            self.rack_last_delivered = self.tp.delivered;
            self.reo_wnd_persist = TCP_RACK_RECOVERY_THRESH;
        } else if self.reo_wnd_persist == 0 {
            self.reo_wnd_steps = 1;
        }
    }

    /// Linux `tcp_identify_packet_loss` with RACK (`tcp_recovery` = 1); returns whether a
    /// retransmission was found lost (FLAG_LOST_RETRANS).
    fn identify_packet_loss(&mut self, fl: &mut AckFlags, ctx: &mut EndpointCtx) -> bool {
        if self.packets_out() == 0 {
            return false;
        }
        let prior_retrans = self.retrans_out;
        if self.rack_mark_lost(ctx) {
            fl.set_xmit_timer = false;
        }
        let lost_retrans = prior_retrans > self.retrans_out;
        fl.lost_retrans |= lost_retrans;
        lost_retrans
    }

    // ---------------------------------------------------------------- state machine

    /// Linux `tcp_fastretrans_alert` with SACK and RACK: end of episodes and undo (D), then
    /// per state loss detection and entry into Recovery (E). RFC 6675's DupThresh marking
    /// (`tcp_update_scoreboard`) is not used with RACK; DupThresh only zeroes the RACK
    /// reordering window (`tcp_rack_reo_wnd`).
    fn fastretrans_alert(&mut self, fl: &mut AckFlags, ctx: &mut EndpointCtx) {
        // A. An ECN echo (with accurate feedback, a CE counter increase) requires the
        // reduction: no later undo may restore cwnd/ssthresh.
        if fl.ece {
            self.prior_ssthresh = 0;
        }
        // D. Check state exit conditions.
        if self.tp.ca_state == CaState::Open {
            self.retrans_stamp = None;
        } else if self.snd_una >= self.high_seq {
            match self.tp.ca_state {
                // CWR is held until something *above* high_seq is ACKed, so that the CWR
                // flag has reached the receiver.
                CaState::Cwr if self.snd_una != self.high_seq => {
                    self.end_cwnd_reduction();
                    self.set_state(CaState::Open);
                }
                CaState::Recovery => {
                    self.try_undo_recovery();
                    self.end_cwnd_reduction();
                }
                _ => {}
            }
        }
        // E. Process state.
        match self.tp.ca_state {
            CaState::Recovery => {
                if fl.una_advanced && self.try_undo_partial(fl.prior_una) {
                    return;
                }
                if self.try_undo_dsack() {
                    self.try_to_open(fl.ece);
                }
                self.identify_packet_loss(fl, ctx);
                if self.tp.ca_state != CaState::Recovery {
                    if self.lost_out == 0 {
                        return;
                    }
                    // Undo reverted the recovery; evident loss starts a new one.
                    self.enter_recovery(fl.ece);
                }
            }
            CaState::Loss => {
                self.process_loss(fl);
                let lost_retrans = self.identify_packet_loss(fl, ctx);
                // Change state if cwnd is undone or retransmissions are lost.
                if self.tp.ca_state == CaState::Open || lost_retrans {
                    self.alert_open_disorder_cwr(fl, ctx);
                }
            }
            _ => self.alert_open_disorder_cwr(fl, ctx),
        }
    }

    /// The `default:` branch of `tcp_fastretrans_alert` (Open, Disorder, CWR).
    fn alert_open_disorder_cwr(&mut self, fl: &mut AckFlags, ctx: &mut EndpointCtx) {
        if matches!(self.tp.ca_state, CaState::Open | CaState::Disorder) {
            self.try_undo_dsack();
        }
        self.identify_packet_loss(fl, ctx);
        // tcp_time_to_recover with RACK: "the loss is proven".
        if self.lost_out == 0 {
            self.try_to_open(fl.ece);
            return;
        }
        self.enter_recovery(fl.ece);
    }

    /// Linux `tcp_try_to_open`: enter CWR on an ECN echo (at most once per window), else Open
    /// or Disorder.
    fn try_to_open(&mut self, ece: bool) {
        if !self.any_retrans_done() {
            self.retrans_stamp = None;
        }
        if ece && matches!(self.tp.ca_state, CaState::Open | CaState::Disorder) {
            // tcp_enter_cwr.
            self.prior_ssthresh = 0;
            self.undo_marker = None;
            self.init_cwnd_reduction();
            self.stats.cwr_reductions += 1;
            self.set_state(CaState::Cwr);
        }
        if self.tp.ca_state != CaState::Cwr {
            self.try_keep_open();
        }
    }

    /// Linux `tcp_try_keep_open`: Disorder while SACKed/lost segments or retransmissions
    /// remain, else Open.
    fn try_keep_open(&mut self) {
        let state = if self.sacked_out + self.lost_out > 0 || self.any_retrans_done() { CaState::Disorder } else { CaState::Open };
        if self.tp.ca_state != state {
            self.set_state(state);
            self.high_seq = self.snd_nxt;
        }
    }

    /// Linux `tcp_any_retrans_done`.
    fn any_retrans_done(&self) -> bool {
        self.retrans_out > 0 || self.sb.front().is_some_and(|s| s.flags & EVER_RETRANS != 0)
    }

    /// Linux `tcp_enter_recovery`: a reduction already under way (CWR) continues with its
    /// ssthresh and recovery point; otherwise remember ssthresh for undo and start PRR.
    fn enter_recovery(&mut self, ece: bool) {
        // tcp_retrans_stamp_cleanup: start the clock with this episode's fast retransmit
        // (for undo) unless retransmissions of an earlier one are still out.
        if !self.any_retrans_done() {
            self.retrans_stamp = None;
        }
        self.stats.fast_recoveries += 1;
        self.prior_ssthresh = 0;
        self.init_undo();
        if !matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            if !ece {
                self.prior_ssthresh = self.current_ssthresh();
            }
            self.init_cwnd_reduction();
        }
        self.set_state(CaState::Recovery);
    }

    /// Linux `tcp_current_ssthresh`.
    fn current_ssthresh(&self) -> u32 {
        if matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery) {
            self.tp.ssthresh
        } else {
            self.tp.ssthresh.max((self.tp.cwnd >> 1) + (self.tp.cwnd >> 2))
        }
    }

    /// Linux `tcp_init_undo`: retransmissions still in flight, a TLP retransmission among
    /// them, may cause D-SACKs later; 0 would mean "can undo now", so none is -1.
    fn init_undo(&mut self) {
        self.undo_marker = Some(self.snd_una);
        let mut n = self.retrans_out as i32;
        if self.tlp_high_seq.is_some() && self.tlp_retrans {
            n += 1;
        }
        self.undo_retrans = if n > 0 { n } else { -1 };
    }

    /// Linux `tcp_end_cwnd_reduction`: cwnd = ssthresh after CWR or an un-undone Recovery.
    fn end_cwnd_reduction(&mut self) {
        if self.cc.has_cong_control() {
            return;
        }
        if self.tp.ssthresh < u32::MAX && (self.tp.ca_state == CaState::Cwr || self.undo_marker.is_some()) {
            self.tp.cwnd = self.tp.ssthresh.max(1).min(self.tp.cwnd_clamp);
        }
        self.cc.cwnd_event(&mut self.tp, CaEvent::CompleteCwr);
    }

    /// TCP timestamps in 1 ms ticks, offset by one so that zero means "no timestamp".
    fn ts_of(t: Time) -> u32 {
        (t.0 / 1_000_000) as u32 + 1
    }

    /// Linux `tcp_tsopt_ecr_before`: the ACK echoes a timestamp older than `when`.
    fn tsecr_before(&self, when: u32) -> bool {
        self.rcv_tsecr != 0 && (self.rcv_tsecr.wrapping_sub(when) as i32) < 0
    }

    /// Linux `tcp_packet_delayed` (Eifel detection, RFC 3522; 6.12+): the ACK was triggered
    /// by an original transmission sent before the episode's first retransmission, or nothing
    /// was retransmitted at all (no `retrans_stamp`). Linux's exceptions for a cleared stamp
    /// (non-SACK reopening, SYN_SENT) do not arise here: SACK is always on and the handshake
    /// does not use this path.
    fn packet_delayed(&self) -> bool {
        match self.retrans_stamp {
            Some(w) => self.tsecr_before(w),
            None => true,
        }
    }

    /// Linux `tcp_skb_spurious_retrans`: a retransmitted segment whose ACK echoes an earlier
    /// transmission (it does not advance RACK).
    fn spurious_retrans(&self, seg: &Seg) -> bool {
        seg.flags & EVER_RETRANS != 0 && self.tsecr_before(Self::ts_of(seg.tx_time))
    }

    /// Linux `tcp_may_undo`: no retransmission of the episode was needed (each D-SACKed) or
    /// the timestamps show the original arrived.
    fn may_undo(&self) -> bool {
        self.undo_marker.is_some() && (self.undo_retrans == 0 || self.packet_delayed())
    }

    /// Linux `tcp_undo_cwnd_reduction`: restore cwnd (the CC's `undo_cwnd`) and ssthresh.
    fn undo_cwnd_reduction(&mut self, unmark_loss: bool) {
        if unmark_loss {
            for s in self.sb.iter_mut() {
                s.flags &= !LOST;
            }
            self.lost_out = 0;
            self.retransmit_hint = self.snd_una;
        }
        if self.prior_ssthresh != 0 {
            self.sync_tp(self.tp.now);
            self.tp.cwnd = self.cc.undo_cwnd(&self.tp).min(self.tp.cwnd_clamp);
            if self.prior_ssthresh > self.tp.ssthresh {
                self.tp.ssthresh = self.prior_ssthresh;
                // tcp_ecn_withdraw_cwr.
                self.queue_cwr = false;
            }
        }
        self.undo_marker = None;
        // Force RACK to re-examine losses.
        self.rack_advanced = true;
        self.stats.undos += 1;
    }

    /// Linux `tcp_try_undo_recovery`: at the end of Recovery/Loss, undo if every
    /// retransmission proved unnecessary; then Open.
    fn try_undo_recovery(&mut self) {
        if self.may_undo() {
            self.undo_cwnd_reduction(false);
        } else if self.reo_wnd_persist > 0 {
            self.reo_wnd_persist -= 1;
        }
        self.set_state(CaState::Open);
    }

    /// Linux `tcp_try_undo_dsack`: D-SACKs have covered every retransmission.
    fn try_undo_dsack(&mut self) -> bool {
        if self.undo_marker.is_some() && self.undo_retrans == 0 {
            self.reo_wnd_persist = (self.reo_wnd_persist + 1).min(TCP_RACK_RECOVERY_THRESH);
            self.undo_cwnd_reduction(false);
            return true;
        }
        false
    }

    /// Linux `tcp_try_undo_partial`: the hole was filled by the delayed original (timestamps):
    /// reordering, and undo once no retransmission is in flight. Returns true to stop
    /// further loss marking on this ACK.
    fn try_undo_partial(&mut self, prior_una: u32) -> bool {
        if self.undo_marker.is_some() && self.packet_delayed() {
            self.check_sack_reordering(prior_una, true);
            if self.retrans_out > 0 {
                return true;
            }
            if !self.any_retrans_done() {
                self.retrans_stamp = None;
            }
            self.undo_cwnd_reduction(true);
            self.try_keep_open();
        }
        false
    }

    /// Linux `tcp_try_undo_loss` (without F-RTO).
    fn try_undo_loss(&mut self) -> bool {
        if self.may_undo() {
            self.undo_cwnd_reduction(true);
            self.set_state(CaState::Open);
            return true;
        }
        false
    }

    /// Linux `tcp_process_loss` without F-RTO (RFC 5682 is not modelled): undo on forward
    /// progress when the timestamps show a spurious timeout; end of Loss at high_seq.
    fn process_loss(&mut self, fl: &AckFlags) {
        let recovered = self.snd_una >= self.high_seq;
        if fl.una_advanced && self.try_undo_loss() {
            return;
        }
        if recovered {
            self.try_undo_recovery();
        }
    }

    // ---------------------------------------------------------------- tail loss probe

    /// Linux `tcp_set_xmit_timer`: a loss probe if one may be scheduled, else the RTO.
    fn set_xmit_timer(&mut self, ctx: &mut EndpointCtx) {
        if !self.schedule_loss_probe(true, ctx) {
            self.rearm_rto(ctx);
        }
    }

    /// Linux `tcp_rearm_rto`: the RTO from now, or (after a probe or reordering timer) from
    /// the head's transmission.
    fn rearm_rto(&mut self, ctx: &mut EndpointCtx) {
        if self.packets_out() == 0 {
            self.rto_timer.cancel();
            self.tlp_pending = false;
            return;
        }
        let mut rto = self.rto;
        if self.tlp_pending {
            let head = self.sb.front().map_or(ctx.now, |h| h.tx_time);
            rto = (head + self.rto).saturating_sub(ctx.now).max(Time(1));
        }
        self.tlp_pending = false;
        self.rto_timer.arm(ctx.now + rto, ctx.event(FlowTimer::Retransmit), ctx.events);
    }

    /// Linux `tcp_schedule_loss_probe` (RFC 8985 §7.2, `tcp_early_retrans` = 3): in Open or
    /// CWR with data outstanding, PTO = 2·srtt plus `TCP_RTO_MIN` when one segment is out
    /// (delayed-ACK allowance) or `TCP_TIMEOUT_MIN` otherwise, but no later than the RTO.
    fn schedule_loss_probe(&mut self, advancing_rto: bool, ctx: &mut EndpointCtx) -> bool {
        if self.packets_out() == 0 || !matches!(self.tp.ca_state, CaState::Open | CaState::Cwr) {
            return false;
        }
        let mut timeout = if self.srtt > Time::ZERO {
            let extra = if self.packets_out() == 1 { self.cfg.rto_min } else { TCP_TIMEOUT_MIN };
            jiffies_up(Time(2 * self.srtt.0)) + extra
        } else {
            self.cfg.rto_initial
        };
        let rto_delta = if advancing_rto {
            self.rto
        } else {
            let head = self.sb.front().map_or(ctx.now, |h| h.tx_time);
            (head + self.rto).saturating_sub(ctx.now)
        };
        if rto_delta > Time::ZERO {
            timeout = timeout.min(jiffies_up(rto_delta));
        }
        self.tlp_pending = true;
        self.rto_timer.arm(ctx.now + timeout, ctx.event(FlowTimer::Retransmit), ctx.events);
        true
    }

    /// Linux `tcp_send_loss_probe`: one probe per tail-loss episode, new data if the
    /// application has some and the receive window allows (`tcp_write_xmit` with push_one = 2:
    /// cwnd ignored, pacing honoured), else a retransmission of the last segment, SACKed or
    /// not (`skb_rb_last`). When pacing holds the new segment back, no probe is recorded and
    /// the RTO is re-armed from the head's transmission.
    fn send_loss_probe(&mut self, ctx: &mut EndpointCtx) {
        if self.tlp_high_seq.is_none() && self.packets_out() > 0 {
            self.tlp_retrans = false;
            let mut sent = false;
            if self.has_new_data() && self.cfg.rwnd_packets.map_or(true, |w| self.packets_out() < w) {
                let paced = self.tp.paced && self.tp.pacing_rate > 0.0;
                if paced && self.wstamp > ctx.now {
                    // tcp_pacing_check: the pacing timer sends it later.
                    self.pacing_timer.arm(self.wstamp, ctx.event(FlowTimer::Pacing), ctx.events);
                } else {
                    let seq = self.snd_nxt;
                    self.transmit(seq, TxKind::New, paced, ctx);
                    sent = true;
                }
            } else {
                let last = self.snd_nxt - 1;
                self.transmit(last, TxKind::Probe, false, ctx);
                self.tlp_retrans = true;
                sent = true;
            }
            if sent {
                self.tlp_high_seq = Some(self.snd_nxt);
                self.stats.loss_probes += 1;
                // Restart the RTO from now.
                self.tlp_pending = false;
            }
        }
        self.rearm_rto(ctx);
    }

    /// Linux `tcp_process_tlp_ack`: a probe that repaired a loss (the ACK goes beyond it)
    /// costs one cwnd reduction; a D-SACK or a pure duplicate ACK shows no loss.
    fn process_tlp_ack(&mut self, ack: u32, tlp_high_seq: u32, fl: &AckFlags) {
        if ack < tlp_high_seq {
            return;
        }
        if !self.tlp_retrans || fl.dsack_tlp {
            self.tlp_high_seq = None;
        } else if ack > tlp_high_seq {
            self.init_cwnd_reduction();
            self.set_state(CaState::Cwr);
            self.end_cwnd_reduction();
            self.try_keep_open();
        } else if !(fl.una_advanced || fl.data_sacked) {
            self.tlp_high_seq = None;
        }
    }

    /// Linux `tcp_init_cwnd_reduction`: recovery point, PRR state, ssthresh, queue CWR.
    fn init_cwnd_reduction(&mut self) {
        self.sync_tp(self.tp.now);
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = None;
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
        // tcp_enter_loss: a new episode saves what undo needs and reduces ssthresh.
        if matches!(state, CaState::Open | CaState::Disorder) || self.snd_una >= self.high_seq || (state == CaState::Loss && self.backoff == 1) {
            self.prior_ssthresh = self.current_ssthresh();
            self.prior_cwnd = self.tp.cwnd;
            self.tp.ssthresh = self.cc.ssthresh(&self.tp);
            self.cc.cwnd_event(&mut self.tp, CaEvent::Loss);
            self.init_undo();
        }
        // A timeout in Disorder after many SACKs: the reordering degree was over-estimated.
        if matches!(state, CaState::Open | CaState::Disorder) && self.sacked_out >= TCP_REORDERING {
            self.reordering = self.reordering.min(TCP_REORDERING);
        }
        // tcp_timeout_mark_lost: every segment not SACKed is lost, except (with RACK) those
        // sent within the last RACK.rtt, the head always included.
        for seq in self.snd_una..self.snd_nxt {
            let seg = *self.seg(seq);
            if seg.flags & SACKED != 0 {
                continue;
            }
            if seq != self.snd_una && seg.tx_time + self.rack_rtt > ctx.now {
                continue;
            }
            self.mark_skb_lost(seq);
        }
        self.retransmit_hint = self.snd_una;
        self.tlp_high_seq = None;
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
        let mut sent_new = 0;
        loop {
            if paced && self.wstamp > now {
                self.pacing_timer.arm(self.wstamp, ctx.event(FlowTimer::Pacing), ctx.events);
                break;
            }
            if self.in_flight() >= self.tp.cwnd {
                break;
            }
            let (seq, kind) = if let Some(s) = self.next_retransmit() {
                (s, TxKind::Retrans)
            } else if self.has_new_data() && self.cfg.rwnd_packets.map_or(true, |w| self.packets_out() < w) {
                sent_new += 1;
                (self.snd_nxt, TxKind::New)
            } else {
                // Nothing to send while cwnd has room: application-limited (tcp_rate_check_app_limited).
                if !self.has_new_data() {
                    self.app_limited_until = (self.tp.delivered + self.in_flight() as u64).max(1);
                }
                break;
            };
            self.transmit(seq, kind, paced, ctx);
            sent += 1;
        }
        // tcp_write_xmit: new data sent schedules a loss probe (one per tail-loss episode).
        if sent_new > 0 {
            self.schedule_loss_probe(false, ctx);
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

    fn transmit(&mut self, seq: u32, kind: TxKind, paced: bool, ctx: &mut EndpointCtx) {
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
            ts_prev: NIL,
            ts_next: NIL,
        };
        let payload = self.payload_of(seq);
        let mut pkt = Packet::new(self.flow, Direction::Forward, Kind::Data, payload + self.cfg.header_bytes);
        pkt.tcp.seq = seq;
        pkt.tcp.payload = payload;
        pkt.tcp.ts_val = Self::ts_of(now);
        if kind != TxKind::New {
            let seg = self.seg_mut(seq);
            seg.flags = if kind == TxKind::Retrans {
                (seg.flags & (SACKED | TSORTED)) | LOST | RETRANS | EVER_RETRANS | snap.flags
            } else {
                (seg.flags & (SACKED | LOST | RETRANS | TSORTED)) | EVER_RETRANS | snap.flags
            };
            seg.tx_time = snap.tx_time;
            seg.delivered = snap.delivered;
            seg.delivered_ce = snap.delivered_ce;
            seg.delivered_time = snap.delivered_time;
            seg.first_tx = snap.first_tx;
            seg.tx_in_flight = snap.tx_in_flight;
            seg.tx_lost = snap.tx_lost;
            self.ts_push_back(seq);
            self.stats.retransmits += 1;
            if kind == TxKind::Retrans {
                self.retrans_out += 1;
                // The first retransmission of an episode (Linux tcp_retransmit_skb).
                if self.retrans_stamp.is_none() {
                    self.retrans_stamp = Some(pkt.tcp.ts_val);
                }
                // Retransmissions of the episode that D-SACKs may prove unnecessary.
                self.undo_retrans = self.undo_retrans.max(0) + 1;
                // tcp_xmit_retransmit_queue re-arms the RTO when the head is retransmitted.
                if seq == self.snd_una {
                    self.tlp_pending = false;
                    self.rto_timer.arm(now + self.rto, ctx.event(FlowTimer::Retransmit), ctx.events);
                }
            }
        } else {
            self.sb.push_back(snap);
            self.snd_nxt += 1;
            self.ts_push_back(seq);
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

    // ---------------------------------------------------------------- send-ordered list

    /// Removes a segment from the send-ordered list (Linux `list_del_init` of
    /// `tcp_tsorted_anchor`), if it is on it.
    fn ts_unlink(&mut self, seq: u32) {
        let seg = *self.seg(seq);
        if seg.flags & TSORTED == 0 {
            return;
        }
        if seg.ts_prev != NIL {
            self.seg_mut(seg.ts_prev).ts_next = seg.ts_next;
        } else {
            self.ts_head = seg.ts_next;
        }
        if seg.ts_next != NIL {
            self.seg_mut(seg.ts_next).ts_prev = seg.ts_prev;
        } else {
            self.ts_tail = seg.ts_prev;
        }
        let s = self.seg_mut(seq);
        s.flags &= !TSORTED;
        s.ts_prev = NIL;
        s.ts_next = NIL;
    }

    /// Moves a segment just (re)transmitted to the tail of the send-ordered list (Linux
    /// `tcp_update_skb_after_send`: `list_move_tail`).
    fn ts_push_back(&mut self, seq: u32) {
        self.ts_unlink(seq);
        let tail = self.ts_tail;
        if tail != NIL {
            self.seg_mut(tail).ts_next = seq;
        } else {
            self.ts_head = seq;
        }
        self.ts_tail = seq;
        let s = self.seg_mut(seq);
        s.ts_prev = tail;
        s.ts_next = NIL;
        s.flags |= TSORTED;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::Reno;
    use crate::event::EventQueue;

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
        assert_eq!(h.tx.snd_nxt, 10);
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
        let before = h.tx.retrans_out;
        // The receiver reports segment 1 twice: the retransmission was redundant.
        h.ack(22, 0, &[(1, 2), (1, 10)], false);
        assert_eq!(h.tx.seg(1).flags & RETRANS, 0);
        assert_eq!(h.tx.retrans_out, before - 1);
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
        assert_eq!(h.tx.snd_nxt, 10);
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
        h.tx.wstamp = Time::from_secs(100);
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
}
