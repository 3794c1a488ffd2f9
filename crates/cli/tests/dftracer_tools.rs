//! Our traces through dftracer's own tools, and dftracer's traces through `dlio analyze`:
//! `dftracer_validate` and `dftracer_info` (dftracer-utils 0.0.14), `TraceViewer` (its Python
//! API), dfanalyzer's DLIO preset (dftracer-analyzer 0.0.9, which needs dftracer-utils 0.0.12,
//! so it has a virtualenv of its own) and a trace that dftracer 2.2's preload library and
//! pydftracer write of a Python script.
//!
//! `scripts/test.sh` installs the tools (pinned) into two virtualenvs and names them in
//! `DLIO_DFTRACER_VENV` and `DLIO_DFANALYZER_VENV` (unset: its default folders,
//! `~/.cache/dlio-test-tools/{dftracer,dfanalyzer}`); a missing virtualenv fails these tests.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{characterized, dlio, json, run_ok};

/// The virtualenv named by `var`, else scripts/test.sh's default folder `name`; fails the
/// test when neither holds one.
fn venv(var: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(cache.join("dlio-test-tools").join(name))
        })
        .expect("neither the variable nor HOME is set");
    assert!(
        dir.join("bin/python").exists(),
        "{var}: no virtualenv at {} (bash scripts/test.sh installs dftracer's tools there)",
        dir.display()
    );
    dir
}

fn tools() -> PathBuf {
    venv("DLIO_DFTRACER_VENV", "dftracer")
}

/// A traced 2-rank run with checkpoints, reading 8 files of 512 KiB from a folder called
/// `data` (dfanalyzer's reader layer is the POSIX calls on paths with `/data` in them), with
/// compute long enough for time comparisons. Returns the output folder and a copy of its
/// traces alone (the tools write indexes beside the traces they read).
fn traced_run(tmp: &Path) -> (PathBuf, PathBuf) {
    let data = tmp.join("data");
    let out = tmp.join("out");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = vec![
            "workload=default".into(),
            "--semantics".into(),
            "upstream".into(),
            format!("++workload.dataset.data_folder={}", data.display()),
            "++workload.dataset.num_files_train=8".into(),
            "++workload.dataset.num_files_eval=0".into(),
            "++workload.dataset.num_samples_per_file=2".into(),
            "++workload.dataset.record_length_bytes=262144".into(),
            "++workload.dataset.num_subfolders_train=0".into(),
            "++workload.reader.batch_size=1".into(),
            "++workload.train.epochs=1".into(),
            "++workload.workflow.evaluation=False".into(),
            format!("++workload.output.folder={}", out.display()),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    run_ok(dlio().arg("generate").args(args(&[])));
    run_ok(dlio().arg("run").args(args(&[
        "--ranks",
        "2",
        "--trace",
        "++workload.train.computation_time=0.1",
        "++workload.workflow.checkpoint=True",
        "++workload.checkpoint.epochs_between_checkpoints=1",
        &format!(
            "++workload.checkpoint.checkpoint_folder={}",
            tmp.join("checkpoints").display()
        ),
        "++workload.model.name=tiny",
        "++workload.model.model_size_bytes=1000000",
    ])));
    let traces = tmp.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for entry in std::fs::read_dir(&out).unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".pfw.gz") {
            std::fs::copy(entry.path(), traces.join(entry.file_name())).unwrap();
        }
    }
    (out, traces)
}

