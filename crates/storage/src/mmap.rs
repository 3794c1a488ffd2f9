//! The `mmap` engine: files are mapped read-only and reads copy out of the mapping, so every
//! byte read touches its page and the I/O really happens, through page faults (the path
//! LMDB-based loaders and DALI's readers take). Writes, listing and removal are the `posix`
//! engine's: mapping a file to write it would measure nothing a data loader does.
//!
//! A mapped file that another process truncates while it is mapped makes a read of the lost
//! pages raise SIGBUS. Each read first checks the file's current size (one `fstat`), so a
//! file truncated before the read is an error naming it; for the microseconds between that
//! check and the copy, a SIGBUS handler ends the process with a message that says what
//! happened instead of the bare signal.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::engine::{EngineInfo, EngineKind, OdirectUse};
use crate::posix::{open_for_reading, regular_file_len};
use crate::{
    Capabilities, ForwardStorage, PosixStorage, ReadHandle, Storage, StorageError, WriteHandle,
};

/// `mmap`: reads copy out of a read-only mapping.
pub(crate) const ENGINE: EngineInfo = EngineInfo {
    kind: EngineKind::Mmap,
    reads: "copy out of a read-only shared mapping (page faults do the I/O)",
    writes: "as posix",
    odirect: OdirectUse::Refused,
    open: |_, _, _| Ok(std::sync::Arc::new(MmapStorage::new())),
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
            nowait_reads: false,
            buffer_page_offset: None,
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let file = open_for_reading(path)?;
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
        install_sigbus_message();
        Ok(Box::new(MmapRead {
            map,
            map_len,
            file,
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

/// A mapped file, and its descriptor, kept to check the file's size before each read.
struct MmapRead {
    map: Option<NonNull<u8>>,
    map_len: usize,
    file: std::fs::File,
    path: PathBuf,
    len: u64,
}

/// Installs, once per process, a SIGBUS handler that prints why a mapped read failed and
/// exits with status 1 (see the module docs).
fn install_sigbus_message() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        extern "C" fn on_sigbus(_signal: libc::c_int) {
            const MESSAGE: &[u8] = b"error: io_engine mmap: a mapped data file was truncated \
                while it was read (SIGBUS); data files must not change during a run. Regenerate \
                the data set and run again.\n";
            // SAFETY: write(2) and _exit(2) are async-signal-safe; MESSAGE is a static buffer.
            unsafe {
                libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
                libc::_exit(1);
            }
        }
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler is
        // an `extern "C"` function that only calls async-signal-safe functions, and
        // `sigaction` copies the struct before returning.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    });
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
        let now = self
            .file
            .metadata()
            .map_err(|e| StorageError::io("stat", &self.path, e))?
            .len();
        if now < (start + n) as u64 {
            return Err(StorageError::Io {
                op: "read the mapping of",
                path: self.path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "the file shrank from {} to {now} bytes while mapped (changed during the \
                         run); regenerate the data set",
                        self.len
                    ),
                ),
            });
        }
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
