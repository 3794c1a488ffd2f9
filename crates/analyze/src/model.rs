//! The analysis as data: what `analysis.json` holds and every report renders.

use std::path::PathBuf;

use serde::Serialize;

pub use crate::ingest::CorruptLine;

/// Everything `dlio analyze` found. Times are seconds; "per rank" figures are means over
/// ranks of each rank's interval union, so they compare directly with `job_time_s`.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// The trace files read.
    pub inputs: Vec<InputFile>,
    /// Complete (`X`) events.
    pub events: u64,
    /// Metadata (`M`) events.
    pub metadata_events: u64,
    /// Events of other phases (instant, counter, begin/end), not analysed.
    pub ignored_events: u64,
    /// Lines that are not trace events: how many, and the first few with file and line.
    pub corrupt: Corrupt,
    /// Ranks seen.
    pub ranks: u32,
    /// First event start, microseconds since the Unix epoch.
    pub start_unix_us: f64,
    /// From the first event's start to the last event's end.
    pub job_time_s: f64,
    /// Compute, I/O and their overlap.
    pub time: TimeSummary,
    /// Step-level counts.
    pub counts: Counts,
    /// dfanalyzer's layer breakdown.
    pub layers: Vec<LayerRow>,
    /// Transfer sizes of reads and writes.
    pub transfer_sizes: TransferSizes,
    /// Sequential and consecutive access.
    pub access: AccessPattern,
    /// Per event name: count, time, bytes (dfanalyzer's "metrics by function").
    pub functions: Vec<FunctionRow>,
    /// Per-file access counts.
    pub files: FileSummary,
    /// Per-rank figures and their skew.
    pub per_rank: Vec<RankRow>,
    /// Spread between ranks.
    pub skew: Skew,
    /// Read and write bandwidth over time.
    pub bandwidth: Bandwidth,
    /// Per rank (first 32): fraction of each time bin spent in compute and in I/O.
    pub timeline: Vec<RankTimeline>,
}

/// One input file.
#[derive(Debug, Clone, Serialize)]
pub struct InputFile {
    /// Its path.
    pub path: PathBuf,
    /// Rank from the file name, when it follows `trace-{rank}-of-{size}`.
    pub rank: Option<u32>,
    /// Non-empty lines (excluding `[` and `]`).
    pub lines: u64,
    /// Events read.
    pub events: u64,
    /// Corrupt lines.
    pub corrupt_lines: u64,
}

/// Corrupt lines.
#[derive(Debug, Clone, Serialize)]
pub struct Corrupt {
    /// How many lines were not trace events.
    pub count: u64,
    /// The first ones (by file and line).
    pub examples: Vec<CorruptLine>,
}

/// Compute vs I/O (seconds, mean per rank).
#[derive(Debug, Clone, Serialize)]
pub struct TimeSummary {
    /// Union of compute spans.
    pub compute_s: f64,
    /// Union of I/O calls.
    pub io_s: f64,
    /// I/O time during which compute was also running.
    pub io_overlapped_s: f64,
    /// I/O time with no compute running.
    pub io_unoverlapped_s: f64,
    /// `io_overlapped_s / io_s` in percent (0 without I/O).
    pub io_overlapped_pct: f64,
    /// `io_unoverlapped_s / io_s` in percent.
    pub io_unoverlapped_pct: f64,
    /// Compute time with no I/O running.
    pub compute_unoverlapped_s: f64,
    /// Union of batch waits (fetch).
    pub fetch_s: f64,
}

/// Counts of the training loop's events, all ranks.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    /// Compute spans (one per step).
    pub compute: u64,
    /// Batch waits (`fetch.iter`; DLIO 2.0's `<module>.iter`).
    pub fetch: u64,
    /// Samples read (`data.item`; DLIO 2.0's `__getitem__`).
    pub items: u64,
    /// Checkpoint spans.
    pub checkpoints: u64,
}

/// One layer.
#[derive(Debug, Clone, Serialize)]
pub struct LayerRow {
    /// Layer name (`app`, `train`, `compute`, `fetch`, `reader`, `reader POSIX`, ...).
    pub layer: String,
    /// Mean per rank of the union of the layer's intervals.
    pub time_s: f64,
    /// The same union for the rank that spent the longest in the layer.
    pub slowest_rank_time_s: f64,
    /// Events, all ranks.
    pub ops: u64,
    /// `ops / time_s`.
    pub ops_per_s: f64,
    /// Bytes read and written, all ranks.
    pub bytes: u64,
    /// `bytes / slowest_rank_time_s`, MiB/s: what all ranks moved over the time the slowest
    /// took, the rate the job as a whole got from this layer (dfanalyzer's definition: its
    /// layer time is the slowest process's).
    pub bandwidth_mib_s: f64,
    /// Percentage of this layer's time during which compute also ran.
    pub overlap_with_compute_pct: f64,
}

