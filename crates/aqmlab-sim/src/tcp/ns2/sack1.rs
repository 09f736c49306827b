//! ns-2.35 `Agent/TCP/Sack1` (`tcp-sack1.cc` over `TcpAgent` of `tcp.cc`), with its
//! `ScoreBoardRQ` scoreboard. State and variable names follow ns-2's; packet numbers are
//! ns-2's (0 = the SYN, data 1..=N). See the module doc of [`super`] for the sources.

use super::{Ns2Config, MAXRTO, MINRTO, NUMDUPACKS, TCPIP_BASE_HDR_SIZE, TCP_TICK};
use crate::cc::TcpCcState;
use crate::event::{FlowTimer, Timer};
use crate::packet::{Direction, Kind, Packet};
use crate::rng::Stream;
use crate::tcp::sender::SenderStats;
use crate::tcp::EndpointCtx;
use crate::time::Time;

/// `TCP_MAXSEQ`-like "infinite send" for unlimited transfers.
const INFINITE: i64 = 1 << 40;
/// `T_SRTT_BITS`, `T_RTTVAR_BITS`, `rttvar_exp_`.
const T_SRTT_BITS: u32 = 3;
const T_RTTVAR_BITS: u32 = 2;
const RTTVAR_EXP: u32 = 2;
/// `rtxcur_init_` (3 s) and `rttvar_init_` (12 s).
const RTTVAR_INIT_TICKS: i32 = 1200;
/// `last_cwnd_action_` values (`tcp.h`).
const CWND_ACTION_DUPACK: u8 = 1;
const CWND_ACTION_TIMEOUT: u8 = 2;

/// ns-2's `ScoreBoardRQ`: the SACKed ranges as a sorted list of disjoint blocks (the FIFO
/// of `ReassemblyQueue`), `sack_min` (the queue's `rcv_nxt_`, one past the cumulative ACK)
/// and `h_seqno_`, the next retransmission candidate.
#[derive(Clone, Debug)]
pub struct ScoreBoardRq {
    blocks: Vec<(i64, i64)>,
    total: i64,
    pub sack_min: i64,
    pub h_seqno: i64,
    changed: bool,
}

impl Default for ScoreBoardRq {
    fn default() -> Self {
        ScoreBoardRq { blocks: Vec::with_capacity(16), total: 0, sack_min: -1, h_seqno: -1, changed: false }
    }
}

impl ScoreBoardRq {
    /// `ClearScoreBoard`: empty the queue and `h_seqno_` (not `sack_min`).
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.total = 0;
        self.h_seqno = -1;
    }

    pub fn blocks(&self) -> &[(i64, i64)] {
        &self.blocks
    }

    /// `UpdateScoreBoard(last_ack, tcph)`.
    pub fn update(&mut self, last_ack: i64, sacks: &[(i64, i64)]) {
        let old_total = self.total;
        self.changed = false;
        if self.sack_min <= last_ack {
            self.sack_min = last_ack + 1;
            if !self.blocks.is_empty() {
                self.clear_to(self.sack_min);
                self.changed = true;
            }
        }
        for &(l, r) in sacks {
            self.add(l, r);
        }
        self.changed = self.changed || old_total != self.total;
    }

    /// `CheckUpdate`: whether the last update changed the scoreboard.
    pub fn check_update(&self) -> bool {
        self.changed
    }

    /// `ReassemblyQueue::clearto`: drop what lies below `seq`.
    fn clear_to(&mut self, seq: i64) {
        self.blocks.retain(|b| b.1 > seq);
        if let Some(b) = self.blocks.first_mut() {
            if b.0 <= seq {
                b.0 = seq;
            }
        }
        self.total = self.blocks.iter().map(|b| b.1 - b.0).sum();
    }

    /// `ReassemblyQueue::add`: merge [l, r) with every block it overlaps or touches; when
    /// the resulting block starts at or below `rcv_nxt_` (here `sack_min`), `rcv_nxt_`
    /// becomes its end (as `add`/`coalesce` do, also for a stale block below it).
    fn add(&mut self, l: i64, r: i64) {
        if r < l {
            return;
        }
        let (mut s, mut e) = (l, r);
        let first = self.blocks.iter().position(|b| b.1 >= s).unwrap_or(self.blocks.len());
        let mut last = first;
        while last < self.blocks.len() && self.blocks[last].0 <= e {
            s = s.min(self.blocks[last].0);
            e = e.max(self.blocks[last].1);
            last += 1;
        }
        self.blocks.drain(first..last);
        self.blocks.insert(first, (s, e));
        self.total = self.blocks.iter().map(|b| b.1 - b.0).sum();
        if self.sack_min >= s {
            self.sack_min = e;
        }
    }

    /// `ReassemblyQueue::nexthole`: the hole at or after `seq` and the number of SACK blocks
    /// above it (-1 when there are none).
    fn nexthole(&self, seq: i64) -> (i64, i64) {
        let n = self.blocks.len() as i64;
        for (i, &(s, e)) in self.blocks.iter().enumerate() {
            if s > seq {
                return (seq, n - i as i64);
            }
            if s <= seq && e >= seq {
                let after = n - i as i64 - 1;
                return (e, if after > 0 { after } else { -1 });
            }
        }
        (-1, -1)
    }

    /// `GetNextRetran`: the next hole with a SACKed block above it, or -1.
    pub fn next_retran(&mut self) -> i64 {
        if self.h_seqno < self.sack_min {
            self.h_seqno = self.sack_min;
        }
        let (seq, fcnt) = self.nexthole(self.h_seqno);
        if seq > 0 {
            if fcnt <= 0 {
                return -1;
            }
            if seq > self.h_seqno {
                self.h_seqno = seq;
            }
            return seq;
        }
        -1
    }

    /// `MarkRetran`.
    pub fn mark_retran(&mut self, seq: i64) {
        if seq >= self.h_seqno {
            self.h_seqno = seq + 1;
        }
    }
}

