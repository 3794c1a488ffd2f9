//! The `io_uring` engine: reads are submitted through an io_uring with up to `io_depth`
//! requests in flight per reader thread (one ring per thread, made on first use and kept for
//! the thread's life, as fio keeps one per job). A batch ([`ReadHandle::read_batch`], which
//! [`crate::SplitReads`] produces from one long read) is submitted together, and each slot is
//! refilled as its request completes, so one read of a whole file split into transfers keeps
//! the device's queue full until its last `io_depth` requests, which drain: the call returns
//! when all are done (bench/RESULTS.md measures what that costs). With `odirect` the files
//! are opened with O_DIRECT (fio's `direct=1`); unaligned requests then take the `direct`
//! engine's bounce path. Writes, listing and removal are the `posix` (or `direct`) engine's.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use io_uring::{IoUring, opcode, types};

use crate::direct::{DIRECT_ALIGNMENT, direct_read_at, open_direct, request_is_aligned};
use crate::posix::regular_file_len;
use crate::{
    Capabilities, DirectStorage, ForwardStorage, IoBuffer, PosixStorage, ReadHandle, ReadRequest,
    Storage, StorageError, WriteHandle,
};

/// Largest single submission; longer requests complete in several (the kernel takes a u32).
const MAX_SUBMISSION: usize = 1 << 30;

