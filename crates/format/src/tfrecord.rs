//! `tfrecord`: TensorFlow's record files of `tf.train.Example` messages, as DLIO writes them:
//! every record is an `Example` with an `image` bytes feature (the sample, `d1·d2·itemsize`
//! bytes) and a `size` int64 feature, framed as TensorFlow frames records (little-endian
//! `u64` length, masked CRC32C of the length, the data, masked CRC32C of the data).
//!
//! Generation also writes the DALI index file DLIO's generator writes,
//! `{data_folder}/index/{train|valid}/{file name}.idx`, one `"{offset} {length}\n"` line per
//! record. The index is committed before the record file, so a record file that exists always
//! has its index.
//!
//! Two read patterns:
//! - [`FormatReader`] (PyTorch and other index loaders, which upstream rejects for tfrecord):
//!   the file's index is loaded at open and each sample is one read of exactly its record,
//!   whose CRCs are checked and whose `Example` is decoded.
//! - [`RecordStream`] (the tf.data path): a file is read front to back in `transfer_size`
//!   requests, as `TFRecordDataset(buffer_size=transfer_size)` reads it, and records are cut
//!   out of the stream with both CRCs checked.
//!
//! The messages are hand-written prost structs (no protoc needed).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use dlio_config::FormatKind;
use dlio_storage::{Extent, IoBuffer, ReadHandle, Storage, StorageError};
use prost::Message;
use prost::encoding::WireType;

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::ranged::{BufferPlace, list_folder, read_range, read_small_file, write_whole_file};
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// tf.data's read buffer when `reader.transfer_size` is unset (256 KiB).
pub const DEFAULT_TRANSFER_SIZE: usize = 256 * 1024;

/// `tf.train.Example`.
#[derive(Clone, PartialEq, Message)]
pub struct Example {
    /// The features.
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tf.train.Features`: name to feature.
#[derive(Clone, PartialEq, Message)]
pub struct Features {
    /// The features by name.
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: std::collections::BTreeMap<String, Feature>,
}

/// `tf.train.Feature`: one of three lists.
#[derive(Clone, PartialEq, Message)]
pub struct Feature {
    /// The list.
    #[prost(oneof = "FeatureKind", tags = "1, 2, 3")]
    pub kind: Option<FeatureKind>,
}

/// The lists a `tf.train.Feature` can hold.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum FeatureKind {
    /// `bytes_list`.
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    /// `float_list`.
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    /// `int64_list`.
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

/// `tf.train.BytesList`.
#[derive(Clone, PartialEq, Message)]
pub struct BytesList {
    /// The values.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `tf.train.FloatList`.
#[derive(Clone, PartialEq, Message)]
pub struct FloatList {
    /// The values.
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tf.train.Int64List`.
#[derive(Clone, PartialEq, Message)]
pub struct Int64List {
    /// The values.
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// TensorFlow's masked CRC32C.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Bytes of framing around each record: length (8), its CRC (4), data CRC (4).
const FRAMING: u64 = 16;

/// `tfrecord`: `tf.train.Example` records, found in place under the fork's semantics and decoded under upstream's.
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Tfrecord,
    aliases: &[],
    extensions: &["tfrecord", "tfrecords"],
    magic: &[],
    stores_samples_as_they_are: true,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: true,
    check: no_checks,
    build: |_, read| {
        Ok(Box::new(TfRecordFormat {
            decode: read.decode,
            check_data_crc: read.check_tfrecord_crc,
        }))
    },
};

/// The `tfrecord` format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TfRecordFormat {
    /// Decode each `Example` into an owned image (upstream DLIO); otherwise the image is found
    /// in place and handed out where it was read (the MLPerf Storage fork's readers, whose
    /// parse result the step never reads).
    pub(crate) decode: bool,
    /// Check every record's data CRC (the length's CRC is always checked).
    pub(crate) check_data_crc: bool,
}

/// The `Example` DLIO writes for one sample (with an empty image, filled in by the caller).
fn example_for(layout: &FileLayout, image_len: usize) -> Example {
    let size = layout.sample_dims.first().copied().unwrap_or(1) as i64;
    let mut feature = std::collections::BTreeMap::new();
    feature.insert(
        "image".to_string(),
        Feature {
            kind: Some(FeatureKind::BytesList(BytesList {
                value: vec![vec![0; image_len]],
            })),
        },
    );
    feature.insert(
        "size".to_string(),
        Feature {
            kind: Some(FeatureKind::Int64List(Int64List { value: vec![size] })),
        },
    );
    Example {
        features: Some(Features { feature }),
    }
}

/// Bytes of one record's payload and of the whole file.
fn sizes(layout: &FileLayout) -> Result<(usize, u64), FormatError> {
    let image = usize::try_from(layout.sample_bytes()).map_err(|_| {
        FormatError::unsupported(
            "a tfrecord sample larger than memory",
            "use smaller record dimensions",
        )
    })?;
    let payload = example_for(layout, image).encoded_len();
    let file = (payload as u64 + FRAMING)
        .checked_mul(u64::from(layout.samples))
        .ok_or_else(|| {
            FormatError::unsupported(
                "a tfrecord file of more than 2^64 bytes",
                "use fewer samples per file",
            )
        })?;
    Ok((payload, file))
}

/// Where DLIO keeps the index of the record file `path`:
/// `{data_folder}/index/{train|valid}/{file name}.idx`.
pub fn index_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or(path.as_os_str());
    let mut index_name = name.to_os_string();
    index_name.push(".idx");
    match list_folder(path) {
        Some((root, list)) => root.join("index").join(list).join(index_name),
        None => PathBuf::from("index").join(index_name),
    }
}

