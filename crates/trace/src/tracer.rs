//! [`Tracer`]: the cheap hot-path API. Every call appends one fixed-size record to a
//! buffer owned by the calling thread; full buffers go to the background writer
//! (`writer.rs`), which packs them into a spill file during the run and writes the JSON
//! trace when the trace is finished. The hot path never formats, never allocates per
//! event and never takes a contended lock; timestamps come from the cheapest trustworthy
//! clock (`clock.rs`), and events are staged per thread (`Staging`) before they reach the
//! thread's buffer.

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlio_storage::PathTable;
use rustc_hash::FxHashSet;

use crate::clock::{Clock, Stamp};
use crate::error::TraceError;
use crate::intern::{self, NameId};
use crate::names::{IoOp, SpanName, name_hash};
use crate::writer::{self, Header, Msg, Paths};

/// I/O events a thread buffers before handing them to the writer.
const BUFFER_EVENTS: usize = 2048;
/// Spans a thread buffers before handing them to the writer (a sample makes one span
/// and three or four I/O events).
const BUFFER_SPANS: usize = BUFFER_EVENTS / 4;
/// Emptied buffers kept for reuse.
const POOLED_BUFFERS: usize = 16;
/// Buffers a tracer maps before the run: enough for a few threads to hand theirs over
/// before the writer has given the first back.
const MAPPED_BUFFERS: usize = 8;
/// Full buffers that may wait for the writer before recording threads block.
const QUEUE_BUFFERS: usize = 64;
/// Files [`Tracer::name_files`] names ahead of a run, at most (the trace lists them all,
/// read or not).
pub const PRENAMED_MAX: usize = 1 << 20;
/// Most arguments one event carries; further `arg` calls are ignored.
pub const MAX_ARGS: usize = 4;

/// Memory the tracers of a process map before their runs, together, at most: four
/// tracers' worth. A process of many ranks would otherwise map 9 MiB per rank; the
/// tracers beyond the allowance map their buffers as they fill them.
const PREMAPPED_MAX: usize = 4 * Premapped::BYTES;
/// Memory mapped ahead by the tracers alive now.
static PREMAPPED: AtomicUsize = AtomicUsize::new(0);

/// One tracer's share of [`PREMAPPED_MAX`], given back when dropped.
struct Premapped;

impl Premapped {
    /// A tracer's buffers mapped ahead: the writer's packing buffer and the pooled ones.
    const BYTES: usize = writer::SPILL_CHUNK
        + MAPPED_BUFFERS
            * (BUFFER_EVENTS * std::mem::size_of::<IoRecord>()
                + BUFFER_SPANS * std::mem::size_of::<SpanRecord>());

    /// A share, if the allowance has room for one.
    fn take() -> Option<Premapped> {
        PREMAPPED
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used + Premapped::BYTES <= PREMAPPED_MAX).then_some(used + Premapped::BYTES)
            })
            .ok()
            .map(|_| Premapped)
    }
}

impl Drop for Premapped {
    fn drop(&mut self) {
        PREMAPPED.fetch_sub(Premapped::BYTES, Ordering::Relaxed);
    }
}

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
    /// This rank's process runs other ranks too (`--ranks N`, N > 1): its records then carry
    /// a `pid` of its own, [`RANK_PID_BASE`] + rank, so that dftracer's tools, which tell
    /// processes apart by `pid`, count one process per rank (the `start` record keeps the OS
    /// pid as `os_pid`). A rank alone in its process keeps the OS pid.
    pub shares_process: bool,
}

/// The first per-rank `pid` (see [`TraceOptions::shares_process`]): Linux's largest possible
/// process id plus one (`PID_MAX_LIMIT`, 2^22), so that it is never a real process's.
pub const RANK_PID_BASE: u32 = 1 << 22;

