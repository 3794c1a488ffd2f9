//! `dlio postprocess` (also `dlio_postprocessor`, DLIO's name for it): reads a run's output
//! folder (`{rank}_output.json`, `per_epoch_stats.json`, `summary.json`, `iostat.json` and
//! `.hydra/config.yaml`) and writes `DLIO_{model}_report.txt`: throughput statistics over
//! the epochs, and per epoch and phase the loading and processing times per rank and, where
//! the run was profiled with iostat, the devices' bandwidth, IOPS, wait times and queue
//! length and the CPU split, as DLIO's post-processor reports them.
//!
//! Differences from DLIO's, each a fix: a checkpoint phase (`save_ckpt1`) is reported as a
//! checkpoint rather than failing on its missing load times; each iostat interval counts
//! once in the overall device figures (DLIO adds every device interval twice); a folder
//! without `.hydra/config.yaml` is read with the command-line values instead of failing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chrono::NaiveDateTime;
use serde_json::Value;

/// The command line, as DLIO's `dlio_postprocessor` takes it.
#[derive(Debug, Clone, clap::Args)]
pub struct PostprocessArgs {
    /// Folder containing the output of a benchmark run.
    #[arg(long = "output-folder", default_value = "./output")]
    pub output_folder: PathBuf,
    /// The run's Hydra folder (relative to the output folder), holding config.yaml.
    #[arg(long = "hydra-folder", default_value = "./.hydra")]
    pub hydra_folder: PathBuf,
    /// Number of processes that ran (DLIO counts the `*_output.json` files instead, as here).
    #[arg(long = "num-proc", default_value_t = 1)]
    pub num_proc: usize,
    /// Epochs emulated (the run's config.yaml wins when present).
    #[arg(short = 'e', long = "epochs", default_value_t = 1)]
    pub epochs: u64,
    /// Per-rank training batch size (the run's config.yaml wins when present).
    #[arg(long = "batch-size", default_value_t = 1)]
    pub batch_size: u64,
    /// Whether evaluation ran (the run's config.yaml wins when present).
    #[arg(long = "do-eval", default_value = "False", value_parser = parse_bool)]
    pub do_eval: bool,
    /// Per-rank evaluation batch size (the run's config.yaml wins when present).
    #[arg(long = "batch-size-eval", default_value_t = 1)]
    pub batch_size_eval: u64,
    /// Whether checkpoints were written (the run's config.yaml wins when present).
    #[arg(short = 'c', long = "do-checkpoint", default_value = "False", value_parser = parse_bool)]
    pub do_checkpoint: bool,
    /// Print more (accepted for DLIO's command line; the report is the same).
    #[arg(short = 'd', long = "debug", default_value = "False", value_parser = parse_bool)]
    pub debug: bool,
    /// Name of the run: the report is DLIO_{name}_report.txt (the model name when the
    /// run's config.yaml has one).
    #[arg(short = 'n', long = "name", default_value = "")]
    pub name: String,
}

/// DLIO's `str2bool`: yes/true/t/y/1 and no/false/f/n/0, any case.
fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "yes" | "true" | "t" | "y" | "1" => Ok(true),
        "no" | "false" | "f" | "n" | "0" => Ok(false),
        _ => Err(format!(
            "`{text}` is not a boolean (true/false, yes/no, 1/0)"
        )),
    }
}

/// DLIO's single-dash spellings (`-of DIR`, `-np 2`, `-bse 4`) as our long options.
pub fn normalise_args(words: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    words
        .into_iter()
        .map(|w| {
            let Some(text) = w.to_str() else {
                return w;
            };
            for (short, long) in [
                ("-of", "--output-folder"),
                ("-hf", "--hydra-folder"),
                ("-np", "--num-proc"),
                ("-bse", "--batch-size-eval"),
                ("-bs", "--batch-size"),
                ("-de", "--do-eval"),
            ] {
                if text == short {
                    return long.into();
                }
                if let Some(rest) = text.strip_prefix(short).and_then(|r| r.strip_prefix('=')) {
                    return format!("{long}={rest}").into();
                }
            }
            w
        })
        .collect()
}

