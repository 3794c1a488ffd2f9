//! Upstream DLIO's `tests/dlio_ai_logging_test.py` (e1919d7), case by case: the same
//! overrides, the same per-rank and global counts of the AI events in the uncompressed
//! traces (`storage_root/*.pfw`), counted the way upstream counts them (a line holds the
//! `"cat":..` and `"name":..` pair; lines with `[` or `]` are skipped).

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::upstream::{
    Case, NUM_PROCS, dlio_benchmark, ensure, expect_success, glob, run_matrix, storage_root,
};

/// Upstream's `check_ai_events`.
#[derive(Debug, Default, Clone, Copy)]
struct AiCounts {
    root: u64,
    compute: u64,
    item: u64,
    preprocess: u64,
    fetch_iter: u64,
    train: u64,
    eval: u64,
    epoch: u64,
    ckpt_capture: u64,
    ckpt_restart: u64,
}

fn check_ai_events(path: &Path) -> Result<AiCounts, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut c = AiCounts::default();
    for line in text.lines() {
        if line.contains('[') || line.contains(']') {
            continue;
        }
        let is = |cat: &str, name: &str| {
            line.contains(&format!("\"cat\":\"{cat}\""))
                && line.contains(&format!("\"name\":\"{name}\""))
        };
        c.root += u64::from(is("ai_root", "ai_root"));
        c.compute += u64::from(is("compute", "compute"));
        c.item += u64::from(is("data", "item"));
        c.preprocess += u64::from(is("data", "preprocess"));
        c.fetch_iter += u64::from(is("dataloader", "fetch.iter"));
        c.ckpt_capture += u64::from(is("checkpoint", "capture"));
        c.ckpt_restart += u64::from(is("checkpoint", "restart"));
        c.train += u64::from(is("pipeline", "train"));
        c.eval += u64::from(is("pipeline", "evaluate"));
        c.epoch += u64::from(is("pipeline", "epoch.block"));
    }
    Ok(c)
}

/// Upstream's `get_rank_trace_files` (`trace-{rank}-of-{n}.pfw`) and the global item and
/// preprocess counts over every `*.pfw`.
struct Traces {
    per_rank: HashMap<u64, AiCounts>,
    global_item: u64,
    global_preprocess: u64,
}

fn traces(root: &Path) -> Result<Traces, String> {
    let paths = glob(root, ".pfw");
    ensure(!paths.is_empty(), || {
        format!("No pfw files found in {}", root.display())
    })?;
    let mut t = Traces {
        per_rank: HashMap::new(),
        global_item: 0,
        global_preprocess: 0,
    };
    for p in &paths {
        let c = check_ai_events(p)?;
        t.global_item += c.item;
        t.global_preprocess += c.preprocess;
    }
    for rank in 0..NUM_PROCS {
        let name = format!("trace-{rank}-of-{NUM_PROCS}.pfw");
        let path = paths
            .iter()
            .find(|p| {
                p.to_string_lossy().contains(&name) && !p.to_string_lossy().contains("-app.pfw")
            })
            .ok_or_else(|| format!("No main trace file found for rank {rank}"))?;
        t.per_rank.insert(rank, check_ai_events(path)?);
    }
    Ok(t)
}

fn base(framework: &str, root: &Path, evaluation: bool) -> Vec<String> {
    let r = root.display();
    vec![
        format!("++workload.framework={framework}"),
        format!("++workload.reader.data_loader={framework}"),
        "++workload.workflow.train=True".into(),
        format!(
            "++workload.workflow.evaluation={}",
            if evaluation { "True" } else { "False" }
        ),
        "++workload.workflow.generate_data=True".into(),
        format!("++workload.output.folder={r}"),
        format!("++workload.dataset.data_folder={r}/data"),
    ]
}

/// Asserts `actual == expected` for the named count of `rank`.
fn eq(rank: u64, what: &str, actual: u64, expected: u64) -> Result<(), String> {
    ensure(actual == expected, || {
        format!("Rank {rank}: expected {expected} {what} events, got {actual}")
    })
}