impl TraceOptions {
    /// Compressed trace of `rank` of `size` in `dir`.
    pub fn new(dir: impl Into<PathBuf>, rank: u32, size: u32) -> TraceOptions {
        TraceOptions {
            dir: dir.into(),
            rank,
            size,
            compress: true,
            shares_process: false,
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

/// A span as recorded on the hot path: 64 bytes, no heap data; its name and argument keys
/// are ids of the process's tables (`intern.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpanRecord {
    /// Since the trace started, in [`Stamp`] units (or nanoseconds when `in_ns`).
    pub start: u64,
    pub dur: u64,
    /// `start` and `dur` are nanoseconds (spans timed with `Instant`s elsewhere).
    pub in_ns: bool,
    pub nargs: u8,
    pub span: NameId,
    pub keys: [NameId; MAX_ARGS],
    pub values: [i64; MAX_ARGS],
}

/// An I/O call as recorded on the hot path: 48 bytes, because a small-record run makes
/// three or four per sample and copies them around; its arguments (`count`, `ret`,
/// `offset`, `create`) follow from these fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IoRecord {
    /// Since the trace started, in [`Stamp`] units (or nanoseconds when `in_ns`).
    pub start: u64,
    pub dur: u64,
    /// The file's hash (`fhash`), or 0.
    pub file: u64,
    pub offset: u64,
    /// Bytes moved, [`IoRecord::FAILED`] for a failed call, [`IoRecord::NO_BYTES`] for a
    /// call that moves none (open, close, ...).
    pub bytes: i64,
    pub op: IoOp,
    pub has_offset: bool,
    pub in_ns: bool,
}

impl SpanRecord {
    /// A placeholder (fills buffers whose pages are mapped ahead of use).
    const EMPTY: SpanRecord = SpanRecord {
        start: 0,
        dur: 0,
        in_ns: false,
        nargs: 0,
        span: 0,
        keys: [0; MAX_ARGS],
        values: [0; MAX_ARGS],
    };
}

impl IoRecord {
    pub(crate) const FAILED: i64 = -1;
    pub(crate) const NO_BYTES: i64 = i64::MIN;

    /// A placeholder (fills buffers whose pages are mapped ahead of use).
    const EMPTY: IoRecord = IoRecord {
        start: 0,
        dur: 0,
        file: 0,
        offset: 0,
        bytes: IoRecord::NO_BYTES,
        op: IoOp::Close,
        has_offset: false,
        in_ns: false,
    };
}

/// Buffers the writer has emptied, for threads to fill again: a fresh 100 KiB buffer per
/// hand-over would be fresh pages, and page faults on the recording thread.
#[derive(Default)]
pub(crate) struct Pool {
    spans: Mutex<Vec<Vec<SpanRecord>>>,
    ios: Mutex<Vec<Vec<IoRecord>>>,
}

impl Pool {
    /// A pool of `n` buffers of each kind, every page of them touched.
    fn mapped(n: usize) -> Pool {
        let pool = Pool::default();
        for _ in 0..n {
            let mut spans = Vec::with_capacity(BUFFER_SPANS);
            spans.resize(BUFFER_SPANS, SpanRecord::EMPTY);
            let mut ios = Vec::with_capacity(BUFFER_EVENTS);
            ios.resize(BUFFER_EVENTS, IoRecord::EMPTY);
            pool.give_back(spans, ios);
        }
        pool
    }

    fn spans(&self) -> Vec<SpanRecord> {
        lock(&self.spans)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUFFER_SPANS))
    }

    fn ios(&self) -> Vec<IoRecord> {
        lock(&self.ios)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUFFER_EVENTS))
    }

    /// Takes emptied buffers back.
    pub(crate) fn give_back(&self, mut spans: Vec<SpanRecord>, mut ios: Vec<IoRecord>) {
        spans.clear();
        ios.clear();
        if spans.capacity() >= BUFFER_SPANS {
            let mut pool = lock(&self.spans);
            if pool.len() < POOLED_BUFFERS {
                pool.push(spans);
            }
        }
        if ios.capacity() >= BUFFER_EVENTS {
            let mut pool = lock(&self.ios);
            if pool.len() < POOLED_BUFFERS {
                pool.push(ios);
            }
        }
    }
}

