//! End-to-end behaviour of the `dlio` binary: what a user runs, what lands on disk.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{dlio, json, run_err, run_ok};

/// Files below `dir` (recursively) ending in `.ext`.
fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_with_ext(&p, ext));
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A small npz workload: `files` train files of one 4 KiB sample, no compute.
fn small(tmp: &Path, files: u64, batch: u64) -> Vec<String> {
    vec![
        "workload=default".into(),
        format!(
            "++workload.dataset.data_folder={}",
            tmp.join("data").display()
        ),
        format!("++workload.dataset.num_files_train={files}"),
        "++workload.dataset.num_files_eval=0".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.dataset.num_subfolders_eval=0".into(),
        format!("++workload.reader.batch_size={batch}"),
        "++workload.workflow.evaluation=False".into(),
        "++workload.train.computation_time=0".into(),
        "++workload.train.epochs=1".into(),
        format!("++workload.output.folder={}", tmp.join("out").display()),
    ]
}

#[test]
fn no_arguments_prints_help() {
    let out = dlio().output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Usage"), "{text}");
    assert!(text.contains("run"), "{text}");
}

#[test]
fn first_contact_run_generates_trains_and_writes_a_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("first");
    let started = std::time::Instant::now();
    let out = run_ok(
        dlio()
            .arg("run")
            .arg(format!("hydra.run.dir={}", out_dir.display())),
    );
    assert!(
        started.elapsed().as_secs() < 60,
        "first contact took {:?}",
        started.elapsed()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("[METRIC] Training Accelerator Utilization [AU] (%)"),
        "{stdout}"
    );
    let summary = json(&out_dir.join("summary.json"));
    assert_eq!(summary["num_accelerators"], 1);
    assert_eq!(summary["num_files_train"], 64);
    assert_eq!(summary["epochs"], 2);
    let au = summary["metric"]["train_au_mean_percentage"]
        .as_f64()
        .unwrap();
    assert!(au > 0.0 && au <= 100.0, "AU {au}");
    assert!(summary["metric"]["eval_au_mean_percentage"].is_number());
    assert_eq!(summary["dlio_rs"]["complete"], true);
    assert!(out_dir.join("0_output.json").exists());
    assert!(out_dir.join("per_epoch_stats.json").exists());
    assert!(out_dir.join("dlio.log").exists());
    assert!(out_dir.join(".hydra/config.yaml").exists());
}

#[test]
fn generation_writes_dlio_names_in_subfolders() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    run_ok(dlio().args([
        "generate".to_string(),
        "workload=default".into(),
        format!("++workload.dataset.data_folder={}", data.display()),
        format!(
            "++workload.output.folder={}",
            tmp.path().join("out").display()
        ),
    ]));
    let train = files_with_ext(&data.join("train"), "npz");
    let valid = files_with_ext(&data.join("valid"), "npz");
    assert_eq!(train.len(), 64);
    assert_eq!(valid.len(), 8);
    assert!(data.join("train/0/img_00_of_64.npz").exists());
    assert!(data.join("train/1/img_01_of_64.npz").exists());
    assert!(data.join("valid/1/img_7_of_8.npz").exists());
    // No temporary files are left behind.
    let all: Vec<_> = files_with_ext(&data, "partial");
    assert!(all.is_empty(), "{all:?}");
}

#[test]
fn storage_root_prefixes_the_data_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("runs");
    run_ok(dlio().args([
        "generate".to_string(),
        "workload=default".into(),
        format!("++workload.storage.storage_root={}", root.display()),
        "++workload.dataset.data_folder=data/x".into(),
        "++workload.dataset.num_files_train=16".into(),
        format!(
            "++workload.output.folder={}",
            tmp.path().join("out").display()
        ),
    ]));
    assert_eq!(files_with_ext(&root.join("data/x/train"), "npz").len(), 16);
}

#[test]
fn bytes_read_equal_the_bytes_of_the_files_the_plan_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 4);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.epochs=2".into());
    run_ok(dlio().arg("run").args(&args));
    let files = files_with_ext(&tmp.path().join("data/train"), "npz");
    assert_eq!(files.len(), 12);
    let on_disk: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    let summary = json(&tmp.path().join("out/summary.json"));
    // npz on_demand reads the whole file for each sample; 12 samples, 2 epochs, nothing trimmed.
    assert_eq!(
        summary["dlio_rs"]["bytes_read"].as_u64().unwrap(),
        2 * on_disk
    );
}

/// `dataset.sample_companions`: generation writes one companion of the size asked beside
/// each data file, in its own folder at the file's place, and each sample's read reads its
/// file's companion whole (2 ranks: each reads its own samples').
#[test]
fn each_sample_reads_its_files_companion_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 3);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.epochs=2".into());
    args.push(
        "++workload.dataset.sample_companions=[{folder: calib/lidar, size_bytes: 1620}]".into(),
    );
    args.push("--ranks=2".into());
    run_ok(dlio().arg("run").args(&args));
    let files = files_with_ext(&tmp.path().join("data/train"), "npz");
    assert_eq!(files.len(), 12);
    let companions = files_with_ext(&tmp.path().join("data/calib/lidar/train"), "bin");
    let stems = |v: &[PathBuf]| -> Vec<String> {
        v.iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(stems(&companions), stems(&files));
    assert!(
        companions
            .iter()
            .all(|c| c.metadata().unwrap().len() == 1620)
    );
    // Nothing beside the data files in the split's own folder.
    assert_eq!(
        std::fs::read_dir(tmp.path().join("data/train"))
            .unwrap()
            .count(),
        12
    );
    let on_disk: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(
        summary["dlio_rs"]["bytes_read"].as_u64().unwrap(),
        2 * on_disk + 2 * 12 * 1620
    );
}

/// `reader.header_scan_bytes`: one pass over the first bytes of each file a rank trains on,
/// before its first epoch, and only then (two ranks: each scans its own files).
#[test]
fn a_header_scan_reads_the_first_bytes_of_each_file_once_before_training() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 3);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.epochs=2".into());
    args.push("++workload.reader.header_scan_bytes=1000".into());
    args.push("--ranks=2".into());
    run_ok(dlio().arg("run").args(&args));
    let files = files_with_ext(&tmp.path().join("data/train"), "npz");
    assert_eq!(files.len(), 12);
    let on_disk: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(
        summary["dlio_rs"]["bytes_read"].as_u64().unwrap(),
        2 * on_disk + 12 * 1000
    );
}

