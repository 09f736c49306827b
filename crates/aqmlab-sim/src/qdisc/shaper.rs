//! CAKE's deficit-mode shaper and its link-layer compensation, shared by `cake` and the SCE
//! qdiscs (`cnq_codel_af`, `twin_codel_af`, `lfq_cobalt`), which carry a copy of it
//! ("the deficit-mode shaper from CAKE is also implemented here").
//!
//! - [`TimePerByte`]: the rate as fixed-point nanoseconds per byte (`cake_set_rate`,
//!   `cnq_change`: `rate_ns`, `rate_shft`).
//! - [`Compensation`]: the length the shaper counts (`cake_calc_overhead`,
//!   `cnq_calc_overhead`): overhead, MPU, ATM cells, PTM 64b/65b; and [`CompensationParser`],
//!   tc's keywords for it (iproute2 `q_cake.c`, and the same table in the SCE fork's tc).
//! - [`Shaper`]: the virtual clock (`time_next_packet`): a packet may leave when the clock has
//!   been reached; each packet sent advances it by its serialisation time at the rate; an idle
//!   shaper banks no credit (`cnq_unstale_shaper`, CAKE's "ensure shaper state isn't stale").

use super::{Param, Params, Type, Value};
use crate::params::read_one;
use crate::packet::ETHERNET_HEADER_BYTES;
use crate::time::Time;

/// Time per byte in fixed point, `rate_ns >> rate_shft`; zero = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimePerByte {
    ns: u64,
    shift: u32,
}

impl TimePerByte {
    /// `cake_set_rate` / `cnq_change`: `(NSEC_PER_SEC << 34) / max(64, rate)`, shifted down
    /// until it fits 34 bits. A zero rate is unlimited.
    pub fn new(bytes_per_sec: u64) -> TimePerByte {
        if bytes_per_sec == 0 {
            return TimePerByte::default();
        }
        const MIN_RATE: u64 = 64;
        let mut shift = 34;
        let mut ns = ((1_000_000_000u128 << shift) / bytes_per_sec.max(MIN_RATE) as u128) as u64;
        while ns >> 34 != 0 {
            ns >>= 1;
            shift -= 1;
        }
        TimePerByte { ns, shift }
    }
    pub fn unlimited(self) -> bool {
        self.ns == 0
    }
    /// Serialisation time of `bytes` at this rate.
    pub fn duration(self, bytes: u32) -> Time {
        Time((bytes as u64 * self.ns) >> self.shift)
    }
}

/// Link-layer framing for the shaper (`CAKE_ATM_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    None,
    /// 48-byte payload per 53-byte ATM cell.
    Atm,
    /// PTM 64b/65b: one byte per 64 or part thereof.
    Ptm,
}

/// What the shaper adds to a packet's length (`rate_overhead`, `rate_mpu`, `rate_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compensation {
    pub overhead: i32,
    /// Remove the MAC header before adding `overhead` (`CAKE_FLAG_OVERHEAD`).
    pub overhead_flag: bool,
    pub mpu: u32,
    pub framing: Framing,
}

impl Default for Compensation {
    fn default() -> Self {
        Compensation { overhead: 0, overhead_flag: false, mpu: 0, framing: Framing::None }
    }
}

impl Compensation {
    /// `cake_calc_overhead` / `cnq_calc_overhead` for a packet of `wire_len` bytes (which
    /// include the Ethernet header, the network offset Linux subtracts).
    pub fn adjusted_len(&self, wire_len: u32) -> u32 {
        let mut len = wire_len as i64;
        if self.overhead_flag {
            len -= ETHERNET_HEADER_BYTES as i64;
        }
        len = (len + self.overhead as i64).max(0).max(self.mpu as i64);
        match self.framing {
            Framing::None => {}
            Framing::Atm => len = (len + 47) / 48 * 53,
            Framing::Ptm => len += (len + 63) / 64,
        }
        len as u32
    }
}

