//! `indexed_binary` and `mmap_indexed_binary`: Megatron/DLRM-style raw sample files with two
//! index files beside them, `<file>.off.idx` and `<file>.sz.idx`, each holding one native-endian
//! `uint64` per sample (offset and size of the sample in the data file).
//!
//! Generation streams unique random bytes for every sample (upstream repeats one 2 GiB buffer,
//! which deduplicating storage shrinks) and writes offsets that are correct in files of any
//! size (upstream restarts them at every generation-buffer chunk: bug B13). The index files are
//! committed before the data file, so a data file that exists always has its index.
//!
//! Reading follows DLIO's reader: the index files of a file are loaded once per reader (and
//! kept, as upstream loads them at reader start), and each sample is one positioned read of
//! exactly its bytes.
//!
//! `mmap_indexed_binary` emulates `np.memmap` access that really touches the sample: upstream
//! slices the map and never touches a page (bug B7), so no data I/O happens at all. Here a
//! sample read fetches every page the sample spans (page-aligned start and end, 4 KiB pages),
//! which is what the page faults of a real memory-mapped read would fetch. On a storage engine
//! that maps files (the mmap engine), the same requests become page touches of the mapping.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dlio_config::{DatasetConfig, FormatKind};
use dlio_storage::{IoBuffer, ReadHandle, Storage};

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::npy::{HandleSink, write_random_chunked};
use crate::ranged::{BufferPlace, read_range, read_small_file, with_suffix, write_whole_file};
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// Suffix of the offsets index file.
pub(crate) const OFFSETS_SUFFIX: &str = ".off.idx";
/// Suffix of the sizes index file.
pub(crate) const SIZES_SUFFIX: &str = ".sz.idx";
/// The page size whose pages a memory-mapped read touches.
const PAGE: u64 = 4096;
/// Index files of this many data files are kept per reader before the oldest are dropped.
const CACHED_INDEXES: usize = 4096;

/// `indexed_binary`: raw samples plus offset and size index files, one positioned read per
/// sample.
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::IndexedBinary,
    aliases: &[],
    // Raw bytes carry any extension; characterisation tells them by how they are read.
    extensions: &[],
    magic: &[],
    stores_samples_as_they_are: true,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: true,
    check: no_checks,
    build: |dataset, _| Ok(Box::new(IndexedBinaryFormat::from_config(dataset, false))),
};

/// `mmap_indexed_binary`: as `indexed_binary`, read through a memory map.
pub(crate) const MMAP_DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::MmapIndexedBinary,
    aliases: &[],
    build: |dataset, _| Ok(Box::new(IndexedBinaryFormat::from_config(dataset, true))),
    ..DESCRIPTOR
};

/// Both indexed-binary formats; `mmap` selects the memory-map read pattern.
#[derive(Debug, Clone)]
pub(crate) struct IndexedBinaryFormat {
    pub(crate) mmap: bool,
    /// `dataset.generation_buffer_size`: the most bytes generated and written at a time
    /// (each chunk holds fresh random bytes, unlike upstream's reused buffer).
    pub(crate) write_chunk: u64,
    /// `record_length_bytes_per: sample`: the distribution's sizes with their cumulative
    /// shares, which each file's samples take at evenly spaced quantiles; empty: every
    /// sample of a file has the layout's size.
    pub(crate) sample_sizes: Arc<[(u64, f64)]>,
    /// `dataset.header_read_bytes`: read at each opening before its samples.
    pub(crate) header_read: u64,
}

