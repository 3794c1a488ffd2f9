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
//! upstream skips for its mock's patching limits. A moto that cannot start fails these tests
//! (scripts/test.sh installs it).

mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use common::upstream::{Case, CheckpointEpoch, NUM_PROCS, ensure, run_benchmark, run_matrix};

use dlio_testkit::moto::Moto;

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

fn with_moto(test: impl FnOnce(&Moto)) {
    test(&Moto::start());
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
                    run_benchmark(cwd, &words(moto, &bucket, false, &train), true).map(drop)
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
                    run_benchmark(cwd, &words(moto, &bucket, false, &w), true).map(drop)
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
            run_benchmark(cwd, &words(moto, &bucket, false, &rest), true).map(drop)
        });
    });
}

#[test]
fn test_s3_train() {
    with_moto(|moto| {
        let cases = [("npz", true), ("npz", false), ("npy", true), ("npy", false)]
            .into_iter()
            .map(|(fmt, even)| Case {
                id: format!(
                    "test_s3_train[{fmt}-pytorch-pytorch-{}]",
                    if even { "True" } else { "False" }
                ),
                params: (fmt, even),
            })
            .collect();
        run_matrix(cases, |cwd, &(fmt, even)| {
            let bucket = new_bucket(moto);
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
            run_benchmark(cwd, &words(moto, &bucket, false, &rest), true).map(drop)
        });
    });
}

#[test]
fn test_s3_checkpoint_epoch() {
    with_moto(|moto| {
        let cases = CheckpointEpoch::matrix("test_s3_checkpoint_epoch", &["pytorch"]);
        assert_eq!(cases.len(), 6);
        run_matrix(cases, |cwd, case| {
            let bucket = new_bucket(moto);
            let overrides = case.overrides();
            let rest: Vec<&str> = overrides.iter().map(String::as_str).collect();
            run_benchmark(cwd, &words(moto, &bucket, true, &rest), true)?;
            let found = keys(moto, &bucket, "checkpoints/", "");
            let checkpoints = CheckpointEpoch::EPOCHS / CheckpointEpoch::EPOCHS_PER_CHECKPOINT;
            let expected = (checkpoints * 3 * NUM_PROCS) as usize;
            ensure(found == expected, || {
                format!("{found} checkpoint objects, expected {expected}")
            })
        });
    });
}
