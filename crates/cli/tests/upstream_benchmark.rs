//! Upstream DLIO's `tests/dlio_benchmark_test.py` (e1919d7), case by case. Upstream composes
//! each case's overrides with Hydra and runs `DLIOBenchmark` in-process under `mpirun -np 2`,
//! with the default workload's relative paths (`data/default`, `./checkpoints`) under the
//! working folder; here each case is `dlio_benchmark --ranks 2 <the same overrides>` in a
//! fresh working folder, and the same files are counted. `run_benchmark(verify=True)` is
//! upstream's check that every rank wrote its `*_output.json`.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use common::run_ok;
use common::upstream::{Case, CheckpointEpoch, NUM_PROCS, ensure, glob, run_benchmark, run_matrix};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|w| w.to_string()).collect()
}

/// Files with extension `ext` under `dir`, recursively (`rglob("**/*.ext")`).
fn count_files(dir: &Path, ext: &str) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                count_files(&p, ext)
            } else {
                u64::from(p.extension().is_some_and(|x| x == ext))
            }
        })
        .sum()
}

fn expect_count(what: &str, got: u64, want: u64) -> Result<(), String> {
    ensure(got == want, || {
        format!("{what}: {got} files, expected {want}")
    })
}

fn cases<P>(test: &str, params: Vec<(String, P)>) -> Vec<Case<P>> {
    params
        .into_iter()
        .map(|(id, params)| Case {
            id: format!("{test}[{id}]"),
            params,
        })
        .collect()
}

const GEN_FORMATS: [&str; 7] = [
    "png",
    "npz",
    "jpeg",
    "tfrecord",
    "hdf5",
    "indexed_binary",
    "mmap_indexed_binary",
];

#[test]
fn test_gen_data() {
    let params = GEN_FORMATS
        .iter()
        .map(|&f| (format!("{f}-tensorflow"), f))
        .collect();
    run_matrix(cases("test_gen_data", params), |cwd, fmt| {
        let o = vec![
            "++workload.framework=tensorflow".to_string(),
            "++workload.reader.data_loader=tensorflow".into(),
            "++workload.workflow.train=False".into(),
            "++workload.workflow.generate_data=True".into(),
            format!("++workload.dataset.format={fmt}"),
            "++workload.dataset.num_files_train=8".into(),
            "++workload.dataset.num_files_eval=8".into(),
        ];
        run_benchmark(cwd, &o, false)?;
        // The default workload's two subfolders: upstream's rglob branch.
        let data = cwd.join("data/default");
        expect_count("train", count_files(&data.join("train"), fmt), 8)?;
        expect_count("valid", count_files(&data.join("valid"), fmt), 8)
    });
}

#[test]
fn test_subset() {
    let cwd = tempfile::tempdir().unwrap();
    let generate = s(&[
        "++workload.workflow.train=False",
        "++workload.workflow.generate_data=True",
    ]);
    run_benchmark(cwd.path(), &generate, false).unwrap();
    let train = s(&[
        "++workload.workflow.train=True",
        "++workload.workflow.generate_data=False",
        "++workload.dataset.num_files_train=8",
        "++workload.train.computation_time=0.01",
    ]);
    run_benchmark(cwd.path(), &train, true).unwrap();
}

#[test]
fn test_storage_root_gen_data() {
    let params = GEN_FORMATS
        .iter()
        .map(|&f| (format!("{f}-tensorflow"), f))
        .collect();
    run_matrix(cases("test_storage_root_gen_data", params), |cwd, fmt| {
        let o = vec![
            "++workload.framework=tensorflow".to_string(),
            "++workload.reader.data_loader=tensorflow".into(),
            "++workload.workflow.train=False".into(),
            "++workload.workflow.generate_data=True".into(),
            "++workload.storage.storage_root=runs".into(),
            format!("++workload.dataset.format={fmt}"),
            "++workload.dataset.num_files_train=16".into(),
        ];
        run_benchmark(cwd, &o, false)?;
        // `train/*/*.fmt`: the default workload's files in its two subfolders, under the root.
        let data = cwd.join("runs/data/default");
        let in_subfolders = |split: &str| -> u64 {
            std::fs::read_dir(data.join(split))
                .map(|rd| {
                    rd.flatten()
                        .filter(|e| e.path().is_dir())
                        .map(|e| glob(&e.path(), &format!(".{fmt}")).len() as u64)
                        .sum()
                })
                .unwrap_or(0)
        };
        expect_count("train", in_subfolders("train"), 16)?;
        expect_count("valid", in_subfolders("valid"), 8)
    });
}

