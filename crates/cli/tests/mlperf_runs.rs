//! Every MLPerf Storage v3 workload file run at small size, as mlpstorage would run it (the
//! local ones on a temporary folder, the object-storage ones against moto's S3 server), and
//! the fork's object-read window measured from the server side: an HTTP proxy in front of
//! moto counts the GETs the client keeps in flight.

mod common;

use dlio_testkit::moto::{self, Moto};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::inflight::InflightProxy;
use common::{bytes_read, dlio, json, run_err, run_ok};

const BUCKET: &str = "dlio-v3";

fn v3_names() -> Vec<String> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/workloads/mlperf-v3/workload");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            path.file_stem().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    names.sort();
    names
}

/// `dlio config workload=NAME --query KEY`, trimmed.
fn query(name: &str, key: &str) -> String {
    let out = run_ok(dlio().args(["config", &format!("workload={name}"), "--query", key]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The overrides that shrink workload `name` to a few small files, one epoch and a tiny
/// model, under `dir` (or, for object storage, in the bucket behind `endpoint`).
fn small_overrides(name: &str, dir: &Path, endpoint: Option<&str>) -> Vec<String> {
    let train = query(name, "workflow.train") == "true";
    let checkpoint = query(name, "workflow.checkpoint") == "true";
    let mut words = vec![
        format!("workload={name}"),
        "++workload.dataset.num_files_train=4".into(),
        "++workload.dataset.num_files_eval=0".into(),
        "++workload.dataset.num_samples_per_file=2".into(),
        "++workload.dataset.record_length_bytes=4096".into(),
        "++workload.dataset.record_length_bytes_stdev=0".into(),
        "++workload.dataset.record_length_bytes_resize=0".into(),
        "++workload.train.epochs=1".into(),
        "++workload.train.computation_time=0.001".into(),
        "++workload.reader.batch_size=2".into(),
        "++workload.reader.read_threads=1".into(),
        format!("hydra.run.dir={}", dir.join("run").display()),
        "++hydra.output_subdir=dlio_config".into(),
    ];
    match endpoint {
        Some(endpoint) => words.extend([
            format!("++workload.storage.storage_root={BUCKET}"),
            format!("++workload.storage.storage_options.endpoint_url={endpoint}"),
            format!("++workload.dataset.data_folder={name}/data"),
            format!("++workload.checkpoint.checkpoint_folder=s3://{BUCKET}/{name}/ckpt"),
        ]),
        None => words.extend([
            format!(
                "++workload.dataset.data_folder={}",
                dir.join("data").display()
            ),
            format!(
                "++workload.checkpoint.checkpoint_folder={}",
                dir.join("ckpt").display()
            ),
        ]),
    }
    if train {
        // Training files are made by the same run (mlpstorage runs datagen first).
        words.push("++workload.workflow.generate_data=True".into());
    }
    if checkpoint {
        // A model of a few MiB on one rank, in mlpstorage's subset mode (what it passes
        // below the closed process count); every pipeline stage keeps a layer.
        let pipeline: u64 = query(name, "model.parallelism.pipeline")
            .parse()
            .unwrap_or(1);
        words.extend([
            format!("++workload.model.num_layers={}", pipeline.max(2)),
            "++workload.model.transformer.hidden_size=256".into(),
            "++workload.model.transformer.ffn_hidden_size=512".into(),
            "++workload.model.transformer.vocab_size=1024".into(),
            "++workload.model.model_size_bytes=10000".into(),
            "++workload.checkpoint.time_between_checkpoints=0".into(),
            "++workload.checkpoint.mode=subset".into(),
            "++workload.model.parallelism.data=1".into(),
        ]);
        if train {
            // A checkpoint at the end of the one epoch.
            words.extend([
                "++workload.checkpoint.checkpoint_after_epoch=1".into(),
                "++workload.checkpoint.epochs_between_checkpoints=1".into(),
            ]);
        }
    }
    words
}

/// Fixes a workload file needs before it runs, each checked first to fail as the fork fails.
fn required_fixes(name: &str, words: &[String]) -> Vec<String> {
    let custom_loader = query(name, "reader.data_loader_classname");
    if !custom_loader.is_empty() && custom_loader != "null" {
        // The fork refuses a custom data loader class without a sampler (config.py
        // validate); so does dlio, and says what to set.
        let err = run_err(dlio().arg("run").args(words));
        assert!(err.contains("reader.data_loader_sampler"), "{name}: {err}");
        return vec!["++workload.reader.data_loader_sampler=index".into()];
    }
    if query(name, "storage.storage_options.storage_library") == "LIBRARY_PLACEHOLDER" {
        let err = run_err(dlio().arg("run").args(words));
        assert!(err.contains("LIBRARY_PLACEHOLDER"), "{name}: {err}");
        return vec!["++workload.storage.storage_library=s3dlio".into()];
    }
    Vec::new()
}

/// Objects under `prefix` in the bucket, with their sizes.
fn objects(moto: &Moto, prefix: &str) -> Vec<(String, u64)> {
    moto.objects(BUCKET, prefix)
}

#[test]
fn every_v3_training_datagen_and_checkpoint_workload_runs_at_small_size() {
    let moto = Moto::start();
    moto.boto3(&format!("s3.create_bucket(Bucket='{BUCKET}')"));
    let names = v3_names();
    let mut ran = 0;
    let mut on_object_storage = 0;
    for name in &names {
        let name = name.as_str();
        let object = query(name, "storage.storage_type") == "s3";
        on_object_storage += usize::from(object);
        let endpoint = object.then_some(moto.endpoint.as_str());
        let tmp = tempfile::tempdir().unwrap();
        let mut words = small_overrides(name, tmp.path(), endpoint);
        words.extend(required_fixes(name, &words));
        let mut cmd = dlio();
        cmd.arg("run").args(&words);
        if object {
            cmd.env("AWS_ACCESS_KEY_ID", moto::KEY_ID)
                .env("AWS_SECRET_ACCESS_KEY", moto::SECRET);
        }
        run_ok(&mut cmd);
        ran += 1;
        let run = tmp.path().join("run");
        let train = query(name, "workflow.train") == "true";
        let checkpoint = query(name, "workflow.checkpoint") == "true";
        let generate = query(name, "workflow.generate_data") == "true";
        // The data set: four files of the workload's format, locally or in the bucket.
        if train || generate {
            let format = query(name, "dataset.format");
            let files: Vec<(String, u64)> = match object {
                true => objects(&moto, &format!("{name}/data/train/")),
                false => common::files_under(&tmp.path().join("data/train"))
                    .into_iter()
                    .map(|p| {
                        let len = std::fs::metadata(&p).unwrap().len();
                        (p.to_string_lossy().into_owned(), len)
                    })
                    .collect(),
            };
            assert_eq!(files.len(), 4, "{name}: {files:?}");
            if !object {
                // DLIO makes `valid/` even without evaluation files; Python DLIO lists it.
                assert!(tmp.path().join("data/valid").is_dir(), "{name}: no valid/");
            }
            let ext = if format == "tfrecord" {
                "tfrecord"
            } else {
                &format
            };
            assert!(
                files.iter().all(|(f, len)| f.ends_with(ext) && *len > 0),
                "{name}: {files:?}"
            );
        }
        if train {
            let summary = json(&run.join("summary.json"));
            assert!(
                summary["metric"]["train_au_meet_expectation"].is_string(),
                "{name}"
            );
            assert!(bytes_read(&run) > 0, "{name} read nothing");
            let config = std::fs::read_to_string(run.join("dlio_config/overrides.yaml")).unwrap();
            assert!(
                config.starts_with(&format!("- workload={name}\n")),
                "{config}"
            );
        }
        if checkpoint {
            let summary = json(&run.join("summary.json"));
            let size = summary["metric"]["checkpoint_size_GB"].as_f64();
            assert!(
                size.is_some_and(|gb| gb > 0.0),
                "{name}: {}",
                summary["metric"]
            );
            let written: u64 = match object {
                true => objects(&moto, &format!("{name}/ckpt/"))
                    .iter()
                    .map(|(_, len)| len)
                    .sum(),
                false => common::files_under(&tmp.path().join("ckpt"))
                    .iter()
                    .map(|f| std::fs::metadata(f).unwrap().len())
                    .sum(),
            };
            assert!(written > 0, "{name}: no checkpoint bytes");
        }
    }
    // Every workload ran, the object-storage ones included (a run that could not reach
    // the server fails above instead of being left out).
    assert_eq!(names.len(), 64, "{names:?}");
    assert_eq!(ran, names.len());
    assert!(
        on_object_storage >= 10,
        "{on_object_storage} on object storage"
    );
}

#[test]
fn s3_readers_keep_the_forks_window_of_gets_in_flight() {
    let moto = Moto::start();
    moto.boto3(&format!("s3.create_bucket(Bucket='{BUCKET}')"));
    let tmp = tempfile::tempdir().unwrap();
    let words = |endpoint: &str, run: &str| -> Vec<String> {
        vec![
            "workload=unet3d_h100_s3dlio".into(),
            format!("++workload.storage.storage_root={BUCKET}"),
            format!("++workload.storage.storage_options.endpoint_url={endpoint}"),
            "++workload.dataset.data_folder=window/data".into(),
            "++workload.dataset.num_files_train=16".into(),
            "++workload.dataset.num_samples_per_file=1".into(),
            "++workload.dataset.record_length_bytes=65536".into(),
            "++workload.dataset.record_length_bytes_stdev=0".into(),
            "++workload.dataset.record_length_bytes_resize=0".into(),
            "++workload.train.epochs=1".into(),
            "++workload.train.computation_time=0.001".into(),
            "++workload.reader.batch_size=2".into(),
            "++workload.reader.read_threads=1".into(),
            format!("hydra.run.dir={}", tmp.path().join(run).display()),
        ]
    };
    let with_keys = |cmd: &mut Command| {
        cmd.env("AWS_ACCESS_KEY_ID", moto::KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", moto::SECRET);
    };
    let mut generate = dlio();
    generate
        .arg("run")
        .args(words(&moto.endpoint, "gen"))
        .args([
            "++workload.workflow.generate_data=True",
            "++workload.workflow.train=False",
        ]);
    with_keys(&mut generate);
    run_ok(&mut generate);
    let stored: u64 = objects(&moto, "window/data/train/")
        .iter()
        .map(|(_, l)| l)
        .sum();
    for (library, window, expected) in [
        ("s3dlio", "4", 4),
        ("minio", "2", 2),
        ("s3torchconnector", "null", 1),
    ] {
        let report = tmp.path().join(format!("{library}.inflight"));
        let proxy = InflightProxy::start(&moto.endpoint, Duration::from_millis(60), report);
        let run = format!("run-{library}");
        let mut cmd = dlio();
        cmd.arg("run").args(words(&proxy.endpoint, &run)).args([
            format!("++workload.storage.storage_library={library}"),
            format!("++workload.storage.storage_options.prefetch_window={window}"),
        ]);
        with_keys(&mut cmd);
        run_ok(&mut cmd);
        let (most, gets) = proxy.most_and_count();
        assert_eq!(gets, 16, "{library}: one GET per object");
        // The data set is sized from the LIST's sizes, not a HEAD per object.
        assert_eq!(proxy.heads(), 0, "{library}: HEAD requests");
        assert_eq!(most, expected, "{library}: GETs in flight at once");
        // Every byte of every object was moved and counted.
        assert_eq!(bytes_read(&tmp.path().join(&run)), stored, "{library}");
    }
    // skip_listing: the names are computed and every 4th object (and the last) is checked with
    // a HEAD; the data set is sized from those, with no HEAD of its own.
    let report = tmp.path().join("skip.inflight");
    let proxy = InflightProxy::start(&moto.endpoint, Duration::ZERO, report);
    let mut cmd = dlio();
    cmd.arg("run").args(words(&proxy.endpoint, "skip")).args([
        "++workload.dataset.skip_listing=True",
        "++workload.dataset.listing_validation_interval=4",
    ]);
    with_keys(&mut cmd);
    run_ok(&mut cmd);
    assert_eq!(
        proxy.heads(),
        5,
        "objects 0, 4, 8, 12 and 15 checked, nothing more"
    );
    assert_eq!(bytes_read(&tmp.path().join("skip")), stored);
}

/// S3's throttling reply (503 SlowDown): a store that throttles every other GET is read to the
/// last byte through bounded retries; one that throttles every GET fails within the retry
/// budget with an error that names the endpoint and says what to change, and no credential.
#[test]
fn throttled_gets_are_retried_and_a_store_that_always_throttles_fails_clearly() {
    let moto = Moto::start();
    let bucket = BUCKET;
    moto.boto3(&format!("s3.create_bucket(Bucket='{bucket}')"));
    let tmp = tempfile::tempdir().unwrap();
    let words = |endpoint: &str, run: &str| -> Vec<String> {
        vec![
            "run".into(),
            "workload=unet3d_h100_s3dlio".into(),
            format!("++workload.storage.storage_root={bucket}"),
            format!("++workload.storage.storage_options.endpoint_url={endpoint}"),
            "++workload.storage.storage_options.s3_max_attempts=6".into(),
            "++workload.dataset.data_folder=throttle/data".into(),
            "++workload.dataset.num_files_train=8".into(),
            "++workload.dataset.record_length_bytes=65536".into(),
            "++workload.dataset.record_length_bytes_stdev=0".into(),
            "++workload.dataset.record_length_bytes_resize=0".into(),
            "++workload.train.epochs=1".into(),
            "++workload.train.computation_time=0".into(),
            "++workload.reader.batch_size=2".into(),
            "++workload.reader.read_threads=1".into(),
            format!("hydra.run.dir={}", tmp.path().join(run).display()),
        ]
    };
    let keyed = |cmd: &mut Command| {
        cmd.env("AWS_ACCESS_KEY_ID", moto::KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", moto::SECRET);
    };
    let mut generate = dlio();
    generate.args(words(&moto.endpoint, "gen")).args([
        "++workload.workflow.generate_data=True",
        "++workload.workflow.train=False",
    ]);
    keyed(&mut generate);
    run_ok(&mut generate);
    let stored: u64 = objects(&moto, "throttle/data/train/")
        .iter()
        .map(|(_, l)| l)
        .sum();

    let proxy = InflightProxy::start_throttling(
        &moto.endpoint,
        Duration::ZERO,
        tmp.path().join("alternate.txt"),
        "alternate",
    );
    let mut cmd = dlio();
    cmd.args(words(&proxy.endpoint, "alternate"));
    keyed(&mut cmd);
    run_ok(&mut cmd);
    assert!(
        proxy.throttled() >= 8,
        "{} GETs throttled",
        proxy.throttled()
    );
    assert_eq!(bytes_read(&tmp.path().join("alternate")), stored);

    let always = InflightProxy::start_throttling(
        &moto.endpoint,
        Duration::ZERO,
        tmp.path().join("always.txt"),
        "always",
    );
    let mut cmd = dlio();
    cmd.args(words(&always.endpoint, "always"));
    keyed(&mut cmd);
    let started = std::time::Instant::now();
    let err = run_err(&mut cmd);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.contains(&always.endpoint), "{err}");
    assert!(err.contains("503") && err.contains("SlowDown"), "{err}");
    assert!(err.contains("s3_max_attempts"), "the fix is named: {err}");
    assert!(!err.contains(moto::SECRET), "{err}");
    // Bounded: each object was tried at most s3_max_attempts times.
    let (_, gets) = always.most_and_count();
    assert!(gets <= 8 * 6, "{gets} GETs for 8 objects and 6 attempts");
}