/// ns-2.35 `Sack1TcpAgent` with the defaults listed in [`super`].
#[derive(Clone, Debug)]
pub struct Sack1Agent {
    flow: u32,
    /// `size_` (`packetSize_`): payload bytes per packet.
    size: u32,
    /// Bytes the application writes (`None`: unlimited).
    app_bytes: Option<u64>,
    /// `wnd_` (`window_`) and `wnd_init_` (`windowInit_`).
    wnd: i64,
    wnd_init: f64,
    pub cwnd: f64,
    pub ssthresh: i64,
    pub t_seqno: i64,
    pub curseq: i64,
    pub highest_ack: i64,
    pub last_ack: i64,
    pub maxseq: i64,
    pub dupacks: i32,
    pub recover: i64,
    last_cwnd_action: u8,
    first_decrease: bool,
    count: i32,
    pub fastrecov: bool,
    timeout: bool,
    pub pipe: i64,
    firstpartial: bool,
    closed: bool,
    // RTT estimation, in `tcp_tick_` units with ns-2's fixed-point scaling.
    pub t_rtt: i32,
    pub t_srtt: i32,
    pub t_rttvar: i32,
    /// `t_rtxcur_`.
    pub t_rtxcur: Time,
    pub t_backoff: i32,
    rtt_active: bool,
    rtt_seq: i64,
    rtt_ts: Time,
    /// `boot_time_`.
    pub boot_time: Time,
    rtx: Timer,
    pub scb: ScoreBoardRq,
    sacks: [(i64, i64); crate::packet::MAX_SACK_BLOCKS],
}

