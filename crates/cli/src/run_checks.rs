//! The run driver's checks of a config before anything runs, beyond config's own validation:
//! what this build lacks, settings that have no effect here, request patterns a format cannot
//! serve, collective I/O's conditions and the steps an epoch can reach.

use anyhow::{Result, bail};
use dlio_config::{Config, IoEngine, StorageType};
use dlio_format::Format;

use crate::dataset;

/// Features whose issues are not built yet: refuse clearly rather than ignore the setting.
pub(crate) fn refuse_unbuilt(config: &Config) -> Result<()> {
    // `profiler: none` is upstream's no-op profiler; `iostat` is ours ([`crate::iostat`]).
    if config.workflow.profiling {
        use dlio_config::Profiler;
        match config.profiling.profiler {
            Profiler::None | Profiler::Iostat => {}
            Profiler::Darshan => bail!(
                "profiling.profiler darshan: dlio does not load Darshan (DLIO preloads its \
                 libdarshan.so into the Python process). The same POSIX-level record of every \
                 open, read and write, per rank and per thread, comes from `dlio run --trace` \
                 (dftracer's format; `dlio analyze OUTPUT_FOLDER` summarises it), or run dlio \
                 under Darshan yourself (LD_PRELOAD=libdarshan.so). Set \
                 ++workload.profiling.profiler=none (or iostat), or ++workload.workflow.profiling=False"
            ),
            Profiler::Tensorboard => bail!(
                "profiling.profiler tensorboard: there is no TensorFlow in dlio to profile. The \
                 same timeline of steps, batch loads, computation and checkpoints comes from \
                 `dlio run --trace` (Chrome-trace JSON that Perfetto opens; `dlio analyze \
                 OUTPUT_FOLDER` summarises it). Set ++workload.profiling.profiler=none (or iostat), \
                 or ++workload.workflow.profiling=False"
            ),
        }
    }
    match config.storage.storage_type {
        StorageType::LocalFs | StorageType::DirectFs | StorageType::S3 => Ok(()),
        // Upstream's storage factory raises for parallel_fs too.
        StorageType::ParallelFs => bail!(
            "storage.storage_type `parallel_fs` has no implementation (upstream DLIO rejects it \
             too); a parallel file system is a local_fs path: set \
             ++workload.storage.storage_type=local_fs"
        ),
        StorageType::Aistore => bail!(
            "storage.storage_type `aistore` is not available in this version of dlio; AIStore's \
             S3 API works with ++workload.storage.storage_type=s3 and its endpoint_url"
        ),
    }
}

/// `storage_options.prefetch_window` acts only where the fork's window does: training from
/// object storage with a reader that decodes nothing, and without a `transfer_size` (which asks
/// for ranged reads instead). Elsewhere it is said to have no effect.
pub(crate) fn unused_prefetch_window(
    config: &Config,
    format: Option<&dyn Format>,
) -> Option<String> {
    let window = config.storage.storage_options.as_ref()?.prefetch_window?;
    let used = config.object_read_window() > 0
        && format.is_some_and(|f| f.reads_whole_files_undecoded())
        && !config.shapes_requests();
    (config.workflow.train && !used).then(|| {
        format!(
            "storage.storage_options.prefetch_window: {window} has no effect here: the window \
             of whole-object reads is used for training from object storage (storage_type s3) \
             with a reader that decodes nothing (npz, npy, jpeg, png, hdf5 under the MLPerf \
             semantics) and no reader.transfer_size"
        )
    })
}

/// `reader.sample_requests` shapes reads of a whole file in one request, which only readers
/// that read every file whole and decode nothing make (for files of at most
/// [`dlio_format::WHOLE_READ_MAX_BYTES`], each read into a buffer of its size). Elsewhere the
/// key would have no effect, so it is refused.
pub(crate) fn check_sample_requests(config: &Config, format: Option<&dyn Format>) -> Result<()> {
    let key = if config.reader.sample_request_patterns.is_empty() {
        "reader.sample_requests"
    } else {
        "reader.sample_request_patterns"
    };
    if config.sample_request_patterns().is_empty() || !config.workflow.train {
        return Ok(());
    }
    let Some(format) = format else {
        return Ok(());
    };
    if !format.reads_whole_files_undecoded() {
        bail!(
            "{key} shapes the reads of whole files, but the {} reader (under the \
             {} semantics) reads parts of files or decodes them; use it with npz, npy, jpeg, png \
             or hdf5 under the MLPerf semantics, or describe the requests with \
             reader.transfer_size_distribution",
            format.name(),
            config.semantics.as_str()
        );
    }
    if let Some(bytes) = dataset::smallest_complete_file(config)
        && bytes > dlio_format::WHOLE_READ_MAX_BYTES
    {
        bail!(
            "{key} shapes reads of a whole file in one request, each into a buffer of the \
             file's size, but these files are {bytes} bytes (more than {} MiB); use \
             reader.transfer_size_distribution for files this large",
            dlio_format::WHOLE_READ_MAX_BYTES >> 20
        );
    }
    Ok(())
}

