//! [`Tracer`]: the cheap hot-path API. Every call appends one fixed-size [`Record`] to a
//! buffer owned by the calling thread; full buffers go to the background writer
//! (`writer.rs`), which packs them into a spill file during the run and writes the JSON
//! trace when the trace is finished. The hot path never formats, never allocates per
//! event and never takes a contended lock; timestamps are raw `CLOCK_MONOTONIC`
//! nanoseconds (the clock `Instant` reads), without `Instant`'s checked arithmetic.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::TraceError;
use crate::names::{IoOp, SpanName, name_hash};
use crate::writer::{self, CheapBuild, Header, Msg, Paths, WriterStats};

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

    /// The spill file the writer packs events into while the run goes on
    /// (`trace-{rank}-of-{size}.pfw.spill`); removed when the trace is finished.
    pub fn spill_path(&self) -> PathBuf {
        self.dir
            .join(format!("trace-{}-of-{}.pfw.spill", self.rank, self.size))
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
    /// How long finishing took (writing the JSON trace from the spill): time after the
    /// run, not inside it.
    pub finish_time: Duration,
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
    /// Files whose name this thread has sent to the writer (hashes; the writer
    /// deduplicates across threads). Per thread, so naming a file takes no shared lock.
    files_sent: HashSet<u64, CheapBuild>,
    /// Names of files first seen since the last hand-over; they travel with the records,
    /// so naming a file costs no channel message (and no wake-up of the writer).
    new_files: Vec<(u64, String)>,
    tx: SyncSender<Msg>,
}

impl ThreadBuf {
    fn hand_over(&mut self) {
        if self.records.is_empty() && self.new_files.is_empty() {
            return;
        }
        let full = std::mem::replace(&mut self.records, Vec::with_capacity(BUFFER_EVENTS));
        // A writer that stopped has recorded its error; finish() reports it.
        let _ = self.tx.send(Msg::Events {
            tid: self.tid,
            records: full,
            files: std::mem::take(&mut self.new_files),
        });
    }

    fn push(&mut self, rec: Record) {
        self.records.push(rec);
        if self.records.len() >= BUFFER_EVENTS {
            self.hand_over();
        }
    }

    /// Notes `path`'s name for the writer the first time this thread sees `hash`.
    fn name_file(&mut self, hash: u64, path: &Path) {
        if self.files_sent.insert(hash) {
            self.new_files
                .push((hash, path.to_string_lossy().into_owned()));
        }
    }
}