impl Sack1Agent {
    /// `TcpAgent::reset` + `rtt_init` with `window_` = `cfg.window`, `windowInit_` =
    /// `initial_cwnd`, `packetSize_` = `mss`, `rtxcur_init_` = `initial_rto`.
    pub fn new(flow: u32, mss: u32, initial_cwnd: u32, initial_rto: Time, size: Option<u64>, cfg: Ns2Config) -> Self {
        let boot = Stream::new(cfg.seed, &format!("ns2/boot/{flow}")).uniform();
        Sack1Agent {
            flow,
            size: mss,
            app_bytes: size,
            wnd: cfg.window as i64,
            wnd_init: initial_cwnd as f64,
            // set_initial_window: syn_ && delay_growth_ → 1.
            cwnd: 1.0,
            ssthresh: cfg.window as i64,
            t_seqno: 0,
            curseq: 0,
            highest_ack: -1,
            last_ack: -1,
            maxseq: -1,
            dupacks: 0,
            recover: 0,
            last_cwnd_action: 0,
            first_decrease: true,
            count: 0,
            fastrecov: false,
            timeout: false,
            pipe: -1,
            firstpartial: false,
            closed: false,
            t_rtt: 0,
            t_srtt: 0,
            t_rttvar: RTTVAR_INIT_TICKS << T_RTTVAR_BITS,
            t_rtxcur: initial_rto,
            t_backoff: 1,
            rtt_active: false,
            rtt_seq: -1,
            rtt_ts: Time::ZERO,
            boot_time: Time((boot * TCP_TICK.0 as f64) as u64),
            rtx: Timer::default(),
            scb: ScoreBoardRq::default(),
            sacks: [(0, 0); crate::packet::MAX_SACK_BLOCKS],
        }
    }

    /// The application writes its bytes (`sendmsg`: whole packets) and the agent sends.
    pub fn start(&mut self, ctx: &mut EndpointCtx, tp: &mut TcpCcState, stats: &mut SenderStats) {
        self.curseq = match self.app_bytes {
            Some(b) => b.div_ceil(self.size as u64) as i64,
            None => INFINITE,
        };
        self.send_much(ctx, stats);
        self.mirror(tp);
    }

    /// The application stops writing: nothing beyond what was sent.
    pub fn stop(&mut self) {
        self.curseq = self.curseq.min(self.maxseq.max(0) + 1);
    }

    /// `window()`: min(cwnd_, wnd_) truncated.
    fn window(&self) -> i64 {
        if self.cwnd < self.wnd as f64 {
            self.cwnd as i64
        } else {
            self.wnd
        }
    }

    fn windowd(&self) -> f64 {
        self.cwnd.min(self.wnd as f64)
    }

    /// `rtt_timeout()` with `rfc2988_`.
    pub fn rtt_timeout(&self) -> Time {
        let base = if self.t_rtxcur < MINRTO { MINRTO } else { self.t_rtxcur };
        let t = Time(base.0.saturating_mul(self.t_backoff.max(1) as u64)).min(MAXRTO);
        t.max(Time(2 * TCP_TICK.0))
    }

    /// `rtt_update(tao)` without timestamps: the sample in ticks, offset by where the send
    /// time fell within a tick of the agent's clock (`boot_time_`), then Jacobson's
    /// estimator in fixed point; `t_rtxcur_` = (srtt + 4 rttvar) ticks.
    pub fn rtt_update(&mut self, now: Time, tao: Time) {
        let sendtime = now.0 as i64 - tao.0 as i64 + self.boot_time.0 as i64;
        let tick = TCP_TICK.0 as i64;
        let tickoff = sendtime.rem_euclid(tick);
        self.t_rtt = ((tao.0 as i64 + tickoff) / tick) as i32;
        if self.t_rtt < 1 {
            self.t_rtt = 1;
        }
        if self.t_srtt != 0 {
            // `register short delta`.
            let mut delta = (self.t_rtt - (self.t_srtt >> T_SRTT_BITS)) as i16 as i32;
            self.t_srtt += delta;
            if self.t_srtt <= 0 {
                self.t_srtt = 1;
            }
            if delta < 0 {
                delta = -delta;
            }
            delta -= self.t_rttvar >> T_RTTVAR_BITS;
            self.t_rttvar += delta;
            if self.t_rttvar <= 0 {
                self.t_rttvar = 1;
            }
        } else {
            self.t_srtt = self.t_rtt << T_SRTT_BITS;
            self.t_rttvar = self.t_rtt << (T_RTTVAR_BITS - 1);
        }
        let ticks = ((self.t_rttvar << (RTTVAR_EXP + (T_SRTT_BITS - T_RTTVAR_BITS))) + self.t_srtt) >> T_SRTT_BITS;
        self.t_rtxcur = Time(ticks as u64 * TCP_TICK.0);
    }

    /// `rtt_backoff()`.
    fn rtt_backoff(&mut self) {
        if self.t_backoff < 64 || self.rtt_timeout() < MAXRTO {
            self.t_backoff <<= 1;
        }
        if self.t_backoff > 8 {
            self.t_rttvar += self.t_srtt >> T_SRTT_BITS;
            self.t_srtt = 0;
        }
    }

