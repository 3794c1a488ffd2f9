//! An evaluation pass: files of the data set's kind outside it (an `eval/` or `valid/` split),
//! or one such file that each window reads half of or more (a validation archive), read in
//! windows of their own between the training steps, as a framework's evaluation loop reads its
//! split after an epoch.

use std::collections::HashSet;

use super::trace_view::{DataSet, bursts, is_system_path};
use super::{Activity, Found, Stats, secs};
use crate::event::Op;
use crate::ingest::Rec;
use crate::timeline::{Timeline, op};

/// What the evaluation section found.
#[derive(Debug, Default)]
pub(super) struct EvalPass {
    /// The evaluation split's files.
    pub files: HashSet<u64>,
    /// Each window of evaluation reads: from its first call to its last, nanoseconds.
    pub windows: Vec<(i64, i64)>,
    /// Training samples read between two passes, when the passes follow steps rather than
    /// epochs (`evaluation.steps_between_evals`, written once the batch is known).
    pub samples_between: Option<u64>,
    /// A pass's compute per step (`evaluation.eval_time`), nanoseconds.
    pub step_ns: i64,
}

impl EvalPass {
    /// The time the evaluation passes inside the pause from `start` to `end` take,
    /// nanoseconds: each window of reads and the compute of its last step, which follows its
    /// last read (the replay, too, computes after each evaluation step's reads, the last one
    /// included).
    pub fn within(&self, start: i64, end: i64) -> i64 {
        self.windows
            .iter()
            .filter(|&&(s, e)| s >= start && e <= end)
            .map(|&(s, e)| (e - s + self.step_ns).min(end - s))
            .sum()
    }
}

/// The replay's training samples, which an evaluation split held in one file is cut into.
#[derive(Debug, Clone, Copy)]
pub(super) struct SampleShape<'f> {
    /// Bytes a sample of the replay reads (what the program's training read a sample).
    pub bytes: u64,
    /// Bytes of a sample's record (`dataset.record_length_bytes`): what `bytes` holds besides
    /// it (a header read first, a buffer's fill past the record) the replay reads again around
    /// a sample of a size of its own.
    pub record: u64,
    /// Samples a file of it holds.
    pub per_file: u64,
    /// The replay's format (`dataset.format`), whose files hold a sample's bytes and their own.
    pub format: &'f str,
}

/// How far the bytes of the replay's evaluation pass, in training samples, may be from the
/// program's before its samples take a size of their own (`dataset.record_length_bytes_eval`):
/// the data bytes' bound of `dlio fidelity`.
const EVAL_BYTES_TOLERANCE: f64 = 0.02;