#[test]
fn test_iostat_profiling() {
    let cwd = tempfile::tempdir().unwrap();
    let generate = s(&[
        "++workload.workflow.train=False",
        "++workload.workflow.generate_data=True",
    ]);
    run_benchmark(cwd.path(), &generate, false).unwrap();
    let profiled = s(&[
        "++workload.workflow.train=True",
        "++workload.workflow.generate_data=False",
        "workload.train.computation_time=0.01",
        "workload.evaluation.eval_time=0.005",
        "workload.train.epochs=1",
        "workload.workflow.profiling=True",
        "workload.profiling.profiler=iostat",
    ]);
    let out = run_benchmark(cwd.path(), &profiled, true).unwrap().unwrap();
    assert!(
        out.join("iostat.json").is_file(),
        "no iostat.json in {}",
        out.display()
    );
    // Upstream then runs `dlio_postprocessor --output-folder=...` and ignores its result;
    // here it must succeed and write its report.
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_dlio"))
            .arg0("dlio_postprocessor")
            .arg(format!("--output-folder={}", out.display())),
    );
    let report = std::fs::read_to_string(out.join("DLIO_default_report.txt")).unwrap();
    let num_ranks = report
        .lines()
        .find(|l| l.trim_start().starts_with("Num Ranks:"))
        .unwrap();
    assert!(num_ranks.trim_end().ends_with(" 2"), "{num_ranks}");
    for section in [
        "Throughput Stats (over all epochs)",
        "I/O Stats",
        "Device: ",
        "CPU Stats",
        "Epoch 1",
        "Block 1",
    ] {
        assert!(report.contains(section), "no `{section}` in:\n{report}");
    }
}

#[test]
fn test_checkpoint_epoch() {
    let cases = CheckpointEpoch::matrix("test_checkpoint_epoch", &["tensorflow", "pytorch"]);
    assert_eq!(cases.len(), 12);
    run_matrix(cases, |cwd, case| {
        std::fs::create_dir_all(cwd.join("checkpoints")).map_err(|e| e.to_string())?;
        run_benchmark(cwd, &case.overrides(), true)?;
        // `checkpoints/*/*`: model, optimizer and layer files per rank (no pipeline
        // parallelism); TensorFlow writes an index and a data file for each, plus one
        // `checkpoint` file per checkpoint.
        let load_bin: u64 = std::fs::read_dir(cwd.join("checkpoints"))
            .map_err(|e| e.to_string())?
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| {
                std::fs::read_dir(e.path())
                    .map(|rd| rd.count() as u64)
                    .unwrap_or(0)
            })
            .sum();
        let files_per_checkpoint = 3 * NUM_PROCS;
        let checkpoints = CheckpointEpoch::EPOCHS / CheckpointEpoch::EPOCHS_PER_CHECKPOINT;
        let expected = match case.framework {
            "tensorflow" => checkpoints * (files_per_checkpoint * 2 + 1),
            _ => checkpoints * files_per_checkpoint,
        };
        expect_count("checkpoints/*/*", load_bin, expected)
    });
}

