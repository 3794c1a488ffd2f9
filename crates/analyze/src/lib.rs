//! `dlio-analyze`: `dlio analyze PATH`, the characterisation tool. It reads dftracer-format
//! traces (ours from `dlio run --trace`, and those dftracer writes for other programs such
//! as Python DLIO with `DFTRACER_ENABLE=1`) and tells how much time went to compute and to
//! I/O, how much I/O was hidden behind compute, which transfer sizes and access patterns
//! the I/O had, which files were read how often and how the ranks differ.
//!
//! Where it sits: after a run, outside the pipeline; it depends only on `dlio-trace` for
//! the event vocabulary. [`analyze`] returns an [`Analysis`] (plain data, serialisable);
//! [`render_terminal`] and [`write_reports`] (`analysis.json`, a self-contained
//! `analysis.html` with four inline SVG plots drawn by plotters, and PNG copies) render it.
//!
//! Why this shape: traces reach 10^7 events and more, so memory must not grow with them.
//! One thread reads and decompresses the files while the others parse lines into
//! fixed-size interval records, sorted in bounded runs (spilled to anonymous temporary
//! files when full). A k-way merge then streams every rank's records in start order; with
//! starts in order, each layer's interval union and its overlap with compute need O(1)
//! state, and order-dependent figures (sequential/consecutive access from offsets or file
//! positions) come for free. Memory is bounded by the run size, the number of distinct
//! files and event names, and 200 time bins per rank.
//!
//! Figures: times are per rank (mean over ranks of each rank's interval union); layers
//! follow dfanalyzer (app, train, evaluate, compute, fetch, reader, reader POSIX,
//! checkpoint, checkpoint POSIX, other POSIX, comm; see `dlio_trace` for which span
//! names map where, including DLIO 2.0's own names); transfer sizes use Darshan's ten
//! buckets; a read is consecutive when it starts where the previous access to the same
//! file by the same rank ended, sequential when it starts at or after that point. Corrupt
//! or truncated lines are counted and listed with file and line, never fatal; inputs with
//! no events at all are an error that says what each file holds.
//!
//! ```
//! use std::path::PathBuf;
//! use dlio_analyze::{AnalyzeOptions, analyze, render_terminal};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let trace = dir.path().join("trace-0-of-1.pfw");
//! std::fs::write(&trace, concat!(
//!     "[\n",
//!     r#"{"name":"compute","cat":"compute","pid":1,"tid":1,"ts":0,"dur":1000,"ph":"X"}"#, ",\n",
//!     r#"{"name":"pread","cat":"POSIX","pid":1,"tid":2,"ts":500,"dur":1000,"ph":"X","args":{"fname":"/d/a","offset":0,"ret":4096}}"#, "\n",
//!     "]\n",
//! ))?;
//! let a = analyze(&[trace], &AnalyzeOptions::default())?;
//! assert_eq!((a.time.compute_s, a.time.io_s, a.time.io_overlapped_s), (0.001, 0.001, 0.0005));
//! assert_eq!(a.transfer_sizes.read.buckets[2].count, 1); // 1K_10K
//! assert!(render_terminal(&a).contains("I/O overlapped"));
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod analyze;
mod characterize;
mod error;
mod event;
mod fidelity;
mod ingest;
mod merge;
mod model;
mod plots;
mod report;
mod terminal;
mod timeline;

pub use analyze::{AnalyzeOptions, analyze, find_traces};
pub use characterize::{
    Characterization, CharacterizationFiles, CharacterizeOptions, MIN_GAP_RATIO, Parameter,
    ReaderThread, SideFileRow, SizeShare, Stats, WrittenFile, characterize,
    render_characterization, write_characterization,
};
pub use error::AnalyzeError;
pub use fidelity::{
    BOUNDS as FIDELITY_BOUNDS, Bound, Feature, Fidelity, FidelityOptions, KS_RESOLUTION, Measure,
    STEP_TIME_RESOLUTION, Side, Verdict as FidelityVerdict, cdf_similarity, fidelity, ks_distance,
    ks_distance_within, log_cosine, render_fidelity, scaled_cosine, write_fidelity,
};
pub use model::{
    AccessPattern, Analysis, Bandwidth, Bucket, Corrupt, CorruptLine, Counts, FileRow, FileSummary,
    FunctionRow, InputFile, LayerRow, OpenCount, RankRow, RankTimeline, SizeStats, Skew,
    TimeSummary, TransferSizes,
};
pub use plots::{CapacityPoint, capacity_png};
pub use report::{ReportFiles, write_reports};
pub use terminal::render_terminal;
