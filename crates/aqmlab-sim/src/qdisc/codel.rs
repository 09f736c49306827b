//! CoDel (RFC 8289) as Linux implements it (`include/net/codel.h`, `include/net/codel_impl.h`),
//! as a reusable per-queue component, and the single-queue `codel` discipline
//! (`net/sched/sch_codel.c`).
//!
//! The component is [`CodelFlow`]: a FIFO with its CoDel variables ([`CodelVars`]). Disciplines
//! that run CoDel on many queues (fq_codel, sfq_codel, the SCE qdiscs) keep one `CodelFlow` per
//! queue, one [`CodelParams`] and one [`Totals`] (the qdisc-wide packet and byte backlog that
//! the MTU guard looks at), and call [`CodelFlow::dequeue`].
//!
//! Version read: torvalds/linux `codel_impl.h` (with `ce_threshold_selector/mask`), `codel.h`,
//! `sch_codel.c` of Linux 6.18 (MyWRT/linux-6.18.y mirror). See docs/algorithms/codel.md for
//! the differences from Linux.

use super::queue::LineQueue;
use super::{Args, BuildCtx, Enqueued, Param, Qdisc, QdiscConfig, QdiscKind, QdiscStats, Type, Value};
use crate::packet::Packet;
use crate::profile::Stack;
use crate::time::Time;
use std::sync::Arc;

/// CoDel parameters (`struct codel_params`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodelParams {
    /// Acceptable standing queue delay.
    pub target: Time,
    /// Window over which the delay must stay above `target` before dropping starts; also the
    /// base of the control law.
    pub interval: Time,
    /// Mark ECN-capable packets with CE instead of dropping them.
    pub ecn: bool,
    /// Step threshold: CE-mark every departing ECN-capable packet whose sojourn exceeds it
    /// (`None` = `CODEL_DISABLED_THRESHOLD`).
    pub ce_threshold: Option<Time>,
    /// Apply `ce_threshold` only to packets with `dsfield & mask == selector` (mask 0: all).
    pub ce_threshold_selector: u8,
    pub ce_threshold_mask: u8,
    /// No drop while the qdisc backlog is at most this many bytes (Linux: `psched_mtu`).
    pub mtu: u32,
    /// Whose control law: Linux's, or one of the 2013 ns-2 codes (the `ns2-2013` profile).
    pub law: Law,
}

/// Which CoDel code runs: Linux's (`codel_impl.h`), or one of Pollere's ns-2 files; the
/// `ns2-2013` profile selects the patch for `codel` and sfqcodel.cc's for `sfq_codel`
/// (docs/algorithms/codel.md, "ns2-2013").
///
/// The ns-2 laws (hbatmit/ns2.35: `queue/codel.cc` at 4f9d79f2, "Latest version of codel from
/// http://www.pollere.net/Txtdocs/codel.cc", 8 Feb 2013; `queue/sfqcodel.cc` at 6026a16b,
/// "Latest version of sfqcodel from CableLabs", 25 Mar 2013) differ from Linux in: real
/// `interval / sqrt(count)` (no Newton step); the "backlog at most one packet" guard compares
/// the largest packet seen so far (`maxpacket_`, from 256 bytes), not the MTU; dropping starts
/// at `now >= first_above_time` (Linux `>`); `count` grows only when a further drop is
/// scheduled (Linux: before every drop); re-entry within 8 intervals of the last drop time
/// resumes at `count - 2` if `count > 2` (Linux: `count - lastcount` within 16); no ECN, no
/// CE threshold. The January 2013 `CoDel-ns-2.35.patch` (482701a) instead counts every drop and
/// re-enters at `count - 1` within 16 intervals. `codel.cc` alone also starts the first-above window at `interval /
/// sqrt(count)` when re-entering within 8 intervals with `count > 1`, and decays a resumed
/// count above 126 to `0.9844 (count + 2)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Law {
    #[default]
    Linux,
    /// Pollere's `CoDel-ns-2.35.patch` (`Queue/CoDel`, hbatmit/ns2.35 482701a, Jan 2013):
    /// the `codel` kind on `ns2-2013`, as the ns-2 reference build (tools/ns2) runs it.
    Ns2CodelPatch,
    /// Pollere's later `codel.cc` of February 2013 (not selected by a profile).
    Ns2Codel2013,
    /// The per-bin CoDel of `sfqcodel.cc` of March 2013 (`Queue/sfqCoDel`).
    Ns2Sfq2013,
}

impl Law {
    /// The single-queue law of a profile.
    pub fn codel(stack: crate::profile::Stack) -> Law {
        match stack {
            crate::profile::Stack::Ns2_2013 => Law::Ns2CodelPatch,
            _ => Law::Linux,
        }
    }
    /// sfq_codel's per-bin law of a profile.
    pub fn sfq(stack: crate::profile::Stack) -> Law {
        match stack {
            crate::profile::Stack::Ns2_2013 => Law::Ns2Sfq2013,
            _ => Law::Linux,
        }
    }
}

impl CodelParams {
    /// `codel_params_init`: target 5 ms, interval 100 ms, no ECN, no CE threshold.
    pub fn new(mtu: u32) -> Self {
        CodelParams {
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
            ecn: false,
            ce_threshold: None,
            ce_threshold_selector: 0,
            ce_threshold_mask: 0,
            mtu,
            law: Law::Linux,
        }
    }
}

/// Per-queue CoDel state (`struct codel_vars`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (and marks) since entering the dropping state.
    count: u32,
    /// `count` at the last entry into the dropping state.
    lastcount: u32,
    dropping: bool,
    /// 1/sqrt(count) in Q0.16 (the top half of a Q0.32 number, as Linux stores it).
    rec_inv_sqrt: u16,
    /// When the delay will have been above target for an interval (None: below target).
    first_above_time: Option<Time>,
    /// Time of the next drop, or of the last one.
    drop_next: Time,
    /// Sojourn time of the last packet examined.
    ldelay: Time,
}

/// Counters of the CoDel component, named as in `struct codel_stats` / `tc -s` xstats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelCounters {
    /// Packets CE-marked by the control law instead of being dropped (`ecn_mark`; a packet
    /// that arrived already CE is counted too, as `INET_ECN_set_ce` succeeds on it).
    pub ecn_mark: u64,
    /// Packets CE-marked by the `ce_threshold` step (`ce_mark`, same convention).
    pub ce_mark: u64,
}

/// Qdisc-wide backlog shared by all the CoDel queues of one discipline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub qlen: usize,
    pub backlog: u64,
    /// Largest packet dequeued so far (ns-2 `maxpacket_`; the ns-2 laws only).
    pub maxpacket: u32,
}

/// Which backlog the "backlog <= mtu" guard of `codel_should_drop` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtuGuard {
    /// The qdisc-wide byte backlog after removing the head packet (Linux codel, fq_codel).
    Qdisc,
    /// As `Qdisc`, and also "below target" when the packet emptied its own queue (ns-2
    /// sfqcodel's `q->length() == 0` test).
    QdiscOrQueueEmpty,
}

/// Sets CE on an ECN-capable packet, as `INET_ECN_set_ce` ([`crate::packet::Ecn::set_ce`]): succeeds for
/// ECT(0), ECT(1) and CE (already marked), fails for Not-ECT. Returns (succeeded, the field
/// changed).
fn set_ce(p: &mut Packet) -> (bool, bool) {
    let before = p.ecn;
    (p.ecn.set_ce(), p.ecn != before)
}

