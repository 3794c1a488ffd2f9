//! The one error type of the analyze crate.

use std::io;
use std::path::PathBuf;

/// What stops an analysis. Bad lines inside a trace never do: they are counted and listed
/// in [`Analysis::corrupt`](crate::Analysis::corrupt).
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A path given on the command line does not exist or cannot be read.
    #[error("cannot {op} {path}: {source}", path = path.display())]
    Io {
        /// What was being done (`read`, `list`, `write`, `spill`).
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },

    /// A folder holds no trace file.
    #[error(
        "no trace files (*.pfw, *.pfw.gz) in {path}; write one with `dlio run --trace` \
         (or DFTRACER_ENABLE=1), or name the trace files directly",
        path = path.display()
    )]
    NoTraces {
        /// The folder.
        path: PathBuf,
    },

    /// No event could be read from any input: the files are empty or are not traces.
    #[error("no trace events found: {details}")]
    NoEvents {
        /// One clause per file saying what was found instead.
        details: String,
    },

    /// A trace is incomplete or damaged, where a result from part of it would mislead.
    #[error("cannot use the traces in {path}: {detail}", path = path.display())]
    Incomplete {
        /// The trace file or folder.
        path: PathBuf,
        /// What is wrong and what to do.
        detail: String,
    },

    /// The traces hold nothing the command can work from (no reads of data files, ...).
    #[error("{0}")]
    Unusable(String),

    /// Drawing a plot failed.
    #[error("cannot draw the {plot} plot: {reason}")]
    Plot {
        /// Which plot.
        plot: &'static str,
        /// What went wrong (for a missing font: which package to install).
        reason: String,
    },
}
