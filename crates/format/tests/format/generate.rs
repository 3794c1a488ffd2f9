//! The generation driver: resumable, cancellable, and precise about failures.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{
    FileLayout, FormatError, GenerationFile, GenerationJob, GenerationProgress, GenerationReport,
    generate,
};
use dlio_storage::{
    Capabilities, DirEntry, PosixStorage, ReadHandle, Storage, StorageError, WriteHandle,
};

use crate::common::{format, layout};

fn files(dir: &Path, n: u64, layout: &FileLayout) -> Vec<GenerationFile> {
    (0..n)
        .map(|i| GenerationFile {
            path: dir.join(format!("train/{}/img_{i}_of_{n}.npz", i % 2)),
            layout: layout.clone(),
            list_id: 0,
            file_index: i,
        })
        .collect()
}

fn run(
    storage: &dyn Storage,
    files: Vec<GenerationFile>,
    threads: usize,
    cancel: &AtomicBool,
) -> Result<GenerationReport, FormatError> {
    let npz = format(FormatKind::Npz);
    generate(
        GenerationJob {
            storage,
            format: &*npz,
            files,
            threads,
            seed: 42,
        },
        &|_| {},
        cancel,
    )
}

fn small() -> FileLayout {
    layout(2, &[32, 32], ElementType::Uint8, Compression::None)
}

fn tree(dir: &Path) -> Vec<(String, u64)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.push((name, std::fs::metadata(&path).unwrap().len()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn writes_every_file_then_skips_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let layout = small();
    let size = format(FormatKind::Npz).expected_size(&layout).unwrap();
    let no = AtomicBool::new(false);

    let first = run(&storage, files(dir.path(), 7, &layout), 2, &no).unwrap();
    assert_eq!(
        first,
        GenerationReport {
            files_written: 7,
            files_skipped: 0,
            bytes_written: 7 * size,
            partials_removed: 0
        }
    );
    let listing = tree(dir.path());
    assert_eq!(listing.len(), 7);
    assert!(
        listing
            .iter()
            .all(|(name, len)| *len == size && !name.contains("partial")),
        "{listing:?}"
    );

    let second = run(&storage, files(dir.path(), 7, &layout), 2, &no).unwrap();
    assert_eq!(
        second,
        GenerationReport {
            files_written: 0,
            files_skipped: 7,
            bytes_written: 0,
            partials_removed: 0
        }
    );
}

#[test]
fn a_file_of_the_wrong_size_is_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let layout = small();
    let no = AtomicBool::new(false);
    run(&storage, files(dir.path(), 3, &layout), 1, &no).unwrap();
    let victim = dir.path().join("train/1/img_1_of_3.npz");
    let good = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &good[..100]).unwrap();

    let report = run(&storage, files(dir.path(), 3, &layout), 1, &no).unwrap();

    assert_eq!((report.files_written, report.files_skipped), (1, 2));
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        good,
        "same seed, same bytes"
    );
}

#[test]
fn stale_partial_files_of_the_job_are_removed_and_their_files_written() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let layout = small();
    let train0 = dir.path().join("train/0");
    std::fs::create_dir_all(&train0).unwrap();
    std::fs::write(train0.join(".img_0_of_2.npz.partial"), b"crashed here").unwrap();
    // Another rank's file: it may be being written right now, so it is left alone.
    std::fs::write(train0.join(".img_8_of_9.npz.partial"), b"someone else's").unwrap();

    let report = run(
        &storage,
        files(dir.path(), 2, &layout),
        2,
        &AtomicBool::new(false),
    )
    .unwrap();

    assert_eq!((report.files_written, report.partials_removed), (2, 1));
    let names: Vec<String> = tree(dir.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "train/0/.img_8_of_9.npz.partial",
            "train/0/img_0_of_2.npz",
            "train/1/img_1_of_2.npz"
        ]
    );
}

