//! The `io_uring` engine: reads are submitted through an io_uring with up to `io_depth`
//! requests in flight per reader thread (one ring per thread, made on first use and kept for
//! the thread's life, as fio keeps one per job). A batch ([`ReadHandle::read_batch`], which
//! [`crate::SplitReads`] produces from one long read) is submitted together, so one read of a
//! whole file split into transfers keeps the device's queue full. With `odirect` the files
//! are opened with O_DIRECT (fio's `direct=1`); unaligned requests then take the `direct`
//! engine's bounce path. Writes, listing and removal are the `posix` (or `direct`) engine's.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use io_uring::{IoUring, opcode, types};

use crate::direct::{DIRECT_ALIGNMENT, direct_read_at, open_direct, request_is_aligned};
use crate::{
    Capabilities, DirEntry, DirectStorage, IoBuffer, PosixStorage, ReadHandle, ReadRequest,
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

fn uring_refused(source: io::Error) -> StorageError {
    StorageError::EngineUnavailable {
        engine: "io_uring",
        reason: format!("this kernel refuses io_uring ({source})"),
        hint: "check /proc/sys/kernel/io_uring_disabled (0 allows it) and the container's seccomp \
               profile, or use ++workload.storage.io_engine=posix",
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
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let file = if self.odirect {
            open_direct(path, OpenOptions::new().read(true))?
        } else {
            File::open(path).map_err(|e| StorageError::io("open", path, e))?
        };
        let metadata = file
            .metadata()
            .map_err(|e| StorageError::io("stat", path, e))?;
        if !metadata.is_file() {
            return Err(StorageError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        Ok(Box::new(UringRead {
            file,
            path: path.to_path_buf(),
            len: metadata.len(),
            io_depth: self.io_depth,
            bounce: if self.odirect {
                Some(IoBuffer::new(DIRECT_ALIGNMENT)?)
            } else {
                None
            },
            done: Vec::new(),
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        if self.odirect {
            DirectStorage.create(path)
        } else {
            PosixStorage.create(path)
        }
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        PosixStorage.list(dir)
    }

    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        PosixStorage.size(path)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        PosixStorage.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        PosixStorage.remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        PosixStorage.remove_dir_all(dir)
    }

    fn partial_path(&self, path: &Path) -> Option<PathBuf> {
        PosixStorage.partial_path(path)
    }
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
}

impl UringRead {
    /// Runs `requests` on this thread's ring; each must read exactly its length. Returns only
    /// when no request is in flight any more, so the buffers are free again.
    fn run(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let depth = self.io_depth;
        RING.with(|cell| {
            let mut slot = cell.borrow_mut();
            let ring = match &mut *slot {
                Some(ring) if ring.params().sq_entries() >= depth => ring,
                slot => slot.insert(IoUring::new(depth).map_err(uring_refused)?),
            };
            self.done.clear();
            self.done.resize(requests.len(), 0);
            submit_all(
                ring,
                &self.file,
                &self.path,
                requests,
                &mut self.done,
                depth,
            )
        })
    }
}

/// Pushes the unfinished part of request `index`.
fn push(
    ring: &mut IoUring,
    fd: types::Fd,
    request: &mut ReadRequest<'_>,
    done: usize,
    index: usize,
) -> bool {
    let remaining = &mut request.buf[done..];
    let len = remaining.len().min(MAX_SUBMISSION) as u32;
    let entry = opcode::Read::new(fd, remaining.as_mut_ptr(), len)
        .offset(request.offset + done as u64)
        .build()
        .user_data(index as u64);
    // SAFETY: the entry points into `request.buf`, which the caller keeps borrowed (and so
    // alive and unaliased) until `submit_all` returns, and `submit_all` returns only after
    // the completion of every entry it pushed has been reaped.
    unsafe { ring.submission().push(&entry).is_ok() }
}

fn submit_all(
    ring: &mut IoUring,
    file: &File,
    path: &Path,
    requests: &mut [ReadRequest<'_>],
    done: &mut [usize],
    depth: u32,
) -> Result<(), StorageError> {
    let fd = types::Fd(file.as_raw_fd());
    let mut next = 0;
    let mut in_flight = 0u32;
    let mut first_error: Option<StorageError> = None;
    loop {
        while first_error.is_none() && in_flight < depth && next < requests.len() {
            if requests[next].buf.is_empty() {
                next += 1;
                continue;
            }
            if !push(ring, fd, &mut requests[next], 0, next) {
                break;
            }
            in_flight += 1;
            next += 1;
        }
        if in_flight == 0 {
            break;
        }
        wait(ring, path)?;
        let completions: Vec<(usize, i32)> = ring
            .completion()
            .map(|cqe| (cqe.user_data() as usize, cqe.result()))
            .collect();
        for (index, result) in completions {
            in_flight -= 1;
            let request = &mut requests[index];
            if result < 0 {
                first_error.get_or_insert_with(|| {
                    let error = io::Error::from_raw_os_error(-result);
                    StorageError::io("read", path, error)
                });
            } else if result == 0 {
                first_error.get_or_insert_with(|| StorageError::Truncated {
                    path: path.to_path_buf(),
                    offset: request.offset + done[index] as u64,
                    wanted: (request.buf.len() - done[index]) as u64,
                });
            } else {
                done[index] += result as usize;
                if done[index] < request.buf.len()
                    && first_error.is_none()
                    && push(ring, fd, request, done[index], index)
                {
                    in_flight += 1;
                }
            }
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Submits what was pushed and waits for at least one completion. Interrupted waits are
/// retried: returning with requests in flight would free buffers the kernel still fills.
fn wait(ring: &mut IoUring, path: &Path) -> Result<(), StorageError> {
    let mut failures = 0u32;
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => return Ok(()),
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
        self.run(&mut [ReadRequest {
            offset,
            buf: &mut buf[..n],
        }])?;
        Ok(n)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        self.read_batch(&mut [ReadRequest { offset, buf }])
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let Some(bounce) = &mut self.bounce else {
            return self.run(requests);
        };
        // O_DIRECT: aligned requests go to the ring together, the others through the bounce
        // buffer (each of those is at most one block plus its misaligned ends).
        let mut aligned = Vec::with_capacity(requests.len());
        for request in requests.iter_mut() {
            if request_is_aligned(request.buf, request.offset) {
                aligned.push(ReadRequest {
                    offset: request.offset,
                    buf: &mut *request.buf,
                });
            } else {
                read_exact_bounced(&self.file, &self.path, bounce, request)?;
            }
        }
        self.run(&mut aligned)
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
