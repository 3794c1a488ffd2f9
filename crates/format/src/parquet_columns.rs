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

use std::path::Path;
use std::sync::{Arc, Mutex};

use dlio_config::{ParquetColumn, ParquetCompression};
use dlio_storage::{ReadHandle, Storage};
use parquet::basic::{IntType, LogicalType, Repetition, Type as Physical};
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, DoubleType, FixedLenByteArray, FixedLenByteArrayType,
    FloatType, Int32Type, Int64Type,
};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::ChunkReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use crate::columnar::{ColumnReader, Footer, UnitIndex, merge_adjacent};
use crate::parquet::{
    StorageChunks, check_column_ranges, codec, group_starts, parquet_write_error,
};
use crate::ranged::{BufferPlace, HandleWriter};
use crate::row_groups::SharedRowGroups;
use crate::{DataRng, FileLayout, FormatError};

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

/// A parquet file's units are its row groups; a row group's ranges are the column chunks of
/// the `read: true` columns.
pub(crate) struct ParquetIndex {
    /// The names of the columns read.
    selected: Vec<String>,
    /// `dataset.parquet.footer_read_size`: the footer is read as the file's last this-many
    /// bytes in one request (0: parquet-rs's own two reads, the length then the metadata).
    footer_read_size: u64,
    /// `dataset.parquet.coalesce_row_groups`: row groups fetched together (0 and 1: one).
    coalesce: u64,
}

/// Units of `n` consecutive row groups (the fork's `coalesce_rgs`): each fetched as one range,
/// from its first selected byte to its last, whatever lies between.
fn coalesce(
    starts: Vec<u64>,
    ranges: Vec<Vec<(u64, u64)>>,
    n: u64,
) -> (Vec<u64>, Vec<Vec<(u64, u64)>>) {
    let n = usize::try_from(n.max(1)).unwrap_or(usize::MAX);
    if n == 1 {
        return (starts, ranges);
    }
    let total = *starts.last().unwrap_or(&0);
    let mut unit_starts: Vec<u64> = starts[..starts.len().saturating_sub(1)]
        .iter()
        .step_by(n)
        .copied()
        .collect();
    unit_starts.push(total);
    let unit_ranges = ranges
        .chunks(n)
        .map(|groups| {
            let spans = groups.iter().flatten();
            let start = spans.clone().map(|r| r.0).min();
            let end = spans.map(|r| r.0 + r.1).max();
            match (start, end) {
                (Some(start), Some(end)) => vec![(start, end - start)],
                _ => Vec::new(),
            }
        })
        .collect();
    (unit_starts, unit_ranges)
}

/// The file's metadata (its footer), read through `handle` as parquet-rs reads it (8 bytes,
/// then the metadata), or, with `footer_read_size`, as pyarrow and Arrow C++ read it: the
/// last `footer_read_size` bytes in one request, then what the metadata needs beyond them.
pub(crate) fn read_metadata(
    handle: Box<dyn ReadHandle>,
    path: &Path,
    place: BufferPlace,
    footer_read_size: u64,
) -> Result<(ParquetMetaData, Box<dyn ReadHandle>), FormatError> {
    let len = handle.len();
    let shared = Arc::new(Mutex::new(handle));
    let chunks = StorageChunks {
        len,
        handle: Arc::clone(&shared),
        place,
    };
    let unreadable = |e: parquet::errors::ParquetError| {
        FormatError::corrupt(path, 0, format!("not a readable parquet file: {e}"))
    };
    let metadata = if footer_read_size == 0 {
        ParquetMetaDataReader::new()
            .parse_and_finish(&chunks)
            .map_err(unreadable)?
    } else {
        let tail = footer_read_size.min(len);
        let bytes = chunks
            .get_bytes(len - tail, tail as usize)
            .map_err(unreadable)?;
        let mut reader = ParquetMetaDataReader::new();
        match reader.try_parse_sized(&bytes, len) {
            Ok(()) => {}
            Err(parquet::errors::ParquetError::NeedMoreData(needed)) => {
                let needed = (needed as u64).min(len);
                let bytes = chunks
                    .get_bytes(len - needed, needed as usize)
                    .map_err(unreadable)?;
                reader.try_parse_sized(&bytes, len).map_err(unreadable)?;
            }
            Err(e) => return Err(unreadable(e)),
        }
        reader.finish().map_err(unreadable)?
    };
    check_column_ranges(path, &metadata, len)?;
    drop(chunks);
    // The chunk reader held the only other reference to the handle.
    let handle = Arc::try_unwrap(shared)
        .map_err(|_| {
            FormatError::unsupported(
                format!("{}: the footer reader kept the file handle", path.display()),
                "report this as a dlio bug",
            )
        })?
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok((metadata, handle))
}

impl UnitIndex for ParquetIndex {
    /// Reads the footer through `handle` and finds the selected columns' chunks in every row
    /// group.
    fn read(
        &self,
        handle: Box<dyn ReadHandle>,
        path: &Path,
        place: BufferPlace,
    ) -> Result<(Footer, Box<dyn ReadHandle>), FormatError> {
        let (metadata, handle) = read_metadata(handle, path, place, self.footer_read_size)?;
        let metadata = &metadata;
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
                merge_adjacent(
                    indices
                        .iter()
                        .map(|&i| group.column(i).byte_range())
                        .collect(),
                )
            })
            .collect();
        let (group_starts, ranges) = coalesce(group_starts(metadata), ranges, self.coalesce);
        let footer = Footer {
            path: path.to_path_buf(),
            id: Footer::id_of(path),
            group_starts,
            ranges,
        };
        Ok((footer, handle))
    }
}