impl Format for TfRecordFormat {
    fn name(&self) -> &'static str {
        "tfrecord"
    }

    fn extension(&self) -> &'static str {
        "tfrecord"
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let (payload_len, _) = sizes(layout)?;
        let image_len = layout.sample_bytes() as usize;
        let mut example = example_for(layout, image_len);
        let mut index = String::new();
        let mut offset = 0u64;
        for _ in 0..layout.samples {
            let record = FRAMING + payload_len as u64;
            index.push_str(&format!("{offset} {record}\n"));
            offset += record;
        }
        let index_path = index_path(path);
        if let Some(dir) = index_path.parent() {
            storage.create_dir_all(dir)?;
        }
        let index_bytes = write_whole_file(storage, &index_path, index.as_bytes())?;

        let mut out = storage.create(path)?;
        let mut payload = Vec::with_capacity(payload_len);
        let mut frame = Vec::with_capacity(payload_len + FRAMING as usize);
        for _ in 0..layout.samples {
            if let Some(FeatureKind::BytesList(list)) = example
                .features
                .as_mut()
                .and_then(|f| f.feature.get_mut("image"))
                .and_then(|f| f.kind.as_mut())
                && let Some(image) = list.value.first_mut()
            {
                rng.fill(image);
            }
            payload.clear();
            example
                .encode(&mut payload)
                .map_err(|e| FormatError::corrupt(path, 0, format!("encoding: {e}")))?;
            frame.clear();
            let len = (payload.len() as u64).to_le_bytes();
            frame.extend_from_slice(&len);
            frame.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
            frame.extend_from_slice(&payload);
            frame.extend_from_slice(&masked_crc32c(&payload).to_le_bytes());
            out.write_all(&frame)?;
        }
        Ok(out.commit()? + index_bytes)
    }

    fn expected_size(&self, layout: &FileLayout) -> Option<u64> {
        sizes(layout).ok().map(|(_, file)| file)
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(TfRecordReader {
            decode: self.decode,
            check_data_crc: self.check_data_crc,
            indexes: HashMap::new(),
            open: rustc_hash::FxHashMap::default(),
            buffer: None,
            index_buffer: None,
            image: Vec::new(),
        })
    }
}

/// Checks the framing of the record at `offset` in `bytes` (which starts at that record) and
/// returns its payload and the record's full length. The length's CRC is always checked (it is
/// what makes a damaged length an error instead of a wild read); the data's only with
/// `check_data_crc`.
fn unframe<'a>(
    path: &Path,
    offset: u64,
    bytes: &'a [u8],
    check_data_crc: bool,
) -> Result<(&'a [u8], usize), FormatError> {
    let Some(header) = bytes.get(..12) else {
        return Err(FormatError::corrupt(
            path,
            offset + bytes.len() as u64,
            "the file ends inside a record header",
        ));
    };
    let len_bytes = &header[..8];
    let stored = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if masked_crc32c(len_bytes) != stored {
        return Err(FormatError::corrupt(
            path,
            offset + 8,
            "bad CRC of the record length (not a TFRecord file, or damaged)",
        ));
    }
    let len = u64::from_le_bytes(len_bytes.try_into().unwrap_or([0; 8]));
    let total = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(FRAMING as usize))
        .ok_or_else(|| FormatError::corrupt(path, offset, format!("a record of {len} bytes")))?;
    let Some(record) = bytes.get(..total) else {
        return Err(FormatError::corrupt(
            path,
            offset + bytes.len() as u64,
            format!("the file ends inside a record of {len} bytes"),
        ));
    };
    let payload = &record[12..total - 4];
    let crc = &record[total - 4..];
    if check_data_crc && masked_crc32c(payload).to_le_bytes() != crc {
        return Err(FormatError::corrupt(
            path,
            offset + total as u64 - 4,
            "bad CRC of the record data",
        ));
    }
    Ok((payload, total))
}

/// Decodes a record's `Example` and moves its `image` bytes into `image`.
pub fn decode_image(
    path: &Path,
    offset: u64,
    payload: &[u8],
    image: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let example = Example::decode(payload).map_err(|e| {
        FormatError::corrupt(
            path,
            offset,
            format!("the record is not a tf.train.Example: {e}"),
        )
    })?;
    let found = example
        .features
        .and_then(|mut f| f.feature.remove("image"))
        .and_then(|f| f.kind);
    match found {
        Some(FeatureKind::BytesList(mut list)) if !list.value.is_empty() => {
            *image = list.value.swap_remove(0);
            Ok(())
        }
        _ => Err(FormatError::corrupt(
            path,
            offset,
            "the Example has no `image` bytes feature (DLIO's records hold `image` and `size`)",
        )),
    }
}

