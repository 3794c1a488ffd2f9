//! The plan's contract, checked by exhaustive enumeration over small grids and on a few
//! hand-computed and very large cases.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeSet, HashSet};

use dlio_config::vocab::{Sampler, Shuffle};
use dlio_plan::{Batch, EpochPlan, PlanError, PlanSpec, SampleRef, trim};

/// The system allocator, counting the bytes each thread asks for: the plan's O(1) memory is
/// checked by what it allocates, which a busy machine cannot change (a wall-time bound could
/// fail there, or pass a per-sample table on a fast one).
struct CountingAllocator;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to `System` unchanged; the counter is a thread-local `Cell`
// with a const initialiser, which allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get() + layout.size() as u64));
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Bytes this thread allocated while `f` ran.
fn allocated_by(f: impl FnOnce()) -> u64 {
    let before = ALLOCATED.with(Cell::get);
    f();
    ALLOCATED.with(Cell::get) - before
}

fn spec(num_files: u64, samples_per_file: u64, batch_size: u64, world: u32) -> PlanSpec {
    PlanSpec {
        num_files,
        samples_per_file,
        batch_size,
        world,
        sampler: Sampler::Index,
        read_threads: 1,
        file_shuffle: Shuffle::Off,
        sample_shuffle: Shuffle::Off,
        sample_replacement: false,
        seed: 123,
        seed_change_epoch: true,
        random_seed: 987_654_321,
        total_training_steps: None,
        drop_last: true,
    }
}

fn plan(spec: &PlanSpec, epoch: u32, rank: u32) -> EpochPlan {
    match EpochPlan::new(spec, epoch, rank) {
        Ok(plan) => plan,
        Err(error) => panic!("{spec:?} epoch {epoch} rank {rank}: {error}"),
    }
}

fn rank_samples(spec: &PlanSpec, epoch: u32, rank: u32) -> Vec<SampleRef> {
    plan(spec, epoch, rank).samples().collect()
}

fn all_ranks(spec: &PlanSpec, epoch: u32) -> Vec<Vec<SampleRef>> {
    (0..spec.world)
        .map(|rank| rank_samples(spec, epoch, rank))
        .collect()
}

/// The samples thread `thread` reads, in its reading order.
fn thread_samples(plan: &EpochPlan, thread: u32) -> Vec<SampleRef> {
    (0..plan.steps())
        .filter(|&step| plan.worker_for_step(step) == thread)
        .flat_map(|step| plan.batch(step))
        .collect()
}

/// Checks everything one epoch of one spec must satisfy.
fn check_epoch(spec: &PlanSpec) {
    let trim = trim(spec);
    let total = trim.total_samples;
    let mut read = vec![false; total as usize];
    let mut count = 0u64;
    for rank in 0..spec.world {
        let plan = plan(spec, 1, rank);
        assert_eq!(
            plan.steps(),
            trim.steps_per_rank,
            "{spec:?}: rank {rank} steps"
        );
        let mut samples = Vec::new();
        for step in 0..plan.steps() {
            let batch = plan.batch(step);
            let expected_len = if step + 1 < plan.steps() || spec.drop_last {
                spec.batch_size
            } else {
                trim.samples_per_rank - step * spec.batch_size
            };
            assert_eq!(
                batch.len() as u64,
                expected_len,
                "{spec:?}: rank {rank} step {step}"
            );
            assert_eq!(plan.batch_len(step), expected_len);
            check_batch_access(&batch);
            samples.extend(batch);
        }
        assert_eq!(plan.batch(plan.steps()).len(), 0);
        for sample in &samples {
            assert!(sample.file < spec.num_files && sample.index_in_file < spec.samples_per_file);
            assert_eq!(
                sample.global,
                sample.file * spec.samples_per_file + sample.index_in_file
            );
            let slot = &mut read[sample.global as usize];
            assert!(
                !*slot,
                "{spec:?}: sample {} read twice in an epoch",
                sample.global
            );
            *slot = true;
            count += 1;
        }
        assert_eq!(
            samples,
            rank_samples(spec, 1, rank),
            "{spec:?}: not deterministic"
        );
        check_order(spec, &plan, &samples);
        check_files(spec, &plan, &samples);
    }
    assert_eq!(count, trim.used_samples, "{spec:?}: coverage");
}