/// tc's framing keywords: (name, framing, overhead added, mpu).
const FRAMINGS: &[(&str, Option<Framing>, i32, Option<u32>)] = &[
    ("ipoa-vcmux", Some(Framing::Atm), 8, None),
    ("ipoa-llcsnap", Some(Framing::Atm), 16, None),
    ("bridged-vcmux", Some(Framing::Atm), 24, None),
    ("bridged-llcsnap", Some(Framing::Atm), 32, None),
    ("pppoa-vcmux", Some(Framing::Atm), 10, None),
    ("pppoa-llc", Some(Framing::Atm), 14, None),
    ("pppoe-vcmux", Some(Framing::Atm), 32, None),
    ("pppoe-llcsnap", Some(Framing::Atm), 40, None),
    ("pppoe-ptm", Some(Framing::Ptm), 30, None),
    ("bridged-ptm", Some(Framing::Ptm), 22, None),
    ("ethernet", None, 38, Some(84)),
    ("ether-vlan", None, 4, None),
    ("docsis", Some(Framing::None), 18, Some(64)),
];

/// tc's compensation keywords, as `q_cake.c` reads them: keyword overheads accumulate,
/// `overhead N` sets, `raw` clears (and removes the MAC-header flag).
#[derive(Clone, Copy, Debug, Default)]
pub struct CompensationParser {
    comp: Compensation,
    overhead_set: bool,
    raw: bool,
}

/// The compensation keywords as parameters (their effects accumulate in the order written,
/// so a discipline's builder folds them with [`CompensationParser::apply`]).
pub const OVERHEAD: Param = Param::new("overhead", Type::Real { min: -64.0, max: 256.0 }, Value::Real(0.0))
    .unit("bytes")
    .doc("per-packet overhead to add, replacing the MAC header (sets; keywords below add)")
    .check(|_, v| match v {
        Value::Real(x) if x.fract() != 0.0 => Err(format!("overhead {x} is not a whole number of bytes")),
        v => Ok(Some(v)),
    });
pub const MPU: Param = Param::uint("mpu", 0, 256, 0).unit("bytes").doc("minimum packet size after overhead");
pub const ATM: Param = Param::new("atm", Type::Choice, Value::Word("noatm"))
    .words(&[("atm", Value::Word("atm")), ("ptm", Value::Word("ptm")), ("noatm", Value::Word("noatm"))])
    .doc("cell framing: ATM (48 in 53), PTM (64b/65b) or none");
pub const FRAMING: Param = Param::new("framing", Type::Choice, Value::Unset)
    .words(&FRAMING_WORDS)
    .doc("raw: no overhead, keep the MAC header; conservative: ATM + 48; others add their link's overhead (tc-cake(8))");
pub const VIA_ETHERNET: Param = Param::ignored("via-ethernet").doc("obsolete; no effect");

/// `raw`, `conservative` and the names of [`FRAMINGS`].
const FRAMING_WORDS: [(&str, Value); FRAMINGS.len() + 2] = {
    let mut w = [("raw", Value::Word("raw")); FRAMINGS.len() + 2];
    w[1] = ("conservative", Value::Word("conservative"));
    let mut i = 0;
    while i < FRAMINGS.len() {
        w[i + 2] = (FRAMINGS[i].0, Value::Word(FRAMINGS[i].0));
        i += 1;
    }
    w
};

/// The compensation parameters, for reading them alone.
const COMPENSATION: &[Param] = &[OVERHEAD, MPU, ATM, FRAMING, VIA_ETHERNET];

impl CompensationParser {
    /// Reads one keyword (`overhead N`, `mpu N`, `raw`, `conservative`, `atm`, `ptm`, `noatm`,
    /// `via-ethernet` or a framing name) if `key` is one; false if it is not.
    pub fn parse_key(&mut self, key: &str, p: &mut Params) -> Result<bool, String> {
        Ok(match read_one(COMPENSATION, key, p)? {
            Some((i, v)) => {
                if let Some(v) = v {
                    self.apply(COMPENSATION[i].name, v);
                }
                true
            }
            None => false,
        })
    }

