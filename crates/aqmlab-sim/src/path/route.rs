//! An endpoint pair's way through the path: the element indices per direction and the hosts
//! its packets carry.

use crate::packet::{Direction, Packet};

/// The route of one endpoint pair (a TCP flow, a probe, ..., all transfers of a workload).
#[derive(Debug)]
pub struct Route {
    /// Element indices, per `Direction` (data, then its feedback).
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
        Route { hops, hosts }
    }
    /// The element at position `hop` of direction `dir`; `None` past the end (the far
    /// endpoint).
    #[inline]
    pub fn hop(&self, dir: Direction, hop: u8) -> Option<u32> {
        self.hops[dir as usize].get(hop as usize).copied()
    }
    /// The element indices of direction `dir`.
    pub fn hops(&self, dir: Direction) -> &[u32] {
        &self.hops[dir as usize]
    }
    /// Whether the data travels from the server side (host 0) to the client: a download.
    pub fn data_down(&self) -> bool {
        self.hosts[Direction::Forward as usize].0 == 0
    }
    /// Sets a new packet's source and destination hosts.
    #[inline]
    pub fn address(&self, pkt: &mut Packet) {
        (pkt.src_host, pkt.dst_host) = self.hosts[pkt.dir as usize];
    }
}
