//! The `io_uring` engine: reads are submitted through an io_uring with up to `io_depth`
//! requests in flight per reader thread (one ring per thread, made on first use and kept for
//! the thread's life, as fio keeps one per job). With `odirect` the files are opened with
//! O_DIRECT (fio's `direct=1`); unaligned requests then take the `direct` engine's bounce
//! path (a synchronous `pread`, while the ring's requests stay in flight). Writes, listing
//! and removal are the `posix` (or `direct`) engine's.
//!
//! Every read runs on one core, [`run`]: it asks a [`Feed`] for requests while fewer than
//! `min(io_depth, feed capacity)` are in flight, submits them together, wakes at the first
//! completion while more requests wait, resubmits the rest of a short read, and hands each
//! finished request back to the feed, which frees its memory for the next one. Two feeds
//! use it:
//! - a batch ([`ReadHandle::read_batch`], which [`crate::SplitReads`] produces from one long
//!   read): the destinations are the requests' own buffers. Each slot is refilled as its
//!   request completes, but the call returns when all are done, so the queue drains over the
//!   batch's last `io_depth` requests (bench/HISTORY.md measures what that costs);
//! - a stream ([`ReadHandle::read_stream`]): the destinations are the slots of the caller's
//!   window, each completed request is consumed and its slot refilled at once, and the
//!   queue drains only when the caller's requests run out, as fio's does. Requests are
//!   consumed in completion order.
//!
//!
//! A third path keeps requests in flight across samples: [`Storage::start_whole_read`]
//! submits a file's first request on a one-entry ring of its own and returns, so a reader
//! that keeps `io_depth` such reads open (the loader's window) has that many requests at the
//! device between samples; `wait` reaps it and streams the rest of a longer file. Rings and
//! first-request buffers are kept per thread for the next reads.
//!
//! Soundness: the kernel writes into the caller's memory until a request's completion is
//! reaped, long after it was pushed, so [`run`] never returns (nor unwinds) while a request
//! is in flight: a guard ([`Flight`]) waits for every outstanding completion before the
//! borrowed buffers can be freed, even when a caller's `consume` or iterator panics.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use io_uring::{IoUring, opcode, types};

use crate::direct::{
    DIRECT_ALIGNMENT, direct_read_at, open_direct, parts_are_aligned, request_is_aligned,
};
use crate::engine::{EngineInfo, EngineKind, OdirectUse};
use crate::posix::{open_for_reading, regular_file_len};
use crate::{
    Capabilities, Consume, DirectStorage, Extent, ForwardStorage, IoBuffer, PendingRead,
    PosixStorage, ReadBell, ReadHandle, ReadRequest, Storage, StorageError, WholeRead, WriteHandle,
    check_extent, stream_slots,
};

/// Largest single submission; longer requests complete in several (the kernel takes a u32).
const MAX_SUBMISSION: usize = 1 << 30;

thread_local! {
    /// This thread's ring, made on first use. A run takes it out for its duration (see
    /// [`with_ring`]).
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };

    /// Rings of one entry for this thread's background whole-file reads, one per read in
    /// flight, kept for the next reads.
    static SPARE_RINGS: RefCell<Vec<IoUring>> = const { RefCell::new(Vec::new()) };

    /// The first-request buffers of this thread's background whole-file reads, kept for the
    /// next reads: a fresh allocation of a request's size is a new mapping whose pages the
    /// kernel faults in for every read, and unmaps after.
    static SPARE_BUFFERS: RefCell<Vec<IoBuffer>> = const { RefCell::new(Vec::new()) };
}

/// `io_uring`: `io_depth` reads in flight per reader thread.
pub(crate) const ENGINE: EngineInfo = EngineInfo {
    kind: EngineKind::IoUring,
    reads: "io_uring reads, io_depth in flight per reader thread (O_DIRECT with reader.odirect)",
    writes: "as posix (as direct with reader.odirect)",
    odirect: OdirectUse::Optional,
    open: |settings, direct, transfer_size| {
        let uring = UringStorage::new(settings.io_depth, direct)?;
        Ok(std::sync::Arc::new(match transfer_size {
            Some(size) => uring.with_whole_read_request(size),
            None => uring,
        }))
    },
};

/// io_uring reads with `io_depth` requests in flight per thread.
#[derive(Debug, Clone, Copy)]
pub struct UringStorage {
    io_depth: u32,
    odirect: bool,
    /// The request size of a background whole-file read ([`Storage::start_whole_read`]).
    whole_read_request: usize,
}

/// The request size of a background whole-file read unless `reader.transfer_size` sets one:
/// the 4 MiB in which readers that decode nothing read a whole file in the foreground.
pub const WHOLE_READ_REQUEST: usize = 4 << 20;

