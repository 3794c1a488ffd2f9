//! Which samples each rank reads in each step: the access plan of a DLIO run.
//!
//! # Where it sits
//!
//! `config -> plan -> loader (storage + format) -> trainer -> metrics`. The plan is a pure,
//! deterministic function of ([`PlanSpec`], epoch, rank): it reads no file, no clock and no
//! environment, and it depends only on `dlio-config` (for the [`Shuffle`] and [`Sampler`]
//! vocabulary). The loader asks it what to read; the generator asks it what to write.
//!
//! # Map
//!
//! - [`PlanSpec`]: the inputs of one file list (train or eval), filled by the caller from the
//!   config and the listing. [`PlanSpec::validate`] rejects specs with no full step.
//! - [`trim`] / [`Trim`]: how many samples an epoch uses so that every rank runs the same
//!   number of steps (ranks that disagree would deadlock at the per-step barrier).
//! - [`EpochPlan`]: one rank's plan for one epoch. [`EpochPlan::batch`] gives step `s` as a
//!   [`Batch`], an iterator of [`SampleRef`] (file and index in file);
//!   [`EpochPlan::worker_for_step`] says which reader thread reads it.
//! - [`KeyedPermutation`]: the O(1)-memory random-access bijection behind both shuffles.
//! - [`generation_files`] and [`SampleDims`] / [`sample_dims`]: which files a rank generates
//!   and the sample shape of each file.
//!
//! # Why this shape
//!
//! A run may have 10^8 samples and 1,024 ranks, so nothing here holds a table per sample:
//! building an [`EpochPlan`] is O(1) in time and memory and computing any batch is O(batch).
//! Access is random (`batch(step)`) rather than one long iterator, so each reader thread can
//! compute its own steps without sharing state, and a [`Batch`] owns its (small, `Copy`) state
//! so it can be sent to the thread that reads it.
//!
//! A sample is found in four steps. Its read-order offset `k` in the rank's shard (from the
//! sampler) goes through the sample shuffle to a position `q` in the shard; the epoch
//! position is `p = rank * samples_per_rank + q`; file slot `p / spf` goes through the file
//! shuffle to a file, and `p % spf` is the index in that file.
//!
//! # Semantics, and where they differ from upstream DLIO
//!
//! - **Trimming** counts samples: `floor(T / (batch*P)) * batch*P` with `drop_last`, else
//!   `floor(T / P) * P`. Upstream trims the file count by a sample count and trains zero steps
//!   on most multi-sample workloads (bug B1).
//! - **Sharding**: rank `r` owns positions `[r*spr, (r+1)*spr)` of the epoch's order, as
//!   upstream, but `spr = used / P` after trimming, so all shards are equal.
//! - **Shuffle seed** of epoch `e`: `seed + e` with `seed_change_epoch`, else `seed`;
//!   [`Shuffle::Random`] uses `random_seed` (drawn once per run by the caller) in place of
//!   `seed`. Upstream seeds both modes with `train.seed`, so its `random` repeats across runs.
//!   The orders come from [`KeyedPermutation`], not NumPy, so they are not upstream's orders.
//! - **file_shuffle** permutes the file list each epoch (the same permutation on every rank,
//!   so shards stay disjoint) for both samplers. Upstream only consults it in iterative mode,
//!   so PyTorch/DALI runs never saw it (bug B4).
//! - **sample_shuffle** permutes the order inside the rank's own shard each epoch (never
//!   across ranks, as upstream). The key also mixes in the rank, so ranks do not all follow
//!   the same pattern. Upstream's PyTorch sampler reads in ascending order whatever the
//!   shuffle (bug B4).
//! - **sample_replacement** (ours) draws each offset of the rank's epoch uniformly from its
//!   own shard instead of permuting it, so samples repeat within an epoch, as PyTorch's
//!   `RandomSampler(replacement=True)`; the draw is a keyed hash of the offset (O(1), and the
//!   same on every machine).
//! - **Index sampler** (PyTorch, DALI): step `s` is offsets `s*b .. s*b+b` of the shard.
//! - **Iterative sampler** (tf.data): reader thread `t` of `n` owns the steps with
//!   `s % n == t` and walks its own contiguous chunk of the shard (chunks in thread order), so
//!   it reads each file sequentially and opens it once. Upstream picks the file from a local
//!   counter, so ranks above 0 re-read rank 0's files (bug B3), and it pads each thread's last
//!   batch; here chunks are sized in whole batches and only the shard's last batch may be
//!   short.
//! - **File-shards sampler** (tf.data over TFRecord, [`Sampler::FileShards`]): files are dealt
//!   round-robin to the ranks, as `Dataset.shard(P, r)` over the file list, or, with fewer files
//!   than ranks, every rank streams every file and keeps every `P`-th record. A rank's
//!   batches are consecutive runs of its record stream, whose files are read `read_threads` at a
//!   time with their records interleaved ([`RecordStreamPlan`]). Steps are set by the rank with
//!   the fewest records, so every rank runs the same number. The sample shuffle is tf.data's
//!   shuffle buffer, applied by the loader to the stream.
//! - **drop_last = false** leaves the shard's last batch short instead of padding it.
//! - **total_training_steps** caps the steps of every epoch; the remaining samples are not
//!   read that epoch, and the cap never moves a sample to another step.
//! - **Sample dimensions** are drawn per file from a hash instead of NumPy's global generator
//!   (see [`SampleDims`]): the same law, not the same numbers.
//!
//! # Example
//!
//! ```
//! use dlio_config::vocab::{Sampler, Shuffle};
//! use dlio_plan::{EpochPlan, PlanSpec, SampleRef};
//!
//! // 13 single-sample files, batches of 4, 3 ranks: upstream's uneven case.
//! let spec = PlanSpec {
//!     num_files: 13,
//!     samples_per_file: 1,
//!     batch_size: 4,
//!     world: 3,
//!     sampler: Sampler::Index,
//!     read_threads: 2,
//!     file_shuffle: Shuffle::Off,
//!     sample_shuffle: Shuffle::Off,
//!     sample_replacement: false,
//!     seed: 123,
//!     seed_change_epoch: true,
//!     random_seed: 0,
//!     total_training_steps: None,
//!     drop_last: true,
//! };
//! let trim = dlio_plan::trim(&spec);
//! assert_eq!((trim.used_samples, trim.samples_per_rank, trim.steps_per_rank), (12, 4, 1));
//!
//! let plan = EpochPlan::new(&spec, 1, 2)?; // epoch 1, rank 2
//! assert_eq!(plan.steps(), 1);
//! let files: Vec<u64> = plan.batch(0).map(|sample| sample.file).collect();
//! assert_eq!(files, [8, 9, 10, 11]); // rank 2 owns positions 8..12; file 12 is trimmed
//! assert_eq!(plan.worker_for_step(0), 0);
//!
//! // Shuffling files changes what rank 2 reads, and it changes every epoch.
//! let shuffled = PlanSpec { file_shuffle: Shuffle::Seed, ..spec };
//! let epoch1: Vec<SampleRef> = EpochPlan::new(&shuffled, 1, 2)?.samples().collect();
//! let epoch2: Vec<SampleRef> = EpochPlan::new(&shuffled, 2, 2)?.samples().collect();
//! assert_ne!(epoch1, epoch2);
//! # Ok::<(), dlio_plan::PlanError>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod epoch;
mod error;
mod generation;
mod permutation;
mod spec;

#[cfg(doc)]
use dlio_config::vocab::{Sampler, Shuffle};

pub use crate::{
    epoch::{Batch, EpochPlan, RecordStreamPlan, SampleRef},
    error::PlanError,
    generation::{GenerationFiles, SampleDims, generation_files, sample_dims},
    permutation::KeyedPermutation,
    spec::{PlanSpec, Trim, trim},
};
