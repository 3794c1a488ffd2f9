//! `npz`: a zip archive holding `x.npy` (the samples, shaped `(*sample_dims, samples)`) and
//! `y.npy` (`samples` zero labels), as DLIO's `np.savez(x=..., y=...)` writes it; stored by
//! default, deflated (`np.savez_compressed`) when `dataset.compression: zip`.
//!
//! The archive is written by a small streaming zip writer of our own rather than the `zip`
//! crate because storage handles are append-only (no `Seek`): each member's local header
//! is written with a zero CRC and sizes and flag bit 3, and a data descriptor with the real
//! values follows its data (CRC-32 computed on the fly with `crc32fast`). Sizes and offsets
//! that reach 4 GiB switch the member and the end records to zip64. Python's `zipfile` (and
//! hence `np.load`) reads such archives from the central directory.
//!
//! Reading parses the central directory to find `x.npy` (in any member order, stored or
//! deflated, zip64 or not) in the file bytes the reader owns.

use std::path::Path;

use dlio_config::{Compression, FormatKind};
use dlio_storage::{Storage, WriteHandle};
use flate2::{Compress, Decompress, FlushCompress, FlushDecompress, Status};

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::npy::{self, ByteSink};
use crate::whole_file::{ArrayLocation, ArrayLocator, WholeFileReader, grow};
use crate::{DataRng, FileLayout, Format, FormatError, FormatReader};

/// The member DLIO reads (`np.load(f)['x']`).
const SAMPLES_MEMBER: &str = "x.npy";
/// The labels member.
const LABELS_MEMBER: &str = "y.npy";

const LOCAL_HEADER_SIGNATURE: u32 = 0x0403_4b50;
const DATA_DESCRIPTOR_SIGNATURE: u32 = 0x0807_4b50;
const CENTRAL_HEADER_SIGNATURE: u32 = 0x0201_4b50;
const END_SIGNATURE: u32 = 0x0605_4b50;
const ZIP64_END_SIGNATURE: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIGNATURE: u32 = 0x0706_4b50;

const LOCAL_HEADER_LEN: u64 = 30;
const CENTRAL_HEADER_LEN: u64 = 46;
const END_LEN: u64 = 22;
const ZIP64_END_LEN: u64 = 56;
const ZIP64_LOCATOR_LEN: u64 = 20;
/// The zip64 extra field of a local header: id, size, both sizes.
const ZIP64_LOCAL_EXTRA_LEN: u64 = 20;
/// Header id of the zip64 extended-information extra field.
const ZIP64_EXTRA_ID: u16 = 0x0001;

/// A 32-bit field at this value means "see the zip64 record".
const ZIP64_MARKER: u32 = 0xFFFF_FFFF;
/// Bit 3: CRC and sizes are in the data descriptor after the data.
const FLAG_DATA_DESCRIPTOR: u16 = 1 << 3;
const FLAG_ENCRYPTED: u16 = 1;
const METHOD_STORED: u16 = 0;
const METHOD_DEFLATED: u16 = 8;
/// MS-DOS date 1980-01-01 (time 00:00): a fixed timestamp, so that the same seed gives
/// byte-identical files.
const DOS_DATE: u16 = (1 << 5) | 1;
/// Made by "Unix" (so the external attributes are Unix modes).
const MADE_BY_UNIX: u16 = 3 << 8;
/// `-rw-r--r--` regular file, in the high half of the external attributes.
const EXTERNAL_ATTRIBUTES: u32 = 0o100_644 << 16;
/// Deflate never expands data by more than this factor plus a small constant, so a member
/// whose claimed size exceeds it is corrupt (and is not allocated).
const MAX_DEFLATE_RATIO: u64 = 1032;

/// `npz`: `np.savez` archives of `x` (the samples) and `y` (labels).
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Npz,
    aliases: &[],
    extensions: &["npz"],
    magic: b"PK\x03\x04",
    stores_samples_as_they_are: true,
    read_as_bytes_by_the_fork: true,
    element: None,
    built: true,
    check: no_checks,
    build: |_, _| Ok(Box::new(NpzFormat)),
};

/// The `npz` format.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NpzFormat;

impl Format for NpzFormat {
    fn name(&self) -> &'static str {
        "npz"
    }

    fn extension(&self) -> &'static str {
        "npz"
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let method = method_for(layout.compression)?;
        let mut out = storage.create(path)?;
        write_archive(&mut *out, layout, rng, method, false)?;
        Ok(out.commit()?)
    }

    fn check_layout(&self, layout: &FileLayout) -> Result<(), FormatError> {
        method_for(layout.compression).map(|_| ())
    }

    fn expected_size(&self, layout: &FileLayout) -> Option<u64> {
        match method_for(layout.compression) {
            Ok(Method::Stored) => stored_archive_size(layout, false).ok(),
            _ => None, // deflated sizes depend on the data
        }
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(WholeFileReader::new(NpzLocator { inflater: None }))
    }
}

