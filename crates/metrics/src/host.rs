//! What DLIO records about the host: name, CPUs, memory, `/proc/cpuinfo`, `/proc/meminfo`.

use std::path::Path;

use serde_json::{Map, Value};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// MLPerf Storage asks for a dataset of at least this many times the clients' memory.
pub const MLPERF_DATASET_MEMORY_MULTIPLE: u64 = 5;

/// The host fields of `summary.json` and `{rank}_output.json`.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// Logical CPUs.
    pub cpu_count: u32,
    /// CPU model (`model name` of `/proc/cpuinfo`, else the architecture).
    pub processor_name: String,
    /// Total memory (`MemTotal`), 0 when unknown.
    pub memory_bytes: u64,
    /// `/proc/cpuinfo` as `key: value` pairs (the last CPU's values win, as in DLIO).
    pub cpuinfo: Map<String, Value>,
    /// `/proc/meminfo` as `key: value` pairs, values kept as text (`"16318412 kB"`).
    pub meminfo: Map<String, Value>,
}

impl HostInfo {
    /// Reads the host's facts from `/proc`; anything missing is left empty or zero.
    pub fn detect() -> Self {
        let cpuinfo_text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo_text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let hostname = ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .into_iter()
            .filter_map(|path| std::fs::read_to_string(path).ok())
            .map(|name| name.trim().to_owned())
            .find(|name| !name.is_empty())
            .unwrap_or_else(|| "localhost".to_owned());
        Self::from_proc(&cpuinfo_text, &meminfo_text, hostname)
    }

    /// Builds the host facts from the text of `/proc/cpuinfo` and `/proc/meminfo`.
    pub fn from_proc(cpuinfo_text: &str, meminfo_text: &str, hostname: String) -> Self {
        let listed_cpus = cpuinfo_text
            .lines()
            .filter(|line| {
                line.split_once(':')
                    .is_some_and(|(k, _)| k.trim() == "processor")
            })
            .count();
        let cpu_count = if listed_cpus > 0 {
            listed_cpus
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        };
        let cpuinfo = parse_proc_map(cpuinfo_text);
        let meminfo = parse_proc_map(meminfo_text);
        let processor_name = cpuinfo
            .get("model name")
            .and_then(Value::as_str)
            .unwrap_or(std::env::consts::ARCH)
            .to_owned();
        let memory_bytes = meminfo
            .get("MemTotal")
            .and_then(Value::as_str)
            .and_then(kib_to_bytes)
            .unwrap_or(0);
        Self {
            hostname,
            cpu_count: u32::try_from(cpu_count).unwrap_or(u32::MAX),
            processor_name,
            memory_bytes,
            cpuinfo,
            meminfo,
        }
    }

    /// Total memory in GiB (DLIO's `host_memory_GB`).
    pub fn memory_gb(&self) -> f64 {
        self.memory_bytes as f64 / GIB
    }

    /// DLIO's `potential_caching`: true when the host's memory is larger than the data it
    /// reads, so epochs after the first may be served from the page cache.
    pub fn may_cache(&self, data_bytes_per_host: u64) -> bool {
        self.memory_bytes > data_bytes_per_host
    }
}

/// The warning to log when the data a host reads could sit in its page cache, or when it is
/// smaller than MLPerf Storage's rule (dataset at least 5x the host memory). `None` when the
/// dataset is large enough or the host memory is unknown.
pub fn caching_warning(host: &HostInfo, data_bytes_per_host: u64) -> Option<String> {
    if host.memory_bytes == 0 {
        return None;
    }
    let data_gb = data_bytes_per_host as f64 / GIB;
    let memory_gb = host.memory_gb();
    let required_gb = memory_gb * MLPERF_DATASET_MEMORY_MULTIPLE as f64;
    if host.may_cache(data_bytes_per_host) {
        Some(format!(
            "The dataset each host reads ({data_gb:.4} GB) fits in its memory ({memory_gb:.4} GB): \
             data might be cached after the first epoch, so later epochs can measure the page \
             cache instead of the storage. Grow the dataset (MLPerf Storage requires at least \
             {MLPERF_DATASET_MEMORY_MULTIPLE}x the host memory: {required_gb:.4} GB), or read \
             with O_DIRECT."
        ))
    } else if data_bytes_per_host / MLPERF_DATASET_MEMORY_MULTIPLE < host.memory_bytes {
        Some(format!(
            "The dataset each host reads ({data_gb:.4} GB) is less than \
             {MLPERF_DATASET_MEMORY_MULTIPLE}x its memory ({memory_gb:.4} GB); part of it may be \
             served from the page cache, and MLPerf Storage requires at least {required_gb:.4} GB."
        ))
    } else {
        None
    }
}

