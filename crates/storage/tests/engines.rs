//! Every local engine against the same promises: byte-identical samples for every format,
//! transfer-size splitting, O_DIRECT alignment on ext4, page-cache dropping, clear errors
//! for settings that cannot work, and streaming reads (every range exactly once, truncation,
//! errors and panics that leave nothing in flight, metering).

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{DataRng, FileLayout, Format, format_for};
use dlio_storage::{
    DIRECT_ALIGNMENT, Engine, EngineKind, EngineSettings, Extent, IoBuffer, IoCounters, ReadHandle,
    ReadRequest, Storage, StorageError, engine_for, resident_pages,
};
use dlio_testkit::{MachineProperty, probe, skip};

/// Every format dlio writes (`hdf5_opt` is a name dlio refuses: it writes no such files).
const FORMATS: [FormatKind; 12] = [
    FormatKind::Npz,
    FormatKind::Npy,
    FormatKind::Hdf5,
    FormatKind::Csv,
    FormatKind::Jpeg,
    FormatKind::Png,
    FormatKind::Tfrecord,
    FormatKind::IndexedBinary,
    FormatKind::MmapIndexedBinary,
    FormatKind::Synthetic,
    FormatKind::Parquet,
    FormatKind::Arrow,
];

fn settings(engine: EngineKind, odirect: bool, transfer_size: Option<u64>) -> EngineSettings {
    EngineSettings {
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
    }
}

/// The local engines this host can run: io_uring only where the kernel sets up a ring
/// (probed first; then the engine must start), with O_DIRECT only where the temp dir's file
/// system accepts it.
fn local_engines(transfer_size: Option<u64>) -> Vec<(String, Engine)> {
    let mut engines = Vec::new();
    for (label, kind, odirect) in [
        ("posix", EngineKind::Posix, false),
        ("direct", EngineKind::Direct, false),
        ("mmap", EngineKind::Mmap, false),
        ("io_uring", EngineKind::IoUring, false),
        ("io_uring+odirect", EngineKind::IoUring, true),
    ] {
        let uses_o_direct = odirect || kind == EngineKind::Direct;
        if !dlio_testkit::skip::engine_runs_here(label, kind == EngineKind::IoUring, uses_o_direct)
        {
            continue;
        }
        match engine_for(&settings(kind, odirect, transfer_size)) {
            Ok(engine) => engines.push((label.to_owned(), engine)),
            Err(other) => panic!("{label}: {other}"),
        }
    }
    engines
}

fn temp_dir() -> tempfile::TempDir {
    // The system temp dir is on ext4 here, which enforces O_DIRECT alignment.
    tempfile::tempdir().expect("temp dir")
}

fn layout() -> FileLayout {
    FileLayout {
        samples: 3,
        sample_dims: vec![40, 52],
        element: ElementType::Uint8,
        compression: Compression::None,
        fixed_size: false,
    }
}

