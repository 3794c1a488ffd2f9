//! The s3 engine against a real S3-compatible server: moto's, started on 127.0.0.1 on a port
//! it bound itself and stopped at the end (`dlio_testkit::moto`). A moto that cannot start
//! fails these tests (`scripts/test.sh` installs it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{DataRng, FileLayout, format_for};
use dlio_storage::{
    EngineKind, EngineSettings, Extent, IoCounters, S3Settings, Storage, StorageError, engine_for,
};

use dlio_testkit::moto::{KEY_ID, Moto, SECRET};

fn s3_settings(endpoint: &str, bucket: &str) -> S3Settings {
    S3Settings {
        bucket: bucket.into(),
        endpoint_url: Some(endpoint.into()),
        region: Some("us-east-1".into()),
        access_key_id: Some(KEY_ID.into()),
        secret_access_key: Some(SECRET.into()),
        force_path_style: true,
        max_attempts: 2,
        connect_timeout: Duration::from_secs(2),
        ca_bundle: None,
    }
}

fn engine_settings(s3: S3Settings, transfer_size: Option<u64>) -> EngineSettings {
    EngineSettings {
        engine: EngineKind::S3,
        odirect: false,
        transfer_size,
        transfer_size_distribution: Vec::new(),
        seed: 0,
        sample_request_patterns: Vec::new(),
        read_buffer: None,
        head_request_size: None,
        io_depth: 4,
        s3: Some(s3),
        read_bytes_per_second: 0,
        fresh_read_share: 0.0,
        buffer_page_offset: None,
        request_work: std::time::Duration::ZERO,
    }
}

fn layout() -> FileLayout {
    FileLayout {
        samples: 4,
        sample_dims: vec![96, 200],
        element: ElementType::Uint8,
        compression: Compression::None,
        fixed_size: false,
    }
}

fn samples(format: FormatKind, storage: &dyn Storage, path: &Path) -> Vec<Vec<u8>> {
    let format = format_for(format).unwrap();
    let mut reader = format.reader(&layout());
    reader.open(storage, 0, path).unwrap();
    let out = (0..layout().samples)
        .map(|i| reader.read_sample(storage, 0, i).unwrap().to_vec())
        .collect();
    reader.close(0);
    out
}

