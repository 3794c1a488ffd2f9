//! The tf.data TFRecord pipeline (file-shards sampler): files dealt round-robin to ranks (or
//! records, with fewer files than ranks), streamed in transfer-size requests, interleaved over
//! the reader threads, shuffled in a buffer, and parsed; every rank runs the planned steps.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dlio_config::{Compression, ElementType, FormatKind, ReadType, Sampler, Shuffle};
use dlio_format::FileLayout;
use dlio_loader::{FileList, Loader, LoaderSpec, StopSignal, StreamOptions};
use dlio_plan::{EpochPlan, PlanSpec};
use dlio_storage::{
    Capabilities, Consume, Extent, ForwardStorage, Metered, PosixStorage, ReadHandle, Storage,
    StorageError,
};

mod common;

const SPF: u64 = 3;

fn layout() -> FileLayout {
    FileLayout {
        samples: SPF as u32,
        sample_dims: vec![40, 50],
        element: ElementType::Uint8,
        compression: Compression::None,
        fixed_size: false,
    }
}

/// `n` tfrecord files of 3 records of 2000 bytes under `dir/train`.
fn dataset(dir: &std::path::Path, n: u64) -> FileList {
    common::generate_files(FormatKind::Tfrecord, &layout(), n, |i| {
        dir.join(format!("train/f{i:03}.tfrecord"))
    })
}

fn plan_spec(files: u64, world: u32, threads: u32, batch: u64) -> PlanSpec {
    PlanSpec {
        num_files: files,
        samples_per_file: SPF,
        batch_size: batch,
        world,
        sampler: Sampler::FileShards,
        read_threads: threads,
        file_shuffle: Shuffle::Off,
        sample_shuffle: Shuffle::Off,
        sample_replacement: false,
        seed: 9,
        seed_change_epoch: true,
        random_seed: 0,
        total_training_steps: None,
        drop_last: true,
    }
}

fn loader(storage: Arc<dyn Storage>, threads: u32, options: StreamOptions) -> Loader {
    resizing_loader(storage, threads, options, None)
}

/// A loader whose samples reach the loop at `sample_out_bytes` (None: as read).
fn resizing_loader(
    storage: Arc<dyn Storage>,
    threads: u32,
    options: StreamOptions,
    sample_out_bytes: Option<usize>,
) -> Loader {
    let spec = LoaderSpec {
        read_threads: threads,
        prefetch_size: 2,
        read_ahead: true,
        spread_batches: false,
        read_type: ReadType::OnDemand,
        sampler: Sampler::FileShards,
        preprocess_time: Default::default(),
        preprocess_work: Default::default(),
        batch_time: Default::default(),
        open_time: Default::default(),
        seed: 5,
        layout: layout(),
        tracer: dlio_trace::Tracer::disabled(),
        sample_out_bytes,
        object_window: 0,
        stagger: std::time::Duration::ZERO,
        start_interval: std::time::Duration::ZERO,
        start_interval_every_epoch: false,
        request_delay: std::time::Duration::ZERO,
        companions: None,
    };
    let format = Arc::from(dlio_format::format_for(FormatKind::Tfrecord).unwrap());
    let mut loader = Loader::new(spec, storage, format, Arc::new(StopSignal::new())).unwrap();
    loader.set_stream_options(options);
    loader
}

/// Runs one epoch; returns (steps, samples, sample bytes, bytes read, read requests).
fn epoch(
    files: &FileList,
    spec: &PlanSpec,
    rank: u32,
    options: StreamOptions,
) -> (u64, u64, u64, u64, u64) {
    epoch_on(PosixStorage::new(), files, spec, rank, options)
}

/// [`epoch`] through `engine`.
fn epoch_on<S: Storage + 'static>(
    engine: S,
    files: &FileList,
    spec: &PlanSpec,
    rank: u32,
    options: StreamOptions,
) -> (u64, u64, u64, u64, u64) {
    let metered = Arc::new(Metered::new(engine));
    let counters = Arc::clone(metered.counters());
    let mut loader = loader(metered, spec.read_threads, options);
    let plan = EpochPlan::new(spec, 1, rank).unwrap();
    let mut batches = loader.start_epoch(plan, files.clone());
    let (mut steps, mut samples, mut bytes) = (0, 0, 0);
    while let Some(batch) = batches.next_batch() {
        let batch = batch.unwrap();
        assert_eq!(batch.step, steps);
        steps += 1;
        samples += batch.samples;
        bytes += batch.sample_bytes;
    }
    let stats = batches.finish();
    assert_eq!(stats.samples, samples);
    let io = counters.snapshot();
    (steps, samples, bytes, io.bytes_read, io.read_requests)
}

