//! The output files: `summary.json`, `{rank}_output.json`, `{rank}_per_epoch_stats.json` and
//! `per_epoch_stats.json`, with DLIO's keys, shapes and key order.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use crate::aggregate::{RunMetrics, expectation};
use crate::error::MetricsError;
use crate::formulas::{MetricParams, block_metrics, eval_metrics, rate};
use crate::host::{HostInfo, HostShare};
use crate::recorder::{CheckpointKind, EpochRecord, RankReport, StepTimes};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Version of the `dlio_rs` section of `summary.json`.
const OURS_FORMAT_VERSION: u32 = 1;

/// Facts about the run that are not metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// When the run started.
    pub start: SystemTime,
    /// When the run ended.
    pub end: SystemTime,
    /// `dataset.num_files_train`.
    pub num_files_train: u64,
    /// `dataset.num_files_eval`.
    pub num_files_eval: u64,
    /// `dataset.num_samples_per_file`.
    pub num_samples_per_file: u64,
    /// Bytes of the dataset the run reads (for `data_size_per_host_GB` and
    /// `potential_caching`).
    pub data_bytes_total: u64,
    /// False when the run was interrupted.
    pub complete: bool,
    /// The hosts of the run and their ranks; empty means one host (the `host` given to
    /// [`write_outputs`]) ran every rank.
    pub hosts: Vec<HostShare>,
    /// Extra fields for our `dlio_rs` section (engine, seed, config source, ...). An object's
    /// keys are added beside ours (ours win on a clash); any other value goes under `extra`.
    pub ours: Value,
}

