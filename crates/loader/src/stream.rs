//! The tf.data TFRecord pipeline ([`Sampler::FileShards`](dlio_config::Sampler::FileShards)),
//! as DLIO's TF reader builds it: `TFRecordDataset(files, buffer_size=transfer_size,
//! num_parallel_reads=read_threads)`, then `shuffle(shuffle_size)`, `shard` (when there are
//! fewer files than ranks), `batch(drop_remainder)`, `map(parse, computation_threads)` and
//! `prefetch`.
//!
//! Threads of one epoch:
//! - `cycle` (= `read_threads`) file readers: reader `t` streams the rank's files `t, t +
//!   cycle, ...` front to back in `transfer_size` requests ([`RecordStream`]), checking both
//!   CRCs of every record. A file that enters the stream is read to its end.
//! - one assembler: takes records from the files of one group of `cycle` files at a time,
//!   one from each in turn (the interleave), passes them through the shuffle buffer, keeps every
//!   `P`-th one when the rank shards records, and cuts batches.
//! - `computation_threads` parsers: decode each record's `tf.train.Example` (the `image`
//!   bytes), the work of tf.data's `map`, and, when the workload resizes samples
//!   (`record_length_bytes_resize`, `transformed_record_dims`), copy each image, cut or
//!   zero-padded to that size, into the parser's batch buffer, as DLIO's parse function hands
//!   the step the resized array.
//!
//! Batches reach the trainer in step order through a bounded queue of `prefetch_size`
//! batches. Every byte goes through the storage the loader was given, so `Metered` counts it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use dlio_config::{Config, Shuffle};
use dlio_format::{FormatError, RecordStream, decode_tfrecord_image};
use dlio_metrics::LatencyHistogram;
use dlio_plan::{EpochPlan, RecordStreamPlan};
use dlio_storage::Storage;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{EpochReadStats, FileList, LoadedBatch, LoaderError, StopSignal, collate, lock};

/// Settings of the tf.data TFRecord pipeline, from the `reader` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOptions {
    /// `reader.transfer_size`: bytes per read request (0: tf.data's 256 KiB).
    pub transfer_size: usize,
    /// `reader.shuffle_size`: records in the shuffle buffer.
    pub shuffle_size: u64,
    /// `reader.sample_shuffle`: off, or shuffle with a seed.
    pub sample_shuffle: Shuffle,
    /// The shuffle seed: `train.seed` for `seed`, the run's random seed for `random`. tf.data
    /// takes it once, so every epoch shuffles the same way (as DLIO).
    pub seed: u64,
    /// `reader.computation_threads`: parse workers (0 counts as 1).
    pub computation_threads: u32,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            transfer_size: 0,
            shuffle_size: 1024,
            sample_shuffle: Shuffle::Off,
            seed: 123,
            computation_threads: 1,
        }
    }
}

impl StreamOptions {
    /// The options `config` sets; `random_seed` is the run's seed for `Shuffle::Random`.
    pub fn from_config(config: &Config, random_seed: u64) -> StreamOptions {
        let r = &config.reader;
        StreamOptions {
            transfer_size: r
                .transfer_size
                .map_or(0, |t| usize::try_from(t).unwrap_or(usize::MAX)),
            shuffle_size: r.shuffle_size,
            sample_shuffle: r.sample_shuffle,
            seed: match r.sample_shuffle {
                Shuffle::Random => random_seed,
                _ => config.train.seed,
            },
            computation_threads: r.computation_threads,
        }
    }
}

/// What a file reader hands the assembler.
enum FromReader {
    /// File number, record offset in it, payload.
    Record(u64, u64, Vec<u8>),
    FileEnd,
    Failed(LoaderError),
}

/// A record with where it came from: (file number, offset in the file, payload).
type Tagged = (u64, u64, Vec<u8>);

/// How the pipeline hands batches to the loop.
pub(crate) struct Output {
    /// Batches the queue to the loop holds (`prefetch`).
    pub(crate) prefetch: usize,
    /// Bytes of each sample handed to the loop when samples are resized (see `LoaderSpec`).
    pub(crate) sample_out_bytes: Option<usize>,
}

/// One running epoch of the pipeline.
pub(crate) struct StreamEpoch {
    batches: Receiver<(u64, Result<LoadedBatch, LoaderError>)>,
    pending: BTreeMap<u64, Result<LoadedBatch, LoaderError>>,
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<EpochReadStats>>,
}

