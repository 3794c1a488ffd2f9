//! The tf.data TFRecord pipeline ([`Sampler::FileShards`](dlio_config::Sampler::FileShards)),
//! as DLIO's TF reader builds it: `TFRecordDataset(files, buffer_size=transfer_size,
//! num_parallel_reads=read_threads)`, then `shuffle(shuffle_size)`, `shard` (when there are
//! fewer files than ranks), `batch(drop_remainder)`, `map(parse, computation_threads)` and
//! `prefetch`.
//!
//! Threads of one epoch:
//! - `cycle` (= `read_threads`) streams of files: stream `t` reads the rank's files `t, t +
//!   cycle, ...` front to back in `transfer_size` requests ([`RecordStream`]), checking the
//!   framing of every record (and its data CRC when `reader.tfrecord_check_crc` says so). A
//!   file that enters the stream is read to its end. Who does the reads depends on the engine:
//!   - where a read can tell that it would wait for the device (POSIX's buffered reads,
//!     [`Capabilities::nowait_reads`]), the assembler reads every stream itself while the
//!     page cache holds the bytes, and a helper thread per stream does the reads that would
//!     wait, up to `cycle` of them in flight ([`InlineStreams`]). Nothing is handed between
//!     threads on warm data, so more `read_threads` hardly cost more CPU per sample (9% with 8
//!     against 1, 22% with reader threads); the assembler gives way every
//!     [`SHARE_CPU_AFTER`] so that ranks sharing the cores progress evenly;
//!   - else a reader thread per stream reads each file as one stream of requests, the
//!     engine's `io_depth` of them in flight ([`RecordStream::for_each_record`]), and hands
//!     records to the assembler in chunks of up to [`CHUNK_RECORDS`] ([`chunk_records`]), so
//!     a hand-off (a wake-up) is paid per chunk, not per record, and the readers of a rank run
//!     ahead by a bounded number of records whatever their number.
//! - one assembler: takes records from the files of one group of `cycle` files at a time,
//!   one from each in turn (the interleave), passes them through the shuffle buffer, keeps every
//!   `P`-th one when the rank shards records, and cuts batches.
//! - Under upstream's semantics (`decode`), each record's payload is copied out of the
//!   stream, and `computation_threads` parsers decode each `tf.train.Example` (the `image`
//!   bytes), the work of tf.data's `map`, and, when the workload resizes samples
//!   (`record_length_bytes_resize`, `transformed_record_dims`), copy each image, cut or
//!   zero-padded to that size, into the parser's batch buffer, as DLIO's parse function hands
//!   the step the resized array.
//! - Under the MLPerf Storage fork's (the default), the fork's parse returns one dummy tensor
//!   per batch whatever the records hold, so nothing is copied: each record's `Example` is
//!   walked where the stream read it ([`find_tfrecord_image`], which checks it as a parse
//!   would), and only where it came from and its image's length go on; the assembler passes
//!   full batches (counts and byte totals) straight to the queue, and no parse thread runs.
//!   Bytes move once, from the engine into the stream's window (O_DIRECT engines read into
//!   aligned buffers first, and a request that completes ahead of its turn waits in a copy).
//!
//! Batches reach the trainer in step order through a bounded queue of `prefetch_size`
//! batches. Every byte goes through the storage the loader was given, so `Metered` counts it.
//!
//! [`Capabilities::nowait_reads`]: dlio_storage::Capabilities::nowait_reads

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dlio_config::{Config, Shuffle};
use dlio_format::{
    FormatError, NextRecord, RecordStream, StreamBuffers, decode_tfrecord_image,
    find_tfrecord_image,
};
use dlio_metrics::LatencyHistogram;
use dlio_plan::{EpochPlan, RecordStreamPlan};
use dlio_storage::{PathScratch, Storage};
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
    /// `reader.computation_threads`: parse workers (0 counts as 1), when decoding.
    pub computation_threads: u32,
    /// Copy and decode every record (upstream DLIO) instead of walking it in place (the fork).
    pub decode: bool,
    /// Check every record's data CRC.
    pub check_data_crc: bool,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            transfer_size: 0,
            shuffle_size: 1024,
            sample_shuffle: Shuffle::Off,
            seed: 123,
            computation_threads: 1,
            decode: true,
            check_data_crc: true,
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
            decode: config.semantics.decodes(),
            check_data_crc: config.tfrecord_check_crc(),
        }
    }
}

