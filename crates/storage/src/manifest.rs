//! [`Manifest`]: a data set's file names in a text file, one per line, which any tool can
//! write (`find`, `aws s3 ls`, a generator's log), read in passes that keep only the names a
//! rank needs.
//!
//! A data set of 5x10^7 files has 2-3 GB of names; every rank holding them all is what made
//! MLPerf Storage's client run out of memory (mlcommons/storage#466). A rank here streams the
//! manifest in chunks before each epoch whose files change and keeps the names its plan reads
//! ([`Manifest::held`]): its own share, and one bit per file of the whole list.

use std::ffi::OsStr;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::file_list::resolve_name;
use crate::{FileSet, HeldNames, PathTableBuilder, Storage, StorageError};

/// Bytes of the manifest read per request.
const CHUNK_BYTES: usize = 8 << 20;

/// A manifest of file names, read through a storage engine (POSIX or S3 alike).
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Reads the manifest: the engine itself, so that its bytes are not counted as the data
    /// set's or traced.
    storage: Arc<dyn Storage>,
    location: PathBuf,
    /// Where relative names are.
    base: PathBuf,
}

impl Manifest {
    /// The manifest at `location`, whose relative names are under `base`.
    pub fn new(storage: Arc<dyn Storage>, location: PathBuf, base: PathBuf) -> Manifest {
        Manifest {
            storage,
            location,
            base,
        }
    }

    /// The storage the manifest is read through.
    pub fn storage(&self) -> &dyn Storage {
        &*self.storage
    }

    /// Where the manifest is.
    pub fn location(&self) -> &Path {
        &self.location
    }

    /// Calls `each(index, path)` for the names in order, until it breaks or the manifest ends;
    /// returns how many names were passed. Blank lines are skipped and a line's `\r` before
    /// its `\n` dropped; a name with a NUL byte is refused with its line number.
    pub fn for_each_name(
        &self,
        mut each: impl FnMut(usize, &Path) -> ControlFlow<()>,
    ) -> Result<usize, StorageError> {
        let mut path = PathBuf::new();
        self.for_each_line(|index, line| {
            resolve_name(&self.base, line, &mut path);
            each(index, &path)
        })
    }

