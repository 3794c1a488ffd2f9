//! The inputs of a plan ([`PlanSpec`]) and equal-steps trimming ([`trim`]).

use dlio_config::vocab::{Sampler, Shuffle};

use crate::PlanError;

/// Everything the plan of one file list (train or eval) depends on.
///
/// The caller fills it from the validated config and the listed files; the plan never reads
/// the config itself, so it can be built and tested without YAML. There is no `Default`: each
/// field is a decision the caller must make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanSpec {
    /// Files in the list (after listing and truncation to the configured count).
    pub num_files: u64,
    /// `dataset.num_samples_per_file` (at least 1).
    pub samples_per_file: u64,
    /// `reader.batch_size` (or `reader.batch_size_eval`), at least 1.
    pub batch_size: u64,
    /// Number of ranks `P`, at least 1.
    pub world: u32,
    /// [`Sampler::Index`] (PyTorch, DALI) or [`Sampler::Iterative`] (tf.data).
    pub sampler: Sampler,
    /// `reader.read_threads`; 0 means the rank reads on its own thread, which partitions work
    /// exactly like 1 thread.
    pub read_threads: u32,
    /// `reader.file_shuffle`.
    pub file_shuffle: Shuffle,
    /// `reader.sample_shuffle`.
    pub sample_shuffle: Shuffle,
    /// `reader.sample_replacement` (ours): each offset of a rank's epoch draws its sample
    /// uniformly from the rank's shard, independently of the others, so a sample can come
    /// several times in one epoch and others not at all (PyTorch's
    /// `RandomSampler(replacement=True)`). Needs a `sample_shuffle` (its seed and epoch rule
    /// key the draws) and an index sampler.
    pub sample_replacement: bool,
    /// `train.seed` (DLIO's default is 123): the seed of [`Shuffle::Seed`].
    pub seed: u64,
    /// `train.seed_change_epoch`: the shuffle seed of epoch `e` is `seed + e` when true.
    pub seed_change_epoch: bool,
    /// The seed of [`Shuffle::Random`], drawn once per run by the caller (and recorded in the
    /// run's outputs so the run can be replayed). The epoch rule applies to it too.
    pub random_seed: u64,
    /// `train.total_training_steps` as a per-epoch step cap; `None` reads every step.
    pub total_training_steps: Option<u64>,
    /// True: every batch is full and leftover samples are not read. False: the last batch of
    /// each rank may be short (never padded).
    pub drop_last: bool,
}

impl PlanSpec {
    /// Checks that the spec describes at least one full step on every rank.
    ///
    /// [`EpochPlan::new`](crate::EpochPlan::new) calls this, so callers only need it to report
    /// problems early (for example before generating data).
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.samples_per_file == 0 {
            return Err(PlanError::ZeroSamplesPerFile);
        }
        if self.batch_size == 0 {
            return Err(PlanError::ZeroBatchSize);
        }
        if self.world == 0 {
            return Err(PlanError::ZeroWorld);
        }
        if self.total_training_steps == Some(0) {
            return Err(PlanError::ZeroStepCap);
        }
        if self.sample_replacement && self.sample_shuffle == Shuffle::Off {
            return Err(PlanError::ReplacementWithoutShuffle);
        }
        if self.sample_replacement && self.sampler == Sampler::FileShards {
            return Err(PlanError::ReplacementInFileShards);
        }
        let Some(total_samples) = self.num_files.checked_mul(self.samples_per_file) else {
            return Err(PlanError::TooManySamples {
                num_files: self.num_files,
                samples_per_file: self.samples_per_file,
            });
        };
        if trim(self).used_samples == 0 {
            return Err(PlanError::TooFewSamples {
                total_samples,
                num_files: self.num_files,
                samples_per_file: self.samples_per_file,
                world: self.world,
                needed: self.samples_per_step_of_all_ranks(),
            });
        }
        Ok(())
    }

    /// Reader threads used for partitioning: `read_threads`, with 0 counted as 1.
    pub fn reader_threads(&self) -> u32 {
        self.read_threads.max(1)
    }

    /// The granule the sample count is trimmed to: `batch * P` with `drop_last`, else `P`.
    fn samples_per_step_of_all_ranks(&self) -> u128 {
        let world = u128::from(self.world.max(1));
        if self.drop_last {
            u128::from(self.batch_size.max(1)) * world
        } else {
            world
        }
    }
}

