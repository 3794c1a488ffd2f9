//! Who reads and in which steps: the bursts of data reads between compute pauses, the batch,
//! the reading threads and processes, and whether they run ahead of the program (a framework
//! loader's workers) or read each batch when its step starts.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::consumer::{Consumer, Take};
use super::eval::EvalPass;
use super::samples::Samples;
use super::stream::{Stream, stream_steps};
use super::trace_view::{Burst, burst_of, bursts, writes_where, written_between};
use super::{Activity, Found, MIN_WRITTEN_BYTES, ReaderThread, Stats, mode, secs};
use crate::ingest::Rec;
use crate::timeline::Timeline;

/// The largest batch a load before training is replayed as: its samples are read in steps
/// of this many.
const MAX_PRELOAD_BATCH: u64 = 4096;

/// What the readers section found.
pub(super) struct Readers {
    /// Readers that run ahead of the program, when they do.
    pub ahead: Option<Ahead>,
    /// Samples per step.
    pub batch: u64,
    /// Steps found (0 when no pauses separate them).
    pub steps_found: u64,
    /// The threads that read data.
    pub threads: Vec<ReaderThread>,
    /// `reader.read_threads` (0: on the program's main thread).
    pub read_threads: u64,
    /// A stream's step, seconds: its compute, as the reads run ahead of it.
    pub stream_step_s: Option<f64>,
    /// One reading thread beside the main loop read batches ahead at the start (a producer
    /// filling a bounded queue): the first burst's extra batches are its prefetch, not steps
    /// read back to back.
    pub early_ahead: bool,
}