/// How members are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// `np.savez`.
    Stored,
    /// `np.savez_compressed`.
    Deflated,
}

impl Method {
    fn code(self) -> u16 {
        match self {
            Method::Stored => METHOD_STORED,
            Method::Deflated => METHOD_DEFLATED,
        }
    }
}

fn method_for(compression: Compression) -> Result<Method, FormatError> {
    match compression {
        Compression::None => Ok(Method::Stored),
        Compression::Zip => Ok(Method::Deflated),
        other => Err(FormatError::unsupported(
            format!("npz files cannot be compressed with {other:?} (dataset.compression)"),
            "set dataset.compression to none (np.savez) or zip (np.savez_compressed) for dataset.format: npz",
        )),
    }
}

/// The two members' headers and data sizes.
struct Members {
    x_header: Vec<u8>,
    x_data: u64,
    y_header: Vec<u8>,
    y_data: u64,
}

impl Members {
    fn of(layout: &FileLayout) -> Result<Members, FormatError> {
        let samples = u64::from(layout.samples);
        Ok(Members {
            x_header: npy::encode_header(
                layout.element.numpy_descr(),
                false,
                &npy::array_shape(layout),
            ),
            x_data: npy::array_bytes(layout)?,
            y_header: npy::encode_header("|u1", false, &[samples]),
            y_data: samples,
        })
    }
}

/// Writes the whole archive to `out`. `force_zip64` writes every zip64 record even for small
/// archives (used by tests to exercise the >4 GiB layout without writing 4 GiB).
fn write_archive(
    out: &mut dyn WriteHandle,
    layout: &FileLayout,
    rng: &mut DataRng,
    method: Method,
    force_zip64: bool,
) -> Result<(), FormatError> {
    let members = Members::of(layout)?;
    let mut zip = ZipStreamWriter::new(out, method, force_zip64);

    let x_size = members.x_header.len() as u64 + members.x_data;
    zip.begin(SAMPLES_MEMBER, x_size)?;
    zip.put(&members.x_header)?;
    npy::write_random(&mut zip, rng, members.x_data)?;
    zip.end()?;

    let y_size = members.y_header.len() as u64 + members.y_data;
    zip.begin(LABELS_MEMBER, y_size)?;
    zip.put(&members.y_header)?;
    npy::write_zeros(&mut zip, members.y_data)?;
    zip.end()?;

    zip.finish()
}

/// The size of a stored archive, computed from the layout exactly as [`write_archive`]
/// lays it out.
fn stored_archive_size(layout: &FileLayout, force_zip64: bool) -> Result<u64, FormatError> {
    let members = Members::of(layout)?;
    let overflow =
        || FormatError::unsupported("the npz file would exceed 2^64 bytes", "use smaller files");
    let mut offset = 0u64;
    let mut central = 0u64;
    for (name, size) in [
        (
            SAMPLES_MEMBER,
            members.x_header.len() as u64 + members.x_data,
        ),
        (
            LABELS_MEMBER,
            members.y_header.len() as u64 + members.y_data,
        ),
    ] {
        let zip64 = force_zip64 || size >= u64::from(ZIP64_MARKER);
        let extra = if zip64 { ZIP64_LOCAL_EXTRA_LEN } else { 0 };
        let descriptor = if zip64 { 24 } else { 16 };
        let record = CentralRecord {
            name,
            method: Method::Stored,
            crc: 0,
            compressed: size,
            uncompressed: size,
            local_offset: offset,
            zip64_local: zip64,
        };
        central +=
            CENTRAL_HEADER_LEN + name.len() as u64 + record.central_extra(force_zip64).len() as u64;
        offset = [LOCAL_HEADER_LEN, name.len() as u64, extra, size, descriptor]
            .iter()
            .try_fold(offset, |acc, &n| acc.checked_add(n))
            .ok_or_else(overflow)?;
    }
    let end = if force_zip64 || needs_zip64_end(offset, central) {
        ZIP64_END_LEN + ZIP64_LOCATOR_LEN + END_LEN
    } else {
        END_LEN
    };
    offset
        .checked_add(central)
        .and_then(|n| n.checked_add(end))
        .ok_or_else(overflow)
}

fn needs_zip64_end(central_offset: u64, central_size: u64) -> bool {
    central_offset >= u64::from(ZIP64_MARKER) || central_size >= u64::from(ZIP64_MARKER)
}

