//! The same binary under `mpirun`: processes share the plan, the barrier and the outputs.
//! Built only with the `mpi` feature (`scripts/test.sh` installs Open MPI and runs these).
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use dlio_config::{Sampler, Shuffle};
use dlio_plan::{EpochPlan, PlanSpec};
use serde_json::Value;

fn dlio_path() -> &'static str {
    env!("CARGO_BIN_EXE_dlio")
}

/// `mpirun -np N dlio ARGS` ([`mpi_env`]).
fn mpirun(np: u32, args: &[String], under: &Path) -> Command {
    let mut cmd = Command::new("mpirun");
    mpi_env(&mut cmd, under)
        .args(["--oversubscribe", "-np", &np.to_string(), dlio_path()])
        .args(args);
    cmd
}

/// Lets `cmd`'s `mpirun` (or a launcher's) run as root (CI does), with its session directory
/// of its own under `under` (a test's temporary folder). Open MPI keeps every job's session
/// under one folder per user and host in /tmp, which a job that ends removes: a job of a test
/// running beside it then failed to make its own there ("A call to mkdir was unable to create
/// the desired directory: /tmp/ompi.vm.0/pid.N").
fn mpi_env<'c>(cmd: &'c mut Command, under: &Path) -> &'c mut Command {
    static SESSIONS: AtomicU32 = AtomicU32::new(0);
    let session = under.join(format!(
        "mpi-session-{}",
        SESSIONS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&session).expect("a session folder");
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Open MPI 4 (ORTE) and 5 (PRRTE).
        .env("OMPI_MCA_orte_tmpdir_base", &session)
        .env("PRTE_MCA_prte_tmpdir_base", &session)
}

fn check(out: Output) -> Output {
    assert!(
        out.status.success(),
        "failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn workload(tmp: &Path, files: u64, batch: u64, epochs: u32, out: &str) -> Vec<String> {
    vec![
        "run".into(),
        "workload=default".into(),
        format!(
            "++workload.dataset.data_folder={}",
            tmp.join("data").display()
        ),
        format!("++workload.dataset.num_files_train={files}"),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.dataset.record_length_bytes=4096".into(),
        "++workload.dataset.record_length_bytes_stdev=1024".into(),
        "++workload.workflow.evaluation=False".into(),
        format!("++workload.reader.batch_size={batch}"),
        "++workload.reader.file_shuffle=seed".into(),
        "++workload.reader.sample_shuffle=seed".into(),
        "++workload.train.computation_time=0".into(),
        format!("++workload.train.epochs={epochs}"),
        format!("++workload.output.folder={}", tmp.join(out).display()),
    ]
}

fn generate(tmp: &Path, files: u64) {
    let mut args = workload(tmp, files, 1, 1, "gen");
    args.push("++workload.workflow.generate_data=True".into());
    args.push("++workload.workflow.train=False".into());
    check(Command::new(dlio_path()).args(&args).output().unwrap());
}

fn train_files(tmp: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(tmp.join("data/train"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "npz"))
        .collect();
    files.sort();
    files
}

fn per_rank_bytes(summary: &Value) -> Vec<u64> {
    let mut ranks: Vec<(u64, u64)> = summary["dlio_rs"]["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["train_io"]["bytes_read"].as_u64().unwrap(),
            )
        })
        .collect();
    ranks.sort();
    ranks.into_iter().map(|(_, b)| b).collect()
}

/// Process 0 lists the folder and the others take its list: as the pattern of the names when
/// it found only generation's, as the table of names when it found others (a stray file).
#[test]
fn four_processes_read_exactly_their_planned_disjoint_shares() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), 24);
    for stray in [false, true] {
        if stray {
            // Sorted after img_05_of_24.npz: the listing's 24 files are no longer the first
            // 24 generated.
            std::fs::copy(
                tmp.path().join("data/train/img_20_of_24.npz"),
                tmp.path().join("data/train/img_05a.npz"),
            )
            .unwrap();
        }
        check(
            mpirun(4, &workload(tmp.path(), 24, 2, 1, "out"), tmp.path())
                .output()
                .unwrap(),
        );
        let summary = json(&tmp.path().join("out/summary.json"));
        assert_eq!(summary["num_accelerators"], 4);
        assert_eq!(summary["num_hosts"], 1);
        for rank in 0..4 {
            assert!(tmp.path().join(format!("out/{rank}_output.json")).exists());
        }
        // What each rank should have read, from the plan itself: npz on_demand reads the whole
        // file of every sample, and the files have different sizes (stdev > 0), so the bytes
        // identify the files.
        let files = train_files(tmp.path());
        assert_eq!(files.len(), if stray { 25 } else { 24 });
        let sizes: Vec<u64> = files.iter().map(|f| f.metadata().unwrap().len()).collect();
        let spec = four_rank_plan();
        let mut seen = std::collections::HashSet::new();
        let expected: Vec<u64> = (0..4)
            .map(|rank| {
                EpochPlan::new(&spec, 1, rank)
                    .unwrap()
                    .samples()
                    .map(|s| {
                        assert!(seen.insert(s.file), "file {} planned twice", s.file);
                        sizes[s.file as usize]
                    })
                    .sum()
            })
            .collect();
        assert_eq!(seen.len(), 24);
        assert_eq!(per_rank_bytes(&summary), expected, "stray file: {stray}");
    }
}

