//! Streaming checkpoint writes and reads on a real file system: exact sizes on disk, unique
//! bytes, `ones` tensors, fsync, full disks, read-back counts (streamed in chunks on every
//! local engine), recovery rank shift and page cache dropping.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dlio_checkpoint::{
    CheckpointError, CheckpointMode, CheckpointPlan, CheckpointReader, CheckpointWriter, Datatype,
    MAX_READ_WINDOW_BYTES, ModelSpec, Parallelism, ReadOptions, TransformerShape, WriteOptions,
    checkpoint_dir_name, checkpoint_plan, drop_page_cache,
};
use dlio_config::vocab::Framework;
use dlio_storage::{
    Capabilities, Consume, Engine, EngineKind, EngineSettings, Extent, ForwardStorage, IoCounters,
    PosixStorage, ReadHandle, Storage, StorageError, WriteHandle, engine_for,
};

const MIB: usize = 1 << 20;

/// A small transformer (12.6 M parameters) with an fp16 optimizer, ZeRO-1 over 4 ranks:
/// rank 0 writes ~44 MiB (parameters + its optimizer shard), the others ~18 MiB each.
fn small_transformer(framework: Framework) -> CheckpointPlan {
    let model = ModelSpec {
        model_type: Some("transformer".to_string()),
        optimizer_datatype: Datatype::Fp16,
        num_layers: 2,
        parallelism: Parallelism {
            tensor: 1,
            pipeline: 1,
            data: -1,
            zero_stage: 1,
        },
        transformer: TransformerShape {
            vocab_size: 4096,
            hidden_size: 512,
            ffn_hidden_size: 2048,
            num_attention_heads: 8,
            num_kv_heads: 8,
        },
        ..ModelSpec::dlio_default()
    };
    checkpoint_plan(&model, CheckpointMode::Default, framework, 4).expect("valid plan")
}

/// A tiny ZeRO-3 model over `world` ranks: every rank writes a few KiB.
fn tiny_zero3(world: u32) -> CheckpointPlan {
    let model = ModelSpec {
        model_type: Some("transformer".to_string()),
        num_layers: 2,
        parallelism: Parallelism {
            tensor: 1,
            pipeline: 1,
            data: -1,
            zero_stage: 3,
        },
        transformer: TransformerShape {
            vocab_size: 100,
            hidden_size: 32,
            ffn_hidden_size: 64,
            num_attention_heads: 4,
            num_kv_heads: 4,
        },
        ..ModelSpec::dlio_default()
    };
    checkpoint_plan(&model, CheckpointMode::Default, Framework::Pytorch, world).unwrap()
}

fn write_options(randomize_tensor: bool, fsync: bool) -> WriteOptions {
    WriteOptions {
        randomize_tensor,
        fsync,
        seed: 42,
        chunk_bytes: MIB,
    }
}

fn read_options(recovery_rank_shift: Option<u32>) -> ReadOptions {
    ReadOptions {
        drop_page_cache: false,
        recovery_rank_shift,
        chunk_bytes: MIB,
    }
}

fn file_path(root: &Path, checkpoint: &str, name: &str) -> PathBuf {
    root.join(checkpoint).join(name)
}