impl StreamEpoch {
    pub(crate) fn start(
        plan: &EpochPlan,
        shape: RecordStreamPlan,
        files: FileList,
        storage: Arc<dyn Storage>,
        options: &StreamOptions,
        output: Output,
        cancel: Arc<StopSignal>,
    ) -> StreamEpoch {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(EpochReadStats::default()));
        let cycle = shape.cycle().min(shape.files()).max(1) as usize;
        let mut threads = Vec::new();
        let mut commands = Vec::new();
        let mut records = Vec::new();
        for _ in 0..cycle {
            let (command_tx, command_rx) = sync_channel::<u64>(1);
            let (record_tx, record_rx) = sync_channel::<FromReader>(16);
            commands.push(command_tx);
            records.push(record_rx);
            let storage = Arc::clone(&storage);
            let files = Arc::clone(&files);
            let stop = Arc::clone(&stop);
            let stats = Arc::clone(&stats);
            let transfer = options.transfer_size;
            threads.push(std::thread::spawn(move || {
                read_files(
                    &*storage, &files, transfer, command_rx, record_tx, &stop, &stats,
                );
            }));
        }
        let parsers = options.computation_threads.max(1) as usize;
        let (work_tx, work_rx) = sync_channel::<(u64, Vec<Tagged>)>(parsers);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (out_tx, out_rx) = sync_channel(output.prefetch.max(1));
        for _ in 0..parsers {
            let work_rx = Arc::clone(&work_rx);
            let out_tx = out_tx.clone();
            let files = Arc::clone(&files);
            let sample_out_bytes = output.sample_out_bytes;
            threads.push(std::thread::spawn(move || {
                parse_batches(&work_rx, &out_tx, &files, sample_out_bytes)
            }));
        }
        let assembler = Assembler {
            shape,
            files: Arc::clone(&files),
            steps: plan.steps(),
            batch_size: plan.batch(0).len().max(1),
            options: options.clone(),
            epoch_records: shape.records(),
        };
        let stop_assembler = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || {
            assembler.run(commands, records, work_tx, out_tx, &stop_assembler, &cancel);
        }));
        StreamEpoch {
            batches: out_rx,
            pending: BTreeMap::new(),
            threads,
            stop,
            stats,
        }
    }

    /// Batch `step`, waiting for it.
    pub(crate) fn batch(&mut self, step: u64) -> Result<LoadedBatch, LoaderError> {
        loop {
            if let Some(result) = self.pending.remove(&step) {
                return result;
            }
            match self.batches.recv() {
                Ok((_, Err(e))) => return Err(e),
                Ok((s, ok)) => {
                    self.pending.insert(s, ok);
                }
                Err(_) => return Err(LoaderError::ReaderGone { worker: 0 }),
            }
        }
    }

    /// Stops the pipeline and returns what it read.
    pub(crate) fn finish(self) -> EpochReadStats {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.batches);
        for t in self.threads {
            let _ = t.join();
        }
        std::mem::take(&mut *lock(&self.stats))
    }
}

/// A file reader: streams each file it is told to, to its end.
fn read_files(
    storage: &dyn Storage,
    files: &FileList,
    transfer: usize,
    commands: Receiver<u64>,
    out: SyncSender<FromReader>,
    stop: &AtomicBool,
    stats: &Mutex<EpochReadStats>,
) {
    let mut hist = LatencyHistogram::new();
    'files: while let Ok(file) = commands.recv() {
        let Some(path) = files.get(file as usize) else {
            let _ = out.send(FromReader::Failed(LoaderError::NoSuchFile {
                file,
                len: files.len(),
            }));
            break;
        };
        let fail = |source: FormatError, index: u64| LoaderError::Read {
            path: path.to_path_buf(),
            index,
            source: Box::new(source),
        };
        let mut started = Instant::now();
        let mut stream = match RecordStream::open(storage, path, transfer) {
            Ok(s) => s,
            Err(e) => {
                let _ = out.send(FromReader::Failed(fail(e, 0)));
                break;
            }
        };
        let mut index = 0u64;
        loop {
            if stop.load(Ordering::Relaxed) {
                break 'files;
            }
            match stream.next_record() {
                Ok(Some((offset, payload))) => {
                    hist.record_duration(started.elapsed());
                    if out
                        .send(FromReader::Record(file, offset, payload.to_vec()))
                        .is_err()
                    {
                        break 'files;
                    }
                    index += 1;
                    started = Instant::now();
                }
                Ok(None) => {
                    if out.send(FromReader::FileEnd).is_err() {
                        break 'files;
                    }
                    break;
                }
                Err(e) => {
                    let _ = out.send(FromReader::Failed(fail(e, index)));
                    break 'files;
                }
            }
        }
    }
    lock(stats).sample_read.merge(&hist);
}

/// Decodes the Examples of each batch (tf.data's `map(parse)`), resizing the samples when
/// `sample_out_bytes` says so.
fn parse_batches(
    work: &Mutex<Receiver<(u64, Vec<Tagged>)>>,
    out: &SyncSender<(u64, Result<LoadedBatch, LoaderError>)>,
    files: &FileList,
    sample_out_bytes: Option<usize>,
) {
    let mut image = Vec::new();
    // The resized samples of the batch being parsed; allocated once, reused.
    let mut batch = Vec::new();
    loop {
        let next = lock(work).recv();
        let Ok((step, records)) = next else { return };
        let mut sample_bytes = 0u64;
        let mut result = Ok(());
        for (slot, (file, offset, record)) in records.iter().enumerate() {
            let path = files.get(*file as usize).unwrap_or(Path::new(""));
            match decode_tfrecord_image(path, *offset, record, &mut image) {
                Ok(()) => {
                    let len = match sample_out_bytes {
                        None => image.len(),
                        Some(size) => collate(&mut batch, slot, size, &image),
                    };
                    sample_bytes += len as u64;
                }
                Err(source) => {
                    result = Err(LoaderError::Read {
                        path: path.to_path_buf(),
                        index: 0,
                        source: Box::new(source),
                    });
                    break;
                }
            }
        }
        let batch = result.map(|()| LoadedBatch {
            step,
            samples: records.len() as u64,
            sample_bytes,
        });
        if out.send((step, batch)).is_err() {
            return;
        }
    }
}

