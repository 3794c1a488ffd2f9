//! One reader thread's work: read the samples of the batches it owns, in order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dlio_config::{ReadType, Sampler};
use dlio_format::{FileKey, Format, FormatReader};
use dlio_metrics::LatencyHistogram;
use dlio_plan::EpochPlan;
use dlio_storage::{PathScratch, Storage};
use dlio_trace::{PreparedSpan, Tracer, ai};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rustc_hash::FxHashSet;

use crate::{
    CompensatedSleep, EpochWork, FileList, LoadedBatch, LoaderError, LoaderSpec, StopSignal,
    TimeSampler, collate, lock,
};

/// A format reader plus the open/close policy of the configured loader.
pub(crate) struct SampleReader {
    reader: Box<dyn FormatReader>,
    /// The epoch the reader was last told of ([`FormatReader::begin_epoch`]).
    epoch: Option<u32>,
    pub(crate) policy: OpenPolicy,
    /// Files open under `read_type: memory`, closed at the end of the epoch.
    open: FxHashSet<FileKey>,
    /// The file the iterative sampler has open.
    current: Option<FileKey>,
    preprocess: TimeSampler,
    /// The preprocess sleeps, kept to their drawn length on average.
    preprocess_sleep: CompensatedSleep,
    /// `reader.preprocess_work`: how the preprocess, batch and open times are spent.
    work: LoaderWork,
    /// `reader.batch_time`, slept after each batch's samples are read.
    batch_time: TimeSampler,
    /// The batch-time sleeps, kept to their drawn length on average.
    batch_sleep: CompensatedSleep,
    /// `reader.open_time`, spent after each opening of a file other than the one this
    /// reader opened last (a sample of the same file opened again costs no parse).
    open_time: TimeSampler,
    open_sleep: CompensatedSleep,
    last_opened: Option<FileKey>,
    rng: Xoshiro256PlusPlus,
    /// Records `data.item` / `data.preprocess` spans.
    tracer: Tracer,
    /// `data.item` with its `epoch` and `image_idx` keys, looked up once.
    item_span: PreparedSpan<2>,
    /// `data.preprocess`, recorded after each sample; `None` for the synthetic format.
    preprocess_span: Option<PreparedSpan<2>>,
    /// Size of each sample handed to the loop, when resized (see `LoaderSpec`).
    pub(crate) sample_out_bytes: Option<usize>,
    /// The batch the resized samples are copied into; allocated once, reused.
    pub(crate) batch: Vec<u8>,
    /// Background whole-object reads kept in flight (`LoaderSpec::object_window`); 0 when
    /// the format decodes, or the loader reads in the foreground.
    pub(crate) window: usize,
    /// Samples per file of the data set.
    pub(crate) samples_per_file: u32,
    /// How long this thread waits before its first read of an epoch (`LoaderSpec::stagger`
    /// times its index).
    stagger: std::time::Duration,
    /// How much later than the first thread this one begins an epoch
    /// (`LoaderSpec::start_interval` times its index), in the first epoch, or in every one
    /// with `start_every_epoch`.
    start_delay: std::time::Duration,
    start_every_epoch: bool,
    /// How long after the trainer takes this thread's finished batch it may begin its next
    /// (`LoaderSpec::request_delay`), and the sleeps that keep to it on average.
    request_delay: Duration,
    request_sleep: CompensatedSleep,
    /// The storage turned out to have no background reads: read in the foreground.
    window_unsupported: bool,
    /// Ends the stagger and preprocess sleeps and the epoch's loop when the run stops.
    pub(crate) stop: Arc<StopSignal>,
    /// Each data file's companions, read before each of its samples, and the buffer they are
    /// read into (reused).
    companions: Option<Arc<crate::Companions>>,
    companion_buf: Vec<u8>,
}

/// How a rank's reader threads spend their drawn loader times (`reader.preprocess_work`).
#[derive(Debug, Clone)]
pub(crate) enum LoaderWork {
    /// Asleep, kept to its length on average.
    Sleep,
    /// Busy on the thread's core.
    Busy,
    /// Busy on the thread's core while holding the rank's interpreter lock, which its
    /// reader threads share: one of them works at a time.
    BusyInTurn(Arc<std::sync::Mutex<()>>),
}

