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
//!
//! The pieces:
//! - [`Format`] (one per `dataset.format`, from [`format_for`]) generates files and makes
//!   readers; each format's file declares a [`FormatDescriptor`] (its extensions, magic bytes,
//!   decode policy, config checks and constructor), and [`FORMATS`] lists them, one row each.
//! - [`FormatReader`] serves samples; it may hold several files open at once, keyed by
//!   [`FileKey`], because `read_type: memory` keeps files open across samples.
//! - [`DataRng`] produces each file's bytes: unique per file, identical for the same seed.
//! - [`generate`] drives generation of a whole dataset with a thread pool, resumable and
//!   cancellable.
//! - [`FormatError`] is the crate's one error type.
//!
//! Generation streams: a file is written in bounded chunks straight into the storage's
//! [`WriteHandle`](dlio_storage::WriteHandle), never assembled in memory, because files can be
//! gigabytes.
//!
//! ```
//! use dlio_config::{Compression, ElementType, FormatKind};
//! use dlio_format::{DataRng, FileLayout, format_for};
//! use dlio_storage::PosixStorage;
//!
//! # fn main() -> Result<(), dlio_format::FormatError> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let storage = PosixStorage::new();
//! let npz = format_for(FormatKind::Npz)?;
//! let layout = FileLayout {
//!     samples: 4,
//!     sample_dims: vec![8, 8],
//!     element: ElementType::Uint8,
//!     compression: Compression::None,
//!     fixed_size: false,
//! };
//! let path = dir.path().join("img_0_of_1.npz");
//! let bytes = npz.generate(&storage, &path, &layout, &mut DataRng::for_file(7, 0, 0))?;
//! assert_eq!(Some(bytes), npz.expected_size(&layout));
//!
//! let mut reader = npz.reader(&layout);
//! reader.open(&storage, 0, &path)?;
//! assert_eq!(reader.read_sample(&storage, 0, 3)?.len(), 64);
//! reader.close(0);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod arrow;
mod columnar;
mod csv;
mod descriptor;
mod error;
mod generate;
#[cfg(feature = "hdf5")]
mod hdf5;
mod image;
mod indexed_binary;
mod jpeg;
mod npy;
mod npz;
mod parquet;
mod parquet_columns;
mod ranged;
mod raw;
mod rng;
mod row_groups;
mod synthetic;
mod tfrecord;
mod whole_file;

pub use descriptor::{
    BuildFormat, CheckDataset, FORMATS, FormatDescriptor, ReadSettings, built_in_formats,
    check_dataset, descriptor, format_by_extension, format_by_magic, format_names, format_with,
    register_format_names, sample_element,
};
pub use error::FormatError;
pub use generate::{
    GenerationFile, GenerationJob, GenerationProgress, GenerationReport, MANIFEST_NAME,
    dataset_fingerprint, generate, read_manifest, remove_unverifiable, write_manifest,
};
pub use image::generated_image_bytes;
pub use parquet_columns::{ParquetLayout, parquet_layout};
pub use raw::{CHUNK_BYTES, WHOLE_READ_MAX_BYTES};
pub use rng::DataRng;
pub use tfrecord::{
    BytesList, DEFAULT_TRANSFER_SIZE, Example, Feature, FeatureKind, Features, FloatList,
    Int64List, NextRecord, RecordStream, StreamBuffers, TakeRecord,
    decode_image as decode_tfrecord_image, find_image as find_tfrecord_image,
    index_path as tfrecord_index_path, masked_crc32c,
};

use std::path::Path;

use dlio_config::{Compression, ElementType, FormatKind, Semantics};
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
    /// Every sample takes `sample_dims`' size, even in a format that draws each sample's size
    /// from `record_length_bytes_distribution` (`record_length_bytes_per: sample`): the
    /// evaluation files when `record_length_bytes_eval` gives their samples a size of their own.
    pub fixed_size: bool,
}

