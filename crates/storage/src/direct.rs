//! The `direct` engine: O_DIRECT reads and writes that bypass the page cache, as fio's
//! `direct=1` and DLIO's `reader.odirect` do.
//!
//! O_DIRECT needs the buffer address, the file offset and the length to be multiples of the
//! device's logical block size. Callers that allocate with [`crate::IoBuffer`] and the engine's
//! [`Capabilities::alignment`] (as the whole-file formats do) get their bytes straight from
//! the device; any other request (an unaligned sample of a record format, the tail of a
//! file whose size is not a multiple of the block) goes through an aligned bounce buffer
//! covering the enclosing aligned range. Writes are staged in an aligned buffer, written in
//! whole blocks, and the padded last block is cut back to the real length with `ftruncate`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::engine::{EngineInfo, EngineKind, OdirectUse};
use crate::posix::{partial_path_of, regular_file_len};
use crate::{
    Capabilities, ForwardStorage, IoBuffer, PosixStorage, ReadHandle, Storage, StorageError,
    WriteHandle,
};

/// Alignment of buffers, offsets and lengths: the largest logical block size of common
/// devices (4Kn disks, NVMe); a multiple of every smaller one.
pub const DIRECT_ALIGNMENT: usize = 4096;

/// Largest bounce read: bounded so that an unaligned multi-gigabyte read does not double the
/// memory it needs (`read_exact_at` loops over it).
const BOUNCE_BYTES: usize = 4 << 20;

/// Size of the staging buffer of a writer (a multiple of [`DIRECT_ALIGNMENT`]).
const WRITE_BLOCK_BYTES: usize = 4 << 20;

/// `direct`: O_DIRECT reads and writes.
pub(crate) const ENGINE: EngineInfo = EngineInfo {
    kind: EngineKind::Direct,
    reads: "O_DIRECT pread into 4096-aligned buffers (unaligned parts through a bounce buffer)",
    writes: "O_DIRECT writes of whole 4096-byte blocks, last block truncated to size",
    odirect: OdirectUse::Always,
    open: |_, _, _| Ok(std::sync::Arc::new(DirectStorage::new())),
};

/// O_DIRECT file I/O; listing, sizes and removal as [`PosixStorage`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectStorage;

impl DirectStorage {
    /// The engine.
    pub fn new() -> DirectStorage {
        DirectStorage
    }
}

/// Opens `path` with O_DIRECT, naming the path and the fix when the file system refuses it.
/// Non-blocking, so a FIFO cannot hang the open (see `posix::open_for_reading`); regular
/// files ignore the flag.
pub(crate) fn open_direct(path: &Path, options: &mut OpenOptions) -> Result<File, StorageError> {
    options
        .custom_flags(libc::O_DIRECT | libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| direct_error("open", path, error))
}

/// EINVAL from an O_DIRECT call means the file system (or this request) does not support it.
fn direct_error(op: &'static str, path: &Path, error: io::Error) -> StorageError {
    if error.raw_os_error() == Some(libc::EINVAL) {
        StorageError::DirectIoUnsupported {
            path: path.to_path_buf(),
            source: error,
        }
    } else {
        StorageError::io(op, path, error)
    }
}

fn is_aligned(value: usize) -> bool {
    value.is_multiple_of(DIRECT_ALIGNMENT)
}

/// `pread`, retried on EINTR.
pub(crate) fn pread(
    file: &File,
    path: &Path,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, StorageError> {
    loop {
        match file.read_at(buf, offset) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(direct_error("read", path, e)),
        }
    }
}

/// True when `buf` at `offset` can be handed to an O_DIRECT read as it is.
pub(crate) fn request_is_aligned(buf: &[u8], offset: u64) -> bool {
    parts_are_aligned(buf.as_ptr() as usize, buf.len(), offset)
}

/// True when `len` bytes at `offset` into memory at `address` can be handed to an O_DIRECT
/// read as they are.
pub(crate) fn parts_are_aligned(address: usize, len: usize, offset: u64) -> bool {
    is_aligned(address) && offset.is_multiple_of(DIRECT_ALIGNMENT as u64) && is_aligned(len)
}