#[test]
fn streamed_checkpoint_has_exact_sizes_on_disk_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let plan = small_transformer(Framework::Pytorch);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(2, 10);
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();

    let mut total = 0;
    for rank in [0, 1] {
        let report = writer
            .write(&storage, dir.path(), &name, &plan, rank)
            .unwrap();
        let rank_plan = &plan.ranks[rank as usize];
        assert_eq!(report.files as usize, rank_plan.files.len());
        assert_eq!(report.bytes, rank_plan.bytes());
        for file in &rank_plan.files {
            let on_disk = std::fs::metadata(file_path(dir.path(), &name, &file.name))
                .unwrap()
                .len();
            assert_eq!(on_disk, file.bytes, "{}", file.name);
        }
        total += report.bytes;
    }
    assert!(
        total > 50 * MIB as u64,
        "{total} bytes is a real streaming test"
    );
    assert_eq!(
        total,
        plan.ranks[0].bytes() + plan.ranks[1].bytes(),
        "ranks 0 and 1"
    );
    // Only what was planned is in the directory (no temporary files left behind).
    let mut listed: Vec<String> = std::fs::read_dir(dir.path().join(&name))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "model_0_model_states.pt",
            "zero_pp_rank_0_mp_rank_0_optim_states.pt",
            "zero_pp_rank_1_mp_rank_0_optim_states.pt",
        ]
    );

    let mut reader = CheckpointReader::new(read_options(None)).unwrap();
    let read = reader.read(&storage, dir.path(), &name, &plan, 0).unwrap();
    assert_eq!(read.source_rank, 0);
    assert_eq!(read.files, 2);
    assert_eq!(read.bytes, plan.ranks[0].bytes());
    assert!(read.warnings.is_empty());
}

#[test]
fn random_tensors_are_unique_across_files_chunks_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let plan = small_transformer(Framework::Pytorch);
    let storage = PosixStorage::new();
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    let first = checkpoint_dir_name(1, 1);
    let second = checkpoint_dir_name(1, 2);
    for name in [&first, &second] {
        for rank in [1, 2] {
            writer
                .write(&storage, dir.path(), name, &plan, rank)
                .unwrap();
        }
    }
    let read = |checkpoint: &str, rank: u32| {
        std::fs::read(file_path(
            dir.path(),
            checkpoint,
            &format!("zero_pp_rank_{rank}_mp_rank_0_optim_states.pt"),
        ))
        .unwrap()
    };
    let a = read(&first, 1);
    let b = read(&first, 2);
    let a_again = read(&second, 1);
    assert_eq!(a.len(), b.len());
    assert!(a.len() > 4 * MIB);
    // Two files of one checkpoint differ, and so does the same file in the next checkpoint.
    assert_ne!(a[..MIB], b[..MIB]);
    assert_ne!(a[..MIB], a_again[..MIB]);
    // Every chunk of a file differs from the others (no repeated buffer).
    let chunks: Vec<&[u8]> = a.chunks(MIB).collect();
    for (i, x) in chunks.iter().enumerate() {
        for y in &chunks[i + 1..] {
            assert_ne!(&x[..4096], &y[..4096]);
        }
    }
    // And the bytes look random: all 256 values appear in the first 64 KiB.
    let mut seen = [false; 256];
    for &byte in &a[..64 * 1024] {
        seen[byte as usize] = true;
    }
    assert!(seen.iter().all(|&s| s));
}

#[test]
fn the_same_seed_writes_the_same_bytes() {
    let plan = tiny_zero3(2);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(1, 1);
    let mut contents = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
        writer.write(&storage, dir.path(), &name, &plan, 1).unwrap();
        contents.push(
            std::fs::read(file_path(
                dir.path(),
                &name,
                "zero_pp_rank_1_mp_rank_0_model_states.pt",
            ))
            .unwrap(),
        );
    }
    assert_eq!(contents[0], contents[1]);
}

#[test]
fn unrandomized_tensors_are_ones_of_their_datatype() {
    let dir = tempfile::tempdir().unwrap();
    let plan = small_transformer(Framework::Pytorch);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(1, 1);
    let mut writer = CheckpointWriter::new(write_options(false, false)).unwrap();
    writer.write(&storage, dir.path(), &name, &plan, 0).unwrap();
    let model = std::fs::read(file_path(dir.path(), &name, "model_0_model_states.pt")).unwrap();
    assert_eq!(model.len() as u64, plan.ranks[0].files[0].bytes);
    assert!(model.len() > 2 * MIB, "spans several chunks");
    // fp16 1.0 is 0x3c00, little-endian.
    assert!(model.chunks_exact(2).all(|pair| pair == [0x00, 0x3c]));
}

