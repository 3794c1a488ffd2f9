//! What the data generator writes: which files each rank writes ([`generation_files`]) and
//! the shape of each file's samples ([`SampleDims`]).

use std::iter::FusedIterator;

use crate::permutation::{KeyedPermutation, mix, splitmix64};

/// The files rank `rank` of `world` generates: `rank, rank + world, rank + 2*world, ...`
/// below `num_files` (DLIO §2.1).
///
/// DLIO strides over the train list followed by the eval list; to do the same, pass
/// `num_train + num_eval` and map indices `>= num_train` to eval file `index - num_train`.
/// An impossible rank (`rank >= world`, or `world == 0`) generates nothing.
pub fn generation_files(num_files: u64, world: u32, rank: u32) -> GenerationFiles {
    let next = if rank < world {
        u64::from(rank)
    } else {
        num_files
    };
    GenerationFiles {
        next,
        end: num_files,
        stride: u64::from(world.max(1)),
    }
}

/// Iterator returned by [`generation_files`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GenerationFiles {
    next: u64,
    end: u64,
    stride: u64,
}

impl Iterator for GenerationFiles {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.next >= self.end {
            return None;
        }
        let file = self.next;
        self.next = self.next.checked_add(self.stride).unwrap_or(self.end);
        Some(file)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = if self.next >= self.end {
            0
        } else {
            (self.end - self.next - 1) / self.stride + 1
        };
        let remaining = usize::try_from(remaining).ok();
        (remaining.unwrap_or(usize::MAX), remaining)
    }
}

impl FusedIterator for GenerationFiles {}

/// The seed DLIO gives NumPy before drawing sample dimensions.
const DIMS_SEED: u64 = 10;

/// The sample shape of every file of one list (DLIO §2.1), computable for any file in O(1).
///
/// With `record_dims` given, every sample has that shape. Otherwise each file's samples are
/// `[d1, d2]` with `d = max(int(Normal(sqrt(L), stdev / (2 sqrt(L)))), 1)`, where `L` is
/// `record_length_bytes`, so a uint8 sample holds about `L` bytes. A standard deviation of 0
/// (or one that is negative or not finite, which the config rejects) gives exactly
/// `max(int(sqrt(L)), 1)` for both.
///
/// Upstream draws all `2N` dimensions from NumPy's global generator seeded with 10, so a
/// file's shape depends on how many files there are. Here the normal draw of file `i` comes
/// from a hash of (10, `list_id`, `i`): the same distribution, identical on every rank and
/// every run, without drawing the dimensions of the files before it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleDims {
    record_length_bytes: f64,
    record_length_bytes_stdev: f64,
    record_dims: Vec<u64>,
    list_key: u64,
    /// `record_length_bytes_distribution`: (size, cumulative share up to and with it), and the
    /// files of the list that share its quantiles.
    distribution: Vec<(u64, f64)>,
    files: u64,
}

impl SampleDims {
    /// The shapes of list `list_id` (give train and eval different ids, so the eval list does
    /// not repeat the train list's shapes).
    pub fn new(
        record_length_bytes: f64,
        record_length_bytes_stdev: f64,
        record_dims: &[u64],
        list_id: u32,
    ) -> SampleDims {
        SampleDims {
            record_length_bytes,
            record_length_bytes_stdev,
            record_dims: record_dims.to_vec(),
            list_key: mix(DIMS_SEED, u64::from(list_id)),
            distribution: Vec::new(),
            files: 0,
        }
    }