/// A reader of the `read: true` columns of files written with a column schema, sharing
/// fetched row groups through `shared`.
pub(crate) fn column_reader(
    columns: &[ParquetColumn],
    footer: FooterReads,
    shared: Option<Arc<SharedRowGroups>>,
) -> ColumnReader {
    let selected: Vec<&ParquetColumn> = columns.iter().filter(|c| c.read).collect();
    ColumnReader::new(
        Box::new(ParquetIndex {
            selected: selected.iter().map(|c| c.name.clone()).collect(),
            footer_read_size: footer.read_size,
            coalesce: footer.coalesce,
        }),
        selected.iter().map(|c| column_row_bytes(c)).sum(),
        shared,
    )
    .keep_footers_across_epochs(footer.cache)
}

/// How a reader reads parquet footers: `dataset.parquet.footer_read_size` and
/// `dataset.parquet.metadata_cache`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FooterReads {
    /// The file's last this-many bytes in one request (0: the length, then the metadata).
    pub read_size: u64,
    /// Once per file and run, not per epoch.
    pub cache: bool,
    /// Row groups fetched together (`dataset.parquet.coalesce_row_groups`; 0 and 1: one).
    pub coalesce: u64,
}

/// A parquet file's layout as a characterisation of a traced program reads it: the rows of
/// each row group, each column's chunk in each, the columns in dlio's vocabulary (a byte-array
/// column as `binary` of its mean bytes per row, its 4-byte length prefixes left out) and the
/// footer's length.
#[derive(Debug, Clone)]
pub struct ParquetLayout {
    /// Rows of each row group.
    pub rows_per_group: Vec<u64>,
    /// The columns, in file order, every one `read: true`.
    pub columns: Vec<ParquetColumn>,
    /// Per row group, per column: the chunk's (offset, length).
    pub chunks: Vec<Vec<(u64, u64)>>,
    /// The file's size.
    pub file_bytes: u64,
}

/// The layout of the parquet file at `path` (its footer read through the POSIX engine).
pub fn parquet_layout(path: &Path) -> Result<ParquetLayout, FormatError> {
    let storage = dlio_storage::PosixStorage::new();
    let handle = storage.open(path)?;
    let file_bytes = handle.len();
    let (metadata, _) = read_metadata(handle, path, BufferPlace::from(1), 0)?;
    let schema = metadata.file_metadata().schema_descr();
    let groups = metadata.row_groups();
    let total_rows: u64 = groups.iter().map(|g| g.num_rows().max(0) as u64).sum();
    let columns = (0..schema.num_columns())
        .map(|i| {
            let c = schema.column(i);
            let chunk_bytes: u64 = groups.iter().map(|g| g.column(i).byte_range().1).sum();
            let per_row = chunk_bytes / total_rows.max(1);
            let nested = c.max_rep_level() > 0;
            let (dtype, size) = match (c.physical_type(), c.logical_type_ref()) {
                // A list (pyarrow's fixed_size_list or list): its chunk's bytes per row, with
                // its levels, as a vector of that many bytes.
                _ if nested => ("uint8", per_row.max(1)),
                (Physical::BOOLEAN, _) => ("bool", 1),
                (
                    Physical::INT32,
                    Some(LogicalType::Integer(IntType {
                        bit_width,
                        is_signed,
                    })),
                ) => (
                    match (bit_width, is_signed) {
                        (8, true) => "int8",
                        (8, false) => "uint8",
                        (16, true) => "int16",
                        (16, false) => "uint16",
                        (_, false) => "uint32",
                        _ => "int32",
                    },
                    1,
                ),
                (Physical::INT32, _) => ("int32", 1),
                (
                    Physical::INT64,
                    Some(LogicalType::Integer(IntType {
                        is_signed: false, ..
                    })),
                ) => ("uint64", 1),
                (Physical::INT64 | Physical::INT96, _) => ("int64", 1),
                (Physical::FLOAT, _) => ("float32", 1),
                (Physical::DOUBLE, _) => ("float64", 1),
                (Physical::FIXED_LEN_BYTE_ARRAY, Some(LogicalType::Float16)) => ("float16", 1),
                (Physical::FIXED_LEN_BYTE_ARRAY, _) => ("uint8", c.type_length().max(1) as u64),
                (Physical::BYTE_ARRAY, Some(LogicalType::String)) => ("string", 1),
                (Physical::BYTE_ARRAY, _) => ("binary", per_row.saturating_sub(4).max(1)),
            };
            ParquetColumn {
                // A nested column's leaf is `element` (or `item`): the field is its top.
                name: if nested {
                    c.path().parts()[0].clone()
                } else {
                    c.name().to_string()
                },
                dtype: dtype.to_string(),
                size,
                read: true,
            }
        })
        .collect();
    Ok(ParquetLayout {
        rows_per_group: groups.iter().map(|g| g.num_rows().max(0) as u64).collect(),
        columns,
        chunks: groups
            .iter()
            .map(|g| {
                (0..g.num_columns())
                    .map(|i| g.column(i).byte_range())
                    .collect()
            })
            .collect(),
        file_bytes,
    })
}