impl CodelVars {
    /// One Newton iteration of 1/sqrt(count), in Linux's fixed point (`codel_Newton_step`):
    /// x <- x (3 - count x^2) / 2, with x in Q0.32 and 16 bits kept. Wrapping arithmetic as
    /// in the kernel's unsigned C.
    fn newton_step(&mut self) {
        let x = (self.rec_inv_sqrt as u64) << 16; // Q0.32
        let x2 = (x * x) >> 32; // Q0.32
        let mut val = (3u64 << 32).wrapping_sub((self.count as u64).wrapping_mul(x2));
        val >>= 2;
        val = val.wrapping_mul(x) >> (32 - 2 + 1);
        self.rec_inv_sqrt = (val >> 16) as u16;
    }

    /// `codel_control_law`: t + interval / sqrt(count), with 1/sqrt(count) from
    /// `rec_inv_sqrt` (`reciprocal_scale(interval, rec_inv_sqrt << 16)`).
    fn control_law(&self, t: Time, interval: Time) -> Time {
        let scale = (self.rec_inv_sqrt as u128) << 16;
        t + Time(((interval.0 as u128 * scale) >> 32) as u64)
    }

    /// `codel_should_drop`: has the head packet's sojourn been above target for an interval?
    #[inline]
    fn should_drop(&mut self, pkt: Option<&Packet>, p: &CodelParams, backlog: u64, now: Time) -> bool {
        let Some(pkt) = pkt else {
            self.first_above_time = None;
            return false;
        };
        self.ldelay = now - pkt.enqueued_at;
        if self.ldelay < p.target || backlog <= p.mtu as u64 {
            self.first_above_time = None;
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + p.interval);
                false
            }
            Some(t) => now > t,
        }
    }

    /// Drops since the dropping state was entered.
    pub fn count(&self) -> u32 {
        self.count
    }
    pub fn dropping(&self) -> bool {
        self.dropping
    }
    /// Sojourn of the last packet examined (`ldelay`).
    pub fn ldelay(&self) -> Time {
        self.ldelay
    }
    /// 1/sqrt(count) as Linux approximates it.
    pub fn inv_sqrt_count(&self) -> f64 {
        self.rec_inv_sqrt as f64 / 65536.0
    }
    /// fq_codel's overflow handler "tells codel to increase its signal strength" by adding
    /// the number of packets it dropped to `count` (`fq_codel_drop`).
    pub fn add_count(&mut self, n: u32) {
        self.count = self.count.wrapping_add(n);
    }
}

/// A FIFO managed by CoDel: one of a discipline's queues. `repr(C)`: the queue and its
/// backlog (what an enqueue touches) first, CoDel's state after them.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct CodelFlow {
    pub queue: LineQueue,
    /// Bytes queued here.
    pub backlog: u64,
    pub vars: CodelVars,
}

impl CodelFlow {
    /// Appends a packet, counting it in the flow's and the qdisc's backlog.
    pub fn push(&mut self, pkt: Packet, totals: &mut Totals) {
        self.backlog += pkt.wire_len as u64;
        totals.backlog += pkt.wire_len as u64;
        totals.qlen += 1;
        self.queue.push_back(pkt);
    }