impl UringStorage {
    /// The engine, after checking that the kernel allows io_uring (a ring of `io_depth`
    /// entries is made and dropped). `io_depth` 0 counts as 1.
    pub fn new(io_depth: u32, odirect: bool) -> Result<UringStorage, StorageError> {
        let io_depth = io_depth.clamp(1, 4096);
        IoUring::new(io_depth).map_err(uring_refused)?;
        Ok(UringStorage {
            io_depth,
            odirect,
            whole_read_request: WHOLE_READ_REQUEST,
        })
    }

    /// The same engine with background whole-file reads in requests of `bytes` (rounded up
    /// to the O_DIRECT alignment; `reader.transfer_size`).
    pub fn with_whole_read_request(self, bytes: usize) -> UringStorage {
        UringStorage {
            whole_read_request: bytes.max(1).next_multiple_of(DIRECT_ALIGNMENT),
            ..self
        }
    }

    /// Requests in flight per reader thread.
    pub fn io_depth(&self) -> u32 {
        self.io_depth
    }

    /// `path` opened for reading (with O_DIRECT when asked) and its length.
    fn open_file(&self, path: &Path) -> Result<(File, u64), StorageError> {
        let file = if self.odirect {
            open_direct(path, OpenOptions::new().read(true))?
        } else {
            open_for_reading(path)?
        };
        let len = regular_file_len(&file, path)?;
        Ok((file, len))
    }

    /// A read handle over an open file.
    fn handle(&self, file: File, path: PathBuf, len: u64) -> Result<UringRead, StorageError> {
        Ok(UringRead {
            file,
            path,
            len,
            io_depth: self.io_depth,
            bounce: if self.odirect {
                Some(IoBuffer::new(DIRECT_ALIGNMENT)?)
            } else {
                None
            },
            scratch: Scratch::default(),
            free_slots: Vec::new(),
        })
    }
}

/// A ring of `depth` entries for this thread only. Like fio, it asks the kernel not to
/// interrupt the thread to post completions (`COOP_TASKRUN`) and to run completion work only
/// when the thread waits for it (`SINGLE_ISSUER | DEFER_TASKRUN`: the ring is thread-local, so
/// one task submits and reaps), and falls back to fewer flags on kernels that refuse them.
fn new_ring(depth: u32) -> io::Result<IoUring> {
    let mut last = None;
    for level in (0..=2).rev() {
        let mut builder = IoUring::builder();
        builder.setup_cqsize(depth);
        if level >= 1 {
            builder.setup_coop_taskrun();
        }
        if level >= 2 {
            builder.setup_single_issuer().setup_defer_taskrun();
        }
        match builder.build(depth) {
            Ok(ring) => return Ok(ring),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL)))
}

fn uring_refused(source: io::Error) -> StorageError {
    StorageError::EngineUnavailable {
        engine: "io_uring",
        reason: format!("this kernel refuses io_uring ({source})"),
        hint: "check /proc/sys/kernel/io_uring_disabled (0 allows it) and the container's seccomp \
               profile, or use ++workload.storage.io_engine=posix",
    }
}

impl ForwardStorage for UringStorage {
    /// File-system chores (listing, sizes, directories, removal) are POSIX calls.
    fn forward_to(&self) -> &dyn Storage {
        &PosixStorage
    }
}

impl Storage for UringStorage {
    fn engine(&self) -> &'static str {
        "io_uring"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            alignment: if self.odirect { DIRECT_ALIGNMENT } else { 1 },
            batched: true,
            io_depth: self.io_depth,
            nowait_reads: false,
            buffer_page_offset: None,
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let (file, len) = self.open_file(path)?;
        Ok(Box::new(self.handle(file, path.to_path_buf(), len)?))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        if self.odirect {
            DirectStorage.create(path)
        } else {
            PosixStorage.create(path)
        }
    }

    /// Submits the file's first request on a ring of its own and returns at once, so that a
    /// reader keeping several of these in flight keeps that many requests at the device
    /// across sample boundaries; [`PendingRead::wait`] reaps it and reads the rest of a
    /// longer file with `io_depth` requests in flight. The bytes are counted, not kept.
    /// Its first request is reaped in `wait`, so it never rings `bell` ([`PendingRead::finished`]
    /// is `None`).
    fn start_whole_read(&self, path: &Path, _bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        Some(Box::new(UringWholeRead::start(*self, path)))
    }

    crate::forward_storage!(
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path
    );
}

struct UringRead {
    file: File,
    path: PathBuf,
    len: u64,
    io_depth: u32,
    /// With O_DIRECT: the bounce buffer for unaligned requests.
    bounce: Option<IoBuffer>,
    /// The core's bookkeeping (kept to reuse its allocations).
    scratch: Scratch,
    /// A stream's free window slots (kept to reuse its allocation).
    free_slots: Vec<usize>,
}

