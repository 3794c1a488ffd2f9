//! The output files: every DLIO key, the right shapes, and our own section.

use std::path::Path;

use dlio_metrics::{
    CheckpointKind, HostInfo, MetricParams, RankReport, RunInfo, aggregate, write_outputs,
};
use serde_json::{Value, json};

use super::util::{at, checkpoint, eval, params, report, simple_epoch, uniform_steps};

/// Every key DLIO writes at the top of `summary.json`.
const SUMMARY_KEYS: [&str; 17] = [
    "start",
    "end",
    "num_accelerators",
    "num_hosts",
    "hostname",
    "num_files_train",
    "num_files_eval",
    "num_samples_per_file",
    "host_cpu_count",
    "host_processor_name",
    "host_memory_GB",
    "host_cpuinfo",
    "host_meminfo",
    "data_size_per_host_GB",
    "potential_caching",
    "epochs",
    "metric",
];

/// The nine per-phase metric keys, without their `train_`/`eval_` prefix.
const PHASE_KEYS: [&str; 9] = [
    "au_percentage",
    "au_mean_percentage",
    "au_stdev_percentage",
    "au_meet_expectation",
    "throughput_samples_per_second",
    "throughput_mean_samples_per_second",
    "throughput_stdev_samples_per_second",
    "io_mean_MB_per_second",
    "io_stdev_MB_per_second",
];

const SAVE_KEYS: [&str; 4] = [
    "save_checkpoint_io_mean_GB_per_second",
    "save_checkpoint_io_stdev_GB_per_second",
    "save_checkpoint_duration_mean_seconds",
    "save_checkpoint_duration_stdev_seconds",
];

fn host() -> HostInfo {
    HostInfo::from_proc(
        "processor : 0\nmodel name : Test CPU\n",
        "MemTotal: 2097152 kB\n",
        "node7".to_owned(),
    )
}

fn run(complete: bool) -> RunInfo {
    RunInfo {
        start: at(0.0),
        end: at(5000.0),
        num_files_train: 8,
        num_files_eval: 2,
        num_samples_per_file: 1,
        data_bytes_total: 1 << 30,
        complete,
        hosts: Vec::new(),
        ours: json!({"engine": "posix", "seed": 123}),
    }
}

fn metric_params() -> MetricParams {
    MetricParams {
        world: 2,
        exclude_start_steps: 0,
        steps_per_epoch: 100,
        ..params()
    }
}

fn reports(with_extras: bool) -> Vec<RankReport> {
    let mut reports = vec![
        report(
            0,
            vec![simple_epoch(1, 3, 2.0, 0.5), simple_epoch(2, 4, 2.0, 0.4)],
        ),
        report(
            1,
            vec![simple_epoch(1, 2, 2.0, 0.5), simple_epoch(2, 3, 2.0, 0.4)],
        ),
    ];
    if with_extras {
        for report in &mut reports {
            report.epochs[0].eval = Some(eval(1100.0, 1102.0, uniform_steps(4, 0.25, 0.25)));
            report.epochs[0].checkpoints = vec![
                checkpoint(CheckpointKind::Save, 1, 1002.5, 1004.5, 1 << 30),
                checkpoint(CheckpointKind::Load, 1, 1005.0, 1006.0, 1 << 30),
            ];
        }
        reports[0].epochs[0].train_io.bytes_read = 5 << 20;
    }
    reports
}

fn write(dir: &Path, complete: bool, with_extras: bool) {
    let reports = reports(with_extras);
    let metrics = aggregate(&reports, &metric_params());
    write_outputs(dir, &run(complete), &host(), &metrics, &reports).expect("outputs written");
}

fn read(dir: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
}

#[test]
fn summary_has_every_dlio_key_and_parses() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), true, true);
    let summary = read(dir.path(), "summary.json");
    for key in SUMMARY_KEYS {
        assert!(summary.get(key).is_some(), "summary.json lacks {key}");
    }
    let metric = &summary["metric"];
    for prefix in ["train", "eval"] {
        for key in PHASE_KEYS {
            let key = format!("{prefix}_{key}");
            assert!(metric.get(&key).is_some(), "metric lacks {key}");
        }
    }
    for key in SAVE_KEYS {
        assert!(metric.get(key).is_some(), "metric lacks {key}");
        let load = key.replace("save_", "load_");
        assert!(metric.get(&load).is_some(), "metric lacks {load}");
    }
    assert!(metric.get("checkpoint_size_GB").is_some());
}

