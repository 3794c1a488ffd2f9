//! `dlio characterize TRACE_DIR`: from the trace of a real training program (written by
//! `dlio trace`, or by dftracer) to a DLIO workload, each parameter with the evidence it was
//! read from.
//!
//! How the trace is read, in order:
//! 1. **Data files**: the files read outside the interpreter's and the system's own folders
//!    (`/usr`, `site-packages`, `*.py`, ...), grouped by folder; the folder that delivered the
//!    most bytes holds the data set, and its files of the dominant extension are the data
//!    files (`--data-dir` names the folder instead). Other files read during training more
//!    than once are side files; files written during training are checkpoints.
//! 2. **Steps**: the intervals in which some data-file call is in progress are merged; the
//!    pauses between them fall into levels (jumps of 2x between sorted neighbours); the top
//!    level whose median is at least [`MIN_GAP_RATIO`] times the level below is the compute
//!    between steps, the bursts between its pauses the steps' loading. No such level: the
//!    program reads without pause (I/O bound) and steps cannot be told apart.
//! 3. **Samples**: when each opening of a data file is read within one burst, a sample is a
//!    file (files read whole); otherwise a sample is a read of the dominant request size
//!    (slices of large files).
//! 4. The rest follows: epochs (how often each sample was read), batch (samples per burst),
//!    threads (which threads and processes read data), whether reads overlap compute, order
//!    (sorted, one shuffle, a shuffle per epoch), request sizes (a distribution when there is
//!    more than one), compute per step and per-sample loader time (the bursts' time outside
//!    the I/O calls, e.g. Python decoding).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::AnalyzeError;
use crate::event::Op;
use crate::ingest::Rec;
use crate::report::escape;
use crate::timeline::{Timeline, load, op};

/// The shortest ratio between the median compute pause and the median of the level of pauses
/// below it (the program's work between samples) for the pauses to count as compute.
pub const MIN_GAP_RATIO: f64 = 3.0;

/// The shortest jump between two neighbouring sorted pauses that separates two levels.
const MIN_JUMP_RATIO: f64 = 2.0;

/// The shortest per-sample loader time written as `reader.preprocess_time`: a shorter sleep
/// costs its timer's slack (about 50 us on Linux) rather than its length.
const MIN_PREPROCESS_S: f64 = 50e-6;

/// The fewest bytes written to a file during training for it to count as a checkpoint.
const MIN_WRITTEN_BYTES: u64 = 64 << 10;

/// Most request sizes kept in a transfer-size distribution (more are binned by quantiles).
const MAX_SIZES: usize = 16;

/// The largest file dlio reads whole in one request, and so the largest a request pattern
/// (`reader.sample_requests`) may shape: `dlio_format::CHUNK_BYTES`.
const WHOLE_READ_LIMIT: u64 = 4 << 20;

/// How to characterise.
#[derive(Debug, Clone, Default)]
pub struct CharacterizeOptions {
    /// The data set's folder; `None` finds it (the folder whose files delivered most bytes).
    pub data_dir: Option<PathBuf>,
}

/// One derived workload key with its value and what it was read from.
#[derive(Debug, Clone, Serialize)]
pub struct Parameter {
    /// Dotted key, as in the workload YAML.
    pub key: String,
    /// The value as written in the YAML.
    pub value: String,
    /// What in the trace gave it.
    pub evidence: String,
}

/// A request size and how many data reads had it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct SizeShare {
    /// Bytes per request.
    pub size: u64,
    /// Data reads of that size.
    pub count: u64,
}

/// A file read besides the data set during training.
#[derive(Debug, Clone, Serialize)]
pub struct SideFileRow {
    /// Its path.
    pub path: String,
    /// Name under the data folder, as `dataset.side_files` writes it.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Times it was read whole (openings).
    pub reads: u64,
    /// Steps between two reads.
    pub every_steps: u64,
}

/// A file written during training (checkpoints, logs).
#[derive(Debug, Clone, Serialize)]
pub struct WrittenFile {
    /// Its path.
    pub path: String,
    /// Bytes written.
    pub bytes: u64,
    /// Write calls.
    pub writes: u64,
}

/// A thread that read data.
#[derive(Debug, Clone, Serialize)]
pub struct ReaderThread {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Data reads.
    pub reads: u64,
    /// Bytes of them.
    pub bytes: u64,
}

/// Summary figures of a set of values.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct Stats {
    /// How many values.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Standard deviation (population).
    pub stdev: f64,
}

impl Stats {
    /// The figures of `values` (all zero when empty).
    pub fn of(values: &[f64]) -> Stats {
        if values.is_empty() {
            return Stats::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let mid = v.len() / 2;
        let median = if v.len().is_multiple_of(2) {
            (v[mid - 1] + v[mid]) / 2.0
        } else {
            v[mid]
        };
        Stats {
            count: v.len() as u64,
            min: v[0],
            max: v[v.len() - 1],
            mean,
            median,
            stdev: var.sqrt(),
        }
    }
}

/// What the trace says about the program's I/O, and the workload that emulates it.
#[derive(Debug, Clone, Serialize)]
pub struct Characterization {
    /// The trace files read.
    pub traces: Vec<PathBuf>,
    /// Events in them.
    pub events: u64,
    /// The data set's folder.
    pub data_dir: String,
    /// Every derived key, in YAML order.
    pub parameters: Vec<Parameter>,
    /// Data files: count and size figures (bytes).
    pub data_files: u64,
    /// Sizes of the data files.
    pub file_sizes: Stats,
    /// Request sizes of the data reads, most frequent first.
    pub transfer_sizes: Vec<SizeShare>,
    /// Steps (bursts of data reads) found.
    pub steps: u64,
    /// Compute between steps, seconds.
    pub compute_s: Stats,
    /// Each step's loading time (its burst), seconds.
    pub fetch_s: Stats,
    /// Loading time of each step in order, seconds.
    pub step_fetch_s: Vec<f64>,
    /// Compute after each step in order (the pause before the next), seconds.
    pub step_compute_s: Vec<f64>,
    /// Side files.
    pub side_files: Vec<SideFileRow>,
    /// Files written while training.
    pub written: Vec<WrittenFile>,
    /// Threads that read data.
    pub reader_threads: Vec<ReaderThread>,
    /// Things the emulation cannot reproduce, or guesses the trace could not settle.
    pub notes: Vec<String>,
    /// The workload, as YAML (with the evidence as comments).
    pub workload_yaml: String,
}

/// Characterises the traces under `path`.
pub fn characterize(
    path: &Path,
    opts: &CharacterizeOptions,
) -> Result<Characterization, AnalyzeError> {
    let timeline = load(path)?;
    let data = DataSet::find(&timeline, opts.data_dir.as_deref())?;
    Ok(derive(&timeline, &data))
}

/// Folders and names that belong to the interpreter, its libraries and the system, never to a
/// data set.
pub(crate) fn is_system_path(path: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "/usr/",
        "/lib/",
        "/lib64/",
        "/bin/",
        "/sbin/",
        "/etc/",
        "/proc/",
        "/sys/",
        "/dev/",
        "/run/",
        "/var/lib/",
        "/var/cache/",
        "/opt/conda/pkgs/",
    ];
    const PARTS: &[&str] = &[
        "/site-packages/",
        "/dist-packages/",
        "/lib/python",
        "/.pyenv/",
        "/__pycache__/",
        "/.cache/",
    ];
    const EXTENSIONS: &[&str] = &[
        ".py",
        ".pyc",
        ".pyi",
        ".so",
        ".pth",
        ".egg-link",
        ".typed",
        ".dist-info",
    ];
    PREFIXES.iter().any(|p| path.starts_with(p))
        || PARTS.iter().any(|p| path.contains(p))
        || EXTENSIONS.iter().any(|e| path.ends_with(e))
        || path.contains(".so.")
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn extension_of(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').map_or("", |(_, ext)| ext)
}

/// Per-file totals.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileTotals {
    pub reads: u64,
    pub bytes_read: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub opens: u64,
    /// Largest size a `stat`/`fstat` reported, else the furthest byte read, else the bytes
    /// read per opening.
    pub size: u64,
    pub stat_size: bool,
}

