//! `csv`: one sample per row, `d1·d2` comma-separated numbers of the record element type, no
//! header and no index column (what `pd.read_csv(f, header=None)` reads back as a
//! `(samples, d1·d2)` table). Every row holds its own random sample, so files never repeat
//! content (upstream repeats one row).
//!
//! `dataset.compression` compresses the whole file as pandas does, and the file name gets the
//! matching extension (`.csv.gz`, `.csv.zip`) so the lister finds it again (upstream writes
//! `.csv.gz` files that its own lister never finds: bug B15). gzip and zip are built in;
//! bz2 and xz are refused with an error that names the codecs that work.
//!
//! Reading parses the whole file, as `pd.read_csv(...).to_numpy()` does: the file is read,
//! decompressed when its first bytes say it is gzip or zip (pandas infers by extension; the
//! magic number is more robust), every value parsed into the element type, and a sample is a
//! row of that table. This is the CPU-heavy pattern CANDLE showed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_storage::{IoBuffer, Storage};

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::ranged::{BufferPlace, HandleWriter, read_range};
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// The `csv` format, with the file-name extension its compression needs.
/// `csv`: one sample per row, optionally compressed (which also names the files).
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Csv,
    aliases: &[],
    extensions: &["csv"],
    magic: &[],
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: true,
    check: no_checks,
    build: |dataset, _| {
        Ok(Box::new(CsvFormat {
            compression: dataset.compression,
        }))
    },
};

#[derive(Debug, Clone, Copy)]
pub(crate) struct CsvFormat {
    pub(crate) compression: Compression,
}

/// The file extension (without the leading dot) of csv files compressed with `compression`.
pub(crate) fn csv_extension(compression: Compression) -> &'static str {
    match compression {
        Compression::Gzip => "csv.gz",
        Compression::Zip => "csv.zip",
        Compression::Bz2 => "csv.bz2",
        Compression::Xz => "csv.xz",
        Compression::None
        | Compression::Lzf
        | Compression::Snappy
        | Compression::Zstd
        | Compression::Lz4 => "csv",
    }
}

fn check_compression(compression: Compression) -> Result<(), FormatError> {
    match compression {
        Compression::None | Compression::Gzip | Compression::Zip => Ok(()),
        Compression::Bz2 | Compression::Xz => Err(FormatError::unsupported(
            format!(
                "csv compression {} is not built into this dlio",
                csv_extension(compression).trim_start_matches("csv.")
            ),
            "set dataset.compression to gzip, zip or none",
        )),
        Compression::Lzf => Err(FormatError::unsupported(
            "lzf is an HDF5 filter, not a csv compression",
            "set dataset.compression to gzip, zip or none for csv",
        )),
        Compression::Snappy | Compression::Zstd | Compression::Lz4 => {
            Err(FormatError::unsupported(
                format!("{compression:?} is a parquet codec, not a csv compression"),
                "set dataset.compression to gzip, zip or none for csv",
            ))
        }
    }
}

/// Appends the text of one element (drawn from `bytes`, `itemsize` random bytes) to `out`.
fn push_value(out: &mut Vec<u8>, element: ElementType, bytes: &[u8]) {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    let raw = u64::from_le_bytes(word);
    // Floats: a value in [0, 1) with the precision of the type, written in its shortest form.
    let unit = |bits: u32| (raw >> (64 - bits)) as f64 / (1u64 << bits) as f64;
    let _ = match element {
        ElementType::Uint8 => write!(out, "{}", bytes[0]),
        ElementType::Int8 => write!(out, "{}", bytes[0] as i8),
        ElementType::Int16 => write!(out, "{}", raw as u16 as i16),
        ElementType::Int32 => write!(out, "{}", raw as u32 as i32),
        ElementType::Int64 => write!(out, "{}", raw as i64),
        ElementType::Uint16 => write!(out, "{}", raw as u16),
        ElementType::Uint32 => write!(out, "{}", raw as u32),
        ElementType::Uint64 => write!(out, "{raw}"),
        // pandas' spelling of a NumPy bool.
        ElementType::Bool => write!(out, "{}", if bytes[0] & 1 == 1 { "True" } else { "False" }),
        ElementType::Float16 => write!(out, "{}", unit(10) as f32),
        ElementType::Float32 => write!(out, "{}", unit(24) as f32),
        ElementType::Float64 => write!(out, "{}", unit(53)),
    };
}

