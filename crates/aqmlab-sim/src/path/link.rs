//! A link: a queue discipline feeding a serialiser, and the statistics the engine reports
//! about it.

use super::ElementCtx;
use crate::metrics::{LogHistogram, SpikeTracker};
use crate::packet::{Ecn, Packet};
use crate::qdisc::{Enqueued, Qdisc};
use crate::time::{Rate, Time};

/// Per sub-queue statistics (one entry per name in `Qdisc::queue_names` of every discipline
/// the link has had), streamed in fixed memory.
#[derive(Debug, Default)]
pub struct QueueStats {
    pub name: &'static str,
    /// Sojourn times of the dequeued packets, in ns: each packet's bucket and the minimum;
    /// the count, sum and maximum are the ticks' (below), added at each tick instead of per
    /// packet ([`QueueStats::sojourn`] adds those of the tick under way).
    hist: LogHistogram,
    /// Sojourn sum, count and max since the last sampling tick.
    tick_sum: Time,
    tick_n: u64,
    tick_max: Time,
}

impl QueueStats {
    /// Once per packet sent: the histogram's count, sum and maximum are the tick's, so they
    /// are not kept twice.
    #[inline]
    fn record(&mut self, sojourn: Time) {
        self.hist.record_bucket(sojourn.as_nanos());
        self.tick_sum += sojourn;
        self.tick_n += 1;
        self.tick_max = self.tick_max.max(sojourn);
    }
    /// Sum, count and maximum of the sojourns since the last call.
    pub fn take_tick(&mut self) -> (Time, u64, Time) {
        let r = (self.tick_sum, self.tick_n, self.tick_max);
        self.hist.add_totals(self.tick_n, self.tick_sum.as_nanos() as u128, self.tick_max.as_nanos());
        self.tick_sum = Time::ZERO;
        self.tick_n = 0;
        self.tick_max = Time::ZERO;
        r
    }
    /// The sojourn time of every dequeued packet, in ns (a copy, with the tick under way).
    pub fn sojourn(&self) -> LogHistogram {
        let mut h = self.hist.clone();
        h.add_totals(self.tick_n, self.tick_sum.as_nanos() as u128, self.tick_max.as_nanos());
        h
    }
}

/// Statistics a link keeps about its traffic.
#[derive(Debug, Default)]
pub struct LinkStats {
    /// By sub-queue name; a discipline swap adds the new discipline's names.
    pub queues: Vec<QueueStats>,
    /// Drops and CE marks of the disciplines that have been replaced.
    pub retired_drops: u64,
    /// `retired_drops` by flow.
    pub retired_flow_drops: crate::qdisc::FlowCounts,
    pub retired_ce_marks: u64,
    /// Time spent serialising packets.
    pub busy: Time,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets offered to the link (for the conservation check).
    pub arrivals: u64,
    /// Delay-spike durations of the backlog, when asked for (`[metrics] spike_thresholds`).
    pub spikes: Option<SpikeTracker>,
}

/// A link: a queue discipline feeding a serialiser of the given rate. A packet is dequeued
/// when the serialiser is free (so its sojourn excludes its own transmission, as in Linux
/// where the qdisc hands the packet to the device) and leaves after `len / rate`. A shaping
/// discipline may hold packets back; the link then retries when it says.
pub struct Link {
    rate: Rate,
    /// The link as an HTB class on an ifb device instead of a serialiser ([`HtbBucket`]).
    htb: Option<HtbBucket>,
    qdisc: Box<dyn Qdisc>,
    /// The discipline's `dequeues_when_empty`, read once when it is installed (not a virtual
    /// call per packet).
    idle_dequeue: bool,
    in_tx: Option<Packet>,
    tx_end: Time,
    /// A pending retry for a shaping discipline.
    retry_at: Option<Time>,
    /// `stats.queues` index of each of the current discipline's sub-queues.
    queue_slots: Vec<usize>,
    /// The last packet length serialised and its time at `rate` (most packets are one of a
    /// few sizes; `Rate::serialisation` divides in 128 bits). `u32::MAX`: none yet.
    tx_memo: (u32, Time),
    pub stats: LinkStats,
}