/// [`EpochPlan::files`] names each file of the rank's samples, once, and no file more than the
/// two that a shard's ends may share with the neighbouring ranks.
fn check_files(spec: &PlanSpec, plan: &EpochPlan, samples: &[SampleRef]) {
    let files: Vec<u64> = plan.files().collect();
    let distinct: BTreeSet<u64> = files.iter().copied().collect();
    if spec.total_training_steps.is_none() {
        assert_eq!(distinct.len(), files.len(), "{spec:?}: a file named twice");
    }
    let read: BTreeSet<u64> = samples.iter().map(|s| s.file).collect();
    assert!(
        read.is_subset(&distinct),
        "{spec:?} rank {}: read {read:?}, named {distinct:?}",
        plan.rank()
    );
    if spec.total_training_steps.is_some() && spec.sampler != Sampler::FileShards {
        assert_eq!(
            distinct, read,
            "{spec:?}: a capped epoch names the files it reads"
        );
    } else if spec.sampler != Sampler::FileShards {
        assert!(
            distinct.len() <= read.len() + 2,
            "{spec:?} rank {}: read {read:?}, named {distinct:?}",
            plan.rank()
        );
    }
}

/// Random access, reverse iteration and forward iteration agree.
fn check_batch_access(batch: &Batch) {
    let forward: Vec<SampleRef> = batch.clone().collect();
    let mut backward: Vec<SampleRef> = batch.clone().rev().collect();
    backward.reverse();
    assert_eq!(forward, backward);
    let by_index: Vec<SampleRef> = (0..forward.len() as u64)
        .filter_map(|i| batch.get(i))
        .collect();
    assert_eq!(forward, by_index);
    assert_eq!(batch.get(forward.len() as u64), None);
}

/// The order properties that depend on the shuffles and the sampler.
fn check_order(spec: &PlanSpec, plan: &EpochPlan, samples: &[SampleRef]) {
    let spr = trim(spec).samples_per_rank;
    let start = u64::from(plan.rank()) * spr;
    let shard: Vec<u64> = (start..start + spr).collect();
    if spec.file_shuffle == Shuffle::Off {
        // Without a file shuffle the rank owns DLIO's contiguous range of global ids.
        let mut ids: Vec<u64> = samples.iter().map(|s| s.global).collect();
        if spec.sample_shuffle == Shuffle::Off && spec.sampler == Sampler::Index {
            assert_eq!(
                ids, shard,
                "{spec:?}: index sampler reads its range in order"
            );
        }
        ids.sort_unstable();
        assert_eq!(ids, shard, "{spec:?}: rank {} range", plan.rank());
    }
    if spec.sample_shuffle == Shuffle::Off && spec.sampler == Sampler::Iterative {
        // Each reader thread reads each of its files in one run, in ascending sample order.
        for thread in 0..plan.reader_threads() {
            let read = thread_samples(plan, thread);
            let mut finished_files = HashSet::new();
            for pair in read.windows(2) {
                if pair[0].file == pair[1].file {
                    assert_eq!(pair[0].index_in_file + 1, pair[1].index_in_file, "{spec:?}");
                } else {
                    assert!(
                        finished_files.insert(pair[0].file),
                        "{spec:?}: file reopened"
                    );
                    assert!(
                        !finished_files.contains(&pair[1].file),
                        "{spec:?}: file reopened"
                    );
                }
            }
        }
    }
}

const SHUFFLE_COMBOS: [(Shuffle, Shuffle); 5] = [
    (Shuffle::Off, Shuffle::Off),
    (Shuffle::Seed, Shuffle::Off),
    (Shuffle::Off, Shuffle::Seed),
    (Shuffle::Seed, Shuffle::Random),
    (Shuffle::Random, Shuffle::Seed),
];