/// Runs `f` with this thread's ring (made, or remade larger, if it has fewer than `depth`
/// entries). The ring is taken out of the thread-local for the call, so that a `consume`
/// that itself reads through io_uring gets a ring of its own instead of a `RefCell` panic;
/// it is put back afterwards (a panic drops it, once [`Flight`] has drained it).
fn with_ring<T>(
    depth: u32,
    f: impl FnOnce(&mut IoUring) -> Result<T, StorageError>,
) -> Result<T, StorageError> {
    let mut ring = match RING.with(|cell| cell.borrow_mut().take()) {
        Some(ring) if ring.params().sq_entries() >= depth => ring,
        _ => new_ring(depth).map_err(uring_refused)?,
    };
    let result = f(&mut ring);
    RING.with(|cell| *cell.borrow_mut() = Some(ring));
    result
}

/// The file a run reads.
#[derive(Clone, Copy)]
struct Source<'a> {
    fd: types::Fd,
    path: &'a Path,
    /// The file's length.
    len: u64,
    /// Most requests in flight.
    depth: u32,
}

/// One read for the ring: `len` bytes at `offset` into the memory at `ptr`. `tag` is the
/// feed's own (which request, or which window slot).
#[derive(Clone, Copy)]
struct Target {
    offset: u64,
    ptr: *mut u8,
    len: usize,
    tag: usize,
}

/// Where the requests of one [`run`] come from and where their bytes go.
///
/// # Safety
///
/// Every [`Target`] that `next` returns must point to `len` bytes that stay allocated,
/// valid for writes and untouched by anyone else (no Rust reference to them is used) from
/// that `next` call until `completed` is called with it or, if it never is, until the run
/// returns; [`run`] guarantees that the kernel is done with them by then. Targets in flight
/// at the same time must not overlap.
unsafe trait Feed {
    /// Most targets the feed can have outstanding at once (its memory's slots).
    fn capacity(&self) -> usize;

    /// The next target, `None` once there are no more. A feed may serve requests itself
    /// (empty ones, O_DIRECT bounces) before it returns one.
    fn next(&mut self) -> Result<Option<Target>, StorageError>;

    /// `target` has all its bytes and the kernel holds no reference to it any more. Called
    /// only while the run has no error.
    fn completed(&mut self, target: Target) -> Result<(), StorageError>;
}

/// A batch: each request's own buffer is its target.
struct BatchFeed<'r, 'b> {
    requests: &'r mut [ReadRequest<'b>],
    next: usize,
    /// With O_DIRECT: unaligned requests are served here, through the bounce buffer.
    bounce: Option<Bounce<'r>>,
}

/// What an O_DIRECT feed needs to serve an unaligned request itself.
struct Bounce<'a> {
    file: &'a File,
    path: &'a Path,
    buffer: &'a mut IoBuffer,
}

impl Bounce<'_> {
    fn read_exact(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        read_exact_bounced(self.file, self.path, self.buffer, buf, offset)
    }
}

// SAFETY: a target is the whole buffer of one request, a distinct `&mut [u8]` that the feed
// borrows for the run; `next` only moves forward, so after handing out a request's pointer
// the feed never touches that buffer again, and the buffers of different requests do not
// overlap because they are distinct mutable borrows.
unsafe impl Feed for BatchFeed<'_, '_> {
    /// The requests not yet handed out: a batch of one sets up one ring slot, not
    /// `io_depth` of them.
    fn capacity(&self) -> usize {
        self.requests.len() - self.next
    }

    fn next(&mut self) -> Result<Option<Target>, StorageError> {
        while let Some(request) = self.requests.get_mut(self.next) {
            let tag = self.next;
            self.next += 1;
            if request.buf.is_empty() {
                continue;
            }
            if let Some(bounce) = &mut self.bounce
                && !request_is_aligned(request.buf, request.offset)
            {
                bounce.read_exact(request.buf, request.offset)?;
                continue;
            }
            return Ok(Some(Target {
                offset: request.offset,
                ptr: request.buf.as_mut_ptr(),
                len: request.buf.len(),
                tag,
            }));
        }
        Ok(None)
    }

    fn completed(&mut self, _target: Target) -> Result<(), StorageError> {
        Ok(())
    }
}

/// A stream: requests from the caller's iterator, each into a free slot of its window.
struct StreamFeed<'a, 'c> {
    requests: &'a mut dyn Iterator<Item = Extent>,
    consume: &'a mut Consume<'c>,
    /// Start of the window, which the caller lends mutably for the whole run; only raw
    /// pointers derived from it are used while the run lasts.
    base: *mut u8,
    block: usize,
    slots: usize,
    /// Slots that hold no request (neither in flight nor being consumed).
    free: &'a mut Vec<usize>,
    path: &'a Path,
    bounce: Option<Bounce<'a>>,
}

