//! `dlio capacity`: the largest number of simulated accelerators whose AU stays at the
//! workload's threshold (`metric.au`), MLPerf Storage's headline figure for one host.
//!
//! Each point of the search is a real run of this binary as a child process (`dlio run
//! --ranks N`, or N processes under a launcher such as mpirun), so its CPU time and peak
//! memory come from the kernel's accounting of that child alone (`wait4`), and a point cannot
//! disturb the next. A point passes when every repeat meets the AU expectation (the child's
//! own `train_au_meet_expectation`, as mlpstorage checks it); the first failing repeat ends
//! the point. The search doubles the count until a point fails, then bisects between the last
//! pass and the first failure: AU falls as accelerators are added, so the boundary is where
//! passes end.
//!
//! Phases: [`load_target`] (the workload, its threshold, the output folder), [`prepare_dataset`]
//! (one generation if the workload asks for it; the points then only train), [`search`],
//! [`sweep`] (optional: the CLOSED knobs at the boundary), [`write_report`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use serde_json::Value;

use crate::EXIT_INTERRUPTED;
use crate::args::ConfigFlags;

/// What `dlio capacity` was asked.
#[derive(Debug, Clone)]
pub struct CapacityRequest {
    /// Runs per point; a point passes only if all of them do.
    pub repeats: u32,
    /// The first count tried.
    pub min: u32,
    /// The largest count tried.
    pub max: u32,
    /// Where the points' outputs, capacity.json and capacity.png go.
    pub out: Option<PathBuf>,
    /// Also try the CLOSED knobs at the boundary.
    pub sweep: bool,
    /// A launcher command with `{n}` for the process count (`mpirun -np {n}`): each point then
    /// runs N processes of one rank each instead of one process of N ranks.
    pub launcher: Option<String>,
    /// `--config-dir`.
    pub config_dir: Option<PathBuf>,
    /// `--strict`, `--semantics`.
    pub flags: ConfigFlags,
    /// `workload=...` and overrides, handed to every point.
    pub words: Vec<String>,
}

/// One run of one point.
#[derive(Debug, Clone, Serialize)]
pub struct Repeat {
    /// Mean training AU, percent.
    pub au_percentage: f64,
    /// The run's own verdict against `metric.au`.
    pub meets_expectation: bool,
    /// Training samples per second, all ranks together (DLIO's formula).
    pub samples_per_second: f64,
    /// Bytes the ranks read while training, per second, in MiB.
    pub read_mib_per_second: f64,
    /// User + system CPU of the child (and its children), seconds.
    pub cpu_seconds: f64,
    /// CPU per sample read (training and evaluation), milliseconds.
    pub cpu_ms_per_sample: f64,
    /// Peak resident memory of the largest process, MiB.
    pub peak_rss_mib: f64,
    /// Peak RSS divided by the ranks of that process, MiB.
    pub rss_per_rank_mib: f64,
    /// Wall time of the run, seconds.
    pub wall_seconds: f64,
    /// The run's output folder (summary.json, its log).
    pub output: PathBuf,
}

/// One accelerator count, with its repeats.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Simulated accelerators.
    pub accelerators: u32,
    /// Every repeat run (fewer than asked when one failed).
    pub repeats: Vec<Repeat>,
    /// True when every asked repeat ran and met the expectation.
    pub passed: bool,
}

impl Point {
    fn lowest_au(&self) -> f64 {
        self.repeats
            .iter()
            .map(|r| r.au_percentage)
            .fold(f64::INFINITY, f64::min)
    }

    fn mean(&self, field: impl Fn(&Repeat) -> f64) -> f64 {
        if self.repeats.is_empty() {
            return 0.0;
        }
        self.repeats.iter().map(field).sum::<f64>() / self.repeats.len() as f64
    }
}

/// One knob setting tried by the sweep at the first failing count.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// The override, e.g. `++workload.reader.read_threads=4`.
    pub override_word: String,
    /// Its point.
    pub point: Point,
}