/// Every sample of `path`, read with `format` through `storage`.
fn read_samples(format: &dyn Format, storage: &dyn Storage, path: &Path) -> Vec<Vec<u8>> {
    let layout = layout();
    let mut reader = format.reader(&layout);
    reader
        .open(storage, 7, path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let samples = (0..layout.samples)
        .map(|i| {
            reader
                .read_sample(storage, 7, i)
                .unwrap_or_else(|e| panic!("sample {i} of {}: {e}", path.display()))
                .to_vec()
        })
        .collect();
    reader.close(7);
    samples
}

#[test]
fn every_engine_writes_and_reads_back_identical_samples_for_every_format() {
    let dir = temp_dir();
    let posix = engine_for(&settings(EngineKind::Posix, false, None)).unwrap();
    let mut checked = 0;
    for kind in FORMATS {
        let format = match format_for(kind) {
            Ok(format) => format,
            Err(_) if kind == FormatKind::Hdf5 => {
                dlio_testkit::skip::not_built("hdf5", "the hdf5 engine round trip");
                continue;
            }
            Err(e) => panic!("{}: {e}", kind.name()),
        };
        let reference_path = dir.path().join(format!("posix/a.{}", format.extension()));
        let generated = format.generate(
            &*posix.storage(),
            &reference_path,
            &layout(),
            &mut DataRng::for_file(42, 0, 1),
        );
        if let Err(e) = generated {
            panic!(
                "format {} cannot write a 3 x 40 x 52 uint8 layout: {e}",
                kind.name()
            );
        }
        let reference_bytes = std::fs::read(&reference_path).ok();
        let expected = read_samples(&*format, &*posix.storage(), &reference_path);
        for transfer_size in [None, Some(4096)] {
            for (label, engine) in local_engines(transfer_size) {
                let path = dir.path().join(format!(
                    "{label}-{transfer_size:?}/a.{}",
                    format.extension()
                ));
                let storage = engine.storage();
                format
                    .generate(
                        &*storage,
                        &path,
                        &layout(),
                        &mut DataRng::for_file(42, 0, 1),
                    )
                    .unwrap_or_else(|e| panic!("{label} generates {}: {e}", kind.name()));
                if let Some(reference) = &reference_bytes {
                    assert_eq!(
                        std::fs::read(&path).ok().as_ref(),
                        Some(reference),
                        "{label} wrote other bytes for {}",
                        kind.name()
                    );
                }
                let counters = Arc::new(IoCounters::default());
                let metered = engine.metered(Arc::clone(&counters));
                let got = read_samples(&*format, &*metered, &path);
                assert_eq!(got, expected, "{label} {transfer_size:?} {}", kind.name());
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 2 * 4 * 2,
        "only {checked} engine/format pairs ran"
    );
}

/// A file of `len` bytes whose byte `i` is `i * 31 % 251`.
fn patterned_file(dir: &Path, name: &str, len: usize) -> (PathBuf, Vec<u8>) {
    let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    let path = dir.join(name);
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

#[test]
fn transfer_size_turns_one_read_into_requests_of_that_size_on_every_engine() {
    let dir = temp_dir();
    let len = 10 * 4096 + 100;
    let (path, bytes) = patterned_file(dir.path(), "f.bin", len);
    for (label, engine) in local_engines(Some(4096)) {
        let counters = Arc::new(IoCounters::default());
        let storage = engine.metered(Arc::clone(&counters));
        let mut buffer = IoBuffer::zeroed(len, storage.capabilities().alignment).unwrap();
        storage
            .open(&path)
            .unwrap()
            .read_exact_at(&mut buffer, 0)
            .unwrap();
        assert_eq!(&buffer[..], &bytes[..], "{label}");
        let counts = counters.snapshot();
        assert_eq!(
            counts.read_requests, 11,
            "{label}: 10 full transfers and the tail"
        );
        assert_eq!(counts.bytes_read, len as u64, "{label}");
        assert_eq!(
            counters.read_latency().count(),
            1,
            "{label}: one batch call"
        );
    }
}

#[test]
fn batches_of_unaligned_requests_read_the_right_bytes_on_every_engine() {
    let dir = temp_dir();
    let (path, bytes) = patterned_file(dir.path(), "g.bin", 3 * 65536 + 17);
    for (label, engine) in local_engines(None) {
        let storage = engine.storage();
        let mut handle = storage.open(&path).unwrap();
        let (mut a, mut b, mut c) = (vec![0u8; 5000], vec![0u8; 1], vec![0u8; 70000]);
        let mut requests = [
            ReadRequest {
                offset: 3,
                buf: &mut a,
            },
            ReadRequest {
                offset: bytes.len() as u64 - 1,
                buf: &mut b,
            },
            ReadRequest {
                offset: 65536,
                buf: &mut c,
            },
        ];
        handle.read_batch(&mut requests).unwrap();
        assert_eq!(a, bytes[3..5003], "{label}");
        assert_eq!(b, bytes[bytes.len() - 1..], "{label}");
        assert_eq!(c, bytes[65536..65536 + 70000], "{label}");
        let mut past_end = vec![0u8; 10];
        let error = handle
            .read_exact_at(&mut past_end, bytes.len() as u64 - 5)
            .unwrap_err();
        assert!(
            matches!(error, StorageError::Truncated { wanted: 5, .. }),
            "{label}: {error}"
        );
    }
}

#[test]
fn o_direct_on_ext4_refuses_an_unaligned_request_and_the_direct_engine_does_not_issue_one() {
    let dir = temp_dir();
    if probe::is_tmpfs(dir.path()) {
        skip(
            MachineProperty::Tmpfs,
            "O_DIRECT alignment is not enforced there",
        );
        return;
    }
    if let Err(reason) = probe::o_direct(dir.path()) {
        skip(MachineProperty::NoODirect, &reason);
        return;
    }
    let (path, bytes) = patterned_file(dir.path(), "h.bin", 5 * 4096 + 123);
    let raw = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    let mut aligned = IoBuffer::zeroed(2 * 4096, DIRECT_ALIGNMENT).unwrap();
    // The kernel refuses an offset that is not a multiple of the block size...
    let error = raw.read_at(&mut aligned[..4096], 100).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
    // ...and a buffer address that is not aligned.
    let error = raw.read_at(&mut aligned[1..4097], 0).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EINVAL));

    let engine = engine_for(&settings(EngineKind::Direct, false, Some(8192))).unwrap();
    assert_eq!(engine.name(), "direct");
    let mut handle = engine.storage().open(&path).unwrap();
    let mut odd = vec![0u8; 9000];
    handle.read_exact_at(&mut odd[1..], 101).unwrap();
    assert_eq!(&odd[1..], &bytes[101..101 + 8999]);
    let mut whole = IoBuffer::zeroed(bytes.len(), DIRECT_ALIGNMENT).unwrap();
    handle.read_exact_at(&mut whole, 0).unwrap();
    assert_eq!(&whole[..], &bytes[..]);
}

#[test]
fn direct_writes_produce_exact_sizes_including_unaligned_tails() {
    let dir = temp_dir();
    let engine = engine_for(&settings(EngineKind::Direct, false, None)).unwrap();
    let storage = engine.storage();
    for len in [0usize, 1, 4095, 4096, 4097, (4 << 20) + 5] {
        let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let path = dir.path().join(format!("w{len}.bin"));
        let mut writer = storage.create(&path).unwrap();
        for piece in data.chunks(3000) {
            writer.write_all(piece).unwrap();
        }
        writer.sync().unwrap();
        assert_eq!(storage.size(&path).unwrap(), None, "visible before commit");
        assert_eq!(writer.commit().unwrap(), len as u64);
        assert_eq!(std::fs::read(&path).unwrap(), data, "len {len}");
    }
}

#[test]
fn dropping_the_cache_leaves_no_page_of_the_file_resident() {
    let dir = temp_dir();
    if probe::is_tmpfs(dir.path()) {
        skip(
            MachineProperty::Tmpfs,
            "its pages cannot be dropped from the page cache",
        );
        return;
    }
    let (path, bytes) = patterned_file(dir.path(), "c.bin", 1 << 20);
    let storage = engine_for(&settings(EngineKind::Posix, false, None))
        .unwrap()
        .storage();
    let mut buffer = vec![0u8; bytes.len()];
    storage
        .open(&path)
        .unwrap()
        .read_exact_at(&mut buffer, 0)
        .unwrap();
    let before = resident_pages(&path).unwrap();
    assert_eq!(before.total, 256);
    assert!(before.resident > 0, "the read should have cached pages");
    storage.drop_cache(&path).unwrap();
    let after = resident_pages(&path).unwrap();
    assert_eq!(after.resident, 0, "{after:?}");
}

#[test]
fn the_mmap_engine_faults_in_every_page_it_reads() {
    let dir = temp_dir();
    if probe::is_tmpfs(dir.path()) {
        skip(MachineProperty::Tmpfs, "its pages are always resident");
        return;
    }
    let (path, bytes) = patterned_file(dir.path(), "m.bin", 64 * 4096);
    dlio_storage::drop_file_cache(&path).unwrap();
    let engine = engine_for(&settings(EngineKind::Mmap, false, None)).unwrap();
    let mut handle = engine.storage().open(&path).unwrap();
    let mut buffer = vec![0u8; bytes.len()];
    handle.read_exact_at(&mut buffer, 0).unwrap();
    assert_eq!(buffer, bytes);
    assert_eq!(resident_pages(&path).unwrap().resident, 64);
}

#[test]
fn contradicting_settings_are_refused_with_the_key_to_change() {
    let error = engine_for(&settings(EngineKind::Mmap, true, None)).unwrap_err();
    assert!(error.to_string().contains("reader.odirect"), "{error}");
    let error = engine_for(&settings(EngineKind::Direct, false, Some(1000))).unwrap_err();
    assert!(error.to_string().contains("multiple of 4096"), "{error}");
    assert!(error.to_string().contains("4096"), "{error}");
    let error = engine_for(&settings(EngineKind::Posix, false, Some(0))).unwrap_err();
    assert!(error.to_string().contains("transfer_size is 0"), "{error}");
    let error = engine_for(&settings(EngineKind::S3, false, None)).unwrap_err();
    assert!(error.to_string().contains("storage_root"), "{error}");
    // reader.odirect with the default engine is upstream's O_DIRECT reader.
    let engine = engine_for(&settings(EngineKind::Posix, true, None)).unwrap();
    assert_eq!(engine.name(), "direct");
    assert_eq!(
        EngineKind::from_name("io_uring").map(EngineKind::name),
        Some("io_uring")
    );
}

#[test]
fn o_direct_on_a_file_system_that_refuses_it_names_the_path_and_suggests_posix() {
    // /proc refuses O_DIRECT opens with EINVAL.
    let path = Path::new("/proc/self/status");
    let probe = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path);
    if probe.is_ok() {
        skip(
            MachineProperty::ProcAcceptsODirect,
            "no file system here to refuse O_DIRECT",
        );
        return;
    }
    let engine = engine_for(&settings(EngineKind::Direct, false, None)).unwrap();
    let error = engine
        .storage()
        .open(path)
        .err()
        .expect("the kernel refuses O_DIRECT on /proc, so the engine must too");
    let message = error.to_string();
    assert!(message.contains("/proc/self/status"), "{message}");
    assert!(message.contains("io_engine=posix"), "{message}");
}

#[test]
fn a_batch_longer_than_the_queue_mixing_aligned_and_unaligned_requests_reads_every_byte() {
    let dir = temp_dir();
    let blocks = 40;
    let (path, bytes) = patterned_file(dir.path(), "h.bin", blocks * 4096 + 100);
    for (label, engine) in local_engines(None) {
        let storage = engine.storage();
        let mut handle = storage.open(&path).unwrap();
        // Every other aligned block into one aligned buffer, plus two unaligned requests:
        // 22 requests for a queue of 4, so io_uring refills it as requests complete.
        let mut aligned = IoBuffer::zeroed(20 * 4096, DIRECT_ALIGNMENT).unwrap();
        let (mut head, mut tail) = (vec![0u8; 777], vec![0u8; 100]);
        let mut requests: Vec<ReadRequest<'_>> = aligned
            .chunks_mut(4096)
            .enumerate()
            .map(|(i, buf)| ReadRequest {
                offset: (2 * i * 4096) as u64,
                buf,
            })
            .collect();
        requests.insert(
            7,
            ReadRequest {
                offset: 5,
                buf: &mut head,
            },
        );
        requests.push(ReadRequest {
            offset: (blocks * 4096) as u64,
            buf: &mut tail,
        });
        handle.read_batch(&mut requests).unwrap();
        drop(requests);
        for i in 0..20 {
            let at = 2 * i * 4096;
            assert!(
                aligned[i * 4096..(i + 1) * 4096] == bytes[at..at + 4096],
                "{label}: block {i}"
            );
        }
        assert_eq!(head, bytes[5..782], "{label}");
        assert_eq!(tail, bytes[blocks * 4096..], "{label}");

        // An aligned request that runs past the end fails as truncated, among others in
        // flight, and leaves the handle (and its thread's ring) usable.
        let mut blocks_buf = IoBuffer::zeroed(8 * 4096, DIRECT_ALIGNMENT).unwrap();
        let mut requests: Vec<ReadRequest<'_>> = blocks_buf
            .chunks_mut(4096)
            .enumerate()
            .map(|(i, buf)| ReadRequest {
                offset: ((blocks - 7 + i) * 4096) as u64,
                buf,
            })
            .collect();
        let error = handle.read_batch(&mut requests).unwrap_err();
        assert!(
            matches!(error, StorageError::Truncated { .. }),
            "{label}: {error}"
        );
        drop(requests);
        let mut again = IoBuffer::zeroed(4096, DIRECT_ALIGNMENT).unwrap();
        handle.read_exact_at(&mut again, 4096).unwrap();
        assert!(again[..] == bytes[4096..8192], "{label}");
    }
}

/// Streams `extents` of `handle` into `window`, checks every consumed range against
/// `bytes`, and returns the ranges in the order they were consumed.
fn stream_checked(
    handle: &mut dyn ReadHandle,
    window: &mut [u8],
    block: usize,
    extents: &[Extent],
    bytes: &[u8],
    label: &str,
) -> Result<Vec<Extent>, StorageError> {
    let mut consumed = Vec::new();
    handle.read_stream(
        window,
        block,
        &mut extents.iter().copied(),
        &mut |offset, got| {
            let at = offset as usize;
            assert!(
                got == &bytes[at..at + got.len()],
                "{label}: the {} bytes at {offset} differ",
                got.len()
            );
            consumed.push(Extent::new(offset, got.len()));
            Ok(())
        },
    )?;
    Ok(consumed)
}

fn sorted(mut extents: Vec<Extent>) -> Vec<(u64, usize)> {
    extents.sort_by_key(|e| (e.offset, e.len));
    extents.into_iter().map(|e| (e.offset, e.len)).collect()
}

/// Every block of a file of `len` bytes (the last one short), in a scrambled order, plus
/// a few unaligned ranges and an empty one.
fn scrambled_ranges(len: usize, block: usize) -> Vec<Extent> {
    let blocks = len.div_ceil(block);
    let mut extents: Vec<Extent> = (0..blocks)
        .map(|i| (i * 7) % blocks)
        .map(|i| Extent::new((i * block) as u64, block.min(len - i * block)))
        .collect();
    assert!(!blocks.is_multiple_of(7), "7 must be coprime with {blocks}");
    extents.insert(3, Extent::new(5, 3000));
    extents.insert(9, Extent::new(4096 + 1, block - 1));
    extents.push(Extent::new(100, 0));
    extents.push(Extent::new((len - 1) as u64, 1));
    extents
}

#[test]
fn a_stream_reads_every_range_exactly_once_on_every_engine() {
    let dir = temp_dir();
    let block = 8192;
    let len = 37 * 4096 + 123;
    let (path, bytes) = patterned_file(dir.path(), "s.bin", len);
    let extents = scrambled_ranges(len, block);
    // No split, a transfer size that is the block (passed through), and a smaller one (the
    // window is read as batches of transfers).
    for transfer_size in [None, Some(8192), Some(4096)] {
        for (label, engine) in local_engines(transfer_size) {
            let label = format!("{label} {transfer_size:?}");
            let storage = engine.storage();
            let mut handle = storage.open(&path).unwrap();
            let alignment = storage.capabilities().alignment;
            // An aligned window of 3 slots, and one whose every slot is misaligned (with
            // O_DIRECT those reads all take the bounce path).
            let mut window = IoBuffer::zeroed(3 * block + 1, alignment.max(4096)).unwrap();
            for (what, start) in [("aligned", 0), ("misaligned", 1)] {
                let window = &mut window[start..start + 3 * block];
                let consumed =
                    stream_checked(&mut *handle, window, block, &extents, &bytes, &label)
                        .unwrap_or_else(|e| panic!("{label} {what}: {e}"));
                assert_eq!(
                    sorted(consumed),
                    sorted(extents.clone()),
                    "{label} {what}: every range once"
                );
            }
        }
    }
}

#[test]
fn a_stream_range_past_the_end_fails_as_truncated_and_the_handle_still_reads() {
    let dir = temp_dir();
    let block = 4096;
    let len = 10 * 4096 + 100;
    let (path, bytes) = patterned_file(dir.path(), "t.bin", len);
    for transfer_size in [None, Some(4096)] {
        for (label, engine) in local_engines(transfer_size) {
            let storage = engine.storage();
            let mut handle = storage.open(&path).unwrap();
            let mut window = IoBuffer::zeroed(4 * block, DIRECT_ALIGNMENT).unwrap();
            for past_end in [
                // Straddles the end, unaligned.
                Extent::new(len as u64 - 5, 10),
                // Aligned, and wholly past the end.
                Extent::new(11 * 4096, 4096),
            ] {
                let extents = [Extent::new(0, 4096), past_end, Extent::new(4096, 4096)];
                let error =
                    stream_checked(&mut *handle, &mut window, block, &extents, &bytes, &label)
                        .unwrap_err();
                assert!(
                    matches!(error, StorageError::Truncated { .. }),
                    "{label} {transfer_size:?} {past_end:?}: {error}"
                );
            }
            let whole = scrambled_ranges(len, block);
            let consumed =
                stream_checked(&mut *handle, &mut window, block, &whole, &bytes, &label).unwrap();
            assert_eq!(consumed.len(), whole.len(), "{label}");
        }
    }
}

#[test]
fn a_stream_refuses_a_range_longer_than_its_block_and_a_window_without_a_block() {
    let dir = temp_dir();
    let (path, bytes) = patterned_file(dir.path(), "r.bin", 5 * 4096);
    for (label, engine) in local_engines(None) {
        let mut handle = engine.storage().open(&path).unwrap();
        let mut window = IoBuffer::zeroed(2 * 4096, DIRECT_ALIGNMENT).unwrap();
        let too_long = [Extent::new(0, 4097)];
        let error =
            stream_checked(&mut *handle, &mut window, 4096, &too_long, &bytes, &label).unwrap_err();
        assert!(
            matches!(error, StorageError::InvalidStream { .. }),
            "{label}: {error}"
        );
        let error = stream_checked(&mut *handle, &mut window[..100], 4096, &[], &bytes, &label)
            .unwrap_err();
        assert!(
            matches!(error, StorageError::InvalidStream { .. }),
            "{label}: {error}"
        );
    }
}

/// Block of the streams that stop at their first range: while that small range completes,
/// the others (this big, from the disk) are still in flight.
const SLOW_BLOCK: usize = 8 << 20;

/// A file of 4 big blocks, out of the page cache, and the ranges of a stream over it: a
/// small first range, then the blocks.
fn slow_stream_file(dir: &Path) -> (PathBuf, Vec<Extent>) {
    let path = dir.join("slow.bin");
    std::fs::write(&path, vec![7u8; 4 * SLOW_BLOCK]).unwrap();
    dlio_storage::drop_file_cache(&path).unwrap();
    let mut extents = vec![Extent::new(0, 4096)];
    extents.extend((1..4).map(|i| Extent::new((i * SLOW_BLOCK) as u64, SLOW_BLOCK)));
    extents.push(Extent::new(0, SLOW_BLOCK));
    (path, extents)
}

/// Paints `window`, gives a straggling read time to land, and says whether one did.
fn something_landed_in(window: &mut [u8]) -> bool {
    window.fill(0xEE);
    std::thread::sleep(std::time::Duration::from_millis(150));
    window.iter().any(|&b| b != 0xEE)
}

#[test]
fn a_consume_error_stops_the_stream_and_no_read_lands_in_the_window_afterwards() {
    let dir = temp_dir();
    let (path, extents) = slow_stream_file(dir.path());
    for (label, engine) in local_engines(None) {
        dlio_storage::drop_file_cache(&path).unwrap();
        let storage = engine.storage();
        let mut handle = storage.open(&path).unwrap();
        let mut window = IoBuffer::zeroed(4 * SLOW_BLOCK, DIRECT_ALIGNMENT).unwrap();
        let mut taken = 0;
        let mut counted = extents.iter().copied().inspect(|_| taken += 1);
        let mut calls = 0;
        let error = handle
            .read_stream(&mut window, SLOW_BLOCK, &mut counted, &mut |_, _| {
                calls += 1;
                Err(StorageError::Interrupted {
                    path: PathBuf::from("stop here"),
                })
            })
            .unwrap_err();
        assert!(
            matches!(error, StorageError::Interrupted { ref path } if path == Path::new("stop here")),
            "{label}: {error}"
        );
        assert_eq!(calls, 1, "{label}: consume is not called after its error");
        assert!(
            taken <= 4,
            "{label}: {taken} ranges taken for a window of 4"
        );
        assert!(
            !something_landed_in(&mut window),
            "{label}: a read landed in the window after the stream returned"
        );
        // The handle (and its thread's ring) still works.
        handle
            .read_stream(
                &mut window,
                SLOW_BLOCK,
                &mut extents.iter().copied(),
                &mut |_, _| Ok(()),
            )
            .unwrap();
    }
}

#[test]
fn a_panicking_consume_unwinds_only_after_every_read_is_done() {
    let dir = temp_dir();
    let (path, extents) = slow_stream_file(dir.path());
    for (label, engine) in local_engines(None) {
        dlio_storage::drop_file_cache(&path).unwrap();
        let storage = engine.storage();
        let mut handle = storage.open(&path).unwrap();
        let mut window = IoBuffer::zeroed(4 * SLOW_BLOCK, DIRECT_ALIGNMENT).unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = handle.read_stream(
                &mut window,
                SLOW_BLOCK,
                &mut extents.iter().copied(),
                &mut |_, _| panic!("consume gives up"),
            );
        }));
        assert!(unwound.is_err(), "{label}");
        assert!(
            !something_landed_in(&mut window),
            "{label}: a read landed in the window after the unwinding"
        );
        let mut consumed = 0;
        handle
            .read_stream(
                &mut window,
                SLOW_BLOCK,
                &mut extents.iter().copied(),
                &mut |_, got| {
                    assert!(got.iter().all(|&b| b == 7), "{label}");
                    consumed += 1;
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(consumed, extents.len(), "{label}");
    }
}

