//! [`IoBuffer`]: a heap buffer whose address is aligned, for engines such as O_DIRECT that
//! need aligned memory.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::StorageError;

/// The least alignment of every allocation, whatever the engine asks (its own alignment is
/// still the one [`IoBuffer::alignment`] reports). The kernel copies a read into memory with
/// `rep movsb`, which is several times slower when the destination sits a few bytes past a
/// cache line: a 3.4 MB `pread` from the page cache took 1.1 ms into a buffer 16 bytes past a
/// page (where the allocator puts a large block) and 0.2 ms into one on a 64-byte boundary
/// (measured on this project's 2-core VM; a program's allocator, jemalloc or NumPy's, gives
/// large buffers such boundaries).
const ALLOCATION_ALIGNMENT: usize = 64;

/// A growable byte buffer whose start address is a multiple of `alignment`.
///
/// Every byte up to [`IoBuffer::capacity`] is always initialised (new memory is zeroed), so
/// [`IoBuffer::resize`] within the capacity costs nothing: the bytes past the old length keep
/// whatever they held. The capacity never shrinks, which makes the buffer cheap to reuse
/// across files of different sizes.
pub struct IoBuffer {
    /// Start of the bytes (`head` bytes into the allocation), or a dangling pointer equal to
    /// `alignment` when `capacity` is 0.
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    alignment: usize,
    /// For a placed buffer ([`IoBuffer::placed`]), its offset past a page boundary: the
    /// allocation starts on a page and the bytes this many bytes into it ([`IoBuffer::head`]).
    page_offset: Option<usize>,
}

// SAFETY: `IoBuffer` owns its allocation exclusively (like `Vec<u8>`); nothing else holds the
// pointer, so moving it to another thread is sound.
unsafe impl Send for IoBuffer {}
// SAFETY: shared access only hands out `&[u8]`, which is `Sync`; mutation needs `&mut self`.
unsafe impl Sync for IoBuffer {}

impl IoBuffer {
    /// An empty buffer with the given alignment (a power of two; 1 for buffered I/O).
    pub fn new(alignment: usize) -> Result<IoBuffer, StorageError> {
        if !alignment.is_power_of_two() {
            return Err(StorageError::InvalidBuffer {
                alignment,
                bytes: 0,
            });
        }
        // A dangling pointer must be non-null and aligned; `alignment` itself is both.
        let ptr = NonNull::new(std::ptr::without_provenance_mut::<u8>(alignment)).ok_or(
            StorageError::InvalidBuffer {
                alignment,
                bytes: 0,
            },
        )?;
        Ok(IoBuffer {
            ptr,
            len: 0,
            capacity: 0,
            alignment,
            page_offset: None,
        })
    }

    /// An empty buffer for a buffered engine whose bytes start `page_offset` bytes past a
    /// [`crate::PAGE_BYTES`] page boundary (`reader.buffer_page_offset`), wherever it grows.
    pub fn placed(page_offset: usize) -> Result<IoBuffer, StorageError> {
        let mut buffer = IoBuffer::new(1)?;
        buffer.page_offset = Some(page_offset % crate::PAGE_BYTES);
        Ok(buffer)
    }

    /// For a buffer made by [`IoBuffer::placed`], its offset past a page boundary.
    pub fn page_offset(&self) -> Option<usize> {
        self.page_offset
    }

    /// Bytes of the allocation before the buffer's own: its page offset, if placed.
    fn head(&self) -> usize {
        self.page_offset.unwrap_or(0)
    }

    /// A buffer of `len` zero bytes with the given alignment.
    pub fn zeroed(len: usize, alignment: usize) -> Result<IoBuffer, StorageError> {
        let mut buffer = IoBuffer::new(alignment)?;
        buffer.resize(len)?;
        Ok(buffer)
    }

    /// Number of bytes in use.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no byte is in use.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated; never shrinks.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The alignment of the start address.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Sets the length to `new_len`, growing the allocation if needed (never shrinking it).
    /// Bytes that become visible hold zero if they were never written, or what they last
    /// held otherwise; the first `min(old, new)` bytes are kept.
    pub fn resize(&mut self, new_len: usize) -> Result<(), StorageError> {
        if new_len > self.capacity {
            // Grow geometrically so that a sequence of slightly larger files does not
            // reallocate every time.
            let new_capacity = new_len.max(self.capacity.saturating_mul(2));
            self.grow_to(new_capacity)?;
        }
        self.len = new_len;
        Ok(())
    }

