//! The run driver: config -> output folder -> generation -> listing -> ranks -> outputs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use dlio_config::StorageType;
use dlio_config::{Config, Loaded};
use dlio_format::{Format, GenerationJob};
use dlio_loader::{StopCause, StopSignal};
use dlio_metrics::{HostInfo, HostShare, MetricParams, RankReport, RunInfo};
use dlio_storage::{DataFiles, FileList, IoCounters, PathTable, Storage};
use dlio_trace::Tracer;
use dlio_trainer::{CheckpointSetup, Comm, LocalGroup, RankSetup, SideRead, TrainError};
use indicatif::MultiProgress;

use crate::args::{Entry, RunArgs};
use crate::cluster::Cluster;
use crate::dataset::{self, List};
use crate::engine_settings::engine_settings;
use crate::log::RunLog;
use crate::progress::Progress;
use crate::run_checks::{
    check_collective, check_sample_requests, check_steps, no_effect_warnings, refuse_unbuilt,
    unused_prefetch_window,
};

/// What `dlio run` / `dlio generate` do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The workflow the config says.
    Run,
    /// Generation only.
    GenerateOnly,
}

/// Overrides applied to the built-in `default` workload when `dlio run` is given no workload:
/// a first-contact run that generates a small dataset in a temporary folder and trains on it
/// in seconds. Printed so the user knows what ran.
const FIRST_CONTACT: &[&str] = &[
    "++workload.workflow.generate_data=True",
    "++workload.train.epochs=2",
    "++workload.train.computation_time=0.05",
    "++workload.evaluation.eval_time=0.02",
    "++workload.reader.read_threads=2",
];

pub fn run(args: RunArgs, mode: Mode, entry: Entry) -> Result<ExitCode> {
    let cluster = Cluster::detect()?;
    let outcome = run_in(&cluster, args, mode, entry);
    if outcome.is_err() && cluster.processes() > 1 {
        // The other processes may wait in a collective call for this one: end the job.
        if let Err(e) = &outcome {
            eprintln!("error on process {}: {e:#}", cluster.process());
        }
        cluster.abort(1);
    }
    outcome
}

fn run_in(cluster: &Cluster, args: RunArgs, mode: Mode, entry: Entry) -> Result<ExitCode> {
    let run_start = SystemTime::now();
    // First contact only when the command names no workload and sets none of its keys: with
    // `++workload.*` overrides, the user is configuring the default workload (as Python DLIO
    // reads them), and a demo setting must not override theirs.
    let first_contact = mode == Mode::Run
        && entry == Entry::Dlio
        && !args.words.iter().any(|w| {
            let w = w.trim_start_matches('+');
            w.starts_with("workload=") || w.starts_with("workload.")
        });
    let mut words = args.words.clone();
    let mut temp_dir = None;
    if first_contact {
        let dir = std::env::temp_dir().join(format!("dlio-first-contact-{}", std::process::id()));
        words.extend(FIRST_CONTACT.iter().map(|s| s.to_string()));
        words.push(format!(
            "++workload.dataset.data_folder={}",
            dir.join("data").display()
        ));
        if !words
            .iter()
            .any(|w| w.contains("output.folder") || w.starts_with("hydra.run.dir"))
        {
            words.push(format!(
                "++workload.output.folder={}",
                dir.join("output").display()
            ));
        }
        temp_dir = Some(dir);
    }
    if mode == Mode::GenerateOnly {
        words.push("++workload.workflow.generate_data=True".into());
        words.push("++workload.workflow.train=False".into());
        words.push("++workload.workflow.checkpoint=False".into());
    }
    let mut loaded = dlio_config::load(&args.flags.load_args(words, args.config_dir.clone())?)?;
    // Process 0's resolved config is the job's: the others take it, so configs cannot differ.
    let (yaml, out) = cluster.broadcast(|| (loaded.config.to_yaml(), output_folder(&loaded)))?;
    if !cluster.is_root() {
        loaded.config = dlio_config::load_text("the config of process 0", &yaml, &[])?.config;
    }
    let world = args.ranks * cluster.processes();
    let mut warnings = loaded.config.validate(world)?;
    warnings.extend(dlio_format::check_dataset(&loaded.config.dataset)?);
    let bars = if cluster.is_root() {
        MultiProgress::new()
    } else {
        MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
    };
    let log = RunLog::new(
        bars.clone(),
        cluster.is_root(),
        crate::log::LogLevel::from_env()?,
    );
    if first_contact {
        log.output(&format!(
            "No workload given: running the built-in `default` workload for first contact, with {} \
             and the data set in {} (run `dlio run workload=default` for the full workload)",
            FIRST_CONTACT.join(" "),
            temp_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        ));
    }
    let tracing = args.trace || dlio_trace::dftracer_enabled_by_env();
    let run = Run {
        cluster,
        loaded: &loaded,
        config: &loaded.config,
        out: out.clone(),
        local_ranks: args.ranks,
        world: args.ranks * cluster.processes(),
        tracing,
        log: &log,
        bars: &bars,
        run_start,
    };
    let outcome = run.drive(&warnings);
    log.flush();
    if let Some(dir) = temp_dir {
        // The first-contact data set is scratch; the outputs stay for the user to read.
        let _ = std::fs::remove_dir_all(dir.join("data"));
        // Gone too when nothing else is in it (the outputs went where the user said).
        let _ = std::fs::remove_dir(&dir);
    }
    outcome
}

fn output_folder(loaded: &Loaded) -> PathBuf {
    if let Some(folder) = &loaded.config.output.folder {
        return PathBuf::from(folder);
    }
    if let Some(dir) = &loaded.hydra_run_dir {
        return dir.clone();
    }
    let stamp = chrono::Local::now().format("%Y-%m-%d-%H-%M-%S");
    PathBuf::from("hydra_log")
        .join(&loaded.config.model.name)
        .join(stamp.to_string())
}

/// What every phase of a run shares: the job, the config, where outputs go and how to say
/// things. The phases, in order: [`Run::prepare`], [`Run::generate`], [`Run::plan`],
/// [`Run::train`], [`Run::report`].
struct Run<'a> {
    cluster: &'a Cluster,
    loaded: &'a Loaded,
    config: &'a Config,
    out: PathBuf,
    local_ranks: u32,
    /// Ranks in the job: `local_ranks` times the processes.
    world: u32,
    tracing: bool,
    log: &'a RunLog,
    bars: &'a MultiProgress,
    run_start: SystemTime,
}

/// What [`Run::prepare`] sets up: the stop signal and rank group every later phase uses, the
/// data set's format (none for a checkpoint-only run) and the I/O engine.
struct Prepared {
    stop: Arc<StopSignal>,
    group: Arc<LocalGroup>,
    format: Option<Arc<dyn Format>>,
    engine: dlio_storage::Engine,
    storage: Arc<dyn Storage>,
    /// The S3 endpoint this process uses (one of `S3_ENDPOINT_URIS`'s, by process), if any.
    endpoint: Option<String>,
}

/// What [`Run::plan`] decides before any rank starts: the file lists, the seed, the steps and
/// the checkpoints.
struct Planned {
    checkpoint: Option<CheckpointSetup>,
    train_files: DataFiles,
    eval_files: DataFiles,
    random_seed: u64,
    trim: dlio_plan::Trim,
    host: HostInfo,
    data_size: DatasetSize,
    memory: dlio_storage::MemoryCheck,
    params: MetricParams,
}

