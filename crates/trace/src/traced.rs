//! [`Traced`]: a [`Storage`] decorator that records one event per storage call, so every
//! engine is traced the same way and engines stay free of tracing code (as `Metered`
//! keeps them free of counters).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dlio_storage::{
    Consume, DirEntry, Extent, ForwardStorage, IoCounters, Metered, PendingRead, ReadBell,
    ReadHandle, ReadRequest, Storage, StorageError, WholeRead, WriteHandle,
};

use crate::clock::Stamp;
use crate::names::IoOp;
use crate::tracer::{FileId, Recorder, Tracer, failed_record, io_record};

/// Wraps an engine and records each call in a [`Tracer`]: `open`, `pread` (one per
/// request, with `offset` and `count`), `close`, `open` with `create`, `write`, `fsync`,
/// `close` at commit, `stat`, `opendir`, `mkdir`, `unlink`, `rmdir`. An engine whose name
/// starts with `s3` records reads as `GET` and writes as `PUT`.
#[derive(Debug)]
pub struct Traced<S: Storage> {
    inner: S,
    tracer: Tracer,
    object_store: bool,
    /// Where read handles count their reads themselves ([`metered_and_traced`]).
    counters: Option<Arc<IoCounters>>,
}

/// `inner` counted in `counters` ([`Metered`]) and traced in `tracer`: the stack a run
/// reads through. With an enabled tracer the traced read handles count their reads in
/// `counters` themselves, timed by the same clock readings as their events, and `Metered`
/// returns them as they are ([`Metered::counting_reads_inside`]): a read then costs one
/// boxed handle and one pair of clock readings instead of two of each, which on a
/// small-record run is a third of what tracing costs. The counts are the same as
/// `Metered`'s own (every successful read call, its bytes, and one latency per call, per
/// batch or per stream range); the latencies come from the trace's clock.
pub fn metered_and_traced<S: Storage>(
    inner: S,
    tracer: Tracer,
    counters: Arc<IoCounters>,
) -> Metered<Traced<S>> {
    let enabled = tracer.is_enabled();
    let mut traced = Traced::new(inner, tracer);
    if enabled {
        traced.counters = Some(Arc::clone(&counters));
    }
    let metered = Metered::with_counters(traced, counters);
    if enabled {
        metered.counting_reads_inside()
    } else {
        metered
    }
}

impl<S: Storage> Traced<S> {
    /// Traces `inner`'s calls into `tracer`.
    pub fn new(inner: S, tracer: Tracer) -> Traced<S> {
        let object_store = inner.engine().starts_with("s3");
        Traced {
            inner,
            tracer,
            object_store,
            counters: None,
        }
    }

    /// The wrapped engine.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The tracer events go to.
    pub fn tracer(&self) -> &Tracer {
        &self.tracer
    }
}

/// Runs `call` and records it as one `op` on `file` that moved no bytes (failed if it
/// failed).
fn timed<T>(
    tracer: &Tracer,
    op: IoOp,
    file: FileId,
    call: impl FnOnce() -> Result<T, StorageError>,
) -> Result<T, StorageError> {
    let start = tracer.stamp();
    let result = call();
    let end = tracer.stamp();
    match &result {
        Ok(_) => tracer.io_between(op, file, None, None, start, end),
        Err(_) => tracer.io_failed_between(op, file, None, start, end),
    }
    result
}

