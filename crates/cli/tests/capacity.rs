//! `dlio capacity` and the read cap it is tested with (`storage.read_bytes_per_second`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{dlio, json, run_err, run_ok};
use serde_json::Value;

/// A workload whose capacity is known by construction: each accelerator consumes a batch of
/// 4 x 64 KiB every 0.1 s (2.5 MiB/s at full AU), and the engine is capped at 6 MiB/s for the
/// whole process. 2 accelerators need 5 MiB/s (AU ~100%), 3 need 7.5 (AU at most 6/7.5 = 80%),
/// 4 need 10 (at most 60%): the answer at AU >= 90% is 2.
fn throttled_workload(dir: &Path) -> Vec<String> {
    [
        "workload=default".to_string(),
        format!(
            "++workload.dataset.data_folder={}",
            dir.join("data").display()
        ),
        "++workload.dataset.format=npy".into(),
        "++workload.dataset.num_files_train=192".into(),
        "++workload.dataset.num_files_eval=0".into(),
        "++workload.dataset.num_samples_per_file=1".into(),
        "++workload.dataset.record_length_bytes=65536".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.reader.batch_size=4".into(),
        "++workload.reader.read_threads=2".into(),
        "++workload.train.epochs=1".into(),
        "++workload.train.computation_time=0.1".into(),
        "++workload.workflow.evaluation=False".into(),
        "++workload.workflow.generate_data=True".into(),
        "++workload.workflow.checkpoint=False".into(),
        "++workload.storage.read_bytes_per_second=6291456".into(),
    ]
    .into()
}

#[test]
fn capacity_finds_the_count_a_throttled_engine_can_feed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capacity");
    let output = run_ok(
        dlio()
            .args(["capacity", "--repeats", "2", "--out"])
            .arg(&out)
            .args(throttled_workload(tmp.path())),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Capacity: 2 accelerators of default at AU >= 90.0% in 2 of 2 runs"),
        "{stdout}"
    );
    let report = json(&out.join("capacity.json"));
    assert_eq!(report["accelerators"], 2, "{report:#}");
    assert_eq!(report["capped_at_max"], false);
    let points: Vec<&Value> = report["points"].as_array().unwrap().iter().collect();
    let counts: Vec<u64> = points
        .iter()
        .map(|p| p["accelerators"].as_u64().unwrap())
        .collect();
    // Doubling 1, 2, 4 (fails), then bisecting to 3 (fails).
    assert_eq!(counts, [1, 2, 3, 4]);
    let passed: Vec<bool> = points
        .iter()
        .map(|p| p["passed"].as_bool().unwrap())
        .collect();
    assert_eq!(passed, [true, true, false, false]);
    let runs: Vec<usize> = points
        .iter()
        .map(|p| p["repeats"].as_array().unwrap().len())
        .collect();
    // A passing point ran both repeats; a failing one stopped at its first failure.
    assert_eq!(runs, [2, 2, 1, 1]);
    let au = |i: usize| points[i]["repeats"][0]["au_percentage"].as_f64().unwrap();
    assert!(au(1) > 95.0, "2 accelerators: AU {}", au(1));
    assert!(
        (70.0..86.0).contains(&au(2)),
        "3 accelerators: AU {}",
        au(2)
    );
    assert!(
        (50.0..66.0).contains(&au(3)),
        "4 accelerators: AU {}",
        au(3)
    );
    // The cap holds: 3 and 4 accelerators together read at most 6 MiB/s.
    for i in [2, 3] {
        let mib_s = points[i]["repeats"][0]["read_mib_per_second"]
            .as_f64()
            .unwrap();
        assert!(
            mib_s < 6.05,
            "{} accelerators read {mib_s} MiB/s",
            counts[i]
        );
    }
    // Every run is a real run with its own summary, CPU and memory figures.
    for p in &points {
        for r in p["repeats"].as_array().unwrap() {
            let summary = json(&Path::new(r["output"].as_str().unwrap()).join("summary.json"));
            assert_eq!(summary["num_accelerators"], p["accelerators"]);
            assert!(r["cpu_seconds"].as_f64().unwrap() > 0.0);
            assert!(r["peak_rss_mib"].as_f64().unwrap() > 1.0);
        }
    }
    // The dataset was generated once, before the search: 192 files.
    let files = std::fs::read_dir(tmp.path().join("data/train"))
        .unwrap()
        .count();
    assert_eq!(files, 192);
    let png = std::fs::read(out.join("capacity.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn capacity_stops_at_max_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capacity");
    let mut words = throttled_workload(tmp.path());
    words.retain(|w| !w.contains("read_bytes_per_second"));
    words.push("++workload.dataset.num_files_train=32".into());
    let output = run_ok(
        dlio()
            .args(["capacity", "--repeats", "1", "--max", "2", "--out"])
            .arg(&out)
            .args(words),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Capacity: >= 2 accelerators"), "{stdout}");
    assert_eq!(json(&out.join("capacity.json"))["capped_at_max"], true);
}

#[test]
fn capacity_refuses_bad_bounds_and_configs_before_running_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let err = run_err(
        dlio()
            .args(["capacity", "--min", "8", "--max", "4", "--out"])
            .arg(tmp.path().join("c"))
            .args(throttled_workload(tmp.path())),
    );
    assert!(err.contains("--min 8 and --max 4"), "{err}");
    let err = run_err(
        dlio()
            .args(["capacity", "--out"])
            .arg(tmp.path().join("c"))
            .args(throttled_workload(tmp.path()))
            .arg("++workload.storage.read_bytes_per_second=100"),
    );
    assert!(err.contains("storage.read_bytes_per_second"), "{err}");
    assert!(!tmp.path().join("data").exists(), "nothing may run");
}