    /// Removes the head packet without AQM (overflow drops), updating the backlogs. Inlined:
    /// the packet is then moved once, from the ring into the caller's return value.
    #[inline]
    pub fn pop(&mut self, totals: &mut Totals) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        if self.queue.is_empty() {
            // Back to the ring's first slot (`clear` of an empty ring), so that a queue that
            // drains often reuses the same few cache lines instead of walking its whole
            // capacity (1000 packets, 64 KB, for codel's default limit).
            self.queue.clear();
        }
        self.unaccount(&p, totals);
        Some(p)
    }

    /// Removes the tail packet (ns-2 sfqcodel's overflow drop), updating the backlogs.
    pub fn pop_tail(&mut self, totals: &mut Totals) -> Option<Packet> {
        let p = self.queue.pop_back()?;
        self.unaccount(&p, totals);
        Some(p)
    }

    /// Takes a packet just removed from `queue` off the flow's and the qdisc's backlog.
    fn unaccount(&mut self, p: &Packet, totals: &mut Totals) {
        crate::qdisc::dec_backlog!(self.backlog, p.wire_len as u64, "codel flow backlog");
        crate::qdisc::dec_backlog!(totals.backlog, p.wire_len as u64, "codel backlog");
        crate::qdisc::dec_backlog!(totals.qlen, 1, "codel qlen");
    }

    /// `dequeue_func` + `codel_should_drop` on the head packet, which stays queued: the
    /// verdict and CoDel's state (`ldelay`, `first_above_time`) are what Linux computes after
    /// taking the packet off, with the backlog the MTU guard compares as it will be once the
    /// head is removed (Linux lowers `sch->qstats.backlog` before `codel_should_drop` reads
    /// it). `None` when the queue is empty. The head is popped only once its fate is known
    /// ([`CodelFlow::drop_head`], or the final pop of [`CodelFlow::dequeue`]), so a packet
    /// that is sent is moved once, straight into the return value, instead of through the
    /// intermediate `Option`s and tuples of a pop-then-decide (a 112-byte copy each).
    #[inline]
    fn head_checked(&mut self, p: &CodelParams, totals: &Totals, guard: MtuGuard, now: Time) -> Option<bool> {
        let Some(head) = self.queue.front() else {
            self.vars.should_drop(None, p, 0, now);
            return None;
        };
        let backlog = match guard {
            MtuGuard::QdiscOrQueueEmpty if self.queue.len() == 1 => 0,
            // An underflow here panics in the pop that follows (`unaccount`).
            _ => totals.backlog.saturating_sub(head.wire_len as u64),
        };
        Some(self.vars.should_drop(Some(head), p, backlog, now))
    }

    /// Head-drops the packet [`CodelFlow::head_checked`] examined, counting the drop.
    fn drop_head(&mut self, totals: &mut Totals, stats: &mut QdiscStats) {
        let p = self.pop(totals).expect("a checked head to drop");
        stats.drop(&p);
    }

    /// ns-2 `interval / sqrt(count)` after `t`, in doubles truncated to nanoseconds.
    fn ns2_control_law(&self, t: Time, interval: Time) -> Time {
        t + Time((interval.0 as f64 / (self.vars.count as f64).sqrt()) as u64)
    }

    /// ns-2 `dodeque`: takes the head packet and says whether it is ok to drop.
    fn ns2_pop_checked(&mut self, p: &CodelParams, totals: &mut Totals, guard: MtuGuard, now: Time) -> (Option<Packet>, bool) {
        let pkt = self.pop(totals);
        let Some(k) = pkt.as_ref() else {
            self.vars.first_above_time = None;
            return (None, false);
        };
        self.vars.ldelay = now - k.enqueued_at;
        totals.maxpacket = totals.maxpacket.max(256).max(k.wire_len);
        let emptied = guard == MtuGuard::QdiscOrQueueEmpty && self.queue.is_empty();
        if self.vars.ldelay < p.target || totals.backlog <= totals.maxpacket as u64 || emptied {
            self.vars.first_above_time = None;
            return (pkt, false);
        }
        match self.vars.first_above_time {
            None => {
                let v = &self.vars;
                let recent = now.0 as i128 - (v.drop_next.0 as i128) < 8 * p.interval.0 as i128;
                let at = if p.law == Law::Ns2Codel2013 && recent && v.count > 1 {
                    self.ns2_control_law(now, p.interval)
                } else {
                    now + p.interval
                };
                self.vars.first_above_time = Some(at);
                (pkt, false)
            }
            Some(t) => (pkt, now >= t),
        }
    }

    /// ns-2 `CoDelQueue::deque` (and the per-bin part of `sfqCoDelQueue::deque`): head drops
    /// only, the laws of [`Law`]. A call: it stays out of the inlined Linux dequeue.
    #[inline(never)]
    fn ns2_dequeue(&mut self, p: &CodelParams, totals: &mut Totals, guard: MtuGuard, now: Time, stats: &mut QdiscStats) -> Option<Packet> {
        let (mut pkt, ok) = self.ns2_pop_checked(p, totals, guard, now);
        if pkt.is_none() {
            self.vars.dropping = false;
            return None;
        }
        if self.vars.dropping {
            if !ok {
                self.vars.dropping = false;
            }
            while now >= self.vars.drop_next && self.vars.dropping {
                stats.drop(pkt.as_ref().expect("a packet to drop"));
                let (next, ok) = self.ns2_pop_checked(p, totals, guard, now);
                pkt = next;
                if p.law == Law::Ns2CodelPatch {
                    // The patch counts every drop (the 2013 files only scheduled ones).
                    self.vars.count += 1;
                }
                if !ok {
                    self.vars.dropping = false;
                } else {
                    if p.law != Law::Ns2CodelPatch {
                        self.vars.count += 1;
                    }
                    self.vars.drop_next = self.ns2_control_law(self.vars.drop_next, p.interval);
                }
            }
        } else if ok {
            stats.drop(pkt.as_ref().expect("a packet to drop"));
            pkt = self.ns2_pop_checked(p, totals, guard, now).0;
            self.vars.dropping = true;
            // (sfqcodel's branch for a bin emptied by this drop cannot run: a packet that
            // empties its bin is never ok to drop, so one more is always queued.)
            let v = &mut self.vars;
            let since = now.0 as i128 - v.drop_next.0 as i128;
            if p.law == Law::Ns2CodelPatch {
                // The patch: count - 1 if count > 1 within 16 intervals, else 1.
                v.count = if v.count > 1 && since < 16 * p.interval.0 as i128 { v.count - 1 } else { 1 };
            } else if v.count > 2 && since < 8 * p.interval.0 as i128 {
                v.count -= 2;
                if p.law == Law::Ns2Codel2013 && v.count > 126 {
                    v.count = (0.9844 * (v.count + 2) as f64) as u32;
                }
            } else {
                v.count = 1;
            }
            self.vars.drop_next = self.ns2_control_law(now, p.interval);
        }
        pkt
    }

    /// `codel_dequeue`: the next packet to send, after head-dropping (or CE-marking) as the
    /// control law says. Drops are counted in `stats.drops`, CE marks that changed a packet in
    /// `stats.ce_marks` (once per packet) and the Linux counters in `ctr`.
    ///
    /// Inlined, with the usual case decided here: outside the dropping state, with a head
    /// that is not to be dropped and no `ce_threshold`, Linux goes straight to `end:` and
    /// sends the head (`include/net/codel_impl.h` `codel_dequeue`, stored id 8068181644),
    /// and so does this, without a call. The rest (entering, staying in or leaving the
    /// dropping state, `ce_threshold`) is [`CodelFlow::dequeue_signalled`], a call.
    /// (`inline(always)`: with `inline` alone the compiler kept it a call.)
    #[inline(always)]
    pub fn dequeue(
        &mut self,
        p: &CodelParams,
        totals: &mut Totals,
        guard: MtuGuard,
        now: Time,
        stats: &mut QdiscStats,
        ctr: &mut CodelCounters,
    ) -> Option<Packet> {
        if p.law != Law::Linux {
            return self.ns2_dequeue(p, totals, guard, now, stats);
        }
        let Some(drop) = self.head_checked(p, totals, guard, now) else {
            self.vars.dropping = false;
            return None;
        };
        if !drop && !self.vars.dropping && p.ce_threshold.is_none() {
            return self.pop(totals);
        }
        self.dequeue_signalled(drop, p, totals, guard, now, stats, ctr)
    }

    /// [`CodelFlow::dequeue`] past the head's check (`drop`: its verdict), when CoDel may
    /// drop or mark: Linux's dropping-state branches and the `ce_threshold` step.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn dequeue_signalled(
        &mut self,
        drop: bool,
        p: &CodelParams,
        totals: &mut Totals,
        guard: MtuGuard,
        now: Time,
        stats: &mut QdiscStats,
        ctr: &mut CodelCounters,
    ) -> Option<Packet> {
        // Whether a packet is left to send (the head examined last).
        let mut have = true;
        let mut marked = false;
        if self.vars.dropping {
            if !drop {
                // Sojourn below target (or backlog at most one MTU): leave the dropping state.
                self.vars.dropping = false;
            } else {
                // Time for the next drop(s); a large backlog may need several at once.
                while self.vars.dropping && now >= self.vars.drop_next {
                    let v = &mut self.vars;
                    v.count = v.count.wrapping_add(1);
                    v.newton_step();
                    if p.ecn {
                        let head = self.queue.front_mut().expect("dropping implies a packet");
                        let (ok, changed) = set_ce(head);
                        if ok {
                            ctr.ecn_mark += 1;
                            marked = changed;
                            let v = &mut self.vars;
                            v.drop_next = v.control_law(v.drop_next, p.interval);
                            break;
                        }
                    }
                    self.drop_head(totals, stats);
                    let next = self.head_checked(p, totals, guard, now);
                    have = next.is_some();
                    let v = &mut self.vars;
                    if next != Some(true) {
                        v.dropping = false;
                    } else {
                        v.drop_next = v.control_law(v.drop_next, p.interval);
                    }
                }
            }
        } else if drop {
            // Enter the dropping state: mark or drop this packet.
            let head = self.queue.front_mut().expect("checked above");
            let (ok, changed) = if p.ecn { set_ce(head) } else { (false, false) };
            if ok {
                ctr.ecn_mark += 1;
                marked = changed;
            } else {
                self.drop_head(totals, stats);
                // Linux re-evaluates should_drop on the next packet (for ldelay and
                // first_above_time) but does not use its verdict here.
                have = self.head_checked(p, totals, guard, now).is_some();
            }
            let v = &mut self.vars;
            v.dropping = true;
            // Re-entering soon after leaving: resume near the drop rate that last controlled
            // the queue (count - lastcount) instead of restarting from 1.
            let delta = v.count.wrapping_sub(v.lastcount);
            let since = now.0 as i128 - v.drop_next.0 as i128;
            if delta > 1 && since < 16 * p.interval.0 as i128 {
                v.count = delta;
                v.newton_step();
            } else {
                v.count = 1;
                v.rec_inv_sqrt = u16::MAX;
            }
            v.lastcount = v.count;
            v.drop_next = v.control_law(now, p.interval);
        }
        if !have {
            return None;
        }
        if let Some(th) = p.ce_threshold {
            let pkt = self.queue.front_mut().expect("a head to send");
            let dsfield = (pkt.dscp << 2) | pkt.ecn as u8;
            let selected = p.ce_threshold_mask == 0 || dsfield & p.ce_threshold_mask == p.ce_threshold_selector;
            if self.vars.ldelay > th && selected {
                let (ok, changed) = set_ce(pkt);
                if ok {
                    ctr.ce_mark += 1;
                    marked |= changed;
                }
            }
        }
        if marked {
            stats.ce_marks += 1;
        }
        self.pop(totals)
    }
}

