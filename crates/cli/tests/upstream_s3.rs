//! Upstream DLIO's `tests/dlio_s3_benchmark_test.py` (e1919d7), case by case, against a
//! real S3 server: upstream patches a mock client into s3torchconnector, here moto's server
//! runs on 127.0.0.1 and the same overrides go to `dlio_benchmark --ranks 2`. Two overrides
//! are added after upstream's, to say where the server is: its `endpoint_url` (upstream's
//! `https://localhost:9000` reaches no server; the mock ignores it) and path-style
//! addressing. Objects are counted with boto3, as upstream counts the mock's keys.
//!
//! `test_s3_checkpoint_ksm_config` reads only the config, as `test_checkpoint_ksm_config` of
//! upstream_benchmark.rs does (the storage settings do not enter it).
//! `test_s3_pytorch_multiprocessing_context` runs all four cases, including the two that
//! upstream skips for its mock's patching limits. Skipped, with the reason printed, only when
//! moto cannot be started (scripts/test.sh installs it).

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use common::upstream::{Case, NUM_PROCS, dlio_benchmark, ensure, expect_success, glob, run_matrix};

#[path = "../../storage/tests/support/moto.rs"]
mod moto;
use moto::Moto;

/// A bucket of its own for each case.
fn new_bucket(moto: &Moto) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "s3-test-bucket-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    moto.boto3(&format!("s3.create_bucket(Bucket='{name}')"));
    name
}

/// Upstream's `s3_overrides` for `bucket`, then where the server is.
fn s3_overrides(bucket: &str, checkpoints: bool) -> Vec<String> {
    let mut o = vec![
        "++workload.storage.storage_type=s3".to_string(),
        format!("++workload.storage.storage_root={bucket}"),
        format!("++workload.dataset.data_folder=s3://{bucket}"),
        "++workload.storage.storage_options.access_key_id=test-access-key".into(),
        "++workload.storage.storage_options.secret_access_key=test-secret-key".into(),
        "++workload.storage.storage_options.endpoint_url=https://localhost:9000".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.dataset.num_subfolders_eval=0".into(),
    ];
    if checkpoints {
        o.push(format!(
            "++workload.checkpoint.checkpoint_folder=s3://{bucket}/checkpoints"
        ));
    }
    o
}

fn server(moto: &Moto) -> [String; 2] {
    [
        format!(
            "++workload.storage.storage_options.endpoint_url={}",
            moto.endpoint
        ),
        "++workload.storage.storage_options.s3_force_path_style=True".into(),
    ]
}

/// Keys under `prefix` in `bucket` that end with `suffix`.
fn keys(moto: &Moto, bucket: &str, prefix: &str, suffix: &str) -> usize {
    let listing = moto.boto3(&format!(
        "p = s3.get_paginator('list_objects_v2')\n\
         for page in p.paginate(Bucket='{bucket}', Prefix='{prefix}'):\n\
         \x20   for o in page.get('Contents', []): print(o['Key'])"
    ));
    listing.lines().filter(|k| k.ends_with(suffix)).count()
}

