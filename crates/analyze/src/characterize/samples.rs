//! What a sample is: the data files, their sizes and format, whether a sample is a whole file
//! or a slice of one, how many there are and how many epochs read them.

use std::collections::{HashMap, HashSet};

use super::requests::size_shares;
use super::trace_view::{DataSet, burst_of};
use super::{Activity, Found, SizeShare, Stats};
use crate::ingest::Rec;
use crate::timeline::Timeline;

/// What the samples section found.
pub(super) struct Samples<'t> {
    /// A sample is a whole file (each opening read within one step), else a slice of one.
    pub whole_files: bool,
    /// The data files' sizes.
    pub file_sizes: Stats,
    /// Data files read.
    pub num_files: u64,
    /// The request sizes of the data reads, most frequent first.
    pub shares: Vec<SizeShare>,
    /// The most frequent request size.
    pub dominant: u64,
    /// One event per sample read: the file's opening, or the slice's read.
    pub events: Vec<&'t Rec>,
    /// Samples in the data set (files times samples per file).
    pub in_data_set: u64,
    /// How many times the data set was read.
    pub epochs: u64,
}

/// The samples section: `dataset.*` (format, files, samples per file, record length and
/// shape) and `semantics` where samples are slices of files DLIO's readers read per sample.
pub(super) fn samples<'t>(
    t: &Timeline,
    data: &DataSet,
    activity: &Activity<'t>,
) -> (Samples<'t>, Found) {
    let mut found = Found::default();
    let (reads, opens) = (&activity.reads, &activity.opens);
    let whole_files = whole_files_read(data, activity);

    let sizes: Vec<f64> = data
        .files
        .iter()
        .map(|f| data.totals.get(f).map_or(0, |t| t.size) as f64)
        .collect();
    let file_sizes = Stats::of(&sizes);
    let num_files = data.files.len() as u64;
    let dataset_bytes: f64 = sizes.iter().sum();
    let shares = size_shares(reads);
    let dominant = shares.first().map_or(0, |s| s.size);
    let sample_file = data.files.iter().next().map(|f| t.path(*f));
    let (format, format_evidence) = format_of(&data.extension, sample_file, whole_files);

    // Per sample: which burst, which thread; and the epochs' visiting orders.
    let sample_events: Vec<&Rec> = if whole_files {
        opens.clone()
    } else {
        reads
            .iter()
            .copied()
            .filter(|r| r.bytes as u64 == dominant)
            .collect()
    };
    let samples_per_file = if whole_files {
        1
    } else {
        ((file_sizes.median / dominant.max(1) as f64).round() as u64).max(1)
    };
    let samples_in_data_set = (num_files * samples_per_file).max(1);
    let epochs = ((sample_events.len() as f64 / samples_in_data_set as f64).round() as u64).max(1);
    // The mean, not the median: dlio's generator draws sizes around `record_length_bytes`
    // as their mean, and a skewed set of files (lognormal sizes) loses bytes to the median.
    let record_length = if whole_files {
        sample_bytes_for_file(format, file_sizes.mean.round() as u64)
    } else {
        dominant
    };
    let record_stdev = if whole_files { file_sizes.stdev } else { 0.0 };

    found.param("dataset.format", format.into(), format_evidence);
    found.param(
        "dataset.num_files_train",
        num_files.to_string(),
        format!(
            "{num_files} files of .{} under {} were read ({} bytes in all)",
            data.extension, data.dir, dataset_bytes as u64
        ),
    );
    if data.subfolders > 1 {
        found.param(
            "dataset.num_subfolders_train",
            data.subfolders.to_string(),
            format!(
                "the files sit in {} folders under {} (class folders), read interleaved",
                data.subfolders, data.dir
            ),
        );
    }
    found.param(
        "dataset.num_samples_per_file",
        samples_per_file.to_string(),
        if whole_files {
            "each opening of a data file is read within one step: a sample is a file".into()
        } else {
            format!(
                "files of {} bytes (median) read in requests of {dominant} bytes across many \
                 steps: a sample is one such slice",
                file_sizes.median as u64
            )
        },
    );
    found.param(
        "dataset.record_length_bytes",
        record_length.to_string(),
        if whole_files {
            format!(
                "mean file size {} bytes (median {}){}",
                file_sizes.mean.round() as u64,
                file_sizes.median as u64,
                size_note(format)
            )
        } else {
            format!(
                "the most frequent data read is {dominant} bytes ({} of {} reads)",
                shares[0].count,
                reads.len()
            )
        },
    );
    if record_stdev > 0.0 {
        let bins: Vec<SizeShare> = size_bins(sizes.iter().map(|&s| s as u64))
            .into_iter()
            .map(|b| SizeShare {
                size: sample_bytes_for_file(format, b.size),
                count: b.count,
            })
            .collect();
        found.param(
            "dataset.record_length_bytes_distribution",
            bins.iter()
                .map(|s| format!("{{size: {}, weight: {}}}", s.size, s.count))
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "file sizes range from {} to {} bytes (mean {}, stdev {}){}: the generated \
                 files take the measured sizes, in {} equal shares of the files, rather than \
                 a normal law's draws",
                file_sizes.min as u64,
                file_sizes.max as u64,
                file_sizes.mean.round() as u64,
                record_stdev.round() as u64,
                size_note(format),
                bins.len()
            ),
        );
    } else if whole_files {
        found.param(
            "dataset.record_dims",
            format!("[{record_length}]"),
            "every data file has the same size: one dimension keeps the generated files exactly \
             that size"
                .to_string(),
        );
    } else {
        found.param(
            "dataset.record_dims",
            format!("[{record_length}]"),
            "one dimension of the slice's size: the generated samples are exactly that size \
             (dlio's default shape, a square, would round it down)"
                .to_string(),
        );
    }
    if !whole_files && matches!(format, "npz" | "npy" | "hdf5" | "jpeg" | "png") {
        found.param(
            "semantics",
            "upstream".into(),
            format!(
                "samples are slices of {format} files: DLIO's own readers read each sample's \
                 bytes, where MLPerf's fork (dlio's default) reads every byte of a file at each \
                 sample"
            ),
        );
    }

    (
        Samples {
            whole_files,
            file_sizes,
            num_files,
            shares,
            dominant,
            events: sample_events,
            in_data_set: samples_in_data_set,
            epochs,
        },
        found,
    )
}

