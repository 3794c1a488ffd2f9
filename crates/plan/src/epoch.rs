//! One rank's plan for one epoch ([`EpochPlan`]) and the batches it hands out ([`Batch`]).

use std::iter::FusedIterator;

use dlio_config::vocab::{Sampler, Shuffle};

use crate::permutation::{KeyedPermutation, mix};
use crate::{PlanError, PlanSpec, Trim, trim};

/// Domain separators, so the file and sample shuffles never share a key.
const FILE_SHUFFLE_PURPOSE: u64 = 0x6669_6C65_5F73_6866; // "file_shf"
const SAMPLE_SHUFFLE_PURPOSE: u64 = 0x736D_706C_5F73_6866; // "smpl_shf"

/// One sample to read: which file, and which sample inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleRef {
    /// Dataset-wide sample id: `file * samples_per_file + index_in_file`.
    pub global: u64,
    /// Index of the file in the (sorted) file list.
    pub file: u64,
    /// Index of the sample inside its file.
    pub index_in_file: u64,
}

/// The O(1) state that maps a rank's read-order offset to a sample.
///
/// Offsets run over `[0, samples_per_rank)` in the order the rank reads them; the batches of
/// both samplers are contiguous runs of offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ShardMap {
    /// Set for [`Sampler::FileShards`]: positions are read-order offsets in the rank's record
    /// stream, not positions in the epoch's global order.
    stream: Option<StreamShape>,
    /// First position of this rank in the epoch's global order: `rank * samples_per_rank`.
    rank_start: u64,
    samples_per_file: u64,
    /// Maps offsets into the rank's shard (`reader.sample_shuffle`, `sample_replacement`).
    sample_order: Option<SampleOrder>,
    /// Permutes the file list (`reader.file_shuffle`); the same on every rank.
    file_order: Option<KeyedPermutation>,
}

/// How a rank's read-order offsets map onto positions in its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SampleOrder {
    /// Every position once, in a keyed order (`reader.sample_shuffle`).
    Permuted(KeyedPermutation),
    /// Every offset an independent, uniform draw of the `len` positions
    /// (`reader.sample_replacement`): a keyed hash of the offset, scaled to the range by a
    /// 128-bit multiply, which is unbiased to within `len / 2^64`.
    Drawn { len: u64, key: u64 },
}

impl SampleOrder {
    fn apply(&self, offset: u64) -> u64 {
        match *self {
            SampleOrder::Permuted(order) => order.apply(offset),
            SampleOrder::Drawn { len, key } => {
                let scaled = (u128::from(mix(key, offset)) * u128::from(len)) >> 64;
                // Below `len`, a u64, so the conversion cannot fail.
                u64::try_from(scaled).unwrap_or(0)
            }
        }
    }
}

/// The record stream of one rank under [`Sampler::FileShards`] (tf.data's TFRecord pipeline):
/// the rank's files (slots `phase_file, phase_file + file_step, ...` of the file list) are read
/// `cycle` at a time, their records interleaved one by one (`TFRecordDataset` with
/// `num_parallel_reads = cycle`); the rank keeps every `record_step`-th record of that stream
/// from `record_phase` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StreamShape {
    num_files: u64,
    world: u32,
    rank: u32,
    cycle: u32,
}

impl StreamShape {
    fn new(spec: &PlanSpec, rank: u32) -> StreamShape {
        StreamShape {
            num_files: spec.num_files,
            world: spec.world.max(1),
            rank,
            cycle: spec.reader_threads(),
        }
    }

    /// True when the files are dealt to the ranks (at least as many files as ranks).
    fn dealt(&self) -> bool {
        self.num_files >= u64::from(self.world)
    }

    /// Files in the rank's stream.
    fn files(&self) -> u64 {
        if self.dealt() {
            (self.num_files - u64::from(self.rank)).div_ceil(u64::from(self.world))
        } else {
            self.num_files
        }
    }

    /// The file-list slot of the rank's `local`-th file.
    fn slot(&self, local: u64) -> u64 {
        if self.dealt() {
            u64::from(self.rank) + local * u64::from(self.world)
        } else {
            local
        }
    }

    /// `(step, phase)`: the rank keeps stream records `phase + k * step`.
    fn keep_every(&self) -> (u64, u64) {
        if self.dealt() {
            (1, 0)
        } else {
            (u64::from(self.world), u64::from(self.rank))
        }
    }

    /// (index in the rank's file list, record) of stream position `q`.
    fn locate(&self, q: u64, samples_per_file: u64) -> (u64, u64) {
        let cycle = u64::from(self.cycle.max(1));
        let group_records = cycle * samples_per_file;
        let group = q / group_records;
        let within = q % group_records;
        let in_group = cycle.min(self.files().saturating_sub(group * cycle)).max(1);
        (group * cycle + within % in_group, within / in_group)
    }
}

