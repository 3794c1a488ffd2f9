//! MLPerf Storage v3 as its users run it: the 64 workload files of `configs/dlio/workload/`
//! (built in, and as a `--config-dir`), mlpstorage's command line, the run directory its report
//! and rules checker read back (checked by a Python reader that reads it the way
//! mlpstorage 2.0's `reports reportgen` does), and the fork's semantics (no decode, parquet
//! column selection).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bytes_read, dlio, json, run_err, run_ok};

/// The v3 workload files, laid out as mlpstorage's `--config-dir` (`workload/NAME.yaml`).
fn v3_config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/workloads/mlperf-v3")
}

/// Fails the test, with the fix, unless python3 imports `modules` (scripts/test.sh
/// installs them): a missing module is the set-up's failure, not a reason to skip.
fn require_python(modules: &str) {
    let found = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "python3 cannot import {modules}: run `bash scripts/test.sh` (it installs them)"
    );
}

/// Runs `script` with `args` in python3 and returns its stdout (the test fails on an error).
fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 starts");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What mlpstorage 2.0.0b1's report generator reads from a run directory (rules.py
/// `BenchmarkResult` / `BenchmarkRun` and `ClusterInformation.from_dlio_summary_json`), with
/// the same loader (PyYAML's full `yaml.Loader`, YAML 1.1) and the same expressions; prints
/// what it derived. A missing key or a wrong type fails as it would there.
const MLPSTORAGE_READER: &str = r#"
import json, os, sys, yaml
run = sys.argv[1]
summary = json.load(open(os.path.join(run, "summary.json")))
configs = {}
for name in os.listdir(os.path.join(run, "dlio_config")):
    if name.endswith(".yaml"):
        configs[name] = yaml.load(open(os.path.join(run, "dlio_config", name)), Loader=yaml.Loader)
assert set(configs) == {"config.yaml", "hydra.yaml", "overrides.yaml"}, sorted(configs)
wl = configs.get("config.yaml", {}).get("workload", {})
wf = wl.get("workflow", {})
if wf.get("generate_data", {}) or wf.get("train", {}):
    benchmark_type = "training"
elif wf.get("checkpoint", {}):
    benchmark_type = "checkpointing"
else:
    raise SystemExit("benchmark_type is None: mlpstorage would crash (no true workflow flag)")
model = wl.get("model", {}).get("name")
num_processes = summary["num_accelerators"]
overrides = {}
for param in configs.get("overrides.yaml", list()):
    p, v = param.split("=")
    if p.startswith("++workload."):
        overrides[p[len("++workload."):]] = v
workloads = [o for o in configs["overrides.yaml"] if o.startswith("workload=")]
first = configs["overrides.yaml"][0]
assert first.startswith("workload="), first
accelerator = first.split("=")[1].split("_")[1]
metrics = summary.get("metric")
for key, value in metrics.items():
    if isinstance(value, list):
        "".join(f"{v:,.1f}" for v in value)
memory = sum(summary.get("host_memory_GB")) * 1024**3
cores = sum(summary.get("host_cpu_count"))
assert summary["num_hosts"] >= 1 and summary["start"]
for key in ("num_files_train", "num_files_eval"):
    assert isinstance(summary[key], int), key
assert "train_au_meet_expectation" in metrics
assert configs["hydra.yaml"]["hydra"]["output_subdir"] == "dlio_config"
reader = wl.get("reader", {})
print(json.dumps({
    "type": benchmark_type, "model": model, "processes": num_processes,
    "accelerator": accelerator, "overrides": overrides, "first": first,
    "file_shuffle": reader.get("file_shuffle"), "memory": memory > 0, "cores": cores,
    "au": metrics["train_au_meet_expectation"],
}))
"#;