impl LoaderWork {
    /// The work `preprocess_work` names, with a lock of its own for [`LoaderWork::BusyInTurn`]
    /// (one loader, one rank, one lock).
    pub(crate) fn new(work: dlio_config::PreprocessWork) -> LoaderWork {
        match work {
            dlio_config::PreprocessWork::Sleep => LoaderWork::Sleep,
            dlio_config::PreprocessWork::Cpu => LoaderWork::Busy,
            dlio_config::PreprocessWork::Gil => LoaderWork::BusyInTurn(Arc::default()),
        }
    }
}

/// Spends a drawn loader time `d` as `work` says, a sleep kept to its length on average by
/// `sleep`. A stop ends it early; the epoch loop then sees it.
fn spend(stop: &StopSignal, work: &LoaderWork, sleep: &mut CompensatedSleep, d: Duration) {
    let _ = match work {
        LoaderWork::Sleep => sleep.sleep(stop, d),
        LoaderWork::Busy => stop.busy(d),
        LoaderWork::BusyInTurn(lock) => {
            // A thread that panicked while holding the lock held nothing but its turn.
            let _turn = lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            stop.busy(d)
        }
    };
}

/// Sends a read-ahead batch to the trainer; `false` when the trainer is gone. Where every
/// slot was full, the send waited for the trainer to take a batch, and the thread then waits
/// `delay` more before it reads on, as a PyTorch worker gets its next index only once the
/// training process has unpickled the batch it took. A stop ends the wait early.
fn hand_over(
    out: &std::sync::mpsc::SyncSender<Result<LoadedBatch, LoaderError>>,
    result: Result<LoadedBatch, LoaderError>,
    delay: Duration,
    sleep: &mut CompensatedSleep,
    stop: &StopSignal,
) -> bool {
    match out.try_send(result) {
        Ok(()) => true,
        Err(std::sync::mpsc::TrySendError::Disconnected(_)) => false,
        Err(std::sync::mpsc::TrySendError::Full(result)) => {
            let sent = out.send(result).is_ok();
            if sent && !delay.is_zero() {
                let _ = sleep.sleep(stop, delay);
            }
            sent
        }
    }
}

