//! `dlio-storage`: how bytes move between dlio and a storage system.
//!
//! This crate sits between the plan (which says *what* to read) and the formats (which say
//! *how samples are laid out*). A format never opens a file itself: it asks a [`Storage`]
//! for a [`ReadHandle`] or a [`WriteHandle`] and moves bytes through it. That keeps every
//! format usable on every engine and lets the loader measure every engine the same way,
//! with [`Metered`].
//!
//! Engines, one file each ([`ENGINES`] lists them): [`PosixStorage`] (buffered `pread`),
//! [`DirectStorage`] (O_DIRECT), [`MmapStorage`] (page faults), [`UringStorage`] (io_uring,
//! `io_depth` in flight per thread) and [`S3Storage`] (ranged GETs, PUT/multipart). The
//! CLI turns the workload's keys into [`EngineSettings`] and calls [`engine_for`], whose
//! [`Engine`] hands out the storages of a run with `reader.transfer_size` applied by
//! [`SplitReads`] (every engine, every format).
//!
//! The trait shapes and why:
//! - Reads are positional (`read_at`), never cursor-based, so one handle can serve
//!   concurrent logical streams and an engine can reorder or batch them.
//! - [`ReadHandle::read_batch`] takes several requests at once. Synchronous engines run them
//!   in order (the default); io_uring and S3 keep `io_depth` of them in flight. A batch
//!   returns when all of its requests are done, so an engine's queue drains at its end.
//! - [`ReadHandle::read_stream`] is the read that never drains: the caller lends a window of
//!   memory cut into slots of one block, a list of [`Extent`]s and a `consume` callback, and
//!   the engine keeps up to `min(io_depth, slots)` requests in flight, handing each
//!   completed range to `consume` (in completion order on io_uring) and reusing its slot
//!   for the next one. Memory stays at the window whatever the number of requests. Its users
//!   are checkpoint restart (`dlio-checkpoint` reads each file as a stream of chunks,
//!   [`Capabilities::io_depth`] of them in flight) and `examples/engine_bench.rs`, which
//!   `bench/vs-fio.sh` compares with fio. Synchronous engines run it one request at a time
//!   (the default).
//! - [`Capabilities::alignment`] tells callers how to allocate buffers ([`IoBuffer`]) and
//!   align offsets, so O_DIRECT reads go straight into the caller's memory; engines still
//!   accept any request (unaligned ones take a bounce buffer).
//! - Writes are crash-safe by contract: [`Storage::create`] writes under a temporary name (or
//!   an unfinished upload) and [`WriteHandle::commit`] publishes the object under its final
//!   name. A handle dropped without commit removes what it wrote, so an interrupted
//!   generation never leaves a file that looks complete. [`Storage::partial_path`] names the
//!   temporary file so that the generator can clean up after a crash.
//! - Engines hold no metrics code: wrap any engine in [`Metered`] and read its shared
//!   [`IoCounters`] (requests, bytes, lock-free latency histograms), as fio's core, not its
//!   engines, counts I/O.
//! - Page-cache control lives beside the engines: [`Storage::drop_cache`] /
//!   [`drop_file_cache`], [`resident_pages`] and [`memory_check`] (the 5x rule).
//!
//! [`StorageError`] is the crate's one error type.
//!
//! ```
//! use std::path::Path;
//! use dlio_storage::{Extent, Metered, PosixStorage, Storage};
//!
//! # fn main() -> Result<(), dlio_storage::StorageError> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let storage = Metered::new(PosixStorage::new());
//! let path = dir.path().join("train/sample.bin");
//!
//! let mut writer = storage.create(&path)?;
//! writer.write_all(b"hello, ")?;
//! writer.write_all(b"storage")?;
//! assert_eq!(storage.size(&path)?, None, "nothing is visible before commit");
//! assert_eq!(writer.commit()?, 14);
//!
//! let mut reader = storage.open(&path)?;
//! let mut word = [0u8; 7];
//! reader.read_exact_at(&mut word, 7)?;
//! assert_eq!(&word, b"storage");
//!
//! // A stream: two ranges through a window of one 7-byte slot, consumed as they complete.
//! let mut window = [0u8; 7];
//! let mut words = Vec::new();
//! let mut ranges = [Extent::new(0, 5), Extent::new(7, 7)].into_iter();
//! reader.read_stream(&mut window, 7, &mut ranges, &mut |offset, bytes| {
//!     words.push((offset, String::from_utf8_lossy(bytes).into_owned()));
//!     Ok(())
//! })?;
//! assert_eq!(words, [(0, "hello".to_string()), (7, "storage".to_string())]);
//!
//! let counts = storage.counters().snapshot();
//! assert_eq!((counts.bytes_written, counts.bytes_read), (14, 19));
//! assert_eq!(counts.read_requests, 3);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod buffer;
mod cache;
mod direct;
mod diskstats;
mod engine;
mod error;
mod file_list;
mod forward;
mod fresh;
mod histogram;
mod manifest;
mod metered;
mod mmap;
mod path_table;
mod placed;
mod posix;
mod s3;
mod split;
mod throttle;
mod uring;

