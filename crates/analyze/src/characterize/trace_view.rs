//! The trace as characterisation reads it: which files hold the data set, the calls on them
//! in the training window, and how those calls group into bursts (one per step).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use super::{MIN_GAP_RATIO, MIN_JUMP_RATIO};

/// The smallest jump between neighbouring sorted pauses that may separate the compute from the
/// pauses inside bursts when no jump of [`MIN_JUMP_RATIO`] does.
const FALLBACK_JUMP_RATIO: f64 = 1.5;
use crate::error::AnalyzeError;
use crate::event::Op;
use crate::ingest::Rec;
use crate::timeline::{Timeline, op};

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

pub(super) fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn extension_of(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        // A number after the last dot names a chunk or a part, not a kind of file: zarr's
        // chunk keys (`0.1`, `3.7`), numbered shards (`train.00042`).
        Some((_, ext)) if !ext.is_empty() && ext.bytes().all(|b| b.is_ascii_digit()) => "",
        Some((_, ext)) => ext,
        None => "",
    }
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
    /// Bytes of the file mapped into memory (`mmap`): what reads through the mappings moved
    /// by page faults is not in `bytes_read`.
    pub mapped: u64,
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
            Op::Map if r.bytes > 0 => f.mapped += r.bytes as u64,
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
    /// The folders under `dir` the files are spread over (class folders), 0 when they sit in
    /// `dir` itself.
    pub subfolders: u64,
}

impl DataSet {
    /// The data files mapped into memory (`mmap`) and the bytes of their mappings.
    pub(crate) fn mapped(&self) -> (usize, u64) {
        self.files
            .iter()
            .filter_map(|f| self.totals.get(f).map(|t| t.mapped))
            .filter(|&m| m > 0)
            .fold((0, 0), |(files, bytes), m| (files + 1, bytes + m))
    }

    pub(crate) fn find(t: &Timeline, dir: Option<&Path>) -> Result<DataSet, AnalyzeError> {
        let totals = file_totals(t);
        let read: Vec<(u64, &FileTotals, &str)> = totals
            .iter()
            .filter(|(_, f)| f.bytes_read > 0)
            .map(|(h, f)| (*h, f, t.path(*h)))
            .filter(|(_, _, p)| !is_system_path(p))
            .collect();
        let Folder {
            dir,
            files,
            extension,
            subfolders,
        } = match dir {
            Some(d) => in_folder(t, &read, d.to_string_lossy().trim_end_matches('/'))?,
            None => {
                let mut by_dir: BTreeMap<&str, u64> = BTreeMap::new();
                for (_, f, p) in &read {
                    *by_dir.entry(parent_of(p)).or_default() += f.bytes_read;
                }
                let mut candidates: Vec<(&str, u64)> = by_dir.into_iter().collect();
                candidates.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                if candidates.is_empty() {
                    return Err(AnalyzeError::Unusable(format!(
                        "the traces read no file outside the interpreter's and the system's \
                         folders ({} files read in all): the program read no data, or read \
                         it in a way the trace does not show (memory maps, a network \
                         client); check the command, or name the data folder with \
                         --data-dir",
                        totals.values().filter(|f| f.bytes_read > 0).count()
                    )));
                }
                // The folder that read the most bytes, with the class folders read interleaved
                // beside it: one of eight subfolders (a shard a folder) can read less than an
                // evaluation split's folder, and the data set is all eight.
                let bytes_of = |files: &HashSet<u64>| -> u64 {
                    files
                        .iter()
                        .filter_map(|f| totals.get(f))
                        .map(|f| f.bytes_read)
                        .sum()
                };
                let mut best: Option<(u64, Folder)> = None;
                for (d, _) in candidates.into_iter().take(MAX_CANDIDATE_FOLDERS) {
                    let found = in_folder(t, &read, d)?;
                    let bytes = bytes_of(&found.files);
                    if best.as_ref().is_none_or(|(most, _)| bytes > *most) {
                        best = Some((bytes, found));
                    }
                }
                best.expect("one candidate or more").1
            }
        };
        let files = without_evaluation_split(t, files);
        Ok(DataSet {
            dir,
            files,
            totals,
            extension,
            subfolders,
        })
    }