#[test]
fn summary_values_have_dlio_shapes() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), true, false);
    let summary = read(dir.path(), "summary.json");
    assert_eq!(summary["num_accelerators"], 2);
    assert_eq!(summary["num_hosts"], 1);
    assert_eq!(summary["hostname"], "node7");
    assert_eq!(summary["num_files_train"], 8);
    assert_eq!(summary["epochs"], 2);
    assert_eq!(summary["host_cpu_count"], json!([1]));
    assert_eq!(summary["host_memory_GB"], json!([2.0]));
    assert_eq!(summary["data_size_per_host_GB"], json!(1.0));
    // 2 GiB of memory > 1 GiB of data: may be cached.
    assert_eq!(summary["potential_caching"], json!([1]));
    assert_eq!(summary["host_meminfo"]["MemTotal"], "2097152 kB");
    let metric = &summary["metric"];
    assert_eq!(
        metric["train_au_percentage"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(metric["train_au_meet_expectation"], "fail");
    assert!(metric["train_au_mean_percentage"].is_f64());
    assert!(metric.get("eval_au_percentage").is_none(), "no eval ran");
    assert!(
        metric
            .get("save_checkpoint_io_mean_GB_per_second")
            .is_none()
    );
    assert!(metric.get("checkpoint_size_GB").is_none());
    let start = summary["start"].as_str().unwrap_or_default();
    assert_eq!(start.len(), 26, "{start}");
}

#[test]
fn our_section_reports_measured_io_latency_ranks_and_the_extra_fields() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), true, true);
    let ours = &read(dir.path(), "summary.json")["dlio_rs"];
    assert_eq!(ours["complete"], true);
    assert_eq!(ours["ranks"], 2);
    assert_eq!(ours["bytes_read"], 5 << 20);
    assert_eq!(ours["engine"], "posix");
    assert_eq!(ours["seed"], 123);
    assert_eq!(ours["throughput_steps"], "metric_window");
    // 5 MiB over the slowest rank's 2 s of blocks in epoch 1, nothing in epoch 2.
    assert_eq!(ours["train_io_measured_MB_per_second"], json!([2.5, 0.0]));
    assert_eq!(
        ours["train_bytes_read_per_second"],
        json!((5 << 20) as f64 / 4.0)
    );
    assert!(ours["train"]["sample_read_latency"]["p99_us"].is_number());
    assert!(ours["eval"]["batch_wait_latency"]["count"].is_number());
    assert_eq!(
        ours["checkpoint_mlperf"]["save"]["durations_seconds"],
        json!([2.0])
    );
    assert_eq!(ours["per_rank"].as_array().map(Vec::len), Some(2));
}

#[test]
fn an_interrupted_run_says_complete_false() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), false, false);
    assert_eq!(
        read(dir.path(), "summary.json")["dlio_rs"]["complete"],
        false
    );
}

#[test]
fn rank_output_files_hold_step_lists_and_block_figures_per_epoch() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), true, true);
    for rank in 0..2 {
        let output = read(dir.path(), &format!("{rank}_output.json"));
        for key in [
            "host_memory_GB",
            "host_cpu_count",
            "host_processor_name",
            "potential_caching",
            "host_cpuinfo",
            "host_meminfo",
            "hostname",
        ] {
            assert!(output.get(key).is_some(), "{rank}_output.json lacks {key}");
        }
        assert_eq!(output["potential_caching"], 1);
        for epoch in ["1", "2"] {
            let epoch = &output[epoch];
            for key in [
                "load",
                "proc",
                "compute",
                "au",
                "throughput",
                "host_meminfo",
                "end",
            ] {
                assert!(epoch.get(key).is_some(), "rank {rank} epoch lacks {key}");
            }
        }
    }
    let first = &read(dir.path(), "0_output.json")["1"];
    assert_eq!(first["load"]["block1"].as_array().map(Vec::len), Some(3));
    assert_eq!(first["compute"]["block1"], json!([0.5, 0.5, 0.5]));
    assert_eq!(first["compute"]["eval"], json!([0.25, 0.25, 0.25, 0.25]));
    assert_eq!(first["au"]["block1"], json!(75.0));
    assert_eq!(first["throughput"]["block1"], json!(6.0));
    assert_eq!(first["au"]["eval"], json!(50.0));
    assert_eq!(first["throughput"]["eval"], json!(4.0));
}