/// The evaluation section: `workflow.evaluation`, `dataset.num_files_eval`,
/// `reader.batch_size_eval`, `evaluation.eval_time`, `evaluation.eval_after_epoch` and
/// `evaluation.epochs_between_evals`, when files of the data set's kind outside it are read
/// in windows with no training read inside (between epochs). A split held in one file is cut
/// into `shape`'s samples, with `evaluation.steps_per_eval` when a pass reads fewer than its
/// files hold.
pub(super) fn eval_pass(
    t: &Timeline,
    data: &DataSet,
    activity: &Activity,
    training_samples: &[&Rec],
    epochs: u64,
    windows_per_file: Option<u64>,
    shape: SampleShape<'_>,
) -> (EvalPass, Found) {
    let mut found = Found::default();
    let (start, end) = activity.window;
    // Calls on files of the data set's extension that are not its own, from the first
    // training read to the end of the run (the last pass follows the last training read).
    let kind = format!(".{}", data.extension);
    let candidate = |r: &Rec| {
        !data.holds(r.file) && {
            let path = t.path(r.file);
            path.ends_with(&kind) && !is_system_path(path)
        }
    };
    // Only files read and never written: a checkpoint of the same kind (np.save's .npy) is
    // not a split.
    let mut read_files: HashSet<u64> = HashSet::new();
    let mut written: HashSet<u64> = HashSet::new();
    for r in t.io().filter(|r| r.start >= start && candidate(r)) {
        match op(r) {
            Op::Read if r.bytes > 0 => {
                read_files.insert(r.file);
            }
            Op::Write => {
                written.insert(r.file);
            }
            _ => {}
        }
    }
    let calls: Vec<&Rec> = t
        .io()
        .filter(|r| {
            r.start >= start
                && candidate(r)
                && read_files.contains(&r.file)
                && !written.contains(&r.file)
        })
        .collect();
    let reads = calls
        .iter()
        .filter(|r| op(r) == Op::Read && r.bytes > 0)
        .count();
    if reads == 0 {
        return (EvalPass::default(), found);
    }
    // Windows: runs of candidate calls with no training call between them.
    let training: Vec<i64> = activity.calls.iter().map(|r| r.start).collect();
    let mut windows: Vec<(i64, i64, Vec<&Rec>)> = Vec::new();
    for r in &calls {
        let split = windows.last().is_none_or(|(_, last_end, _)| {
            let from = training.partition_point(|&s| s < *last_end);
            training.get(from).is_some_and(|&s| s < r.start)
        });
        if split {
            windows.push((r.start, r.end, vec![*r]));
        } else if let Some(w) = windows.last_mut() {
            w.1 = w.1.max(r.end);
            w.2.push(r);
        }
    }
    // A side file read at every step (or every few) makes a window per read, each between
    // two bursts of training reads: an evaluation pass reads a split's files together, in
    // fewer windows than the epochs give room for.
    let files: HashSet<u64> = calls.iter().map(|r| r.file).collect();
    let window_files: Vec<usize> = windows
        .iter()
        .map(|(_, _, c)| c.iter().map(|r| r.file).collect::<HashSet<_>>().len())
        .collect();
    let passes = windows.len() as u64;
    let starts: Vec<i64> = windows.iter().map(|&(s, _, _)| s).collect();
    let samples_between = between_steps(training_samples, epochs, &starts);
    // A split held in one file (a validation archive, a test batch file): each pass sweeps
    // it, half of its bytes or more, where a side file's visits read a part each.
    let window_bytes: Vec<u64> = windows
        .iter()
        .map(|(_, _, c)| {
            c.iter()
                .filter(|r| op(r) == Op::Read && r.bytes > 0)
                .map(|r| r.bytes as u64)
                .sum()
        })
        .collect();
    let one_file = match files.iter().next() {
        Some(f) if files.len() == 1 => {
            let size = data.totals.get(f).map_or(0, |t| t.size);
            size > 0 && window_bytes.iter().all(|&b| b * 2 >= size)
        }
        _ => false,
    };
    if (files.len() < 2 && !one_file)
        || (samples_between.is_none() && passes > epochs.max(1) + 1)
        || (!one_file && window_files.iter().any(|&n| n < 2))
    {
        return (EvalPass::default(), found);
    }
    // Steps of a pass: its bursts between pauses, as the training's are found.
    let (mut samples_per_step, mut pauses) = (Vec::new(), Vec::new());
    for (_, _, c) in &windows {
        let (steps, paused) = bursts(c, &[], &[]);
        let opens = |from: i64, to: i64| {
            c.iter()
                .filter(|r| op(r) == Op::Open && r.start >= from && r.start <= to)
                .count() as u64
        };
        if paused {
            samples_per_step.extend(steps.iter().map(|b| opens(b.start, b.end)));
            pauses.extend(steps.windows(2).map(|w| secs(w[1].start - w[0].end)));
        } else {
            samples_per_step.push(opens(i64::MIN, i64::MAX));
        }
    }
    let mut batch = super::mode(&samples_per_step).max(1);
    let mut eval_time = Stats::of(&pauses).median;
    let mut step_evidence = format!("{batch} files opened in most steps of an evaluation pass");
    let mut time_evidence = format!(
        "the median pause between an evaluation pass's steps ({} pauses)",
        pauses.len()
    );
    // Worker processes read the split ahead of the training process, which takes each batch
    // from a pipe: the steps are its takes, as the training's are.
    let mut takes_in_passes = 0u64;
    if let Some(c) = &activity.consumer {
        let (_, takes) = c.split_takes(&activity.reads, &files, t);
        takes_in_passes = takes.len() as u64;
        let opened = calls.iter().filter(|r| op(r) == Op::Open).count();
        let (per_step, _) =
            super::readers::step_pauses(&takes, |_, _| true, |take| c.own_work(take), false);
        if takes.len() >= 2 && opened > 0 && !per_step.is_empty() {
            batch = ((opened as f64 / takes.len() as f64).round() as u64).max(1);
            eval_time = Stats::of(&per_step).median;
            step_evidence = format!(
                "{opened} files of the split opened for the {} batches the training process \
                 (pid {}) took from its workers' pipes while it evaluated",
                takes.len(),
                c.pid
            );
            time_evidence = format!(
                "the median step of the training process between its takes while it \
                 evaluated ({} pauses, each after a group of takes over the takes in it)",
                per_step.len()
            );
        }
    }
    // One file's samples are not its openings (one archive kept open, or a stream of it):
    // the replay's pass reads the bytes the program's did, in its own training samples, over
    // as many steps as the program's pass took.
    let mut num_files_eval = files.len() as u64;
    let mut steps_per_eval = None;
    let mut split_evidence = String::new();
    let mut eval_record_length = None;
    if one_file {
        let pass_bytes = median_pass_bytes(&window_bytes);
        let samples = (pass_bytes as f64 / shape.bytes.max(1) as f64)
            .round()
            .max(1.0) as u64;
        let measured_steps = if takes_in_passes >= 2 {
            // Worker processes read the split for the training process: a step a take.
            takes_in_passes.div_ceil(passes.max(1))
        } else {
            let steps: Vec<u64> = windows
                .iter()
                .map(|(_, _, c)| {
                    let (steps, paused) = bursts(c, &[], &[]);
                    if paused { steps.len() as u64 } else { 1 }
                })
                .collect();
            super::mode(&steps).max(1)
        };
        batch = samples.div_ceil(measured_steps).max(1);
        num_files_eval = samples.div_ceil(shape.per_file.max(1)).max(1);
        let whole = (num_files_eval * shape.per_file.max(1)).div_ceil(batch);
        let steps = samples.div_ceil(batch);
        if steps < whole {
            steps_per_eval = Some(steps);
        }
        // The replay's pass reads whole steps: `steps` of `batch`, up to what the split's
        // files hold, which can be more samples than `samples` (152 in 10 steps are 10 of
        // 16). Whole training samples that miss the pass's bytes (a validation shard smaller
        // than a training shard, a step's rounding): the split's samples take the size that
        // holds them.
        let read = (steps * batch).min(num_files_eval * shape.per_file.max(1));
        let own_size = own_sample_size(pass_bytes, read, shape);
        step_evidence = format!(
            "a pass over the split's one file reads {pass_bytes} bytes (the median of {passes} \
             passes) in {steps} steps: {samples} of the replay's samples, {batch} a step ({read} \
             read){}",
            match &own_size {
                Some(own) => format!(
                    ", each of {} bytes read where the training's read {} ({} in training \
                     samples would miss the pass by {:.0}%): dataset.record_length_bytes_eval \
                     {} makes the split's files hold them",
                    own.per_sample,
                    shape.bytes,
                    own.in_training_samples,
                    100.0 * own.miss,
                    own.bytes
                ),
                None => format!(" of {} bytes", shape.bytes),
            }
        );
        eval_record_length = own_size.map(|own| own.bytes);
        split_evidence = format!(
            "; held in one file, read {pass_bytes} bytes a pass: the replay's split is files of \
             {} samples each{} holding as many samples",
            shape.per_file,
            if eval_record_length.is_some() {
                ", of a size of their own,"
            } else {
                " (its training shape)"
            }
        );
    }
    let every = (epochs.max(1) as f64 / passes.max(1) as f64)
        .round()
        .max(1.0) as u64;
    found.param(
        "workflow.evaluation",
        "True".into(),
        format!(
            "{} files of .{} outside the data set read in {passes} windows of their own, with \
             no training read inside: an evaluation pass",
            files.len(),
            data.extension
        ),
    );
    found.param(
        "dataset.num_files_eval",
        num_files_eval.to_string(),
        format!("the evaluation split: {}{split_evidence}", {
            // In name order: the set's own order changes from run to run.
            let mut names: Vec<&str> = files.iter().map(|f| t.path(*f)).collect();
            names.sort_unstable();
            names.truncate(3);
            names.join(", ")
        }),
    );
    found.param("reader.batch_size_eval", batch.to_string(), step_evidence);
    if let Some(bytes) = eval_record_length {
        found.param(
            "dataset.record_length_bytes_eval",
            bytes.to_string(),
            "the split's samples are of a size of their own: what a sample of its pass read, \
             less what the replay's files hold besides their samples"
                .into(),
        );
    }
    if let Some(steps) = steps_per_eval {
        found.param(
            "evaluation.steps_per_eval",
            steps.to_string(),
            format!(
                "the pass reads {steps} steps of {batch}, fewer than the replay's split files \
                 hold: the bytes of the program's pass"
            ),
        );
    }
    // Samples that are windows of larger files: a pass that opened fewer of them than the
    // split's files hold read a part of the split (a loop's `eval_iters`), where DLIO's pass
    // reads every window the files hold.
    let mut windows_steps = None;
    if let Some(per_file) = windows_per_file.filter(|_| !one_file) {
        let opened: Vec<f64> = windows
            .iter()
            .map(|(_, _, c)| c.iter().filter(|r| op(r) == Op::Open).count() as f64)
            .collect();
        let per_pass = Stats::of(&opened).median.round() as u64;
        let steps = per_pass.div_ceil(batch);
        let whole = (files.len() as u64 * per_file).div_ceil(batch);
        if per_pass > 0 && steps < whole {
            windows_steps = Some(steps);
            found.param(
                "evaluation.steps_per_eval",
                steps.to_string(),
                format!(
                    "a pass opened {per_pass} windows (median of {passes} passes), {steps} \
                     steps of {batch}, where the split's {} files hold {whole} steps of them",
                    files.len()
                ),
            );
        }
    }
    // Files of the split read otherwise than the training's samples (whole, where training
    // takes a window of each): the replay's pass, in training samples, would miss the
    // program's bytes, so its samples take the size that carries them.
    if !one_file {
        let held = num_files_eval * shape.per_file.max(1);
        let samples = windows_steps
            .map_or(held, |steps| (steps * batch).min(held))
            .max(1);
        if let Some((bytes, evidence)) = own_eval_size(&window_bytes, samples, shape) {
            found.param(
                "dataset.record_length_bytes_eval",
                bytes.to_string(),
                evidence,
            );
        }
    }
    found.param(
        "evaluation.eval_time",
        format!("{eval_time:.6}"),
        time_evidence,
    );
    if samples_between.is_none() {
        found.param(
            "evaluation.eval_after_epoch",
            every.to_string(),
            format!("{passes} passes over {epochs} epochs"),
        );
        found.param(
            "evaluation.epochs_between_evals",
            every.to_string(),
            format!("a pass every {every} epochs"),
        );
    }
    let pass = EvalPass {
        files,
        windows: windows.iter().map(|&(s, e, _)| (s, e)).collect(),
        samples_between,
        step_ns: (eval_time * 1e9).round() as i64,
    };
    let _ = end;
    (pass, found)
}

