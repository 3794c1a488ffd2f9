//! The MLPerf Storage fork's page-cache flush before every training epoch: rank 0 asks the
//! kernel to drop every clean cached page (`sudo -n sh -c 'echo 3 > /proc/sys/vm/drop_caches'`)
//! so that the epoch's reads reach the storage, and every rank waits for it at the epoch's
//! barrier. It is outside the timed epoch, as in the fork.
//!
//! The fork's rules, kept here: each flush may take `DLIO_DROP_CACHES_TIMEOUT` seconds (an
//! integer; unset, empty or not an integer is 30, below 1 is 1); a flush that times out is
//! killed, warned about (the first warning names the variable) and tried again the next epoch;
//! any other failure (no `sudo`, a password asked for, a refused write) is warned about once
//! and ends the flushing for the run. The run's exit status never depends on it. Under
//! `semantics: upstream` (argonne DLIO, which has no flush) nothing is run.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that bounds one flush (mlpstorage's
/// `--drop-caches-timeout-seconds` exports it and forwards it with `mpirun -x`).
pub const TIMEOUT_VARIABLE: &str = "DLIO_DROP_CACHES_TIMEOUT";

/// The fork's default bound of one flush.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The command the fork runs, `sudo -n` so that a password prompt fails instead of waiting.
const COMMAND: [&str; 4] = ["sudo", "-n", "sh", "-c"];
const SCRIPT: &str = "echo 3 > /proc/sys/vm/drop_caches";

/// The bound of one flush, read as the fork reads `DLIO_DROP_CACHES_TIMEOUT`.
pub fn timeout_from(value: Option<&str>) -> Duration {
    match value.map(str::trim).and_then(|v| v.parse::<i64>().ok()) {
        Some(seconds) => Duration::from_secs(seconds.max(1) as u64),
        None => DEFAULT_TIMEOUT,
    }
}

/// What one flush did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlushOutcome {
    /// The kernel dropped its clean pages.
    Flushed,
    /// It ran longer than the bound and was killed.
    TimedOut,
    /// It could not run or failed; the reason, for the user.
    Failed(String),
}

/// Runs the flush command once, killing it after `timeout`.
pub fn flush_once(program: &[&str], timeout: Duration) -> FlushOutcome {
    let Some((name, args)) = program.split_first() else {
        return FlushOutcome::Failed("no command".into());
    };
    let mut child = match Command::new(name)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return FlushOutcome::Failed(format!("`{name}` could not be started: {e}")),
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return FlushOutcome::Flushed,
            Ok(Some(status)) => {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    use std::io::Read;
                    let _ = pipe.read_to_string(&mut stderr);
                }
                let stderr = stderr.trim();
                return FlushOutcome::Failed(if stderr.is_empty() {
                    format!("`{}` ended with {status}", program.join(" "))
                } else {
                    format!("`{}` ended with {status}: {stderr}", program.join(" "))
                });
            }
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return FlushOutcome::TimedOut;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return FlushOutcome::Failed(format!("waiting for `{name}`: {e}")),
        }
    }
}

/// Rank 0's flushes over a run: what to run, and what happened so far.
#[derive(Debug)]
pub struct SystemFlush {
    program: Vec<String>,
    timeout: Duration,
    disabled: bool,
    /// Epochs whose flush completed.
    pub flushed: u32,
    /// Epochs whose flush timed out.
    pub timed_out: u32,
    /// Epochs a flush was tried before.
    pub attempted: u32,
}

impl SystemFlush {
    /// The fork's flush, bounded by `DLIO_DROP_CACHES_TIMEOUT`.
    pub fn from_environment() -> SystemFlush {
        let value = std::env::var(TIMEOUT_VARIABLE).ok();
        let mut program: Vec<String> = COMMAND.iter().map(|s| s.to_string()).collect();
        program.push(SCRIPT.into());
        SystemFlush::new(program, timeout_from(value.as_deref()))
    }

    /// A flush that runs `program` (tests run their own).
    pub fn new(program: Vec<String>, timeout: Duration) -> SystemFlush {
        SystemFlush {
            program,
            timeout,
            disabled: false,
            flushed: 0,
            timed_out: 0,
            attempted: 0,
        }
    }

