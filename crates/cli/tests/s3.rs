//! A whole run against an S3-compatible store: moto's server on 127.0.0.1 (a free port,
//! killed at the end). Generation PUTs the dataset, two ranks train with ranged GETs, and
//! checkpoints are objects. Skipped, with the reason printed, only when moto cannot be
//! started (scripts/test.sh installs it).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

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

fn start_moto() -> Result<Moto, String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("moto_server is not installed ({e}); run scripts/test.sh"))?;
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

fn boto3(endpoint: &str, script: &str) -> String {
    let program = format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url='{endpoint}', region_name='us-east-1', \
         aws_access_key_id='k', aws_secret_access_key='s')\n{script}"
    );
    let out = Command::new("python3")
        .args(["-c", &program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "boto3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn generate_train_on_two_ranks_and_checkpoint_in_a_bucket() {
    let moto = match start_moto() {
        Ok(m) => m,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    boto3(&moto.endpoint, "s3.create_bucket(Bucket='dlio-s3-test')");
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dlio"))
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
    let listing = boto3(
        &moto.endpoint,
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