/// Whether a sample is a whole file: each opening's reads stay within one burst (in nine files
/// of ten), or no pauses separate the steps at all.
fn whole_files_read(data: &DataSet, activity: &Activity) -> bool {
    let Activity {
        reads,
        opens,
        bursts,
        paused,
        ..
    } = activity;
    let paused = *paused;
    // Samples: whole files when every opening's reads stay within one burst.
    let mut bursts_per_file: HashMap<u64, HashSet<usize>> = HashMap::new();
    for r in reads.iter() {
        bursts_per_file
            .entry(r.file)
            .or_default()
            .insert(burst_of(bursts, r.start));
    }
    let within_one = data
        .files
        .iter()
        .filter(|f| {
            let touched = bursts_per_file.get(f).map_or(0, HashSet::len) as u64;
            let opened = data.totals.get(f).map_or(0, |t| t.opens);
            touched <= opened.max(1)
        })
        .count();
    let whole_files = !paused || within_one * 10 >= data.files.len() * 9;
    whole_files && !opens.is_empty()
}

/// `reader.read_type: memory` when slices are read from files kept open across samples.
pub(super) fn read_type(activity: &Activity, samples: &Samples) -> Found {
    let mut found = Found::default();
    let (opens, events) = (activity.opens.len() as u64, samples.events.len() as u64);
    if !samples.whole_files && opens * 2 < events {
        found.param(
            "reader.read_type",
            "memory".into(),
            format!(
                "{opens} openings of data files for {events} slice reads: files stay open across \
                 samples"
            ),
        );
    }
    found
}

