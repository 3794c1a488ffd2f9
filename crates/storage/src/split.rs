//! [`SplitReads`]: `reader.transfer_size` for every engine and every format. A read longer
//! than the transfer size becomes a batch of requests of exactly that size (the last one
//! shorter), handed to the engine in one [`ReadHandle::read_batch`], so an engine that
//! overlaps requests (io_uring, S3) keeps `io_depth` of them in flight, and a [`crate::Metered`]
//! beneath counts each transfer as one request.
//!
//! A stream ([`ReadHandle::read_stream`]) whose block is at most the transfer size passes
//! through unchanged: each of its requests already is one transfer, and the engine keeps
//! its queue full across them. A longer block is split too, as the transfer size is the
//! workload's request size: the window is filled with one request per slot, and each
//! window-full becomes one batch of transfers (`io_depth` in flight across all of them)
//! before its requests are consumed in order, so the queue drains once per window rather
//! than once per request.

use std::path::Path;

use crate::{
    Consume, Extent, ForwardStorage, ReadHandle, ReadRequest, Storage, StorageError, check_extent,
    stream_slots,
};

/// Splits long reads of `inner` into requests of at most `transfer_size` bytes.
#[derive(Debug)]
pub struct SplitReads<S: Storage> {
    inner: S,
    transfer_size: usize,
}

impl<S: Storage> SplitReads<S> {
    /// Reads of `inner` are split into requests of `transfer_size` bytes (0 counts as 1).
    pub fn new(inner: S, transfer_size: usize) -> SplitReads<S> {
        SplitReads {
            inner,
            transfer_size: transfer_size.max(1),
        }
    }

    /// The request size.
    pub fn transfer_size(&self) -> usize {
        self.transfer_size
    }
}

impl<S: Storage> ForwardStorage for SplitReads<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for SplitReads<S> {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        Ok(Box::new(SplitRead {
            inner: self.inner.open(path)?,
            transfer_size: self.transfer_size,
        }))
    }

    crate::forward_storage!(
        engine,
        capabilities,
        create,
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );

    // No background whole-file reads: a transfer size asks for reads of that size, which
    // only the foreground handles make (`open`), so the caller reads through them.
}

struct SplitRead {
    inner: Box<dyn ReadHandle>,
    transfer_size: usize,
}

/// Appends the pieces of `(buf, offset)` to `out`.
fn split_into<'a>(
    buf: &'a mut [u8],
    offset: u64,
    transfer_size: usize,
    out: &mut Vec<ReadRequest<'a>>,
) {
    let mut at = offset;
    for chunk in buf.chunks_mut(transfer_size) {
        let len = chunk.len() as u64;
        out.push(ReadRequest {
            offset: at,
            buf: chunk,
        });
        at += len;
    }
}

impl SplitRead {
    /// Never ask past the end: a split request that straddles it would be a short read.
    fn check_in_file(&self, offset: u64, len: usize) -> Result<(), StorageError> {
        crate::check_in_file(self.inner.path(), self.inner.len(), offset, len)
    }
}

impl ReadHandle for SplitRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    /// Reads at most one transfer (a short read, as `read_at` allows).
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        let end = buf.len().min(self.transfer_size);
        self.inner.read_at(&mut buf[..end], offset)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        if buf.len() <= self.transfer_size {
            return self.inner.read_exact_at(buf, offset);
        }
        self.check_in_file(offset, buf.len())?;
        let mut requests = Vec::with_capacity(buf.len().div_ceil(self.transfer_size));
        split_into(buf, offset, self.transfer_size, &mut requests);
        self.inner.read_batch(&mut requests)
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        if requests.iter().all(|r| r.buf.len() <= self.transfer_size) {
            return self.inner.read_batch(requests);
        }
        let mut pieces = Vec::new();
        for request in requests.iter_mut() {
            split_into(request.buf, request.offset, self.transfer_size, &mut pieces);
        }
        self.inner.read_batch(&mut pieces)
    }

    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        if block <= self.transfer_size {
            return self.inner.read_stream(window, block, requests, consume);
        }
        let slots = stream_slots(self.inner.path(), window.len(), block)?;
        let mut group: Vec<Extent> = Vec::with_capacity(slots);
        loop {
            group.clear();
            group.extend((&mut *requests).take(slots));
            if group.is_empty() {
                return Ok(());
            }
            for extent in &group {
                check_extent(self.inner.path(), *extent, block)?;
                self.check_in_file(extent.offset, extent.len)?;
            }
            let mut pieces = Vec::with_capacity(slots * block.div_ceil(self.transfer_size));
            for (extent, slot) in group.iter().zip(window.chunks_mut(block)) {
                let buf = &mut slot[..extent.len];
                split_into(buf, extent.offset, self.transfer_size, &mut pieces);
            }
            self.inner.read_batch(&mut pieces)?;
            drop(pieces);
            for (extent, slot) in group.iter().zip(window.chunks(block)) {
                consume(extent.offset, &slot[..extent.len])?;
            }
        }
    }
}