/// PosixStorage that counts fsyncs and can run out of space after a byte budget.
#[derive(Debug)]
struct TestStorage {
    inner: PosixStorage,
    syncs: Arc<AtomicU64>,
    budget: Option<u64>,
    written: Arc<AtomicU64>,
}

impl TestStorage {
    fn new(budget: Option<u64>) -> TestStorage {
        TestStorage {
            inner: PosixStorage::new(),
            syncs: Arc::new(AtomicU64::new(0)),
            budget,
            written: Arc::new(AtomicU64::new(0)),
        }
    }
}

struct TestWrite {
    inner: Box<dyn WriteHandle>,
    syncs: Arc<AtomicU64>,
    budget: Option<u64>,
    written: Arc<AtomicU64>,
}

impl WriteHandle for TestWrite {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let before = self.written.fetch_add(data.len() as u64, Ordering::SeqCst);
        if let Some(budget) = self.budget
            && before + data.len() as u64 > budget
        {
            return Err(StorageError::Io {
                op: "write",
                path: self.inner.path().to_path_buf(),
                source: io::Error::from(io::ErrorKind::StorageFull),
            });
        }
        self.inner.write_all(data)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        self.inner.sync()
    }

    fn commit(self: Box<Self>) -> Result<u64, StorageError> {
        self.inner.commit()
    }
}

impl ForwardStorage for TestStorage {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl Storage for TestStorage {
    fn engine(&self) -> &'static str {
        "test"
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        Ok(Box::new(TestWrite {
            inner: self.inner.create(path)?,
            syncs: self.syncs.clone(),
            budget: self.budget,
            written: self.written.clone(),
        }))
    }

    dlio_storage::forward_storage!(
        capabilities,
        open,
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );
}

/// The local engines, with `io_depth` 4: io_uring only where the kernel sets up a ring, the
/// O_DIRECT ones only where the temp dir's file system accepts O_DIRECT (both probed first;
/// then the engine must start).
fn local_engines(transfer_size: Option<u64>) -> Vec<(&'static str, Engine)> {
    let mut engines = Vec::new();
    for (label, engine, odirect) in [
        ("posix", EngineKind::Posix, false),
        ("direct", EngineKind::Direct, false),
        ("io_uring", EngineKind::IoUring, false),
        ("io_uring+odirect", EngineKind::IoUring, true),
    ] {
        let settings = EngineSettings {
            engine,
            odirect,
            transfer_size,
            transfer_size_distribution: Vec::new(),
            seed: 0,
            sample_request_patterns: Vec::new(),
            read_buffer: None,
            head_request_size: None,
            io_depth: 4,
            s3: None,
            read_bytes_per_second: 0,
            fresh_read_share: 0.0,
            buffer_page_offset: None,
            request_work: std::time::Duration::ZERO,
        };
        let uses_o_direct = odirect || engine == EngineKind::Direct;
        if !dlio_testkit::skip::engine_runs_here(
            label,
            engine == EngineKind::IoUring,
            uses_o_direct,
        ) {
            continue;
        }
        match engine_for(&settings) {
            Ok(engine) => engines.push((label, engine)),
            Err(other) => panic!("{label}: {other}"),
        }
    }
    engines
}

/// The requests a restart makes for files of `sizes`: chunks of `chunk` bytes, each split
/// into transfers when a transfer size is set.
fn restart_requests(sizes: impl Iterator<Item = u64>, chunk: u64, transfer: Option<u64>) -> u64 {
    sizes
        .map(|size| {
            (0..size.div_ceil(chunk))
                .map(|i| {
                    let len = (size - i * chunk).min(chunk);
                    transfer.map_or(1, |t| len.div_ceil(t))
                })
                .sum::<u64>()
        })
        .sum()
}

