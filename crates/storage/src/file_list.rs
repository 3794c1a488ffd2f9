//! [`FileList`]: a data set's file names by index, however the run came by them.
//!
//! The plan numbers a data set's files `0 .. N` and the loader asks for file `i`'s path when it
//! opens it. Where the names come from decides what a rank holds:
//!
//! - a listing of the data folder: every name, in one [`PathTable`] shared by the process;
//! - `dataset.skip_listing`: nothing, as generation's names are computed from the index
//!   ([`NamePattern`]);
//! - a manifest (`dataset.file_list_train`): only the names the rank reads in the epoch
//!   ([`HeldNames`], filled from [`crate::Manifest::held`]), so that a data set of 5x10^7
//!   files costs each rank its own share of the names and a bit per file.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Manifest, PathTable, PathTableBuilder, StorageError};

/// A data set's file names by index. Cheap to clone (every variant is shared).
#[derive(Debug, Clone)]
pub enum FileList {
    /// Every name, in order: a listing of the data folder.
    Table(Arc<PathTable>),
    /// Names computed from the index, as generation names files.
    Pattern(Arc<NamePattern>),
    /// Some of the names (those one rank reads): a manifest's share.
    Held(Arc<HeldNames>),
}

impl Default for FileList {
    fn default() -> FileList {
        FileList::Table(Arc::default())
    }
}

impl From<PathTable> for FileList {
    fn from(table: PathTable) -> FileList {
        FileList::Table(Arc::new(table))
    }
}

impl FileList {
    /// Files in the data set's list (all of them, also where only some names are held).
    pub fn len(&self) -> usize {
        match self {
            FileList::Table(table) => table.len(),
            FileList::Pattern(pattern) => pattern.files,
            FileList::Held(held) => held.len,
        }
    }

    /// True when the list has no file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The path of file `index`: borrowed from the list where it is stored, written into
    /// `scratch` where it is computed (once per index: asking again for the index `scratch`
    /// last held costs nothing). `None` past the end, or for a name this rank does not hold.
    pub fn path<'a>(&'a self, index: usize, scratch: &'a mut PathScratch) -> Option<&'a Path> {
        match self {
            FileList::Table(table) => table.get(index),
            FileList::Held(held) => held.get(index, scratch),
            FileList::Pattern(pattern) => {
                if index >= pattern.files {
                    return None;
                }
                if scratch.index != Some(index) {
                    pattern.write(index as u64, &mut scratch.path, &mut scratch.name);
                    scratch.index = Some(index);
                }
                Some(&scratch.path)
            }
        }
    }

    /// The path of file `index` as an owned path (for messages and set-up, not per sample).
    pub fn path_buf(&self, index: usize) -> Option<PathBuf> {
        self.path(index, &mut PathScratch::default())
            .map(Path::to_path_buf)
    }

    /// The table of every name, where the list is one (tracing names a table's files before
    /// the run starts).
    pub fn table(&self) -> Option<&Arc<PathTable>> {
        match self {
            FileList::Table(table) => Some(table),
            _ => None,
        }
    }
}

/// A data set's list as the run has it before an epoch: names ready for any rank, or a
/// manifest from which each rank takes the names it reads, epoch by epoch.
#[derive(Debug, Clone)]
pub enum DataFiles {
    /// A listing's table or computed names: the same list for every rank and epoch.
    Ready(FileList),
    /// The first `len` names of a manifest.
    Manifest {
        /// The manifest.
        manifest: Arc<Manifest>,
        /// Files of the list (`dataset.num_files_train`).
        len: usize,
    },
}

impl Default for DataFiles {
    fn default() -> DataFiles {
        DataFiles::Ready(FileList::default())
    }
}

impl DataFiles {
    /// Files in the list.
    pub fn len(&self) -> usize {
        match self {
            DataFiles::Ready(list) => list.len(),
            DataFiles::Manifest { len, .. } => *len,
        }
    }