/// The readers section: `reader.batch_size`, `reader.read_threads`, `reader.read_ahead` and
/// `reader.prefetch_size`.
pub(super) fn readers(
    t: &Timeline,
    activity: &Activity,
    samples: &Samples,
    eval: &EvalPass,
) -> (Readers, Found) {
    let mut found = Found::default();
    let Activity {
        calls,
        reads,
        bursts,
        paused,
        ..
    } = activity;
    let paused = *paused;
    if let Some(stream) = &samples.stream {
        return stream_readers(activity, samples, stream);
    }
    let sample_events = &samples.events;
    // Steps and batch.
    let mut per_burst: Vec<u64> = vec![0; bursts.len()];
    for r in sample_events.iter() {
        per_burst[burst_of(bursts, r.start)] += 1;
    }
    let ahead = match &activity.consumer {
        Some(c) => consumer_ahead(t, activity, samples, eval, c),
        None => readers_ahead(
            calls,
            sample_events,
            paused.then(|| (mode(&per_burst), bursts.as_slice())),
        ),
    };
    let batch = if let Some(a) = &ahead {
        a.batch
    } else if paused {
        typical_count(&per_burst) * samples.unit_rows.max(1)
    } else if activity.preload {
        // One step reads the whole pass, as the program did before its first step: the
        // replay has no steps of reading the program did not have.
        (sample_events.len() as u64).clamp(1, MAX_PRELOAD_BATCH)
    } else {
        found.note(
            "no compute pauses between the data reads: the program is I/O bound (or computes \
             while it reads), so steps cannot be told apart; batch_size 1 and no compute time"
                .into(),
        );
        1
    };
    // No batch larger than an epoch: dlio would train no step at all.
    let batch = batch.min(samples.per_epoch().max(1));
    let steps_found = match &ahead {
        Some(a) => a.steps,
        None if paused => bursts.len() as u64,
        None => 0,
    };

    let Census {
        threads: reader_threads,
        processes,
        only_main,
        read_threads,
    } = census(&if samples.columnar.is_some() {
        // Row-group reads only: a thread that reads nothing but footers opens the files for
        // the readers (pyarrow reads a footer on the calling thread, the data on its own).
        samples.events.clone()
    } else {
        readers_reads(reads, &samples.events)
    });
    let batch_of_reads = "the samples opened between two compute pauses";
    found.param(
        "reader.batch_size",
        batch.to_string(),
        if let Some(a) = &ahead {
            match &a.consumer {
                Some(c) => format!(
                    "{} samples read for the {} batches the training process (pid {}) took \
                     from its workers' pipes",
                    sample_events.len(),
                    a.steps,
                    c.pid
                ),
                None if a.spread.is_some() => format!(
                    "{batch} samples in most of the steps' bursts of data reads, which the {} \
                     readers share",
                    a.readers
                ),
                None => format!(
                    "each of {} readers reads {batch} samples in most of its bursts ({} bursts \
                     in all): a reader loads whole batches",
                    a.readers, a.reader_bursts
                ),
            }
        } else if paused {
            format!(
                "{batch} samples in most of the {} bursts of data reads ({batch_of_reads})",
                bursts.len()
            )
        } else if activity.preload {
            format!(
                "the {} samples the program loaded before training, in one step (at most \
                 {MAX_PRELOAD_BATCH})",
                sample_events.len()
            )
        } else {
            "no compute pauses to group samples by".into()
        },
    );
    // A dlio reader thread reads whole batches: where an epoch is fewer steps than the
    // program had reading threads (an I/O pool fetching a whole epoch in one burst), the
    // threads beyond them would only open the files.
    // The census counts every thread that ever read, though, and a pipeline starts new ones
    // (tf.data's interleave, a file at a time in each place of its cycle, and more for the
    // inputs it opens ahead): as many stay as files were read at once, which dlio's readers
    // read side by side. Not for row groups, whose files every thread would open and read
    // the footers of.
    let epoch_steps = samples.per_epoch().div_ceil(batch.max(1)).max(1);
    let pooled = read_threads;
    let overcounted = read_threads > epoch_steps && ahead.is_none();
    let together = (overcounted && samples.columnar.is_none())
        .then(|| files_at_once(&readers_reads(reads, &samples.events), bursts))
        .filter(|&n| n > 0);
    let read_threads = match together {
        Some(n) => n.min(read_threads),
        None if overcounted => epoch_steps,
        None => read_threads,
    };
    // A producer beside the training loop whose first burst holds three batches or more
    // (see below): one thread, or threads of one process that take turns (a generator that
    // tf.data's runtime runs on one thread at a time, never two files in progress at once),
    // which the replay reads with one.
    // Not where the main thread is one of them: it reads for itself (a stager thread copying
    // files that the main thread then reads is two stages, not one producer).
    let takes_turns = read_threads > 1
        && processes == 1
        && reader_threads.iter().all(|r| r.pid != r.tid)
        && files_at_once(&readers_reads(reads, &samples.events), bursts) == 1;
    let early = (ahead.is_none() && paused && !only_main && (read_threads == 1 || takes_turns))
        .then(|| {
            // The first step period's samples, or the first burst's where reading them took
            // longer than a step (a generator's own work on each file).
            initial_samples(sample_events, batch).max(per_burst.first().copied().unwrap_or(0))
        })
        .filter(|&initial| initial >= 3 * batch.max(1));
    let read_threads = if early.is_some() { 1 } else { read_threads };
    let fewer = match together {
        _ if early.is_some() && pooled > 1 => "; they took turns (never two files in \
            progress at once), and the first burst read ahead: 1 of them in the replay"
            .to_string(),
        _ if read_threads >= pooled => String::new(),
        Some(_) => format!(
            "; {read_threads} of them in the replay, as many files as were read at once in \
             most steps (each step's samples are spread over the replay's readers)"
        ),
        None => format!(
            "; {read_threads} of them in the replay, as an epoch is {epoch_steps} steps of \
             {batch} samples and a dlio reader thread reads whole batches"
        ),
    };
    found.param(
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
                "{} threads of one process read data ({}){}{fewer}",
                reader_threads.len(),
                reader_threads
                    .iter()
                    .map(|r| format!("tid {}: {} reads", r.tid, r.reads))
                    .collect::<Vec<_>>()
                    .join(", "),
                if pooled < reader_threads.len() as u64 {
                    format!(
                        ", {pooled} at a time (the others began after one had read its last: \
                         a thread started again)"
                    )
                } else {
                    String::new()
                }
            )
        },
    );
    let mut early_ahead = false;
    if let Some(a) = &ahead {
        found.param(
            "reader.read_ahead",
            "True".into(),
            if a.consumer.is_some() {
                "the worker processes read while the training process computes, which takes \
                 finished batches from a pipe"
                    .into()
            } else if let Some(share) = a.spread {
                format!(
                    "the readers share each batch ({:.0}% of the steps read by more than one) \
                     and its first step period holds {} batches: a pool reads ahead",
                    share * 100.0,
                    a.prefetch_per_reader
                )
            } else {
                "the readers' bursts are staggered, one whole batch each, and go on while the \
                 program computes"
                    .into()
            },
        );
        if let (Some(_), Some(c)) = (a.spread, &a.consumer) {
            // Ranks, each with a worker of its own: the replay's one rank reads each step's
            // batch as the ranks' shares side by side.
            found.param(
                "reader.spread_batches",
                "True".into(),
                format!(
                    "{} training processes (data-parallel ranks) take batches alike, each from \
                     a worker of its own: each step's batch is their shares, read side by side, \
                     one a reader",
                    a.readers
                ),
            );
            let ahead = c.in_flight.saturating_sub(1).max(1);
            found.param(
                "reader.prefetch_size",
                ahead.to_string(),
                format!(
                    "up to {} of a rank's batches were read or being read ahead of its takes: \
                     {ahead} asked for beyond the one a step waits for",
                    c.in_flight
                ),
            );
        } else if let Some(share) = a.spread {
            found.param(
                "reader.spread_batches",
                "True".into(),
                format!(
                    "{:.0}% of the steps were read by more than one of the {} readers: each \
                     batch's samples go to every reader",
                    share * 100.0,
                    a.readers
                ),
            );
            found.param(
                "reader.prefetch_size",
                a.prefetch_per_reader.to_string(),
                format!(
                    "the first step period holds {} batches: as many are asked for ahead",
                    a.prefetch_per_reader
                ),
            );
        } else {
            // dlio's reader thread holds ceil(prefetch_size / read_threads) finished batches
            // besides the one it reads.
            let queued = a.prefetch_per_reader.saturating_sub(1).max(1);
            let evidence = match &a.consumer {
                Some(c) => format!(
                    "up to {} batches were read or being read ahead of the training process's \
                     takes, {} per worker (as PyTorch's prefetch_factor counts them); a dlio \
                     reader thread keeps {queued} finished besides the one it reads",
                    c.in_flight, a.prefetch_per_reader
                ),
                None => format!(
                    "each reader's first burst holds {} batches: the {} in flight per reader \
                     (as PyTorch's prefetch_factor counts them) and the one asked for when the \
                     program took its first; a dlio reader thread keeps {queued} finished \
                     besides the one it reads",
                    a.prefetch_per_reader + 1,
                    a.prefetch_per_reader
                ),
            };
            found.param(
                "reader.prefetch_size",
                (queued * a.readers).to_string(),
                evidence,
            );
        }
    } else if let Some(initial) = early {
        // One thread beside the training loop (a producer filling a bounded queue) whose
        // first burst holds three batches or more: it read ahead until the queue was full,
        // then one batch each time the loop took one. dlio's reader keeps `prefetch_size`
        // finished batches besides the one handed over and the one it reads, so its first
        // burst is two batches more than that (one batch ahead, two in the first burst, is
        // replayed as a step read with the next, its pause 0: see the timing section).
        early_ahead = true;
        let batches = initial / batch.max(1);
        found.param(
            "reader.read_ahead",
            "True".into(),
            format!(
                "the one reading thread{} is not the program's main thread, and its first \
                 burst holds {batches} batches ({initial} samples) where the others hold one: \
                 it reads ahead of the steps",
                if pooled > 1 { " (one at a time)" } else { "" }
            ),
        );
        found.param(
            "reader.prefetch_size",
            batches.saturating_sub(2).max(1).to_string(),
            format!(
                "the first burst's {batches} batches: the one the first step took, the one the \
                 reader read while it waited for room, and those waiting between them"
            ),
        );
    } else if read_threads > 0 {
        found.param(
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

    (
        Readers {
            ahead,
            batch,
            steps_found,
            threads: reader_threads,
            read_threads,
            stream_step_s: None,
            early_ahead,
        },
        found,
    )
}

/// The readers of record streams: the interleave's files read at once, and the batch that
/// makes the epoch's records last the epoch at the stream's step.
fn stream_readers(activity: &Activity, samples: &Samples, stream: &Stream) -> (Readers, Found) {
    let mut found = Found::default();
    let census = census(&activity.reads);
    let steps = stream_steps(activity, samples.in_data_set, samples.epochs);
    let batch = steps.as_ref().map_or(1, |s| s.batch);
    found.param(
        "reader.batch_size",
        batch.to_string(),
        match &steps {
            Some(s) => format!(
                "{} records an epoch over {} steps of {:.3} ms (the shortest recurring pause; \
                 an epoch lasts {} of them): the batch whose steps cover the epoch",
                samples.in_data_set,
                s.steps_per_epoch,
                s.step_s * 1e3,
                s.steps_per_epoch
            ),
            None => "no pauses recur between the stream's reads: one record a step".into(),
        },
    );
    found.param(
        "reader.read_threads",
        stream.open_at_once.to_string(),
        format!(
            "{} files are read at once, taking turns (an interleave's cycle): dlio's pipeline \
             reads that many streams",
            stream.open_at_once
        ),
    );
    (
        Readers {
            ahead: None,
            batch,
            steps_found: steps
                .as_ref()
                .map_or(0, |s| s.steps_per_epoch * samples.epochs),
            threads: census.threads,
            read_threads: stream.open_at_once,
            stream_step_s: steps.map(|s| s.step_s),
            early_ahead: false,
        },
        found,
    )
}

/// The samples of a typical burst: the most frequent count when at least half of the bursts
/// have it (whole batches, a short last one), else the mean (a stream whose records straddle
/// the batches: 17 to 32 records a step, each count in few of them).
pub(super) fn typical_count(per_burst: &[u64]) -> u64 {
    let most = mode(per_burst);
    let with_most = per_burst.iter().filter(|&&n| n == most).count();
    if with_most * 2 >= per_burst.len() {
        return most.max(1);
    }
    let total: u64 = per_burst.iter().sum();
    ((total as f64 / per_burst.len().max(1) as f64).round() as u64).max(1)
}

/// The threads and processes that read data.
struct Census {
    threads: Vec<ReaderThread>,
    /// The most worker processes reading at one time.
    processes: usize,
    /// Every read is on the program's main thread.
    only_main: bool,
    /// `reader.read_threads` for them.
    read_threads: u64,
}

/// Who read data: a sample's reads are on the thread (and process) that opened it.
fn census(reads: &[&Rec]) -> Census {
    let mut threads: BTreeMap<(u32, u32), ReaderThread> = BTreeMap::new();
    for r in reads.iter() {
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
    let processes = concurrent_processes(reads);
    let only_main = reader_threads.len() == 1 && reader_threads[0].pid == reader_threads[0].tid;
    // A thread started again for each epoch (a producer thread of its own each time) is one
    // reader: the readers are the threads reading at the same time.
    let read_threads: u64 = if only_main {
        0
    } else if processes > 1 {
        processes as u64
    } else {
        most_alive_at_once(reads, |r| (r.rank, r.tid)) as u64
    };
    Census {
        threads: reader_threads,
        processes,
        only_main,
        read_threads,
    }
}

/// Readers that run ahead of the program, as a framework loader's workers do: each reader
/// loads whole batches in bursts of its own, staggered with the others'.
pub(super) struct Ahead {
    pub readers: u64,
    pub reader_bursts: u64,
    pub batch: u64,
    pub steps: u64,
    pub prefetch_per_reader: u64,
    pub period_s: f64,
    pub per_sample_s: f64,
    /// The readers' bursts' total length over readers and the training window.
    pub busy_share: f64,
    /// The steps as the training process took them, when worker processes read for it.
    pub consumer: Option<ConsumerSteps>,
    /// The readers share each batch (`reader.spread_batches`): the share of the steps in
    /// which more than one of them read.
    pub spread: Option<f64>,
}

/// The steps of a training process that takes batches from its worker processes.
pub(super) struct ConsumerSteps {
    /// Its process id.
    pub pid: u32,
    /// Its step (`mean`): the median over the groups of takes of the pause after each group
    /// divided by the takes in it ([`step_pauses`]); `stdev` is that of the most frequent
    /// steps (within [`STEP_CLUSTER_RATIO`] of each other).
    pub compute_s: Stats,
    /// Pauses left out: those holding an evaluation pass or a checkpoint.
    pub left_out: usize,
    /// Its own time inside a take, seconds, the mean over its training takes (see
    /// [`Consumer::own_work`](super::Consumer::own_work)): counted in its steps.
    pub own_s: f64,
    /// The most batches read or being read ahead of its takes.
    pub in_flight: u64,
    /// When each of its training takes began, nanoseconds, in time order (a batch a step).
    pub take_starts: Vec<i64>,
    /// A worker's own time per batch beyond its samples' (collating, handing the batch over),
    /// seconds, and the back-to-back batches it was measured on (see [`batch_work`]).
    pub batch_work: (f64, usize),
}

/// `reader.drop_last: False`: every sample of the data set was read in every epoch, and their
/// count is not a multiple of the batch, so each epoch's last, short batch was read too (a
/// PyTorch DataLoader's default); DLIO's loaders, and dlio by default, drop it. Samples that
/// stand for row groups or stream records are left to their formats.
pub(super) fn last_batch(samples: &Samples, readers: &Readers) -> Found {
    let mut found = Found::default();
    let batch = readers.batch.max(1);
    let every_sample_read =
        samples.epochs > 0 && samples.events.len() as u64 == samples.epochs * samples.in_data_set;
    if samples.unit_rows == 1
        && samples.stream.is_none()
        && samples.columnar.is_none()
        && every_sample_read
        && !samples.in_data_set.is_multiple_of(batch)
    {
        found.param(
            "reader.drop_last",
            "False".into(),
            format!(
                "each of the {} epochs read all {} samples, not a multiple of the batch ({batch}): \
                 its last batch of {} was read too",
                samples.epochs,
                samples.in_data_set,
                samples.in_data_set % batch
            ),
        );
    }
    found
}

/// Each step's time from a consumer's takes, and how many pauses `kept` refused.
///
/// A take is not always a step: a loader that keeps batches in order reads the batches that
/// come early at once, one after the other, and hands them over a step at a time later. So
/// takes come in groups (those less than a third of the most frequent pause, or of the mean
/// pause when that is longer, apart), and the
/// pause after a group of n takes is n steps: a step is that pause over n. `kept` says which
/// pauses count (not one holding an evaluation pass or a checkpoint, which the emulation has
/// keys of its own for).
///
/// With `one_run` (the training loop's takes, one stretch of steps save the pauses `kept`
/// refuses), the mean pause per take bounds the step from below too; an evaluation's takes
/// come in passes an epoch apart, whose mean says nothing of a step.
///
/// `own(take)` is the training process's own time inside a take (see
/// [`Consumer::own_work`](super::Consumer::own_work)): a group's step holds its takes' own
/// time with the pause after it, as the emulation hands a finished batch over at no cost.
pub(super) fn step_pauses(
    takes: &[Take],
    kept: impl Fn(i64, i64) -> bool,
    own: impl Fn(Take) -> i64,
    one_run: bool,
) -> (Vec<f64>, usize) {
    let pause = |from: i64, to: i64| secs(to - from);
    let all_pauses: Vec<f64> = takes.windows(2).map(|w| pause(w[0].1, w[1].0)).collect();
    // Groups are judged against the step: the most frequent pause, or the mean pause per take
    // where that is longer (slow workers hand early batches over one by one, a few
    // milliseconds apart, and those gaps become the most frequent).
    let kept_pauses: Vec<f64> = takes
        .windows(2)
        .filter(|w| kept(w[0].1, w[1].0))
        .map(|w| pause(w[0].1, w[1].0))
        .collect();
    let mean_pause = if one_run {
        Stats::of(&kept_pauses).mean
    } else {
        0.0
    };
    let together = Stats::of(&densest_cluster(&all_pauses, STEP_CLUSTER_RATIO))
        .median
        .max(mean_pause)
        / 3.0;
    let mut per_step: Vec<f64> = Vec::new();
    let mut left_out = 0usize;
    let mut group = 1usize;
    let mut group_own = takes.first().map_or(0, |&take| own(take));
    for w in takes.windows(2) {
        let (from, to) = (w[0].1, w[1].0);
        if pause(from, to) < together {
            group += 1;
            group_own += own(w[1]);
            continue;
        }
        if kept(from, to) {
            per_step.push((pause(from, to) + secs(group_own)) / group as f64);
        } else {
            left_out += 1;
        }
        group = 1;
        group_own = own(w[1]);
    }
    (per_step, left_out)
}

/// The widest ratio between the longest and the shortest pause of one step's cluster.
pub(super) const STEP_CLUSTER_RATIO: f64 = 1.25;

/// The values of the most crowded range whose largest is at most `ratio` times its smallest
/// (ties: the shorter values); none when `values` is empty.
fn densest_cluster(values: &[f64], ratio: f64) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| *x > 0.0).collect();
    v.sort_by(f64::total_cmp);
    let (mut best, mut end) = ((0usize, 0usize), 0usize);
    for start in 0..v.len() {
        end = end.max(start);
        while end < v.len() && v[end] <= v[start] * ratio {
            end += 1;
        }
        if end - start > best.1 - best.0 {
            best = (start, end);
        }
    }
    v[best.0..best.1].to_vec()
}