    fn set_rtx_timer(&mut self, ctx: &mut EndpointCtx) {
        let at = ctx.now + self.rtt_timeout();
        self.rtx.arm(at, ctx.event(FlowTimer::Retransmit), ctx.events);
    }

    /// `reset_rtx_timer(mild, backoff)`.
    fn reset_rtx_timer(&mut self, mild: bool, backoff: bool, ctx: &mut EndpointCtx) {
        if backoff {
            self.rtt_backoff();
        }
        self.set_rtx_timer(ctx);
        if !mild {
            self.t_seqno = self.highest_ack + 1;
        }
        self.rtt_active = false;
    }

    /// `newtimer(pkt)`.
    fn newtimer(&mut self, ack: i64, ctx: &mut EndpointCtx) {
        if self.t_seqno > ack || ack < self.maxseq || self.cwnd < 1.0 {
            self.set_rtx_timer(ctx);
        } else {
            self.rtx.cancel();
        }
    }

    /// `opencwnd()` with `windowOption_` 1: +1 per ACK below ssthresh, else +1/cwnd.
    pub fn opencwnd(&mut self) {
        if self.cwnd < self.ssthresh as f64 {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
    }

    /// `slowdown(how)` with `precisionReduce_` and `decrease_num_` 0.5, for the two uses a
    /// Sack1 flow without ECN makes: halve both (fast recovery), or halve ssthresh and
    /// restart from one packet (timeout); `restart_only` is `CLOSE_CWND_ONE` alone.
    pub fn slowdown(&mut self, halve_cwnd: bool, restart_only: bool) {
        let slowstart = self.cwnd < self.ssthresh as f64;
        let halfwin = self.windowd() / 2.0;
        let decreasewin = 0.5 * self.windowd();
        if !restart_only {
            self.ssthresh = if self.first_decrease || slowstart || self.last_cwnd_action == CWND_ACTION_TIMEOUT { halfwin as i64 } else { decreasewin as i64 };
        }
        if halve_cwnd {
            self.cwnd = halfwin;
        } else {
            // CLOSE_CWND_RESTART (wnd_restart_ 1) or CLOSE_CWND_ONE.
            self.cwnd = 1.0;
        }
        if self.ssthresh < 2 {
            self.ssthresh = 2;
        }
        self.count = 0;
        self.first_decrease = false;
    }

    /// `output(seqno, reason)`.
    fn output(&mut self, seqno: i64, ctx: &mut EndpointCtx, stats: &mut SenderStats) {
        let force = self.highest_ack == self.maxseq;
        let pkt = if seqno == 0 {
            if self.maxseq == -1 {
                self.curseq += 1;
            }
            Packet::new(self.flow, Direction::Forward, Kind::Syn, TCPIP_BASE_HDR_SIZE)
        } else {
            let mut p = Packet::new(self.flow, Direction::Forward, Kind::Data, self.size + TCPIP_BASE_HDR_SIZE);
            p.tcp.seq = (seqno - 1) as u32;
            p.tcp.payload = self.payload_of(seqno);
            stats.data_packets_sent += 1;
            stats.data_skbs_sent += 1;
            p
        };
        ctx.out.push(pkt);
        if seqno > self.maxseq {
            self.maxseq = seqno;
            if !self.rtt_active {
                self.rtt_active = true;
                if seqno > self.rtt_seq {
                    self.rtt_seq = seqno;
                    self.rtt_ts = ctx.now;
                }
            }
        } else if seqno > 0 {
            stats.retransmits += 1;
        }
        if !self.rtx.is_armed() || force {
            self.set_rtx_timer(ctx);
        }
    }

    /// Payload of data packet `seqno` (what remains of the transfer for the last one).
    fn payload_of(&self, seqno: i64) -> u32 {
        match self.app_bytes {
            Some(b) if seqno as u64 * self.size as u64 > b => (b - (seqno as u64 - 1) * self.size as u64) as u32,
            _ => self.size,
        }
    }

    /// `Sack1TcpAgent::send_much(0, 0, maxburst_ = 0)`.
    fn send_much(&mut self, ctx: &mut EndpointCtx, stats: &mut SenderStats) {
        let mut win = self.window();
        let mut found = true;
        while ((!self.fastrecov && self.t_seqno <= self.last_ack + win) || (self.fastrecov && self.pipe < self.cwnd as i64)) && self.last_ack + 1 < self.curseq && found {
            found = false;
            let mut xmit = self.scb.next_retran();
            if xmit == -1 {
                if (!self.fastrecov && self.t_seqno <= self.highest_ack + win) || (self.fastrecov && self.t_seqno <= self.highest_ack + self.wnd) {
                    if self.t_seqno < self.curseq {
                        found = true;
                        xmit = self.t_seqno;
                        self.t_seqno += 1;
                    }
                }
            } else if self.recover > 0 && xmit <= self.highest_ack + self.wnd {
                found = true;
                self.scb.mark_retran(xmit);
                win = self.window();
            }
            if found {
                self.output(xmit, ctx, stats);
                if self.t_seqno <= xmit {
                    self.t_seqno = xmit + 1;
                }
                self.pipe += 1;
            }
        }
    }

    /// `send_one()` (`singledup_`: limited transmit on the first two duplicate ACKs).
    fn send_one(&mut self, ctx: &mut EndpointCtx, stats: &mut SenderStats) {
        if self.t_seqno <= self.highest_ack + self.wnd && self.t_seqno < self.curseq && (self.t_seqno as f64) <= self.highest_ack as f64 + self.cwnd + self.dupacks as f64 {
            self.output(self.t_seqno, ctx, stats);
            self.t_seqno += 1;
        }
    }

    /// `newack(pkt)` with `timerfix_`: cumulative ACK, RTT sample (Karn: only while timing
    /// a never-retransmitted packet), then the timer.
    fn newack(&mut self, ack: i64, ctx: &mut EndpointCtx) {
        self.dupacks = 0;
        self.last_ack = ack;
        self.highest_ack = ack;
        if self.t_seqno < ack + 1 {
            self.t_seqno = ack + 1;
        }
        if self.rtt_active && ack >= self.rtt_seq {
            self.t_backoff = 1;
            self.rtt_active = false;
            let tao = ctx.now - self.rtt_ts;
            self.rtt_update(ctx.now, tao);
        }
        self.newtimer(ack, ctx);
    }

    fn finish_check(&mut self, now: Time, stats: &mut SenderStats) {
        if self.highest_ack >= self.curseq - 1 && !self.closed {
            self.closed = true;
            stats.completed_at = Some(now);
            // ns-2 keeps re-arming the retransmission timer after the last ACK (newtimer
            // sees t_seqno_ > ack); its expiries send nothing, so the model stops it.
            self.rtx.cancel();
        }
    }

    /// `Sack1TcpAgent::dupack_action()` (no ECN).
    fn dupack_action(&mut self, ctx: &mut EndpointCtx, stats: &mut SenderStats) {
        let recovered = self.highest_ack > self.recover;
        if !(recovered || self.highest_ack == 0) {
            // bugFix_: no second fast retransmit within one window of data.
            return;
        }
        self.recover = self.maxseq;
        self.pipe = self.maxseq - self.highest_ack - NUMDUPACKS as i64;
        self.reset_rtx_timer(true, false, ctx);
        self.fastrecov = true;
        self.scb.mark_retran(self.highest_ack + 1);
        self.last_cwnd_action = CWND_ACTION_DUPACK;
        self.slowdown(true, false);
        stats.fast_recoveries += 1;
        self.output(self.last_ack + 1, ctx, stats);
    }

    /// `Sack1TcpAgent::recv`: one ACK (`ack` is ns-2's number, `sacks` ns-2's blocks).
    pub fn on_ack(&mut self, pkt: &Packet, ctx: &mut EndpointCtx, tp: &mut TcpCcState, stats: &mut SenderStats) {
        let ack = pkt.tcp.seq as i64;
        let n = pkt.tcp.sack_len as usize;
        let blocks = pkt.sacks();
        for i in 0..n {
            let b = blocks[i];
            self.sacks[i] = (b.start as i64 + 1, b.end as i64 + 1);
        }
        let sacks = self.sacks;
        let sacks = &sacks[..n];
        if !self.fastrecov {
            if ack > self.last_ack {
                self.firstpartial = false;
                // recv_newack_helper: newack, opencwnd, finish.
                self.newack(ack, ctx);
                self.opencwnd();
                self.finish_check(ctx.now, stats);
                self.timeout = false;
                self.scb.clear();
                if self.last_ack == 0 {
                    // delay_growth_: the SYN's ACK opens the initial window.
                    self.cwnd = self.wnd_init;
                }
            } else if ack < self.last_ack {
                // Nothing.
            } else if !self.timeout {
                self.scb.update(self.highest_ack, sacks);
                if self.scb.check_update() {
                    self.dupacks += 1;
                    if self.dupacks == NUMDUPACKS {
                        self.dupack_action(ctx, stats);
                    } else if self.dupacks < NUMDUPACKS {
                        self.send_one(ctx, stats);
                    }
                }
            }
            // aggressive_maxburst_: every ACK may send.
            if self.dupacks == 0 {
                self.send_much(ctx, stats);
            }
        } else {
            self.pipe -= 1;
            if ack >= self.recover {
                self.recover = 0;
                self.fastrecov = false;
                self.newack(ack, ctx);
                self.finish_check(ctx.now, stats);
                self.timeout = false;
                self.scb.clear();
            } else if ack > self.highest_ack {
                // Partial ACK (partial_ack_ off): one more packet has left the pipe.
                self.highest_ack = ack;
                self.scb.update(self.highest_ack, sacks);
                self.pipe -= 1;
                self.newtimer(ack, ctx);
                self.t_backoff = 1;
            } else if !self.timeout {
                self.scb.update(self.highest_ack, sacks);
                if self.scb.check_update() && self.dupacks > 0 {
                    self.dupacks += 1;
                }
            }
            self.send_much(ctx, stats);
        }
        let _ = self.firstpartial;
        self.mirror(tp);
    }

    /// `Sack1TcpAgent::timeout` + `TcpAgent::timeout(TCP_TIMER_RTX)`.
    pub fn on_timer(&mut self, ctx: &mut EndpointCtx, tp: &mut TcpCcState, stats: &mut SenderStats) {
        if !self.rtx.fire(ctx.now, ctx.event(FlowTimer::Retransmit), ctx.events) || self.closed {
            return;
        }
        self.dupacks = 0;
        self.fastrecov = false;
        self.timeout = true;
        if self.highest_ack > self.last_ack {
            self.last_ack = self.highest_ack;
        }
        self.recover = self.maxseq;
        self.scb.clear();
        // TcpAgent::timeout.
        if self.cwnd < 1.0 {
            self.cwnd = 1.0;
        }
        self.recover = self.maxseq;
        if self.highest_ack == -1 && self.wnd_init > 1.0 {
            // bugfix_ss_: the SYN was lost, so no larger initial window.
            self.wnd_init = 1.0;
        }
        let nothing_out = self.highest_ack == self.maxseq;
        if nothing_out {
            self.slowdown(false, true);
        } else {
            stats.rto_events += 1;
            self.last_cwnd_action = CWND_ACTION_TIMEOUT;
            self.slowdown(false, false);
        }
        self.reset_rtx_timer(false, !nothing_out, ctx);
        self.last_cwnd_action = CWND_ACTION_TIMEOUT;
        self.send_much(ctx, stats);
        self.mirror(tp);
    }

    /// Mirrors ns-2's variables into the socket fields the engine's metrics read: cwnd (in
    /// whole packets, `window()`'s truncation), ssthresh, engine sequence numbers, srtt.
    pub fn mirror(&self, tp: &mut TcpCcState) {
        tp.cwnd = self.cwnd.max(0.0) as u32;
        tp.ssthresh = self.ssthresh.clamp(0, u32::MAX as i64) as u32;
        tp.snd_una = self.highest_ack.max(0) as u32;
        tp.snd_nxt = self.maxseq.max(0) as u32;
        tp.packets_out = tp.snd_nxt - tp.snd_una.min(tp.snd_nxt);
        tp.srtt = Time((self.t_srtt >> T_SRTT_BITS).max(0) as u64 * TCP_TICK.0);
    }
}
