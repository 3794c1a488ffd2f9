//! The per-rank recorder the trainer feeds, and the report it turns into.

use std::ops::AddAssign;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::histogram::{LatencyHistogram, LatencySummary};
use crate::host::read_proc_map;

/// Which part of an epoch a step belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// A training step of block `block` (blocks are numbered from 1 and split an epoch at
    /// mid-epoch checkpoints).
    Train {
        /// The block the step belongs to.
        block: u32,
    },
    /// An evaluation step.
    Eval,
}

/// Training or evaluation, without a block number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    /// The training phase of an epoch.
    Train,
    /// The evaluation phase of an epoch.
    Eval,
}

/// Whether a checkpoint was written or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointKind {
    /// A checkpoint was written (`save_ckpt{b}` in DLIO's files).
    Save,
    /// A checkpoint was read back (`load_ckpt{b}`).
    Load,
}

/// I/O actually performed, counted by the loader: bytes moved, read calls, file opens and
/// samples delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IoTotals {
    /// Bytes returned by read calls (not the nominal record size).
    pub bytes_read: u64,
    /// Number of read calls (or ranged GETs).
    pub read_ops: u64,
    /// Number of file opens.
    pub opens: u64,
    /// Number of samples handed to the training loop.
    pub samples: u64,
}

impl AddAssign for IoTotals {
    fn add_assign(&mut self, other: Self) {
        self.bytes_read = self.bytes_read.saturating_add(other.bytes_read);
        self.read_ops = self.read_ops.saturating_add(other.read_ops);
        self.opens = self.opens.saturating_add(other.opens);
        self.samples = self.samples.saturating_add(other.samples);
    }
}

/// A time interval; `end` is `None` while it is still open (or when the run was interrupted).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// When it started.
    pub start: SystemTime,
    /// When it ended, if it did.
    pub end: Option<SystemTime>,
}

impl Span {
    /// Length in seconds, or `None` while open.
    pub fn seconds(&self) -> Option<f64> {
        self.end.map(|end| seconds_between(self.start, end))
    }
}

/// `end - start` in seconds, negative if `end` is earlier.
pub(crate) fn seconds_between(start: SystemTime, end: SystemTime) -> f64 {
    match end.duration_since(start) {
        Ok(elapsed) => elapsed.as_secs_f64(),
        Err(early) => -early.duration().as_secs_f64(),
    }
}

/// Per-step times of one block (or of one evaluation pass), in seconds, in step order:
/// the three lists DLIO writes to `{rank}_output.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StepTimes {
    /// Time from asking for the batch to receiving it (data wait).
    pub load: Vec<f64>,
    /// Time from asking for the batch to the end of the emulated compute (excludes the
    /// barrier).
    #[serde(rename = "proc")]
    pub proc_: Vec<f64>,
    /// Time spent in the emulated compute.
    pub compute: Vec<f64>,
}

impl StepTimes {
    /// Number of steps recorded.
    pub fn len(&self) -> usize {
        self.proc_.len()
    }

    /// True when no step was recorded.
    pub fn is_empty(&self) -> bool {
        self.proc_.is_empty()
    }

    fn push(&mut self, load: Duration, compute: Duration, proc_: Duration) {
        self.load.push(load.as_secs_f64());
        self.compute.push(compute.as_secs_f64());
        self.proc_.push(proc_.as_secs_f64());
    }
}

/// The steps of one training block: the steps between two mid-epoch checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockRecord {
    /// Block number, from 1.
    pub block: u32,
    /// Block wall time (includes barrier waits, excludes checkpoint time).
    pub span: Span,
    /// The steps recorded in this block.
    pub steps: StepTimes,
    /// The step count the trainer passed to `end_block` (used in the log line only).
    pub reported_steps: Option<u64>,
}

/// The steps of an epoch's evaluation: one pass, or several when evaluations follow steps
/// (`evaluation.steps_between_evals`) and more than one falls in the epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    /// From the first pass's start to the last one's end.
    pub span: Span,
    /// The steps recorded, of every pass.
    pub steps: StepTimes,
    /// The step counts the trainer passed to `end_eval`, added up.
    pub reported_steps: Option<u64>,
    /// Passes closed.
    #[serde(default)]
    pub passes: u32,
    /// The closed passes' lengths added up, seconds.
    #[serde(default)]
    pub pass_seconds: f64,
    /// When the pass under way began; none between passes.
    #[serde(default, skip)]
    pub pass_start: Option<SystemTime>,
    /// The last closed pass's steps and length, seconds: what its "Ending eval" line says
    /// when an epoch holds several passes.
    #[serde(default, skip)]
    pub last_pass: Option<(u64, f64)>,
}

