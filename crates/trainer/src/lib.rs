//! `dlio-trainer`: DLIO's step loop.
//!
//! One call of [`run_rank`] plays one simulated accelerator for the whole run: for each epoch it
//! asks the plan which samples the rank reads, lets the [`Loader`] read them, and for every
//! batch waits for it, emulates the compute step with a sleep drawn from
//! `train.computation_time`, and meets the other ranks at a barrier (the emulated all-reduce).
//! Evaluation passes follow the epochs that qualify, with `evaluation.eval_time` and no
//! per-step barrier, as DLIO does. Everything measured goes into the rank's
//! [`RankRecorder`]; nothing is aggregated here.
//!
//! Ranks synchronise through the [`Comm`] trait. [`LocalGroup`] runs ranks as threads of one
//! process (`dlio run --ranks N`) with the semantics of N MPI processes; a failing rank aborts
//! the group, so no rank waits forever at a barrier.
//!
//! The loop reports progress to an [`Observer`] (the binary draws progress bars and prints
//! DLIO's log lines from it); observers are called once per step, never per sample.

#![deny(missing_docs)]

mod checkpoint;
mod comm;
mod error;
pub mod system_flush;

pub use checkpoint::{CheckpointSetup, checkpoint_plan, model_spec};
pub use comm::{Aborted, Comm, CrossProcess, LocalComm, LocalGroup};
pub use error::TrainError;

use checkpoint::RankCheckpointer;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlio_config::Config;
use dlio_format::Format;
use dlio_loader::{
    CompensatedSleep, EpochReadStats, FileList, Loader, LoaderSpec, StopCause, StopSignal,
    TimeSampler,
};
use dlio_metrics::{
    CheckpointKind, IoTotals, LatencyHistogram, Phase, PhaseKind, RankRecorder, RankReport,
};
use dlio_plan::{EpochPlan, PlanSpec};
use dlio_storage::{DataFiles, FileSet, IoCounters, PathScratch, Storage};
use dlio_trace::{Tracer, ai};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Which pass of the run an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Training in `epoch` (1-based).
    Train {
        /// The epoch.
        epoch: u32,
    },
    /// Evaluation after training epoch `epoch`.
    Eval {
        /// The epoch.
        epoch: u32,
    },
}

/// Receives progress from the step loop: once per pass and once per step.
pub trait Observer: Sync {
    /// A pass of `steps` steps starts on `rank`.
    fn pass_started(&self, _rank: u32, _pass: Pass, _steps: u64) {}
    /// `rank` finished step `step` (1-based) of `samples` samples, loaded in `load`, then
    /// `compute` of emulated compute.
    fn step_done(
        &self,
        _rank: u32,
        _pass: Pass,
        _step: u64,
        _samples: u64,
        _load: Duration,
        _compute: Duration,
    ) {
    }
    /// `rank` finished a pass.
    fn pass_finished(&self, _rank: u32, _pass: Pass, _recorder: &RankRecorder) {}
    /// `rank` finished saving or loading checkpoint `index` of `epoch` (already recorded).
    fn checkpoint_finished(
        &self,
        _rank: u32,
        _epoch: u32,
        _kind: CheckpointKind,
        _index: u32,
        _recorder: &RankRecorder,
    ) {
    }
    /// Something the user should know that did not stop the run.
    fn warn(&self, _rank: u32, _message: &str) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;
impl Observer for Quiet {}

/// Everything one rank needs for the run.
pub struct RankSetup<'a> {
    /// The resolved, validated config.
    pub config: &'a Config,
    /// This rank's communicator.
    pub comm: &'a dyn Comm,
    /// Storage (wrapped in [`dlio_storage::Metered`] so `counters` sees every byte).
    pub storage: Arc<dyn Storage>,
    /// The storage of the evaluation passes: the same (counted into `counters`), or one
    /// whose request patterns leave out the training pipeline's waits.
    pub eval_storage: Arc<dyn Storage>,
    /// The counters of `storage`, read per pass.
    pub counters: Arc<IoCounters>,
    /// The dataset's format (`None` in checkpoint-only mode, which reads no dataset).
    pub format: Option<Arc<dyn Format>>,
    /// Files of `data_folder/train`, in the order the plan numbers them.
    pub train_files: DataFiles,
    /// Files of `data_folder/valid`.
    pub eval_files: DataFiles,
    /// Seed for `Shuffle::Random`, drawn once per run.
    pub random_seed: u64,
    /// Fired on Ctrl-C or when a rank fails; every wait of the rank watches it.
    pub stop: Arc<StopSignal>,
    /// Progress receiver.
    pub observer: &'a dyn Observer,
    /// Checkpointing, when the run checkpoints.
    pub checkpoint: Option<&'a CheckpointSetup>,
    /// `dataset.side_files`: read whole by the rank at the steps they are due.
    pub side_files: Vec<SideRead>,
    /// `dataset.sample_companions`: read whole by the reader of each sample before it.
    pub companions: Option<Arc<dlio_loader::Companions>>,
    /// The rank's trace (a disabled tracer records nothing and costs nothing).
    pub tracer: Tracer,
}