/// One central-directory record, kept until the archive is finished.
struct CentralRecord {
    name: &'static str,
    method: Method,
    crc: u32,
    compressed: u64,
    uncompressed: u64,
    local_offset: u64,
    /// The local header has a zip64 extra field (and the descriptor 8-byte sizes).
    zip64_local: bool,
}

impl CentralRecord {
    fn sizes_need_zip64(&self, force: bool) -> bool {
        force
            || self.compressed >= u64::from(ZIP64_MARKER)
            || self.uncompressed >= u64::from(ZIP64_MARKER)
    }

    fn offset_needs_zip64(&self, force: bool) -> bool {
        force || self.local_offset >= u64::from(ZIP64_MARKER)
    }

    /// The zip64 extra field: the values whose 32-bit fields hold the marker, in the order
    /// uncompressed size, compressed size, local header offset.
    fn central_extra(&self, force: bool) -> Vec<u8> {
        let mut values = Vec::new();
        if self.sizes_need_zip64(force) {
            values.extend([self.uncompressed, self.compressed]);
        }
        if self.offset_needs_zip64(force) {
            values.push(self.local_offset);
        }
        if values.is_empty() {
            return Vec::new();
        }
        let mut extra = Vec::with_capacity(4 + 8 * values.len());
        extra.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
        extra.extend_from_slice(&(8 * values.len() as u16).to_le_bytes());
        for value in values {
            extra.extend_from_slice(&value.to_le_bytes());
        }
        extra
    }

    fn version_needed(&self, force: bool) -> u16 {
        if self.zip64_local || self.sizes_need_zip64(force) || self.offset_needs_zip64(force) {
            45
        } else {
            20
        }
    }
}

/// The member being written.
struct OpenMember {
    name: &'static str,
    local_offset: u64,
    zip64: bool,
    crc: crc32fast::Hasher,
    uncompressed: u64,
    compressed: u64,
}

/// Writes a zip archive to an append-only handle; see the module docs.
struct ZipStreamWriter<'a> {
    out: &'a mut dyn WriteHandle,
    method: Method,
    force_zip64: bool,
    /// Bytes written so far (the offset of the next record).
    offset: u64,
    records: Vec<CentralRecord>,
    member: Option<OpenMember>,
    deflater: Option<Compress>,
    /// Output buffer of the deflater.
    compressed: Vec<u8>,
}