// SAFETY: a target is the first `len <= block` bytes of a window slot taken from `free`,
// so targets in flight lie in distinct slots and never overlap. The window is lent mutably
// for the run and only reached through `base`. A slot returns to `free` only in
// `completed` (the kernel is done with it) or right after the feed served it itself, so no
// target is handed out twice; `completed` reads a slot only after the kernel finished it.
unsafe impl Feed for StreamFeed<'_, '_> {
    fn capacity(&self) -> usize {
        self.slots
    }

    fn next(&mut self) -> Result<Option<Target>, StorageError> {
        for extent in &mut *self.requests {
            check_extent(self.path, extent, self.block)?;
            let slot = self
                .free
                .pop()
                .expect("the run asks for a request only while fewer than `slots` are out");
            // SAFETY: `slot < slots`, so the slot's start lies inside the window.
            let ptr = unsafe { self.base.add(slot * self.block) };
            let bounced = self.bounce.is_some()
                && !parts_are_aligned(ptr as usize, extent.len, extent.offset);
            if extent.len > 0 && !bounced {
                return Ok(Some(Target {
                    offset: extent.offset,
                    ptr,
                    len: extent.len,
                    tag: slot,
                }));
            }
            // Served here: an empty request, or an unaligned one with O_DIRECT.
            // SAFETY: the slot was just taken from `free` (no read in flight into it, no
            // other slice of it alive) and `check_extent` bounds the length by the block,
            // so the slice lies inside the window, which the caller lends for the run.
            let buf = unsafe { std::slice::from_raw_parts_mut(ptr, extent.len) };
            if let Some(bounce) = &mut self.bounce {
                bounce.read_exact(buf, extent.offset)?;
            }
            (self.consume)(extent.offset, buf)?;
            self.free.push(slot);
        }
        Ok(None)
    }

    fn completed(&mut self, target: Target) -> Result<(), StorageError> {
        // SAFETY: the run calls this once the kernel has written all `len` bytes of the
        // target and holds no entry for it; the slot is handed out again only after it is
        // back in `free`, after this slice is gone.
        let bytes = unsafe { std::slice::from_raw_parts(target.ptr, target.len) };
        let consumed = (self.consume)(target.offset, bytes);
        self.free.push(target.tag);
        consumed
    }
}

impl Target {
    /// A placeholder for ring slots without a request.
    const NONE: Target = Target {
        offset: 0,
        ptr: std::ptr::null_mut(),
        len: 0,
        tag: 0,
    };
}

/// The core's reusable bookkeeping.
#[derive(Default)]
struct Scratch {
    /// The target of each ring slot and the bytes it has so far.
    entries: Vec<(Target, usize)>,
    /// Ring slots without a request.
    free: Vec<usize>,
    /// The completions of one wait: ring slot and result.
    reaped: Vec<(usize, i32)>,
}

// SAFETY: the pointers in `entries` are used only during a run, which borrows the scratch
// exclusively on one thread and ends with nothing in flight; between runs they are stale
// values that are overwritten before any use, never dereferenced.
unsafe impl Send for Scratch {}

/// The requests a run has on the ring. Dropping it waits for all of them, so that whatever
/// way a run ends (an error, or a panic in a caller's iterator or `consume`), no read is in
/// flight into memory the caller may free.
struct Flight<'r> {
    ring: &'r mut IoUring,
    source: Source<'r>,
    /// Entries pushed (submitted or not) whose completion has not been reaped.
    in_flight: usize,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        while self.in_flight > 0 {
            wait(self.ring, self.source.path, self.in_flight);
            let reaped = self.ring.completion().count();
            self.in_flight -= reaped.min(self.in_flight);
        }
    }
}

impl Flight<'_> {
    /// Queues the unfinished part of `target` (its first `done` bytes are in) as ring slot
    /// `slot`; the next `wait` submits it with the others queued since.
    fn push(&mut self, target: &Target, done: usize, slot: usize) -> Result<(), StorageError> {
        let len = (target.len - done).min(MAX_SUBMISSION) as u32;
        // `done < target.len`: the pointer stays inside the target.
        let ptr = target.ptr.wrapping_add(done);
        let entry = opcode::Read::new(self.source.fd, ptr, len)
            .offset(target.offset + done as u64)
            .build()
            .user_data(slot as u64);
        // SAFETY: the entry points into a target, which the feed keeps allocated and
        // untouched until the run hands it back with `completed` or returns (the `Feed`
        // contract); the run does that only after this entry's completion is reaped, and
        // `Flight`'s drop reaps every completion before the run can return or unwind, so
        // the kernel never writes into memory the caller has got back.
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            // Never happens: at most `depth` entries are queued or in flight, and the queue
            // holds as many. Failing is still better than losing a request.
            return Err(StorageError::io(
                "read",
                self.source.path,
                io::Error::other("the io_uring submission queue is full"),
            ));
        }
        self.in_flight += 1;
        Ok(())
    }
}

