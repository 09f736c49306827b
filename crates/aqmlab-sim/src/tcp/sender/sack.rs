//! The SACK scoreboard (Linux `net/ipv4/tcp_input.c`: `tcp_sacktag_write_queue`,
//! `tcp_sacktag_one`, `tcp_check_dsack`, `tcp_dsack_seen`, `tcp_check_sack_reordering`,
//! `tcp_mark_skb_lost`).

use super::ack::{widen, AckFlags, AckState};
use super::queue::*;
use super::{TcpSender, TCP_MAX_REORDERING};
use crate::cc::{CaState, CongestionControl, LostSkb};
use crate::packet::{Packet, SackBlock, MAX_SACK_BLOCKS};
use std::num::NonZeroU32;
use std::ops::Range;

/// Whether the first SACK block is a D-SACK (Linux `tcp_check_dsack`, RFC 2883 §4): below
/// the cumulative ACK, or inside the second block.
pub(super) fn is_dsack(blocks: &[SackBlock], ack: u32) -> bool {
    let b0 = blocks[0];
    b0.start < ack || (blocks.len() > 1 && b0.end <= blocks[1].end && b0.start >= blocks[1].start)
}

impl TcpSender {
    /// Linux `tcp_sacktag_write_queue`: a D-SACK first block (`tcp_check_dsack`) counts
    /// duplicates; the regular blocks, sorted, with the ranges processed for the previous
    /// ACK skipped (`recv_sack_cache`), mark their segments SACKed (`tcp_sacktag_one`),
    /// advancing RACK and the delivery-rate sample. A never-retransmitted segment SACKed
    /// below the highest SACKed one filled a hole: reordering (`tcp_check_sack_reordering`).
    pub(super) fn sacktag_write_queue(&mut self, pkt: &Packet, st: &mut AckState) {
        let now = self.tp.now;
        let n = pkt.tcp.sack_len as usize;
        let blocks = pkt.sacks();
        // The lowest reordered segment.
        let mut reord = self.tp.snd_nxt;
        let mut first = 0;
        // The part of a D-SACK block still in the window (segments not cumulatively ACKed).
        let mut dsack_in_window = 0..0;
        if is_dsack(&blocks[..n], pkt.tcp.seq) {
            first = 1;
            dsack_in_window = self.sacktag_dsack(blocks[0], st, &mut reord);
        }
        let mut regular = [SackBlock::default(); MAX_SACK_BLOCKS];
        let nreg = n.saturating_sub(first);
        regular[..nreg].copy_from_slice(&blocks[first..n]);
        regular[..nreg].sort_by_key(|b| b.start);
        for b in &regular[..nreg] {
            let start = b.start.max(self.tp.snd_una);
            let end = b.end.min(self.tp.snd_nxt);
            let mut s = start;
            while s < end {
                // Jump over any range processed for the previous ACK.
                if let Some(c) = self.sack_cache.iter().find(|c| c.start <= s && s < c.end) {
                    s = c.end;
                    continue;
                }
                let seg = *self.seg(s);
                if seg.flags & SACKED == 0 {
                    self.rack_advance(seg.flags, s, seg.tx_time, now);
                    if seg.flags & EVER_RETRANS == 0 {
                        if s < self.fack() && s < reord {
                            reord = s;
                        }
                        st.sackt = widen(st.sackt, seg.tx_time);
                    }
                    self.mark_sacked(s);
                    st.fl.data_sacked = true;
                    st.delivered += 1;
                    self.rate_skb_delivered(&seg, &mut st.rs, &mut st.prior);
                }
                s += 1;
            }
        }
        // The end of tcp_sacktag_one with dup_sack: a D-SACKed segment that is SACKed (here
        // by a regular block, of this or an earlier ACK) and still counted as a
        // retransmission in flight (S|R) was a redundant retransmission: it is not in flight.
        for s in dsack_in_window {
            let f = self.seg(s).flags;
            if f & (SACKED | RETRANS) == SACKED | RETRANS {
                self.seg_mut(s).flags &= !RETRANS;
                self.tp.retrans_out -= 1;
            }
        }
        self.sack_cache = [SackBlock::default(); MAX_SACK_BLOCKS];
        self.sack_cache[..nreg].copy_from_slice(&regular[..nreg]);
        if self.tp.ca_state != CaState::Loss || self.undo_marker.is_some() {
            self.check_sack_reordering(reord, false);
        }
    }

