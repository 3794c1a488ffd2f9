//! Across ranks and epochs: DLIO's `end_run` figures, checkpoint figures (DLIO's and
//! MLPerf's), and our own measured I/O.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::formulas::{
    MetricParams, block_metrics, epoch_train_metrics, eval_metrics, mean, population_stdev, rate,
};
use crate::histogram::LatencySummary;
use crate::recorder::{
    CheckpointKind, CheckpointRecord, IoTotals, PhaseHistograms, PhaseKind, PhaseLatency,
    RankReport, seconds_between,
};

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Every figure of a run: DLIO's (for `summary.json` and the `[METRIC]` block) and ours.
#[derive(Debug, Clone, Serialize)]
pub struct RunMetrics {
    /// Number of simulated accelerators (`params.world`).
    pub num_accelerators: u32,
    /// Training figures; `None` when no training block was recorded.
    pub train: Option<PhaseMetrics>,
    /// Evaluation figures; `None` when no evaluation pass was recorded.
    pub eval: Option<PhaseMetrics>,
    /// Checkpoint figures; `None` when no checkpoint was recorded.
    pub checkpoint: Option<CheckpointMetrics>,
    /// What we measured beyond DLIO: bytes actually read, latencies, per-rank figures.
    pub measured: MeasuredMetrics,
    /// The parameters these figures were computed with (the per-rank files need them).
    #[serde(skip)]
    pub params: MetricParams,
}

/// DLIO's nine figures of one phase (`train_*` or `eval_*`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseMetrics {
    /// The epochs counted: those every rank finished.
    pub epochs: Vec<u32>,
    /// Per epoch, the mean over ranks of each rank's AU (%).
    pub au_percentage: Vec<f64>,
    /// Mean over epochs.
    pub au_mean_percentage: f64,
    /// Population standard deviation over epochs.
    pub au_stdev_percentage: f64,
    /// `au_mean_percentage >= metric.au * 100`.
    pub au_meets_expectation: bool,
    /// Per epoch, the sum over ranks of each rank's samples/s.
    pub throughput_samples_per_second: Vec<f64>,
    /// Mean over epochs.
    pub throughput_mean_samples_per_second: f64,
    /// Population standard deviation over epochs.
    pub throughput_stdev_samples_per_second: f64,
    /// `throughput_mean * record_length / 2^20` (nominal, as DLIO).
    pub io_mean_mb_per_second: f64,
    /// `throughput_stdev * record_length / 2^20`.
    pub io_stdev_mb_per_second: f64,
}

/// Checkpoint figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointMetrics {
    /// Global checkpoint size in GiB (DLIO labels it GB).
    pub size_gb: f64,
    /// Saves, if any were recorded.
    pub save: Option<CheckpointPhaseMetrics>,
    /// Loads, if any were recorded.
    pub load: Option<CheckpointPhaseMetrics>,
}

/// Figures of the saves (or the loads) of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointPhaseMetrics {
    /// DLIO: rank 0's own duration of each checkpoint, seconds.
    pub durations_seconds: Vec<f64>,
    /// DLIO: `size_gb / duration` for each of rank 0's checkpoints.
    pub throughputs_gb_per_second: Vec<f64>,
    /// Mean of `durations_seconds`.
    pub duration_mean_seconds: f64,
    /// Population standard deviation of `durations_seconds`.
    pub duration_stdev_seconds: f64,
    /// Mean of `throughputs_gb_per_second`.
    pub io_mean_gb_per_second: f64,
    /// Population standard deviation of `throughputs_gb_per_second`.
    pub io_stdev_gb_per_second: f64,
    /// MLPerf Storage's figures over every rank.
    pub mlperf: MlperfCheckpointMetrics,
}