impl IndexedBinaryFormat {
    fn from_config(dataset: &DatasetConfig, mmap: bool) -> IndexedBinaryFormat {
        let per_sample = dataset.record_length_bytes_per == dlio_config::SizesPer::Sample;
        let mut sizes: Vec<(u64, f64)> = if per_sample {
            dataset
                .record_length_bytes_distribution
                .iter()
                .map(|e| (e.size.max(1), e.weight.max(0.0)))
                .collect()
        } else {
            Vec::new()
        };
        sizes.sort_by_key(|&(size, _)| size);
        let total: f64 = sizes.iter().map(|&(_, w)| w).sum();
        let mut cumulative = 0.0;
        for entry in &mut sizes {
            cumulative += entry.1 / total;
            entry.1 = cumulative;
        }
        IndexedBinaryFormat {
            mmap,
            write_chunk: dataset.generation_buffer_size,
            sample_sizes: sizes.into(),
            header_read: dataset.header_read_bytes,
        }
    }

    /// The size of each of a file's `samples` samples: the layout's `sample` bytes, or the
    /// distribution's quantiles at evenly spaced points, shifted together by a draw from
    /// `rng`, in an order drawn from it too: each file's total is close to the
    /// distribution's mean times its samples, and files of few samples still take the whole
    /// distribution between them (the midpoints gave every file of two samples the same two
    /// sizes). A `fixed` layout's samples all take its size.
    fn sizes(&self, samples: u64, sample: u64, fixed: bool, rng: &mut DataRng) -> Vec<u64> {
        if fixed || self.sample_sizes.is_empty() {
            return vec![sample; samples as usize];
        }
        let mut word = [0u8; 8];
        rng.fill(&mut word);
        // 53 random bits as a uniform number in [0, 1).
        let shift = (u64::from_le_bytes(word) >> 11) as f64 / (1u64 << 53) as f64;
        let mut sizes: Vec<u64> = (0..samples)
            .map(|i| {
                let q = (i as f64 + shift) / samples as f64;
                let at = self.sample_sizes.partition_point(|&(_, c)| c < q);
                self.sample_sizes[at.min(self.sample_sizes.len() - 1)].0
            })
            .collect();
        // Fisher-Yates over the file's generator: the order is the file's own, reproducibly.
        let mut word = [0u8; 8];
        for i in (1..sizes.len()).rev() {
            rng.fill(&mut word);
            let j = (u64::from_le_bytes(word) % (i as u64 + 1)) as usize;
            sizes.swap(i, j);
        }
        sizes
    }
}

impl Format for IndexedBinaryFormat {
    fn name(&self) -> &'static str {
        if self.mmap {
            "mmap_indexed_binary"
        } else {
            "indexed_binary"
        }
    }

    fn extension(&self) -> &'static str {
        self.name()
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let sample = layout.sample_bytes();
        let samples = u64::from(layout.samples);
        let each = self.sizes(samples, sample, layout.fixed_size, rng);
        let total = each
            .iter()
            .try_fold(0u64, |t, &s| t.checked_add(s))
            .ok_or_else(|| {
                FormatError::unsupported(
                    format!(
                        "a file of {samples} samples of {sample} bytes holds more than 2^64 bytes"
                    ),
                    "use smaller samples or fewer samples per file",
                )
            })?;
        let mut offsets = Vec::with_capacity(layout.samples as usize * 8);
        let mut sizes = Vec::with_capacity(layout.samples as usize * 8);
        let mut at = 0u64;
        for &size in &each {
            offsets.extend_from_slice(&at.to_ne_bytes());
            sizes.extend_from_slice(&size.to_ne_bytes());
            at += size;
        }
        let index_paths = [
            with_suffix(path, OFFSETS_SUFFIX),
            with_suffix(path, SIZES_SUFFIX),
        ];
        let written = (|| -> Result<u64, FormatError> {
            let index_bytes = write_whole_file(storage, &index_paths[0], &offsets)?
                + write_whole_file(storage, &index_paths[1], &sizes)?;
            let mut out = storage.create(path)?;
            write_random_chunked(&mut HandleSink(&mut *out), rng, total, self.write_chunk)?;
            Ok(out.commit()? + index_bytes)
        })();
        if written.is_err() {
            // The data file is published last, and only whole: without it, its index files
            // describe nothing, so they go too (a full disk must not leave orphans behind).
            for index in &index_paths {
                let _ = storage.remove_file(index);
            }
        }
        written
    }

    fn expected_size(&self, layout: &FileLayout) -> Option<u64> {
        if !layout.fixed_size && !self.sample_sizes.is_empty() {
            // Drawn per file: the total is known only once they are.
            return None;
        }
        layout.sample_bytes().checked_mul(u64::from(layout.samples))
    }

    /// The fork's memory-mapped reader maps each file once, when the reader starts, and never
    /// reopens it per sample; the plain reader opens per sample under `on_demand`, as DLIO's.
    fn keeps_files_open(&self) -> bool {
        self.mmap
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(IndexedBinaryReader {
            mmap: self.mmap,
            header_read: self.header_read,
            indexes: HashMap::new(),
            open: rustc_hash::FxHashMap::default(),
            buffer: None,
            index_buffer: None,
        })
    }
}