impl ShardMap {
    fn sample_at(&self, offset: u64) -> SampleRef {
        self.sample_at_with(offset, &mut None)
    }

    /// The file of list slot `slot`: the file order's image of it, remembered in `last` for
    /// the next sample, which is most often of the same slot (samples in file order).
    fn file_of(&self, slot: u64, last: &mut Option<(u64, u64)>) -> u64 {
        match *last {
            Some((s, file)) if s == slot => file,
            _ => {
                let file = self.file_order.map_or(slot, |order| order.apply(slot));
                *last = Some((slot, file));
                file
            }
        }
    }

    /// [`sample_at`](Self::sample_at), with the last slot's file remembered in `last`.
    fn sample_at_with(&self, offset: u64, last: &mut Option<(u64, u64)>) -> SampleRef {
        if let Some(stream) = &self.stream {
            let (step, phase) = stream.keep_every();
            let q = phase + offset * step;
            let (local, index_in_file) = stream.locate(q, self.samples_per_file);
            let slot = stream.slot(local);
            let file = self.file_of(slot, last);
            return SampleRef {
                global: file * self.samples_per_file + index_in_file,
                file,
                index_in_file,
            };
        }
        let in_shard = self
            .sample_order
            .map_or(offset, |order| order.apply(offset));
        let position = self.rank_start + in_shard;
        let slot = position / self.samples_per_file;
        let index_in_file = position % self.samples_per_file;
        let file = self.file_of(slot, last);
        SampleRef {
            global: file * self.samples_per_file + index_in_file,
            file,
            index_in_file,
        }
    }
}

/// Which samples one rank reads in each step of one epoch.
///
/// Built in O(1) time and memory from a [`PlanSpec`]; [`batch`](Self::batch) is O(batch
/// size). It is small and `Copy`, so each reader thread can hold its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochPlan {
    map: ShardMap,
    trim: Trim,
    epoch: u32,
    rank: u32,
    sampler: Sampler,
    batch_size: u64,
    reader_threads: u32,
    /// Steps of the whole shard, before the `total_training_steps` cap. The sampler layout is
    /// computed from these, so a cap only cuts the epoch short and never moves a sample.
    shard_steps: u64,
}

impl EpochPlan {
    /// The plan of `rank` (0-based) in `epoch` (1-based, as DLIO counts them).
    pub fn new(spec: &PlanSpec, epoch: u32, rank: u32) -> Result<EpochPlan, PlanError> {
        spec.validate()?;
        if epoch == 0 {
            return Err(PlanError::EpochZero);
        }
        if rank >= spec.world {
            return Err(PlanError::RankOutOfRange {
                rank,
                world: spec.world,
            });
        }
        let trim = trim(spec);
        let samples_per_rank = trim.samples_per_rank;
        let file_order = shuffle_key(spec, spec.file_shuffle, epoch, FILE_SHUFFLE_PURPOSE)
            .map(|key| KeyedPermutation::new(spec.num_files, key));
        let file_shards = spec.sampler == Sampler::FileShards;
        // File shards: the sample shuffle is tf.data's shuffle buffer, which the loader applies
        // to the stream (it is sequential, not a permutation of the shard).
        // Draws with replacement come from the rank's share of the whole data set, the
        // samples trimming left out included (a sampler draws from all of its data set); the
        // epoch still makes as many draws as the trimmed shard holds.
        let share = if spec.sample_replacement {
            trim.total_samples / u64::from(spec.world.max(1))
        } else {
            samples_per_rank
        };
        let sample_order = shuffle_key(spec, spec.sample_shuffle, epoch, SAMPLE_SHUFFLE_PURPOSE)
            .filter(|_| !file_shards)
            .map(|key| {
                let key = mix(key, u64::from(rank));
                if spec.sample_replacement {
                    SampleOrder::Drawn { len: share, key }
                } else {
                    SampleOrder::Permuted(KeyedPermutation::new(samples_per_rank, key))
                }
            });
        Ok(EpochPlan {
            map: ShardMap {
                stream: file_shards.then(|| StreamShape::new(spec, rank)),
                rank_start: u64::from(rank) * share,
                samples_per_file: spec.samples_per_file,
                sample_order,
                file_order,
            },
            trim,
            epoch,
            rank,
            sampler: spec.sampler,
            batch_size: spec.batch_size,
            reader_threads: spec.reader_threads(),
            shard_steps: samples_per_rank.div_ceil(spec.batch_size),
        })
    }

