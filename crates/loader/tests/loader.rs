//! The loader reads exactly what the plan says, in step order, with the open pattern of the
//! configured read type and sampler; every byte goes through the metered storage.

use std::sync::Arc;

use dlio_config::{
    Compression, ElementType, FormatKind, ReadType, Sampler, Shuffle, TimeDistribution,
};
use dlio_format::FileLayout;
use dlio_loader::{FileList, Loader, LoaderError, LoaderSpec, StopSignal};
use dlio_plan::{EpochPlan, PlanSpec};
use dlio_storage::{Metered, PosixStorage, Storage};

mod common;

const SPF: u32 = 3;

fn layout() -> FileLayout {
    FileLayout {
        samples: SPF,
        sample_dims: vec![16, 16],
        element: ElementType::Uint8,
        compression: Compression::None,
        fixed_size: false,
    }
}

/// `n` npz files of 3 samples each.
fn dataset(dir: &std::path::Path, n: u64) -> FileList {
    common::generate_files(FormatKind::Npz, &layout(), n, |i| {
        dir.join(format!("f{i:03}.npz"))
    })
}

fn spec(sampler: Sampler, read_type: ReadType, threads: u32) -> LoaderSpec {
    LoaderSpec {
        read_threads: threads,
        prefetch_size: 2,
        read_ahead: true,
        spread_batches: false,
        read_type,
        sampler,
        preprocess_time: TimeDistribution::default(),
        preprocess_work: Default::default(),
        batch_time: Default::default(),
        open_time: Default::default(),
        seed: 5,
        layout: layout(),
        tracer: dlio_trace::Tracer::disabled(),
        sample_out_bytes: None,
        object_window: 0,
        stagger: std::time::Duration::ZERO,
        start_interval: std::time::Duration::ZERO,
        start_interval_every_epoch: false,
        request_delay: std::time::Duration::ZERO,
        companions: None,
    }
}

fn plan(files: u64, sampler: Sampler, threads: u32, shuffle: Shuffle) -> EpochPlan {
    plan_of_epoch(1, files, sampler, threads, shuffle)
}

/// The plan of epoch `epoch` (1-based) of the only rank.
fn plan_of_epoch(
    epoch: u32,
    files: u64,
    sampler: Sampler,
    threads: u32,
    shuffle: Shuffle,
) -> EpochPlan {
    let spec = PlanSpec {
        num_files: files,
        samples_per_file: u64::from(SPF),
        batch_size: 2,
        world: 1,
        sampler,
        read_threads: threads,
        file_shuffle: shuffle,
        sample_shuffle: shuffle,
        sample_replacement: false,
        seed: 9,
        seed_change_epoch: true,
        random_seed: 0,
        total_training_steps: None,
        drop_last: true,
    };
    EpochPlan::new(&spec, epoch, 0).unwrap()
}

struct Outcome {
    steps: Vec<u64>,
    samples: u64,
    opens: u64,
    bytes_read: u64,
}

fn read_epoch(files: &FileList, spec: LoaderSpec, plan: EpochPlan) -> Outcome {
    read_epoch_of(FormatKind::Npz, files, spec, plan)
}

fn read_epoch_of(kind: FormatKind, files: &FileList, spec: LoaderSpec, plan: EpochPlan) -> Outcome {
    let metered = Metered::new(PosixStorage::new());
    let counters = Arc::clone(metered.counters());
    let storage: Arc<dyn Storage> = Arc::new(metered);
    let format: Arc<dyn dlio_format::Format> = Arc::from(dlio_format::format_for(kind).unwrap());
    let mut loader = Loader::new(spec, storage, format, Arc::new(StopSignal::new())).unwrap();
    let mut batches = loader.start_epoch(plan, files.clone());
    let mut steps = Vec::new();
    let mut samples = 0;
    while let Some(b) = batches.next_batch() {
        let b = b.unwrap();
        steps.push(b.step);
        samples += b.samples;
        assert_eq!(b.sample_bytes, b.samples * 256);
    }
    let stats = batches.finish();
    assert_eq!(stats.samples, samples);
    assert_eq!(stats.sample_read.count(), samples);
    let io = counters.snapshot();
    Outcome {
        steps,
        samples,
        opens: io.opens,
        bytes_read: io.bytes_read,
    }
}