    pub(crate) fn holds(&self, file: u64) -> bool {
        self.files.contains(&file)
    }
}

/// The folders, most bytes read first, that [`DataSet::find`] weighs as the data set's.
const MAX_CANDIDATE_FOLDERS: usize = 8;

/// A folder's data set, as [`in_folder`] finds it.
struct Folder {
    /// The data set's folder (above the class folders, when there are).
    dir: String,
    files: HashSet<u64>,
    extension: String,
    /// Class folders read interleaved.
    subfolders: u64,
}

/// The data set in `dir`: the files of its most read kind in it (or below it, when it holds
/// only folders), with the class folders read interleaved beside them.
fn in_folder(
    t: &Timeline,
    read: &[(u64, &FileTotals, &str)],
    dir: &str,
) -> Result<Folder, AnalyzeError> {
    let in_dir: Vec<&(u64, &FileTotals, &str)> = read
        .iter()
        .filter(|(_, _, p)| parent_of(p) == dir)
        .collect();
    let below: Vec<&(u64, &FileTotals, &str)> = if in_dir.is_empty() {
        // A named folder whose files sit in subfolders (class folders): every file below.
        let prefix = format!("{dir}/");
        read.iter()
            .filter(|(_, _, p)| p.starts_with(&prefix))
            .collect()
    } else {
        in_dir
    };
    let mut by_ext: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, f, p) in &below {
        *by_ext.entry(extension_of(p)).or_default() += f.bytes_read;
    }
    let extension = by_ext
        .into_iter()
        .max_by_key(|(_, b)| *b)
        .map(|(e, _)| e.to_string())
        .ok_or_else(|| {
            AnalyzeError::Unusable(format!(
                "no file in {dir} was read; name the folder that holds the data files with \
                 --data-dir"
            ))
        })?;
    let files: HashSet<u64> = below
        .iter()
        .filter(|(_, _, p)| extension_of(p) == extension)
        .map(|(h, _, _)| *h)
        .collect();
    let same_kind: Vec<(u64, &str)> = read
        .iter()
        .filter(|(_, _, p)| extension_of(p) == extension)
        .map(|(h, _, p)| (*h, *p))
        .collect();
    let (dir, files, subfolders) = climb_class_folders(t, dir.to_string(), files, &same_kind);
    Ok(Folder {
        dir,
        files,
        extension,
        subfolders,
    })
}

/// Words of a file's name that mark an evaluation split.
const EVALUATION_WORDS: [&str; 7] = [
    "val",
    "valid",
    "validation",
    "eval",
    "test",
    "dev",
    "holdout",
];

/// Whether a word of `name` (runs of letters) is one of [`EVALUATION_WORDS`].
fn names_a_split(name: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphabetic())
        .any(|word| EVALUATION_WORDS.contains(&word.to_ascii_lowercase().as_str()))
}

/// `files` less those whose name marks an evaluation split (a word of it is `val`, `test`,
/// `dev`, ...: `val.zip` beside `train.zip`, CIFAR's `test_batch.bin` beside `data_batch_1.bin`)
/// when the others' names do not and they are fewer: the evaluation pass reads them, which
/// finds them by when they are read.
fn without_evaluation_split(t: &Timeline, files: HashSet<u64>) -> HashSet<u64> {
    let marked = |f: &u64| {
        let name = t.path(*f).rsplit('/').next().unwrap_or_default();
        names_a_split(name.rsplit_once('.').map_or(name, |(stem, _)| stem))
    };
    let (split, training): (HashSet<u64>, HashSet<u64>) = files.iter().partition(|f| marked(f));
    if split.is_empty() || training.is_empty() || split.len() >= training.len().max(2) {
        return files;
    }
    training
}

