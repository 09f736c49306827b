//! The out-of-line part of a packet: fields only some packets carry (SACK blocks, a tunnel's
//! tag), kept in a slab so that [`Packet`](crate::packet::Packet) fits
//! in one 64-byte cache line and every move of a packet (the outbox, delay lines, queues, the
//! wire) copies 64 bytes instead of 112.
//!
//! A packet refers to its slot by a handle (`Packet::ext`, 0: none); a slot is taken the
//! first time one of these fields is written and given back where the packet ends: delivery
//! to an endpoint (the engine's loop), every drop (`QdiscStats::drop` sees every discipline's
//! drops, netem's loss and limit drops, the tunnel exit's replay and ECN drops) and the
//! discard of a replaced discipline's queue; a tunnelled packet without SACK blocks gives
//! its slot back at the tunnel exit already (`Packet::take_tunnel`). Freed slots are reused (a free list), so the slab
//! grows to the most packets carrying one at a time and allocates nothing afterwards.
//!
//! The slab belongs to the [`Simulation`](crate::sim::Simulation); while it runs (inside
//! `run_until`, a qdisc replacement and the end-of-run checks) it is the thread's *active*
//! store, which the packet's accessors use. The queue disciplines, which drop packets, see
//! no context of the run (`Qdisc::enqueue(pkt, now)`), hence a thread-local rather than a
//! reference threaded through every context. Only packets that carry a slot touch it: a TCP
//! data segment or an ACK without SACK blocks costs one test of its handle at delivery.
//! Code that handles packets outside a simulation (unit tests) uses the thread's own store.
//!
//! Invariants, checked in every run: a slot is freed once (a second free, or a read of a
//! freed slot, panics with "invariant violated: packet extension"); at the end of the run the
//! slots in use are exactly those of the packets still held by the elements (none leaked).

use crate::packet::{SackBlock, TunnelTag, MAX_SACK_BLOCKS};
use std::cell::RefCell;

/// The fields a packet keeps out of line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketExt {
    /// SACK blocks (`Packet::tcp.sack_len` of them, in line, says how many are valid); on an
    /// ACK whose first block lies below the cumulative ACK (or inside the second block) the
    /// first one is a D-SACK (RFC 2883). Media feedback reports its range in `sacks[0]`.
    pub sacks: [SackBlock; MAX_SACK_BLOCKS],
    /// Set by a tunnel entry, taken off by its exit.
    pub tunnel: TunnelTag,
}

/// The slab of [`PacketExt`] slots with its free list.
#[derive(Debug, Default)]
pub struct ExtStore {
    slots: Vec<PacketExt>,
    /// Whether each slot is in use (a free of a free slot, or a read of one, is a bug).
    live: Vec<bool>,
    /// Free slots (indices), reused last-freed first.
    free: Vec<u32>,
}

impl ExtStore {
    pub const fn new() -> ExtStore {
        ExtStore { slots: Vec::new(), live: Vec::new(), free: Vec::new() }
    }
    /// A fresh (default) slot; its handle (index + 1, never 0).
    pub fn alloc(&mut self) -> u32 {
        self.alloc_with(PacketExt::default())
    }
    /// A slot holding `value`; its handle (index + 1, never 0).
    #[inline]
    pub fn alloc_with(&mut self, value: PacketExt) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = value;
                i
            }
            None => {
                self.slots.push(value);
                self.live.push(false);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 packets carry extension fields")
            }
        };
        self.live[i as usize] = true;
        i + 1
    }
    /// Gives slot `handle` back. Panics if it is not in use (freed twice).
    #[inline]
    pub fn free(&mut self, handle: u32) {
        let i = self.index(handle, "freed");
        self.live[i] = false;
        self.free.push(i as u32);
    }
    #[inline]
    pub fn get(&self, handle: u32) -> &PacketExt {
        &self.slots[self.index(handle, "read")]
    }
    #[inline]
    pub fn get_mut(&mut self, handle: u32) -> &mut PacketExt {
        let i = self.index(handle, "written");
        &mut self.slots[i]
    }
    /// Slots in use.
    pub fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }
    /// Slots the slab holds (in use or free).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
    #[inline]
    fn index(&self, handle: u32, what: &str) -> usize {
        let i = handle.wrapping_sub(1) as usize;
        if !self.live.get(i).copied().unwrap_or(false) {
            not_live(handle, what);
        }
        i
    }
}

#[cold]
#[inline(never)]
fn not_live(handle: u32, what: &str) -> ! {
    panic!("invariant violated: packet extension: slot {handle} {what} while not in use (freed twice, or used after its packet ended)")
}

thread_local! {
    static ACTIVE: RefCell<ExtStore> = const { RefCell::new(ExtStore::new()) };
}

/// Runs `f` on the thread's active store.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&mut ExtStore) -> R) -> R {
    ACTIVE.with(|s| f(&mut s.borrow_mut()))
}

/// Swaps `store` with the thread's active store: a simulation calls it with its own store
/// when it starts running and again when it stops, which gives the store back.
pub(crate) fn swap_active(store: &mut ExtStore) {
    ACTIVE.with(|s| std::mem::swap(&mut *s.borrow_mut(), store));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_counted() {
        let mut s = ExtStore::new();
        let a = s.alloc();
        let b = s.alloc();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        s.get_mut(a).tunnel.seq = 5;
        assert_eq!(s.in_use(), 2);
        s.free(a);
        assert_eq!(s.in_use(), 1);
        // The freed slot comes back, cleared.
        let c = s.alloc();
        assert_eq!(c, a);
        assert_eq!(*s.get(c), PacketExt::default());
        assert_eq!((s.in_use(), s.capacity()), (2, 2));
    }

    fn panic_message(r: std::thread::Result<()>) -> String {
        let e = r.expect_err("must panic");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn a_double_free_or_a_use_after_free_panics() {
        let mut s = ExtStore::new();
        let a = s.alloc();
        s.free(a);
        let mut s2 = ExtStore::new();
        let b = s2.alloc();
        s2.free(b);
        let msg = panic_message(std::panic::catch_unwind(move || s.free(a)));
        assert!(msg.starts_with("invariant violated: packet extension: slot 1 freed while not in use"), "{msg}");
        let msg = panic_message(std::panic::catch_unwind(move || {
            s2.get(b);
        }));
        assert!(msg.contains("slot 1 read while not in use"), "{msg}");
        let msg = panic_message(std::panic::catch_unwind(|| ExtStore::new().free(0)));
        assert!(msg.contains("slot 0 freed"), "{msg}");
    }
}
