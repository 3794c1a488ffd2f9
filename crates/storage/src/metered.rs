//! [`Metered`]: a decorator that counts what goes through any engine, so that engines stay
//! free of metrics code and every engine is measured the same way.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ops::{Add, Sub};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::histogram::{LatencyBuckets, LatencySnapshot};
use crate::{
    Consume, DirEntry, Extent, ForwardStorage, PendingRead, ReadBell, ReadHandle, ReadRequest,
    Storage, StorageError, WholeRead, WriteHandle,
};

/// Live operation counters, shared by every handle of one [`Metered`] storage. Relaxed
/// atomics: the counts are totals read after the fact, never used to synchronise. The
/// latency histograms are lock-free too ([`LatencyBuckets`]), so reader threads never wait
/// on each other to be measured.
#[derive(Debug, Default)]
pub struct IoCounters {
    read_latency: LatencyBuckets,
    write_latency: LatencyBuckets,
    opens: AtomicU64,
    creates: AtomicU64,
    read_requests: AtomicU64,
    bytes_read: AtomicU64,
    write_requests: AtomicU64,
    bytes_written: AtomicU64,
    lists: AtomicU64,
}

impl IoCounters {
    /// The counts at this moment.
    pub fn snapshot(&self) -> IoCountersSnapshot {
        IoCountersSnapshot {
            opens: self.opens.load(Ordering::Relaxed),
            creates: self.creates.load(Ordering::Relaxed),
            read_requests: self.read_requests.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            write_requests: self.write_requests.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            lists: self.lists.load(Ordering::Relaxed),
        }
    }

    /// Latency of every read call that completed: one record per `read_at` or
    /// `read_exact_at`, one per `read_batch` (the time until its last request completed),
    /// and one per request of a `read_stream` (from the moment the engine took the request
    /// to the moment it handed over its bytes). With a transfer size, each transfer is one
    /// call ([`crate::SplitReads`]).
    pub fn read_latency(&self) -> LatencySnapshot {
        self.read_latency.snapshot()
    }

    /// Latency of every `write_all` call that completed.
    pub fn write_latency(&self) -> LatencySnapshot {
        self.write_latency.snapshot()
    }

    fn count(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one read call that completed `requests` requests returning `bytes` in `nanos`
    /// (one latency record), as [`Metered`]'s handles do; for a decorator that times reads
    /// itself and counts them here ([`Metered::counting_reads_inside`]).
    pub fn record_read(&self, requests: u64, bytes: u64, nanos: u64) {
        self.read_latency.record(nanos);
        IoCounters::count(&self.read_requests, requests);
        IoCounters::count(&self.bytes_read, bytes);
    }

    /// `handle.read_stream(..)`, counting each range as [`Metered`]'s handles do: one
    /// request when the engine hands over its bytes (before `consume` sees them), with its
    /// own latency, from the moment the engine took it from `requests` (which an
    /// overlapping engine does just before submitting it) to that moment. Completions may
    /// come out of order, so each is matched to the oldest outstanding start at the same
    /// offset; the outstanding starts are at most the requests the engine has in flight.
    pub fn read_stream_counted(
        &self,
        handle: &mut dyn ReadHandle,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        let slots = window.len() / block.max(1);
        let starts = RefCell::new(VecDeque::with_capacity(slots.clamp(1, 64)));
        let mut timed = requests.inspect(|extent| {
            starts
                .borrow_mut()
                .push_back((extent.offset, Instant::now()))
        });
        handle.read_stream(window, block, &mut timed, &mut |offset, bytes| {
            let started = {
                let mut starts = starts.borrow_mut();
                let at = starts.iter().position(|&(start, _)| start == offset);
                at.and_then(|i| starts.remove(i))
            };
            match started {
                Some((_, started)) => count_read(self, started, 1, bytes.len() as u64),
                None => {
                    IoCounters::count(&self.read_requests, 1);
                    IoCounters::count(&self.bytes_read, bytes.len() as u64);
                }
            }
            consume(offset, bytes)
        })
    }
}

/// Counts at one moment. Subtract two snapshots to get what happened in between; add them to
/// merge counts of several storages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCountersSnapshot {
    /// Successful [`Storage::open`] calls.
    pub opens: u64,
    /// Successful [`Storage::create`] calls.
    pub creates: u64,
    /// Read requests that completed (each `read_at`, `read_exact_at`, batch entry or stream
    /// range is one).
    pub read_requests: u64,
    /// Bytes those requests returned.
    pub bytes_read: u64,
    /// Successful [`WriteHandle::write_all`] calls.
    pub write_requests: u64,
    /// Bytes they appended.
    pub bytes_written: u64,
    /// Successful [`Storage::list`] calls.
    pub lists: u64,
}

