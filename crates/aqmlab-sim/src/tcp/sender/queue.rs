//! The retransmission queue: one scoreboard entry per segment sent and not yet cumulatively
//! ACKed (Linux keeps these flags and the `tcp_rate.c` snapshot in `tcp_skb_cb`), and the
//! send-ordered list RACK walks (Linux `tsorted_sent_queue`, `tcp_update_skb_after_send`).

use super::TcpSender;
use crate::time::Time;
use std::num::NonZeroU32;

/// End of the send-ordered list.
pub(super) const NIL: u32 = u32::MAX;

pub(super) const SACKED: u8 = 1;
pub(super) const LOST: u8 = 2;
/// A retransmission of this segment is in flight (Linux `TCPCB_SACKED_RETRANS`).
pub(super) const RETRANS: u8 = 4;
/// The segment has been retransmitted at least once (Linux `TCPCB_EVER_RETRANS`).
pub(super) const EVER_RETRANS: u8 = 8;
pub(super) const APP_LIMITED: u8 = 16;
/// The segment is on the send-ordered list RACK walks (Linux `tsorted_sent_queue`).
pub(super) const TSORTED: u8 = 32;

/// Per-segment scoreboard entry (Linux keeps these in `tcp_skb_cb`).
///
/// Aligned to a cache line: the entry is 64 bytes, so the ring's slots start on line
/// boundaries and a look-up or push touches one line, not two (the allocator's 16-byte
/// alignment made most entries straddle two lines: at 1000 flows, where every flow's ring is
/// cold when its ACK comes, the push's write missed 1.26 times per new segment).
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
pub(super) struct Seg {
    /// Last (re)transmission time.
    pub(super) tx_time: Time,
    /// `tcp_rate.c` snapshot at transmission: delivered count, its time, and the send time
    /// of the first packet of the current flight.
    /// Linux `tx.delivered_mstamp`; always set here (every transmission takes the snapshot), so
    /// `tcp_rate_skb_delivered`'s "no timestamp" exit never applies and the entry stays 64
    /// bytes, one cache line.
    pub(super) delivered: u64,
    pub(super) delivered_ce: u64,
    pub(super) delivered_time: Time,
    pub(super) first_tx: Time,
    /// Packets in flight just after this transmission, itself included (google/bbr
    /// `tx.in_flight`), and `tp->lost` at that moment (`tx.lost`).
    pub(super) tx_in_flight: u32,
    pub(super) tx_lost: u64,
    pub(super) flags: u8,
    /// Neighbours on the send-ordered list (segment numbers, `NIL` at the ends).
    pub(super) ts_prev: u32,
    pub(super) ts_next: u32,
}

// One entry, one cache line: a field added beyond 64 bytes would make every entry two.
const _: () = assert!(std::mem::size_of::<Seg>() == 64);

/// The scoreboard: the entries of segments `head .. head + len` (`snd_una .. snd_nxt`) in a ring
/// whose size is a power of two, segment `seq` at slot `seq & (size − 1)`. A look-up is a mask
/// and one window check, kept in every build (a `VecDeque` indexed by `seq − snd_una` also adds
/// its head and wraps);
/// the cumulative ACK drops entries by moving `head`, without copying them out. Grows by
/// doubling to the largest flight the connection has had (as the `VecDeque` did).
#[derive(Debug)]
pub(super) struct Scoreboard {
    /// Every slot initialised; `ring.len()` is a power of two.
    ring: Box<[Seg]>,
    head: u32,
    len: u32,
}

impl Scoreboard {
    pub(super) fn with_capacity(n: usize) -> Self {
        Scoreboard { ring: vec![Seg::default(); n.next_power_of_two().max(1)].into_boxed_slice(), head: 0, len: 0 }
    }

    #[inline]
    fn slot(&self, seq: u32) -> usize {
        seq as usize & (self.ring.len() - 1)
    }

    /// A segment outside the window is a bug in the sender, checked in every build (a stale
    /// slot read silently would corrupt the run); the report is kept out of line so the check
    /// costs one compare in the per-ACK loops.
    #[inline]
    fn check(&self, seq: u32) {
        if seq.wrapping_sub(self.head) >= self.len {
            Self::outside(seq, self.head, self.len);
        }
    }

    #[cold]
    #[inline(never)]
    fn outside(seq: u32, head: u32, len: u32) -> ! {
        panic!("invariant violated: scoreboard: segment {seq} not in the window {head}+{len}")
    }

    /// The entry of segment `seq` (`head <= seq < head + len`).
    #[inline]
    pub(super) fn get(&self, seq: u32) -> &Seg {
        self.check(seq);
        &self.ring[self.slot(seq)]
    }

    #[inline]
    pub(super) fn get_mut(&mut self, seq: u32) -> &mut Seg {
        self.check(seq);
        let i = self.slot(seq);
        &mut self.ring[i]
    }

