//! Where a workload's files live: DLIO's file names for generation, and the listing of
//! `data_folder/{train,valid}` at run time (§4.6, §4.7 of the spec).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use dlio_config::Config;
use dlio_format::{FileLayout, Format, GenerationFile};
use dlio_storage::{
    DataFiles, DirEntry, FileList, FileSet, Manifest, NamePattern, PathTableBuilder, Storage,
    file_name_bytes,
};

/// The two file lists of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `data_folder/train`.
    Train,
    /// `data_folder/valid`.
    Valid,
}

impl List {
    pub fn dir_name(self) -> &'static str {
        match self {
            List::Train => "train",
            List::Valid => "valid",
        }
    }
    /// Distinguishes the lists in seeds, so valid files do not repeat train files' bytes.
    pub fn id(self) -> u32 {
        match self {
            List::Train => 0,
            List::Valid => 1,
        }
    }
    fn configured(self, config: &Config) -> (u64, u64) {
        match self {
            List::Train => (
                config.dataset.num_files_train,
                config.dataset.num_subfolders_train,
            ),
            List::Valid => (
                config.dataset.num_files_eval,
                config.dataset.num_subfolders_eval,
            ),
        }
    }
    fn key(self) -> &'static str {
        match self {
            List::Train => "dataset.num_files_train",
            List::Valid => "dataset.num_files_eval",
        }
    }
}

/// `storage_root` joined with `data_folder` (trailing `/` removed), as DLIO does.
pub fn data_root(config: &Config) -> PathBuf {
    let folder = config.dataset.data_folder.trim_end_matches('/');
    let folder = if folder.is_empty() { "." } else { folder };
    let root = config.storage.storage_root.trim();
    // Object stores: `s3://bucket/prefix` is already the whole location (storage_root is the
    // bucket), as in DLIO.
    if folder.starts_with("s3://")
        || config.storage.storage_type == dlio_config::StorageType::S3
        || root.is_empty()
        || root == "./"
        || root == "."
        || Path::new(folder).is_absolute()
    {
        PathBuf::from(folder)
    } else {
        Path::new(root).join(folder)
    }
}

/// The names generation gives a list's files ([`NamePattern`]): `_of_{N}` counts the files
/// generated (`dataset.num_files_generated`), of which a run may read only the first.
fn name_pattern(config: &Config, format: &dyn Format, list: List) -> NamePattern {
    let (files, subfolders) = list.configured(config);
    let generated = match list {
        List::Train if config.dataset.num_files_generated > 0 => {
            config.dataset.num_files_generated.max(files)
        }
        _ => files,
    };
    NamePattern::new(
        data_root(config).join(list.dir_name()),
        files,
        generated,
        subfolders,
        &config.dataset.file_prefix,
        format.extension(),
    )
}

/// The folders generation makes for `list`: the list's folder, and its subfolders when it
/// has more than one (named as [`file_path`] names them).
pub fn generation_dirs(config: &Config, list: List) -> Vec<PathBuf> {
    let (_, subfolders) = list.configured(config);
    let dir = data_root(config).join(list.dir_name());
    if subfolders <= 1 {
        return vec![dir];
    }
    let width = subfolders.to_string().len();
    (0..subfolders)
        .map(|i| dir.join(format!("{i:0width$}")))
        .collect()
}

/// The fewest bytes a complete file of the data set can have, for the formats that store each
/// sample's bytes as they are (uncompressed npz, npy, tfrecord, indexed binary, hdf5) and
/// samples of one size; `None` where a file's size says nothing (compression, images, csv text,
/// `record_length_bytes_stdev`).
pub fn smallest_complete_file(config: &Config) -> Option<u64> {
    let d = &config.dataset;
    if !dlio_format::descriptor(d.format).stores_samples_as_they_are
        || d.compression != dlio_config::Compression::None
        || d.record_length_bytes_stdev > 0.0
        || !d.record_length_bytes_distribution.is_empty()
    {
        return None;
    }
    layout(config, List::Train, 0)
        .sample_bytes()
        .checked_mul(d.num_samples_per_file)
}

/// Layout of file `index` of `list`.
pub fn layout(config: &Config, list: List, index: u64) -> FileLayout {
    dlio_trainer::file_layout(config, list.id(), index)
}

