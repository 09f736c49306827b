//! SCReAM v2 real-time media over UDP (RFC 8298 and its successor
//! draft-johansson-ccwg-rfc8298bis-screamv2), modelled on Ericsson's reference code
//! `EricssonResearch/scream` (read at commit c8f84c3d): `code/ScreamV2Tx.cpp` (the
//! congestion window, L4S and delay responses, pacing), `ScreamV2TxStream.cpp` (target
//! bitrate, RTP queue), `ScreamRx.cpp` (feedback), and the test tool `scream_sender.cpp`
//! (the video source, the microburst pacing loop and the defaults used here).
//!
//! One [`Scream`] holds both ends, as [`super::Probe`] does: the sender (video source, RTP
//! queue, [`ScreamTx`] controller, paced transmission) and the receiver (arrival log and
//! RFC 8888-style feedback). The feedback packet names the sequence range it reports; the
//! sender reads those packets' arrival times and ECN marks from the receiver's log, counting
//! only arrivals no later than the feedback was generated.
//!
//! See `docs/algorithms/scream.md` for what is modelled and every known difference.

use crate::event::{FlowTimer, Timer};
use crate::packet::{Direction, Ecn, Kind, Packet, SackBlock, UDP_IP_ETH};
use crate::rng::Stream;
use crate::tcp::EndpointCtx;
use crate::time::Time;
use std::collections::VecDeque;

/// RTP header bytes (`kRtpOverHead` / the test tool's `+ 12`).
pub const RTP_HEADER: u32 = 12;
/// Transmitted-packet history (`kMaxTxPackets`).
const TX_RING: usize = 4096;
/// Packets per feedback report (`scream_receiver`'s `nReportedRtpPackets`).
const REPORTED: u32 = 64;
/// Feedback after this many new RTP packets (`min(kReportedRtpPackets/2, ackDiff)`).
const FB_EVERY: u32 = 16;
/// Feedback at least this often (`kMaxRtcpInterval`); 20 ms before the first rate estimate.
const FB_INTERVAL: f64 = 0.040;
const FB_INTERVAL_INIT: f64 = 0.020;

// ScreamV2Tx.cpp constants.
const MIN_CONGESTION_BACKOFF_INTERVAL: f64 = 0.030; // kMinCongestionBackOffInterval_ntp
const SRTT_VIRTUAL: f64 = 0.025; // kSrttVirtual
const L4S_G_UP: f64 = 1.0 / 8.0;
const L4S_G_DOWN: f64 = 1.0 / 128.0;
const QDELAY_AVG_ALPHA: f64 = 1.0 / 4.0;
const QDELAY_MIN_SLOW_AVG_ALPHA: f64 = 1.0 / 8.0;
const QDELAY_MIN_SLOW_AVG_UPDATE_RTTS: f64 = 100.0;
const LATENCY_DIFF_ALPHA: f64 = 1.0 / 32.0;
const QDELAY_MIN_MAX_ALPHA: f64 = 1.0 / 16.0;
const LATENCY_DIFF_THRESHOLD: f64 = 0.01;
const POST_CONGESTION_DELAY_RTTS: f64 = 200.0;
const MIN_WINDOW_HEADROOM: f64 = 1.5;
const TOTAL_ACKED_BITRATE_FRACTION: f64 = 0.8;
const PACKET_OVERHEAD: f64 = 20.0; // RTP + UDP, for the rate from cwnd
const RATE_UPDATE_INTERVAL: f64 = 0.1; // kRateUpdateInterval_ntp
const SLOW_UPDATE_INTERVAL: f64 = 0.05; // kSlowUpdateInterval_ntp
const MSS_UPDATE_INTERVAL: f64 = 1.0; // kMssUpdateInterval_ntp
const MIN_PACE_INTERVAL: f64 = 10e-6;
const INIT_MSS: i64 = 100;
const MIN_CWND_MSS: i64 = 3;
const RATE_UPDATE_HIST: usize = 4; // kRateUpDateSize
const MAX_BYTES_IN_FLIGHT_HIST: usize = 20;
// ScreamV2TxStream.cpp constants.
const MIN_RTP_QUEUE_DISCARD_INTERVAL: f64 = 0.25;
const RATE_ADJUST_GAIN1: f64 = 0.2;
const RATE_ADJUST_GAIN2: f64 = 1.0 / 8.0;

/// Settings of one SCReAM media flow (defaults: the `scream_bw_test_tx` tool's).
#[derive(Clone, Debug)]
pub struct ScreamConfig {
    /// Codepoint of every media packet; ECT(1) switches on the L4S (scalable) CE response.
    pub ecn: Ecn,
    pub dscp: u8,
    pub min_bitrate: f64,
    pub start_bitrate: f64,
    pub max_bitrate: f64,
    pub frame_rate: f64,
    /// The tool's `-rand X` as a fraction: frame size × (1 + (u − ½)·X), u uniform in [0, 1).
    pub frame_size_variation: f64,
    /// Packets leave back to back until their pacing intervals add up to this
    /// (`-microburstinterval`, default 0.5 ms).
    pub microburst_interval: Time,
    /// Largest RTP payload (`-mtu`, default 1200).
    pub packet_size: u32,
    /// Queue delay target (`-delaytarget`, 60 ms).
    pub queue_delay_target: f64,
    /// cwnd scale on loss and on classic-ECN CE (`-scale`, 0.7 for both in the tool).
    pub loss_beta: f64,
    pub ecn_ce_beta: f64,
    /// Pacing rate = headroom × target bitrate (`-paceheadroom`, 1.5).
    pub pacing_headroom: f64,
    /// Cap of the adaptive pacing scale for large frames (`-adaptivepaceheadroom`, 1.5).
    pub max_adaptive_pacing_scale: f64,
    /// Bytes in flight may exceed cwnd by this factor (`-maxwindowheadroom`, 5.0).
    pub max_window_headroom: f64,
    /// cwnd may exceed the largest recent bytes in flight by this factor (2.0).
    pub bytes_in_flight_headroom: f64,
    /// Multiplicative increase per RTT at most (`-mulincrease`, 0.05).
    pub mul_increase: f64,
    /// RTP queue cleared when older than this (`registerNewStream`, 0.2 s in the tool).
    pub max_rtp_queue_delay: f64,
    /// Loss when ACKed this long after a later packet (`-reordertime`, 30 ms).
    pub reorder_time: f64,
    pub stop: Option<Time>,
}

impl Default for ScreamConfig {
    fn default() -> Self {
        ScreamConfig {
            ecn: Ecn::NotEct,
            dscp: 0,
            min_bitrate: 1e6,
            start_bitrate: 1e6,
            max_bitrate: 500e6,
            frame_rate: 50.0,
            frame_size_variation: 0.0,
            microburst_interval: Time::from_micros(500),
            packet_size: 1200,
            queue_delay_target: 0.06,
            loss_beta: 0.7,
            ecn_ce_beta: 0.7,
            pacing_headroom: 1.5,
            max_adaptive_pacing_scale: 1.5,
            max_window_headroom: 5.0,
            bytes_in_flight_headroom: 2.0,
            mul_increase: 0.05,
            max_rtp_queue_delay: 0.2,
            reorder_time: 0.03,
            stop: None,
        }
    }
}

/// One sent RTP packet (`struct Transmitted`).
#[derive(Clone, Copy, Debug, Default)]
struct TxPacket {
    seq: u32,
    tx_time: f64,
    frame_time: f64,
    size: i64,
    used: bool,
    acked: bool,
    after_received_edge: bool,
}

