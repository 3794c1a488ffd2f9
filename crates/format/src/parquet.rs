//! `parquet`: the layout of MLPerf Storage's DLIO fork (upstream DLIO has no parquet). A file
//! holds `samples` rows of two columns, `data` (required binary: the sample bytes) and `label`
//! (required int64), in row groups of `dataset.parquet_row_group_size` rows (1024 by
//! default), with one codec for every column (`dataset.parquet_compression`: none, snappy,
//! zstd or gzip). pyarrow reads it as `data: binary not null, label: int64 not null`.
//!
//! Reading is row-group granular, as the fork's reader: a sample read loads its row group's
//! `data` column only (column selection: the labels are never read) through the storage,
//! decodes it, and keeps the last few decoded row groups (the fork's `row_group_cache_size`,
//! 4) so the neighbouring samples cost no I/O. The footer is read when a file is opened, as
//! pyarrow does, once per file and epoch: a file closed after a sample stays open until the
//! epoch ends.

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use dlio_config::{Compression, DatasetConfig, FormatKind, ParquetCompression};
use dlio_storage::{IoBuffer, ReadHandle, Storage};
use parquet::basic::{Compression as Codec, GzipLevel, ZstdLevel};
use parquet::column::reader::{ColumnReader, get_typed_column_reader};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, FileReader, Length};
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::ranged::{BufferPlace, HandleWriter, read_range};
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// Decoded row groups a reader keeps (the fork's `row_group_cache_size` default).
const ROW_GROUP_CACHE: usize = 4;

/// The schema of the files.
const SCHEMA: &str = "message schema { REQUIRED BYTE_ARRAY data; REQUIRED INT64 label; }";

/// `parquet`: the fork's row groups of column chunks (or DLIO's legacy `data`/`label` schema).
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Parquet,
    aliases: &[],
    extensions: &["parquet", "pq"],
    magic: b"PAR1",
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: true,
    check: no_checks,
    build: |dataset, _| Ok(Box::new(ParquetFormat::from_config(dataset))),
};

/// The `parquet` format.
#[derive(Debug, Clone)]
pub(crate) struct ParquetFormat {
    pub(crate) row_group_size: u64,
    pub(crate) compression: ParquetCompression,
    /// `dataset.parquet.columns`: empty for the legacy `data`/`label` layout (this file), else
    /// the column schema of `parquet_columns.rs`.
    pub(crate) columns: Vec<dlio_config::ParquetColumn>,
    /// How the column readers read footers.
    pub(crate) footer: crate::parquet_columns::FooterReads,
}

impl ParquetFormat {
    /// Row groups, codec (`dataset.compression` names one when it is a parquet codec, else
    /// `parquet_compression`) and columns of the `dataset` section.
    fn from_config(dataset: &DatasetConfig) -> ParquetFormat {
        ParquetFormat {
            row_group_size: dataset
                .parquet
                .row_group_size
                .unwrap_or(dataset.parquet_row_group_size),
            compression: match dataset.compression {
                Compression::Gzip => ParquetCompression::Gzip,
                Compression::Snappy => ParquetCompression::Snappy,
                Compression::Zstd => ParquetCompression::Zstd,
                Compression::Lz4 => ParquetCompression::Lz4,
                _ => dataset.parquet_compression,
            },
            columns: dataset.parquet.columns.clone(),
            footer: crate::parquet_columns::FooterReads {
                read_size: dataset.parquet.footer_read_size,
                cache: dataset.parquet.metadata_cache,
                coalesce: dataset.parquet.coalesce_row_groups,
            },
        }
    }
}

impl Default for ParquetFormat {
    fn default() -> Self {
        ParquetFormat {
            row_group_size: 1024,
            compression: ParquetCompression::None,
            columns: Vec::new(),
            footer: Default::default(),
        }
    }
}

