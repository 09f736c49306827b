//! An endpoint pair's way through the path: the element indices per direction and the hosts
//! its packets carry.

use crate::packet::{Direction, Packet};

/// Hops a direction keeps inline (a flow's own delay, its per-flow elements, the shared
/// links); longer routes (many upstream links) are read from `spill`.
const INLINE_HOPS: usize = 6;

/// The route of one endpoint pair (a TCP flow, a probe, ..., all transfers of a workload).
#[derive(Debug)]
pub struct Route {
    /// Element indices, per `Direction` (data, then its feedback), inline in the endpoint
    /// table when they fit, so the lookup on every hop reads no other allocation.
    inline: [[u32; INLINE_HOPS]; 2],
    len: [u8; 2],
    /// Every direction's elements (the only copy read for routes longer than inline).
    hops: [Box<[u32]>; 2],
    /// (source, destination) host of each direction's packets. Client hosts are numbered from
    /// 1 on the client side; the server side is host 0.
    hosts: [(u16, u16); 2],
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
        Route { inline, len, hops, hosts }
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
            Some(self.hops[d][h])
        }
    }
    /// The element indices of direction `dir`.
    pub fn hops(&self, dir: Direction) -> &[u32] {
        &self.hops[dir as usize]
    }
    /// Sets a new packet's source and destination hosts.
    #[inline]
    pub fn address(&self, pkt: &mut Packet) {
        (pkt.src_host, pkt.dst_host) = self.hosts[pkt.dir as usize];
    }
}