/// The reads of the threads that read on once the samples' reads have begun: a thread that
/// only read a header or an index before them (the main thread, before it starts a pool, or
/// the training process, learning a file's length before it forks its workers) is not a
/// reader.
fn readers_reads<'t>(reads: &[&'t Rec], sample_events: &[&Rec]) -> Vec<&'t Rec> {
    let Some(first) = sample_events.iter().map(|r| r.start).min() else {
        return reads.to_vec();
    };
    let reading: HashSet<(u32, u32)> = reads
        .iter()
        .filter(|r| r.start >= first)
        .map(|r| (r.rank, r.tid))
        .collect();
    reads
        .iter()
        .copied()
        .filter(|r| reading.contains(&(r.rank, r.tid)))
        .collect()
}

/// [`Ahead`] from the training process's takes: the batch is the samples read over the
/// batches taken, the readers are the worker processes alive at once, and the batches in
/// flight are the most that had begun to be read and were not yet taken at a take.
fn consumer_ahead(
    t: &Timeline,
    activity: &Activity,
    samples: &Samples,
    eval: &EvalPass,
    consumer: &Consumer,
) -> Option<Ahead> {
    let (takes, _) = consumer.split_takes(&activity.reads, &eval.files, t);
    let events = &samples.events;
    if takes.len() < 2 || events.is_empty() {
        return None;
    }
    // Reads per take, unrounded: a rounded one drifts over the takes (7 for 7.3 makes 9
    // batches in flight of 4 by the 96th take).
    let reads_per_take = events.len() as f64 / takes.len() as f64;
    let per_take = (reads_per_take.round() as u64).max(1);
    let mut begun: Vec<i64> = events.iter().map(|r| r.start).collect();
    begun.sort_unstable();
    // Batches begun and not yet taken at each take, at most. A batch counts as begun once a
    // quarter of its reads have: where reads per batch vary (rows a sieve window already
    // held), the first read of the next batch can come early by a fraction of one.
    let in_flight = takes
        .iter()
        .enumerate()
        .map(|(k, &(start, _))| {
            let n = begun.partition_point(|&b| b < start) as f64;
            ((n / reads_per_take - 0.25).ceil().max(0.0) as u64).saturating_sub(k as u64)
        })
        .max()
        .unwrap_or(1)
        .max(1);
    let readers = (concurrent_processes(&activity.reads) as u64).max(1);
    let written = writes_where(t, |r| r.rank == consumer.pid);
    let (per_step, left_out) = step_pauses(
        &takes,
        |from, to| {
            eval.within(from, to) == 0 && written_between(&written, from, to) < MIN_WRITTEN_BYTES
        },
        |take| consumer.own_work(take),
        true,
    );
    // The mean of the pauses within 25% of their median leaves out the pauses that waited for
    // a batch not yet read, as the median alone would, but keeps the lean of the steps' own
    // pauses: steps of 12 to 14 ms whose median was 12.3 ms made a replay 5% short. Around
    // the median, not the densest cluster: on a busy machine the densest 25% can be a run of
    // short pauses after long waits, which put a 15 ms step under 13.5 ms.
    let compute_s = {
        let steps = Stats::of(&per_step);
        let one_step = Stats::of(&densest_cluster(&per_step, STEP_CLUSTER_RATIO));
        let near: Vec<f64> = per_step
            .iter()
            .copied()
            .filter(|&p| {
                p * STEP_CLUSTER_RATIO >= steps.median && p <= steps.median * STEP_CLUSTER_RATIO
            })
            .collect();
        Stats {
            mean: if near.is_empty() {
                steps.median
            } else {
                Stats::of(&near).mean
            },
            stdev: one_step.stdev,
            ..steps
        }
    };
    // A worker's time from one sample to the next, less the sample's I/O calls: its own work
    // per sample (decoding, collating, handing over). The mean over the gaps inside its
    // batches (under a tenth of a step) leaves out the waits between them; a median would
    // miss work that falls between some reads only (a tar member parsed after its third
    // read).
    let mut by_reader: HashMap<u32, Vec<i64>> = HashMap::new();
    for r in events.iter() {
        by_reader.entry(r.rank).or_default().push(r.start);
    }
    let mut gaps: Vec<f64> = Vec::new();
    for starts in by_reader.values_mut() {
        starts.sort_unstable();
        gaps.extend(starts.windows(2).map(|w| secs(w[1] - w[0])));
    }
    let inside: Vec<f64> = gaps
        .iter()
        .copied()
        .filter(|&g| g < compute_s.mean / 10.0)
        .collect();
    // No two samples of a worker within a tenth of a step (a batch of one sample each): no
    // time between samples to measure. The median of the gaps would be the worker's wait for
    // room between its batches (37 ms of "work" a sample in one trace of
    // dlrm_criteo_bin_batches, where another trace of it gave 1.1 ms, and a replay 13 times
    // the program's length); its time per batch is measured apart (`batch_work`).
    let gap = if inside.is_empty() {
        0.0
    } else {
        Stats::of(&inside).mean
    };
    let io_per_sample = activity
        .reads
        .iter()
        .map(|r| secs(r.end - r.start))
        .sum::<f64>()
        / events.len() as f64;
    let working: f64 = gaps.iter().filter(|&&g| g <= 2.0 * gap).sum();
    let batch_work = batch_work(&activity.reads, events, per_take, compute_s.mean);
    let window = secs(activity.window.1 - activity.window.0).max(1e-9);
    Some(Ahead {
        readers,
        reader_bursts: takes.len() as u64,
        batch: ((samples.consumed() as f64 / takes.len() as f64).round() as u64).max(1)
            * samples.unit_rows.max(1),
        steps: takes.len() as u64,
        prefetch_per_reader: ((in_flight as f64 / readers as f64).round() as u64).max(1),
        period_s: compute_s.mean,
        per_sample_s: (gap - io_per_sample).max(0.0),
        busy_share: (working / readers as f64 / window).min(1.0),
        // Ranks of a data-parallel job, each fed by one worker of its own: every step's
        // batch is the ranks' shares, read side by side, one a reader.
        spread: (consumer.ranks > 1 && readers == consumer.ranks as u64).then_some(1.0),
        consumer: Some(ConsumerSteps {
            pid: consumer.pid,
            compute_s,
            left_out,
            own_s: takes
                .iter()
                .map(|&take| secs(consumer.own_work(take)))
                .sum::<f64>()
                / takes.len() as f64,
            in_flight,
            take_starts: takes.iter().map(|&(start, _)| start).collect(),
            batch_work,
        }),
    })
}

