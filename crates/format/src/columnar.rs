//! Columnar files read by unit (parquet's row groups, Arrow IPC's record batches), without
//! decoding: a sample read fetches, once per unit, the byte ranges of the selected columns in
//! its unit (and only those), as a columnar reader that throws the table away moves them.
//! How a file's footer gives its units and their ranges is the format's ([`UnitIndex`]); the
//! rest is shared: the footer is read at open, once per file and epoch (a file closed after a
//! sample keeps its handle until the epoch ends, as the fork's readers keep their files), and
//! the threads of a loader share which units they fetched ([`SharedRowGroups`]), so each is
//! fetched once per epoch whichever threads its rows' batches went to.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dlio_storage::{IoBuffer, ReadHandle, Storage};

use crate::parquet::row_group_of;
use crate::ranged::{BufferPlace, read_range};
use crate::row_groups::{Claim, SharedRowGroups};
use crate::{FileKey, FormatError, FormatReader};

/// Row groups a reader remembers as read (the neighbouring samples cost no I/O).
const ROW_GROUP_CACHE: usize = 4;

/// Files whose footer a reader remembers: the fork keeps every footer for the epoch, so a
/// per-sample open (`read_type: on_demand`) reads the footer once, not once per sample.
const FOOTER_CACHE: usize = 256;

/// Files a reader keeps open after their samples were read, until the epoch ends (the
/// oldest is closed first): a per-sample open then costs a lookup, not three system calls.
const KEPT_OPEN: usize = 16;

/// What a file's footer says, as a reader needs it.
pub(crate) struct Footer {
    pub(crate) path: PathBuf,
    /// An identity of the path, for the row groups the threads share.
    pub(crate) id: u64,
    /// First row of each unit, plus the total row count at the end.
    pub(crate) group_starts: Vec<u64>,
    /// Per unit: the byte ranges (offset, length) of the selected columns, with adjacent
    /// ranges merged into one request.
    pub(crate) ranges: Vec<Vec<(u64, u64)>>,
}

impl Footer {
    /// An identity of `path`, for the units the threads share.
    pub(crate) fn id_of(path: &Path) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault};
        BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(path)
    }
}

/// Merges ranges that touch into one request, after sorting them by offset.
pub(crate) fn merge_adjacent(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (start, len) in spans {
        match merged.last_mut() {
            Some((s, l)) if *s + *l == start => *l += len,
            _ => merged.push((start, len)),
        }
    }
    merged
}

/// How a columnar format's footer gives a file's units and the byte ranges of the selected
/// columns in each.
pub(crate) trait UnitIndex: Send {
    /// Reads the footer (and what else the units' ranges need) through `handle`, reading at
    /// offsets aligned to `alignment`; hands the handle back for the units' reads.
    fn read(
        &self,
        handle: Box<dyn ReadHandle>,
        path: &Path,
        place: BufferPlace,
    ) -> Result<(Footer, Box<dyn ReadHandle>), FormatError>;
}

struct OpenFile {
    footer: Arc<Footer>,
    handle: Box<dyn ReadHandle>,
    /// Closed by the loader but kept open until the epoch ends; `closed_at` orders them.
    closed: bool,
    closed_at: u64,
}

/// Reads the selected columns of columnar files, one unit (row group, record batch) at a
/// time.
pub(crate) struct ColumnReader {
    /// How a file's footer gives its units.
    index: Box<dyn UnitIndex>,
    /// Bytes of a sample as the loop gets it (the selected columns' share of a row).
    nominal_row_bytes: usize,
    open: rustc_hash::FxHashMap<FileKey, OpenFile>,
    /// Row groups read lately, as (file, group).
    recent: VecDeque<(FileKey, usize)>,
    buffer: Option<IoBuffer>,
    /// Where the column chunks are read: the engine's alignment, or the workload's place.
    place: BufferPlace,
    sample: Vec<u8>,
    /// Footers of files opened lately, with the order they came in (the oldest leaves first).
    footers: rustc_hash::FxHashMap<FileKey, Arc<Footer>>,
    footer_order: VecDeque<FileKey>,
    /// Files of `open` that are closed (kept open), and a clock of the closes.
    closed: usize,
    closes: u64,
    /// The row groups this loader's threads fetched; none for a reader of its own.
    shared: Option<Arc<SharedRowGroups>>,
    epoch: u32,
    /// Footers are read once per file and run (a reader that keeps its file objects, as a
    /// program holding `pyarrow.parquet.ParquetFile`s does), not once per epoch.
    keep_footers: bool,
}

impl ColumnReader {
    /// A reader of the units `index` finds, handing the loop `nominal_row_bytes` per sample,
    /// sharing fetched units through `shared`.
    pub(crate) fn new(
        index: Box<dyn UnitIndex>,
        nominal_row_bytes: u64,
        shared: Option<Arc<SharedRowGroups>>,
    ) -> ColumnReader {
        ColumnReader {
            index,
            nominal_row_bytes: nominal_row_bytes as usize,
            open: rustc_hash::FxHashMap::default(),
            recent: VecDeque::new(),
            buffer: None,
            place: BufferPlace::from(1),
            sample: Vec::new(),
            footers: rustc_hash::FxHashMap::default(),
            footer_order: VecDeque::new(),
            closed: 0,
            closes: 0,
            shared,
            epoch: 0,
            keep_footers: false,
        }
    }

