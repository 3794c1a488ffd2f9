//! The small vocabulary types that every pipeline stage shares.
//!
//! They live in the config crate because the config is the root of the dependency graph:
//! the plan, formats, loader and trainer all speak in these terms, and none of them may
//! depend on each other just to name an element type.

use serde::{Deserialize, Serialize};

/// NumPy element type of a sample (`dataset.record_element_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ElementType {
    /// `uint8` (1 byte).
    #[default]
    Uint8,
    /// `int8` (1 byte).
    Int8,
    /// `int16` (2 bytes).
    Int16,
    /// `int32` (4 bytes).
    Int32,
    /// `int64` (8 bytes).
    Int64,
    /// `uint16` (2 bytes).
    Uint16,
    /// `uint32` (4 bytes).
    Uint32,
    /// `uint64` (8 bytes).
    Uint64,
    /// `bool` (1 byte, NumPy's: 0 is False, any other byte True).
    Bool,
    /// `float16` (2 bytes).
    Float16,
    /// `float32` (4 bytes).
    Float32,
    /// `float64` (8 bytes).
    Float64,
}

impl ElementType {
    /// Every element type, in the order the docs list them.
    pub const ALL: [ElementType; 12] = [
        ElementType::Uint8,
        ElementType::Int8,
        ElementType::Int16,
        ElementType::Int32,
        ElementType::Int64,
        ElementType::Uint16,
        ElementType::Uint32,
        ElementType::Uint64,
        ElementType::Bool,
        ElementType::Float16,
        ElementType::Float32,
        ElementType::Float64,
    ];

    /// Bytes per element (NumPy's `itemsize`).
    pub fn size(self) -> usize {
        match self {
            ElementType::Uint8 | ElementType::Int8 | ElementType::Bool => 1,
            ElementType::Int16 | ElementType::Uint16 | ElementType::Float16 => 2,
            ElementType::Int32 | ElementType::Uint32 | ElementType::Float32 => 4,
            ElementType::Int64 | ElementType::Uint64 | ElementType::Float64 => 8,
        }
    }

    /// The name as written in YAML and by NumPy (`uint8`, `float32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ElementType::Uint8 => "uint8",
            ElementType::Int8 => "int8",
            ElementType::Int16 => "int16",
            ElementType::Int32 => "int32",
            ElementType::Int64 => "int64",
            ElementType::Uint16 => "uint16",
            ElementType::Uint32 => "uint32",
            ElementType::Uint64 => "uint64",
            ElementType::Bool => "bool",
            ElementType::Float16 => "float16",
            ElementType::Float32 => "float32",
            ElementType::Float64 => "float64",
        }
    }

    /// The NumPy array-protocol type string in little-endian order (`|u1`, `<f4`, ...).
    pub fn numpy_descr(self) -> &'static str {
        match self {
            ElementType::Uint8 => "|u1",
            ElementType::Int8 => "|i1",
            ElementType::Int16 => "<i2",
            ElementType::Int32 => "<i4",
            ElementType::Int64 => "<i8",
            ElementType::Uint16 => "<u2",
            ElementType::Uint32 => "<u4",
            ElementType::Uint64 => "<u8",
            ElementType::Bool => "|b1",
            ElementType::Float16 => "<f2",
            ElementType::Float32 => "<f4",
            ElementType::Float64 => "<f8",
        }
    }
}

/// `dataset.format`: a format's name. The formats themselves (what they generate and read,
/// their aliases and checks) are rows of the format crate's table, each declared in the
/// format's own file; config keeps the name. A binary registers the table's names
/// ([`register_format_names`]) before loading a workload, so that a misspelt format is refused
/// with its file, line and the names there are, before any format code runs; without them any
/// name is taken, for the table to refuse. The constants name the formats config itself
/// refers to, and every format dlio had when the table was made (a new format needs none:
/// its descriptor says `FormatKind::new("name")`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FormatKind(&'static str);

