//! Every data format end to end: for each format × {pytorch, tensorflow} loader × {1, 3} ranks,
//! with an odd file count, `dlio run` generates the data set, trains, and reads exactly the
//! bytes its plan implies. The expected bytes are computed here from the run's plan (the
//! trainer's `train_plan_spec`, so the test follows whatever sampler the run uses) and each
//! format's I/O pattern: whole files for npz/npy/csv/images, the sample's bytes (plus the index
//! files, once per reader) for indexed binary and per-record tfrecord, every page of the sample
//! for mmap_indexed_binary, whole streamed files for the tf.data tfrecord pipeline, the sample's
//! bytes for contiguous hdf5, and for parquet at least each touched row group's data.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use dlio_config::{Config, LoadArgs};
use dlio_plan::EpochPlan;

const FILES: u64 = 7;
const SPF: u64 = 2;
const RECORD: u64 = 3000;
const PAGE: u64 = 4096;

fn words(tmp: &Path, format: &str, loader: &str) -> Vec<String> {
    vec![
        "workload=default".into(),
        format!("++workload.framework={loader}"),
        format!("++workload.reader.data_loader={loader}"),
        format!("++workload.dataset.format={format}"),
        // The I/O models below are upstream's readers' (hyperslab hdf5 reads, parsed npz).
        "++workload.semantics=upstream".to_string(),
        format!(
            "++workload.dataset.data_folder={}",
            tmp.join("data").display()
        ),
        format!("++workload.dataset.num_files_train={FILES}"),
        "++workload.dataset.num_files_eval=0".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        format!("++workload.dataset.num_samples_per_file={SPF}"),
        format!("++workload.dataset.record_length_bytes={RECORD}"),
        "++workload.dataset.record_length_bytes_stdev=0".into(),
        "++workload.reader.batch_size=2".into(),
        "++workload.reader.read_threads=1".into(),
        "++workload.workflow.generate_data=True".into(),
        "++workload.workflow.evaluation=False".into(),
        "++workload.workflow.checkpoint=False".into(),
        "++workload.train.computation_time=0".into(),
        "++workload.train.epochs=1".into(),
        format!("++workload.output.folder={}", tmp.join("out").display()),
    ]
}

fn config(words: &[String]) -> Config {
    dlio_config::load(&LoadArgs {
        positional: words.to_vec(),
        config_dir: None,
        ..Default::default()
    })
    .expect("the test workload loads")
    .config
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .len()
}

