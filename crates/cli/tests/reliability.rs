//! The hostile-test reproducers of the reliability issue, each run through the binary: a bad
//! input or a failure gives a clear error naming what is wrong (or the right behaviour), never
//! a panic, a signal, a hang or a silent default.

mod common;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::{dlio, json};

/// The tiny flat config of the issue (`$T`): 4 npz files of 2 samples of 4 KiB, batch 1, one
/// epoch, no compute, no evaluation.
fn tiny(data: &Path, out: &Path) -> Command {
    let mut cmd = dlio();
    cmd.arg("run").arg("workload=default").args([
        format!("++workload.dataset.data_folder={}", data.display()),
        "++workload.dataset.num_files_train=4".into(),
        "++workload.dataset.num_files_eval=0".into(),
        "++workload.dataset.num_samples_per_file=2".into(),
        "++workload.dataset.record_length_bytes=4096".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.reader.batch_size=1".into(),
        "++workload.train.epochs=1".into(),
        "++workload.train.computation_time=0".into(),
        "++workload.workflow.evaluation=False".into(),
        format!("++workload.output.folder={}", out.display()),
    ]);
    cmd
}

fn generate(data: &Path, out: &Path, extra: &[&str]) {
    let output = tiny(data, out)
        .args([
            "++workload.workflow.generate_data=True",
            "++workload.workflow.train=False",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Runs `cmd`, which must exit with status 1 (an error, not a panic or a signal); returns
/// its stderr.
fn exit_1(mut cmd: impl std::borrow::BorrowMut<Command>) -> String {
    let cmd = cmd.borrow_mut();
    let output = cmd.output().unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{cmd:?}: {text}");
    text
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Waits for `child` at most `limit`; kills it and fails the test if it is still running.
fn wait_within(child: &mut Background, limit: Duration) -> (ExitStatus, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.child.try_wait().unwrap() {
            return (status, started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.child.kill();
            panic!("dlio was still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// dlio started in the background; its stderr goes to an unnamed file, so a chatty run can
/// never block on a full pipe, and is read back by [`Background::stderr`].
struct Background {
    child: Child,
    log: std::fs::File,
}

impl Background {
    fn stderr(&mut self) -> String {
        use std::io::{Read, Seek};
        let mut text = String::new();
        self.log.rewind().unwrap();
        self.log.read_to_string(&mut text).unwrap();
        text
    }
}

trait SpawnQuiet {
    fn spawn_quiet(&mut self) -> Background;
}

impl SpawnQuiet for Command {
    fn spawn_quiet(&mut self) -> Background {
        let log = tempfile::tempfile().unwrap();
        let child = self
            .stderr(log.try_clone().unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Background { child, log }
    }
}

fn interrupt(child: &Background) {
    let status = Command::new("kill")
        .args(["-INT", &child.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn train_file(data: &Path, name: &str) -> std::path::PathBuf {
    data.join("train").join(name)
}

#[test]
fn a_ranks_read_error_is_the_error_reported_with_exit_1_not_an_interruption() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    let bad = train_file(&data, "img_0_of_4.npz");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&bad)
        .unwrap()
        .set_len(10)
        .unwrap();
    for ranks in ["1", "2", "4"] {
        let text = exit_1(tiny(&data, &out).args(["--semantics", "upstream", "--ranks", ranks]));
        assert!(text.contains("img_0_of_4.npz"), "--ranks {ranks}: {text}");
        assert!(!text.contains("interrupted"), "--ranks {ranks}: {text}");
    }
    // The fork's readers would read the 10 bytes without looking: the run refuses the
    // truncated file before it starts, naming it.
    let text = exit_1(tiny(&data, &out).args(["--ranks", "2"]));
    assert!(
        text.contains("img_0_of_4.npz is 10 bytes, fewer than the 8192 bytes"),
        "{text}"
    );
}

#[test]
fn a_failing_rank_stops_its_peers_asleep_in_compute() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    std::fs::write(train_file(&data, "img_3_of_4.npz"), b"junk").unwrap();
    let mut child = tiny(&data, &out)
        .args([
            "--semantics",
            "upstream",
            "--ranks",
            "4",
            "++workload.train.computation_time=20",
        ])
        .spawn_quiet();
    let (status, took) = wait_within(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(1));
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_fifo_in_place_of_a_data_file_or_an_index_is_an_error_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    let fifo = train_file(&data, "img_1_of_4.npz");
    std::fs::remove_file(&fifo).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for semantics in ["mlperf", "upstream"] {
        let mut child = tiny(&data, &out)
            .args(["--semantics", semantics])
            .spawn_quiet();
        let (status, _) = wait_within(&mut child, Duration::from_secs(20));
        let text = child.stderr();
        assert_eq!(status.code(), Some(1), "{semantics}: {text}");
        assert!(
            text.contains("img_1_of_4.npz is not a regular file"),
            "{text}"
        );
    }

    let tf = tmp.path().join("tf");
    let tf_args = [
        "--semantics",
        "upstream",
        "++workload.dataset.format=tfrecord",
    ];
    generate(&tf, &out, &tf_args);
    let index = tf.join("index/train/img_2_of_4.tfrecord.idx");
    std::fs::remove_file(&index).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&index)
            .status()
            .unwrap()
            .success()
    );
    let mut child = tiny(&tf, &out).args(tf_args).spawn_quiet();
    let (status, _) = wait_within(&mut child, Duration::from_secs(20));
    let text = child.stderr();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("img_2_of_4.tfrecord.idx is not a regular file"),
        "{text}"
    );
}

#[test]
fn times_too_large_for_the_clock_are_refused_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    let cases = [
        (
            "++workload.train.computation_time=1e20",
            "train.computation_time",
        ),
        (
            "++workload.train.computation_time=1.8e19",
            "train.computation_time",
        ),
        (
            "++workload.reader.preprocess_time=1e20",
            "reader.preprocess_time",
        ),
        (
            "++workload.train.computation_time={type: uniform, min: 0, max: 1e300}",
            "train.computation_time.max",
        ),
        (
            "++workload.train.computation_time={type: exponential, scale: 1e300}",
            "train.computation_time.scale",
        ),
        (
            "++workload.train.computation_time={type: gamma, shape: 1e300, scale: 1e300}",
            "train.computation_time",
        ),
        (
            "++workload.train.computation_time={type: poisson, lam: 1e300}",
            "train.computation_time.lam",
        ),
    ];
    for (arg, key) in cases {
        let text = exit_1(tiny(&data, &out).arg(arg));
        assert!(text.contains(key) && text.contains("1e9"), "{arg}: {text}");
        assert!(!text.contains("panicked"), "{arg}: {text}");
    }
    let text = exit_1(tiny(&data, &out).args([
        "++workload.workflow.train=False",
        "++workload.workflow.checkpoint=True",
        "++workload.checkpoint.time_between_checkpoints=1e20",
    ]));
    assert!(
        text.contains("checkpoint.time_between_checkpoints"),
        "{text}"
    );
}

#[test]
fn regeneration_with_another_size_replaces_the_files_of_every_format() {
    for format in ["png", "jpeg", "csv", "parquet", "npz"] {
        let tmp = tempfile::tempdir().unwrap();
        let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
        let format_arg = format!("++workload.dataset.format={format}");
        let mut extra = vec![format_arg.as_str()];
        if format == "npz" {
            extra.push("++workload.dataset.compression=zip");
        }
        let big = [
            extra.clone(),
            vec!["++workload.dataset.record_length_bytes=65536"],
        ]
        .concat();
        generate(&data, &out, &big);
        let size_of = |data: &Path| -> u64 {
            std::fs::read_dir(data.join("train"))
                .unwrap()
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum()
        };
        let before = size_of(&data);
        let small = [
            extra.clone(),
            vec!["++workload.dataset.record_length_bytes=1024"],
        ]
        .concat();
        generate(&data, &out, &small);
        let after = size_of(&data);
        assert!(after * 4 < before, "{format}: {before} bytes, then {after}");
        // Run again with the same config: the files are this config's and are kept.
        let output = tiny(&data, &out)
            .args(["++workload.workflow.generate_data=True"])
            .args(&small)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
        assert!(output.status.success(), "{format}: {text}");
        assert!(text.contains("4 already complete"), "{format}: {text}");
        // At most every sample reads its whole file (on-demand reads, 2 samples per file):
        // the old files alone held more than that.
        let read = common::bytes_read(&out);
        assert!(
            read > 0 && read <= 2 * after,
            "{format}: read {read} of {after}"
        );
    }
}

#[test]
fn more_threads_than_the_machine_allows_is_an_error_before_any_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    let text =
        exit_1(tiny(&data, &out).args(["--ranks", "100", "++workload.reader.read_threads=20000"]));
    assert!(
        text.contains("this run would start 2000100 threads"),
        "{text}"
    );
}

#[test]
fn one_file_over_two_subfolders_generates_a_data_set_the_run_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    let output = tiny(&data, &out)
        .args([
            "++workload.workflow.generate_data=True",
            "++workload.dataset.num_files_train=1",
            "++workload.dataset.num_subfolders_train=2",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(data.join("train/1").is_dir());
}

#[test]
fn ctrl_c_during_generation_exits_130_with_an_incomplete_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    let mut child = tiny(&data, &out)
        .args([
            "++workload.workflow.generate_data=True",
            "++workload.dataset.num_files_train=100",
            "++workload.dataset.record_length_bytes=4000000",
        ])
        .spawn_quiet();
    // Interrupt once the first file is published, well before the 100th.
    let started = Instant::now();
    while std::fs::read_dir(data.join("train"))
        .map(|d| {
            d.flatten()
                .all(|e| e.file_name().to_string_lossy().starts_with('.'))
        })
        .unwrap_or(true)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no file appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    interrupt(&child);
    let (status, _) = wait_within(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(130));
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["dlio_rs"]["complete"], false);
    assert_eq!(summary["dlio_rs"]["interrupted_during"], "generation");
    let partials = common::files_under(&data)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .count();
    assert_eq!(
        partials, 0,
        "an interrupted generation leaves no partial file"
    );
}

#[test]
fn ctrl_c_does_not_wait_for_a_preprocess_sleep() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    let mut child = tiny(&data, &out)
        .args([
            "++workload.reader.preprocess_time=600",
            "++workload.reader.batch_size=4",
        ])
        .spawn_quiet();
    // Once the epoch has started, the reader threads are in their 10-minute sleeps.
    let started = Instant::now();
    while !child.stderr().contains("Starting epoch 1") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            child.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    interrupt(&child);
    // Well under the 600 s sleep, and loose enough for a loaded machine.
    let (status, took) = wait_within(&mut child, Duration::from_secs(120));
    assert_eq!(status.code(), Some(130));
    assert!(took < Duration::from_secs(60), "took {took:?} after Ctrl-C");
}

#[test]
fn an_unrelated_folder_in_a_flat_train_folder_is_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    generate(&data, &out, &[]);
    std::fs::create_dir(data.join("train/lost+found")).unwrap();
    let output = tiny(&data, &out).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("train/lost+found")).unwrap();
    let text = exit_1(tiny(&empty, &out));
    assert!(text.contains("holds no .npz files"), "{text}");
    assert!(!text.contains("num_files_train=0"), "{text}");
}

