//! The generation driver behind `dlio generate` and `workflow.generate_data`: writes a list
//! of files with a pool of threads, skipping what is already complete, so that an
//! interrupted generation resumes where it stopped.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dlio_storage::{ForwardStorage, Storage, StorageError, WriteHandle};

use crate::{DataRng, FileLayout, Format, FormatError};

/// Time between two progress calls.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// How often the calling thread checks for cancellation and finished workers.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// What to generate, and how.
pub struct GenerationJob<'a> {
    /// Where the files go.
    pub storage: &'a dyn Storage,
    /// What they hold.
    pub format: &'a dyn Format,
    /// The files this process writes (e.g. this rank's share).
    pub files: Vec<GenerationFile>,
    /// Worker threads (0 counts as 1).
    pub threads: usize,
    /// Dataset seed: the same seed regenerates identical files.
    pub seed: u64,
}

/// One file to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationFile {
    /// Final path of the file.
    pub path: PathBuf,
    /// What it holds.
    pub layout: FileLayout,
    /// Which list it belongs to (train, valid, ...), for its random stream.
    pub list_id: u32,
    /// Its index in that list, for its random stream.
    pub file_index: u64,
}

/// What a generation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenerationReport {
    /// Files written.
    pub files_written: u64,
    /// Files left alone because they were already complete.
    pub files_skipped: u64,
    /// Bytes in the files written.
    pub bytes_written: u64,
    /// Temporary files of an earlier, interrupted generation that were removed.
    pub partials_removed: u64,
}

/// Progress so far, passed to the progress callback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenerationProgress {
    /// Files written or skipped.
    pub files_done: u64,
    /// Files in the job.
    pub files_total: u64,
    /// Bytes written so far (including files still being written).
    pub bytes_done: u64,
}

/// Generates `job.files` with `job.threads` threads.
///
/// A file that already exists under its final name is complete (files are published by
/// rename) and is skipped, unless the format knows the size it must have and the file has
/// another one (e.g. the layout changed), in which case it is written again. Temporary files
/// left by a crash are removed first, but only those of files in this job: another process
/// (another rank) may be writing its own files in the same directory right now.
///
/// `progress` is called every 100 ms while files are written, and once at the end, always
/// from the calling thread. Setting `cancel` stops the workers within one write chunk;
/// unfinished files are removed and [`FormatError::Interrupted`] is returned. On any other
/// error the workers stop, the unfinished files are removed, and the first error is
/// returned naming its file.
pub fn generate(
    job: GenerationJob<'_>,
    progress: &(dyn Fn(GenerationProgress) + Sync),
    cancel: &AtomicBool,
) -> Result<GenerationReport, FormatError> {
    let GenerationJob {
        storage,
        format,
        files,
        threads,
        seed,
    } = job;
    let (todo, partials_removed) = survey(storage, format, &files)?;
    let skipped = (files.len() - todo.len()) as u64;

    let shared = Arc::new(Shared::default());
    shared.files_done.store(skipped, Ordering::Relaxed);
    let writer = StoppableStorage {
        inner: storage,
        shared: Arc::clone(&shared),
    };
    let next = AtomicUsize::new(0);
    let written = AtomicU64::new(0);
    let bytes_written = AtomicU64::new(0);
    let first_error: Mutex<Option<FormatError>> = Mutex::new(None);
    let threads = threads.clamp(1, todo.len().max(1));
    let running = AtomicUsize::new(threads);

    let worker = || {
        while !shared.stop.load(Ordering::Relaxed) && !cancel.load(Ordering::Relaxed) {
            let Some(&file_number) = todo.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            let file = &files[file_number];
            let mut rng = DataRng::for_file(seed, file.list_id, file.file_index);
            match format.generate(&writer, &file.path, &file.layout, &mut rng) {
                Ok(bytes) => {
                    written.fetch_add(1, Ordering::Relaxed);
                    bytes_written.fetch_add(bytes, Ordering::Relaxed);
                    shared.files_done.fetch_add(1, Ordering::Relaxed);
                }
                Err(FormatError::Storage(StorageError::Interrupted { .. })) => break,
                Err(error) => {
                    shared.stop.store(true, Ordering::Relaxed);
                    let mut slot = first_error
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    slot.get_or_insert(FormatError::Generation {
                        path: file.path.clone(),
                        error: Box::new(error),
                    });
                    break;
                }
            }
        }
        running.fetch_sub(1, Ordering::Release);
    };
    let report_progress = || {
        progress(GenerationProgress {
            files_done: shared.files_done.load(Ordering::Relaxed),
            files_total: files.len() as u64,
            bytes_done: shared.bytes_done.load(Ordering::Relaxed),
        })
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(worker);
        }
        // This thread relays cancellation to the writers (whose handles cannot borrow
        // `cancel`) and reports progress.
        let mut last_report = Instant::now();
        while running.load(Ordering::Acquire) > 0 {
            std::thread::sleep(POLL_INTERVAL);
            if cancel.load(Ordering::Relaxed) {
                shared.stop.store(true, Ordering::Relaxed);
            }
            if last_report.elapsed() >= PROGRESS_INTERVAL {
                report_progress();
                last_report = Instant::now();
            }
        }
    });
    report_progress();

    if let Some(error) = first_error
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
    {
        return Err(error);
    }
    let report = GenerationReport {
        files_written: written.into_inner(),
        files_skipped: skipped,
        bytes_written: bytes_written.into_inner(),
        partials_removed,
    };
    if report.files_written + report.files_skipped < files.len() as u64 {
        return Err(FormatError::Interrupted);
    }
    Ok(report)
}