    /// True when the list has no file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names of a rank that reads `files` (indices into the list): the list itself where
    /// it is ready, else the manifest's names of those files. `previous` is what the last call
    /// gave: it is given back when it holds the same files (no second pass over the manifest
    /// when the file order does not change between epochs), and dropped before the manifest is
    /// read otherwise, so that a rank never holds two epochs' names.
    pub fn names_for(
        &self,
        files: impl Iterator<Item = u64>,
        previous: Option<FileList>,
    ) -> Result<FileList, StorageError> {
        let (manifest, len) = match self {
            DataFiles::Ready(list) => return Ok(list.clone()),
            DataFiles::Manifest { manifest, len } => (manifest, *len),
        };
        let mut needed = FileSet::new(len);
        for file in files {
            needed.insert(usize::try_from(file).unwrap_or(usize::MAX));
        }
        if let Some(FileList::Held(held)) = &previous
            && held.set.same_members(&needed)
        {
            return Ok(FileList::Held(Arc::clone(held)));
        }
        drop(previous);
        Ok(FileList::Held(Arc::new(manifest.held(needed)?)))
    }

    /// The table of every name, where the list is one.
    pub fn table(&self) -> Option<&Arc<PathTable>> {
        match self {
            DataFiles::Ready(list) => list.table(),
            DataFiles::Manifest { .. } => None,
        }
    }
}

/// Where [`FileList::path`] writes a computed name; one per reading thread.
#[derive(Debug, Default)]
pub struct PathScratch {
    index: Option<usize>,
    path: PathBuf,
    name: String,
}

/// The names generation gives a list's files, `{dir}/[{sub}/]{prefix}_{i}_of_{N}.{ext}`, with
/// DLIO's zero padding: `i` padded to the digits of `N`, the subfolder `i % subfolders` to the
/// digits of `subfolders` (only when there are more than one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern {
    dir: PathBuf,
    /// Files in the list (the plan's `N`): the first `files` of those generated.
    files: usize,
    /// The `N` of `_of_{N}`: the files generated, of which a run may read only the first.
    generated: u64,
    subfolders: u64,
    prefix: String,
    extension: String,
}

impl NamePattern {
    /// The first `files` names of `generated` files under `dir`, in `subfolders` subfolders.
    pub fn new(
        dir: PathBuf,
        files: u64,
        generated: u64,
        subfolders: u64,
        prefix: &str,
        extension: &str,
    ) -> NamePattern {
        NamePattern {
            dir,
            files: usize::try_from(files).unwrap_or(usize::MAX),
            generated: generated.max(files),
            subfolders,
            prefix: prefix.to_owned(),
            extension: extension.to_owned(),
        }
    }

    /// Files in the list.
    pub fn len(&self) -> usize {
        self.files
    }

    /// True when the list has no file.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }

    /// Replaces `path` with the path of file `index`; `name` is a buffer for the parts.
    pub fn write(&self, index: u64, path: &mut PathBuf, name: &mut String) {
        use std::fmt::Write;
        path.clear();
        path.push(&self.dir);
        if self.subfolders > 1 {
            let width = digits(self.subfolders);
            name.clear();
            // Writing to a String cannot fail.
            let _ = write!(name, "{:0width$}", index % self.subfolders);
            path.push(&*name);
        }
        let width = digits(self.generated);
        name.clear();
        let _ = write!(
            name,
            "{}_{:0width$}_of_{}.{}",
            self.prefix, index, self.generated, self.extension
        );
        path.push(&*name);
    }

    /// The path of file `index`.
    pub fn path(&self, index: u64) -> PathBuf {
        let mut path = PathBuf::new();
        self.write(index, &mut path, &mut String::new());
        path
    }

    /// The `N` of the names' `_of_{N}`: the files generated.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// The same pattern with another `N` (`_of_{generated}`), for a listing of files that were
    /// generated as a bigger or smaller set than the config now says.
    pub fn with_generated(&self, generated: u64) -> NamePattern {
        NamePattern {
            generated,
            ..self.clone()
        }
    }

    /// The `N` that `path`'s name says was generated, when the name ends as the pattern's
    /// would (`_of_{N}.{ext}`, `N` written without leading zeros); the rest is checked by
    /// [`NamePattern::index_of`].
    pub fn generated_in(&self, path: &Path) -> Option<u64> {
        let name = file_name_bytes(path);
        let stem = name
            .strip_suffix(self.extension.as_bytes())?
            .strip_suffix(b".")?;
        let at = memchr::memmem::rfind(stem, b"_of_")?;
        let written = &stem[at + 4..];
        parse_digits(written).filter(|&n| n > 0 && digits(n) == written.len())
    }

