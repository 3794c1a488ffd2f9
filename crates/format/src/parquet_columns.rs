//! `parquet` with a column schema (`dataset.parquet.columns`, MLPerf Storage's DLIO fork):
//! the layout of its dlrm and flux workloads. Each row is one sample; each configured column
//! is written with the type the fork's pyarrow generator gives it, as parquet stores it:
//! scalar integers and floats as their physical types (uint8/int8/16 as INT32 with an integer
//! annotation, float16 as a 2-byte FLOAT16), `string` as UTF-8 byte arrays, `binary` as
//! `size`-byte arrays, `bool` as booleans. A column of `size` > 1 elements (or `dtype: list`,
//! float32) is a fixed-size vector; it is stored as a fixed-length byte array of the vector's
//! bytes (pyarrow reads it as `fixed_size_binary`), which moves the same bytes as pyarrow's
//! nested list without list levels.
//!
//! Reading is by row group and column, without decoding: a sample read fetches, once per
//! row group, the column chunks of the columns marked `read: true` (and only those: the bytes
//! of `read: false` columns are never requested), as raw byte ranges through the storage.
//! The fork reads the row group with pyarrow and throws the table away; what reaches the
//! storage is the same set of column chunks. The footer is read at open, as pyarrow does.
//!
//! Opens are per file and epoch, never per sample: a file closed after a sample
//! (`read_type: on_demand`) keeps its handle until the epoch ends, as the fork's reader keeps
//! its `ParquetFile`, so the next sample of the file costs no `open`. The threads of a loader
//! share which row groups they fetched ([`SharedRowGroups`]), so each is fetched once per
//! epoch whichever threads its rows' batches went to.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dlio_config::{ParquetColumn, ParquetCompression};
use dlio_storage::{IoBuffer, Storage};
use parquet::basic::{IntType, LogicalType, Repetition, Type as Physical};
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, DoubleType, FixedLenByteArray, FixedLenByteArrayType,
    FloatType, Int32Type, Int64Type,
};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use crate::parquet::{
    StorageChunks, check_column_ranges, codec, group_starts, parquet_write_error, row_group_of,
};
use crate::ranged::{HandleWriter, read_range};
use crate::row_groups::{Claim, SharedRowGroups};
use crate::{DataRng, FileKey, FileLayout, FormatError, FormatReader};

/// Row groups a reader remembers as read (the neighbouring samples cost no I/O).
const ROW_GROUP_CACHE: usize = 4;

/// Files whose footer a reader remembers: the fork keeps every footer for the epoch, so a
/// per-sample open (`read_type: on_demand`) reads the footer once, not once per sample.
const FOOTER_CACHE: usize = 256;

/// Files a reader keeps open after their samples were read, until the epoch ends (the
/// oldest is closed first): a per-sample open then costs a lookup, not three system calls.
const KEPT_OPEN: usize = 16;

/// What a file's footer says, as a reader needs it.
struct Footer {
    path: PathBuf,
    /// An identity of the path, for the row groups the threads share.
    id: u64,
    /// First row of each row group, plus the total row count at the end.
    group_starts: Vec<u64>,
    /// Per row group: the byte ranges (offset, length) of the selected columns' chunks, with
    /// adjacent chunks merged into one request.
    ranges: Vec<Vec<(u64, u64)>>,
}

/// How one configured column is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    /// INT32 holding values of `bits` bits.
    Int32 { bits: u8, signed: bool },
    /// INT64.
    Int64 { signed: bool },
    /// FLOAT.
    Float,
    /// DOUBLE.
    Double,
    /// BOOLEAN.
    Bool,
    /// UTF-8 BYTE_ARRAY (`s_<number>`, as the fork writes).
    Text,
    /// BYTE_ARRAY of `size` bytes.
    Binary,
    /// FIXED_LEN_BYTE_ARRAY of this many bytes (float16 scalars, vectors).
    Fixed(usize),
}