/// The training samples read between two evaluation passes, when the passes follow training
/// steps rather than epochs: two or more passes, not all at an epoch's end (the samples read
/// before a pass a whole number of epochs, give or take a tenth of one, which a loader's
/// read-ahead adds), and as many samples before each pass as the one before, within a tenth.
fn between_steps(samples: &[&Rec], epochs: u64, pass_starts: &[i64]) -> Option<u64> {
    let mut starts: Vec<i64> = samples.iter().map(|r| r.start).collect();
    starts.sort_unstable();
    let per_epoch = (starts.len() as u64 / epochs.max(1)).max(1);
    let before: Vec<u64> = pass_starts
        .iter()
        .map(|&s| starts.partition_point(|&t| t < s) as u64)
        .collect();
    let tenth = per_epoch.div_ceil(10);
    let at_epoch_ends = before.iter().all(|&n| {
        let into = n % per_epoch;
        into <= tenth || into + tenth >= per_epoch
    });
    if before.len() < 2 || at_epoch_ends {
        return None;
    }
    let gaps: Vec<u64> = before
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    let regular = median > 0
        && gaps.iter().all(|&g| g.abs_diff(median) * 10 <= median)
        && before[0] + median / 10 >= median;
    regular.then_some(median)
}

/// The median of the passes' bytes (`window_bytes`, one entry a pass).
fn median_pass_bytes(window_bytes: &[u64]) -> u64 {
    Stats::of(&window_bytes.iter().map(|&b| b as f64).collect::<Vec<_>>())
        .median
        .round() as u64
}