/// The path of file `file` of the list, or the error that the list has no such file.
fn path_of<'a>(
    files: &'a FileList,
    file: u64,
    scratch: &'a mut PathScratch,
) -> Result<&'a std::path::Path, LoaderError> {
    files
        .path(file as usize, scratch)
        .ok_or(LoaderError::NoSuchFile {
            file,
            len: files.len(),
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenPolicy {
    /// Open, read, close for every sample.
    PerSample,
    /// Keep every opened file until the epoch ends.
    KeepOpen,
    /// Keep one file open until a sample of another file is needed.
    Sequential,
}

impl SampleReader {
    pub(crate) fn new(
        spec: &LoaderSpec,
        format: &dyn Format,
        reader: Box<dyn dlio_format::FormatReader>,
        ([preprocess, batch_time, open_time], work): ([TimeSampler; 3], LoaderWork),
        seed: u64,
        worker: u32,
        stop: Arc<StopSignal>,
    ) -> SampleReader {
        let policy = match (spec.sampler, spec.read_type) {
            // File shards never reach the reader threads (the stream pipeline reads them); a
            // file-shards plan read sample by sample would open each file once.
            (Sampler::Iterative | Sampler::FileShards, _) => OpenPolicy::Sequential,
            // A format whose DLIO reader maps its files once keeps them whatever the read type.
            (Sampler::Index, _) if format.keeps_files_open() => OpenPolicy::KeepOpen,
            (Sampler::Index, ReadType::OnDemand) => OpenPolicy::PerSample,
            (Sampler::Index, ReadType::Memory) => OpenPolicy::KeepOpen,
        };
        SampleReader {
            reader,
            epoch: None,
            policy,
            open: FxHashSet::default(),
            current: None,
            preprocess,
            preprocess_sleep: CompensatedSleep::default(),
            work,
            batch_time,
            batch_sleep: CompensatedSleep::default(),
            open_time,
            open_sleep: CompensatedSleep::default(),
            last_opened: None,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            tracer: spec.tracer.clone(),
            item_span: PreparedSpan::new(ai::DATA_ITEM, ["epoch", "image_idx"]),
            // DLIO's readers run their `preprocess` for every sample, sleeping
            // `preprocess_time` (0 by default); its synthetic reader has none.
            preprocess_span: (format.name() != "synthetic")
                .then(|| PreparedSpan::new(ai::DATA_PREPROCESS, ["epoch", "image_idx"])),
            sample_out_bytes: spec.sample_out_bytes,
            batch: Vec::new(),
            window: if format.reads_whole_files_undecoded() && spec.companions.is_none() {
                spec.object_window as usize
            } else {
                0
            },
            samples_per_file: spec.layout.samples,
            stagger: spec.stagger * worker,
            start_delay: spec.start_interval * worker,
            start_every_epoch: spec.start_interval_every_epoch,
            request_delay: spec.request_delay,
            request_sleep: CompensatedSleep::default(),
            window_unsupported: false,
            stop,
            companions: spec.companions.clone(),
            companion_buf: Vec::new(),
        }
    }

    /// Reads every batch of `work.plan` that belongs to `work.worker`, sending each in order.
    pub(crate) fn run_epoch(&mut self, storage: &dyn Storage, work: EpochWork) {
        let EpochWork {
            plan,
            files,
            worker,
            out,
            demand,
            stats,
            done,
        } = work;
        let mut hist = LatencyHistogram::new();
        let mut samples = 0;
        // The plan says which thread reads which step: this one reads every
        // `reader_threads`-th, from its own number.
        let threads = u64::from(plan.reader_threads());
        let mut step = u64::from(worker);
        self.stagger_start(plan.epoch());
        if let Some(asks) = demand {
            // Without read-ahead: this thread's share of each step, when the trainer asks.
            while let Ok(asked) = asks.recv() {
                if self.stop.is_stopped() {
                    break;
                }
                let share = (u64::from(worker), threads);
                let result = self.read_batch(storage, &plan, &files, asked, share, &mut hist);
                let failed = result.is_err();
                if let Ok(b) = &result {
                    samples += b.samples;
                }
                if out.send(result).is_err() || failed {
                    break;
                }
            }
            step = plan.steps();
        } else if self.window > 0 && !self.window_unsupported {
            let (delay, stop) = (self.request_delay, Arc::clone(&self.stop));
            let mut request_sleep = CompensatedSleep::default();
            let mut send = |result: Result<LoadedBatch, LoaderError>| {
                if let Ok(b) = &result {
                    samples += b.samples;
                }
                hand_over(&out, result, delay, &mut request_sleep, &stop)
            };
            let windowed = self.run_epoch_windowed(
                storage,
                &plan,
                &files,
                u64::from(worker),
                &mut send,
                &mut hist,
            );
            if windowed {
                // Nothing is left for the foreground loop.
                step = plan.steps();
            } else {
                self.window_unsupported = true;
            }
        }
        while step < plan.steps() {
            if self.stop.is_stopped() {
                break;
            }
            let result = self.read_batch(storage, &plan, &files, step, (0, 1), &mut hist);
            let failed = result.is_err();
            if let Ok(b) = &result {
                samples += b.samples;
            }
            let delay = self.request_delay;
            if !hand_over(&out, result, delay, &mut self.request_sleep, &self.stop) || failed {
                break;
            }
            step += threads;
        }
        self.end_epoch();
        {
            let mut s = lock(&stats);
            s.sample_read.merge(&hist);
            s.samples += samples;
        }
        let _ = done.send(());
    }

    /// Reads the samples of batch `step`, or with `share` `(i, n)` the `i`-th of every `n` of
    /// them (`(0, 1)`: all), then spends the batch's time (`reader.batch_time`).
    pub(crate) fn read_batch(
        &mut self,
        storage: &dyn Storage,
        plan: &EpochPlan,
        files: &FileList,
        step: u64,
        share: (u64, u64),
        hist: &mut LatencyHistogram,
    ) -> Result<LoadedBatch, LoaderError> {
        let batch = self.read_batch_samples(storage, plan, files, step, share, hist)?;
        self.batch_done();
        Ok(batch)
    }

    /// The reads of [`read_batch`](Self::read_batch).
    fn read_batch_samples(
        &mut self,
        storage: &dyn Storage,
        plan: &EpochPlan,
        files: &FileList,
        step: u64,
        share: (u64, u64),
        hist: &mut LatencyHistogram,
    ) -> Result<LoadedBatch, LoaderError> {
        let mut samples = 0;
        let mut sample_bytes = 0;
        if self.epoch != Some(plan.epoch()) {
            self.epoch = Some(plan.epoch());
            self.reader.begin_epoch(plan.epoch());
        }
        let (index, of) = (share.0, share.1.max(1));
        if of == 1 && self.reads_runs() {
            return self.read_batch_in_runs(storage, plan, files, step, hist);
        }
        let mine = plan
            .batch(step)
            .enumerate()
            .filter(|(i, _)| *i as u64 % of == index)
            .map(|(_, sample)| sample);
        // A sample's read starts where the previous one's ended when nothing (a preprocess
        // sleep) came between them: one clock reading per sample instead of two.
        let mut next_start = None;
        let mut scratch = PathScratch::default();
        for sample in mine {
            let path = path_of(files, sample.file, &mut scratch)?;
            let started = next_start.take().unwrap_or_else(Instant::now);
            let key = sample.file;
            let fail = |source| LoaderError::Read {
                path: path.to_path_buf(),
                index: sample.index_in_file,
                source: Box::new(source),
            };
            if let Some(companions) = &self.companions {
                companions.read_for(
                    storage,
                    path,
                    sample.index_in_file,
                    &mut self.companion_buf,
                )?;
            }
            self.open_for(storage, key, path).map_err(fail)?;
            let index = u32::try_from(sample.index_in_file).map_err(|_| LoaderError::Read {
                path: path.to_path_buf(),
                index: sample.index_in_file,
                source: Box::new(dlio_format::FormatError::SampleOutOfRange {
                    path: path.to_path_buf(),
                    index: sample.index_in_file,
                    samples: u64::from(u32::MAX),
                }),
            })?;
            let data = self.reader.read_sample(storage, key, index).map_err(fail)?;
            let len = match self.sample_out_bytes {
                None => data.len(),
                Some(out) => collate(&mut self.batch, samples as usize, out, data),
            };
            if self.policy == OpenPolicy::PerSample {
                self.reader.close(key);
            }
            next_start = self.sample_done(started, hist, plan.epoch(), sample.global);
            samples += 1;
            sample_bytes += len as u64;
        }
        Ok(LoadedBatch {
            step,
            samples,
            sample_bytes,
        })
    }

    /// Whether a batch's runs of consecutive samples of one file may be read in one call each:
    /// the format reads runs with the same I/O, and nothing is done per sample besides the
    /// read (no trace spans, no preprocess time, no copy into a batch buffer), so a run's one
    /// latency, shared by its samples, is all the per-sample figures need.
    fn reads_runs(&self) -> bool {
        self.reader.reads_runs()
            && self.companions.is_none()
            && self.sample_out_bytes.is_none()
            && !self.tracer.is_enabled()
            && self.preprocess.is_zero()
    }

    /// [`read_batch`](Self::read_batch) of a whole batch, its runs of consecutive samples of one
    /// file read in one call each ([`FormatReader::read_run`]): one open, one lookup per unit
    /// and two clock readings per run, each sample's latency the run's mean (as the fork's
    /// iterable parquet reader times a row group, not a row).
    fn read_batch_in_runs(
        &mut self,
        storage: &dyn Storage,
        plan: &EpochPlan,
        files: &FileList,
        step: u64,
        hist: &mut LatencyHistogram,
    ) -> Result<LoadedBatch, LoaderError> {
        let (mut samples, mut sample_bytes) = (0u64, 0u64);
        let mut batch = plan.batch(step).peekable();
        let mut scratch = PathScratch::default();
        while let Some(first) = batch.next() {
            let mut count: u32 = 1;
            while let Some(next) = batch.peek() {
                if next.file != first.file
                    || next.index_in_file != first.index_in_file + u64::from(count)
                    || count == u32::MAX
                {
                    break;
                }
                batch.next();
                count += 1;
            }
            let path = path_of(files, first.file, &mut scratch)?;
            let fail = |source| LoaderError::Read {
                path: path.to_path_buf(),
                index: first.index_in_file,
                source: Box::new(source),
            };
            let index = u32::try_from(first.index_in_file).map_err(|_| {
                fail(dlio_format::FormatError::SampleOutOfRange {
                    path: path.to_path_buf(),
                    index: first.index_in_file,
                    samples: u64::from(u32::MAX),
                })
            })?;
            let started = Instant::now();
            let key = first.file;
            self.open_for(storage, key, path).map_err(fail)?;
            let bytes = self
                .reader
                .read_run(storage, key, index, count)
                .map_err(fail)?;
            if self.policy == OpenPolicy::PerSample {
                self.reader.close(key);
            }
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            hist.record_n(took / u64::from(count), u64::from(count));
            samples += u64::from(count);
            sample_bytes += bytes;
        }
        Ok(LoadedBatch {
            step,
            samples,
            sample_bytes,
        })
    }

    /// Opens file `key` as the open policy wants it for its next sample.
    fn open_for(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &std::path::Path,
    ) -> Result<(), dlio_format::FormatError> {
        let opened = match self.policy {
            OpenPolicy::PerSample => {
                self.reader.open(storage, key, path)?;
                true
            }
            OpenPolicy::KeepOpen => {
                let new = !self.open.contains(&key);
                if new {
                    self.reader.open(storage, key, path)?;
                    self.open.insert(key);
                }
                new
            }
            OpenPolicy::Sequential => {
                let new = self.current != Some(key);
                if new {
                    if let Some(old) = self.current.take() {
                        self.reader.close(old);
                    }
                    self.reader.open(storage, key, path)?;
                    self.current = Some(key);
                }
                new
            }
        };
        let another = self.last_opened.replace(key) != Some(key);
        if opened
            && another
            && let Some(d) = self.open_time.draw(&mut self.rng)
        {
            spend(&self.stop, &self.work, &mut self.open_sleep, d);
        }
        Ok(())
    }

    /// Ends the read of sample `global` that started at `started`: its latency into `hist`,
    /// its `data.item` span (timed by the same two clock readings, two fewer per sample than
    /// a span guard of its own), then the preprocess sleep. Returns when the read ended if
    /// no sleep followed it, for the next read to start from.
    pub(crate) fn sample_done(
        &mut self,
        started: Instant,
        hist: &mut LatencyHistogram,
        epoch: u32,
        global: u64,
    ) -> Option<Instant> {
        let took = started.elapsed();
        hist.record_duration(took);
        self.tracer.complete_prepared(
            &self.item_span,
            started,
            took,
            [i64::from(epoch), global as i64],
        );
        let read_end = started + took;
        (!self.preprocess_sleep(epoch, global, read_end)).then_some(read_end)
    }

    /// A batch's own time once its samples are read (collating them, handing the batch over),
    /// slept: `reader.batch_time`.
    pub(crate) fn batch_done(&mut self) {
        if let Some(d) = self.batch_time.draw(&mut self.rng) {
            spend(&self.stop, &self.work, &mut self.batch_sleep, d);
        }
    }

    /// The fork's `stagger_workers`: thread `i` waits `i` times the mean computation time
    /// before its first read of the epoch, so the threads' reads do not all start at once;
    /// and `reader.worker_start_interval`'s delay, where the readers start in `epoch`.
    fn stagger_start(&self, epoch: u32) {
        let start = if epoch <= 1 || self.start_every_epoch {
            self.start_delay
        } else {
            std::time::Duration::ZERO
        };
        // A stop ends the wait; the epoch loop then sees it.
        let _ = self.stop.sleep(self.stagger + start);
    }

    /// The preprocess sleep of sample `global`, whose read ended at `read_end`, and its span
    /// (of no length, and no clock reading, when there is nothing to sleep).
    /// Whether it slept.
    fn preprocess_sleep(&mut self, epoch: u32, global: u64, read_end: Instant) -> bool {
        let slept = match self.preprocess.draw(&mut self.rng) {
            Some(d) => {
                spend(&self.stop, &self.work, &mut self.preprocess_sleep, d);
                read_end.elapsed()
            }
            None => Duration::ZERO,
        };
        if let Some(span) = &self.preprocess_span {
            self.tracer
                .complete_prepared(span, read_end, slept, [i64::from(epoch), global as i64]);
        }
        slept > Duration::ZERO
    }

    /// Closes whatever the epoch left open.
    pub(crate) fn end_epoch(&mut self) {
        for key in self.open.drain() {
            self.reader.close(key);
        }
        if let Some(key) = self.current.take() {
            self.reader.close(key);
        }
    }
}
