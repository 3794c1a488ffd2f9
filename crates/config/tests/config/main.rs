//! The behaviour of `dlio-config`, one module per topic.

mod defaults;
mod errors;
mod output;
mod overrides;
mod validation;
mod workloads;

use std::path::PathBuf;

use dlio_config::{ConfigError, LoadArgs, Loaded, load};

/// Registers the format and engine names a binary's tables would (these tests do not link the
/// format and storage crates): loading then refuses a name that is none of them, as the
/// binary does. Every test that depends on it calls it; the first registration stays.
pub fn register_names() {
    dlio_config::register_format_names(
        [
            "npz",
            "npy",
            "hdf5",
            "csv",
            "jpeg",
            "png",
            "tfrecord",
            "indexed_binary",
            "mmap_indexed_binary",
            "synthetic",
            "parquet",
            "hdf5_opt",
        ]
        .into_iter()
        .map(|n| (n, &[] as &'static [&'static str]))
        .chain([("arrow", &["arrow_ipc"] as &'static [&'static str])])
        .collect(),
    );
    dlio_config::register_engine_names(vec!["posix", "direct", "mmap", "io_uring", "s3"]);
}

/// Copies of the 24 workload files argonne DLIO ships (test data, see its SOURCE.md), to
/// compare the built-in copies with.
pub fn spec_workloads_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/dlio-workloads")
}

/// `dlio ... --strict workload=NAME ARGS...`.
pub fn load_words_strict(words: &[&str]) -> Result<Loaded, ConfigError> {
    load(&LoadArgs {
        positional: words.iter().map(|w| w.to_string()).collect(),
        strict: true,
        ..Default::default()
    })
}

/// `dlio ... workload=NAME ARGS...`.
pub fn load_words(words: &[&str]) -> Result<Loaded, ConfigError> {
    load(&LoadArgs {
        positional: words.iter().map(|w| w.to_string()).collect(),
        config_dir: None,
        ..Default::default()
    })
}

/// Loads the built-in workload `name` with `overrides`, which must succeed.
pub fn builtin(name: &str, overrides: &[&str]) -> Loaded {
    let mut words = vec![format!("workload={name}")];
    words.extend(overrides.iter().map(|o| o.to_string()));
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match load_words(&words) {
        Ok(loaded) => loaded,
        Err(e) => panic!("loading {name} with {overrides:?}: {e}"),
    }
}

/// A workload file written to a fresh directory, loaded by path.
pub struct TempWorkload {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl TempWorkload {
    pub fn new(file_name: &str, yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(file_name);
        std::fs::write(&path, yaml).expect("write workload");
        TempWorkload { dir, path }
    }

    pub fn load(&self, overrides: &[&str]) -> Result<Loaded, ConfigError> {
        let mut words = vec![format!("workload={}", self.path.display())];
        words.extend(overrides.iter().map(|o| o.to_string()));
        load(&LoadArgs {
            positional: words,
            config_dir: None,
            ..Default::default()
        })
    }
}

/// Loads `yaml` (as file `name`) with `--strict` and returns the error message, which must
/// exist.
pub fn error_of(name: &str, yaml: &str, overrides: &[&str]) -> String {
    let w = TempWorkload::new(name, yaml);
    let mut words = vec![format!("workload={}", w.path.display())];
    words.extend(overrides.iter().map(|o| o.to_string()));
    match load(&LoadArgs {
        positional: words,
        strict: true,
        ..Default::default()
    }) {
        Ok(loaded) => panic!("expected an error, got {:?}", loaded.config),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `haystack` contains every needle, showing the haystack otherwise.
#[track_caller]
pub fn assert_contains(haystack: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            haystack.contains(needle),
            "expected {needle:?} in:\n{haystack}"
        );
    }
}