    /// Flushes before an epoch unless an earlier failure ended the flushing; the warning to
    /// give, if any.
    pub fn before_epoch(&mut self, epoch: u32) -> Option<String> {
        if self.disabled {
            return None;
        }
        self.attempted += 1;
        let program: Vec<&str> = self.program.iter().map(String::as_str).collect();
        match flush_once(&program, self.timeout) {
            FlushOutcome::Flushed => {
                self.flushed += 1;
                None
            }
            FlushOutcome::TimedOut => {
                self.timed_out += 1;
                Some(if self.timed_out == 1 {
                    format!(
                        "the page-cache flush before epoch {epoch} took more than {} s and was \
                         stopped, so this epoch may read from the page cache; it is tried again \
                         next epoch (raise {TIMEOUT_VARIABLE} to give it longer)",
                        self.timeout.as_secs()
                    )
                } else {
                    format!("the page-cache flush before epoch {epoch} timed out again")
                })
            }
            FlushOutcome::Failed(reason) => {
                self.disabled = true;
                Some(format!(
                    "the page cache could not be flushed before epoch {epoch} ({reason}); reads \
                     may be served from the page cache, not the storage, for the rest of the \
                     run (the fork flushes with passwordless sudo; storage.drop_page_cache or \
                     the direct engine keep the data set's own pages out)"
                ))
            }
        }
    }

    /// The warning for the end of the run, when some flushes timed out.
    pub fn summary(&self) -> Option<String> {
        (self.timed_out > 0).then(|| {
            format!(
                "the page-cache flush timed out in {} of {} epochs ({TIMEOUT_VARIABLE} is {} s)",
                self.timed_out,
                self.attempted,
                self.timeout.as_secs()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_read_as_the_fork_reads_it() {
        assert_eq!(timeout_from(None), Duration::from_secs(30));
        assert_eq!(timeout_from(Some("")), Duration::from_secs(30));
        assert_eq!(timeout_from(Some("30.5")), Duration::from_secs(30));
        assert_eq!(timeout_from(Some("30s")), Duration::from_secs(30));
        assert_eq!(timeout_from(Some(" 7 ")), Duration::from_secs(7));
        assert_eq!(timeout_from(Some("0")), Duration::from_secs(1));
        assert_eq!(timeout_from(Some("-4")), Duration::from_secs(1));
    }

    fn sh(script: &str, timeout: Duration) -> SystemFlush {
        SystemFlush::new(vec!["sh".into(), "-c".into(), script.into()], timeout)
    }

    #[test]
    fn a_flush_that_works_warns_of_nothing() {
        let mut flush = sh("exit 0", Duration::from_secs(30));
        assert_eq!(flush.before_epoch(1), None);
        assert_eq!(flush.before_epoch(2), None);
        assert_eq!((flush.flushed, flush.attempted), (2, 2));
        assert_eq!(flush.summary(), None);
    }

    #[test]
    fn a_failed_flush_warns_once_and_ends_the_flushing() {
        let mut flush = sh(
            "echo 'sudo: a password is required' >&2; exit 1",
            Duration::from_secs(30),
        );
        let warning = flush.before_epoch(1).expect("a warning");
        assert!(warning.contains("a password is required"), "{warning}");
        assert_eq!(flush.before_epoch(2), None);
        assert_eq!(flush.attempted, 1);
        let mut missing =
            SystemFlush::new(vec!["/nonexistent/sudo".into()], Duration::from_secs(1));
        assert!(
            missing
                .before_epoch(1)
                .unwrap()
                .contains("could not be started")
        );
        assert_eq!(missing.before_epoch(2), None);
    }

    #[test]
    fn a_flush_that_times_out_is_stopped_and_tried_again() {
        let mut flush = sh("sleep 600", Duration::from_millis(200));
        let started = Instant::now();
        let first = flush.before_epoch(1).expect("a warning");
        assert!(first.contains(TIMEOUT_VARIABLE), "{first}");
        let second = flush.before_epoch(2).expect("a warning");
        assert!(!second.contains(TIMEOUT_VARIABLE), "{second}");
        // Killed, not waited for: two 600 s sleeps end within a minute on any machine.
        assert!(started.elapsed() < Duration::from_secs(60));
        assert_eq!((flush.timed_out, flush.attempted), (2, 2));
        assert!(flush.summary().unwrap().contains("2 of 2 epochs"));
    }
}
