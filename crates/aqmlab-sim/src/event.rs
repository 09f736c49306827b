//! The event queue, ordered by (time, insertion sequence), so events at the same instant run
//! in the order they were scheduled and every run is deterministic.

use crate::time::Time;

/// What happens when an event fires. Small and `Copy`: packets never ride in events;
/// path elements hold their own packets and ask to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A path element (link, delay line) has work due.
    Element(u32),
    /// A flow's timer of the given kind.
    Flow(u32, FlowTimer),
    /// A scheduled change of a shared link (index into the run's change list).
    LinkChange(u32),
    /// The metrics sampling grid.
    Sample,
    /// End of the run.
    End,
}

/// Timers an endpoint pair owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowTimer {
    Start,
    Stop,
    Retransmit,
    DelayedAck,
    Pacing,
    /// RACK reordering-window timer (RFC 8985 §6.2).
    Reorder,
    /// A latency probe's next request.
    ProbeSend,
    /// A media source's next video frame, its paced transmission, its receiver's feedback.
    MediaFrame,
    MediaPace,
    MediaFeedback,
    /// An unresponsive UDP source's next transmission (a frame, a paced packet, a CBR packet).
    UdpSend,
}

/// One pending event, ordered by `(at, seq)` as one 128-bit key.
#[derive(Clone, Copy, Debug)]
struct Entry {
    at: Time,
    seq: u64,
    event: Event,
}

/// The queue's total order as one 128-bit key: time first, then scheduling sequence.
#[inline(always)]
fn order_key(at: Time, seq: u64) -> u128 {
    ((at.0 as u128) << 64) | seq as u128
}

impl Entry {
    #[inline(always)]
    fn key(&self) -> u128 {
        order_key(self.at, self.seq)
    }
}

/// One pending `Event::Element` wake-up, with the same `(at, seq)` key it would have had
/// in the radix heap.
#[derive(Clone, Copy, Debug)]
struct Wake {
    at: Time,
    seq: u64,
    element: u32,
}

impl Wake {
    #[inline(always)]
    fn key(&self) -> u128 {
        order_key(self.at, self.seq)
    }
}

/// The most entries a radix heap bucket may hold for its minimum to be popped without
/// advancing `last` and redistributing the others (which would move each into a lower bucket,
/// to be scanned there by the next pop anyway): up to this many, a pop takes the minimum out
/// and the next pop scans the same bucket. At 1000 flows the radix heap holds ~2,000 flow
/// timers far ahead (RTO 200 ms and more, delayed ACKs 40 ms), and each pop redistributed about
/// 11 of them: each entry was inserted 6.6 times over its life.
const SCAN_IN_PLACE: usize = 16;

/// The word of [`EventQueue`]'s bucket mask and the bit in it that stand for bucket `b`
/// (1..=128).
#[inline(always)]
fn mask_bit(b: usize) -> (usize, u64) {
    let i = b - 1;
    ((i >> 6) & 1, 1 << (i & 63))
}

/// The most element wake-ups [`EventQueue`] keeps as a sorted list (a schedule moves up to
/// this many entries); beyond, a heap.
const SORTED_WAKES: usize = 8;

