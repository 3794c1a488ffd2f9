//! `hdf5`: files written and parsed by the HDF5 C library (hdf5-metno), laid out as DLIO lays
//! them out: datasets `records_0 .. records_{k-1}` (k = `dataset.hdf5.num_dset_per_record`),
//! each shaped `(samples, *dims_k)` where `dims_k` is the sample shape with its first dimension
//! divided by k (and dropped when that leaves 1), plus an int64 `labels` dataset of `samples`
//! zeros. `dataset.hdf5.chunk_dims` chunks the record datasets, `dataset.hdf5.max_shape` makes
//! them resizable (`null` = unlimited), and `dataset.compression: gzip` applies the deflate
//! filter at `dataset.compression_level`. The files use the latest library format
//! (`libver='latest'`, as DLIO).
//!
//! # The storage boundary
//!
//! This is the one format the HDF5 library partly does I/O for, and the split is explicit:
//! - **Generation** lets the library write the file to a scratch file in the system's
//!   temporary folder (the library writes metadata at scattered offsets, which an append-only
//!   storage handle cannot take), then streams the finished file through the [`Storage`], so
//!   the published file is crash-safe and its bytes are counted like every other format's.
//! - **Reading** lets the library open the file and read its metadata (superblock, object
//!   headers, chunk index), exactly as h5py does; those metadata reads bypass the storage
//!   and are not counted. The sample data itself is read through the storage at the file
//!   addresses the library reports: one read of the sample's bytes for contiguous datasets
//!   (`H5Dget_offset`), one read of every stored chunk the sample's hyperslab touches for
//!   chunked ones (`H5Dget_chunk_info_by_coord`), inflated when the deflate filter is on. So
//!   chunking and compression show up in the I/O the storage sees, as they do for h5py. A
//!   1 MiB cache of decoded chunks per open file stands in for HDF5's chunk cache.

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use dlio_config::{Compression, DatasetConfig, ElementType, FormatKind, LabelRead};
use dlio_storage::{IoBuffer, ReadHandle, Storage};
use hdf5::types::{FloatSize, IntSize, TypeDescriptor};
use hdf5_sys::h5::{HADDR_UNDEF, haddr_t, hsize_t};

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::ranged::{BufferPlace, read_range};
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// Bytes of decoded chunks kept per open file (h5py's default chunk cache size).
const CHUNK_CACHE_BYTES: usize = 1 << 20;
/// Samples written per H5Dwrite during generation (bounded memory).
const WRITE_BATCH_BYTES: usize = 8 << 20;

/// `hdf5`: `records_*` datasets of samples and a `labels` dataset, through the HDF5 library.
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Hdf5,
    aliases: &[],
    extensions: &["h5", "hdf5", "hdf"],
    magic: b"\x89HDF",
    stores_samples_as_they_are: true,
    read_as_bytes_by_the_fork: true,
    element: None,
    built: true,
    check: no_checks,
    build: |dataset, _| Ok(Box::new(Hdf5Format::from_config(dataset))),
};

/// The `hdf5` format with the dataset section's HDF5 settings.
#[derive(Debug, Clone)]
pub(crate) struct Hdf5Format {
    num_dset_per_record: u64,
    chunk_dims: Vec<u64>,
    max_shape: Vec<Option<u64>>,
    compression_level: u32,
    label_read: LabelRead,
    sieve_bytes: u64,
}

impl Hdf5Format {
    pub(crate) fn from_config(dataset: &DatasetConfig) -> Hdf5Format {
        Hdf5Format {
            num_dset_per_record: dataset.hdf5.num_dset_per_record.max(1),
            chunk_dims: dataset.hdf5.chunk_dims.clone(),
            max_shape: dataset.hdf5.max_shape.clone(),
            compression_level: dataset.compression_level,
            label_read: dataset.hdf5.label_read,
            sieve_bytes: dataset.hdf5.sieve_bytes,
        }
    }
}

fn h5_error(path: &Path, what: &str, e: impl std::fmt::Display) -> FormatError {
    FormatError::corrupt(path, 0, format!("{what}: {e}"))
}

/// The shape of one record dataset's sample part: the sample dims with the first divided by k
/// (dropped when that leaves 1).
pub(crate) fn dataset_sample_dims(dims: &[usize], k: u64) -> Result<Vec<usize>, FormatError> {
    let k = usize::try_from(k).unwrap_or(usize::MAX).max(1);
    let mut per = dims.to_vec();
    if k > 1 {
        let first = per.first().copied().unwrap_or(1);
        if first % k != 0 {
            return Err(FormatError::unsupported(
                format!(
                    "dataset.hdf5.num_dset_per_record is {k}, which does not divide the first \
                     sample dimension {first} (sample shape {dims:?})"
                ),
                "set dataset.record_dims with a first dimension divisible by \
                 num_dset_per_record, or set num_dset_per_record to 1",
            ));
        }
        if let Some(d) = per.first_mut() {
            *d = first / k;
        }
    }
    if per.len() > 1 && per.first() == Some(&1) {
        per.remove(0);
    }
    Ok(per)
}

