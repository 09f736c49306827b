//! The end hosts' timing noise (`[host]`): when flows start, and when each packet a host
//! hands to its access path actually leaves. Both are drawn from the scenario seed, each
//! from its own labelled stream ([`crate::rng::Stream`]), so that `--seeds` gives real
//! replications and adding a component changes no other draw. docs/host.md maps the
//! defaults to a netns testbed.
//!
//! - Start spread: every bulk TCP flow, probe, media and UDP source starts U[0,
//!   `start_spread`) after its `start` (stream `start/<kind>/<index>`). Workload arrivals are
//!   already random and transient groups have their own `start_jitter`: they are unchanged.
//! - Host jitter: each send instant of a host to one endpoint pair's path is delayed by
//!   U[0, `jitter`) (stream `jitter/<kind>/<index>/<up|down>`), without reordering that
//!   path's packets: departure = max(previous departure, now + base delay + draw).
//!   Packets handed over at one instant (the segments of one GSO skb, which the host
//!   segments and transmits in one go) share one draw and stay back to back.

use crate::rng::{word, Blocks, Stream, BLOCK_WORDS};
use crate::time::Time;

/// `start` moved by a U[0, `spread`) draw of the stream `start/<label>`.
pub fn spread_start(seed: u64, spread: Time, label: &str, start: Time) -> Time {
    if spread == Time::ZERO {
        return start;
    }
    let u = Stream::new(seed, &format!("start/{label}")).uniform();
    start + Time((u * spread.0 as f64) as u64)
}

/// Per-packet timing noise of one host's hand-off to one path (one direction of one
/// endpoint pair), applied by that path's first delay line.
///
/// One aligned 64-byte cache line with the ready draws inline (issue #15, session 7: the
/// lane's 24-byte record and its boxed batch of draws were two misses per new instant at
/// 1000 flows; before that, the boxed `{ last_at, stream }` cost ~3 misses a draw). The
/// stream sits behind `stream`, touched once per [`BATCH`] + 1 draws. The delays are the
/// stream's draws in the same order, so the results are unchanged.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct HostJitter {
    /// The last hand-off instant ([`NEVER`] before the first) and the departure it was given.
    last_at: Time,
    last_due: Time,
    /// The next ready delay in `batch` ([`BATCH`]: none left).
    next: u8,
    /// The next of the stream's scaled draws in `stream.ready` ([`READY`]: none left; from
    /// [`WIDE`] on: a bound wider than `u32` ns, drawn word by word). Kept in this line, which
    /// the refill has just read, so that its loads of those draws wait on no other miss
    /// (session 14).
    pos: u8,
    /// Ready delays in ns, drawn ahead from the stream in its order (bounds up to
    /// `u32::MAX` ns, 4.29 s; a wider bound draws every delay from the stream).
    batch: [u32; BATCH],
    stream: Box<JitterStream>,
}

/// No hand-off yet (simulated time never reaches it).
const NEVER: Time = Time(u64::MAX);

/// Delays drawn ahead from the stream (besides the one a refill hands out at once).
const BATCH: usize = 9;

/// The stream's draws a lane's box holds ready, scaled to the bound: two blocks' words.
const READY: usize = 2 * BLOCK_WORDS;

/// [`HostJitter::pos`] of a bound wider than `u32` ns is this plus the next word's index in
/// the block of raw words its box holds (above any position in [`READY`], so that the
/// refill's test for enough ready draws fails for it).
const WIDE: u8 = 128;
const _: () = assert!(READY < WIDE as usize && WIDE as usize + BLOCK_WORDS <= u8::MAX as usize);

