//! Phase 1: read trace files (plain or gzip) on one thread, parse their lines on the
//! others, and turn each event into a fixed-size [`Rec`]. Records are sorted by (rank,
//! start) in runs of bounded size, spilled to anonymous temporary files when a run is
//! full, so memory stays bounded whatever the number of events.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::error::AnalyzeError;
use crate::event::{Layer, Op, Phase, RawEvent, classify, io_op, is_item, parse_hash};

/// Records per sorted run (about 16 MiB in memory per worker).
const RUN_RECORDS: usize = 1 << 18;
/// Bytes of lines handed to a worker at once.
const CHUNK_BYTES: usize = 1 << 20;
/// Examples of corrupt lines kept for the report.
const MAX_CORRUPT_EXAMPLES: usize = 20;

/// One interval of the trace, as the merge needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rec {
    pub rank: u32,
    pub tid: u32,
    pub start: i64,
    pub end: i64,
    pub layer: u8,
    pub op: u8,
    pub item: bool,
    pub fd: i32,
    pub file: u64,
    /// Offset of a positional read/write, or the new position of a seek; -1 when unknown.
    pub offset: i64,
    /// Bytes moved by a read/write; -1 when unknown.
    pub bytes: i64,
    /// Where a read's or write's buffer starts past a 4 KiB page boundary (`dlio trace`'s
    /// `buf_page_offset`); -1 when the trace does not say.
    pub buf_page_offset: i16,
    /// How many whole pages of a read's buffer the process had not touched before the call
    /// (`dlio trace`'s `untouched_pages`); -1 when the trace does not say.
    pub untouched_pages: i32,
}

const REC_BYTES: usize = 4 + 4 + 8 + 8 + 1 + 1 + 1 + 4 + 8 + 8 + 8 + 2 + 4;

impl Rec {
    fn key(&self) -> (u32, i64) {
        (self.rank, self.start)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.tid.to_le_bytes());
        out.extend_from_slice(&self.start.to_le_bytes());
        out.extend_from_slice(&self.end.to_le_bytes());
        out.push(self.layer);
        out.push(self.op);
        out.push(u8::from(self.item));
        out.extend_from_slice(&self.fd.to_le_bytes());
        out.extend_from_slice(&self.file.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        out.extend_from_slice(&self.buf_page_offset.to_le_bytes());
        out.extend_from_slice(&self.untouched_pages.to_le_bytes());
    }

    fn decode(b: &[u8; REC_BYTES]) -> Rec {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        Rec {
            rank: u32_at(0),
            tid: u32_at(4),
            start: u64_at(8) as i64,
            end: u64_at(16) as i64,
            layer: b[24],
            op: b[25],
            item: b[26] != 0,
            fd: u32_at(27) as i32,
            file: u64_at(31),
            offset: u64_at(39) as i64,
            bytes: u64_at(47) as i64,
            buf_page_offset: i16::from_le_bytes([b[55], b[56]]),
            untouched_pages: u32_at(57) as i32,
        }
    }
}

/// A bad line, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CorruptLine {
    /// The trace file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub reason: String,
}

/// Per-name totals ("metrics by function").
#[derive(Debug, Clone, Default)]
pub(crate) struct NameStat {
    pub cat: String,
    pub name: String,
    pub count: u64,
    pub dur_ns: i64,
    pub bytes: u64,
}

/// A sorted run of records: in memory, or spilled to a temporary file.
pub(crate) enum Run {
    Memory(Vec<Rec>),
    Spilled { file: File, records: u64 },
}

impl Run {
    pub(crate) fn into_iter(self) -> io::Result<Box<dyn Iterator<Item = io::Result<Rec>> + Send>> {
        match self {
            Run::Memory(v) => Ok(Box::new(v.into_iter().map(Ok))),
            Run::Spilled { mut file, records } => {
                file.seek(SeekFrom::Start(0))?;
                let mut reader = BufReader::with_capacity(1 << 18, file);
                let mut left = records;
                Ok(Box::new(std::iter::from_fn(move || {
                    if left == 0 {
                        return None;
                    }
                    left -= 1;
                    let mut buf = [0u8; REC_BYTES];
                    Some(reader.read_exact(&mut buf).map(|()| Rec::decode(&buf)))
                })))
            }
        }
    }
}