impl EvalRecord {
    /// A pass begun at `start`, open.
    fn open(start: SystemTime) -> EvalRecord {
        EvalRecord {
            span: Span { start, end: None },
            steps: StepTimes::default(),
            reported_steps: None,
            passes: 0,
            pass_seconds: 0.0,
            pass_start: Some(start),
            last_pass: None,
        }
    }

    /// The evaluation's time, seconds: its span for one pass, the passes' lengths added up
    /// for several (the training between them left out); `None` while the only pass is open.
    pub fn seconds(&self) -> Option<f64> {
        if self.passes > 1 {
            Some(self.pass_seconds)
        } else {
            self.span.seconds()
        }
    }
}

/// One checkpoint written or read by this rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// Save or load.
    pub kind: CheckpointKind,
    /// DLIO's checkpoint number within the epoch (the `b` of `save_ckpt{b}`).
    pub index: u32,
    /// When this rank started it.
    pub start: SystemTime,
    /// When this rank finished it.
    pub end: SystemTime,
    /// Bytes this rank wrote or read.
    pub size_bytes: u64,
    /// Asynchronous saves only: seconds the step loop waited before it could hand the
    /// checkpoint to the background writer (the stall training saw). `start`..`end` is then the
    /// time from hand-off until the checkpoint was durable.
    #[serde(default)]
    pub stall_seconds: Option<f64>,
}

impl CheckpointRecord {
    /// This rank's duration in seconds.
    pub fn seconds(&self) -> f64 {
        seconds_between(self.start, self.end)
    }
}

/// Latency summaries of one phase of one epoch on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PhaseLatency {
    /// Time to read one sample (open + reads + decode), per sample.
    pub sample_read: LatencySummary,
    /// Time the training loop waited for each batch.
    pub batch_wait: LatencySummary,
}

/// The latency histograms of one phase, merged over every epoch of one rank.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PhaseHistograms {
    /// Per-sample read latency.
    pub sample_read: LatencyHistogram,
    /// Per-batch wait latency.
    pub batch_wait: LatencyHistogram,
}

impl PhaseHistograms {
    fn merge(&mut self, sample_read: &LatencyHistogram, batch_wait: &LatencyHistogram) {
        self.sample_read.merge(sample_read);
        self.batch_wait.merge(batch_wait);
    }

    fn summary(&self) -> PhaseLatency {
        PhaseLatency {
            sample_read: self.sample_read.summary(),
            batch_wait: self.batch_wait.summary(),
        }
    }
}

/// Everything one rank recorded about one epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// Epoch number, from 1.
    pub epoch: u32,
    /// From `start_epoch` to `end_epoch`.
    pub span: Span,
    /// The step count the trainer passed to `end_epoch`.
    pub reported_steps: Option<u64>,
    /// `/proc/meminfo` when the epoch started (DLIO writes it per epoch).
    pub host_meminfo: serde_json::Map<String, serde_json::Value>,
    /// Training blocks in start order.
    pub blocks: Vec<BlockRecord>,
    /// The evaluation pass, if one ran this epoch.
    pub eval: Option<EvalRecord>,
    /// Checkpoints in the order they were recorded.
    pub checkpoints: Vec<CheckpointRecord>,
    /// I/O of the training phase.
    pub train_io: IoTotals,
    /// I/O of the evaluation phase.
    pub eval_io: IoTotals,
    /// Latencies of the training phase, if the loader reported any.
    pub train_latency: Option<PhaseLatency>,
    /// Latencies of the evaluation phase, if the loader reported any.
    pub eval_latency: Option<PhaseLatency>,
}