    /// Sizes from a distribution of `(size, weight)` instead (`record_length_bytes_distribution`)
    /// for a list of `files` files: file `i` takes the size at quantile
    /// `(p(i) + 0.5) / files`, `p` a permutation of the list seeded by the list's id, so the
    /// list's sizes are the distribution's evenly spaced quantiles in a scrambled order: its
    /// total and shape follow the distribution for any number of files, identically on every
    /// rank and run. A sample of size `s` has the shape `[s]`. Empty: no change.
    pub fn with_distribution(mut self, sizes: &[(u64, f64)], files: u64) -> SampleDims {
        let total: f64 = sizes.iter().map(|&(_, w)| w.max(0.0)).sum();
        if sizes.is_empty() || total.is_nan() || total <= 0.0 {
            return self;
        }
        let mut sorted = sizes.to_vec();
        sorted.sort_by_key(|&(size, _)| size);
        let mut cumulative = 0.0;
        self.distribution = sorted
            .into_iter()
            .map(|(size, w)| {
                cumulative += w.max(0.0) / total;
                (size, cumulative)
            })
            .collect();
        self.files = files.max(1);
        self
    }

    /// The size of file `file_index` from the distribution.
    fn quantile_size(&self, file_index: u64) -> u64 {
        let order = KeyedPermutation::new(self.files, self.list_key).apply(file_index);
        let q = (order.min(self.files - 1) as f64 + 0.5) / self.files as f64;
        let at = self.distribution.partition_point(|&(_, c)| c < q);
        self.distribution[at.min(self.distribution.len() - 1)]
            .0
            .max(1)
    }

    /// True when every file has the same shape (`record_dims` given, or no spread).
    pub fn is_uniform(&self) -> bool {
        self.distribution.is_empty() && (!self.record_dims.is_empty() || !self.has_spread())
    }

    /// The sample shape of file `file_index`.
    pub fn for_file(&self, file_index: u64) -> Vec<u64> {
        if !self.distribution.is_empty() {
            return vec![self.quantile_size(file_index)];
        }
        if !self.record_dims.is_empty() {
            return self.record_dims.clone();
        }
        self.two_dims(file_index).to_vec()
    }

    /// Elements in one sample of file `file_index` (the product of its shape, saturating).
    pub fn elements_for_file(&self, file_index: u64) -> u64 {
        if !self.distribution.is_empty() {
            return self.quantile_size(file_index);
        }
        if !self.record_dims.is_empty() {
            return self
                .record_dims
                .iter()
                .fold(1u64, |acc, &d| acc.saturating_mul(d));
        }
        let [d1, d2] = self.two_dims(file_index);
        d1.saturating_mul(d2)
    }

    fn has_spread(&self) -> bool {
        self.record_length_bytes_stdev.is_finite() && self.record_length_bytes_stdev > 0.0
    }

    fn two_dims(&self, file_index: u64) -> [u64; 2] {
        let mean = self.record_length_bytes.sqrt();
        if !self.has_spread() || !mean.is_finite() || mean <= 0.0 {
            let side = exact_floor_sqrt(self.record_length_bytes).max(1);
            return [side, side];
        }
        let spread = self.record_length_bytes_stdev / (2.0 * mean);
        let (z1, z2) = standard_normal_pair(mix(self.list_key, file_index));
        [dimension(mean + spread * z1), dimension(mean + spread * z2)]
    }
}

/// [`SampleDims::for_file`] in one call.
pub fn sample_dims(
    record_length_bytes: f64,
    record_length_bytes_stdev: f64,
    record_dims: &[u64],
    list_id: u32,
    file_index: u64,
) -> Vec<u64> {
    SampleDims::new(
        record_length_bytes,
        record_length_bytes_stdev,
        record_dims,
        list_id,
    )
    .for_file(file_index)
}

/// `int(x)` as Python truncates it, then at least 1 (NaN and negatives give 1; huge values
/// saturate).
fn dimension(x: f64) -> u64 {
    // `as` truncates toward zero, saturates and maps NaN to 0.
    (x.trunc() as u64).max(1)
}

/// `floor(sqrt(length))`, exact for integral lengths (no rounding error near perfect squares).
fn exact_floor_sqrt(length: f64) -> u64 {
    if length.is_finite() && length >= 0.0 && length.fract() == 0.0 && length < 1.8e19 {
        (length as u64).isqrt()
    } else {
        // `as` truncates, maps NaN (negative lengths) to 0 and saturates infinity.
        length.sqrt() as u64
    }
}