/// The workload being measured.
#[derive(Debug)]
struct Target {
    workload: String,
    /// `metric.au` as a percentage.
    threshold_percentage: f64,
    generate_data: bool,
    tensorflow: bool,
    out: PathBuf,
}

/// What the search found.
#[derive(Debug, Serialize)]
struct Outcome {
    workload: String,
    au_threshold_percentage: f64,
    repeats_per_point: u32,
    launcher: Option<String>,
    /// The largest passing count (0: not even the first count passes).
    accelerators: u32,
    /// True when the search stopped at `max` while still passing.
    capped_at_max: bool,
    points: Vec<Point>,
    sweep: Vec<Variant>,
    /// The sweep's best variant, if one passes at the first failing count.
    sweep_best: Option<String>,
}

/// The interruption of a child by Ctrl-C.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Runs `dlio capacity`.
pub fn capacity(request: CapacityRequest) -> Result<ExitCode> {
    if request.repeats == 0 {
        bail!("--repeats is 0; a point needs at least one run");
    }
    if request.min == 0 || request.min > request.max {
        bail!(
            "--min {} and --max {}: give 1 <= min <= max",
            request.min,
            request.max
        );
    }
    let target = load_target(&request)?;
    forward_interrupts_to_children();
    std::fs::create_dir_all(&target.out)
        .with_context(|| format!("creating the capacity folder {}", target.out.display()))?;
    println!(
        "Capacity of {} at AU >= {:.1}% ({} repeat(s) per point), outputs in {}",
        target.workload,
        target.threshold_percentage,
        request.repeats,
        target.out.display()
    );
    let mut prober = Prober::new(&request, &target);
    let outcome = prepare_dataset(&request, &target)
        .and_then(|()| search(&mut prober))
        .and_then(|(accelerators, capped)| {
            let sweep = if request.sweep && !capped {
                sweep(&mut prober, &target, accelerators)?
            } else {
                Vec::new()
            };
            Ok((accelerators, capped, sweep))
        });
    let (accelerators, capped, sweep, interrupted) = match outcome {
        Ok((accelerators, capped, sweep)) => (accelerators, capped, sweep, false),
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            (prober.largest_pass(), false, Vec::new(), true)
        }
        Err(e) => return Err(e),
    };
    let sweep_best = best_variant(&sweep);
    let result = Outcome {
        workload: target.workload.clone(),
        au_threshold_percentage: target.threshold_percentage,
        repeats_per_point: request.repeats,
        launcher: request.launcher.clone(),
        accelerators,
        capped_at_max: capped,
        points: prober.points.values().cloned().collect(),
        sweep,
        sweep_best,
    };
    write_report(&result, &target.out)?;
    if interrupted {
        eprintln!("capacity search interrupted; the points so far are in the report");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads the workload as the points will, so that a bad config fails here, once.
fn load_target(request: &CapacityRequest) -> Result<Target> {
    let loaded = dlio_config::load(
        &request
            .flags
            .load_args(request.words.clone(), request.config_dir.clone())?,
    )?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let config = &loaded.config;
    if !config.workflow.train {
        bail!(
            "workload {} does not train (workflow.train is False), so it has no AU to search \
             on; set ++workload.workflow.train=True",
            loaded.workload
        );
    }
    let out = match &request.out {
        Some(dir) => dir.clone(),
        None => PathBuf::from("capacity").join(format!(
            "{}-{}",
            loaded.workload.replace(['/', '\\'], "_"),
            chrono::Local::now().format("%Y%m%d-%H%M%S")
        )),
    };
    Ok(Target {
        workload: loaded.workload.clone(),
        threshold_percentage: config.metric.au * 100.0,
        generate_data: config.workflow.generate_data,
        tensorflow: config.reader.data_loader == dlio_config::DataLoaderKind::Tensorflow,
        out,
    })
}

/// Generates the dataset once when the workload asks for it, with one rank per core; the
/// points then train on it.
fn prepare_dataset(request: &CapacityRequest, target: &Target) -> Result<()> {
    if !target.generate_data {
        return Ok(());
    }
    let ranks = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let log = target.out.join("generate.log");
    println!(
        "Generating the dataset once ({} ranks), log in {}",
        ranks,
        log.display()
    );
    let mut command = Command::new(std::env::current_exe().context("finding this program")?);
    command
        .arg("generate")
        .arg("--ranks")
        .arg(ranks.to_string());
    add_config_flags(&mut command, request);
    command.args(&request.words).arg(format!(
        "++workload.output.folder={}",
        target.out.join("generate").display()
    ));
    run_child(command, &log)?.succeeded("generating the dataset", &log)
}

fn add_config_flags(command: &mut Command, request: &CapacityRequest) {
    if let Some(dir) = &request.config_dir {
        command.arg("--config-dir").arg(dir);
    }
    if request.flags.strict {
        command.arg("--strict");
    }
    if let Some(semantics) = request.flags.semantics {
        command.arg("--semantics").arg(semantics.as_str());
    }
}

/// Runs points and remembers them.
struct Prober<'a> {
    request: &'a CapacityRequest,
    target: &'a Target,
    /// The search's points by count (the sweep's are kept in its variants).
    points: BTreeMap<u32, Point>,
}