#[test]
fn every_v3_workload_file_loads_from_the_config_dir_and_by_name() {
    let dir = v3_config_dir();
    let names: Vec<String> = std::fs::read_dir(dir.join("workload"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names.len(), 64);
    for name in &names {
        for by_dir in [true, false] {
            let mut cmd = dlio();
            cmd.arg("config");
            if by_dir {
                cmd.arg("--config-dir").arg(&dir);
            }
            cmd.arg(format!("workload={name}"))
                .arg("--query")
                .arg("model.name");
            let out = run_ok(&mut cmd);
            assert!(!out.stdout.is_empty(), "{name}");
        }
    }
}

#[test]
fn strict_makes_an_unknown_key_exit_2_with_file_line_and_suggestion() {
    let out = dlio()
        .args(["config", "--strict", "--config-dir"])
        .arg(v3_config_dir())
        .arg("workload=zerocopy_file_test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("zerocopy_file_test.yaml, line 33")
            && err.contains("reader.seed")
            && err.contains("did you mean `train.seed`"),
        "{err}"
    );
    // Without --strict: a warning naming the same, and the config loads.
    let out = run_ok(
        dlio()
            .args(["config", "--config-dir"])
            .arg(v3_config_dir())
            .arg("workload=zerocopy_file_test"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 33") && err.contains("unknown key `reader.seed` is ignored"),
        "{err}"
    );
}

/// Small-size overrides for a training workload: `files` files of `record` bytes in `dir`.
fn small(dir: &Path, files: u64, record: u64, out: &str) -> Vec<String> {
    vec![
        format!(
            "++workload.dataset.data_folder={}",
            dir.join("data").display()
        ),
        format!("++workload.dataset.num_files_train={files}"),
        "++workload.dataset.num_files_eval=0".into(),
        format!("++workload.dataset.record_length_bytes={record}"),
        "++workload.dataset.record_length_bytes_stdev=0".into(),
        "++workload.dataset.record_length_bytes_resize=0".into(),
        "++workload.train.epochs=2".into(),
        "++workload.train.computation_time=0.001".into(),
        "++workload.reader.read_threads=2".into(),
        format!("hydra.run.dir={}", dir.join(out).display()),
    ]
}

fn file_bytes(dir: &Path) -> u64 {
    common::files_under(dir)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

#[test]
fn unet3d_and_retinanet_b200_generate_and_train_reading_every_byte_without_decoding() {
    for (name, format, record) in [
        ("unet3d_b200", "npz", 40_000u64),
        ("retinanet_b200", "jpeg", 30_000),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut words = vec![format!("workload={name}")];
        words.extend(small(tmp.path(), 24, record, "run"));
        words.push("++workload.workflow.generate_data=True".into());
        words.push("++workload.reader.batch_size=2".into());
        run_ok(dlio().arg("run").args(&words));
        let run = tmp.path().join("run");
        let summary = json(&run.join("summary.json"));
        assert_eq!(summary["dlio_rs"]["semantics"], "mlperf");
        assert_eq!(summary["dlio_rs"]["format"], format);
        // Every sample's whole file, once per sample read (read_type on_demand), 2 epochs.
        let data = file_bytes(&tmp.path().join("data/train"));
        assert_eq!(bytes_read(&run), 2 * data, "{name}");
        // The same run decoding (upstream): the same bytes move.
        let mut upstream = words.clone();
        upstream.retain(|w| !w.starts_with("hydra.run.dir"));
        upstream.push(format!("hydra.run.dir={}", tmp.path().join("up").display()));
        upstream.push("++workload.workflow.generate_data=False".into());
        run_ok(
            dlio()
                .args(["run", "--semantics", "upstream"])
                .args(&upstream),
        );
        let up = json(&tmp.path().join("up/summary.json"));
        assert_eq!(up["dlio_rs"]["semantics"], "upstream");
        assert_eq!(bytes_read(&tmp.path().join("up")), 2 * data, "{name}");
    }
}

#[test]
fn a_damaged_npz_is_read_with_mlperf_semantics_and_refused_with_upstreams() {
    let tmp = tempfile::tempdir().unwrap();
    let mut words = vec!["workload=unet3d_b200".to_string()];
    words.extend(small(tmp.path(), 4, 4096, "gen"));
    words.push("++workload.reader.batch_size=1".into());
    run_ok(
        dlio()
            .arg("generate")
            .args(&words)
            .arg("++workload.workflow.train=False"),
    );
    let victim = common::files_under(&tmp.path().join("data/train")).remove(0);
    // Junk of the file's own size: the fork's reader does not look inside. (A file cut short
    // is refused under both semantics: its size says so; see tests/reliability.rs.)
    let len = std::fs::metadata(&victim).unwrap().len() as usize;
    std::fs::write(&victim, vec![0xab; len]).unwrap();
    run_ok(dlio().arg("run").args(&words));
    let err = run_err(dlio().args(["run", "--semantics=upstream"]).args(&words));
    assert!(
        err.contains(&victim.file_name().unwrap().to_string_lossy().into_owned()),
        "{err}"
    );
}

#[test]
fn dlrm_parquet_reads_only_the_columns_marked_read() {
    require_python("pyarrow");
    let tmp = tempfile::tempdir().unwrap();
    let mut words = vec!["workload=dlrm_b200".to_string()];
    words.extend(small(tmp.path(), 2, 761, "run"));
    words.extend([
        "++workload.workflow.generate_data=True".to_string(),
        "++workload.dataset.num_samples_per_file=1000".into(),
        "++workload.dataset.parquet.row_group_size=250".into(),
        "++workload.reader.batch_size=100".into(),
        "++workload.reader.read_threads=1".into(),
        "++workload.train.epochs=1".into(),
    ]);
    run_ok(dlio().arg("run").args(&words));
    // What pyarrow sees: 200 columns, 4 row groups per file; the bytes of the read: true
    // columns' chunks, summed over every row group of both files.
    let script = r#"
import sys, yaml, pyarrow.parquet as pq, glob
cfg = yaml.safe_load(open(sys.argv[2]))
wanted = [c["name"] for c in cfg["dataset"]["parquet"]["columns"] if c.get("read", True)]
total = 0
for path in sorted(glob.glob(sys.argv[1] + "/*.parquet")):
    f = pq.ParquetFile(path)
    assert f.metadata.num_columns == 200 and f.metadata.num_row_groups == 4, f.metadata
    assert f.metadata.num_rows == 1000
    t = f.read(columns=["feature_000", "feature_011"])
    assert str(t.schema.field("feature_000").type) == "halffloat", t.schema
    for g in range(f.metadata.num_row_groups):
        rg = f.metadata.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            if col.path_in_schema in wanted:
                total += col.total_compressed_size
print(len(wanted), total)
"#;
    let yaml = v3_config_dir().join("workload/dlrm_b200.yaml");
    let data = tmp.path().join("data/train");
    let got = python(script, &[&data.to_string_lossy(), &yaml.to_string_lossy()]);
    let (columns, selected_bytes) = got.split_once(' ').unwrap();
    assert_eq!(
        columns, "40",
        "dlrm_b200 marks 40 of its 200 columns read: true"
    );
    let selected_bytes: u64 = selected_bytes.parse().unwrap();
    let read = bytes_read(&tmp.path().join("run"));
    let footers = read - selected_bytes;
    // Beyond the selected chunks only the footers were read, once per file (about 49 KiB for
    // 200 columns and 4 row groups): far less than the 160 unselected columns' bytes.
    let whole = file_bytes(&data);
    assert!(read >= selected_bytes, "{read} < {selected_bytes}");
    assert!(
        footers < 2 * 64 * 1024,
        "read {read}, selected {selected_bytes}"
    );
    assert!(read < whole / 2, "read {read} of {whole}");
}

#[test]
fn flux_generates_its_column_schema_and_trains() {
    require_python("pyarrow");
    let tmp = tempfile::tempdir().unwrap();
    let mut words = vec!["workload=flux_b200".to_string()];
    words.extend(small(tmp.path(), 2, 2_164_832, "run"));
    words.extend([
        "++workload.workflow.generate_data=True".to_string(),
        "++workload.dataset.num_samples_per_file=4".into(),
        "++workload.reader.batch_size=2".into(),
    ]);
    run_ok(dlio().arg("run").args(&words));
    let script = r#"
import sys, glob, pyarrow.parquet as pq
paths = sorted(glob.glob(sys.argv[1] + "/*.parquet"))
f = pq.ParquetFile(paths[0])
s = f.schema_arrow
print(len(paths), f.metadata.num_rows, ",".join(s.names), s.field("t5_encodings").type.byte_width)
"#;
    let got = python(script, &[&tmp.path().join("data/train").to_string_lossy()]);
    assert_eq!(
        got,
        "2 4 t5_encodings,clip_encodings,mean,logvar,timestamp 2097312"
    );
    let summary = json(&tmp.path().join("run/summary.json"));
    assert!(summary["metric"]["train_au_meet_expectation"].is_string());
}

#[test]
fn a_column_list_that_does_not_match_the_files_names_the_column_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut words = vec!["workload=flux_b200".to_string()];
    words.extend(small(tmp.path(), 2, 1000, "run"));
    words.extend([
        "++workload.dataset.num_samples_per_file=2".to_string(),
        "++workload.reader.batch_size=1".into(),
        "++workload.dataset.parquet.columns=[{name: a, dtype: uint8, size: 8}]".into(),
    ]);
    run_ok(
        dlio()
            .arg("generate")
            .args(&words)
            .arg("++workload.workflow.train=False"),
    );
    let mut other = words.clone();
    other.push("++workload.dataset.parquet.columns=[{name: b, dtype: uint8, size: 8}]".into());
    let err = run_err(dlio().arg("run").args(&other));
    assert!(err.contains("`b`") && err.contains(".parquet"), "{err}");
}

#[test]
fn llama3_8b_checkpoints_at_small_size() {
    let tmp = tempfile::tempdir().unwrap();
    run_ok(dlio().args([
        "run",
        "workload=llama3_8b",
        "++workload.model.num_layers=2",
        "++workload.model.transformer.hidden_size=256",
        "++workload.model.transformer.ffn_hidden_size=512",
        "++workload.model.transformer.vocab_size=1024",
        "++workload.checkpoint.num_checkpoints_write=2",
        "++workload.checkpoint.num_checkpoints_read=1",
        "++workload.checkpoint.time_between_checkpoints=0",
        "++workload.checkpoint.mode=subset",
        &format!(
            "++workload.checkpoint.checkpoint_folder={}",
            tmp.path().join("ckpt").display()
        ),
        &format!("hydra.run.dir={}", tmp.path().join("run").display()),
        "++hydra.output_subdir=dlio_config",
    ]));
    let summary = json(&tmp.path().join("run/summary.json"));
    assert!(summary["metric"]["checkpoint_size_GB"].as_f64().unwrap() > 0.0);
    assert!(file_bytes(&tmp.path().join("ckpt")) > 0);
    let config = std::fs::read_to_string(tmp.path().join("run/dlio_config/config.yaml")).unwrap();
    assert!(
        config.starts_with("workload:\n  model:\n    name: llama_8b\n"),
        "{config}"
    );
}

#[test]
fn the_run_directory_reads_back_as_mlpstorage_reads_it() {
    require_python("yaml");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data/unet3d");
    let run = tmp
        .path()
        .join("results/training/unet3d/run/20261201_120000");
    let link = tmp.path().join("bin/dlio_benchmark");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_dlio"), &link).unwrap();
    // mlpstorage's datagen, then its run, through the symlink.
    for (workload, extra) in [
        ("unet3d_datagen", "++workload.dataset.num_files_train=12"),
        ("unet3d_h100", "++workload.dataset.num_files_train=12"),
    ] {
        let dir = if workload.ends_with("datagen") {
            tmp.path()
                .join("results/training/unet3d/datagen/20261201_115900")
        } else {
            run.clone()
        };
        run_ok(Command::new(&link).args([
            &format!("workload={workload}"),
            &format!("++hydra.run.dir={}", dir.display()),
            "++hydra.output_subdir=dlio_config",
            extra,
            "++workload.dataset.record_length_bytes=8192",
            "++workload.dataset.record_length_bytes_stdev=1024",
            "++workload.train.computation_time=0.001",
            "++workload.train.epochs=1",
            "++workload.reader.batch_size=2",
            &format!("++workload.dataset.data_folder={}", data.display()),
            &format!("--config-dir={}", v3_config_dir().display()),
        ]));
    }
    // mlpstorage's own metadata file, which its discovery needs beside summary.json.
    std::fs::write(run.join("training_20261201_120000_metadata.json"), "{}").unwrap();
    let got = python(MLPSTORAGE_READER, &[&run.to_string_lossy()]);
    let v: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(v["type"], "training");
    assert_eq!(v["model"], "unet3d");
    assert_eq!(v["processes"], 1);
    assert_eq!(v["accelerator"], "h100");
    assert_eq!(v["first"], "workload=unet3d_h100");
    assert_eq!(
        v["file_shuffle"], "seed",
        "a string, not a YAML 1.1 boolean"
    );
    assert_eq!(v["overrides"]["dataset.num_files_train"], "12");
    assert!(v["overrides"].get("hydra.run.dir").is_none());
    // Our own resolved config is kept beside them, under our name.
    assert!(run.join("dlio_resolved_config.yaml").is_file());
    assert!(!run.join(".hydra").exists());
}

#[test]
fn a_run_directory_that_cannot_be_written_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    // A file where the output subdirectory must go.
    std::fs::write(run.join("dlio_config"), "in the way").unwrap();
    let mut words = vec!["workload=unet3d_h100".to_string()];
    words.extend(small(tmp.path(), 4, 4096, "run"));
    words.push("++hydra.output_subdir=dlio_config".into());
    words.push("++workload.workflow.generate_data=True".into());
    let err = run_err(dlio().arg("run").args(&words));
    assert!(
        err.contains("dlio_config") && err.contains("hydra.output_subdir"),
        "{err}"
    );
    assert!(!run.join("summary.json").exists());
}

#[test]
fn a_prefetch_window_on_local_files_is_said_to_have_no_effect() {
    let tmp = tempfile::tempdir().unwrap();
    let mut words = vec!["workload=unet3d_b200".to_string()];
    words.extend(small(tmp.path(), 2, 4096, "run"));
    words.extend([
        "++workload.workflow.generate_data=True".to_string(),
        "++workload.reader.batch_size=1".into(),
        "++workload.storage.storage_options.prefetch_window=8".into(),
    ]);
    let out = run_ok(dlio().arg("run").args(&words));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("prefetch_window: 8 has no effect"), "{err}");
}

