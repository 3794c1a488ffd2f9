//! Phase 2: merge the sorted runs into one stream ordered by (rank, start) and sweep it.
//! Because starts arrive in order, the union of a layer's intervals from the sweep point
//! onwards is `[t, max end seen)`, so every union and every overlap costs O(1) state per
//! layer, whatever the number of events. Order-dependent figures (sequential access, file
//! positions) are computed here for the same reason.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;

use hdrhistogram::Histogram;

use crate::event::{LAYER_COUNT, Layer, Op, is_checkpoint_path};
use crate::ingest::{Ingested, Rec};
use crate::model::{
    AccessPattern, Bandwidth, Bucket, Counts, FileRow, FileSummary, FunctionRow, LayerRow,
    OpenCount, RankRow, RankTimeline, SizeStats, Skew, TimeSummary, TransferSizes,
};

/// Time bins of the bandwidth and timeline plots.
const BINS: i64 = 200;
/// Ranks drawn in the timeline.
const TIMELINE_RANKS: usize = 32;
/// Files listed by name.
const TOP_FILES: usize = 20;
const MIB: f64 = 1024.0 * 1024.0;

/// Darshan's size buckets: inclusive upper bounds and names.
const BUCKETS: [(u64, &str); 10] = [
    (100, "0_100"),
    (1024, "100_1K"),
    (10 * 1024, "1K_10K"),
    (100 * 1024, "10K_100K"),
    (1024 * 1024, "100K_1M"),
    (4 * 1024 * 1024, "1M_4M"),
    (10 * 1024 * 1024, "4M_10M"),
    (100 * 1024 * 1024, "10M_100M"),
    (1024 * 1024 * 1024, "100M_1G"),
    (u64::MAX, "1G_PLUS"),
];

/// The slot of the union of all I/O (whatever its layer).
const ALL_IO: usize = Layer::Io as usize;
const COMPUTE: usize = Layer::Compute as usize;

fn bucket_of(size: u64) -> usize {
    BUCKETS
        .iter()
        .position(|&(hi, _)| size <= hi)
        .unwrap_or(BUCKETS.len() - 1)
}

struct Sizes {
    /// `None` only if the histogram could not be built (then the median is the mean).
    hist: Option<Histogram<u64>>,
    buckets: [u64; 10],
    ops: u64,
    bytes: u64,
    min: u64,
    max: u64,
}

impl Sizes {
    fn new() -> Sizes {
        Sizes {
            // 3 significant digits up to 1 PiB per call: fixed memory (about 400 KiB).
            hist: Histogram::new_with_bounds(1, 1 << 50, 3).ok(),
            buckets: [0; 10],
            ops: 0,
            bytes: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    fn add(&mut self, n: u64) {
        if let Some(h) = &mut self.hist {
            h.saturating_record(n);
        }
        self.buckets[bucket_of(n)] += 1;
        self.ops += 1;
        self.bytes += n;
        self.min = self.min.min(n);
        self.max = self.max.max(n);
    }

    fn stats(&self) -> SizeStats {
        SizeStats {
            ops: self.ops,
            bytes: self.bytes,
            min: if self.ops == 0 { 0 } else { self.min },
            median: match &self.hist {
                _ if self.ops == 0 => 0,
                Some(h) => h.lowest_equivalent(h.value_at_quantile(0.5)),
                None => self.bytes / self.ops,
            },
            mean: if self.ops == 0 {
                0.0
            } else {
                self.bytes as f64 / self.ops as f64
            },
            max: self.max,
            buckets: BUCKETS
                .iter()
                .zip(self.buckets)
                .map(|(&(_, label), count)| Bucket { label, count })
                .collect(),
        }
    }
}

#[derive(Default)]
struct FileAgg {
    opens: u64,
    reads: u64,
    bytes_read: u64,
    writes: u64,
    bytes_written: u64,
}

#[derive(Default)]
struct Access {
    reads: u64,
    seq_reads: u64,
    consec_reads: u64,
    writes: u64,
    seq_writes: u64,
    consec_writes: u64,
}

/// Equal time bins from the job's start.
struct Bins {
    origin: i64,
    width: i64,
    count: usize,
}

impl Bins {
    /// Adds `weight` spread over `[a, b)` to `v` (all of it to `a`'s bin when `a == b`).
    fn spread(&self, v: &mut [f64], a: i64, b: i64, weight: f64) {
        let idx = |t: i64| (((t - self.origin) / self.width).max(0) as usize).min(self.count - 1);
        if b <= a {
            v[idx(a)] += weight;
            return;
        }
        let per_ns = weight / (b - a) as f64;
        let (first, last) = (idx(a), idx(b - 1));
        for (i, slot) in v.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = a.max(self.origin + i as i64 * self.width);
            let hi = b.min(self.origin + (i as i64 + 1) * self.width);
            if hi > lo {
                *slot += per_ns * (hi - lo) as f64;
            }
        }
    }
}

struct RankState {
    rank: u32,
    t: i64,
    first: i64,
    last_end: i64,
    end: [i64; LAYER_COUNT],
    union: [i64; LAYER_COUNT],
    with_compute: [i64; LAYER_COUNT],
    io_ops: u64,
    bytes: u64,
    prev_end: HashMap<u64, i64>,
    /// The position of each open file: by (thread, descriptor), or by (thread, file) when
    /// the events carry no descriptor (dftracer 2.x's POSIX events name only the file).
    fd_pos: HashMap<(u32, u64), i64>,
    timeline: Option<(Vec<f64>, Vec<f64>)>,
}

impl RankState {
    fn new(rank: u32, start: i64, bins: &Bins, with_timeline: bool) -> RankState {
        RankState {
            rank,
            t: start,
            first: start,
            last_end: start,
            end: [i64::MIN; LAYER_COUNT],
            union: [0; LAYER_COUNT],
            with_compute: [0; LAYER_COUNT],
            io_ops: 0,
            bytes: 0,
            prev_end: HashMap::new(),
            fd_pos: HashMap::new(),
            timeline: with_timeline.then(|| (vec![0.0; bins.count], vec![0.0; bins.count])),
        }
    }

