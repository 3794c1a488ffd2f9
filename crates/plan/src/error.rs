//! The one error type of the plan crate.

/// Why a [`PlanSpec`](crate::PlanSpec) cannot be turned into an [`EpochPlan`](crate::EpochPlan).
///
/// Every message names the setting at fault and says how to fix it. The plan does no I/O, so
/// there are no paths or offsets here: the caller knows which list (train or eval) it planned
/// and adds that context when it reports the error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// `dataset.num_samples_per_file` is 0.
    #[error(
        "dataset.num_samples_per_file is 0: every file must hold at least one sample; \
         set dataset.num_samples_per_file to 1 or more"
    )]
    ZeroSamplesPerFile,

    /// The batch size is 0.
    #[error(
        "the batch size is 0: set reader.batch_size (or reader.batch_size_eval for \
         evaluation) to 1 or more"
    )]
    ZeroBatchSize,

    /// The number of ranks is 0.
    #[error("the number of ranks is 0: a run needs at least one rank")]
    ZeroWorld,

    /// `train.total_training_steps` asks for 0 steps.
    #[error(
        "train.total_training_steps is 0, which would read nothing: give a positive step \
         cap, or -1 (no cap) to read every step"
    )]
    ZeroStepCap,

    /// `reader.sample_replacement` without a sample shuffle to key its draws.
    #[error(
        "reader.sample_replacement is True but reader.sample_shuffle is off: draws with \
         replacement are random; set reader.sample_shuffle to seed (the same draws every run) \
         or random (new draws every run)"
    )]
    ReplacementWithoutShuffle,

    /// `reader.sample_replacement` with tf.data's record streams, which read files in order.
    #[error(
        "reader.sample_replacement is True with the tf.data TFRecord pipeline \
         (data_loader_sampler: file_shards), which streams whole files and cannot draw a \
         record twice; remove reader.sample_replacement or read through \
         data_loader_sampler: index"
    )]
    ReplacementInFileShards,

    /// `num_files * samples_per_file` does not fit in 64 bits.
    #[error(
        "{num_files} files x {samples_per_file} samples per file is more than 2^64 samples; \
         lower dataset.num_files_train/num_files_eval or dataset.num_samples_per_file"
    )]
    TooManySamples {
        /// Files in the list.
        num_files: u64,
        /// Samples per file.
        samples_per_file: u64,
    },

    /// The dataset is too small for every rank to run even one step.
    #[error(
        "the dataset has {total_samples} samples ({num_files} files x {samples_per_file} \
         per file) but one step on each of {world} ranks needs {needed}; add files \
         (dataset.num_files_train/num_files_eval), lower the batch size or run fewer ranks"
    )]
    TooFewSamples {
        /// Samples in the dataset.
        total_samples: u64,
        /// Files in the list.
        num_files: u64,
        /// Samples per file.
        samples_per_file: u64,
        /// Number of ranks.
        world: u32,
        /// Samples one step on every rank needs (`batch * world` with `drop_last`, else `world`).
        needed: u128,
    },

    /// The rank is not below the number of ranks.
    #[error("rank {rank} does not exist in a run of {world} ranks (ranks are 0..{world})")]
    RankOutOfRange {
        /// The rank asked for.
        rank: u32,
        /// Number of ranks.
        world: u32,
    },

    /// Epochs are numbered from 1, as in DLIO's logs and checkpoint names.
    #[error("epoch 0 does not exist: epochs are numbered from 1")]
    EpochZero,
}