impl Format for CsvFormat {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn extension(&self) -> &'static str {
        csv_extension(self.compression)
    }

    fn check_layout(&self, layout: &FileLayout) -> Result<(), FormatError> {
        check_compression(layout.compression)?;
        if layout.sample_dims.iter().product::<usize>() == 0 {
            // A row of no values is an empty line, which no csv reader returns as a row.
            return Err(FormatError::unsupported(
                format!(
                    "a csv sample of dims {:?} has no values, so its rows could not be read back",
                    layout.sample_dims
                ),
                "give dataset.record_dims (or record_length_bytes) at least one element",
            ));
        }
        Ok(())
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        check_compression(layout.compression)?;
        let width: usize = layout.sample_dims.iter().product();
        let itemsize = layout.element.size();
        let mut out = storage.create(path)?;
        let mut sink = HandleWriter::new(&mut *out);
        let mut random = vec![0u8; width * itemsize];
        let mut row = Vec::with_capacity(width * 4);
        {
            let mut encoder: Box<dyn Write + '_> = match layout.compression {
                Compression::Gzip => Box::new(flate2::write::GzEncoder::new(
                    &mut sink,
                    flate2::Compression::default(),
                )),
                Compression::Zip => {
                    let mut zip = zip::ZipWriter::new_stream(&mut sink);
                    let member = path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .map(|n| n.trim_end_matches(".zip").to_string())
                        .unwrap_or_else(|| "data.csv".into());
                    zip.start_file(
                        member,
                        zip::write::SimpleFileOptions::default()
                            .compression_method(zip::CompressionMethod::Deflated),
                    )
                    .map_err(|e| zip_error(path, e))?;
                    Box::new(ZipMember(Some(zip)))
                }
                _ => Box::new(&mut sink),
            };
            for _ in 0..layout.samples {
                rng.fill(&mut random);
                row.clear();
                for (i, value) in random.chunks_exact(itemsize).enumerate() {
                    if i > 0 {
                        row.push(b',');
                    }
                    push_value(&mut row, layout.element, value);
                }
                row.push(b'\n');
                encoder.write_all(&row).map_err(|e| io_error(path, e))?;
            }
            encoder.flush().map_err(|e| io_error(path, e))?;
        }
        sink.flush_pending()?;
        Ok(out.commit()?)
    }

    fn reader(&self, layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(CsvReader {
            element: layout.element,
            file: None,
            text: Vec::new(),
            tables: rustc_hash::FxHashMap::default(),
            spare: Vec::new(),
        })
    }
}

/// Finishes the zip member and the archive when dropped through `Write::flush`.
struct ZipMember<W: Write>(Option<zip::ZipWriter<zip::write::StreamWriter<W>>>);

impl<W: Write> Write for ZipMember<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.as_mut() {
            Some(zip) => zip.write(buf),
            None => Err(std::io::Error::other("the zip archive is already finished")),
        }
    }

    /// Finishes the archive (the caller flushes once, after the last row).
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(zip) = self.0.take() {
            let mut inner = zip.finish().map_err(std::io::Error::other)?;
            inner.flush()?;
        }
        Ok(())
    }
}

fn io_error(path: &Path, e: std::io::Error) -> FormatError {
    match e.downcast::<dlio_storage::StorageError>() {
        Ok(storage) => FormatError::Storage(storage),
        Err(e) => FormatError::corrupt(path, 0, format!("writing: {e}")),
    }
}

fn zip_error(path: &Path, e: zip::result::ZipError) -> FormatError {
    FormatError::corrupt(path, 0, format!("zip: {e}"))
}

/// One parsed file: `rows` samples of `width` values each, as element bytes.
#[derive(Default)]
struct Table {
    path: PathBuf,
    values: Vec<u8>,
    rows: usize,
    row_bytes: usize,
}

struct CsvReader {
    element: ElementType,
    file: Option<IoBuffer>,
    /// Decompressed text.
    text: Vec<u8>,
    tables: rustc_hash::FxHashMap<FileKey, Table>,
    spare: Vec<Table>,
}

