//! `analysis.json`, the self-contained `analysis.html` (plots inline as SVG) and PNG copies.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::AnalyzeError;
use crate::model::Analysis;
use crate::plots::Plot;
use crate::terminal::render_terminal;

/// The files [`write_reports`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    /// `analysis.json`.
    pub json: PathBuf,
    /// `analysis.html`.
    pub html: PathBuf,
    /// `analysis-{timeline,bandwidth,transfer-sizes,file-access}.png`.
    pub pngs: Vec<PathBuf>,
}

pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<(), AnalyzeError> {
    std::fs::write(path, bytes).map_err(|source| AnalyzeError::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the reports of `analysis` into `out_dir` (created if needed).
pub fn write_reports(analysis: &Analysis, out_dir: &Path) -> Result<ReportFiles, AnalyzeError> {
    std::fs::create_dir_all(out_dir).map_err(|source| AnalyzeError::Io {
        op: "write",
        path: out_dir.to_path_buf(),
        source,
    })?;
    let json = out_dir.join("analysis.json");
    let text = serde_json::to_string_pretty(analysis).map_err(|e| AnalyzeError::Io {
        op: "write",
        path: json.clone(),
        source: e.into(),
    })?;
    write(&json, text.as_bytes())?;

    let mut pngs = Vec::new();
    let mut svgs = Vec::new();
    for plot in Plot::ALL {
        svgs.push((plot, plot.svg(analysis)?));
        let png = out_dir.join(format!("analysis-{}.png", plot.name()));
        write(&png, &plot.png(analysis)?)?;
        pngs.push(png);
    }
    let html = out_dir.join("analysis.html");
    write(&html, render_html(analysis, &svgs).as_bytes())?;
    Ok(ReportFiles { json, html, pngs })
}

fn render_html(a: &Analysis, svgs: &[(Plot, String)]) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dlio analyze</title>\n<style>\
         body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}\
         td:first-child,th:first-child{text-align:left}figure{margin:1em 0}pre{background:#f8f8f8;padding:1em}\
         </style></head><body>\n<h1>dlio analyze</h1>\n",
    );
    let t = &a.time;
    let _ = writeln!(
        h,
        "<h2>Summary</h2><table><tr><th>figure</th><th>seconds (per rank, mean)</th><th>share</th></tr>\
         <tr><td>job time</td><td>{:.6}</td><td></td></tr>\
         <tr><td>compute</td><td>{:.6}</td><td></td></tr>\
         <tr><td>I/O</td><td>{:.6}</td><td></td></tr>\
         <tr><td>I/O overlapped with compute</td><td>{:.6}</td><td>{:.1}%</td></tr>\
         <tr><td>I/O not overlapped</td><td>{:.6}</td><td>{:.1}%</td></tr>\
         <tr><td>fetch (batch wait)</td><td>{:.6}</td><td></td></tr></table>",
        a.job_time_s,
        t.compute_s,
        t.io_s,
        t.io_overlapped_s,
        t.io_overlapped_pct,
        t.io_unoverlapped_s,
        t.io_unoverlapped_pct,
        t.fetch_s
    );
    h.push_str("<h2>Plots</h2>\n");
    for (plot, svg) in svgs {
        let _ = writeln!(
            h,
            "<figure id=\"{}\">{}<figcaption>{}</figcaption></figure>",
            plot.name(),
            svg.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
                .trim(),
            escape(plot.title())
        );
    }
    h.push_str("<h2>Layers</h2><table><tr><th>layer</th><th>time (s)</th><th>ops</th><th>ops/s</th><th>bytes</th><th>MiB/s</th><th>overlap with compute</th></tr>\n");
    for l in &a.layers {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{:.6}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{:.1}</td><td>{:.1}%</td></tr>",
            escape(&l.layer),
            l.time_s,
            l.ops,
            l.ops_per_s,
            l.bytes,
            l.bandwidth_mib_s,
            l.overlap_with_compute_pct
        );
    }
    h.push_str("</table>\n<h2>Most accessed files</h2><table><tr><th>file</th><th>opens</th><th>reads</th><th>bytes read</th><th>writes</th><th>bytes written</th></tr>\n");
    for f in &a.files.top {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&f.path),
            f.opens,
            f.reads,
            f.bytes_read,
            f.writes,
            f.bytes_written
        );
    }
    h.push_str("</table>\n<h2>Ranks</h2><table><tr><th>rank</th><th>span (s)</th><th>compute (s)</th><th>I/O (s)</th><th>I/O overlapped (s)</th><th>I/O ops</th><th>bytes</th></tr>\n");
    for r in &a.per_rank {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{:.6}</td><td>{:.6}</td><td>{:.6}</td><td>{:.6}</td><td>{}</td><td>{}</td></tr>",
            r.rank, r.span_s, r.compute_s, r.io_s, r.io_overlapped_s, r.io_ops, r.bytes
        );
    }
    h.push_str("</table>\n<h2>Full report</h2><pre>");
    h.push_str(&escape(&render_terminal(a)));
    h.push_str("</pre>\n</body></html>\n");
    h
}