/// Finds a record's `Example` `image` bytes where they lie in `payload`, without copying them:
/// the range of `payload` that [`decode_image`] would copy out (the first value of the last
/// `image` entry, as a decoder that builds the map keeps it). Every field on the way is
/// checked as a decoder checks it, so a record that is not an `Example` with an `image` bytes
/// feature is an error here too.
///
/// Written by hand with prost's wire-format primitives because prost's generated decoders
/// always copy `bytes` fields into owned buffers; this is the tf.data `parse_example` of the
/// MLPerf Storage fork, whose result the emulated step never reads.
pub fn find_image(path: &Path, offset: u64, payload: &[u8]) -> Result<Range<usize>, FormatError> {
    let corrupt = |what: String| {
        FormatError::corrupt(
            path,
            offset,
            format!("the record is not a tf.train.Example: {what}"),
        )
    };
    let base = payload.as_ptr() as usize;
    let mut image = None;
    let mut example = payload;
    while !example.is_empty() {
        let (tag, wire) = next_key(&mut example).map_err(&corrupt)?;
        if tag != 1 || wire != WireType::LengthDelimited {
            skip(&mut example, tag, wire).map_err(&corrupt)?;
            continue;
        }
        let mut features = take_len(&mut example).map_err(&corrupt)?;
        while !features.is_empty() {
            let (tag, wire) = next_key(&mut features).map_err(&corrupt)?;
            if tag != 1 || wire != WireType::LengthDelimited {
                skip(&mut features, tag, wire).map_err(&corrupt)?;
                continue;
            }
            let entry = take_len(&mut features).map_err(&corrupt)?;
            if let Some(found) = image_of_entry(entry).map_err(&corrupt)? {
                image = found;
            }
        }
    }
    match image {
        Some(bytes) => {
            let start = bytes.as_ptr() as usize - base;
            Ok(start..start + bytes.len())
        }
        None => Err(FormatError::corrupt(
            path,
            offset,
            "the Example has no `image` bytes feature (DLIO's records hold `image` and `size`)",
        )),
    }
}

/// One `features` map entry: `Some(Some(bytes))` when its key is `image` and its value's kind is
/// a non-empty bytes list, `Some(None)` when its key is `image` otherwise (that entry replaces an
/// earlier one), `None` for other keys.
fn image_of_entry(mut entry: &[u8]) -> Result<Option<Option<&[u8]>>, String> {
    let (mut key, mut value): (&[u8], &[u8]) = (&[], &[]);
    while !entry.is_empty() {
        match next_key(&mut entry)? {
            (1, WireType::LengthDelimited) => key = take_len(&mut entry)?,
            (2, WireType::LengthDelimited) => value = take_len(&mut entry)?,
            (tag, wire) => skip(&mut entry, tag, wire)?,
        }
    }
    if key != b"image" {
        return Ok(None);
    }
    // Feature: a oneof of bytes_list (1), float_list (2), int64_list (3); the last one set wins.
    let mut kind: Option<(u32, &[u8])> = None;
    while !value.is_empty() {
        match next_key(&mut value)? {
            (tag @ 1..=3, WireType::LengthDelimited) => kind = Some((tag, take_len(&mut value)?)),
            (tag, wire) => skip(&mut value, tag, wire)?,
        }
    }
    let Some((1, mut list)) = kind else {
        return Ok(Some(None));
    };
    let mut first = None;
    while !list.is_empty() {
        match next_key(&mut list)? {
            (1, WireType::LengthDelimited) => {
                let bytes = take_len(&mut list)?;
                first.get_or_insert(bytes);
            }
            (tag, wire) => skip(&mut list, tag, wire)?,
        }
    }
    Ok(Some(first))
}

fn next_key(buf: &mut &[u8]) -> Result<(u32, WireType), String> {
    prost::encoding::decode_key(buf).map_err(|e| e.to_string())
}

fn take_len<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = prost::encoding::decode_varint(buf).map_err(|e| e.to_string())?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= buf.len())
        .ok_or_else(|| format!("a field of {len} bytes where {} remain", buf.len()))?;
    let (head, tail) = buf.split_at(len);
    *buf = tail;
    Ok(head)
}

fn skip(buf: &mut &[u8], tag: u32, wire: WireType) -> Result<(), String> {
    prost::encoding::skip_field(wire, tag, buf, prost::encoding::DecodeContext::default())
        .map_err(|e| e.to_string())
}

/// One record file's index: (offset, length) per record.
type RecordIndex = Vec<(u64, u64)>;

fn load_index(
    storage: &dyn Storage,
    path: &Path,
    buffer: &mut Option<IoBuffer>,
) -> Result<RecordIndex, FormatError> {
    let index_path = index_path(path);
    let text = match read_small_file(storage, &index_path, buffer) {
        Ok(text) => text,
        Err(FormatError::Storage(dlio_storage::StorageError::NotFound { .. })) => {
            return Err(FormatError::unsupported(
                format!(
                    "{} has no index file {} (index loaders read tfrecord files record by \
                     record through DALI's index)",
                    path.display(),
                    index_path.display()
                ),
                "generate the data set again with dlio, or use the tensorflow data loader, \
                 which streams the files",
            ));
        }
        Err(e) => return Err(e),
    };
    let mut index = Vec::new();
    let mut line_start = 0u64;
    for line in text.split(|&b| b == b'\n') {
        let line_len = line.len() as u64 + 1;
        let fields: Vec<&[u8]> = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .collect();
        if fields.is_empty() {
            line_start += line_len;
            continue;
        }
        let number = |f: &[u8]| {
            std::str::from_utf8(f)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
        };
        match (
            fields.len(),
            number(fields[0]),
            fields.get(1).and_then(|f| number(f)),
        ) {
            (2, Some(offset), Some(len)) => index.push((offset, len)),
            _ => {
                return Err(FormatError::corrupt(
                    &index_path,
                    line_start,
                    "an index line is not \"<offset> <length>\"",
                ));
            }
        }
        line_start += line_len;
    }
    Ok(index)
}

