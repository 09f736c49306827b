//! Harsh RED (HRED; Järvinen, Ding, Nyrhinen & Kojo, "Harsh RED: Improving RED for Limited
//! Aggregate Traffic", IEEE AINA 2012): RED with a packet-based average and thresholds, a
//! small min_th, a large max_p and a fast average (w_q 0.02 or 0.04), so that the slow start
//! of a few flows is signalled in time instead of ending in tail drop.
//!
//! HRED is RED with different parameters and units, so it runs on the shared RED machinery of
//! [`super::red`] (count-based marking with a cached random number, ECN/harddrop/nodrop
//! actions, idle handling, FIFO child). Only the average differs: here it is a real-valued
//! EWMA of the queue length in packets, as in ns-2's `REDQueue` (the simulator the HRED
//! papers used), with an optional "gentle" ramp above max_th (Floyd, "Optimum functions for
//! computing the drop probability", http://icir.org/floyd/red/gentle.html).

use super::red::{Average, Backlog, Flags, Red, Zone};
use super::{BuildCtx, Fifo, Params, Qdisc, QdiscConfig};
use crate::time::{Rate, Time};
use std::sync::Arc;

/// The packet-based, real-valued RED average (ns-2 `REDQueue::estimator`, `calculate_p_new`).
#[derive(Clone, Debug)]
pub(super) struct PacketAverage {
    /// Average queue length, packets.
    pub avg: f64,
    w: f64,
    min: f64,
    max: f64,
    max_p: f64,
    gentle: bool,
    /// Packets of `avpkt` bytes the link sends per second (ns-2 `ptc`), for idle decay.
    ptc: f64,
}

impl PacketAverage {
    /// Floyd's Pb for the current average: 0 .. max_p linearly from min_th to max_th; with
    /// gentle, max_p .. 1 from max_th to 2 max_th; 1 beyond.
    pub fn pb(&self) -> f64 {
        let a = self.avg;
        if a < self.min {
            0.0
        } else if a < self.max {
            self.max_p * (a - self.min) / (self.max - self.min)
        } else if self.gentle {
            (self.max_p + (1.0 - self.max_p) * (a - self.max) / self.max).min(1.0)
        } else {
            1.0
        }
    }
}

impl Average for PacketAverage {
    fn update(&mut self, backlog: Backlog) {
        self.avg = self.avg * (1.0 - self.w) + self.w * backlog.packets as f64;
    }
    /// ns-2: the idle time counts as m = floor(idle * ptc) arrivals to an empty queue, then
    /// the arrival's own update: avg (1-w)^m, then the usual EWMA step.
    fn update_after_idle(&mut self, idle: Time, backlog: Backlog) {
        let m = (self.ptc * idle.as_secs_f64()).floor().min(i32::MAX as f64) as i32;
        self.avg *= (1.0 - self.w).powi(m);
        self.update(backlog);
    }
    fn zone(&self) -> Zone {
        let hard = if self.gentle { 2.0 * self.max } else { self.max };
        if self.avg < self.min {
            Zone::Below
        } else if self.avg >= hard {
            Zone::Above
        } else {
            Zone::Between
        }
    }
    fn draw(&self, r: u32) -> u64 {
        r as u64
    }
    fn reached(&self, count: u64, q_r: u64) -> bool {
        // Pb * count >= U with U = q_r / 2^32 uniform in [0, 1).
        self.pb() * count as f64 * 4294967296.0 >= q_r as f64
    }
    fn xstats(&self, out: &mut Vec<(&'static str, f64)>) {
        out.push(("qavg", self.avg));
        out.push(("pb", self.pb()));
    }
}

/// Parsed `hred` parameters.
#[derive(Clone, Debug, PartialEq)]
struct HredConfig {
    limit: u32,
    min: f64,
    max: f64,
    wq: f64,
    max_p: f64,
    gentle: bool,
    avpkt: u32,
    /// Defaults to the link rate.
    bandwidth: Option<Rate>,
    flags: Flags,
}

impl HredConfig {
    fn average(&self, link_rate: Rate) -> PacketAverage {
        let bw = self.bandwidth.unwrap_or(link_rate);
        PacketAverage {
            avg: 0.0,
            w: self.wq,
            min: self.min,
            max: self.max,
            max_p: self.max_p,
            gentle: self.gentle,
            ptc: bw.bits_per_sec() as f64 / (8.0 * self.avpkt as f64),
        }
    }
}

impl QdiscConfig for HredConfig {
    fn kind(&self) -> &'static str {
        "hred"
    }
    fn build(&self, ctx: &mut BuildCtx) -> Box<dyn Qdisc> {
        Box::new(Red::new("hred", self.average(ctx.link_rate), self.flags, Fifo::pfifo(self.limit), ctx.rng.clone()))
    }
}

fn read_hred(p: &mut Params) -> Result<HredConfig, String> {
    let known = "limit, min, max, wq, max_p, gentle, ecn, harddrop, nodrop, avpkt, bandwidth";
    let mut c = HredConfig {
        limit: 100,
        min: 3.0,
        max: 40.0,
        wq: 0.02,
        max_p: 0.65,
        gentle: true,
        avpkt: 1000,
        bandwidth: None,
        flags: Flags::default(),
    };
    while let Some(key) = p.next_key() {
        match key {
            "limit" => c.limit = p.uint(key, 1..=u32::MAX as u64)? as u32,
            "min" => c.min = p.real(key, 0.0..=1e9)?,
            "max" => c.max = p.real(key, 0.0..=1e9)?,
            "wq" => c.wq = p.real(key, 0.0..=1.0)?,
            "max_p" => c.max_p = p.real(key, 0.0..=1.0)?,
            "gentle" => c.gentle = true,
            "nogentle" => c.gentle = false,
            "avpkt" => c.avpkt = p.uint(key, 1..=u32::MAX as u64)? as u32,
            "bandwidth" => c.bandwidth = Some(p.rate(key)?),
            _ if c.flags.parse(key, false) => {}
            _ => return Err(p.unknown(key, known)),
        }
    }
    if c.max <= c.min {
        return Err(p.invalid(format!("max {} must be above min {}", c.max, c.min)));
    }
    if c.wq <= 0.0 {
        return Err(p.invalid("wq must be above 0"));
    }
    if c.max_p <= 0.0 {
        return Err(p.invalid("max_p must be above 0"));
    }
    c.flags.validate().map_err(|e| p.invalid(e))?;
    Ok(c)
}

/// `hred [limit PACKETS] [min PACKETS] [max PACKETS] [wq W] [max_p P] [gentle|nogentle]
/// [ecn] [harddrop] [nodrop] [avpkt BYTES] [bandwidth RATE]`. Defaults: the load-transient
/// study's setting (limit 100, min 3, max 40, wq 0.02, max_p 0.65), gentle on, ECN off.
pub fn parse_hred(p: &mut Params) -> Result<Arc<dyn QdiscConfig>, String> {
    Ok(Arc::new(read_hred(p)?))
}

#[cfg(test)]
mod tests {
    use super::*;
}
