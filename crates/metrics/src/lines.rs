//! DLIO's progress lines, built from rank 0's recorder.
//!
//! The trainer calls these right after the matching `RankRecorder` call on rank 0 (or once
//! per pass with [`train_pass_lines`] / [`eval_pass_lines`]) and logs the lines at its OUTPUT
//! level. Each line comes without DLIO's leading timestamp; prefix
//! it with [`format_timestamp`](crate::format_timestamp)`(recorder.now())` if wanted.
//! A function returns no line when the thing it reports on was not recorded.

use std::fmt::Display;

use crate::formulas::{MetricParams, block_metrics, eval_metrics};
use crate::recorder::{CheckpointKind, RankRecorder};

/// `Starting epoch e: S steps expected`.
pub fn epoch_start_line(params: &MetricParams, epoch: u32) -> String {
    format!(
        "Starting epoch {epoch}: {} steps expected",
        params.steps_per_epoch
    )
}

/// `Starting block b`.
pub fn block_start_line(block: u32) -> String {
    format!("Starting block {block}")
}

/// `Starting eval - S steps expected`.
pub fn eval_start_line(params: &MetricParams) -> String {
    format!(
        "Starting eval - {} steps expected",
        params.eval_steps_per_epoch
    )
}

/// The lines DLIO logs when a training block ends: its duration, then rank 0's AU, rank 0's
/// throughput times the number of ranks, and the compute time per step (mean +/- population
/// standard deviation over the metric window) next to the configured value
/// (`computation_time_setting`, e.g. `0.323`).
pub fn block_end_lines(
    recorder: &RankRecorder,
    params: &MetricParams,
    epoch: u32,
    block: u32,
    computation_time_setting: impl Display,
) -> Vec<String> {
    let Some(record) = recorder.epoch(epoch).and_then(|e| e.block(block)) else {
        return Vec::new();
    };
    let Some(metrics) = block_metrics(record, params) else {
        return Vec::new();
    };
    let steps = record.reported_steps.unwrap_or(record.steps.len() as u64);
    vec![
        format!(
            "Ending block {block} - {steps} steps completed in {:.2} s",
            metrics.wall_seconds
        ),
        format!(
            "Epoch {epoch} - Block {block} [Training] Accelerator Utilization [AU] (%): {:.4}",
            metrics.au_percentage
        ),
        format!(
            "Epoch {epoch} - Block {block} [Training] Throughput (samples/second): {:.4}",
            metrics.throughput_samples_per_second * f64::from(params.world)
        ),
        format!(
            "Epoch {epoch} - Block {block} [Training] Computation time per step (second): \
             {:.4}+/-{:.4} (set value: {computation_time_setting})",
            metrics.compute_mean_seconds, metrics.compute_stdev_seconds
        ),
    ]
}

/// `Ending epoch e - n steps completed in t s`, with `n` the training steps recorded and
/// `t` the time from the epoch start to the end of its last block. Available as soon as the
/// last block has ended, before or after `end_epoch`.
pub fn epoch_end_lines(recorder: &RankRecorder, epoch: u32) -> Vec<String> {
    let Some(record) = recorder.epoch(epoch) else {
        return Vec::new();
    };
    let seconds = record
        .train_duration_seconds()
        .unwrap_or_else(|| crate::recorder::seconds_between(record.span.start, recorder.now()));
    vec![format!(
        "Ending epoch {epoch} - {} steps completed in {seconds:.2} s",
        record.train_steps()
    )]
}

/// Every line DLIO logs at the end of an epoch's training pass: [`block_end_lines`] for each
/// closed block, then [`epoch_end_lines`].
pub fn train_pass_lines(
    recorder: &RankRecorder,
    params: &MetricParams,
    epoch: u32,
    computation_time_setting: impl Display,
) -> Vec<String> {
    let Some(record) = recorder.epoch(epoch) else {
        return Vec::new();
    };
    let mut lines: Vec<String> = record
        .blocks
        .iter()
        .flat_map(|block| {
            block_end_lines(
                recorder,
                params,
                epoch,
                block.block,
                &computation_time_setting,
            )
        })
        .collect();
    lines.extend(epoch_end_lines(recorder, epoch));
    lines
}

/// The lines DLIO logs when an evaluation pass ends: its duration, rank 0's AU and rank 0's
/// throughput times the number of ranks.
pub fn eval_pass_lines(recorder: &RankRecorder, params: &MetricParams, epoch: u32) -> Vec<String> {
    let Some(eval) = recorder.epoch(epoch).and_then(|e| e.eval.as_ref()) else {
        return Vec::new();
    };
    let Some(metrics) = eval_metrics(eval, params) else {
        return Vec::new();
    };
    // The pass that ended: an epoch of several passes (an evaluation every few steps) reports
    // each on its own here, and their sum in the AU and throughput lines below.
    let (steps, seconds) = match eval.last_pass {
        Some(pass) if eval.passes > 1 => pass,
        _ => (
            eval.reported_steps.unwrap_or(eval.steps.len() as u64),
            metrics.wall_seconds,
        ),
    };
    vec![
        format!("Ending eval - {steps} steps completed in {seconds:.2} s"),
        format!(
            "Epoch {epoch} [Eval] Accelerator Utilization [AU] (%): {:.4}",
            metrics.au_percentage
        ),
        format!(
            "Epoch {epoch} [Eval] Throughput (samples/second): {:.4}",
            metrics.throughput_samples_per_second * f64::from(params.world)
        ),
    ]
}

/// `Finished saving checkpoint b for epoch e in t s; Throughput: x GB/s` (or `loading`) for
/// the latest matching checkpoint, with `x = checkpoint size in GiB / t`. The size is
/// `params.checkpoint_size_bytes`, else the bytes this rank reported.
pub fn checkpoint_end_lines(
    recorder: &RankRecorder,
    params: &MetricParams,
    epoch: u32,
    kind: CheckpointKind,
    index: u32,
) -> Vec<String> {
    let Some(record) = recorder.epoch(epoch).and_then(|e| {
        e.checkpoints
            .iter()
            .rev()
            .find(|c| c.kind == kind && c.index == index)
    }) else {
        return Vec::new();
    };
    let seconds = record.seconds();
    let size_gb = params.checkpoint_size_bytes.unwrap_or(record.size_bytes) as f64
        / (1024.0 * 1024.0 * 1024.0);
    let verb = match kind {
        CheckpointKind::Save => "saving",
        CheckpointKind::Load => "loading",
    };
    vec![format!(
        "Finished {verb} checkpoint {index} for epoch {epoch} in {seconds:.4} s; \
         Throughput: {:.4} GB/s",
        crate::formulas::rate(size_gb, seconds)
    )]
}