/// What the report is computed from.
struct RunSettings {
    name: String,
    comm_size: usize,
    epochs: u64,
    batch_size: u64,
    batch_size_eval: u64,
    do_eval: bool,
    record_size: f64,
}

/// Runs the post-processor; returns the report's path.
pub fn postprocess(args: &PostprocessArgs) -> Result<PathBuf> {
    let dir = &args.output_folder;
    if !dir.is_dir() {
        bail!(
            "{} is not a folder; give the run's output folder with --output-folder DIR",
            dir.display()
        );
    }
    let settings = settings(args)?;
    println!("===============Processing DLIO output================");
    println!("  Job configuration");
    println!("  output_folder: {}", dir.display());
    println!("  hydra_folder: {}", args.hydra_folder.display());
    println!("  num_proc: {}", settings.comm_size);
    println!("  epochs: {}", settings.epochs);
    println!("  batch_size: {}", settings.batch_size);
    println!("  do_eval: {}", py_bool(settings.do_eval));
    println!("  batch_size_eval: {}", settings.batch_size_eval);
    println!("  do_checkpoint: {}", py_bool(args.do_checkpoint));
    println!("  debug: {}", py_bool(args.debug));
    println!("  name: {}", settings.name);

    let summary = read_json(&dir.join("summary.json"))?;
    let mut per_epoch = read_json(&dir.join("per_epoch_stats.json"))?;
    let iostat = match std::fs::read_to_string(dir.join("iostat.json")) {
        Ok(text) => Some(
            serde_json::from_str::<Value>(&text)
                .with_context(|| format!("{}: not JSON", dir.join("iostat.json").display()))?,
        ),
        Err(_) => {
            println!(
                "WARNING: missing necessary file: {}",
                dir.join("iostat.json").display()
            );
            None
        }
    };
    let ranks: Vec<Value> = (0..settings.comm_size)
        .map(|r| read_json(&dir.join(format!("{r}_output.json"))))
        .collect::<Result<_>>()?;

    let overall = loading_and_processing(&settings, &summary, &ranks, &mut per_epoch)?;
    let io = iostat
        .as_ref()
        .map(|doc| iostat_figures(doc, &mut per_epoch))
        .transpose()?;
    let report = render_report(&settings, &overall, io.as_ref(), &per_epoch)?;
    let name = if settings.name.is_empty() {
        "DLIO_report.txt".to_string()
    } else {
        format!("DLIO_{}_report.txt", settings.name)
    };
    let path = dir.join(name);
    crate::files::write_whole(&path, report.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    println!("Successfully wrote {}", path.display());
    Ok(path)
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading {} (is this a dlio or DLIO output folder?)",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

/// The settings from the run's `.hydra/config.yaml` where it has them, else the command line.
fn settings(args: &PostprocessArgs) -> Result<RunSettings> {
    let dir = &args.output_folder;
    let comm_size = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with("_output.json"))
        .count();
    if comm_size == 0 {
        bail!(
            "{} holds no {{rank}}_output.json: it is not the output folder of a training run",
            dir.display()
        );
    }
    let mut s = RunSettings {
        name: args.name.clone(),
        comm_size,
        epochs: args.epochs,
        batch_size: args.batch_size,
        batch_size_eval: args.batch_size_eval,
        do_eval: args.do_eval,
        record_size: 0.0,
    };
    let config_path = dir.join(&args.hydra_folder).join("config.yaml");
    match std::fs::read_to_string(&config_path) {
        Ok(text) => {
            let tree: yaml_serde::Value = yaml_serde::from_str(&text)
                .with_context(|| format!("{}: not YAML", config_path.display()))?;
            let workload = tree.get("workload").cloned().unwrap_or(tree);
            let workload_text = yaml_serde::to_string(&workload)
                .with_context(|| format!("{}: the workload section", config_path.display()))?;
            let config =
                dlio_config::load_text(&config_path.display().to_string(), &workload_text, &[])?
                    .config;
            s.epochs = config.train.epochs;
            s.batch_size = config.reader.batch_size;
            s.batch_size_eval = config.reader.batch_size_eval;
            s.do_eval = config.workflow.evaluation;
            s.record_size = config.dataset.record_length_bytes;
            s.name = config.model.name.clone();
        }
        Err(_) => println!(
            "WARNING: no {}: using the command line's epochs and batch sizes",
            config_path.display()
        ),
    }
    Ok(s)
}

/// DLIO's statistics of a series (`n/a` for fewer than two values): mean, sample standard
/// deviation, min, median, the 90th and 99th of Python's inclusive quantiles, max.
fn stats(series: &[f64]) -> BTreeMap<&'static str, String> {
    let keys = ["mean", "std", "min", "median", "p90", "p99", "max"];
    if series.len() < 2 {
        return keys.iter().map(|k| (*k, "n/a".to_string())).collect();
    }
    let n = series.len() as f64;
    let mean = series.iter().sum::<f64>() / n;
    let var = series.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let mut sorted = series.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len() - 1;
    // statistics.quantiles(method="inclusive", n=100), cut point i.
    let quantile = |i: usize| {
        let (j, delta) = ((i * m) / 100, (i * m) % 100);
        let next = sorted.get(j + 1).copied().unwrap_or(sorted[j]);
        (sorted[j] * (100 - delta) as f64 + next * delta as f64) / 100.0
    };
    let median = if sorted.len() % 2 == 1 {
        sorted[m / 2]
    } else {
        (sorted[m / 2] + sorted[m / 2 + 1]) / 2.0
    };
    let f = |x: f64| format!("{x:.2}");
    BTreeMap::from([
        ("mean", f(mean)),
        ("std", f(var.sqrt())),
        ("min", f(sorted[0])),
        ("median", f(median)),
        ("p90", f(quantile(90))),
        ("p99", f(quantile(99))),
        ("max", f(sorted[m])),
    ])
}