/// The token bucket of an HTB class whose rate and ceil are the link rate, on an ifb device
/// (the SCReAM test record's bottleneck: `tc class add dev ifb0 parent 1:1 classid 1:10 htb
/// rate 100mbit ceil 100mbit` with its leaf qdisc, EricssonResearch/scream `test-record.md`
/// at e0af5ef, set-up of 2024-10-28). Linux `sch_htb.c` (5.15): the class may dequeue while
/// its tokens (ns) are ≥ 0 (`htb_class_mode` with `htb_hysteresis` 0), and after the dequeue
/// `htb_charge_class` adds the time since the last charge, caps the sum at `buffer` and
/// subtracts the packet's time at the rate (`psched_l2t_ns`); a throttled class is woken when
/// its tokens reach 0 (`qdisc_watchdog_schedule_ns`). ifb has no wire: a dequeued packet goes
/// on at once (`ifb_xmit` → the ifb tasklet → `netif_receive_skb`). `buffer` is tc's burst,
/// by default `rate / get_hz() + mtu` bytes (iproute2 `tc/q_htb.c` `htb_parse_class_opt`,
/// stored id 951200652), where `get_hz()` reads the fourth field of /proc/net/psched
/// (`__get_hz`, stored id 8317524314), which the kernel prints as `NSEC_PER_SEC /
/// hrtimer_resolution` (`psched_show`, net/sched/sch_api.c, stored id 2122108): 10^9 with
/// high-resolution timers, so the default burst is 0 + 1600 bytes.
///
/// Units and rounding as tc and the kernel compute them (not the serialiser's exact
/// nanoseconds): the rate is tc's bytes per second (`get_rate64`: bits / 8, truncated); the
/// bucket depth is tc's `tc_calc_xmittime(rate, burst)` of iproute2 before 2025 (the burst's
/// time as a double in µs truncated to a whole µs, times 15.625 psched ticks per µs truncated
/// to a u32 tick count; `tc/tc_core.c`, stored id 7858765843; the 2025 change to `ceil` and the
/// UINT_MAX cap, stored id 10631590947, is later than the record) and the kernel's
/// `PSCHED_TICKS2NS` (64 ns a tick); a packet's cost is `psched_l2t_ns`, `(len · mult) >> shift`
/// with `psched_ratecfg_precompute__`'s mult and shift (`net/sched/sch_generic.c`, stored id
/// 23450883), len = the wire length (no `overhead`/`mpu`/linklayer: tc's defaults 0, 0,
/// ethernet). `htb_charge_class` credits at most `mbuffer` (60 s) per charge and keeps the
/// tokens above −60 s (`htb_accnt_tokens`, stored id 2148738). rate = ceil and burst = cburst,
/// so the ceil bucket (`ctokens`) is the same bucket and the class never borrows; the parent
/// class 1:1 of the record, charged the same, never limits it.
#[derive(Clone, Copy, Debug)]
struct HtbBucket {
    burst_bytes: u32,
    /// `buffer` (ns): the burst's time at the rate, in whole psched ticks.
    buffer: i64,
    /// `psched_ratecfg` of the rate: ns per byte as `mult >> shift`.
    mult: u64,
    shift: u32,
    /// `tokens` (ns), as of `checkpoint` (`t_c`).
    tokens: i64,
    checkpoint: Time,
}

/// `cl->mbuffer` (sch_htb.c `htb_change_class`: 60 s).
const HTB_MBUFFER: i64 = 60_000_000_000;

