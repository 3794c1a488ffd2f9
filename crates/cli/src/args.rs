//! Command-line grammar. Workload selection and overrides are positional `key=value` words in
//! DLIO's Hydra grammar and are handed to `dlio-config` untouched.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

/// Which name the program was started under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `dlio`: subcommands.
    Dlio,
    /// `dlio_benchmark`: DLIO's name; always `dlio run`.
    DlioBenchmark,
    /// `dlio_benchmark_query`: DLIO's config query tool; always `dlio query`.
    DlioBenchmarkQuery,
    /// `dlio_postprocessor`: DLIO's report writer; always `dlio postprocess`.
    DlioPostprocessor,
}

impl Entry {
    /// The entry a program started as `argv0` takes: DLIO's name (`dlio_benchmark`, also
    /// through a symlink or a copy, with any directory or `.exe`) is `dlio run`; every other
    /// name is `dlio` with subcommands.
    pub fn from_program_name(argv0: Option<&std::ffi::OsStr>) -> Entry {
        let stem = argv0
            .map(std::path::Path::new)
            .and_then(|p| p.file_stem())
            .and_then(|s| s.to_str());
        match stem {
            Some("dlio_benchmark") => Entry::DlioBenchmark,
            Some("dlio_benchmark_query") => Entry::DlioBenchmarkQuery,
            Some("dlio_postprocessor") => Entry::DlioPostprocessor,
            _ => Entry::Dlio,
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "dlio",
    version = crate::LONG_VERSION,
    about = "Emulates the I/O of deep-learning training and measures whether storage keeps the accelerators busy",
    long_about = "dlio emulates the I/O of deep-learning training: it generates a dataset in the \
application's format, replays the training loop (reader threads, prefetch, shuffling, sharding \
across ranks, emulated compute) and reports accelerator utilization (AU), samples/s, bytes/s and \
latency distributions. It reads DLIO's workload YAML and its key=value / ++key=value overrides.",
    after_help = "Examples:\n  dlio run                                  first contact: the default workload, small, in a temporary folder\n  dlio run workload=unet3d_h100 ++workload.workflow.generate_data=True --ranks 4\n  dlio config workload=resnet50_h100 --query dataset.num_files_train\n  dlio workloads",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a workload: generate data if asked, train, evaluate, write the summary.
    Run(RunArgs),
    /// Only generate a workload's dataset (as `++workload.workflow.generate_data=True
    /// ++workload.workflow.train=False`).
    Generate(RunArgs),
    /// Print the resolved configuration of a workload as YAML, or one value with --query.
    Config(ConfigArgs),
    /// Print the value of the key named by `++workload.workflow.query=KEY` as DLIO's
    /// `dlio_benchmark_query` prints it (Python's spelling: `True`, `30.0`, `None` for an
    /// unset or empty value).
    Query(QueryArgs),
    /// Write DLIO's report (DLIO_{model}_report.txt) from a run's output folder, with the
    /// iostat device and CPU figures when the run was profiled; DLIO's `dlio_postprocessor`.
    Postprocess(crate::postprocess::PostprocessArgs),
    /// List the built-in workloads.
    Workloads,
    /// Print every rank's checkpoint files and sizes and the totals, without writing anything.
    CheckpointPlan(RunArgs),
    /// Analyse dftracer traces (a run's output folder, or .pfw/.pfw.gz files, ours or those
    /// dftracer writes for other programs): I/O vs compute, overlap, layers, transfer sizes,
    /// access pattern, per-file and per-rank figures; writes analysis.json, analysis.html and
    /// PNG plots.
    Analyze(AnalyzeArgs),
    /// Find how many simulated accelerators this host feeds at the workload's AU threshold
    /// (metric.au), MLPerf Storage's headline: runs `dlio run --ranks N` (or N processes under
    /// --launcher) as a search over N, each point repeated; writes capacity.json and
    /// capacity.png and ends with the number.
    Capacity(CapacityArgs),
    /// Run a program with its file I/O traced (an LD_PRELOAD interposer: POSIX and stdio calls
    /// of every thread and process) into dftracer-format traces: `dlio trace --out DIR --
    /// python3 train.py`. Exits with the program's exit code.
    Trace(TraceArgs),
    /// Derive a DLIO workload from the traces of a real program (dlio trace's or
    /// dftracer's): format, files, sizes, samples, epochs, batch, threads, order, request
    /// sizes, compute, side files; writes workload.yaml, characterize.json and
    /// characterize.html, each parameter beside its evidence.
    Characterize(CharacterizeArgs),
    /// Score an emulation against the real program: data bytes, read calls, files, the I/O
    /// phase and the I/O time per step (relative errors), and the read sizes, gaps between
    /// steps and loading times per step (Kolmogorov-Smirnov distances), each against a bound;
    /// the verdict passes only when all hold (exit 3 on a failing verdict with --check). Also
    /// the DLIO paper's cosine similarity (log-scaled features) and end-to-end error; writes
    /// fidelity.json.
    Fidelity(FidelityArgs),
    /// Write Python package metadata for this binary (`dlio_benchmark-VERSION.dist-info`, no
    /// code) into a site-packages folder, so that wrappers that record DLIO's version from
    /// Python's metadata (mlpstorage's provenance.json) record this build's version and
    /// commit; `pip uninstall dlio-benchmark` removes it.
    PythonDistInfo(PythonDistInfoArgs),
}

#[derive(Debug, Args)]
struct PythonDistInfoArgs {
    /// The site-packages folder of the Python that runs the wrapper, e.g.
    /// "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')".
    #[arg(long, value_name = "DIR")]
    site_packages: PathBuf,
}

#[derive(Debug, Args)]
struct TraceArgs {
    /// Where the traces go (created; must hold no traces yet).
    #[arg(long, value_name = "DIR", default_value = "dlio-trace")]
    out: PathBuf,
    /// The program and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct CharacterizeArgs {
    /// The folder of traces (or one trace file).
    #[arg(value_name = "TRACE_DIR")]
    traces: PathBuf,
    /// Where the workload YAML goes (default TRACE_DIR/workload.yaml); characterize.json and
    /// characterize.html go beside it.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The data set's folder, when the largest folder read is not it.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct FidelityArgs {
    /// Traces of the real program.
    #[arg(value_name = "REAL_TRACES")]
    real: PathBuf,
    /// Traces of the emulation (`dlio run --trace` output folder).
    #[arg(value_name = "EMULATED_TRACES")]
    emulated: PathBuf,
    /// Where fidelity.json goes (default: the emulated folder).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The real program's data folder, when the largest folder read is not it.
    #[arg(long, value_name = "DIR")]
    real_data_dir: Option<PathBuf>,
    /// The emulation's data folder (default: found the same way).
    #[arg(long, value_name = "DIR")]
    emulated_data_dir: Option<PathBuf>,
    /// Exit with status 3 when the verdict fails (for scripts and CI).
    #[arg(long)]
    check: bool,
    /// Traces of a second run of the real program: a bound also passes when the emulation
    /// is no further from the program than the program's two runs are from each other.
    #[arg(long, value_name = "REAL_TRACES_2")]
    repeat: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CapacityArgs {
    /// Runs per point; a point passes only if every one meets the AU threshold.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeats: u32,
    /// The first accelerator count tried.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
    min: u32,
    /// The largest accelerator count tried.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max: u32,
    /// Where every point's output, capacity.json and capacity.png go (default
    /// capacity/WORKLOAD-TIME).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also try MLPerf's CLOSED knobs (read_threads, prefetch_size, transfer_size, and
    /// computation_threads for tensorflow) one at a time at the first failing count.
    #[arg(long)]
    sweep: bool,
    /// Run each point as N processes of one rank under this launcher, `{n}` standing for N,
    /// e.g. "mpirun --oversubscribe -np {n}" (needs a build with --features mpi).
    #[arg(long, value_name = "COMMAND")]
    launcher: Option<String>,
    /// Directory holding workload/NAME.yaml files (as DLIO's --config-dir).
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
    #[command(flatten)]
    flags: ConfigFlags,
    /// `workload=NAME` and overrides, as for `dlio run`.
    #[arg(value_name = "OVERRIDES")]
    words: Vec<String>,
}

#[derive(Debug, Args)]
struct AnalyzeArgs {
    /// Output folders or trace files.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Where to write analysis.json, analysis.html and the PNGs (default: the first PATH if it
    /// is a folder, else the folder of the first trace).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Parsing threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

/// How a workload is read: flags shared by every subcommand that loads one.
#[derive(Debug, Clone, Args)]
pub struct ConfigFlags {
    /// Make every unknown config key an error (exit 2) instead of a warning; also
    /// `DLIO_STRICT=1`. Use it for CI and for submissions.
    #[arg(long)]
    pub strict: bool,
    /// Whose behaviour to follow where MLPerf Storage's DLIO fork and argonne upstream DLIO
    /// differ: `mlperf` (default: readers read bytes and decode nothing, parquet by row group
    /// and column, MLPerf Storage v3's built-in workload files) or `upstream` (DLIO 2.0:
    /// decode, hyperslab hdf5 reads, DLIO's own built-in files); also `DLIO_SEMANTICS`.
    #[arg(long, value_name = "mlperf|upstream", value_parser = parse_semantics)]
    pub semantics: Option<dlio_config::Semantics>,
}

fn parse_semantics(text: &str) -> std::result::Result<dlio_config::Semantics, String> {
    dlio_config::Semantics::parse(text)
        .ok_or_else(|| format!("`{text}` is not a semantics; give `mlperf` or `upstream`"))
}

impl ConfigFlags {
    /// The load arguments for `words`, with `DLIO_STRICT` and `DLIO_SEMANTICS` applied where
    /// the flags are not given.
    pub fn load_args(
        &self,
        words: Vec<String>,
        config_dir: Option<PathBuf>,
    ) -> Result<dlio_config::LoadArgs> {
        let strict = self.strict
            || std::env::var("DLIO_STRICT")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "True" | "yes"));
        let semantics = match (self.semantics, std::env::var("DLIO_SEMANTICS")) {
            (Some(s), _) => Some(s),
            (None, Ok(text)) if !text.trim().is_empty() => Some(
                parse_semantics(&text)
                    .map_err(|e| anyhow::anyhow!("environment variable DLIO_SEMANTICS: {e}"))?,
            ),
            _ => None,
        };
        Ok(dlio_config::LoadArgs {
            positional: words,
            config_dir,
            strict,
            semantics,
        })
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Simulated accelerators (ranks) run by this process.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub ranks: u32,
    /// Directory holding workload/NAME.yaml files (as DLIO's --config-dir).
    #[arg(long, value_name = "DIR")]
    pub config_dir: Option<PathBuf>,
    /// Write a dftracer-format trace per rank (`trace-{rank}-of-{size}.pfw.gz` in the output
    /// folder) for `dlio analyze`; `DFTRACER_ENABLE=1` does the same.
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub flags: ConfigFlags,
    /// `workload=NAME` or `workload=path.yaml`, then overrides such as
    /// `++workload.train.epochs=2` and `hydra.run.dir=out`.
    #[arg(value_name = "OVERRIDES")]
    pub words: Vec<String>,
}

#[derive(Debug, Args)]
struct ConfigArgs {
    /// Print only this key, e.g. `dataset.num_files_train`.
    #[arg(long, value_name = "KEY")]
    query: Option<String>,
    /// Directory holding workload/NAME.yaml files.
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
    #[command(flatten)]
    flags: ConfigFlags,
    /// `workload=NAME` and overrides.
    #[arg(value_name = "OVERRIDES")]
    words: Vec<String>,
}

#[derive(Debug, Args)]
struct QueryArgs {
    /// Directory holding workload/NAME.yaml files.
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,
    #[command(flatten)]
    flags: ConfigFlags,
    /// `workload=NAME`, overrides, and `++workload.workflow.query=KEY`.
    #[arg(value_name = "OVERRIDES")]
    words: Vec<String>,
}

/// Rewrites what DLIO users type into our grammar: `dlio_benchmark ARGS` becomes
/// `dlio run ARGS`, and Hydra's `-cd DIR` / `--config-dir=DIR` become `--config-dir DIR`.
pub fn normalise(argv: Vec<OsString>, entry: Entry) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::with_capacity(argv.len() + 1);
    let mut words = argv.into_iter();
    out.push(words.next().unwrap_or_else(|| OsString::from("dlio")));
    let mut words = words.peekable();
    // `dlio_benchmark --version` (what a wrapper asks to record what ran) is the program's.
    let asks_version = words.peek().is_some_and(|w| w == "--version" || w == "-V");
    match entry {
        _ if asks_version => {}
        Entry::DlioBenchmark => out.push(OsString::from("run")),
        Entry::DlioBenchmarkQuery => out.push(OsString::from("query")),
        Entry::DlioPostprocessor => {
            out.push(OsString::from("postprocess"));
            out.extend(crate::postprocess::normalise_args(words.collect()));
            return out;
        }
        Entry::Dlio => {}
    }
    let mut passthrough = false;
    for w in words {
        // After `--` the words are another program's (`dlio trace -- CMD ...`).
        passthrough |= w == "--";
        if w == "-cd" && !passthrough {
            out.push(OsString::from("--config-dir"));
        } else {
            out.push(w);
        }
    }
    out
}

pub fn dispatch(cli: Cli, entry: Entry) -> Result<ExitCode> {
    match cli.command {
        Command::Run(args) => crate::run::run(args, crate::run::Mode::Run, entry),
        Command::Generate(args) => crate::run::run(args, crate::run::Mode::GenerateOnly, entry),
        Command::Config(args) => {
            let loaded = dlio_config::load(&args.flags.load_args(args.words, args.config_dir)?)?;
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            match args.query {
                Some(key) => emit(&format!("{}\n", loaded.config.query(&key)?))?,
                None => emit(&crate::redact_credentials(&loaded.config.to_yaml()))?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Query(args) => {
            let loaded = dlio_config::load(&args.flags.load_args(args.words, args.config_dir)?)?;
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            let value = match &loaded.config.workflow.query {
                Some(key) => loaded.config.query_as_python(key)?,
                None => "None".to_string(),
            };
            emit(&format!("{value}\n"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Postprocess(args) => {
            crate::postprocess::postprocess(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckpointPlan(args) => {
            let loaded = dlio_config::load(&args.flags.load_args(args.words, args.config_dir)?)?;
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            let plan =
                dlio_trainer::checkpoint_plan(&loaded.config, args.ranks).with_context(|| {
                    format!(
                        "planning the checkpoints of {} on {} ranks",
                        loaded.workload, args.ranks
                    )
                })?;
            emit(&dlio_checkpoint::format_plan_table(&plan))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Analyze(args) => {
            let analysis = dlio_analyze::analyze(
                &args.paths,
                &dlio_analyze::AnalyzeOptions {
                    threads: args.threads,
                },
            )?;
            emit(&dlio_analyze::render_terminal(&analysis))?;
            let out = match args.out {
                Some(dir) => dir,
                None if args.paths[0].is_dir() => args.paths[0].clone(),
                None => args.paths[0]
                    .parent()
                    .map(|p| p.to_path_buf())
                    .unwrap_or_else(|| PathBuf::from(".")),
            };
            let files = dlio_analyze::write_reports(&analysis, &out)
                .with_context(|| format!("writing the analysis into {}", out.display()))?;
            emit(&format!(
                "\nWrote {}, {} and {} plots\n",
                files.json.display(),
                files.html.display(),
                files.pngs.len()
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Capacity(args) => crate::capacity::capacity(crate::capacity::CapacityRequest {
            repeats: args.repeats,
            min: args.min,
            max: args.max,
            out: args.out,
            sweep: args.sweep,
            launcher: args.launcher,
            config_dir: args.config_dir,
            flags: args.flags,
            words: args.words,
        }),
        Command::Trace(args) => crate::trace_program::trace(&crate::trace_program::TraceRequest {
            out: args.out,
            command: args.command,
        }),
        Command::Characterize(args) => {
            let c = dlio_analyze::characterize(
                &args.traces,
                &dlio_analyze::CharacterizeOptions {
                    data_dir: args.data_dir,
                },
            )?;
            emit(&dlio_analyze::render_characterization(&c))?;
            let yaml = args.out.unwrap_or_else(|| {
                if args.traces.is_dir() {
                    args.traces.join("workload.yaml")
                } else {
                    args.traces.with_file_name("workload.yaml")
                }
            });
            let files = dlio_analyze::write_characterization(&c, &yaml)
                .with_context(|| format!("writing the workload {}", yaml.display()))?;
            emit(&format!(
                "\nWrote {}, {} and {}\n",
                files.yaml.display(),
                files.json.display(),
                files.html.display()
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Fidelity(args) => {
            let f = dlio_analyze::fidelity(
                &args.real,
                &args.emulated,
                &dlio_analyze::FidelityOptions {
                    real_data_dir: args.real_data_dir,
                    emulated_data_dir: args.emulated_data_dir,
                    repeat: args.repeat,
                },
            )?;
            emit(&dlio_analyze::render_fidelity(&f))?;
            let out = args.out.unwrap_or_else(|| {
                if args.emulated.is_dir() {
                    args.emulated.clone()
                } else {
                    args.emulated
                        .parent()
                        .map_or_else(|| PathBuf::from("."), PathBuf::from)
                }
            });
            let path = dlio_analyze::write_fidelity(&f, &out)
                .with_context(|| format!("writing fidelity.json into {}", out.display()))?;
            emit(&format!("\nWrote {}\n", path.display()))?;
            Ok(
                if args.check && f.verdict == dlio_analyze::FidelityVerdict::Fail {
                    ExitCode::from(3)
                } else {
                    ExitCode::SUCCESS
                },
            )
        }
        Command::PythonDistInfo(args) => {
            let written =
                crate::python_dist::write_dist_info(&crate::python_dist::DistInfoRequest {
                    site_packages: args.site_packages,
                })?;
            println!("wrote {}", written.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Workloads => {
            let table = dlio_config::workload_table().context("listing the built-in workloads")?;
            emit(&table)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes `text` to stdout. A reader that went away (`dlio analyze ... | head`) is not an
/// error: the output is simply not wanted any more.
fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

#[cfg(test)]
mod tests {
    use super::Entry;
    use std::ffi::OsStr;

    #[test]
    fn dlios_name_under_any_path_is_dlio_run() {
        for name in [
            "dlio_benchmark",
            "/opt/mlps/bin/dlio_benchmark",
            "./dlio_benchmark.exe",
        ] {
            assert_eq!(
                Entry::from_program_name(Some(OsStr::new(name))),
                Entry::DlioBenchmark,
                "{name}"
            );
        }
        assert_eq!(
            Entry::from_program_name(Some(OsStr::new("/venv/bin/dlio_benchmark_query"))),
            Entry::DlioBenchmarkQuery
        );
        assert_eq!(
            Entry::from_program_name(Some(OsStr::new("dlio_postprocessor"))),
            Entry::DlioPostprocessor
        );
        for name in ["dlio", "/usr/bin/dlio", "dlio_bench", "x"] {
            assert_eq!(
                Entry::from_program_name(Some(OsStr::new(name))),
                Entry::Dlio,
                "{name}"
            );
        }
        assert_eq!(Entry::from_program_name(None), Entry::Dlio);
    }
}