#[test]
fn the_read_cap_holds_for_every_engine() {
    for engine in ["posix", "mmap", "io_uring"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut words = throttled_workload(tmp.path());
        words.retain(|w| !w.contains("computation_time") && !w.contains("num_files_train"));
        // 64 files of 64 KiB = 4 MiB at 8 MiB/s: at least 0.5 s of reading.
        words.extend([
            "++workload.dataset.num_files_train=64".to_string(),
            "++workload.train.computation_time=0".into(),
            "++workload.storage.read_bytes_per_second=8388608".into(),
            format!("++workload.storage.io_engine={engine}"),
            format!(
                "++workload.output.folder={}",
                tmp.path().join("out").display()
            ),
        ]);
        run_ok(dlio().arg("generate").args(&words));
        let started = Instant::now();
        run_ok(
            dlio()
                .args(["run", "--ranks", "2"])
                .args(&words)
                .arg("++workload.workflow.generate_data=False"),
        );
        let took = started.elapsed().as_secs_f64();
        let summary = json(&tmp.path().join("out/summary.json"));
        let bytes = summary["dlio_rs"]["bytes_read"].as_u64().unwrap();
        assert!(bytes >= 64 * 65536, "{engine}: read {bytes} bytes");
        let rate = summary["dlio_rs"]["train_bytes_read_per_second"]
            .as_f64()
            .unwrap();
        assert!(rate <= 8.4e6, "{engine}: {rate} B/s over a cap of 8 MiB/s");
        assert!(took >= 0.45, "{engine}: 4 MiB at 8 MiB/s took {took} s");
    }
}

#[test]
fn a_first_count_that_fails_is_bisected_below() {
    // The throttled workload from --min 4: 4 fails, then 2 passes and 3 fails: still 2.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capacity");
    run_ok(
        dlio()
            .args(["capacity", "--repeats", "1", "--min", "4", "--out"])
            .arg(&out)
            .args(throttled_workload(tmp.path())),
    );
    let report = json(&out.join("capacity.json"));
    assert_eq!(report["accelerators"], 2, "{report:#}");
    let counts: Vec<u64> = report["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["accelerators"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [2, 3, 4]);
}

#[test]
fn an_interrupted_search_reports_the_points_it_finished_and_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capacity");
    let mut child = dlio()
        .args(["capacity", "--repeats", "1", "--out"])
        .arg(&out)
        .args(throttled_workload(tmp.path()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first point (1 accelerator, about 5 s at the cap) to have started its run.
    let first_log = out.join("points/accelerators-1/repeat-1/dlio.log");
    let started = Instant::now();
    while !std::fs::read_to_string(&first_log).is_ok_and(|t| t.contains("Starting epoch")) {
        assert!(
            started.elapsed().as_secs() < 60,
            "the first point never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SIGINT to the search alone (not its process group): it must pass it on and report.
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let report = json(&out.join("capacity.json"));
    assert_eq!(report["accelerators"], 0, "{report:#}");
    assert_eq!(report["points"].as_array().unwrap().len(), 0, "{report:#}");
    // The interrupted run left a summary marked incomplete, as every interrupted run does.
    let summary = json(&out.join("points/accelerators-1/repeat-1/summary.json"));
    assert_eq!(summary["dlio_rs"]["complete"], false);
}