/// Bytes per element of a numeric dtype.
fn itemsize(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "uint8" | "int8" | "bool" => 1,
        "uint16" | "int16" | "float16" => 2,
        "uint32" | "int32" | "float32" | "list" => 4,
        "uint64" | "int64" | "float64" => 8,
        _ => return None,
    })
}

fn stored(column: &ParquetColumn) -> Stored {
    let size = column.size.max(1) as usize;
    let dtype = column.dtype.as_str();
    match (dtype, size) {
        ("string", _) => Stored::Text,
        ("binary", _) => Stored::Binary,
        ("bool", _) => Stored::Bool,
        ("list", n) => Stored::Fixed(4 * n),
        ("float16", 1) => Stored::Fixed(2),
        ("float32", 1) => Stored::Float,
        ("float64", 1) => Stored::Double,
        ("int64", 1) => Stored::Int64 { signed: true },
        ("uint64", 1) => Stored::Int64 { signed: false },
        (d, 1) if itemsize(d).is_some() => Stored::Int32 {
            bits: (itemsize(d).unwrap_or(4) * 8) as u8,
            signed: d.starts_with('i'),
        },
        (d, n) => Stored::Fixed(itemsize(d).unwrap_or(4) * n),
    }
}

/// Bytes one row of `column` holds (the nominal sample share the fork's MB/s counts).
pub(crate) fn column_row_bytes(column: &ParquetColumn) -> u64 {
    let size = column.size.max(1);
    match column.dtype.as_str() {
        "string" => 8,
        "binary" => size,
        d => itemsize(d).unwrap_or(4) as u64 * size,
    }
}

fn field(column: &ParquetColumn) -> Result<Type, parquet::errors::ParquetError> {
    let build = |physical, logical: Option<LogicalType>, length: Option<i32>| {
        let mut b = Type::primitive_type_builder(&column.name, physical)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(logical);
        if let Some(len) = length {
            b = b.with_length(len);
        }
        b.build()
    };
    match stored(column) {
        Stored::Int32 { bits, signed } => build(
            Physical::INT32,
            Some(LogicalType::Integer(IntType {
                bit_width: bits as i8,
                is_signed: signed,
            })),
            None,
        ),
        Stored::Int64 { signed } => build(
            Physical::INT64,
            (!signed).then_some(LogicalType::Integer(IntType {
                bit_width: 64,
                is_signed: false,
            })),
            None,
        ),
        Stored::Float => build(Physical::FLOAT, None, None),
        Stored::Double => build(Physical::DOUBLE, None, None),
        Stored::Bool => build(Physical::BOOLEAN, None, None),
        Stored::Text => build(Physical::BYTE_ARRAY, Some(LogicalType::String), None),
        Stored::Binary => build(Physical::BYTE_ARRAY, None, None),
        Stored::Fixed(len) => build(
            Physical::FIXED_LEN_BYTE_ARRAY,
            (column.dtype == "float16" && len == 2).then_some(LogicalType::Float16),
            Some(len as i32),
        ),
    }
}

/// Writes one file of `layout.samples` rows with `columns`, in row groups of
/// `row_group_size` rows; every value comes from `rng`.
pub(crate) fn generate(
    storage: &dyn Storage,
    path: &Path,
    layout: &FileLayout,
    rng: &mut DataRng,
    columns: &[ParquetColumn],
    row_group_size: u64,
    compression: ParquetCompression,
) -> Result<u64, FormatError> {
    let fail = |e| parquet_write_error(path, e);
    let fields = columns
        .iter()
        .map(|c| field(c).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let schema = Arc::new(
        Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(fail)?,
    );
    let rows_per_group = row_group_size.max(1) as usize;
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(codec(compression))
            .set_max_row_group_row_count(Some(rows_per_group))
            .set_dictionary_enabled(false)
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
            .build(),
    );
    let mut out = storage.create(path)?;
    {
        let sink = HandleWriter::new(&mut *out);
        let mut writer = SerializedFileWriter::new(sink, schema, props).map_err(fail)?;
        let mut left = layout.samples as usize;
        let mut bytes = Vec::new();
        let mut serial = 0u64;
        while left > 0 {
            let rows = left.min(rows_per_group);
            let mut group = writer.next_row_group().map_err(fail)?;
            for column in columns {
                let Some(mut writer) = group.next_column().map_err(fail)? else {
                    break;
                };
                write_column(&mut writer, column, rows, rng, &mut bytes, &mut serial)
                    .map_err(fail)?;
                writer.close().map_err(fail)?;
            }
            group.close().map_err(fail)?;
            left -= rows;
        }
        let mut sink = writer.into_inner().map_err(fail)?;
        sink.flush_pending()?;
    }
    Ok(out.commit()?)
}

