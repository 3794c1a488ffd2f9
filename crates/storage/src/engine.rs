//! Choosing an engine from plain settings (the CLI maps the workload's keys onto
//! [`EngineSettings`]; this crate does not know the config crate), and [`Engine`], which
//! hands out the storages a run uses: plain for generation, listing and checkpoints, metered
//! per rank for training, both with `reader.transfer_size` applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::direct::DIRECT_ALIGNMENT;
use crate::{
    BufferedStream, Capabilities, DirEntry, IoCounters, Metered, ReadHandle, RequestPattern,
    RequestPatterns, RequestSizes, S3Settings, SizeDistribution, SplitReads, Storage, StorageError,
    Throttled, WriteHandle,
};

/// An engine's name, as `storage.io_engine` (and `storage.storage_type: s3`) select it. The
/// engines are the rows of [`ENGINES`], each declared in the engine's own file; the constants
/// name the ones the rest of dlio refers to (a new engine needs none: its row says
/// `EngineKind::new("name")`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EngineKind(&'static str);

#[allow(non_upper_case_globals)]
impl EngineKind {
    /// Buffered `pread`/`write` through the page cache.
    pub const Posix: EngineKind = EngineKind("posix");
    /// O_DIRECT with aligned buffers.
    pub const Direct: EngineKind = EngineKind("direct");
    /// Reads copy out of a read-only mapping.
    pub const Mmap: EngineKind = EngineKind("mmap");
    /// io_uring with `io_depth` reads in flight per reader thread.
    pub const IoUring: EngineKind = EngineKind("io_uring");
    /// An S3 bucket.
    pub const S3: EngineKind = EngineKind("s3");

    /// The engine called `name`, as its row declares itself.
    pub const fn new(name: &'static str) -> EngineKind {
        EngineKind(name)
    }
}

impl Default for EngineKind {
    fn default() -> Self {
        EngineKind::Posix
    }
}

/// How an engine takes `reader.odirect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OdirectUse {
    /// It always reads with O_DIRECT.
    Always,
    /// `reader.odirect` makes it open files with O_DIRECT.
    Optional,
    /// `reader.odirect` selects this other engine instead (posix -> direct, as upstream).
    Selects(EngineKind),
    /// It cannot use O_DIRECT: `reader.odirect` is an error.
    Refused,
}

/// An engine's constructor: the settings, whether files are opened with O_DIRECT, and the one
/// request size reads are split into.
pub type OpenEngine =
    fn(&EngineSettings, bool, Option<usize>) -> Result<Arc<dyn Storage>, StorageError>;

/// One engine, declared in its own file; one row of [`ENGINES`].
#[derive(Debug, Clone, Copy)]
pub struct EngineInfo {
    /// Which engine: its name in `storage.io_engine` and in outputs.
    pub kind: EngineKind,
    /// How it reads.
    pub reads: &'static str,
    /// How it writes (generation, checkpoints).
    pub writes: &'static str,
    /// How it takes `reader.odirect`.
    pub odirect: OdirectUse,
    /// Its constructor: the settings, whether files are opened with O_DIRECT, and the one
    /// request size reads are split into (engines that issue their own requests use it).
    pub open: OpenEngine,
}

/// Every engine, in the order the documentation lists them.
pub const ENGINES: &[EngineInfo] = &[
    crate::posix::ENGINE,
    crate::direct::ENGINE,
    crate::mmap::ENGINE,
    crate::uring::ENGINE,
    crate::s3::ENGINE,
];

impl EngineKind {
    /// Its row of [`ENGINES`], if it has one.
    pub fn row(self) -> Option<&'static EngineInfo> {
        ENGINES.iter().find(|e| e.kind == self)
    }

    /// The name users write.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The engine called `name` (`posix`, `direct`, `mmap`, `io_uring`, `s3`).
    pub fn from_name(name: &str) -> Option<EngineKind> {
        ENGINES.iter().find(|e| e.kind.0 == name).map(|e| e.kind)
    }
}

/// Every engine's name, for `dlio_config::register_engine_names` (`storage.io_engine` takes
/// them all but `s3`, which `storage.storage_type: s3` selects).
pub fn engine_names() -> Vec<&'static str> {
    ENGINES.iter().map(|e| e.kind.name()).collect()
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
    /// `reader.sample_requests` or `reader.sample_request_patterns`: whole-file reads make
    /// the requests of one of these patterns. Empty: none.
    pub sample_request_patterns: Vec<RequestPattern>,
    /// `reader.read_buffer`: every read is made as a program reading through a buffered
    /// stream makes it. None: reads are made as asked.
    pub read_buffer: Option<BufferedStream>,
    /// `reader.head_request_size`: a read longer than this is a request of it, then the rest.
    pub head_request_size: Option<usize>,
    /// `storage.io_depth`: requests in flight per reader thread (io_uring, s3); 0 counts as 1.
    pub io_depth: u32,
    /// Bucket, endpoint and credentials, for [`EngineKind::S3`].
    pub s3: Option<S3Settings>,
    /// `storage.read_bytes_per_second`: reads of every handle together move at most this
    /// many bytes per second ([`Throttled`]); 0 is no cap.
    pub read_bytes_per_second: u64,
    /// `reader.fresh_read_share`: that share of the reads of [`crate::FRESH_FROM`] bytes and
    /// more land in pages the process has not touched ([`crate::FreshPages`]); 0 is none.
    pub fresh_read_share: f64,
    /// `reader.buffer_page_offset`: sample reads land in buffers that start this many bytes
    /// past a page boundary ([`crate::PlacedBuffers`]); `None`: the engine's alignment.
    pub buffer_page_offset: Option<usize>,
    /// `reader.request_work_time`: the reader's own work between two requests of a read
    /// that continue each other, with `transfer_size` or its distribution.
    pub request_work: std::time::Duration,
}