struct Shared {
    id: u64,
    path: PathBuf,
    base: Instant,
    /// [`mono_ns`] at `base`.
    base_ns: u64,
    open: AtomicBool,
    tx: SyncSender<Msg>,
    buffers: Mutex<Vec<Arc<Mutex<ThreadBuf>>>>,
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

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `Instant` reads, as a plain number.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_MONOTONIC exists on every Linux kernel, so the call only writes `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

impl Shared {
    /// Runs `f` on this thread's buffer for this tracer (registering the thread the first
    /// time); `None` when the thread is exiting and its buffers are gone.
    fn with_buf<R>(&self, f: impl FnOnce(&mut ThreadBuf) -> R) -> Option<R> {
        BUFFERS
            .try_with(|cell| {
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
                f(&mut buf)
            })
            .ok()
    }

    fn push(&self, rec: Record) {
        if !self.open.load(Ordering::Relaxed) {
            return;
        }
        let pushed = self.with_buf(|buf| buf.push(rec));
        if pushed.is_none() {
            // The thread is exiting and its buffers are gone: send the event on its own.
            let _ = self.tx.send(Msg::Events {
                tid: os_tid(),
                records: vec![rec],
                files: Vec::new(),
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
            files_sent: HashSet::default(),
            new_files: Vec::new(),
            tx: self.tx.clone(),
        }));
        lock(&self.buffers).push(Arc::clone(&buf));
        buf
    }

    fn since_base(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    fn now_ns(&self) -> u64 {
        mono_ns().saturating_sub(self.base_ns)
    }

    fn finish(&self) -> Result<TraceSummary, TraceError> {
        if let Some(done) = lock(&self.summary).clone() {
            return Ok(done);
        }
        let finishing = Instant::now();
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
            finish_time: finishing.elapsed(),
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
        let spill = opts.spill_path();
        let spill_file = File::create(&spill).map_err(|source| TraceError::Io {
            op: "create",
            path: spill.clone(),
            source,
        })?;
        let base = Instant::now();
        let base_ns = mono_ns();
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
        let paths = Paths {
            spill_file: Some(spill_file),
            spill,
            trace: path.clone(),
            compress: opts.compress,
        };
        let handle = std::thread::Builder::new()
            .name(format!("trace-writer-{}", opts.rank))
            .spawn(move || writer::run(rx, paths, header))
            .map_err(|e| io_err("create", e))?;
        Ok(Tracer {
            shared: Some(Arc::new(Shared {
                id: NEXT_TRACER_ID.fetch_add(1, Ordering::Relaxed),
                path,
                base,
                base_ns,
                open: AtomicBool::new(true),
                tx,
                buffers: Mutex::new(Vec::new()),
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
            start_ns: self.now_ns(),
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

    /// Names a file: hashes its path and, the first time this thread sees it, sends the
    /// name to the writer for the `FH` metadata event that maps the hash to the path. Call
    /// once per open, not per read.
    pub fn file(&self, path: &Path) -> FileId {
        let Some(shared) = self.shared.as_deref() else {
            return FileId::NONE;
        };
        let hash = name_hash(path.as_os_str().as_encoded_bytes());
        if shared.open.load(Ordering::Relaxed) {
            shared.with_buf(|buf| buf.name_file(hash, path));
        }
        FileId(hash)
    }

    /// Records an open-like call on `path` (`op` is `Open` or `Create`) that ran from
    /// `start_ns` to `end_ns` and returns the file's id for the calls on its handle:
    /// [`Tracer::file`] and [`Tracer::io_ns`] in one visit to the thread's buffer.
    pub fn opened(&self, op: IoOp, path: &Path, ok: bool, start_ns: u64, end_ns: u64) -> FileId {
        let Some(shared) = self.shared.as_deref() else {
            return FileId::NONE;
        };
        let file = FileId(name_hash(path.as_os_str().as_encoded_bytes()));
        if !shared.open.load(Ordering::Relaxed) {
            return file;
        }
        let rec = if ok {
            io_record(op, file, None, None, start_ns, end_ns)
        } else {
            failed_record(op, file, None, start_ns, end_ns)
        };
        let pushed = shared.with_buf(|buf| {
            buf.name_file(file.0, path);
            buf.push(rec);
        });
        if pushed.is_none() {
            shared.push(rec);
        }
        file
    }

    /// Now, in the trace's clock (nanoseconds since the tracer started; 0 when disabled).
    /// Cheaper than `Instant::now` plus `elapsed`; pair it with [`Tracer::io_ns`].
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self.shared.as_deref() {
            Some(s) => s.now_ns(),
            None => 0,
        }
    }

    /// [`Tracer::io`] with start and end taken from [`Tracer::now_ns`].
    pub fn io_ns(
        &self,
        op: IoOp,
        file: FileId,
        offset: Option<u64>,
        bytes: Option<u64>,
        start_ns: u64,
        end_ns: u64,
    ) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        shared.push(io_record(op, file, offset, bytes, start_ns, end_ns));
    }

    /// [`Tracer::io_failed`] with start and end taken from [`Tracer::now_ns`].
    pub fn io_failed_ns(
        &self,
        op: IoOp,
        file: FileId,
        offset: Option<u64>,
        start_ns: u64,
        end_ns: u64,
    ) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        shared.push(failed_record(op, file, offset, start_ns, end_ns));
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
        let start_ns = shared.since_base(start);
        let end_ns = start_ns.saturating_add(duration_ns(dur));
        shared.push(io_record(op, file, offset, bytes, start_ns, end_ns));
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
        let start_ns = shared.since_base(start);
        let end_ns = start_ns.saturating_add(duration_ns(dur));
        shared.push(failed_record(op, file, offset, start_ns, end_ns));
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

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn bare_record(op: IoOp, file: FileId, start_ns: u64, end_ns: u64) -> Record {
    Record {
        start_ns,
        dur_ns: end_ns.saturating_sub(start_ns),
        cat: op.category(),
        name: op.event_name(),
        file: file.0,
        nargs: 0,
        args: NO_ARGS,
    }
}

fn io_record(
    op: IoOp,
    file: FileId,
    offset: Option<u64>,
    bytes: Option<u64>,
    start_ns: u64,
    end_ns: u64,
) -> Record {
    let mut rec = bare_record(op, file, start_ns, end_ns);
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
    rec
}

fn failed_record(
    op: IoOp,
    file: FileId,
    offset: Option<u64>,
    start_ns: u64,
    end_ns: u64,
) -> Record {
    let mut rec = bare_record(op, file, start_ns, end_ns);
    rec.args[0] = ("ret", -1);
    rec.nargs = 1;
    if let Some(off) = offset {
        rec.args[1] = ("offset", i64::try_from(off).unwrap_or(i64::MAX));
        rec.nargs = 2;
    }
    rec
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
    /// [`Shared::now_ns`] at the start.
    start_ns: u64,
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
        let Some(shared) = self.shared else {
            return;
        };
        shared.push(Record {
            start_ns: self.start_ns,
            dur_ns: shared.now_ns().saturating_sub(self.start_ns),
            cat: self.span.cat,
            name: self.span.name,
            file: 0,
            nargs: self.nargs,
            args: self.args,
        });
    }
}