/// Records a reader hands the assembler at once (at most; a file's last chunk may be shorter).
const CHUNK_RECORDS: usize = 8;

/// Records all readers of a rank hand over at once, together: a reader's chunk is this many
/// records shared by the `cycle` readers (at least 1, at most [`CHUNK_RECORDS`]), so that how far
/// the readers run ahead of the interleave does not grow with `read_threads`. What they read
/// ahead at an epoch's start delays every rank's first batch, when all ranks start together.
const RANK_CHUNK_RECORDS: usize = 16;

/// The records a reader hands over at once when `cycle` readers share the rank's interleave.
/// Small chunks cost hand-offs (a wake-up of the reader or the assembler each): with 8 readers
/// (2 records a chunk) a rank spends about 8% more CPU per sample than with chunks of 8. Fewer
/// wake-ups were tried and cost AU at capacity instead (resnet50_h100, 24 ranks): chunks of 8
/// after each epoch's first batch (88-93% against 93%), and records handed over one at a time
/// with a reader woken only when half of its 24 records of look-ahead were taken (86-90%
/// against 87-93%). Readers that run in longer bursts leave some of the ranks that share the
/// cores behind, and the step barrier waits for the last: the small chunks stay.
fn chunk_records(cycle: usize) -> usize {
    (RANK_CHUNK_RECORDS / cycle.max(1)).clamp(1, CHUNK_RECORDS)
}

/// Chunks a reader may have waiting for the assembler: with the chunk being filled, a reader
/// is at most three chunks ahead of the interleave (24 records for one reader, 6 each for 8).
const CHUNKS_AHEAD: usize = 2;

/// What a file reader hands the assembler.
enum FromReader {
    /// Records of the current file, in file order; `true` when they end the file.
    Records(Vec<Tagged>, bool),
    Failed(LoaderError),
}