struct OpenRecords {
    path: PathBuf,
    handle: Box<dyn ReadHandle>,
    index: std::sync::Arc<RecordIndex>,
}

struct TfRecordReader {
    decode: bool,
    check_data_crc: bool,
    indexes: HashMap<PathBuf, std::sync::Arc<RecordIndex>>,
    open: rustc_hash::FxHashMap<FileKey, OpenRecords>,
    buffer: Option<IoBuffer>,
    index_buffer: Option<IoBuffer>,
    image: Vec<u8>,
}

impl FormatReader for TfRecordReader {
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let index = match self.indexes.get(path) {
            Some(i) => std::sync::Arc::clone(i),
            None => {
                let i = std::sync::Arc::new(load_index(storage, path, &mut self.index_buffer)?);
                if self.indexes.len() >= 4096 {
                    self.indexes.clear();
                }
                self.indexes
                    .insert(path.to_path_buf(), std::sync::Arc::clone(&i));
                i
            }
        };
        let handle = storage.open(path)?;
        self.open.insert(
            key,
            OpenRecords {
                path: path.to_path_buf(),
                handle,
                index,
            },
        );
        Ok(())
    }

    fn read_sample(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        let file = self
            .open
            .get_mut(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        let Some(&(offset, len)) = file.index.get(index as usize) else {
            return Err(FormatError::SampleOutOfRange {
                path: file.path.clone(),
                index: u64::from(index),
                samples: file.index.len() as u64,
            });
        };
        let len = usize::try_from(len)
            .map_err(|_| FormatError::corrupt(&file.path, offset, "a record larger than memory"))?;
        let place = BufferPlace::of(storage.capabilities());
        let bytes = read_range(&mut *file.handle, &mut self.buffer, place, offset, len)?;
        let (payload, total) = unframe(&file.path, offset, bytes, self.check_data_crc)?;
        if total != len {
            return Err(FormatError::corrupt(
                &file.path,
                offset,
                format!("the index says the record has {len} bytes but it has {total}"),
            ));
        }
        if !self.decode {
            let image = find_image(&file.path, offset, payload)?;
            return Ok(&payload[image]);
        }
        decode_image(&file.path, offset, payload, &mut self.image)?;
        Ok(&self.image)
    }

    fn close(&mut self, key: FileKey) {
        self.open.remove(&key);
    }
}

/// Reads one record file front to back in `transfer_size` requests, as tf.data's
/// `TFRecordDataset` does, and cuts records out of the stream (both CRCs checked).
pub struct RecordStream {
    path: PathBuf,
    handle: Box<dyn ReadHandle>,
    transfer: usize,
    alignment: usize,
    window: Window,
    buffers: StreamBuffers,
    check_data_crc: bool,
}

/// The memory a stream reads into, kept from one file to the next by a reader that streams
/// many ([`RecordStream::reuse_buffers`]): a new buffer per file is a fresh mapping to fault
/// in, zero and unmap, and with many reader threads each unmap also interrupts every core to
/// flush its TLB.
#[derive(Debug, Default)]
pub struct StreamBuffers {
    /// The bytes read and not consumed yet ([`Window`]).
    window: Vec<u8>,
    /// O_DIRECT engines read into this aligned buffer first; the others read straight into
    /// the window.
    bounce: Option<IoBuffer>,
    /// The slots of the requests kept in flight by [`RecordStream::for_each_record`].
    slots: Option<IoBuffer>,
}

/// The file's bytes read and not consumed yet: `buf[start..end]` is the file from `file_pos`.
#[derive(Debug, Default)]
struct Window {
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    file_pos: u64,
    /// File offset of the next byte to request.
    next_read: u64,
}

impl Window {
    /// How many unconsumed bytes the next record needs: its header while fewer than 12 are
    /// here, then the whole record (at most what is left of the file, `file_len`).
    fn record_need(&self, buf: &[u8], path: &Path, file_len: u64) -> Result<usize, FormatError> {
        let remaining = file_len.saturating_sub(self.file_pos);
        let have = &buf[self.start..self.end];
        if have.len() < 12 {
            return Ok((12u64.min(remaining)) as usize);
        }
        let len = u64::from_le_bytes(have[..8].try_into().unwrap_or([0; 8]));
        let total = len.saturating_add(FRAMING);
        if total > remaining {
            // Let unframe report a damaged length (bad CRC) before a "file ends" error.
            unframe(path, self.file_pos, &have[..12], false)?;
        }
        Ok(usize::try_from(total.min(remaining)).unwrap_or(usize::MAX))
    }

    /// Makes room for `len` more bytes at the end of `buf`, for a record that needs `want`
    /// unconsumed bytes in all: the unconsumed bytes (less than one record) move to the front
    /// when `len` no longer fits behind them. Returns where the bytes go.
    fn room<'b>(
        &mut self,
        buf: &'b mut Vec<u8>,
        len: usize,
        want: usize,
        transfer: usize,
    ) -> &'b mut [u8] {
        if buf.len() < self.end + len {
            if self.start > 0 {
                buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let room = (want + transfer).max(self.end + len);
            if buf.len() < room {
                buf.resize(room, 0);
            }
        }
        &mut buf[self.end..self.end + len]
    }

    /// `n` bytes were read into the room at the end.
    fn filled(&mut self, n: usize) {
        self.end += n;
        self.next_read += n as u64;
    }

    /// Takes the record at the front of the unconsumed bytes: its offset and payload.
    fn cut<'b>(
        &mut self,
        buf: &'b [u8],
        path: &Path,
        check_data_crc: bool,
    ) -> Result<(u64, &'b [u8]), FormatError> {
        let offset = self.file_pos;
        let (payload, used) = unframe(path, offset, &buf[self.start..self.end], check_data_crc)?;
        self.start += used;
        self.file_pos += used as u64;
        Ok((offset, payload))
    }
}

