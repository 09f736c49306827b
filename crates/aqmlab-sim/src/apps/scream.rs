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
/// Feedback once the highest received sequence number is this far past the last reported
/// one (`ScreamRx` `ackDiff` = 64 / 2, `checkIfFlushAck`; 76a298a).
const FB_EVERY: u32 = 32;
/// `scream_receiver.cpp`'s periodic thread: feedback when packets are unreported and this
/// much passed since the last report (`rtcpFbInterval_ntp`, at most 5 ms once the receiver
/// has a rate estimate, 20 ms before its first estimate 100 ms after the first packet).
const FB_INTERVAL: f64 = 0.005;
const FB_INTERVAL_INIT: f64 = 0.020;

// Constants of `code/ScreamV2Tx.cpp`, `code/ScreamTx.h` and `code/ScreamV2TxStream.cpp` at
// EricssonResearch/scream 76a298a (2024-10-31); NTP-Q16 values converted to seconds.
/// The C++ keeps time as the middle 32 bits of NTP (Q16 seconds, 1/65536 s ticks) and sRTT in
/// whole ticks; the model quantizes its clock, arrival times and sRTT the same way, so that
/// its "at most every ..." tests break ties as the C++ does.
const NTP_TICK: f64 = 1.0 / 65536.0;
fn ntp(t: f64) -> f64 {
    (t * 65536.0 + 1e-6).floor() * NTP_TICK
}
/// CE, loss and virtual-CE events at most every min(this, sRTT) (the literal `1966u`).
const MIN_CONGESTION_INTERVAL: f64 = 1966.0 * NTP_TICK;
/// L4S alpha updated at most every min(this, sRTT) (`655u`).
const L4S_ALPHA_UPDATE_INTERVAL: f64 = 655.0 * NTP_TICK;
/// `kSrttVirtual`: the increase is scaled by min(1, sRTT / this).
const SRTT_VIRTUAL: f64 = 0.025;
/// `kL4sG`: gain of the L4S alpha EWMA.
const L4S_G: f64 = 1.0 / 32.0;
/// `kQueueDelayAvgAlpha`.
const QDELAY_AVG_ALPHA: f64 = 1.0 / 4.0;
/// `kCwndOverhead`: bytes in flight may exceed cwnd by this factor.
const CWND_OVERHEAD: f64 = 1.5;
/// `kBytesInFlightLimit` / `kMaxBytesInFlightLimitCompensation`.
const BYTES_IN_FLIGHT_LIMIT: f64 = 0.9;
const MAX_BYTES_IN_FLIGHT_LIMIT_COMPENSATION: f64 = 1.5;
/// `kPacketOverhead` (RTP + UDP), for the rate from cwnd.
const PACKET_OVERHEAD: f64 = 20.0;
/// `kRateUpdateInterval_ntp` (3277 = 50 ms).
const RATE_UPDATE_INTERVAL: f64 = 3277.0 * NTP_TICK;
/// `kSlowUpdateInterval_ntp`.
const SLOW_UPDATE_INTERVAL: f64 = 3277.0 * NTP_TICK;
/// `kMssUpdateInterval_ntp`.
const MSS_UPDATE_INTERVAL: f64 = 1.0;
const MIN_PACE_INTERVAL: f64 = 10e-6;
const INIT_MSS: i64 = 100;
const MIN_CWND_MSS: i64 = 3;
/// `kRateUpDateSize` (ScreamTx.h).
const RATE_UPDATE_HIST: usize = 4;
const MAX_BYTES_IN_FLIGHT_HIST: usize = 20;
/// `kCwndIHistSize`: the inflection point cwndI is the median of the last 9 values.
const CWND_I_HIST: usize = 9;
/// L4S counts as active while the last CE event is younger than this (`5 * 65535`).
const L4S_ACTIVE_SPAN: f64 = 5.0 * 65535.0 * NTP_TICK;
/// `kBaseDelayResetInterval_ntp`: the target is halved once per minute (classic operation).
const BASE_DELAY_RESET_INTERVAL: f64 = 60.0;
/// `kNumRateLimitRtts` and the 100 ms floor (`6554u`) of that halving.
const RATE_LIMIT_RTTS: f64 = 5.0;
const RATE_LIMIT_MIN: f64 = 6554.0 * NTP_TICK;
/// `isOkToTransmit`'s deadlock guard: 0.5 s (32768) without a transmission empties the flight.
const DEADLOCK_TIMEOUT: f64 = 0.5;
/// `kMinRtpQueueDiscardInterval_ntp`.
const MIN_RTP_QUEUE_DISCARD_INTERVAL: f64 = 0.25;
/// `detectLoss`: packets this far behind the highest acknowledged one are resolved for good.
const DETECT_LOSS_WINDOW: u32 = 512;
/// The frame-size histogram (`relFrameSizeHist`, ScreamV2TxStream.cpp; bins from ScreamTx.h).
const REL_FRAME_SIZE_BINS: usize = 50;
const REL_FRAME_SIZE_DECAY: f64 = 1.0 / 1024.0;
const REL_FRAME_SIZE_PERCENTILE: f64 = 0.75;
const REL_FRAME_SIZE_PREAMBLE: u64 = 50;
const REL_FRAME_SIZE_RANGE: f64 = 3.0;

/// Settings of one SCReAM media flow (defaults: the BW test tool `scream_sender.cpp`'s at
/// 76a298a).
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
    /// cwnd scale on loss and on classic-ECN CE (`scaleFactor`, 0.7 for both in the tool).
    pub loss_beta: f64,
    pub ecn_ce_beta: f64,
    /// Pacing rate = headroom × target bitrate (`-paceheadroom`, 1.5).
    pub pacing_headroom: f64,
    /// Cap of the adaptive pacing scale for large frames (`-adaptivepaceheadroom`, 1.5).
    pub max_adaptive_pacing_scale: f64,
    /// Host time per packet of the tool's transmit loop; the next packet leaves no earlier
    /// (default 0: back to back inside a microburst).
    pub send_time: Time,
    /// cwnd may exceed the largest recent bytes in flight by this factor (2.0).
    pub bytes_in_flight_headroom: f64,
    /// Multiplicative increase per RTT at most (0.05).
    pub mul_increase: f64,
    /// The multiplicative part of the increase ramps back over this after congestion
    /// (`-postcongestiondelay`, 4 s).
    pub post_congestion_delay: f64,
    /// RTP queue cleared when older than this (`registerNewStream`, 0.2 s in the tool).
    pub max_rtp_queue_delay: f64,
    /// Loss when ACKed this long after a later packet (`kReordertime_ntp`, 30 ms).
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
            max_bitrate: 200e6,
            frame_rate: 50.0,
            frame_size_variation: 0.0,
            microburst_interval: Time::from_micros(500),
            packet_size: 1200,
            queue_delay_target: 0.06,
            loss_beta: 0.7,
            ecn_ce_beta: 0.7,
            pacing_headroom: 1.5,
            max_adaptive_pacing_scale: 1.5,
            send_time: Time::ZERO,
            bytes_in_flight_headroom: 2.0,
            mul_increase: 0.05,
            post_congestion_delay: 4.0,
            max_rtp_queue_delay: 0.2,
            reorder_time: 1966.0 * NTP_TICK,
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
    marker: bool,
    used: bool,
    acked: bool,
    after_received_edge: bool,
}

