//! [`PathTable`]: a dataset's file paths in one allocation, which knows its own paths by
//! their address.
//!
//! A run opens the dataset's files by index, tens of thousands of times per second on a
//! small-record workload. Decorators that keep something per file (the trace names each
//! file once) would otherwise look every opened path up in a set, and on such a run that
//! set has left the CPU's caches by the time the next file is opened: two cache misses
//! per sample. [`PathTable::holds`] answers "is this one of the table's paths?" from the
//! path's address and the two bytes around it, which the caller has just read anyway.

use std::ffi::OsStr;
use std::ops::Index;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// An immutable list of paths stored back to back, each between two NUL bytes.
///
/// Share it behind an `Arc`; index it like a slice (`table[i]` is a `&Path`). A `&Path`
/// handed out by the table (or any sub-slice of one, such as its `parent()` or
/// `file_name()`) points into the table's buffer, which [`PathTable::holds`] uses.
#[derive(Clone, PartialEq, Eq)]
pub struct PathTable {
    /// `\0path0\0path1\0...\0`: every entry is preceded and followed by a NUL byte.
    bytes: Box<[u8]>,
    /// Start of entry `i` in `bytes` is `starts[i]`; it ends at `starts[i + 1] - 1`.
    starts: Box<[usize]>,
    /// Some entry contains a NUL byte itself (a path no system call accepts), so the
    /// separators do not delimit entries and [`PathTable::holds`] always says no.
    nul_inside: bool,
}

impl PathTable {
    /// The paths, in order.
    pub fn new<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> PathTable {
        let mut builder = PathTableBuilder::default();
        for path in paths {
            builder.push(path.as_ref());
        }
        builder.finish()
    }

    /// Number of paths.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// True when the table holds no path.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Path `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&Path> {
        let start = *self.starts.get(i)?;
        let end = *self.starts.get(i + 1)? - 1;
        Some(Path::new(OsStr::from_bytes(&self.bytes[start..end])))
    }

    /// The paths, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Path> + '_ {
        (0..self.len()).map(|i| &self[i])
    }

    /// True when `path` is one of this table's entries itself (the `&Path` the table handed
    /// out, not an equal path stored elsewhere, and not a part of an entry such as its
    /// parent). Costs two comparisons and two byte loads next to `path`'s own bytes.
    pub fn holds(&self, path: &Path) -> bool {
        if self.nul_inside {
            return false;
        }
        let raw = path.as_os_str().as_bytes();
        let base = self.bytes.as_ptr() as usize;
        let start = raw.as_ptr() as usize;
        // `path` lies inside the table's bytes, away from the first and last separator.
        if start <= base || start + raw.len() >= base + self.bytes.len() {
            return false;
        }
        let at = start - base;
        // Entries contain no NUL (checked at construction) and are the only bytes the table
        // hands out, so a slice of them with a NUL just before and just after it is a whole
        // entry: a part of an entry (a prefix, suffix or middle) misses a NUL on some side.
        self.bytes[at - 1] == 0 && self.bytes[at + raw.len()] == 0
    }
}

/// Builds a [`PathTable`] one path at a time, for paths made in a reused buffer (ten million
/// generated names, without an allocation each).
#[derive(Debug)]
pub struct PathTableBuilder {
    bytes: Vec<u8>,
    starts: Vec<usize>,
    nul_inside: bool,
}

impl Default for PathTableBuilder {
    fn default() -> PathTableBuilder {
        PathTableBuilder {
            bytes: vec![0u8],
            starts: Vec::new(),
            nul_inside: false,
        }
    }
}

impl PathTableBuilder {
    /// Appends `path` as the next entry.
    pub fn push(&mut self, path: &Path) {
        let raw = path.as_os_str().as_bytes();
        self.nul_inside |= raw.contains(&0);
        self.starts.push(self.bytes.len());
        self.bytes.extend_from_slice(raw);
        self.bytes.push(0);
    }

    /// The table of the paths pushed so far, in order.
    pub fn finish(mut self) -> PathTable {
        self.starts.push(self.bytes.len());
        PathTable {
            bytes: self.bytes.into_boxed_slice(),
            starts: self.starts.into_boxed_slice(),
            nul_inside: self.nul_inside,
        }
    }
}