impl<S: Storage> ForwardStorage for Traced<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for Traced<S> {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        // A disabled tracer has no recorder, and the engine's handle is returned as it is.
        let Some(recorder) = self.tracer.recorder() else {
            return self.inner.open(path);
        };
        let start = self.tracer.stamp();
        let opened = self.inner.open(path);
        let end = self.tracer.stamp();
        // Hashes the path and names the file for the writer (the first time this
        // thread opens it); the handle's events follow when it closes.
        let file = self.tracer.file(path);
        let inner = match opened {
            Ok(inner) => inner,
            Err(e) => {
                self.tracer
                    .io_failed_between(IoOp::Open, file, None, start, end);
                return Err(e);
            }
        };
        recorder.push_io(io_record(IoOp::Open, file, None, None, start, end));
        Ok(Box::new(TracedRead {
            file,
            inner: Some(inner),
            recorder,
            read_op: if self.object_store {
                IoOp::Get
            } else {
                IoOp::Read
            },
            counters: self.counters.clone(),
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        if !self.tracer.is_enabled() {
            return self.inner.create(path);
        }
        let start = self.tracer.stamp();
        let created = self.inner.create(path);
        let end = self.tracer.stamp();
        let file = self.tracer.file(path);
        let inner = match created {
            Ok(inner) => {
                self.tracer
                    .io_between(IoOp::Create, file, None, None, start, end);
                inner
            }
            Err(e) => {
                self.tracer
                    .io_failed_between(IoOp::Create, file, None, start, end);
                return Err(e);
            }
        };
        Ok(Box::new(TracedWrite {
            file,
            inner,
            tracer: self.tracer.clone(),
            written: 0,
            write_op: if self.object_store {
                IoOp::Put
            } else {
                IoOp::Write
            },
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        timed(&self.tracer, IoOp::List, self.tracer.file(dir), || {
            self.inner.list(dir)
        })
    }

    fn list_each(&self, dir: &Path, each: &mut dyn FnMut(DirEntry)) -> Result<(), StorageError> {
        timed(&self.tracer, IoOp::List, self.tracer.file(dir), || {
            self.inner.list_each(dir, each)
        })
    }

    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        timed(&self.tracer, IoOp::Stat, self.tracer.file(path), || {
            self.inner.size(path)
        })
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        timed(&self.tracer, IoOp::Mkdir, self.tracer.file(dir), || {
            self.inner.create_dir_all(dir)
        })
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        timed(&self.tracer, IoOp::Unlink, self.tracer.file(path), || {
            self.inner.remove_file(path)
        })
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        timed(&self.tracer, IoOp::Rmdir, self.tracer.file(dir), || {
            self.inner.remove_dir_all(dir)
        })
    }

    /// Records the read, when it completes, as one `open` and one `GET` (or `read`) of the
    /// whole object from the moment it was started to the moment its last byte arrived.
    fn start_whole_read(&self, path: &Path, bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        if !self.tracer.is_enabled() {
            return self.inner.start_whole_read(path, bell);
        }
        let start = self.tracer.stamp();
        let inner = self.inner.start_whole_read(path, bell)?;
        Some(Box::new(TracedPending {
            inner,
            file: self.tracer.file(path),
            start,
            tracer: self.tracer.clone(),
            read_op: if self.object_store {
                IoOp::Get
            } else {
                IoOp::Read
            },
            counters: self.counters.clone(),
        }))
    }

    dlio_storage::forward_storage!(engine, capabilities, partial_path, drop_cache);
}

/// A background whole-object read, traced when it completes.
struct TracedPending {
    inner: Box<dyn PendingRead>,
    file: FileId,
    start: Stamp,
    tracer: Tracer,
    read_op: IoOp,
    /// Where the read is counted ([`metered_and_traced`]).
    counters: Option<Arc<IoCounters>>,
}

impl PendingRead for TracedPending {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn finished(&self) -> Option<bool> {
        self.inner.finished()
    }

    fn wait(self: Box<Self>) -> Result<WholeRead, StorageError> {
        let TracedPending {
            inner,
            file,
            start,
            tracer,
            read_op,
            counters,
        } = *self;
        match inner.wait() {
            Ok(read) => {
                tracer.io_lasting(IoOp::Open, file, None, start, Duration::ZERO);
                tracer.io_lasting(read_op, file, Some(read.bytes), start, read.took);
                if let Some(counters) = counters {
                    counters.record_read(1, read.bytes, read.took.as_nanos() as u64);
                }
                Ok(read)
            }
            Err(e) => {
                let end = tracer.stamp();
                tracer.io_failed_between(read_op, file, None, start, end);
                Err(e)
            }
        }
    }
}

struct TracedRead {
    file: FileId,
    /// `None` only while being dropped (so the close can be timed).
    inner: Option<Box<dyn ReadHandle>>,
    recorder: Recorder,
    read_op: IoOp,
    /// Where this handle counts its successful reads ([`metered_and_traced`]).
    counters: Option<Arc<IoCounters>>,
}

impl TracedRead {
    /// Counts one successful read call of `requests` requests and `bytes` bytes that ran
    /// from `start` to `end`, when this handle counts its reads.
    fn count(&self, requests: u64, bytes: u64, start: Stamp, end: Stamp) {
        if let Some(counters) = &self.counters {
            counters.record_read(requests, bytes, self.recorder.nanos(start, end));
        }
    }

    fn record(&self, offset: u64, result: Result<u64, ()>, start: Stamp, end: Stamp) {
        let rec = match result {
            Ok(n) => io_record(self.read_op, self.file, Some(offset), Some(n), start, end),
            Err(()) => failed_record(self.read_op, self.file, Some(offset), start, end),
        };
        self.recorder.push_io(rec);
    }
}

/// The inner handle; present until drop.
macro_rules! inner {
    ($self:ident) => {
        $self
            .inner
            .as_mut()
            .expect("the inner handle is only taken in drop")
    };
}

impl ReadHandle for TracedRead {
    fn path(&self) -> &Path {
        self.inner.as_ref().map_or(Path::new(""), |h| h.path())
    }

    fn len(&self) -> u64 {
        self.inner.as_ref().map_or(0, |h| h.len())
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let start = self.recorder.now();
        let result = inner!(self).read_at(buf, offset);
        let end = self.recorder.now();
        if let Ok(n) = result {
            self.count(1, n as u64, start, end);
        }
        self.record(
            offset,
            result.as_ref().map(|&n| n as u64).map_err(|_| ()),
            start,
            end,
        );
        result
    }

    /// A read that would have waited moved nothing and is not an I/O event; one that read
    /// is recorded as `read_at` records it.
    fn read_at_nowait(
        &mut self,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<Option<usize>, StorageError> {
        let start = self.recorder.now();
        let result = inner!(self).read_at_nowait(buf, offset);
        let end = self.recorder.now();
        match &result {
            Ok(None) => {}
            Ok(Some(n)) => {
                self.count(1, *n as u64, start, end);
                self.record(offset, Ok(*n as u64), start, end);
            }
            Err(_) => self.record(offset, Err(()), start, end),
        }
        result
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        let start = self.recorder.now();
        let result = inner!(self).read_exact_at(buf, offset);
        let end = self.recorder.now();
        if result.is_ok() {
            self.count(1, buf.len() as u64, start, end);
        }
        self.record(
            offset,
            result.as_ref().map(|_| buf.len() as u64).map_err(|_| ()),
            start,
            end,
        );
        result
    }

    /// One event per request; the batch's time is split evenly among them, in order,
    /// so the union of their intervals is the batch's interval.
    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let start = self.recorder.now();
        let result = inner!(self).read_batch(requests);
        let end = self.recorder.now();
        if result.is_ok() {
            let bytes = requests.iter().map(|r| r.buf.len() as u64).sum();
            self.count(requests.len() as u64, bytes, start, end);
        }
        let n = requests.len().max(1) as u64;
        let slice = end.0.saturating_sub(start.0) / n;
        for (i, r) in requests.iter().enumerate() {
            let at = start.0 + slice * i as u64;
            let outcome = result.as_ref().map(|_| r.buf.len() as u64).map_err(|_| ());
            self.record(r.offset, outcome, Stamp(at), Stamp(at + slice));
        }
        result
    }

    /// One event per range, recorded when the engine hands over its bytes: each spans the
    /// time since the previous one (or the stream's start), so the union of their intervals
    /// is the stream's interval, as for a batch. A stream the engine fails adds one failed
    /// event at the offset of the last range it took.
    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        // Out of `self` for the call, so that the callback can record into `self`.
        let mut inner = self
            .inner
            .take()
            .expect("the inner handle is only taken in drop");
        let mut last_offset = 0;
        let mut taken = requests.inspect(|extent| last_offset = extent.offset);
        let mut since = self.recorder.now();
        let mut consumer_failed = false;
        let counters = self.counters.clone();
        let mut traced_consume = |offset, bytes: &[u8]| {
            let now = self.recorder.now();
            self.record(offset, Ok(bytes.len() as u64), since, now);
            since = now;
            let consumed = consume(offset, bytes);
            consumer_failed = consumed.is_err();
            consumed
        };
        let result = match &counters {
            // Counted as `Metered` counts a stream: one latency per range.
            Some(counters) => counters.read_stream_counted(
                inner.as_mut(),
                window,
                block,
                &mut taken,
                &mut traced_consume,
            ),
            None => inner.read_stream(window, block, &mut taken, &mut traced_consume),
        };
        self.inner = Some(inner);
        if result.is_err() && !consumer_failed {
            let now = self.recorder.now();
            self.record(last_offset, Err(()), since, now);
        }
        result
    }
}

impl Drop for TracedRead {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let start = self.recorder.now();
            drop(inner);
            let end = self.recorder.now();
            self.recorder
                .push_io(io_record(IoOp::Close, self.file, None, None, start, end));
        }
    }
}

struct TracedWrite {
    file: FileId,
    inner: Box<dyn WriteHandle>,
    tracer: Tracer,
    written: u64,
    write_op: IoOp,
}

impl TracedWrite {
    /// Records a write of `written` bytes (`None`: it failed) that ran from `start` to `end`.
    fn record_write(&mut self, written: Option<u64>, start: Stamp, end: Stamp) {
        match written {
            Some(n) => {
                self.tracer.io_between(
                    self.write_op,
                    self.file,
                    Some(self.written),
                    Some(n),
                    start,
                    end,
                );
                self.written += n;
            }
            None => self.tracer.io_failed_between(
                self.write_op,
                self.file,
                Some(self.written),
                start,
                end,
            ),
        }
    }
}

impl WriteHandle for TracedWrite {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let start = self.tracer.stamp();
        let result = self.inner.write_all(data);
        let end = self.tracer.stamp();
        self.record_write(result.as_ref().ok().map(|_| data.len() as u64), start, end);
        result
    }

    fn fill_in_place(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<bool, StorageError> {
        let start = self.tracer.stamp();
        let result = self.inner.fill_in_place(len, fill);
        let end = self.tracer.stamp();
        match &result {
            Ok(false) => {}
            Ok(true) => self.record_write(Some(len as u64), start, end),
            Err(_) => self.record_write(None, start, end),
        }
        result
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        timed(&self.tracer, IoOp::Fsync, self.file, || self.inner.sync())
    }

    fn commit(self: Box<Self>) -> Result<u64, StorageError> {
        let TracedWrite {
            file,
            inner,
            tracer,
            ..
        } = *self;
        timed(&tracer, IoOp::Close, file, || inner.commit())
    }
}