/// The fork's parquet readers open a file once per worker and epoch and fetch each row group
/// once; dlio's threads, to which consecutive batches go in turn, share which row groups they
/// fetched. A row group of 1,000 rows spans 10 batches of 100, so over 4 threads each of them
/// used to fetch it (4 times the bytes) and a sample read opened, stat'ed and closed its file.
#[test]
fn parquet_row_groups_are_fetched_once_per_epoch_whatever_the_reader_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let mut summaries = Vec::new();
    for threads in [1, 4] {
        let out = format!("run{threads}");
        let mut words = vec!["workload=dlrm_b200".to_string()];
        words.extend(small(tmp.path(), 2, 761, &out));
        words.extend([
            "++workload.workflow.generate_data=True".to_string(),
            "++workload.dataset.num_samples_per_file=4000".into(),
            "++workload.dataset.parquet.row_group_size=1000".into(),
            "++workload.reader.batch_size=100".into(),
            format!("++workload.reader.read_threads={threads}"),
        ]);
        run_ok(dlio().arg("run").args(&words));
        summaries.push((
            bytes_read(&tmp.path().join(&out)),
            json(&tmp.path().join(&out).join("summary.json")),
        ));
    }
    let (one, four) = (&summaries[0], &summaries[1]);
    // 2 epochs x 2 files x 4,000 samples, read on demand: a file is opened once per epoch by
    // each thread that reads it, never per sample.
    for ((_, summary), threads) in summaries.iter().zip([1u64, 4]) {
        assert_eq!(summary["dlio_rs"]["samples"], 16_000);
        let opens = summary["dlio_rs"]["opens"].as_u64().unwrap();
        assert!(opens <= 2 * 2 * threads, "{threads} threads: {opens} opens");
    }
    // Four threads read the selected chunks once, as one does: only their footers are extra
    // (one per file, epoch and thread, about 49 KiB for 200 columns and 4 row groups, against
    // about 640 KB of selected chunks per file).
    assert!(
        four.0 < one.0 * 3 / 2,
        "4 threads read {} bytes, 1 thread {}",
        four.0,
        one.0
    );
    assert!(four.0 >= one.0, "4 threads read {} < {}", four.0, one.0);
}