impl Sub for IoCountersSnapshot {
    type Output = IoCountersSnapshot;

    /// Field-wise difference; saturates at 0 if the operands are swapped.
    fn sub(self, earlier: IoCountersSnapshot) -> IoCountersSnapshot {
        IoCountersSnapshot {
            opens: self.opens.saturating_sub(earlier.opens),
            creates: self.creates.saturating_sub(earlier.creates),
            read_requests: self.read_requests.saturating_sub(earlier.read_requests),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            write_requests: self.write_requests.saturating_sub(earlier.write_requests),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            lists: self.lists.saturating_sub(earlier.lists),
        }
    }
}

impl Add for IoCountersSnapshot {
    type Output = IoCountersSnapshot;

    fn add(self, other: IoCountersSnapshot) -> IoCountersSnapshot {
        IoCountersSnapshot {
            opens: self.opens.saturating_add(other.opens),
            creates: self.creates.saturating_add(other.creates),
            read_requests: self.read_requests.saturating_add(other.read_requests),
            bytes_read: self.bytes_read.saturating_add(other.bytes_read),
            write_requests: self.write_requests.saturating_add(other.write_requests),
            bytes_written: self.bytes_written.saturating_add(other.bytes_written),
            lists: self.lists.saturating_add(other.lists),
        }
    }
}

/// Wraps an engine and counts its operations in a shared [`IoCounters`].
#[derive(Debug)]
pub struct Metered<S: Storage> {
    inner: S,
    counters: Arc<IoCounters>,
    /// The inner storage's read handles count their reads themselves.
    reads_inside: bool,
}

impl<S: Storage> Metered<S> {
    /// Counts `inner`'s operations in fresh counters.
    pub fn new(inner: S) -> Metered<S> {
        Metered::with_counters(inner, Arc::new(IoCounters::default()))
    }

    /// Counts `inner`'s operations in existing counters (e.g. one set for several engines).
    pub fn with_counters(inner: S, counters: Arc<IoCounters>) -> Metered<S> {
        Metered {
            inner,
            counters,
            reads_inside: false,
        }
    }

    /// For an inner storage whose read handles count their reads in these same counters
    /// themselves (`dlio_trace::Traced::counting`, which times every read for the trace
    /// anyway): `open` still counts the open but returns the inner handle as it is, so a
    /// traced read costs one boxed handle and one pair of clock readings, not two.
    pub fn counting_reads_inside(mut self) -> Metered<S> {
        self.reads_inside = true;
        self
    }

    /// The shared counters.
    pub fn counters(&self) -> &Arc<IoCounters> {
        &self.counters
    }

