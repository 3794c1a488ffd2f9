//! Streaming checkpoint writes and reads through a [`Storage`].
//!
//! Nothing here holds a tensor: every file is produced through one reusable chunk buffer, and
//! consumed through one reusable window of a few chunks, so memory stays bounded per rank
//! whatever the checkpoint size (upstream keeps the whole checkpoint in RAM, issues
//! #308/#188). A restart reads each file as a stream of chunks
//! ([`dlio_storage::ReadHandle::read_stream`]) with the engine's `io_depth` of them in flight
//! (at most [`MAX_READ_WINDOW_BYTES`] of memory), so an io_uring or S3 engine keeps its queue
//! full from a file's first chunk to its last.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dlio_storage::{Extent, IoBuffer, Storage, StorageError};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

use crate::{
    CheckpointError, CheckpointFile, CheckpointPlan, Datatype, FileContent, recovery_source_rank,
};

/// Default size of the chunk buffer of a writer or reader: 16 MiB.
pub const DEFAULT_CHUNK_BYTES: usize = 16 << 20;

/// Most memory a [`CheckpointReader`] lends the engine: `io_depth` chunks in flight, but no
/// more than this (256 MiB), or a deep queue of 16 MiB chunks would take gigabytes per rank.
pub const MAX_READ_WINDOW_BYTES: usize = 256 << 20;

/// How a [`CheckpointWriter`] produces bytes (`checkpoint.*` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// `checkpoint.randomize_tensor`: unique pseudo-random bytes (true) or the encoding of 1 in
    /// each file's datatype, like `torch.ones` (false).
    pub randomize_tensor: bool,
    /// `checkpoint.fsync`: fsync every file before publishing it.
    pub fsync: bool,
    /// Seed of the byte generator; with the checkpoint and file names it gives every file its
    /// own stream, so no two files (and no two chunks) hold the same bytes.
    pub seed: u64,
    /// Size of the reusable chunk buffer, a positive multiple of 8 ([`DEFAULT_CHUNK_BYTES`]).
    pub chunk_bytes: usize,
}

/// What one rank wrote for one checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReport {
    /// Files written.
    pub files: u32,
    /// Bytes written.
    pub bytes: u64,
    /// Wall time from the first byte to the last commit (including fsyncs).
    pub duration: Duration,
}

/// Writes one rank's share of checkpoints, streaming each file from a fast generator.
///
/// One writer per rank (it owns its buffer); reuse it for every checkpoint of the run.
#[derive(Debug)]
pub struct CheckpointWriter {
    options: WriteOptions,
    /// Allocated on the first file, then reused.
    buffer: Vec<u8>,
    /// The datatype whose encoding of 1 fills `buffer`, when not randomizing.
    ones_of: Option<Datatype>,
}

impl CheckpointWriter {
    /// A writer; fails if the chunk size is not a positive multiple of 8.
    pub fn new(options: WriteOptions) -> Result<CheckpointWriter, CheckpointError> {
        check_chunk(options.chunk_bytes)?;
        Ok(CheckpointWriter {
            options,
            buffer: Vec::new(),
            ones_of: None,
        })
    }

    /// Writes the files of `rank` (from `plan`) into `checkpoint_folder/checkpoint_name`
    /// (see [`crate::checkpoint_dir_name`]). Each file is written under a temporary name and
    /// published when complete; a failure removes the partial file and says which file failed
    /// after how many bytes.
    pub fn write(
        &mut self,
        storage: &dyn Storage,
        checkpoint_folder: &Path,
        checkpoint_name: &str,
        plan: &CheckpointPlan,
        rank: u32,
    ) -> Result<WriteReport, CheckpointError> {
        let files = &plan.rank(rank)?.files;
        let start = Instant::now();
        let dir = checkpoint_folder.join(checkpoint_name);
        storage
            .create_dir_all(&dir)
            .map_err(|source| CheckpointError::CreateDir {
                source: Box::new(source),
            })?;
        let mut report = WriteReport {
            files: 0,
            bytes: 0,
            duration: Duration::ZERO,
        };
        for file in files {
            let path = dir.join(&file.name);
            report.bytes += self.write_file(storage, &path, checkpoint_name, file)?;
            report.files += 1;
        }
        report.duration = start.elapsed();
        Ok(report)
    }