impl PathTable {
    /// The table as bytes, for sending it to other processes ([`PathTable::decode`]): the
    /// paths between their NUL separators as they are stored (a million 40-byte paths are
    /// 41 MB), followed by the entry starts only when some path holds a NUL itself.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.bytes.len());
        if self.nul_inside {
            out.push(1);
            out.extend_from_slice(&(self.starts.len() as u64).to_le_bytes());
            for start in &self.starts {
                out.extend_from_slice(&(*start as u64).to_le_bytes());
            }
        } else {
            out.push(0);
        }
        out.extend_from_slice(&self.bytes);
        out
    }

    /// The table [`PathTable::encode`] wrote; `None` when `encoded` is not such an encoding.
    pub fn decode(encoded: &[u8]) -> Option<PathTable> {
        let (&tag, rest) = encoded.split_first()?;
        let (starts, bytes): (Vec<usize>, &[u8]) = match tag {
            0 => {
                // Every NUL but the last starts an entry.
                let starts = rest
                    .iter()
                    .enumerate()
                    .filter(|&(_, &b)| b == 0)
                    .map(|(i, _)| i + 1)
                    .collect();
                (starts, rest)
            }
            1 => {
                let count = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) as usize;
                let table = rest.get(8..8 + count.checked_mul(8)?)?;
                let starts = table
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize)
                    .collect();
                (starts, &rest[8 + count * 8..])
            }
            _ => return None,
        };
        let well_formed = bytes.first() == Some(&0)
            && bytes.last() == Some(&0)
            && starts.first() == Some(&1)
            && starts.last() == Some(&bytes.len())
            && starts.windows(2).all(|w| w[0] < w[1]);
        well_formed.then(|| PathTable {
            bytes: bytes.into(),
            starts: starts.into_boxed_slice(),
            nul_inside: tag == 1,
        })
    }
}

impl Default for PathTable {
    /// An empty table.
    fn default() -> PathTable {
        PathTable::new(Vec::<PathBuf>::new())
    }
}

impl Index<usize> for PathTable {
    type Output = Path;

    /// Path `i`; panics when `i >= len()`, as slices do.
    fn index(&self, i: usize) -> &Path {
        match self.get(i) {
            Some(path) => path,
            None => panic!("path index {i} out of range for a table of {}", self.len()),
        }
    }
}

impl std::fmt::Debug for PathTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<PathBuf>> for PathTable {
    fn from(paths: Vec<PathBuf>) -> PathTable {
        PathTable::new(paths)
    }
}

impl<P: AsRef<Path>> FromIterator<P> for PathTable {
    fn from_iter<I: IntoIterator<Item = P>>(paths: I) -> PathTable {
        PathTable::new(paths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PathTable {
        PathTable::new(["/data/train/img_1.npy", "/data/train/img_22.npy", "x"])
    }

    #[test]
    fn indexes_like_a_slice() {
        let t = table();
        assert_eq!(t.len(), 3);
        assert_eq!(&t[0], Path::new("/data/train/img_1.npy"));
        assert_eq!(&t[1], Path::new("/data/train/img_22.npy"));
        assert_eq!(&t[2], Path::new("x"));
        assert_eq!(t.get(3), None);
        let all: Vec<&Path> = t.iter().collect();
        assert_eq!(all.len(), 3);
        assert!(PathTable::new(Vec::<PathBuf>::new()).is_empty());
        assert!(PathTable::default().is_empty());
        assert_eq!(PathTable::default().iter().count(), 0);
    }

    #[test]
    fn holds_its_own_entries_only() {
        let t = table();
        for i in 0..t.len() {
            assert!(t.holds(&t[i]), "entry {i}");
        }
        // Equal paths stored elsewhere are not the table's.
        let copy = PathBuf::from("/data/train/img_1.npy");
        assert!(!t.holds(&copy));
        // Parts of an entry are not entries.
        let entry = &t[1];
        assert!(!t.holds(entry.parent().unwrap()));
        assert!(!t.holds(Path::new(entry.file_name().unwrap())));
        let raw = entry.as_os_str().as_bytes();
        let middle = Path::new(OsStr::from_bytes(&raw[1..raw.len() - 1]));
        assert!(!t.holds(middle));
        // Another table's entries are not this one's.
        let other = table();
        assert!(!t.holds(&other[0]));
        // An empty path from anywhere is not an entry.
        assert!(!t.holds(Path::new("")));
    }

    #[test]
    fn encodes_and_decodes_itself() {
        for t in [
            table(),
            PathTable::default(),
            PathTable::new([Path::new("a"), Path::new(OsStr::from_bytes(b"b\0c"))]),
            PathTable::new(["", "y"]),
        ] {
            let encoded = t.encode();
            assert_eq!(PathTable::decode(&encoded), Some(t.clone()));
        }
        assert_eq!(
            table().encode().len(),
            1 + "/data/train/img_1.npy/data/train/img_22.npyx".len() + 4
        );
        assert_eq!(PathTable::decode(b""), None);
        assert_eq!(PathTable::decode(b"\x02\0"), None);
        assert_eq!(PathTable::decode(b"\0a"), None);
        assert_eq!(PathTable::decode(b"\x01\x05"), None);
    }

    #[test]
    fn a_path_with_a_nul_byte_turns_recognition_off() {
        let t = PathTable::new([Path::new("a"), Path::new(OsStr::from_bytes(b"b\0c"))]);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].as_os_str().as_bytes(), b"b\0c");
        assert!(!t.holds(&t[0]));
        assert!(!t.holds(&t[1]));
    }
}
