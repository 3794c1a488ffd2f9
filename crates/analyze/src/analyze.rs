//! The entry point: find the trace files, ingest them, merge, assemble [`Analysis`].

use std::path::{Path, PathBuf};

use crate::error::AnalyzeError;
use crate::ingest::{Input, ingest};
use crate::merge::merge;
use crate::model::{Analysis, Corrupt, InputFile};

/// How to analyse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnalyzeOptions {
    /// Parsing threads (besides the thread that reads and decompresses); 0 uses one per
    /// available core.
    pub threads: usize,
}

fn is_trace_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".pfw") || name.ends_with(".pfw.gz")
}

/// The trace files named by `paths`: files as given, folders by their `*.pfw` and
/// `*.pfw.gz` entries (sorted).
pub fn find_traces(paths: &[PathBuf]) -> Result<Vec<PathBuf>, AnalyzeError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| AnalyzeError::Io {
            op: "read",
            path: p.clone(),
            source,
        })?;
        if meta.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|source| AnalyzeError::Io {
                    op: "list",
                    path: p.clone(),
                    source,
                })?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| f.is_file() && is_trace_name(f))
                .collect();
            if found.is_empty() {
                return Err(AnalyzeError::NoTraces { path: p.clone() });
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Analyses the traces at `paths` (trace files, or folders holding them) in bounded memory.
pub fn analyze(paths: &[PathBuf], opts: &AnalyzeOptions) -> Result<Analysis, AnalyzeError> {
    let files = find_traces(paths)?;
    let inputs = Input::for_files(&files);
    let threads = if opts.threads > 0 {
        opts.threads
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let ingested = ingest(&inputs, threads)?;
    if ingested.events == 0 {
        let details = inputs
            .iter()
            .zip(&ingested.per_input)
            .map(|(i, c)| {
                let what = if c.lines == 0 {
                    "is empty".to_string()
                } else if c.events > 0 {
                    format!("holds only {} metadata or non-complete events", c.events)
                } else {
                    let first = ingested
                        .corrupt
                        .iter()
                        .find(|l| l.file == i.path)
                        .map_or(String::new(), |l| {
                            format!(" (line {}: {})", l.line, l.reason)
                        });
                    format!(
                        "is not a dftracer trace: none of its {} lines is a trace event{first}",
                        c.lines
                    )
                };
                format!("{} {what}", i.path.display())
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(AnalyzeError::NoEvents { details });
    }
    let input_files: Vec<InputFile> = inputs
        .iter()
        .zip(&ingested.per_input)
        .map(|(i, c)| InputFile {
            path: i.path.clone(),
            rank: i.rank,
            lines: c.lines,
            events: c.events,
            corrupt_lines: c.corrupt,
        })
        .collect();
    let corrupt = Corrupt {
        count: ingested.corrupt_count,
        examples: ingested.corrupt.clone(),
    };
    let (events, metadata_events, ignored_events) = (
        ingested.events,
        ingested.metadata_events,
        ingested.ignored_events,
    );
    let start = ingested.first_start.unwrap_or(0);
    let job_ns = ingested.last_end.unwrap_or(start) - start;
    let m = merge(ingested).map_err(|source| AnalyzeError::Io {
        op: "spill",
        path: std::env::temp_dir(),
        source,
    })?;
    Ok(Analysis {
        inputs: input_files,
        events,
        metadata_events,
        ignored_events,
        corrupt,
        ranks: m.ranks,
        start_unix_us: start as f64 / 1000.0,
        job_time_s: job_ns as f64 / 1e9,
        time: m.time,
        counts: m.counts,
        layers: m.layers,
        transfer_sizes: m.transfer_sizes,
        access: m.access,
        functions: m.functions,
        files: m.files,
        per_rank: m.per_rank,
        skew: m.skew,
        bandwidth: m.bandwidth,
        timeline: m.timeline,
    })
}
