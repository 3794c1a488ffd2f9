//! Reads through a buffered stream (`reader.read_buffer`): a program reading its files through
//! Python's file objects makes requests that follow its own reads, a fill of the buffer, the
//! whole blocks of the rest straight, a fill for the tail. Found from the requests of each
//! opening: the buffer is the most frequent request size, and the stream that buffer makes
//! (with or without a header's read first, with the program's reads of some size or of all
//! the rest) has to give the very requests of nine runs of contiguous reads in ten.

use std::collections::HashMap;

use dlio_storage::BufferedStream;

use super::trace_view::DataSet;
use crate::event::Op;
use crate::ingest::Rec;
use crate::timeline::op;

/// Share of the runs of contiguous reads the stream has to make exactly.
const MATCHED_SHARE: f64 = 0.9;
/// Share of the runs with a read of whole blocks longer than the buffer: fewer, and the
/// requests are the buffer's size (a stream of small reads), which one size describes.
const DIRECT_SHARE: f64 = 0.2;
/// Fewest runs that can tell a stream.
const MIN_RUNS: usize = 8;

/// How each run of contiguous reads is made.
#[derive(Debug, Clone, Copy)]
pub(super) enum RunShape {
    /// Through a buffered stream (`reader.read_buffer`).
    Buffered(BufferedStream),
    /// A request of this many bytes, then one of the rest (`reader.head_request_size`).
    HeadThenRest(u64),
}

/// The requests of a trace's runs of contiguous reads: a buffered stream's, or a head and
/// the rest.
#[derive(Debug, Clone)]
pub(super) struct BufferedFit<'t> {
    pub shape: RunShape,
    /// Runs of contiguous reads (one per opening, or per seek), and the ones the shape makes
    /// exactly.
    pub runs: usize,
    pub matched: usize,
    /// Each matched run's first read, and the bytes the program took of the run: its bytes,
    /// less half a buffer where the run ends on a full fill before the file's end (the
    /// program took part of it).
    pub taken: Vec<(&'t Rec, u64)>,
    /// The openings that read the file's first bytes before they seek to the sample, and the
    /// bytes those reads took (the median), when most do: left out of the runs above.
    pub header: Option<(usize, u64)>,
}

impl BufferedFit<'_> {
    /// The bytes the program took of each matched run.
    pub fn consumed(&self) -> Vec<u64> {
        self.taken.iter().map(|&(_, n)| n).collect()
    }

    /// The key that replays the shape, its YAML and why.
    pub fn param(&self) -> (&'static str, String, String) {
        match self.shape {
            RunShape::Buffered(stream) => (
                "reader.read_buffer",
                format!(
                    "{{size: {}, header_read: {}, app_read_size: {}}}",
                    stream.buffer,
                    if stream.header_read { "True" } else { "False" },
                    stream.app_read
                ),
                format!(
                    "{} of {} runs of contiguous data reads are the requests of a stream with a \
                     buffer of {} bytes ({}, {}): fills of the buffer and reads of whole \
                     blocks, as Python's file objects make them",
                    self.matched,
                    self.runs,
                    stream.buffer,
                    if stream.header_read {
                        "a header's read fills it at each sample's start"
                    } else {
                        "no header's read first"
                    },
                    match stream.app_read {
                        0 => "the program reads the rest of a sample in one read".to_string(),
                        n => format!("the program reads at most {n} bytes at a time"),
                    }
                ),
            ),
            RunShape::HeadThenRest(head) => (
                "reader.head_request_size",
                head.to_string(),
                format!(
                    "{} of {} runs of contiguous data reads are a read of {head} bytes, then one \
                     of the rest (or one read, when no longer): a record's head, then its body",
                    self.matched, self.runs
                ),
            ),
        }
    }
}

/// One run of contiguous reads of an opening: where it starts, its reads' sizes, and its
/// file's size.
struct Run<'t> {
    first: Option<&'t Rec>,
    /// The opening's first run, at the file's start, of a buffer at most, with more runs
    /// after it: a library reading the file's header before it seeks to the sample.
    header: bool,
    start: u64,
    /// Where its last read ended.
    end: u64,
    sizes: Vec<u64>,
    file_len: u64,
}