/// What the workers found, merged.
#[derive(Default)]
pub(crate) struct Ingested {
    pub runs: Vec<Run>,
    pub file_names: HashMap<u64, String>,
    pub names: HashMap<u64, NameStat>,
    pub events: u64,
    pub metadata_events: u64,
    pub ignored_events: u64,
    pub corrupt_count: u64,
    pub corrupt: Vec<CorruptLine>,
    pub per_input: Vec<InputCounts>,
    pub first_start: Option<i64>,
    pub last_end: Option<i64>,
}

/// Events and bad lines per input file.
#[derive(Debug, Clone, Default)]
pub(crate) struct InputCounts {
    pub lines: u64,
    pub events: u64,
    pub corrupt: u64,
}

struct Chunk {
    input: usize,
    first_line: u64,
    data: Vec<u8>,
}

struct Worker<'a> {
    inputs: &'a [Input],
    out: Ingested,
    run: Vec<Rec>,
}

/// One input file with the rank its name gives (`trace-{rank}-of-{size}...`).
pub(crate) struct Input {
    pub path: PathBuf,
    pub rank: Option<u32>,
}

impl Input {
    /// The inputs of `files`, each with the rank its name gives.
    pub(crate) fn for_files(files: &[PathBuf]) -> Vec<Input> {
        files
            .iter()
            .map(|p| Input {
                path: p.clone(),
                rank: rank_from_file_name(p),
            })
            .collect()
    }
}

/// `trace-3-of-8.pfw.gz` and `trace-3-of-8-1234.pfw` are rank 3.
pub(crate) fn rank_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("trace-")?;
    let (rank, rest) = rest.split_once("-of-")?;
    rest.chars().next().filter(char::is_ascii_digit)?;
    rank.parse().ok()
}