/// Names a process has without a listing sent from process 0: computed (`skip_listing`) or
/// its own share of a manifest, read by every process itself. Each rank reads the files the
/// plan gives it, through the names the manifest puts at those indices (here in reverse order).
#[test]
fn processes_without_a_listing_read_the_files_their_names_give() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), 24);
    let files = train_files(tmp.path());
    let sizes: Vec<u64> = files.iter().map(|f| f.metadata().unwrap().len()).collect();
    let manifest = tmp.path().join("names.txt");
    let reversed: Vec<String> = files
        .iter()
        .rev()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    std::fs::write(&manifest, reversed.join("\n")).unwrap();
    let spec = four_rank_plan();
    let planned = |name_of: &dyn Fn(u64) -> usize| -> Vec<u64> {
        (0..4)
            .map(|rank| {
                (1..=2)
                    .flat_map(|epoch| {
                        EpochPlan::new(&spec, epoch, rank)
                            .unwrap()
                            .samples()
                            .collect::<Vec<_>>()
                    })
                    .map(|s| sizes[name_of(s.file)])
                    .sum()
            })
            .collect()
    };
    for (how, name_of) in [
        (
            format!("++workload.dataset.file_list_train={}", manifest.display()),
            &(|file: u64| 23 - file as usize) as &dyn Fn(u64) -> usize,
        ),
        (
            "++workload.dataset.skip_listing=True".to_string(),
            &(|file: u64| file as usize) as &dyn Fn(u64) -> usize,
        ),
    ] {
        let mut args = workload(tmp.path(), 24, 2, 2, "out");
        args.push(how.clone());
        check(mpirun(4, &args, tmp.path()).output().unwrap());
        let summary = json(&tmp.path().join("out/summary.json"));
        assert_eq!(per_rank_bytes(&summary), planned(name_of), "{how}");
    }
}

#[test]
fn uneven_samples_on_three_processes_finish_without_hanging() {
    for (files, batch) in [(13u64, 4u64), (24, 4), (25, 4), (145, 16)] {
        let tmp = tempfile::tempdir().unwrap();
        generate(tmp.path(), files);
        let started = Instant::now();
        check(
            mpirun(3, &workload(tmp.path(), files, batch, 3, "out"), tmp.path())
                .output()
                .unwrap(),
        );
        assert!(started.elapsed() < Duration::from_secs(60));
        let o = json(&tmp.path().join("out/2_output.json"));
        assert_eq!(
            o["3"]["compute"]["block1"].as_array().unwrap().len() as u64,
            files / (3 * batch)
        );
    }
}

#[test]
fn a_failing_rank_ends_the_whole_job_within_ten_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), 16);
    // Every file is read by some rank in epoch 1; break one.
    let victim = train_files(tmp.path())[9].clone();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap()
        .set_len(10)
        .unwrap();
    let mut args = workload(tmp.path(), 16, 1, 5, "out");
    // Upstream's readers parse the file and find it truncated.
    args.push("++workload.semantics=upstream".into());
    args.retain(|a| !a.contains("computation_time"));
    args.push("++workload.train.computation_time=0.05".into());
    let started = Instant::now();
    let out = mpirun(4, &args, tmp.path()).output().unwrap();
    let elapsed = started.elapsed();
    assert!(!out.status.success(), "the job should fail");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = victim.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        stderr.contains(&name),
        "the error names the file:\n{stderr}"
    );
}