/// The list's folder, `data_folder/{train,valid}`, under which a listing's names are.
pub fn list_dir(config: &Config, list: List) -> PathBuf {
    data_root(config).join(list.dir_name())
}

/// The names generation gave a list's files when it made `generated` of them, as a listing
/// found them ([`list_files`]).
pub fn listed_pattern(
    config: &Config,
    format: &dyn Format,
    list: List,
    generated: u64,
) -> NamePattern {
    name_pattern(config, format, list).with_generated(generated)
}

/// Every file of both lists, for generation.
pub fn generation_files(config: &Config, format: &dyn Format) -> Vec<GenerationFile> {
    let mut files = Vec::new();
    for list in [List::Train, List::Valid] {
        let (n, _) = list.configured(config);
        let names = name_pattern(config, format, list);
        for i in 0..n {
            files.push(GenerationFile {
                path: names.path(i),
                layout: layout(config, list, i),
                list_id: list.id(),
                file_index: i,
            });
        }
    }
    files
}

/// The data set's files without listing the folder (`dataset.skip_listing`, the fork's key for
/// data sets of millions of files): the names generation gives them, computed when a file is
/// opened, so no process holds them. Every `listing_validation_interval`-th file (and the
/// last) is checked to exist, so a data set that is missing or named otherwise is still
/// refused before the run; their sizes are kept (an even spread over the list), so that
/// sizing the data set asks for no more.
pub fn computed_files(
    config: &Config,
    storage: &dyn Storage,
    format: &dyn Format,
    list: List,
) -> Result<Listing> {
    let pattern = name_pattern(config, format, list);
    let sizes = check_spread(
        config,
        storage,
        pattern.len(),
        |i| Ok(pattern.path(i)),
        |path| {
            format!(
                "dataset.skip_listing is True, but {} (one of the {} computed {} file names) does \
             not exist; generate the data set first (++workload.workflow.generate_data=True), \
             or set ++workload.dataset.skip_listing=False to list what is there",
                path.display(),
                pattern.len(),
                list.dir_name()
            )
        },
    )?;
    Ok(Listing {
        files: DataFiles::Ready(FileList::Pattern(Arc::new(pattern))),
        sizes: KnownSizes::Spread(sizes),
    })
}

/// The sizes of files `0, step, 2 step, ...` and the last of `len` (`step` the
/// `listing_validation_interval`), the path of file `i` from `path_of`; a missing file is the
/// error `missing` words for its path.
fn check_spread(
    config: &Config,
    storage: &dyn Storage,
    len: usize,
    mut path_of: impl FnMut(u64) -> Result<PathBuf>,
    missing: impl Fn(&Path) -> String,
) -> Result<Vec<(PathBuf, u64)>> {
    let step = config.dataset.listing_validation_interval.max(1) as usize;
    let last = len.checked_sub(1);
    let checked = (0..len)
        .step_by(step)
        .chain(last.filter(|last| last % step != 0));
    let mut sizes = Vec::new();
    for i in checked {
        let path = path_of(i as u64)?;
        match storage.size(&path) {
            Ok(Some(size)) => sizes.push((path, size)),
            Ok(None) | Err(dlio_storage::StorageError::NotFound { .. }) => {
                bail!("{} (checked every {step}-th file)", missing(&path))
            }
            Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
        }
    }
    Ok(sizes)
}

/// Where `dataset.file_list_train` (or `_eval`) is: resolved as `data_folder` is.
fn manifest_location(config: &Config, list: List) -> Option<PathBuf> {
    let key = match list {
        List::Train => config.dataset.file_list_train.as_deref(),
        List::Valid => config.dataset.file_list_eval.as_deref(),
    }?;
    let mut located = config.clone();
    located.dataset.data_folder = key.to_owned();
    Some(data_root(&located))
}

/// The list's manifest, when it has one: its names are relative to the list's folder.
pub fn manifest(config: &Config, storage: &Arc<dyn Storage>, list: List) -> Option<Manifest> {
    let location = manifest_location(config, list)?;
    Some(Manifest::new(
        Arc::clone(storage),
        location,
        data_root(config).join(list.dir_name()),
    ))
}

