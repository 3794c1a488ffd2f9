//! The background writer: formats the records of full thread buffers as JSON lines and
//! compresses them, off the hot path.
//!
//! The file is one JSON array (`[`, one event per line with a trailing comma except the
//! last, `]`), so Chrome's trace viewer and Perfetto load it as is, and line-oriented
//! readers (dftracer's tools, `dlio analyze`) read one event per line after dropping the
//! trailing comma.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::mpsc::Receiver;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::names::name_hash;
use crate::tracer::Record;

/// What the hot path sends to the writer.
pub(crate) enum Msg {
    /// A full (or final) thread buffer.
    Events { tid: u32, records: Vec<Record> },
    /// A new file name (FH metadata).
    File { hash: u64, name: String },
    /// A new thread (thread_name metadata).
    Thread { tid: u32, name: String },
    /// Close the array and the file.
    Finish,
}

/// Fixed facts written once at the start.
pub(crate) struct Header {
    pub pid: u32,
    pub rank: u32,
    pub size: u32,
    pub hostname: String,
    pub base_unix_ns: u64,
}

/// What was written.
pub(crate) struct WriterStats {
    pub events: u64,
    pub metadata_events: u64,
}

enum Sink {
    Gzip(Box<GzEncoder<BufWriter<File>>>),
    Plain(BufWriter<File>),
}

impl Sink {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Gzip(w) => w.write_all(bytes),
            Sink::Plain(w) => w.write_all(bytes),
        }
    }

    /// Writes the gzip trailer (if any) and flushes everything to the file.
    fn finish(self) -> io::Result<()> {
        let mut inner = match self {
            Sink::Gzip(w) => w.finish()?,
            Sink::Plain(w) => w,
        };
        inner.flush()
    }
}

struct Out {
    sink: Sink,
    line: String,
    next_id: u64,
    stats: WriterStats,
    pid: u32,
    hhash: String,
    base_unix_ns: u64,
}

impl Out {
    /// Starts an event line: the separator after the previous event, then `{"id":N,`.
    fn begin(&mut self) {
        if self.next_id > 0 {
            self.line.push_str(",\n");
        }
        let _ = write!(self.line, "{{\"id\":{},", self.next_id);
        self.next_id += 1;
    }

    fn metadata(&mut self, tid: u32, name: &str, key: &str, value: &str) {
        self.begin();
        let _ = write!(
            self.line,
            "\"name\":\"{name}\",\"cat\":\"dftracer\",\"pid\":{},\"tid\":{tid},\"ph\":\"M\",\"args\":{{\"hhash\":\"{}\",\"name\":{},\"value\":{}}}}}",
            self.pid,
            self.hhash,
            json_string(key),
            json_string(value),
        );
        self.stats.metadata_events += 1;
    }

    fn thread_name(&mut self, tid: u32, name: &str) {
        self.begin();
        let _ = write!(
            self.line,
            "\"name\":\"thread_name\",\"cat\":\"dftracer\",\"pid\":{},\"tid\":{tid},\"ph\":\"M\",\"args\":{{\"name\":{}}}}}",
            self.pid,
            json_string(name),
        );
        self.stats.metadata_events += 1;
    }

    fn event(&mut self, tid: u32, r: &Record) {
        self.begin();
        let _ = write!(
            self.line,
            "\"name\":\"{}\",\"cat\":\"{}\",\"pid\":{},\"tid\":{tid},\"ts\":",
            r.name, r.cat, self.pid
        );
        push_micros(&mut self.line, self.base_unix_ns.saturating_add(r.start_ns));
        self.line.push_str(",\"dur\":");
        push_micros(&mut self.line, r.dur_ns);
        let _ = write!(
            self.line,
            ",\"ph\":\"X\",\"args\":{{\"hhash\":\"{}\"",
            self.hhash
        );
        if r.file != 0 {
            let _ = write!(self.line, ",\"fhash\":\"{:016x}\"", r.file);
        }
        for (k, v) in &r.args[..usize::from(r.nargs)] {
            let _ = write!(self.line, ",\"{k}\":{v}");
        }
        self.line.push_str("}}");
        self.stats.events += 1;
    }

    fn flush_line(&mut self) -> io::Result<()> {
        if self.line.len() >= 1 << 16 {
            self.sink.write_all(self.line.as_bytes())?;
            self.line.clear();
        }
        Ok(())
    }
}

/// Microseconds with up to three decimals (nanosecond precision), as Chrome traces allow.
fn push_micros(out: &mut String, ns: u64) {
    let (us, frac) = (ns / 1000, ns % 1000);
    if frac == 0 {
        let _ = write!(out, "{us}");
    } else {
        let _ = write!(out, "{us}.{frac:03}");
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The writer thread's body: runs until [`Msg::Finish`] (or until every sender is gone).
pub(crate) fn run(
    rx: Receiver<Msg>,
    file: File,
    compress: bool,
    header: Header,
) -> io::Result<WriterStats> {
    let buffered = BufWriter::with_capacity(1 << 20, file);
    let sink = if compress {
        Sink::Gzip(Box::new(GzEncoder::new(buffered, Compression::fast())))
    } else {
        Sink::Plain(buffered)
    };
    let hhash = format!("{:016x}", name_hash(header.hostname.as_bytes()));
    let mut out = Out {
        sink,
        line: String::with_capacity(1 << 17),
        next_id: 0,
        stats: WriterStats {
            events: 0,
            metadata_events: 0,
        },
        pid: header.pid,
        hhash: hhash.clone(),
        base_unix_ns: header.base_unix_ns,
    };
    out.sink.write_all(b"[\n")?;
    let pid_tid = header.pid;
    out.metadata(pid_tid, "HH", &header.hostname, &hhash);
    out.metadata(pid_tid, "PR", "rank", &header.rank.to_string());
    out.metadata(pid_tid, "PR", "size", &header.size.to_string());
    let mut result = Ok(());
    for msg in rx.iter() {
        match msg {
            Msg::Events { tid, records } => {
                for r in &records {
                    out.event(tid, r);
                    if let Err(e) = out.flush_line() {
                        result = Err(e);
                        break;
                    }
                }
            }
            Msg::File { hash, name } => out.metadata(pid_tid, "FH", &name, &format!("{hash:016x}")),
            Msg::Thread { tid, name } => out.thread_name(tid, &name),
            Msg::Finish => break,
        }
        if result.is_err() {
            break;
        }
    }
    result?;
    out.line.push_str("\n]\n");
    out.sink.write_all(out.line.as_bytes())?;
    let stats = out.stats;
    out.sink.finish()?;
    Ok(stats)
}
