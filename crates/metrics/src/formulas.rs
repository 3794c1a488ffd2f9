//! DLIO's per-rank formulas: AU and throughput of one block, of one evaluation pass, and of
//! one epoch (the step-weighted mean over its blocks).

use std::ops::Range;

use serde::Serialize;

use crate::recorder::{BlockRecord, EpochRecord, EvalRecord, StepTimes};

/// The settings that turn recorded times into DLIO's metrics.
///
/// Built by the trainer from the config; every field changes a number in the output.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricParams {
    /// Number of ranks (simulated accelerators).
    pub world: u32,
    /// Training batch size (`reader.batch_size`).
    pub batch_size: u64,
    /// Evaluation batch size (`reader.batch_size_eval`).
    pub batch_size_eval: u64,
    /// Steps per epoch as DLIO computes it for the metric window: `total_training_steps` if
    /// set, else `floor(samples_per_file * files / batch / world)` from the configured counts.
    pub steps_per_epoch: u64,
    /// `floor(samples_per_file * eval_files / batch_size_eval / world)`.
    pub eval_steps_per_epoch: u64,
    /// Steps left out at the start of each block (`metric.exclude_start_steps`, default 1).
    pub exclude_start_steps: u64,
    /// Steps left out at the end of each epoch (`metric.exclude_end_steps`, default 0).
    pub exclude_end_steps: u64,
    /// Nominal bytes per sample, used only for DLIO's `*_io_*_MB_per_second`.
    pub record_length_bytes: f64,
    /// AU expectation as a fraction (`metric.au`, default 0.90).
    pub au_threshold: f64,
    /// Global checkpoint size in bytes, if the checkpoint mechanism computed one; otherwise
    /// the bytes the ranks reported are summed.
    pub checkpoint_size_bytes: Option<u64>,
    /// Compatibility switch for DLIO's block throughput: `true` divides `(steps - 2)` samples
    /// by the measured time, as DLIO does whatever the exclusions are (negative for blocks of
    /// at most 2 steps); `false` counts the steps inside the metric window, which are exactly
    /// the steps whose time is measured.
    pub upstream_throughput: bool,
}

/// AU and throughput of one block (or one evaluation pass) on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BlockMetrics {
    /// Steps recorded.
    pub steps: usize,
    /// Steps inside the metric window (after the start/end exclusions).
    pub counted_steps: usize,
    /// Wall time of the block, seconds.
    pub wall_seconds: f64,
    /// Wall time minus the `proc` time of the excluded steps: the AU denominator.
    pub measured_seconds: f64,
    /// `100 * sum(compute in window) / measured_seconds` (0 when no compute was counted).
    pub au_percentage: f64,
    /// Samples per second on this rank.
    pub throughput_samples_per_second: f64,
    /// Mean emulated compute time per step in the window.
    pub compute_mean_seconds: f64,
    /// Population standard deviation of the compute time per step in the window.
    pub compute_stdev_seconds: f64,
}

/// One rank's training metrics for one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpochMetrics {
    /// Step-weighted mean of the blocks' AU.
    pub au_percentage: f64,
    /// Step-weighted mean of the blocks' throughput (samples/s on this rank).
    pub throughput_samples_per_second: f64,
    /// Steps in the closed blocks.
    pub steps: usize,
}

/// DLIO's metrics of one closed training block; `None` while the block is open.
///
/// With `s = exclude_start_steps` and `E = steps_per_epoch - 1 - exclude_end_steps`:
/// AU = `100 * sum(compute[s..=E]) / (T - sum(proc[..s]) - sum(proc[E+1..]))` and throughput
/// = `n * batch_size / (that same time)` with `n = steps - 2` (upstream) or the number of
/// steps in `[s, E]`. When the exclusions overlap, no step's time is subtracted twice.
pub fn block_metrics(block: &BlockRecord, params: &MetricParams) -> Option<BlockMetrics> {
    let wall_seconds = block.span.seconds()?;
    let mut metrics = window_metrics(
        &block.steps,
        wall_seconds,
        params.exclude_start_steps,
        params.steps_per_epoch,
        params.exclude_end_steps,
    );
    let steps_in_throughput = if params.upstream_throughput {
        metrics.steps as f64 - 2.0
    } else {
        metrics.counted_steps as f64
    };
    metrics.throughput_samples_per_second = rate(
        steps_in_throughput * params.batch_size as f64,
        metrics.measured_seconds,
    );
    Some(metrics)
}