/// The sender's congestion control: `ScreamV2Tx` with one stream. Times are seconds (f64).
#[derive(Debug)]
pub struct ScreamTx {
    cfg: ScreamConfig,
    l4s: bool,
    // Window and flight.
    pub cwnd: i64,
    cwnd_min: i64,
    cwnd_min_low: i64,
    cwnd_i: i64,
    cwnd_i_update_blocked: bool,
    pub bytes_in_flight: i64,
    prev_bytes_in_flight: i64,
    max_bytes_in_flight: i64,
    max_bytes_in_flight_prev: i64,
    max_bytes_in_flight_hist: [i64; MAX_BYTES_IN_FLIGHT_HIST],
    max_bytes_in_flight_hist_ix: usize,
    pub mss: i64,
    window_headroom: f64,
    bytes_newly_acked: i64,
    bytes_newly_acked_ce: i64,
    // RTT and delay.
    pub srtt: f64,
    srtt_sh: f64,
    srtt_sh_prev: f64,
    last_srtt_update: f64,
    base_owd: f64,
    pub queue_delay: f64,
    pub queue_delay_avg: f64,
    queue_delay_min: f64,
    queue_delay_min_avg: f64,
    queue_delay_max_avg: f64,
    queue_delay_min_slow_avg: f64,
    latency_diff_avg: f64,
    latency_diff_cwnd_scale: f64,
    // Congestion signals.
    pub l4s_alpha: f64,
    fraction_marked: f64,
    packets_delivered_this_rtt: u64,
    packets_marked_this_rtt: u64,
    is_ce_this_feedback: bool,
    ce_density: f64,
    virtual_l4s_alpha: f64,
    loss_event: bool,
    ecn_ce_event: bool,
    virtual_ce_event: bool,
    is_new_frame: bool,
    post_congestion_scale: f64,
    last_loss_event: f64,
    last_congestion_detected: Option<f64>,
    last_l4s_alpha_update: f64,
    last_qdelay_avg_update: f64,
    last_qdelay_min_slow_avg_update: f64,
    last_cwnd_update: Option<f64>,
    last_slow_update: f64,
    last_mss_update: f64,
    init_time: f64,
    // Pacing.
    pub pace_interval: f64,
    adaptive_pacing_scale: f64,
    // Rates (stream and totals are the same: one stream).
    last_rate_update: f64,
    bytes_transmitted: i64,
    bytes_acked: i64,
    bytes_rtp: i64,
    rate_rtp_hist: [f64; RATE_UPDATE_HIST],
    rate_rtp_hist_ix: usize,
    pub rate_transmitted: f64,
    pub rate_acked: f64,
    pub rate_rtp_avg: f64,
    // Stream: target bitrate.
    pub target_bitrate: f64,
    rate_share: f64,
    rate_adjust_factor: f64,
    frame_size_acc: i64,
    frame_period: f64,
    last_frame_time: Option<f64>,
    last_rtp_queue_discard: f64,
    repair_loss: bool,
    was_repair_loss: bool,
    // Loss detection.
    tx: Vec<TxPacket>,
    scan_from: u32,
    hi_seq_tx: Option<u32>,
    time_tx_ack: f64,
    frame_time_ack_high: f64,
    pub losses: u64,
    pub ce_marked: u64,
}

impl ScreamTx {
    /// `ScreamV2Tx(...)` + `registerNewStream` + `initialize` at `now` (seconds).
    pub fn new(cfg: ScreamConfig, now: f64) -> Self {
        let mss0 = (cfg.packet_size + RTP_HEADER) as i64;
        // The tool: initial cwnd = initrate/8 · 100 ms; cwndMinLow = 2 · (mtu + 12).
        let cwnd = ((cfg.start_bitrate * 0.1 / 8.0) as i64).max(2 * mss0);
        ScreamTx {
            l4s: cfg.ecn == Ecn::Ect1,
            cwnd,
            cwnd_min: 2 * mss0,
            cwnd_min_low: 2 * mss0,
            cwnd_i: 1,
            cwnd_i_update_blocked: false,
            bytes_in_flight: 0,
            prev_bytes_in_flight: 0,
            max_bytes_in_flight: 0,
            max_bytes_in_flight_prev: 0,
            max_bytes_in_flight_hist: [0; MAX_BYTES_IN_FLIGHT_HIST],
            max_bytes_in_flight_hist_ix: 0,
            mss: INIT_MSS,
            window_headroom: cfg.max_window_headroom,
            bytes_newly_acked: 0,
            bytes_newly_acked_ce: 0,
            srtt: 0.05,
            srtt_sh: 0.05,
            srtt_sh_prev: 0.05,
            last_srtt_update: now,
            base_owd: f64::INFINITY,
            queue_delay: 0.0,
            queue_delay_avg: 0.0,
            queue_delay_min: 1000.0,
            queue_delay_min_avg: 1000.0,
            queue_delay_max_avg: 0.0,
            queue_delay_min_slow_avg: 0.0,
            latency_diff_avg: 0.0,
            latency_diff_cwnd_scale: 1.0,
            l4s_alpha: 0.1,
            fraction_marked: 0.0,
            packets_delivered_this_rtt: 0,
            packets_marked_this_rtt: 0,
            is_ce_this_feedback: false,
            ce_density: 1.0,
            virtual_l4s_alpha: 0.0,
            loss_event: false,
            ecn_ce_event: false,
            virtual_ce_event: false,
            is_new_frame: false,
            post_congestion_scale: 1.0,
            last_loss_event: now,
            last_congestion_detected: None,
            last_l4s_alpha_update: now,
            last_qdelay_avg_update: now,
            last_qdelay_min_slow_avg_update: now,
            last_cwnd_update: None,
            last_slow_update: now,
            last_mss_update: now,
            init_time: now,
            pace_interval: MIN_PACE_INTERVAL,
            adaptive_pacing_scale: 1.0,
            last_rate_update: now,
            bytes_transmitted: 0,
            bytes_acked: 0,
            bytes_rtp: 0,
            rate_rtp_hist: [0.0; RATE_UPDATE_HIST],
            rate_rtp_hist_ix: 0,
            rate_transmitted: 0.0,
            rate_acked: 0.0,
            rate_rtp_avg: 0.0,
            target_bitrate: cfg.start_bitrate,
            rate_share: 0.0,
            rate_adjust_factor: 0.0,
            frame_size_acc: 0,
            frame_period: 1.0 / cfg.frame_rate,
            last_frame_time: None,
            last_rtp_queue_discard: now,
            repair_loss: false,
            was_repair_loss: false,
            tx: vec![TxPacket::default(); TX_RING],
            scan_from: 0,
            hi_seq_tx: None,
            time_tx_ack: 0.0,
            frame_time_ack_high: 0.0,
            losses: 0,
            ce_marked: 0,
            cfg,
        }
    }

    fn min_interval(&self) -> f64 {
        MIN_CONGESTION_BACKOFF_INTERVAL.min(self.srtt)
    }

    /// `Stream::getTargetBitrate`: the encoder's rate, or `None` once after a loss or an
    /// RTP queue discard (the test tool then produces no frame: a refresh request).
    pub fn encoder_rate(&mut self) -> Option<f64> {
        let refresh = std::mem::take(&mut self.repair_loss);
        if refresh && !self.was_repair_loss {
            self.was_repair_loss = true;
            return None;
        }
        self.was_repair_loss = false;
        Some(self.target_bitrate)
    }