/// The parquet codec of `compression`.
pub(crate) fn codec(compression: ParquetCompression) -> Codec {
    match compression {
        ParquetCompression::None => Codec::UNCOMPRESSED,
        ParquetCompression::Snappy => Codec::SNAPPY,
        ParquetCompression::Zstd => Codec::ZSTD(ZstdLevel::default()),
        ParquetCompression::Gzip => Codec::GZIP(GzipLevel::default()),
        ParquetCompression::Lz4 => Codec::LZ4_RAW,
    }
}

/// The row group holding `row`, from the first row of each group (with the total row count
/// last), or the error naming `path` when the file has fewer rows.
pub(crate) fn row_group_of(
    group_starts: &[u64],
    path: &Path,
    row: u64,
) -> Result<usize, FormatError> {
    let total = group_starts.last().copied().unwrap_or(0);
    if row >= total {
        return Err(FormatError::SampleOutOfRange {
            path: path.to_path_buf(),
            index: row,
            samples: total,
        });
    }
    Ok(group_starts.partition_point(|&start| start <= row) - 1)
}

/// The first row of each row group, with the total row count last.
pub(crate) fn group_starts(metadata: &parquet::file::metadata::ParquetMetaData) -> Vec<u64> {
    let mut starts = Vec::with_capacity(metadata.num_row_groups() + 1);
    let mut rows = 0u64;
    for group in metadata.row_groups() {
        starts.push(rows);
        rows += group.num_rows().max(0) as u64;
    }
    starts.push(rows);
    starts
}

pub(crate) fn parquet_error(
    path: &Path,
    what: &str,
    e: parquet::errors::ParquetError,
) -> FormatError {
    FormatError::corrupt(path, 0, format!("{what}: {e}"))
}

