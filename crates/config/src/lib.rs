//! # dlio-config: the first stage of the pipeline
//!
//! ```text
//! command line ──load──▶ Config ──validate──▶ plan, storage, format, loader, trainer, metrics
//! ```
//!
//! This crate turns what the user typed — `workload=NAME` plus Hydra-style overrides such as
//! `++workload.reader.read_threads=8` — into a typed, checked [`Config`]. Every other crate
//! reads settings only from a `Config` (and shares the small enums of [`vocab`]), so this is
//! the one place that knows YAML, Hydra's grammar and DLIO's key names.
//!
//! The main items:
//!
//! - [`load`] ([`LoadArgs`] → [`Loaded`]): finds the workload (a `--config-dir` file, one of
//!   the 30 [`builtin_workloads`] (DLIO's 24 and 6 DLIO-paper presets), or a path), applies the overrides and returns the
//!   [`Config`] with the warnings for keys DLIO ignores. [`load_text`] does the same for
//!   YAML text.
//! - [`Config`]: one struct per YAML section; field names are DLIO's keys and defaults are
//!   DLIO's, so `config.reader.batch_size` is `reader.batch_size`. [`Config::validate`]
//!   applies DLIO's pre-run rules for a given number of ranks.
//! - [`Config::to_yaml`], [`Config::query`], [`workload_table`]: what `dlio config`,
//!   `dlio config --query` and `dlio workloads` print.
//! - [`ConfigError`]: every rejection names where the value came from (the file and line,
//!   or the override as typed) and says how to fix it; an unknown key comes with a
//!   "did you mean" suggestion.
//!
//! ## Why the API has this shape
//!
//! DLIO ignores unknown keys and reads a few keys under names that its own workloads do not
//! use, so typos and dead settings go unnoticed. Here every key is honoured, rejected, or
//! accepted with a warning that names the key DLIO really reads. To do that precisely, a
//! workload stays an untyped key tree until every override is applied (overrides can add
//! keys, replace sections, or turn a number into a distribution mapping); only then is it
//! converted, with each error carrying its key path, and the line is looked up in the text
//! only when a message needs it. The schema is the set of structs in this crate: adding a
//! key is adding a field with its default.
//!
//! ```
//! use dlio_config::{load, LoadArgs, Sampler};
//!
//! let loaded = load(&LoadArgs {
//!     positional: vec![
//!         "workload=unet3d_h100".into(),
//!         "++workload.reader.read_threads=8".into(),
//!         "++workload.train.computation_time.type=uniform".into(),
//!         "++workload.train.computation_time.min=0.3".into(),
//!         "++workload.train.computation_time.max=0.35".into(),
//!     ],
//!     config_dir: None,
//!     ..Default::default()
//! })?;
//! let config = &loaded.config;
//! assert_eq!(config.dataset.num_files_train, 168);
//! assert_eq!(config.reader.read_threads, 8);
//! assert_eq!(config.reader.sampler(), Sampler::Index);
//! assert_eq!(config.query("train.computation_time.max")?, "0.35");
//! // unet3d's `model.model_size` is ignored by DLIO too: one warning says so.
//! assert!(loaded.warnings[0].contains("model.model_size_bytes"));
//! assert!(config.validate(8)?.is_empty());
//! # Ok::<(), dlio_config::ConfigError>(())
//! ```

#![deny(missing_docs)]

mod builtin;
mod de;
mod error;
mod load;
mod output;
mod schema;
mod suggest;
mod tree;
mod validate;
// Public as a module too: other crates name `dlio_config::vocab::Sampler` and friends.
pub mod vocab;

/// The YAML value types of [`Loaded::composed`] and [`to_hydra_yaml`] (yaml_serde's).
pub mod yaml {
    pub use yaml_serde::{Mapping, Value};
}

pub use builtin::{
    BuiltinWorkload, WorkloadOrigin, builtin_names, builtin_workload, builtin_workloads,
};
pub use error::{ConfigError, Origin};
pub use load::{BUILTIN_SOURCE, LoadArgs, Loaded, load, load_text};
pub use output::{WorkloadRow, to_hydra_yaml, workload_row, workload_table};
pub use schema::{
    ArrowConfig, CheckpointConfig, CheckpointMode, Config, DataType, DatasetConfig,
    EvaluationConfig, Hdf5Config, IoEngine, KsmConfig, MetricConfig, ModelConfig,
    MultiprocessingContext, OutputConfig, OutputMetricConfig, ParallelismConfig, ParquetColumn,
    ParquetCompression, ParquetConfig, ParquetReadMode, Profiler, ProfilingConfig, ReadBuffer,
    ReaderConfig, RequestAnchor, SampleCompanion, SampleRequest, SampleRequestPattern, SideFile,
    SizesPer, StorageConfig, StorageOptions, StorageType, TrainConfig, TransferSizeWeight,
    TransformerConfig, WorkflowConfig,
};
pub use validate::check_columns;
pub use vocab::{
    Compression, DataLoaderKind, ElementType, FormatKind, Framework, LabelRead, MAX_SECONDS,
    PreprocessWork, ReadType, Sampler, Semantics, Shuffle, TimeDistribution, duration_from_seconds,
    register_engine_names, register_format_names,
};
