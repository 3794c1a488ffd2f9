//! [`forward_storage!`]: the [`Storage`](crate::Storage) methods a decorator or an engine
//! passes through unchanged, written once.
//!
//! Why a macro: every decorator (`Metered`, `SplitReads`, tracing, the generator's stop
//! switch, MPI-IO) and every local engine that leaves file-system chores to POSIX repeated
//! the same eight one-line methods. Two of them have trait defaults (`partial_path`,
//! `drop_cache`), and a decorator that forgot to forward one of those silently used the
//! default instead of the engine it wraps. Naming the forwarded methods in one list makes
//! such a gap visible where the type is defined.

use crate::Storage;

/// Where a type's forwarded [`Storage`] calls go (see [`forward_storage!`]).
pub trait ForwardStorage {
    /// The storage that answers the forwarded calls.
    fn forward_to(&self) -> &dyn Storage;
}

/// Writes [`Storage`](crate::Storage) methods that call the same method of
/// [`ForwardStorage::forward_to`], inside an `impl Storage for T` block:
///
/// ```
/// use std::path::Path;
/// use dlio_storage::{ForwardStorage, PosixStorage, ReadHandle, Storage, StorageError};
///
/// /// Counts the files opened, and passes every other call through.
/// #[derive(Debug)]
/// struct CountingOpens {
///     inner: PosixStorage,
///     opens: std::sync::atomic::AtomicU64,
/// }
/// impl ForwardStorage for CountingOpens {
///     fn forward_to(&self) -> &dyn Storage {
///         &self.inner
///     }
/// }
/// impl Storage for CountingOpens {
///     fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
///         self.opens.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///         self.inner.open(path)
///     }
///     dlio_storage::forward_storage!(engine, capabilities, create, list, size,
///         create_dir_all, remove_file, remove_dir_all, partial_path, drop_cache);
/// }
/// let storage = CountingOpens { inner: PosixStorage::new(), opens: Default::default() };
/// assert!(storage.open(Path::new("/no/such/file")).is_err());
/// assert_eq!(storage.engine(), "posix");
/// assert_eq!(storage.opens.into_inner(), 1);
/// ```
#[macro_export]
macro_rules! forward_storage {
    ($($method:ident),+ $(,)?) => {
        $( $crate::forward_storage!(@one $method); )+
    };
    (@one engine) => {
        fn engine(&self) -> &'static str {
            $crate::ForwardStorage::forward_to(self).engine()
        }
    };
    (@one capabilities) => {
        fn capabilities(&self) -> $crate::Capabilities {
            $crate::ForwardStorage::forward_to(self).capabilities()
        }
    };
    (@one open) => {
        fn open(
            &self,
            path: &::std::path::Path,
        ) -> ::std::result::Result<Box<dyn $crate::ReadHandle>, $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).open(path)
        }
    };
    (@one create) => {
        fn create(
            &self,
            path: &::std::path::Path,
        ) -> ::std::result::Result<Box<dyn $crate::WriteHandle>, $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).create(path)
        }
    };
    (@one list) => {
        fn list(
            &self,
            dir: &::std::path::Path,
        ) -> ::std::result::Result<Vec<$crate::DirEntry>, $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).list(dir)
        }
        fn list_each(
            &self,
            dir: &::std::path::Path,
            each: &mut dyn FnMut($crate::DirEntry),
        ) -> ::std::result::Result<(), $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).list_each(dir, each)
        }
    };
    (@one size) => {
        fn size(
            &self,
            path: &::std::path::Path,
        ) -> ::std::result::Result<Option<u64>, $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).size(path)
        }
    };
    (@one create_dir_all) => {
        fn create_dir_all(
            &self,
            dir: &::std::path::Path,
        ) -> ::std::result::Result<(), $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).create_dir_all(dir)
        }
    };
    (@one remove_file) => {
        fn remove_file(
            &self,
            path: &::std::path::Path,
        ) -> ::std::result::Result<(), $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).remove_file(path)
        }
    };
    (@one remove_dir_all) => {
        fn remove_dir_all(
            &self,
            dir: &::std::path::Path,
        ) -> ::std::result::Result<(), $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).remove_dir_all(dir)
        }
    };
    (@one partial_path) => {
        fn partial_path(&self, path: &::std::path::Path) -> Option<::std::path::PathBuf> {
            $crate::ForwardStorage::forward_to(self).partial_path(path)
        }
    };
    (@one start_whole_read) => {
        fn start_whole_read(
            &self,
            path: &::std::path::Path,
            bell: &::std::sync::Arc<$crate::ReadBell>,
        ) -> Option<Box<dyn $crate::PendingRead>> {
            $crate::ForwardStorage::forward_to(self).start_whole_read(path, bell)
        }
    };
    (@one drop_cache) => {
        fn drop_cache(
            &self,
            path: &::std::path::Path,
        ) -> ::std::result::Result<(), $crate::StorageError> {
            $crate::ForwardStorage::forward_to(self).drop_cache(path)
        }
    };
}
