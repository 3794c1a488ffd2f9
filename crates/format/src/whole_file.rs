//! The reader shared by the formats that `np.load` a whole file (npy, npz): `open` reads every
//! byte of the file through the storage into a buffer the reader owns, a format-specific
//! [`ArrayLocator`] finds the sample array in it, and `read_sample` slices sample `j` out of
//! `x[..., j]`.
//!
//! Buffers are grow-only and recycled across files, so in steady state neither `open` nor
//! `read_sample` allocates.

use std::path::{Path, PathBuf};

use dlio_storage::{IoBuffer, Storage};
use rustc_hash::FxHashMap;

use crate::{FileKey, FormatError, FormatReader};

/// Closed files whose buffers are kept for reuse. Loaders that keep many files open
/// (`read_type: memory`) would otherwise keep all their memory after closing them.
const SPARE_FILES: usize = 4;

/// Where and how the sample array lies in a file's bytes.
#[derive(Debug, Default)]
pub(crate) struct ArrayLocation {
    /// True when the array is in the inflated buffer (a deflated npz member), false when it is
    /// in the file buffer.
    pub(crate) inflated: bool,
    /// Offset of the first array element in that buffer.
    pub(crate) data_start: usize,
    /// Bytes per element.
    pub(crate) itemsize: usize,
    /// `fortran_order` of the npy header.
    pub(crate) fortran_order: bool,
    /// Full array shape; the last axis indexes samples.
    pub(crate) shape: Vec<u64>,
}

/// Finds the sample array in a whole file. One per reader, so it can keep state (e.g. an
/// inflater) across files.
pub(crate) trait ArrayLocator: Send {
    /// Parses `file` (all bytes of `path`) and fills `location`; may inflate the array into
    /// `inflated` (grow-only: use `inflated[..n]`, never shrink it).
    fn locate(
        &mut self,
        path: &Path,
        file: &[u8],
        inflated: &mut Vec<u8>,
        location: &mut ArrayLocation,
    ) -> Result<(), FormatError>;
}

/// One open file.
struct OpenFile {
    path: PathBuf,
    file: Option<IoBuffer>,
    inflated: Vec<u8>,
    location: ArrayLocation,
    /// Sample geometry derived from `location.shape` at open.
    samples: u64,
    sample_elements: usize,
    /// For `fortran_order` arrays: the sample dimensions and their Fortran strides (in
    /// elements), used to gather a sample in C order.
    sample_dims: Vec<usize>,
    fortran_strides: Vec<usize>,
}

impl OpenFile {
    fn empty() -> OpenFile {
        OpenFile {
            path: PathBuf::new(),
            file: None,
            inflated: Vec::new(),
            location: ArrayLocation::default(),
            samples: 0,
            sample_elements: 0,
            sample_dims: Vec::new(),
            fortran_strides: Vec::new(),
        }
    }

    fn load(
        &mut self,
        storage: &dyn Storage,
        path: &Path,
        locator: &mut dyn ArrayLocator,
    ) -> Result<(), FormatError> {
        self.path.as_mut_os_string().clear();
        self.path.push(path);

        let file = crate::ranged::read_whole_file(storage, path, &mut self.file)?;

        locator.locate(path, file, &mut self.inflated, &mut self.location)?;
        self.derive_geometry(path)
    }

    fn derive_geometry(&mut self, path: &Path) -> Result<(), FormatError> {
        let location = &self.location;
        let Some((&samples, sample_dims)) = location.shape.split_last() else {
            return Err(FormatError::unsupported(
                format!(
                    "{} holds a 0-d array (shape ()), which has no sample axis",
                    path.display()
                ),
                "dataset files hold an array whose last axis indexes the samples; generate the data with dlio",
            ));
        };
        let too_large = || {
            FormatError::corrupt(
                path,
                0,
                format!("the array shape {:?} is too large", location.shape),
            )
        };
        let mut elements: usize = 1;
        self.sample_dims.clear();
        self.fortran_strides.clear();
        for &dim in sample_dims {
            let dim = usize::try_from(dim).map_err(|_| too_large())?;
            self.fortran_strides.push(elements);
            self.sample_dims.push(dim);
            elements = elements.checked_mul(dim).ok_or_else(too_large)?;
        }
        // The locators checked that all the array's bytes are in the buffer.
        self.samples = samples;
        self.sample_elements = elements;
        Ok(())
    }

    fn array_bytes(&self) -> &[u8] {
        let buffer: &[u8] = if self.location.inflated {
            &self.inflated
        } else {
            self.file.as_deref().unwrap_or_default()
        };
        buffer.get(self.location.data_start..).unwrap_or_default()
    }
}

/// The [`FormatReader`] for whole-file formats, parameterised by how to find the array.
pub(crate) struct WholeFileReader<L> {
    locator: L,
    open: FxHashMap<FileKey, OpenFile>,
    spare: Vec<OpenFile>,
    /// Where gathered (non-contiguous) samples are assembled.
    scratch: Vec<u8>,
    /// Odometer for Fortran-order gathers.
    index: Vec<usize>,
}

impl<L: ArrayLocator> WholeFileReader<L> {
    pub(crate) fn new(locator: L) -> WholeFileReader<L> {
        WholeFileReader {
            locator,
            open: FxHashMap::default(),
            spare: Vec::new(),
            scratch: Vec::new(),
            index: Vec::new(),
        }
    }