/// The stream a lane draws its delays from, and their bound.
///
/// Session 14: this was `rand`'s `ChaCha8Rng` (the core, a buffer of 64 `u32`s and its
/// index) with the bound, and every refill read the index and the bound from one line of
/// the box, then the buffer's words at that index from another: two misses one after the
/// other at 1000 flows (the box is touched once per 10 draws, 12 ms apart), 4 % of f1000's
/// CPU samples in `refill`. Now the box holds the stream's next 64 draws already scaled to
/// the bound, in order, and the lane holds where they stand, so a refill loads the one or
/// two lines its 10 draws are in, at once; the core is touched once per 64 draws.
#[derive(Debug)]
struct JitterStream {
    /// The stream's next draws, each word scaled to the bound ([`scaled_draw`]); with a bound
    /// wider than `u32` ns, the current block's raw halves ([`word`]).
    ready: [u32; READY],
    blocks: Blocks,
    max: Time,
}

impl JitterStream {
    /// Refills `ready` with the stream's next [`READY`] draws, scaled to a bound within `u32` ns.
    #[cold]
    #[inline(never)]
    fn scale_next(&mut self) {
        let mut halves = [0; 2 * BLOCK_WORDS];
        for part in self.ready.chunks_exact_mut(BLOCK_WORDS) {
            self.blocks.next_block(&mut halves);
            for (i, d) in part.iter_mut().enumerate() {
                *d = scaled_draw(word(&halves, i), self.max.0) as u32;
            }
        }
    }
    /// A delay of a bound wider than `u32` ns from word `i` of the block in `ready`:
    /// [`Stream::uniform`]'s double times the bound, truncated.
    fn draw_wide(&self, i: usize) -> Time {
        let halves: &[u32; READY] = &self.ready;
        let u = (word(halves, i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        Time((u * self.max.0 as f64) as u64)
    }
}

/// `(uniform * max as f64) as u64` for the 53 random bits [`Stream::uniform`] takes from the
/// stream's word `word` (`uniform = (word >> 11) * 2^-53`) and a bound `max` below 2^32, in
/// integers: the exact product `m * max / 2^53` truncated, i.e. its high bits. Issue 15: the
/// conversions between integers and doubles (and the saturating cast back) were about 25
/// instructions of each packet's draw.
///
/// Why the same: `m * 2^-53` and `max` are exact doubles, so the double product is the exact
/// product `x = q + r / 2^53` (`q`, `r` its integer and fractional parts) rounded to 53
/// significant bits; rounding never goes below `q` (a double), and goes up to `q + 1` only if
/// `x` lies within half a unit in the last place of it: `1 - r / 2^53 <= 2^(e - 53)` with
/// `2^e <= x < max`, so only if `2^53 - r < max`. Those rare words (about `max / 2^53` of
/// them) take the double computation itself.
#[inline]
fn scaled_draw(word: u64, max: u64) -> u64 {
    const ONE: u64 = 1 << 53;
    let m = word >> 11;
    let p = m as u128 * max as u128;
    let r = p as u64 & (ONE - 1);
    if ONE - r < max {
        return (m as f64 * (1.0 / ONE as f64) * max as f64) as u64;
    }
    (p >> 53) as u64
}

impl HostJitter {
    pub fn new(max: Time, rng: Stream) -> HostJitter {
        let wide = max.0 > u32::MAX as u64;
        let stream = Box::new(JitterStream { ready: [0; READY], blocks: rng.into_blocks(), max });
        HostJitter { last_at: NEVER, last_due: Time::ZERO, next: BATCH as u8, pos: if wide { WIDE + BLOCK_WORDS as u8 } else { READY as u8 }, batch: [0; BATCH], stream }
    }

    /// The next delay, in the stream's order.
    #[inline]
    fn take(&mut self) -> Time {
        if self.next as usize == BATCH {
            return self.refill();
        }
        let d = self.batch[self.next as usize];
        self.next += 1;
        Time(d as u64)
    }
    /// Hands out the stream's next draw and (bound within `u32` ns) puts the [`BATCH`] after
    /// it in `batch`, from the box's ready draws.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> Time {
        let p = self.pos as usize;
        if p + 1 + BATCH <= READY {
            let ready = &self.stream.ready;
            let first = ready[p];
            self.batch.copy_from_slice(&ready[p + 1..p + 1 + BATCH]);
            self.pos += 1 + BATCH as u8;
            self.next = 0;
            return Time(first as u64);
        }
        self.refill_across()
    }
    /// [`HostJitter::refill`] when the ready draws run out on the way (once per 6.4 refills),
    /// or for a bound wider than `u32` ns (every delay from the stream).
    #[cold]
    #[inline(never)]
    fn refill_across(&mut self) -> Time {
        if self.pos >= WIDE {
            // Word `pos - WIDE` of the block of raw halves in `ready`; `next` stays at `BATCH`.
            if self.pos as usize == WIDE as usize + BLOCK_WORDS {
                self.stream.blocks.next_block(&mut self.stream.ready);
                self.pos = WIDE;
            }
            self.pos += 1;
            return self.stream.draw_wide((self.pos - 1 - WIDE) as usize);
        }
        let mut draw = || {
            if self.pos as usize == READY {
                self.stream.scale_next();
                self.pos = 0;
            }
            self.pos += 1;
            self.stream.ready[self.pos as usize - 1]
        };
        let first = draw();
        let mut batch = [0; BATCH];
        for d in &mut batch {
            *d = draw();
        }
        self.batch = batch;
        self.next = 0;
        Time(first as u64)
    }

    /// The bound of the delays.
    pub fn max(&self) -> Time {
        self.stream.max
    }

    /// The departure of a packet handed over at `now` that would leave at `due` without
    /// noise: one draw per hand-off instant, never before the previous departure.
    #[inline]
    pub fn departure(&mut self, now: Time, due: Time) -> Time {
        if self.last_at == now {
            return self.last_due.max(due);
        }
        let d = self.take();
        self.last_at = now;
        self.last_due = self.last_due.max(due + d);
        self.last_due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_within_range_seeded_and_zero_is_off() {
        let ms = Time::from_millis;
        assert_eq!(spread_start(1, Time::ZERO, "flow/0", ms(3)), ms(3));
        let a = spread_start(1, ms(5), "flow/0", ms(3));
        assert!(a >= ms(3) && a < ms(8), "{a:?}");
        assert_eq!(a, spread_start(1, ms(5), "flow/0", ms(3)), "same seed and label: same draw");
        assert_ne!(a, spread_start(2, ms(5), "flow/0", ms(3)), "another seed");
        assert_ne!(a, spread_start(1, ms(5), "flow/1", ms(3)), "another flow");
        // Uniform: the mean of many labels' draws is about half the spread.
        let n = 4000;
        let mean = (0..n).map(|i| spread_start(7, ms(10), &format!("flow/{i}"), Time::ZERO).0 as f64).sum::<f64>() / n as f64;
        assert!((mean / 5e6 - 1.0).abs() < 0.05, "mean {mean} ns");
    }

    #[test]
    fn jitter_never_reorders_and_keeps_a_hand_off_together() {
        let us = Time::from_micros;
        let mut j = HostJitter::new(us(50), Stream::new(1, "jitter/flow/0/up"));
        let mut prev = Time::ZERO;
        let mut extra = Vec::new();
        for k in 0..10_000u64 {
            // Hand-offs 10 µs apart (closer than the noise), base delay 1 ms.
            let now = us(10 * k);
            let due = j.departure(now, now + us(1000));
            assert!(due >= prev && due >= now + us(1000), "k {k}");
            extra.push((due - now - us(1000)).0);
            // A second packet at the same instant leaves with the first.
            assert_eq!(j.departure(now, now + us(1000)), due);
            prev = due;
        }
        // Spaced hand-offs (1 ms apart) get independent U[0, 50 µs) delays: mean ≈ 25 µs.
        let mut j = HostJitter::new(us(50), Stream::new(1, "jitter/flow/0/up"));
        let d: Vec<u64> = (0..10_000u64).map(|k| (j.departure(us(1000 * k), us(1000 * k)) - us(1000 * k)).0).collect();
        assert!(d.iter().all(|&x| x < 50_000));
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        assert!((mean / 25_000.0 - 1.0).abs() < 0.05, "mean {mean}");
        assert!(extra.iter().any(|&x| x > 0));
    }

    /// The batched draws are the stream's draws in order, for a bound within `u32` ns and
    /// for a wider one (every draw from the stream), over many of the box's refills of its
    /// ready draws (64 of them, 10 taken at a time: some refills straddle two) and blocks,
    /// and a lane is one cache line.
    #[test]
    fn batched_draws_are_the_streams_draws_in_order() {
        assert_eq!(std::mem::size_of::<HostJitter>(), 64);
        for max in [Time::from_micros(50), Time(1), Time(u32::MAX as u64), Time(u32::MAX as u64 + 1), Time::from_secs(10)] {
            let mut j = HostJitter::new(max, Stream::new(5, "jitter/flow/3/down"));
            let mut s = Stream::new(5, "jitter/flow/3/down");
            for k in 0..1000u64 {
                let now = Time(k * 1_000_000_000_000);
                let expect = Time((s.uniform() * max.0 as f64) as u64);
                assert_eq!(j.departure(now, now) - now, expect, "max {max:?} draw {k}");
            }
        }
    }

    /// The integer draw equals the doubles' `(uniform * max) as u64` for random words and
    /// bounds, and for words whose exact product lies just below an integer, where the
    /// doubles round up (found by solving `m * max = -d mod 2^53`), odd bounds and even.
    #[test]
    fn scaled_draw_is_the_doubles_product_truncated() {
        let by_doubles = |w: u64, max: u64| ((w >> 11) as f64 * (1.0 / (1u64 << 53) as f64) * max as f64) as u64;
        let mut s = Stream::new(9, "scaled");
        for _ in 0..200_000 {
            let (w, max) = (s.next_u64(), s.next_u64() >> (32 + s.next_u32() % 32));
            assert_eq!(scaled_draw(w, max), by_doubles(w, max), "word {w:#x} max {max}");
        }
        let mut rounded_up = 0;
        // Odd bounds, and even ones as the scenarios' microsecond bounds are (50 us, 1 ms,
        // 20 ms), whose products' fractions are multiples of their power-of-two factor.
        for max in [3u64, 50_001, 1_000_001, (1 << 31) + 1, u32::MAX as u64, 50_000, 1_000_000, 20_000_000, u32::MAX as u64 - 1] {
            let (v, odd) = (max.trailing_zeros(), max >> max.trailing_zeros());
            let mask = (1u64 << (53 - v)) - 1;
            // The inverse of `odd` modulo 2^(53 - v) (Newton's iteration).
            let mut inv = odd;
            for _ in 0..6 {
                inv = inv.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inv)));
            }
            assert_eq!(odd.wrapping_mul(inv) & mask, 1);
            // `m * max = 2^53 - d (mod 2^53)` for `d = e * 2^v`: the product `d / 2^53` below
            // an integer; from `e = odd` on (`d = max`) the integers decide alone.
            for e in [1u64, 2, 3, 7, odd / 2, odd - 1, odd, odd + 1, 2 * odd] {
                let low = e.wrapping_neg().wrapping_mul(inv) & mask;
                for high in [0u64, 1, (1 << v) - 1] {
                    let m = (low | high << (53 - v)) & ((1 << 53) - 1);
                    let w = m << 11;
                    assert_eq!(scaled_draw(w, max), by_doubles(w, max), "m {m:#x} max {max} e {e}");
                    rounded_up += (by_doubles(w, max) != ((m as u128 * max as u128) >> 53) as u64) as u32;
                }
            }
        }
        assert!(rounded_up > 0, "the doubles' rounding up was exercised");
    }
}
