//! The `posix` engine: buffered I/O through the kernel page cache, as Python's `open` does.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::engine::{EngineInfo, EngineKind, OdirectUse};
use crate::{Capabilities, DirEntry, ReadHandle, Storage, StorageError, WriteHandle};

/// Size of the user-space write buffer of a [`WriteHandle`]: large enough that the formats'
/// small header writes do not each become a system call.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// `posix`: buffered `pread`/`write`.
pub(crate) const ENGINE: EngineInfo = EngineInfo {
    kind: EngineKind::Posix,
    reads: "pread through the page cache",
    writes: "buffered writes to a temporary name, rename at commit",
    odirect: OdirectUse::Selects(EngineKind::Direct),
    open: |_, _, _| Ok(std::sync::Arc::new(PosixStorage::new())),
};

/// Buffered POSIX file I/O: `pread` for reads, buffered appends to a temporary sibling file
/// and an atomic `rename` for writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct PosixStorage;

impl PosixStorage {
    /// The engine.
    pub fn new() -> PosixStorage {
        PosixStorage
    }
}

/// Longest file name most Linux file systems take, in bytes.
const NAME_MAX: usize = 255;

/// `dir/.name.partial` for `dir/name`: hidden (so DLIO's lister, which filters on the
/// extension, never sees it) and in the same directory (so `rename` is atomic). A name too long
/// for the 9 added bytes gets `dir/.dlio-HASH.partial` instead, HASH a digest of the name, so
/// every final name that fits the file system can be written.
pub(crate) fn partial_path_of(path: &Path) -> Result<PathBuf, StorageError> {
    use std::os::unix::ffi::OsStrExt;
    let name = path.file_name().ok_or(StorageError::InvalidPath {
        path: path.to_path_buf(),
        reason: "the path has no file name",
    })?;
    if name.len() + 9 > NAME_MAX {
        let digest = twox_hash::XxHash3_64::oneshot(name.as_bytes());
        return Ok(path.with_file_name(format!(".dlio-{digest:016x}.partial")));
    }
    let mut partial = OsString::with_capacity(name.len() + 9);
    partial.push(".");
    partial.push(name);
    partial.push(".partial");
    Ok(path.with_file_name(partial))
}

/// Opens `path` for reading without blocking on what is not a regular file: the open is
/// non-blocking, so a FIFO in place of a data file cannot hang the run in `open()` (waiting
/// for a writer that never comes); [`regular_file_len`] then refuses it. The engines open
/// every file they read through this (or `open_direct`, which adds the same flag).
pub(crate) fn open_for_reading(path: &Path) -> Result<File, StorageError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| StorageError::io("open", path, e))
}

