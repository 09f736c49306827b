//! Delivery-rate samples (Linux `net/ipv4/tcp_rate.c`: `tcp_rate_skb_delivered`,
//! `tcp_rate_gen`), which give `tcpi_delivery_rate`.

use super::ack::AckState;
use super::queue::*;
use super::TcpSender;
use crate::cc::RateSample;
use crate::time::Time;

impl TcpSender {
    /// The rate-sample stage of `tcp_ack` (Linux `tcp_rate_gen` and the end of an
    /// application-limited phase): losses and deliveries of this ACK, then the sample.
    pub(super) fn rate_gen(&mut self, st: &mut AckState) {
        let now = self.tp.now;
        let newly_lost = (self.tp.lost - st.prior_lost) as u32;
        if self.tp.app_limited != 0 && self.tp.delivered > self.tp.app_limited {
            self.tp.app_limited = 0;
        }
        if st.delivered > 0 {
            self.tp.delivered_mstamp = now;
        }
        st.rs.acked_sacked = st.delivered;
        st.rs.ece_delta = st.ce_delta;
        st.rs.losses = newly_lost;
        st.rs.rtt = st.ca_rtt;
        st.rs.is_ece = st.fl.ece;
        self.finish_rate_sample(&mut st.rs, st.prior, now);
    }

    /// `tcpi_delivery_rate` in bits per second (0 before the first valid sample). The MSS is the
    /// socket's copy (the configuration's, in another cache line): the sampling pass reads
    /// this at every tick, next to `srtt` and `cwnd`.
    pub fn delivery_rate_bps(&self) -> f64 {
        if self.tp.rate_interval == Time::ZERO {
            return 0.0;
        }
        self.tp.rate_delivered as f64 * self.tp.mss as f64 * 8.0 / self.tp.rate_interval.as_secs_f64()
    }

    /// Linux `tcp_rate_skb_delivered`: the most recently sent delivered packet sets the sample.
    /// `prior` is (delivered, delivered_ce, delivered time) at that packet's transmission.
    pub(super) fn rate_skb_delivered(&mut self, seg: &Seg, rs: &mut RateSample, prior: &mut Option<(u64, u64, Time)>) {
        let dt = seg.delivered_time;
        if prior.map_or(true, |(p, _, _)| seg.delivered > p) {
            *prior = Some((seg.delivered, seg.delivered_ce, dt));
            rs.is_app_limited = seg.flags & APP_LIMITED != 0;
            rs.is_retrans = seg.flags & EVER_RETRANS != 0;
            rs.prior_delivered = seg.delivered;
            rs.tx_in_flight = seg.tx_in_flight;
            // The snapshot for now; finish_rate_sample turns it into losses since then.
            rs.lost = seg.tx_lost;
            self.first_tx_time = seg.tx_time;
            rs.interval = seg.tx_time - seg.first_tx;
        }
    }

    /// Linux `tcp_rate_gen`.
    pub(super) fn finish_rate_sample(&mut self, rs: &mut RateSample, prior: Option<(u64, u64, Time)>, now: Time) {
        let Some((p, p_ce, prior_time)) = prior else {
            rs.delivered = -1;
            return;
        };
        rs.lost = self.tp.lost - rs.lost;
        rs.delivered = (self.tp.delivered - p) as i64;
        rs.delivered_ce = (self.tp.delivered_ce - p_ce) as i64;
        let ack_elapsed = now - prior_time;
        rs.interval = rs.interval.max(ack_elapsed);
        if rs.interval < self.tp.min_rtt {
            rs.delivered = -1;
            rs.interval = Time::ZERO;
            return;
        }
        let d = rs.delivered as u64;
        if !rs.is_app_limited || d as u128 * self.tp.rate_interval.0 as u128 >= self.tp.rate_delivered as u128 * rs.interval.0 as u128 {
            self.tp.rate_delivered = d;
            self.tp.rate_interval = rs.interval;
        }
    }
}