/// The runs of contiguous reads of every opening of a data file, in the order read. An
/// opening is followed per process, thread and file (a library may read through a copy of
/// the descriptor); reads before any opening in the calls count as one.
fn runs<'t>(calls: &[&'t Rec], data: &DataSet, block: u64) -> Vec<Run<'t>> {
    let mut open: HashMap<(u32, u32, u64), Vec<Run<'t>>> = HashMap::new();
    let mut done: Vec<Run<'t>> = Vec::new();
    // An opening's runs, its header marked.
    let finish = |mut o: Vec<Run<'t>>, done: &mut Vec<Run<'t>>| {
        if o.len() >= 2 && o[0].start == 0 && o[0].end <= block {
            o[0].header = true;
        }
        done.extend(o);
    };
    for r in calls {
        let key = (r.rank, r.tid, r.file);
        match op(r) {
            Op::Open if r.fd >= 0 => {
                if let Some(o) = open.insert(key, Vec::new()) {
                    finish(o, &mut done);
                }
            }
            Op::Read if r.bytes > 0 && r.offset >= 0 => {
                // A file opened before the training window (a ZipFile each thread opened
                // once, its directory read apart) has its reads followed all the same.
                let o = open.entry(key).or_default();
                let (offset, bytes) = (r.offset as u64, r.bytes as u64);
                match o.last_mut() {
                    Some(run) if run.end == offset => {
                        run.sizes.push(bytes);
                        run.end += bytes;
                    }
                    _ => o.push(Run {
                        first: Some(r),
                        header: false,
                        start: offset,
                        end: offset + bytes,
                        sizes: vec![bytes],
                        file_len: data.totals.get(&r.file).map_or(0, |t| t.size),
                    }),
                }
            }
            Op::Close => {
                if let Some(o) = open.remove(&key) {
                    finish(o, &mut done);
                }
            }
            _ => {}
        }
    }
    for o in open.into_values() {
        finish(o, &mut done);
    }
    done
}

/// The requests `stream` makes for a sample of `len` bytes at the run's start, by size.
fn made(stream: &BufferedStream, run: &Run, len: u64) -> Vec<u64> {
    let (requests, _) = stream.requests((run.start, run.start), run.start, len, run.file_len);
    requests.iter().map(|r| r.len).collect()
}

/// The bytes the program took of `run` if `stream` makes its requests exactly.
fn consumed_if_made(stream: &BufferedStream, run: &Run) -> Option<u64> {
    let total = run.end - run.start;
    let block = stream.buffer as u64;
    let last = *run.sizes.last()?;
    let ends_the_file = run.start + total >= run.file_len;
    // The program took all of it, or (a last fill before the file's end) part of the fill.
    let mut candidates = vec![(total, total)];
    if last == block && !ends_the_file && total > block {
        candidates.insert(0, (total - block + 1, total - block / 2));
    }
    candidates
        .into_iter()
        .find(|&(len, _)| run.start + len <= run.file_len && made(stream, run, len) == run.sizes)
        .map(|(_, took)| took)
}

/// How the runs of contiguous data reads are made, when one shape makes nine in ten of them
/// exactly: a buffered stream (whose runs read whole blocks longer than the buffer in a fifth
/// of them), else a head of the most frequent request size and the rest (half the runs two
/// reads or more: records read header first).
pub(super) fn buffered_stream<'t>(calls: &[&'t Rec], data: &DataSet) -> Option<BufferedFit<'t>> {
    // The buffer, or the head: the most frequent request size.
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for r in calls {
        if op(r) == Op::Read && r.bytes > 0 && r.offset >= 0 {
            *counts.entry(r.bytes as u64).or_default() += 1;
        }
    }
    let (&block, _) = counts.iter().max_by_key(|&(size, n)| (*n, *size))?;
    let (headers, runs): (Vec<Run>, Vec<Run>) =
        runs(calls, data, block).into_iter().partition(|r| r.header);
    if runs.len() < MIN_RUNS {
        return None;
    }
    // Headers read before a seek to the sample, in most openings: their median size.
    let headers_read = (headers.len() * 2 >= runs.len()).then(|| {
        let mut sizes: Vec<u64> = headers.iter().map(|r| r.end - r.start).collect();
        sizes.sort_unstable();
        (headers.len(), sizes[sizes.len() / 2])
    });
    let fit = |shape: RunShape, taken: Vec<(&'t Rec, u64)>| BufferedFit {
        shape,
        runs: runs.len(),
        matched: taken.len(),
        taken,
        header: headers_read,
    };
    let enough = |f: &BufferedFit| f.matched as f64 >= MATCHED_SHARE * f.runs as f64;
    if let Some(stream) = stream_shape(&runs, block) {
        let taken = runs
            .iter()
            .filter_map(|run| Some((run.first?, consumed_if_made(&stream, run)?)))
            .collect();
        let buffered = fit(RunShape::Buffered(stream), taken);
        if enough(&buffered) {
            return Some(buffered);
        }
    }
    // A head, then the rest: two reads, the first of the head's size; or one no longer.
    let two = runs.iter().filter(|r| r.sizes.len() == 2).count();
    if two * 2 < runs.len() {
        return None;
    }
    let taken = runs
        .iter()
        .filter(|r| match r.sizes.as_slice() {
            [head, _] => *head == block,
            [one] => *one <= block,
            _ => false,
        })
        .filter_map(|r| Some((r.first?, r.end - r.start)))
        .collect();
    Some(fit(RunShape::HeadThenRest(block), taken)).filter(enough)
}

