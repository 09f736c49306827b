//! Seeded random streams. Every component draws from its own ChaCha8 stream whose key is
//! derived from the scenario seed and the component's stable label (e.g. `"flow/3"`), so
//! adding a component never changes the draws of the others.

use rand_chacha::ChaCha8Rng;
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
    pub fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn uniform(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
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

    #[test]
    fn uniform_mean_is_about_half() {
        let mut s = Stream::new(1, "u");
        let n = 100_000;
        let m: f64 = (0..n).map(|_| s.uniform()).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 0.005, "{m}");
    }
}
