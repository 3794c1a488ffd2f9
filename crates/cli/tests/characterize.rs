//! `dlio trace`, `dlio characterize` and `dlio fidelity` on real Python programs
//! (`tests/programs/*.py`, numpy only): each is traced through the interposer, characterised,
//! replayed by `dlio run --trace` on generated data, and scored against its own trace. The
//! derived parameters must be what the program fixes, the scores within the bounds
//! (cosine similarity >= 0.95, end-to-end error <= 5%).
//!
//! The programs compute 20-40 ms per step: this test runs dlio's debug build, whose own
//! bookkeeping costs about 0.5 ms per step and 6 ms per epoch (a tenth of that in a release
//! build, which `bench/fidelity.sh` uses), and which would otherwise be what is measured.
//!
//! Needs the interposer library beside the binary: `cargo build -p dlio-interpose`, which
//! `scripts/test.sh` runs first.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::{characterized, dlio, files_under, json, run_err, run_ok};
use serde_json::Value;

/// The replays measure time: one at a time, so that they do not compete for the two cores.
static TIMED: Mutex<()> = Mutex::new(());

/// A test program, or one of the corpus of `bench/corpus/programs` (its numpy, h5py and
/// pyarrow ones: what `scripts/test.sh` installs).
fn program(name: &str) -> PathBuf {
    let own = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.py"));
    if own.is_file() {
        return own;
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/corpus/programs")
        .join(format!("{name}.py"))
}

fn python() -> Command {
    Command::new("python3")
}

fn require_interposer() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_dlio"));
    let lib = bin.with_file_name("libdlio_interpose.so");
    assert!(
        lib.is_file(),
        "{} is missing: build it with `cargo build -p dlio-interpose` (scripts/test.sh does)",
        lib.display()
    );
}

/// Sizes of the files directly in `dir` with extension `ext`, sorted.
fn sizes(dir: &Path, ext: &str) -> Vec<u64> {
    let mut v: Vec<u64> = files_under(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    v.sort_unstable();
    v
}

struct Replayed {
    derived: std::collections::HashMap<String, String>,
    characterization: Value,
    fidelity: Value,
    real_data: PathBuf,
    emulated_data: PathBuf,
    /// The replay's output folder.
    run_dir: PathBuf,
    /// The share of a core a busy thread got right after the replay ([`core_share`]).
    core_share: f64,
}

/// The share of a core a busy thread gets over 300 ms: its time on a core over its time on a
/// core or waiting for one (`/proc/thread-self/schedstat`). Near 1 with a core to spare; about
/// two thirds with two busy loops on two cores. 1 where the kernel does not say.
fn core_share() -> f64 {
    let schedstat = || -> Option<(f64, f64)> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
        Some((fields.next()??, fields.next()??))
    };
    let Some((ran, waited)) = schedstat() else {
        return 1.0;
    };
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(300) {
        std::hint::spin_loop();
    }
    match schedstat() {
        Some((ran_after, waited_after)) => {
            let ran = ran_after - ran;
            ran / (ran + waited_after - waited).max(1.0)
        }
        None => 1.0,
    }
}

/// Below this share of a core ([`core_share`]) the machine is saturated: the replay's sleeps
/// and the program's traced ones stretch by whatever the other load takes, so the bounds on
/// time are not asserted, only those on what was read.
const SATURATED_CORE_SHARE: f64 = 0.8;

