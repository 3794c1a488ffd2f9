//! What is generated is what is read back, for npz and npy.

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{FormatError, format_for};
use dlio_storage::PosixStorage;

use crate::common::{expected_array, format, generate_file, layout, sample_of};

const SHAPES: [(u32, &[usize]); 6] = [
    (1, &[16, 16]),
    (3, &[5, 7]),
    (4, &[3]),
    (2, &[]),
    (5, &[2, 3, 4]),
    (1, &[1]),
];

fn round_trip(kind: FormatKind, compression: Compression) {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let mut file_index = 0;
    for element in ElementType::ALL {
        for (samples, dims) in SHAPES {
            file_index += 1;
            let layout = layout(samples, dims, element, compression);
            let name = format!("f{file_index}.{}", kind.name());
            let path = generate_file(dir.path(), kind, &name, &layout, 11, file_index);
            let array = expected_array(&layout, 11, file_index);

            let mut reader = format(kind).reader(&layout);
            reader.open(&storage, file_index, &path).unwrap();
            for j in 0..samples {
                let sample = reader.read_sample(&storage, file_index, j).unwrap();
                let expected = sample_of(&array, element.size(), samples as usize, j as usize);
                assert_eq!(
                    sample,
                    &expected[..],
                    "{kind:?} {compression:?} {layout:?} sample {j}"
                );
            }
            reader.close(file_index);
        }
    }
}

#[test]
fn npy_samples_read_back_as_generated() {
    round_trip(FormatKind::Npy, Compression::None);
}

#[test]
fn stored_npz_samples_read_back_as_generated() {
    round_trip(FormatKind::Npz, Compression::None);
}

#[test]
fn deflated_npz_samples_read_back_as_generated() {
    round_trip(FormatKind::Npz, Compression::Zip);
}

#[test]
fn npy_file_is_header_then_array_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout(2, &[3, 4], ElementType::Float32, Compression::None);
    let path = generate_file(dir.path(), FormatKind::Npy, "a.npy", &layout, 5, 0);
    let bytes = std::fs::read(&path).unwrap();

    let text = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4, 2), }";
    let mut header = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    header.extend_from_slice(text.as_bytes());
    header.resize(127, b' ');
    header.push(b'\n');
    assert_eq!(&bytes[..128], &header[..]);
    assert_eq!(&bytes[128..], &expected_array(&layout, 5, 0)[..]);
    assert_eq!(
        format(FormatKind::Npy).expected_size(&layout),
        Some(128 + 96)
    );
}

#[test]
fn generated_sizes_match_expected_size() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [FormatKind::Npy, FormatKind::Npz] {
        for (samples, dims) in SHAPES {
            let layout = layout(samples, dims, ElementType::Int32, Compression::None);
            let path = generate_file(dir.path(), kind, "s", &layout, 1, 0);
            let size = std::fs::metadata(&path).unwrap().len();
            assert_eq!(
                format(kind).expected_size(&layout),
                Some(size),
                "{kind:?} {layout:?}"
            );
        }
    }
    let deflated = layout(1, &[4], ElementType::Uint8, Compression::Zip);
    assert_eq!(
        format(FormatKind::Npz).expected_size(&deflated),
        None,
        "depends on the data"
    );
}

#[test]
fn two_files_hold_different_bytes_and_the_same_seed_gives_identical_files() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, compression) in [
        (FormatKind::Npy, Compression::None),
        (FormatKind::Npz, Compression::None),
        (FormatKind::Npz, Compression::Zip),
    ] {
        let layout = layout(2, &[32, 32], ElementType::Uint8, compression);
        let first = std::fs::read(generate_file(dir.path(), kind, "1", &layout, 9, 0)).unwrap();
        let second = std::fs::read(generate_file(dir.path(), kind, "2", &layout, 9, 1)).unwrap();
        let again = std::fs::read(generate_file(dir.path(), kind, "3", &layout, 9, 0)).unwrap();
        let other_seed =
            std::fs::read(generate_file(dir.path(), kind, "4", &layout, 10, 0)).unwrap();
        assert_eq!(first, again, "{kind:?} {compression:?}");
        assert_ne!(first, second, "{kind:?} {compression:?}");
        assert_ne!(first, other_seed, "{kind:?} {compression:?}");
    }
}

