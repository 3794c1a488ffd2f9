//! Across ranks and epochs (§7.3): mean AU, summed throughput, population stdev, MB/s,
//! the AU expectation, evaluation and checkpoints.

use dlio_metrics::{CheckpointKind, MetricParams, RankReport, aggregate};

use super::util::{at, checkpoint, epoch, eval, params, report, simple_epoch, uniform_steps};
use crate::assert_close;

const GIB: u64 = 1 << 30;

/// No exclusion, so each simple epoch's AU and throughput are known exactly.
fn window_free_params() -> MetricParams {
    MetricParams {
        exclude_start_steps: 0,
        steps_per_epoch: 100,
        ..params()
    }
}

/// Two ranks, two epochs, batch 4:
/// rank 0: epoch 1 AU 75 thr 6 (3 steps, 2 s, 0.5 s compute); epoch 2 AU 80 thr 8.
/// rank 1: epoch 1 AU 50 thr 4; epoch 2 AU 65 thr 6.
fn two_ranks() -> Vec<RankReport> {
    vec![
        report(
            0,
            vec![simple_epoch(1, 3, 2.0, 0.5), simple_epoch(2, 4, 2.0, 0.4)],
        ),
        report(
            1,
            vec![
                simple_epoch(1, 2, 2.0, 0.5),
                simple_epoch(2, 3, 2.0, 0.65 * 2.0 / 3.0),
            ],
        ),
    ]
}

#[test]
fn au_is_the_mean_over_ranks_and_throughput_the_sum() {
    let metrics = aggregate(&two_ranks(), &window_free_params());
    let train = metrics.train.expect("training ran");
    assert_eq!(train.epochs, vec![1, 2]);
    assert_close!(train.au_percentage[0], 62.5);
    assert_close!(train.au_percentage[1], 72.5);
    assert_close!(train.throughput_samples_per_second[0], 10.0);
    assert_close!(train.throughput_samples_per_second[1], 14.0);
}

#[test]
fn means_and_population_stdevs_are_over_epochs() {
    let metrics = aggregate(&two_ranks(), &window_free_params());
    let train = metrics.train.expect("training ran");
    assert_close!(train.au_mean_percentage, 67.5);
    assert_close!(train.au_stdev_percentage, 5.0);
    assert_close!(train.throughput_mean_samples_per_second, 12.0);
    assert_close!(train.throughput_stdev_samples_per_second, 2.0);
}

#[test]
fn io_mb_per_second_is_throughput_times_nominal_record_length_over_2_pow_20() {
    let params = MetricParams {
        record_length_bytes: 2.5 * 1024.0 * 1024.0,
        ..window_free_params()
    };
    let train = aggregate(&two_ranks(), &params)
        .train
        .expect("training ran");
    assert_close!(train.io_mean_mb_per_second, 30.0);
    assert_close!(train.io_stdev_mb_per_second, 5.0);
}

#[test]
fn meet_expectation_compares_mean_au_with_the_threshold() {
    for (threshold, expected) in [(0.60, true), (0.67, true), (0.68, false), (0.70, false)] {
        let params = MetricParams {
            au_threshold: threshold,
            ..window_free_params()
        };
        let train = aggregate(&two_ranks(), &params)
            .train
            .expect("training ran");
        assert_eq!(
            train.au_meets_expectation, expected,
            "threshold {threshold}"
        );
    }
}

#[test]
fn an_epoch_counts_only_when_every_rank_ended_it() {
    let mut reports = two_ranks();
    reports[1].epochs[1].span.end = None;
    let train = aggregate(&reports, &window_free_params())
        .train
        .expect("training ran");
    assert_eq!(train.epochs, vec![1]);
    assert_close!(train.au_mean_percentage, 62.5);
    assert_close!(train.au_stdev_percentage, 0.0);
}

#[test]
fn a_run_interrupted_before_any_epoch_ended_reports_zero_and_fail() {
    let mut reports = two_ranks();
    for report in &mut reports {
        report.epochs.truncate(1);
        report.epochs[0].span.end = None;
    }
    let train = aggregate(&reports, &window_free_params())
        .train
        .expect("training ran");
    assert!(train.epochs.is_empty());
    assert_close!(train.au_mean_percentage, 0.0);
    assert!(!train.au_meets_expectation);
}

#[test]
fn without_training_or_eval_or_checkpoints_those_sections_are_absent() {
    let metrics = aggregate(
        &[report(0, vec![epoch(1, 0.0, Some(1.0), vec![])])],
        &params(),
    );
    assert!(metrics.train.is_none());
    assert!(metrics.eval.is_none());
    assert!(metrics.checkpoint.is_none());
}

