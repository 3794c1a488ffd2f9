//! Running upstream DLIO's test matrices (argonne-lcf/dlio_benchmark `tests/*.py` at e1919d7)
//! as command lines: each case is upstream's own list of Hydra overrides, given to
//! `dlio_benchmark` as upstream's `run_mpi_benchmark` gives them to `mpirun -np 2 python -m
//! dlio_benchmark.main`; the two MPI processes are two ranks of one process here
//! (`--ranks 2`), which write the same per-rank files.
//!
//! Upstream's cases sleep most of the time (`computation_time` 1 s per step in its default
//! workload), so the cases of a matrix run side by side, a few at a time: the matrix takes
//! about as long as its slowest case, not the sum.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// Upstream's `NUM_PROCS` where `mpirun` exists.
pub const NUM_PROCS: u64 = 2;

/// Cases run at once. They sleep, so more than the cores is fine; more than this gives the
/// scheduler's jitter a chance to slow a case past its step timing.
const SIDE_BY_SIDE: usize = 8;

/// `dlio_benchmark` (DLIO's name for `dlio run`) on two ranks with upstream's overrides, in
/// `cwd` (where upstream's relative paths and Hydra's log folder land), with dftracer's
/// environment as upstream's CI sets it for the AI logging tests.
pub fn dlio_benchmark(cwd: &Path, overrides: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlio_benchmark"));
    cmd.current_dir(cwd)
        .args(["--ranks", &NUM_PROCS.to_string()])
        .args(overrides)
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_INC_METADATA", "1")
        .env("DFTRACER_TRACE_COMPRESSION", "0")
        .env_remove("DLIO_STRICT")
        .env_remove("DLIO_SEMANTICS");
    cmd
}

/// Runs `cmd`; an error with both outputs unless it exits 0 (upstream raises on a non-zero
/// exit unless the case expects one).
pub fn expect_success(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("dlio_benchmark did not start: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One case of a matrix: its pytest id (`test_name[param-param]`) and what it runs.
pub struct Case<P> {
    pub id: String,
    pub params: P,
}

/// Runs every case (each in a fresh folder, given to `check`), a few side by side, and fails
/// with the id and reason of every case that failed, so one run shows the whole matrix.
pub fn run_matrix<P: Sync>(
    cases: Vec<Case<P>>,
    check: impl Fn(&Path, &P) -> Result<(), String> + Sync,
) {
    assert!(!cases.is_empty(), "an empty matrix tests nothing");
    let total = cases.len();
    let next = Mutex::new(cases.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..SIDE_BY_SIDE.min(total) {
            scope.spawn(|| {
                loop {
                    let Some(case) = next.lock().unwrap().next() else {
                        return;
                    };
                    let dir = tempfile::tempdir().expect("temporary folder");
                    if let Err(why) = check(dir.path(), &case.params) {
                        failures.lock().unwrap().push(format!("{}: {why}", case.id));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {total} upstream cases failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Upstream's `setup_test_env` storage root: `outputs/<unique>` under the case's folder.
pub fn storage_root(cwd: &Path) -> PathBuf {
    let root = cwd.join("outputs").join("case");
    std::fs::create_dir_all(&root).expect("storage root");
    root
}

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(what()) }
}

/// The files in `dir` whose name ends with `suffix`, sorted (Python's `glob(dir/*suffix)`).
pub fn glob(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}