/// The sender's congestion control: `ScreamV2Tx` with one `Stream` (76a298a). Times are
/// seconds (f64); the clock of `new` is the test tool's time zero.
#[derive(Debug)]
pub struct ScreamTx {
    cfg: ScreamConfig,
    l4s: bool,
    // Window and flight.
    pub cwnd: i64,
    cwnd_min: i64,
    cwnd_min_low: i64,
    cwnd_i: i64,
    cwnd_i_hist: [i64; CWND_I_HIST],
    cwnd_i_hist_ix: usize,
    cwnd_ratio: f64,
    pub bytes_in_flight: i64,
    prev_bytes_in_flight: i64,
    max_bytes_in_flight: i64,
    max_bytes_in_flight_prev: i64,
    max_bytes_in_flight_hist: [i64; MAX_BYTES_IN_FLIGHT_HIST],
    max_bytes_in_flight_hist_ix: usize,
    bytes_in_flight_ratio: f64,
    pub mss: i64,
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
    is_l4s_active: bool,
    is_new_frame: bool,
    post_congestion_scale: f64,
    last_loss_event: f64,
    last_ce_event: Option<f64>,
    last_congestion_detected: f64,
    congested_once: bool,
    last_cwnd_i_update: f64,
    last_l4s_alpha_update: f64,
    last_qdelay_avg_update: f64,
    last_cwnd_update: Option<f64>,
    last_slow_update: f64,
    last_mss_update: f64,
    last_rate_limit: f64,
    can_reset_base_delay: bool,
    last_transmit: f64,
    init_time: f64,
    // Pacing.
    pub pace_interval: f64,
    // Rates (ScreamV2Tx totals = the one stream's).
    last_rate_update: f64,
    stream_last_rate_update: Option<f64>,
    bytes_transmitted: i64,
    bytes_acked: i64,
    bytes_rtp: i64,
    rate_rtp_hist: [f64; RATE_UPDATE_HIST],
    rate_rtp_hist_ix: usize,
    pub rate_transmitted: f64,
    pub rate_acked: f64,
    pub rate_rtp_avg: f64,
    // Stream: frames, target bitrate.
    pub target_bitrate: f64,
    rate_share: f64,
    frame_size_acc: i64,
    frame_period: f64,
    last_frame_time: Option<f64>,
    n_frames: u64,
    rel_frame_size_hist: [f64; REL_FRAME_SIZE_BINS],
    stream_rel_frame_size_high: f64,
    /// `ScreamV2Tx::relFrameSizeHigh`: the stream's, copied every slow update.
    pub rel_frame_size_high: f64,
    adaptive_pacing_scale: f64,
    last_rtp_queue_discard: Option<f64>,
    rtp_queue_discard: bool,
    repair_loss: bool,
    was_repair_loss: bool,
    // Loss detection.
    tx: Vec<TxPacket>,
    scan_from: u32,
    hi_seq_tx: Option<u32>,
    hi_seq_ack: u32,
    time_tx_ack: f64,
    frame_time_ack_high: f64,
    pub losses: u64,
    pub ce_marked: u64,
}

impl ScreamTx {
    /// `ScreamV2Tx(...)` as the test tool constructs it + `registerNewStream` + `initialize`
    /// at `now` (seconds).
    pub fn new(cfg: ScreamConfig, now: f64) -> Self {
        let now = ntp(now);
        let mss0 = (cfg.packet_size + RTP_HEADER) as i64;
        // The tool: initial cwnd = initRate[kbit/s] · 100 / 8 (100 ms worth); cwndMinLow =
        // 2 · (mtu + 12).
        let cwnd = (cfg.start_bitrate / 1000.0) as i64 * 100 / 8;
        let target = cfg.start_bitrate.clamp(cfg.min_bitrate, cfg.max_bitrate);
        ScreamTx {
            l4s: cfg.ecn == Ecn::Ect1,
            cwnd: cwnd.max(2 * INIT_MSS),
            cwnd_min: 2 * INIT_MSS,
            cwnd_min_low: 2 * mss0,
            cwnd_i: 1,
            cwnd_i_hist: [0; CWND_I_HIST],
            cwnd_i_hist_ix: 0,
            cwnd_ratio: 0.001,
            bytes_in_flight: 0,
            prev_bytes_in_flight: 0,
            max_bytes_in_flight: 0,
            max_bytes_in_flight_prev: 0,
            max_bytes_in_flight_hist: [0; MAX_BYTES_IN_FLIGHT_HIST],
            max_bytes_in_flight_hist_ix: 0,
            bytes_in_flight_ratio: 0.0,
            mss: INIT_MSS,
            bytes_newly_acked: 0,
            bytes_newly_acked_ce: 0,
            srtt: 3277.0 * NTP_TICK,
            srtt_sh: 3277.0 * NTP_TICK,
            srtt_sh_prev: 3277.0 * NTP_TICK,
            last_srtt_update: now,
            base_owd: f64::INFINITY,
            queue_delay: 0.0,
            queue_delay_avg: 0.0,
            queue_delay_min: 1000.0,
            queue_delay_min_avg: 0.0,
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
            is_l4s_active: false,
            is_new_frame: false,
            post_congestion_scale: 1.0,
            last_loss_event: now,
            last_ce_event: None,
            last_congestion_detected: now,
            congested_once: false,
            last_cwnd_i_update: now,
            last_l4s_alpha_update: now,
            last_qdelay_avg_update: now,
            last_cwnd_update: None,
            last_slow_update: now,
            last_mss_update: now,
            last_rate_limit: now,
            can_reset_base_delay: false,
            last_transmit: now,
            init_time: now,
            pace_interval: 0.0,
            last_rate_update: now,
            stream_last_rate_update: None,
            bytes_transmitted: 0,
            bytes_acked: 0,
            bytes_rtp: 0,
            rate_rtp_hist: [0.0; RATE_UPDATE_HIST],
            rate_rtp_hist_ix: 0,
            rate_transmitted: 0.0,
            rate_acked: 0.0,
            rate_rtp_avg: 0.0,
            target_bitrate: target,
            rate_share: cfg.min_bitrate,
            frame_size_acc: 0,
            frame_period: 0.02,
            last_frame_time: None,
            n_frames: 0,
            rel_frame_size_hist: {
                let mut h = [0.0; REL_FRAME_SIZE_BINS];
                h[0] = 1.0;
                h
            },
            stream_rel_frame_size_high: 1.0,
            rel_frame_size_high: 1.0,
            adaptive_pacing_scale: 1.0,
            last_rtp_queue_discard: None,
            rtp_queue_discard: false,
            repair_loss: false,
            was_repair_loss: false,
            tx: vec![TxPacket::default(); TX_RING],
            scan_from: 0,
            hi_seq_tx: None,
            hi_seq_ack: 0,
            time_tx_ack: 0.0,
            frame_time_ack_high: 0.0,
            losses: 0,
            ce_marked: 0,
            cfg,
        }
    }

    fn min_interval(&self) -> f64 {
        MIN_CONGESTION_INTERVAL.min(self.srtt)
    }

