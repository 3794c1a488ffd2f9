//! The one error type of this crate: writing the output files.

use std::path::PathBuf;

/// Why the output files could not be written.
///
/// Recording and aggregating never fail; only the file system can.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The output folder does not exist and could not be created.
    #[error(
        "cannot create the output folder {path}: {source}; \
         set `output.folder` to a writable directory"
    )]
    CreateDir {
        /// The folder that was being created.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A temporary output file could not be written.
    #[error(
        "cannot write {path}: {source}; check that the output folder is writable \
         and that the disk is not full"
    )]
    Write {
        /// The temporary file being written.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A finished temporary file could not be renamed to its final name.
    #[error(
        "cannot rename {from} to {to}: {source}; check that nothing else holds {to} \
         and that the output folder is writable"
    )]
    Rename {
        /// The temporary file.
        from: PathBuf,
        /// The final name.
        to: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A value could not be encoded as JSON (for example a map with non-string keys in
    /// `RunInfo::ours`).
    #[error("cannot encode {path} as JSON: {source}; fix the extra fields passed in RunInfo::ours")]
    Encode {
        /// The file being written.
        path: PathBuf,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
}