    /// The index of the file at `path` when `path` is exactly what [`NamePattern::path`] gives
    /// for some index below the `N` of `_of_{N}` (whatever `files` is): the folder, the
    /// subfolder `index % subfolders`, the prefix, the zero padding and the extension all
    /// match. A listing of generated files is recognised this way, name by name.
    pub fn index_of(&self, path: &Path) -> Option<u64> {
        let raw = path.as_os_str().as_encoded_bytes();
        let name = file_name_bytes(path);
        let parent = raw[..raw.len() - name.len()].strip_suffix(b"/")?;
        let rest = name
            .strip_prefix(self.prefix.as_bytes())?
            .strip_prefix(b"_")?;
        let width = digits(self.generated);
        if rest.len() < width {
            return None;
        }
        let (number, ending) = rest.split_at(width);
        let index = parse_digits(number).filter(|&i| i < self.generated)?;
        let ending = ending.strip_prefix(b"_of_")?;
        let ending = ending
            .strip_suffix(self.extension.as_bytes())?
            .strip_suffix(b".")?;
        if ending.len() != width || parse_digits(ending) != Some(self.generated) {
            return None;
        }
        let dir = self.dir.as_os_str().as_encoded_bytes();
        let folder = if self.subfolders > 1 {
            let (outer, sub) = parent.split_at(parent.iter().rposition(|&b| b == b'/')?);
            let sub = &sub[1..];
            if sub.len() != digits(self.subfolders)
                || parse_digits(sub) != Some(index % self.subfolders)
            {
                return None;
            }
            outer
        } else {
            parent
        };
        (folder == dir).then_some(index)
    }
}

/// The bytes of `path`'s last component (all of it when there is no `/`), found without
/// `Path::file_name`'s component parsing (a third of the time of listing a million files) or
/// an allocation.
pub fn file_name_bytes(path: &Path) -> &[u8] {
    let raw = path.as_os_str().as_encoded_bytes();
    raw.rsplit(|&b| b == b'/').next().unwrap_or(raw)
}

/// The number `bytes` writes in decimal, when it is nothing but (at most 19) digits.
fn parse_digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 19 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        bytes
            .iter()
            .fold(0u64, |n, &b| n * 10 + u64::from(b - b'0')),
    )
}

/// Decimal digits of `n`, as `n.to_string().len()` counts them.
fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A set of file indices `0 .. len`, one bit each, that also answers "how many members come
/// before `i`" in constant time (the position of `i`'s name among the held names).
///
/// Written here rather than taken from a succinct-structure crate: the only query is that
/// count, which a word of counts per 512 bits answers with one popcount, and the set is built
/// once per epoch in index order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSet {
    len: usize,
    words: Vec<u64>,
    /// Members before each block of [`BLOCK_WORDS`] words; filled by [`FileSet::seal`].
    before: Vec<u64>,
}

const BLOCK_WORDS: usize = 8;

impl FileSet {
    /// The empty set over `0 .. len`.
    pub fn new(len: usize) -> FileSet {
        FileSet {
            len,
            words: vec![0; len.div_ceil(64)],
            before: Vec::new(),
        }
    }

    /// Indices the set ranges over.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the set ranges over no index.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `index` (ignored past the end).
    pub fn insert(&mut self, index: usize) {
        if index < self.len {
            self.words[index / 64] |= 1 << (index % 64);
            self.before.clear();
        }
    }

    /// True when `index` is a member.
    pub fn contains(&self, index: usize) -> bool {
        index < self.len && self.words[index / 64] & (1 << (index % 64)) != 0
    }

    /// True when both sets range over the same indices and have the same members.
    pub fn same_members(&self, other: &FileSet) -> bool {
        self.len == other.len && self.words == other.words
    }

    /// The members, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    w * 64 + bit
                })
            })
        })
    }

    /// Members of the set.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Counts the members before each block, for [`FileSet::members_before`].
    pub fn seal(&mut self) {
        let mut total = 0u64;
        self.before = self
            .words
            .chunks(BLOCK_WORDS)
            .map(|block| {
                let here = total;
                total += block.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
                here
            })
            .collect();
    }

    /// Members below `index`; the set must be sealed.
    fn members_before(&self, index: usize) -> usize {
        let word = index / 64;
        let block = word / BLOCK_WORDS;
        let mut count = self.before[block];
        for w in &self.words[block * BLOCK_WORDS..word] {
            count += u64::from(w.count_ones());
        }
        let below = self.words[word] & ((1u64 << (index % 64)) - 1);
        count as usize + below.count_ones() as usize
    }
}

