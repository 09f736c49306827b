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
//!
//! The code is split as Linux splits it (and as quiche's `recovery/` does):
//!
//! | file | models |
//! |---|---|
//! | [`ack`] | `tcp_input.c` `tcp_ack`: one ACK, stage by stage |
//! | [`sack`] | `tcp_input.c` `tcp_sacktag_write_queue`/`tcp_sacktag_one`, D-SACK, `tcp_mark_skb_lost` |
//! | [`rack`] | `tcp_recovery.c`: RACK loss detection, reordering window and timer |
//! | [`recovery`] | `tcp_input.c` `tcp_fastretrans_alert`, PRR `tcp_cwnd_reduction` |
//! | [`undo`] | `tcp_input.c` `tcp_try_undo_*`, `tcp_undo_cwnd_reduction`, Eifel detection |
//! | [`tlp`] | `tcp_output.c`/`tcp_timer.c` tail loss probe |
//! | [`rto`] | `tcp_input.c` `tcp_rtt_estimator`/`tcp_set_rto`, `tcp_timer.c` `tcp_retransmit_timer`, `tcp_enter_loss` |
//! | [`output`] | `tcp_output.c` `tcp_write_xmit`, `tcp_transmit_skb`, pacing, `tcp_cwnd_validate` |
//! | [`rate`] | `tcp_rate.c` delivery-rate samples |
//! | [`queue`] | the retransmission queue (`tcp_skb_cb` per segment) and `tsorted_sent_queue` |

mod ack;
mod output;
mod queue;
mod rack;
mod rate;
mod recovery;
mod rto;
mod sack;
mod tlp;
mod undo;
#[cfg(test)]
pub(crate) mod tests;

pub use self::output::tso_autosize;
use self::queue::{Scoreboard, NIL};
use super::{EndpointCtx, TcpConfig};
use crate::cc::{CaState, Cc, CongestionControl, TcpCcState};
use crate::event::{FlowTimer, Timer};
use crate::packet::{Kind, Packet, SackBlock, MAX_SACK_BLOCKS};
use crate::time::Time;
use std::num::NonZeroU32;

/// Initial reordering degree, the DupThresh of RFC 6675 (sysctl `tcp_reordering`).
const TCP_REORDERING: u32 = 3;
/// Upper bound of `tp->reordering` (sysctl `tcp_max_reordering`).
const TCP_MAX_REORDERING: u32 = 300;
/// Recoveries a D-SACK-widened RACK window persists for (`TCP_RACK_RECOVERY_THRESH`).
const TCP_RACK_RECOVERY_THRESH: u8 = 16;
/// Linux `TCP_TIMEOUT_MIN`: 2 jiffies, taken at HZ = 1000.
const TCP_TIMEOUT_MIN: Time = Time(2_000_000);

/// Linux `usecs_to_jiffies` at HZ = 1000: round up to whole milliseconds.
fn jiffies_up(t: Time) -> Time {
    Time(t.0.div_ceil(1_000_000) * 1_000_000)
}

/// Connection phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    SynSent,
    Established,
}

/// Counters reported per flow.
///
/// `repr(C)`, the two counters every sent skb updates first: the sender places the counters
/// at the end of its per-ACK fields, so that these two share their last line; then the
/// completion time (read on each ACK of a finite transfer) and `retransmits`, which the
/// sampling pass reads with the socket's line at every tick, starting the next line (session
/// 14: an ACK of an unlimited transfer no longer reads it); then the loss and CWR counters,
/// which only losses and ECN echoes write.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct SenderStats {
    pub data_packets_sent: u64,
    /// Sends of data (skbs handed to the device): `data_packets_sent / data_skbs_sent` is the
    /// mean GSO burst.
    pub data_skbs_sent: u64,
    /// Time the transfer's last byte was acknowledged (finite transfers).
    pub completed_at: Option<Time>,
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
}