/// Deterministic future-event list, ordered by `(time, insertion sequence)`.
///
/// Two structures share one sequence counter and so one total order:
///
/// - Path elements' wake-ups (`Event::Element`: a serialiser's end, a delay line's next
///   exit, netem's watchdog; 2.5 of the 2.6 events per bottleneck packet of a dumbbell) sit
///   in [`EventQueue::wakes`], ordered by their `(at, seq)` keys. It holds one entry per
///   pending wake-up, so as many as there are elements with work due (a handful of links
///   and delay lines, more with per-flow netem), plus the rare superseded wake-up still
///   pending (an element that asked for an earlier one; it pops, counts in
///   [`EventQueue::processed`] and is ignored by the element, as before). While at most
///   [`SORTED_WAKES`] are pending (a dumbbell has two to four) they are a list sorted
///   latest first: a pop takes the last entry, a schedule moves the entries due before it
///   up by one (a link's next serialisation end is usually the earliest: no move; a delay
///   line's next exit usually the latest: all of them). The first time more are pending
///   the list becomes a binary min-heap for good (reversed, a sorted list is one), where a
///   schedule and a pop are O(log n).
/// - Every other event (flow timers, sampling, link changes, the end) sits in a radix heap
///   (Ahuja, Mehlhorn, Orlin, Tarjan 1990) on the 128-bit key `(at, seq)`: the engine never
///   schedules into the past, and the sequence number grows with every schedule, so every
///   key scheduled is larger than the last one popped, which is all a radix heap needs.
///   Entry `e` sits in bucket `128 - lzcnt(key(e) ^ last)` (the highest bit in which it
///   differs from `last`, a key at or below every key in the radix heap: the last one it
///   popped, or an earlier one); a pop takes the lowest non-empty bucket's smallest entry
///   and, if that bucket holds more than [`SCAN_IN_PLACE`] entries, makes the popped key
///   `last` and redistributes the bucket's others into lower buckets. Schedules are O(1)
///   and an entry moves down a few buckets in its lifetime (1000 flows' timers pending
///   would be about 12 levels of a binary heap).
///
/// A pop takes whichever of the two minima has the smaller key. Keys are unique (one
/// counter), so the sequence of pops is the single-queue order exactly: every tie at an
/// instant resolves by scheduling order as before, and runs are unchanged. The element
/// wake-ups left the radix heap because the heap's pop of its lowest bucket (scan, then
/// redistribution of the bucket's other entries) cost more than a sift through a heap of
/// a few entries.
#[derive(Debug)]
pub struct EventQueue {
    /// Pending element wake-ups while they are few: `sorted[..sorted_len]`, sorted by
    /// [`Wake::key`], latest first. A fixed array, so that a schedule's moves and a pop need
    /// no bounds checks and no growth test.
    sorted: [Wake; SORTED_WAKES],
    sorted_len: usize,
    /// Pending element wake-ups once more than [`SORTED_WAKES`] were pending (`wakes_heap`):
    /// a binary min-heap on [`Wake::key`].
    wakes: Vec<Wake>,
    /// The wake-ups are in `wakes`, for good; before, in `sorted`.
    wakes_heap: bool,
    /// Heap only: the root of `wakes` was popped (its event returned) but is still in
    /// place: the next wake-up scheduled overwrites it and sifts down (a woken link or delay line usually
    /// asks for its next wake-up in the event it was woken for, and that one replace costs
    /// less than a removal's sift-down followed by an insertion's sift-up); otherwise the
    /// next pop removes it first.
    spent_root: bool,
    /// `buckets[i]` for i in 1..=128; `buckets[0]` stays empty (keys are unique, and the one
    /// equal to `last` has been popped).
    /// A fixed-size array, not a `Vec`: a bucket's index (`128 - lzcnt`) is in range by
    /// construction, so an insert needs no bounds check. Boxed, an allocation of the old
    /// `Vec`'s size: inline, its 3 KB left the heap, which moved every later allocation of
    /// the run and with them the cache sets of f10's per-flow state (cachegrind: f10 +4.7 %
    /// L1 misses, in code this change did not touch).
    buckets: Box<[Vec<Entry>; 129]>,
    /// Bit `(i - 1) % 64` of word `(i - 1) / 64` set: `buckets[i]` is not empty. Two words,
    /// not a `u128`: a `u128` shifted by a variable count is six instructions at every insert.
    mask: [u64; 2],
    /// The radix heap's reference key: every key in it is above. The key of the entry it
    /// popped last, or of an earlier one while pops took their entries out of a bucket of at
    /// most [`SCAN_IN_PLACE`] without redistributing it.
    last: u128,
    /// The radix heap's smallest key (`u128::MAX` when it is empty) and its bucket and index:
    /// kept up to date on every schedule and pop, so popping a wake-up (most pops) compares
    /// with it without scanning the lowest bucket, which holds the flow timers that the
    /// radix heap, popping rarely, no longer spreads into lower buckets.
    radix_min: (u128, usize, usize),
    /// Entries in the radix heap.
    len: usize,
    next_seq: u64,
    popped: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue::with_capacity(0)
    }
}