impl Worker<'_> {
    fn corrupt(&mut self, input: usize, line: u64, reason: String) {
        self.out.corrupt_count += 1;
        self.out.per_input[input].corrupt += 1;
        if self.out.corrupt.len() < MAX_CORRUPT_EXAMPLES {
            self.out.corrupt.push(CorruptLine {
                file: self.inputs[input].path.clone(),
                line,
                reason,
            });
        }
    }

    fn chunk(&mut self, chunk: &Chunk) -> io::Result<()> {
        for (here, raw) in (chunk.first_line..).zip(chunk.data.split(|&b| b == b'\n')) {
            let line = trim(raw);
            if line.is_empty() || line == b"[" || line == b"]" {
                continue;
            }
            self.out.per_input[chunk.input].lines += 1;
            let line = line.strip_suffix(b",").unwrap_or(line);
            let line = line.strip_prefix(b",").unwrap_or(line);
            match serde_json::from_slice::<RawEvent>(line) {
                Ok(ev) => {
                    if let Err(reason) = self.event(chunk.input, &ev) {
                        self.corrupt(chunk.input, here, reason.to_string());
                    }
                }
                Err(e) => {
                    let reason = if e.is_eof() {
                        format!("truncated event: {e}")
                    } else {
                        format!("not a JSON trace event: {e}")
                    };
                    self.corrupt(chunk.input, here, reason);
                }
            }
            if self.run.len() >= RUN_RECORDS {
                self.spill()?;
            }
        }
        Ok(())
    }

    fn event(&mut self, input: usize, ev: &RawEvent<'_>) -> Result<(), &'static str> {
        let phase = ev.phase().ok_or("event without \"ph\"")?;
        let args = ev.args.as_ref();
        match phase {
            Phase::Metadata => {
                self.out.metadata_events += 1;
                self.out.per_input[input].events += 1;
                if ev.name.as_deref() == Some("FH")
                    && let Some(a) = args
                    && let (Some(path), Some(hash)) = (a.name.as_str(), parse_hash(&a.value))
                {
                    self.out
                        .file_names
                        .entry(hash)
                        .or_insert_with(|| path.to_string());
                }
                Ok(())
            }
            Phase::Complete => {
                let start = ev
                    .ts
                    .micros_as_nanos()
                    .ok_or("complete event without a numeric \"ts\"")?;
                let dur = match ev.dur {
                    crate::event::Scalar::Other => 0,
                    ref d => d.micros_as_nanos().ok_or("\"dur\" is not a number")?,
                }
                .max(0);
                let cat = ev.cat.as_deref().unwrap_or("");
                let name = ev.name.as_deref().unwrap_or("");
                let rank = match self.inputs[input].rank {
                    Some(r) => r,
                    None => ev.pid.as_i64().map_or(0, |p| p as u32),
                };
                let tid = ev.tid.as_i64().map_or(0, |t| t as u32);
                self.out.events += 1;
                self.out.per_input[input].events += 1;
                let end = start.saturating_add(dur);
                self.out.first_start = Some(self.out.first_start.map_or(start, |v| v.min(start)));
                self.out.last_end = Some(self.out.last_end.map_or(end, |v| v.max(end)));

                let layer = classify(cat, name);
                let mut rec = Rec {
                    rank,
                    tid,
                    start,
                    end,
                    layer: layer as u8,
                    op: Op::Span as u8,
                    item: is_item(cat, name),
                    fd: -1,
                    file: 0,
                    offset: -1,
                    bytes: -1,
                    buf_page_offset: -1,
                    untouched_pages: -1,
                };
                // I/O calls, and calls on the pipes between a program's processes (their file
                // is the pipe, `pipe:[INODE]`).
                if layer == Layer::Io || cat == dlio_trace::CAT_IPC {
                    let op = io_op(name);
                    rec.op = op as u8;
                    if let Some(a) = args {
                        rec.file = self.file_of(a);
                        let ret = a.ret.as_i64();
                        rec.fd = a.fd.as_i64().map_or(-1, |v| v as i32);
                        match op {
                            Op::Read | Op::Write => {
                                rec.bytes = ret
                                    .filter(|&r| r >= 0)
                                    .or_else(|| {
                                        if ret.is_none() {
                                            a.count.as_i64().or(a.size.as_i64())
                                        } else {
                                            None
                                        }
                                    })
                                    .unwrap_or(-1);
                                rec.offset = a.offset.as_i64().unwrap_or(-1);
                                rec.buf_page_offset = a
                                    .buf_page_offset
                                    .as_i64()
                                    .and_then(|v| i16::try_from(v).ok())
                                    .filter(|&v| v >= 0)
                                    .unwrap_or(-1);
                                rec.untouched_pages = a
                                    .untouched_pages
                                    .as_i64()
                                    .and_then(|v| i32::try_from(v).ok())
                                    .filter(|&v| v >= 0)
                                    .unwrap_or(-1);
                            }
                            Op::Seek => rec.offset = ret.unwrap_or(-1),
                            Op::Open => rec.fd = ret.map_or(-1, |v| v as i32),
                            // `stat`/`fstat` with the file's size (dlio trace writes it).
                            Op::Meta => {
                                rec.bytes = a.size.as_i64().filter(|&s| s >= 0).unwrap_or(-1)
                            }
                            // The mapping's length and where in the file it starts.
                            Op::Map => {
                                rec.bytes = a
                                    .count
                                    .as_i64()
                                    .or(a.size.as_i64())
                                    .filter(|&n| n >= 0)
                                    .unwrap_or(-1);
                                rec.offset = a.offset.as_i64().unwrap_or(-1);
                            }
                            _ => {}
                        }
                    }
                }
                let stat = self.name_stat(cat, name);
                stat.count += 1;
                stat.dur_ns = stat.dur_ns.saturating_add(dur);
                if rec.bytes > 0 {
                    stat.bytes += rec.bytes as u64;
                }
                self.run.push(rec);
                Ok(())
            }
            Phase::Other => {
                self.out.ignored_events += 1;
                self.out.per_input[input].events += 1;
                Ok(())
            }
        }
    }

    fn file_of(&mut self, a: &crate::event::RawArgs<'_>) -> u64 {
        if let Some(h) = parse_hash(&a.fhash) {
            return h;
        }
        if let Some(path) = a.fname.as_str() {
            let h = dlio_trace::name_hash(path.as_bytes());
            self.out
                .file_names
                .entry(h)
                .or_insert_with(|| path.to_string());
            return h;
        }
        0
    }

    fn name_stat(&mut self, cat: &str, name: &str) -> &mut NameStat {
        let mut key = dlio_trace::name_hash(cat.as_bytes());
        key ^= dlio_trace::name_hash(name.as_bytes()).rotate_left(17);
        self.out.names.entry(key).or_insert_with(|| NameStat {
            cat: cat.to_string(),
            name: name.to_string(),
            ..NameStat::default()
        })
    }

    fn spill(&mut self) -> io::Result<()> {
        self.run.sort_unstable_by_key(Rec::key);
        let file = tempfile::tempfile()?;
        let mut w = BufWriter::with_capacity(1 << 18, file);
        let mut buf = Vec::with_capacity(REC_BYTES);
        for r in &self.run {
            buf.clear();
            r.encode(&mut buf);
            w.write_all(&buf)?;
        }
        let file = w.into_inner().map_err(|e| e.into_error())?;
        self.out.runs.push(Run::Spilled {
            file,
            records: self.run.len() as u64,
        });
        self.run.clear();
        Ok(())
    }

    fn finish(mut self) -> Ingested {
        self.run.sort_unstable_by_key(Rec::key);
        if !self.run.is_empty() {
            self.out
                .runs
                .push(Run::Memory(std::mem::take(&mut self.run)));
        }
        self.out
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &b[start..end.max(start)]
}

/// Opens a trace, decompressing when it starts with gzip's magic bytes.
fn open_lines(path: &Path) -> Result<Box<dyn Read + Send>, AnalyzeError> {
    let io_err = |source| AnalyzeError::Io {
        op: "read",
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io_err)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(io_err)?;
    file.seek(SeekFrom::Start(0)).map_err(io_err)?;
    let buffered = BufReader::with_capacity(1 << 18, file);
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(buffered)))
    } else {
        Ok(Box::new(buffered))
    }
}