pub use buffer::IoBuffer;
pub use cache::{
    DATASET_MEMORY_MULTIPLE, MemoryCheck, ResidentPages, drop_file_cache, memory_check,
    resident_pages,
};
pub use direct::{DIRECT_ALIGNMENT, DirectStorage};
pub use diskstats::{BlockDevice, DiskCounters, disk_counters};
pub use engine::{
    ENGINES, Engine, EngineInfo, EngineKind, EngineSettings, OdirectUse, engine_for, engine_names,
};
pub use error::StorageError;
pub use file_list::{
    DataFiles, FileList, FileSet, HeldNames, NamePattern, PathScratch, file_name_bytes,
};
pub use forward::ForwardStorage;
pub use fresh::{FRESH_FROM, FreshPages};
pub use histogram::{LatencyBuckets, LatencySnapshot};
pub use manifest::Manifest;
pub use metered::{IoCounters, IoCountersSnapshot, Metered};
pub use mmap::MmapStorage;
pub use path_table::{PathTable, PathTableBuilder};
pub use placed::{PAGE_BYTES, PlacedBuffers};
pub use posix::PosixStorage;
pub use s3::{S3_PART_BYTES, S3Settings, S3Storage};
pub use split::{
    BufferedRequest, BufferedStream, PatternRequest, RequestPattern, RequestPatterns, RequestSizes,
    SizeDistribution, SplitReads,
};
pub use throttle::Throttled;

pub use uring::UringStorage;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// What an engine can do; checked before any I/O, as fio's engine flags are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Required alignment (bytes) of buffer addresses, offsets and lengths; 1 for buffered I/O.
    pub alignment: usize,
    /// True when [`ReadHandle::read_batch`] really overlaps requests.
    pub batched: bool,
    /// Requests the engine keeps in flight per reader thread (`storage.io_depth` for
    /// io_uring and S3; 1 for the synchronous engines): how many slots a
    /// [`ReadHandle::read_stream`] window needs to keep the engine busy.
    pub io_depth: u32,
    /// True when [`ReadHandle::read_at_nowait`] can read without waiting for the device
    /// (buffered POSIX reads of bytes the page cache holds). A caller may then do the reads
    /// that would not wait itself and hand only the others to a thread of their own.
    pub nowait_reads: bool,
    /// Where the buffers of sample reads start past a 4 KiB page boundary
    /// (`reader.buffer_page_offset`, [`PlacedBuffers`]); `None`: wherever the reader's
    /// allocation puts them (aligned to [`Capabilities::alignment`], and to 64 bytes).
    pub buffer_page_offset: Option<usize>,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Full path of the entry.
    pub path: PathBuf,
    /// True for a directory (or a common prefix, on object stores).
    pub is_dir: bool,
    /// Size in bytes where the listing tells it without a request per entry (object stores;
    /// 0 for a prefix); `None` on POSIX, where it would cost a `stat` of every entry (half
    /// the time of listing a million files): ask [`Storage::size`] for the entries that need it.
    pub len: Option<u64>,
}