/// Runs a tool and returns what it printed. A tool run from no folder of its own runs in a
/// scratch folder, so that whatever it leaves in its working directory (dftracer-utils writes
/// `dft.log`) never lands in the source tree.
fn output(cmd: &mut Command) -> String {
    let scratch = tempfile::tempdir().unwrap();
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(scratch.path());
    }
    let out = cmd.output().expect("the tool starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// A copy of `traces` the tool may write its indexes into.
fn scratch_copy(traces: &Path, name: &str) -> PathBuf {
    let copy = traces.with_file_name(name);
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(traces).unwrap().flatten() {
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    copy
}

#[test]
fn dftracer_tools_accept_our_traces_and_count_what_summary_json_counts() {
    let venv = tools();
    let tmp = tempfile::tempdir().unwrap();
    let (out, traces) = traced_run(tmp.path());

    let validated = output(
        Command::new(venv.join("bin/dftracer_validate"))
            .arg("-d")
            .arg(&traces)
            .args(["--log-level", "off"]),
    );
    assert!(
        validated.contains("Validated 2 file(s): 2 passed, 0 failed"),
        "{validated}"
    );

    let info_dir = scratch_copy(&traces, "info");
    let info = output(
        Command::new(venv.join("bin/dftracer_info"))
            .arg("-d")
            .arg(&info_dir)
            .arg("--index-dir")
            .arg(tmp.path().join("index-info"))
            .args(["--log-level", "off"]),
    );
    let summary = json(&out.join("summary.json"));
    let process = &summary["dlio_rs"]["io_engine"]["per_process"][0];
    assert!(info.contains("Failed:             0"), "{info}");

    // TraceViewer's POSIX sums equal the engine's counters in summary.json.
    let viewer_dir = scratch_copy(&traces, "viewer");
    let script = r#"
import json, sys
from dftracer.utils import TraceViewer
rows = TraceViewer(sys.argv[1], index_path=sys.argv[2]).filter('cat == "POSIX"') \
    .group_by("name").agg("count", "sum:size").collect().to_dicts()
print(json.dumps({r["name"]: [r["count"], r["sum_size"]] for r in rows}))
"#;
    let printed = output(
        Command::new(venv.join("bin/python"))
            .args(["-c", script])
            .arg(&viewer_dir)
            .arg(tmp.path().join("index-viewer")),
    );
    let by_name: serde_json::Value = serde_json::from_str(
        printed
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .expect("the script's JSON line"),
    )
    .unwrap();
    let preads = &by_name["pread"];
    assert_eq!(
        (preads[0].as_u64(), preads[1].as_u64()),
        (
            process["read_requests"].as_u64(),
            process["bytes_read"].as_u64()
        ),
        "TraceViewer {by_name} vs summary.json {process}"
    );
    assert_eq!(
        by_name["write"][1].as_u64(),
        Some(1_000_000),
        "the checkpoint's bytes: {by_name}"
    );
}

/// The figure after `label` in dfanalyzer's tables (`│ Job Time │ seconds │ 0.438 │`, or a
/// layer row `│ Compute │ 0.402 │ ...`: the first number after the label).
fn dfanalyzer_figure(text: &str, label: &str) -> f64 {
    text.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('│').map(str::trim).collect();
            (cells.get(1) == Some(&label)).then_some(cells)
        })
        .find_map(|cells| cells.iter().skip(2).find_map(|c| c.parse::<f64>().ok()))
        .unwrap_or_else(|| panic!("no `{label}` in dfanalyzer's output:\n{text}"))
}

fn close(ours: f64, theirs: f64, what: &str) {
    assert!(
        (ours - theirs).abs() <= 0.02 * theirs.abs(),
        "{what}: dlio analyze {ours} vs dfanalyzer {theirs} (more than 2% apart)"
    );
}

