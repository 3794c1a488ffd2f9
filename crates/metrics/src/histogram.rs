//! Fixed-memory, mergeable latency histograms in integer nanoseconds.
//!
//! A loader thread owns its own [`LatencyHistogram`]s and records into them with no lock;
//! at epoch end they are merged into the rank's [`RankRecorder`](crate::RankRecorder).
//! Memory does not grow with the number of samples: the histogram is an HDR histogram with
//! 3 significant digits (relative error at most 0.1%) over 1 ns .. 1 hour. Exact minimum,
//! maximum and sum are kept beside it, so `min`, `max` and `mean` carry no bucket error.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest latency tracked, in nanoseconds (one hour). Longer latencies are recorded as
/// one hour.
pub const MAX_TRACKED_NS: u64 = 3_600_000_000_000;

/// Significant decimal digits kept by the histogram buckets.
const SIGNIFICANT_DIGITS: u8 = 3;

/// A latency histogram in integer nanoseconds: fixed memory, mergeable, serializable.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "HistogramRepr", from = "HistogramRepr")]
pub struct LatencyHistogram {
    buckets: Histogram<u64>,
    min_ns: u64,
    max_ns: u64,
    sum_ns: u64,
}

/// Percentiles and extremes of a [`LatencyHistogram`], in microseconds.
///
/// All fields are zero when nothing was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of recorded latencies.
    pub count: u64,
    /// Smallest latency (exact).
    pub min_us: f64,
    /// Mean latency (exact, up to the saturation at one hour).
    pub mean_us: f64,
    /// Median (bucket resolution: 0.1%).
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest latency (exact).
    pub max_us: f64,
}

impl LatencyHistogram {
    /// An empty histogram (about 270 KiB of buckets).
    pub fn new() -> Self {
        Self {
            buckets: empty_buckets(),
            min_ns: u64::MAX,
            max_ns: 0,
            sum_ns: 0,
        }
    }

    /// Records one latency; values above [`MAX_TRACKED_NS`] are recorded as that maximum.
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records one latency given as a [`Duration`].
    pub fn record_duration(&mut self, latency: Duration) {
        self.record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Adds every latency recorded in `other` to this histogram.
    pub fn merge(&mut self, other: &Self) {
        if other.count() == 0 {
            return;
        }
        if self.buckets.add(&other.buckets).is_err() {
            // Both histograms have the same bounds, so `add` cannot fail; if it ever did,
            // re-recording bucket by bucket (clamped) keeps the counts right.
            for bucket in other.buckets.iter_recorded() {
                self.buckets
                    .saturating_record_n(bucket.value_iterated_to(), bucket.count_at_value());
            }
        }
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }

    /// Number of recorded latencies.
    pub fn count(&self) -> u64 {
        self.buckets.len()
    }

    /// Min, mean, p50, p90, p99, p99.9 and max in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let count = self.count();
        if count == 0 {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1_000.0;
        let at = |quantile: f64| us(self.buckets.value_at_quantile(quantile).min(self.max_ns));
        LatencySummary {
            count,
            min_us: us(self.min_ns),
            mean_us: self.sum_ns as f64 / count as f64 / 1_000.0,
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: us(self.max_ns),
        }
    }

    /// Records `n` latencies of `ns` each (a run of samples read in one call, each counted at
    /// the run's mean).
    pub fn record_n(&mut self, ns: u64, n: u64) {
        let ns = ns.min(MAX_TRACKED_NS);
        self.buckets.saturating_record_n(ns, n);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns = self.sum_ns.saturating_add(ns.saturating_mul(n));
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

fn empty_buckets() -> Histogram<u64> {
    // The bounds are constants that satisfy the crate's rules (low >= 1, high >= 2 * low,
    // sigfig <= 5), so creation cannot fail.
    Histogram::new_with_bounds(1, MAX_TRACKED_NS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// The serialized form: exact extremes and sum plus the non-empty buckets as
/// `[value_ns, count]` pairs, so a report sent between ranks stays small.
#[derive(Serialize, Deserialize)]
struct HistogramRepr {
    min_ns: u64,
    max_ns: u64,
    sum_ns: u64,
    buckets: Vec<(u64, u64)>,
}

impl From<LatencyHistogram> for HistogramRepr {
    fn from(histogram: LatencyHistogram) -> Self {
        Self {
            min_ns: histogram.min_ns,
            max_ns: histogram.max_ns,
            sum_ns: histogram.sum_ns,
            buckets: histogram
                .buckets
                .iter_recorded()
                .map(|bucket| (bucket.value_iterated_to(), bucket.count_at_value()))
                .collect(),
        }
    }
}

impl From<HistogramRepr> for LatencyHistogram {
    fn from(repr: HistogramRepr) -> Self {
        let mut buckets = empty_buckets();
        for (value, count) in repr.buckets {
            buckets.saturating_record_n(value.min(MAX_TRACKED_NS), count);
        }
        Self {
            buckets,
            min_ns: repr.min_ns,
            max_ns: repr.max_ns,
            sum_ns: repr.sum_ns,
        }
    }
}