impl<'a> Prober<'a> {
    fn new(request: &'a CapacityRequest, target: &'a Target) -> Prober<'a> {
        Prober {
            request,
            target,
            points: BTreeMap::new(),
        }
    }

    fn largest_pass(&self) -> u32 {
        self.points
            .values()
            .filter(|p| p.passed)
            .map(|p| p.accelerators)
            .max()
            .unwrap_or(0)
    }

    /// The search's point at `accelerators`, run unless it was already.
    fn passes(&mut self, accelerators: u32) -> Result<bool> {
        if let Some(point) = self.points.get(&accelerators) {
            return Ok(point.passed);
        }
        let point = self.run_point(accelerators, None, self.request.repeats)?;
        let passed = point.passed;
        self.points.insert(accelerators, point);
        Ok(passed)
    }

    /// Runs up to `repeats` runs at `accelerators` (with one more override), stopping at the
    /// first that misses the expectation.
    fn run_point(&self, accelerators: u32, extra: Option<&str>, repeats: u32) -> Result<Point> {
        let mut point = Point {
            accelerators,
            repeats: Vec::new(),
            passed: false,
        };
        for repeat in 1..=repeats {
            let label = match extra {
                Some(word) => format!("sweep-{}", sanitize(word)),
                None => "points".to_owned(),
            };
            let output = self
                .target
                .out
                .join(label)
                .join(format!("accelerators-{accelerators}"))
                .join(format!("repeat-{repeat}"));
            let run = self.run_once(accelerators, extra, &output)?;
            let meets = run.meets_expectation;
            println!(
                "  {accelerators:>5} accelerators{}, run {repeat}/{repeats}: AU {:.2}% {}, {:.1} samples/s, {:.1} MiB/s, CPU {:.3} ms/sample, RSS {:.1} MiB/rank",
                extra.map(|w| format!(" ({w})")).unwrap_or_default(),
                run.au_percentage,
                if meets { "pass" } else { "FAIL" },
                run.samples_per_second,
                run.read_mib_per_second,
                run.cpu_ms_per_sample,
                run.rss_per_rank_mib,
            );
            point.repeats.push(run);
            if !meets {
                return Ok(point);
            }
        }
        point.passed = true;
        Ok(point)
    }

    fn run_once(&self, accelerators: u32, extra: Option<&str>, output: &Path) -> Result<Repeat> {
        std::fs::create_dir_all(output)
            .with_context(|| format!("creating {}", output.display()))?;
        let exe = std::env::current_exe().context("finding this program")?;
        let (mut command, ranks_per_process) = match &self.request.launcher {
            Some(template) => {
                let mut words = template
                    .split_whitespace()
                    .map(|w| w.replace("{n}", &accelerators.to_string()));
                let program = words.next().ok_or_else(|| {
                    anyhow!("--launcher is empty; give e.g. \"mpirun -np {{n}}\"")
                })?;
                let mut command = Command::new(program);
                command.args(words).arg(&exe).arg("run");
                (command, 1)
            }
            None => {
                let mut command = Command::new(&exe);
                command
                    .arg("run")
                    .arg("--ranks")
                    .arg(accelerators.to_string());
                (command, accelerators)
            }
        };
        add_config_flags(&mut command, self.request);
        command.args(&self.request.words);
        if self.target.generate_data {
            command.arg("++workload.workflow.generate_data=False");
        }
        if let Some(word) = extra {
            command.arg(word);
        }
        command.arg(format!("++workload.output.folder={}", output.display()));
        let log = output.join("dlio.log");
        let run = run_child(command, &log)?;
        run.succeeded(&format!("the run at {accelerators} accelerators"), &log)?;
        let summary_path = output.join("summary.json");
        let summary: Value = serde_json::from_slice(
            &std::fs::read(&summary_path)
                .with_context(|| format!("reading {}", summary_path.display()))?,
        )
        .with_context(|| format!("parsing {}", summary_path.display()))?;
        let number = |section: &str, key: &str| -> Result<f64> {
            summary[section][key].as_f64().ok_or_else(|| {
                anyhow!(
                    "{} has no number at {section}.{key}",
                    summary_path.display()
                )
            })
        };
        let samples = number("dlio_rs", "samples")?;
        Ok(Repeat {
            au_percentage: number("metric", "train_au_mean_percentage")?,
            meets_expectation: summary["metric"]["train_au_meet_expectation"] == "success",
            samples_per_second: number("metric", "train_throughput_mean_samples_per_second")?,
            read_mib_per_second: number("dlio_rs", "train_bytes_read_per_second")?
                / (1u64 << 20) as f64,
            cpu_seconds: run.cpu_seconds,
            cpu_ms_per_sample: if samples > 0.0 {
                run.cpu_seconds * 1e3 / samples
            } else {
                0.0
            },
            peak_rss_mib: run.peak_rss_kib as f64 / 1024.0,
            rss_per_rank_mib: run.peak_rss_kib as f64 / 1024.0 / f64::from(ranks_per_process),
            wall_seconds: run.wall_seconds,
            output: output.to_path_buf(),
        })
    }
}