#[test]
fn batches_arrive_in_step_order_with_every_planned_sample() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8); // 24 samples, 12 steps of 2
    for threads in [0, 1, 2, 3] {
        let out = read_epoch(
            &files,
            spec(Sampler::Index, ReadType::OnDemand, threads),
            plan(8, Sampler::Index, threads, Shuffle::Seed),
        );
        assert_eq!(out.steps, (0..12).collect::<Vec<_>>(), "threads {threads}");
        assert_eq!(out.samples, 24);
    }
}

#[test]
fn each_step_is_read_by_the_thread_the_plan_names_and_a_plan_for_other_threads_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    for threads in [1, 3, 4] {
        let plan = plan(8, Sampler::Index, threads, Shuffle::Off);
        let out = read_epoch(
            &files,
            spec(Sampler::Index, ReadType::Memory, threads),
            plan,
        );
        assert_eq!(out.steps, (0..12).collect::<Vec<_>>(), "{threads} threads");
        assert_eq!(out.samples, 24);
    }
    let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
    let format: Arc<dyn dlio_format::Format> =
        Arc::from(dlio_format::format_for(FormatKind::Npz).unwrap());
    let mut loader = Loader::new(
        spec(Sampler::Index, ReadType::Memory, 2),
        storage,
        format,
        Arc::new(StopSignal::new()),
    )
    .unwrap();
    let mut batches = loader.start_epoch(plan(8, Sampler::Index, 3, Shuffle::Off), files.clone());
    let refused = batches
        .next_batch()
        .expect("an answer")
        .expect_err("refused");
    assert!(
        refused.to_string().contains("over 3 reader threads"),
        "{refused}"
    );
    assert!(batches.next_batch().is_none());
}

#[test]
fn each_reader_spends_the_batch_time_after_every_batch_it_reads() {
    // 12 steps of 2 samples; 15 ms a batch. A thread reads its batches one after the other,
    // so its epoch lasts at least its batches' time, however fast the reads (a lower bound:
    // a busy machine only lengthens it).
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    for threads in [1u32, 3] {
        let spec = LoaderSpec {
            batch_time: TimeDistribution::Constant { value: 0.015 },
            ..spec(Sampler::Index, ReadType::OnDemand, threads)
        };
        let started = std::time::Instant::now();
        let out = read_epoch(
            &files,
            spec,
            plan(8, Sampler::Index, threads, Shuffle::Seed),
        );
        let took = started.elapsed();
        assert_eq!(out.steps, (0..12).collect::<Vec<_>>(), "threads {threads}");
        let per_thread = 12 / u64::from(threads);
        assert!(
            took >= std::time::Duration::from_millis(15 * per_thread),
            "{threads} threads read 12 batches in {took:?}"
        );
    }
}

#[test]
fn readers_start_one_interval_apart_in_the_epochs_where_they_start() {
    // 2 threads, 1.5 s apart: the second thread's batches (every other step) come after it
    // began, so an epoch where the readers start lasts at least the interval. In an epoch
    // where they do not start again (persistent workers), no thread waits: the 12 small
    // batches take far less than the interval, even on a busy machine.
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    let interval = std::time::Duration::from_millis(1500);
    let epoch_plan = |epoch: u32| plan_of_epoch(epoch, 8, Sampler::Index, 2, Shuffle::Seed);
    for (every_epoch, epoch, waits) in [(false, 1, true), (false, 2, false), (true, 2, true)] {
        let spec = LoaderSpec {
            start_interval: interval,
            start_interval_every_epoch: every_epoch,
            ..spec(Sampler::Index, ReadType::OnDemand, 2)
        };
        let started = std::time::Instant::now();
        let out = read_epoch(&files, spec, epoch_plan(epoch));
        let took = started.elapsed();
        assert_eq!(out.steps, (0..12).collect::<Vec<_>>());
        assert_eq!(
            took >= interval,
            waits,
            "epoch {epoch}, every epoch {every_epoch}: {took:?}"
        );
    }
}

