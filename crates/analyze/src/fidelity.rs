//! `dlio fidelity REAL EMULATED`: how closely an emulation's I/O follows the real program's,
//! the DLIO paper's check.
//!
//! Both sides are read the same way (their data files found as `dlio characterize` finds
//! them, their steps as the bursts of data calls between compute pauses), so a feature means
//! the same on both. The feature vector is the paper's: I/O time (the time some data call is
//! in progress), bytes read, request size min/max/mean/median, bandwidth (bytes over I/O time),
//! the share of sequential reads (a read that starts at or after the end of the previous access
//! to its file), the number of files, and the mean loading time per step. Each feature is
//! scaled by the larger of its two values before the cosine similarity is taken, so that every
//! feature weighs the same (raw, the bytes would outweigh everything) and identical runs score
//! one. The end-to-end error compares the time from the first to the last data call; the
//! fetch-time CDF similarity is 1 minus the Kolmogorov-Smirnov distance between the two
//! distributions of per-step loading times.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::characterize::{DataSet, Stats, bursts, compute_starts, data_calls};
use crate::error::AnalyzeError;
use crate::timeline::load;

/// How to score.
#[derive(Debug, Clone, Default)]
pub struct FidelityOptions {
    /// The real program's data folder (default: found).
    pub real_data_dir: Option<PathBuf>,
    /// The emulation's data folder (default: found).
    pub emulated_data_dir: Option<PathBuf>,
}

/// One feature of both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Feature {
    /// Its name (with unit).
    pub name: String,
    /// The real program's value.
    pub real: f64,
    /// The emulation's value.
    pub emulated: f64,
}

/// What one side's traces show.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The trace files.
    pub traces: Vec<PathBuf>,
    /// The data folder found.
    pub data_dir: String,
    /// First to last data call, seconds.
    pub end_to_end_s: f64,
    /// Steps found (bursts between compute pauses; 0 when there are none).
    pub steps: u64,
    /// Per-step loading times, seconds.
    pub fetch_s: Stats,
}

/// The score.
#[derive(Debug, Clone, Serialize)]
pub struct Fidelity {
    /// Cosine similarity of the scaled feature vectors (1: the same).
    pub cosine_similarity: f64,
    /// |emulated - real| / real of the end-to-end time.
    pub end_to_end_error: f64,
    /// 1 - the Kolmogorov-Smirnov distance of the per-step loading times.
    pub fetch_cdf_similarity: f64,
    /// Every feature.
    pub features: Vec<Feature>,
    /// The real program.
    pub real: Side,
    /// The emulation.
    pub emulated: Side,
    /// Per-step loading times of each side, seconds (for the CDF).
    pub real_fetch_times_s: Vec<f64>,
    /// The emulation's.
    pub emulated_fetch_times_s: Vec<f64>,
}