/// Reads every input with `workers` parsing threads plus this one reading and
/// decompressing.
pub(crate) fn ingest(inputs: &[Input], workers: usize) -> Result<Ingested, AnalyzeError> {
    let workers = workers.max(1);
    let (tx, rx) = mpsc::sync_channel::<Chunk>(workers * 2);
    let rx = std::sync::Mutex::new(rx);
    let mut read_errors: Vec<(usize, u64, String)> = Vec::new();
    let (results, open_error): (Vec<io::Result<Ingested>>, Option<AnalyzeError>) =
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let rx = &rx;
                    s.spawn(move || parse_chunks(inputs, rx))
                })
                .collect();
            let mut open_error = None;
            for (i, input) in inputs.iter().enumerate() {
                let reader = match open_lines(&input.path) {
                    Ok(r) => r,
                    Err(e) => {
                        open_error = Some(e);
                        break;
                    }
                };
                if !send_chunks(i, reader, &tx, &mut read_errors) {
                    break;
                }
            }
            drop(tx);
            let results = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a parsing thread panicked")))
                })
                .collect();
            (results, open_error)
        });
    if let Some(e) = open_error {
        return Err(e);
    }
    let mut all = Ingested {
        per_input: vec![InputCounts::default(); inputs.len()],
        ..Ingested::default()
    };
    for r in results {
        let part = r.map_err(|source| AnalyzeError::Io {
            op: "spill",
            path: std::env::temp_dir(),
            source,
        })?;
        all.merge(part);
    }
    for (i, line, reason) in read_errors {
        all.corrupt_count += 1;
        all.per_input[i].corrupt += 1;
        all.corrupt.push(CorruptLine {
            file: inputs[i].path.clone(),
            line,
            reason,
        });
    }
    all.corrupt
        .sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    all.corrupt.truncate(MAX_CORRUPT_EXAMPLES);
    Ok(all)
}

/// One parsing thread: parses the chunks it takes from the queue until the reader is done.
fn parse_chunks(
    inputs: &[Input],
    queue: &std::sync::Mutex<mpsc::Receiver<Chunk>>,
) -> io::Result<Ingested> {
    let mut w = Worker {
        inputs,
        out: Ingested {
            per_input: vec![InputCounts::default(); inputs.len()],
            ..Ingested::default()
        },
        run: Vec::with_capacity(1024),
    };
    loop {
        let next = queue
            .lock()
            .map_err(|_| io::Error::other("worker queue poisoned"))?
            .recv();
        let Ok(chunk) = next else { break };
        w.chunk(&chunk)?;
    }
    Ok(w.finish())
}