impl<'a> ZipStreamWriter<'a> {
    fn new(out: &'a mut dyn WriteHandle, method: Method, force_zip64: bool) -> ZipStreamWriter<'a> {
        ZipStreamWriter {
            out,
            method,
            force_zip64,
            offset: 0,
            records: Vec::with_capacity(2),
            member: None,
            deflater: None,
            compressed: Vec::new(),
        }
    }

    fn emit(&mut self, bytes: &[u8]) -> Result<(), FormatError> {
        self.out.write_all(bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Starts member `name` of `size` uncompressed bytes (the size decides zip64).
    fn begin(&mut self, name: &'static str, size: u64) -> Result<(), FormatError> {
        let bound = match self.method {
            Method::Stored => size,
            // Deflate's worst case (zlib's deflateBound) with room to spare.
            Method::Deflated => size.saturating_add(size / 1024 + 1024),
        };
        let zip64 = self.force_zip64 || bound >= u64::from(ZIP64_MARKER);
        let mut header = Vec::with_capacity(64);
        put_u32(&mut header, LOCAL_HEADER_SIGNATURE);
        put_u16(&mut header, if zip64 { 45 } else { 20 });
        put_u16(&mut header, FLAG_DATA_DESCRIPTOR);
        put_u16(&mut header, self.method.code());
        put_u16(&mut header, 0); // time
        put_u16(&mut header, DOS_DATE);
        put_u32(&mut header, 0); // CRC: in the data descriptor
        let size_field = if zip64 { ZIP64_MARKER } else { 0 };
        put_u32(&mut header, size_field);
        put_u32(&mut header, size_field);
        put_u16(&mut header, name.len() as u16);
        put_u16(
            &mut header,
            if zip64 {
                ZIP64_LOCAL_EXTRA_LEN as u16
            } else {
                0
            },
        );
        header.extend_from_slice(name.as_bytes());
        if zip64 {
            put_u16(&mut header, ZIP64_EXTRA_ID);
            put_u16(&mut header, 16);
            put_u64(&mut header, 0);
            put_u64(&mut header, 0);
        }
        let local_offset = self.offset;
        self.emit(&header)?;
        if self.method == Method::Deflated {
            match &mut self.deflater {
                Some(deflater) => deflater.reset(),
                // Level 6, zlib's default, as Python's zipfile uses.
                None => self.deflater = Some(Compress::new(flate2::Compression::new(6), false)),
            }
            grow(&mut self.compressed, npy::WRITE_CHUNK_BYTES / 4);
        }
        self.member = Some(OpenMember {
            name,
            local_offset,
            zip64,
            crc: crc32fast::Hasher::new(),
            uncompressed: 0,
            compressed: 0,
        });
        Ok(())
    }

    /// Runs the deflater over `input` and writes what it produces.
    fn deflate(&mut self, mut input: &[u8], flush: FlushCompress) -> Result<u64, FormatError> {
        let mut produced = 0u64;
        loop {
            let Some(deflater) = self.deflater.as_mut() else {
                return Ok(produced);
            };
            let (in_before, out_before) = (deflater.total_in(), deflater.total_out());
            let status = deflater
                .compress(input, &mut self.compressed, flush)
                .map_err(|e| {
                    FormatError::unsupported(format!("deflate failed: {e}"), "report this as a bug")
                })?;
            let consumed = (deflater.total_in() - in_before) as usize;
            let written = (deflater.total_out() - out_before) as usize;
            input = &input[consumed..];
            if written > 0 {
                self.out.write_all(&self.compressed[..written])?;
                self.offset += written as u64;
                produced += written as u64;
            }
            let output_full = written == self.compressed.len();
            let done = match flush {
                FlushCompress::Finish => status == Status::StreamEnd,
                _ => input.is_empty() && !output_full,
            };
            if done {
                return Ok(produced);
            }
        }
    }

    /// Closes the member: flushes the deflater and writes the data descriptor.
    fn end(&mut self) -> Result<(), FormatError> {
        if self.method == Method::Deflated {
            let produced = self.deflate(&[], FlushCompress::Finish)?;
            if let Some(member) = self.member.as_mut() {
                member.compressed += produced;
            }
        }
        let Some(member) = self.member.take() else {
            return Ok(());
        };
        if !member.zip64 && member.compressed >= u64::from(ZIP64_MARKER) {
            // Cannot happen with the bound in `begin`; refuse to write a broken archive.
            return Err(FormatError::unsupported(
                format!("{} grew past 4 GiB without zip64 records", member.name),
                "report this as a bug",
            ));
        }
        let crc = member.crc.finalize();
        let mut descriptor = Vec::with_capacity(24);
        put_u32(&mut descriptor, DATA_DESCRIPTOR_SIGNATURE);
        put_u32(&mut descriptor, crc);
        if member.zip64 {
            put_u64(&mut descriptor, member.compressed);
            put_u64(&mut descriptor, member.uncompressed);
        } else {
            put_u32(&mut descriptor, member.compressed as u32);
            put_u32(&mut descriptor, member.uncompressed as u32);
        }
        self.emit(&descriptor)?;
        self.records.push(CentralRecord {
            name: member.name,
            method: self.method,
            crc,
            compressed: member.compressed,
            uncompressed: member.uncompressed,
            local_offset: member.local_offset,
            zip64_local: member.zip64,
        });
        Ok(())
    }

    /// Writes the central directory and the end records.
    fn finish(mut self) -> Result<(), FormatError> {
        let force = self.force_zip64;
        let central_offset = self.offset;
        let mut central = Vec::with_capacity(256);
        for record in &self.records {
            let extra = record.central_extra(force);
            let version_needed = record.version_needed(force);
            put_u32(&mut central, CENTRAL_HEADER_SIGNATURE);
            put_u16(&mut central, MADE_BY_UNIX | version_needed);
            put_u16(&mut central, version_needed);
            put_u16(&mut central, FLAG_DATA_DESCRIPTOR);
            put_u16(&mut central, record.method.code());
            put_u16(&mut central, 0); // time
            put_u16(&mut central, DOS_DATE);
            put_u32(&mut central, record.crc);
            if record.sizes_need_zip64(force) {
                put_u32(&mut central, ZIP64_MARKER);
                put_u32(&mut central, ZIP64_MARKER);
            } else {
                put_u32(&mut central, record.compressed as u32);
                put_u32(&mut central, record.uncompressed as u32);
            }
            put_u16(&mut central, record.name.len() as u16);
            put_u16(&mut central, extra.len() as u16);
            put_u16(&mut central, 0); // comment
            put_u16(&mut central, 0); // disk
            put_u16(&mut central, 0); // internal attributes
            put_u32(&mut central, EXTERNAL_ATTRIBUTES);
            let offset_field = if record.offset_needs_zip64(force) {
                ZIP64_MARKER
            } else {
                record.local_offset as u32
            };
            put_u32(&mut central, offset_field);
            central.extend_from_slice(record.name.as_bytes());
            central.extend_from_slice(&extra);
        }
        let central_size = central.len() as u64;
        let entries = self.records.len() as u64;
        let zip64_end = force || needs_zip64_end(central_offset, central_size);
        if zip64_end {
            let zip64_end_offset = central_offset + central_size;
            put_u32(&mut central, ZIP64_END_SIGNATURE);
            put_u64(&mut central, ZIP64_END_LEN - 12); // size of the rest of the record
            put_u16(&mut central, MADE_BY_UNIX | 45);
            put_u16(&mut central, 45);
            put_u32(&mut central, 0); // this disk
            put_u32(&mut central, 0); // disk of the central directory
            put_u64(&mut central, entries);
            put_u64(&mut central, entries);
            put_u64(&mut central, central_size);
            put_u64(&mut central, central_offset);
            put_u32(&mut central, ZIP64_LOCATOR_SIGNATURE);
            put_u32(&mut central, 0); // disk of the zip64 end record
            put_u64(&mut central, zip64_end_offset);
            put_u32(&mut central, 1); // disks
        }
        put_u32(&mut central, END_SIGNATURE);
        put_u16(&mut central, 0);
        put_u16(&mut central, 0);
        put_u16(&mut central, entries as u16);
        put_u16(&mut central, entries as u16);
        put_u32(
            &mut central,
            if zip64_end {
                ZIP64_MARKER
            } else {
                central_size as u32
            },
        );
        put_u32(
            &mut central,
            if zip64_end {
                ZIP64_MARKER
            } else {
                central_offset as u32
            },
        );
        put_u16(&mut central, 0); // comment
        self.emit(&central)
    }
}

impl ByteSink for ZipStreamWriter<'_> {
    fn put(&mut self, data: &[u8]) -> Result<(), FormatError> {
        let Some(member) = self.member.as_mut() else {
            return Err(FormatError::unsupported(
                "zip data written outside a member",
                "report this as a bug",
            ));
        };
        member.crc.update(data);
        member.uncompressed += data.len() as u64;
        match self.method {
            Method::Stored => {
                member.compressed += data.len() as u64;
                self.emit(data)
            }
            Method::Deflated => {
                let produced = self.deflate(data, FlushCompress::None)?;
                if let Some(member) = self.member.as_mut() {
                    member.compressed += produced;
                }
                Ok(())
            }
        }
    }
}

fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Finds `x.npy` in an npz file and locates its array (inflating it if needed).
struct NpzLocator {
    inflater: Option<Decompress>,
}

/// Little-endian field reads that report where the bytes ran out.
struct Fields<'a> {
    path: &'a Path,
    file: &'a [u8],
}

impl Fields<'_> {
    fn bytes(&self, offset: u64, len: u64, what: &str) -> Result<&[u8], FormatError> {
        usize::try_from(offset)
            .ok()
            .zip(usize::try_from(len).ok())
            .and_then(|(start, len)| self.file.get(start..start.checked_add(len)?))
            .ok_or_else(|| {
                FormatError::corrupt(
                    self.path,
                    offset.min(self.file.len() as u64),
                    format!("the file ends inside the {what} (it is truncated)"),
                )
            })
    }

