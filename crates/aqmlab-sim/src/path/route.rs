//! An endpoint pair's way through the path: the element indices per direction and the hosts
//! its packets carry.

use crate::packet::{Direction, Packet};

/// Hops a direction keeps inline (a flow's own delay, its per-flow elements, the shared
/// links); longer routes (many upstream links) are read from `spill`. Five, so that a route
/// is one 64-byte cache line.
const INLINE_HOPS: usize = 5;

/// The route of one endpoint pair (a TCP flow, a probe, ..., all transfers of a workload).
///
/// Read on every hop of every packet, from a table with one route per flow: one cache line,
/// aligned (issue #15: the 96-byte route it replaces straddled two lines, and its hop count
/// sat in the second; with 1000 flows the load of that count was the engine loop's most
/// sampled instruction, 17 % of its samples).
#[derive(Debug)]
#[repr(align(64))]
pub struct Route {
    /// Element indices, per `Direction` (data, then its feedback), inline in the endpoint
    /// table when they fit, so the lookup on every hop reads no other allocation.
    inline: [[u32; INLINE_HOPS]; 2],
    len: [u8; 2],
    /// (source, destination) host of each direction's packets. Client hosts are numbered from
    /// 1 on the client side; the server side is host 0.
    hosts: [(u16, u16); 2],
    /// Every direction's elements, only for a route with a direction longer than inline.
    spill: Option<Box<[Box<[u32]>; 2]>>,
}

impl Route {
    /// `hops` per `Direction`; `host` is the scenario's client host, `data_down` whether the
    /// data (`Direction::Forward`) travels from the server side to the client.
    pub fn new(hops: [Box<[u32]>; 2], host: u16, data_down: bool) -> Route {
        let client = host + 1;
        let [up, down] = [(client, 0), (0, client)];
        let hosts = if data_down { [down, up] } else { [up, down] };
        let mut inline = [[0; INLINE_HOPS]; 2];
        let mut len = [0u8; 2];
        for d in 0..2 {
            assert!(hops[d].len() < u8::MAX as usize, "a route has fewer than 255 hops (Packet::hop is a u8)");
            len[d] = hops[d].len() as u8;
            if hops[d].len() <= INLINE_HOPS {
                inline[d][..hops[d].len()].copy_from_slice(&hops[d]);
            }
        }
        let spill = (hops.iter().any(|h| h.len() > INLINE_HOPS)).then(|| Box::new(hops));
        Route { inline, len, hosts, spill }
    }
    /// The element at position `hop` of direction `dir`; `None` past the end (the far
    /// endpoint).
    #[inline]
    pub fn hop(&self, dir: Direction, hop: u8) -> Option<u32> {
        let (d, h) = (dir as usize, hop as usize);
        let len = self.len[d] as usize;
        if h >= len {
            None
        } else if len <= INLINE_HOPS {
            Some(self.inline[d][h])
        } else {
            Some(self.spill.as_ref().expect("a long route spills")[d][h])
        }
    }
    /// The element indices of direction `dir`.
    pub fn hops(&self, dir: Direction) -> &[u32] {
        let d = dir as usize;
        match &self.spill {
            Some(s) => &s[d],
            None => &self.inline[d][..self.len[d] as usize],
        }
    }
    /// Sets a new packet's source and destination hosts.
    #[inline]
    pub fn address(&self, pkt: &mut Packet) {
        (pkt.src_host, pkt.dst_host) = self.hosts[pkt.dir as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One cache line per route, and long routes read from the spill.
    #[test]
    fn a_route_is_one_cache_line_and_long_routes_spill() {
        assert_eq!(std::mem::size_of::<Route>(), 64);
        let short = Route::new([vec![3, 1].into(), vec![4, 2].into()], 0, false);
        assert_eq!((short.hop(Direction::Forward, 1), short.hop(Direction::Forward, 2)), (Some(1), None));
        assert_eq!(short.hops(Direction::Reverse), &[4, 2]);
        let long: Box<[u32]> = (10..20).collect();
        let r = Route::new([long.clone(), vec![7].into()], 2, true);
        assert_eq!((0..11).map(|h| r.hop(Direction::Forward, h)).collect::<Vec<_>>(), long.iter().map(|&e| Some(e)).chain([None]).collect::<Vec<_>>());
        assert_eq!((r.hops(Direction::Forward), r.hop(Direction::Reverse, 0)), (&long[..], Some(7)));
    }
}
