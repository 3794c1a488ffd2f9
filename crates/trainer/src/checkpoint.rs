//! Checkpoints inside a run: DLIO's epoch and step triggers, checkpoint-only mode, and
//! asynchronous saves (ours).
//!
//! Sizing, file names and the byte streams are `dlio-checkpoint`'s job; this module decides
//! *when* a rank saves or loads, times it, and records it. Step checkpoints end the current
//! block first, so their time is outside every block and never counts against AU (DLIO §1.1).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use dlio_checkpoint::{
    CheckpointError, CheckpointPlan, CheckpointReader, CheckpointWriter, Datatype, ModelSpec,
    Parallelism, ReadOptions, TransformerShape, WriteOptions, checkpoint_dir_name,
};
use dlio_config::{CheckpointMode, Config, DataType};
use dlio_metrics::{CheckpointKind, RankRecorder};
use dlio_storage::Storage;
use dlio_trace::{Tracer, ai};

use crate::{Observer, TrainError};

/// Everything the ranks need to checkpoint, computed once per run and shared.
#[derive(Debug, Clone)]
pub struct CheckpointSetup {
    /// Every rank's files and sizes.
    pub plan: CheckpointPlan,
    /// `checkpoint.checkpoint_folder`.
    pub folder: PathBuf,
    /// How saves produce bytes.
    pub write: WriteOptions,
    /// How loads read.
    pub read: ReadOptions,
    /// `checkpoint.async` (ours).
    pub asynchronous: bool,
    /// `checkpoint.checkpoint_after_epoch`.
    pub after_epoch: u64,
    /// `checkpoint.epochs_between_checkpoints`.
    pub epochs_between: u64,
    /// `checkpoint.steps_between_checkpoints`: > 0 step checkpoints, < 0 epoch checkpoints.
    pub steps_between: i64,
    /// Checkpoint-only mode: saves.
    pub num_write: u64,
    /// Checkpoint-only mode: loads (at most `num_write`).
    pub num_read: u64,
    /// Checkpoint-only mode: sleep before each save and load.
    pub time_between: Duration,
    /// Checkpoint-only mode: barrier after each save and load, inside the timing.
    pub rank_sync: bool,
}

/// `model.*` as the checkpoint sizing wants it.
pub fn model_spec(config: &Config) -> Result<ModelSpec, TrainError> {
    let m = &config.model;
    let datatype = |value: DataType| match value {
        DataType::Fp16 => Datatype::Fp16,
        DataType::Bf16 => Datatype::Bf16,
        DataType::Fp32 => Datatype::Fp32,
        DataType::Fp64 => Datatype::Fp64,
        DataType::Int8 => Datatype::Int8,
        DataType::Uint8 => Datatype::Uint8,
    };
    Ok(ModelSpec {
        model_size_bytes: m.model_size_bytes,
        model_type: m.r#type.clone(),
        model_datatype: datatype(m.model_datatype),
        optimizer_datatype: datatype(m.optimizer_datatype),
        optimization_groups: m.optimization_groups.clone(),
        num_layers: m.num_layers,
        layer_parameters: m.layer_parameters.clone(),
        parallelism: Parallelism {
            tensor: m.parallelism.tensor,
            pipeline: m.parallelism.pipeline,
            data: m.parallelism.data,
            zero_stage: u32::from(m.parallelism.zero_stage),
        },
        transformer: TransformerShape {
            vocab_size: m.transformer.vocab_size,
            hidden_size: m.transformer.hidden_size,
            ffn_hidden_size: m.transformer.ffn_hidden_size,
            num_attention_heads: m.transformer.num_attention_heads,
            num_kv_heads: m.transformer.num_kv_heads,
        },
    })
}

/// The checkpoint plan of `config` for `world` ranks (what `dlio checkpoint-plan` prints).
pub fn checkpoint_plan(config: &Config, world: u32) -> Result<CheckpointPlan, TrainError> {
    let mode = match config.checkpoint.mode {
        CheckpointMode::Default => dlio_checkpoint::CheckpointMode::Default,
        CheckpointMode::Subset => dlio_checkpoint::CheckpointMode::Subset,
    };
    dlio_checkpoint::checkpoint_plan(&model_spec(config)?, mode, config.framework, world)
        .map_err(|e| TrainError::Setting(e.to_string()))
}