#[test]
fn a_restart_streams_every_byte_in_chunks_on_every_local_engine() {
    let dir = tempfile::tempdir().unwrap();
    let big = small_transformer(Framework::Pytorch);
    let small = tiny_zero3(2);
    let (big_name, small_name) = (checkpoint_dir_name(1, 1), checkpoint_dir_name(1, 2));
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    writer
        .write(&PosixStorage::new(), dir.path(), &big_name, &big, 1)
        .unwrap();
    writer
        .write(&PosixStorage::new(), dir.path(), &small_name, &small, 0)
        .unwrap();
    // 1 MiB chunks (aligned) of ~18 MiB, and 1000-byte chunks (unaligned, so O_DIRECT
    // bounces them) of a few KiB, each file's last chunk short.
    let cases = [(&big, &big_name, 1, MIB), (&small, &small_name, 0, 1000)];
    for transfer_size in [None, Some(256 * 1024)] {
        for (label, engine) in local_engines(transfer_size) {
            for &(plan, name, rank, chunk) in &cases {
                let counters = Arc::new(IoCounters::default());
                let storage = engine.metered(Arc::clone(&counters));
                let mut reader = CheckpointReader::new(ReadOptions {
                    chunk_bytes: chunk,
                    ..read_options(None)
                })
                .unwrap();
                let report = reader
                    .read(&*storage, dir.path(), name, plan, rank)
                    .unwrap();
                let files = &plan.ranks[rank as usize].files;
                let label = format!("{label} {transfer_size:?} chunk {chunk}");
                assert_eq!(report.files as usize, files.len(), "{label}");
                assert_eq!(report.bytes, plan.ranks[rank as usize].bytes(), "{label}");
                let counts = counters.snapshot();
                assert_eq!(counts.bytes_read, report.bytes, "{label}");
                // A transfer size below the chunk splits the chunks; above it, it changes
                // nothing.
                let split = transfer_size.filter(|&t| t < chunk as u64);
                let expected = restart_requests(files.iter().map(|f| f.bytes), chunk as u64, split);
                assert_eq!(counts.read_requests, expected, "{label}");
            }
        }
    }
}

/// POSIX storage that claims an `io_depth` and records the slots of every stream it runs.
/// With `sized`, its files are only that size: stream ranges are handed to `consume` from
/// the window without any I/O, which lets a test read a checkpoint of gigabytes.
#[derive(Debug)]
struct StreamSpy {
    io_depth: u32,
    sized: Option<u64>,
    slots: Arc<Mutex<Vec<usize>>>,
}

struct SpyRead {
    inner: Box<dyn ReadHandle>,
    slots: Arc<Mutex<Vec<usize>>>,
}

impl ReadHandle for SpyRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        self.inner.read_at(buf, offset)
    }

    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        self.slots.lock().unwrap().push(window.len() / block);
        self.inner.read_stream(window, block, requests, consume)
    }
}

impl ForwardStorage for StreamSpy {
    fn forward_to(&self) -> &dyn Storage {
        &PosixStorage
    }
}

impl Storage for StreamSpy {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            io_depth: self.io_depth,
            ..PosixStorage.capabilities()
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let slots = Arc::clone(&self.slots);
        Ok(match self.sized {
            Some(len) => Box::new(SizedRead { len, slots }),
            None => Box::new(SpyRead {
                inner: PosixStorage.open(path)?,
                slots,
            }),
        })
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

#[test]
fn a_restart_lends_the_engine_io_depth_chunks_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let plan = small_transformer(Framework::Pytorch);
    let name = checkpoint_dir_name(1, 1);
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    writer
        .write(&PosixStorage::new(), dir.path(), &name, &plan, 1)
        .unwrap();
    let files = &plan.ranks[1].files;
    assert!(
        files.iter().any(|f| f.bytes > 4 * MIB as u64),
        "a file of many chunks"
    );
    // A chunk of 1 MiB: io_depth chunks, fewer for a file of fewer chunks (these files are
    // far below the window limit, which the formula keeps for completeness).
    for io_depth in [1, 4, 4096] {
        let spy = StreamSpy {
            io_depth,
            sized: None,
            slots: Arc::default(),
        };
        let mut reader = CheckpointReader::new(read_options(None)).unwrap();
        let report = reader.read(&spy, dir.path(), &name, &plan, 1).unwrap();
        assert_eq!(report.bytes, plan.ranks[1].bytes());
        let expected: Vec<usize> = files
            .iter()
            .map(|f| {
                (io_depth as usize)
                    .min(f.bytes.div_ceil(MIB as u64) as usize)
                    .min(MAX_READ_WINDOW_BYTES / MIB)
            })
            .collect();
        assert_eq!(*spy.slots.lock().unwrap(), expected, "io_depth {io_depth}");
    }
}

