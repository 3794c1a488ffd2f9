//! The characterisation written out: the workload YAML (each key with its evidence as a
//! comment), the terminal summary, and `characterize.json` and `characterize.html`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Characterization, Parameter};
use crate::error::AnalyzeError;
use crate::report::escape;

pub(super) fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

/// The workload YAML: the derived keys grouped by section, each with its evidence as a
/// comment above it.
pub(super) fn workload_yaml(c: &Characterization) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Derived by `dlio characterize` from {} trace files ({} events); data set in {}.",
        c.traces.len(),
        c.events,
        c.data_dir
    );
    for note in &c.notes {
        let _ = writeln!(out, "# Note: {note}");
    }
    let value_of = |key: &str| c.parameters.iter().find(|p| p.key == key);
    out.push_str("model:\n  name: characterized\n");
    if let Some(p) = value_of("model.model_size_bytes") {
        let _ = writeln!(out, "  # {}\n  model_size_bytes: {}", p.evidence, p.value);
    }
    if value_of("framework").is_none() {
        out.push_str("framework: pytorch\n");
    }
    for p in c.parameters.iter().filter(|p| !p.key.contains('.')) {
        let _ = writeln!(
            out,
            "# {}\n{}: {}",
            p.evidence.replace('\n', " "),
            p.key,
            p.value
        );
    }
    out.push_str("workflow:\n  generate_data: True\n  train: True\n");
    match value_of("workflow.checkpoint") {
        Some(p) => {
            let _ = writeln!(out, "  # {}\n  checkpoint: {}", p.evidence, p.value);
        }
        None => out.push_str("  checkpoint: False\n"),
    }
    if let Some(p) = value_of("workflow.evaluation") {
        let _ = writeln!(out, "  # {}\n  evaluation: {}", p.evidence, p.value);
    }
    let mut section = "";
    let mut extra: Vec<(&str, String)> = vec![
        ("dataset", "  data_folder: data/characterized\n".into()),
        (
            "reader",
            if value_of("reader.data_loader").is_some() {
                String::new()
            } else {
                "  data_loader: pytorch\n".into()
            },
        ),
    ];
    const SECTIONS: [&str; 5] = ["dataset", "reader", "train", "evaluation", "checkpoint"];
    let mut ordered: Vec<&Parameter> = c
        .parameters
        .iter()
        .filter(|p| {
            p.key.contains('.') && !p.key.starts_with("model.") && !p.key.starts_with("workflow.")
        })
        .collect();
    ordered.sort_by_key(|p| {
        let sec = p.key.split_once('.').map_or("", |(s, _)| s);
        SECTIONS
            .iter()
            .position(|s| *s == sec)
            .unwrap_or(SECTIONS.len())
    });
    // The sub-section open under the section (`hdf5` of `dataset.hdf5.label_read`).
    let mut subsection = "";
    for p in ordered {
        let (sec, key) = p.key.split_once('.').unwrap_or(("", &p.key));
        if sec != section {
            let _ = writeln!(out, "{sec}:");
            section = sec;
            subsection = "";
            if let Some(i) = extra.iter().position(|(s, _)| *s == sec) {
                out.push_str(&extra.remove(i).1);
            }
        }
        if let Some((sub, inner)) = key.split_once('.') {
            if sub != subsection {
                let _ = writeln!(out, "  {sub}:");
                subsection = sub;
            }
            let _ = writeln!(out, "    # {}", p.evidence.replace('\n', " "));
            let _ = writeln!(out, "    {inner}: {}", yaml_1_1_safe(&p.value));
            continue;
        }
        subsection = "";
        let _ = writeln!(out, "  # {}", p.evidence.replace('\n', " "));
        if matches!(
            p.key.as_str(),
            "reader.transfer_size_distribution"
                | "reader.sample_requests"
                | "dataset.side_files"
                | "dataset.sample_companions"
                | "dataset.record_length_bytes_distribution"
        ) {
            let _ = writeln!(out, "  {key}:");
            for entry in p.value.split("}, ") {
                let entry = entry.trim_end_matches('}');
                let _ = writeln!(out, "    - {entry}}}");
            }
        } else if p.key == "reader.sample_request_patterns" {
            // Entries that hold lists of their own: one a line.
            let _ = writeln!(out, "  {key}:");
            for entry in p.value.lines() {
                let _ = writeln!(out, "    - {entry}");
            }
        } else {
            let _ = writeln!(out, "  {key}: {}", yaml_1_1_safe(&p.value));
        }
    }
    out
}

/// `value`, quoted when a YAML 1.1 reader (PyYAML, so OmegaConf and Python DLIO) would take
/// the bare word for a boolean: `file_shuffle: off` is `False` there.
fn yaml_1_1_safe(value: &str) -> String {
    const BOOLEAN_WORDS: [&str; 8] = ["off", "on", "yes", "no", "y", "n", "true", "false"];
    if BOOLEAN_WORDS.contains(&value.to_ascii_lowercase().as_str())
        && !matches!(value, "True" | "False")
    {
        format!("\"{value}\"")
    } else {
        value.to_string()
    }
}