/// An evaluation sample's size of its own, and what gave it.
#[derive(Debug)]
struct OwnSize {
    /// `dataset.record_length_bytes_eval`.
    bytes: u64,
    /// Bytes a sample of the pass read.
    per_sample: u64,
    /// What `samples` training samples would read.
    in_training_samples: u64,
    /// How far those miss the pass, a share of it.
    miss: f64,
}

/// The size of its own an evaluation sample takes when the replay's pass of `samples` training
/// samples would miss `pass_bytes` by more than [`EVAL_BYTES_TOLERANCE`]. `None` when training
/// samples carry the pass's bytes.
///
/// A training sample read `shape.bytes` for a record of `shape.record`: the difference is what
/// the replay reads besides a record (its file's header, a buffer's fill past it), and it reads
/// it around an evaluation record too, so the record is a pass's sample less it. Images, whose
/// record is a pixel count, take the count that encodes to the sample's bytes; samples that
/// read a part of their record, the record that holds the sample's bytes.
fn own_sample_size(pass_bytes: u64, samples: u64, shape: SampleShape<'_>) -> Option<OwnSize> {
    let samples = samples.max(1);
    let in_training_samples = samples * shape.bytes;
    let miss = in_training_samples.abs_diff(pass_bytes) as f64 / pass_bytes.max(1) as f64;
    if pass_bytes == 0 || miss <= EVAL_BYTES_TOLERANCE {
        return None;
    }
    let per_sample = pass_bytes.div_ceil(samples);
    let bytes = match shape.bytes.checked_sub(shape.record) {
        Some(besides) if !super::samples::is_image_format(shape.format) => {
            per_sample.saturating_sub(besides).max(1)
        }
        // A pixel count, or a training sample that read a part of its record (requests of a
        // fixed size): the record is the sample's bytes in the format's files.
        _ => {
            let per_file = shape.per_file.max(1);
            super::samples::sample_bytes_for_file(shape.format, per_sample * per_file, per_file)
        }
    };
    Some(OwnSize {
        bytes,
        per_sample,
        in_training_samples,
        miss,
    })
}