/// The buffered stream of a buffer of `block` bytes that makes the most of `runs`, when the
/// block is a buffer's size (a power of two) and a fifth of the runs read whole blocks past
/// it.
fn stream_shape(runs: &[Run], block: u64) -> Option<BufferedStream> {
    if !block.is_power_of_two() || !(512..=(16 << 20)).contains(&block) {
        return None;
    }
    let direct = |s: u64| s > block && s.is_multiple_of(block);
    let with_direct = runs
        .iter()
        .filter(|r| r.sizes.iter().any(|&s| direct(s)))
        .count();
    if (with_direct as f64) < DIRECT_SHARE * runs.len() as f64 {
        return None;
    }
    // The program's read size: a read of whole blocks then a fill, again and again in a run,
    // is one read of the program's each time (the blocks and the buffer's size).
    let mut app_reads: HashMap<u64, usize> = HashMap::new();
    for run in runs {
        for pair in run.sizes.windows(3) {
            if direct(pair[0]) && pair[1] == block {
                *app_reads.entry(pair[0] + block).or_default() += 1;
            }
        }
    }
    let app_read = app_reads
        .iter()
        .filter(|&(_, &n)| n >= 2)
        .max_by_key(|&(size, n)| (*n, *size))
        .map_or(0, |(&size, _)| size);
    let buffer = usize::try_from(block).ok()?;
    let app_read = usize::try_from(app_read).ok()?;
    // Each shape the stream may have; the one that makes the most runs.
    [(true, app_read), (false, app_read), (true, 0), (false, 0)]
        .into_iter()
        .map(|(header_read, app_read)| BufferedStream {
            buffer,
            header_read,
            app_read,
        })
        .max_by_key(|stream| {
            runs.iter()
                .filter(|run| consumed_if_made(stream, run).is_some())
                .count()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, sizes: &[u64], file_len: u64) -> Run<'static> {
        Run {
            first: None,
            header: false,
            start,
            end: start + sizes.iter().sum::<u64>(),
            sizes: sizes.to_vec(),
            file_len,
        }
    }

    #[test]
    fn a_run_is_made_by_the_stream_that_reads_it_and_not_by_others() {
        let kaldi = BufferedStream {
            buffer: 4096,
            header_read: true,
            app_read: 0,
        };
        // A matrix read after its header: the fill, the blocks, a fill past the matrix.
        let matrix = run(1000, &[4096, 36864, 4096], 200_000);
        assert_eq!(consumed_if_made(&kaldi, &matrix), Some(45056 - 2048));
        // Reads of 1 MiB a time (np.fromfile chunks) are not a 4 KiB stream's.
        let chunks = run(0, &[1 << 20, 1 << 20, 1 << 20, 5000], (3 << 20) + 5000);
        assert_eq!(consumed_if_made(&kaldi, &chunks), None);
        // Pillow's 64 KiB reads of a PNG read to its end.
        let pillow = BufferedStream {
            app_read: 65536,
            ..kaldi
        };
        let png = run(0, &[4096, 61440, 4096, 61440, 4096, 12288, 2544], 150_000);
        assert_eq!(consumed_if_made(&pillow, &png), Some(150_000));
        assert_eq!(consumed_if_made(&kaldi, &png), None);
        // A crop without a header's read: the blocks, then a fill.
        let plain = BufferedStream {
            header_read: false,
            ..kaldi
        };
        let crop = run(5000, &[28672, 4096], 100_000);
        assert!(consumed_if_made(&plain, &crop).is_some());
        assert_eq!(consumed_if_made(&kaldi, &crop), None);
    }
}
