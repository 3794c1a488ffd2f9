//! Helpers shared by the test modules.

use std::path::{Path, PathBuf};

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{DataRng, FileLayout, Format, format_for};
use dlio_storage::PosixStorage;

pub fn layout(
    samples: u32,
    dims: &[usize],
    element: ElementType,
    compression: Compression,
) -> FileLayout {
    FileLayout {
        samples,
        sample_dims: dims.to_vec(),
        element,
        compression,
        fixed_size: false,
    }
}

pub fn format(kind: FormatKind) -> Box<dyn Format> {
    format_for(kind).expect("built-in format")
}

/// Generates one file with the stream of (seed, list 0, `file_index`); returns its path.
pub fn generate_file(
    dir: &Path,
    kind: FormatKind,
    name: &str,
    layout: &FileLayout,
    seed: u64,
    file_index: u64,
) -> PathBuf {
    let path = dir.join(name);
    let mut rng = DataRng::for_file(seed, 0, file_index);
    format(kind)
        .generate(&PosixStorage::new(), &path, layout, &mut rng)
        .expect("generate");
    path
}

/// The array bytes (C order, shape `(*dims, samples)`) a generated file must hold.
pub fn expected_array(layout: &FileLayout, seed: u64, file_index: u64) -> Vec<u8> {
    let len = layout.sample_bytes() as usize * layout.samples as usize;
    let mut bytes = vec![0; len];
    DataRng::for_file(seed, 0, file_index).fill(&mut bytes);
    bytes
}

/// Sample `j` (`x[..., j]`, C order) of a C-order array of `samples` samples.
pub fn sample_of(array: &[u8], itemsize: usize, samples: usize, j: usize) -> Vec<u8> {
    let elements = array.len() / itemsize / samples;
    (0..elements)
        .flat_map(|k| {
            let at = (k * samples + j) * itemsize;
            array[at..at + itemsize].to_vec()
        })
        .collect()
}