#[test]
fn eval_is_aggregated_like_training() {
    let mut reports = two_ranks();
    // eval_steps_per_epoch 5, exclude_start 0 => AU = 100 * steps * compute / wall.
    // rank 0: 4 steps of 0.25 s in 2 s: AU 50, 4 * 2 / 2 = 4 samples/s.
    // rank 1: 4 steps of 0.45 s in 2 s: AU 90, 4 samples/s.
    reports[0].epochs[0].eval = Some(eval(100.0, 102.0, uniform_steps(4, 0.25, 0.25)));
    reports[1].epochs[0].eval = Some(eval(100.0, 102.0, uniform_steps(4, 0.45, 0.45)));
    let eval = aggregate(&reports, &window_free_params())
        .eval
        .expect("evaluation ran");
    assert_eq!(eval.epochs, vec![1]);
    assert_close!(eval.au_percentage[0], 70.0);
    assert_close!(eval.throughput_samples_per_second[0], 8.0);
    assert_close!(eval.io_mean_mb_per_second, 8.0);
    assert!(!eval.au_meets_expectation);
}

fn checkpointed_ranks() -> Vec<RankReport> {
    let mut reports = two_ranks();
    reports[0].epochs[0].checkpoints = vec![
        checkpoint(CheckpointKind::Save, 1, 10.0, 12.0, 3 * GIB),
        checkpoint(CheckpointKind::Save, 2, 20.0, 24.0, 3 * GIB),
    ];
    reports[1].epochs[0].checkpoints = vec![
        checkpoint(CheckpointKind::Save, 1, 10.0, 13.0, 5 * GIB),
        checkpoint(CheckpointKind::Save, 2, 20.0, 21.0, 5 * GIB),
    ];
    reports
}

#[test]
fn dlio_checkpoint_metrics_use_rank_zero_and_the_global_size() {
    let params = MetricParams {
        checkpoint_size_bytes: Some(8 * GIB),
        ..window_free_params()
    };
    let checkpoint = aggregate(&checkpointed_ranks(), &params)
        .checkpoint
        .expect("checkpoints ran");
    assert_close!(checkpoint.size_gb, 8.0);
    let save = checkpoint.save.expect("saves ran");
    assert!(checkpoint.load.is_none());
    assert_eq!(save.durations_seconds.len(), 2);
    assert_close!(save.duration_mean_seconds, 3.0);
    assert_close!(save.duration_stdev_seconds, 1.0);
    // 8 GiB / 2 s and 8 GiB / 4 s.
    assert_close!(save.io_mean_gb_per_second, 3.0);
    assert_close!(save.io_stdev_gb_per_second, 1.0);
}

#[test]
fn mlperf_checkpoint_metrics_take_max_duration_and_min_throughput_over_ranks() {
    // No configured size: the ranks' bytes are summed (3 + 5 GiB).
    let checkpoint = aggregate(&checkpointed_ranks(), &window_free_params())
        .checkpoint
        .expect("checkpoints ran");
    assert_close!(checkpoint.size_gb, 8.0);
    let mlperf = checkpoint.save.expect("saves ran").mlperf;
    assert_eq!(mlperf.checkpoints, vec![(1, 1), (1, 2)]);
    assert_close!(mlperf.durations_seconds[0], 3.0);
    assert_close!(mlperf.durations_seconds[1], 4.0);
    assert_close!(mlperf.throughputs_gb_per_second[0], 8.0 / 3.0);
    assert_close!(mlperf.throughputs_gb_per_second[1], 2.0);
    assert_close!(mlperf.duration_mean_seconds, 3.5);
    assert_close!(mlperf.duration_stdev_seconds, 0.5);
    assert_eq!(mlperf.bytes, vec![8 * GIB, 8 * GIB]);
    assert_close!(mlperf.measured_gib_per_second[0], 8.0 / 3.0);
}

#[test]
fn measured_io_uses_bytes_actually_read_over_the_slowest_rank() {
    let mut reports = two_ranks();
    reports[0].epochs[0].train_io.bytes_read = 3 << 20;
    reports[1].epochs[0].train_io.bytes_read = 1 << 20;
    reports[0].epochs[0].train_io.opens = 7;
    reports[1].epochs[1].blocks[0].span.end = Some(at(2000.0 + 4.0));
    let measured = aggregate(&reports, &window_free_params()).measured;
    assert_eq!(measured.ranks, 2);
    assert_eq!(measured.train.io.bytes_read, 4 << 20);
    assert_eq!(measured.train.io.opens, 7);
    let first = measured.train.per_epoch[0];
    assert_eq!((first.epoch, first.bytes_read), (1, 4 << 20));
    assert_close!(first.wall_seconds, 2.0);
    assert_close!(first.mb_per_second, 2.0);
    assert_close!(measured.train.per_epoch[1].wall_seconds, 4.0);
    assert_close!(measured.train.bytes_read_per_second, (4 << 20) as f64 / 6.0);
    assert_eq!(measured.per_rank.len(), 2);
    assert_eq!(
        measured.per_rank[0].epochs[0].train_au_percentage,
        Some(75.0)
    );
}