impl EpochRecord {
    fn new(epoch: u32, start: SystemTime) -> Self {
        Self {
            epoch,
            span: Span { start, end: None },
            reported_steps: None,
            host_meminfo: serde_json::Map::new(),
            blocks: Vec::new(),
            eval: None,
            checkpoints: Vec::new(),
            train_io: IoTotals::default(),
            eval_io: IoTotals::default(),
            train_latency: None,
            eval_latency: None,
        }
    }

    /// The block numbered `block`, if it was started.
    pub fn block(&self, block: u32) -> Option<&BlockRecord> {
        self.blocks.iter().rev().find(|b| b.block == block)
    }

    /// Training steps recorded in this epoch, over all blocks.
    pub fn train_steps(&self) -> usize {
        self.blocks.iter().map(|b| b.steps.len()).sum()
    }

    /// Seconds from the epoch start to the end of its last block: the training time of the
    /// epoch, which DLIO reports as the epoch `duration` (its `end_train`). Falls back to the
    /// epoch span when there is no closed block (checkpoint-only epochs).
    pub fn train_duration_seconds(&self) -> Option<f64> {
        let last_block_end = self.blocks.iter().filter_map(|b| b.span.end).max();
        match last_block_end {
            Some(end) => Some(seconds_between(self.span.start, end)),
            None => self.span.seconds(),
        }
    }
}

/// Everything one rank recorded, ready for [`aggregate`](crate::aggregate) and
/// [`write_outputs`](crate::write_outputs). Serializable so ranks in other processes can
/// send theirs to rank 0.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// Epochs in start order.
    pub epochs: Vec<EpochRecord>,
    /// Training latencies over the whole run, if any were merged.
    pub train_latency: Option<PhaseHistograms>,
    /// Evaluation latencies over the whole run, if any were merged.
    pub eval_latency: Option<PhaseHistograms>,
}

impl RankReport {
    /// The record of `epoch`, if it was started.
    pub fn epoch(&self, epoch: u32) -> Option<&EpochRecord> {
        self.epochs.iter().rev().find(|e| e.epoch == epoch)
    }

    /// Total I/O of one phase over every epoch.
    pub fn io(&self, phase: PhaseKind) -> IoTotals {
        let mut total = IoTotals::default();
        for epoch in &self.epochs {
            total += match phase {
                PhaseKind::Train => epoch.train_io,
                PhaseKind::Eval => epoch.eval_io,
            };
        }
        total
    }
}

/// Latencies merged into the epoch currently being filled, per phase; summarised into the
/// epoch record when the next epoch starts merging or the recorder finishes.
#[derive(Debug)]
struct EpochLatency {
    epoch: u32,
    phase: PhaseKind,
    histograms: PhaseHistograms,
}

/// Records one rank's timeline: epochs, blocks, steps, evaluation, checkpoints, I/O counts and
/// latencies. Lives on the rank's own thread, so nothing is locked.
///
/// Every timestamp comes from [`RankRecorder::now`]: the wall clock read once at creation
/// plus a monotonic offset, so durations never jump with clock adjustments and timestamps
/// and durations always agree. Pass `now()` values to [`RankRecorder::record_checkpoint`].
///
/// The recorder is lenient about call order, since a trainer bug should not lose a run:
/// a step, checkpoint or I/O count for an epoch or block that was never started opens it at
/// that moment; ending something twice, or ending something never started, is ignored.
#[derive(Debug)]
pub struct RankRecorder {
    rank: u32,
    origin_wall: SystemTime,
    origin: Instant,
    epochs: Vec<EpochRecord>,
    train_latency: Option<PhaseHistograms>,
    eval_latency: Option<PhaseHistograms>,
    current_latency: Vec<EpochLatency>,
}

impl RankRecorder {
    /// A recorder for `rank`, with its clock starting now.
    pub fn new(rank: u32) -> Self {
        Self {
            rank,
            origin_wall: SystemTime::now(),
            origin: Instant::now(),
            epochs: Vec::new(),
            train_latency: None,
            eval_latency: None,
            current_latency: Vec::new(),
        }
    }

    /// The rank this recorder belongs to.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The recorder's clock: wall time at creation plus monotonic time since.
    pub fn now(&self) -> SystemTime {
        self.origin_wall + self.origin.elapsed()
    }

    /// What has been recorded for `epoch` so far.
    pub fn epoch(&self, epoch: u32) -> Option<&EpochRecord> {
        self.epochs.iter().rev().find(|e| e.epoch == epoch)
    }