/// Transfer sizes.
#[derive(Debug, Clone, Serialize)]
pub struct TransferSizes {
    /// Reads.
    pub read: SizeStats,
    /// Writes.
    pub write: SizeStats,
}

/// Sizes of one kind of transfer.
#[derive(Debug, Clone, Serialize)]
pub struct SizeStats {
    /// Calls with a known size.
    pub ops: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Smallest.
    pub min: u64,
    /// Median (within 0.1 %).
    pub median: u64,
    /// Mean.
    pub mean: f64,
    /// Largest.
    pub max: u64,
    /// Darshan's ten buckets, `0_100` .. `1G_PLUS`.
    pub buckets: Vec<Bucket>,
}

/// One Darshan size bucket.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    /// Darshan's name (`0_100`, `100_1K`, ...).
    pub label: &'static str,
    /// Calls in it.
    pub count: u64,
}

/// Darshan's sequential / consecutive counters for reads and writes.
#[derive(Debug, Clone, Serialize)]
pub struct AccessPattern {
    /// Reads with a known offset.
    pub reads: u64,
    /// Reads at or after the end of the previous access to the same file (same rank).
    pub sequential_reads: u64,
    /// Reads exactly at the end of the previous access.
    pub consecutive_reads: u64,
    /// Percent of `reads`.
    pub sequential_read_pct: f64,
    /// Percent of `reads`.
    pub consecutive_read_pct: f64,
    /// Writes with a known offset.
    pub writes: u64,
    /// Sequential writes.
    pub sequential_writes: u64,
    /// Consecutive writes.
    pub consecutive_writes: u64,
}

/// One event name.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionRow {
    /// Category.
    pub cat: String,
    /// Name.
    pub name: String,
    /// Events.
    pub count: u64,
    /// Sum of durations (not a union).
    pub total_time_s: f64,
    /// Bytes moved.
    pub bytes: u64,
}

/// Per-file access.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// Files seen in I/O events.
    pub files: u64,
    /// Files read at least once.
    pub files_read: u64,
    /// Files written at least once.
    pub files_written: u64,
    /// Most read files first (top 20 by bytes read, then opens).
    pub top: Vec<FileRow>,
    /// How many files were opened N times, for each N (ascending).
    pub by_open_count: Vec<OpenCount>,
}

/// One file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FileRow {
    /// Its path (or hash, when the trace has no name for it).
    pub path: String,
    /// Opens.
    pub opens: u64,
    /// Reads.
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

/// Files opened `opens` times.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OpenCount {
    /// Opens per file.
    pub opens: u64,
    /// Number of such files.
    pub files: u64,
}

/// One rank.
#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    /// The rank.
    pub rank: u32,
    /// From its first event to its last.
    pub span_s: f64,
    /// Union of its compute.
    pub compute_s: f64,
    /// Union of its I/O.
    pub io_s: f64,
    /// I/O overlapped with compute.
    pub io_overlapped_s: f64,
    /// I/O calls.
    pub io_ops: u64,
    /// Bytes read and written.
    pub bytes: u64,
}

/// Spread of I/O time between ranks (Darshan's fastest/slowest rank).
#[derive(Debug, Clone, Serialize)]
pub struct Skew {
    /// Rank with the least I/O time.
    pub fastest_rank: u32,
    /// Rank with the most I/O time.
    pub slowest_rank: u32,
    /// Least I/O time.
    pub io_min_s: f64,
    /// Most I/O time.
    pub io_max_s: f64,
    /// Mean I/O time.
    pub io_mean_s: f64,
    /// `io_max_s / io_mean_s` (1 = balanced).
    pub io_max_over_mean: f64,
    /// Most bytes of one rank over the mean.
    pub bytes_max_over_mean: f64,
}

/// Bandwidth over time, in equal bins from the job's start.
#[derive(Debug, Clone, Serialize)]
pub struct Bandwidth {
    /// Bin width.
    pub bin_s: f64,
    /// MiB/s read in each bin (all ranks).
    pub read_mib_s: Vec<f64>,
    /// MiB/s written in each bin.
    pub write_mib_s: Vec<f64>,
}

/// One rank's busy fractions per time bin (same bins as [`Bandwidth`]).
#[derive(Debug, Clone, Serialize)]
pub struct RankTimeline {
    /// The rank.
    pub rank: u32,
    /// Fraction of each bin in compute (0..1).
    pub compute: Vec<f32>,
    /// Fraction of each bin in I/O (0..1).
    pub io: Vec<f32>,
}
