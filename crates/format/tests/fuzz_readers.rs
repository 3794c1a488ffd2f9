//! Fuzzing every format's reader on mutated files: a file of each format is generated, then
//! copies of it are damaged (bytes flipped, ranges zeroed or overwritten, the file cut short or
//! extended with junk, its index files too) and read back sample by sample, decoded (upstream
//! DLIO's readers) and undecoded (the MLPerf fork's). Every read returns bytes or an error; a
//! panic, or a read that does not return within seconds, fails the test.
//!
//! The suite runs a fixed budget; `DLIO_FUZZ_CASES=N` runs N mutated files per format instead
//! (`bench/fuzz.sh`), `DLIO_FUZZ_SEED=N` another seed than the suite's, and
//! `DLIO_FUZZ_FORMAT=NAME` one format only. Each format's seed and the command that reruns it
//! are printed before its cases (shown when the test fails), with proptest's smallest failing
//! input; an input worth keeping goes into `damaged_files_that_once_crashed_a_reader_are_errors`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use dlio_config::{Compression, DatasetConfig, ElementType, FormatKind, Semantics};
use dlio_format::{DataRng, FileLayout, Format, format_for_run};
use dlio_storage::{PosixStorage, Storage};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, FileFailurePersistence, RngSeed, TestRunner};

fn runner(default: u32, format: &str) -> TestRunner {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let cases = number("DLIO_FUZZ_CASES").map_or(default, |n: u64| n as u32);
    let seed = number("DLIO_FUZZ_SEED").unwrap_or(0x5eed);
    eprintln!(
        "{format}: seed {seed}, {cases} cases; rerun: DLIO_FUZZ_SEED={seed} \
         DLIO_FUZZ_FORMAT={format} cargo test -p dlio-format --test fuzz_readers"
    );
    TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        rng_seed: RngSeed::Fixed(seed),
        ..RunnerConfig::default()
    })
}

#[derive(Debug, Clone)]
enum Damage {
    Flip(usize, u8),
    Zero(usize, usize),
    Junk(usize, Vec<u8>),
    Cut(usize),
    Extend(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(at, x)| Damage::Flip(at, x)),
        (any::<usize>(), 1usize..64).prop_map(|(at, n)| Damage::Zero(at, n)),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(at, b)| Damage::Junk(at, b)),
        any::<usize>().prop_map(Damage::Cut),
        proptest::collection::vec(any::<u8>(), 1..64).prop_map(Damage::Extend),
    ]
}

fn apply(bytes: &mut Vec<u8>, damage: &Damage) {
    let len = bytes.len().max(1);
    match damage {
        Damage::Flip(at, x) => {
            if !bytes.is_empty() {
                bytes[at % len] ^= x;
            }
        }
        Damage::Zero(at, n) => {
            let start = at % len;
            let end = (start + n).min(bytes.len());
            bytes[start.min(end)..end].fill(0);
        }
        Damage::Junk(at, junk) => {
            let start = at % len;
            for (i, b) in junk.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(start + i) {
                    *slot = *b;
                }
            }
        }
        Damage::Cut(at) => bytes.truncate(at % len),
        Damage::Extend(junk) => bytes.extend_from_slice(junk),
    }
}

/// A generated file of one format and its side files (indexes), as bytes to damage.
struct Pristine {
    name: &'static str,
    semantics: Semantics,
    dataset: DatasetConfig,
    layout: FileLayout,
    /// The data file, then its side files, each with its path relative to the data root.
    files: Vec<(PathBuf, Vec<u8>)>,
}

fn pristine(root: &Path, kind: FormatKind, semantics: Semantics) -> Pristine {
    let dataset = DatasetConfig {
        format: kind,
        ..DatasetConfig::default()
    };
    let format = format_for_run(&dataset, semantics, true).unwrap();
    let layout = FileLayout {
        samples: 3,
        sample_dims: vec![24, 24],
        element: ElementType::Uint8,
        compression: Compression::None,
        fixed_size: false,
    };
    let dir = root.join(format!("{}-{}", kind.name(), semantics.as_str()));
    let path = dir.join("train").join(format!("a.{}", format.extension()));
    let storage = PosixStorage::new();
    format
        .generate(&storage, &path, &layout, &mut DataRng::for_file(1, 0, 0))
        .unwrap();
    let files = walk(&dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            // The data file first: it is the one opened.
            (p.strip_prefix(&dir).unwrap().to_path_buf(), bytes)
        })
        .collect::<Vec<_>>();
    let mut files = files;
    files.sort_by_key(|(p, _)| p != &path.strip_prefix(&dir).unwrap().to_path_buf());
    Pristine {
        name: kind.name(),
        semantics,
        dataset,
        layout,
        files,
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if !p.file_name().unwrap().to_string_lossy().starts_with('.') {
            out.push(p);
        }
    }
    out
}