#[test]
fn dfanalyzer_agrees_with_dlio_analyze_and_counts_a_process_per_rank() {
    let analyzer = venv("DLIO_DFANALYZER_VENV", "dfanalyzer");
    let tmp = tempfile::tempdir().unwrap();
    let (_, traces) = traced_run(tmp.path());
    let ours = tmp.path().join("ours");
    run_ok(dlio().arg("analyze").arg(&traces).arg("--out").arg(&ours));
    let a = json(&ours.join("analysis.json"));

    let theirs = scratch_copy(&traces, "dfanalyzer");
    let work = tmp.path().join("dfanalyzer-work");
    std::fs::create_dir_all(&work).unwrap();
    let text = output(
        Command::new(analyzer.join("bin/dfanalyzer"))
            .current_dir(&work)
            .env(
                "USER",
                std::env::var("USER").unwrap_or_else(|_| "dlio".into()),
            )
            .arg("analyzer/preset=dlio")
            .arg(format!("trace_path={}", theirs.display()))
            .arg("cluster.n_workers=1"),
    );
    assert_eq!(dfanalyzer_figure(&text, "Total Processes"), 2.0, "{text}");
    assert_eq!(dfanalyzer_figure(&text, "App Count"), 2.0, "{text}");
    close(
        a["job_time_s"].as_f64().unwrap(),
        dfanalyzer_figure(&text, "Job Time"),
        "job time",
    );
    close(
        a["time"]["compute_s"].as_f64().unwrap(),
        dfanalyzer_figure(&text, "Compute"),
        "compute time",
    );
    let reader = a["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == "reader POSIX")
        .expect("reader POSIX layer");
    close(
        reader["bandwidth_mib_s"].as_f64().unwrap(),
        dfanalyzer_figure(&text, "POSIX - Reader Bandwidth"),
        "read bandwidth (MiB/s; dfanalyzer's MB are MiB)",
    );
}

#[test]
fn a_trace_dftracer_writes_of_a_python_script_is_analysed_exactly() {
    let venv = tools();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // Written here, untraced: the script only reads. Three files of 10,000 bytes.
    for i in 0..3 {
        std::fs::write(data.join(format!("f{i}.bin")), vec![i as u8; 10_000]).unwrap();
    }
    let script = tmp.path().join("app.py");
    std::fs::write(
        &script,
        r#"
import os, sys, time
import numpy as np
from dftracer.python import ai, dftracer
log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
data = sys.argv[1]
@ai.pipeline.train
def train():
    total = 0
    for step, name in enumerate(sorted(os.listdir(data)), start=1):
        # os.read, not np.load: numpy reads a file's last bytes through a dup'd FILE* that
        # dftracer's preload does not see, so its traced bytes fall short of the file.
        fd = os.open(os.path.join(data, name), os.O_RDONLY)
        while chunk := os.read(fd, 4096):
            total += int(np.frombuffer(chunk, dtype=np.uint8).sum())
        os.close(fd)
        with ai.compute(epoch=1, step=step):
            time.sleep(0.02)
    assert total == 10_000 * (0 + 1 + 2), total
@ai
def main():
    train()
main()
log.finalize()
"#,
    )
    .unwrap();
    let preload = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| {
            e.path()
                .join("site-packages/dftracer/lib64/libdftracer_preload.so")
        })
        .find(|p| p.exists())
        .expect("dftracer's preload library in the virtualenv");
    let traces = tmp.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    output(
        Command::new(venv.join("bin/python"))
            .arg(&script)
            .arg(&data)
            .env("DFTRACER_ENABLE", "1")
            .env("DFTRACER_INC_METADATA", "1")
            .env("DFTRACER_LOG_FILE", traces.join("trace"))
            .env("DFTRACER_DATA_DIR", &data)
            .env("LD_PRELOAD", &preload),
    );
    let ours = tmp.path().join("ours");
    run_ok(dlio().arg("analyze").arg(&traces).arg("--out").arg(&ours));
    let a = json(&ours.join("analysis.json"));
    assert_eq!(a["corrupt"]["count"], 0, "{a}");
    // Each file: reads of 4096, 4096 and 1808 bytes, then one at the end that returns 0.
    let reads = &a["transfer_sizes"]["read"];
    assert_eq!(reads["bytes"], 30_000, "{reads}");
    assert_eq!(reads["ops"], 12, "{reads}");
    let files = a["files"]["top"].as_array().expect("files");
    let opens: u64 = files.iter().map(|f| f["opens"].as_u64().unwrap()).sum();
    assert_eq!(opens, 3, "{files:?}");
    assert_eq!(a["counts"]["compute"], 3, "{a}");
    let access = &a["access"];
    assert_eq!(
        access["reads"], 12,
        "reads placed by the file positions: {access}"
    );
    assert_eq!(
        access["sequential_reads"], 9,
        "each file read front to back: {access}"
    );

    // dlio characterize reads the same trace, its steps from dftracer's compute spans.
    let workload = tmp.path().join("wl/workload.yaml");
    run_ok(
        dlio()
            .arg("characterize")
            .arg(&traces)
            .arg("--out")
            .arg(&workload),
    );
    let c = json(&tmp.path().join("wl/characterize.json"));
    let derived = characterized(&c);
    assert_eq!(derived["dataset.num_files_train"], "3", "{derived:?}");
    assert_eq!(
        derived["dataset.record_length_bytes"], "9872",
        "{derived:?}"
    ); // npy: 10,000 - 128
    assert_eq!(derived["reader.batch_size"], "1", "{derived:?}");
    assert_eq!(derived["train.epochs"], "1", "{derived:?}");
    assert_eq!(c["steps"], 3, "{c}");
    // A number, or `{mean: x, stdev: y}` when the pauses vary (a busy machine's do).
    let value = &derived["train.computation_time"];
    let compute: f64 = value
        .trim_start_matches("{mean: ")
        .split([',', '}'])
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("train.computation_time is {value}"));
    // The script sleeps 20 ms per step; a loaded machine only lengthens the pauses.
    assert!((0.019..0.06).contains(&compute), "{compute}");
}
