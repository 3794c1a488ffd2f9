//! `dlio trace [--out DIR] -- CMD [ARGS...]`: runs any program with the interposer library
//! (`dlio-interpose`) preloaded, so that its file I/O lands in DIR as dftracer-format traces,
//! one per process, for `dlio characterize` and `dlio fidelity`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The interposer's file name, as cargo builds it.
pub const INTERPOSER_FILE: &str = "libdlio_interpose.so";

/// What to trace.
#[derive(Debug, Clone)]
pub struct TraceRequest {
    /// Where the traces go (created; must hold no traces yet).
    pub out: PathBuf,
    /// The program and its arguments.
    pub command: Vec<String>,
}

/// The interposer library: `DLIO_INTERPOSE_LIB`, else beside this binary (cargo's target
/// folder, where `cargo build -p dlio-interpose` puts it) or in `../lib/dlio/` of it.
pub fn interposer_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("DLIO_INTERPOSE_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "DLIO_INTERPOSE_LIB names {}, which is not a file; point it at {INTERPOSER_FILE}",
                p.display()
            );
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("finding this program's own path")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join(INTERPOSER_FILE),
        dir.join("../lib/dlio").join(INTERPOSER_FILE),
        // Test binaries run from target/{profile}/deps.
        dir.join("..").join(INTERPOSER_FILE),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "the interposer library {INTERPOSER_FILE} is not beside {} (looked in {}); \
                 build it with `cargo build --release -p dlio-interpose` (the same profile as \
                 dlio) or set DLIO_INTERPOSE_LIB to its path",
                exe.display(),
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Runs the program under the interposer and returns its exit code (128 + the signal for a
/// program that a signal ended, 127 when it cannot be started).
pub fn trace(request: &TraceRequest) -> Result<ExitCode> {
    let Some((program, args)) = request.command.split_first() else {
        bail!("name the program to trace after `--`, e.g. `dlio trace -- python3 train.py`");
    };
    let library = interposer_path()?;
    prepare_out(&request.out)?;
    let out = std::fs::canonicalize(&request.out)
        .with_context(|| format!("resolving {}", request.out.display()))?;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", library.display()),
        _ => library.display().to_string(),
    };
    let started = Instant::now();
    let status = match Command::new(program)
        .args(args)
        .env("DLIO_TRACE_DIR", &out)
        .env("LD_PRELOAD", preload)
        .status()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dlio trace: cannot start `{program}`: {e}");
            return Ok(ExitCode::from(127));
        }
    };
    let wall = started.elapsed().as_secs_f64();
    let code = exit_code(status);
    wait_for_stragglers(&out);
    let found = count_traces(&out)?;
    let meta = serde_json::json!({
        "command": request.command,
        "exit_code": code,
        "wall_seconds": wall,
        "traces": found.complete,
        "incomplete_traces": found.partial,
        "events": found.events,
    });
    let meta_path = out.join("dlio-trace.json");
    std::fs::write(&meta_path, serde_json::to_vec_pretty(&meta)?)
        .with_context(|| format!("writing {}", meta_path.display()))?;
    eprintln!(
        "dlio trace: `{}` exited with {code} after {wall:.2} s; {} events from {} processes in {}",
        request.command.join(" "),
        found.events,
        found.complete,
        out.display()
    );
    if found.partial > 0 {
        eprintln!(
            "dlio trace: {} traces are incomplete (*.pfw.partial: processes that were killed, or \
             whose trace could not be written); dlio characterize reads only the complete ones",
            found.partial
        );
    }
    if found.complete == 0 {
        eprintln!(
            "dlio trace: no process wrote a trace: a statically linked program, or one that \
             clears LD_PRELOAD, cannot be traced this way"
        );
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// Longest wait for processes the program left running (multiprocessing's resource tracker and
/// forkserver end just after it) to complete their traces.
const STRAGGLER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits while an incomplete trace belongs to a process that is still running, up to
/// [`STRAGGLER_WAIT`]; traces of processes that are gone stay incomplete.
fn wait_for_stragglers(out: &Path) {
    let deadline = Instant::now() + STRAGGLER_WAIT;
    loop {
        let running = std::fs::read_dir(out)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| pid_of_partial(&e.file_name().to_string_lossy()))
            // SAFETY: kill with signal 0 only checks that the process exists.
            .any(|pid| unsafe { libc::kill(pid, 0) } == 0);
        if !running || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The pid in `trace-{host}-{pid}-{start}.pfw.partial`.
fn pid_of_partial(name: &str) -> Option<i32> {
    let stem = name.strip_suffix(".pfw.partial")?;
    let mut parts = stem.rsplitn(3, '-');
    let _start = parts.next()?;
    parts.next()?.parse().ok()
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn prepare_out(out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let held = std::fs::read_dir(out)
        .with_context(|| format!("listing {}", out.display()))?
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".pfw") || name.ends_with(".pfw.gz") || name.ends_with(".pfw.partial")
        })
        .count();
    if held > 0 {
        bail!(
            "{} already holds {held} traces; name a new folder with --out (or empty this one), \
             so that one folder is one traced run",
            out.display()
        );
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Found {
    complete: u64,
    partial: u64,
    events: u64,
}

fn count_traces(out: &Path) -> Result<Found> {
    let mut found = Found::default();
    for entry in std::fs::read_dir(out).with_context(|| format!("listing {}", out.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".pfw.partial") {
            found.partial += 1;
        } else if name.ends_with(".pfw") {
            found.complete += 1;
            // Line by line: a trace can be far larger than memory should hold at once.
            let file = std::fs::File::open(entry.path())
                .with_context(|| format!("reading {}", entry.path().display()))?;
            for line in std::io::BufRead::split(std::io::BufReader::new(file), b'\n') {
                let line = line.with_context(|| format!("reading {}", entry.path().display()))?;
                found.events += u64::from(line.starts_with(b"{"));
            }
        }
    }
    Ok(found)
}
