//! Where a workload's files live: DLIO's file names for generation, and the listing of
//! `data_folder/{train,valid}` at run time (§4.6, §4.7 of the spec).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use dlio_config::Config;
use dlio_format::{FileLayout, Format, GenerationFile};
use dlio_storage::{
    DataFiles, DirEntry, FileList, FileSet, Manifest, NamePattern, PathTable, Storage,
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
/// fork's rank 0 lists subfolders), handing each folder's entries to `take` as soon as they are
/// listed, so that no more than `threads` folders' entries are held at once. `take` sees the
/// folders in no fixed order: what it builds must not depend on it. The error is the first
/// folder's, in the order of `dirs`, that could not be listed.
fn list_folders(
    storage: &dyn Storage,
    dirs: &[DirEntry],
    threads: usize,
    take: impl Fn(Vec<DirEntry>) + Sync,
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
                Ok(entries) => take(entries),
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
/// first other name turns what was found into entries, kept and sorted as DLIO sorts them.
enum Found {
    Generated(Box<GeneratedFiles>),
    Other(Vec<DirEntry>),
}

/// The files found so far whose names are generation's.
struct GeneratedFiles {
    /// The list's names as the config says; `_of_{N}` is learnt from the first file.
    configured: NamePattern,
    /// The pattern with the `N` of the first file found, and the indices found.
    learnt: Option<(NamePattern, FileSet)>,
    /// (index, size) of the files found, where the listing gives sizes (object stores).
    sizes: Vec<(u64, u64)>,
}

impl Found {
    fn new(configured: NamePattern) -> Found {
        Found::Generated(Box::new(GeneratedFiles {
            configured,
            learnt: None,
            sizes: Vec::new(),
        }))
    }

    /// Adds a data file.
    fn add(&mut self, entry: DirEntry) {
        if let Found::Generated(generated) = self {
            if generated.add(&entry) {
                return;
            }
            let entries = generated.entries();
            *self = Found::Other(entries);
        }
        if let Found::Other(entries) = self {
            entries.push(entry);
        }
    }

    /// Files found.
    fn len(&self) -> usize {
        match self {
            Found::Generated(generated) => generated
                .learnt
                .as_ref()
                .map_or(0, |(_, found)| found.count()),
            Found::Other(entries) => entries.len(),
        }
    }

    /// The first `wanted` files in DLIO's order (by file name, then by path), and their sizes
    /// where the listing gave them.
    fn finish(self, wanted: usize) -> (FileList, KnownSizes) {
        let mut entries = match self {
            Found::Generated(generated) => match generated.first(wanted) {
                Ok(pattern) => return pattern,
                Err(entries) => entries,
            },
            Found::Other(entries) => entries,
        };
        entries.sort_unstable_by(|a, b| {
            let (a, b) = (a.path.as_os_str(), b.path.as_os_str());
            file_name_bytes(a)
                .cmp(file_name_bytes(b))
                .then_with(|| a.cmp(b))
        });
        entries.truncate(wanted);
        let sizes = match entries.iter().map(|e| e.len).collect() {
            Some(every) => KnownSizes::Every(every),
            None => KnownSizes::Unknown,
        };
        let table: PathTable = entries.into_iter().map(|e| e.path).collect();
        (table.into(), sizes)
    }
}

/// The bytes of a path's last component.
fn file_name_bytes(path: &std::ffi::OsStr) -> &[u8] {
    let raw = path.as_encoded_bytes();
    raw.rsplit(|&b| b == b'/').next().unwrap_or(raw)
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
            self.sizes.push((index, len));
        }
        true
    }

    /// The files found, as entries.
    fn entries(&mut self) -> Vec<DirEntry> {
        let Some((pattern, found)) = self.learnt.take() else {
            return Vec::new();
        };
        // Every file found has a size or none does (the engine's listing gives them or not);
        // sorted by index, they go with the members in increasing order.
        let mut sizes = std::mem::take(&mut self.sizes);
        sizes.sort_unstable();
        let sized = !sizes.is_empty();
        let mut sizes = sizes.into_iter().map(|(_, len)| len);
        found
            .iter()
            .map(|index| DirEntry {
                path: pattern.path(index as u64),
                is_dir: false,
                len: if sized { sizes.next() } else { None },
            })
            .collect()
    }

    /// The pattern of the first `wanted` files when they are files `0 .. wanted`; else every
    /// file found, as entries.
    fn first(mut self: Box<Self>, wanted: usize) -> Result<(FileList, KnownSizes), Vec<DirEntry>> {
        let Some((pattern, found)) = &self.learnt else {
            return Err(Vec::new());
        };
        let leading = found.iter().take(wanted).enumerate().all(|(k, i)| k == i);
        if !leading || found.count() < wanted {
            return Err(self.entries());
        }
        // The learnt pattern keeps the configured number of files, which `wanted` is.
        debug_assert_eq!(pattern.len(), wanted);
        let pattern = pattern.clone();
        let sizes = if self.sizes.is_empty() {
            KnownSizes::Unknown
        } else {
            self.sizes.retain(|&(i, _)| (i as usize) < wanted);
            self.sizes.sort_unstable();
            KnownSizes::Every(self.sizes.into_iter().map(|(_, len)| len).collect())
        };
        Ok((FileList::Pattern(Arc::new(pattern)), sizes))
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
    let entries = match storage.list(&dir) {
        Ok(entries) => entries,
        Err(dlio_storage::StorageError::NotFound { .. }) => bail!(
            "the data folder {} does not exist, so there is no {} set to read; generate it first \
             with ++workload.workflow.generate_data=True (or `dlio generate` with the same arguments)",
            dir.display(),
            list.dir_name()
        ),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let suffix = format!(".{ext}");
    let matches = |p: &Path| {
        // The last component's bytes, found without `Path::file_name`'s component parsing
        // (a third of the time of listing a million files) or an allocation per entry.
        let raw = p.as_os_str().as_encoded_bytes();
        let name = raw.rsplit(|&b| b == b'/').next().unwrap_or(raw);
        // The whole ending, not `Path::extension`: compressed csv files end in `.csv.gz`.
        !name.starts_with(b".")
            && name.len() >= suffix.len()
            && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    // Whole entries, not paths: on object stores they carry the sizes the LIST gave, which
    // spare a HEAD per file when the data set is sized.
    let mut found = Found::new(name_pattern(config, format, list));
    let dirs: Vec<_> = entries.iter().filter(|e| e.is_dir).cloned().collect();
    let dir_count = dirs.len();
    // A flat data set may share its folder with unrelated folders (`lost+found`): subfolders
    // are read when the config has them, or when the folder holds no data file of its own.
    let flat_files = entries.iter().any(|e| !e.is_dir && matches(&e.path));
    if !dirs.is_empty() && (subfolders > 1 || !flat_files) {
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
        drop(entries);
        let threads = config.dataset.listing_threads.max(1) as usize;
        let shared = std::sync::Mutex::new(found);
        list_folders(storage, &dirs, threads, |listed| {
            let mut found = shared.lock().unwrap_or_else(|e| e.into_inner());
            for entry in listed.into_iter().filter(|e| !e.is_dir && matches(&e.path)) {
                found.add(entry);
            }
        })?;
        found = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    } else {
        for entry in entries
            .into_iter()
            .filter(|e| !e.is_dir && matches(&e.path))
        {
            found.add(entry);
        }
    }
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
    let (files, sizes) = found.finish(wanted as usize);
    Ok(Listing {
        files: DataFiles::Ready(files),
        sizes,
    })
}