struct Measured {
    side: Side,
    features: Vec<(&'static str, f64)>,
    fetch: Vec<f64>,
}

fn measure(path: &Path, data_dir: Option<&Path>) -> Result<Measured, AnalyzeError> {
    let t = load(path)?;
    let data = DataSet::find(&t, data_dir)?;
    let (calls, reads) = data_calls(&t, &data);
    if reads.is_empty() {
        return Err(AnalyzeError::Unusable(format!(
            "the traces in {} have no reads of the data files in {}",
            path.display(),
            data.dir
        )));
    }
    let (steps, paused) = bursts(&calls, &compute_starts(&t));
    let busy: i64 = steps.iter().map(|b| b.busy).sum();
    let io_s = busy as f64 / 1e9;
    let bytes: u64 = reads.iter().map(|r| r.bytes as u64).sum();
    let sizes = Stats::of(&reads.iter().map(|r| r.bytes as f64).collect::<Vec<_>>());
    // Sequential: from the previous access to the same file (any thread), in time order.
    let mut end_of: HashMap<u64, i64> = HashMap::new();
    let mut sequential = 0u64;
    let mut positioned = 0u64;
    for r in &reads {
        if r.offset < 0 {
            continue;
        }
        positioned += 1;
        if end_of.get(&r.file).is_none_or(|&prev| r.offset >= prev) {
            sequential += 1;
        }
        end_of.insert(r.file, r.offset + r.bytes);
    }
    let files = reads
        .iter()
        .map(|r| r.file)
        .collect::<std::collections::HashSet<_>>()
        .len();
    let fetch: Vec<f64> = if paused {
        steps
            .iter()
            .map(|b| (b.end - b.start) as f64 / 1e9)
            .collect()
    } else {
        Vec::new()
    };
    let start = calls.first().map_or(0, |r| r.start);
    let end = calls.iter().map(|r| r.end).max().unwrap_or(start);
    let fetch_stats = Stats::of(&fetch);
    Ok(Measured {
        side: Side {
            traces: t.inputs.clone(),
            data_dir: data.dir.clone(),
            end_to_end_s: (end - start) as f64 / 1e9,
            steps: fetch.len() as u64,
            fetch_s: fetch_stats,
        },
        features: vec![
            ("I/O time (s)", io_s),
            ("bytes read", bytes as f64),
            ("request size min (bytes)", sizes.min),
            ("request size max (bytes)", sizes.max),
            ("request size mean (bytes)", sizes.mean),
            ("request size median (bytes)", sizes.median),
            ("bandwidth (bytes/s)", bytes as f64 / io_s.max(1e-9)),
            (
                "sequential reads (share)",
                sequential as f64 / positioned.max(1) as f64,
            ),
            ("files read", files as f64),
            ("loading time per step, mean (s)", fetch_stats.mean),
        ],
        fetch,
    })
}

/// Cosine similarity of `a` and `b` after scaling each feature by the larger of its two
/// absolute values (features that are 0 on both sides count as equal).
pub fn scaled_cosine(a: &[f64], b: &[f64]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let m = x.abs().max(y.abs());
        let (x, y) = if m > 0.0 { (x / m, y / m) } else { (1.0, 1.0) };
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// 1 - the Kolmogorov-Smirnov distance between the empirical distributions of `a` and `b`
/// (1 when both are empty, 0 when only one is).
pub fn cdf_similarity(a: &[f64], b: &[f64]) -> f64 {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        _ => {}
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    1.0 - d
}

/// Scores the emulation's traces against the real program's.
pub fn fidelity(
    real: &Path,
    emulated: &Path,
    opts: &FidelityOptions,
) -> Result<Fidelity, AnalyzeError> {
    let r = measure(real, opts.real_data_dir.as_deref())?;
    let e = measure(emulated, opts.emulated_data_dir.as_deref())?;
    let rv: Vec<f64> = r.features.iter().map(|f| f.1).collect();
    let ev: Vec<f64> = e.features.iter().map(|f| f.1).collect();
    let features = r
        .features
        .iter()
        .zip(&e.features)
        .map(|(a, b)| Feature {
            name: a.0.to_string(),
            real: a.1,
            emulated: b.1,
        })
        .collect();
    Ok(Fidelity {
        cosine_similarity: scaled_cosine(&rv, &ev),
        end_to_end_error: (e.side.end_to_end_s - r.side.end_to_end_s).abs()
            / r.side.end_to_end_s.max(1e-9),
        fetch_cdf_similarity: cdf_similarity(&r.fetch, &e.fetch),
        features,
        real: r.side,
        emulated: e.side,
        real_fetch_times_s: r.fetch,
        emulated_fetch_times_s: e.fetch,
    })
}

/// The score for a terminal.
pub fn render_fidelity(f: &Fidelity) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "real: {} ({} steps, {:.3} s); emulated: {} ({} steps, {:.3} s)\n",
        f.real.data_dir,
        f.real.steps,
        f.real.end_to_end_s,
        f.emulated.data_dir,
        f.emulated.steps,
        f.emulated.end_to_end_s
    );
    let _ = writeln!(
        o,
        "{:<34} {:>16} {:>16} {:>8}",
        "feature", "real", "emulated", "ratio"
    );
    for x in &f.features {
        let ratio = if x.real != 0.0 {
            x.emulated / x.real
        } else {
            f64::NAN
        };
        let _ = writeln!(
            o,
            "{:<34} {:>16.6} {:>16.6} {:>8.3}",
            x.name, x.real, x.emulated, ratio
        );
    }
    let _ = writeln!(
        o,
        "\ncosine similarity {:.4}; end-to-end error {:.2}%; fetch-time CDF similarity {:.3}",
        f.cosine_similarity,
        f.end_to_end_error * 100.0,
        f.fetch_cdf_similarity
    );
    o
}

/// Writes `fidelity.json` into `out_dir` and returns its path.
pub fn write_fidelity(f: &Fidelity, out_dir: &Path) -> Result<PathBuf, AnalyzeError> {
    std::fs::create_dir_all(out_dir).map_err(|source| AnalyzeError::Io {
        op: "write",
        path: out_dir.to_path_buf(),
        source,
    })?;
    let path = out_dir.join("fidelity.json");
    let text = serde_json::to_vec_pretty(f).map_err(|e| AnalyzeError::Io {
        op: "write",
        path: path.clone(),
        source: e.into(),
    })?;
    crate::report::write(&path, &text)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_vectors_score_one_and_a_lost_feature_costs_its_share() {
        assert!((scaled_cosine(&[1.0, 2e9, 0.0], &[1.0, 2e9, 0.0]) - 1.0).abs() < 1e-12);
        // One of four features at half: (3 + 0.5) / (2 * sqrt(3.25)).
        let s = scaled_cosine(&[1.0, 1.0, 1.0, 2.0], &[1.0, 1.0, 1.0, 1.0]);
        assert!((s - 3.5 / (2.0 * 3.25f64.sqrt())).abs() < 1e-12, "{s}");
    }

    #[test]
    fn cdf_similarity_is_one_minus_the_ks_distance() {
        assert_eq!(cdf_similarity(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), 1.0);
        assert_eq!(cdf_similarity(&[1.0, 2.0], &[3.0, 4.0]), 0.0);
        // Half of a below everything of b: D = 0.5.
        assert_eq!(cdf_similarity(&[1.0, 5.0], &[4.0, 5.0]), 0.5);
        assert_eq!(cdf_similarity(&[], &[]), 1.0);
    }
}
