//! Every event of a set of traces in memory, in start order, with the files' paths: what
//! `dlio characterize` and `dlio fidelity` work from. Unlike [`crate::analyze`], which streams,
//! this holds the events (one [`Rec`], 64 bytes, each): a traced training script of 10^6 I/O
//! calls takes about 64 MB.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::AnalyzeError;
use crate::event::{Layer, Op};
use crate::ingest::{Input, Rec, ingest};

/// The events of one traced run.
pub(crate) struct Timeline {
    /// Complete events (I/O calls and spans), sorted by start.
    pub events: Vec<Rec>,
    /// File hash to path.
    pub paths: HashMap<u64, String>,
    /// The trace files read.
    pub inputs: Vec<PathBuf>,
}

impl Timeline {
    /// The path of file `hash` ("?" when no event named it).
    pub fn path(&self, hash: u64) -> &str {
        self.paths.get(&hash).map_or("?", String::as_str)
    }

    /// I/O events only.
    pub fn io(&self) -> impl Iterator<Item = &Rec> {
        self.events.iter().filter(|r| r.layer == Layer::Io as u8)
    }
}

/// The op of an I/O record.
pub(crate) fn op(r: &Rec) -> Op {
    Op::from_u8(r.op)
}

/// Trace files of `path` (a folder or one file), refusing folders of incomplete traces only.
fn trace_files(path: &Path) -> Result<Vec<PathBuf>, AnalyzeError> {
    match crate::analyze::find_traces(&[path.to_path_buf()]) {
        Err(AnalyzeError::NoTraces { path }) => {
            let partial = std::fs::read_dir(&path)
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.file_name().to_string_lossy().ends_with(".pfw.partial"))
                        .count()
                })
                .unwrap_or(0);
            if partial > 0 {
                Err(AnalyzeError::Incomplete {
                    path,
                    detail: format!(
                        "it holds only {partial} incomplete traces (*.pfw.partial): the traced \
                         processes were killed before they ended, so their last events are \
                         missing; trace the program again and let it finish"
                    ),
                })
            } else {
                Err(AnalyzeError::NoTraces { path })
            }
        }
        other => other,
    }
}

/// Reads every trace under `path`. Lines that are not events (a trace cut short) are an
/// error naming the first of them: a characterisation from part of a run would be wrong
/// without saying so.
pub(crate) fn load(path: &Path) -> Result<Timeline, AnalyzeError> {
    let files = trace_files(path)?;
    let inputs = Input::for_files(&files);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ingested = ingest(&inputs, workers)?;
    if let Some(first) = ingested.corrupt.first() {
        return Err(AnalyzeError::Incomplete {
            path: first.file.clone(),
            detail: format!(
                "line {} is not a trace event ({}); {} such lines in all: the trace was cut \
                 short or damaged; trace the run again",
                first.line, first.reason, ingested.corrupt_count
            ),
        });
    }
    if ingested.events == 0 {
        return Err(AnalyzeError::NoEvents {
            details: format!(
                "{} holds {} trace files with no complete events",
                path.display(),
                files.len()
            ),
        });
    }
    let mut events = Vec::with_capacity(ingested.events as usize);
    for run in ingested.runs {
        for rec in run.into_iter().map_err(|source| AnalyzeError::Io {
            op: "spill",
            path: std::env::temp_dir(),
            source,
        })? {
            events.push(rec.map_err(|source| AnalyzeError::Io {
                op: "spill",
                path: std::env::temp_dir(),
                source,
            })?);
        }
    }
    events.sort_by_key(|r| (r.start, r.end));
    Ok(Timeline {
        events,
        paths: ingested.file_names,
        inputs: files,
    })
}
