//! `arrow` (alias `arrow_ipc`): Arrow IPC files of record batches, which pyarrow opens with
//! `pyarrow.ipc.open_file`. Users ask for it so that the storage, not parquet's decoding, is
//! what a columnar workload measures; MLPerf Storage's fork has it on a branch (one record
//! batch per file, `dataset.arrow.columns`, `dataset.arrow.generation_batch_size`).
//!
//! A file holds `num_samples_per_file` rows, in record batches of
//! `dataset.arrow.generation_batch_size` rows (0, the default: one batch per file, as the
//! fork's branch writes). The columns are `dataset.arrow.columns` (the vocabulary of
//! `dataset.parquet.columns`: scalars as their Arrow types, vectors of `size` > 1 and `list` as
//! fixed-size lists, `string`, `binary` of `size` bytes, `bool`), or, without columns, a `data`
//! column of each sample's bytes (binary) and an int64 `label`. Uncompressed, buffers aligned
//! to 64 bytes (the writer's most).
//!
//! Reading decodes nothing: at open the footer is read (its last 10 bytes say where it
//! starts); a sample read fetches its record batch once per batch and epoch, through the
//! columnar reader shared with parquet (`columnar.rs`). With every column selected a batch is
//! one request (its message, metadata and body); with `read: false` columns the batches'
//! metadata are read at open, and a batch fetch requests only the selected columns' buffers
//! (a column's buffers, and neighbouring selected columns, merged across the writer's
//! padding). Offsets need not be aligned: reads are widened to the engine's alignment, so
//! O_DIRECT reads them too.

use std::path::Path;
use std::sync::Arc;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, PrimitiveArray, RecordBatch,
    StringArray, types::ArrowPrimitiveType,
};
use arrow_buffer::{BooleanBuffer, Buffer, OffsetBuffer, ScalarBuffer};
use arrow_ipc::writer::{FileWriter, IpcWriteOptions};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use dlio_config::{Compression, ConfigError, DatasetConfig, FormatKind, ParquetColumn};
use dlio_storage::{IoBuffer, ReadHandle, Storage};

use crate::columnar::{ColumnReader, Footer, UnitIndex};
use crate::descriptor::FormatDescriptor;
use crate::parquet_columns::column_row_bytes;
use crate::ranged::{BufferPlace, HandleWriter, read_range};
use crate::row_groups::SharedRowGroups;
use crate::{DataRng, FileLayout, Format, FormatError, FormatReader};

/// Record batches a reader remembers as fetched (as parquet's row groups).
const BATCH_CACHE: usize = 4;

/// What every Arrow IPC file ends with, after the footer's length.
const MAGIC: &[u8] = b"ARROW1";

/// The writer's buffer alignment (arrow-rs allows 8 to 64); O_DIRECT reads widen their ranges
/// to the device's alignment instead.
const ALIGNMENT: usize = 64;

/// `arrow`: Arrow IPC files of record batches.
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Arrow,
    aliases: &["arrow_ipc"],
    extensions: &["arrow", "feather", "ipc"],
    magic: MAGIC,
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: true,
    check,
    build: |dataset, _| Ok(Box::new(ArrowFormat::from_config(dataset))),
};

/// The `dataset` keys an Arrow data set needs right.
fn check(dataset: &DatasetConfig) -> Result<Vec<String>, ConfigError> {
    dlio_config::check_columns("dataset.arrow.columns", &dataset.arrow.columns)?;
    if dataset.compression != Compression::None {
        return Err(ConfigError::Invalid {
            key: "dataset.compression".into(),
            message: format!(
                "is {:?}, but dlio writes Arrow IPC files uncompressed (the storage, not a \
                 codec, is what they measure).",
                dataset.compression
            ),
            fix: "set ++workload.dataset.compression=none".into(),
        });
    }
    Ok(Vec::new())
}

/// The `arrow` format.
#[derive(Debug, Clone, Default)]
pub(crate) struct ArrowFormat {
    /// `dataset.arrow.columns`; empty for the `data`/`label` layout.
    columns: Vec<ParquetColumn>,
    /// Rows per record batch; 0: one batch per file.
    batch_rows: u64,
}

impl ArrowFormat {
    fn from_config(dataset: &DatasetConfig) -> ArrowFormat {
        ArrowFormat {
            columns: dataset.arrow.columns.clone(),
            batch_rows: dataset.arrow.generation_batch_size,
        }
    }