/// Makes the program's data, traces it, characterises the trace, replays the workload with
/// `dlio run --trace` and scores it.
fn trace_characterize_replay(dir: &Path, name: &str) -> Replayed {
    require_interposer();
    let _one_at_a_time = TIMED.lock().unwrap_or_else(|p| p.into_inner());
    let data = dir.join("data");
    let traces = dir.join("traces");
    let made = python()
        .arg(program(name))
        .arg(&data)
        .arg("--make")
        .status()
        .expect("python3 runs");
    assert!(made.success(), "{name} --make failed");

    let out = run_ok(
        dlio()
            .args(["trace", "--out"])
            .arg(&traces)
            .arg("--")
            .arg("python3")
            .arg(program(name))
            .arg(&data),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("exited with 0"), "{said}");
    let meta = json(&traces.join("dlio-trace.json"));
    assert_eq!(meta["exit_code"], 0);
    assert!(meta["events"].as_u64().unwrap() > 100, "{meta}");

    let workload = dir.join("workload/characterized.yaml");
    run_ok(
        dlio()
            .arg("characterize")
            .arg(&traces)
            .arg("--out")
            .arg(&workload),
    );
    let characterization = json(&dir.join("workload/characterize.json"));
    let html = std::fs::read_to_string(dir.join("workload/characterize.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("dataset.num_files_train"));

    let emulated = dir.join("emulated");
    let run = dir.join("run");
    run_ok(
        dlio()
            .arg("run")
            .arg(format!("workload={}", workload.display()))
            .arg(format!(
                "++workload.dataset.data_folder={}",
                emulated.display()
            ))
            .arg(format!("hydra.run.dir={}", run.display()))
            .arg(format!(
                "++workload.checkpoint.checkpoint_folder={}",
                dir.join("checkpoints").display()
            ))
            .arg("--trace"),
    );
    run_ok(dlio().arg("fidelity").arg(&traces).arg(&run));
    let fidelity = json(&run.join("fidelity.json"));
    let core_share = core_share();
    Replayed {
        derived: characterized(&characterization),
        characterization,
        fidelity,
        real_data: data,
        emulated_data: emulated.join("train"),
        run_dir: run,
        core_share,
    }
}

/// `dlio fidelity`'s bounds as these tests hold them. The structure (bytes, read calls, files,
/// read sizes) at the tool's own bounds; the step rhythm (the I/O phase and the gaps between
/// steps) at wider ones, because the trace and its replay run at different moments and on a
/// loaded machine wait for a core differently (the I/O phase moved by 6% with both cores
/// busy); the read calls' own durations (I/O time and loading time per step) not at all: the
/// debug build's bookkeeping (about 0.5 ms per step) is a large share of these programs'
/// 0.3-3 ms loads. On a saturated machine ([`SATURATED_CORE_SHARE`]) the step rhythm is not
/// held either: with two busy loops on the two cores, a debug replay of eval_every_n_steps
/// lasted 2.3 times its trace (its derived workload right). `bench/fidelity.sh` checks every
/// bound at the tool's limits with the release build on a quiet machine.
const TEST_LIMITS: [(&str, Option<f64>); 9] = [
    ("data bytes read", Some(0.02)),
    ("bytes read outside the data set", Some(0.10)),
    ("read calls", Some(0.10)),
    ("files read", Some(0.05)),
    ("read sizes", Some(0.10)),
    ("I/O phase (s)", Some(0.25)),
    ("gaps between steps", Some(0.50)),
    ("I/O time per step, mean (s)", None),
    ("loading time per step", None),
];

fn assert_scores(name: &str, r: &Replayed) {
    assert_scores_but(name, r, &[]);
}

/// [`assert_scores`] but for the bounds named in `known`, which the test checks itself (a class
/// whose replay misses them by a known amount, said where used).
fn assert_scores_but(name: &str, r: &Replayed, known: &[&str]) {
    let f = &r.fidelity;
    if r.core_share < SATURATED_CORE_SHARE {
        eprintln!(
            "{name}: a busy thread got {:.0}% of a core after the replay: the machine is \
             saturated, so only the bounds on what was read are asserted",
            r.core_share * 100.0
        );
        assert_structure_but(name, f, known);
        return;
    }
    let bounds = f["bounds"].as_array().unwrap();
    assert_eq!(bounds.len(), TEST_LIMITS.len(), "{}", f["bounds"]);
    for b in bounds {
        let bound = b["name"].as_str().unwrap();
        let limit = TEST_LIMITS
            .iter()
            .find(|(n, _)| *n == bound)
            .unwrap_or_else(|| panic!("a bound the test does not know: {bound}"))
            .1;
        // A bound that does not apply (reads outside the data set under 5% of the data on
        // both sides) compares nothing.
        if let Some(limit) = limit.filter(|_| b["applies"] == true && !known.contains(&bound)) {
            let error = b["error"].as_f64().unwrap();
            assert!(
                error <= limit,
                "{name}: {bound} is off by {error:.3} (the test allows {limit})\n{}",
                serde_json::to_string_pretty(&f["bounds"]).unwrap()
            );
        }
    }
}

/// The bounds on what was read (bytes, read calls, files, read sizes) at the tool's own limits,
/// none on time: for replays whose step rhythm a busy machine moves by more than
/// [`TEST_LIMITS`] allows (a debug build's replay of worker processes beside a CPU hog).
fn assert_structure(name: &str, f: &Value) {
    assert_structure_but(name, f, &[]);
}

/// [`assert_structure`] but for the bounds named in `known` (see [`assert_scores_but`]).
fn assert_structure_but(name: &str, f: &Value, known: &[&str]) {
    for b in f["bounds"].as_array().unwrap() {
        let bound = b["name"].as_str().unwrap();
        if known.contains(&bound) {
            continue;
        }
        if [
            "data bytes read",
            "bytes read outside the data set",
            "read calls",
            "files read",
            "read sizes",
        ]
        .contains(&bound)
        {
            assert_eq!(b["pass"], true, "{name}: {bound}: {b}");
        }
    }
}

fn seconds(value: &str) -> f64 {
    // A number, `{mean: x, stdev: y}`, or `{type: quantiles|empirical, values: [...]}` (their
    // median; characterize writes both sorted).
    if let Some(list) = value
        .strip_prefix("{type: quantiles, values: [")
        .or_else(|| value.strip_prefix("{type: empirical, values: ["))
    {
        let values: Vec<f64> = list
            .trim_end_matches("]}")
            .split(',')
            .map(|v| v.trim().parse().unwrap())
            .collect();
        return values[values.len() / 2];
    }
    let v = value.trim_start_matches("{mean: ");
    v.split([',', '}']).next().unwrap().trim().parse().unwrap()
}

#[test]
fn an_npz_loop_is_characterised_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "npz_loop");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "npz"),
        ("dataset.num_files_train", "64"),
        ("dataset.num_samples_per_file", "1"),
        ("reader.batch_size", "4"),
        ("reader.read_threads", "0"),
        ("train.epochs", "2"),
        ("reader.file_shuffle", "seed"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // np.load's requests, replayed as they were made: the zip's end records first (each with
    // the program's own work before its next request, which the test does not hold).
    let requests: String = d["reader.sample_requests"]
        .split(", work: ")
        .map(|part| {
            part.split_once('}')
                .map_or(part.to_string(), |(_, rest)| format!("}}{rest}"))
        })
        .collect::<Vec<_>>()
        .join("");
    assert!(
        requests
            .starts_with("{from: start, offset: 0, size: 4096}, {from: end, offset: 22, size: 22}"),
        "{requests}"
    );
    // 40 ms of compute per step, less the loader's time per sample that the emulation sleeps.
    let compute = seconds(&d["train.computation_time"]);
    // 40 ms of sleep; a loaded machine only lengthens the pauses.
    assert!((0.035..0.06).contains(&compute), "{compute}");
    // The generated files have the program's files' size.
    assert_eq!(sizes(&r.emulated_data, "npz"), sizes(&r.real_data, "npz"));
    assert_scores("npz_loop", &r);
    // 32 steps; on a loaded machine a pause inside a burst can stretch past the compute
    // level and split one step in two.
    for side in ["real", "emulated"] {
        let steps = r.fidelity[side]["steps"].as_u64().unwrap();
        assert!((32..=33).contains(&steps), "{side}: {steps} steps");
    }
}

#[test]
fn npz_files_read_one_member_per_opening_hold_a_sample_per_member() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "npz_members");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "npz"),
        ("dataset.num_files_train", "32"),
        ("dataset.num_samples_per_file", "2"),
        ("reader.batch_size", "4"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // Two kinds of opening, half each, reading only what they ask for: the zip's end records
    // and one member.
    let patterns = &d["reader.sample_request_patterns"];
    let kinds: Vec<&str> = patterns.lines().collect();
    assert_eq!(kinds.len(), 2, "{patterns}");
    for kind in kinds {
        assert!(
            kind.starts_with("{weight: 64, read_rest: False, requests: [")
                && kind.contains("{from: end, offset: 22, size: 22"),
            "{kind}"
        );
    }
    assert!(!d.contains_key("reader.sample_requests"), "{d:?}");
    // The generated files have the program's files' size, so the requests land where the
    // program's did; the replay reads the bytes and makes the calls the program made.
    assert_eq!(sizes(&r.emulated_data, "npz"), sizes(&r.real_data, "npz"));
    assert_scores("npz_members", &r);
    let bytes = r.fidelity["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "data bytes read")
        .unwrap()
        .clone();
    // 128 openings of about half a 65.8 KB file, not 128 whole files.
    let read = bytes["real"].as_f64().unwrap();
    let files: u64 = sizes(&r.real_data, "npz").iter().sum();
    assert!(read < 0.7 * 4.0 * files as f64, "{bytes}");
}

/// A calibration file of its own read before each frame: companions, not side files read
/// every few steps; the replay writes one beside each frame and reads it with its sample.
#[test]
fn a_file_of_its_own_beside_each_sample_is_its_companion() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "calib_pairs");
    let d = &r.derived;
    assert_eq!(d["dataset.num_files_train"], "48");
    assert_eq!(
        d["dataset.sample_companions"],
        "{folder: \"calib\", size_bytes: 700}"
    );
    assert!(!d.contains_key("dataset.side_files"), "{d:?}");
    // One companion of 700 bytes beside each of the 48 generated frames.
    let companions = files_under(&r.emulated_data.parent().unwrap().join("calib"));
    assert_eq!(companions.len(), 48, "{companions:?}");
    assert!(
        companions
            .iter()
            .all(|c| std::fs::metadata(c).unwrap().len() == 700)
    );
    // The replay read the program's bytes: frames and companions, each once an epoch.
    let summary = json(&r.run_dir.join("summary.json"));
    let frames: u64 = sizes(&r.emulated_data, "npy").iter().sum();
    assert_eq!(
        summary["dlio_rs"]["bytes_read"].as_u64().unwrap(),
        2 * (frames + 48 * 700)
    );
    assert_scores("calib_pairs", &r);
}

