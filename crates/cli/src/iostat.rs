//! The `iostat` profiler (`workflow.profiling: True`, `profiling.profiler: iostat`), done
//! natively: where DLIO runs `iostat -mdxtcy -o JSON DEVICES 1` on rank 0 for the measured
//! phase, a thread of process 0 reads `/proc/diskstats` and `/proc/stat` once a second and
//! turns each interval's counter deltas into sysstat's extended device figures and CPU
//! split. `iostat.json` in the output folder is written in sysstat's JSON layout, so DLIO's
//! own `dlio_postprocessor` reads it as well as ours does.
//!
//! Why by hand: sysstat is a C program, not a library, and the arithmetic is a few lines per
//! field over two kernel text files; no crate writes sysstat's JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dlio_storage::{DiskCounters, disk_counters};
use serde_json::{Value, json};

/// The `cpu` line of `/proc/stat` (clock ticks since boot).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct CpuTicks {
    user: u64,
    nice: u64,
    system: u64,
    idle: u64,
    iowait: u64,
    irq: u64,
    softirq: u64,
    steal: u64,
    guest: u64,
    guest_nice: u64,
}

pub(crate) fn parse_cpu(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let n = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTicks {
        user: n(0),
        nice: n(1),
        system: n(2),
        idle: n(3),
        iowait: n(4),
        irq: n(5),
        softirq: n(6),
        steal: n(7),
        guest: n(8),
        guest_nice: n(9),
    })
}

/// Two decimals, as sysstat prints every figure.
fn r2(x: f64) -> f64 {
    if x.is_finite() {
        (x * 100.0).round() / 100.0
    } else {
        0.0
    }
}

/// sysstat's `avg-cpu` over an interval: user and nice without guest time (which the kernel
/// counts in both), system with interrupt time, each as a percentage of all ticks.
pub(crate) fn cpu_figures(a: &CpuTicks, b: &CpuTicks) -> Value {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let user = (d(a.user, b.user) - d(a.guest, b.guest)).max(0.0);
    let nice = (d(a.nice, b.nice) - d(a.guest_nice, b.guest_nice)).max(0.0);
    let system = d(a.system, b.system) + d(a.irq, b.irq) + d(a.softirq, b.softirq);
    let (iowait, steal, idle) = (
        d(a.iowait, b.iowait),
        d(a.steal, b.steal),
        d(a.idle, b.idle),
    );
    let guest = d(a.guest, b.guest) + d(a.guest_nice, b.guest_nice);
    let total = user + nice + system + iowait + steal + idle + guest;
    let pct = |x: f64| {
        if total > 0.0 {
            r2(100.0 * x / total)
        } else {
            0.0
        }
    };
    json!({
        "user": pct(user), "nice": pct(nice), "system": pct(system),
        "iowait": pct(iowait), "steal": pct(steal), "idle": pct(idle),
    })
}

/// sysstat's extended device figures (`iostat -dxm`) of `name` over `seconds`.
pub(crate) fn disk_figures(name: &str, a: &DiskCounters, b: &DiskCounters, seconds: f64) -> Value {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let per_s = |x: f64| if seconds > 0.0 { r2(x / seconds) } else { 0.0 };
    let ratio = |x: f64, y: f64| if y > 0.0 { r2(x / y) } else { 0.0 };
    let mib = |sectors: f64| sectors * 512.0 / 1_048_576.0;
    let kib = |sectors: f64| sectors * 512.0 / 1024.0;
    let (rd, wr, dc, fl) = (
        d(a.reads, b.reads),
        d(a.writes, b.writes),
        d(a.discards, b.discards),
        d(a.flushes, b.flushes),
    );
    let (rm, wm, dm) = (
        d(a.reads_merged, b.reads_merged),
        d(a.writes_merged, b.writes_merged),
        d(a.discards_merged, b.discards_merged),
    );
    let (rs, ws, ds) = (
        d(a.sectors_read, b.sectors_read),
        d(a.sectors_written, b.sectors_written),
        d(a.sectors_discarded, b.sectors_discarded),
    );
    json!({
        "disk_device": name,
        "r/s": per_s(rd), "w/s": per_s(wr), "d/s": per_s(dc), "f/s": per_s(fl),
        "rMB/s": per_s(mib(rs)), "wMB/s": per_s(mib(ws)), "dMB/s": per_s(mib(ds)),
        "rrqm/s": per_s(rm), "wrqm/s": per_s(wm), "drqm/s": per_s(dm),
        "rrqm": ratio(100.0 * rm, rm + rd), "wrqm": ratio(100.0 * wm, wm + wr),
        "drqm": ratio(100.0 * dm, dm + dc),
        "r_await": ratio(d(a.ms_reading, b.ms_reading), rd),
        "w_await": ratio(d(a.ms_writing, b.ms_writing), wr),
        "d_await": ratio(d(a.ms_discarding, b.ms_discarding), dc),
        "f_await": ratio(d(a.ms_flushing, b.ms_flushing), fl),
        "rareq-sz": ratio(kib(rs), rd), "wareq-sz": ratio(kib(ws), wr),
        "dareq-sz": ratio(kib(ds), dc),
        "aqu-sz": per_s(d(a.weighted_ms, b.weighted_ms) / 1000.0),
        "util": per_s(100.0 * d(a.ms_doing_io, b.ms_doing_io) / 1000.0).min(100.0),
    })
}