/// Cuts input `i` into whole blocks of lines (each cut after its last newline; the rest starts
/// the next chunk) and queues them; a read error ends the input and is kept, with its line, in
/// `read_errors`. False when the parsing threads are gone.
fn send_chunks(
    i: usize,
    mut reader: Box<dyn io::Read>,
    tx: &mpsc::SyncSender<Chunk>,
    read_errors: &mut Vec<(usize, u64, String)>,
) -> bool {
    let mut line_no = 1u64;
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let mut data = std::mem::take(&mut carry);
        data.reserve(CHUNK_BYTES);
        let mut eof = false;
        while data.len() < CHUNK_BYTES {
            let have = data.len();
            data.resize(have + (CHUNK_BYTES - have).max(64 * 1024), 0);
            match reader.read(&mut data[have..]) {
                Ok(0) => {
                    data.truncate(have);
                    eof = true;
                    break;
                }
                Ok(n) => data.truncate(have + n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => data.truncate(have),
                Err(e) => {
                    data.truncate(have);
                    let at = line_no + data.iter().filter(|&&b| b == b'\n').count() as u64;
                    read_errors.push((i, at, format!("cannot read further: {e}")));
                    eof = true;
                    break;
                }
            }
        }
        if !eof && let Some(cut) = data.iter().rposition(|&b| b == b'\n') {
            carry = data.split_off(cut + 1);
        }
        let first_line = line_no;
        line_no += data.iter().filter(|&&b| b == b'\n').count() as u64;
        if !data.is_empty()
            && tx
                .send(Chunk {
                    input: i,
                    first_line,
                    data,
                })
                .is_err()
        {
            return false;
        }
        if eof {
            return true;
        }
    }
}

impl Ingested {
    /// Adds what one parsing thread found.
    fn merge(&mut self, part: Ingested) {
        self.runs.extend(part.runs);
        for (k, v) in part.file_names {
            self.file_names.entry(k).or_insert(v);
        }
        for (k, v) in part.names {
            let e = self.names.entry(k).or_insert_with(|| NameStat {
                cat: v.cat.clone(),
                name: v.name.clone(),
                ..NameStat::default()
            });
            e.count += v.count;
            e.dur_ns = e.dur_ns.saturating_add(v.dur_ns);
            e.bytes += v.bytes;
        }
        self.events += part.events;
        self.metadata_events += part.metadata_events;
        self.ignored_events += part.ignored_events;
        self.corrupt_count += part.corrupt_count;
        self.corrupt.extend(part.corrupt);
        for (a, b) in self.per_input.iter_mut().zip(part.per_input) {
            a.lines += b.lines;
            a.events += b.events;
            a.corrupt += b.corrupt;
        }
        self.first_start = match (self.first_start, part.first_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_end = match (self.last_end, part.last_end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_their_spill_encoding() {
        let r = Rec {
            rank: 3,
            tid: 77,
            start: 1_795_945_366_789_524_000,
            end: 1_795_945_366_789_534_123,
            layer: Layer::Io as u8,
            op: Op::Read as u8,
            item: true,
            fd: -1,
            file: u64::MAX - 5,
            offset: -1,
            bytes: 65536,
            buf_page_offset: 16,
            untouched_pages: 62,
        };
        let mut buf = Vec::new();
        r.encode(&mut buf);
        assert_eq!(buf.len(), REC_BYTES);
        let arr: [u8; REC_BYTES] = buf.try_into().expect("size");
        assert_eq!(Rec::decode(&arr), r);
    }

    #[test]
    fn ranks_come_from_dlio_and_dftracer_file_names() {
        assert_eq!(
            rank_from_file_name(Path::new("/o/trace-3-of-8.pfw.gz")),
            Some(3)
        );
        assert_eq!(
            rank_from_file_name(Path::new("trace-0-of-1-4242.pfw")),
            Some(0)
        );
        assert_eq!(rank_from_file_name(Path::new("app.pfw")), None);
    }
}