/// One positional read request for [`ReadHandle::read_batch`].
#[derive(Debug)]
pub struct ReadRequest<'a> {
    /// Offset in the file.
    pub offset: u64,
    /// Where the bytes go; the request reads exactly `buf.len()` bytes.
    pub buf: &'a mut [u8],
}

/// One range of a streaming read ([`ReadHandle::read_stream`]): `len` bytes at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Offset in the file.
    pub offset: u64,
    /// Bytes to read: at most the stream's block (less for a file's short last block).
    pub len: usize,
}

impl Extent {
    /// `len` bytes at `offset`.
    pub fn new(offset: u64, len: usize) -> Extent {
        Extent { offset, len }
    }
}

/// The number of slots of a stream's `window` cut into blocks of `block` bytes, or
/// [`StorageError::InvalidStream`] when it holds none.
pub(crate) fn stream_slots(
    path: &Path,
    window: usize,
    block: usize,
) -> Result<usize, StorageError> {
    if block == 0 || window < block {
        return Err(StorageError::InvalidStream {
            path: path.to_path_buf(),
            reason: format!(
                "a window of {window} bytes holds no block of {block} bytes; lend at least one \
                 block of memory, and a block of at least one byte"
            ),
        });
    }
    Ok(window / block)
}

/// [`StorageError::Truncated`] if `len` bytes at `offset` run past the end of a file (or
/// object) of `file_len` bytes: for handles that check a request before they start it.
pub(crate) fn check_in_file(
    path: &Path,
    file_len: u64,
    offset: u64,
    len: usize,
) -> Result<(), StorageError> {
    let end = offset.saturating_add(len as u64);
    if end > file_len {
        return Err(StorageError::Truncated {
            path: path.to_path_buf(),
            offset: offset.max(file_len),
            wanted: end - offset.max(file_len),
        });
    }
    Ok(())
}

/// Checks that `extent` fits in one slot of `block` bytes.
pub(crate) fn check_extent(path: &Path, extent: Extent, block: usize) -> Result<(), StorageError> {
    if extent.len > block {
        return Err(StorageError::InvalidStream {
            path: path.to_path_buf(),
            reason: format!(
                "the request of {} bytes at offset {} is longer than the stream's block of \
                 {block} bytes",
                extent.len, extent.offset
            ),
        });
    }
    Ok(())
}

/// What [`ReadHandle::read_stream`] hands each completed range to: its offset and bytes. An
/// error stops the stream and is returned by it.
pub type Consume<'a> = dyn FnMut(u64, &[u8]) -> Result<(), StorageError> + 'a;

/// Reads the first `limit` bytes of `path` (all of it when shorter; `u64::MAX` for the whole
/// file) into `buf`, resized to them, through `storage`, so that they are counted and traced
/// like every other read. Returns how many bytes that was.
pub fn read_head(
    storage: &dyn Storage,
    path: &Path,
    limit: u64,
    buf: &mut Vec<u8>,
) -> Result<u64, StorageError> {
    let mut handle = storage.open(path)?;
    let len = handle.len().min(limit);
    buf.resize(usize::try_from(len).unwrap_or(usize::MAX), 0);
    handle.read_exact_at(buf, 0)?;
    Ok(len)
}

