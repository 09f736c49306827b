//! A constant propagation delay: one direction of a flow's base RTT, a shared link's own
//! delay. The endpoints' own base delays of equal length share one line (`build.rs`).

use super::ElementCtx;
use crate::host::HostJitter;
use crate::packet::{Direction, Packet};
use crate::time::Time;

/// No wake-up pending.
const NONE: Time = Time(u64::MAX);

/// A constant propagation delay, with the timing noise of the hosts that hand packets to it.
///
/// One line serves every endpoint whose own base delay (one direction's half of its RTT)
/// has this length, per travel direction (issue 15): with 1000 flows, 2000 per-flow lines
/// were 2000 small rings scattered over memory and 2000 wake-ups pending in the event queue
/// milliseconds ahead (whose descent through the radix heap made every pop dearer); a line
/// per distinct delay and way keeps the packets in flight in one ring, read in order, and
/// one wake-up pending.
///
/// Exit times are those of separate per-flow lines: a packet leaves at `now + delay`, plus
/// its host's jitter drawn from that endpoint's and direction's own stream (its *lane*,
/// [`crate::host::HostJitter`]: never before the lane's previous departure, so each lane
/// stays a FIFO). Jitter from different lanes can put a later packet ahead of an earlier
/// one, so the ring is kept sorted by exit time: a packet is inserted after every packet
/// due at or before it: usually the tail (always without jitter); otherwise found stepping
/// back from the tail 1, 2, 4, ... entries and bisecting, as far as the jitter reaches (50 us
/// of arrivals by default; at 10,000 flows a scan back one entry at a time cost ~300
/// instructions per bottleneck packet). Packets due at the same instant leave in arrival
/// order.
///
/// The packets stay inline in the sorted ring, and a packet placed before the tail moves
/// the entries behind it. Session 7 measured the alternatives: a 16-byte (exit, slot) index
/// over a slab, or over a ring in arrival order, cut cachegrind's L1 misses at 10,000 flows
/// by 12-14 % but saved no CPU time reliably at any flow count (the slab cost more at 10 and
/// 1000 flows): the moves are sequential, which a hardware prefetcher hides, while the
/// index costs instructions at every packet (docs/performance.md, "Session 7: delay lines
/// and timers").
#[derive(Debug)]
pub struct DelayLine {
    delay: Time,
    line: ExitRing,
    /// The earliest wake-up pending in the event queue ([`NONE`]: none). An arrival that
    /// becomes the head before it (only with jitter) asks for an earlier one; the later
    /// entry then finds `wake` moved and does nothing.
    wake: Time,
    /// Boxed: the line stays 56 bytes, so an element stays one cache line.
    jitter: Option<Box<Jitter>>,
}

/// The host timing noise a line applies (the line right after a host: an endpoint's own
/// base delay).
#[derive(Debug)]
enum Jitter {
    /// One host path for every packet: a workload's line (its transfers share its route).
    One(HostJitter),
    /// Per lane `2 * endpoint id + direction` ([`lane`]), from lane `first` on: a line the
    /// endpoints share. Slots span this line's own lanes only, not every endpoint id below
    /// them (endpoints of distinct delays would otherwise cost n^2 slots).
    Lanes { first: usize, slots: Vec<Option<HostJitter>> },
}

/// The jitter lane of a packet on a shared line: its endpoint and direction.
#[inline]
fn lane(flow: u32, dir: Direction) -> usize {
    2 * flow as usize + dir as usize
}

