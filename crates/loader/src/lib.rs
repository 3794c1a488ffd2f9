//! `dlio-loader`: reader threads, bounded prefetch and batching, as framework data loaders do.
//!
//! The loader sits between the plan and the trainer. For every epoch the trainer hands it an
//! [`EpochPlan`](dlio_plan::EpochPlan); the loader's reader threads read the planned samples
//! through a [`Format`](dlio_format::Format) over a [`Storage`](dlio_storage::Storage) and hand
//! finished batches back in step order through bounded queues. The trainer only ever waits on
//! [`EpochBatches::next_batch`].
//!
//! How it maps to the frameworks DLIO drives:
//! - Batch `s` is read by reader thread `s % read_threads` (PyTorch assigns batches to workers
//!   round-robin; tf.data's interleave does the same across its reader threads).
//! - Each thread may run ahead by `ceil(prefetch_size / read_threads)` batches (PyTorch's
//!   `prefetch_factor`), so at most about `prefetch_size + read_threads` batches are in flight.
//! - `read_threads: 0` reads on the trainer's own thread when it asks for the batch: no overlap
//!   of I/O with compute, as a PyTorch `DataLoader` with `num_workers=0`.
//! - `read_ahead: false` (ours) keeps the reader threads but reads a batch only when the trainer
//!   asks for it, its samples spread over all of them: a thread pool mapped over each batch, as
//!   training scripts without a framework loader do.
//! - `read_type: on_demand` opens, reads and closes the file for every sample (the whole file for
//!   npz/npy); `memory` keeps files open until the epoch ends; the iterative (tf.data) sampler
//!   opens a file once and closes it when the thread moves to the next file.
//! - `preprocess_time` is slept per sample inside the reader thread, so it parallelises over
//!   reader threads as it does in DLIO.
//!
//! Reader threads live for the whole run (persistent workers) and keep their format readers and
//! buffers, so steady state allocates nothing per sample. Batches carry counts, not data: like
//! DLIO, which hands the training loop a pre-allocated array, the emulated step never looks at
//! the bytes. Every byte is still read from storage, and counted by the
//! [`Metered`](dlio_storage::Metered) storage the loader is given.

#![deny(missing_docs)]

mod companion;
mod error;
mod priority;
mod reader;
mod sleep;
mod stop;
mod stream;
mod window;

pub use companion::Companions;
pub use error::LoaderError;
pub use priority::precise_timers;
pub use sleep::TimeSampler;
pub use stop::{CompensatedSleep, StopCause, StopSignal, Stopped};
pub use stream::StreamOptions;

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use dlio_config::{ReadType, Sampler, TimeDistribution};
use dlio_format::Format;
use dlio_metrics::LatencyHistogram;
use dlio_plan::EpochPlan;
pub use dlio_storage::FileList;
use dlio_storage::Storage;

use reader::SampleReader;