    fn write_file(
        &mut self,
        storage: &dyn Storage,
        path: &Path,
        checkpoint_name: &str,
        file: &CheckpointFile,
    ) -> Result<u64, CheckpointError> {
        let expected = file.bytes;
        let failed = |written: u64, source: StorageError| CheckpointError::Write {
            path: path.to_path_buf(),
            written,
            expected,
            source: Box::new(source),
        };
        let mut handle = storage.create(path).map_err(|e| failed(0, e))?;
        let mut written: u64 = 0;
        match file.content {
            FileContent::Text(ref text) => {
                handle
                    .write_all(text.as_bytes())
                    .map_err(|e| failed(0, e))?;
                written = text.len() as u64;
            }
            FileContent::Tensors { datatype, .. } => {
                let chunk = self.options.chunk_bytes;
                if self.buffer.len() != chunk {
                    self.buffer = vec![0; chunk];
                    self.ones_of = None;
                }
                if self.options.randomize_tensor {
                    self.ones_of = None;
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(file_seed(
                        self.options.seed,
                        checkpoint_name,
                        &file.name,
                    ));
                    while written < expected {
                        let n = (expected - written).min(chunk as u64) as usize;
                        rng.fill_bytes(&mut self.buffer[..n]);
                        handle
                            .write_all(&self.buffer[..n])
                            .map_err(|e| failed(written, e))?;
                        written += n as u64;
                    }
                } else {
                    if self.ones_of != Some(datatype) {
                        let one = datatype.one_bytes();
                        // The chunk is a multiple of 8, so every chunk starts on an element.
                        for element in self.buffer.chunks_exact_mut(one.len()) {
                            element.copy_from_slice(one);
                        }
                        self.ones_of = Some(datatype);
                    }
                    while written < expected {
                        let n = (expected - written).min(chunk as u64) as usize;
                        handle
                            .write_all(&self.buffer[..n])
                            .map_err(|e| failed(written, e))?;
                        written += n as u64;
                    }
                }
            }
        }
        if self.options.fsync {
            handle.sync().map_err(|e| failed(written, e))?;
        }
        handle.commit().map_err(|e| failed(written, e))
    }
}

/// How a [`CheckpointReader`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Drop the page cache of the files before reading them, so the reads reach storage (see
    /// [`drop_page_cache`]). Failures become warnings.
    pub drop_page_cache: bool,
    /// `checkpoint.recovery_rank_shift`: `Some(ranks_per_node)` reads the files of rank
    /// `(rank + ranks_per_node) % world` (the same local rank on the next node).
    pub recovery_rank_shift: Option<u32>,
    /// Size of each read request, a positive multiple of 8 ([`DEFAULT_CHUNK_BYTES`]); the
    /// reader keeps the engine's `io_depth` of them in flight (see [`CheckpointReader`]).
    pub chunk_bytes: usize,
}

/// What one rank read for one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadReport {
    /// The rank whose files were read (differs from the reader with `recovery_rank_shift`).
    pub source_rank: u32,
    /// Files read.
    pub files: u32,
    /// Bytes read.
    pub bytes: u64,
    /// Wall time of the reads (page-cache dropping excluded).
    pub duration: Duration,
    /// Things the user should know that did not stop the read (page cache not dropped,
    /// recovery shift without effect on a single node).
    pub warnings: Vec<String>,
}

/// Reads one rank's share of checkpoints back in bounded chunks, as a restart would.
///
/// Each file is one stream of chunk-sized reads ([`dlio_storage::ReadHandle::read_stream`])
/// into a window of `io_depth` chunks ([`dlio_storage::Capabilities::io_depth`]: 1 for the
/// synchronous engines; fewer for a file with fewer chunks; at most
/// [`MAX_READ_WINDOW_BYTES`]), allocated with the engine's alignment so O_DIRECT reads go
/// straight into it, and kept for the reader's life. The bytes are counted and dropped.
#[derive(Debug)]
pub struct CheckpointReader {
    options: ReadOptions,
    /// The stream's window, kept for the next file (replaced by a larger one if it needs
    /// more).
    window: Option<IoBuffer>,
}