/// The data set's files from a manifest (`dataset.file_list_train`, `dataset.file_list_eval`):
/// its first `num_files_*` names, in its order. It is read once here, to count them (fewer is
/// an error naming the manifest and the key) and to check every
/// `listing_validation_interval`-th file as `skip_listing` does; each rank then reads only its
/// own names of it, before each epoch whose files change.
fn manifest_files(config: &Config, manifest: Manifest, list: List) -> Result<Listing> {
    let (wanted, _) = list.configured(config);
    let wanted = usize::try_from(wanted).unwrap_or(usize::MAX);
    if wanted == 0 {
        return Ok(Listing::default());
    }
    let step = config.dataset.listing_validation_interval.max(1) as usize;
    let mut checked: Vec<PathBuf> = Vec::new();
    let mut last = PathBuf::new();
    let found = manifest
        .for_each_name(|i, path| {
            if i >= wanted {
                return std::ops::ControlFlow::Break(());
            }
            if i % step == 0 {
                checked.push(path.to_path_buf());
            }
            last.clear();
            last.push(path);
            std::ops::ControlFlow::Continue(())
        })
        .with_context(|| format!("reading the file list {}", manifest.location().display()))?
        .min(wanted);
    if found < wanted {
        bail!(
            "the file list {} names {found} files, but {} is {wanted}; list more files in it, \
             or set ++workload.{}={found}",
            manifest.location().display(),
            list.key(),
            list.key()
        );
    }
    if (found - 1) % step != 0 {
        checked.push(last);
    }
    let mut paths = checked.into_iter();
    let sizes = check_spread(
        config,
        manifest.storage(),
        found,
        |_| Ok(paths.next().unwrap_or_default()),
        |path| {
            format!(
                "{} (named in the file list {}) does not exist; fix the list, or generate the \
                 data set it names",
                path.display(),
                manifest.location().display()
            )
        },
    )?;
    Ok(Listing {
        files: DataFiles::Manifest {
            manifest: Arc::new(manifest),
            len: found,
        },
        sizes: KnownSizes::Spread(sizes),
    })
}

/// How a list's names are had: the same on every process, from the config alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    /// Listed from the folder by process 0, and sent to the others.
    Listing,
    /// Computed (`skip_listing`).
    Computed,
    /// Read from a manifest.
    Manifest,
}

/// Where `list`'s names come from.
pub fn name_source(config: &Config, list: List) -> NameSource {
    if manifest_location(config, list).is_some() {
        NameSource::Manifest
    } else if config.dataset.skip_listing {
        NameSource::Computed
    } else {
        NameSource::Listing
    }
}

/// The list's names on a process other than 0, where they do not come from a listing:
/// process 0 has checked them ([`list_files`]); this builds the same list without a request.
pub fn unlisted_files(
    config: &Config,
    storage: &Arc<dyn Storage>,
    format: &dyn Format,
    list: List,
) -> DataFiles {
    let (wanted, _) = list.configured(config);
    match manifest(config, storage, list) {
        Some(manifest) => DataFiles::Manifest {
            manifest: Arc::new(manifest),
            len: usize::try_from(wanted).unwrap_or(usize::MAX),
        },
        None => DataFiles::Ready(FileList::Pattern(Arc::new(name_pattern(
            config, format, list,
        )))),
    }
}

/// Lists `dirs` with up to `threads` listings at once (`dataset.listing_threads`, as the
/// fork's rank 0 lists subfolders), handing each folder's entries to `take` with the folder's
/// place in `dirs` as soon as they are listed, so that no more than `threads` folders' entries
/// are held at once. `take` sees the folders in no fixed order: what it builds must not depend
/// on it. The error is the first folder's, in the order of `dirs`, that could not be listed.
fn list_folders(
    storage: &dyn Storage,
    dirs: &[DirEntry],
    threads: usize,
    take: impl Fn(usize, Vec<DirEntry>) + Sync,
) -> Result<()> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<(usize, anyhow::Error)>> = Mutex::new(None);
    let work = || {
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(dir) = dirs.get(i) else { break };
            match storage.list(&dir.path) {
                Ok(entries) => take(i, entries),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    let e =
                        anyhow::Error::new(e).context(format!("listing {}", dir.path.display()));
                    let mut first = first_error.lock().unwrap_or_else(|e| e.into_inner());
                    if first.as_ref().is_none_or(|(at, _)| i < *at) {
                        *first = Some((i, e));
                    }
                }
            }
        }
    };
    let threads = threads.clamp(1, dirs.len().max(1));
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(work);
            }
        });
    }
    match first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// The data files a listing has found so far, folder by folder, in any order.