/// MLPerf Storage's checkpoint metric: per checkpoint, duration = max over ranks and
/// throughput = min over ranks (each rank's throughput being `size_gb / its duration`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MlperfCheckpointMetrics {
    /// `(epoch, index)` of each checkpoint.
    pub checkpoints: Vec<(u32, u32)>,
    /// Max over ranks of each checkpoint's duration.
    pub durations_seconds: Vec<f64>,
    /// Min over ranks of each checkpoint's throughput.
    pub throughputs_gb_per_second: Vec<f64>,
    /// Mean of `durations_seconds`.
    pub duration_mean_seconds: f64,
    /// Population standard deviation of `durations_seconds`.
    pub duration_stdev_seconds: f64,
    /// Mean of `throughputs_gb_per_second`.
    pub throughput_mean_gb_per_second: f64,
    /// Population standard deviation of `throughputs_gb_per_second`.
    pub throughput_stdev_gb_per_second: f64,
    /// Bytes the ranks reported for each checkpoint, summed.
    pub bytes: Vec<u64>,
    /// Those bytes in GiB over the span from the first rank's start to the last rank's end.
    pub measured_gib_per_second: Vec<f64>,
}

/// Our own figures, from bytes actually moved and wall times actually measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredMetrics {
    /// Number of rank reports.
    pub ranks: usize,
    /// How much of the training time the metric window leaves out.
    pub metric_window: MetricWindowCheck,
    /// Training phase.
    pub train: MeasuredPhase,
    /// Evaluation phase.
    pub eval: MeasuredPhase,
    /// Per-rank figures.
    pub per_rank: Vec<RankMetrics>,
}

/// How much of each epoch's training time falls in the steps the metric window leaves out
/// (`output.metric.exclude_start_steps` at the start of each block, `exclude_end_steps` at the end).
/// DLIO's AU and throughput are computed without that time, as they should be when it is a
/// warm-up; when it is most of the epoch (readers prefetching a whole epoch's objects in its
/// first step, say), the figures describe what little is left, and [`Self::warning`] says so.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricWindowCheck {
    /// Per epoch with a closed training block: the largest share over ranks of the epoch's
    /// block time spent in left-out steps.
    pub per_epoch: Vec<ExcludedTime>,
    /// The largest of those (0..=1).
    pub largest_excluded_fraction: f64,
    /// Where it was.
    pub at: Option<ExcludedTime>,
    /// Steps left out at the start of each block (`output.metric.exclude_start_steps`).
    pub exclude_start_steps: u64,
    /// Steps left out at the end of each epoch (`output.metric.exclude_end_steps`).
    pub exclude_end_steps: u64,
}

/// The share of one epoch's training time on one rank that the metric window left out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ExcludedTime {
    /// The epoch.
    pub epoch: u32,
    /// The rank.
    pub rank: u32,
    /// Left-out step time over block time, 0..=1.
    pub excluded_fraction: f64,
}

impl MetricWindowCheck {
    /// Above this share of an epoch's time in left-out steps, the figures are flagged.
    pub const WARN_ABOVE: f64 = 0.5;

    /// The warning for the log and `summary.json`, when an epoch's left-out steps held most
    /// of its time.
    pub fn warning(&self) -> Option<String> {
        let ExcludedTime { epoch, rank, .. } = self.at?;
        if self.largest_excluded_fraction <= Self::WARN_ABOVE {
            return None;
        }
        Some(format!(
            "the metric window left out {:.0}% of epoch {epoch}'s training time on rank {rank} \
             (output.metric.exclude_start_steps={}, exclude_end_steps={}): AU and samples/s \
             describe only the rest. Run more steps per epoch (more files or a smaller batch), \
             or set ++workload.output.metric.exclude_start_steps=0 to count the first step",
            100.0 * self.largest_excluded_fraction,
            self.exclude_start_steps,
            self.exclude_end_steps,
        ))
    }
}

