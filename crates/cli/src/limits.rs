//! The machine's limits on threads, checked before a run starts them.
//!
//! A thread that cannot get its memory maps is not an error Rust can return: the runtime
//! aborts the process ("failed to set up alternative stack guard page") once the process has
//! `vm.max_map_count` mappings. So the threads a run will start are counted up front and a run
//! that would pass a limit is refused with the figures and the fix.

use anyhow::{Result, bail};
use dlio_config::{Config, Sampler};

/// Memory maps one thread costs: its stack and guard page, its signal stack and guard page.
const MAPS_PER_THREAD: u64 = 4;
/// Maps and threads the process needs besides the ranks' threads (libraries, the allocator,
/// the tracer and progress threads, generation workers), kept free.
const RESERVED_MAPS: u64 = 4096;
const RESERVED_THREADS: u64 = 256;

/// The limits of this machine that bound the threads of one process, where they can be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadLimits {
    /// `vm.max_map_count`.
    pub max_map_count: Option<u64>,
    /// `kernel.threads-max`.
    pub threads_max: Option<u64>,
    /// The soft `ulimit -u` (RLIMIT_NPROC), counted over all of the user's threads.
    pub max_user_processes: Option<u64>,
}

impl ThreadLimits {
    /// Reads the limits from `/proc`; a limit that cannot be read is not checked.
    pub fn of_this_machine() -> ThreadLimits {
        let number = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        let max_user_processes =
            std::fs::read_to_string("/proc/self/limits")
                .ok()
                .and_then(|text| {
                    text.lines()
                        .find(|l| l.starts_with("Max processes"))
                        .and_then(|l| l.split_whitespace().nth(2))
                        .and_then(|soft| soft.parse::<u64>().ok())
                });
        ThreadLimits {
            max_map_count: number("/proc/sys/vm/max_map_count"),
            threads_max: number("/proc/sys/kernel/threads-max"),
            max_user_processes,
        }
    }

    /// The most threads a process may start under these limits.
    pub fn thread_budget(&self) -> Option<(u64, &'static str)> {
        let by_maps = self.max_map_count.map(|m| {
            (
                m.saturating_sub(RESERVED_MAPS) / MAPS_PER_THREAD,
                "vm.max_map_count",
            )
        });
        let by_threads = self
            .threads_max
            .map(|t| (t.saturating_sub(RESERVED_THREADS), "kernel.threads-max"));
        let by_user = self.max_user_processes.map(|u| {
            (
                u.saturating_sub(RESERVED_THREADS),
                "the user's process limit (ulimit -u)",
            )
        });
        [by_maps, by_threads, by_user]
            .into_iter()
            .flatten()
            .min_by_key(|(n, _)| *n)
    }
}

/// The threads a training run of `local_ranks` ranks in this process starts at least: one per
/// rank, its reader threads and, for the TFRecord stream pipeline, its file readers, parsers and
/// assembler.
pub fn training_threads(config: &Config, local_ranks: u32) -> u64 {
    let r = &config.reader;
    let readers = u64::from(r.read_threads);
    let per_rank = if config.checkpoint_only() {
        2 // the rank and its background checkpoint writer
    } else if config.sampler() == Sampler::FileShards {
        1 + readers.max(1) + u64::from(r.computation_threads.max(1)) + 1
    } else {
        1 + readers
    };
    u64::from(local_ranks) * per_rank
}

/// Refuses a run whose threads would pass this machine's limits, before any is started.
pub fn check_thread_budget(config: &Config, local_ranks: u32, limits: ThreadLimits) -> Result<()> {
    let needed = training_threads(config, local_ranks);
    let Some((budget, limit)) = limits.thread_budget() else {
        return Ok(());
    };
    if needed <= budget {
        return Ok(());
    }
    let per_rank = needed / u64::from(local_ranks.max(1));
    let raise = match limit {
        "vm.max_map_count" => format!(
            "or raise the limit: sysctl -w vm.max_map_count={}",
            (needed * MAPS_PER_THREAD + RESERVED_MAPS).next_power_of_two()
        ),
        "kernel.threads-max" => "or raise kernel.threads-max (sysctl)".to_string(),
        _ => "or raise `ulimit -u`".to_string(),
    };
    bail!(
        "this run would start {needed} threads in one process ({local_ranks} ranks x {per_rank}: \
         the rank and its reader threads), more than this machine allows ({budget}, set by \
         {limit}); lower --ranks or reader.read_threads, spread the ranks over processes \
         (mpirun), {raise}"
    )
}

/// Raises the soft limit on open files to the hard one, as a process that keeps many files
/// open should: readers keep a file open across samples where DLIO's do (`read_type: memory`,
/// the memory-mapped formats), and a data set of more files than the soft limit (often 1024)
/// would otherwise fail with "too many open files". A limit that cannot be read or raised is
/// left as it is; the error, if it comes, names the file that could not be opened.
pub fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a pointer to a live, aligned, writable
    // local of that type, and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur >= limit.rlim_max {
        return;
    }
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: setrlimit reads one `rlimit` through a pointer to a live, initialised local of
    // that type; raising the soft limit up to the hard one needs no privilege and changes no
    // memory of this process.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        raise_open_file_limit();
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as in raise_open_file_limit: one writable local rlimit.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert_eq!(limit.rlim_cur, limit.rlim_max);
    }

    fn config(read_threads: u32) -> Config {
        let mut c = Config::default();
        c.dataset.format = dlio_config::FormatKind::Npz;
        c.reader.read_threads = read_threads;
        c
    }

    #[test]
    fn thousands_of_ranks_past_the_map_limit_are_refused_with_the_fix() {
        let limits = ThreadLimits {
            max_map_count: Some(65530),
            threads_max: Some(192_729),
            max_user_processes: Some(96_364),
        };
        let e = check_thread_budget(&config(1), 8192, limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("16384 threads"), "{e}");
        assert!(e.contains("vm.max_map_count"), "{e}");
        assert!(e.contains("sysctl -w vm.max_map_count="), "{e}");
        let e = check_thread_budget(&config(20_000), 1, limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("20001 threads"), "{e}");
        assert!(check_thread_budget(&config(8), 64, limits).is_ok());
    }

    #[test]
    fn the_lowest_limit_decides() {
        let limits = ThreadLimits {
            max_map_count: Some(1 << 30),
            threads_max: Some(1 << 30),
            max_user_processes: Some(1000),
        };
        let e = check_thread_budget(&config(4), 200, limits)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ulimit -u"), "{e}");
        assert!(check_thread_budget(&config(4), 100, ThreadLimits::default()).is_ok());
    }
}
