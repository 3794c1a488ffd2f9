//! Whether the storage or the page cache served a run's reads: the block device under the
//! data folder is read from `/proc/diskstats` before the ranks start and after they end
//! ([`DeviceWatch`]), and the bytes it delivered are set against the bytes the ranks read
//! ([`page_cache_verdict`]).

use std::path::Path;

use dlio_storage::BlockDevice;
use serde_json::{Value, json};

/// The data folder's device and its read counter when the ranks started.
pub(crate) struct DeviceWatch {
    device: Option<BlockDevice>,
    before: Option<u64>,
}

impl DeviceWatch {
    /// Watches the device under `data_root`; `local` is false for object storage, which has
    /// no device here.
    pub(crate) fn start(data_root: &Path, local: bool) -> DeviceWatch {
        let device = local.then(|| BlockDevice::of(data_root)).flatten();
        let before = device.as_ref().and_then(BlockDevice::bytes_read);
        DeviceWatch { device, before }
    }

    /// This process's figures once the ranks have ended: the device and what it delivered
    /// since [`DeviceWatch::start`] (null when there is no device to read).
    pub(crate) fn figures(&self, hostname: &str) -> Value {
        let delivered = match (&self.device, self.before) {
            (Some(device), Some(before)) => device
                .bytes_read()
                .map(|after| after.saturating_sub(before)),
            _ => None,
        };
        json!({
            "host": hostname,
            "device": self.device.as_ref().map(|d| d.name.clone()),
            "bytes_delivered": delivered,
        })
    }
}

/// The `dlio_rs.page_cache` section and, when it can be told, the log line: `(section, line,
/// is_warning)`. `processes` holds each process's [`DeviceWatch::figures`] beside its bytes
/// read. A device's counters are host-wide, so each (host, device) counts once.
pub(crate) fn page_cache_verdict(processes: &[(Value, u64)]) -> (Value, Option<String>, bool) {
    let bytes_read: u64 = processes.iter().map(|(_, b)| b).sum();
    let mut seen = std::collections::BTreeMap::new();
    let mut unknown = false;
    for (figures, _) in processes {
        match (
            figures["device"].as_str(),
            figures["bytes_delivered"].as_u64(),
        ) {
            (Some(device), Some(delivered)) => {
                let host = figures["host"].as_str().unwrap_or_default().to_owned();
                seen.insert((host, device.to_owned()), delivered);
            }
            _ => unknown = true,
        }
    }
    let devices: Vec<Value> = seen
        .iter()
        .map(|((host, device), bytes)| json!({"host": host, "device": device, "bytes_delivered": bytes}))
        .collect();
    if unknown || seen.is_empty() || bytes_read == 0 {
        let section = json!({
            "bytes_read": bytes_read,
            "devices": devices,
            "device_bytes_delivered": null,
            "page_cache_fraction": null,
        });
        let line = (bytes_read > 0).then(|| {
            "Cannot tell whether the page cache served the reads: the data folder has no \
             block device with counters here (tmpfs, overlay, network or object storage)"
                .to_owned()
        });
        return (section, line, false);
    }
    let delivered: u64 = seen.values().sum();
    let cached = 1.0 - (delivered as f64 / bytes_read as f64).min(1.0);
    let section = json!({
        "bytes_read": bytes_read,
        "devices": devices,
        "device_bytes_delivered": delivered,
        "page_cache_fraction": cached,
    });
    const GIB: f64 = (1u64 << 30) as f64;
    let names: Vec<String> = seen.keys().map(|(_, d)| d.clone()).collect();
    let figures = format!(
        "The storage devices ({}) delivered {:.2} GiB of the {:.2} GiB read",
        names.join(", "),
        delivered as f64 / GIB,
        bytes_read as f64 / GIB
    );
    if cached >= 0.1 {
        let line = format!(
            "{figures}: {:.0}% of the reads came from the page cache, so these figures measure \
             memory, not storage (use storage.drop_page_cache, the direct engine, or a data \
             set of at least 5x the host memory)",
            cached * 100.0
        );
        (section, Some(line), true)
    } else {
        (section, Some(figures), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(
        host: &str,
        device: Option<&str>,
        delivered: Option<u64>,
        read: u64,
    ) -> (Value, u64) {
        (
            json!({"host": host, "device": device, "bytes_delivered": delivered}),
            read,
        )
    }

    #[test]
    fn a_run_served_by_memory_is_called_so() {
        let (section, line, warn) =
            page_cache_verdict(&[process("a", Some("vda"), Some(1 << 20), 100 << 20)]);
        assert!(warn);
        assert!(
            line.unwrap()
                .contains("99% of the reads came from the page cache")
        );
        assert!((section["page_cache_fraction"].as_f64().unwrap() - 0.99).abs() < 1e-9);
    }

    #[test]
    fn processes_of_one_host_share_its_device_counters() {
        // Two processes on host a see the same host-wide 200 MiB; host b's device 100 MiB.
        let (section, line, warn) = page_cache_verdict(&[
            process("a", Some("vda"), Some(200 << 20), 100 << 20),
            process("a", Some("vda"), Some(200 << 20), 100 << 20),
            process("b", Some("vda"), Some(100 << 20), 100 << 20),
        ]);
        assert!(!warn, "{line:?}");
        assert_eq!(section["device_bytes_delivered"], 300u64 << 20);
        assert_eq!(section["page_cache_fraction"], 0.0);
    }

    #[test]
    fn without_a_device_it_says_it_cannot_tell() {
        let (section, line, warn) = page_cache_verdict(&[process("a", None, None, 5)]);
        assert!(!warn);
        assert!(line.unwrap().starts_with("Cannot tell"));
        assert!(section["page_cache_fraction"].is_null());
    }
}