/// Lists each target directory once; removes this job's stale partial files; returns the
/// indices of the files to write and the number of partial files removed.
fn survey(
    storage: &dyn Storage,
    format: &dyn Format,
    files: &[GenerationFile],
) -> Result<(Vec<usize>, u64), FormatError> {
    let sizes = existing_sizes(storage, files)?;
    let mut partials_removed = 0;
    let mut todo = Vec::with_capacity(files.len());
    for (number, file) in files.iter().enumerate() {
        if let Some(partial) = storage.partial_path(&file.path)
            && sizes.contains_key(&partial)
        {
            match storage.remove_file(&partial) {
                Ok(()) => partials_removed += 1,
                Err(StorageError::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let complete = match (sizes.get(&file.path), format.expected_size(&file.layout)) {
            (None, _) => false,
            (Some(&size), Some(expected)) => size == expected,
            (Some(_), None) => true,
        };
        if !complete {
            todo.push(number);
        }
    }
    Ok((todo, partials_removed))
}

/// The size of every file already in the folders of `files` (each folder listed once), keyed
/// by the same spelling as the job's paths.
fn existing_sizes(
    storage: &dyn Storage,
    files: &[GenerationFile],
) -> Result<HashMap<PathBuf, u64>, FormatError> {
    let directories: BTreeSet<&Path> = files.iter().filter_map(|f| f.path.parent()).collect();
    let mut sizes: HashMap<PathBuf, u64> = HashMap::new();
    for dir in directories {
        let listed = if dir.as_os_str().is_empty() {
            storage.list(Path::new("."))
        } else {
            storage.list(dir)
        };
        match listed {
            Ok(entries) => {
                for entry in entries.into_iter().filter(|e| !e.is_dir) {
                    let len = match entry.len {
                        Some(len) => len,
                        None => match storage.size(&entry.path) {
                            Ok(Some(len)) => len,
                            // Gone since the listing, or not a regular file: not one of ours.
                            Ok(None) | Err(StorageError::NotAFile { .. }) => continue,
                            Err(error) => return Err(error.into()),
                        },
                    };
                    // `list(".")` yields "./name"; key by the same spelling as the job's paths.
                    sizes.insert(dir.join(file_name(&entry.path)), len);
                }
            }
            Err(StorageError::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(sizes)
}

fn file_name(path: &Path) -> &std::ffi::OsStr {
    path.file_name().unwrap_or(path.as_os_str())
}

/// State shared with the write handles (which must be `'static`).
#[derive(Debug, Default)]
struct Shared {
    /// Set on cancellation or on a worker's error: writers refuse further bytes.
    stop: AtomicBool,
    files_done: AtomicU64,
    bytes_done: AtomicU64,
}

/// The storage the formats write through during generation: every append first checks
/// the stop flag and counts bytes for progress.
#[derive(Debug)]
struct StoppableStorage<'a> {
    inner: &'a dyn Storage,
    shared: Arc<Shared>,
}

impl ForwardStorage for StoppableStorage<'_> {
    fn forward_to(&self) -> &dyn Storage {
        self.inner
    }
}

impl Storage for StoppableStorage<'_> {
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let inner = self.inner.create(path)?;
        Ok(Box::new(StoppableWrite {
            inner,
            shared: Arc::clone(&self.shared),
        }))
    }

    dlio_storage::forward_storage!(
        engine,
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

/// A write handle that refuses to go on once generation stops.
struct StoppableWrite {
    inner: Box<dyn WriteHandle>,
    shared: Arc<Shared>,
}

impl WriteHandle for StoppableWrite {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        if self.shared.stop.load(Ordering::Relaxed) {
            return Err(StorageError::Interrupted {
                path: self.inner.path().to_path_buf(),
            });
        }
        self.inner.write_all(data)?;
        self.shared
            .bytes_done
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn fill_in_place(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<bool, StorageError> {
        if self.shared.stop.load(Ordering::Relaxed) {
            return Err(StorageError::Interrupted {
                path: self.inner.path().to_path_buf(),
            });
        }
        let filled = self.inner.fill_in_place(len, fill)?;
        if filled {
            self.shared
                .bytes_done
                .fetch_add(len as u64, Ordering::Relaxed);
        }
        Ok(filled)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.inner.sync()
    }

    /// A file whose bytes are all written is published even if cancellation arrived
    /// meanwhile: it is complete, and the next run need not write it again.
    fn commit(self: Box<Self>) -> Result<u64, StorageError> {
        self.inner.commit()
    }
}

/// The name of the file, in the data set's root folder, that records which generation wrote the
/// files beside it (see [`dataset_fingerprint`]).
pub const MANIFEST_NAME: &str = ".dlio-generation";

/// A fingerprint of what a generation writes: the format and its settings, the seed, and every
/// file's name, list, index and layout. Two configs that would write different bytes (other
/// sizes, dims, compression, format options or seed) have different fingerprints; where the
/// data set lives does not count, so a moved data set keeps its fingerprint.
///
/// `files` is the whole data set (every process's share), in generation order.
pub fn dataset_fingerprint(format: &dyn Format, seed: u64, files: &[GenerationFile]) -> u64 {
    use std::hash::Hasher;
    use std::io::Write;
    let mut hasher = twox_hash::XxHash3_64::with_seed(0);
    let mut text = Vec::with_capacity(256);
    let _ = write!(text, "{format:?}|{seed}");
    hasher.write(&text);
    for file in files {
        text.clear();
        let _ = write!(
            text,
            "|{}|{}|{}|{:?}",
            Path::new(file_name(&file.path)).display(),
            file.list_id,
            file.file_index,
            file.layout
        );
        hasher.write(&text);
    }
    hasher.finish()
}

/// The fingerprint recorded in `root`'s manifest, if there is a readable one.
pub fn read_manifest(storage: &dyn Storage, root: &Path) -> Option<u64> {
    let mut slot = None;
    let buffer =
        crate::ranged::read_whole_file(storage, &root.join(MANIFEST_NAME), &mut slot).ok()?;
    let text = std::str::from_utf8(buffer).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("fingerprint "))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// Records `fingerprint` in `root`'s manifest (published whole, by the storage's commit).
pub fn write_manifest(
    storage: &dyn Storage,
    root: &Path,
    fingerprint: u64,
    files: u64,
) -> Result<(), FormatError> {
    let text = format!(
        "dlio generation manifest: the files below this folder are what a config of this \
         fingerprint writes\nfingerprint {fingerprint:016x}\nfiles {files}\n"
    );
    let mut handle = storage.create(&root.join(MANIFEST_NAME))?;
    handle.write_all(text.as_bytes())?;
    handle.commit()?;
    Ok(())
}

/// Removes the files of `files` that exist but whose completeness their size cannot prove
/// (formats of no fixed size: jpeg, png, csv, parquet, compressed npz), for a data set that no
/// manifest vouches for: they may be what another config wrote. Files of a known size are left
/// for the generation's size check. Returns how many were removed.
pub fn remove_unverifiable(
    storage: &dyn Storage,
    format: &dyn Format,
    files: &[GenerationFile],
) -> Result<u64, FormatError> {
    // One listing per folder, then removals of what is there: a first generation (nothing
    // there) costs no call per file, and an object store is not sent a DELETE per object.
    let existing = existing_sizes(storage, files)?;
    let mut removed = 0;
    for file in files {
        if !existing.contains_key(&file.path) || format.expected_size(&file.layout).is_some() {
            continue;
        }
        match storage.remove_file(&file.path) {
            Ok(()) => removed += 1,
            Err(StorageError::NotFound { .. }) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(removed)
}