impl RecordStream {
    /// Opens `path` for streaming in requests of `transfer_size` bytes (0: the tf.data default,
    /// 256 KiB).
    pub fn open(
        storage: &dyn Storage,
        path: &Path,
        transfer_size: usize,
    ) -> Result<RecordStream, FormatError> {
        let handle = storage.open(path)?;
        let alignment = storage.capabilities().alignment.max(1);
        let transfer = if transfer_size == 0 {
            DEFAULT_TRANSFER_SIZE
        } else {
            transfer_size
        };
        let transfer = transfer.div_ceil(alignment) * alignment;
        Ok(RecordStream {
            path: path.to_path_buf(),
            handle,
            transfer,
            alignment,
            window: Window::default(),
            buffers: StreamBuffers::default(),
            check_data_crc: true,
        })
    }

    /// Streams through `buffers`, those of an earlier stream ([`RecordStream::into_buffers`]),
    /// instead of buffers of its own.
    pub fn reuse_buffers(mut self, buffers: StreamBuffers) -> RecordStream {
        self.buffers = buffers;
        self
    }

    /// The stream's buffers, for the next stream ([`RecordStream::reuse_buffers`]).
    pub fn into_buffers(self) -> StreamBuffers {
        self.buffers
    }

    /// Whether every record's data CRC is checked (default yes; the length's always is).
    pub fn check_data_crc(mut self, check: bool) -> RecordStream {
        self.check_data_crc = check;
        self
    }