    /// Opens `epoch` now and snapshots `/proc/meminfo` for it. A second call is ignored.
    pub fn start_epoch(&mut self, epoch: u32) {
        if self.epoch(epoch).is_some() {
            return;
        }
        let mut record = EpochRecord::new(epoch, self.now());
        record.host_meminfo = read_proc_map("/proc/meminfo");
        self.epochs.push(record);
    }

    /// Closes `epoch` now. Call it once the epoch is over (after its evaluation, like DLIO's
    /// `end_epoch`); the epoch's training `duration` is still measured to the end of its last
    /// block, like DLIO's `end_train`. `steps` is used in log lines only.
    pub fn end_epoch(&mut self, epoch: u32, steps: u64) {
        let now = self.now();
        if let Some(record) = self.epochs.iter_mut().rev().find(|e| e.epoch == epoch)
            && record.span.end.is_none()
        {
            record.span.end = Some(now);
            record.reported_steps = Some(steps);
        }
    }

    /// Opens training block `block` of `epoch` now. A second call for the same block is
    /// ignored.
    pub fn start_block(&mut self, epoch: u32, block: u32) {
        let now = self.now();
        let record = self.epoch_mut(epoch, now);
        if record.block(block).is_none() {
            record.blocks.push(BlockRecord {
                block,
                span: Span {
                    start: now,
                    end: None,
                },
                steps: StepTimes::default(),
                reported_steps: None,
            });
        }
    }

    /// Closes block `block` now. Idempotent: only the first call counts, so a block ended
    /// before a checkpoint keeps checkpoint time out of its AU.
    pub fn end_block(&mut self, epoch: u32, block: u32, steps: u64) {
        let now = self.now();
        if let Some(record) = self.epochs.iter_mut().rev().find(|e| e.epoch == epoch)
            && let Some(block) = record.blocks.iter_mut().rev().find(|b| b.block == block)
            && block.span.end.is_none()
        {
            block.span.end = Some(now);
            block.reported_steps = Some(steps);
        }
    }

    /// Opens an evaluation pass of `epoch` now: the first, or another after the last one
    /// closed (a call while a pass is open is ignored).
    pub fn start_eval(&mut self, epoch: u32) {
        let now = self.now();
        let record = self.epoch_mut(epoch, now);
        match record.eval.as_mut() {
            None => record.eval = Some(EvalRecord::open(now)),
            // Another pass of the same epoch: the span reopens until it ends.
            Some(eval) if eval.span.end.is_some() => {
                eval.span.end = None;
                eval.pass_start = Some(now);
            }
            Some(_) => {}
        }
    }

    /// Closes the open evaluation pass of `epoch` now (a call with none open is ignored).
    pub fn end_eval(&mut self, epoch: u32, steps: u64) {
        let now = self.now();
        if let Some(record) = self.epochs.iter_mut().rev().find(|e| e.epoch == epoch)
            && let Some(eval) = record.eval.as_mut()
            && eval.span.end.is_none()
        {
            eval.span.end = Some(now);
            let began = eval.pass_start.take().unwrap_or(eval.span.start);
            let seconds = seconds_between(began, now);
            eval.pass_seconds += seconds;
            eval.passes += 1;
            eval.last_pass = Some((steps, seconds));
            eval.reported_steps = Some(eval.reported_steps.unwrap_or(0) + steps);
        }
    }

    /// Records one step: `load` is the wait for the batch, `compute` the emulated compute,
    /// `proc_` the time from asking for the batch to the end of compute (barrier excluded).
    pub fn record_step(
        &mut self,
        epoch: u32,
        phase: Phase,
        load: Duration,
        compute: Duration,
        proc_: Duration,
    ) {
        let now = self.now();
        let record = self.epoch_mut(epoch, now);
        let steps = match phase {
            Phase::Train { block } => {
                let index = match record.blocks.iter().rposition(|b| b.block == block) {
                    Some(index) => index,
                    None => {
                        record.blocks.push(BlockRecord {
                            block,
                            span: Span {
                                start: now,
                                end: None,
                            },
                            steps: StepTimes::default(),
                            reported_steps: None,
                        });
                        record.blocks.len() - 1
                    }
                };
                &mut record.blocks[index].steps
            }
            Phase::Eval => {
                &mut record
                    .eval
                    .get_or_insert_with(|| EvalRecord::open(now))
                    .steps
            }
        };
        steps.push(load, compute, proc_);
    }