/// The counts upstream asserts on every rank of a training run: one root, `epochs` epoch and
/// train spans, `evals` evaluation spans, `iters` fetches and computations, no checkpoint
/// restart, and (when `captures` is given) that many checkpoint captures.
fn check_ranks(
    t: &Traces,
    epochs: u64,
    evals: u64,
    iters: u64,
    captures: Option<u64>,
) -> Result<(), String> {
    for (&rank, c) in &t.per_rank {
        eq(rank, "root", c.root, 1)?;
        eq(rank, "epoch", c.epoch, epochs)?;
        eq(rank, "train", c.train, epochs)?;
        eq(rank, "eval", c.eval, evals)?;
        eq(rank, "fetch_iter", c.fetch_iter, iters)?;
        eq(rank, "compute", c.compute, iters)?;
        if let Some(captures) = captures {
            eq(rank, "ckpt_capture", c.ckpt_capture, captures)?;
        }
        eq(rank, "ckpt_restart", c.ckpt_restart, 0)?;
    }
    Ok(())
}

fn at_least(what: &str, actual: u64, expected: u64) -> Result<(), String> {
    ensure(actual >= expected, || {
        format!("expected at least {expected} {what} events globally, got {actual}")
    })
}

const FRAMEWORKS: [&str; 2] = ["pytorch", "tensorflow"];

#[test]
fn test_ai_logging_train() {
    let mut cases = Vec::new();
    for framework in FRAMEWORKS {
        for num_data in [9u64, 10] {
            for batch_size in [2u64, 3] {
                cases.push(Case {
                    id: format!("test_ai_logging_train[{framework}-{num_data}-{batch_size}]"),
                    params: (framework, num_data, batch_size),
                });
            }
        }
    }
    run_matrix(cases, |cwd, &(framework, num_data, batch_size)| {
        let root = storage_root(cwd);
        let num_epochs = 2;
        let mut o = base(framework, &root, false);
        o.extend([
            format!(
                "++workload.dataset.num_files_train={}",
                num_data * NUM_PROCS
            ),
            "++workload.dataset.num_files_eval=0".into(),
            "++workload.dataset.num_subfolders_train=0".into(),
            "++workload.dataset.num_subfolders_eval=0".into(),
            format!("++workload.train.epochs={num_epochs}"),
            format!("++workload.reader.batch_size={batch_size}"),
        ]);
        expect_success(&mut dlio_benchmark(cwd, &o))?;
        let t = traces(&root)?;
        let iters = num_epochs * (num_data / batch_size);
        check_ranks(&t, num_epochs, 0, iters, Some(0))?;
        at_least("item", t.global_item, NUM_PROCS * iters)?;
        at_least("preprocess", t.global_preprocess, NUM_PROCS * iters)
    });
}

#[test]
fn test_ai_logging_train_with_step() {
    let mut cases = Vec::new();
    for framework in FRAMEWORKS {
        for step in [2u64, 3] {
            for read_threads in [2u64, 3] {
                cases.push(Case {
                    id: format!(
                        "test_ai_logging_train_with_step[{framework}-{step}-{read_threads}]"
                    ),
                    params: (framework, step, read_threads),
                });
            }
        }
    }
    run_matrix(cases, |cwd, &(framework, step, read_threads)| {
        let root = storage_root(cwd);
        let (num_epochs, batch_size, num_data_pp) = (2u64, 2u64, 8u64);
        let mut o = base(framework, &root, false);
        o.extend([
            format!(
                "++workload.dataset.num_files_train={}",
                num_data_pp * NUM_PROCS
            ),
            "++workload.dataset.num_files_eval=0".into(),
            "++workload.dataset.num_subfolders_train=0".into(),
            "++workload.dataset.num_subfolders_eval=0".into(),
            format!("++workload.reader.batch_size={batch_size}"),
            format!("++workload.train.epochs={num_epochs}"),
            format!("++workload.train.total_training_steps={step}"),
            format!("++workload.reader.read_threads={read_threads}"),
        ]);
        expect_success(&mut dlio_benchmark(cwd, &o))?;
        let t = traces(&root)?;
        check_ranks(&t, num_epochs, 0, num_epochs * step, Some(0))?;
        at_least("item", t.global_item, NUM_PROCS * num_epochs * step)?;
        at_least(
            "preprocess",
            t.global_preprocess,
            NUM_PROCS * num_epochs * step,
        )
    });
}