    /// The file being streamed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next record's payload (a serialized `Example`) and its offset in the file, or `None`
    /// at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<(u64, &[u8])>, FormatError> {
        loop {
            match self.ready(Wait::Yes)? {
                Ready::End => return Ok(None),
                Ready::Record => return self.cut().map(Some),
                Ready::WouldWait => continue, // only reads that may not wait answer this
            }
        }
    }

    /// The next record as [`RecordStream::next_record`] cuts it, if the engine can read the
    /// bytes it still needs without waiting for the device
    /// ([`ReadHandle::read_at_nowait`]); else [`NextRecord::WouldWait`], after reading what
    /// was at hand. [`RecordStream::wait_for_next_record`] then does the reads that wait.
    pub fn next_record_nowait(&mut self) -> Result<NextRecord<'_>, FormatError> {
        match self.ready(Wait::No)? {
            Ready::End => Ok(NextRecord::End),
            Ready::WouldWait => Ok(NextRecord::WouldWait),
            Ready::Record => self
                .cut()
                .map(|(offset, payload)| NextRecord::Record(offset, payload)),
        }
    }

    /// Reads what the next record still needs if that needs no wait for the device, without
    /// taking the record: `true` when it is in the window (or the file has ended), `false`
    /// when a read would have waited.
    pub fn next_record_at_hand(&mut self) -> Result<bool, FormatError> {
        Ok(!matches!(self.ready(Wait::No)?, Ready::WouldWait))
    }

    /// Reads, waiting for the device, until the next record is in the window (or the file has
    /// ended); the record is not taken.
    pub fn wait_for_next_record(&mut self) -> Result<(), FormatError> {
        self.ready(Wait::Yes).map(drop)
    }

    /// Calls `record` with every remaining record of the file (its offset and payload), in
    /// file order, until it returns `false`. With `depth` above 1 the rest of the file is
    /// requested as one stream of `transfer_size` requests ([`ReadHandle::read_stream`]), so
    /// an engine that overlaps requests (io_uring, S3) keeps up to `depth` of them in flight
    /// across records, as it does across samples of whole files; a completion that arrives
    /// before the ones ahead of it waits in a copy. With `depth` 1 it is
    /// [`RecordStream::next_record`] in a loop.
    pub fn for_each_record(
        &mut self,
        depth: usize,
        record: &mut TakeRecord<'_>,
    ) -> Result<(), FormatError> {
        if depth <= 1 {
            while let Some((offset, payload)) = self.next_record()? {
                if !record(offset, payload)? {
                    break;
                }
            }
            return Ok(());
        }
        let file_len = self.handle.len();
        let transfer = self.transfer;
        let first = self.window.next_read;
        let slots = match &mut self.buffers.slots {
            Some(slots) if slots.alignment() == self.alignment => slots,
            other => other.insert(IoBuffer::new(self.alignment)?),
        };
        if slots.len() < depth * transfer {
            slots.resize(depth * transfer)?;
        }
        let mut requests = (first..file_len)
            .step_by(transfer)
            .map(|offset| Extent::new(offset, transfer.min((file_len - offset) as usize)));
        let path = &self.path;
        let window = &mut self.window;
        let buf = &mut self.buffers.window;
        let check_data_crc = self.check_data_crc;
        // Completions ahead of the next byte the window needs, copied out of their slots, and
        // the buffers of those already taken, for the next ones.
        let mut early: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut spare: Vec<Vec<u8>> = Vec::new();
        // Why the stream was stopped from inside `consume`: a damaged record, or `record`.
        let mut stopped: Option<Result<(), FormatError>> = None;
        let mut consume = |offset: u64, bytes: &[u8]| -> Result<(), StorageError> {
            let mut take = |window: &mut Window, bytes: &[u8]| -> Result<bool, FormatError> {
                let room = window.room(buf, bytes.len(), bytes.len(), transfer);
                room.copy_from_slice(bytes);
                window.filled(bytes.len());
                while window.file_pos < file_len {
                    let need = window.record_need(buf, path, file_len)?;
                    if window.end - window.start < need {
                        break;
                    }
                    let (offset, payload) = window.cut(buf, path, check_data_crc)?;
                    if !record(offset, payload)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            };
            if offset != window.next_read {
                let mut copy = spare.pop().unwrap_or_default();
                copy.clear();
                copy.extend_from_slice(bytes);
                early.push((offset, copy));
                return Ok(());
            }
            let mut result = take(window, bytes);
            while let Ok(true) = result {
                let Some(i) = early.iter().position(|(o, _)| *o == window.next_read) else {
                    break;
                };
                let (_, bytes) = early.swap_remove(i);
                result = take(window, &bytes);
                spare.push(bytes);
            }
            match result {
                Ok(true) => Ok(()),
                Ok(false) => {
                    stopped = Some(Ok(()));
                    Err(StorageError::Interrupted { path: path.clone() })
                }
                Err(e) => {
                    stopped = Some(Err(e));
                    Err(StorageError::Interrupted { path: path.clone() })
                }
            }
        };
        let streamed = self
            .handle
            .read_stream(slots, transfer, &mut requests, &mut consume);
        match (stopped, streamed) {
            (Some(why), _) => why,
            (None, Err(e)) => Err(e.into()),
            // Every range was consumed in order, so every record was cut; a shortfall would be
            // a fault of the engine's stream, named rather than ignored.
            (None, Ok(())) if self.window.file_pos < file_len => Err(FormatError::corrupt(
                &self.path,
                self.window.file_pos,
                "the read stream ended before the file did",
            )),
            (None, Ok(())) => Ok(()),
        }
    }

    /// Brings the next record's bytes into the window.
    fn ready(&mut self, wait: Wait) -> Result<Ready, FormatError> {
        loop {
            let file_len = self.handle.len();
            if self.window.file_pos >= file_len {
                return Ok(Ready::End);
            }
            let need = self
                .window
                .record_need(&self.buffers.window, &self.path, file_len)?;
            if self.window.end - self.window.start >= need {
                return Ok(Ready::Record);
            }
            if !self.fill(need, wait)? {
                return Ok(Ready::WouldWait);
            }
        }
    }

    /// Takes the record [`RecordStream::ready`] brought in.
    fn cut(&mut self) -> Result<(u64, &[u8]), FormatError> {
        self.window
            .cut(&self.buffers.window, &self.path, self.check_data_crc)
    }

    /// Makes at least `want` unconsumed bytes available (fewer at the end of the file), reading
    /// whole `transfer_size` requests; `false` when a read would have waited (`Wait::No`), with
    /// what was at hand kept. The window holds one request beyond the record being
    /// cut, reads land at its end, and the unconsumed bytes (less than one record) move to its
    /// front when a request no longer fits behind them. A larger window moves fewer bytes but
    /// costs more in the kernel's copy: every stream of every rank writes its whole window in
    /// turn, and with four requests per window 24 ranks of 8 streams spent 20% more system
    /// time (resnet50_h100, bench/capacity.sh) than with one.
    fn fill(&mut self, want: usize, wait: Wait) -> Result<bool, FormatError> {
        let file_len = self.handle.len();
        while self.window.end - self.window.start < want && self.window.next_read < file_len {
            let next_read = self.window.next_read;
            let n = self.transfer.min(
                (file_len - next_read).div_ceil(self.alignment as u64) as usize * self.alignment,
            );
            let len = (n as u64).min(file_len - next_read) as usize;
            let target = self
                .window
                .room(&mut self.buffers.window, len, want, self.transfer);
            let read = match (wait, self.alignment) {
                (Wait::Yes, 1) => {
                    self.handle.read_exact_at(target, next_read)?;
                    len
                }
                (Wait::No, 1) => match self.handle.read_at_nowait(target, next_read)? {
                    None => return Ok(false),
                    Some(0) => {
                        return Err(StorageError::Truncated {
                            path: self.path.clone(),
                            offset: next_read,
                            wanted: len as u64,
                        }
                        .into());
                    }
                    Some(read) => read,
                },
                // O_DIRECT reads go through the bounce buffer and always wait.
                (Wait::No, _) => return Ok(false),
                (Wait::Yes, _) => {
                    let bytes = read_range(
                        &mut *self.handle,
                        &mut self.buffers.bounce,
                        self.alignment,
                        next_read,
                        len,
                    )?;
                    target.copy_from_slice(bytes);
                    len
                }
            };
            self.window.filled(read);
        }
        Ok(true)
    }
}

/// What [`RecordStream::for_each_record`] hands each record to: its offset in the file and
/// its payload; `false` stops the stream.
pub type TakeRecord<'a> = dyn FnMut(u64, &[u8]) -> Result<bool, FormatError> + 'a;

/// Whether a stream's reads may wait for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Yes,
    No,
}

/// Where [`RecordStream::ready`] left the stream.
enum Ready {
    /// The next record is in the window.
    Record,
    /// The file has ended.
    End,
    /// A read would have waited for the device.
    WouldWait,
}

