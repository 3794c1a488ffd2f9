//! [`DataRng`]: the reproducible generator of sample bytes.

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// The byte generator for one file's samples.
///
/// Each (seed, list, file) triple gets its own xoshiro256++ stream, so every file holds
/// different bytes (a storage system that deduplicates cannot shrink the dataset) while the
/// same seed always regenerates the same dataset. The stream is a pure function of the byte
/// position: filling 10 bytes then 6 gives the same 16 bytes as filling 16 at once, so
/// writers may use any chunk size.
#[derive(Debug, Clone)]
pub struct DataRng {
    inner: Xoshiro256PlusPlus,
    /// Unused bytes of the last 64-bit word, at `word[8 - pending..]`.
    word: [u8; 8],
    pending: usize,
    file_index: u64,
}

impl DataRng {
    /// The generator for file `file_index` of list `list_id` (train, valid...) under `seed`.
    pub fn for_file(seed: u64, list_id: u32, file_index: u64) -> DataRng {
        // Each input goes through a bijective mixer into its own seed word, so distinct
        // triples always give distinct generator states.
        let words = [
            mix(seed ^ 0x6a09_e667_f3bc_c908),
            mix(u64::from(list_id) ^ 0xbb67_ae85_84ca_a73b),
            mix(file_index ^ 0x3c6e_f372_fe94_f82b),
            mix(seed.rotate_left(17) ^ file_index.rotate_left(41) ^ u64::from(list_id)),
        ];
        let mut state = [0u8; 32];
        for (chunk, word) in state.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        DataRng {
            inner: Xoshiro256PlusPlus::from_seed(state),
            word: [0; 8],
            pending: 0,
            file_index,
        }
    }

    /// The file index the generator was made for (formats that write it, like `synthetic`,
    /// read it here).
    pub fn file_index(&self) -> u64 {
        self.file_index
    }

    /// Fills `buf` with the next bytes of the stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let from_pending = self.pending.min(buf.len());
        let start = 8 - self.pending;
        buf[..from_pending].copy_from_slice(&self.word[start..start + from_pending]);
        self.pending -= from_pending;
        let rest = &mut buf[from_pending..];

        // Whole words: the generator writes each word little-endian, in order.
        let whole = rest.len() / 8 * 8;
        let (words, tail) = rest.split_at_mut(whole);
        self.inner.fill_bytes(words);
        if !tail.is_empty() {
            self.word = self.inner.next_u64().to_le_bytes();
            tail.copy_from_slice(&self.word[..tail.len()]);
            self.pending = 8 - tail.len();
        }
    }
}

/// SplitMix64's finaliser: a bijection on `u64` with good avalanche.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(mut rng: DataRng, n: usize) -> Vec<u8> {
        let mut out = vec![0; n];
        rng.fill(&mut out);
        out
    }

    #[test]
    fn stream_does_not_depend_on_chunking() {
        let whole = bytes(DataRng::for_file(1, 0, 5), 1000);
        for chunks in [
            &[1usize, 7, 8, 9, 975][..],
            &[3, 3, 3, 991],
            &[500, 500],
            &[0, 999, 1],
        ] {
            let mut rng = DataRng::for_file(1, 0, 5);
            let mut pieces = Vec::new();
            for &n in chunks {
                let mut piece = vec![0; n];
                rng.fill(&mut piece);
                pieces.extend(piece);
            }
            assert_eq!(pieces, whole, "chunks {chunks:?}");
        }
    }

    #[test]
    fn same_inputs_same_bytes_different_inputs_different_bytes() {
        let base = bytes(DataRng::for_file(42, 0, 7), 64);
        assert_eq!(bytes(DataRng::for_file(42, 0, 7), 64), base);
        assert_ne!(bytes(DataRng::for_file(43, 0, 7), 64), base);
        assert_ne!(bytes(DataRng::for_file(42, 1, 7), 64), base);
        assert_ne!(bytes(DataRng::for_file(42, 0, 8), 64), base);
        assert_eq!(DataRng::for_file(42, 0, 7).file_index(), 7);
    }

    #[test]
    fn bytes_are_not_a_repeated_pattern() {
        let data = bytes(DataRng::for_file(0, 0, 0), 1 << 16);
        let distinct = data.iter().collect::<std::collections::HashSet<_>>().len();
        assert_eq!(distinct, 256);
        assert_ne!(data[..4096], data[4096..8192]);
    }
}