/// A worker process's own time per batch beyond its samples': each worker's samples, in
/// order, cut into batches of `batch`; between two batches it read back to back (the next
/// began less than half a step, `step_s`, after the last read of the one before: the second
/// was already asked for, as a DataLoader's first `prefetch_factor` batches of each worker
/// are), the pause from the last read to the next batch's first call, less the median pause
/// between two samples of one batch (the loader's time per sample, replayed as the
/// preprocess time). The mean over those (they spread from a fraction of a millisecond to
/// several as the workers share the cores, and what they add up to sets how long the
/// prefetch at an epoch's start lasts), with their count; (0, 0) under three.
fn batch_work(reads: &[&Rec], events: &[&Rec], batch: u64, step_s: f64) -> (f64, usize) {
    let batch = batch.max(1) as usize;
    // Each worker's reads by start, with the furthest end reached so far at each.
    let mut last_read_end: HashMap<u32, Vec<(i64, i64)>> = HashMap::new();
    for r in reads {
        last_read_end
            .entry(r.rank)
            .or_default()
            .push((r.start, r.end));
    }
    for v in last_read_end.values_mut() {
        v.sort_unstable();
        let mut furthest = i64::MIN;
        for read in v.iter_mut() {
            furthest = furthest.max(read.1);
            read.1 = furthest;
        }
    }
    let mut by_worker: HashMap<u32, Vec<i64>> = HashMap::new();
    for e in events {
        by_worker.entry(e.rank).or_default().push(e.start);
    }
    // The furthest end of the worker's reads that began before `t`.
    let end_before = |rank: u32, t: i64| -> Option<i64> {
        let v = last_read_end.get(&rank)?;
        let i = v.partition_point(|&(s, _)| s < t);
        i.checked_sub(1).map(|i| v[i].1)
    };
    let (mut within, mut between) = (Vec::new(), Vec::new());
    for (&rank, starts) in by_worker.iter_mut() {
        starts.sort_unstable();
        for (i, w) in starts.windows(2).enumerate() {
            let Some(end) = end_before(rank, w[1]) else {
                continue;
            };
            let pause = secs(w[1] - end);
            if (i + 1) % batch != 0 {
                within.push(pause.max(0.0));
            } else if pause < 0.5 * step_s {
                between.push(pause.max(0.0));
            }
        }
    }
    if between.len() < 3 {
        return (0.0, 0);
    }
    let per_sample = Stats::of(&within).median;
    (
        (Stats::of(&between).mean - per_sample).max(0.0),
        between.len(),
    )
}