#[test]
fn a_consume_that_panics_amid_completions_reaped_together_does_not_hang() {
    // Page-cached reads complete at once, so one wait reaps several; `consume` panics on
    // the second of them. The engine must not then wait for completions it already took.
    let dir = temp_dir();
    let block = 4096;
    let (path, _) = patterned_file(dir.path(), "cached.bin", 32 * block);
    let extents: Vec<Extent> = (0..32)
        .map(|i| Extent::new((i * block) as u64, block))
        .collect();
    for (label, engine) in local_engines(None) {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (path, ranges) = (path.clone(), extents.clone());
        std::thread::spawn(move || {
            let storage = engine.storage();
            let mut handle = storage.open(&path).unwrap();
            let mut window = IoBuffer::zeroed(8 * block, DIRECT_ALIGNMENT).unwrap();
            let mut calls = 0;
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = handle.read_stream(
                    &mut window,
                    block,
                    &mut ranges.iter().copied(),
                    &mut |_, _| {
                        calls += 1;
                        if calls == 2 {
                            panic!("consume gives up");
                        }
                        Ok(())
                    },
                );
            }));
            // The handle still works afterwards.
            let mut consumed = 0;
            let again = handle.read_stream(
                &mut window,
                block,
                &mut ranges.iter().copied(),
                &mut |_, _| {
                    consumed += 1;
                    Ok(())
                },
            );
            let _ = done_tx.send((unwound.is_err(), again.is_ok(), consumed));
        });
        let outcome = done_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{label}: the stream hangs after consume panicked"));
        assert_eq!(outcome, (true, true, extents.len()), "{label}");
    }
}