    /// `ScreamV2Tx::newMediaFrame` + `Stream::newMediaFrame` for one RTP packet pushed to the
    /// RTP queue; `rtp_queue_delay` is the age of the queue's oldest packet and
    /// `rtp_queue_bytes` what it holds (after the push). Returns true if the RTP queue must be
    /// cleared (`Stream::updateTargetBitrate`'s discard).
    pub fn new_media_packet(&mut self, now: f64, size: i64, marker: bool, rtp_queue_delay: f64, rtp_queue_bytes: i64) -> bool {
        if marker {
            self.is_new_frame = true;
        }
        self.frame_size_acc += size;
        if marker {
            // Average frame period, frame size, and the RTP-queue rate adjustment.
            if let Some(last) = self.last_frame_time {
                let dt = now - last;
                self.frame_period = dt * 0.9 + self.frame_period * 0.1;
            }
            self.last_frame_time = Some(now);
            let frame_size_avg = self.target_bitrate * self.frame_period / 8.0;
            let error = RATE_ADJUST_GAIN1 * (rtp_queue_delay - self.frame_period / 2.0) / self.frame_period;
            self.rate_adjust_factor = (self.rate_adjust_factor + error * RATE_ADJUST_GAIN2).clamp(0.0, 0.5);
            let frame_size = (rtp_queue_bytes.max(self.frame_size_acc)) as f64;
            self.frame_size_acc = 0;
            self.adaptive_pacing_scale = if frame_size_avg > 500.0 {
                (frame_size / frame_size_avg).clamp(1.0, self.cfg.max_adaptive_pacing_scale)
            } else {
                1.0
            };
        }
        let discard = self.update_target_bitrate(now, rtp_queue_delay);
        self.bytes_rtp += size;
        self.mss = self.mss.max(size);
        self.cwnd_min = self.cwnd_min_low.max(2 * self.mss);
        self.cwnd = self.cwnd.max(self.cwnd_min);
        discard
    }

    /// `Stream::updateTargetBitrate`. Returns true when the RTP queue is to be cleared.
    fn update_target_bitrate(&mut self, now: f64, rtp_queue_delay: f64) -> bool {
        let mut discard = false;
        if rtp_queue_delay > self.cfg.max_rtp_queue_delay && now - self.last_rtp_queue_discard > MIN_RTP_QUEUE_DISCARD_INTERVAL {
            discard = true;
            self.repair_loss = true;
            self.last_rtp_queue_discard = now;
        }
        if self.rate_share > 0.0 {
            self.target_bitrate = (self.rate_share / (1.0 + self.rate_adjust_factor)).clamp(self.cfg.min_bitrate, self.cfg.max_bitrate);
        }
        discard
    }

    /// Rate estimates every 100 ms and the MSS reset every second (`isOkToTransmit`).
    pub fn tick(&mut self, now: f64) {
        if now - self.last_rate_update > RATE_UPDATE_INTERVAL {
            let dt = now - self.last_rate_update;
            self.rate_transmitted = self.bytes_transmitted as f64 * 8.0 / dt;
            self.rate_acked = self.bytes_acked as f64 * 8.0 / dt;
            self.rate_rtp_hist[self.rate_rtp_hist_ix] = self.bytes_rtp as f64 * 8.0 / dt;
            self.rate_rtp_hist_ix = (self.rate_rtp_hist_ix + 1) % RATE_UPDATE_HIST;
            self.rate_rtp_avg = self.rate_rtp_hist.iter().sum::<f64>() / RATE_UPDATE_HIST as f64;
            self.bytes_transmitted = 0;
            self.bytes_acked = 0;
            self.bytes_rtp = 0;
            self.last_rate_update = now;
        }
        if now - self.last_mss_update > MSS_UPDATE_INTERVAL {
            self.mss = INIT_MSS;
            self.cwnd_min = self.cwnd_min_low.max(MIN_CWND_MSS * self.mss);
            self.cwnd = self.cwnd.max(self.cwnd_min);
            self.last_mss_update = now;
        }
    }

    /// The window test of `isOkToTransmit`.
    pub fn window_allows(&self, size: i64) -> bool {
        (self.bytes_in_flight + size) as f64 <= self.cwnd as f64 * self.window_headroom + self.mss as f64
    }

    /// `addTransmitted`; returns the pacing interval to accumulate (s).
    pub fn transmitted(&mut self, now: f64, seq: u32, size: i64, frame_time: f64) -> f64 {
        let t = &mut self.tx[seq as usize % TX_RING];
        *t = TxPacket { seq, tx_time: now, frame_time, size, used: true, acked: false, after_received_edge: false };
        if self.hi_seq_tx.is_none() {
            self.scan_from = seq;
        }
        self.hi_seq_tx = Some(seq);
        self.bytes_in_flight += size;
        self.bytes_transmitted += size;
        self.mss = self.mss.max(size);
        self.cwnd_min = self.cwnd_min_low.max(2 * self.mss);
        self.cwnd = self.cwnd.max(self.cwnd_min);
        self.pace_interval
    }

    /// Packets of the history ring still in flight or unresolved (the sender stalls before
    /// the ring would wrap over a live entry).
    pub fn ring_full(&self, next_seq: u32) -> bool {
        self.hi_seq_tx.is_some() && next_seq.wrapping_sub(self.scan_from) as usize >= TX_RING
    }

    /// One RFC 8888 report: `(seq, arrival time, CE)` of every reported packet that arrived,
    /// and the highest reported sequence number (`incomingStandardizedFeedback` per packet,
    /// `isLast` on the final one).
    pub fn on_feedback(&mut self, now: f64, received: &[(u32, f64, bool)], highest: u32) {
        self.prev_bytes_in_flight = self.bytes_in_flight;
        self.max_bytes_in_flight = self.max_bytes_in_flight.max(self.bytes_in_flight);
        let mut last_rtt = None;
        for &(seq, arrival, ce) in received {
            if let Some(rtt) = self.mark_acked(now, seq, arrival, ce) {
                last_rtt = Some(rtt);
            }
            self.queue_delay_min_avg = self.queue_delay_min_avg.min(self.queue_delay);
            self.queue_delay_max_avg = self.cfg.queue_delay_target.min(self.queue_delay_max_avg.max(self.queue_delay));
        }
        self.detect_loss(now, highest);
        if let Some(rtt) = last_rtt {
            // sRTT from the short-term average, at most once per short-term sRTT.
            self.srtt_sh_prev = self.srtt_sh;
            self.srtt_sh = (7.0 * self.srtt_sh + rtt) / 8.0;
            if now - self.last_srtt_update > self.srtt_sh {
                self.srtt = (7.0 * self.srtt + self.srtt_sh) / 8.0;
                self.last_srtt_update = now;
            }
        }
        self.end_of_feedback(now);
    }

    /// `markAcked`: returns the packet's RTT if it was newly acknowledged.
    fn mark_acked(&mut self, now: f64, seq: u32, arrival: f64, ce: bool) -> Option<f64> {
        let t = self.tx[seq as usize % TX_RING];
        if !t.used || t.seq != seq || t.acked {
            return None;
        }
        self.packets_delivered_this_rtt += 1;
        if ce {
            self.bytes_newly_acked_ce += t.size;
            self.packets_marked_this_rtt += 1;
            self.ce_marked += 1;
            self.is_ce_this_feedback = true;
        }
        if t.frame_time > self.frame_time_ack_high {
            self.frame_time_ack_high = t.frame_time;
        }
        self.tx[seq as usize % TX_RING].acked = true;
        // Queue delay: one-way delay above the smallest seen (one clock: no drift to handle).
        let owd = arrival - t.tx_time;
        self.base_owd = self.base_owd.min(owd);
        self.queue_delay = (owd - self.base_owd).max(0.0);
        self.time_tx_ack = t.tx_time;
        Some(now - t.tx_time)
    }