fn metric_window_check(reports: &[RankReport], params: &MetricParams) -> MetricWindowCheck {
    let mut check = MetricWindowCheck {
        per_epoch: Vec::new(),
        largest_excluded_fraction: 0.0,
        at: None,
        exclude_start_steps: params.exclude_start_steps,
        exclude_end_steps: params.exclude_end_steps,
    };
    for epoch in all_epoch_numbers(reports) {
        let mut largest: Option<ExcludedTime> = None;
        for report in reports {
            let Some(record) = report.epoch(epoch) else {
                continue;
            };
            let (excluded, wall) = record
                .blocks
                .iter()
                .filter_map(|block| block_metrics(block, params))
                .fold((0.0, 0.0), |(e, w), b| {
                    (
                        e + (b.wall_seconds - b.measured_seconds).max(0.0),
                        w + b.wall_seconds,
                    )
                });
            if wall > 0.0 {
                let excluded_fraction = (excluded / wall).clamp(0.0, 1.0);
                if largest.is_none_or(|l| excluded_fraction > l.excluded_fraction) {
                    largest = Some(ExcludedTime {
                        epoch,
                        rank: report.rank,
                        excluded_fraction,
                    });
                }
            }
        }
        if let Some(largest) = largest {
            check.per_epoch.push(largest);
            if check.at.is_none() || largest.excluded_fraction > check.largest_excluded_fraction {
                check.largest_excluded_fraction = largest.excluded_fraction;
                check.at = Some(largest);
            }
        }
    }
    check
}

/// Measured figures of one phase over all ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredPhase {
    /// I/O over every rank and epoch.
    pub io: IoTotals,
    /// Sum over epochs of the phase wall time (for training: the slowest rank's block time,
    /// so checkpoint time is left out).
    pub wall_seconds: f64,
    /// `bytes_read / wall_seconds` over the epochs listed in `per_epoch`.
    pub bytes_read_per_second: f64,
    /// Per epoch that has this phase.
    pub per_epoch: Vec<MeasuredEpoch>,
    /// Per-sample read latency over every rank and epoch.
    pub sample_read_latency: LatencySummary,
    /// Per-batch wait over every rank and epoch.
    pub batch_wait_latency: LatencySummary,
}

/// Measured figures of one phase of one epoch over all ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeasuredEpoch {
    /// The epoch.
    pub epoch: u32,
    /// Bytes read by every rank.
    pub bytes_read: u64,
    /// The slowest rank's phase time, seconds.
    pub wall_seconds: f64,
    /// `bytes_read / 2^20 / wall_seconds`.
    pub mb_per_second: f64,
}

/// One rank's figures, for spotting stragglers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankMetrics {
    /// The rank.
    pub rank: u32,
    /// Training I/O.
    pub train_io: IoTotals,
    /// Evaluation I/O.
    pub eval_io: IoTotals,
    /// Per epoch the rank started.
    pub epochs: Vec<RankEpochMetrics>,
}

/// One rank's figures for one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RankEpochMetrics {
    /// The epoch.
    pub epoch: u32,
    /// Training AU (%), if a block was closed.
    pub train_au_percentage: Option<f64>,
    /// Training samples/s of this rank.
    pub train_throughput_samples_per_second: Option<f64>,
    /// Evaluation AU (%), if evaluation ran.
    pub eval_au_percentage: Option<f64>,
    /// Evaluation samples/s of this rank.
    pub eval_throughput_samples_per_second: Option<f64>,
    /// Training bytes read.
    pub train_bytes_read: u64,
    /// Training latencies of this epoch.
    pub train_latency: Option<PhaseLatency>,
    /// Evaluation latencies of this epoch.
    pub eval_latency: Option<PhaseLatency>,
}

/// Turns the ranks' reports into the run's figures, exactly as DLIO's `end_run` does:
/// per epoch, AU is the mean over ranks and throughput the sum over ranks; means and
/// population standard deviations are over epochs; MB/s is throughput times the nominal
/// record length over 2^20. An epoch counts when every rank ended it.
pub fn aggregate(reports: &[RankReport], params: &MetricParams) -> RunMetrics {
    RunMetrics {
        num_accelerators: params.world,
        train: train_metrics(reports, params),
        eval: eval_phase_metrics(reports, params),
        checkpoint: checkpoint_metrics(reports, params),
        measured: measured_metrics(reports, params),
        params: params.clone(),
    }
}

