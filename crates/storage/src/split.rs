//! [`SplitReads`]: `reader.transfer_size` for every engine and every format. A read longer
//! than the transfer size becomes a batch of requests of exactly that size (the last one
//! shorter), handed to the engine in one [`ReadHandle::read_batch`], so an engine that
//! overlaps requests (io_uring, S3) keeps `io_depth` of them in flight, and a [`crate::Metered`]
//! beneath counts each transfer as one request.
//!
//! With `reader.transfer_size_distribution` ([`RequestSizes::Drawn`]) every read is split the
//! same way into requests whose sizes are drawn from the distribution, one draw per request,
//! from a generator seeded by the run's seed and the file's path (so a run repeats its
//! requests); a read shorter than its draw is one request.
//!
//! A stream ([`ReadHandle::read_stream`]) whose block is at most the transfer size passes
//! through unchanged: each of its requests already is one transfer, and the engine keeps
//! its queue full across them. A longer block is split too, as the transfer size is the
//! workload's request size: the window is filled with one request per slot, and each
//! window-full becomes one batch of transfers (`io_depth` in flight across all of them)
//! before its requests are consumed in order, so the queue drains once per window rather
//! than once per request.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::{SplitMix64, Xoshiro256PlusPlus};

use crate::{
    Consume, Extent, ForwardStorage, ReadHandle, ReadRequest, Storage, StorageError, check_extent,
    stream_slots,
};

/// How long the requests of a split read are.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestSizes {
    /// Every request this many bytes (the last of a read shorter): `reader.transfer_size`.
    Fixed(usize),
    /// Each request's size drawn from a distribution: `reader.transfer_size_distribution`.
    Drawn(SizeDistribution),
    /// A read of a whole file makes the requests of one of these patterns in order, then
    /// reads what they left when the pattern says so: `reader.sample_requests` (one pattern)
    /// or `reader.sample_request_patterns`. Other reads are made as asked.
    Patterns(Arc<RequestPatterns>),
    /// Every read is the program's reads through a buffered stream: `reader.read_buffer`.
    Buffered(BufferedStream),
    /// A read longer than this many bytes is a request of them, then one of the rest: a
    /// record's header then its payload, h5py's first 4 KiB of a heap block then the rest of
    /// it: `reader.head_request_size`.
    HeadThenRest(usize),
}

/// A program that reads each sample through a buffered stream, as Python's file objects
/// (`io.BufferedReader`) do: a read the buffer can answer makes no request; a longer one
/// takes what the buffer holds, reads the whole blocks that remain straight into the result,
/// and refills the buffer (one request of `buffer` bytes, or fewer at the file's end) for the
/// tail. So the requests follow the program's reads: a 4 KiB buffer makes 4096, 36864, 4096
/// of a 45,000-byte matrix read after its header, and 61440, 4096 for each 64 KiB read of
/// Pillow's. What the buffer holds is kept across the reads of one handle while they stay
/// inside it or at its end (a seek elsewhere drops it, as CPython's does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferedStream {
    /// The buffer's size, bytes (positive).
    pub buffer: usize,
    /// Each sample read starts with a read smaller than the buffer (a header's), which fills
    /// the buffer at the sample's start.
    pub header_read: bool,
    /// The most the program asks for in one read after that; 0: the rest of the sample in one
    /// read.
    pub app_read: usize,
}

/// One request of a [`BufferedStream`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferedRequest {
    /// Where it reads in the file.
    pub offset: u64,
    /// Bytes it reads (a fill fewer than the buffer's at the file's end).
    pub len: u64,
    /// Into the buffer (a fill), else straight into the program's memory (whole blocks).
    pub fill: bool,
}

impl BufferedStream {
    /// The requests of a sample read of `len` bytes at `offset`, in a file of `file_len`
    /// bytes, by a stream whose buffer holds the file's bytes `held` (`[start, end)`), and
    /// what it holds after. Each of the program's reads goes as CPython's
    /// `_bufferedreader_read_generic` (Modules/_io/bufferedio.c) makes it: the buffer's
    /// bytes, then the whole blocks of the rest in one request, then a fill of the buffer for
    /// the tail. Written by hand: no crate emulates those requests.
    pub fn requests(
        &self,
        held: (u64, u64),
        offset: u64,
        len: u64,
        file_len: u64,
    ) -> (Vec<BufferedRequest>, (u64, u64)) {
        let mut requests = Vec::new();
        let held = self.requests_into(held, offset, len, file_len, &mut requests);
        (requests, held)
    }

    /// [`Self::requests`] into `requests` (cleared first), so that a handle reuses one list
    /// for all its sample reads; returns what the buffer holds after.
    pub fn requests_into(
        &self,
        held: (u64, u64),
        offset: u64,
        len: u64,
        file_len: u64,
        requests: &mut Vec<BufferedRequest>,
    ) -> (u64, u64) {
        requests.clear();
        let block = self.buffer.max(1) as u64;
        // A seek away from what the buffer holds empties it (a seek inside keeps it).
        let mut held = if offset >= held.0 && offset <= held.1 {
            held
        } else {
            (offset, offset)
        };
        let end = offset + len;
        let mut at = offset;
        let mut first = true;
        while at < end {
            // The header's read (its size does not change the requests as long as it is
            // under the buffer's), then reads of at most `app_read`.
            let asked = match (first && self.header_read, self.app_read) {
                (true, _) => 1,
                (false, 0) => end - at,
                (false, most) => (most as u64).min(end - at),
            };
            first = false;
            let available = held.1 - at;
            if asked > available {
                let mut pos = held.1;
                let direct = (asked - available) / block * block;
                if direct > 0 {
                    requests.push(BufferedRequest {
                        offset: pos,
                        len: direct,
                        fill: false,
                    });
                    pos += direct;
                }
                held = (pos, pos);
                if pos < at + asked {
                    let fill = block.min(file_len.saturating_sub(pos));
                    requests.push(BufferedRequest {
                        offset: pos,
                        len: fill,
                        fill: true,
                    });
                    held = (pos, pos + fill);
                }
            }
            at += asked;
        }
        held
    }
}

