//! `dlio characterize TRACE_DIR`: from the trace of a real training program (written by
//! `dlio trace`, or by dftracer) to a DLIO workload, each parameter with the evidence it was
//! read from.
//!
//! How the trace is read, in order:
//! 1. **Data files**: the files read outside the interpreter's and the system's own folders
//!    (`/usr`, `site-packages`, `*.py`, ...), grouped by folder; the folder that delivered the
//!    most bytes holds the data set, with the class folders beside it (read interleaved with
//!    it, or in turn when none is named as a split), and its files of the dominant extension
//!    are the data files (`--data-dir` names the folder instead). Other files read during
//!    training more than once are side files; files written during training are checkpoints.
//! 2. **Steps**: the intervals in which some data-file call is in progress are merged; the
//!    pauses between them fall into levels (jumps of 2x between sorted neighbours); the top
//!    level whose median is at least [`MIN_GAP_RATIO`] times the level below is the compute
//!    between steps, the bursts between its pauses the steps' loading. No such level: the
//!    program reads without pause (I/O bound) and steps cannot be told apart.
//! 3. **Samples**: when each opening of a data file is read within one burst, a sample is a
//!    file (files read whole; also when several openings read a file in a burst, a range
//!    each); otherwise the structure of the reads decides (records that tile a file, stored
//!    chunks read again and again, rows through a sieve, records of a stream, row groups),
//!    and failing those a sample is a read of the dominant request size (slices of large
//!    files).
//! 4. The rest follows: epochs (how often each sample was read), batch (samples per burst),
//!    threads (which threads and processes read data), whether reads overlap compute, order
//!    (sorted, one shuffle, a shuffle per epoch), request sizes (a distribution when there is
//!    more than one), compute per step and per-sample loader time (the bursts' time outside
//!    the I/O calls, e.g. Python decoding).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::AnalyzeError;
use crate::event::Op;
use crate::ingest::Rec;
use crate::timeline::{Timeline, load, op};

mod buffered;
mod consumer;
mod eval;
mod output;
mod readers;
mod requests;
mod samples;
mod stream;
mod timing;
mod trace_view;
mod writes;

pub(crate) use consumer::{Consumer, find_consumer};
pub use output::{CharacterizationFiles, render_characterization, write_characterization};
use trace_view::Burst;
pub(crate) use trace_view::{DataSet, bursts, data_calls, is_system_path, writes_where};
pub(crate) use trace_view::{compute_ends, compute_starts};

/// The shortest ratio between the median compute pause and the median of the level of pauses
/// below it (the program's work between samples) for the pauses to count as compute.
pub const MIN_GAP_RATIO: f64 = 3.0;

/// The shortest jump between two neighbouring sorted pauses that separates two levels.
const MIN_JUMP_RATIO: f64 = 2.0;

/// The shortest per-sample loader time written as `reader.preprocess_time`. The emulation
/// spends it busy on a core (`reader.preprocess_work: cpu`), which keeps times far shorter
/// than a sleep's slack (about 50 us); under a few microseconds it is the clock readings.
const MIN_PREPROCESS_S: f64 = 5e-6;

/// The fewest bytes written to a file during training for it to count as a checkpoint.
const MIN_WRITTEN_BYTES: u64 = 64 << 10;

/// Most request sizes kept in a transfer-size distribution (more are binned by quantiles).
const MAX_SIZES: usize = 16;

/// The largest file a request pattern (`reader.sample_requests`) may shape: dlio reads such
/// files whole in one request.
const WHOLE_READ_LIMIT: u64 = dlio_format::WHOLE_READ_MAX_BYTES;

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