#[test]
fn the_open_time_is_spent_once_for_each_file_a_reader_goes_on_to() {
    // 8 files of 3 samples read in file order by one thread: 8 openings of another file, so
    // 8 open times (1.2 s); the 16 samples that open their file again cost none (they would
    // add 2.4 s). A busy machine only lengthens the epoch by milliseconds here.
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    let spec = LoaderSpec {
        open_time: TimeDistribution::Constant { value: 0.150 },
        ..spec(Sampler::Index, ReadType::OnDemand, 1)
    };
    let started = std::time::Instant::now();
    let out = read_epoch(&files, spec, plan(8, Sampler::Index, 1, Shuffle::Off));
    let took = started.elapsed();
    assert_eq!(out.opens, 24);
    assert!(
        took >= std::time::Duration::from_millis(1200)
            && took < std::time::Duration::from_millis(3600),
        "{took:?}"
    );
}

#[test]
fn spread_batches_are_asked_for_the_prefetch_ahead() {
    // 2 threads share every batch of 2 samples. Spread and read ahead by a prefetch of 2: once
    // the first batch is taken, the two after it are read too (6 samples, each opened); spread
    // without read-ahead: the first batch alone. The epoch's batches still come in order.
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    for (read_ahead, spread_batches, read_early) in [(true, true, 6), (false, false, 2)] {
        let spec = LoaderSpec {
            read_ahead,
            spread_batches,
            ..spec(Sampler::Index, ReadType::OnDemand, 2)
        };
        let metered = Metered::new(PosixStorage::new());
        let counters = Arc::clone(metered.counters());
        let storage: Arc<dyn Storage> = Arc::new(metered);
        let format: Arc<dyn dlio_format::Format> =
            Arc::from(dlio_format::format_for(FormatKind::Npz).unwrap());
        let mut loader = Loader::new(spec, storage, format, Arc::new(StopSignal::new())).unwrap();
        let mut batches =
            loader.start_epoch(plan(8, Sampler::Index, 2, Shuffle::Off), files.clone());
        let first = batches.next_batch().unwrap().unwrap();
        assert_eq!((first.step, first.samples), (0, 2));
        // Ample time for two small batches; a thread that read more would show it.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(
            counters.snapshot().opens,
            read_early,
            "read ahead {read_ahead}"
        );
        let mut steps = vec![first.step];
        while let Some(b) = batches.next_batch() {
            steps.push(b.unwrap().step);
        }
        assert_eq!(steps, (0..12).collect::<Vec<_>>());
        assert_eq!(batches.finish().samples, 24);
    }
}

#[test]
fn on_demand_reads_the_whole_file_for_every_sample() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    let file_len = files.path_buf(0).unwrap().metadata().unwrap().len();
    let out = read_epoch(
        &files,
        spec(Sampler::Index, ReadType::OnDemand, 2),
        plan(8, Sampler::Index, 2, Shuffle::Off),
    );
    assert_eq!(out.opens, 24);
    assert_eq!(out.bytes_read, 24 * file_len);
}

#[test]
fn memory_read_type_opens_each_file_once_per_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    let file_len = files.path_buf(0).unwrap().metadata().unwrap().len();
    let out = read_epoch(
        &files,
        spec(Sampler::Index, ReadType::Memory, 1),
        plan(8, Sampler::Index, 1, Shuffle::Off),
    );
    assert_eq!(out.opens, 8);
    assert_eq!(out.bytes_read, 8 * file_len);
}

#[test]
fn a_memory_mapped_format_opens_each_file_once_per_thread_even_on_demand() {
    // The fork's mmap_indexed_binary reader maps its files once; its plain reader, like every
    // DLIO reader under on_demand, opens a file for each sample.
    let tmp = tempfile::tempdir().unwrap();
    for (kind, ext) in [
        (FormatKind::MmapIndexedBinary, "mmap_indexed_binary"),
        (FormatKind::IndexedBinary, "indexed_binary"),
    ] {
        let files = common::generate_files(kind, &layout(), 8, |i| {
            tmp.path().join(format!("f{i:03}.{ext}"))
        });
        for threads in [1, 2] {
            let out = read_epoch_of(
                kind,
                &files,
                spec(Sampler::Index, ReadType::OnDemand, threads),
                plan(8, Sampler::Index, threads, Shuffle::Seed),
            );
            assert_eq!(out.samples, 24, "{ext}, {threads} threads");
            if kind == FormatKind::MmapIndexedBinary {
                // Page touches: each sample's pages (here the whole 768-byte file) are read.
                assert!(out.bytes_read >= 24 * 768, "{ext}: {}", out.bytes_read);
                // Each file's data and its two index files, once per thread at most.
                assert!(
                    (24..=24 * u64::from(threads)).contains(&out.opens),
                    "{ext}, {threads} threads: {} opens",
                    out.opens
                );
            } else {
                // A data open per sample; a file's index files once per thread at most.
                assert!(
                    (24 + 16..=24 + 16 * u64::from(threads)).contains(&out.opens),
                    "{ext}, {threads} threads: {} opens",
                    out.opens
                );
                assert!(
                    out.bytes_read >= 24 * 256 + 8 * 48,
                    "{ext}: samples and indexes"
                );
            }
        }
    }
}