///
/// A data set that generation wrote holds only the names [`NamePattern`] gives, each in its
/// folder: those are kept as one bit per file and become the pattern itself, so that listing
/// 10^7 of them holds no name (and other processes compute them as `skip_listing` does). The
/// first other name turns what was found into [`FolderNames`], merged in DLIO's order at the
/// end.
enum Found {
    Generated(Box<GeneratedFiles>),
    Other(Vec<FolderNames>),
}

/// The files found so far whose names are generation's.
struct GeneratedFiles {
    /// The list's names as the config says; `_of_{N}` is learnt from the first file.
    configured: NamePattern,
    /// The pattern with the `N` of the first file found, and the indices found.
    learnt: Option<(NamePattern, FileSet)>,
    /// The size of each file found, by index, where the listing gives sizes (object stores).
    sizes: IndexedSizes,
    /// The folders listed, in their order, as the other names would be kept.
    folders: Vec<FolderNames>,
}

/// The sizes of files by index, 4 bytes each while every size fits in 32 bits (5x10^7 small
/// objects: 200 MB rather than 800 MB as (index, size) pairs), grown as indices come.
#[derive(Debug, Default)]
enum IndexedSizes {
    #[default]
    None,
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl IndexedSizes {
    fn is_empty(&self) -> bool {
        matches!(self, IndexedSizes::None)
    }

    fn set(&mut self, index: usize, size: u64) {
        if let IndexedSizes::None = self {
            *self = IndexedSizes::Narrow(Vec::new());
        }
        if let IndexedSizes::Narrow(narrow) = self
            && u32::try_from(size).is_err()
        {
            *self = IndexedSizes::Wide(narrow.iter().map(|&s| u64::from(s)).collect());
        }
        match self {
            IndexedSizes::None => {}
            IndexedSizes::Narrow(sizes) => {
                if sizes.len() <= index {
                    sizes.resize(index + 1, 0);
                }
                // Fits: checked above.
                sizes[index] = size as u32;
            }
            IndexedSizes::Wide(sizes) => {
                if sizes.len() <= index {
                    sizes.resize(index + 1, 0);
                }
                sizes[index] = size;
            }
        }
    }

    /// File `index`'s size, where sizes are kept.
    fn get(&self, index: usize) -> Option<u64> {
        match self {
            IndexedSizes::None => None,
            IndexedSizes::Narrow(sizes) => Some(sizes.get(index).map_or(0, |&s| u64::from(s))),
            IndexedSizes::Wide(sizes) => Some(sizes.get(index).copied().unwrap_or(0)),
        }
    }
}

/// The file names found in one folder, in one buffer (10^7 names as `PathBuf`s cost 2 GiB).
struct FolderNames {
    /// The folder, for ties between equal file names in two folders.
    path: PathBuf,
    /// The folder's name under the list's folder; empty for the list's folder itself.
    sub: Vec<u8>,
    /// The names, one after another; name `k` ends at `ends[k]`.
    names: Vec<u8>,
    ends: Vec<usize>,
    /// Each name's size, where the listing gives sizes (object stores).
    sizes: Vec<u64>,
}

impl FolderNames {
    fn new(path: PathBuf, sub: Vec<u8>) -> FolderNames {
        FolderNames {
            path,
            sub,
            names: Vec::new(),
            ends: Vec::new(),
            sizes: Vec::new(),
        }
    }

