//! The command-line steps of upstream DLIO's CI (`.github/workflows/ci.yml` at e1919d7, the
//! steps that run `dlio_benchmark` directly rather than pytest), each with upstream's own
//! overrides, on two ranks, under `--semantics upstream` (DLIO's workload files). Upstream's
//! CI passes when every command exits 0.
//!
//! Two of them train on a data set too small for one full batch per rank
//! (`test-tf-loader-tfrecord`: 64 samples over 2 ranks of batch 64; `test-torch-loader-npz`:
//! 8 samples over 2 ranks of batch 7): DLIO runs their epochs with no step and exits 0, and
//! so does dlio, with a warning that names the fix; under `--strict` it is an error.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::json;

fn s(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// `dlio_benchmark --ranks 2 --semantics upstream WORDS` in `cwd`.
fn ci_step(cwd: &Path, words: &[String], strict: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlio_benchmark"));
    cmd.current_dir(cwd)
        .args(["--ranks", "2", "--semantics", "upstream"])
        .args(words)
        .env_remove("DLIO_STRICT")
        .env_remove("DLIO_SEMANTICS");
    if strict {
        cmd.arg("--strict");
    }
    cmd.output().expect("dlio_benchmark starts")
}

fn succeeds(cwd: &Path, words: &[String]) -> String {
    let out = ci_step(cwd, words, false);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{words:?} exited {:?}:\n{stderr}",
        out.status
    );
    stderr
}

/// Upstream's pair of CI commands: generate with `common` + `generate`, then train with
/// `common` + `train`; returns the training command's words and its stderr.
fn generate_then_train(
    cwd: &Path,
    common: &[&str],
    generate: &[&str],
    train: &[&str],
) -> (Vec<String>, String) {
    let with = |extra: &[&str]| -> Vec<String> { s(common).into_iter().chain(s(extra)).collect() };
    succeeds(cwd, &with(generate));
    let train = with(train);
    let stderr = succeeds(cwd, &train);
    (train, stderr)
}

/// The run folder of the last run in `cwd` (Hydra's `hydra_log/<model>/<timestamp>`).
fn last_run(cwd: &Path, model: &str) -> std::path::PathBuf {
    let dir = cwd.join("hydra_log").join(model);
    let mut runs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs.pop().expect("a run folder")
}

/// A run that trained no step: exit 0, the warning, 0 steps and AU 0 in summary.json (which
/// says the expectation failed), and one 0 AU per epoch; `--strict` refuses it.
fn assert_trained_no_step(cwd: &Path, model: &str, train: &[String], stderr: &str, epochs: u64) {
    assert!(stderr.contains("no training step fits"), "{stderr}");
    assert!(stderr.contains("dataset.num_files_train"), "{stderr}");
    let summary = json(&last_run(cwd, model).join("summary.json"));
    assert_eq!(summary["dlio_rs"]["steps_per_epoch"], 0, "{summary:#}");
    assert_eq!(summary["epochs"], epochs);
    let metric = &summary["metric"];
    assert_eq!(metric["train_au_meet_expectation"], "fail", "{metric:#}");
    let au = metric["train_au_percentage"].as_array().unwrap();
    assert_eq!(au.len() as u64, epochs, "{metric:#}");
    assert!(au.iter().all(|v| v.as_f64() == Some(0.0)), "{metric:#}");
    assert_eq!(summary["dlio_rs"]["samples"], 0, "nothing read");
    let strict = ci_step(cwd, train, true);
    assert!(!strict.status.success());
    let said = String::from_utf8_lossy(&strict.stderr);
    assert!(
        said.contains("no training step fits") && said.contains("--strict"),
        "{said}"
    );
}

const GENERATE: [&str; 2] = [
    "++workload.workflow.train=False",
    "++workload.workflow.generate_data=True",
];

#[test]
fn test_tf_loader_tfrecord_trains_no_step_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let (train, stderr) = generate_then_train(
        dir.path(),
        &[
            "workload=resnet50_tf",
            "++workload.dataset.num_files_train=64",
            "++workload.dataset.num_files_train=4",
            "++workload.dataset.num_samples_per_file=16",
        ],
        &GENERATE,
        &[
            "++workload.workflow.train=True",
            "++workload.workflow.generate_data=False",
            "++workload.train.computation_time=0.01",
            "++workload.train.epochs=1",
        ],
    );
    assert_trained_no_step(dir.path(), "resnet50", &train, &stderr, 1);
}

const UNET3D_NPZ: [&str; 7] = [
    "workload=unet3d_a100",
    "++workload.train.computation_time=0.05",
    "++workload.evaluation.eval_time=0.01",
    "++workload.dataset.num_files_train=8",
    "++workload.dataset.num_files_eval=8",
    "++workload.dataset.record_length=4096",
    "++workload.dataset.record_length_stdev=0",
];

const UNET3D_TRAIN: [&str; 4] = [
    "++workload.train.epochs=1",
    "++workload.workflow.train=True",
    "++workload.workflow.generate_data=False",
    "++workload.reader.read_threads=0",
];

#[test]
fn test_torch_loader_npz_trains_no_step_with_and_without_odirect() {
    let dir = tempfile::tempdir().unwrap();
    let mut generate = GENERATE.to_vec();
    generate.push("++workload.reader.read_threads=2");
    let (train, stderr) = generate_then_train(dir.path(), &UNET3D_NPZ, &generate, &UNET3D_TRAIN);
    assert_trained_no_step(dir.path(), "unet3d", &train, &stderr, 1);
    let mut odirect = train;
    odirect.push("++workload.reader.odirect=True".into());
    let stderr = succeeds(dir.path(), &odirect);
    assert_trained_no_step(dir.path(), "unet3d", &odirect, &stderr, 1);
}

#[test]
fn test_tf_loader_npz_trains_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let (_, stderr) = generate_then_train(
        dir.path(),
        &[
            "workload=unet3d_a100",
            "++workload.framework=tensorflow",
            "++workload.data_reader.data_loader=tensorflow",
            "++workload.train.computation_time=0.05",
            "++workload.evaluation.eval_time=0.01",
            "++workload.train.epochs=2",
            "++workload.dataset.num_files_train=16",
            "++workload.dataset.num_files_eval=16",
            "++workload.reader.read_threads=2",
            "++workload.dataset.record_length=4096",
            "++workload.dataset.record_length_stdev=0",
        ],
        &GENERATE,
        &[
            "++workload.workflow.train=True",
            "++workload.workflow.generate_data=False",
        ],
    );
    assert!(!stderr.contains("no training step fits"), "{stderr}");
    let summary = json(&last_run(dir.path(), "unet3d").join("summary.json"));
    // 16 samples over 2 ranks of batch 7: one step per rank per epoch.
    assert_eq!(summary["dlio_rs"]["steps_per_epoch"], 1, "{summary:#}");
    assert_eq!(summary["epochs"], 2);
}