/// mlpstorage 3.0.x's grammar end to end, through a fixture of its command lines and run-folder
/// checks (`tests/fixtures/mlpstorage_v3.py`: mlpstorage is not on PyPI, so the test cannot
/// fetch it): `init`, `open training unet3d datagen` and `run` on b200, `open checkpointing run`
/// of llama3-8b below the closed process count, `reports reportgen` and `validate`, each
/// driving this `dlio_benchmark` under `mpirun` as mlpstorage does.
#[test]
fn the_v3_grammar_runs_end_to_end_through_mlpstorages_command_lines() {
    require_python("yaml");
    let mpirun = Command::new("mpirun").arg("--version").output();
    assert!(
        mpirun.is_ok_and(|o| o.status.success()),
        "mpirun is missing: `bash scripts/test.sh` installs Open MPI"
    );
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("bin/dlio_benchmark");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_dlio"), &link).unwrap();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mlpstorage_v3.py");
    let results = tmp.path().join("results");
    let data = tmp.path().join("data");
    let mlpstorage = |words: &[&str]| {
        let out = Command::new("python3")
            .arg(&fixture)
            .args(words)
            .env("DLIO_BENCHMARK", &link)
            .env("DLIO_CONFIG_DIR", v3_config_dir())
            .output()
            .expect("python3 starts");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let ok = |words: &[&str]| {
        let (code, stdout, stderr) = mlpstorage(words);
        assert_eq!(code, Some(0), "mlpstorage {words:?}:\n{stdout}\n{stderr}");
        stdout
    };
    let (r, d) = (results.to_str().unwrap(), data.to_str().unwrap());
    ok(&["init", "dlio-test", r]);
    let small = [
        "dataset.num_files_train=8",
        "dataset.num_samples_per_file=1",
        "dataset.record_length_bytes=8192",
        "dataset.record_length_bytes_stdev=0",
        "dataset.record_length_bytes_resize=0",
    ];
    let mut words = vec![
        "open",
        "training",
        "unet3d",
        "datagen",
        "file",
        "--num-processes",
        "1",
        "--data-dir",
        d,
        "--results-dir",
        r,
        "--params",
    ];
    words.extend(small);
    let said = ok(&words);
    assert!(said.contains("workload=unet3d_datagen"), "{said}");
    let mut words = vec![
        "open",
        "training",
        "unet3d",
        "run",
        "file",
        "--num-accelerators",
        "1",
        "--accelerator-type",
        "b200",
        "--client-host-memory-in-gb",
        "1",
        "--data-dir",
        d,
        "--results-dir",
        r,
        "--systemname",
        "vm",
        "--params",
    ];
    words.extend(small);
    words.extend([
        "train.epochs=1",
        "train.computation_time=0.001",
        "reader.batch_size=2",
        "reader.read_threads=1",
    ]);
    let said = ok(&words);
    for part in [
        "mpirun -n 1 -host 127.0.0.1:1 --bind-to none --map-by socket",
        "workload=unet3d_b200",
        "++hydra.output_subdir=dlio_config",
        "++workload.dataset.skip_listing=True",
        "++workload.dataset.num_files_generated=8",
    ] {
        assert!(said.contains(part), "{part} not in {said}");
    }
    let said = ok(&[
        "open",
        "checkpointing",
        "run",
        "file",
        "--model",
        "llama3-8b",
        "--num-processes",
        "1",
        "--checkpoint-folder",
        &tmp.path().join("ckpt").to_string_lossy(),
        "--client-host-memory-in-gb",
        "1",
        "--num-checkpoints-write",
        "1",
        "--num-checkpoints-read",
        "1",
        "--results-dir",
        r,
        "--systemname",
        "vm",
        "--params",
        "model.num_layers=2",
        "model.transformer.hidden_size=256",
        "model.transformer.ffn_hidden_size=512",
        "model.transformer.vocab_size=1024",
    ]);
    assert!(
        said.contains("++workload.checkpoint.mode=subset")
            && said.contains("++workload.model.parallelism.data=1"),
        "{said}"
    );
    ok(&["reports", "reportgen", "--results-dir", r]);
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("results.json")).unwrap())
            .unwrap();
    let rows = rows.as_array().unwrap();
    // The training run and the checkpointing run (datagen writes no summary).
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().any(|row| row["au_mean_percentage"].is_number()));
    assert!(rows.iter().any(|row| row["checkpoint_size_GB"].is_number()));
    let said = ok(&[
        "validate",
        &results.join("open/dlio-test").to_string_lossy(),
    ]);
    assert!(said.contains("VALID"), "{said}");

    // A run DLIO fails (an override it refuses) fails the wrapper, as 3.0.41 and later read
    // DLIO's exit status.
    let mut words = vec![
        "open",
        "training",
        "unet3d",
        "run",
        "file",
        "--num-accelerators",
        "1",
        "--accelerator-type",
        "b200",
        "--client-host-memory-in-gb",
        "1",
        "--data-dir",
        d,
        "--results-dir",
        r,
        "--systemname",
        "vm",
        "--params",
        "reader.batch_size=-3",
    ];
    words.extend(small);
    let (code, _, stderr) = mlpstorage(&words);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("DLIO exited"), "{stderr}");
}
