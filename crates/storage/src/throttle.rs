//! [`Throttled`]: `storage.read_bytes_per_second`, a cap on the bytes per second read through
//! an engine, shared by every handle, thread and rank that uses it (as fio's `rate`).
//!
//! The cap is a pacing clock rather than a bucket with a burst allowance: each read reserves
//! `bytes / rate` seconds on a shared timeline, starting when the read was issued or when the
//! previous reservation ends, whichever is later, and returns no earlier than the end of its
//! reservation. Idle time is not banked, so no window of any length sees more than the cap
//! (plus one read), and a device slower than the cap is not slowed further: a read that took
//! longer than its reservation returns at once.
//!
//! Writes are not paced: the cap emulates a slower device for the reads that training
//! measures, and generation should not take longer because of it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{
    Capabilities, Consume, Extent, ForwardStorage, PendingRead, ReadBell, ReadHandle, ReadRequest,
    Storage, StorageError, WholeRead,
};

/// The shared timeline reads are paced on.
#[derive(Debug)]
struct Pacer {
    bytes_per_second: f64,
    /// When the last reservation ends (none yet: the first read starts the timeline).
    free_at: Mutex<Option<Instant>>,
}

impl Pacer {
    /// Reserves the time `bytes` take at the cap, from `issued` on, and sleeps until the
    /// reservation ends.
    fn pace(&self, issued: Instant, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(bytes as f64 / self.bytes_per_second);
        let ends = {
            // A poisoned lock only means another reader panicked while holding it: the time
            // in it is still valid.
            let mut free_at = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
            let ends = free_at.map_or(issued, |f| f.max(issued)) + cost;
            *free_at = Some(ends);
            ends
        };
        let now = Instant::now();
        if ends > now {
            std::thread::sleep(ends - now);
        }
    }
}

/// Caps the read bandwidth of `inner` at a rate shared by everything that reads through it.
#[derive(Debug)]
pub struct Throttled<S: Storage> {
    inner: S,
    pacer: Arc<Pacer>,
}

impl<S: Storage> Throttled<S> {
    /// Reads of `inner` together move at most `bytes_per_second` (at least 1).
    pub fn new(inner: S, bytes_per_second: u64) -> Throttled<S> {
        Throttled {
            inner,
            pacer: Arc::new(Pacer {
                bytes_per_second: bytes_per_second.max(1) as f64,
                free_at: Mutex::new(None),
            }),
        }
    }
}

impl<S: Storage> ForwardStorage for Throttled<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for Throttled<S> {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        Ok(Box::new(ThrottledRead {
            inner: self.inner.open(path)?,
            pacer: Arc::clone(&self.pacer),
        }))
    }

    fn start_whole_read(&self, path: &Path, bell: &Arc<ReadBell>) -> Option<Box<dyn PendingRead>> {
        let issued = Instant::now();
        let inner = self.inner.start_whole_read(path, bell)?;
        Some(Box::new(ThrottledPending {
            inner,
            issued,
            pacer: Arc::clone(&self.pacer),
        }))
    }

    /// The inner engine's, without non-blocking reads: every read waits for the cap.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            nowait_reads: false,
            ..self.inner.capabilities()
        }
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

struct ThrottledPending {
    inner: Box<dyn PendingRead>,
    issued: Instant,
    pacer: Arc<Pacer>,
}

impl PendingRead for ThrottledPending {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    /// The inner read's: the pacing happens in `wait`, after the bytes have arrived.
    fn finished(&self) -> Option<bool> {
        self.inner.finished()
    }

    fn wait(self: Box<Self>) -> Result<WholeRead, StorageError> {
        let read = self.inner.wait()?;
        self.pacer.pace(self.issued, read.bytes);
        Ok(WholeRead {
            bytes: read.bytes,
            took: read.took.max(self.issued.elapsed()),
        })
    }
}

struct ThrottledRead {
    inner: Box<dyn ReadHandle>,
    pacer: Arc<Pacer>,
}

impl ReadHandle for ThrottledRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let issued = Instant::now();
        let n = self.inner.read_at(buf, offset)?;
        self.pacer.pace(issued, n as u64);
        Ok(n)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        let issued = Instant::now();
        self.inner.read_exact_at(buf, offset)?;
        self.pacer.pace(issued, buf.len() as u64);
        Ok(())
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        let issued = Instant::now();
        self.inner.read_batch(requests)?;
        let bytes = requests.iter().map(|r| r.buf.len() as u64).sum();
        self.pacer.pace(issued, bytes);
        Ok(())
    }

    /// Paces every range before it is consumed, from the moment the previous one was.
    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        let pacer = Arc::clone(&self.pacer);
        let mut previous = Instant::now();
        self.inner
            .read_stream(window, block, requests, &mut |offset, bytes| {
                pacer.pace(previous, bytes.len() as u64);
                let result = consume(offset, bytes);
                previous = Instant::now();
                result
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PosixStorage;

    #[test]
    fn reads_from_several_threads_share_one_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 64 * 1024]).unwrap();
        // 1 MiB/s: four threads reading 64 KiB four times each (1 MiB) take about 1 s.
        let storage = Arc::new(Throttled::new(PosixStorage::new(), 1 << 20));
        let started = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let storage = Arc::clone(&storage);
                let path = path.clone();
                s.spawn(move || {
                    let mut handle = storage.open(&path).unwrap();
                    let mut buf = vec![0u8; 64 * 1024];
                    for _ in 0..4 {
                        handle.read_exact_at(&mut buf, 0).unwrap();
                    }
                });
            }
        });
        let took = started.elapsed().as_secs_f64();
        assert!((0.9..1.6).contains(&took), "1 MiB at 1 MiB/s took {took} s");
    }

    #[test]
    fn a_slow_read_is_not_slowed_further() {
        let pacer = Pacer {
            bytes_per_second: 1e6,
            free_at: Mutex::new(None),
        };
        // Issued 50 ms ago, 10 KB at 1 MB/s is 10 ms: already over, no sleep.
        let issued = Instant::now() - Duration::from_millis(50);
        let started = Instant::now();
        pacer.pace(issued, 10_000);
        assert!(started.elapsed() < Duration::from_millis(5));
    }
}
