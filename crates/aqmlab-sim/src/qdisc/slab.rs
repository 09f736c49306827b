//! A slab of queued packets for disciplines that keep their queues as intrusive linked lists
//! (`cake`'s per-flow queues, `lfq_cobalt`'s scan queues): entries are addressed by `u32`
//! index, each carries a `next` link, and freed entries are reused last-freed first through
//! an intrusive free list threaded through the same link.

/// The null link (no entry).
pub const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry<T> {
    val: T,
    next: u32,
}

/// Entries of type `T`, each with a `next` link, and a free list.
#[derive(Debug)]
pub struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: u32,
}

/// The two ends of a list of slab entries linked by `next`; `NIL` when empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ends {
    pub head: u32,
    pub tail: u32,
}

impl Default for Ends {
    fn default() -> Ends {
        Ends { head: NIL, tail: NIL }
    }
}

impl Ends {
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

impl<T: Copy> Slab<T> {
    pub fn with_capacity(n: usize) -> Slab<T> {
        Slab { entries: Vec::with_capacity(n), free: NIL }
    }

    /// Stores `val` with no `next` link, in the last freed entry if there is one.
    fn alloc(&mut self, val: T) -> u32 {
        let e = Entry { val, next: NIL };
        if self.free != NIL {
            let i = self.free;
            self.free = self.entries[i as usize].next;
            self.entries[i as usize] = e;
            i
        } else {
            self.entries.push(e);
            (self.entries.len() - 1) as u32
        }
    }

    /// Frees entry `i` and returns its value and its `next` link.
    pub fn release(&mut self, i: u32) -> (T, u32) {
        let Entry { val, next } = self.entries[i as usize];
        self.entries[i as usize].next = self.free;
        self.free = i;
        (val, next)
    }

    /// Appends `val` to the list `ends`; returns its index.
    pub fn push_back(&mut self, ends: &mut Ends, val: T) -> u32 {
        let i = self.alloc(val);
        match ends.tail {
            NIL => ends.head = i,
            t => self.entries[t as usize].next = i,
        }
        ends.tail = i;
        i
    }

    /// Removes the head of the list `ends` (singly linked).
    pub fn pop_front(&mut self, ends: &mut Ends) -> Option<T> {
        if ends.head == NIL {
            return None;
        }
        let (val, next) = self.release(ends.head);
        ends.head = next;
        if next == NIL {
            ends.tail = NIL;
        }
        Some(val)
    }

    pub fn get(&self, i: u32) -> &T {
        &self.entries[i as usize].val
    }
    pub fn get_mut(&mut self, i: u32) -> &mut T {
        &mut self.entries[i as usize].val
    }
    /// Calls `f` on every entry of the list `ends`, head first (not on the packet path).
    pub fn for_each(&self, ends: &Ends, mut f: impl FnMut(&T)) {
        let mut i = ends.head;
        while i != NIL {
            let e = &self.entries[i as usize];
            f(&e.val);
            i = e.next;
        }
    }
    /// The entry after `i` in its list (lfq's tests walk the bulk queue with it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn next(&self, i: u32) -> u32 {
        self.entries[i as usize].next
    }
    pub fn set_next(&mut self, i: u32, next: u32) {
        self.entries[i as usize].next = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_share_the_slab_and_freed_entries_are_reused_last_first() {
        let mut s = Slab::with_capacity(4);
        let (mut a, mut b) = (Ends::default(), Ends::default());
        assert_eq!([s.push_back(&mut a, 1), s.push_back(&mut b, 2), s.push_back(&mut a, 3)], [0, 1, 2]);
        assert_eq!((s.next(0), *s.get(2)), (2, 3));
        assert_eq!(s.pop_front(&mut a), Some(1));
        assert_eq!(s.pop_front(&mut b), Some(2));
        assert!(b.is_empty() && b == Ends::default());
        // Entry 1 was freed last, then 0.
        assert_eq!([s.push_back(&mut b, 4), s.push_back(&mut b, 5), s.push_back(&mut b, 6)], [1, 0, 3]);
        assert_eq!((a, b), (Ends { head: 2, tail: 2 }, Ends { head: 1, tail: 3 }));
        assert_eq!(std::iter::from_fn(|| s.pop_front(&mut b)).collect::<Vec<_>>(), [4, 5, 6]);
    }
}