impl CheckpointReader {
    /// A reader; fails if the chunk size is not a positive multiple of 8.
    pub fn new(options: ReadOptions) -> Result<CheckpointReader, CheckpointError> {
        check_chunk(options.chunk_bytes)?;
        if options.recovery_rank_shift == Some(0) {
            return Err(CheckpointError::NoRanksPerNode);
        }
        Ok(CheckpointReader {
            options,
            window: None,
        })
    }

    /// Reads every file of `rank` (or of its recovery source) from
    /// `checkpoint_folder/checkpoint_name`. Each file must have its planned size.
    pub fn read(
        &mut self,
        storage: &dyn Storage,
        checkpoint_folder: &Path,
        checkpoint_name: &str,
        plan: &CheckpointPlan,
        rank: u32,
    ) -> Result<ReadReport, CheckpointError> {
        plan.rank(rank)?;
        let mut warnings = Vec::new();
        let source_rank = match self.options.recovery_rank_shift {
            Some(per_node) => {
                if plan.world / per_node < 2 {
                    warnings.push(format!(
                        "checkpoint.recovery_rank_shift has no effect: all {} ranks run on one node \
                         ({per_node} ranks per node), so every rank reads what its own node wrote",
                        plan.world
                    ));
                }
                recovery_source_rank(rank, per_node, plan.world)?
            }
            None => rank,
        };
        let files = &plan.rank(source_rank)?.files;
        let dir = checkpoint_folder.join(checkpoint_name);
        let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(&f.name)).collect();
        if self.options.drop_page_cache {
            for path in &paths {
                if let Err(warning) = drop_page_cache(path) {
                    warnings.push(warning);
                }
            }
        }

        let start = Instant::now();
        let mut report = ReadReport {
            source_rank,
            files: 0,
            bytes: 0,
            duration: Duration::ZERO,
            warnings,
        };
        for (file, path) in files.iter().zip(&paths) {
            report.bytes += self.read_file(storage, path, file.bytes)?;
            report.files += 1;
        }
        report.duration = start.elapsed();
        Ok(report)
    }

    fn read_file(
        &mut self,
        storage: &dyn Storage,
        path: &Path,
        expected: u64,
    ) -> Result<u64, CheckpointError> {
        let failed = |read: u64, source: StorageError| CheckpointError::Read {
            path: path.to_path_buf(),
            read,
            expected,
            source: Box::new(source),
        };
        let mut handle = storage.open(path).map_err(|e| failed(0, e))?;
        let found = handle.len();
        if found != expected {
            return Err(CheckpointError::SizeMismatch {
                path: path.to_path_buf(),
                expected,
                found,
            });
        }
        if expected == 0 {
            return Ok(0);
        }
        let chunk = self.options.chunk_bytes;
        let chunks = expected.div_ceil(chunk as u64);
        let capabilities = storage.capabilities();
        let slots = u64::from(capabilities.io_depth)
            .min(chunks)
            .min((MAX_READ_WINDOW_BYTES / chunk) as u64)
            .max(1) as usize;
        let window = self
            .window(capabilities.alignment, slots * chunk)
            .map_err(|e| failed(0, e))?;
        let mut extents = (0..chunks).map(|i| {
            let offset = i * chunk as u64;
            Extent::new(offset, (expected - offset).min(chunk as u64) as usize)
        });
        // Chunks may complete out of order: `read` counts bytes, not a position.
        let mut read: u64 = 0;
        let streamed = handle.read_stream(window, chunk, &mut extents, &mut |_, bytes| {
            read += bytes.len() as u64;
            Ok(())
        });
        streamed.map_err(|e| failed(read, e))?;
        Ok(read)
    }

    /// The window, `len` bytes aligned to `alignment`: the one kept from earlier files while
    /// it is large enough and has that alignment, otherwise a new one of exactly `len` bytes
    /// (not a grown one: growth doubles the capacity, which could pass
    /// [`MAX_READ_WINDOW_BYTES`], and copies bytes nobody needs).
    fn window(&mut self, alignment: usize, len: usize) -> Result<&mut [u8], StorageError> {
        let window = match self.window.take() {
            Some(window) if window.alignment() == alignment && window.capacity() >= len => window,
            _ => IoBuffer::new(alignment)?,
        };
        let window = self.window.insert(window);
        window.resize(len)?;
        Ok(window)
    }
}