#[test]
fn a_chunked_reader_with_a_metadata_file_is_characterised_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "chunked_reader");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "indexed_binary"),
        ("dataset.num_files_train", "4"),
        ("dataset.num_samples_per_file", "32"),
        ("dataset.record_length_bytes", "262144"),
        ("reader.batch_size", "8"),
        ("reader.read_threads", "0"),
        ("reader.read_type", "memory"),
        ("train.epochs", "2"),
        ("reader.sample_shuffle", "seed"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    let meta_size = std::fs::metadata(r.real_data.join("meta/metadata.json"))
        .unwrap()
        .len();
    assert_eq!(
        d["dataset.side_files"],
        format!("{{name: \"meta/metadata.json\", size_bytes: {meta_size}, every_steps: 4}}")
    );
    // The emulation wrote the side file and read it as often as the program did.
    let side = r.emulated_data.parent().unwrap().join("meta/metadata.json");
    assert_eq!(std::fs::metadata(&side).unwrap().len(), meta_size);
    let rows = r.characterization["side_files"].as_array().unwrap();
    assert_eq!(rows[0]["reads"], 8, "{rows:?}");
    assert_eq!(sizes(&r.emulated_data, "indexed_binary"), vec![8 << 20; 4]);
    // A 256 KiB checkpoint after every 8th step (small: the debug build's checkpoint
    // generation costs 13 ms per MiB): a flat model state of that size, as often.
    assert_eq!(d["workflow.checkpoint"], "True");
    assert_eq!(d["checkpoint.steps_between_checkpoints"], "8");
    assert_eq!(d["model.model_size_bytes"], "262144");
    let written: Vec<PathBuf> = files_under(&r.emulated_data.join("../../checkpoints"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pt"))
        .collect();
    assert_eq!(written.len(), 4, "two per epoch: {written:?}");
    for f in &written {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(
            (256 << 10..(256 << 10) + 4096).contains(&len),
            "{}: {len}",
            f.display()
        );
    }
    assert_scores("chunked_reader", &r);
}

#[test]
fn a_thread_pool_of_readers_is_characterised_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "thread_pool");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "npy"),
        ("dataset.num_files_train", "128"),
        ("reader.batch_size", "8"),
        ("reader.read_threads", "4"),
        ("reader.read_ahead", "False"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    let threads = r.characterization["reader_threads"].as_array().unwrap();
    assert_eq!(threads.len(), 4, "{threads:?}");
    assert_eq!(
        threads
            .iter()
            .map(|t| t["reads"].as_u64().unwrap())
            .sum::<u64>(),
        256
    );
    assert_eq!(sizes(&r.emulated_data, "npy"), vec![128 << 10; 128]);
    assert_scores("thread_pool", &r);

    // Deliberately wrong workloads fail the verdict, on the bounds they break.
    // The files have one dimension (`record_dims`), which sets their size.
    let dims: u64 = d["dataset.record_dims"]
        .trim_matches(['[', ']'])
        .parse()
        .unwrap();
    for (what, edit, breaks) in [
        (
            "samples of half the size",
            format!("++workload.dataset.record_dims=[{}]", dims / 2),
            "data bytes read",
        ),
        (
            "one reader for four",
            "++workload.reader.read_threads=1".to_string(),
            "loading time per step",
        ),
    ] {
        let f = replay_variant(dir.path(), &r, what, &edit);
        assert_eq!(f["verdict"], "fail", "{what}: {}", f["bounds"]);
        let failed: Vec<&str> = f["failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(failed.contains(&breaks), "{what}: failed {failed:?}");
        // --check turns the failing verdict into exit status 3.
        let run = dir.path().join(format!("run-{}", what.replace(' ', "-")));
        let status = dlio()
            .args(["fidelity", "--check"])
            .arg(dir.path().join("traces"))
            .arg(&run)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3), "{what}");
        // Scored with the program's own trace as its second run (no difference from itself),
        // the wrong workload fails all the same.
        let status = dlio()
            .args(["fidelity", "--check", "--repeat"])
            .arg(dir.path().join("traces"))
            .arg(dir.path().join("traces"))
            .arg(&run)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3), "{what} with --repeat");
    }
}

