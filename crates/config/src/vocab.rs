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

/// `dataset.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FormatKind {
    /// NumPy `.npz` (zip of `x.npy` and `y.npy`).
    Npz,
    /// NumPy `.npy`.
    Npy,
    /// HDF5 (`records_*` datasets plus `labels`).
    Hdf5,
    /// CSV, one sample per row.
    Csv,
    /// One grayscale JPEG image per file.
    Jpeg,
    /// One grayscale PNG image per file.
    Png,
    /// TFRecord of `tf.train.Example`s.
    Tfrecord,
    /// Raw samples plus `.off.idx`/`.sz.idx` index files (Megatron/DLRM style).
    IndexedBinary,
    /// As `indexed_binary`, read through a memory map.
    MmapIndexedBinary,
    /// Tiny files; samples are made in memory without I/O.
    Synthetic,
    /// Parquet (MLPerf Storage forks; not in upstream DLIO).
    Parquet,
    /// Arrow IPC files of record batches (`arrow_ipc` too; MLPerf Storage's fork has it on a
    /// branch): storage measured without parquet's decode.
    #[serde(alias = "arrow_ipc")]
    Arrow,
    /// Accepted because upstream's enum has it; it has no generator or reader upstream either.
    Hdf5Opt,
}

impl FormatKind {
    /// The YAML spelling, which is also the file extension DLIO uses.
    pub fn name(self) -> &'static str {
        match self {
            FormatKind::Npz => "npz",
            FormatKind::Npy => "npy",
            FormatKind::Hdf5 => "hdf5",
            FormatKind::Csv => "csv",
            FormatKind::Jpeg => "jpeg",
            FormatKind::Png => "png",
            FormatKind::Tfrecord => "tfrecord",
            FormatKind::IndexedBinary => "indexed_binary",
            FormatKind::MmapIndexedBinary => "mmap_indexed_binary",
            FormatKind::Synthetic => "synthetic",
            FormatKind::Parquet => "parquet",
            FormatKind::Arrow => "arrow",
            FormatKind::Hdf5Opt => "hdf5_opt",
        }
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