/// The qdisc-wide side of a CoDel discipline: one [`CodelParams`], the [`Totals`] backlog, the
/// CoDel counters and the qdisc stats, shared by all its [`CodelFlow`]s. It does the
/// bookkeeping that codel, fq_codel and sfq_codel have in common around the per-queue CoDel.
#[derive(Clone, Debug)]
pub struct CodelShared {
    pub params: CodelParams,
    pub totals: Totals,
    pub ctr: CodelCounters,
    pub stats: QdiscStats,
}

impl CodelShared {
    pub fn new(params: CodelParams) -> Self {
        CodelShared {
            params,
            totals: Totals::default(),
            ctr: CodelCounters::default(),
            stats: QdiscStats::default(),
        }
    }

    /// Queues an accepted packet on `flow`, counting it as enqueued.
    pub fn enqueue(&mut self, flow: &mut CodelFlow, pkt: Packet) {
        flow.push(pkt, &mut self.totals);
        self.stats.enqueued += 1;
    }

    /// CoDel dequeue of `flow` ([`CodelFlow::dequeue`]); a packet returned is counted as sent.
    /// `None` when CoDel's drops (or an empty queue) left nothing to send.
    #[inline]
    pub fn dequeue(&mut self, flow: &mut CodelFlow, guard: MtuGuard, now: Time) -> Option<Packet> {
        let pkt = flow.dequeue(&self.params, &mut self.totals, guard, now, &mut self.stats, &mut self.ctr);
        if let Some(p) = &pkt {
            self.stats.sent(p);
        }
        pkt
    }
}

/// The single-queue `codel` discipline (`sch_codel.c`): tail drop at `limit` packets, CoDel
/// head drop at dequeue.
#[derive(Debug)]
pub struct Codel {
    limit: u32,
    flow: CodelFlow,
    cd: CodelShared,
}

impl Codel {
    pub fn new(limit: u32, params: CodelParams) -> Self {
        let flow = CodelFlow { queue: LineQueue::with_capacity((limit as usize).min(1 << 16)), ..CodelFlow::default() };
        Codel { limit, flow, cd: CodelShared::new(params) }
    }
    pub fn vars(&self) -> &CodelVars {
        &self.flow.vars
    }
    pub fn counters(&self) -> &CodelCounters {
        &self.cd.ctr
    }
}

impl Qdisc for Codel {
    fn kind(&self) -> &'static str {
        CODEL.name
    }
    /// `codel_qdisc_enqueue`: tail drop when `qlen >= limit`.
    fn enqueue(&mut self, pkt: Packet, _now: Time) -> Enqueued {
        if self.cd.totals.qlen >= self.limit as usize {
            self.cd.stats.overlimit_drop(&pkt);
            return Enqueued::Dropped;
        }
        self.cd.enqueue(&mut self.flow, pkt);
        Enqueued::Queued
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.cd.dequeue(&mut self.flow, MtuGuard::Qdisc, now)
    }
    super::flow_table::codel_totals!(cd);
    fn for_each_packet(&self, f: &mut dyn FnMut(&Packet)) {
        self.flow.queue.iter().for_each(f)
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        let v = &self.flow.vars;
        out.push(("ldelay", v.ldelay.as_millis_f64()));
        out.push(("count", v.count as f64));
        out.push(("dropping", v.dropping as u8 as f64));
    }
}

/// `codel_params_init`'s target and interval.
const DEFAULT_TARGET: Time = Time::from_millis(5);
const DEFAULT_INTERVAL: Time = Time::from_millis(100);

/// CoDel's tc parameters, shared by codel, fq_codel and sfq_codel (with [`ecn`] and, for
/// fq_codel and sfq_codel, [`CE_THRESHOLD_SELECTOR`]).
pub const TARGET: Param = Param::time("target", DEFAULT_TARGET).doc("acceptable standing queue delay");
pub const INTERVAL: Param =
    Param::time("interval", DEFAULT_INTERVAL).doc("window the delay must stay above target; base of the control law");
pub const CE_THRESHOLD: Param = Param::new("ce_threshold", Type::Time, Value::Unset)
    .doc("CE-mark ECN-capable packets whose sojourn exceeds this (step marking); unset: off");
pub const CE_THRESHOLD_SELECTOR: Param = Param::new(
    "ce_threshold_selector",
    Type::Custom { syntax: "VALUE/MASK", parse: parse_selector_value },
    Value::Unset,
)
.doc("apply ce_threshold only to packets with dsfield & MASK == VALUE (bytes, decimal or 0x hex); unset: all");

/// `ecn`/`noecn`, on by default or not.
pub const fn ecn(on: bool) -> Param {
    Param::flag("ecn", on).words(&[("noecn", Value::Bool(false))]).doc("mark ECN-capable packets with CE instead of dropping")
}

impl CodelParams {
    /// The CoDel parameters of `a` (a table with [`TARGET`], [`INTERVAL`], [`ecn`],
    /// [`CE_THRESHOLD`] and optionally [`CE_THRESHOLD_SELECTOR`]). (`mtu` is not a tc
    /// parameter: disciplines set it from the link when they are built.)
    pub fn from_args(a: &Args) -> Self {
        let (ce_threshold_selector, ce_threshold_mask) = match a.get("ce_threshold_selector") {
            Value::Uint(v) => ((v >> 8) as u8, v as u8),
            _ => (0, 0),
        };
        CodelParams {
            target: a.time("target"),
            interval: a.time("interval"),
            ecn: a.flag("ecn"),
            ce_threshold: a.time_opt("ce_threshold"),
            ce_threshold_selector,
            ce_threshold_mask,
            mtu: 0,
            law: Law::Linux,
        }
    }
    /// These parameters on a link whose `psched_mtu` is `mtu` (clamped to [256, 2^20] as
    /// `codel_init` and `fq_codel_init` do).
    pub fn with_mtu(self, mtu: u32) -> Self {
        CodelParams { mtu: mtu.clamp(256, 1 << 20), ..self }
    }
}

/// `ce_threshold_selector VALUE/MASK` as a table value: `VALUE << 8 | MASK`.
fn parse_selector_value(key: &str, v: &str) -> Result<Value, String> {
    let (s, m) = parse_selector(v).map_err(|e| format!("{key}: {e}"))?;
    Ok(Value::Uint((s as u64) << 8 | m as u64))
}

/// `VALUE/MASK` with each a byte in decimal or 0x hex (tc's `ce_threshold_selector`).
fn parse_selector(v: &str) -> Result<(u8, u8), String> {
    let byte = |s: &str| {
        let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => u8::from_str_radix(h, 16),
            None => s.parse::<u8>(),
        };
        r.map_err(|_| format!("'{s}' is not a byte"))
    };
    let (s, m) = v.split_once('/').ok_or_else(|| format!("'{v}' is not VALUE/MASK"))?;
    let (s, m) = (byte(s)?, byte(m)?);
    if s & !m != 0 {
        return Err(format!("value {s:#x} has bits outside mask {m:#x}"));
    }
    Ok((s, m))
}

/// Parsed `codel` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CodelConfig {
    limit: u32,
    /// `mtu` is set from the link at build time.
    codel: CodelParams,
}

impl QdiscConfig for CodelConfig {
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        let params = CodelParams { law: Law::codel(ctx.stack), ..self.codel.with_mtu(ctx.mtu) };
        Box::new(Codel::new(self.limit, params))
    }
}