fn train_metrics(reports: &[RankReport], params: &MetricParams) -> Option<PhaseMetrics> {
    let trained = reports
        .iter()
        .any(|r| r.epochs.iter().any(|e| !e.blocks.is_empty()));
    if !trained {
        return None;
    }
    let per_epoch = epochs_on_every_rank(reports, |report, epoch| {
        let record = report.epoch(epoch)?;
        record.span.end?;
        let metrics = epoch_train_metrics(record, params)?;
        Some((metrics.au_percentage, metrics.throughput_samples_per_second))
    });
    Some(phase_metrics(per_epoch, reports.len(), params))
}

fn eval_phase_metrics(reports: &[RankReport], params: &MetricParams) -> Option<PhaseMetrics> {
    let evaluated = reports
        .iter()
        .any(|r| r.epochs.iter().any(|e| e.eval.is_some()));
    if !evaluated {
        return None;
    }
    let per_epoch = epochs_on_every_rank(reports, |report, epoch| {
        let metrics = eval_metrics(report.epoch(epoch)?.eval.as_ref()?, params)?;
        Some((metrics.au_percentage, metrics.throughput_samples_per_second))
    });
    Some(phase_metrics(per_epoch, reports.len(), params))
}

/// For each epoch number that every report yields a value for: the epoch and the values.
fn epochs_on_every_rank(
    reports: &[RankReport],
    value: impl Fn(&RankReport, u32) -> Option<(f64, f64)>,
) -> Vec<(u32, Vec<(f64, f64)>)> {
    all_epoch_numbers(reports)
        .into_iter()
        .filter_map(|epoch| {
            let values: Option<Vec<_>> = reports.iter().map(|r| value(r, epoch)).collect();
            values.map(|values| (epoch, values))
        })
        .collect()
}

fn all_epoch_numbers(reports: &[RankReport]) -> BTreeSet<u32> {
    reports
        .iter()
        .flat_map(|r| r.epochs.iter().map(|e| e.epoch))
        .collect()
}

fn phase_metrics(
    per_epoch: Vec<(u32, Vec<(f64, f64)>)>,
    ranks: usize,
    params: &MetricParams,
) -> PhaseMetrics {
    let ranks = ranks.max(1) as f64;
    let epochs = per_epoch.iter().map(|(epoch, _)| *epoch).collect();
    let au: Vec<f64> = per_epoch
        .iter()
        .map(|(_, values)| values.iter().map(|(au, _)| au).sum::<f64>() / ranks)
        .collect();
    let throughput: Vec<f64> = per_epoch
        .iter()
        .map(|(_, values)| values.iter().map(|(_, thr)| thr).sum::<f64>())
        .collect();
    let au_mean = mean(&au);
    let throughput_mean = mean(&throughput);
    let throughput_stdev = population_stdev(&throughput);
    PhaseMetrics {
        epochs,
        au_mean_percentage: au_mean,
        au_stdev_percentage: population_stdev(&au),
        // Same floating-point expression as DLIO (`mean >= au * 100`), so the edge agrees.
        au_meets_expectation: au_mean >= params.au_threshold * 100.0,
        au_percentage: au,
        throughput_mean_samples_per_second: throughput_mean,
        throughput_stdev_samples_per_second: throughput_stdev,
        io_mean_mb_per_second: throughput_mean * params.record_length_bytes / MIB,
        io_stdev_mb_per_second: throughput_stdev * params.record_length_bytes / MIB,
        throughput_samples_per_second: throughput,
    }
}

/// Every checkpoint record of one report, with its epoch, in recording order.
fn checkpoints_of(
    report: &RankReport,
    kind: CheckpointKind,
) -> impl Iterator<Item = (u32, &CheckpointRecord)> {
    report.epochs.iter().flat_map(move |epoch| {
        epoch
            .checkpoints
            .iter()
            .filter(move |c| c.kind == kind)
            .map(move |c| (epoch.epoch, c))
    })
}