/// Worker processes that read ahead and hand batches over a pipe (a DataLoader's shape, without
/// torch): the steps are the training process's takes, not pauses in the workers' reads, so the
/// batch, the readers, their depth ahead and the compute come out as the program has them.
#[test]
fn worker_processes_that_read_ahead_are_stepped_by_the_process_that_takes_their_batches() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "worker_queue");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "npy"),
        ("dataset.num_files_train", "64"),
        ("reader.batch_size", "4"),
        ("reader.read_threads", "2"),
        ("reader.read_ahead", "True"),
        // Two batches in flight per worker: one being read and one finished (dlio's count).
        ("reader.prefetch_size", "2"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // 15 ms of sleep a step and the training process's own work (unpickling 128 KiB), which
    // takes longer on a busy machine. The mean pause between takes misses the steps taken
    // after the last read of an epoch (batches that came early), a few of 32.
    let compute = seconds(&d["train.computation_time"]);
    assert!((0.9 * 0.015..0.1).contains(&compute), "{compute}");
    // The training process asks for the next batch once it has unpickled the one it took
    // (128 KiB): a fraction of a millisecond on a quiet machine, more on a busy one, never a
    // step.
    let delay = seconds(&d["reader.request_delay"]);
    assert!((0.0001..compute).contains(&delay), "{delay}");
    // Batches are handed over 32 times; the steps found are those takes.
    assert_eq!(
        r.characterization["steps"], 32,
        "{}",
        r.characterization["notes"]
    );
    assert_eq!(sizes(&r.emulated_data, "npy"), vec![(32 << 10) + 128; 64]);
    // The pipes' reads and writes are in the traces under their own category, never as file
    // I/O (dftracer's tools and `dlio analyze` count POSIX and STDIO events as file I/O).
    let (mut ipc, mut posix_on_pipes) = (0, 0);
    for trace in files_under(&dir.path().join("traces")) {
        if trace.extension().is_none_or(|e| e != "pfw") {
            continue;
        }
        for line in std::fs::read_to_string(&trace).unwrap().lines() {
            if !line.contains("\"pipe:[") {
                continue;
            }
            if line.contains("\"cat\":\"IPC\"") {
                ipc += 1;
            } else {
                posix_on_pipes += 1;
            }
        }
    }
    assert!(ipc >= 64, "{ipc} pipe events");
    assert_eq!(posix_on_pipes, 0);
    // The replay's rhythm, on a quiet machine within 5% of the program's (bench/fidelity.sh),
    // moves by a quarter in a debug build beside a CPU hog: only what is read is held here.
    assert_structure("worker_queue", &r.fidelity);
    // The real side's steps are the takes, the replay's its compute spans: a step means the
    // same on both. A step counts when reads fall in it: on a busy machine (the suite beside
    // other work) a worker's reads can span two takes, so either side can find fewer than
    // half of its 32 (15 once on each).
    let (real, emulated) = (
        r.fidelity["real"]["steps"].as_u64().unwrap(),
        r.fidelity["emulated"]["steps"].as_u64().unwrap(),
    );
    // The replay's workers read ahead too: beside two busy loops its side found 15 of 32.
    assert!(
        real >= 8 && emulated >= 8,
        "{real} {emulated} {}",
        r.characterization["parameters"]
    );

    // Half the compute shortens the run: the verdict fails on the I/O phase.
    let f = replay_variant(
        dir.path(),
        &r,
        "half the compute",
        &format!("++workload.train.computation_time={}", compute / 2.0),
    );
    assert_eq!(f["verdict"], "fail", "{}", f["bounds"]);
    assert!(
        f["failed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b == "I/O phase (s)"),
        "{}",
        f["failed"]
    );
}

/// h5py rows of a contiguous dataset read in worker processes that keep it open: each read is
/// HDF5's 64 KiB sieve window from a row on, and the training process (which read the file's
/// metadata before the workers started) takes the batches. A row is the sample, not the
/// window, and the replay reads windows the same way.
#[test]
fn rows_read_through_an_hdf5_sieve_are_rows_and_the_replay_reads_windows() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "h5_rows_workers");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "hdf5"),
        ("dataset.num_files_train", "1"),
        ("dataset.num_samples_per_file", "384"),
        ("dataset.record_length_bytes", "16384"),
        ("dataset.hdf5.sieve_bytes", "65536"),
        ("semantics", "upstream"),
        ("reader.batch_size", "8"),
        ("reader.read_threads", "2"),
        ("reader.read_ahead", "True"),
        ("reader.prefetch_size", "2"),
        ("reader.sample_shuffle", "seed"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // 2 x 48 takes, though the training process read the file's metadata first.
    assert_eq!(
        r.characterization["steps"], 96,
        "{}",
        r.characterization["notes"]
    );
    // Each read is a window of 4 rows; the replay reads as many bytes in as many calls, within
    // the tool's bounds (a row inside the last window costs no read, about 1 in 130 here in a
    // random order, so the two runs' counts differ by a few reads).
    let windows = r.characterization["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "dataset.hdf5.sieve_bytes")
        .unwrap()["evidence"]
        .to_string();
    assert!(windows.contains("4 rows of 16384 bytes"), "{windows}");
    assert_structure("h5_rows_workers", &r.fidelity);
}

/// Objects downloaded by ranged requests on a pool of threads, each range an opening of its
/// own (open, one read, close): a sample is the object, read in requests of the range's size,
/// not a window of it (each opening reads under half its file, as a random crop's does).
#[test]
fn objects_read_by_ranged_requests_are_whole_files_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "ranged_gets");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.num_files_train", "12"),
        ("dataset.num_samples_per_file", "1"),
        ("reader.transfer_size", "262144"),
        ("reader.batch_size", "2"),
        ("reader.read_threads", "4"),
        ("reader.read_ahead", "False"),
        ("train.epochs", "3"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // The files' sizes, not a window's: 300 to 1,200 KB.
    let mean: u64 = d["dataset.record_length_bytes"].parse().unwrap();
    assert!((500_000..=1_000_000).contains(&mean), "{mean}");
    assert!(
        !d.contains_key("reader.transfer_size_distribution"),
        "{d:?}"
    );
    assert_structure("ranged_gets", &r.fidelity);
}

/// Class folders read one after another in each epoch (a file list in class order): the data
/// set is the four of them, not the first with the other three taken for an evaluation split;
/// the `val/` folder beside them stays the split.
#[test]
fn class_folders_read_in_turn_are_one_data_set_and_val_stays_the_split() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "class_folders_in_turn");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.num_files_train", "40"),
        ("dataset.num_subfolders_train", "4"),
        ("dataset.num_samples_per_file", "1"),
        ("workflow.evaluation", "True"),
        ("dataset.num_files_eval", "4"),
        ("reader.batch_size", "4"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert_structure("class_folders_in_turn", &r.fidelity);
}

/// Batches of scattered rows from a compressed, chunked HDF5 dataset: each batch reads every
/// chunk it touches, whole, at the chunk's stored size, and the next batches read them again.
/// A sample is a chunk (not a read of the most frequent size, which held one read in 40), sized
/// by the reads, and the replay moves the bytes the program did.
#[test]
fn compressed_chunks_read_again_by_every_batch_are_the_samples() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "h5_compressed_batches");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "indexed_binary"),
        ("dataset.num_files_train", "1"),
        ("dataset.record_length_bytes_per", "sample"),
        ("reader.read_threads", "0"),
        ("reader.read_type", "memory"),
        ("reader.sample_shuffle", "seed"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // 80 chunks (and a node of the chunk index, read again when the cache dropped it).
    let chunks: u64 = d["dataset.num_samples_per_file"].parse().unwrap();
    assert!((80..=82).contains(&chunks), "{chunks}");
    // 32 rows of 1280 fall in about 26 of the 80 chunks.
    let batch: u64 = d["reader.batch_size"].parse().unwrap();
    assert!((22..=30).contains(&batch), "{batch}");
    // Stored sizes of 15-19 KB, not a read of the most frequent size.
    let mean: u64 = d["dataset.record_length_bytes"].parse().unwrap();
    assert!((14_000..=20_000).contains(&mean), "{mean}");
    // About as many steps as the program's 120 (a step's reads split in two by a busy
    // machine's preemption adds one), in epochs of the data set's whole batches.
    let epochs: u64 = d["train.epochs"].parse().unwrap();
    let per_epoch = chunks / batch;
    assert!(
        (114..=132).contains(&(epochs * per_epoch)),
        "{epochs} epochs of {per_epoch} steps"
    );
    assert_structure("h5_compressed_batches", &r.fidelity);
}

/// A program that loads its whole data set up front (h5py `ds[...]` of every dataset) and then
/// trains from memory reads each file once: one epoch of whole files, not slices of 512 bytes
/// (HDF5's metadata reads were the most frequent size) over many steps.
#[test]
fn a_data_set_loaded_whole_before_training_is_one_pass_of_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "h5_preload");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "hdf5"),
        ("dataset.num_files_train", "2"),
        ("dataset.num_samples_per_file", "1"),
        ("train.epochs", "1"),
        ("reader.read_threads", "0"),
        // One step reads the whole load, as the program read it before its first step.
        ("reader.batch_size", "2"),
        // It kept what it read: every large read landed in memory it had not touched.
        ("reader.fresh_read_share", "1.00"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    let notes = r.characterization["notes"].to_string();
    assert!(notes.contains("read once, whole"), "{notes}");
    // h5py's requests of each file (its superblock, object headers, the dataset's one read),
    // replayed as they were made, without the bytes it left unread.
    let patterns = &d["reader.sample_request_patterns"];
    assert!(
        patterns.starts_with(
            "{weight: 2, read_rest: False, requests: [{from: start, offset: 0, size: 8"
        ),
        "{patterns}"
    );
    // The training from memory after the load (64 steps of 10 ms) is the step's compute.
    let compute = seconds(&d["train.computation_time"]);
    assert!(compute >= 0.6, "{compute}");
    // What was read matches at the tool's bounds; the program has no steps, so the step
    // times do not apply.
    assert_structure("h5_preload", &r.fidelity);
    for b in r.fidelity["bounds"].as_array().unwrap() {
        let steps = [
            "I/O time per step, mean (s)",
            "gaps between steps",
            "loading time per step",
        ];
        if steps.contains(&b["name"].as_str().unwrap()) {
            assert_eq!(
                (&b["applies"], &b["pass"]),
                (&false.into(), &true.into()),
                "{b}"
            );
        }
    }
}

