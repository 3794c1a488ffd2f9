//! Behaviour of the `posix` engine and the `Metered` decorator, through the `Storage` trait.

use std::path::Path;

use dlio_storage::{
    IoCountersSnapshot, Metered, PosixStorage, ReadRequest, Storage, StorageError, WriteHandle,
};

fn write_file(storage: &dyn Storage, path: &Path, chunks: &[&[u8]]) -> u64 {
    let mut writer = storage.create(path).unwrap();
    for chunk in chunks {
        writer.write_all(chunk).unwrap();
    }
    writer.commit().unwrap()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn written_bytes_read_back_at_any_offset() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("a/b/data.bin");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();

    let written = write_file(
        &storage,
        &path,
        &[&data[..1], &data[1..4096], &data[4096..]],
    );

    assert_eq!(written, 10_000);
    assert_eq!(std::fs::read(&path).unwrap(), data);
    let mut reader = storage.open(&path).unwrap();
    assert_eq!(reader.len(), 10_000);
    assert_eq!(reader.path(), path);
    let mut middle = vec![0u8; 3000];
    reader.read_exact_at(&mut middle, 5000).unwrap();
    assert_eq!(middle, &data[5000..8000]);
    let mut tail = [0u8; 16];
    assert_eq!(reader.read_at(&mut tail, 9_990).unwrap(), 10);
    assert_eq!(&tail[..10], &data[9_990..]);
    assert_eq!(reader.read_at(&mut tail, 10_000).unwrap(), 0);
}

#[test]
fn read_batch_fills_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("batch.bin");
    let data: Vec<u8> = (0..=255u8).collect();
    write_file(&storage, &path, &[&data]);

    let mut reader = storage.open(&path).unwrap();
    let (mut a, mut b) = ([0u8; 4], [0u8; 2]);
    let mut requests = [
        ReadRequest {
            offset: 200,
            buf: &mut a,
        },
        ReadRequest {
            offset: 3,
            buf: &mut b,
        },
    ];
    reader.read_batch(&mut requests).unwrap();
    assert_eq!(a, [200, 201, 202, 203]);
    assert_eq!(b, [3, 4]);
}

#[test]
fn truncated_read_names_the_file_and_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("short.npz");
    write_file(&storage, &path, &[&[1u8; 100]]);

    let mut reader = storage.open(&path).unwrap();
    let mut buf = [0u8; 64];
    let error = reader.read_exact_at(&mut buf, 60).unwrap_err();

    assert!(
        matches!(error, StorageError::Truncated { ref path, offset: 100, wanted: 24 } if path.ends_with("short.npz")),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("short.npz"), "{message}");
    assert!(
        message.contains("wanted 24 bytes at offset 100"),
        "{message}"
    );
}

#[test]
fn nothing_is_visible_until_commit() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("late.bin");
    let mut writer = storage.create(&path).unwrap();
    writer.write_all(b"abc").unwrap();
    assert_eq!(storage.size(&path).unwrap(), None);
    assert_eq!(names_in(dir.path()), [".late.bin.partial"]);
    assert_eq!(
        storage.partial_path(&path).unwrap(),
        dir.path().join(".late.bin.partial")
    );
    writer.commit().unwrap();
    assert_eq!(names_in(dir.path()), ["late.bin"]);
}

#[test]
fn dropped_writer_leaves_neither_final_nor_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("abandoned.bin");
    let mut writer = storage.create(&path).unwrap();
    writer.write_all(&[7u8; 3 << 20]).unwrap();
    drop(writer);
    assert!(
        names_in(dir.path()).is_empty(),
        "{:?}",
        names_in(dir.path())
    );
}

#[test]
fn commit_replaces_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("file.bin");
    write_file(&storage, &path, &[b"old content, longer"]);

    let mut writer = storage.create(&path).unwrap();
    writer.write_all(b"new").unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"old content, longer",
        "old file intact before commit"
    );
    writer.commit().unwrap();

    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert_eq!(names_in(dir.path()), ["file.bin"]);
}

#[test]
fn create_over_a_stale_partial_file_starts_from_empty() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let path = dir.path().join("f.bin");
    std::fs::write(dir.path().join(".f.bin.partial"), b"left by a crash").unwrap();
    write_file(&storage, &path, &[b"ok"]);
    assert_eq!(std::fs::read(&path).unwrap(), b"ok");
    assert_eq!(names_in(dir.path()), ["f.bin"]);
}

#[test]
fn list_is_sorted_and_reports_sizes_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    for name in ["c.npz", "a.npz", "b.npz"] {
        write_file(&storage, &dir.path().join(name), &[name.as_bytes(), b"!"]);
    }
    storage
        .create_dir_all(&dir.path().join("sub/deeper"))
        .unwrap();

    let entries = storage.list(dir.path()).unwrap();

    let summary: Vec<(String, bool, Option<u64>)> = entries
        .iter()
        .map(|e| {
            (
                e.path.file_name().unwrap().to_string_lossy().into_owned(),
                e.is_dir,
                e.len,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a.npz".to_string(), false, None),
            ("b.npz".to_string(), false, None),
            ("c.npz".to_string(), false, None),
            ("sub".to_string(), true, None),
        ]
    );
    assert_eq!(entries[0].path, dir.path().join("a.npz"));
}

