//! DLIO's per-rank formulas (§7.2) on hand-built steps with known answers.

use dlio_metrics::{MetricParams, Span, block_metrics, epoch_train_metrics, eval_metrics};

use super::util::{at, block, epoch, eval, params, steps};
use crate::assert_close;

/// T = 3 s; compute [0.2, 0.5, 0.5, 0.5]; proc [1.0, 0.6, 0.6, 0.6].
fn four_step_block() -> dlio_metrics::BlockRecord {
    block(
        1,
        0.0,
        3.0,
        steps(&[(0.2, 1.0), (0.5, 0.6), (0.5, 0.6), (0.5, 0.6)]),
    )
}

fn with(change: impl FnOnce(&mut MetricParams)) -> MetricParams {
    let mut params = params();
    change(&mut params);
    params
}

#[test]
fn default_exclusion_drops_the_first_step_from_compute_and_time() {
    let params = with(|p| p.steps_per_epoch = 4);
    let metrics = block_metrics(&four_step_block(), &params).expect("closed block");
    // C = 1.5; T - proc[0] = 2.0.
    assert_eq!(metrics.steps, 4);
    assert_eq!(metrics.counted_steps, 3);
    assert_close!(metrics.measured_seconds, 2.0);
    assert_close!(metrics.au_percentage, 75.0);
    // 3 counted steps of 4 samples in 2 s.
    assert_close!(metrics.throughput_samples_per_second, 6.0);
    assert_close!(metrics.compute_mean_seconds, 0.5);
    assert_close!(metrics.compute_stdev_seconds, 0.0);
}

#[test]
fn upstream_throughput_uses_steps_minus_two_whatever_the_exclusions() {
    let params = with(|p| {
        p.steps_per_epoch = 4;
        p.upstream_throughput = true;
    });
    let metrics = block_metrics(&four_step_block(), &params).expect("closed block");
    assert_close!(metrics.au_percentage, 75.0);
    assert_close!(
        metrics.throughput_samples_per_second,
        (4.0 - 2.0) * 4.0 / 2.0
    );

    let no_exclusion = with(|p| {
        p.steps_per_epoch = 4;
        p.exclude_start_steps = 0;
        p.upstream_throughput = true;
    });
    let metrics = block_metrics(&four_step_block(), &no_exclusion).expect("closed block");
    assert_close!(metrics.au_percentage, 100.0 * 1.7 / 3.0);
    assert_close!(metrics.throughput_samples_per_second, 2.0 * 4.0 / 3.0);
}

#[test]
fn no_exclusion_counts_every_step_over_the_whole_block() {
    let params = with(|p| {
        p.steps_per_epoch = 4;
        p.exclude_start_steps = 0;
    });
    let metrics = block_metrics(&four_step_block(), &params).expect("closed block");
    assert_eq!(metrics.counted_steps, 4);
    assert_close!(metrics.au_percentage, 100.0 * 1.7 / 3.0);
    assert_close!(metrics.throughput_samples_per_second, 4.0 * 4.0 / 3.0);
}

#[test]
fn exclude_end_steps_drops_the_last_steps_of_the_epoch() {
    let params = with(|p| {
        p.steps_per_epoch = 4;
        p.exclude_end_steps = 1;
    });
    let metrics = block_metrics(&four_step_block(), &params).expect("closed block");
    // Window = steps 1..=2: C = 1.0; excluded proc = 1.0 + 0.6.
    assert_eq!(metrics.counted_steps, 2);
    assert_close!(metrics.measured_seconds, 1.4);
    assert_close!(metrics.au_percentage, 100.0 / 1.4);
    assert_close!(metrics.throughput_samples_per_second, 2.0 * 4.0 / 1.4);
}

#[test]
fn the_window_end_comes_from_steps_per_epoch_not_from_the_block_length() {
    // A block cut short by a mid-epoch checkpoint: E = 99 lies beyond its 4 steps.
    let params = with(|p| {
        p.steps_per_epoch = 100;
        p.exclude_end_steps = 1;
    });
    let metrics = block_metrics(&four_step_block(), &params).expect("closed block");
    assert_eq!(metrics.counted_steps, 3);
    assert_close!(metrics.au_percentage, 75.0);
}

#[test]
fn overlapping_exclusions_never_subtract_a_step_twice() {
    let params = with(|p| {
        p.steps_per_epoch = 4;
        p.exclude_start_steps = 3;
        p.exclude_end_steps = 3;
    });
    let metrics = block_metrics(&four_step_block(), &params).expect("closed block");
    assert_eq!(metrics.counted_steps, 0);
    assert_close!(metrics.measured_seconds, 3.0 - 2.8);
    assert_close!(metrics.au_percentage, 0.0);
    assert_close!(metrics.throughput_samples_per_second, 0.0);
}