fn write_column(
    writer: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    column: &ParquetColumn,
    rows: usize,
    rng: &mut DataRng,
    bytes: &mut Vec<u8>,
    serial: &mut u64,
) -> Result<(), parquet::errors::ParquetError> {
    let mut random = |len: usize| {
        bytes.resize(len, 0);
        rng.fill(bytes);
    };
    match stored(column) {
        Stored::Int32 { bits, signed } => {
            random(rows * 4);
            let values: Vec<i32> = bytes
                .chunks_exact(4)
                .map(|b| {
                    let raw = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    let shift = 32 - u32::from(bits);
                    if signed {
                        ((raw << shift) as i32) >> shift
                    } else {
                        (raw >> shift) as i32
                    }
                })
                .collect();
            writer
                .typed::<Int32Type>()
                .write_batch(&values, None, None)?;
        }
        Stored::Int64 { .. } => {
            random(rows * 8);
            let values: Vec<i64> = bytes
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect();
            writer
                .typed::<Int64Type>()
                .write_batch(&values, None, None)?;
        }
        Stored::Float => {
            random(rows * 4);
            // Values in [0, 1), as numpy's random floats: never NaN or infinite.
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) >> 8) as f32 / 16_777_216.0)
                .collect();
            writer
                .typed::<FloatType>()
                .write_batch(&values, None, None)?;
        }
        Stored::Double => {
            random(rows * 8);
            let values: Vec<f64> = bytes
                .chunks_exact(8)
                .map(|b| {
                    (u64::from_le_bytes(b.try_into().unwrap_or_default()) >> 11) as f64
                        / 9_007_199_254_740_992.0
                })
                .collect();
            writer
                .typed::<DoubleType>()
                .write_batch(&values, None, None)?;
        }
        Stored::Bool => {
            random(rows);
            let values: Vec<bool> = bytes.iter().map(|b| b & 1 == 1).collect();
            writer
                .typed::<BoolType>()
                .write_batch(&values, None, None)?;
        }
        Stored::Text => {
            random(rows * 4);
            let values: Vec<ByteArray> = bytes
                .chunks_exact(4)
                .map(|b| {
                    *serial += 1;
                    let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) >> 1;
                    ByteArray::from(format!("s_{v}").into_bytes())
                })
                .collect();
            writer
                .typed::<ByteArrayType>()
                .write_batch(&values, None, None)?;
        }
        Stored::Binary => {
            let size = column.size.max(1) as usize;
            random(rows * size);
            let values: Vec<ByteArray> = bytes
                .chunks_exact(size)
                .map(|b| ByteArray::from(b.to_vec()))
                .collect();
            writer
                .typed::<ByteArrayType>()
                .write_batch(&values, None, None)?;
        }
        Stored::Fixed(len) => {
            random(rows * len);
            let values: Vec<FixedLenByteArray> = bytes
                .chunks_exact(len)
                .map(|b| FixedLenByteArray::from(ByteArray::from(b.to_vec())))
                .collect();
            writer
                .typed::<FixedLenByteArrayType>()
                .write_batch(&values, None, None)?;
        }
    }
    Ok(())
}

struct OpenFile {
    footer: Arc<Footer>,
    handle: Box<dyn dlio_storage::ReadHandle>,
    /// Closed by the loader but kept open until the epoch ends; `closed_at` orders them.
    closed: bool,
    closed_at: u64,
}