#[test]
fn values_past_their_range_are_refused_with_the_range() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    let cases = [
        (
            "++workload.dataset.num_samples_per_file=4294967297",
            "at most 4294967295 samples",
        ),
        (
            "++workload.reader.prefetch_size=1099511627776",
            "a non-negative integer up to 4294967295, got `1099511627776`",
        ),
        (
            "++workload.dataset.file_prefix=../../evil",
            "cannot hold a path separator",
        ),
        // Found by the config fuzzer: a checkpoint plan of 2^32 layers took all memory.
        (
            "++workload.model.num_layers=4294967296",
            "at most 65536 layers",
        ),
        (
            "++workload.dataset.record_dims=[4294967296, 4294967296, 4294967296]",
            "larger than 281474976710656 bytes",
        ),
    ];
    for (arg, needle) in cases {
        let text = exit_1(tiny(&data, &out).arg(arg));
        assert!(text.contains(needle), "{arg}: {text}");
    }
    assert!(!tmp.path().join("evil").exists());

    let yaml = tmp.path().join("w.yaml");
    for (text, needle) in [
        (
            "dataset:\n  num_files_train: 18446744073709551617\n",
            "larger than any setting takes",
        ),
        (
            "dataset:\n  num_files_train: 4\n---\ntrain:\n  epochs: 1\n",
            "one YAML document",
        ),
    ] {
        std::fs::write(&yaml, text).unwrap();
        let err = exit_1(
            dlio()
                .arg("run")
                .arg(format!("workload={}", yaml.display())),
        );
        assert!(err.contains(needle) && !err.contains("line 0"), "{err}");
    }
}