    /// As [`Manifest::for_each_name`], with each name as its line says it (relative names not
    /// yet under the base).
    fn for_each_line(
        &self,
        mut each: impl FnMut(usize, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, StorageError> {
        let mut handle = self.storage.open(&self.location)?;
        let size = handle.len();
        let mut chunk = vec![0u8; CHUNK_BYTES];
        // The part of a line that a chunk ended in, completed by the next chunk.
        let mut carry: Vec<u8> = Vec::new();
        let mut offset = 0u64;
        let (mut names, mut line_number) = (0usize, 0usize);
        let mut take = |line: &[u8],
                        line_number: usize,
                        names: &mut usize|
         -> Result<ControlFlow<()>, StorageError> {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(ControlFlow::Continue(()));
            }
            if line.contains(&0) {
                return Err(StorageError::Manifest {
                    path: self.location.clone(),
                    line: line_number,
                    reason: "the name holds a NUL byte, which no file name can".into(),
                });
            }
            let flow = each(*names, line);
            *names += 1;
            Ok(flow)
        };
        while offset < size {
            let want = CHUNK_BYTES.min(usize::try_from(size - offset).unwrap_or(CHUNK_BYTES));
            let got = handle.read_at(&mut chunk[..want], offset)?;
            if got == 0 {
                return Err(StorageError::Truncated {
                    path: self.location.clone(),
                    offset,
                    wanted: size - offset,
                });
            }
            offset += got as u64;
            let mut rest = &chunk[..got];
            while let Some(end) = memchr::memchr(b'\n', rest) {
                line_number += 1;
                let flow = if carry.is_empty() {
                    take(&rest[..end], line_number, &mut names)?
                } else {
                    carry.extend_from_slice(&rest[..end]);
                    let line = std::mem::take(&mut carry);
                    take(&line, line_number, &mut names)?
                };
                if flow.is_break() {
                    return Ok(names);
                }
                rest = &rest[end + 1..];
            }
            carry.extend_from_slice(rest);
        }
        if !carry.is_empty() {
            let _last = take(&carry, line_number + 1, &mut names)?;
        }
        Ok(names)
    }

    /// The names of the members of `needed` (indices into the manifest's first
    /// `needed.len()` names), read in one pass. The manifest must hold that many names
    /// (a shorter one is an error naming it).
    pub fn held(&self, needed: FileSet) -> Result<HeldNames, StorageError> {
        let len = needed.len();
        let mut names = PathTableBuilder::default();
        let passed = self.for_each_line(|index, line| {
            if index >= len {
                return ControlFlow::Break(());
            }
            if needed.contains(index) {
                names.push(Path::new(OsStr::from_bytes(line)));
            }
            ControlFlow::Continue(())
        })?;
        if passed < len {
            return Err(StorageError::Manifest {
                path: self.location.clone(),
                line: 0,
                reason: format!(
                    "it lists {passed} names, fewer than the {len} files the run reads"
                ),
            });
        }
        Ok(HeldNames::new(needed, self.base.clone(), names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PosixStorage;

    fn manifest(text: &[u8]) -> (tempfile::TempDir, Manifest) {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("train.txt");
        std::fs::write(&location, text).unwrap();
        let storage: Arc<dyn Storage> = Arc::new(PosixStorage::new());
        let manifest = Manifest::new(storage, location, PathBuf::from("/data/train"));
        (dir, manifest)
    }

    #[test]
    fn names_are_read_in_order_without_blank_lines_or_carriage_returns() {
        let (_dir, m) = manifest(b"a.npz\r\n\n  \nsub/b.npz\n/abs/c.npz");
        let mut seen = Vec::new();
        let n = m
            .for_each_name(|i, p| {
                seen.push((i, p.to_path_buf()));
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            seen,
            [
                (0, PathBuf::from("/data/train/a.npz")),
                (1, PathBuf::from("/data/train/sub/b.npz")),
                (2, PathBuf::from("/abs/c.npz")),
            ]
        );
        // Every name passed, or those up to and including the one that stopped the pass.
        let all = m.for_each_name(|_, _| ControlFlow::Continue(())).unwrap();
        assert_eq!(all, 3);
        let stopped = m
            .for_each_name(|i, _| {
                if i == 1 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert_eq!(stopped, 2);
    }

    #[test]
    fn lines_across_chunks_are_whole() {
        // Names long enough that a chunk boundary falls inside one.
        let names: Vec<String> = (0..60_000).map(|i| format!("{i:0200}.npy")).collect();
        let (_dir, m) = manifest(names.join("\n").as_bytes());
        let mut needed = FileSet::new(names.len());
        for i in (0..names.len()).step_by(997) {
            needed.insert(i);
        }
        needed.insert(names.len() - 1);
        let held = m.held(needed).unwrap();
        assert_eq!(held.held(), names.len().div_ceil(997) + 1);
        let mut scratch = crate::PathScratch::default();
        for i in (0..names.len()).step_by(997).chain([names.len() - 1]) {
            assert_eq!(
                held.get(i, &mut scratch).unwrap(),
                Path::new("/data/train").join(&names[i]),
                "name {i}"
            );
        }
        assert_eq!(held.get(1, &mut scratch), None);
    }

    #[test]
    fn a_rank_holds_only_the_names_it_reads_and_keeps_them_while_they_do_not_change() {
        let text: String = (0..1000).map(|i| format!("f{i}.npy\n")).collect();
        let (_dir, m) = manifest(text.as_bytes());
        let files = crate::DataFiles::Manifest {
            manifest: Arc::new(m),
            len: 600,
        };
        let mine = [599u64, 3, 250];
        let names = files.names_for(mine.into_iter(), None).unwrap();
        let crate::FileList::Held(held) = &names else {
            panic!("{names:?}")
        };
        assert_eq!((held.held(), names.len()), (3, 600));
        let mut scratch = crate::PathScratch::default();
        assert_eq!(
            names.path(250, &mut scratch),
            Some(Path::new("/data/train/f250.npy"))
        );
        assert_eq!(names.path(251, &mut scratch), None);
        // The same files: the same names, not a second pass.
        let again = files
            .names_for(mine.into_iter().rev(), Some(names.clone()))
            .unwrap();
        let crate::FileList::Held(kept) = &again else {
            panic!("{again:?}")
        };
        assert!(Arc::ptr_eq(held, kept));
        // Other files: read again.
        let other = files.names_for([0u64, 1].into_iter(), Some(again)).unwrap();
        assert_eq!(other.path_buf(1), Some(PathBuf::from("/data/train/f1.npy")));
        assert_eq!(other.path_buf(3), None);
    }

    #[test]
    fn a_short_manifest_or_a_nul_is_refused_naming_it() {
        let (_dir, m) = manifest(b"a\nb\n");
        let err = m.held(FileSet::new(3)).unwrap_err().to_string();
        assert!(
            err.contains("train.txt") && err.contains("2 names"),
            "{err}"
        );
        let (_dir, m) = manifest(b"a\nb\0c\n");
        let err = m
            .for_each_name(|_, _| ControlFlow::Continue(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2") && err.contains("NUL"), "{err}");
    }
}