/// Upstream's `run_benchmark(cfg, verify)`: success, and with `verify` one `*_output.json`
/// per rank in the output folder (Hydra's run folder under `cwd`).
fn run_benchmark(cwd: &Path, words: &[String], verify: bool) -> Result<(), String> {
    let out = expect_success(&mut dlio_benchmark(cwd, words))?;
    if !verify {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let folder = text
        .lines()
        .rev()
        .find_map(|l| l.split("Outputs written to ").nth(1))
        .map(|d| cwd.join(d.trim()))
        .ok_or_else(|| format!("no `Outputs written to` line:\n{text}"))?;
    let n = glob(&folder, "_output.json").len() as u64;
    ensure(n == NUM_PROCS, || {
        format!("{n} *_output.json in {}", folder.display())
    })
}

fn with_moto(test: impl FnOnce(&Moto)) {
    match Moto::start() {
        Ok(moto) => test(&moto),
        Err(reason) => eprintln!("skipped: {reason}"),
    }
}

fn words(moto: &Moto, bucket: &str, checkpoints: bool, rest: &[&str]) -> Vec<String> {
    let mut w = s3_overrides(bucket, checkpoints);
    w.extend(rest.iter().map(|s| s.to_string()));
    w.extend(server(moto));
    w
}

#[test]
fn upstream_s3_cases() {
    with_moto(|moto| {
        let mut cases: Vec<Case<&str>> = Vec::new();
        for fmt in ["npy", "npz"] {
            cases.push(Case {
                id: format!("test_s3_gen_data[{fmt}-pytorch]"),
                params: fmt,
            });
        }
        for id in ["test_s3_subset", "test_s3_eval", "test_s3_checkpoint_step"] {
            cases.push(Case {
                id: id.into(),
                params: id,
            });
        }
        run_matrix(cases, |cwd, &which| {
            let bucket = new_bucket(moto);
            match which {
                "test_s3_subset" => {
                    let generate = [
                        "++workload.workflow.train=False",
                        "++workload.workflow.generate_data=True",
                    ];
                    run_benchmark(cwd, &words(moto, &bucket, false, &generate), false)?;
                    let train = [
                        "++workload.workflow.train=True",
                        "++workload.workflow.generate_data=False",
                        "++workload.dataset.num_files_train=8",
                        "++workload.train.computation_time=0.01",
                    ];
                    run_benchmark(cwd, &words(moto, &bucket, false, &train), true)
                }
                "test_s3_eval" => {
                    let w = [
                        "++workload.workflow.train=True",
                        "++workload.workflow.generate_data=True",
                        "workload.train.computation_time=0.01",
                        "workload.evaluation.eval_time=0.005",
                        "++workload.train.epochs=4",
                        "++workload.workflow.evaluation=True",
                    ];
                    run_benchmark(cwd, &words(moto, &bucket, false, &w), true)
                }
                "test_s3_checkpoint_step" => {
                    let w = [
                        "++workload.workflow.train=True",
                        "++workload.workflow.generate_data=True",
                        "++workload.train.computation_time=0.01",
                        "++workload.evaluation.eval_time=0.005",
                        "++workload.train.epochs=8",
                        "++workload.workflow.checkpoint=True",
                        "++workload.checkpoint.steps_between_checkpoints=2",
                    ];
                    run_benchmark(cwd, &words(moto, &bucket, true, &w), true)?;
                    // The default workload: 64 files of one sample, batch 4.
                    let nstep = 64 / 4 / NUM_PROCS as usize;
                    let found = keys(moto, &bucket, "checkpoints/", "");
                    ensure(found == nstep / 2 * 8, || {
                        format!("{found} checkpoint objects, expected {}", nstep / 2 * 8)
                    })
                }
                fmt => {
                    let w = [
                        "++workload.framework=pytorch",
                        "++workload.reader.data_loader=pytorch",
                        "++workload.workflow.train=False",
                        "++workload.workflow.generate_data=True",
                        &format!("++workload.dataset.format={fmt}"),
                        "++workload.dataset.num_files_train=8",
                        "++workload.dataset.num_files_eval=8",
                    ];
                    run_benchmark(cwd, &words(moto, &bucket, false, &w), false)?;
                    let (train, valid) = (
                        keys(moto, &bucket, "train/", &format!(".{fmt}")),
                        keys(moto, &bucket, "valid/", &format!(".{fmt}")),
                    );
                    ensure(train == 8 && valid == 8, || {
                        format!("{train} train and {valid} valid objects, expected 8 and 8")
                    })
                }
            }
        });
    });
}

#[test]
fn test_s3_multi_threads_and_multiprocessing_context() {
    with_moto(|moto| {
        let mut cases = Vec::new();
        for nt in [0u32, 1, 2] {
            cases.push(Case {
                id: format!("test_s3_multi_threads[pytorch-{nt}]"),
                params: (nt, None),
            });
        }
        for (nt, context) in [(0u32, "None"), (1, "fork"), (2, "spawn"), (2, "forkserver")] {
            cases.push(Case {
                id: format!("test_s3_pytorch_multiprocessing_context[{nt}-{context}]"),
                params: (nt, Some(context)),
            });
        }
        run_matrix(cases, |cwd, &(nt, context)| {
            let bucket = new_bucket(moto);
            let mut rest = vec![
                "++workload.workflow.train=True".to_string(),
                "++workload.workflow.generate_data=True".into(),
                "++workload.framework=pytorch".into(),
                "++workload.reader.data_loader=pytorch".into(),
                format!("++workload.reader.read_threads={nt}"),
            ];
            if let Some(c) = context {
                rest.push(format!("++workload.reader.multiprocessing_context={c}"));
            }
            rest.extend(
                [
                    "workload.train.computation_time=0.01",
                    "workload.evaluation.eval_time=0.005",
                    "++workload.train.epochs=1",
                    "++workload.dataset.num_files_train=8",
                    "++workload.dataset.num_files_eval=8",
                ]
                .map(String::from),
            );
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            run_benchmark(cwd, &words(moto, &bucket, false, &rest), true)
        });
    });
}

/// A case of `test_s3_train` or of `test_s3_checkpoint_epoch` (pytorch, model size 1024,
/// layer parameters [16]).
enum TrainOrCheckpoint {
    Train {
        fmt: &'static str,
        even: bool,
    },
    CheckpointEpoch {
        optimizers: &'static [u64],
        layers: u64,
        zero: u64,
        randomize: bool,
    },
}

#[test]
fn test_s3_train_and_checkpoint_epoch() {
    with_moto(|moto| {
        let mut cases: Vec<Case<TrainOrCheckpoint>> = Vec::new();
        for (fmt, even) in [("npz", true), ("npz", false), ("npy", true), ("npy", false)] {
            let e = if even { "True" } else { "False" };
            cases.push(Case {
                id: format!("test_s3_train[{fmt}-pytorch-pytorch-{e}]"),
                params: TrainOrCheckpoint::Train { fmt, even },
            });
        }
        for randomize in [true, false] {
            for (optimizers, layers, zero) in [
                (&[1024u64, 128][..], 2u64, 0u64),
                (&[1024, 128][..], 2, 3),
                (&[128][..], 1, 0),
            ] {
                let i = cases.len() - 4;
                cases.push(Case {
                    id: format!("test_s3_checkpoint_epoch[pytorch-1024-optimizers{i}-{layers}-layer_params{i}-{zero}-{randomize}]"),
                    params: TrainOrCheckpoint::CheckpointEpoch {
                        optimizers,
                        layers,
                        zero,
                        randomize,
                    },
                });
            }
        }
        run_matrix(cases, |cwd, params| {
            let bucket = new_bucket(moto);
            match *params {
                TrainOrCheckpoint::Train { fmt, even } => {
                    let num_files = if even { 16 } else { 17 };
                    let rest = [
                        "++workload.workflow.train=True".to_string(),
                        "++workload.workflow.generate_data=True".into(),
                        "++workload.framework=pytorch".into(),
                        "++workload.reader.data_loader=pytorch".into(),
                        format!("++workload.dataset.format={fmt}"),
                        "workload.train.computation_time=0.01".into(),
                        "workload.evaluation.eval_time=0.005".into(),
                        "++workload.train.epochs=1".into(),
                        format!("++workload.dataset.num_files_train={num_files}"),
                        "++workload.reader.read_threads=1".into(),
                    ];
                    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                    run_benchmark(cwd, &words(moto, &bucket, false, &rest), true)
                }
                TrainOrCheckpoint::CheckpointEpoch {
                    optimizers,
                    layers,
                    zero,
                    randomize,
                } => {
                    let (epochs, per) = (8u64, 2u64);
                    let list = |v: &[u64]| {
                        format!(
                            "[{}]",
                            v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                        )
                    };
                    let rest = [
                        "++workload.framework=pytorch".to_string(),
                        "++workload.reader.data_loader=pytorch".into(),
                        "++workload.workflow.train=True".into(),
                        "++workload.workflow.generate_data=True".into(),
                        format!(
                            "++workload.checkpoint.randomize_tensor={}",
                            if randomize { "True" } else { "False" }
                        ),
                        "++workload.train.computation_time=0.01".into(),
                        "++workload.evaluation.eval_time=0.005".into(),
                        format!("++workload.train.epochs={epochs}"),
                        "++workload.workflow.checkpoint=True".into(),
                        format!("++workload.checkpoint.epochs_between_checkpoints={per}"),
                        "++workload.model.model_size=1024".into(),
                        format!("++workload.model.optimization_groups={}", list(optimizers)),
                        format!("++workload.model.num_layers={layers}"),
                        format!("++workload.model.parallelism.zero_stage={zero}"),
                        "++workload.model.layer_parameters=[16]".into(),
                        format!("++workload.model.parallelism.tensor={NUM_PROCS}"),
                    ];
                    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                    run_benchmark(cwd, &words(moto, &bucket, true, &rest), true)?;
                    let found = keys(moto, &bucket, "checkpoints/", "");
                    let expected = (epochs / per * 3 * NUM_PROCS) as usize;
                    ensure(found == expected, || {
                        format!("{found} checkpoint objects, expected {expected}")
                    })
                }
            }
        });
    });
}