/// One of `dataset.side_files`, as a rank reads it: whole, at the epoch's first step and then
/// every `every_steps` steps, before the step's batch.
#[derive(Debug, Clone)]
pub struct SideRead {
    /// The file.
    pub path: std::path::PathBuf,
    /// Steps between two reads (at least 1).
    pub every_steps: u64,
}

/// Reads the side files due at 1-based `step` through the rank's storage (so they are
/// counted and traced like every other read), into `buf`.
fn read_side_files(setup: &RankSetup<'_>, step: u64, buf: &mut Vec<u8>) -> Result<(), TrainError> {
    for side in &setup.side_files {
        if !(step - 1).is_multiple_of(side.every_steps.max(1)) {
            continue;
        }
        let fail = |e: dlio_storage::StorageError| {
            TrainError::Setting(format!(
                "reading the side file {} (dataset.side_files): {e}; generate the data set \
                 again (workflow.generate_data) or remove the entry",
                side.path.display()
            ))
        };
        dlio_storage::read_head(setup.storage.as_ref(), &side.path, u64::MAX, buf).map_err(fail)?;
    }
    Ok(())
}

/// `reader.header_scan_bytes`: reads the first bytes of every file of the rank's first epoch,
/// once each, through the rank's storage (counted and traced like every other read), before
/// the first step, as a sampler that groups samples by their headers does.
fn scan_headers(
    setup: &RankSetup<'_>,
    names: &FileList,
    plan: Option<&EpochPlan>,
) -> Result<(), TrainError> {
    let bytes = setup.config.reader.header_scan_bytes;
    let Some(plan) = plan.filter(|_| bytes > 0) else {
        return Ok(());
    };
    let mut files = FileSet::new(names.len());
    for file in plan.files() {
        files.insert(usize::try_from(file).unwrap_or(usize::MAX));
    }
    let _span = setup.tracer.span(ai::DATA_HEADER_SCAN);
    let mut buf = Vec::new();
    let mut scratch = PathScratch::default();
    for file in files.iter() {
        let Some(path) = names.path(file, &mut scratch) else {
            continue;
        };
        let fail = |e: dlio_storage::StorageError| {
            TrainError::Setting(format!(
                "reading the header of {} (reader.header_scan_bytes): {e}; generate the data \
                 set again (workflow.generate_data) or set reader.header_scan_bytes to 0",
                path.display()
            ))
        };
        dlio_storage::read_head(setup.storage.as_ref(), path, bytes, &mut buf).map_err(fail)?;
    }
    Ok(())
}

/// The plan parameters of the training pass, derived from the config and the file list.
pub fn train_plan_spec(config: &Config, world: u32, num_files: u64, random_seed: u64) -> PlanSpec {
    let total = config.train.total_training_steps;
    PlanSpec {
        num_files,
        samples_per_file: config.dataset.num_samples_per_file.max(1),
        batch_size: config.reader.batch_size.max(1),
        world,
        sampler: config.sampler(),
        read_threads: config.reader.read_threads,
        file_shuffle: config.reader.file_shuffle,
        sample_shuffle: config.reader.sample_shuffle,
        sample_replacement: config.reader.sample_replacement,
        seed: config.train.seed,
        seed_change_epoch: config.train.seed_change_epoch,
        random_seed,
        total_training_steps: (total > 0).then_some(total as u64),
        drop_last: config.reader.drop_last,
    }
}

/// The plan parameters of an evaluation pass.
pub fn eval_plan_spec(config: &Config, world: u32, num_files: u64, random_seed: u64) -> PlanSpec {
    PlanSpec {
        num_files,
        batch_size: config.reader.batch_size_eval.max(1),
        total_training_steps: (config.evaluation.steps_per_eval > 0)
            .then_some(config.evaluation.steps_per_eval),
        ..train_plan_spec(config, world, num_files, random_seed)
    }
}

/// The loader settings of one rank.
pub fn loader_spec(config: &Config, rank: u32) -> LoaderSpec {
    LoaderSpec {
        read_threads: config.reader.read_threads,
        prefetch_size: config.reader.prefetch_size,
        read_ahead: config.reader.read_ahead,
        spread_batches: config.reader.spread_batches,
        read_type: config.reader.read_type,
        sampler: config.sampler(),
        preprocess_time: config.reader.preprocess_time.clone(),
        preprocess_work: config.reader.preprocess_work,
        batch_time: config.reader.batch_time.clone(),
        open_time: config.reader.open_time.clone(),
        seed: config.train.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(rank),
        layout: nominal_layout(config),
        tracer: dlio_trace::Tracer::disabled(),
        sample_out_bytes: sample_out_bytes(config),
        object_window: config.object_read_window(),
        stagger: if config.stagger_workers() {
            dlio_config::duration_from_seconds(config.train.computation_time.mean())
        } else {
            std::time::Duration::ZERO
        },
        start_interval: dlio_config::duration_from_seconds(config.reader.worker_start_interval),
        start_interval_every_epoch: config.reader.epoch_start_time > 0.0,
        request_delay: dlio_config::duration_from_seconds(config.reader.request_delay),
        companions: None,
    }
}

