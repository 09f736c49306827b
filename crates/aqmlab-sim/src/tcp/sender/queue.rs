//! The retransmission queue: one scoreboard entry per segment sent and not yet cumulatively
//! ACKed (Linux keeps these flags and the `tcp_rate.c` snapshot in `tcp_skb_cb`), and the
//! send-ordered list RACK walks (Linux `tsorted_sent_queue`, `tcp_update_skb_after_send`).

use super::TcpSender;
use crate::time::Time;

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
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Seg {
    /// Last (re)transmission time.
    pub(super) tx_time: Time,
    /// `tcp_rate.c` snapshot at transmission: delivered count, its time, and the send time
    /// of the first packet of the current flight.
    pub(super) delivered: u64,
    pub(super) delivered_ce: u64,
    pub(super) delivered_time: Option<Time>,
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

impl TcpSender {
    pub(super) fn payload_upto(&self, seq: u32) -> u64 {
        match self.total_segs {
            Some(n) if seq >= n => (n as u64 - 1) * self.cfg.mss as u64 + self.last_seg_payload as u64,
            _ => seq as u64 * self.cfg.mss as u64,
        }
    }

    pub(super) fn payload_of(&self, seq: u32) -> u32 {
        match self.total_segs {
            Some(n) if seq + 1 == n => self.last_seg_payload,
            _ => self.cfg.mss,
        }
    }

    pub(super) fn seg(&self, seq: u32) -> &Seg {
        &self.sb[(seq - self.tp.snd_una) as usize]
    }

    pub(super) fn seg_mut(&mut self, seq: u32) -> &mut Seg {
        &mut self.sb[(seq - self.tp.snd_una) as usize]
    }

    /// Removes a segment from the send-ordered list (Linux `list_del_init` of
    /// `tcp_tsorted_anchor`), if it is on it. Runs for every segment ACKed: inlined, and
    /// reading only the entry's links (not a copy of the whole 72-byte entry).
    #[inline]
    pub(super) fn ts_unlink(&mut self, seq: u32) {
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
        self.ts_unlink(seq);
        self.ts_append(seq);
    }

    /// [`TcpSender::ts_push_back`] of a segment not on the list (a new segment's entry,
    /// just pushed), without the unlink's look-up.
    #[inline]
    pub(super) fn ts_append(&mut self, seq: u32) {
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
