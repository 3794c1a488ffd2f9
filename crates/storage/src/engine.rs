//! Choosing an engine from plain settings (the CLI maps the workload's keys onto
//! [`EngineSettings`]; this crate does not know the config crate), and [`Engine`], which
//! hands out the storages a run uses: plain for generation, listing and checkpoints, metered
//! per rank for training, both with `reader.transfer_size` applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::direct::DIRECT_ALIGNMENT;
use crate::{
    Capabilities, DirEntry, DirectStorage, IoCounters, Metered, MmapStorage, PatternRequest,
    PosixStorage, ReadHandle, RequestSizes, S3Settings, S3Storage, SizeDistribution, SplitReads,
    Storage, StorageError, Throttled, UringStorage, WriteHandle,
};

/// The engines, as `storage.io_engine` (and `storage.storage_type: s3`) select them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EngineKind {
    /// Buffered `pread`/`write` through the page cache.
    #[default]
    Posix,
    /// O_DIRECT with aligned buffers.
    Direct,
    /// Reads copy out of a read-only mapping.
    Mmap,
    /// io_uring with `io_depth` reads in flight per reader thread.
    IoUring,
    /// An S3 bucket.
    S3,
}

/// One row of [`ENGINES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineInfo {
    /// Which engine.
    pub kind: EngineKind,
    /// Its name in `storage.io_engine` and in outputs.
    pub name: &'static str,
    /// How it reads.
    pub reads: &'static str,
    /// How it writes (generation, checkpoints).
    pub writes: &'static str,
}

/// Every engine, in the order the documentation lists them.
pub const ENGINES: &[EngineInfo] = &[
    EngineInfo {
        kind: EngineKind::Posix,
        name: "posix",
        reads: "pread through the page cache",
        writes: "buffered writes to a temporary name, rename at commit",
    },
    EngineInfo {
        kind: EngineKind::Direct,
        name: "direct",
        reads: "O_DIRECT pread into 4096-aligned buffers (unaligned parts through a bounce buffer)",
        writes: "O_DIRECT writes of whole 4096-byte blocks, last block truncated to size",
    },
    EngineInfo {
        kind: EngineKind::Mmap,
        name: "mmap",
        reads: "copy out of a read-only shared mapping (page faults do the I/O)",
        writes: "as posix",
    },
    EngineInfo {
        kind: EngineKind::IoUring,
        name: "io_uring",
        reads: "io_uring reads, io_depth in flight per reader thread (O_DIRECT with reader.odirect)",
        writes: "as posix (as direct with reader.odirect)",
    },
    EngineInfo {
        kind: EngineKind::S3,
        name: "s3",
        reads: "HEAD at open, ranged GETs (io_depth in flight for a split read)",
        writes: "one PUT, or a multipart upload of 8 MiB parts for larger objects",
    },
];

impl EngineKind {
    /// The name users write.
    pub fn name(self) -> &'static str {
        ENGINES
            .iter()
            .find(|e| e.kind == self)
            .map_or("posix", |e| e.name)
    }

    /// The engine called `name` (`posix`, `direct`, `mmap`, `io_uring`, `s3`).
    pub fn from_name(name: &str) -> Option<EngineKind> {
        ENGINES.iter().find(|e| e.name == name).map(|e| e.kind)
    }
}