/// A ready engine (files checked, ring allowed, bucket reached).
#[derive(Debug, Clone)]
pub struct Engine {
    raw: Arc<dyn Storage>,
    sizes: Option<RequestSizes>,
    request_work: std::time::Duration,
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

    /// `inner` with reads split as the engine splits them (and the work between requests),
    /// or `inner` itself when they are not.
    pub fn split<S: Storage + 'static>(&self, inner: S) -> Arc<dyn Storage> {
        match &self.sizes {
            Some(sizes) => self.split_by(inner, sizes.clone()),
            None => Arc::new(inner),
        }
    }

    /// As [`Engine::split`], for an evaluation pass, where some requests of the engine's
    /// patterns wait after them (`reader.sample_requests`' `wait`): the same requests without
    /// the training pipeline's waits (the pass keeps the pace of its own steps). `None` where
    /// no request waits: the pass reads as [`Engine::split`] does.
    pub fn split_for_evaluation<S: Storage + 'static>(&self, inner: S) -> Option<Arc<dyn Storage>> {
        match &self.sizes {
            Some(RequestSizes::Patterns(p)) if p.waits() => {
                Some(self.split_by(inner, RequestSizes::Patterns(Arc::new(p.without_waits()))))
            }
            _ => None,
        }
    }

    /// `inner` with reads split by `sizes`, with the engine's work between requests.
    fn split_by<S: Storage + 'static>(&self, inner: S, sizes: RequestSizes) -> Arc<dyn Storage> {
        Arc::new(SplitReads::with_sizes(inner, sizes).with_request_work(self.request_work))
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
            Some(_) => self.split(Arc::clone(&self.raw)),
            None => Arc::clone(&self.raw),
        }
    }

    /// A storage that counts into `counters` (e.g. one set per rank): every transfer is one
    /// read request, and each read call's latency goes into the counters' histogram.
    pub fn metered(&self, counters: Arc<IoCounters>) -> Arc<dyn Storage> {
        self.split(Metered::with_counters(Arc::clone(&self.raw), counters))
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
    let row = |kind: EngineKind| {
        kind.row().ok_or_else(|| {
            invalid(format!(
                "storage.io_engine is {}, which is not an engine dlio has ({}); set it to one of \
                 them",
                kind.name(),
                engine_names().join(", ")
            ))
        })
    };
    let asked = row(settings.engine)?;
    let (info, direct) = match (asked.odirect, settings.odirect) {
        (OdirectUse::Selects(other), true) => (row(other)?, true),
        (OdirectUse::Refused, true) => {
            return Err(invalid(format!(
                "reader.odirect is True but storage.io_engine is {}, which cannot use O_DIRECT; \
                 set ++workload.reader.odirect=False, or storage.io_engine to direct or io_uring",
                asked.kind.name()
            )));
        }
        (OdirectUse::Always, _) => (asked, true),
        (_, odirect) => (asked, odirect),
    };
    let transfer_size = checked_transfer_size(settings.transfer_size, direct)?;
    let raw = (info.open)(settings, direct, transfer_size)?;
    let raw: Arc<dyn Storage> = match settings.read_bytes_per_second {
        0 => raw,
        rate => Arc::new(Throttled::new(raw, rate)),
    };
    let raw: Arc<dyn Storage> = if settings.fresh_read_share > 0.0 {
        Arc::new(crate::FreshPages::new(raw, settings.fresh_read_share))
    } else {
        raw
    };
    let raw: Arc<dyn Storage> = match settings.buffer_page_offset {
        Some(_) if direct => {
            return Err(invalid(
                "reader.buffer_page_offset places reads past a page boundary, which O_DIRECT \
                 refuses; remove it, or read without O_DIRECT (storage.io_engine posix)",
            ));
        }
        Some(offset) => Arc::new(crate::PlacedBuffers::new(raw, offset)),
        None => raw,
    };
    let sizes = match transfer_size {
        Some(n) => Some(RequestSizes::Fixed(n)),
        None if let Some(head) = settings.head_request_size => {
            if head == 0 || (direct && !head.is_multiple_of(DIRECT_ALIGNMENT)) {
                return Err(invalid(format!(
                    "reader.head_request_size is {head}: give a positive size (with O_DIRECT, a \
                     multiple of {DIRECT_ALIGNMENT})"
                )));
            }
            Some(RequestSizes::HeadThenRest(head))
        }
        None if let Some(stream) = settings.read_buffer => {
            if direct {
                return Err(invalid(
                    "reader.read_buffer replays a buffered stream's unaligned requests, which \
                     O_DIRECT refuses; read without O_DIRECT",
                ));
            }
            if stream.buffer == 0 {
                return Err(invalid(
                    "reader.read_buffer.size is 0; set the stream's buffer size, such as 4096",
                ));
            }
            Some(RequestSizes::Buffered(stream))
        }
        None if !settings.sample_request_patterns.is_empty() => {
            if direct {
                return Err(invalid(
                    "reader.sample_requests replays unaligned requests, which O_DIRECT refuses; \
                     read without O_DIRECT",
                ));
            }
            let patterns = RequestPatterns::new(settings.sample_request_patterns.clone())
                .ok_or_else(|| {
                    invalid(
                        "reader.sample_request_patterns has no pattern with a positive weight \
                         and a request",
                    )
                })?;
            Some(RequestSizes::Patterns(Arc::new(patterns)))
        }
        None => drawn_sizes(settings, direct)?,
    };
    if !settings.request_work.is_zero()
        && !matches!(sizes, Some(RequestSizes::Fixed(_) | RequestSizes::Drawn(_)))
    {
        return Err(invalid(
            "reader.request_work_time is set but reads are not split into requests of their \
             own sizes; set reader.transfer_size or reader.transfer_size_distribution beside it",
        ));
    }
    Ok(Engine {
        raw,
        sizes,
        request_work: settings.request_work,
    })
}