/// An engine: how dlio reaches a storage system.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// The engine's name as users select it (`posix`, ...).
    fn engine(&self) -> &'static str;

    /// What the engine needs from callers.
    fn capabilities(&self) -> Capabilities;

    /// Opens an existing file for positional reads.
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError>;

    /// Starts writing a new file. Nothing is visible under `path` until
    /// [`WriteHandle::commit`]; an existing file at `path` is replaced at commit.
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError>;

    /// Lists the direct children of `dir`, sorted by path, without a request per entry (see
    /// [`DirEntry::len`]).
    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError>;

    /// Hands the direct children of `dir` to `each` as they are listed, in no set order, so
    /// that a folder of 10^7 entries is never held whole. The default lists them all with
    /// [`Storage::list`] first.
    fn list_each(&self, dir: &Path, each: &mut dyn FnMut(DirEntry)) -> Result<(), StorageError> {
        for entry in self.list(dir)? {
            each(entry);
        }
        Ok(())
    }

    /// Size of the file at `path`, or `None` when nothing is there.
    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError>;

    /// Creates `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError>;

    /// Removes one file.
    fn remove_file(&self, path: &Path) -> Result<(), StorageError>;

    /// Removes a directory tree.
    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError>;

    /// Where [`Storage::create`] keeps the bytes for `path` until commit, for engines that
    /// write under a temporary name (`None` otherwise, the default). A crash can leave such a
    /// file behind; the generator uses this to find and remove it.
    fn partial_path(&self, path: &Path) -> Option<PathBuf> {
        let _ = path;
        None
    }

    /// Drops `path`'s pages from this host's page cache, so the next read reaches the
    /// storage (`posix_fadvise(DONTNEED)` by default, [`drop_file_cache`]); engines without a
    /// local page cache (S3) do nothing.
    fn drop_cache(&self, path: &Path) -> Result<(), StorageError> {
        drop_file_cache(path)
    }

    /// Starts reading every byte of `path` in the background, for readers that keep only the
    /// byte count (MLPerf Storage's readers, which decode nothing): the bytes are counted and
    /// dropped as they arrive, so many reads can be in flight without holding their bytes.
    /// `None` (the default) when the engine has no background reads; the caller then reads
    /// in the foreground with [`Storage::open`]. An engine whose reads finish on their own
    /// (not inside [`PendingRead::wait`]) rings `bell` as each one does, so the caller can
    /// start the next read as soon as any finishes ([`PendingRead::finished`]).
    fn start_whole_read(&self, path: &Path, bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        let _ = (path, bell);
        None
    }
}

/// Rung by background reads as they finish ([`Storage::start_whole_read`]), so that a thread
/// keeping several reads in flight can wait for whichever finishes first and start another,
/// instead of waiting for the oldest while the others' slots stay empty.
#[derive(Debug, Default)]
pub struct ReadBell {
    rings: Mutex<u64>,
    rung: Condvar,
}

impl ReadBell {
    /// One more read finished.
    pub fn ring(&self) {
        *self.rings.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.rung.notify_all();
    }

    /// How many times it has rung: pass it to [`ReadBell::wait_past`] after checking the
    /// reads, so that a read finishing in between is not missed.
    pub fn rings(&self) -> u64 {
        *self.rings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until it has rung more than `seen` times.
    pub fn wait_past(&self, seen: u64) {
        let rings = self.rings.lock().unwrap_or_else(PoisonError::into_inner);
        drop(
            self.rung
                .wait_while(rings, |rings| *rings <= seen)
                .unwrap_or_else(PoisonError::into_inner),
        );
    }
}

/// What a background whole-file read moved ([`PendingRead::wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeRead {
    /// Bytes read: the whole object.
    pub bytes: u64,
    /// From the moment the read was started to the moment its last byte arrived.
    pub took: std::time::Duration,
}

/// A whole-file read started by [`Storage::start_whole_read`]. Dropping it abandons the read.
pub trait PendingRead: Send {
    /// The path it reads.
    fn path(&self) -> &Path;

    /// Waits until the last byte has arrived.
    fn wait(self: Box<Self>) -> Result<WholeRead, StorageError>;

    /// `Some(true)` once the read has finished (its last byte arrived, or it failed) so that
    /// [`PendingRead::wait`] returns at once; `Some(false)` while it runs, when the engine
    /// rings the bell it was started with as it finishes. `None` (the default) when the read
    /// finishes only inside `wait`: it counts as running until then.
    fn finished(&self) -> Option<bool> {
        None
    }
}