/// Refuses a footer whose column chunks lie outside the file (a negative offset or length,
/// or past the end): the parquet crate asserts on the first and would read garbage ranges on
/// the second, so a damaged footer must be an error before any column is touched.
pub(crate) fn check_column_ranges(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
    file_len: u64,
) -> Result<(), FormatError> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        for (c, column) in group.columns().iter().enumerate() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let len = column.compressed_size();
            let inside = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(start, len)| start.checked_add(len))
                .is_some_and(|end| end <= file_len);
            if !inside {
                return Err(FormatError::corrupt(
                    path,
                    start.max(0) as u64,
                    format!(
                        "row group {g}, column {c}: the footer puts the column at offset {start}, \
                         {len} bytes long, outside the file's {file_len} bytes"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// An error of the parquet writer: the storage's own error when the sink failed (a full disk
/// is ENOSPC, not a corrupt file), else the writer's message.
pub(crate) fn parquet_write_error(path: &Path, e: parquet::errors::ParquetError) -> FormatError {
    use parquet::errors::ParquetError;
    let e = match e {
        ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
            Ok(io) => {
                if io
                    .get_ref()
                    .is_some_and(|r| r.is::<dlio_storage::StorageError>())
                {
                    if let Some(Ok(storage)) = io
                        .into_inner()
                        .map(|r| r.downcast::<dlio_storage::StorageError>())
                    {
                        return FormatError::Storage(*storage);
                    }
                    return FormatError::unsupported(
                        format!("writing {} failed", path.display()),
                        "check the storage",
                    );
                }
                ParquetError::External(Box::new(*io))
            }
            Err(other) => ParquetError::External(other),
        },
        other => other,
    };
    FormatError::unsupported(
        format!("the parquet writer failed on {}: {e}", path.display()),
        "check the dataset.parquet settings (row_group_size, columns, compression)",
    )
}

impl Format for ParquetFormat {
    fn name(&self) -> &'static str {
        "parquet"
    }

    fn extension(&self) -> &'static str {
        "parquet"
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        if !self.columns.is_empty() {
            return crate::parquet_columns::generate(
                storage,
                path,
                layout,
                rng,
                &self.columns,
                self.row_group_size,
                self.compression,
            );
        }
        let sample = usize::try_from(layout.sample_bytes()).map_err(|_| {
            FormatError::unsupported("a sample larger than memory", "use smaller samples")
        })?;
        let codec = codec(self.compression);
        let rows_per_group = self.row_group_size.max(1) as usize;
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(codec)
                .set_max_row_group_row_count(Some(rows_per_group))
                .set_dictionary_enabled(false)
                .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
                .build(),
        );
        let schema =
            Arc::new(parse_message_type(SCHEMA).map_err(|e| parquet_error(path, "schema", e))?);
        let mut out = storage.create(path)?;
        {
            let sink = HandleWriter::new(&mut *out);
            let mut writer = SerializedFileWriter::new(sink, schema, props)
                .map_err(|e| parquet_write_error(path, e))?;
            let fail = |e| parquet_write_error(path, e);
            let mut left = layout.samples as usize;
            while left > 0 {
                let rows = left.min(rows_per_group);
                let mut group = writer.next_row_group().map_err(fail)?;
                if let Some(mut column) = group.next_column().map_err(fail)? {
                    let typed = column.typed::<ByteArrayType>();
                    for _ in 0..rows {
                        let mut bytes = vec![0u8; sample];
                        rng.fill(&mut bytes);
                        typed
                            .write_batch(&[ByteArray::from(bytes)], None, None)
                            .map_err(fail)?;
                    }
                    column.close().map_err(fail)?;
                }
                if let Some(mut column) = group.next_column().map_err(fail)? {
                    let labels = vec![0i64; rows];
                    column
                        .typed::<Int64Type>()
                        .write_batch(&labels, None, None)
                        .map_err(fail)?;
                    column.close().map_err(fail)?;
                }
                group.close().map_err(fail)?;
                left -= rows;
            }
            let mut sink = writer.into_inner().map_err(fail)?;
            sink.flush_pending()?;
        }
        Ok(out.commit()?)
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        if !self.columns.is_empty() {
            return Box::new(crate::parquet_columns::column_reader(
                &self.columns,
                self.footer,
                None,
            ));
        }
        Box::new(ParquetReader {
            open: rustc_hash::FxHashMap::default(),
            cache: VecDeque::new(),
            scratch: Vec::new(),
            kept: rustc_hash::FxHashMap::default(),
            kept_order: VecDeque::new(),
            epoch: 0,
        })
    }

    /// Readers of a column schema share the row groups they fetched (each is fetched once per
    /// epoch, whichever threads its batches went to); the legacy layout's readers decode
    /// their row groups and keep them each.
    fn readers(&self, layout: &FileLayout, threads: usize) -> Vec<Box<dyn FormatReader>> {
        if self.columns.is_empty() {
            return (0..threads).map(|_| self.reader(layout)).collect();
        }
        let shared = Arc::new(crate::row_groups::SharedRowGroups::new(
            ROW_GROUP_CACHE * threads.max(1),
        ));
        (0..threads)
            .map(|_| {
                Box::new(crate::parquet_columns::column_reader(
                    &self.columns,
                    self.footer,
                    Some(Arc::clone(&shared)),
                )) as Box<dyn FormatReader>
            })
            .collect()
    }
}

/// A parquet [`ChunkReader`] over a storage read handle, so every byte parquet reads goes
/// through the storage.
pub(crate) struct StorageChunks {
    pub(crate) handle: Arc<Mutex<Box<dyn ReadHandle>>>,
    pub(crate) len: u64,
    pub(crate) place: BufferPlace,
}

impl Length for StorageChunks {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for StorageChunks {
    type T = std::io::BufReader<HandleRead>;

    /// Buffered: parquet-rs decodes page headers through this reader a few bytes at a time,
    /// which unbuffered made one-byte `pread`s (270 of 318 requests of a legacy-layout run).
    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::with_capacity(
            HANDLE_READ_BUFFER,
            HandleRead {
                handle: Arc::clone(&self.handle),
                pos: start,
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let mut handle = self
            .handle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut buffer: Option<IoBuffer> = None;
        let bytes = read_range(&mut **handle, &mut buffer, self.place, start, length)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        Ok(Bytes::copy_from_slice(bytes))
    }
}

/// The buffer of parquet's sequential reads (page headers and the pages after them).
const HANDLE_READ_BUFFER: usize = 64 << 10;

/// A sequential reader at a position of a shared handle (parquet's `get_read`).
pub(crate) struct HandleRead {
    handle: Arc<Mutex<Box<dyn ReadHandle>>>,
    pos: u64,
}

impl Read for HandleRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut handle = self
            .handle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let n = handle
            .read_at(buf, self.pos)
            .map_err(std::io::Error::other)?;
        self.pos += n as u64;
        Ok(n)
    }
}