    fn u16(&self, offset: u64, what: &str) -> Result<u16, FormatError> {
        let b = self.bytes(offset, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, offset: u64, what: &str) -> Result<u32, FormatError> {
        let b = self.bytes(offset, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&self, offset: u64, what: &str) -> Result<u64, FormatError> {
        let b = self.bytes(offset, 8, what)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(b);
        Ok(u64::from_le_bytes(word))
    }

    fn corrupt(&self, offset: u64, what: impl Into<String>) -> FormatError {
        FormatError::corrupt(self.path, offset, what)
    }
}

/// Where the central directory is.
struct Directory {
    offset: u64,
    size: u64,
}

/// What the central directory says about one member.
struct Member {
    flags: u16,
    method: u16,
    compressed: u64,
    uncompressed: u64,
    local_offset: u64,
}

fn find_directory(f: &Fields<'_>) -> Result<Directory, FormatError> {
    let len = f.file.len() as u64;
    // The end record is the last 22 bytes plus a comment of at most 65535 bytes.
    let not_zip = || f.corrupt(len, "not an npz file: no end-of-central-directory record");
    let last = len.checked_sub(END_LEN).ok_or_else(not_zip)?;
    let first = last.saturating_sub(u64::from(u16::MAX));
    let end = (first..=last)
        .rev()
        .find(|&at| f.u32(at, "end record").ok() == Some(END_SIGNATURE))
        .ok_or_else(not_zip)?;
    let mut directory = Directory {
        size: u64::from(f.u32(end + 12, "end record")?),
        offset: u64::from(f.u32(end + 16, "end record")?),
    };
    if end >= ZIP64_LOCATOR_LEN
        && f.u32(end - ZIP64_LOCATOR_LEN, "zip64 locator")? == ZIP64_LOCATOR_SIGNATURE
    {
        let zip64_end = f.u64(end - ZIP64_LOCATOR_LEN + 8, "zip64 locator")?;
        if f.u32(zip64_end, "zip64 end record")? != ZIP64_END_SIGNATURE {
            return Err(f.corrupt(
                zip64_end,
                "the zip64 locator does not point at a zip64 end record",
            ));
        }
        directory = Directory {
            size: f.u64(zip64_end + 40, "zip64 end record")?,
            offset: f.u64(zip64_end + 48, "zip64 end record")?,
        };
    }
    Ok(directory)
}

/// Scans the central directory for `name`.
fn find_member(
    f: &Fields<'_>,
    directory: &Directory,
    name: &str,
) -> Result<Option<Member>, FormatError> {
    // Walk the records that fit in the directory's size, as Python's zipfile does.
    let mut at = directory.offset;
    let end = directory.offset.saturating_add(directory.size);
    while at < end {
        if f.u32(at, "central directory")? != CENTRAL_HEADER_SIGNATURE {
            return Err(f.corrupt(at, "bad central directory record signature"));
        }
        let name_len = u64::from(f.u16(at + 28, "central directory")?);
        let extra_len = u64::from(f.u16(at + 30, "central directory")?);
        let comment_len = u64::from(f.u16(at + 32, "central directory")?);
        let member_name = f.bytes(at + CENTRAL_HEADER_LEN, name_len, "central directory")?;
        if member_name == name.as_bytes() {
            let mut member = Member {
                flags: f.u16(at + 8, "central directory")?,
                method: f.u16(at + 10, "central directory")?,
                compressed: u64::from(f.u32(at + 20, "central directory")?),
                uncompressed: u64::from(f.u32(at + 24, "central directory")?),
                local_offset: u64::from(f.u32(at + 42, "central directory")?),
            };
            let extra = f.bytes(
                at + CENTRAL_HEADER_LEN + name_len,
                extra_len,
                "central directory",
            )?;
            apply_zip64_extra(f, at + CENTRAL_HEADER_LEN + name_len, extra, &mut member)?;
            return Ok(Some(member));
        }
        at += CENTRAL_HEADER_LEN + name_len + extra_len + comment_len;
    }
    Ok(None)
}

/// Replaces the 32-bit fields that hold the zip64 marker with the values of the zip64
/// extra field (which lists only those, in a fixed order).
fn apply_zip64_extra(
    f: &Fields<'_>,
    base: u64,
    extra: &[u8],
    member: &mut Member,
) -> Result<(), FormatError> {
    let marker = u64::from(ZIP64_MARKER);
    let wanted = [member.uncompressed, member.compressed, member.local_offset]
        .iter()
        .filter(|&&v| v == marker)
        .count();
    if wanted == 0 {
        return Ok(());
    }
    let mut pos = 0usize;
    while pos + 4 <= extra.len() {
        let id = u16::from_le_bytes([extra[pos], extra[pos + 1]]);
        let len = usize::from(u16::from_le_bytes([extra[pos + 2], extra[pos + 3]]));
        let body = extra.get(pos + 4..pos + 4 + len).unwrap_or_default();
        if id == ZIP64_EXTRA_ID {
            let mut values = body.chunks_exact(8).map(|b| {
                let mut word = [0u8; 8];
                word.copy_from_slice(b);
                u64::from_le_bytes(word)
            });
            for field in [
                &mut member.uncompressed,
                &mut member.compressed,
                &mut member.local_offset,
            ] {
                if *field == marker {
                    *field = values.next().ok_or_else(|| {
                        f.corrupt(
                            base + pos as u64,
                            "the zip64 extra field is shorter than the fields it replaces",
                        )
                    })?;
                }
            }
            return Ok(());
        }
        pos += 4 + len;
    }
    Err(f.corrupt(base, "sizes point at a zip64 extra field that is missing"))
}

impl ArrayLocator for NpzLocator {
    fn locate(
        &mut self,
        path: &Path,
        file: &[u8],
        inflated: &mut Vec<u8>,
        location: &mut ArrayLocation,
    ) -> Result<(), FormatError> {
        let f = Fields { path, file };
        let directory = find_directory(&f)?;
        let member = find_member(&f, &directory, SAMPLES_MEMBER)?.ok_or_else(|| {
            FormatError::unsupported(
                format!("npz file {} has no array named 'x'", path.display()),
                "DLIO's npz files hold the samples in 'x' (np.savez(f, x=..., y=...)); generate the data with dlio",
            )
        })?;
        if member.flags & FLAG_ENCRYPTED != 0 {
            return Err(FormatError::unsupported(
                format!("{SAMPLES_MEMBER} in {} is encrypted", path.display()),
                "write the file with np.savez or np.savez_compressed",
            ));
        }
        let local = member.local_offset;
        if f.u32(local, "local header")? != LOCAL_HEADER_SIGNATURE {
            return Err(f.corrupt(
                local,
                format!("no local header for {SAMPLES_MEMBER} where the directory says"),
            ));
        }
        let name_len = u64::from(f.u16(local + 26, "local header")?);
        let extra_len = u64::from(f.u16(local + 28, "local header")?);
        let data_start = local + LOCAL_HEADER_LEN + name_len + extra_len;
        let data = f.bytes(
            data_start,
            member.compressed,
            &format!("data of {SAMPLES_MEMBER}"),
        )?;

        match member.method {
            METHOD_STORED => {
                location.inflated = false;
                npy::parse_array(data, location)
                    .map_err(|problem| problem.into_error(path, data_start, SAMPLES_MEMBER))?;
                location.data_start += data_start as usize;
            }
            METHOD_DEFLATED => {
                let limit = member
                    .compressed
                    .saturating_mul(MAX_DEFLATE_RATIO)
                    .saturating_add(1024);
                let size = usize::try_from(member.uncompressed)
                    .ok()
                    .filter(|_| member.uncompressed <= limit);
                let Some(size) = size else {
                    return Err(f.corrupt(local, format!(
                        "{SAMPLES_MEMBER} claims {} bytes inflated from {} compressed bytes, which deflate cannot produce",
                        member.uncompressed, member.compressed
                    )));
                };
                let out = grow(inflated, size);
                let inflater = match &mut self.inflater {
                    Some(inflater) => {
                        inflater.reset(false);
                        inflater
                    }
                    slot => slot.insert(Decompress::new(false)),
                };
                let status = inflater.decompress(data, out, FlushDecompress::Finish);
                let bad = |what: String| {
                    f.corrupt(
                        data_start,
                        format!("the deflate stream of {SAMPLES_MEMBER} {what}"),
                    )
                };
                match status {
                    Ok(Status::StreamEnd) if inflater.total_out() == member.uncompressed => {}
                    Ok(_) => {
                        return Err(bad(format!(
                            "does not inflate to the {} bytes the directory promises (got {} before stopping)",
                            member.uncompressed,
                            inflater.total_out()
                        )));
                    }
                    Err(e) => return Err(bad(format!("is invalid: {e}"))),
                }
                location.inflated = true;
                npy::parse_array(&inflated[..size], location).map_err(|problem| {
                    let inner = problem.into_error(path, 0, SAMPLES_MEMBER);
                    match inner {
                        FormatError::Corrupt { path, offset, what } => FormatError::Corrupt {
                            path,
                            offset: data_start,
                            what: format!("{what} (at byte {offset} of the inflated member)"),
                        },
                        other => other,
                    }
                })?;
            }
            other => {
                return Err(FormatError::unsupported(
                    format!(
                        "{SAMPLES_MEMBER} in {} is compressed with zip method {other}",
                        path.display()
                    ),
                    "only stored and deflated members can be read; write the file with np.savez or np.savez_compressed",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlio_config::ElementType;
    use dlio_storage::PosixStorage;

    fn layout(
        samples: u32,
        dims: &[usize],
        element: ElementType,
        compression: Compression,
    ) -> FileLayout {
        FileLayout {
            samples,
            sample_dims: dims.to_vec(),
            element,
            compression,
            fixed_size: false,
        }
    }

    fn write(
        dir: &Path,
        name: &str,
        layout: &FileLayout,
        method: Method,
        force_zip64: bool,
    ) -> Vec<u8> {
        let storage = PosixStorage::new();
        let path = dir.join(name);
        let mut out = storage.create(&path).unwrap();
        write_archive(
            &mut *out,
            layout,
            &mut DataRng::for_file(3, 0, 1),
            method,
            force_zip64,
        )
        .unwrap();
        out.commit().unwrap();
        std::fs::read(path).unwrap()
    }

    #[test]
    fn expected_size_is_the_written_size() {
        let dir = tempfile::tempdir().unwrap();
        for (samples, dims) in [
            (1, &[4, 4][..]),
            (3, &[17]),
            (8, &[]),
            (0, &[5, 5]),
            (2, &[64, 64, 3]),
        ] {
            for element in [ElementType::Uint8, ElementType::Float64] {
                for force in [false, true] {
                    let l = layout(samples, dims, element, Compression::None);
                    let bytes = write(dir.path(), "s.npz", &l, Method::Stored, force);
                    assert_eq!(
                        stored_archive_size(&l, force).unwrap(),
                        bytes.len() as u64,
                        "{l:?} zip64 {force}"
                    );
                }
            }
        }
    }

    #[test]
    fn forced_zip64_archive_is_read_by_our_reader_and_by_the_zip_crate() {
        let dir = tempfile::tempdir().unwrap();
        for method in [Method::Stored, Method::Deflated] {
            let l = layout(3, &[5, 7], ElementType::Int16, Compression::None);
            let bytes = write(dir.path(), "z.npz", &l, method, true);
            // The end records are zip64 ones.
            let tail = &bytes[bytes.len() - 22 - 20..];
            assert_eq!(&tail[..4], &ZIP64_LOCATOR_SIGNATURE.to_le_bytes());

            let mut archive = zip::ZipArchive::new(std::io::Cursor::new(&bytes)).unwrap();
            let mut x = Vec::new();
            std::io::Read::read_to_end(&mut archive.by_name("x.npy").unwrap(), &mut x).unwrap();
            let mut expected = vec![0u8; 3 * 5 * 7 * 2];
            DataRng::for_file(3, 0, 1).fill(&mut expected);
            assert_eq!(&x[x.len() - expected.len()..], &expected[..], "{method:?}");

            let mut reader = NpzFormat.reader(&l);
            reader
                .open(&PosixStorage::new(), 0, &dir.path().join("z.npz"))
                .unwrap();
            let sample = reader
                .read_sample(&PosixStorage::new(), 0, 0)
                .unwrap()
                .to_vec();
            // Sample 0 of int16 (5, 7, 3): element k at array element k * 3.
            let gathered: Vec<u8> = (0..35)
                .flat_map(|k| expected[k * 6..k * 6 + 2].to_vec())
                .collect();
            assert_eq!(sample, gathered, "{method:?}");
        }
    }

    #[test]
    fn numpy_loads_forced_zip64_archives() {
        let found = std::process::Command::new("python3")
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            assert_eq!(
                std::env::var("DLIO_SKIP_PYTHON").as_deref(),
                Ok("1"),
                "this test needs python3 with numpy: run `pip install numpy` (or set DLIO_SKIP_PYTHON=1)"
            );
            dlio_testkit::skip::opted_out("DLIO_SKIP_PYTHON", "numpy reading zip64 archives");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let l = layout(3, &[5, 7], ElementType::Float32, Compression::None);
        let mut expected = vec![0u8; 3 * 5 * 7 * 4];
        DataRng::for_file(3, 0, 1).fill(&mut expected);
        std::fs::write(dir.path().join("x.raw"), &expected).unwrap();
        for (name, method) in [
            ("stored.npz", Method::Stored),
            ("deflated.npz", Method::Deflated),
        ] {
            write(dir.path(), name, &l, method, true);
        }
        let script = "import sys, numpy as np\n\
            raw = open(sys.argv[1] + '/x.raw', 'rb').read()\n\
            for name in ['stored.npz', 'deflated.npz']:\n\
            \x20   with np.load(sys.argv[1] + '/' + name) as f:\n\
            \x20       x = f['x']\n\
            \x20       assert x.shape == (5, 7, 3) and x.dtype == np.float32, (name, x.shape, x.dtype)\n\
            \x20       assert x.tobytes() == raw, name\n\
            \x20       assert f['y'].dtype == np.uint8 and not f['y'].any(), name\n";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn large_sizes_switch_records_to_zip64() {
        let record = CentralRecord {
            name: "x.npy",
            method: Method::Stored,
            crc: 0,
            compressed: 5 << 30,
            uncompressed: 5 << 30,
            local_offset: 0,
            zip64_local: true,
        };
        let extra = record.central_extra(false);
        assert_eq!(extra.len(), 4 + 16);
        assert_eq!(&extra[4..12], &(5u64 << 30).to_le_bytes());
        let after = CentralRecord {
            local_offset: 5 << 30,
            compressed: 10,
            uncompressed: 10,
            zip64_local: false,
            ..record
        };
        assert_eq!(
            after.central_extra(false),
            [&[1, 0, 8, 0][..], &(5u64 << 30).to_le_bytes()].concat()
        );
        assert!(needs_zip64_end(5 << 30, 100));
        assert!(!needs_zip64_end(1 << 30, 100));
    }

    #[test]
    fn other_compressions_are_rejected_naming_the_key() {
        let error = method_for(Compression::Gzip).unwrap_err().to_string();
        assert!(error.contains("dataset.compression"), "{error}");
        assert!(error.contains("none") && error.contains("zip"), "{error}");
    }
}