    /// `ScreamV2Tx::getTargetBitrate`: the encoder's rate, or `None` once after a loss or an
    /// RTP queue discard (the tool's frame is then empty: a refresh request). Unless L4S is
    /// active with a small queue-delay floor, the rate is halved for max(100 ms, 5 sRTT) once
    /// a minute (from the start), and then the base-delay history is reset.
    pub fn encoder_rate(&mut self, now: f64) -> Option<f64> {
        let now = ntp(now);
        let refresh = std::mem::take(&mut self.rtp_queue_discard) || std::mem::take(&mut self.repair_loss);
        let mut rate = if refresh && !self.was_repair_loss {
            self.was_repair_loss = true;
            None
        } else {
            self.was_repair_loss = false;
            Some(self.target_bitrate)
        };
        if !self.is_l4s_active || self.queue_delay_min_avg > self.cfg.queue_delay_target / 8.0 {
            if now - self.last_rate_limit > BASE_DELAY_RESET_INTERVAL {
                self.last_rate_limit = now;
            }
            if now - self.last_rate_limit < RATE_LIMIT_MIN.max(RATE_LIMIT_RTTS * self.srtt) {
                rate = rate.map(|r| r * 0.5);
                self.can_reset_base_delay = true;
            } else if self.can_reset_base_delay {
                self.queue_delay_min_avg = 0.0;
                self.queue_delay = 0.0;
                self.base_owd = f64::INFINITY;
                self.can_reset_base_delay = false;
            }
        }
        rate
    }

    /// `ScreamV2Tx::newMediaFrame` (+ `Stream::newMediaFrame`) for one RTP packet pushed to
    /// the RTP queue; `rtp_queue_delay` is the age of the queue's oldest packet,
    /// `rtp_queue_bytes` what it holds and `next_size` the size of its head (after the push).
    /// Returns true if the RTP queue must be cleared (`Stream::updateTargetBitrate`'s
    /// discard).
    pub fn new_media_packet(&mut self, now: f64, size: i64, marker: bool, rtp_queue_delay: f64, rtp_queue_bytes: i64, next_size: i64) -> bool {
        let now = ntp(now);
        if marker {
            self.is_new_frame = true;
        }
        self.frame_size_acc += size;
        let mut discard = false;
        if marker {
            self.n_frames += 1;
            if let Some(last) = self.last_frame_time {
                self.frame_period = (now - last) * 0.9 + self.frame_period * 0.1;
            }
            self.last_frame_time = Some(now);
            let frame_size_avg = self.target_bitrate * self.frame_period / 8.0;
            let frame_size = rtp_queue_bytes.max(self.frame_size_acc) as f64;
            let acc = self.frame_size_acc as f64;
            if acc > frame_size_avg {
                // Histogram of how far frames exceed the average; its 75th percentile
                // scales the window and the target down (`relFrameSizeHigh`).
                let x = (acc - frame_size_avg) / (frame_size_avg * (REL_FRAME_SIZE_RANGE - 1.0)) * REL_FRAME_SIZE_BINS as f64;
                let ix = (x as i64).clamp(0, REL_FRAME_SIZE_BINS as i64 - 1) as usize;
                self.rel_frame_size_hist[ix] += 1.0;
                for h in self.rel_frame_size_hist.iter_mut() {
                    *h *= 1.0 - REL_FRAME_SIZE_DECAY;
                }
                if self.n_frames > REL_FRAME_SIZE_PREAMBLE {
                    let mark = self.rel_frame_size_hist.iter().sum::<f64>() * REL_FRAME_SIZE_PERCENTILE;
                    let mut ix = 1;
                    let mut sum = self.rel_frame_size_hist[0];
                    while sum < mark && ix < REL_FRAME_SIZE_BINS {
                        sum += self.rel_frame_size_hist[ix];
                        ix += 1;
                    }
                    ix -= 1;
                    self.stream_rel_frame_size_high = 1.0 + ix as f64 * (REL_FRAME_SIZE_RANGE - 1.0) / REL_FRAME_SIZE_BINS as f64;
                }
            }
            self.frame_size_acc = 0;
            self.adaptive_pacing_scale = if frame_size_avg > 500.0 {
                (frame_size / frame_size_avg).clamp(1.0, self.cfg.max_adaptive_pacing_scale)
            } else {
                1.0
            };
            discard |= self.update_target_bitrate(now, rtp_queue_delay);
        }
        // The caller clears the queue on a discard; the second check then sees an empty queue.
        let delay_after = if discard { 0.0 } else { rtp_queue_delay };
        discard |= self.update_target_bitrate(now, delay_after);
        if !discard {
            self.bytes_rtp += size;
            self.mss = self.mss.max(next_size);
            self.cwnd_min = self.cwnd_min_low.max(2 * self.mss);
            self.cwnd = self.cwnd.max(self.cwnd_min);
        }
        discard
    }

    /// `Stream::updateTargetBitrate`. Returns true when the RTP queue is to be cleared.
    fn update_target_bitrate(&mut self, now: f64, rtp_queue_delay: f64) -> bool {
        let last = *self.last_rtp_queue_discard.get_or_insert(now);
        let mut discard = false;
        if rtp_queue_delay > self.cfg.max_rtp_queue_delay && now - last > MIN_RTP_QUEUE_DISCARD_INTERVAL {
            discard = true;
            self.rtp_queue_discard = true;
            self.last_rtp_queue_discard = Some(now);
        }
        self.target_bitrate = self.rate_share.max(self.cfg.min_bitrate).min(self.cfg.max_bitrate);
        discard
    }

    /// The periodic part of `isOkToTransmit` (the tool calls it every 10 µs while waiting):
    /// rate estimates every 50 ms, the MSS reset every second and the 0.5 s deadlock guard.
    pub fn tick(&mut self, now: f64) {
        let now = ntp(now);
        if now - self.last_rate_update > RATE_UPDATE_INTERVAL {
            if let Some(last) = self.stream_last_rate_update {
                let dt = now - last;
                self.rate_transmitted = self.bytes_transmitted as f64 * 8.0 / dt;
                self.rate_acked = self.bytes_acked as f64 * 8.0 / dt;
                self.rate_rtp_hist[self.rate_rtp_hist_ix] = self.bytes_rtp as f64 * 8.0 / dt;
                self.rate_rtp_hist_ix = (self.rate_rtp_hist_ix + 1) % RATE_UPDATE_HIST;
                self.rate_rtp_avg = self.rate_rtp_hist.iter().sum::<f64>() / RATE_UPDATE_HIST as f64;
            }
            self.bytes_transmitted = 0;
            self.bytes_acked = 0;
            self.bytes_rtp = 0;
            self.stream_last_rate_update = Some(now);
            self.last_rate_update = now;
        }
        if now - self.last_mss_update > MSS_UPDATE_INTERVAL {
            self.mss = INIT_MSS;
            self.cwnd_min = self.cwnd_min_low.max(MIN_CWND_MSS * self.mss);
            self.cwnd = self.cwnd.max(self.cwnd_min);
            self.last_mss_update = now;
        }
        if now - self.last_transmit > DEADLOCK_TIMEOUT {
            for t in self.tx.iter_mut() {
                t.used = false;
            }
            if let Some(hi) = self.hi_seq_tx {
                self.scan_from = hi.wrapping_add(1);
            }
            self.bytes_in_flight = 0;
        }
    }

    /// When the deadlock guard would next fire if nothing is sent.
    pub fn deadlock_at(&self) -> f64 {
        self.last_transmit + DEADLOCK_TIMEOUT
    }

    /// The window test of `isOkToTransmit`.
    pub fn window_allows(&self, size: i64) -> bool {
        (self.bytes_in_flight + size) as f64 <= self.cwnd as f64 * CWND_OVERHEAD * self.rel_frame_size_high + self.mss as f64
    }