/// Runs rank 0's epoch of `spec` until a batch fails; its error.
fn epoch_error(loader: &mut Loader, spec: &PlanSpec, files: &FileList) -> String {
    let mut batches = loader.start_epoch(EpochPlan::new(spec, 1, 0).unwrap(), files.clone());
    let error = loop {
        match batches.next_batch() {
            Some(Err(e)) => break e.to_string(),
            Some(Ok(_)) => continue,
            None => panic!("the damaged record must fail the epoch"),
        }
    };
    batches.finish();
    error
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn ranks_stream_their_round_robin_files_in_transfer_size_requests() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 7);
    let size = file_len(&files.table().unwrap()[0]);
    // 7 files on 3 ranks: ranks hold 3, 2, 2 files; 6 records each are read in 3 steps.
    let spec = plan_spec(7, 3, 1, 2);
    for rank in 0..3 {
        let options = StreamOptions {
            transfer_size: 1000,
            ..StreamOptions::default()
        };
        let (steps, samples, bytes, read, requests) = epoch(&files, &spec, rank, options);
        assert_eq!((steps, samples, bytes), (3, 6, 6 * 2000), "rank {rank}");
        // Two whole files, streamed in 1000-byte requests.
        assert_eq!(read, 2 * size, "rank {rank}");
        assert_eq!(requests, 2 * size.div_ceil(1000), "rank {rank}");
    }
}

#[test]
fn with_fewer_files_than_ranks_every_rank_streams_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 2);
    let size = file_len(&files.table().unwrap()[0]);
    // 6 records, 3 ranks: each keeps every third record, 2 steps of 1.
    let spec = plan_spec(2, 3, 2, 1);
    for rank in 0..3 {
        let (steps, samples, _, read, _) = epoch(&files, &spec, rank, StreamOptions::default());
        assert_eq!((steps, samples), (2, 2));
        assert_eq!(read, 2 * size, "rank {rank} reads both files");
    }
}

#[test]
fn the_shuffle_buffer_and_parallel_reads_keep_every_step_full() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 9);
    let spec = plan_spec(9, 2, 3, 2);
    let options = StreamOptions {
        shuffle_size: 5,
        sample_shuffle: Shuffle::Seed,
        computation_threads: 3,
        ..StreamOptions::default()
    };
    // Rank 1 holds 4 files (12 records) like rank 0's fewest 4: 6 steps of 2.
    let (steps, samples, bytes, _, _) = epoch(&files, &spec, 1, options);
    assert_eq!((steps, samples, bytes), (6, 12, 12 * 2000));
}

#[test]
fn a_damaged_record_fails_the_epoch_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 2);
    let mut bytes = std::fs::read(&files.table().unwrap()[1]).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&files.table().unwrap()[1], &bytes).unwrap();
    let spec = plan_spec(2, 1, 1, 2);
    let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
    let error = epoch_error(
        &mut loader(storage, 1, StreamOptions::default()),
        &spec,
        &files,
    );
    assert!(
        error.contains("f001.tfrecord") && error.contains("CRC"),
        "{error}"
    );
}

#[test]
fn resized_samples_reach_the_loop_at_the_transformed_size() {
    // record_length_bytes_resize / transformed_record_dims: the parse step hands every
    // 2000-byte image to the loop cut or zero-padded to the transformed size, while storage
    // still reads every byte of every file.
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 4);
    let whole_files: u64 = files.table().unwrap().iter().map(file_len).sum();
    let spec = plan_spec(4, 1, 2, 3);
    for (out, parsers) in [(1500, 1), (2600, 2)] {
        let metered = Arc::new(Metered::new(PosixStorage::new()));
        let counters = Arc::clone(metered.counters());
        let options = StreamOptions {
            computation_threads: parsers,
            ..StreamOptions::default()
        };
        let mut loader = resizing_loader(metered, spec.read_threads, options, Some(out));
        let plan = EpochPlan::new(&spec, 1, 0).unwrap();
        let mut batches = loader.start_epoch(plan, files.clone());
        let mut samples = 0;
        while let Some(batch) = batches.next_batch() {
            let batch = batch.unwrap();
            assert_eq!(batch.samples, 3, "out {out}");
            assert_eq!(
                batch.sample_bytes,
                3 * out as u64,
                "out {out}, step {}",
                batch.step
            );
            samples += batch.samples;
        }
        batches.finish();
        assert_eq!(samples, 4 * SPF, "out {out}");
        assert_eq!(counters.snapshot().bytes_read, whole_files, "out {out}");
    }
}