/// Each local rank's storage stack, I/O counters and trace.
struct RankIo {
    counters: Vec<Arc<IoCounters>>,
    storages: Vec<Arc<dyn Storage>>,
    /// Each rank's storage for its evaluation passes: the same stack, with the training
    /// pipeline's waits left out of the request patterns.
    eval_storages: Vec<Arc<dyn Storage>>,
    tracers: Vec<Tracer>,
}

/// What [`Run::train`] leaves for the report.
struct Trained {
    results: Vec<Result<RankReport, TrainError>>,
    device_watch: crate::device_check::DeviceWatch,
    profiled: serde_json::Value,
}

impl Run<'_> {
    /// The run, phase by phase.
    fn drive(&self, warnings: &[String]) -> Result<ExitCode> {
        let prepared = self.prepare(warnings)?;
        if let Some(code) = self.generate(&prepared)? {
            return Ok(code);
        }
        if !self.config.workflow.train && !self.config.workflow.checkpoint {
            self.log
                .output("Generation only: nothing to train (workflow.train is False)");
            return Ok(ExitCode::SUCCESS);
        }
        let planned = self.plan(&prepared)?;
        let progress = Progress::new(
            self.bars.clone(),
            self.log,
            self.config,
            planned.params.clone(),
        );
        let io = self.rank_io(&prepared, &planned)?;
        let trained = self.train(&prepared, &planned, &io, &progress)?;
        progress.finish();
        self.finish_traces(&io.tracers)?;
        self.report(&prepared, &planned, &io, trained)
    }
}