#[test]
fn iterative_sampler_opens_each_file_once() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    let out = read_epoch(
        &files,
        spec(Sampler::Iterative, ReadType::OnDemand, 1),
        plan(8, Sampler::Iterative, 1, Shuffle::Off),
    );
    assert_eq!(out.samples, 24);
    assert_eq!(out.opens, 8);
}

#[test]
fn a_truncated_file_fails_the_batch_and_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 4);
    std::fs::OpenOptions::new()
        .write(true)
        .open(files.path_buf(1).unwrap())
        .unwrap()
        .set_len(100)
        .unwrap();
    let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
    let format: Arc<dyn dlio_format::Format> =
        Arc::from(dlio_format::format_for(FormatKind::Npz).unwrap());
    let mut loader = Loader::new(
        spec(Sampler::Index, ReadType::OnDemand, 2),
        storage,
        format,
        Arc::new(StopSignal::new()),
    )
    .unwrap();
    let mut batches = loader.start_epoch(plan(4, Sampler::Index, 2, Shuffle::Off), files.clone());
    let mut error = None;
    while let Some(b) = batches.next_batch() {
        if let Err(e) = b {
            error = Some(e);
            break;
        }
    }
    let e = error.expect("the truncated file must fail");
    assert!(matches!(e, LoaderError::Read { .. }), "{e}");
    assert!(e.to_string().contains("f001.npz"), "{e}");
    batches.finish();
}

#[test]
fn cancel_stops_the_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 4);
    let cancel = Arc::new(StopSignal::new());
    let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
    let format: Arc<dyn dlio_format::Format> =
        Arc::from(dlio_format::format_for(FormatKind::Npz).unwrap());
    let mut loader = Loader::new(
        spec(Sampler::Index, ReadType::OnDemand, 2),
        storage,
        format,
        Arc::clone(&cancel),
    )
    .unwrap();
    let mut batches = loader.start_epoch(plan(4, Sampler::Index, 2, Shuffle::Off), files.clone());
    assert!(batches.next_batch().unwrap().is_ok());
    cancel.stop(dlio_loader::StopCause::Interrupted);
    assert!(matches!(
        batches.next_batch(),
        Some(Err(LoaderError::Interrupted))
    ));
    batches.finish();
}

#[test]
fn a_resized_sample_is_what_the_batch_hands_out() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 4);
    for out in [100usize, 1000] {
        let spec = LoaderSpec {
            sample_out_bytes: Some(out),
            ..spec(Sampler::Index, ReadType::OnDemand, 1)
        };
        let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
        let format: Arc<dyn dlio_format::Format> =
            Arc::from(dlio_format::format_for(FormatKind::Npz).unwrap());
        let mut loader = Loader::new(spec, storage, format, Arc::new(StopSignal::new())).unwrap();
        let mut batches =
            loader.start_epoch(plan(4, Sampler::Index, 1, Shuffle::Off), files.clone());
        while let Some(b) = batches.next_batch() {
            let b = b.unwrap();
            // Samples of 256 bytes are cut to 100 or padded to 1000.
            assert_eq!(b.sample_bytes, b.samples * out as u64);
        }
        batches.finish();
    }
}

/// CPU time of this process so far (user + system), from `/proc/self/stat`.
fn process_cpu() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux reports these in USER_HZ, 100 per second on every architecture it runs on.
    std::time::Duration::from_millis(ticks * 10)
}