/// Writes the damaged copies under `dir`, then opens the data file and reads every sample (and
/// one past the end) on a thread of its own, which must finish within the deadline. Returns
/// what each step gave: the open's error, or each read's length or error.
fn read_damaged(p: &Pristine, dir: &Path, damages: &[(usize, Damage)]) -> Outcome {
    let mut files = p.files.clone();
    for (which, d) in damages {
        let n = files.len();
        apply(&mut files[which % n].1, d);
    }
    for (rel, bytes) in &files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
    }
    let data = dir.join(&files[0].0);
    let format: Box<dyn Format> = format_for_run(&p.dataset, p.semantics, true).unwrap();
    let layout = p.layout.clone();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let storage = PosixStorage::new();
        let mut reader = format.reader(&layout);
        let outcome = match reader.open(&storage as &dyn Storage, 9, &data) {
            Err(e) => Outcome::OpenFailed(e.to_string()),
            Ok(()) => {
                let reads = (0..=layout.samples)
                    .map(|i| {
                        reader
                            .read_sample(&storage, 9, i)
                            .map(|s| s.len())
                            .map_err(|e| e.to_string())
                    })
                    .collect();
                reader.close(9);
                Outcome::Read(reads)
            }
        };
        let _ = done.send(outcome);
    });
    match finished.recv_timeout(Duration::from_secs(20)) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "{} ({}): reading a damaged file hung: {damages:?}",
                p.name,
                p.semantics.as_str()
            )
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!(
                "{} ({}): the reader panicked on {damages:?}",
                p.name,
                p.semantics.as_str()
            )
        }
    }
}

#[test]
fn every_reader_returns_bytes_or_an_error_on_damaged_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mut kinds = vec![
        FormatKind::Npz,
        FormatKind::Npy,
        FormatKind::Jpeg,
        FormatKind::Png,
        FormatKind::Tfrecord,
        FormatKind::Csv,
        FormatKind::Parquet,
        FormatKind::IndexedBinary,
        FormatKind::MmapIndexedBinary,
    ];
    if cfg!(feature = "hdf5") {
        kinds.push(FormatKind::Hdf5);
    }
    let only = std::env::var("DLIO_FUZZ_FORMAT").ok();
    for kind in kinds {
        if only.as_deref().is_some_and(|name| name != kind.name()) {
            continue;
        }
        for semantics in [Semantics::Upstream, Semantics::Mlperf] {
            let p = pristine(tmp.path(), kind, semantics);
            let scratch = tmp.path().join("scratch");
            let mut runner = runner(60, kind.name());
            let strategy = proptest::collection::vec((any::<usize>(), damage()), 1..4);
            runner
                .run(&strategy, |damages| {
                    let _ = std::fs::remove_dir_all(&scratch);
                    let _ = read_damaged(&p, &scratch, &damages);
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{} ({}): {e}", p.name, semantics.as_str()));
        }
    }
}

/// What reading a damaged file gave.
#[derive(Debug)]
enum Outcome {
    OpenFailed(String),
    /// Samples 0..=samples (the last is one past the end, always an error).
    Read(Vec<Result<usize, String>>),
}

impl Outcome {
    /// The errors among the samples that exist (the open's, or those of samples
    /// `0..samples`).
    fn errors_within(&self, samples: u32) -> Vec<&str> {
        match self {
            Outcome::OpenFailed(e) => vec![e.as_str()],
            Outcome::Read(reads) => reads
                .iter()
                .take(samples as usize)
                .filter_map(|r| r.as_ref().err().map(String::as_str))
                .collect(),
        }
    }
}

/// Inputs the fuzzer found that crashed a reader, kept as they were found.
#[test]
fn damaged_files_that_once_crashed_a_reader_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    // A flipped footer byte gave a column chunk a negative offset; the parquet crate asserts
    // on it (seed 1, 10^5 files per format).
    let p = pristine(tmp.path(), FormatKind::Parquet, Semantics::Upstream);
    let outcome = read_damaged(
        &p,
        &tmp.path().join("scratch"),
        &[(12956039871937486090, Damage::Flip(14721382982394380639, 71))],
    );
    let errors = outcome.errors_within(p.layout.samples);
    let name = p.files[0]
        .0
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        !errors.is_empty(),
        "the damaged footer was read as if whole: {outcome:?}"
    );
    assert!(
        errors.iter().all(|e| e.contains(&name)),
        "every error names the file: {errors:?}"
    );
}