fn descriptor(element: ElementType) -> TypeDescriptor {
    match element {
        ElementType::Uint8 => TypeDescriptor::Unsigned(IntSize::U1),
        ElementType::Int8 => TypeDescriptor::Integer(IntSize::U1),
        ElementType::Int16 => TypeDescriptor::Integer(IntSize::U2),
        ElementType::Int32 => TypeDescriptor::Integer(IntSize::U4),
        ElementType::Int64 => TypeDescriptor::Integer(IntSize::U8),
        ElementType::Uint16 => TypeDescriptor::Unsigned(IntSize::U2),
        ElementType::Uint32 => TypeDescriptor::Unsigned(IntSize::U4),
        ElementType::Uint64 => TypeDescriptor::Unsigned(IntSize::U8),
        // h5py's bool: an enum of int8 with FALSE 0 and TRUE 1.
        ElementType::Bool => TypeDescriptor::Boolean,
        ElementType::Float16 => TypeDescriptor::Float(FloatSize::U2),
        ElementType::Float32 => TypeDescriptor::Float(FloatSize::U4),
        ElementType::Float64 => TypeDescriptor::Float(FloatSize::U8),
    }
}

impl Format for Hdf5Format {
    fn name(&self) -> &'static str {
        "hdf5"
    }

    fn extension(&self) -> &'static str {
        "hdf5"
    }

    fn check_layout(&self, layout: &FileLayout) -> Result<(), FormatError> {
        check_compression(layout.compression)
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let scratch = ScratchFile::new();
        self.build_file(&scratch.0, path, layout, rng)?;
        copy_into_storage(&scratch.0, storage, path)
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(Hdf5Reader {
            label_read: self.label_read,
            sieve_bytes: self.sieve_bytes,
            open: rustc_hash::FxHashMap::default(),
            buffer: None,
            label_buffer: None,
            chunk: Vec::new(),
            sample: Vec::new(),
        })
    }
}