#[test]
fn metered_counts_every_range_of_a_stream_with_its_own_latency() {
    let dir = temp_dir();
    let block = 8192;
    let len = 20 * block + 500;
    let (path, bytes) = patterned_file(dir.path(), "m.bin", len);
    let extents: Vec<Extent> = (0..21)
        .map(|i| Extent::new((i * block) as u64, block.min(len - i * block)))
        .collect();
    for transfer_size in [None, Some(8192), Some(4096)] {
        for (label, engine) in local_engines(transfer_size) {
            let counters = Arc::new(IoCounters::default());
            let storage = engine.metered(Arc::clone(&counters));
            let mut handle = storage.open(&path).unwrap();
            let mut window = IoBuffer::zeroed(4 * block, DIRECT_ALIGNMENT).unwrap();
            stream_checked(&mut *handle, &mut window, block, &extents, &bytes, &label).unwrap();
            let counts = counters.snapshot();
            assert_eq!(counts.bytes_read, len as u64, "{label} {transfer_size:?}");
            match transfer_size {
                Some(4096) => {
                    // Split into transfers (the tail of 500 bytes is one), read as one batch
                    // per window-full of 4 ranges.
                    assert_eq!(counts.read_requests, 41, "{label}: transfers");
                    assert_eq!(counters.read_latency().count(), 6, "{label}: batches");
                }
                _ => {
                    assert_eq!(counts.read_requests, 21, "{label} {transfer_size:?}");
                    assert_eq!(
                        counters.read_latency().count(),
                        21,
                        "{label} {transfer_size:?}: one latency per range"
                    );
                }
            }
        }
    }
}