/// The offsets and sizes of one data file's samples.
#[derive(Debug)]
pub(crate) struct SampleIndex {
    pub(crate) offsets: Vec<u64>,
    pub(crate) sizes: Vec<u64>,
}

impl SampleIndex {
    /// Loads `<path>.off.idx` and `<path>.sz.idx`.
    pub(crate) fn load(
        storage: &dyn Storage,
        path: &Path,
        buffer: &mut Option<IoBuffer>,
    ) -> Result<SampleIndex, FormatError> {
        let read = |suffix: &str, buffer: &mut Option<IoBuffer>| {
            let index_path = with_suffix(path, suffix);
            let bytes = read_small_file(storage, &index_path, buffer)?;
            if bytes.len() % 8 != 0 {
                return Err(FormatError::corrupt(
                    &index_path,
                    (bytes.len() / 8 * 8) as u64,
                    format!(
                        "an index file holds 8-byte entries, but this one has {} bytes (the \
                         last entry is cut short)",
                        bytes.len()
                    ),
                ));
            }
            Ok(bytes
                .chunks_exact(8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
                .collect::<Vec<u64>>())
        };
        let offsets = read(OFFSETS_SUFFIX, buffer)?;
        let sizes = read(SIZES_SUFFIX, buffer)?;
        if offsets.len() != sizes.len() {
            return Err(FormatError::corrupt(
                &with_suffix(path, SIZES_SUFFIX),
                (sizes.len().min(offsets.len()) * 8) as u64,
                format!(
                    "{} offsets but {} sizes: the two index files disagree",
                    offsets.len(),
                    sizes.len()
                ),
            ));
        }
        Ok(SampleIndex { offsets, sizes })
    }
}

struct OpenData {
    path: PathBuf,
    handle: Box<dyn ReadHandle>,
    index: Arc<SampleIndex>,
}

struct IndexedBinaryReader {
    mmap: bool,
    /// Bytes read from each file's start at each opening (`dataset.header_read_bytes`).
    header_read: u64,
    indexes: HashMap<PathBuf, Arc<SampleIndex>>,
    open: rustc_hash::FxHashMap<FileKey, OpenData>,
    buffer: Option<IoBuffer>,
    index_buffer: Option<IoBuffer>,
}

impl FormatReader for IndexedBinaryReader {
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let index = match self.indexes.get(path) {
            Some(index) => Arc::clone(index),
            None => {
                let index = Arc::new(SampleIndex::load(storage, path, &mut self.index_buffer)?);
                if self.indexes.len() >= CACHED_INDEXES {
                    self.indexes.clear();
                }
                self.indexes.insert(path.to_path_buf(), Arc::clone(&index));
                index
            }
        };
        let handle = storage.open(path)?;
        // The samples tile the data file: an index that lists fewer bytes (a sample of 0
        // bytes, a lost entry) would read less than the file holds without a word.
        let listed = index
            .sizes
            .iter()
            .fold(0u64, |sum, &size| sum.saturating_add(size));
        if listed != handle.len() {
            return Err(FormatError::corrupt(
                &with_suffix(path, SIZES_SUFFIX),
                0,
                format!(
                    "its {} samples add up to {listed} bytes, but {} has {} bytes; the index \
                     and the data file are not of one generation",
                    index.sizes.len(),
                    path.display(),
                    handle.len()
                ),
            ));
        }
        let mut handle = handle;
        if self.header_read > 0 {
            // The file's header, as the program's library parses it before the samples.
            let len = usize::try_from(self.header_read.min(handle.len()))
                .map_err(|_| FormatError::corrupt(path, 0, "a header larger than memory"))?;
            let place = BufferPlace::of(storage.capabilities());
            read_range(&mut *handle, &mut self.buffer, place, 0, len)?;
        }
        self.open.insert(
            key,
            OpenData {
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
        let i = index as usize;
        let (Some(&offset), Some(&size)) = (file.index.offsets.get(i), file.index.sizes.get(i))
        else {
            return Err(FormatError::SampleOutOfRange {
                path: file.path.clone(),
                index: u64::from(index),
                samples: file.index.offsets.len() as u64,
            });
        };
        let end = offset.checked_add(size).filter(|&e| e <= file.handle.len());
        let Some(end) = end else {
            return Err(FormatError::corrupt(
                &file.path,
                offset,
                format!(
                    "sample {index} spans bytes {offset}..{} by its index, but the file has {} \
                     bytes",
                    offset.saturating_add(size),
                    file.handle.len()
                ),
            ));
        };
        let len = usize::try_from(size)
            .map_err(|_| FormatError::corrupt(&file.path, offset, "a sample larger than memory"))?;
        let place = BufferPlace::of(storage.capabilities());
        if !self.mmap {
            return read_range(&mut *file.handle, &mut self.buffer, place, offset, len);
        }
        // Every page the sample spans, as the page faults of a mapped read fetch them.
        let first = offset / PAGE * PAGE;
        let last = end
            .div_ceil(PAGE)
            .saturating_mul(PAGE)
            .min(file.handle.len());
        let span = usize::try_from(last - first)
            .map_err(|_| FormatError::corrupt(&file.path, offset, "a sample larger than memory"))?;
        let pages = read_range(&mut *file.handle, &mut self.buffer, place, first, span)?;
        let head = (offset - first) as usize;
        Ok(&pages[head..head + len])
    }

    fn close(&mut self, key: FileKey) {
        self.open.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use dlio_config::{Compression, ElementType};
    use dlio_storage::{Metered, PosixStorage};

    use super::*;

    fn layout(samples: u32, dims: Vec<usize>, element: ElementType) -> FileLayout {
        FileLayout {
            samples,
            sample_dims: dims,
            element,
            compression: Compression::None,
            fixed_size: false,
        }
    }

    #[test]
    fn index_files_hold_native_u64_offsets_and_sizes_of_every_sample() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let format = IndexedBinaryFormat {
            mmap: false,
            write_chunk: 1 << 20,
            sample_sizes: Arc::from(Vec::new()),
            header_read: 0,
        };
        let path = dir.path().join("f.indexed_binary");
        let l = layout(3, vec![5, 7], ElementType::Float32);
        let written = format
            .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        assert_eq!(written, 3 * 140 + 2 * 24);
        let off = std::fs::read(with_suffix(&path, OFFSETS_SUFFIX)).unwrap();
        let sz = std::fs::read(with_suffix(&path, SIZES_SUFFIX)).unwrap();
        let words = |b: &[u8]| -> Vec<u64> {
            b.chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .collect()
        };
        assert_eq!(words(&off), [0, 140, 280]);
        assert_eq!(words(&sz), [140, 140, 140]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 420);
        assert_eq!(format.expected_size(&l), Some(420));
    }

    #[test]
    fn each_opening_reads_the_header_first_when_asked_and_then_its_samples() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let format = IndexedBinaryFormat {
            mmap: false,
            write_chunk: 1 << 20,
            sample_sizes: Arc::from(Vec::new()),
            header_read: 44,
        };
        let path = dir.path().join("f.indexed_binary");
        let l = layout(4, vec![100], ElementType::Uint8);
        format
            .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        let data = std::fs::read(&path).unwrap();
        let mut reader = format.reader(&l);
        for _ in 0..2 {
            let before = storage.counters().snapshot();
            reader.open(&storage, 0, &path).unwrap();
            let opened = storage.counters().snapshot() - before;
            assert_eq!(reader.read_sample(&storage, 0, 3).unwrap(), &data[300..400]);
            let read = storage.counters().snapshot() - before;
            // The index files once (kept by the reader), the header at every opening.
            assert!(opened.bytes_read >= 44, "{opened:?}");
            assert_eq!(read.bytes_read - opened.bytes_read, 100);
            reader.close(0);
        }
        let before = storage.counters().snapshot();
        reader.open(&storage, 0, &path).unwrap();
        let again = storage.counters().snapshot() - before;
        assert_eq!((again.read_requests, again.bytes_read), (1, 44));
    }