/// `reader.transfer_size` as a request size: positive, and with O_DIRECT a multiple of the
/// alignment (the one place this is checked).
fn checked_transfer_size(size: Option<u64>, direct: bool) -> Result<Option<usize>, StorageError> {
    let Some(size) = size else {
        return Ok(None);
    };
    if size == 0 {
        return Err(invalid(
            "reader.transfer_size is 0; set a positive request size such as 1048576, or remove \
             the key",
        ));
    }
    let alignment = DIRECT_ALIGNMENT as u64;
    if direct && size % alignment != 0 {
        return Err(invalid(format!(
            "reader.transfer_size {size} is not a multiple of {alignment}, which O_DIRECT needs; \
             set ++workload.reader.transfer_size={}",
            size.div_ceil(alignment) * alignment
        )));
    }
    usize::try_from(size).map(Some).map_err(|_| {
        invalid(format!(
            "reader.transfer_size {size} does not fit in memory"
        ))
    })
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

    fn start_whole_read(
        &self,
        path: &Path,
        bell: &std::sync::Arc<crate::ReadBell>,
    ) -> Option<Box<dyn crate::PendingRead>> {
        (**self).start_whole_read(path, bell)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        (**self).create(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        (**self).list(dir)
    }

    fn list_each(&self, dir: &Path, each: &mut dyn FnMut(DirEntry)) -> Result<(), StorageError> {
        (**self).list_each(dir, each)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_has_one_row_and_the_named_ones_are_there() {
        for row in ENGINES {
            assert_eq!(ENGINES.iter().filter(|e| e.kind == row.kind).count(), 1);
            assert_eq!(EngineKind::from_name(row.kind.name()), Some(row.kind));
        }
        for kind in [
            EngineKind::Posix,
            EngineKind::Direct,
            EngineKind::Mmap,
            EngineKind::IoUring,
            EngineKind::S3,
        ] {
            assert!(kind.row().is_some(), "{kind:?}");
        }
        // A name no row has is refused by engine_for, naming the engines there are.
        let error = engine_for(&EngineSettings {
            engine: EngineKind::new("nvme_of"),
            ..EngineSettings::default()
        })
        .expect_err("refused")
        .to_string();
        assert!(
            error.contains("nvme_of") && error.contains("io_uring"),
            "{error}"
        );
    }

    #[test]
    fn odirect_and_transfer_sizes_are_checked_once_here() {
        let settings = |engine, odirect, transfer_size| EngineSettings {
            engine,
            odirect,
            transfer_size,
            ..EngineSettings::default()
        };
        let refused = |s: EngineSettings| engine_for(&s).expect_err("refused").to_string();
        assert!(refused(settings(EngineKind::Mmap, true, None)).contains("cannot use O_DIRECT"));
        let message = refused(settings(EngineKind::Posix, true, Some(5000)));
        assert!(message.contains("transfer_size=8192"), "{message}");
        assert!(refused(settings(EngineKind::Posix, false, Some(0))).contains("is 0"));
        let engine = engine_for(&settings(EngineKind::Posix, true, Some(8192))).expect("direct");
        assert_eq!(engine.name(), "direct");
        assert_eq!(engine.transfer_size(), Some(8192));
        let engine = engine_for(&settings(EngineKind::Posix, false, Some(5000))).expect("posix");
        assert_eq!(engine.name(), "posix");
    }
}