impl CheckpointSetup {
    /// The setup of a run, or `None` when the run writes no checkpoint
    /// (`workflow.checkpoint` off, or `steps_between_checkpoints: 0` while training, which
    /// disables checkpoints in DLIO too).
    pub fn from_config(config: &Config, world: u32) -> Result<Option<CheckpointSetup>, TrainError> {
        let c = &config.checkpoint;
        if !config.workflow.checkpoint
            || (config.workflow.train && c.steps_between_checkpoints == 0)
        {
            return Ok(None);
        }
        let checkpoint_only = config.checkpoint_only();
        Ok(Some(CheckpointSetup {
            plan: checkpoint_plan(config, world)?,
            folder: PathBuf::from(&c.checkpoint_folder),
            write: WriteOptions {
                randomize_tensor: c.randomize_tensor,
                fsync: c.fsync,
                seed: config.train.seed,
                chunk_bytes: dlio_checkpoint::DEFAULT_CHUNK_BYTES,
            },
            read: ReadOptions {
                // Reads right after writes would come from the page cache: drop it first.
                drop_page_cache: checkpoint_only,
                // All ranks of this process share one node.
                recovery_rank_shift: c.recovery_rank_shift.then_some(world),
                chunk_bytes: dlio_checkpoint::DEFAULT_CHUNK_BYTES,
            },
            asynchronous: c.asynchronous,
            after_epoch: c.checkpoint_after_epoch,
            epochs_between: c.epochs_between_checkpoints.max(1),
            steps_between: c.steps_between_checkpoints,
            num_write: c.num_checkpoints_write.max(0) as u64,
            num_read: c.num_checkpoints_read.max(0) as u64,
            // Upstream sleeps abs(-1) = 1 s by default (B14); a negative value sleeps nothing here.
            time_between: dlio_config::duration_from_seconds(c.time_between_checkpoints),
            rank_sync: c.rank_sync,
        }))
    }

    /// True when `epoch` ends with an epoch checkpoint.
    pub fn saves_after_epoch(&self, epoch: u32, next_epoch: u64) -> bool {
        self.steps_between < 0 && u64::from(epoch) == next_epoch
    }
}

/// A finished asynchronous save, reported by the background writer.
struct Finished {
    epoch: u32,
    index: u32,
    start: SystemTime,
    end: SystemTime,
    stall: Duration,
    result: Result<u64, CheckpointError>,
}

struct Job {
    epoch: u32,
    index: u32,
    step: u64,
    name: String,
    stall: Duration,
}

/// One rank's saver and loader.
pub(crate) struct RankCheckpointer<'a> {
    setup: &'a CheckpointSetup,
    storage: Arc<dyn Storage>,
    rank: u32,
    writer: Option<CheckpointWriter>,
    reader: Option<CheckpointReader>,
    background: Option<Background>,
    tracer: Tracer,
}

struct Background {
    jobs: SyncSender<Job>,
    finished: Receiver<Finished>,
    in_flight: bool,
    handle: JoinHandle<()>,
}

fn failed(e: CheckpointError) -> TrainError {
    TrainError::Checkpoint(e.to_string())
}

