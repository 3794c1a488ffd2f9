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
        let mut bytes = vec![0u8];
        let mut starts = Vec::new();
        let mut nul_inside = false;
        for path in paths {
            let raw = path.as_ref().as_os_str().as_bytes();
            nul_inside |= raw.contains(&0);
            starts.push(bytes.len());
            bytes.extend_from_slice(raw);
            bytes.push(0);
        }
        starts.push(bytes.len());
        PathTable {
            bytes: bytes.into_boxed_slice(),
            starts: starts.into_boxed_slice(),
            nul_inside,
        }
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
    fn a_path_with_a_nul_byte_turns_recognition_off() {
        let t = PathTable::new([Path::new("a"), Path::new(OsStr::from_bytes(b"b\0c"))]);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].as_os_str().as_bytes(), b"b\0c");
        assert!(!t.holds(&t[0]));
        assert!(!t.holds(&t[1]));
    }
}
