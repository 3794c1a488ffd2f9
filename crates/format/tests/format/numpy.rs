//! Interoperability with NumPy itself: numpy loads what we write (shape, dtype, exact bytes)
//! and we read what numpy writes. Needs `python3` with numpy; without it these tests fail
//! unless DLIO_SKIP_PYTHON=1.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_storage::PosixStorage;

use crate::common::{expected_array, format, generate_file, layout};

/// True when numpy is available; panics with a fix when it is not (unless skipping is asked).
fn numpy_available() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false);
    if found {
        return true;
    }
    if std::env::var("DLIO_SKIP_PYTHON").as_deref() == Ok("1") {
        dlio_testkit::skip::opted_out("DLIO_SKIP_PYTHON", "numpy not found");
        return false;
    }
    panic!(
        "the NumPy interoperability tests need python3 with numpy: run `pip install numpy` \
         (or set DLIO_SKIP_PYTHON=1 to skip them)"
    );
}

fn run_python(script: &str, args: &[&Path]) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const CHECK_OUR_FILES: &str = r#"
import io, sys
import numpy as np
failures = []
for line in open(sys.argv[1]):
    kind, path, raw, dtype, shape = line.split()
    shape = tuple(int(d) for d in shape.split(",") if d)
    expected = open(raw, "rb").read()
    if kind == "npy":
        x = np.load(path)
        saved = io.BytesIO()
        np.save(saved, x)
        if saved.getvalue() != open(path, "rb").read():
            failures.append(f"{path}: np.save of the same array gives different bytes")
    else:
        with np.load(path) as f:
            if sorted(f.files) != ["x", "y"]:
                failures.append(f"{path}: members {f.files}")
            x = f["x"]
            y = f["y"]
            if y.dtype != np.uint8 or y.shape != (shape[-1],) or y.any():
                failures.append(f"{path}: y is {y.dtype} {y.shape}")
    if x.dtype != np.dtype(dtype):
        failures.append(f"{path}: dtype {x.dtype}, expected {dtype}")
    if x.shape != shape:
        failures.append(f"{path}: shape {x.shape}, expected {shape}")
    if x.tobytes() != expected:
        failures.append(f"{path}: bytes differ")
if failures:
    sys.exit("\n".join(failures))
print("ok")
"#;

#[test]
fn numpy_loads_our_npy_and_npz_files_with_the_right_shape_dtype_and_bytes() {
    if !numpy_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut manifest = String::new();
    let cases: [(u32, &[usize]); 4] = [(1, &[16, 16]), (3, &[5, 7]), (4, &[9]), (2, &[2, 3, 4])];
    let mut index = 0;
    for (kind, compression) in [
        (FormatKind::Npy, Compression::None),
        (FormatKind::Npz, Compression::None),
        (FormatKind::Npz, Compression::Zip),
    ] {
        for element in ElementType::ALL {
            for (samples, dims) in cases {
                index += 1;
                let layout = layout(samples, dims, element, compression);
                let path = generate_file(
                    dir.path(),
                    kind,
                    &format!("{index}.{}", kind.name()),
                    &layout,
                    77,
                    index,
                );
                let raw = dir.path().join(format!("{index}.raw"));
                std::fs::write(&raw, expected_array(&layout, 77, index)).unwrap();
                let shape: Vec<String> = dims
                    .iter()
                    .map(usize::to_string)
                    .chain([samples.to_string()])
                    .collect();
                writeln!(
                    manifest,
                    "{} {} {} {} {}",
                    kind.name(),
                    path.display(),
                    raw.display(),
                    element.name(),
                    shape.join(",")
                )
                .unwrap();
            }
        }
    }
    let manifest_path = dir.path().join("manifest.txt");
    std::fs::write(&manifest_path, manifest).unwrap();
    run_python(CHECK_OUR_FILES, &[&manifest_path]);
}

const WRITE_NUMPY_FILES: &str = r#"
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
cases = [
    ("u1", (4, 5, 3), False), ("<i2", (6, 2), False), ("<f4", (3, 4, 5), True),
    ("<f8", (7,), False), (">i4", (2, 3, 2), False), ("<f2", (8, 8, 1), False), ("<i8", (2, 2, 2, 3), True),
]
lines = []
for n, (dtype, shape, fortran) in enumerate(cases):
    x = rng.integers(0, 2**15, size=shape).astype(dtype)
    if fortran:
        x = np.asfortranarray(x)
    samples = shape[-1]
    raw = b"".join(np.ascontiguousarray(x[..., j]).tobytes() for j in range(samples))
    open(f"{out}/{n}.raw", "wb").write(raw)
    np.save(f"{out}/{n}.npy", x)
    np.savez(f"{out}/{n}_stored.npz", y=np.zeros(samples, dtype=np.uint8), x=x)
    np.savez_compressed(f"{out}/{n}_deflated.npz", x=x, y=np.zeros(samples))
    lines.append(f"{n} {samples}")
open(f"{out}/cases.txt", "w").write("\n".join(lines))
"#;

#[test]
fn we_read_what_numpy_writes() {
    if !numpy_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    run_python(WRITE_NUMPY_FILES, &[dir.path()]);
    let storage = PosixStorage::new();
    let nominal = layout(1, &[1], ElementType::Uint8, Compression::None);
    let cases = std::fs::read_to_string(dir.path().join("cases.txt")).unwrap();
    assert_eq!(cases.lines().count(), 7);
    for line in cases.lines() {
        let (n, samples) = line.split_once(' ').unwrap();
        let samples: u32 = samples.parse().unwrap();
        let raw = std::fs::read(dir.path().join(format!("{n}.raw"))).unwrap();
        let sample_bytes = raw.len() / samples as usize;
        for (kind, name) in [
            (FormatKind::Npy, format!("{n}.npy")),
            (FormatKind::Npz, format!("{n}_stored.npz")),
            (FormatKind::Npz, format!("{n}_deflated.npz")),
        ] {
            let mut reader = format(kind).reader(&nominal);
            reader.open(&storage, 0, &dir.path().join(&name)).unwrap();
            for j in 0..samples {
                let sample = reader.read_sample(&storage, 0, j).unwrap();
                let expected = &raw[j as usize * sample_bytes..][..sample_bytes];
                assert_eq!(sample, expected, "{name} sample {j}");
            }
        }
    }
}