/// `reader.epoch_start_time`: every training epoch waits for its loader's start-up before its
/// readers begin, and reads what it read without it; a negative time is refused by its key.
#[test]
fn each_epoch_waits_for_its_loaders_start_up() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 8, 4);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.epochs=2".into());
    args.push("++workload.reader.epoch_start_time=0.4".into());
    run_ok(dlio().arg("run").args(&args));
    let on_disk: u64 = files_with_ext(&tmp.path().join("data/train"), "npz")
        .iter()
        .map(|f| f.metadata().unwrap().len())
        .sum();
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(
        summary["dlio_rs"]["bytes_read"].as_u64().unwrap(),
        2 * on_disk
    );
    let epochs = json(&tmp.path().join("out/per_epoch_stats.json"));
    for epoch in ["1", "2"] {
        let duration: f64 = epochs[epoch]["duration"].as_str().unwrap().parse().unwrap();
        assert!(duration >= 0.4, "epoch {epoch}: {duration} s");
    }
    let mut negative = args.clone();
    negative.push("++workload.reader.epoch_start_time=-1".into());
    let err = run_err(dlio().arg("run").args(&negative));
    assert!(err.contains("reader.epoch_start_time"), "{err}");
}

/// `reader.drop_last: False` reads an epoch's last, short batch (PyTorch's default); DLIO's
/// loaders drop it, as the default does.
#[test]
fn the_last_short_batch_is_read_only_without_drop_last() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 10, 4);
    args.push("++workload.workflow.generate_data=True".into());
    run_ok(dlio().arg("run").args(&args));
    let sizes: Vec<u64> = files_with_ext(&tmp.path().join("data/train"), "npz")
        .iter()
        .map(|f| f.metadata().unwrap().len())
        .collect();
    assert_eq!(sizes.len(), 10);
    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{sizes:?}");
    let read = |tmp: &Path| -> u64 {
        json(&tmp.join("out/summary.json"))["dlio_rs"]["bytes_read"]
            .as_u64()
            .unwrap()
    };
    // Two steps of 4: 8 of the 10 files.
    assert_eq!(read(tmp.path()), 8 * sizes[0]);
    args.push("++workload.workflow.generate_data=False".into());
    args.push("++workload.reader.drop_last=False".into());
    run_ok(dlio().arg("run").args(&args));
    // Three steps, the last of 2: every file.
    assert_eq!(read(tmp.path()), 10 * sizes[0]);
}

#[test]
fn skip_listing_reads_the_computed_names_and_refuses_a_missing_one() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 4);
    args.push("++workload.dataset.num_subfolders_train=3".into());
    run_ok(
        dlio()
            .arg("generate")
            .args(&args)
            .arg("++workload.dataset.num_files_eval=0"),
    );
    // An unrelated file in a subfolder: listing would skip it by its extension; the computed
    // names never see it.
    std::fs::write(tmp.path().join("data/train/0/notes.txt"), b"x").unwrap();
    let mut skipping = args.clone();
    skipping.push("++workload.dataset.skip_listing=True".into());
    skipping.push("++workload.dataset.listing_validation_interval=5".into());
    run_ok(dlio().arg("run").args(&skipping));
    let files = files_with_ext(&tmp.path().join("data/train"), "npz");
    assert_eq!(files.len(), 12);
    let on_disk: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(summary["num_files_train"], 12);
    assert_eq!(summary["dlio_rs"]["bytes_read"].as_u64().unwrap(), on_disk);
    assert_eq!(
        summary["dlio_rs"]["memory_check"]["dataset_bytes"].as_u64(),
        Some(on_disk)
    );
    // Sized from the files the checks found (0, 5, 10 and the last: every 5th), not by
    // asking for every file again.
    assert_eq!(
        summary["dlio_rs"]["memory_check"]["dataset_bytes_from_files"],
        4
    );
    // File 10 is checked (every 5th: 0, 5, 10, and the last); its absence is named.
    let missing = tmp.path().join("data/train/1/img_10_of_12.npz");
    std::fs::remove_file(&missing).unwrap();
    let err = run_err(dlio().arg("run").args(&skipping));
    assert!(
        err.contains(&missing.display().to_string()) && err.contains("skip_listing=False"),
        "{err}"
    );
}

#[test]
fn tensorflow_with_no_read_threads_reads_on_one_as_dlio_does() {
    // Each 64 KiB sample takes 0.1 s on a throttled engine, each step computes 0.2 s: read in
    // line (PyTorch's read_threads 0), a step waits for its read (AU about 67%); read by one
    // thread (tf.data, which DLIO raises from 0 to 1), the read hides behind the compute.
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 8, 1);
    args.push("++workload.dataset.record_length_bytes=65536".into());
    args.push("++workload.dataset.record_length_bytes_stdev=0".into());
    run_ok(dlio().arg("generate").args(&args));
    args.push("++workload.reader.read_threads=0".into());
    args.push("++workload.train.computation_time=0.2".into());
    args.push("++workload.storage.read_bytes_per_second=655360".into());
    let au = |loader: &str| {
        let out = run_ok(
            dlio()
                .arg("run")
                .args(&args)
                .arg(format!("++workload.reader.data_loader={loader}"))
                .arg(format!("++workload.framework={loader}")),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let summary = json(&tmp.path().join("out/summary.json"));
        let au = summary["metric"]["train_au_mean_percentage"]
            .as_f64()
            .unwrap();
        (au, stderr)
    };
    let (tf_au, tf_log) = au("tensorflow");
    assert!(
        tf_log.contains("the tensorflow data loader does not take; 1 is used"),
        "{tf_log}"
    );
    assert!(tf_au > 85.0, "tensorflow AU {tf_au}");
    let (torch_au, torch_log) = au("pytorch");
    assert!(!torch_log.contains("1 is used"), "{torch_log}");
    assert!(torch_au < 80.0, "pytorch AU {torch_au}");
}

