//! `synthetic`: DLIO's no-I/O format. Generation writes a tiny file holding the file's index
//! as decimal text (so that listing finds a dataset); reading does no I/O at all and hands
//! out a zero-filled sample of the configured size. It measures the framework, not storage.

use std::path::{Path, PathBuf};

use dlio_config::FormatKind;
use dlio_storage::Storage;

use crate::descriptor::{FormatDescriptor, no_checks};
use crate::whole_file::grow;
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// The `synthetic` format.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SyntheticFormat;

/// `synthetic`: samples made in memory, no data read.
pub(crate) const DESCRIPTOR: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Synthetic,
    aliases: &[],
    extensions: &[],
    magic: &[],
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: false,
    element: None,
    built: true,
    check: no_checks,
    build: |_, _| Ok(Box::new(SyntheticFormat)),
};

impl Format for SyntheticFormat {
    fn name(&self) -> &'static str {
        "synthetic"
    }

    fn extension(&self) -> &'static str {
        "synthetic"
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        _layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let mut out = storage.create(path)?;
        out.write_all(rng.file_index().to_string().as_bytes())?;
        Ok(out.commit()?)
    }

    /// Every sample is `layout.sample_bytes()` zero bytes; `layout.samples` per file.
    fn reader(&self, layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(SyntheticReader {
            sample_bytes: layout.sample_bytes(),
            samples: layout.samples,
            open: rustc_hash::FxHashMap::default(),
            spare_paths: Vec::new(),
            zeros: Vec::new(),
        })
    }
}

struct SyntheticReader {
    sample_bytes: u64,
    samples: u32,
    /// Open keys, with their paths for error messages.
    open: rustc_hash::FxHashMap<FileKey, PathBuf>,
    spare_paths: Vec<PathBuf>,
    zeros: Vec<u8>,
}

impl FormatReader for SyntheticReader {
    fn open(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let mut owned = self
            .open
            .remove(&key)
            .or_else(|| self.spare_paths.pop())
            .unwrap_or_default();
        owned.as_mut_os_string().clear();
        owned.push(path);
        self.open.insert(key, owned);
        Ok(())
    }

    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        let path = self
            .open
            .get(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        if index >= self.samples {
            return Err(FormatError::SampleOutOfRange {
                path: path.clone(),
                index: u64::from(index),
                samples: u64::from(self.samples),
            });
        }
        let len = usize::try_from(self.sample_bytes).map_err(|_| {
            FormatError::unsupported(
                format!(
                    "a synthetic sample of {} bytes does not fit in memory",
                    self.sample_bytes
                ),
                "use a smaller record_length_bytes or record_dims",
            )
        })?;
        Ok(grow(&mut self.zeros, len))
    }

    fn close(&mut self, key: FileKey) {
        if let Some(path) = self.open.remove(&key)
            && self.spare_paths.len() < 4
        {
            self.spare_paths.push(path);
        }
    }
}