/// The size of the sample the training loop gets, as DLIO sizes its `resized_image`:
/// `reader.transformed_record_dims` x the transformed element type, else a
/// `int(sqrt(resize))`-square uint8 array for `dataset.record_length_bytes_resize`.
pub fn sample_out_bytes(config: &Config) -> Option<usize> {
    let dims = &config.reader.transformed_record_dims;
    if !dims.is_empty() {
        let elements: u64 = dims.iter().product();
        return Some(elements as usize * config.reader.transformed_record_element_type.size());
    }
    let resize = config.dataset.record_length_bytes_resize;
    (resize >= 1.0).then(|| {
        let side = resize.sqrt() as usize;
        side * side
    })
}

/// The layout of a file of the dataset's nominal sample size (no size spread): what readers
/// are built for and what a format checks before the run.
pub fn nominal_layout(config: &Config) -> dlio_format::FileLayout {
    let d = &config.dataset;
    layout_of(
        config,
        dlio_plan::sample_dims(d.record_length_bytes, 0.0, &d.record_dims, 0, 0),
    )
}

/// The layout of file `index` of list `list_id` (0 train, 1 eval; its samples' dims drawn as
/// DLIO draws them for `record_length_bytes_stdev`, or the file's quantile of
/// `record_length_bytes_distribution`): what generation writes.
pub fn file_layout(config: &Config, list_id: u32, index: u64) -> dlio_format::FileLayout {
    if list_id == 1
        && let Some(layout) = own_eval_layout(config)
    {
        return layout;
    }
    let d = &config.dataset;
    // Sizes per sample are the format's to draw inside each file; per file, the plan's.
    let sizes: Vec<(u64, f64)> = match d.record_length_bytes_per {
        dlio_config::SizesPer::File => d
            .record_length_bytes_distribution
            .iter()
            .map(|e| (e.size, e.weight))
            .collect(),
        dlio_config::SizesPer::Sample => Vec::new(),
    };
    let files = if list_id == 0 {
        d.num_files_train
    } else {
        d.num_files_eval
    };
    let dims = dlio_plan::SampleDims::new(
        d.record_length_bytes,
        d.record_length_bytes_stdev,
        &d.record_dims,
        list_id,
    )
    .with_distribution(&sizes, files);
    layout_of(config, dims.for_file(index))
}

/// Every evaluation file's layout when `dataset.record_length_bytes_eval` gives its samples
/// their size, with no spread (`fixed_size`): one dimension of that many elements where the
/// training samples have one (`record_dims: [N]`), else the square DLIO makes of a length, as
/// for the training size.
fn own_eval_layout(config: &Config) -> Option<dlio_format::FileLayout> {
    let d = &config.dataset;
    let bytes = d.record_length_bytes_eval;
    (bytes > 0.0).then(|| {
        let dims = if d.record_dims.len() == 1 {
            let element = d.record_element_type.size().max(1) as f64;
            vec![((bytes / element) as u64).max(1)]
        } else {
            dlio_plan::sample_dims(bytes, 0.0, &[], 1, 0)
        };
        dlio_format::FileLayout {
            fixed_size: true,
            ..layout_of(config, dims)
        }
    })
}

/// The layout evaluation readers are built for: the evaluation files' when their samples have
/// a size of their own (`dataset.record_length_bytes_eval`), else [`nominal_layout`].
pub fn nominal_eval_layout(config: &Config) -> dlio_format::FileLayout {
    own_eval_layout(config).unwrap_or_else(|| nominal_layout(config))
}

/// The one builder of a file layout from its samples' dims.
fn layout_of(config: &Config, dims: Vec<u64>) -> dlio_format::FileLayout {
    let d = &config.dataset;
    dlio_format::FileLayout {
        samples: d.num_samples_per_file as u32,
        sample_dims: dims.into_iter().map(|x| x as usize).collect(),
        element: dlio_format::sample_element(d),
        compression: d.compression,
        fixed_size: false,
    }
}