/// A note when the workload found would replay for many times as long as the traced
/// training did (its steps' compute, or its samples' loader time over the readers): a sign
/// that the samples or the batch were misread (a slice taken for a sample, one sample per
/// burst), which a user should know before running it.
fn replay_out_of_proportion(
    found: &Found,
    samples: &samples::Samples,
    readers: &readers::Readers,
    activity: &Activity,
    time: &timing::Timing,
) -> Option<String> {
    let seconds_of = |key: &str| {
        found
            .params
            .iter()
            .find(|p| p.key == key)
            .and_then(|p| p.value.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let samples_replayed = samples.per_epoch() * samples.epochs * samples.unit_rows.max(1);
    let ReplayLength {
        steps,
        compute_s,
        loader_s,
    } = ReplayLength::of(
        samples_replayed,
        readers.batch,
        time.compute_s.mean,
        seconds_of("reader.preprocess_time"),
        readers.read_threads,
    );
    let replay_s = compute_s.max(loader_s);
    let traced_s = secs(activity.run_end - activity.window.0);
    (replay_s > 5.0 * traced_s + 1.0).then(|| {
        format!(
            "the replay would last about {replay_s:.0} s ({steps:.0} steps of {:.3} ms of \
             compute, {:.0} s of loader time over {} readers), {:.0} times the {traced_s:.1} s \
             the program trained for: the samples or the batch found are likely wrong (see the \
             evidence of dataset.num_samples_per_file and reader.batch_size)",
            time.compute_s.mean * 1e3,
            loader_s,
            readers.read_threads.max(1),
            replay_s / traced_s.max(1e-9)
        )
    })
}

/// How long a replay lasts at the least: its steps' compute, and its samples' loader time
/// spread over its readers.
#[derive(Debug, PartialEq)]
struct ReplayLength {
    steps: f64,
    compute_s: f64,
    loader_s: f64,
}

impl ReplayLength {
    fn of(samples: u64, batch: u64, compute_s: f64, preprocess_s: f64, readers: u64) -> Self {
        let steps = (samples as f64 / batch.max(1) as f64).max(1.0);
        ReplayLength {
            steps,
            compute_s: steps * compute_s,
            loader_s: samples as f64 * preprocess_s / readers.max(1) as f64,
        }
    }
}

/// Whether no process has two threads that read data: each reading process's own work
/// (between its reads) then takes a core of its own, where threads of one Python process take
/// turns on its interpreter.
fn one_thread_per_process(threads: &[ReaderThread]) -> bool {
    let mut pids: Vec<u32> = threads.iter().map(|t| t.pid).collect();
    pids.sort_unstable();
    pids.windows(2).all(|w| w[0] != w[1])
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

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
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

/// The parameters a section of the characterisation derived, each with its evidence, and what
/// it could not settle.
#[derive(Debug, Default)]
struct Found {
    params: Vec<Parameter>,
    notes: Vec<String>,
}

impl Found {
    fn param(&mut self, key: &str, value: String, evidence: String) {
        self.params.push(Parameter {
            key: key.into(),
            value,
            evidence,
        });
    }

    /// Whether a value was found for `key`.
    fn has(&self, key: &str) -> bool {
        self.params.iter().any(|p| p.key == key)
    }

    /// The value found for `key`, the last when several were.
    fn value(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Appends another section's parameters and notes after this one's.
    fn append(&mut self, other: Found) {
        self.params.extend(other.params);
        self.notes.extend(other.notes);
    }
}

/// The data-file calls of the training window and how they group into steps: what every
/// section reads.
struct Activity<'t> {
    /// Calls on data files from the first data read's opening to the end of the last read.
    calls: Vec<&'t Rec>,
    /// The reads among them that moved bytes.
    reads: Vec<&'t Rec>,
    /// The openings among them.
    opens: Vec<&'t Rec>,
    /// Start of the first call and end of the last, nanoseconds.
    window: (i64, i64),
    /// The bursts of data calls (one per step when `paused`).
    bursts: Vec<Burst>,
    /// Whether compute pauses (or compute spans, or a consumer's takes) separate the bursts
    /// into steps.
    paused: bool,
    /// The process that takes the batches, when worker processes read them.
    consumer: Option<Consumer>,
    /// The data set was read once, whole, before training from memory (one burst).
    preload: bool,
    /// The end of the program's last event, nanoseconds.
    run_end: i64,
    /// A scan of the files' headers before training, left out of the calls above.
    scan: Option<HeaderScan>,
    /// The program's writes outside the data set ([`writes_where`]): the pauses holding a
    /// checkpoint's are not compute.
    written: Vec<(i64, u64)>,
}

impl<'t> Activity<'t> {
    fn of(t: &'t Timeline, data: &DataSet) -> Activity<'t> {
        let (mut calls, mut reads) = data_calls(t, data);
        // A scan of the files' headers before training is not a step's reading.
        let scan = header_scan(&calls, data);
        if let Some(s) = &scan {
            calls.retain(|r| r.start >= s.end);
            reads.retain(|r| r.start >= s.end);
        }
        let opens = calls
            .iter()
            .copied()
            .filter(|r| op(r) == Op::Open)
            .collect();
        let window = (
            calls.first().map_or(0, |r| r.start),
            calls.iter().map(|r| r.end).max().unwrap_or(0),
        );
        // Steps: at the compute spans when the trace has them, else at the consumer's takes
        // when worker processes read, else at the pauses in the data reads.
        let spans = compute_starts(t);
        let consumer = if spans.is_empty() {
            find_consumer(t, &calls)
        } else {
            None
        };
        let starts = consumer.as_ref().map_or(spans, Consumer::step_starts);
        let written = writes_where(t, |r| !data.holds(r.file));
        let (mut bursts, mut paused) = bursts(&calls, &starts, &written);
        // A load is busy reading much of its time (h5py's whole-dataset loads: 80-90%, and a
        // busy machine stretches the work between them); a training epoch that reads each
        // file once spends nearly all of it computing between its steps (HDF5 slices: 1-2%).
        let busy: i64 = bursts.iter().map(|b| b.busy).sum();
        let run_end = t.events.iter().map(|r| r.end).max().unwrap_or(window.1);
        let preload = consumer.is_none()
            && 4 * busy >= window.1 - window.0
            && preloaded(data, window, run_end);
        if preload {
            // One pass of reads before the steps: no step of the training reads.
            bursts = vec![Burst {
                start: window.0,
                end: window.1,
                busy,
            }];
            paused = false;
        }
        Activity {
            calls,
            reads,
            opens,
            window,
            bursts,
            paused,
            consumer,
            preload,
            run_end,
            scan,
            written,
        }
    }
}

/// Whether the program read its data set once, whole, before it trained from memory, as
/// characterisation finds it: then it has no steps of reading, whatever pauses lie between
/// its loads (`dlio fidelity` uses this for the real side).
pub(crate) fn loads_before_training(t: &Timeline, data: &DataSet) -> bool {
    Activity::of(t, data).preload
}

/// A pass over the data files' first bytes before training (a sampler that groups samples by
/// their headers: image sizes for aspect-ratio buckets).
#[derive(Debug, Clone, Copy)]
struct HeaderScan {
    /// When its last call ended, nanoseconds.
    end: i64,
    /// The furthest byte it read in a file.
    bytes: u64,
    /// Files it read.
    files: u64,
    /// One process read each file wherever (before its workers read), rather than its first
    /// bytes.
    swept: bool,
}

/// The data calls' opening run of openings that each read only the first bytes of a file (no
/// further than half of it), each file once, over nine files in ten or more, before the files
/// are opened again: a header scan. Or, when one process makes that run and no read after
/// it (the training process scanning its labels before its workers read: SQLite's leaf pages
/// of a labels column), its reads of each file, half the file's bytes at most, wherever they
/// lie; its bytes are then the most a file gave it.
fn header_scan(calls: &[&Rec], data: &DataSet) -> Option<HeaderScan> {
    let reads = || calls.iter().filter(|r| op(r) == Op::Read && r.bytes > 0);
    let scanner = reads().next()?.rank;
    let others_start = reads().find(|r| r.rank != scanner).map(|r| r.start);
    let alone = others_start.is_some_and(|first| {
        reads()
            .filter(|r| r.rank == scanner)
            .all(|r| r.start < first)
    });
    let mut seen: HashSet<u64> = HashSet::new();
    // Per file: the bytes read.
    let mut swept: HashMap<u64, u64> = HashMap::new();
    let (mut end, mut furthest) = (0i64, 0u64);
    for r in calls {
        let half = data.totals.get(&r.file).map_or(0, |f| f.size / 2);
        match op(r) {
            Op::Open if seen.contains(&r.file) => break,
            Op::Open => {
                seen.insert(r.file);
            }
            Op::Read if r.bytes > 0 => {
                if !seen.contains(&r.file) || r.offset < 0 {
                    break;
                }
                let (offset, bytes) = (r.offset as u64, r.bytes as u64);
                let reach = offset + bytes;
                let total = swept.entry(r.file).or_default();
                let fits = if alone {
                    r.rank == scanner && *total + bytes <= half
                } else {
                    reach <= half
                };
                if !fits {
                    break;
                }
                *total += bytes;
                furthest = furthest.max(reach);
            }
            _ => {}
        }
        end = r.end;
    }
    let enough = seen.len() * 10 >= data.files.len() * 9 && (data.files.len() >= 2 || alone);
    // The scanned files are opened again after the run, each before it is read again: a
    // scan's openings read nothing more. A file whose next call after the run is a read was
    // opened for training (tf.data opens every shard of an epoch and reads its first 64 KiB at
    // once, then the rest as the shard's turn comes).
    let mut reopened: HashSet<u64> = HashSet::new();
    let mut read_on = false;
    for r in calls
        .iter()
        .filter(|r| r.start >= end && seen.contains(&r.file))
    {
        if reopened.len() == seen.len() {
            break;
        }
        match op(r) {
            Op::Open => {
                reopened.insert(r.file);
            }
            Op::Read if r.bytes > 0 && !reopened.contains(&r.file) => {
                read_on = true;
                break;
            }
            _ => {}
        }
    }
    let reopened = !reopened.is_empty() && !read_on;
    let bytes = if alone {
        swept.values().copied().max().unwrap_or(0)
    } else {
        furthest
    };
    (enough && reopened && bytes > 0).then_some(HeaderScan {
        end,
        bytes,
        files: seen.len() as u64,
        swept: alone && furthest > bytes,
    })
}

/// Whether the program read its data set once, whole, before it trained from memory: every
/// data file opened once and read to nine tenths of its size or more, and the program ran on
/// without a data read for at least twice as long as it read (with a data call in progress
/// a quarter of that time or more, checked by the caller).
fn preloaded(data: &DataSet, window: (i64, i64), run_end: i64) -> bool {
    let reading = (window.1 - window.0).max(1);
    if run_end - window.1 < 2 * reading {
        return false;
    }
    !data.files.is_empty()
        && data.files.iter().all(|f| {
            data.totals
                .get(f)
                .is_some_and(|t| t.opens == 1 && t.bytes_read * 10 >= t.size * 9)
        })
}

/// What the trace cannot show when the program mapped its data files into memory: its reads
/// through the mappings are page faults, which no call records, so the workload holds only
/// the bytes its read calls moved.
fn mapped_note(data: &DataSet) -> Option<String> {
    let (files, bytes) = data.mapped();
    (files > 0).then(|| {
        format!(
            "{files} data files were mapped into memory (mmap, {bytes} bytes in all): what the \
             program read through the mappings came in by page faults, which no I/O trace \
             records, so the bytes, steps and samples read that way are not in this workload; \
             it replays only the read calls"
        )
    })
}

/// The characterisation of a timeline, section by section: what a sample is (and the data
/// set's keys), who reads and in which steps, how files are kept open, in which order samples
/// come, which requests read them, whether an evaluation pass reads a split of its own, how
/// long compute and loading take, and what else the program reads and writes while it trains.
fn derive(t: &Timeline, data: &DataSet) -> Characterization {
    let activity = Activity::of(t, data);
    let mut found = Found::default();

    if activity.preload {
        found.note(format!(
            "the data set was read once, whole, in {:.3} s before the program went on without \
             reading it (it trained from memory): the workload reads each file once, in one \
             epoch, and the time the program ran on after its last read is the compute after \
             that step",
            secs(activity.window.1 - activity.window.0)
        ));
    }
    if let Some(note) = mapped_note(data) {
        found.note(note);
    }
    let (samples, f) = samples::samples(t, data, &activity);
    found.append(f);
    if let Some(scan) = &activity.scan {
        found.param(
            "reader.header_scan_bytes",
            scan.bytes.to_string(),
            if scan.swept {
                format!(
                    "before training, one process opened {} data files once each and read \
                     {} bytes at most of a file, here and there, then read nothing more \
                     while others opened them again to train: a scan of what the files hold \
                     (labels, an index), replayed as that many bytes from each file's start",
                    scan.files, scan.bytes
                )
            } else {
                format!(
                    "before training, {} data files were opened once each and only their first \
                     {} bytes read (at most), then opened again to train: a scan of their headers",
                    scan.files, scan.bytes
                )
            },
        );
    }
    // The evaluation pass is found first (its takes are not training steps) and written after.
    let windows_per_file = samples
        .windows
        .then(|| samples.in_data_set / (data.files.len() as u64).max(1));
    // What a sample of the replay reads: what the program's training read a sample, a
    // buffered stream's fills past each window included.
    let files = (data.files.len() as u64).max(1);
    let read = activity.reads.iter().map(|r| r.bytes as u64).sum::<u64>();
    let format = found
        .value("dataset.format")
        .unwrap_or_default()
        .to_string();
    let bytes = (read / samples.consumed().max(1)).max(1);
    let shape = eval::SampleShape {
        bytes,
        record: found
            .value("dataset.record_length_bytes")
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(bytes, |v| v.round() as u64),
        per_file: (samples.in_data_set / files).max(1),
        format: &format,
    };
    let (eval, eval_found) = eval::eval_pass(
        t,
        data,
        &activity,
        &samples.events,
        samples.epochs,
        windows_per_file,
        shape,
    );
    let (readers, f) = readers::readers(t, &activity, &samples, &eval);
    found.append(f);
    let mut samples = samples;
    let whole_steps = samples.draws_in_whole_steps(readers.batch);
    found.append(readers::last_batch(&samples, &readers));
    if let (Some(w), None) = (&whole_steps, samples.epoch_samples) {
        found.note(w.clone());
    }
    if let Some(per_epoch) = samples.epoch_samples {
        let batch = readers.batch.max(1);
        // The nearest whole number of steps: a sample or two of a run whose reads the trace
        // runs together (1,199 an epoch for 1,200) must not cost the replay a whole step.
        let steps = ((per_epoch as f64 / batch as f64).round() as u64).max(1);
        found.param(
            "train.total_training_steps",
            steps.to_string(),
            format!(
                "{} {} read over {} epochs, {per_epoch} an epoch, in batches of {batch} (the \
                 nearest whole number of steps): the data set holds {} of them, of which each \
                 epoch reads its share{}",
                samples.events.len(),
                if samples.windows {
                    "windows"
                } else {
                    "samples"
                },
                samples.epochs,
                samples.in_data_set,
                whole_steps.map(|w| format!("; {w}")).unwrap_or_default()
            ),
        );
    }
    if let Some(between) = eval.samples_between {
        let batch = readers.batch.max(1);
        found.param(
            "evaluation.steps_between_evals",
            ((between as f64 / batch as f64).round() as u64)
                .max(1)
                .to_string(),
            format!(
                "{} evaluation passes, {between} training samples apart (batches of {batch}), \
                 not at epochs' ends: a pass every so many training steps",
                eval.windows.len()
            ),
        );
    }
    found.append(samples::read_type(&activity, &samples));
    found.append(requests::order(t, &samples));
    let (transfer_sizes, work_inside, f) = requests::requests(
        &activity,
        &samples,
        data,
        (
            readers.read_threads,
            one_thread_per_process(&readers.threads),
        ),
    );
    found.append(f);
    found.append(requests::read_buffers(&activity));
    found.append(requests::buffer_place(&activity));
    found.append(eval_found);
    // The epochs' start-up first: where it is replayed, the pauses that hold it are not
    // compute.
    let epoch_start = timing::epoch_start_up(&activity, &samples, &readers, &eval);
    let starts_up = epoch_start.has("reader.epoch_start_time");
    let (time, f) = timing::timing(
        &activity,
        (&samples, &readers, &eval),
        work_inside,
        starts_up,
    );
    found.append(f);
    found.append(timing::loader_start_up(&activity, &readers, &eval));
    found.append(timing::worker_start_interval(&activity, &readers));
    found.append(timing::request_delay(&activity, &readers));
    found.append(epoch_start);
    let (side_files, written, f) =
        writes::side_files_and_writes(t, data, &activity, &readers, &eval);
    found.append(f);
    found.append(writes::checkpoints(t, &written, &activity, &readers));
    if let Some(note) = replay_out_of_proportion(&found, &samples, &readers, &activity, &time) {
        found.note(note);
    }

    let mut c = Characterization {
        traces: t.inputs.clone(),
        events: t.events.len() as u64,
        data_dir: data.dir.clone(),
        parameters: found.params,
        data_files: samples.num_files,
        file_sizes: samples.file_sizes,
        transfer_sizes,
        steps: readers.steps_found,
        compute_s: time.compute_s,
        fetch_s: time.fetch_s,
        step_fetch_s: time.step_fetch_s,
        step_compute_s: time.step_compute_s,
        side_files,
        written,
        reader_threads: readers.threads,
        notes: found.notes,
        workload_yaml: String::new(),
    };
    c.workload_yaml = output::workload_yaml(&c);
    c
}

#[cfg(test)]
mod replay_length_tests {
    use super::ReplayLength;

    #[test]
    fn a_replay_lasts_its_steps_compute_or_its_loader_time_over_the_readers() {
        // 5634 slices a sample, one epoch, batches of one, 12 ms of compute, 0.52 s of loader
        // time a sample on two readers: the loader's 1465 s, where the program ran 5 s.
        let l = ReplayLength::of(5634, 1, 0.012, 0.52, 2);
        assert_eq!(l.steps, 5634.0);
        assert!((l.compute_s - 67.6).abs() < 0.1, "{l:?}");
        assert!((l.loader_s - 1464.8).abs() < 0.1, "{l:?}");
        // 7200 samples in batches of 32, 11 ms of compute: 225 steps, 2.5 s.
        let l = ReplayLength::of(7200, 32, 0.011, 0.0, 2);
        assert_eq!((l.steps, l.loader_s), (225.0, 0.0));
        assert!((l.compute_s - 2.475).abs() < 1e-9, "{l:?}");
    }
}

/// A POSIX call of the tests: the `i`-th (1 us apart, 10 ns long), of one thread on
/// descriptor 3.
#[cfg(test)]
fn test_call(i: i64, op: Op, file: u64, offset: i64, bytes: i64) -> Rec {
    Rec {
        rank: 7,
        tid: 7,
        start: i * 1000,
        end: i * 1000 + 10,
        layer: crate::event::Layer::ReaderPosix as u8,
        op: op as u8,
        item: false,
        fd: 3,
        file,
        offset,
        bytes,
        buf_page_offset: -1,
        untouched_pages: -1,
    }
}

#[cfg(test)]
mod header_scan_tests {
    use std::collections::HashMap;

    use super::trace_view::{DataSet, FileTotals};
    use super::{Op, Rec, header_scan, test_call as call};

    fn data_set(files: u64, size: u64) -> DataSet {
        DataSet {
            dir: "/data".into(),
            files: (0..files).collect(),
            totals: (0..files)
                .map(|f| {
                    let totals = FileTotals {
                        size,
                        ..Default::default()
                    };
                    (f, totals)
                })
                .collect::<HashMap<_, _>>(),
            extension: "bin".into(),
            subfolders: 0,
        }
    }

    #[test]
    fn a_scan_is_openings_that_read_a_files_first_bytes_and_nothing_more() {
        let data = data_set(4, 1 << 20);
        // Each file opened and its first 4 KiB read, then each opened again and read whole.
        let mut calls = Vec::new();
        let mut i = 0;
        let mut next = || {
            i += 1;
            i
        };
        for f in 0..4 {
            calls.push(call(next(), Op::Open, f, -1, 0));
            calls.push(call(next(), Op::Read, f, 0, 4096));
        }
        let scan_calls = calls.len();
        for f in 0..4 {
            calls.push(call(next(), Op::Open, f, -1, 0));
            for k in 0..16 {
                calls.push(call(next(), Op::Read, f, k * 65536, 65536));
            }
        }
        let refs: Vec<&Rec> = calls.iter().collect();
        let scan = header_scan(&refs, &data).expect("a scan");
        assert_eq!((scan.bytes, scan.files), (4096, 4));
        assert_eq!(scan.end, calls[scan_calls - 1].end);
        // tf.data's interleave: every file opened and its first 64 KiB read at once, then the
        // same openings read on (no opening between): no scan.
        let mut calls = Vec::new();
        for f in 0..4 {
            calls.push(call(next(), Op::Open, f, -1, 0));
            calls.push(call(next(), Op::Read, f, 0, 65536));
        }
        for f in 0..4 {
            for k in 1..16 {
                calls.push(call(next(), Op::Read, f, k * 65536, 65536));
            }
        }
        // A later epoch opens them again.
        for f in 0..4 {
            calls.push(call(next(), Op::Open, f, -1, 0));
            calls.push(call(next(), Op::Read, f, 0, 65536));
        }
        let refs: Vec<&Rec> = calls.iter().collect();
        assert!(header_scan(&refs, &data).is_none());
    }
}