/// One pattern of [`RequestSizes::Patterns`].
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPattern {
    /// The requests, in order.
    pub requests: Vec<PatternRequest>,
    /// The share of the openings that make it, relative to the other patterns' (positive).
    pub weight: f64,
    /// Whether the bytes the requests left unread are read after them.
    pub read_rest: bool,
}

/// The patterns of whole-file reads, and which read makes which: the `i`-th whole-file read
/// through one storage takes the pattern where the golden-ratio sequence's `i`-th point
/// falls among the patterns' cumulative shares, so every stretch of reads holds each pattern
/// in close to its share, and the choice needs no lock and no generator per handle.
#[derive(Debug)]
pub struct RequestPatterns {
    patterns: Vec<RequestPattern>,
    /// Each pattern's cumulative share, the last 1.
    cumulative: Vec<f64>,
    /// Whole-file reads made so far.
    made: std::sync::atomic::AtomicU64,
}

impl PartialEq for RequestPatterns {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl RequestPatterns {
    /// The patterns with a positive weight that read something (a request, or the rest: with
    /// no request, the whole file in one); `None` when there is none.
    pub fn new(patterns: Vec<RequestPattern>) -> Option<RequestPatterns> {
        let patterns: Vec<RequestPattern> = patterns
            .into_iter()
            .filter(|p| {
                p.weight.is_finite() && p.weight > 0.0 && (p.read_rest || !p.requests.is_empty())
            })
            .collect();
        let total: f64 = patterns.iter().map(|p| p.weight).sum();
        if patterns.is_empty() {
            return None;
        }
        let mut running = 0.0;
        let mut cumulative: Vec<f64> = patterns
            .iter()
            .map(|p| {
                running += p.weight / total;
                running
            })
            .collect();
        *cumulative.last_mut().expect("not empty") = 1.0;
        Some(RequestPatterns {
            patterns,
            cumulative,
            made: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The pattern of the next whole-file read.
    fn next(&self) -> &RequestPattern {
        /// The golden ratio's fractional part: its multiples spread over [0, 1) as evenly as
        /// any sequence does.
        const GOLDEN: f64 = 0.618_033_988_749_894_9;
        if self.patterns.len() == 1 {
            return &self.patterns[0];
        }
        let i = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let u = (i as f64 * GOLDEN).fract();
        let at = self.cumulative.partition_point(|&c| c <= u);
        &self.patterns[at.min(self.patterns.len() - 1)]
    }

    /// The same patterns without the pauses their requests wait (`wait`): the reads of a
    /// pass that keeps a pace of its own (an evaluation pass, timed by its own steps).
    pub fn without_waits(&self) -> RequestPatterns {
        let patterns = self
            .patterns
            .iter()
            .map(|p| RequestPattern {
                requests: p
                    .requests
                    .iter()
                    .map(|r| PatternRequest {
                        wait: std::time::Duration::ZERO,
                        ..*r
                    })
                    .collect(),
                ..p.clone()
            })
            .collect();
        RequestPatterns {
            patterns,
            cumulative: self.cumulative.clone(),
            made: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether any request waits after it.
    pub fn waits(&self) -> bool {
        self.patterns
            .iter()
            .flat_map(|p| &p.requests)
            .any(|r| !r.wait.is_zero())
    }

    /// The largest request of any pattern.
    fn largest(&self) -> usize {
        self.patterns
            .iter()
            .flat_map(|p| &p.requests)
            .map(|r| usize::try_from(r.size).unwrap_or(usize::MAX))
            .max()
            .unwrap_or(1)
    }
}

/// One request of [`RequestSizes::Pattern`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternRequest {
    /// `offset` counts back from the file's end instead of from its start.
    pub from_end: bool,
    /// Bytes from the start (or before the end).
    pub offset: u64,
    /// Bytes asked for (cut at the file's end).
    pub size: u64,
    /// When not 0: the request is cut down to a whole number of blocks of this many bytes
    /// (after the cut at the file's end), and left out when not one block fits. A buffered
    /// stream asked for more than its buffer holds reads the whole blocks directly and the
    /// tail through its buffer (Python's `io.BufferedReader`: 4096, then 20480, then 831 of a
    /// 25407-byte PNG).
    pub blocks: u64,
    /// When set: the request also stops this many bytes short of the file's end.
    pub until_end: Option<u64>,
    /// The reader's own work after the request (parsing what it read), spent busy before the
    /// next request.
    pub work: std::time::Duration,
    /// The reader's wait after the request (and its work), asleep, before the next request.
    pub wait: std::time::Duration,
}

/// Keeps this thread's core busy for `d`: a program's own work between two of its requests,
/// which is CPU time (and often shorter than a sleep can keep). Written by hand: a spin on the
/// clock is all it is.
fn busy_for(d: std::time::Duration) {
    if d.is_zero() {
        return;
    }
    let started = std::time::Instant::now();
    while started.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Request sizes with their shares, and the seed of the draws.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDistribution {
    /// `(size, cumulative share)`, the last share 1.
    table: Arc<[(usize, f64)]>,
    seed: u64,
}

impl SizeDistribution {
    /// Sizes with relative weights; `None` when there is no size with a positive weight.
    /// Sizes of 0 count as 1.
    pub fn new(weighted: &[(usize, f64)], seed: u64) -> Option<SizeDistribution> {
        let total: f64 = weighted
            .iter()
            .map(|&(_, w)| w)
            .filter(|w| w.is_finite() && *w > 0.0)
            .sum();
        if total <= 0.0 {
            return None;
        }
        let mut running = 0.0;
        let mut table: Vec<(usize, f64)> = weighted
            .iter()
            .filter(|(_, w)| w.is_finite() && *w > 0.0)
            .map(|&(size, w)| {
                running += w / total;
                (size.max(1), running)
            })
            .collect();
        if let Some(last) = table.last_mut() {
            last.1 = 1.0;
        }
        Some(SizeDistribution {
            table: table.into(),
            seed,
        })
    }

    fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> usize {
        // 53 random bits as a uniform number in [0, 1).
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let at = self
            .table
            .partition_point(|&(_, cumulative)| cumulative <= u);
        self.table[at.min(self.table.len() - 1)].0
    }
}

impl RequestSizes {
    /// The largest request.
    pub fn largest(&self) -> usize {
        match self {
            RequestSizes::Fixed(n) => *n,
            RequestSizes::Drawn(d) => d.table.iter().map(|&(s, _)| s).max().unwrap_or(1),
            RequestSizes::Patterns(p) => p.largest(),
            RequestSizes::Buffered(b) => b.buffer.max(b.app_read),
            RequestSizes::HeadThenRest(head) => *head,
        }
    }
}

/// Splits long reads of `inner` into requests of at most `transfer_size` bytes, or of sizes
/// drawn from a distribution.
#[derive(Debug)]
pub struct SplitReads<S: Storage> {
    inner: S,
    sizes: RequestSizes,
    request_work: std::time::Duration,
}

impl<S: Storage> SplitReads<S> {
    /// Reads of `inner` are split into requests of `transfer_size` bytes (0 counts as 1).
    pub fn new(inner: S, transfer_size: usize) -> SplitReads<S> {
        SplitReads::with_sizes(inner, RequestSizes::Fixed(transfer_size))
    }

    /// Reads of `inner` are split into requests of `sizes`.
    pub fn with_sizes(inner: S, sizes: RequestSizes) -> SplitReads<S> {
        let sizes = match sizes {
            RequestSizes::Fixed(n) => RequestSizes::Fixed(n.max(1)),
            drawn => drawn,
        };
        SplitReads {
            inner,
            sizes,
            request_work: std::time::Duration::ZERO,
        }
    }

    /// The reader's own work between two requests that continue each other
    /// (`reader.request_work_time`), spent busy, with [`RequestSizes::Fixed`] and
    /// [`RequestSizes::Drawn`]: the requests of a read are then made one after another, as a
    /// program that decodes each chunk before it asks for the next makes them.
    pub fn with_request_work(mut self, work: std::time::Duration) -> SplitReads<S> {
        self.request_work = work;
        self
    }

    /// How requests are sized.
    pub fn request_sizes(&self) -> &RequestSizes {
        &self.sizes
    }
}

impl<S: Storage> ForwardStorage for SplitReads<S> {
    fn forward_to(&self) -> &dyn Storage {
        &self.inner
    }
}

impl<S: Storage> Storage for SplitReads<S> {
    fn open(&self, path: &Path) -> Result<Box<dyn ReadHandle>, StorageError> {
        let rng: Option<u64> = match &self.sizes {
            RequestSizes::Fixed(_)
            | RequestSizes::Patterns(_)
            | RequestSizes::Buffered(_)
            | RequestSizes::HeadThenRest(_) => None,
            RequestSizes::Drawn(d) => {
                // Keyed by the file's name and its folder's, not the whole path: the same
                // workload and seed draw the same sizes wherever the data folder lies.
                let mut tail = path.components().rev().take(2).collect::<Vec<_>>();
                tail.reverse();
                let name: PathBuf = tail.iter().collect();
                let key = twox_hash::XxHash3_64::oneshot(name.as_os_str().as_encoded_bytes());
                Some(d.seed ^ key)
            }
        };
        Ok(Box::new(SplitRead {
            inner: self.inner.open(path)?,
            sizes: self.sizes.clone(),
            key: rng,
            rng: None,
            drawn_ahead: None,
            buffer: Vec::new(),
            held: (0, 0),
            plan: Vec::new(),
            request_work: match self.sizes {
                RequestSizes::Fixed(_) | RequestSizes::Drawn(_) => self.request_work,
                _ => std::time::Duration::ZERO,
            },
            last_end: None,
        }))
    }

    crate::forward_storage!(
        engine,
        capabilities,
        create,
        list,
        size,
        create_dir_all,
        remove_file,
        remove_dir_all,
        partial_path,
        drop_cache
    );

    // No background whole-file reads: a transfer size asks for reads of that size, which
    // only the foreground handles make (`open`), so the caller reads through them.
}

struct SplitRead {
    inner: Box<dyn ReadHandle>,
    sizes: RequestSizes,
    /// The key of a distribution's draws (the seed and the file's name); `None` for a fixed
    /// size.
    key: Option<u64>,
    /// The draws, keyed at the handle's first request by where it reads too: each opening of
    /// a file that reads another place (a window, a record) draws sizes of its own.
    rng: Option<Xoshiro256PlusPlus>,
    /// A size drawn for a non-blocking read that would have waited: the next request takes
    /// it, so whether the page cache held the bytes does not change the sizes a run requests.
    drawn_ahead: Option<usize>,
    /// [`RequestSizes::Buffered`]: the stream's buffer (allocated at its first fill), and the
    /// bytes of the file it holds, `[start, end)`.
    buffer: Vec<u8>,
    held: (u64, u64),
    /// The requests of the current sample read, kept for the next (no allocation a sample).
    plan: Vec<BufferedRequest>,
    /// The work between two requests that continue each other (zero: none, and the pieces
    /// of a read go to the engine together).
    request_work: std::time::Duration,
    /// Where the handle's last request ended, with `request_work`.
    last_end: Option<u64>,
}

impl SplitRead {
    /// The size of the next request, which reads at `offset`.
    fn next_size(&mut self, offset: u64) -> usize {
        if let Some(size) = self.drawn_ahead.take() {
            return size;
        }
        if let (Some(key), None) = (self.key, &self.rng) {
            // SplitMix64's first output spreads the offset over the seed's bits.
            let spread = SplitMix64::seed_from_u64(offset).next_u64();
            self.rng = Some(Xoshiro256PlusPlus::seed_from_u64(key ^ spread));
        }
        match (&self.sizes, self.rng.as_mut()) {
            (RequestSizes::Drawn(d), Some(rng)) => d.draw(rng),
            (sizes, _) => sizes.largest(),
        }
    }

    /// Whether a read of `len` bytes is one request whatever is drawn (fixed sizes only: a
    /// distribution draws for every read; a pattern shapes whole-file reads only).
    fn is_one_request(&self, len: usize) -> bool {
        match self.sizes {
            RequestSizes::Fixed(n) => len <= n,
            RequestSizes::Drawn(_) => false,
            RequestSizes::Patterns(_) => true,
            RequestSizes::Buffered(_) => false,
            RequestSizes::HeadThenRest(head) => len <= head,
        }
    }

    /// A sample read through the buffered stream, making the requests
    /// [`BufferedStream::requests`] plans: whole blocks straight into `buf`, fills into the
    /// stream's buffer, from which the sample's bytes are copied (as the program's stream
    /// copies them).
    fn read_through_buffer(
        &mut self,
        stream: BufferedStream,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<(), StorageError> {
        self.check_in_file(offset, buf.len())?;
        let end = offset + buf.len() as u64;
        let mut plan = std::mem::take(&mut self.plan);
        let held = stream.requests_into(
            self.held,
            offset,
            buf.len() as u64,
            self.inner.len(),
            &mut plan,
        );
        // What the buffer already holds of the sample.
        let (start, held_end) = self.held;
        if offset >= start && offset < held_end {
            let n = (held_end.min(end) - offset) as usize;
            let from = (offset - start) as usize;
            buf[..n].copy_from_slice(&self.buffer[from..from + n]);
        }
        for request in &plan {
            let len = request.len as usize;
            if request.fill {
                if self.buffer.len() < stream.buffer {
                    self.buffer.resize(stream.buffer, 0);
                }
                self.inner
                    .read_exact_at(&mut self.buffer[..len], request.offset)?;
                let n = (request.offset + request.len)
                    .min(end)
                    .saturating_sub(request.offset);
                let into = (request.offset - offset) as usize;
                buf[into..into + n as usize].copy_from_slice(&self.buffer[..n as usize]);
            } else {
                let into = (request.offset - offset) as usize;
                self.inner
                    .read_exact_at(&mut buf[into..into + len], request.offset)?;
            }
        }
        self.plan = plan;
        self.held = held;
        Ok(())
    }

    /// A whole-file read as the pattern makes it: its requests in order (each cut at the
    /// end), then, when the pattern reads the rest, one request per stretch they left unread.
    /// Without the rest, the bytes no request covered are left as they were in `buf`.
    fn read_by_pattern(
        &mut self,
        pattern: &RequestPattern,
        buf: &mut [u8],
    ) -> Result<(), StorageError> {
        let len = buf.len() as u64;
        let mut covered: Vec<(u64, u64)> = Vec::with_capacity(pattern.requests.len());
        for r in &pattern.requests {
            let at = if r.from_end {
                len.saturating_sub(r.offset)
            } else {
                r.offset.min(len)
            };
            let mut end = at.saturating_add(r.size).min(len);
            if let Some(short) = r.until_end {
                end = end.min(len.saturating_sub(short)).max(at);
            }
            if let Some(whole) = (end - at).checked_div(r.blocks) {
                end = at + whole * r.blocks;
            }
            // A request past a shorter file's end is not made, nor the pause after it.
            if end > at {
                self.inner
                    .read_exact_at(&mut buf[at as usize..end as usize], at)?;
                covered.push((at, end));
                busy_for(r.work);
                if !r.wait.is_zero() {
                    std::thread::sleep(r.wait);
                }
            }
        }
        if !pattern.read_rest {
            return Ok(());
        }
        covered.sort_unstable();
        let mut next = 0u64;
        for (at, end) in covered.into_iter().chain(std::iter::once((len, len))) {
            if at > next {
                self.inner
                    .read_exact_at(&mut buf[next as usize..at as usize], next)?;
            }
            next = next.max(end);
        }
        Ok(())
    }

    /// Makes `pieces`, the requests of one or more reads in order: together, or without
    /// `request_work` one after another, with the work before each that continues the one
    /// before it.
    fn read_pieces(&mut self, pieces: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        if self.request_work.is_zero() {
            return self.inner.read_batch(pieces);
        }
        let mut previous_end = None;
        for piece in pieces.iter_mut() {
            if previous_end == Some(piece.offset) {
                busy_for(self.request_work);
            }
            self.inner.read_exact_at(piece.buf, piece.offset)?;
            previous_end = Some(piece.offset + piece.buf.len() as u64);
        }
        Ok(())
    }

    /// Appends the pieces of `(buf, offset)` to `out`.
    fn split_into<'a>(&mut self, buf: &'a mut [u8], offset: u64, out: &mut Vec<ReadRequest<'a>>) {
        if let RequestSizes::HeadThenRest(head) = self.sizes {
            let (first, rest) = buf.split_at_mut(head.min(buf.len()));
            out.push(ReadRequest { offset, buf: first });
            if !rest.is_empty() {
                out.push(ReadRequest {
                    offset: offset + head as u64,
                    buf: rest,
                });
            }
            return;
        }
        let mut at = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            let n = self.next_size(at).min(rest.len());
            let (piece, tail) = rest.split_at_mut(n);
            out.push(ReadRequest {
                offset: at,
                buf: piece,
            });
            at += n as u64;
            rest = tail;
        }
    }

    /// Never ask past the end: a split request that straddles it would be a short read.
    fn check_in_file(&self, offset: u64, len: usize) -> Result<(), StorageError> {
        crate::check_in_file(self.inner.path(), self.inner.len(), offset, len)
    }
}

impl ReadHandle for SplitRead {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    /// Reads at most one transfer (a short read, as `read_at` allows).
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
        if let RequestSizes::Buffered(stream) = self.sizes {
            let n = buf
                .len()
                .min(self.inner.len().saturating_sub(offset) as usize);
            self.read_through_buffer(stream, &mut buf[..n], offset)?;
            return Ok(n);
        }
        let end = buf.len().min(self.next_size(offset));
        if self.request_work.is_zero() {
            return self.inner.read_at(&mut buf[..end], offset);
        }
        // A caller's loop of reads, each one request: the work comes before a request that
        // goes on where the handle's last one stopped.
        if self.last_end == Some(offset) {
            busy_for(self.request_work);
        }
        let read = self.inner.read_at(&mut buf[..end], offset)?;
        self.last_end = Some(offset + read as u64);
        Ok(read)
    }

    /// At most one transfer, as `read_at`.
    fn read_at_nowait(
        &mut self,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<Option<usize>, StorageError> {
        if let RequestSizes::Buffered(_) = self.sizes {
            // The stream's requests depend on what it read before: they are made in order.
            return self.read_at(buf, offset).map(Some);
        }
        if !self.request_work.is_zero() {
            // The work between requests is spent whether or not the bytes are cached.
            return self.read_at(buf, offset).map(Some);
        }
        let size = self.next_size(offset);
        let end = buf.len().min(size);
        let read = self.inner.read_at_nowait(&mut buf[..end], offset)?;
        if read.is_none() && self.key.is_some() {
            self.drawn_ahead = Some(size);
        }
        Ok(read)
    }

    fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<(), StorageError> {
        if let RequestSizes::Patterns(patterns) = &self.sizes
            && offset == 0
            && buf.len() as u64 == self.inner.len()
        {
            let patterns = Arc::clone(patterns);
            return self.read_by_pattern(patterns.next(), buf);
        }
        if let RequestSizes::Buffered(stream) = self.sizes {
            return self.read_through_buffer(stream, buf, offset);
        }
        if self.is_one_request(buf.len()) {
            return self.inner.read_exact_at(buf, offset);
        }
        self.check_in_file(offset, buf.len())?;
        let mut requests = Vec::with_capacity(buf.len().div_ceil(self.sizes.largest()));
        self.split_into(buf, offset, &mut requests);
        if let [one] = requests.as_mut_slice() {
            return self.inner.read_exact_at(one.buf, one.offset);
        }
        self.read_pieces(&mut requests)
    }

    fn read_batch(&mut self, requests: &mut [ReadRequest<'_>]) -> Result<(), StorageError> {
        if let RequestSizes::Buffered(stream) = self.sizes {
            for request in requests.iter_mut() {
                self.read_through_buffer(stream, request.buf, request.offset)?;
            }
            return Ok(());
        }
        if requests.iter().all(|r| self.is_one_request(r.buf.len())) {
            return self.inner.read_batch(requests);
        }
        let mut pieces = Vec::new();
        for request in requests.iter_mut() {
            self.split_into(request.buf, request.offset, &mut pieces);
        }
        self.read_pieces(&mut pieces)
    }

    fn read_stream(
        &mut self,
        window: &mut [u8],
        block: usize,
        requests: &mut dyn Iterator<Item = Extent>,
        consume: &mut Consume<'_>,
    ) -> Result<(), StorageError> {
        if let RequestSizes::Buffered(stream) = self.sizes {
            // One extent at a time through the buffer, in the stream's order.
            stream_slots(self.inner.path(), window.len(), block)?;
            for extent in requests {
                check_extent(self.inner.path(), extent, block)?;
                let slot = &mut window[..extent.len];
                self.read_through_buffer(stream, slot, extent.offset)?;
                consume(extent.offset, slot)?;
            }
            return Ok(());
        }
        if self.is_one_request(block) {
            return self.inner.read_stream(window, block, requests, consume);
        }
        let slots = stream_slots(self.inner.path(), window.len(), block)?;
        let mut group: Vec<Extent> = Vec::with_capacity(slots);
        loop {
            group.clear();
            group.extend((&mut *requests).take(slots));
            if group.is_empty() {
                return Ok(());
            }
            for extent in &group {
                check_extent(self.inner.path(), *extent, block)?;
                self.check_in_file(extent.offset, extent.len)?;
            }
            let mut pieces = Vec::with_capacity(slots * block.div_ceil(self.sizes.largest()));
            for (extent, slot) in group.iter().zip(window.chunks_mut(block)) {
                let buf = &mut slot[..extent.len];
                self.split_into(buf, extent.offset, &mut pieces);
            }
            self.read_pieces(&mut pieces)?;
            drop(pieces);
            for (extent, slot) in group.iter().zip(window.chunks(block)) {
                consume(extent.offset, &slot[..extent.len])?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{IoCounters, Metered, PosixStorage};

    fn file_of(len: usize) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        (dir, path, bytes)
    }

    /// A handle over `len` bytes that records the length of every read that moved bytes and
    /// answers "would wait" to every other non-blocking read.
    struct Recording {
        len: u64,
        lengths: Arc<std::sync::Mutex<Vec<usize>>>,
        nowait_calls: u64,
    }

    impl ReadHandle for Recording {
        fn path(&self) -> &Path {
            Path::new("recording")
        }

        fn len(&self) -> u64 {
            self.len
        }

        fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, StorageError> {
            let n = buf.len().min(self.len.saturating_sub(offset) as usize);
            self.lengths.lock().unwrap().push(n);
            Ok(n)
        }

        fn read_at_nowait(
            &mut self,
            buf: &mut [u8],
            offset: u64,
        ) -> Result<Option<usize>, StorageError> {
            self.nowait_calls += 1;
            if !self.nowait_calls.is_multiple_of(2) {
                return Ok(None);
            }
            self.read_at(buf, offset).map(Some)
        }
    }

    #[test]
    fn reads_that_would_wait_do_not_change_the_drawn_request_sizes() {
        let sizes = SizeDistribution::new(&[(100, 1.0), (700, 1.0), (1500, 1.0)], 3).unwrap();
        // The lengths of the requests that moved bytes, reading 50,000 bytes in reads of up to
        // 2000, trying a non-blocking read first or not.
        let requests = |nowait_first: bool| {
            let lengths = Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut handle = SplitRead {
                inner: Box::new(Recording {
                    len: 50_000,
                    lengths: Arc::clone(&lengths),
                    nowait_calls: 0,
                }),
                sizes: RequestSizes::Drawn(sizes.clone()),
                key: Some(11),
                rng: None,
                drawn_ahead: None,
                buffer: Vec::new(),
                held: (0, 0),
                plan: Vec::new(),
                request_work: std::time::Duration::ZERO,
                last_end: None,
            };
            let mut buf = vec![0u8; 2000];
            let mut offset = 0u64;
            while offset < 50_000 {
                let nowait = match nowait_first {
                    true => handle.read_at_nowait(&mut buf, offset).unwrap(),
                    false => None,
                };
                let read = match nowait {
                    Some(n) => n,
                    None => handle.read_at(&mut buf, offset).unwrap(),
                };
                offset += read as u64;
            }
            std::mem::take(&mut *lengths.lock().unwrap())
        };
        let waiting = requests(false);
        assert!(waiting.len() > 40, "{waiting:?}");
        assert!(waiting.contains(&100) && waiting.contains(&1500));
        assert_eq!(requests(true), waiting);
    }

    /// A request of `size` bytes at `offset` from the start (or the end), with no blocks and
    /// no work.
    fn req(from_end: bool, offset: u64, size: u64) -> PatternRequest {
        PatternRequest {
            from_end,
            offset,
            size,
            blocks: 0,
            until_end: None,
            work: std::time::Duration::ZERO,
            wait: std::time::Duration::ZERO,
        }
    }

    /// One pattern that reads the rest, as `reader.sample_requests` gives it.
    fn one_pattern(requests: Vec<PatternRequest>) -> RequestSizes {
        RequestSizes::Patterns(Arc::new(
            RequestPatterns::new(vec![RequestPattern {
                requests,
                weight: 1.0,
                read_rest: true,
            }])
            .unwrap(),
        ))
    }

    fn counted(sizes: RequestSizes) -> (SplitReads<Metered<PosixStorage>>, Arc<IoCounters>) {
        let counters = Arc::new(IoCounters::default());
        let metered = Metered::with_counters(PosixStorage::new(), Arc::clone(&counters));
        (SplitReads::with_sizes(metered, sizes), counters)
    }

    #[test]
    fn a_pattern_makes_its_requests_then_reads_what_they_left() {
        let (_dir, path, bytes) = file_of(10_000);
        let pattern = vec![
            req(false, 0, 100),
            req(true, 22, 22),
            req(false, 0, 100),
            req(false, 5000, 1000),
        ];
        let (storage, counters) = counted(one_pattern(pattern));
        let mut handle = storage.open(&path).unwrap();
        let mut buf = vec![0u8; bytes.len()];
        handle.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, bytes);
        let s = counters.snapshot();
        // Four requests of the pattern, then [100, 5000) and [6000, 9978).
        assert_eq!(s.read_requests, 6);
        assert_eq!(s.bytes_read, 100 + 22 + 100 + 1000 + 4900 + 3978);
        // A read of part of the file is made as asked.
        let mut part = vec![0u8; 50];
        handle.read_exact_at(&mut part, 10).unwrap();
        assert_eq!(part, bytes[10..60]);
        assert_eq!(counters.snapshot().read_requests, 7);
    }

    #[test]
    fn a_request_until_the_end_stops_short_of_it_by_as_much_in_every_file() {
        // torch.load of a .pt (a zip): the header block, the central directory from the end,
        // then the stored tensor from 4096 up to the directory, 880 bytes before the end.
        for len in [25_349u64, 101_381] {
            let (_dir, path, bytes) = file_of(len as usize);
            let mut bulk = req(false, 4096, 1 << 20);
            bulk.until_end = Some(880);
            let pattern = vec![req(false, 0, 4096), req(true, 880, 880), bulk];
            let (storage, counters) = counted(one_pattern(pattern));
            assert_eq!(read_whole(&storage, &path), bytes, "{len}");
            let s = counters.snapshot();
            // Three requests: the bulk leaves nothing for the rest to read.
            assert_eq!(s.read_requests, 3, "{len}");
            assert_eq!(s.bytes_read, len, "{len}");
        }
        // A file shorter than its head and tail: the bulk reads nothing, the rest the gap.
        let (_dir, path, bytes) = file_of(3000);
        let mut bulk = req(false, 2500, 1 << 20);
        bulk.until_end = Some(880);
        let (storage, counters) = counted(one_pattern(vec![req(false, 0, 100), bulk]));
        assert_eq!(read_whole(&storage, &path), bytes);
        assert_eq!(counters.snapshot().read_requests, 2);
    }

    /// Every byte of `path`, read through `storage` in one whole-file read.
    fn read_whole(storage: &dyn Storage, path: &std::path::Path) -> Vec<u8> {
        let mut handle = storage.open(path).unwrap();
        let mut buf = vec![0u8; handle.len() as usize];
        handle.read_exact_at(&mut buf, 0).unwrap();
        buf
    }

    #[test]
    fn a_request_in_blocks_reads_the_whole_blocks_that_fit_and_leaves_the_tail() {
        // Python's buffered reader on files of 11259, 25407 and 4000 bytes: a block of 4096,
        // the whole blocks after it, then the tail in one request.
        for (len, requests) in [(11_259, 3), (25_407, 3), (4000, 1)] {
            let (_dir, path, bytes) = file_of(len);
            let pattern = vec![
                PatternRequest {
                    from_end: false,
                    offset: 0,
                    size: 4096,
                    blocks: 0,
                    until_end: None,
                    work: std::time::Duration::ZERO,
                    wait: std::time::Duration::ZERO,
                },
                PatternRequest {
                    from_end: false,
                    offset: 4096,
                    size: 1 << 20,
                    blocks: 4096,
                    until_end: None,
                    work: std::time::Duration::ZERO,
                    wait: std::time::Duration::ZERO,
                },
            ];
            let (storage, counters) = counted(one_pattern(pattern));
            assert_eq!(read_whole(&storage, &path), bytes, "{len}");
            let s = counters.snapshot();
            assert_eq!(s.read_requests, requests, "{len}");
            assert_eq!(s.bytes_read, len as u64, "{len}");
        }
    }

    #[test]
    fn a_pattern_without_requests_that_reads_the_rest_reads_the_file_in_one_request() {
        let (_dir, path, bytes) = file_of(10_000);
        let (storage, counters) = counted(one_pattern(Vec::new()));
        assert_eq!(read_whole(&storage, &path), bytes);
        let s = counters.snapshot();
        assert_eq!((s.read_requests, s.bytes_read), (1, 10_000));
        // Without the rest it reads nothing, and is no pattern.
        assert!(
            RequestPatterns::new(vec![RequestPattern {
                requests: Vec::new(),
                weight: 1.0,
                read_rest: false,
            }])
            .is_none()
        );
    }

    #[test]
    fn openings_take_the_patterns_in_their_shares_and_read_only_their_requests() {
        // An npz of two members: each opening reads the directory at the end and one member.
        let (_dir, path, bytes) = file_of(10_000);
        let member = |at: u64| RequestPattern {
            requests: vec![req(true, 22, 22), req(false, at, 4000)],
            weight: 1.0,
            read_rest: false,
        };
        let patterns = RequestPatterns::new(vec![member(0), member(5000)]).unwrap();
        let (storage, counters) = counted(RequestSizes::Patterns(Arc::new(patterns)));
        let mut firsts = Vec::new();
        for _ in 0..100 {
            let buf = read_whole(&storage, &path);
            // Only what the requests covered was read.
            assert_eq!(&buf[9978..], &bytes[9978..]);
            let first = buf[..4000] == bytes[..4000];
            let second = buf[5000..9000] == bytes[5000..9000];
            assert!(first != second, "one member per opening");
            firsts.push(first);
        }
        let s = counters.snapshot();
        assert_eq!(s.read_requests, 200);
        assert_eq!(s.bytes_read, 100 * (22 + 4000));
        // Half each (within one), and never more than two of one in a row.
        let first_count = firsts.iter().filter(|&&f| f).count();
        assert!((49..=51).contains(&first_count), "{first_count}");
        assert!(
            firsts
                .windows(3)
                .all(|w| w.iter().any(|&f| f) && w.iter().any(|&f| !f))
        );
        // Weights 3 to 1: 75 of 100.
        let weighted = RequestPatterns::new(vec![
            RequestPattern {
                weight: 3.0,
                ..member(0)
            },
            member(5000),
        ])
        .unwrap();
        let (storage, _) = counted(RequestSizes::Patterns(Arc::new(weighted)));
        let firsts = (0..100)
            .filter(|_| read_whole(&storage, &path)[..4000] == bytes[..4000])
            .count();
        assert!((74..=76).contains(&firsts), "{firsts}");
    }

    #[test]
    fn drawn_sizes_follow_their_weights_and_repeat_per_file() {
        let (_dir, path, bytes) = file_of(1_000_000);
        let sizes = SizeDistribution::new(&[(100, 3.0), (1000, 1.0)], 7).unwrap();
        let (storage, counters) = counted(RequestSizes::Drawn(sizes));
        let read_all = || {
            let before = counters.snapshot().read_requests;
            assert_eq!(read_whole(&storage, &path), bytes);
            counters.snapshot().read_requests - before
        };
        let first = read_all();
        // A mean request of 0.75 * 100 + 0.25 * 1000 = 325 bytes: about 3077 requests.
        assert!((2800..3350).contains(&first), "{first}");
        // The same file is read with the same requests again.
        assert_eq!(read_all(), first);
        // A copy of the file under the same folder and file names in another place is read
        // with the same requests: the draws follow the workload, not where the data lies.
        let elsewhere = tempfile::tempdir().unwrap();
        let copy = elsewhere
            .path()
            .join(path.parent().unwrap().file_name().unwrap())
            .join(path.file_name().unwrap());
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::copy(&path, &copy).unwrap();
        let before = counters.snapshot().read_requests;
        assert_eq!(read_whole(&storage, &copy), bytes);
        assert_eq!(counters.snapshot().read_requests - before, first);
        // Openings that read other places of the file (windows) draw sizes of their own.
        let window = |at: u64| {
            let mut handle = storage.open(&path).unwrap();
            let mut buf = vec![0u8; 20_000];
            let mut sizes = Vec::new();
            let mut done = 0;
            while done < buf.len() {
                let n = handle.read_at(&mut buf[done..], at + done as u64).unwrap();
                sizes.push(n);
                done += n;
            }
            sizes
        };
        assert_eq!(window(5000), window(5000));
        assert_ne!(window(5000), window(400_000));
    }

    /// The requests a buffered stream makes for `reads` (offset, length) of a file of
    /// `file_len` bytes, and whether the bytes it returned are the file's.
    fn buffered_requests(
        stream: BufferedStream,
        file_len: usize,
        reads: &[(u64, usize)],
    ) -> Vec<usize> {
        let (_dir, path, bytes) = file_of(file_len);
        let counters = Arc::new(IoCounters::default());
        let metered = Metered::with_counters(PosixStorage::new(), Arc::clone(&counters));
        let lengths = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut recorded = SplitRead {
            inner: Box::new(Recording {
                len: file_len as u64,
                lengths: Arc::clone(&lengths),
                nowait_calls: 0,
            }),
            sizes: RequestSizes::Buffered(stream),
            key: None,
            rng: None,
            drawn_ahead: None,
            buffer: Vec::new(),
            held: (0, 0),
            plan: Vec::new(),
            request_work: std::time::Duration::ZERO,
            last_end: None,
        };
        let split = SplitReads::with_sizes(metered, RequestSizes::Buffered(stream));
        let mut real = split.open(&path).unwrap();
        for &(offset, len) in reads {
            let mut buf = vec![0u8; len];
            recorded.read_exact_at(&mut buf, offset).unwrap();
            real.read_exact_at(&mut buf, offset).unwrap();
            let at = offset as usize;
            assert_eq!(buf, bytes[at..at + len], "the bytes of ({offset}, {len})");
        }
        let lengths = std::mem::take(&mut *lengths.lock().unwrap());
        assert_eq!(counters.snapshot().read_requests, lengths.len() as u64);
        lengths
    }

    #[test]
    fn a_buffered_stream_makes_the_requests_of_pythons_buffered_reader() {
        // A Kaldi matrix read after its header (kaldiio): the buffer's fill, the whole
        // blocks, a fill for the tail that reads past the matrix.
        let header = BufferedStream {
            buffer: 4096,
            header_read: true,
            app_read: 0,
        };
        assert_eq!(
            buffered_requests(header, 200_000, &[(1000, 45_000)]),
            [4096, 36864, 4096]
        );
        // Pillow's 64 KiB reads of a PNG read whole: 61440 and a fill for each, then the
        // rest's blocks and the last fill, short at the file's end.
        let pillow = BufferedStream {
            app_read: 65536,
            ..header
        };
        assert_eq!(
            buffered_requests(pillow, 150_000, &[(0, 150_000)]),
            [4096, 61440, 4096, 61440, 4096, 12288, 2544]
        );
        // Without a header: the blocks, then the tail's fill (a random crop of a wav file).
        let plain = BufferedStream {
            header_read: false,
            ..header
        };
        assert_eq!(
            buffered_requests(plain, 100_000, &[(5000, 32000)]),
            [28672, 4096]
        );
        // Reads the buffer holds make no request; a seek away from it drops it.
        assert_eq!(
            buffered_requests(
                plain,
                100_000,
                &[(0, 100), (100, 900), (1000, 3000), (50_000, 10)]
            ),
            [4096, 4096]
        );
        // A read that ends in the buffer's last byte, then the next from there: a new fill.
        assert_eq!(
            buffered_requests(plain, 10_000, &[(0, 10), (10, 4086), (4096, 10)]),
            [4096, 4096]
        );
    }

    #[test]
    fn a_head_request_comes_first_then_the_rest_in_one() {
        let (_dir, path, bytes) = file_of(100_000);
        let counters = Arc::new(IoCounters::default());
        let metered = Metered::with_counters(PosixStorage::new(), Arc::clone(&counters));
        let split = SplitReads::with_sizes(metered, RequestSizes::HeadThenRest(4096));
        let mut handle = split.open(&path).unwrap();
        for (offset, len, requests) in [(1000u64, 50_000usize, 2u64), (60_000, 100, 1)] {
            let before = counters.snapshot();
            let mut buf = vec![0u8; len];
            handle.read_exact_at(&mut buf, offset).unwrap();
            assert_eq!(buf, bytes[offset as usize..offset as usize + len]);
            let made = counters.snapshot() - before;
            assert_eq!(
                (made.read_requests, made.bytes_read),
                (requests, len as u64)
            );
        }
    }

    #[test]
    fn a_pattern_waits_after_its_requests_without_taking_a_core() {
        let (_dir, path, bytes) = file_of(10_000);
        let wait = std::time::Duration::from_millis(100);
        let waiting = |offset, wait| PatternRequest {
            wait,
            ..req(false, offset, 1000)
        };
        // The third request lies past the file's end: neither made nor waited after (its wait,
        // ten times the others', would be plain in the time taken).
        let (storage, counters) = counted(one_pattern(vec![
            waiting(0, wait),
            waiting(1000, wait),
            waiting(20_000, 10 * wait),
        ]));
        let mut handle = storage.open(&path).unwrap();
        let mut buf = vec![0u8; bytes.len()];
        let cpu_before = cpu_time();
        let started = std::time::Instant::now();
        handle.read_exact_at(&mut buf, 0).unwrap();
        let took = started.elapsed();
        assert!((2 * wait..10 * wait).contains(&took), "{took:?}");
        // Asleep: a busy wait would have spent the 200 ms on this thread's core.
        assert!(
            cpu_time() - cpu_before < wait,
            "{:?}",
            cpu_time() - cpu_before
        );
        assert_eq!(buf, bytes);
        let s = counters.snapshot();
        assert_eq!((s.read_requests, s.bytes_read), (3, 10_000));
    }

    #[test]
    fn an_evaluation_pass_makes_the_same_requests_without_the_waits() {
        let waiting = PatternRequest {
            wait: std::time::Duration::from_millis(30),
            work: std::time::Duration::from_micros(5),
            ..req(false, 0, 4096)
        };
        let patterns = RequestPatterns::new(vec![RequestPattern {
            requests: vec![waiting, req(true, 100, 100)],
            weight: 1.0,
            read_rest: true,
        }])
        .unwrap();
        assert!(patterns.waits());
        let evaluation = patterns.without_waits();
        assert!(!evaluation.waits());
        let made = &evaluation.patterns[0];
        assert_eq!(
            made.requests,
            vec![
                PatternRequest {
                    wait: std::time::Duration::ZERO,
                    ..waiting
                },
                req(true, 100, 100)
            ],
            "the same requests, their work kept"
        );
        assert!(made.read_rest);
        assert_eq!(evaluation.cumulative, patterns.cumulative);
    }

    /// This thread's CPU time.
    fn cpu_time() -> std::time::Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration, and
        // CLOCK_THREAD_CPUTIME_ID is a clock every Linux kernel this builds for has.
        let done = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(done, 0, "clock_gettime");
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    #[test]
    fn work_between_requests_comes_between_those_that_continue_each_other() {
        let (_dir, path, bytes) = file_of(10_000);
        let work = std::time::Duration::from_millis(2);
        let (storage, counters) = counted(RequestSizes::Fixed(1000));
        let storage = storage.with_request_work(work);
        let mut handle = storage.open(&path).unwrap();
        // One read of ten requests: nine stretches of work between them, at the least.
        let started = std::time::Instant::now();
        let mut buf = vec![0u8; bytes.len()];
        handle.read_exact_at(&mut buf, 0).unwrap();
        assert!(started.elapsed() >= 9 * work, "{:?}", started.elapsed());
        assert_eq!(buf, bytes);
        let s = counters.snapshot();
        assert_eq!((s.read_requests, s.bytes_read), (10, 10_000));
        // A caller's loop of one-request reads works before each that goes on from the last.
        let started = std::time::Instant::now();
        let mut at = 0u64;
        while at < 5000 {
            at += handle.read_at(&mut buf[..5000 - at as usize], at).unwrap() as u64;
        }
        assert!(started.elapsed() >= 4 * work, "{:?}", started.elapsed());
        assert_eq!(counters.snapshot().read_requests, 15);
        // Without the work, the same requests.
        let (plain, counters) = counted(RequestSizes::Fixed(1000));
        plain
            .open(&path)
            .unwrap()
            .read_exact_at(&mut buf, 0)
            .unwrap();
        assert_eq!(counters.snapshot().read_requests, 10);
    }

    #[test]
    fn work_between_requests_is_for_split_reads_only() {
        let settings = crate::EngineSettings {
            request_work: std::time::Duration::from_millis(1),
            head_request_size: Some(4096),
            ..Default::default()
        };
        let err = crate::engine_for(&settings).unwrap_err().to_string();
        assert!(err.contains("reader.request_work_time"), "{err}");
        let settings = crate::EngineSettings {
            request_work: std::time::Duration::from_millis(1),
            transfer_size: Some(4096),
            ..Default::default()
        };
        assert!(crate::engine_for(&settings).is_ok());
    }
}
