//! A keyed, random-access permutation of `[0, n)` in O(1) memory, and the hash it is built on.
//!
//! Written by hand on purpose: no crate offers an O(1)-memory, random-access permutation of an
//! arbitrary range whose algorithm is promised to stay the same across versions, and both
//! properties are needed (10^8 samples per epoch must not be materialised, and a plan must be
//! reproducible from its seed forever).
//!
//! The construction is a Feistel network over the smallest power of two `2^k >= n`, with
//! cycle-walking: an index is pushed through the network until it lands back inside `[0, n)`.
//! Each Feistel round is a bijection of `[0, 2^k)`, so their composition is too, and walking a
//! cycle of a bijection until it re-enters a subset is a bijection of that subset. Because
//! `2^k < 2n`, the expected walk is under two network passes.

/// The SplitMix64 output function: a fast bijective 64-bit mixer.
pub(crate) fn splitmix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes two words into one, so seeds can be combined with indices and purposes.
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    splitmix64(a ^ splitmix64(b))
}

/// Number of Feistel rounds. Four already give a pseudo-random permutation in theory; six
/// give a visibly well-mixed order even for tiny domains.
const ROUNDS: usize = 6;

/// A bijection of `[0, len)` chosen by a 64-bit key, evaluated one index at a time.
///
/// Construction and each [`apply`](Self::apply) are O(1) in time and memory, whatever `len`.
/// The same `(len, key)` gives the same permutation on every machine and every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyedPermutation {
    len: u64,
    /// Bits of the half that is rewritten by the first round.
    high_bits: u32,
    /// Bits of the half that feeds the round function in the first round.
    low_bits: u32,
    round_keys: [u64; ROUNDS],
}

impl KeyedPermutation {
    /// The permutation of `[0, len)` selected by `key`.
    pub fn new(len: u64, key: u64) -> KeyedPermutation {
        let bits = if len <= 1 {
            0
        } else {
            u64::BITS - (len - 1).leading_zeros()
        };
        let high_bits = bits / 2;
        let low_bits = bits - high_bits;
        let mut round_keys = [0; ROUNDS];
        let mut state = splitmix64(key);
        for round_key in &mut round_keys {
            state = splitmix64(state);
            *round_key = state;
        }
        KeyedPermutation {
            len,
            high_bits,
            low_bits,
            round_keys,
        }
    }

    /// Size of the permuted range.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for the permutation of the empty range.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The image of `index`. Indices outside `[0, len)` are returned unchanged, so the walk
    /// below always terminates.
    pub fn apply(&self, index: u64) -> u64 {
        if index >= self.len || self.len == 1 {
            return index;
        }
        let mut x = index;
        loop {
            x = self.network(x);
            if x < self.len {
                return x;
            }
        }
    }

    /// One pass through the Feistel network: a bijection of `[0, 2^k)`.
    ///
    /// Each round splits `x` into a high half `l` and a low half `r`, replaces `l` by
    /// `l ^ F(r)` and rotates the halves, so the next round rewrites the other half. The halves
    /// differ by at most one bit, so both fit in 32 bits and no shift reaches 64.
    fn network(&self, mut x: u64) -> u64 {
        let (mut high_bits, mut low_bits) = (self.high_bits, self.low_bits);
        for &round_key in &self.round_keys {
            let right = x & low_mask(low_bits);
            let left = x >> low_bits;
            let new_left = (left ^ splitmix64(right ^ round_key)) & low_mask(high_bits);
            x = (right << high_bits) | new_left;
            std::mem::swap(&mut high_bits, &mut low_bits);
        }
        x
    }
}

/// The `bits` lowest bits set (`bits <= 32` here).
fn low_mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_bijection(len: u64, key: u64) {
        let mut seen = vec![false; usize::try_from(len).unwrap_or(0)];
        for i in 0..len {
            let image = KeyedPermutation::new(len, key).apply(i);
            assert!(image < len, "len {len}: {i} -> {image} is out of range");
            let slot = &mut seen[image as usize];
            assert!(!*slot, "len {len}: {image} is hit twice");
            *slot = true;
        }
        assert!(seen.iter().all(|&s| s), "len {len}: not every index is hit");
    }

    #[test]
    fn is_a_bijection_for_many_sizes() {
        for len in [1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 1000, 4096, 4097] {
            for key in [0, 1, 123, u64::MAX] {
                assert_bijection(len, key);
            }
        }
    }

    #[test]
    fn is_a_bijection_just_above_a_power_of_two() {
        let len = (1 << 20) + 3;
        let permutation = KeyedPermutation::new(len, 42);
        let mut seen = vec![false; len as usize];
        for i in 0..len {
            let image = permutation.apply(i);
            assert!(image < len);
            assert!(!seen[image as usize], "{image} is hit twice");
            seen[image as usize] = true;
        }
    }

    #[test]
    fn huge_ranges_are_permuted_in_place() {
        for len in [u64::MAX, u64::MAX - 1, (1 << 63) + 1, 100_000_000] {
            let permutation = KeyedPermutation::new(len, 9);
            let images: Vec<u64> = (0..64).map(|i| permutation.apply(i)).collect();
            assert!(images.iter().all(|&x| x < len));
            let mut sorted = images.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                64,
                "distinct inputs must have distinct images"
            );
            assert_ne!(
                images,
                (0..64).collect::<Vec<u64>>(),
                "len {len} was not shuffled"
            );
        }
    }

    #[test]
    fn out_of_range_indices_are_left_alone() {
        let permutation = KeyedPermutation::new(10, 5);
        assert_eq!(permutation.apply(10), 10);
        assert_eq!(permutation.apply(u64::MAX), u64::MAX);
        assert_eq!(KeyedPermutation::new(0, 5).apply(0), 0);
        assert!(KeyedPermutation::new(0, 5).is_empty());
    }

    #[test]
    fn the_key_selects_the_order() {
        let order = |key| -> Vec<u64> {
            let permutation = KeyedPermutation::new(1000, key);
            (0..1000).map(|i| permutation.apply(i)).collect()
        };
        assert_eq!(order(7), order(7));
        assert_ne!(order(7), order(8));
        let identity: Vec<u64> = (0..1000).collect();
        assert_ne!(order(7), identity);
        // A shuffle should move almost everything: few fixed points (about 1 expected).
        let fixed = order(7)
            .iter()
            .enumerate()
            .filter(|&(i, &x)| i as u64 == x)
            .count();
        assert!(fixed < 10, "{fixed} fixed points");
    }

    #[test]
    fn the_algorithm_is_frozen() {
        // Plans must replay forever: a change of these values changes every shuffled run.
        let permutation = KeyedPermutation::new(10, 123);
        let order: Vec<u64> = (0..10).map(|i| permutation.apply(i)).collect();
        assert_eq!(order, FROZEN_ORDER_10_KEY_123);
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    const FROZEN_ORDER_10_KEY_123: [u64; 10] = [9, 6, 0, 7, 2, 8, 1, 3, 4, 5];
}
