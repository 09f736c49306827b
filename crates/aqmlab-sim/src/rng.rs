//! Seeded random streams. Every component draws from its own ChaCha8 stream whose key is
//! derived from the scenario seed and the component's stable label (e.g. `"flow/3"`), so
//! adding a component never changes the draws of the others.

use rand_chacha::{ChaCha8Core, ChaCha8Rng};
use rand_core::block::BlockRngCore;
use rand_core::{RngCore, SeedableRng};

/// SplitMix64 finaliser, used to spread the seed and label hash over the key.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a over the label: stable across platforms and Rust versions (unlike `Hash`).
fn label_hash(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3))
}

/// A component's random stream.
#[derive(Clone, Debug)]
pub struct Stream(ChaCha8Rng);

impl Stream {
    pub fn new(seed: u64, label: &str) -> Stream {
        let mut key = [0u8; 32];
        let mut s = mix(seed ^ mix(label_hash(label)));
        for chunk in key.chunks_mut(8) {
            s = mix(s);
            chunk.copy_from_slice(&s.to_le_bytes());
        }
        Stream(ChaCha8Rng::from_seed(key))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// The stream, not yet drawn from, as its blocks of words (what [`Stream::next_u64`]
    /// returns, in the same order), for a consumer that keeps its own buffer.
    pub fn into_blocks(self) -> Blocks {
        assert_eq!(self.0.get_word_pos(), 0, "a stream is turned into blocks before its first draw");
        Blocks(ChaCha8Core::from_seed(self.0.get_seed()))
    }
    pub fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn uniform(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A stream's words a block at a time ([`Stream::into_blocks`]): the ChaCha8 core without
/// `rand`'s buffer of 256 bytes and its index, checked at every draw.
#[derive(Clone, Debug)]
pub struct Blocks(ChaCha8Core);

/// Words ([`Stream::next_u64`] draws) per block.
pub const BLOCK_WORDS: usize = 32;

impl Blocks {
    /// The stream's next [`BLOCK_WORDS`] words, as two halves each (low, then high: the
    /// `u32`s the core generates, in order); word `i` is `half[2 i] | half[2 i + 1] << 32`,
    /// as `rand`'s `BlockRng::next_u64` reads them.
    #[inline]
    pub fn next_block(&mut self, halves: &mut [u32; 2 * BLOCK_WORDS]) {
        let mut r = <ChaCha8Core as BlockRngCore>::Results::default();
        self.0.generate(&mut r);
        halves.copy_from_slice(r.as_ref());
    }
}

/// Word `i` of a block's halves ([`Blocks::next_block`]).
#[inline]
pub fn word(halves: &[u32; 2 * BLOCK_WORDS], i: usize) -> u64 {
    (halves[2 * i + 1] as u64) << 32 | halves[2 * i] as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_label_repeat() {
        let a: Vec<u64> = { let mut s = Stream::new(7, "flow/0"); (0..4).map(|_| s.next_u64()).collect() };
        let b: Vec<u64> = { let mut s = Stream::new(7, "flow/0"); (0..4).map(|_| s.next_u64()).collect() };
        assert_eq!(a, b);
    }

    #[test]
    fn streams_are_independent_of_each_other() {
        let mut a = Stream::new(7, "flow/0");
        let mut b = Stream::new(7, "flow/1");
        let mut c = Stream::new(8, "flow/0");
        let x = a.next_u64();
        assert_ne!(x, b.next_u64());
        assert_ne!(x, c.next_u64());
    }

    /// A stream's blocks are its words in order, across blocks.
    #[test]
    fn blocks_are_the_streams_words() {
        let mut s = Stream::new(3, "jitter/flow/1/fwd");
        let mut b = Stream::new(3, "jitter/flow/1/fwd").into_blocks();
        let mut halves = [0; 2 * BLOCK_WORDS];
        for _ in 0..5 {
            b.next_block(&mut halves);
            for i in 0..BLOCK_WORDS {
                assert_eq!(word(&halves, i), s.next_u64());
            }
        }
    }

    #[test]
    #[should_panic(expected = "before its first draw")]
    fn a_stream_drawn_from_has_no_blocks() {
        let mut s = Stream::new(3, "x");
        s.next_u64();
        s.into_blocks();
    }

    #[test]
    fn uniform_mean_is_about_half() {
        let mut s = Stream::new(1, "u");
        let n = 100_000;
        let m: f64 = (0..n).map(|_| s.uniform()).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 0.005, "{m}");
    }
}
