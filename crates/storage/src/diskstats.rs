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

/// The name and sectors read of device `major:minor` in a `/proc/diskstats` text (fields:
/// major, minor, name, reads completed, reads merged, sectors read, ...).
fn sectors_read(text: &str, major: u32, minor: u32) -> Option<(String, u64)> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (ma, mi, name) = (fields.next()?, fields.next()?, fields.next()?);
        if ma.parse::<u32>().ok()? != major || mi.parse::<u32>().ok()? != minor {
            return None;
        }
        let sectors = fields.nth(2)?.parse().ok()?;
        Some((name.to_owned(), sectors))
    })
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