impl HtbBucket {
    fn new(rate: Rate, burst_bytes: u32) -> HtbBucket {
        let mut b = HtbBucket { burst_bytes, buffer: 0, mult: 1, shift: 0, tokens: 0, checkpoint: Time::ZERO };
        b.set_rate(rate);
        b.tokens = b.buffer;
        b
    }
    /// `tc class change ... rate R ceil R`: new ratecfg and buffer, tokens kept.
    fn set_rate(&mut self, rate: Rate) {
        let bytes_ps = (rate.bits_per_sec() / 8).max(1);
        // tc_calc_xmittime: µs as a double, truncated to unsigned int, then ticks truncated.
        let us = (1_000_000f64 * (self.burst_bytes as f64 / bytes_ps as f64)) as u32;
        let ticks = (us as f64 * (1000.0 / 64.0)) as u32;
        self.buffer = (ticks as i64) << 6;
        // psched_ratecfg_precompute__: the largest mult below 2^31 (or until factor overflows).
        let mut factor: u64 = 1_000_000_000;
        let mut shift = 0;
        let mut mult;
        loop {
            mult = factor / bytes_ps;
            if mult & (1 << 31) != 0 || factor & (1 << 63) != 0 {
                break;
            }
            factor <<= 1;
            shift += 1;
        }
        self.mult = mult;
        self.shift = shift;
    }
    /// `psched_l2t_ns`.
    fn l2t(&self, len: u32) -> i64 {
        ((len as u64 * self.mult) >> self.shift) as i64
    }
    /// Tokens at `now` for the mode test (`htb_class_mode`, diff capped at `mbuffer`).
    fn tokens_at(&self, now: Time) -> i64 {
        self.tokens + ((now - self.checkpoint).as_nanos() as i64).min(HTB_MBUFFER)
    }
    /// `htb_accnt_tokens` after a dequeue of `len` bytes at `now`.
    fn charge(&mut self, len: u32, now: Time) {
        let mut toks = self.tokens_at(now).min(self.buffer) - self.l2t(len);
        if toks <= -HTB_MBUFFER {
            toks = 1 - HTB_MBUFFER;
        }
        self.tokens = toks;
        self.checkpoint = now;
    }
}