#[test]
fn the_same_seed_generates_identical_datasets() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let storage = PosixStorage::new();
    let no = AtomicBool::new(false);
    run(&storage, files(a.path(), 4, &small()), 2, &no).unwrap();
    run(&storage, files(b.path(), 4, &small()), 1, &no).unwrap();
    for (name, _) in tree(a.path()) {
        assert_eq!(
            std::fs::read(a.path().join(&name)).unwrap(),
            std::fs::read(b.path().join(&name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn progress_ends_with_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let layout = small();
    let size = format(FormatKind::Npz).expected_size(&layout).unwrap();
    let seen = Mutex::new(Vec::new());
    let npz = format(FormatKind::Npz);
    let job = GenerationJob {
        storage: &PosixStorage::new(),
        format: &*npz,
        files: files(dir.path(), 5, &layout),
        threads: 2,
        seed: 1,
    };
    generate(
        job,
        &|p| seen.lock().unwrap().push(p),
        &AtomicBool::new(false),
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen.last(),
        Some(&GenerationProgress {
            files_done: 5,
            files_total: 5,
            bytes_done: 5 * size
        })
    );
    assert!(seen.windows(2).all(|w| w[0].files_done <= w[1].files_done));
}

#[test]
fn cancelled_before_start_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let result = run(
        &PosixStorage::new(),
        files(dir.path(), 3, &small()),
        2,
        &AtomicBool::new(true),
    );
    assert!(
        matches!(result, Err(FormatError::Interrupted)),
        "{result:?}"
    );
    assert!(tree(dir.path()).is_empty());
}

/// A `posix` storage whose writes call a hook first (to fail, or to pull the cancel flag).
#[derive(Debug)]
struct Hooked {
    inner: PosixStorage,
    hook: Arc<Hook>,
}

/// Called before each write with the file and the number of earlier writes.
type WriteHook = Box<dyn Fn(&Path, u64) -> Result<(), StorageError> + Send + Sync>;

struct Hook {
    writes: AtomicU64,
    on_write: WriteHook,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl Hooked {
    fn new(
        on_write: impl Fn(&Path, u64) -> Result<(), StorageError> + Send + Sync + 'static,
    ) -> Hooked {
        Hooked {
            inner: PosixStorage::new(),
            hook: Arc::new(Hook {
                writes: AtomicU64::new(0),
                on_write: Box::new(on_write),
            }),
        }
    }
}

impl Storage for Hooked {
    fn engine(&self) -> &'static str {
        "hooked"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        self.inner.open(path)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        Ok(Box::new(HookedWrite {
            inner: self.inner.create(path)?,
            hook: Arc::clone(&self.hook),
        }))
    }
    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        self.inner.list(dir)
    }
    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        self.inner.size(path)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        self.inner.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        self.inner.remove_dir_all(dir)
    }
    fn partial_path(&self, path: &Path) -> Option<PathBuf> {
        self.inner.partial_path(path)
    }
}

struct HookedWrite {
    inner: Box<dyn WriteHandle>,
    hook: Arc<Hook>,
}

impl WriteHandle for HookedWrite {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let call = self.hook.writes.fetch_add(1, Ordering::SeqCst);
        (self.hook.on_write)(self.inner.path(), call)?;
        self.inner.write_all(data)
    }
    fn sync(&mut self) -> Result<(), StorageError> {
        self.inner.sync()
    }
    fn commit(self: Box<Self>) -> Result<u64, StorageError> {
        self.inner.commit()
    }
}

#[test]
fn cancel_during_a_file_stops_promptly_and_removes_the_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    // 3 MiB of samples per file: each file takes several write calls.
    let layout = layout(3, &[1024, 1024], ElementType::Uint8, Compression::None);
    let cancel = Arc::new(AtomicBool::new(false));
    let pull = Arc::clone(&cancel);
    // Writes per file: x header, 3 chunks, y header, y data, descriptors and directory.
    let storage = Hooked::new(move |_, call| {
        if call == 12 {
            pull.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100)); // a slow write; cancellation lands meanwhile
        }
        Ok(())
    });

    let result = run(&storage, files(dir.path(), 4, &layout), 1, &cancel);

    assert!(
        matches!(result, Err(FormatError::Interrupted)),
        "{result:?}"
    );
    let left = tree(dir.path());
    assert!(
        !left.is_empty() && left.len() < 4,
        "some but not all files were finished: {left:?}"
    );
    assert!(
        left.iter().all(|(name, _)| !name.contains("partial")),
        "{left:?}"
    );
    assert!(
        storage.hook.writes.load(Ordering::SeqCst) <= 14,
        "stopped within a write or two"
    );

    let resumed = run(
        &PosixStorage::new(),
        files(dir.path(), 4, &layout),
        2,
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(resumed.files_written + resumed.files_skipped, 4);
    assert_eq!(resumed.files_skipped, left.len() as u64);
}

#[test]
fn a_failing_write_names_the_file_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Hooked::new(|path, _| {
        if path.ends_with("img_2_of_4.npz") {
            return Err(StorageError::Io {
                op: "write",
                path: path.to_path_buf(),
                source: std::io::Error::from(std::io::ErrorKind::StorageFull),
            });
        }
        Ok(())
    });

    let error = run(
        &storage,
        files(dir.path(), 4, &small()),
        1,
        &AtomicBool::new(false),
    )
    .unwrap_err();

    let message = error.to_string();
    assert!(
        matches!(error, FormatError::Generation { ref path, .. } if path.ends_with("img_2_of_4.npz")),
        "{error:?}"
    );
    assert!(
        message.contains("img_2_of_4.npz") && message.contains("disk is full"),
        "{message}"
    );
    let left: Vec<String> = tree(dir.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(left, ["train/0/img_0_of_4.npz", "train/1/img_1_of_4.npz"]);
}