    fn recycle(&mut self, state: OpenFile) {
        if self.spare.len() < SPARE_FILES {
            self.spare.push(state);
        }
    }
}

impl<L: ArrayLocator> FormatReader for WholeFileReader<L> {
    /// Reads and parses the whole file, as `np.load` does. Opening a key that is already open
    /// reads the file again.
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let mut state = self
            .open
            .remove(&key)
            .or_else(|| self.spare.pop())
            .unwrap_or_else(OpenFile::empty);
        match state.load(storage, path, &mut self.locator) {
            Ok(()) => {
                self.open.insert(key, state);
                Ok(())
            }
            Err(error) => {
                self.recycle(state);
                Err(error)
            }
        }
    }

    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        index: u32,
    ) -> Result<&[u8], FormatError> {
        let state = self
            .open
            .get(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        if u64::from(index) >= state.samples {
            return Err(FormatError::SampleOutOfRange {
                path: state.path.clone(),
                index: u64::from(index),
                samples: state.samples,
            });
        }
        let sample = index as usize;
        let itemsize = state.location.itemsize;
        let elements = state.sample_elements;
        let sample_bytes = elements * itemsize;
        let data = state.array_bytes();
        if sample_bytes == 0 {
            return Ok(&[]);
        }
        // `samples` fits in usize: the locator checked that `samples * sample_bytes` bytes
        // lie in the buffer.
        let samples = state.samples as usize;

        if state.location.fortran_order {
            // x[..., j] is one contiguous block, laid out in Fortran order.
            let block = &data[sample * sample_bytes..][..sample_bytes];
            if state.sample_dims.iter().filter(|&&d| d > 1).count() <= 1 {
                return Ok(block); // Fortran and C order coincide.
            }
            return Ok(gather_fortran(
                block,
                itemsize,
                &state.sample_dims,
                &state.fortran_strides,
                &mut self.index,
                grow(&mut self.scratch, sample_bytes),
            ));
        }
        if samples == 1 {
            return Ok(&data[..sample_bytes]);
        }
        // C order: element k of sample j is element k * samples + j of the array.
        let out = grow(&mut self.scratch, sample_bytes);
        let source = &data[sample * itemsize..];
        if itemsize == 1 {
            for (byte, &value) in out.iter_mut().zip(source.iter().step_by(samples)) {
                *byte = value;
            }
        } else {
            let elements = source.chunks_exact(itemsize).step_by(samples);
            for (element, value) in out.chunks_exact_mut(itemsize).zip(elements) {
                element.copy_from_slice(value);
            }
        }
        Ok(out)
    }

    fn close(&mut self, key: FileKey) {
        if let Some(state) = self.open.remove(&key) {
            self.recycle(state);
        }
    }
}

/// `buffer[..len]`, growing the buffer if it is shorter (never shrinking it).
pub(crate) fn grow(buffer: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buffer.len() < len {
        buffer.resize(len, 0);
    }
    &mut buffer[..len]
}

/// Copies a Fortran-ordered block into `out` in C order.
fn gather_fortran<'a>(
    block: &[u8],
    itemsize: usize,
    dims: &[usize],
    strides: &[usize],
    index: &mut Vec<usize>,
    out: &'a mut [u8],
) -> &'a [u8] {
    index.clear();
    index.resize(dims.len(), 0);
    let mut source = 0usize;
    for element in out.chunks_exact_mut(itemsize) {
        element.copy_from_slice(&block[source * itemsize..][..itemsize]);
        // Advance the C-order odometer (last axis fastest) and the Fortran offset with it.
        for axis in (0..dims.len()).rev() {
            index[axis] += 1;
            source += strides[axis];
            if index[axis] < dims[axis] {
                break;
            }
            source -= dims[axis] * strides[axis];
            index[axis] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_gather_transposes_to_c_order() {
        // A 2x3 array stored in Fortran order: columns first.
        // C order values: [[0, 1, 2], [3, 4, 5]] -> Fortran bytes: 0 3 1 4 2 5.
        let block = [0u8, 3, 1, 4, 2, 5];
        let mut index = Vec::new();
        let mut out = [0u8; 6];
        let got = gather_fortran(&block, 1, &[2, 3], &[1, 2], &mut index, &mut out);
        assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn fortran_gather_handles_multibyte_elements_and_three_axes() {
        // Shape (2, 2, 2) with 2-byte elements; value = C-order flat index.
        let dims = [2usize, 2, 2];
        let strides = [1usize, 2, 4];
        let mut block = vec![0u8; 16];
        for i in 0..2 {
            for j in 0..2 {
                for k in 0..2 {
                    let c_index = (i * 4 + j * 2 + k) as u16;
                    let f_index = i + j * 2 + k * 4;
                    block[f_index * 2..f_index * 2 + 2].copy_from_slice(&c_index.to_le_bytes());
                }
            }
        }
        let mut out = vec![0u8; 16];
        let got = gather_fortran(&block, 2, &dims, &strides, &mut Vec::new(), &mut out);
        let values: Vec<u16> = got
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(values, (0..8).collect::<Vec<u16>>());
    }
}