/// A program that reads its data through memory maps moves it by page faults, which no I/O
/// trace records: characterize says so, and `dlio fidelity` cannot pass such a program.
#[test]
fn data_read_through_memory_maps_is_said_to_be_unseen_and_never_passes() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "npy_memmap");
    let notes = r.characterization["notes"].to_string();
    assert!(
        notes.contains("4 data files were mapped into memory") && notes.contains("page faults"),
        "{notes}"
    );
    assert_eq!(r.fidelity["verdict"], "fail", "{}", r.fidelity);
    assert_eq!(r.fidelity["real"]["mapped_bytes"], 4 * (256 * 16384 + 128));
    let failed = r.fidelity["failed"].to_string();
    assert!(failed.contains("memory maps"), "{failed}");
}

/// A scan of every file's header before training (a sampler that buckets files by shape) is
/// `reader.header_scan_bytes`, not an epoch: the replay reads the same bytes.
#[test]
fn a_scan_of_the_headers_before_training_is_replayed_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "header_scan");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.num_files_train", "48"),
        ("reader.header_scan_bytes", "128"),
        ("reader.batch_size", "4"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert_structure("header_scan", &r.fidelity);
}

/// Replays `r`'s workload with one override (`what` names the run) and scores it.
/// Every byte the files under `dir` with extension `ext` hold.
fn total_bytes(dir: &Path, ext: &str) -> u64 {
    sizes(dir, ext).iter().sum()
}

/// Records of their own sizes read one by one through an index: each read is a record, and
/// the emulated files' records take the measured sizes.
#[test]
fn records_read_through_an_index_are_samples_of_their_own_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "indexed_records_pread");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "indexed_binary"),
        ("dataset.num_files_train", "4"),
        ("dataset.num_samples_per_file", "64"),
        ("dataset.record_length_bytes_per", "sample"),
        ("reader.batch_size", "8"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    let (real, emulated) = (
        total_bytes(&r.real_data, "dat") as f64,
        total_bytes(&r.emulated_data, "indexed_binary") as f64,
    );
    assert!(
        (emulated / real - 1.0).abs() < 0.02,
        "{emulated} for {real}"
    );
    assert_scores("indexed_records_pread", &r);
}

/// Windows read at random offsets of large files (random crops) are samples of their own:
/// the files keep their size, each holds as many windows as fit, and the steps the program
/// took cap the epoch, so that the replay reads as many windows as the program did, not every
/// file whole at each sample.
#[test]
fn random_windows_of_large_files_are_samples_and_the_steps_cap_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "random_windows");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.num_files_train", "12"),
        ("dataset.record_length_bytes", "16384"),
        ("reader.batch_size", "6"),
        ("reader.sample_shuffle", "seed"),
        ("train.epochs", "1"),
        ("train.total_training_steps", "30"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // As many windows as fit in the median file (192 to 416 KiB).
    let per_file: u64 = d["dataset.num_samples_per_file"].parse().unwrap();
    assert!((12..=26).contains(&per_file), "{per_file}");
    assert_scores("random_windows", &r);
}

/// Shards that open with a table of their samples' offsets, each sample looked up (8 bytes of
/// the table) before it is read: the lookup is a header read at each opening, the window the
/// sample, one read each, rather than 512 requests of sizes drawn from both.
#[test]
fn a_lookup_in_an_offset_table_before_each_sample_is_a_header_read() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "offset_table_lookup");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "indexed_binary"),
        ("dataset.num_files_train", "4"),
        ("dataset.header_read_bytes", "8"),
        ("dataset.record_length_bytes_per", "sample"),
        ("reader.batch_size", "8"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert!(
        !d.contains_key("reader.transfer_size_distribution"),
        "{d:?}"
    );
    // Samples of 2 to 12 KiB: their mean, 7 KiB, give or take a bin.
    let record: u64 = d["dataset.record_length_bytes"].parse().unwrap();
    assert!((6_000..=8_400).contains(&record), "{record}");
    assert_scores("offset_table_lookup", &r);
}

/// Utterances of Kaldi archives read through Python's buffered file objects, an opening an
/// utterance (its header, then its matrix): the requests are the stream's fills and whole
/// blocks, so the replay reads through the same stream, utterances of their own sizes.
#[test]
fn samples_read_through_a_buffered_stream_are_replayed_through_one() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "kaldi_ark_scp_frames");
    let d = &r.derived;
    // Python's buffer is the file system's block size.
    let ark = r.real_data.join("train/raw_feats.0.ark");
    let block = std::fs::metadata(&ark).unwrap().blksize();
    assert_eq!(
        d.get("reader.read_buffer").map(String::as_str),
        Some(format!("{{size: {block}, header_read: True, app_read_size: 0}}").as_str()),
        "{d:?}"
    );
    assert_eq!(d["dataset.record_length_bytes_per"], "sample", "{d:?}");
    // The matrices' mean size is 45,549 bytes, and a 15-byte header each.
    let record: u64 = d["dataset.record_length_bytes"].parse().unwrap();
    assert!((44_000..=47_000).contains(&record), "{record}");
    // The dev split's 160 utterances (10 steps of 16) are smaller than training's: each is a
    // record of its own size, so that the replay's passes read the program's bytes (in
    // training samples they read 5% more, a run's random draws moving it further).
    let eval: u64 = d["dataset.record_length_bytes_eval"].parse().unwrap();
    assert!((41_000..=45_000).contains(&eval), "{eval}");
    assert_eq!(d["reader.batch_size_eval"], "16", "{d:?}");
    let outside = r.fidelity["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "bytes read outside the data set")
        .unwrap();
    let error = outside["error"].as_f64().unwrap();
    assert!(error <= 0.03, "{outside}");
    assert_scores("kaldi_ark_scp_frames", &r);
}

