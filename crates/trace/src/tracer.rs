//! [`Tracer`]: the cheap hot-path API. Every call appends one fixed-size [`Record`] to a
//! buffer owned by the calling thread; full buffers go to the background writer
//! (`writer.rs`), which formats JSON and compresses it. The hot path never formats, never
//! allocates per event and never takes a contended lock.

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::TraceError;
use crate::names::{IoOp, SpanName, name_hash};
use crate::writer::{self, Header, Msg, WriterStats};

/// Events a thread buffers before handing them to the writer.
const BUFFER_EVENTS: usize = 2048;
/// Full buffers that may wait for the writer before recording threads block.
const QUEUE_BUFFERS: usize = 64;
/// Most arguments one event carries; further `arg` calls are ignored.
pub const MAX_ARGS: usize = 4;

/// Where and how one rank writes its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    /// Output folder (the run's output folder).
    pub dir: PathBuf,
    /// This rank.
    pub rank: u32,
    /// Number of ranks.
    pub size: u32,
    /// gzip the file (`.pfw.gz`, the default) or write plain `.pfw`.
    pub compress: bool,
}

impl TraceOptions {
    /// Compressed trace of `rank` of `size` in `dir`.
    pub fn new(dir: impl Into<PathBuf>, rank: u32, size: u32) -> TraceOptions {
        TraceOptions {
            dir: dir.into(),
            rank,
            size,
            compress: true,
        }
    }

    /// `trace-{rank}-of-{size}.pfw.gz` (or `.pfw`), DLIO's and dftracer's name.
    pub fn file_name(&self) -> String {
        let ext = if self.compress { "pfw.gz" } else { "pfw" };
        format!("trace-{}-of-{}.{ext}", self.rank, self.size)
    }

    /// Full path of the trace file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(self.file_name())
    }
}

/// True when the environment asks for a trace as dftracer does (`DFTRACER_ENABLE=1`).
pub fn dftracer_enabled_by_env() -> bool {
    std::env::var("DFTRACER_ENABLE").is_ok_and(|v| v.trim() == "1")
}

/// dftracer's `DFTRACER_TRACE_COMPRESSION` (`0` or `1`), when set.
pub fn dftracer_compression_from_env() -> Option<bool> {
    match std::env::var("DFTRACER_TRACE_COMPRESSION").ok()?.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A file as named in the trace (its hash); get one with [`Tracer::file`] once per open
/// file, then pass it to every [`Tracer::io`] call on that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(pub(crate) u64);

impl FileId {
    /// No file (directory-less operations).
    pub const NONE: FileId = FileId(0);

    /// The hash written as `fhash`.
    pub fn hash(self) -> u64 {
        self.0
    }
}

/// What a finished trace holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSummary {
    /// The trace file.
    pub path: PathBuf,
    /// Complete (`X`) events written.
    pub events: u64,
    /// Metadata (`M`) events written.
    pub metadata_events: u64,
    /// Bytes of the file on disk.
    pub bytes: u64,
}

/// One event as recorded on the hot path: fixed size, no heap data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    pub start_ns: u64,
    pub dur_ns: u64,
    pub cat: &'static str,
    pub name: &'static str,
    pub file: u64,
    pub nargs: u8,
    pub args: [(&'static str, i64); MAX_ARGS],
}

const NO_ARGS: [(&str, i64); MAX_ARGS] = [("", 0); MAX_ARGS];

struct ThreadBuf {
    tid: u32,
    records: Vec<Record>,
    tx: SyncSender<Msg>,
}

impl ThreadBuf {
    fn hand_over(&mut self) {
        if self.records.is_empty() {
            return;
        }
        let full = std::mem::replace(&mut self.records, Vec::with_capacity(BUFFER_EVENTS));
        // A writer that stopped has recorded its error; finish() reports it.
        let _ = self.tx.send(Msg::Events {
            tid: self.tid,
            records: full,
        });
    }
}

struct Shared {
    id: u64,
    path: PathBuf,
    base: Instant,
    open: AtomicBool,
    tx: SyncSender<Msg>,
    buffers: Mutex<Vec<Arc<Mutex<ThreadBuf>>>>,
    files: Mutex<HashSet<u64>>,
    writer: Mutex<Option<JoinHandle<Result<WriterStats, std::io::Error>>>>,
    summary: Mutex<Option<TraceSummary>>,
}

static NEXT_TRACER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static BUFFERS: RefCell<Vec<(u64, Arc<Mutex<ThreadBuf>>)>> = const { RefCell::new(Vec::new()) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn os_tid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).unwrap_or(0)
}