    /// Rows in each record batch of a file of `rows` rows.
    fn rows_per_batch(&self, rows: u64) -> u64 {
        match self.batch_rows {
            0 => rows.max(1),
            n => n.min(rows.max(1)),
        }
    }

    fn schema(&self, sample_bytes: u64) -> Schema {
        if self.columns.is_empty() {
            let _ = sample_bytes;
            return Schema::new(vec![
                Field::new("data", DataType::Binary, false),
                Field::new("label", DataType::Int64, false),
            ]);
        }
        Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(&c.name, data_type(c), false))
                .collect::<Vec<_>>(),
        )
    }
}

/// The Arrow type of one element of a numeric dtype.
fn element_type(dtype: &str) -> DataType {
    match dtype {
        "uint8" => DataType::UInt8,
        "uint16" => DataType::UInt16,
        "uint32" => DataType::UInt32,
        "uint64" => DataType::UInt64,
        "int8" => DataType::Int8,
        "int16" => DataType::Int16,
        "int32" => DataType::Int32,
        "int64" => DataType::Int64,
        "float16" => DataType::Float16,
        "float64" => DataType::Float64,
        _ => DataType::Float32,
    }
}

/// The Arrow type of a configured column.
fn data_type(column: &ParquetColumn) -> DataType {
    let size = column.size.max(1);
    match column.dtype.as_str() {
        "string" => DataType::Utf8,
        "binary" => DataType::Binary,
        "bool" => DataType::Boolean,
        "list" => DataType::FixedSizeList(
            Arc::new(Field::new("item", DataType::Float32, false)),
            size as i32,
        ),
        d if size > 1 => DataType::FixedSizeList(
            Arc::new(Field::new("item", element_type(d), false)),
            size as i32,
        ),
        d => element_type(d),
    }
}

/// `n` random values of `T` from `rng`: integers of any bits, floats in [0, 1) as numpy's
/// random floats (never NaN or infinite).
fn random_values<T: ArrowPrimitiveType>(rng: &mut DataRng, n: usize) -> ArrayRef {
    let width = std::mem::size_of::<T::Native>();
    let mut bytes = vec![0u8; n * width];
    rng.fill(&mut bytes);
    match T::DATA_TYPE {
        DataType::Float16 => {
            for b in bytes.chunks_exact_mut(2) {
                // Exponent at most 14 of 15: below 1.0.
                let v = u16::from_le_bytes([b[0], b[1]]) & 0x3bff;
                b.copy_from_slice(&v.to_le_bytes());
            }
        }
        DataType::Float32 => {
            for b in bytes.chunks_exact_mut(4) {
                let v = (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) >> 8) as f32 / 16_777_216.0;
                b.copy_from_slice(&v.to_le_bytes());
            }
        }
        DataType::Float64 => {
            for b in bytes.chunks_exact_mut(8) {
                let raw = u64::from_le_bytes(b.try_into().unwrap_or_default());
                let v = (raw >> 11) as f64 / 9_007_199_254_740_992.0;
                b.copy_from_slice(&v.to_le_bytes());
            }
        }
        _ => {}
    }
    let values = ScalarBuffer::<T::Native>::new(Buffer::from_vec(bytes), 0, n);
    Arc::new(PrimitiveArray::<T>::new(values, None))
}

/// `n` random elements of the numeric type `dt`.
fn random_numbers(dt: &DataType, rng: &mut DataRng, n: usize) -> ArrayRef {
    match dt {
        DataType::UInt8 => random_values::<UInt8Type>(rng, n),
        DataType::UInt16 => random_values::<UInt16Type>(rng, n),
        DataType::UInt32 => random_values::<UInt32Type>(rng, n),
        DataType::UInt64 => random_values::<UInt64Type>(rng, n),
        DataType::Int8 => random_values::<Int8Type>(rng, n),
        DataType::Int16 => random_values::<Int16Type>(rng, n),
        DataType::Int32 => random_values::<Int32Type>(rng, n),
        DataType::Int64 => random_values::<Int64Type>(rng, n),
        DataType::Float16 => random_values::<Float16Type>(rng, n),
        DataType::Float64 => random_values::<Float64Type>(rng, n),
        _ => random_values::<Float32Type>(rng, n),
    }
}