impl Link {
    /// Makes this link an HTB class of the given burst on an ifb device ([`HtbBucket`]); the
    /// class starts with a full bucket (`htb_change_class`: `cl->tokens = buffer`).
    pub fn set_htb_burst(&mut self, burst_bytes: u32) {
        self.htb = Some(HtbBucket::new(self.rate, burst_bytes));
    }
    pub fn new(rate: Rate, qdisc: Box<dyn Qdisc>) -> Self {
        let idle_dequeue = qdisc.dequeues_when_empty();
        let mut link = Link { rate, htb: None, qdisc, idle_dequeue, in_tx: None, tx_end: Time::ZERO, retry_at: None, queue_slots: Vec::new(), tx_memo: (u32::MAX, Time::ZERO), stats: LinkStats::default() };
        link.map_queues();
        link
    }
    /// Points each sub-queue of the current discipline at the statistics of that name.
    fn map_queues(&mut self) {
        let queues = &mut self.stats.queues;
        self.queue_slots = (self.qdisc.queue_names().iter())
            .map(|&name| {
                queues.iter().position(|q| q.name == name).unwrap_or_else(|| {
                    queues.push(QueueStats { name, ..QueueStats::default() });
                    queues.len() - 1
                })
            })
            .collect();
    }
    pub fn rate(&self) -> Rate {
        self.rate
    }
    /// Changes the rate at `now`, as HTB `tc class change`: the packet on the wire completes at
    /// the old rate, the next one is serialised at the new rate; the discipline is not touched.
    /// The spike tracker's delay thresholds follow the rate.
    pub fn set_rate(&mut self, rate: Rate, now: Time) {
        self.rate = rate;
        self.tx_memo = (u32::MAX, Time::ZERO);
        // `tc class change` sends a new buffer (the burst at the new rate); tokens are kept.
        if let Some(b) = &mut self.htb {
            b.set_rate(rate);
        }
        if let Some(s) = &mut self.stats.spikes {
            s.set_rate(now, rate, self.qdisc.backlog_bytes());
        }
    }
    /// Packets dropped by this link's disciplines, the replaced ones included.
    pub fn drops(&self) -> u64 {
        self.stats.retired_drops + self.qdisc.stats().drops
    }
    /// Packets CE-marked by this link's disciplines, the replaced ones included.
    pub fn ce_marks(&self) -> u64 {
        self.stats.retired_ce_marks + self.qdisc.stats().ce_marks
    }
    pub fn qdisc(&self) -> &dyn Qdisc {
        self.qdisc.as_ref()
    }
    /// The queue invariants, checked for every link at the end of every run: per-queue packet
    /// conservation (every packet offered was sent, dropped by a discipline, current or
    /// replaced, or is still queued) and a byte backlog consistent with the packets queued
    /// (none when empty, some when not, below 2^63: a counter that went below zero wraps to
    /// about 2^64 in an optimised build).
    pub fn check_invariants(&self) {
        let kind = self.qdisc.kind();
        let (arrivals, sent, drops, queued) = (self.stats.arrivals, self.stats.tx_packets, self.drops(), self.qdisc.len() as u64);
        if arrivals != sent + drops + queued {
            panic!("invariant violated: queue conservation: {kind}: {arrivals} packets arrived but {sent} were sent, {drops} dropped and {queued} are queued");
        }
        let bytes = self.qdisc.backlog_bytes();
        if (queued == 0 && bytes != 0) || (queued != 0 && bytes == 0) || bytes >= 1 << 63 {
            panic!("invariant violated: queue backlog: {kind}: {queued} packets queued hold {bytes} bytes");
        }
    }
    /// Packets held: queued plus the one being serialised.
    pub fn held(&self) -> usize {
        self.qdisc.len() + self.in_tx.is_some() as usize
    }
    /// Calls `f` for each packet [`Link::held`] counts.
    pub fn for_each_held(&self, f: &mut dyn FnMut(&Packet)) {
        self.qdisc.for_each_packet(f);
        if let Some(p) = &self.in_tx {
            f(p);
        }
    }
    /// [`Link::drops`] by flow, added to `into`.
    pub fn add_flow_drops(&self, into: &mut crate::qdisc::FlowCounts) {
        into.add_all(&self.stats.retired_flow_drops);
        into.add_all(&self.qdisc.stats().flow_drops);
    }
    /// [`Link::add_flow_drops`]'s counts handed to `f(flow, count)`, and forgotten
    /// (`FlowCounts::drain`).
    pub fn drain_flow_drops(&mut self, apart_from: u32, f: &mut dyn FnMut(u32, u64)) {
        self.stats.retired_flow_drops.drain(apart_from, &mut *f);
        self.qdisc.stats_mut().flow_drops.drain(apart_from, f);
    }
    /// `tc qdisc replace` (Linux `tc_modify_qdisc`). A discipline of another kind is swapped
    /// in: the old one's queue is discarded (counted as its drops); the packet on the wire
    /// completes. One of the same kind is a `qdisc_change`: the installed discipline keeps
    /// its queue and state and takes the new parameters where it models the change
    /// (`Qdisc::change`: pfifo/bfifo, pie), else it is kept as it is. Returns the packets
    /// discarded by a swap.
    pub fn replace_qdisc(&mut self, qdisc: Box<dyn Qdisc>, now: Time) -> u64 {
        self.replace_qdisc_with(qdisc, None, now)
    }
    /// [`Link::replace_qdisc`] given the new discipline's parsed parameters, which a
    /// same-kind change passes to `Qdisc::change` (without them the installed discipline is
    /// kept as it is).
    pub fn replace_qdisc_with(&mut self, qdisc: Box<dyn Qdisc>, params: Option<&crate::qdisc::Args>, now: Time) -> u64 {
        if qdisc.kind() == self.qdisc.kind() {
            if let Some(p) = params {
                self.qdisc.change(p);
            }
            self.observe_backlog(now);
            return 0;
        }
        self.idle_dequeue = qdisc.dequeues_when_empty();
        let old = std::mem::replace(&mut self.qdisc, qdisc);
        let discarded = old.len() as u64;
        self.stats.retired_drops += old.stats().drops + discarded;
        let retired = &mut self.stats.retired_flow_drops;
        retired.add_all(&old.stats().flow_drops);
        old.for_each_packet(&mut |p| {
            retired.add(p.flow);
            p.release();
        });
        self.stats.retired_ce_marks += old.stats().ce_marks;
        self.map_queues();
        self.observe_backlog(now);
        discarded
    }
    /// Tells the spike tracker the backlog from `now` on; called after every event that can
    /// change it (an arrival, a dequeue with the drops the discipline makes then, a replacement).
    ///
    /// Inlined: it runs twice per packet at every link and, without spike thresholds, is one
    /// test; as a call its prologue and epilogue cost several times that.
    #[inline]
    pub fn observe_backlog(&mut self, now: Time) {
        if let Some(s) = &mut self.stats.spikes {
            s.observe(now, self.qdisc.backlog_bytes());
        }
    }
    pub(crate) fn receive(&mut self, mut pkt: Packet, ctx: &mut ElementCtx) {
        pkt.enqueued_at = ctx.now;
        pkt.ecn_at_enqueue = pkt.ecn;
        self.stats.arrivals += 1;
        if self.qdisc.enqueue(pkt, ctx.now) == Enqueued::Queued {
            self.start_next(ctx);
        }
        self.observe_backlog(ctx.now);
    }
    #[inline]
    fn start_next(&mut self, ctx: &mut ElementCtx) {
        // The link asks for a packet only when the discipline holds one, as an HTB class
        // does for its leaf qdisc (the studies' "htb" placement): an empty discipline is
        // never dequeued, so it sees no idle-time dequeue (RED does not start an idle period,
        // DualPI2 keeps its WRR credit, fq_codel keeps a drained flow listed). Disciplines
        // modelled on ns-2 (HRED) ask for idle dequeues, as ns-2's link makes them.
        //
        // This test is inlined into the link's receive and wake: an arrival while a packet is
        // on the wire (most arrivals at a busy bottleneck) costs no call.
        if self.in_tx.is_some() || (!self.idle_dequeue && self.qdisc.is_empty()) {
            return;
        }
        self.dequeue_next(ctx);
    }
    /// [`Link::start_next`] once the link may dequeue: the next packet onto the wire.
    fn dequeue_next(&mut self, ctx: &mut ElementCtx) {
        if self.htb.is_some() {
            return self.htb_dequeue(ctx);
        }
        let Some(pkt) = self.qdisc.dequeue(ctx.now) else {
            return self.retry_when_ready(ctx);
        };
        if self.tx_memo.0 != pkt.wire_len {
            self.tx_memo = (pkt.wire_len, self.rate.serialisation(pkt.wire_len));
        }
        let tx = self.tx_memo.1;
        self.account_dequeue(&pkt, tx, ctx.now);
        self.in_tx = Some(pkt);
        self.tx_end = ctx.now + tx;
        ctx.wake_at(self.tx_end);
    }
    /// [`HtbBucket`]: dequeue while the tokens allow, each packet passing on at once.
    fn htb_dequeue(&mut self, ctx: &mut ElementCtx) {
        while !self.qdisc.is_empty() {
            let toks = self.htb.as_ref().expect("htb link").tokens_at(ctx.now);
            if toks < 0 {
                return self.schedule_retry(ctx.now + Time((-toks) as u64), ctx);
            }
            let Some(pkt) = self.qdisc.dequeue(ctx.now) else {
                return self.retry_when_ready(ctx);
            };
            let tx = self.rate.serialisation(pkt.wire_len);
            self.htb.as_mut().expect("htb link").charge(pkt.wire_len, ctx.now);
            self.account_dequeue(&pkt, tx, ctx.now);
            ctx.out.push(pkt);
        }
    }
    /// A packet leaves the discipline for the wire (`tx` on it): its ECN change is checked,
    /// its sojourn recorded in its queue's statistics and the link's counters advanced.
    /// Inlined into its two callers (once per packet sent; a call's register saves and
    /// restores were a fifth of its cost).
    #[inline(always)]
    fn account_dequeue(&mut self, pkt: &Packet, tx: Time, now: Time) {
        // The discipline's name (a virtual call) only when the codepoint changed.
        if pkt.ecn != pkt.ecn_at_enqueue {
            Ecn::check_transition(pkt.ecn_at_enqueue, pkt.ecn, self.qdisc.kind());
        }
        let q = self.queue_slots[(pkt.queue as usize).min(self.queue_slots.len() - 1)];
        self.stats.queues[q].record(now - pkt.enqueued_at);
        self.stats.busy += tx;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += pkt.wire_len as u64;
    }
    /// The discipline holds packets but none may leave yet: ask again when it says one may.
    fn retry_when_ready(&mut self, ctx: &mut ElementCtx) {
        if let Some(t) = self.qdisc.ready_at().filter(|_| !self.qdisc.is_empty()) {
            self.schedule_retry(t.max(ctx.now), ctx);
        }
    }
    /// A wake-up at `t` to try dequeuing again, unless an earlier pending one already covers it.
    fn schedule_retry(&mut self, t: Time, ctx: &mut ElementCtx) {
        if self.retry_at.map_or(true, |r| r <= ctx.now || r > t) {
            self.retry_at = Some(t);
            ctx.wake_at(t);
        }
    }
    /// Time spent serialising up to `end`: the packet on the wire at `end` counts only for
    /// the part sent by then, so the busy fraction of a run never exceeds 1.
    pub fn busy_until(&self, end: Time) -> Time {
        match self.in_tx {
            Some(_) if self.tx_end > end => self.stats.busy - (self.tx_end - end).min(self.stats.busy),
            _ => self.stats.busy,
        }
    }

