//! CUBIC (RFC 9438; Linux `net/ipv4/tcp_cubic.c`). Placeholder until implemented: behaves as Reno.

use super::{CongestionControl, Reno, TcpCcState};

#[derive(Debug, Default)]
pub struct Cubic {
    reno: Reno,
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn ssthresh(&mut self, tp: &TcpCcState) -> u32 {
        self.reno.ssthresh(tp)
    }
    fn cong_avoid(&mut self, tp: &mut TcpCcState, acked: u32) {
        self.reno.cong_avoid(tp, acked)
    }
}
