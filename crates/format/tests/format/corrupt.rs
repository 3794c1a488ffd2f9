//! Damaged files give errors that name the file and the offset.

use std::path::Path;

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::FormatError;
use dlio_storage::PosixStorage;

use crate::common::{format, generate_file, layout};

/// Opens `path` with a fresh reader of `kind` and returns the error.
fn open_error(kind: FormatKind, path: &Path) -> FormatError {
    let layout = layout(1, &[1], ElementType::Uint8, Compression::None);
    let mut reader = format(kind).reader(&layout);
    reader
        .open(&PosixStorage::new(), 0, path)
        .expect_err("the file is damaged")
}

/// Asserts a `Corrupt` error at `offset` whose message names the file and contains `needle`.
fn assert_corrupt(error: FormatError, path: &Path, offset: u64, needle: &str) {
    let message = error.to_string();
    match error {
        FormatError::Corrupt {
            path: ref p,
            offset: o,
            ..
        } => {
            assert_eq!((p.as_path(), o), (path, offset), "{message}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(&format!("offset {offset}")), "{message}");
    assert!(message.contains(needle), "{message}");
}

fn npz(dir: &Path, compression: Compression) -> (std::path::PathBuf, Vec<u8>) {
    let layout = layout(2, &[16, 16], ElementType::Uint8, compression);
    let path = generate_file(dir, FormatKind::Npz, "d.npz", &layout, 3, 0);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn npz_cut_short_has_no_end_record() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = npz(dir.path(), Compression::None);
    for keep in [bytes.len() - 10, bytes.len() / 2, 3] {
        std::fs::write(&path, &bytes[..keep]).unwrap();
        assert_corrupt(
            open_error(FormatKind::Npz, &path),
            &path,
            keep as u64,
            "no end-of-central-directory record",
        );
    }
}

#[test]
fn npz_with_a_damaged_local_header_names_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = npz(dir.path(), Compression::None);
    bytes[0] = b'X'; // x.npy is the first member
    std::fs::write(&path, &bytes).unwrap();
    assert_corrupt(
        open_error(FormatKind::Npz, &path),
        &path,
        0,
        "no local header for x.npy",
    );
}

#[test]
fn npz_whose_directory_points_past_the_end_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = npz(dir.path(), Compression::None);
    let end = bytes.len() - 22;
    let bogus = bytes.len() as u32 + 1000;
    bytes[end + 16..end + 20].copy_from_slice(&bogus.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_corrupt(
        open_error(FormatKind::Npz, &path),
        &path,
        bytes.len() as u64,
        "truncated",
    );
}

#[test]
fn npz_with_a_damaged_deflate_stream_names_the_member_data() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = npz(dir.path(), Compression::Zip);
    // x.npy's data starts after the 30-byte local header and its 5-byte name.
    let data_start = 30 + "x.npy".len();
    for byte in &mut bytes[data_start..data_start + 64] {
        *byte = 0xFF;
    }
    std::fs::write(&path, &bytes).unwrap();
    assert_corrupt(
        open_error(FormatKind::Npz, &path),
        &path,
        data_start as u64,
        "deflate stream of x.npy",
    );
}

#[test]
fn npy_cut_short_is_reported_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout(2, &[16, 16], ElementType::Float32, Compression::None);
    let path = generate_file(dir.path(), FormatKind::Npy, "d.npy", &layout, 3, 0);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    assert_corrupt(
        open_error(FormatKind::Npy, &path),
        &path,
        bytes.len() as u64 - 5,
        "truncated",
    );
    std::fs::write(&path, &bytes[..50]).unwrap();
    assert_corrupt(open_error(FormatKind::Npy, &path), &path, 50, "npy header");
}

#[test]
fn a_text_file_is_not_npy_or_npz() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.npy");
    let text = b"these are not the samples you are looking for";
    std::fs::write(&path, text).unwrap();
    assert_corrupt(open_error(FormatKind::Npy, &path), &path, 0, "magic string");
    assert_corrupt(
        open_error(FormatKind::Npz, &path),
        &path,
        text.len() as u64,
        "not an npz file",
    );
}

#[test]
fn a_reader_recovers_after_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let layout = layout(1, &[8], ElementType::Uint8, Compression::None);
    let good = generate_file(dir.path(), FormatKind::Npy, "good.npy", &layout, 1, 0);
    let bad = dir.path().join("bad.npy");
    std::fs::write(&bad, b"junk").unwrap();
    let mut reader = format(FormatKind::Npy).reader(&layout);
    assert!(reader.open(&storage, 1, &bad).is_err());
    assert!(matches!(
        reader.read_sample(&storage, 1, 0),
        Err(FormatError::FileNotOpen { key: 1 })
    ));
    reader.open(&storage, 2, &good).unwrap();
    assert_eq!(reader.read_sample(&storage, 2, 0).unwrap().len(), 8);
}