    pub(crate) fn wake(&mut self, ctx: &mut ElementCtx) {
        if self.in_tx.is_some() {
            if ctx.now < self.tx_end {
                return; // A shaper retry that came while a packet is on the wire.
            }
            if let Some(pkt) = self.in_tx.take() {
                ctx.out.push(pkt);
            }
        }
        self.start_next(ctx);
        self.observe_backlog(ctx.now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sojourn histogram whose count, sum and maximum are added at ticks reads the same
    /// as one recording all of each packet, between ticks, right after one and with no tick
    /// at all (links without series never tick).
    #[test]
    fn sojourn_totals_added_at_ticks_read_as_recorded_per_packet() {
        let mut q = QueueStats::default();
        let mut full = LogHistogram::default();
        let read = |h: &LogHistogram| (h.count(), h.min(), h.max(), h.mean(), h.quantile(0.5), h.cdf());
        for (i, ns) in [5u64, 900, 70_000, 3, 1_000_000, 42, 7, 70_001].into_iter().enumerate() {
            q.record(Time(ns));
            full.record(ns);
            if i == 2 || i == 3 || i == 6 {
                q.take_tick();
            }
            assert_eq!(read(&q.sojourn()), read(&full), "after sample {i}");
        }
        assert_eq!(q.take_tick(), (Time(70_001), 1, Time(70_001)));
        assert_eq!(read(&q.sojourn()), read(&full));
    }

    /// tc's bucket depth and the kernel's packet cost, by hand. At 3 Mbit/s (375000 B/s) the
    /// 1600-byte burst is 4266.67 µs: tc truncates to 4266 µs, then to 66656 ticks (× 15.625),
    /// 4265984 ns; a 1414-byte packet costs (1414 · 2796202666) >> 20 = 3770666 ns, where the
    /// serialiser rounds to 3770667. At 100 Mbit/s both are exact (128 µs, 113.12 µs).
    #[test]
    fn htb_bucket_uses_tc_ticks_and_the_kernels_mult_shift() {
        let b = HtbBucket::new(Rate(3_000_000), 1600);
        assert_eq!((b.buffer, b.mult, b.shift), (4_265_984, 2_796_202_666, 20));
        assert_eq!(b.tokens, b.buffer, "a new class starts with a full bucket");
        assert_eq!(b.l2t(1414), 3_770_666);
        assert_eq!(Rate(3_000_000).serialisation(1414).as_nanos(), 3_770_667);
        let f = HtbBucket::new(Rate(100_000_000), 1600);
        assert_eq!((f.buffer, f.l2t(1414)), (128_000, 113_120));
        // A rate change resizes the bucket and the cost; the tokens stay.
        let mut c = f;
        c.tokens = -5;
        c.set_rate(Rate(3_000_000));
        assert_eq!((c.buffer, c.l2t(1414), c.tokens), (4_265_984, 3_770_666, -5));
    }

    /// `mbuffer`: a charge credits at most 60 s of idle time, and the debt stops at 60 s.
    #[test]
    fn htb_bucket_credits_at_most_60_s_and_owes_at_most_60_s() {
        // 100 kbit/s, 1 MB burst: an 80 s bucket (tc: 80000000 µs, 1.25e9 ticks).
        let mut b = HtbBucket::new(Rate(100_000), 1_000_000);
        assert_eq!(b.buffer, 80_000_000_000);
        b.tokens = -30_000_000_000;
        assert_eq!(b.tokens_at(Time::from_secs(100)), 30_000_000_000, "not 70 s");
        b.charge(1414, Time::from_secs(100));
        assert_eq!(b.tokens, 30_000_000_000 - 113_120_000);
        assert_eq!(b.checkpoint, Time::from_secs(100));
        // 65535 B cost 5.2428 s; from −59 s the debt would pass −60 s: it is held at 1 − 60 s.
        b.tokens = -59_000_000_000;
        b.charge(65535, Time::from_secs(100));
        assert_eq!(b.tokens, 1 - 60_000_000_000);
    }
}