    /// Records one checkpoint this rank wrote or read, with its own start and end (take them
    /// from [`RankRecorder::now`]) and the bytes it moved.
    pub fn record_checkpoint(
        &mut self,
        epoch: u32,
        kind: CheckpointKind,
        index: u32,
        start: SystemTime,
        end: SystemTime,
        size_bytes: u64,
    ) {
        let now = self.now();
        self.epoch_mut(epoch, now)
            .checkpoints
            .push(CheckpointRecord {
                kind,
                index,
                start,
                end,
                size_bytes,
                stall_seconds: None,
            });
    }

    /// Records an asynchronous save: `start`..`end` from hand-off to durable, and the
    /// `stall` the step loop saw before the hand-off.
    #[allow(clippy::too_many_arguments)]
    pub fn record_async_checkpoint(
        &mut self,
        epoch: u32,
        index: u32,
        start: SystemTime,
        end: SystemTime,
        size_bytes: u64,
        stall: Duration,
    ) {
        let now = self.now();
        self.epoch_mut(epoch, now)
            .checkpoints
            .push(CheckpointRecord {
                kind: CheckpointKind::Save,
                index,
                start,
                end,
                size_bytes,
                stall_seconds: Some(stall.as_secs_f64()),
            });
    }

    /// Adds I/O the loader performed for `phase` of `epoch`.
    pub fn add_io(&mut self, epoch: u32, phase: PhaseKind, io: IoTotals) {
        let now = self.now();
        let record = self.epoch_mut(epoch, now);
        match phase {
            PhaseKind::Train => record.train_io += io,
            PhaseKind::Eval => record.eval_io += io,
        }
    }

    /// Merges one loader thread's latency histograms for `phase` of `epoch`. Call it once
    /// per loader thread; the epoch's summary covers every merge made for it.
    pub fn merge_latencies(
        &mut self,
        epoch: u32,
        phase: PhaseKind,
        sample_read: &LatencyHistogram,
        batch_wait: &LatencyHistogram,
    ) {
        let run = match phase {
            PhaseKind::Train => &mut self.train_latency,
            PhaseKind::Eval => &mut self.eval_latency,
        };
        run.get_or_insert_with(PhaseHistograms::default)
            .merge(sample_read, batch_wait);

        if let Some(slot) = self.current_latency.iter().position(|c| c.phase == phase)
            && self.current_latency[slot].epoch != epoch
        {
            let finished = self.current_latency.swap_remove(slot);
            self.store_epoch_latency(finished);
        }
        match self.current_latency.iter_mut().find(|c| c.phase == phase) {
            Some(current) => current.histograms.merge(sample_read, batch_wait),
            None => {
                let mut histograms = PhaseHistograms::default();
                histograms.merge(sample_read, batch_wait);
                self.current_latency.push(EpochLatency {
                    epoch,
                    phase,
                    histograms,
                });
            }
        }
    }

    /// Hands over everything recorded.
    pub fn finish(mut self) -> RankReport {
        for current in std::mem::take(&mut self.current_latency) {
            self.store_epoch_latency(current);
        }
        RankReport {
            rank: self.rank,
            epochs: self.epochs,
            train_latency: self.train_latency,
            eval_latency: self.eval_latency,
        }
    }

    fn store_epoch_latency(&mut self, finished: EpochLatency) {
        let now = self.now();
        let summary = finished.histograms.summary();
        let record = self.epoch_mut(finished.epoch, now);
        match finished.phase {
            PhaseKind::Train => record.train_latency = Some(summary),
            PhaseKind::Eval => record.eval_latency = Some(summary),
        }
    }

    fn epoch_mut(&mut self, epoch: u32, now: SystemTime) -> &mut EpochRecord {
        let index = match self.epochs.iter().rposition(|e| e.epoch == epoch) {
            Some(index) => index,
            None => {
                self.epochs.push(EpochRecord::new(epoch, now));
                self.epochs.len() - 1
            }
        };
        &mut self.epochs[index]
    }
}
