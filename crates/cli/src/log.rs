//! DLIO's log: `dlio.log` in the output folder plus the console, at DLIO's levels. Lines go
//! through the progress bars' suspend so bars and text never garble each other.
//!
//! The level is DLIO's `DLIO_LOG_LEVEL` (Python logging's, with DLIO's OUTPUT level 35
//! between WARNING and ERROR): the default `warning` shows warnings, progress (OUTPUT) and
//! metric lines; `error` and `critical` show none of them (errors still end the run with
//! their message); `info` adds every rank's per-step load and processing times; `debug` adds
//! each rank's step count at the end of a pass.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use indicatif::MultiProgress;

/// A message's level, ordered as Python logging's numbers (DEBUG 10 ... CRITICAL 50).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// 10.
    Debug,
    /// 20.
    Info,
    /// 30.
    Warning,
    /// DLIO's OUTPUT, 35.
    Output,
    /// 40.
    Error,
    /// 50.
    Critical,
}

impl LogLevel {
    /// The threshold `DLIO_LOG_LEVEL` names (DLIO's spellings), `warning` when unset.
    pub fn from_env() -> anyhow::Result<LogLevel> {
        match std::env::var("DLIO_LOG_LEVEL") {
            Err(_) => Ok(LogLevel::Warning),
            Ok(text) => LogLevel::parse(&text).ok_or_else(|| {
                anyhow::anyhow!(
                    "environment variable DLIO_LOG_LEVEL is `{text}`; DLIO's levels are debug, \
                     info, warning (or warn, the default), error and critical (lower or upper \
                     case)"
                )
            }),
        }
    }

    fn parse(text: &str) -> Option<LogLevel> {
        match text {
            "debug" | "DEBUG" => Some(LogLevel::Debug),
            "info" | "INFO" => Some(LogLevel::Info),
            "warning" | "warn" | "WARNING" | "WARN" => Some(LogLevel::Warning),
            "error" | "ERROR" => Some(LogLevel::Error),
            "critical" | "CRITICAL" => Some(LogLevel::Critical),
            _ => None,
        }
    }
}

/// The run's log sink.
pub struct RunLog {
    file: Mutex<Option<BufWriter<File>>>,
    bars: MultiProgress,
    /// False on MPI processes other than 0: they print warnings only.
    speaks: bool,
    /// Messages below this level are dropped.
    threshold: LogLevel,
}

impl RunLog {
    /// A log that writes to the console only until [`RunLog::open_file`] is called.
    /// `speaks` is false on MPI processes other than 0, which print warnings only.
    pub fn new(bars: MultiProgress, speaks: bool, threshold: LogLevel) -> RunLog {
        RunLog {
            file: Mutex::new(None),
            bars,
            speaks,
            threshold,
        }
    }

    /// Whether a message at `level` is written.
    pub fn shows(&self, level: LogLevel) -> bool {
        level >= self.threshold
    }

    /// Starts writing `path` (replacing an old log, as DLIO's rank 0 does).
    pub fn open_file(&self, path: &Path) -> std::io::Result<()> {
        let f = File::create(path)?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = Some(BufWriter::new(f));
        Ok(())
    }

    fn emit(&self, level: &str, msg: &str) {
        let stamp = chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.6f");
        let line = format!("[{level}] {stamp} {msg}");
        self.bars.suspend(|| {
            let _ = writeln!(std::io::stderr(), "{line}");
        });
        self.to_file(&line);
    }

    fn to_file(&self, line: &str) {
        if let Some(f) = self.file.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = writeln!(f, "{line}");
        }
    }

    /// DLIO's OUTPUT level: progress lines shown by default.
    pub fn output(&self, msg: &str) {
        if self.speaks && self.shows(LogLevel::Output) {
            self.emit("OUTPUT", msg);
        }
    }

    /// A warning.
    pub fn warn(&self, msg: &str) {
        if self.shows(LogLevel::Warning) {
            self.emit("WARNING", msg);
        }
    }

    /// An INFO line (DLIO_LOG_LEVEL info or debug), from any rank as in DLIO.
    pub fn info(&self, msg: &str) {
        if self.shows(LogLevel::Info) {
            self.emit("INFO", msg);
        }
    }

    /// A DEBUG line (DLIO_LOG_LEVEL debug).
    pub fn debug(&self, msg: &str) {
        if self.shows(LogLevel::Debug) {
            self.emit("DEBUG", msg);
        }
    }

    /// A `[METRIC]` line: printed on stdout (scripts grep it) and logged, at OUTPUT level as
    /// DLIO logs it.
    pub fn metric(&self, line: &str) {
        if !self.speaks || !self.shows(LogLevel::Output) {
            return;
        }
        self.bars.suspend(|| {
            // A closed stdout (`| head`) must not stop the run.
            let _ = writeln!(std::io::stdout(), "{line}");
        });
        self.to_file(line);
    }

    /// Flushes the log file.
    pub fn flush(&self) {
        if let Some(f) = self.file.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = f.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LogLevel;

    #[test]
    fn dlios_spellings_and_order() {
        assert_eq!(LogLevel::parse("WARN"), Some(LogLevel::Warning));
        assert_eq!(LogLevel::parse("critical"), Some(LogLevel::Critical));
        assert_eq!(LogLevel::parse("Info"), None);
        // OUTPUT lines show at warning, not at error.
        assert!(LogLevel::Output >= LogLevel::Warning);
        assert!(LogLevel::Output < LogLevel::Error);
    }
}