#[test]
fn two_processes_of_two_ranks_equal_four_ranks_in_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), 20);
    let mut hybrid = workload(tmp.path(), 20, 2, 2, "hybrid");
    hybrid.extend(["--ranks".to_string(), "2".into()]);
    check(mpirun(2, &hybrid, tmp.path()).output().unwrap());
    let mut single = workload(tmp.path(), 20, 2, 2, "single");
    single.extend(["--ranks".to_string(), "4".into()]);
    check(Command::new(dlio_path()).args(&single).output().unwrap());
    let a = json(&tmp.path().join("hybrid/summary.json"));
    let b = json(&tmp.path().join("single/summary.json"));
    assert_eq!(a["num_accelerators"], 4);
    assert_eq!(per_rank_bytes(&a), per_rank_bytes(&b));
    assert_eq!(a["dlio_rs"]["bytes_read"], b["dlio_rs"]["bytes_read"]);
}

/// Runs inside `mpirun` (started by the test below): every process reads its regions of one
/// shared file through MPI-IO collective calls and compares them with plain preads.
#[test]
#[ignore = "runs under mpirun, started by collective_reads_return_the_same_bytes_as_independent_reads"]
fn collective_reads_inner() {
    use dlio_storage::{PosixStorage, Storage};
    use std::sync::Arc;
    let Ok(path) = std::env::var("DLIO_COLLECTIVE_FILE") else {
        return;
    };
    let cluster = dlio::Cluster::detect().unwrap();
    let rank = u64::from(cluster.process());
    let posix: Arc<dyn Storage> = Arc::new(PosixStorage::new());
    let collective = dlio::CollectiveStorage::new(Arc::clone(&posix));
    let path = PathBuf::from(path);
    let mut shared = collective.open(&path).unwrap();
    let mut plain = posix.open(&path).unwrap();
    assert_eq!(shared.len(), plain.len());
    for i in 0..8u64 {
        // Different regions and sizes per rank, the same number of calls on every rank.
        let len = 1000 + 37 * (rank as usize) + i as usize;
        let offset = (rank * 8 + i) * 4099;
        let mut a = vec![0u8; len];
        let mut b = vec![0u8; len];
        shared.read_exact_at(&mut a, offset).unwrap();
        plain.read_exact_at(&mut b, offset).unwrap();
        assert!(a == b, "rank {rank}: region {i} differs");
    }
    drop(shared);
    cluster.barrier();
    println!("collective-check rank {rank} ok");
}

#[test]
fn collective_reads_return_the_same_bytes_as_independent_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("shared.bin");
    let bytes: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &bytes).unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = mpi_env(&mut Command::new("mpirun"), tmp.path())
        .env("DLIO_COLLECTIVE_FILE", &file)
        .args(["--oversubscribe", "-np", "4"])
        .arg(exe)
        .args([
            "--ignored",
            "--exact",
            "collective_reads_inner",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.matches("collective-check rank").count(),
        4,
        "{stdout}"
    );
}

#[test]
fn a_run_with_collective_io_reads_what_independent_reads_read() {
    let tmp = tempfile::tempdir().unwrap();
    let base = |out: &str| -> Vec<String> {
        vec![
            "run".into(),
            "workload=default".into(),
            "++workload.dataset.format=indexed_binary".into(),
            format!(
                "++workload.dataset.data_folder={}",
                tmp.path().join("data").display()
            ),
            "++workload.dataset.num_files_train=1".into(),
            "++workload.dataset.num_subfolders_train=0".into(),
            "++workload.dataset.num_samples_per_file=64".into(),
            "++workload.dataset.record_length_bytes=4096".into(),
            "++workload.workflow.evaluation=False".into(),
            "++workload.reader.batch_size=2".into(),
            "++workload.reader.read_threads=1".into(),
            "++workload.train.computation_time=0".into(),
            "++workload.train.epochs=1".into(),
            format!(
                "++workload.output.folder={}",
                tmp.path().join(out).display()
            ),
        ]
    };
    let mut gen_args = base("gen");
    gen_args.push("++workload.workflow.generate_data=True".into());
    gen_args.push("++workload.workflow.train=False".into());
    check(Command::new(dlio_path()).args(&gen_args).output().unwrap());
    check(
        mpirun(4, &base("independent"), tmp.path())
            .output()
            .unwrap(),
    );
    let mut collective = base("collective");
    collective.push("++workload.reader.collective_io=True".into());
    check(mpirun(4, &collective, tmp.path()).output().unwrap());
    let a = json(&tmp.path().join("independent/summary.json"));
    let b = json(&tmp.path().join("collective/summary.json"));
    assert_eq!(per_rank_bytes(&a), per_rank_bytes(&b));
    // 16 samples of 4 KiB per rank, plus the two 64-entry uint64 index files read at open.
    assert!(
        per_rank_bytes(&b)
            .iter()
            .all(|&x| x == 16 * 4096 + 2 * 64 * 8),
        "{:?}",
        per_rank_bytes(&b)
    );
}