/// The names of some of a list's files (a [`FileSet`] of them), in index order: what a rank
/// keeps of a manifest. Names are kept as the manifest's lines say them, a relative one put
/// under `base` only when it is asked for: 10^7 names of 33 bytes under a 40-byte folder
/// cost 420 MB this way instead of 780 MB.
#[derive(Debug, Default)]
pub struct HeldNames {
    len: usize,
    set: FileSet,
    base: PathBuf,
    names: PathTable,
}

impl HeldNames {
    /// The names of the members of `set`, in index order (`names` holds exactly one per
    /// member, as a manifest line: relative ones are under `base`).
    pub(crate) fn new(mut set: FileSet, base: PathBuf, names: PathTableBuilder) -> HeldNames {
        set.seal();
        let names = names.finish();
        debug_assert_eq!(names.len(), set.count());
        HeldNames {
            len: set.len(),
            set,
            base,
            names,
        }
    }

    /// Every file of a list of `names` (relative ones under `base`), in their order: what a
    /// listing found when the names are not generation's.
    pub fn every(base: PathBuf, names: PathTable) -> HeldNames {
        let mut set = FileSet::new(names.len());
        set.words.fill(u64::MAX);
        if let Some(last) = set.words.last_mut()
            && !names.len().is_multiple_of(64)
        {
            *last = (1u64 << (names.len() % 64)) - 1;
        }
        set.seal();
        HeldNames {
            len: names.len(),
            set,
            base,
            names,
        }
    }

    /// The names held, as they were given (relative ones under the base).
    pub fn names(&self) -> &PathTable {
        &self.names
    }

    /// The path of file `index`, if it is held: the line itself when it is absolute, else
    /// written under the base into `scratch` (once per index, as for computed names).
    pub fn get<'a>(&'a self, index: usize, scratch: &'a mut PathScratch) -> Option<&'a Path> {
        if !self.set.contains(index) {
            return None;
        }
        let line = self.names.get(self.set.members_before(index))?;
        let raw = line.as_os_str().as_bytes();
        if is_absolute_name(raw) {
            return Some(line);
        }
        if scratch.index != Some(index) {
            resolve_name(&self.base, raw, &mut scratch.path);
            scratch.index = Some(index);
        }
        Some(&scratch.path)
    }

    /// Names held.
    pub fn held(&self) -> usize {
        self.names.len()
    }

