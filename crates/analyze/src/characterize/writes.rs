//! What else the program reads and writes while it trains: side files read again and again
//! (metadata, index files) and files written (checkpoints).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::eval::EvalPass;
use super::output::yaml_string;
use super::readers::Readers;
use super::trace_view::{DataSet, is_system_path, parent_of};
use super::{Activity, Found, MIN_WRITTEN_BYTES, SideFileRow, WrittenFile, mode};
use crate::event::Op;
use crate::timeline::{Timeline, op};

/// The side-files section: `dataset.side_files`, from the other files read more than once in
/// the training window; and the files written in it, for [`checkpoints`].
pub(super) fn side_files_and_writes(
    t: &Timeline,
    data: &DataSet,
    activity: &Activity,
    readers: &Readers,
    eval: &EvalPass,
) -> (Vec<SideFileRow>, Vec<WrittenFile>, Found) {
    let mut found = Found::default();
    let (window_start, window_end) = activity.window;
    let steps_found = readers.steps_found;
    // Side files and writes during training: every other file's calls in the window, in one
    // pass over the trace.
    let mut during: HashMap<u64, During> = HashMap::new();
    for r in t.io() {
        if r.start < window_start || data.holds(r.file) || eval.files.contains(&r.file) {
            continue;
        }
        // Reads after the last training read (a last pass over a side file once training
        // ends) are the program's too: the replay spreads them over its steps. Writes then
        // are not checkpoints of the training's rhythm.
        let after = r.start > window_end;
        let d = during.entry(r.file).or_default();
        match op(r) {
            Op::Open => d.opens += 1,
            Op::Read if r.bytes > 0 => d.read_bytes += r.bytes as u64,
            Op::Write if !after => {
                d.writes += 1;
                d.written += r.bytes.max(0) as u64;
            }
            Op::Write => d.written_after = true,
            _ => {}
        }
    }
    let (companions, companion_files) = sample_companions(t, data, activity, &during);
    if !companions.is_empty() {
        found.param(
            "dataset.sample_companions",
            companions
                .iter()
                .map(|c| {
                    format!(
                        "{{folder: {}, size_bytes: {}}}",
                        yaml_string(&c.folder),
                        c.size
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
            companions
                .iter()
                .map(|c| c.evidence.clone())
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    let mut side_files = Vec::new();
    let mut written = Vec::new();
    let total_steps = (steps_found.max(1)) as f64;
    for (hash, d) in &during {
        let path = t.path(*hash);
        if is_system_path(path) || companion_files.contains(hash) {
            continue;
        }
        let (opened, read_bytes) = (d.opens, d.read_bytes);
        if opened >= 2 && read_bytes > 0 && !d.written_after {
            let name = match path.strip_prefix(&format!("{}/", data.dir)) {
                Some(rest) => rest.to_string(),
                None => format!("side/{}", path.rsplit('/').next().unwrap_or("side.bin")),
            };
            let every_steps = ((total_steps / opened as f64).round() as u64).max(1);
            // The replay reads the file whole at every `every_steps`-th step: as many times as
            // that gives, and a generated file of what the program read, spread over them. A
            // side file read in parts (one utterance of an archive at a time) is replayed at
            // an opening's share, not the file's size; one opened more often than there are
            // steps (a lookup per sample) at a step's share.
            let replayed = (total_steps as u64).div_ceil(every_steps).clamp(1, opened);
            side_files.push(SideFileRow {
                path: path.to_string(),
                name,
                size: (read_bytes / replayed).max(1),
                reads: opened,
                every_steps,
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
    unique_side_names(&mut side_files);
    written.sort_by(|a, b| a.path.cmp(&b.path));
    if !side_files.is_empty() {
        found.param(
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
    (side_files, written, found)
}

/// One file's calls during training, besides the data set's.
#[derive(Default)]
struct During {
    opens: u64,
    read_bytes: u64,
    written: u64,
    writes: u64,
    /// Written after the last training read: the program's own output, not a side file.
    written_after: bool,
}

/// A set of companions: a file of its own beside each data file.
struct Companion {
    folder: String,
    size: u64,
    evidence: String,
}

/// The share of a folder's files, read and never written while training, whose names (less
/// their extensions) are data files' names, at or above which the folder holds the data files'
/// companions (a frame's calibration beside its point cloud, an image's labels).
const COMPANION_NAME_SHARE: f64 = 0.9;

/// The folders of files read beside the data set that hold one companion per data file: a
/// tenth of the data files or more (and 4 or more), [`COMPANION_NAME_SHARE`] of them named as
/// data files, opened from about as often as the samples are (half to twice): each sample's
/// reader reads its file's companion. Returns them, and the files they take from the side
/// files.
fn sample_companions(
    t: &Timeline,
    data: &DataSet,
    activity: &Activity,
    during: &HashMap<u64, During>,
) -> (Vec<Companion>, HashSet<u64>) {
    let stem = |path: &str| -> String {
        let name = path.rsplit('/').next().unwrap_or_default();
        name.rsplit_once('.').map_or(name, |(s, _)| s).to_string()
    };
    let data_stems: HashSet<String> = data.files.iter().map(|f| stem(t.path(*f))).collect();
    let mut by_folder: BTreeMap<String, Vec<(u64, &During)>> = BTreeMap::new();
    for (hash, d) in during {
        let path = t.path(*hash);
        if is_system_path(path) || d.read_bytes == 0 || d.opens == 0 || d.writes > 0 {
            continue;
        }
        let folder = parent_of(path).to_string();
        by_folder.entry(folder).or_default().push((*hash, d));
    }
    let sample_openings = activity.calls.iter().filter(|r| op(r) == Op::Open).count() as f64;
    let mut companions = Vec::new();
    let mut taken = HashSet::new();
    let mut names: HashSet<String> = HashSet::new();
    for (folder, files) in by_folder {
        let named = files
            .iter()
            .filter(|(h, _)| data_stems.contains(&stem(t.path(*h))))
            .count();
        let opens: u64 = files.iter().map(|(_, d)| d.opens).sum();
        let bytes: u64 = files.iter().map(|(_, d)| d.read_bytes).sum();
        let enough = files.len() >= 4 && files.len() * 10 >= data.files.len();
        let as_often = (0.5..=2.0).contains(&(opens as f64 / sample_openings.max(1.0)));
        if !(enough && as_often && named as f64 >= COMPANION_NAME_SHARE * files.len() as f64) {
            continue;
        }
        // The folder's own name, unless it is a split's (the companions beside the data
        // files in `train/`), and one of its own.
        let last = folder.rsplit('/').next().unwrap_or_default();
        let mut name = if last.is_empty() || last == "train" || last == "valid" {
            "companion".to_string()
        } else {
            last.to_string()
        };
        while !names.insert(name.clone()) {
            name.push('_');
        }
        taken.extend(files.iter().map(|(h, _)| *h));
        companions.push(Companion {
            size: (bytes / opens.max(1)).max(1),
            evidence: format!(
                "{} files of {folder} read {opens} times while the data files were opened {} \
                 times, {named} of them named as data files: each sample's reader reads its \
                 file's companion, {} bytes an opening",
                files.len(),
                sample_openings,
                bytes / opens.max(1)
            ),
            folder: name,
        });
    }
    (companions, taken)
}

/// The checkpoint section: `workflow.checkpoint`, `checkpoint.steps_between_checkpoints` and
/// `model.model_size_bytes`, from the writes to `written` at a step rhythm.
pub(super) fn checkpoints(
    t: &Timeline,
    written: &[WrittenFile],
    activity: &Activity,
    readers: &Readers,
) -> Found {
    let mut found = Found::default();
    let (bursts, paused, ahead) = (&activity.bursts, activity.paused, &readers.ahead);
    if written.is_empty() {
        return found;
    }
    // Steps begin at the bursts between compute pauses, or at the training process's takes
    // when worker processes read for it (a take a step, counted over the whole run).
    // Readers that run ahead in threads of the training process have no takes: their steps
    // are the bursts too.
    let step_starts: Vec<i64> = match ahead.as_ref().and_then(|a| a.consumer.as_ref()) {
        Some(c) => c.take_starts.clone(),
        None if paused => bursts.iter().map(|b| b.start).collect(),
        None => Vec::new(),
    };
    // Step numbers in the files' names, when the steps taken agree with them, say more than a
    // rhythm of the writes against steps that a loader's early takes can shift.
    match checkpoints_named_by_step(t, written, &step_starts)
        .or_else(|| checkpoints_of(t, written, &step_starts))
    {
        Some(ck) => {
            found.param(
                "workflow.checkpoint",
                "True".into(),
                format!(
                    "{} files written while training, {} bytes in all",
                    written.len(),
                    written.iter().map(|w| w.bytes).sum::<u64>()
                ),
            );
            let steps = ck
                .after_steps
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let every = ck.every_steps;
            found.param(
                "checkpoint.steps_between_checkpoints",
                every.to_string(),
                if ck.named {
                    format!(
                        "files named after steps {steps} (the steps the training process took \
                         between them agree within 2x): one checkpoint every {every} steps; \
                         dlio counts steps within each epoch, as DLIO does, so it writes fewer \
                         when an epoch's steps are not a multiple of {every}"
                    )
                } else {
                    format!("writes after steps {steps}: one checkpoint every {every} steps")
                },
            );
            found.param(
                "model.model_size_bytes",
                ck.bytes.to_string(),
                format!(
                    "{} bytes written per checkpoint (median): dlio saves them as one flat \
                         model-state tensor per rank",
                    ck.bytes
                ),
            );
        }
        None => found.note(format!(
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
    found
}

/// Checkpoints whose paths count steps (`ckpt_00006.pt`, `ckpt_00012.pt`, ...;
/// `run/checkpoint-500/model.bin`, ...): tried before the writes' rhythm against the steps
/// found, which a loader that takes batches ahead of the steps it runs (PyTorch's, when they
/// come out of order) shifts. The number is the last run of digits in
/// each path; paths alike before it are one series, and the series must hold 3 or more
/// numbers `d` apart (the first a multiple of `d`). The steps taken between its first and last
/// write must be within 2x of what the numbers say, so that files numbered by epoch or by
/// version are not taken for step counts. Paths with a later constant number
/// (`model-00001-of-00004`) form no series: not recognised.
fn checkpoints_named_by_step(
    t: &Timeline,
    written: &[WrittenFile],
    step_starts: &[i64],
) -> Option<Checkpoints> {
    if step_starts.is_empty() {
        return None;
    }
    let (every_steps, series) = step_series(written.iter().map(|w| w.path.as_str()))?;
    // The first write of each checkpoint in the series, and its bytes.
    let members: HashMap<&str, u64> = series
        .iter()
        .map(|&(index, number)| (written[index].path.as_str(), number))
        .collect();
    let mut first_write: BTreeMap<u64, i64> = BTreeMap::new();
    for r in t.io() {
        if op(r) == Op::Write
            && let Some(&number) = members.get(t.path(r.file))
        {
            let at = first_write.entry(number).or_insert(r.start);
            *at = (*at).min(r.start);
        }
    }
    let (&first, &from) = first_write.first_key_value()?;
    let (&last, &to) = first_write.last_key_value()?;
    let taken = step_starts.iter().filter(|&&s| s > from && s <= to).count() as f64;
    let said = (last - first) as f64;
    if said <= 0.0 || taken < said / 2.0 || taken > said * 2.0 {
        return None;
    }
    let mut per_number: BTreeMap<u64, u64> = BTreeMap::new();
    for &(index, number) in &series {
        *per_number.entry(number).or_default() += written[index].bytes;
    }
    Some(Checkpoints {
        after_steps: per_number.keys().copied().collect(),
        every_steps,
        bytes: median_bytes(per_number.values().copied().collect()),
        named: true,
    })
}

/// The longest series of paths that differ only in their last run of digits, when its distinct
/// numbers (3 or more) are `d, 2d, ...` apart by one `d` with the first a multiple of it:
/// `d` and each member's (index, number).
fn step_series<'a>(paths: impl Iterator<Item = &'a str>) -> Option<(u64, Vec<(usize, u64)>)> {
    let mut by_prefix: HashMap<&str, Vec<(usize, u64)>> = HashMap::new();
    for (index, path) in paths.enumerate() {
        let Some(end) = path.rfind(|c: char| c.is_ascii_digit()) else {
            continue;
        };
        let start = path[..=end]
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        let Ok(number) = path[start..=end].parse::<u64>() else {
            continue;
        };
        // The text after the number may differ between the files of one checkpoint (a folder
        // per checkpoint); the series is named by what comes before it.
        by_prefix
            .entry(&path[..start])
            .or_default()
            .push((index, number));
    }
    by_prefix
        .into_values()
        .filter_map(|members| {
            let mut numbers: Vec<u64> = members.iter().map(|&(_, n)| n).collect();
            numbers.sort_unstable();
            numbers.dedup();
            if numbers.len() < 3 {
                return None;
            }
            let d = numbers[1] - numbers[0];
            let regular = d > 0
                && numbers[0].is_multiple_of(d)
                && numbers.windows(2).all(|w| w[1] - w[0] == d);
            regular.then_some((numbers.len(), d, members))
        })
        .max_by_key(|&(count, _, _)| count)
        .map(|(_, d, members)| (d, members))
}

/// Checkpoints read off the writes during training.
struct Checkpoints {
    /// 1-based steps after which writes happened.
    after_steps: Vec<u64>,
    every_steps: u64,
    /// Bytes written per checkpoint (median).
    bytes: u64,
    /// Read off the step numbers in the files' names, not the writes' rhythm.
    named: bool,
}

/// The median of checkpoint sizes (at least one).
fn median_bytes(mut sizes: Vec<u64>) -> u64 {
    sizes.sort_unstable();
    sizes[sizes.len() / 2]
}

/// The writes to `written` grouped by the step they follow (the last step that started
/// before them); `None` without steps, or when they follow no regular rhythm of two or more.
fn checkpoints_of(
    t: &Timeline,
    written: &[WrittenFile],
    step_starts: &[i64],
) -> Option<Checkpoints> {
    if step_starts.is_empty() {
        return None;
    }
    let paths: HashSet<&str> = written.iter().map(|w| w.path.as_str()).collect();
    let mut per_step: BTreeMap<u64, u64> = BTreeMap::new();
    for r in t.io() {
        if op(r) == Op::Write && r.bytes > 0 && paths.contains(t.path(r.file)) {
            let step = step_starts.partition_point(|&s| s <= r.start).max(1);
            *per_step.entry(step as u64).or_default() += r.bytes as u64;
        }
    }
    let after_steps: Vec<u64> = per_step.keys().copied().collect();
    let gaps: Vec<u64> = after_steps.windows(2).map(|w| w[1] - w[0]).collect();
    // A rhythm most of the gaps keep (more than half): at takes 11, 13, 20, 28, 30 a mode of
    // 2 held by half the gaps is no rhythm.
    let every_steps = mode(&gaps);
    if every_steps == 0 || gaps.iter().filter(|&&g| g == every_steps).count() * 2 <= gaps.len() {
        return None;
    }
    Some(Checkpoints {
        after_steps,
        every_steps,
        bytes: median_bytes(per_step.values().copied().collect()),
        named: false,
    })
}

/// Gives side files that share a name (each shard's `00000000.snapshot` in a folder of its
/// own) their folders' names too, then a number, so that each is a file of its own in the
/// replay rather than one file read for all of them.
fn unique_side_names(side_files: &mut [SideFileRow]) {
    let counts = |rows: &[SideFileRow]| {
        let mut n: HashMap<String, usize> = HashMap::new();
        for r in rows {
            *n.entry(r.name.clone()).or_default() += 1;
        }
        n
    };
    let shared = counts(side_files);
    for row in side_files.iter_mut().filter(|r| shared[&r.name] > 1) {
        let mut tail: Vec<&str> = row.path.rsplit('/').take(2).collect();
        tail.reverse();
        row.name = format!("side/{}", tail.join("/"));
    }
    let shared = counts(side_files);
    for (i, row) in side_files.iter_mut().enumerate() {
        if shared[&row.name] > 1 {
            row.name = format!("{}.{i}", row.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(paths: &[&str]) -> Option<(u64, Vec<u64>)> {
        step_series(paths.iter().copied())
            .map(|(d, members)| (d, members.iter().map(|&(_, n)| n).collect()))
    }

    #[test]
    fn side_files_of_one_name_keep_their_folders_names_apart() {
        let row = |path: &str| SideFileRow {
            path: path.into(),
            name: format!("side/{}", path.rsplit('/').next().unwrap()),
            size: 1,
            reads: 2,
            every_steps: 1,
        };
        let mut rows = [
            row("/d/val/1.shard/00000000.snapshot"),
            row("/d/val/2.shard/00000000.snapshot"),
            row("/d/meta/spec.pb"),
            row("/x/a/1.shard/00000000.snapshot"),
        ];
        unique_side_names(&mut rows);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "side/1.shard/00000000.snapshot.0",
                "side/2.shard/00000000.snapshot",
                "side/spec.pb",
                "side/1.shard/00000000.snapshot.3",
            ]
        );
    }

    #[test]
    fn files_numbered_every_d_steps_form_a_series() {
        let names = [
            "c/ckpt_00006.pt",
            "c/ckpt_00012.pt",
            "c/ckpt_00018.pt",
            "c/ckpt_00024.pt",
        ];
        assert_eq!(series(&names), Some((6, vec![6, 12, 18, 24])));
        // One folder per checkpoint, several files in each: one series by the folder's number.
        let folders = [
            "out/checkpoint-500/model.bin",
            "out/checkpoint-500/optimizer.pt",
            "out/checkpoint-1000/model.bin",
            "out/checkpoint-1000/optimizer.pt",
            "out/checkpoint-1500/model.bin",
        ];
        assert_eq!(series(&folders).map(|(d, _)| d), Some(500));
    }

    #[test]
    fn irregular_short_or_unnumbered_files_form_none() {
        // Two files are no series; numbers at uneven distances, or a first number that is not
        // a multiple of the distance, are not a step count.
        assert_eq!(series(&["ckpt_6.pt", "ckpt_12.pt"]), None);
        assert_eq!(series(&["ckpt_6.pt", "ckpt_12.pt", "ckpt_20.pt"]), None);
        assert_eq!(series(&["ckpt_7.pt", "ckpt_12.pt", "ckpt_17.pt"]), None);
        assert_eq!(series(&["model.pt", "optimizer.pt", "state.pt"]), None);
        // Versions 1, 2, 3 form a series of 1: the caller's check against the steps taken
        // between the writes is what refuses it.
        assert_eq!(
            series(&["v1.pt", "v2.pt", "v3.pt"]).map(|(d, _)| d),
            Some(1)
        );
    }
}