#[test]
fn layouts_a_format_cannot_write_are_refused_before_any_file_is() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            vec!["++workload.dataset.compression=gzip"],
            "npz files cannot be compressed with Gzip",
        ),
        (
            vec![
                "++workload.dataset.format=csv",
                "++workload.dataset.record_dims=[0]",
            ],
            "has no values",
        ),
    ];
    for (args, needle) in cases {
        let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
        let text = exit_1(
            tiny(&data, &out)
                .arg("++workload.workflow.generate_data=True")
                .args(&args),
        );
        assert!(text.contains(needle), "{text}");
        assert!(!data.exists(), "{args:?}: nothing is generated");
    }
}

#[test]
fn the_longest_file_names_the_file_system_takes_can_be_generated() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    // `{prefix}_0_of_4.npz` is 255 bytes.
    let prefix = "p".repeat(255 - "_0_of_4.npz".len());
    let output = tiny(&data, &out)
        .args([
            "++workload.workflow.generate_data=True".to_string(),
            format!("++workload.dataset.file_prefix={prefix}"),
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let names: Vec<_> = std::fs::read_dir(data.join("train"))
        .unwrap()
        .map(|e| e.unwrap().file_name().len())
        .collect();
    assert_eq!(names, vec![255; 4]);
}

#[test]
fn overrides_without_a_workload_configure_the_default_workload() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, out) = (tmp.path().join("d"), tmp.path().join("o"));
    let mut child = dlio()
        .args([
            "run".to_string(),
            "++workload.train.epochs=1".into(),
            format!("++workload.dataset.data_folder={}", data.display()),
            "++workload.dataset.num_files_train=4".into(),
            "++workload.dataset.num_files_eval=0".into(),
            "++workload.workflow.generate_data=True".into(),
            "++workload.workflow.evaluation=False".into(),
            "++workload.train.computation_time=0".into(),
            format!("++workload.output.folder={}", out.display()),
        ])
        .spawn_quiet();
    let pid = child.child.id();
    let (status, _) = wait_within(&mut child, Duration::from_secs(60));
    assert!(status.success());
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["epochs"], 1, "the user's epochs, not the demo's 2");
    assert!(data.join("train").is_dir(), "the user's data folder");
    let scratch = std::env::temp_dir().join(format!("dlio-first-contact-{pid}"));
    assert!(!scratch.exists(), "{} is left behind", scratch.display());
}