    /// The entry of the next segment (`snd_nxt`).
    #[inline]
    pub(super) fn push_back(&mut self, seg: Seg) {
        if self.len as usize == self.ring.len() {
            self.grow();
        }
        let i = self.slot(self.head.wrapping_add(self.len));
        self.ring[i] = seg;
        self.len += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let mut ring = vec![Seg::default(); self.ring.len() * 2].into_boxed_slice();
        let mask = ring.len() - 1;
        for k in 0..self.len {
            let seq = self.head.wrapping_add(k);
            ring[seq as usize & mask] = self.ring[self.slot(seq)];
        }
        self.ring = ring;
    }

    /// Drops the head entry (segment `head`, cumulatively ACKed).
    #[inline]
    pub(super) fn pop_front(&mut self) {
        self.pop_front_n(1);
    }

    /// Drops the `n` head entries (segments `head .. head + n`, cumulatively ACKed).
    #[inline]
    pub(super) fn pop_front_n(&mut self, n: u32) {
        if n > self.len {
            Self::outside(self.head.wrapping_add(n - 1), self.head, self.len);
        }
        self.head = self.head.wrapping_add(n);
        self.len -= n;
    }

    /// The entry of the oldest segment (`snd_una`), if any is outstanding.
    #[inline]
    pub(super) fn front(&self) -> Option<&Seg> {
        (self.len > 0).then(|| &self.ring[self.slot(self.head)])
    }

    /// Every entry, oldest first.
    pub(super) fn for_each_mut(&mut self, mut f: impl FnMut(&mut Seg)) {
        for k in 0..self.len {
            let i = self.slot(self.head.wrapping_add(k));
            f(&mut self.ring[i]);
        }
    }
}

impl TcpSender {
    pub(super) fn payload_upto(&self, seq: u32) -> u64 {
        match self.total_segs.map(NonZeroU32::get) {
            Some(n) if seq >= n => (n as u64 - 1) * self.cfg.mss as u64 + self.last_seg_payload as u64,
            _ => seq as u64 * self.cfg.mss as u64,
        }
    }

    pub(super) fn payload_of(&self, seq: u32) -> u32 {
        match self.total_segs.map(NonZeroU32::get) {
            Some(n) if seq + 1 == n => self.last_seg_payload,
            _ => self.cfg.mss,
        }
    }

    #[inline]
    pub(super) fn seg(&self, seq: u32) -> &Seg {
        self.sb.get(seq)
    }

    #[inline]
    pub(super) fn seg_mut(&mut self, seq: u32) -> &mut Seg {
        self.sb.get_mut(seq)
    }

    /// Whether the send-ordered list is the sequence order `snd_una .. snd_nxt`: every
    /// segment sent since the last retransmission, SACK or RACK unlink was sent once, in
    /// order, and the cumulative ACK has passed all that was sent before (`ts_in_order_from`).
    /// While it is, the list is not linked: a cumulative ACK and a new segment cost a compare
    /// instead of an unlink and an append (the common case: no loss, no SACK). The first
    /// operation that breaks the order links it ([`TcpSender::ts_link_sequence`]).
    #[inline]
    pub(super) fn ts_in_sequence(&self) -> bool {
        self.tp.snd_una >= self.ts_in_order_from
    }

    /// Links the implicit list `snd_una .. snd_nxt` (every outstanding segment, in order), as
    /// the explicit list would hold it, before an operation that breaks the order.
    fn ts_link_sequence(&mut self) {
        let (una, nxt) = (self.tp.snd_una, self.tp.snd_nxt);
        for seq in una..nxt {
            let s = self.seg_mut(seq);
            s.ts_prev = if seq == una { NIL } else { seq - 1 };
            s.ts_next = if seq + 1 == nxt { NIL } else { seq + 1 };
            s.flags |= TSORTED;
        }
        (self.ts_head, self.ts_tail) = if una < nxt { (una, nxt - 1) } else { (NIL, NIL) };
    }

    /// Before an operation that takes a segment out of the sequence order (a SACK or RACK
    /// unlink, a retransmission's move to the tail): the list linked, and in sequence again
    /// only once the cumulative ACK passes every segment sent so far.
    fn ts_leave_sequence(&mut self) {
        if self.ts_in_sequence() {
            self.ts_link_sequence();
        }
        self.ts_in_order_from = self.tp.snd_nxt;
    }

    /// The first segment of the send-ordered list, `NIL` if it is empty.
    pub(super) fn ts_first(&self) -> u32 {
        if !self.ts_in_sequence() {
            self.ts_head
        } else if self.tp.snd_una < self.tp.snd_nxt {
            self.tp.snd_una
        } else {
            NIL
        }
    }

    /// The segment after `seq` (whose entry is `seg`) on the send-ordered list, `NIL` at its end.
    pub(super) fn ts_after(&self, seq: u32, seg: &Seg) -> u32 {
        if !self.ts_in_sequence() {
            seg.ts_next
        } else if seq + 1 < self.tp.snd_nxt {
            seq + 1
        } else {
            NIL
        }
    }