/// How a loader reads; built from the `reader` section of the config.
#[derive(Debug, Clone)]
pub struct LoaderSpec {
    /// `reader.read_threads`: the threads this loader starts (0 reads on the caller's thread).
    /// Which thread reads each step is the plan's to say ([`EpochPlan::worker_for_step`]); an
    /// epoch planned over another count is refused.
    pub read_threads: u32,
    /// `reader.prefetch_size`, in batches; 0 means the frameworks' default (2 per thread).
    pub prefetch_size: u32,
    /// `reader.read_ahead`: false reads each batch only when the step asks for it, its
    /// samples spread over the reader threads (sample `i` of the batch by thread `i %
    /// read_threads`), so that no read overlaps compute.
    pub read_ahead: bool,
    /// `reader.spread_batches` (ours), with `read_ahead`: every batch's samples are spread
    /// over the reader threads as without read-ahead, and `prefetch_size` batches beyond the
    /// one the step waits for are asked for in advance (a pool mapped over each batch that
    /// runs ahead: tf.data's parallel `map` before `batch` and `prefetch`).
    pub spread_batches: bool,
    /// `reader.read_type`.
    pub read_type: ReadType,
    /// Index (PyTorch/DALI) or iterative (tf.data) sampling; decides the open/close pattern.
    pub sampler: Sampler,
    /// `reader.preprocess_time`, spent per sample in the reader thread.
    pub preprocess_time: TimeDistribution,
    /// `reader.preprocess_work`: sleep through it, or keep the reader's core busy.
    pub preprocess_work: dlio_config::PreprocessWork,
    /// `reader.batch_time`, slept per batch in the reader thread before handing it over.
    pub batch_time: TimeDistribution,
    /// `reader.open_time`, spent in the reader thread each time it opens a file.
    pub open_time: TimeDistribution,
    /// Seed for the preprocess-time draws of this rank.
    pub seed: u64,
    /// The dataset's nominal file layout (formats that read nothing, like `synthetic`, hand out
    /// samples of this size).
    pub layout: dlio_format::FileLayout,
    /// The rank's trace: reader threads record `data.item` and `data.preprocess` spans
    /// (disabled by default).
    pub tracer: dlio_trace::Tracer,
    /// Bytes of the sample handed to the training loop, when the workload sets it
    /// (`dataset.record_length_bytes_resize`, `reader.transformed_record_dims`): each sample is
    /// then copied (cut or zero-padded) into the batch buffer of the thread that finishes it (a
    /// reader thread, or a parse thread of the tf.data TFRecord pipeline), as a framework's
    /// collate or parse step copies the transformed sample into the batch tensor. `None`: the
    /// batch refers to the samples as read.
    pub sample_out_bytes: Option<usize>,
    /// Whole-object reads each reader thread keeps in flight when the format decodes nothing
    /// and the storage reads in the background (object storage): the fork's
    /// `prefetch_window` and in-flight limit. 0 reads in the foreground, one sample at a
    /// time per thread.
    pub object_window: u32,
    /// Reader thread `i` waits `i` times this before its first read of each epoch (the
    /// fork's `stagger_workers`: the mean computation time). Zero: no stagger.
    pub stagger: std::time::Duration,
    /// Reader thread `i` begins its first read `i` times this after the epoch's start, in
    /// the first epoch and, with `start_interval_every_epoch`, in every one (ours:
    /// `reader.worker_start_interval`, a framework forking its worker processes one after
    /// another). Zero: all begin at once.
    pub start_interval: std::time::Duration,
    /// The readers start again in every epoch (`reader.epoch_start_time` above 0), so the
    /// start interval holds in every epoch.
    pub start_interval_every_epoch: bool,
    /// How long after the trainer takes a reader's finished batch that reader may begin its
    /// next one (`reader.request_delay`). Zero: at once.
    pub request_delay: std::time::Duration,
    /// `dataset.sample_companions`: each sample's reader reads its file's companions whole
    /// before the sample (object windows and runs of samples read in one call are then off:
    /// every sample is read on its own). `None`: no companions.
    pub companions: Option<std::sync::Arc<Companions>>,
}

/// One batch as the trainer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadedBatch {
    /// 0-based step within the epoch.
    pub step: u64,
    /// Samples in the batch.
    pub samples: u64,
    /// Bytes of sample data handed out (what the format decoded, not what storage moved).
    pub sample_bytes: u64,
}

/// What one epoch's reading cost, summed over reader threads.
#[derive(Debug, Default)]
pub struct EpochReadStats {
    /// Latency of each sample read (open + read + close as the read type dictates, without
    /// the preprocess sleep).
    pub sample_read: LatencyHistogram,
    /// Samples read.
    pub samples: u64,
}

struct EpochWork {
    plan: Arc<EpochPlan>,
    files: FileList,
    worker: u32,
    out: SyncSender<Result<LoadedBatch, LoaderError>>,
    /// Without read-ahead: the steps to read a share of, as the trainer asks for them.
    demand: Option<Receiver<u64>>,
    stats: Arc<Mutex<EpochReadStats>>,
    /// Signalled once the thread has left the epoch and merged its stats.
    done: mpsc::Sender<()>,
}

/// A rank's data loader: persistent reader threads plus the per-epoch queues.
pub struct Loader {
    spec: LoaderSpec,
    storage: Arc<dyn Storage>,
    format: Arc<dyn Format>,
    stop: Arc<StopSignal>,
    workers: Vec<(SyncSender<EpochWork>, JoinHandle<()>)>,
    inline: Option<SampleReader>,
    stream_options: StreamOptions,
}