#[test]
fn the_forks_in_place_pipeline_reads_and_counts_what_the_decoding_one_does() {
    // Same plan both ways (interleave, shuffle buffer, sharding across 2 ranks): the same steps,
    // samples, image bytes, bytes read and read requests; only the copies and decodes differ.
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 9);
    let spec = plan_spec(9, 2, 3, 2);
    for rank in 0..2 {
        let mut results = Vec::new();
        for decode in [true, false] {
            let options = StreamOptions {
                shuffle_size: 5,
                sample_shuffle: Shuffle::Seed,
                computation_threads: 3,
                transfer_size: 1500,
                decode,
                check_data_crc: decode,
                ..StreamOptions::default()
            };
            results.push(epoch(&files, &spec, rank, options));
        }
        assert_eq!(results[0], results[1], "rank {rank}");
        assert_eq!(
            results[1].2,
            results[1].1 * 2000,
            "rank {rank}: image bytes"
        );
    }
}

#[test]
fn the_in_place_pipeline_still_refuses_a_record_that_is_not_an_example() {
    // Without data CRCs a damaged payload goes unnoticed, as in the fork; a damaged framing or
    // Example structure does not. Byte 12 is the first byte of the first payload (its tag).
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 1);
    let mut bytes = std::fs::read(&files.table().unwrap()[0]).unwrap();
    bytes[12] = 0xff;
    std::fs::write(&files.table().unwrap()[0], &bytes).unwrap();
    let spec = plan_spec(1, 1, 1, 1);
    let options = StreamOptions {
        decode: false,
        check_data_crc: false,
        ..StreamOptions::default()
    };
    let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
    let error = epoch_error(&mut loader(storage, 1, options), &spec, &files);
    assert!(
        error.contains("f000.tfrecord") && error.contains("not a tf.train.Example"),
        "{error}"
    );
}

/// POSIX with the traits of other engines, for the pipeline's two ways of reading:
/// - `would_wait_every: Some(n)`: non-blocking reads (as POSIX's), every `n`-th of which
///   answers "would wait" (always, for 1);
/// - `overlaps`: an engine that overlaps requests (`io_depth` 3, as io_uring): a stream's
///   requests complete out of order, the last of each three first;
/// - neither (the default): an engine whose every read waits, one at a time.
#[derive(Debug, Default)]
struct Emulated {
    inner: PosixStorage,
    would_wait_every: Option<u64>,
    overlaps: bool,
    /// Non-blocking reads answered "would wait".
    would_wait: Arc<AtomicU64>,
    /// Reads that waited (outside streams).
    waited: Arc<AtomicU64>,
    /// The most requests one stream had taken and not yet handed over.
    most_in_flight: Arc<AtomicU64>,
}

impl ForwardStorage for Emulated {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl Storage for Emulated {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            nowait_reads: self.would_wait_every.is_some(),
            batched: self.overlaps,
            io_depth: if self.overlaps { 3 } else { 1 },
            ..self.inner.capabilities()
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        Ok(Box::new(EmulatedRead {
            inner: self.inner.open(path)?,
            would_wait_every: self.would_wait_every,
            overlaps: self.overlaps,
            nowait_calls: 0,
            would_wait: Arc::clone(&self.would_wait),
            waited: Arc::clone(&self.waited),
            most_in_flight: Arc::clone(&self.most_in_flight),
        }))
    }

    dlio_storage::forward_storage!(
        engine,
        create,
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );
}

struct EmulatedRead {
    inner: Box<dyn ReadHandle>,
    would_wait_every: Option<u64>,
    overlaps: bool,
    nowait_calls: u64,
    would_wait: Arc<AtomicU64>,
    waited: Arc<AtomicU64>,
    most_in_flight: Arc<AtomicU64>,
}

