//! The `mmap` engine: files are mapped read-only and reads copy out of the mapping, so every
//! byte read touches its page and the I/O really happens, through page faults (the path
//! LMDB-based loaders and DALI's readers take). Writes, listing and removal are the `posix`
//! engine's: mapping a file to write it would measure nothing a data loader does.
//!
//! A mapped file that another process truncates while it is mapped makes the next read of
//! the lost pages raise SIGBUS; dataset files are not modified during a run.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::posix::regular_file_len;
use crate::{
    Capabilities, ForwardStorage, PosixStorage, ReadHandle, Storage, StorageError, WriteHandle,
};

/// Memory-mapped reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct MmapStorage;

impl MmapStorage {
    /// The engine.
    pub fn new() -> MmapStorage {
        MmapStorage
    }
}

impl ForwardStorage for MmapStorage {
    /// File-system chores (listing, sizes, directories, removal) are POSIX calls.
    fn forward_to(&self) -> &dyn Storage {
        &PosixStorage
    }
}

impl Storage for MmapStorage {
    fn engine(&self) -> &'static str {
        "mmap"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            alignment: 1,
            batched: false,
            io_depth: 1,
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let file = File::open(path).map_err(|e| StorageError::io("open", path, e))?;
        let len = regular_file_len(&file, path)?;
        let map_len = usize::try_from(len).map_err(|_| StorageError::Io {
            op: "map",
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "the file is larger than the address space",
            ),
        })?;
        let map = if map_len == 0 {
            None // mmap refuses empty mappings; there is nothing to read anyway.
        } else {
            // SAFETY: a fresh read-only shared mapping of a descriptor we own; the kernel
            // chooses the address, so no existing memory is affected. The result is checked
            // against MAP_FAILED below.
            let address = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if address == libc::MAP_FAILED {
                return Err(StorageError::io(
                    "map",
                    path,
                    std::io::Error::last_os_error(),
                ));
            }
            NonNull::new(address.cast::<u8>())
        };
        Ok(Box::new(MmapRead {
            map,
            map_len,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        PosixStorage.create(path)
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

/// A mapped file. The mapping outlives the descriptor (closed at open), as POSIX allows.
struct MmapRead {
    map: Option<NonNull<u8>>,
    map_len: usize,
    path: PathBuf,
    len: u64,
}

// SAFETY: the mapping is owned by this handle alone (like a `Box<[u8]>`) and only read;
// moving the handle to another thread moves that ownership.
unsafe impl Send for MmapRead {}

impl ReadHandle for MmapRead {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let Some(map) = self.map else {
            return Ok(0);
        };
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        if start >= self.map_len {
            return Ok(0);
        }
        let n = buf.len().min(self.map_len - start);
        // SAFETY: `start + n <= map_len`, so the source lies inside the live mapping; `buf`
        // is a distinct Rust allocation, so the ranges do not overlap. Copying through raw
        // pointers (never a `&[u8]` of the mapping) keeps Rust's aliasing rules out of
        // memory the kernel owns.
        unsafe {
            std::ptr::copy_nonoverlapping(map.as_ptr().add(start), buf.as_mut_ptr(), n);
        }
        Ok(n)
    }
}

impl Drop for MmapRead {
    fn drop(&mut self) {
        if let Some(map) = self.map {
            // SAFETY: `map` and `map_len` are exactly what `mmap` returned and was given; the
            // mapping is unmapped once, here, and no pointer into it survives the handle.
            unsafe {
                libc::munmap(map.as_ptr().cast(), self.map_len);
            }
        }
    }
}
