//! Files written by another implementation (the `ndarray-npy` crate) are read correctly.

use std::fs::File;
use std::path::Path;

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::FormatError;
use dlio_storage::PosixStorage;
use ndarray::{Array, Array3, ArrayD, Axis, IxDyn, ShapeBuilder};
use ndarray_npy::{NpzWriter, WriteNpyExt};

use crate::common::{format, layout};

/// Every sample `x[..., j]` of `x` as C-order little-endian bytes.
fn samples_of<T: Copy>(x: &ArrayD<T>, to_bytes: impl Fn(T) -> Vec<u8>) -> Vec<Vec<u8>> {
    let last = Axis(x.ndim() - 1);
    x.axis_iter(last)
        .map(|sample| sample.iter().flat_map(|&v| to_bytes(v)).collect())
        .collect()
}

fn read_all(kind: FormatKind, path: &Path, samples: u32) -> Vec<Vec<u8>> {
    let storage = PosixStorage::new();
    let nominal = layout(1, &[1], ElementType::Uint8, Compression::None);
    let mut reader = format(kind).reader(&nominal);
    reader.open(&storage, 0, path).unwrap();
    (0..samples)
        .map(|j| reader.read_sample(&storage, 0, j).unwrap().to_vec())
        .collect()
}

fn float_array(shape: &[usize]) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    Array::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f32 * 0.5 - 3.0).collect()).unwrap()
}

#[test]
fn reads_npy_written_by_ndarray_npy() {
    let dir = tempfile::tempdir().unwrap();
    for shape in [&[4, 5, 3][..], &[7, 1], &[6], &[2, 3, 4, 5]] {
        let x = float_array(shape);
        let path = dir.path().join("x.npy");
        x.write_npy(File::create(&path).unwrap()).unwrap();
        let samples = *shape.last().unwrap() as u32;
        assert_eq!(
            read_all(FormatKind::Npy, &path, samples),
            samples_of(&x, |v| v.to_le_bytes().to_vec()),
            "{shape:?}"
        );
    }
}

#[test]
fn reads_fortran_order_npy_in_c_order() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<i16> = (0..60).collect();
    let x: Array3<i16> = Array::from_shape_vec((3, 4, 5).f(), values).unwrap();
    let path = dir.path().join("f.npy");
    x.write_npy(File::create(&path).unwrap()).unwrap();
    let header = String::from_utf8_lossy(&std::fs::read(&path).unwrap()[..64]).into_owned();
    assert!(header.contains("'fortran_order': True"), "{header}");
    let expected = samples_of(&x.into_dyn(), |v| v.to_le_bytes().to_vec());
    assert_eq!(read_all(FormatKind::Npy, &path, 5), expected);
}

type MakeWriter = fn(File) -> NpzWriter<File>;

#[test]
fn reads_npz_written_by_ndarray_npy_stored_compressed_and_zip64_in_any_member_order() {
    let dir = tempfile::tempdir().unwrap();
    let x = float_array(&[8, 8, 3]);
    let y = Array::from_elem(3, 0u8);
    let writers: [(&str, MakeWriter); 3] = [
        ("stored", NpzWriter::new),
        ("compressed", NpzWriter::new_compressed),
        ("zip64", |f| {
            NpzWriter::new_with_options(
                f,
                zip::write::SimpleFileOptions::default().large_file(true),
            )
        }),
    ];
    for (name, make) in writers {
        let path = dir.path().join(format!("{name}.npz"));
        let mut npz = make(File::create(&path).unwrap());
        npz.add_array("y", &y).unwrap(); // labels first: order must not matter
        npz.add_array("x", &x).unwrap();
        npz.finish().unwrap();
        assert_eq!(
            read_all(FormatKind::Npz, &path, 3),
            samples_of(&x, |v| v.to_le_bytes().to_vec()),
            "{name}"
        );
    }
}

#[test]
fn npz_without_x_says_what_dlio_expects() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.npz");
    let mut npz = NpzWriter::new(File::create(&path).unwrap());
    npz.add_array("data", &float_array(&[2, 2])).unwrap();
    npz.finish().unwrap();
    let nominal = layout(1, &[1], ElementType::Uint8, Compression::None);
    let error = format(FormatKind::Npz)
        .reader(&nominal)
        .open(&PosixStorage::new(), 0, &path)
        .unwrap_err();
    assert!(
        matches!(error, FormatError::Unsupported { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("no array named 'x'"), "{error}");
}