/// DLIO's per-step series of all ranks added step by step (the ranks' lists are equal in
/// length: every rank runs the same steps).
fn summed_over_ranks(per_rank: &[Vec<f64>]) -> Vec<f64> {
    let n = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    (0..n)
        .map(|i| per_rank.iter().map(|r| r[i]).sum())
        .collect()
}

struct Overall {
    samples_per_s: BTreeMap<&'static str, String>,
    mb_per_s: BTreeMap<&'static str, String>,
    start: String,
    end: String,
    duration: f64,
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// Loading and processing times: overall, and into each epoch's phases of `per_epoch`
/// (`avg_process_loading_time`, `avg_process_processing_time`, `samples/s`, `MB/s`).
fn loading_and_processing(
    s: &RunSettings,
    summary: &Value,
    ranks: &[Value],
    per_epoch: &mut Value,
) -> Result<Overall> {
    let mib = 1024.0 * 1024.0;
    let throughput = floats(&summary["metric"]["train_throughput_samples_per_second"]);
    let io: Vec<f64> = throughput.iter().map(|x| x * s.record_size / mib).collect();
    let comm = s.comm_size as f64;
    for epoch in 1..=s.epochs {
        let key = epoch.to_string();
        let Some(phases) = per_epoch.get_mut(&key).and_then(Value::as_object_mut) else {
            bail!("per_epoch_stats.json has no epoch {epoch} (the run's train.epochs)");
        };
        let mut names: Vec<String> = Vec::new();
        for r in ranks {
            if let Some(load) = r[&key]["load"].as_object() {
                names.extend(
                    load.keys()
                        .filter(|k| !names.contains(k))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
            }
        }
        for phase in names {
            let batch = if phase.starts_with("eval") {
                s.batch_size_eval
            } else {
                s.batch_size
            } as f64;
            let loads: Vec<Vec<f64>> = ranks
                .iter()
                .map(|r| floats(&r[&key]["load"][&phase]))
                .collect();
            let procs: Vec<Vec<f64>> = ranks
                .iter()
                .map(|r| floats(&r[&key]["proc"][&phase]))
                .collect();
            let rates: Vec<Vec<f64>> = procs
                .iter()
                .map(|p| p.iter().map(|t| batch / t).collect())
                .collect();
            let total_rate = summed_over_ranks(&rates);
            let bandwidth: Vec<f64> = total_rate.iter().map(|x| x * s.record_size / mib).collect();
            let sum = |v: &[Vec<f64>]| v.iter().flatten().sum::<f64>();
            let Some(entry) = phases.get_mut(&phase).and_then(Value::as_object_mut) else {
                continue;
            };
            entry.insert(
                "avg_process_loading_time".into(),
                format!("{:.2}", sum(&loads) / comm).into(),
            );
            entry.insert(
                "avg_process_processing_time".into(),
                format!("{:.2}", sum(&procs) / comm).into(),
            );
            entry.insert(
                "samples/s".into(),
                serde_json::to_value(stats(&total_rate))?,
            );
            entry.insert("MB/s".into(), serde_json::to_value(stats(&bandwidth))?);
        }
    }
    let stamp = |epoch: u64, key: &str| {
        per_epoch[epoch.to_string()][key]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("per_epoch_stats.json: epoch {epoch} has no `{key}`"))
    };
    let (start, end) = (stamp(1, "start")?, stamp(s.epochs, "end")?);
    let duration = (parse_time(&end)? - parse_time(&start)?).as_seconds_f64();
    Ok(Overall {
        samples_per_s: stats(&throughput),
        mb_per_s: stats(&io),
        start,
        end,
        duration,
    })
}

/// A timestamp of the output files (`2026-12-02T01:56:11.529911`).
fn parse_time(text: &str) -> Result<NaiveDateTime> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .with_context(|| format!("`{text}` is not a timestamp"))
}

