//! Small I/O helpers shared by the formats that read parts of files (indexed binary, tfrecord,
//! parquet, hdf5) and by those that encode a whole file in memory before writing it.

use std::path::{Path, PathBuf};

use dlio_storage::{Capabilities, IoBuffer, ReadHandle, Storage, StorageError, WriteHandle};

use crate::FormatError;

/// Where a format's read buffer starts: on the engine's alignment, or for a buffered engine
/// with [`Capabilities::buffer_page_offset`], that many bytes past a page boundary (the place
/// of a traced program's buffers, which sets the pace of the kernel's copy on some CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BufferPlace {
    alignment: usize,
    page_offset: Option<usize>,
}

impl BufferPlace {
    /// Where buffers for `capabilities`' engine start.
    pub(crate) fn of(capabilities: Capabilities) -> BufferPlace {
        BufferPlace {
            alignment: capabilities.alignment.max(1),
            page_offset: capabilities
                .buffer_page_offset
                .filter(|_| capabilities.alignment <= 1),
        }
    }

    /// The engine's alignment of offsets and lengths (1 for buffered engines).
    #[cfg_attr(not(feature = "hdf5"), allow(dead_code))]
    pub(crate) fn alignment(&self) -> usize {
        self.alignment
    }

    fn fits(&self, buffer: &IoBuffer) -> bool {
        match self.page_offset {
            Some(offset) => buffer.page_offset() == Some(offset),
            None => buffer.page_offset().is_none() && buffer.alignment() == self.alignment,
        }
    }

    fn new_buffer(&self) -> Result<IoBuffer, StorageError> {
        match self.page_offset {
            Some(offset) => IoBuffer::placed(offset),
            None => IoBuffer::new(self.alignment),
        }
    }
}

/// A place for an engine's alignment alone (the reads of indexes, footers and headers).
impl From<usize> for BufferPlace {
    fn from(alignment: usize) -> BufferPlace {
        BufferPlace {
            alignment: alignment.max(1),
            page_offset: None,
        }
    }
}

/// Reads every byte of `path` through `storage` into `slot`'s buffer (made, or remade for the
/// engine's alignment, when needed; grow-only otherwise) and returns it.
pub(crate) fn read_whole_file<'b>(
    storage: &dyn Storage,
    path: &Path,
    slot: &'b mut Option<IoBuffer>,
) -> Result<&'b mut IoBuffer, FormatError> {
    let mut handle = storage.open(path)?;
    let len = usize::try_from(handle.len()).map_err(|_| {
        FormatError::unsupported(
            format!(
                "{} is too large to read into memory on this machine",
                path.display()
            ),
            "use smaller files (dataset.num_samples_per_file or record_length_bytes)",
        )
    })?;
    let place = BufferPlace::of(storage.capabilities());
    if slot.as_ref().is_none_or(|b| !place.fits(b)) {
        *slot = Some(place.new_buffer()?);
    }
    let Some(buffer) = slot.as_mut() else {
        return Err(FormatError::unsupported(
            "no read buffer",
            "report this as a dlio bug",
        )); // unreachable: the buffer was just set
    };
    buffer.resize(len)?;
    handle.read_exact_at(buffer, 0)?;
    Ok(buffer)
}

/// Reads `len` bytes at `offset` of `handle` into `buffer` and returns them.
///
/// The request sent to the storage is widened to the engine's alignment (a no-op for buffered
/// engines, whose alignment is 1), so the same code works on O_DIRECT engines. The file must
/// hold all `len` bytes: a shorter file is reported as [`StorageError::Truncated`], naming the
/// file and the offset.
pub(crate) fn read_range<'b>(
    handle: &mut dyn ReadHandle,
    buffer: &'b mut Option<IoBuffer>,
    place: impl Into<BufferPlace>,
    offset: u64,
    len: usize,
) -> Result<&'b [u8], FormatError> {
    let place = place.into();
    let alignment = place.alignment;
    if buffer.as_ref().is_none_or(|b| !place.fits(b)) {
        *buffer = Some(place.new_buffer()?);
    }
    let Some(buffer) = buffer.as_mut() else {
        return Ok(&[]); // unreachable: the buffer was just set
    };
    if len == 0 {
        return Ok(&[]);
    }
    let align = alignment as u64;
    let start = offset / align * align;
    let end = offset
        .checked_add(len as u64)
        .ok_or_else(|| StorageError::Truncated {
            path: handle.path().to_path_buf(),
            offset,
            wanted: len as u64,
        })?;
    if end > handle.len() {
        return Err(StorageError::Truncated {
            path: handle.path().to_path_buf(),
            offset: handle.len().max(offset),
            wanted: end - handle.len().max(offset),
        }
        .into());
    }
    let head = (offset - start) as usize;
    if align == 1 {
        buffer.resize(len)?;
        handle.read_exact_at(buffer, offset)?;
        return Ok(&buffer[..len]);
    }
    // Aligned engines: read whole aligned blocks, clipped to the file's end only by the
    // engine (it returns a short read at EOF, which read_at reports).
    let aligned_end = end.div_ceil(align) * align;
    let span = (aligned_end - start) as usize;
    buffer.resize(span)?;
    let mut done = 0usize;
    while done < head + len {
        let n = handle.read_at(&mut buffer[done..], start + done as u64)?;
        if n == 0 {
            return Err(StorageError::Truncated {
                path: handle.path().to_path_buf(),
                offset: start + done as u64,
                wanted: (head + len - done) as u64,
            }
            .into());
        }
        done += n;
    }
    Ok(&buffer[head..head + len])
}