/// Runs the training (and evaluation) loop of one rank; returns what it measured.
///
/// On error the rank aborts its communicator first, so the other ranks stop at their next
/// barrier instead of waiting for this one.
pub fn run_rank(setup: RankSetup<'_>) -> Result<RankReport, TrainError> {
    let comm = setup.comm;
    let mut recorder = RankRecorder::new(comm.rank());
    setup.tracer.mark_start();
    let root_span = setup.tracer.span(ai::AI_ROOT);
    let outcome = run_loop(&setup, &mut recorder);
    drop(root_span);
    match outcome {
        Ok(()) => Ok(recorder.finish()),
        Err(e) => {
            let reason = match &e {
                TrainError::Interrupted => "interrupted".to_string(),
                TrainError::Aborted(a) => a.reason.clone(),
                other => format!("rank {} failed: {other}", comm.rank()),
            };
            comm.abort(&reason);
            if !e.is_interruption() {
                // Peers asleep in compute or reading stop now, not at their next barrier.
                setup.stop.stop(StopCause::Failed(reason));
            }
            Err(e.with_partial(recorder.finish()))
        }
    }
}

fn run_loop(setup: &RankSetup<'_>, recorder: &mut RankRecorder) -> Result<(), TrainError> {
    let mut checkpointer = match setup.checkpoint {
        Some(c) => Some(RankCheckpointer::new(
            c,
            Arc::clone(&setup.storage),
            setup.comm.rank(),
            setup.tracer.clone(),
        )?),
        None => None,
    };
    let result = if setup.config.checkpoint_only() {
        match (setup.checkpoint, checkpointer.as_mut()) {
            (Some(c), Some(ck)) => run_checkpoint_only(setup, recorder, c, ck),
            _ => Ok(()),
        }
    } else {
        run_training(setup, recorder, checkpointer.as_mut())
    };
    let finished = match checkpointer {
        Some(ck) => ck.finish(recorder, setup.observer),
        None => Ok(()),
    };
    result.and(finished)
}