/// Reads the `read: true` columns of files written with a column schema.
pub(crate) struct ColumnReader {
    selected: Vec<String>,
    nominal_row_bytes: usize,
    open: rustc_hash::FxHashMap<FileKey, OpenFile>,
    /// Row groups read lately, as (file, group).
    recent: VecDeque<(FileKey, usize)>,
    buffer: Option<IoBuffer>,
    alignment: usize,
    sample: Vec<u8>,
    /// Footers of files opened lately, with the order they came in (the oldest leaves first).
    footers: rustc_hash::FxHashMap<FileKey, Arc<Footer>>,
    footer_order: VecDeque<FileKey>,
    /// Files of `open` that are closed (kept open), and a clock of the closes.
    closed: usize,
    closes: u64,
    /// The row groups this loader's threads fetched; none for a reader of its own.
    shared: Option<Arc<SharedRowGroups>>,
    epoch: u32,
}

impl ColumnReader {
    /// A reader of the `read: true` columns, sharing fetched row groups through `shared`.
    pub(crate) fn new(
        columns: &[ParquetColumn],
        shared: Option<Arc<SharedRowGroups>>,
    ) -> ColumnReader {
        let selected: Vec<&ParquetColumn> = columns.iter().filter(|c| c.read).collect();
        ColumnReader {
            nominal_row_bytes: selected.iter().map(|c| column_row_bytes(c)).sum::<u64>() as usize,
            selected: selected.iter().map(|c| c.name.clone()).collect(),
            open: rustc_hash::FxHashMap::default(),
            recent: VecDeque::new(),
            buffer: None,
            alignment: 1,
            sample: Vec::new(),
            footers: rustc_hash::FxHashMap::default(),
            footer_order: VecDeque::new(),
            closed: 0,
            closes: 0,
            shared,
            epoch: 0,
        }
    }
}

impl ColumnReader {
    /// Reads the footer through `handle` and finds the selected columns' chunks in every row
    /// group; hands the handle back for the row-group reads.
    fn read_footer(
        &self,
        handle: Box<dyn dlio_storage::ReadHandle>,
        path: &Path,
    ) -> Result<(Footer, Box<dyn dlio_storage::ReadHandle>), FormatError> {
        let chunks_len = handle.len();
        let shared = Arc::new(Mutex::new(handle));
        let chunks = StorageChunks {
            len: chunks_len,
            handle: Arc::clone(&shared),
            alignment: self.alignment,
        };
        let reader = SerializedFileReader::new(chunks).map_err(|e| {
            FormatError::corrupt(path, 0, format!("not a readable parquet file: {e}"))
        })?;
        let metadata = reader.metadata();
        check_column_ranges(path, metadata, chunks_len)?;
        let schema = metadata.file_metadata().schema_descr();
        let names: Vec<String> = (0..schema.num_columns())
            .map(|i| schema.column(i).name().to_string())
            .collect();
        let mut indices = Vec::with_capacity(self.selected.len());
        for wanted in &self.selected {
            match names.iter().position(|n| n == wanted) {
                Some(i) => indices.push(i),
                None => {
                    return Err(FormatError::unsupported(
                        format!(
                            "{}: dataset.parquet.columns names `{wanted}` (read: true), but the \
                             file's columns are {}",
                            path.display(),
                            names.join(", ")
                        ),
                        "make dataset.parquet.columns match the files, or regenerate them \
                         (++workload.workflow.generate_data=True)",
                    ));
                }
            }
        }
        let ranges = metadata
            .row_groups()
            .iter()
            .map(|group| {
                let mut spans: Vec<(u64, u64)> = indices
                    .iter()
                    .map(|&i| group.column(i).byte_range())
                    .collect();
                spans.sort_unstable();
                let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
                for (start, len) in spans {
                    match merged.last_mut() {
                        Some((s, l)) if *s + *l == start => *l += len,
                        _ => merged.push((start, len)),
                    }
                }
                merged
            })
            .collect();
        let footer = Footer {
            path: path.to_path_buf(),
            id: {
                use std::hash::{BuildHasher, BuildHasherDefault};
                BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(path)
            },
            group_starts: group_starts(metadata),
            ranges,
        };
        // The parquet reader held the only other reference to the handle.
        drop(reader);
        let handle = Arc::try_unwrap(shared)
            .map_err(|_| {
                FormatError::unsupported(
                    format!("{}: the footer reader kept the file handle", path.display()),
                    "report this as a dlio bug",
                )
            })?
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok((footer, handle))
    }
}