    /// Applies parameter `name` set to `v` if it is a compensation parameter; false if not.
    pub fn apply(&mut self, name: &str, v: Value) -> bool {
        let c = &mut self.comp;
        match (name, v) {
            ("overhead", Value::Real(x)) => {
                c.overhead = x as i32;
                self.overhead_set = true;
            }
            ("mpu", Value::Uint(n)) => c.mpu = n as u32,
            ("atm", Value::Word(w)) => {
                c.framing = match w {
                    "atm" => Framing::Atm,
                    "ptm" => Framing::Ptm,
                    _ => Framing::None,
                }
            }
            ("framing", Value::Word("raw")) => {
                c.framing = Framing::None;
                c.overhead = 0;
                self.overhead_set = true;
                self.raw = true;
            }
            ("framing", Value::Word("conservative")) => {
                c.framing = Framing::Atm;
                c.overhead = 48;
                self.overhead_set = true;
            }
            ("framing", Value::Word(w)) => {
                let &(_, framing, add, mpu) = FRAMINGS.iter().find(|(n, ..)| *n == w).expect("a framing word");
                if let Some(fr) = framing {
                    c.framing = fr;
                }
                c.overhead += add;
                self.overhead_set = true;
                if let Some(m) = mpu {
                    c.mpu = m;
                }
            }
            _ => return false,
        }
        true
    }

    /// The compensation of the parameters given in `a`, folded in the order written.
    pub fn from_args(a: &crate::params::Args) -> Compensation {
        let mut c = CompensationParser::default();
        for (name, v) in a.settings() {
            c.apply(name, v);
        }
        c.finish()
    }

    /// The compensation the keywords describe.
    pub fn finish(self) -> Compensation {
        let mut c = self.comp;
        if !self.overhead_set {
            c.overhead = 0;
        }
        c.overhead_flag = self.overhead_set && !self.raw;
        c
    }
}

/// The global virtual clock of a deficit-mode shaper (`time_next_packet`, `rate_ns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shaper {
    rate: TimePerByte,
    next: Time,
}

impl Shaper {
    /// A shaper at `bytes_per_sec` (0: unlimited).
    pub fn new(bytes_per_sec: u64) -> Shaper {
        Shaper { rate: TimePerByte::new(bytes_per_sec), next: Time::ZERO }
    }
    pub fn rate(&self) -> TimePerByte {
        self.rate
    }
    pub fn unlimited(&self) -> bool {
        self.rate.unlimited()
    }
    /// Called when a packet arrives to an empty queue: an idle shaper banks no credit
    /// (`cnq_unstale_shaper`).
    pub fn unstale(&mut self, now: Time) {
        self.next = self.next.max(now);
    }
    /// When the shaper holds the next packet back, the time it may leave.
    pub fn held_until(&self, now: Time) -> Option<Time> {
        (!self.unlimited() && self.next > now).then_some(self.next)
    }
    /// Charges a sent packet of `len` (compensated) bytes (`cnq_advance_shaper`): the clock
    /// moves on by its serialisation time, from where it was, not from now.
    pub fn advance(&mut self, len: u32) {
        if !self.unlimited() {
            self.next += self.rate.duration(len);
        }
    }
    /// The clock (the earliest departure of the next packet).
    pub fn next(&self) -> Time {
        self.next
    }
}

/// tc's `rtt` presets (`q_cake.c`, and the SCE fork's `q_cnq_cobalt.c`): (name, target us,
/// interval us).
const PRESETS: &[(&str, u64, u64)] = &[
    ("datacentre", 5, 100),
    ("lan", 50, 1_000),
    ("metro", 500, 10_000),
    ("regional", 1_500, 30_000),
    ("internet", 5_000, 100_000),
    ("oceanic", 15_000, 300_000),
    ("satellite", 50_000, 1_000_000),
    ("interplanetary", 50_000_000, 1_000_000_000),
];