/// Reads a `/proc` file of `key: value` lines into a map; an unreadable file gives an empty
/// map.
pub(crate) fn read_proc_map(path: impl AsRef<Path>) -> Map<String, Value> {
    std::fs::read_to_string(path)
        .map(|text| parse_proc_map(&text))
        .unwrap_or_default()
}

/// `key: value` lines to a map of strings, trimmed; the `processor` key is skipped and
/// repeated keys keep their last value (DLIO's behaviour on `/proc/cpuinfo`).
fn parse_proc_map(text: &str) -> Map<String, Value> {
    let mut map = Map::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key == "processor" {
            continue;
        }
        map.insert(key.to_owned(), Value::String(value.trim().to_owned()));
    }
    map
}

/// `"16318412 kB"` to bytes.
fn kib_to_bytes(text: &str) -> Option<u64> {
    let number = text.split_whitespace().next()?.parse::<u64>().ok()?;
    number.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nmodel name\t: Test CPU @ 2.0GHz\nflags\t\t: fpu vme\n\n\
                           processor\t: 1\nmodel name\t: Test CPU @ 2.0GHz\nflags\t\t: fpu vme\n";
    const MEMINFO: &str = "MemTotal:       16318412 kB\nMemFree:         1000 kB\n";

    #[test]
    fn proc_text_gives_cpu_count_model_and_memory() {
        let host = HostInfo::from_proc(CPUINFO, MEMINFO, "node1".to_owned());
        assert_eq!(host.cpu_count, 2);
        assert_eq!(host.processor_name, "Test CPU @ 2.0GHz");
        assert_eq!(host.memory_bytes, 16_318_412 * 1024);
        assert_eq!(host.meminfo["MemFree"], "1000 kB");
        assert_eq!(host.cpuinfo["flags"], "fpu vme");
        assert!(!host.cpuinfo.contains_key("processor"));
    }

    #[test]
    fn missing_proc_files_give_empty_maps_not_a_panic() {
        let host = HostInfo::from_proc("", "", "h".to_owned());
        assert!(host.cpuinfo.is_empty() && host.meminfo.is_empty());
        assert_eq!(host.memory_bytes, 0);
        assert!(host.cpu_count >= 1);
        assert!(read_proc_map("/nonexistent/meminfo").is_empty());
    }

    #[test]
    fn caching_warning_names_the_page_cache_and_the_5x_rule() {
        let host = HostInfo {
            memory_bytes: 10 << 30,
            ..HostInfo::default()
        };
        let small = caching_warning(&host, 4 << 30).unwrap_or_default();
        assert!(small.contains("cached after the first epoch"), "{small}");
        assert!(small.contains("5x"), "{small}");
        let medium = caching_warning(&host, 20 << 30).unwrap_or_default();
        assert!(medium.contains("less than 5x"), "{medium}");
        assert_eq!(caching_warning(&host, 50 << 30), None);
        assert_eq!(caching_warning(&HostInfo::default(), 1), None);
    }
}

/// One host of a run and the ranks it ran (several hosts under MPI).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct HostShare {
    /// The host's facts.
    pub host: HostInfo,
    /// Global ranks that ran on it.
    pub ranks: Vec<u32>,
}

/// Groups per-process host facts by host name (processes on one node report the same host),
/// keeping the first process's facts; hosts come in order of their lowest rank.
pub fn group_hosts(per_process: Vec<HostShare>) -> Vec<HostShare> {
    let mut hosts: Vec<HostShare> = Vec::new();
    for share in per_process {
        match hosts
            .iter_mut()
            .find(|h| h.host.hostname == share.host.hostname)
        {
            Some(h) => h.ranks.extend(share.ranks),
            None => hosts.push(share),
        }
    }
    for h in &mut hosts {
        h.ranks.sort_unstable();
    }
    hosts.sort_by_key(|h| h.ranks.first().copied().unwrap_or(u32::MAX));
    hosts
}
