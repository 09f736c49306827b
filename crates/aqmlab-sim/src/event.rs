//! The event queue: a binary heap ordered by (time, insertion sequence), so events at the
//! same instant run in the order they were scheduled and every run is deterministic.

use crate::time::Time;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens when an event fires. Small and `Copy`: packets never ride in events;
/// path elements hold their own packets and ask to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A path element (link, delay line) has work due.
    Element(u32),
    /// A flow's timer of the given kind.
    Flow(u32, FlowTimer),
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

#[derive(Debug)]
struct Entry {
    at: Time,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    /// Reversed so that `BinaryHeap` (a max-heap) pops the earliest entry first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.cmp(&self.at).then_with(|| o.seq.cmp(&self.seq))
    }
}

/// Deterministic future-event list.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    next_seq: u64,
    popped: u64,
}

impl EventQueue {
    pub fn with_capacity(n: usize) -> Self {
        EventQueue { heap: BinaryHeap::with_capacity(n), next_seq: 0, popped: 0 }
    }
    pub fn schedule(&mut self, at: Time, event: Event) {
        self.heap.push(Entry { at, seq: self.next_seq, event });
        self.next_seq += 1;
    }
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let e = self.heap.pop()?;
        self.popped += 1;
        Some((e.at, e.event))
    }
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.at)
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
#[derive(Clone, Copy, Debug, Default)]
pub struct Timer {
    deadline: Option<Time>,
    queued: Option<Time>,
}

impl Timer {
    pub fn arm(&mut self, at: Time, event: Event, q: &mut EventQueue) {
        self.deadline = Some(at);
        if self.queued.map_or(true, |qt| qt > at) {
            q.schedule(at, event);
            self.queued = Some(at);
        }
    }
    pub fn cancel(&mut self) {
        self.deadline = None;
    }
    pub fn deadline(&self) -> Option<Time> {
        self.deadline
    }
    pub fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }
    /// Call when this timer's event pops. Returns true if the timer is due now (and disarms
    /// it); otherwise re-queues for the current deadline if there is one.
    pub fn fire(&mut self, now: Time, event: Event, q: &mut EventQueue) -> bool {
        if self.queued == Some(now) {
            self.queued = None;
        } else if self.queued.is_some_and(|qt| qt < now) {
            // A stale, earlier entry; the queued marker belongs to a later one.
            return false;
        }
        match self.deadline {
            Some(d) if d <= now => {
                self.deadline = None;
                true
            }
            Some(d) => {
                if self.queued.map_or(true, |qt| qt > d) {
                    q.schedule(d, event);
                    self.queued = Some(d);
                }
                false
            }
            None => false,
        }
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