impl Shared {
    fn push(&self, rec: Record) {
        if !self.open.load(Ordering::Relaxed) {
            return;
        }
        let pushed = BUFFERS.try_with(|cell| {
            let mut bufs = cell.borrow_mut();
            let idx = match bufs.iter().position(|(id, _)| *id == self.id) {
                Some(i) => i,
                None => {
                    // Forget buffers of tracers that are gone (only this thread holds them).
                    bufs.retain(|(_, b)| Arc::strong_count(b) > 1);
                    bufs.push((self.id, self.register_thread()));
                    bufs.len() - 1
                }
            };
            let mut buf = lock(&bufs[idx].1);
            buf.records.push(rec);
            if buf.records.len() >= BUFFER_EVENTS {
                buf.hand_over();
            }
        });
        if pushed.is_err() {
            // The thread is exiting and its buffers are gone: send the event on its own.
            let _ = self.tx.send(Msg::Events {
                tid: os_tid(),
                records: vec![rec],
            });
        }
    }

    fn register_thread(&self) -> Arc<Mutex<ThreadBuf>> {
        let tid = os_tid();
        let name = std::thread::current()
            .name()
            .unwrap_or("thread")
            .to_string();
        let _ = self.tx.send(Msg::Thread { tid, name });
        let buf = Arc::new(Mutex::new(ThreadBuf {
            tid,
            records: Vec::with_capacity(BUFFER_EVENTS),
            tx: self.tx.clone(),
        }));
        lock(&self.buffers).push(Arc::clone(&buf));
        buf
    }

    fn since_base(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    fn finish(&self) -> Result<TraceSummary, TraceError> {
        if let Some(done) = lock(&self.summary).clone() {
            return Ok(done);
        }
        self.open.store(false, Ordering::SeqCst);
        for buf in lock(&self.buffers).iter() {
            lock(buf).hand_over();
        }
        let _ = self.tx.send(Msg::Finish);
        let handle = lock(&self.writer).take();
        let stats = match handle {
            Some(h) => h
                .join()
                .map_err(|_| TraceError::Writer {
                    path: self.path.clone(),
                    reason: "the writer thread panicked".to_string(),
                })?
                .map_err(|source| TraceError::Io {
                    op: "write",
                    path: self.path.clone(),
                    source,
                })?,
            None => {
                return Err(TraceError::Writer {
                    path: self.path.clone(),
                    reason: "the trace was already being finished by another thread".to_string(),
                });
            }
        };
        let bytes = std::fs::metadata(&self.path)
            .map_err(|source| TraceError::Io {
                op: "finish",
                path: self.path.clone(),
                source,
            })?
            .len();
        let summary = TraceSummary {
            path: self.path.clone(),
            events: stats.events,
            metadata_events: stats.metadata_events,
            bytes,
        };
        *lock(&self.summary) = Some(summary.clone());
        Ok(summary)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if lock(&self.summary).is_none() {
            let _ = self.finish();
        }
    }
}

/// A rank's trace: cheap to clone (share it with the rank's reader threads), a no-op when
/// [disabled](Tracer::disabled). Events are written when [`Tracer::finish`] is called, or
/// when the last clone is dropped; events recorded after `finish` are dropped.
#[derive(Clone, Default)]
pub struct Tracer {
    shared: Option<Arc<Shared>>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.shared {
            Some(s) => f.debug_struct("Tracer").field("path", &s.path).finish(),
            None => f.write_str("Tracer(disabled)"),
        }
    }
}

