//! [`LatencyBuckets`]: a lock-free, fixed-size log-linear latency histogram, so that every
//! request of every reader thread can be timed without a lock.
//!
//! Layout (fio's scheme with 64 sub-buckets): values below 128 ns have a bucket each; above,
//! every power-of-two range `[2^e, 2^(e+1))` is cut into 64 equal buckets, so a bucket's
//! width is at most 1/64 of its lower bound (relative error below 1.6 %, 0.8 % at the
//! bucket's middle). Covering all of `u64` costs 3,776 atomic counters (30 KiB) per
//! histogram, allocated once.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two.
const SUB_BUCKETS: u64 = 64;
/// log2 of [`SUB_BUCKETS`].
const SUB_BITS: u32 = 6;
/// Values below this have a bucket of width 1.
const LINEAR_LIMIT: u64 = 2 * SUB_BUCKETS;
/// Buckets needed to cover `0..=u64::MAX`.
const BUCKETS: usize = (LINEAR_LIMIT + (64 - SUB_BITS as u64 - 1) * SUB_BUCKETS) as usize;

/// Bucket index of a value in nanoseconds.
fn bucket_of(value: u64) -> usize {
    if value < LINEAR_LIMIT {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros(); // >= SUB_BITS + 1
    let group = u64::from(exponent - SUB_BITS); // >= 1
    let sub = (value >> group) - SUB_BUCKETS; // 0..64
    (LINEAR_LIMIT + (group - 1) * SUB_BUCKETS + sub) as usize
}

/// Smallest value of bucket `index` and the bucket's width.
fn bucket_bounds(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < LINEAR_LIMIT {
        return (index, 1);
    }
    let group = (index - LINEAR_LIMIT) / SUB_BUCKETS + 1;
    let sub = (index - LINEAR_LIMIT) % SUB_BUCKETS;
    ((SUB_BUCKETS + sub) << group, 1 << group)
}

/// Live latency counts (nanoseconds), recorded concurrently with relaxed atomics.
pub struct LatencyBuckets {
    counts: Box<[AtomicU64]>,
    min: AtomicU64,
    max: AtomicU64,
    sum: AtomicU64,
}

impl Default for LatencyBuckets {
    fn default() -> Self {
        LatencyBuckets {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for LatencyBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("LatencyBuckets")
            .field("count", &snapshot.count())
            .field("min_ns", &snapshot.min_ns())
            .field("max_ns", &snapshot.max_ns())
            .finish()
    }
}

impl LatencyBuckets {
    /// Records one latency.
    pub fn record(&self, nanos: u64) {
        self.counts[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        self.min.fetch_min(nanos, Ordering::Relaxed);
        self.max.fetch_max(nanos, Ordering::Relaxed);
        self.sum.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counts at this moment (non-empty buckets only).
    pub fn snapshot(&self) -> LatencySnapshot {
        let buckets = self
            .counts
            .iter()
            .enumerate()
            .filter_map(|(index, count)| {
                let count = count.load(Ordering::Relaxed);
                (count > 0).then_some((index as u32, count))
            })
            .collect();
        LatencySnapshot {
            buckets,
            min: self.min.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A frozen [`LatencyBuckets`]: mergeable, with percentiles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    /// (bucket index, count) of the non-empty buckets, by increasing latency.
    buckets: Vec<(u32, u64)>,
    min: u64,
    max: u64,
    sum: u64,
}

impl LatencySnapshot {
    /// Number of recorded latencies.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|&(_, c)| c).sum()
    }

    /// Smallest recorded latency (0 when empty).
    pub fn min_ns(&self) -> u64 {
        if self.count() == 0 { 0 } else { self.min }
    }

    /// Largest recorded latency.
    pub fn max_ns(&self) -> u64 {
        self.max
    }

    /// Mean latency (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum as f64 / n as f64,
        }
    }

    /// The latency below which `percent` % of the records lie (the middle of the bucket that
    /// holds that rank, clamped to the observed min and max); 0 when empty.
    pub fn percentile_ns(&self, percent: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = ((percent.clamp(0.0, 100.0) / 100.0) * total as f64).ceil() as u64;
        let rank = rank.max(1);
        let mut seen = 0;
        for &(index, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                let (low, width) = bucket_bounds(index as usize);
                return (low + (width - 1) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// `(representative value in ns, count)` per non-empty bucket, e.g. to feed another
    /// histogram (`record_n`) or to write raw bins as fio's `json+` does.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.buckets.iter().map(|&(index, count)| {
            let (low, width) = bucket_bounds(index as usize);
            (low + (width - 1) / 2, count)
        })
    }

    /// Adds `other`'s records to these (e.g. to sum the ranks of one engine).
    pub fn merge(&mut self, other: &LatencySnapshot) {
        let mut merged = Vec::with_capacity(self.buckets.len() + other.buckets.len());
        let (mut a, mut b) = (
            self.buckets.iter().peekable(),
            other.buckets.iter().peekable(),
        );
        loop {
            match (a.peek(), b.peek()) {
                (Some(&&(ia, ca)), Some(&&(ib, cb))) if ia == ib => {
                    merged.push((ia, ca + cb));
                    a.next();
                    b.next();
                }
                (Some(&&x), Some(&&y)) => {
                    if x.0 < y.0 {
                        merged.push(x);
                        a.next();
                    } else {
                        merged.push(y);
                        b.next();
                    }
                }
                (Some(&&x), None) => {
                    merged.push(x);
                    a.next();
                }
                (None, Some(&&y)) => {
                    merged.push(y);
                    b.next();
                }
                (None, None) => break,
            }
        }
        let self_empty = self.buckets.is_empty();
        self.min = if self_empty {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.sum = self.sum.saturating_add(other.sum);
        self.buckets = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_that_contains_it() {
        for value in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, u64::MAX / 3, u64::MAX]) {
            let index = bucket_of(value);
            assert!(index < BUCKETS, "{value}");
            let (low, width) = bucket_bounds(index);
            assert!(
                low <= value && value - low < width,
                "{value} in [{low}, +{width})"
            );
            assert!(
                width == 1 || width * SUB_BUCKETS <= low,
                "relative width of {value}"
            );
        }
    }

    #[test]
    fn percentiles_are_within_two_percent() {
        let histogram = LatencyBuckets::default();
        for value in 1..=10_000u64 {
            histogram.record(value * 1000);
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 10_000);
        assert_eq!(snapshot.min_ns(), 1000);
        assert_eq!(snapshot.max_ns(), 10_000_000);
        for (percent, expected) in [(50.0, 5_000_000.0), (99.0, 9_900_000.0), (10.0, 1e6)] {
            let got = snapshot.percentile_ns(percent) as f64;
            assert!(
                (got - expected).abs() / expected < 0.02,
                "p{percent}: {got}"
            );
        }
        assert!((snapshot.mean_ns() - 5_000_500.0).abs() < 1.0);
    }

    #[test]
    fn merge_adds_counts_and_keeps_extremes() {
        let (a, b) = (LatencyBuckets::default(), LatencyBuckets::default());
        a.record(100);
        a.record(5000);
        b.record(5000);
        b.record(7);
        let mut merged = a.snapshot();
        merged.merge(&b.snapshot());
        assert_eq!(merged.count(), 4);
        assert_eq!((merged.min_ns(), merged.max_ns()), (7, 5000));
        let mut empty = LatencySnapshot::default();
        empty.merge(&merged);
        assert_eq!(empty, merged);
    }
}
