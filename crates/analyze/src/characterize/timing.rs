//! How long compute and loading take: the compute between steps (or the step period of
//! readers that run ahead), and the loader's own time per sample inside a step's loading.

use super::consumer::Consumer;
use super::eval::EvalPass;
use super::readers::{Ahead, ConsumerSteps, Readers, STEP_CLUSTER_RATIO};
use super::samples::{Samples, generation_starts, generations};
use super::trace_view::written_between;
use super::{Activity, Found, MIN_GAP_RATIO, MIN_PREPROCESS_S, MIN_WRITTEN_BYTES, Stats, secs};
use crate::ingest::Rec;

/// What the timing section found.
pub(super) struct Timing {
    /// Compute between steps, seconds.
    pub compute_s: Stats,
    /// Each step's loading time, seconds.
    pub fetch_s: Stats,
    /// Loading time of each step in order, seconds.
    pub step_fetch_s: Vec<f64>,
    /// Compute after each step in order, seconds (none when no pauses separate steps).
    pub step_compute_s: Vec<f64>,
}

/// The timing section: `train.epochs`, `train.computation_time` and `reader.preprocess_time`.
///
/// One piece (about 320 lines) on purpose: compute between steps, the loader's time per
/// sample and the preprocess time are read off the same pauses and bursts in turn, each
/// correcting the next, and end in one `Timing` and its reasons.
pub(super) fn timing(
    activity: &Activity,
    (samples, readers, eval): (&Samples, &Readers, &EvalPass),
    work_inside_s: f64,
    epochs_start_up: bool,
) -> (Timing, Found) {
    let mut found = Found::default();
    let Activity {
        calls,
        window: (window_start, window_end),
        bursts,
        paused,
        ..
    } = activity;
    let paused = *paused;
    let Samples {
        events: sample_events,
        in_data_set: samples_in_data_set,
        epochs,
        ..
    } = samples;
    let Readers {
        ahead,
        batch,
        read_threads,
        ..
    } = readers;
    let (batch, read_threads) = (*batch, *read_threads);
    let unit_rows = samples.unit_rows.max(1);
    // Time: compute between bursts, the loader's own time per sample inside them.
    let compute: Vec<f64> = bursts
        .windows(2)
        .map(|w| secs(w[1].start - w[0].end))
        .collect();
    let fetch: Vec<f64> = bursts.iter().map(|b| secs(b.end - b.start)).collect();
    // The compute between steps: the pauses without an evaluation pass in them, less the few
    // far from the rest (a garbage collection, a checkpoint), which a normal law's stdev
    // would spread over every step.
    // Pauses that held a checkpoint's writes are left out too: the replay writes its own
    // checkpoint at that step, in its own time, besides the compute.
    let with_checkpoint =
        |from: i64, to: i64| written_between(&activity.written, from, to) >= MIN_WRITTEN_BYTES;
    let checkpointed = bursts
        .windows(2)
        .filter(|w| with_checkpoint(w[0].end, w[1].start))
        .count();
    // Where `reader.epoch_start_time` replays the loader's start-up for each epoch, the
    // pauses before an epoch's first sample, which hold it, are left out as well.
    let epoch_firsts: Vec<i64> = {
        let per_epoch = (*samples_in_data_set).max(1) as usize;
        if epochs_start_up
            && samples.stream.is_none()
            && *epochs >= 2
            && sample_events.len() == per_epoch * *epochs as usize
        {
            epoch_firsts(sample_events, per_epoch)
                .into_iter()
                .skip(1)
                .collect()
        } else {
            Vec::new()
        }
    };
    let opens_an_epoch =
        |b: &super::trace_view::Burst| epoch_firsts.iter().any(|&f| f >= b.start && f <= b.end);
    // A reader that runs ahead of the steps (a producer whose first burst filled its queue)
    // reads each batch while the program computes, once the program took one and made room:
    // the program's step is from one burst's start to the next's, its reads inside it.
    let step_from = |b: &super::trace_view::Burst| {
        if readers.early_ahead { b.start } else { b.end }
    };
    // Its first burst fills the queue while the first steps compute: not a step of its own.
    let filling = usize::from(readers.early_ahead);
    let training_pauses: Vec<f64> = bursts
        .windows(2)
        .skip(filling)
        .filter(|w| !with_checkpoint(w[0].end, w[1].start) && !opens_an_epoch(&w[1]))
        .map(|w| secs(w[1].start - step_from(&w[0]) - eval.within(w[0].end, w[1].start)))
        .collect();
    let with_eval = bursts
        .windows(2)
        .filter(|w| eval.within(w[0].end, w[1].start) > 0)
        .count();
    let (steady, outliers) = steady_values(&training_pauses);
    let compute_s = match &ahead {
        Some(Ahead {
            consumer: Some(c), ..
        }) => c.compute_s,
        Some(a) => Stats::of(&vec![a.period_s; a.steps as usize]),
        None if paused => Stats::of(&steady),
        None => Stats::default(),
    };
    let fetch_s = Stats::of(&fetch);
    found.param(
        "train.epochs",
        epochs.to_string(),
        format!(
            "{} samples read for {} in the data set",
            sample_events.len(),
            samples_in_data_set
        ),
    );
    if let Some(step_s) = readers.stream_step_s {
        found.param(
            "train.computation_time",
            format!("{step_s:.6}"),
            "the stream's step: its reads run ahead of the steps, so the step is the compute"
                .into(),
        );
    } else if let Some(a) = &ahead {
        if let Some(c) = &a.consumer {
            found.param(
                "train.computation_time",
                stats_value(&c.compute_s),
                format!(
                    "the training process (pid {}) takes one batch a step, some at once (a \
                     loader that keeps batches in order reads those that come early together): \
                     of {} pauses after a group of takes, each over the takes in its group ({} \
                     holding an evaluation pass or a checkpoint left out) and with its own time \
                     inside them ({:.3} ms a take: reading a batch its workers had already \
                     written off the pipe, unpickling it, collating samples taken one by one), \
                     the mean of those within {:.0}% of their median is a step's compute and \
                     the loader's work in that process, {:.3} ms; stdev {:.3} ms",
                    c.pid,
                    c.compute_s.count,
                    c.left_out,
                    c.own_s * 1e3,
                    (STEP_CLUSTER_RATIO - 1.0) * 100.0,
                    c.compute_s.mean * 1e3,
                    c.compute_s.stdev * 1e3,
                ),
            );
        } else if a.spread.is_some() {
            found.param(
                "train.computation_time",
                format!("{:.6}", a.period_s),
                format!(
                    "the median time from one step's burst of reads to the next, {:.3} ms: the \
                     pool reads ahead, so the step is the compute",
                    a.period_s * 1e3
                ),
            );
        } else {
            found.param(
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
        }
        // The work between a sample's own requests is replayed inside its read.
        let per_sample_s = (a.per_sample_s - work_inside_s).max(0.0);
        if per_sample_s >= MIN_PREPROCESS_S {
            loader_work(
                &mut found,
                per_sample_s,
                a.readers,
                a.consumer.is_some(),
                format!(
                    "a reader's burst of {batch} samples holds {:.3} ms between two samples \
                     outside the I/O calls{}: the loader's own work (decoding, the interpreter)",
                    per_sample_s * 1e3,
                    if work_inside_s > 0.0 {
                        format!(
                            " besides the {:.3} ms between a sample's own requests",
                            work_inside_s * 1e3
                        )
                    } else {
                        String::new()
                    }
                ),
            );
        }
        if let Some(c) = &a.consumer
            && c.batch_work.0 >= MIN_BATCH_WORK_S
        {
            found.param(
                "reader.batch_time",
                format!("{:.6}", c.batch_work.0),
                format!(
                    "between {} pairs of batches a worker process read back to back (the second \
                     already asked for), it paused {:.3} ms (mean) more than between two \
                     samples of a batch: its own time per batch (collating it, handing it over \
                     through its pipe)",
                    c.batch_work.1,
                    c.batch_work.0 * 1e3
                ),
            );
        }
        if a.busy_share > 0.9 {
            found.note(format!(
                "the readers were busy {:.0}% of the time: the program may be I/O bound, and \
                 its compute per step shorter than the step period written",
                a.busy_share * 100.0
            ));
        }
    } else if activity.preload {
        // The steps from memory read nothing: their time, after the load's last read, is the
        // compute of the load's steps (one, unless the load is larger than a batch may be).
        let steps = (sample_events.len() as u64).div_ceil(batch.max(1)).max(1);
        let after = secs(activity.run_end - window_end);
        found.param(
            "train.computation_time",
            format!("{:.6}", after / steps as f64),
            format!(
                "the program ran on for {after:.3} s after its last data read, training from \
                 memory: the compute after the load's {steps} step(s), so the replay lasts as \
                 long"
            ),
        );
    } else if paused {
        // Inside a burst: each of `lanes` reading threads reads `k` samples; the time outside
        // the I/O calls between them is the loader's own work per sample (decoding, the
        // interpreter). A burst ends with the last sample's I/O, so it holds k - 1 of those
        // stretches per lane; the emulation sleeps one after every sample, and the last one
        // falls in what the trace shows as the pause, which is shortened by as much.
        let io_in_calls: f64 = calls.iter().map(|r| secs(r.end - r.start)).sum();
        let samples = sample_events.len().max(1) as f64;
        let lanes = (read_threads.max(1)).min(batch) as f64;
        // The burst lasts as long as its busiest lane, which reads the batch's share rounded
        // up (the replay, too, gives sample i of a batch to reader i % lanes).
        let k = ((batch / unit_rows) as f64 / lanes).ceil();
        let io_per_sample = io_in_calls / samples;
        // The median burst: a few steps stretched by the scheduler (a busy machine) would
        // lengthen every sample's loader time if the mean were taken.
        // The work between a sample's own requests is replayed inside its read
        // (`sample_requests[].work`): what is left between samples is the rest.
        let own_time = fetch_s.median - k * (io_per_sample + work_inside_s);
        let per_event = if k >= 2.0 {
            (own_time / (k - 1.0)).max(0.0)
        } else {
            0.0
        };
        // The replay's last sample of a burst spends its loader time in what the trace shows
        // as the pause after it, so the compute is shortened by as much. Where that time is
        // longer than the pause (a sample's own time is spent inside its read, streamed in
        // small requests, rather than between samples), the burst's own time is spread over
        // all its samples and the pause stays whole.
        let inside = per_event > compute_s.median;
        let per_event = if inside {
            (own_time / k).max(0.0)
        } else {
            per_event
        };
        // A reader ahead of the steps spends it in its own thread, beside the compute.
        let from_compute = if inside || readers.early_ahead {
            0.0
        } else {
            per_event
        };
        // The replay spends the preprocess time once per sample, a row where an event stands
        // for a row group's rows: the time between two events is spread over their rows.
        // A row's share under the floor is left out: the replay's own time per row (its
        // spans, its clock readings), which it spends once it spends any, would outweigh it
        // (pyarrow's 0.4 us a row became 1.8 us).
        let per_sample = per_event / unit_rows as f64;
        let (per_event, per_sample) = if per_sample >= MIN_PREPROCESS_S {
            (per_event, per_sample)
        } else {
            (0.0, 0.0)
        };
        // Pauses far from the median that recur (a tenth of the steps or more: batches whose
        // compute depends on what they hold) are the program's rhythm, not one-off stalls:
        // the measured distribution is replayed, all of it, by its quantiles.
        let recurring = outliers > 0 && outliers * 10 >= training_pauses.len();
        // Bursts that held more than one batch (a file's short last read and the next file's
        // first, read back to back) are steps of the replay with no pause between them: the
        // replay's extra steps pause 0, so that its pauses add up to the program's. A few of
        // them: when most bursts would hold several batches, the batch is what is wrong.
        let replay_steps = (sample_events.len() as u64 * unit_rows) / batch.max(1);
        let merged = replay_steps.saturating_sub(bursts.len() as u64) as usize;
        // A producer's first batches read ahead are its prefetch, replayed as such.
        let merged = if merged * 4 <= bursts.len() && !readers.early_ahead {
            merged
        } else {
            0
        };
        let checkpoint_said = if checkpointed > 0 {
            format!(
                "; {checkpointed} pauses that held a checkpoint's writes are left out (the \
                 replay writes its own)"
            )
        } else {
            String::new()
        };
        // Bursts that held fewer samples than a batch (a token budget's batches, each of the
        // bytes its documents took): the replay has fewer steps than the program, and the
        // pauses of the steps it lacks would be lost. As many of its pauses are two of the
        // program's together, so that they add up to the program's. A few of them, as above.
        let fewer = (bursts.len() as u64).saturating_sub(replay_steps) as usize;
        let fewer = if merged == 0 && fewer * 4 <= bursts.len() && !readers.early_ahead {
            fewer.min(training_pauses.len() / 2)
        } else {
            0
        };
        let recurring = recurring || merged > 0 || fewer > 0;
        let pauses: Vec<f64> = if fewer > 0 {
            paired_pauses(&training_pauses, fewer)
        } else {
            training_pauses
                .iter()
                .copied()
                .chain(std::iter::repeat_n(0.0, merged))
                .collect()
        };
        // The pauses are replayed by their quantiles when there are enough of them to draw a
        // shape: a mean (or a normal law) would give every step the same pause, or a
        // symmetric spread, where a program's pauses lean to one side of their mean (a step
        // that sometimes collects garbage, a sleep's lateness), and the gaps between the
        // replay's bursts would follow another distribution than the program's. The few far
        // from the rest stay in: the replay draws the quantiles stratified, each stretch once
        // in a run of draws, so a pause of the top stretch comes as often as in the program,
        // and its pauses add up to the program's (four collections of 10 ms in 40 steps of
        // 20 ms, left out, made a replay 5% short).
        let shaped = !recurring && steady.len() >= MIN_SHAPED_PAUSES;
        let value = if recurring || shaped {
            measured_times_value(&pauses, from_compute)
        } else {
            stats_value(&Stats {
                mean: (compute_s.mean - from_compute).max(0.0),
                ..compute_s
            })
        };
        let drawn = times_drawn(pauses.len());
        let outliers_said = if fewer > 0 {
            format!(
                "; {fewer} fewer steps than bursts ({replay_steps} batches of {batch} in {} \
                 bursts: some held fewer samples than a batch): as many pauses are two of the \
                 program's together, and {drawn} those and every other pause",
                bursts.len()
            )
        } else if merged > 0 {
            format!(
                "; {merged} more steps than bursts ({replay_steps} batches of {batch} in {} \
                 bursts: some held two batches, read back to back): those steps pause 0 ms, \
                 and {drawn} every pause and those",
                bursts.len()
            )
        } else if recurring {
            format!(
                "; {outliers} of the {} lay far from the rest, too many to be one-off stalls: \
                 {drawn} every pause",
                training_pauses.len()
            )
        } else if shaped {
            format!(
                "; {drawn} the {} pauses, which keep their shape{}",
                pauses.len(),
                if outliers > 0 {
                    format!(
                        ", the {outliers} far from the rest (a collection, an epoch's turn) \
                         among them"
                    )
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        };
        found.param(
            "train.computation_time",
            value,
            format!(
                "{} {}{}{checkpoint_said}: mean {:.3} ms, stdev {:.3} ms (the median pause \
                 inside a burst is shorter by {MIN_GAP_RATIO}x or more){outliers_said}{}",
                compute_s.count,
                if readers.early_ahead {
                    "step periods from one burst's start to the next (the reader runs ahead, \
                     reading each batch while the program computes; the first burst, which \
                     filled its queue, left out)"
                } else {
                    "pauses without data I/O between bursts"
                },
                match (with_eval, if recurring || shaped { 0 } else { outliers }) {
                    (0, 0) => String::new(),
                    (e, o) => format!(
                        " ({e} held an evaluation pass, whose time is taken out; {o} lay far \
                         from the rest and are left out)"
                    ),
                },
                compute_s.mean * 1e3,
                compute_s.stdev * 1e3,
                if from_compute > 0.0 {
                    format!(
                        ", less one sample's loader time ({:.3} ms)",
                        from_compute * 1e3
                    )
                } else {
                    String::new()
                }
            ),
        );
        if per_sample > 0.0 {
            loader_work(
                &mut found,
                per_sample,
                lanes as u64,
                false,
                format!(
                    "bursts last {:.3} ms (median) for {k} samples on each of {} reading threads, \
                     {:.3} ms of I/O calls per sample: {:.3} ms {} is the loader's own work \
                     (decoding, the interpreter){}",
                    fetch_s.median * 1e3,
                    lanes as u64,
                    io_per_sample * 1e3,
                    per_event * 1e3,
                    if inside {
                        "a sample (longer than the pause after a burst: spent inside each \
                         sample's read, not between samples)"
                    } else {
                        "between two samples"
                    },
                    if unit_rows > 1 {
                        format!(", spread over the {unit_rows} rows a sample read stands for")
                    } else {
                        String::new()
                    }
                ),
            );
        }
    }

    (
        Timing {
            compute_s,
            fetch_s,
            step_fetch_s: fetch,
            step_compute_s: if paused { compute } else { Vec::new() },
        },
        found,
    )
}

/// When each epoch's first sample began: the samples in time order, `per_epoch` an epoch.
fn epoch_firsts(events: &[&Rec], per_epoch: usize) -> Vec<i64> {
    let mut starts: Vec<i64> = events.iter().map(|r| r.start).collect();
    starts.sort_unstable();
    starts.into_iter().step_by(per_epoch.max(1)).collect()
}

/// The shortest per-batch time written (`reader.batch_time`): under it, a sleep's slack.
const MIN_BATCH_WORK_S: f64 = 100e-6;

/// The shortest loader start-up written (`reader.epoch_start_time`): under it, the handover
/// of one batch more.
const MIN_START_UP_S: f64 = 1e-3;

/// `reader.epoch_start_time`: worker processes that read for a training process and are
/// started again for every epoch (a PyTorch DataLoader without persistent workers) leave a
/// pause at each epoch's start that no step's compute explains. The data reads are grouped by
/// process; a process whose first read comes after every earlier one's last read begins a new
/// epoch's group. Its start-up is the time from the training process's last take before that
/// read, plus one step's compute (when it would have asked for the next batch) and less any
/// evaluation pass between, to the read: the median over the epochs after the first.
pub(super) fn loader_start_up(activity: &Activity, readers: &Readers, eval: &EvalPass) -> Found {
    let mut found = Found::default();
    let Some((consumer, steps)) = worker_fed(activity, readers) else {
        return found;
    };
    // Each generation after the first: workers started again.
    let group_starts: Vec<i64> = generation_starts(&activity.reads)
        .into_iter()
        .skip(1)
        .collect();
    let takes = consumer.step_starts();
    let delays: Vec<f64> = group_starts
        .iter()
        .filter_map(|&first_read| {
            let before = takes.partition_point(|&t| t < first_read).checked_sub(1)?;
            let last_take = takes[before];
            let waited = secs(first_read - last_take - eval.within(last_take, first_read));
            Some((waited - steps.compute_s.mean).max(0.0))
        })
        .collect();
    if delays.is_empty() {
        return found;
    }
    let start_up = Stats::of(&delays).median;
    if start_up >= MIN_START_UP_S {
        found.param(
            "reader.epoch_start_time",
            format!("{start_up:.6}"),
            format!(
                "{} times a new group of worker processes began reading after every earlier \
                 one had stopped (workers started again for each epoch): the median pause from \
                 the training process's last take before it, less a step's compute ({:.3} ms), \
                 to its first read",
                delays.len(),
                steps.compute_s.mean * 1e3
            ),
        );
    }
    found
}

/// `reader.worker_start_interval`: the worker processes of a generation (see
/// [`generations`]) that read for a training process began reading one after another, as a
/// framework that forks them in turn starts them: the median interval between two
/// consecutive processes' first reads, over every generation. Written from 1 ms.
pub(super) fn worker_start_interval(activity: &Activity, readers: &Readers) -> Found {
    let mut found = Found::default();
    if readers
        .ahead
        .as_ref()
        .and_then(|a| a.consumer.as_ref())
        .is_none()
    {
        return found;
    }
    let generations = generations(&activity.reads);
    let intervals: Vec<f64> = generations
        .iter()
        .flat_map(|g| g.windows(2).map(|w| secs(w[1] - w[0])))
        .collect();
    if intervals.is_empty() {
        return found;
    }
    let interval = Stats::of(&intervals).median;
    if interval >= MIN_START_UP_S {
        found.param(
            "reader.worker_start_interval",
            format!("{interval:.6}"),
            format!(
                "in {} generation(s) of worker processes, each began reading {:.3} ms (median \
                 of {} intervals) after the one before it: the workers are started one after \
                 another",
                generations.len(),
                interval * 1e3,
                intervals.len()
            ),
        );
    }
    found
}

/// The training process that takes its worker processes' batches, and its steps, where there
/// is one.
fn worker_fed<'a>(
    activity: &'a Activity,
    readers: &'a Readers,
) -> Option<(&'a Consumer, &'a ConsumerSteps)> {
    Some((
        activity.consumer.as_ref()?,
        readers.ahead.as_ref()?.consumer.as_ref()?,
    ))
}

/// The shortest delay from a take to the next request written (`reader.request_delay`):
/// under it, a queue's feeder thread waking up.
const MIN_REQUEST_DELAY_S: f64 = 100e-6;

/// `reader.request_delay`: the training process takes a batch, then asks its workers for
/// the next (a PyTorch DataLoader sends the next index once it has unpickled the batch it
/// took, rebuilding its tensors from shared memory), so a worker that waits for work begins
/// its next batch that long after the take. The median, over the training takes, of the time
/// from a take's end to the training process's next pipe write within a step. Written from
/// 0.1 ms, and only where its writes are about one a take (a pool that sends its tasks in
/// chunks ahead writes at other times).
pub(super) fn request_delay(activity: &Activity, readers: &Readers) -> Found {
    let mut found = Found::default();
    let Some((consumer, steps)) = worker_fed(activity, readers) else {
        return found;
    };
    // Ranks replayed as the shares of one batch: the readers read what each step asks for,
    // with no batch of their own to begin after a take.
    if readers.ahead.as_ref().is_some_and(|a| a.spread.is_some()) {
        return found;
    }
    let training: std::collections::HashSet<i64> = steps.take_starts.iter().copied().collect();
    let takes: Vec<&(i64, i64)> = consumer
        .takes
        .iter()
        .filter(|(start, _)| training.contains(start))
        .collect();
    let (Some(first), Some(last)) = (takes.first(), takes.last()) else {
        return found;
    };
    let puts_in_training = consumer
        .puts
        .iter()
        .filter(|&&p| p >= first.0 && p <= last.1)
        .count();
    if puts_in_training * 4 < takes.len() * 3 || puts_in_training * 2 > takes.len() * 3 {
        return found;
    }
    let step_ns = steps.compute_s.mean * 1e9;
    let delays: Vec<f64> = takes
        .iter()
        .filter_map(|&&(_, end)| {
            let next = *consumer
                .puts
                .get(consumer.puts.partition_point(|&p| p < end))?;
            ((next - end) as f64 <= step_ns).then(|| secs(next - end))
        })
        .collect();
    if delays.len() * 2 < takes.len() {
        return found;
    }
    let delay = Stats::of(&delays).median;
    if delay >= MIN_REQUEST_DELAY_S {
        found.param(
            "reader.request_delay",
            format!("{delay:.6}"),
            format!(
                "the training process (pid {}) wrote its next request to its workers {:.3} ms \
                 (median of {} takes) after it took a batch: a worker waiting for work begins \
                 its next batch that long after the take",
                consumer.pid,
                delay * 1e3,
                delays.len()
            ),
        );
    }
    found
}

/// `reader.epoch_start_time` for readers inside the training process (its main thread, or
/// threads that run ahead: `tf.data`): a loader built again for every epoch (a new iterator,
/// its threads and functions) holds the next epoch's first read back by a start-up that no
/// step's compute explains. Epoch `k + 1` begins at the first sample read after the data set
/// was read `k` times; the time from epoch `k`'s first read to it, less its steps at the step
/// period (the stream's step, or the median period of the pauses' steps) and any evaluation
/// pass between, is that start-up. Epochs whose last read ends after that expected end (the
/// readers fell behind: the storage, not a start-up) are left out. Written when the median
/// start-up exceeds two steps: shorter ones are within what the step period's error adds up
/// to over an epoch.
pub(super) fn epoch_start_up(
    activity: &Activity,
    samples: &Samples,
    readers: &Readers,
    eval: &EvalPass,
) -> Found {
    let mut found = Found::default();
    if activity.consumer.is_some() || activity.preload || samples.epochs < 2 {
        return found;
    }
    let period_s = match readers.stream_step_s {
        Some(step) => step,
        None if activity.paused && readers.ahead.is_none() => {
            let periods: Vec<f64> = activity
                .bursts
                .windows(2)
                .map(|w| secs(w[1].start - w[0].start))
                .collect();
            Stats::of(&periods).median
        }
        None => return found,
    };
    // A stream's events are its files' openings, one per file and epoch.
    let per_epoch = match samples.stream {
        Some(_) => samples.num_files,
        None => samples.per_epoch(),
    } as usize;
    if period_s <= 0.0
        || per_epoch == 0
        || samples.events.len() != per_epoch * samples.epochs as usize
    {
        return found;
    }
    let firsts = epoch_firsts(&samples.events, per_epoch);
    // Each epoch's first sample and the end of its last data read (a stream's events are
    // openings: its reads go on after them), the reads before the next epoch's first sample.
    let epochs: Vec<(i64, i64)> = firsts
        .iter()
        .enumerate()
        .map(|(k, &first)| {
            let next = firsts.get(k + 1).copied().unwrap_or(i64::MAX);
            let last_end = activity
                .reads
                .iter()
                .filter(|r| r.start >= first && r.start < next)
                .map(|r| r.end)
                .max()
                .unwrap_or(first);
            (first, last_end)
        })
        .collect();
    let steps_per_epoch = samples.per_epoch().div_ceil(readers.batch.max(1));
    let start_ups = start_ups(&epochs, steps_per_epoch as f64 * period_s, |from, to| {
        secs(eval.within(from, to))
    });
    if start_ups.is_empty() {
        return found;
    }
    let start_up = Stats::of(&start_ups).median;
    if start_up >= MIN_START_UP_S.max(2.0 * period_s) {
        found.param(
            "reader.epoch_start_time",
            format!("{start_up:.6}"),
            format!(
                "epochs after the first began later than the previous epoch's {} steps of \
                 {:.3} ms explain (from its first read to theirs, less any evaluation pass): \
                 the loader's start-up for each epoch, the median of {}",
                steps_per_epoch,
                period_s * 1e3,
                start_ups
                    .iter()
                    .map(|s| format!("{:.1} ms", s * 1e3))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    found
}

/// The start-up before each epoch after the first, seconds: `epochs` holds each epoch's first
/// read and the end of its last; an epoch's steps take `epoch_s`; `evaluated(from, to)` is the
/// evaluation time between. An epoch whose reads ran past its expected end is left out.
fn start_ups(epochs: &[(i64, i64)], epoch_s: f64, evaluated: impl Fn(i64, i64) -> f64) -> Vec<f64> {
    epochs
        .windows(2)
        .filter_map(|w| {
            let ((first, last_end), (next, _)) = (w[0], w[1]);
            let expected_end = first as f64 / 1e9 + epoch_s;
            if last_end as f64 / 1e9 > expected_end {
                return None;
            }
            Some((secs(next - first) - evaluated(first, next) - epoch_s).max(0.0))
        })
        .collect()
}

/// Quantiles written for a measured time distribution (`{type: quantiles, values}`).
/// At most this many: the draws interpolate between neighbours, so a few quantiles of a
/// distribution with a spike (pauses of 0 ms beside pauses of 30 ms) smear it and lose its
/// mean by several percent; 64 keep it within about 1%.
const QUANTILES: usize = 64;

/// `values` less `minus` each (at least 0), as written: the values themselves (`{type:
/// empirical}`, each drawn once in every run of as many draws) when they are [`QUANTILES`] or
/// fewer, else that many evenly spaced quantiles, the smallest and the largest included,
/// interpolated between the sorted values. Quantiles of a few dozen values would give the
/// largest (a slow first step of 440 ms among 32 of 55 ms) half its weight, and the replay
/// would be short by half of it.
fn measured_times_value(values: &[f64], minus: f64) -> String {
    let mut sorted: Vec<f64> = values.iter().map(|v| (v - minus).max(0.0)).collect();
    sorted.sort_by(f64::total_cmp);
    if as_themselves(sorted.len()) {
        let shown: Vec<String> = sorted.iter().map(|q| format!("{q:.6}")).collect();
        return format!("{{type: empirical, values: [{}]}}", shown.join(", "));
    }
    let n = QUANTILES;
    // The sorted values are themselves evenly spaced quantiles of what was measured.
    let mut quantiles: Vec<f64> = (0..n)
        .map(|k| dlio_config::vocab::quantile_at(&sorted, k as f64 / (n - 1) as f64))
        .collect();
    keep_the_mean(&mut quantiles, &sorted);
    let shown: Vec<String> = quantiles.iter().map(|q| format!("{q:.6}")).collect();
    format!("{{type: quantiles, values: [{}]}}", shown.join(", "))
}

/// Whether [`measured_times_value`] writes `count` times as themselves (else as quantiles).
fn as_themselves(count: usize) -> bool {
    count <= QUANTILES
}

/// How [`measured_times_value`] writes `count` times, as the report says it.
fn times_drawn(count: usize) -> &'static str {
    if as_themselves(count) {
        "the times are, each once in every run of as many steps, those of"
    } else {
        "the times are evenly spaced quantiles of"
    }
}

/// Where each of `quantiles` stands for several of the `sorted` values, the last is set so that
/// the draws keep the values' mean: the largest value (one epoch's start-up of a second among
/// 687 pauses of 4 ms) stands for the top 63rd of the draws, and at its own size it put a second
/// into 11 of them. Moved down no further than its neighbour, then the first makes up the rest
/// (no lower than 0).
fn keep_the_mean(quantiles: &mut [f64], sorted: &[f64]) {
    let (n, len) = (quantiles.len(), sorted.len());
    if n < 3 || len <= n {
        return;
    }
    let measured = sorted.iter().sum::<f64>() / len as f64;
    // A value at either end moves the draws' mean by half of it over the n - 1 stretches.
    let weight = 2.0 * (n - 1) as f64;
    let off = dlio_config::vocab::quantiles_mean(quantiles) - measured;
    let last = (quantiles[n - 1] - weight * off).max(quantiles[n - 2]);
    let off = off - (quantiles[n - 1] - last) / weight;
    quantiles[n - 1] = last;
    quantiles[0] = (quantiles[0] - weight * off).clamp(0.0, quantiles[1]);
}

/// `pauses` with `pairs` of them (at most half), evenly spread over the run, each added to
/// the one after it: as many fewer values with the same sum.
fn paired_pauses(pauses: &[f64], pairs: usize) -> Vec<f64> {
    let pairs = pairs.min(pauses.len() / 2);
    if pairs == 0 {
        return pauses.to_vec();
    }
    let stride = pauses.len() / pairs;
    let mut out = Vec::with_capacity(pauses.len() - pairs);
    let mut i = 0;
    while i < pauses.len() {
        if i % stride == 0 && i / stride < pairs && i + 1 < pauses.len() {
            out.push(pauses[i] + pauses[i + 1]);
            i += 2;
        } else {
            out.push(pauses[i]);
            i += 1;
        }
    }
    out
}

/// The fewest steady pauses whose quantiles are written as the compute time: under it, their
/// mean (and stdev), as a few values draw no shape.
const MIN_SHAPED_PAUSES: usize = 8;

/// A time as the workload writes it: its mean, or a normal law when the stdev is over 5% of
/// the mean.
fn stats_value(s: &Stats) -> String {
    if s.stdev > 0.05 * s.mean {
        format!("{{mean: {:.6}, stdev: {:.6}}}", s.mean, s.stdev)
    } else {
        format!("{:.6}", s.mean)
    }
}

/// `reader.preprocess_time` of `seconds` per sample, for `lanes` threads reading at once, or
/// `lanes` worker processes when `processes`.
///
/// The time a traced loader spends between its reads is its own work (decoding, the
/// interpreter). One reading thread's work is spent busy on a core
/// (`reader.preprocess_work: cpu`), which keeps times far shorter than a sleep's slack; so is
/// the work of worker processes, each with an interpreter of its own, which take a core each
/// and slow each other down when they are more than the cores. The work of several threads
/// of one process is slept: a Python pool's threads take turns on one interpreter (the GIL),
/// so their stretches overlap in time without each taking a core, and busy waits on more
/// threads than cores would stretch every one of them. Under a sleep's slack it is spent busy
/// one thread at a time (`gil`): what each thread measured between its samples is then the
/// others' turns and its own, and its own is that time over the threads.
fn loader_work(found: &mut Found, seconds: f64, lanes: u64, processes: bool, evidence: String) {
    // What each reader spends per sample, its evidence, and how it is spent (none: slept).
    let (per_reader, evidence, work): (f64, String, Option<(&str, String)>) = if processes {
        let why = format!(
            "{lanes} worker processes read, each with an interpreter of its own: their time \
             between reads is work on a core each, which the emulation's reader threads spend \
             busy (and their batch time too)"
        );
        (seconds, evidence, Some(("cpu", why)))
    } else if lanes <= 1 {
        let why = "one thread reads: its time between reads is its own work on a core, which \
                   the emulation spends busy (and its batch time too)";
        (seconds, evidence, Some(("cpu", why.into())))
    } else if seconds < SLEEP_SLACK_S {
        let own = seconds / lanes as f64;
        let evidence = format!(
            "{evidence}; {lanes} threads of one process take turns on its interpreter, so a \
             thread's own share of that is {:.1} us",
            own * 1e6
        );
        let why = format!(
            "{:.0} us is shorter than a sleep can keep (about {:.0} us): the emulation's threads \
             spend their work busy, one at a time as a Python process's threads do",
            seconds * 1e6,
            SLEEP_SLACK_S * 1e6
        );
        (own, evidence, Some(("gil", why)))
    } else {
        (seconds, evidence, None)
    };
    // Six places, or nine under 10 us (a thread's share of a pool's time).
    let value = if per_reader < 10e-6 {
        format!("{per_reader:.9}")
    } else {
        format!("{per_reader:.6}")
    };
    found.param("reader.preprocess_time", value, evidence);
    if let Some((work, why)) = work {
        found.param("reader.preprocess_work", work.into(), why);
    }
}

/// About the shortest sleep that lasts what was asked on Linux (the timer's slack and the
/// scheduler's wake-up).
const SLEEP_SLACK_S: f64 = 50e-6;

/// The values within four robust standard deviations (1.4826 times the median absolute
/// deviation) of their median, or within 10% of it when most are equal; and how many were
/// left out.
fn steady_values(values: &[f64]) -> (Vec<f64>, usize) {
    let median = Stats::of(values).median;
    let deviations: Vec<f64> = values.iter().map(|v| (v - median).abs()).collect();
    let spread = (1.4826 * Stats::of(&deviations).median).max(0.025 * median.abs());
    let steady: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| (v - median).abs() <= 4.0 * spread)
        .collect();
    let left_out = values.len() - steady.len();
    (steady, left_out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn paired_pauses_keep_their_sum_in_fewer_values() {
        let pauses: Vec<f64> = (1..=10).map(f64::from).collect();
        let paired = super::paired_pauses(&pauses, 2);
        assert_eq!(paired, vec![3.0, 3.0, 4.0, 5.0, 13.0, 8.0, 9.0, 10.0]);
        assert_eq!(paired.iter().sum::<f64>(), pauses.iter().sum::<f64>());
        // At most half of them.
        assert_eq!(super::paired_pauses(&pauses, 9).len(), 5);
    }

    #[test]
    fn quantiles_of_many_values_keep_their_mean() {
        // 687 pauses of 4 ms and one of 1.08 s (an epoch's start-up): the draws' mean stays
        // the pauses' mean, where the largest at its own size made it 5 times too long.
        let pauses: Vec<f64> = [0.004; 687].into_iter().chain([1.08]).collect();
        let v = super::measured_times_value(&pauses, 0.0);
        let values: Vec<f64> = v
            .trim_start_matches("{type: quantiles, values: [")
            .trim_end_matches("]}")
            .split(", ")
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(values.len(), super::QUANTILES);
        let drawn = dlio_config::vocab::quantiles_mean(&values);
        let measured = pauses.iter().sum::<f64>() / pauses.len() as f64;
        assert!(
            (drawn - measured).abs() < 0.02 * measured,
            "{drawn} vs {measured}"
        );
        // Still the largest of the values, and the first the smallest.
        assert!(values[63] > values[62] && values[0] == 0.004, "{values:?}");
    }

    #[test]
    fn a_few_dozen_times_are_written_as_themselves_less_the_loader_time() {
        // 8 pauses of 21 ms and 2 of 31 ms, less 0.5 ms of loader time each.
        let pauses = [
            0.031, 0.021, 0.021, 0.021, 0.021, 0.031, 0.021, 0.021, 0.021, 0.021,
        ];
        let v = super::measured_times_value(&pauses, 0.0005);
        let want = format!(
            "{{type: empirical, values: [{}, 0.030500, 0.030500]}}",
            ["0.020500"; 8].join(", ")
        );
        assert_eq!(v, want);
        // The replay's draws keep their sum: a slow first step among a few dozen keeps its
        // whole weight.
        let pauses: Vec<f64> = std::iter::once(0.44).chain([0.055; 32]).collect();
        let v = super::measured_times_value(&pauses, 0.0);
        let config =
            dlio_config::Config::from_yaml(&format!("train:\n  computation_time: {v}\n")).unwrap();
        let measured = pauses.iter().sum::<f64>() / pauses.len() as f64;
        assert!((config.train.computation_time.mean() - measured).abs() < 1e-6);
    }

    #[test]
    fn an_epoch_starting_later_than_its_steps_explain_has_a_start_up() {
        const MS: i64 = 1_000_000;
        // Epochs of 32 steps of 15.4 ms (492.8 ms); reads run ahead and end at 432 ms; the
        // next epoch's first read at 626.5 ms: 133.7 ms of start-up. With 20 ms of evaluation
        // between, 113.7 ms.
        let epochs = [(0, 432 * MS), (626_500_000, 1_050 * MS)];
        let got = super::start_ups(&epochs, 32.0 * 0.0154, |_, _| 0.0);
        assert_eq!(got.len(), 1);
        assert!((got[0] - 0.1337).abs() < 1e-6, "{got:?}");
        let got = super::start_ups(&epochs, 32.0 * 0.0154, |_, _| 0.020);
        assert!((got[0] - 0.1137).abs() < 1e-6, "{got:?}");
        // Reads that end after the epoch's expected end: the storage held the epoch back, no
        // start-up is claimed.
        let behind = [(0, 600 * MS), (700 * MS, 1_200 * MS)];
        assert!(super::start_ups(&behind, 32.0 * 0.0154, |_, _| 0.0).is_empty());
        // Back to back: none.
        let tight = [(0, 400 * MS), (492_800_000, 900 * MS)];
        assert_eq!(super::start_ups(&tight, 32.0 * 0.0154, |_, _| 0.0), [0.0]);
    }
}