/// The presets as `rtt` words (their interval).
const PRESET_WORDS: [(&str, Value); PRESETS.len()] = {
    let mut w = [("", Value::Unset); PRESETS.len()];
    let mut i = 0;
    while i < PRESETS.len() {
        w[i] = (PRESETS[i].0, Value::Time(Time::from_micros(PRESETS[i].2)));
        i += 1;
    }
    w
};

/// `rtt TIME` or a preset name, as the CAKE-family tc parsers read them, defaulting to
/// `default`.
pub const fn rtt(default: Value) -> Param {
    Param::new("rtt", Type::Time, default).words(&PRESET_WORDS).doc("COBALT interval; the target is rtt / 20")
}

/// The (interval, target) an `rtt` value sets: tc works in whole microseconds and sets
/// target = rtt / 20 (at least 1 us). A preset's pair is the same (the presets keep that
/// ratio; see [`PRESETS`]).
pub fn rtt_pair(rtt: Time) -> (Time, Time) {
    let us = rtt.as_micros().max(1);
    (Time::from_micros(us), Time::from_micros((us / 20).max(1)))
}

/// `bandwidth RATE` or `unlimited`: the shaper rate, unset (unlimited) below one byte per
/// second.
pub const BANDWIDTH: Param = Param::new("bandwidth", Type::Rate, Value::Unset)
    .words(&[("unlimited", Value::Unset)])
    .doc("shaper rate; unset (unlimited): no shaping")
    .check(|_, v| match v {
        Value::Rate(r) if r.bits_per_sec() < 8 => Ok(Some(Value::Unset)),
        v => Ok(Some(v)),
    });

/// `memlimit SIZE` in bytes, 1 ..= u32::MAX (a netlink u32).
pub const MEMLIMIT: Param = Param::new("memlimit", Type::Bytes, Value::Unset)
    .unit("bytes")
    .doc("memory limit of the queues; unset: the discipline's default")
    .check(|_, v| match v {
        Value::Bytes(m) if m == 0 || m > u32::MAX as u64 => Err(format!("memlimit {m} is out of range 1..{}", u32::MAX)),
        v => Ok(Some(v)),
    });

/// A driver for the unit tests of shaping disciplines.
#[cfg(test)]
pub(crate) mod testutil {
    use crate::packet::Packet;
    use crate::qdisc::Qdisc;
    use crate::time::Time;

