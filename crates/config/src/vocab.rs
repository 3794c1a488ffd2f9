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
    #[default]
    Uint8,
    Int8,
    Int16,
    Int32,
    Int64,
    Float16,
    Float32,
    Float64,
}

impl ElementType {
    /// Every element type, in the order the docs list them.
    pub const ALL: [ElementType; 8] = [
        ElementType::Uint8,
        ElementType::Int8,
        ElementType::Int16,
        ElementType::Int32,
        ElementType::Int64,
        ElementType::Float16,
        ElementType::Float32,
        ElementType::Float64,
    ];

    /// Bytes per element (NumPy's `itemsize`).
    pub fn size(self) -> usize {
        match self {
            ElementType::Uint8 | ElementType::Int8 => 1,
            ElementType::Int16 | ElementType::Float16 => 2,
            ElementType::Int32 | ElementType::Float32 => 4,
            ElementType::Int64 | ElementType::Float64 => 8,
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
    Npz,
    Npy,
    Hdf5,
    Csv,
    Jpeg,
    Png,
    Tfrecord,
    IndexedBinary,
    MmapIndexedBinary,
    Synthetic,
    Parquet,
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
            FormatKind::Hdf5Opt => "hdf5_opt",
        }
    }
}

/// `dataset.compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Lzf,
    Bz2,
    Zip,
    Xz,
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

/// `framework`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    #[default]
    Tensorflow,
    Pytorch,
}

/// `reader.data_loader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DataLoaderKind {
    #[default]
    Tensorflow,
    Pytorch,
    Dali,
    NativeDali,
    Synthetic,
}

/// How a loader hands samples to its reader threads (`reader.data_loader_sampler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampler {
    /// PyTorch/DALI: a sampler yields sample indices; each read opens the file (`on_demand`).
    Index,
    /// tf.data: each reader thread walks its own list of samples, opening each file once.
    Iterative,
}

/// A time that is slept: `train.computation_time`, `evaluation.eval_time`,
/// `reader.preprocess_time`, in seconds. Draws are made by the trainer/loader; the slept
/// time is the absolute value of the draw, as in DLIO.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum TimeDistribution {
    /// Always the same value.
    Constant { value: f64 },
    /// Normal(mean, stdev).
    Normal { mean: f64, stdev: f64 },
    /// Uniform in [min, max).
    Uniform { min: f64, max: f64 },
    /// Gamma(shape, scale).
    Gamma { shape: f64, scale: f64 },
    /// Exponential with the given scale (mean).
    Exponential { scale: f64 },
    /// Poisson(lam), in seconds.
    Poisson { lam: f64 },
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
}
