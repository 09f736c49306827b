//! The SACK scoreboard (Linux `net/ipv4/tcp_input.c`: `tcp_sacktag_write_queue`,
//! `tcp_sacktag_one`, `tcp_check_dsack`, `tcp_dsack_seen`, `tcp_check_sack_reordering`,
//! `tcp_mark_skb_lost`).

use super::ack::AckFlags;
use super::queue::*;
use super::{TcpSender, TCP_MAX_REORDERING};
use crate::cc::LostSkb;
use crate::packet::SackBlock;

/// Whether the first SACK block is a D-SACK (Linux `tcp_check_dsack`, RFC 2883 §4): below
/// the cumulative ACK, or inside the second block.
pub(super) fn is_dsack(blocks: &[SackBlock], ack: u32) -> bool {
    let b0 = blocks[0];
    b0.start < ack || (blocks.len() > 1 && b0.end <= blocks[1].end && b0.start >= blocks[1].start)
}

impl TcpSender {
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
        if dup_segs == 1 && self.tlp_high_seq == Some(d.end) {
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