/// The members of a stored zip read through one ZipFile a thread (each member a seek, its
/// local header, its data through the buffered stream): each run of reads is a record of its
/// own size and place, and `val.zip` beside `train.zip` is not training data. The batch (32)
/// is not asserted: with both cores busy, the pool's steps run together and only the epochs'
/// ends are found (a known miss, bench/RESULTS.md).
#[test]
fn records_read_one_run_each_through_a_buffered_stream_are_the_samples() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "zip_stored_threads");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "indexed_binary"),
        ("dataset.num_files_train", "1"),
        ("dataset.record_length_bytes_per", "sample"),
        ("train.epochs", "3"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert!(
        d["reader.read_buffer"].contains("header_read: True"),
        "{}",
        d["reader.read_buffer"]
    );
    // 1500 members of 35,698 bytes on average (uniform 72..144 px squares, 128-byte headers).
    let per_file: u64 = d["dataset.num_samples_per_file"].parse().unwrap();
    assert!((1400..=1510).contains(&per_file), "{per_file}");
    let record: u64 = d["dataset.record_length_bytes"].parse().unwrap();
    assert!((34_000..=37_500).contains(&record), "{record}");
    assert_structure("zip_stored_threads", &r.fidelity);
}

/// Tar shards streamed through gzip by two worker processes (tarfile's "r|gz"): each 10 KiB
/// read is decompressed and parsed before the next is asked for, so the replay works as long
/// between a shard's requests, and its shards take as long to read.
#[test]
fn a_stream_decoded_as_it_is_read_works_between_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "targz_shards_procpool");
    let d = &r.derived;
    assert_eq!(d["dataset.num_samples_per_file"], "1", "{d:?}");
    assert!(
        d["reader.transfer_size_distribution"].starts_with("{size: 10240, "),
        "{d:?}"
    );
    // Inflating 10 KiB of gzip and parsing tar headers takes tens of microseconds or more; a
    // busy machine only lengthens it.
    let work = seconds(&d["reader.request_work_time"]);
    assert!(work >= 20e-6, "{work}");
    // The validation shard (1.04 MB a pass) is an evaluation pass of one sample of its own
    // size, where a whole training shard (1.56 MB) would read half as much again outside the
    // data set.
    assert_eq!(d["dataset.num_files_eval"], "1", "{d:?}");
    assert_eq!(d["reader.batch_size_eval"], "1", "{d:?}");
    let eval_sample: f64 = d["dataset.record_length_bytes_eval"].parse().unwrap();
    assert!(
        (1.0e6..1.08e6).contains(&eval_sample),
        "{eval_sample}: {d:?}"
    );
    let outside = r.fidelity["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "bytes read outside the data set")
        .unwrap();
    let ratio = outside["emulated"].as_f64().unwrap() / outside["real"].as_f64().unwrap();
    assert!((0.98..=1.02).contains(&ratio), "{outside}");
    // The stream's work between requests (inflating each 10 KiB) is replayed busy, and a
    // machine that was busy while the replay ran stretches it: the I/O phase is allowed 0.40
    // where the others are 0.25 (a debug build beside two busy loops once went past 0.25).
    let mut known = vec!["gaps between steps"];
    if r.core_share >= SATURATED_CORE_SHARE {
        known.push("I/O phase (s)");
        assert_bounds_within(&r, &[("I/O phase (s)", 0.40)]);
    }
    // The program pauses between steps only where it evaluates or ends an epoch: two or
    // three gaps, whose KS distance is 0, 0.5 or 1 (a replay 9% slower between them on a
    // busy machine gave 1). Their medians are compared instead, within a quarter.
    let gaps = r.fidelity["bounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "gaps between steps")
        .unwrap();
    let (real, emulated) = (
        gaps["real"].as_f64().unwrap(),
        gaps["emulated"].as_f64().unwrap(),
    );
    assert!(
        real > 0.0 && (emulated / real - 1.0).abs() <= 0.25,
        "median gaps between steps: {gaps}"
    );
    assert_scores_but("targz_shards_procpool", &r, &known);
}

/// Random one-second crops of wav files (wave.open reads the header through Python's
/// buffer, then a seek to the crop and its blocks and a fill): each opening's header read is
/// replayed before its window, and the window through the same stream.
#[test]
fn crops_after_a_header_read_replay_the_header_then_the_window() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "wav_random_crop");
    let d = &r.derived;
    let wav = files_under(&r.real_data)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "wav"))
        .unwrap();
    let block = std::fs::metadata(&wav).unwrap().blksize();
    assert_eq!(d["dataset.header_read_bytes"], block.to_string(), "{d:?}");
    assert_eq!(
        d["reader.read_buffer"],
        format!("{{size: {block}, header_read: False, app_read_size: 0}}")
    );
    assert_scores("wav_random_crop", &r);
}

/// Files drawn with replacement (a weighted sampler balancing three classes): samples come
/// again within an epoch, so the epoch is the draws, not the files seen, and the data set is
/// larger than the files read.
#[test]
fn draws_with_replacement_are_replayed_as_draws_from_a_larger_data_set() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "weighted_draws_npy");
    let d = &r.derived;
    for (key, value) in [
        ("reader.sample_replacement", "True"),
        ("reader.sample_shuffle", "seed"),
        ("reader.batch_size", "8"),
        ("train.epochs", "2"),
        ("train.total_training_steps", "12"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // 95 distinct files of 120 for 192 draws: uniform draws find that many in about 118.
    let files: u64 = d["dataset.num_files_train"].parse().unwrap();
    assert!((100..=140).contains(&files), "{files}");
    assert_scores("weighted_draws_npy", &r);
}

/// Parquet files read whole by pandas (pyarrow reads the footer on the calling thread and the
/// whole data region in one request on its own): each read is three row groups fetched
/// together, by one reader, twice over.
#[test]
fn whole_parquet_files_are_their_row_groups_fetched_together() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "parquet_full_files_pandas");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "parquet"),
        ("dataset.num_files_train", "6"),
        ("dataset.num_samples_per_file", "1536"),
        ("reader.read_threads", "1"),
        ("reader.batch_size", "1536"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert!(
        d["dataset.parquet"].contains("coalesce_row_groups: 3"),
        "{}",
        d["dataset.parquet"]
    );
    assert_structure("parquet_full_files_pandas", &r.fidelity);
}

/// An evaluation split read between epochs is an evaluation pass, not side files; the
/// checkpoints written between steps stay checkpoints.
#[test]
fn an_evaluation_split_read_between_epochs_is_an_evaluation_pass() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "npy_shards_ckpt_eval");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.num_files_train", "16"),
        ("workflow.evaluation", "True"),
        ("dataset.num_files_eval", "4"),
        ("evaluation.epochs_between_evals", "1"),
        ("workflow.checkpoint", "True"),
        ("train.epochs", "3"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert!(!d.contains_key("dataset.side_files"), "{d:?}");
    assert_scores("npy_shards_ckpt_eval", &r);
}