/// `rows` values of `size` random bytes each.
fn random_binary(rng: &mut DataRng, rows: usize, size: usize) -> ArrayRef {
    let mut bytes = vec![0u8; rows * size];
    rng.fill(&mut bytes);
    let offsets = OffsetBuffer::<i32>::from_lengths(std::iter::repeat_n(size, rows));
    Arc::new(BinaryArray::new(offsets, Buffer::from_vec(bytes), None))
}

/// `rows` values of `column`, drawn from `rng`.
fn column_values(column: &ParquetColumn, rng: &mut DataRng, rows: usize) -> ArrayRef {
    let size = column.size.max(1) as usize;
    match data_type(column) {
        DataType::Utf8 => {
            let mut bytes = vec![0u8; rows * 4];
            rng.fill(&mut bytes);
            Arc::new(StringArray::from_iter_values(bytes.chunks_exact(4).map(
                |b| format!("s_{}", u32::from_le_bytes([b[0], b[1], b[2], b[3]]) >> 1),
            )))
        }
        DataType::Binary => random_binary(rng, rows, size),
        DataType::Boolean => {
            let mut bytes = vec![0u8; rows.div_ceil(8)];
            rng.fill(&mut bytes);
            let bits = BooleanBuffer::new(Buffer::from_vec(bytes), 0, rows);
            Arc::new(BooleanArray::new(bits, None))
        }
        DataType::FixedSizeList(item, n) => {
            let values = random_numbers(item.data_type(), rng, rows * n as usize);
            Arc::new(FixedSizeListArray::new(item, n, values, None))
        }
        scalar => random_numbers(&scalar, rng, rows),
    }
}

/// An error of the Arrow writer: the storage's own error when the sink failed (a full disk is
/// ENOSPC, not a corrupt file), else the writer's message.
fn arrow_write_error(path: &Path, e: ArrowError) -> FormatError {
    if let ArrowError::IoError(_, io) = &e
        && io
            .get_ref()
            .is_some_and(|r| r.is::<dlio_storage::StorageError>())
    {
        return FormatError::unsupported(
            format!("writing {} failed: {io}", path.display()),
            "check the storage (free space, permissions)",
        );
    }
    FormatError::unsupported(
        format!("the Arrow IPC writer failed on {}: {e}", path.display()),
        "check the dataset.arrow settings (columns, generation_batch_size)",
    )
}

impl Format for ArrowFormat {
    fn name(&self) -> &'static str {
        "arrow"
    }

    fn extension(&self) -> &'static str {
        "arrow"
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let sample = usize::try_from(layout.sample_bytes()).map_err(|_| {
            FormatError::unsupported("a sample larger than memory", "use smaller samples")
        })?;
        let schema = Arc::new(self.schema(sample as u64));
        let fail = |e| arrow_write_error(path, e);
        let options = IpcWriteOptions::try_new(ALIGNMENT, false, arrow_ipc::MetadataVersion::V5)
            .map_err(fail)?;
        let rows = u64::from(layout.samples);
        let per_batch = self.rows_per_batch(rows);
        let mut out = storage.create(path)?;
        {
            let sink = HandleWriter::new(&mut *out);
            let mut writer =
                FileWriter::try_new_with_options(sink, &schema, options).map_err(fail)?;
            let mut left = rows;
            while left > 0 {
                let n = left.min(per_batch) as usize;
                let columns: Vec<ArrayRef> = if self.columns.is_empty() {
                    vec![
                        random_binary(rng, n, sample),
                        Arc::new(PrimitiveArray::<Int64Type>::from(vec![0i64; n])),
                    ]
                } else {
                    self.columns
                        .iter()
                        .map(|c| column_values(c, rng, n))
                        .collect()
                };
                let batch = RecordBatch::try_new(Arc::clone(&schema), columns).map_err(fail)?;
                writer.write(&batch).map_err(fail)?;
                left -= n as u64;
            }
            writer.finish().map_err(fail)?;
            let mut sink = writer.into_inner().map_err(fail)?;
            sink.flush_pending()?;
        }
        Ok(out.commit()?)
    }

    fn reader(&self, layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(self.column_reader(layout, None))
    }

    /// The readers of one loader share the record batches they fetched, as parquet's share
    /// row groups: each is fetched once per epoch, whichever threads its rows' batches went to.
    fn readers(&self, layout: &FileLayout, threads: usize) -> Vec<Box<dyn FormatReader>> {
        let shared = Arc::new(SharedRowGroups::new(BATCH_CACHE * threads.max(1)));
        (0..threads)
            .map(|_| {
                Box::new(self.column_reader(layout, Some(Arc::clone(&shared))))
                    as Box<dyn FormatReader>
            })
            .collect()
    }
}