    fn push(&mut self, name: &[u8], size: Option<u64>) {
        self.names.extend_from_slice(name);
        self.ends.push(self.names.len());
        if let Some(size) = size {
            self.sizes.push(size);
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn name(&self, k: usize) -> &[u8] {
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.names[start..self.ends[k]]
    }

    /// Sorts the names (a listing gives them sorted, so this is a check).
    fn sort(&mut self) {
        if (1..self.len()).all(|k| self.name(k - 1) <= self.name(k)) {
            return;
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by(|&a, &b| self.name(a).cmp(self.name(b)));
        let mut sorted = FolderNames::new(
            std::mem::take(&mut self.path),
            std::mem::take(&mut self.sub),
        );
        for k in order {
            let size = self.sizes.get(k).copied();
            sorted.push(self.name(k), size);
        }
        *self = sorted;
    }
}

impl Found {
    /// Nothing found yet in `folders` (the list's subfolders, or the list's folder itself),
    /// whose files generation names as `configured` says.
    fn new(configured: NamePattern, folders: Vec<FolderNames>) -> Found {
        Found::Generated(Box::new(GeneratedFiles {
            configured,
            learnt: None,
            sizes: IndexedSizes::default(),
            folders,
        }))
    }

    /// Adds a data file of folder `folder`.
    fn add(&mut self, folder: usize, entry: DirEntry) {
        if let Found::Generated(generated) = self {
            if generated.add(&entry) {
                return;
            }
            *self = Found::Other(generated.folder_names());
        }
        if let Found::Other(folders) = self {
            let name = file_name_bytes(&entry.path);
            folders[folder].push(name, entry.len);
        }
    }

    /// Files found.
    fn len(&self) -> usize {
        match self {
            Found::Generated(generated) => generated
                .learnt
                .as_ref()
                .map_or(0, |(_, found)| found.count()),
            Found::Other(folders) => folders.iter().map(FolderNames::len).sum(),
        }
    }

    /// The first `wanted` files in DLIO's order (by file name, then by path), under `base` (the
    /// list's folder), and their sizes where the listing gave them.
    fn finish(self, base: PathBuf, wanted: usize) -> (FileList, KnownSizes) {
        let folders = match self {
            Found::Generated(mut generated) => match generated.first(wanted) {
                Some(pattern) => return pattern,
                None => generated.folder_names(),
            },
            Found::Other(folders) => folders,
        };
        merge_names(folders, base, wanted)
    }
}

/// The first `wanted` names of `folders` by file name, then by the folder's path, as paths
/// relative to `base`: a merge of the folders' sorted names.
fn merge_names(
    mut folders: Vec<FolderNames>,
    base: PathBuf,
    wanted: usize,
) -> (FileList, KnownSizes) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    for folder in &mut folders {
        folder.sort();
    }
    // Ties (one name in two folders) go by the folders' paths.
    let mut by_path: Vec<usize> = (0..folders.len()).collect();
    by_path.sort_by(|&a, &b| folders[a].path.as_os_str().cmp(folders[b].path.as_os_str()));
    let mut rank = vec![0usize; folders.len()];
    for (r, &f) in by_path.iter().enumerate() {
        rank[f] = r;
    }
    let sized = folders.iter().any(|f| !f.sizes.is_empty());
    // (the name, its folder's rank by path, the folder, the name's place in it)
    type Next<'a> = Reverse<(&'a [u8], usize, usize, usize)>;
    let mut heap: BinaryHeap<Next> = folders
        .iter()
        .enumerate()
        .filter(|(_, f)| f.len() > 0)
        .map(|(i, f)| Reverse((f.name(0), rank[i], i, 0)))
        .collect();
    let mut table = PathTableBuilder::default();
    let mut sizes = Vec::new();
    let mut relative = Vec::new();
    let mut taken = 0;
    while taken < wanted {
        let Some(Reverse((name, r, i, k))) = heap.pop() else {
            break;
        };
        let folder = &folders[i];
        relative.clear();
        if !folder.sub.is_empty() {
            relative.extend_from_slice(&folder.sub);
            relative.push(b'/');
        }
        relative.extend_from_slice(name);
        table.push(Path::new(std::ffi::OsStr::from_bytes(&relative)));
        if sized {
            sizes.push(folder.sizes.get(k).copied().unwrap_or(0));
        }
        taken += 1;
        if k + 1 < folder.len() {
            heap.push(Reverse((folder.name(k + 1), r, i, k + 1)));
        }
    }
    drop(heap);
    drop(folders);
    let names = table.finish();
    let held = dlio_storage::HeldNames::every(base, names);
    let sizes = if sized {
        KnownSizes::Every(sizes)
    } else {
        KnownSizes::Unknown
    };
    (FileList::Held(Arc::new(held)), sizes)
}

impl GeneratedFiles {
    /// Adds `entry` when it is one of generation's names not found before.
    fn add(&mut self, entry: &DirEntry) -> bool {
        if self.learnt.is_none() {
            let Some(generated) = self.configured.generated_in(&entry.path) else {
                return false;
            };
            // One bit per generated file: a name that claims far more files than the run
            // wants (a stray file, not a data set) is kept as a name instead.
            let bound = (self.configured.len() as u64)
                .saturating_mul(64)
                .max(1 << 26);
            if generated > bound {
                return false;
            }
            let set = FileSet::new(generated as usize);
            self.learnt = Some((self.configured.with_generated(generated), set));
        }
        let Some((pattern, found)) = &mut self.learnt else {
            return false;
        };
        let Some(index) = pattern.index_of(&entry.path) else {
            return false;
        };
        if found.contains(index as usize) {
            return false;
        }
        found.insert(index as usize);
        if let Some(len) = entry.len {
            self.sizes.set(index as usize, len);
        }
        true
    }