/// How many samples an epoch uses so that every rank runs the same number of steps.
///
/// DLIO (#339) trims the *file* count by a *sample* count, which trims most multi-sample
/// workloads to zero files (upstream bug B1); this trims samples instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Trim {
    /// Samples in the dataset: `num_files * samples_per_file`.
    pub total_samples: u64,
    /// Samples sharded between the ranks: `floor(T / (batch*P)) * batch*P` with `drop_last`,
    /// else `floor(T / P) * P`. The rest are never read.
    pub used_samples: u64,
    /// Samples in each rank's shard: `used_samples / P`.
    pub samples_per_rank: u64,
    /// Steps each rank runs per epoch, already capped by `total_training_steps`.
    pub steps_per_rank: u64,
}

impl Trim {
    /// Samples each rank actually reads per epoch: its shard, or fewer when the step cap stops
    /// the epoch early.
    pub fn samples_read_per_rank(&self, batch_size: u64) -> u64 {
        let capped = u128::from(self.steps_per_rank) * u128::from(batch_size.max(1));
        u64::try_from(capped).map_or(self.samples_per_rank, |c| c.min(self.samples_per_rank))
    }
}

/// Trims the sample count to whole steps on every rank (see [`Trim`]).
///
/// Never panics: on a spec that [`PlanSpec::validate`] rejects it returns whatever the
/// arithmetic gives (0 used samples for an empty or too small dataset, and `u64::MAX`
/// samples when `num_files * samples_per_file` overflows).
pub fn trim(spec: &PlanSpec) -> Trim {
    if spec.sampler == Sampler::FileShards {
        return trim_file_shards(spec);
    }
    let total = u128::from(spec.num_files) * u128::from(spec.samples_per_file);
    let granule = spec.samples_per_step_of_all_ranks();
    let world = u128::from(spec.world.max(1));
    let batch = u128::from(spec.batch_size.max(1));
    let used = total / granule * granule;
    let per_rank = used / world;
    let mut steps = per_rank.div_ceil(batch);
    if let Some(cap) = spec.total_training_steps {
        steps = steps.min(u128::from(cap));
    }
    let clamp = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    Trim {
        total_samples: clamp(total),
        used_samples: clamp(used),
        samples_per_rank: clamp(per_rank),
        steps_per_rank: clamp(steps),
    }
}