/// An evaluation every 10 training steps, counted over the run, with 20 steps an epoch:
/// passes inside epochs as well as at their ends are one evaluation every 10 steps, not side
/// files and not an evaluation per epoch.
#[test]
fn evaluations_every_few_steps_are_replayed_between_those_steps() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "eval_every_n_steps");
    let d = &r.derived;
    for (key, value) in [
        ("workflow.evaluation", "True"),
        ("dataset.num_files_eval", "48"),
        ("reader.batch_size_eval", "16"),
        ("evaluation.steps_between_evals", "10"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    assert!(!d.contains_key("dataset.side_files"), "{d:?}");
    assert!(!d.contains_key("evaluation.epochs_between_evals"), "{d:?}");
    assert_scores("eval_every_n_steps", &r);
}

/// An evaluation every 10 steps that reads one window of each of 10 clips, where the clips
/// hold 17 windows each: each pass is one step of 10 (`evaluation.steps_per_eval`), not the
/// whole split, and the replay reads the program's bytes from the training folder.
#[test]
fn an_evaluation_of_a_few_windows_reads_only_those_steps() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "video_tail_index_threadpool");
    let d = &r.derived;
    for (key, value) in [
        ("workflow.evaluation", "True"),
        ("dataset.num_files_eval", "10"),
        ("reader.batch_size_eval", "10"),
        ("evaluation.steps_per_eval", "1"),
        ("evaluation.steps_between_evals", "10"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // The bytes and the files of the training folder: before the cap, the passes read every
    // window of the split, twice the program's bytes.
    assert_bounds_within(&r, &[("data bytes read", 0.02), ("files read", 0.05)]);
}

/// A producer thread that fills a queue of two shards while the loop trains: its first burst
/// holds four shards, then one a step. It reads ahead (prefetch 2: the queue's two, besides
/// the shard taken and the one waiting for room), so the replay's last read comes when the
/// program's did.
#[test]
fn a_producer_thread_filling_a_queue_reads_ahead_by_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "shard_producer_queue_readinto");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.num_files_train", "4"),
        ("reader.batch_size", "1"),
        ("reader.read_threads", "1"),
        ("reader.read_ahead", "True"),
        ("reader.prefetch_size", "2"),
        ("train.epochs", "3"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    // Read the shards at their steps instead, its I/O phase was 39% long. (Its gaps stay
    // apart: dlio's loader does not read ahead across an epoch's end, the producer does.)
    let mut limits = vec![("data bytes read", 0.02), ("read calls", 0.10)];
    if r.core_share >= SATURATED_CORE_SHARE {
        limits.push(("I/O phase (s)", 0.25));
    }
    assert_bounds_within(&r, &limits);
}

/// Each named bound of the replay's fidelity within its limit (for tests that hold some
/// bounds only: a class whose other bounds the replay does not meet yet, said where used).
fn assert_bounds_within(r: &Replayed, limits: &[(&str, f64)]) {
    let bounds = r.fidelity["bounds"].as_array().unwrap();
    for &(bound, limit) in limits {
        let b = bounds.iter().find(|b| b["name"] == bound).unwrap();
        let error = b["error"].as_f64().unwrap();
        assert!(error <= limit, "{bound}: {error}\n{}", r.fidelity["bounds"]);
    }
}

/// Parquet files read by row group with column selection: the files' own columns, those whose
/// chunks the reads cover marked read, the footer read as pyarrow reads it.
#[test]
fn parquet_row_groups_with_column_selection_are_replayed_by_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_characterize_replay(dir.path(), "parquet_rowgroups");
    let d = &r.derived;
    for (key, value) in [
        ("dataset.format", "parquet"),
        ("dataset.num_files_train", "3"),
        ("dataset.num_samples_per_file", "2048"),
        ("train.epochs", "2"),
    ] {
        assert_eq!(d.get(key).map(String::as_str), Some(value), "{key}: {d:?}");
    }
    let parquet = &d["dataset.parquet"];
    for part in [
        "row_group_size: 256",
        "footer_read_size: 65536",
        "metadata_cache: True",
        "name: \"id\", dtype: int64, size: 1, read: False",
        "name: \"label\", dtype: int32, size: 1, read: True",
        "name: \"text\", dtype: string, size: 1, read: False",
    ] {
        assert!(parquet.contains(part), "{part} not in {parquet}");
    }
    // A row group a step: 256 rows.
    assert_eq!(d["reader.batch_size"], "256");
    assert_scores("parquet_rowgroups", &r);
}

fn replay_variant(dir: &Path, r: &Replayed, what: &str, edit: &str) -> Value {
    let _one_at_a_time = TIMED.lock().unwrap_or_else(|p| p.into_inner());
    let tag = what.replace(' ', "-");
    let run = dir.join(format!("run-{tag}"));
    let emulated = dir.join(format!("emulated-{tag}"));
    run_ok(
        dlio()
            .arg("run")
            .arg(format!(
                "workload={}",
                dir.join("workload/characterized.yaml").display()
            ))
            .arg(format!(
                "++workload.dataset.data_folder={}",
                emulated.display()
            ))
            .arg(edit)
            .arg(format!("hydra.run.dir={}", run.display()))
            .arg(format!(
                "++workload.checkpoint.checkpoint_folder={}",
                dir.join("checkpoints").display()
            ))
            .arg("--trace"),
    );
    assert!(r.real_data.is_dir());
    run_ok(dlio().arg("fidelity").arg(dir.join("traces")).arg(&run));
    json(&run.join("fidelity.json"))
}

#[test]
fn forked_children_get_their_own_traces_and_the_exit_code_is_the_programs() {
    require_interposer();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payload.bin");
    std::fs::write(&file, vec![7u8; 10_000]).unwrap();
    let traces = dir.path().join("t");
    let script = format!(
        "import os, sys\n\
         pid = os.fork()\n\
         if pid == 0:\n    open({0:?}, 'rb').read(); os._exit(0)\n\
         os.waitpid(pid, 0)\n\
         open({0:?}, 'rb').read(123)\n\
         sys.exit(3)\n",
        file.display().to_string()
    );
    let out = dlio()
        .args(["trace", "--out"])
        .arg(&traces)
        .args(["--", "python3", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&traces.join("dlio-trace.json"))["exit_code"], 3);
    // One trace per process that read the payload, each with its own read of it.
    let mut readers = Vec::new();
    for p in files_under(&traces) {
        let text = std::fs::read_to_string(&p).unwrap();
        if p.extension().is_some_and(|e| e == "pfw") && text.contains("payload.bin") {
            let reads: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("\"name\":\"read\"") && l.contains("payload.bin"))
                .collect();
            readers.push(reads.iter().any(|l| l.contains("\"ret\":10000")));
        }
    }
    readers.sort();
    // The child read all 10,000 bytes (os._exit still wrote its trace); the parent 123.
    assert_eq!(readers, vec![false, true]);
    // A folder that already holds traces is refused, and an unknown program exits 127.
    let refused = run_err(
        dlio()
            .args(["trace", "--out"])
            .arg(&traces)
            .args(["--", "true"]),
    );
    assert!(refused.contains("already holds"), "{refused}");
    let missing = dlio()
        .args(["trace", "--out"])
        .arg(dir.path().join("u"))
        .args(["--", "no-such-program-here"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(127));
}