impl Tracer {
    /// Creates the trace file and starts its writer thread.
    pub fn create(opts: &TraceOptions) -> Result<Tracer, TraceError> {
        if opts.rank >= opts.size {
            return Err(TraceError::InvalidRank {
                rank: opts.rank,
                size: opts.size,
            });
        }
        let path = opts.path();
        let io_err = |op, source| TraceError::Io {
            op,
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&opts.dir).map_err(|e| io_err("create", e))?;
        let file = std::fs::File::create(&path).map_err(|e| io_err("create", e))?;
        let base = Instant::now();
        let base_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let header = Header {
            pid: std::process::id(),
            rank: opts.rank,
            size: opts.size,
            hostname: hostname(),
            base_unix_ns,
        };
        let (tx, rx) = mpsc::sync_channel(QUEUE_BUFFERS);
        let compress = opts.compress;
        let handle = std::thread::Builder::new()
            .name(format!("trace-writer-{}", opts.rank))
            .spawn(move || writer::run(rx, file, compress, header))
            .map_err(|e| io_err("create", e))?;
        Ok(Tracer {
            shared: Some(Arc::new(Shared {
                id: NEXT_TRACER_ID.fetch_add(1, Ordering::Relaxed),
                path,
                base,
                open: AtomicBool::new(true),
                tx,
                buffers: Mutex::new(Vec::new()),
                files: Mutex::new(HashSet::new()),
                writer: Mutex::new(Some(handle)),
                summary: Mutex::new(None),
            })),
        })
    }

    /// A tracer that records nothing; every call returns at once.
    pub fn disabled() -> Tracer {
        Tracer { shared: None }
    }

    /// True when events are being recorded.
    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    /// The trace file, when enabled.
    pub fn path(&self) -> Option<&Path> {
        self.shared.as_deref().map(|s| s.path.as_path())
    }

    /// Starts a span; it is recorded when the guard is dropped. Add `epoch`, `step` and
    /// other arguments with [`SpanGuard::arg`].
    pub fn span(&self, span: SpanName) -> SpanGuard<'_> {
        SpanGuard {
            shared: self.shared.as_deref(),
            span,
            start: self.shared.as_ref().map(|_| Instant::now()),
            nargs: 0,
            args: NO_ARGS,
        }
    }

    /// Records a span measured elsewhere (e.g. the wait for a batch, timed by the step loop).
    pub fn complete(
        &self,
        span: SpanName,
        start: Instant,
        end: Instant,
        args: &[(&'static str, i64)],
    ) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        let mut rec = Record {
            start_ns: shared.since_base(start),
            dur_ns: u64::try_from(end.saturating_duration_since(start).as_nanos())
                .unwrap_or(u64::MAX),
            cat: span.cat,
            name: span.name,
            file: 0,
            nargs: 0,
            args: NO_ARGS,
        };
        for &(k, v) in args.iter().take(MAX_ARGS) {
            rec.args[usize::from(rec.nargs)] = (k, v);
            rec.nargs += 1;
        }
        shared.push(rec);
    }

    /// Names a file: hashes its path and, the first time, writes the `FH` metadata event
    /// that maps the hash to the path. Call once per open, not per read.
    pub fn file(&self, path: &Path) -> FileId {
        let Some(shared) = self.shared.as_deref() else {
            return FileId::NONE;
        };
        let text = path.to_string_lossy();
        let hash = name_hash(text.as_bytes());
        if shared.open.load(Ordering::Relaxed) && lock(&shared.files).insert(hash) {
            let _ = shared.tx.send(Msg::File {
                hash,
                name: text.into_owned(),
            });
        }
        FileId(hash)
    }

    /// Records one successful I/O call: `bytes` moved (`count` and `ret` in args) at
    /// `offset` (when positional) on `file`, which started at `start` and took `dur`.
    pub fn io(
        &self,
        op: IoOp,
        file: FileId,
        offset: Option<u64>,
        bytes: Option<u64>,
        start: Instant,
        dur: Duration,
    ) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        let mut rec = io_record(shared, op, file, start, dur);
        if let Some(n) = bytes {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            rec.args[0] = ("count", n);
            rec.args[1] = ("ret", n);
            rec.nargs = 2;
        }
        if let Some(off) = offset {
            rec.args[usize::from(rec.nargs)] = ("offset", i64::try_from(off).unwrap_or(i64::MAX));
            rec.nargs += 1;
        }
        if op == IoOp::Create {
            rec.args[usize::from(rec.nargs)] = ("create", 1);
            rec.nargs += 1;
        }
        shared.push(rec);
    }

    /// Records a failed I/O call (`ret` is -1, as dftracer writes it).
    pub fn io_failed(
        &self,
        op: IoOp,
        file: FileId,
        offset: Option<u64>,
        start: Instant,
        dur: Duration,
    ) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        let mut rec = io_record(shared, op, file, start, dur);
        rec.args[0] = ("ret", -1);
        rec.nargs = 1;
        if let Some(off) = offset {
            rec.args[1] = ("offset", i64::try_from(off).unwrap_or(i64::MAX));
            rec.nargs = 2;
        }
        shared.push(rec);
    }

    /// Writes every buffered event, closes the file and returns what it holds. Later
    /// calls return the same summary; events recorded afterwards are dropped.
    pub fn finish(&self) -> Result<Option<TraceSummary>, TraceError> {
        match self.shared.as_deref() {
            Some(s) => s.finish().map(Some),
            None => Ok(None),
        }
    }
}