pub(crate) fn file_totals(t: &Timeline) -> HashMap<u64, FileTotals> {
    let mut files: HashMap<u64, FileTotals> = HashMap::new();
    for r in t.io() {
        let f = files.entry(r.file).or_default();
        match op(r) {
            Op::Read if r.bytes > 0 => {
                f.reads += 1;
                f.bytes_read += r.bytes as u64;
                if !f.stat_size && r.offset >= 0 {
                    f.size = f.size.max((r.offset + r.bytes) as u64);
                }
            }
            Op::Write if r.bytes > 0 => {
                f.writes += 1;
                f.bytes_written += r.bytes as u64;
            }
            Op::Open => f.opens += 1,
            Op::Meta if r.bytes >= 0 => {
                if !f.stat_size {
                    f.size = 0;
                }
                f.stat_size = true;
                f.size = f.size.max(r.bytes as u64);
            }
            _ => {}
        }
    }
    // No size from a stat and no offsets (dftracer's `read` carries none): what each opening
    // read.
    for f in files.values_mut() {
        if f.size == 0 && f.bytes_read > 0 {
            f.size = f.bytes_read / f.opens.max(1);
        }
    }
    files
}

/// The data set's files, found in a timeline.
pub(crate) struct DataSet {
    pub dir: String,
    pub files: HashSet<u64>,
    pub totals: HashMap<u64, FileTotals>,
    pub extension: String,
}

impl DataSet {
    pub(crate) fn find(t: &Timeline, dir: Option<&Path>) -> Result<DataSet, AnalyzeError> {
        let totals = file_totals(t);
        let read: Vec<(u64, &FileTotals, &str)> = totals
            .iter()
            .filter(|(_, f)| f.bytes_read > 0)
            .map(|(h, f)| (*h, f, t.path(*h)))
            .filter(|(_, _, p)| !is_system_path(p))
            .collect();
        let dir = match dir {
            Some(d) => d.to_string_lossy().trim_end_matches('/').to_string(),
            None => {
                let mut by_dir: BTreeMap<&str, u64> = BTreeMap::new();
                for (_, f, p) in &read {
                    *by_dir.entry(parent_of(p)).or_default() += f.bytes_read;
                }
                by_dir
                    .into_iter()
                    .max_by_key(|(_, bytes)| *bytes)
                    .map(|(d, _)| d.to_string())
                    .ok_or_else(|| {
                        AnalyzeError::Unusable(format!(
                            "the traces read no file outside the interpreter's and the system's \
                             folders ({} files read in all): the program read no data, or read \
                             it in a way the trace does not show (memory maps, a network \
                             client); check the command, or name the data folder with \
                             --data-dir",
                            totals.values().filter(|f| f.bytes_read > 0).count()
                        ))
                    })?
            }
        };
        let in_dir: Vec<&(u64, &FileTotals, &str)> = read
            .iter()
            .filter(|(_, _, p)| parent_of(p) == dir)
            .collect();
        let mut by_ext: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, f, p) in &in_dir {
            *by_ext.entry(extension_of(p)).or_default() += f.bytes_read;
        }
        let extension = by_ext
            .into_iter()
            .max_by_key(|(_, b)| *b)
            .map(|(e, _)| e.to_string())
            .ok_or_else(|| {
                AnalyzeError::Unusable(format!(
                    "no file directly in {dir} was read; name the folder that holds the data \
                     files with --data-dir"
                ))
            })?;
        let files = in_dir
            .iter()
            .filter(|(_, _, p)| extension_of(p) == extension)
            .map(|(h, _, _)| *h)
            .collect();
        Ok(DataSet {
            dir,
            files,
            totals,
            extension,
        })
    }

    pub(crate) fn holds(&self, file: u64) -> bool {
        self.files.contains(&file)
    }
}

/// The calls on data files from the first data read to the end of the last (what comes before
/// or after, such as listing and sizing the files, is not training), and the reads among them.
pub(crate) fn data_calls<'t>(t: &'t Timeline, data: &DataSet) -> (Vec<&'t Rec>, Vec<&'t Rec>) {
    let all: Vec<&Rec> = t.io().filter(|r| data.holds(r.file)).collect();
    let is_read = |r: &&Rec| op(r) == Op::Read && r.bytes > 0;
    let first_read = all.iter().position(is_read).unwrap_or(0);
    // From the opening the first read was made through.
    let first = all
        .get(first_read)
        .map(|r0| {
            all[..first_read]
                .iter()
                .rev()
                .find(|r| op(r) == Op::Open && r.file == r0.file && r.rank == r0.rank)
                .map_or(r0.start, |open| open.start)
        })
        .unwrap_or(0);
    let last = all
        .iter()
        .filter(|r| is_read(r))
        .map(|r| r.end)
        .max()
        .unwrap_or(0);
    let calls: Vec<&Rec> = all
        .into_iter()
        .filter(|r| r.start >= first && r.end <= last)
        .collect();
    let reads = calls.iter().copied().filter(is_read).collect();
    (calls, reads)
}

/// Starts of the trace's `compute` spans, sorted (none in a trace of POSIX calls only).
pub(crate) fn compute_starts(t: &Timeline) -> Vec<i64> {
    t.events
        .iter()
        .filter(|r| r.layer == crate::event::Layer::Compute as u8)
        .map(|r| r.start)
        .collect()
}

/// A burst of data I/O: one step's loading.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Burst {
    pub start: i64,
    pub end: i64,
    /// Time inside it with a data call in progress.
    pub busy: i64,
}