/// One connection's Linux sender.
///
/// Layout (`repr(C)`, aligned to a cache line): what an ACK of a flow in Open and the sends it
/// releases read comes first, so that it touches few lines of the sender when thousands of
/// flows' senders take turns in the cache: the congestion control (CUBIC's per-ACK state in
/// its first two lines), the per-ACK tail of the configuration (from byte 256, a line's
/// start), the socket, then the sender's own per-ACK state, its RTO timer and the two
/// counters sends update, ending at byte 704: seven lines, nine with CUBIC's. Then the two
/// counters the sampling pass reads (and a finite transfer's ACK, `completed_at`), the rest
/// of the counters, the loss state in two lines (the recovery and undo state; RACK's
/// reordering timer, the SACK cache, the send-ordered list's ends and the pacing timer), and
/// last the D-SACK count, the SYN's time and the rarely set boxes (the ns-2 agent, the ACK
/// trace). Tests
/// `an_acks_sender_fields_lie_in_nine_cache_lines`, `the_loss_state_lies_in_two_cache_lines`,
/// `what_the_sampling_pass_reads_of_the_sender_lies_in_two_cache_lines`.
///
/// Nine lines, not ten (session 14): the per-ACK fields are 448 bytes, exactly seven lines,
/// because the fields that were in the way are narrower or elsewhere, their values the same:
/// the two boxes behind one flag byte (`extras`), the two optional segment numbers as
/// `Option<NonZeroU32>` (4 bytes, not 8), RACK's step counts in `u8` (Linux's widths; capped
/// at 255 and 16), the send-queue head's count in `u16` (at most `GSO_MAX_SEGS`), and three
/// configuration flags in the configuration's tail padding.
#[repr(C, align(64))]
pub struct TcpSender {
    cc: Cc,
    cfg: TcpConfig,
    /// The socket: sequence numbers, scoreboard counts, cwnd, srtt, delivery counters and
    /// pacing state, kept here once and read in place by the congestion control.
    pub tp: TcpCcState,
    sb: Scoreboard,
    /// Lowest segment that may be lost and not yet retransmitted.
    retransmit_hint: u32,
    /// `snd_nxt` at the last operation that took a segment out of the sequence order: once
    /// `snd_una` reaches it, the send-ordered list is `snd_una .. snd_nxt` again
    /// ([`TcpSender::ts_in_sequence`]; its links, `ts_head` and `ts_tail`, are with the loss
    /// state below).
    ts_in_order_from: u32,
    /// End of the highest SACKed segment (Linux `tcp_highest_sack_seq`).
    highest_sack: u32,
    flow: u32,
    phase: Phase,
    /// Whether the application still offers new data (false after `stop`).
    app_open: bool,
    /// Queue CWR on the next new data segment (`TCP_ECN_QUEUE_CWR`). Read by every new-data
    /// skb (`transmit`), so it sits with the per-ACK fields, not with the rare ECN CWR state.
    queue_cwr: bool,
    /// Whether `ns2` or `trace` (below the per-ACK lines) is set: the byte every packet,
    /// timer and ACK tests instead of the two boxes.
    extras: bool,
    /// Segments the transfer has in total (`None`: unlimited; a transfer has at least one).
    total_segs: Option<NonZeroU32>,
    last_seg_payload: u32,
    // RACK (`tp->rack`): send time and number of the most recently sent delivered segment,
    // RTT of the latest delivery, and the reordering-window state.
    rack_end_seq: u32,
    rack_mstamp: Time,
    rack_rtt: Time,
    rack_last_delivered: u64,
    /// Linux's `u8 reo_wnd_steps` (at most 0xFF) and its 5-bit `reo_wnd_persist` (at most
    /// `TCP_RACK_RECOVERY_THRESH`).
    reo_wnd_steps: u8,
    reo_wnd_persist: u8,
    rack_advanced: bool,
    rack_dsack_seen: bool,
    // Tail loss probe: the RTO timer currently runs as the probe timer
    // (`ICSK_TIME_LOSS_PROBE`), `tlp_retrans`.
    tlp_pending: bool,
    tlp_retrans: bool,
    /// Segments left in the send-queue head skb (a partly sent `tcp_xmit_size_goal` skb): at
    /// most `GSO_MAX_SEGS`, 65,535.
    wq_left: u16,
    /// In the line of `extras`, which a timer's event tests first: most RTO timer events
    /// (found moved or cancelled) touch that one line of the sender.
    rto_timer: Timer,
    sce_count_seen: u32,
    // RTT estimation (`tcp_rtt_estimator`, srtt in `tp`), in ns.
    rtt_seq: u32,
    mdev: Time,
    mdev_max: Time,
    rttvar: Time,
    rto: Time,
    backoff: u32,
    /// The receiver's latest TSval (Linux `rx_opt.ts_recent`, stored from every in-sequence
    /// ACK by `tcp_store_ts_recent`), echoed as TSecr on data. Only captures read it.
    peer_ts: u32,
    // cwnd validation (`tcp_cwnd_validate`): `max_packets_out` (the flag is in `tp`).
    max_packets_out: u32,
    cwnd_usage_seq: u32,
    /// `tcp_tso_autosize`'s last step (see [`output::TsoStep`]).
    tso_step: std::cell::Cell<output::TsoStep>,
    // Delivery-rate estimation (`tcp_rate.c`; `tp.delivered_mstamp`, `tp.app_limited`, the
    // latest sample in `tp.rate_delivered` and `tp.rate_interval`).
    first_tx_time: Time,
    /// Reordering degree in segments (`tp->reordering`; `tp->reord_seen` is with the loss
    /// state).
    reordering: u32,
    /// TSecr of the ACK being processed (`rx_opt.rcv_tsecr`).
    rcv_tsecr: u32,
    /// `tlp_high_seq`: `snd_nxt` when the probe went, so never 0 (Linux's own "none").
    tlp_high_seq: Option<NonZeroU32>,
    ce_count_seen: u32,
    pub stats: SenderStats,
    // The loss state, in two lines: the recovery and undo state (in the line the counters
    // end in), then RACK's reordering timer, the SACK cache and the send-ordered list's ends
    // (linked only while it is not the sequence order).
    /// RTO while there is no RTT sample (`TCP_TIMEOUT_INIT`, or 3 s after a lost handshake).
    no_sample_rto: Time,
    // Undo (`undo_marker`, `undo_retrans`, `prior_ssthresh`, `retrans_stamp` in TS ticks).
    undo_marker: Option<u32>,
    undo_retrans: i32,
    prior_ssthresh: u32,
    retrans_stamp: Option<u32>,
    /// Recovery point (`high_seq`): snd_nxt when a reduction or loss episode began.
    high_seq: u32,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
    /// Times reordering was seen (`tp->reord_seen`).
    reord_seen: u32,
    syn_retransmitted: bool,
    /// RACK's reordering timer: armed only while segments wait for the reordering window.
    reorder_timer: Timer,
    sack_cache: [SackBlock; MAX_SACK_BLOCKS],
    /// Send-ordered list of outstanding segments (Linux `tsorted_sent_queue`), linked through
    /// the entries only while it is not the sequence order ([`TcpSender::ts_in_sequence`]).
    ts_head: u32,
    ts_tail: u32,
    // Pacing (the earliest departure time is `tp.edt`): out of the per-ACK lines, since only
    // a paced flow arms it (in the loss state's second line, whose 16 bytes it fills).
    pacing_timer: Timer,
    /// Duplicate segments D-SACKed so far (`tp->dsack_dups`).
    dsack_dups: u64,
    /// When the SYN left (the handshake's RTT sample).
    syn_sent_at: Time,
    /// The `ns2-2013` profile's ns-2 agent, which then handles every event (`tp` and
    /// `stats` mirror its state for the metrics). Set only with `extras`.
    ns2: Option<Box<super::ns2::Sack1Agent>>,
    /// The per-ACK trace, when switched on ([`TcpSender::trace_acks`]); `None` in a run. Set
    /// only with `extras`.
    trace: Option<Box<Vec<AckTrace>>>,
}