/// The global checkpoint size in GiB: the configured size, else the largest sum over ranks
/// of the bytes reported for one checkpoint.
pub(crate) fn checkpoint_size_gb(reports: &[RankReport], params: &MetricParams) -> f64 {
    if let Some(bytes) = params.checkpoint_size_bytes {
        return bytes as f64 / GIB;
    }
    [CheckpointKind::Save, CheckpointKind::Load]
        .into_iter()
        .flat_map(|kind| checkpoint_groups(reports, kind))
        .map(|group| group.records.iter().map(|c| c.size_bytes).sum::<u64>())
        .max()
        .unwrap_or(0) as f64
        / GIB
}

struct CheckpointGroup<'a> {
    epoch: u32,
    index: u32,
    records: Vec<&'a CheckpointRecord>,
}

/// Records of the same checkpoint (same epoch and index) across ranks, in the order they
/// first appear.
fn checkpoint_groups(reports: &[RankReport], kind: CheckpointKind) -> Vec<CheckpointGroup<'_>> {
    let mut groups: Vec<CheckpointGroup<'_>> = Vec::new();
    for report in reports {
        for (epoch, record) in checkpoints_of(report, kind) {
            match groups
                .iter_mut()
                .find(|g| g.epoch == epoch && g.index == record.index)
            {
                Some(group) => group.records.push(record),
                None => groups.push(CheckpointGroup {
                    epoch,
                    index: record.index,
                    records: vec![record],
                }),
            }
        }
    }
    groups
}

fn checkpoint_metrics(reports: &[RankReport], params: &MetricParams) -> Option<CheckpointMetrics> {
    let any = reports
        .iter()
        .any(|r| r.epochs.iter().any(|e| !e.checkpoints.is_empty()));
    if !any {
        return None;
    }
    let size_gb = checkpoint_size_gb(reports, params);
    let root = reports.iter().find(|r| r.rank == 0).or(reports.first());
    let phase = |kind| checkpoint_phase_metrics(reports, root, kind, size_gb);
    Some(CheckpointMetrics {
        size_gb,
        save: phase(CheckpointKind::Save),
        load: phase(CheckpointKind::Load),
    })
}

fn checkpoint_phase_metrics(
    reports: &[RankReport],
    root: Option<&RankReport>,
    kind: CheckpointKind,
    size_gb: f64,
) -> Option<CheckpointPhaseMetrics> {
    let groups = checkpoint_groups(reports, kind);
    if groups.is_empty() {
        return None;
    }
    let (durations, throughputs): (Vec<f64>, Vec<f64>) = root
        .into_iter()
        .flat_map(|report| checkpoints_of(report, kind))
        .map(|(_, record)| {
            let seconds = record.seconds();
            (seconds, rate(size_gb, seconds))
        })
        .unzip();

    let mut mlperf = MlperfCheckpointMetrics {
        checkpoints: Vec::new(),
        durations_seconds: Vec::new(),
        throughputs_gb_per_second: Vec::new(),
        duration_mean_seconds: 0.0,
        duration_stdev_seconds: 0.0,
        throughput_mean_gb_per_second: 0.0,
        throughput_stdev_gb_per_second: 0.0,
        bytes: Vec::new(),
        measured_gib_per_second: Vec::new(),
    };
    for group in &groups {
        let longest = group
            .records
            .iter()
            .map(|c| c.seconds())
            .fold(f64::NEG_INFINITY, f64::max);
        let slowest = group
            .records
            .iter()
            .map(|c| rate(size_gb, c.seconds()))
            .fold(f64::INFINITY, f64::min);
        let bytes: u64 = group.records.iter().map(|c| c.size_bytes).sum();
        let first_start = group.records.iter().map(|c| c.start).min();
        let last_end = group.records.iter().map(|c| c.end).max();
        let span = match (first_start, last_end) {
            (Some(start), Some(end)) => seconds_between(start, end),
            _ => 0.0,
        };
        mlperf.checkpoints.push((group.epoch, group.index));
        mlperf.durations_seconds.push(longest);
        mlperf.throughputs_gb_per_second.push(slowest);
        mlperf.bytes.push(bytes);
        mlperf
            .measured_gib_per_second
            .push(rate(bytes as f64 / GIB, span));
    }
    mlperf.duration_mean_seconds = mean(&mlperf.durations_seconds);
    mlperf.duration_stdev_seconds = population_stdev(&mlperf.durations_seconds);
    mlperf.throughput_mean_gb_per_second = mean(&mlperf.throughputs_gb_per_second);
    mlperf.throughput_stdev_gb_per_second = population_stdev(&mlperf.throughputs_gb_per_second);

    Some(CheckpointPhaseMetrics {
        duration_mean_seconds: mean(&durations),
        duration_stdev_seconds: population_stdev(&durations),
        io_mean_gb_per_second: mean(&throughputs),
        io_stdev_gb_per_second: population_stdev(&throughputs),
        durations_seconds: durations,
        throughputs_gb_per_second: throughputs,
        mlperf,
    })
}