impl Loader {
    /// Starts `spec.read_threads` reader threads for one rank.
    pub fn new(
        spec: LoaderSpec,
        storage: Arc<dyn Storage>,
        format: Arc<dyn Format>,
        stop: Arc<StopSignal>,
    ) -> Result<Loader, LoaderError> {
        let preprocess = TimeSampler::new("reader.preprocess_time", &spec.preprocess_time)
            .map_err(LoaderError::Setting)?;
        let batch_time = TimeSampler::new("reader.batch_time", &spec.batch_time)
            .map_err(LoaderError::Setting)?;
        let open_time =
            TimeSampler::new("reader.open_time", &spec.open_time).map_err(LoaderError::Setting)?;
        let work = reader::LoaderWork::new(spec.preprocess_work);
        let mut workers = Vec::new();
        // One reader per thread (the inline reader when there is none), from the format at
        // once, so that they may share what they fetched.
        let mut readers = format
            .readers(&spec.layout, spec.read_threads.max(1) as usize)
            .into_iter();
        let mut next_reader = || {
            readers
                .next()
                .unwrap_or_else(|| format.reader(&spec.layout))
        };
        for w in 0..spec.read_threads {
            let (tx, rx) = mpsc::sync_channel::<EpochWork>(1);
            let seed = spec.seed ^ (u64::from(w + 1) << 40);
            let mut reader = SampleReader::new(
                &spec,
                &*format,
                next_reader(),
                (
                    [preprocess.clone(), batch_time.clone(), open_time.clone()],
                    work.clone(),
                ),
                seed,
                w,
                Arc::clone(&stop),
            );
            let storage = Arc::clone(&storage);
            // Readers that run ahead yield to the rank threads waking from compute; readers
            // that read on demand are what the rank waits for, so they keep its priority.
            let lower = spec.read_ahead;
            let handle = std::thread::Builder::new()
                .name(format!("dlio-reader-{w}"))
                .spawn(move || {
                    if lower {
                        priority::lower_this_thread();
                    }
                    while let Ok(work) = rx.recv() {
                        reader.run_epoch(&*storage, work);
                    }
                })
                .map_err(|e| LoaderError::Spawn { source: e })?;
            workers.push((tx, handle));
        }
        let inline = (spec.read_threads == 0).then(|| {
            SampleReader::new(
                &spec,
                &*format,
                next_reader(),
                (
                    [preprocess.clone(), batch_time.clone(), open_time.clone()],
                    work.clone(),
                ),
                spec.seed,
                0,
                Arc::clone(&stop),
            )
        });
        Ok(Loader {
            spec,
            storage,
            format,
            stop,
            workers,
            inline,
            stream_options: StreamOptions::default(),
        })
    }

    /// Sets the tf.data TFRecord pipeline's settings (transfer size, shuffle buffer, parse
    /// threads), used for plans of [`Sampler::FileShards`](dlio_config::Sampler::FileShards).
    /// Without this call the defaults apply (256 KiB requests, no shuffle, 1 parse thread).
    pub fn set_stream_options(&mut self, options: StreamOptions) {
        self.stream_options = options;
    }

    /// The format this loader reads.
    pub fn format(&self) -> &dyn Format {
        &*self.format
    }