impl EventQueue {
    pub fn with_capacity(n: usize) -> Self {
        let mut buckets: Box<[Vec<Entry>; 129]> = Box::new(std::array::from_fn(|_| Vec::new()));
        // The far buckets take the initial events (flow starts, the end of the run).
        buckets[128].reserve(n);
        // Sequence numbers start at 1, so every key is above the initial `last` of 0.
        EventQueue {
            sorted: [Wake { at: Time::ZERO, seq: 0, element: 0 }; SORTED_WAKES],
            sorted_len: 0,
            wakes: Vec::new(),
            wakes_heap: false,
            spent_root: false,
            buckets,
            mask: [0; 2],
            last: 0,
            radix_min: (u128::MAX, 0, 0),
            len: 0,
            next_seq: 1,
            popped: 0,
        }
    }
    #[inline(always)]
    fn bucket_of(&self, key: u128) -> usize {
        128 - (key ^ self.last).leading_zeros() as usize
    }
    /// Puts `e` into its bucket; returns the bucket.
    #[inline]
    fn insert(&mut self, e: Entry) -> usize {
        let b = self.bucket_of(e.key());
        debug_assert!(b > 0, "keys are unique and above the last popped");
        self.buckets[b].push(e);
        let (word, bit) = mask_bit(b);
        self.mask[word] |= bit;
        b
    }
    #[inline]
    pub fn schedule(&mut self, at: Time, event: Event) {
        if let Event::Element(id) = event {
            return self.wake_element(at, id);
        }
        let e = Entry { at, seq: self.next_seq, event };
        debug_assert!(e.key() > self.last, "an event scheduled in the past");
        self.next_seq += 1;
        self.len += 1;
        let b = self.insert(e);
        if e.key() < self.radix_min.0 {
            self.radix_min = (e.key(), b, self.buckets[b].len() - 1);
        }
    }
    /// Schedules `Event::Element(element)` at `at`: into the sorted list of wake-ups after
    /// every later one, or into the heap, sifted up from the end (there a hole moves up; the
    /// new entry is written once). Inlined into its few callers (a link's next
    /// serialisation, a delay line's next exit): as a call, its prologue and epilogue were a
    /// third of its cost.
    #[inline(always)]
    pub fn wake_element(&mut self, at: Time, element: u32) {
        let w = Wake { at, seq: self.next_seq, element };
        debug_assert!(w.key() > self.last, "an event scheduled in the past");
        self.next_seq += 1;
        if !self.wakes_heap {
            if self.sorted_len < SORTED_WAKES {
                return self.insert_sorted(w);
            }
            self.make_wakes_a_heap();
        }
        if self.spent_root {
            self.spent_root = false;
            return self.sift_down_from_root(w);
        }
        let mut i = self.wakes.len();
        self.wakes.push(w);
        let k = w.key();
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.wakes[parent].key() <= k {
                break;
            }
            self.wakes[i] = self.wakes[parent];
            i = parent;
        }
        self.wakes[i] = w;
    }
    /// Puts `w` into the sorted list of wake-ups (not full), after every entry due later
    /// (keys are unique): the entries due before it move up by one, the new one is written
    /// once.
    #[inline(always)]
    fn insert_sorted(&mut self, w: Wake) {
        let k = w.key();
        let n = self.sorted_len.min(SORTED_WAKES - 1);
        let mut i = n;
        while i > 0 && self.sorted[i - 1].key() < k {
            self.sorted[i] = self.sorted[i - 1];
            i -= 1;
        }
        self.sorted[i] = w;
        self.sorted_len = n + 1;
    }
    /// Moves the wake-ups from the sorted list into the heap, for good: reversed, the list
    /// is sorted earliest first, which is a binary min-heap.
    #[cold]
    #[inline(never)]
    fn make_wakes_a_heap(&mut self) {
        self.wakes.extend(self.sorted[..self.sorted_len].iter().rev());
        self.sorted_len = 0;
        self.wakes_heap = true;
    }
    /// Removes the spent root of the wake-up heap: the last entry takes its place.
    #[inline]
    fn remove_spent_root(&mut self) {
        self.spent_root = false;
        let last = self.wakes.pop().expect("the spent root");
        if !self.wakes.is_empty() {
            self.sift_down_from_root(last);
        }
    }
    /// Puts `w` in place of the wake-up heap's root and sifts it down (a hole moves down;
    /// `w` is written once).
    #[inline(always)]
    fn sift_down_from_root(&mut self, w: Wake) {
        let n = self.wakes.len();
        let k = w.key();
        let mut i = 0;
        loop {
            let mut c = 2 * i + 1;
            if c >= n {
                break;
            }
            if c + 1 < n && self.wakes[c + 1].key() < self.wakes[c].key() {
                c += 1;
            }
            if k <= self.wakes[c].key() {
                break;
            }
            self.wakes[i] = self.wakes[c];
            i = c;
        }
        self.wakes[i] = w;
    }
    /// Clears the mask's bit of bucket `b` (emptied).
    #[inline(always)]
    fn unmark(&mut self, b: usize) {
        let (word, bit) = mask_bit(b);
        self.mask[word] &= !bit;
    }
    /// The radix heap's smallest key, its bucket (the lowest non-empty one) and its index
    /// there; `u128::MAX` when the radix heap is empty.
    #[inline]
    fn find_radix_min(&self) -> (u128, usize, usize) {
        let b = match self.mask {
            [0, 0] => return (u128::MAX, 0, 0),
            [0, high] => high.trailing_zeros() as usize + 65,
            [low, _] => low.trailing_zeros() as usize + 1,
        };
        let v = &self.buckets[b];
        let mut mi = 0;
        let mut mk = v[0].key();
        for (i, e) in v.iter().enumerate().skip(1) {
            let k = e.key();
            if k < mk {
                mk = k;
                mi = i;
            }
        }
        (mk, b, mi)
    }
    /// [`EventQueue::pop_due`] for an element's wake-up only: removes and returns the
    /// earliest event, as `(time, element)`, if it is a wake-up due at or before `limit`;
    /// otherwise `None` and nothing popped (another event comes first, or nothing is due).
    /// The engine's loop asks this first: its most common event (2.5 of 2.6 per bottleneck
    /// packet) then goes to its element without an `Event` built and matched on the way.
    #[inline(always)]
    pub fn pop_wake_due(&mut self, limit: Time) -> Option<(Time, u32)> {
        if !self.wakes_heap {
            let last = self.sorted_len.checked_sub(1)?;
            let w = self.sorted[last.min(SORTED_WAKES - 1)];
            if w.key() < self.radix_min.0 && w.at <= limit {
                self.sorted_len = last;
                self.popped += 1;
                return Some((w.at, w.element));
            }
            return None;
        }
        if self.spent_root {
            self.remove_spent_root();
        }
        let w = self.wakes.first()?;
        if w.key() < self.radix_min.0 && w.at <= limit {
            self.popped += 1;
            self.spent_root = true;
            return Some((w.at, w.element));
        }
        None
    }
    /// The earliest pending wake-up (after a pop that returned none, so no spent root).
    #[inline(always)]
    fn earliest_wake(&self) -> Option<&Wake> {
        if self.wakes_heap {
            self.wakes.first()
        } else {
            self.sorted[..self.sorted_len].last()
        }
    }
    /// Removes and returns the earliest event if it is due at or before `limit`.
    #[inline]
    pub fn pop_due(&mut self, limit: Time) -> Option<(Time, Event)> {
        if let Some((at, element)) = self.pop_wake_due(limit) {
            return Some((at, Event::Element(element)));
        }
        if self.earliest_wake().is_some_and(|w| w.key() < self.radix_min.0) {
            return None; // The earliest event is a wake-up after `limit`.
        }
        let (rk, b, mi) = self.radix_min;
        if rk == u128::MAX || self.buckets[b][mi].at > limit {
            return None;
        }
        self.len -= 1;
        self.popped += 1;
        let n = self.buckets[b].len();
        let e = if n == 1 {
            let e = self.buckets[b].pop().expect("non-empty");
            self.last = e.key();
            self.unmark(b);
            e
        } else if n <= SCAN_IN_PLACE {
            // The others stay where they are, `last` too: every key in the radix heap, and
            // every key scheduled from now on, is still above it, and bucket `b` is still the
            // lowest non-empty one, whose scan below finds the next minimum.
            self.buckets[b].swap_remove(mi)
        } else {
            let mut v = std::mem::take(&mut self.buckets[b]);
            let e = v.swap_remove(mi);
            self.last = e.key();
            self.unmark(b);
            // Every other entry of the bucket goes to a lower bucket relative to the new `last`.
            for &o in &v {
                self.insert(o);
            }
            v.clear();
            self.buckets[b] = v;
            e
        };
        self.radix_min = self.find_radix_min();
        Some((e.at, e.event))
    }
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        self.pop_due(Time(u64::MAX))
    }
    pub fn peek_time(&self) -> Option<Time> {
        let radix = (self.len > 0).then_some(Time((self.radix_min.0 >> 64) as u64));
        // Under a spent root, the smaller of its children is the earliest wake-up pending.
        let wake = match self.spent_root {
            false => self.earliest_wake(),
            true => self.wakes[1..].iter().take(2).min_by_key(|w| w.key()),
        }
        .map(|w| w.at);
        match (radix, wake) {
            (Some(r), Some(w)) => Some(r.min(w)),
            (r, w) => r.or(w),
        }
    }
    pub fn len(&self) -> usize {
        self.len + self.sorted_len + self.wakes.len() - self.spent_root as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Events executed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }
}