    /// Steps this rank runs in this epoch; the same on every rank.
    pub fn steps(&self) -> u64 {
        self.trim.steps_per_rank
    }

    /// The samples of step `step` (0-based), in the order they are handed to the trainer.
    ///
    /// Every batch holds `batch_size` samples except the shard's last one without
    /// `drop_last`, which may be shorter. A step at or after [`steps`](Self::steps) gives an
    /// empty batch.
    pub fn batch(&self, step: u64) -> Batch {
        let len = self.batch_len(step);
        let first = if len == 0 { 0 } else { self.first_offset(step) };
        Batch {
            map: self.map,
            step,
            first,
            len,
            front: 0,
            back: len,
            last: None,
        }
    }

    /// Number of samples in step `step` (0 at or after [`steps`](Self::steps)).
    pub fn batch_len(&self, step: u64) -> u64 {
        if step >= self.steps() {
            0
        } else if step + 1 == self.shard_steps {
            self.trim.samples_per_rank - step * self.batch_size
        } else {
            self.batch_size
        }
    }

    /// The reader thread that reads step `step`: `step % max(read_threads, 1)`. Batches go
    /// round-robin to reader threads, as PyTorch workers and tf.data's interleave do.
    pub fn worker_for_step(&self, step: u64) -> u32 {
        // The remainder is below `reader_threads`, a u32, so the conversion cannot fail.
        u32::try_from(step % u64::from(self.reader_threads)).unwrap_or(0)
    }

    /// All samples of this rank, in step order.
    pub fn samples(&self) -> impl Iterator<Item = SampleRef> + '_ {
        (0..self.steps()).flat_map(|step| self.batch(step))
    }

    /// The files this rank reads in this epoch, in no particular order: those of its shard,
    /// each once; when `total_training_steps` cuts the epoch short, those of the samples it
    /// reads, in their order (a file may then come more than once). A manifest's names are read
    /// for these only.
    pub fn files(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        let map = &self.map;
        let file = move |slot: u64| map.file_order.map_or(slot, |order| order.apply(slot));
        if let Some(stream) = &map.stream {
            return Box::new((0..stream.files()).map(move |i| file(stream.slot(i))));
        }
        if self.steps() < self.shard_steps {
            let mut last = None;
            return Box::new(self.samples().filter_map(move |sample| {
                (last.replace(sample.file) != Some(sample.file)).then_some(sample.file)
            }));
        }
        let positions = self.trim.samples_per_rank;
        if positions == 0 {
            return Box::new(std::iter::empty());
        }
        let spf = map.samples_per_file.max(1);
        let first = map.rank_start / spf;
        let last = (map.rank_start + positions - 1) / spf;
        Box::new((first..=last).map(file))
    }

    /// The epoch's equal-steps trimming (the same on every rank).
    pub fn trim(&self) -> Trim {
        self.trim
    }

    /// The epoch this plan is for (1-based).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The rank this plan is for.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Reader threads the steps are spread over (`read_threads`, 0 counted as 1).
    pub fn reader_threads(&self) -> u32 {
        self.reader_threads
    }

    /// The sampler the plan was made for.
    pub fn sampler(&self) -> Sampler {
        self.sampler
    }

    /// For [`Sampler::FileShards`], the rank's record stream: its batches are runs of this
    /// stream in order (before tf.data's shuffle buffer, which the loader applies).
    /// `None` for the other samplers.
    pub fn stream(&self) -> Option<RecordStreamPlan> {
        let stream = self.map.stream?;
        Some(RecordStreamPlan {
            stream,
            file_order: self.map.file_order,
            samples_per_file: self.map.samples_per_file,
            records: self.trim.samples_read_per_rank(self.batch_size),
        })
    }

    /// Offset (in the rank's read order) of the first sample of step `step < shard_steps`.
    fn first_offset(&self, step: u64) -> u64 {
        match self.sampler {
            Sampler::Index | Sampler::FileShards => step * self.batch_size,
            Sampler::Iterative => self.iterative_first_offset(step),
        }
    }

    /// tf.data style: thread `t` owns the steps `s` with `s % n == t` and walks its own
    /// contiguous chunk of the shard; chunks are laid out in thread order. Step `s` is the
    /// `(s / n)`-th batch of thread `s % n`'s chunk.
    fn iterative_first_offset(&self, step: u64) -> u64 {
        let threads = u128::from(self.reader_threads);
        let batch = u128::from(self.batch_size);
        let shard_steps = u128::from(self.shard_steps);
        let thread = u128::from(step) % threads;
        let batch_in_thread = u128::from(step) / threads;
        // Steps owned by threads 0..thread: each owns shard_steps / n, and the first
        // shard_steps % n threads own one more.
        let steps_before = thread * (shard_steps / threads) + thread.min(shard_steps % threads);
        // Only the shard's last step can be short; it belongs to thread (shard_steps-1) % n,
        // and every chunk after that thread's starts earlier by the missing samples.
        let last_thread = (shard_steps - 1) % threads;
        let last_len = u128::from(self.trim.samples_per_rank) - (shard_steps - 1) * batch;
        let shortfall = if thread > last_thread {
            batch - last_len
        } else {
            0
        };
        let offset = (steps_before + batch_in_thread) * batch - shortfall;
        // The offset is below samples_per_rank, a u64.
        u64::try_from(offset).unwrap_or(u64::MAX)
    }
}