/// The share of a folder's openings whose neighbours in time (the openings of the same kind of
/// file just before and after) are both in other folders, above which its files are read
/// interleaved with theirs, as the samples of class folders are by a shuffled loader.
/// A split read in windows of its own (an eval pass) has almost none: its neighbours are its
/// own files.
const INTERLEAVED_SHARE: f64 = 0.3;

/// The data set's root when `dir`'s files are one of several folders read interleaved (class
/// folders under `train/`), or in turn, none named as a split: climbs while sibling folders of
/// the same kind of file are read between `dir`'s, taking their files in. Returns the root,
/// the files and the number of folders under it that hold them (0 when the files stay in
/// `dir` alone).
fn climb_class_folders(
    t: &Timeline,
    mut dir: String,
    mut files: HashSet<u64>,
    same_kind: &[(u64, &str)],
) -> (String, HashSet<u64>, u64) {
    let mut subfolders = 0u64;
    loop {
        let parent = parent_of(&dir).to_string();
        if parent.is_empty() {
            break;
        }
        let prefix = format!("{parent}/");
        // The files of the kind under `parent`, by the folder of `parent` that holds them.
        let child_of = |p: &str| -> Option<String> {
            let rest = p.strip_prefix(&prefix)?;
            let (child, _) = rest.split_once('/')?;
            Some(child.to_string())
        };
        let own = child_of(&format!("{dir}/x")).unwrap_or_default();
        let folder_of: HashMap<u64, String> = same_kind
            .iter()
            .filter_map(|&(h, p)| child_of(p).map(|c| (h, c)))
            .collect();
        let mut openings: Vec<(i64, &str)> = t
            .io()
            .filter(|r| op(r) == Op::Open)
            .filter_map(|r| folder_of.get(&r.file).map(|c| (r.start, c.as_str())))
            .collect();
        openings.sort_unstable();
        let mut with_others: HashMap<&str, (u64, u64)> = HashMap::new();
        for (i, &(_, folder)) in openings.iter().enumerate() {
            let e = with_others.entry(folder).or_default();
            e.0 += 1;
            let other = |j: Option<usize>| {
                j.and_then(|j| openings.get(j))
                    .is_some_and(|o| o.1 != folder)
            };
            if other(i.checked_sub(1)) && other(Some(i + 1)) {
                e.1 += 1;
            }
        }
        // A folder named as a split (`valid/`) is not a class folder, nor are its siblings
        // its classes, even when its reads come between the training's: an evaluation pass
        // that begins while readers still read ahead, or a replay slowed down by a busy
        // machine, interleaves them too.
        let mut siblings: Vec<String> = with_others
            .iter()
            .filter(|(folder, (n, mixed))| {
                **folder != own
                    && *n >= 4
                    && *mixed as f64 >= INTERLEAVED_SHARE * *n as f64
                    && !names_a_split(folder)
                    && !names_a_split(&own)
            })
            .map(|(folder, _)| folder.to_string())
            .collect();
        // Class folders read one after another (a file list in class order, as DALI's file
        // reader takes it, shuffled only in a buffer): two or more sibling folders of the
        // kind, opened as often as `dir`'s files, none named as a split (`val/`, `test/`).
        // An evaluation split is one folder so named, or a folder read less often.
        if siblings.is_empty() {
            let own_opens = with_others.get(own.as_str()).map_or(0, |&(n, _)| n);
            let in_turn: Vec<String> = with_others
                .iter()
                .filter(|&(folder, &(n, _))| {
                    *folder != own && n >= 4 && n * 2 >= own_opens && n <= own_opens * 2
                })
                .map(|(folder, _)| folder.to_string())
                .collect();
            if in_turn.len() >= 2
                && !names_a_split(&own)
                && !in_turn.iter().any(|f| names_a_split(f))
            {
                siblings = in_turn;
            }
        }
        // A data set saved one file a folder (tf.data's `save`: `NNNNNNNN.shard/00000000.
        // snapshot`): the folder read holds its one file, and two or more of its siblings hold
        // one file each of the kind. They are its shards, however they are read.
        if siblings.is_empty() && files.len() == 1 {
            let mut per_folder: HashMap<&str, usize> = HashMap::new();
            for c in folder_of.values() {
                *per_folder.entry(c.as_str()).or_default() += 1;
            }
            let shards: Vec<String> = per_folder
                .iter()
                .filter(|&(folder, &n)| *folder != own && n == 1)
                .map(|(folder, _)| folder.to_string())
                .collect();
            if shards.len() >= 2 && per_folder.get(own.as_str()) == Some(&1) {
                siblings = shards;
            }
        }
        if siblings.is_empty() {
            break;
        }
        files.extend(
            folder_of
                .iter()
                .filter(|(_, c)| siblings.contains(c))
                .map(|(h, _)| *h),
        );
        subfolders = siblings.len() as u64 + 1;
        dir = parent;
    }
    (dir, files, subfolders)
}

