//! The synthetic format: a tiny index file on disk, zero samples with no I/O.

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::FormatError;
use dlio_storage::PosixStorage;

use crate::common::{format, generate_file, layout};

#[test]
fn generated_file_holds_its_index_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout(4, &[100, 100], ElementType::Uint8, Compression::None);
    let path = generate_file(
        dir.path(),
        FormatKind::Synthetic,
        "f_17.synthetic",
        &layout,
        0,
        17,
    );
    assert_eq!(std::fs::read(path).unwrap(), b"17");
}

#[test]
fn reader_returns_zero_samples_of_the_layout_size_without_io() {
    let storage = PosixStorage::new();
    let layout = layout(2, &[10, 3], ElementType::Float32, Compression::None);
    let mut reader = format(FormatKind::Synthetic).reader(&layout);
    // The file does not exist: open does no I/O.
    reader
        .open(
            &storage,
            5,
            std::path::Path::new("/nonexistent/f.synthetic"),
        )
        .unwrap();
    let sample = reader.read_sample(&storage, 5, 1).unwrap();
    assert_eq!(sample.len(), 120);
    assert!(sample.iter().all(|&b| b == 0));
    assert!(matches!(
        reader.read_sample(&storage, 5, 2),
        Err(FormatError::SampleOutOfRange {
            index: 2,
            samples: 2,
            ..
        })
    ));
    reader.close(5);
    assert!(matches!(
        reader.read_sample(&storage, 5, 0),
        Err(FormatError::FileNotOpen { key: 5 })
    ));
}
