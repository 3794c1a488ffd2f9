//! What the block device under a folder delivered (`/proc/diskstats`), to tell a run that
//! measured storage from one that measured the page cache: bytes read through the engine that
//! the device did not deliver came from memory.
//!
//! The device is the one `stat` names for the folder (a partition, an LVM or md device); its
//! counters are host-wide, so other programs' reads on it count too: the figure is an upper
//! bound on what the run's reads cost the device. File systems without a block device of their
//! own (tmpfs, overlay, NFS, btrfs's anonymous devices) have no counters to read.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The block device holding a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    /// Its name in `/proc/diskstats` (`vda1`, `dm-0`, `nvme0n1p2`).
    pub name: String,
    major: u32,
    minor: u32,
}

impl BlockDevice {
    /// The device under `path`, or `None` when the path's file system has none with
    /// counters (or `path` does not exist).
    pub fn of(path: &Path) -> Option<BlockDevice> {
        let dev = std::fs::metadata(path).ok()?.dev();
        let (major, minor) = split_dev(dev);
        if major == 0 {
            return None;
        }
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        let (name, _) = sectors_read(&text, major, minor)?;
        Some(BlockDevice { name, major, minor })
    }

    /// Bytes the device has delivered to reads since boot.
    pub fn bytes_read(&self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        let (_, sectors) = sectors_read(&text, self.major, self.minor)?;
        // diskstats counts 512-byte sectors whatever the device's own sector size.
        Some(sectors.saturating_mul(512))
    }
}

/// Linux's `dev_t` encoding (glibc's `gnu_dev_major`/`gnu_dev_minor`).
fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// The name and sectors read of device `major:minor` in a `/proc/diskstats` text.
fn sectors_read(text: &str, major: u32, minor: u32) -> Option<(String, u64)> {
    text.lines().find_map(|line| {
        let (ma, mi, name, counters) = parse_line(line)?;
        (ma == major && mi == minor).then(|| (name.to_owned(), counters.sectors_read))
    })
}

/// One device's counters in `/proc/diskstats`, since boot (the kernel's
/// Documentation/admin-guide/iostats.rst; the discard and flush fields are 0 on kernels that
/// do not have them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)] // the kernel's field names
pub struct DiskCounters {
    pub reads: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub ms_reading: u64,
    pub writes: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub ms_writing: u64,
    pub ms_doing_io: u64,
    pub weighted_ms: u64,
    pub discards: u64,
    pub discards_merged: u64,
    pub sectors_discarded: u64,
    pub ms_discarding: u64,
    pub flushes: u64,
    pub ms_flushing: u64,
}

/// Every device's counters in a `/proc/diskstats` text, by name.
pub fn disk_counters(text: &str) -> std::collections::BTreeMap<String, DiskCounters> {
    text.lines()
        .filter_map(parse_line)
        .map(|(_, _, name, counters)| (name.to_owned(), counters))
        .collect()
}

/// Major, minor, name and counters of one `/proc/diskstats` line.
fn parse_line(line: &str) -> Option<(u32, u32, &str, DiskCounters)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 14 {
        return None;
    }
    let n = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let counters = DiskCounters {
        reads: n(3),
        reads_merged: n(4),
        sectors_read: n(5),
        ms_reading: n(6),
        writes: n(7),
        writes_merged: n(8),
        sectors_written: n(9),
        ms_writing: n(10),
        ms_doing_io: n(12),
        weighted_ms: n(13),
        discards: n(14),
        discards_merged: n(15),
        sectors_discarded: n(16),
        ms_discarding: n(17),
        flushes: n(18),
        ms_flushing: n(19),
    };
    Some((
        fields[0].parse().ok()?,
        fields[1].parse().ok()?,
        fields[2],
        counters,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_sectors_read_of_the_named_device() {
        let text = "   7       0 loop0 12 0 40 1 0 0 0 0 0 4 1 0 0 0 0 0 0\n \
                    254       0 vda 90210 1200 7654321 40000 5 6 7 8 0 9 10 0 0 0 0 0 0\n \
                    254       1 vda1 80000 1000 7000000 39000 5 6 7 8 0 9 10 0 0 0 0 0 0\n";
        assert_eq!(sectors_read(text, 254, 1), Some(("vda1".into(), 7_000_000)));
        assert_eq!(sectors_read(text, 254, 0), Some(("vda".into(), 7_654_321)));
        assert_eq!(sectors_read(text, 8, 0), None);
    }

    #[test]
    fn splits_dev_t_as_glibc_does() {
        // makedev(254, 1) and makedev(4100, 65538) (large numbers use the high bits).
        assert_eq!(split_dev(0xfe01), (254, 1));
        let makedev = |major: u64, minor: u64| {
            (major & 0xfff) << 8 | (major & !0xfff) << 32 | (minor & 0xff) | (minor & !0xff) << 12
        };
        assert_eq!(split_dev(makedev(254, 1)), (254, 1));
        let dev = makedev(4100, 65538);
        assert_eq!(split_dev(dev), (4100, 65538));
    }

    #[test]
    fn the_root_folder_has_a_device_or_says_it_has_none() {
        // Whatever this machine's root is, asking never fails; a device found has counters.
        if let Some(device) = BlockDevice::of(Path::new("/")) {
            assert!(device.bytes_read().is_some(), "{device:?}");
        }
    }
}