/// A [`StreamSpy`] file that is only a size.
struct SizedRead {
    len: u64,
    slots: Arc<Mutex<Vec<usize>>>,
}

impl ReadHandle for SizedRead {
    fn path(&self) -> &Path {
        Path::new("sized")
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, buf: &mut [u8], _offset: u64) -> Result<usize, StorageError> {
        Ok(buf.len())
    }

    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        self.slots.lock().unwrap().push(window.len() / block);
        for extent in requests {
            consume(extent.offset, &window[..extent.len])?;
        }
        Ok(())
    }
}

#[test]
fn a_restart_window_stays_under_the_memory_limit_whatever_the_io_depth() {
    // One 1 GiB file in 16 MiB chunks (64 of them) on an engine claiming a queue of 4096:
    // the window is MAX_READ_WINDOW_BYTES, not 64 x 16 MiB; with a queue of 8, 8 chunks.
    let mut plan = small_transformer(Framework::Pytorch);
    let file_bytes = 1u64 << 30;
    plan.ranks[1].files.truncate(1);
    plan.ranks[1].files[0].bytes = file_bytes;
    let chunk = 16 * MIB;
    for (io_depth, slots) in [(4096, MAX_READ_WINDOW_BYTES / chunk), (8, 8)] {
        let storage = StreamSpy {
            io_depth,
            sized: Some(file_bytes),
            slots: Arc::default(),
        };
        let mut reader = CheckpointReader::new(ReadOptions {
            chunk_bytes: chunk,
            ..read_options(None)
        })
        .unwrap();
        let report = reader
            .read(&storage, Path::new("/nonexistent"), "ckpt", &plan, 1)
            .unwrap();
        assert_eq!(report.bytes, file_bytes);
        assert_eq!(
            *storage.slots.lock().unwrap(),
            [slots],
            "io_depth {io_depth}"
        );
    }
    assert_eq!(MAX_READ_WINDOW_BYTES / chunk, 16);
}

#[test]
fn fsync_option_syncs_every_file_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let plan = tiny_zero3(2);
    let name = checkpoint_dir_name(1, 1);
    for (fsync, expected_syncs) in [(false, 0), (true, 2)] {
        let storage = TestStorage::new(None);
        let mut writer = CheckpointWriter::new(write_options(true, fsync)).unwrap();
        let report = writer.write(&storage, dir.path(), &name, &plan, 0).unwrap();
        assert_eq!(report.files, 2);
        assert_eq!(report.bytes, plan.ranks[0].bytes());
        assert_eq!(storage.syncs.load(Ordering::SeqCst), expected_syncs);
    }
}

