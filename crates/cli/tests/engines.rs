//! Every I/O engine runs a workload end to end and moves the same bytes; the engine and its
//! figures are in summary.json.

use std::path::Path;

use serde_json::Value;

mod common;
use common::dlio;

fn run(args: &[String]) -> Value {
    let out = dlio().arg("run").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "dlio failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folder = args
        .iter()
        .find_map(|a| a.strip_prefix("++workload.output.folder="))
        .unwrap();
    serde_json::from_str(&std::fs::read_to_string(Path::new(folder).join("summary.json")).unwrap())
        .unwrap()
}

fn workload(tmp: &Path, out: &str) -> Vec<String> {
    vec![
        "workload=default".into(),
        format!(
            "++workload.dataset.data_folder={}",
            tmp.join("data").display()
        ),
        "++workload.dataset.num_files_train=8".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.dataset.record_length_bytes=65536".into(),
        "++workload.workflow.evaluation=False".into(),
        "++workload.reader.batch_size=2".into(),
        "++workload.train.computation_time=0".into(),
        "++workload.train.epochs=1".into(),
        format!("++workload.output.folder={}", tmp.join(out).display()),
    ]
}

#[test]
fn every_local_engine_reads_the_same_bytes() {
    // The data set lives on the temp folder's file system (ext4 here), where O_DIRECT works.
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut gen_args = workload(tmp.path(), "gen");
    gen_args.push("++workload.workflow.generate_data=True".into());
    gen_args.push("++workload.workflow.train=False".into());
    let out = dlio().arg("run").args(&gen_args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Probed before any run: an engine the machine has must run; one it lacks is skipped.
    let mut bytes = Vec::new();
    let mut expected = 0;
    for engine in ["posix", "direct", "mmap", "io_uring"] {
        if !dlio_testkit::skip::engine_runs_here(engine, engine == "io_uring", engine == "direct") {
            continue;
        }
        expected += 1;
        let mut args = workload(tmp.path(), engine);
        args.push(format!("++workload.storage.io_engine={engine}"));
        args.push("++workload.storage.drop_page_cache=True".into());
        let out = dlio().arg("run").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{engine}: {stderr}");
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join(engine).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(summary["dlio_rs"]["io_engine"]["name"], engine);
        let latency = &summary["dlio_rs"]["io_engine"]["per_process"][0]["read_latency_us"];
        assert!(
            latency["count"].as_u64().unwrap() > 0,
            "{engine}: {latency}"
        );
        bytes.push((engine, summary["dlio_rs"]["bytes_read"].as_u64().unwrap()));
    }
    assert_eq!(bytes.len(), expected);
    assert!(
        bytes.iter().all(|(_, b)| *b == bytes[0].1 && *b > 0),
        "{bytes:?}"
    );
}

#[test]
fn transfer_size_splits_every_read_into_requests_of_that_size() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = workload(tmp.path(), "out");
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.reader.transfer_size=16384".into());
    let summary = run(&args);
    let file_len = std::fs::read_dir(tmp.path().join("data/train"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .metadata()
        .unwrap()
        .len();
    let ours = &summary["dlio_rs"];
    // 8 samples (one file each), each file read whole in ceil(len / 16 KiB) requests.
    assert_eq!(
        ours["read_ops"].as_u64().unwrap(),
        8 * file_len.div_ceil(16384)
    );
    assert_eq!(ours["bytes_read"].as_u64().unwrap(), 8 * file_len);
    assert_eq!(ours["io_engine"]["transfer_size"], 16384);
}

#[test]
fn the_memory_check_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = workload(tmp.path(), "out");
    args.push("++workload.workflow.generate_data=True".into());
    let summary = run(&args);
    let check = &summary["dlio_rs"]["memory_check"];
    assert_eq!(check["meets_5x_rule"], false, "{check}");
    assert!(check["memory_bytes"].as_u64().unwrap() > 0);
}