    /// Starts reading one epoch (or evaluation pass) of `plan` over `files`.
    ///
    /// Plans of [`Sampler::FileShards`](dlio_config::Sampler::FileShards) run the tf.data
    /// TFRecord pipeline (streamed files, interleave, shuffle buffer, parse threads) instead of
    /// the per-batch reader threads.
    pub fn start_epoch(&mut self, plan: EpochPlan, files: FileList) -> EpochBatches<'_> {
        if let Some(shape) = plan.stream() {
            let prefetch = if self.spec.prefetch_size == 0 {
                2
            } else {
                self.spec.prefetch_size as usize
            };
            let stream = stream::StreamEpoch::start(
                &plan,
                shape,
                files.clone(),
                Arc::clone(&self.storage),
                &self.stream_options,
                stream::Output {
                    prefetch,
                    sample_out_bytes: self.spec.sample_out_bytes,
                },
                Arc::clone(&self.stop),
            );
            let (_done, finished) = mpsc::channel();
            return EpochBatches {
                loader: self,
                plan: Arc::new(plan),
                files,
                queues: Vec::new(),
                demand: Vec::new(),
                ahead: 0,
                asked: 0,
                next_step: 0,
                stats: Arc::new(Mutex::new(EpochReadStats::default())),
                finished,
                stream: Some(stream),
                refused: None,
            };
        }
        let plan = Arc::new(plan);
        let stats = Arc::new(Mutex::new(EpochReadStats::default()));
        let threads = self.spec.read_threads;
        // The plan decides which thread reads each step; it must spread them over the threads
        // this loader started (0 threads: the one inline reader).
        let refused = (plan.reader_threads() != threads.max(1)).then(|| {
            LoaderError::Setting(format!(
                "the epoch's plan spreads its steps over {} reader threads but the loader \
                 started {threads} (plan and loader must take reader.read_threads from one \
                 config)",
                plan.reader_threads()
            ))
        });
        if refused.is_some() {
            let (_done, finished) = mpsc::channel();
            return EpochBatches {
                loader: self,
                plan,
                files,
                queues: Vec::new(),
                demand: Vec::new(),
                ahead: 0,
                asked: 0,
                next_step: 0,
                stats,
                finished,
                stream: None,
                refused,
            };
        }
        let mut queues = Vec::new();
        let mut demand = Vec::new();
        let (done, finished) = mpsc::channel();
        // Spread batches read ahead: every thread has a share of each batch asked for ahead.
        let spread_ahead = self.spec.read_ahead && self.spec.spread_batches;
        if threads > 0 {
            let per_thread = if spread_ahead {
                // Every batch has a share from every thread: a thread's queue holds its share
                // of each batch asked for ahead.
                self.spec.prefetch_size.max(1) as usize
            } else if self.spec.prefetch_size == 0 {
                2
            } else {
                self.spec.prefetch_size.div_ceil(threads) as usize
            };
            for (w, (tx, _)) in self.workers.iter().enumerate() {
                let (out, rx) = mpsc::sync_channel(per_thread.max(1));
                let asks = if self.spec.read_ahead && !spread_ahead {
                    None
                } else {
                    let (ask, asks) = mpsc::channel();
                    demand.push(ask);
                    Some(asks)
                };
                let work = EpochWork {
                    plan: Arc::clone(&plan),
                    files: files.clone(),
                    worker: w as u32,
                    out,
                    demand: asks,
                    stats: Arc::clone(&stats),
                    done: done.clone(),
                };
                // A reader thread that died has already reported its error; the queue then
                // reports it as disconnected.
                let _ = tx.send(work);
                queues.push(rx);
            }
        }
        let ahead = if spread_ahead {
            u64::from(self.spec.prefetch_size)
        } else {
            0
        };
        EpochBatches {
            loader: self,
            plan,
            files,
            queues,
            demand,
            ahead,
            asked: 0,
            next_step: 0,
            stats,
            finished,
            stream: None,
            refused: None,
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        let workers = std::mem::take(&mut self.workers);
        for (tx, handle) in workers {
            drop(tx);
            let _ = handle.join();
        }
    }
}

/// The batches of one epoch, in step order.
pub struct EpochBatches<'a> {
    loader: &'a mut Loader,
    plan: Arc<EpochPlan>,
    files: FileList,
    queues: Vec<Receiver<Result<LoadedBatch, LoaderError>>>,
    /// Without read-ahead (or with spread batches): one sender per reader thread, asking for
    /// its share of a step.
    demand: Vec<mpsc::Sender<u64>>,
    /// Spread batches asked for beyond the one the step waits for.
    ahead: u64,
    /// Steps asked for so far (each asked once, in order).
    asked: u64,
    next_step: u64,
    stats: Arc<Mutex<EpochReadStats>>,
    finished: Receiver<()>,
    stream: Option<stream::StreamEpoch>,
    /// Why the epoch cannot be read (a plan spread over other reader threads than the loader
    /// started), reported by the first `next_batch`.
    refused: Option<LoaderError>,
}