/// Relative path and bytes of every file under `dir` whose name is final (not hidden).
fn final_files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    if !dir.exists() {
        return Vec::new();
    }
    common::files_under(dir)
        .into_iter()
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.strip_prefix(dir).unwrap().to_path_buf(), bytes)
        })
        .collect()
}

/// What a folder held at one moment: how many files under their final names, and the sizes
/// of the temporary (`.NAME.partial`) files being written.
#[derive(Debug, Clone, Default)]
struct Written {
    finals: usize,
    partial_bytes: Vec<u64>,
}

fn written(dir: &Path) -> Written {
    let mut seen = Written::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return seen;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            let inner = written(&path);
            seen.finals += inner.finals;
            seen.partial_bytes.extend(inner.partial_bytes);
        } else if name.ends_with(".partial") {
            seen.partial_bytes
                .push(entry.metadata().map_or(0, |m| m.len()));
        } else if !name.starts_with('.') {
            seen.finals += 1;
        }
    }
    seen
}

/// Kills `child` with SIGKILL as soon as `dir` shows a file half written (a temporary file
/// with bytes in it) and `at_point` holds, and returns what the folder held just before
/// the signal: the proof that the kill landed mid-write. Fails the test if the program ends
/// first (the data set must then be made larger).
fn kill_mid_write(
    child: &mut Background,
    dir: &Path,
    at_point: impl Fn(&Written) -> bool,
) -> Written {
    let started = Instant::now();
    loop {
        let seen = written(dir);
        if seen.partial_bytes.iter().any(|&b| b > 0) && at_point(&seen) {
            let _ = Command::new("kill")
                .args(["-KILL", &child.child.id().to_string()])
                .status();
            let _ = child.child.wait();
            return seen;
        }
        if let Some(status) = child.child.try_wait().unwrap() {
            panic!(
                "the program ended ({status}) before a file was seen half written at the kill \
                 point; last seen {seen:?}\n{}",
                child.stderr()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no kill point within 120 s: {seen:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn generation_killed_at_any_point_leaves_only_whole_files_under_final_names() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let formats: [&[&str]; 3] = [
        &["++workload.dataset.format=npz"],
        &["++workload.dataset.format=indexed_binary"],
        &[
            "--semantics",
            "upstream",
            "++workload.dataset.format=tfrecord",
        ],
    ];
    // 16 files of 8 MB: each is being written long enough to be seen half written.
    const FILES: usize = 16;
    let size = [
        "++workload.dataset.num_files_train=16",
        "++workload.dataset.record_length_bytes=4000000",
    ];
    for (f, format) in formats.iter().enumerate() {
        let reference = tmp.path().join(format!("ref{f}"));
        generate(&reference, &out, &[*format, &size[..]].concat());
        let expected: std::collections::HashMap<_, _> =
            final_files(&reference).into_iter().collect();
        assert!(expected.len() >= FILES, "{format:?}: {}", expected.len());
        // Killed while the first file is being written, then with a quarter and with half
        // of the files whole.
        for (k, whole_before) in [0, FILES / 4, FILES / 2].into_iter().enumerate() {
            let data = tmp.path().join(format!("killed{f}-{k}"));
            let mut child = tiny(&data, &out)
                .args([
                    "++workload.workflow.generate_data=True",
                    "++workload.workflow.train=False",
                ])
                .args(*format)
                .args(size)
                .spawn_quiet();
            let seen = kill_mid_write(&mut child, &data, |w| w.finals >= whole_before);
            let left = final_files(&data);
            assert!(
                left.len() < expected.len(),
                "{format:?}: the kill ({seen:?}) landed after the last file"
            );
            for (rel, bytes) in left {
                if rel.to_string_lossy() == ".dlio-generation" {
                    continue;
                }
                let whole = expected
                    .get(&rel)
                    .unwrap_or_else(|| panic!("{format:?}: unexpected {}", rel.display()));
                assert!(
                    &bytes == whole,
                    "{format:?} killed at {seen:?}: {} has {} of {} bytes",
                    rel.display(),
                    bytes.len(),
                    whole.len()
                );
            }
            // The rerun completes the data set, identical to an uninterrupted one.
            generate(&data, &out, &[*format, &size[..]].concat());
            let rerun: std::collections::HashMap<_, _> = final_files(&data).into_iter().collect();
            assert_eq!(rerun.len(), expected.len(), "{format:?}");
            assert!(rerun == expected, "{format:?}: the rerun differs");
        }
    }
}

#[test]
fn checkpointing_killed_at_any_point_leaves_only_whole_checkpoint_files() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let args = |folder: &Path| -> Vec<String> {
        vec![
            "++workload.workflow.train=False".into(),
            "++workload.workflow.checkpoint=True".into(),
            "++workload.model.name=fault".into(),
            "++workload.model.model_size_bytes=60000000".into(),
            "++workload.checkpoint.num_checkpoints_write=4".into(),
            "++workload.checkpoint.num_checkpoints_read=0".into(),
            "++workload.checkpoint.time_between_checkpoints=0".into(),
            format!(
                "++workload.checkpoint.checkpoint_folder={}",
                folder.display()
            ),
        ]
    };
    let reference = tmp.path().join("ref");
    let output = tiny(&data, &tmp.path().join("o"))
        .args(args(&reference))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let sizes: std::collections::HashMap<_, _> = final_files(&reference)
        .into_iter()
        .map(|(rel, bytes)| (rel, bytes.len()))
        .collect();
    assert!(sizes.len() >= 4, "{sizes:?}");
    // Killed while the first checkpoint's files are being written, then the second's and
    // the third's.
    let per_checkpoint = sizes.len() / 4;
    for (k, whole_before) in [0, per_checkpoint, 2 * per_checkpoint]
        .into_iter()
        .enumerate()
    {
        let folder = tmp.path().join(format!("killed{k}"));
        let mut child = tiny(&data, &tmp.path().join(format!("o{k}")))
            .args(args(&folder))
            .spawn_quiet();
        let seen = kill_mid_write(&mut child, &folder, |w| w.finals >= whole_before);
        let left = final_files(&folder);
        assert!(
            left.len() < sizes.len(),
            "the kill ({seen:?}) landed after the last checkpoint file"
        );
        for (rel, bytes) in left {
            assert_eq!(
                Some(&bytes.len()),
                sizes.get(&rel),
                "killed at {seen:?}: {} is not whole",
                rel.display()
            );
        }
    }
}