impl Hdf5Format {
    /// Builds the complete file at `scratch` with the HDF5 library (`path` names the file in
    /// errors).
    fn build_file(
        &self,
        scratch: &Path,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<(), FormatError> {
        check_compression(layout.compression)?;
        let per = dataset_sample_dims(&layout.sample_dims, self.num_dset_per_record)?;
        let samples = layout.samples as usize;
        let mut shape = vec![samples];
        shape.extend_from_slice(&per);
        let rank = shape.len();
        let fail = |what: &str| {
            let what = what.to_string();
            move |e: hdf5::Error| h5_error(path, &what, e)
        };
        if !self.chunk_dims.is_empty() && self.chunk_dims.len() != rank {
            return Err(FormatError::unsupported(
                format!(
                    "dataset.hdf5.chunk_dims {:?} has {} dimensions but each record dataset has \
                     {rank} (shape {shape:?})",
                    self.chunk_dims,
                    self.chunk_dims.len()
                ),
                format!("give chunk_dims {rank} dimensions, the first for samples"),
            ));
        }
        if !self.max_shape.is_empty() && self.max_shape.len() != rank {
            return Err(FormatError::unsupported(
                format!(
                    "dataset.hdf5.max_shape has {} dimensions but each record dataset has \
                     {rank} (shape {shape:?})",
                    self.max_shape.len()
                ),
                format!("give max_shape {rank} entries (null for unlimited)"),
            ));
        }
        let extents: Vec<hdf5::Extent> = shape
            .iter()
            .enumerate()
            .map(|(i, &dim)| match self.max_shape.get(i) {
                None => hdf5::Extent::fixed(dim),
                Some(None) => hdf5::Extent::resizable(dim),
                Some(Some(max)) => hdf5::Extent::new(dim, Some((*max as usize).max(dim))),
            })
            .collect();
        let needs_chunks = layout.compression == Compression::Gzip || !self.max_shape.is_empty();
        let chunks: Option<Vec<usize>> = if !self.chunk_dims.is_empty() {
            Some(
                self.chunk_dims
                    .iter()
                    .map(|&c| (c as usize).max(1))
                    .collect(),
            )
        } else if needs_chunks {
            // One sample per chunk.
            let mut c = vec![1usize];
            c.extend(per.iter().map(|&d| d.max(1)));
            Some(c)
        } else {
            None
        };

        // No modification times in the root group (datasets have none by default, as in
        // h5py): the same config and seed give the same bytes, whenever they are written.
        let file = hdf5::File::with_options()
            .with_fapl(|p| p.libver_latest())
            .with_fcpl(|p| p.obj_track_times(false))
            .create(scratch)
            .map_err(fail("creating the scratch file"))?;
        let element = layout.element;
        let sample_part: usize = per.iter().product::<usize>() * element.size();
        for j in 0..self.num_dset_per_record {
            let mut builder = file.new_dataset_builder();
            if let Some(chunks) = &chunks {
                builder = builder.chunk(chunks.clone());
            }
            if layout.compression == Compression::Gzip {
                builder = builder.deflate(self.compression_level.min(9) as u8);
            }
            let dataset = builder
                .empty_as(descriptor(element))
                .shape(hdf5::SimpleExtents::from_vec(extents.clone()))
                .create(format!("records_{j}").as_str())
                .map_err(fail("creating a records dataset"))?;
            let batch = (WRITE_BATCH_BYTES / sample_part.max(1)).clamp(1, samples.max(1));
            let mut bytes = vec![0u8; batch * sample_part];
            let mut first = 0;
            while first < samples {
                let rows = batch.min(samples - first);
                let data = &mut bytes[..rows * sample_part];
                rng.fill(data);
                write_rows(&dataset, first, rows, &per, data)
                    .map_err(|e| h5_error(path, "writing samples", e))?;
                first += rows;
            }
        }
        let labels = vec![0i64; samples];
        file.new_dataset_builder()
            .with_data(&labels)
            .create("labels")
            .map_err(fail("writing labels"))?;
        file.close().map_err(fail("closing"))?;
        Ok(())
    }
}

/// Writes `rows` samples starting at sample `first` of `dataset` from raw element bytes.
fn write_rows(
    dataset: &hdf5::Dataset,
    first: usize,
    rows: usize,
    per: &[usize],
    bytes: &[u8],
) -> Result<(), String> {
    use hdf5_sys::h5d::{H5Dget_space, H5Dget_type, H5Dwrite};
    use hdf5_sys::h5p::H5P_DEFAULT;
    use hdf5_sys::h5s::{H5S_seloper_t, H5Sclose, H5Screate_simple, H5Sselect_hyperslab};
    use hdf5_sys::h5t::H5Tclose;

    let mut start: Vec<hsize_t> = vec![first as hsize_t];
    start.extend(per.iter().map(|_| 0));
    let mut count: Vec<hsize_t> = vec![rows as hsize_t];
    count.extend(per.iter().map(|&d| d as hsize_t));
    let needed: usize = count.iter().product::<u64>() as usize;
    let _guard = hdf5_sys::LOCK.lock();
    // SAFETY: every id comes from the library for this open dataset and is closed here;
    // `start` and `count` hold `rank` entries, the dataset's rank; the buffer holds the whole
    // selection in the dataset's own (file) type, checked below, so H5Dwrite reads within it.
    unsafe {
        let dtype = H5Dget_type(dataset.id());
        let size = hdf5_sys::h5t::H5Tget_size(dtype);
        if size == 0 || needed * size != bytes.len() {
            H5Tclose(dtype);
            return Err(format!(
                "the write buffer has {} bytes, the selection needs {}",
                bytes.len(),
                needed * size
            ));
        }
        let file_space = H5Dget_space(dataset.id());
        let mem_space = H5Screate_simple(count.len() as i32, count.as_ptr(), std::ptr::null());
        let mut status = H5Sselect_hyperslab(
            file_space,
            H5S_seloper_t::H5S_SELECT_SET,
            start.as_ptr(),
            std::ptr::null(),
            count.as_ptr(),
            std::ptr::null(),
        );
        if status >= 0 {
            status = H5Dwrite(
                dataset.id(),
                dtype,
                mem_space,
                file_space,
                H5P_DEFAULT,
                bytes.as_ptr().cast(),
            );
        }
        H5Sclose(mem_space);
        H5Sclose(file_space);
        H5Tclose(dtype);
        if status < 0 {
            return Err("H5Dwrite failed".into());
        }
    }
    Ok(())
}

/// A file in the system's temporary folder that the HDF5 library writes; removed on drop.
struct ScratchFile(PathBuf);

impl ScratchFile {
    fn new() -> ScratchFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        ScratchFile(std::env::temp_dir().join(format!(
            "dlio-hdf5-{}-{}.h5",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Streams the finished scratch file into `path` through the storage (crash-safe: temporary
/// name, then commit); returns the bytes written.
fn copy_into_storage(
    scratch: &Path,
    storage: &dyn Storage,
    path: &Path,
) -> Result<u64, FormatError> {
    let mut source = std::fs::File::open(scratch)
        .map_err(|e| h5_error(path, "reading back the file the HDF5 library wrote", e))?;
    let mut out = storage.create(path)?;
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = source
            .read(&mut chunk)
            .map_err(|e| h5_error(path, "reading back the file the HDF5 library wrote", e))?;
        if n == 0 {
            break;
        }
        out.write_all(&chunk[..n])?;
    }
    Ok(out.commit()?)
}

/// How one record dataset's data lies in the file.
enum Placement {
    /// Contiguous at this file address.
    Contiguous(u64),
    /// Chunked with these chunk dims; `deflate` when the deflate filter is on.
    Chunked { chunk: Vec<usize>, deflate: bool },
}

struct RecordDataset {
    dataset: hdf5::Dataset,
    /// Shape `(samples, *per)`.
    shape: Vec<usize>,
    itemsize: usize,
    placement: Placement,
}

struct OpenHdf5 {
    path: PathBuf,
    _file: hdf5::File,
    handle: Box<dyn ReadHandle>,
    records: Vec<RecordDataset>,
    samples: u64,
    /// The `labels` dataset's file address and element count, when its labels are read.
    labels: Option<(u64, u64)>,
    /// Decoded chunks: (dataset, chunk start coords) -> bytes; bounded by CHUNK_CACHE_BYTES.
    cache: VecDeque<(usize, Vec<u64>, Vec<u8>)>,
    cached_bytes: usize,
    /// Each record dataset's sieve window (`dataset.hdf5.sieve_bytes`).
    sieves: Vec<Sieve>,
}

/// The window of a contiguous dataset HDF5 last read into its sieve buffer: from a sample's
/// first byte, `dataset.hdf5.sieve_bytes` long or up to the dataset's end.
#[derive(Default)]
struct Sieve {
    /// File address of the window's first byte.
    start: u64,
    /// Its length (0: nothing read yet).
    len: u64,
    /// Where the window begins in `buffer` (the engine's alignment widens the read).
    head: usize,
    buffer: Option<IoBuffer>,
}

impl Sieve {
    /// The `len` bytes at file address `offset`, from the window when it holds them, else from
    /// a new window of up to `sieve_bytes` read at `offset` and clipped at `end` (the
    /// dataset's end), as HDF5's contiguous reads through the sieve buffer do.
    fn read<'s>(
        &'s mut self,
        handle: &mut dyn ReadHandle,
        place: BufferPlace,
        (offset, len, end): (u64, usize, u64),
        sieve_bytes: u64,
    ) -> Result<&'s [u8], FormatError> {
        let inside =
            self.len > 0 && offset >= self.start && offset + len as u64 <= self.start + self.len;
        if !inside {
            let window = sieve_bytes.min(end.saturating_sub(offset)).max(len as u64);
            read_range(handle, &mut self.buffer, place, offset, window as usize)?;
            self.start = offset;
            self.len = window;
            self.head = (offset % place.alignment() as u64) as usize;
        }
        let at = self.head + (offset - self.start) as usize;
        Ok(self.buffer.as_ref().map_or(&[][..], |b| &b[at..at + len]))
    }
}

struct Hdf5Reader {
    /// What each sample's read also takes of the `labels` dataset.
    label_read: LabelRead,
    /// HDF5's sieve buffer for contiguous record datasets, bytes (0: off).
    sieve_bytes: u64,
    open: rustc_hash::FxHashMap<FileKey, OpenHdf5>,
    buffer: Option<IoBuffer>,
    /// Where the labels' reads land (apart from `buffer`, which may hold the sample).
    label_buffer: Option<IoBuffer>,
    chunk: Vec<u8>,
    sample: Vec<u8>,
}

fn open_file(
    storage: &dyn Storage,
    path: &Path,
    label_read: LabelRead,
) -> Result<OpenHdf5, FormatError> {
    let handle = storage.open(path)?;
    let file = hdf5::File::open(path)
        .map_err(|e| h5_error(path, "not a readable HDF5 file (damaged or truncated?)", e))?;
    let mut names: Vec<(u64, String)> = file
        .member_names()
        .map_err(|e| h5_error(path, "listing datasets", e))?
        .into_iter()
        .filter_map(|n| {
            let index = if n == "records" {
                Some(0)
            } else {
                n.strip_prefix("records_")
                    .and_then(|i| i.parse::<u64>().ok())
            };
            index.map(|i| (i, n))
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(FormatError::unsupported(
            format!("{} has no `records_0` dataset", path.display()),
            "DLIO's hdf5 files hold the samples in records_0..records_{k-1}; generate the data \
             set with dlio",
        ));
    }
    let mut records = Vec::new();
    let mut samples = u64::MAX;
    for (_, name) in names {
        let dataset = file
            .dataset(&name)
            .map_err(|e| h5_error(path, &format!("opening {name}"), e))?;
        let shape = dataset.shape();
        let itemsize = dataset
            .dtype()
            .map(|t| t.size())
            .map_err(|e| h5_error(path, &format!("the type of {name}"), e))?;
        samples = samples.min(shape.first().copied().unwrap_or(0) as u64);
        let placement = match dataset.chunk() {
            None => match dataset.offset() {
                Some(offset) => Placement::Contiguous(offset),
                None => {
                    return Err(FormatError::unsupported(
                        format!(
                            "{}: dataset {name} is neither contiguous nor chunked (compact or \
                             never written)",
                            path.display()
                        ),
                        "write the samples as a contiguous or chunked dataset",
                    ));
                }
            },
            Some(chunk) => {
                let mut deflate = false;
                for filter in dataset.filters() {
                    match filter {
                        hdf5::filters::Filter::Deflate(_) => deflate = true,
                        other => {
                            return Err(FormatError::unsupported(
                                format!(
                                    "{}: dataset {name} uses the HDF5 filter {other:?}, which \
                                     this reader does not decode",
                                    path.display()
                                ),
                                "write the data set uncompressed or with gzip",
                            ));
                        }
                    }
                }
                Placement::Chunked { chunk, deflate }
            }
        };
        records.push(RecordDataset {
            dataset,
            shape,
            itemsize,
            placement,
        });
    }
    let labels = if label_read == LabelRead::None {
        None
    } else {
        Some(labels_of(&file, path)?)
    };
    Ok(OpenHdf5 {
        path: path.to_path_buf(),
        _file: file,
        handle,
        samples,
        labels,
        cache: VecDeque::new(),
        cached_bytes: 0,
        sieves: std::iter::repeat_with(Sieve::default)
            .take(records.len())
            .collect(),
        records,
    })
}

/// The file address and element count of the `labels` dataset of int64 labels, which must be
/// contiguous (as dlio writes it) for `dataset.hdf5.label_read` to read it by address.
fn labels_of(file: &hdf5::File, path: &Path) -> Result<(u64, u64), FormatError> {
    let fix = "generate the data set with dlio (its labels are a contiguous int64 dataset), or \
               set dataset.hdf5.label_read: none";
    let dataset = file.dataset("labels").map_err(|_| {
        FormatError::unsupported(
            format!(
                "{} has no `labels` dataset, which dataset.hdf5.label_read reads",
                path.display()
            ),
            fix,
        )
    })?;
    let itemsize = dataset.dtype().map(|t| t.size()).unwrap_or(0);
    match (dataset.chunk(), dataset.offset(), itemsize) {
        (None, Some(offset), LABEL_BYTES) => Ok((offset, dataset.size() as u64)),
        _ => Err(FormatError::unsupported(
            format!(
                "{}: `labels` is not a contiguous dataset of 8-byte labels, which \
                 dataset.hdf5.label_read reads by address",
                path.display()
            ),
            fix,
        )),
    }
}

/// Bytes of one label (int64).
const LABEL_BYTES: usize = 8;

/// The most h5py's sieve buffer holds (its default size): a read of `labels[i]` through a
/// dataset opened for that access fills it from the label on, up to the dataset's end.
const SIEVE_BUFFER_BYTES: u64 = 64 << 10;

/// File address and stored size of the chunk starting at `coords`, or `None` when the chunk
/// was never written (it reads as fill value zeros).
fn chunk_location(dataset: &hdf5::Dataset, coords: &[u64]) -> Result<Option<(u64, u64)>, String> {
    let mut mask: std::ffi::c_uint = 0;
    let mut addr: haddr_t = 0;
    let mut size: hsize_t = 0;
    let _guard = hdf5_sys::LOCK.lock();
    // SAFETY: `coords` has one entry per dimension of the dataset (the caller builds it from
    // the dataset's shape); the out-pointers point to live locals.
    let status = unsafe {
        hdf5_sys::h5d::H5Dget_chunk_info_by_coord(
            dataset.id(),
            coords.as_ptr(),
            &mut mask,
            &mut addr,
            &mut size,
        )
    };
    if status < 0 {
        return Err(format!("no chunk information at {coords:?}"));
    }
    Ok((addr != HADDR_UNDEF).then_some((addr, size)))
}

impl FormatReader for Hdf5Reader {
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let file = open_file(storage, path, self.label_read)?;
        self.open.insert(key, file);
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
        let sample = u64::from(index);
        if sample >= file.samples {
            return Err(FormatError::SampleOutOfRange {
                path: file.path.clone(),
                index: sample,
                samples: file.samples,
            });
        }
        let place = BufferPlace::of(storage.capabilities());
        // One contiguous record dataset (dlio's own layout): the sample is its bytes where
        // the read put them, handed out without a copy into `sample`.
        if let [record] = &file.records[..]
            && let Placement::Contiguous(base) = record.placement
        {
            let part = record.shape[1..].iter().product::<usize>() * record.itemsize;
            let offset = base + sample * part as u64;
            let end = base + record.shape[0] as u64 * part as u64;
            let bytes = if self.sieve_bytes > part as u64 {
                file.sieves[0].read(
                    &mut *file.handle,
                    place,
                    (offset, part, end),
                    self.sieve_bytes,
                )?
            } else {
                read_range(&mut *file.handle, &mut self.buffer, place, offset, part)?
            };
            read_label(
                &mut *file.handle,
                file.labels,
                self.label_read,
                &mut self.label_buffer,
                place,
                sample,
            )?;
            return Ok(bytes);
        }
        self.sample.clear();
        for d in 0..file.records.len() {
            let record = &file.records[d];
            let part = record.shape[1..].iter().product::<usize>() * record.itemsize;
            let placement = match &record.placement {
                Placement::Contiguous(base) => Placement::Contiguous(*base),
                Placement::Chunked { chunk, deflate } => Placement::Chunked {
                    chunk: chunk.clone(),
                    deflate: *deflate,
                },
            };
            match &placement {
                Placement::Contiguous(base) if self.sieve_bytes > part as u64 => {
                    let offset = base + sample * part as u64;
                    let end = base + record.shape[0] as u64 * part as u64;
                    let bytes = file.sieves[d].read(
                        &mut *file.handle,
                        place,
                        (offset, part, end),
                        self.sieve_bytes,
                    )?;
                    self.sample.extend_from_slice(bytes);
                }
                Placement::Contiguous(base) => {
                    let offset = base + sample * part as u64;
                    let bytes =
                        read_range(&mut *file.handle, &mut self.buffer, place, offset, part)?;
                    self.sample.extend_from_slice(bytes);
                }
                Placement::Chunked { chunk, deflate } => {
                    let start = self.sample.len();
                    self.sample.resize(start + part, 0);
                    read_chunked(
                        file,
                        d,
                        chunk,
                        *deflate,
                        sample as usize,
                        place,
                        &mut self.buffer,
                        &mut self.chunk,
                        &mut self.sample[start..],
                    )?;
                }
            }
        }
        read_label(
            &mut *file.handle,
            file.labels,
            self.label_read,
            &mut self.label_buffer,
            place,
            sample,
        )?;
        Ok(&self.sample)
    }

    fn close(&mut self, key: FileKey) {
        self.open.remove(&key);
    }
}

/// What a sample's read also takes of the `labels` dataset (at `labels`: its address and
/// count), into a buffer of its own so that the sample's bytes stay where they were read.
fn read_label(
    handle: &mut dyn ReadHandle,
    labels: Option<(u64, u64)>,
    label_read: LabelRead,
    buffer: &mut Option<IoBuffer>,
    place: BufferPlace,
    sample: u64,
) -> Result<(), FormatError> {
    let Some((base, count)) = labels else {
        return Ok(());
    };
    if sample >= count {
        return Ok(());
    }
    let left = (count - sample) * LABEL_BYTES as u64;
    let len = match label_read {
        LabelRead::ToEnd => left.min(SIEVE_BUFFER_BYTES),
        _ => LABEL_BYTES as u64,
    };
    read_range(
        handle,
        buffer,
        place,
        base + sample * LABEL_BYTES as u64,
        len as usize,
    )?;
    Ok(())
}

/// Copies sample `sample` of chunked record dataset `d` into `out` (C order), reading every
/// chunk it touches through the storage (or the chunk cache).
#[allow(clippy::too_many_arguments)]
fn read_chunked(
    file: &mut OpenHdf5,
    d: usize,
    chunk: &[usize],
    deflate: bool,
    sample: usize,
    place: BufferPlace,
    buffer: &mut Option<IoBuffer>,
    scratch: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<(), FormatError> {
    let record = &file.records[d];
    let itemsize = record.itemsize;
    let shape = record.shape.clone();
    let per = &shape[1..];
    let chunk_bytes = chunk.iter().product::<usize>() * itemsize;
    let row_in_chunk = sample % chunk[0];
    let chunk_row_start = (sample - row_in_chunk) as u64;
    // Chunk grid over the sample dimensions.
    let grid: Vec<usize> = per
        .iter()
        .zip(&chunk[1..])
        .map(|(&p, &c)| p.div_ceil(c.max(1)))
        .collect();
    let mut grid_index = vec![0usize; per.len()];
    loop {
        let mut coords = vec![chunk_row_start];
        coords.extend(
            grid_index
                .iter()
                .zip(&chunk[1..])
                .map(|(&g, &c)| (g * c) as u64),
        );
        let cached = file
            .cache
            .iter()
            .position(|(dd, c, _)| *dd == d && *c == coords);
        let position = match cached {
            Some(p) => p,
            None => {
                let decoded = match chunk_location(&file.records[d].dataset, &coords)
                    .map_err(|e| h5_error(&file.path, "reading the chunk index", e))?
                {
                    None => vec![0u8; chunk_bytes],
                    Some((addr, size)) => {
                        let stored =
                            read_range(&mut *file.handle, buffer, place, addr, size as usize)?;
                        if deflate {
                            scratch.clear();
                            flate2::read::ZlibDecoder::new(stored)
                                .read_to_end(scratch)
                                .map_err(|e| {
                                    FormatError::corrupt(
                                        &file.path,
                                        addr,
                                        format!("a deflated chunk does not inflate: {e}"),
                                    )
                                })?;
                            std::mem::take(scratch)
                        } else {
                            stored.to_vec()
                        }
                    }
                };
                if decoded.len() < chunk_bytes {
                    return Err(FormatError::corrupt(
                        &file.path,
                        0,
                        format!(
                            "a chunk holds {} bytes but chunks of {chunk:?} need {chunk_bytes}",
                            decoded.len()
                        ),
                    ));
                }
                file.cached_bytes += decoded.len();
                file.cache.push_back((d, coords, decoded));
                while file.cached_bytes > CHUNK_CACHE_BYTES && file.cache.len() > 1 {
                    if let Some((_, _, old)) = file.cache.pop_front() {
                        file.cached_bytes -= old.len();
                    }
                }
                file.cache.len() - 1
            }
        };
        let data = &file.cache[position].2;
        copy_chunk_part(data, chunk, per, &grid_index, row_in_chunk, itemsize, out);
        // Next chunk of the grid (last dimension fastest).
        let mut axis = per.len();
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            grid_index[axis] += 1;
            if grid_index[axis] < grid[axis] {
                break;
            }
            grid_index[axis] = 0;
        }
    }
}

/// Copies the part of row `row` of a decoded chunk (grid position `grid_index` over the sample
/// dims) that lies inside the sample into `out`, the whole sample in C order.
fn copy_chunk_part(
    data: &[u8],
    chunk: &[usize],
    per: &[usize],
    grid_index: &[usize],
    row: usize,
    itemsize: usize,
    out: &mut [u8],
) {
    let n = per.len();
    if n == 0 {
        let at = row * itemsize;
        out[..itemsize].copy_from_slice(&data[at..at + itemsize]);
        return;
    }
    let inner = &chunk[1..];
    // Extent of this chunk inside the sample, per dimension.
    let lo: Vec<usize> = grid_index.iter().zip(inner).map(|(&g, &c)| g * c).collect();
    let len: Vec<usize> = lo
        .iter()
        .zip(inner)
        .zip(per)
        .map(|((&l, &c), &p)| c.min(p - l))
        .collect();
    let row_elems: usize = inner.iter().product();
    let mut idx = vec![0usize; n - 1];
    loop {
        // Offsets of the run along the last dimension.
        let mut src = row * row_elems;
        let mut dst = 0usize;
        let mut src_stride = 1usize;
        let mut dst_stride = 1usize;
        for axis in (0..n).rev() {
            let i = if axis == n - 1 { 0 } else { idx[axis] };
            src += i * src_stride;
            dst += (lo[axis] + i) * dst_stride;
            src_stride *= inner[axis];
            dst_stride *= per[axis];
        }
        let run = len[n - 1] * itemsize;
        out[dst * itemsize..dst * itemsize + run]
            .copy_from_slice(&data[src * itemsize..src * itemsize + run]);
        let mut axis = n - 1;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < len[axis] {
                break;
            }
            idx[axis] = 0;
        }
    }
}

/// The compressions HDF5 writes: none, or its built-in gzip filter.
fn check_compression(compression: Compression) -> Result<(), FormatError> {
    match compression {
        Compression::None | Compression::Gzip => Ok(()),
        Compression::Lzf => Err(FormatError::unsupported(
            "hdf5 compression lzf is h5py's plugin filter, which the HDF5 library does not \
             include",
            "set dataset.compression to gzip (with dataset.compression_level) or none",
        )),
        other => Err(FormatError::unsupported(
            format!("{other:?} is not an HDF5 filter"),
            "set dataset.compression to gzip (with dataset.compression_level) or none",
        )),
    }
}

#[cfg(test)]
mod tests {
    use dlio_storage::{Metered, PosixStorage};

