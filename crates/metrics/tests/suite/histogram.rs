//! Latency histograms: percentiles on known data, merging, saturation, serialization.

use std::time::Duration;

use dlio_metrics::{LatencyHistogram, LatencySummary, MAX_TRACKED_NS};

use crate::assert_close;

fn one_to_thousand_ns() -> LatencyHistogram {
    let mut histogram = LatencyHistogram::new();
    for ns in 1..=1000 {
        histogram.record(ns);
    }
    histogram
}

fn assert_one_to_thousand(summary: LatencySummary) {
    assert_eq!(summary.count, 1000);
    assert_close!(summary.min_us, 0.001);
    assert_close!(summary.mean_us, 0.5005);
    assert_close!(summary.p50_us, 0.5);
    assert_close!(summary.p90_us, 0.9);
    assert_close!(summary.p99_us, 0.99);
    assert_close!(summary.p999_us, 0.999);
    assert_close!(summary.max_us, 1.0);
}

#[test]
fn percentiles_of_one_to_a_thousand_nanoseconds_are_exact() {
    assert_one_to_thousand(one_to_thousand_ns().summary());
}

#[test]
fn merged_halves_summarise_like_the_whole() {
    let mut low = LatencyHistogram::new();
    let mut high = LatencyHistogram::new();
    for ns in 1..=1000 {
        if ns % 2 == 0 { &mut low } else { &mut high }.record(ns);
    }
    low.merge(&high);
    assert_eq!(low.count(), 1000);
    assert_one_to_thousand(low.summary());
}

#[test]
fn large_values_keep_three_significant_digits() {
    let mut histogram = LatencyHistogram::new();
    for ms in 1..=100u64 {
        histogram.record_duration(Duration::from_millis(ms));
    }
    let summary = histogram.summary();
    assert!((summary.p50_us - 50_000.0).abs() <= 50.0, "{summary:?}");
    assert!((summary.p99_us - 99_000.0).abs() <= 99.0, "{summary:?}");
    assert_close!(summary.max_us, 100_000.0);
    assert_close!(summary.mean_us, 50_500.0);
}

#[test]
fn latencies_beyond_one_hour_saturate_instead_of_failing() {
    let mut histogram = LatencyHistogram::new();
    histogram.record(u64::MAX);
    histogram.record_duration(Duration::from_secs(10 * 3600));
    let summary = histogram.summary();
    assert_eq!(summary.count, 2);
    assert_close!(summary.max_us, MAX_TRACKED_NS as f64 / 1000.0);
    assert_close!(summary.p50_us, MAX_TRACKED_NS as f64 / 1000.0);
}

#[test]
fn an_empty_histogram_summarises_to_zeros() {
    assert_eq!(LatencyHistogram::new().summary(), LatencySummary::default());
    let mut histogram = one_to_thousand_ns();
    histogram.merge(&LatencyHistogram::new());
    assert_eq!(histogram.count(), 1000);
}

#[test]
fn a_histogram_survives_a_json_round_trip() {
    let histogram = one_to_thousand_ns();
    let json = serde_json::to_string(&histogram).expect("serializes");
    let back: LatencyHistogram = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back.summary(), histogram.summary());
}