/// One O_DIRECT read of up to `buf.len()` bytes at `offset`: aligned requests (or their
/// aligned prefix) go straight to the device, the rest through `bounce`.
pub(crate) fn direct_read_at(
    file: &File,
    path: &Path,
    bounce: &mut IoBuffer,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, StorageError> {
    if buf.is_empty() {
        return Ok(0);
    }
    if is_aligned(buf.as_ptr() as usize) && offset.is_multiple_of(DIRECT_ALIGNMENT as u64) {
        let direct = buf.len() - buf.len() % DIRECT_ALIGNMENT;
        if direct > 0 {
            return pread(file, path, &mut buf[..direct], offset);
        }
    }
    let head = (offset % DIRECT_ALIGNMENT as u64) as usize;
    let start = offset - head as u64;
    let span = (head + buf.len())
        .div_ceil(DIRECT_ALIGNMENT)
        .saturating_mul(DIRECT_ALIGNMENT)
        .min(BOUNCE_BYTES);
    bounce.resize(span)?;
    let n = pread(file, path, bounce, start)?;
    let available = n.saturating_sub(head).min(buf.len());
    buf[..available].copy_from_slice(&bounce[head..head + available]);
    Ok(available)
}

impl ForwardStorage for DirectStorage {
    /// File-system chores (listing, sizes, directories, removal) are POSIX calls.
    fn forward_to(&self) -> &dyn Storage {
        &PosixStorage
    }
}

impl Storage for DirectStorage {
    fn engine(&self) -> &'static str {
        "direct"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            alignment: DIRECT_ALIGNMENT,
            batched: false,
            io_depth: 1,
            nowait_reads: false,
            buffer_page_offset: None,
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let file = open_direct(path, OpenOptions::new().read(true))?;
        let len = regular_file_len(&file, path)?;
        Ok(Box::new(DirectRead {
            file,
            path: path.to_path_buf(),
            len,
            bounce: IoBuffer::new(DIRECT_ALIGNMENT)?,
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let partial = partial_path_of(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        let file = open_direct(
            &partial,
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o644),
        )?;
        Ok(Box::new(DirectWrite {
            file,
            path: path.to_path_buf(),
            partial,
            block: IoBuffer::zeroed(WRITE_BLOCK_BYTES, DIRECT_ALIGNMENT)?,
            filled: 0,
            flushed: 0,
            committed: false,
        }))
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

struct DirectRead {
    file: File,
    path: PathBuf,
    len: u64,
    bounce: IoBuffer,
}

impl ReadHandle for DirectRead {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        direct_read_at(&self.file, &self.path, &mut self.bounce, buf, offset)
    }
}

/// A file written with O_DIRECT under its temporary name.
struct DirectWrite {
    file: File,
    path: PathBuf,
    partial: PathBuf,
    /// Staging buffer, always `WRITE_BLOCK_BYTES` long; `block[..filled]` is pending.
    block: IoBuffer,
    filled: usize,
    /// Bytes already written to the file (a multiple of the alignment).
    flushed: u64,
    committed: bool,
}

impl DirectWrite {
    fn write_block(&mut self, len: usize) -> Result<(), StorageError> {
        let mut done = 0;
        while done < len {
            match self
                .file
                .write_at(&self.block[done..len], self.flushed + done as u64)
            {
                Ok(0) => {
                    return Err(StorageError::io(
                        "write",
                        &self.partial,
                        io::Error::from(io::ErrorKind::WriteZero),
                    ));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(direct_error("write", &self.partial, e)),
            }
        }
        Ok(())
    }

    /// Writes the pending tail padded with zeros to a whole block and cuts the file back to
    /// its real length. The tail stays staged: later appends rewrite that block.
    fn write_tail(&mut self) -> Result<u64, StorageError> {
        let real = self.flushed + self.filled as u64;
        if self.filled > 0 {
            let padded = self.filled.div_ceil(DIRECT_ALIGNMENT) * DIRECT_ALIGNMENT;
            self.block[self.filled..padded].fill(0);
            self.write_block(padded)?;
        }
        self.file
            .set_len(real)
            .map_err(|e| StorageError::io("truncate", &self.partial, e))?;
        Ok(real)
    }
}

impl WriteHandle for DirectWrite {
    fn path(&self) -> &Path {
        &self.path
    }

    fn write_all(&mut self, mut data: &[u8]) -> Result<(), StorageError> {
        while !data.is_empty() {
            let take = data.len().min(WRITE_BLOCK_BYTES - self.filled);
            self.block[self.filled..self.filled + take].copy_from_slice(&data[..take]);
            self.filled += take;
            data = &data[take..];
            if self.filled == WRITE_BLOCK_BYTES {
                self.write_block(WRITE_BLOCK_BYTES)?;
                self.flushed += WRITE_BLOCK_BYTES as u64;
                self.filled = 0;
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.write_tail()?;
        self.file
            .sync_all()
            .map_err(|e| StorageError::io("sync", &self.partial, e))
    }

    fn commit(mut self: Box<Self>) -> Result<u64, StorageError> {
        let written = self.write_tail()?;
        std::fs::rename(&self.partial, &self.path).map_err(|e| StorageError::Io {
            op: "publish (rename into place)",
            path: self.path.clone(),
            source: e,
        })?;
        self.committed = true;
        Ok(written)
    }
}

impl Drop for DirectWrite {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}