/// Reads a whole (small) side file, such as an index, into a vector.
pub(crate) fn read_small_file(
    storage: &dyn Storage,
    path: &Path,
    buffer: &mut Option<IoBuffer>,
) -> Result<Vec<u8>, FormatError> {
    let mut handle = storage.open(path)?;
    let len = usize::try_from(handle.len())
        .map_err(|_| FormatError::corrupt(path, 0, "the file is too large to be an index file"))?;
    let alignment = storage.capabilities().alignment;
    Ok(read_range(&mut *handle, buffer, alignment, 0, len)?.to_vec())
}

/// `path` with `suffix` appended to its file name (`a/b.bin` + `.off.idx` = `a/b.bin.off.idx`).
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// Writes `bytes` as the complete file `path` (temporary name, then commit); returns its size.
pub(crate) fn write_whole_file(
    storage: &dyn Storage,
    path: &Path,
    bytes: &[u8],
) -> Result<u64, FormatError> {
    let mut out = storage.create(path)?;
    out.write_all(bytes)?;
    Ok(out.commit()?)
}

/// A [`std::io::Write`] over a storage write handle, for encoders that want one (parquet,
/// zip). Writes are buffered into bounded chunks so the storage sees few, large appends.
pub(crate) struct HandleWriter<'a> {
    handle: &'a mut dyn WriteHandle,
    pending: Vec<u8>,
    written: u64,
}

/// Appends reach the storage in chunks of this many bytes.
const WRITER_CHUNK: usize = 1 << 20;

impl<'a> HandleWriter<'a> {
    pub(crate) fn new(handle: &'a mut dyn WriteHandle) -> HandleWriter<'a> {
        HandleWriter {
            handle,
            pending: Vec::with_capacity(WRITER_CHUNK),
            written: 0,
        }
    }

    /// Sends what is buffered to the storage.
    pub(crate) fn flush_pending(&mut self) -> Result<(), StorageError> {
        if !self.pending.is_empty() {
            self.handle.write_all(&self.pending)?;
            self.pending.clear();
        }
        Ok(())
    }
}

impl std::io::Write for HandleWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.written += buf.len() as u64;
        if self.pending.len() >= WRITER_CHUNK {
            self.flush_pending().map_err(std::io::Error::other)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.flush_pending().map_err(std::io::Error::other)
    }
}

/// The data set's list folder (`train` or `valid`) a generated file belongs to, and the data
/// root above it: `{root}/{list}/[{subfolder}/]{name}`. Subfolders are the numeric folders
/// DLIO's `num_subfolders_*` creates.
pub(crate) fn list_folder(path: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    let parent = path.parent()?;
    let is_list = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "train" || n == "valid")
    };
    let numeric = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let list_dir = if !is_list(parent) && numeric(parent) && parent.parent().is_some_and(is_list) {
        parent.parent()?
    } else {
        parent
    };
    Some((list_dir.parent()?, list_dir.file_name()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_folder_sees_through_numeric_subfolders() {
        let (root, list) = list_folder(Path::new("/d/train/img_1_of_2.tfrecord")).unwrap();
        assert_eq!((root, list.to_str().unwrap()), (Path::new("/d"), "train"));
        let (root, list) = list_folder(Path::new("/d/valid/07/img_1_of_2.tfrecord")).unwrap();
        assert_eq!((root, list.to_str().unwrap()), (Path::new("/d"), "valid"));
        // A file outside a train/valid folder: its own folder is the list.
        let (root, list) = list_folder(Path::new("/x/y/file.tfrecord")).unwrap();
        assert_eq!((root, list.to_str().unwrap()), (Path::new("/x"), "y"));
    }

    #[test]
    fn suffix_is_appended_to_the_whole_name() {
        assert_eq!(
            with_suffix(Path::new("a/b.indexed_binary"), ".off.idx"),
            PathBuf::from("a/b.indexed_binary.off.idx")
        );
    }
}