#[allow(non_upper_case_globals)]
impl FormatKind {
    /// NumPy `.npz` (zip of `x.npy` and `y.npy`).
    pub const Npz: FormatKind = FormatKind("npz");
    /// NumPy `.npy`.
    pub const Npy: FormatKind = FormatKind("npy");
    /// HDF5 (`records_*` datasets plus `labels`).
    pub const Hdf5: FormatKind = FormatKind("hdf5");
    /// CSV, one sample per row.
    pub const Csv: FormatKind = FormatKind("csv");
    /// One grayscale JPEG image per file.
    pub const Jpeg: FormatKind = FormatKind("jpeg");
    /// One grayscale PNG image per file.
    pub const Png: FormatKind = FormatKind("png");
    /// TFRecord of `tf.train.Example`s.
    pub const Tfrecord: FormatKind = FormatKind("tfrecord");
    /// Raw samples plus `.off.idx`/`.sz.idx` index files (Megatron/DLRM style).
    pub const IndexedBinary: FormatKind = FormatKind("indexed_binary");
    /// As `indexed_binary`, read through a memory map.
    pub const MmapIndexedBinary: FormatKind = FormatKind("mmap_indexed_binary");
    /// Tiny files; samples are made in memory without I/O.
    pub const Synthetic: FormatKind = FormatKind("synthetic");
    /// Parquet (MLPerf Storage forks; not in upstream DLIO).
    pub const Parquet: FormatKind = FormatKind("parquet");
    /// Arrow IPC files of record batches.
    pub const Arrow: FormatKind = FormatKind("arrow");
    /// Accepted because upstream's enum has it; it has no generator or reader upstream either.
    pub const Hdf5Opt: FormatKind = FormatKind("hdf5_opt");

    /// The format named `name` (its YAML spelling, which is also the file extension DLIO
    /// uses): what a format's descriptor declares itself as.
    pub const fn new(name: &'static str) -> FormatKind {
        FormatKind(name)
    }