fn run_training(
    setup: &RankSetup<'_>,
    recorder: &mut RankRecorder,
    mut checkpointer: Option<&mut RankCheckpointer<'_>>,
) -> Result<(), TrainError> {
    let config = setup.config;
    let comm = setup.comm;
    let rank = comm.rank();
    let mut compute_sleep = CompensatedSleep::default();
    let TrainingParts {
        mut compute,
        mut eval_time,
        train_spec,
        zero_steps,
        eval_spec,
        evaluation,
        mut loader,
        mut eval_loader,
        mut rng,
    } = training_parts(setup)?;
    comm.barrier()?;

    let epochs = epoch_count(config)?;
    let tracer = &setup.tracer;
    let mut next_eval_epoch = config.evaluation.eval_after_epoch;
    let mut next_checkpoint_epoch = setup.checkpoint.map_or(0, |c| c.after_epoch);
    let steps_between = setup.checkpoint.map_or(-1, |c| c.steps_between);
    // Evaluations every few steps, counted over the run, in place of the epoch rule.
    let steps_between_evals = config.evaluation.steps_between_evals;
    let mut run_steps = 0u64;
    // The fork flushes the system's page cache before every training epoch (rank 0, then a
    // barrier); upstream does not.
    let flushes = config.semantics == dlio_config::vocab::Semantics::Mlperf;
    let mut system_flush = (flushes && rank == 0).then(system_flush::SystemFlush::from_environment);
    let mut train_names = None;
    let mut eval_list = EvalList {
        spec: eval_spec,
        names: None,
    };
    for epoch in 1..=epochs {
        let plan = (!zero_steps)
            .then(|| EpochPlan::new(&train_spec, epoch, rank))
            .transpose()
            .map_err(TrainError::Plan)?;
        let names = epoch_names(&setup.train_files, plan.as_ref(), &mut train_names)?;
        flush_before_epoch(setup, system_flush.as_mut(), flushes, epoch, &names, plan)?;
        let _epoch_span = tracer.span(ai::EPOCH_BLOCK).epoch(u64::from(epoch));
        // One `train` span per epoch, around its steps and its epoch checkpoint, as DLIO's
        // `_train`; evaluation comes after it, in its own span.
        let mut train_span = tracer.span(ai::PIPELINE_TRAIN).epoch(u64::from(epoch));
        recorder.start_epoch(epoch);
        let steps = plan.as_ref().map_or(0, EpochPlan::steps);
        let pass = Pass::Train { epoch };
        setup.observer.pass_started(rank, pass, steps);
        let mut block = 1;
        let mut block_steps = 0u64;
        // DLIO's checkpoint number within the epoch (the `b` of `save_ckpt{b}`): the blocks
        // checkpoints end, not those evaluation passes end.
        let mut checkpoint_index = 1;
        let mut next_checkpoint_step = steps_between;
        recorder.start_block(epoch, block);
        let io_before = setup.counters.snapshot();
        // Counted in the first epoch's bytes and time, as the program waits for it.
        if epoch == 1 {
            scan_headers(setup, &names, plan.as_ref())?;
        }
        // The loader's start-up (`reader.epoch_start_time`): its readers begin after it, and
        // the epoch's first wait for a batch counts it.
        let epoch_began = Instant::now();
        let start_up = dlio_config::duration_from_seconds(config.reader.epoch_start_time);
        if plan.is_some() && !start_up.is_zero() {
            compute_sleep
                .sleep(&setup.stop, start_up)
                .map_err(|_| stopped_error(&setup.stop))?;
        }
        let mut batches = plan.map(|plan| loader.start_epoch(plan, names));
        let mut batch_wait = LatencyHistogram::new();
        let mut done = 0u64;
        let mut start_loading = epoch_began;
        let mut side_buf = Vec::new();
        loop {
            if done < steps {
                read_side_files(setup, done + 1, &mut side_buf)?;
            }
            let Some(batch) = batches.as_mut().and_then(|b| b.next_batch()) else {
                break;
            };
            check_cancel(setup)?;
            let batch = batch?;
            let loaded = Instant::now();
            let load = loaded - start_loading;
            batch_wait.record_duration(load);
            let step_args = [("epoch", i64::from(epoch)), ("step", done as i64 + 1)];
            tracer.complete(ai::FETCH_ITER, start_loading, loaded, &step_args);
            emulate_compute(setup, &mut compute, &mut rng, &mut compute_sleep)?;
            let computed = Instant::now();
            tracer.complete(ai::COMPUTE, loaded, computed, &step_args);
            recorder.record_step(
                epoch,
                Phase::Train { block },
                load,
                computed - loaded,
                computed - start_loading,
            );
            step_barrier(setup, epoch, done + 1)?;
            done += 1;
            block_steps += 1;
            setup
                .observer
                .step_done(rank, pass, done, batch.samples, load, computed - loaded);
            run_steps += 1;
            let checkpoint_due =
                checkpointer.is_some() && steps_between > 0 && done as i64 == next_checkpoint_step;
            let eval_due = evaluation
                && steps_between_evals > 0
                && run_steps.is_multiple_of(steps_between_evals);
            if checkpoint_due || eval_due {
                // A step checkpoint or an evaluation pass ends the block: its time is outside
                // AU (DLIO §1.1).
                recorder.end_block(epoch, block, block_steps);
            }
            if let Some(ck) = checkpointer.as_deref_mut()
                && checkpoint_due
            {
                ck.save(recorder, setup.observer, epoch, checkpoint_index, done)?;
                next_checkpoint_step += steps_between;
                checkpoint_index += 1;
            }
            if let Some(eval_loader) = eval_loader.as_mut()
                && eval_due
            {
                drop(train_span);
                run_eval(
                    setup,
                    recorder,
                    eval_loader,
                    &mut eval_list,
                    epoch,
                    &mut eval_time,
                    &mut rng,
                )?;
                train_span = tracer.span(ai::PIPELINE_TRAIN).epoch(u64::from(epoch));
            }
            if (checkpoint_due || eval_due) && done < steps {
                block += 1;
                block_steps = 0;
                recorder.start_block(epoch, block);
            }
            start_loading = Instant::now();
            tracer.complete(ai::FETCH_BLOCK, loaded, start_loading, &step_args);
        }
        let read = batches.map(|b| b.finish()).unwrap_or_default();
        recorder.end_block(epoch, block, block_steps);
        comm.barrier()?;
        record_io(
            recorder,
            epoch,
            PhaseKind::Train,
            setup,
            io_before,
            &read,
            &batch_wait,
        );
        setup.observer.pass_finished(rank, pass, recorder);
        if let (Some(ck), Some(c)) = (checkpointer.as_deref_mut(), setup.checkpoint)
            && c.saves_after_epoch(epoch, next_checkpoint_epoch)
        {
            // DLIO names the epoch checkpoint after the step counter, which has moved past the
            // last step.
            ck.save(recorder, setup.observer, epoch, checkpoint_index, done + 1)?;
            next_checkpoint_epoch += c.epochs_between;
        }
        drop(train_span);

        if evaluation && steps_between_evals == 0 && u64::from(epoch) >= next_eval_epoch {
            next_eval_epoch += config.evaluation.epochs_between_evals.max(1);
            run_eval(
                setup,
                recorder,
                eval_loader.as_mut().unwrap_or(&mut loader),
                &mut eval_list,
                epoch,
                &mut eval_time,
                &mut rng,
            )?;
        }
        recorder.end_epoch(epoch, done);
    }
    if let Some(warning) = system_flush.as_ref().and_then(|f| f.summary()) {
        setup.observer.warn(rank, &warning);
    }
    comm.barrier()?;
    Ok(())
}

/// `train.epochs` as the plan counts epochs.
fn epoch_count(config: &Config) -> Result<u32, TrainError> {
    u32::try_from(config.train.epochs).map_err(|_| {
        TrainError::Setting(format!(
            "train.epochs is {}; at most {} epochs are supported",
            config.train.epochs,
            u32::MAX
        ))
    })
}

/// A step's emulated compute: a drawn time asleep (Ctrl-C or a failing peer ends it).
fn emulate_compute(
    setup: &RankSetup<'_>,
    compute: &mut TimeSampler,
    rng: &mut Xoshiro256PlusPlus,
    sleep: &mut CompensatedSleep,
) -> Result<(), TrainError> {
    if let Some(d) = compute.draw(rng) {
        sleep
            .sleep(&setup.stop, d)
            .map_err(|_| stopped_error(&setup.stop))?;
    }
    Ok(())
}