impl ArrowFormat {
    fn column_reader(
        &self,
        layout: &FileLayout,
        shared: Option<Arc<SharedRowGroups>>,
    ) -> ColumnReader {
        let rows = u64::from(layout.samples);
        let (selected, all, row_bytes) = if self.columns.is_empty() {
            (vec!["data".to_string()], false, layout.sample_bytes())
        } else {
            let read: Vec<&ParquetColumn> = self.columns.iter().filter(|c| c.read).collect();
            (
                read.iter().map(|c| c.name.clone()).collect(),
                read.len() == self.columns.len(),
                read.iter().map(|c| column_row_bytes(c)).sum(),
            )
        };
        ColumnReader::new(
            Box::new(ArrowIndex {
                selected,
                every_column: all,
                rows,
                rows_per_batch: self.rows_per_batch(rows),
            }),
            row_bytes,
            shared,
        )
    }
}

/// An Arrow IPC file's units are its record batches; a batch's ranges are its whole message
/// when every column is read, else the selected columns' buffers in its body.
struct ArrowIndex {
    /// The names of the columns read.
    selected: Vec<String>,
    /// Every column of the files is read.
    every_column: bool,
    /// Rows a file holds.
    rows: u64,
    /// Rows of each record batch (the last may hold fewer).
    rows_per_batch: u64,
}

/// One record batch's place in the file, from the footer.
#[derive(Debug, Clone, Copy)]
struct Block {
    offset: u64,
    metadata: u64,
    body: u64,
}

/// How many buffers a column of `dt` has in a record batch's body (IPC format, version 5),
/// children included; `None` for types dlio does not read.
fn buffers_of(dt: &DataType) -> Option<usize> {
    Some(match dt {
        DataType::Null => 0,
        DataType::Binary | DataType::Utf8 | DataType::LargeBinary | DataType::LargeUtf8 => 3,
        DataType::List(item) | DataType::LargeList(item) => 2 + buffers_of(item.data_type())?,
        DataType::FixedSizeList(item, _) => 1 + buffers_of(item.data_type())?,
        DataType::Struct(fields) => {
            1 + fields
                .iter()
                .map(|f| buffers_of(f.data_type()))
                .sum::<Option<usize>>()?
        }
        dt if dt.is_primitive()
            || matches!(dt, DataType::Boolean | DataType::FixedSizeBinary(_)) =>
        {
            2
        }
        _ => return None,
    })
}