/// A restartable timer that keeps at most one entry in the event queue.
///
/// Re-arming to a later deadline (as TCP does for its retransmission timer on every ACK)
/// does not push a new event: the queued one fires early, sees the later deadline and
/// re-queues itself. Cancelling just clears the deadline.
///
/// The deadline and the queued entry's time are `Time::MAX` when unset (`Timer::UNSET`), not
/// `Option`s: 16 bytes instead of 32, so that the fields a TCP receiver touches per data
/// packet fit two cache lines without ECN (an ECN flow's `ect_seen` is in the third; issue
/// #15, session 12). No timer is armed at `Time::MAX` (`arm` asserts it: parsed times are
/// capped far below it and `Time` sums saturate).
#[derive(Clone, Copy, Debug)]
pub struct Timer {
    deadline: Time,
    queued: Time,
}

impl Default for Timer {
    /// Not armed, nothing queued.
    fn default() -> Self {
        Timer { deadline: Timer::UNSET, queued: Timer::UNSET }
    }
}

impl Timer {
    /// The value of an unset deadline or queued time.
    const UNSET: Time = Time::MAX;

    pub fn arm(&mut self, at: Time, event: Event, q: &mut EventQueue) {
        assert!(at < Timer::UNSET, "a timer armed at the end of time");
        self.deadline = at;
        if self.queued > at {
            q.schedule(at, event);
            self.queued = at;
        }
    }
    pub fn cancel(&mut self) {
        self.deadline = Timer::UNSET;
    }
    pub fn deadline(&self) -> Option<Time> {
        self.is_armed().then_some(self.deadline)
    }
    pub fn is_armed(&self) -> bool {
        self.deadline != Timer::UNSET
    }
    /// Call when this timer's event pops. Returns true if the timer is due now (and disarms
    /// it); otherwise re-queues for the current deadline if there is one.
    pub fn fire(&mut self, now: Time, event: Event, q: &mut EventQueue) -> bool {
        if self.queued == now {
            self.queued = Timer::UNSET;
        } else if self.queued < now {
            // A stale, earlier entry; the queued marker belongs to a later one.
            return false;
        }
        if !self.is_armed() {
            return false;
        }
        let d = self.deadline;
        if d <= now {
            self.deadline = Timer::UNSET;
            return true;
        }
        if self.queued > d {
            q.schedule(d, event);
            self.queued = d;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        q.schedule(Time(10), Event::Element(2));
        q.schedule(Time(5), Event::Element(9));
        q.schedule(Time(10), Event::Element(1));
        q.schedule(Time(10), Event::Sample);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Time(5), Event::Element(9)),
                (Time(10), Event::Element(2)),
                (Time(10), Event::Element(1)),
                (Time(10), Event::Sample)
            ]
        );
        assert_eq!(q.processed(), 4);
    }

    #[test]
    fn time_never_goes_backwards() {
        // Interleave pops with new events scheduled at or after the current time, as the
        // engine does, using a deterministic pseudo-random pattern.
        let mut q = EventQueue::default();
        let mut x: u64 = 12345;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..100 {
            q.schedule(Time(next() % 1000), Event::Element(i));
        }
        let mut now = Time::ZERO;
        let mut n = 0;
        while let Some((t, _)) = q.pop() {
            assert!(t >= now, "{t:?} after {now:?}");
            now = t;
            n += 1;
            if n < 10_000 {
                for _ in 0..(next() % 3) {
                    q.schedule(now + Time(next() % 500), Event::Sample);
                }
            }
        }
        assert!(n > 100);
    }

    /// Interleaved schedules and pops come out in exactly (time, insertion) order, checked
    /// against a sorted reference list (many equal times, so ties matter). Link changes go
    /// to the radix heap (element wake-ups have their own heap, tested below).
    #[test]
    fn pops_in_time_then_insertion_order_against_a_reference() {
        let mut q = EventQueue::default();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut x: u64 = 99;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut now, mut seq) = (0u64, 0u64);
        for round in 0..20_000 {
            for _ in 0..(next() % 3) {
                let at = now + next() % 40;
                q.schedule(Time(at), Event::LinkChange(seq as u32));
                reference.push((at, seq));
                seq += 1;
            }
            if round % 2 == 0 {
                if let Some((t, Event::LinkChange(s))) = q.pop() {
                    let min = *reference.iter().min().unwrap();
                    assert_eq!((t.0, s as u64), min);
                    reference.retain(|&e| e != min);
                    now = t.0;
                }
            }
        }
        while let Some((t, Event::LinkChange(s))) = q.pop() {
            let min = *reference.iter().min().unwrap();
            assert_eq!((t.0, s as u64), min);
            reference.retain(|&e| e != min);
        }
        assert!(reference.is_empty());
    }

    /// The same against a reference with delays of every magnitude (1 ns to ~1 s, as a
    /// serialiser's end, a delay line's exit and a retransmission timer are), so that entries
    /// land in many buckets (each pop redistributes entries across several of them).
    #[test]
    fn pops_in_order_with_delays_of_every_magnitude() {
        let mut q = EventQueue::default();
        let mut reference: std::collections::BTreeSet<(u64, u64)> = Default::default();
        let mut x: u64 = 7;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut now, mut seq, mut popped) = (0u64, 0u64, 0);
        for _ in 0..50_000 {
            for _ in 0..(next() % 3) {
                let r = next();
                let at = now + (r >> 8) % (1u64 << (r % 31));
                q.schedule(Time(at), Event::LinkChange(seq as u32));
                reference.insert((at, seq));
                seq += 1;
            }
            assert_eq!(q.len(), reference.len());
            assert_eq!(q.peek_time().map(|t| t.0), reference.first().map(|e| e.0));
            if next() % 2 == 0 {
                let limit = now + next() % 1000;
                match q.pop_due(Time(limit)) {
                    Some((t, Event::LinkChange(s))) => {
                        assert_eq!((t.0, s as u64), reference.pop_first().unwrap());
                        now = t.0;
                        popped += 1;
                    }
                    None => assert!(reference.first().map_or(true, |e| e.0 > limit)),
                    Some(other) => panic!("{other:?}"),
                }
            }
        }
        while let Some((t, Event::LinkChange(s))) = q.pop() {
            assert_eq!((t.0, s as u64), reference.pop_first().unwrap());
            popped += 1;
        }
        assert!(reference.is_empty() && popped > 10_000, "{popped}");
    }

    /// The radix heap's two ways to pop, checked against a reference order: a small bucket
    /// gives its minimum up in place (`last` stays), a larger one is redistributed below the
    /// popped key (`last` becomes it). Flow timers as at 1000 flows: many pending, most far
    /// ahead (40 ms to 300 ms), popped a few microseconds apart, some at the same instant.
    #[test]
    fn radix_pops_in_place_and_by_redistribution_keep_one_order() {
        let mut rng = crate::rng::Stream::new(11, "radix-in-place");
        let mut q = EventQueue::default();
        let mut reference: std::collections::BTreeSet<(u64, u64)> = Default::default();
        let (mut now, mut seq) = (0u64, 0u64);
        let (mut in_place, mut redistributed) = (0, 0);
        for _ in 0..200_000 {
            if reference.len() < 2_000 || rng.next_u64() % 2 == 0 {
                let r = rng.next_u64();
                let at = now + match r % 8 {
                    0 => 0,
                    1..=3 => 40_000_000 + (r >> 8) % 1_000_000,
                    _ => 200_000_000 + (r >> 8) % 100_000_000,
                };
                q.schedule(Time(at), Event::LinkChange(seq as u32));
                reference.insert((at, seq));
                seq += 1;
            } else {
                let bucket_len = q.buckets[q.radix_min.1].len();
                let last = q.last;
                let Some((t, Event::LinkChange(s))) = q.pop() else { panic!("an entry is pending") };
                assert_eq!((t.0, s as u64), reference.pop_first().unwrap());
                now = t.0;
                if bucket_len > SCAN_IN_PLACE {
                    assert_eq!(q.last, order_key(t, s as u64 + 1), "redistributed below the popped key");
                    redistributed += 1;
                } else if bucket_len > 1 {
                    assert_eq!(q.last, last, "popped in place");
                    in_place += 1;
                }
            }
            assert_eq!(q.len(), reference.len());
            assert_eq!(q.peek_time().map(|t| t.0), reference.first().map(|e| e.0));
        }
        while let Some((t, Event::LinkChange(s))) = q.pop() {
            assert_eq!((t.0, s as u64), reference.pop_first().unwrap());
        }
        assert!(reference.is_empty());
        assert!(in_place > 1_000 && redistributed > 1_000, "{in_place} {redistributed}");
    }

    /// Element wake-ups (their own heap) and every other event (the radix heap) scheduled
    /// at random, with delays of every magnitude and many at the same instant (zero and
    /// tiny delays), popped with random limits: the pops come out in exactly the
    /// `(time, scheduling order)` of one list, the order one queue gave, and `len`,
    /// `peek_time` and `processed` agree with that list throughout. Elements get several
    /// wake-ups pending at once (superseded ones pop and count, as before). Run with few
    /// elements (the dumbbells' handful) and with many (a deep heap). With `wake_cap`, no
    /// wake-up is scheduled while that many are pending (the sorted list's range), delays
    /// are below 256 ns and a pop is tried every round, so that the pending ones keep
    /// popping.
    fn check_one_order(elements: u64, seed: u64, wake_cap: Option<u32>) -> EventQueue {
        let mut rng = crate::rng::Stream::new(seed, "event-queue-order");
        let mut q = EventQueue::default();
        let mut reference: std::collections::BTreeMap<(u64, u64), Event> = Default::default();
        let (mut now, mut seq, mut popped) = (0u64, 0u64, 0u64);
        // Pops at an instant where both heaps hold an event, and elements seen with more
        // than one wake-up pending: the test must exercise both.
        let (mut mixed_ties, mut several_pending) = (0, 0);
        let mut pending = vec![0u32; elements as usize];
        for _ in 0..30_000 {
            for _ in 0..rng.next_u64() % 3 {
                let r = rng.next_u64();
                let delay = match r % 4 {
                    0 => 0,
                    1 => (r >> 8) % 8,
                    _ => (r >> 8) % (1u64 << ((r >> 40) % if wake_cap.is_some() { 9 } else { 31 })),
                };
                let at = now + delay;
                let ev = match (r >> 48) % 4 {
                    0 => Event::Flow((r >> 50) as u32 % 5, FlowTimer::Retransmit),
                    1 => Event::Sample,
                    _ => Event::Element(((r >> 16) % elements) as u32),
                };
                if matches!(ev, Event::Element(_)) && wake_cap.is_some_and(|c| pending.iter().sum::<u32>() >= c) {
                    continue;
                }
                if let Event::Element(id) = ev {
                    if pending[id as usize] > 0 {
                        several_pending += 1;
                    }
                    pending[id as usize] += 1;
                    // Both entry points: the engine's elements call `wake_element`, netem's
                    // watchdog `schedule`.
                    if r % 2 == 0 {
                        q.wake_element(Time(at), id);
                    } else {
                        q.schedule(Time(at), ev);
                    }
                } else {
                    q.schedule(Time(at), ev);
                }
                seq += 1;
                reference.insert((at, seq), ev);
            }
            assert_eq!(q.len(), reference.len());
            assert_eq!(q.peek_time(), reference.keys().next().map(|k| Time(k.0)));
            // Capped: a pop every round, so that the few pending wake-ups keep turning over.
            if rng.next_u64() % 2 == 0 || wake_cap.is_some() {
                let limit = now + rng.next_u64() % 64;
                match q.pop_due(Time(limit)) {
                    Some((t, ev)) => {
                        let ((at, _), expected) = reference.pop_first().unwrap();
                        assert_eq!((t.0, ev), (at, expected));
                        if let Event::Element(id) = ev {
                            pending[id as usize] -= 1;
                        }
                        let same_instant = reference.range((at, 0)..(at + 1, 0)).map(|(_, e)| *e);
                        let other_heap = same_instant.filter(|e| matches!(e, Event::Element(_)) != matches!(ev, Event::Element(_)));
                        mixed_ties += other_heap.count().min(1);
                        now = at;
                        popped += 1;
                    }
                    None => assert!(reference.keys().next().map_or(true, |k| k.0 > limit)),
                }
            }
            assert_eq!(q.processed(), popped);
        }
        while let Some((t, ev)) = q.pop() {
            let ((at, _), expected) = reference.pop_first().unwrap();
            assert_eq!((t.0, ev), (at, expected));
            popped += 1;
        }
        assert!(reference.is_empty() && q.is_empty());
        assert_eq!(q.processed(), popped);
        assert!(mixed_ties > 500 && several_pending > 500, "{mixed_ties} {several_pending}");
        q
    }

    #[test]
    fn wake_ups_and_other_events_pop_in_one_order_few_elements() {
        assert!(check_one_order(6, 1, None).wakes_heap, "more than SORTED_WAKES were pending");
    }

    #[test]
    fn wake_ups_and_other_events_pop_in_one_order_many_elements() {
        assert!(check_one_order(2_000, 2, None).wakes_heap, "more than SORTED_WAKES were pending");
    }

    /// Never more than [`SORTED_WAKES`] wake-ups pending: the sorted list serves the whole
    /// run (pending counts from one to its capacity, filled and emptied many times).
    #[test]
    fn wake_ups_in_the_sorted_list_and_other_events_pop_in_one_order() {
        for (elements, seed) in [(2, 3), (4, 4), (6, 5)] {
            let q = check_one_order(elements, seed, Some(SORTED_WAKES as u32));
            assert!(!q.wakes_heap, "the list never became a heap");
        }
    }

    #[test]
    fn timer_rearm_later_keeps_one_entry_and_fires_at_last_deadline() {
        let mut q = EventQueue::default();
        let mut t = Timer::default();
        let ev = Event::Flow(0, FlowTimer::Retransmit);
        t.arm(Time(100), ev, &mut q);
        t.arm(Time(150), ev, &mut q);
        t.arm(Time(200), ev, &mut q);
        assert_eq!(q.len(), 1);
        let (at, e) = q.pop().unwrap();
        assert_eq!(at, Time(100));
        assert!(!t.fire(at, e, &mut q));
        let (at, e) = q.pop().unwrap();
        assert_eq!(at, Time(200));
        assert!(t.fire(at, e, &mut q));
        assert!(q.is_empty());
    }

    #[test]
    fn timer_rearm_earlier_and_cancel() {
        let mut q = EventQueue::default();
        let mut t = Timer::default();
        let ev = Event::Flow(0, FlowTimer::DelayedAck);
        t.arm(Time(100), ev, &mut q);
        t.arm(Time(40), ev, &mut q);
        let (at, _) = q.pop().unwrap();
        assert_eq!(at, Time(40));
        assert!(t.fire(at, ev, &mut q));
        let (at, _) = q.pop().unwrap();
        assert_eq!(at, Time(100));
        assert!(!t.fire(at, ev, &mut q), "already fired at 40");
        t.arm(Time(300), ev, &mut q);
        t.cancel();
        let (at, _) = q.pop().unwrap();
        assert!(!t.fire(at, ev, &mut q));
        assert!(q.is_empty());
    }
}