struct ThreadBuf {
    tid: u32,
    pool: Arc<Pool>,
    spans: Vec<SpanRecord>,
    ios: Vec<IoRecord>,
    /// Names of files first seen since the last hand-over; they travel with the records,
    /// so naming a file costs no channel message (and no wake-up of the writer).
    new_files: Vec<(u64, String)>,
    tx: SyncSender<Msg>,
}

impl ThreadBuf {
    fn hand_over(&mut self) {
        if self.spans.is_empty() && self.ios.is_empty() && self.new_files.is_empty() {
            return;
        }
        let spans = std::mem::replace(&mut self.spans, self.pool.spans());
        let ios = std::mem::replace(&mut self.ios, self.pool.ios());
        // A writer that stopped has recorded its error; finish() reports it.
        let _ = self.tx.send(Msg::Events {
            tid: self.tid,
            spans,
            ios,
            files: std::mem::take(&mut self.new_files),
        });
    }

    fn push_spans(&mut self, recs: &[SpanRecord]) {
        self.spans.extend_from_slice(recs);
        if self.spans.len() >= BUFFER_SPANS {
            self.hand_over();
        }
    }

    fn push_ios(&mut self, recs: &[IoRecord]) {
        self.ios.extend_from_slice(recs);
        if self.ios.len() >= BUFFER_EVENTS {
            self.hand_over();
        }
    }

    /// Passes `path`'s name to the writer with the next hand-over.
    fn name_file(&mut self, hash: u64, path: &Path) {
        self.new_files
            .push((hash, path.to_string_lossy().into_owned()));
    }
}

pub(crate) struct Shared {
    id: u64,
    path: PathBuf,
    base: Instant,
    /// Read at `base`.
    clock: Clock,
    open: AtomicBool,
    tx: SyncSender<Msg>,
    buffers: Mutex<Vec<Arc<Mutex<ThreadBuf>>>>,
    pool: Arc<Pool>,
    /// The tables of files named ahead of the run ([`Tracer::name_files`]).
    prenamed: OnceLock<Vec<Arc<PathTable>>>,
    /// Threads whose staging area holds events of this tracer.
    staged_threads: Arc<AtomicUsize>,
    writer: Mutex<Option<JoinHandle<Result<writer::Packed, std::io::Error>>>>,
    summary: Mutex<Option<TraceSummary>>,
    /// When the traced work began ([`Tracer::mark_start`]), in ns since `base`; `u64::MAX`
    /// until then.
    started_ns: AtomicU64,
}

