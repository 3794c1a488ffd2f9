//! The one error type of the trace crate.

use std::io;
use std::path::PathBuf;

/// What can go wrong while writing a trace. Recording events never fails (the hot path
/// cannot); errors surface when the trace file is created and when it is finished.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The trace file could not be created, written or closed.
    #[error(
        "cannot {op} trace file {path}: {source}; check that the output folder is writable \
         and has free space (or run without --trace)",
        path = path.display()
    )]
    Io {
        /// What was being done (`create`, `write`, `finish`).
        op: &'static str,
        /// The trace file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },

    /// The background writer thread could not be started or died.
    #[error("the trace writer for {path} stopped unexpectedly: {reason}", path = path.display())]
    Writer {
        /// The trace file.
        path: PathBuf,
        /// What happened.
        reason: String,
    },

    /// `rank` is not below `size`.
    #[error(
        "trace rank {rank} is out of range for {size} ranks; the rank must be below the rank count"
    )]
    InvalidRank {
        /// The rank.
        rank: u32,
        /// The number of ranks.
        size: u32,
    },
}