/// DLIO's timestamp format: local time, `%Y-%m-%dT%H:%M:%S.%f` (microseconds).
pub fn format_timestamp(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Local>::from(time)
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

/// Writes every output file into `dir` (created if missing). Each file is written under a
/// temporary name and renamed, so a reader never sees half a file.
pub fn write_outputs(
    dir: &Path,
    run: &RunInfo,
    host: &HostInfo,
    metrics: &RunMetrics,
    reports: &[RankReport],
) -> Result<(), MetricsError> {
    std::fs::create_dir_all(dir).map_err(|source| MetricsError::CreateDir {
        path: dir.to_owned(),
        source,
    })?;
    let hosts = if run.hosts.is_empty() {
        vec![HostShare {
            host: host.clone(),
            ranks: reports.iter().map(|r| r.rank).collect(),
        }]
    } else {
        run.hosts.clone()
    };
    let world: u64 = hosts
        .iter()
        .map(|h| h.ranks.len() as u64)
        .sum::<u64>()
        .max(1);
    // The data a host reads: its ranks' share of the dataset (uneven ranks per host differ).
    let per_host: Vec<(u64, u8)> = hosts
        .iter()
        .map(|h| {
            let bytes = (u128::from(run.data_bytes_total) * h.ranks.len() as u128
                / u128::from(world)) as u64;
            (bytes, u8::from(h.host.may_cache(bytes)))
        })
        .collect();
    let checkpoint_size_gb = metrics.checkpoint.as_ref().map_or(0.0, |c| c.size_gb);

    // summary.json goes last: when it is there, every other output is whole (a full disk
    // part-way leaves no summary that claims a complete run).
    let summary_json = summary(run, host, &hosts, &per_host, metrics, reports)?;
    for report in reports {
        let at = hosts
            .iter()
            .position(|h| h.ranks.contains(&report.rank))
            .unwrap_or(0);
        write_json(
            dir,
            &format!("{}_output.json", report.rank),
            &rank_output(report, &hosts[at].host, per_host[at].1, metrics),
        )?;
        write_json(
            dir,
            &format!("{}_per_epoch_stats.json", report.rank),
            &per_epoch_stats(report, checkpoint_size_gb),
        )?;
    }
    let root = reports.iter().find(|r| r.rank == 0).or(reports.first());
    let root_stats = root.map_or_else(Obj::new, |r| per_epoch_stats(r, checkpoint_size_gb));
    write_json(dir, "per_epoch_stats.json", &root_stats)?;
    write_json(dir, "summary.json", &summary_json)
}

fn summary(
    run: &RunInfo,
    host: &HostInfo,
    hosts: &[HostShare],
    per_host: &[(u64, u8)],
    metrics: &RunMetrics,
    reports: &[RankReport],
) -> Result<Obj, MetricsError> {
    let mut summary = Obj::new();
    summary.put("start", format_timestamp(run.start));
    summary.put("num_accelerators", metrics.num_accelerators);
    summary.put("num_hosts", hosts.len());
    summary.put("hostname", host.hostname.as_str());
    summary.put("metric", dlio_metric_section(metrics));
    summary.put("num_files_train", run.num_files_train);
    summary.put("num_files_eval", run.num_files_eval);
    summary.put("num_samples_per_file", run.num_samples_per_file);
    summary.put(
        "host_cpu_count",
        hosts.iter().map(|h| h.host.cpu_count).collect::<Vec<_>>(),
    );
    summary.put("host_processor_name", host.processor_name.as_str());
    summary.put(
        "potential_caching",
        per_host.iter().map(|p| p.1).collect::<Vec<_>>(),
    );
    summary.put("host_cpuinfo", Value::Object(host.cpuinfo.clone()));
    summary.put("host_meminfo", Value::Object(host.meminfo.clone()));
    summary.put(
        "host_memory_GB",
        hosts.iter().map(|h| h.host.memory_gb()).collect::<Vec<_>>(),
    );
    let largest = per_host.iter().map(|p| p.0).max().unwrap_or(0);
    summary.put("data_size_per_host_GB", largest as f64 / GIB);
    summary.put(
        "epochs",
        metrics.train.as_ref().map_or(0, |t| t.epochs.len()),
    );
    summary.put("end", format_timestamp(run.end));
    summary.put(
        "dlio_rs",
        Value::Object(ours_section(run, metrics, reports)?),
    );
    Ok(summary)
}

/// The `metric` object, in DLIO's key order: checkpoint keys, then train, then eval.
fn dlio_metric_section(metrics: &RunMetrics) -> Obj {
    let mut metric = Obj::new();
    if let Some(checkpoint) = &metrics.checkpoint {
        for (name, phase) in [("save", &checkpoint.save), ("load", &checkpoint.load)] {
            if let Some(phase) = phase {
                metric.put(
                    format!("{name}_checkpoint_io_mean_GB_per_second"),
                    phase.io_mean_gb_per_second,
                );
                metric.put(
                    format!("{name}_checkpoint_io_stdev_GB_per_second"),
                    phase.io_stdev_gb_per_second,
                );
                metric.put(
                    format!("{name}_checkpoint_duration_mean_seconds"),
                    phase.duration_mean_seconds,
                );
                metric.put(
                    format!("{name}_checkpoint_duration_stdev_seconds"),
                    phase.duration_stdev_seconds,
                );
            }
        }
        metric.put("checkpoint_size_GB", checkpoint.size_gb);
    }
    for (prefix, phase) in [("train", &metrics.train), ("eval", &metrics.eval)] {
        let Some(phase) = phase else { continue };
        let figures: [(&str, Value); 9] = [
            ("au_percentage", phase.au_percentage.clone().into()),
            ("au_mean_percentage", phase.au_mean_percentage.into()),
            (
                "au_meet_expectation",
                expectation(phase.au_meets_expectation).into(),
            ),
            ("au_stdev_percentage", phase.au_stdev_percentage.into()),
            (
                "throughput_samples_per_second",
                phase.throughput_samples_per_second.clone().into(),
            ),
            (
                "throughput_mean_samples_per_second",
                phase.throughput_mean_samples_per_second.into(),
            ),
            (
                "throughput_stdev_samples_per_second",
                phase.throughput_stdev_samples_per_second.into(),
            ),
            ("io_mean_MB_per_second", phase.io_mean_mb_per_second.into()),
            (
                "io_stdev_MB_per_second",
                phase.io_stdev_mb_per_second.into(),
            ),
        ];
        for (name, value) in figures {
            metric.put(format!("{prefix}_{name}"), value);
        }
    }
    metric
}

/// Our own section: what DLIO does not report.
fn ours_section(
    run: &RunInfo,
    metrics: &RunMetrics,
    reports: &[RankReport],
) -> Result<Map<String, Value>, MetricsError> {
    let measured = &metrics.measured;
    let mut io = measured.train.io;
    io += measured.eval.io;

    let mut ours = Map::new();
    ours.insert("format_version".into(), OURS_FORMAT_VERSION.into());
    ours.insert("complete".into(), run.complete.into());
    ours.insert("ranks".into(), measured.ranks.into());
    ours.insert("bytes_read".into(), io.bytes_read.into());
    ours.insert("read_ops".into(), io.read_ops.into());
    ours.insert("opens".into(), io.opens.into());
    ours.insert("samples".into(), io.samples.into());
    ours.insert(
        "throughput_steps".into(),
        if metrics.params.upstream_throughput {
            "upstream_minus_2"
        } else {
            "metric_window"
        }
        .into(),
    );
    let phases = [
        ("train", &measured.train, metrics.train.is_some()),
        ("eval", &measured.eval, metrics.eval.is_some()),
    ];
    for (prefix, phase, ran) in phases {
        if !ran {
            continue;
        }
        ours.insert(
            format!("{prefix}_bytes_read_per_second"),
            phase.bytes_read_per_second.into(),
        );
        ours.insert(
            format!("{prefix}_io_measured_MB_per_second"),
            phase
                .per_epoch
                .iter()
                .map(|e| e.mb_per_second)
                .collect::<Vec<_>>()
                .into(),
        );
        ours.insert(prefix.into(), to_json(phase)?);
    }
    if let Some(checkpoint) = &metrics.checkpoint {
        let mut mlperf = Map::new();
        for (name, phase) in [("save", &checkpoint.save), ("load", &checkpoint.load)] {
            if let Some(phase) = phase {
                mlperf.insert(name.into(), to_json(&phase.mlperf)?);
            }
        }
        ours.insert("checkpoint_mlperf".into(), Value::Object(mlperf));
        if let Some(asynchronous) = async_checkpoint_summary(reports) {
            ours.insert("checkpoint_async".into(), asynchronous);
        }
    }
    if metrics.train.is_some() {
        let window = &measured.metric_window;
        let mut section = to_json(window)?;
        if let Value::Object(fields) = &mut section {
            fields.insert("warning".into(), window.warning().into());
        }
        ours.insert("metric_window".into(), section);
    }
    ours.insert("per_rank".into(), to_json(&measured.per_rank)?);
    match &run.ours {
        Value::Object(extra) => {
            for (key, value) in extra {
                ours.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        Value::Null => {}
        other => {
            ours.entry("extra").or_insert_with(|| other.clone());
        }
    }
    Ok(ours)
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, MetricsError> {
    serde_json::to_value(value).map_err(|source| MetricsError::Encode {
        path: "summary.json".into(),
        source,
    })
}

/// `{rank}_output.json`: host fields, then per epoch the step lists and per-block figures.
fn rank_output(
    report: &RankReport,
    host: &HostInfo,
    potential_caching: u8,
    metrics: &RunMetrics,
) -> Obj {
    let mut output = Obj::new();
    output.put("host_memory_GB", host.memory_gb());
    output.put("host_cpu_count", host.cpu_count);
    output.put("host_processor_name", host.processor_name.as_str());
    output.put("potential_caching", potential_caching);
    output.put("host_cpuinfo", Value::Object(host.cpuinfo.clone()));
    output.put("host_meminfo", Value::Object(host.meminfo.clone()));
    for epoch in &report.epochs {
        output.put(
            epoch.epoch.to_string(),
            rank_epoch_output(epoch, &metrics.params),
        );
    }
    output.put("hostname", host.hostname.as_str());
    output
}

fn rank_epoch_output(epoch: &EpochRecord, params: &MetricParams) -> Obj {
    let mut load = Obj::new();
    let mut proc_ = Obj::new();
    let mut throughput = Obj::new();
    let mut au = Obj::new();
    let mut compute = Obj::new();
    let mut put_steps = |key: &str, steps: &StepTimes| {
        load.put(key, steps.load.clone());
        proc_.put(key, steps.proc_.clone());
        compute.put(key, steps.compute.clone());
    };
    for block in &epoch.blocks {
        put_steps(&format!("block{}", block.block), &block.steps);
    }
    if let Some(eval) = &epoch.eval {
        put_steps("eval", &eval.steps);
    }
    for block in &epoch.blocks {
        let key = format!("block{}", block.block);
        let figures = block_metrics(block, params);
        au.put(key.as_str(), figures.map_or(0.0, |m| m.au_percentage));
        throughput.put(
            key,
            figures.map_or(0.0, |m| m.throughput_samples_per_second),
        );
    }
    if let Some(eval) = &epoch.eval {
        let figures = eval_metrics(eval, params);
        au.put("eval", figures.map_or(0.0, |m| m.au_percentage));
        throughput.put(
            "eval",
            figures.map_or(0.0, |m| m.throughput_samples_per_second),
        );
    }

    let mut output = Obj::new();
    output.put("load", load);
    output.put("proc", proc_);
    output.put("throughput", throughput);
    output.put("au", au);
    output.put("compute", compute);
    output.put("host_meminfo", Value::Object(epoch.host_meminfo.clone()));
    if let Some(end) = epoch.span.end {
        output.put("end", format_timestamp(end));
    }
    output
}

/// `{rank}_per_epoch_stats.json`: per epoch its start, blocks and checkpoints in time order,
/// end and duration (a string with 2 decimals, as DLIO), and its evaluation.
fn per_epoch_stats(report: &RankReport, checkpoint_size_gb: f64) -> Obj {
    let mut stats = Obj::new();
    for epoch in &report.epochs {
        let mut entry = Obj::new();
        entry.put("start", format_timestamp(epoch.span.start));

        let mut parts: Vec<(SystemTime, String, Obj)> = Vec::new();
        for block in &epoch.blocks {
            let mut part = Obj::new();
            part.put("start", format_timestamp(block.span.start));
            if let (Some(end), Some(seconds)) = (block.span.end, block.span.seconds()) {
                part.put("end", format_timestamp(end));
                part.put("duration", format!("{seconds:.2}"));
            }
            parts.push((block.span.start, format!("block{}", block.block), part));
        }
        for checkpoint in &epoch.checkpoints {
            let name = match checkpoint.kind {
                CheckpointKind::Save => "save_ckpt",
                CheckpointKind::Load => "load_ckpt",
            };
            let seconds = checkpoint.seconds();
            let mut part = Obj::new();
            part.put("start", format_timestamp(checkpoint.start));
            part.put("end", format_timestamp(checkpoint.end));
            part.put("duration", seconds);
            part.put("throughput", rate(checkpoint_size_gb, seconds));
            parts.push((
                checkpoint.start,
                format!("{name}{}", checkpoint.index),
                part,
            ));
        }
        parts.sort_by_key(|(start, _, _)| *start);
        for (_, key, part) in parts {
            entry.put(key, part);
        }

        if let Some(end) = epoch.span.end {
            entry.put("end", format_timestamp(end));
            if let Some(seconds) = epoch.train_duration_seconds() {
                entry.put("duration", format!("{seconds:.2}"));
            }
        }
        if let Some(eval) = &epoch.eval {
            let mut part = Obj::new();
            part.put("start", format_timestamp(eval.span.start));
            if let (Some(end), Some(seconds)) = (eval.span.end, eval.seconds()) {
                part.put("end", format_timestamp(end));
                part.put("duration", format!("{seconds:.2}"));
            }
            entry.put("eval", part);
        }
        stats.put(epoch.epoch.to_string(), entry);
    }
    stats
}

/// A JSON object that keeps its keys in insertion order, so the files read like DLIO's
/// (`block2` before `block10`, `start` before `end`).
#[derive(Debug, Default)]
struct Obj(Vec<(String, Node)>);

#[derive(Debug)]
enum Node {
    Object(Obj),
    Value(Value),
}

impl Obj {
    fn new() -> Self {
        Self::default()
    }

    fn put(&mut self, key: impl Into<String>, value: impl Into<Node>) {
        self.0.push((key.into(), value.into()));
    }
}

impl From<Obj> for Node {
    fn from(obj: Obj) -> Self {
        Node::Object(obj)
    }
}

impl<T: Into<Value>> From<T> for Node {
    fn from(value: T) -> Self {
        Node::Value(value.into())
    }
}

impl Serialize for Obj {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, node) in &self.0 {
            match node {
                Node::Object(obj) => map.serialize_entry(key, obj)?,
                Node::Value(value) => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// Writes `value` as JSON indented by 4 spaces (as DLIO's `json.dump(indent=4)`) to a
/// temporary file in `dir`, then renames it to `name`.
fn write_json(dir: &Path, name: &str, value: &impl Serialize) -> Result<(), MetricsError> {
    let target = dir.join(name);
    let temporary: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    value
        .serialize(&mut serializer)
        .map_err(|source| MetricsError::Encode {
            path: target.clone(),
            source,
        })?;
    bytes.push(b'\n');
    let written = std::fs::File::create(&temporary).and_then(|mut file| file.write_all(&bytes));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(MetricsError::Write {
            path: temporary,
            source,
        });
    }
    std::fs::rename(&temporary, &target).map_err(|source| MetricsError::Rename {
        from: temporary,
        to: target,
        source,
    })
}

/// Asynchronous saves: the stall the step loops saw and the time until each checkpoint was
/// durable, over all ranks and checkpoints (seconds). `None` when no save was asynchronous.
fn async_checkpoint_summary(reports: &[RankReport]) -> Option<Value> {
    let mut stalls = Vec::new();
    let mut durable = Vec::new();
    for record in reports
        .iter()
        .flat_map(|r| r.epochs.iter())
        .flat_map(|e| e.checkpoints.iter())
    {
        if let Some(stall) = record.stall_seconds {
            stalls.push(stall);
            durable.push(record.seconds());
        }
    }
    if stalls.is_empty() {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    Some(serde_json::json!({
        "saves": stalls.len(),
        "stall_mean_seconds": mean(&stalls),
        "stall_max_seconds": max(&stalls),
        "durable_mean_seconds": mean(&durable),
        "durable_max_seconds": max(&durable),
    }))
}