impl Run<'_> {
    /// The output folder and log, warnings and refusals, the stop signal (Ctrl-C), the format
    /// and the I/O engine.
    fn prepare(&self, warnings: &[String]) -> Result<Prepared> {
        let (config, log, out) = (self.config, self.log, &self.out);
        if self.cluster.is_root() {
            std::fs::create_dir_all(out)
                .with_context(|| format!("creating the output folder {}", out.display()))?;
            log.open_file(&out.join(&config.output.log_file))
                .with_context(|| {
                    format!("creating {}", out.join(&config.output.log_file).display())
                })?;
            write_hydra_files(out, self.loaded)?;
        }
        for w in self.loaded.warnings.iter().chain(warnings) {
            log.warn(w);
        }
        refuse_unbuilt(config)?;
        for w in no_effect_warnings(config) {
            log.warn(&w);
        }
        if config.reader.collective_io {
            check_collective(config, self.local_ranks)?;
        }
        if config.workflow.train || config.workflow.checkpoint {
            crate::limits::check_thread_budget(
                config,
                self.local_ranks,
                crate::limits::ThreadLimits::of_this_machine(),
            )?;
        }

        let stop = Arc::new(StopSignal::new());
        let group = match self.cluster.link() {
            Some(link) => LocalGroup::across_processes(
                self.local_ranks,
                self.cluster.process(),
                self.cluster.processes(),
                link,
            ),
            None => LocalGroup::new(self.local_ranks),
        };
        {
            let stop = Arc::clone(&stop);
            let group = Arc::clone(&group);
            // A second handler cannot be installed (tests call main more than once): ignore that.
            let _ = ctrlc::set_handler(move || {
                stop.stop(StopCause::Interrupted);
                group.abort("interrupted (Ctrl-C)");
            });
        }

        let mut phases = Vec::new();
        if config.workflow.generate_data {
            phases.push("Generating data");
        }
        if config.workflow.train {
            phases.push("Training");
        }
        if config.workflow.evaluation && config.workflow.train {
            phases.push("Evaluation");
        }
        if config.workflow.checkpoint {
            phases.push("Checkpointing");
        }
        log.output(&format!(
            "Running DLIO [{}] with {} process(es)",
            phases.join(" & "),
            self.world
        ));

        // Checkpoint-only runs read no dataset, so they need no format (llama workloads leave
        // the dataset section at DLIO's tfrecord default).
        let needs_data = config.workflow.generate_data || !config.checkpoint_only();
        let format: Option<Arc<dyn Format>> = if needs_data {
            let read = dlio_format::ReadSettings {
                // Request patterns shape reads of whole files: each file in one request.
                whole_reads: !config.sample_request_patterns().is_empty(),
                ..dlio_format::ReadSettings::for_run(config.semantics, config.tfrecord_check_crc())
            };
            Some(Arc::from(dlio_format::format_with(&config.dataset, read)?))
        } else {
            None
        };
        if let Some(format) = &format {
            format
                .check_layout(&dlio_trainer::nominal_layout(config))
                .with_context(|| {
                    format!("the data set's {} layout (dataset section)", format.name())
                })?;
            format
                .check_layout(&dlio_trainer::nominal_eval_layout(config))
                .with_context(|| {
                    format!(
                        "the evaluation files' {} layout (dataset.record_length_bytes_eval)",
                        format.name()
                    )
                })?;
        }
        if let Some(note) = unused_prefetch_window(config, format.as_deref()) {
            log.warn(&note);
        }
        check_sample_requests(config, format.as_deref())?;
        let (settings, endpoint_note) = engine_settings(config, self.cluster.process() as usize);
        if let Some(note) = endpoint_note {
            log.output(&note);
        }
        let engine = dlio_storage::engine_for(&settings)
            .context("preparing the I/O engine (storage.io_engine / storage.storage_type)")?;
        if let Some(library) = config.storage_library() {
            log.output(&format!(
                "storage_library {library}: an S3 API client library of MLPerf Storage; dlio's \
                 own S3 engine serves it (engine: {})",
                engine.name()
            ));
        }
        let storage: Arc<dyn Storage> = engine.storage();
        let endpoint = settings.s3.as_ref().and_then(|s3| s3.endpoint_url.clone());
        Ok(Prepared {
            stop,
            group,
            format,
            engine,
            storage,
            endpoint,
        })
    }

    /// Generates the data set when the workflow asks; `Some(exit code)` when Ctrl-C ended the
    /// run during generation or the settle wait after it.
    fn generate(&self, prepared: &Prepared) -> Result<Option<ExitCode>> {
        let (config, log) = (self.config, self.log);
        let (true, Some(format)) = (config.workflow.generate_data, &prepared.format) else {
            return Ok(None);
        };
        let stop = &prepared.stop;
        let interrupted = || {
            interrupted_before_training(
                self.cluster,
                self.loaded,
                &self.out,
                log,
                self.run_start,
                self.world,
            )
            .map(Some)
        };
        let writers = generation_threads(config, &**format, self.local_ranks);
        let generated = generate(
            self.cluster,
            config,
            &*prepared.storage,
            (&**format, writers),
            log,
            self.bars,
            stop.flag(),
        );
        if stop.was_interrupted() {
            return interrupted();
        }
        generated?;
        if config.storage.drop_page_cache && config.workflow.train {
            // Between generation and training: what was just written must not be read from
            // the page cache.
            for f in dataset::generation_files(config, &**format) {
                let _ = prepared.storage.drop_cache(&f.path);
            }
        }
        self.cluster.barrier();
        settle_after_generation(config, log, stop);
        if stop.was_interrupted() {
            return interrupted();
        }
        Ok(None)
    }

    /// The checkpoints, the file lists (listed once by process 0 for the whole job), the
    /// seed, the steps per epoch and the memory rule.
    fn plan(&self, prepared: &Prepared) -> Result<Planned> {
        let (config, log, world) = (self.config, self.log, self.world);
        let checkpoint = CheckpointSetup::from_config(config, world)?;
        if let Some(c) = &checkpoint {
            log.output(&format!(
                "Checkpoint size: {:.4} GB ({} files per checkpoint over {} ranks) in {}{}",
                c.plan.checkpoint_size_gib(),
                c.plan.totals.files,
                world,
                c.folder.display(),
                if c.asynchronous {
                    ", written asynchronously"
                } else {
                    ""
                }
            ));
        }
        let checkpoint_only = config.checkpoint_only();

        let (data_size, train_files, eval_files) = self.list(prepared, checkpoint_only)?;
        let random_seed = self.cluster.broadcast(rand_seed)?;
        let train_spec =
            dlio_trainer::train_plan_spec(config, world, train_files.len() as u64, random_seed);
        let trim = dlio_plan::trim(&train_spec);
        if !checkpoint_only && let Some(warning) = check_steps(config, &train_spec, &trim)? {
            if self.loaded.strict {
                bail!("{warning} (--strict makes a run with no training step an error)");
            }
            log.warn(&warning);
        }
        if trim.used_samples < trim.total_samples {
            log.warn(&format!(
                "Trimming the training samples from {} to {} so that every one of the {world} \
                 ranks runs the same {} steps (batch {}); the rest are not read this epoch",
                trim.total_samples,
                trim.used_samples,
                trim.steps_per_rank,
                config.reader.batch_size
            ));
        }
        if !checkpoint_only {
            log.output(&format!("Max steps per epoch: {}", trim.steps_per_rank));
        }

        let host = HostInfo::detect();
        let memory = dlio_storage::memory_check(data_size.bytes);
        if !checkpoint_only {
            let mut message = memory.message();
            if data_size.sized_files < train_files.len() {
                message += &format!(
                    " (the size is extrapolated from {} of the {} files)",
                    data_size.sized_files,
                    train_files.len()
                );
            }
            if memory.meets_rule() {
                log.output(&message);
            } else {
                log.warn(&message);
            }
        }
        if config.reader.read_threads as usize > available_cores() {
            log.warn(&format!(
                "reader.read_threads is {} but this machine has {} cores; reader threads will \
                 compete",
                config.reader.read_threads,
                available_cores()
            ));
        }
        let mut params = metric_params(
            config,
            world,
            train_files.len() as u64,
            eval_files.len() as u64,
        );
        params.checkpoint_size_bytes = checkpoint.as_ref().map(|c| c.plan.totals.checkpoint_bytes);
        Ok(Planned {
            checkpoint,
            train_files,
            eval_files,
            random_seed,
            trim,
            host,
            data_size,
            memory,
            params,
        })
    }

    /// The file lists, listed (or computed, or counted in their manifests) and checked once,
    /// by process 0, and the training set's size. A listing's table is sent to every process;
    /// computed names and manifests are had by each process from the config.
    fn list(
        &self,
        prepared: &Prepared,
        checkpoint_only: bool,
    ) -> Result<(DatasetSize, DataFiles, DataFiles)> {
        let config = self.config;
        let Some(format) = prepared.format.as_deref().filter(|_| !checkpoint_only) else {
            return Ok(Default::default());
        };
        let storage = &prepared.storage;
        let mut listed = None;
        let listing = self.cluster.broadcast(|| -> Result<DatasetSize, String> {
            let list = |which| {
                dataset::list_files(config, storage, format, which).map_err(|e| format!("{e:#}"))
            };
            let train = list(List::Train)?;
            let eval = if config.workflow.evaluation {
                list(List::Valid)?.files
            } else {
                DataFiles::default()
            };
            let size = dataset_size(&**storage, &train, dataset::smallest_complete_file(config))
                .map_err(|e| format!("{e:#}"))?;
            listed = Some((train.files, eval));
            Ok(size)
        })?;
        let data_size = listing.map_err(|e| anyhow!(e))?;
        let (train, eval) = listed.unwrap_or_default();
        let share = |files: DataFiles, which: List| -> Result<DataFiles> {
            if which == List::Valid && !config.workflow.evaluation {
                return Ok(DataFiles::default());
            }
            if dataset::name_source(config, which) != dataset::NameSource::Listing {
                return Ok(if self.cluster.is_root() {
                    files
                } else {
                    dataset::unlisted_files(config, storage, format, which)
                });
            }
            // A listing that found generation's names is their pattern: the other processes
            // compute the names too, from the `_of_{N}` process 0 found.
            let generated = self.cluster.broadcast(|| match &files {
                DataFiles::Ready(FileList::Pattern(pattern)) => Some(pattern.generated()),
                _ => None,
            })?;
            if let Some(generated) = generated {
                return Ok(if self.cluster.is_root() {
                    files
                } else {
                    let pattern = dataset::listed_pattern(config, format, which, generated);
                    DataFiles::Ready(FileList::Pattern(Arc::new(pattern)))
                });
            }
            // Other names: process 0's, relative to the list's folder.
            let held = match &files {
                DataFiles::Ready(FileList::Held(held)) => Some(held.names()),
                _ => None,
            };
            Ok(match self.cluster.broadcast_table(held)? {
                None => files,
                Some(names) => DataFiles::Ready(FileList::Held(Arc::new(
                    dlio_storage::HeldNames::every(dataset::list_dir(config, which), names),
                ))),
            })
        };
        Ok((
            data_size,
            share(train, List::Train)?,
            share(eval, List::Valid)?,
        ))
    }

    /// Each local rank's storage: Split(Metered(Traced(engine))), so metering and tracing see
    /// every transfer, and its trace.
    fn rank_io(&self, prepared: &Prepared, planned: &Planned) -> Result<RankIo> {
        let config = self.config;
        let mut io = RankIo {
            counters: Vec::new(),
            storages: Vec::new(),
            eval_storages: Vec::new(),
            tracers: Vec::new(),
        };
        for local in 0..self.local_ranks {
            let tracer = if self.tracing {
                let opts = dlio_trace::TraceOptions {
                    compress: dlio_trace::dftracer_compression_from_env().unwrap_or(true),
                    shares_process: self.local_ranks > 1,
                    ..dlio_trace::TraceOptions::new(
                        &self.out,
                        prepared.group.global_rank(local),
                        self.world,
                    )
                };
                let tracer = Tracer::create(&opts)
                    .with_context(|| format!("starting the trace {}", opts.path().display()))?;
                // The dataset's names go to the trace now, not on the reader threads' first
                // opens during the measured run.
                let tables: Vec<Arc<PathTable>> = [&planned.train_files, &planned.eval_files]
                    .into_iter()
                    .filter_map(|files| files.table().cloned())
                    .collect();
                tracer.name_files(&tables);
                tracer
            } else {
                Tracer::disabled()
            };
            let counters = Arc::new(IoCounters::default());
            let raw = if config.reader.collective_io {
                self.cluster
                    .collective_storage(prepared.engine.raw(), config.reader.read_threads)?
            } else {
                prepared.engine.raw()
            };
            let metered: Arc<dyn Storage> = Arc::new(dlio_trace::metered_and_traced(
                raw,
                tracer.clone(),
                Arc::clone(&counters),
            ));
            let storage = prepared.engine.split(Arc::clone(&metered));
            io.eval_storages.push(
                prepared
                    .engine
                    .split_for_evaluation(metered)
                    .unwrap_or_else(|| Arc::clone(&storage)),
            );
            io.counters.push(counters);
            io.storages.push(storage);
            io.tracers.push(tracer);
        }
        Ok(io)
    }

    /// The measured phase: one thread per local rank runs the step loop, with the device
    /// watch and the profiler around it.
    fn train(
        &self,
        prepared: &Prepared,
        planned: &Planned,
        io: &RankIo,
        progress: &Progress<'_>,
    ) -> Result<Trained> {
        let config = self.config;
        let device_watch = crate::device_check::DeviceWatch::start(
            &dataset::data_root(config),
            config.storage.storage_type != StorageType::S3,
        );
        let profiler = start_profiler(self.cluster, config, &self.out, self.log)?;
        let (stop, group) = (&prepared.stop, &prepared.group);
        let results: Vec<Result<RankReport, TrainError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.local_ranks)
                .map(|rank| {
                    let comm = group.comm(rank);
                    let storage = Arc::clone(&io.storages[rank as usize]);
                    let eval_storage = Arc::clone(&io.eval_storages[rank as usize]);
                    let counters = Arc::clone(&io.counters[rank as usize]);
                    let format = prepared.format.clone();
                    let train_files = planned.train_files.clone();
                    let eval_files = planned.eval_files.clone();
                    let stop = Arc::clone(stop);
                    let tracer = io.tracers[rank as usize].clone();
                    std::thread::Builder::new()
                        .name(format!("dlio-rank-{rank}"))
                        .spawn_scoped(s, move || {
                            let setup = RankSetup {
                                config,
                                comm: &comm,
                                storage,
                                eval_storage,
                                counters,
                                format,
                                train_files,
                                eval_files,
                                random_seed: planned.random_seed,
                                stop,
                                observer: progress,
                                checkpoint: planned.checkpoint.as_ref(),
                                side_files: config
                                    .dataset
                                    .side_files
                                    .iter()
                                    .map(|f| SideRead {
                                        path: dataset::data_root(config).join(&f.name),
                                        every_steps: f.every_steps,
                                    })
                                    .collect(),
                                companions: dlio_loader::Companions::new(
                                    &dataset::data_root(config),
                                    &config.dataset.sample_companions,
                                )
                                .map(Arc::new),
                                tracer,
                            };
                            let rank_stop = Arc::clone(&setup.stop);
                            let run =
                                std::panic::AssertUnwindSafe(|| dlio_trainer::run_rank(setup));
                            // A panicking rank must release its peers now (they may be asleep
                            // in compute or waiting at a barrier for it), not when it is joined.
                            std::panic::catch_unwind(run).unwrap_or_else(|_| {
                                let reason = format!("rank {rank} panicked");
                                comm.abort(&reason);
                                rank_stop.stop(StopCause::Failed(reason.clone()));
                                Err(TrainError::Setting(reason))
                            })
                        })
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(rank, h)| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        Err(TrainError::Setting(format!("rank {rank} panicked")))
                    }),
                    Err(e) => {
                        let reason = format!("could not start rank {rank}: {e}");
                        group.abort(&reason);
                        stop.stop(StopCause::Failed(reason));
                        Err(TrainError::Setting(format!(
                            "could not start rank {rank}: {e}"
                        )))
                    }
                })
                .collect()
        });
        let profiled = finish_profiler(profiler, &planned.host.hostname, self.log)?;
        Ok(Trained {
            results,
            device_watch,
            profiled,
        })
    }

    /// Writes the traces: each rank's writer turns its spill into JSON on its own thread, so
    /// they are finished together.
    fn finish_traces(&self, tracers: &[Tracer]) -> Result<()> {
        let mut traced_events = 0u64;
        let mut written_in = std::time::Duration::ZERO;
        let finished: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = tracers.iter().map(|t| s.spawn(|| t.finish())).collect();
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(result) => result.context("finishing the trace"),
                    Err(_) => Err(anyhow!("finishing the trace: the thread panicked")),
                })
                .collect()
        });
        for summary in finished {
            if let Some(summary) = summary? {
                traced_events += summary.events;
                written_in = written_in.max(summary.finish_time);
            }
        }
        if self.tracing {
            self.log.output(&format!(
                "Trace: {traced_events} events in {}, written in {:.2} s after the run (read it \
                 with `dlio analyze {}`)",
                self.out.join("trace-*-of-*.pfw*").display(),
                written_in.as_secs_f64(),
                self.out.display()
            ));
        }
        Ok(())
    }

    /// Gathers every rank's report on process 0, writes the outputs and the metric lines, and
    /// turns the first rank error (or Ctrl-C) into the exit.
    fn report(
        &self,
        prepared: &Prepared,
        planned: &Planned,
        io: &RankIo,
        trained: Trained,
    ) -> Result<ExitCode> {
        let (config, log, out) = (self.config, self.log, &self.out);
        // Only Ctrl-C is an interruption; peers stopped by a failing rank echo its failure.
        let interrupted = prepared.stop.was_interrupted();
        let (reports, first_error) = rank_reports_and_first_error(trained.results);
        // Under MPI a failed rank has already ended the job; here every process completed (or
        // was interrupted alone, in a single-process run). Process 0 collects the reports.
        let share = HostShare {
            host: planned.host.clone(),
            ranks: (0..self.local_ranks)
                .map(|r| prepared.group.global_rank(r))
                .collect(),
        };
        let mut engine_figures = engine_figures(
            self.cluster,
            &io.counters,
            trained.device_watch.figures(&planned.host.hostname),
        );
        // Per process, so per endpoint when S3_ENDPOINT_URIS spreads the processes.
        engine_figures["endpoint"] = serde_json::json!(prepared.endpoint);
        let Some(gathered) = self.cluster.gather(&(reports, share, engine_figures))? else {
            return Ok(if first_error.is_none() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        };
        let mut reports = Vec::new();
        let mut shares = Vec::new();
        let mut per_process = Vec::new();
        for (r, s, e) in gathered {
            reports.extend(r);
            shares.push(s);
            per_process.push(e);
        }
        let device_reads: Vec<(serde_json::Value, u64)> = per_process
            .iter()
            .map(|e| (e["device"].clone(), e["bytes_read"].as_u64().unwrap_or(0)))
            .collect();
        let (page_cache, page_cache_line, page_cache_warning) =
            crate::device_check::page_cache_verdict(&device_reads);
        reports.sort_by_key(|r| r.rank);
        let metrics = dlio_metrics::aggregate(&reports, &planned.params);
        if let Some(warning) = metrics.measured.metric_window.warning() {
            log.warn(&warning);
        }
        let run = RunInfo {
            start: self.run_start,
            end: SystemTime::now(),
            num_files_train: planned.train_files.len() as u64,
            num_files_eval: planned.eval_files.len() as u64,
            num_samples_per_file: config.dataset.num_samples_per_file,
            data_bytes_total: planned.data_size.bytes,
            complete: first_error.is_none(),
            hosts: dlio_metrics::group_hosts(shares),
            ours: self.ours_summary(prepared, planned, per_process, trained.profiled, page_cache),
        };
        if !reports.is_empty() {
            dlio_metrics::write_outputs(out, &run, &planned.host, &metrics, &reports)
                .with_context(|| format!("writing the outputs to {}", out.display()))?;
        }
        if let Some(e) = first_error {
            if interrupted && e.is_interruption() {
                log.warn(&format!(
                    "run interrupted; the summary in {} is marked incomplete",
                    out.display()
                ));
                return Ok(ExitCode::from(crate::EXIT_INTERRUPTED));
            }
            return Err(anyhow!(e)).context(format!(
                "the run failed; partial results are in {}",
                out.display()
            ));
        }
        for line in metrics.metric_lines() {
            log.metric(&line);
        }
        match page_cache_line {
            Some(line) if page_cache_warning => log.warn(&line),
            Some(line) => log.output(&line),
            None => {}
        }
        log.output(&format!("Outputs written to {}", out.display()));
        if !config.dataset.keep_files && self.cluster.is_root() {
            let root = dataset::data_root(config);
            prepared.storage.remove_dir_all(&root).with_context(|| {
                format!(
                    "removing the data set {} (dataset.keep_files is False)",
                    root.display()
                )
            })?;
        }
        Ok(ExitCode::SUCCESS)
    }

    /// dlio's own section of `summary.json`: version, what ran (format, engine, semantics,
    /// seeds, trimming), each process's engine figures, the page-cache verdict, the profiler
    /// and the 5x memory check.
    fn ours_summary(
        &self,
        prepared: &Prepared,
        planned: &Planned,
        per_process: Vec<serde_json::Value>,
        profiled: serde_json::Value,
        page_cache: serde_json::Value,
    ) -> serde_json::Value {
        let config = self.config;
        let (memory, trim) = (&planned.memory, &planned.trim);
        serde_json::json!({
            "version": crate::VERSION,
            "commit": crate::COMMIT,
            "format": prepared.format.as_ref().map(|f| f.name()),
            "workload": self.loaded.workload,
            "config_source": self.loaded.source,
            "config_warnings": self.loaded.warnings,
            "semantics": config.semantics.as_str(),
            "seed": config.train.seed,
            "random_shuffle_seed": planned.random_seed,
            "trimmed_samples_per_epoch": trim.used_samples,
            "total_samples_per_epoch": trim.total_samples,
            "steps_per_epoch": trim.steps_per_rank,
            "io_engine": {
                "name": prepared.engine.name(),
                "transfer_size": prepared.engine.transfer_size(),
                "transfer_size_distribution": config.reader.transfer_size_distribution.iter()
                    .map(|e| serde_json::json!({"size": e.size, "weight": e.weight}))
                    .collect::<Vec<_>>(),
                "io_depth": config.storage.io_depth,
                "read_bytes_per_second": config.storage.read_bytes_per_second,
                "drop_page_cache": config.storage.drop_page_cache,
                "per_process": per_process,
            },
            "page_cache": page_cache,
            "profiler": profiled,
            "memory_check": {
                "dataset_bytes": memory.dataset_bytes,
                "dataset_bytes_from_files": planned.data_size.sized_files,
                "memory_bytes": memory.memory_bytes,
                "ratio": memory.ratio(),
                "meets_5x_rule": memory.meets_rule(),
            },
        })
    }
}