#[test]
fn two_step_block_has_positive_throughput_by_default_and_zero_upstream() {
    let two = block(1, 0.0, 1.0, steps(&[(0.2, 0.4), (0.3, 0.4)]));
    let metrics = block_metrics(&two, &params()).expect("closed block");
    assert_close!(metrics.au_percentage, 50.0);
    assert_close!(metrics.throughput_samples_per_second, 4.0 / 0.6);

    let upstream = with(|p| p.upstream_throughput = true);
    let metrics = block_metrics(&two, &upstream).expect("closed block");
    assert_close!(metrics.throughput_samples_per_second, 0.0);
}

#[test]
fn one_step_block_is_never_negative_by_default_but_is_upstream() {
    let one = block(1, 0.0, 1.0, steps(&[(0.3, 0.4)]));
    let metrics = block_metrics(&one, &params()).expect("closed block");
    assert_close!(metrics.au_percentage, 0.0);
    assert_close!(metrics.throughput_samples_per_second, 0.0);

    let upstream = with(|p| p.upstream_throughput = true);
    let metrics = block_metrics(&one, &upstream).expect("closed block");
    assert_close!(metrics.throughput_samples_per_second, -4.0 / 0.6);
}

#[test]
fn an_open_block_has_no_metrics() {
    let mut open = four_step_block();
    open.span = Span {
        start: at(0.0),
        end: None,
    };
    assert_eq!(block_metrics(&open, &params()), None);
}

#[test]
fn epoch_metrics_weight_blocks_by_their_steps() {
    let params = with(|p| p.steps_per_epoch = 4);
    let first = four_step_block(); // 4 steps: AU 75, 6 samples/s
    let second = block(2, 5.0, 6.0, steps(&[(0.2, 0.4), (0.3, 0.4)])); // 2 steps: AU 50, 4/0.6
    let record = epoch(1, 0.0, Some(7.0), vec![first, second]);
    let metrics = epoch_train_metrics(&record, &params).expect("closed blocks");
    assert_eq!(metrics.steps, 6);
    assert_close!(metrics.au_percentage, (75.0 * 4.0 + 50.0 * 2.0) / 6.0);
    assert_close!(
        metrics.throughput_samples_per_second,
        (6.0 * 4.0 + 4.0 / 0.6 * 2.0) / 6.0
    );
}

#[test]
fn an_epoch_of_empty_blocks_scores_zero() {
    let empty = block(1, 0.0, 1.0, steps(&[]));
    let record = epoch(1, 0.0, Some(1.0), vec![empty]);
    let metrics = epoch_train_metrics(&record, &params()).expect("closed block");
    assert_eq!(metrics.steps, 0);
    assert_close!(metrics.au_percentage, 0.0);
    assert_close!(metrics.throughput_samples_per_second, 0.0);
}

#[test]
fn eval_au_uses_the_eval_window_and_throughput_counts_every_step() {
    let params = with(|p| p.eval_steps_per_epoch = 3);
    let pass = eval(0.0, 2.0, steps(&[(0.1, 0.5), (0.2, 0.3), (0.2, 0.3)]));
    let metrics = eval_metrics(&pass, &params).expect("closed eval");
    // C = 0.4 over 2.0 - 0.5; throughput = 3 steps * 2 samples / 2 s.
    assert_close!(metrics.au_percentage, 100.0 * 0.4 / 1.5);
    assert_close!(metrics.throughput_samples_per_second, 3.0);

    let upstream = with(|p| {
        p.eval_steps_per_epoch = 3;
        p.upstream_throughput = true;
    });
    let metrics = eval_metrics(&pass, &upstream).expect("closed eval");
    assert_close!(metrics.throughput_samples_per_second, 3.0);
}

#[test]
fn compute_time_per_step_is_mean_and_population_stdev_over_the_window() {
    let params = with(|p| p.steps_per_epoch = 3);
    let record = block(1, 0.0, 20.0, steps(&[(9.0, 9.0), (0.2, 0.3), (0.4, 0.5)]));
    let metrics = block_metrics(&record, &params).expect("closed block");
    assert_close!(metrics.compute_mean_seconds, 0.3);
    assert_close!(metrics.compute_stdev_seconds, 0.1);
}
