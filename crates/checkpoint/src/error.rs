//! The one error type of the checkpoint crate.

use std::path::PathBuf;

use dlio_storage::StorageError;

/// Everything that can go wrong while sizing, writing or reading a checkpoint. Validation
/// variants carry the numbers that clashed and name the config keys to change; I/O variants
/// name the file and how far the transfer got.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A datatype name is not one DLIO knows.
    #[error("{key}: unknown datatype `{value}`; use one of fp16, bf16, fp32, fp64, int8, uint8")]
    UnknownDatatype {
        /// The config key (`model.model_datatype` or `model.optimizer_datatype`).
        key: String,
        /// What was given.
        value: String,
    },

    /// The number of ranks is zero.
    #[error("a checkpoint needs at least one rank, got a world of 0 ranks")]
    EmptyWorld,

    /// Tensor or pipeline parallelism is zero.
    #[error("model.parallelism.{key} is 0; it must be at least 1")]
    ZeroParallelism {
        /// `tensor` or `pipeline`.
        key: &'static str,
    },

    /// ZeRO stage outside 0..=3.
    #[error("model.parallelism.zero_stage is {stage}; DeepSpeed ZeRO stages are 0, 1, 2 and 3")]
    InvalidZeroStage {
        /// The stage given.
        stage: u32,
    },

    /// Default mode: the world is not a whole number of model-parallel groups.
    #[error(
        "{world} ranks is not a multiple of tensor x pipeline parallelism = {tensor} x {pipeline} = {model_parallel}; \
         run a multiple of {model_parallel} ranks, or set checkpoint.mode: subset with model.parallelism.data \
         to emulate part of a larger job"
    )]
    WorldNotMultipleOfModelParallel {
        /// Ranks in the run.
        world: u32,
        /// Tensor parallelism.
        tensor: u32,
        /// Pipeline parallelism.
        pipeline: u32,
        /// Their product.
        model_parallel: u64,
    },

    /// Default mode with an explicit data parallelism.
    #[error(
        "model.parallelism.data is {data}, but in checkpoint.mode: default it is derived from the number of ranks; \
         remove it, or set checkpoint.mode: subset"
    )]
    DataParallelismInDefaultMode {
        /// The value given.
        data: i64,
    },

    /// Subset mode without a target data parallelism.
    #[error(
        "checkpoint.mode: subset needs the data parallelism of the emulated job: set model.parallelism.data \
         to a positive number (it is {data})"
    )]
    SubsetWithoutDataParallelism {
        /// The value given.
        data: i64,
    },

    /// Subset mode with more ranks than the emulated job has.
    #[error(
        "{world} ranks is more than the emulated job has: data x tensor x pipeline = {data} x {tensor} x {pipeline} = {job_ranks}; \
         run at most {job_ranks} ranks or raise model.parallelism.data"
    )]
    SubsetLargerThanJob {
        /// Ranks in the run.
        world: u32,
        /// Data parallelism.
        data: u64,
        /// Tensor parallelism.
        tensor: u32,
        /// Pipeline parallelism.
        pipeline: u32,
        /// Their product.
        job_ranks: u64,
    },

    /// ZeRO-3 shards parameters over data-parallel ranks, which DLIO does not combine with pipelines.
    #[error(
        "ZeRO stage 3 is not compatible with pipeline parallelism (model.parallelism.pipeline is {pipeline}); \
         set pipeline: 1 or use zero_stage 0, 1 or 2"
    )]
    PipelineWithZero3 {
        /// Pipeline parallelism.
        pipeline: u32,
    },

    /// Fewer transformer layers than pipeline stages.
    #[error(
        "model.num_layers ({num_layers}) must be at least model.parallelism.pipeline ({pipeline}): \
         every pipeline stage needs a layer"
    )]
    TooFewLayers {
        /// Transformer layers.
        num_layers: i64,
        /// Pipeline stages.
        pipeline: u32,
    },

    /// A transformer without attention heads (the head size would divide by zero).
    #[error(
        "model.transformer.num_attention_heads is 0 with {num_layers} layers; it must be at least 1"
    )]
    NoAttentionHeads {
        /// Transformer layers.
        num_layers: i64,
    },

    /// The sizes do not fit in 64 bits.
    #[error(
        "the checkpoint of this model is larger than 2^64 bytes; check model.transformer.*, model.num_layers, \
         model.model_size_bytes, model.optimization_groups and model.layer_parameters"
    )]
    SizeOverflow,

    /// A rank outside the plan's world.
    #[error("rank {rank} is not in the checkpoint plan, which has {world} ranks (0..{world})")]
    RankOutOfRange {
        /// The rank asked for.
        rank: u32,
        /// Ranks in the plan.
        world: u32,
    },

    /// `recovery_rank_shift` with zero ranks per node.
    #[error("checkpoint.recovery_rank_shift needs the number of ranks per node, got 0")]
    NoRanksPerNode,

    /// The transfer chunk is too small to hold one element of every datatype.
    #[error("the checkpoint I/O chunk must be a positive multiple of 8 bytes, got {bytes}")]
    InvalidChunkSize {
        /// The size asked for.
        bytes: usize,
    },

    /// The checkpoint directory could not be created.
    #[error("cannot create checkpoint directory: {source}")]
    CreateDir {
        /// What the storage engine said (it names the path).
        source: Box<StorageError>,
    },

    /// Writing one file failed (disk full, permissions...). The partial file is removed.
    #[error(
        "writing checkpoint file {path} failed after {written} of {expected} bytes (the partial file was removed): {source}",
        path = path.display()
    )]
    Write {
        /// The file.
        path: PathBuf,
        /// Bytes handed to the storage before the failure.
        written: u64,
        /// The file's planned size.
        expected: u64,
        /// What the storage engine said.
        source: Box<StorageError>,
    },

    /// Reading one file failed.
    #[error(
        "reading checkpoint file {path} failed after {read} of {expected} bytes: {source}",
        path = path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Bytes read before the failure.
        read: u64,
        /// The file's planned size.
        expected: u64,
        /// What the storage engine said.
        source: Box<StorageError>,
    },

    /// A checkpoint file on storage does not have the planned size.
    #[error(
        "checkpoint file {path} has {found} bytes but the plan expects {expected}; it was written with a \
         different model, parallelism or world size: write the checkpoint again with this configuration",
        path = path.display()
    )]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// Planned size.
        expected: u64,
        /// Size on storage.
        found: u64,
    },
}