/// [`Ahead`] when two or more readers each read whole batches in bursts of their own. When all
/// reads together pause too, the samples in most of a reader's bursts must be the samples in
/// most bursts of all reads (`samples_per_burst`): a pool that splits each batch over its
/// threads has each thread read only its share.
pub(super) fn readers_ahead(
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
        let (rb, paused) = bursts(by_reader.get(reader)?, &[], &[]);
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
    // A pool whose threads share each batch has several readers at each step (the step waits
    // for all of them before its compute); readers that run ahead read a batch each, alone,
    // taking turns. Told apart by who reads together, which a busy machine does not change:
    // it stretches and shifts the threads' bursts, not the step's wait for all of them.
    let lockstep = lockstep_share(&per_reader_bursts);
    let shared = match global {
        Some((_, all)) => lockstep.max(shared_burst_share(all, calls)),
        None => lockstep,
    };
    let start = calls.first()?.start;
    let end = calls.iter().map(|r| r.end).max()?;
    let readers = samples_of.len() as u64;
    // A pool that shares each batch and also reads ahead of the steps (a thread pool given a
    // task per sample, several batches submitted ahead; tf.data's parallel map): its first
    // step period holds several batches.
    if let Some((per_burst, all)) = global
        && shared >= SPREAD_SHARE
        && per_burst >= 2
        && all.len() >= MIN_SPREAD_STEPS
    {
        let initial = initial_samples(samples, per_burst);
        if initial > per_burst + per_burst / 2 {
            let steps = ((samples.len() as f64 / per_burst as f64).round() as u64).max(1);
            // A step's burst over its samples, each thread taking its share: the pool's time
            // per sample outside the I/O calls, as one of its threads spends it.
            let mut lengths: Vec<f64> = all.iter().map(|b| secs(b.end - b.start)).collect();
            lengths.sort_by(f64::total_cmp);
            let io_per_sample = samples.iter().map(|r| secs(r.end - r.start)).sum::<f64>()
                / samples.len().max(1) as f64;
            let per_thread = per_burst.div_ceil(readers).max(1) as f64;
            // The step: the median time from one step's burst to the next. The window over
            // the steps would be short by the batches read ahead at each epoch's start, whose
            // steps come after the epoch's last read.
            let mut periods: Vec<f64> = all
                .windows(2)
                .map(|w| secs(w[1].start - w[0].start))
                .collect();
            periods.sort_by(f64::total_cmp);
            let period_s = periods
                .get(periods.len() / 2)
                .copied()
                .unwrap_or(secs(end - start) / steps as f64);
            return Some(Ahead {
                readers,
                reader_bursts: bursts_seen,
                batch: per_burst,
                steps,
                prefetch_per_reader: ((initial as f64 / per_burst as f64).round() as u64).max(1),
                period_s,
                per_sample_s: (lengths[lengths.len() / 2] / per_thread - io_per_sample).max(0.0),
                busy_share: busy as f64 / readers as f64 / (end - start).max(1) as f64,
                consumer: None,
                spread: Some(shared),
            });
        }
    }
    if shared > 0.5 {
        return None;
    }
    let batch = mode(&counts).max(1);
    if samples_per_burst.is_some_and(|n| n != batch) || batch < 2 {
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
        consumer: None,
        spread: None,
    })
}