    /// The YAML spelling, which is also the file extension DLIO uses.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Debug for FormatKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::fmt::Display for FormatKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The names (with their aliases) a binary's table of formats or engines has, once
/// registered, and the names alone, for an error to list.
pub(crate) struct Registry {
    names: std::sync::OnceLock<(Vec<NameWithAliases>, Vec<&'static str>)>,
}

/// A registered name and its aliases.
type NameWithAliases = (&'static str, &'static [&'static str]);

impl Registry {
    const fn new() -> Registry {
        Registry {
            names: std::sync::OnceLock::new(),
        }
    }
}

/// The formats' names, once registered.
pub(crate) static FORMAT_NAMES: Registry = Registry::new();
/// The engines' names, once registered.
pub(crate) static ENGINE_NAMES: Registry = Registry::new();

/// `name` as the registry spells it (an alias resolved), or the names there are when it is
/// none of them; with none registered, `name` itself.
pub(crate) fn registered_name(
    registry: &'static Registry,
    name: &str,
) -> Result<&'static str, &'static [&'static str]> {
    // Names are read in any case, as DLIO's users write them (`NPZ`).
    let name = name.to_ascii_lowercase();
    let name = name.as_str();
    match registry.names.get() {
        Some((known, names)) => known
            .iter()
            .find(|(n, aliases)| *n == name || aliases.contains(&name))
            .map(|(n, _)| *n)
            .ok_or(names.as_slice()),
        None => Ok(intern(name)),
    }
}

/// Registers the names (and aliases) of the formats there are: `dataset.format` is then
/// checked against them when a workload is loaded. The first registration stays.
pub fn register_format_names(names: Vec<(&'static str, &'static [&'static str])>) {
    let plain = names.iter().map(|(n, _)| *n).collect();
    let _ = FORMAT_NAMES.names.set((names, plain));
}

/// Registers the names of the engines `storage.io_engine` may name (as
/// [`register_format_names`] does for formats).
pub fn register_engine_names(names: Vec<&'static str>) {
    let with_aliases = names
        .iter()
        .map(|n| (*n, &[] as &'static [&'static str]))
        .collect();
    let _ = ENGINE_NAMES.names.set((with_aliases, names));
}

/// `name` as a `&'static str`, each distinct name allocated once (names no table registered:
/// a library's own formats or engines, or a test's).
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.iter().find(|n| **n == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(leaked);
    leaked
}

impl Serialize for FormatKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for FormatKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        registered_name(&FORMAT_NAMES, &name)
            .map(FormatKind)
            .map_err(|allowed| serde::de::Error::unknown_variant(&name, allowed))
    }
}

/// `dataset.compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip (hdf5 filter, csv `.gz`).
    Gzip,
    /// LZF (hdf5 filter).
    Lzf,
    /// bzip2 (csv).
    Bz2,
    /// zip (npz: `savez_compressed`; csv).
    Zip,
    /// xz (csv).
    Xz,
    /// Snappy (parquet column chunks).
    Snappy,
    /// Zstandard (parquet column chunks).
    Zstd,
    /// LZ4 (parquet column chunks).
    Lz4,
}

/// `reader.file_shuffle` and `reader.sample_shuffle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Shuffle {
    /// Access order is the natural order.
    #[default]
    Off,
    /// Shuffled with `train.seed` (+ epoch when `seed_change_epoch`): the same order on every run.
    Seed,
    /// Shuffled with a seed drawn once per run (recorded in the outputs so a run can be replayed).
    Random,
}

/// Whose semantics a run follows where MLPerf Storage's DLIO fork and argonne upstream DLIO
/// differ (top-level `semantics`, ours; also `dlio run --semantics` and `DLIO_SEMANTICS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Semantics {
    /// The fork MLPerf Storage v3 pins (mlcommons/DLIO_local_changes): readers read every byte
    /// of a file and decode nothing, parquet is read by row group and column, and where a
    /// workload name exists in both, the MLPerf Storage v3 file is the built-in one.
    #[default]
    Mlperf,
    /// argonne upstream DLIO 2.0: readers decode what they read (`np.load`, PIL, h5py
    /// hyperslabs, TFRecord protobufs), parquet files are read whole, and built-in workload
    /// names resolve to DLIO's own files first.
    Upstream,
}

impl Semantics {
    /// The spelling in YAML, on the command line and in `DLIO_SEMANTICS`.
    pub fn as_str(self) -> &'static str {
        match self {
            Semantics::Mlperf => "mlperf",
            Semantics::Upstream => "upstream",
        }
    }

    /// Parses `mlperf` or `upstream` (any case).
    pub fn parse(text: &str) -> Option<Semantics> {
        match text.trim().to_ascii_lowercase().as_str() {
            "mlperf" | "fork" => Some(Semantics::Mlperf),
            "upstream" | "argonne" => Some(Semantics::Upstream),
            _ => None,
        }
    }

    /// True when readers decode samples (upstream); false when they only read bytes (MLPerf).
    pub fn decodes(self) -> bool {
        self == Semantics::Upstream
    }
}

/// `reader.read_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReadType {
    /// Open, read and close the file for every sample (DLIO's default).
    #[default]
    OnDemand,
    /// Keep files open (and parsed) across samples.
    Memory,
}

/// `reader.preprocess_work` (ours): what a sample's `preprocess_time` is spent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PreprocessWork {
    /// The reader thread sleeps (DLIO's preprocess).
    #[default]
    Sleep,
    /// The reader thread keeps its core busy for that long, as the decoding or interpreter
    /// work the time stands for does: it competes for cores as that work would, and times
    /// shorter than a sleep's slack (about 50 us) are kept.
    Cpu,
    /// The rank's reader threads keep a core busy for that long one at a time, taking turns
    /// on a lock they share, as a CPython process's threads take turns on its interpreter (the
    /// global interpreter lock); their reads are made outside it, as CPython releases the lock
    /// around a read.
    Gil,
}