    /// Removes the cumulatively ACKed segment `seq` (`snd_una`, the list's head when the list
    /// is in sequence) from the send-ordered list.
    #[inline]
    pub(super) fn ts_unlink_acked(&mut self, seq: u32) {
        if !self.ts_in_sequence() {
            self.ts_unlink_linked(seq);
        }
    }

    /// Removes a segment from the send-ordered list out of order (a SACK, RACK marking it
    /// lost), if it is on it.
    pub(super) fn ts_unlink(&mut self, seq: u32) {
        self.ts_leave_sequence();
        self.ts_unlink_linked(seq);
    }

    /// Removes a segment from the linked send-ordered list (Linux `list_del_init` of
    /// `tcp_tsorted_anchor`), if it is on it. Reads only the entry's links (not a copy of the
    /// whole entry).
    #[inline]
    fn ts_unlink_linked(&mut self, seq: u32) {
        let s = self.seg_mut(seq);
        if s.flags & TSORTED == 0 {
            return;
        }
        let (prev, next) = (s.ts_prev, s.ts_next);
        s.flags &= !TSORTED;
        s.ts_prev = NIL;
        s.ts_next = NIL;
        if prev != NIL {
            self.seg_mut(prev).ts_next = next;
        } else {
            self.ts_head = next;
        }
        if next != NIL {
            self.seg_mut(next).ts_prev = prev;
        } else {
            self.ts_tail = prev;
        }
    }

    /// Moves a segment just (re)transmitted to the tail of the send-ordered list (Linux
    /// `tcp_update_skb_after_send`: `list_move_tail`).
    pub(super) fn ts_push_back(&mut self, seq: u32) {
        self.ts_leave_sequence();
        self.ts_unlink_linked(seq);
        self.ts_append_linked(seq);
    }

    /// Appends the new segments `seq .. seq + n` (their entries just pushed) to the
    /// send-ordered list: nothing to do while the list is in sequence.
    #[inline]
    pub(super) fn ts_append_run(&mut self, seq: u32, n: u32) {
        if !self.ts_in_sequence() {
            for s in seq..seq + n {
                self.ts_append_linked(s);
            }
        }
    }

    /// Appends a segment not on the linked list to its tail.
    #[inline]
    fn ts_append_linked(&mut self, seq: u32) {
        debug_assert!(self.seg(seq).flags & TSORTED == 0);
        let tail = self.ts_tail;
        if tail != NIL {
            self.seg_mut(tail).ts_next = seq;
        } else {
            self.ts_head = seq;
        }
        self.ts_tail = seq;
        let s = self.seg_mut(seq);
        s.ts_prev = tail;
        s.ts_next = NIL;
        s.flags |= TSORTED;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(t: u64) -> Seg {
        Seg { tx_time: Time(t), ..Seg::default() }
    }

    /// The ring keeps every outstanding segment's entry at its number across growth (at a
    /// head that is not slot 0, so the copy has to re-place wrapped entries) and after the
    /// head moves past the end of the ring.
    #[test]
    fn scoreboard_ring_finds_each_segment_across_growth_and_wrap() {
        let mut sb = Scoreboard::with_capacity(4);
        let (mut head, mut next) = (0u32, 0u32);
        for round in 0..40u32 {
            // Send a growing burst, then ACK all but a few.
            for _ in 0..(round % 7 + 1) {
                sb.push_back(seg(next as u64 * 10 + 1));
                next += 1;
            }
            for s in head..next {
                assert_eq!(sb.get(s).tx_time, Time(s as u64 * 10 + 1), "segment {s} in round {round}");
            }
            assert_eq!(sb.front().map(|f| f.tx_time), Some(Time(head as u64 * 10 + 1)));
            let acked = (next - head).saturating_sub(3);
            for _ in 0..acked {
                sb.pop_front();
            }
            head += acked;
            sb.get_mut(head).flags = LOST;
            let mut n = 0;
            sb.for_each_mut(|s| {
                n += 1;
                s.flags &= !LOST;
            });
            assert_eq!(n, next - head);
            assert_eq!(sb.get(head).flags, 0);
        }
        for _ in head..next {
            sb.pop_front();
        }
        assert!(sb.front().is_none());
    }

    /// A segment outside `snd_una .. snd_nxt` (a slot that is stale or holds another segment's
    /// entry) and a pop from an empty ring are reported in every build, never read silently.
    #[test]
    fn scoreboard_reports_a_segment_outside_its_window() {
        let mut sb = Scoreboard::with_capacity(4);
        sb.push_back(seg(1));
        sb.push_back(seg(2));
        sb.pop_front();
        for seq in [0u32, 2, 5] {
            let r = std::panic::catch_unwind(|| sb.get(seq).tx_time);
            let msg = r.expect_err("an out-of-window segment must be reported");
            assert!(msg.downcast_ref::<String>().is_some_and(|m| m.contains("not in the window")), "segment {seq}");
        }
        assert_eq!(sb.get(1).tx_time, Time(2));
        sb.pop_front();
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sb.pop_front())).is_err());
    }
}
