//! [`Traced`]: a [`Storage`] decorator that records one event per storage call, so every
//! engine is traced the same way and engines stay free of tracing code (as `Metered`
//! keeps them free of counters).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dlio_storage::{
    Capabilities, DirEntry, ReadHandle, ReadRequest, Storage, StorageError, WriteHandle,
};

use crate::names::IoOp;
use crate::tracer::{FileId, Tracer};

/// Wraps an engine and records each call in a [`Tracer`]: `open`, `pread` (one per
/// request, with `offset` and `count`), `close`, `open` with `create`, `write`, `fsync`,
/// `close` at commit, `stat`, `opendir`, `mkdir`, `unlink`, `rmdir`. An engine whose name
/// starts with `s3` records reads as `GET` and writes as `PUT`.
#[derive(Debug)]
pub struct Traced<S: Storage> {
    inner: S,
    tracer: Tracer,
    object_store: bool,
}

impl<S: Storage> Traced<S> {
    /// Traces `inner`'s calls into `tracer`.
    pub fn new(inner: S, tracer: Tracer) -> Traced<S> {
        let object_store = inner.engine().starts_with("s3");
        Traced {
            inner,
            tracer,
            object_store,
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

    fn timed<T>(
        &self,
        op: IoOp,
        file: FileId,
        call: impl FnOnce() -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let start = Instant::now();
        let result = call();
        let dur = start.elapsed();
        match &result {
            Ok(_) => self.tracer.io(op, file, None, None, start, dur),
            Err(_) => self.tracer.io_failed(op, file, None, start, dur),
        }
        result
    }
}

impl<S: Storage> Storage for Traced<S> {
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        if !self.tracer.is_enabled() {
            return self.inner.open(path);
        }
        let file = self.tracer.file(path);
        let inner = self.timed(IoOp::Open, file, || self.inner.open(path))?;
        Ok(Box::new(TracedRead {
            file,
            inner: Some(inner),
            tracer: self.tracer.clone(),
            read_op: if self.object_store {
                IoOp::Get
            } else {
                IoOp::Read
            },
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        if !self.tracer.is_enabled() {
            return self.inner.create(path);
        }
        let file = self.tracer.file(path);
        let inner = self.timed(IoOp::Create, file, || self.inner.create(path))?;
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
        self.timed(IoOp::List, self.tracer.file(dir), || self.inner.list(dir))
    }

    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        self.timed(IoOp::Stat, self.tracer.file(path), || self.inner.size(path))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        self.timed(IoOp::Mkdir, self.tracer.file(dir), || {
            self.inner.create_dir_all(dir)
        })
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.timed(IoOp::Unlink, self.tracer.file(path), || {
            self.inner.remove_file(path)
        })
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        self.timed(IoOp::Rmdir, self.tracer.file(dir), || {
            self.inner.remove_dir_all(dir)
        })
    }

    fn partial_path(&self, path: &Path) -> Option<PathBuf> {
        self.inner.partial_path(path)
    }

    fn drop_cache(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.drop_cache(path)
    }
}

struct TracedRead {
    file: FileId,
    /// `None` only while being dropped (so the close can be timed).
    inner: Option<Box<dyn ReadHandle>>,
    tracer: Tracer,
    read_op: IoOp,
}

impl TracedRead {
    fn record(&self, offset: u64, result: Result<u64, ()>, start: Instant, dur: Duration) {
        match result {
            Ok(n) => self
                .tracer
                .io(self.read_op, self.file, Some(offset), Some(n), start, dur),
            Err(()) => self
                .tracer
                .io_failed(self.read_op, self.file, Some(offset), start, dur),
        }
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
        let start = Instant::now();
        let result = inner!(self).read_at(buf, offset);
        let dur = start.elapsed();
        self.record(
            offset,
            result.as_ref().map(|&n| n as u64).map_err(|_| ()),
            start,
            dur,
        );
        result
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        let start = Instant::now();
        let result = inner!(self).read_exact_at(buf, offset);
        let dur = start.elapsed();
        self.record(
            offset,
            result.as_ref().map(|_| buf.len() as u64).map_err(|_| ()),
            start,
            dur,
        );
        result
    }

    /// One event per request; the batch's time is split evenly among them, in order,
    /// so the union of their intervals is the batch's interval.
    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let start = Instant::now();
        let result = inner!(self).read_batch(requests);
        let dur = start.elapsed();
        let n = u32::try_from(requests.len().max(1)).unwrap_or(u32::MAX);
        let slice = dur / n;
        for (i, r) in requests.iter().enumerate() {
            let at = start + slice * u32::try_from(i).unwrap_or(u32::MAX);
            let outcome = result.as_ref().map(|_| r.buf.len() as u64).map_err(|_| ());
            self.record(r.offset, outcome, at, slice);
        }
        result
    }
}

impl Drop for TracedRead {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let start = Instant::now();
            drop(inner);
            self.tracer
                .io(IoOp::Close, self.file, None, None, start, start.elapsed());
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

impl WriteHandle for TracedWrite {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let start = Instant::now();
        let result = self.inner.write_all(data);
        let dur = start.elapsed();
        match &result {
            Ok(()) => {
                let n = data.len() as u64;
                self.tracer.io(
                    self.write_op,
                    self.file,
                    Some(self.written),
                    Some(n),
                    start,
                    dur,
                );
                self.written += n;
            }
            Err(_) => {
                self.tracer
                    .io_failed(self.write_op, self.file, Some(self.written), start, dur)
            }
        }
        result
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        let start = Instant::now();
        let result = self.inner.sync();
        let dur = start.elapsed();
        match &result {
            Ok(()) => self
                .tracer
                .io(IoOp::Fsync, self.file, None, None, start, dur),
            Err(_) => self
                .tracer
                .io_failed(IoOp::Fsync, self.file, None, start, dur),
        }
        result
    }

    fn commit(self: Box<Self>) -> Result<u64, StorageError> {
        let TracedWrite {
            file,
            inner,
            tracer,
            ..
        } = *self;
        let start = Instant::now();
        let result = inner.commit();
        let dur = start.elapsed();
        match &result {
            Ok(_) => tracer.io(IoOp::Close, file, None, None, start, dur),
            Err(_) => tracer.io_failed(IoOp::Close, file, None, start, dur),
        }
        result
    }
}
