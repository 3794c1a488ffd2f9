//! Skips that are a property of the machine, recorded where the suite's runner counts them.

use std::io::Write;
use std::path::Path;

/// What a test may skip for: a property of the machine that the test cannot change, found
/// by a [`crate::probe`] before the run. Anything else (a missing Python module, a server
/// that does not start) is a failure, not a skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineProperty {
    /// The kernel refuses io_uring (`io_uring_setup` fails: an old kernel, a seccomp filter,
    /// `kernel.io_uring_disabled`).
    NoIoUring,
    /// The file system under test refuses `O_DIRECT` opens.
    NoODirect,
    /// The folder under test is on tmpfs (no page cache to drop, no O_DIRECT alignment rule).
    Tmpfs,
    /// The file system under test refuses `preadv2(RWF_NOWAIT)`.
    NoNowaitReads,
    /// This kernel lets `/proc` files be opened with `O_DIRECT`.
    ProcAcceptsODirect,
}

impl MachineProperty {
    /// The key `scripts/allowed-skips` lists.
    pub fn key(self) -> &'static str {
        match self {
            MachineProperty::NoIoUring => "no-io_uring",
            MachineProperty::NoODirect => "no-o_direct",
            MachineProperty::Tmpfs => "tmpfs",
            MachineProperty::NoNowaitReads => "no-rwf_nowait",
            MachineProperty::ProcAcceptsODirect => "proc-accepts-o_direct",
        }
    }
}

/// Records that the running test leaves out `what` because of `property`: printed, and
/// appended to `DLIO_SKIP_LOG` as `key<TAB>test<TAB>what` when that variable is set.
pub fn skip(property: MachineProperty, what: &str) {
    record(property.key(), what);
}

/// Whether this machine can run a local engine labelled `label` that uses io_uring and/or
/// O_DIRECT (on the system temp dir's file system): probed (once per process), and a skip
/// recorded for the property that is missing. An engine the machine can run must then start.
pub fn engine_runs_here(label: &str, uses_io_uring: bool, uses_o_direct: bool) -> bool {
    use std::sync::OnceLock;
    static IO_URING: OnceLock<Result<(), String>> = OnceLock::new();
    static O_DIRECT: OnceLock<Result<(), String>> = OnceLock::new();
    let io_uring = IO_URING.get_or_init(crate::probe::io_uring);
    let o_direct = O_DIRECT.get_or_init(|| crate::probe::o_direct(&std::env::temp_dir()));
    let missing = [
        (uses_io_uring, io_uring, MachineProperty::NoIoUring),
        (uses_o_direct, o_direct, MachineProperty::NoODirect),
    ]
    .into_iter()
    .find_map(|(uses, probed, property)| match probed {
        Err(reason) if uses => Some((property, reason)),
        _ => None,
    });
    match missing {
        Some((property, reason)) => {
            skip(property, &format!("the {label} engine: {reason}"));
            false
        }
        None => true,
    }
}

/// Records a skip the user asked for with an environment variable (`DLIO_SKIP_PYTHON=1`):
/// counted like any other, and not on `scripts/allowed-skips`, so the suite fails.
pub fn opted_out(variable: &str, what: &str) {
    record(&format!("opt-out:{variable}"), what);
}

/// Records that `what` is left out because this build lacks `feature` (a cargo feature such
/// as `hdf5`): counted, and not on `scripts/allowed-skips` (the suite builds every feature).
pub fn not_built(feature: &str, what: &str) {
    record(&format!("not-built:{feature}"), what);
}

fn record(key: &str, what: &str) {
    let log = std::env::var_os("DLIO_SKIP_LOG").filter(|p| !p.is_empty());
    record_in(log.as_deref().map(Path::new), key, what);
}

fn record_in(log: Option<&Path>, key: &str, what: &str) {
    let test = current_test();
    eprintln!("SKIPPED [{key}] {test}: {what}");
    let Some(log) = log else {
        return;
    };
    let line = format!("{key}\t{test}\t{}\n", what.replace(['\t', '\n'], " "));
    // One write of a short line to a file opened for appending: lines of tests running in
    // parallel (threads or processes) do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!(
            "cannot record a skip in DLIO_SKIP_LOG={}: {e}",
            log.display()
        );
    }
}

/// `binary::test_name`: the test harness names each test's thread after the test.
fn current_test() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_owned())
        })
        .unwrap_or_default();
    let thread = std::thread::current();
    format!("{binary}::{}", thread.name().unwrap_or("?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_one_line_with_its_key_and_test_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        record_in(
            Some(&log),
            MachineProperty::NoIoUring.key(),
            "the io_uring\tengine",
        );
        record_in(Some(&log), "opt-out:DLIO_SKIP_PYTHON", "numpy");
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0][0], "no-io_uring");
        assert!(lines[0][1].ends_with("a_skip_is_one_line_with_its_key_and_test_in_the_log"));
        assert_eq!(lines[0][2], "the io_uring engine");
        assert_eq!(lines[1][0], "opt-out:DLIO_SKIP_PYTHON");
    }
}