#[test]
fn every_small_spec_gives_disjoint_complete_equal_shards() {
    let mut checked = 0;
    for num_files in 1..=20 {
        for samples_per_file in 1..=4 {
            for batch_size in 1..=5 {
                for world in 1..=5 {
                    for drop_last in [true, false] {
                        let base = PlanSpec {
                            drop_last,
                            ..spec(num_files, samples_per_file, batch_size, world)
                        };
                        if base.validate().is_err() {
                            assert_eq!(trim(&base).used_samples, 0);
                            continue;
                        }
                        for (file_shuffle, sample_shuffle) in SHUFFLE_COMBOS {
                            let index = PlanSpec {
                                file_shuffle,
                                sample_shuffle,
                                ..base
                            };
                            check_epoch(&index);
                            for read_threads in 1..=3 {
                                let sampler = Sampler::Iterative;
                                check_epoch(&PlanSpec {
                                    sampler,
                                    read_threads,
                                    ..index
                                });
                            }
                            checked += 4;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 50_000, "only {checked} specs checked");
}

#[test]
fn off_off_gives_dlio_contiguous_ranges() {
    let spec = spec(10, 3, 2, 3);
    let t = trim(&spec);
    assert_eq!(
        (t.used_samples, t.samples_per_rank, t.steps_per_rank),
        (30, 10, 5)
    );
    let ranks = all_ranks(&spec, 1);
    let globals: Vec<Vec<u64>> = ranks
        .iter()
        .map(|r| r.iter().map(|s| s.global).collect())
        .collect();
    assert_eq!(globals[0], (0..10).collect::<Vec<_>>());
    assert_eq!(globals[1], (10..20).collect::<Vec<_>>());
    assert_eq!(globals[2], (20..30).collect::<Vec<_>>());
    assert_eq!(
        ranks[1][0],
        SampleRef {
            global: 10,
            file: 3,
            index_in_file: 1
        }
    );
    assert_eq!(
        ranks,
        all_ranks(&spec, 7),
        "no shuffle: every epoch is the same"
    );
}

#[test]
fn upstream_uneven_cases_give_equal_steps() {
    // test_uneven_samples_deadlock: (files, batch) with 3 ranks must not hang.
    for (num_files, batch, steps) in [(13, 4, 1), (24, 4, 2), (25, 4, 2), (145, 16, 3)] {
        for drop_last in [true, false] {
            for sampler in [Sampler::Index, Sampler::Iterative] {
                let spec = PlanSpec {
                    drop_last,
                    sampler,
                    ..spec(num_files, 1, batch, 3)
                };
                for rank in 0..3 {
                    assert_eq!(plan(&spec, 1, rank).steps(), steps, "{spec:?} rank {rank}");
                }
                check_epoch(&spec);
            }
        }
    }
}

#[test]
fn iterative_threads_walk_contiguous_chunks() {
    // One rank, 10 samples, batches of 4 (the last one short), 2 reader threads:
    // thread 0 owns steps 0 and 2 (samples 0..6), thread 1 owns step 1 (samples 6..10).
    let spec = PlanSpec {
        sampler: Sampler::Iterative,
        read_threads: 2,
        drop_last: false,
        ..spec(10, 1, 4, 1)
    };
    let plan = plan(&spec, 1, 0);
    let steps: Vec<Vec<u64>> = (0..plan.steps())
        .map(|s| plan.batch(s).map(|x| x.global).collect())
        .collect();
    assert_eq!(steps, [vec![0, 1, 2, 3], vec![6, 7, 8, 9], vec![4, 5]]);
    assert_eq!(
        (
            plan.worker_for_step(0),
            plan.worker_for_step(1),
            plan.worker_for_step(2)
        ),
        (0, 1, 0)
    );
}

#[test]
fn iterative_sampler_reads_every_rank_s_own_files() {
    // Upstream bug B3: ranks above 0 re-read rank 0's files. Here rank 1 of 2 reads the
    // second half of the files, each once.
    let spec = PlanSpec {
        sampler: Sampler::Iterative,
        read_threads: 3,
        ..spec(8, 4, 2, 2)
    };
    let files: BTreeSet<u64> = rank_samples(&spec, 1, 1).iter().map(|s| s.file).collect();
    assert_eq!(files, (4..8).collect());
}

#[test]
fn sample_shuffle_keeps_each_file_s_indices_complete() {
    // dlio_sample_shuffle_test: 2 files x 4 samples, shuffle seed 42: each file is read at
    // in-file indices exactly {0, 1, 2, 3}.
    let spec = PlanSpec {
        sampler: Sampler::Iterative,
        sample_shuffle: Shuffle::Seed,
        seed: 42,
        ..spec(2, 4, 1, 1)
    };
    let samples = rank_samples(&spec, 1, 0);
    for file in 0..2 {
        let indices: BTreeSet<u64> = samples
            .iter()
            .filter(|s| s.file == file)
            .map(|s| s.index_in_file)
            .collect();
        assert_eq!(indices, (0..4).collect());
    }
    let in_order: Vec<u64> = (0..8).collect();
    assert_ne!(
        samples.iter().map(|s| s.global).collect::<Vec<_>>(),
        in_order
    );
}

#[test]
fn shuffles_change_the_order_every_epoch_only_with_seed_change_epoch() {
    let base = PlanSpec {
        batch_size: 5,
        ..spec(60, 4, 5, 3)
    };
    for sampler in [Sampler::Index, Sampler::Iterative] {
        for (file_shuffle, sample_shuffle) in &SHUFFLE_COMBOS[1..] {
            let spec = PlanSpec {
                sampler,
                file_shuffle: *file_shuffle,
                sample_shuffle: *sample_shuffle,
                read_threads: 2,
                ..base
            };
            for rank in 0..3 {
                let epoch1 = rank_samples(&spec, 1, rank);
                assert_ne!(epoch1, rank_samples(&spec, 2, rank), "{spec:?} rank {rank}");
                assert_eq!(
                    epoch1,
                    rank_samples(&spec, 1, rank),
                    "same seed, same order"
                );
                let fixed = PlanSpec {
                    seed_change_epoch: false,
                    ..spec
                };
                assert_eq!(rank_samples(&fixed, 1, rank), rank_samples(&fixed, 5, rank));
            }
        }
    }
}

#[test]
fn sample_shuffle_reorders_a_rank_s_shard_without_leaving_it() {
    let off = spec(60, 4, 5, 3);
    let on = PlanSpec {
        sample_shuffle: Shuffle::Seed,
        ..off
    };
    for rank in 0..3 {
        let ordered = rank_samples(&off, 1, rank);
        let shuffled = rank_samples(&on, 1, rank);
        assert_ne!(ordered, shuffled);
        let set = |v: &[SampleRef]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(set(&ordered), set(&shuffled));
    }
}

#[test]
fn draws_with_replacement_repeat_samples_inside_each_rank_s_shard() {
    // 100 single-sample files, batches of 6, 2 ranks: 48 draws per rank and epoch (the
    // trimmed shard), from shares of 50 (trimming leaves no sample out of the draws).
    let spec = PlanSpec {
        sample_shuffle: Shuffle::Seed,
        sample_replacement: true,
        drop_last: true,
        ..spec(100, 1, 6, 2)
    };
    let mut distinct_per_epoch = Vec::new();
    for epoch in 1..=40 {
        for rank in 0..2 {
            let plan = plan(&spec, epoch, rank);
            assert_eq!(plan.steps(), 8);
            let drawn = rank_samples(&spec, epoch, rank);
            assert_eq!(drawn.len(), 48);
            // Draws never leave the rank's shard, and they are reproducible.
            let shard = u64::from(rank) * 50..u64::from(rank + 1) * 50;
            assert!(drawn.iter().all(|s| shard.contains(&s.global)), "{drawn:?}");
            assert_eq!(drawn, rank_samples(&spec, epoch, rank));
            distinct_per_epoch.push(drawn.iter().collect::<BTreeSet<_>>().len() as f64);
        }
    }
    // 48 uniform draws of 50 positions: 50 * (1 - (49/50)^48) = 31.0 distinct on average
    // (a permutation would give 48 every time).
    let mean = distinct_per_epoch.iter().sum::<f64>() / distinct_per_epoch.len() as f64;
    assert!((29.5..32.5).contains(&mean), "{mean}");
    // The draws change from epoch to epoch (seed_change_epoch).
    assert_ne!(rank_samples(&spec, 1, 0), rank_samples(&spec, 2, 0));
    // Without a shuffle to key them, or with tf.data's streams, draws are refused.
    let unkeyed = PlanSpec {
        sample_shuffle: Shuffle::Off,
        ..spec
    };
    assert_eq!(
        EpochPlan::new(&unkeyed, 1, 0).err(),
        Some(PlanError::ReplacementWithoutShuffle)
    );
    let streamed = PlanSpec {
        sampler: Sampler::FileShards,
        ..spec
    };
    assert_eq!(
        EpochPlan::new(&streamed, 1, 0).err(),
        Some(PlanError::ReplacementInFileShards)
    );
}

#[test]
fn file_shuffle_changes_which_files_a_rank_reads() {
    // 128 samples, 4 ranks x 32: each rank owns 16 whole files.
    let off = spec(64, 2, 4, 4);
    for sampler in [Sampler::Index, Sampler::Iterative] {
        let on = PlanSpec {
            sampler,
            file_shuffle: Shuffle::Seed,
            ..off
        };
        let files = |spec: &PlanSpec, epoch| -> BTreeSet<u64> {
            rank_samples(spec, epoch, 0)
                .iter()
                .map(|s| s.file)
                .collect()
        };
        assert_eq!(files(&off, 1), (0..16).collect());
        assert_ne!(files(&on, 1), files(&off, 1), "{sampler:?}");
        assert_ne!(
            files(&on, 1),
            files(&on, 2),
            "{sampler:?}: same files every epoch"
        );
        // Whole files move: a rank still reads every sample of each file it owns.
        let samples = rank_samples(&on, 1, 0);
        assert_eq!(samples.len(), 2 * files(&on, 1).len());
    }
}

#[test]
fn random_shuffle_uses_the_run_seed() {
    let seeded = PlanSpec {
        file_shuffle: Shuffle::Seed,
        sample_shuffle: Shuffle::Seed,
        ..spec(40, 3, 2, 2)
    };
    let random = PlanSpec {
        file_shuffle: Shuffle::Random,
        sample_shuffle: Shuffle::Random,
        random_seed: seeded.seed,
        ..seeded
    };
    assert_eq!(all_ranks(&seeded, 3), all_ranks(&random, 3));
    let other_run = PlanSpec {
        random_seed: seeded.seed + 1000,
        ..random
    };
    assert_ne!(all_ranks(&other_run, 3), all_ranks(&random, 3));
    // Shuffle::Seed ignores the run seed.
    let seeded_other_run = PlanSpec {
        random_seed: 5,
        ..seeded
    };
    assert_eq!(all_ranks(&seeded, 3), all_ranks(&seeded_other_run, 3));
}

#[test]
fn step_cap_cuts_the_epoch_without_moving_samples() {
    for sampler in [Sampler::Index, Sampler::Iterative] {
        let full = PlanSpec {
            sampler,
            read_threads: 3,
            sample_shuffle: Shuffle::Seed,
            drop_last: false,
            ..spec(50, 2, 3, 2)
        };
        let capped = PlanSpec {
            total_training_steps: Some(4),
            ..full
        };
        let (full_plan, capped_plan) = (plan(&full, 2, 1), plan(&capped, 2, 1));
        assert_eq!(full_plan.steps(), 17);
        assert_eq!(capped_plan.steps(), 4);
        for step in 0..4 {
            assert_eq!(
                full_plan.batch(step).collect::<Vec<_>>(),
                capped_plan.batch(step).collect::<Vec<_>>()
            );
        }
        assert_eq!(capped_plan.batch(4).len(), 0);
        assert_eq!(capped_plan.samples().count(), 12);
        let samples: Vec<SampleRef> = capped_plan.samples().collect();
        check_files(&capped, &capped_plan, &samples);
        assert_eq!(capped_plan.trim().samples_read_per_rank(3), 12);
    }
}

#[test]
fn read_threads_zero_reads_on_one_thread() {
    let spec = PlanSpec {
        read_threads: 0,
        sampler: Sampler::Iterative,
        ..spec(12, 1, 2, 1)
    };
    let one = plan(&spec, 1, 0);
    assert_eq!(one.reader_threads(), 1);
    assert!((0..one.steps()).all(|s| one.worker_for_step(s) == 0));
    let three = PlanSpec {
        read_threads: 3,
        ..spec
    };
    let plan = plan(&three, 1, 0);
    assert_eq!(
        (0..6).map(|s| plan.worker_for_step(s)).collect::<Vec<_>>(),
        [0, 1, 2, 0, 1, 2]
    );
}

#[test]
fn impossible_plans_are_errors() {
    let ok = spec(12, 1, 2, 3);
    assert_eq!(
        EpochPlan::new(&ok, 1, 3).err(),
        Some(PlanError::RankOutOfRange { rank: 3, world: 3 })
    );
    assert_eq!(EpochPlan::new(&ok, 0, 0).err(), Some(PlanError::EpochZero));
    let too_few = spec(5, 1, 2, 3);
    assert!(matches!(
        EpochPlan::new(&too_few, 1, 0),
        Err(PlanError::TooFewSamples { .. })
    ));
    let message = PlanError::RankOutOfRange { rank: 3, world: 3 }.to_string();
    assert!(message.contains("ranks are 0..3"), "{message}");
}

#[test]
fn a_hundred_million_samples_on_1024_ranks_plan_in_constant_memory() {
    assert!(
        size_of::<EpochPlan>() <= 256,
        "EpochPlan is {} bytes",
        size_of::<EpochPlan>()
    );
    assert!(
        size_of::<Batch>() <= 256,
        "Batch is {} bytes",
        size_of::<Batch>()
    );
    let huge = spec(1_000_000, 100, 7, 1024);
    let t = trim(&huge);
    assert_eq!(t.total_samples, 100_000_000);
    assert_eq!(
        (t.used_samples, t.samples_per_rank, t.steps_per_rank),
        (99_993_600, 97_650, 13_950)
    );
    let bytes = allocated_by(|| {
        for sampler in [Sampler::Index, Sampler::Iterative] {
            for (file_shuffle, sample_shuffle) in SHUFFLE_COMBOS {
                let spec = PlanSpec {
                    sampler,
                    read_threads: 4,
                    file_shuffle,
                    sample_shuffle,
                    ..huge
                };
                let plan = plan(&spec, 3, 1023);
                let last = plan.batch(plan.steps() - 1);
                assert_eq!(last.len(), 7);
                let samples: BTreeSet<SampleRef> = last.collect();
                assert_eq!(samples.len(), 7);
                for sample in samples {
                    assert!(sample.file < 1_000_000 && sample.index_in_file < 100);
                    if file_shuffle == Shuffle::Off {
                        assert!((1023 * 97_650..1024 * 97_650).contains(&sample.global));
                    }
                }
            }
        }
    });
    // The sets that check the batches take a few KiB; a table of the 97,650 samples of one
    // rank's shard would take hundreds (10^8 for the whole epoch: hundreds of MiB).
    assert!(
        bytes < 64 << 10,
        "building and reading the plans allocated {bytes} bytes"
    );
}

/// Upstream's `tests/dlio_sample_shuffle_test.py` (e1919d7): the iterative sample map of two
/// files of four samples, sample shuffle `seed` (42, changing per epoch), one rank and one
/// reader thread, holds each file's samples 0..4 exactly once (its bug gave repeats).
#[test]
fn upstream_sample_shuffle_bug_reads_each_files_samples_once() {
    let spec = PlanSpec {
        sampler: Sampler::Iterative,
        sample_shuffle: Shuffle::Seed,
        seed: 42,
        seed_change_epoch: true,
        ..spec(2, 4, 1, 1)
    };
    // DLIO's epoch_number 0 is its first epoch; epochs here are 1-based.
    let mut per_file: [Vec<u64>; 2] = Default::default();
    for s in rank_samples(&spec, 1, 0) {
        per_file[s.file as usize].push(s.index_in_file);
    }
    for (file, mut samples) in per_file.into_iter().enumerate() {
        samples.sort_unstable();
        assert_eq!(samples, [0, 1, 2, 3], "file_{file}");
    }
}

#[test]
fn file_shards_name_the_files_of_the_rank_s_stream() {
    for num_files in 1..=12 {
        for world in 1..=4 {
            for (file_shuffle, _) in SHUFFLE_COMBOS {
                let spec = PlanSpec {
                    sampler: Sampler::FileShards,
                    read_threads: 2,
                    file_shuffle,
                    ..spec(num_files, 3, 2, world)
                };
                if spec.validate().is_err() {
                    continue;
                }
                for rank in 0..world {
                    let plan = plan(&spec, 2, rank);
                    let samples: Vec<SampleRef> = plan.samples().collect();
                    check_files(&spec, &plan, &samples);
                    let stream = plan.stream().expect("a file-shards plan has a stream");
                    assert_eq!(plan.files().count() as u64, stream.files());
                }
            }
        }
    }
}