    /// The files found, as names in their folders.
    fn folder_names(&mut self) -> Vec<FolderNames> {
        let mut folders = std::mem::take(&mut self.folders);
        let Some((pattern, found)) = self.learnt.take() else {
            return folders;
        };
        // Every file found has a size or none does (the engine's listing gives them or not).
        let sizes = std::mem::take(&mut self.sizes);
        let place: std::collections::HashMap<PathBuf, usize> = folders
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.clone(), i))
            .collect();
        for index in found.iter() {
            let path = pattern.path(index as u64);
            let size = sizes.get(index);
            // index_of checked that the file is in its folder, one of those listed.
            if let Some(&folder) = path.parent().and_then(|parent| place.get(parent)) {
                folders[folder].push(file_name_bytes(&path), size);
            }
        }
        folders
    }

    /// The pattern of the first `wanted` files when they are files `0 .. wanted`.
    fn first(&mut self, wanted: usize) -> Option<(FileList, KnownSizes)> {
        let (pattern, found) = self.learnt.as_ref()?;
        let leading = found.iter().take(wanted).enumerate().all(|(k, i)| k == i);
        if !leading || found.count() < wanted {
            return None;
        }
        // The learnt pattern keeps the configured number of files, which `wanted` is.
        debug_assert_eq!(pattern.len(), wanted);
        let pattern = pattern.clone();
        let sizes = if self.sizes.is_empty() {
            KnownSizes::Unknown
        } else {
            let (mut total, mut smallest) = (0u64, None::<(usize, u64)>);
            for index in 0..wanted {
                let size = self.sizes.get(index).unwrap_or(0);
                total += size;
                if smallest.is_none_or(|(_, least)| size < least) {
                    smallest = Some((index, size));
                }
            }
            KnownSizes::Summed { total, smallest }
        };
        Some((FileList::Pattern(Arc::new(pattern)), sizes))
    }
}

/// The files of a data set, and what their listing learnt of their sizes.
#[derive(Debug, Default)]
pub struct Listing {
    pub files: DataFiles,
    pub sizes: KnownSizes,
}

/// The files' sizes a listing learnt without a request per file, for sizing the data set.
#[derive(Debug, Default)]
pub enum KnownSizes {
    /// None (a POSIX listing carries no sizes: they cost a `stat` per file).
    #[default]
    Unknown,
    /// Every file's, in the order of the files (an object store's LIST carries them).
    Every(Vec<u64>),
    /// Some files', spread evenly over the list (`skip_listing`'s and a manifest's checks).
    Spread(Vec<(PathBuf, u64)>),
    /// Every file's, summed as they were listed (an object store's LIST of generation's
    /// names): the total, and the smallest file (its index in the list) and its size.
    Summed {
        total: u64,
        smallest: Option<(usize, u64)>,
    },
}