#[test]
fn a_dataset_and_a_checkpoint_live_in_a_bucket_and_read_back_identically() {
    let moto = Moto::start();
    moto.boto3("s3.create_bucket(Bucket='dlio-data')");

    // A missing bucket is named; credentials appear nowhere.
    let error =
        engine_for(&engine_settings(s3_settings(&moto.endpoint, "nope"), None)).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, StorageError::BucketNotFound { .. }) && message.contains("`nope`"),
        "{message}"
    );
    let debug = format!("{:?}", s3_settings(&moto.endpoint, "dlio-data"));
    assert!(
        !debug.contains(SECRET) && !debug.contains(KEY_ID),
        "{debug}"
    );

    let transfer = 64 * 1024;
    let engine = engine_for(&engine_settings(
        s3_settings(&moto.endpoint, "dlio-data"),
        Some(transfer),
    ))
    .unwrap();
    assert_eq!(engine.name(), "s3");
    let storage = engine.storage();
    let local_dir = tempfile::tempdir().unwrap();
    let posix = dlio_storage::PosixStorage::new();

    // Generation: 3 files per format, the same seeds locally for reference.
    let mut files: Vec<(FormatKind, PathBuf, PathBuf)> = Vec::new();
    for format in [FormatKind::Npz, FormatKind::Npy] {
        let f = format_for(format).unwrap();
        for i in 0..3u64 {
            let name = format!("img_{i}_of_3.{}", f.extension());
            let remote = PathBuf::from(format!("s3://dlio-data/data/{}/train/{name}", f.name()));
            let local = local_dir.path().join(f.name()).join(&name);
            f.generate(
                &*storage,
                &remote,
                &layout(),
                &mut DataRng::for_file(7, 0, i),
            )
            .unwrap();
            f.generate(&posix, &local, &layout(), &mut DataRng::for_file(7, 0, i))
                .unwrap();
            files.push((format, remote, local));
        }
    }

    // Listing: one LIST per directory, common prefixes as directories.
    let top = storage.list(Path::new("s3://dlio-data/data")).unwrap();
    let names: Vec<_> = top.iter().map(|e| (e.path.clone(), e.is_dir)).collect();
    assert_eq!(
        names,
        [
            (PathBuf::from("s3://dlio-data/data/npy"), true),
            (PathBuf::from("s3://dlio-data/data/npz"), true)
        ]
    );
    let train = storage
        .list(Path::new("s3://dlio-data/data/npz/train"))
        .unwrap();
    assert_eq!(train.len(), 3);
    for entry in &train {
        let local = local_dir
            .path()
            .join("npz")
            .join(entry.path.file_name().unwrap());
        assert_eq!(entry.len, Some(std::fs::metadata(local).unwrap().len()));
    }
    assert!(matches!(
        storage.list(Path::new("s3://dlio-data/missing")),
        Err(StorageError::NotFound { .. })
    ));

    // Two ranks read alternate files, with their own counters.
    let mut expected_requests = [0u64; 2];
    let mut expected_bytes = [0u64; 2];
    let counters: Vec<Arc<IoCounters>> = (0..2).map(|_| Arc::new(IoCounters::default())).collect();
    for (index, (format, remote, local)) in files.iter().enumerate() {
        let rank = index % 2;
        let rank_storage = engine.metered(Arc::clone(&counters[rank]));
        assert_eq!(
            samples(*format, &*rank_storage, remote),
            samples(*format, &posix, local),
            "{}",
            remote.display()
        );
        let len = std::fs::metadata(local).unwrap().len();
        expected_requests[rank] += len.div_ceil(transfer);
        expected_bytes[rank] += len;
    }
    for rank in 0..2 {
        let counts = counters[rank].snapshot();
        assert_eq!(counts.opens, 3, "rank {rank}");
        assert_eq!(counts.read_requests, expected_requests[rank], "rank {rank}");
        assert_eq!(counts.bytes_read, expected_bytes[rank], "rank {rank}");
    }

    // A checkpoint larger than one PUT (32 MiB) goes up as a multipart upload (the first
    // 32 MiB as four parts, then a last part of 123 bytes) and reads back.
    let checkpoint = Path::new("s3://dlio-data/checkpoints/global_epoch1_step2/model.pt");
    let data: Vec<u8> = (0..(32 << 20) + 123)
        .map(|i: usize| (i * 7 % 251) as u8)
        .collect();
    let mut writer = storage.create(checkpoint).unwrap();
    for piece in data.chunks(1 << 20) {
        writer.write_all(piece).unwrap();
    }
    assert_eq!(
        storage.size(checkpoint).unwrap(),
        None,
        "visible before commit"
    );
    assert_eq!(writer.commit().unwrap(), data.len() as u64);
    assert_eq!(storage.size(checkpoint).unwrap(), Some(data.len() as u64));
    let mut back = vec![0u8; data.len()];
    storage
        .open(checkpoint)
        .unwrap()
        .read_exact_at(&mut back, 0)
        .unwrap();
    assert!(back == data, "checkpoint bytes differ");
    // The same object as streams of 1 MiB ranges, last first: consumed straight from the
    // GETs (`raw`), and split into transfers, a window-full per batch (`storage`).
    for (label, streamed) in [("raw", engine.raw()), ("split", engine.storage())] {
        let mut handle = streamed.open(checkpoint).unwrap();
        let block = 1 << 20;
        let mut window = vec![0u8; 3 * block];
        let mut extents = (0..data.len().div_ceil(block))
            .rev()
            .map(|i| Extent::new((i * block) as u64, block.min(data.len() - i * block)));
        let mut seen = 0;
        handle
            .read_stream(&mut window, block, &mut extents, &mut |offset, got| {
                let at = offset as usize;
                assert!(got == &data[at..at + got.len()], "{label}: bytes at {at}");
                seen += got.len();
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, data.len(), "{label}");
        let past_end = Extent::new(data.len() as u64 - 1, 2);
        let error = handle
            .read_stream(
                &mut window,
                block,
                &mut [past_end].into_iter(),
                &mut |_, _| Ok(()),
            )
            .unwrap_err();
        assert!(
            matches!(error, StorageError::Truncated { .. }),
            "{label}: {error}"
        );
    }
    // An abandoned upload leaves nothing behind.
    let mut abandoned = storage
        .create(Path::new("s3://dlio-data/checkpoints/x.pt"))
        .unwrap();
    abandoned.write_all(&data[..(9 << 20)]).unwrap();
    drop(abandoned);

    let listing = moto.boto3(
        "for o in s3.list_objects_v2(Bucket='dlio-data')['Contents']: print(o['Key'], o['Size'])",
    );
    let objects: Vec<&str> = listing.lines().collect();
    assert_eq!(objects.len(), 7, "{listing}");
    assert!(
        listing.contains(&format!(
            "checkpoints/global_epoch1_step2/model.pt {}",
            data.len()
        )),
        "{listing}"
    );

    storage
        .remove_dir_all(Path::new("s3://dlio-data/data"))
        .unwrap();
    assert_eq!(
        moto.boto3("print(s3.list_objects_v2(Bucket='dlio-data')['KeyCount'])")
            .trim(),
        "1"
    );

    // A key outside the configured bucket is refused with the fix.
    let error = storage.open(Path::new("s3://other/x.npz")).err().unwrap();
    assert!(error.to_string().contains("storage_root"), "{error}");
}