/// Settings of Python's machinery that have nothing to act on here: said once, never silently
/// dropped.
pub(crate) fn no_effect_warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if !config.reader.pin_memory {
        out.push(
            "reader.pin_memory: False has no effect in dlio: batches are never copied to pinned \
             (page-locked) memory, so the setting's memory saving is already the default"
                .into(),
        );
    }
    if !matches!(
        config.reader.multiprocessing_context,
        dlio_config::MultiprocessingContext::Fork | dlio_config::MultiprocessingContext::None
    ) {
        out.push(
            "reader.multiprocessing_context has no effect in dlio: reader threads are threads, \
             not Python worker processes"
                .into(),
        );
    }
    if config.reader.dont_use_mmap {
        out.push(
            "reader.dont_use_mmap is a DALI reader setting and has no effect in dlio; choose how \
             files are read with storage.io_engine (posix, direct, mmap, io_uring)"
                .into(),
        );
    }
    if let Some(method) = &config.dataset.data_gen_method
        && config.workflow.generate_data
    {
        out.push(format!(
            "dataset.data_gen_method: {method} chooses the fork's Python generator back end; \
             dlio generates every file with its own generator (unique bytes per file, seeded by \
             train.seed), so the setting has no effect"
        ));
    }
    if config.dataset.parquet.generation_batch_size > 0 && config.workflow.generate_data {
        out.push(
            "dataset.parquet.generation_batch_size bounds the fork's generator memory; dlio \
             streams every row group to the file as it is made, so the setting has no effect"
                .into(),
        );
    }
    if config.dataset.parquet.use_s3dlio_gen && config.workflow.generate_data {
        out.push(
            "dataset.parquet.use_s3dlio_gen picks s3dlio's parquet generator, which the fork \
             uses only for object storage (it ignores the key on a file system); dlio writes \
             every parquet file with its own writer, with the column types and row groups of \
             dataset.parquet, so the setting has no effect"
                .into(),
        );
    }
    if config.checkpoint.ksm.is_some() && config.workflow.checkpoint {
        out.push(
            "checkpoint.ksm has no effect in dlio: checkpoints are streamed from a generator, \
             so there are no resident tensors for KSM to merge"
                .into(),
        );
    }
    out
}

/// Collective calls must be made by every process in the same order and number: one rank per
/// process, one reader thread at most, one shared file, equal request counts.
pub(crate) fn check_collective(config: &Config, local_ranks: u32) -> Result<()> {
    let fix = "or set ++workload.reader.collective_io=False";
    if local_ranks != 1 {
        bail!(
            "reader.collective_io needs one rank per MPI process (--ranks 1), not {local_ranks}; {fix}"
        );
    }
    if config.reader.read_threads > 1 {
        bail!(
            "reader.collective_io needs reader.read_threads of 0 or 1 (collective calls must be \
             issued in step order), not {}; {fix}",
            config.reader.read_threads
        );
    }
    if config.dataset.num_files_train != 1
        || (config.workflow.evaluation && config.dataset.num_files_eval > 1)
    {
        bail!(
            "reader.collective_io is for data sets that every rank reads from one shared file, but \
             dataset.num_files_train is {}; {fix}",
            config.dataset.num_files_train
        );
    }
    if config.shapes_requests() {
        bail!(
            "reader.collective_io leaves the request sizes to MPI-IO (its two-phase I/O \
             aggregates them); unset reader.transfer_size, reader.transfer_size_distribution and \
             reader.sample_requests, {fix}"
        );
    }
    if config.storage.io_engine != IoEngine::Posix
        || config.storage.storage_type != StorageType::LocalFs
    {
        bail!(
            "reader.collective_io reads local files through MPI-IO; it replaces storage.io_engine, which must stay posix; {fix}"
        );
    }
    if config.dataset.format == dlio_config::FormatKind::Hdf5 {
        bail!(
            "reader.collective_io cannot apply to hdf5: the HDF5 library does its own I/O; {fix}"
        );
    }
    Ok(())
}

/// Refuses a step cap the epoch cannot reach; returns the warning for a data set too small for
/// one full batch per rank, which trains no step (DLIO runs such epochs empty and exits 0, and
/// upstream's own tests rely on it).
pub(crate) fn check_steps(
    config: &Config,
    spec: &dlio_plan::PlanSpec,
    trim: &dlio_plan::Trim,
) -> Result<Option<String>> {
    let total = config.train.total_training_steps;
    if total > 0 {
        let uncapped = dlio_plan::trim(&dlio_plan::PlanSpec {
            total_training_steps: None,
            ..*spec
        });
        if total as u64 > uncapped.steps_per_rank {
            bail!(
                "train.total_training_steps is {total}, but an epoch has only {} steps per rank \
                 ({} samples, batch {}, {} ranks); lower it or add files",
                uncapped.steps_per_rank,
                uncapped.total_samples,
                spec.batch_size,
                spec.world
            );
        }
    }
    if trim.steps_per_rank == 0 {
        return Ok(Some(format!(
            "no training step fits: {} samples cannot give each of the {} ranks a full batch of \
             {}, so every epoch trains 0 steps and AU is 0, as in DLIO; add files \
             (dataset.num_files_train) or lower reader.batch_size",
            trim.total_samples, spec.world, spec.batch_size
        )));
    }
    Ok(None)
}