/// Doubles from `min` while points pass, then bisects between the last pass and the first
/// failure; when `min` itself fails, bisects below it (0 passes by definition). Returns the
/// largest passing count and whether the search stopped at `max`.
fn search(prober: &mut Prober<'_>) -> Result<(u32, bool)> {
    let (min, max) = (prober.request.min, prober.request.max);
    let (mut low, mut high) = if prober.passes(min)? {
        let mut pass = min;
        loop {
            if pass == max {
                return Ok((max, true));
            }
            let next = pass.saturating_mul(2).min(max);
            if prober.passes(next)? {
                pass = next;
            } else {
                break (pass, next);
            }
        }
    } else {
        (0, min)
    };
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if prober.passes(mid)? {
            low = mid;
        } else {
            high = mid;
        }
    }
    Ok((low, false))
}

/// The CLOSED knobs MLPerf Storage lets a submitter tune, one at a time, at the first count
/// that failed: a setting that passes there raises the capacity. Each is run once to screen,
/// and the one with the highest AU is confirmed with the full repeats.
fn sweep(prober: &mut Prober<'_>, target: &Target, found: u32) -> Result<Vec<Variant>> {
    let at = found + 1;
    let mut words: Vec<String> = [1, 2, 4, 8]
        .iter()
        .map(|n| format!("++workload.reader.read_threads={n}"))
        .chain(
            [1, 2, 4, 8]
                .iter()
                .map(|n| format!("++workload.reader.prefetch_size={n}")),
        )
        .chain(
            [262_144, 1_048_576, 4_194_304]
                .iter()
                .map(|n| format!("++workload.reader.transfer_size={n}")),
        )
        .collect();
    if target.tensorflow {
        words.extend(
            [1, 2, 4]
                .iter()
                .map(|n| format!("++workload.reader.computation_threads={n}")),
        );
    }
    println!("Sweeping the CLOSED knobs at {at} accelerators (one run each)");
    let mut variants = Vec::new();
    for word in words {
        let point = prober.run_point(at, Some(&word), 1)?;
        variants.push(Variant {
            override_word: word,
            point,
        });
    }
    let best = variants
        .iter()
        .enumerate()
        .max_by(|(_, a), (_, b)| a.point.lowest_au().total_cmp(&b.point.lowest_au()))
        .map(|(i, _)| i);
    if let Some(i) = best
        && variants[i].point.passed
        && prober.request.repeats > 1
    {
        let word = variants[i].override_word.clone();
        println!("Confirming {word} at {at} accelerators");
        variants[i].point = prober.run_point(at, Some(&word), prober.request.repeats)?;
    }
    Ok(variants)
}