/// The format a data file's extension (and, when it is still there, its first bytes) says.
fn format_of(extension: &str, sample: Option<&str>, whole_files: bool) -> (&'static str, String) {
    let magic = sample.and_then(|p| {
        let mut head = [0u8; 8];
        use std::io::Read;
        let n = std::fs::File::open(p)
            .and_then(|mut f| f.read(&mut head))
            .ok()?;
        Some(head[..n].to_vec())
    });
    let by_magic = magic
        .as_deref()
        .and_then(dlio_format::format_by_magic)
        .map(|d| d.kind.name());
    let by_name = dlio_format::format_by_extension(extension).map(|d| d.kind.name());
    let seen = match (&magic, by_magic) {
        (Some(_), Some(f)) => format!("the files' first bytes are {f}'s"),
        (Some(_), None) => "the files' first bytes match no known format".to_string(),
        (None, _) => "the files are no longer there to look inside".to_string(),
    };
    match by_magic.or(by_name) {
        Some(f) => (f, format!("extension .{extension}; {seen}")),
        // Raw bytes: read whole, npy's reader (which reads every byte without decoding under
        // MLPerf's semantics) moves the same bytes; read in slices, indexed_binary reads each
        // sample with one positioned read.
        None if whole_files => (
            "npy",
            format!(
                "extension .{extension} and {seen}: raw bytes read whole, emulated by npy files \
                 of the same size (128 bytes of header, the rest data)"
            ),
        ),
        None => (
            "indexed_binary",
            format!(
                "extension .{extension} and {seen}: raw bytes read in slices, emulated by \
                 indexed_binary (one positioned read per sample)"
            ),
        ),
    }
}

/// Bytes dlio's generator adds around one sample of `record_dims: [n]` uint8 in a file of the
/// format, so that the generated files get the traced files' size.
fn header_bytes(format: &str) -> u64 {
    match format {
        // The .npy header of a 1-D array.
        "npy" => 128,
        // x.npy (header and data) and DLIO's y.npy labels in a stored zip: local headers,
        // central directory, end record.
        "npz" => 483,
        _ => 0,
    }
}

/// The sample bytes (`record_length_bytes`, or pixels for images) that make dlio generate a
/// file of `file_bytes` in `format`: less the header its files hold besides the sample, or
/// the pixel count whose encoded noise image has that size (found by three corrections of the
/// encoder's ratio, which varies slowly with the size).
fn sample_bytes_for_file(format: &str, file_bytes: u64) -> u64 {
    let image = dlio_format::FORMATS
        .iter()
        .find(|d| d.kind.name() == format)
        .map(|d| d.kind)
        .filter(|&k| dlio_format::generated_image_bytes(k, 64).is_some());
    let Some(kind) = image else {
        return file_bytes.saturating_sub(header_bytes(format)).max(1);
    };
    let mut pixels = file_bytes.max(1);
    for _ in 0..3 {
        let Some(bytes) = dlio_format::generated_image_bytes(kind, pixels).filter(|&b| b > 0)
        else {
            break;
        };
        pixels = ((pixels as f64 * file_bytes as f64 / bytes as f64).round() as u64).max(1);
    }
    pixels
}

/// What the evidence says of how sample bytes were made from file sizes.
fn size_note(format: &str) -> String {
    match (header_bytes(format), format) {
        (0, "jpeg" | "png") => format!(
            ", as the pixels whose noise image dlio's {format} encoder writes in a file of that \
             size"
        ),
        (0, _) => String::new(),
        (h, _) => format!(
            ", less the {h} bytes dlio's {format} files hold besides the sample (so that the \
             generated files have this size)"
        ),
    }
}

/// Sizes in at most [`MAX_SIZES`](super::MAX_SIZES) equal-count bins, each at its sizes' mean
/// (every size as it is when there are no more than that): the total of the sizes is kept,
/// and their shape (lognormal, bimodal) to one bin's resolution.
fn size_bins(sizes: impl Iterator<Item = u64>) -> Vec<SizeShare> {
    let mut sorted: Vec<u64> = sizes.collect();
    sorted.sort_unstable();
    let mut distinct: Vec<SizeShare> = Vec::new();
    for &s in &sorted {
        match distinct.last_mut() {
            Some(last) if last.size == s => last.count += 1,
            _ => distinct.push(SizeShare { size: s, count: 1 }),
        }
    }
    if distinct.len() <= super::MAX_SIZES {
        return distinct;
    }
    let n = sorted.len();
    let bins = super::MAX_SIZES;
    (0..bins)
        .map(|b| {
            let part = &sorted[b * n / bins..(b + 1) * n / bins];
            SizeShare {
                size: (part.iter().map(|&s| u128::from(s)).sum::<u128>()
                    / part.len().max(1) as u128) as u64,
                count: part.len() as u64,
            }
        })
        .filter(|s| s.count > 0)
        .collect()
}