#[cfg(test)]
thread_local! {
    /// What the last run of this thread did: the most requests it had in flight, and how
    /// many times it waited for all of them (a drained queue).
    static LAST_RUN: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Runs `feed`'s requests on `ring`, keeping up to `min(depth, feed capacity)` in flight.
/// Returns the first error (an I/O error, a truncated file, or the feed's own), once no
/// request is in flight any more; after an error nothing new is started and completed
/// requests are not handed back to the feed.
fn run(
    ring: &mut IoUring,
    source: Source<'_>,
    scratch: &mut Scratch,
    feed: &mut impl Feed,
) -> Result<(), StorageError> {
    let limit = (source.depth as usize).min(feed.capacity()).max(1);
    let Scratch {
        entries,
        free,
        reaped,
    } = scratch;
    entries.clear();
    entries.resize(limit, (Target::NONE, 0));
    free.clear();
    free.extend((0..limit).rev());
    #[cfg(test)]
    let (mut peak, mut drains) = (0, 0);
    let mut flight = Flight {
        ring,
        source,
        in_flight: 0,
    };
    let mut exhausted = false;
    let mut first_error: Option<StorageError> = None;
    loop {
        while first_error.is_none() && !exhausted && flight.in_flight < limit {
            match feed.next() {
                Ok(Some(target)) => {
                    let slot = free
                        .pop()
                        .expect("fewer than `limit` requests are in flight");
                    entries[slot] = (target, 0);
                    if let Err(error) = flight.push(&target, 0, slot) {
                        free.push(slot);
                        first_error = Some(error);
                    }
                }
                Ok(None) => exhausted = true,
                Err(error) => first_error = Some(error),
            }
        }
        if flight.in_flight == 0 {
            break;
        }
        // While requests wait for a slot, wake at the first completion to refill it (fio's
        // `iodepth_batch_complete_min=1`); once none is left to start, sleep until the last
        // one is done instead of waking for each.
        let more = first_error.is_none() && !exhausted;
        let want = if more { 1 } else { flight.in_flight };
        #[cfg(test)]
        {
            peak = peak.max(flight.in_flight);
            // A wait for everything in flight (more than one): a drained queue, whichever
            // way `want` was chosen.
            drains += usize::from(want == flight.in_flight && flight.in_flight > 1);
        }
        wait(flight.ring, source.path, want);
        reaped.clear();
        reaped.extend(
            flight
                .ring
                .completion()
                .map(|cqe| (cqe.user_data() as usize, cqe.result())),
        );
        // Off the ring now, whatever happens below: if a feed's `completed` (a caller's
        // `consume`) panics halfway through these, `Flight`'s drop must not wait for them.
        flight.in_flight -= reaped.len();
        for &(slot, result) in reaped.iter() {
            let (target, done) = entries[slot];
            let mut resubmitted = false;
            let error = if result < 0 {
                let error = io::Error::from_raw_os_error(-result);
                Some(StorageError::io("read", source.path, error))
            } else if result == 0 {
                Some(truncated(source.path, &target, done))
            } else {
                let done = done + result as usize;
                entries[slot].1 = done;
                let at = target.offset + done as u64;
                if done == target.len {
                    match first_error {
                        None => feed.completed(target).err(),
                        Some(_) => None,
                    }
                } else if at >= source.len {
                    // Short at the end of the file: asking again would return 0, or EINVAL
                    // with O_DIRECT at an unaligned offset.
                    Some(truncated(source.path, &target, done))
                } else if first_error.is_none() {
                    // A short read: ask for the rest.
                    let pushed = flight.push(&target, done, slot);
                    resubmitted = pushed.is_ok();
                    pushed.err()
                } else {
                    None
                }
            };
            if !resubmitted {
                free.push(slot);
            }
            if let Some(error) = error {
                first_error.get_or_insert(error);
            }
        }
    }
    #[cfg(test)]
    LAST_RUN.with(|last| last.set((peak, drains)));
    match first_error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn truncated(path: &Path, target: &Target, done: usize) -> StorageError {
    StorageError::Truncated {
        path: path.to_path_buf(),
        offset: target.offset + done as u64,
        wanted: (target.len - done) as u64,
    }
}

/// Submits what was pushed and waits for at least `want` completions. Interrupted waits are
/// retried: returning with requests in flight would free buffers the kernel still fills.
fn wait(ring: &mut IoUring, path: &Path, want: usize) {
    let mut failures = 0u32;
    loop {
        match ring.submit_and_wait(want) {
            Ok(_) => return,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) =>
            {
                continue;
            }
            Err(e) => {
                failures += 1;
                if failures > 1000 {
                    // The ring is broken with reads in flight into caller memory: continuing
                    // or unwinding could let the kernel write into freed buffers.
                    eprintln!(
                        "dlio: io_uring failed with reads of {} in flight ({e}); aborting",
                        path.display()
                    );
                    std::process::abort();
                }
                std::thread::yield_now();
            }
        }
    }
}

impl ReadHandle for UringRead {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        if let Some(bounce) = &mut self.bounce
            && !request_is_aligned(buf, offset)
        {
            return direct_read_at(&self.file, &self.path, bounce, buf, offset);
        }
        let end = offset.saturating_add(buf.len() as u64).min(self.len);
        let n = end.saturating_sub(offset) as usize;
        if n == 0 {
            return Ok(0);
        }
        // At the end of a file whose size is not a block multiple the request shrinks to an
        // unaligned length, which O_DIRECT refuses (EINVAL): `read_batch` bounces it.
        self.read_batch(&mut [ReadRequest {
            offset,
            buf: &mut buf[..n],
        }])?;
        Ok(n)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        self.read_batch(&mut [ReadRequest { offset, buf }])
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let (source, bounce) = run_parts(
            &self.file,
            &self.path,
            self.len,
            self.io_depth,
            self.bounce.as_mut(),
        );
        let mut feed = BatchFeed {
            requests,
            next: 0,
            bounce,
        };
        let scratch = &mut self.scratch;
        with_ring(self.io_depth, |ring| run(ring, source, scratch, &mut feed))
    }

    /// Keeps `min(io_depth, slots)` requests in flight, each in its own slot of `window`,
    /// and consumes them in completion order; only the first `min(io_depth, slots)` slots
    /// are used. With O_DIRECT, a request that is not aligned in offset, length or slot
    /// address is read through the bounce buffer on the spot, while the others stay in
    /// flight.
    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        let slots = stream_slots(&self.path, window.len(), block)?.min(self.io_depth as usize);
        self.free_slots.clear();
        self.free_slots.extend((0..slots).rev());
        let (source, bounce) = run_parts(
            &self.file,
            &self.path,
            self.len,
            self.io_depth,
            self.bounce.as_mut(),
        );
        let mut feed = StreamFeed {
            requests,
            consume,
            base: window.as_mut_ptr(),
            block,
            slots,
            free: &mut self.free_slots,
            path: &self.path,
            bounce,
        };
        let scratch = &mut self.scratch;
        with_ring(self.io_depth, |ring| run(ring, source, scratch, &mut feed))
    }
}

