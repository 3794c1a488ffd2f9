//! In which order samples come, and which requests read them: one request per file, the
//! same request pattern at each opening, or a distribution of request sizes.

use std::collections::{BTreeMap, HashMap};

use super::samples::Samples;
use super::trace_view::DataSet;
use super::{Activity, Found, MAX_SIZES, SizeShare, Stats};
use crate::event::Op;
use crate::ingest::Rec;
use crate::timeline::{Timeline, op};
use dlio_storage::PAGE_BYTES;

/// The order section: `reader.file_shuffle` and `reader.sample_shuffle`, from how each epoch
/// visits its samples.
pub(super) fn order(t: &Timeline, samples: &Samples) -> Found {
    let mut found = Found::default();
    let Samples {
        events: sample_events,
        epochs,
        whole_files,
        ..
    } = samples;
    let (epochs, whole_files) = (*epochs, *whole_files);
    if samples.windows {
        let why = "each sample is a window read at an offset of its own, in a file and at a \
                   place drawn at random; keyed by train.seed, so that the replay draws the same \
                   places in every run";
        found.param("reader.file_shuffle", "seed".into(), why.into());
        found.param("reader.sample_shuffle", "seed".into(), why.into());
        return found;
    }
    if let Some(draws) = &samples.draws {
        found.param(
            "reader.file_shuffle",
            "off".into(),
            "files are drawn one by one".into(),
        );
        found.param(
            "reader.sample_shuffle",
            "seed".into(),
            "the draws differ from epoch to epoch; keyed by train.seed, so that the replay's \
             draws, and the files they find, are the same in every run"
                .into(),
        );
        found.param(
            "reader.sample_replacement",
            "True".into(),
            draws.evidence.clone(),
        );
        return found;
    }
    // Order.
    let per_epoch = (sample_events.len() as u64).div_ceil(epochs).max(1) as usize;
    let epoch_orders: Vec<Vec<(u64, i64)>> = sample_events
        .chunks(per_epoch)
        .map(|c| {
            c.iter()
                .map(|r| (r.file, if whole_files { 0 } else { r.offset }))
                .collect()
        })
        .collect();
    if samples.stream.is_some() || samples.columnar.is_some() {
        let order = order_of(&epoch_orders, |(f, _)| t.path(*f).to_string());
        found.append(same_order_each_epoch(&[&order]));
        found.param("reader.file_shuffle", order.mode.into(), order.evidence);
        found.param(
            "reader.sample_shuffle",
            "off".into(),
            "each file's samples are read in the file's order (a stream of records, or whole \
             row groups)"
                .into(),
        );
        return found;
    }
    if whole_files {
        // A sample is a file: one order for both.
        let order = order_of(&epoch_orders, |(f, off)| {
            format!("{}\u{0}{off:020}", t.path(*f))
        });
        found.append(same_order_each_epoch(&[&order]));
        found.param(
            "reader.file_shuffle",
            order.mode.into(),
            order.evidence.clone(),
        );
        found.param("reader.sample_shuffle", order.mode.into(), order.evidence);
        return found;
    }
    // Samples inside files: the files' order is the order of their first visits; the
    // samples' order is whether each file's samples come in file order (shards streamed
    // front to back) or not.
    let file_orders: Vec<Vec<(u64, i64)>> = epoch_orders
        .iter()
        .map(|epoch| {
            let mut seen = std::collections::HashSet::new();
            epoch
                .iter()
                .filter(|(f, _)| seen.insert(*f))
                .map(|&(f, _)| (f, 0))
                .collect()
        })
        .collect();
    let file_order = order_of(&file_orders, |(f, _)| t.path(*f).to_string());
    found.param(
        "reader.file_shuffle",
        file_order.mode.into(),
        format!("files, by their first sample: {}", file_order.evidence),
    );
    let in_file_order = epoch_orders.iter().all(|epoch| {
        let mut last: HashMap<u64, i64> = HashMap::new();
        epoch
            .iter()
            .all(|&(f, off)| last.insert(f, off).is_none_or(|prev| off >= prev))
    });
    if in_file_order {
        found.param(
            "reader.sample_shuffle",
            "off".into(),
            "every file's samples are read in the file's order (a stream of each file)".into(),
        );
        found.append(same_order_each_epoch(&[&file_order]));
    } else {
        let order = order_of(&epoch_orders, |(f, off)| {
            format!("{}\u{0}{off:020}", t.path(*f))
        });
        found.append(same_order_each_epoch(&[&file_order, &order]));
        found.param("reader.sample_shuffle", order.mode.into(), order.evidence);
    }
    found
}

/// `train.seed_change_epoch: False` when the shuffled orders found read the same order each
/// epoch and none changes from epoch to epoch (the seed of every epoch is then `train.seed`).
fn same_order_each_epoch(orders: &[&Order]) -> Found {
    let mut found = Found::default();
    let shuffled: Vec<&&Order> = orders.iter().filter(|o| o.mode == "seed").collect();
    if !shuffled.is_empty() && shuffled.iter().all(|o| o.repeated) {
        found.param(
            "train.seed_change_epoch",
            "False".into(),
            "every epoch reads the same shuffled order: one seed for all of them".into(),
        );
    }
    found
}

/// The most requests the median opening makes for its requests to be a pattern.
const MAX_PATTERN_REQUESTS: usize = 64;