/// The barrier that ends every training step, traced as DLIO's `comm.barrier`.
fn step_barrier(setup: &RankSetup<'_>, epoch: u32, step: u64) -> Result<(), TrainError> {
    let _barrier = setup
        .tracer
        .span(ai::COMM_BARRIER)
        .epoch(u64::from(epoch))
        .step(step);
    setup.comm.barrier()?;
    Ok(())
}

/// Before a training epoch, outside its time: the fork's system page-cache flush (rank 0, then
/// every rank waits for it), the data set's own page-cache drop when asked, traced as DLIO's
/// `epoch.iter` wait.
fn flush_before_epoch(
    setup: &RankSetup<'_>,
    system_flush: Option<&mut system_flush::SystemFlush>,
    flushes: bool,
    epoch: u32,
    names: &FileList,
    plan: Option<EpochPlan>,
) -> Result<(), TrainError> {
    let epoch_wait = Instant::now();
    if let Some(warning) = system_flush.and_then(|f| f.before_epoch(epoch)) {
        setup.observer.warn(setup.comm.rank(), &warning);
    }
    if flushes {
        setup.comm.barrier()?;
    }
    drop_page_cache(setup, names, plan.as_ref())?;
    setup.tracer.complete(
        ai::EPOCH_ITER,
        epoch_wait,
        Instant::now(),
        &[("epoch", i64::from(epoch))],
    );
    Ok(())
}

/// What a rank's training loop is made of, from the config: the time draws, the plans of the
/// training and evaluation passes, the loader and the rank's random draws.
struct TrainingParts {
    compute: TimeSampler,
    eval_time: TimeSampler,
    train_spec: dlio_plan::PlanSpec,
    /// The data set is too small for one full batch per rank: epochs run empty, as DLIO's.
    zero_steps: bool,
    eval_spec: dlio_plan::PlanSpec,
    evaluation: bool,
    loader: Loader,
    /// The evaluation's own loader when passes fall between training steps
    /// (`evaluation.steps_between_evals`: the training loader's readers hold the epoch's
    /// batches meanwhile, as a framework's separate evaluation loader leaves them) or its
    /// samples have a size of their own (`dataset.record_length_bytes_eval`: readers are built
    /// for one layout); else passes borrow the training loader.
    eval_loader: Option<Loader>,
    rng: Xoshiro256PlusPlus,
}

fn training_parts(setup: &RankSetup<'_>) -> Result<TrainingParts, TrainError> {
    let config = setup.config;
    let rank = setup.comm.rank();
    let world = setup.comm.world();
    let compute = TimeSampler::new("train.computation_time", &config.train.computation_time)
        .map_err(TrainError::Setting)?;
    let eval_time = TimeSampler::new("evaluation.eval_time", &config.evaluation.eval_time)
        .map_err(TrainError::Setting)?;
    let train_spec = train_plan_spec(
        config,
        world,
        setup.train_files.len() as u64,
        setup.random_seed,
    );
    // A data set too small for one full batch per rank trains no step, as DLIO does: its
    // epochs run empty (the run driver has warned, or refused under --strict).
    let zero_steps = match train_spec.validate() {
        Ok(()) => false,
        Err(dlio_plan::PlanError::TooFewSamples { .. }) => true,
        Err(e) => return Err(TrainError::Plan(e)),
    };
    let eval_spec = eval_plan_spec(
        config,
        world,
        setup.eval_files.len() as u64,
        setup.random_seed,
    );
    let evaluation = config.workflow.evaluation && !setup.eval_files.is_empty();
    if evaluation {
        eval_spec.validate().map_err(TrainError::Plan)?;
    }
    let new_loader = |layout: dlio_format::FileLayout,
                      storage: &Arc<dyn Storage>|
     -> Result<Loader, TrainError> {
        let mut loader = Loader::new(
            LoaderSpec {
                tracer: setup.tracer.clone(),
                layout,
                companions: setup.companions.clone(),
                ..loader_spec(config, rank)
            },
            Arc::clone(storage),
            setup.format.clone().ok_or_else(|| {
                TrainError::Setting(
                    "training needs the dataset's format, and none was given".into(),
                )
            })?,
            Arc::clone(&setup.stop),
        )?;
        // The tf.data pipeline of TFRecord (file shards, streamed reads, shuffle buffer) takes
        // its settings from the reader section.
        loader.set_stream_options(dlio_loader::StreamOptions::from_config(
            config,
            setup.random_seed,
        ));
        Ok(loader)
    };
    let train_layout = nominal_layout(config);
    let eval_layout = nominal_eval_layout(config);
    let own_eval_layout = eval_layout != train_layout;
    let loader = new_loader(train_layout, &setup.storage)?;
    // The evaluation passes read through a loader of their own where they read files of
    // another size, between training steps, or through a storage of their own.
    let own_eval_storage = !Arc::ptr_eq(&setup.eval_storage, &setup.storage);
    let eval_loader = (evaluation
        && (config.evaluation.steps_between_evals > 0 || own_eval_layout || own_eval_storage))
        .then(|| new_loader(eval_layout, &setup.eval_storage))
        .transpose()?;
    // Draws of the emulated compute time: reproducible per rank from the seed.
    let rng = Xoshiro256PlusPlus::seed_from_u64(
        config.train.seed ^ (u64::from(rank) << 32) ^ 0x00C0_FFEE,
    );
    Ok(TrainingParts {
        compute,
        eval_time,
        train_spec,
        zero_steps,
        eval_spec,
        evaluation,
        loader,
        eval_loader,
        rng,
    })
}