/// Everything that chooses and tunes an engine.
#[derive(Debug, Clone, Default)]
pub struct EngineSettings {
    /// `storage.io_engine`, or [`EngineKind::S3`] for `storage.storage_type: s3`.
    pub engine: EngineKind,
    /// `reader.odirect`: with `posix` it selects `direct` (as upstream); with `io_uring` it
    /// opens files with O_DIRECT; with `mmap` and `s3` it is an error.
    pub odirect: bool,
    /// `reader.transfer_size`: reads longer than this are split into requests of this size.
    pub transfer_size: Option<u64>,
    /// `reader.transfer_size_distribution` as `(size, weight)`, and the seed of its draws:
    /// reads are split into requests of drawn sizes. Empty: none.
    pub transfer_size_distribution: Vec<(u64, f64)>,
    /// Seed of the request-size draws (the run's seed).
    pub seed: u64,
    /// `reader.sample_requests`: whole-file reads are made as these requests. Empty: none.
    pub sample_requests: Vec<PatternRequest>,
    /// `storage.io_depth`: requests in flight per reader thread (io_uring, s3); 0 counts as 1.
    pub io_depth: u32,
    /// Bucket, endpoint and credentials, for [`EngineKind::S3`].
    pub s3: Option<S3Settings>,
    /// `storage.read_bytes_per_second`: reads of every handle together move at most this
    /// many bytes per second ([`Throttled`]); 0 is no cap.
    pub read_bytes_per_second: u64,
}

/// A ready engine (files checked, ring allowed, bucket reached).
#[derive(Debug, Clone)]
pub struct Engine {
    raw: Arc<dyn Storage>,
    sizes: Option<RequestSizes>,
}

impl Engine {
    /// The engine's name (`posix`, `direct`, ...).
    pub fn name(&self) -> &'static str {
        self.raw.engine()
    }

    /// The request size reads are split into, if it is one size.
    pub fn transfer_size(&self) -> Option<usize> {
        match self.sizes {
            Some(RequestSizes::Fixed(n)) => Some(n),
            _ => None,
        }
    }

    /// How reads are split into requests, if they are.
    pub fn request_sizes(&self) -> Option<&RequestSizes> {
        self.sizes.as_ref()
    }

    /// The engine itself, without the transfer-size split: for callers that stack their own
    /// decorators (tracing, metering) between the engine and [`SplitReads`], so that every
    /// transfer is seen by them.
    pub fn raw(&self) -> Arc<dyn Storage> {
        Arc::clone(&self.raw)
    }

    /// The storage for generation, listing and checkpoints (reads split by the transfer size).
    pub fn storage(&self) -> Arc<dyn Storage> {
        match &self.sizes {
            Some(sizes) => Arc::new(SplitReads::with_sizes(Arc::clone(&self.raw), sizes.clone())),
            None => Arc::clone(&self.raw),
        }
    }

    /// A storage that counts into `counters` (e.g. one set per rank): every transfer is one
    /// read request, and each read call's latency goes into the counters' histogram.
    pub fn metered(&self, counters: Arc<IoCounters>) -> Arc<dyn Storage> {
        let metered = Metered::with_counters(Arc::clone(&self.raw), counters);
        match &self.sizes {
            Some(sizes) => Arc::new(SplitReads::with_sizes(metered, sizes.clone())),
            None => Arc::new(metered),
        }
    }
}

fn invalid(reason: impl Into<String>) -> StorageError {
    StorageError::InvalidEngineSettings {
        reason: reason.into(),
    }
}

