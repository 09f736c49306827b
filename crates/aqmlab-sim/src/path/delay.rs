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
/// one. Packets leave in exit-time order, those due at the same instant in arrival order,
/// kept one of two ways:
///
/// - A ring sorted by exit time (`line`), where a packet is placed after every packet due
///   at or before it: the tail (always without jitter or with one host path), or, found
///   stepping back from the tail 1, 2, 4, ... entries and bisecting, as far as the jitter
///   reaches, with the entries behind it moved. Cheap while few packets leave within the
///   jitter's reach (50 us by default: 4 packets at 1 Gbit/s), and it reads in order.
/// - Once the moves cost more than [`MOVES_PER_ARRIVAL`] entries per arrival (over at least
///   [`MOVE_WINDOW`] arrivals), the lanes merged ([`Merge`]): the packets stay where they
///   arrived, each lane a FIFO linked through them, and a heap of the lanes' heads keyed by
///   (exit, arrival number) gives the next to leave, so no packet is moved behind others.
///   At 100 Gbit/s about 400 packets leave within the jitter's reach and a late packet
///   moved hundreds of 72-byte entries (session 9, `r1000`: 1,131 instructions and 16 L1
///   misses per bottleneck packet); the merge costs O(log lanes) per packet instead. The
///   line goes back to the sorted ring when fewer than [`ARRIVALS_PER_REACH`] packets
///   arrive within the jitter's reach (a late packet overtakes at most those): 10,000 flows
///   at 1 Gbit/s move many entries per arrival in their first round trips only.
///
/// Either way the exit order and instants, and the wake-ups, are the same
/// (docs/performance.md, "Session 10: the shared delay line's lanes (s10-lanes)"). Session 7
/// measured a 16-byte (exit, slot) index sorted over a slab, or over a ring in arrival
/// order: it cut cachegrind's L1 misses at 10,000 flows but saved no CPU time at 1 Gbit/s,
/// where the moves are short and sequential (a hardware prefetcher hides them) and the index
/// cost instructions at every packet; hence the sorted ring until the moves are long.
#[derive(Debug)]
pub struct DelayLine {
    delay: Time,
    /// The packets in exit order; empty once the lanes are merged ([`Lanes::merge`] holds
    /// them then).
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
    /// Per lane: a line the endpoints share.
    Lanes(Lanes),
}

/// The lanes of a shared line, and how its packets are ordered.
#[derive(Debug)]
struct Lanes {
    /// Lane `2 * endpoint id + direction` ([`lane`]) is slot `lane - first`. Slots span this
    /// line's own lanes only, not every endpoint id below them (endpoints of distinct delays
    /// would otherwise cost n^2 slots).
    first: usize,
    slots: Vec<Option<HostJitter>>,
    /// Entries the sorted inserts have moved since the arrival numbered `window_start` (only
    /// those of more than [`SHORT_SHIFT`]).
    moved: usize,
    window_start: usize,
    /// The packets once the lanes are merged (`None`: in the sorted ring).
    merge: Option<Merge>,
}

/// Sorted inserts moving more than this many entries per arrival (counting only inserts
/// that move more than [`SHORT_SHIFT`]) merge the lanes instead.
const MOVES_PER_ARRIVAL: usize = 32;
/// Merged lanes go back to the sorted ring when fewer packets than this arrive within the
/// jitter's reach: a late packet can only overtake those, so the ring's moves per arrival
/// would be fewer (hysteresis below [`MOVES_PER_ARRIVAL`]).
const ARRIVALS_PER_REACH: u64 = 16;
/// Arrivals over which the moves, or the arrivals' density, are counted (one burst of late
/// packets does not switch).
const MOVE_WINDOW: usize = 4096;

/// The jitter lane of a packet on a shared line: its endpoint and direction.
#[inline]
fn lane(flow: u32, dir: Direction) -> usize {
    2 * flow as usize + dir as usize
}

/// A packet's lane among merged lanes ([`Merge`]): its jitter lane's slot, or for packets
/// without a jitter lane of their own (they leave at `now + delay`, in arrival order) one
/// lane more, after the slots.
#[inline]
fn merged_lane(first: usize, slots: &[Option<HostJitter>], pkt: &Packet) -> usize {
    let i = lane(pkt.flow, pkt.dir).wrapping_sub(first);
    if matches!(slots.get(i), Some(Some(_))) {
        i
    } else {
        slots.len()
    }
}