    /// Drains a discipline as the link does, from `now`, waking when `ready_at` says;
    /// returns (departure time, packet) pairs.
    pub fn drain(q: &mut dyn Qdisc, mut now: Time) -> Vec<(Time, Packet)> {
        let mut out = vec![];
        while !q.is_empty() {
            match q.dequeue(now) {
                Some(p) => out.push((now, p)),
                None => {
                    let t = q.ready_at().expect("held by the shaper");
                    assert!(t > now, "{}: ready_at not in the future", q.kind());
                    now = t;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    #[test]
    fn time_per_byte_is_exact_at_round_rates() {
        // 50 Mbit/s = 6 250 000 B/s: 160 ns per byte, so a 1514-byte frame takes 242.24 us.
        let r = TimePerByte::new(6_250_000);
        assert_eq!(r.duration(1514), Time(242_240));
        assert_eq!(TimePerByte::new(125_000_000).duration(1514), Time(12_112));
        assert!(TimePerByte::new(0).unlimited());
    }

    #[test]
    fn shaper_clock_advances_from_itself_and_does_not_bank_idle_credit() {
        let mut s = Shaper::new(6_250_000);
        let t0 = Time::from_secs(1);
        s.unstale(t0);
        assert_eq!(s.held_until(t0), None);
        s.advance(1514);
        assert_eq!(s.held_until(t0), Some(t0 + Time(242_240)));
        // Sent late (the link was busy): the clock still advances from its own value.
        s.advance(1514);
        assert_eq!(s.next(), t0 + Time(2 * 242_240));
        // Idle for a second: unstale brings the clock to now.
        let t1 = Time::from_secs(2);
        s.unstale(t1);
        assert_eq!(s.next(), t1);
        let mut u = Shaper::new(0);
        u.advance(1514);
        assert_eq!(u.held_until(Time::ZERO), None);
    }

    #[test]
    fn compensation_keywords_as_tc() {
        let parse = |s: &str| {
            let tokens: Vec<String> = s.split_whitespace().map(str::to_string).collect();
            let mut p = Params::new("x", &tokens);
            let mut c = CompensationParser::default();
            while let Some(k) = p.next_key() {
                assert!(c.parse_key(k, &mut p).unwrap(), "{k}");
            }
            c.finish()
        };
        assert_eq!(parse(""), Compensation::default());
        let e = parse("ethernet ether-vlan");
        assert_eq!((e.overhead, e.overhead_flag, e.mpu, e.framing), (42, true, 84, Framing::None));
        assert_eq!(e.adjusted_len(1514), 1500 + 42);
        let a = parse("pppoe-llcsnap");
        // 1500 + 40 = 1540 bytes -> 33 cells -> 1749 bytes.
        assert_eq!(a.adjusted_len(1514), 1749);
        assert_eq!(parse("overhead 18 raw"), Compensation::default());
        assert_eq!(parse("docsis").adjusted_len(40), 64);
    }

    /// Every shaping discipline at 50 Mbit/s: back-to-back 1514-byte packets leave exactly
    /// every 242.24 us (160 ns per byte), in order; `overhead 18` (replacing the 14-byte MAC
    /// header) makes each count 1518 bytes; an idle shaper banks no credit.
    #[test]
    fn shaping_disciplines_release_packets_at_exactly_the_rate() {
        use crate::packet::{Direction, Ecn, Kind, Packet};
        use crate::qdisc::{BuildCtx, Qdisc, QdiscSpec};
        use crate::qdisc::shaper::testutil;
        use crate::rng::Stream;
        use crate::time::Rate;

        let build = |s: &str| {
            let mut ctx = BuildCtx { link_rate: Rate(1_000_000_000), mtu: 1514, rng: Stream::new(1, "shaper-test"), stack: Default::default() };
            QdiscSpec::parse(s).unwrap().build(&mut ctx)
        };
        let pkt = |seq: u32, at: Time| {
            let mut p = Packet::new(7, Direction::Forward, Kind::Data, 1514);
            p.tcp.seq = seq;
            p.enqueued_at = at;
            p.ecn = Ecn::Ect0;
            p
        };
        // Enqueues `n` packets at `t0`, drains them in order and returns the departure times.
        let run = |q: &mut dyn Qdisc, n: u32, t0: Time| {
            for i in 0..n {
                q.enqueue(pkt(i, t0), t0);
            }
            let out = testutil::drain(q, t0);
            assert!(out.iter().map(|(_, p)| p.tcp.seq).eq(0..n), "{}", q.kind());
            out.into_iter().map(|(t, _)| t).collect::<Vec<_>>()
        };
        let every = |t0: Time, n: u64, gap: u64| (0..n).map(|k| t0 + Time(k * gap)).collect::<Vec<_>>();
        for kind in ["cake besteffort", "cnq_codel_af", "twin_codel_af", "lfq_cobalt"] {
            let t0 = Time::from_secs(1);
            let mut q = build(&format!("{kind} bandwidth 50Mbit"));
            assert_eq!(run(&mut *q, 10, t0), every(t0, 10, 242_240), "{kind}: 1514 B every 242.24 us");
            let mut q = build(&format!("{kind} bandwidth 50Mbit overhead 18"));
            assert_eq!(run(&mut *q, 5, t0), every(t0, 5, 1518 * 160), "{kind}: 1518 B");
            // After a pause the next packet leaves at once, the one after it a packet time later.
            let mut q = build(&format!("{kind} bandwidth 50Mbit"));
            assert_eq!(run(&mut *q, 1, Time::ZERO), vec![Time::ZERO], "{kind}");
            let later = Time::from_millis(10);
            assert_eq!(run(&mut *q, 2, later), every(later, 2, 242_240), "{kind}: idle credit");
        }
    }
}