/// An open file, read by offset.
pub trait ReadHandle: Send {
    /// The path it was opened with (for error messages).
    fn path(&self) -> &Path;

    /// Length of the file in bytes.
    fn len(&self) -> u64;

    /// True when the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at the end).
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError>;

    /// Reads up to `buf.len()` bytes at `offset` if that needs no wait for the device:
    /// `Some(n)` with the bytes read (`n` may be short when only some are at hand; 0 at the end
    /// of the file), `None` when the read would wait, in which case nothing was read and
    /// nothing is counted. Engines that cannot tell (the default, and any engine whose
    /// [`Capabilities::nowait_reads`] is false) always answer `None`.
    fn read_at_nowait(
        &mut self,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<Option<usize>, StorageError> {
        let _ = (buf, offset);
        Ok(None)
    }

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with
    /// [`StorageError::Truncated`] naming the file and the offset.
    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(StorageError::Truncated {
                    path: self.path().to_path_buf(),
                    offset: offset + done as u64,
                    wanted: (buf.len() - done) as u64,
                });
            }
            done += n;
        }
        Ok(())
    }

    /// Runs several reads; engines that can overlap them do. Each request reads exactly
    /// its buffer's length. Returns when all are done (an overlapping engine's queue drains
    /// at the end of every batch; [`ReadHandle::read_stream`] does not).
    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        for r in requests.iter_mut() {
            self.read_exact_at(r.buf, r.offset)?;
        }
        Ok(())
    }

    /// Reads every range `requests` yields, exactly (a range that runs past the end of the
    /// file fails with [`StorageError::Truncated`], as [`ReadHandle::read_exact_at`] does),
    /// and calls `consume` once per range with its offset and bytes.
    ///
    /// `window` is the memory the reads go into, cut into `window.len() / block` slots of
    /// `block` bytes; every range must be at most `block` long. An engine that overlaps
    /// requests keeps up to `min(io_depth, slots)` of them in flight and starts the next one
    /// as soon as a slot's range has been consumed, so its queue never drains until
    /// `requests` is exhausted; the others read one range at a time (this default). With
    /// O_DIRECT, give an [`IoBuffer`] aligned to [`Capabilities::alignment`] and an aligned
    /// `block`, or the reads take a bounce buffer.
    ///
    /// Ranges may be consumed in another order than they were requested (io_uring calls
    /// `consume` in completion order); the offset says which range the bytes are. The bytes
    /// may live in `window` or in the engine's own memory (S3), and are only valid during
    /// the call. On an error, from the engine or from `consume`, the stream stops, waits
    /// until no read is in flight any more, and returns the first error; ranges taken from
    /// `requests` before it may not all have been consumed.
    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        stream_slots(self.path(), window.len(), block)?;
        let slot = &mut window[..block];
        for extent in requests {
            check_extent(self.path(), extent, block)?;
            let buf = &mut slot[..extent.len];
            self.read_exact_at(buf, extent.offset)?;
            consume(extent.offset, buf)?;
        }
        Ok(())
    }
}

/// A file being written. Appends only; published by [`WriteHandle::commit`].
pub trait WriteHandle: Send {
    /// The final path (for error messages).
    fn path(&self) -> &Path;

    /// Appends `data`.
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError>;

    /// Appends `len` bytes that `fill` writes in place, in one or more consecutive pieces, where
    /// the engine gathers the file in its own memory (S3's PUT buffer): the bytes are made
    /// where they are sent from, not made elsewhere and copied. Returns false, having done
    /// nothing, where the engine has no such memory (the default); the caller then makes the
    /// bytes itself and calls [`WriteHandle::write_all`].
    fn fill_in_place(
        &mut self,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> Result<bool, StorageError> {
        let _ = (len, fill);
        Ok(false)
    }

    /// Makes what was written durable (fsync).
    fn sync(&mut self) -> Result<(), StorageError>;

    /// Publishes the file under its final path; returns the bytes written.
    fn commit(self: Box<Self>) -> Result<u64, StorageError>;
}