/// The requests section: `reader.sample_requests` (the same requests at each opening of a
/// file read whole), `reader.transfer_size_distribution` or `reader.transfer_size`. Returns
/// the request-size distribution of the data reads too, and the program's own work inside
/// one sample's read (between its requests), seconds.
pub(super) fn requests(
    activity: &Activity,
    samples: &Samples,
    data: &DataSet,
    (reading_threads, one_thread_per_process): (u64, bool),
) -> (Vec<SizeShare>, f64, Found) {
    let mut found = Found::default();
    let Activity { reads, opens, .. } = activity;
    let Samples {
        whole_files,
        file_sizes,
        shares,
        dominant,
        ..
    } = samples;
    let (whole_files, dominant) = (*whole_files, *dominant);
    if samples.format_reads {
        // A stream's buffer, a row group's chunks, a record: the format's own reads.
        return (shares.clone(), 0.0, found);
    }
    // Request sizes: the same requests for every sample, a few patterns, or a distribution.
    // The pause between a sample's requests is spent busy on one reading thread: it is that
    // thread's work. Several threads of one process pause together without each taking a
    // core (a Python pool's threads take turns on one interpreter; tf.data's readers wait for
    // the pipeline to take what they read): each thread of the replay waits as long, asleep,
    // so that the pool keeps the program's pace without the cores a busy wait would take.
    // Worker processes' work stays in the time between samples, spent by the loader.
    let waits = reading_threads > 1 && !one_thread_per_process;
    // Where readers of one process wait, the inputs a pipeline opened ahead of its turn and
    // left waiting are read in their turn by the replay's readers, one file after another:
    // the first pause is that of the openings read at once.
    let mut patterns = samples.patterns.clone();
    for p in &mut patterns {
        if reading_threads > 1 && one_thread_per_process {
            p.work_s.iter_mut().for_each(|w| *w = 0.0);
        } else if let (true, Some(first), Some(unqueued)) =
            (waits, p.work_s.first_mut(), p.first_unqueued_s)
        {
            *first = unqueued;
        }
    }
    let one_whole = matches!(patterns.as_slice(), [p] if p.read_rest);
    if one_whole && patterns[0].requests.is_empty() {
        // Every opening reads its file in one request (or the requests before the rest are
        // not shared): the emulation reads each file whole the same way, and a distribution
        // would split those reads into drawn requests.
    } else if one_whole {
        let common = &patterns[0];
        found.param(
            "reader.sample_requests",
            pattern_requests(common, file_sizes.max as u64, waits),
            format!(
                "{:.0}% of the {} file openings read the same {} requests in the same order \
                 (offsets from the file's start, or from its end past the middle){}",
                common.share * 100.0,
                opens.len(),
                common.requests.len(),
                match (common.work_s.iter().any(|&w| w > 0.0), waits) {
                    (false, _) => "",
                    (true, false) =>
                        "; `work` is the median pause before the opening's next read: the \
                         program's own work on what it read (parsing a header)",
                    (true, true) =>
                        "; `wait` is the median pause before the opening's next read, which \
                         each of the several readers waits, asleep (their pauses overlap: \
                         turns on one interpreter, or a pipeline taking what they read)",
                }
            ),
        );
    } else if !patterns.is_empty() {
        found.param(
            "reader.sample_request_patterns",
            patterns
                .iter()
                .map(|p| {
                    format!(
                        "{{weight: {}, read_rest: {}, requests: [{}]}}",
                        p.count,
                        if p.read_rest { "True" } else { "False" },
                        pattern_requests(p, file_sizes.max as u64, waits)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            format!(
                "{:.0}% of the {} file openings make {} (offsets from the file's start, or \
                 from its end past the middle){}; each opening of the replay makes one, in \
                 these shares",
                patterns.iter().map(|p| p.share).sum::<f64>() * 100.0,
                opens.len(),
                match patterns.len() {
                    1 => "this request sequence".to_string(),
                    n => format!("one of these {n} request sequences"),
                },
                if patterns.iter().any(|p| !p.read_rest) {
                    "; read_rest False: those openings read only what their requests cover"
                } else {
                    ""
                }
            ),
        );
    } else if let Some(fit) = &samples.buffered {
        let (key, value, why) = fit.param();
        found.param(key, value, why);
    } else if let Some(range) = samples.ranges {
        found.param(
            "reader.transfer_size",
            range.to_string(),
            format!(
                "each file is read in ranges of {range} bytes (the last one shorter), each by \
                 an opening of its own: the replay reads each file in requests of that size"
            ),
        );
    } else if samples.lookup.is_some() {
        // A lookup then the window in one read: the header read and the sample's own read of
        // the replay, which drawn request sizes would split.
    } else if shares.len() > 1 {
        found.param(
            "reader.transfer_size_distribution",
            shares
                .iter()
                .map(|s| format!("{{size: {}, weight: {}}}", s.size, s.count))
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "{} data reads of {} sizes; the median alone ({} bytes) would give other request \
                 counts and sizes",
                reads.len(),
                shares.len(),
                Stats::of(&reads.iter().map(|r| r.bytes as f64).collect::<Vec<_>>()).median
            ),
        );
    } else if whole_files && dominant > 0 && (dominant as f64) < file_sizes.median {
        found.param(
            "reader.transfer_size",
            dominant.to_string(),
            format!("every data read is {dominant} bytes"),
        );
    }
    let mut streamed_work = 0.0;
    let split = found.has("reader.transfer_size_distribution") || found.has("reader.transfer_size");
    if split && whole_files && one_thread_per_process {
        // The work between a file's requests: the program decodes each chunk as it streams
        // the file (gunzip, text), on a core of its own per reading process.
        if let Some(work) = request_work(&activity.calls, data) {
            found.param(
                "reader.request_work_time",
                format!("{:.6}", work.seconds),
                format!(
                    "the mean pause between two reads of one opening, over {} openings of 3 \
                     reads or more ({} pauses, those over ten times the median left out), is \
                     {:.3} ms: the program's own work on each \
                     chunk before it asks for the next (decoding as it streams the file)",
                    work.openings,
                    work.pauses,
                    work.seconds * 1e3
                ),
            );
            streamed_work = work.per_opening_s();
        }
    }
    if shares.len() > 1
        && patterns.is_empty()
        && samples.buffered.is_none()
        && samples.ranges.is_none()
    {
        found.note(
            "request sizes are drawn per request from the distribution; the order of a \
             program's requests inside a file (a zip's directory before its data) is not \
             replayed"
                .into(),
        );
    }
    // The work of a mean opening.
    let openings: u64 = patterns.iter().map(|p| p.count).sum();
    let work = patterns
        .iter()
        .map(|p| p.work_s.iter().sum::<f64>() * p.count as f64)
        .sum::<f64>()
        / openings.max(1) as f64;
    (shares.clone(), work + streamed_work, found)
}

/// The pause between two reads of one opening, where openings read in several requests.
struct RequestWork {
    /// The mean pause, seconds.
    seconds: f64,
    /// Openings of [`MIN_STREAMED_REQUESTS`] reads or more.
    openings: usize,
    /// Pauses between two of their reads.
    pauses: usize,
}

impl RequestWork {
    /// The work of a mean opening: the pause after each of its reads but the last.
    fn per_opening_s(&self) -> f64 {
        self.seconds * self.pauses as f64 / self.openings.max(1) as f64
    }
}

/// The fewest reads an opening makes for the pauses between them to be a stream's work.
const MIN_STREAMED_REQUESTS: usize = 3;

/// The program's own work between two reads of one opening (`reader.request_work_time`): the
/// mean pause over the openings that make [`MIN_STREAMED_REQUESTS`] reads or more, when most
/// openings do and it is [`super::MIN_PREPROCESS_S`] or more. Pauses between reads of
/// two threads of one opening (a pool that shares a file), which may overlap, are left out
/// by being negative.
fn request_work(calls: &[&Rec], data: &DataSet) -> Option<RequestWork> {
    let all = openings(calls, data);
    let streamed: Vec<&Opening> = all
        .iter()
        .map(|(_, o)| o)
        .filter(|o| o.requests.len() >= MIN_STREAMED_REQUESTS)
        .collect();
    if streamed.len() * 2 <= all.len() {
        return None;
    }
    let mut pauses: Vec<f64> = streamed
        .iter()
        .flat_map(|o| o.gaps.iter().filter(|&&g| g >= 0).map(|&g| g as f64 / 1e9))
        .collect();
    // The mean, as the replay spends one value after every request and the run's length is
    // their sum (a stream's pauses are often of two kinds: a gzip block decoded, a tar
    // header parsed); the pauses over ten times the median (the process descheduled) are
    // left out.
    let median = Stats::of(&pauses).median;
    pauses.retain(|&p| p <= 10.0 * median);
    let seconds = Stats::of(&pauses).mean;
    (seconds >= super::MIN_PREPROCESS_S).then_some(RequestWork {
        seconds,
        openings: streamed.len(),
        pauses: pauses.len(),
    })
}

/// A pattern's requests as `reader.sample_requests` entries; the pauses after them as `wait`
/// (slept) when `waits`, else as `work` (spent busy).
fn pattern_requests(common: &CommonPattern, largest_file: u64, waits: bool) -> String {
    common
        .requests
        .iter()
        .zip(&common.work_s)
        .map(|(&(from_end, offset, size), &work)| {
            // Whole blocks of the first request's size, as many as fit.
            let blocks = if size == WHOLE_BLOCKS {
                format!(", blocks: {}", common.requests[0].2)
            } else {
                String::new()
            };
            // The rest of every file: the emulation cuts a request at the file's end, so the
            // largest file's rest covers each file's.
            let until = if (UNTIL_END..WHOLE_BLOCKS).contains(&size) {
                format!(", until_end: {}", size - UNTIL_END)
            } else {
                String::new()
            };
            let size = if size >= UNTIL_END {
                largest_file.saturating_sub(offset).max(1)
            } else {
                size
            };
            let work = match (work > 0.0, waits) {
                (false, _) => String::new(),
                (true, false) => format!(", work: {work:.6}"),
                (true, true) => format!(", wait: {work:.6}"),
            };
            format!(
                "{{from: {}, offset: {offset}, size: {size}{until}{blocks}{work}}}",
                if from_end { "end" } else { "start" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How an epoch visits its samples.
fn order_of(epochs: &[Vec<(u64, i64)>], sorted_key: impl Fn(&(u64, i64)) -> String) -> Order {
    let Some(first) = epochs.first() else {
        return Order::new("off", "no samples".into());
    };
    let mut sorted = first.clone();
    sorted.sort_by_cached_key(&sorted_key);
    let in_name_order = *first == sorted;
    let same_each_epoch = epochs.windows(2).all(|w| w[0] == w[1]);
    match (in_name_order, epochs.len() > 1, same_each_epoch) {
        (true, _, true) => Order::new("off", "every epoch reads in name order".into()),
        (_, true, true) => Order {
            repeated: true,
            ..Order::new(
                "seed",
                format!("{} epochs read in the same shuffled order", epochs.len()),
            )
        },
        // Keyed by the run's seed rather than drawn anew (DLIO's `random`): the replay of a
        // trace is the same in every run, its draws of sizes and places too.
        (_, true, false) => Order::new(
            "seed",
            format!(
                "the order differs between the {} epochs (keyed by train.seed and the epoch, \
                 so that the replay is the same in every run)",
                epochs.len()
            ),
        ),
        (false, false, _) => Order::new(
            "seed",
            "one epoch, read out of name order (whether the order changes per epoch cannot be seen)"
                .into(),
        ),
        (true, false, false) => unreachable!("one epoch is always the same as itself"),
    }
}

/// How an epoch visits its files or samples.
struct Order {
    /// `reader.file_shuffle` or `reader.sample_shuffle`.
    mode: &'static str,
    evidence: String,
    /// One shuffled order read again each epoch (`train.seed_change_epoch: False`).
    repeated: bool,
}

impl Order {
    fn new(mode: &'static str, evidence: String) -> Order {
        Order {
            mode,
            evidence,
            repeated: false,
        }
    }
}

/// The request-size distribution of the data reads, at most [`MAX_SIZES`] sizes.
pub(super) fn size_shares(reads: &[&Rec]) -> Vec<SizeShare> {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for r in reads {
        *counts.entry(r.bytes as u64).or_default() += 1;
    }
    let mut shares: Vec<SizeShare> = counts
        .into_iter()
        .map(|(size, count)| SizeShare { size, count })
        .collect();
    if shares.len() > MAX_SIZES {
        shares = quantile_shares(&shares, reads.len() as u64);
    }
    shares.sort_by(|a, b| b.count.cmp(&a.count).then(a.size.cmp(&b.size)));
    shares
}

/// A distribution of more than [`MAX_SIZES`] sizes in as many entries: each size that holds
/// a share of the reads of its own (a header read by every opening) is kept as it is, and the
/// rest are cut into bins of equal counts, each at its mean size. The bytes and the shape of
/// the distribution stay (a continuous set of sizes, lognormal files or variable records,
/// would otherwise keep its smallest sizes and lose the rest to the largest kept).
fn quantile_shares(shares: &[SizeShare], total: u64) -> Vec<SizeShare> {
    let own = total / MAX_SIZES as u64;
    let (atoms, rest): (Vec<SizeShare>, Vec<SizeShare>) =
        shares.iter().partition(|s| s.count > own.max(1));
    let bins = MAX_SIZES.saturating_sub(atoms.len()).max(1) as u64;
    let rest_total: u64 = rest.iter().map(|s| s.count).sum();
    let mut out = atoms;
    let (mut count, mut bytes, mut filled, mut closed) = (0u64, 0u128, 0u64, 0u64);
    for (i, s) in rest.iter().enumerate() {
        count += s.count;
        bytes += u128::from(s.size) * u128::from(s.count);
        // Close a bin when the counts reach its share (the last takes what is left).
        let target = rest_total * (closed + 1) / bins;
        if count > 0 && (filled + count >= target || i + 1 == rest.len()) {
            out.push(SizeShare {
                size: (bytes / u128::from(count)) as u64,
                count,
            });
            filled += count;
            closed += 1;
            (count, bytes) = (0, 0);
        }
    }
    out
}
/// One read of a file opening: from the end?, offset from that end, bytes.
pub(super) type PatternStep = (bool, u64, u64);

/// The size of a pattern's last request that reads the rest of each file, whatever its size.
pub(super) const REST: u64 = u64::MAX;

/// The last request of `p` as "the rest" ([`REST`] bytes from its offset) when it ends at the
/// file's end (`size` bytes) and starts at or before the end of what the requests before it,
/// read in order from the start, covered.
fn rest_from_covered(p: &[PatternStep], size: u64) -> Option<PatternStep> {
    let (&(from_end, offset, bytes), before) = p.split_last()?;
    if from_end || before.is_empty() || offset.checked_add(bytes) != Some(size) {
        return None;
    }
    let mut covered = 0u64;
    for &(from_end, o, b) in before {
        if from_end || o > covered {
            return None;
        }
        covered = covered.max(o + b);
    }
    (offset <= covered).then_some((false, offset, REST))
}

/// Sizes at or past this stand for "up to `size - UNTIL_END` bytes before the file's end"
/// (`until_end` of the request): far past any file's size, far from [`REST`] and
/// [`WHOLE_BLOCKS`].
pub(super) const UNTIL_END: u64 = 1 << 62;

/// Turns the bulk of an opening that read its whole file into a request that reads up to a
/// distance from the file's end ([`UNTIL_END`]) when it starts inside what the other requests
/// covered from the start and stops where their reads of the tail began: a zip's stored
/// member read after its central directory (torch.load of a .pt), whose size follows the
/// file's while the directory's stays about the same. The bulk is the last request; failing
/// that, the largest read from the start, and the requests after it that lie past its end
/// (the small members stored after the big one, read last) are placed from the file's end.
fn rest_until_the_tail(p: &mut [PatternStep], size: u64) {
    if !p.is_empty() && bulk_until_the_tail(p, p.len() - 1, size) {
        return;
    }
    let largest = (0..p.len())
        .filter(|&i| !p[i].0 && p[i].2 < UNTIL_END)
        .max_by_key(|&i| p[i].2);
    if let Some(bulk) = largest.filter(|&i| i + 1 < p.len())
        && bulk_until_the_tail(p, bulk, size)
    {
        let end = size - (p[bulk].2 - UNTIL_END);
        for r in p[bulk + 1..].iter_mut().filter(|r| !r.0 && r.1 >= end) {
            *r = (true, size - r.1, r.2);
        }
    }
}

/// [`rest_until_the_tail`] for request `bulk` of `p`: whether it was turned.
fn bulk_until_the_tail(p: &mut [PatternStep], bulk: usize, size: u64) -> bool {
    let (from_end, offset, bytes) = p[bulk];
    let end = offset.saturating_add(bytes);
    if from_end || p.len() < 2 || bytes >= UNTIL_END || end >= size {
        return false;
    }
    let stretch = |&(from_end, o, b): &PatternStep| {
        let at = if from_end { size.saturating_sub(o) } else { o };
        (at, at.saturating_add(b).min(size))
    };
    let mut stretches: Vec<(u64, u64)> = p
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != bulk)
        .map(|(_, r)| stretch(r))
        .collect();
    stretches.sort_unstable();
    // What the other requests covered from the start, and whether they covered the rest of
    // the file after the bulk.
    let mut head = 0u64;
    for &(at, to) in &stretches {
        if at <= head {
            head = head.max(to);
        }
    }
    let tail_covered =
        union_bytes(stretches.iter().map(|&(at, to)| (at.max(end), to.max(end)))) >= size - end;
    let turned = offset <= head && tail_covered;
    if turned {
        p[bulk] = (false, offset, UNTIL_END + (size - end));
    }
    turned
}

/// Sets each request of the openings to the median of the requests like it (the same place
/// in openings of as many requests, read from the same end) when it lies within
/// [`NEAR_BYTES`] (or a 32nd) of that median in offset and size: the requests that move by a
/// few bytes from file to file become one pattern. A request far from its median is left.
fn snap_nearly_equal(openings: &mut [&mut Vec<PatternStep>]) {
    // A size's kind: plain bytes, up to the end, or a marker ([`REST`], [`WHOLE_BLOCKS`]).
    let kind = |b: u64| match b {
        b if b < UNTIL_END => 0,
        b if b < WHOLE_BLOCKS => 1,
        b => b,
    };
    let shape = |p: &[PatternStep]| -> Vec<(bool, u64)> {
        p.iter()
            .map(|&(from_end, _, b)| (from_end, kind(b)))
            .collect()
    };
    let mut groups: HashMap<Vec<(bool, u64)>, Vec<usize>> = HashMap::new();
    for (i, p) in openings.iter().enumerate() {
        groups.entry(shape(p)).or_default().push(i);
    }
    // Bytes, or bytes before the end: markers are equal in a group or not near.
    let amount = |b: u64| if kind(b) == 1 { b - UNTIL_END } else { b };
    let near = |a: u64, b: u64| {
        kind(a) < 2 && amount(a).abs_diff(amount(b)) <= NEAR_BYTES.max(amount(b) / 32)
    };
    for members in groups.values().filter(|m| m.len() >= 2) {
        for step in 0..openings[members[0]].len() {
            let median = |pick: fn(&PatternStep) -> u64| -> u64 {
                let mut v: Vec<u64> = members.iter().map(|&i| pick(&openings[i][step])).collect();
                v.sort_unstable();
                v[v.len() / 2]
            };
            let offset = median(|r| r.1);
            let bytes = median(|r| r.2);
            for &i in members {
                let r = &mut openings[i][step];
                if near(r.1, offset) && near(r.2, bytes) {
                    r.1 = offset;
                    r.2 = bytes;
                }
            }
        }
    }
}

/// How far apart two requests may lie and still be one (see [`snap_nearly_equal`]).
const NEAR_BYTES: u64 = 64;

/// Whether the last request of an opening read from the start reaches its file's end: its
/// offset and size are what is left of the file after the requests before it, read in order
/// from the start (a header, then the rest).
fn reads_to_end(p: &[PatternStep]) -> bool {
    let mut at = 0u64;
    for &(from_end, offset, size) in &p[..p.len() - 1] {
        if from_end || offset != at {
            return false;
        }
        at = offset + size;
    }
    matches!(p.last(), Some(&(false, offset, _)) if offset == at)
}

/// Whether the stretches, in the order read, are three or more chunks of one size (the last
/// shorter or not), each starting where the one before ended, the first at the file's start.
fn in_chunks_from_the_start(covered: &[(u64, u64)]) -> bool {
    let Some(&(_, chunk)) = covered.first() else {
        return false;
    };
    let mut at = 0u64;
    covered.len() >= 3
        && covered.iter().enumerate().all(|(i, &(start, end))| {
            let next = start == at
                && (end - start == chunk || (i + 1 == covered.len() && end - start < chunk));
            at = end;
            next
        })
}

/// The most patterns a program's openings are described by.
const MAX_PATTERNS: usize = 8;

/// An opening's requests, and when each ended and the next started.
#[derive(Default)]
pub(super) struct Opening {
    requests: Vec<PatternStep>,
    /// (end of the last read, start of the next) nanoseconds, between consecutive reads.
    gaps: Vec<i64>,
    last_end: Option<i64>,
    /// The stretches read, from the file's start, in the order read.
    pub covered: Vec<(u64, u64)>,
}

/// The openings of data files that read something, each with its file, in the order they
/// ended: the requests each made (as from the file's start, or from its end when they start
/// past the middle) and the pauses between them.
pub(super) fn openings(calls: &[&Rec], data: &DataSet) -> Vec<(u64, Opening)> {
    // An opening is followed per process, thread and file rather than per descriptor: a
    // library may read through a copy of the descriptor (numpy's `fread` on a dup'd one).
    let mut open: HashMap<(u32, u32, u64), Opening> = HashMap::new();
    let mut done: Vec<(u64, Opening)> = Vec::new();
    // The thread that last opened each file in each process: a read on a thread that did not
    // open the file belongs to that opening (tf.data opens a shard on one thread and reads it
    // on others).
    let mut opener: HashMap<(u32, u64), u32> = HashMap::new();
    for r in calls {
        let mut key = (r.rank, r.tid, r.file);
        match op(r) {
            Op::Open if r.fd >= 0 => {
                opener.insert((r.rank, r.file), r.tid);
                if let Some(o) = open.insert(key, Opening::default()) {
                    done.push((r.file, o));
                }
            }
            Op::Read if r.bytes > 0 && r.offset >= 0 => {
                let size = data.totals.get(&r.file).map_or(0, |t| t.size);
                let offset = r.offset as u64;
                if !open.contains_key(&key)
                    && let Some(&tid) = opener.get(&(r.rank, r.file))
                {
                    key = (r.rank, tid, r.file);
                }
                if let Some(o) = open.get_mut(&key) {
                    o.requests.push(if offset > size / 2 {
                        (true, size.saturating_sub(offset), r.bytes as u64)
                    } else {
                        (false, offset, r.bytes as u64)
                    });
                    o.covered.push((offset, offset + r.bytes as u64));
                    if let Some(end) = o.last_end {
                        o.gaps.push(r.start - end);
                    }
                    o.last_end = Some(r.end);
                }
            }
            Op::Close => {
                if let Some(o) = open.remove(&key) {
                    done.push((r.file, o));
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_iter().map(|((_, _, file), o)| (file, o)));
    done.retain(|(_, o)| !o.requests.is_empty());
    done
}

/// The request sequences file openings make (each read as from the start, or from the end
/// when it starts past the middle, and its size), most made first: the one that 80% or more
/// of the openings make, else the fewest that together make 80% or more (each made by a
/// twentieth of the openings or more, at most [`MAX_PATTERNS`]: an npz whose openings each
/// read one of its members). Empty when no such set exists.
pub(super) fn common_patterns(calls: &[&Rec], data: &DataSet) -> Vec<CommonPattern> {
    let mut done = openings(calls, data);
    if done.len() < 2 {
        return Vec::new();
    }
    // A pattern is a library's few requests around a file's bulk (a header, a directory, the
    // rest); openings that make hundreds (a record's fields read one at a time, tf.data's
    // snapshot shards) are described by their sizes' distribution instead.
    let mut made: Vec<usize> = done.iter().map(|(_, o)| o.requests.len()).collect();
    made.sort_unstable();
    if made[made.len() / 2] > MAX_PATTERN_REQUESTS {
        return Vec::new();
    }
    // Whether each opening read its whole file; one that did not is replayed without the rest.
    let whole: Vec<bool> = done
        .iter()
        .map(|(file, o)| {
            let size = data.totals.get(file).map_or(0, |t| t.size);
            union_bytes(o.covered.iter().copied()) >= size
        })
        .collect();
    // A last request that goes on where the requests before it, all read in order from the
    // start, stopped is "the rest": the emulation reads what the listed requests left unread
    // in one request, so files of different sizes share the pattern of their first requests
    // (np.load of an npy: the header, then the rest in one read).
    // A last request that reaches the file's end from a place the requests before it already
    // covered is the rest too, read from where the library's parser stopped rather than where
    // its buffered reads did (np.load reads 4096 bytes, then the array from byte 128): it is
    // kept, with the size [`REST`], which the emulation cuts at each file's end.
    // An opening that read only part of its file has no rest: its requests are all it made.
    for ((file, o), _) in done.iter_mut().zip(&whole).filter(|(_, w)| **w) {
        let p = &mut o.requests;
        let size = data.totals.get(file).map_or(0, |t| t.size);
        // An opening that streamed its file in chunks of one size, in order from the start,
        // has no tail of its own: its requests are offsets from the start, so that a file of
        // another size (an evaluation shard) is read the same way up to its own end, rather
        // than its second half being placed from an end that lies elsewhere. (A buffered
        // stream's fills and whole blocks, of two sizes, keep their tail from the end, which
        // files of different sizes share.)
        if in_chunks_from_the_start(&o.covered) {
            for r in p.iter_mut().filter(|r| r.0) {
                *r = (false, size.saturating_sub(r.1), r.2);
            }
        }
        // A last request that ends at the file's end is the rest whatever the file's size: as
        // an offset from the start, even when it starts past the middle of a small file.
        if let Some(last) = p.last_mut()
            && last.0
            && last.1 == last.2
        {
            *last = (false, size.saturating_sub(last.1), last.2);
        }
        if reads_to_end(p) {
            p.pop();
        } else if let Some(rest) = rest_from_covered(p, size) {
            *p.last_mut().expect("not empty") = rest;
        }
    }
    let keys = |done: &[(u64, Opening)], several| -> Vec<(Vec<PatternStep>, bool, u64)> {
        most_made(&keyed(done, &whole), several)
    };
    let mut chosen = keys(&done, false);
    if chosen.is_empty() {
        // Files of different sizes read through a buffered stream: the buffer's first block,
        // then as many whole blocks as fit (a size of its own for each file), then the tail.
        for (file, o) in &mut done {
            let size = data.totals.get(file).map_or(0, |t| t.size);
            in_whole_blocks(&mut o.requests, size);
        }
        chosen = keys(&done, false);
    }
    if chosen.is_empty() {
        // Openings of a few kinds (each reads one member of its file; or, as pickle through a
        // buffered file, most in whole blocks and some with the bulk in one read between a
        // fixed head and a fixed tail).
        for ((file, o), _) in done.iter_mut().zip(&whole).filter(|(_, w)| **w) {
            if o.requests.iter().any(|&(_, _, size)| size == WHOLE_BLOCKS) {
                continue;
            }
            let size = data.totals.get(file).map_or(0, |t| t.size);
            if let Some(p) = rest_in_the_middle(&o.covered, size) {
                o.requests = p;
            }
        }
        chosen = keys(&done, true);
    }
    if chosen.is_empty() {
        // Requests that move by a few bytes from file to file (a zip's directory records,
        // whose lengths follow the names and sizes they hold; the stored member read up to
        // them): the bulk up to the tail read from the end, then each request at the median
        // of those like it.
        for ((file, o), _) in done.iter_mut().zip(&whole).filter(|(_, w)| **w) {
            let size = data.totals.get(file).map_or(0, |t| t.size);
            rest_until_the_tail(&mut o.requests, size);
        }
        let mut openings: Vec<&mut Vec<PatternStep>> = done
            .iter_mut()
            .zip(&whole)
            .filter(|(_, w)| **w)
            .map(|((_, o), _)| &mut o.requests)
            .collect();
        snap_nearly_equal(&mut openings);
        chosen = keys(&done, true);
    }
    if chosen.is_empty() {
        // One pattern made by half the openings or more, the others each a variant of their
        // own (a WAV's optional chunk skipped in some files, its length theirs): that pattern
        // stands for every opening. Its requests are the program's, where sizes drawn one by
        // one from all the openings' requests would split each file into as many small
        // requests as its header's fields (twice the program's read calls).
        chosen = made_by_half(&keyed(&done, &whole));
    }
    chosen
        .into_iter()
        .map(|(requests, read_rest, count)| {
            // The program's work after each listed request: the median pause before its next
            // read (the popped "rest" read included), over the openings that made the pattern.
            let made: Vec<&Opening> = done
                .iter()
                .zip(&whole)
                .filter(|((_, o), w)| o.requests == requests && **w == read_rest)
                .map(|((_, o), _)| o)
                .collect();
            let worth = |median: f64| {
                if median >= super::MIN_PREPROCESS_S {
                    median
                } else {
                    0.0
                }
            };
            let median_gap = |openings: &[&Opening], i: usize| {
                let gaps: Vec<f64> = openings
                    .iter()
                    .filter_map(|o| o.gaps.get(i).map(|&g| g as f64 / 1e9))
                    .collect();
                worth(Stats::of(&gaps).median)
            };
            let work_s = (0..requests.len()).map(|i| median_gap(&made, i)).collect();
            let unqueued: Vec<&Opening> = made.iter().copied().filter(|o| !queued(o)).collect();
            CommonPattern {
                requests,
                read_rest,
                count,
                share: count as f64 / done.len() as f64,
                work_s,
                first_unqueued_s: (!unqueued.is_empty()).then(|| median_gap(&unqueued, 0)),
            }
        })
        .collect()
}

/// The patterns that describe the openings (each opening's requests and whether it read its
/// whole file), with how many made each: the one made by 80% or more, else the fewest, most
/// made first, that together make 80% or more (see [`common_patterns`]); empty when none.
/// With `several` false, only a pattern made by 80% or more.
fn most_made(
    openings: &[(&[PatternStep], bool)],
    several: bool,
) -> Vec<(Vec<PatternStep>, bool, u64)> {
    let mut by_count: Vec<((&[PatternStep], bool), u64)> =
        pattern_counts(openings).into_iter().collect();
    // Most made first; ties to the longer pattern, then a fixed order.
    by_count.sort_by(|(a, n), (b, m)| m.cmp(n).then(b.0.len().cmp(&a.0.len())).then(a.cmp(b)));
    let total = openings.len() as u64;
    let mut chosen = Vec::new();
    let mut made = 0u64;
    for ((requests, whole), n) in by_count.into_iter().take(MAX_PATTERNS) {
        if !chosen.is_empty() && (!several || n * 20 < total) {
            break;
        }
        chosen.push((requests.to_vec(), whole, n));
        made += n;
        if made * 10 >= total * 8 {
            return chosen;
        }
    }
    Vec::new()
}

/// The pattern made by half the openings or more, with its count; empty when none is.
fn made_by_half(openings: &[(&[PatternStep], bool)]) -> Vec<(Vec<PatternStep>, bool, u64)> {
    pattern_counts(openings)
        .into_iter()
        .filter(|&(_, n)| n * 2 >= openings.len() as u64)
        .max_by(|(a, n), (b, m)| n.cmp(m).then(b.cmp(a)))
        .map(|((requests, whole), n)| (requests.to_vec(), whole, n))
        .into_iter()
        .collect()
}

/// Each opening's requests and whether it read its whole file (`whole`, in the same order):
/// what the patterns are counted by.
fn keyed<'a>(done: &'a [(u64, Opening)], whole: &[bool]) -> Vec<(&'a [PatternStep], bool)> {
    done.iter()
        .zip(whole)
        .map(|((_, o), &w)| (o.requests.as_slice(), w))
        .collect()
}

/// How many openings made each (requests, whole file) key.
fn pattern_counts<'a>(
    openings: &[(&'a [PatternStep], bool)],
) -> HashMap<(&'a [PatternStep], bool), u64> {
    let mut counts = HashMap::new();
    for &key in openings {
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// The bytes a set of stretches covers, each counted once.
pub(super) fn union_bytes(stretches: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut sorted: Vec<(u64, u64)> = stretches.collect();
    sorted.sort_unstable();
    let (mut total, mut reached) = (0u64, 0u64);
    for (start, end) in sorted {
        let start = start.max(reached);
        if end > start {
            total += end - start;
            reached = end;
        }
    }
    total
}

/// The size of a pattern's request that reads as many whole blocks as fit, the block being
/// the size of the pattern's first request.
pub(super) const WHOLE_BLOCKS: u64 = u64::MAX - 1;

/// Turns the last request of an opening that read its file in order from the start (the
/// tail, read to the end, already taken off as the rest) into [`WHOLE_BLOCKS`] when it is a
/// whole number of the first request's blocks and less than a block of the file follows it:
/// Python's `io.BufferedReader` asked for more than its buffer reads the buffer's block, then
/// the whole blocks directly, then the tail through the buffer.
fn in_whole_blocks(p: &mut [PatternStep], size: u64) {
    let Some(&(false, 0, block)) = p.first() else {
        return;
    };
    if p.len() < 2 || block < 512 {
        return;
    }
    let mut at = 0u64;
    for &(from_end, offset, bytes) in &p[..p.len() - 1] {
        if from_end || offset != at {
            return;
        }
        at = offset + bytes;
    }
    let last = p.last_mut().expect("two or more");
    let (from_end, offset, bytes) = *last;
    if !from_end
        && offset == at
        && bytes >= block
        && bytes % block == 0
        && offset + bytes <= size
        && size - offset - bytes < block
    {
        *last = (false, offset, WHOLE_BLOCKS);
    }
}

/// An opening that read its file in order from the start to the end in three or more
/// requests, its largest neither the first nor the last, as its head (the requests before the
/// largest, from the start) and its tail (those after it, from the end): the largest is the
/// rest, whose size follows the file's, so files of different sizes share the pattern of
/// their fixed head and tail. `None` for any other opening.
fn rest_in_the_middle(covered: &[(u64, u64)], size: u64) -> Option<Vec<PatternStep>> {
    if covered.len() < 3 || covered.last().map(|&(_, end)| end) != Some(size) {
        return None;
    }
    let mut at = 0u64;
    for &(start, end) in covered {
        if start != at {
            return None;
        }
        at = end;
    }
    let largest = (0..covered.len()).max_by_key(|&i| covered[i].1 - covered[i].0)?;
    if largest == 0 || largest + 1 == covered.len() {
        return None;
    }
    let head = covered[..largest]
        .iter()
        .map(|&(start, end)| (false, start, end - start));
    let tail = covered[largest + 1..]
        .iter()
        .map(|&(start, end)| (true, size - start, end - start));
    Some(head.chain(tail).collect())
}

/// A request pattern that openings make.
#[derive(Debug, Clone)]
pub(super) struct CommonPattern {
    pub requests: Vec<PatternStep>,
    /// Whether the openings that make it read their whole file (the replay reads what the
    /// requests leave) or only what the requests cover.
    pub read_rest: bool,
    /// The openings that make it.
    pub count: u64,
    /// The share of openings that make it.
    pub share: f64,
    /// The program's work after each request, seconds (0 under a few microseconds).
    pub work_s: Vec<f64>,
    /// The pause after the first request over the openings that were not [`queued`], when
    /// some were not.
    pub first_unqueued_s: Option<f64>,
}

/// The fewest pauses after an opening's first that tell its pace.
const MIN_PACED_GAPS: usize = 3;

/// An opening that read its first request and then waited for its turn far longer than it
/// paused between its later requests (over [`QUEUED_RATIO`] times their median): a pipeline's
/// prefetched input (tf.data's interleave opens the inputs after its current ones and reads
/// their first buffer, then leaves them until a current one ends).
fn queued(o: &Opening) -> bool {
    let Some((&first, later)) = o.gaps.split_first() else {
        return false;
    };
    if later.len() < MIN_PACED_GAPS {
        return false;
    }
    let later: Vec<f64> = later.iter().map(|&g| g as f64).collect();
    first as f64 > QUEUED_RATIO * Stats::of(&later).median
}

/// How much longer than its later pauses an opening's first pause is for it to have waited
/// for its turn.
const QUEUED_RATIO: f64 = 3.0;

/// The least a read into fresh memory takes beyond the same read into warm memory, per 4 KiB
/// page, nanoseconds: the kernel faults each page in and zeroes it before it copies. This
/// project's VM pays 0.9-1.5 us a page (a 64 KiB read: 3-4 us warm, 20-25 us fresh); zeroing
/// 4 KiB alone takes 0.2-0.4 us at memory's pace. A read that is slow by less than this is
/// slow for cold caches (the program's own work between its reads evicted them), which the
/// replay's fresh pages would overstate several times over.
const FAULT_FLOOR_NS_PER_PAGE: f64 = 350.0;

/// Where the reads land: `reader.fresh_read_share`, the share of the data reads of
/// [`dlio_storage::FRESH_FROM`] bytes or more that move their bytes at less than half the pace
/// of the fastest tenth of them, and by at least a page fault's cost a page
/// ([`FAULT_FLOOR_NS_PER_PAGE`]), when it is a fifth or more: reads into new objects (the
/// kernel faults their pages in as it copies) rather than into memory the program reuses,
/// which reads at the pace of the fastest.
pub(super) fn read_buffers(activity: &Activity) -> Found {
    let mut found = Found::default();
    if activity.preload {
        let large = activity
            .reads
            .iter()
            .filter(|r| r.bytes as u64 >= dlio_storage::FRESH_FROM as u64)
            .count();
        if large > 0 {
            // A program that keeps all it read (it trains from memory afterwards) read every
            // byte into memory it had not used before: that follows from what it did, whatever
            // the reads' times say.
            found.param(
                "reader.fresh_read_share",
                "1.00".into(),
                format!(
                    "the program kept what it read (it trained from memory after reading the data \
                     set once): its {large} data reads of {} KiB or more all landed in memory it had \
                     not touched, whose pages the kernel faults in as it copies",
                    dlio_storage::FRESH_FROM >> 10
                ),
            );
            return found;
        }
    }
    let timed: Vec<(f64, f64)> = activity
        .reads
        .iter()
        .filter(|r| r.bytes as u64 >= dlio_storage::FRESH_FROM as u64 && r.end > r.start)
        .map(|r| (r.bytes as f64, (r.end - r.start) as f64))
        .collect();
    if timed.len() < 10 {
        return found;
    }
    let (per_call, per_byte) = fastest_read_cost(&timed);
    let slow = timed
        .iter()
        .filter(|&&(bytes, time)| lands_in_fresh_pages(bytes, time, per_call, per_byte))
        .count();
    if slow * 5 < timed.len() {
        // The times tell no share (every read may be fresh, the fastest tenth too): what the
        // tracer saw of the destinations' pages does, when the untouched reads were the slow
        // ones.
        if let Some(Untouched { fresh, known, .. }) =
            untouched_reads(activity).filter(Untouched::slower_by_their_faults)
            && fresh * 5 >= known
        {
            found.param(
                "reader.fresh_read_share",
                format!("{:.2}", fresh as f64 / known as f64),
                format!(
                    "{fresh} of the {known} data reads of {} KiB or more landed in memory most \
                     of whose pages the program had not touched (dlio trace's untouched_pages), \
                     and moved their bytes slower than the others by a page fault's cost a page \
                     or more: the kernel faults those pages in as it copies",
                    dlio_storage::FRESH_FROM >> 10
                ),
            );
        }
        return found;
    }
    found.param(
        "reader.fresh_read_share",
        format!("{:.2}", slow as f64 / timed.len() as f64),
        format!(
            "{slow} of the {} data reads of {} KiB or more take over twice the time the \
             fastest tenth's pace gives them{}: they land in memory the program had not \
             touched (new objects), whose pages the kernel faults in as it copies",
            timed.len(),
            dlio_storage::FRESH_FROM >> 10,
            if per_call > 0.0 {
                format!(" ({:.1} us a call besides the bytes)", per_call / 1e3)
            } else {
                String::new()
            }
        ),
    );
    found
}

/// Where the reads land in memory: `reader.buffer_page_offset`, the offset past a 4 KiB page
/// boundary at which the buffers holding more than half of the data bytes read start, from
/// the `buf_page_offset` that `dlio trace` records with each read. On some CPUs the kernel's
/// copy from the page cache runs several times slower into a buffer a few bytes past the
/// file's page boundary (a Python `bytearray` of 128 KiB or more starts 16 bytes past a page),
/// so the replay reads into buffers placed as the program's were. Traces that do not say where
/// the buffers were (dftracer's) leave it out.
pub(super) fn buffer_place(activity: &Activity) -> Found {
    let mut found = Found::default();
    let mut bytes_at: HashMap<i16, u64> = HashMap::new();
    for r in &activity.reads {
        if r.buf_page_offset >= 0 && r.bytes > 0 {
            *bytes_at.entry(r.buf_page_offset).or_default() += r.bytes as u64;
        }
    }
    let Some((&offset, &bytes)) = bytes_at
        .iter()
        .max_by_key(|&(&offset, &bytes)| (bytes, std::cmp::Reverse(offset)))
    else {
        return found;
    };
    let total: u64 = activity.reads.iter().map(|r| r.bytes.max(0) as u64).sum();
    if bytes * 2 <= total {
        return found;
    }
    found.param(
        "reader.buffer_page_offset",
        offset.to_string(),
        format!(
            "{:.0}% of the {total} data bytes were read into buffers starting {offset} bytes past \
             a 4 KiB page boundary ({} offset{} in all): where a read lands sets the pace of \
             the kernel's copy on some CPUs, so the replay places its buffers there too",
            100.0 * bytes as f64 / total as f64,
            bytes_at.len(),
            if bytes_at.len() == 1 { "" } else { "s" },
        ),
    );
    found
}

/// What the tracer saw of the destinations of the data reads of [`dlio_storage::FRESH_FROM`]
/// bytes or more (`untouched_pages`).
struct Untouched {
    /// Reads whose trace says, and those of them that landed in memory mostly untouched: at
    /// least half of the whole pages their bytes span (a buffer 16 bytes past a page has one
    /// whole page fewer than it spans).
    known: usize,
    fresh: usize,
    /// Median nanoseconds a page of the fresh reads and of the others (`None`: no such read).
    fresh_pace: Option<f64>,
    warm_pace: Option<f64>,
}

impl Untouched {
    /// The fresh reads took a page fault's cost a page ([`FAULT_FLOOR_NS_PER_PAGE`]) more
    /// than the others, or every read was fresh (nothing to hold them to).
    fn slower_by_their_faults(&self) -> bool {
        match (self.fresh_pace, self.warm_pace) {
            (Some(fresh), Some(warm)) => fresh - warm >= FAULT_FLOOR_NS_PER_PAGE,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// What the tracer saw of the large data reads' destinations, when most reads say
/// ([`Untouched`]); `None` for traces that do not (dftracer's).
fn untouched_reads(activity: &Activity) -> Option<Untouched> {
    let large: Vec<&&Rec> = activity
        .reads
        .iter()
        .filter(|r| r.bytes as u64 >= dlio_storage::FRESH_FROM as u64 && r.end > r.start)
        .collect();
    let known: Vec<&&Rec> = large
        .iter()
        .copied()
        .filter(|r| r.untouched_pages >= 0)
        .collect();
    if known.is_empty() || known.len() * 2 < large.len() {
        return None;
    }
    let (mut fresh, mut warm) = (Vec::new(), Vec::new());
    for r in &known {
        let pace = (r.end - r.start) as f64 * PAGE_BYTES as f64 / r.bytes as f64;
        let whole_pages = (r.bytes / PAGE_BYTES as i64 - 1).max(1);
        if i64::from(r.untouched_pages) * 2 >= whole_pages {
            fresh.push(pace);
        } else {
            warm.push(pace);
        }
    }
    let median = |v: Vec<f64>| (!v.is_empty()).then(|| Stats::of(&v).median);
    Some(Untouched {
        known: known.len(),
        fresh: fresh.len(),
        fresh_pace: median(fresh),
        warm_pace: median(warm),
    })
}

/// Whether a read of `bytes` that took `time` (ns) landed in fresh pages, the fastest reads
/// costing `per_call + per_byte * bytes`: it took over twice that, and a page fault's cost a
/// page more.
fn lands_in_fresh_pages(bytes: f64, time: f64, per_call: f64, per_byte: f64) -> bool {
    let fastest = per_call + per_byte * bytes;
    time > 2.0 * fastest && time - fastest > FAULT_FLOOR_NS_PER_PAGE * bytes / PAGE_BYTES as f64
}

/// What the fastest reads cost: `(per call, per byte)`, nanoseconds, from `(bytes, time)`.
/// Reads of one size (the largest at most four times the smallest) cost the fastest tenth's
/// time per byte, and nothing a call. Reads of sizes far apart (a file's footer beside its
/// data) would have the small ones' call overhead taken for slowness: the per-byte cost is
/// then the fastest tenth's among the larger half, and the per-call cost the fastest tenth of
/// what the smaller half take beyond their bytes at that pace.
fn fastest_read_cost(timed: &[(f64, f64)]) -> (f64, f64) {
    let tenth = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 10]
    };
    let mut by_size = timed.to_vec();
    by_size.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (smallest, largest) = (by_size[0].0, by_size[by_size.len() - 1].0);
    if largest <= 4.0 * smallest {
        return (0.0, tenth(timed.iter().map(|&(b, t)| t / b).collect()));
    }
    let (small, large) = by_size.split_at(by_size.len() / 2);
    let per_byte = tenth(large.iter().map(|&(b, t)| t / b).collect());
    let per_call = tenth(
        small
            .iter()
            .map(|&(b, t)| (t - per_byte * b).max(0.0))
            .collect(),
    );
    (per_call, per_byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An activity of `reads` (bytes, buffer's page offset), one after another.
    fn reads_into(reads: &[(i64, i16)]) -> Vec<Rec> {
        reads
            .iter()
            .enumerate()
            .map(|(i, &(bytes, place))| Rec {
                buf_page_offset: place,
                ..super::super::test_call(i as i64, Op::Read, 1, i as i64 * bytes, bytes)
            })
            .collect()
    }

    /// The activity of `calls`, all reads, in one step.
    fn reads_only(calls: &[Rec]) -> Activity<'_> {
        Activity {
            reads: calls.iter().collect(),
            calls: calls.iter().collect(),
            opens: Vec::new(),
            window: (0, calls.last().map_or(0, |c| c.end)),
            bursts: Vec::new(),
            paused: true,
            consumer: None,
            preload: false,
            run_end: calls.last().map_or(0, |c| c.end),
            scan: None,
            written: Vec::new(),
        }
    }

    fn place_of(calls: &[Rec]) -> Option<String> {
        buffer_place(&reads_only(calls))
            .value("reader.buffer_page_offset")
            .map(str::to_string)
    }

    /// Reads of 256 KiB, each `(untouched pages, microseconds)`.
    fn timed_reads(reads: &[(i32, i64)]) -> Vec<Rec> {
        reads
            .iter()
            .enumerate()
            .map(|(i, &(untouched, us))| {
                let start = i as i64 * 10_000_000;
                Rec {
                    start,
                    end: start + us * 1000,
                    untouched_pages: untouched,
                    ..super::super::test_call(i as i64, Op::Read, 1, i as i64 * 262_144, 262_144)
                }
            })
            .collect()
    }

    fn fresh_share_of(calls: &[Rec]) -> Option<String> {
        read_buffers(&reads_only(calls))
            .value("reader.fresh_read_share")
            .map(str::to_string)
    }

    #[test]
    fn reads_into_untouched_pages_are_fresh_where_their_times_cannot_tell() {
        // Every read into new memory, all equally slow (150 us for 64 pages: 2.3 us a page):
        // no fastest tenth is warm, but the tracer saw the pages untouched.
        assert_eq!(
            fresh_share_of(&timed_reads(&[(63, 150); 20])).as_deref(),
            Some("1.00")
        );
        // A quarter of the reads untouched and slower by a fault a page, the rest warm: the
        // times tell it.
        let mut mixed = vec![(0, 30); 15];
        mixed.extend([(63, 150); 5]);
        assert_eq!(
            fresh_share_of(&timed_reads(&mixed)).as_deref(),
            Some("0.25")
        );
        // Untouched pages read no slower than warm ones (huge pages: one fault for many):
        // nothing to replay.
        let mut cheap = vec![(0, 100); 14];
        cheap.extend([(63, 101); 6]);
        assert_eq!(fresh_share_of(&timed_reads(&cheap)), None);
        // All warm, all as slow: slow for another reason than faults.
        assert_eq!(fresh_share_of(&timed_reads(&[(0, 150); 20])), None);
    }

    #[test]
    fn reads_into_one_place_past_a_page_are_replayed_there() {
        // A reused bytearray: every read 16 bytes past a page.
        assert_eq!(
            place_of(&reads_into(&[(262_144, 16); 8])).as_deref(),
            Some("16")
        );
        // Most of the bytes into one place, a few small reads elsewhere.
        let mut mixed = vec![(262_144, 48); 6];
        mixed.extend([(4096, 1200), (4096, 3000), (100, 7)]);
        assert_eq!(place_of(&reads_into(&mixed)).as_deref(), Some("48"));
        // Buffers all over the heap: no place holds half of the bytes.
        let scattered: Vec<(i64, i16)> = (0..8).map(|i| (65_536, i * 400)).collect();
        assert_eq!(place_of(&reads_into(&scattered)), None);
        // A trace that does not say (dftracer's).
        assert_eq!(place_of(&reads_into(&[(262_144, -1); 8])), None);
    }

    #[test]
    fn an_input_opened_ahead_of_its_turn_is_queued() {
        let opening = |gaps: Vec<i64>| Opening {
            requests: Vec::new(),
            gaps,
            last_end: None,
            covered: Vec::new(),
        };
        // Read its first buffer, waited 200 ms for its turn, then one read every 10 ms.
        assert!(queued(&opening(vec![
            200_000_000,
            10_000_000,
            11_000_000,
            9_000_000
        ])));
        // Paced from its first read on.
        assert!(!queued(&opening(vec![
            12_000_000, 10_000_000, 11_000_000, 9_000_000
        ])));
        // A header's parse before one more read: too few pauses to tell a pace.
        assert!(!queued(&opening(vec![200_000_000, 10_000_000])));
    }

    #[test]
    fn a_file_streamed_in_chunks_of_one_size_is_told_from_a_tail_and_a_buffered_stream() {
        let mut chunks: Vec<(u64, u64)> =
            (0..35).map(|i| (i * 262_144, (i + 1) * 262_144)).collect();
        chunks.push((35 * 262_144, 35 * 262_144 + 43_960));
        assert!(in_chunks_from_the_start(&chunks));
        // A zip's directory read at the end first, then a member: not in order.
        assert!(!in_chunks_from_the_start(&[
            (9000, 10_000),
            (0, 4000),
            (4000, 9000)
        ]));
        // A header, then a seek past a gap.
        assert!(!in_chunks_from_the_start(&[
            (0, 128),
            (4096, 8192),
            (8192, 12_288)
        ]));
        // A buffered stream's fill, whole blocks, a fill: in order, of two sizes.
        assert!(!in_chunks_from_the_start(&[
            (0, 4096),
            (4096, 65_536),
            (65_536, 69_632)
        ]));
    }

    #[test]
    fn reads_slowed_by_cold_caches_are_not_taken_for_fresh_pages() {
        // An HDF5 program's 64 KiB chunks, the fastest at 0.045 ns a byte (3 us): at 2.2 times
        // that (6.5 us, 0.2 us a page more) its caches were cold, a fault would cost 1 us a page.
        let (bytes, per_byte) = (65536.0, 0.045);
        assert!(!lands_in_fresh_pages(bytes, 6.5e3, 0.0, per_byte));
        assert!(lands_in_fresh_pages(bytes, 20e3, 0.0, per_byte));
        // 128 KiB at 0.19 ns a byte (25 us) and at 50 us, 0.8 us a page more: fresh.
        assert!(lands_in_fresh_pages(131072.0, 50e3, 0.0, 0.19));
        assert!(!lands_in_fresh_pages(131072.0, 45e3, 0.0, 0.19));
    }

    #[test]
    fn small_reads_beside_large_ones_are_not_slow_for_their_call_overhead() {
        // 12 footers of 64 KiB in 30 us each (the call's overhead) and 12 reads of 3 MiB at
        // 0.15 ns a byte: none slow.
        let mut timed: Vec<(f64, f64)> = (0..12).map(|i| (65536.0, 30e3 + i as f64)).collect();
        timed.extend((0..12).map(|i| (3.0 * 1048576.0, 0.15 * 3.0 * 1048576.0 + i as f64)));
        let (per_call, per_byte) = fastest_read_cost(&timed);
        assert!(
            (per_call - (30e3 - 0.15 * 65536.0)).abs() < 100.0,
            "{per_call}"
        );
        assert!((per_byte - 0.15).abs() < 0.01, "{per_byte}");
        // One size: the fastest tenth's pace, no overhead; reads at three times it are slow.
        let one: Vec<(f64, f64)> = (0..20)
            .map(|i| (131072.0, if i < 10 { 20e3 } else { 60e3 }))
            .collect();
        let (per_call, per_byte) = fastest_read_cost(&one);
        assert_eq!(per_call, 0.0);
        assert!(one.iter().filter(|&&(b, t)| t > 2.0 * per_byte * b).count() == 10);
    }

    #[test]
    fn a_pattern_made_by_half_the_openings_stands_for_a_tail_of_variants() {
        // 7 WAV openings read the same fields; 3 skip a chunk of their own length first.
        let common: Vec<PatternStep> = vec![(false, 0, 12), (false, 12, 8), (false, 20, 16)];
        let variants: Vec<Vec<PatternStep>> = (0..3u64)
            .map(|i| vec![(false, 0, 12), (false, 12, 8), (false, 60 + 10 * i, 8)])
            .collect();
        let mut openings: Vec<(&[PatternStep], bool)> =
            std::iter::repeat_n((common.as_slice(), true), 7).collect();
        openings.extend(variants.iter().map(|v| (v.as_slice(), true)));
        assert_eq!(made_by_half(&openings), vec![(common.clone(), true, 7)]);
        // Under half: no pattern stands for the rest.
        let few: Vec<(&[PatternStep], bool)> = std::iter::repeat_n((common.as_slice(), true), 2)
            .chain(variants.iter().map(|v| (v.as_slice(), true)))
            .collect();
        assert!(made_by_half(&few).is_empty());
    }

    #[test]
    fn openings_of_a_few_kinds_are_kept_with_their_counts_and_a_long_tail_is_not() {
        let a: Vec<PatternStep> = vec![(true, 22, 22), (false, 0, 4000)];
        let b: Vec<PatternStep> = vec![(true, 22, 22), (false, 5000, 4000)];
        let c: Vec<PatternStep> = vec![(false, 0, 100)];
        // One kind made by 80% or more: that one alone, even when several are allowed.
        let mostly_a: Vec<(&[PatternStep], bool)> = std::iter::repeat_n((a.as_slice(), false), 9)
            .chain([(b.as_slice(), false)])
            .collect();
        for several in [false, true] {
            let got = most_made(&mostly_a, several);
            assert_eq!(got, vec![(a.clone(), false, 9)], "{several}");
        }
        // Half each: none alone, both together, most made first (ties to a fixed order).
        let halves: Vec<(&[PatternStep], bool)> = [(a.as_slice(), false), (b.as_slice(), false)]
            .into_iter()
            .cycle()
            .take(20)
            .collect();
        assert!(most_made(&halves, false).is_empty());
        let got = most_made(&halves, true);
        assert_eq!(got.len(), 2);
        assert!(
            got.iter().all(|(_, whole, n)| !*whole && *n == 10),
            "{got:?}"
        );
        // The same requests read whole and read in part are two kinds.
        let mixed: Vec<(&[PatternStep], bool)> = [(c.as_slice(), true), (c.as_slice(), false)]
            .into_iter()
            .cycle()
            .take(10)
            .collect();
        assert_eq!(most_made(&mixed, true).len(), 2);
        // Twenty kinds of a twentieth each: no set of eight makes 80%.
        let tail: Vec<Vec<PatternStep>> = (0..20).map(|i| vec![(false, i * 10, 10)]).collect();
        let spread: Vec<(&[PatternStep], bool)> =
            tail.iter().map(|p| (p.as_slice(), false)).collect();
        assert!(most_made(&spread, true).is_empty());
    }

    #[test]
    fn stretches_overlapping_or_apart_count_each_byte_once() {
        assert_eq!(
            union_bytes([(0, 100), (50, 150), (200, 210)].into_iter()),
            160
        );
        assert_eq!(union_bytes([(10, 20), (0, 30)].into_iter()), 30);
        assert_eq!(union_bytes(std::iter::empty()), 0);
    }

    #[test]
    fn the_bulk_between_a_fixed_head_and_tail_is_the_rest() {
        // A pickle of 89,746 bytes: a block, the array in one read, the last opcodes.
        let got = rest_in_the_middle(&[(0, 4096), (4096, 89_652), (89_652, 89_746)], 89_746);
        assert_eq!(got, Some(vec![(false, 0, 4096), (true, 94, 94)]));
        // Another size, the same pattern.
        let other = rest_in_the_middle(&[(0, 4096), (4096, 50_000), (50_000, 50_094)], 50_094);
        assert_eq!(other, got);
        // Two requests, a gap, a largest at an end, or short of the file's end: none.
        for (covered, size) in [
            (vec![(0, 4096), (4096, 9000)], 9000),
            (vec![(0, 4096), (5000, 9000), (9000, 9100)], 9100),
            (vec![(0, 100), (100, 200), (200, 9000)], 9000),
            (vec![(0, 4096), (4096, 9000), (9000, 9094)], 10_000),
        ] {
            assert_eq!(rest_in_the_middle(&covered, size), None, "{covered:?}");
        }
    }

    #[test]
    fn a_zips_bulk_read_up_to_its_directory_stops_short_of_the_end_by_as_much() {
        // torch.load of a .pt of 101,381 bytes: the header block, the directory records from
        // the end, then the stored tensor from 4096 up to 880 bytes before the end.
        let mut p = vec![
            (false, 0, 4096),
            (true, 4096, 4096),
            (true, 864, 864),
            (false, 4096, 96_405),
        ];
        rest_until_the_tail(&mut p, 101_381);
        assert_eq!(p[3], (false, 4096, UNTIL_END + 880));
        // The bulk not reaching the tail's reads, or starting past the head's: left as it is.
        for (mut p, size) in [
            (
                vec![(false, 0, 4096), (true, 500, 500), (false, 4096, 90_000)],
                101_381,
            ),
            (
                vec![(false, 0, 100), (true, 864, 864), (false, 4096, 96_405)],
                101_381,
            ),
        ] {
            let before = p.clone();
            rest_until_the_tail(&mut p, size);
            assert_eq!(p, before, "{size}");
        }
    }

    #[test]
    fn a_zips_bulk_followed_by_its_small_members_is_read_up_to_them_and_they_from_the_end() {
        // torch.load of a dict's .pt: the header block, the directory from the end, the
        // image's storage from 4096 up to the small tensors stored after it (1,399 bytes
        // before the end), which are read last, to the end.
        let opening = |size: u64| {
            vec![
                (false, 0, 4096),
                (true, 4096, 4096),
                (true, 22, 22),
                (true, 731, 731),
                (true, 1015, 1015),
                (false, 0, 4096),
                (false, 4096, size - 4096 - 1399),
                (false, size - 1383, 1383),
            ]
        };
        let mut p = opening(27_859);
        rest_until_the_tail(&mut p, 27_859);
        assert_eq!(p[6], (false, 4096, UNTIL_END + 1399));
        assert_eq!(p[7], (true, 1383, 1383));
        // A file of another size makes the same requests.
        let mut q = opening(19_731);
        rest_until_the_tail(&mut q, 19_731);
        assert_eq!(q, p);
        // Small members the other requests never covered: the bulk stays as it was read.
        let mut gap = vec![
            (false, 0, 4096),
            (false, 4096, 22_364),
            (false, 26_476, 1383),
        ];
        let before = gap.clone();
        rest_until_the_tail(&mut gap, 27_859);
        assert_eq!(gap, before);
    }

    #[test]
    fn requests_a_few_bytes_apart_become_their_median_and_others_stay() {
        let mut a = vec![
            (true, 864, 864),
            (false, 258, 4096),
            (false, 4096, UNTIL_END + 880),
        ];
        let mut b = vec![
            (true, 866, 866),
            (false, 258, 4096),
            (false, 4096, UNTIL_END + 882),
        ];
        let mut c = vec![
            (true, 839, 839),
            (false, 254, 4096),
            (false, 4096, UNTIL_END + 855),
        ];
        // Another shape (one request fewer), and one far from the rest.
        let mut d = vec![(true, 864, 864), (false, 258, 4096)];
        let mut e = vec![
            (true, 5000, 5000),
            (false, 258, 4096),
            (false, 4096, UNTIL_END + 880),
        ];
        snap_nearly_equal(&mut [&mut a, &mut b, &mut c, &mut d, &mut e]);
        // The median of four is the upper of the middle two (864 and 866 of 839..5000).
        let median = vec![
            (true, 866, 866),
            (false, 258, 4096),
            (false, 4096, UNTIL_END + 880),
        ];
        assert_eq!((&a, &b, &c), (&median, &median, &median));
        assert_eq!(d, vec![(true, 864, 864), (false, 258, 4096)]);
        assert_eq!(e[0], (true, 5000, 5000));
        assert_eq!(e[1..], median[1..]);
    }

    #[test]
    fn a_buffered_streams_whole_blocks_become_one_request_for_every_file_size() {
        // PNGs of 11259, 25407 and 45194 bytes read by Python's buffered reader, the tail
        // already taken off as the rest: a block, then the whole blocks that fit.
        for (size, middle) in [(11_259, 4096), (25_407, 20_480), (45_194, 40_960)] {
            let mut p = vec![(false, 0, 4096), (false, 4096, middle)];
            in_whole_blocks(&mut p, size);
            assert_eq!(
                p,
                vec![(false, 0, 4096), (false, 4096, WHOLE_BLOCKS)],
                "{size}"
            );
        }
        // Not whole blocks, a block or more left after them, out of order, or from the end:
        // left as they are.
        for (mut p, size) in [
            (vec![(false, 0, 4096), (false, 4096, 5000)], 11_259),
            (vec![(false, 0, 4096), (false, 4096, 4096)], 20_000),
            (vec![(false, 0, 4096), (false, 8192, 4096)], 12_500),
            (vec![(false, 0, 4096), (true, 8192, 4096)], 12_500),
            (vec![(false, 0, 256), (false, 256, 512)], 1000),
        ] {
            let before = p.clone();
            in_whole_blocks(&mut p, size);
            assert_eq!(p, before, "{size}");
        }
    }
}