/// One ACK as the sender processed it (a debugging and test trace, what `ss -ti` would show
/// after each ACK): taken after `tcp_cong_control` and the pacing update, before the sends
/// the ACK releases.
#[derive(Clone, Debug)]
pub struct AckTrace {
    pub now: Time,
    pub snd_una: u32,
    /// Segments this ACK newly delivered (ACKed or SACKed), and of them reported CE.
    pub delivered: u32,
    pub ce: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub packets_out: u32,
    pub in_flight: u32,
    pub srtt: Time,
    /// Bytes per second.
    pub pacing_rate: f64,
    /// The ACK's delivery-rate sample (`tcp_rate_gen`), bytes per second, if valid.
    pub delivery_rate: Option<f64>,
    pub is_cwnd_limited: bool,
    pub write_queue_empty: bool,
    /// Receive-window room left (`rwnd − packets_out`; `u32::MAX` when no window is set).
    pub rwnd_room: u32,
    pub ca_state: CaState,
    /// The congestion control's own state ([`CongestionControl::trace_vars`]).
    pub cc: Vec<(&'static str, f64)>,
}

impl AckTrace {
    /// A congestion-control variable by name.
    pub fn cc_var(&self, name: &str) -> Option<f64> {
        self.cc.iter().find(|v| v.0 == name).map(|v| v.1)
    }
}

impl TcpSender {
    pub fn new(flow: u32, cfg: TcpConfig, cc: Cc) -> Self {
        let (total_segs, last_seg_payload) = match cfg.size {
            Some(b) => {
                let n = b.div_ceil(cfg.mss as u64) as u32;
                let n = NonZeroU32::new(n).expect("a finite transfer of at least one byte");
                (Some(n), (b - (n.get() as u64 - 1) * cfg.mss as u64) as u32)
            }
            None => (None, cfg.mss),
        };
        let paced = cfg.pacing || cc.needs_pacing();
        let tp = TcpCcState::new(cfg.initial_cwnd, cfg.mss, cfg.ecn, paced);
        let ns2 = cfg.ns2.map(|n| Box::new(super::ns2::Sack1Agent::new(flow, cfg.mss, cfg.initial_cwnd, cfg.rto_initial, cfg.size, n)));
        TcpSender {
            extras: ns2.is_some(),
            ns2,
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
            // Grows (doubling) to the largest flight the connection has had; starting small
            // keeps 1000s of flows' rings small and the ring's slots in cache.
            sb: Scoreboard::with_capacity(16),
            retransmit_hint: 0,
            ts_head: NIL,
            ts_tail: NIL,
            ts_in_order_from: 0,
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
            mdev: Time::ZERO,
            mdev_max: Time::ZERO,
            rttvar: Time::ZERO,
            rtt_seq: 0,
            backoff: 0,
            rto_timer: Timer::default(),
            syn_sent_at: Time::ZERO,
            peer_ts: 0,
            syn_retransmitted: false,
            pacing_timer: Timer::default(),
            reorder_timer: Timer::default(),
            max_packets_out: 0,
            cwnd_usage_seq: 0,
            wq_left: 0,
            tso_step: std::cell::Cell::default(),
            first_tx_time: Time::ZERO,
            stats: SenderStats::default(),
            trace: None,
        }
    }