    /// `detectLoss`: everything up to the highest reported packet leaves the flight; a packet
    /// not received although one sent `reorder_time` (plus the frame-timestamp difference)
    /// later was, is lost.
    fn detect_loss(&mut self, now: f64, highest: u32) {
        let Some(hi_tx) = self.hi_seq_tx else { return };
        let mut seq = self.scan_from;
        let mut advance = true;
        while seq <= hi_tx && seq <= highest {
            let i = seq as usize % TX_RING;
            let t = self.tx[i];
            if t.used && t.seq == seq {
                if !t.after_received_edge {
                    self.bytes_newly_acked += t.size;
                    self.bytes_in_flight = (self.bytes_in_flight - t.size).max(0);
                    self.bytes_acked += t.size;
                    self.tx[i].after_received_edge = true;
                }
                let ts_diff = self.frame_time_ack_high - t.frame_time;
                if !t.acked && t.tx_time + self.cfg.reorder_time + ts_diff < self.time_tx_ack {
                    if now - self.last_loss_event > self.srtt && self.cfg.loss_beta < 1.0 {
                        self.loss_event = true;
                    }
                    self.losses += 1;
                    self.repair_loss = true;
                    self.tx[i].used = false;
                } else if t.acked {
                    self.tx[i].used = false;
                }
            }
            if advance && !self.tx[i].used {
                self.scan_from = seq + 1;
            } else {
                advance = false;
            }
            seq += 1;
        }
    }

    /// The `isLast` part of `incomingStandardizedFeedback`: CE and L4S α, queue-delay
    /// averages, the virtual-CE delay signal, then `updateCwnd` + `updateTargetBitrate`.
    fn end_of_feedback(&mut self, now: f64) {
        let min_iv = self.min_interval();
        if now - self.last_loss_event > min_iv && self.is_ce_this_feedback {
            self.ecn_ce_event = true;
            self.last_loss_event = now;
        }
        self.is_ce_this_feedback = false;
        if self.l4s {
            if now - self.last_l4s_alpha_update > 0.010f64.min(self.srtt) {
                self.last_l4s_alpha_update = now;
                self.fraction_marked = 0.0;
                if self.packets_delivered_this_rtt > 0 {
                    self.fraction_marked = self.packets_marked_this_rtt as f64 / self.packets_delivered_this_rtt as f64;
                    if self.fraction_marked == 1.0 {
                        self.ce_density = 1.0;
                    }
                    self.fraction_marked *= self.ce_density;
                    if self.fraction_marked >= self.l4s_alpha {
                        self.l4s_alpha = (L4S_G_UP * self.fraction_marked + (1.0 - L4S_G_UP) * self.l4s_alpha).min(1.0);
                    } else {
                        self.l4s_alpha *= 1.0 - L4S_G_DOWN;
                    }
                    self.packets_delivered_this_rtt = 0;
                    self.packets_marked_this_rtt = 0;
                }
            }
        } else {
            self.l4s_alpha = 0.0;
        }
        if now - self.last_qdelay_avg_update > min_iv {
            if now - self.last_qdelay_min_slow_avg_update > self.srtt * QDELAY_MIN_SLOW_AVG_UPDATE_RTTS {
                if self.queue_delay_min < self.queue_delay_min_slow_avg {
                    self.queue_delay_min_slow_avg = self.queue_delay_min;
                } else {
                    self.queue_delay_min_slow_avg = QDELAY_MIN_SLOW_AVG_ALPHA * self.queue_delay_min + (1.0 - QDELAY_MIN_SLOW_AVG_ALPHA) * self.queue_delay_min_slow_avg;
                }
                self.queue_delay_min = 1000.0;
                self.last_qdelay_min_slow_avg_update = now;
            }
            let tmp = self.queue_delay - self.queue_delay_min_slow_avg;
            self.queue_delay_avg = if tmp < self.queue_delay_avg { tmp } else { (1.0 - QDELAY_AVG_ALPHA) * self.queue_delay_avg + QDELAY_AVG_ALPHA * tmp };
            let diff = (self.queue_delay_max_avg - self.queue_delay_min_avg).clamp(0.0, 2.0 * LATENCY_DIFF_THRESHOLD);
            self.latency_diff_avg = (1.0 - LATENCY_DIFF_ALPHA) * self.latency_diff_avg + LATENCY_DIFF_ALPHA * diff;
            self.latency_diff_cwnd_scale = (1.0 - self.latency_diff_avg / LATENCY_DIFF_THRESHOLD).clamp(0.0, 1.0);
            self.queue_delay_max_avg *= 1.0 - QDELAY_MIN_MAX_ALPHA;
            self.queue_delay_min_avg = (1.0 - QDELAY_MIN_MAX_ALPHA) * self.queue_delay_min_avg + QDELAY_MIN_MAX_ALPHA * self.queue_delay_max_avg;
            self.last_qdelay_avg_update = now;
        }
        // Virtual CE from the queue delay: back-off ramps from 0 at target/2 to 100 % at target.
        let target = self.cfg.queue_delay_target;
        if self.queue_delay_avg > target / 2.0 && now - self.last_loss_event > min_iv {
            self.virtual_ce_event = true;
            self.virtual_l4s_alpha = ((self.queue_delay_avg - target / 2.0) / (target / 2.0)).clamp(0.0, 1.0);
            self.virtual_l4s_alpha /= (self.srtt / MIN_CONGESTION_BACKOFF_INTERVAL).max(1.0);
        }
        if self.srtt_sh_prev > self.srtt_sh && self.fraction_marked == 1.0 {
            self.ecn_ce_event = false;
        }
        if self.loss_event || self.ecn_ce_event || self.virtual_ce_event {
            self.last_loss_event = now;
        }
        let due = self.last_cwnd_update.map_or(true, |t| now - t > min_iv);
        if due || self.loss_event || self.ecn_ce_event || self.virtual_ce_event || self.is_new_frame {
            self.update_cwnd(now);
            self.update_target_bitrate(now, 0.0);
            self.ecn_ce_event = false;
            self.virtual_ce_event = false;
            self.last_cwnd_update = Some(now);
            self.is_new_frame = false;
        }
    }