thread_local! {
    /// This thread's ring, made on first use.
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// io_uring reads with `io_depth` requests in flight per thread.
#[derive(Debug, Clone, Copy)]
pub struct UringStorage {
    io_depth: u32,
    odirect: bool,
}

impl UringStorage {
    /// The engine, after checking that the kernel allows io_uring (a ring of `io_depth`
    /// entries is made and dropped). `io_depth` 0 counts as 1.
    pub fn new(io_depth: u32, odirect: bool) -> Result<UringStorage, StorageError> {
        let io_depth = io_depth.clamp(1, 4096);
        IoUring::new(io_depth).map_err(uring_refused)?;
        Ok(UringStorage { io_depth, odirect })
    }

    /// Requests in flight per reader thread.
    pub fn io_depth(&self) -> u32 {
        self.io_depth
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
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let file = if self.odirect {
            open_direct(path, OpenOptions::new().read(true))?
        } else {
            File::open(path).map_err(|e| StorageError::io("open", path, e))?
        };
        let len = regular_file_len(&file, path)?;
        Ok(Box::new(UringRead {
            file,
            path: path.to_path_buf(),
            len,
            io_depth: self.io_depth,
            bounce: if self.odirect {
                Some(IoBuffer::new(DIRECT_ALIGNMENT)?)
            } else {
                None
            },
            done: Vec::new(),
            reaped: Vec::new(),
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        if self.odirect {
            DirectStorage.create(path)
        } else {
            PosixStorage.create(path)
        }
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
    /// Bytes done per request of the current batch (kept to reuse its allocation).
    done: Vec<usize>,
    /// The completions of one wait: request index and result (kept to reuse its allocation).
    reaped: Vec<(usize, i32)>,
}

impl UringRead {
    /// Runs `requests` on this thread's ring, except those `skip` selects (and empty ones);
    /// each must read exactly its length. Returns only when no request is in flight any
    /// more, so the buffers are free again.
    fn run(
        &mut self,
        requests: &mut [ReadRequest<'_>],
        skip: fn(&ReadRequest<'_>) -> bool,
    ) -> Result<(), StorageError> {
        let depth = self.io_depth;
        RING.with(|cell| {
            let mut slot = cell.borrow_mut();
            let ring = match &mut *slot {
                Some(ring) if ring.params().sq_entries() >= depth => ring,
                slot => slot.insert(new_ring(depth).map_err(uring_refused)?),
            };
            self.done.clear();
            self.done.resize(requests.len(), 0);
            let mut batch = Batch {
                ring,
                fd: types::Fd(self.file.as_raw_fd()),
                path: &self.path,
                len: self.len,
                done: &mut self.done,
                reaped: &mut self.reaped,
                depth,
            };
            batch.run(requests, skip)
        })
    }
}

/// One `read_batch` on a ring.
struct Batch<'a> {
    ring: &'a mut IoUring,
    fd: types::Fd,
    path: &'a Path,
    /// The file's length.
    len: u64,
    done: &'a mut [usize],
    reaped: &'a mut Vec<(usize, i32)>,
    depth: u32,
}

impl Batch<'_> {
    /// Queues the unfinished part of request `index` (submitted by the next `wait`, together
    /// with the others queued since). Returns false if the submission queue is full (it
    /// never is: at most `depth` entries are queued or in flight and the queue holds as
    /// many).
    fn push(&mut self, request: &mut ReadRequest<'_>, index: usize) -> bool {
        let done = self.done[index];
        let remaining = &mut request.buf[done..];
        let len = remaining.len().min(MAX_SUBMISSION) as u32;
        let entry = opcode::Read::new(self.fd, remaining.as_mut_ptr(), len)
            .offset(request.offset + done as u64)
            .build()
            .user_data(index as u64);
        // SAFETY: the entry points into `request.buf`, which the caller keeps borrowed (and
        // so alive, unmoved and unaliased) until `Batch::run` returns, and `run` returns only
        // after the completion of every entry it pushed has been reaped (`wait` never returns
        // early with entries in flight: it retries or aborts the process).
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            return false;
        }
        true
    }

    fn run(
        &mut self,
        requests: &mut [ReadRequest<'_>],
        skip: fn(&ReadRequest<'_>) -> bool,
    ) -> Result<(), StorageError> {
        let mut next = 0;
        let mut in_flight = 0u32;
        let mut first_error: Option<StorageError> = None;
        loop {
            while first_error.is_none() && in_flight < self.depth && next < requests.len() {
                let request = &mut requests[next];
                if request.buf.is_empty() || skip(request) {
                    next += 1;
                    continue;
                }
                if !self.push(request, next) {
                    if in_flight == 0 {
                        // Nothing would ever free a slot: fail rather than skip the rest.
                        first_error = Some(queue_full(self.path));
                    }
                    break;
                }
                in_flight += 1;
                next += 1;
            }
            if in_flight == 0 {
                break;
            }
            // While requests wait for a slot, wake at the first completion to refill it (fio's
            // `iodepth_batch_complete_min=1`); once all are queued, sleep until the last one
            // is done instead of waking for each.
            let all_queued = next >= requests.len() || first_error.is_some();
            let want = if all_queued { in_flight } else { 1 };
            wait(self.ring, self.path, want as usize);
            self.reaped.clear();
            self.reaped.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data() as usize, cqe.result())),
            );
            for i in 0..self.reaped.len() {
                let (index, result) = self.reaped[i];
                in_flight -= 1;
                let request = &mut requests[index];
                let done = self.done[index];
                if result < 0 {
                    first_error.get_or_insert_with(|| {
                        let error = io::Error::from_raw_os_error(-result);
                        StorageError::io("read", self.path, error)
                    });
                } else if result == 0 {
                    first_error.get_or_insert_with(|| StorageError::Truncated {
                        path: self.path.to_path_buf(),
                        offset: request.offset + done as u64,
                        wanted: (request.buf.len() - done) as u64,
                    });
                } else {
                    self.done[index] += result as usize;
                    let done = self.done[index];
                    let at = request.offset + done as u64;
                    if done < request.buf.len() && at >= self.len {
                        // Short at the end of the file: asking again would return 0, or
                        // EINVAL with O_DIRECT at an unaligned offset.
                        first_error.get_or_insert_with(|| StorageError::Truncated {
                            path: self.path.to_path_buf(),
                            offset: at,
                            wanted: (request.buf.len() - done) as u64,
                        });
                    } else if done < request.buf.len() && first_error.is_none() {
                        // A short read: ask for the rest.
                        if self.push(request, index) {
                            in_flight += 1;
                        } else {
                            first_error = Some(queue_full(self.path));
                        }
                    }
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

fn queue_full(path: &Path) -> StorageError {
    StorageError::io(
        "read",
        path,
        io::Error::other("the io_uring submission queue is full"),
    )
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
        // unaligned length, which O_DIRECT refuses (EINVAL): take the bounce path for it.
        if let Some(bounce) = &mut self.bounce
            && !n.is_multiple_of(DIRECT_ALIGNMENT)
        {
            return direct_read_at(&self.file, &self.path, bounce, &mut buf[..n], offset);
        }
        self.run(
            &mut [ReadRequest {
                offset,
                buf: &mut buf[..n],
            }],
            |_| false,
        )?;
        Ok(n)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        self.read_batch(&mut [ReadRequest { offset, buf }])
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let Some(bounce) = &mut self.bounce else {
            return self.run(requests, |_| false);
        };
        // O_DIRECT: unaligned requests go through the bounce buffer first (each is at most
        // one block plus its misaligned ends), then the aligned ones to the ring together.
        for request in requests.iter_mut() {
            if !request_is_aligned(request.buf, request.offset) {
                read_exact_bounced(&self.file, &self.path, bounce, request)?;
            }
        }
        self.run(requests, |request| {
            !request_is_aligned(request.buf, request.offset)
        })
    }
}

fn read_exact_bounced(
    file: &File,
    path: &Path,
    bounce: &mut IoBuffer,
    request: &mut ReadRequest<'_>,
) -> Result<(), StorageError> {
    let mut done = 0;
    while done < request.buf.len() {
        let offset = request.offset + done as u64;
        let n = direct_read_at(file, path, bounce, &mut request.buf[done..], offset)?;
        if n == 0 {
            return Err(StorageError::Truncated {
                path: path.to_path_buf(),
                offset,
                wanted: (request.buf.len() - done) as u64,
            });
        }
        done += n;
    }
    Ok(())
}