/// Evicts a local file from the page cache: writes back its dirty pages (which cannot be
/// dropped otherwise), then `posix_fadvise(POSIX_FADV_DONTNEED)` on the whole file. Returns a
/// warning (naming the path and the OS error) when that is not possible: the path is not a
/// local file, or the platform or file system does not support it.
pub fn drop_page_cache(path: &Path) -> Result<(), String> {
    let warn = |what: &str, error: std::io::Error| {
        format!(
            "cannot drop the page cache of {} ({what}: {error}); reads may be served from memory",
            path.display()
        )
    };
    let file = std::fs::File::open(path).map_err(|e| warn("open", e))?;
    file.sync_data().map_err(|e| warn("write back", e))?;
    fadvise_dontneed(&file).map_err(|e| warn("posix_fadvise", e))
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn fadvise_dontneed(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `posix_fadvise` takes no pointers; the descriptor is valid because `file` owns
    // it and outlives the call. The advice only affects caching, never the file's contents.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn fadvise_dontneed(_file: &std::fs::File) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "posix_fadvise is not available on this platform",
    ))
}

fn check_chunk(bytes: usize) -> Result<(), CheckpointError> {
    if bytes == 0 || !bytes.is_multiple_of(8) {
        return Err(CheckpointError::InvalidChunkSize { bytes });
    }
    Ok(())
}

/// The generator seed of one file: the run seed mixed with a hash (FNV-1a) of the checkpoint
/// and file names, so every file of every checkpoint gets its own stream.
fn file_seed(seed: u64, checkpoint_name: &str, file_name: &str) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = FNV_OFFSET;
    for byte in checkpoint_name
        .bytes()
        .chain([b'/'])
        .chain(file_name.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    // SplitMix64 finalizer of the seed, so nearby seeds give unrelated streams.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_seeds_differ_by_seed_checkpoint_and_file() {
        let base = file_seed(1, "global_epoch1_step1", "a.pt");
        assert_ne!(base, file_seed(2, "global_epoch1_step1", "a.pt"));
        assert_ne!(base, file_seed(1, "global_epoch1_step2", "a.pt"));
        assert_ne!(base, file_seed(1, "global_epoch1_step1", "b.pt"));
        assert_eq!(base, file_seed(1, "global_epoch1_step1", "a.pt"));
    }

    #[test]
    fn the_window_never_holds_more_than_the_largest_window_a_file_needs() {
        let mut reader = CheckpointReader::new(ReadOptions {
            drop_page_cache: false,
            recovery_rank_shift: None,
            chunk_bytes: 1 << 20,
        })
        .unwrap();
        // A window of 9 chunks, then one of 16: growth would have made room for 18.
        for (chunks, capacity) in [(9, 9 << 20), (16, 16 << 20), (4, 16 << 20)] {
            reader.window(4096, chunks << 20).unwrap();
            let window = reader.window.as_ref().unwrap();
            assert_eq!((window.len(), window.capacity()), (chunks << 20, capacity));
        }
    }

    #[test]
    fn chunk_sizes_must_be_positive_multiples_of_8() {
        assert!(check_chunk(8).is_ok());
        assert!(check_chunk(DEFAULT_CHUNK_BYTES).is_ok());
        assert!(matches!(
            check_chunk(0),
            Err(CheckpointError::InvalidChunkSize { bytes: 0 })
        ));
        assert!(matches!(
            check_chunk(12),
            Err(CheckpointError::InvalidChunkSize { bytes: 12 })
        ));
    }
}