impl DelayLine {
    pub fn new(delay: Time) -> Self {
        // Grows (doubling) when full; shrinks back after a burst (`ExitRing::lap`).
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
        let lanes = self.jitter.get_or_insert_with(|| Box::new(Jitter::Lanes(Lanes { first: i, slots: Vec::new(), moved: 0, window_start: 0, merge: None })));
        let Jitter::Lanes(Lanes { first, slots, merge: None, .. }) = &mut **lanes else {
            panic!("a workload's line has one host path, not lanes, and lanes are added before packets")
        };
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
            Some(Jitter::Lanes(l)) => l.slots.len(),
            _ => 0,
        }
    }
    pub(crate) fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        let mut due = ctx.now + self.delay;
        match self.jitter.as_deref_mut() {
            None => {}
            Some(Jitter::One(j)) => due = j.departure(ctx.now, due),
            Some(Jitter::Lanes(l)) => {
                if let Some(Some(j)) = lane(pkt.flow, pkt.dir).checked_sub(l.first).and_then(|i| l.slots.get_mut(i)) {
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
        match self.line.back() {
            Some(b) if b.0 <= due => self.line.push_back((due, pkt)),
            Some(_) => self.insert_sorted(due, pkt),
            None => self.place_without_tail(due, pkt),
        }
    }
    /// Places a packet when the sorted ring is empty: its first, or (the ring stays empty
    /// then) on the merged lanes. Not inlined: the sorted ring's test for its tail is the
    /// only one its packets pass (instructions of scenario (a) unchanged).
    #[inline(never)]
    fn place_without_tail(&mut self, due: Time, pkt: Packet) {
        match self.jitter.as_deref_mut() {
            Some(Jitter::Lanes(Lanes { first, slots, merge: Some(m), .. })) => {
                m.push(merged_lane(*first, slots, &pkt), due, pkt);
                if m.ring.end().wrapping_sub(m.window_start) >= MOVE_WINDOW && m.sparse(due) {
                    self.unmerge_lanes();
                }
            }
            _ => self.line.push_back((due, pkt)),
        }
    }
    /// Places a packet due before the tail after every packet due at or before it: steps
    /// back from the tail 1, 2, 4, ... entries until one is due at or before it, then
    /// bisects the last step (at 10,000 flows the place is often tens of entries back: a
    /// scan back one entry at a time cost ~300 instructions per bottleneck packet). Merges
    /// the lanes when the moves grow too long (only lanes' packets arrive late).
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
        let moved = self.line.len() - hi;
        self.line.insert(hi, (due, pkt));
        if moved > SHORT_SHIFT {
            self.count_moves(moved);
        }
    }
    /// Counts the entries a sorted insert moved (one of more than [`SHORT_SHIFT`]: the short
    /// moves cost little and never call for merging), and merges the lanes once they are more
    /// than [`MOVES_PER_ARRIVAL`] per arrival over at least [`MOVE_WINDOW`] arrivals.
    fn count_moves(&mut self, moved: usize) {
        let Some(Jitter::Lanes(l)) = self.jitter.as_deref_mut() else { return };
        l.moved += moved;
        let arrivals = self.line.end().wrapping_sub(l.window_start);
        if arrivals >= MOVE_WINDOW {
            if l.moved > MOVES_PER_ARRIVAL * arrivals {
                self.merge_lanes();
            } else {
                l.moved = 0;
                l.window_start = self.line.end();
            }
        }
    }
    /// Moves the line's packets from the sorted ring to merged lanes, where they keep their
    /// slots: their positions in exit order serve as their arrival numbers (any later
    /// arrival has a higher one and, among them, ties leave in ring order as before).
    #[cold]
    #[inline(never)]
    fn merge_lanes(&mut self) {
        let Some(Jitter::Lanes(l)) = self.jitter.as_deref_mut() else { unreachable!("only a line with lanes merges them") };
        let ring = std::mem::replace(&mut self.line, ExitRing::new());
        let reach = l.slots.iter().flatten().map(HostJitter::max).max().unwrap_or(Time::ZERO);
        let (window_start, window_due) = (ring.end(), ring.back().map_or(Time::ZERO, |b| b.0));
        let mut m = Merge { next: vec![NO_LINK; ring.slots.len()].into_boxed_slice(), tails: vec![usize::MAX; l.slots.len() + 1].into_boxed_slice(), heads: Vec::new(), held: ring.len, ring, reach, window_start, window_due };
        for i in 0..m.ring.len {
            let pos = m.ring.head.wrapping_add(i);
            let (due, pkt) = m.ring.at(pos);
            m.link(merged_lane(l.first, &l.slots, pkt), *due, pos);
        }
        l.merge = Some(m);
    }
    /// Moves merged lanes' packets back to a sorted ring, in the order they would leave.
    #[cold]
    #[inline(never)]
    fn unmerge_lanes(&mut self) {
        let Some(Jitter::Lanes(l)) = self.jitter.as_deref_mut() else { unreachable!("only a line with lanes merges them") };
        let mut m = l.merge.take().expect("merged");
        while let Some(&key) = m.heads.first() {
            let pos = key as usize;
            self.line.push_back(*m.ring.at(pos));
            m.leave(pos);
        }
        l.moved = 0;
        l.window_start = self.line.end();
    }
    pub(crate) fn wake(&mut self, ctx: &mut ElementCtx) {
        if ctx.now != self.wake {
            // Superseded: an earlier wake-up ran and asked for the one now pending.
            return;
        }
        self.wake = NONE;
        if self.line.len() == 0 {
            // A wake-up due is for a packet on the line: merged lanes hold it.
            return self.wake_merged(ctx);
        }
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
    /// [`DelayLine::wake`] once the lanes are merged: the lanes' heads in (exit, arrival)
    /// order.
    #[inline(never)]
    fn wake_merged(&mut self, ctx: &mut ElementCtx) {
        let Some(Jitter::Lanes(Lanes { merge: Some(m), .. })) = self.jitter.as_deref_mut() else { return };
        while let Some(&key) = m.heads.first() {
            let (due, pos) = (Time((key >> 64) as u64), key as usize);
            if due > ctx.now {
                self.wake = due;
                ctx.wake_at(due);
                return;
            }
            ctx.out.extend_from_slice(std::slice::from_ref(&m.ring.at(pos).1));
            m.leave(pos);
        }
    }
    fn merged(&self) -> Option<&Merge> {
        match self.jitter.as_deref() {
            Some(Jitter::Lanes(Lanes { merge: Some(m), .. })) => Some(m),
            _ => None,
        }
    }
    /// Packets on the line.
    pub fn held(&self) -> usize {
        self.line.len() + self.merged().map_or(0, |m| m.held)
    }
    pub fn for_each_held(&self, f: &mut dyn FnMut(&Packet)) {
        self.line.iter().for_each(|(_, p)| f(p));
        if let Some(m) = self.merged() {
            (0..m.ring.len).map(|i| m.ring.head.wrapping_add(i)).filter(|&pos| m.link_at(pos).after != GONE).for_each(|pos| f(&m.ring.at(pos).1));
        }
    }
}

/// No next packet of the lane (yet).
const LAST: u32 = 0;
/// The slot's packet has left (before older ones: the ring's head has not passed it).
const GONE: u32 = u32::MAX;

/// What follows a merged line's packet in its lane: kept apart from the 72-byte entries,
/// 4 to a cache line, so that a lane's links and the next head's exit time are read
/// without touching the packets (the ring's entries are written once and read once).
#[derive(Debug, Clone, Copy)]
struct Link {
    /// Positions to the next packet of the lane ([`LAST`]: none yet; [`GONE`]: this one left).
    after: u32,
    /// That packet's exit time.
    next_due: Time,
}
const NO_LINK: Link = Link { after: LAST, next_due: Time::ZERO };

/// A line's packets merged by lane: in arrival order in a ring from the oldest still on
/// the line, each lane a FIFO linked through them, and a heap of the lanes' heads. A
/// packet's position (the ring's `head` + its index, never reused) is its arrival number,
/// which orders packets due at the same instant. A packet that leaves before older ones
/// keeps its slot, its link marked [`GONE`], until the ring's head passes it: the ring spans
/// the arrivals within the jitter's reach beyond the packets held.
#[derive(Debug)]
struct Merge {
    ring: ExitRing,
    /// Per ring slot: its packet's [`Link`] to the next of its lane.
    next: Box<[Link]>,
    /// Per lane (the last: packets without jitter): the position of its latest arrival, on
    /// the line or not ([`usize::MAX`]: none yet).
    tails: Box<[usize]>,
    /// A binary min-heap of the non-empty lanes' heads: exit time (high 64 bits) and
    /// position, one integer compared at once.
    heads: Vec<u128>,
    /// Packets on the line (the ring also spans those that left).
    held: usize,
    /// The largest jitter bound of the lanes: how far apart in arrival two packets that
    /// leave out of arrival order can be.
    reach: Time,
    /// The position and exit time of the arrival the density is counted from.
    window_start: usize,
    window_due: Time,
}

/// A heap key: exit time, then position (arrival number).
#[inline]
fn key(due: Time, pos: usize) -> u128 {
    (due.0 as u128) << 64 | pos as u128
}

impl Merge {
    /// Adds a packet of lane `own` due at `due`, never before the lane's previous one.
    #[inline]
    fn push(&mut self, own: usize, due: Time, pkt: Packet) {
        if self.ring.len == self.ring.slots.len() {
            self.grow();
        }
        let pos = self.ring.end();
        let slot = pos & (self.ring.slots.len() - 1);
        self.ring.slots[slot] = (due, pkt);
        self.next[slot] = NO_LINK;
        self.ring.len += 1;
        self.held += 1;
        self.link(own, due, pos);
    }
    /// Appends the packet at `pos` (on the ring) to lane `own`: after the lane's latest
    /// packet if that is still on the line, else as the lane's head.
    #[inline(always)]
    fn link(&mut self, own: usize, due: Time, pos: usize) {
        let tail = self.tails[own];
        self.tails[own] = pos;
        let mask = self.ring.slots.len() - 1;
        if tail.wrapping_sub(self.ring.head) < self.ring.len && self.next[tail & mask].after != GONE {
            debug_assert!(self.ring.at(tail).0 <= due, "a lane is a FIFO");
            self.next[tail & mask] = Link { after: (pos - tail) as u32, next_due: due };
        } else {
            self.push_head(key(due, pos));
        }
    }
    /// Forgets the packet at `pos`, the heads' first (the caller has copied it out): its
    /// lane's next packet, if any, becomes the lane's head.
    #[inline]
    fn leave(&mut self, pos: usize) {
        let mask = self.ring.slots.len() - 1;
        let link = self.next[pos & mask];
        self.next[pos & mask].after = GONE;
        self.held -= 1;
        if pos == self.ring.head {
            // The ring starts at the oldest packet still on the line.
            self.ring.drop_front();
            while self.ring.len != 0 && self.next[self.ring.head & mask].after == GONE {
                self.ring.drop_front();
            }
        }
        if link.after == LAST {
            let last = self.heads.pop().expect("the packet's lane is in the heap");
            if !self.heads.is_empty() {
                self.sift_down(last);
            }
        } else {
            self.sift_down(key(link.next_due, pos + link.after as usize));
        }
    }
    /// The link of the packet at position `pos`.
    fn link_at(&self, pos: usize) -> Link {
        self.next[pos & (self.ring.slots.len() - 1)]
    }
    /// Whether fewer than [`ARRIVALS_PER_REACH`] packets arrived within the jitter's reach
    /// over the arrivals since the window's start (the arrival due at `due` the last; exit
    /// times stand for arrival times, within the reach); starts the next window.
    #[cold]
    fn sparse(&mut self, due: Time) -> bool {
        let arrivals = self.ring.end().wrapping_sub(self.window_start) as u64;
        let span = due.0.saturating_sub(self.window_due.0);
        self.window_start = self.ring.end();
        self.window_due = due;
        arrivals.saturating_mul(self.reach.0) < ARRIVALS_PER_REACH.saturating_mul(span)
    }
    /// Puts `key` at the heap's root, in the place of the root, and moves it down to its
    /// place. The lesser child is picked by index arithmetic, not a branch: which one it is
    /// is a coin toss, and a mispredicted branch per level cost more CPU time than the
    /// sorted ring's moves saved.
    #[inline]
    fn sift_down(&mut self, key: u128) {
        let h = &mut self.heads[..];
        let n = h.len();
        let mut i = 0;
        loop {
            let c = 2 * i + 1;
            if c + 1 >= n {
                if c < n && h[c] < key {
                    h[i] = h[c];
                    i = c;
                }
                break;
            }
            let c = c + (h[c + 1] < h[c]) as usize;
            let least = h[c];
            if key < least {
                break;
            }
            h[i] = least;
            i = c;
        }
        h[i] = key;
    }
    /// Adds a lane's head to the heap.
    #[inline]
    fn push_head(&mut self, key: u128) {
        self.heads.push(key);
        let h = &mut self.heads[..];
        let mut i = h.len() - 1;
        while i > 0 && key < h[(i - 1) / 2] {
            h[i] = h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        h[i] = key;
    }
    /// Twice the ring's (and links') slots, every packet at the same position.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let old = self.ring.slots.len() - 1;
        self.ring.grow();
        let mut next = vec![NO_LINK; self.ring.slots.len()].into_boxed_slice();
        let mask = next.len() - 1;
        for i in 0..self.ring.len {
            let pos = self.ring.head.wrapping_add(i);
            next[pos & mask] = self.next[pos & old];
        }
        self.next = next;
    }
}

/// The packets on a line and their exit times: a ring whose size is a power of two,
/// indexed by a position masked to the size (issue 15: `VecDeque`'s wrap-around test on
/// every index, its growth check and the copy of each popped 72-byte entry through its
/// return value were about a fifth of the line's per-packet cost). Grows by doubling when
/// full; a line's sorted ring shrinks back when it holds few entries for its size and
/// packets arrive late ([`ExitRing::lap`]). In exit order on a line's sorted ring; in
/// arrival order in [`Merge`].
#[derive(Debug)]
struct ExitRing {
    slots: Box<[(Time, Packet)]>,
    /// Position of the head: its slot is `head & (size - 1)`; the tail's is `head + len`.
    /// Positions keep their entries when the ring grows.
    head: usize,
    len: usize,
}

/// Entries an insert moves one by one; more move as contiguous runs (`ExitRing::insert`).
const SHORT_SHIFT: usize = 4;

/// The fewest slots of a ring.
const MIN_SLOTS: usize = 4;

/// A late packet's insert whose tail lands in the ring's first this many slots counts as
/// the end of a lap ([`ExitRing::lap`]).
const LAP_SLOTS: usize = 64;

impl ExitRing {
    fn new() -> Self {
        ExitRing { slots: Self::empty_slots(MIN_SLOTS), head: 0, len: 0 }
    }
    fn empty_slots(n: usize) -> Box<[(Time, Packet)]> {
        vec![(Time::ZERO, Packet::new(0, Direction::Forward, crate::packet::Kind::Data, 0)); n].into_boxed_slice()
    }
    fn len(&self) -> usize {
        self.len
    }
    /// The position after the tail: the next entry's.
    #[inline]
    fn end(&self) -> usize {
        self.head.wrapping_add(self.len)
    }
    /// The entry at position `pos` (from `head` to `head + len`).
    #[inline]
    fn at(&self, pos: usize) -> &(Time, Packet) {
        &self.slots[pos & (self.slots.len() - 1)]
    }
    #[inline]
    fn at_mut(&mut self, pos: usize) -> &mut (Time, Packet) {
        let mask = self.slots.len() - 1;
        &mut self.slots[pos & mask]
    }
    /// The `i`-th entry from the head (`i < len`).
    #[inline]
    fn get(&self, i: usize) -> &(Time, Packet) {
        self.at(self.head.wrapping_add(i))
    }
    #[inline]
    fn slot_mut(&mut self, i: usize) -> &mut (Time, Packet) {
        self.at_mut(self.head.wrapping_add(i))
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
    /// Near the end of a lap of the ring (a late packet's insert whose tail lands in the
    /// first [`LAP_SLOTS`] slots): shrinks the ring to the fewest slots that hold twice its
    /// entries when that is an eighth of its slots at most.
    ///
    /// Issue 15, session 14: a ring grows to the most packets its line ever held, in slow
    /// start's first round trip, and stayed that size: f1000's forward line (10,000 packets
    /// in its first 100 ms, 800 on average and at most about 1,600 afterwards) kept 16,384
    /// slots, 1.2 MB walked round by the entries written, more than the 1 MiB L2 alone; at
    /// 2,048 slots they stay within 150 KB. The entries held now stand for the lap's (which
    /// the ring does not track: a maximum kept at every append cost 11 instructions per
    /// packet in (a)); the margins (shrink at 1/8 full, to at most 1/2 full) make a ring that
    /// shrinks grow back within a lap only when the line's load rises fourfold, and keep
    /// f10's (826 packets on average in 2,048 slots) and (a)'s as they are.
    ///
    /// Only the insert (cold: a quarter to a half of a jittered line's arrivals at 1,000
    /// flows, none on a line without jitter) tests for it: the test at every append, a
    /// mask and a branch, left (a) 1-3 % slower in CPU time. So a line whose packets never
    /// arrive late (one without jitter, or with one host path) keeps its largest ring, as
    /// every line did before.
    #[cold]
    #[inline(never)]
    fn lap(&mut self) {
        let fit = (2 * self.len).next_power_of_two().max(MIN_SLOTS);
        if 4 * fit <= self.slots.len() {
            self.resize(fit);
        }
    }
    /// Puts `e` at index `at` (`at <= len`), moving the entries from there on one slot back.
    /// They move a contiguous run of slots at a time (one `memmove` each, as `VecDeque`'s
    /// insert does), from the tail: a late packet at 100 Gbit/s goes behind hundreds of others
    /// (session 9, `r1000`), and slot-by-slot masked copies cost twice `VecDeque`'s.
    fn insert(&mut self, at: usize, e: (Time, Packet)) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        // The entries from `at` on move one slot back, the tail's into the slot after it; the
        // new entry is then written once, into its place (session 11: a `push_back` of it at
        // the tail first was one more 72-byte copy per late packet).
        let mut count = self.len - at;
        self.len += 1;
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
        if self.end() & mask < LAP_SLOTS {
            self.lap();
        }
    }
    /// Twice the slots, each entry at the same position.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.resize(2 * self.slots.len());
    }
    /// `n` slots (a power of two, at least the entries held), each entry at the same position.
    fn resize(&mut self, n: usize) {
        let mut slots = Self::empty_slots(n);
        let mask = n - 1;
        for i in 0..self.len {
            let pos = self.head.wrapping_add(i);
            slots[pos & mask] = *self.at(pos);
        }
        self.slots = slots;
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

    /// A ring that grew in a burst shrinks, at a late packet's insert near the end of a lap,
    /// down to twice what it holds and not below, with every entry kept in order through the
    /// copy; a ring more than an eighth full never shrinks, and appends alone never do.
    #[test]
    fn a_ring_grown_in_a_burst_shrinks_back_keeping_its_entries() {
        let pkt = |seq: u32| {
            let mut p = Packet::new(0, Direction::Forward, Kind::Data, 100);
            p.tcp.seq = seq;
            (Time(seq as u64), p)
        };
        let mut r = ExitRing::new();
        let (mut pushed, mut popped) = (0u32, 0u32);
        let pop = |r: &mut ExitRing, popped: &mut u32| {
            assert_eq!(r.front().map(|e| e.1.tcp.seq), Some(*popped), "in order");
            r.drop_front();
            *popped += 1;
        };
        // A late packet: placed before the tail, then the two renumbered to keep the order.
        let late = |r: &mut ExitRing, pushed: &mut u32| {
            r.push_back(pkt(*pushed));
            r.insert(r.len() - 1, pkt(*pushed + 1));
            let n = r.len();
            r.slot_mut(n - 2).1.tcp.seq = *pushed;
            r.slot_mut(n - 1).1.tcp.seq = *pushed + 1;
            *pushed += 2;
        };
        // A burst of 10,000, then a steady 100 held: 16,384 slots, kept while only appends
        // come, then 256 once late packets come within a lap.
        while pushed < 10_000 {
            r.push_back(pkt(pushed));
            pushed += 1;
        }
        assert_eq!(r.slots.len(), 16_384);
        while r.len() > 100 {
            pop(&mut r, &mut popped);
        }
        for _ in 0..20_000 {
            r.push_back(pkt(pushed));
            pushed += 1;
            pop(&mut r, &mut popped);
        }
        assert_eq!(r.slots.len(), 16_384, "appends do not shrink");
        for _ in 0..10_000 {
            late(&mut r, &mut pushed);
            pop(&mut r, &mut popped);
            pop(&mut r, &mut popped);
        }
        assert_eq!(r.slots.len(), 256, "twice 100 held, a power of two");
        // Holding 100 rising to 157 of 256 slots, then about 157: it stays.
        for k in 0..20_000 {
            late(&mut r, &mut pushed);
            pop(&mut r, &mut popped);
            if k % 2 == 0 || r.len() > 156 {
                pop(&mut r, &mut popped);
            }
        }
        assert_eq!(r.slots.len(), 256);
        while r.len() > 0 {
            pop(&mut r, &mut popped);
        }
        assert_eq!(popped, pushed);
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

    /// Runs `arrivals` (time, flow, direction) through `line`, merging its lanes before the
    /// arrival numbered `merge_at` (if any) and back to a sorted ring before `unmerge_at`
    /// (if any), checking at each arrival that it holds every
    /// packet not yet out; returns each packet's (exit time, arrival number) in exit order
    /// and the wake-ups run.
    fn drive(line: &mut DelayLine, arrivals: &[(u64, u32, Direction)], merge_at: Option<usize>, unmerge_at: Option<usize>) -> (Vec<(Time, u32)>, u64) {
        let (mut q, mut out, mut got) = (EventQueue::default(), Vec::new(), Vec::new());
        let wake = |line: &mut DelayLine, q: &mut EventQueue, out: &mut Vec<Packet>, got: &mut Vec<(Time, u32)>, until: u64| {
            while q.peek_time().is_some_and(|w| w.0 < until) {
                let (w, _) = q.pop().unwrap();
                line.wake(&mut ElementCtx { id: 0, now: w, events: q, out });
                got.extend(out.drain(..).map(|p| (w, p.tcp.seq)));
            }
        };
        for (seq, &(t, f, dir)) in arrivals.iter().enumerate() {
            wake(line, &mut q, &mut out, &mut got, t);
            if merge_at == Some(seq) {
                line.merge_lanes();
            }
            if unmerge_at == Some(seq) {
                line.unmerge_lanes();
            }
            let mut p = Packet::new(f, dir, Kind::Data, 100);
            p.tcp.seq = seq as u32;
            line.receive(p, &mut ElementCtx { id: 0, now: Time(t), events: &mut q, out: &mut out });
            let mut n = 0;
            line.for_each_held(&mut |_| n += 1);
            assert_eq!((line.held(), n), (seq + 1 - got.len(), seq + 1 - got.len()), "packets held");
        }
        wake(line, &mut q, &mut out, &mut got, u64::MAX);
        assert_eq!(line.held(), 0);
        (got, q.processed())
    }

    /// Merged lanes give the exit order of a plain sort by (exit time, arrival) of the exits
    /// separate lanes give (each lane's own stream, packets without a lane at `now +
    /// delay`), with the wake-ups of the sorted ring, whenever the merge starts (and ends,
    /// back to a sorted ring): for random
    /// lane counts, jitter bounds, rates (bursts at one instant and gaps of 0 to `gap` ns)
    /// and lanes with no jitter.
    #[test]
    fn merged_lanes_leave_as_a_sort_by_exit_and_arrival() {
        let mut rng = Stream::new(11, "merge");
        let delay = Time::from_millis(1);
        for case in 0..40 {
            let flows = 1 + (rng.uniform() * 60.0) as u32;
            let max = Time((rng.uniform() * 80_000.0) as u64);
            let gap = 1 + (rng.uniform() * 20_000.0) as u64;
            let n = 3_000;
            let mut t = 0;
            let arr: Vec<(u64, u32, Direction)> = (0..n)
                .map(|_| {
                    if rng.uniform() < 0.5 {
                        t += (rng.uniform() * gap as f64) as u64;
                    }
                    let dir = if rng.uniform() < 0.5 { Direction::Forward } else { Direction::Reverse };
                    (t, (rng.uniform() * flows as f64) as u32, dir)
                })
                .collect();
            // Lanes for most flows and directions; the rest pass without jitter.
            let jittered: Vec<(u32, Direction)> = (0..flows).flat_map(|f| [(f, Direction::Forward), (f, Direction::Reverse)]).filter(|_| rng.uniform() < 0.8).collect();
            let jitter = |f: u32, dir: Direction| HostJitter::new(max, Stream::new(case, &format!("jitter/{f}/{}", dir as u8)));
            let new_line = || {
                let mut line = DelayLine::new(delay);
                jittered.iter().for_each(|&(f, dir)| line.with_lane_jitter(f, dir, jitter(f, dir)));
                line
            };
            // The reference: each packet's exit from its own lane's stream, sorted.
            let mut lanes: Vec<((u32, Direction), HostJitter)> = jittered.iter().map(|&(f, dir)| ((f, dir), jitter(f, dir))).collect();
            let mut expect: Vec<(Time, u32)> = arr
                .iter()
                .enumerate()
                .map(|(seq, &(t, f, dir))| {
                    let due = Time(t) + delay;
                    let due = lanes.iter_mut().find(|l| l.0 == (f, dir)).map_or(due, |l| l.1.departure(Time(t), due));
                    (due, seq as u32)
                })
                .collect();
            expect.sort();
            let (sorted, wakes) = drive(&mut new_line(), &arr, None, None);
            assert_eq!(sorted, expect, "case {case}: sorted ring");
            let at = |rng: &mut Stream, from: usize| from + (rng.uniform() * (n - from) as f64) as usize;
            let merge_at = at(&mut rng, 1);
            for (merge_at, unmerge_at) in [(0, None), (merge_at, None), (merge_at, Some(at(&mut rng, merge_at + 1)))] {
                let mut line = new_line();
                let got = drive(&mut line, &arr, Some(merge_at), unmerge_at);
                assert_eq!(line.merged().is_some(), unmerge_at.is_none());
                assert_eq!(got, (expect.clone(), wakes), "case {case}: merged before arrival {merge_at}, back before {unmerge_at:?}");
            }
        }
    }

    /// A line merges its lanes by itself when late packets move many entries (many lanes,
    /// jitter spanning many arrivals), keeps its sorted ring when they move few, and goes
    /// back to it when packets arrive sparsely again.
    #[test]
    fn lanes_merge_while_the_sorted_inserts_would_move_many_entries() {
        let n = 3 * MOVE_WINDOW as u64;
        // (flows, ns between arrivals; then, from arrival `n`, between arrivals)
        for (flows, gap, later) in [(200, 100, None), (13, 40_000, None), (200, 100, Some(20_000))] {
            let mut line = DelayLine::new(Time::from_millis(1));
            for f in 0..flows {
                line.with_lane_jitter(f, Direction::Forward, HostJitter::new(Time::from_micros(50), Stream::new(1, &format!("jitter/{f}"))));
            }
            let times = (0..n).map(|k| k * gap).chain((1..=later.map_or(0, |_| n)).map(|k| (n - 1) * gap + k * later.unwrap_or(0)));
            let arr: Vec<(u64, u32, Direction)> = times.enumerate().map(|(k, t)| (t, k as u32 % flows, Direction::Forward)).collect();
            let mut merged = Vec::new();
            let mut line_seen = |line: &DelayLine| merged.push(line.merged().is_some());
            line_seen(&line);
            let (got, _) = drive(&mut line, &arr[..n as usize], None, None);
            line_seen(&line);
            let (more, _) = drive(&mut line, &arr[n as usize..], None, None);
            line_seen(&line);
            let expect = match (gap, later) {
                (100, None) => [false, true, true],
                (100, Some(_)) => [false, true, false],
                _ => [false, false, false],
            };
            assert_eq!(merged, expect, "{flows} lanes, a packet every {gap} ns, then every {later:?} ns");
            // Through the switches the line made itself, the exits of separate lanes sorted by
            // (exit, arrival): each batch (drained before the next) on its own, the lanes'
            // streams going on from one batch to the next as the line's do.
            let mut streams: Vec<HostJitter> = (0..flows).map(|f| HostJitter::new(Time::from_micros(50), Stream::new(1, &format!("jitter/{f}")))).collect();
            let mut reference = |batch: &[(u64, u32, Direction)]| {
                let mut e: Vec<(Time, u32)> = batch.iter().enumerate().map(|(seq, &(t, f, _))| (streams[f as usize].departure(Time(t), Time(t) + Time::from_millis(1)), seq as u32)).collect();
                e.sort();
                e
            };
            assert_eq!(got, reference(&arr[..n as usize]), "{flows} lanes, every {gap} ns: exits");
            assert_eq!(more, reference(&arr[n as usize..]), "{flows} lanes, then every {later:?} ns: exits");
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