    fn grow_to(&mut self, new_capacity: usize) -> Result<(), StorageError> {
        let invalid = StorageError::InvalidBuffer {
            alignment: self.alignment,
            bytes: new_capacity,
        };
        let Some(size) = new_capacity.checked_add(self.head()) else {
            return Err(invalid);
        };
        let layout =
            Layout::from_size_align(size, self.allocation_alignment()).map_err(|_| invalid)?;
        // SAFETY: `layout` has a non-zero size because `new_capacity > self.capacity >= 0`.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(allocation) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout);
        };
        // SAFETY: `head() < size`, so the bytes' start lies inside the allocation.
        let new_ptr = unsafe { allocation.add(self.head()) };
        if self.capacity > 0 {
            // SAFETY: the old allocation holds `self.capacity` initialised bytes, the new one
            // has room for more, and two distinct live allocations never overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), new_ptr.as_ptr(), self.capacity);
            }
            self.free();
        }
        self.ptr = new_ptr;
        self.capacity = new_capacity;
        Ok(())
    }

    /// The alignment the allocation is made with: the engine's, and at least
    /// [`ALLOCATION_ALIGNMENT`]; a page for a placed buffer.
    fn allocation_alignment(&self) -> usize {
        if self.page_offset.is_some() {
            crate::PAGE_BYTES
        } else {
            self.alignment.max(ALLOCATION_ALIGNMENT)
        }
    }

    /// Frees the allocation (if any); leaves `ptr` dangling, the caller must replace it.
    fn free(&mut self) {
        if self.capacity == 0 {
            return;
        }
        // SAFETY: this size and alignment were validated by `Layout::from_size_align` when
        // the allocation was made in `grow_to`.
        let layout = unsafe {
            Layout::from_size_align_unchecked(
                self.capacity + self.head(),
                self.allocation_alignment(),
            )
        };
        // SAFETY: `ptr` is `head()` bytes past what `alloc_zeroed` returned with exactly this
        // layout in `grow_to`, and that allocation has not been freed yet (capacity is
        // non-zero only while it is live).
        unsafe { alloc::dealloc(self.ptr.as_ptr().sub(self.head()), layout) };
    }
}

impl Drop for IoBuffer {
    fn drop(&mut self) {
        self.free();
    }
}

impl Deref for IoBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is non-null and aligned; `len <= capacity` bytes are initialised
        // (zeroed at allocation) and owned by `self`, and the borrow of `self` keeps them
        // alive and unaliased by any `&mut`. For capacity 0 the slice is empty.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for IoBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for IoBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoBuffer")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("alignment", &self.alignment)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_address_is_aligned_to_4096_after_every_growth() {
        let mut buffer = IoBuffer::new(4096).unwrap();
        assert_eq!(buffer.as_ptr() as usize % 4096, 0);
        for len in [1, 4096, 5000, 1 << 20, 3] {
            buffer.resize(len).unwrap();
            assert_eq!(buffer.len(), len);
            assert_eq!(buffer.as_ptr() as usize % 4096, 0, "len {len}");
        }
    }

    #[test]
    fn buffered_engines_get_cache_line_aligned_memory_too() {
        // Alignment 1 (buffered engines): the memory still starts on a 64-byte boundary, so
        // the kernel's copy of a read is not slowed by a destination a few bytes past one.
        let mut buffer = IoBuffer::new(1).unwrap();
        for len in [3, 4096, 3 << 20, 5 << 20] {
            buffer.resize(len).unwrap();
            assert_eq!(
                buffer.as_ptr() as usize % ALLOCATION_ALIGNMENT,
                0,
                "len {len}"
            );
        }
        assert_eq!(buffer.alignment(), 1);
    }

    #[test]
    fn a_placed_buffer_starts_its_offset_past_a_page_after_every_growth() {
        for offset in [0, 16, 4095] {
            let mut buffer = IoBuffer::placed(offset).unwrap();
            assert_eq!(buffer.page_offset(), Some(offset));
            for len in [3, 4096, 300_000, 5 << 20, 10] {
                buffer.resize(len).unwrap();
                assert_eq!(
                    buffer.as_ptr() as usize % crate::PAGE_BYTES,
                    offset,
                    "len {len}"
                );
            }
            buffer[..3].copy_from_slice(b"abc");
            buffer.resize(6 << 20).unwrap();
            assert_eq!(&buffer[..3], b"abc");
            assert!(buffer[10..].iter().all(|&b| b == 0));
        }
        assert_eq!(IoBuffer::new(1).unwrap().page_offset(), None);
    }

    #[test]
    fn growth_keeps_contents_and_new_bytes_are_zero() {
        let mut buffer = IoBuffer::new(64).unwrap();
        buffer.resize(3).unwrap();
        buffer.copy_from_slice(b"abc");
        buffer.resize(10_000).unwrap();
        assert_eq!(&buffer[..3], b"abc");
        assert!(buffer[3..].iter().all(|&b| b == 0));
    }

    #[test]
    fn shrinking_keeps_capacity_and_regrowing_does_not_reallocate() {
        let mut buffer = IoBuffer::zeroed(8192, 4096).unwrap();
        let address = buffer.as_ptr();
        buffer.resize(10).unwrap();
        assert_eq!(buffer.capacity(), 8192);
        buffer.resize(8192).unwrap();
        assert_eq!(buffer.as_ptr(), address);
    }

    #[test]
    fn alignment_must_be_a_power_of_two() {
        assert!(matches!(
            IoBuffer::new(3000),
            Err(StorageError::InvalidBuffer {
                alignment: 3000,
                ..
            })
        ));
        assert!(IoBuffer::new(0).is_err());
    }

    #[test]
    fn impossible_size_is_an_error_not_an_abort() {
        let mut buffer = IoBuffer::new(4096).unwrap();
        assert!(matches!(
            buffer.resize(usize::MAX),
            Err(StorageError::InvalidBuffer { .. })
        ));
    }
}
