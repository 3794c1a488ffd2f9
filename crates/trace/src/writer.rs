//! The background writer. While the run goes on it only *packs*: the records of full
//! thread buffers become a compact binary form (a few bytes per field) held in memory,
//! and the emptied buffers go back to the threads (a refilled buffer's pages are already
//! mapped, a fresh one's would fault on the recording thread). Beyond [`HELD_BYTES`] the
//! packed bytes go to a spill file beside the trace. When the trace is finished, after
//! the measured phase, it turns them into the JSON lines of the `.pfw(.gz)` file.
//!
//! Why two phases: a small-record run makes over a million events per second, and
//! formatting JSON and gzipping it costs a few thousand instructions per event, which on
//! a small machine takes a core from the reader threads whose speed is being measured.
//! Packing costs about a tenth of that (and no system call per buffer), and the expensive
//! part moves to after the run, as dftracer does when it compresses at finalisation.
//! Memory stays bounded: beyond `HELD_BYTES` the events live in the file system.
//!
//! The trace file is in dftracer 2.x's line format: one JSON object per line, no array
//! brackets and no separating commas, times in whole microseconds, `type` as dftracer's
//! numbers (1 its own records, 3 POSIX and other I/O, 6 the application's AI spans), `ph` as
//! the letters `X` and `M` (see [`PH_COMPLETE`]), metadata records for the host (`HH`), the
//! time unit (`CM`), the rank (`PR`), file names (`FH`, absolute paths) and thread names, and
//! `start`/`end` records around the events. dftracer's tools (`dftracer_validate`,
//! `dftracer_info`, dfanalyzer) and `dlio analyze` read it line by line; Perfetto wants a JSON
//! array (see the README). It is written under a temporary name and renamed when complete, so
//! a crash never leaves a truncated trace under the final name.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;

use dlio_storage::PathTable;

use flate2::Compression;
use flate2::write::GzEncoder;
use rustc_hash::FxHashSet;

use crate::intern::{self, NameId};
use crate::names::IoOp;
use crate::names::name_hash;
use crate::tracer::{IoRecord, MAX_ARGS, Pool, SpanRecord};

/// What the hot path sends to the writer.
pub(crate) enum Msg {
    /// A full (or final) thread buffer, with the names of files the thread saw for the
    /// first time (FH metadata; deduplicated across threads here).
    Events {
        tid: u32,
        spans: Vec<SpanRecord>,
        ios: Vec<IoRecord>,
        files: Vec<(u64, String)>,
    },
    /// Tables of the files named ahead of the run: their FH metadata is written when the
    /// trace is finished.
    Tables(Vec<Arc<PathTable>>),
    /// A new thread (thread_name metadata).
    Thread { tid: u32, name: String },
    /// Stop spilling and write the trace file; stamps are worth `ns_per_unit` ns each.
    Finish { ns_per_unit: f64 },
}

/// The `type` of dftracer 2.x's records: its own (metadata, `start`, `end`).
const TYPE_DFTRACER: u8 = 1;
/// The `type` of an I/O call (POSIX, STDIO, object-store requests).
const TYPE_IO: u8 = 3;
/// The `type` of an application span (the AI taxonomy's).
const TYPE_APP: u8 = 6;
/// The `ph` of a complete event. dftracer 2.2 writes 1 and 4; dftracer-utils 0.0.14 reads
/// both forms, but dfanalyzer 0.0.9 (on the utils 0.0.12 it requires) knows only the letters:
/// with 4 it takes every metadata record for an event at time 0. So the letters, as 1.x wrote.
const PH_COMPLETE: &str = "\"X\"";
/// The `ph` of a metadata record (see [`PH_COMPLETE`]).
const PH_METADATA: &str = "\"M\"";
/// The dftracer trace-format version the `start` record declares (2.0.3's, whose records
/// this writer reproduces).
const FORMAT_VERSION: u32 = 20003;

/// Fixed facts written once at the start.
pub(crate) struct Header {
    /// The `pid` of every record: the OS process id, or a per-rank id when ranks share a
    /// process (see `TraceOptions::shares_process`).
    pub pid: u32,
    /// The OS process id (the `start` record's `os_pid`).
    pub os_pid: u32,
    pub rank: u32,
    pub size: u32,
    pub hostname: String,
    pub base_unix_ns: u64,
    /// When the traced work began, in ns after `base_unix_ns` (the `start` record's time).
    pub started_ns: u64,
}