/// Every rank's report (a failed rank's partial one too) and the error to report: the one that
/// caused the stop, not the "aborted" echoes of it in its peers.
fn rank_reports_and_first_error(
    results: Vec<Result<RankReport, TrainError>>,
) -> (Vec<RankReport>, Option<TrainError>) {
    let mut reports = Vec::new();
    let mut first_error: Option<TrainError> = None;
    for r in results {
        let error = match r {
            Ok(report) => {
                reports.push(report);
                continue;
            }
            Err(TrainError::Partial { error, report }) => {
                reports.push(*report);
                *error
            }
            Err(e) => e,
        };
        if first_error
            .as_ref()
            .is_none_or(|e| e.is_interruption() && !error.is_interruption())
        {
            first_error = Some(error);
        }
    }
    (reports, first_error)
}

/// This process's engine figures: requests, bytes and read latencies of all its ranks, and
/// what the data folder's device delivered.
fn engine_figures(
    cluster: &Cluster,
    counters: &[Arc<IoCounters>],
    device: serde_json::Value,
) -> serde_json::Value {
    let mut latency = dlio_storage::LatencySnapshot::default();
    let mut io = dlio_storage::IoCountersSnapshot::default();
    for c in counters {
        latency.merge(&c.read_latency());
        io = io + c.snapshot();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    serde_json::json!({
        "process": cluster.process(),
        "read_requests": io.read_requests,
        "bytes_read": io.bytes_read,
        "write_requests": io.write_requests,
        "bytes_written": io.bytes_written,
        "opens": io.opens,
        "device": device,
        "read_latency_us": {
            "count": latency.count(),
            "min": us(latency.min_ns()),
            "mean": latency.mean_ns() / 1000.0,
            "p50": us(latency.percentile_ns(50.0)),
            "p90": us(latency.percentile_ns(90.0)),
            "p99": us(latency.percentile_ns(99.0)),
            "p99.9": us(latency.percentile_ns(99.9)),
            "max": us(latency.max_ns()),
        },
    })
}

/// Ctrl-C during generation (or the settle wait after it): complete files are kept (a rerun
/// skips them) and the summary says the run is incomplete and where it stopped, so nothing
/// downstream mistakes the run for a finished one. Exit status 130, as for any interruption.
fn interrupted_before_training(
    cluster: &Cluster,
    loaded: &Loaded,
    out: &Path,
    log: &RunLog,
    run_start: SystemTime,
    world: u32,
) -> Result<ExitCode> {
    let config = &loaded.config;
    if cluster.is_root() {
        let host = HostInfo::detect();
        let params = metric_params(config, world, 0, 0);
        let metrics = dlio_metrics::aggregate(&[], &params);
        let run = RunInfo {
            start: run_start,
            end: SystemTime::now(),
            num_files_train: 0,
            num_files_eval: 0,
            num_samples_per_file: config.dataset.num_samples_per_file,
            data_bytes_total: 0,
            complete: false,
            hosts: Vec::new(),
            ours: serde_json::json!({
                "version": crate::VERSION,
                "commit": crate::COMMIT,
                "workload": loaded.workload,
                "config_source": loaded.source,
                "config_warnings": loaded.warnings,
                "semantics": config.semantics.as_str(),
                "seed": config.train.seed,
                "interrupted_during": "generation",
            }),
        };
        dlio_metrics::write_outputs(out, &run, &host, &metrics, &[])
            .with_context(|| format!("writing the outputs to {}", out.display()))?;
    }
    log.warn(&format!(
        "interrupted during generation; complete files are kept and a rerun skips them; the \
         summary in {} is marked incomplete",
        out.display()
    ));
    Ok(ExitCode::from(crate::EXIT_INTERRUPTED))
}

/// `storage.post_generation_settle_seconds`: waits after generation (when training follows)
/// for storage that settles, in slices so Ctrl-C ends the wait.
fn settle_after_generation(config: &Config, log: &RunLog, stop: &StopSignal) {
    let seconds = config.storage.post_generation_settle_seconds;
    if seconds <= 0.0 || !(config.workflow.train || config.workflow.checkpoint) {
        return;
    }
    log.output(&format!(
        "Waiting {seconds} s after generation (storage.post_generation_settle_seconds)"
    ));
    // A stop ends the wait; the caller then sees it.
    let _ = stop.sleep(dlio_config::duration_from_seconds(seconds));
}

/// The iostat profiler of the measured phase, on process 0 (where DLIO runs `iostat`), when
/// `workflow.profiling` asks for it.
fn start_profiler(
    cluster: &Cluster,
    config: &Config,
    out: &Path,
    log: &RunLog,
) -> Result<Option<crate::iostat::IostatProfiler>> {
    if !(config.workflow.profiling
        && config.profiling.profiler == dlio_config::Profiler::Iostat
        && cluster.is_root())
    {
        return Ok(None);
    }
    let profiler = crate::iostat::IostatProfiler::start(
        out.join("iostat.json"),
        &config.profiling.iostat_devices,
    )
    .context("starting the iostat profiler (workflow.profiling, profiling.profiler iostat)")?;
    log.output(&format!(
        "Profiling with iostat: devices {}, CPU, every second",
        if profiler.devices().is_empty() {
            "(none with I/O since boot)".to_string()
        } else {
            profiler.devices().join(", ")
        }
    ));
    Ok(Some(profiler))
}

/// Stops the profiler and writes its file; what `summary.json` says about it.
fn finish_profiler(
    profiler: Option<crate::iostat::IostatProfiler>,
    hostname: &str,
    log: &RunLog,
) -> Result<serde_json::Value> {
    let Some(profiler) = profiler else {
        return Ok(serde_json::Value::Null);
    };
    let devices = profiler.devices().to_vec();
    let intervals = profiler.finish(hostname)?;
    log.output(&format!(
        "iostat: {intervals} one-second intervals in iostat.json (read them with `dlio_postprocessor`)"
    ));
    Ok(serde_json::json!({
        "name": "iostat",
        "file": "iostat.json",
        "devices": devices,
        "intervals": intervals,
    }))
}

fn metric_params(config: &Config, world: u32, files: u64, eval_files: u64) -> MetricParams {
    let spf = config.dataset.num_samples_per_file.max(1);
    let batch = config.reader.batch_size.max(1);
    let batch_eval = config.reader.batch_size_eval.max(1);
    let steps = if config.train.total_training_steps > 0 {
        config.train.total_training_steps as u64
    } else {
        spf * files / batch / u64::from(world)
    };
    MetricParams {
        world,
        batch_size: batch,
        batch_size_eval: batch_eval,
        steps_per_epoch: steps,
        eval_steps_per_epoch: spf * eval_files / batch_eval / u64::from(world),
        exclude_start_steps: config.output.metric.exclude_start_steps,
        exclude_end_steps: config.output.metric.exclude_end_steps,
        record_length_bytes: config.dataset.record_length_bytes,
        au_threshold: config.metric.au,
        checkpoint_size_bytes: None,
        upstream_throughput: false,
    }
}

/// `dataset.side_files`: each written whole (random bytes) under the data folder.
fn write_side_files(config: &Config, storage: &dyn Storage) -> Result<()> {
    for (i, side) in config.dataset.side_files.iter().enumerate() {
        let path = dataset::data_root(config).join(&side.name);
        if let Some(dir) = path.parent() {
            storage
                .create_dir_all(dir)
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut bytes = vec![0u8; usize::try_from(side.size_bytes).context("side file size")?];
        dlio_format::DataRng::for_file(config.train.seed, 2, i as u64).fill(&mut bytes);
        let mut w = storage
            .create(&path)
            .with_context(|| format!("creating the side file {}", path.display()))?;
        w.write_all(&bytes)
            .and_then(|()| w.commit().map(|_| ()))
            .with_context(|| format!("writing the side file {}", path.display()))?;
    }
    Ok(())
}

/// `dataset.sample_companions`: each `(path, bytes, key)` written whole (random bytes drawn
/// for its data file's key), committed as one file so that an interrupted generation leaves
/// none half-written.
fn write_companions(
    config: &Config,
    storage: &dyn Storage,
    companions: &[(PathBuf, u64, u64)],
) -> Result<()> {
    let mut bytes = Vec::new();
    for (path, size, key) in companions {
        if let Some(dir) = path.parent() {
            storage
                .create_dir_all(dir)
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        bytes.resize(usize::try_from(*size).context("companion size")?, 0);
        dlio_format::DataRng::for_file(config.train.seed, 3, *key).fill(&mut bytes);
        let mut w = storage
            .create(path)
            .with_context(|| format!("creating the companion {}", path.display()))?;
        w.write_all(&bytes)
            .and_then(|()| w.commit().map(|_| ()))
            .with_context(|| format!("writing the companion {}", path.display()))?;
    }
    Ok(())
}

fn generate(
    cluster: &Cluster,
    config: &Config,
    storage: &dyn Storage,
    (format, writers): (&dyn Format, usize),
    log: &RunLog,
    bars: &MultiProgress,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    // Processes generate rank-strided shares of the files (DLIO's layout); threads inside a
    // process share its part.
    let (process, processes) = (u64::from(cluster.process()), u64::from(cluster.processes()));
    let every_file = dataset::generation_files(config, format);
    let data_set_files = every_file.len() as u64;
    let fingerprint = dlio_format::dataset_fingerprint(format, config.train.seed, &every_file);
    let files: Vec<_> = every_file
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i as u64 % processes == process)
        .map(|(_, f)| f)
        .collect();
    let root = dataset::data_root(config);
    // The companions of this process's files, written after the files.
    let companions: Vec<(PathBuf, u64, u64)> =
        dlio_loader::Companions::new(&root, &config.dataset.sample_companions)
            .map(|c| {
                files
                    .iter()
                    .flat_map(|f| {
                        // The file's list and index and the set: the same bytes whichever
                        // process writes it.
                        let key = (u64::from(f.list_id) << 56) ^ (f.file_index << 8);
                        c.of(&f.path)
                            .enumerate()
                            .map(move |(set, (path, bytes))| (path, bytes, key ^ set as u64))
                            .collect::<Vec<_>>()
                    })
                    .collect()
            })
            .unwrap_or_default();
    vouch_for_existing_files(
        cluster,
        storage,
        format,
        log,
        (&root, fingerprint, data_set_files),
        &files,
    )?;
    let total = files.len() as u64;
    log.output(&format!(
        "Generating {} {} files ({} train, {} valid) under {}",
        total,
        format.name(),
        config.dataset.num_files_train,
        config.dataset.num_files_eval,
        dataset::data_root(config).display()
    ));
    // DLIO makes both lists' folders, so a data set without evaluation files still has an
    // empty `valid/` (Python DLIO lists it before training, even with no eval files).
    // Every subfolder too, even those no file falls in (one file over two subfolders), as the
    // listing expects `num_subfolders_*` of them.
    for list in [List::Train, List::Valid] {
        for dir in dataset::generation_dirs(config, list) {
            storage
                .create_dir_all(&dir)
                .with_context(|| format!("creating the data folder {}", dir.display()))?;
        }
    }
    let started = Instant::now();
    let bar = crate::progress::generation_bar(bars, total);
    let report = dlio_format::generate(
        GenerationJob {
            storage,
            format,
            files,
            threads: writers,
            seed: config.train.seed,
        },
        &|p| crate::progress::generation_update(&bar, &p),
        cancel,
    )
    .context("generating the data set")?;
    bar.finish_and_clear();
    if process == 0 {
        write_side_files(config, storage)?;
    }
    write_companions(config, storage, &companions)?;
    let secs = started.elapsed().as_secs_f64();
    log.output(&format!(
        "Generation done: {} files written ({:.1} MiB, {:.1} MiB/s), {} already complete, {} \
         partial files removed, in {:.2} s",
        report.files_written,
        report.bytes_written as f64 / 1048576.0,
        report.bytes_written as f64 / 1048576.0 / secs.max(1e-9),
        report.files_skipped,
        report.partials_removed,
        secs
    ));
    Ok(())
}

/// Bytes of objects a process keeps in flight while generating on object storage.
const OBJECT_BYTES_IN_FLIGHT: u64 = 256 << 20;

/// Generation's writer threads in this process: `reader.write_threads` per rank when it is
/// above 1, as the fork's ranks each run that many. 1 (the fork's "size them for me") is one
/// per core on local storage, where making the bytes and writing them is CPU work; on object
/// storage, where each PUT waits for the server, as many as keep [`OBJECT_BYTES_IN_FLIGHT`]
/// of objects in flight (at least one per core, at most 16: on a 2-core client beside the
/// server, 64 writer threads were slower than 16; an object above one PUT already uploads
/// several parts at once). `DLIO_MAX_AUTO_THREADS` caps that size, as it caps the fork's.
fn generation_threads(config: &Config, format: &dyn Format, local_ranks: u32) -> usize {
    let asked = config.reader.write_threads as usize;
    if asked > 1 {
        return asked.saturating_mul(local_ranks.max(1) as usize);
    }
    let cores = available_cores();
    let auto = if config.storage.storage_type != StorageType::S3 {
        cores
    } else {
        let object = format
            .expected_size(&dlio_trainer::nominal_layout(config))
            .unwrap_or(0)
            .max(1);
        ((OBJECT_BYTES_IN_FLIGHT / object) as usize).clamp(cores, 16)
    };
    match max_auto_threads() {
        Some(cap) => auto.min(cap),
        None => auto,
    }
}

/// `DLIO_MAX_AUTO_THREADS`, the fork's cap on the threads it sizes itself; unset, empty or not
/// a positive integer is no cap.
fn max_auto_threads() -> Option<usize> {
    std::env::var("DLIO_MAX_AUTO_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// A file that exists is kept by generation only when it is what this config writes: its
/// size says so (formats of a fixed size), or the data set's manifest records this config's
/// fingerprint. Otherwise (another config's files, or files no manifest vouches for) the files
/// whose size proves nothing are removed before the manifest is written, so that a generation
/// interrupted after this point resumes safely: every file it finds is then its own.
fn vouch_for_existing_files(
    cluster: &Cluster,
    storage: &dyn Storage,
    format: &dyn Format,
    log: &RunLog,
    (root, fingerprint, data_set_files): (&Path, u64, u64),
    files: &[dlio_format::GenerationFile],
) -> Result<()> {
    let vouched =
        cluster.broadcast(|| dlio_format::read_manifest(storage, root) == Some(fingerprint))?;
    if vouched {
        return Ok(());
    }
    let removed = dlio_format::remove_unverifiable(storage, format, files)
        .context("removing data files another config wrote")?;
    if removed > 0 {
        log.output(&format!(
            "Removed {removed} {} files that no generation manifest of this config vouches for \
             (written by another config or another tool); they are written again",
            format.name()
        ));
    }
    cluster.barrier();
    if cluster.is_root() {
        storage
            .create_dir_all(root)
            .with_context(|| format!("creating the data folder {}", root.display()))?;
        dlio_format::write_manifest(storage, root, fingerprint, data_set_files).with_context(
            || {
                format!(
                    "writing {}",
                    root.join(dlio_format::MANIFEST_NAME).display()
                )
            },
        )?;
    }
    cluster.barrier();
    Ok(())
}

/// Hydra's run files, as Python DLIO leaves them for mlpstorage's report and rules checker:
/// `<hydra.output_subdir>/config.yaml` (the composed workload under `workload:`),
/// `overrides.yaml` (`workload=NAME` first, then the task overrides as typed) and `hydra.yaml`
/// (the `hydra.*` settings); plus our fully resolved config, `dlio_resolved_config.yaml`, in
/// the output folder. Each file appears under its name only when complete; S3 credentials are
/// redacted in all of them.
fn write_hydra_files(out: &Path, loaded: &Loaded) -> Result<()> {
    write_whole(
        &out.join("dlio_resolved_config.yaml"),
        &crate::redact_credentials(&loaded.config.to_yaml()),
    )?;
    let Some(subdir) = &loaded.hydra_output_subdir else {
        return Ok(());
    };
    let dir = out.join(subdir);
    std::fs::create_dir_all(&dir).with_context(|| {
        format!(
            "creating {} (hydra.output_subdir); choose a folder that can be written",
            dir.display()
        )
    })?;
    let mut composed = dlio_config::yaml::Mapping::new();
    composed.insert(
        dlio_config::yaml::Value::String("workload".into()),
        loaded.composed.clone(),
    );
    write_whole(
        &dir.join("config.yaml"),
        &crate::redact_credentials(&dlio_config::to_hydra_yaml(
            &dlio_config::yaml::Value::Mapping(composed),
        )),
    )?;
    let (hydra_words, task_words): (Vec<&String>, Vec<&String>) =
        loaded.overrides.iter().partition(|o| is_hydra_word(o));
    let task: Vec<String> = std::iter::once(format!("workload={}", loaded.workload))
        .chain(task_words.iter().map(|o| crate::redact_override(o)))
        .collect();
    write_whole(&dir.join("overrides.yaml"), &yaml_list(&task, 0))?;
    let hydra_list: Vec<String> = hydra_words.iter().map(|o| o.to_string()).collect();
    let cwd = std::env::current_dir().unwrap_or_default();
    let run_dir = loaded
        .hydra_run_dir
        .clone()
        .unwrap_or_else(|| out.to_path_buf());
    let hydra = format!(
        "hydra:\n  run:\n    dir: {run_dir}\n  output_subdir: {subdir}\n  overrides:\n    hydra:\n{hydra_list}    task:\n{task_list}  job:\n    name: dlio_benchmark\n    chdir: null\n    override_dirname: {dirname}\n    config_name: config\n  runtime:\n    version: {version}\n    cwd: {cwd}\n    config_sources:\n{sources}    output_dir: {output_dir}\n  mode: RUN\n",
        run_dir = quote(&run_dir.display().to_string()),
        subdir = quote(subdir),
        hydra_list = yaml_list(&hydra_list, 4),
        task_list = yaml_list(&task, 4),
        dirname = quote(&task[1..].join(",")),
        version = quote(concat!("dlio ", env!("CARGO_PKG_VERSION"))),
        cwd = quote(&cwd.display().to_string()),
        sources = config_sources(&loaded.source),
        output_dir = quote(&out.display().to_string()),
    );
    write_whole(&dir.join("hydra.yaml"), &hydra)?;
    Ok(())
}

/// True for a Hydra setting (`hydra.run.dir=...`, `++hydra.output_subdir=...`,
/// `hydra/job_logging=...`) rather than a workload override.
fn is_hydra_word(word: &str) -> bool {
    let key = word.trim_start_matches(['+', '~']);
    key.starts_with("hydra.") || key.starts_with("hydra/") || key.starts_with("hydra=")
}

/// A YAML block list of strings at `indent` spaces (`[]` when empty).
fn yaml_list(items: &[String], indent: usize) -> String {
    if items.is_empty() {
        return format!("{}[]\n", " ".repeat(indent));
    }
    items
        .iter()
        .map(|i| format!("{}- {}\n", " ".repeat(indent), quote(i)))
        .collect()
}

fn quote(text: &str) -> String {
    dlio_config::to_hydra_yaml(&dlio_config::yaml::Value::String(text.to_string()))
        .trim_end()
        .to_string()
}

/// Hydra's `runtime.config_sources`: where the workload file was found.
fn config_sources(source: &str) -> String {
    let (path, schema, provider) = if source == dlio_config::BUILTIN_SOURCE {
        ("dlio built-in workloads".to_string(), "pkg", "dlio")
    } else {
        (source.to_string(), "file", "command-line")
    };
    format!(
        "    - path: {}\n      schema: {schema}\n      provider: {provider}\n",
        quote(&path)
    )
}

/// Writes `text` to `path` whole ([`crate::files::write_whole`]).
fn write_whole(path: &Path, text: &str) -> Result<()> {
    crate::files::write_whole(path, text.as_bytes()).with_context(|| {
        format!(
            "writing {}; the run directory must be writable (hydra.run.dir, \
             hydra.output_subdir, output.folder)",
            path.display()
        )
    })
}

/// The bytes of the training files; refuses a file smaller than `floor`, the fewest bytes a
/// complete file can have: such a file was cut short, and reading it (the fork's readers read
/// without looking inside) would measure less data than the config describes.
/// Files whose sizes [`dataset_bytes`] reads at most: a stat of each of ten million files
/// takes half a minute before the run starts, and the memory rule needs no exact byte.
const SIZED_FILES_AT_MOST: usize = 65_536;

/// The data set's bytes and how many files' sizes they come from.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct DatasetSize {
    bytes: u64,
    sized_files: usize,
}

/// The training files' total size (missing files count as empty), from every file's size or,
/// for more than `at_most` files ([`SIZED_FILES_AT_MOST`] in a run), extrapolated from that
/// many spread evenly over the list. Refuses a sized file below `floor` (a truncated file).
fn dataset_bytes(
    storage: &dyn Storage,
    files: &FileList,
    floor: Option<u64>,
    at_most: usize,
) -> Result<DatasetSize> {
    let n = files.len();
    let sized_files = n.min(at_most);
    let mut total = 0u64;
    let mut scratch = dlio_storage::PathScratch::default();
    for k in 0..sized_files {
        // Evenly spread, first file included; distinct indices since sized_files <= n.
        let index = (k as u128 * n as u128 / sized_files as u128) as usize;
        let Some(file) = files.path(index, &mut scratch) else {
            continue;
        };
        let Some(size) = storage.size(file).ok().flatten() else {
            continue;
        };
        refuse_truncated(file, size, floor)?;
        total += size;
    }
    let bytes = if sized_files == n {
        total
    } else {
        (u128::from(total) * n as u128 / sized_files as u128) as u64
    };
    Ok(DatasetSize { bytes, sized_files })
}

/// The training files' bytes from the sizes the listing learnt, without a request per file:
/// every file's from an object store's LIST (a HEAD per object would cost the server as much
/// as a small object's GET, before the run starts), extrapolated from `skip_listing`'s checks
/// of an even spread of files; else from the storage ([`dataset_bytes`]).
fn dataset_size(
    storage: &dyn Storage,
    listing: &dataset::Listing,
    floor: Option<u64>,
) -> Result<DatasetSize> {
    let (mut total, mut sized_files) = (0u64, 0usize);
    match (&listing.sizes, &listing.files) {
        (dataset::KnownSizes::Every(sizes), DataFiles::Ready(files)) => {
            for (index, &size) in sizes.iter().enumerate() {
                if floor.is_some_and(|floor| size < floor) {
                    let path = files.path_buf(index).unwrap_or_default();
                    refuse_truncated(&path, size, floor)?;
                }
                total += size;
                sized_files += 1;
            }
        }
        (dataset::KnownSizes::Summed { total, smallest }, DataFiles::Ready(files)) => {
            if let Some((index, size)) = *smallest {
                let path = files.path_buf(index).unwrap_or_default();
                refuse_truncated(&path, size, floor)?;
            }
            return Ok(DatasetSize {
                bytes: *total,
                sized_files: files.len(),
            });
        }
        (dataset::KnownSizes::Spread(sizes), _) if !sizes.is_empty() => {
            for (path, size) in sizes {
                refuse_truncated(path, *size, floor)?;
                total += size;
                sized_files += 1;
            }
        }
        (_, _) => {
            return match &listing.files {
                DataFiles::Ready(files) => {
                    dataset_bytes(storage, files, floor, SIZED_FILES_AT_MOST)
                }
                DataFiles::Manifest { .. } => Ok(DatasetSize::default()),
            };
        }
    }
    let n = listing.files.len();
    Ok(DatasetSize {
        bytes: (u128::from(total) * n as u128 / sized_files.max(1) as u128) as u64,
        sized_files,
    })
}

/// Refuses `file` of `size` bytes when it is below `floor` ([`dataset_bytes`]).
fn refuse_truncated(file: &Path, size: u64, floor: Option<u64>) -> Result<()> {
    if let Some(floor) = floor
        && size < floor
    {
        bail!(
            "{} is {size} bytes, fewer than the {floor} bytes of samples a complete file of \
             this data set holds (dataset.num_samples_per_file x the sample size): it is \
             truncated; generate the data set again (++workload.workflow.generate_data=True)",
            file.display()
        );
    }
    Ok(())
}

fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A seed for `Shuffle::Random`, different on every run (recorded in summary.json).
fn rand_seed() -> u64 {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod dataset_size_tests {
    use super::*;

    #[test]
    fn sizes_every_file_or_extrapolates_from_an_even_spread() {
        let tmp = tempfile::tempdir().unwrap();
        // Files of 100, 200, ... 1000 bytes; file 9 is missing and counts as empty.
        let paths: Vec<_> = (0..10).map(|i| tmp.path().join(format!("f{i}"))).collect();
        for (i, p) in paths.iter().enumerate().take(9) {
            std::fs::write(p, vec![0u8; 100 * (i + 1)]).unwrap();
        }
        let table: FileList = PathTable::new(&paths).into();
        let storage = dlio_storage::PosixStorage::new();
        let all = dataset_bytes(&storage, &table, None, 64).unwrap();
        assert_eq!((all.bytes, all.sized_files), (4500, 10));
        // Five of ten: files 0, 2, 4, 6, 8 (100 + 300 + 500 + 700 + 900), times two.
        let some = dataset_bytes(&storage, &table, None, 5).unwrap();
        assert_eq!((some.bytes, some.sized_files), (5000, 5));
        // A sized file below the floor is refused by name.
        let err = dataset_bytes(&storage, &table, Some(250), 5).unwrap_err();
        assert!(err.to_string().contains("f0 is 100 bytes"), "{err}");
    }

    #[test]
    fn a_listing_with_sizes_is_sized_without_asking_the_storage() {
        // Paths that do not exist: the storage is never asked.
        let paths: Vec<_> = (0..3).map(|i| format!("/nonexistent/f{i}")).collect();
        let listing = dataset::Listing {
            files: DataFiles::Ready(PathTable::new(&paths).into()),
            sizes: dataset::KnownSizes::Every(vec![300, 400, 500]),
        };
        let storage = dlio_storage::PosixStorage::new();
        let size = dataset_size(&storage, &listing, Some(300)).unwrap();
        assert_eq!((size.bytes, size.sized_files), (1200, 3));
        // Every listed file is checked against the floor, by name.
        let err = dataset_size(&storage, &listing, Some(350)).unwrap_err();
        assert!(err.to_string().contains("f0 is 300 bytes"), "{err}");
        // Sizes of a spread of the files (skip_listing's checks): extrapolated.
        let spread = dataset::Listing {
            files: DataFiles::Ready(PathTable::new(&paths).into()),
            sizes: dataset::KnownSizes::Spread(vec![
                (paths[0].clone().into(), 300),
                (paths[2].clone().into(), 500),
            ]),
        };
        let size = dataset_size(&storage, &spread, Some(300)).unwrap();
        assert_eq!((size.bytes, size.sized_files), (1200, 2));
        let err = dataset_size(&storage, &spread, Some(400)).unwrap_err();
        assert!(err.to_string().contains("f0 is 300 bytes"), "{err}");
        // Sizes summed as a pattern's files were listed: the total, and the smallest refused.
        let summed = dataset::Listing {
            files: DataFiles::Ready(PathTable::new(&paths).into()),
            sizes: dataset::KnownSizes::Summed {
                total: 1200,
                smallest: Some((1, 300)),
            },
        };
        let size = dataset_size(&storage, &summed, Some(300)).unwrap();
        assert_eq!((size.bytes, size.sized_files), (1200, 3));
        let err = dataset_size(&storage, &summed, Some(301)).unwrap_err();
        assert!(err.to_string().contains("f1 is 300 bytes"), "{err}");
        // Without sizes, the storage is asked: missing files count as empty.
        let unsized_listing = dataset::Listing {
            sizes: dataset::KnownSizes::Unknown,
            ..listing
        };
        let size = dataset_size(&storage, &unsized_listing, None).unwrap();
        assert_eq!((size.bytes, size.sized_files), (0, 3));
    }
}