    /// Moves the sweep to `s`, adding what each layer covers in `[t, s)`.
    fn advance(&mut self, s: i64, bins: &Bins) {
        if s <= self.t {
            return;
        }
        let t = self.t;
        let compute_end = self.end[COMPUTE].min(s);
        for l in 0..LAYER_COUNT {
            let e = self.end[l].min(s);
            if e > t {
                self.union[l] += e - t;
                let both = e.min(compute_end);
                if both > t {
                    self.with_compute[l] += both - t;
                }
            }
        }
        if let Some((compute, io)) = &mut self.timeline {
            if compute_end > t {
                bins.spread(compute, t, compute_end, (compute_end - t) as f64);
            }
            let io_end = self.end[ALL_IO].min(s);
            if io_end > t {
                bins.spread(io, t, io_end, (io_end - t) as f64);
            }
        }
        self.t = s;
    }
}

/// Everything the sweep accumulates across ranks.
pub(crate) struct Merged {
    pub ranks: u32,
    pub time: TimeSummary,
    pub counts: Counts,
    pub layers: Vec<LayerRow>,
    pub transfer_sizes: TransferSizes,
    pub access: AccessPattern,
    pub functions: Vec<FunctionRow>,
    pub files: FileSummary,
    pub per_rank: Vec<RankRow>,
    pub skew: Skew,
    pub bandwidth: Bandwidth,
    pub timeline: Vec<RankTimeline>,
}

struct Sweep<'a> {
    ingested: &'a Ingested,
    bins: Bins,
    layer_ops: [u64; LAYER_COUNT],
    layer_bytes: [u64; LAYER_COUNT],
    read_sizes: Sizes,
    write_sizes: Sizes,
    access: Access,
    files: HashMap<u64, FileAgg>,
    is_ckpt: HashMap<u64, bool>,
    counts: Counts,
    read_bw: Vec<f64>,
    write_bw: Vec<f64>,
    done: Vec<RankState>,
    timelines: Vec<RankTimeline>,
}