    /// Starts recording one [`AckTrace`] per ACK (off by default: a run pays one branch per ACK).
    pub fn trace_acks(&mut self) {
        self.trace.get_or_insert_with(Box::default);
        self.extras = true;
    }

    /// The ACKs recorded since the last call (empty when tracing is off).
    pub fn take_ack_trace(&mut self) -> Vec<AckTrace> {
        self.trace.as_deref_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Called only with `extras` set (the ACK tests it).
    fn record_ack(&mut self, st: &ack::AckState) {
        let Some(mut trace) = self.trace.take() else { return };
        #[cfg(test)]
        tests::LAST_ACK_STATE.with(|c| *c.borrow_mut() = format!("{st:?}"));
        let mut cc = Vec::new();
        self.cc.trace_vars(&mut cc);
        let tp = &self.tp;
        trace.push(AckTrace {
            now: tp.now,
            snd_una: tp.snd_una,
            delivered: st.delivered,
            ce: st.ce_delta,
            cwnd: tp.cwnd,
            ssthresh: tp.ssthresh,
            packets_out: tp.packets_out,
            in_flight: tp.packets_in_flight(),
            srtt: tp.srtt,
            pacing_rate: tp.pacing_rate,
            delivery_rate: st.rs.rate_bytes_per_sec(tp.mss),
            is_cwnd_limited: tp.is_cwnd_limited,
            write_queue_empty: tp.write_queue_empty,
            rwnd_room: self.cfg.rwnd_packets.map_or(u32::MAX, |w| w.saturating_sub(tp.packets_out)),
            ca_state: tp.ca_state,
            cc,
        });
        self.trace = Some(trace);
    }

    /// The endpoint id the sender's packets carry.
    pub fn flow(&self) -> u32 {
        self.flow
    }
    pub fn cc_name(&self) -> &'static str {
        self.cc.name()
    }

    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    pub fn srtt(&self) -> Time {
        self.tp.srtt
    }

    pub fn rto(&self) -> Time {
        match self.ns2.as_deref() {
            Some(a) => a.rtt_timeout(),
            None => self.rto,
        }
    }

    /// The ns-2 agent of the `ns2-2013` profile, if this connection runs one.
    pub fn ns2_agent(&self) -> Option<&super::ns2::Sack1Agent> {
        self.ns2.as_deref()
    }

    /// Packets sent and not yet cumulatively acknowledged (`packets_out`).
    pub fn packets_out(&self) -> u32 {
        self.tp.packets_out
    }

    /// Linux `tcp_packets_in_flight`: packets_out − (sacked_out + lost_out) + retrans_out.
    pub fn in_flight(&self) -> u32 {
        self.tp.packets_in_flight()
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
        (self.tp.sacked_out, self.tp.lost_out, self.tp.retrans_out)
    }