/// [`trim`] for [`Sampler::FileShards`]: every rank reads the records of its own files (files
/// dealt round-robin, so rank `r` has `ceil((F - r) / P)` of them), or, with fewer files than
/// ranks, every `P`-th record of the whole stream. The step count is set by the rank with the
/// fewest records, `floor(F / P) * spf` (or `floor(F * spf / P)`), so every rank runs the same
/// steps; the others leave their surplus records unread.
fn trim_file_shards(spec: &PlanSpec) -> Trim {
    let files = u128::from(spec.num_files);
    let spf = u128::from(spec.samples_per_file);
    let world = u128::from(spec.world.max(1));
    let batch = u128::from(spec.batch_size.max(1));
    let total = files * spf;
    let fewest = if files >= world {
        files / world * spf
    } else {
        total / world
    };
    let per_rank = if spec.drop_last {
        fewest / batch * batch
    } else {
        fewest
    };
    let mut steps = per_rank.div_ceil(batch);
    if let Some(cap) = spec.total_training_steps {
        steps = steps.min(u128::from(cap));
    }
    let clamp = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    Trim {
        total_samples: clamp(total),
        used_samples: clamp(per_rank * world),
        samples_per_rank: clamp(per_rank),
        steps_per_rank: clamp(steps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(num_files: u64, spf: u64, batch: u64, world: u32, drop_last: bool) -> PlanSpec {
        PlanSpec {
            num_files,
            samples_per_file: spf,
            batch_size: batch,
            world,
            sampler: Sampler::Index,
            read_threads: 1,
            file_shuffle: Shuffle::Off,
            sample_shuffle: Shuffle::Off,
            sample_replacement: false,
            seed: 123,
            seed_change_epoch: true,
            random_seed: 0,
            total_training_steps: None,
            drop_last,
        }
    }

    #[test]
    fn file_shards_are_trimmed_to_the_rank_with_the_fewest_records() {
        let mut s = spec(7, 2, 2, 3, true);
        s.sampler = Sampler::FileShards;
        // Ranks hold 3, 2 and 2 files: 4 records each are read, 2 steps.
        let t = trim(&s);
        assert_eq!(
            (t.samples_per_rank, t.steps_per_rank, t.used_samples),
            (4, 2, 12)
        );
        // 2 files, 3 ranks: every rank keeps every third of 10 records, 3 each.
        let mut s = spec(2, 5, 1, 3, true);
        s.sampler = Sampler::FileShards;
        let t = trim(&s);
        assert_eq!((t.samples_per_rank, t.steps_per_rank), (3, 3));
        // 5 files x 3 records, batch 1, 2 ranks: rank 1's 2 files give 6 steps (not 7).
        let mut s = spec(5, 3, 1, 2, true);
        s.sampler = Sampler::FileShards;
        assert_eq!(trim(&s).steps_per_rank, 6);
    }

    #[test]
    fn trimming_counts_samples_not_files() {
        // resnet50-like: 1251 samples per file would have trimmed upstream to 0 files.
        let t = trim(&spec(1024, 1251, 400, 8, true));
        assert_eq!(t.total_samples, 1_281_024);
        assert_eq!(t.used_samples, 1_280_000);
        assert_eq!(t.samples_per_rank, 160_000);
        assert_eq!(t.steps_per_rank, 400);
    }

    #[test]
    fn without_drop_last_only_the_rank_count_is_trimmed() {
        let t = trim(&spec(10, 1, 4, 3, false));
        assert_eq!(t.used_samples, 9);
        assert_eq!(t.samples_per_rank, 3);
        assert_eq!(t.steps_per_rank, 1);
        let t = trim(&spec(10, 1, 2, 3, false));
        assert_eq!(t.steps_per_rank, 2);
    }

    #[test]
    fn step_cap_limits_steps_and_samples_read() {
        let mut s = spec(100, 1, 5, 2, true);
        s.total_training_steps = Some(3);
        let t = trim(&s);
        assert_eq!(t.samples_per_rank, 50);
        assert_eq!(t.steps_per_rank, 3);
        assert_eq!(t.samples_read_per_rank(5), 15);
        s.total_training_steps = Some(1000);
        assert_eq!(trim(&s).steps_per_rank, 10);
    }

    #[test]
    fn validate_names_each_problem() {
        assert_eq!(
            spec(4, 0, 1, 1, true).validate(),
            Err(PlanError::ZeroSamplesPerFile)
        );
        assert_eq!(
            spec(4, 1, 0, 1, true).validate(),
            Err(PlanError::ZeroBatchSize)
        );
        assert_eq!(spec(4, 1, 1, 0, true).validate(), Err(PlanError::ZeroWorld));
        let mut capped = spec(4, 1, 1, 1, true);
        capped.total_training_steps = Some(0);
        assert_eq!(capped.validate(), Err(PlanError::ZeroStepCap));
        assert!(matches!(
            spec(u64::MAX, 2, 1, 1, true).validate(),
            Err(PlanError::TooManySamples { .. })
        ));
        let too_few = spec(5, 1, 2, 3, true).validate();
        assert_eq!(
            too_few,
            Err(PlanError::TooFewSamples {
                total_samples: 5,
                num_files: 5,
                samples_per_file: 1,
                world: 3,
                needed: 6
            })
        );
        let message = too_few.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("needs 6"), "{message}");
        assert!(message.contains("lower the batch size"), "{message}");
        assert!(matches!(
            spec(0, 1, 1, 1, true).validate(),
            Err(PlanError::TooFewSamples {
                total_samples: 0,
                needed: 1,
                ..
            })
        ));
        assert_eq!(spec(6, 1, 2, 3, true).validate(), Ok(()));
    }

    #[test]
    fn trim_never_panics_on_invalid_specs() {
        let t = trim(&spec(u64::MAX, u64::MAX, 0, 0, true));
        assert_eq!(t.total_samples, u64::MAX);
        assert_eq!(t.used_samples, u64::MAX);
        let t = trim(&spec(0, 0, 0, 0, false));
        assert_eq!(
            t,
            Trim {
                total_samples: 0,
                used_samples: 0,
                samples_per_rank: 0,
                steps_per_rank: 0
            }
        );
    }
}
