use std::path::PathBuf;

use dlio_format::FormatError;

/// Why a batch could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// A sample could not be read.
    #[error("reading sample {index} of {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The sample within the file.
        index: u64,
        /// What went wrong (boxed: format errors are large, batches are passed by value).
        #[source]
        source: Box<FormatError>,
    },
    /// The plan named a file the list does not have (a bug in the caller).
    #[error("the plan names file #{file}, but the file list has only {len} files")]
    NoSuchFile {
        /// File number from the plan.
        file: u64,
        /// Files in the list.
        len: usize,
    },
    /// A reader thread stopped without reporting (it panicked).
    #[error("reader thread {worker} stopped unexpectedly")]
    ReaderGone {
        /// The reader thread.
        worker: u32,
    },
    /// A reader thread could not be started.
    #[error("could not start a reader thread: {source}")]
    Spawn {
        /// The OS error.
        source: std::io::Error,
    },
    /// A loader setting is out of range.
    #[error("{0}")]
    Setting(String),
    /// The run was interrupted (Ctrl-C or another rank failed).
    #[error("interrupted")]
    Interrupted,
}