/// The characterisation for a terminal.
pub fn render_characterization(c: &Characterization) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Characterised {} trace files ({} events); data set: {} files in {}",
        c.traces.len(),
        c.events,
        c.data_files,
        c.data_dir
    );
    let _ = writeln!(o, "\n{:<38} {:<24} evidence", "key", "value");
    for p in &c.parameters {
        let value = if p.value.len() > 24 {
            format!("{}...", &p.value[..21])
        } else {
            p.value.clone()
        };
        let _ = writeln!(o, "{:<38} {:<24} {}", p.key, value, p.evidence);
    }
    let _ = writeln!(
        o,
        "\nsteps found: {}; loading per step {:.3} ms (mean), compute {:.3} ms (mean, stdev {:.3})",
        c.steps,
        c.fetch_s.mean * 1e3,
        c.compute_s.mean * 1e3,
        c.compute_s.stdev * 1e3
    );
    let _ = writeln!(o, "request sizes (data reads):");
    let total: u64 = c.transfer_sizes.iter().map(|s| s.count).sum();
    for s in &c.transfer_sizes {
        let _ = writeln!(
            o,
            "  {:>12} bytes  {:>8} reads  {:>5.1}%",
            s.size,
            s.count,
            100.0 * s.count as f64 / total.max(1) as f64
        );
    }
    for s in &c.side_files {
        let _ = writeln!(
            o,
            "side file: {} ({} bytes) read {} times, every {} steps",
            s.path, s.size, s.reads, s.every_steps
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

/// The files [`write_characterization`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharacterizationFiles {
    /// The workload YAML.
    pub yaml: PathBuf,
    /// `characterize.json` beside it.
    pub json: PathBuf,
    /// `characterize.html` beside it.
    pub html: PathBuf,
}

/// Writes `bytes` at `path`, making its folder first.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), AnalyzeError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| AnalyzeError::Io {
            op: "write",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    crate::report::write(path, bytes)
}

/// Writes the workload YAML at `yaml`, and `characterize.json` and `characterize.html` (the
/// parameters with their evidence, request sizes, per-step loading and compute plotted) beside
/// it.
pub fn write_characterization(
    c: &Characterization,
    yaml: &Path,
) -> Result<CharacterizationFiles, AnalyzeError> {
    let dir = yaml
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let json = dir.join("characterize.json");
    let html = dir.join("characterize.html");
    write_file(yaml, c.workload_yaml.as_bytes())?;
    let text = serde_json::to_vec_pretty(c).map_err(|e| AnalyzeError::Io {
        op: "write",
        path: json.clone(),
        source: e.into(),
    })?;
    write_file(&json, &text)?;

    let steps = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, s)| ((i + 1) as f64, s * 1e3))
            .collect()
    };
    let per_step = crate::plots::lines_svg(
        "Per step: loading (burst of data reads) and compute (pause after it)",
        "step",
        "milliseconds",
        &[
            crate::plots::Series {
                label: "compute",
                points: steps(&c.step_compute_s),
            },
            crate::plots::Series {
                label: "loading",
                points: steps(&c.step_fetch_s),
            },
        ],
    )?;
    let total: u64 = c.transfer_sizes.iter().map(|s| s.count).sum::<u64>().max(1);
    let mut sizes = c.transfer_sizes.clone();
    sizes.sort_by_key(|s| s.size);
    let mut cumulative = 0u64;
    let cdf: Vec<(f64, f64)> = sizes
        .iter()
        .map(|s| {
            cumulative += s.count;
            ((s.size as f64).log2(), cumulative as f64 / total as f64)
        })
        .collect();
    let size_plot = crate::plots::lines_svg(
        "Data read sizes: share of requests at or below each size",
        "log2(request bytes)",
        "share of requests",
        &[crate::plots::Series {
            label: "requests",
            points: cdf,
        }],
    )?;

    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dlio characterize</title>\n<style>\
         body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f4f4f4}\
         pre{background:#f8f8f8;padding:1em}</style></head><body>\n<h1>dlio characterize</h1>\n",
    );
    let _ = writeln!(
        h,
        "<p>{} trace files, {} events; data set: {} files in <code>{}</code>; {} steps found.</p>",
        c.traces.len(),
        c.events,
        c.data_files,
        escape(&c.data_dir),
        c.steps
    );
    h.push_str(
        "<h2>Derived parameters</h2><table><tr><th>key</th><th>value</th><th>evidence</th></tr>\n",
    );
    for p in &c.parameters {
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>",
            escape(&p.key),
            escape(&p.value),
            escape(&p.evidence)
        );
    }
    h.push_str("</table>\n");
    for n in &c.notes {
        let _ = writeln!(h, "<p><b>Note:</b> {}</p>", escape(n));
    }
    h.push_str("<h2>Request sizes of the data reads</h2><table><tr><th>bytes</th><th>reads</th><th>share</th></tr>\n");
    for s in &c.transfer_sizes {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            s.size,
            s.count,
            100.0 * s.count as f64 / total as f64
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<figure>{size_plot}</figure>\n<figure>{per_step}</figure>"
    );
    if !c.side_files.is_empty() {
        h.push_str("<h2>Side files</h2><table><tr><th>path</th><th>bytes</th><th>reads</th><th>every (steps)</th></tr>\n");
        for s in &c.side_files {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&s.path),
                s.size,
                s.reads,
                s.every_steps
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h2>Reader threads</h2><table><tr><th>pid</th><th>tid</th><th>reads</th><th>bytes</th></tr>\n");
    for r in &c.reader_threads {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.pid, r.tid, r.reads, r.bytes
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<h2>Workload</h2><pre>{}</pre>\n</body></html>",
        escape(&c.workload_yaml)
    );
    write_file(&html, h.as_bytes())?;
    Ok(CharacterizationFiles {
        yaml: yaml.to_path_buf(),
        json,
        html,
    })
}
