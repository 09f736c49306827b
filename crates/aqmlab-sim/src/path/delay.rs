//! A constant propagation delay: one direction of a flow's base RTT, a shared link's own
//! delay.

use super::ElementCtx;
use crate::host::HostJitter;
use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// A constant propagation delay. Packets keep their order, so a FIFO with one pending
/// wake-up (for its head) suffices.
#[derive(Debug)]
pub struct DelayLine {
    delay: Time,
    line: VecDeque<(Time, Packet)>,
    /// A host's timing noise, on the delay line right after that host ([`crate::host`]);
    /// inline (24 bytes, the line stays 64) so receive touches no other allocation for it
    /// unless it draws.
    jitter: Option<HostJitter>,
}

impl DelayLine {
    pub fn new(delay: Time) -> Self {
        // Grows (doubling) to the most packets the line has held: a flow's line at 1 Gbit/s
        // holds hundreds, one of 10,000 flows' a few, and a ring sized to its use keeps its
        // slots in cache (64 slots of 120 bytes per line were 15 MB for 1000 flows).
        DelayLine { delay, line: VecDeque::with_capacity(4), jitter: None }
    }
    /// Adds the timing noise of the host that hands packets to this line.
    pub fn with_jitter(&mut self, jitter: HostJitter) {
        self.jitter = Some(jitter);
    }
    pub fn delay(&self) -> Time {
        self.delay
    }
    pub(crate) fn receive(&mut self, pkt: Packet, ctx: &mut ElementCtx) {
        let mut due = ctx.now + self.delay;
        if let Some(j) = &mut self.jitter {
            due = j.departure(ctx.now, due);
        }
        if self.line.is_empty() {
            ctx.wake_at(due);
        }
        self.line.push_back((due, pkt));
    }
    pub(crate) fn wake(&mut self, ctx: &mut ElementCtx) {
        // The head's due time is read before its packet is copied (the entry is 120 bytes).
        while let Some(due) = self.line.front().map(|e| e.0) {
            if due > ctx.now {
                ctx.wake_at(due);
                return;
            }
            if let Some((_, pkt)) = self.line.pop_front() {
                ctx.out.push(pkt);
            }
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
