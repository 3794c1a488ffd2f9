//! Page-cache control: drop a file's cached pages (`posix_fadvise(DONTNEED)`, no root
//! needed), count the pages still resident (`mincore`), and compare the dataset with the
//! host memory (MLPerf Storage's rule: the dataset must be at least 5x the memory, or the
//! page cache serves the epochs after the first).

use std::os::fd::AsRawFd;
use std::path::Path;

use crate::StorageError;

/// MLPerf Storage's rule: dataset bytes at least this many times the host memory.
pub const DATASET_MEMORY_MULTIPLE: u64 = 5;

/// Drops the cached pages of one file, so the next read goes to the device. Dirty pages are
/// not dropped by the kernel: call this after a file was written and synced (or committed,
/// then `sync`ed by the caller) for it to take effect on freshly written data.
pub fn drop_file_cache(path: &Path) -> Result<(), StorageError> {
    let file = crate::posix::open_for_reading(path)?;
    crate::posix::regular_file_len(&file, path)?;
    // Written pages must reach the disk before DONTNEED can drop them.
    file.sync_data()
        .map_err(|e| StorageError::io("sync", path, e))?;
    // SAFETY: `posix_fadvise` takes no pointers; the descriptor is valid while `file` lives.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(StorageError::io(
            "drop the page cache of",
            path,
            std::io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(())
}

/// Pages of a file in the page cache right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentPages {
    /// Pages in memory.
    pub resident: u64,
    /// Pages the file spans.
    pub total: u64,
}

/// Counts the pages of `path` that are in the page cache (`mincore` on a mapping that is
/// never touched, so counting does not change the answer).
pub fn resident_pages(path: &Path) -> Result<ResidentPages, StorageError> {
    let file = crate::posix::open_for_reading(path)?;
    crate::posix::regular_file_len(&file, path)?;
    let len = file
        .metadata()
        .map_err(|e| StorageError::io("stat", path, e))?
        .len();
    let len = usize::try_from(len).map_err(|_| {
        StorageError::io(
            "map",
            path,
            std::io::Error::from(std::io::ErrorKind::FileTooLarge),
        )
    })?;
    if len == 0 {
        return Ok(ResidentPages {
            resident: 0,
            total: 0,
        });
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let pages = len.div_ceil(page);
    let mut vector = vec![0u8; pages];
    // SAFETY: a fresh read-only mapping chosen by the kernel; checked against MAP_FAILED and
    // unmapped below. Its memory is never read, only passed to mincore.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(StorageError::io(
            "map",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: `address..address+len` is the mapping made above; `vector` has one byte per
    // page of it, as mincore requires.
    let rc = unsafe { libc::mincore(address, len, vector.as_mut_ptr()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above, once.
    unsafe { libc::munmap(address, len) };
    if rc != 0 {
        return Err(StorageError::io("mincore", path, error));
    }
    Ok(ResidentPages {
        resident: vector.iter().filter(|&&v| v & 1 == 1).count() as u64,
        total: pages as u64,
    })
}

/// The dataset size against the host memory, for the log and `summary.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCheck {
    /// Bytes of the dataset this host reads.
    pub dataset_bytes: u64,
    /// Host memory (`MemTotal`); 0 when unknown.
    pub memory_bytes: u64,
    /// `DATASET_MEMORY_MULTIPLE` x `memory_bytes`.
    pub required_bytes: u64,
}

impl MemoryCheck {
    /// The check for a dataset of `dataset_bytes` on a host with `memory_bytes`.
    pub fn new(dataset_bytes: u64, memory_bytes: u64) -> MemoryCheck {
        MemoryCheck {
            dataset_bytes,
            memory_bytes,
            required_bytes: memory_bytes.saturating_mul(DATASET_MEMORY_MULTIPLE),
        }
    }

    /// True when the dataset is at least 5x the memory (or the memory is unknown).
    pub fn meets_rule(&self) -> bool {
        self.memory_bytes == 0 || self.dataset_bytes >= self.required_bytes
    }

    /// True when the whole dataset could sit in the page cache.
    pub fn fits_in_memory(&self) -> bool {
        self.memory_bytes > 0 && self.dataset_bytes <= self.memory_bytes
    }

    /// Dataset bytes per byte of memory (0 when the memory is unknown).
    pub fn ratio(&self) -> f64 {
        if self.memory_bytes == 0 {
            0.0
        } else {
            self.dataset_bytes as f64 / self.memory_bytes as f64
        }
    }

    /// One log line saying how the dataset compares and what follows.
    pub fn message(&self) -> String {
        const GIB: f64 = (1u64 << 30) as f64;
        let data = self.dataset_bytes as f64 / GIB;
        let memory = self.memory_bytes as f64 / GIB;
        if self.memory_bytes == 0 {
            return format!("dataset {data:.2} GiB; host memory unknown (no /proc/meminfo)");
        }
        let verdict = if self.meets_rule() {
            "meets MLPerf Storage's 5x rule".to_owned()
        } else {
            format!(
                "below MLPerf Storage's 5x rule ({:.2} GiB needed){}",
                self.required_bytes as f64 / GIB,
                if self.fits_in_memory() {
                    "; it fits in memory, so reads after the first epoch may come from the page \
                     cache: use storage.drop_page_cache or the direct engine"
                } else {
                    ""
                }
            )
        };
        format!(
            "dataset {data:.2} GiB is {:.2}x the host memory of {memory:.2} GiB: {verdict}",
            self.ratio()
        )
    }
}

/// [`MemoryCheck`] against this host's `MemTotal` (from `/proc/meminfo`).
pub fn memory_check(dataset_bytes: u64) -> MemoryCheck {
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text))
        .unwrap_or(0);
    MemoryCheck::new(dataset_bytes, memory)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_parsed_in_bytes() {
        let text = "MemTotal:       16318412 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total_bytes(text), Some(16_318_412 * 1024));
        assert_eq!(mem_total_bytes("nothing"), None);
    }

    #[test]
    fn five_x_rule_and_fit_are_reported() {
        let gib = 1u64 << 30;
        let small = MemoryCheck::new(gib, 16 * gib);
        assert!(!small.meets_rule() && small.fits_in_memory());
        assert_eq!(small.required_bytes, 80 * gib);
        assert!(
            small.message().contains("below MLPerf Storage's 5x rule"),
            "{}",
            small.message()
        );
        assert!(small.message().contains("page cache"));
        let large = MemoryCheck::new(80 * gib, 16 * gib);
        assert!(large.meets_rule() && !large.fits_in_memory());
        assert!((large.ratio() - 5.0).abs() < 1e-12);
        assert!(MemoryCheck::new(1, 0).meets_rule());
    }

    #[test]
    fn this_host_has_memory() {
        assert!(memory_check(0).memory_bytes > 0);
    }
}
