//! [`PlacedBuffers`]: `reader.buffer_page_offset`, sample reads into buffers that start where a
//! traced program's did. The kernel copies a read from the page cache into the caller's buffer
//! with `rep movsb`, which on some CPUs runs several times slower when the buffer starts a few
//! bytes past the file's page boundary: on this project's AMD EPYC VM a 256 KiB read from the
//! page cache took 11-24 us into a buffer on a page boundary or 32 to 4095 bytes past one, and
//! 93-150 us into one 4 to 28 bytes past it. A Python `bytearray` of 128 KiB or more (glibc
//! maps it on its own, behind a 16-byte header) starts 16 bytes past a page, so a program that
//! reads into one pays that on every read, and a replay reading into the engine's aligned
//! buffers would not. The engine's own reads are unchanged: this only tells the formats, through
//! [`Capabilities::buffer_page_offset`], where to start the buffers they read samples into
//! (nothing is copied).

use std::path::Path;

use crate::{Capabilities, ForwardStorage, PendingRead, ReadBell, Storage};

/// The page size the offsets are taken in.
pub const PAGE_BYTES: usize = 4096;

/// `inner`, whose sample reads land `page_offset` bytes past a page boundary.
#[derive(Debug)]
pub struct PlacedBuffers<S: Storage> {
    inner: S,
    page_offset: usize,
}

impl<S: Storage> PlacedBuffers<S> {
    /// Reads through `inner` into buffers starting `page_offset` (below [`PAGE_BYTES`]) bytes
    /// past a page boundary.
    pub fn new(inner: S, page_offset: usize) -> PlacedBuffers<S> {
        PlacedBuffers {
            inner,
            page_offset: page_offset % PAGE_BYTES,
        }
    }
}

impl<S: Storage> ForwardStorage for PlacedBuffers<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for PlacedBuffers<S> {
    /// The inner engine's, with the buffers' place.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            buffer_page_offset: Some(self.page_offset),
            ..self.inner.capabilities()
        }
    }

    /// Background whole-file reads go into the engine's own buffers, unchanged.
    fn start_whole_read(
        &self,
        path: &Path,
        bell: &std::sync::Arc<ReadBell>,
    ) -> Option<Box<dyn PendingRead>> {
        self.inner.start_whole_read(path, bell)
    }

    crate::forward_storage!(
        engine,
        open,
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