    /// Linux `tcp_check_dsack` and the D-SACK part of `tcp_sacktag_one`: a D-SACK block
    /// (RFC 2883) delivers its duplicates ("a spurious retransmission is delivered") and
    /// counts them against the retransmissions undo waits for; a D-SACKed retransmission
    /// already SACKed is reordering. Returns the block's part still in the window.
    fn sacktag_dsack(&mut self, d: SackBlock, st: &mut AckState, reord: &mut u32) -> Range<u32> {
        let dup_segs = self.dsack_seen(d, &mut st.fl);
        if dup_segs == 0 {
            return 0..0;
        }
        st.fl.dsack = true;
        st.delivered += dup_segs;
        self.tp.delivered += dup_segs as u64;
        // D-SACK for data already cumulatively ACKed: dumb counting.
        if let Some(m) = self.undo_marker {
            if self.undo_retrans > 0 && d.end <= st.fl.prior_una && d.end > m {
                self.undo_retrans = (self.undo_retrans - dup_segs as i32).max(0);
            }
        }
        // tcp_sacktag_one with dup_sack for segments still in the window.
        let in_window = d.start.max(self.tp.snd_una)..d.end.min(self.tp.snd_nxt);
        for s in in_window.clone() {
            let f = self.seg(s).flags;
            if f & EVER_RETRANS != 0 {
                if let Some(m) = self.undo_marker {
                    if self.undo_retrans > 0 && s + 1 > m {
                        self.undo_retrans -= 1;
                    }
                }
                if f & SACKED != 0 && s < *reord {
                    *reord = s;
                }
            }
        }
        in_window
    }

    /// Linux `tcp_sacktag_one` for a newly SACKed segment: a retransmission not marked lost
    /// is still believed in flight (RETRANS kept until the cumulative ACK).
    pub(super) fn mark_sacked(&mut self, seq: u32) {
        let mut flags = self.seg(seq).flags;
        if flags & RETRANS != 0 {
            if flags & LOST != 0 {
                flags &= !(LOST | RETRANS);
                self.tp.lost_out -= 1;
                self.tp.retrans_out -= 1;
            }
        } else if flags & LOST != 0 {
            flags &= !LOST;
            self.tp.lost_out -= 1;
        }
        self.seg_mut(seq).flags = flags | SACKED;
        self.ts_unlink(seq);
        self.tp.sacked_out += 1;
        self.tp.delivered += 1;
        self.highest_sack = self.highest_sack.max(seq + 1);
    }

    /// Linux `tcp_highest_sack_seq`: the end of the highest SACKed segment, or snd_una.
    pub(super) fn fack(&self) -> u32 {
        self.highest_sack.max(self.tp.snd_una)
    }

    /// Linux `tcp_check_sack_reordering`: a hole at `low_seq` below the highest SACKed
    /// segment was filled by the original transmission; raise `tp->reordering` to that
    /// distance (at most `tcp_max_reordering`) and remember that reordering was seen.
    pub(super) fn check_sack_reordering(&mut self, low_seq: u32, _ts: bool) {
        let fack = self.fack();
        if low_seq >= fack {
            return;
        }
        let metric = fack - low_seq;
        if metric > self.reordering {
            self.reordering = metric.min(TCP_MAX_REORDERING);
        }
        self.reord_seen += 1;
    }

    /// Linux `tcp_dsack_seen`: the number of duplicate segments a D-SACK block reports, 0 for
    /// a dubious one (more duplicates than retransmissions); arms the RACK window growth
    /// when reordering has been seen and the D-SACK is not for a loss probe.
    pub(super) fn dsack_seen(&mut self, d: SackBlock, fl: &mut AckFlags) -> u32 {
        if d.start >= d.end {
            return 0;
        }
        let dup_segs = d.end - d.start;
        if dup_segs == 1 && self.tlp_high_seq.map(NonZeroU32::get) == Some(d.end) {
            fl.dsack_tlp = true;
        }
        self.dsack_dups += dup_segs as u64;
        if self.dsack_dups > self.stats.retransmits {
            return 0;
        }
        if self.reord_seen > 0 && !fl.dsack_tlp {
            self.rack_dsack_seen = true;
        }
        self.stats.dsack_segments += dup_segs as u64;
        dup_segs
    }

    /// Linux `tcp_mark_skb_lost`: mark a segment lost, or a lost retransmission lost again.
    pub(super) fn mark_skb_lost(&mut self, seq: u32) {
        let flags = self.seg(seq).flags;
        if flags & SACKED != 0 {
            return;
        }
        if flags & LOST != 0 {
            if flags & RETRANS == 0 {
                return;
            }
            // A retransmission lost again: due for another retransmission.
            self.seg_mut(seq).flags &= !RETRANS;
            self.tp.retrans_out -= 1;
        } else {
            self.seg_mut(seq).flags |= LOST;
            self.tp.lost_out += 1;
        }
        self.tp.lost += 1;
        self.retransmit_hint = self.retransmit_hint.min(seq);
        let seg = *self.seg(seq);
        self.notify_lost(&seg);
    }

    /// google/bbr `tcp_mark_skb_lost` -> `.skb_marked_lost`, after `tp->lost` counts it.
    pub(super) fn notify_lost(&mut self, seg: &Seg) {
        let skb = LostSkb {
            tx_in_flight: seg.tx_in_flight,
            lost: self.tp.lost - seg.tx_lost,
            is_app_limited: seg.flags & APP_LIMITED != 0,
        };
        self.cc.skb_marked_lost(&self.tp, &skb);
    }
}