fn measured_metrics(reports: &[RankReport], params: &MetricParams) -> MeasuredMetrics {
    MeasuredMetrics {
        ranks: reports.len(),
        metric_window: metric_window_check(reports, params),
        train: measured_phase(reports, PhaseKind::Train),
        eval: measured_phase(reports, PhaseKind::Eval),
        per_rank: reports.iter().map(|r| rank_metrics(r, params)).collect(),
    }
}

fn measured_phase(reports: &[RankReport], phase: PhaseKind) -> MeasuredPhase {
    let mut io = IoTotals::default();
    for report in reports {
        io += report.io(phase);
    }
    let mut per_epoch = Vec::new();
    for epoch in all_epoch_numbers(reports) {
        let mut bytes_read = 0u64;
        let mut wall_seconds: Option<f64> = None;
        for record in reports.iter().filter_map(|r| r.epoch(epoch)) {
            let (bytes, seconds) = match phase {
                PhaseKind::Train => {
                    let closed: Vec<f64> = record
                        .blocks
                        .iter()
                        .filter_map(|b| b.span.seconds())
                        .collect();
                    let seconds = (!closed.is_empty()).then(|| closed.iter().sum());
                    (record.train_io.bytes_read, seconds)
                }
                PhaseKind::Eval => (
                    record.eval_io.bytes_read,
                    record.eval.as_ref().and_then(|e| e.seconds()),
                ),
            };
            bytes_read = bytes_read.saturating_add(bytes);
            if let Some(seconds) = seconds {
                wall_seconds = Some(wall_seconds.map_or(seconds, |w| w.max(seconds)));
            }
        }
        if let Some(wall_seconds) = wall_seconds {
            per_epoch.push(MeasuredEpoch {
                epoch,
                bytes_read,
                wall_seconds,
                mb_per_second: rate(bytes_read as f64 / MIB, wall_seconds),
            });
        }
    }
    let wall_seconds: f64 = per_epoch.iter().map(|e| e.wall_seconds).sum();
    let bytes: u64 = per_epoch.iter().map(|e| e.bytes_read).sum();

    let mut merged = PhaseHistograms::default();
    for report in reports {
        let run = match phase {
            PhaseKind::Train => &report.train_latency,
            PhaseKind::Eval => &report.eval_latency,
        };
        if let Some(run) = run {
            merged.sample_read.merge(&run.sample_read);
            merged.batch_wait.merge(&run.batch_wait);
        }
    }
    MeasuredPhase {
        io,
        wall_seconds,
        bytes_read_per_second: rate(bytes as f64, wall_seconds),
        per_epoch,
        sample_read_latency: merged.sample_read.summary(),
        batch_wait_latency: merged.batch_wait.summary(),
    }
}