/// The length of `file`, opened at `path`, after checking that it is a regular file (a
/// directory, a FIFO or a device opens, but is no sample file). The non-blocking flag of the
/// open stays: Linux ignores it for regular files (open(2): "this flag has no effect for
/// regular files and block devices"), so clearing it would cost two system calls per open
/// for nothing.
pub(crate) fn regular_file_len(file: &File, path: &Path) -> Result<u64, StorageError> {
    let metadata = file
        .metadata()
        .map_err(|e| StorageError::io("stat", path, e))?;
    if !metadata.is_file() {
        return Err(StorageError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    Ok(metadata.len())
}

impl Storage for PosixStorage {
    fn engine(&self) -> &'static str {
        "posix"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            alignment: 1,
            batched: false,
            io_depth: 1,
            nowait_reads: true,
            buffer_page_offset: None,
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let file = open_for_reading(path)?;
        let len = regular_file_len(&file, path)?;
        Ok(Box::new(PosixRead {
            file,
            path: path.to_path_buf(),
            len,
            nowait_refused: false,
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let partial = partial_path_of(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.create_dir_all(parent)?;
        }
        // `File::create` truncates a partial file left by a crash.
        let file = File::create(&partial)
            .map_err(|e| StorageError::io("create temporary file", &partial, e))?;
        Ok(Box::new(PosixWrite {
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
            path: path.to_path_buf(),
            partial,
            written: 0,
            committed: false,
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, StorageError> {
        let mut entries = Vec::new();
        self.list_each(dir, &mut |entry| entries.push(entry))?;
        // One directory: the entries share their parent, so comparing the raw bytes gives the
        // same order as comparing paths component by component, far faster for big folders.
        entries.sort_unstable_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
        Ok(entries)
    }

    fn list_each(&self, dir: &Path, each: &mut dyn FnMut(DirEntry)) -> Result<(), StorageError> {
        for entry in fs::read_dir(dir).map_err(|e| StorageError::io("list", dir, e))? {
            let entry = entry.map_err(|e| StorageError::io("list", dir, e))?;
            let path = entry.path();
            // The kind comes with the directory entry on most file systems (d_type), so a
            // listing costs no stat per entry; links are followed, as Python's
            // `os.path.isdir` does (a dangling one is listed as a file).
            let kind = entry
                .file_type()
                .map_err(|e| StorageError::io("list", dir, e))?;
            let is_dir = if kind.is_symlink() {
                match fs::metadata(&path) {
                    Ok(m) => m.is_dir(),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                    Err(e) => return Err(StorageError::io("stat", &path, e)),
                }
            } else {
                kind.is_dir()
            };
            each(DirEntry {
                path,
                is_dir,
                len: None,
            });
        }
        Ok(())
    }

    fn size(&self, path: &Path) -> Result<Option<u64>, StorageError> {
        match fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Err(StorageError::NotAFile {
                path: path.to_path_buf(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageError::io("stat", path, e)),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        fs::create_dir_all(dir).map_err(|e| StorageError::Io {
            op: "create directory",
            path: dir.to_path_buf(),
            source: e,
        })
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        fs::remove_file(path).map_err(|e| StorageError::io("remove", path, e))
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), StorageError> {
        fs::remove_dir_all(dir).map_err(|e| StorageError::io("remove directory", dir, e))
    }

    fn partial_path(&self, path: &Path) -> Option<PathBuf> {
        partial_path_of(path).ok()
    }
}

/// An open file for `pread`.
struct PosixRead {
    file: File,
    path: PathBuf,
    len: u64,
    /// The file system refused `RWF_NOWAIT` (EOPNOTSUPP: it cannot tell whether a read would
    /// wait); every later non-blocking read answers "would wait" without asking again.
    nowait_refused: bool,
}

impl ReadHandle for PosixRead {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        loop {
            match self.file.read_at(buf, offset) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(StorageError::io("read", &self.path, e)),
            }
        }
    }

    /// `preadv2(RWF_NOWAIT)`: the kernel copies what the page cache holds and answers EAGAIN
    /// where it would wait for the device. std has no such call, hence `libc`.
    fn read_at_nowait(
        &mut self,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<Option<usize>, StorageError> {
        if self.nowait_refused {
            return Ok(None);
        }
        if buf.is_empty() {
            return Ok(Some(0));
        }
        let Ok(offset) = libc::off_t::try_from(offset) else {
            return Ok(Some(0)); // past any file's end
        };
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        loop {
            // SAFETY: `iov` describes `buf`, which is valid for writes of `buf.len()` bytes
            // and exclusively borrowed for the whole call; the kernel writes at most that many
            // bytes into it and keeps no reference after returning. The descriptor is
            // `self.file`'s, open for the call's duration.
            let n =
                unsafe { libc::preadv2(self.file.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
                    self.nowait_refused = true;
                    return Ok(None);
                }
                _ => return Err(StorageError::io("read", &self.path, e)),
            }
        }
    }
}

/// A file being written under its temporary name.
struct PosixWrite {
    out: BufWriter<File>,
    path: PathBuf,
    partial: PathBuf,
    written: u64,
    /// Set once the file is published; until then `Drop` removes the partial file.
    committed: bool,
}

impl WriteHandle for PosixWrite {
    fn path(&self) -> &Path {
        &self.path
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        if let Err(e) = self.out.write_all(data) {
            return Err(StorageError::io("write", &self.partial, e));
        }
        self.written += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        let result = self
            .out
            .flush()
            .and_then(|()| self.out.get_ref().sync_all());
        result.map_err(|e| StorageError::io("sync", &self.partial, e))
    }

    fn commit(mut self: Box<Self>) -> Result<u64, StorageError> {
        // On any error `self` drops uncommitted, which removes the partial file.
        self.out
            .flush()
            .map_err(|e| StorageError::io("write", &self.partial, e))?;
        fs::rename(&self.partial, &self.path).map_err(|e| StorageError::Io {
            op: "publish (rename into place)",
            path: self.path.clone(),
            source: e,
        })?;
        self.committed = true;
        Ok(self.written)
    }
}

impl Drop for PosixWrite {
    fn drop(&mut self) {
        if !self.committed {
            // Unlink first: whatever the `BufWriter` still flushes when it drops goes to an
            // inode that no name points to any more and is freed on close.
            let _ = fs::remove_file(&self.partial);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_needs_no_wait_reads_what_a_read_would() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let storage = PosixStorage::new();
        assert!(storage.capabilities().nowait_reads);
        let mut handle = storage.open(&path).unwrap();
        let mut buf = vec![0u8; 30_000];
        // Just written, so in the page cache (a file system without RWF_NOWAIT answers None).
        let Some(n) = handle.read_at_nowait(&mut buf, 50_000).unwrap() else {
            eprintln!("this file system cannot read without waiting");
            return;
        };
        assert!(n > 0 && n <= buf.len());
        assert_eq!(buf[..n], bytes[50_000..50_000 + n]);
        assert_eq!(handle.read_at_nowait(&mut [], 0).unwrap(), Some(0));
        assert!(matches!(
            handle.read_at_nowait(&mut buf, 100_000).unwrap(),
            Some(0) | None
        ));
    }

    #[test]
    fn partial_name_is_hidden_sibling() {
        assert_eq!(
            partial_path_of(Path::new("/d/train/img_1_of_2.npz")).unwrap(),
            Path::new("/d/train/.img_1_of_2.npz.partial")
        );
        assert_eq!(
            partial_path_of(Path::new("a.npy")).unwrap(),
            Path::new(".a.npy.partial")
        );
        assert!(partial_path_of(Path::new("/")).is_err());
    }
}