    /// The wrapped engine.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Storage> ForwardStorage for Metered<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for Metered<S> {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let inner = self.inner.open(path)?;
        IoCounters::count(&self.counters.opens, 1);
        if self.reads_inside {
            return Ok(inner);
        }
        Ok(Box::new(MeteredRead {
            inner,
            counters: Arc::clone(&self.counters),
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let inner = self.inner.create(path)?;
        IoCounters::count(&self.counters.creates, 1);
        Ok(Box::new(MeteredWrite {
            inner,
            counters: Arc::clone(&self.counters),
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        let entries = self.inner.list(dir)?;
        IoCounters::count(&self.counters.lists, 1);
        Ok(entries)
    }

    fn list_each(&self, dir: &Path, each: &mut dyn FnMut(DirEntry)) -> Result<(), StorageError> {
        self.inner.list_each(dir, each)?;
        IoCounters::count(&self.counters.lists, 1);
        Ok(())
    }

    /// Counts one open and, when it completes, one read request with its bytes and latency
    /// (unless the inner storage counts its reads itself).
    fn start_whole_read(&self, path: &Path, bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        let inner = self.inner.start_whole_read(path, bell)?;
        Some(Box::new(MeteredPending {
            inner,
            counters: Arc::clone(&self.counters),
            count_read: !self.reads_inside,
        }))
    }

    crate::forward_storage!(
        engine,
        capabilities,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );
}

struct MeteredPending {
    inner: Box<dyn PendingRead>,
    /// Where the open (once the object turned out to exist) and the read are counted.
    counters: Arc<IoCounters>,
    /// False when the inner storage counts the read itself.
    count_read: bool,
}

impl PendingRead for MeteredPending {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn finished(&self) -> Option<bool> {
        self.inner.finished()
    }

    fn wait(self: Box<Self>) -> Result<WholeRead, StorageError> {
        let read = self.inner.wait()?;
        IoCounters::count(&self.counters.opens, 1);
        if self.count_read {
            self.counters
                .record_read(1, read.bytes, read.took.as_nanos() as u64);
        }
        Ok(read)
    }
}

struct MeteredRead {
    inner: Box<dyn ReadHandle>,
    counters: Arc<IoCounters>,
}

impl MeteredRead {
    fn count(&self, started: Instant, requests: u64, bytes: u64) {
        count_read(&self.counters, started, requests, bytes);
    }
}

fn count_read(counters: &IoCounters, started: Instant, requests: u64, bytes: u64) {
    let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counters.record_read(requests, bytes, nanos);
}

impl ReadHandle for MeteredRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let started = Instant::now();
        let n = self.inner.read_at(buf, offset)?;
        self.count(started, 1, n as u64);
        Ok(n)
    }

    /// Counts a read that moved bytes; one that would have waited moved none and is no
    /// request.
    fn read_at_nowait(
        &mut self,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<Option<usize>, StorageError> {
        let started = Instant::now();
        let read = self.inner.read_at_nowait(buf, offset)?;
        if let Some(n) = read {
            self.count(started, 1, n as u64);
        }
        Ok(read)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        let started = Instant::now();
        self.inner.read_exact_at(buf, offset)?;
        self.count(started, 1, buf.len() as u64);
        Ok(())
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        // Delegate as one batch so that an engine that overlaps requests still can.
        let started = Instant::now();
        self.inner.read_batch(requests)?;
        let bytes = requests.iter().map(|r| r.buf.len() as u64).sum();
        self.count(started, requests.len() as u64, bytes);
        Ok(())
    }

    /// Counts each range as one request with its own latency
    /// ([`IoCounters::read_stream_counted`]).
    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        self.counters
            .read_stream_counted(self.inner.as_mut(), window, block, requests, consume)
    }
}

struct MeteredWrite {
    inner: Box<dyn WriteHandle>,
    counters: Arc<IoCounters>,
}

impl WriteHandle for MeteredWrite {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let started = Instant::now();
        self.inner.write_all(data)?;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counters.write_latency.record(nanos);
        IoCounters::count(&self.counters.write_requests, 1);
        IoCounters::count(&self.counters.bytes_written, data.len() as u64);
        Ok(())
    }

    fn fill_in_place(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<bool, StorageError> {
        let started = Instant::now();
        if !self.inner.fill_in_place(len, fill)? {
            return Ok(false);
        }
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counters.write_latency.record(nanos);
        IoCounters::count(&self.counters.write_requests, 1);
        IoCounters::count(&self.counters.bytes_written, len as u64);
        Ok(true)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.inner.sync()
    }

    fn commit(self: Box<Self>) -> Result<u64, StorageError> {
        self.inner.commit()
    }
}
