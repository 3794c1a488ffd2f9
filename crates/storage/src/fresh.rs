//! [`FreshPages`]: `reader.fresh_read_share`, reads that land in memory the process has not
//! touched, as a Python program's reads often do. Each of its `read`s returns a new object: a large
//! one is a new mapping (glibc's mmap threshold) or sits at the heap's top, which glibc trims
//! back when it is freed and grows again for the next, so the kernel faults fresh zeroed pages
//! in while it copies the bytes. A reader that reuses a warm buffer moves the same bytes in a
//! third of the time (128 KiB: 15-30 us against 60-110 us on this project's VM), which a
//! replay of such a program must not gain. Before each read of [`FRESH_FROM`] bytes or more,
//! the whole pages of the destination are handed back to the kernel (`madvise(MADV_DONTNEED)`),
//! so the read faults them in as the program's did; the buffer is not reallocated, so nothing
//! else changes. A share of the reads is made fresh (a program's allocator reuses some of its
//! memory warm): every read counts towards it, across handles and threads, so which reads are
//! fresh follows the order they come in. Streams (`read_stream`) keep their window warm, as a
//! stream's buffer is.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{
    Capabilities, Consume, Extent, ForwardStorage, PendingRead, ReadBell, ReadHandle, ReadRequest,
    Storage, StorageError,
};

/// The smallest read whose destination is made fresh: smaller objects come from the heap's
/// free lists, which stay warm.
pub const FRESH_FROM: usize = 64 << 10;

/// Reads of `inner` into pages the process has not touched.
#[derive(Debug)]
pub struct FreshPages<S: Storage> {
    inner: S,
    share: Arc<Share>,
}

/// Which reads of [`FRESH_FROM`] bytes and more are made fresh: the `n`-th when
/// `floor(n * share)` steps up (a share of 0.5 makes every other one fresh).
#[derive(Debug)]
struct Share {
    share: f64,
    reads: AtomicU64,
}

impl Share {
    fn next_is_fresh(&self) -> bool {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        ((n + 1) as f64 * self.share).floor() > (n as f64 * self.share).floor()
    }
}

impl<S: Storage> FreshPages<S> {
    /// Reads through `inner`, the `share` (0 to 1) of those of [`FRESH_FROM`] bytes or more into
    /// fresh pages.
    pub fn new(inner: S, share: f64) -> FreshPages<S> {
        FreshPages {
            inner,
            share: Arc::new(Share {
                share: share.clamp(0.0, 1.0),
                reads: AtomicU64::new(0),
            }),
        }
    }
}

impl<S: Storage> ForwardStorage for FreshPages<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for FreshPages<S> {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        Ok(Box::new(FreshRead {
            inner: self.inner.open(path)?,
            share: Arc::clone(&self.share),
        }))
    }

    /// Background whole-file reads go into the engine's own buffers, unchanged.
    fn start_whole_read(&self, path: &Path, bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        self.inner.start_whole_read(path, bell)
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    crate::forward_storage!(
        engine,
        create,
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );
}

/// Hands the whole pages inside `buf` back to the kernel when `buf` is [`FRESH_FROM`] bytes or
/// more and its turn in `share` has come, so that the next write into them faults zeroed
/// pages in.
fn make_fresh(buf: &mut [u8], share: &Share) {
    if buf.len() < FRESH_FROM || !share.next_is_fresh() {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p.is_power_of_two())
        .unwrap_or(4096);
    let start = (buf.as_mut_ptr() as usize).next_multiple_of(page);
    let end = (buf.as_mut_ptr() as usize + buf.len()) & !(page - 1);
    if end <= start {
        return;
    }
    // SAFETY: [start, end) is made of whole pages that lie inside `buf`, which this function
    // borrows mutably, so no other reference reads or writes them while the kernel drops them.
    // The buffers readers pass are heap or anonymous mappings (private, anonymous memory), for
    // which MADV_DONTNEED only makes the next access see zero bytes, and zero is a valid `u8`:
    // it is as if the bytes were overwritten with zeros. The call cannot unmap anything.
    // Its result is ignored: a refusal (a locked page) leaves the pages warm, which changes a
    // timing, never a result.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
    }
}

struct FreshRead {
    inner: Box<dyn ReadHandle>,
    share: Arc<Share>,
}

impl ReadHandle for FreshRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        make_fresh(buf, &self.share);
        self.inner.read_at(buf, offset)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        make_fresh(buf, &self.share);
        self.inner.read_exact_at(buf, offset)
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        for request in requests.iter_mut() {
            make_fresh(request.buf, &self.share);
        }
        self.inner.read_batch(requests)
    }

    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        self.inner.read_stream(window, block, requests, consume)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PosixStorage;

    #[test]
    fn reads_into_fresh_pages_return_the_files_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..(256 << 10)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let storage = FreshPages::new(PosixStorage::new(), 1.0);
        let mut handle = storage.open(&path).unwrap();
        let mut buf = vec![0xaau8; 200 << 10];
        for offset in [0u64, 4096, 1000] {
            handle.read_exact_at(&mut buf, offset).unwrap();
            assert_eq!(buf[..], bytes[offset as usize..offset as usize + buf.len()]);
        }
        // A buffer shorter than a read of FRESH_FROM is read as it is.
        let mut small = vec![0u8; 100];
        handle.read_exact_at(&mut small, 7).unwrap();
        assert_eq!(small[..], bytes[7..107]);
    }

    #[test]
    fn a_share_makes_that_many_reads_fresh_in_turn() {
        let share = Share {
            share: 0.25,
            reads: AtomicU64::new(0),
        };
        let turns: Vec<bool> = (0..8).map(|_| share.next_is_fresh()).collect();
        assert_eq!(
            turns,
            [false, false, false, true, false, false, false, true]
        );
    }

    /// The pages handed back are faulted in again by the next read: the process's minor
    /// faults grow by about the read's pages, where reads into a warm buffer add none.
    #[test]
    fn a_fresh_read_faults_its_pages_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let faults = || {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            rest.split_whitespace()
                .nth(7)
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        let mut buf = vec![0u8; 1 << 20];
        let warm = PosixStorage::new();
        let mut handle = warm.open(&path).unwrap();
        handle.read_exact_at(&mut buf, 0).unwrap();
        let before = faults();
        for _ in 0..8 {
            handle.read_exact_at(&mut buf, 0).unwrap();
        }
        let warm_faults = faults() - before;
        let fresh = FreshPages::new(PosixStorage::new(), 1.0);
        let mut handle = fresh.open(&path).unwrap();
        let before = faults();
        for _ in 0..8 {
            handle.read_exact_at(&mut buf, 0).unwrap();
        }
        let fresh_faults = faults() - before;
        // 8 reads of 256 pages: at least a page in four faulted again (the kernel may map
        // several pages per fault); warm, only the few of whatever else the thread touched.
        assert!(warm_faults < 64, "warm {warm_faults}");
        assert!(
            fresh_faults >= warm_faults + 8 * 256 / 4,
            "fresh {fresh_faults}, warm {warm_faults}"
        );
    }
}
