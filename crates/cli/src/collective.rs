//! Collective reads of a shared file through MPI-IO (`reader.collective_io: True`, ours;
//! cargo feature `mpi`).
//!
//! Workloads whose ranks all read one shared file (the DLIO paper's cosmic_tagger, ffn and
//! candle; indexed_binary with one file) can read through MPI-IO's collective calls, which
//! let the MPI library aggregate the ranks' requests (two-phase I/O) before they reach the
//! file system. The plan does not change: each rank reads its own samples; only the calls that
//! move the bytes differ. Everything but opening and reading goes to the wrapped engine.
//!
//! Collective calls must be made by every process, in the same order, the same number of
//! times. The run driver therefore allows this engine only with one rank per process, at most
//! one reader thread, and one shared file, so every process issues the same sequence of
//! opens and equally sized reads (the plan gives every rank the same number of samples). Why
//! raw FFI: rsmpi has no MPI-IO bindings; the calls used are few and each is commented.

use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dlio_storage::{Capabilities, ForwardStorage, ReadHandle, Storage, StorageError};
use mpi::ffi;

/// A dedicated communicator for file I/O: a duplicate of `MPI_COMM_WORLD`, so the reader
/// thread's collective calls never interleave with the step loop's barriers on the world
/// communicator.
struct IoComm(ffi::MPI_Comm);

// SAFETY: an MPI communicator handle is a process-wide opaque reference that MPI allows any
// thread to use when initialised with MPI_THREAD_MULTIPLE, which `Cluster::join_mpi` requests
// and the driver requires before choosing this engine. The handle is never mutated after
// creation. It is not freed: freeing is collective and would have to happen before
// MPI_Finalize in every process; one duplicated communicator per run costs nothing.
unsafe impl Send for IoComm {}
// SAFETY: as above; shared references only pass the handle by value to MPI calls.
unsafe impl Sync for IoComm {}

/// Storage whose reads are MPI-IO collective calls.
pub struct CollectiveStorage {
    inner: Arc<dyn Storage>,
    comm: Arc<IoComm>,
}

impl std::fmt::Debug for CollectiveStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CollectiveStorage({:?})", self.inner)
    }
}

fn mpi_error(op: &'static str, path: &Path, code: c_int) -> StorageError {
    StorageError::Io {
        op,
        path: path.to_path_buf(),
        source: std::io::Error::other(format!("MPI-IO error code {code}")),
    }
}

impl CollectiveStorage {
    /// Wraps `inner`; must be called by every process (it duplicates the world communicator,
    /// a collective call), after MPI is initialised.
    pub fn new(inner: Arc<dyn Storage>) -> CollectiveStorage {
        // SAFETY: MPI is initialised (the cluster joined MPI before the driver builds
        // storages), so RSMPI_COMM_WORLD holds the valid world handle; reading the extern static
        // copies that handle. `comm` is a valid out-pointer for MPI_Comm_dup.
        let mut comm = unsafe { ffi::RSMPI_COMM_WORLD };
        // SAFETY: as above.
        unsafe {
            ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm);
        }
        CollectiveStorage {
            inner,
            comm: Arc::new(IoComm(comm)),
        }
    }
}

impl ForwardStorage for CollectiveStorage {
    fn forward_to(&self) -> &dyn Storage {
        &*self.inner
    }
}

impl Storage for CollectiveStorage {
    fn engine(&self) -> &'static str {
        "mpiio-collective"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            alignment: 1,
            batched: false,
            io_depth: 1,
            nowait_reads: false,
            buffer_page_offset: None,
        }
    }
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let name = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            StorageError::InvalidPath {
                path: path.to_path_buf(),
                reason: "it contains a NUL byte",
            }
        })?;
        let mut fh: ffi::MPI_File = std::ptr::null_mut();
        // SAFETY: collective open on our communicator; `name` is a valid C string that lives
        // through the call, the mode is read-only, RSMPI_INFO_NULL is MPI's null info and `fh`
        // a valid out-pointer.
        let code = unsafe {
            ffi::MPI_File_open(
                self.comm.0,
                name.as_ptr(),
                ffi::MPI_MODE_RDONLY as c_int,
                ffi::RSMPI_INFO_NULL,
                &mut fh,
            )
        };
        if code != 0 {
            return Err(mpi_error("MPI_File_open", path, code));
        }
        let mut size: ffi::MPI_Offset = 0;
        // SAFETY: `fh` was just opened successfully; `size` is a valid out-pointer.
        let code = unsafe { ffi::MPI_File_get_size(fh, &mut size) };
        if code != 0 {
            // SAFETY: `fh` is open; closing it is the collective counterpart of the open.
            unsafe { ffi::MPI_File_close(&mut fh) };
            return Err(mpi_error("MPI_File_get_size", path, code));
        }
        Ok(Box::new(CollectiveRead {
            fh,
            path: path.to_path_buf(),
            len: size.max(0) as u64,
            _comm: Arc::clone(&self.comm),
        }))
    }

    dlio_storage::forward_storage!(
        create,
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );
}

/// A file opened collectively.
struct CollectiveRead {
    fh: ffi::MPI_File,
    path: PathBuf,
    len: u64,
    _comm: Arc<IoComm>,
}

// SAFETY: an MPI file handle may be used from any thread under MPI_THREAD_MULTIPLE (see
// IoComm); the handle is owned by this value and used by one thread at a time (&mut self).
unsafe impl Send for CollectiveRead {}

/// The largest count one MPI call takes (a C int).
const MAX_CALL: usize = 1 << 30;

impl ReadHandle for CollectiveRead {
    fn path(&self) -> &Path {
        &self.path
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let mut done = 0usize;
        // Requests larger than a C int are split the same way on every process.
        while done < buf.len() {
            let want = (buf.len() - done).min(MAX_CALL);
            // SAFETY: MPI_Status is a plain C struct; zeroed is a valid initial value.
            let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: collective read on an open handle into `want` bytes of `buf` starting at
            // `done` (in bounds); RSMPI_UINT8_T is the byte datatype; `status` is valid.
            let code = unsafe {
                ffi::MPI_File_read_at_all(
                    self.fh,
                    (offset + done as u64) as ffi::MPI_Offset,
                    buf[done..].as_mut_ptr() as *mut c_void,
                    want as c_int,
                    ffi::RSMPI_UINT8_T,
                    &mut status,
                )
            };
            if code != 0 {
                return Err(mpi_error("MPI_File_read_at_all", &self.path, code));
            }
            let mut got: c_int = 0;
            // SAFETY: `status` was filled by the read; `got` is a valid out-pointer.
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut got) };
            let got = got.max(0) as usize;
            done += got;
            if got < want {
                break;
            }
        }
        Ok(done)
    }
}

impl Drop for CollectiveRead {
    fn drop(&mut self) {
        // SAFETY: `fh` is open (closed only here); MPI_File_close is the collective
        // counterpart of the open, made by every process in the same order.
        unsafe {
            ffi::MPI_File_close(&mut self.fh);
        }
    }
}