/// `test_ai_logging_with_eval` and `test_ai_logging_with_reader`: the same run, with the
/// format left at the default (npz) or set.
fn with_eval(cwd: &Path, framework: &str, fmt: Option<&str>) -> Result<(), String> {
    let root = storage_root(cwd);
    let (num_epochs, batch_size, num_data_pp) = (2u64, 1u64, 8u64);
    let total = num_data_pp * NUM_PROCS;
    let mut o = base(framework, &root, true);
    o.extend([
        format!("++workload.dataset.num_files_train={total}"),
        format!("++workload.dataset.num_files_eval={total}"),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.dataset.num_subfolders_eval=0".into(),
        format!("++workload.reader.batch_size={batch_size}"),
        format!("++workload.train.epochs={num_epochs}"),
    ]);
    if let Some(fmt) = fmt {
        o.push(format!("++workload.dataset.format={fmt}"));
    }
    expect_success(&mut dlio_benchmark(cwd, &o))?;
    let t = traces(&root)?;
    let iters = 2 * num_epochs * (num_data_pp / batch_size);
    check_ranks(&t, num_epochs, num_epochs, iters, Some(0))?;
    let items = NUM_PROCS * 2 * num_epochs * num_data_pp;
    match fmt {
        // tf.data fuses TFRecord parsing into its graph: upstream sees no item spans.
        Some("tfrecord") => {
            ensure(t.global_item == 0, || {
                format!("tfrecord: {} item events, expected 0", t.global_item)
            })?;
            ensure(t.global_preprocess == 0, || {
                format!(
                    "tfrecord: {} preprocess events, expected 0",
                    t.global_preprocess
                )
            })
        }
        Some("synthetic") => {
            at_least("item", t.global_item, items)?;
            ensure(t.global_preprocess == 0, || {
                format!(
                    "synthetic: {} preprocess events, expected 0",
                    t.global_preprocess
                )
            })
        }
        _ => {
            at_least("item", t.global_item, items)?;
            at_least("preprocess", t.global_preprocess, items)
        }
    }
}

#[test]
fn test_ai_logging_with_eval() {
    let cases = FRAMEWORKS
        .iter()
        .map(|&f| Case {
            id: format!("test_ai_logging_with_eval[{f}]"),
            params: f,
        })
        .collect();
    run_matrix(cases, |cwd, framework| with_eval(cwd, framework, None));
}

#[test]
fn test_ai_logging_with_reader() {
    let formats = [
        "hdf5",
        "npy",
        "npz",
        "tfrecord",
        "csv",
        "jpeg",
        "png",
        "indexed_binary",
        "mmap_indexed_binary",
        "synthetic",
    ];
    let mut cases = Vec::new();
    for framework in FRAMEWORKS {
        for fmt in formats {
            if fmt == "tfrecord" && framework == "pytorch" {
                continue;
            }
            cases.push(Case {
                id: format!("test_ai_logging_with_reader[{framework}-{fmt}]"),
                params: (framework, fmt),
            });
        }
    }
    run_matrix(cases, |cwd, &(framework, fmt)| {
        with_eval(cwd, framework, Some(fmt))
    });
}