/// A timestamp as pandas prints one (`2026-12-02 01:56:11.529911`).
fn shown_time(text: &str) -> String {
    parse_time(text)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
        .unwrap_or_else(|_| text.to_string())
}

const DISK_FIGURES: [&str; 7] = [
    "rMB/s", "wMB/s", "r/s", "w/s", "r_await", "w_await", "aqu-sz",
];
const CPU_FIGURES: [&str; 5] = ["user", "system", "iowait", "steal", "idle"];

/// The overall device and CPU statistics, with each phase's written into `per_epoch`.
struct IoFigures {
    disks: Vec<String>,
    overall: Value,
}

fn iostat_figures(doc: &Value, per_epoch: &mut Value) -> Result<IoFigures> {
    let records = doc["sysstat"]["hosts"][0]["statistics"]
        .as_array()
        .context("iostat.json has no sysstat.hosts[0].statistics")?;
    // (time, cpu figures, [(disk, figures)]), user time with nice as DLIO combines them.
    let mut rows = Vec::new();
    let mut disks: Vec<String> = Vec::new();
    for r in records {
        let ts = r["timestamp"].as_str().unwrap_or_default();
        let at = NaiveDateTime::parse_from_str(ts, "%m/%d/%y %H:%M:%S")
            .with_context(|| format!("iostat.json: timestamp `{ts}` is not MM/DD/YY HH:MM:SS"))?;
        let cpu = &r["avg-cpu"];
        let num = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        let cpu_row = [
            num(cpu, "user") + num(cpu, "nice"),
            num(cpu, "system"),
            num(cpu, "iowait"),
            num(cpu, "steal"),
            num(cpu, "idle"),
        ];
        let mut disk_rows = Vec::new();
        for d in r["disk"].as_array().into_iter().flatten() {
            let name = d["disk_device"].as_str().unwrap_or_default().to_string();
            if !disks.contains(&name) {
                disks.push(name.clone());
            }
            disk_rows.push((name, DISK_FIGURES.map(|k| num(d, k))));
        }
        rows.push((at, cpu_row, disk_rows));
    }
    let mut overall_disk: BTreeMap<String, [Vec<f64>; 7]> = BTreeMap::new();
    let mut overall_cpu: [Vec<f64>; 5] = Default::default();
    let epochs: Vec<String> = per_epoch
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    for epoch in epochs {
        let Some(phases) = per_epoch[&epoch].as_object_mut() else {
            continue;
        };
        for (_, phase) in phases.iter_mut() {
            let Some(p) = phase.as_object_mut() else {
                continue;
            };
            let (Some(start), Some(end)) = (
                p.get("start").and_then(Value::as_str),
                p.get("end").and_then(Value::as_str),
            ) else {
                continue;
            };
            let (start, end) = (parse_time(start)?, parse_time(end)?);
            let inside: Vec<_> = rows
                .iter()
                .filter(|(at, _, _)| *at >= start && *at < end)
                .collect();
            let mut disk_out = serde_json::Map::new();
            for disk in &disks {
                let mut figures = serde_json::Map::new();
                for (i, key) in DISK_FIGURES.iter().enumerate() {
                    let series: Vec<f64> = inside
                        .iter()
                        .flat_map(|(_, _, d)| {
                            d.iter().filter(|(n, _)| n == disk).map(move |(_, f)| f[i])
                        })
                        .collect();
                    overall_disk.entry(disk.clone()).or_default()[i].extend(&series);
                    figures.insert(key.to_string(), serde_json::to_value(stats(&series))?);
                }
                disk_out.insert(disk.clone(), figures.into());
            }
            let mut cpu_out = serde_json::Map::new();
            for (i, key) in CPU_FIGURES.iter().enumerate() {
                let series: Vec<f64> = inside.iter().map(|(_, c, _)| c[i]).collect();
                overall_cpu[i].extend(&series);
                cpu_out.insert(key.to_string(), serde_json::to_value(stats(&series))?);
            }
            p.insert("disk".into(), disk_out.into());
            p.insert("cpu".into(), cpu_out.into());
        }
    }
    let mut disk_json = serde_json::Map::new();
    for disk in &disks {
        let mut figures = serde_json::Map::new();
        if let Some(series) = overall_disk.get(disk) {
            for (i, key) in DISK_FIGURES.iter().enumerate() {
                figures.insert(key.to_string(), serde_json::to_value(stats(&series[i]))?);
            }
        }
        disk_json.insert(disk.clone(), figures.into());
    }
    let mut cpu_json = serde_json::Map::new();
    for (i, key) in CPU_FIGURES.iter().enumerate() {
        cpu_json.insert(
            key.to_string(),
            serde_json::to_value(stats(&overall_cpu[i]))?,
        );
    }
    Ok(IoFigures {
        disks,
        overall: serde_json::json!({ "disk": disk_json, "cpu": cpu_json }),
    })
}