struct Assembler {
    shape: RecordStreamPlan,
    files: FileList,
    steps: u64,
    batch_size: usize,
    options: StreamOptions,
    epoch_records: u64,
}

impl Assembler {
    fn run(
        self,
        commands: Vec<SyncSender<u64>>,
        readers: Vec<Receiver<FromReader>>,
        work: SyncSender<(u64, Vec<Tagged>)>,
        out: SyncSender<(u64, Result<LoadedBatch, LoaderError>)>,
        stop: &AtomicBool,
        cancel: &StopSignal,
    ) {
        let cycle = readers.len().max(1) as u64;
        let (keep_step, keep_phase) = self.shape.keep_every();
        let shuffle = self.options.sample_shuffle != Shuffle::Off;
        let buffer_size = if shuffle {
            self.options.shuffle_size.max(1) as usize
        } else {
            1
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.options.seed);
        let mut buffer: Vec<Tagged> = Vec::with_capacity(buffer_size);
        let mut position = 0u64; // records out of the shuffle buffer
        let mut kept = 0u64;
        let mut step = 0u64;
        let mut batch: Vec<Tagged> = Vec::with_capacity(self.batch_size);
        let done = |kept: u64, step: u64| kept >= self.epoch_records || step >= self.steps;
        let emit = |record: Tagged,
                    position: &mut u64,
                    kept: &mut u64,
                    step: &mut u64,
                    batch: &mut Vec<Tagged>|
         -> bool {
            let keep = *position % keep_step == keep_phase;
            *position += 1;
            if !keep || done(*kept, *step) {
                return true;
            }
            *kept += 1;
            batch.push(record);
            if batch.len() == self.batch_size || *kept == self.epoch_records {
                let full = std::mem::replace(batch, Vec::with_capacity(self.batch_size));
                if work.send((*step, full)).is_err() {
                    return false;
                }
                *step += 1;
            }
            true
        };
        let files = self.shape.files();
        let groups = files.div_ceil(cycle);
        'groups: for group in 0..groups {
            if done(kept, step) {
                break;
            }
            let first = group * cycle;
            let in_group = cycle.min(files - first) as usize;
            for (t, command) in commands.iter().enumerate().take(in_group) {
                let file = self.shape.file(first + t as u64);
                if command.send(file).is_err() {
                    break 'groups;
                }
            }
            let mut active: Vec<usize> = (0..in_group).collect();
            while !active.is_empty() {
                if stop.load(Ordering::Relaxed) || cancel.is_stopped() {
                    return;
                }
                let mut i = 0;
                while i < active.len() {
                    let t = active[i];
                    match readers[t].recv() {
                        Ok(FromReader::Record(file, offset, payload)) => {
                            let record = (file, offset, payload);
                            i += 1;
                            if done(kept, step) {
                                continue; // drain: a file in the stream is read to its end
                            }
                            let record = if shuffle {
                                if buffer.len() < buffer_size {
                                    buffer.push(record);
                                    continue;
                                }
                                let pick = rng.random_range(0..buffer.len());
                                std::mem::replace(&mut buffer[pick], record)
                            } else {
                                record
                            };
                            if !emit(record, &mut position, &mut kept, &mut step, &mut batch) {
                                return;
                            }
                        }
                        Ok(FromReader::FileEnd) => {
                            active.remove(i);
                        }
                        Ok(FromReader::Failed(e)) => {
                            let _ = out.send((step, Err(e)));
                            return;
                        }
                        Err(_) => {
                            let _ =
                                out.send((step, Err(LoaderError::ReaderGone { worker: t as u32 })));
                            return;
                        }
                    }
                }
            }
        }
        // The end of the stream: drain the shuffle buffer in random order.
        while !buffer.is_empty() && !done(kept, step) {
            let pick = rng.random_range(0..buffer.len());
            let record = buffer.swap_remove(pick);
            if !emit(record, &mut position, &mut kept, &mut step, &mut batch) {
                return;
            }
        }
        if !batch.is_empty() && step < self.steps {
            let _ = work.send((step, std::mem::take(&mut batch)));
            step += 1;
        }
        if step < self.steps {
            let _ = out.send((
                step,
                Err(LoaderError::Setting(format!(
                    "the record stream of this rank ended after {step} of {} steps: its files \
                     ({}) hold fewer records than dataset.num_samples_per_file says; check the \
                     files or generate the data set again",
                    self.steps,
                    self.files.len()
                ))),
            ));
        }
    }
}