/// What a [`run`] needs of a handle: its file, and with O_DIRECT its bounce buffer.
fn run_parts<'a>(
    file: &'a File,
    path: &'a Path,
    len: u64,
    depth: u32,
    bounce: Option<&'a mut IoBuffer>,
) -> (Source<'a>, Option<Bounce<'a>>) {
    let source = Source {
        fd: types::Fd(file.as_raw_fd()),
        path,
        len,
        depth,
    };
    let bounce = bounce.map(|buffer| Bounce { file, path, buffer });
    (source, bounce)
}

/// Reads exactly `buf.len()` bytes at `offset` through the O_DIRECT bounce buffer.
fn read_exact_bounced(
    file: &File,
    path: &Path,
    bounce: &mut IoBuffer,
    buf: &mut [u8],
    offset: u64,
) -> Result<(), StorageError> {
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        let n = direct_read_at(file, path, bounce, &mut buf[done..], at)?;
        if n == 0 {
            return Err(StorageError::Truncated {
                path: path.to_path_buf(),
                offset: at,
                wanted: (buf.len() - done) as u64,
            });
        }
        done += n;
    }
    Ok(())
}

/// A background whole-file read ([`UringStorage::start_whole_read`]): the first request is
/// on `ring` from `start` until `wait` (or the drop) reaps it.
struct UringWholeRead {
    engine: UringStorage,
    path: PathBuf,
    started: std::time::Instant,
    /// The open file, or why it could not be opened or read (reported by `wait`); taken by
    /// `wait`.
    state: Option<Result<Opened, StorageError>>,
}

struct Opened {
    file: File,
    len: u64,
    /// The first request's memory: the kernel writes into it while `ring` holds the request,
    /// and nothing reads it (the bytes are counted, not kept). Back to the spares once reaped.
    first: Option<IoBuffer>,
    /// The ring the first request is on; `None` once it is reaped (or when there is none).
    ring: Option<IoUring>,
}