struct OpenParquet {
    path: PathBuf,
    reader: SerializedFileReader<StorageChunks>,
    /// First row of each row group, plus the total row count at the end.
    group_starts: Vec<u64>,
}

/// A decoded `data` column of one row group.
struct DecodedGroup {
    path: PathBuf,
    group: usize,
    values: Vec<ByteArray>,
}

struct ParquetReader {
    open: rustc_hash::FxHashMap<FileKey, OpenParquet>,
    cache: VecDeque<DecodedGroup>,
    scratch: Vec<ByteArray>,
    /// Files closed this epoch, kept open with their footers, in the order they were closed.
    kept: rustc_hash::FxHashMap<FileKey, OpenParquet>,
    kept_order: VecDeque<FileKey>,
    epoch: u32,
}

/// Files a reader keeps open after their samples were read, until the epoch ends: a
/// per-sample open (`read_type: on_demand`) then costs a lookup, not an open and a footer.
const KEPT_OPEN: usize = 16;

impl FormatReader for ParquetReader {
    /// Reads the footer (file metadata), as opening a parquet file does.
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        if let Some(file) = self.kept.remove(&key)
            && file.path == path
        {
            self.open.insert(key, file);
            return Ok(());
        }
        let handle = storage.open(path)?;
        let len = handle.len();
        let chunks = StorageChunks {
            len,
            handle: Arc::new(Mutex::new(handle)),
            place: BufferPlace::of(storage.capabilities()),
        };
        let reader = SerializedFileReader::new(chunks).map_err(|e| {
            // The footer is at the end: a damaged or truncated file fails there.
            FormatError::corrupt(path, 0, format!("not a readable parquet file: {e}"))
        })?;
        let metadata = reader.metadata();
        check_column_ranges(path, metadata, len)?;
        let schema = metadata.file_metadata().schema_descr();
        if schema.num_columns() == 0 || schema.column(0).name() != "data" {
            return Err(FormatError::unsupported(
                format!(
                    "{}: the first column is not `data` (DLIO's parquet files hold the sample \
                     bytes in a `data` binary column)",
                    path.display()
                ),
                "generate the data set with dlio, or write a `data` binary column first",
            ));
        }
        let group_starts = group_starts(metadata);
        self.open.insert(
            key,
            OpenParquet {
                path: path.to_path_buf(),
                reader,
                group_starts,
            },
        );
        Ok(())
    }

    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        let file = self
            .open
            .get(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        let row = u64::from(index);
        let group = row_group_of(&file.group_starts, &file.path, row)?;
        let in_group = (row - file.group_starts[group]) as usize;
        let cached = self
            .cache
            .iter()
            .position(|g| g.group == group && g.path == file.path);
        let position = match cached {
            Some(p) => p,
            None => {
                let values = read_data_column(file, group, &mut self.scratch)?;
                if self.cache.len() >= ROW_GROUP_CACHE {
                    self.cache.pop_front();
                }
                self.cache.push_back(DecodedGroup {
                    path: file.path.clone(),
                    group,
                    values,
                });
                self.cache.len() - 1
            }
        };
        let decoded = &self.cache[position];
        decoded
            .values
            .get(in_group)
            .map(|v| v.data())
            .ok_or_else(|| {
                FormatError::corrupt(
                    &decoded.path,
                    0,
                    format!("row group {group} holds fewer rows than its metadata says"),
                )
            })
    }

    fn close(&mut self, key: FileKey) {
        let Some(file) = self.open.remove(&key) else {
            return;
        };
        if self.kept.len() >= KEPT_OPEN
            && let Some(oldest) = self.kept_order.pop_front()
        {
            self.kept.remove(&oldest);
        }
        self.kept.insert(key, file);
        self.kept_order.push_back(key);
    }

    /// A new epoch opens its files again and reads its row groups again.
    fn begin_epoch(&mut self, epoch: u32) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.kept.clear();
            self.kept_order.clear();
            self.cache.clear();
        }
    }
}