    /// Bytes cumulatively acknowledged.
    pub fn bytes_acked(&self) -> u64 {
        self.payload_upto(self.tp.snd_una)
    }

    /// Next new segment to send (`snd_nxt`): segments below it have been sent at least once.
    pub fn snd_nxt(&self) -> u32 {
        self.tp.snd_nxt
    }

    /// Payload bytes of segments `[0, seq)` (every segment one MSS but a finite transfer's last).
    pub fn payload_before(&self, seq: u32) -> u64 {
        self.payload_upto(seq)
    }

    /// Whether a finite transfer has been fully acknowledged.
    pub fn is_complete(&self) -> bool {
        self.stats.completed_at.is_some()
    }

    /// The application opens the connection: send the SYN.
    pub fn start(&mut self, ctx: &mut EndpointCtx) {
        if self.phase != Phase::Idle {
            return;
        }
        if let Some(a) = self.ns2.as_deref_mut() {
            self.phase = Phase::Established;
            a.start(ctx, &mut self.tp, &mut self.stats);
            return;
        }
        self.phase = Phase::SynSent;
        self.app_open = true;
        self.send_syn(ctx);
    }

    /// The application stops offering new data (what is in flight is still delivered).
    pub fn stop(&mut self) {
        if let Some(a) = self.ns2.as_deref_mut() {
            a.stop();
        }
        self.app_open = false;
    }

    /// Handles a packet from the receiver.
    pub fn on_packet(&mut self, pkt: &Packet, ctx: &mut EndpointCtx) {
        self.tp.now = ctx.now;
        // `extras` first: a Linux sender's packets do not read the box's line.
        if self.extras {
            if let Some(a) = self.ns2.as_deref_mut() {
                if pkt.kind == Kind::Ack {
                    a.on_ack(pkt, ctx, &mut self.tp, &mut self.stats);
                }
                return;
            }
        }
        if pkt.tcp.ts_val.wrapping_sub(self.peer_ts) as i32 > 0 {
            self.peer_ts = pkt.tcp.ts_val;
        }
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
        self.check_cwnd();
    }

    /// The window invariant, after every ACK (one branch): cwnd is at least one segment, as
    /// every Linux path that sets it guarantees (`tcp_cwnd_reduction`'s max(.., 1), the RTO's
    /// in_flight + 1, the algorithms' `ssthresh` floors of 2); zero would stall the flow.
    #[inline]
    fn check_cwnd(&self) {
        if self.tp.cwnd == 0 {
            panic!("invariant violated: TCP window: flow {}: cwnd fell to 0 segments (ssthresh {})", self.flow, self.tp.ssthresh);
        }
    }

    /// A flow timer's event. Most pops at 1000 flows find the deadline moved or the timer
    /// cancelled (`Timer::fire` false: about 0.35 per bottleneck packet at f1000;
    /// docs/performance.md, "Session 11: the event queue, flow timers and sampling at 1000
    /// flows"): those touch only the timer's line, not the socket's clock (`tp.now`, which
    /// nothing reads before the next ACK or timer sets it again).
    pub fn on_timer(&mut self, t: FlowTimer, ctx: &mut EndpointCtx) {
        if self.extras {
            if let Some(a) = self.ns2.as_deref_mut() {
                self.tp.now = ctx.now;
                if t == FlowTimer::Retransmit {
                    a.on_timer(ctx, &mut self.tp, &mut self.stats);
                }
                return;
            }
        }
        let fired = match t {
            FlowTimer::Retransmit => self.rto_timer.fire(ctx.now, ctx.event(t), ctx.events),
            FlowTimer::Pacing => self.pacing_timer.fire(ctx.now, ctx.event(t), ctx.events),
            FlowTimer::Reorder => self.reorder_timer.fire(ctx.now, ctx.event(t), ctx.events),
            _ => false,
        };
        if !fired {
            return;
        }
        self.tp.now = ctx.now;
        match t {
            FlowTimer::Retransmit => {
                if self.tlp_pending && self.phase == Phase::Established {
                    self.send_loss_probe(ctx);
                } else {
                    self.tlp_pending = false;
                    self.on_rto(ctx);
                }
            }
            FlowTimer::Pacing => self.try_send(ctx),
            FlowTimer::Reorder => {
                if self.phase == Phase::Established && self.packets_out() > 0 {
                    self.rack_reo_timeout(ctx);
                }
            }
            _ => {}
        }
    }
}