fn io_record(shared: &Shared, op: IoOp, file: FileId, start: Instant, dur: Duration) -> Record {
    Record {
        start_ns: shared.since_base(start),
        dur_ns: u64::try_from(dur.as_nanos()).unwrap_or(u64::MAX),
        cat: op.category(),
        name: op.event_name(),
        file: file.0,
        nargs: 0,
        args: NO_ARGS,
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// A span in progress; recorded when dropped. Made by [`Tracer::span`].
#[must_use = "a span is recorded when its guard is dropped; bind it to a variable"]
pub struct SpanGuard<'a> {
    shared: Option<&'a Shared>,
    span: SpanName,
    start: Option<Instant>,
    nargs: u8,
    args: [(&'static str, i64); MAX_ARGS],
}

impl SpanGuard<'_> {
    /// Adds an argument (at most [`MAX_ARGS`]; later ones are ignored).
    pub fn arg(mut self, key: &'static str, value: i64) -> Self {
        self.set_arg(key, value);
        self
    }

    /// Adds `epoch` (1-based, as DLIO counts epochs).
    pub fn epoch(self, epoch: u64) -> Self {
        self.arg("epoch", i64::try_from(epoch).unwrap_or(i64::MAX))
    }

    /// Adds `step` (1-based within the epoch, as DLIO counts steps).
    pub fn step(self, step: u64) -> Self {
        self.arg("step", i64::try_from(step).unwrap_or(i64::MAX))
    }

    /// Adds or updates an argument in place (e.g. the bytes read, once known).
    pub fn set_arg(&mut self, key: &'static str, value: i64) {
        let n = usize::from(self.nargs);
        if let Some(slot) = self.args[..n].iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else if n < MAX_ARGS {
            self.args[n] = (key, value);
            self.nargs += 1;
        }
    }
}

impl Drop for SpanGuard<'_> {
    fn drop(&mut self) {
        let (Some(shared), Some(start)) = (self.shared, self.start) else {
            return;
        };
        shared.push(Record {
            start_ns: shared.since_base(start),
            dur_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            cat: self.span.cat,
            name: self.span.name,
            file: 0,
            nargs: self.nargs,
            args: self.args,
        });
    }
}