fn best_variant(variants: &[Variant]) -> Option<String> {
    variants
        .iter()
        .filter(|v| v.point.passed)
        .max_by(|a, b| a.point.lowest_au().total_cmp(&b.point.lowest_au()))
        .map(|v| v.override_word.clone())
}

/// Writes capacity.json and capacity.png and prints the table and the final line.
fn write_report(outcome: &Outcome, out: &Path) -> Result<()> {
    let json_path = out.join("capacity.json");
    let json = serde_json::to_vec_pretty(outcome).context("encoding capacity.json")?;
    crate::files::write_whole(&json_path, &json)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let series: Vec<dlio_analyze::CapacityPoint> = outcome
        .points
        .iter()
        .map(|p| dlio_analyze::CapacityPoint {
            accelerators: p.accelerators,
            lowest_au_percentage: p.lowest_au(),
            passed: p.passed,
        })
        .collect();
    let png_path = out.join("capacity.png");
    let plot_note = match dlio_analyze::capacity_png(&series, outcome.au_threshold_percentage) {
        Ok(png) => {
            crate::files::write_whole(&png_path, &png)
                .with_context(|| format!("writing {}", png_path.display()))?;
            format!("{}", png_path.display())
        }
        Err(e) => format!("no plot ({e})"),
    };
    println!();
    println!(
        "{:>12} {:>8} {:>10} {:>12} {:>10} {:>12} {:>12} {:>6}",
        "accelerators",
        "runs",
        "lowest AU%",
        "samples/s",
        "MiB/s",
        "CPU ms/smpl",
        "RSS MiB/rank",
        "pass"
    );
    for p in &outcome.points {
        println!(
            "{:>12} {:>8} {:>10.2} {:>12.1} {:>10.1} {:>12.4} {:>12.1} {:>6}",
            p.accelerators,
            p.repeats.len(),
            p.lowest_au(),
            p.mean(|r| r.samples_per_second),
            p.mean(|r| r.read_mib_per_second),
            p.mean(|r| r.cpu_ms_per_sample),
            p.mean(|r| r.rss_per_rank_mib),
            if p.passed { "yes" } else { "no" },
        );
    }
    for v in &outcome.sweep {
        println!(
            "  sweep {:<45} lowest AU {:>6.2}% {}",
            v.override_word,
            v.point.lowest_au(),
            if v.point.passed { "pass" } else { "fail" }
        );
    }
    println!("\nWrote {} and {}", json_path.display(), plot_note);
    if let Some(best) = &outcome.sweep_best {
        println!(
            "With {best}, {} accelerators pass too: run dlio capacity again with it to go further",
            outcome.accelerators + 1
        );
    }
    println!(
        "Capacity: {}{} accelerators of {} at AU >= {:.1}% in {} of {} runs per point",
        if outcome.capped_at_max { ">= " } else { "" },
        outcome.accelerators,
        outcome.workload,
        outcome.au_threshold_percentage,
        outcome.repeats_per_point,
        outcome.repeats_per_point
    );
    Ok(())
}