#[test]
fn uneven_samples_on_three_ranks_finish_with_equal_steps() {
    for (files, batch) in [(13u64, 4u64), (24, 4), (25, 4), (145, 16)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = small(tmp.path(), files, batch);
        args.push("++workload.workflow.generate_data=True".into());
        args.push("++workload.train.epochs=3".into());
        args.push("++workload.dataset.record_length_bytes=512".into());
        run_ok(dlio().args(["run", "--ranks", "3"]).args(&args));
        let out = tmp.path().join("out");
        let summary = json(&out.join("summary.json"));
        assert_eq!(summary["num_accelerators"], 3, "{files}/{batch}");
        let steps = files / (batch * 3);
        for rank in 0..3 {
            let o = json(&out.join(format!("{rank}_output.json")));
            for epoch in ["1", "2", "3"] {
                let n = o[epoch]["compute"]["block1"].as_array().unwrap().len() as u64;
                assert_eq!(
                    n, steps,
                    "rank {rank} epoch {epoch} for {files} files, batch {batch}"
                );
            }
        }
    }
}

#[test]
fn a_subset_of_the_generated_files_is_trained() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 16, 2);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.workflow.train=False".into());
    run_ok(dlio().arg("run").args(&args));
    let mut args = small(tmp.path(), 8, 2);
    args.push("++workload.train.epochs=1".into());
    run_ok(dlio().arg("run").args(&args));
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(summary["num_files_train"], 8);
    assert_eq!(summary["dlio_rs"]["opens"].as_u64().unwrap(), 8);
}

#[test]
fn every_computation_time_distribution_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut gen_args = small(tmp.path(), 8, 2);
    gen_args.push("++workload.workflow.generate_data=True".into());
    gen_args.push("++workload.workflow.train=False".into());
    run_ok(dlio().arg("run").args(&gen_args));
    let cases: &[&[&str]] = &[
        &[
            "++workload.train.computation_time.type=uniform",
            "++workload.train.computation_time.min=0.001",
            "++workload.train.computation_time.max=0.002",
        ],
        &[
            "++workload.train.computation_time.type=normal",
            "++workload.train.computation_time.mean=0.001",
            "++workload.train.computation_time.stdev=0.0005",
        ],
        &[
            "++workload.train.computation_time.type=gamma",
            "++workload.train.computation_time.shape=1.0",
            "++workload.train.computation_time.scale=0.001",
        ],
        &[
            "++workload.train.computation_time.type=exponential",
            "++workload.train.computation_time.scale=0.001",
        ],
        &[
            "++workload.train.computation_time.type=poisson",
            "++workload.train.computation_time.lam=0.001",
        ],
        &["++workload.train.computation_time={mean: 0.001}"],
        &["++workload.train.computation_time={mean: 0.001, stdev: 0.0001}"],
        &["++workload.train.computation_time=0.002"],
    ];
    for case in cases {
        let mut args = small(tmp.path(), 8, 2);
        args.retain(|a| !a.contains("computation_time"));
        args.extend(case.iter().map(|s| s.to_string()));
        run_ok(dlio().arg("run").args(&args));
        let summary = json(&tmp.path().join("out/summary.json"));
        let au = summary["metric"]["train_au_mean_percentage"]
            .as_f64()
            .unwrap();
        assert!(au > 0.0 && au <= 100.0, "{case:?}: AU {au}");
    }
}