/// Reads and decodes the `data` column of one row group (and nothing else).
fn read_data_column(
    file: &OpenParquet,
    group: usize,
    scratch: &mut Vec<ByteArray>,
) -> Result<Vec<ByteArray>, FormatError> {
    let fail = |e| parquet_error(&file.path, &format!("row group {group}"), e);
    let rows = (file.group_starts[group + 1] - file.group_starts[group]) as usize;
    let row_group = file.reader.get_row_group(group).map_err(fail)?;
    let column = row_group.get_column_reader(0).map_err(fail)?;
    let ColumnReader::ByteArrayColumnReader(_) = &column else {
        return Err(FormatError::unsupported(
            format!("{}: the `data` column is not binary", file.path.display()),
            "write the samples as a binary column",
        ));
    };
    let mut typed = get_typed_column_reader::<ByteArrayType>(column);
    // pyarrow writes nullable columns: their definition levels must be read too.
    let nullable = file
        .reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .column(0)
        .max_def_level()
        > 0;
    scratch.clear();
    let mut levels = Vec::new();
    let mut values = Vec::with_capacity(rows);
    let mut records_read = 0;
    while records_read < rows {
        let defs = nullable.then_some(&mut levels);
        let (records, _, _) = typed
            .read_records(rows - records_read, defs, None, &mut values)
            .map_err(fail)?;
        if records == 0 {
            break;
        }
        records_read += records;
    }
    if values.len() < rows {
        return Err(FormatError::unsupported(
            format!(
                "{}: row group {group} has null samples in its `data` column",
                file.path.display()
            ),
            "write every sample (no nulls)",
        ));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use dlio_config::{Compression, ElementType};
    use dlio_storage::{Metered, PosixStorage};

    use super::*;

    /// `samples` rows of 64 bytes.
    fn rows_of_64_bytes(samples: u32) -> FileLayout {
        FileLayout {
            samples,
            sample_dims: vec![64],
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        }
    }

    /// Row groups of 4 rows, one read column `a` of 16 float32, uncompressed.
    fn one_float_column(footer: crate::parquet_columns::FooterReads) -> ParquetFormat {
        ParquetFormat {
            row_group_size: 4,
            compression: ParquetCompression::None,
            columns: vec![dlio_config::ParquetColumn {
                name: "a".into(),
                dtype: "float32".into(),
                size: 16,
                read: true,
            }],
            footer,
        }
    }

    #[test]
    fn samples_come_back_from_row_groups_with_every_codec() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = FileLayout {
            samples: 10,
            sample_dims: vec![16, 16],
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        };
        for compression in [
            ParquetCompression::None,
            ParquetCompression::Snappy,
            ParquetCompression::Zstd,
            ParquetCompression::Gzip,
        ] {
            let format = ParquetFormat {
                row_group_size: 4,
                compression,
                columns: Vec::new(),
                footer: Default::default(),
            };
            let path = dir.path().join(format!("{compression:?}.parquet"));
            let written = format
                .generate(&storage, &path, &layout, &mut DataRng::for_file(5, 0, 0))
                .unwrap();
            assert_eq!(written, std::fs::metadata(&path).unwrap().len());
            let mut expected = vec![0u8; 2560];
            DataRng::for_file(5, 0, 0).fill(&mut expected);

            let mut reader = format.reader(&layout);
            reader.open(&storage, 0, &path).unwrap();
            for i in [0u32, 3, 4, 9] {
                let sample = reader.read_sample(&storage, 0, i).unwrap();
                assert_eq!(
                    sample,
                    &expected[i as usize * 256..][..256],
                    "{compression:?} {i}"
                );
            }
            // Neighbours in a cached row group cost no I/O.
            let before = storage.counters().snapshot();
            reader.read_sample(&storage, 0, 5).unwrap();
            assert_eq!((storage.counters().snapshot() - before).bytes_read, 0);
            assert!(matches!(
                reader.read_sample(&storage, 0, 10),
                Err(FormatError::SampleOutOfRange { samples: 10, .. })
            ));
        }
    }

    #[test]
    fn a_damaged_file_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.parquet");
        std::fs::write(&path, b"PAR1 not really").unwrap();
        let mut reader = ParquetFormat::default().reader(&FileLayout {
            samples: 1,
            sample_dims: vec![1],
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        });
        let err = reader
            .open(&PosixStorage::new(), 0, &path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad.parquet") && err.contains("parquet"),
            "{err}"
        );
    }

    /// A footer read as the file's tail in one request, and once per run with the metadata
    /// cached.
    #[test]
    fn footers_are_read_as_one_tail_request_and_once_per_run_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = FileLayout {
            samples: 8,
            sample_dims: vec![64],
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        };
        let column = dlio_config::ParquetColumn {
            name: "a".into(),
            dtype: "float32".into(),
            size: 16,
            read: true,
        };
        let format = |footer| ParquetFormat {
            row_group_size: 4,
            compression: ParquetCompression::None,
            columns: vec![column.clone()],
            footer,
        };
        let path = dir.path().join("f.parquet");
        format(Default::default())
            .generate(&storage, &path, &layout, &mut DataRng::for_file(5, 0, 0))
            .unwrap();
        let file_bytes = std::fs::metadata(&path).unwrap().len();
        // One epoch's reads of every sample: (requests, bytes).
        let epoch = |reader: &mut Box<dyn FormatReader>, epoch: u32| {
            let before = storage.counters().snapshot();
            reader.begin_epoch(epoch);
            reader.open(&storage, 0, &path).unwrap();
            for i in 0..8 {
                reader.read_sample(&storage, 0, i).unwrap();
            }
            reader.close(0);
            let after = storage.counters().snapshot() - before;
            (after.read_requests, after.bytes_read)
        };
        // parquet-rs: the length, then the metadata, then two row groups; again next epoch.
        let mut plain = format(Default::default()).reader(&layout);
        let (first, _) = epoch(&mut plain, 1);
        assert_eq!(first, 4);
        assert_eq!(epoch(&mut plain, 2).0, 4);
        // pyarrow's way: the last 64 KiB (the whole small file) in one request, then the row
        // groups; with the metadata cached, no footer read in the second epoch.
        let mut tail = format(crate::parquet_columns::FooterReads {
            read_size: 65536,
            cache: true,
            coalesce: 1,
        })
        .reader(&layout);
        let (requests, bytes) = epoch(&mut tail, 1);
        assert_eq!(requests, 3);
        assert!(bytes >= file_bytes.min(65536), "{bytes}");
        let (requests, _) = epoch(&mut tail, 2);
        assert_eq!(requests, 2);
    }

    /// A run of rows read in one call fetches each row group it spans once and counts every
    /// row's bytes, as reading them one by one does.
    #[test]
    fn a_run_of_rows_reads_what_its_rows_read_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = rows_of_64_bytes(10);
        let format = one_float_column(Default::default());
        let path = dir.path().join("f.parquet");
        format
            .generate(&storage, &path, &layout, &mut DataRng::for_file(5, 0, 0))
            .unwrap();
        let read = |run: bool| {
            let mut reader = format.reader(&layout);
            assert!(reader.reads_runs());
            reader.begin_epoch(1);
            let before = storage.counters().snapshot();
            reader.open(&storage, 0, &path).unwrap();
            let bytes = if run {
                reader.read_run(&storage, 0, 1, 8).unwrap()
            } else {
                (1..9)
                    .map(|i| reader.read_sample(&storage, 0, i).unwrap().len() as u64)
                    .sum()
            };
            let io = storage.counters().snapshot() - before;
            (bytes, io.read_requests, io.bytes_read)
        };
        // Rows 1..9 span the three row groups (0-3, 4-7, 8-9): the same requests either way.
        let (one_by_one, run) = (read(false), read(true));
        assert_eq!(run, one_by_one);
        assert_eq!(run.0, 8 * 64);
        // Past the file's rows, a run is refused as a sample is.
        let mut reader = format.reader(&layout);
        reader.open(&storage, 0, &path).unwrap();
        assert!(reader.read_run(&storage, 0, 8, 3).is_err());
    }

    /// The fork's coalesce_rgs: consecutive row groups fetched in one request each.
    #[test]
    fn coalesced_row_groups_are_fetched_together() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = rows_of_64_bytes(32);
        let format = |coalesce| {
            one_float_column(crate::parquet_columns::FooterReads {
                read_size: 0,
                cache: false,
                coalesce,
            })
        };
        let path = dir.path().join("f.parquet");
        format(1)
            .generate(&storage, &path, &layout, &mut DataRng::for_file(5, 0, 0))
            .unwrap();
        let requests = |coalesce| {
            let mut reader = format(coalesce).reader(&layout);
            reader.begin_epoch(1);
            reader.open(&storage, 0, &path).unwrap();
            let before = storage.counters().snapshot();
            assert_eq!(reader.read_run(&storage, 0, 0, 32).unwrap(), 32 * 64);
            (storage.counters().snapshot() - before).read_requests
        };
        // 8 row groups: 8 requests, 2 in units of 4, 3 in units of 3 (the last of 2).
        assert_eq!(requests(1), 8);
        assert_eq!(requests(4), 2);
        assert_eq!(requests(3), 3);
    }

    /// On demand (open, read, close per sample) a file is opened once per epoch; the
    /// readers of one loader fetch each row group once between them; a new epoch reads
    /// again.
    #[test]
    fn column_readers_open_once_per_epoch_and_share_their_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = rows_of_64_bytes(8);
        let format = one_float_column(Default::default());
        let path = dir.path().join("f.parquet");
        format
            .generate(&storage, &path, &layout, &mut DataRng::for_file(5, 0, 0))
            .unwrap();
        let mut readers = format.readers(&layout, 2);
        let counted = |f: &mut dyn FnMut()| {
            let before = storage.counters().snapshot();
            f();
            let after = storage.counters().snapshot() - before;
            (after.opens, after.bytes_read)
        };
        let per_sample = |reader: &mut Box<dyn FormatReader>, index: u32| {
            reader.open(&storage, 0, &path).unwrap();
            reader.read_sample(&storage, 0, index).unwrap();
            reader.close(0);
        };
        for reader in readers.iter_mut() {
            reader.begin_epoch(1);
        }
        // Reader 0 opens the file (footer) and fetches row group 0; its later samples, and
        // reader 1's samples of the same group, open nothing and read nothing but reader 1's
        // own footer.
        let (opens, first) = counted(&mut || per_sample(&mut readers[0], 0));
        assert_eq!(opens, 1);
        let (opens, bytes) = counted(&mut || {
            for i in 1..4 {
                per_sample(&mut readers[0], i);
            }
        });
        assert_eq!((opens, bytes), (0, 0));
        let (opens, footer) = counted(&mut || per_sample(&mut readers[1], 2));
        assert_eq!(opens, 1);
        assert!(
            footer < first,
            "{footer} >= {first}: row group 0 read twice"
        );
        let (opens, _) = counted(&mut || per_sample(&mut readers[1], 3));
        assert_eq!(opens, 0);
        // Row group 1 is new: fetched once, by the reader that needs it first.
        let (_, group) = counted(&mut || per_sample(&mut readers[1], 4));
        assert!(group > 0);
        let (_, again) = counted(&mut || per_sample(&mut readers[0], 5));
        assert_eq!(again, 0);
        // The next epoch opens the file and fetches the group again.
        readers[0].begin_epoch(2);
        let (opens, bytes) = counted(&mut || per_sample(&mut readers[0], 0));
        assert_eq!((opens, bytes), (1, first));
        // A closed file is not readable until opened again.
        assert!(readers[0].read_sample(&storage, 0, 1).is_err());
    }
}