#[test]
fn collective_io_with_several_ranks_per_process_is_refused_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let out = mpirun(
        2,
        &[
            "run".into(),
            "--ranks".into(),
            "2".into(),
            "workload=default".into(),
            "++workload.reader.collective_io=True".into(),
            format!(
                "++workload.output.folder={}",
                tmp.path().join("out").display()
            ),
        ],
        tmp.path(),
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--ranks 1"), "{stderr}");
}

/// mlpstorage's command line, as its `run` builds it: `mpirun -n 2 <bin>/dlio_benchmark
/// workload=unet3d_h100 ++hydra.run.dir=... ++hydra.output_subdir=dlio_config ...
/// --config-dir=...`, through a symlink named `dlio_benchmark`.
#[test]
fn mlpstorages_command_line_through_a_dlio_benchmark_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("bin/dlio_benchmark");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(dlio_path(), &link).unwrap();
    let config_dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/workloads/mlperf-v3");
    let run = tmp
        .path()
        .join("results/training/unet3d/run/20261201_120000");
    let data = tmp.path().join("data/unet3d");
    for (workload, run_dir) in [
        (
            "unet3d_datagen",
            tmp.path().join("results/training/unet3d/datagen/x"),
        ),
        ("unet3d_h100", run.clone()),
    ] {
        let mut cmd = Command::new("mpirun");
        mpi_env(&mut cmd, tmp.path())
            .args(["--oversubscribe", "-n", "2", "-host", "127.0.0.1:2"])
            .arg(&link)
            .arg(format!("workload={workload}"))
            .arg(format!("++hydra.run.dir={}", run_dir.display()))
            .arg("++hydra.output_subdir=dlio_config")
            .args([
                "++workload.dataset.num_files_train=8",
                "++workload.dataset.record_length_bytes=8192",
                "++workload.dataset.record_length_bytes_stdev=0",
                "++workload.reader.batch_size=2",
                "++workload.train.epochs=1",
                "++workload.train.computation_time=0.001",
            ])
            .arg(format!("++workload.dataset.data_folder={}", data.display()))
            .arg(format!("--config-dir={}", config_dir.display()));
        check(cmd.output().unwrap());
    }
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["num_accelerators"], 2);
    let script = r#"
import sys, yaml
d = sys.argv[1] + "/dlio_config/"
overrides = yaml.load(open(d + "overrides.yaml"), Loader=yaml.Loader)
config = yaml.load(open(d + "config.yaml"), Loader=yaml.Loader)
hydra = yaml.load(open(d + "hydra.yaml"), Loader=yaml.Loader)
assert overrides[0] == "workload=unet3d_h100", overrides
assert not any("hydra" in o for o in overrides), overrides
assert any(o.startswith("++hydra.output_subdir") for o in hydra["hydra"]["overrides"]["hydra"])
fs = config["workload"]["reader"]["file_shuffle"]
assert fs == "seed" and isinstance(fs, str), repr(fs)
assert config["workload"]["dataset"]["num_files_train"] == 8
print("ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dlio capacity --launcher`: every point is N MPI processes of one rank each.
#[test]
fn capacity_under_a_launcher_runs_each_point_as_that_many_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capacity");
    let output = mpi_env(&mut Command::new(dlio_path()), tmp.path())
        .args(["capacity", "--repeats", "1", "--max", "2", "--launcher"])
        .arg("mpirun --oversubscribe -np {n}")
        .arg("--out")
        .arg(&out)
        .args([
            "workload=default".to_string(),
            format!(
                "++workload.dataset.data_folder={}",
                tmp.path().join("data").display()
            ),
            "++workload.dataset.num_files_train=16".into(),
            "++workload.dataset.num_files_eval=0".into(),
            "++workload.dataset.num_subfolders_train=0".into(),
            "++workload.reader.batch_size=2".into(),
            "++workload.train.epochs=1".into(),
            "++workload.train.computation_time=0.01".into(),
            "++workload.workflow.evaluation=False".into(),
            "++workload.workflow.generate_data=True".into(),
            "++workload.workflow.checkpoint=False".into(),
            // What is tested is the launcher, not AU: other MPI tests share the cores.
            "++workload.metric.au=0.05".into(),
        ])
        .output()
        .unwrap();
    let out_text = check(output);
    let stdout = String::from_utf8_lossy(&out_text.stdout);
    assert!(stdout.contains("Capacity: >= 2 accelerators"), "{stdout}");
    let report = json(&out.join("capacity.json"));
    let points = report["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{report:#}");
    for (p, n) in points.iter().zip([1u64, 2]) {
        assert_eq!(p["accelerators"], n);
        let run = PathBuf::from(p["repeats"][0]["output"].as_str().unwrap());
        let summary = json(&run.join("summary.json"));
        assert_eq!(summary["num_accelerators"], n);
        let processes = summary["dlio_rs"]["io_engine"]["per_process"]
            .as_array()
            .unwrap()
            .len() as u64;
        assert_eq!(processes, n, "one process per accelerator");
    }
}