#[test]
fn read_threads_zero_one_two_and_evaluation_run() {
    let tmp = tempfile::tempdir().unwrap();
    for threads in [0, 1, 2] {
        let mut args = small(tmp.path(), 8, 2);
        args.retain(|a| !a.contains("evaluation=False") && !a.contains("num_files_eval"));
        args.push("++workload.workflow.generate_data=True".into());
        args.push("++workload.dataset.num_files_eval=4".into());
        args.push("++workload.reader.batch_size_eval=2".into());
        args.push("++workload.evaluation.eval_time=0.001".into());
        args.push("++workload.train.epochs=2".into());
        args.push(format!("++workload.reader.read_threads={threads}"));
        run_ok(dlio().arg("run").args(&args));
        let summary = json(&tmp.path().join("out/summary.json"));
        assert!(
            summary["metric"]["eval_throughput_mean_samples_per_second"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        let o = json(&tmp.path().join("out/0_output.json"));
        assert_eq!(
            o["2"]["compute"]["eval"].as_array().unwrap().len(),
            2,
            "threads {threads}"
        );
        assert_eq!(
            o["2"]["compute"]["block1"].as_array().unwrap().len(),
            4,
            "threads {threads}"
        );
    }
}

/// `args` with an evaluation split of 4 files read in batches of 2 (data generated).
fn with_evaluation(mut args: Vec<String>) -> Vec<String> {
    args.retain(|a| !a.contains("evaluation=False") && !a.contains("num_files_eval"));
    for arg in [
        "++workload.workflow.generate_data=True",
        "++workload.workflow.evaluation=True",
        "++workload.dataset.num_files_eval=4",
        "++workload.reader.batch_size_eval=2",
    ] {
        args.push(arg.into());
    }
    args
}

#[test]
fn evaluations_every_few_steps_fall_inside_epochs_and_split_the_blocks() {
    // 8 files in batches of 2: 4 steps an epoch; an evaluation (4 files, 2 steps) after every
    // 2 steps of the run: two passes in each epoch, one of them mid-epoch.
    let tmp = tempfile::tempdir().unwrap();
    let mut args = with_evaluation(small(tmp.path(), 8, 2));
    args.push("++workload.evaluation.eval_time=0.001".into());
    args.push("++workload.evaluation.steps_between_evals=2".into());
    args.push("++workload.train.epochs=2".into());
    run_ok(dlio().arg("run").args(&args));
    let o = json(&tmp.path().join("out/0_output.json"));
    for epoch in ["1", "2"] {
        let compute = &o[epoch]["compute"];
        assert_eq!(
            compute["eval"].as_array().unwrap().len(),
            4,
            "{epoch}: {compute}"
        );
        assert_eq!(
            compute["block1"].as_array().unwrap().len(),
            2,
            "{epoch}: {compute}"
        );
        assert_eq!(
            compute["block2"].as_array().unwrap().len(),
            2,
            "{epoch}: {compute}"
        );
    }
    let stats = json(&tmp.path().join("out/per_epoch_stats.json"));
    assert!(stats["2"]["eval"]["duration"].is_string(), "{stats}");
    // Without workflow.evaluation, the key would do nothing: refused.
    let mut off = small(tmp.path(), 8, 2);
    off.push("++workload.evaluation.steps_between_evals=2".into());
    let err = run_err(dlio().arg("run").args(&off));
    assert!(err.contains("evaluation.steps_between_evals"), "{err}");
}

#[test]
fn an_evaluation_pass_reads_only_its_steps_of_the_split() {
    // 4 evaluation files in batches of 2 hold 2 steps; steps_per_eval 1 reads one of them
    // after each of the 2 epochs.
    let tmp = tempfile::tempdir().unwrap();
    let mut args = with_evaluation(small(tmp.path(), 8, 2));
    args.push("++workload.evaluation.steps_per_eval=1".into());
    args.push("++workload.train.epochs=2".into());
    run_ok(dlio().arg("run").args(&args));
    let o = json(&tmp.path().join("out/0_output.json"));
    for epoch in ["1", "2"] {
        let compute = &o[epoch]["compute"];
        assert_eq!(
            compute["eval"].as_array().unwrap().len(),
            1,
            "{epoch}: {compute}"
        );
        assert_eq!(
            compute["block1"].as_array().unwrap().len(),
            4,
            "{epoch}: {compute}"
        );
    }
    // Without workflow.evaluation, the key would do nothing: refused.
    let mut off = small(tmp.path(), 8, 2);
    off.push("++workload.evaluation.steps_per_eval=1".into());
    let err = run_err(dlio().arg("run").args(&off));
    assert!(err.contains("evaluation.steps_per_eval"), "{err}");
}

#[test]
fn evaluation_files_of_a_sample_size_of_their_own_are_generated_and_read_at_it() {
    // Training samples of 16 KiB, evaluation samples of 1000 bytes (a 31 x 31 square, as DLIO
    // makes a length's shape), 4 a file; evaluation files 1 and 2 of them read whole a pass.
    let tmp = tempfile::tempdir().unwrap();
    for (format, eval_file, eval_read) in [
        // 4 x 961 bytes of records and their 32-byte index beside each file.
        ("indexed_binary", 3844, 2 * (3844 + 64)),
        // npy holds one array a file (4 samples of 961 bytes) after its 128-byte header, and
        // DLIO's npy reader loads the whole file for each of its samples.
        ("npy", 3844 + 128, 8 * (3844 + 128)),
    ] {
        let root = tmp.path().join(format);
        let mut args = with_evaluation(small(&root, 4, 2));
        args.extend([
            format!("++workload.dataset.format={format}"),
            "++workload.dataset.num_files_eval=2".into(),
            "++workload.dataset.num_samples_per_file=4".into(),
            "++workload.dataset.record_length_bytes=16384".into(),
            "++workload.dataset.record_length_bytes_eval=1000".into(),
            "++workload.reader.batch_size_eval=4".into(),
        ]);
        run_ok(dlio().arg("run").args(&args));
        let size = |dir: &str| -> Vec<u64> {
            let mut sizes: Vec<u64> = std::fs::read_dir(root.join("data").join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| !p.to_string_lossy().ends_with(".idx") && !p.is_dir())
                .map(|p| std::fs::metadata(p).unwrap().len())
                .filter(|&n| n > 64)
                .collect();
            sizes.sort_unstable();
            sizes
        };
        assert_eq!(size("valid"), vec![eval_file; 2], "{format}");
        assert!(size("train").iter().all(|&n| n >= 4 * 16384), "{format}");
        let summary = json(&root.join("out/summary.json"));
        let eval = &summary["dlio_rs"]["eval"]["io"];
        assert_eq!(
            eval["bytes_read"].as_u64(),
            Some(eval_read),
            "{format}: {eval}"
        );
        assert_eq!(eval["samples"].as_u64(), Some(8), "{format}: {eval}");
    }
    // A size of its own that is not a size is refused, naming the key.
    let mut bad = with_evaluation(small(tmp.path(), 4, 2));
    bad.push("++workload.dataset.record_length_bytes_eval=-5".into());
    let err = run_err(dlio().arg("run").args(&bad));
    assert!(err.contains("dataset.record_length_bytes_eval"), "{err}");
}

#[test]
fn dlio_benchmark_behaves_like_dlio_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 4, 2);
    args.push("++workload.workflow.generate_data=True".into());
    let out = Command::new(env!("CARGO_BIN_EXE_dlio_benchmark"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp.path().join("out/summary.json").exists());
}

#[test]
fn a_missing_data_folder_says_how_to_generate_it() {
    let tmp = tempfile::tempdir().unwrap();
    let err = run_err(dlio().arg("run").args(small(tmp.path(), 4, 2)));
    assert!(
        err.contains("++workload.workflow.generate_data=True"),
        "{err}"
    );
    assert!(
        err.contains(&tmp.path().join("data").display().to_string()),
        "{err}"
    );
}

#[test]
fn fewer_files_than_configured_says_how_many_of_each() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 4, 2);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.workflow.train=False".into());
    run_ok(dlio().arg("run").args(&args));
    let err = run_err(dlio().arg("run").args(small(tmp.path(), 6, 2)));
    assert!(
        err.contains("4 .npz files") && err.contains("is 6"),
        "{err}"
    );
}

#[test]
fn a_truncated_file_is_named_in_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 4, 2);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.workflow.train=False".into());
    run_ok(dlio().arg("run").args(&args));
    let victim = files_with_ext(&tmp.path().join("data/train"), "npz")[2].clone();
    let len = victim.metadata().unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap();
    f.set_len(len / 2).unwrap();
    // Upstream's readers parse the file (MLPerf Storage's fork reads its bytes, whatever they
    // are: tests/mlperf.rs).
    let err = run_err(dlio().args(["run", "--semantics", "upstream"]).args(small(
        tmp.path(),
        4,
        2,
    )));
    let name = victim.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains(&name), "{err}");
}

#[test]
fn an_unknown_workload_lists_what_exists() {
    let err = run_err(dlio().args(["run", "workload=unet3d_z100"]));
    assert!(
        err.contains("unet3d_h100") && err.contains("resnet50_a100"),
        "{err}"
    );
}