/// DLIO's metrics of one closed evaluation pass; `None` while it is open.
///
/// AU uses the same window with `eval_steps_per_epoch`; throughput counts every step over the
/// whole evaluation time (no exclusion), as DLIO does.
pub fn eval_metrics(eval: &EvalRecord, params: &MetricParams) -> Option<BlockMetrics> {
    let wall_seconds = eval.seconds()?;
    // Several passes in the epoch (an evaluation every few steps): the window spans them.
    let passes = u64::from(eval.passes.max(1));
    let mut metrics = window_metrics(
        &eval.steps,
        wall_seconds,
        params.exclude_start_steps,
        params.eval_steps_per_epoch.saturating_mul(passes),
        params.exclude_end_steps,
    );
    metrics.throughput_samples_per_second = rate(
        metrics.steps as f64 * params.batch_size_eval as f64,
        wall_seconds,
    );
    Some(metrics)
}

/// One rank's training AU and throughput for `epoch`: the step-weighted mean over its closed
/// blocks (0 when they hold no step). `None` when no block was closed.
pub fn epoch_train_metrics(epoch: &EpochRecord, params: &MetricParams) -> Option<EpochMetrics> {
    let blocks: Vec<BlockMetrics> = epoch
        .blocks
        .iter()
        .filter_map(|block| block_metrics(block, params))
        .collect();
    if blocks.is_empty() {
        return None;
    }
    let steps: usize = blocks.iter().map(|b| b.steps).sum();
    if steps == 0 {
        return Some(EpochMetrics {
            au_percentage: 0.0,
            throughput_samples_per_second: 0.0,
            steps,
        });
    }
    let weighted = |value: fn(&BlockMetrics) -> f64| {
        blocks
            .iter()
            .map(|b| value(b) * b.steps as f64)
            .sum::<f64>()
            / steps as f64
    };
    Some(EpochMetrics {
        au_percentage: weighted(|b| b.au_percentage),
        throughput_samples_per_second: weighted(|b| b.throughput_samples_per_second),
        steps,
    })
}

/// Shared part of the block and eval formulas; leaves the throughput at 0.
fn window_metrics(
    steps: &StepTimes,
    wall_seconds: f64,
    exclude_start: u64,
    steps_per_epoch: u64,
    exclude_end: u64,
) -> BlockMetrics {
    let len = steps.len();
    let window = metric_window(len, exclude_start, steps_per_epoch, exclude_end);
    let head = 0..window.start;
    let tail = window.end..len;

    let compute = &steps.compute[window.clone()];
    let counted_compute: f64 = compute.iter().sum();
    let excluded: f64 =
        steps.proc_[head].iter().sum::<f64>() + steps.proc_[tail].iter().sum::<f64>();
    let measured_seconds = wall_seconds - excluded;
    let au_percentage = if counted_compute == 0.0 || measured_seconds <= 0.0 {
        0.0
    } else {
        100.0 * counted_compute / measured_seconds
    };
    BlockMetrics {
        steps: len,
        counted_steps: window.len(),
        wall_seconds,
        measured_seconds,
        au_percentage,
        throughput_samples_per_second: 0.0,
        compute_mean_seconds: mean(compute),
        compute_stdev_seconds: population_stdev(compute),
    }
}

/// The step indices that count: `[s, E]` clipped to the recorded steps, where
/// `E + 1 = steps_per_epoch - exclude_end` (an empty range starting at `s` when that is
/// below `s`).
fn metric_window(
    len: usize,
    exclude_start: u64,
    steps_per_epoch: u64,
    exclude_end: u64,
) -> Range<usize> {
    let start = clip(exclude_start, len);
    let end = clip(steps_per_epoch.saturating_sub(exclude_end), len).max(start);
    start..end
}

fn clip(value: u64, len: usize) -> usize {
    usize::try_from(value).map_or(len, |value| value.min(len))
}

/// `amount / seconds`, 0 when no time was measured (DLIO would divide by zero).
pub(crate) fn rate(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 { amount / seconds } else { 0.0 }
}

/// Arithmetic mean, 0 for no values.
pub(crate) fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Population standard deviation (NumPy's `np.std`), 0 for no values.
pub(crate) fn population_stdev(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mean = mean(values);
    let variance =
        values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / values.len() as f64;
    variance.sqrt()
}