impl Sweep<'_> {
    fn io_layer(&mut self, file: u64) -> Layer {
        if file == 0 {
            return Layer::OtherPosix;
        }
        let names = &self.ingested.file_names;
        let ckpt = *self
            .is_ckpt
            .entry(file)
            .or_insert_with(|| names.get(&file).is_some_and(|p| is_checkpoint_path(p)));
        if ckpt {
            Layer::CheckpointPosix
        } else {
            Layer::ReaderPosix
        }
    }

    fn record(&mut self, st: &mut RankState, r: &Rec) {
        st.advance(r.start, &self.bins);
        st.last_end = st.last_end.max(r.end);
        let mut layer = Layer::from_u8(r.layer);
        if layer == Layer::Io {
            layer = self.io_layer(r.file);
        }
        let mut slots = [Some(Layer::App as usize), None, None];
        match layer {
            Layer::Other | Layer::App => {}
            l if l.is_io() => {
                slots[1] = Some(l as usize);
                slots[2] = Some(ALL_IO);
            }
            l => slots[1] = Some(l as usize),
        }
        for s in slots.into_iter().flatten() {
            st.end[s] = st.end[s].max(r.end);
        }
        self.layer_ops[layer as usize] += 1;
        if r.item {
            self.counts.items += 1;
        }
        match layer {
            Layer::Compute => self.counts.compute += 1,
            Layer::Fetch => self.counts.fetch += 1,
            Layer::Checkpoint => self.counts.checkpoints += 1,
            _ => {}
        }
        if !layer.is_io() {
            return;
        }
        st.io_ops += 1;
        let op = Op::from_u8(r.op);
        // Descriptors and file hashes cannot collide: a descriptor key has the top bit set.
        let key = (
            r.tid,
            if r.fd >= 0 {
                (1 << 63) | r.fd as u64
            } else {
                r.file
            },
        );
        let positioned = r.fd >= 0 || r.file != 0;
        match op {
            Op::Open => {
                self.files.entry(r.file).or_default().opens += 1;
                if positioned {
                    st.fd_pos.insert(key, 0);
                }
            }
            Op::Close => {
                st.fd_pos.remove(&key);
            }
            Op::Seek => {
                if r.offset >= 0 && positioned {
                    st.fd_pos.insert(key, r.offset);
                }
            }
            Op::Read | Op::Write => {
                let bytes = r.bytes.max(0);
                let offset = if r.offset >= 0 {
                    Some(r.offset)
                } else if positioned {
                    st.fd_pos.get_mut(&key).map(|pos| {
                        let at = *pos;
                        *pos += bytes;
                        at
                    })
                } else {
                    None
                };
                let write = op == Op::Write;
                if r.bytes >= 0 {
                    let n = r.bytes as u64;
                    if write {
                        self.write_sizes.add(n);
                    } else {
                        self.read_sizes.add(n);
                    }
                    self.layer_bytes[layer as usize] += n;
                    st.bytes += n;
                    let bw = if write {
                        &mut self.write_bw
                    } else {
                        &mut self.read_bw
                    };
                    self.bins.spread(bw, r.start, r.end, n as f64);
                }
                let f = self.files.entry(r.file).or_default();
                if write {
                    f.writes += 1;
                    f.bytes_written += bytes as u64;
                } else {
                    f.reads += 1;
                    f.bytes_read += bytes as u64;
                }
                if let Some(off) = offset {
                    let prev = st.prev_end.insert(r.file, off + bytes);
                    let (seq, consec) = match prev {
                        Some(p) => (off >= p, off == p),
                        None => (false, false),
                    };
                    let a = &mut self.access;
                    if write {
                        a.writes += 1;
                        a.seq_writes += u64::from(seq);
                        a.consec_writes += u64::from(consec);
                    } else {
                        a.reads += 1;
                        a.seq_reads += u64::from(seq);
                        a.consec_reads += u64::from(consec);
                    }
                }
            }
            Op::Meta | Op::Map | Op::Span => {}
        }
    }

    fn close_rank(&mut self, mut st: RankState) {
        st.advance(st.last_end, &self.bins);
        if let Some((compute, io)) = st.timeline.take() {
            let w = self.bins.width as f64;
            self.timelines.push(RankTimeline {
                rank: st.rank,
                compute: compute.iter().map(|v| (v / w).min(1.0) as f32).collect(),
                io: io.iter().map(|v| (v / w).min(1.0) as f32).collect(),
            });
        }
        st.prev_end = HashMap::new();
        st.fd_pos = HashMap::new();
        self.done.push(st);
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// Sweeps the runs of `ingested` (which must hold at least one complete event).
pub(crate) fn merge(mut ingested: Ingested) -> io::Result<Merged> {
    let runs = std::mem::take(&mut ingested.runs);
    let origin = ingested.first_start.unwrap_or(0);
    let job_ns = (ingested.last_end.unwrap_or(origin) - origin).max(1);
    let count = BINS.min(job_ns).max(1);
    let bins = Bins {
        origin,
        width: (job_ns + count - 1) / count,
        count: count as usize,
    };
    let mut sweep = Sweep {
        ingested: &ingested,
        read_bw: vec![0.0; bins.count],
        write_bw: vec![0.0; bins.count],
        bins,
        layer_ops: [0; LAYER_COUNT],
        layer_bytes: [0; LAYER_COUNT],
        read_sizes: Sizes::new(),
        write_sizes: Sizes::new(),
        access: Access::default(),
        files: HashMap::new(),
        is_ckpt: HashMap::new(),
        counts: Counts {
            compute: 0,
            fetch: 0,
            items: 0,
            checkpoints: 0,
        },
        done: Vec::new(),
        timelines: Vec::new(),
    };

    let mut sources = Vec::with_capacity(runs.len());
    for run in runs {
        sources.push(run.into_iter()?);
    }
    let mut heap = BinaryHeap::with_capacity(sources.len());
    for (i, src) in sources.iter_mut().enumerate() {
        if let Some(r) = src.next() {
            let r = r?;
            heap.push(Reverse((r.rank, r.start, i, HeapRec(r))));
        }
    }
    let mut current: Option<RankState> = None;
    while let Some(Reverse((_, _, i, HeapRec(r)))) = heap.pop() {
        if let Some(next) = sources[i].next() {
            let n = next?;
            heap.push(Reverse((n.rank, n.start, i, HeapRec(n))));
        }
        let mut st = match current.take() {
            Some(st) if st.rank == r.rank => st,
            other => {
                if let Some(done) = other {
                    sweep.close_rank(done);
                }
                let with_timeline = sweep.timelines.len() < TIMELINE_RANKS;
                RankState::new(r.rank, r.start, &sweep.bins, with_timeline)
            }
        };
        sweep.record(&mut st, &r);
        current = Some(st);
    }
    if let Some(st) = current {
        sweep.close_rank(st);
    }
    Ok(finish(sweep, &ingested))
}

/// Orders heap entries by (rank, start, source) only.
#[derive(Debug, Clone, Copy)]
struct HeapRec(Rec);

impl PartialEq for HeapRec {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for HeapRec {}
impl PartialOrd for HeapRec {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapRec {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

/// Every event name with its count, time and bytes, most frequent first.
fn function_rows(ingested: &Ingested) -> Vec<FunctionRow> {
    let mut functions: Vec<FunctionRow> = ingested
        .names
        .values()
        .map(|n| FunctionRow {
            cat: n.cat.clone(),
            name: n.name.clone(),
            count: n.count,
            total_time_s: secs(n.dur_ns),
            bytes: n.bytes,
        })
        .collect();
    functions.sort_by(|x, y| {
        y.count
            .cmp(&x.count)
            .then_with(|| (&x.cat, &x.name).cmp(&(&y.cat, &y.name)))
    });
    functions
}

/// The files: how many were read and written, how many were opened how often, and the
/// [`TOP_FILES`] that moved the most bytes.
fn file_summary(sweep: &Sweep<'_>, ingested: &Ingested) -> FileSummary {
    let name_of = |h: u64| {
        ingested.file_names.get(&h).cloned().unwrap_or_else(|| {
            if h == 0 {
                "(no file)".to_string()
            } else {
                format!("{h:016x}")
            }
        })
    };
    let mut by_opens: HashMap<u64, u64> = HashMap::new();
    for f in sweep.files.values() {
        *by_opens.entry(f.opens).or_insert(0) += 1;
    }
    let mut by_open_count: Vec<OpenCount> = by_opens
        .into_iter()
        .map(|(opens, files)| OpenCount { opens, files })
        .collect();
    by_open_count.sort_by_key(|o| o.opens);
    let mut top: Vec<(u64, &FileAgg)> = sweep.files.iter().map(|(k, v)| (*k, v)).collect();
    top.sort_by(|x, y| {
        (y.1.bytes_read, y.1.opens, y.1.bytes_written)
            .cmp(&(x.1.bytes_read, x.1.opens, x.1.bytes_written))
            .then_with(|| name_of(x.0).cmp(&name_of(y.0)))
    });
    FileSummary {
        files: sweep.files.len() as u64,
        files_read: sweep.files.values().filter(|f| f.reads > 0).count() as u64,
        files_written: sweep.files.values().filter(|f| f.writes > 0).count() as u64,
        top: top
            .iter()
            .take(TOP_FILES)
            .map(|(h, f)| FileRow {
                path: name_of(*h),
                opens: f.opens,
                reads: f.reads,
                bytes_read: f.bytes_read,
                writes: f.writes,
                bytes_written: f.bytes_written,
            })
            .collect(),
        by_open_count,
    }
}

/// Each rank's time and bytes, and how far the slowest is from the mean.
fn per_rank_and_skew(sweep: &Sweep<'_>, ranks: f64) -> (Vec<RankRow>, Skew) {
    let per_rank: Vec<RankRow> = sweep
        .done
        .iter()
        .map(|s| RankRow {
            rank: s.rank,
            span_s: secs(s.last_end - s.first),
            compute_s: secs(s.union[COMPUTE]),
            io_s: secs(s.union[ALL_IO]),
            io_overlapped_s: secs(s.with_compute[ALL_IO]),
            io_ops: s.io_ops,
            bytes: s.bytes,
        })
        .collect();
    let io_mean = per_rank.iter().map(|r| r.io_s).sum::<f64>() / ranks;
    let bytes_mean = per_rank.iter().map(|r| r.bytes as f64).sum::<f64>() / ranks;
    let fastest = per_rank.iter().min_by(|a, b| a.io_s.total_cmp(&b.io_s));
    let slowest = per_rank.iter().max_by(|a, b| a.io_s.total_cmp(&b.io_s));
    let skew = Skew {
        fastest_rank: fastest.map_or(0, |r| r.rank),
        slowest_rank: slowest.map_or(0, |r| r.rank),
        io_min_s: fastest.map_or(0.0, |r| r.io_s),
        io_max_s: slowest.map_or(0.0, |r| r.io_s),
        io_mean_s: io_mean,
        io_max_over_mean: if io_mean > 0.0 {
            slowest.map_or(0.0, |r| r.io_s) / io_mean
        } else {
            0.0
        },
        bytes_max_over_mean: if bytes_mean > 0.0 {
            per_rank.iter().map(|r| r.bytes as f64).fold(0.0, f64::max) / bytes_mean
        } else {
            0.0
        },
    };
    (per_rank, skew)
}

fn finish(sweep: Sweep<'_>, ingested: &Ingested) -> Merged {
    let ranks = sweep.done.len().max(1) as f64;
    let mean = |l: usize| secs(sweep.done.iter().map(|s| s.union[l]).sum::<i64>()) / ranks;
    let mean_with_compute =
        |l: usize| secs(sweep.done.iter().map(|s| s.with_compute[l]).sum::<i64>()) / ranks;
    let slowest = |l: usize| secs(sweep.done.iter().map(|s| s.union[l]).max().unwrap_or(0));

    let io_s = mean(ALL_IO);
    let compute_s = mean(COMPUTE);
    let overlapped = mean_with_compute(ALL_IO);
    let time = TimeSummary {
        compute_s,
        io_s,
        io_overlapped_s: overlapped,
        io_unoverlapped_s: io_s - overlapped,
        io_overlapped_pct: pct(overlapped, io_s),
        io_unoverlapped_pct: if io_s > 0.0 {
            100.0 - pct(overlapped, io_s)
        } else {
            0.0
        },
        compute_unoverlapped_s: compute_s - overlapped,
        fetch_s: mean(Layer::Fetch as usize),
    };

    let layers = Layer::REPORTED
        .iter()
        .map(|&l| {
            let i = l as usize;
            let t = mean(i);
            let ops = if l == Layer::App {
                ingested.events
            } else {
                sweep.layer_ops[i]
            };
            let bytes = if l == Layer::App {
                sweep.layer_bytes.iter().sum()
            } else {
                sweep.layer_bytes[i]
            };
            let slowest_t = slowest(i);
            LayerRow {
                layer: l.label().to_string(),
                time_s: t,
                slowest_rank_time_s: slowest_t,
                ops,
                ops_per_s: if t > 0.0 { ops as f64 / t } else { 0.0 },
                bytes,
                bandwidth_mib_s: if slowest_t > 0.0 {
                    bytes as f64 / MIB / slowest_t
                } else {
                    0.0
                },
                overlap_with_compute_pct: pct(mean_with_compute(i), t),
            }
        })
        .collect();

    let a = &sweep.access;
    let access = AccessPattern {
        reads: a.reads,
        sequential_reads: a.seq_reads,
        consecutive_reads: a.consec_reads,
        sequential_read_pct: pct(a.seq_reads as f64, a.reads as f64),
        consecutive_read_pct: pct(a.consec_reads as f64, a.reads as f64),
        writes: a.writes,
        sequential_writes: a.seq_writes,
        consecutive_writes: a.consec_writes,
    };

    let functions = function_rows(ingested);
    let files = file_summary(&sweep, ingested);
    let (per_rank, skew) = per_rank_and_skew(&sweep, ranks);
    let bin_s = secs(sweep.bins.width);
    let rate = |v: &[f64]| v.iter().map(|b| b / MIB / bin_s).collect::<Vec<f64>>();
    Merged {
        ranks: sweep.done.len() as u32,
        time,
        counts: sweep.counts.clone(),
        layers,
        transfer_sizes: TransferSizes {
            read: sweep.read_sizes.stats(),
            write: sweep.write_sizes.stats(),
        },
        access,
        functions,
        files,
        bandwidth: Bandwidth {
            bin_s,
            read_mib_s: rate(&sweep.read_bw),
            write_mib_s: rate(&sweep.write_bw),
        },
        per_rank,
        skew,
        timeline: sweep.timelines,
    }
}
