//! What else the program reads and writes while it trains: side files read again and again
//! (metadata, index files) and files written (checkpoints).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::eval::EvalPass;
use super::output::yaml_string;
use super::readers::Readers;
use super::trace_view::{DataSet, is_system_path};
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
    #[derive(Default)]
    struct During {
        opens: u64,
        read_bytes: u64,
        written: u64,
        writes: u64,
    }
    let mut during: HashMap<u64, During> = HashMap::new();
    for r in t.io() {
        if r.start < window_start
            || r.start > window_end
            || data.holds(r.file)
            || eval.files.contains(&r.file)
        {
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
    let step_starts: Vec<i64> = match ahead {
        Some(a) => a
            .consumer
            .as_ref()
            .map(|c| c.take_starts.clone())
            .unwrap_or_default(),
        None if paused => bursts.iter().map(|b| b.start).collect(),
        None => Vec::new(),
    };
    match checkpoints_of(t, written, &step_starts) {
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
            found.param(
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

/// Checkpoints read off the writes during training.
struct Checkpoints {
    /// 1-based steps after which writes happened.
    after_steps: Vec<u64>,
    every_steps: u64,
    /// Bytes written per checkpoint (median).
    bytes: u64,
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