/// `dataset.hdf5.label_read` (ours): what a sample's read takes of the `labels` dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LabelRead {
    /// Nothing (DLIO's readers write the labels and never read them).
    #[default]
    None,
    /// The sample's label alone, one element.
    Element,
    /// From the sample's label to the end of the labels (at most 64 KiB): h5py reading
    /// `labels[i]` of a contiguous dataset it opened for that access fills its sieve buffer
    /// that way.
    ToEnd,
}

/// `framework`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    /// TensorFlow.
    #[default]
    Tensorflow,
    /// PyTorch.
    Pytorch,
}

/// `reader.data_loader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DataLoaderKind {
    /// tf.data pipeline (iterative sampler).
    #[default]
    Tensorflow,
    /// PyTorch `DataLoader` (index sampler).
    Pytorch,
    /// DALI pipeline over DLIO's readers (index sampler).
    Dali,
    /// DALI's own readers.
    NativeDali,
    /// No I/O: yields zero tensors.
    Synthetic,
    /// A DLIO plugin class (`reader.data_loader_classname`): Python, which dlio cannot load;
    /// accepted for runs that read no data set, as DLIO only fails when it builds the loader.
    Custom,
    /// No data loader: DLIO's enum value, for runs that read no data set (generation,
    /// checkpoint-only); a run that reads is refused, as DLIO refuses it.
    None,
}

/// How a loader hands samples to its reader threads (`reader.data_loader_sampler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampler {
    /// PyTorch/DALI: a sampler yields sample indices; each read opens the file (`on_demand`).
    Index,
    /// tf.data: each reader thread walks its own list of samples, opening each file once.
    Iterative,
    /// tf.data over TFRecord files (`TFRecordDataset`): files are dealt round-robin to the
    /// ranks (records, when there are fewer files than ranks), streamed, interleaved over the
    /// reader threads and shuffled in a buffer. Chosen by [`crate::Config::sampler`] for the
    /// tensorflow loader on tfrecord files; not a `reader.data_loader_sampler` value.
    #[serde(skip)]
    FileShards,
}

/// A time that is slept: `train.computation_time`, `evaluation.eval_time`,
/// `reader.preprocess_time`, in seconds. Draws are made by the trainer/loader; the slept
/// time is the absolute value of the draw, as in DLIO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum TimeDistribution {
    /// Always the same value.
    Constant {
        /// Seconds.
        value: f64,
    },
    /// Normal(mean, stdev).
    Normal {
        /// Mean, in seconds.
        mean: f64,
        /// Standard deviation, in seconds.
        stdev: f64,
    },
    /// Uniform in [min, max).
    Uniform {
        /// Lower bound, in seconds.
        min: f64,
        /// Upper bound, in seconds.
        max: f64,
    },
    /// Gamma(shape, scale).
    Gamma {
        /// Shape k.
        shape: f64,
        /// Scale θ, in seconds.
        scale: f64,
    },
    /// Exponential with the given scale (mean).
    Exponential {
        /// Scale (the mean), in seconds.
        scale: f64,
    },
    /// Poisson(lam), in seconds.
    Poisson {
        /// Rate λ (the mean), in seconds.
        lam: f64,
    },
    /// Ours: a measured distribution given by its evenly spaced quantiles (the first the
    /// smallest value, the last the largest), drawn by interpolating between the two around a
    /// uniform draw. `dlio characterize` writes it for times that one law does not describe
    /// (steps whose compute depends on what the batch holds).
    Quantiles {
        /// Seconds, in increasing order.
        values: Vec<f64>,
    },
    /// Ours: a measured sample, the times themselves: every run of as many draws as there are
    /// values takes each value once, in a seeded random order, so that a replay of as many
    /// steps as the program's pauses spends exactly their sum. `dlio characterize` writes it
    /// for a few dozen pauses, where quantiles interpolated between would halve the weight of
    /// the largest (one slow first step) and shorten the run.
    Empirical {
        /// Seconds, in any order.
        values: Vec<f64>,
    },
}