#[test]
fn malformed_yaml_names_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.yaml");
    std::fs::write(
        &file,
        "dataset:\n  format: npz\n  num_files_train: [1, 2\nreader:\n  batch_size: 1\n",
    )
    .unwrap();
    let err = run_err(dlio().args(["run".to_string(), format!("workload={}", file.display())]));
    assert!(err.contains("bad.yaml"), "{err}");
    assert!(err.contains("line"), "{err}");
}

#[test]
fn config_query_prints_one_value_and_workloads_lists_all() {
    let out = run_ok(dlio().args([
        "config",
        "workload=resnet50_h100",
        "--query",
        "dataset.num_files_train",
    ]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1024");
    let out = run_ok(dlio().arg("workloads"));
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "default",
        "unet3d_h100",
        "resnet50_tf",
        "llama_70b",
        "dlrm",
        "megatron_deepspeed_LLNL",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert!(
        text.lines().filter(|l| !l.trim().is_empty()).count() >= 24,
        "{text}"
    );
}

#[test]
fn ctrl_c_stops_the_run_and_marks_the_summary_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 8, 1);
    args.retain(|a| !a.contains("computation_time") && !a.contains("epochs"));
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.computation_time=0.5".into());
    args.push("++workload.train.epochs=100".into());
    let child = dlio()
        .arg("run")
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until training has started (the first summary-relevant step), then interrupt.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed().as_secs() < 10,
        "took {:?} to stop",
        started.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(summary["dlio_rs"]["complete"], false);
}

/// Counts (cat, name) of the events of a gzipped dftracer trace.
fn trace_counts(path: &Path) -> std::collections::HashMap<(String, String), u64> {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut counts = std::collections::HashMap::new();
    for line in text.lines() {
        let line = line.trim().trim_end_matches(',');
        if line.is_empty() || line == "[" || line == "]" {
            continue;
        }
        let e: Value = serde_json::from_str(line).unwrap();
        let key = (
            e["cat"].as_str().unwrap().to_string(),
            e["name"].as_str().unwrap().to_string(),
        );
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

#[test]
fn trace_flag_writes_dftracer_events_for_every_step_and_io_call() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 2);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.epochs=2".into());
    run_ok(dlio().args(["run", "--trace", "--ranks", "2"]).args(&args));
    let out = tmp.path().join("out");
    for rank in 0..2 {
        let c = trace_counts(&out.join(format!("trace-{rank}-of-2.pfw.gz")));
        let n = |cat: &str, name: &str| {
            c.get(&(cat.to_string(), name.to_string()))
                .copied()
                .unwrap_or(0)
        };
        // 12 files, batch 2, 2 ranks: 3 steps per epoch, 2 epochs.
        // One train span per epoch, as DLIO's `_train`.
        assert_eq!(n("pipeline", "train"), 2);
        assert_eq!(n("pipeline", "epoch.block"), 2);
        // A preprocess span after every sample, as DLIO's readers have.
        assert_eq!(n("data", "preprocess"), n("data", "item"));
        assert_eq!(n("data", "item"), 12);
        assert_eq!(n("dataloader", "fetch.iter"), 6);
        assert_eq!(n("compute", "compute"), 6);
        assert_eq!(n("comm", "barrier"), 6);
        // npz on_demand: one open, one whole-file read and one close per sample.
        assert_eq!(n("POSIX", "open"), 12, "{c:?}");
        assert_eq!(n("POSIX", "pread"), 12);
        assert_eq!(n("POSIX", "close"), 12);
        assert_eq!(
            n("data", "item"),
            12,
            "one per sample this rank read in 2 epochs"
        );
    }
}

#[test]
fn the_analysis_of_a_traced_run_counts_the_bytes_and_reads_the_summary_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 2);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.train.epochs=2".into());
    args.push("++workload.reader.transfer_size=1024".into());
    run_ok(dlio().args(["run", "--trace", "--ranks", "2"]).args(&args));
    let out = tmp.path().join("out");
    run_ok(dlio().arg("analyze").arg(&out));
    let summary = json(&out.join("summary.json"));
    let analysis = json(&out.join("analysis.json"));
    let reads = &analysis["transfer_sizes"]["read"];
    assert_eq!(reads["bytes"], summary["dlio_rs"]["bytes_read"], "{reads}");
    assert_eq!(reads["ops"], summary["dlio_rs"]["read_ops"], "{reads}");
    assert!(out.join("analysis.html").exists());
}

#[test]
fn python_only_settings_are_said_to_have_no_effect() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 4, 2);
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.reader.dont_use_mmap=True".into());
    args.push("++workload.reader.multiprocessing_context=spawn".into());
    let out = run_ok(dlio().arg("run").args(&args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reader.dont_use_mmap") && stderr.contains("no effect"),
        "{stderr}"
    );
    assert!(
        stderr.contains("reader.multiprocessing_context"),
        "{stderr}"
    );
}

#[test]
fn profiling_with_profiler_none_runs_and_other_profilers_are_refused_by_name() {
    // Upstream's `profiler: none` is a no-op profiler: `workflow.profiling: True` then runs.
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 4, 2);
    args.push("++workload.workflow.profiling=True".into());
    args.push("++workload.workflow.generate_data=True".into());
    let none = run_ok(
        dlio()
            .arg("run")
            .args(&args)
            .arg("++workload.profiling.profiler=none"),
    );
    assert!(none.status.success());
    assert!(tmp.path().join("out/summary.json").exists());
    let err = run_err(
        dlio()
            .arg("run")
            .args(&args)
            .arg("++workload.profiling.profiler=darshan"),
    );
    assert!(
        err.contains("profiling.profiler darshan")
            && err.contains("profiler=none")
            && err.contains("--trace"),
        "{err}"
    );
    let err = run_err(
        dlio()
            .arg("run")
            .args(&args)
            .arg("++workload.profiling.profiler=tensorboard"),
    );
    assert!(
        err.contains("profiling.profiler tensorboard") && err.contains("--trace"),
        "{err}"
    );
}

/// Sectors read and written by the device named `name`, from `/proc/diskstats`.
fn diskstats_sectors(name: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&name)).then(|| (f[5].parse().unwrap(), f[9].parse().unwrap()))
    })
}

