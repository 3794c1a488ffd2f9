//! The s3 engine against a real S3-compatible server: moto's, started on 127.0.0.1 with a
//! free port and killed at the end. Skipped, with the reason printed, only when moto cannot
//! be started (not installed and `pip install 'moto[server]'` failed).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{DataRng, FileLayout, format_for};
use dlio_storage::{
    EngineKind, EngineSettings, IoCounters, S3Settings, Storage, StorageError, engine_for,
};

const KEY_ID: &str = "AKIDLIOTESTKEY0001";
const SECRET: &str = "dlio-test-secret-value-0123456789";

struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

fn moto_installed() -> bool {
    Command::new("moto_server")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn start_moto() -> Result<Moto, String> {
    if !moto_installed() {
        let installed = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "moto[server]", "boto3"])
            .status()
            .is_ok_and(|s| s.success());
        if !installed || !moto_installed() {
            return Err(
                "moto_server is not installed and `pip install 'moto[server]'` failed".into(),
            );
        }
    }
    let port = free_port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start moto_server: {e}"))?;
    let moto = Moto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("moto_server did not listen within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(moto)
}

/// Runs boto3 against the server; returns stdout.
fn boto3(endpoint: &str, script: &str) -> String {
    let program = format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url='{endpoint}', region_name='us-east-1', \
         aws_access_key_id='{KEY_ID}', aws_secret_access_key='{SECRET}')\n{script}"
    );
    let output = Command::new("python3")
        .args(["-c", &program])
        .output()
        .expect("python3");
    assert!(
        output.status.success(),
        "boto3 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

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
    }
}

fn engine_settings(s3: S3Settings, transfer_size: Option<u64>) -> EngineSettings {
    EngineSettings {
        engine: EngineKind::S3,
        odirect: false,
        transfer_size,
        io_depth: 4,
        s3: Some(s3),
    }
}

fn layout() -> FileLayout {
    FileLayout {
        samples: 4,
        sample_dims: vec![96, 200],
        element: ElementType::Uint8,
        compression: Compression::None,
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
    let moto = match start_moto() {
        Ok(moto) => moto,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    boto3(&moto.endpoint, "s3.create_bucket(Bucket='dlio-data')");

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
        assert_eq!(entry.len, std::fs::metadata(local).unwrap().len());
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

    // A checkpoint larger than a part goes up as a multipart upload and reads back.
    let checkpoint = Path::new("s3://dlio-data/checkpoints/global_epoch1_step2/model.pt");
    let data: Vec<u8> = (0..(20 << 20) + 123)
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
    // An abandoned upload leaves nothing behind.
    let mut abandoned = storage
        .create(Path::new("s3://dlio-data/checkpoints/x.pt"))
        .unwrap();
    abandoned.write_all(&data[..(9 << 20)]).unwrap();
    drop(abandoned);

    let listing = boto3(
        &moto.endpoint,
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
        boto3(
            &moto.endpoint,
            "print(s3.list_objects_v2(Bucket='dlio-data')['KeyCount'])"
        )
        .trim(),
        "1"
    );

    // A key outside the configured bucket is refused with the fix.
    let error = storage.open(Path::new("s3://other/x.npz")).err().unwrap();
    assert!(error.to_string().contains("storage_root"), "{error}");
}

#[test]
fn an_unreachable_endpoint_fails_within_the_retry_budget_naming_the_endpoint() {
    let port = free_port(); // nothing listens there
    let endpoint = format!("http://127.0.0.1:{port}");
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
