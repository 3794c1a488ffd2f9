//! The one error type of the format crate.

use std::path::PathBuf;

use dlio_storage::StorageError;

use crate::FileKey;

/// Everything that can go wrong while generating or reading data files. Messages name the
/// file (and the offset, for damaged files) and say what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The storage failed (the message names the path and, for reads, the offset).
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// The file's bytes do not make a valid file of the format.
    #[error(
        "{path} is corrupt at offset {offset}: {what}; delete it and generate the data again",
        path = path.display()
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where the problem was found.
        offset: u64,
        /// What is wrong.
        what: String,
    },

    /// `dataset.format` names a format this build cannot generate or read.
    #[error(
        "format '{format}' is not built into this version of dlio yet; available: {available}",
        available = crate::built_in_formats()
    )]
    UnsupportedFormat {
        /// The requested `dataset.format`.
        format: &'static str,
    },

    /// A sample index past the end of the file.
    #[error(
        "sample {index} is out of range for {path}, which holds {samples} samples; \
         check dataset.num_samples_per_file against the files on disk, or generate the data again",
        path = path.display()
    )]
    SampleOutOfRange {
        /// The file.
        path: PathBuf,
        /// The requested sample.
        index: u64,
        /// Samples the file holds.
        samples: u64,
    },

    /// `read_sample` or `close` was asked about a file that is not open in this reader.
    #[error("file {key} is not open in this reader (call open before read_sample)")]
    FileNotOpen {
        /// The key that was asked for.
        key: FileKey,
    },

    /// A valid request this format cannot honour.
    #[error("{what}; {fix}")]
    Unsupported {
        /// What was asked for.
        what: String,
        /// How to get something that works.
        fix: String,
    },

    /// Generation stopped because it was cancelled (e.g. Ctrl-C). Files that were not
    /// finished were removed; the next run generates only what is missing.
    #[error(
        "data generation was interrupted; unfinished files were removed and the next run \
         generates only the missing ones"
    )]
    Interrupted,

    /// Generating one file failed; `error` says why.
    #[error("cannot generate {path}: {error}", path = path.display())]
    Generation {
        /// The file that was being generated (its partial file was removed).
        path: PathBuf,
        /// What went wrong.
        error: Box<FormatError>,
    },
}

impl FormatError {
    pub(crate) fn corrupt(path: &std::path::Path, offset: u64, what: impl Into<String>) -> Self {
        FormatError::Corrupt {
            path: path.to_path_buf(),
            offset,
            what: what.into(),
        }
    }

    pub(crate) fn unsupported(what: impl Into<String>, fix: impl Into<String>) -> Self {
        FormatError::Unsupported {
            what: what.into(),
            fix: fix.into(),
        }
    }
}