/// `codel [limit PACKETS] [target TIME] [interval TIME] [ecn|noecn] [ce_threshold TIME]`
/// (Linux defaults: limit 1000, target 5ms, interval 100ms, noecn). `ce_threshold_selector`
/// is rejected: Linux `sch_codel.c` (6.18) has no `TCA_CODEL_CE_THRESHOLD_SELECTOR`; only
/// fq_codel has the selector.
pub const CODEL: QdiscKind = QdiscKind {
    name: "codel",
    doc: "Controlled Delay AQM, one FIFO (sch_codel.c)",
    params: &[
        Param::uint("limit", 1, u32::MAX as u64, 1000)
            .unit("packets")
            .stack_defaults(&[(Stack::Ns2_2013, Value::Uint(50))])
            .doc("queue limit (ns2-2013: ns-default.tcl Queue limit_ 50)"),
        TARGET,
        INTERVAL,
        ecn(false),
        CE_THRESHOLD,
        Param::new("ce_threshold_selector", Type::Absent("Linux codel has no ce_threshold_selector; fq_codel has"), Value::Unset)
            .doc("only fq_codel has it"),
    ],
    build: |a| Ok(Arc::new(CodelConfig { limit: a.u32("limit"), codel: CodelParams::from_args(a) })),
};

/// Synthetic packets and drivers shared by the CoDel-family unit tests.
#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::packet::{Direction, Ecn, Kind};
    use crate::qdisc::Qdisc;

    pub fn pkt(flow: u32, len: u32, seq: u32, ecn: Ecn) -> Packet {
        let mut p = Packet::new(flow, Direction::Forward, Kind::Data, len);
        p.tcp.seq = seq;
        p.ecn = ecn;
        p
    }

    /// Enqueues as the link does (stamping `enqueued_at`).
    pub fn enq(q: &mut dyn Qdisc, mut p: Packet, now: Time) -> Enqueued {
        p.enqueued_at = now;
        q.enqueue(p, now)
    }

    /// The first `n` flow ids (counting from 0) whose packets `classify` puts in distinct
    /// buckets.
    pub fn distinct_flows(classify: impl Fn(&Packet) -> u32, n: usize) -> Vec<u32> {
        let mut seen = Vec::new();
        (0..)
            .filter(|&f| {
                let b = classify(&pkt(f, 100, 0, Ecn::NotEct));
                !seen.contains(&b) && {
                    seen.push(b);
                    true
                }
            })
            .take(n)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use crate::packet::Ecn;
    use crate::qdisc::QdiscSpec;

    const MS: u64 = 1_000_000;

    /// A link of `rate_pps` packets per second of 1514 bytes, offered `load` times its rate
    /// (constant spacing), running for `dur`; returns the times of each drop (or mark) event.
    /// Per-step events: arrivals first, then one dequeue per service slot.
    fn overload(q: &mut Codel, ecn: Ecn, service: Time, arrivals_per_service: u32, dur: Time) -> Vec<Time> {
        let mut events = Vec::new();
        let mut t = Time::ZERO;
        let mut seq = 0;
        while t < dur {
            for _ in 0..arrivals_per_service {
                enq(q, pkt(0, 1514, seq, ecn), t);
                seq += 1;
            }
            let before = (q.stats().drops, q.counters().ecn_mark);
            q.dequeue(t);
            let after = (q.stats().drops, q.counters().ecn_mark);
            for _ in 0..(after.0 - before.0 + after.1 - before.1) {
                events.push(t);
            }
            t += service;
        }
        events
    }

    fn codel(limit: u32, ecn: bool) -> Codel {
        Codel::new(limit, CodelParams { ecn, ..CodelParams::new(1514) })
    }

    /// Linux's 1/sqrt(count) sequence in real arithmetic: one Newton step per count increment,
    /// starting from 1 at count 1.
    fn newton_sequence(n: u32) -> Vec<f64> {
        let mut x = vec![0.0, 1.0];
        for c in 2..=n {
            let p = x[c as usize - 1];
            x.push(p * (3.0 - c as f64 * p * p) / 2.0);
        }
        x
    }

    #[test]
    fn newton_iteration_tracks_inverse_sqrt() {
        let reference = newton_sequence(1000);
        let mut v = CodelVars { count: 1, rec_inv_sqrt: u16::MAX, ..Default::default() };
        for n in 2..=1000u32 {
            v.count = n;
            v.newton_step();
            // The fixed point follows the real-valued iteration ...
            assert!((v.inv_sqrt_count() - reference[n as usize]).abs() < 1e-3, "count {n}");
            // ... which is within 1 % of 1/sqrt(count) from count 7 on. One step from 1 gives
            // 0.5 at count 2 (exact 0.707): Linux schedules the second drop after interval/2.
            let exact = 1.0 / (n as f64).sqrt();
            let err = (v.inv_sqrt_count() - exact).abs() / exact;
            assert!(n < 7 || err < 0.01, "count {n}: {} vs {exact}", v.inv_sqrt_count());
        }
        assert!((reference[2] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn drops_follow_interval_over_sqrt_count() {
        // Two arrivals per service slot of 0.1 ms: the queue grows without bound (limit large),
        // so once dropping starts, every dequeue is above target and drops happen exactly when
        // the control law schedules them (to within the 0.1 ms dequeue grid).
        let mut q = codel(1_000_000, false);
        let service = Time(MS / 10);
        let ev = overload(&mut q, Ecn::NotEct, service, 2, Time::from_secs(3));
        assert!(ev.len() > 60, "{} drops", ev.len());
        // The n-th departure arrived at slot n/2, so the sojourn is t/2: above the 5 ms target
        // from t = 10 ms, and the first drop comes an interval later.
        let first = ev[0].as_millis_f64();
        assert!((first - 110.1).abs() < 0.15, "first drop at {first} ms");
        let linux = newton_sequence(100);
        for (i, w) in ev.windows(2).enumerate().take(60) {
            let count = i + 1; // the gap after the drop that set this count
            let got = (w[1] - w[0]).as_millis_f64();
            let want = 100.0 * linux[count];
            assert!((got - want).abs() <= 0.002 * want + 0.1, "gap {i} (count {count}): {got} ms, want {want} ms");
            let exact = 100.0 / (count as f64).sqrt();
            assert!(count < 7 || (got - exact).abs() <= 0.01 * exact + 0.1, "count {count}: {got} vs {exact}");
        }
        assert!(q.vars().dropping());
    }

    /// Overload, drain, pause, overload again; returns (count reached in the first episode,
    /// count right after re-entering the dropping state).
    fn reentry(pause: Time) -> (u32, u32) {
        let mut q = codel(1_000_000, false);
        let service = Time(MS / 10);
        let mut t = Time::ZERO;
        let mut seq = 0u32;
        // Two arrivals per service slot for 1 s: a dropping episode that starts from count 1.
        while t < Time::from_secs(1) {
            for _ in 0..2 {
                enq(&mut q, pkt(0, 1514, seq, Ecn::NotEct), t);
                seq += 1;
            }
            q.dequeue(t);
            t += service;
        }
        assert!(q.vars().dropping() && q.vars().count() > 5, "count {}", q.vars().count());
        // No arrivals: the queue drains and CoDel leaves the dropping state.
        while !q.is_empty() {
            q.dequeue(t);
            t += service;
        }
        assert!(!q.vars().dropping());
        let c1 = q.vars().count();
        t += pause;
        // Overload again until CoDel re-enters the dropping state.
        loop {
            for _ in 0..2 {
                enq(&mut q, pkt(0, 1514, seq, Ecn::NotEct), t);
                seq += 1;
            }
            q.dequeue(t);
            if q.vars().dropping() {
                return (c1, q.vars().count());
            }
            t += service;
        }
    }

    #[test]
    fn count_recalled_within_16_intervals_and_reset_after() {
        // Re-entry ~0.1 s (first_above wait) after a short pause: count - lastcount (lastcount 1).
        let (c1, c2) = reentry(Time::from_millis(100));
        assert_eq!(c2, c1 - 1);
        // The last drop was more than 16 intervals (1.6 s) before re-entry: count restarts at 1.
        let (_, c2) = reentry(Time::from_millis(1600));
        assert_eq!(c2, 1);
    }

    /// Drives the state machine directly to pin the recall rule exactly.
    #[test]
    fn recall_rule_is_count_minus_lastcount() {
        let p = CodelParams::new(1514);
        let mut f = CodelFlow::default();
        let mut totals = Totals::default();
        let (mut stats, mut ctr) = (QdiscStats::default(), CodelCounters::default());
        // State as after a dropping episode: entered with lastcount 3, reached count 10, left
        // at t = 1 s; last drop scheduled at 1 s.
        f.vars = CodelVars {
            count: 10,
            lastcount: 3,
            dropping: false,
            rec_inv_sqrt: 20724,
            drop_next: Time::from_secs(1),
            ..Default::default()
        };
        // A standing queue: packets enqueued at 0, plus enough backlog to pass the MTU guard.
        let at = |ms: u64| Time(ms * MS);
        for i in 0..10 {
            let mut p = pkt(0, 1514, i, Ecn::NotEct);
            p.enqueued_at = at(1000);
            f.push(p, &mut totals);
        }
        // First above-target observation starts the interval; the next, an interval later, drops.
        assert!(f.dequeue(&p, &mut totals, MtuGuard::Qdisc, at(1100), &mut stats, &mut ctr).is_some());
        assert!(f.dequeue(&p, &mut totals, MtuGuard::Qdisc, at(1201), &mut stats, &mut ctr).is_some());
        assert_eq!(stats.drops, 1);
        assert!(f.vars.dropping);
        assert_eq!(f.vars.count, 7, "10 - 3");
        assert_eq!(f.vars.lastcount, 7);
        // Scheduled at now + interval x (one Newton step from 1/sqrt(10) with count 7), which is
        // 36.4 ms rather than 100/sqrt(7) = 37.8 ms ("next Newton steps will correct it").
        let x = 20724.0 / 65536.0;
        let want = 100.0 * x * (3.0 - 7.0 * x * x) / 2.0;
        let gap = (f.vars.drop_next - at(1201)).as_millis_f64();
        assert!((gap - want).abs() < 0.001 * want, "{gap} vs {want}");

        // Same, but the last scheduled drop was exactly 16 intervals before re-entry (the
        // window is open, `now - drop_next < 16 interval`): restart at 1.
        let mut f2 = CodelFlow {
            vars: CodelVars { drop_next: at(1601), count: 10, lastcount: 3, rec_inv_sqrt: 20724, ..Default::default() },
            ..Default::default()
        };
        let mut totals = Totals::default();
        for i in 0..10 {
            let mut p = pkt(0, 1514, i, Ecn::NotEct);
            p.enqueued_at = at(3000);
            f2.push(p, &mut totals);
        }
        f2.dequeue(&p, &mut totals, MtuGuard::Qdisc, at(3100), &mut stats, &mut ctr);
        f2.dequeue(&p, &mut totals, MtuGuard::Qdisc, at(3201), &mut stats, &mut ctr);
        assert!(f2.vars.dropping);
        assert_eq!(f2.vars.count, 1);
        assert_eq!(f2.vars.drop_next, at(3201) + Time((((100 * MS) as u128 * 0xFFFF_0000u128) >> 32) as u64));
    }

    #[test]
    fn no_drop_while_backlog_at_most_one_mtu() {
        // One packet at a time, each waiting far longer than target: the remaining backlog after
        // dequeue is 0 <= mtu, so CoDel never drops.
        let mut q = codel(1000, false);
        for i in 0..100u64 {
            enq(&mut q, pkt(0, 1514, i as u32, Ecn::NotEct), Time(i * 50 * MS));
            let p = q.dequeue(Time(i * 50 * MS + 40 * MS));
            assert!(p.is_some());
        }
        assert_eq!(q.stats().drops, 0);
        assert_eq!(q.vars().ldelay(), Time(40 * MS));
        // A standing queue with every sojourn (30 ms) above target: with 1 packet left behind
        // each dequeue (backlog 1514 <= mtu) CoDel never drops; with 2 (3028 > mtu) it does.
        for (behind, drops) in [(1u32, false), (2, true)] {
            let mut q = codel(1000, false);
            let step = Time(30 * MS);
            for i in 0..behind {
                enq(&mut q, pkt(0, 1514, i, Ecn::NotEct), Time::ZERO);
            }
            let mut t = Time::ZERO;
            for i in 0..100 {
                enq(&mut q, pkt(0, 1514, i, Ecn::NotEct), t);
                t += step;
                q.dequeue(t);
            }
            assert_eq!(q.stats().drops > 0, drops, "{behind} packets behind the head");
        }
    }

    #[test]
    fn ecn_marks_ect_instead_of_dropping() {
        let service = Time(MS / 10);
        let mut plain = codel(1_000_000, false);
        let drops = overload(&mut plain, Ecn::Ect0, service, 2, Time::from_secs(2));
        let mut q = codel(1_000_000, true);
        let marks = overload(&mut q, Ecn::Ect0, service, 2, Time::from_secs(2));
        assert_eq!(q.stats().drops, 0);
        assert_eq!(q.counters().ecn_mark, marks.len() as u64);
        assert_eq!(q.stats().ce_marks, marks.len() as u64);
        assert!(marks.len() > 20);
        // Marking does not shrink the queue, so the control law keeps firing on schedule: the
        // mark times are those of a queue that is never relieved.
        assert_eq!(marks[0], drops[0]);
        // Not-ECT packets are dropped even with ecn on; ECT(1) is marked like ECT(0).
        let mut q = codel(1_000_000, true);
        overload(&mut q, Ecn::NotEct, service, 2, Time::from_secs(1));
        assert!(q.stats().drops > 0 && q.stats().ce_marks == 0);
        let mut q = codel(1_000_000, true);
        overload(&mut q, Ecn::Ect1, service, 2, Time::from_secs(1));
        assert!(q.stats().drops == 0 && q.stats().ce_marks > 0);
    }

    #[test]
    fn ce_threshold_marks_every_ect_packet_above_it() {
        let mut q = Codel::new(1000, CodelParams { ce_threshold: Some(Time(2 * MS)), ..CodelParams::new(1514) });
        // Sojourns of 1, 3, 1, 3 ... ms; only the 3 ms ones are marked, ECT only.
        let mut marked = 0;
        for i in 0..20u64 {
            let t = Time(i * 10 * MS);
            let ecn = if i % 4 < 2 { Ecn::Ect0 } else { Ecn::NotEct };
            enq(&mut q, pkt(0, 1514, i as u32, ecn), t);
            let wait = if i % 2 == 0 { 1 } else { 3 };
            let p = q.dequeue(t + Time(wait * MS)).unwrap();
            let want = wait == 3 && ecn == Ecn::Ect0;
            assert_eq!(p.ecn == Ecn::Ce, want, "packet {i}");
            marked += want as u64;
        }
        assert_eq!(q.stats().ce_marks, marked);
        assert_eq!(q.counters().ce_mark, marked);
        assert_eq!(q.stats().drops, 0);

        // With a selector of ECT(1) (0x01/0x03), ECT(0) packets are not marked.
        let mut o = CodelParams::new(1514);
        o.ce_threshold = Some(Time(2 * MS));
        (o.ce_threshold_selector, o.ce_threshold_mask) = parse_selector("0x01/0x03").unwrap();
        let mut q = Codel::new(1000, o);
        enq(&mut q, pkt(0, 1514, 0, Ecn::Ect0), Time::ZERO);
        enq(&mut q, pkt(0, 1514, 1, Ecn::Ect1), Time::ZERO);
        assert_eq!(q.dequeue(Time(3 * MS)).unwrap().ecn, Ecn::Ect0);
        assert_eq!(q.dequeue(Time(3 * MS)).unwrap().ecn, Ecn::Ce);
    }

    /// The packet `codel_dequeue` returns around a head drop or mark (include/net/codel_impl.h):
    /// entering the dropping state by dropping a Not-ECT head (with ecn on) sends the next
    /// packet; in the dropping state an ECT head due for a drop is CE-marked and sent itself
    /// (drop_next advanced from drop_next, `goto end`); a Not-ECT head due is dropped and the
    /// next one, if not also due, sent. Expected times follow from the control law.
    #[test]
    fn the_packet_sent_after_a_head_drop_or_mark() {
        let mut q = codel(1000, true);
        let ecn = [Ecn::Ect0, Ecn::NotEct, Ecn::Ect0, Ecn::Ect0, Ecn::NotEct, Ecn::Ect0, Ecn::Ect0, Ecn::Ect0, Ecn::Ect0, Ecn::Ect0];
        for (seq, e) in ecn.iter().enumerate() {
            enq(&mut q, pkt(0, 1514, seq as u32, *e), Time::ZERO);
        }
        let interval = q.cd.params.interval;
        let t_first = Time(10 * MS);
        let p = q.dequeue(t_first).unwrap(); // above target: the interval starts
        assert_eq!((p.tcp.seq, q.stats().drops, q.vars().dropping()), (0, 0, false));
        // An interval later: p1 (Not-ECT) is dropped on entering the dropping state, p2 sent.
        let t_enter = t_first + interval + Time(MS);
        let p = q.dequeue(t_enter).unwrap();
        assert_eq!((p.tcp.seq, p.ecn), (2, Ecn::Ect0));
        assert_eq!((q.stats().drops, q.counters().ecn_mark, q.vars().dropping(), q.vars().count()), (1, 0, true, 1));
        let drop_next = q.flow.vars.drop_next;
        // count 1: 1/sqrt(1) as Linux stores it (~0U >> 16, a hair under 1)
        assert_eq!((q.flow.vars.rec_inv_sqrt, drop_next), (u16::MAX, q.flow.vars.control_law(t_enter, interval)));
        // Past drop_next: p3 (ECT) is marked and is the packet sent; drop_next moves on from
        // drop_next (not from now) at count 2.
        let t_mark = drop_next + Time(MS);
        let p = q.dequeue(t_mark).unwrap();
        assert_eq!((p.tcp.seq, p.ecn), (3, Ecn::Ce));
        assert_eq!((q.stats().drops, q.counters().ecn_mark, q.stats().ce_marks, q.vars().count()), (1, 1, 1, 2));
        let mut v = q.flow.vars.clone();
        assert_eq!(v.drop_next, v.control_law(drop_next, interval));
        // Past it again: p4 (Not-ECT) is dropped, p5 is examined (still above target, so the
        // state stays) and, its own drop not yet due, sent unmarked.
        let t_drop = v.drop_next + Time(MS);
        let p = q.dequeue(t_drop).unwrap();
        assert_eq!((p.tcp.seq, p.ecn), (5, Ecn::Ect0));
        assert_eq!((q.stats().drops, q.counters().ecn_mark, q.vars().count(), q.vars().dropping()), (2, 1, 3, true));
        v.count = 3;
        v.newton_step();
        assert_eq!(q.flow.vars.drop_next, v.control_law(v.drop_next, interval));
        assert!(q.flow.vars.drop_next > t_drop);
        assert_eq!(q.flow.queue.len(), 4);
    }

    /// fq_codel's MTU guard reads the qdisc-wide backlog, so a flow's last packet can be dropped
    /// on entering the dropping state: `dequeue_func` then gives NULL, `codel_should_drop(NULL)`
    /// clears first_above_time, and `codel_dequeue` returns NULL with the state entered
    /// (dropping, count 1, drop_next = the control law from now). With ECN the packet is marked and sent.
    #[test]
    fn a_flows_last_packet_dropped_on_entering_leaves_nothing_to_send() {
        for ecn in [false, true] {
            let mut cd = CodelShared::new(CodelParams { ecn, ..CodelParams::new(1514) });
            let (mut a, mut b) = (CodelFlow::default(), CodelFlow::default());
            for seq in 0..4 {
                let mut p = pkt(1, 1514, seq, Ecn::NotEct);
                p.enqueued_at = Time::ZERO;
                cd.enqueue(&mut b, p);
            }
            for seq in 0..2 {
                let mut p = pkt(0, 1514, seq, Ecn::Ect0);
                p.enqueued_at = Time::ZERO;
                cd.enqueue(&mut a, p);
            }
            let interval = cd.params.interval;
            assert_eq!(cd.dequeue(&mut a, MtuGuard::Qdisc, Time(10 * MS)).unwrap().tcp.seq, 0);
            let now = Time(10 * MS) + interval + Time(MS);
            let got = cd.dequeue(&mut a, MtuGuard::Qdisc, now);
            assert!(a.vars.dropping() && a.vars.count() == 1 && a.vars.rec_inv_sqrt == u16::MAX, "ecn {ecn}");
            assert_eq!(a.vars.drop_next, a.vars.control_law(now, interval));
            if ecn {
                let p = got.expect("marked and sent");
                assert_eq!((p.tcp.seq, p.ecn, cd.stats.drops), (1, Ecn::Ce, 0));
                assert!(a.vars.first_above_time.is_some());
            } else {
                assert!(got.is_none());
                assert_eq!((cd.stats.drops, a.queue.len(), a.backlog), (1, 0, 0));
                assert_eq!(a.vars.first_above_time, None);
                assert_eq!(cd.totals.backlog, 4 * 1514);
            }
            assert_eq!(a.vars.ldelay(), now);
            // Empty: NULL and out of the dropping state.
            assert!(cd.dequeue(&mut a, MtuGuard::Qdisc, now + Time(MS)).is_none());
            assert!(!a.vars.dropping());
        }
    }

    #[test]
    fn tail_drops_at_limit() {
        let mut q = codel(3, false);
        for i in 0..5 {
            let r = enq(&mut q, pkt(0, 1514, i, Ecn::NotEct), Time::ZERO);
            assert_eq!(r, if i < 3 { Enqueued::Queued } else { Enqueued::Dropped });
        }
        assert_eq!((q.len(), q.backlog_bytes(), q.stats().overlimits), (3, 3 * 1514, 2));
    }

    #[test]
    fn tc_strings() {
        let dbg = |s: &str| format!("{:?}", QdiscSpec::parse(s).unwrap());
        assert_eq!(
            QdiscSpec::parse("codel").unwrap(),
            QdiscSpec::parse("codel limit 1000 target 5ms interval 100ms noecn").unwrap()
        );
        let d = dbg("codel limit 200 target 1ms interval 20ms ecn ce_threshold 500us");
        assert!(
            d.contains("limit: 200") && d.contains("ecn: true") && d.contains("ce_threshold: Some(Time(500000))"),
            "{d}"
        );
        assert!(dbg("codel target 2500").contains("target: Time(2500000)"), "bare number is us");
        // Linux's plain codel has no selector (sch_codel.c 6.18); fq_codel has it.
        let e = QdiscSpec::parse("codel ce_threshold 1ms ce_threshold_selector 0x01/0x03").unwrap_err();
        assert!(e.contains("has no parameter 'ce_threshold_selector'") && e.contains("fq_codel"), "{e}");
        assert!(dbg("fq_codel ce_threshold 1ms ce_threshold_selector 0x01/0x03").contains("ce_threshold_mask: 3"));
        let e = QdiscSpec::parse("codel target fast").unwrap_err();
        assert!(e.contains("target"), "{e}");
        assert!(QdiscSpec::parse("codel flows 2").unwrap_err().contains("flows"));
        assert!(QdiscSpec::parse("codel limit 0").is_err());
        assert!(QdiscSpec::parse("fq_codel ce_threshold_selector 3/1").unwrap_err().contains("ce_threshold_selector"));
    }

    // ---- the ns-2 laws of the ns2-2013 profile ----

    #[test]
    fn ns2_profile_defaults_and_laws() {
        use crate::profile::Stack;
        for kind in ["codel", "sfq_codel", "pie"] {
            assert_eq!(QdiscSpec::parse_for(kind, Stack::Ns2_2013).unwrap().args().uint("limit"), 50, "{kind}");
            assert_eq!(QdiscSpec::parse(kind).unwrap().args().uint("limit"), 1000, "{kind}");
        }
        assert_eq!(Law::codel(Stack::Ns2_2013), Law::Ns2CodelPatch);
        assert_eq!(Law::sfq(Stack::Ns2_2013), Law::Ns2Sfq2013);
        for s in Stack::ALL.into_iter().filter(|&s| s != Stack::Ns2_2013) {
            assert_eq!((Law::codel(s), Law::sfq(s)), (Law::Linux, Law::Linux), "{s}");
        }
    }

    fn ns2(law: Law) -> Codel {
        Codel::new(1000, CodelParams { law, ..CodelParams::new(1514) })
    }

    /// 100 packets of 1040 bytes queued at t = 0, one dequeue every 10 ms from 10 ms: the
    /// times (ms) at which a dequeue dropped.
    fn drop_times(q: &mut Codel, until_ms: u64) -> Vec<u64> {
        for i in 0..100 {
            enq(q, pkt(1, 1040, i, Ecn::NotEct), Time::ZERO);
        }
        let mut out = vec![];
        for k in 1..=until_ms / 10 {
            let before = q.stats().drops;
            q.dequeue(Time::from_millis(10 * k));
            if q.stats().drops > before {
                out.push(10 * k);
            }
        }
        out
    }

    /// By hand: the sojourn exceeds 5 ms from the first dequeue, so first_above = 110 ms and
    /// ns-2 drops at 110 (now >= first_above; Linux waits for now > 110: the dequeue at 120).
    /// Then drop_next = 110 + 100/sqrt(1) = 210, 210 + 100/sqrt(2) = 280.71, + 100/sqrt(3) =
    /// 338.45, + 50 = 388.45, + 44.72 = 433.17, + 40.82 = 473.99: drops at the first dequeue
    /// at or after each.
    #[test]
    fn ns2_drop_times_follow_interval_over_exact_sqrt() {
        for law in [Law::Ns2CodelPatch, Law::Ns2Codel2013, Law::Ns2Sfq2013] {
            let mut q = ns2(law);
            assert_eq!(drop_times(&mut q, 500), [110, 210, 290, 340, 390, 440, 480], "{law:?}");
            // 7 drops, the 7th scheduled by count 7 (both counting rules agree while dropping).
            assert_eq!(q.vars().count, 7, "{law:?}");
        }
        let mut l = ns2(Law::Linux);
        assert_eq!(drop_times(&mut l, 130)[0], 120, "Linux enters at now > first_above_time");
    }

    /// Re-entry within 8 intervals of the last drop time resumes at count - 2 (count > 2), and
    /// codel.cc decays a resumed count above 126 to 0.9844 (count + 2); sfqcodel.cc does not.
    /// Later, or with count <= 2, count restarts at 1.
    #[test]
    fn ns2_reentry_rules() {
        let now = Time::from_secs(10);
        let cases = [
            (Law::Ns2Codel2013, 10, 500, 8),
            (Law::Ns2Codel2013, 10, 900, 1),
            (Law::Ns2Codel2013, 2, 100, 1),
            (Law::Ns2Codel2013, 200, 100, 196), // 0.9844 x 200 = 196.88
            (Law::Ns2Sfq2013, 200, 100, 198),
            (Law::Ns2Sfq2013, 10, 799, 8),
            // The patch: count - 1 within 16 intervals (1.6 s), no decay.
            (Law::Ns2CodelPatch, 10, 1500, 9),
            (Law::Ns2CodelPatch, 10, 1700, 1),
            (Law::Ns2CodelPatch, 200, 100, 199),
            (Law::Ns2CodelPatch, 1, 100, 1),
        ];
        for (law, count, ago_ms, want) in cases {
            let mut q = ns2(law);
            for i in 0..10 {
                enq(&mut q, pkt(1, 1040, i, Ecn::NotEct), now - Time::from_millis(50));
            }
            let v = &mut q.flow.vars;
            v.count = count;
            v.drop_next = now - Time::from_millis(ago_ms);
            v.first_above_time = Some(now);
            q.dequeue(now);
            assert!(q.vars().dropping(), "{law:?} {count} {ago_ms}");
            assert_eq!(q.vars().count, want, "{law:?} count {count}, last drop {ago_ms} ms ago");
            let next = now + Time((100e6 / (want as f64).sqrt()) as u64);
            assert_eq!(q.vars().drop_next, next);
            assert_eq!(q.stats().drops, 1);
        }
    }

    /// codel.cc: going above target within 8 intervals of the last drop (count > 1) opens the
    /// dropping window after interval / sqrt(count), not a full interval.
    #[test]
    fn ns2_codel_first_above_window_shrinks_after_recent_drops() {
        let now = Time::from_secs(10);
        for (law, want) in [(Law::Ns2Codel2013, 50_000_000u64), (Law::Ns2Sfq2013, 100_000_000), (Law::Ns2CodelPatch, 100_000_000)] {
            let mut q = ns2(law);
            for i in 0..10 {
                enq(&mut q, pkt(1, 1040, i, Ecn::NotEct), now - Time::from_millis(50));
            }
            q.flow.vars.count = 4;
            q.flow.vars.drop_next = now - Time::from_millis(300);
            q.dequeue(now);
            assert_eq!(q.flow.vars.first_above_time, Some(now + Time(want)), "{law:?}");
        }
    }

    /// The guard is the largest packet seen (from 256 bytes), not the MTU: with 600-byte
    /// packets, two queued (1200 bytes after a dequeue of three) may be dropped in ns-2 but
    /// not in Linux (1514).
    #[test]
    fn ns2_guard_is_the_largest_packet_seen() {
        for (law, drops) in [(Law::Ns2CodelPatch, true), (Law::Ns2Codel2013, true), (Law::Linux, false)] {
            let mut q = ns2(law);
            let mut t = Time::ZERO;
            let mut dropped = false;
            // Three 600-byte packets queued, each dequeued after 20 ms; refilled to three.
            for i in 0..100 {
                while q.len() < 3 {
                    enq(&mut q, pkt(1, 600, i, Ecn::NotEct), t);
                }
                t += Time::from_millis(20);
                q.dequeue(t);
                dropped |= q.stats().drops > 0;
            }
            assert_eq!(dropped, drops, "{law:?}");
        }
    }
}