#[test]
fn iostat_profiling_writes_sysstat_figures_that_match_the_kernels_counters() {
    // On the checkout's disk (a temporary folder may be tmpfs, which has no device).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut args = small(tmp.path(), 32, 4);
    args.extend([
        "++workload.workflow.generate_data=True".to_string(),
        "++workload.dataset.record_length_bytes=1048576".into(),
        "++workload.dataset.format=npy".into(),
        "++workload.storage.drop_page_cache=True".into(),
        "++workload.train.computation_time=0.25".into(),
        "++workload.workflow.profiling=True".into(),
        "++workload.profiling.profiler=iostat".into(),
    ]);
    // The whole-disk devices iostat reports by default; the test reads their counters too.
    let whole_disks: Vec<String> = std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let before: Vec<_> = whole_disks.iter().map(|d| diskstats_sectors(d)).collect();
    run_ok(dlio().arg("run").args(&args));
    let after: Vec<_> = whole_disks.iter().map(|d| diskstats_sectors(d)).collect();

    let out = tmp.path().join("out");
    let doc = json(&out.join("iostat.json"));
    let host = &doc["sysstat"]["hosts"][0];
    let stats = host["statistics"].as_array().unwrap();
    // 8 steps of 0.25 s: at least one full second and the partial last one.
    assert!(stats.len() >= 2, "{stats:?}");
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["dlio_rs"]["profiler"]["intervals"], stats.len());
    let mut cpu_total = 0.0;
    let mut read_mib: std::collections::HashMap<String, f64> = Default::default();
    let mut written_mib: std::collections::HashMap<String, f64> = Default::default();
    for s in stats {
        let dt = s["interval_seconds"].as_f64().unwrap();
        assert!(dt > 0.05 && dt < 1.5, "{s}");
        let cpu = &s["avg-cpu"];
        let sum: f64 = ["user", "nice", "system", "iowait", "steal", "idle"]
            .iter()
            .map(|k| cpu[*k].as_f64().unwrap())
            .sum();
        assert!(
            (sum - 100.0).abs() < 0.5 || sum == 0.0,
            "CPU split sums to {sum}: {cpu}"
        );
        cpu_total += sum;
        for d in s["disk"].as_array().unwrap() {
            let name = d["disk_device"].as_str().unwrap().to_string();
            *read_mib.entry(name.clone()).or_default() += d["rMB/s"].as_f64().unwrap() * dt;
            *written_mib.entry(name).or_default() += d["wMB/s"].as_f64().unwrap() * dt;
        }
    }
    assert!(cpu_total > 0.0);
    // Each device's figures fall inside what the kernel counted around the whole command
    // (rates are rounded to 0.01 MB/s per interval).
    let slack = 0.01 * stats.len() as f64 + 0.01;
    for (i, disk) in whole_disks.iter().enumerate() {
        let (Some((r0, w0)), Some((r1, w1))) = (before[i], after[i]) else {
            continue;
        };
        let mib = |sectors: u64| sectors as f64 * 512.0 / 1_048_576.0;
        if let Some(&r) = read_mib.get(disk) {
            assert!(
                r <= mib(r1 - r0) + slack,
                "{disk}: iostat {r} MiB read, kernel {}",
                mib(r1 - r0)
            );
            assert!(written_mib[disk] <= mib(w1 - w0) + slack, "{disk}: writes");
        }
    }
    // And the data folder's device delivered the run's reads inside the profiled window:
    // what dlio's own device check saw, iostat saw too.
    let device = &summary["dlio_rs"]["io_engine"]["per_process"][0]["device"];
    if let (Some(name), Some(delivered)) = (
        device["device"].as_str(),
        device["bytes_delivered"].as_u64(),
    ) {
        let profiled = read_mib
            .iter()
            .find(|(d, _)| name.starts_with(d.as_str()))
            .map(|(_, r)| *r);
        if let Some(profiled) = profiled {
            let delivered = delivered as f64 / 1_048_576.0;
            assert!(
                profiled + slack >= 0.95 * delivered,
                "{name}: iostat saw {profiled} MiB read, the device delivered {delivered} MiB"
            );
        }
    }
}

#[test]
fn dlio_log_level_is_honoured_as_dlio_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 8, 2);
    args.push("++workload.workflow.generate_data=True".into());
    let text = |out: &std::process::Output| {
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    // error: neither progress (OUTPUT), warnings nor metric lines.
    let quiet = run_ok(
        dlio()
            .env("DLIO_LOG_LEVEL", "error")
            .args(["run", "--ranks", "2"])
            .args(&args),
    );
    let quiet = text(&quiet);
    for tag in ["[OUTPUT]", "[METRIC]", "[WARNING]", "[INFO]"] {
        assert!(!quiet.contains(tag), "{tag} at level error:\n{quiet}");
    }
    // The default shows progress and metrics, not the per-step lines.
    let default = text(&run_ok(
        dlio()
            .env_remove("DLIO_LOG_LEVEL")
            .args(["run", "--ranks", "2"])
            .args(&args),
    ));
    assert!(
        default.contains("[OUTPUT]") && default.contains("[METRIC]"),
        "{default}"
    );
    assert!(!default.contains("[INFO]"), "{default}");
    // info: every rank's every step, loaded and processed.
    let info = text(&run_ok(
        dlio()
            .env("DLIO_LOG_LEVEL", "INFO")
            .args(["run", "--ranks", "2"])
            .args(&args),
    ));
    for rank in 0..2 {
        for step in 1..=2 {
            for what in ["loaded 2 samples in", "processed 2 samples in"] {
                let line = format!("Rank {rank} step {step}");
                assert!(
                    info.lines()
                        .any(|l| l.starts_with("[INFO]") && l.contains(&line) && l.contains(what)),
                    "no `{line} ... {what}` line:\n{info}"
                );
            }
        }
    }
    assert!(!info.contains("[DEBUG]"), "{info}");
    let debug = text(&run_ok(
        dlio()
            .env("DLIO_LOG_LEVEL", "debug")
            .args(["run", "--ranks", "2"])
            .args(&args),
    ));
    assert!(
        debug.contains("[DEBUG]") && debug.contains("Rank 1 returned after 2 steps"),
        "{debug}"
    );
    // A level DLIO does not know is refused, naming the variable and the levels.
    let err = run_err(
        dlio()
            .env("DLIO_LOG_LEVEL", "verbose")
            .args(["run"])
            .args(&args),
    );
    assert!(
        err.contains("DLIO_LOG_LEVEL") && err.contains("critical"),
        "{err}"
    );
}