/// What the profiler samples.
struct Sample {
    at: Instant,
    wall: chrono::DateTime<chrono::Local>,
    disks: BTreeMap<String, DiskCounters>,
    cpu: CpuTicks,
}

fn sample() -> Result<Sample> {
    let disks = std::fs::read_to_string("/proc/diskstats").context("reading /proc/diskstats")?;
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    Ok(Sample {
        at: Instant::now(),
        wall: chrono::Local::now(),
        disks: disk_counters(&disks),
        cpu: parse_cpu(&stat).context("/proc/stat has no `cpu` line")?,
    })
}

/// The devices to report: those named (`profiling.iostat_devices`; each must exist), or,
/// as iostat does without names, every whole device (one in `/sys/block`) that has done any
/// I/O since boot.
fn chosen_devices(named: &[String], first: &BTreeMap<String, DiskCounters>) -> Result<Vec<String>> {
    if !named.is_empty() {
        for name in named {
            if !first.contains_key(name) {
                bail!(
                    "profiling.iostat_devices names `{name}`, which is not in /proc/diskstats \
                     (devices here: {}); name a device from that list or leave the key empty \
                     for all of them",
                    first.keys().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
        return Ok(named.to_vec());
    }
    Ok(first
        .iter()
        .filter(|(name, c)| {
            Path::new("/sys/block").join(name).exists() && (c.reads > 0 || c.writes > 0)
        })
        .map(|(name, _)| name.clone())
        .collect())
}

/// One interval's record, as sysstat writes it under `statistics`.
fn interval_record(a: &Sample, b: &Sample, devices: &[String]) -> Value {
    let seconds = (b.at - a.at).as_secs_f64();
    let disks: Vec<Value> = devices
        .iter()
        .map(|name| {
            let zero = DiskCounters::default();
            let x = a.disks.get(name).unwrap_or(&zero);
            let y = b.disks.get(name).unwrap_or(&zero);
            disk_figures(name, x, y, seconds)
        })
        .collect();
    json!({
        "timestamp": b.wall.format("%m/%d/%y %H:%M:%S").to_string(),
        // Not in sysstat's output (its interval is the command line's): the measured length,
        // so that rates times it give the interval's counts back.
        "interval_seconds": (seconds * 1e6).round() / 1e6,
        "avg-cpu": cpu_figures(&a.cpu, &b.cpu),
        "disk": disks,
    })
}

/// The sampling thread of a run, and where it writes.
pub(crate) struct IostatProfiler {
    stop: Sender<()>,
    thread: JoinHandle<Result<Vec<Value>>>,
    devices: Vec<String>,
    path: PathBuf,
}

/// The interval between reports: iostat's `1` in DLIO's command line.
const INTERVAL: Duration = Duration::from_secs(1);

/// The last interval is reported when at least this long (iostat drops it on SIGINT; a run
/// shorter than a second would otherwise have no figures at all).
const LAST_INTERVAL_AT_LEAST: Duration = Duration::from_millis(100);

impl IostatProfiler {
    /// Starts sampling; the figures go to `path` at [`IostatProfiler::finish`].
    pub(crate) fn start(path: PathBuf, named: &[String]) -> Result<IostatProfiler> {
        let first = sample()?;
        let devices = chosen_devices(named, &first.disks)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread_devices = devices.clone();
        let thread = std::thread::Builder::new()
            .name("dlio-iostat".into())
            .spawn(move || -> Result<Vec<Value>> {
                let mut records = Vec::new();
                let mut last = first;
                loop {
                    let due = last.at + INTERVAL;
                    let wait = due.saturating_duration_since(Instant::now());
                    let ending = match stopped.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => false,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                    };
                    let now = sample()?;
                    if !ending || now.at - last.at >= LAST_INTERVAL_AT_LEAST {
                        records.push(interval_record(&last, &now, &thread_devices));
                    }
                    if ending {
                        return Ok(records);
                    }
                    last = now;
                }
            })
            .context("starting the iostat profiler's thread")?;
        Ok(IostatProfiler {
            stop,
            thread,
            devices,
            path,
        })
    }

    /// Stops sampling and writes `iostat.json`; returns how many intervals it holds.
    pub(crate) fn finish(self, hostname: &str) -> Result<usize> {
        let _ = self.stop.send(());
        let records = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the iostat profiler's thread panicked"))??;
        let count = records.len();
        let now = chrono::Local::now();
        let doc = json!({
            "sysstat": {
                "hosts": [{
                    "nodename": hostname,
                    "sysname": "Linux",
                    "release": std::fs::read_to_string("/proc/sys/kernel/osrelease")
                        .map(|s| s.trim().to_string())
                        .unwrap_or_default(),
                    "machine": std::env::consts::ARCH,
                    "number-of-cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
                    "date": now.format("%m/%d/%y").to_string(),
                    "statistics": records,
                }]
            }
        });
        let text = serde_json::to_string_pretty(&doc).context("writing iostat.json")?;
        crate::files::write_whole(&self.path, text.as_bytes())
            .with_context(|| format!("writing {}", self.path.display()))?;
        Ok(count)
    }

    /// The devices reported.
    pub(crate) fn devices(&self) -> &[String] {
        &self.devices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str =
        "   8       0 sda 1000 10 80000 500 200 20 16000 400 0 900 1000 0 0 0 0 0 0\n";
    const AFTER: &str =
        "   8       0 sda 1100 30 100480 700 300 20 24192 600 0 1400 1600 4 0 8 2 10 3\n";

    #[test]
    fn device_figures_are_iostats_arithmetic_over_the_deltas() {
        let a = disk_counters(BEFORE)["sda"];
        let b = disk_counters(AFTER)["sda"];
        let v = disk_figures("sda", &a, &b, 2.0);
        // 100 reads of 20480 sectors (10 MiB) in 2 s, 200 ms of read time.
        assert_eq!(v["r/s"], 50.0);
        assert_eq!(v["rMB/s"], 5.0);
        assert_eq!(v["r_await"], 2.0);
        assert_eq!(v["rareq-sz"], 102.4);
        assert_eq!(v["rrqm/s"], 10.0);
        assert_eq!(v["rrqm"], r2(100.0 * 20.0 / 120.0));
        // 100 writes of 8192 sectors (4 MiB), 200 ms.
        assert_eq!(v["w/s"], 50.0);
        assert_eq!(v["wMB/s"], 2.0);
        assert_eq!(v["w_await"], 2.0);
        // 600 weighted ms in 2 s; 500 ms busy of 2000.
        assert_eq!(v["aqu-sz"], 0.3);
        assert_eq!(v["util"], 25.0);
        assert_eq!(v["d/s"], 2.0);
        // 10 flushes taking 3 ms in all.
        assert_eq!(v["f/s"], 5.0);
        assert_eq!(v["f_await"], 0.3);
    }

    #[test]
    fn cpu_split_is_a_percentage_of_all_ticks_without_guest_twice() {
        let a = parse_cpu("cpu  100 0 50 800 10 0 0 0 0 0\n").unwrap();
        let b = parse_cpu("cpu  160 0 70 900 30 5 5 0 20 0\n").unwrap();
        let v = cpu_figures(&a, &b);
        // deltas: user 60 (guest 20 inside it), system 20 + irq 5 + softirq 5, idle 100,
        // iowait 20: 210 ticks, the guest's counted once.
        assert_eq!(v["user"], r2(100.0 * 40.0 / 210.0));
        assert_eq!(v["system"], r2(100.0 * 30.0 / 210.0));
        assert_eq!(v["iowait"], r2(100.0 * 20.0 / 210.0));
        assert_eq!(v["idle"], r2(100.0 * 100.0 / 210.0));
    }

    #[test]
    fn an_unknown_device_is_refused_with_the_known_ones() {
        let first = disk_counters(BEFORE);
        let err = chosen_devices(&["nvme9n1".into()], &first)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nvme9n1") && err.contains("sda"), "{err}");
    }
}
