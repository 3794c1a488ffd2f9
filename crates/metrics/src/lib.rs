//! Metrics for dlio: per-step timings in, DLIO's AU and throughput and its output files out.
//!
//! # Where this sits
//!
//! The trainer (`dlio-trainer`) drives the step loop; this crate is the last stage of the
//! pipeline. Each rank owns one [`RankRecorder`] on its own thread (no locks on the hot
//! path) and tells it when epochs, blocks, evaluation passes and checkpoints start and end,
//! and how long each step waited for data and computed. Loader threads keep their own
//! [`LatencyHistogram`]s (fixed memory, integer nanoseconds) and merge them in at epoch end,
//! together with the [`IoTotals`] they actually moved. [`RankRecorder::finish`] yields a
//! [`RankReport`]; [`aggregate`] turns every rank's report into [`RunMetrics`], and
//! [`write_outputs`] writes `summary.json`, `{rank}_output.json`,
//! `{rank}_per_epoch_stats.json` and `per_epoch_stats.json`.
//!
//! # Why the API has this shape
//!
//! * **Raw times in, formulas applied later.** The recorder stores only timestamps and step
//!   times; AU and throughput are pure functions ([`block_metrics`], [`eval_metrics`],
//!   [`epoch_train_metrics`], [`aggregate`]) of a report and [`MetricParams`]. So the
//!   formulas are tested on hand-built step lists, and DLIO's `-2` quirk is one switch
//!   ([`MetricParams::upstream_throughput`]).
//! * **DLIO's outputs, byte for byte where tools parse them.** Python tools read
//!   `summary.json` and the per-rank files, so their keys, nesting and number styles follow
//!   DLIO exactly (durations as `"12.34"` strings, 4-space indent, DLIO's key order).
//!   Everything DLIO lacks (bytes actually read, latency percentiles, MLPerf's checkpoint
//!   metric, per-rank figures, whether the run completed) goes under `summary.json`'s
//!   `"dlio_rs"` key and nowhere else.
//! * **Per-step lists are kept, per-sample lists are not.** DLIO's `{rank}_output.json`
//!   holds every step's times, so we keep those (three floats per step); per-sample
//!   latencies only ever live in histograms.
//! * **Rank 0's log lines come from rank 0's recorder.** [`train_pass_lines`],
//!   [`eval_pass_lines`] and their finer-grained parts build DLIO's progress lines from the
//!   recorder at the moment the trainer logs them.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use dlio_metrics::{MetricParams, Phase, RankRecorder, aggregate};
//!
//! let mut recorder = RankRecorder::new(0);
//! recorder.start_epoch(1);
//! recorder.start_block(1, 1);
//! for _ in 0..4 {
//!     let (load, compute) = (Duration::from_millis(1), Duration::from_millis(2));
//!     recorder.record_step(1, Phase::Train { block: 1 }, load, compute, load + compute);
//! }
//! recorder.end_block(1, 1, 4);
//! recorder.end_epoch(1, 4);
//!
//! let params = MetricParams {
//!     world: 1, batch_size: 4, batch_size_eval: 1, steps_per_epoch: 4,
//!     eval_steps_per_epoch: 0, exclude_start_steps: 1, exclude_end_steps: 0,
//!     record_length_bytes: 65536.0, au_threshold: 0.9, checkpoint_size_bytes: None,
//!     upstream_throughput: false,
//! };
//! let metrics = aggregate(&[recorder.finish()], &params);
//! let train = metrics.train.as_ref().expect("one epoch was trained");
//! assert_eq!(train.epochs, vec![1]);
//! assert!(metrics.metric_lines()[2].starts_with("[METRIC] Number of Simulated Accelerators: 1"));
//! ```
#![deny(missing_docs)]

mod aggregate;
mod error;
mod formulas;
mod histogram;
mod host;
mod lines;
mod output;
mod recorder;

pub use aggregate::{
    CheckpointMetrics, CheckpointPhaseMetrics, ExcludedTime, MeasuredEpoch, MeasuredMetrics,
    MeasuredPhase, MetricWindowCheck, MlperfCheckpointMetrics, PhaseMetrics, RankEpochMetrics,
    RankMetrics, RunMetrics, aggregate,
};
pub use error::MetricsError;
pub use formulas::{
    BlockMetrics, EpochMetrics, MetricParams, block_metrics, epoch_train_metrics, eval_metrics,
};
pub use histogram::{LatencyHistogram, LatencySummary, MAX_TRACKED_NS};
pub use host::{HostInfo, HostShare, MLPERF_DATASET_MEMORY_MULTIPLE, caching_warning, group_hosts};
pub use lines::{
    block_end_lines, block_start_line, checkpoint_end_lines, epoch_end_lines, epoch_start_line,
    eval_pass_lines, eval_start_line, train_pass_lines,
};
pub use output::{RunInfo, format_timestamp, write_outputs};
pub use recorder::{
    BlockRecord, CheckpointKind, CheckpointRecord, EpochRecord, EvalRecord, IoTotals, Phase,
    PhaseHistograms, PhaseKind, PhaseLatency, RankRecorder, RankReport, Span, StepTimes,
};