impl DelayLine {
    pub fn new(delay: Time) -> Self {
        // Grows (doubling) to the most packets the line has held.
        DelayLine { delay, line: ExitRing::new(), wake: NONE, jitter: None }
    }
    /// Adds the timing noise of the host that hands every packet of this line over.
    pub fn with_jitter(&mut self, jitter: HostJitter) {
        self.jitter = Some(Box::new(Jitter::One(jitter)));
    }
    /// Adds the timing noise of the host that hands over endpoint `flow`'s packets of
    /// direction `dir` (a line the endpoints share).
    pub fn with_lane_jitter(&mut self, flow: u32, dir: Direction, jitter: HostJitter) {
        let i = lane(flow, dir);
        let lanes = self.jitter.get_or_insert_with(|| Box::new(Jitter::Lanes { first: i, slots: Vec::new() }));
        let Jitter::Lanes { first, slots } = &mut **lanes else { panic!("a workload's line has one host path, not lanes") };
        if i < *first {
            // Lanes below the first so far (the build adds them in id order: not reached).
            slots.splice(0..0, (i..*first).map(|_| None));
            *first = i;
        }
        if slots.len() <= i - *first {
            slots.resize_with(i - *first + 1, || None);
        }
        slots[i - *first] = Some(jitter);
    }
    pub fn delay(&self) -> Time {
        self.delay
    }
    /// The jitter lane slots this line holds (used or not).
    #[cfg(test)]
    pub(crate) fn lane_slots(&self) -> usize {
        match self.jitter.as_deref() {
            Some(Jitter::Lanes { slots, .. }) => slots.len(),
            _ => 0,
        }
    }
    pub(crate) fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        let mut due = ctx.now + self.delay;
        match self.jitter.as_deref_mut() {
            None => {}
            Some(Jitter::One(j)) => due = j.departure(ctx.now, due),
            Some(Jitter::Lanes { first, slots }) => {
                if let Some(Some(j)) = lane(pkt.flow, pkt.dir).checked_sub(*first).and_then(|i| slots.get_mut(i)) {
                    due = j.departure(ctx.now, due);
                }
            }
        }
        self.place(due, pkt);
        if due < self.wake {
            self.wake = due;
            ctx.wake_at(due);
        }
    }
    /// Places a packet after every packet due at or before `due`: usually (always without
    /// jitter) at the tail.
    #[inline]
    fn place(&mut self, due: Time, pkt: Packet) {
        if self.line.back().map_or(true, |b| b.0 <= due) {
            self.line.push_back((due, pkt));
        } else {
            self.insert_sorted(due, pkt);
        }
    }
    /// Places a packet due before the tail after every packet due at or before it: steps
    /// back from the tail 1, 2, 4, ... entries until one is due at or before it, then
    /// bisects the last step (at 10,000 flows the place is often tens of entries back: a
    /// scan back one entry at a time cost ~300 instructions per bottleneck packet).
    #[cold]
    #[inline(never)]
    fn insert_sorted(&mut self, due: Time, pkt: Packet) {
        let o = &self.line;
        // `o.get(hi)` is due after `due`; `o.get(lo - 1)` (when lo > 0) at or before it.
        let (mut lo, mut hi, mut step) = (0, o.len() - 1, 1);
        while step <= hi {
            if o.get(hi - step).0 <= due {
                lo = hi - step + 1;
                break;
            }
            hi -= step;
            step *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if o.get(mid).0 <= due {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.line.insert(hi, (due, pkt));
    }
    pub(crate) fn wake(&mut self, ctx: &mut ElementCtx) {
        if ctx.now != self.wake {
            // Superseded: an earlier wake-up ran and asked for the one now pending.
            return;
        }
        self.wake = NONE;
        // The head's due time is read first, then its packet copied straight from its slot
        // into the outbox: not through a popped entry, nor (as `push` does, holding the value
        // across its possible growth) through the stack.
        while let Some(&(due, _)) = self.line.front() {
            if due > ctx.now {
                self.wake = due;
                ctx.wake_at(due);
                return;
            }
            ctx.out.extend_from_slice(std::slice::from_ref(&self.line.get(0).1));
            self.line.drop_front();
        }
    }
    /// Packets on the line.
    pub fn held(&self) -> usize {
        self.line.len()
    }
    pub fn for_each_held(&self, f: &mut dyn FnMut(&Packet)) {
        self.line.iter().for_each(|(_, p)| f(p))
    }
}

/// The packets on a line and their exit times, in exit order: a ring whose size is a power
/// of two, indexed by a position masked to the size (issue 15: `VecDeque`'s wrap-around
/// test on every index, its growth check and the copy of each popped 72-byte entry through
/// its return value were about a fifth of the line's per-packet cost). Grows by doubling to
/// the most packets the line has held.
/// Entries an insert moves one by one; more move as contiguous runs (`ExitRing::insert`).
const SHORT_SHIFT: usize = 4;

#[derive(Debug)]
struct ExitRing {
    slots: Box<[(Time, Packet)]>,
    /// Position of the head: its slot is `head & (size - 1)`; the tail's is `head + len`.
    head: usize,
    len: usize,
}

impl ExitRing {
    fn new() -> Self {
        ExitRing { slots: Self::empty_slots(4), head: 0, len: 0 }
    }
    fn empty_slots(n: usize) -> Box<[(Time, Packet)]> {
        vec![(Time::ZERO, Packet::new(0, Direction::Forward, crate::packet::Kind::Data, 0)); n].into_boxed_slice()
    }
    fn len(&self) -> usize {
        self.len
    }
    /// The `i`-th entry from the head (`i < len`).
    #[inline]
    fn get(&self, i: usize) -> &(Time, Packet) {
        &self.slots[self.head.wrapping_add(i) & (self.slots.len() - 1)]
    }
    #[inline]
    fn slot_mut(&mut self, i: usize) -> &mut (Time, Packet) {
        let mask = self.slots.len() - 1;
        &mut self.slots[self.head.wrapping_add(i) & mask]
    }
    #[inline]
    fn front(&self) -> Option<&(Time, Packet)> {
        (self.len != 0).then(|| self.get(0))
    }
    #[inline]
    fn back(&self) -> Option<&(Time, Packet)> {
        (self.len != 0).then(|| self.get(self.len - 1))
    }
    /// Forgets the head (the caller has copied it out).
    #[inline]
    fn drop_front(&mut self) {
        self.head = self.head.wrapping_add(1);
        self.len -= 1;
    }
    #[inline]
    fn push_back(&mut self, e: (Time, Packet)) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = self.len;
        *self.slot_mut(i) = e;
        self.len += 1;
    }
    /// Puts `e` at index `at` (`at <= len`), moving the entries from there on one slot back.
    /// They move a contiguous run of slots at a time (one `memmove` each, as `VecDeque`'s
    /// insert does), from the tail: a late packet at 100 Gbit/s goes behind hundreds of others
    /// (session 9, `r1000`), and slot-by-slot masked copies cost twice `VecDeque`'s.
    fn insert(&mut self, at: usize, e: (Time, Packet)) {
        self.push_back(e);
        let mask = self.slots.len() - 1;
        let mut count = self.len - 1 - at;
        if count <= SHORT_SHIFT {
            // Most late packets land a few places back: slot-by-slot copies cost less there
            // than a `memmove` call.
            for i in (at..self.len - 1).rev() {
                *self.slot_mut(i + 1) = *self.get(i);
            }
            count = 0;
        }
        while count > 0 {
            let last = self.head.wrapping_add(at + count - 1) & mask;
            if last == mask {
                // The last slot's entry moves to slot 0, across the wrap.
                self.slots[0] = self.slots[mask];
                count -= 1;
            } else {
                let run = count.min(last + 1);
                self.slots.copy_within(last + 1 - run..=last, last + 2 - run);
                count -= run;
            }
        }
        *self.slot_mut(at) = e;
    }
    /// Twice the slots, the entries moved to the start in order.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let mut slots = Self::empty_slots(2 * self.slots.len());
        for (i, s) in slots.iter_mut().take(self.len).enumerate() {
            *s = *self.get(i);
        }
        self.slots = slots;
        self.head = 0;
    }
    fn iter(&self) -> impl Iterator<Item = &(Time, Packet)> {
        (0..self.len).map(|i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventQueue};
    use crate::packet::Kind;
    use crate::rng::Stream;

    /// Runs `arrivals` (time, flow, direction) through `lines` (one per flow and direction
    /// when `shared` is false, else one) and returns each packet's (exit time, flow,
    /// direction, sequence) in exit order.
    fn run(shared: bool, arrivals: &[(u64, u32, Direction)], flows: u32, jitter: Time) -> Vec<(Time, u32, u8, u32)> {
        let delay = Time::from_millis(10);
        let n = if shared { 1 } else { 2 * flows as usize };
        let mut lines: Vec<DelayLine> = (0..n).map(|_| DelayLine::new(delay)).collect();
        for f in 0..flows {
            for dir in [Direction::Forward, Direction::Reverse] {
                let j = HostJitter::new(jitter, Stream::new(7, &format!("jitter/{f}/{}", dir as u8)));
                if shared {
                    lines[0].with_lane_jitter(f, dir, j);
                } else {
                    lines[lane(f, dir)].with_jitter(j);
                }
            }
        }
        let mut q = EventQueue::default();
        let mut out = Vec::new();
        let mut got = Vec::new();
        let mut seq = 0;
        let mut next = arrivals.iter().peekable();
        loop {
            // Arrivals at an instant come before the wake-ups due then (the engine's order
            // differs, but exit times must not depend on it).
            let t_arr = next.peek().map(|a| a.0);
            let t_ev = q.peek_time().map(|t| t.0);
            match (t_arr, t_ev) {
                (None, None) => break,
                (Some(a), e) if e.map_or(true, |e| a <= e) => {
                    let &(t, f, dir) = next.next().unwrap();
                    let mut p = Packet::new(f, dir, Kind::Data, 100);
                    p.tcp.seq = seq;
                    seq += 1;
                    let id = if shared { 0 } else { lane(f, dir) as u32 };
                    lines[id as usize].receive(p, &mut ElementCtx { id, now: Time(t), events: &mut q, out: &mut out });
                }
                _ => {
                    let (t, ev) = q.pop().unwrap();
                    let Event::Element(id) = ev else { panic!("{ev:?}") };
                    lines[id as usize].wake(&mut ElementCtx { id, now: t, events: &mut q, out: &mut out });
                    got.extend(out.drain(..).map(|p| (t, p.flow, p.dir as u8, p.tcp.seq)));
                }
            }
        }
        assert!(lines.iter().all(|l| l.held() == 0));
        got
    }

    fn arrivals(flows: u32, n: usize) -> Vec<(u64, u32, Direction)> {
        let mut rng = Stream::new(3, "arrivals");
        let mut t = 0;
        (0..n)
            .map(|_| {
                // Bursts at one instant (a GSO skb), gaps from 0 to 40 us.
                if rng.uniform() < 0.6 {
                    t += (rng.uniform() * 40_000.0) as u64;
                }
                let f = (rng.uniform() * flows as f64) as u32;
                let dir = if rng.uniform() < 0.5 { Direction::Forward } else { Direction::Reverse };
                (t, f, dir)
            })
            .collect()
    }

    /// One line shared by every flow and direction gives every packet the exit time the
    /// separate per-flow jittered lines give it (same streams), loses none, keeps each
    /// lane's order, and emits in exit-time order (ties in arrival order).
    #[test]
    fn a_shared_line_exits_each_packet_when_separate_lines_do() {
        let (flows, jitter) = (13, Time::from_micros(50));
        let arr = arrivals(flows, 20_000);
        let shared = run(true, &arr, flows, jitter);
        let separate = run(false, &arr, flows, jitter);
        assert_eq!(shared.len(), arr.len(), "conservation");
        let exit = |v: &[(Time, u32, u8, u32)]| {
            let mut by_seq = vec![Time::ZERO; arr.len()];
            v.iter().for_each(|e| by_seq[e.3 as usize] = e.0);
            by_seq
        };
        assert_eq!(exit(&shared), exit(&separate), "every packet's exit time");
        // Jitter did reorder packets of different lanes (the sort is exercised) ...
        assert!(shared.windows(2).any(|w| w[1].3 < w[0].3));
        for w in shared.windows(2) {
            // ... the exits are in time order, ties in arrival order ...
            assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].3 < w[1].3), "{w:?}");
        }
        // ... and each lane is a FIFO.
        for f in 0..flows {
            for d in 0..2 {
                let seqs: Vec<u32> = shared.iter().filter(|e| e.1 == f && e.2 == d).map(|e| e.3).collect();
                assert!(seqs.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }

    /// Without jitter a shared line is a FIFO at exactly `now + delay`, with one wake-up per
    /// distinct exit instant (the per-flow lines had one per flow and instant).
    #[test]
    fn a_shared_line_without_jitter_wakes_once_per_instant() {
        let arr = arrivals(50, 5_000);
        let got = run(true, &arr, 50, Time::ZERO);
        let expect: Vec<(Time, u32)> = arr.iter().enumerate().map(|(s, a)| (Time(a.0) + Time::from_millis(10), s as u32)).collect();
        assert_eq!(got.iter().map(|e| (e.0, e.3)).collect::<Vec<_>>(), expect);
        let mut q = EventQueue::default();
        let (mut line, mut out) = (DelayLine::new(Time::from_millis(10)), Vec::new());
        for &(t, f, dir) in &arr {
            line.receive(Packet::new(f, dir, Kind::Data, 100), &mut ElementCtx { id: 0, now: Time(t), events: &mut q, out: &mut out });
            while q.peek_time().is_some_and(|w| w.0 <= t) {
                let (w, _) = q.pop().unwrap();
                line.wake(&mut ElementCtx { id: 0, now: w, events: &mut q, out: &mut out });
            }
        }
        while let Some((w, _)) = q.pop() {
            line.wake(&mut ElementCtx { id: 0, now: w, events: &mut q, out: &mut out });
        }
        let mut instants: Vec<u64> = arr.iter().map(|a| a.0).collect();
        instants.dedup();
        assert_eq!(q.processed(), instants.len() as u64);
        assert_eq!(out.len(), arr.len());
    }

    /// The exit order is a stable sort by exit time, however far back an arrival lands
    /// and however many packets share its instant (checked against `sort_by_key`, with
    /// exit times from a few values so ties abound, and spreads up to 2000 entries back).
    #[test]
    fn placing_keeps_exit_order_stable_whatever_the_distance() {
        let mut rng = Stream::new(5, "place");
        // Packet `seq` placed mostly in order, landing up to `spread` instants back.
        let mut arrive = |line: &mut DelayLine, expect: &mut Vec<(Time, u32)>, seq: u32, spread: u64| {
            let due = Time(seq as u64 + (rng.uniform() * spread as f64) as u64);
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 100);
            p.tcp.seq = seq;
            line.place(due, p);
            expect.push((due, seq));
        };
        for spread in [3u64, 40, 2000] {
            let mut line = DelayLine::new(Time::ZERO);
            let mut expect = Vec::new();
            for seq in 0..5_000u32 {
                arrive(&mut line, &mut expect, seq, spread);
            }
            expect.sort_by_key(|e| e.0);
            assert_eq!(line.line.iter().map(|e| (e.0, e.1.tcp.seq)).collect::<Vec<_>>(), expect, "spread {spread}");
            // Drained from the head, then more arrivals: the ring wraps, and grows while wrapped.
            for _ in 0..4_000 {
                line.line.drop_front();
            }
            for seq in 5_000..13_000u32 {
                arrive(&mut line, &mut expect, seq, spread);
            }
            let mut rest = expect.split_off(4_000);
            rest.sort_by_key(|e| e.0);
            assert_eq!(line.line.iter().map(|e| (e.0, e.1.tcp.seq)).collect::<Vec<_>>(), rest, "spread {spread}, wrapped");
        }
    }

    /// Lanes added out of id order: the slots grow at either end, each lane keeps its own
    /// stream, and a flow without a lane passes without jitter.
    #[test]
    fn lanes_added_out_of_order_keep_their_streams() {
        let (delay, max) = (Time::from_millis(10), Time::from_micros(50));
        let jitter = |f: u32| HostJitter::new(max, Stream::new(7, &format!("jitter/{f}")));
        let mut line = DelayLine::new(delay);
        line.with_lane_jitter(5, Direction::Forward, jitter(5));
        line.with_lane_jitter(2, Direction::Reverse, jitter(2));
        line.with_lane_jitter(9, Direction::Forward, jitter(9));
        assert_eq!(line.lane_slots(), lane(9, Direction::Forward) - lane(2, Direction::Reverse) + 1);
        let (mut q, mut out) = (EventQueue::default(), Vec::new());
        let mut expect = Vec::new();
        for (k, (f, dir)) in [(5, Direction::Forward), (2, Direction::Reverse), (9, Direction::Forward), (1, Direction::Forward)].into_iter().enumerate() {
            let now = Time(k as u64 * 1_000_000);
            line.receive(Packet::new(f, dir, Kind::Data, 100), &mut ElementCtx { id: 0, now, events: &mut q, out: &mut out });
            let due = if f == 1 { now + delay } else { jitter(f).departure(now, now + delay) };
            expect.push((due, f));
        }
        let mut got = Vec::new();
        while let Some((t, _)) = q.pop() {
            line.wake(&mut ElementCtx { id: 0, now: t, events: &mut q, out: &mut out });
            got.extend(out.drain(..).map(|p| (t, p.flow)));
        }
        assert!((0..3).all(|k| expect[k].0 > Time(k as u64 * 1_000_000) + delay), "each lane drew its jitter");
        assert_eq!(expect[3].0, Time(3_000_000) + delay, "no lane, no jitter");
        assert_eq!(got, expect);
    }
}