#[test]
fn a_full_disk_names_the_file_and_removes_the_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let plan = small_transformer(Framework::Pytorch);
    let name = checkpoint_dir_name(3, 7);
    // Room for the whole model file and 1.5 chunks of the optimizer file.
    let model_bytes = plan.ranks[0].files[0].bytes;
    let storage = TestStorage::new(Some(model_bytes + (MIB + MIB / 2) as u64));
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    let error = writer
        .write(&storage, dir.path(), &name, &plan, 0)
        .unwrap_err();
    let optimizer = &plan.ranks[0].files[1];
    let optimizer_path = file_path(dir.path(), &name, &optimizer.name);
    match &error {
        CheckpointError::Write {
            path,
            written,
            expected,
            ..
        } => {
            assert_eq!(path, &optimizer_path);
            assert_eq!(*written, MIB as u64);
            assert_eq!(*expected, optimizer.bytes);
        }
        other => panic!("expected a write error, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains(&format!("after 1048576 of {} bytes", optimizer.bytes)),
        "{message}"
    );
    assert!(message.contains("the disk is full"), "{message}");
    // The complete file stays; the failed one left nothing behind, not even a temporary.
    let mut listed: Vec<String> = std::fs::read_dir(dir.path().join(&name))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, ["model_0_model_states.pt"]);
}

#[test]
fn reading_a_file_of_the_wrong_size_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let plan = tiny_zero3(2);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(1, 1);
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    writer.write(&storage, dir.path(), &name, &plan, 0).unwrap();
    let victim = file_path(dir.path(), &name, &plan.ranks[0].files[1].name);
    std::fs::write(&victim, b"short").unwrap();
    let mut reader = CheckpointReader::new(read_options(None)).unwrap();
    match reader.read(&storage, dir.path(), &name, &plan, 0) {
        Err(CheckpointError::SizeMismatch {
            path,
            expected,
            found,
        }) => {
            assert_eq!(path, victim);
            assert_eq!(expected, plan.ranks[0].files[1].bytes);
            assert_eq!(found, 5);
        }
        other => panic!("expected a size mismatch, got {other:?}"),
    }
    // A missing checkpoint is a read error naming the file.
    let missing = reader.read(&storage, dir.path(), "global_epoch9_step9", &plan, 0);
    assert!(
        matches!(missing, Err(CheckpointError::Read { ref path, read: 0, .. })
            if path.ends_with("global_epoch9_step9/zero_pp_rank_0_mp_rank_0_model_states.pt")),
        "{missing:?}"
    );
}

#[test]
fn recovery_rank_shift_reads_the_next_nodes_files() {
    let dir = tempfile::tempdir().unwrap();
    let plan = tiny_zero3(4);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(1, 1);
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    // Only ranks 2 and 3 (node 1 of 2 ranks per node) write: a shifted read from node 0 must
    // find their files, an unshifted one must not.
    for rank in [2, 3] {
        writer
            .write(&storage, dir.path(), &name, &plan, rank)
            .unwrap();
    }
    let mut shifted = CheckpointReader::new(read_options(Some(2))).unwrap();
    for (rank, source) in [(0, 2), (1, 3)] {
        let report = shifted
            .read(&storage, dir.path(), &name, &plan, rank)
            .unwrap();
        assert_eq!(report.source_rank, source);
        assert_eq!(report.files, 2);
        assert_eq!(report.bytes, plan.ranks[source as usize].bytes());
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    }
    let mut unshifted = CheckpointReader::new(read_options(None)).unwrap();
    assert!(
        unshifted
            .read(&storage, dir.path(), &name, &plan, 0)
            .is_err()
    );

    // On a single node the shift maps every rank to itself, and says so.
    let mut one_node = CheckpointReader::new(read_options(Some(4))).unwrap();
    let report = one_node
        .read(&storage, dir.path(), &name, &plan, 2)
        .unwrap();
    assert_eq!(report.source_rank, 2);
    assert_eq!(report.warnings.len(), 1);
    assert!(
        report.warnings[0].contains("one node"),
        "{:?}",
        report.warnings
    );
    assert!(matches!(
        CheckpointReader::new(read_options(Some(0))),
        Err(CheckpointError::NoRanksPerNode)
    ));
}

