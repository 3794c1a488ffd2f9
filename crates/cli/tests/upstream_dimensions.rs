//! Upstream DLIO's `tests/dlio_dataset_dimension_test.py` (e1919d7), case by case: the same
//! overrides (with upstream's `++workload.workflow.evaluate=False`, a key DLIO does not know
//! and ignores, left in), and the same checks of the generated files, made with the readers
//! upstream uses (h5py, Pillow, numpy, pandas; TFRecord's Example parsed by a few lines of
//! Python, as TensorFlow is not installed here).
//!
//! Not ported: `test_transformed_sample` (18 cases) builds DLIO's Python objects in-process
//! and checks the shape of the PyTorch tensor its loader yields; dlio's loader yields no
//! tensors (batches carry counts and bytes), so there is no command-line equivalent.

mod common;

use std::path::Path;
use std::process::Command;

use common::upstream::{
    Case, NUM_PROCS, dlio_benchmark, ensure, expect_success, glob, run_matrix, storage_root,
};

const DTYPES: [&str; 3] = ["float32", "int8", "float16"];
const DIMENSIONS: [usize; 3] = [2, 3, 4];

/// Upstream's `generate_dlio_param`, including its repeated and unknown keys.
fn generate_dlio_param(framework: &str, root: &Path, fmt: &str, num_data: u64) -> Vec<String> {
    let r = root.display();
    vec![
        format!("++workload.framework={framework}"),
        format!("++workload.reader.data_loader={framework}"),
        "++workload.workflow.generate_data=True".into(),
        format!("++workload.output.folder={r}"),
        format!("++workload.dataset.data_folder={r}/data"),
        format!("++workload.dataset.num_files_train={num_data}"),
        "++workload.dataset.num_files_eval=0".into(),
        format!("++workload.dataset.format={fmt}"),
        "++workload.workflow.generate_data=True".into(),
        format!("++workload.dataset.num_files_train={num_data}"),
        "++workload.dataset.num_files_eval=0".into(),
        "++workload.dataset.num_subfolders_train=0".into(),
        "++workload.dataset.num_subfolders_eval=0".into(),
        "++workload.workflow.evaluate=False".into(),
        "++workload.workflow.train=True".into(),
        "++workload.train.epochs=2".into(),
    ]
}

/// Upstream's `generate_random_shape`: `dim` sizes in 1..=9, drawn here from the case's
/// index so that a failure can be rerun with the same shape.
fn random_shape(dim: usize, seed: u64) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..dim)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1 + x % 9
        })
        .collect()
}

fn list(shape: &[u64]) -> String {
    let items: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(", "))
}

const TOTAL_DATA: u64 = 8 * NUM_PROCS;

/// The checks upstream makes with Python's readers; each prints one line that the test
/// compares with what it expects.
const CHECKS: &str = r#"
import sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "h5":
    import h5py
    f = h5py.File(path, "r")
    keys = list(f.keys())
    keys.remove("labels")
    v = f[keys[-1]]
    print(list(v.shape), str(v.dtype), len(keys))
elif kind == "image":
    from PIL import Image
    img = Image.open(path)
    print(img.size[0], img.size[1], img.format.lower())
elif kind in ("npy", "npz"):
    import numpy as np
    data = np.load(path)
    if kind == "npz":
        data = data["x"]
    print(list(data.shape), str(data.dtype), data.dtype.itemsize)
elif kind == "csv":
    import pandas as pd
    df = pd.read_csv(path, compression="infer", header=None)
    print(len(df.iloc[0]))