/// A storage that records where each read's buffer starts past a page boundary, with its
/// length and file.
#[derive(Debug)]
struct BufferPlaces {
    inner: Arc<dyn Storage>,
    reads: Arc<std::sync::Mutex<Vec<(usize, usize, PathBuf)>>>,
}

impl dlio_storage::ForwardStorage for BufferPlaces {
    fn forward_to(&self) -> &dyn Storage {
        &*self.inner
    }
}

impl Storage for BufferPlaces {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        Ok(Box::new(PlacesRead {
            inner: self.inner.open(path)?,
            reads: Arc::clone(&self.reads),
        }))
    }
    dlio_storage::forward_storage!(
        engine,
        capabilities,
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

struct PlacesRead {
    inner: Box<dyn ReadHandle>,
    reads: Arc<std::sync::Mutex<Vec<(usize, usize, PathBuf)>>>,
}

impl PlacesRead {
    fn note(&self, buf: &[u8]) {
        let place = buf.as_ptr() as usize % dlio_storage::PAGE_BYTES;
        let file = self.inner.path().to_path_buf();
        self.reads.lock().unwrap().push((place, buf.len(), file));
    }
}

impl ReadHandle for PlacesRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        self.note(buf);
        self.inner.read_at(buf, offset)
    }
    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        self.note(buf);
        self.inner.read_exact_at(buf, offset)
    }
    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        for r in requests.iter() {
            self.note(r.buf);
        }
        self.inner.read_batch(requests)
    }
}

