//! Running upstream DLIO's test matrices (argonne-lcf/dlio_benchmark `tests/*.py` at e1919d7)
//! as command lines: each case is upstream's own list of Hydra overrides, given to
//! `dlio_benchmark` as upstream's `run_mpi_benchmark` gives them to `mpirun -np 2 python -m
//! dlio_benchmark.main`; the two MPI processes are two ranks of one process here
//! (`--ranks 2`), which write the same per-rank files.
//!
//! Upstream's cases sleep most of the time (`computation_time` 1 s per step in its default
//! workload), so the cases of a matrix run side by side, a few at a time: the matrix takes
//! about as long as its slowest case, not the sum.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::sync::Mutex;

/// Upstream's `NUM_PROCS` where `mpirun` exists.
pub const NUM_PROCS: u64 = 2;

/// Cases run at once. They sleep, so more than the cores is fine; more than this gives the
/// scheduler's jitter a chance to slow a case past its step timing.
const SIDE_BY_SIDE: usize = 8;

/// `dlio_benchmark` (DLIO's name for `dlio run`) on two ranks with upstream's overrides, in
/// `cwd` (where upstream's relative paths and Hydra's log folder land), with dftracer's
/// environment as upstream's CI sets it for the AI logging tests.
pub fn dlio_benchmark(cwd: &Path, overrides: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlio_benchmark"));
    cmd.current_dir(cwd)
        .args(["--ranks", &NUM_PROCS.to_string()])
        .args(overrides)
        .env("DFTRACER_ENABLE", "1")
        .env("DFTRACER_INC_METADATA", "1")
        .env("DFTRACER_TRACE_COMPRESSION", "0")
        .env_remove("DLIO_STRICT")
        .env_remove("DLIO_SEMANTICS");
    cmd
}

/// Runs `cmd`; an error with both outputs unless it exits 0 (upstream raises on a non-zero
/// exit unless the case expects one).
pub fn expect_success(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("dlio_benchmark did not start: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One case of a matrix: its pytest id (`test_name[param-param]`) and what it runs.
pub struct Case<P> {
    pub id: String,
    pub params: P,
}

/// Runs every case (each in a fresh folder, given to `check`), a few side by side, and fails
/// with the id and reason of every case that failed, so one run shows the whole matrix.
pub fn run_matrix<P: Sync>(
    cases: Vec<Case<P>>,
    check: impl Fn(&Path, &P) -> Result<(), String> + Sync,
) {
    assert!(!cases.is_empty(), "an empty matrix tests nothing");
    let total = cases.len();
    let next = Mutex::new(cases.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..SIDE_BY_SIDE.min(total) {
            scope.spawn(|| {
                loop {
                    let Some(case) = next.lock().unwrap().next() else {
                        return;
                    };
                    let dir = tempfile::tempdir().expect("temporary folder");
                    if let Err(why) = check(dir.path(), &case.params) {
                        failures.lock().unwrap().push(format!("{}: {why}", case.id));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {total} upstream cases failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Upstream's `setup_test_env` storage root: `outputs/<unique>` under the case's folder.
pub fn storage_root(cwd: &Path) -> PathBuf {
    let root = cwd.join("outputs").join("case");
    std::fs::create_dir_all(&root).expect("storage root");
    root
}

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(what()) }
}

/// The files in `dir` whose name ends with `suffix`, sorted (Python's `glob(dir/*suffix)`).
pub fn glob(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The output folder a run names in its last lines (`Outputs written to DIR`, relative to
/// the working folder `cwd` unless absolute).
fn output_folder(cwd: &Path, out: &Output) -> Result<PathBuf, String> {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .rev()
        .find_map(|l| l.split("Outputs written to ").nth(1))
        .map(|d| cwd.join(d.trim()))
        .ok_or_else(|| format!("no `Outputs written to` line in:\n{text}"))
}

/// Upstream's `run_benchmark(cfg, verify)` of its in-process tests: the run must succeed, and
/// with `verify` every rank's `*_output.json` must be in the output folder, which is returned.
pub fn run_benchmark(
    cwd: &Path,
    overrides: &[String],
    verify: bool,
) -> Result<Option<PathBuf>, String> {
    let out = expect_success(&mut dlio_benchmark(cwd, overrides))?;
    if !verify {
        return Ok(None);
    }
    let folder = output_folder(cwd, &out)?;
    let n = glob(&folder, "_output.json").len() as u64;
    ensure(n == NUM_PROCS, || {
        format!(
            "{n} *_output.json in {}, expected {NUM_PROCS}",
            folder.display()
        )
    })?;
    Ok(Some(folder))
}

/// `test_checkpoint_epoch`'s case (and `test_s3_checkpoint_epoch`'s): model size 1024, layer
/// parameters [16], tensor parallelism over the ranks, 8 epochs with a checkpoint every 2.
pub struct CheckpointEpoch {
    pub framework: &'static str,
    pub optimizers: &'static [u64],
    pub num_layers: u64,
    pub zero_stage: u64,
    pub randomize: bool,
}

impl CheckpointEpoch {
    pub const EPOCHS: u64 = 8;
    pub const EPOCHS_PER_CHECKPOINT: u64 = 2;

    /// Upstream's overrides for the case.
    pub fn overrides(&self) -> Vec<String> {
        let list = |v: &[u64]| {
            format!(
                "[{}]",
                v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            )
        };
        let framework = self.framework;
        vec![
            format!("++workload.framework={framework}"),
            format!("++workload.reader.data_loader={framework}"),
            "++workload.workflow.train=True".into(),
            "++workload.workflow.generate_data=True".into(),
            format!(
                "++workload.checkpoint.randomize_tensor={}",
                if self.randomize { "True" } else { "False" }
            ),
            "++workload.train.computation_time=0.01".into(),
            "++workload.evaluation.eval_time=0.005".into(),
            format!("++workload.train.epochs={}", Self::EPOCHS),
            "++workload.workflow.checkpoint=True".into(),
            format!(
                "++workload.checkpoint.epochs_between_checkpoints={}",
                Self::EPOCHS_PER_CHECKPOINT
            ),
            "++workload.model.model_size=1024".into(),
            format!(
                "++workload.model.optimization_groups={}",
                list(self.optimizers)
            ),
            format!("++workload.model.num_layers={}", self.num_layers),
            format!(
                "++workload.model.parallelism.zero_stage={}",
                self.zero_stage
            ),
            "++workload.model.layer_parameters=[16]".into(),
            format!("++workload.model.parallelism.tensor={NUM_PROCS}"),
        ]
    }

    /// Upstream's matrix for `frameworks`, in its order, with its pytest ids
    /// (`tensorflow-1024-optimizers0-2-layer_params0-0-True`).
    pub fn matrix(test: &str, frameworks: &[&'static str]) -> Vec<Case<CheckpointEpoch>> {
        let mut cases = Vec::new();
        for randomize in [true, false] {
            for (optimizers, num_layers, zero_stage) in [
                (&[1024u64, 128][..], 2u64, 0u64),
                (&[1024, 128][..], 2, 3),
                (&[128][..], 1, 0),
            ] {
                for &framework in frameworks {
                    let i = cases.len();
                    let r = if randomize { "True" } else { "False" };
                    cases.push(Case {
                        id: format!(
                            "{test}[{framework}-1024-optimizers{i}-{num_layers}-layer_params{i}-{zero_stage}-{r}]"
                        ),
                        params: CheckpointEpoch {
                            framework,
                            optimizers,
                            num_layers,
                            zero_stage,
                            randomize,
                        },
                    });
                }
            }
        }
        cases
    }
}