impl<'a> RankCheckpointer<'a> {
    pub(crate) fn new(
        setup: &'a CheckpointSetup,
        storage: Arc<dyn Storage>,
        rank: u32,
        tracer: Tracer,
    ) -> Result<RankCheckpointer<'a>, TrainError> {
        let writer = CheckpointWriter::new(setup.write).map_err(failed)?;
        let reader = CheckpointReader::new(setup.read).map_err(failed)?;
        let mut this = RankCheckpointer {
            setup,
            storage,
            rank,
            writer: Some(writer),
            reader: Some(reader),
            background: None,
            tracer,
        };
        if setup.asynchronous {
            this.background = Some(this.spawn_background()?);
        }
        Ok(this)
    }

    fn spawn_background(&mut self) -> Result<Background, TrainError> {
        let (jobs, job_rx) = mpsc::sync_channel::<Job>(0);
        let (done_tx, finished) = mpsc::channel();
        let mut writer = self
            .writer
            .take()
            .ok_or_else(|| TrainError::Setting("no writer".into()))?;
        let storage = Arc::clone(&self.storage);
        let plan = self.setup.plan.clone();
        let folder = self.setup.folder.clone();
        let rank = self.rank;
        let tracer = self.tracer.clone();
        let handle = std::thread::Builder::new()
            .name(format!("dlio-ckpt-{rank}"))
            .spawn(move || {
                while let Ok(job) = job_rx.recv() {
                    let _span = tracer
                        .span(ai::CHECKPOINT_CAPTURE)
                        .epoch(u64::from(job.epoch))
                        .step(job.step);
                    let start = SystemTime::now();
                    let result = writer
                        .write(&*storage, &folder, &job.name, &plan, rank)
                        .map(|r| r.bytes);
                    let _ = done_tx.send(Finished {
                        epoch: job.epoch,
                        index: job.index,
                        start,
                        end: SystemTime::now(),
                        stall: job.stall,
                        result,
                    });
                }
            })
            .map_err(|e| {
                TrainError::Setting(format!("could not start the checkpoint writer: {e}"))
            })?;
        Ok(Background {
            jobs,
            finished,
            in_flight: false,
            handle,
        })
    }

    /// Saves checkpoint `name` (synchronously, or handed to the background writer).
    pub(crate) fn save(
        &mut self,
        recorder: &mut RankRecorder,
        observer: &dyn Observer,
        epoch: u32,
        index: u32,
        step: u64,
    ) -> Result<(), TrainError> {
        let name = &name(epoch, step);
        if self.background.is_some() {
            let waited = Instant::now();
            self.wait_background(recorder, observer)?;
            let stall = waited.elapsed();
            let bg = self
                .background
                .as_mut()
                .ok_or_else(|| TrainError::Setting("no writer".into()))?;
            bg.jobs
                .send(Job {
                    epoch,
                    index,
                    step,
                    name: name.to_string(),
                    stall,
                })
                .map_err(|_| {
                    TrainError::Checkpoint("the checkpoint writer thread stopped".into())
                })?;
            bg.in_flight = true;
            return Ok(());
        }
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| TrainError::Setting("no writer".into()))?;
        let span = self
            .tracer
            .span(ai::CHECKPOINT_CAPTURE)
            .epoch(u64::from(epoch))
            .step(step);
        let start = recorder.now();
        let report = writer
            .write(
                &*self.storage,
                &self.setup.folder,
                name,
                &self.setup.plan,
                self.rank,
            )
            .map_err(failed)?;
        let end = recorder.now();
        drop(span);
        recorder.record_checkpoint(epoch, CheckpointKind::Save, index, start, end, report.bytes);
        observer.checkpoint_finished(self.rank, epoch, CheckpointKind::Save, index, recorder);
        Ok(())
    }

    /// Waits for the asynchronous save in flight, if any, and records it.
    pub(crate) fn wait_background(
        &mut self,
        recorder: &mut RankRecorder,
        observer: &dyn Observer,
    ) -> Result<(), TrainError> {
        let Some(bg) = self.background.as_mut() else {
            return Ok(());
        };
        if !bg.in_flight {
            return Ok(());
        }
        bg.in_flight = false;
        let done = bg
            .finished
            .recv()
            .map_err(|_| TrainError::Checkpoint("the checkpoint writer thread stopped".into()))?;
        let bytes = done.result.map_err(failed)?;
        recorder.record_async_checkpoint(
            done.epoch, done.index, done.start, done.end, bytes, done.stall,
        );
        observer.checkpoint_finished(
            self.rank,
            done.epoch,
            CheckpointKind::Save,
            done.index,
            recorder,
        );
        Ok(())
    }

    /// Loads checkpoint `name`; returns warnings (e.g. the page cache could not be dropped).
    pub(crate) fn load(
        &mut self,
        recorder: &mut RankRecorder,
        observer: &dyn Observer,
        epoch: u32,
        index: u32,
        step: u64,
        barrier: &dyn Fn() -> Result<(), TrainError>,
    ) -> Result<Vec<String>, TrainError> {
        let name = &name(epoch, step);
        let reader = self
            .reader
            .as_mut()
            .ok_or_else(|| TrainError::Setting("no reader".into()))?;
        let _span = self
            .tracer
            .span(ai::CHECKPOINT_RESTART)
            .epoch(u64::from(epoch))
            .step(step);
        let start = recorder.now();
        let report = reader
            .read(
                &*self.storage,
                &self.setup.folder,
                name,
                &self.setup.plan,
                self.rank,
            )
            .map_err(failed)?;
        // The reader's duration leaves out dropping the page cache; the rank_sync barrier is
        // inside the timing, as in DLIO.
        let synced = Instant::now();
        if self.setup.rank_sync {
            barrier()?;
        }
        let end = start + report.duration + synced.elapsed();
        recorder.record_checkpoint(epoch, CheckpointKind::Load, index, start, end, report.bytes);
        observer.checkpoint_finished(self.rank, epoch, CheckpointKind::Load, index, recorder);
        Ok(report.warnings)
    }

    /// Waits for the background writer and stops it.
    pub(crate) fn finish(
        mut self,
        recorder: &mut RankRecorder,
        observer: &dyn Observer,
    ) -> Result<(), TrainError> {
        self.wait_background(recorder, observer)?;
        if let Some(bg) = self.background.take() {
            drop(bg.jobs);
            let _ = bg.handle.join();
        }
        Ok(())
    }
}

/// `global_epoch{E}_step{S}`.
pub(crate) fn name(epoch: u32, step: u64) -> String {
    checkpoint_dir_name(u64::from(epoch), step)
}
