//! The training process of a program whose worker processes read for it (a PyTorch
//! `DataLoader` with `num_workers > 0`, a pool feeding a `multiprocessing.Queue`): the workers
//! read ahead, so pauses in their reads say nothing of the steps; the process that consumes
//! takes each batch from a pipe, and those takes are its steps.
//!
//! `dlio trace` follows pipes (`pipe:[INODE]`, category `IPC`). A take is one message read on
//! the consumer's main thread; Python's `multiprocessing` frames a message as a 4-byte length
//! and the bytes (`Connection.recv_bytes`), so a read of 4 bytes starts each one.

use std::collections::{HashMap, HashSet};

use crate::event::{Layer, Op};
use crate::ingest::Rec;
use crate::timeline::{Timeline, op};

/// The fewest takes in most groups between compute pauses for the takes to be samples of a
/// batch: an ordered loader on a busy machine takes early batches two or three at once, step
/// after step.
const MIN_TAKES_PER_BATCH: usize = 4;

/// The most reads one message of a length-prefixed stream takes for the stream to count as
/// one (its prefix, then the bytes in pieces of up to a pipe's buffer, 64 KiB).
const MAX_READS_PER_MESSAGE: usize = 8;

/// The fewest takes for the consumer's steps to stand for the program's.
const MIN_TAKES: usize = 4;

/// The fewest groups of takes for them to be batches of samples taken one a message: fewer
/// are the epochs of a loader that hands over whole batches (the pauses between epochs, a
/// checkpoint and new workers, stand above the steps' as a batch's compute stands above its
/// samples' takes).
const MIN_BATCHES: usize = 8;

/// One take: from its first read's start to its last read's end, nanoseconds.
pub(crate) type Take = (i64, i64);

/// The process that takes the batches its workers read, and when it took each one.
#[derive(Debug, Clone)]
pub(crate) struct Consumer {
    /// Its process id.
    pub pid: u32,
    /// Each take (message read) from its first read to its last, nanoseconds, in time order.
    pub takes: Vec<Take>,
    /// Its pipe reads (start, end) in time order, each with when the bytes it returned began
    /// to be written (the worker's write), where the trace holds every write of its pipe.
    pub reads: Vec<(i64, i64, Option<i64>)>,
    /// When its pipe writes began (any of its threads), in time order: the requests it sends
    /// its workers (a PyTorch DataLoader's next index, written by a queue's feeder thread).
    pub puts: Vec<i64>,
    /// The processes that take batches as it does, itself included: data-parallel ranks of
    /// one job, each fed by workers of its own (1 for one training process).
    pub ranks: usize,
}

impl Consumer {
    /// The moments its steps begin: when it asks for each batch (the start of each take),
    /// so that what its workers read while it waits for a batch is that batch's loading.
    pub(crate) fn step_starts(&self) -> Vec<i64> {
        self.takes.iter().map(|&(start, _)| start).collect()
    }

    /// Its own time inside a take, nanoseconds: the take's span less what it spent waiting for
    /// bytes not yet written. Where the workers had written a batch before the training
    /// process asked for it, the time to read it off the pipe and between its reads
    /// (unpickling, collating samples taken one a message) is the training process's work,
    /// which the emulation's handover of a finished batch does not spend. A read waits from
    /// where the take had got to (its start, or the end of the read before) until the first of
    /// its bytes began to be written. 0 when a read's write is not in the trace.
    pub(crate) fn own_work(&self, (start, end): Take) -> i64 {
        let first = self.reads.partition_point(|r| r.0 < start);
        let mut from = start;
        let mut waited = 0;
        for &(_, read_end, written) in &self.reads[first..] {
            if read_end > end {
                break;
            }
            let Some(written) = written else {
                return 0;
            };
            waited += (written - from).clamp(0, read_end - from);
            from = read_end;
        }
        (end - start - waited).max(0)
    }

    /// The takes of the training loop and those of evaluation passes. A take belongs to an
    /// evaluation when the last data read before it was one of the evaluation split's (its
    /// workers read it) rather than a training read.
    pub(super) fn split_takes(
        &self,
        training_reads: &[&Rec],
        eval_files: &HashSet<u64>,
        t: &Timeline,
    ) -> (Vec<Take>, Vec<Take>) {
        if eval_files.is_empty() {
            return (self.takes.clone(), Vec::new());
        }
        let mut last_read: Vec<(i64, bool)> = training_reads
            .iter()
            .map(|r| (r.end, false))
            .chain(
                t.io()
                    .filter(|r| eval_files.contains(&r.file) && op(r) == Op::Read && r.bytes > 0)
                    .map(|r| (r.end, true)),
            )
            .collect();
        last_read.sort_unstable();
        self.takes.iter().copied().partition(|&(start, _)| {
            let before = last_read.partition_point(|&(end, _)| end <= start);
            before == 0 || !last_read[before - 1].1
        })
    }
}

