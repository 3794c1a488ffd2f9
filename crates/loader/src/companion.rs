//! `dataset.sample_companions`: the small file of its own that each data file has beside it
//! (a lidar frame's calibration, an image's label JSON or mask), which the reader of a sample
//! reads whole before the sample.

use std::path::{Path, PathBuf};

use dlio_config::SampleCompanion;
use dlio_storage::{Storage, read_head};

use crate::LoaderError;

/// Where each data file's companions are, and their sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Companions {
    /// The data folder, which the data files' paths are taken relative to.
    root: PathBuf,
    /// Each companion set's folder (under `root`) and the bytes of each of its files.
    sets: Vec<(PathBuf, u64)>,
}

/// The extension of every companion file: its bytes are random, whatever the program's were.
const EXTENSION: &str = "bin";

impl Companions {
    /// The companions of the data set under `root`; `None` when there are none.
    pub fn new(root: &Path, entries: &[SampleCompanion]) -> Option<Companions> {
        (!entries.is_empty()).then(|| Companions {
            root: root.to_path_buf(),
            sets: entries
                .iter()
                .map(|e| (root.join(&e.folder), e.size_bytes))
                .collect(),
        })
    }

    /// The companions of data file `file` with their sizes: in each set's folder, at the
    /// file's place under the data folder (`<set>/train/img_1_of_8.bin` for
    /// `<root>/train/img_1_of_8.npz`), or by its name alone for a file outside it (a manifest's
    /// absolute path).
    pub fn of<'a>(&'a self, file: &'a Path) -> impl Iterator<Item = (PathBuf, u64)> + 'a {
        let place = file
            .strip_prefix(&self.root)
            .ok()
            .filter(|rest| rest.components().count() > 0)
            .map(Path::to_path_buf)
            .or_else(|| file.file_name().map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("companion"));
        self.sets
            .iter()
            .map(move |(set, bytes)| (set.join(&place).with_extension(EXTENSION), *bytes))
    }

    /// Reads the companions of `file` whole through `storage` (so they are counted and
    /// traced like every other read), into `buf`, for its sample `index`. Returns the bytes
    /// read, or which companion failed and why.
    pub(crate) fn read_for(
        &self,
        storage: &dyn Storage,
        file: &Path,
        index: u64,
        buf: &mut Vec<u8>,
    ) -> Result<u64, LoaderError> {
        let mut read = 0u64;
        for (path, _) in self.of(file) {
            read += read_head(storage, &path, u64::MAX, buf).map_err(|e| LoaderError::Read {
                path: path.clone(),
                index,
                source: Box::new(e.into()),
            })?;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_companion_sits_at_its_data_files_place_in_its_own_folder() {
        let entries = [
            SampleCompanion {
                folder: "calib".into(),
                size_bytes: 1620,
            },
            SampleCompanion {
                folder: "meta/labels".into(),
                size_bytes: 90,
            },
        ];
        let c = Companions::new(Path::new("/data/set"), &entries).unwrap();
        let got: Vec<(PathBuf, u64)> = c
            .of(Path::new("/data/set/train/3/img_1_of_8.npz"))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    PathBuf::from("/data/set/calib/train/3/img_1_of_8.bin"),
                    1620
                ),
                (
                    PathBuf::from("/data/set/meta/labels/train/3/img_1_of_8.bin"),
                    90
                ),
            ]
        );
        // A file outside the data folder (a manifest's absolute path): by its name.
        let got: Vec<PathBuf> = c
            .of(Path::new("/elsewhere/x.npy"))
            .map(|(p, _)| p)
            .collect();
        assert_eq!(got[0], PathBuf::from("/data/set/calib/x.bin"));
        assert!(Companions::new(Path::new("/d"), &[]).is_none());
    }
}