const TAB: &str = "    ";
const HALF_TAB: &str = "  ";
const STAT_COLUMNS: [&str; 7] = ["mean", "std", "min", "median", "p90", "p99", "max"];

fn row_of(stats: &Value) -> String {
    STAT_COLUMNS
        .iter()
        .map(|k| format!("{:>12} ", stats[*k].as_str().unwrap_or("n/a")))
        .collect()
}

/// Rows of `name: value`, names padded to the longest plus 8, then a blank line.
fn described(out: &mut String, rows: &[(&str, String)], indent: usize) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 8;
    for (k, v) in rows {
        let _ = writeln!(out, "{}{k:<width$}{v}", TAB.repeat(indent));
    }
    out.push('\n');
}

/// The statistics table of a phase (or of the whole run with `overall`).
fn stats_table(
    out: &mut String,
    figures: &Value,
    io: &IoFigures,
    has_loading: bool,
    indent: usize,
    overall: bool,
) {
    let indent = TAB.repeat(indent);
    let width = "W Bandwidth (MB/s):".len() + TAB.len() + HALF_TAB.len() + 10;
    let line = |out: &mut String, label: &str, rest: &str| {
        let _ = writeln!(out, "{indent}{label:<width$}{rest}");
    };
    let header: String = STAT_COLUMNS.iter().map(|c| format!("{c:>12} ")).collect();
    line(out, "", &header);
    line(out, "", &"-".repeat(90));
    if has_loading {
        line(
            out,
            if overall {
                "Throughput Stats (over all epochs)"
            } else {
                "Throughput Stats (over all steps)"
            },
            "",
        );
        line(out, "  Samples/s:", &row_of(&figures["samples/s"]));
        line(
            out,
            "  MB/s (derived from Samples/s):",
            &row_of(&figures["MB/s"]),
        );
    }
    out.push('\n');
    line(out, "I/O Stats (over all time segments)", "");
    for disk in &io.disks {
        let d = &figures["disk"][disk];
        line(out, &format!("{HALF_TAB}Device: {disk}"), "");
        for (label, key) in [
            ("R Bandwidth (MB/s):", "rMB/s"),
            ("W Bandwidth (MB/s):", "wMB/s"),
            ("R IOPS:", "r/s"),
            ("W IOPS:", "w/s"),
            ("Avg R Time (ms):", "r_await"),
            ("Avg W Time (ms):", "w_await"),
            ("Avg Queue Length:", "aqu-sz"),
        ] {
            line(out, &format!("{TAB}{label}"), &row_of(&d[key]));
        }
        out.push('\n');
    }
    line(out, "CPU Stats", "");
    for (label, key) in [
        ("User (%):", "user"),
        ("System (%):", "system"),
        ("IO Wait (%):", "iowait"),
        ("Steal (%):", "steal"),
        ("Idle (%):", "idle"),
    ] {
        line(out, &format!("{TAB}{label}"), &row_of(&figures["cpu"][key]));
    }
    out.push('\n');
}