/// The consumer of the data readers' batches, when the data is read by processes other than
/// one that reads pipes on its main thread while they read: the process with the most such
/// reads, split into takes. `None` when the program reads its data itself, or the consumer's
/// reads are too few to be steps.
pub(crate) fn find_consumer(t: &Timeline, data_calls: &[&Rec]) -> Option<Consumer> {
    // Each process's last data read: a process that reads data while it reads pipes reads
    // for itself (a pool's worker taking its tasks); one that read data only before (the main
    // process of an h5py Dataset learning the file's length) can still consume.
    let mut last_data_read: HashMap<u32, i64> = HashMap::new();
    for r in data_calls
        .iter()
        .filter(|r| op(r) == Op::Read && r.bytes > 0)
    {
        let last = last_data_read.entry(r.rank).or_insert(r.start);
        *last = (*last).max(r.start);
    }
    let first = data_calls.first()?.start;
    let mut by_pid: HashMap<u32, Vec<&Rec>> = HashMap::new();
    for r in t.events.iter().filter(|r| {
        r.layer == Layer::Comm as u8
            && op(r) == Op::Read
            && r.bytes > 0
            && r.tid == r.rank
            && r.start >= first
            && t.path(r.file).starts_with(dlio_trace::PIPE_NAME_PREFIX)
    }) {
        by_pid.entry(r.rank).or_default().push(r);
    }
    by_pid.retain(|pid, pipe_reads| {
        let first_pipe_read = pipe_reads.iter().map(|r| r.start).min().unwrap_or(i64::MAX);
        last_data_read
            .get(pid)
            .is_none_or(|&last| last < first_pipe_read)
    });
    // Ranks of a data-parallel job traced together: processes that read about as many
    // messages as the one that reads the most (half as many or more).
    let most = by_pid.values().map(Vec::len).max().unwrap_or(0);
    let ranks = by_pid.values().filter(|r| r.len() * 2 >= most).count();
    let (pid, mut reads) = by_pid.into_iter().max_by_key(|(pid, r)| (r.len(), *pid))?;
    let mut puts: Vec<i64> = t
        .events
        .iter()
        .filter(|r| {
            r.layer == Layer::Comm as u8
                && op(r) == Op::Write
                && r.bytes > 0
                && r.rank == pid
                && r.start >= first
                && t.path(r.file).starts_with(dlio_trace::PIPE_NAME_PREFIX)
        })
        .map(|r| r.start)
        .collect();
    puts.sort_unstable();
    reads.sort_by_key(|r| r.start);
    let takes = per_batch(batches(takes(&reads)));
    let written = written_at(t, &reads);
    let reads = reads
        .iter()
        .zip(written)
        .map(|(r, w)| (r.start, r.end, w))
        .collect();
    (takes.len() >= MIN_TAKES).then_some(Consumer {
        pid,
        takes,
        reads,
        puts,
        ranks,
    })
}

/// For each of `reads` (one process's pipe reads, in time order), when the first byte it
/// returned began to be written: a pipe hands its bytes over in the order they were written,
/// so the bytes read before a read (by any process, in time order) are its offset in the
/// pipe's stream, and the write that holds that offset (writes in time order, as a queue's
/// lock keeps its writers in turn) began then. `None` for a pipe whose traced writes hold
/// fewer bytes than were read from it (a writer the trace does not follow).
fn written_at(t: &Timeline, reads: &[&Rec]) -> Vec<Option<i64>> {
    let pipes: HashSet<u64> = reads.iter().map(|r| r.file).collect();
    let mut writes: HashMap<u64, Vec<&Rec>> = HashMap::new();
    let mut all_reads: HashMap<u64, Vec<&Rec>> = HashMap::new();
    for r in t
        .events
        .iter()
        .filter(|r| r.layer == Layer::Comm as u8 && r.bytes > 0 && pipes.contains(&r.file))
    {
        match op(r) {
            Op::Write => writes.entry(r.file).or_default().push(r),
            Op::Read => all_reads.entry(r.file).or_default().push(r),
            _ => {}
        }
    }
    let mut at: HashMap<(u32, i64), i64> = HashMap::new();
    for (pipe, mut pipe_reads) in all_reads {
        let mut pipe_writes = writes.remove(&pipe).unwrap_or_default();
        pipe_writes.sort_by_key(|w| w.start);
        pipe_reads.sort_by_key(|r| r.start);
        let written: i64 = pipe_writes.iter().map(|w| w.bytes).sum();
        let read: i64 = pipe_reads.iter().map(|r| r.bytes).sum();
        if written < read {
            continue;
        }
        // The stream offset each write ends at.
        let ends: Vec<i64> = pipe_writes
            .iter()
            .scan(0i64, |sum, w| {
                *sum += w.bytes;
                Some(*sum)
            })
            .collect();
        let mut offset = 0i64;
        for r in pipe_reads {
            let holding = ends.partition_point(|&end| end <= offset);
            if let Some(w) = pipe_writes.get(holding) {
                at.insert((r.rank, r.start), w.start);
            }
            offset += r.bytes;
        }
    }
    reads
        .iter()
        .map(|r| at.get(&(r.rank, r.start)).copied())
        .collect()
}