impl UringWholeRead {
    fn start(engine: UringStorage, path: &Path) -> UringWholeRead {
        UringWholeRead {
            engine,
            path: path.to_path_buf(),
            started: std::time::Instant::now(),
            state: Some(Self::open_and_submit(engine, path)),
        }
    }

    fn open_and_submit(engine: UringStorage, path: &Path) -> Result<Opened, StorageError> {
        let (file, len) = engine.open_file(path)?;
        // The first request: the whole file up to one request, its length rounded up to the
        // O_DIRECT alignment (a read past the end stops at the end).
        let want =
            (len.min(engine.whole_read_request as u64) as usize).next_multiple_of(DIRECT_ALIGNMENT);
        let mut first = match SPARE_BUFFERS.with(|b| b.borrow_mut().pop()) {
            Some(buffer) => buffer,
            None => IoBuffer::new(DIRECT_ALIGNMENT)?,
        };
        if len == 0 {
            SPARE_BUFFERS.with(|b| b.borrow_mut().push(first));
            return Ok(Opened {
                file,
                len,
                first: None,
                ring: None,
            });
        }
        if first.len() < want {
            first.resize(want)?;
        }
        let mut ring = match SPARE_RINGS.with(|r| r.borrow_mut().pop()) {
            Some(ring) => ring,
            None => new_ring(1).map_err(uring_refused)?,
        };
        let entry = opcode::Read::new(types::Fd(file.as_raw_fd()), first.as_mut_ptr(), want as u32)
            .offset(0)
            .build()
            .user_data(0);
        // SAFETY: the entry points into `first`, a heap allocation owned by the returned
        // `Opened` that nothing reads or frees until the completion is reaped: `wait` reaps
        // it before touching `first`, and `UringWholeRead`'s drop reaps it before the fields
        // (and so `first`) are dropped. Moving the `Opened` does not move the allocation.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            return Err(StorageError::io(
                "read",
                path,
                io::Error::other("the io_uring submission queue is full"),
            ));
        }
        if let Err(e) = ring.submit() {
            // Not submitted: nothing is in flight, the entry is dropped with the ring.
            return Err(StorageError::io("read", path, e));
        }
        Ok(Opened {
            file,
            len,
            first: Some(first),
            ring: Some(ring),
        })
    }
}

impl Opened {
    /// Reaps the first request; its result (bytes read, or the error). The ring and the
    /// buffer go back to this thread's spares.
    fn reap_first(&mut self, path: &Path) -> Option<Result<usize, StorageError>> {
        let mut ring = self.ring.take()?;
        wait(&mut ring, path, 1);
        let result = ring.completion().next().map(|cqe| cqe.result());
        SPARE_RINGS.with(|r| r.borrow_mut().push(ring));
        // Off the ring: the kernel holds no reference to the buffer any more.
        if let Some(buffer) = self.first.take() {
            SPARE_BUFFERS.with(|b| b.borrow_mut().push(buffer));
        }
        Some(match result {
            Some(r) if r < 0 => Err(StorageError::io(
                "read",
                path,
                io::Error::from_raw_os_error(-r),
            )),
            Some(r) => Ok(r as usize),
            None => Err(StorageError::io(
                "read",
                path,
                io::Error::other("io_uring lost a completion"),
            )),
        })
    }
}

impl PendingRead for UringWholeRead {
    fn path(&self) -> &Path {
        &self.path
    }

    fn wait(mut self: Box<Self>) -> Result<WholeRead, StorageError> {
        let path = std::mem::take(&mut self.path);
        let started = self.started;
        let engine = self.engine;
        let mut opened = self.state.take().expect("a read is waited for once")?;
        let first = match opened.reap_first(&path) {
            Some(result) => result?,
            None => 0,
        };
        let done = (first as u64).min(opened.len);
        if done == 0 && opened.len > 0 {
            return Err(StorageError::Truncated {
                path,
                offset: 0,
                wanted: opened.len,
            });
        }
        if done < opened.len {
            // The rest of a file longer than one request, `io_depth` requests in flight.
            let block = engine.whole_read_request;
            let mut rest = engine.handle(opened.file, path.clone(), opened.len)?;
            let blocks = (opened.len - done).div_ceil(block as u64) as usize;
            let slots = blocks.min(engine.io_depth as usize).max(1);
            let mut window = IoBuffer::new(DIRECT_ALIGNMENT)?;
            window.resize(slots * block)?;
            let len = opened.len;
            let mut extents = (0..blocks).map(|i| {
                let offset = done + (i * block) as u64;
                Extent::new(offset, (len - offset).min(block as u64) as usize)
            });
            rest.read_stream(&mut window, block, &mut extents, &mut |_, _| Ok(()))?;
        }
        Ok(WholeRead {
            bytes: opened.len,
            took: started.elapsed(),
        })
    }
}