/// The least share of steps read by more than one reader for a pool that reads ahead to
/// share its batches: a GIL-bound pool has one thread take a whole batch now and then (half of
/// the steps, on 2 busy cores), workers that take turns overlap at a tenth or so.
const SPREAD_SHARE: f64 = 0.3;

/// The fewest steps' bursts for a pool's read-ahead to be told from its steps: with a few
/// (an epoch a burst), the first step period is a guess.
const MIN_SPREAD_STEPS: usize = 8;

/// The files read at once in most bursts: in each burst, the number of openings (a thread's
/// reads of one file) in progress for the longer half of the time some are, each from its
/// second read on where it makes several (a pipeline's prefetched input reads its first
/// buffer long before its turn); the median over the bursts that hold reads.
fn files_at_once(reads: &[&Rec], bursts: &[Burst]) -> u64 {
    // (burst, pid, tid, file): an opening's reads, as (start, end).
    type Opening = (usize, u32, u32, u64);
    let mut openings: BTreeMap<Opening, Vec<(i64, i64)>> = BTreeMap::new();
    for r in reads {
        openings
            .entry((burst_of(bursts, r.start), r.rank, r.tid, r.file))
            .or_default()
            .push((r.start, r.end));
    }
    let mut edges: BTreeMap<usize, Vec<(i64, i32)>> = BTreeMap::new();
    for ((burst, ..), mut spans) in openings {
        spans.sort_unstable();
        let from = if spans.len() > 2 { 1 } else { 0 };
        let start = spans[from].0;
        let end = spans.iter().map(|s| s.1).max().unwrap_or(start);
        edges
            .entry(burst)
            .or_default()
            .extend([(start, 1), (end, -1)]);
    }
    let mut levels: Vec<u64> = edges
        .into_values()
        .filter_map(|mut edges| {
            // Ends sort before starts at the same instant.
            edges.sort_unstable();
            let mut time_at: BTreeMap<u64, i64> = BTreeMap::new();
            let mut level = 0i32;
            for pair in edges.windows(2) {
                level += pair[0].1;
                if level > 0 {
                    *time_at.entry(level as u64).or_default() += pair[1].0 - pair[0].0;
                }
            }
            // The level held, or exceeded, for half the time some opening was in progress.
            let total: i64 = time_at.values().sum();
            let mut above = 0;
            time_at
                .iter()
                .rev()
                .find(|&(_, &t)| {
                    above += t;
                    above * 2 >= total
                })
                .map(|(&level, _)| level)
        })
        .collect();
    levels.sort_unstable();
    levels.get(levels.len() / 2).copied().unwrap_or(0)
}