/// One rank's record stream under [`Sampler::FileShards`]: which files it streams, in which
/// order, how they are interleaved and which records of the stream it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordStreamPlan {
    stream: StreamShape,
    file_order: Option<KeyedPermutation>,
    samples_per_file: u64,
    records: u64,
}

impl RecordStreamPlan {
    /// Files the rank streams (its own files; every file when there are fewer files than
    /// ranks).
    pub fn files(&self) -> u64 {
        self.stream.files()
    }

    /// The `i`-th file the rank streams (a file of the list), for `i < files()`.
    pub fn file(&self, i: u64) -> u64 {
        let slot = self.stream.slot(i);
        self.file_order.map_or(slot, |order| order.apply(slot))
    }

    /// Files read at once, their records interleaved one by one (`num_parallel_reads`).
    pub fn cycle(&self) -> u64 {
        u64::from(self.stream.cycle.max(1))
    }

    /// The rank keeps the stream records at positions `phase + k * step` (step 1 unless there
    /// are fewer files than ranks): `(step, phase)`.
    pub fn keep_every(&self) -> (u64, u64) {
        self.stream.keep_every()
    }

    /// Records in each file.
    pub fn samples_per_file(&self) -> u64 {
        self.samples_per_file
    }

    /// Records the rank hands out this epoch (its steps times the batch size).
    pub fn records(&self) -> u64 {
        self.records
    }
}

/// The shuffle key of one purpose in one epoch, or `None` when that shuffle is off.
///
/// The epoch seed is `seed + epoch` when `seed_change_epoch`, else `seed`; [`Shuffle::Random`]
/// uses `random_seed` in place of `seed`.
fn shuffle_key(spec: &PlanSpec, mode: Shuffle, epoch: u32, purpose: u64) -> Option<u64> {
    let base = match mode {
        Shuffle::Off => return None,
        Shuffle::Seed => spec.seed,
        Shuffle::Random => spec.random_seed,
    };
    let epoch_seed = if spec.seed_change_epoch {
        base.wrapping_add(u64::from(epoch))
    } else {
        base
    };
    Some(mix(epoch_seed, purpose))
}

/// The samples of one step, produced one at a time without allocating.
///
/// It owns a copy of the plan's O(1) state (no borrow), so a batch can be sent to the reader
/// thread that reads it. It is double-ended and knows its length; [`get`](Self::get) gives
/// random access to any of its samples.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Batch {
    map: ShardMap,
    step: u64,
    /// Read-order offset of the batch's first sample.
    first: u64,
    /// Samples in the whole batch.
    len: u64,
    /// Next index (from the front) still to be yielded.
    front: u64,
    /// One past the last index still to be yielded.
    back: u64,
    /// The list slot of the last sample yielded from the front, and its file.
    last: Option<(u64, u64)>,
}

impl Batch {
    /// The step this batch belongs to.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The `index`-th sample of the batch (whatever has already been iterated), or `None`
    /// past its end.
    pub fn get(&self, index: u64) -> Option<SampleRef> {
        (index < self.len).then(|| self.map.sample_at(self.first + index))
    }
}

impl Iterator for Batch {
    type Item = SampleRef;

    fn next(&mut self) -> Option<SampleRef> {
        if self.front >= self.back {
            return None;
        }
        let sample = self
            .map
            .sample_at_with(self.first + self.front, &mut self.last);
        self.front += 1;
        Some(sample)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = usize::try_from(self.back - self.front).unwrap_or(usize::MAX);
        (remaining, Some(remaining))
    }
}

impl DoubleEndedIterator for Batch {
    fn next_back(&mut self) -> Option<SampleRef> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        Some(self.map.sample_at(self.first + self.back))
    }
}

impl ExactSizeIterator for Batch {}

impl FusedIterator for Batch {}