mod common;
use dlio_testkit::moto::Moto;

/// MLPerf v3's multi-endpoint runs (`S3_ENDPOINT_URIS`, spec §3): each process reads through
/// its own endpoint (process p uses entry p mod N, as the fork picks by MPI rank). Two
/// counting proxies in front of one S3 server stand for two endpoints of one store: each
/// sees that process's object GETs, and `summary.json` gives every process's endpoint and
/// bytes.
#[test]
fn multi_endpoint_runs_spread_the_processes_over_the_endpoints() {
    let moto = Moto::start();
    moto.boto3("s3.create_bucket(Bucket='multi')");
    let tmp = tempfile::tempdir().unwrap();
    let proxies: Vec<common::inflight::InflightProxy> = (0..2)
        .map(|i| {
            common::inflight::InflightProxy::start(
                &moto.endpoint,
                Duration::ZERO,
                tmp.path().join(format!("proxy{i}.txt")),
            )
        })
        .collect();
    let uris = format!("{},{}", proxies[0].endpoint, proxies[1].endpoint);
    let files = 16u64;
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "run",
            "workload=default",
            "++workload.storage.storage_type=s3",
            "++workload.storage.storage_root=multi",
            "++workload.dataset.data_folder=s3://multi/data",
            "++workload.storage.storage_options.access_key_id=k",
            "++workload.storage.storage_options.secret_access_key=s",
            "++workload.storage.storage_options.s3_force_path_style=True",
            "++workload.dataset.num_subfolders_train=0",
            "++workload.dataset.num_files_eval=0",
            "++workload.workflow.evaluation=False",
            "++workload.reader.batch_size=2",
            "++workload.train.computation_time=0",
            "++workload.train.epochs=1",
        ]
        .map(String::from)
        .to_vec();
        a.push(format!("++workload.dataset.num_files_train={files}"));
        a.push(format!(
            "++workload.output.folder={}",
            tmp.path().join("out").display()
        ));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    check(
        mpirun(
            2,
            &args(&["++workload.workflow.generate_data=True"]),
            tmp.path(),
        )
        .env("S3_ENDPOINT_URIS", &uris)
        .output()
        .unwrap(),
    );
    let summary = json(&tmp.path().join("out/summary.json"));
    let per_process = summary["dlio_rs"]["io_engine"]["per_process"]
        .as_array()
        .unwrap();
    assert_eq!(per_process.len(), 2);
    for p in per_process {
        let process = p["process"].as_u64().unwrap() as usize;
        assert_eq!(p["endpoint"], proxies[process].endpoint.as_str(), "{p}");
        assert!(p["bytes_read"].as_u64().unwrap() > 0, "{p}");
    }
    // Each endpoint carried its process's share of the training GETs (8 of the 16 files each;
    // generation's GETs, if any, come on top).
    for (i, proxy) in proxies.iter().enumerate() {
        let (_, gets) = proxy.most_and_count();
        assert!(gets >= files / 2, "endpoint {i} saw {gets} GETs");
    }
}

/// The plan of the four-process runs of 24 one-sample files (batch 2, seed 123, shuffled).
fn four_rank_plan() -> PlanSpec {
    PlanSpec {
        num_files: 24,
        samples_per_file: 1,
        batch_size: 2,
        world: 4,
        sampler: Sampler::Index,
        read_threads: 1,
        file_shuffle: Shuffle::Seed,
        sample_shuffle: Shuffle::Seed,
        sample_replacement: false,
        seed: 123,
        seed_change_epoch: true,
        random_seed: 0,
        total_training_steps: None,
        drop_last: true,
    }
}