#[test]
fn unsupported_compression_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, compression) in [
        (FormatKind::Npz, Compression::Gzip),
        (FormatKind::Npy, Compression::Zip),
    ] {
        let layout = layout(1, &[4], ElementType::Uint8, compression);
        let mut rng = dlio_format::DataRng::for_file(0, 0, 0);
        let error = format(kind)
            .generate(
                &PosixStorage::new(),
                &dir.path().join("x"),
                &layout,
                &mut rng,
            )
            .unwrap_err();
        assert!(
            matches!(error, FormatError::Unsupported { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("dataset.compression"), "{error}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing is left behind"
    );
}

#[test]
fn every_dlio_format_is_built_in_and_the_rest_say_which_are() {
    let error = format_for(FormatKind::Hdf5Opt).unwrap_err().to_string();
    assert!(
        error.starts_with(
            "format 'hdf5_opt' is not built into this version of dlio yet; available: npz, npy, "
        ),
        "{error}"
    );
    for kind in [
        FormatKind::Npz,
        FormatKind::Npy,
        FormatKind::Synthetic,
        FormatKind::Csv,
        FormatKind::Jpeg,
        FormatKind::Png,
        FormatKind::Tfrecord,
        FormatKind::IndexedBinary,
        FormatKind::MmapIndexedBinary,
        FormatKind::Parquet,
        FormatKind::Arrow,
    ] {
        let format = format_for(kind).unwrap();
        assert_eq!(format.name(), kind.name());
        assert_eq!(format.extension(), kind.name());
    }
    let hdf5 = format_for(FormatKind::Hdf5);
    assert_eq!(hdf5.is_ok(), dlio_format::HDF5_AVAILABLE);
    match hdf5 {
        Ok(format) => assert_eq!(format.extension(), "hdf5"),
        Err(error) => {
            let error = error.to_string();
            assert!(
                error.contains("--features hdf5") && error.contains("libhdf5-dev"),
                "{error}"
            );
        }
    }
}

#[test]
fn a_reader_keeps_several_files_open_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let layout = layout(3, &[4, 4], ElementType::Int16, Compression::None);
    let a = generate_file(dir.path(), FormatKind::Npz, "a.npz", &layout, 1, 10);
    let b = generate_file(dir.path(), FormatKind::Npz, "b.npz", &layout, 1, 20);
    let (array_a, array_b) = (
        expected_array(&layout, 1, 10),
        expected_array(&layout, 1, 20),
    );

    let mut reader = format(FormatKind::Npz).reader(&layout);
    reader.open(&storage, 10, &a).unwrap();
    reader.open(&storage, 20, &b).unwrap();
    assert_eq!(
        reader.read_sample(&storage, 20, 2).unwrap(),
        &sample_of(&array_b, 2, 3, 2)[..]
    );
    assert_eq!(
        reader.read_sample(&storage, 10, 1).unwrap(),
        &sample_of(&array_a, 2, 3, 1)[..]
    );
    reader.close(10);
    assert!(matches!(
        reader.read_sample(&storage, 10, 1),
        Err(FormatError::FileNotOpen { key: 10 })
    ));
    assert_eq!(
        reader.read_sample(&storage, 20, 0).unwrap(),
        &sample_of(&array_b, 2, 3, 0)[..]
    );
}

#[test]
fn sample_index_past_the_end_is_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    let layout = layout(3, &[2], ElementType::Uint8, Compression::None);
    let path = generate_file(dir.path(), FormatKind::Npy, "r.npy", &layout, 1, 0);
    let mut reader = format(FormatKind::Npy).reader(&layout);
    reader.open(&storage, 0, &path).unwrap();
    let error = reader.read_sample(&storage, 0, 3).unwrap_err();
    assert!(
        matches!(error, FormatError::SampleOutOfRange { ref path, index: 3, samples: 3 } if path.ends_with("r.npy")),
        "{error:?}"
    );
}

#[test]
fn buffers_are_reused_across_files_and_samples() {
    let dir = tempfile::tempdir().unwrap();
    let storage = PosixStorage::new();
    // One sample per file: the sample is a slice of the reader's file buffer.
    let single = layout(1, &[64, 64], ElementType::Uint8, Compression::None);
    let paths: Vec<_> = (0..3)
        .map(|i| {
            generate_file(
                dir.path(),
                FormatKind::Npz,
                &format!("{i}.npz"),
                &single,
                2,
                i,
            )
        })
        .collect();
    let mut reader = format(FormatKind::Npz).reader(&single);
    let mut addresses = Vec::new();
    for (key, path) in paths.iter().enumerate() {
        reader.open(&storage, key as u64, path).unwrap();
        addresses.push(
            reader
                .read_sample(&storage, key as u64, 0)
                .unwrap()
                .as_ptr(),
        );
        reader.close(key as u64);
    }
    assert!(
        addresses.windows(2).all(|w| w[0] == w[1]),
        "file buffer reused: {addresses:?}"
    );

    // Several samples per file: samples are gathered into one scratch buffer.
    let multi = layout(4, &[8, 8], ElementType::Float32, Compression::None);
    let path = generate_file(dir.path(), FormatKind::Npy, "m.npy", &multi, 2, 9);
    let mut reader = format(FormatKind::Npy).reader(&multi);
    reader.open(&storage, 0, &path).unwrap();
    let first = reader.read_sample(&storage, 0, 0).unwrap().as_ptr();
    let last = reader.read_sample(&storage, 0, 3).unwrap().as_ptr();
    assert_eq!(first, last, "scratch buffer reused");
}

#[test]
fn missing_file_is_a_storage_not_found_error() {
    let dir = tempfile::tempdir().unwrap();
    let layout = layout(1, &[1], ElementType::Uint8, Compression::None);
    let mut reader = format(FormatKind::Npz).reader(&layout);
    let error = reader
        .open(&PosixStorage::new(), 0, &dir.path().join("none.npz"))
        .unwrap_err();
    assert!(
        matches!(
            error,
            FormatError::Storage(dlio_storage::StorageError::NotFound { .. })
        ),
        "{error:?}"
    );
}

/// The same config and seed give the same bytes, for HDF5 too: the library stamps objects
/// with modification times unless told not to, which made two generations a second apart
/// differ (and an engine test flaky).
#[test]
fn hdf5_files_of_the_same_seed_are_identical_whenever_written() {
    if !dlio_format::HDF5_AVAILABLE {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = layout(4, &[16, 16], ElementType::Uint8, Compression::None);
    let first = generate_file(dir.path(), FormatKind::Hdf5, "a.hdf5", &layout, 7, 0);
    // HDF5 times have one-second resolution: cross a second boundary.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = generate_file(dir.path(), FormatKind::Hdf5, "b.hdf5", &layout, 7, 0);
    assert_eq!(
        std::fs::read(first).unwrap(),
        std::fs::read(second).unwrap()
    );
}