/// The messages that hand over a batch: those of at least half the median message's bytes.
/// A loader's control messages are far smaller than its batches (a PyTorch worker's
/// acknowledgement that it resumes for a new epoch: 84 bytes; a batch: its tensors' handles,
/// 350 bytes and up, or the pickled arrays themselves).
fn batches(messages: Vec<(i64, i64, i64)>) -> Vec<(i64, i64)> {
    let mut sizes: Vec<i64> = messages.iter().map(|m| m.2).collect();
    sizes.sort_unstable();
    let median = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
    messages
        .into_iter()
        .filter(|m| m.2 * 2 >= median)
        .map(|(start, end, _)| (start, end))
        .collect()
}

/// The takes grouped into batches when the workers hand over one sample a message (an
/// `IterableDataset` without batching, a pool's `imap`) and the training process collates
/// them: the pauses between takes fall into a short level (samples of one batch) and a
/// compute level, and most groups the compute pauses cut hold about the same number of takes
/// (within a quarter of their median, [`MIN_TAKES_PER_BATCH`] or more). A loader that hands
/// over whole batches and keeps them in order takes early batches together now and then, in
/// groups of varying size and mostly one.
fn per_batch(takes: Vec<Take>) -> Vec<Take> {
    let Some(threshold) = super::trace_view::pause_threshold(&takes) else {
        return takes;
    };
    let mut groups: Vec<(Take, usize)> = Vec::new();
    for &(start, end) in &takes {
        match groups.last_mut() {
            Some(((_, last_end), n)) if start - *last_end <= threshold => {
                *last_end = end;
                *n += 1;
            }
            _ => groups.push(((start, end), 1)),
        }
    }
    let mut sizes: Vec<usize> = groups.iter().map(|&(_, n)| n).collect();
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    // Within a quarter of the median: a loader that restores the workers' order takes some
    // samples of the next batch early, or leaves some of this one for later.
    let near = sizes
        .iter()
        .filter(|&&n| 4 * n >= 3 * median && 4 * n <= 5 * median)
        .count();
    if median >= MIN_TAKES_PER_BATCH && near * 10 >= groups.len() * 6 && groups.len() >= MIN_BATCHES
    {
        groups.into_iter().map(|(take, _)| take).collect()
    } else {
        takes
    }
}