impl ArrowIndex {
    /// Reads `len` bytes at `offset` of the file.
    fn read_bytes(
        handle: &mut dyn ReadHandle,
        place: BufferPlace,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, FormatError> {
        let mut buffer: Option<IoBuffer> = None;
        Ok(read_range(handle, &mut buffer, place, offset, len)?.to_vec())
    }

    /// The record batches' blocks and the schema's columns, from the footer.
    fn footer(
        handle: &mut dyn ReadHandle,
        path: &Path,
        place: BufferPlace,
    ) -> Result<(Vec<Block>, Schema), FormatError> {
        let len = handle.len();
        let bad = |offset: u64, what: String| FormatError::corrupt(path, offset, what);
        if len < (2 * MAGIC.len() + 4) as u64 {
            return Err(bad(
                0,
                format!("{len} bytes: too short for an Arrow IPC file"),
            ));
        }
        let tail = Self::read_bytes(handle, place, len - 10, 10)?;
        if &tail[4..] != MAGIC {
            return Err(bad(
                len - 6,
                "does not end with ARROW1: not an Arrow IPC file (a stream, or cut short)".into(),
            ));
        }
        let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        let start = (len - 10).checked_sub(footer_len).ok_or_else(|| {
            bad(
                len - 10,
                format!("a footer of {footer_len} bytes is longer than the file"),
            )
        })?;
        let bytes = Self::read_bytes(handle, place, start, footer_len as usize)?;
        let footer = arrow_ipc::root_as_footer(&bytes)
            .map_err(|e| bad(start, format!("the footer is not readable: {e}")))?;
        let schema = footer
            .schema()
            .ok_or_else(|| bad(start, "the footer has no schema".into()))
            .and_then(|s| {
                arrow_ipc::convert::try_fb_to_schema(s)
                    .map_err(|e| bad(start, format!("the footer's schema is not readable: {e}")))
            })?;
        let blocks = footer
            .recordBatches()
            .map(|v| {
                v.iter()
                    .map(|b| Block {
                        offset: b.offset().max(0) as u64,
                        metadata: b.metaDataLength().max(0) as u64,
                        body: b.bodyLength().max(0) as u64,
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for b in &blocks {
            if b.offset + b.metadata + b.body > start {
                return Err(bad(
                    b.offset,
                    format!(
                        "the footer puts a record batch at offset {}, {} bytes long, past the \
                         footer at {start}",
                        b.offset,
                        b.metadata + b.body
                    ),
                ));
            }
        }
        Ok((blocks, schema))
    }

    /// The ranges of the selected columns' buffers in the batch at `block`, from its
    /// metadata: each column's buffers as one range, neighbours merged across padding.
    fn selected_ranges(
        handle: &mut dyn ReadHandle,
        path: &Path,
        place: BufferPlace,
        block: Block,
        columns: &[(usize, usize)],
    ) -> Result<Vec<(u64, u64)>, FormatError> {
        let bad = |what: String| FormatError::corrupt(path, block.offset, what);
        let meta = Self::read_bytes(handle, place, block.offset, block.metadata as usize)?;
        // A message: the continuation marker 0xFFFFFFFF and its length (a version-4 file may
        // have only the length), then the flatbuffer.
        let skip = if meta.starts_with(&[0xff; 4]) { 8 } else { 4 };
        let message = meta
            .get(skip..)
            .and_then(|m| arrow_ipc::root_as_message(m).ok())
            .ok_or_else(|| bad("a record batch's metadata is not readable".into()))?;
        let batch = message
            .header_as_record_batch()
            .ok_or_else(|| bad("a footer block that is not a record batch".into()))?;
        let buffers: Vec<(u64, u64)> = batch
            .buffers()
            .map(|v| {
                v.iter()
                    .map(|b| (b.offset().max(0) as u64, b.length().max(0) as u64))
                    .collect()
            })
            .unwrap_or_default();
        let body = block.offset + block.metadata;
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for &(first, count) in columns {
            let own = buffers
                .get(first..first + count)
                .ok_or_else(|| bad("a record batch with fewer buffers than its schema".into()))?;
            let start = own.iter().filter(|b| b.1 > 0).map(|b| b.0).min();
            let end = own.iter().filter(|b| b.1 > 0).map(|b| b.0 + b.1).max();
            if let (Some(start), Some(end)) = (start, end) {
                if end > block.body {
                    return Err(bad(format!(
                        "a buffer ends at {end}, past the record batch's {} bytes",
                        block.body
                    )));
                }
                spans.push((body + start, end - start));
            }
        }
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (start, len) in spans {
            match merged.last_mut() {
                // Buffers are padded to 64 bytes: a gap under that is padding, read along.
                Some((s, l)) if start <= *s + *l + ALIGNMENT as u64 => {
                    *l = (start + len).max(*s + *l) - *s;
                }
                _ => merged.push((start, len)),
            }
        }
        Ok(merged)
    }
}

impl UnitIndex for ArrowIndex {
    fn read(
        &self,
        mut handle: Box<dyn ReadHandle>,
        path: &Path,
        place: BufferPlace,
    ) -> Result<(Footer, Box<dyn ReadHandle>), FormatError> {
        let (blocks, schema) = Self::footer(&mut *handle, path, place)?;
        let batches = self.rows.div_ceil(self.rows_per_batch.max(1)) as usize;
        if blocks.len() != batches {
            return Err(FormatError::unsupported(
                format!(
                    "{} holds {} record batches, but {} rows in batches of {} make {batches}",
                    path.display(),
                    blocks.len(),
                    self.rows,
                    self.rows_per_batch
                ),
                "make dataset.num_samples_per_file and dataset.arrow.generation_batch_size match \
                 the files, or regenerate them (++workload.workflow.generate_data=True)",
            ));
        }
        let mut group_starts: Vec<u64> = (0..batches as u64)
            .map(|b| b * self.rows_per_batch)
            .collect();
        group_starts.push(self.rows);
        let ranges = if self.every_column {
            blocks
                .iter()
                .map(|b| vec![(b.offset, b.metadata + b.body)])
                .collect()
        } else {
            // Each selected column's first buffer and buffer count, in schema order.
            let mut first = 0usize;
            let mut columns = Vec::new();
            let mut located = vec![false; self.selected.len()];
            for field in schema.fields() {
                let count = buffers_of(field.data_type()).ok_or_else(|| {
                    FormatError::unsupported(
                        format!(
                            "{}: column `{}` has the type {}, which dlio does not read",
                            path.display(),
                            field.name(),
                            field.data_type()
                        ),
                        "generate the data set with dlio (++workload.workflow.generate_data=True)",
                    )
                })?;
                if let Some(i) = self.selected.iter().position(|s| s == field.name()) {
                    located[i] = true;
                    columns.push((first, count));
                }
                first += count;
            }
            if let Some(i) = located.iter().position(|l| !l) {
                return Err(FormatError::unsupported(
                    format!(
                        "{}: dataset.arrow.columns names `{}` (read: true), but the file's \
                         columns are {}",
                        path.display(),
                        self.selected[i],
                        schema
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    "make dataset.arrow.columns match the files, or regenerate them \
                     (++workload.workflow.generate_data=True)",
                ));
            }
            blocks
                .iter()
                .map(|&b| Self::selected_ranges(&mut *handle, path, place, b, &columns))
                .collect::<Result<Vec<_>, _>>()?
        };
        let footer = Footer {
            path: path.to_path_buf(),
            id: Footer::id_of(path),
            group_starts,
            ranges,
        };
        Ok((footer, handle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlio_config::ElementType;
    use dlio_storage::{Metered, PosixStorage};

    fn column(name: &str, dtype: &str, size: u64, read: bool) -> ParquetColumn {
        ParquetColumn {
            name: name.into(),
            dtype: dtype.into(),
            size,
            read,
        }
    }

    /// Bytes read through `storage` while reading every sample of `path` with one reader.
    fn bytes_to_read_all(
        storage: &Metered<PosixStorage>,
        format: &ArrowFormat,
        layout: &FileLayout,
        path: &Path,
    ) -> u64 {
        let before = storage.counters().snapshot();
        let mut reader = format.reader(layout);
        reader.begin_epoch(1);
        reader.open(storage, 0, path).unwrap();
        for i in 0..layout.samples {
            let sample = reader.read_sample(storage, 0, i).unwrap();
            assert!(!sample.is_empty());
        }
        reader.close(0);
        (storage.counters().snapshot() - before).bytes_read
    }

    #[test]
    fn unselected_columns_are_never_read_and_each_batch_is_fetched_once() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let layout = FileLayout {
            samples: 40,
            sample_dims: vec![64],
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        };
        let path = dir.path().join("f.arrow");
        let all = ArrowFormat {
            columns: vec![
                column("kept", "binary", 4096, true),
                column("skipped", "binary", 4096, true),
                column("id", "int64", 1, true),
            ],
            batch_rows: 16,
        };
        all.generate(&storage, &path, &layout, &mut DataRng::for_file(3, 0, 0))
            .unwrap();
        let file_bytes = std::fs::metadata(&path).unwrap().len();
        // Every column read: each of the 3 batches once (whole messages) and the footer.
        let everything = bytes_to_read_all(&storage, &all, &layout, &path);
        assert!(everything >= 2 * 40 * 4096, "{everything}");
        assert!(
            everything <= file_bytes + 4096,
            "{everything} > {file_bytes}"
        );
        // `skipped` not read: its 40 x 4096 bytes are never requested.
        let mut some = all.clone();
        some.columns[1].read = false;
        let selected = bytes_to_read_all(&storage, &some, &layout, &path);
        assert!(selected >= 40 * 4096, "{selected}");
        assert!(
            selected + 40 * 4096 <= everything,
            "{selected} + {} > {everything}",
            40 * 4096
        );
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let layout = FileLayout {
            samples: 4,
            sample_dims: vec![16],
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        };
        let path = dir.path().join("f.arrow");
        let format = ArrowFormat::default();
        format
            .generate(&storage, &path, &layout, &mut DataRng::for_file(3, 0, 0))
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for cut in [bytes.len() - 3, bytes.len() / 2, 4] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let mut reader = format.reader(&layout);
            let error = reader.open(&storage, 0, &path).unwrap_err().to_string();
            assert!(error.contains("f.arrow"), "{cut}: {error}");
        }
    }
}