impl CsvReader {
    fn parse(
        &mut self,
        path: &Path,
        raw_is_text: bool,
        table: &mut Table,
    ) -> Result<(), FormatError> {
        let text: &[u8] = if raw_is_text {
            self.file.as_deref().unwrap_or_default()
        } else {
            &self.text
        };
        table.path.as_mut_os_string().clear();
        table.path.push(path);
        table.values.clear();
        table.rows = 0;
        table.row_bytes = 0;
        let itemsize = self.element.size();
        let mut reader = ::csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(text);
        let mut record = ::csv::ByteRecord::new();
        let mut width = None;
        loop {
            let position = reader.position().byte();
            match reader.read_byte_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    return Err(FormatError::corrupt(
                        path,
                        position,
                        format!("not csv: {e}"),
                    ));
                }
            }
            let w = *width.get_or_insert(record.len());
            if record.len() != w {
                return Err(FormatError::corrupt(
                    path,
                    position,
                    format!(
                        "row {} has {} values but the first row has {w} (a truncated or \
                         damaged file)",
                        table.rows,
                        record.len()
                    ),
                ));
            }
            for field in record.iter() {
                push_parsed(&mut table.values, self.element, field).ok_or_else(|| {
                    FormatError::corrupt(
                        path,
                        position,
                        format!(
                            "row {}: `{}` is not a {} value",
                            table.rows,
                            String::from_utf8_lossy(field),
                            self.element.name()
                        ),
                    )
                })?;
            }
            table.rows += 1;
        }
        table.row_bytes = width.unwrap_or(0) * itemsize;
        Ok(())
    }
}

/// Parses one field as `element` and appends its little-endian bytes.
fn push_parsed(out: &mut Vec<u8>, element: ElementType, field: &[u8]) -> Option<()> {
    let text = std::str::from_utf8(field).ok()?.trim();
    let int = || -> Option<i64> {
        text.parse::<i64>()
            .ok()
            .or_else(|| text.parse::<f64>().ok().map(|f| f as i64))
    };
    match element {
        ElementType::Uint8 => out.push(int()? as u8),
        ElementType::Int8 => out.push(int()? as i8 as u8),
        ElementType::Int16 => out.extend_from_slice(&(int()? as i16).to_le_bytes()),
        ElementType::Int32 => out.extend_from_slice(&(int()? as i32).to_le_bytes()),
        ElementType::Int64 => out.extend_from_slice(&int()?.to_le_bytes()),
        ElementType::Uint16 => out.extend_from_slice(&(int()? as u16).to_le_bytes()),
        ElementType::Uint32 => out.extend_from_slice(&(int()? as u32).to_le_bytes()),
        ElementType::Uint64 => out.extend_from_slice(
            &text
                .parse::<u64>()
                .ok()
                .or_else(|| int().map(|i| i as u64))?
                .to_le_bytes(),
        ),
        ElementType::Bool => out.push(match text {
            "True" | "true" | "1" => 1,
            "False" | "false" | "0" => 0,
            _ => return None,
        }),
        ElementType::Float16 => {
            out.extend_from_slice(&f32_to_f16_bits(text.parse::<f32>().ok()?).to_le_bytes())
        }
        ElementType::Float32 => out.extend_from_slice(&text.parse::<f32>().ok()?.to_le_bytes()),
        ElementType::Float64 => out.extend_from_slice(&text.parse::<f64>().ok()?.to_le_bytes()),
    }
    Some(())
}

/// IEEE half-precision bits of `value` (round toward zero; enough for emulated samples).
fn f32_to_f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        sign | 0x7c00
    } else if e <= 0 {
        if e < -10 {
            sign
        } else {
            let m = mantissa | 0x80_0000;
            sign | (m >> (14 - e)) as u16
        }
    } else {
        sign | ((e as u16) << 10) | (mantissa >> 13) as u16
    }
}