/// Two independent standard normal draws from a 64-bit key (Box-Muller).
fn standard_normal_pair(key: u64) -> (f64, f64) {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    let a = splitmix64(key);
    let b = splitmix64(a);
    // u1 in (0, 1], so its logarithm is finite; u2 in [0, 1).
    let u1 = ((a >> 11) + 1) as f64 * SCALE;
    let u2 = (b >> 11) as f64 * SCALE;
    let radius = (-2.0 * u1.ln()).sqrt();
    let angle = std::f64::consts::TAU * u2;
    (radius * angle.cos(), radius * angle.sin())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_files_partition_the_list() {
        for num_files in 0..40u64 {
            for world in 1..7u32 {
                let mut owner = vec![None; num_files as usize];
                for rank in 0..world {
                    let files: Vec<u64> = generation_files(num_files, world, rank).collect();
                    assert_eq!(
                        generation_files(num_files, world, rank).size_hint(),
                        (files.len(), Some(files.len()))
                    );
                    for file in files {
                        assert_eq!(file % u64::from(world), u64::from(rank));
                        assert_eq!(owner[file as usize], None, "file {file} generated twice");
                        owner[file as usize] = Some(rank);
                    }
                }
                assert!(
                    owner.iter().all(Option::is_some),
                    "{num_files} files, {world} ranks"
                );
            }
        }
    }

    #[test]
    fn generation_files_are_rank_strided() {
        assert_eq!(generation_files(10, 3, 1).collect::<Vec<_>>(), [1, 4, 7]);
        assert_eq!(generation_files(10, 3, 3).count(), 0);
        assert_eq!(generation_files(10, 0, 0).count(), 0);
        assert_eq!(generation_files(2, 5, 4).count(), 0);
        let near_end: Vec<u64> = generation_files(u64::MAX, 2, 0).skip(1).take(2).collect();
        assert_eq!(near_end, [2, 4]);
        let mut last = generation_files(u64::MAX, u32::MAX, 7);
        last.next();
        assert_eq!(last.next(), Some(7 + u64::from(u32::MAX)));
    }

    #[test]
    fn no_spread_gives_the_integer_square_root() {
        assert_eq!(sample_dims(65536.0, 0.0, &[], 0, 5), [256, 256]);
        assert_eq!(sample_dims(150528.0, 0.0, &[], 0, 0), [387, 387]);
        // (2^26 + 1)^2 - 1: a float square root rounds up to 2^26 + 1; the exact answer is 2^26.
        assert_eq!(
            sample_dims(4_503_599_761_588_224.0, 0.0, &[], 1, 9),
            [1 << 26, 1 << 26]
        );
        assert_eq!(sample_dims(100.5, 0.0, &[], 0, 0), [10, 10]);
        assert_eq!(sample_dims(0.0, 0.0, &[], 0, 0), [1, 1]);
        assert_eq!(sample_dims(0.5, 0.0, &[], 0, 0), [1, 1]);
        assert_eq!(sample_dims(f64::NAN, 0.0, &[], 0, 0), [1, 1]);
        assert_eq!(sample_dims(-4.0, 3.0, &[], 0, 0), [1, 1]);
        assert_eq!(sample_dims(65536.0, -3.0, &[], 0, 0), [256, 256]);
        assert!(SampleDims::new(65536.0, 0.0, &[], 0).is_uniform());
    }

    #[test]
    fn record_dims_override_the_length() {
        let dims = SampleDims::new(65536.0, 100.0, &[3, 4, 5], 0);
        assert_eq!(dims.for_file(17), [3, 4, 5]);
        assert_eq!(dims.elements_for_file(17), 60);
        assert!(dims.is_uniform());
    }

    #[test]
    fn spread_dims_are_deterministic_per_file_and_list() {
        let train = SampleDims::new(65536.0, 16384.0, &[], 0);
        let eval = SampleDims::new(65536.0, 16384.0, &[], 1);
        assert!(!train.is_uniform());
        let shapes =
            |dims: &SampleDims| -> Vec<Vec<u64>> { (0..50).map(|i| dims.for_file(i)).collect() };
        assert_eq!(
            shapes(&train),
            shapes(&SampleDims::new(65536.0, 16384.0, &[], 0))
        );
        assert_eq!(train.for_file(3), sample_dims(65536.0, 16384.0, &[], 0, 3));
        let same = (0..50)
            .filter(|&i| train.for_file(i) == eval.for_file(i))
            .count();
        assert!(same < 5, "{same} of 50 eval shapes repeat the train list");
        let distinct: std::collections::HashSet<Vec<u64>> = shapes(&train).into_iter().collect();
        assert!(
            distinct.len() > 40,
            "only {} distinct shapes",
            distinct.len()
        );
        for i in 0..50 {
            let [d1, d2] = train.two_dims(i);
            assert_eq!(train.elements_for_file(i), d1 * d2);
        }
    }

    #[test]
    fn spread_dims_follow_the_normal_law() {
        // L = 65536, stdev = 16384: sides ~ Normal(256, 16384 / 512 = 32), truncated.
        let dims = SampleDims::new(65536.0, 16384.0, &[], 0);
        let sides: Vec<f64> = (0..20_000)
            .flat_map(|i| dims.for_file(i))
            .map(|d| d as f64)
            .collect();
        let n = sides.len() as f64;
        let mean = sides.iter().sum::<f64>() / n;
        let stdev = (sides.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
        // Truncation lowers the mean by about 0.5.
        assert!((mean - 255.5).abs() < 1.0, "mean {mean}");
        assert!((stdev - 32.0).abs() < 1.5, "stdev {stdev}");
    }

    #[test]
    fn a_distribution_gives_its_quantiles_to_the_files_of_a_list_in_a_seeded_order() {
        // 70% small, 30% large: 10 files take 7 small and 3 large sizes, whatever order.
        let dims = SampleDims::new(65536.0, 0.0, &[], 0)
            .with_distribution(&[(1000, 7.0), (50_000, 3.0)], 10);
        let sizes: Vec<u64> = (0..10).map(|i| dims.elements_for_file(i)).collect();
        assert_eq!(sizes.iter().filter(|&&s| s == 1000).count(), 7);
        assert_eq!(sizes.iter().filter(|&&s| s == 50_000).count(), 3);
        assert_eq!(dims.for_file(4), vec![sizes[4]]);
        assert!(!dims.is_uniform());
        // The same on every call; another list's order differs but its sizes do not.
        let again = SampleDims::new(65536.0, 0.0, &[], 0)
            .with_distribution(&[(50_000, 3.0), (1000, 7.0)], 10);
        assert_eq!(
            (0..10)
                .map(|i| again.elements_for_file(i))
                .collect::<Vec<_>>(),
            sizes
        );
        let eval = SampleDims::new(65536.0, 0.0, &[], 1)
            .with_distribution(&[(1000, 7.0), (50_000, 3.0)], 10);
        let mut eval_sizes: Vec<u64> = (0..10).map(|i| eval.elements_for_file(i)).collect();
        let mut sorted = sizes.clone();
        eval_sizes.sort_unstable();
        sorted.sort_unstable();
        assert_eq!(eval_sizes, sorted);
        // Sixteen equal bins over 96 files: the total is the distribution's mean times 96
        // within one bin's share.
        let bins: Vec<(u64, f64)> = (1..=16).map(|k| (k * 10_000, 1.0)).collect();
        let dims = SampleDims::new(1.0, 0.0, &[], 0).with_distribution(&bins, 96);
        let total: u64 = (0..96).map(|i| dims.elements_for_file(i)).sum();
        assert_eq!(total, 96 * 85_000);
    }

    #[test]
    fn tiny_lengths_with_spread_never_give_zero() {
        let dims = SampleDims::new(4.0, 400.0, &[], 0);
        for i in 0..1000 {
            assert!(dims.for_file(i).iter().all(|&d| d >= 1));
        }
    }
}