/// Builds the engine `settings` describe, checking what can be checked before any file is
/// read: contradicting settings, a kernel without io_uring, an unreachable S3 endpoint, wrong
/// credentials, a missing bucket.
pub fn engine_for(settings: &EngineSettings) -> Result<Engine, StorageError> {
    let kind = match (settings.engine, settings.odirect) {
        (EngineKind::Posix, true) => EngineKind::Direct,
        (EngineKind::Mmap | EngineKind::S3, true) => {
            return Err(invalid(format!(
                "reader.odirect is True but storage.io_engine is {}, which cannot use O_DIRECT; \
                 set reader.odirect=False, or storage.io_engine to direct or io_uring",
                settings.engine.name()
            )));
        }
        (kind, _) => kind,
    };
    let direct = kind == EngineKind::Direct || (kind == EngineKind::IoUring && settings.odirect);
    let transfer_size = match settings.transfer_size {
        None => None,
        Some(0) => {
            return Err(invalid(
                "reader.transfer_size is 0; set a positive size such as 1048576, or remove it",
            ));
        }
        Some(size) if direct && size % DIRECT_ALIGNMENT as u64 != 0 => {
            return Err(invalid(format!(
                "reader.transfer_size {size} is not a multiple of {DIRECT_ALIGNMENT}, which \
                 O_DIRECT needs; use for example {}",
                size.div_ceil(DIRECT_ALIGNMENT as u64) * DIRECT_ALIGNMENT as u64
            )));
        }
        Some(size) => Some(usize::try_from(size).map_err(|_| {
            invalid(format!(
                "reader.transfer_size {size} does not fit in memory"
            ))
        })?),
    };
    let raw: Arc<dyn Storage> = match kind {
        EngineKind::Posix => Arc::new(PosixStorage::new()),
        EngineKind::Direct => Arc::new(DirectStorage::new()),
        EngineKind::Mmap => Arc::new(MmapStorage::new()),
        EngineKind::IoUring => {
            let uring = UringStorage::new(settings.io_depth, settings.odirect)?;
            Arc::new(match transfer_size {
                Some(size) => uring.with_whole_read_request(size),
                None => uring,
            })
        }
        EngineKind::S3 => {
            let s3 = settings.s3.as_ref().ok_or_else(|| {
                invalid("the s3 engine needs storage.storage_root (the bucket) and storage_options")
            })?;
            Arc::new(S3Storage::connect(s3, settings.io_depth)?)
        }
    };
    let raw: Arc<dyn Storage> = match settings.read_bytes_per_second {
        0 => raw,
        rate => Arc::new(Throttled::new(raw, rate)),
    };
    let sizes = match transfer_size {
        Some(n) => Some(RequestSizes::Fixed(n)),
        None if !settings.sample_requests.is_empty() => {
            if direct {
                return Err(invalid(
                    "reader.sample_requests replays unaligned requests, which O_DIRECT refuses; \
                     read without O_DIRECT",
                ));
            }
            Some(RequestSizes::Pattern(
                settings.sample_requests.clone().into(),
            ))
        }
        None => drawn_sizes(settings, direct)?,
    };
    Ok(Engine { raw, sizes })
}

/// `reader.transfer_size_distribution` as request sizes; `None` when it is empty.
fn drawn_sizes(
    settings: &EngineSettings,
    direct: bool,
) -> Result<Option<RequestSizes>, StorageError> {
    if settings.transfer_size_distribution.is_empty() {
        return Ok(None);
    }
    let mut weighted = Vec::with_capacity(settings.transfer_size_distribution.len());
    for &(size, weight) in &settings.transfer_size_distribution {
        if size == 0 || (direct && size % DIRECT_ALIGNMENT as u64 != 0) {
            return Err(invalid(format!(
                "reader.transfer_size_distribution has size {size}, which is 0 or (with \
                 O_DIRECT) not a multiple of {DIRECT_ALIGNMENT}"
            )));
        }
        let size = usize::try_from(size).map_err(|_| {
            invalid(format!(
                "reader.transfer_size_distribution size {size} does not fit in memory"
            ))
        })?;
        weighted.push((size, weight));
    }
    SizeDistribution::new(&weighted, settings.seed)
        .map(|d| Some(RequestSizes::Drawn(d)))
        .ok_or_else(|| invalid("reader.transfer_size_distribution has no positive weight"))
}

/// Shared engines (`Arc<dyn Storage>`, what [`engine_for`] builds) are engines too, so they
/// can be wrapped in [`Metered`] and [`SplitReads`].
impl<S: Storage + ?Sized> Storage for Arc<S> {
    fn engine(&self) -> &'static str {
        (**self).engine()
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        (**self).open(path)
    }

    fn start_whole_read(&self, path: &Path) -> Option<Box<dyn crate::PendingRead>> {
        (**self).start_whole_read(path)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        (**self).create(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        (**self).list(dir)
    }

    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        (**self).size(path)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        (**self).create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        (**self).remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        (**self).remove_dir_all(dir)
    }

    fn partial_path(&self, path: &Path) -> Option<PathBuf> {
        (**self).partial_path(path)
    }

    fn drop_cache(&self, path: &Path) -> Result<(), StorageError> {
        (**self).drop_cache(path)
    }
}