impl FormatReader for CsvReader {
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let mut handle = storage.open(path)?;
        let len = usize::try_from(handle.len()).map_err(|_| {
            FormatError::unsupported(
                format!("{} is too large to parse in memory", path.display()),
                "use smaller csv files",
            )
        })?;
        let place = BufferPlace::of(storage.capabilities());
        read_range(&mut *handle, &mut self.file, place, 0, len)?;
        drop(handle);
        let raw: &[u8] = self.file.as_deref().map_or(&[], |b| &b[..len]);
        let raw_is_text = if raw.starts_with(&[0x1f, 0x8b]) {
            self.text.clear();
            flate2::read::MultiGzDecoder::new(raw)
                .read_to_end(&mut self.text)
                .map_err(|e| FormatError::corrupt(path, 0, format!("bad gzip data: {e}")))?;
            false
        } else if raw.starts_with(b"PK\x03\x04") {
            self.text.clear();
            let mut archive = zip::ZipArchive::new(std::io::Cursor::new(raw))
                .map_err(|e| FormatError::corrupt(path, 0, format!("bad zip archive: {e}")))?;
            let mut member = archive
                .by_index(0)
                .map_err(|e| FormatError::corrupt(path, 0, format!("bad zip archive: {e}")))?;
            member
                .read_to_end(&mut self.text)
                .map_err(|e| FormatError::corrupt(path, 0, format!("bad zip member: {e}")))?;
            false
        } else {
            true
        };
        if raw_is_text {
            // Parse straight from the file buffer (only `len` bytes of it are the file).
            if let Some(buffer) = self.file.as_mut() {
                buffer.resize(len)?;
            }
        }
        let mut table = self
            .tables
            .remove(&key)
            .or_else(|| self.spare.pop())
            .unwrap_or_default();
        match self.parse(path, raw_is_text, &mut table) {
            Ok(()) => {
                self.tables.insert(key, table);
                Ok(())
            }
            Err(e) => {
                self.spare.push(table);
                Err(e)
            }
        }
    }

    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        let table = self
            .tables
            .get(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        let i = index as usize;
        if i >= table.rows {
            return Err(FormatError::SampleOutOfRange {
                path: table.path.clone(),
                index: u64::from(index),
                samples: table.rows as u64,
            });
        }
        Ok(&table.values[i * table.row_bytes..(i + 1) * table.row_bytes])
    }

    fn close(&mut self, key: FileKey) {
        if let Some(table) = self.tables.remove(&key)
            && self.spare.len() < 4
        {
            self.spare.push(table);
        }
    }
}

#[cfg(test)]
mod tests {
    use dlio_storage::PosixStorage;

    use super::*;

    fn layout(compression: Compression, element: ElementType) -> FileLayout {
        FileLayout {
            samples: 3,
            sample_dims: vec![4, 5],
            element,
            compression,
            fixed_size: false,
        }
    }

    #[test]
    fn rows_of_width_d1_d2_are_read_back_as_element_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        for compression in [Compression::None, Compression::Gzip, Compression::Zip] {
            for element in [ElementType::Uint8, ElementType::Int16, ElementType::Float64] {
                let format = CsvFormat { compression };
                let path = dir.path().join(format!("f.{}", format.extension()));
                let l = layout(compression, element);
                format
                    .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
                    .unwrap();
                let mut reader = format.reader(&l);
                reader.open(&storage, 0, &path).unwrap();
                let rows: Vec<Vec<u8>> = (0..3)
                    .map(|i| reader.read_sample(&storage, 0, i).unwrap().to_vec())
                    .collect();
                assert!(rows.iter().all(|r| r.len() == 20 * element.size()));
                assert_ne!(rows[0], rows[1], "rows hold different samples");
                assert!(reader.read_sample(&storage, 0, 3).is_err());
                if compression == Compression::None {
                    let text = std::fs::read_to_string(&path).unwrap();
                    assert_eq!(text.lines().count(), 3);
                    assert!(text.lines().all(|l| l.split(',').count() == 20));
                }
            }
        }
    }

    #[test]
    fn extensions_match_the_compression() {
        assert_eq!(
            CsvFormat {
                compression: Compression::Gzip
            }
            .extension(),
            "csv.gz"
        );
        assert_eq!(
            CsvFormat {
                compression: Compression::None
            }
            .extension(),
            "csv"
        );
        let err = CsvFormat {
            compression: Compression::Xz,
        }
        .generate(
            &PosixStorage::new(),
            Path::new("/nonexistent/x.csv.xz"),
            &layout(Compression::Xz, ElementType::Uint8),
            &mut DataRng::for_file(0, 0, 0),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("gzip, zip or none"), "{err}");
    }

    #[test]
    fn ragged_rows_are_reported_with_their_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.csv");
        std::fs::write(&path, "1,2,3\n4,5,6\n7,8\n").unwrap();
        let storage = PosixStorage::new();
        let format = CsvFormat {
            compression: Compression::None,
        };
        let mut reader = format.reader(&layout(Compression::None, ElementType::Uint8));
        let err = reader.open(&storage, 0, &path).unwrap_err().to_string();
        assert!(err.contains("offset 12") && err.contains("row 2"), "{err}");
    }

    #[test]
    fn half_precision_conversion_is_exact_for_simple_values() {
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f32_to_f16_bits(0.5), 0x3800);
        assert_eq!(f32_to_f16_bits(-2.0), 0xc000);
        assert_eq!(f32_to_f16_bits(0.0), 0);
    }
}
