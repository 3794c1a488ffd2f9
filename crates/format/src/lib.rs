//! `dlio-format`: how samples are laid out in files.
//!
//! Each format knows how to **generate** a file (write `FileLayout::samples` samples of random,
//! unique bytes) and how to **read** samples back with the same I/O pattern as the framework
//! reader DLIO drives. Both always go through a [`dlio_storage::Storage`]; a format never
//! opens a file itself.
//!
//! Reading follows DLIO's `FormatReader` life cycle: `open` does what the framework does when
//! it opens a file (for npz/npy: read and parse the whole file), `read_sample` hands out one
//! sample, `close` forgets the file. Each loader thread owns one [`FormatReader`] for the whole
//! run, so buffers are reused and steady state allocates nothing per sample.

#![deny(missing_docs)]

use std::path::Path;

use dlio_config::{Compression, ElementType};
use dlio_storage::Storage;

/// Identifies an open file inside one [`FormatReader`] (the file's index in the dataset).
pub type FileKey = u64;

/// What one generated file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct FileLayout {
    /// Samples (records) in the file: `dataset.num_samples_per_file`.
    pub samples: u32,
    /// Shape of one sample, e.g. `[d1, d2]` or `record_dims`.
    pub sample_dims: Vec<usize>,
    /// Element type of the sample array.
    pub element: ElementType,
    /// `dataset.compression`, for formats that support it.
    pub compression: Compression,
}

impl FileLayout {
    /// Bytes of one sample's array data.
    pub fn sample_bytes(&self) -> u64 {
        self.sample_dims.iter().product::<usize>() as u64 * self.element.size() as u64
    }
}

/// A data format: one implementation per file in this crate.
pub trait Format: Send + Sync + std::fmt::Debug {
    /// `dataset.format` spelling.
    fn name(&self) -> &'static str;

    /// File name extension (without the dot) of data files.
    fn extension(&self) -> &'static str;

    /// Writes one complete file at `path` through `storage` (temporary name, then commit).
    /// `rng` provides the sample bytes. Returns the bytes the file holds.
    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError>;

    /// A reader for one loader thread.
    fn reader(&self) -> Box<dyn FormatReader>;
}

/// Reads samples of one format; owned by one loader thread.
pub trait FormatReader: Send {
    /// Opens (and for whole-file formats reads and parses) the file at `path` as `key`.
    fn open(&mut self, storage: &dyn Storage, key: FileKey, path: &Path)
    -> Result<(), FormatError>;

    /// Returns sample `index` of the open file `key`. The slice is valid until the next call.
    fn read_sample(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError>;

    /// Forgets file `key` and releases what it holds (buffers are kept for reuse).
    fn close(&mut self, key: FileKey);
}