/// How long before the first read's opening another thread's opening still begins the data
/// calls: a second, far past a busy machine's delay between a worker's opening and its read
/// (milliseconds), far short of a program's start-up before it trains.
const OPENED_BEFORE_LIMIT_NS: i64 = 1_000_000_000;

/// The calls on data files from the first data read to the end of the last (what comes before
/// or after, such as listing and sizing the files, is not training), and the reads among them.
pub(crate) fn data_calls<'t>(t: &'t Timeline, data: &DataSet) -> (Vec<&'t Rec>, Vec<&'t Rec>) {
    let all: Vec<&Rec> = t.io().filter(|r| data.holds(r.file)).collect();
    let is_read = |r: &&Rec| op(r) == Op::Read && r.bytes > 0;
    // The opening a read at `i` was made through (the last of its file in its process before
    // it), or the read itself.
    let opening = |i: usize| {
        let r0 = all[i];
        all[..i]
            .iter()
            .rev()
            .find(|r| op(r) == Op::Open && r.file == r0.file && r.rank == r0.rank)
            .map_or(r0.start, |open| open.start)
    };
    // From the opening the first read was made through, or an earlier one through which
    // another thread made its first read: workers that open their files at once, one of them
    // kept off a core until another has read (a busy machine), all begin the window. An
    // opening [`OPENED_BEFORE_LIMIT_NS`] or more before (a file opened at start-up and kept)
    // does not.
    let first_read = all.iter().position(is_read).unwrap_or(0);
    let first_opened = if all.is_empty() {
        0
    } else {
        opening(first_read)
    };
    let mut first = first_opened;
    let mut readers = std::collections::HashSet::new();
    for (i, r) in all.iter().enumerate().skip(first_read) {
        if is_read(r) && readers.insert((r.rank, r.tid)) {
            let opened = opening(i);
            if opened < first && first_opened - opened < OPENED_BEFORE_LIMIT_NS {
                first = opened;
            }
        }
    }
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
    compute_edges(t, |r| r.start)
}

/// Ends of the trace's `compute` spans, sorted: where dlio's steps begin, as it asks for the
/// next batch when a step's compute ends (a reader's refill, started as the batch is taken,
/// can come before the next compute span starts).
pub(crate) fn compute_ends(t: &Timeline) -> Vec<i64> {
    compute_edges(t, |r| r.end)
}

/// One edge (`edge` of each record) of every `compute` span, sorted.
fn compute_edges(t: &Timeline, edge: impl Fn(&Rec) -> i64) -> Vec<i64> {
    let mut edges: Vec<i64> = t
        .events
        .iter()
        .filter(|r| r.layer == crate::event::Layer::Compute as u8)
        .map(edge)
        .collect();
    edges.sort_unstable();
    edges
}

/// The writes that moved bytes among those `keep` keeps (the training process's, the
/// program's outside the data set): their ends and sizes, sorted by end.
pub(crate) fn writes_where(t: &Timeline, keep: impl Fn(&Rec) -> bool) -> Vec<(i64, u64)> {
    let mut written: Vec<(i64, u64)> = t
        .io()
        .filter(|r| op(r) == Op::Write && r.bytes > 0 && keep(r))
        .map(|r| (r.end, r.bytes as u64))
        .collect();
    written.sort_unstable();
    written
}