/// When the steps the metric window leaves out hold most of an epoch's time, the figures
/// describe only the rest: the log and `summary.json` say how much was left out and what to
/// change; when they do not, nothing is said.
#[test]
fn a_metric_window_that_leaves_out_most_of_the_time_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |exclude: u64, out: &str| -> (Value, String) {
        let mut args = small(tmp.path(), 12, 1);
        args.retain(|a| !a.contains("computation_time") && !a.contains("output.folder"));
        args.extend([
            "++workload.workflow.generate_data=True".into(),
            "++workload.train.computation_time=0.05".into(),
            format!("++workload.output.metric.exclude_start_steps={exclude}"),
            format!(
                "++workload.output.folder={}",
                tmp.path().join(out).display()
            ),
        ]);
        let output = run_ok(dlio().arg("run").args(&args));
        let summary = json(&tmp.path().join(out).join("summary.json"));
        (
            summary,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // 9 of 12 equal steps left out: about 75% of the time.
    let (summary, log) = run(9, "most");
    let window = &summary["dlio_rs"]["metric_window"];
    let share = window["largest_excluded_fraction"].as_f64().unwrap();
    assert!((0.6..=1.0).contains(&share), "{window}");
    assert_eq!(window["exclude_start_steps"], 9);
    assert_eq!(window["per_epoch"].as_array().unwrap().len(), 1, "{window}");
    let warning = window["warning"].as_str().expect("a warning");
    assert!(
        warning.contains("exclude_start_steps=9") && warning.contains("epoch 1"),
        "{warning}"
    );
    assert!(log.contains("the metric window left out"), "{log}");
    // The default window (the first step) leaves out a twelfth.
    let (summary, log) = run(1, "some");
    let window = &summary["dlio_rs"]["metric_window"];
    assert!(
        window["largest_excluded_fraction"].as_f64().unwrap() < 0.5,
        "{window}"
    );
    assert!(window["warning"].is_null(), "{window}");
    assert!(!log.contains("the metric window left out"), "{log}");
}

/// mlpstorage generates a data set once and runs on the first `num_files_train` of it, passing
/// `dataset.num_files_generated` from its manifest: the names say `_of_{generated}`, whether
/// computed (skip_listing) or listed (by `listing_threads` threads), and a run reads exactly the
/// first files.
#[test]
fn a_run_reads_the_first_files_of_a_larger_generated_set() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = small(tmp.path(), 12, 2);
    args.push("++workload.dataset.num_subfolders_train=3".into());
    args.push("++workload.dataset.record_length_bytes_stdev=1024".into());
    run_ok(
        dlio()
            .arg("generate")
            .args(&args)
            .arg("++workload.reader.write_threads=3"),
    );
    let sizes: Vec<u64> = (0..12)
        .map(|i| {
            let path = tmp
                .path()
                .join(format!("data/train/{}/img_{i:02}_of_12.npz", i % 3));
            path.metadata()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .len()
        })
        .collect();
    let first_eight: u64 = sizes[..8].iter().sum();
    assert_ne!(
        first_eight,
        sizes[4..].iter().sum::<u64>(),
        "sizes must tell files apart"
    );
    let mut run = args.clone();
    run.push("++workload.dataset.num_files_train=8".into());
    run.push("++workload.dataset.num_files_generated=12".into());
    for how in [
        vec![
            "++workload.dataset.skip_listing=True",
            "++workload.dataset.listing_validation_interval=1",
        ],
        vec!["++workload.dataset.listing_threads=1"],
        vec!["++workload.dataset.listing_threads=3"],
    ] {
        run_ok(dlio().arg("run").arg("--strict").args(&run).args(&how));
        let summary = json(&tmp.path().join("out/summary.json"));
        assert_eq!(summary["num_files_train"], 8, "{how:?}");
        assert_eq!(
            summary["dlio_rs"]["bytes_read"].as_u64(),
            Some(first_eight),
            "{how:?}"
        );
    }
    // A listing that finds other names beside generation's keeps them in DLIO's order (by file
    // name): a stray `img_05a.npz` comes after `img_05_of_12.npz`, and a missing file is
    // passed over.
    let stray = tmp.path().join("data/train/1/img_05a.npz");
    std::fs::copy(tmp.path().join("data/train/0/img_09_of_12.npz"), &stray).unwrap();
    let missing = tmp.path().join("data/train/0/img_03_of_12.npz");
    let with_stray: u64 = sizes[..6].iter().sum::<u64>() + sizes[9] + sizes[6];
    let without_three: u64 = sizes[..8].iter().sum::<u64>() - sizes[3] + sizes[8];
    for threads in ["1", "3"] {
        let listed = format!("++workload.dataset.listing_threads={threads}");
        run_ok(dlio().arg("run").arg("--strict").args(&run).arg(&listed));
        let summary = json(&tmp.path().join("out/summary.json"));
        assert_eq!(
            summary["dlio_rs"]["bytes_read"].as_u64(),
            Some(with_stray),
            "the stray file, {threads} threads"
        );
    }
    std::fs::remove_file(&stray).unwrap();
    std::fs::remove_file(&missing).unwrap();
    run_ok(dlio().arg("run").arg("--strict").args(&run));
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(
        summary["dlio_rs"]["bytes_read"].as_u64(),
        Some(without_three),
        "file 3 missing"
    );
    // Without num_files_generated, computed names say `_of_8`, which do not exist.
    let mut wrong = args.clone();
    wrong.push("++workload.dataset.num_files_train=8".into());
    wrong.push("++workload.dataset.skip_listing=True".into());
    let err = run_err(dlio().arg("run").args(&wrong));
    assert!(err.contains("img_0_of_8.npz"), "{err}");
}