impl Default for TimeDistribution {
    fn default() -> Self {
        TimeDistribution::Constant { value: 0.0 }
    }
}

impl TimeDistribution {
    /// The mean of the distribution, in seconds (used for the "set value" log line and
    /// for deciding whether any sleep is needed at all).
    pub fn mean(&self) -> f64 {
        match *self {
            TimeDistribution::Constant { value } => value.abs(),
            TimeDistribution::Normal { mean, .. } => mean,
            TimeDistribution::Uniform { min, max } => (min + max) / 2.0,
            TimeDistribution::Gamma { shape, scale } => shape * scale,
            TimeDistribution::Exponential { scale } => scale,
            TimeDistribution::Poisson { lam } => lam,
            TimeDistribution::Quantiles { ref values } => quantiles_mean(values),
            TimeDistribution::Empirical { ref values } => {
                values.iter().sum::<f64>() / values.len().max(1) as f64
            }
        }
    }

    /// True when every draw is exactly zero (nothing to sleep).
    pub fn is_zero(&self) -> bool {
        matches!(*self, TimeDistribution::Constant { value } if value == 0.0)
    }

    /// The parameters, named as in YAML, with the bound each must stay within: times in
    /// seconds within [`MAX_SECONDS`], a gamma shape only through the mean it gives.
    pub fn parameters(&self) -> Vec<(&'static str, f64)> {
        match *self {
            TimeDistribution::Constant { value } => vec![("value", value)],
            TimeDistribution::Normal { mean, stdev } => vec![("mean", mean), ("stdev", stdev)],
            TimeDistribution::Uniform { min, max } => vec![("min", min), ("max", max)],
            TimeDistribution::Gamma { shape, scale } => vec![("shape", shape), ("scale", scale)],
            TimeDistribution::Exponential { scale } => vec![("scale", scale)],
            TimeDistribution::Poisson { lam } => vec![("lam", lam)],
            TimeDistribution::Quantiles { ref values }
            | TimeDistribution::Empirical { ref values } => {
                values.iter().map(|&v| ("values", v)).collect()
            }
        }
    }
}

/// The mean of the piecewise-linear distribution through evenly spaced quantiles: each
/// stretch between two neighbours holds the same share and averages their midpoint.
pub fn quantiles_mean(values: &[f64]) -> f64 {
    match values {
        [] => 0.0,
        [only] => *only,
        _ => {
            values.windows(2).map(|w| (w[0] + w[1]) / 2.0).sum::<f64>() / (values.len() - 1) as f64
        }
    }
}

/// The value at `u` (in [0, 1]) of the piecewise-linear distribution through evenly spaced
/// quantiles `values` (increasing): `u` of the way from the first to the last, interpolated
/// between the two values around it. 0 when there are none.
pub fn quantile_at(values: &[f64], u: f64) -> f64 {
    match values {
        [] => 0.0,
        [only] => *only,
        _ => {
            let at = u.clamp(0.0, 1.0) * (values.len() - 1) as f64;
            let i = (at.floor() as usize).min(values.len() - 2);
            let t = at - i as f64;
            values[i] + (values[i + 1] - values[i]) * t
        }
    }
}

/// The longest time, in seconds, a config may ask a rank to sleep or wait (about 31.7
/// years): longer values are refused at validation, naming the key, rather than overflowing
/// the clock mid-run.
pub const MAX_SECONDS: f64 = 1e9;

/// `seconds` as a `Duration`, saturating: negative or NaN is zero, beyond what a `Duration`
/// holds is `Duration::MAX`. For times from the config, which validation bounds anyway.
pub fn duration_from_seconds(seconds: f64) -> std::time::Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::try_from_secs_f64(seconds).unwrap_or(std::time::Duration::MAX)
}