impl Drop for UringWholeRead {
    fn drop(&mut self) {
        // An abandoned read: its request must be off the ring before `first` is freed.
        if let Some(Ok(opened)) = &mut self.state {
            let _ = opened.reap_first(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine at `depth`, or `None` (with the reason printed) when the kernel refuses
    /// io_uring.
    fn uring(depth: u32) -> Option<UringStorage> {
        match UringStorage::new(depth, false) {
            Ok(storage) => Some(storage),
            Err(StorageError::EngineUnavailable { reason, .. }) => {
                eprintln!("skipped: {reason}");
                None
            }
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn a_stream_keeps_min_of_depth_and_slots_in_flight_and_drains_at_most_once() {
        let Some(storage) = uring(8) else { return };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let block = 4096;
        std::fs::write(&path, vec![1u8; 64 * block]).unwrap();
        let mut handle = storage.open(&path).unwrap();
        for (slots, peak) in [(16, 8), (8, 8), (3, 3), (1, 1)] {
            let mut window = vec![0u8; slots * block];
            let mut extents = (0..64).map(|i| Extent::new(i * block as u64, block));
            let mut consumed = 0;
            handle
                .read_stream(&mut window, block, &mut extents, &mut |_, bytes| {
                    assert!(bytes.iter().all(|&b| b == 1));
                    consumed += 1;
                    Ok(())
                })
                .unwrap();
            assert_eq!(consumed, 64, "{slots} slots");
            let (seen_peak, drains) = LAST_RUN.with(std::cell::Cell::get);
            assert_eq!(seen_peak, peak, "{slots} slots: requests in flight at once");
            assert!(
                drains <= 1,
                "{slots} slots: the queue drained {drains} times"
            );
        }
    }

    #[test]
    fn a_consume_may_read_through_io_uring_itself() {
        let Some(storage) = uring(4) else { return };
        let dir = tempfile::tempdir().unwrap();
        let (outer, inner) = (dir.path().join("outer.bin"), dir.path().join("inner.bin"));
        std::fs::write(&outer, vec![1u8; 16 * 4096]).unwrap();
        std::fs::write(&inner, vec![2u8; 4096]).unwrap();
        let mut outer = storage.open(&outer).unwrap();
        let mut inner = storage.open(&inner).unwrap();
        let mut window = vec![0u8; 4 * 4096];
        let mut extents = (0..16).map(|i| Extent::new(i * 4096, 4096));
        let mut nested = [0u8; 4096];
        outer
            .read_stream(&mut window, 4096, &mut extents, &mut |_, bytes| {
                assert!(bytes.iter().all(|&b| b == 1));
                inner.read_exact_at(&mut nested, 0)?;
                assert!(nested.iter().all(|&b| b == 2));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn whole_reads_stay_in_flight_together_and_count_every_byte() {
        let Some(storage) = uring(4) else { return };
        // Requests of 8 KiB: the last file takes four, read with `io_depth` in flight.
        let storage = storage.with_whole_read_request(8192);
        let dir = tempfile::tempdir().unwrap();
        let sizes = [0usize, 1, 4095, 4096, 8192, 3 * 8192 + 5];
        let paths: Vec<PathBuf> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let p = dir.path().join(format!("f{i}"));
                std::fs::write(&p, vec![i as u8; n]).unwrap();
                p
            })
            .collect();
        // All started before any is waited for, as the loader's window does.
        let pending: Vec<_> = paths
            .iter()
            .map(|p| {
                storage
                    .start_whole_read(p, &Arc::default())
                    .expect("io_uring reads in the background")
            })
            .collect();
        for (read, &n) in pending.into_iter().zip(&sizes) {
            assert_eq!(read.wait().unwrap().bytes, n as u64);
        }
        // Each non-empty file's first request had a ring of its own, all at once.
        assert!(SPARE_RINGS.with(|r| r.borrow().len()) >= sizes.len() - 1);
    }

    #[test]
    fn an_abandoned_whole_read_is_reaped_and_its_ring_reused() {
        let Some(storage) = uring(2) else { return };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 65536]).unwrap();
        for _ in 0..3 {
            drop(storage.start_whole_read(&path, &Arc::default()).unwrap());
        }
        assert_eq!(
            storage
                .start_whole_read(&path, &Arc::default())
                .unwrap()
                .wait()
                .unwrap()
                .bytes,
            65536
        );
        assert!(SPARE_RINGS.with(|r| r.borrow().len()) >= 1);
    }

    #[test]
    fn a_missing_file_fails_at_wait_naming_it() {
        let Some(storage) = uring(2) else { return };
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.npz");
        let err = storage
            .start_whole_read(&missing, &Arc::default())
            .unwrap()
            .wait()
            .unwrap_err();
        assert!(err.to_string().contains("missing.npz"), "{err}");
    }
}