/// Messages read: each starts at a read of 4 bytes (multiprocessing's length prefix) when
/// reads of 4 bytes are at least one in [`MAX_READS_PER_MESSAGE`] (a message larger than a
/// pipe's buffer comes in several reads), else each read is one.
/// Each message: its first read's start, its last read's end and its bytes (without the
/// prefix).
fn takes(reads: &[&Rec]) -> Vec<(i64, i64, i64)> {
    let prefixes = reads.iter().filter(|r| r.bytes == 4).count();
    let framed = prefixes > 0 && prefixes * MAX_READS_PER_MESSAGE >= reads.len();
    let mut out: Vec<(i64, i64, i64)> = Vec::new();
    for r in reads {
        match out.last_mut() {
            Some(last) if framed && r.bytes != 4 => {
                last.1 = last.1.max(r.end);
                last.2 += r.bytes;
            }
            _ if framed => out.push((r.start, r.end, 0)),
            _ => out.push((r.start, r.end, r.bytes)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(start: i64, bytes: i64) -> Rec {
        Rec {
            rank: 1,
            tid: 1,
            start,
            end: start + 10,
            layer: Layer::Comm as u8,
            op: Op::Read as u8,
            item: false,
            fd: 5,
            file: 7,
            offset: -1,
            bytes,
            buf_page_offset: -1,
            untouched_pages: -1,
        }
    }

    #[test]
    fn a_length_prefix_starts_each_message() {
        let reads = [
            read(0, 4),
            read(20, 300),
            read(1000, 4),
            read(1020, 8),
            read(1040, 90),
        ];
        let refs: Vec<&Rec> = reads.iter().collect();
        assert_eq!(takes(&refs), vec![(0, 30, 300), (1000, 1050, 98)]);
    }

    #[test]
    fn without_a_prefix_each_read_is_a_message() {
        let reads = [read(0, 100), read(50, 200), read(500, 100)];
        let refs: Vec<&Rec> = reads.iter().collect();
        assert_eq!(
            takes(&refs),
            vec![(0, 10, 100), (50, 60, 200), (500, 510, 100)]
        );
    }

    #[test]
    fn samples_taken_one_a_message_are_grouped_into_the_batches_between_computes() {
        // 12 steps of 8 takes 0.1 ms apart (a few come a take early or late), 20 ms apart.
        let mut takes = Vec::new();
        let mut at = 0i64;
        for step in 0..12 {
            let n = match step {
                3 => 9,
                4 => 7,
                _ => 8,
            };
            for _ in 0..n {
                takes.push((at, at + 20_000));
                at += 100_000;
            }
            at += 20_000_000;
        }
        let grouped = per_batch(takes.clone());
        assert_eq!(grouped.len(), 12);
        assert_eq!(grouped[0], (0, 720_000));
        // Whole batches taken one a step, some two at once (early batches kept in order): as
        // they are.
        let mut batches = Vec::new();
        let mut at = 0i64;
        for step in 0..12 {
            batches.push((at, at + 50_000));
            at += if step % 4 == 0 { 200_000 } else { 20_000_000 };
        }
        assert_eq!(per_batch(batches.clone()), batches);
        // Batches taken two at once step after step (a busy machine): as they are too.
        let mut pairs = Vec::new();
        let mut at = 0i64;
        for step in 0..24 {
            pairs.push((at, at + 50_000));
            at += if step % 2 == 0 { 200_000 } else { 40_000_000 };
        }
        assert_eq!(per_batch(pairs.clone()), pairs);
        // Whole batches a take each, 25 ms apart, in 3 epochs 1.8 s apart (a checkpoint and
        // new workers between them): 180 steps, not 3 batches of 60 samples.
        let mut epochs = Vec::new();
        let mut at = 0i64;
        for _ in 0..3 {
            for _ in 0..60 {
                epochs.push((at, at + 50_000));
                at += 25_000_000;
            }
            at += 1_800_000_000;
        }
        assert_eq!(per_batch(epochs.clone()), epochs);
    }

    #[test]
    fn a_take_of_bytes_written_before_it_asked_is_the_training_process_own_time() {
        let at = |rank: u32, op: Op, start: i64, end: i64, bytes: i64| Rec {
            rank,
            tid: rank,
            start,
            end,
            op: op as u8,
            bytes,
            buf_page_offset: -1,
            untouched_pages: -1,
            ..read(0, 0)
        };
        // A worker (pid 2) writes two messages of 4 + 1000 bytes; the training process (pid
        // 1) reads each as its prefix and its bytes. The first was written long before it
        // asked (at 1000): 300 ns of reading and unpickling between its reads are its own.
        // The second it asked for at 5000, and its worker began writing it at 5600: 600 ns
        // were a wait.
        let events = vec![
            at(2, Op::Write, 100, 150, 1004),
            at(1, Op::Read, 1000, 1010, 4),
            at(1, Op::Read, 1200, 1300, 1000),
            at(2, Op::Write, 5600, 5650, 1004),
            at(1, Op::Read, 5000, 5610, 4),
            at(1, Op::Read, 5700, 5800, 1000),
        ];
        let t = Timeline {
            events: events.clone(),
            paths: HashMap::from([(7, "pipe:[1]".to_string())]),
            inputs: Vec::new(),
        };
        let reads: Vec<&Rec> = events.iter().filter(|r| r.rank == 1).collect();
        let written = written_at(&t, &reads);
        assert_eq!(written, vec![Some(100), Some(100), Some(5600), Some(5600)]);
        let consumer = Consumer {
            pid: 1,
            ranks: 1,
            puts: Vec::new(),
            takes: vec![(1000, 1300), (5000, 5800)],
            reads: reads
                .iter()
                .zip(written)
                .map(|(r, w)| (r.start, r.end, w))
                .collect(),
        };
        assert_eq!(consumer.own_work((1000, 1300)), 300);
        assert_eq!(consumer.own_work((5000, 5800)), 200);
        // A pipe whose writer the trace does not follow: no own time is claimed.
        let unfollowed = Timeline {
            events: events.iter().filter(|r| r.rank == 1).copied().collect(),
            ..t
        };
        assert_eq!(written_at(&unfollowed, &reads), vec![None; 4]);
    }

    #[test]
    fn control_messages_far_smaller_than_the_batches_are_not_takes() {
        let messages = vec![(0, 1, 351), (10, 11, 351), (20, 21, 84), (30, 31, 360)];
        assert_eq!(batches(messages), vec![(0, 1), (10, 11), (30, 31)]);
    }
}