/// Bytes of `written` whose calls ended between `from` and `to`.
pub(crate) fn written_between(written: &[(i64, u64)], from: i64, to: i64) -> u64 {
    let first = written.partition_point(|&(end, _)| end < from);
    written[first..]
        .iter()
        .take_while(|&&(end, _)| end <= to)
        .map(|&(_, bytes)| bytes)
        .sum()
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
/// compute pauses. The pauses that hold checkpoint-sized writes of `written` ([`writes_where`])
/// are not compute and stay out of the levels the compute pauses are found in (a few long
/// ones would make a level of their own above the steps'), unless they are a quarter of the
/// pauses or more; they still end a burst. Returns the bursts and whether steps were found.
pub(crate) fn bursts(
    calls: &[&Rec],
    compute_starts: &[i64],
    written: &[(i64, u64)],
) -> (Vec<Burst>, bool) {
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
    let holds_writes =
        |from: i64, to: i64| written_between(written, from, to) >= super::MIN_WRITTEN_BYTES;
    let threshold = pause_threshold_without(&busy, holds_writes);
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
/// below it, or the level below that one when it passes the same test, holds 8 times as many
/// pauses, has a median within 8x of the top's and leaves bursts of 4 calls or more (the top
/// level is then the epochs' ends). Levels
/// told apart by a jump of 2 (not only 3) and confirmed by their medians
/// hold on a busy machine, where scheduling delays stretch some pauses inside a burst towards
/// the compute pauses; `None` when there is no such level.
pub(super) fn pause_threshold(busy: &[(i64, i64)]) -> Option<i64> {
    pause_threshold_without(busy, |_, _| false)
}

/// [`pause_threshold`] over the pauses `left_out` does not name (the pause from the end of
/// one busy interval to the start of the next), unless it names a quarter of them or more.
fn pause_threshold_without(
    busy: &[(i64, i64)],
    left_out: impl Fn(i64, i64) -> bool,
) -> Option<i64> {
    let all: Vec<i64> = busy.windows(2).map(|w| w[1].0 - w[0].1).collect();
    let kept: Vec<i64> = busy
        .windows(2)
        .filter(|w| !left_out(w[0].1, w[1].0))
        .map(|w| w[1].0 - w[0].1)
        .collect();
    if kept.len() < all.len() && (all.len() - kept.len()) * 4 < all.len() {
        // Without them the pauses may hold one level only (steps of one read each, nothing
        // shorter between): the levels of every pause then say what they can.
        if let Some(threshold) = threshold_of(kept) {
            return Some(threshold);
        }
    }
    threshold_of(all)
}

/// [`pause_threshold`] of these pauses.
fn threshold_of(mut gaps: Vec<i64>) -> Option<i64> {
    gaps.sort_unstable();
    let n = gaps.len();
    let jump = |i: usize| gaps[i] as f64 >= MIN_JUMP_RATIO * gaps[i - 1].max(1000) as f64;
    let median = |level: &[i64]| level[level.len() / 2] as f64;
    // Where the level that ends before `end` begins: the jump below it, or the first pause.
    let level_start = |end: usize| (1..end).rev().find(|&k| jump(k)).unwrap_or(0);
    // Two epochs, each read in one burst before its steps compute from memory (a pool's
    // imap without back pressure, a whole epoch pre-buffered): one pause, longer than all the
    // others together and a jump above the next, is the compute; the stalls inside the bursts
    // below it are not steps.
    if n >= 16 {
        let top = gaps[n - 1];
        let rest: i64 = gaps[..n - 1].iter().filter(|&&g| g >= 200_000).sum();
        if top >= 200_000
            && top as f64 >= MIN_GAP_RATIO * gaps[n - 2].max(1000) as f64
            && top > 2 * rest
        {
            return Some(((gaps[n - 2].max(1) as f64) * (top as f64)).sqrt() as i64);
        }
    }
    let at = (1..n.saturating_sub(1))
        .rev()
        .find(|&i| {
            if gaps[i] < 200_000 || !jump(i) {
                return false;
            }
            let below_start = level_start(i);
            median(&gaps[i..]) >= MIN_GAP_RATIO * median(&gaps[below_start..i]).max(1000.0)
        })
        .or_else(|| {
            // No jump of 2: the longest pauses inside a burst can come within 2x of the
            // shortest compute (a pool's worker waiting for the parent to take a large result).
            // The largest jump of at least FALLBACK_JUMP_RATIO, with the pauses above it still
            // MIN_GAP_RATIO times longer than those below in the median, splits them.
            (1..n.saturating_sub(1))
                .filter(|&i| {
                    gaps[i] >= 200_000
                        && gaps[i] as f64 >= FALLBACK_JUMP_RATIO * gaps[i - 1].max(1000) as f64
                        && median(&gaps[i..]) >= MIN_GAP_RATIO * median(&gaps[..i]).max(1000.0)
                })
                .max_by(|&a, &b| {
                    let ratio = |i: usize| gaps[i] as f64 / gaps[i - 1].max(1000) as f64;
                    ratio(a).total_cmp(&ratio(b))
                })
        })?;
    // A top level of a few pauses over a level of many that is compute by the same test (the
    // pauses at epochs' ends, each a step's compute and the epoch's start-up, over the steps'
    // own): the steps are the level below, when its bursts hold 4 calls or more on average.
    let mut at = at;
    loop {
        let below = level_start(at);
        if below == 0 || gaps[below] < 200_000 {
            break;
        }
        // Epochs' ends are a step's compute and a start-up: a few times a step, where a
        // compute level stands far above the pauses inside a burst.
        let near = median(&gaps[at..]) < 8.0 * median(&gaps[below..at]);
        let few_above = near && (n - at) * 8 <= at - below;
        let bursts_of_four = (n - below) * 4 <= n;
        // Against all the pauses under it: a stray pause or two between the levels (a thread
        // scheduled late) would make a level of their own.
        let compute = median(&gaps[below..]) >= MIN_GAP_RATIO * median(&gaps[..below]).max(1000.0);
        if !(few_above && bursts_of_four && compute) {
            break;
        }
        at = below;
    }
    let threshold = ((gaps[at - 1].max(1) as f64) * (gaps[at] as f64)).sqrt() as i64;
    // A stray long pause inside a burst (a thread scheduled late, a garbage collection) can
    // pass the jump: pauses under half the median compute pause are not compute either.
    let long = &gaps[at..];
    Some(threshold.max(long[long.len() / 2] / 2))
}

/// The burst that holds time `at` (the last one starting at or before it).
pub(super) fn burst_of(bursts: &[Burst], at: i64) -> usize {
    bursts.partition_point(|b| b.start <= at).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    /// Busy intervals of 50 us separated by `pauses` (nanoseconds).
    fn busy(pauses: &[i64]) -> Vec<(i64, i64)> {
        let mut at = 0;
        let mut out = vec![(0, 50_000)];
        for p in pauses {
            at += 50_000 + p;
            out.push((at, at + 50_000));
        }
        out
    }

    #[test]
    fn the_steps_are_the_many_pauses_under_a_few_at_epochs_ends() {
        // 3 epochs of 64 steps: 31 samples 20 us apart, then 12 ms of compute; the epochs'
        // ends pause 37 ms (a step's compute and the epoch's start-up), and one stray pause of
        // 4 ms sits between the levels.
        let mut pauses = Vec::new();
        for epoch in 0..3 {
            for step in 0..64 {
                pauses.extend([20_000; 31]);
                if step < 63 {
                    pauses.push(if epoch == 1 && step == 5 {
                        4_000_000
                    } else {
                        12_000_000
                    });
                }
            }
            if epoch < 2 {
                pauses.push(37_000_000);
            }
        }
        let threshold = super::pause_threshold(&busy(&pauses)).unwrap();
        assert!((4_000_000..12_000_000).contains(&threshold), "{threshold}");
    }

    #[test]
    fn pauses_that_write_a_checkpoint_are_not_a_level_of_compute_above_the_steps() {
        // Steps of one read each (batch 1), 4 ms of compute between them, and every 160th
        // pause 150 ms long, holding a checkpoint's writes: by their lengths alone the long
        // pauses are the compute (the steps' pauses below them are the work inside a burst).
        // Every 70th step's read is three, 30 us apart (a shard's tail, the next one's
        // header and head).
        let mut pauses = Vec::new();
        for i in 1..1000 {
            if i % 70 == 0 {
                pauses.extend([30_000, 30_000]);
            }
            pauses.push(if i % 160 == 0 { 150_000_000 } else { 4_000_000 });
        }
        let busy = busy(&pauses);
        let by_length = super::pause_threshold(&busy).unwrap();
        assert!(by_length > 4_000_000, "{by_length}");
        let writing = |from: i64, to: i64| to - from > 100_000_000;
        let threshold = super::pause_threshold_without(&busy, writing).unwrap();
        assert!((30_000..4_000_000).contains(&threshold), "{threshold}");
        // Without the short level, the steps' pauses alone are one level, which says
        // nothing: the pauses' levels with the checkpoints' decide, as before.
        let uniform: Vec<i64> = (1..1000)
            .map(|i| if i % 160 == 0 { 150_000_000 } else { 4_000_000 })
            .collect();
        let busy = super::tests::busy(&uniform);
        assert_eq!(
            super::pause_threshold_without(&busy, writing),
            super::pause_threshold(&busy)
        );
        // Every pause writing: none is left out.
        let all_writing = super::tests::busy(&[150_000_000; 50]);
        assert_eq!(
            super::pause_threshold_without(&all_writing, |_, _| true),
            super::pause_threshold(&all_writing)
        );
    }

    #[test]
    fn one_pause_longer_than_all_others_is_the_compute_of_epochs_read_ahead() {
        // Two epochs each read in one burst with stalls of 3-5 ms, then 270 ms of steps from
        // memory between them.
        let mut pauses = Vec::new();
        for epoch in 0..2 {
            for i in 0..64 {
                pauses.push(if i % 5 == 0 {
                    3_000_000 + i * 30_000
                } else {
                    30_000
                });
            }
            if epoch == 0 {
                pauses.push(270_000_000);
            }
        }
        let threshold = super::pause_threshold(&busy(&pauses)).unwrap();
        assert!(
            threshold > 5_000_000 && threshold < 270_000_000,
            "{threshold}"
        );
        // Steps that compute longer in all than the one pause: the steps stay the level.
        let mut steps = Vec::new();
        for i in 0..40 {
            steps.extend([20_000; 7]);
            steps.push(if i == 20 { 60_000_000 } else { 15_000_000 });
        }
        let threshold = super::pause_threshold(&busy(&steps)).unwrap();
        assert!(threshold < 15_000_000, "{threshold}");
    }

    #[test]
    fn a_worker_that_opened_before_another_read_first_begins_the_data_calls() {
        // Worker 11 opens a.npy, is kept off a core; worker 12 opens and reads b.npy; worker
        // 11 then reads a.npy. A file opened 5 s before (kept from start-up) by worker 13 and
        // read last stays out.
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        for name in ["a.npy", "b.npy", "c.npy"] {
            std::fs::write(data.join(name), vec![0u8; 4096]).unwrap();
        }
        let event = |id: u32, name: &str, pid: u32, ts: u64, file: &str, args: &str| {
            format!(
                "{{\"id\":{id},\"name\":\"{name}\",\"cat\":\"POSIX\",\"pid\":{pid},\"tid\":{pid},\
                 \"ts\":{ts},\"dur\":2,\"ph\":\"X\",\"args\":{{\"fname\":\"{}\"{args}}}}}",
                data.join(file).display()
            )
        };
        let base = 1_700_000_000_000_000u64;
        let read = ",\"fd\":3,\"offset\":0,\"count\":4096,\"ret\":4096";
        let lines = [
            event(0, "openat", 13, base, "c.npy", ",\"ret\":3"),
            event(1, "openat", 11, base + 5_000_000, "a.npy", ",\"ret\":3"),
            event(2, "openat", 12, base + 5_000_100, "b.npy", ",\"ret\":3"),
            event(3, "read", 12, base + 5_000_200, "b.npy", read),
            event(4, "read", 11, base + 5_003_000, "a.npy", read),
            event(5, "read", 13, base + 5_010_000, "c.npy", read),
        ];
        let traces = dir.path().join("traces");
        std::fs::create_dir(&traces).unwrap();
        std::fs::write(
            traces.join("trace-1.pfw"),
            format!("[\n{}\n]\n", lines.join(",\n")),
        )
        .unwrap();
        let t = crate::timeline::load(&traces).unwrap();
        let set = super::DataSet::find(&t, Some(&data)).unwrap();
        let (calls, reads) = super::data_calls(&t, &set);
        assert_eq!(reads.len(), 3);
        let opens: Vec<u32> = calls
            .iter()
            .filter(|r| crate::timeline::op(r) == crate::event::Op::Open)
            .map(|r| r.rank)
            .collect();
        assert_eq!(opens.len(), 2, "{opens:?}");
    }

    #[test]
    fn an_evaluation_split_read_between_the_training_reads_is_no_class_folder() {
        // 16 training files in train/ and 8 in valid/, opened alternately once the pass
        // begins (a slow replay's readers still reading ahead): the data set is train/ alone,
        // where two class folders read interleaved (cats/, dogs/) are one data set.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("emulated");
        let mut lines = Vec::new();
        let mut ts = 1_700_000_000_000_000u64;
        let mut opened = |lines: &mut Vec<String>, folder: &str, i: usize| {
            let path = root.join(folder).join(format!("f_{i}.npy"));
            for (name, args) in [
                ("openat", ",\"ret\":3".to_string()),
                (
                    "read",
                    ",\"fd\":3,\"offset\":0,\"count\":4096,\"ret\":4096".to_string(),
                ),
            ] {
                lines.push(format!(
                    "{{\"id\":{},\"name\":\"{name}\",\"cat\":\"POSIX\",\"pid\":1,\"tid\":1,\
                     \"ts\":{ts},\"dur\":2,\"ph\":\"X\",\"args\":{{\"fname\":\"{}\"{args}}}}}",
                    lines.len(),
                    path.display()
                ));
                ts += 1_000;
            }
        };
        let traces = dir.path().join("traces");
        std::fs::create_dir(&traces).unwrap();
        for (train, other) in [("train", "valid"), ("cats", "dogs")] {
            lines.clear();
            for i in 0..8 {
                opened(&mut lines, train, i);
            }
            for i in 8..16 {
                opened(&mut lines, train, i);
                opened(&mut lines, other, i);
            }
            std::fs::write(
                traces.join("trace-1.pfw"),
                format!("[\n{}\n]\n", lines.join(",\n")),
            )
            .unwrap();
            let t = crate::timeline::load(&traces).unwrap();
            let set = super::DataSet::find(&t, None).unwrap();
            if other == "valid" {
                assert!(set.dir.ends_with("/emulated/train"), "{}", set.dir);
                assert_eq!(set.files.len(), 16);
            } else {
                assert!(set.dir.ends_with("/emulated"), "{}", set.dir);
                assert_eq!(set.files.len(), 24);
            }
        }
    }

    #[test]
    fn a_number_after_the_last_dot_is_no_extension() {
        assert_eq!(super::extension_of("/d/img_0001.npy"), "npy");
        assert_eq!(super::extension_of("/d/arr/3.7"), "");
        assert_eq!(super::extension_of("/d/train.00042"), "");
        assert_eq!(super::extension_of("/d/arr/.zarray"), "zarray");
        assert_eq!(super::extension_of("/d/README"), "");
        assert_eq!(super::extension_of("/d/x.tar.gz"), "gz");
    }
}