/// Held by the tests that spend busy time: the process's CPU time, which one of them
/// measures, counts every thread of this test binary.
static BUSY_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn preprocess_work_cpu_keeps_a_core_busy_where_a_sleep_does_not() {
    let _alone = BUSY_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8); // 24 samples
    let per_sample = std::time::Duration::from_millis(10);
    let run = |work: dlio_config::PreprocessWork| {
        let mut s = spec(Sampler::Index, ReadType::OnDemand, 1);
        s.preprocess_time = TimeDistribution::Constant {
            value: per_sample.as_secs_f64(),
        };
        s.preprocess_work = work;
        let before = process_cpu();
        let out = read_epoch(&files, s, plan(8, Sampler::Index, 1, Shuffle::Off));
        assert_eq!(out.samples, 24);
        process_cpu() - before
    };
    let slept = run(dlio_config::PreprocessWork::Sleep);
    let busy = run(dlio_config::PreprocessWork::Cpu);
    // 24 samples of 10 ms: 240 ms of work. A busy machine gives the spinning thread less than
    // all of its wall time, so only a share of it is required; the sleeping run spends
    // almost none.
    assert!(
        busy >= std::time::Duration::from_millis(100),
        "busy: {busy:?}"
    );
    assert!(slept < busy / 2, "slept: {slept:?}, busy: {busy:?}");
}

#[test]
fn preprocess_work_gil_spends_the_threads_work_one_thread_at_a_time() {
    let _alone = BUSY_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8); // 24 samples
    let per_sample = std::time::Duration::from_millis(5);
    let mut s = spec(Sampler::Index, ReadType::OnDemand, 4);
    s.preprocess_time = TimeDistribution::Constant {
        value: per_sample.as_secs_f64(),
    };
    s.preprocess_work = dlio_config::PreprocessWork::Gil;
    let started = std::time::Instant::now();
    let out = read_epoch(&files, s, plan(8, Sampler::Index, 4, Shuffle::Off));
    assert_eq!(out.samples, 24);
    // Four threads, each busy 5 ms a sample, one at a time: the epoch lasts the work of all
    // 24 samples at the least (four threads at once would take a quarter of it, or half on
    // two cores).
    let took = started.elapsed();
    assert!(took >= 24 * per_sample, "{took:?}");
}

/// An engine whose background reads finish on their own threads and ring the bell, the
/// first of them only once `release_after` others have finished (or after a long time).
#[derive(Debug)]
struct HeldFirstRead {
    inner: PosixStorage,
    release_after: u64,
    started: std::sync::atomic::AtomicU64,
    others_done: Arc<(std::sync::Mutex<u64>, std::sync::Condvar)>,
    /// Whether the first read was let go by the others finishing (not by the time-out).
    released_by_others: Arc<std::sync::atomic::AtomicBool>,
    /// Reads started and not finished, and the most there were at once.
    running: Arc<std::sync::atomic::AtomicU64>,
    most_running: Arc<std::sync::atomic::AtomicU64>,
}

struct BackgroundRead {
    path: std::path::PathBuf,
    finished: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl dlio_storage::PendingRead for BackgroundRead {
    fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn wait(self: Box<Self>) -> Result<dlio_storage::WholeRead, dlio_storage::StorageError> {
        Ok(dlio_storage::WholeRead {
            bytes: self.thread.join().unwrap(),
            took: std::time::Duration::ZERO,
        })
    }

    fn finished(&self) -> Option<bool> {
        Some(self.finished.load(std::sync::atomic::Ordering::Acquire))
    }
}

impl dlio_storage::ForwardStorage for HeldFirstRead {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl Storage for HeldFirstRead {
    fn start_whole_read(
        &self,
        path: &std::path::Path,
        bell: &Arc<dlio_storage::ReadBell>,
    ) -> Option<Box<dyn dlio_storage::PendingRead>> {
        use std::sync::atomic::Ordering;
        let first = self.started.fetch_add(1, Ordering::SeqCst) == 0;
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(now, Ordering::SeqCst);
        let running = Arc::clone(&self.running);
        let bytes = std::fs::metadata(path).unwrap().len();
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (done, bell) = (Arc::clone(&finished), Arc::clone(bell));
        let (others, release_after) = (Arc::clone(&self.others_done), self.release_after);
        let released = Arc::clone(&self.released_by_others);
        let thread = std::thread::spawn(move || {
            let (count, changed) = &*others;
            if first {
                let guard = count.lock().unwrap();
                let (guard, waited) = changed
                    .wait_timeout_while(guard, std::time::Duration::from_secs(20), |n| {
                        *n < release_after
                    })
                    .unwrap();
                released.store(!waited.timed_out(), Ordering::SeqCst);
                drop(guard);
            } else {
                *count.lock().unwrap() += 1;
                changed.notify_all();
            }
            running.fetch_sub(1, Ordering::SeqCst);
            done.store(true, Ordering::Release);
            bell.ring();
            bytes
        });
        Some(Box::new(BackgroundRead {
            path: path.to_path_buf(),
            finished,
            thread,
        }))
    }