static NEXT_TRACER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Per tracer id, the files this thread has named to the writer (hashes; the writer
    /// deduplicates across threads). Apart from the buffers, so that naming a file that
    /// was named before takes a set lookup and no lock.
    static NAMED: RefCell<Vec<(u64, FxHashSet<u64>)>> = const { RefCell::new(Vec::new()) };
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

    fn push_span(&self, rec: SpanRecord) {
        if self.open.load(Ordering::Relaxed) {
            stage_span(self.id, rec);
        }
    }

    fn push_io(&self, rec: IoRecord) {
        if self.open.load(Ordering::Relaxed) {
            stage_io(self.id, rec);
        }
    }

    /// Puts events in this thread's buffer (registering the thread if need be), or sends
    /// them on their own when the thread is exiting.
    fn deliver_here(&self, spans: &[SpanRecord], ios: &[IoRecord]) {
        let delivered = self.with_buf(|buf| {
            buf.push_spans(spans);
            buf.push_ios(ios);
        });
        if delivered.is_none() {
            self.send_alone(spans.to_vec(), ios.to_vec());
        }
    }

    /// The thread is exiting and its buffers are gone: send the events on their own.
    fn send_alone(&self, spans: Vec<SpanRecord>, ios: Vec<IoRecord>) {
        let _ = self.tx.send(Msg::Events {
            tid: os_tid(),
            spans,
            ios,
            files: Vec::new(),
        });
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
            pool: Arc::clone(&self.pool),
            spans: self.pool.spans(),
            ios: self.pool.ios(),
            new_files: Vec::new(),
            tx: self.tx.clone(),
        }));
        lock(&self.buffers).push(Arc::clone(&buf));
        buf
    }

    fn since_base(&self, t: Instant) -> u64 {
        duration_ns(t.saturating_duration_since(self.base))
    }

    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        self.clock.now()
    }

    fn finish(&self) -> Result<TraceSummary, TraceError> {
        if let Some(done) = lock(&self.summary).clone() {
            return Ok(done);
        }
        let finishing = Instant::now();
        self.open.store(false, Ordering::SeqCst);
        // This thread's staged events; other threads hand theirs over when they end, which
        // may be a moment after they were joined (a scoped thread's closure returns before
        // its thread-local areas are dropped): wait for that, briefly.
        let _ = STAGE.try_with(|cell| {
            if let Ok(mut staging) = cell.try_borrow_mut()
                && staging.id == self.id
            {
                staging.flush();
            }
        });
        let waiting = Instant::now();
        while self.staged_threads.load(Ordering::Acquire) > 0 && waiting.elapsed() < STAGED_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        for buf in lock(&self.buffers).iter() {
            lock(buf).hand_over();
        }
        let _ = self.tx.send(Msg::Finish {
            ns_per_unit: self.clock.ns_per_unit(),
        });
        let handle = lock(&self.writer).take();
        let stats = match handle {
            Some(h) => h
                .join()
                .map_err(|_| TraceError::Writer {
                    path: self.path.clone(),
                    reason: "the writer thread panicked".to_string(),
                })?
                .and_then(|mut packed| {
                    let started = self.started_ns.load(Ordering::Relaxed);
                    if started != u64::MAX {
                        packed.header.started_ns = started;
                    }
                    writer::write(packed)
                })
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
        lock(&REGISTRY).retain(|(id, _)| *id != self.id);
    }
}

/// Every live tracer by id, for the rare event that a [`Recorder`] finds no buffer of its
/// tracer on the current thread (a handle dropped on another thread than the one that
/// opened it).
static REGISTRY: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());

/// What a file handle needs to record its events without holding the tracer: the
/// tracer's id and clock. Holding a [`Tracer`] would mean an atomic reference-count
/// update per open and per close on a cache line every reader thread shares, which on a
/// small-record run cost more than everything else the trace does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recorder {
    id: u64,
    clock: Clock,
}

impl Recorder {
    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        self.clock.now()
    }

    /// The nanoseconds from `start` to `end` (at the rate measured when the trace started).
    #[inline]
    pub(crate) fn nanos(&self, start: Stamp, end: Stamp) -> u64 {
        self.clock.nanos(end.0.saturating_sub(start.0))
    }

    /// Records an I/O call for the tracer, through this thread's staging area.
    #[inline]
    pub(crate) fn push_io(&self, rec: IoRecord) {
        stage_io(self.id, rec);
    }
}

/// I/O events a thread stages before it takes its buffer's lock.
const STAGED_IOS: usize = 128;
/// Spans a thread stages before it takes its buffer's lock. (The lock's release is a full
/// memory barrier that waits for the copied records to reach the cache: rarer is cheaper,
/// and 32 spans and 128 I/O records, 8 KiB, still fit in the L1 cache.)
const STAGED_SPANS: usize = 32;
/// How long [`Tracer::finish`] waits for ending threads to hand over their staged events.
const STAGED_WAIT: Duration = Duration::from_millis(500);

/// A thread's staging area: the events it recorded last, for one tracer, in memory no
/// other thread touches. A small-record run makes four events per sample; staging them
/// turns four lookups and lock round trips on the thread's buffer into one per 32
/// samples. Staged events reach the buffer when the area fills, when the thread records
/// for another tracer, when the thread ends, and, for the thread that calls it, in
/// [`Tracer::finish`], which also waits (at most half a second) for threads that are
/// ending to hand theirs over. A thread that is still running and idle when another thread
/// finishes the trace keeps its last few events (fewer than 128) out of it.
struct Staging {
    /// The tracer the staged events belong to (0: none).
    id: u64,
    /// That tracer's count of threads with staged events (`None` when it is gone).
    counter: Option<Arc<AtomicUsize>>,
    ios: Vec<IoRecord>,
    spans: Vec<SpanRecord>,
}