#[test]
fn test_ai_logging_train_with_checkpoint() {
    let mut cases = Vec::new();
    for framework in FRAMEWORKS {
        for epoch_per_ckpt in [1u64, 2] {
            for steps_per_ckpt in [None, Some(1u64), Some(2)] {
                let steps = steps_per_ckpt.map_or("na".to_string(), |s| s.to_string());
                cases.push(Case {
                    id: format!(
                        "test_ai_logging_train_with_checkpoint[{framework}-{epoch_per_ckpt}-{steps}]"
                    ),
                    params: (framework, epoch_per_ckpt, steps_per_ckpt),
                });
            }
        }
    }
    run_matrix(
        cases,
        |cwd, &(framework, epoch_per_ckpt, steps_per_ckpt)| {
            let root = storage_root(cwd);
            let (num_epochs, batch_size, num_data_pp) = (2u64, 1u64, 4u64);
            let r = root.display();
            let steps_arg = steps_per_ckpt.map_or(-1, |s| s as i64);
            let o = vec![
                format!("++workload.framework={framework}"),
                format!("++workload.reader.data_loader={framework}"),
                "++workload.workflow.generate_data=True".into(),
                "++workload.workflow.train=True".into(),
                "++workload.workflow.evaluation=False".into(),
                "++workload.workflow.checkpoint=True".into(),
                format!("++workload.output.folder={r}"),
                format!("++workload.dataset.data_folder={r}/data"),
                format!(
                    "++workload.dataset.num_files_train={}",
                    num_data_pp * NUM_PROCS
                ),
                "++workload.dataset.num_files_eval=0".into(),
                "++workload.dataset.num_subfolders_train=0".into(),
                "++workload.dataset.num_subfolders_eval=0".into(),
                format!("++workload.train.epochs={num_epochs}"),
                format!("++workload.reader.batch_size={batch_size}"),
                format!("++workload.checkpoint.epochs_between_checkpoints={epoch_per_ckpt}"),
                format!("++workload.checkpoint.steps_between_checkpoints={steps_arg}"),
            ];
            expect_success(&mut dlio_benchmark(cwd, &o))?;
            let t = traces(&root)?;
            let iters = num_epochs * (num_data_pp / batch_size);
            // Captures are rank 0's only (below).
            check_ranks(&t, num_epochs, 0, iters, None)?;
            at_least("item", t.global_item, NUM_PROCS * iters)?;
            at_least("preprocess", t.global_preprocess, NUM_PROCS * iters)?;
            // A step interval takes precedence over the epoch one, as in DLIO.
            let expected = match steps_per_ckpt {
                Some(s) => iters / s,
                None => num_epochs / epoch_per_ckpt,
            };
            eq(0, "ckpt_capture", t.per_rank[&0].ckpt_capture, expected)
        },
    );
}

#[test]
fn test_ai_logging_checkpoint_only() {
    let mut cases = Vec::new();
    for framework in FRAMEWORKS {
        for write in [3u64, 4] {
            for read in [1u64, 2, 3] {
                cases.push(Case {
                    id: format!("test_ai_logging_checkpoint_only[{framework}-{write}-{read}]"),
                    params: (framework, write, read),
                });
            }
        }
    }
    run_matrix(cases, |cwd, &(framework, write, read)| {
        let root = storage_root(cwd);
        let r = root.display();
        let o = vec![
            format!("++workload.framework={framework}"),
            format!("++workload.reader.data_loader={framework}"),
            "++workload.workflow.generate_data=False".into(),
            "++workload.workflow.train=False".into(),
            "++workload.workflow.evaluation=False".into(),
            "++workload.workflow.checkpoint=True".into(),
            format!("++workload.output.folder={r}"),
            format!("++workload.dataset.data_folder={r}/data"),
            "++workload.dataset.num_files_eval=0".into(),
            "++workload.dataset.num_subfolders_train=0".into(),
            "++workload.dataset.num_subfolders_eval=0".into(),
            format!("++workload.checkpoint.checkpoint_folder={r}/checkpoint"),
            format!("++workload.checkpoint.num_checkpoints_write={write}"),
            format!("++workload.checkpoint.num_checkpoints_read={read}"),
        ];
        expect_success(&mut dlio_benchmark(cwd, &o))?;
        let t = traces(&root)?;
        for (&rank, c) in &t.per_rank {
            eq(rank, "root", c.root, 1)?;
            eq(rank, "epoch", c.epoch, 0)?;
            eq(rank, "train", c.train, 0)?;
            eq(rank, "eval", c.eval, 0)?;
            eq(rank, "fetch_iter", c.fetch_iter, 0)?;
            eq(rank, "item", c.item, 0)?;
            eq(rank, "preprocess", c.preprocess, 0)?;
        }
        let zero = &t.per_rank[&0];
        eq(0, "compute", zero.compute, write + read)?;
        eq(0, "ckpt_capture", zero.ckpt_capture, write)?;
        eq(0, "ckpt_restart", zero.ckpt_restart, read)
    });
}