/// The most processes reading data at one time, each from its first data read to its last.
fn concurrent_processes(reads: &[&Rec]) -> usize {
    most_alive_at_once(reads, |r| (r.rank, 0))
}

/// The most readers, told apart by `reader` (a process, a thread), whose reads (from a
/// reader's first to its last) span the same instant.
fn most_alive_at_once(reads: &[&Rec], reader: impl Fn(&Rec) -> (u32, u32)) -> usize {
    let mut span: HashMap<(u32, u32), (i64, i64)> = HashMap::new();
    for r in reads {
        let s = span.entry(reader(r)).or_insert((r.start, r.end));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Op;

    /// A read of `file` by thread `tid`, from `start_ms` for 0.1 ms.
    fn read_by(tid: u32, file: u64, start_ms: f64) -> Rec {
        let start = (start_ms * 1e6) as i64;
        Rec {
            rank: 1,
            tid,
            start,
            end: start + 100_000,
            layer: 0,
            op: Op::Read as u8,
            item: false,
            fd: 3,
            file,
            offset: -1,
            bytes: 262_144,
            buf_page_offset: -1,
            untouched_pages: -1,
        }
    }

    #[test]
    fn files_read_at_once_leave_out_the_inputs_a_pipeline_opens_ahead() {
        // One burst: five files opened at 0 ms by five threads, each read once at once; files
        // 1 and 2 then stream 10 reads each to 100 ms, 3 and 4 from 100 to 200 ms, 5 alone
        // to 300 ms (an interleave of cycle 2 whose futures wait for their turn).
        let mut reads = Vec::new();
        for file in 1..=5u64 {
            reads.push(read_by(file as u32, file, 0.0));
            let from = [0.0, 0.0, 100.0, 100.0, 200.0][file as usize - 1];
            for i in 1..=10 {
                reads.push(read_by(file as u32, file, from + 10.0 * f64::from(i) - 5.0));
            }
        }
        let refs: Vec<&Rec> = reads.iter().collect();
        let one_burst = [Burst {
            start: 0,
            end: 300_000_000,
            busy: 0,
        }];
        assert_eq!(files_at_once(&refs, &one_burst), 2);
        // Without their first reads set apart, every file would seem to be read all along.
        let all_along: Vec<Rec> = (1..=5u64)
            .flat_map(|f| (0..10).map(move |i| read_by(f as u32, f, 30.0 * f64::from(i))))
            .collect();
        let refs: Vec<&Rec> = all_along.iter().collect();
        assert_eq!(files_at_once(&refs, &one_burst), 5);
    }

    #[test]
    fn a_reader_thread_started_again_each_epoch_is_one_reader() {
        // A producer thread of its own each epoch (tids 11, 12, 13 one after another), beside
        // a pool of two threads (21, 22) reading all along.
        let mut reads = Vec::new();
        for (epoch, tid) in [11u32, 12, 13].into_iter().enumerate() {
            for i in 0..10 {
                reads.push(read_by(tid, 1, 100.0 * epoch as f64 + 9.0 * f64::from(i)));
            }
        }
        let producers: Vec<&Rec> = reads.iter().collect();
        assert_eq!(census(&producers).read_threads, 1);
        assert_eq!(census(&producers).threads.len(), 3);
        for tid in [21, 22] {
            reads.extend((0..30).map(|i| read_by(tid, 2, 10.0 * f64::from(i))));
        }
        let with_pool: Vec<&Rec> = reads.iter().collect();
        assert_eq!(census(&with_pool).read_threads, 3);
    }

    /// Takes at the given moments (milliseconds), each lasting 10 us.
    fn takes(at_ms: &[f64]) -> Vec<Take> {
        at_ms
            .iter()
            .map(|ms| {
                let start = (ms * 1e6) as i64;
                (start, start + 10_000)
            })
            .collect()
    }

    #[test]
    fn a_step_is_the_pause_after_a_group_of_takes_over_the_takes_in_it() {
        // A step of 20 ms; batches that came early are taken three at once every third step.
        let mut at = Vec::new();
        for group in 0..8 {
            let t = 60.0 * f64::from(group);
            at.extend([t, t + 0.5, t + 1.0]);
        }
        let (per_step, left_out) = step_pauses(&takes(&at), |_, _| true, |_| 0, true);
        assert_eq!(left_out, 0);
        assert_eq!(per_step.len(), 7);
        let step = Stats::of(&per_step).median;
        assert!((step - 0.0197).abs() < 0.0005, "{step}");
    }

    #[test]
    fn slow_workers_handing_batches_over_apart_do_not_shrink_the_step_to_their_gaps() {
        // 40 steps of 20 ms in groups of 4 takes, the takes of a group 0.5-3 ms apart (most
        // often about 0.5 ms): the most frequent pause is within a group.
        let mut at = Vec::new();
        for group in 0..10 {
            let t = 80.0 * f64::from(group);
            at.extend([t, t + 0.5, t + 1.0, t + 4.0]);
        }
        let (per_step, _) = step_pauses(&takes(&at), |_, _| true, |_| 0, true);
        let step = Stats::of(&per_step).median;
        assert!((0.018..0.022).contains(&step), "{step}");
        // Judged by the most frequent pause alone (an evaluation's passes), the groups break
        // up and the step comes out as a gap within a group.
        let (per_step, _) = step_pauses(&takes(&at), |_, _| true, |_| 0, false);
        assert!(Stats::of(&per_step).median < 0.005);
    }
}