    /// Fetches the unit that holds row `index` of the open file `key`, unless it was fetched
    /// lately (by this thread, or by another of the loader's); returns the first row after the
    /// unit.
    fn fetch_unit_of(&mut self, key: FileKey, index: u32) -> Result<u64, FormatError> {
        let file = self
            .open
            .get_mut(&key)
            .filter(|f| !f.closed)
            .ok_or(FormatError::FileNotOpen { key })?;
        let footer = &file.footer;
        let group = row_group_of(&footer.group_starts, &footer.path, u64::from(index))?;
        let unit_end = footer.group_starts[group + 1];
        if !self.recent.contains(&(key, group)) {
            let shared = self.shared.clone();
            let claim = shared
                .as_deref()
                .map(|s| s.claim(self.epoch, footer.id, group as u32));
            let fetch = !matches!(claim, Some(Claim::Fetched));
            for &(offset, len) in footer.ranges[group].iter().filter(|_| fetch) {
                let len = usize::try_from(len).map_err(|_| {
                    FormatError::corrupt(&footer.path, offset, "a column chunk larger than memory")
                })?;
                read_range(&mut *file.handle, &mut self.buffer, self.place, offset, len)?;
            }
            if let Some(Claim::Fetch(claim)) = claim {
                claim.done();
            }
            if self.recent.len() >= ROW_GROUP_CACHE {
                self.recent.pop_front();
            }
            self.recent.push_back((key, group));
        }
        Ok(unit_end)
    }

    /// Keeps the footers read across epochs (`dataset.parquet.metadata_cache`).
    pub(crate) fn keep_footers_across_epochs(mut self, keep: bool) -> ColumnReader {
        self.keep_footers = keep;
        self
    }
}

impl FormatReader for ColumnReader {
    /// Opens the file; reads its footer only when it is not remembered from an earlier open.
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        // A file closed after an earlier sample is still open: flag flips, no system call.
        if let Some(file) = self.open.get_mut(&key) {
            if file.footer.path == path {
                if file.closed {
                    file.closed = false;
                    self.closed -= 1;
                }
                return Ok(());
            }
            if file.closed {
                self.closed -= 1;
            }
            self.open.remove(&key);
        }
        let mut handle = storage.open(path)?;
        self.place = BufferPlace::of(storage.capabilities());
        let footer = match self.footers.get(&key).filter(|f| f.path == path) {
            Some(footer) => Arc::clone(footer),
            None => {
                let (footer, back) = self.index.read(handle, path, self.place)?;
                handle = back;
                let footer = Arc::new(footer);
                if self.footer_order.len() >= FOOTER_CACHE
                    && let Some(oldest) = self.footer_order.pop_front()
                {
                    self.footers.remove(&oldest);
                }
                self.footer_order.push_back(key);
                self.footers.insert(key, Arc::clone(&footer));
                footer
            }
        };
        self.open.insert(
            key,
            OpenFile {
                footer,
                handle,
                closed: false,
                closed_at: 0,
            },
        );
        Ok(())
    }

    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        self.fetch_unit_of(key, index)?;
        // The loop gets the selected columns' share of a row, as the fork hands it a dummy
        // tensor: nothing was decoded.
        let n = self.nominal_row_bytes;
        if self.sample.len() < n {
            self.sample.resize(n, 0);
        }
        Ok(&self.sample[..n])
    }

    /// Opening a file again costs nothing while its handle is kept: runs are cheaper.
    fn reads_runs(&self) -> bool {
        true
    }

    /// A run of rows: each unit it spans fetched once (or found fetched), one lookup a unit.
    fn read_run(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        first: u32,
        count: u32,
    ) -> Result<u64, FormatError> {
        let end = u64::from(first) + u64::from(count);
        let mut row = u64::from(first);
        while row < end {
            let unit_end = self.fetch_unit_of(key, row as u32)?;
            row = unit_end.min(end).max(row + 1);
        }
        Ok(u64::from(count) * self.nominal_row_bytes as u64)
    }

    fn close(&mut self, key: FileKey) {
        let Some(file) = self.open.get_mut(&key).filter(|f| !f.closed) else {
            return;
        };
        file.closed = true;
        file.closed_at = self.closes;
        self.closes += 1;
        self.closed += 1;
        if self.closed > KEPT_OPEN {
            // The file closed longest ago is closed for real (a scan of about KEPT_OPEN
            // entries, once per file beyond them).
            let oldest = self
                .open
                .iter()
                .filter(|(_, f)| f.closed)
                .min_by_key(|(_, f)| f.closed_at)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.open.remove(&oldest);
                self.closed -= 1;
            }
        }
    }

    /// A new epoch opens its files again and reads their footers (the fork's reader reopens
    /// them every epoch) and fetches its row groups again.
    fn begin_epoch(&mut self, epoch: u32) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.open.retain(|_, f| !f.closed);
            self.closed = 0;
            self.recent.clear();
            if !self.keep_footers {
                self.footers.clear();
                self.footer_order.clear();
            }
        }
    }
}