    #[test]
    fn each_sample_is_one_read_of_exactly_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let format = IndexedBinaryFormat {
            mmap: false,
            write_chunk: 1 << 20,
            sample_sizes: Arc::from(Vec::new()),
            header_read: 0,
        };
        let path = dir.path().join("f.indexed_binary");
        let l = layout(4, vec![100], ElementType::Uint8);
        format
            .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        let data = std::fs::read(&path).unwrap();
        let mut reader = format.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        let before = storage.counters().snapshot();
        assert_eq!(reader.read_sample(&storage, 0, 2).unwrap(), &data[200..300]);
        let after = storage.counters().snapshot() - before;
        assert_eq!((after.read_requests, after.bytes_read), (1, 100));
        assert!(matches!(
            reader.read_sample(&storage, 0, 4),
            Err(FormatError::SampleOutOfRange { samples: 4, .. })
        ));
    }

    #[test]
    fn mmap_reads_touch_every_page_of_the_sample() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Metered::new(PosixStorage::new());
        let format = IndexedBinaryFormat {
            mmap: true,
            write_chunk: 1 << 20,
            sample_sizes: Arc::from(Vec::new()),
            header_read: 0,
        };
        let path = dir.path().join("f.mmap_indexed_binary");
        // 3 samples of 5000 bytes: sample 1 spans bytes 5000..10000, pages 4096..12288.
        let l = layout(3, vec![5000], ElementType::Uint8);
        format
            .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        let data = std::fs::read(&path).unwrap();
        let mut reader = format.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        let before = storage.counters().snapshot();
        assert_eq!(
            reader.read_sample(&storage, 0, 1).unwrap(),
            &data[5000..10000]
        );
        assert_eq!((storage.counters().snapshot() - before).bytes_read, 8192);
        // The last sample's pages end at the end of the file.
        let before = storage.counters().snapshot();
        assert_eq!(reader.read_sample(&storage, 0, 2).unwrap(), &data[10000..]);
        assert_eq!(
            (storage.counters().snapshot() - before).bytes_read,
            15000 - 8192
        );
    }

    #[test]
    fn sizes_per_sample_are_the_distributions_quantiles_in_the_index_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let dataset = DatasetConfig {
            format: FormatKind::IndexedBinary,
            record_length_bytes_distribution: vec![
                dlio_config::TransferSizeWeight {
                    size: 100,
                    weight: 3.0,
                },
                dlio_config::TransferSizeWeight {
                    size: 1000,
                    weight: 1.0,
                },
            ],
            record_length_bytes_per: dlio_config::SizesPer::Sample,
            ..DatasetConfig::default()
        };
        let format = IndexedBinaryFormat::from_config(&dataset, false);
        let path = dir.path().join("f.indexed_binary");
        let l = layout(8, vec![64], ElementType::Uint8);
        format
            .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        let words = |suffix: &str| -> Vec<u64> {
            std::fs::read(with_suffix(&path, suffix))
                .unwrap()
                .chunks_exact(8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                .collect()
        };
        let (offsets, sizes) = (words(OFFSETS_SUFFIX), words(SIZES_SUFFIX));
        // 8 samples: 6 at 100 bytes and 2 at 1000, in the file's own order.
        let mut sorted = sizes.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [100, 100, 100, 100, 100, 100, 1000, 1000]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2600);
        for i in 1..8 {
            assert_eq!(offsets[i], offsets[i - 1] + sizes[i - 1]);
        }
        assert_eq!(format.expected_size(&l), None);
        // A layout of fixed size (evaluation samples of a size of their own) keeps it in every
        // sample, whatever the distribution.
        let fixed_path = dir.path().join("eval.indexed_binary");
        let fixed = FileLayout {
            fixed_size: true,
            ..layout(8, vec![64], ElementType::Uint8)
        };
        format
            .generate(
                &storage,
                &fixed_path,
                &fixed,
                &mut DataRng::for_file(1, 1, 0),
            )
            .unwrap();
        assert_eq!(std::fs::metadata(&fixed_path).unwrap().len(), 8 * 64);
        assert_eq!(format.expected_size(&fixed), Some(8 * 64));
        // Each sample is read at its own size.
        let mut reader = format.reader(&l);
        reader.open(&storage, 0, &path).unwrap();
        for (i, &size) in sizes.iter().enumerate() {
            assert_eq!(
                reader.read_sample(&storage, 0, i as u32).unwrap().len() as u64,
                size
            );
        }
    }

    /// A generated file of `samples` samples of 64 bytes in `dir`.
    fn generated(
        dir: &Path,
        samples: u32,
    ) -> (PosixStorage, IndexedBinaryFormat, PathBuf, FileLayout) {
        let storage = PosixStorage::new();
        let format = IndexedBinaryFormat {
            mmap: false,
            write_chunk: 1 << 20,
            sample_sizes: Arc::from(Vec::new()),
            header_read: 0,
        };
        let path = dir.join("f.indexed_binary");
        let l = layout(samples, vec![64], ElementType::Uint8);
        format
            .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        (storage, format, path, l)
    }

    #[test]
    fn short_index_and_truncated_data_name_the_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, format, path, l) = generated(dir.path(), 2);
        let off = with_suffix(&path, OFFSETS_SUFFIX);
        let bytes = std::fs::read(&off).unwrap();
        std::fs::write(&off, &bytes[..12]).unwrap();
        let mut reader = format.reader(&l);
        let err = reader.open(&storage, 0, &path).unwrap_err().to_string();
        assert!(
            err.contains("f.indexed_binary.off.idx") && err.contains("offset 8"),
            "{err}"
        );

        std::fs::write(&off, &bytes).unwrap();
        std::fs::write(&path, vec![0u8; 100]).unwrap();
        let mut reader = format.reader(&l);
        let err = reader.open(&storage, 0, &path).unwrap_err().to_string();
        assert!(
            err.contains("add up to 128 bytes") && err.contains("has 100 bytes"),
            "{err}"
        );
    }

    #[test]
    fn an_index_of_empty_samples_is_refused_not_read_short() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, format, path, l) = generated(dir.path(), 4);
        let sizes = with_suffix(&path, SIZES_SUFFIX);
        let mut bytes = std::fs::read(&sizes).unwrap();
        bytes[8..16].copy_from_slice(&0u64.to_ne_bytes());
        std::fs::write(&sizes, &bytes).unwrap();
        let mut reader = format.reader(&l);
        let err = reader.open(&storage, 0, &path).unwrap_err().to_string();
        assert!(
            err.contains("f.indexed_binary.sz.idx") && err.contains("add up to 192 bytes"),
            "{err}"
        );
    }
}