impl ReadHandle for EmulatedRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        self.waited.fetch_add(1, Ordering::Relaxed);
        self.inner.read_at(buf, offset)
    }

    fn read_at_nowait(
        &mut self,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<Option<usize>, StorageError> {
        let Some(every) = self.would_wait_every else {
            return Ok(None);
        };
        self.nowait_calls += 1;
        if self.nowait_calls.is_multiple_of(every.max(1)) {
            self.would_wait.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        self.inner.read_at_nowait(buf, offset)
    }

    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        let slots = if self.overlaps {
            (window.len() / block).min(3)
        } else {
            1
        };
        loop {
            let taken: Vec<Extent> = (&mut *requests).take(slots).collect();
            if taken.is_empty() {
                return Ok(());
            }
            self.most_in_flight
                .fetch_max(taken.len() as u64, Ordering::Relaxed);
            for (slot, extent) in taken.iter().enumerate() {
                let buf = &mut window[slot * block..slot * block + extent.len];
                self.inner.read_exact_at(buf, extent.offset)?;
            }
            for (slot, extent) in taken.iter().enumerate().rev() {
                consume(
                    extent.offset,
                    &window[slot * block..slot * block + extent.len],
                )?;
            }
        }
    }
}

#[test]
fn every_way_of_reading_the_streams_reads_the_same_epoch() {
    // A reader thread per stream, one request at a time (engines whose reads wait); the same
    // with requests in flight across records, completing out of order (io_uring, S3); the
    // assembler reading its streams itself, with the reads that would wait done by a helper
    // thread per stream (POSIX). Every way, each rank reads the same steps, samples, bytes
    // and requests.
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 10);
    let size = file_len(&files.table().unwrap()[0]);
    let spec = plan_spec(10, 2, 4, 2);
    // Probed with the kernel, not with the engine under test.
    let nowait_works = dlio_testkit::probe::nowait_reads(dir.path()).is_ok();
    for decode in [false, true] {
        let options = StreamOptions {
            shuffle_size: 4,
            sample_shuffle: Shuffle::Seed,
            transfer_size: 1500,
            decode,
            ..StreamOptions::default()
        };
        for rank in 0..2 {
            let readers = epoch_on(Emulated::default(), &files, &spec, rank, options.clone());
            assert_eq!(
                readers,
                (7, 14, 14 * 2000, 5 * size, 5 * size.div_ceil(1500)),
                "rank {rank}, reader threads"
            );
            let engine = Emulated {
                overlaps: true,
                ..Emulated::default()
            };
            let most_in_flight = Arc::clone(&engine.most_in_flight);
            let overlapped = epoch_on(engine, &files, &spec, rank, options.clone());
            assert_eq!(
                overlapped, readers,
                "rank {rank}, decode {decode}, overlapped"
            );
            assert_eq!(most_in_flight.load(Ordering::Relaxed), 3, "rank {rank}");
            for period in [1, 2, 3, u64::MAX] {
                let engine = Emulated {
                    would_wait_every: Some(period),
                    ..Emulated::default()
                };
                let (would_wait, waited) =
                    (Arc::clone(&engine.would_wait), Arc::clone(&engine.waited));
                let inline = epoch_on(engine, &files, &spec, rank, options.clone());
                let what = format!("rank {rank}, decode {decode}, would wait every {period}");
                assert_eq!(inline, readers, "{what}");
                let (would_wait, waited) = (
                    would_wait.load(Ordering::Relaxed),
                    waited.load(Ordering::Relaxed),
                );
                if period == u64::MAX {
                    // Every byte at hand (just written): no read waited, unless this file
                    // system cannot read without waiting at all (then every read is a helper's).
                    assert_eq!(would_wait, 0, "{what}");
                    assert!(
                        waited == 0 || !nowait_works,
                        "{what}: {waited} reads waited"
                    );
                } else {
                    assert!(
                        would_wait > 0 && waited > 0,
                        "{what}: {would_wait} {waited}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_damaged_record_read_by_a_helper_fails_the_epoch_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), 3);
    let mut bytes = std::fs::read(&files.table().unwrap()[2]).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&files.table().unwrap()[2], &bytes).unwrap();
    let spec = plan_spec(3, 1, 2, 2);
    let engine = Emulated {
        would_wait_every: Some(1),
        ..Emulated::default()
    };
    let error = epoch_error(
        &mut loader(Arc::new(engine), 2, StreamOptions::default()),
        &spec,
        &files,
    );
    assert!(
        error.contains("f002.tfrecord") && error.contains("CRC"),
        "{error}"
    );
}