/// `dataset.file_list_train`: the run reads the manifest's first `num_files_train` names in
/// its order (relative ones under `data_folder/train`, absolute ones as they are) and nothing
/// else, with each rank taking its names from it before every epoch whose files change; a
/// short manifest, a missing file it names and a manifest beside `skip_listing` are refused by
/// name.
#[test]
fn a_manifest_names_the_files_a_run_reads() {
    let tmp = tempfile::tempdir().unwrap();
    // Batches of 3: six files are whole steps for one rank and for two.
    let mut args = small(tmp.path(), 12, 3);
    args.push("++workload.dataset.record_length_bytes_stdev=1024".into());
    run_ok(dlio().arg("generate").args(&args));
    let train = tmp.path().join("data/train");
    let size = |i: usize| {
        train
            .join(format!("img_{i:02}_of_12.npz"))
            .metadata()
            .unwrap()
            .len()
    };
    // Eight names out of order, one absolute, blank lines and CRLF; the run takes the first 6.
    let order = [11usize, 3, 7, 0, 9, 4, 1, 2];
    let mut text = String::new();
    for (k, i) in order.iter().enumerate() {
        if k == 2 {
            text += &format!(
                "{}\r\n\n",
                train.join(format!("img_{i:02}_of_12.npz")).display()
            );
        } else {
            text += &format!("img_{i:02}_of_12.npz\n");
        }
    }
    let manifest = tmp.path().join("train-files.txt");
    std::fs::write(&manifest, text).unwrap();
    let first_six: u64 = order[..6].iter().map(|&i| size(i)).sum();
    let all_twelve: u64 = (0..12).map(size).sum();
    assert_ne!(first_six * 2, all_twelve, "sizes must tell the sets apart");
    let mut run = args.clone();
    run.push(format!(
        "++workload.dataset.file_list_train={}",
        manifest.display()
    ));
    run.push("++workload.dataset.num_files_train=6".into());
    run.push("++workload.train.epochs=2".into());
    run.push("++workload.reader.file_shuffle=seed".into());
    run.push("++workload.dataset.listing_validation_interval=2".into());
    for ranks in ["1", "2"] {
        run_ok(
            dlio()
                .arg("run")
                .arg("--strict")
                .args(&run)
                .args(["--ranks", ranks]),
        );
        let summary = json(&tmp.path().join("out/summary.json"));
        assert_eq!(summary["num_files_train"], 6, "{ranks} ranks");
        assert_eq!(
            summary["dlio_rs"]["bytes_read"].as_u64(),
            Some(2 * first_six),
            "{ranks} ranks: two epochs of the manifest's first six files"
        );
    }
    // Fewer names than num_files_train: the manifest and the key are named.
    let mut short = run.clone();
    short.push("++workload.dataset.num_files_train=10".into());
    let err = run_err(dlio().arg("run").args(&short));
    assert!(
        err.contains("train-files.txt")
            && err.contains("names 8 files")
            && err.contains("num_files_train=8"),
        "{err}"
    );
    // A named file that is not there (the first, checked every 2nd).
    std::fs::write(&manifest, "gone.npz\nimg_01_of_12.npz\n").unwrap();
    let mut two = run.clone();
    two.push("++workload.dataset.num_files_train=2".into());
    let err = run_err(dlio().arg("run").args(&two));
    assert!(
        err.contains("gone.npz") && err.contains("train-files.txt"),
        "{err}"
    );
    let mut both = run.clone();
    both.push("++workload.dataset.skip_listing=True".into());
    let err = run_err(dlio().arg("run").args(&both));
    assert!(
        err.contains("dataset.file_list_train") && err.contains("skip_listing"),
        "{err}"
    );
}

/// A wrapper records what ran: `--version` gives the version and the commit, and summary.json
/// says the same.
#[test]
fn the_version_and_commit_are_printed_and_recorded() {
    let mut versions = Vec::new();
    for binary in [
        env!("CARGO_BIN_EXE_dlio"),
        env!("CARGO_BIN_EXE_dlio_benchmark"),
    ] {
        let out = Command::new(binary).arg("--version").output().unwrap();
        assert!(out.status.success(), "{binary}");
        versions.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let version = &versions[0];
    let commit = version
        .split("(commit ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no commit in {version:?}"));
    // Built from a git checkout (as the test suite always is): 40 hex digits, maybe `-dirty`.
    let hex = commit.trim_end_matches("-dirty");
    assert!(
        hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{commit:?}"
    );
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");
    assert!(versions[1].contains(commit), "{versions:?}");
    let tmp = tempfile::tempdir().unwrap();
    let args = small(tmp.path(), 4, 2);
    run_ok(dlio().arg("generate").args(&args));
    run_ok(dlio().arg("run").args(&args));
    let summary = json(&tmp.path().join("out/summary.json"));
    assert_eq!(summary["dlio_rs"]["commit"], commit);
    assert_eq!(summary["dlio_rs"]["version"], env!("CARGO_PKG_VERSION"));
    // mlpstorage's provenance asks Python's package metadata, as here: with the dist-info
    // written, it finds this build's version and commit; beside the Python DLIO's, it is refused.
    let site = tmp.path().join("site-packages");
    std::fs::create_dir(&site).unwrap();
    run_ok(
        dlio()
            .arg("python-dist-info")
            .arg("--site-packages")
            .arg(&site),
    );
    let asked = Command::new("python3")
        .env("PYTHONPATH", &site)
        .args([
            "-c",
            "import importlib.metadata as m, json\n\
             d = m.distribution('dlio_benchmark')\n\
             print(m.version('dlio_benchmark'))\n\
             print(json.loads(d.read_text('direct_url.json'))['vcs_info']['commit_id'])",
        ])
        .output()
        .unwrap();
    assert!(asked.status.success(), "{asked:?}");
    let asked = String::from_utf8_lossy(&asked.stdout);
    assert_eq!(
        asked.lines().collect::<Vec<_>>(),
        [env!("CARGO_PKG_VERSION"), commit],
        "{asked}"
    );
    // Again: its own earlier folder is replaced, not refused.
    run_ok(
        dlio()
            .arg("python-dist-info")
            .arg("--site-packages")
            .arg(&site),
    );
    std::fs::create_dir(site.join("dlio_benchmark-3.0.2.dist-info")).unwrap();
    let err = run_err(
        dlio()
            .arg("python-dist-info")
            .arg("--site-packages")
            .arg(&site),
    );
    assert!(err.contains("pip uninstall -y dlio-benchmark"), "{err}");
}