/// A record with where it came from.
struct Tagged {
    file: u64,
    /// Offset of the record in the file.
    offset: u64,
    /// Bytes of the record's `image`.
    image_len: u64,
    /// The record's payload (a serialized `Example`), copied out only to be decoded.
    payload: Option<Vec<u8>>,
}

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
        let read = ReadOptions {
            chunk_records: chunk_records(cycle),
            transfer: options.transfer_size,
            decode: options.decode,
            check_data_crc: options.check_data_crc,
        };
        let feeds = if storage.capabilities().nowait_reads {
            Feeds::Inline(InlineStreams::new(
                Arc::clone(&storage),
                files.clone(),
                read,
                cycle,
                Arc::clone(&stats),
            ))
        } else {
            let (feeds, readers) =
                Feeds::spawn_readers(cycle, read, &storage, &files, &stop, &stats);
            threads.extend(readers);
            feeds
        };
        let parsers = if options.decode {
            options.computation_threads.max(1) as usize
        } else {
            0
        };
        let (work_tx, work_rx) = sync_channel::<(u64, Vec<Tagged>)>(parsers.max(1));
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (out_tx, out_rx) = sync_channel(output.prefetch.max(1));
        for _ in 0..parsers {
            let work_rx = Arc::clone(&work_rx);
            let out_tx = out_tx.clone();
            let files = files.clone();
            let sample_out_bytes = output.sample_out_bytes;
            threads.push(std::thread::spawn(move || {
                crate::priority::lower_this_thread();
                parse_batches(&work_rx, &out_tx, &files, sample_out_bytes)
            }));
        }
        let assembler = Assembler {
            shape,
            files: files.clone(),
            steps: plan.steps(),
            batch_size: plan.batch(0).len().max(1),
            options: options.clone(),
            epoch_records: shape.records(),
        };
        let stop_assembler = Arc::clone(&stop);
        // Without parsers, the assembler hands counted batches straight to the queue.
        let work = options.decode.then_some(work_tx);
        threads.push(std::thread::spawn(move || {
            crate::priority::lower_this_thread();
            assembler.run(feeds, work, out_tx, &stop_assembler, &cancel);
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

/// How a file reader reads.
#[derive(Debug, Clone, Copy)]
struct ReadOptions {
    /// Records per hand-over ([`chunk_records`]).
    chunk_records: usize,
    transfer: usize,
    decode: bool,
    check_data_crc: bool,
}

/// A file reader: streams each file it is told to, to its end, with up to the engine's
/// `io_depth` requests in flight where it overlaps them ([`RecordStream::for_each_record`]).
fn read_files(
    storage: &dyn Storage,
    files: &FileList,
    read: ReadOptions,
    commands: Receiver<u64>,
    out: SyncSender<FromReader>,
    stop: &AtomicBool,
    stats: &Mutex<EpochReadStats>,
) {
    let capabilities = storage.capabilities();
    let depth = match capabilities.batched {
        true => capabilities.io_depth.max(1) as usize,
        false => 1,
    };
    let mut hist = LatencyHistogram::new();
    // One set of stream buffers for every file of the epoch ([`RecordStream::reuse_buffers`]).
    let mut buffers = StreamBuffers::default();
    let mut scratch = PathScratch::default();
    while let Ok(file) = commands.recv() {
        let Some(path) = files.path(file as usize, &mut scratch) else {
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
        let mut stream = match RecordStream::open(storage, path, read.transfer) {
            Ok(s) => s
                .check_data_crc(read.check_data_crc)
                .reuse_buffers(std::mem::take(&mut buffers)),
            Err(e) => {
                let _ = out.send(FromReader::Failed(fail(e, 0)));
                break;
            }
        };
        let mut index = 0u64;
        let mut chunk = Vec::with_capacity(read.chunk_records);
        // Set when the pipeline is being torn down: the reader stops.
        let mut gone = false;
        let mut started = Instant::now();
        let streamed = stream.for_each_record(depth, &mut |offset, payload| {
            if stop.load(Ordering::Relaxed) {
                gone = true;
                return Ok(false);
            }
            chunk.push(tagged(path, file, offset, payload, read.decode)?);
            hist.record_duration(started.elapsed());
            index += 1;
            if chunk.len() == read.chunk_records {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(read.chunk_records));
                if out.send(FromReader::Records(full, false)).is_err() {
                    gone = true;
                    return Ok(false);
                }
            }
            started = Instant::now();
            Ok(true)
        });
        if gone {
            break;
        }
        if let Err(e) = streamed {
            let _ = out.send(FromReader::Failed(fail(e, index)));
            break;
        }
        if out.send(FromReader::Records(chunk, true)).is_err() {
            break;
        }
        buffers = stream.into_buffers();
    }
    lock(stats).sample_read.merge(&hist);
}

/// The record at `offset` of `file` as the assembler takes it: its payload copied out to be
/// decoded, or (not decoding) its Example walked where it lies for the image's length.
fn tagged(
    path: &Path,
    file: u64,
    offset: u64,
    payload: &[u8],
    decode: bool,
) -> Result<Tagged, FormatError> {
    if decode {
        Ok(Tagged {
            file,
            offset,
            image_len: 0,
            payload: Some(payload.to_vec()),
        })
    } else {
        find_tfrecord_image(path, offset, payload).map(|image| Tagged {
            file,
            offset,
            image_len: image.len() as u64,
            payload: None,
        })
    }
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
    let mut scratch = PathScratch::default();
    loop {
        let next = lock(work).recv();
        let Ok((step, records)) = next else { return };
        let mut sample_bytes = 0u64;
        let mut result = Ok(());
        for (slot, record) in records.iter().enumerate() {
            let path = files
                .path(record.file as usize, &mut scratch)
                .unwrap_or(Path::new(""));
            let payload = record.payload.as_deref().unwrap_or_default();
            match decode_tfrecord_image(path, record.offset, payload, &mut image) {
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

/// The records one reader has handed over and the assembler has not taken yet.
struct ReaderFeed {
    from: Receiver<FromReader>,
    waiting: VecDeque<Tagged>,
    /// The waiting records end the reader's current file.
    file_ends: bool,
}

impl ReaderFeed {
    /// The next record of the reader's current file, or `None` when that file has ended.
    fn next(&mut self, reader: usize) -> Result<Option<Tagged>, LoaderError> {
        loop {
            if let Some(record) = self.waiting.pop_front() {
                return Ok(Some(record));
            }
            if self.file_ends {
                self.file_ends = false;
                return Ok(None);
            }
            match self.from.recv() {
                Ok(FromReader::Records(records, last)) => {
                    self.waiting.extend(records);
                    self.file_ends = last;
                }
                Ok(FromReader::Failed(e)) => return Err(e),
                Err(_) => {
                    return Err(LoaderError::ReaderGone {
                        worker: reader as u32,
                    });
                }
            }
        }
    }
}

/// Where the assembler takes the records of its `cycle` streams from.
enum Feeds {
    /// A reader thread per stream ([`read_files`]), for engines whose reads always may wait.
    Readers {
        commands: Vec<SyncSender<u64>>,
        feeds: Vec<ReaderFeed>,
    },
    /// The assembler reads the streams itself ([`InlineStreams`]).
    Inline(InlineStreams),
}

impl Feeds {
    /// A reader thread per stream ([`read_files`]), and their threads.
    fn spawn_readers(
        cycle: usize,
        read: ReadOptions,
        storage: &Arc<dyn Storage>,
        files: &FileList,
        stop: &Arc<AtomicBool>,
        stats: &Arc<Mutex<EpochReadStats>>,
    ) -> (Feeds, Vec<JoinHandle<()>>) {
        let mut commands = Vec::new();
        let mut feeds = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..cycle {
            let (command_tx, command_rx) = sync_channel::<u64>(1);
            let (record_tx, record_rx) = sync_channel::<FromReader>(CHUNKS_AHEAD);
            commands.push(command_tx);
            feeds.push(ReaderFeed {
                from: record_rx,
                waiting: VecDeque::with_capacity(CHUNK_RECORDS),
                file_ends: false,
            });
            let storage = Arc::clone(storage);
            let files = files.clone();
            let stop = Arc::clone(stop);
            let stats = Arc::clone(stats);
            threads.push(std::thread::spawn(move || {
                crate::priority::lower_this_thread();
                read_files(
                    &*storage, &files, read, command_rx, record_tx, &stop, &stats,
                );
            }));
        }
        (Feeds::Readers { commands, feeds }, threads)
    }

    /// Starts streaming `file` as stream `t`; `false` when its reader has gone (the pipeline
    /// is being torn down).
    fn start(&mut self, t: usize, file: u64) -> Result<bool, LoaderError> {
        match self {
            Feeds::Readers { commands, .. } => Ok(commands[t].send(file).is_ok()),
            Feeds::Inline(streams) => streams.start(t, file).map(|()| true),
        }
    }

    /// The next record of stream `t`'s file, or `None` when it has ended; `active` are the
    /// streams whose files have not ended.
    fn next(&mut self, t: usize, active: &[usize]) -> Result<Option<Tagged>, LoaderError> {
        match self {
            Feeds::Readers { feeds, .. } => feeds[t].next(t),
            Feeds::Inline(streams) => streams.next(t, active),
        }
    }
}

/// The `cycle` streams of a rank read by the assembler's own thread, for engines that can
/// tell a read that would wait for the device ([`Capabilities::nowait_reads`]): while the page
/// cache holds the bytes, records are cut where the read put them and nothing is handed
/// between threads. A read that would wait goes to the stream's helper thread (started on
/// the first such read), and so does the next read of every other stream that would wait,
/// so that up to `cycle` reads are in flight, as with a reader thread per stream; the
/// assembler takes each stream back when it needs its next record.
///
/// The I/O pattern is that of reader threads (files streamed front to back in
/// `transfer_size` requests, `cycle` files interleaved), and the hand-offs happen only where
/// the device is waited for anyway. Reader threads cost a rank 22% more CPU per sample with 8
/// of them than with 1 on warm data; read this way, 9% (resnet50_h100, bench/HISTORY.md).
///
/// [`Capabilities::nowait_reads`]: dlio_storage::Capabilities::nowait_reads
struct InlineStreams {
    storage: Arc<dyn Storage>,
    files: FileList,
    read: ReadOptions,
    slots: Vec<InlineSlot>,
    hist: LatencyHistogram,
    stats: Arc<Mutex<EpochReadStats>>,
    /// When the assembler last gave way ([`SHARE_CPU_AFTER`]).
    last_yield: Instant,
}

/// One stream of [`InlineStreams`].
#[derive(Default)]
struct InlineSlot {
    file: u64,
    /// The file being streamed; `None` while its helper reads it, or between files.
    stream: Option<RecordStream>,
    /// The stream is with the helper.
    away: bool,
    /// The buffers of the last stream, for the next ([`RecordStream::reuse_buffers`]).
    buffers: StreamBuffers,
    /// Records taken from the file, for error messages.
    index: u64,
    /// The file's path, for error messages.
    path: PathBuf,
    helper: Option<Helper>,
}

/// How long an assembler that reads its streams itself works before it gives way to the other
/// threads that want the core (`sched_yield`), about four records of resnet50_h100.
///
/// Reader threads share the cores among the ranks finely, as each hands a chunk over every
/// few records; an assembler that reads by itself runs for whole time slices. Ranks then get
/// their first batch of an epoch at unequal times (resnet50_h100, 24 ranks on 2 cores: 18 to
/// 190 ms after the epoch's start, against 143 to 179 ms when giving way), and since the
/// first step is left out of the AU but every step ends at a barrier, a rank served early
/// waits for the last one in a step that counts: AU 84-91% without giving way, 95-97% with
/// it, 88-94% with reader threads (bench/HISTORY.md). Where no other thread is waiting, a
/// yield costs a system call and returns.
const SHARE_CPU_AFTER: Duration = Duration::from_micros(50);

/// A thread that does the reads of one stream that wait for the device.
struct Helper {
    jobs: SyncSender<RecordStream>,
    done: Receiver<(RecordStream, Result<(), FormatError>)>,
    thread: JoinHandle<()>,
}

impl Helper {
    fn spawn() -> Helper {
        let (jobs, job_rx) = sync_channel::<RecordStream>(1);
        let (done_tx, done) = sync_channel(1);
        let thread = std::thread::spawn(move || {
            crate::priority::lower_this_thread();
            for mut stream in job_rx {
                let read = stream.wait_for_next_record();
                if done_tx.send((stream, read)).is_err() {
                    return;
                }
            }
        });
        Helper { jobs, done, thread }
    }
}

impl InlineStreams {
    fn new(
        storage: Arc<dyn Storage>,
        files: FileList,
        read: ReadOptions,
        cycle: usize,
        stats: Arc<Mutex<EpochReadStats>>,
    ) -> InlineStreams {
        InlineStreams {
            storage,
            files,
            read,
            slots: (0..cycle).map(|_| InlineSlot::default()).collect(),
            hist: LatencyHistogram::new(),
            stats,
            last_yield: Instant::now(),
        }
    }

    fn failed(&self, t: usize, source: FormatError) -> LoaderError {
        let slot = &self.slots[t];
        LoaderError::Read {
            path: slot.path.clone(),
            index: slot.index,
            source: Box::new(source),
        }
    }

    fn start(&mut self, t: usize, file: u64) -> Result<(), LoaderError> {
        let path = self
            .files
            .path_buf(file as usize)
            .ok_or_else(|| LoaderError::NoSuchFile {
                file,
                len: self.files.len(),
            })?;
        let opened = RecordStream::open(&*self.storage, &path, self.read.transfer);
        let slot = &mut self.slots[t];
        slot.file = file;
        slot.index = 0;
        slot.path = path;
        match opened {
            Ok(stream) => {
                slot.stream = Some(
                    stream
                        .check_data_crc(self.read.check_data_crc)
                        .reuse_buffers(std::mem::take(&mut slot.buffers)),
                );
                Ok(())
            }
            Err(e) => Err(self.failed(t, e)),
        }
    }

    fn next(&mut self, t: usize, active: &[usize]) -> Result<Option<Tagged>, LoaderError> {
        let started = Instant::now();
        loop {
            if self.slots[t].away {
                self.take_back(t)?;
            }
            let slot = &mut self.slots[t];
            let Some(stream) = slot.stream.as_mut() else {
                return Ok(None);
            };
            let path = &slot.path;
            let taken = match stream.next_record_nowait() {
                Ok(NextRecord::Record(offset, payload)) => {
                    tagged(path, slot.file, offset, payload, self.read.decode).map(Some)
                }
                Ok(NextRecord::End) => Ok(None),
                Ok(NextRecord::WouldWait) => {
                    self.send_away(t)?;
                    for &u in active.iter().filter(|&&u| u != t) {
                        self.read_ahead(u);
                    }
                    continue;
                }
                Err(e) => Err(e),
            };
            return match taken {
                Ok(Some(record)) => {
                    slot.index += 1;
                    let now = Instant::now();
                    self.hist.record_duration(now - started);
                    if now - self.last_yield >= SHARE_CPU_AFTER {
                        // See [`SHARE_CPU_AFTER`].
                        std::thread::yield_now();
                        self.last_yield = Instant::now();
                    }
                    Ok(Some(record))
                }
                Ok(None) => {
                    if let Some(stream) = slot.stream.take() {
                        slot.buffers = stream.into_buffers();
                    }
                    Ok(None)
                }
                Err(e) => Err(self.failed(t, e)),
            };
        }
    }

    /// Hands stream `t` to its helper for the reads its next record waits for.
    fn send_away(&mut self, t: usize) -> Result<(), LoaderError> {
        let slot = &mut self.slots[t];
        let Some(stream) = slot.stream.take() else {
            return Ok(());
        };
        let helper = slot.helper.get_or_insert_with(Helper::spawn);
        // A helper stops only when its jobs channel closes (in `Drop`), or if it panicked.
        if let Err(returned) = helper.jobs.send(stream) {
            slot.stream = Some(returned.0);
            return Err(LoaderError::ReaderGone { worker: t as u32 });
        }
        slot.away = true;
        Ok(())
    }

    /// Reads what stream `u`'s next record needs if it is at hand, else hands the stream to
    /// its helper, so that its read is in flight while the assembler waits for another.
    fn read_ahead(&mut self, u: usize) {
        let slot = &mut self.slots[u];
        let Some(stream) = slot.stream.as_mut() else {
            return;
        };
        // An error here is met again, and reported, when the record is taken.
        if let Ok(false) = stream.next_record_at_hand() {
            let _ = self.send_away(u);
        }
    }

    /// Waits for stream `t`'s helper to hand it back.
    fn take_back(&mut self, t: usize) -> Result<(), LoaderError> {
        let slot = &mut self.slots[t];
        slot.away = false;
        let back = slot.helper.as_ref().map(|h| h.done.recv());
        match back {
            Some(Ok((stream, read))) => {
                slot.stream = Some(stream);
                read.map_err(|e| self.failed(t, e))
            }
            _ => Err(LoaderError::ReaderGone { worker: t as u32 }),
        }
    }
}

impl Drop for InlineStreams {
    /// Stops the helpers (each ends its read first) and merges the records' read latencies.
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(helper) = slot.helper.take() {
                drop(helper.jobs);
                drop(helper.done);
                let _ = helper.thread.join();
            }
        }
        lock(&self.stats).sample_read.merge(&self.hist);
    }
}

impl Assembler {
    /// Interleaves, shuffles, shards and batches the readers' records. Full batches go to the
    /// parsers through `work` when there are any, else counted straight to `out`, which also
    /// takes the errors.
    fn run(
        self,
        mut feeds: Feeds,
        work: Option<SyncSender<(u64, Vec<Tagged>)>>,
        out: SyncSender<(u64, Result<LoadedBatch, LoaderError>)>,
        stop: &AtomicBool,
        cancel: &StopSignal,
    ) {
        let cycle = match &feeds {
            Feeds::Readers { commands, .. } => commands.len(),
            Feeds::Inline(streams) => streams.slots.len(),
        }
        .max(1) as u64;
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
        // Hands a finished batch on; false when the pipeline is being torn down.
        let hand_on = |step: u64, batch: &mut Vec<Tagged>| -> bool {
            match &work {
                Some(work) => {
                    let full = std::mem::replace(batch, Vec::with_capacity(self.batch_size));
                    work.send((step, full)).is_ok()
                }
                None => {
                    let counted = LoadedBatch {
                        step,
                        samples: batch.len() as u64,
                        sample_bytes: batch.iter().map(|r| r.image_len).sum(),
                    };
                    batch.clear();
                    out.send((step, Ok(counted))).is_ok()
                }
            }
        };
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
                if !hand_on(*step, batch) {
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
            for t in 0..in_group {
                let file = self.shape.file(first + t as u64);
                match feeds.start(t, file) {
                    Ok(true) => {}
                    Ok(false) => break 'groups,
                    Err(e) => {
                        let _ = out.send((step, Err(e)));
                        return;
                    }
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
                    match feeds.next(t, &active) {
                        Ok(Some(record)) => {
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
                        Ok(None) => {
                            active.remove(i);
                        }
                        Err(e) => {
                            let _ = out.send((step, Err(e)));
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
            hand_on(step, &mut batch);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_sixteen_records_of_look_ahead() {
        assert_eq!(chunk_records(1), CHUNK_RECORDS);
        assert_eq!(chunk_records(2), 8);
        assert_eq!(chunk_records(8), 2);
        assert_eq!(chunk_records(64), 1);
        assert_eq!(chunk_records(0), CHUNK_RECORDS);
    }
}
