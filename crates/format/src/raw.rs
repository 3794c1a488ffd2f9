//! Reading without decoding, as MLPerf Storage's DLIO fork does ([`Semantics::Mlperf`]): the
//! npz, npy, jpeg, png and hdf5 readers of the fork read every byte of a file and keep only
//! the byte count, handing the training loop a preallocated dummy tensor. [`Undecoded`] wraps
//! such a format: generation, names and sizes are the format's own, and its reader reads the
//! whole file through the storage into one reused buffer at open (the bytes move once, from
//! the storage into that buffer) and parses nothing. Sample `j` of an `n`-sample file is the
//! `j`-th of `n` equal slices of the bytes read, so the byte totals a run reports are the
//! bytes it moved.
//!
//! With the fork's semantics a damaged file is therefore read, not refused: like the fork,
//! this reader does not look inside.

use std::path::{Path, PathBuf};

use dlio_storage::{IoBuffer, Storage};

use rustc_hash::FxHashMap;

use crate::{FileKey, FileLayout, Format, FormatError, FormatReader};

/// A format whose reader reads whole files without decoding them.
#[derive(Debug)]
pub(crate) struct Undecoded {
    pub(crate) inner: Box<dyn Format>,
}

impl Format for Undecoded {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn extension(&self) -> &'static str {
        self.inner.extension()
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut crate::DataRng,
    ) -> Result<u64, FormatError> {
        self.inner.generate(storage, path, layout, rng)
    }

    fn expected_size(&self, layout: &FileLayout) -> Option<u64> {
        self.inner.expected_size(layout)
    }

    fn check_layout(&self, layout: &FileLayout) -> Result<(), FormatError> {
        self.inner.check_layout(layout)
    }

    fn reads_whole_files_undecoded(&self) -> bool {
        true
    }

    fn reader(&self, layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(UndecodedReader {
            samples: u64::from(layout.samples.max(1)),
            open: FxHashMap::default(),
            spare: Vec::new(),
        })
    }
}

/// Closed files' buffers kept for reuse (as the decoding whole-file reader keeps them).
const SPARE_BUFFERS: usize = 4;

/// One open file: its bytes, and its path for error messages. Both allocations are recycled
/// with the state, so a per-sample open allocates nothing once the reader is warm.
#[derive(Default)]
struct OpenRaw {
    path: PathBuf,
    buffer: Option<IoBuffer>,
}

struct UndecodedReader {
    samples: u64,
    open: FxHashMap<FileKey, OpenRaw>,
    spare: Vec<OpenRaw>,
}

impl UndecodedReader {
    fn recycle(&mut self, state: OpenRaw) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(state);
        }
    }
}

impl FormatReader for UndecodedReader {
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let mut state = self
            .open
            .remove(&key)
            .or_else(|| self.spare.pop())
            .unwrap_or_default();
        if let Err(error) = crate::ranged::read_whole_file(storage, path, &mut state.buffer) {
            self.recycle(state);
            return Err(error);
        }
        state.path.as_mut_os_string().clear();
        state.path.push(path);
        self.open.insert(key, state);
        Ok(())
    }

    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        let OpenRaw { path, buffer } = self
            .open
            .get(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        let index = u64::from(index);
        if index >= self.samples {
            return Err(FormatError::SampleOutOfRange {
                path: path.clone(),
                index,
                samples: self.samples,
            });
        }
        let buffer: &[u8] = buffer.as_deref().unwrap_or_default();
        let len = buffer.len() as u64;
        let start = (len * index / self.samples) as usize;
        let end = (len * (index + 1) / self.samples) as usize;
        Ok(&buffer[start..end])
    }

    fn close(&mut self, key: FileKey) {
        if let Some(state) = self.open.remove(&key) {
            self.recycle(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use dlio_config::{Compression, ElementType, FormatKind};
    use dlio_storage::{Metered, PosixStorage};

    use super::*;
    use crate::{DataRng, format_for};

    #[test]
    fn every_byte_is_read_once_and_nothing_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = FileLayout {
            samples: 4,
            sample_dims: vec![32, 32],
            element: ElementType::Uint8,
            compression: Compression::None,
        };
        let format = Undecoded {
            inner: format_for(FormatKind::Npz).unwrap(),
        };
        let path = dir.path().join("a.npz");
        let written = format
            .generate(&storage, &path, &layout, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        let mut reader = format.reader(&layout);
        let before = storage.counters().snapshot();
        reader.open(&storage, 7, &path).unwrap();
        let mut total = 0;
        for i in 0..4 {
            total += reader.read_sample(&storage, 7, i).unwrap().len() as u64;
        }
        let moved = storage.counters().snapshot() - before;
        assert_eq!(moved.bytes_read, written);
        assert_eq!(total, written, "the samples partition the bytes read");
        assert!(matches!(
            reader.read_sample(&storage, 7, 4),
            Err(FormatError::SampleOutOfRange { samples: 4, .. })
        ));
        // Junk is read, not refused: the fork does not look inside either.
        std::fs::write(&path, b"not an npz at all").unwrap();
        reader.open(&storage, 7, &path).unwrap();
        assert_eq!(reader.read_sample(&storage, 7, 0).unwrap(), b"not ");
    }
}