    dlio_storage::forward_storage!(
        engine,
        capabilities,
        open,
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

/// The object window counts reads in flight, not reads waiting to be consumed: while the
/// oldest read is held, each read that finishes is replaced at once, as a raw request loop
/// keeps its slots full. With a window of 2, six other reads finish while the first still
/// runs (before, the thread waited for the first with one slot empty and this timed out).
#[test]
fn the_object_window_refills_behind_a_slow_first_read() {
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8); // 24 samples, each read whole (on demand)
    let storage = HeldFirstRead {
        inner: PosixStorage::new(),
        release_after: 6,
        started: Default::default(),
        others_done: Default::default(),
        released_by_others: Default::default(),
        running: Default::default(),
        most_running: Default::default(),
    };
    let released = Arc::clone(&storage.released_by_others);
    let most_running = Arc::clone(&storage.most_running);
    let format: Arc<dyn dlio_format::Format> = Arc::from(
        dlio_format::format_for_run(
            &dlio_config::DatasetConfig {
                format: FormatKind::Npz,
                ..Default::default()
            },
            dlio_config::Semantics::Mlperf,
            false,
        )
        .unwrap(),
    );
    let spec = LoaderSpec {
        object_window: 2,
        ..spec(Sampler::Index, ReadType::OnDemand, 1)
    };
    let mut loader =
        Loader::new(spec, Arc::new(storage), format, Arc::new(StopSignal::new())).unwrap();
    let mut batches = loader.start_epoch(plan(8, Sampler::Index, 1, Shuffle::Off), files.clone());
    let mut samples = 0;
    while let Some(b) = batches.next_batch() {
        samples += b.unwrap().samples;
    }
    assert_eq!(samples, 24);
    assert!(
        released.load(std::sync::atomic::Ordering::SeqCst),
        "the first read was held until its time-out: the window waited on it with slots empty"
    );
    // Never more than the window in flight.
    assert_eq!(most_running.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn a_reader_whose_batches_wait_begins_its_next_only_the_request_delay_after_a_take() {
    // One thread, two slots: it reads batches 0 and 1, then 2, whose send waits for a take.
    // The trainer takes batch 0 half a second in, and 1 and 2 at once: batch 3 is read only
    // the delay after that first take (a PyTorch worker gets its next index once the batch it
    // handed over is unpickled). Without the delay it is read at once; the small batches take
    // milliseconds even on a busy machine.
    let tmp = tempfile::tempdir().unwrap();
    let files = dataset(tmp.path(), 8);
    let delay = std::time::Duration::from_millis(1000);
    for (request_delay, waits) in [(delay, true), (std::time::Duration::ZERO, false)] {
        let spec = LoaderSpec {
            request_delay,
            ..spec(Sampler::Index, ReadType::OnDemand, 1)
        };
        let metered: Arc<dyn Storage> = Arc::new(Metered::new(PosixStorage::new()));
        let format: Arc<dyn dlio_format::Format> =
            Arc::from(dlio_format::format_for(FormatKind::Npz).unwrap());
        let mut loader = Loader::new(spec, metered, format, Arc::new(StopSignal::new())).unwrap();
        let mut batches =
            loader.start_epoch(plan(8, Sampler::Index, 1, Shuffle::Seed), files.clone());
        std::thread::sleep(std::time::Duration::from_millis(500));
        let first_take = std::time::Instant::now();
        let steps: Vec<u64> = (0..4)
            .map(|_| batches.next_batch().unwrap().unwrap().step)
            .collect();
        let fourth = first_take.elapsed();
        assert_eq!(steps, vec![0, 1, 2, 3]);
        while let Some(b) = batches.next_batch() {
            b.unwrap();
        }
        batches.finish();
        assert_eq!(
            fourth >= delay,
            waits,
            "delay {request_delay:?}: {fourth:?}"
        );
    }
}