    use super::*;

    fn format(k: u64, chunks: Vec<u64>, max_shape: Vec<Option<u64>>) -> Hdf5Format {
        Hdf5Format {
            num_dset_per_record: k,
            chunk_dims: chunks,
            max_shape,
            compression_level: 4,
            label_read: LabelRead::None,
            sieve_bytes: 0,
        }
    }

    fn layout(dims: Vec<usize>, element: ElementType, compression: Compression) -> FileLayout {
        FileLayout {
            samples: 5,
            sample_dims: dims,
            element,
            compression,
            fixed_size: false,
        }
    }

    fn expected(layout: &FileLayout, seed: u64, k: usize) -> Vec<Vec<u8>> {
        // Samples as generated: dataset j holds rng bytes after the earlier datasets'.
        let part = layout.sample_bytes() as usize / k;
        let samples = layout.samples as usize;
        let mut rng = DataRng::for_file(seed, 0, 0);
        let mut datasets = Vec::new();
        for _ in 0..k {
            let mut bytes = vec![0u8; part * samples];
            rng.fill(&mut bytes);
            datasets.push(bytes);
        }
        (0..samples)
            .map(|i| {
                datasets
                    .iter()
                    .flat_map(|d| d[i * part..(i + 1) * part].to_vec())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn contiguous_samples_are_one_read_each_and_match_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let l = layout(vec![6, 8], ElementType::Float32, Compression::None);
        let f = format(1, vec![], vec![]);
        let path = dir.path().join("a.hdf5");
        let written = f
            .generate(&storage, &path, &l, &mut DataRng::for_file(9, 0, 0))
            .unwrap();
        assert_eq!(written, std::fs::metadata(&path).unwrap().len());
        let want = expected(&l, 9, 1);
        let mut reader = f.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        let before = storage.counters().snapshot();
        assert_eq!(reader.read_sample(&storage, 0, 3).unwrap(), &want[3][..]);
        let delta = storage.counters().snapshot() - before;
        assert_eq!((delta.read_requests, delta.bytes_read), (1, 192));
    }

    #[test]
    fn a_sieve_reads_a_window_from_the_sample_on_and_serves_the_samples_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        // 5 samples of 192 bytes; a window of 400 bytes holds a sample and the next.
        let l = layout(vec![6, 8], ElementType::Float32, Compression::None);
        let path = dir.path().join("s.hdf5");
        let f = Hdf5Format {
            sieve_bytes: 400,
            ..format(1, vec![], vec![])
        };
        f.generate(&storage, &path, &l, &mut DataRng::for_file(9, 0, 0))
            .unwrap();
        let want = expected(&l, 9, 1);
        let mut reader = f.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        // (sample, read requests, bytes): 1 reads 400 bytes from its start; 2 lies inside
        // that window (bytes 192..384 of it); 3 does not and reads a window clipped at the
        // dataset's end (samples 3 and 4: 384 bytes); 0 comes before the window.
        for (sample, requests, bytes) in
            [(1, 1, 400), (2, 0, 0), (3, 1, 384), (4, 0, 0), (0, 1, 400)]
        {
            let before = storage.counters().snapshot();
            assert_eq!(
                reader.read_sample(&storage, 0, sample).unwrap(),
                &want[sample as usize][..],
                "sample {sample}"
            );
            let delta = storage.counters().snapshot() - before;
            assert_eq!(
                (delta.read_requests, delta.bytes_read),
                (requests, bytes),
                "sample {sample}"
            );
        }
    }

    #[test]
    fn a_samples_label_is_read_after_it_alone_or_to_the_labels_end() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let l = layout(vec![6, 8], ElementType::Float32, Compression::None);
        let path = dir.path().join("l.hdf5");
        format(1, vec![], vec![])
            .generate(&storage, &path, &l, &mut DataRng::for_file(9, 0, 0))
            .unwrap();
        let want = expected(&l, 9, 1);
        // 5 samples: sample 1's label alone is 8 bytes, from it to the end 4 labels.
        for (label_read, label_bytes) in [
            (LabelRead::None, 0),
            (LabelRead::Element, 8),
            (LabelRead::ToEnd, 32),
        ] {
            let f = Hdf5Format {
                label_read,
                ..format(1, vec![], vec![])
            };
            let mut reader = f.reader(&l);
            reader.open(&storage, 0, &path).unwrap();
            let before = storage.counters().snapshot();
            // The sample handed out is the records' alone.
            assert_eq!(reader.read_sample(&storage, 0, 1).unwrap(), &want[1][..]);
            let delta = storage.counters().snapshot() - before;
            let requests = if label_bytes > 0 { 2 } else { 1 };
            assert_eq!(
                (delta.read_requests, delta.bytes_read),
                (requests, 192 + label_bytes),
                "{label_read:?}"
            );
        }
    }