#[test]
fn tensorflow_checkpoints_write_index_and_checkpoint_files() {
    let dir = tempfile::tempdir().unwrap();
    let plan = small_transformer(Framework::Tensorflow);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(1, 1);
    let mut writer = CheckpointWriter::new(write_options(true, true)).unwrap();
    let report = writer.write(&storage, dir.path(), &name, &plan, 0).unwrap();
    assert_eq!(report.files, 5);
    assert_eq!(report.bytes, plan.ranks[0].bytes());
    let list = std::fs::read_to_string(file_path(dir.path(), &name, "checkpoint")).unwrap();
    assert!(
        list.starts_with("model_checkpoint_path: \"zero_pp_rank_0_mp_rank_0_optim_states.pb-1\"\n")
    );
    let index = std::fs::read_to_string(file_path(
        dir.path(),
        &name,
        "model_0_model_states.pb-1.index",
    ))
    .unwrap();
    // Embedding, 2 layers of 6 tensors, LM head, final norm.
    assert_eq!(index.lines().count(), 1 + 15);
    assert!(
        index
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("0/0 fp16 2097152 0")
    );

    let mut reader = CheckpointReader::new(read_options(None)).unwrap();
    let read = reader.read(&storage, dir.path(), &name, &plan, 0).unwrap();
    assert_eq!((read.files, read.bytes), (5, report.bytes));
}

#[test]
fn dropping_the_page_cache_evicts_a_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cached.bin");
    std::fs::write(&path, vec![7u8; 4 * MIB]).unwrap();
    drop_page_cache(&path).unwrap();
    // On file systems that cache in the page cache (not tmpfs), nothing stays resident.
    if let Some(resident) = resident_pages(&path) {
        assert_eq!(
            resident, 0,
            "pages still cached after posix_fadvise(DONTNEED)"
        );
    }

    // The reader runs it before reading and still reads every byte.
    let plan = tiny_zero3(1);
    let storage = PosixStorage::new();
    let name = checkpoint_dir_name(1, 1);
    let mut writer = CheckpointWriter::new(write_options(true, false)).unwrap();
    writer.write(&storage, dir.path(), &name, &plan, 0).unwrap();
    let mut reader = CheckpointReader::new(ReadOptions {
        drop_page_cache: true,
        ..read_options(None)
    })
    .unwrap();
    let report = reader.read(&storage, dir.path(), &name, &plan, 0).unwrap();
    assert_eq!(report.bytes, plan.ranks[0].bytes());
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn a_page_cache_that_cannot_be_dropped_is_a_warning() {
    let warning = drop_page_cache(Path::new("/nonexistent/dlio/ckpt.pt")).unwrap_err();
    assert!(warning.contains("/nonexistent/dlio/ckpt.pt"), "{warning}");
    assert!(
        warning.contains("reads may be served from memory"),
        "{warning}"
    );
}

/// Pages of `path` resident in the page cache (`mincore`), or `None` on tmpfs, where
/// DONTNEED does not apply.
#[cfg(target_os = "linux")]
fn resident_pages(path: &Path) -> Option<usize> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;

    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `statfs` is a plain C struct for which all-zero bytes are a valid value.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is NUL-terminated and `stat` is a valid, writable `statfs`.
    if unsafe { libc::statfs(c_path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    if stat.f_type as i64 == TMPFS_MAGIC {
        return None;
    }
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: a read-only shared mapping of an open file of `len > 0` bytes; it is only
    // inspected with `mincore` (never dereferenced) and unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    let mut residency = vec![0u8; len.div_ceil(page)];
    // SAFETY: `map` is a live mapping of `len` bytes and `residency` holds one byte per page.
    let rc = unsafe { libc::mincore(map, len, residency.as_mut_ptr()) };
    // SAFETY: `map` and `len` are exactly what `mmap` returned and was given.
    unsafe { libc::munmap(map, len) };
    assert_eq!(rc, 0);
    Some(residency.iter().filter(|&&r| r & 1 == 1).count())
}

#[cfg(not(target_os = "linux"))]
fn resident_pages(_path: &Path) -> Option<usize> {
    None
}