impl FileLayout {
    /// Bytes of one sample's array data; `u64::MAX` when the dims multiply past it
    /// (validation refuses such dims before any layout is built).
    pub fn sample_bytes(&self) -> u64 {
        self.sample_dims
            .iter()
            .try_fold(self.element.size() as u64, |bytes, &d| {
                bytes.checked_mul(d as u64)
            })
            .unwrap_or(u64::MAX)
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

    /// Refuses a layout the format cannot write (a compression it does not have), before any
    /// file is written or read: the run checks the data set's layout up front so that a bad
    /// setting is one clear error, not one per file mid-generation.
    fn check_layout(&self, layout: &FileLayout) -> Result<(), FormatError> {
        let _ = layout;
        Ok(())
    }

    /// The size a complete file of `layout` has, when the format can tell without writing
    /// it (the generator regenerates files of any other size); `None` when it depends on the
    /// data (compression) or the format does not know.
    fn expected_size(&self, layout: &FileLayout) -> Option<u64> {
        let _ = layout;
        None
    }

    /// A reader for one loader thread. `layout` is the dataset's nominal layout: formats whose
    /// files describe themselves (npz, npy) ignore it; `synthetic`, which reads nothing, hands
    /// out samples of its size.
    fn reader(&self, layout: &FileLayout) -> Box<dyn FormatReader>;

    /// Readers for the `threads` reader threads of one loader (one rank). A format whose
    /// samples share a unit larger than a sample (parquet's row groups) may let them share
    /// what they fetched, so a unit is read once whichever threads need it. Default:
    /// independent readers.
    fn readers(&self, layout: &FileLayout, threads: usize) -> Vec<Box<dyn FormatReader>> {
        (0..threads).map(|_| self.reader(layout)).collect()
    }

    /// Whether its reader reads every byte of a file and decodes none of them (MLPerf
    /// Storage's readers), so that a loader may read the files itself with background
    /// whole-file reads and count their bytes. Default false.
    fn reads_whole_files_undecoded(&self) -> bool {
        false
    }

    /// Whether DLIO's own reader of the format opens (maps) each file once and keeps it for
    /// every later sample whatever `read_type` says, so that a loader should too rather than
    /// open and close it per sample (the fork's `mmap_indexed_binary` maps its files when the
    /// reader starts). Default false.
    fn keeps_files_open(&self) -> bool {
        false
    }
}

/// True when this build reads and writes HDF5 (the `hdf5` cargo feature, which needs the HDF5
/// C library at build time).
pub const HDF5_AVAILABLE: bool = cfg!(feature = "hdf5");

/// The format for `dataset.format` with every format setting at its default, or
/// [`FormatError::UnsupportedFormat`] for formats this build lacks. Runs use
/// [`format_from_config`], which also applies the `dataset` section's format settings.
pub fn format_for(kind: FormatKind) -> Result<Box<dyn Format>, FormatError> {
    format_from_config(&dlio_config::DatasetConfig {
        format: kind,
        ..dlio_config::DatasetConfig::default()
    })
}

/// The format `dataset` describes, with its settings (csv's compression, which also names the
/// files: `.csv.gz`; parquet's row groups and codec; hdf5's chunks, max shape, datasets per
/// record and gzip level; indexed binary's generation buffer), decoding everything: what
/// generation uses. Its descriptor in [`FORMATS`] builds it.
pub fn format_from_config(
    dataset: &dlio_config::DatasetConfig,
) -> Result<Box<dyn Format>, FormatError> {
    format_with(dataset, ReadSettings::FULL)
}

/// The format a run reads with under `semantics`: with MLPerf Storage's fork
/// ([`Semantics::Mlperf`], the default), the formats whose descriptor says
/// [`FormatDescriptor::read_as_bytes_by_the_fork`] (npz, npy, jpeg, png, hdf5) are read whole and
/// not decoded, as the fork's readers do; with upstream DLIO's ([`Semantics::Upstream`]) they
/// are decoded as `np.load`, PIL and h5py do. TFRecord `Example`s are decoded under upstream's
/// and found in place under the fork's; `check_tfrecord_crc` says whether record data CRCs are
/// checked. Other formats read the same either way.
pub fn format_for_run(
    dataset: &dlio_config::DatasetConfig,
    semantics: Semantics,
    check_tfrecord_crc: bool,
) -> Result<Box<dyn Format>, FormatError> {
    format_with(
        dataset,
        ReadSettings::for_run(semantics, check_tfrecord_crc),
    )
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

    /// Reads samples `first .. first + count` of the open file `key`, consecutive samples of
    /// one file (as a plan without a sample shuffle hands them), and returns the bytes they
    /// hold in all. A format whose samples share a unit (a parquet row group, an Arrow record
    /// batch) reads each unit once for the run, with one call instead of one per sample.
    /// Default: sample by sample.
    fn read_run(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        first: u32,
        count: u32,
    ) -> Result<u64, FormatError> {
        let mut bytes = 0u64;
        for index in first..first.saturating_add(count) {
            bytes += self.read_sample(storage, key, index)?.len() as u64;
        }
        Ok(bytes)
    }

    /// Whether [`read_run`](Self::read_run) reads a run in fewer steps than its samples one by
    /// one, with the same I/O (an open of a file already open costing none), so that a loader
    /// may hand it runs instead of samples. Default false.
    fn reads_runs(&self) -> bool {
        false
    }

    /// Forgets file `key` and releases what it holds (buffers are kept for reuse).
    fn close(&mut self, key: FileKey);

    /// The reads that follow belong to `epoch` (1-based; evaluation passes carry the number
    /// of the epoch they follow). Readers that remember units across samples start afresh
    /// when it changes. Default: nothing.
    fn begin_epoch(&mut self, epoch: u32) {
        let _ = epoch;
    }
}