    #[test]
    fn chunked_and_deflated_samples_read_their_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        // records (5, 6, 8) in chunks (2, 4, 3): edge chunks in both sample dims.
        for compression in [Compression::None, Compression::Gzip] {
            let l = layout(vec![6, 8], ElementType::Int16, compression);
            let f = format(1, vec![2, 4, 3], vec![]);
            let path = dir.path().join(format!("c{compression:?}.hdf5"));
            f.generate(&storage, &path, &l, &mut DataRng::for_file(9, 0, 0))
                .unwrap();
            let want = expected(&l, 9, 1);
            let mut reader = f.reader(&l);
            for i in 0..5u32 {
                reader.open(&storage, 0, &path).unwrap();
                let got = reader.read_sample(&storage, 0, i).unwrap();
                assert_eq!(got, &want[i as usize][..], "{compression:?} sample {i}");
                reader.close(0);
            }
            // Uncompressed: a sample reads its 2x3 chunks of 2*4*3*2 bytes each.
            if compression == Compression::None {
                reader.open(&storage, 0, &path).unwrap();
                let before = storage.counters().snapshot();
                reader.read_sample(&storage, 0, 1).unwrap();
                let delta = storage.counters().snapshot() - before;
                assert_eq!((delta.read_requests, delta.bytes_read), (6, 6 * 48));
                // The neighbour in the same chunk row comes from the chunk cache.
                let before = storage.counters().snapshot();
                reader.read_sample(&storage, 0, 0).unwrap();
                assert_eq!((storage.counters().snapshot() - before).bytes_read, 0);
            }
        }
    }