    /// Files in the whole list.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the whole list has no file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A manifest line as a path: as it is when absolute (`/...`) or a URI (`s3://...`), else
/// under `base`. Written into `out`.
pub(crate) fn resolve_name(base: &Path, line: &[u8], out: &mut PathBuf) {
    out.clear();
    if !is_absolute_name(line) {
        out.push(base);
    }
    out.push(OsStr::from_bytes(line));
}

/// A manifest line that names a path by itself: absolute (`/...`) or a URI (`s3://...`).
fn is_absolute_name(line: &[u8]) -> bool {
    line.first() == Some(&b'/') || memchr::memmem::find(line, b"://").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_names_files_as_generation_does() {
        let pattern = NamePattern::new("/d/train".into(), 12, 12, 1, "img", "npz");
        assert_eq!(pattern.path(3), Path::new("/d/train/img_03_of_12.npz"));
        let sub = NamePattern::new("/d/train".into(), 5, 1000, 12, "img", "npy");
        assert_eq!(sub.path(14), Path::new("/d/train/02/img_0014_of_1000.npy"));
        let list = FileList::Pattern(Arc::new(sub));
        let mut scratch = PathScratch::default();
        assert_eq!(list.len(), 5);
        assert_eq!(
            list.path(4, &mut scratch),
            Some(Path::new("/d/train/04/img_0004_of_1000.npy"))
        );
        assert_eq!(list.path(5, &mut scratch), None, "past num_files_train");
    }

    #[test]
    fn a_generated_name_is_recognised_only_where_generation_puts_it() {
        let configured = NamePattern::new("/d/train".into(), 5, 5, 12, "img", "npy");
        // `_of_{N}` is learnt from a name: a set generated bigger than the run reads.
        let name = Path::new("/d/train/02/img_0014_of_1000.npy");
        assert_eq!(configured.generated_in(name), Some(1000));
        let pattern = configured.with_generated(1000);
        assert_eq!(pattern.index_of(name), Some(14));
        for i in [0, 11, 12, 999] {
            assert_eq!(pattern.index_of(&pattern.path(i)), Some(i), "{i}");
        }
        for other in [
            "/d/train/03/img_0014_of_1000.npy", // another subfolder than 14 % 12
            "/d/train/2/img_0014_of_1000.npy",  // the subfolder's padding
            "/d/train/img_0014_of_1000.npy",    // no subfolder
            "/d/valid/02/img_0014_of_1000.npy", // another folder
            "/d/train/02/img_014_of_1000.npy",  // the index's padding
            "/d/train/02/img_00014_of_1000.npy", // too wide
            "/d/train/02/img_0014_of_1001.npy", // another N
            "/d/train/02/img_1014_of_1000.npy", // past N (and its subfolder would be 06)
            "/d/train/02/img_0014_of_1000.npz", // another extension
            "/d/train/02/img_0014_of_1000.NPY",
            "/d/train/02/pic_0014_of_1000.npy", // another prefix
            "/d/train/02/img_0014_of_1000.npy.tmp",
            "/d/train/02/img_00a4_of_1000.npy",
        ] {
            assert_eq!(pattern.index_of(Path::new(other)), None, "{other}");
        }
        for unlearnt in [
            "/d/train/02/img_0014_of_01000.npy", // N with a leading zero
            "/d/train/02/img_0014_of_0.npy",
            "/d/train/02/img_0014_of_.npy",
            "/d/train/02/img_0014.npy",
        ] {
            assert_eq!(
                configured.generated_in(Path::new(unlearnt)),
                None,
                "{unlearnt}"
            );
        }
        // One folder: no subfolder in the path.
        let flat = NamePattern::new("/d/train".into(), 3, 3, 1, "img", "npz").with_generated(12);
        assert_eq!(
            flat.index_of(Path::new("/d/train/img_07_of_12.npz")),
            Some(7)
        );
        assert_eq!(
            flat.index_of(Path::new("/d/train/00/img_07_of_12.npz")),
            None
        );
    }

    #[test]
    fn a_file_set_counts_the_members_before_an_index() {
        let len = 5000;
        let mut set = FileSet::new(len);
        let members: Vec<usize> = (0..len).filter(|i| i % 7 == 3 || i % 64 == 63).collect();
        for &i in &members {
            set.insert(i);
        }
        set.seal();
        assert_eq!(set.count(), members.len());
        assert_eq!(set.iter().collect::<Vec<_>>(), members);
        for (position, &i) in members.iter().enumerate() {
            assert!(set.contains(i));
            assert_eq!(set.members_before(i), position, "index {i}");
        }
        assert!(!set.contains(4) && !set.contains(len) && !set.contains(usize::MAX));
        set.insert(len + 10);
        assert_eq!(set.count(), members.len(), "past the end is ignored");
    }

    #[test]
    fn held_names_answer_for_their_members_only() {
        let mut set = FileSet::new(100);
        let mut names = PathTableBuilder::default();
        for i in [2usize, 40, 64, 99] {
            set.insert(i);
            // Odd members absolute, even ones relative to the base.
            let name = if i % 2 == 1 {
                format!("/abs/f{i}")
            } else {
                format!("f{i}")
            };
            names.push(Path::new(&name));
        }
        let held = HeldNames::new(set, PathBuf::from("/d"), names);
        let list = FileList::Held(Arc::new(held));
        let mut scratch = PathScratch::default();
        assert_eq!(list.len(), 100);
        assert_eq!(list.path(64, &mut scratch), Some(Path::new("/d/f64")));
        assert_eq!(list.path(99, &mut scratch), Some(Path::new("/abs/f99")));
        assert_eq!(list.path(2, &mut scratch), Some(Path::new("/d/f2")));
        assert_eq!(list.path(40, &mut scratch), Some(Path::new("/d/f40")));
        assert_eq!(list.path(3, &mut scratch), None);
        assert_eq!(list.path(100, &mut scratch), None);
    }

    #[test]
    fn manifest_names_are_under_the_base_unless_absolute() {
        let mut out = PathBuf::new();
        resolve_name(Path::new("/d/train"), b"a/b.npz", &mut out);
        assert_eq!(out, Path::new("/d/train/a/b.npz"));
        resolve_name(Path::new("/d/train"), b"/x/y.npz", &mut out);
        assert_eq!(out, Path::new("/x/y.npz"));
        resolve_name(Path::new("s3://b/p/train"), b"s3://b/q/z.npz", &mut out);
        assert_eq!(out, Path::new("s3://b/q/z.npz"));
    }
}