/// Lists `data_folder/{list}` as DLIO does: entries with the format's extension, or, when
/// the folder holds subfolders, the files one level down (their number must match
/// `num_subfolders_*`), sorted by file name. More files than configured: the first N are
/// used. Fewer: an error that says how many were found and how to generate them.
pub fn list_files(
    config: &Config,
    storage: &Arc<dyn Storage>,
    format: &dyn Format,
    list: List,
) -> Result<Listing> {
    if let Some(manifest) = manifest(config, storage, list) {
        return manifest_files(config, manifest, list);
    }
    let storage = &**storage;
    if config.dataset.skip_listing {
        return computed_files(config, storage, format, list);
    }
    let (wanted, subfolders) = list.configured(config);
    if wanted == 0 {
        return Ok(Listing::default());
    }
    let dir = data_root(config).join(list.dir_name());
    let ext = format.extension();
    let suffix = format!(".{ext}");
    let matches = |p: &Path| {
        let name = file_name_bytes(p);
        // The whole ending, not `Path::extension`: compressed csv files end in `.csv.gz`.
        !name.starts_with(b".")
            && name.len() >= suffix.len()
            && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    // The folder's own data files are taken as they are listed (a flat folder of 10^7 files
    // is never held as entries), its subfolders kept aside. On object stores the entries carry
    // the sizes the LIST gave, which spare a HEAD per file when the data set is sized.
    let mut flat = Found::new(
        name_pattern(config, format, list),
        vec![FolderNames::new(dir.clone(), Vec::new())],
    );
    let mut dirs: Vec<DirEntry> = Vec::new();
    let listed = storage.list_each(&dir, &mut |entry| {
        if entry.is_dir {
            dirs.push(entry);
        } else if matches(&entry.path) {
            flat.add(0, entry);
        }
    });
    match listed {
        Ok(()) => {}
        Err(dlio_storage::StorageError::NotFound { .. }) => bail!(
            "the data folder {} does not exist, so there is no {} set to read; generate it first \
             with ++workload.workflow.generate_data=True (or `dlio generate` with the same arguments)",
            dir.display(),
            list.dir_name()
        ),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    }
    // Each folder's place is its place in path order, whatever order the listing gave.
    dirs.sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    let dir_count = dirs.len();
    // A flat data set may share its folder with unrelated folders (`lost+found`): subfolders
    // are read when the config has them, or when the folder holds no data file of its own.
    let flat_files = flat.len() > 0;
    let found = if !dirs.is_empty() && (subfolders > 1 || !flat_files) {
        if subfolders > 1 && dirs.len() as u64 != subfolders {
            bail!(
                "{} holds {} subfolders but {} is {}; regenerate the data set or set the key to {}",
                dir.display(),
                dirs.len(),
                match list {
                    List::Train => "dataset.num_subfolders_train",
                    List::Valid => "dataset.num_subfolders_eval",
                },
                subfolders,
                dirs.len()
            );
        }
        drop(flat);
        let folders = dirs
            .iter()
            .map(|d| {
                let sub = file_name_bytes(&d.path).to_vec();
                FolderNames::new(d.path.clone(), sub)
            })
            .collect();
        let threads = config.dataset.listing_threads.max(1) as usize;
        let shared = std::sync::Mutex::new(Found::new(name_pattern(config, format, list), folders));
        list_folders(storage, &dirs, threads, |folder, listed| {
            let mut found = shared.lock().unwrap_or_else(|e| e.into_inner());
            for entry in listed.into_iter().filter(|e| !e.is_dir && matches(&e.path)) {
                found.add(folder, entry);
            }
        })?;
        shared.into_inner().unwrap_or_else(|e| e.into_inner())
    } else {
        flat
    };
    let count = found.len() as u64;
    if count == 0 {
        bail!(
            "no {} data: {} holds no .{ext} files{}; generate the data set with \
             ++workload.workflow.generate_data=True, or point ++workload.dataset.data_folder at \
             the folder that holds {}/",
            list.dir_name(),
            dir.display(),
            if dir_count == 0 {
                String::new()
            } else {
                format!(" (nor do its {dir_count} subfolders)")
            },
            list.dir_name()
        );
    }
    if count < wanted {
        bail!(
            "not enough {} data: {} holds {count} .{ext} files but {} is {wanted}; generate the \
             data set with ++workload.workflow.generate_data=True, or set \
             ++workload.{}={count} to use what is there",
            list.dir_name(),
            dir.display(),
            list.key(),
            list.key()
        );
    }
    let (files, sizes) = found.finish(dir, wanted as usize);
    Ok(Listing {
        files: DataFiles::Ready(files),
        sizes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, len: Option<u64>) -> DirEntry {
        DirEntry {
            path: path.into(),
            is_dir: false,
            len,
        }
    }

    fn folders() -> Vec<FolderNames> {
        ["0", "1"]
            .iter()
            .map(|sub| FolderNames::new(format!("/d/train/{sub}").into(), sub.as_bytes().to_vec()))
            .collect()
    }

    fn paths(list: &FileList) -> Vec<PathBuf> {
        (0..list.len()).filter_map(|i| list.path_buf(i)).collect()
    }

    #[test]
    fn a_listing_of_generated_names_is_their_pattern_whatever_the_folder_order() {
        let configured = NamePattern::new("/d/train".into(), 3, 3, 2, "img", "npz");
        let mut found = Found::new(configured.clone(), folders());
        // Generated as 4 files; the run reads the first 3. Folder 01 is listed first.
        for (folder, name) in [(1, "1/img_1_of_4.npz"), (1, "1/img_3_of_4.npz")]
            .into_iter()
            .chain([(0, "0/img_0_of_4.npz"), (0, "0/img_2_of_4.npz")])
        {
            found.add(folder, entry(&format!("/d/train/{name}"), None));
        }
        assert_eq!(found.len(), 4);
        let (list, sizes) = found.finish("/d/train".into(), 3);
        let FileList::Pattern(pattern) = &list else {
            panic!("not a pattern: {list:?}")
        };
        assert_eq!(**pattern, configured.with_generated(4));
        assert!(matches!(sizes, KnownSizes::Unknown));
        assert_eq!(
            paths(&list),
            [
                "/d/train/0/img_0_of_4.npz",
                "/d/train/1/img_1_of_4.npz",
                "/d/train/0/img_2_of_4.npz"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn other_names_are_merged_by_file_name_then_folder_with_their_sizes() {
        let configured = NamePattern::new("/d/train".into(), 5, 5, 2, "img", "npz");
        let mut found = Found::new(configured, folders());
        // Generation's names first, then one in the wrong folder and a stray name: what was
        // found so far is kept as names, in the listing's order.
        for (folder, name, len) in [
            (1, "1/img_1_of_4.npz", 11),
            (1, "1/img_3_of_4.npz", 13),
            (0, "0/img_2_of_4.npz", 12),
            (1, "1/img_0_of_4.npz", 100),
            (1, "1/img_1a.npz", 101),
            (0, "0/img_0_of_4.npz", 10),
        ] {
            found.add(folder, entry(&format!("/d/train/{name}"), Some(len)));
        }
        // The first three were generation's names, kept as bits until the fourth.
        assert!(matches!(found, Found::Other(_)));
        assert_eq!(found.len(), 6);
        let (list, sizes) = found.finish("/d/train".into(), 5);
        assert!(matches!(list, FileList::Held(_)), "{list:?}");
        assert_eq!(
            paths(&list),
            [
                "/d/train/0/img_0_of_4.npz",
                "/d/train/1/img_0_of_4.npz",
                "/d/train/1/img_1_of_4.npz",
                "/d/train/1/img_1a.npz",
                "/d/train/0/img_2_of_4.npz",
            ]
            .map(PathBuf::from)
        );
        let KnownSizes::Every(sizes) = sizes else {
            panic!("sizes lost")
        };
        assert_eq!(sizes, [10, 100, 11, 101, 12]);
    }

    #[test]
    fn sizes_of_generated_names_are_summed_over_the_files_read() {
        let configured = NamePattern::new("/d/train".into(), 3, 3, 1, "img", "npy");
        let flat = vec![FolderNames::new("/d/train".into(), Vec::new())];
        let mut found = Found::new(configured, flat);
        // Four generated; the run reads three. A size past 32 bits widens what is kept.
        for (i, len) in [(3, 1u64), (1, 5 << 32), (0, 7), (2, 6)] {
            found.add(0, entry(&format!("/d/train/img_{i}_of_4.npy"), Some(len)));
        }
        let (list, sizes) = found.finish("/d/train".into(), 3);
        assert!(matches!(list, FileList::Pattern(_)));
        let KnownSizes::Summed { total, smallest } = sizes else {
            panic!("{sizes:?}")
        };
        assert_eq!(total, 7 + (5 << 32) + 6);
        assert_eq!(smallest, Some((2, 6)), "file 3 is not read");
    }

    #[test]
    fn missing_generated_files_leave_the_pattern_for_the_names_found() {
        let configured = NamePattern::new("/d/train".into(), 2, 2, 1, "img", "npz");
        let flat = vec![FolderNames::new("/d/train".into(), Vec::new())];
        let mut found = Found::new(configured, flat);
        for name in ["img_2_of_3.npz", "img_0_of_3.npz"] {
            found.add(0, entry(&format!("/d/train/{name}"), None));
        }
        let (list, _) = found.finish("/d/train".into(), 2);
        assert_eq!(
            paths(&list),
            ["/d/train/img_0_of_3.npz", "/d/train/img_2_of_3.npz"].map(PathBuf::from)
        );
    }
}
