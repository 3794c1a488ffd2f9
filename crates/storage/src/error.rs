//! The one error type of the storage crate.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while moving bytes. Each variant names the path (and the
/// offset, for reads) so that the message alone tells the user which file to look at.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An operating-system call failed.
    #[error("cannot {op} {path}: {source}{hint}", path = path.display(), hint = io_hint(source))]
    Io {
        /// What was being done (`open`, `read`, `write`, `rename`, ...).
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },

    /// A read ran into the end of the file before it had all the bytes it needed.
    #[error(
        "file {path} is truncated: wanted {wanted} bytes at offset {offset}; \
         it was probably written by an interrupted or different run: delete it and generate the data again",
        path = path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the missing bytes start.
        offset: u64,
        /// How many bytes were still missing.
        wanted: u64,
    },

    /// A manifest of file names (`dataset.file_list_train`) cannot be used as it is.
    #[error("file list {path}{at}: {reason}", path = path.display(), at = line_at(*line))]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// The line at fault (1-based), or 0 for the file as a whole.
        line: usize,
        /// What is wrong, and what to do.
        reason: String,
    },

    /// Nothing exists at the path.
    #[error("{path} does not exist; check the path (or generate the data first)", path = path.display())]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },

    /// A file was expected but the path names something else (a directory, a socket...).
    #[error("{path} is not a regular file", path = path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },

    /// The path cannot name a file to write (no file name, e.g. `/` or `..`).
    #[error("cannot write to {path}: {reason}", path = path.display())]
    InvalidPath {
        /// The path.
        path: PathBuf,
        /// Why it is not usable.
        reason: &'static str,
    },

    /// An I/O buffer was asked for an alignment that is not a power of two, or a size
    /// that cannot be allocated with it.
    #[error(
        "cannot allocate an I/O buffer of {bytes} bytes aligned to {alignment}: \
         the alignment must be a power of two and the size must fit in memory"
    )]
    InvalidBuffer {
        /// The requested alignment.
        alignment: usize,
        /// The requested size.
        bytes: usize,
    },

    /// The file system refused O_DIRECT (EINVAL at open, or for a request).
    #[error(
        "the file system of {path} refuses O_DIRECT ({source}); use \
         ++workload.storage.io_engine=posix (and reader.odirect=False) for buffered I/O",
        path = path.display()
    )]
    DirectIoUnsupported {
        /// The file.
        path: PathBuf,
        /// The OS error (EINVAL).
        source: io::Error,
    },

    /// The engine cannot run on this host.
    #[error("storage.io_engine {engine} cannot be used: {reason}; {hint}")]
    EngineUnavailable {
        /// The engine.
        engine: &'static str,
        /// What refused it.
        reason: String,
        /// How to fix it.
        hint: &'static str,
    },

    /// The engine settings contradict each other or are out of range.
    #[error("invalid storage engine settings: {reason}")]
    InvalidEngineSettings {
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// The S3 settings cannot work (bucket name, endpoint URL, key).
    #[error("invalid S3 settings: {reason}")]
    InvalidS3Settings {
        /// What is wrong and how to fix it (never a credential).
        reason: String,
    },

    /// The bucket does not exist on the endpoint.
    #[error(
        "S3 bucket `{bucket}` does not exist at {endpoint}; create it, or set \
         ++workload.storage.storage_root to an existing bucket"
    )]
    BucketNotFound {
        /// The bucket.
        bucket: String,
        /// The endpoint asked.
        endpoint: String,
    },

    /// The S3 server refused the credentials, or what they may do (HTTP 401/403). Never
    /// retried: the same credentials would be refused again.
    #[error(
        "{what} at {endpoint}: the server refused to {op} {url} ({code}{sep}{reason}); {hint}",
        sep = if reason.is_empty() { "" } else { ": " }
    )]
    S3AccessRefused {
        /// `S3 authentication failed` or `S3 access denied`.
        what: &'static str,
        /// What was being done.
        op: &'static str,
        /// `s3://bucket/key`, or `s3://bucket` for the bucket itself.
        url: Box<str>,
        /// The endpoint.
        endpoint: Box<str>,
        /// S3's error code (`SignatureDoesNotMatch`, `InvalidAccessKeyId`, `AccessDenied`...),
        /// or the HTTP status when the response had no body.
        code: Box<str>,
        /// The server's explanation, with credentials removed (may be empty).
        reason: Box<str>,
        /// Which setting to check.
        hint: &'static str,
    },

    /// An object-store request failed (after its retries).
    #[error("cannot {op} {url} at {endpoint}: {message}; {hint}")]
    ObjectStore {
        /// What was being done.
        op: &'static str,
        /// `s3://bucket/key`.
        url: Box<str>,
        /// The endpoint.
        endpoint: Box<str>,
        /// The client's message, with credentials removed.
        message: Box<str>,
        /// How to fix it.
        hint: &'static str,
    },

    /// A streaming read ([`crate::ReadHandle::read_stream`]) was asked for something its
    /// window cannot hold: a block of 0 bytes, a window smaller than one block, or a request
    /// longer than the block. A caller's mistake, reported instead of a panic.
    #[error("cannot stream reads of {path}: {reason}", path = path.display())]
    InvalidStream {
        /// The file.
        path: PathBuf,
        /// What does not fit.
        reason: String,
    },

    /// The caller asked the write to stop (e.g. Ctrl-C during generation). What was written
    /// under the temporary name is removed.
    #[error("writing {path} was interrupted", path = path.display())]
    Interrupted {
        /// The file being written.
        path: PathBuf,
    },
}

impl StorageError {
    /// Wraps an OS error, turning "not found" into [`StorageError::NotFound`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::NotFound {
            StorageError::NotFound { path }
        } else {
            StorageError::Io { op, path, source }
        }
    }
}

/// A sentence that tells the user how to fix the common OS errors.
fn io_hint(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::StorageFull => {
            " (the disk is full: free some space or use a smaller dataset)"
        }
        io::ErrorKind::QuotaExceeded => {
            " (the disk quota is exceeded: free some space or raise the quota)"
        }
        io::ErrorKind::PermissionDenied => " (check the permissions of the data folder)",
        io::ErrorKind::ReadOnlyFilesystem => " (the file system is read-only)",
        _ => "",
    }
}

/// `, line N` for a line number, nothing for 0 (the whole file).
fn line_at(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(", line {line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_full_error_says_the_disk_is_full() {
        let error = StorageError::io(
            "write",
            "/data/train/img_1_of_8.npz",
            io::Error::from(io::ErrorKind::StorageFull),
        );
        let message = error.to_string();
        assert!(
            message.starts_with("cannot write /data/train/img_1_of_8.npz: "),
            "{message}"
        );
        assert!(message.contains("the disk is full"), "{message}");
    }

    #[test]
    fn os_not_found_becomes_not_found() {
        let error = StorageError::io("open", "/nope", io::Error::from(io::ErrorKind::NotFound));
        assert!(
            matches!(error, StorageError::NotFound { ref path } if path.as_os_str() == "/nope")
        );
    }
}
