//! Record streams: files read front to back in requests of one size (a reader's buffer
//! refills), the samples inside them found by walking the files' own framing. A TFRecord
//! pipeline (`TFRecordDataset` with an interleave) reads so: its steps are decoupled from its
//! reads by prefetching, so the batch and the step come from the epoch's length and the
//! shortest recurring pause, not from the samples between two pauses.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};

use super::trace_view::DataSet;
use super::{Activity, Found, Stats, mode, secs};
use crate::event::Op;
use crate::ingest::Rec;
use crate::timeline::{Timeline, op};

/// Openings of a data file that must read it as a stream for the files to count as streams.
const STREAM_SHARE: f64 = 0.8;

/// How a program streams its files.
#[derive(Debug, Clone)]
pub(super) struct Stream {
    /// The size of every request but each file's last: the reader's buffer.
    pub transfer: u64,
    /// The most data files one thread had open at once (an interleave's cycle).
    pub open_at_once: u64,
    /// Records of each data file, by file, from walking its framing.
    pub records: HashMap<u64, Vec<u64>>,
}

/// The stream the data reads make, when at least [`STREAM_SHARE`] of the openings read their
/// file from its start to its end in contiguous requests of one size (the last shorter), and
/// the files are TFRecord files still there to walk.
pub(super) fn stream_of(t: &Timeline, data: &DataSet, activity: &Activity) -> Option<Stream> {
    // Per opening (process, thread, file): its reads in order.
    let mut open: HashMap<(u32, u32, u64), Vec<(u64, u64)>> = HashMap::new();
    let mut done: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
    let mut open_now: HashMap<(u32, u32), u64> = HashMap::new();
    let mut most_open = 0u64;
    for r in &activity.calls {
        let key = (r.rank, r.tid, r.file);
        match op(r) {
            Op::Open if r.fd >= 0 => {
                if let Some(reads) = open.insert(key, Vec::new()) {
                    done.push((r.file, reads));
                }
                let n = open_now.entry((r.rank, r.tid)).or_default();
                *n += 1;
                most_open = most_open.max(*n);
            }
            Op::Read if r.bytes > 0 && r.offset >= 0 => {
                if let Some(reads) = open.get_mut(&key) {
                    reads.push((r.offset as u64, r.bytes as u64));
                }
            }
            Op::Close => {
                if let Some(reads) = open.remove(&key) {
                    done.push((r.file, reads));
                    if let Some(n) = open_now.get_mut(&(r.rank, r.tid)) {
                        *n = n.saturating_sub(1);
                    }
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_iter().map(|((_, _, f), reads)| (f, reads)));
    done.retain(|(_, reads)| reads.len() >= 2);
    if done.is_empty() {
        return None;
    }
    let transfers: Vec<u64> = done.iter().map(|(_, reads)| reads[0].1).collect();
    let transfer = mode(&transfers);
    let streamed = done
        .iter()
        .filter(|(file, reads)| {
            let size = data.totals.get(file).map_or(0, |t| t.size);
            let mut at = 0u64;
            let last = reads.len() - 1;
            reads.iter().enumerate().all(|(i, &(offset, bytes))| {
                let fits = offset == at && (bytes == transfer || (i == last && bytes < transfer));
                at = offset + bytes;
                fits
            }) && at == size
        })
        .count();
    if (streamed as f64) < STREAM_SHARE * done.len() as f64 {
        return None;
    }
    let mut records = HashMap::new();
    for &file in &data.files {
        records.insert(file, tfrecord_lengths(t.path(file))?);
    }
    Some(Stream {
        transfer,
        open_at_once: most_open.max(1),
        records,
    })
}

/// The payload lengths of the records of the TFRecord file at `path` (its headers walked: a
/// length, its masked CRC-32C, the payload, the payload's CRC); `None` when the file is not
/// there or is not a TFRecord file.
fn tfrecord_lengths(path: &str) -> Option<Vec<u64>> {
    let mut file = std::fs::File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let mut lengths = Vec::new();
    let mut at = 0u64;
    let mut header = [0u8; 12];
    while at < size {
        file.seek(SeekFrom::Start(at)).ok()?;
        file.read_exact(&mut header).ok()?;
        let len_bytes: [u8; 8] = header[..8].try_into().ok()?;
        let crc = u32::from_le_bytes(header[8..].try_into().ok()?);
        if dlio_format::masked_crc32c(&len_bytes) != crc {
            return None;
        }
        let len = u64::from_le_bytes(len_bytes);
        lengths.push(len);
        at = at.checked_add(16)?.checked_add(len)?;
    }
    (at == size && !lengths.is_empty()).then_some(lengths)
}

/// What the steps of a stream are: the shortest recurring pause between bursts (the step:
/// the stream's bursts come every few steps, so the mean pause is a multiple of it) and the
/// batch that makes an epoch's records last the epoch at that step.
pub(super) struct StreamSteps {
    /// Samples per step.
    pub batch: u64,
    /// The step, seconds.
    pub step_s: f64,
    /// Steps per epoch.
    pub steps_per_epoch: u64,
}

/// The steps of a stream of `records_per_epoch` samples an epoch, over `epochs` epochs.
pub(super) fn stream_steps(
    activity: &Activity,
    records_per_epoch: u64,
    epochs: u64,
) -> Option<StreamSteps> {
    let pauses: Vec<f64> = activity
        .bursts
        .windows(2)
        .map(|w| secs(w[1].start - w[0].end))
        .collect();
    if !activity.paused || pauses.len() < 2 {
        return None;
    }
    let mut sorted = pauses.clone();
    sorted.sort_by(f64::total_cmp);
    // The shortest pause that recurs: the tenth percentile, and the pauses within 1.5x of it.
    let floor = sorted[sorted.len() / 10];
    let quantum: Vec<f64> = sorted
        .iter()
        .copied()
        .filter(|&p| p <= 1.5 * floor)
        .collect();
    let step_s = Stats::of(&quantum).median;
    let (start, end) = activity.window;
    let epoch_s = secs(end - start) / epochs.max(1) as f64;
    if step_s <= 0.0 || epoch_s <= 0.0 {
        return None;
    }
    let steps = (epoch_s / step_s).round().max(1.0) as u64;
    // The batch whose whole steps cover the epoch: the divisor of the records nearest to
    // what the step gives, within a fifth of it.
    let estimate = records_per_epoch as f64 / steps as f64;
    let batch = (1..=records_per_epoch)
        .filter(|b| records_per_epoch.is_multiple_of(*b))
        .min_by(|a, b| {
            (*a as f64 - estimate)
                .abs()
                .total_cmp(&(*b as f64 - estimate).abs())
        })
        .filter(|&b| (b as f64 - estimate).abs() <= 0.2 * estimate)
        .unwrap_or_else(|| estimate.round().max(1.0) as u64);
    Some(StreamSteps {
        batch,
        step_s,
        steps_per_epoch: records_per_epoch / batch.max(1),
    })
}

/// The keys a TFRecord stream needs beside the data set's: the tf.data pipeline, its buffer
/// and its interleave.
pub(super) fn stream_keys(stream: &Stream) -> Found {
    let mut found = Found::default();
    found.param(
        "framework",
        "tensorflow".into(),
        "TFRecord files read as streams: a tf.data pipeline".into(),
    );
    found.param(
        "reader.data_loader",
        "tensorflow".into(),
        "dlio's tf.data pipeline reads TFRecord files as streams of records".into(),
    );
    found.param(
        "reader.transfer_size",
        stream.transfer.to_string(),
        format!(
            "each file is read front to back in requests of {} bytes (the last shorter): the \
             stream's buffer",
            stream.transfer
        ),
    );
    found
}

/// How a program reads columnar files by unit (parquet row groups): which columns, how the
/// footer is read, whether footers are read once per run.
#[derive(Debug, Clone)]
pub(super) struct Columnar {
    /// The files' columns, each `read` as the traced reads cover its chunks.
    pub columns: Vec<dlio_config::ParquetColumn>,
    /// Rows of a row group (the first).
    pub group_rows: u64,
    /// Rows of a file.
    pub file_rows: u64,
    /// One read of the file's last this-many bytes at open (0: none seen, or the length and
    /// the metadata read apart).
    pub footer_read_size: u64,
    /// Footers read once per file in the run while the files were read over several epochs.
    pub metadata_cache: bool,
    /// Consecutive row groups one request fetched (the median over the row-group reads):
    /// pyarrow's read of a whole file takes its data region in one.
    pub coalesce_row_groups: u64,
    /// The median pause from a footer's read to the file's next read, seconds: the library
    /// parsing the metadata before it reads the data (`reader.open_time`); 0 without footer
    /// reads followed by one.
    pub footer_work_s: f64,
}

/// The row-group reads of parquet files read by unit, with what the files' footers say; `None`
/// when the files are not there to read or no read falls on a row group.
pub(super) fn columnar_of<'t>(
    t: &Timeline,
    data: &DataSet,
    activity: &Activity<'t>,
) -> Option<(Columnar, Vec<&'t Rec>)> {
    let mut layouts: HashMap<u64, dlio_format::ParquetLayout> = HashMap::new();
    for &file in data.files.iter().take(256) {
        if let Ok(layout) = dlio_format::parquet_layout(std::path::Path::new(t.path(file))) {
            layouts.insert(file, layout);
        }
    }
    let first = layouts.values().next()?.clone();
    let mut read = vec![false; first.columns.len()];
    let mut footer_reads: Vec<u64> = Vec::new();
    let mut footer_ends: Vec<(u64, i64)> = Vec::new();
    let mut data_starts: HashMap<u64, Vec<i64>> = HashMap::new();
    let mut visits: Vec<&Rec> = Vec::new();
    let mut visiting: HashMap<(u32, u64, usize), HashSet<i64>> = HashMap::new();
    let mut groups_per_read: Vec<f64> = Vec::new();
    for r in &activity.reads {
        let Some(layout) = layouts.get(&r.file) else {
            continue;
        };
        let (offset, end) = (r.offset.max(0) as u64, (r.offset.max(0) + r.bytes) as u64);
        if end == layout.file_bytes {
            // The footer, and what of the last row group a speculative tail read takes along.
            footer_reads.push(r.bytes as u64);
            footer_ends.push((r.file, r.end));
            continue;
        }
        data_starts.entry(r.file).or_default().push(r.start);
        // The row groups the read falls on: the one it starts in, and those it runs into (a
        // read of a whole file's data region takes every one).
        let groups: Vec<usize> = layout
            .chunks
            .iter()
            .enumerate()
            .filter(|(_, chunks)| {
                let start = chunks.iter().map(|c| c.0).min().unwrap_or(0);
                let stop = chunks.iter().map(|c| c.0 + c.1).max().unwrap_or(0);
                (offset >= start && offset < stop) || (start >= offset && start < end)
            })
            .map(|(g, _)| g)
            .collect();
        if groups.is_empty() {
            continue;
        }
        groups_per_read.push(groups.len() as f64);
        for &group in &groups {
            for (i, &(start, len)) in layout.chunks[group].iter().enumerate() {
                if start >= offset && start + len <= end && i < read.len() {
                    read[i] = true;
                }
            }
            // A visit of a row group: reads of its chunks (several requests when the
            // selected columns are not adjacent, by one thread or by an I/O pool's several)
            // until one of them is read again.
            let chunks_read = visiting.entry((r.rank, r.file, group)).or_default();
            if chunks_read.is_empty() || !chunks_read.insert(r.offset) {
                chunks_read.clear();
                chunks_read.insert(r.offset);
                visits.push(r);
            }
        }
    }
    if visits.is_empty() || !read.iter().any(|&r| r) {
        return None;
    }
    // From each footer's read to the file's next data read, by any thread (pandas reads the
    // footer on the calling thread and the data on pyarrow's I/O thread); one within a second.
    for starts in data_starts.values_mut() {
        starts.sort_unstable();
    }
    let footer_work: Vec<f64> = footer_ends
        .iter()
        .filter_map(|&(file, end)| {
            let starts = data_starts.get(&file)?;
            let next = *starts.get(starts.partition_point(|&s| s < end))?;
            let pause = super::secs(next - end);
            (pause < 1.0).then_some(pause)
        })
        .collect();
    let mut columns = first.columns.clone();
    for (column, read) in columns.iter_mut().zip(read) {
        column.read = read;
    }
    let total_opens: u64 = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.opens))
        .sum();
    let opens_per_file = total_opens as f64 / data.files.len().max(1) as f64;
    let groups = first.rows_per_group.len().max(1) as f64;
    let epochs = visits.len() as f64 / (data.files.len() as f64 * groups);
    Some((
        Columnar {
            columns,
            group_rows: first.rows_per_group.first().copied().unwrap_or(1).max(1),
            file_rows: first.rows_per_group.iter().sum::<u64>().max(1),
            // One read at the end per opening (the files may be opened before the training's
            // first read): the footer read whole, as pyarrow reads 64 KiB.
            footer_read_size: if footer_reads.len() as u64 <= total_opens.max(1) {
                mode(&footer_reads)
            } else {
                0
            },
            metadata_cache: opens_per_file <= 1.0 && epochs > 1.5,
            coalesce_row_groups: (Stats::of(&groups_per_read).median.round() as u64).max(1),
            footer_work_s: Stats::of(&footer_work).median,
        },
        visits,
    ))
}