fn rank_metrics(report: &RankReport, params: &MetricParams) -> RankMetrics {
    RankMetrics {
        rank: report.rank,
        train_io: report.io(PhaseKind::Train),
        eval_io: report.io(PhaseKind::Eval),
        epochs: report
            .epochs
            .iter()
            .map(|record| {
                let train = epoch_train_metrics(record, params);
                let eval = record.eval.as_ref().and_then(|e| eval_metrics(e, params));
                RankEpochMetrics {
                    epoch: record.epoch,
                    train_au_percentage: train.map(|t| t.au_percentage),
                    train_throughput_samples_per_second: train
                        .map(|t| t.throughput_samples_per_second),
                    eval_au_percentage: eval.map(|e| e.au_percentage),
                    eval_throughput_samples_per_second: eval
                        .map(|e| e.throughput_samples_per_second),
                    train_bytes_read: record.train_io.bytes_read,
                    train_latency: record.train_latency,
                    eval_latency: record.eval_latency,
                }
            })
            .collect(),
    }
}

/// The separator line of DLIO's `[METRIC]` block.
const METRIC_RULE: &str = "[METRIC] ==========================================================";

impl RunMetrics {
    /// The final `[METRIC]` block, line by line, as DLIO prints it (training figures with 4
    /// decimals, evaluation throughput with 6, as DLIO does). Rank 0 logs it at the end.
    pub fn metric_lines(&self) -> Vec<String> {
        let mut lines = vec![
            "Averaged metric over all steps/epochs".to_owned(),
            METRIC_RULE.to_owned(),
            // DLIO's line ends with a space; kept so text parsers see the same bytes.
            format!(
                "[METRIC] Number of Simulated Accelerators: {} ",
                self.num_accelerators
            ),
        ];
        if let Some(train) = &self.train {
            lines.push(format!(
                "[METRIC] Training Accelerator Utilization [AU] (%): {:.4} ({:.4})",
                train.au_mean_percentage, train.au_stdev_percentage
            ));
            lines.push(format!(
                "[METRIC] Training Throughput (samples/second): {:.4} ({:.4})",
                train.throughput_mean_samples_per_second, train.throughput_stdev_samples_per_second
            ));
            lines.push(format!(
                "[METRIC] Training I/O Throughput (MB/second): {:.4} ({:.4})",
                train.io_mean_mb_per_second, train.io_stdev_mb_per_second
            ));
            lines.push(format!(
                "[METRIC] train_au_meet_expectation: {}",
                expectation(train.au_meets_expectation)
            ));
        }
        if let Some(checkpoint) = &self.checkpoint {
            for (name, phase) in [("save", &checkpoint.save), ("load", &checkpoint.load)] {
                if let Some(phase) = phase {
                    lines.push(format!(
                        "[METRIC] Checkpoint {name} duration (seconds): {:.4} ({:.4})",
                        phase.duration_mean_seconds, phase.duration_stdev_seconds
                    ));
                    lines.push(format!(
                        "[METRIC] Checkpoint {name} I/O Throughput (GB/second): {:.4} ({:.4})",
                        phase.io_mean_gb_per_second, phase.io_stdev_gb_per_second
                    ));
                }
            }
        }
        if let Some(eval) = &self.eval {
            lines.push(format!(
                "[METRIC] Eval Accelerator Utilization [AU] (%): {:.4} ({:.4})",
                eval.au_mean_percentage, eval.au_stdev_percentage
            ));
            lines.push(format!(
                "[METRIC] Eval Throughput (samples/second): {:.6} ({:.6})",
                eval.throughput_mean_samples_per_second, eval.throughput_stdev_samples_per_second
            ));
            lines.push(format!(
                "[METRIC] Eval Throughput (MB/second): {:.6} ({:.6})",
                eval.io_mean_mb_per_second, eval.io_stdev_mb_per_second
            ));
            lines.push(format!(
                "[METRIC] eval_au_meet_expectation: {}",
                expectation(eval.au_meets_expectation)
            ));
        }
        lines.push(METRIC_RULE.to_owned());
        lines
    }
}

/// DLIO's words for meeting the AU expectation.
pub(crate) fn expectation(met: bool) -> &'static str {
    if met { "success" } else { "fail" }
}