fn render_report(
    s: &RunSettings,
    overall: &Overall,
    io: Option<&IoFigures>,
    per_epoch: &Value,
) -> Result<String> {
    let mut out = String::new();
    out.push_str("DLIO v1.0 Report\n\n");
    out.push_str(
        "Note: Training phases lasting less than 2 seconds, will show 'n/a' values, as there is \
         not enough data to compute statistics.\n\n",
    );
    out.push_str("Overall\n\n");
    let mut rows = vec![
        ("Run name:", s.name.clone()),
        ("Started:", shown_time(&overall.start)),
        ("Ended:", shown_time(&overall.end)),
        ("Duration (s):", format!("{:.2}", overall.duration)),
        ("Num Ranks:", s.comm_size.to_string()),
        ("Batch size (per rank):", s.batch_size.to_string()),
    ];
    if s.do_eval {
        rows.push(("Eval batch size:", s.batch_size_eval.to_string()));
    }
    described(&mut out, &rows, 1);
    if let Some(io) = io {
        let mut figures = io.overall.clone();
        figures["samples/s"] = serde_json::to_value(&overall.samples_per_s)?;
        figures["MB/s"] = serde_json::to_value(&overall.mb_per_s)?;
        stats_table(&mut out, &figures, io, true, 1, true);
    }
    out.push_str("\nDetailed Report\n\n");
    let (mut blocks, mut evals, mut checkpoints) = (1, 1, 1);
    for epoch in 1..=s.epochs {
        let data = &per_epoch[epoch.to_string()];
        let _ = writeln!(out, "Epoch {epoch}");
        let field = |k: &str| data[k].as_str().unwrap_or_default().to_string();
        described(
            &mut out,
            &[
                ("Started:", shown_time(&field("start"))),
                ("Ended:", shown_time(&field("end"))),
                (
                    "Duration (s):",
                    data["duration"]
                        .as_str()
                        .map_or_else(|| data["duration"].to_string(), str::to_string),
                ),
            ],
            1,
        );
        // Phases in time order (the JSON object's order is not kept when read).
        let mut phases: Vec<(&String, &Value)> = data
            .as_object()
            .map(|o| o.iter().filter(|(_, v)| v.is_object()).collect())
            .unwrap_or_default();
        phases.sort_by_key(|(_, v)| v["start"].as_str().unwrap_or_default().to_string());
        for (name, phase) in phases {
            let is_checkpoint = name.contains("ckpt");
            if name.starts_with("block") {
                let _ = writeln!(out, "{TAB}Block {blocks}");
                blocks += 1;
            } else if name.starts_with("eval") {
                let _ = writeln!(out, "{TAB}Eval {evals}");
                evals += 1;
            } else if is_checkpoint {
                let _ = writeln!(out, "{TAB}Checkpoint {checkpoints}");
                checkpoints += 1;
            } else {
                let _ = writeln!(out, "{TAB}{name}");
            }
            let text = |k: &str| {
                phase[k]
                    .as_str()
                    .map_or_else(|| phase[k].to_string(), str::to_string)
            };
            let mut rows = vec![
                ("Started:", shown_time(&text("start"))),
                ("Ended:", shown_time(&text("end"))),
                ("Duration (s):", text("duration")),
            ];
            let has_loading = !is_checkpoint && phase.get("avg_process_loading_time").is_some();
            if has_loading {
                rows.push((
                    "Avg loading time / rank (s):",
                    text("avg_process_loading_time"),
                ));
                rows.push((
                    "Avg processing time / rank (s):",
                    text("avg_process_processing_time"),
                ));
            }
            described(&mut out, &rows, 2);
            if let Some(io) = io {
                stats_table(&mut out, phase, io, has_loading, 2, false);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_pythons() {
        // statistics.mean/stdev/median and quantiles(n=100, method="inclusive") of 1..=10:
        // p90 = 9.1, p99 = 9.91.
        let series: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = stats(&series);
        assert_eq!(s["mean"], "5.50");
        assert_eq!(s["std"], "3.03");
        assert_eq!(s["median"], "5.50");
        assert_eq!(s["p90"], "9.10");
        assert_eq!(s["p99"], "9.91");
        assert_eq!(s["min"], "1.00");
        assert_eq!(s["max"], "10.00");
        assert_eq!(stats(&[1.0])["mean"], "n/a");
    }

    /// Upstream's `dlio_postprocessor_test.py` checks the overall samples/s mean and the
    /// average loading and processing times per rank; the same figures on a folder small
    /// enough to work out by hand.
    #[test]
    fn loading_and_processing_times_are_dlios() {
        let settings = RunSettings {
            name: "m".into(),
            comm_size: 2,
            epochs: 1,
            batch_size: 4,
            batch_size_eval: 1,
            do_eval: false,
            record_size: 1_048_576.0,
        };
        let summary =
            serde_json::json!({"metric": {"train_throughput_samples_per_second": [5.0, 5.2]}});
        let ranks = [
            serde_json::json!({"1": {"load": {"block1": [1.0, 2.0]}, "proc": {"block1": [2.0, 4.0]}}}),
            serde_json::json!({"1": {"load": {"block1": [3.0, 1.0]}, "proc": {"block1": [4.0, 2.0]}}}),
        ];
        let mut per_epoch = serde_json::json!({"1": {
            "start": "2026-12-02T01:00:00.000000",
            "block1": {"start": "2026-12-02T01:00:00.100000", "end": "2026-12-02T01:00:12.100000", "duration": "12.00"},
            "end": "2026-12-02T01:00:12.500000",
            "duration": "12.00"
        }});
        let overall = loading_and_processing(&settings, &summary, &ranks, &mut per_epoch).unwrap();
        assert_eq!(overall.samples_per_s["mean"], "5.10");
        assert_eq!(overall.mb_per_s["mean"], "5.10");
        assert_eq!(format!("{:.2}", overall.duration), "12.50");
        let block = &per_epoch["1"]["block1"];
        // (1 + 2 + 3 + 1) / 2 ranks and (2 + 4 + 4 + 2) / 2.
        assert_eq!(block["avg_process_loading_time"], "3.50");
        assert_eq!(block["avg_process_processing_time"], "6.00");
        // Per step, the ranks' batch / processing time added: 4/2 + 4/4 and 4/4 + 4/2.
        assert_eq!(block["samples/s"]["mean"], "3.00");
        assert_eq!(block["samples/s"]["std"], "0.00");
        let report = render_report(&settings, &overall, None, &per_epoch).unwrap();
        assert!(
            report.contains("Avg loading time / rank (s):") && report.contains("3.50"),
            "{report}"
        );
    }

    #[test]
    fn dlios_single_dash_options_are_taken() {
        let words = normalise_args(
            ["x", "-of", "out", "-np=2", "-bse", "4"]
                .iter()
                .map(Into::into)
                .collect(),
        );
        let words: Vec<String> = words
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            words,
            [
                "x",
                "--output-folder",
                "out",
                "--num-proc=2",
                "--batch-size-eval",
                "4"
            ]
        );
    }
}