    /// `addTransmitted`; returns the pacing interval to accumulate (s).
    pub fn transmitted(&mut self, now: f64, seq: u32, size: i64, frame_time: f64, marker: bool) -> f64 {
        let now = ntp(now);
        let t = &mut self.tx[seq as usize % TX_RING];
        *t = TxPacket { seq, tx_time: now, frame_time, size, marker, used: true, acked: false, after_received_edge: false };
        if self.hi_seq_tx.is_none() {
            self.scan_from = seq;
        }
        self.hi_seq_tx = Some(seq);
        self.bytes_in_flight += size;
        self.bytes_transmitted += size;
        self.last_transmit = now;
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

    /// One RFC 8888 report: `(seq, arrival time, CE)` of every reported packet that arrived
    /// (`incomingStandardizedFeedback` per packet, `isLast` on the final one, which is the
    /// highest reported). `rtp_queue_delay` is the RTP queue's age. Returns true if the RTP
    /// queue must be cleared.
    pub fn on_feedback(&mut self, now: f64, received: &[(u32, f64, bool)], rtp_queue_delay: f64) -> bool {
        let now = ntp(now);
        let n = received.len();
        for (i, &(seq, arrival, ce)) in received.iter().enumerate() {
            let is_last = i + 1 == n;
            self.prev_bytes_in_flight = self.bytes_in_flight;
            self.max_bytes_in_flight = self.max_bytes_in_flight.max(self.bytes_in_flight);
            let (is_ce, is_mark) = self.mark_acked(now, seq, ntp(arrival), ce, is_last);
            self.is_ce_this_feedback |= is_ce;
            if is_last || is_mark {
                self.detect_loss(now, seq);
            }
        }
        if n == 0 {
            return false;
        }
        self.end_of_feedback(now, rtp_queue_delay)
    }

    /// `markAcked`: (CE, marker) of a newly acknowledged packet; queue delay and sRTT.
    fn mark_acked(&mut self, now: f64, seq: u32, arrival: f64, ce: bool, is_last: bool) -> (bool, bool) {
        let t = self.tx[seq as usize % TX_RING];
        if !t.used || t.seq != seq || t.acked {
            return (false, false);
        }
        self.packets_delivered_this_rtt += 1;
        if ce {
            self.bytes_newly_acked_ce += t.size;
            self.packets_marked_this_rtt += 1;
            self.ce_marked += 1;
        }
        if t.frame_time > self.frame_time_ack_high {
            self.frame_time_ack_high = t.frame_time;
        }
        self.tx[seq as usize % TX_RING].acked = true;
        // Queue delay: one-way delay above the smallest seen (one clock: no drift to handle).
        let owd = arrival - t.tx_time;
        self.base_owd = self.base_owd.min(owd);
        self.queue_delay = (owd - self.base_owd).max(0.0);
        if is_last {
            // In whole ticks with the C++'s truncating integer division.
            let tk = |x: f64| (x * 65536.0).round();
            let rtt = tk(now - t.tx_time);
            self.srtt_sh_prev = self.srtt_sh;
            self.srtt_sh = ((7.0 * tk(self.srtt_sh) + rtt) / 8.0).floor() * NTP_TICK;
            if now - self.last_srtt_update > self.srtt_sh {
                self.srtt = ((7.0 * tk(self.srtt) + tk(self.srtt_sh)) / 8.0).floor() * NTP_TICK;
                self.last_srtt_update = now;
            }
        }
        self.time_tx_ack = t.tx_time;
        (ce, t.marker)
    }

    /// `detectLoss`: everything up to `highest` leaves the flight; a packet not received
    /// although one sent `reorder_time` (plus the frame-timestamp difference) later was, is
    /// lost.
    fn detect_loss(&mut self, now: f64, highest: u32) {
        let Some(hi_tx) = self.hi_seq_tx else { return };
        // Unacknowledged packets more than 512 behind the previous highest report are lost
        // for good (detectLoss's first loop; the C++ visits a strip of at most 32 of them per
        // call, here all of them).
        let old_hi = std::mem::replace(&mut self.hi_seq_ack, highest);
        let edge = old_hi.saturating_sub(DETECT_LOSS_WINDOW);
        let mut seq = self.scan_from;
        while seq < edge && seq <= hi_tx {
            let i = seq as usize % TX_RING;
            let t = self.tx[i];
            if t.used && t.seq == seq {
                if !t.acked {
                    if now - self.last_loss_event > self.srtt && self.cfg.loss_beta < 1.0 {
                        self.loss_event = true;
                    }
                    self.losses += 1;
                    self.repair_loss = true;
                }
                if !t.after_received_edge {
                    self.bytes_newly_acked += t.size;
                    self.bytes_in_flight = (self.bytes_in_flight - t.size).max(0);
                    self.bytes_acked += t.size;
                }
                self.tx[i].used = false;
            }
            seq += 1;
            self.scan_from = seq;
        }
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

    /// The `isLast` part of `incomingStandardizedFeedback`: the CE event, L4S alpha, the
    /// queue-delay average, the virtual-CE delay signal, then `updateCwnd` +
    /// `updateTargetBitrate`.
    fn end_of_feedback(&mut self, now: f64, rtp_queue_delay: f64) -> bool {
        let min_iv = self.min_interval();
        if now - self.last_loss_event > min_iv && self.is_ce_this_feedback {
            self.ecn_ce_event = true;
            self.last_loss_event = now;
            self.last_ce_event = Some(now);
        }
        self.is_ce_this_feedback = false;
        if self.l4s && now - self.last_l4s_alpha_update > L4S_ALPHA_UPDATE_INTERVAL.min(self.srtt) {
            self.last_l4s_alpha_update = now;
            self.fraction_marked = 0.0;
            if self.packets_delivered_this_rtt > 0 {
                self.fraction_marked = self.packets_marked_this_rtt as f64 / self.packets_delivered_this_rtt as f64;
                if self.fraction_marked == 1.0 {
                    self.ce_density = 1.0;
                }
                self.fraction_marked *= self.ce_density;
                self.l4s_alpha = (L4S_G * self.fraction_marked + (1.0 - L4S_G) * self.l4s_alpha).min(1.0);
                self.packets_delivered_this_rtt = 0;
                self.packets_marked_this_rtt = 0;
            }
        }
        if now - self.last_qdelay_avg_update > min_iv {
            self.queue_delay_avg = if self.queue_delay < self.queue_delay_avg {
                self.queue_delay
            } else {
                (1.0 - QDELAY_AVG_ALPHA) * self.queue_delay_avg + QDELAY_AVG_ALPHA * self.queue_delay
            };
            self.last_qdelay_avg_update = now;
        }
        // Virtual CE from the queue delay, when L4S marking is absent or very light.
        let alpha_lim = 2.0 / self.target_bitrate * self.mss as f64 * 8.0 / self.srtt;
        let target = self.cfg.queue_delay_target;
        if (self.l4s_alpha < alpha_lim * 0.1 || !self.is_l4s_active) && self.queue_delay_avg > target / 2.0 && now - self.last_loss_event > min_iv {
            self.virtual_ce_event = true;
            self.virtual_l4s_alpha = (alpha_lim + ((self.queue_delay_avg - target / 4.0) / (3.0 * target / 4.0)).max(0.0)).min(1.0);
        }
        if self.srtt_sh_prev > self.srtt_sh && self.fraction_marked == 1.0 {
            self.ecn_ce_event = false;
        }
        if self.loss_event || self.ecn_ce_event || self.virtual_ce_event {
            self.last_loss_event = now;
        }
        let last = *self.last_cwnd_update.get_or_insert(now);
        let mut discard = false;
        if now - last > min_iv || self.loss_event || self.ecn_ce_event || self.virtual_ce_event || self.is_new_frame {
            self.bytes_in_flight_ratio = (self.prev_bytes_in_flight as f64 / self.cwnd as f64).min(1.0);
            self.update_cwnd(now);
            discard = self.update_target_bitrate(now, rtp_queue_delay);
            self.ecn_ce_event = false;
            self.virtual_ce_event = false;
            self.last_cwnd_update = Some(now);
            self.is_new_frame = false;
        }
        self.is_l4s_active = self.l4s && self.last_ce_event.is_some_and(|t| now - t < L4S_ACTIVE_SPAN);
        discard
    }

    /// `updateCwndI`: the inflection point is the median of the last 9 values.
    fn update_cwnd_i(&mut self, v: i64) {
        if self.cwnd_i_hist[0] == 0 {
            self.cwnd_i_hist = [v; CWND_I_HIST];
        }
        self.cwnd_i_hist[self.cwnd_i_hist_ix] = v;
        self.cwnd_i_hist_ix = (self.cwnd_i_hist_ix + 1) % CWND_I_HIST;
        let mut s = self.cwnd_i_hist;
        s.sort_unstable();
        self.cwnd_i = s[CWND_I_HIST / 2];
    }

    /// `updateCwnd`: pacing interval, the loss / CE / virtual-CE decreases, the increase, and
    /// the rate share `8·cwnd/sRTT` that becomes the target bitrate.
    pub fn update_cwnd(&mut self, now: f64) {
        let pcd = self.cfg.post_congestion_delay;
        self.post_congestion_scale = ((now - self.last_congestion_detected) / pcd).clamp(0.0, 1.0);
        self.queue_delay_min = self.queue_delay_min.min(self.queue_delay);
        let mss = self.mss as f64;

        // Pacing: headroom × max(target, RTP rate), at least 50 kbit/s.
        let mut headroom = self.cfg.pacing_headroom * self.adaptive_pacing_scale;
        if !self.congested_once {
            headroom = headroom.max(1.5);
        }
        let pacing_bitrate = (headroom * self.target_bitrate.max(self.rate_rtp_avg)).max(50e3);
        self.pace_interval = (mss * 8.0 / pacing_bitrate).max(MIN_PACE_INTERVAL);

        if now - self.last_slow_update > SLOW_UPDATE_INTERVAL {
            self.queue_delay_min_avg = if self.queue_delay_min < self.queue_delay_min_avg {
                self.queue_delay_min
            } else {
                0.005 * self.queue_delay_min + 0.995 * self.queue_delay_min_avg
            };
            self.queue_delay_min = 1000.0;
            self.max_bytes_in_flight_hist[self.max_bytes_in_flight_hist_ix] = self.max_bytes_in_flight;
            self.max_bytes_in_flight_hist_ix = (self.max_bytes_in_flight_hist_ix + 1) % MAX_BYTES_IN_FLIGHT_HIST;
            if self.target_bitrate > self.cfg.max_bitrate * 0.95 {
                let mut tmp = self.max_bytes_in_flight;
                for &h in &self.max_bytes_in_flight_hist {
                    tmp = tmp.max(h);
                }
                tmp = tmp.max((self.cfg.pacing_headroom * self.rel_frame_size_high * self.cfg.max_bitrate / 8.0 * (self.srtt + 0.001)) as i64);
                self.cwnd = self.cwnd.min(tmp);
            }
            if now - self.init_time > 2.0 {
                self.max_bytes_in_flight_prev = self.max_bytes_in_flight;
                self.max_bytes_in_flight = 0;
            }
            self.rel_frame_size_high = self.stream_rel_frame_size_high;
            self.last_slow_update = now;
        }

        let scale_ext = self.cfg.mul_increase * self.cwnd as f64 / mss;
        // Scale-down near the inflection point cwndI.
        let r = 4.0 * (self.cwnd - self.cwnd_i) as f64 / self.cwnd_i as f64;
        let scl_i = (r * r).clamp(0.1, 1.0);

        if self.loss_event {
            if now - self.last_cwnd_i_update > 0.5 {
                self.last_cwnd_i_update = now;
                self.update_cwnd_i(self.cwnd);
            }
            self.cwnd = self.cwnd_min.max((self.cfg.loss_beta * self.cwnd as f64) as i64);
            self.loss_event = false;
            self.last_congestion_detected = now;
            self.congested_once = true;
            self.post_congestion_scale = 0.0;
        } else if self.ecn_ce_event || self.virtual_ce_event {
            if now - self.last_cwnd_i_update > self.srtt {
                self.last_cwnd_i_update = now;
                self.update_cwnd_i(self.cwnd);
            }
            if self.l4s && !self.virtual_ce_event {
                let mut back_off = self.l4s_alpha / 2.0;
                back_off *= (1.0 - self.cwnd_ratio).max(0.5);
                if self.queue_delay < self.cfg.queue_delay_target * 0.25 {
                    back_off *= scl_i.max(0.25);
                }
                if now - self.last_congestion_detected > 5.0 {
                    self.cwnd = self.cwnd.min(self.max_bytes_in_flight_prev);
                    back_off = back_off.max(0.25);
                    self.l4s_alpha = self.l4s_alpha.max(0.25);
                }
                self.cwnd = self.cwnd_min.max(((1.0 - back_off) * self.cwnd as f64) as i64);
            } else if self.virtual_ce_event {
                let back_off = self.virtual_l4s_alpha / 2.0;
                self.cwnd = self.cwnd_min.max(((1.0 - back_off) * self.cwnd as f64) as i64);
            } else {
                self.cwnd = self.cwnd_min.max((self.cfg.ecn_ce_beta * self.cwnd as f64) as i64);
            }
            self.ecn_ce_event = false;
            self.last_congestion_detected = now;
            self.congested_once = true;
            self.post_congestion_scale = 0.0;
        }
        self.cwnd_ratio = mss / self.cwnd as f64;

        // Increase: ACKed bytes that were not CE-marked, one MSS per cwnd, scaled.
        let acked_minus_ce = (self.bytes_newly_acked - self.bytes_newly_acked_ce) as f64;
        let mut increment = acked_minus_ce * self.cwnd_ratio;
        increment *= if self.is_l4s_active { scl_i.max(0.25) } else { scl_i };
        increment *= (self.srtt / SRTT_VIRTUAL).min(1.0);
        increment *= (1.0 - self.cwnd_ratio).max(0.5);
        let mut mul = 1.0 + scale_ext;
        if mul > 1.0 && pcd > 0.2 {
            mul = 1.0 + (mul - 1.0) * self.post_congestion_scale * scl_i;
        }
        increment *= mul;
        let max_allowed = mss + self.max_bytes_in_flight.max(self.max_bytes_in_flight_prev) as f64 * self.cfg.bytes_in_flight_headroom;
        let next = self.cwnd + (increment + 0.5) as i64;
        if next as f64 <= max_allowed {
            self.cwnd = next;
        }
        self.cwnd = self.cwnd.max(self.cwnd_min);
        self.bytes_newly_acked = 0;
        self.bytes_newly_acked_ce = 0;

        // The rate the window supports over sRTT (+1 ms), less margins.
        let mut rate = 8.0 * self.cwnd as f64 / (self.srtt + 0.001).clamp(0.001, 0.2);
        if !self.is_l4s_active && self.bytes_in_flight_ratio > BYTES_IN_FLIGHT_LIMIT {
            rate /= MAX_BYTES_IN_FLIGHT_LIMIT_COMPENSATION.min(self.bytes_in_flight_ratio / BYTES_IN_FLIGHT_LIMIT);
        }
        rate *= 1.0 - (self.cwnd_ratio - 0.1).clamp(0.0, 0.2);
        rate /= self.rel_frame_size_high;
        rate *= mss / (mss + PACKET_OVERHEAD);
        self.rate_share = if rate > 1.0 { rate.min(self.cfg.max_bitrate) } else { 0.0 };
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
    after_sleep: bool,
    frame_timer: Timer,
    pace_timer: Timer,
    started: bool,
    // Receiver.
    arrivals: Vec<Arrival>,
    rx_highest: Option<u32>,
    rx_since_fb: u32,
    rx_hi_reported: Option<u32>,
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
            after_sleep: false,
            frame_timer: Timer::default(),
            pace_timer: Timer::default(),
            started: false,
            arrivals: vec![Arrival::default(); TX_RING],
            rx_highest: None,
            rx_since_fb: 0,
            rx_hi_reported: None,
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
        let Some(rate) = self.tx.encoder_rate(now) else { return };
        let mut bytes = (rate / self.cfg.frame_rate / 8.0 * (1.0 + (u - 0.5) * self.cfg.frame_size_variation)) as i64;
        while bytes > 0 {
            let payload = bytes.min(self.cfg.packet_size as i64);
            bytes -= payload;
            let size = payload as u32 + RTP_HEADER;
            let q = Queued { seq: self.next_seq, size, marker: bytes == 0, enqueued: ctx.now, frame_time: ctx.now };
            self.next_seq += 1;
            self.rtp_queue.push_back(q);
            self.rtp_queue_bytes += size as i64;
            let front = self.rtp_queue.front().copied().unwrap_or(q);
            let age = (ctx.now - front.enqueued).as_secs_f64();
            self.account_target(now);
            if self.tx.new_media_packet(now, size as i64, q.marker, age, self.rtp_queue_bytes, front.size as i64) {
                // RTP queue too old: cleared (the encoder is asked for a refresh).
                self.stats.rtp_queue_discards += 1;
                self.stats.packets_discarded += self.rtp_queue.len() as u64;
                self.rtp_queue.clear();
                self.rtp_queue_bytes = 0;
            }
        }
        self.try_send(ctx);
    }

    /// The test tool's `transmitRtpThread`: wait until `isOkToTransmit` allows a packet; if
    /// the pacing intervals accumulated since the last sleep exceed the microburst interval,
    /// sleep that long (the interval itself if within 10 % of it), then send the head packet
    /// without asking again; add its pacing interval.
    fn try_send(&mut self, ctx: &mut EndpointCtx) {
        let now = ctx.now;
        if now < self.next_send {
            self.pace_timer.arm(self.next_send, ctx.event(FlowTimer::MediaPace), ctx.events);
            return;
        }
        let mb = self.cfg.microburst_interval.as_secs_f64();
        let t = now.as_secs_f64();
        while let Some(&q) = self.rtp_queue.front() {
            if !std::mem::take(&mut self.after_sleep) {
                self.tx.tick(t);
                if !self.tx.window_allows(q.size as i64) || self.tx.ring_full(q.seq) {
                    // Retried when feedback arrives, or by the deadlock guard.
                    let guard = Time::from_secs_f64(self.tx.deadlock_at()) + Time::from_micros(10);
                    self.pace_timer.arm(guard.max(now + Time::from_micros(10)), ctx.event(FlowTimer::MediaPace), ctx.events);
                    return;
                }
                if self.pace_acc > mb {
                    let wait = if self.pace_acc > 1.1 * mb { self.pace_acc } else { mb };
                    self.pace_acc = 0.0;
                    self.after_sleep = true;
                    self.next_send = now + Time::from_secs_f64(wait);
                    self.pace_timer.arm(self.next_send, ctx.event(FlowTimer::MediaPace), ctx.events);
                    return;
                }
            }
            self.rtp_queue.pop_front();
            self.rtp_queue_bytes -= q.size as i64;
            let mut p = Packet::new(self.id, Direction::Forward, Kind::Media, q.size + UDP_IP_ETH);
            p.ecn = self.cfg.ecn;
            p.dscp = self.cfg.dscp;
            p.set_sent_at(now);
            p.set_origin(q.frame_time);
            p.tcp.seq = q.seq;
            p.tcp.payload = q.size;
            p.tcp.cwr = q.marker;
            ctx.out.push(p);
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += q.size as u64;
            self.stats.step_bytes_sent += q.size as u64;
            self.pace_acc += self.tx.transmitted(t, q.seq, q.size as i64, q.frame_time.as_secs_f64(), q.marker);
            if self.cfg.send_time > Time::ZERO {
                // The loop's next turn starts once this packet's host time has passed.
                self.next_send = now + self.cfg.send_time;
                self.pace_timer.arm(self.next_send, ctx.event(FlowTimer::MediaPace), ctx.events);
                return;
            }
        }
        self.after_sleep = false;
    }

    /// A media packet reached the receiver, or feedback the sender.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        match pkt.kind {
            Kind::Media => self.receive(pkt, ctx),
            Kind::MediaFeedback => self.feedback(pkt, ctx),
            _ => {}
        }
    }