#[test]
fn an_unreachable_endpoint_fails_within_the_retry_budget_naming_the_endpoint() {
    // Bound by this test and never listened on: refused for as long as the test holds it.
    let held = dlio_testkit::net::RefusingPort::bind();
    let endpoint = format!("http://127.0.0.1:{}", held.port);
    let started = Instant::now();
    let error =
        engine_for(&engine_settings(s3_settings(&endpoint, "dlio-data"), None)).unwrap_err();
    let elapsed = started.elapsed();
    let message = error.to_string();
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    assert!(message.contains(&endpoint), "{message}");
    assert!(
        !message.contains(SECRET) && !message.contains(KEY_ID),
        "{message}"
    );
}

#[test]
fn wrong_credentials_fail_at_once_with_an_authentication_error_that_hides_them() {
    let moto = Moto::start();
    moto.boto3("s3.create_bucket(Bucket='dlio-auth')");
    let (key_id, secret) = moto.require_authentication();
    let wrong_secret = format!("{secret}-wrong");
    let unknown_key = "AKIADLIOUNKNOWNKEY01";
    for (id, secret, code, setting) in [
        (
            key_id.as_str(),
            wrong_secret.as_str(),
            "SignatureDoesNotMatch",
            "secret_access_key",
        ),
        (
            unknown_key,
            secret.as_str(),
            "InvalidAccessKeyId",
            "access_key_id",
        ),
    ] {
        let mut settings = s3_settings(&moto.endpoint, "dlio-auth");
        settings.access_key_id = Some(id.into());
        settings.secret_access_key = Some(secret.into());
        settings.max_attempts = 5;
        let started = Instant::now();
        let error = engine_for(&engine_settings(settings, None)).unwrap_err();
        let elapsed = started.elapsed();
        let message = error.to_string();
        assert!(
            matches!(error, StorageError::S3AccessRefused { .. }),
            "{error:?}"
        );
        // Fails at the first answer: object_store retries 5xx, 429 and transport errors, not 403.
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
        for wanted in [
            "S3 authentication failed",
            moto.endpoint.as_str(),
            "s3://dlio-auth",
            code,
            setting,
        ] {
            assert!(message.contains(wanted), "no `{wanted}` in: {message}");
        }
        assert!(
            !message.contains(secret) && !message.contains(id),
            "{message}"
        );
    }
}

/// A prefix of more than one LIST page (1000 keys) is handed over page by page: every key once,
/// with its size, the sub-prefix as a folder, and the same entries `list` gives sorted.
#[test]
fn a_listing_of_more_than_a_page_hands_over_every_key_once() {
    let moto = Moto::start();
    moto.boto3(
        "s3.create_bucket(Bucket='many')\n\
         for i in range(1100):\n    \
             s3.put_object(Bucket='many', Key=f'train/img_{i:04d}.npy', Body=b'x' * (i % 7))\n\
         s3.put_object(Bucket='many', Key='train/sub/a.npy', Body=b'')",
    );
    let engine = engine_for(&engine_settings(s3_settings(&moto.endpoint, "many"), None)).unwrap();
    let storage = engine.storage();
    let dir = Path::new("s3://many/train");
    let mut handed = Vec::new();
    storage
        .list_each(dir, &mut |entry| handed.push(entry))
        .unwrap();
    assert_eq!(handed.len(), 1101);
    let folders: Vec<_> = handed.iter().filter(|e| e.is_dir).collect();
    assert_eq!(folders.len(), 1);
    assert_eq!(folders[0].path, Path::new("s3://many/train/sub"));
    let mut files: Vec<_> = handed
        .iter()
        .filter(|e| !e.is_dir)
        .map(|e| (e.path.clone(), e.len))
        .collect();
    files.sort();
    files.dedup();
    assert_eq!(files.len(), 1100, "every key once");
    for (i, (path, len)) in files.iter().enumerate() {
        assert_eq!(*path, dir.join(format!("img_{i:04}.npy")));
        assert_eq!(*len, Some(i as u64 % 7));
    }
    let mut sorted = handed.clone();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(storage.list(dir).unwrap(), sorted);
    assert!(matches!(
        storage.list_each(Path::new("s3://many/none"), &mut |_| {}),
        Err(StorageError::NotFound { .. })
    ));
}