/// [`own_sample_size`] for a split of several files, whose passes read `window_bytes` in
/// `samples` of the replay's samples, with its evidence.
fn own_eval_size(
    window_bytes: &[u64],
    samples: u64,
    shape: SampleShape<'_>,
) -> Option<(u64, String)> {
    let pass_bytes = median_pass_bytes(window_bytes);
    let own = own_sample_size(pass_bytes, samples, shape)?;
    Some((
        own.bytes,
        format!(
            "a pass read {pass_bytes} bytes (the median of {} passes) where {samples} of the \
             replay's training samples read {} ({:.0}% off): each of its {samples} samples \
             reads {} bytes, a record of {} and the {} a training sample read besides its \
             record",
            window_bytes.len(),
            own.in_training_samples,
            100.0 * own.miss,
            own.per_sample,
            own.bytes,
            shape.bytes.saturating_sub(shape.record)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_holding_a_pass_loses_the_pass_and_its_last_steps_compute() {
        const MS: i64 = 1_000_000;
        // A pass read from 20 to 50 ms, 4 ms of compute a step: a training pause from 8 to
        // 70 ms holds 12 ms of training compute, the pass and its last step's 4 ms.
        let pass = EvalPass {
            windows: vec![(20 * MS, 50 * MS)],
            step_ns: 4 * MS,
            ..EvalPass::default()
        };
        assert_eq!(pass.within(8 * MS, 70 * MS), 34 * MS);
        // Never more than the pause holds after the pass begins.
        assert_eq!(pass.within(8 * MS, 52 * MS), 32 * MS);
        // A pause that holds no pass loses nothing.
        assert_eq!(pass.within(60 * MS, 90 * MS), 0);
    }

    #[test]
    fn a_split_read_whole_where_training_reads_windows_takes_samples_of_its_own_size() {
        // Training reads a 30,000-byte window of each file, and 6,000 bytes around it (a
        // header, a buffer's fill); each evaluation pass reads ten files whole, ~1 MB.
        let shape = SampleShape {
            bytes: 36_000,
            record: 30_000,
            per_file: 5,
            format: "indexed_binary",
        };
        let (bytes, evidence) = own_eval_size(&[990_000, 1_000_000, 1_010_000], 10, shape).unwrap();
        // 100,000 bytes a sample, less the 6,000 the replay reads around each record.
        assert_eq!(bytes, 94_000, "{evidence}");
        // Passes the training samples carry to within 2% keep them.
        assert!(own_eval_size(&[360_000, 365_000], 10, shape).is_none());
        assert!(own_eval_size(&[0, 0], 10, shape).is_none());
    }

    #[test]
    fn an_evaluation_record_keeps_what_its_training_sample_read_besides_the_record() {
        // A tar.gz read whole, replayed by npy files: the record is the file less its 128-byte
        // header, which the replay reads again around an evaluation record.
        let npy = SampleShape {
            bytes: 1_560_126,
            record: 1_559_998,
            per_file: 1,
            format: "npy",
        };
        let own = own_sample_size(1_039_152, 1, npy).unwrap();
        assert_eq!((own.bytes, own.per_sample), (1_039_024, 1_039_152));
        // A pass of 160 samples whose training samples (47,597 bytes read, 2,041 of them a
        // buffer's fills past the record) would read 5% more than the pass's 7,219,535.
        let stream = SampleShape {
            bytes: 47_597,
            record: 45_556,
            per_file: 302,
            format: "indexed_binary",
        };
        let own = own_sample_size(7_219_535, 160, stream).unwrap();
        assert_eq!(own.bytes, 45_123 - 2_041);
        assert!(own_sample_size(7_219_535, 152, stream).is_none());
    }
}