/// A file-name-safe form of an override.
fn sanitize(word: &str) -> String {
    word.trim_start_matches('+')
        .trim_start_matches("workload.")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The point's child running now (0: none), for [`forward_interrupts_to_children`].
static RUNNING_CHILD: AtomicI32 = AtomicI32::new(0);

/// Ctrl-C must end the search with a report, not kill it: the terminal sends SIGINT to the
/// child as well, which writes its incomplete summary and exits 130, and this process then
/// writes what it has. A SIGINT sent to this process alone is passed on to the running child.
fn forward_interrupts_to_children() {
    let _ = ctrlc::set_handler(|| {
        let pid = RUNNING_CHILD.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill(2) takes two integers and touches no memory. `pid` still names our
            // child: run_child clears it after the child has exited but before reaping it
            // (waitid with WNOWAIT), and an unreaped child's pid cannot be reused.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
    });
}

/// How a child ended.
struct ChildRun {
    code: Option<i32>,
    cpu_seconds: f64,
    peak_rss_kib: u64,
    wall_seconds: f64,
}

impl ChildRun {
    /// Ok when the child exited 0; [`Interrupted`] when Ctrl-C ended it; else the error for
    /// `what`, with the end of its `log`.
    fn succeeded(&self, what: &str, log: &Path) -> Result<()> {
        match self.code {
            Some(0) => Ok(()),
            Some(code) if code == i32::from(EXIT_INTERRUPTED) => Err(Interrupted.into()),
            _ => Err(child_failed(what, log)),
        }
    }
}

/// Runs `command` with its output in `log` and returns its exit code and its own resource
/// use (the kernel's figures for that child and the children it waited for).
fn run_child(mut command: Command, log: &Path) -> Result<ChildRun> {
    let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = file
        .try_clone()
        .with_context(|| format!("opening {}", log.display()))?;
    let started = Instant::now();
    let child = command
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {:?}", command.get_program()))?;
    let pid = child.id() as libc::pid_t;
    RUNNING_CHILD.store(pid, Ordering::SeqCst);
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct (integers and
    // timevals), which wait4 overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // Wait for the exit without reaping, so that the pid cannot be reused while the Ctrl-C
    // handler may still signal it; then reap it with its resource use.
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value of that plain C struct, which waitid
        // overwrites; `pid` is our unreaped child.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a live local of the type waitid writes.
        let waited = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if waited == 0 {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error).context("waiting for a point's run");
        }
    }
    RUNNING_CHILD.store(0, Ordering::SeqCst);
    loop {
        // SAFETY: `pid` is our own child, exited and not yet reaped (std's `Child` reaps only
        // in `wait`/`try_wait`, which are never called on it), and both pointers point to live
        // locals of the types wait4 writes.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error).context("waiting for a point's run");
        }
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let code = if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGINT {
        Some(i32::from(EXIT_INTERRUPTED))
    } else {
        None
    };
    drop(child);
    Ok(ChildRun {
        code,
        cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peak_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        wall_seconds,
    })
}

/// The error for a child that failed, with the end of its log.
fn child_failed(what: &str, log: &Path) -> anyhow::Error {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(12)..].join("\n");
    anyhow!(
        "{what} failed; the end of its log ({}):\n{tail}",
        log.display()
    )
}
