//! What the end-to-end test files share: starting the binary, checking its exit, reading JSON.
#![allow(dead_code)] // each test file uses its own subset

pub mod inflight;
pub mod upstream;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The `dlio` binary under test.
pub fn dlio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dlio"))
}

/// Runs `cmd` and fails the test, with both outputs, unless it exits 0.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("dlio starts");
    assert!(
        out.status.success(),
        "dlio failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd`, which must fail; returns its stderr.
pub fn run_err(cmd: &mut Command) -> String {
    let out = cmd.output().expect("dlio starts");
    assert!(
        !out.status.success(),
        "dlio should have failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A JSON file, parsed.
pub fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The derived parameters of a `characterize.json`, key to value.
pub fn characterized(c: &Value) -> std::collections::HashMap<String, String> {
    c["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .map(|p| {
            (
                p["key"].as_str().unwrap().to_string(),
                p["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Bytes the run in `run` read from storage, summed over processes (summary.json's own
/// figures, `dlio_rs.io_engine.per_process[].bytes_read`).
pub fn bytes_read(run: &Path) -> u64 {
    let summary = json(&run.join("summary.json"));
    summary["dlio_rs"]["io_engine"]["per_process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bytes_read"].as_u64().unwrap())
        .sum()
}