#[test]
fn buffer_page_offset_places_every_formats_sample_reads_past_a_page_boundary() {
    let dir = temp_dir();
    let posix = engine_for(&settings(EngineKind::Posix, false, None)).unwrap();
    let placed = engine_for(&EngineSettings {
        buffer_page_offset: Some(16),
        ..settings(EngineKind::Posix, false, None)
    })
    .unwrap();
    assert_eq!(placed.storage().capabilities().buffer_page_offset, Some(16));
    let mut checked = 0;
    for kind in FORMATS {
        if matches!(
            kind,
            FormatKind::Synthetic | FormatKind::MmapIndexedBinary | FormatKind::Parquet
        ) {
            // No reads; reads through a memory map; parquet's whole-file layout, which
            // parquet-rs decodes through a buffered reader of its own.
            continue;
        }
        let format = match format_for(kind) {
            Ok(format) => format,
            Err(_) if kind == FormatKind::Hdf5 => continue,
            Err(e) => panic!("{}: {e}", kind.name()),
        };
        let path = dir.path().join(format!("a.{}", format.extension()));
        format
            .generate(
                &*posix.storage(),
                &path,
                &layout(),
                &mut DataRng::for_file(42, 0, 1),
            )
            .unwrap_or_else(|e| panic!("generate {}: {e}", kind.name()));
        let expected = read_samples(&*format, &*posix.storage(), &path);
        let recorder = BufferPlaces {
            inner: placed.storage(),
            reads: Arc::default(),
        };
        let got = read_samples(&*format, &recorder, &path);
        assert_eq!(got, expected, "{}: other bytes when placed", kind.name());
        let reads = recorder.reads.lock().unwrap().clone();
        // Reads of the data file (an index file beside it is read where the engine likes).
        let reads: Vec<_> = reads
            .into_iter()
            .filter(|(_, _, file)| *file == path)
            .collect();
        let unplaced: Vec<_> = reads.iter().filter(|&(place, _, _)| *place != 16).collect();
        assert!(
            !reads.is_empty() && unplaced.is_empty(),
            "{}: reads not 16 bytes past a page: {unplaced:?} (all: {reads:?})",
            kind.name()
        );
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} formats were checked");
}

#[test]
fn buffer_page_offset_is_refused_with_o_direct() {
    let refused = engine_for(&EngineSettings {
        buffer_page_offset: Some(16),
        ..settings(EngineKind::Direct, false, None)
    });
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("buffer_page_offset"), "{message}");
}
