//! A whole run against an S3-compatible store: moto's server on 127.0.0.1 (on a port it
//! bound itself, stopped at the end). Generation PUTs the dataset, two ranks train with ranged GETs, and
//! checkpoints are objects; wrong credentials fail at once and leave no trace of themselves.
//! A moto that cannot start fails these tests (scripts/test.sh installs it).

use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{dlio, files_under};

use dlio_testkit::moto::{self, Moto};

#[test]
fn generate_train_on_two_ranks_and_checkpoint_in_a_bucket() {
    let moto = Moto::start();
    moto.boto3("s3.create_bucket(Bucket='dlio-s3-test')");
    let tmp = tempfile::tempdir().unwrap();
    let out = dlio()
        .args([
            "run".to_string(),
            "--ranks".into(),
            "2".into(),
            "workload=unet3d_h100_s3".into(),
            "++workload.storage.storage_root=dlio-s3-test".into(),
            "++workload.dataset.data_folder=s3://dlio-s3-test/unet3d".into(),
            format!(
                "++workload.storage.storage_options.endpoint_url={}",
                moto.endpoint
            ),
            "++workload.storage.storage_options.access_key_id=k".into(),
            "++workload.storage.storage_options.secret_access_key=s".into(),
            "++workload.storage.storage_options.s3_force_path_style=True".into(),
            "++workload.dataset.num_files_train=8".into(),
            "++workload.dataset.record_length_bytes=200000".into(),
            "++workload.dataset.record_length_bytes_resize=0".into(),
            "++workload.reader.batch_size=2".into(),
            "++workload.reader.read_threads=1".into(),
            "++workload.reader.transfer_size=65536".into(),
            "++workload.train.epochs=1".into(),
            "++workload.train.computation_time=0".into(),
            "++workload.workflow.checkpoint=True".into(),
            "++workload.checkpoint.steps_between_checkpoints=2".into(),
            "++workload.checkpoint.checkpoint_folder=ckpt".into(),
            format!(
                "++workload.output.folder={}",
                tmp.path().join("out").display()
            ),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let hydra = std::fs::read_to_string(tmp.path().join("out/.hydra/config.yaml")).unwrap();
    assert!(hydra.contains("secret_access_key: <redacted>"), "{hydra}");
    let log = std::fs::read_to_string(tmp.path().join("out/dlio.log")).unwrap();
    assert!(!log.contains("secret_access_key"), "{log}");
    let listing = moto.boto3(
        "for o in s3.list_objects_v2(Bucket='dlio-s3-test')['Contents']: print(o['Key'], o['Size'])",
    );
    let train: Vec<_> = listing
        .lines()
        .filter(|l| l.starts_with("unet3d/train/"))
        .collect();
    assert_eq!(train.len(), 8, "{listing}");
    let checkpoints = listing.lines().filter(|l| l.starts_with("ckpt/")).count();
    // 8 files / (2 ranks x batch 2) = 2 steps per rank: one step checkpoint, one file (rank 0's
    // flat model state).
    assert_eq!(checkpoints, 1, "{listing}");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    let sizes: u64 = train
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(summary["dlio_rs"]["bytes_read"].as_u64().unwrap(), sizes);
    assert_eq!(summary["dlio_rs"]["io_engine"]["name"], "s3");
    let requests: u64 = summary["dlio_rs"]["read_ops"].as_u64().unwrap();
    let expected: u64 = train
        .iter()
        .map(|l| {
            l.split(' ')
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
                .div_ceil(65536)
        })
        .sum();
    assert_eq!(requests, expected, "ranged GETs of transfer_size");
}

/// Every file under `dir`, recursively.
#[test]
fn a_wrong_secret_fails_at_once_naming_the_endpoint_and_never_shows_the_secret() {
    let moto = Moto::start();
    moto.boto3("s3.create_bucket(Bucket='dlio-auth')");
    let (key_id, secret) = moto.require_authentication();
    let wrong_secret = format!("{}WRONG", &secret[..secret.len() / 2]);
    let tmp = tempfile::tempdir().unwrap();
    let output = tmp.path().join("out");
    let started = Instant::now();
    let out = dlio()
        .args([
            "run".to_string(),
            "workload=unet3d_h100_s3".into(),
            "++workload.storage.storage_root=dlio-auth".into(),
            "++workload.dataset.data_folder=s3://dlio-auth/unet3d".into(),
            format!(
                "++workload.storage.storage_options.endpoint_url={}",
                moto.endpoint
            ),
            format!("++workload.storage.storage_options.access_key_id={key_id}"),
            format!("++workload.storage.storage_options.secret_access_key={wrong_secret}"),
            "++workload.storage.storage_options.s3_force_path_style=True".into(),
            "++workload.storage.storage_options.s3_max_attempts=5".into(),
            "++workload.workflow.generate_data=True".into(),
            "++workload.dataset.num_files_train=2".into(),
            "++workload.dataset.record_length_bytes=4096".into(),
            "++workload.train.epochs=1".into(),
            "++workload.train.computation_time=0".into(),
            "++workload.workflow.checkpoint=False".into(),
            format!("++workload.output.folder={}", output.display()),
        ])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Fails at the first answer (object_store does not retry a 403), within seconds.
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    for wanted in [
        "S3 authentication failed",
        moto.endpoint.as_str(),
        "s3://dlio-auth",
        "SignatureDoesNotMatch",
        "storage.storage_options.secret_access_key",
    ] {
        assert!(stderr.contains(wanted), "no `{wanted}` in:\n{stderr}");
    }
    for credential in [wrong_secret.as_str(), key_id.as_str()] {
        assert!(!stderr.contains(credential), "stderr shows it:\n{stderr}");
        assert!(!stdout.contains(credential), "stdout shows it:\n{stdout}");
    }
    let files = files_under(&output);
    assert!(
        files.iter().any(|f| f.ends_with(".hydra/overrides.yaml")),
        "{files:?}"
    );
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        for credential in [wrong_secret.as_str(), key_id.as_str()] {
            assert!(
                !text.contains(credential),
                "{} holds a credential:\n{text}",
                file.display()
            );
        }
    }
}

/// MLPerf Storage v3's object-storage runs as its users write them, for the two image
/// workloads: generate, train and checkpoint in a bucket with each `storage_library` spelling
/// the fork accepts. Every object of the data set is read whole (bytes read = bytes stored),
/// the checkpoint is objects, and the log says which library name dlio's S3 engine stands for.
#[test]
fn unet3d_and_retinanet_generate_train_and_checkpoint_with_each_librarys_spelling() {
    let moto = Moto::start();
    let bucket = "dlio-v3-libraries";
    moto.boto3(&format!("s3.create_bucket(Bucket='{bucket}')"));
    let objects = |prefix: &str| moto.objects(bucket, prefix);
    for (workload, ext) in [("unet3d_h100", "npz"), ("retinanet_b200", "jpeg")] {
        for library in ["s3dlio", "minio", "s3torchconnector"] {
            let tmp = tempfile::tempdir().unwrap();
            let prefix = format!("{workload}-{library}");
            let out = dlio()
                .env("AWS_ACCESS_KEY_ID", moto::KEY_ID)
                .env("AWS_SECRET_ACCESS_KEY", moto::SECRET)
                .args([
                    "run".to_string(),
                    format!("workload={workload}"),
                    "++workload.storage.storage_type=s3".into(),
                    format!("++workload.storage.storage_root={bucket}"),
                    format!("++workload.storage.storage_options.storage_library={library}"),
                    format!(
                        "++workload.storage.storage_options.endpoint_url={}",
                        moto.endpoint
                    ),
                    format!("++workload.dataset.data_folder=s3://{bucket}/{prefix}/data"),
                    "++workload.dataset.num_files_train=6".into(),
                    "++workload.dataset.num_files_eval=0".into(),
                    "++workload.dataset.num_samples_per_file=1".into(),
                    "++workload.dataset.record_length_bytes=65536".into(),
                    "++workload.dataset.record_length_bytes_stdev=0".into(),
                    "++workload.dataset.record_length_bytes_resize=0".into(),
                    "++workload.workflow.generate_data=True".into(),
                    "++workload.workflow.train=True".into(),
                    "++workload.workflow.checkpoint=True".into(),
                    "++workload.train.epochs=1".into(),
                    "++workload.train.computation_time=0.001".into(),
                    "++workload.reader.batch_size=2".into(),
                    "++workload.reader.read_threads=2".into(),
                    "++workload.model.model_size_bytes=100000".into(),
                    "++workload.checkpoint.checkpoint_after_epoch=1".into(),
                    "++workload.checkpoint.epochs_between_checkpoints=1".into(),
                    format!("++workload.checkpoint.checkpoint_folder=s3://{bucket}/{prefix}/ckpt"),
                    format!(
                        "++workload.output.folder={}",
                        tmp.path().join("out").display()
                    ),
                ])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{workload} {library}: {stderr}");
            let run = tmp.path().join("out");
            let train = objects(&format!("{prefix}/data/train/"));
            assert_eq!(train.len(), 6, "{workload} {library}: {train:?}");
            assert!(
                train.iter().all(|(k, len)| k.ends_with(ext) && *len > 0),
                "{workload} {library}: {train:?}"
            );
            let stored: u64 = train.iter().map(|(_, len)| len).sum();
            assert_eq!(
                common::bytes_read(&run),
                stored,
                "{workload} {library}: every object read whole"
            );
            let summary: Value =
                serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap())
                    .unwrap();
            assert_eq!(summary["dlio_rs"]["io_engine"]["name"], "s3");
            assert!(
                summary["metric"]["checkpoint_size_GB"]
                    .as_f64()
                    .is_some_and(|gb| gb > 0.0),
                "{workload} {library}: {}",
                summary["metric"]
            );
            let checkpoint: u64 = objects(&format!("{prefix}/ckpt/"))
                .iter()
                .map(|(_, len)| len)
                .sum();
            assert!(
                checkpoint >= 100_000,
                "{workload} {library}: {checkpoint} checkpoint bytes for a model of 100,000"
            );
            let log = std::fs::read_to_string(run.join("dlio.log")).unwrap();
            assert!(
                log.contains(&format!("storage_library {library}")),
                "{workload} {library}: {log}"
            );
        }
    }
}