    /// `updateCwnd`: pacing interval, the loss / CE / virtual-CE decreases, the increase, and
    /// the rate share `8·cwnd/sRTT` that becomes the target bitrate.
    pub fn update_cwnd(&mut self, now: f64) {
        self.post_congestion_scale = match self.last_congestion_detected {
            None => 1.0,
            Some(t) => ((now - t) / (POST_CONGESTION_DELAY_RTTS * self.srtt)).clamp(0.0, 1.0),
        };
        self.queue_delay_min = self.queue_delay_min.min(self.queue_delay);
        let mss = self.mss as f64;

        // Pacing: headroom × max(target, RTP rate), at least 50 kbit/s.
        let pacing_bitrate = (self.cfg.pacing_headroom * self.adaptive_pacing_scale * self.target_bitrate.max(self.rate_rtp_avg)).max(50e3);
        self.pace_interval = (mss * 8.0 / pacing_bitrate).max(MIN_PACE_INTERVAL);

        if now - self.last_slow_update > SLOW_UPDATE_INTERVAL {
            self.max_bytes_in_flight_hist[self.max_bytes_in_flight_hist_ix] = self.max_bytes_in_flight;
            self.max_bytes_in_flight_hist_ix = (self.max_bytes_in_flight_hist_ix + 1) % MAX_BYTES_IN_FLIGHT_HIST;
            if self.target_bitrate > self.cfg.max_bitrate * 0.95 {
                let mut tmp = self.max_bytes_in_flight;
                for &h in &self.max_bytes_in_flight_hist {
                    tmp = tmp.max(h);
                }
                tmp = tmp.max((self.cfg.pacing_headroom * self.cfg.max_bitrate / 8.0 * (self.srtt + 0.001)) as i64);
                self.cwnd = self.cwnd.min(tmp);
            }
            if now - self.init_time > 2.0 {
                self.max_bytes_in_flight_prev = self.max_bytes_in_flight;
                self.max_bytes_in_flight = 0;
            }
            self.last_slow_update = now;
        }
        let cwnd_ratio = mss / self.cwnd as f64;
        self.window_headroom = MIN_WINDOW_HEADROOM + (self.cfg.max_window_headroom - MIN_WINDOW_HEADROOM) * self.latency_diff_cwnd_scale;

        // Scale-down near the last known maximum (the inflection point cwndI).
        let r = 8.0 * (self.cwnd - self.cwnd_i) as f64 / self.cwnd_i as f64;
        let scl_i = (r * r).clamp(0.1, 1.0);

        if self.loss_event {
            if !self.cwnd_i_update_blocked {
                self.cwnd_i = self.cwnd;
                self.cwnd_i_update_blocked = true;
            }
            self.cwnd = self.cwnd_min.max((self.cfg.loss_beta * self.cwnd as f64) as i64);
            self.loss_event = false;
            self.last_congestion_detected = Some(now);
            self.post_congestion_scale = 0.0;
        } else if self.ecn_ce_event || self.virtual_ce_event {
            if !self.cwnd_i_update_blocked {
                self.cwnd_i = self.cwnd;
                self.cwnd_i_update_blocked = true;
            }
            let rtt_scale = (self.srtt / MIN_CONGESTION_BACKOFF_INTERVAL).max(1.0);
            if self.ecn_ce_event {
                if self.l4s {
                    let mut back_off = self.l4s_alpha / 2.0;
                    if self.target_bitrate < self.rate_acked * TOTAL_ACKED_BITRATE_FRACTION {
                        back_off *= 0.25;
                    }
                    back_off /= rtt_scale;
                    if self.queue_delay < self.cfg.queue_delay_target * 0.25 {
                        back_off *= scl_i.max(0.25);
                        back_off *= self.latency_diff_cwnd_scale.clamp(0.25, 1.0);
                    }
                    let long_ago = self.last_congestion_detected.map_or(true, |t| now - t > 100.0 * self.srtt.max(SRTT_VIRTUAL));
                    if long_ago {
                        self.cwnd = self.cwnd.min(self.max_bytes_in_flight_prev);
                    }
                    self.cwnd = self.cwnd_min.max(((1.0 - back_off) * self.cwnd as f64) as i64);
                } else {
                    self.cwnd = self.cwnd_min.max((self.cfg.ecn_ce_beta * self.cwnd as f64) as i64);
                }
                self.virtual_ce_event = false;
            }
            if self.virtual_ce_event {
                let mut back_off = self.virtual_l4s_alpha / 2.0;
                if self.target_bitrate < self.rate_acked * TOTAL_ACKED_BITRATE_FRACTION {
                    back_off *= 0.25;
                }
                back_off /= rtt_scale;
                self.cwnd = self.cwnd_min.max(((1.0 - back_off) * self.cwnd as f64) as i64);
            }
            self.ecn_ce_event = false;
            self.virtual_ce_event = false;
            self.last_congestion_detected = Some(now);
            self.post_congestion_scale = 0.0;
        }

        // Increase: ACKed bytes that were not CE-marked, one MSS per cwnd, scaled.
        let acked_minus_ce = (self.bytes_newly_acked - self.bytes_newly_acked_ce) as f64;
        let mut increment = acked_minus_ce * cwnd_ratio;
        increment *= scl_i.max(0.25);
        increment *= (self.srtt / SRTT_VIRTUAL).min(1.0);
        increment *= self.latency_diff_cwnd_scale.clamp(0.1, 1.0);
        let mul = 1.0 + self.cfg.mul_increase * self.cwnd as f64 / mss;
        let mul = 1.0 + (mul - 1.0) * self.post_congestion_scale * scl_i;
        increment *= mul;
        let cwnd_prev = self.cwnd;
        let max_allowed = mss + self.max_bytes_in_flight.max(self.max_bytes_in_flight_prev) as f64 * self.cfg.bytes_in_flight_headroom;
        let next = self.cwnd + (increment + 0.5) as i64;
        if next as f64 <= max_allowed && self.target_bitrate < self.cfg.max_bitrate {
            self.cwnd = next;
        }
        if self.cwnd > cwnd_prev {
            self.cwnd_i_update_blocked = false;
        }
        self.cwnd = self.cwnd.max(self.cwnd_min);
        self.bytes_newly_acked = 0;
        self.bytes_newly_acked_ce = 0;

        // The rate the window supports over sRTT (+1 ms), less margins.
        let cwnd_ratio = mss / self.cwnd as f64;
        let mut rate = 8.0 * self.cwnd as f64 / (self.srtt + 0.001).clamp(0.001, 0.2);
        rate *= 1.0 - (cwnd_ratio - 0.1).clamp(0.0, 0.2);
        rate /= 1.1;
        rate *= mss / (mss + PACKET_OVERHEAD);
        self.rate_share = rate.min(self.cfg.max_bitrate);
    }
}

/// Counters and per-step accumulators of a media flow.
#[derive(Debug, Default)]
pub struct ScreamStats {
    pub frames: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub rtp_queue_discards: u64,
    pub packets_discarded: u64,
    pub feedbacks: u64,
    /// Time integral of the target bitrate (bit), for its mean.
    pub target_integral: f64,
    pub last_target_change: f64,
    pub step_bytes_sent: u64,
}

/// One arrival at the receiver, indexed by sequence number modulo the ring.
#[derive(Clone, Copy, Debug, Default)]
struct Arrival {
    seq: u32,
    at: Time,
    ce: bool,
    valid: bool,
}

/// An RTP packet waiting in the sender's RTP queue.
#[derive(Clone, Copy, Debug)]
struct Queued {
    seq: u32,
    size: u32,
    marker: bool,
    enqueued: Time,
    frame_time: Time,
}

/// Both ends of one SCReAM media flow.
#[derive(Debug)]
pub struct Scream {
    id: u32,
    cfg: ScreamConfig,
    rng: Stream,
    pub tx: ScreamTx,
    rtp_queue: VecDeque<Queued>,
    rtp_queue_bytes: i64,
    next_seq: u32,
    /// Pacing: accumulated pacing time of the current microburst and the next send time.
    pace_acc: f64,
    next_send: Time,
    frame_timer: Timer,
    pace_timer: Timer,
    started: bool,
    // Receiver.
    arrivals: Vec<Arrival>,
    rx_highest: Option<u32>,
    rx_since_fb: u32,
    rx_first: Option<Time>,
    last_fb: Time,
    fb_timer: Timer,
    /// Reused report buffer (no allocation per feedback).
    fb_buf: Vec<(u32, f64, bool)>,
    pub stats: ScreamStats,
}

