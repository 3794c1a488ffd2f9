//! The terminal report.

use std::fmt::Write as _;

use crate::model::{Analysis, SizeStats};

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn sizes(out: &mut String, what: &str, s: &SizeStats) {
    if s.ops == 0 {
        let _ = writeln!(out, "  {what}: none");
        return;
    }
    let _ = writeln!(
        out,
        "  {what}: {} ops, {}; min {} / median {} / mean {} / max {}",
        s.ops,
        human_bytes(s.bytes),
        human_bytes(s.min),
        human_bytes(s.median),
        human_bytes(s.mean.round() as u64),
        human_bytes(s.max)
    );
    let buckets: Vec<String> = s
        .buckets
        .iter()
        .filter(|b| b.count > 0)
        .map(|b| format!("{} {}", b.label, b.count))
        .collect();
    let _ = writeln!(out, "    buckets: {}", buckets.join(", "));
}

/// The report printed by `dlio analyze`.
pub fn render_terminal(a: &Analysis) -> String {
    let mut o = String::new();
    let t = &a.time;
    let _ = writeln!(
        o,
        "Trace: {} file(s), {} events ({} metadata), {} rank(s)",
        a.inputs.len(),
        a.events,
        a.metadata_events,
        a.ranks
    );
    if a.corrupt.count > 0 {
        let _ = writeln!(o, "Corrupt lines: {} (skipped)", a.corrupt.count);
        for c in &a.corrupt.examples {
            let _ = writeln!(o, "  {}:{}: {}", c.file.display(), c.line, c.reason);
        }
    }
    let _ = writeln!(o, "\nTime (seconds; per rank, mean over ranks)");
    let _ = writeln!(o, "  job time             {:>12.6}", a.job_time_s);
    let _ = writeln!(o, "  compute              {:>12.6}", t.compute_s);
    let _ = writeln!(o, "  I/O                  {:>12.6}", t.io_s);
    let _ = writeln!(
        o,
        "  I/O overlapped       {:>12.6}  ({:.1}% of I/O)",
        t.io_overlapped_s, t.io_overlapped_pct
    );
    let _ = writeln!(
        o,
        "  I/O unoverlapped     {:>12.6}  ({:.1}% of I/O)",
        t.io_unoverlapped_s, t.io_unoverlapped_pct
    );
    let _ = writeln!(
        o,
        "  compute unoverlapped {:>12.6}",
        t.compute_unoverlapped_s
    );
    let _ = writeln!(o, "  fetch (batch wait)   {:>12.6}", t.fetch_s);
    let c = &a.counts;
    let _ = writeln!(
        o,
        "  steps: {} compute, {} fetch, {} samples read, {} checkpoint spans",
        c.compute, c.fetch, c.items, c.checkpoints
    );

    let _ = writeln!(
        o,
        "\nLayer breakdown (time: mean per rank; MiB/s: all ranks' bytes over the slowest rank's \
         time)"
    );
    let _ = writeln!(
        o,
        "  {:<17} {:>11} {:>10} {:>11} {:>11} {:>11} {:>9}",
        "layer", "time (s)", "ops", "ops/s", "bytes", "MiB/s", "∥compute"
    );
    for l in &a.layers {
        let _ = writeln!(
            o,
            "  {:<17} {:>11.6} {:>10} {:>11.1} {:>11} {:>11.1} {:>8.1}%",
            l.layer,
            l.time_s,
            l.ops,
            l.ops_per_s,
            human_bytes(l.bytes),
            l.bandwidth_mib_s,
            l.overlap_with_compute_pct
        );
    }

    let _ = writeln!(o, "\nTransfer sizes (Darshan buckets)");
    sizes(&mut o, "reads", &a.transfer_sizes.read);
    sizes(&mut o, "writes", &a.transfer_sizes.write);
    let p = &a.access;
    let _ = writeln!(
        o,
        "  access: {} reads with offsets, {:.1}% sequential, {:.1}% consecutive; {} writes ({} sequential, {} consecutive)",
        p.reads,
        p.sequential_read_pct,
        p.consecutive_read_pct,
        p.writes,
        p.sequential_writes,
        p.consecutive_writes
    );

    let f = &a.files;
    let _ = writeln!(
        o,
        "\nFiles: {} accessed, {} read, {} written",
        f.files, f.files_read, f.files_written
    );
    let dist: Vec<String> = f
        .by_open_count
        .iter()
        .take(12)
        .map(|b| format!("{} file(s) opened {}x", b.files, b.opens))
        .collect();
    if !dist.is_empty() {
        let _ = writeln!(o, "  {}", dist.join(", "));
    }
    for r in f.top.iter().take(5) {
        let _ = writeln!(
            o,
            "  {:>6} opens {:>7} reads {:>11}  {}",
            r.opens,
            r.reads,
            human_bytes(r.bytes_read),
            r.path
        );
    }

    if a.per_rank.len() > 1 {
        let s = &a.skew;
        let _ = writeln!(
            o,
            "\nRanks: I/O time min {:.6} s (rank {}), max {:.6} s (rank {}), max/mean {:.2}; bytes max/mean {:.2}",
            s.io_min_s,
            s.fastest_rank,
            s.io_max_s,
            s.slowest_rank,
            s.io_max_over_mean,
            s.bytes_max_over_mean
        );
    }
    let peak = a.bandwidth.read_mib_s.iter().cloned().fold(0.0, f64::max);
    let _ = writeln!(
        o,
        "\nBandwidth over time: {} bins of {:.6} s, peak read {:.1} MiB/s",
        a.bandwidth.read_mib_s.len(),
        a.bandwidth.bin_s,
        peak
    );
    o
}