elif kind == "tfrecord":
    # The first record's Example: features (1) -> feature map entry (1) -> key (1) and
    # Feature (2) -> bytes_list (1) -> value (1); prints the length of feature "image".
    import struct
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    rec = raw[12:12 + n]
    def fields(buf):
        i = 0
        while i < len(buf):
            key, i = varint(buf, i)
            wire = key & 7
            if wire == 2:
                ln, i = varint(buf, i)
                yield key >> 3, buf[i:i + ln]
                i += ln
            elif wire == 0:
                _, i = varint(buf, i)
            else:
                raise SystemExit("unexpected wire type %d" % wire)
    def varint(buf, i):
        out = shift = 0
        while True:
            b = buf[i]; i += 1
            out |= (b & 0x7F) << shift; shift += 7
            if b < 0x80:
                return out, i
    for fno, features in fields(rec):
        for eno, entry in fields(features):
            kv = dict(fields(entry))
            if kv.get(1) == b"image":
                bl = dict(fields(kv[2]))[1]
                print(len(dict(fields(bl))[1]))
                raise SystemExit(0)
    raise SystemExit("no image feature")
"#;

/// What `CHECKS` prints for `kind` on `path`.
fn python_check(kind: &str, path: &Path) -> Result<String, String> {
    let out = Command::new("python3")
        .args(["-c", CHECKS, kind])
        .arg(path)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    ensure(out.status.success(), || {
        format!(
            "python3 check {kind} of {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn first(root: &Path, ext: &str) -> Result<std::path::PathBuf, String> {
    let paths = glob(&root.join("data").join("train"), &format!(".{ext}"));
    paths
        .into_iter()
        .next()
        .ok_or_else(|| format!("no *.{ext} in {}/data/train", root.display()))
}

fn expect_eq(what: &str, got: &str, want: &str) -> Result<(), String> {
    ensure(got == want, || {
        format!("{what}: got `{got}`, expected `{want}`")
    })
}

fn dtype_size(dtype: &str) -> u64 {
    match dtype {
        "float32" => 4,
        "float16" => 2,
        "int8" => 1,
        other => panic!("no size for {other}"),
    }
}

/// The (dtype, dim) matrix of a test, with each case's shape seed.
fn dtype_dim_cases(test: &str) -> Vec<Case<(&'static str, usize, u64)>> {
    let mut cases = Vec::new();
    for dtype in DTYPES {
        for dim in DIMENSIONS {
            let seed = cases.len() as u64;
            cases.push(Case {
                id: format!("{test}[{dtype}-{dim}]"),
                params: (dtype, dim, seed),
            });
        }
    }
    cases
}

#[test]
fn test_dim_based_hdf5_gen_data() {
    run_matrix(
        dtype_dim_cases("test_dim_based_hdf5_gen_data"),
        |cwd, &(dtype, dim, seed)| {
            let root = storage_root(cwd);
            let num_dset_per_record = 3u64;
            let per_dataset: Vec<u64> = std::iter::once(1).chain(random_shape(dim, seed)).collect();
            let mut shape = per_dataset.clone();
            shape[0] *= num_dset_per_record;
            let mut o = vec![
                format!("++workload.dataset.record_dims={}", list(&shape)),
                format!("++workload.dataset.record_element_type={dtype}"),
                format!("++workload.dataset.hdf5.num_dset_per_record={num_dset_per_record}"),
            ];
            o.extend(generate_dlio_param("pytorch", &root, "hdf5", TOTAL_DATA));
            expect_success(&mut dlio_benchmark(cwd, &o))?;
            let got = python_check("h5", &first(&root, "hdf5")?)?;
            expect_eq(
                "h5 shape, dtype, datasets",
                &got,
                &format!("{} {dtype} {num_dset_per_record}", list(&per_dataset)),
            )
        },
    );
}

#[test]
fn test_dim_based_image_gen_data() {
    let mut cases = Vec::new();
    for fmt in ["png", "jpeg"] {
        for dtype in DTYPES {
            for dim in DIMENSIONS {
                let seed = cases.len() as u64;
                cases.push(Case {
                    id: format!("test_dim_based_image_gen_data[{fmt}-{dtype}-{dim}]"),
                    params: (fmt, dtype, dim, seed),
                });
            }
        }
    }
    run_matrix(cases, |cwd, &(fmt, dtype, dim, seed)| {
        let root = storage_root(cwd);
        let shape = random_shape(dim, seed);
        let mut o = vec![
            format!("++workload.dataset.record_element_type={dtype}"),
            format!("++workload.dataset.record_dims={}", list(&shape)),
        ];
        o.extend(generate_dlio_param("pytorch", &root, fmt, TOTAL_DATA));
        let out = dlio_benchmark(cwd, &o)
            .output()
            .map_err(|e| format!("dlio_benchmark: {e}"))?;
        if dim > 2 {
            ensure(!out.status.success(), || {
                "Expected benchmark to fail for dim > 2".into()
            })?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            let expected = format!(
                "{fmt} format does not support more than 2 dimensions, but got {dim} dimensions."
            );
            return ensure(stderr.contains(&expected), || {
                format!("Expected error message not found in stderr: {stderr}")
            });
        }
        ensure(out.status.success(), || {
            format!(
                "exit {:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        // Other dtypes are written as uint8 images (Pillow's fromarray), as upstream does, and
        // the run says so (the image formats' own check, in their descriptor).
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warned = stderr.contains(&format!("{fmt} images are always uint8"));
        ensure(warned == (dtype != "uint8"), || {
            format!("dtype {dtype}: the uint8 warning is {warned} in stderr: {stderr}")
        })?;
        let got = python_check("image", &first(&root, fmt)?)?;
        let (height, width) = (shape[0], shape[1]);
        expect_eq(
            "image width, height, format",
            &got,
            &format!("{width} {height} {fmt}"),
        )
    });
}

#[test]
fn test_dim_based_np_gen_data() {
    let mut cases = Vec::new();
    for fmt in ["npz", "npy"] {
        for dtype in DTYPES {
            for dim in DIMENSIONS {
                let seed = cases.len() as u64;
                cases.push(Case {
                    id: format!("test_dim_based_np_gen_data[{fmt}-{dtype}-{dim}]"),
                    params: (fmt, dtype, dim, seed),
                });
            }
        }
    }
    run_matrix(cases, |cwd, &(fmt, dtype, dim, seed)| {
        let root = storage_root(cwd);
        let num_samples_per_file = 1u64;
        let shape = random_shape(dim, seed);
        let mut final_shape = shape.clone();
        final_shape.push(num_samples_per_file);
        let mut o = vec![
            format!("++workload.dataset.num_samples_per_file={num_samples_per_file}"),
            format!("++workload.dataset.record_element_type={dtype}"),
            format!("++workload.dataset.record_dims={}", list(&shape)),
        ];
        o.extend(generate_dlio_param("pytorch", &root, fmt, TOTAL_DATA));
        expect_success(&mut dlio_benchmark(cwd, &o))?;
        let got = python_check(fmt, &first(&root, fmt)?)?;
        expect_eq(
            "shape, dtype, itemsize",
            &got,
            &format!("{} {dtype} {}", list(&final_shape), dtype_size(dtype)),
        )
    });
}

#[test]
fn test_dim_based_tfrecord_gen_data() {
    run_matrix(
        dtype_dim_cases("test_dim_based_tfrecord_gen_data"),
        |cwd, &(dtype, dim, seed)| {
            let root = storage_root(cwd);
            let shape = random_shape(dim, seed);
            let mut o = vec![
                format!("++workload.dataset.record_element_type={dtype}"),
                format!("++workload.dataset.record_dims={}", list(&shape)),
            ];
            o.extend(generate_dlio_param(
                "tensorflow",
                &root,
                "tfrecord",
                TOTAL_DATA,
            ));
            expect_success(&mut dlio_benchmark(cwd, &o))?;
            let got = python_check("tfrecord", &first(&root, "tfrecord")?)?;
            let bytes: u64 = shape.iter().product::<u64>() * dtype_size(dtype);
            expect_eq("image feature bytes", &got, &bytes.to_string())
        },
    );
}

/// Upstream's `get_indexed_metadata`: the `.off.idx` and `.sz.idx` files beside a data file,
/// `n` little-endian int64 each.
fn indexed_metadata(path: &Path, n: usize) -> Result<(Vec<i64>, Vec<i64>), String> {
    let read = |suffix: &str| -> Result<Vec<i64>, String> {
        let p = format!("{}{suffix}", path.display());
        let raw = std::fs::read(&p).map_err(|e| format!("{p}: {e}"))?;
        ensure(raw.len() >= 8 * n, || {
            format!("{p}: {} bytes, fewer than {n} int64", raw.len())
        })?;
        Ok(raw[..8 * n]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    };
    Ok((read(".off.idx")?, read(".sz.idx")?))
}

#[test]
fn test_dim_based_indexed_gen_data() {
    let mut cases = Vec::new();
    for dtype in DTYPES {
        for num_samples_per_file in [1u64, 2, 3] {
            for dim in DIMENSIONS {
                let seed = cases.len() as u64;
                cases.push(Case {
                    id: format!(
                        "test_dim_based_indexed_gen_data[{dtype}-{num_samples_per_file}-{dim}]"
                    ),
                    params: (dtype, num_samples_per_file, dim, seed),
                });
            }
        }
    }
    run_matrix(cases, |cwd, &(dtype, num_samples_per_file, dim, seed)| {
        let root = storage_root(cwd);
        let shape = random_shape(dim, seed);
        let mut o = vec![
            format!("++workload.dataset.num_samples_per_file={num_samples_per_file}"),
            format!("++workload.dataset.record_element_type={dtype}"),
            format!("++workload.dataset.record_dims={}", list(&shape)),
        ];
        o.extend(generate_dlio_param(
            "pytorch",
            &root,
            "indexed_binary",
            TOTAL_DATA,
        ));
        expect_success(&mut dlio_benchmark(cwd, &o))?;
        let path = first(&root, "indexed_binary")?;
        let (offsets, sizes) = indexed_metadata(&path, num_samples_per_file as usize)?;
        let sample_size = shape.iter().product::<u64>() * dtype_size(dtype);
        let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (&off, &size) in offsets.iter().zip(&sizes) {
            let (off, size) = (off as usize, size as usize);
            let got = data.len().saturating_sub(off).min(size);
            ensure(got == size, || {
                format!("read {got} bytes at {off}, index says {size}")
            })?;
            ensure(size as u64 == sample_size, || {
                format!("Sample size mismatch: {size} != {sample_size}")
            })?;
        }
        Ok(())
    });
}

#[test]
fn test_dim_based_csv() {
    run_matrix(
        dtype_dim_cases("test_dim_based_csv"),
        |cwd, &(dtype, dim, seed)| {
            let root = storage_root(cwd);
            let shape = random_shape(dim, seed);
            let mut o = vec![
                format!("++workload.dataset.record_element_type={dtype}"),
                format!("++workload.dataset.record_dims={}", list(&shape)),
            ];
            o.extend(generate_dlio_param("pytorch", &root, "csv", TOTAL_DATA));
            expect_success(&mut dlio_benchmark(cwd, &o))?;
            let got = python_check("csv", &first(&root, "csv")?)?;
            expect_eq(
                "csv columns",
                &got,
                &shape.iter().product::<u64>().to_string(),
            )
        },
    );
}

/// The unknown key upstream's own tests pass is a warning, as upstream ignores it; under
/// `--strict` it is a usage error (exit 2) that names the key and the one meant.
#[test]
fn strict_refuses_the_unknown_key_of_upstreams_tests_and_names_the_known_one() {
    let cwd = tempfile::tempdir().unwrap();
    let root = storage_root(cwd.path());
    let mut o = vec!["--strict".to_string()];
    o.extend(generate_dlio_param("pytorch", &root, "npz", TOTAL_DATA));
    let out = dlio_benchmark(cwd.path(), &o).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("workflow.evaluate") && stderr.contains("workflow.evaluation"),
        "{stderr}"
    );
    assert!(!root.join("data").exists(), "nothing runs under --strict");
}