/// Where the writer spills and what it finally writes.
pub(crate) struct Paths {
    /// The open spill file (created by `Tracer::create`, so errors surface early); taken
    /// by the spilling phase.
    pub spill_file: Option<File>,
    pub spill: PathBuf,
    /// The finished trace.
    pub trace: PathBuf,
    pub compress: bool,
}

/// What was written.
pub(crate) struct WriterStats {
    pub events: u64,
    pub metadata_events: u64,
}

/// Packed entries the writers of a process hold in memory together before one writes its
/// share to its spill file (64 MiB hold about three million I/O events, ten seconds of a
/// small-record run). Counted across tracers, so a process with many ranks holds no more.
const HELD_BYTES: usize = 64 << 20;

/// Packed bytes held in memory by every writer of this process.
static HELD: AtomicUsize = AtomicUsize::new(0);

// Spill entry tags.
const TAG_SPANS: u8 = 1;
const TAG_IOS: u8 = 4;
const TAG_FILE: u8 = 2;
const TAG_THREAD: u8 = 3;
/// Flag in a span's argument-count byte: its times are nanoseconds, not stamps.
const IN_NS: u8 = 0x40;
/// The argument count in that byte.
const NARGS: u8 = 0x3f;
// Flags in an I/O event's flag byte (the low 5 bits are the operation).
const IO_OP: u8 = 0x1f;
const IO_IN_NS: u8 = 0x20;
const IO_HAS_OFFSET: u8 = 0x40;
const IO_HAS_FILE: u8 = 0x80;
/// The `bytes` field's varint: 0 for none, 1 for failed, n + 2 for n bytes.
fn bytes_code(bytes: i64) -> u64 {
    match bytes {
        IoRecord::NO_BYTES => 0,
        IoRecord::FAILED => 1,
        n => (n as u64).saturating_add(2),
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// What a writer's packing buffer starts with when its pages are mapped ahead (see
/// [`spill_buffer`]): about half a million events, a few seconds of a small-record run.
pub(crate) const SPILL_CHUNK: usize = 8 << 20;

/// The writer's packing buffer: with every page touched when `map` is set, or empty with
/// room for a megabyte. On the virtual machines this runs on a page fault costs about
/// 1.7 us, so growing into fresh memory while the run is measured costs the writer (and
/// the readers it shares the cores with) more than the packing itself; the faults are
/// taken here, before the run, by the thread that creates the trace.
pub(crate) fn spill_buffer(map: bool) -> Vec<u8> {
    if !map {
        return Vec::with_capacity(1 << 20);
    }
    let mut buf = vec![0u8; SPILL_CHUNK];
    // `vec!` of zeros may map untouched zero pages; writing one byte per page maps them.
    for page in buf.chunks_mut(4096) {
        page[0] = 1;
    }
    buf.clear();
    buf
}

/// Phase 1: packs records into the spill.
struct Spiller {
    /// Bytes of `buf` counted in [`HELD`].
    counted: usize,
    file: BufWriter<File>,
    buf: Vec<u8>,
    files_seen: FxHashSet<u64>,
}

impl Spiller {
    fn events(&mut self, tid: u32, spans: &[SpanRecord], ios: &[IoRecord]) -> io::Result<()> {
        let out = &mut self.buf;
        if !spans.is_empty() {
            out.push(TAG_SPANS);
            put_varint(out, u64::from(tid));
            put_varint(out, spans.len() as u64);
            let mut prev_start = 0u64;
            for r in spans {
                put_varint(out, u64::from(r.span));
                put_varint(out, zigzag(r.start.wrapping_sub(prev_start) as i64));
                prev_start = r.start;
                put_varint(out, r.dur);
                let nargs = r.nargs.min(MAX_ARGS as u8);
                out.push(if r.in_ns { nargs | IN_NS } else { nargs });
                let n = usize::from(nargs);
                for (&k, &v) in r.keys[..n].iter().zip(&r.values[..n]) {
                    put_varint(out, u64::from(k));
                    put_varint(out, zigzag(v));
                }
            }
        }
        if !ios.is_empty() {
            out.push(TAG_IOS);
            put_varint(out, u64::from(tid));
            put_varint(out, ios.len() as u64);
            let mut prev_start = 0u64;
            for r in ios {
                let mut flags = r.op as u8;
                if r.in_ns {
                    flags |= IO_IN_NS;
                }
                if r.has_offset {
                    flags |= IO_HAS_OFFSET;
                }
                if r.file != 0 {
                    flags |= IO_HAS_FILE;
                }
                out.push(flags);
                put_varint(out, zigzag(r.start.wrapping_sub(prev_start) as i64));
                prev_start = r.start;
                put_varint(out, r.dur);
                if r.file != 0 {
                    out.extend_from_slice(&r.file.to_le_bytes());
                }
                if r.has_offset {
                    put_varint(out, r.offset);
                }
                put_varint(out, bytes_code(r.bytes));
            }
        }
        self.spill_if_full()
    }

    /// Moves this writer's packed entries to its spill file once the writers of the
    /// process hold more than [`HELD_BYTES`] together.
    fn spill_if_full(&mut self) -> io::Result<()> {
        let added = self.buf.len() - self.counted;
        self.counted = self.buf.len();
        if HELD.fetch_add(added, Ordering::Relaxed) + added > HELD_BYTES {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> io::Result<()> {
        self.file.write_all(&self.buf)?;
        HELD.fetch_sub(self.counted, Ordering::Relaxed);
        self.counted = 0;
        self.buf.clear();
        if self.buf.capacity() > SPILL_CHUNK * 4 {
            // Give back what a burst took (keeping the first, mapped, pages).
            self.buf.shrink_to(SPILL_CHUNK);
        }
        self.file.flush()
    }

    fn file_name(&mut self, hash: u64, name: &str) -> io::Result<()> {
        if !self.files_seen.insert(hash) {
            return Ok(());
        }
        self.buf.push(TAG_FILE);
        self.buf.extend_from_slice(&hash.to_le_bytes());
        put_str(&mut self.buf, name);
        self.spill_if_full()
    }

    fn thread(&mut self, tid: u32, name: &str) -> io::Result<()> {
        self.buf.push(TAG_THREAD);
        put_varint(&mut self.buf, u64::from(tid));
        put_str(&mut self.buf, name);
        self.spill_if_full()
    }
}

impl Drop for Spiller {
    fn drop(&mut self) {
        HELD.fetch_sub(self.counted, Ordering::Relaxed);
    }
}

/// Reads the spill back.
struct SpillReader<R: Read> {
    inner: R,
}

impl<R: Read> SpillReader<R> {
    /// One byte, or `None` at a clean end of the spill.
    fn tag(&mut self) -> io::Result<Option<u8>> {
        let mut b = [0u8; 1];
        loop {
            match self.inner.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(_) => return Ok(Some(b[0])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn byte(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.inner.read_exact(&mut b)?;
        Ok(b[0])
    }

    fn varint(&mut self) -> io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(corrupt("a number longer than 10 bytes"))
    }

    fn u64_le(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.inner.read_exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn string(&mut self) -> io::Result<String> {
        let len = usize::try_from(self.varint()?).map_err(|_| corrupt("a string length"))?;
        let mut b = vec![0u8; len];
        self.inner.read_exact(&mut b)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
}

fn corrupt(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the trace spill file is damaged ({what})"),
    )
}

enum Sink {
    Gzip(Box<GzEncoder<BufWriter<File>>>),
    Plain(BufWriter<File>),
}

impl Sink {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Gzip(w) => w.write_all(bytes),
            Sink::Plain(w) => w.write_all(bytes),
        }
    }

    /// Writes the gzip trailer (if any) and flushes everything to the file.
    fn finish(self) -> io::Result<()> {
        let mut inner = match self {
            Sink::Gzip(w) => w.finish()?,
            Sink::Plain(w) => w,
        };
        inner.flush()?;
        inner.get_ref().sync_data()
    }
}

/// Phase 2: JSON lines. Formatting is by hand (`itoa` for numbers, a table for hex)
/// because `core::fmt` was most of the writer's cost per event.
struct Out {
    sink: Sink,
    line: Vec<u8>,
    next_id: u64,
    /// The latest end of an event so far, in microseconds since the epoch (the `end` record's).
    last_end_us: u64,
    stats: WriterStats,
    /// `"pid":N,` ready to paste.
    pid_field: Vec<u8>,
    /// `"hhash":"…"` ready to paste.
    hhash_field: Vec<u8>,
    hhash: String,
    base_unix_ns: u64,
    ints: itoa::Buffer,
}

impl Out {
    fn int(&mut self, v: impl itoa::Integer) {
        self.line.extend_from_slice(self.ints.format(v).as_bytes());
    }

    /// Starts a complete event's line: `{"id":N,`.
    fn begin_event(&mut self) {
        self.line.extend_from_slice(b"{\"id\":");
        let id = self.next_id;
        self.int(id);
        self.line.push(b',');
        self.next_id += 1;
    }

    /// `"name":"…","cat":"…","type":T,"pid":P,"tid":T,`: the fields every record starts with.
    fn identity(&mut self, name: &str, cat: &str, kind: u8, tid: u32) {
        self.line.extend_from_slice(b"\"name\":");
        push_json_string(&mut self.line, name);
        self.line.extend_from_slice(b",\"cat\":\"");
        self.line.extend_from_slice(cat.as_bytes());
        self.line.extend_from_slice(b"\",\"type\":");
        self.int(kind);
        self.line.push(b',');
        self.line.extend_from_slice(&self.pid_field);
        self.line.extend_from_slice(b"\"tid\":");
        self.int(tid);
    }

    /// A metadata record: `{"name":NAME,…,"ph":4,"args":{"hhash":…,"name":KEY,"value":VALUE}}`,
    /// as dftracer writes its FH, HH, CM, PR and thread_name records (no `id`).
    fn metadata(&mut self, tid: u32, name: &str, key: &str, value: &str) {
        self.line.push(b'{');
        self.identity(name, "dftracer", TYPE_DFTRACER, tid);
        self.line.extend_from_slice(b",\"ph\":");
        self.line.extend_from_slice(PH_METADATA.as_bytes());
        self.line.extend_from_slice(b",\"args\":{");
        self.line.extend_from_slice(&self.hhash_field);
        self.line.extend_from_slice(b",\"name\":");
        push_json_string(&mut self.line, key);
        self.line.extend_from_slice(b",\"value\":");
        push_json_string(&mut self.line, value);
        self.line.extend_from_slice(b"}}\n");
        self.stats.metadata_events += 1;
    }

    /// A thread's name, in dftracer's shape (`args.name` the name, `args.value` "thread_name").
    fn thread_name(&mut self, tid: u32, name: &str) {
        self.metadata(tid, "thread_name", name, "thread_name");
    }

    /// dftracer's `start` or `end` record: a zero-length complete event of its own type, at
    /// `at_us`, with `extra` (already JSON, each field preceded by a comma) in its arguments.
    fn boundary(&mut self, tid: u32, name: &str, at_us: u64, extra: &str) {
        self.begin_event();
        self.identity(name, "dftracer", TYPE_DFTRACER, tid);
        self.line.extend_from_slice(b",\"ts\":");
        self.int(at_us);
        self.line.extend_from_slice(b",\"dur\":0,\"ph\":");
        self.line.extend_from_slice(PH_COMPLETE.as_bytes());
        self.line.extend_from_slice(b",\"args\":{");
        self.line.extend_from_slice(&self.hhash_field);
        self.line.extend_from_slice(extra.as_bytes());
        self.line.extend_from_slice(b"}}\n");
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        tid: u32,
        cat: &str,
        name: &str,
        start_ns: u64,
        dur_ns: u64,
        file: u64,
        args: &[(&str, i64)],
    ) {
        self.begin_event();
        let kind = if crate::IO_CATEGORIES.contains(&cat) {
            TYPE_IO
        } else {
            TYPE_APP
        };
        self.identity(name, cat, kind, tid);
        // Whole microseconds, as dftracer 2.x writes them: the start and the end are each
        // truncated, so the durations of consecutive events still add up to the time they span.
        let start = self.base_unix_ns.saturating_add(start_ns);
        let (ts, end) = (start / 1000, start.saturating_add(dur_ns) / 1000);
        self.last_end_us = self.last_end_us.max(end);
        self.line.extend_from_slice(b",\"ts\":");
        self.int(ts);
        self.line.extend_from_slice(b",\"dur\":");
        self.int(end - ts);
        self.line.extend_from_slice(b",\"ph\":");
        self.line.extend_from_slice(PH_COMPLETE.as_bytes());
        self.line.extend_from_slice(b",\"args\":{");
        self.line.extend_from_slice(&self.hhash_field);
        if file != 0 {
            self.line.extend_from_slice(b",\"fhash\":\"");
            push_hex16(&mut self.line, file);
            self.line.push(b'"');
        }
        for &(k, v) in args {
            self.line.extend_from_slice(b",\"");
            self.line.extend_from_slice(k.as_bytes());
            self.line.extend_from_slice(b"\":");
            self.int(v);
        }
        self.line.extend_from_slice(b"}}\n");
        self.stats.events += 1;
    }

    fn flush_line(&mut self) -> io::Result<()> {
        if self.line.len() >= 1 << 16 {
            self.sink.write_all(&self.line)?;
            self.line.clear();
        }
        Ok(())
    }
}

/// `path` made absolute against the working directory (dftracer names files by absolute
/// path), without touching the file system; as it is when that fails.
fn absolute(path: &Path) -> std::borrow::Cow<'_, Path> {
    if path.is_absolute() {
        return std::borrow::Cow::Borrowed(path);
    }
    std::path::absolute(path).map_or(std::borrow::Cow::Borrowed(path), std::borrow::Cow::Owned)
}

fn push_hex16(out: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    for (i, d) in digits.iter_mut().enumerate() {
        *d = HEX[((v >> (60 - 4 * i)) & 0xf) as usize];
    }
    out.extend_from_slice(&digits);
}

fn push_json_string(out: &mut Vec<u8>, s: &str) {
    // Rare (metadata only): serde_json gets the escaping right.
    out.extend_from_slice(
        serde_json::Value::String(s.to_string())
            .to_string()
            .as_bytes(),
    );
}

/// What the packing phase leaves for [`write`]: the spill (flushed and closed) and what
/// it needs to become the trace.
pub(crate) struct Packed {
    paths: Paths,
    pub(crate) header: Header,
    tables: Vec<Arc<PathTable>>,
    /// The packed entries still in memory: they follow those in the spill file.
    held: Vec<u8>,
    ns_per_unit: f64,
}

/// Gives this thread the lowest priority of normal threads (nice 19): when every core is
/// busy, the scheduler lets a reader or the training loop finish its time slice instead of
/// switching to the writer as soon as a buffer arrives, and the writer gets about 1.5% of a
/// busy core; the queue's bound stops the recording threads before memory grows. Not
/// `SCHED_IDLE`, which measured the same here but would starve the writer (and, through the
/// full queue, the run) on a node that other jobs keep busy. Not fatal when refused.
fn lower_priority() {
    // SAFETY: setpriority has no memory-safety preconditions; with PRIO_PROCESS and 0 it
    // applies to the calling thread on Linux (nice values are per thread there). Raising
    // one's own nice value needs no privilege; failure leaves the priority as it was.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
}

/// The writer thread's body: packs the records it receives into the spill until
/// [`Msg::Finish`] (or until every sender is gone), at the lowest priority. The trace file
/// is written by [`write`], on the thread that finishes the trace, at that thread's
/// priority (a thread cannot lower its nice value again without privilege).
pub(crate) fn run(
    rx: Receiver<Msg>,
    mut paths: Paths,
    header: Header,
    pool: &Pool,
    buf: Vec<u8>,
) -> io::Result<Packed> {
    lower_priority();
    let spill_file = paths
        .spill_file
        .take()
        .ok_or_else(|| corrupt("no spill file"))?;
    let mut spiller = Spiller {
        file: BufWriter::with_capacity(1 << 20, spill_file),
        buf,
        counted: 0,
        files_seen: FxHashSet::default(),
    };
    let mut ns_per_unit = 1.0;
    let mut tables: Vec<Arc<PathTable>> = Vec::new();
    let spilled = (|| -> io::Result<()> {
        for msg in rx.iter() {
            match msg {
                Msg::Events {
                    tid,
                    spans,
                    ios,
                    files,
                } => {
                    for (hash, name) in &files {
                        spiller.file_name(*hash, name)?;
                    }
                    spiller.events(tid, &spans, &ios)?;
                    // Straight back to the threads: a buffer they refill is one whose
                    // pages are already mapped.
                    pool.give_back(spans, ios);
                }
                // Kept for the end: the names become FH events when the trace is written,
                // and names met in the buffers are checked against them there, so the
                // writer does no per-file work while the run is measured.
                Msg::Tables(new) => tables.extend(new),
                Msg::Thread { tid, name } => spiller.thread(tid, &name)?,
                Msg::Finish { ns_per_unit: rate } => {
                    ns_per_unit = rate;
                    break;
                }
            }
        }
        // What is still in memory stays there: `write` reads it after the spill file.
        spiller.file.flush()
    })();
    // Keep draining so recording threads never block on a writer that failed.
    if spilled.is_err() {
        for msg in rx.iter() {
            if matches!(msg, Msg::Finish { .. }) {
                break;
            }
        }
    }
    let held = std::mem::take(&mut spiller.buf);
    drop(spiller);
    match spilled {
        Ok(()) => Ok(Packed {
            paths,
            header,
            tables,
            held,
            ns_per_unit,
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&paths.spill);
            Err(e)
        }
    }
}

/// Writes the trace file from a finished spill (JSON lines, gzip), then removes the spill.
pub(crate) fn write(packed: Packed) -> io::Result<WriterStats> {
    let Packed {
        paths,
        header,
        tables,
        held,
        ns_per_unit,
    } = packed;
    let result = write_trace(&paths, &header, &tables, &held, ns_per_unit);
    let _ = std::fs::remove_file(&paths.spill);
    result
}

/// The temporary name the trace is written under before it is renamed into place.
fn partial_name(trace: &Path) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn write_trace(
    paths: &Paths,
    header: &Header,
    tables: &[Arc<PathTable>],
    held: &[u8],
    ns_per_unit: f64,
) -> io::Result<WriterStats> {
    let partial = partial_name(&paths.trace);
    let result = write_trace_to(&partial, paths, header, tables, held, ns_per_unit)
        .and_then(|stats| std::fs::rename(&partial, &paths.trace).map(|()| stats));
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

fn write_trace_to(
    partial: &Path,
    paths: &Paths,
    header: &Header,
    tables: &[Arc<PathTable>],
    held: &[u8],
    ns_per_unit: f64,
) -> io::Result<WriterStats> {
    // Every span name and argument key the records can refer to (the tables only grow).
    let span_names = intern::span_names();
    let keys = intern::keys();
    let buffered = BufWriter::with_capacity(1 << 20, File::create(partial)?);
    let sink = if paths.compress {
        Sink::Gzip(Box::new(GzEncoder::new(buffered, Compression::fast())))
    } else {
        Sink::Plain(buffered)
    };
    let hhash = format!("{:016x}", name_hash(header.hostname.as_bytes()));
    let mut out = Out {
        sink,
        line: Vec::with_capacity(1 << 17),
        next_id: 0,
        last_end_us: header.base_unix_ns / 1000,
        stats: WriterStats {
            events: 0,
            metadata_events: 0,
        },
        pid_field: format!("\"pid\":{},", header.pid).into_bytes(),
        hhash_field: format!("\"hhash\":\"{hhash}\"").into_bytes(),
        hhash,
        base_unix_ns: header.base_unix_ns,
        ints: itoa::Buffer::new(),
    };
    let pid_tid = header.pid;
    let hhash = out.hhash.clone();
    out.metadata(pid_tid, "HH", &header.hostname, &hhash);
    out.metadata(pid_tid, "CM", "time_metric", "US");
    out.metadata(pid_tid, "PR", "rank", &header.rank.to_string());
    out.metadata(pid_tid, "PR", "size", &header.size.to_string());
    let cwd = std::env::current_dir().unwrap_or_default();
    let start_args = format!(
        ",\"os_pid\":{},\"rank\":{},\"size\":{},\"version\":{FORMAT_VERSION},\"writer\":\"dlio {}\",\"cwd\":\"{:016x}\"",
        header.os_pid,
        header.rank,
        header.size,
        env!("CARGO_PKG_VERSION"),
        name_hash(cwd.as_os_str().as_encoded_bytes())
    );
    let started_us = header.base_unix_ns.saturating_add(header.started_ns) / 1000;
    out.boundary(pid_tid, "start", started_us, &start_args);
    // Names met later in the buffers are these tables' only when the same path was opened
    // through another copy of it; write each name once.
    let mut named: FxHashSet<u64> = FxHashSet::default();
    for path in tables.iter().flat_map(|t| t.iter()) {
        let hash = name_hash(path.as_os_str().as_encoded_bytes());
        named.insert(hash);
        out.metadata(
            pid_tid,
            "FH",
            &absolute(path).to_string_lossy(),
            &format!("{hash:016x}"),
        );
        out.flush_line()?;
    }

    // The spilled entries, then those still in memory.
    let mut spill = SpillReader {
        inner: BufReader::with_capacity(1 << 20, File::open(&paths.spill)?).chain(held),
    };
    while let Some(tag) = spill.tag()? {
        match tag {
            TAG_SPANS => write_spans(&mut spill, &mut out, &span_names, &keys, ns_per_unit)?,
            TAG_IOS => write_ios(&mut spill, &mut out, ns_per_unit)?,
            TAG_FILE => {
                let hash = spill.u64_le()?;
                let name = spill.string()?;
                if named.contains(&hash) {
                    continue;
                }
                out.metadata(
                    pid_tid,
                    "FH",
                    &absolute(Path::new(&name)).to_string_lossy(),
                    &format!("{hash:016x}"),
                );
            }
            TAG_THREAD => {
                let tid = u32::try_from(spill.varint()?).map_err(|_| corrupt("a thread id"))?;
                let name = spill.string()?;
                out.thread_name(tid, &name);
            }
            _ => return Err(corrupt("an unknown entry")),
        }
        out.flush_line()?;
    }
    let end_us = out.last_end_us;
    out.boundary(pid_tid, "end", end_us, "");
    out.sink.write_all(&out.line)?;
    let stats = out.stats;
    out.sink.finish()?;
    Ok(stats)
}

/// Stamps to nanoseconds (exact when the clock already counts nanoseconds).
fn to_ns(units: u64, ns_per_unit: f64) -> u64 {
    if ns_per_unit == 1.0 {
        units
    } else {
        (units as f64 * ns_per_unit).round() as u64
    }
}

/// One thread's run of spans from the spill, as events.
fn write_spans<R: Read>(
    spill: &mut SpillReader<R>,
    out: &mut Out,
    span_names: &[(&'static str, &'static str)],
    keys: &[&'static str],
    ns_per_unit: f64,
) -> io::Result<()> {
    let mut args: [(&str, i64); MAX_ARGS] = [("", 0); MAX_ARGS];
    let tid = u32::try_from(spill.varint()?).map_err(|_| corrupt("a thread id"))?;
    let count = spill.varint()?;
    let mut start = 0u64;
    for _ in 0..count {
        let id = NameId::try_from(spill.varint()?).map_err(|_| corrupt("an event name"))?;
        let (cat, name) = intern::span_name(span_names, id);
        start = start.wrapping_add(unzigzag(spill.varint()?) as u64);
        let dur = spill.varint()?;
        let flags = spill.byte()?;
        let nargs = usize::from(flags & NARGS);
        if nargs > MAX_ARGS {
            return Err(corrupt("an argument count"));
        }
        for slot in &mut args[..nargs] {
            let key = NameId::try_from(spill.varint()?).map_err(|_| corrupt("an argument name"))?;
            let key = intern::key(keys, key);
            *slot = (key, unzigzag(spill.varint()?));
        }
        let (start_ns, dur_ns) = if flags & IN_NS != 0 {
            (start, dur)
        } else {
            (to_ns(start, ns_per_unit), to_ns(dur, ns_per_unit))
        };
        out.event(tid, cat, name, start_ns, dur_ns, 0, &args[..nargs]);
        out.flush_line()?;
    }
    Ok(())
}

/// One thread's run of I/O calls from the spill, as events (`count`, `ret`, `offset` and
/// `create` as dftracer's POSIX events carry them).
fn write_ios<R: Read>(
    spill: &mut SpillReader<R>,
    out: &mut Out,
    ns_per_unit: f64,
) -> io::Result<()> {
    let mut args: [(&str, i64); MAX_ARGS] = [("", 0); MAX_ARGS];
    let tid = u32::try_from(spill.varint()?).map_err(|_| corrupt("a thread id"))?;
    let count = spill.varint()?;
    let mut start = 0u64;
    for _ in 0..count {
        let flags = spill.byte()?;
        let op = *IoOp::ALL
            .get(usize::from(flags & IO_OP))
            .ok_or_else(|| corrupt("an I/O operation"))?;
        start = start.wrapping_add(unzigzag(spill.varint()?) as u64);
        let dur = spill.varint()?;
        let file = if flags & IO_HAS_FILE != 0 {
            spill.u64_le()?
        } else {
            0
        };
        let offset = if flags & IO_HAS_OFFSET != 0 {
            Some(spill.varint()?)
        } else {
            None
        };
        let mut n = 0;
        match spill.varint()? {
            0 => {}
            1 => {
                args[0] = ("ret", -1);
                n = 1;
            }
            code => {
                let bytes = i64::try_from(code - 2).unwrap_or(i64::MAX);
                args[0] = ("count", bytes);
                args[1] = ("ret", bytes);
                n = 2;
            }
        }
        if let Some(off) = offset {
            args[n] = ("offset", i64::try_from(off).unwrap_or(i64::MAX));
            n += 1;
        }
        if op == IoOp::Create {
            args[n] = ("create", 1);
            n += 1;
        }
        let (start_ns, dur_ns) = if flags & IO_IN_NS != 0 {
            (start, dur)
        } else {
            (to_ns(start, ns_per_unit), to_ns(dur, ns_per_unit))
        };
        out.event(
            tid,
            op.category(),
            op.event_name(),
            start_ns,
            dur_ns,
            file,
            &args[..n],
        );
        out.flush_line()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0i64, 1, -1, 63, -64, 1 << 40, i64::MAX, i64::MIN] {
            let mut buf = Vec::new();
            put_varint(&mut buf, zigzag(v));
            let mut r = SpillReader { inner: &buf[..] };
            assert_eq!(unzigzag(r.varint().unwrap()), v);
        }
        for v in [0u64, 127, 128, 300, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut r = SpillReader { inner: &buf[..] };
            assert_eq!(r.varint().unwrap(), v);
        }
    }

    #[test]
    fn entries_spilled_to_the_file_come_before_those_still_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spill = dir.path().join("trace-0-of-1.pfw.spill");
        let trace = dir.path().join("trace-0-of-1.pfw");
        let mut spiller = Spiller {
            counted: 0,
            file: BufWriter::new(File::create(&spill).expect("spill")),
            buf: Vec::new(),
            files_seen: FxHashSet::default(),
        };
        let read = |i: u64| IoRecord {
            start: i * 1000,
            dur: 10,
            file: 0,
            offset: i,
            bytes: 4096,
            op: IoOp::Read,
            has_offset: true,
            in_ns: true,
        };
        spiller.events(7, &[], &[read(0), read(1)]).expect("pack");
        spiller.spill().expect("spill");
        spiller.events(7, &[], &[read(2)]).expect("pack");
        spiller.file.flush().expect("flush");
        let held = std::mem::take(&mut spiller.buf);
        drop(spiller);
        assert!(!held.is_empty() && std::fs::metadata(&spill).expect("spill").len() > 0);
        let packed = Packed {
            paths: Paths {
                spill_file: None,
                spill: spill.clone(),
                trace: trace.clone(),
                compress: false,
            },
            header: Header {
                pid: 1,
                os_pid: 1,
                started_ns: 0,
                rank: 0,
                size: 1,
                hostname: "host".to_string(),
                base_unix_ns: 0,
            },
            tables: Vec::new(),
            held,
            ns_per_unit: 1.0,
        };
        assert_eq!(write(packed).expect("write").events, 3);
        let text = std::fs::read_to_string(&trace).expect("trace");
        let offsets: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("\"offset\":").nth(1))
            .map(|rest| {
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("")
            })
            .collect();
        assert_eq!(offsets, ["0", "1", "2"], "{text}");
        assert!(!spill.exists(), "the spill is removed");
    }

    #[test]
    fn hex_is_sixteen_lowercase_digits() {
        let mut out = Vec::new();
        push_hex16(&mut out, 0x00ab_cdef_0123_4567);
        assert_eq!(out, b"00abcdef01234567");
    }
}

#[cfg(test)]
mod op_tests {
    use crate::names::IoOp;

    #[test]
    fn every_operation_sits_at_its_own_number() {
        for (i, op) in IoOp::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i, "{op:?}");
        }
        assert!(IoOp::ALL.len() <= usize::from(super::IO_OP) + 1);
    }
}