/// The sorted train files of `format` (as the lister finds them).
fn train_files(tmp: &Path, format: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(tmp.join("data/train"))
        .expect("train folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == format))
        .collect();
    files.sort();
    files
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Bytes the run must read (exact), or the inclusive range parquet's reader may read.
fn expected_bytes(config: &Config, format: &str, files: &[PathBuf], world: u32) -> (u64, u64) {
    let spec = dlio_trainer::train_plan_spec(config, world, files.len() as u64, 0);
    let (mut low, mut high) = (0u64, 0u64);
    for rank in 0..world {
        let plan = EpochPlan::new(&spec, 1, rank).expect("plan");
        if let Some(stream) = plan.stream() {
            // tf.data pipeline: whole files of the groups the kept records fall in.
            let (step, phase) = stream.keep_every();
            let last = phase + (stream.records() - 1) * step;
            let groups = last / (stream.cycle() * stream.samples_per_file()) + 1;
            let touched = (groups * stream.cycle()).min(stream.files());
            let bytes: u64 = (0..touched)
                .map(|i| size(&files[stream.file(i) as usize]))
                .sum();
            low += bytes;
            high += bytes;
            continue;
        }
        let per_sample_open = plan.sampler() == dlio_config::Sampler::Index;
        let mut current = None;
        let mut indexed: HashSet<u64> = HashSet::new();
        let mut groups: HashSet<u64> = HashSet::new();
        for sample in plan.samples() {
            let file = &files[sample.file as usize];
            let opens = per_sample_open || current != Some(sample.file);
            current = Some(sample.file);
            let first_time = indexed.insert(sample.file);
            let file_len = size(file);
            let (open, read) = match format {
                "npz" | "npy" | "csv" | "jpeg" | "png" => (if opens { file_len } else { 0 }, 0),
                "indexed_binary" | "mmap_indexed_binary" => {
                    let index = if first_time {
                        size(&with_suffix(file, ".off.idx")) + size(&with_suffix(file, ".sz.idx"))
                    } else {
                        0
                    };
                    let sample_len = file_len / SPF;
                    let offset = sample.index_in_file * sample_len;
                    let read = if format == "indexed_binary" {
                        sample_len
                    } else {
                        let first = offset / PAGE * PAGE;
                        let end = ((offset + sample_len).div_ceil(PAGE) * PAGE).min(file_len);
                        end - first
                    };
                    (index, read)
                }
                "tfrecord" => {
                    let name = file.file_name().unwrap().to_str().unwrap();
                    let index_file = file
                        .parent()
                        .and_then(Path::parent)
                        .unwrap()
                        .join("index/train")
                        .join(format!("{name}.idx"));
                    let index = if first_time { size(&index_file) } else { 0 };
                    (index, file_len / SPF)
                }
                "hdf5" => {
                    // Contiguous records_0 (SPF, d, d): the sample's bytes only.
                    let d = (RECORD as f64).sqrt() as u64;
                    (0, d * d)
                }
                "parquet" => {
                    // At least the file's one row group's data once; at most the whole file
                    // at every open plus once per row-group load.
                    let d = (RECORD as f64).sqrt() as u64;
                    let load = groups.insert(sample.file);
                    low += if load { SPF * d * d } else { 0 };
                    high += if opens { file_len } else { 0 } + if load { file_len } else { 0 };
                    continue;
                }
                other => panic!("no model for {other}"),
            };
            low += open + read;
            high += open + read;
        }
    }
    (low, high)
}

fn run_case(format: &str, loader: &str, ranks: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let args = words(tmp.path(), format, loader);
    let out = Command::new(env!("CARGO_BIN_EXE_dlio"))
        .args(["run", "--ranks", &ranks.to_string()])
        .args(&args)
        .output()
        .expect("dlio starts");
    assert!(
        out.status.success(),
        "{format}/{loader}/{ranks} ranks failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let files = train_files(tmp.path(), format);
    assert_eq!(files.len() as u64, FILES, "{format}: generated files");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    let read = summary["dlio_rs"]["bytes_read"]
        .as_u64()
        .expect("bytes_read");
    let (low, high) = expected_bytes(&config(&args), format, &files, ranks);
    assert!(
        (low..=high).contains(&read),
        "{format}/{loader}/{ranks} ranks read {read} bytes; the plan implies {low}..={high}"
    );
    assert!(read > 0, "{format}/{loader}/{ranks}: nothing was read");
}

fn all_cases(format: &str) {
    for loader in ["pytorch", "tensorflow"] {
        for ranks in [1, 3] {
            run_case(format, loader, ranks);
        }
    }
}

#[test]
fn npz_reads_the_planned_bytes() {
    all_cases("npz");
}

#[test]
fn npy_reads_the_planned_bytes() {
    all_cases("npy");
}

#[test]
fn hdf5_reads_the_planned_bytes() {
    if !dlio_format::HDF5_AVAILABLE {
        // The build has no HDF5: the run must say how to get it.
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_dlio"))
            .arg("run")
            .args(words(tmp.path(), "hdf5", "pytorch"))
            .output()
            .expect("dlio starts");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("--features hdf5"),
            "{err}"
        );
        return;
    }
    all_cases("hdf5");
}

#[test]
fn csv_reads_the_planned_bytes() {
    all_cases("csv");
}

#[test]
fn jpeg_reads_the_planned_bytes() {
    all_cases("jpeg");
}

#[test]
fn png_reads_the_planned_bytes() {
    all_cases("png");
}

#[test]
fn tfrecord_reads_the_planned_bytes() {
    all_cases("tfrecord");
}

#[test]
fn indexed_binary_reads_the_planned_bytes() {
    all_cases("indexed_binary");
}

#[test]
fn mmap_indexed_binary_reads_the_planned_bytes() {
    all_cases("mmap_indexed_binary");
}

#[test]
fn parquet_reads_the_planned_bytes() {
    all_cases("parquet");
}