impl Scream {
    pub fn new(id: u32, cfg: ScreamConfig, rng: Stream) -> Self {
        Scream {
            id,
            tx: ScreamTx::new(cfg.clone(), 0.0),
            rng,
            rtp_queue: VecDeque::with_capacity(256),
            rtp_queue_bytes: 0,
            next_seq: 0,
            pace_acc: 0.0,
            next_send: Time::ZERO,
            frame_timer: Timer::default(),
            pace_timer: Timer::default(),
            started: false,
            arrivals: vec![Arrival::default(); TX_RING],
            rx_highest: None,
            rx_since_fb: 0,
            rx_first: None,
            last_fb: Time::ZERO,
            fb_timer: Timer::default(),
            fb_buf: Vec::with_capacity(REPORTED as usize),
            stats: ScreamStats::default(),
            cfg,
        }
    }

    pub fn target_bitrate(&self) -> f64 {
        self.tx.target_bitrate
    }

    fn running(&self, now: Time) -> bool {
        self.cfg.stop.map_or(true, |s| now < s)
    }

    /// Starts the source: the controller is initialised now and the first frame is captured.
    pub fn start(&mut self, ctx: &mut EndpointCtx) {
        let now = ctx.now.as_secs_f64();
        self.tx = ScreamTx::new(self.cfg.clone(), now);
        self.stats.last_target_change = now;
        self.started = true;
        self.frame(ctx);
    }

    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        match t {
            FlowTimer::MediaFrame if self.frame_timer.fire(ctx.now, ctx.event(t), ctx.events) => self.frame(ctx),
            FlowTimer::MediaPace if self.pace_timer.fire(ctx.now, ctx.event(t), ctx.events) => self.try_send(ctx),
            FlowTimer::MediaFeedback if self.fb_timer.fire(ctx.now, ctx.event(t), ctx.events) => {
                if self.rx_since_fb > 0 {
                    self.send_feedback(ctx);
                }
            }
            _ => {}
        }
    }

    fn account_target(&mut self, now: f64) {
        let st = &mut self.stats;
        st.target_integral += self.tx.target_bitrate * (now - st.last_target_change);
        st.last_target_change = now;
    }

    /// Mean target bitrate (bit/s) from the start to `now`.
    pub fn mean_target(&mut self, now: Time, start: Time) -> f64 {
        self.account_target(now.as_secs_f64());
        let span = (now - start).as_secs_f64();
        if span > 0.0 {
            self.stats.target_integral / span
        } else {
            0.0
        }
    }

    /// A video frame (the test tool's `createRtpThread`): size from the target bitrate,
    /// packetised into RTP packets of at most `packet_size` payload bytes.
    fn frame(&mut self, ctx: &mut EndpointCtx) {
        if !self.running(ctx.now) {
            return;
        }
        let period = Time::from_secs_f64(1.0 / self.cfg.frame_rate);
        self.frame_timer.arm(ctx.now + period, ctx.event(FlowTimer::MediaFrame), ctx.events);
        let now = ctx.now.as_secs_f64();
        self.tx.tick(now);
        self.stats.frames += 1;
        let u = self.rng.uniform();
        let Some(rate) = self.tx.encoder_rate() else { return };
        let mut bytes = (rate / self.cfg.frame_rate / 8.0 * (1.0 + (u - 0.5) * self.cfg.frame_size_variation)) as i64;
        while bytes > 0 {
            let payload = bytes.min(self.cfg.packet_size as i64);
            bytes -= payload;
            let size = payload as u32 + RTP_HEADER;
            let q = Queued { seq: self.next_seq, size, marker: bytes == 0, enqueued: ctx.now, frame_time: ctx.now };
            self.next_seq += 1;
            self.rtp_queue.push_back(q);
            self.rtp_queue_bytes += size as i64;
            let age = self.rtp_queue.front().map_or(0.0, |f| (ctx.now - f.enqueued).as_secs_f64());
            self.account_target(now);
            if self.tx.new_media_packet(now, size as i64, q.marker, age, self.rtp_queue_bytes) {
                // RTP queue too old: cleared (the encoder is asked for a refresh).
                self.stats.rtp_queue_discards += 1;
                self.stats.packets_discarded += self.rtp_queue.len() as u64;
                self.rtp_queue.clear();
                self.rtp_queue_bytes = 0;
            }
        }
        self.try_send(ctx);
    }

    /// The test tool's `transmitRtpThread`: send while the window allows, accumulating each
    /// packet's pacing interval; once a microburst's worth has accumulated, wait that long.
    fn try_send(&mut self, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        if now < self.next_send {
            self.pace_timer.arm(self.next_send, ctx.event(FlowTimer::MediaPace), ctx.events);
            return;
        }
        let mb = self.cfg.microburst_interval.as_secs_f64();
        while let Some(&q) = self.rtp_queue.front() {
            if self.pace_acc > mb {
                let wait = if self.pace_acc > 1.1 * mb { self.pace_acc } else { mb };
                self.pace_acc = 0.0;
                self.next_send = now + Time::from_secs_f64(wait);
                self.pace_timer.arm(self.next_send, ctx.event(FlowTimer::MediaPace), ctx.events);
                return;
            }
            let t = now.as_secs_f64();
            self.tx.tick(t);
            if !self.tx.window_allows(q.size as i64) || self.tx.ring_full(q.seq) {
                return; // retried when feedback arrives
            }
            self.rtp_queue.pop_front();
            self.rtp_queue_bytes -= q.size as i64;
            let mut p = Packet::new(self.id, Direction::Forward, Kind::Media, q.size + UDP_IP_ETH);
            p.ecn = self.cfg.ecn;
            p.dscp = self.cfg.dscp;
            p.sent_at = now;
            p.origin = q.frame_time;
            p.tcp.seq = q.seq;
            p.tcp.payload = q.size;
            p.tcp.cwr = q.marker;
            ctx.out.push(p);
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += q.size as u64;
            self.stats.step_bytes_sent += q.size as u64;
            self.pace_acc += self.tx.transmitted(t, q.seq, q.size as i64, q.frame_time.as_secs_f64());
        }
    }

    /// A media packet reached the receiver, or feedback the sender.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match pkt.kind {
            Kind::Media => self.receive(pkt, ctx),
            Kind::MediaFeedback => self.feedback(pkt, ctx),
            _ => {}
        }
    }

    /// `ScreamRx::receive` + the receiver's feedback decision: after 16 new packets, at the
    /// end of a frame (marker bit), or 40 ms after the last feedback.
    fn receive(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let seq = pkt.tcp.seq;
        self.arrivals[seq as usize % TX_RING] = Arrival { seq, at: ctx.now, ce: pkt.ecn == Ecn::Ce, valid: true };
        self.rx_highest = Some(self.rx_highest.map_or(seq, |h| h.max(seq)));
        self.rx_first.get_or_insert(ctx.now);
        self.stats.packets_received += 1;
        self.stats.bytes_received += pkt.tcp.payload as u64;
        self.rx_since_fb += 1;
        let iv = self.fb_interval(ctx.now);
        if self.rx_since_fb >= FB_EVERY || pkt.tcp.cwr || ctx.now - self.last_fb > iv {
            self.send_feedback(ctx);
        } else {
            self.fb_timer.arm(self.last_fb.max(ctx.now - iv) + iv, ctx.event(FlowTimer::MediaFeedback), ctx.events);
        }
    }

    fn fb_interval(&self, now: Time) -> Time {
        let warm = self.rx_first.is_some_and(|f| now - f > Time::from_millis(100));
        Time::from_secs_f64(if warm { FB_INTERVAL } else { FB_INTERVAL_INIT })
    }

    /// An RFC 8888 report of the last 64 sequence numbers up to the highest received.
    fn send_feedback(&mut self, ctx: &mut EndpointCtx) {
        let Some(hi) = self.rx_highest else { return };
        let begin = hi.saturating_sub(REPORTED - 1);
        // RTCP header 8 + media SSRC 4 + begin/num 4 + 2 per packet + report timestamp 4.
        let rtcp = 20 + 2 * (hi - begin + 1);
        let mut fb = Packet::new(self.id, Direction::Reverse, Kind::MediaFeedback, rtcp + UDP_IP_ETH);
        fb.ecn = Ecn::NotEct;
        fb.dscp = self.cfg.dscp;
        fb.sent_at = ctx.now;
        fb.tcp.seq = hi;
        fb.tcp.sack_len = 1;
        fb.tcp.sacks[0] = SackBlock { start: begin, end: hi + 1 };
        ctx.out.push(fb);
        self.rx_since_fb = 0;
        self.last_fb = ctx.now;
        self.fb_timer.cancel();
    }

    /// The sender processes a report: only arrivals no later than the report's generation.
    fn feedback(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let range = pkt.tcp.sacks[0];
        let mut received = std::mem::take(&mut self.fb_buf);
        received.clear();
        for seq in range.start..range.end {
            let a = self.arrivals[seq as usize % TX_RING];
            if a.valid && a.seq == seq && a.at <= pkt.sent_at {
                received.push((seq, a.at.as_secs_f64(), a.ce));
            }
        }
        self.stats.feedbacks += 1;
        let now = ctx.now.as_secs_f64();
        self.account_target(now);
        self.tx.on_feedback(now, &received, range.end - 1);
        self.fb_buf = received;
        self.try_send(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventQueue};

    fn cfg() -> ScreamConfig {
        ScreamConfig { start_bitrate: 10e6, min_bitrate: 1e6, max_bitrate: 100e6, ..ScreamConfig::default() }
    }

    /// A controller in steady state: sRTT 25 ms, cwnd 100 kB, window-limited by nothing.
    fn steady(l4s: bool) -> ScreamTx {
        let mut c = cfg();
        if l4s {
            c.ecn = Ecn::Ect1;
        }
        let mut s = ScreamTx::new(c, 0.0);
        s.srtt = 0.025;
        s.srtt_sh = 0.025;
        s.cwnd = 100_000;
        s.cwnd_i = 10_000; // far below: scl_i = 1
        s.mss = 1212;
        s.max_bytes_in_flight_prev = 1_000_000;
        s.max_bytes_in_flight = 1_000_000;
        s.last_slow_update = 1e9; // no slow update (max bytes in flight kept) in closed-form tests
        s.last_congestion_detected = None;
        s
    }

    /// Sends `n` packets of 1212 B at `t` and reports them all received at `t + owd`.
    fn round(s: &mut ScreamTx, first: u32, n: u32, t: f64, owd: f64, ce_every: u32) -> u32 {
        for i in 0..n {
            s.transmitted(t, first + i, 1212, t);
        }
        let rx: Vec<(u32, f64, bool)> = (0..n).map(|i| (first + i, t + owd, ce_every > 0 && i % ce_every == 0)).collect();
        s.on_feedback(t + 2.0 * owd, &rx, first + n - 1);
        first + n
    }

    #[test]
    fn grows_when_uncongested_by_the_closed_form() {
        let mut s = steady(false);
        s.bytes_newly_acked = 50_000;
        let cwnd0 = s.cwnd as f64;
        s.update_cwnd(10.0);
        // increment = acked · mss/cwnd · min(1, sRTT/25 ms) · (1 + 0.05 · cwnd/mss).
        let inc = 50_000.0 * 1212.0 / cwnd0 * (1.0 + 0.05 * cwnd0 / 1212.0);
        assert_eq!(s.cwnd, cwnd0 as i64 + (inc + 0.5) as i64);
        // And with no queue delay and no marks the window keeps growing, feedback by feedback.
        let mut s = steady(true);
        s.l4s_alpha = 0.0;
        s.last_slow_update = 0.0;
        let mut seq = 0;
        let c0 = s.cwnd;
        for k in 0..40 {
            // Window-limited: a window's worth per 40 ms round.
            let n = (s.cwnd / 1212) as u32;
            seq = round(&mut s, seq, n, 1.0 + k as f64 * 0.04, 0.010, 0);
        }
        assert!(s.cwnd > c0 * 2, "{} vs {c0}", s.cwnd);
        assert_eq!(s.losses, 0);
    }

    #[test]
    fn queue_delay_above_target_reduces_the_window() {
        let mut s = steady(false);
        let mut seq = round(&mut s, 0, 20, 1.0, 0.010, 0); // base OWD 10 ms
        let c0 = s.cwnd;
        // Then every packet sits 90 ms (1.5 × the 60 ms target) above the base delay.
        for k in 0..60 {
            seq = round(&mut s, seq, 20, 1.1 + k as f64 * 0.04, 0.100, 0);
        }
        assert!(s.queue_delay_avg > 0.06, "{}", s.queue_delay_avg);
        // Full virtual marking above the target, scaled by 30 ms / sRTT (≈ 200 ms here).
        let expect = 1.0 / (s.srtt / 0.03).max(1.0);
        assert!((s.virtual_l4s_alpha - expect).abs() < 1e-9, "{} vs {expect}", s.virtual_l4s_alpha);
        assert!(s.cwnd < c0 / 4, "{} vs {c0}", s.cwnd);
        // Just under target/2 there is no delay signal: growth resumes.
        let mut s = steady(false);
        seq = round(&mut s, 0, 20, 1.0, 0.010, 0);
        let c0 = s.cwnd;
        for k in 0..60 {
            seq = round(&mut s, seq, 20, 1.1 + k as f64 * 0.04, 0.010 + 0.029, 0);
        }
        assert!(s.cwnd > c0, "{} vs {c0}", s.cwnd);
    }

    #[test]
    fn l4s_ce_fraction_sets_alpha_and_the_backoff_is_alpha_over_two() {
        // α: EWMA up with gain 1/8 towards the marked fraction.
        let mut s = steady(true);
        s.l4s_alpha = 0.0;
        let mut seq = 0;
        for k in 0..200 {
            seq = round(&mut s, seq, 20, 1.0 + k as f64 * 0.04, 0.001, 4);
        }
        assert!((s.l4s_alpha - 0.25).abs() < 0.01, "α {} vs F = 1/4", s.l4s_alpha);
        // One CE event: cwnd × (1 − α/2), sRTT ≤ 30 ms and the queue above target/4 (no
        // near-maximum scaling), the acked rate below the target.
        let mut s = steady(true);
        s.l4s_alpha = 0.25;
        s.queue_delay = 0.02;
        s.ecn_ce_event = true;
        s.last_congestion_detected = Some(9.99);
        let c0 = s.cwnd as f64;
        s.update_cwnd(10.0);
        let expect = ((1.0 - 0.125) * c0) as i64;
        assert!((s.cwnd - expect).abs() <= 1, "{} vs {expect}", s.cwnd);
        // At sRTT 60 ms the backoff is halved (several events per RTT).
        let mut s = steady(true);
        s.srtt = 0.06;
        s.l4s_alpha = 0.25;
        s.queue_delay = 0.02;
        s.ecn_ce_event = true;
        s.last_congestion_detected = Some(9.99);
        s.update_cwnd(10.0);
        let expect = ((1.0 - 0.0625) * c0) as i64;
        assert!((s.cwnd - expect).abs() <= 1, "{} vs {expect}", s.cwnd);
        // Classic ECN: the fixed β.
        let mut s = steady(false);
        s.ecn_ce_event = true;
        s.update_cwnd(10.0);
        assert_eq!(s.cwnd, (0.7 * c0) as i64);
    }

    #[test]
    fn target_bitrate_is_the_window_over_srtt_less_margins() {
        let mut s = steady(false);
        s.cwnd = 100_000;
        s.max_bytes_in_flight_prev = 0;
        s.max_bytes_in_flight = 0; // no growth allowed
        s.update_cwnd(10.0);
        let expect = 8.0 * 100_000.0 / 0.026 * (1.0 - 0.0) / 1.1 * 1212.0 / 1232.0;
        assert!((s.rate_share - expect).abs() < 1.0, "{} vs {expect}", s.rate_share);
        s.update_target_bitrate(10.0, 0.0);
        assert!((s.target_bitrate - expect).abs() < 1.0);
        // Clamped to [min, max].
        s.cwnd = 10;
        s.update_cwnd(10.1);
        s.update_target_bitrate(10.1, 0.0);
        assert_eq!(s.target_bitrate, 1e6);
    }

    #[test]
    fn loss_scales_the_window_by_beta() {
        let mut s = steady(false);
        let mut seq = round(&mut s, 0, 10, 1.0, 0.01, 0);
        let c0 = s.cwnd;
        // Packets seq..seq+10 sent; all but the first reported 40 ms later (> reorder 30 ms).
        // One frame (one capture time) paced out over 45 ms.
        for i in 0..10 {
            s.transmitted(2.0 + i as f64 * 0.005, seq + i, 1212, 2.0);
        }
        let rx: Vec<_> = (1..10).map(|i| (seq + i, 2.06, false)).collect();
        s.on_feedback(2.1, &rx, seq + 9);
        assert_eq!(s.losses, 1);
        // β = 0.7, then the report's 10 packets (the lost one too: everything up to the
        // highest reported leaves the flight) add one MSS per (pre-decrease) cwnd each, with
        // no multiplicative part right after congestion.
        let after = (0.7 * c0 as f64) as i64;
        let scale = (s.srtt / 0.025).min(1.0) * s.latency_diff_cwnd_scale.clamp(0.1, 1.0);
        let inc = (10.0 * 1212.0 * 1212.0 / c0 as f64 * scale + 0.5) as i64;
        assert!((s.cwnd - (after + inc)).abs() <= 1, "{} vs {after} + {inc}", s.cwnd);
        seq += 10;
        assert_eq!(s.bytes_in_flight, 0, "everything up to the highest reported left the flight");
        let _ = seq;
    }

    /// A source whose pacing is already set up for its (fixed) target rate, run for a while
    /// without feedback.
    fn run_frames(cfg: ScreamConfig, until_ms: u64) -> (Scream, Vec<Packet>) {
        let mut m = Scream::new(1, cfg, Stream::new(1, "scream/test"));
        m.tx.mss = 1212;
        m.tx.update_cwnd(0.0);
        let mut q = EventQueue::default();
        let mut out = vec![];
        m.frame(&mut EndpointCtx { flow: 1, now: Time::ZERO, events: &mut q, out: &mut out });
        while let Some((t, ev)) = q.pop() {
            if t > Time::from_millis(until_ms) {
                break;
            }
            let Event::Flow(_, timer) = ev else { panic!() };
            m.on_timer(timer, &mut EndpointCtx { flow: 1, now: t, events: &mut q, out: &mut out });
        }
        (m, out)
    }

    #[test]
    fn frames_are_packetised_and_paced_in_microbursts() {
        // 10 Mbit/s at 50 fps: 25 000 B per frame = 20 full packets + 1 of 1000 B payload.
        let c = ScreamConfig { start_bitrate: 10e6, min_bitrate: 10e6, max_bitrate: 10e6, ..ScreamConfig::default() };
        let (m, out) = run_frames(c, 19);
        assert_eq!(m.stats.frames, 1);
        let sizes: Vec<u32> = out.iter().map(|p| p.tcp.payload).collect();
        assert_eq!(sizes.len(), 21);
        assert!(sizes[..20].iter().all(|&s| s == 1212) && sizes[20] == 1012, "{sizes:?}");
        assert!(out[..20].iter().all(|p| !p.tcp.cwr) && out[20].tcp.cwr, "marker on the last");
        assert!(out.iter().all(|p| p.wire_len == p.tcp.payload + 42 && p.ecn == Ecn::NotEct));
        // Pacing: 1.5 × 10 Mbit/s → 1212·8/15e6 = 0.646 ms per packet > 0.5 ms microburst:
        // packets go in pairs (0.646 < 0.5 is false after one, so a burst ends once the
        // accumulated time passes 0.5 ms), each burst waiting its accumulated time.
        let pace = 1212.0 * 8.0 / 15e6;
        let t: Vec<f64> = out.iter().map(|p| p.sent_at.as_secs_f64()).collect();
        for w in t.windows(2) {
            let gap = w[1] - w[0];
            assert!((gap - pace).abs() < 1e-6, "gap {gap} vs {pace}");
        }
        // A lower pacing interval groups several packets per microburst.
        let c = ScreamConfig { start_bitrate: 30e6, min_bitrate: 30e6, max_bitrate: 30e6, ..ScreamConfig::default() };
        let (_, out) = run_frames(c, 19);
        let pace = 1212.0 * 8.0 / 45e6; // 0.215 ms: three per burst (0.646 ms > 0.5 ms)
        let t: Vec<f64> = out.iter().map(|p| p.sent_at.as_secs_f64()).collect();
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 30);
        for (i, g) in gaps.iter().enumerate() {
            if i % 3 == 2 {
                // 3 · 0.215 = 0.646 ms accumulated > 1.1 · 0.5 ms: wait the accumulated time.
                assert!((g - 3.0 * pace).abs() < 1e-6, "gap {i} {g}");
            } else {
                assert_eq!(*g, 0.0, "back to back inside a microburst (gap {i})");
            }
        }
        // Headroom: a frame (1/50 s of data) leaves in ≈ 1/1.5 of the frame period.
        let span = t.last().unwrap() - t[0];
        assert!((span - 0.02 / 1.5).abs() < 0.001, "{span}");
    }

    #[test]
    fn frame_size_varies_uniformly_with_a_seeded_stream() {
        let c = ScreamConfig { start_bitrate: 10e6, min_bitrate: 10e6, max_bitrate: 10e6, frame_size_variation: 0.2, ..ScreamConfig::default() };
        let mut m = Scream::new(1, c.clone(), Stream::new(7, "scream/x"));
        let mut m2 = Scream::new(1, c, Stream::new(7, "scream/x"));
        let mut sizes = vec![];
        for _ in 0..2000 {
            let r = m.tx.encoder_rate().unwrap();
            let u = m.rng.uniform();
            assert_eq!(u, m2.rng.uniform());
            sizes.push(r / 50.0 / 8.0 * (1.0 + (u - 0.5) * 0.2));
        }
        let mean = sizes.iter().sum::<f64>() / sizes.len() as f64;
        let (lo, hi) = sizes.iter().fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        assert!((mean / 25_000.0 - 1.0).abs() < 0.01 && lo >= 25_000.0 * 0.9 && hi <= 25_000.0 * 1.1 && hi > 25_000.0 * 1.09);
    }
}