/// What [`RecordStream::next_record_nowait`] found.
#[derive(Debug)]
pub enum NextRecord<'a> {
    /// The record's offset in the file and its payload.
    Record(u64, &'a [u8]),
    /// The file has ended.
    End,
    /// The bytes of the next record are not at hand: a read would wait for the device.
    WouldWait,
}

#[cfg(test)]
mod tests {
    use dlio_config::{Compression, ElementType};
    use dlio_storage::{Metered, PosixStorage};

    use super::*;

    /// The upstream reader: decodes, checks every CRC.
    const TF: TfRecordFormat = TfRecordFormat {
        decode: true,
        check_data_crc: true,
    };

    fn layout(samples: u32, dims: Vec<usize>) -> FileLayout {
        FileLayout {
            samples,
            sample_dims: dims,
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        }
    }

    #[test]
    fn masked_crc_matches_tensorflow_known_answers() {
        // crc32c("123456789") = 0xE3069283 (RFC 3720); masking rotates right 15 and adds.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(
            masked_crc32c(b"123456789"),
            0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8)
        );
    }

    #[test]
    fn index_goes_to_the_data_folders_index_tree() {
        assert_eq!(
            index_path(Path::new("/d/train/img_1_of_8.tfrecord")),
            PathBuf::from("/d/index/train/img_1_of_8.tfrecord.idx")
        );
        assert_eq!(
            index_path(Path::new("/d/valid/3/img_1_of_8.tfrecord")),
            PathBuf::from("/d/index/valid/img_1_of_8.tfrecord.idx")
        );
    }

    #[test]
    fn generated_file_has_the_expected_size_index_and_records() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let path = dir.path().join("train/a.tfrecord");
        for dims in [vec![3, 4], vec![200, 300]] {
            let l = layout(5, dims.clone());
            let written = TF
                .generate(&storage, &path, &l, &mut DataRng::for_file(3, 0, 1))
                .unwrap();
            let file_len = std::fs::metadata(&path).unwrap().len();
            let index =
                std::fs::read_to_string(dir.path().join("index/train/a.tfrecord.idx")).unwrap();
            assert_eq!(written, file_len + index.len() as u64);
            assert_eq!(TF.expected_size(&l), Some(file_len));
            let lines: Vec<&str> = index.lines().collect();
            assert_eq!(lines.len(), 5);
            let record = file_len / 5;
            assert_eq!(lines[2], format!("{} {record}", 2 * record));

            // Per-record reads: one read of exactly one record.
            let mut reader = TF.reader(&l);
            reader.open(&storage, 0, &path).unwrap();
            let before = storage.counters().snapshot();
            let image = reader.read_sample(&storage, 0, 4).unwrap().to_vec();
            let delta = storage.counters().snapshot() - before;
            assert_eq!((delta.read_requests, delta.bytes_read), (1, record));
            assert_eq!(image.len(), dims.iter().product::<usize>());

            // Streaming gives the same records, in requests of the transfer size.
            let mut stream = RecordStream::open(&storage, &path, 1000).unwrap();
            let before = storage.counters().snapshot();
            let mut count = 0;
            let mut last = Vec::new();
            while let Some((offset, payload)) = stream.next_record().unwrap() {
                assert_eq!(offset, count * record);
                decode_image(&path, offset, payload, &mut last).unwrap();
                count += 1;
            }
            assert_eq!(count, 5);
            assert_eq!(last, image);
            let delta = storage.counters().snapshot() - before;
            assert_eq!(delta.bytes_read, file_len);
            assert_eq!(delta.read_requests, file_len.div_ceil(1000));
        }
    }

    #[test]
    fn a_reused_window_streams_the_same_records_as_a_fresh_one() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let mut paths = Vec::new();
        for (name, dims) in [
            ("big", vec![200, 300]),
            ("small", vec![3, 4]),
            ("mid", vec![50, 50]),
        ] {
            let path = dir.path().join(format!("train/{name}.tfrecord"));
            TF.generate(
                &storage,
                &path,
                &layout(4, dims),
                &mut DataRng::for_file(3, 0, 1),
            )
            .unwrap();
            paths.push(path);
        }
        let records = |stream: &mut RecordStream| {
            let mut all = Vec::new();
            while let Some((offset, payload)) = stream.next_record().unwrap() {
                all.push((offset, payload.to_vec()));
            }
            all
        };
        let mut buffers = StreamBuffers::default();
        for path in paths.iter().chain(paths.iter().rev()) {
            let fresh = records(&mut RecordStream::open(&storage, path, 1000).unwrap());
            let mut reused = RecordStream::open(&storage, path, 1000)
                .unwrap()
                .reuse_buffers(std::mem::take(&mut buffers));
            assert_eq!(records(&mut reused), fresh, "{}", path.display());
            assert_eq!(fresh.len(), 4);
            buffers = reused.into_buffers();
            assert!(!buffers.window.is_empty());
        }
    }

    #[test]
    fn records_streamed_with_requests_in_flight_are_the_records_read_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.tfrecord");
        let layout = layout(9, vec![3000]);
        TF.generate(
            &PosixStorage::new(),
            &path,
            &layout,
            &mut DataRng::for_file(1, 0, 0),
        )
        .unwrap();
        let one_by_one = |storage: &dyn Storage| {
            let mut stream = RecordStream::open(storage, &path, 4096).unwrap();
            let mut all = Vec::new();
            while let Some((offset, payload)) = stream.next_record().unwrap() {
                all.push((offset, payload.to_vec()));
            }
            all
        };
        let expected = one_by_one(&PosixStorage::new());
        assert_eq!(expected.len(), 9);
        let mut engines: Vec<Box<dyn Storage>> = vec![Box::new(PosixStorage::new())];
        use dlio_testkit::{MachineProperty, probe, skip};
        match (probe::io_uring(), probe::o_direct(path.parent().unwrap())) {
            (Err(reason), _) => skip(MachineProperty::NoIoUring, &reason),
            (_, Err(reason)) => skip(MachineProperty::NoODirect, &reason),
            (Ok(()), Ok(())) => engines.push(Box::new(
                dlio_storage::UringStorage::new(4, true).expect("io_uring with O_DIRECT"),
            )),
        }
        for storage in engines {
            let counted = Metered::new(std::sync::Arc::<dyn Storage>::from(storage));
            for depth in [1, 4] {
                let mut stream = RecordStream::open(&counted, &path, 4096).unwrap();
                let mut all = Vec::new();
                stream
                    .for_each_record(depth, &mut |offset, payload| {
                        all.push((offset, payload.to_vec()));
                        Ok(true)
                    })
                    .unwrap();
                assert_eq!(all, expected, "{} at depth {depth}", counted.engine());
                // Stopped after 2 records: no more are handed over.
                let mut stream = RecordStream::open(&counted, &path, 4096).unwrap();
                let mut seen = 0;
                stream
                    .for_each_record(depth, &mut |_, _| {
                        seen += 1;
                        Ok(seen < 2)
                    })
                    .unwrap();
                assert_eq!(seen, 2, "{} at depth {depth}", counted.engine());
            }
            let file = std::fs::metadata(&path).unwrap().len();
            let read = counted.counters().snapshot().bytes_read;
            assert!(read >= 2 * file, "{}: {read} of {file}", counted.engine());
        }
    }

    #[test]
    fn damaged_records_name_the_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let path = dir.path().join("train/a.tfrecord");
        let l = layout(3, vec![10, 10]);
        TF.generate(&storage, &path, &l, &mut DataRng::for_file(3, 0, 1))
            .unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let record = bytes.len() / 3;
        bytes[record + 40] ^= 0xff; // inside record 1's payload
        std::fs::write(&path, &bytes).unwrap();
        let mut reader = TF.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        assert!(reader.read_sample(&storage, 0, 0).is_ok());
        let err = reader.read_sample(&storage, 0, 1).unwrap_err().to_string();
        let crc_at = 2 * record - 4;
        assert!(
            err.contains("bad CRC of the record data") && err.contains(&format!("offset {crc_at}")),
            "{err}"
        );

        let mut stream = RecordStream::open(&storage, &path, 0).unwrap();
        assert!(stream.next_record().is_ok());
        let err = stream.next_record().unwrap_err().to_string();
        assert!(err.contains(&format!("offset {crc_at}")), "{err}");

        // A truncated file: the stream reports where it ends.
        std::fs::write(&path, &bytes[..record + 20]).unwrap();
        let mut stream = RecordStream::open(&storage, &path, 0).unwrap();
        stream.next_record().unwrap();
        let err = stream.next_record().unwrap_err().to_string();
        assert!(err.contains("ends inside a record"), "{err}");
    }

    #[test]
    fn find_image_points_at_the_bytes_decode_image_copies() {
        let l = layout(3, vec![37, 11]);
        let mut example = example_for(&l, 37 * 11);
        if let Some(FeatureKind::BytesList(list)) = example
            .features
            .as_mut()
            .and_then(|f| f.feature.get_mut("image"))
            .and_then(|f| f.kind.as_mut())
        {
            list.value[0] = (0..37 * 11).map(|i| (i % 251) as u8).collect();
        }
        let payload = example.encode_to_vec();
        let path = Path::new("x.tfrecord");
        let mut decoded = Vec::new();
        decode_image(path, 0, &payload, &mut decoded).unwrap();
        let range = find_image(path, 0, &payload).unwrap();
        assert_eq!(&payload[range], &decoded[..]);
        // Not an Example, or one without `image`: the same refusal as the decoder's.
        for junk in [&b"\x0a\xff\xff\xff\x0f"[..], &[0x0a, 0x00][..], &[0xff][..]] {
            assert!(find_image(path, 5, junk).is_err(), "{junk:?}");
            assert!(
                decode_image(path, 5, junk, &mut decoded).is_err(),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn the_in_place_reader_hands_out_the_same_samples_without_checking_data_crcs() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let path = dir.path().join("train").join("f.tfrecord");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let l = layout(4, vec![64, 3]);
        TF.generate(&storage, &path, &l, &mut DataRng::for_file(3, 0, 1))
            .unwrap();
        let in_place = TfRecordFormat {
            decode: false,
            check_data_crc: false,
        };
        let (mut a, mut b) = (TF.reader(&l), in_place.reader(&l));
        a.open(&storage, 0, &path).unwrap();
        b.open(&storage, 0, &path).unwrap();
        for i in 0..4 {
            let expected = a.read_sample(&storage, 0, i).unwrap().to_vec();
            assert_eq!(b.read_sample(&storage, 0, i).unwrap(), &expected[..]);
        }
        // Flip a byte of the first image: only the CRC-checking reader notices.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[40] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (mut a, mut b) = (TF.reader(&l), in_place.reader(&l));
        a.open(&storage, 0, &path).unwrap();
        b.open(&storage, 0, &path).unwrap();
        assert!(a.read_sample(&storage, 0, 0).is_err());
        assert_eq!(b.read_sample(&storage, 0, 0).unwrap().len(), 192);
    }
}