#[test]
fn bad_traces_are_refused_with_what_is_wrong() {
    require_interposer();
    let dir = tempfile::tempdir().unwrap();
    // A program that reads nothing of its own.
    let idle = dir.path().join("idle");
    run_ok(
        dlio()
            .args(["trace", "--out"])
            .arg(&idle)
            .args(["--", "python3", "-c", "pass"]),
    );
    let err = run_err(dlio().arg("characterize").arg(&idle));
    assert!(err.contains("read no file outside"), "{err}");

    // A trace cut short in the middle of a line.
    let payload = dir.path().join("d");
    std::fs::create_dir_all(&payload).unwrap();
    for i in 0..3 {
        std::fs::write(payload.join(format!("f{i}.bin")), vec![1u8; 4096]).unwrap();
    }
    let good = dir.path().join("good");
    let reader = format!(
        "import os\nfor n in sorted(os.listdir({0:?})):\n    open(os.path.join({0:?}, n), 'rb').read()\n",
        payload.display().to_string()
    );
    run_ok(
        dlio()
            .args(["trace", "--out"])
            .arg(&good)
            .args(["--", "python3", "-c", &reader]),
    );
    let cut = dir.path().join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    let trace = files_under(&good)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "pfw"))
        .unwrap();
    let text = std::fs::read(&trace).unwrap();
    std::fs::write(cut.join("trace-x-1.pfw"), &text[..text.len() * 2 / 3]).unwrap();
    let err = run_err(dlio().arg("characterize").arg(&cut));
    assert!(
        err.contains("is not a trace event") && err.contains("cut short"),
        "{err}"
    );

    // Request patterns where no whole-file read happens are refused, not ignored.
    let yaml = dir.path().join("sliced.yaml");
    std::fs::write(
        &yaml,
        format!(
            "model:\n  name: sliced\nframework: pytorch\nworkflow:\n  generate_data: True\n  \
             train: True\ndataset:\n  data_folder: {}\n  format: indexed_binary\n  \
             num_files_train: 2\n  num_samples_per_file: 4\n  record_length_bytes: 4096\n\
             reader:\n  data_loader: pytorch\n  batch_size: 2\n  sample_requests:\n    - \
             {{from: start, offset: 0, size: 512}}\ntrain:\n  epochs: 1\n",
            dir.path().join("sliced-data").display()
        ),
    )
    .unwrap();
    let err = run_err(
        dlio()
            .arg("run")
            .arg(format!("workload={}", yaml.display()))
            .arg(format!(
                "hydra.run.dir={}",
                dir.path().join("sliced-run").display()
            )),
    );
    assert!(
        err.contains("reader.sample_requests") && err.contains("indexed_binary"),
        "{err}"
    );

    // Only the traces of killed processes.
    let partial = dir.path().join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("trace-x-2.pfw.partial"), b"[\n").unwrap();
    let err = run_err(dlio().arg("characterize").arg(&partial));
    assert!(err.contains("incomplete traces"), "{err}");
}

#[test]
fn a_child_ended_by_sigterm_still_leaves_a_complete_trace() {
    require_interposer();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payload.bin");
    std::fs::write(&file, vec![3u8; 65536]).unwrap();
    // As multiprocessing ends its pools' workers: SIGTERM to an idle child, which dies of it.
    let script = format!(
        "import os, signal, time\n\
         pid = os.fork()\n\
         if pid == 0:\n    open({0:?}, 'rb').read(); time.sleep(30)\n\
         time.sleep(0.5)\n\
         os.kill(pid, signal.SIGTERM)\n\
         _, status = os.waitpid(pid, 0)\n\
         assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status\n",
        file.display().to_string()
    );
    let traces = dir.path().join("t");
    run_ok(
        dlio()
            .args(["trace", "--out"])
            .arg(&traces)
            .args(["--", "python3", "-c", &script]),
    );
    let mut child_reads = 0;
    for p in files_under(&traces) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".partial"), "an incomplete trace: {name}");
        let text = std::fs::read_to_string(&p).unwrap();
        child_reads += text
            .lines()
            .filter(|l| l.contains("payload.bin") && l.contains("\"ret\":65536"))
            .count();
    }
    assert_eq!(child_reads, 1, "the child's read is in its trace");
}

/// Where a program's reads land is in the trace (`buf_page_offset`, and `untouched_pages`:
/// the destination's pages the process had not touched), as the program itself sees it, and
/// the workload places the replay's buffers where most of the bytes went.
#[test]
fn where_reads_land_is_traced_and_the_replay_places_its_buffers_there() {
    require_interposer();
    let dir = tempfile::tempdir().unwrap();
    let (data, traces) = (dir.path().join("data"), dir.path().join("traces"));
    let made = python()
        .arg(program("bytearray_readinto"))
        .arg(&data)
        .arg("--make")
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let out = run_ok(
        dlio()
            .args(["trace", "--out"])
            .arg(&traces)
            .arg("--")
            .arg("python3")
            .arg(program("bytearray_readinto"))
            .arg(&data),
    );
    // The program's own word on where its bytearray starts (16 with glibc's malloc).
    let said: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("the program prints its bytearray's place");
    let place = said["bytearray_page_offset"].as_i64().unwrap();

    let mut reads = Vec::new();
    for file in files_under(&traces) {
        if file.extension().is_none_or(|e| e != "pfw") {
            continue;
        }
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let Ok(event) = serde_json::from_str::<Value>(line.trim_end_matches(',')) else {
                continue;
            };
            let args = &event["args"];
            // The data files and the side file beside them (DATA.side).
            let on_data = args["fname"]
                .as_str()
                .is_some_and(|f| f.starts_with(data.to_str().unwrap()));
            if event["name"] == "read" && on_data && args["ret"].as_i64() > Some(0) {
                reads.push((
                    args["ret"].as_i64().unwrap(),
                    args["buf_page_offset"].as_i64(),
                    args["untouched_pages"].as_i64(),
                ));
            }
        }
    }
    // 2 epochs of 4 files in 4 reads into the bytearray, then the side file into a new map.
    let into_bytearray: Vec<_> = reads.iter().filter(|r| r.0 == 256 << 10).collect();
    assert_eq!(into_bytearray.len(), 32, "{reads:?}");
    // Every read lands where the program says; after the first (into pages CPython may have
    // left untouched when it allocated the bytearray), none of its pages is untouched.
    assert!(
        into_bytearray.iter().all(|r| r.1 == Some(place))
            && into_bytearray[1..].iter().all(|r| r.2 == Some(0))
            && into_bytearray[0].2.is_some(),
        "a reused bytearray {place} bytes past a page: {reads:?}"
    );
    assert_eq!(
        reads.iter().filter(|r| r.0 == 64 << 10).collect::<Vec<_>>(),
        [&(64 << 10, Some(0), Some(16))],
        "a new map's 16 pages, none touched: {reads:?}"
    );

    let workload = dir.path().join("workload/characterized.yaml");
    run_ok(
        dlio()
            .arg("characterize")
            .arg(&traces)
            .arg("--out")
            .arg(&workload),
    );
    let derived = characterized(&json(&dir.path().join("workload/characterize.json")));
    assert_eq!(
        derived.get("reader.buffer_page_offset"),
        Some(&place.to_string()),
        "{derived:?}"
    );
}