    /// `ScreamRx::receive` + the receiver's feedback decision: at the end of a frame (marker
    /// bit), when the highest sequence number is 32 past the last reported one, or from the
    /// periodic thread 5 ms (20 ms in the first 100 ms) after the last feedback.
    fn receive(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let seq = pkt.tcp.seq;
        self.arrivals[seq as usize % TX_RING] = Arrival { seq, at: ctx.now, ce: pkt.ecn == Ecn::Ce, valid: true };
        self.rx_highest = Some(self.rx_highest.map_or(seq, |h| h.max(seq)));
        self.rx_first.get_or_insert(ctx.now);
        self.stats.packets_received += 1;
        self.stats.bytes_received += pkt.tcp.payload as u64;
        self.rx_since_fb += 1;
        let hi = self.rx_highest.unwrap_or(seq);
        let reported = *self.rx_hi_reported.get_or_insert(seq.wrapping_sub(1));
        let iv = self.fb_interval(ctx.now);
        if hi.wrapping_sub(reported) >= FB_EVERY || pkt.tcp.cwr || ctx.now - self.last_fb > iv {
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
        fb.set_sent_at(ctx.now);
        fb.tcp.seq = hi;
        fb.set_sacks(&[SackBlock { start: begin, end: hi + 1 }]);
        ctx.out.push(fb);
        self.rx_since_fb = 0;
        self.rx_hi_reported = Some(hi);
        self.last_fb = ctx.now;
        self.fb_timer.cancel();
    }

    /// The sender processes a report: only arrivals no later than the report's generation.
    fn feedback(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        let range = pkt.sacks()[0];
        let mut received = std::mem::take(&mut self.fb_buf);
        received.clear();
        for seq in range.start..range.end {
            let a = self.arrivals[seq as usize % TX_RING];
            if a.valid && a.seq == seq && a.at <= pkt.sent_at() {
                received.push((seq, a.at.as_secs_f64(), a.ce));
            }
        }
        self.stats.feedbacks += 1;
        let now = ctx.now.as_secs_f64();
        self.account_target(now);
        let age = self.rtp_queue.front().map_or(0.0, |f| (ctx.now - f.enqueued).as_secs_f64());
        if self.tx.on_feedback(now, &received, age) {
            self.stats.rtp_queue_discards += 1;
            self.stats.packets_discarded += self.rtp_queue.len() as u64;
            self.rtp_queue.clear();
            self.rtp_queue_bytes = 0;
        }
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

    /// A controller in steady state: sRTT 25 ms, cwnd 100 kB, window-limited by nothing, the
    /// last congestion long ago.
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
        s.cwnd_ratio = 1212.0 / 100_000.0;
        s.max_bytes_in_flight_prev = 1_000_000;
        s.max_bytes_in_flight = 1_000_000;
        s.last_slow_update = 1e9; // no slow update (max bytes in flight kept) in closed-form tests
        s.last_congestion_detected = -100.0;
        s
    }

    /// Sends `n` packets of 1212 B at `t` and reports them all received at `t + owd`.
    fn round(s: &mut ScreamTx, first: u32, n: u32, t: f64, owd: f64, ce_every: u32) -> u32 {
        for i in 0..n {
            s.transmitted(t, first + i, 1212, t, false);
        }
        let rx: Vec<(u32, f64, bool)> = (0..n).map(|i| (first + i, t + owd, ce_every > 0 && i % ce_every == 0)).collect();
        s.on_feedback(t + 2.0 * owd, &rx, 0.0);
        first + n
    }

    #[test]
    fn grows_when_uncongested_by_the_closed_form() {
        let mut s = steady(false);
        s.bytes_newly_acked = 50_000;
        let cwnd0 = s.cwnd as f64;
        s.update_cwnd(10.0);
        // increment = acked · mss/cwnd · min(1, sRTT/25 ms) · max(0.5, 1 − mss/cwnd)
        //             · (1 + 0.05 · cwnd/mss)   (ScreamV2Tx.cpp updateCwnd, 76a298a).
        let r = 1212.0 / cwnd0;
        let inc = 50_000.0 * r * (1.0 - r) * (1.0 + 0.05 * cwnd0 / 1212.0);
        assert_eq!(s.cwnd, cwnd0 as i64 + (inc + 0.5) as i64);
        // Right after congestion the multiplicative part ramps back over 4 s.
        let mut s = steady(false);
        s.bytes_newly_acked = 50_000;
        s.last_congestion_detected = 9.0;
        s.update_cwnd(10.0);
        let inc = 50_000.0 * r * (1.0 - r) * (1.0 + 0.05 * cwnd0 / 1212.0 * 0.25);
        assert_eq!(s.cwnd, cwnd0 as i64 + (inc + 0.5) as i64);
        // And with no queue delay and no marks the window keeps growing, feedback by feedback.
        let mut s = steady(true);
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
        // virtual α = min(1, α_lim + (q_avg − T/4) / (3T/4)): full at q_avg ≥ T.
        assert_eq!(s.virtual_l4s_alpha, 1.0);
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
        // α: EWMA with gain 1/32 towards the marked fraction (kL4sG).
        let mut s = steady(true);
        s.l4s_alpha = 0.0;
        let mut seq = 0;
        for k in 0..300 {
            seq = round(&mut s, seq, 20, 1.0 + k as f64 * 0.04, 0.001, 4);
        }
        assert!((s.l4s_alpha - 0.25).abs() < 0.01, "α {} vs F = 1/4", s.l4s_alpha);
        // One CE event: cwnd × (1 − α/2 · max(0.5, 1 − mss/cwnd)), the queue above target/4
        // (no scaling near the inflection point).
        let mut s = steady(true);
        s.l4s_alpha = 0.25;
        s.queue_delay = 0.02;
        s.ecn_ce_event = true;
        s.last_congestion_detected = 9.99;
        let c0 = s.cwnd as f64;
        s.update_cwnd(10.0);
        let expect = ((1.0 - 0.125 * (1.0 - 1212.0 / c0)) * c0) as i64;
        assert!((s.cwnd - expect).abs() <= 1, "{} vs {expect}", s.cwnd);
        // More than 5 s after the last congestion: cwnd first limited to the recent maximum
        // bytes in flight, back-off and α at least 1/4.
        let mut s = steady(true);
        s.l4s_alpha = 0.05;
        s.queue_delay = 0.02;
        s.ecn_ce_event = true;
        s.last_congestion_detected = 4.0;
        s.max_bytes_in_flight_prev = 80_000;
        s.update_cwnd(10.0);
        assert_eq!((s.cwnd, s.l4s_alpha), (60_000, 0.25));
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
        let expect = 8.0 * 100_000.0 / 0.026 * 1212.0 / 1232.0;
        assert!((s.rate_share - expect).abs() < 1.0, "{} vs {expect}", s.rate_share);
        s.update_target_bitrate(10.0, 0.0);
        assert!((s.target_bitrate - expect).abs() < 1.0);
        // A nearly full window (classic) scales it down by bytes-in-flight ratio / 0.9, and
        // the 75th percentile of frame-size excess divides it.
        s.bytes_in_flight_ratio = 1.0;
        s.rel_frame_size_high = 1.2;
        s.update_cwnd(10.01);
        assert!((s.rate_share - expect * 0.9 / 1.2).abs() < 1.0, "{}", s.rate_share);
        // Clamped to [min, max].
        s.cwnd = 10;
        s.update_cwnd(10.1);
        s.update_target_bitrate(10.1, 0.0);
        assert_eq!(s.target_bitrate, 1e6);
    }

    #[test]
    fn the_inflection_point_is_the_median_of_the_last_nine() {
        let mut s = steady(true);
        for (i, v) in [50_000, 90_000, 10_000, 70_000, 30_000].into_iter().enumerate() {
            s.update_cwnd_i(v);
            if i == 0 {
                assert_eq!(s.cwnd_i, 50_000, "the first value fills the history");
            }
        }
        // History: 50k ×5 (the fill), 90k, 10k, 70k, 30k → median 50k.
        assert_eq!(s.cwnd_i, 50_000);
        s.update_cwnd_i(95_000);
        s.update_cwnd_i(96_000);
        s.update_cwnd_i(97_000);
        // 50k 50k 90k 10k 70k 30k 95k 96k 97k → sorted median 70k.
        assert_eq!(s.cwnd_i, 70_000);
    }

    #[test]
    fn loss_scales_the_window_by_beta() {
        let mut s = steady(false);
        let mut seq = round(&mut s, 0, 10, 1.0, 0.01, 0);
        // The first report only sets the cwnd-update clock: its bytes wait for the next update.
        let pending = s.bytes_newly_acked as f64;
        let c0 = s.cwnd;
        // Packets seq..seq+10 sent; all but the first reported 40 ms later (> reorder 30 ms).
        // One frame (one capture time) paced out over 45 ms.
        for i in 0..10 {
            s.transmitted(2.0 + i as f64 * 0.005, seq + i, 1212, 2.0, i == 9);
        }
        let rx: Vec<_> = (1..10).map(|i| (seq + i, 2.06, false)).collect();
        s.on_feedback(2.1, &rx, 0.0);
        assert_eq!(s.losses, 1);
        // β = 0.7, then the report's 10 packets (the lost one too: everything up to the
        // highest reported leaves the flight) add one MSS per cwnd each, with no
        // multiplicative part right after congestion.
        let after = (0.7 * c0 as f64) as i64;
        let r = 1212.0 / after as f64;
        let inc = ((pending + 10.0 * 1212.0) * r * (s.srtt / 0.025).min(1.0) * (1.0 - r) + 0.5) as i64;
        assert!((s.cwnd - (after + inc)).abs() <= 1, "{} vs {after} + {inc}", s.cwnd);
        seq += 10;
        assert_eq!(s.bytes_in_flight, 0, "everything up to the highest reported left the flight");
        let _ = seq;
        // The encoder is asked for a refresh (no frame) once.
        assert_eq!(s.encoder_rate(100.0), None);
        assert!(s.encoder_rate(100.0).is_some());
    }

    /// ScreamRx / scream_receiver.cpp at 76a298a: a report on a marker, once the highest
    /// sequence number is 32 past the last reported one, or 20 ms (5 ms after the first
    /// 100 ms of reception) after the last report.
    #[test]
    fn the_receiver_reports_on_a_marker_after_32_packets_or_after_the_interval() {
        let mut m = Scream::new(1, cfg(), Stream::new(1, "scream/rx"));
        let mut q = EventQueue::default();
        let mut out = vec![];
        let media = |seq: u32, marker: bool| {
            let mut p = Packet::new(1, Direction::Forward, Kind::Media, 1254);
            p.tcp.seq = seq;
            p.tcp.payload = 1212;
            p.tcp.cwr = marker;
            p
        };
        let t0 = Time::from_millis(200);
        let deliver = |m: &mut Scream, seq: u32, marker: bool, at: Time, q: &mut EventQueue, out: &mut Vec<Packet>| {
            m.on_packet(&media(seq, marker), &mut EndpointCtx { flow: 1, now: at, events: q, out });
            out.iter().filter(|p| p.kind == Kind::MediaFeedback).count()
        };
        // The first packet: 200 ms since the (initial) last report > 20 ms: reported at once.
        assert_eq!(deliver(&mut m, 0, false, t0, &mut q, &mut out), 1);
        // 31 more, 10 µs apart: not yet 32 past the reported one.
        for k in 1..32 {
            assert_eq!(deliver(&mut m, k, false, t0 + Time::from_micros(10 * k as u64), &mut q, &mut out), 1, "packet {k}");
        }
        assert_eq!(deliver(&mut m, 32, false, t0 + Time::from_micros(320), &mut q, &mut out), 2, "32 past the last report");
        assert_eq!(out.last().unwrap().sacks()[0], SackBlock { start: 0, end: 33 }, "the last 64 up to the highest");
        assert_eq!(deliver(&mut m, 33, true, t0 + Time::from_micros(330), &mut q, &mut out), 3, "end of frame");
        assert_eq!(deliver(&mut m, 34, false, t0 + Time::from_micros(340), &mut q, &mut out), 3);
        // The periodic report: 20 ms after the last one while within 100 ms of the first packet.
        assert_eq!(m.fb_timer.deadline(), Some(t0 + Time::from_micros(330) + Time::from_millis(20)));
        // Later, 5 ms.
        let t1 = t0 + Time::from_millis(150);
        assert_eq!(deliver(&mut m, 35, true, t1, &mut q, &mut out), 4);
        assert_eq!(deliver(&mut m, 36, false, t1 + Time::from_millis(4), &mut q, &mut out), 4);
        assert_eq!(deliver(&mut m, 37, false, t1 + Time::from_micros(5_010), &mut q, &mut out), 5);
    }

    /// A source whose pacing is already set up for its (fixed) target rate, run for a while
    /// without feedback.
    fn run_frames(cfg: ScreamConfig, until_ms: u64) -> (Scream, Vec<Packet>) {
        let mut m = Scream::new(1, cfg, Stream::new(1, "scream/test"));
        // Before the first congestion event the headroom is at least 1.5 (`updateCwnd`);
        // a smaller `-paceheadroom` is seen only after one.
        m.tx.congested_once = m.cfg.pacing_headroom < 1.5;
        m.tx.mss = 1212;
        m.tx.last_rate_limit = -10.0; // past the start-up halving of the encoder rate
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
        let t: Vec<f64> = out.iter().map(|p| p.sent_at().as_secs_f64()).collect();
        for w in t.windows(2) {
            let gap = w[1] - w[0];
            assert!((gap - pace).abs() < 1e-6, "gap {gap} vs {pace}");
        }
        // A lower pacing interval groups several packets per microburst.
        let c = ScreamConfig { start_bitrate: 30e6, min_bitrate: 30e6, max_bitrate: 30e6, ..ScreamConfig::default() };
        let (_, out) = run_frames(c, 19);
        let pace = 1212.0 * 8.0 / 45e6; // 0.215 ms: three per burst (0.646 ms > 0.5 ms)
        let t: Vec<f64> = out.iter().map(|p| p.sent_at().as_secs_f64()).collect();
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

    /// `-paceheadroom` and the loop's host time per packet (`send_time`), by hand: at
    /// 30 Mbit/s, 1.5 × headroom, 20 µs per packet, a microburst of three packets leaves
    /// 20 µs apart, and the sleep (3 × 0.215 ms, the accumulated pacing intervals) starts
    /// only after the third packet's 20 µs: a cycle of 3 · (0.215 + 0.020) ms, so the
    /// frame takes 1 + 0.020/0.215 ≈ 1.093 times as long as with back-to-back sends.
    #[test]
    fn send_time_spreads_a_microburst_and_lengthens_each_cycle() {
        let base = ScreamConfig { start_bitrate: 30e6, min_bitrate: 30e6, max_bitrate: 30e6, ..ScreamConfig::default() };
        let c = ScreamConfig { send_time: Time::from_micros(20), ..base.clone() };
        let (_, out) = run_frames(c, 19);
        let pace = 1212.0 * 8.0 / 45e6;
        let t: Vec<f64> = out.iter().map(|p| p.sent_at().as_secs_f64()).collect();
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 30);
        for (i, g) in gaps.iter().enumerate() {
            let want = if i % 3 == 2 { 3.0 * pace + 20e-6 } else { 20e-6 };
            assert!((g - want).abs() < 1e-6, "gap {i}: {g} vs {want}");
        }
        let (_, fast) = run_frames(base.clone(), 19);
        assert_eq!(out.len(), fast.len());
        let span = |o: &[Packet]| o.last().unwrap().sent_at().as_secs_f64() - o[0].sent_at().as_secs_f64();
        let ratio = span(&out) / span(&fast);
        assert!((ratio - (pace + 20e-6) / pace).abs() < 0.01, "{ratio}");
        // Headroom 1.0: pacing at the target rate, 1212·8/30e6 = 0.323 ms per packet; two
        // make 0.646 ms > 1.1 × 0.5 ms, so pairs leave 0.646 ms apart.
        let (_, out) = run_frames(ScreamConfig { pacing_headroom: 1.0, ..base }, 15);
        let pace = 1212.0 * 8.0 / 30e6;
        let t: Vec<f64> = out.iter().map(|p| p.sent_at().as_secs_f64()).collect();
        let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 20);
        for (i, g) in gaps.iter().enumerate() {
            let want = if i % 2 == 1 { 2.0 * pace } else { 0.0 };
            assert!((g - want).abs() < 1e-6, "gap {i}: {g} vs {want}");
        }
    }

    #[test]
    fn frame_size_varies_uniformly_with_a_seeded_stream() {
        let c = ScreamConfig { start_bitrate: 10e6, min_bitrate: 10e6, max_bitrate: 10e6, frame_size_variation: 0.2, ..ScreamConfig::default() };
        let mut m = Scream::new(1, c.clone(), Stream::new(7, "scream/x"));
        let mut m2 = Scream::new(1, c, Stream::new(7, "scream/x"));
        let mut sizes = vec![];
        for _ in 0..2000 {
            let r = m.tx.encoder_rate(10.0).unwrap();
            let u = m.rng.uniform();
            assert_eq!(u, m2.rng.uniform());
            sizes.push(r / 50.0 / 8.0 * (1.0 + (u - 0.5) * 0.2));
        }
        let mean = sizes.iter().sum::<f64>() / sizes.len() as f64;
        let (lo, hi) = sizes.iter().fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        assert!((mean / 25_000.0 - 1.0).abs() < 0.01 && lo >= 25_000.0 * 0.9 && hi <= 25_000.0 * 1.1 && hi > 25_000.0 * 1.09);
    }
}