impl FormatReader for ColumnReader {
    /// Opens the file; reads its footer only when it is not remembered from an earlier open.
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        // A file closed after an earlier sample is still open: flag flips, no system call.
        if let Some(file) = self.open.get_mut(&key) {
            if file.footer.path == path {
                if file.closed {
                    file.closed = false;
                    self.closed -= 1;
                }
                return Ok(());
            }
            if file.closed {
                self.closed -= 1;
            }
            self.open.remove(&key);
        }
        let mut handle = storage.open(path)?;
        self.alignment = storage.capabilities().alignment;
        let footer = match self.footers.get(&key).filter(|f| f.path == path) {
            Some(footer) => Arc::clone(footer),
            None => {
                let (footer, back) = self.read_footer(handle, path)?;
                handle = back;
                let footer = Arc::new(footer);
                if self.footer_order.len() >= FOOTER_CACHE
                    && let Some(oldest) = self.footer_order.pop_front()
                {
                    self.footers.remove(&oldest);
                }
                self.footer_order.push_back(key);
                self.footers.insert(key, Arc::clone(&footer));
                footer
            }
        };
        self.open.insert(
            key,
            OpenFile {
                footer,
                handle,
                closed: false,
                closed_at: 0,
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
            .get_mut(&key)
            .filter(|f| !f.closed)
            .ok_or(FormatError::FileNotOpen { key })?;
        let footer = &file.footer;
        let group = row_group_of(&footer.group_starts, &footer.path, u64::from(index))?;
        if !self.recent.contains(&(key, group)) {
            let shared = self.shared.clone();
            let claim = shared
                .as_deref()
                .map(|s| s.claim(self.epoch, footer.id, group as u32));
            let fetch = !matches!(claim, Some(Claim::Fetched));
            for &(offset, len) in footer.ranges[group].iter().filter(|_| fetch) {
                let len = usize::try_from(len).map_err(|_| {
                    FormatError::corrupt(&footer.path, offset, "a column chunk larger than memory")
                })?;
                read_range(
                    &mut *file.handle,
                    &mut self.buffer,
                    self.alignment,
                    offset,
                    len,
                )?;
            }
            if let Some(Claim::Fetch(claim)) = claim {
                claim.done();
            }
            if self.recent.len() >= ROW_GROUP_CACHE {
                self.recent.pop_front();
            }
            self.recent.push_back((key, group));
        }
        // The loop gets the selected columns' share of a row, as the fork hands it a dummy
        // tensor: nothing was decoded.
        let n = self.nominal_row_bytes;
        if self.sample.len() < n {
            self.sample.resize(n, 0);
        }
        Ok(&self.sample[..n])
    }

    fn close(&mut self, key: FileKey) {
        let Some(file) = self.open.get_mut(&key).filter(|f| !f.closed) else {
            return;
        };
        file.closed = true;
        file.closed_at = self.closes;
        self.closes += 1;
        self.closed += 1;
        if self.closed > KEPT_OPEN {
            // The file closed longest ago is closed for real (a scan of about KEPT_OPEN
            // entries, once per file beyond them).
            let oldest = self
                .open
                .iter()
                .filter(|(_, f)| f.closed)
                .min_by_key(|(_, f)| f.closed_at)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.open.remove(&oldest);
                self.closed -= 1;
            }
        }
    }

    /// A new epoch opens its files again and reads their footers (the fork's reader reopens
    /// them every epoch) and fetches its row groups again.
    fn begin_epoch(&mut self, epoch: u32) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.open.retain(|_, f| !f.closed);
            self.closed = 0;
            self.recent.clear();
            self.footers.clear();
            self.footer_order.clear();
        }
    }
}