#[test]
fn per_epoch_stats_durations_are_strings_and_checkpoints_are_floats() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), true, true);
    let stats = read(dir.path(), "0_per_epoch_stats.json");
    let first = &stats["1"];
    assert!(first["start"].is_string() && first["end"].is_string());
    // Epoch 1 starts at 1000 s and its only block ends at 1002 s.
    assert_eq!(first["duration"], "2.00");
    assert_eq!(first["block1"]["duration"], "2.00");
    assert_eq!(first["eval"]["duration"], "2.00");
    assert_eq!(first["save_ckpt1"]["duration"], json!(2.0));
    // Two ranks of 1 GiB each make a 2 GiB checkpoint.
    assert_eq!(first["save_ckpt1"]["throughput"], json!(1.0));
    assert_eq!(first["load_ckpt1"]["duration"], json!(1.0));
    assert_eq!(first["load_ckpt1"]["throughput"], json!(2.0));
    let keys: Vec<&String> = first
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys.len(), 7, "{keys:?}");

    assert_eq!(read(dir.path(), "per_epoch_stats.json"), stats);
    assert!(dir.path().join("1_per_epoch_stats.json").exists());
}

#[test]
fn files_are_indented_like_python_json_dump() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), true, false);
    let text = std::fs::read_to_string(dir.path().join("summary.json")).expect("summary");
    assert!(
        text.starts_with("{\n    \"start\": "),
        "{}",
        &text[..40.min(text.len())]
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn an_unwritable_output_folder_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").expect("write");
    let reports = reports(false);
    let metrics = aggregate(&reports, &metric_params());
    let error = write_outputs(
        &blocker.join("out"),
        &run(true),
        &host(),
        &metrics,
        &reports,
    )
    .expect_err("a file is in the way");
    assert!(error.to_string().contains("out"), "{error}");
}

#[test]
fn uneven_ranks_per_host_give_per_host_lists_and_each_hosts_share_of_the_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    let reports = reports(false);
    let metrics = aggregate(&reports, &metric_params());
    let big = HostInfo {
        hostname: "big".into(),
        memory_bytes: 4 << 30,
        cpu_count: 8,
        ..host()
    };
    let small = HostInfo {
        hostname: "small".into(),
        memory_bytes: 1 << 28,
        cpu_count: 2,
        ..host()
    };
    let mut info = run(true);
    // Rank 0 on one host, rank 1 on another (reports() has 2 ranks); the dataset is 1 GiB.
    info.hosts = dlio_metrics::group_hosts(vec![
        dlio_metrics::HostShare {
            host: small.clone(),
            ranks: vec![1],
        },
        dlio_metrics::HostShare {
            host: big.clone(),
            ranks: vec![0],
        },
    ]);
    write_outputs(dir.path(), &info, &big, &metrics, &reports).expect("outputs written");
    let summary = read(dir.path(), "summary.json");
    assert_eq!(summary["num_hosts"], 2);
    assert_eq!(summary["host_cpu_count"], json!([8, 2]));
    // Each host reads half of 1 GiB: it fits in 4 GiB, not in 256 MiB.
    assert_eq!(summary["potential_caching"], json!([1, 0]));
    assert!((summary["data_size_per_host_GB"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    assert_eq!(read(dir.path(), "1_output.json")["hostname"], "small");
    assert_eq!(read(dir.path(), "0_output.json")["hostname"], "big");
}