/// Checkpoint-only mode (`workflow.train: False`, `workflow.checkpoint: True`, DLIO §6.6):
/// `num_checkpoints_write` saves, then `num_checkpoints_read` loads of the first checkpoints,
/// each after `time_between_checkpoints` and a barrier.
fn run_checkpoint_only(
    setup: &RankSetup<'_>,
    recorder: &mut RankRecorder,
    ck_setup: &CheckpointSetup,
    checkpointer: &mut RankCheckpointer<'_>,
) -> Result<(), TrainError> {
    let comm = setup.comm;
    let rank = comm.rank();
    let barrier = || -> Result<(), TrainError> { comm.barrier().map_err(TrainError::from) };
    comm.barrier()?;
    recorder.start_epoch(1);
    for i in 1..=ck_setup.num_write {
        compute_between_checkpoints(setup, ck_setup, i)?;
        comm.barrier()?;
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        checkpointer.save(recorder, setup.observer, 1, index, i)?;
        if ck_setup.rank_sync {
            checkpointer.wait_background(recorder, setup.observer)?;
            comm.barrier()?;
        }
    }
    checkpointer.wait_background(recorder, setup.observer)?;
    comm.barrier()?;
    if ck_setup.num_read > 0 {
        // One rank lists the folder for everyone (upstream lists on every rank, #347).
        if rank == 0 {
            let found = setup
                .storage
                .list(&ck_setup.folder)
                .map(|entries| entries.iter().filter(|e| e.is_dir).count() as u64)
                .map_err(|e| TrainError::Checkpoint(e.to_string()))?;
            if found < ck_setup.num_read {
                return Err(TrainError::Checkpoint(format!(
                    "{} holds {found} checkpoints but checkpoint.num_checkpoints_read is {}; \
                     lower it or write more (checkpoint.num_checkpoints_write)",
                    ck_setup.folder.display(),
                    ck_setup.num_read
                )));
            }
        }
        comm.barrier()?;
    }
    for i in 1..=ck_setup.num_read {
        compute_between_checkpoints(setup, ck_setup, i)?;
        comm.barrier()?;
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        let warnings = checkpointer.load(recorder, setup.observer, 1, index, i, &barrier)?;
        for w in warnings {
            setup.observer.warn(rank, &w);
        }
    }
    recorder.end_epoch(1, 0);
    comm.barrier()?;
    Ok(())
}

/// The emulated computation before checkpoint `i` of checkpoint-only mode: a `compute` span,
/// as DLIO computes `time_between_checkpoints` before each save and each load.
fn compute_between_checkpoints(
    setup: &RankSetup<'_>,
    ck_setup: &CheckpointSetup,
    i: u64,
) -> Result<(), TrainError> {
    let _compute = setup.tracer.span(ai::COMPUTE).epoch(1).step(i);
    sleep_cancellable(ck_setup.time_between, &setup.stop)
}

/// The evaluation list: its plan's spec, and the names its last pass read.
struct EvalList {
    spec: PlanSpec,
    names: Option<FileList>,
}

