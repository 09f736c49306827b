//! An endpoint pair's way through the path: the element indices per direction and the hosts
//! its packets carry.

use crate::packet::{Direction, Packet};

/// Hops a direction keeps inline (a flow's own delay, its per-flow elements, the shared
/// links); longer routes (many upstream links), or routes through an element index above
/// `u16::MAX`, are read from `spill`. Six `u16`s per direction, so that a route is 48 bytes
/// and the endpoint table's per-flow record (the route and the flow's packet counts,
/// `endpoint::FlowRecord`) is one 64-byte cache line.
const INLINE_HOPS: usize = 6;

/// The route of one endpoint pair (a TCP flow, a probe, ..., all transfers of a workload).
///
/// Read on every hop of every packet, from a table with one route per flow, where it shares
/// one aligned cache line with the flow's packet counts (issue #15: the 96-byte route of
/// session 4 straddled two lines, and its hop count sat in the second; with 1000 flows the
/// load of that count was the engine loop's most sampled instruction, 17 % of its samples;
/// session 7: the counts, in a table of their own, were two more misses per packet).
#[derive(Debug)]
pub struct Route {
    /// Every direction's elements, only for a route that does not fit inline.
    spill: Option<Box<[Box<[u32]>; 2]>>,
    /// Element indices, per `Direction` (data, then its feedback), inline in the endpoint
    /// table when they fit, so the lookup on every hop reads no other allocation.
    inline: [[u16; INLINE_HOPS]; 2],
    /// (source, destination) host of each direction's packets. Client hosts are numbered from
    /// 1 on the client side; the server side is host 0.
    hosts: [(u16, u16); 2],
    len: [u8; 2],
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
        let fits = |h: &[u32]| h.len() <= INLINE_HOPS && h.iter().all(|&e| e <= u16::MAX as u32);
        let spilled = !hops.iter().all(|h| fits(h));
        for d in 0..2 {
            assert!(hops[d].len() < u8::MAX as usize, "a route has fewer than 255 hops (Packet::hop is a u8)");
            len[d] = hops[d].len() as u8;
            if !spilled {
                for (slot, &e) in inline[d].iter_mut().zip(hops[d].iter()) {
                    *slot = e as u16;
                }
            }
        }
        let spill = spilled.then(|| Box::new(hops));
        Route { spill, inline, hosts, len }
    }
    /// The element at position `hop` of direction `dir`; `None` past the end (the far
    /// endpoint).
    #[inline]
    pub fn hop(&self, dir: Direction, hop: u8) -> Option<u32> {
        let (d, h) = (dir as usize, hop as usize);
        if h >= self.len[d] as usize {
            None
        } else {
            match &self.spill {
                None => Some(self.inline[d][h] as u32),
                Some(s) => Some(s[d][h]),
            }
        }
    }
    /// The element indices of direction `dir`.
    pub fn hops(&self, dir: Direction) -> Vec<u32> {
        let d = dir as usize;
        match &self.spill {
            Some(s) => s[d].to_vec(),
            None => self.inline[d][..self.len[d] as usize].iter().map(|&e| e as u32).collect(),
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

    /// A route fits in 48 bytes (the rest of its flow record's cache line holds the flow's
    /// packet counts), and long routes, or routes through element indices beyond `u16`,
    /// read from the spill.
    #[test]
    fn a_route_is_48_bytes_and_long_routes_spill() {
        assert_eq!(std::mem::size_of::<Route>(), 48);
        let short = Route::new([vec![3, 1].into(), vec![4, 2].into()], 0, false);
        assert!(short.spill.is_none());
        assert_eq!((short.hop(Direction::Forward, 1), short.hop(Direction::Forward, 2)), (Some(1), None));
        assert_eq!(short.hops(Direction::Reverse), vec![4, 2]);
        let long: Box<[u32]> = (10..20).collect();
        let r = Route::new([long.clone(), vec![7].into()], 2, true);
        assert!(r.spill.is_some());
        assert_eq!((0..11).map(|h| r.hop(Direction::Forward, h)).collect::<Vec<_>>(), long.iter().map(|&e| Some(e)).chain([None]).collect::<Vec<_>>());
        assert_eq!((r.hops(Direction::Forward), r.hop(Direction::Reverse, 0)), (long.to_vec(), Some(7)));
        let wide = Route::new([vec![1, 70_000].into(), vec![2].into()], 0, false);
        assert!(wide.spill.is_some());
        assert_eq!((wide.hop(Direction::Forward, 1), wide.hop(Direction::Reverse, 0), wide.hop(Direction::Reverse, 1)), (Some(70_000), Some(2), None));
    }
}
