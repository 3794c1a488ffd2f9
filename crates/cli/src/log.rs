//! DLIO's log: `dlio.log` in the output folder plus the console, at DLIO's levels. Lines go
//! through the progress bars' suspend so bars and text never garble each other.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use indicatif::MultiProgress;

/// The run's log sink.
pub struct RunLog {
    file: Mutex<Option<BufWriter<File>>>,
    bars: MultiProgress,
    /// False on MPI processes other than 0: they print warnings only.
    speaks: bool,
}

impl RunLog {
    /// A log that writes to the console only until [`RunLog::open_file`] is called.
    /// `speaks` is false on MPI processes other than 0, which print warnings only.
    pub fn new(bars: MultiProgress, speaks: bool) -> RunLog {
        RunLog {
            file: Mutex::new(None),
            bars,
            speaks,
        }
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
        if self.speaks {
            self.emit("OUTPUT", msg);
        }
    }

    /// A warning.
    pub fn warn(&self, msg: &str) {
        self.emit("WARNING", msg);
    }

    /// A `[METRIC]` line: printed on stdout (scripts grep it) and logged.
    pub fn metric(&self, line: &str) {
        if !self.speaks {
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