impl EpochBatches<'_> {
    /// Steps in this epoch.
    pub fn steps(&self) -> u64 {
        self.plan.steps()
    }

    /// Waits for the next batch; `None` after the last step.
    pub fn next_batch(&mut self) -> Option<Result<LoadedBatch, LoaderError>> {
        if let Some(refused) = self.refused.take() {
            self.next_step = self.plan.steps();
            return Some(Err(refused));
        }
        if self.next_step >= self.plan.steps() {
            return None;
        }
        if self.loader.stop.is_stopped() {
            return Some(Err(LoaderError::Interrupted));
        }
        let step = self.next_step;
        self.next_step += 1;
        if let Some(stream) = self.stream.as_mut() {
            let result = stream.batch(step);
            if let Ok(b) = &result {
                lock(&self.stats).samples += b.samples;
            }
            return Some(result);
        }
        if let Some(reader) = self.loader.inline.as_mut() {
            // Only this thread uses the stats of an inline reader: the latencies go straight
            // into them (a histogram per batch would cost its allocation and a merge).
            let mut stats = lock(&self.stats);
            let result = reader.read_batch(
                &*self.loader.storage,
                &self.plan,
                &self.files,
                step,
                (0, 1),
                &mut stats.sample_read,
            );
            if let Ok(b) = &result {
                stats.samples += b.samples;
            }
            return Some(result);
        }
        if !self.demand.is_empty() {
            return Some(self.batch_on_demand(step));
        }
        Some(self.receive(self.plan.worker_for_step(step) as usize))
    }

    /// The next result of reader thread `worker`.
    fn receive(&self, worker: usize) -> Result<LoadedBatch, LoaderError> {
        match self.queues[worker].recv() {
            Ok(result) => result,
            Err(_) => Err(if self.loader.stop.is_stopped() {
                LoaderError::Interrupted
            } else {
                LoaderError::ReaderGone {
                    worker: worker as u32,
                }
            }),
        }
    }

    /// Spread batches: asks every reader thread for its share of `step` (and of the `ahead`
    /// steps after it, each once) and waits for all shares of `step`.
    fn batch_on_demand(&mut self, step: u64) -> Result<LoadedBatch, LoaderError> {
        let through = (step + 1 + self.ahead).min(self.plan.steps());
        while self.asked < through {
            for ask in &self.demand {
                // A thread that is gone shows as a disconnected queue below.
                let _ = ask.send(self.asked);
            }
            self.asked += 1;
        }
        let mut batch = LoadedBatch {
            step,
            samples: 0,
            sample_bytes: 0,
        };
        let mut first_error = None;
        for worker in 0..self.queues.len() {
            match self.receive(worker) {
                Ok(part) => {
                    batch.samples += part.samples;
                    batch.sample_bytes += part.sample_bytes;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(batch), Err)
    }

    /// Ends the epoch: stops the reader threads' work on it and returns what reading cost.
    pub fn finish(mut self) -> EpochReadStats {
        if let Some(stream) = self.stream.take() {
            let mut read = stream.finish();
            read.samples = lock(&self.stats).samples;
            return read;
        }
        // Dropping the queues makes reader threads that are still ahead stop sending (and the
        // demand senders those waiting for a step stop waiting).
        self.demand.clear();
        self.queues.clear();
        if let Some(reader) = self.loader.inline.as_mut() {
            reader.end_epoch();
        }
        // Wait until every reader thread has left this epoch. A thread that died dropped its
        // sender, which ends the wait as well.
        while self.finished.recv().is_ok() {}
        std::mem::take(&mut *lock(&self.stats))
    }
}

/// The collate step of a framework's data loader, for workloads that resize samples: copies
/// `sample`, cut or zero-padded to `out` bytes, into slot `slot` of `batch` (grown as needed and
/// reused, never shrunk) and returns the bytes handed to the loop (`out`).
fn collate(batch: &mut Vec<u8>, slot: usize, out: usize, sample: &[u8]) -> usize {
    let start = slot * out;
    if batch.len() < start + out {
        batch.resize(start + out, 0);
    }
    let n = sample.len().min(out);
    batch[start..start + n].copy_from_slice(&sample[..n]);
    batch[start + n..start + out].fill(0);
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::collate;

    #[test]
    fn collate_cuts_pads_and_clears_what_a_reused_slot_held() {
        let mut batch = Vec::new();
        // Slot 1 first: slot 0's bytes exist (zeros) and stay untouched.
        assert_eq!(collate(&mut batch, 1, 4, &[1, 2, 3, 4, 5, 6]), 4);
        assert_eq!(batch, [0, 0, 0, 0, 1, 2, 3, 4]);
        // A short sample is zero-padded.
        assert_eq!(collate(&mut batch, 0, 4, &[9, 8]), 4);
        assert_eq!(batch, [9, 8, 0, 0, 1, 2, 3, 4]);
        // Reusing slot 1 for a shorter sample clears what the longer one left.
        assert_eq!(collate(&mut batch, 1, 4, &[7]), 4);
        assert_eq!(batch, [9, 8, 0, 0, 7, 0, 0, 0]);
        // The batch never shrinks.
        collate(&mut batch, 0, 4, &[]);
        assert_eq!(batch, [0, 0, 0, 0, 7, 0, 0, 0]);
    }
}