impl Staging {
    fn is_empty(&self) -> bool {
        self.ios.is_empty() && self.spans.is_empty()
    }

    fn flush(&mut self) {
        if !self.is_empty() {
            deliver(self.id, &self.spans, &self.ios);
            self.ios.clear();
            self.spans.clear();
            if let Some(counter) = &self.counter {
                counter.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// Switches to tracer `id` (flushing what was staged for another).
    fn switch_to(&mut self, id: u64) {
        self.flush();
        self.id = id;
        self.counter = lock(&REGISTRY)
            .iter()
            .find(|(live, _)| *live == id)
            .and_then(|(_, weak)| weak.upgrade())
            .map(|shared| Arc::clone(&shared.staged_threads));
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        self.flush();
    }
}

thread_local! {
    static STAGE: RefCell<Staging> = RefCell::new(Staging {
        id: 0,
        counter: None,
        ios: Vec::with_capacity(STAGED_IOS),
        spans: Vec::with_capacity(STAGED_SPANS),
    });
}

/// Records an I/O event for tracer `id` in this thread's staging area. One event per
/// visit, by value: a small-record run makes three per sample, and a handle that held
/// them to stage them together cost more in copies (of its array of records, into its
/// box, out of it) than the visits it saved.
#[inline]
fn stage_io(id: u64, rec: IoRecord) {
    if !stage_with(id, |staging| staging.ios.push(rec)) {
        deliver(id, &[], &[rec]);
    }
}

/// [`stage_io`] for a span.
#[inline]
fn stage_span(id: u64, rec: SpanRecord) {
    if !stage_with(id, |staging| staging.spans.push(rec)) {
        deliver(id, &[rec], &[]);
    }
}

/// Runs `push` on this thread's staging area for tracer `id`, flushing it when full;
/// false when the thread has none (it is exiting) or it is in use (a recursive call).
#[inline]
fn stage_with(id: u64, push: impl FnOnce(&mut Staging)) -> bool {
    STAGE
        .try_with(|cell| {
            let Ok(mut staging) = cell.try_borrow_mut() else {
                return false;
            };
            if staging.id != id {
                staging.switch_to(id);
            }
            if staging.is_empty()
                && let Some(counter) = &staging.counter
            {
                counter.fetch_add(1, Ordering::Release);
            }
            push(&mut staging);
            if staging.ios.len() >= STAGED_IOS || staging.spans.len() >= STAGED_SPANS {
                staging.flush();
            }
            true
        })
        .unwrap_or(false)
}

/// Puts events in this thread's buffer for tracer `id`, or, when the thread has none
/// (it never named a file, or it is exiting), through the tracer found by id.
fn deliver(id: u64, spans: &[SpanRecord], ios: &[IoRecord]) {
    let delivered = BUFFERS
        .try_with(
            |cell| match cell.borrow().iter().find(|(buf_id, _)| *buf_id == id) {
                Some((_, buf)) => {
                    let mut buf = lock(buf);
                    buf.push_spans(spans);
                    buf.push_ios(ios);
                    true
                }
                None => false,
            },
        )
        .unwrap_or(false);
    if !delivered {
        let shared = lock(&REGISTRY)
            .iter()
            .find(|(buf_id, _)| *buf_id == id)
            .and_then(|(_, weak)| weak.upgrade());
        if let Some(shared) = shared {
            shared.deliver_here(spans, ios);
        }
    }
}

/// A span's name and argument keys, looked up once in the process's name tables (which
/// outlive every tracer) for a span recorded many times a second: recording it with
/// [`Tracer::complete_prepared`] then skips the lookups (about 140 of the 370 instructions
/// a [`Tracer::complete`] with two arguments costs). `N` is at most [`MAX_ARGS`].
#[derive(Debug, Clone, Copy)]
pub struct PreparedSpan<const N: usize> {
    span: NameId,
    keys: [NameId; N],
}

impl<const N: usize> PreparedSpan<N> {
    /// Looks `span` and `keys` up.
    pub fn new(span: SpanName, keys: [&'static str; N]) -> PreparedSpan<N> {
        const { assert!(N <= MAX_ARGS, "a span carries at most MAX_ARGS arguments") };
        PreparedSpan {
            span: intern::span_id(span),
            keys: keys.map(intern::key_id),
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
        let (clock, base) = Clock::start();
        let base_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let os_pid = std::process::id();
        let header = Header {
            pid: if opts.shares_process {
                RANK_PID_BASE.saturating_add(opts.rank)
            } else {
                os_pid
            },
            os_pid,
            rank: opts.rank,
            size: opts.size,
            hostname: hostname(),
            base_unix_ns,
            started_ns: 0,
        };
        let (tx, rx) = mpsc::sync_channel(QUEUE_BUFFERS);
        let paths = Paths {
            spill_file: Some(spill_file),
            spill,
            trace: path.clone(),
            compress: opts.compress,
        };
        // Buffers whose pages are mapped now, not during the run (a page fault on the VMs
        // this runs on costs about 1.7 us, on the thread that records), within the
        // process's allowance; the writer gives it back when it ends.
        let premapped = Premapped::take();
        let pool = Arc::new(if premapped.is_some() {
            Pool::mapped(MAPPED_BUFFERS)
        } else {
            Pool::default()
        });
        let writer_pool = Arc::clone(&pool);
        let spill = writer::spill_buffer(premapped.is_some());
        let handle = std::thread::Builder::new()
            .name(format!("trace-writer-{}", opts.rank))
            .spawn(move || {
                let _premapped = premapped;
                writer::run(rx, paths, header, &writer_pool, spill)
            })
            .map_err(|e| io_err("create", e))?;
        let shared = Arc::new(Shared {
            id: NEXT_TRACER_ID.fetch_add(1, Ordering::Relaxed),
            path,
            base,
            clock,
            open: AtomicBool::new(true),
            tx,
            buffers: Mutex::new(Vec::new()),
            pool,
            prenamed: OnceLock::new(),
            staged_threads: Arc::new(AtomicUsize::new(0)),
            writer: Mutex::new(Some(handle)),
            summary: Mutex::new(None),
            started_ns: AtomicU64::new(u64::MAX),
        });
        lock(&REGISTRY).push((shared.id, Arc::downgrade(&shared)));
        Ok(Tracer {
            shared: Some(shared),
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
        let shared = self.shared.as_deref();
        SpanGuard {
            shared,
            span: if shared.is_some() {
                intern::span_id(span)
            } else {
                0
            },
            start: self.stamp(),
            nargs: 0,
            keys: [0; MAX_ARGS],
            values: [0; MAX_ARGS],
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
        let mut rec = SpanRecord {
            start: shared.since_base(start),
            dur: duration_ns(end.saturating_duration_since(start)),
            in_ns: true,
            nargs: 0,
            span: intern::span_id(span),
            keys: [0; MAX_ARGS],
            values: [0; MAX_ARGS],
        };
        for &(k, v) in args.iter().take(MAX_ARGS) {
            let n = usize::from(rec.nargs);
            rec.keys[n] = intern::key_id(k);
            rec.values[n] = v;
            rec.nargs += 1;
        }
        shared.push_span(rec);
    }

    /// Records a span that started at `start` and took `dur` (which the caller has measured
    /// already), whose name and argument keys were looked up beforehand: what a loader
    /// records once per sample.
    pub fn complete_prepared<const N: usize>(
        &self,
        span: &PreparedSpan<N>,
        start: Instant,
        dur: Duration,
        values: [i64; N],
    ) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        let mut rec = SpanRecord {
            start: shared.since_base(start),
            dur: duration_ns(dur),
            in_ns: true,
            nargs: N as u8,
            span: span.span,
            keys: [0; MAX_ARGS],
            values: [0; MAX_ARGS],
        };
        rec.keys[..N].copy_from_slice(&span.keys);
        rec.values[..N].copy_from_slice(&values);
        shared.push_span(rec);
    }

    /// Names a file: hashes its path and, unless the path is an entry of a table given to
    /// [`Tracer::name_files`] or this thread has seen it before, passes the name to the
    /// writer for the `FH` metadata event that maps the hash to the path. Call once per
    /// open, not per read.
    pub fn file(&self, path: &Path) -> FileId {
        let Some(shared) = self.shared.as_deref() else {
            return FileId::NONE;
        };
        let hash = name_hash(path.as_os_str().as_encoded_bytes());
        if shared
            .prenamed
            .get()
            .is_some_and(|tables| tables.iter().any(|t| t.holds(path)))
        {
            return FileId(hash);
        }
        if shared.open.load(Ordering::Relaxed) {
            let first = NAMED
                .try_with(|cell| {
                    let mut named = cell.borrow_mut();
                    let idx = match named.iter().position(|(id, _)| *id == shared.id) {
                        Some(i) => i,
                        None => {
                            // Forget the names of tracers that are gone.
                            let live = lock(&REGISTRY);
                            named.retain(|(id, _)| live.iter().any(|(l, _)| l == id));
                            named.push((shared.id, FxHashSet::default()));
                            named.len() - 1
                        }
                    };
                    named[idx].1.insert(hash)
                })
                .unwrap_or(true);
            if first {
                shared.with_buf(|buf| buf.name_file(hash, path));
            }
        }
        FileId(hash)
    }

    /// Names the files a run will read (the dataset's), before it starts. Opening one of
    /// these files through a path the table handed out then costs the reading thread a
    /// hash and no lookup ([`PathTable::holds`]): on a small-record run, looking each
    /// opened file up in a set of names cost more than any other part of tracing, because
    /// the set had left the CPU's caches by the next open. The writer writes the tables'
    /// names when the trace is finished. Only the first call counts; tables of more than
    /// [`PRENAMED_MAX`] files together are left out (their files are named when first
    /// opened, so a trace never lists millions of files it did not read).
    pub fn name_files(&self, tables: &[Arc<PathTable>]) {
        let Some(shared) = self.shared.as_deref() else {
            return;
        };
        let mut kept = Vec::new();
        let mut files = 0;
        for table in tables {
            if files + table.len() <= PRENAMED_MAX {
                files += table.len();
                kept.push(Arc::clone(table));
            }
        }
        if shared.prenamed.set(kept.clone()).is_ok() {
            let _ = shared.tx.send(Msg::Tables(kept));
        }
    }

    /// Now, on the trace's clock (see [`Stamp`]); a zero stamp when disabled. Cheaper than
    /// `Instant::now`; pair it with [`Tracer::io_between`].
    #[inline]
    pub fn stamp(&self) -> Stamp {
        match self.shared.as_deref() {
            Some(s) => s.now(),
            None => Stamp::default(),
        }
    }

    /// [`Tracer::io`] for a call that ran from `start` to `end` ([`Tracer::stamp`]s).
    pub fn io_between(
        &self,
        op: IoOp,
        file: FileId,
        offset: Option<u64>,
        bytes: Option<u64>,
        start: Stamp,
        end: Stamp,
    ) {
        if let Some(shared) = self.shared.as_deref() {
            shared.push_io(io_record(op, file, offset, bytes, start, end));
        }
    }

    /// [`Tracer::io_between`] for a call that started at `start` and took `took` (measured
    /// by the caller, e.g. on another thread): it ended `took` after `start`.
    pub fn io_lasting(
        &self,
        op: IoOp,
        file: FileId,
        bytes: Option<u64>,
        start: Stamp,
        took: Duration,
    ) {
        if let Some(shared) = self.shared.as_deref() {
            let end = shared.clock.after(start, duration_ns(took));
            shared.push_io(io_record(op, file, None, bytes, start, end));
        }
    }

    /// [`Tracer::io_failed`] for a call that ran from `start` to `end`.
    pub fn io_failed_between(
        &self,
        op: IoOp,
        file: FileId,
        offset: Option<u64>,
        start: Stamp,
        end: Stamp,
    ) {
        if let Some(shared) = self.shared.as_deref() {
            shared.push_io(failed_record(op, file, offset, start, end));
        }
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
        if let Some(shared) = self.shared.as_deref() {
            let mut rec = io_record(op, file, offset, bytes, Stamp(0), Stamp(0));
            shared.in_ns(&mut rec, start, dur);
            shared.push_io(rec);
        }
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
        if let Some(shared) = self.shared.as_deref() {
            let mut rec = failed_record(op, file, offset, Stamp(0), Stamp(0));
            shared.in_ns(&mut rec, start, dur);
            shared.push_io(rec);
        }
    }

    /// Writes every buffered event, closes the file and returns what it holds. Later
    /// calls return the same summary; events recorded afterwards are dropped.
    pub fn finish(&self) -> Result<Option<TraceSummary>, TraceError> {
        match self.shared.as_deref() {
            Some(s) => s.finish().map(Some),
            None => Ok(None),
        }
    }

    /// Marks now as the moment the traced work begins: the trace's `start` record carries this
    /// time instead of the tracer's creation, so tools that measure a job from `start` to `end`
    /// (dfanalyzer's job time) do not count the set-up between the two. The first call wins.
    pub fn mark_start(&self) {
        if let Some(s) = self.shared.as_deref() {
            let now = s.since_base(Instant::now());
            let _ =
                s.started_ns
                    .compare_exchange(u64::MAX, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// What a file handle records with (`None` when disabled).
    pub(crate) fn recorder(&self) -> Option<Recorder> {
        self.shared.as_deref().map(|s| Recorder {
            id: s.id,
            clock: s.clock,
        })
    }
}

impl Shared {
    /// Times `rec` with an `Instant` and a duration (nanoseconds since the trace started).
    fn in_ns(&self, rec: &mut IoRecord, start: Instant, dur: Duration) {
        rec.start = self.since_base(start);
        rec.dur = duration_ns(dur);
        rec.in_ns = true;
    }
}

/// `d` in nanoseconds (saturating: 584 years); in 64-bit arithmetic, which is all a
/// span a few times per sample should cost.
fn duration_ns(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// The record of a successful call; `pub(crate)` for [`crate::Traced`], which batches
/// the events of a handle.
#[inline]
pub(crate) fn io_record(
    op: IoOp,
    file: FileId,
    offset: Option<u64>,
    bytes: Option<u64>,
    start: Stamp,
    end: Stamp,
) -> IoRecord {
    IoRecord {
        start: start.0,
        dur: end.0.saturating_sub(start.0),
        file: file.0,
        offset: offset.unwrap_or(0),
        bytes: bytes.map_or(IoRecord::NO_BYTES, |n| i64::try_from(n).unwrap_or(i64::MAX)),
        op,
        has_offset: offset.is_some(),
        in_ns: false,
    }
}

/// The record of a failed call (`ret` is -1).
#[inline]
pub(crate) fn failed_record(
    op: IoOp,
    file: FileId,
    offset: Option<u64>,
    start: Stamp,
    end: Stamp,
) -> IoRecord {
    IoRecord {
        bytes: IoRecord::FAILED,
        ..io_record(op, file, offset, None, start, end)
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
    span: NameId,
    start: Stamp,
    nargs: u8,
    keys: [NameId; MAX_ARGS],
    values: [i64; MAX_ARGS],
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
        if self.shared.is_none() {
            return;
        }
        let key = intern::key_id(key);
        let n = usize::from(self.nargs);
        if let Some(i) = self.keys[..n].iter().position(|&k| k == key) {
            self.values[i] = value;
        } else if n < MAX_ARGS {
            self.keys[n] = key;
            self.values[n] = value;
            self.nargs += 1;
        }
    }
}

impl Drop for SpanGuard<'_> {
    fn drop(&mut self) {
        let Some(shared) = self.shared else {
            return;
        };
        let end = shared.now();
        shared.push_span(SpanRecord {
            start: self.start.0,
            dur: end.0.saturating_sub(self.start.0),
            in_ns: false,
            nargs: self.nargs,
            span: self.span,
            keys: self.keys,
            values: self.values,
        });
    }
}