    #[test]
    fn records_split_over_datasets_and_resizable_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let l = layout(vec![6, 4, 2], ElementType::Int8, Compression::None);
        let f = format(3, vec![], vec![None, None, Some(10), Some(2)]);
        let path = dir.path().join("k.hdf5");
        f.generate(&storage, &path, &l, &mut DataRng::for_file(9, 0, 0))
            .unwrap();
        let file = hdf5::File::open(&path).unwrap();
        for j in 0..3 {
            let ds = file.dataset(&format!("records_{j}")).unwrap();
            assert_eq!(ds.shape(), vec![5, 2, 4, 2]);
        }
        assert_eq!(file.dataset("labels").unwrap().shape(), vec![5]);
        let want = expected(&l, 9, 3);
        let mut reader = f.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        assert_eq!(reader.read_sample(&storage, 0, 4).unwrap(), &want[4][..]);
    }

    #[test]
    fn dataset_dims_follow_dlio() {
        assert_eq!(dataset_sample_dims(&[3, 64, 64], 3).unwrap(), vec![64, 64]);
        assert_eq!(dataset_sample_dims(&[6, 64], 3).unwrap(), vec![2, 64]);
        assert_eq!(dataset_sample_dims(&[64, 64], 1).unwrap(), vec![64, 64]);
        assert!(dataset_sample_dims(&[5, 64], 3).is_err());
    }

    #[test]
    fn unsupported_filters_and_damaged_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let l = layout(vec![4, 4], ElementType::Uint8, Compression::Lzf);
        let err = format(1, vec![], vec![])
            .generate(
                &storage,
                &dir.path().join("x.hdf5"),
                &l,
                &mut DataRng::for_file(1, 0, 0),
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("gzip"), "{err}");
        let path = dir.path().join("bad.hdf5");
        std::fs::write(&path, b"not hdf5 at all").unwrap();
        let mut reader = format(1, vec![], vec![]).reader(&l);
        let err = reader.open(&storage, 0, &path).unwrap_err().to_string();
        assert!(err.contains("bad.hdf5") && err.contains("HDF5"), "{err}");
    }
}