#[test]
fn test_checkpoint_step() {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(cwd.path().join("checkpoints")).unwrap();
    let o = s(&[
        "++workload.workflow.train=True",
        "++workload.workflow.generate_data=True",
        "++workload.train.computation_time=0.01",
        "++workload.evaluation.eval_time=0.005",
        "++workload.train.epochs=8",
        "++workload.workflow.checkpoint=True",
        "++workload.checkpoint.steps_between_checkpoints=2",
    ]);
    run_benchmark(cwd.path(), &o, true).unwrap();
    // The default workload: 64 files of one sample, batch 4.
    let nstep = 64 / 4 / NUM_PROCS;
    let ncheckpoints = nstep / 2 * 8;
    let found = std::fs::read_dir(cwd.path().join("checkpoints"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| std::fs::read_dir(e.path()).unwrap().count() as u64)
        .sum::<u64>();
    assert_eq!(found, ncheckpoints);
}

/// `dlio_benchmark_query`'s view of `key` with `overrides` (upstream's test reads the same
/// values from `ConfigArguments` after `initialize()`).
fn query(overrides: &[&str], key: &str) -> String {
    let out = run_ok(
        Command::new(env!("CARGO_BIN_EXE_dlio"))
            .arg0("dlio_benchmark_query")
            .args(overrides)
            .arg(format!("++workload.workflow.query={key}")),
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn test_checkpoint_ksm_config() {
    let common = [
        "++workload.workflow.checkpoint=True",
        "++workload.workflow.generate_data=False",
        "++workload.workflow.train=False",
        "++workload.checkpoint.num_checkpoints_write=1",
        "++workload.checkpoint.num_checkpoints_read=1",
        "++workload.checkpoint.randomize_tensor=False",
    ];
    // Case 1: `ksm: {}` turns KSM on with its defaults.
    let mut on: Vec<&str> = vec!["++workload.checkpoint.ksm={}"];
    on.extend(common);
    assert_eq!(query(&on, "checkpoint.ksm.madv_mergeable_id"), "12");
    assert_eq!(query(&on, "checkpoint.ksm.high_ram_trigger"), "30.0");
    assert_eq!(query(&on, "checkpoint.ksm.low_ram_exit"), "15.0");
    assert_eq!(query(&on, "checkpoint.ksm.await_time"), "200");
    // Case 2: keys of the section turn it on; the others keep their defaults.
    let mut some: Vec<&str> = vec![
        "++workload.checkpoint.ksm.high_ram_trigger=25.5",
        "++workload.checkpoint.ksm.await_time=100",
    ];
    some.extend(common);
    assert_eq!(query(&some, "checkpoint.ksm.high_ram_trigger"), "25.5");
    assert_eq!(query(&some, "checkpoint.ksm.await_time"), "100");
    assert_eq!(query(&some, "checkpoint.ksm.madv_mergeable_id"), "12");
    assert_eq!(query(&some, "checkpoint.ksm.low_ram_exit"), "15.0");
    // Case 3: no section, no KSM (upstream's `ksm_init` False).
    assert_eq!(query(&common, "checkpoint.ksm"), "None");
}

#[test]
fn test_eval() {
    let cwd = tempfile::tempdir().unwrap();
    let o = s(&[
        "++workload.workflow.train=True",
        "++workload.workflow.generate_data=True",
        "workload.train.computation_time=0.01",
        "workload.evaluation.eval_time=0.005",
        "++workload.train.epochs=4",
        "++workload.workflow.evaluation=True",
    ]);
    run_benchmark(cwd.path(), &o, true).unwrap();
}

/// The overrides `test_multi_threads` and `test_pytorch_multiprocessing_context` share.
fn threads_run(framework: &str, nt: u64, context: Option<&str>) -> Vec<String> {
    let mut o = vec![
        "++workload.workflow.train=True".to_string(),
        "++workload.workflow.generate_data=True".into(),
        format!("++workload.framework={framework}"),
        format!("++workload.reader.data_loader={framework}"),
        format!("++workload.reader.read_threads={nt}"),
    ];
    if let Some(c) = context {
        o.push(format!("++workload.reader.multiprocessing_context={c}"));
    }
    o.extend(s(&[
        "workload.train.computation_time=0.01",
        "workload.evaluation.eval_time=0.005",
        "++workload.train.epochs=1",
        "++workload.dataset.num_files_train=8",
        "++workload.dataset.num_files_eval=8",
    ]));
    o
}

#[test]
fn test_multi_threads() {
    let mut params = Vec::new();
    for framework in ["tensorflow", "pytorch"] {
        for nt in [0u64, 1, 2] {
            params.push((format!("{framework}-{nt}"), (framework, nt)));
        }
    }
    run_matrix(
        cases("test_multi_threads", params),
        |cwd, &(framework, nt)| {
            run_benchmark(cwd, &threads_run(framework, nt, None), true).map(drop)
        },
    );
}

#[test]
fn test_pytorch_multiprocessing_context() {
    let params = [(0u64, "None"), (1, "fork"), (2, "spawn"), (2, "forkserver")]
        .into_iter()
        .map(|(nt, c)| (format!("{nt}-{c}"), (nt, c)))
        .collect();
    run_matrix(
        cases("test_pytorch_multiprocessing_context", params),
        |cwd, &(nt, context)| {
            run_benchmark(cwd, &threads_run("pytorch", nt, Some(context)), true).map(drop)
        },
    );
}

#[test]
fn test_train() {
    let tf_formats = [
        "png",
        "npz",
        "jpeg",
        "tfrecord",
        "hdf5",
        "csv",
        "indexed_binary",
        "mmap_indexed_binary",
    ];
    let mut params = Vec::new();
    for is_even in [true, false] {
        let mut add = |fmt: &'static str, framework: &'static str, loader: &'static str| {
            let even = if is_even { "True" } else { "False" };
            params.push((
                format!("{fmt}-{framework}-{loader}-{even}"),
                (fmt, framework, loader, is_even),
            ));
        };
        for fmt in tf_formats {
            add(fmt, "tensorflow", "tensorflow");
        }
        for (framework, loader) in [
            ("pytorch", "pytorch"),
            ("tensorflow", "dali"),
            ("pytorch", "dali"),
        ] {
            for fmt in tf_formats.iter().filter(|&&f| f != "tfrecord") {
                add(fmt, framework, loader);
            }
        }
    }
    assert_eq!(params.len(), 58);
    run_matrix(
        cases("test_train", params),
        |cwd, &(fmt, framework, loader, is_even)| {
            let num_files = if is_even { 16 } else { 17 };
            let o = vec![
                "++workload.workflow.train=True".to_string(),
                "++workload.workflow.generate_data=True".into(),
                format!("++workload.framework={framework}"),
                format!("++workload.reader.data_loader={loader}"),
                format!("++workload.dataset.format={fmt}"),
                "workload.train.computation_time=0.01".into(),
                "workload.evaluation.eval_time=0.005".into(),
                "++workload.train.epochs=1".into(),
                format!("++workload.dataset.num_files_train={num_files}"),
                "++workload.reader.read_threads=1".into(),
            ];
            run_benchmark(cwd, &o, true).map(drop)
        },
    );
}

#[test]
fn test_uneven_samples_deadlock() {
    let mut params = Vec::new();
    for framework in ["pytorch", "tensorflow"] {
        for (num_files, batch_size) in [(13u64, 4u64), (24, 4), (25, 4), (145, 16)] {
            params.push((
                format!("npz-{framework}-{framework}-{num_files}-{batch_size}"),
                (framework, num_files, batch_size),
            ));
        }
    }
    run_matrix(
        cases("test_uneven_samples_deadlock", params),
        |cwd, &(framework, num_files, batch_size)| {
            let o = vec![
                "++workload.workflow.train=True".to_string(),
                "++workload.workflow.generate_data=True".into(),
                format!("++workload.framework={framework}"),
                format!("++workload.reader.data_loader={framework}"),
                "++workload.dataset.format=npz".into(),
                format!("++workload.reader.batch_size={batch_size}"),
                "++workload.train.computation_time=0.01".into(),
                "++workload.evaluation.eval_time=0.005".into(),
                "++workload.train.epochs=3".into(),
                format!("++workload.dataset.num_files_train={num_files}"),
                "++workload.reader.read_threads=1".into(),
            ];
            run_benchmark(cwd, &o, true).map(drop)
        },
    );
}

#[test]
fn test_custom_storage_root_train() {
    let formats = [
        "png",
        "npz",
        "jpeg",
        "tfrecord",
        "hdf5",
        "csv",
        "indexed_binary",
        "mmap_indexed_binary",
    ];
    let mut params = Vec::new();
    for framework in ["tensorflow", "pytorch"] {
        for fmt in formats {
            if framework == "pytorch" && fmt == "tfrecord" {
                continue;
            }
            params.push((format!("{fmt}-{framework}"), (fmt, framework)));
        }
    }
    run_matrix(
        cases("test_custom_storage_root_train", params),
        |cwd, &(fmt, framework)| {
            let o = vec![
                "++workload.workflow.train=True".to_string(),
                "++workload.workflow.generate_data=True".into(),
                format!("++workload.framework={framework}"),
                format!("++workload.reader.data_loader={framework}"),
                format!("++workload.dataset.format={fmt}"),
                "++workload.storage.storage_root=root_dir".into(),
                "workload.train.computation_time=0.01".into(),
                "workload.evaluation.eval_time=0.005".into(),
                "++workload.train.epochs=1".into(),
                "++workload.dataset.num_files_train=16".into(),
                "++workload.reader.read_threads=1".into(),
            ];
            run_benchmark(cwd, &o, true)?;
            expect_count(
                "root_dir train",
                count_files(&cwd.join("root_dir/data/default/train"), fmt),
                16,
            )
        },
    );
}

#[test]
fn test_computation_time_distribution() {
    let dists: [(&str, &[&str]); 8] = [
        ("uniform", &["type=uniform", "min=1.0", "max=2.0"]),
        ("normal", &["type=normal", "mean=1.0", "stdev=1.0"]),
        ("gamma", &["type=gamma", "shape=1.0", "scale=1.0"]),
        ("exp", &["type=exponential", "scale=1.0"]),
        ("poisson", &["type=poisson", "lam=1.0"]),
        ("normal_v2", &["mean=1.0"]),
        ("normal_v3", &["mean=1.0", "stdev=1.0"]),
        ("normal_v4", &[]),
    ];
    let params = dists
        .iter()
        .map(|&(name, keys)| (name.to_string(), keys))
        .collect();
    run_matrix(
        cases("test_computation_time_distribution", params),
        |cwd, keys| {
            let mut o = s(&[
                "++workload.workflow.train=True",
                "++workload.workflow.generate_data=True",
                "++workload.train.epochs=1",
            ]);
            if keys.is_empty() {
                o.push("++workload.train.computation_time=2.0".into());
            } else {
                o.extend(
                    keys.iter()
                        .map(|k| format!("++workload.train.computation_time.{k}")),
                );
            }
            run_benchmark(cwd, &o, true).map(drop)
        },
    );
}