/// Merges the data calls into busy intervals and groups them into bursts: at the `compute`
/// spans when the trace has them (dftracer's AI spans, `dlio run --trace`), else at the
/// compute pauses. Returns the bursts and whether steps were found.
pub(crate) fn bursts(calls: &[&Rec], compute_starts: &[i64]) -> (Vec<Burst>, bool) {
    let mut busy: Vec<(i64, i64)> = Vec::new();
    for r in calls {
        match busy.last_mut() {
            Some(last) if r.start <= last.1 => last.1 = last.1.max(r.end),
            _ => busy.push((r.start, r.end)),
        }
    }
    let mut out: Vec<Burst> = Vec::new();
    let push = |out: &mut Vec<Burst>, (start, end): (i64, i64), same: bool| match out.last_mut() {
        Some(b) if same => {
            b.end = end;
            b.busy += end - start;
        }
        _ => out.push(Burst {
            start,
            end,
            busy: end - start,
        }),
    };
    if !compute_starts.is_empty() {
        // Step k's loading is what happens between compute spans k - 1 and k.
        let mut step = None;
        for interval in busy {
            let k = compute_starts.partition_point(|&c| c < interval.0);
            push(&mut out, interval, step == Some(k));
            step = Some(k);
        }
        return (out, true);
    }
    let threshold = pause_threshold(&busy);
    let mut last_end = None;
    for interval in busy {
        let same = match (threshold, last_end) {
            (Some(t), Some(end)) => interval.0 - end <= t,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        last_end = Some(interval.1);
        push(&mut out, interval, same);
    }
    (out, threshold.is_some())
}

/// The pause length above which a pause between data calls is compute.
///
/// Sorted, the pauses fall into levels separated by jumps of at least [`MIN_JUMP_RATIO`]
/// between neighbours: system calls back to back, then the program's work between samples,
/// then its compute between steps. The compute is the top level of two or more pauses of at
/// least 0.2 ms whose median is at least [`MIN_GAP_RATIO`] times the median of the level
/// below it. Levels told apart by a jump of 2 (not only 3) and confirmed by their medians
/// hold on a busy machine, where scheduling delays stretch some pauses inside a burst towards
/// the compute pauses; `None` when there is no such level.
fn pause_threshold(busy: &[(i64, i64)]) -> Option<i64> {
    let mut gaps: Vec<i64> = busy.windows(2).map(|w| w[1].0 - w[0].1).collect();
    gaps.sort_unstable();
    let n = gaps.len();
    let jump = |i: usize| gaps[i] as f64 >= MIN_JUMP_RATIO * gaps[i - 1].max(1000) as f64;
    let median = |level: &[i64]| level[level.len() / 2] as f64;
    let at = (1..n.saturating_sub(1)).rev().find(|&i| {
        if gaps[i] < 200_000 || !jump(i) {
            return false;
        }
        let below_start = (1..i).rev().find(|&k| jump(k)).unwrap_or(0);
        median(&gaps[i..]) >= MIN_GAP_RATIO * median(&gaps[below_start..i]).max(1000.0)
    })?;
    let threshold = ((gaps[at - 1].max(1) as f64) * (gaps[at] as f64)).sqrt() as i64;
    // A stray long pause inside a burst (a thread scheduled late, a garbage collection) can
    // pass the jump: pauses under half the median compute pause are not compute either.
    let long = &gaps[at..];
    Some(threshold.max(long[long.len() / 2] / 2))
}

/// The burst that holds time `at` (the last one starting at or before it).
fn burst_of(bursts: &[Burst], at: i64) -> usize {
    bursts.partition_point(|b| b.start <= at).saturating_sub(1)
}

/// The format a data file's extension (and, when it is still there, its first bytes) says.
fn format_of(extension: &str, sample: Option<&str>, whole_files: bool) -> (&'static str, String) {
    let magic = sample.and_then(|p| {
        let mut head = [0u8; 8];
        use std::io::Read;
        let n = std::fs::File::open(p)
            .and_then(|mut f| f.read(&mut head))
            .ok()?;
        Some(head[..n].to_vec())
    });
    let by_magic = magic
        .as_deref()
        .and_then(dlio_format::format_by_magic)
        .map(|d| d.kind.name());
    let by_name = dlio_format::format_by_extension(extension).map(|d| d.kind.name());
    let seen = match (&magic, by_magic) {
        (Some(_), Some(f)) => format!("the files' first bytes are {f}'s"),
        (Some(_), None) => "the files' first bytes match no known format".to_string(),
        (None, _) => "the files are no longer there to look inside".to_string(),
    };
    match by_magic.or(by_name) {
        Some(f) => (f, format!("extension .{extension}; {seen}")),
        // Raw bytes: read whole, npy's reader (which reads every byte without decoding under
        // MLPerf's semantics) moves the same bytes; read in slices, indexed_binary reads each
        // sample with one positioned read.
        None if whole_files => (
            "npy",
            format!(
                "extension .{extension} and {seen}: raw bytes read whole, emulated by npy files \
                 of the same size (128 bytes of header, the rest data)"
            ),
        ),
        None => (
            "indexed_binary",
            format!(
                "extension .{extension} and {seen}: raw bytes read in slices, emulated by \
                 indexed_binary (one positioned read per sample)"
            ),
        ),
    }
}

/// Bytes dlio's generator adds around one sample of `record_dims: [n]` uint8 in a file of the
/// format, so that the generated files get the traced files' size.
fn header_bytes(format: &str) -> u64 {
    match format {
        // The .npy header of a 1-D array.
        "npy" => 128,
        // x.npy (header and data) and DLIO's y.npy labels in a stored zip: local headers,
        // central directory, end record.
        "npz" => 483,
        _ => 0,
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// How an epoch visits its samples.
fn order_of(
    epochs: &[Vec<(u64, i64)>],
    sorted_key: impl Fn(&(u64, i64)) -> String,
) -> (&'static str, String) {
    let Some(first) = epochs.first() else {
        return ("off", "no samples".into());
    };
    let mut sorted = first.clone();
    sorted.sort_by_cached_key(&sorted_key);
    let in_name_order = *first == sorted;
    let same_each_epoch = epochs.windows(2).all(|w| w[0] == w[1]);
    match (in_name_order, epochs.len() > 1, same_each_epoch) {
        (true, _, true) => ("off", "every epoch reads in name order".into()),
        (_, true, true) => (
            "seed",
            format!("{} epochs read in the same shuffled order", epochs.len()),
        ),
        (_, true, false) => (
            "random",
            format!("the order differs between the {} epochs", epochs.len()),
        ),
        (false, false, _) => (
            "seed",
            "one epoch, read out of name order (whether the order changes per epoch cannot be seen)"
                .into(),
        ),
        (true, false, false) => unreachable!("one epoch is always the same as itself"),
    }
}

/// The request-size distribution of the data reads, at most [`MAX_SIZES`] sizes.
fn size_shares(reads: &[&Rec]) -> Vec<SizeShare> {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for r in reads {
        *counts.entry(r.bytes as u64).or_default() += 1;
    }
    let mut shares: Vec<SizeShare> = counts
        .into_iter()
        .map(|(size, count)| SizeShare { size, count })
        .collect();
    if shares.len() > MAX_SIZES {
        shares = quantile_shares(&shares, reads.len() as u64);
    }
    shares.sort_by(|a, b| b.count.cmp(&a.count).then(a.size.cmp(&b.size)));
    shares
}

/// A distribution of more than [`MAX_SIZES`] sizes in as many entries: each size that holds
/// a share of the reads of its own (a header read by every opening) is kept as it is, and the
/// rest are cut into bins of equal counts, each at its mean size. The bytes and the shape of
/// the distribution stay (a continuous set of sizes, lognormal files or variable records,
/// would otherwise keep its smallest sizes and lose the rest to the largest kept).
fn quantile_shares(shares: &[SizeShare], total: u64) -> Vec<SizeShare> {
    let own = total / MAX_SIZES as u64;
    let (atoms, rest): (Vec<SizeShare>, Vec<SizeShare>) =
        shares.iter().partition(|s| s.count > own.max(1));
    let bins = MAX_SIZES.saturating_sub(atoms.len()).max(1) as u64;
    let rest_total: u64 = rest.iter().map(|s| s.count).sum();
    let mut out = atoms;
    let (mut count, mut bytes, mut filled, mut closed) = (0u64, 0u128, 0u64, 0u64);
    for (i, s) in rest.iter().enumerate() {
        count += s.count;
        bytes += u128::from(s.size) * u128::from(s.count);
        // Close a bin when the counts reach its share (the last takes what is left).
        let target = rest_total * (closed + 1) / bins;
        if count > 0 && (filled + count >= target || i + 1 == rest.len()) {
            out.push(SizeShare {
                size: (bytes / u128::from(count)) as u64,
                count,
            });
            filled += count;
            closed += 1;
            (count, bytes) = (0, 0);
        }
    }
    out
}

fn derive(t: &Timeline, data: &DataSet) -> Characterization {
    let mut params: Vec<Parameter> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut param = |key: &str, value: String, evidence: String| {
        params.push(Parameter {
            key: key.into(),
            value,
            evidence,
        })
    };

    let (calls, reads) = data_calls(t, data);
    let compute_starts = compute_starts(t);
    let opens: Vec<&Rec> = calls
        .iter()
        .copied()
        .filter(|r| op(r) == Op::Open)
        .collect();
    let (window_start, window_end) = (
        calls.first().map_or(0, |r| r.start),
        calls.iter().map(|r| r.end).max().unwrap_or(0),
    );
    let (bursts, paused) = bursts(&calls, &compute_starts);

    // Samples: whole files when every opening's reads stay within one burst.
    let mut bursts_per_file: HashMap<u64, HashSet<usize>> = HashMap::new();
    for r in &reads {
        bursts_per_file
            .entry(r.file)
            .or_default()
            .insert(burst_of(&bursts, r.start));
    }
    let within_one = data
        .files
        .iter()
        .filter(|f| {
            let touched = bursts_per_file.get(f).map_or(0, HashSet::len) as u64;
            let opened = data.totals.get(f).map_or(0, |t| t.opens);
            touched <= opened.max(1)
        })
        .count();
    let whole_files = !paused || within_one * 10 >= data.files.len() * 9;
    let whole_files = whole_files && !opens.is_empty();

    let sizes: Vec<f64> = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.size) as f64)
        .collect();
    let file_sizes = Stats::of(&sizes);
    let num_files = data.files.len() as u64;
    let dataset_bytes: f64 = sizes.iter().sum();
    let shares = size_shares(&reads);
    let dominant = shares.first().map_or(0, |s| s.size);
    let sample_file = data.files.iter().next().map(|f| t.path(*f));
    let (format, format_evidence) = format_of(&data.extension, sample_file, whole_files);

    // Per sample: which burst, which thread; and the epochs' visiting orders.
    let sample_events: Vec<&Rec> = if whole_files {
        opens.clone()
    } else {
        reads
            .iter()
            .copied()
            .filter(|r| r.bytes as u64 == dominant)
            .collect()
    };
    let samples_per_file = if whole_files {
        1
    } else {
        ((file_sizes.median / dominant.max(1) as f64).round() as u64).max(1)
    };
    let samples_in_data_set = (num_files * samples_per_file).max(1);
    let epochs = ((sample_events.len() as f64 / samples_in_data_set as f64).round() as u64).max(1);
    // The mean, not the median: dlio's generator draws sizes around `record_length_bytes`
    // as their mean, and a skewed set of files (lognormal sizes) loses bytes to the median.
    let record_length = if whole_files {
        (file_sizes.mean.round() as u64).saturating_sub(header_bytes(format))
    } else {
        dominant
    };
    let record_stdev = if whole_files { file_sizes.stdev } else { 0.0 };

    param("dataset.format", format.into(), format_evidence);
    param(
        "dataset.num_files_train",
        num_files.to_string(),
        format!(
            "{num_files} files of .{} under {} were read ({} bytes in all)",
            data.extension, data.dir, dataset_bytes as u64
        ),
    );
    param(
        "dataset.num_samples_per_file",
        samples_per_file.to_string(),
        if whole_files {
            "each opening of a data file is read within one step: a sample is a file".into()
        } else {
            format!(
                "files of {} bytes (median) read in requests of {dominant} bytes across many \
                 steps: a sample is one such slice",
                file_sizes.median as u64
            )
        },
    );
    param(
        "dataset.record_length_bytes",
        record_length.to_string(),
        if whole_files {
            format!(
                "mean file size {} bytes (median {}){}",
                file_sizes.mean.round() as u64,
                file_sizes.median as u64,
                match header_bytes(format) {
                    0 => String::new(),
                    h => format!(
                        ", less the {h} bytes dlio's {format} files hold besides the sample (so \
                         that the generated files have this size)"
                    ),
                }
            )
        } else {
            format!(
                "the most frequent data read is {dominant} bytes ({} of {} reads)",
                shares[0].count,
                reads.len()
            )
        },
    );
    if record_stdev > 0.0 {
        param(
            "dataset.record_length_bytes_stdev",
            format!("{}", record_stdev.round()),
            format!(
                "file sizes range from {} to {} bytes",
                file_sizes.min as u64, file_sizes.max as u64
            ),
        );
    } else if whole_files {
        param(
            "dataset.record_dims",
            format!("[{record_length}]"),
            "every data file has the same size: one dimension keeps the generated files exactly \
             that size"
                .into(),
        );
    } else {
        param(
            "dataset.record_dims",
            format!("[{record_length}]"),
            "one dimension of the slice's size: the generated samples are exactly that size \
             (dlio's default shape, a square, would round it down)"
                .into(),
        );
    }
    if !whole_files && matches!(format, "npz" | "npy" | "hdf5" | "jpeg" | "png") {
        param(
            "semantics",
            "upstream".into(),
            format!(
                "samples are slices of {format} files: DLIO's own readers read each sample's \
                 bytes, where MLPerf's fork (dlio's default) reads every byte of a file at each \
                 sample"
            ),
        );
    }

    // Steps and batch.
    let mut per_burst: Vec<u64> = vec![0; bursts.len()];
    for r in &sample_events {
        per_burst[burst_of(&bursts, r.start)] += 1;
    }
    let ahead = readers_ahead(
        &calls,
        &sample_events,
        paused.then(|| (mode(&per_burst), bursts.as_slice())),
    );
    let batch = if let Some(a) = &ahead {
        a.batch
    } else if paused {
        mode(&per_burst).max(1)
    } else {
        notes.push(
            "no compute pauses between the data reads: the program is I/O bound (or computes \
             while it reads), so steps cannot be told apart; batch_size 1 and no compute time"
                .into(),
        );
        1
    };
    let steps_found = match &ahead {
        Some(a) => a.steps,
        None if paused => bursts.len() as u64,
        None => 0,
    };

    // Threads: a sample's reads are on the thread (and process) that opened it.
    let mut threads: BTreeMap<(u32, u32), ReaderThread> = BTreeMap::new();
    for r in &reads {
        let e = threads.entry((r.rank, r.tid)).or_insert(ReaderThread {
            pid: r.rank,
            tid: r.tid,
            reads: 0,
            bytes: 0,
        });
        e.reads += 1;
        e.bytes += r.bytes as u64;
    }
    let reader_threads: Vec<ReaderThread> = threads.into_values().collect();
    // Worker processes that end with each epoch (a DataLoader without persistent workers)
    // are new processes every epoch: the readers are those alive at the same time.
    let processes = concurrent_processes(&reads);
    let only_main = reader_threads.len() == 1 && reader_threads[0].pid == reader_threads[0].tid;
    let read_threads: u64 = if only_main {
        0
    } else if processes > 1 {
        processes as u64
    } else {
        reader_threads.len() as u64
    };
    let batch_of_reads = "the samples opened between two compute pauses";
    param(
        "reader.batch_size",
        batch.to_string(),
        if let Some(a) = &ahead {
            format!(
                "each of {} readers reads {batch} samples in most of its bursts ({} bursts \
                 in all): a reader loads whole batches",
                a.readers, a.reader_bursts
            )
        } else if paused {
            format!(
                "{batch} samples in most of the {} bursts of data reads ({batch_of_reads})",
                bursts.len()
            )
        } else {
            "no compute pauses to group samples by".into()
        },
    );
    param(
        "reader.read_threads",
        read_threads.to_string(),
        if only_main {
            "every data read is on the program's main thread: read_threads 0 reads on the step's \
             own thread"
                .into()
        } else if processes > 1 {
            format!(
                "{processes} processes read data at the same time (worker processes; {} in all)",
                reader_threads
                    .iter()
                    .map(|r| r.pid)
                    .collect::<HashSet<_>>()
                    .len()
            )
        } else {
            format!(
                "{} threads of one process read data ({})",
                reader_threads.len(),
                reader_threads
                    .iter()
                    .map(|r| format!("tid {}: {} reads", r.tid, r.reads))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    );
    if let Some(a) = &ahead {
        param(
            "reader.read_ahead",
            "True".into(),
            "the readers' bursts are staggered, one whole batch each, and go on while the \
             program computes"
                .into(),
        );
        // dlio's reader thread holds ceil(prefetch_size / read_threads) finished batches
        // besides the one it reads.
        let queued = a.prefetch_per_reader.saturating_sub(1).max(1);
        param(
            "reader.prefetch_size",
            (queued * a.readers).to_string(),
            format!(
                "each reader's first burst holds {} batches: the {} in flight per reader (as \
                 PyTorch's prefetch_factor counts them) and the one asked for when the program \
                 took its first; a dlio reader thread keeps {queued} finished besides the one it \
                 reads",
                a.prefetch_per_reader + 1,
                a.prefetch_per_reader
            ),
        );
    } else if read_threads > 0 {
        param(
            "reader.read_ahead",
            if paused { "False" } else { "True" }.into(),
            if paused {
                "no data is read during the compute pauses: each batch is read when its step \
                 starts"
                    .into()
            } else {
                "reads go on while the program computes".into()
            },
        );
    }

    if !whole_files && (opens.len() as u64) * 2 < sample_events.len() as u64 {
        param(
            "reader.read_type",
            "memory".into(),
            format!(
                "{} openings of data files for {} slice reads: files stay open across samples",
                opens.len(),
                sample_events.len()
            ),
        );
    }

    // Order.
    let per_epoch = (sample_events.len() as u64).div_ceil(epochs).max(1) as usize;
    let epoch_orders: Vec<Vec<(u64, i64)>> = sample_events
        .chunks(per_epoch)
        .map(|c| {
            c.iter()
                .map(|r| (r.file, if whole_files { 0 } else { r.offset }))
                .collect()
        })
        .collect();
    let (order, order_evidence) = order_of(&epoch_orders, |(f, off)| {
        format!("{}\u{0}{off:020}", t.path(*f))
    });
    param("reader.file_shuffle", order.into(), order_evidence.clone());
    param("reader.sample_shuffle", order.into(), order_evidence);

    // Request sizes: the same requests for every sample, or a distribution.
    // dlio replays a request pattern only for files it reads whole in one go (up to
    // `dlio_format::CHUNK_BYTES`, 4 MiB); larger files keep a distribution.
    let pattern = if whole_files && file_sizes.max <= WHOLE_READ_LIMIT as f64 {
        common_pattern(&calls, data)
    } else {
        None
    };
    if pattern.as_ref().is_some_and(|(p, _)| p.is_empty()) {
        // Every opening reads its file in one request (or the requests before the rest are
        // not shared): the emulation reads each file whole the same way, and a distribution
        // would split those reads into drawn requests.
    } else if let Some((pattern, share)) = &pattern {
        param(
            "reader.sample_requests",
            pattern
                .iter()
                .map(|&(from_end, offset, size)| {
                    format!(
                        "{{from: {}, offset: {offset}, size: {size}}}",
                        if from_end { "end" } else { "start" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "{:.0}% of the {} file openings read the same {} requests in the same order \
                 (offsets from the file's start, or from its end past the middle)",
                share * 100.0,
                opens.len(),
                pattern.len()
            ),
        );
    } else if shares.len() > 1 {
        param(
            "reader.transfer_size_distribution",
            shares
                .iter()
                .map(|s| format!("{{size: {}, weight: {}}}", s.size, s.count))
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "{} data reads of {} sizes; the median alone ({} bytes) would give other request \
                 counts and sizes",
                reads.len(),
                shares.len(),
                Stats::of(&reads.iter().map(|r| r.bytes as f64).collect::<Vec<_>>()).median
            ),
        );
    } else if whole_files && dominant > 0 && (dominant as f64) < file_sizes.median {
        param(
            "reader.transfer_size",
            dominant.to_string(),
            format!("every data read is {dominant} bytes"),
        );
    }

    // Time: compute between bursts, the loader's own time per sample inside them.
    let compute: Vec<f64> = bursts
        .windows(2)
        .map(|w| secs(w[1].start - w[0].end))
        .collect();
    let fetch: Vec<f64> = bursts.iter().map(|b| secs(b.end - b.start)).collect();
    let compute_s = match &ahead {
        Some(a) => Stats::of(&vec![a.period_s; a.steps as usize]),
        None if paused => Stats::of(&compute),
        None => Stats::default(),
    };
    let fetch_s = Stats::of(&fetch);
    param(
        "train.epochs",
        epochs.to_string(),
        format!(
            "{} samples read for {} in the data set",
            sample_events.len(),
            samples_in_data_set
        ),
    );
    if let Some(a) = &ahead {
        param(
            "train.computation_time",
            format!("{:.6}", a.period_s),
            format!(
                "{} steps from the first to the last data read in {:.3} s: a step every \
                 {:.3} ms, while the readers, busy {:.0}% of the time, keep ahead",
                a.steps,
                secs(window_end - window_start),
                a.period_s * 1e3,
                a.busy_share * 100.0
            ),
        );
        if a.per_sample_s >= MIN_PREPROCESS_S {
            param(
                "reader.preprocess_time",
                format!("{:.6}", a.per_sample_s),
                format!(
                    "a reader's burst of {batch} samples holds {:.3} ms between two samples \
                     outside the I/O calls: the loader's own work (decoding, the interpreter)",
                    a.per_sample_s * 1e3
                ),
            );
        }
        if a.busy_share > 0.9 {
            notes.push(format!(
                "the readers were busy {:.0}% of the time: the program may be I/O bound, and \
                 its compute per step shorter than the step period written",
                a.busy_share * 100.0
            ));
        }
    } else if paused {
        // Inside a burst: each of `lanes` reading threads reads `k` samples; the time outside
        // the I/O calls between them is the loader's own work per sample (decoding, the
        // interpreter). A burst ends with the last sample's I/O, so it holds k - 1 of those
        // stretches per lane; the emulation sleeps one after every sample, and the last one
        // falls in what the trace shows as the pause, which is shortened by as much.
        let io_in_calls: f64 = calls.iter().map(|r| secs(r.end - r.start)).sum();
        let samples = sample_events.len().max(1) as f64;
        let lanes = (read_threads.max(1)).min(batch) as f64;
        let k = batch as f64 / lanes;
        let io_per_sample = io_in_calls / samples;
        let per_sample = if k >= 2.0 {
            ((fetch_s.mean - k * io_per_sample) / (k - 1.0)).max(0.0)
        } else {
            0.0
        };
        let per_sample = if per_sample >= MIN_PREPROCESS_S {
            per_sample
        } else {
            0.0
        };
        let mean = (compute_s.mean - per_sample).max(0.0);
        let value = if compute_s.stdev > 0.05 * mean {
            format!("{{mean: {mean:.6}, stdev: {:.6}}}", compute_s.stdev)
        } else {
            format!("{mean:.6}")
        };
        param(
            "train.computation_time",
            value,
            format!(
                "{} pauses without data I/O between bursts: mean {:.3} ms, stdev {:.3} ms (the \
                 median pause inside a burst is shorter by {MIN_GAP_RATIO}x or more){}",
                compute_s.count,
                compute_s.mean * 1e3,
                compute_s.stdev * 1e3,
                if per_sample > 0.0 {
                    format!(
                        ", less one sample's loader time ({:.3} ms)",
                        per_sample * 1e3
                    )
                } else {
                    String::new()
                }
            ),
        );
        if per_sample > 0.0 {
            param(
                "reader.preprocess_time",
                format!("{per_sample:.6}"),
                format!(
                    "bursts last {:.3} ms (mean) for {k} samples on each of {} reading threads, \
                     {:.3} ms of I/O calls per sample: {:.3} ms between two samples is the \
                     loader's own work (decoding, the interpreter)",
                    fetch_s.mean * 1e3,
                    lanes as u64,
                    io_per_sample * 1e3,
                    per_sample * 1e3
                ),
            );
        }
    }

    // Side files and writes during training: every other file's calls in the window, in one
    // pass over the trace.
    #[derive(Default)]
    struct During {
        opens: u64,
        read_bytes: u64,
        written: u64,
        writes: u64,
    }
    let mut during: HashMap<u64, During> = HashMap::new();
    for r in t.io() {
        if r.start < window_start || r.start > window_end || data.holds(r.file) {
            continue;
        }
        let d = during.entry(r.file).or_default();
        match op(r) {
            Op::Open => d.opens += 1,
            Op::Read if r.bytes > 0 => d.read_bytes += r.bytes as u64,
            Op::Write => {
                d.writes += 1;
                d.written += r.bytes.max(0) as u64;
            }
            _ => {}
        }
    }
    let mut side_files = Vec::new();
    let mut written = Vec::new();
    let total_steps = (steps_found.max(1)) as f64;
    for (hash, d) in &during {
        let path = t.path(*hash);
        if is_system_path(path) {
            continue;
        }
        let size = data.totals.get(hash).map_or(0, |f| f.size);
        let (opened, read_bytes) = (d.opens, d.read_bytes);
        if opened >= 2 && read_bytes > 0 {
            let name = match path.strip_prefix(&format!("{}/", data.dir)) {
                Some(rest) => rest.to_string(),
                None => format!("side/{}", path.rsplit('/').next().unwrap_or("side.bin")),
            };
            side_files.push(SideFileRow {
                path: path.to_string(),
                name,
                size: size.max(read_bytes / opened),
                reads: opened,
                every_steps: ((total_steps / opened as f64).round() as u64).max(1),
            });
        }
        // Writes of a few bytes (lock files, the interpreter's temporary files) are not
        // checkpoints.
        if d.written >= MIN_WRITTEN_BYTES {
            written.push(WrittenFile {
                path: path.to_string(),
                bytes: d.written,
                writes: d.writes,
            });
        }
    }
    side_files.sort_by(|a, b| a.path.cmp(&b.path));
    written.sort_by(|a, b| a.path.cmp(&b.path));
    if !side_files.is_empty() {
        param(
            "dataset.side_files",
            side_files
                .iter()
                .map(|s| {
                    format!(
                        "{{name: {}, size_bytes: {}, every_steps: {}}}",
                        yaml_string(&s.name),
                        s.size,
                        s.every_steps
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
            side_files
                .iter()
                .map(|s| format!("{} read {} times in {} steps", s.path, s.reads, steps_found))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    if !written.is_empty() {
        match checkpoints_of(t, &written, &bursts, paused && ahead.is_none()) {
            Some(ck) => {
                param(
                    "workflow.checkpoint",
                    "True".into(),
                    format!(
                        "{} files written while training, {} bytes in all",
                        written.len(),
                        written.iter().map(|w| w.bytes).sum::<u64>()
                    ),
                );
                param(
                    "checkpoint.steps_between_checkpoints",
                    ck.every_steps.to_string(),
                    format!(
                        "writes after steps {}: one checkpoint every {} steps",
                        ck.after_steps
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        ck.every_steps
                    ),
                );
                param(
                    "model.model_size_bytes",
                    ck.bytes.to_string(),
                    format!(
                        "{} bytes written per checkpoint (median): dlio saves them as one flat \
                         model-state tensor per rank",
                        ck.bytes
                    ),
                );
            }
            None => notes.push(format!(
                "{} files were written while training ({} bytes: {}), at no step rhythm that \
                 could be read off; set up checkpointing (checkpoint.*) to emulate them",
                written.len(),
                written.iter().map(|w| w.bytes).sum::<u64>(),
                written
                    .iter()
                    .take(3)
                    .map(|w| w.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    if shares.len() > 1 && pattern.is_none() {
        notes.push(
            "request sizes are drawn per request from the distribution; the order of a \
             program's requests inside a file (a zip's directory before its data) is not \
             replayed"
                .into(),
        );
    }

    let events = t.events.len() as u64;
    let mut c = Characterization {
        traces: t.inputs.clone(),
        events,
        data_dir: data.dir.clone(),
        parameters: params,
        data_files: num_files,
        file_sizes,
        transfer_sizes: shares,
        steps: steps_found,
        compute_s,
        fetch_s,
        step_fetch_s: fetch,
        step_compute_s: if paused { compute } else { Vec::new() },
        side_files,
        written,
        reader_threads,
        notes,
        workload_yaml: String::new(),
    };
    c.workload_yaml = workload_yaml(&c);
    c
}

/// Readers that run ahead of the program, as a framework loader's workers do: each reader
/// loads whole batches in bursts of its own, staggered with the others'.
struct Ahead {
    readers: u64,
    reader_bursts: u64,
    batch: u64,
    steps: u64,
    prefetch_per_reader: u64,
    period_s: f64,
    per_sample_s: f64,
    /// The readers' bursts' total length over readers and the training window.
    busy_share: f64,
}

/// [`Ahead`] when two or more readers each read whole batches in bursts of their own. When all
/// reads together pause too, the samples in most of a reader's bursts must be the samples in
/// most bursts of all reads (`samples_per_burst`): a pool that splits each batch over its
/// threads has each thread read only its share.
fn readers_ahead(
    calls: &[&Rec],
    samples: &[&Rec],
    global: Option<(u64, &[Burst])>,
) -> Option<Ahead> {
    let samples_per_burst = global.map(|g| g.0);
    let mut by_reader: BTreeMap<(u32, u32), Vec<&Rec>> = BTreeMap::new();
    for r in calls {
        by_reader.entry((r.rank, r.tid)).or_default().push(r);
    }
    let mut samples_of: BTreeMap<(u32, u32), Vec<&Rec>> = BTreeMap::new();
    for r in samples {
        samples_of.entry((r.rank, r.tid)).or_default().push(r);
    }
    if samples_of.len() < 2 {
        return None;
    }
    let mut counts = Vec::new();
    let mut firsts = Vec::new();
    let mut per_reader_bursts: Vec<Vec<Burst>> = Vec::new();
    let mut busy = 0i64;
    let mut gaps_inside = 0.0;
    let mut bursts_seen = 0u64;
    for (reader, own) in &samples_of {
        let (rb, paused) = bursts(by_reader.get(reader)?, &[]);
        if !paused {
            return None;
        }
        let mut per = vec![0u64; rb.len()];
        for r in own {
            per[burst_of(&rb, r.start)] += 1;
        }
        firsts.push(per[0]);
        counts.extend(per.iter().copied());
        busy += rb.iter().map(|b| b.end - b.start).sum::<i64>();
        gaps_inside += rb
            .iter()
            .map(|b| secs(b.end - b.start - b.busy))
            .sum::<f64>();
        bursts_seen += rb.len() as u64;
        per_reader_bursts.push(rb);
    }
    let batch = mode(&counts).max(1);
    if samples_per_burst.is_some_and(|n| n != batch) || batch < 2 {
        return None;
    }
    // A pool whose threads share each batch has several readers at each step (the step waits
    // for all of them before its compute); readers that run ahead read a batch each, alone,
    // taking turns. Told apart by who reads together, which a busy machine does not change:
    // it stretches and shifts the threads' bursts, not the step's wait for all of them.
    let lockstep = lockstep_share(&per_reader_bursts);
    let shared = match global {
        Some((_, all)) => lockstep.max(shared_burst_share(all, calls)),
        None => lockstep,
    };
    if shared > 0.5 {
        return None;
    }
    // Readers that run ahead load more than one batch before the program's first step (each
    // worker its prefetch, all at once); a pool loads the first step's batch, then waits for
    // the next step. On a busy machine one thread of a pool may take a whole batch, a
    // different thread each step, which looks like workers taking turns: the start tells.
    if initial_samples(samples, batch) <= batch + batch / 2 {
        return None;
    }
    let steps = ((samples.len() as f64 / batch as f64).round() as u64).max(1);
    let start = calls.first()?.start;
    let end = calls.iter().map(|r| r.end).max()?;
    let readers = samples_of.len() as u64;
    firsts.sort_unstable();
    let first = firsts[firsts.len() / 2];
    Some(Ahead {
        readers,
        reader_bursts: bursts_seen,
        batch,
        steps,
        // The first burst holds the batches asked for at the start plus the one asked for
        // when the program took the first (it waits for it, so that comes at once).
        prefetch_per_reader: ((first as f64 / batch as f64).round() as u64)
            .saturating_sub(1)
            .max(1),
        period_s: secs(end - start) / steps as f64,
        per_sample_s: gaps_inside / (bursts_seen as f64 * (batch - 1) as f64).max(1.0),
        busy_share: busy as f64 / readers as f64 / (end - start).max(1) as f64,
    })
}

/// The most processes reading data at one time, each from its first data read to its last.
fn concurrent_processes(reads: &[&Rec]) -> usize {
    let mut span: HashMap<u32, (i64, i64)> = HashMap::new();
    for r in reads {
        let s = span.entry(r.rank).or_insert((r.start, r.end));
        s.0 = s.0.min(r.start);
        s.1 = s.1.max(r.end);
    }
    // Ends sort before starts at the same instant: a worker that ends as the next begins is
    // not counted with it.
    let mut edges: Vec<(i64, i32)> = span
        .values()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    edges.sort_unstable();
    let (mut alive, mut most) = (0i32, 0i32);
    for (_, change) in edges {
        alive += change;
        most = most.max(alive);
    }
    most.max(0) as usize
}

/// The samples read in the first step period, less a tenth (the period: the time from the
/// first sample to the last over the steps between them, at `batch` samples a step): a
/// loader that runs ahead fills its prefetch then (several batches), a pool reads one batch
/// and computes.
fn initial_samples(samples: &[&Rec], batch: u64) -> u64 {
    let (Some(first), Some(last)) = (
        samples.iter().map(|r| r.start).min(),
        samples.iter().map(|r| r.start).max(),
    ) else {
        return 0;
    };
    let steps = (samples.len() as u64 / batch.max(1)).max(2);
    let period = (last - first) / (steps as i64 - 1);
    samples
        .iter()
        .filter(|r| r.start < first + period * 9 / 10)
        .count() as u64
}

/// The share of the bursts of all reads (`all`) in which more than one reader (process and
/// thread) made a data call.
fn shared_burst_share(all: &[Burst], calls: &[&Rec]) -> f64 {
    if all.is_empty() {
        return 0.0;
    }
    let mut readers: Vec<HashSet<(u32, u32)>> = vec![HashSet::new(); all.len()];
    for r in calls {
        readers[burst_of(all, r.start)].insert((r.rank, r.tid));
    }
    readers.iter().filter(|r| r.len() > 1).count() as f64 / all.len() as f64
}

/// The share of the moments of reading in which more than one reader reads: the readers' own
/// bursts (`per_reader`), merged where one starts within a quarter of a turn of the one
/// before ends (a turn: a reader's median time between its bursts over the number of readers,
/// the time between two readers' bursts when they take turns). A pool's threads read at every
/// step together (share near 1), workers that run ahead one at a time (near 0).
fn lockstep_share(per_reader: &[Vec<Burst>]) -> f64 {
    if per_reader.len() < 2 {
        return 0.0;
    }
    let mut periods: Vec<i64> = per_reader
        .iter()
        .filter_map(|own| {
            let mut gaps: Vec<i64> = own.windows(2).map(|w| w[1].start - w[0].start).collect();
            gaps.sort_unstable();
            gaps.get(gaps.len() / 2).copied()
        })
        .collect();
    if periods.is_empty() {
        return 0.0;
    }
    periods.sort_unstable();
    let turn = periods[periods.len() / 2] / per_reader.len() as i64;
    let slack = turn / 4;
    let mut all: Vec<(i64, i64, usize)> = per_reader
        .iter()
        .enumerate()
        .flat_map(|(i, own)| own.iter().map(move |b| (b.start, b.end, i)))
        .collect();
    all.sort_unstable();
    let (mut moments, mut shared) = (0usize, 0usize);
    let mut current: Option<(i64, HashSet<usize>)> = None;
    for (start, end, reader) in all {
        match &mut current {
            Some((until, readers)) if start <= *until + slack => {
                *until = (*until).max(end);
                readers.insert(reader);
            }
            _ => {
                if let Some((_, readers)) = current.take() {
                    moments += 1;
                    shared += usize::from(readers.len() > 1);
                }
                current = Some((end, HashSet::from([reader])));
            }
        }
    }
    if let Some((_, readers)) = current {
        moments += 1;
        shared += usize::from(readers.len() > 1);
    }
    shared as f64 / moments.max(1) as f64
}

/// One read of a file opening: from the end?, offset from that end, bytes.
type PatternStep = (bool, u64, u64);

/// Whether the last request of an opening read from the start reaches its file's end: its
/// offset and size are what is left of the file after the requests before it, read in order
/// from the start (a header, then the rest).
fn reads_to_end(p: &[PatternStep]) -> bool {
    let mut at = 0u64;
    for &(from_end, offset, size) in &p[..p.len() - 1] {
        if from_end || offset != at {
            return false;
        }
        at = offset + size;
    }
    matches!(p.last(), Some(&(false, offset, _)) if offset == at)
}

/// The request sequence most file openings make (each read as from the start, or from the end
/// when it starts past the middle, and its size), with the share of openings that make it;
/// `None` when fewer than 80% share one.
fn common_pattern(calls: &[&Rec], data: &DataSet) -> Option<(Vec<PatternStep>, f64)> {
    type Pattern = Vec<PatternStep>;
    // An opening is followed per process, thread and file rather than per descriptor: a
    // library may read through a copy of the descriptor (numpy's `fread` on a dup'd one).
    let mut open: HashMap<(u32, u32, u64), Pattern> = HashMap::new();
    let mut done: Vec<Pattern> = Vec::new();
    for r in calls {
        let key = (r.rank, r.tid, r.file);
        match op(r) {
            Op::Open if r.fd >= 0 => {
                if let Some(p) = open.insert(key, Vec::new()) {
                    done.push(p);
                }
            }
            Op::Read if r.bytes > 0 && r.offset >= 0 => {
                let size = data.totals.get(&r.file).map_or(0, |t| t.size);
                let offset = r.offset as u64;
                if let Some(p) = open.get_mut(&key) {
                    p.push(if offset > size / 2 {
                        (true, size.saturating_sub(offset), r.bytes as u64)
                    } else {
                        (false, offset, r.bytes as u64)
                    });
                }
            }
            Op::Close => {
                if let Some(p) = open.remove(&key) {
                    done.push(p);
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_values());
    done.retain(|p| !p.is_empty());
    if done.len() < 2 {
        return None;
    }
    // A last request that goes on where the requests before it, all read in order from the
    // start, stopped is "the rest": the emulation reads what the listed requests left unread
    // in one request, so files of different sizes share the pattern of their first requests
    // (np.load of an npy: the header, then the rest in one read).
    for p in &mut done {
        if reads_to_end(p) {
            p.pop();
        }
    }
    let mut counts: HashMap<&Pattern, usize> = HashMap::new();
    for p in &done {
        *counts.entry(p).or_default() += 1;
    }
    let (best, n) = counts.into_iter().max_by_key(|(p, n)| (*n, p.len()))?;
    let share = n as f64 / done.len() as f64;
    (share >= 0.8).then(|| (best.clone(), share))
}

/// Checkpoints read off the writes during training.
struct Checkpoints {
    /// 1-based steps after which writes happened.
    after_steps: Vec<u64>,
    every_steps: u64,
    /// Bytes written per checkpoint (median).
    bytes: u64,
}

/// The writes to `written` grouped by the step they follow (the last burst that started before
/// them); `None` without steps, or when they follow no regular rhythm of two or more.
fn checkpoints_of(
    t: &Timeline,
    written: &[WrittenFile],
    bursts: &[Burst],
    steps_known: bool,
) -> Option<Checkpoints> {
    if !steps_known || bursts.is_empty() {
        return None;
    }
    let paths: HashSet<&str> = written.iter().map(|w| w.path.as_str()).collect();
    let mut per_step: BTreeMap<u64, u64> = BTreeMap::new();
    for r in t.io() {
        if op(r) == Op::Write && r.bytes > 0 && paths.contains(t.path(r.file)) {
            *per_step
                .entry(burst_of(bursts, r.start) as u64 + 1)
                .or_default() += r.bytes as u64;
        }
    }
    let after_steps: Vec<u64> = per_step.keys().copied().collect();
    let gaps: Vec<u64> = after_steps.windows(2).map(|w| w[1] - w[0]).collect();
    let every_steps = mode(&gaps);
    if every_steps == 0 || gaps.iter().filter(|&&g| g == every_steps).count() * 2 < gaps.len() {
        return None;
    }
    let mut sizes: Vec<u64> = per_step.values().copied().collect();
    sizes.sort_unstable();
    Some(Checkpoints {
        after_steps,
        every_steps,
        bytes: sizes[sizes.len() / 2],
    })
}

/// The most frequent value (the largest on ties); 0 when empty.
fn mode(values: &[u64]) -> u64 {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for v in values {
        *counts.entry(*v).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(v, n)| (*n, *v))
        .map_or(0, |(v, _)| v)
}

fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

/// The workload YAML: the derived keys grouped by section, each with its evidence as a
/// comment above it.
fn workload_yaml(c: &Characterization) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Derived by `dlio characterize` from {} trace files ({} events); data set in {}.",
        c.traces.len(),
        c.events,
        c.data_dir
    );
    for note in &c.notes {
        let _ = writeln!(out, "# Note: {note}");
    }
    let value_of = |key: &str| c.parameters.iter().find(|p| p.key == key);
    out.push_str("model:\n  name: characterized\n");
    if let Some(p) = value_of("model.model_size_bytes") {
        let _ = writeln!(out, "  # {}\n  model_size_bytes: {}", p.evidence, p.value);
    }
    out.push_str("framework: pytorch\n");
    for p in c.parameters.iter().filter(|p| !p.key.contains('.')) {
        let _ = writeln!(
            out,
            "# {}\n{}: {}",
            p.evidence.replace('\n', " "),
            p.key,
            p.value
        );
    }
    out.push_str("workflow:\n  generate_data: True\n  train: True\n");
    match value_of("workflow.checkpoint") {
        Some(p) => {
            let _ = writeln!(out, "  # {}\n  checkpoint: {}", p.evidence, p.value);
        }
        None => out.push_str("  checkpoint: False\n"),
    }
    let mut section = "";
    let mut extra: Vec<(&str, String)> = vec![
        ("dataset", "  data_folder: data/characterized\n".into()),
        ("reader", "  data_loader: pytorch\n".into()),
    ];
    const SECTIONS: [&str; 4] = ["dataset", "reader", "train", "checkpoint"];
    let mut ordered: Vec<&Parameter> = c
        .parameters
        .iter()
        .filter(|p| {
            p.key.contains('.') && !p.key.starts_with("model.") && !p.key.starts_with("workflow.")
        })
        .collect();
    ordered.sort_by_key(|p| {
        let sec = p.key.split_once('.').map_or("", |(s, _)| s);
        SECTIONS
            .iter()
            .position(|s| *s == sec)
            .unwrap_or(SECTIONS.len())
    });
    for p in ordered {
        let (sec, key) = p.key.split_once('.').unwrap_or(("", &p.key));
        if sec != section {
            let _ = writeln!(out, "{sec}:");
            section = sec;
            if let Some(i) = extra.iter().position(|(s, _)| *s == sec) {
                out.push_str(&extra.remove(i).1);
            }
        }
        let _ = writeln!(out, "  # {}", p.evidence.replace('\n', " "));
        if matches!(
            p.key.as_str(),
            "reader.transfer_size_distribution" | "reader.sample_requests" | "dataset.side_files"
        ) {
            let _ = writeln!(out, "  {key}:");
            for entry in p.value.split("}, ") {
                let entry = entry.trim_end_matches('}');
                let _ = writeln!(out, "    - {entry}}}");
            }
        } else {
            let _ = writeln!(out, "  {key}: {}", yaml_1_1_safe(&p.value));
        }
    }
    out
}

/// `value`, quoted when a YAML 1.1 reader (PyYAML, so OmegaConf and Python DLIO) would take
/// the bare word for a boolean: `file_shuffle: off` is `False` there.
fn yaml_1_1_safe(value: &str) -> String {
    const BOOLEAN_WORDS: [&str; 8] = ["off", "on", "yes", "no", "y", "n", "true", "false"];
    if BOOLEAN_WORDS.contains(&value.to_ascii_lowercase().as_str())
        && !matches!(value, "True" | "False")
    {
        format!("\"{value}\"")
    } else {
        value.to_string()
    }
}

/// The characterisation for a terminal.
pub fn render_characterization(c: &Characterization) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Characterised {} trace files ({} events); data set: {} files in {}",
        c.traces.len(),
        c.events,
        c.data_files,
        c.data_dir
    );
    let _ = writeln!(o, "\n{:<38} {:<24} evidence", "key", "value");
    for p in &c.parameters {
        let value = if p.value.len() > 24 {
            format!("{}...", &p.value[..21])
        } else {
            p.value.clone()
        };
        let _ = writeln!(o, "{:<38} {:<24} {}", p.key, value, p.evidence);
    }
    let _ = writeln!(
        o,
        "\nsteps found: {}; loading per step {:.3} ms (mean), compute {:.3} ms (mean, stdev {:.3})",
        c.steps,
        c.fetch_s.mean * 1e3,
        c.compute_s.mean * 1e3,
        c.compute_s.stdev * 1e3
    );
    let _ = writeln!(o, "request sizes (data reads):");
    let total: u64 = c.transfer_sizes.iter().map(|s| s.count).sum();
    for s in &c.transfer_sizes {
        let _ = writeln!(
            o,
            "  {:>12} bytes  {:>8} reads  {:>5.1}%",
            s.size,
            s.count,
            100.0 * s.count as f64 / total.max(1) as f64
        );
    }
    for s in &c.side_files {
        let _ = writeln!(
            o,
            "side file: {} ({} bytes) read {} times, every {} steps",
            s.path, s.size, s.reads, s.every_steps
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

/// The files [`write_characterization`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharacterizationFiles {
    /// The workload YAML.
    pub yaml: PathBuf,
    /// `characterize.json` beside it.
    pub json: PathBuf,
    /// `characterize.html` beside it.
    pub html: PathBuf,
}

/// Writes `bytes` at `path`, making its folder first.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), AnalyzeError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| AnalyzeError::Io {
            op: "write",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    crate::report::write(path, bytes)
}

/// Writes the workload YAML at `yaml`, and `characterize.json` and `characterize.html` (the
/// parameters with their evidence, request sizes, per-step loading and compute plotted) beside
/// it.
pub fn write_characterization(
    c: &Characterization,
    yaml: &Path,
) -> Result<CharacterizationFiles, AnalyzeError> {
    let dir = yaml
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let json = dir.join("characterize.json");
    let html = dir.join("characterize.html");
    write_file(yaml, c.workload_yaml.as_bytes())?;
    let text = serde_json::to_vec_pretty(c).map_err(|e| AnalyzeError::Io {
        op: "write",
        path: json.clone(),
        source: e.into(),
    })?;
    write_file(&json, &text)?;

    let steps = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, s)| ((i + 1) as f64, s * 1e3))
            .collect()
    };
    let per_step = crate::plots::lines_svg(
        "Per step: loading (burst of data reads) and compute (pause after it)",
        "step",
        "milliseconds",
        &[
            crate::plots::Series {
                label: "compute",
                points: steps(&c.step_compute_s),
            },
            crate::plots::Series {
                label: "loading",
                points: steps(&c.step_fetch_s),
            },
        ],
    )?;
    let total: u64 = c.transfer_sizes.iter().map(|s| s.count).sum::<u64>().max(1);
    let mut sizes = c.transfer_sizes.clone();
    sizes.sort_by_key(|s| s.size);
    let mut cumulative = 0u64;
    let cdf: Vec<(f64, f64)> = sizes
        .iter()
        .map(|s| {
            cumulative += s.count;
            ((s.size as f64).log2(), cumulative as f64 / total as f64)
        })
        .collect();
    let size_plot = crate::plots::lines_svg(
        "Data read sizes: share of requests at or below each size",
        "log2(request bytes)",
        "share of requests",
        &[crate::plots::Series {
            label: "requests",
            points: cdf,
        }],
    )?;

    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dlio characterize</title>\n<style>\
         body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f4f4f4}\
         pre{background:#f8f8f8;padding:1em}</style></head><body>\n<h1>dlio characterize</h1>\n",
    );
    let _ = writeln!(
        h,
        "<p>{} trace files, {} events; data set: {} files in <code>{}</code>; {} steps found.</p>",
        c.traces.len(),
        c.events,
        c.data_files,
        escape(&c.data_dir),
        c.steps
    );
    h.push_str(
        "<h2>Derived parameters</h2><table><tr><th>key</th><th>value</th><th>evidence</th></tr>\n",
    );
    for p in &c.parameters {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>",
            escape(&p.key),
            escape(&p.value),
            escape(&p.evidence)
        );
    }
    h.push_str("</table>\n");
    for n in &c.notes {
        let _ = writeln!(h, "<p><b>Note:</b> {}</p>", escape(n));
    }
    h.push_str("<h2>Request sizes of the data reads</h2><table><tr><th>bytes</th><th>reads</th><th>share</th></tr>\n");
    for s in &c.transfer_sizes {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            s.size,
            s.count,
            100.0 * s.count as f64 / total as f64
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<figure>{size_plot}</figure>\n<figure>{per_step}</figure>"
    );
    if !c.side_files.is_empty() {
        h.push_str("<h2>Side files</h2><table><tr><th>path</th><th>bytes</th><th>reads</th><th>every (steps)</th></tr>\n");
        for s in &c.side_files {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&s.path),
                s.size,
                s.reads,
                s.every_steps
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h2>Reader threads</h2><table><tr><th>pid</th><th>tid</th><th>reads</th><th>bytes</th></tr>\n");
    for r in &c.reader_threads {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.pid, r.tid, r.reads, r.bytes
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<h2>Workload</h2><pre>{}</pre>\n</body></html>",
        escape(&c.workload_yaml)
    );
    write_file(&html, h.as_bytes())?;
    Ok(CharacterizationFiles {
        yaml: yaml.to_path_buf(),
        json,
        html,
    })
}