#[test]
fn missing_paths_are_not_found_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let missing = dir.path().join("missing.npz");
    assert_eq!(storage.size(&missing).unwrap(), None);
    assert!(
        matches!(storage.open(&missing), Err(StorageError::NotFound { ref path }) if *path == missing)
    );
    assert!(matches!(
        storage.list(&missing),
        Err(StorageError::NotFound { .. })
    ));
    assert!(matches!(
        storage.remove_file(&missing),
        Err(StorageError::NotFound { .. })
    ));
}

#[test]
fn remove_file_and_remove_dir_all_delete() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let root = dir.path().join("tree");
    write_file(&storage, &root.join("x/1.bin"), &[b"1"]);
    write_file(&storage, &root.join("2.bin"), &[b"2"]);
    storage.remove_file(&root.join("2.bin")).unwrap();
    assert_eq!(storage.size(&root.join("2.bin")).unwrap(), None);
    storage.remove_dir_all(&root).unwrap();
    assert!(!root.exists());
}

#[test]
fn opening_a_directory_is_not_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    assert!(matches!(
        storage.open(dir.path()),
        Err(StorageError::NotAFile { .. })
    ));
}

#[test]
fn metered_counts_exact_operations_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Metered::new(PosixStorage::new());
    assert_eq!(storage.engine(), "posix");
    let path = dir.path().join("m.bin");
    let before = storage.counters().snapshot();

    let mut writer = storage.create(&path).unwrap();
    writer.write_all(&[1u8; 1000]).unwrap();
    writer.write_all(&[2u8; 24]).unwrap();
    writer.commit().unwrap();
    let mut reader = storage.open(&path).unwrap();
    let mut buf = [0u8; 100];
    reader.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(reader.read_at(&mut buf, 1000).unwrap(), 24);
    let (mut a, mut b) = ([0u8; 10], [0u8; 20]);
    reader
        .read_batch(&mut [
            ReadRequest {
                offset: 0,
                buf: &mut a,
            },
            ReadRequest {
                offset: 500,
                buf: &mut b,
            },
        ])
        .unwrap();
    assert!(
        reader.read_exact_at(&mut buf, 1000).is_err(),
        "failed reads are not counted"
    );
    storage.list(dir.path()).unwrap();

    let delta = storage.counters().snapshot() - before;
    assert_eq!(
        delta,
        IoCountersSnapshot {
            opens: 1,
            creates: 1,
            read_requests: 4,
            bytes_read: 100 + 24 + 10 + 20,
            write_requests: 2,
            bytes_written: 1024,
            lists: 1,
        }
    );
    assert_eq!((delta + delta).bytes_read, 308);
    assert_eq!(
        (before - delta).bytes_read,
        0,
        "subtraction saturates instead of panicking"
    );
}

#[test]
fn metered_storages_can_share_counters() {
    let dir = tempfile::tempdir().unwrap();
    let first = Metered::new(PosixStorage::new());
    let second = Metered::with_counters(PosixStorage::new(), first.counters().clone());
    write_file(&first, &dir.path().join("1"), &[b"ab"]);
    write_file(&second, &dir.path().join("2"), &[b"cde"]);
    assert_eq!(first.counters().snapshot().bytes_written, 5);
}

#[test]
fn metered_uncommitted_writer_still_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Metered::new(PosixStorage::new());
    let writer: Box<dyn WriteHandle> = storage.create(&dir.path().join("x")).unwrap();
    drop(writer);
    assert!(names_in(dir.path()).is_empty());
}

/// Every engine that opens local files refuses a FIFO at once: the open must not wait for a
/// writer (which would hang the run, deaf to Ctrl-C).
#[test]
fn a_fifo_is_refused_at_open_by_every_local_engine_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("img_0_of_1.npz");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let engines: Vec<Box<dyn Storage>> = vec![
        Box::new(PosixStorage::new()),
        Box::new(dlio_storage::MmapStorage::new()),
        Box::new(dlio_storage::DirectStorage::new()),
    ];
    for storage in engines {
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let result = storage.open(&path).map(|_| ());
            let _ = tx.send((storage.engine(), result));
        });
        let (engine, result) = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("open of a FIFO blocked");
        match result {
            Err(StorageError::NotAFile { path }) => assert_eq!(path, fifo, "{engine}"),
            // O_DIRECT may be refused by the file system before the type is checked.
            Err(StorageError::DirectIoUnsupported { .. }) if engine == "direct" => {}
            other => panic!("{engine}: {other:?}"),
        }
    }
}

#[test]
fn a_mapped_file_truncated_after_open_is_an_error_naming_it_not_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.bin");
    std::fs::write(&path, vec![7u8; 64 * 1024]).unwrap();
    let storage = dlio_storage::MmapStorage::new();
    let mut handle = storage.open(&path).unwrap();
    let mut buf = vec![0u8; 4096];
    assert_eq!(handle.read_at(&mut buf, 0).unwrap(), 4096);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    let error = handle.read_at(&mut buf, 32 * 1024).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("data.bin"), "{text}");
    assert!(text.contains("shrank from 65536 to 100 bytes"), "{text}");
}