fn run_eval(
    setup: &RankSetup<'_>,
    recorder: &mut RankRecorder,
    loader: &mut Loader,
    list: &mut EvalList,
    epoch: u32,
    eval_time: &mut TimeSampler,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<(), TrainError> {
    let rank = setup.comm.rank();
    let plan = EpochPlan::new(&list.spec, epoch, rank).map_err(TrainError::Plan)?;
    let names = epoch_names(&setup.eval_files, Some(&plan), &mut list.names)?;
    drop_page_cache(setup, &names, Some(&plan))?;
    let pass = Pass::Eval { epoch };
    let _eval_span = setup
        .tracer
        .span(ai::PIPELINE_EVALUATE)
        .epoch(u64::from(epoch));
    setup.observer.pass_started(rank, pass, plan.steps());
    recorder.start_eval(epoch);
    let io_before = setup.counters.snapshot();
    let mut batches = loader.start_epoch(plan, names);
    let mut compute_sleep = CompensatedSleep::default();
    let mut batch_wait = LatencyHistogram::new();
    let mut done = 0u64;
    let mut start_loading = Instant::now();
    while let Some(batch) = batches.next_batch() {
        check_cancel(setup)?;
        let batch = batch?;
        let loaded = Instant::now();
        let load = loaded - start_loading;
        batch_wait.record_duration(load);
        let step_args = [("epoch", i64::from(epoch)), ("step", done as i64 + 1)];
        setup
            .tracer
            .complete(ai::FETCH_ITER, start_loading, loaded, &step_args);
        if let Some(d) = eval_time.draw(rng) {
            compute_sleep
                .sleep(&setup.stop, d)
                .map_err(|_| stopped_error(&setup.stop))?;
        }
        let computed = Instant::now();
        setup
            .tracer
            .complete(ai::COMPUTE, loaded, computed, &step_args);
        recorder.record_step(
            epoch,
            Phase::Eval,
            load,
            computed - loaded,
            computed - start_loading,
        );
        done += 1;
        setup
            .observer
            .step_done(rank, pass, done, batch.samples, load, computed - loaded);
        start_loading = Instant::now();
    }
    let read = batches.finish();
    recorder.end_eval(epoch, done);
    record_io(
        recorder,
        epoch,
        PhaseKind::Eval,
        setup,
        io_before,
        &read,
        &batch_wait,
    );
    setup.observer.pass_finished(rank, pass, recorder);
    Ok(())
}

fn record_io(
    recorder: &mut RankRecorder,
    epoch: u32,
    phase: PhaseKind,
    setup: &RankSetup<'_>,
    before: dlio_storage::IoCountersSnapshot,
    read: &EpochReadStats,
    batch_wait: &LatencyHistogram,
) {
    let delta = setup.counters.snapshot() - before;
    recorder.add_io(
        epoch,
        phase,
        IoTotals {
            bytes_read: delta.bytes_read,
            read_ops: delta.read_requests,
            opens: delta.opens,
            samples: read.samples,
        },
    );
    recorder.merge_latencies(epoch, phase, &read.sample_read, batch_wait);
}

/// `storage.drop_page_cache`: rank 0 drops the files' cached pages before a pass so that its
/// reads reach the storage; the others wait for it. A file whose pages cannot be dropped is a
/// warning, not an error.
/// The names the rank reads in the epoch of `plan` ([`DataFiles::names_for`]); `previous`
/// holds the last pass's, given back when the files are the same.
fn epoch_names(
    source: &DataFiles,
    plan: Option<&EpochPlan>,
    previous: &mut Option<FileList>,
) -> Result<FileList, TrainError> {
    let files = plan.into_iter().flat_map(EpochPlan::files);
    let names = source
        .names_for(files, previous.take())
        .map_err(|e| TrainError::Names(Box::new(e)))?;
    *previous = Some(names.clone());
    Ok(names)
}

/// `storage.drop_page_cache`: every rank drops the cached pages of the files it reads in the
/// pass, then waits for the others, so no rank starts while a file is still cached.
fn drop_page_cache(
    setup: &RankSetup<'_>,
    names: &FileList,
    plan: Option<&EpochPlan>,
) -> Result<(), TrainError> {
    if !setup.config.storage.drop_page_cache {
        return Ok(());
    }
    let rank = setup.comm.rank();
    let mut read = FileSet::new(names.len());
    for file in plan.into_iter().flat_map(EpochPlan::files) {
        read.insert(usize::try_from(file).unwrap_or(usize::MAX));
    }
    let (mut failed, mut files) = (0, 0);
    let mut scratch = PathScratch::default();
    for file in read.iter() {
        files += 1;
        let dropped = names
            .path(file, &mut scratch)
            .is_some_and(|path| setup.storage.drop_cache(path).is_ok());
        if !dropped {
            failed += 1;
        }
    }
    if failed > 0 {
        setup.observer.warn(
            rank,
            &format!("could not drop the page cache of {failed} of the {files} files it reads"),
        );
    }
    setup.comm.barrier()?;
    Ok(())
}

fn check_cancel(setup: &RankSetup<'_>) -> Result<(), TrainError> {
    if setup.stop.is_stopped() {
        Err(stopped_error(&setup.stop))
    } else {
        Ok(())
    }
}

/// What a rank reports when it stops because the run stopped: an interruption for Ctrl-C, an
/// echo of the failing rank's reason otherwise.
fn stopped_error(stop: &StopSignal) -> TrainError {
    match stop.cause() {
        Some(StopCause::Failed(reason)) => TrainError::Aborted(Aborted { reason }),
        _ => TrainError::Interrupted,
    }
}

/// Sleeps `d`, waking at once (with an error) when the run stops.
fn sleep_cancellable(d: Duration, stop: &StopSignal) -> Result<(), TrainError> {
    stop.sleep(d).map_err(|_| stopped_error(stop))
}
