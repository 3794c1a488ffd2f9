//! Interoperability of every non-NumPy format with the Python ecosystem: h5py, pandas, Pillow,
//! pyarrow (parquet and Arrow IPC), numpy and a TFRecord parser/writer (both CRCs, `tf.train.Example` wire format)
//! read what we write, and we read what they write. Needs `python3` with numpy, pandas,
//! Pillow, pyarrow (and h5py for the `hdf5` feature), as `scripts/test.sh` installs; without
//! them these tests fail unless DLIO_SKIP_PYTHON=1.

use std::path::Path;
use std::process::Command;

use dlio_config::{Compression, DatasetConfig, ElementType, FormatKind, ParquetCompression};
use dlio_format::{DataRng, FileLayout, Format, RecordStream, format_from_config};
use dlio_storage::PosixStorage;

fn python_available(modules: &str) -> bool {
    let found = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false);
    if found {
        return true;
    }
    if std::env::var("DLIO_SKIP_PYTHON").as_deref() == Ok("1") {
        dlio_testkit::skip::opted_out("DLIO_SKIP_PYTHON", &format!("python3 lacks {modules}"));
        return false;
    }
    panic!(
        "the Python interoperability tests need python3 with {modules}: run `bash \
         scripts/test.sh` (it installs them) or set DLIO_SKIP_PYTHON=1 to skip them"
    );
}

/// Runs the checker script with `mode` and arguments; returns its stdout.
fn python(mode: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(mode)
        .args(args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python {mode} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const SCRIPT: &str = r#"
import struct, sys, zlib
mode, args = sys.argv[1], sys.argv[2:]

def crc32c(data, _t=[]):
    if not _t:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _t.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = _t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(b, i):
    shift = value = 0
    while True:
        x = b[i]; i += 1
        value |= (x & 0x7F) << shift; shift += 7
        if not x & 0x80:
            return value, i

def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        tag, wire = key >> 3, key & 7
        if wire == 2:
            n, i = varint(b, i); yield tag, b[i:i + n]; i += n
        elif wire == 0:
            v, i = varint(b, i); yield tag, v
        else:
            raise ValueError(f"wire type {wire}")

def decode_example(b):
    out = {}
    for tag, features in fields(b):
        assert tag == 1
        for tag2, entry in fields(features):
            assert tag2 == 1
            d = dict(fields(entry))
            name, feature = d[1].decode(), d[2]
            (kind, lst), = fields(feature)
            if kind == 1:
                out[name] = [v for _, v in fields(lst)]
            elif kind == 3:
                (_, packed), = fields(lst)
                vals, j = [], 0
                if isinstance(packed, int):
                    vals = [packed]
                else:
                    while j < len(packed):
                        v, j = varint(packed, j); vals.append(v)
                out[name] = vals
    return out

def encode_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F; v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)

def ld(tag, payload):
    return encode_varint(tag << 3 | 2) + encode_varint(len(payload)) + payload

def encode_example(image, size):
    img = ld(1, ld(1, image))                              # Feature{bytes_list{value}}
    sz = ld(3, ld(1, encode_varint(size)))                 # Feature{int64_list{packed}}
    entries = ld(1, ld(1, b"image") + ld(2, img)) + ld(1, ld(1, b"size") + ld(2, sz))
    return ld(1, entries)

if mode == "tfrecord-check":
    path, index, n, image_len = args[0], args[1], int(args[2]), int(args[3])
    data = open(path, "rb").read()
    i, records, offsets = 0, 0, []
    while i < len(data):
        head = data[i:i + 8]
        (length,) = struct.unpack("<Q", head)
        assert struct.unpack("<I", data[i + 8:i + 12])[0] == masked(head), "length CRC"
        payload = data[i + 12:i + 12 + length]
        assert struct.unpack("<I", data[i + 12 + length:i + 16 + length])[0] == masked(payload), "data CRC"
        ex = decode_example(payload)
        assert len(ex["image"][0]) == image_len, (len(ex["image"][0]), image_len)
        assert len(ex["size"]) == 1
        offsets.append(f"{i} {16 + length}")
        i += 16 + length; records += 1
    assert records == n, (records, n)
    assert open(index).read().split("\n")[:-1] == offsets, "index lines"
    print("ok")
elif mode == "tfrecord-write":
    path, index, n, image_len = args[0], args[1], int(args[2]), int(args[3])
    import os
    with open(path, "wb") as f, open(index, "w") as idx:
        for r in range(n):
            payload = encode_example(bytes([r % 256]) * image_len, 7)
            head = struct.pack("<Q", len(payload))
            idx.write(f"{f.tell()} {16 + len(payload)}\n")
            f.write(head + struct.pack("<I", masked(head)) + payload + struct.pack("<I", masked(payload)))
    print("ok")
elif mode == "csv-check":
    import pandas as pd
    path, rows, width = args[0], int(args[1]), int(args[2])
    df = pd.read_csv(path, header=None, compression="infer")
    assert df.shape == (rows, width), df.shape
    print("ok")
elif mode == "csv-write":
    import numpy as np, pandas as pd
    path = args[0]
    a = np.arange(12, dtype=np.int64).reshape(3, 4) * 10
    pd.DataFrame(a).to_csv(path, header=False, index=False, compression="infer")
    print("ok")
elif mode == "image-check":
    from PIL import Image
    path, fmt, w, h = args[0], args[1], int(args[2]), int(args[3])
    im = Image.open(path)
    assert im.format == fmt and im.mode == "L" and im.size == (w, h), (im.format, im.mode, im.size)
    if fmt == "PNG":
        assert im.tobytes() == open(args[4], "rb").read(), "png pixels"
    print("ok")
elif mode == "image-write":
    from PIL import Image
    import numpy as np
    path, fmt = args[0], args[1]
    Image.fromarray((np.arange(20 * 30) % 251).astype(np.uint8).reshape(20, 30)).save(path, format=fmt)
    print("ok")
elif mode == "jpeg-variants":
    # JPEGs the way Pillow writes them, each with the pixels np.asarray(Image.open(f)) gives.
    from PIL import Image
    import numpy as np
    out = args[0]
    rng = np.random.default_rng(3)
    noise = lambda h, w: rng.integers(0, 256, (h, w), dtype=np.uint8)
    ramp = (np.add.outer(np.arange(48) * 2, np.arange(64) * 3) % 256).astype(np.uint8)
    variants = [
        ("dlio", noise(256, 256), {}),                        # DLIO's images: quality 75
        ("odd_size", noise(23, 37), {"quality": 90}),
        ("smooth", ramp, {"quality": 50}),
        ("optimized_tables", noise(40, 56), {"optimize": True}),
        ("tiny", noise(1, 1), {}),
        ("progressive", noise(48, 64), {"progressive": True}),
        ("restarts", noise(48, 64), {"restart_marker_blocks": 3}),
        ("colour", np.dstack([noise(24, 40)] * 3), {}),
    ]
    for name, pixels, options in variants:
        path = f"{out}/{name}.jpeg"
        try:
            Image.fromarray(pixels).save(path, format="JPEG", **options)
        except TypeError:
            continue  # an option this Pillow lacks
        decoded = np.asarray(Image.open(path))
        open(f"{out}/{name}.raw", "wb").write(decoded.tobytes())
        print(name, decoded.shape[1], decoded.shape[0], decoded.ndim)
elif mode == "jpeg-pixels":
    from PIL import Image
    import numpy as np
    open(args[1], "wb").write(np.asarray(Image.open(args[0])).tobytes())
    print("ok")
elif mode == "parquet-check":
    import pyarrow.parquet as pq
    path, rows, groups, sample, codec = args[0], int(args[1]), int(args[2]), int(args[3]), args[4]
    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    assert [str(x) for x in schema.types] == ["binary", "int64"] and schema.names == ["data", "label"], schema
    assert f.metadata.num_rows == rows and f.metadata.num_row_groups == groups
    assert f.metadata.row_group(0).column(0).compression == codec, f.metadata.row_group(0).column(0).compression
    t = f.read()
    assert all(len(v) == sample for v in t.column("data").to_pylist())
    assert open(args[5], "rb").read() == b"".join(t.column("data").to_pylist()), "bytes"
    print("ok")
elif mode == "parquet-write":
    import pyarrow as pa, pyarrow.parquet as pq
    path = args[0]
    data = [bytes([i]) * 100 for i in range(10)]
    t = pa.table({"data": pa.array(data, pa.binary()), "label": pa.array(range(10), pa.int64())})
    pq.write_table(t, path, row_group_size=4, compression="zstd")
    print("ok")
elif mode == "indexed-check":
    import numpy as np
    path, n, size = args[0], int(args[1]), int(args[2])
    off = np.fromfile(path + ".off.idx", dtype=np.uint64)
    sz = np.fromfile(path + ".sz.idx", dtype=np.uint64)
    data = np.fromfile(path, dtype=np.uint8)
    assert len(off) == n and len(sz) == n and (sz == size).all(), (off, sz)
    assert all(len(data[o:o + s]) == size for o, s in zip(off, sz))
    assert int(off[-1] + sz[-1]) == len(data)
    print("ok")
elif mode == "indexed-write":
    import numpy as np
    path = args[0]
    samples = [np.full(s, i, dtype=np.uint8) for i, s in enumerate([10, 20, 5])]
    np.concatenate(samples).tofile(path)
    np.array([0, 10, 30], dtype=np.uint64).tofile(path + ".off.idx")
    np.array([10, 20, 5], dtype=np.uint64).tofile(path + ".sz.idx")
    print("ok")
elif mode == "h5-check":
    import h5py, numpy as np
    path, k, shape, dtype, chunks, comp = args[0], int(args[1]), args[2], args[3], args[4], args[5]
    with h5py.File(path, "r") as f:
        names = sorted(n for n in f if n.startswith("records_"))
        assert names == [f"records_{j}" for j in range(k)], names
        for n in names:
            d = f[n]
            assert str(d.shape) == shape, (d.shape, shape)
            assert d.dtype == np.dtype(dtype), d.dtype
            assert str(d.chunks) == chunks, d.chunks
            assert str(d.compression) == comp, d.compression
            d[d.shape[0] - 1]
        assert f["labels"].shape == (eval(shape)[0],) and f["labels"].dtype == np.int64
    print("ok")
elif mode == "h5-write":
    import h5py, numpy as np
    path = args[0]
    with h5py.File(path, "w") as f:
        a = (np.arange(6 * 10 * 12) % 251).astype(np.uint8).reshape(6, 10, 12)
        f.create_dataset("records_0", data=a, chunks=(2, 5, 5), compression="gzip", compression_opts=6)
        f.create_dataset("labels", data=np.zeros(6, dtype=np.int64))
    print("ok")
elif mode == "arrow-check":
    import pyarrow as pa
    path, rows, batches, sample = args[0], int(args[1]), int(args[2]), int(args[3])
    with pa.ipc.open_file(path) as f:
        assert f.num_record_batches == batches, f.num_record_batches
        t = f.read_all()
    assert t.num_rows == rows
    assert t.schema.names == ["data", "label"] and [str(x) for x in t.schema.types] == ["binary", "int64"], t.schema
    assert all(len(v) == sample for v in t.column("data").to_pylist())
    assert open(args[4], "rb").read() == b"".join(t.column("data").to_pylist()), "bytes"
    print("ok")
elif mode == "arrow-schema":
    import pyarrow as pa
    with pa.ipc.open_file(args[0]) as f:
        t = f.read_all()
    print(t.num_rows, "|".join(f"{n}:{ty}" for n, ty in zip(t.schema.names, t.schema.types)))
elif mode == "arrow-write":
    import pyarrow as pa
    path = args[0]
    t = pa.table({"data": pa.array([bytes([i]) * 100 for i in range(10)], pa.binary()),
                  "label": pa.array(range(10), pa.int64())})
    with pa.ipc.new_file(path, t.schema) as w:
        for b in t.to_batches(max_chunksize=4):
            w.write_batch(b)
    print("ok")
else:
    sys.exit(f"unknown mode {mode}")
"#;

fn dataset(format: FormatKind) -> DatasetConfig {
    DatasetConfig {
        format,
        ..DatasetConfig::default()
    }
}

fn layout(
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

fn generate(format: &dyn Format, path: &Path, layout: &FileLayout) {
    format
        .generate(
            &PosixStorage::new(),
            path,
            layout,
            &mut DataRng::for_file(11, 0, 0),
        )
        .expect("generate");
}

fn read_all(format: &dyn Format, path: &Path, layout: &FileLayout, samples: u32) -> Vec<Vec<u8>> {
    let storage = PosixStorage::new();
    let mut reader = format.reader(layout);
    reader.open(&storage, 0, path).expect("open");
    (0..samples)
        .map(|i| reader.read_sample(&storage, 0, i).expect("read").to_vec())
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn tfrecord_parser_checks_both_crcs_and_decodes_examples_of_ours_and_we_read_theirs() {
    if !python_available("struct") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let format = format_from_config(&dataset(FormatKind::Tfrecord)).unwrap();
    let path = dir.path().join("train/img_0_of_1.tfrecord");
    let l = layout(4, &[16, 20], ElementType::Float32, Compression::None);
    generate(&*format, &path, &l);
    let index = dir.path().join("index/train/img_0_of_1.tfrecord.idx");
    assert_eq!(
        python("tfrecord-check", &[s(&path), s(&index), "4", "1280"]),
        "ok"
    );

    // A file written by the Python writer (with its index), read per record and streamed.
    let theirs = dir.path().join("valid/py.tfrecord");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    let their_index = dir.path().join("index/valid/py.tfrecord.idx");
    std::fs::create_dir_all(their_index.parent().unwrap()).unwrap();
    python("tfrecord-write", &[s(&theirs), s(&their_index), "3", "50"]);
    let samples = read_all(&*format, &theirs, &l, 3);
    assert_eq!(samples[2], vec![2u8; 50]);
    let mut stream = RecordStream::open(&PosixStorage::new(), &theirs, 64).unwrap();
    let mut count = 0;
    while stream.next_record().unwrap().is_some() {
        count += 1;
    }
    assert_eq!(count, 3);
}

#[test]
fn pandas_reads_our_csv_compressed_or_not_and_we_read_pandas_csv() {
    if !python_available("pandas") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for compression in [Compression::None, Compression::Gzip, Compression::Zip] {
        let config = DatasetConfig {
            compression,
            ..dataset(FormatKind::Csv)
        };
        let format = format_from_config(&config).unwrap();
        let path = dir.path().join(format!("a.{}", format.extension()));
        let l = layout(5, &[3, 7], ElementType::Int32, compression);
        generate(&*format, &path, &l);
        assert_eq!(
            python("csv-check", &[s(&path), "5", "21"]),
            "ok",
            "{compression:?}"
        );

        let theirs = dir.path().join(format!("py.{}", format.extension()));
        python("csv-write", &[s(&theirs)]);
        let rows = read_all(
            &*format,
            &theirs,
            &layout(3, &[4], ElementType::Int64, compression),
            3,
        );
        let values: Vec<i64> = rows[2]
            .chunks(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(values, [80, 90, 100, 110]);
    }
}

#[test]
fn pillow_opens_our_images_and_we_decode_pillows() {
    if !python_available("PIL") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (kind, pil) in [(FormatKind::Jpeg, "JPEG"), (FormatKind::Png, "PNG")] {
        let format = format_from_config(&dataset(kind)).unwrap();
        let path = dir.path().join(format!("a.{}", format.extension()));
        let l = layout(1, &[24, 40], ElementType::Uint8, Compression::None);
        generate(&*format, &path, &l);
        let raw = dir.path().join("pixels.raw");
        let mut pixels = vec![0u8; 960];
        DataRng::for_file(11, 0, 0).fill(&mut pixels);
        std::fs::write(&raw, &pixels).unwrap();
        assert_eq!(
            python("image-check", &[s(&path), pil, "40", "24", s(&raw)]),
            "ok"
        );

        let theirs = dir.path().join(format!("py.{}", format.extension()));
        python("image-write", &[s(&theirs), pil]);
        let got = read_all(&*format, &theirs, &l, 1);
        assert_eq!(got[0].len(), 600);
        if kind == FormatKind::Png {
            let want: Vec<u8> = (0..600u32).map(|i| (i % 251) as u8).collect();
            assert_eq!(got[0], want);
        }
    }
}

/// What one JPEG decodes to: most `Pillow - ours` differences stay within one grey level
/// (decoders may round their inverse DCTs differently).
fn assert_close(name: &str, ours: &[u8], pillow: &[u8]) {
    assert_eq!(ours.len(), pillow.len(), "{name}: pixel count");
    let worst = ours.iter().zip(pillow).map(|(a, b)| a.abs_diff(*b)).max();
    assert!(
        worst <= Some(1),
        "{name}: {worst:?} grey levels from Pillow's pixels"
    );
}

#[test]
fn we_decode_every_pixel_of_pillows_jpegs_as_pillow_does_and_pillow_ours() {
    if !python_available("PIL, numpy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let format = format_from_config(&dataset(FormatKind::Jpeg)).unwrap();
    let listing = python("jpeg-variants", &[s(dir.path())]);
    let mut names = Vec::new();
    for line in listing.lines() {
        let [name, width, height, ndim] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("unexpected line {line:?}");
        };
        let (width, height): (usize, usize) = (width.parse().unwrap(), height.parse().unwrap());
        let path = dir.path().join(format!("{name}.jpeg"));
        let l = layout(1, &[height, width], ElementType::Uint8, Compression::None);
        let ours = read_all(&*format, &path, &l, 1).remove(0);
        let pillow = std::fs::read(dir.path().join(format!("{name}.raw"))).unwrap();
        if ndim == "3" {
            // Colour: Pillow hands out RGB, we hand out the luma plane.
            assert_eq!(ours.len(), width * height, "{name}");
        } else {
            assert_close(name, &ours, &pillow);
        }
        names.push(name.to_string());
    }
    for expected in [
        "dlio",
        "odd_size",
        "smooth",
        "optimized_tables",
        "progressive",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }

    // Pillow decodes the JPEGs we write to the same pixels as we do.
    let l = layout(1, &[64, 96], ElementType::Uint8, Compression::None);
    let ours = dir.path().join("ours.jpeg");
    generate(&*format, &ours, &l);
    let raw = dir.path().join("ours.raw");
    assert_eq!(python("jpeg-pixels", &[s(&ours), s(&raw)]), "ok");
    let got = read_all(&*format, &ours, &l, 1).remove(0);
    assert_close("ours", &got, &std::fs::read(&raw).unwrap());
}

#[test]
fn pyarrow_reads_our_parquet_schema_rows_groups_codec_and_we_read_pyarrows() {
    if !python_available("pyarrow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (codec, name) in [
        (ParquetCompression::None, "UNCOMPRESSED"),
        (ParquetCompression::Snappy, "SNAPPY"),
        (ParquetCompression::Zstd, "ZSTD"),
        (ParquetCompression::Gzip, "GZIP"),
    ] {
        let config = DatasetConfig {
            parquet_row_group_size: 3,
            parquet_compression: codec,
            ..dataset(FormatKind::Parquet)
        };
        let format = format_from_config(&config).unwrap();
        let path = dir.path().join(format!("{name}.parquet"));
        let l = layout(7, &[10, 10], ElementType::Uint8, Compression::None);
        generate(&*format, &path, &l);
        let raw = dir.path().join("all.raw");
        let mut bytes = vec![0u8; 700];
        DataRng::for_file(11, 0, 0).fill(&mut bytes);
        std::fs::write(&raw, &bytes).unwrap();
        assert_eq!(
            python("parquet-check", &[s(&path), "7", "3", "100", name, s(&raw)]),
            "ok"
        );
    }
    let format = format_from_config(&dataset(FormatKind::Parquet)).unwrap();
    let theirs = dir.path().join("py.parquet");
    python("parquet-write", &[s(&theirs)]);
    let rows = read_all(
        &*format,
        &theirs,
        &layout(10, &[100], ElementType::Uint8, Compression::None),
        10,
    );
    assert_eq!(rows[9], vec![9u8; 100]);
    assert_eq!(rows[4], vec![4u8; 100]);
}

#[test]
fn numpy_reads_our_indexed_binary_and_we_read_numpys() {
    if !python_available("numpy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for kind in [FormatKind::IndexedBinary, FormatKind::MmapIndexedBinary] {
        let format = format_from_config(&dataset(kind)).unwrap();
        let path = dir.path().join(format!("a.{}", format.extension()));
        let l = layout(3, &[9, 11], ElementType::Int16, Compression::None);
        generate(&*format, &path, &l);
        assert_eq!(python("indexed-check", &[s(&path), "3", "198"]), "ok");

        let theirs = dir.path().join(format!("py.{}", format.extension()));
        python("indexed-write", &[s(&theirs)]);
        let rows = read_all(&*format, &theirs, &l, 3);
        assert_eq!(rows, vec![vec![0u8; 10], vec![1u8; 20], vec![2u8; 5]]);
    }
}

/// (datasets per record, sample dims, chunk dims, compression, element, h5py's shape, chunks
/// and compression as printed).
#[cfg(feature = "hdf5")]
type H5Case = (
    u64,
    &'static [usize],
    Vec<u64>,
    Compression,
    ElementType,
    &'static str,
    &'static str,
    &'static str,
);

#[cfg(feature = "hdf5")]
#[test]
fn h5py_reads_our_hdf5_layouts_and_we_read_h5pys() {
    if !python_available("h5py") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cases: [H5Case; 3] = [
        (
            1,
            &[8, 6],
            vec![],
            Compression::None,
            ElementType::Float32,
            "(4, 8, 6)",
            "None",
            "None",
        ),
        (
            3,
            &[6, 4, 2],
            vec![],
            Compression::None,
            ElementType::Int8,
            "(4, 2, 4, 2)",
            "None",
            "None",
        ),
        (
            1,
            &[8, 6],
            vec![1, 4, 3],
            Compression::Gzip,
            ElementType::Float16,
            "(4, 8, 6)",
            "(1, 4, 3)",
            "gzip",
        ),
    ];
    for (k, dims, chunks, compression, element, shape, chunk_text, comp) in cases {
        let mut config = DatasetConfig {
            compression,
            ..dataset(FormatKind::Hdf5)
        };
        config.hdf5.num_dset_per_record = k;
        config.hdf5.chunk_dims = chunks;
        let format = format_from_config(&config).unwrap();
        let path = dir.path().join(format!("k{k}{compression:?}.hdf5"));
        let l = layout(4, dims, element, compression);
        generate(&*format, &path, &l);
        let got = python(
            "h5-check",
            &[
                s(&path),
                &k.to_string(),
                shape,
                element.name(),
                chunk_text,
                comp,
            ],
        );
        assert_eq!(got, "ok");
    }
    let format = format_from_config(&dataset(FormatKind::Hdf5)).unwrap();
    let theirs = dir.path().join("py.hdf5");
    python("h5-write", &[s(&theirs)]);
    let rows = read_all(
        &*format,
        &theirs,
        &layout(6, &[10, 12], ElementType::Uint8, Compression::None),
        6,
    );
    let want: Vec<u8> = (0..120u32).map(|i| ((5 * 120 + i) % 251) as u8).collect();
    assert_eq!(rows[5], want);
}

#[test]
fn pyarrow_reads_our_arrow_ipc_files_and_we_read_pyarrows() {
    if !python_available("pyarrow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The data/label layout in record batches of 3 rows: 7 rows make 3 batches.
    let mut config = dataset(FormatKind::Arrow);
    config.arrow.generation_batch_size = 3;
    let format = format_from_config(&config).unwrap();
    let path = dir.path().join("ours.arrow");
    let l = layout(7, &[10, 10], ElementType::Uint8, Compression::None);
    generate(&*format, &path, &l);
    let raw = dir.path().join("all.raw");
    let mut bytes = vec![0u8; 700];
    DataRng::for_file(11, 0, 0).fill(&mut bytes);
    std::fs::write(&raw, &bytes).unwrap();
    assert_eq!(
        python("arrow-check", &[s(&path), "7", "3", "100", s(&raw)]),
        "ok"
    );
    assert_eq!(read_all(&*format, &path, &l, 7).len(), 7);

    // A column schema: pyarrow sees each column with the type the dtype names.
    let column = |name: &str, dtype: &str, size: u64| dlio_config::ParquetColumn {
        name: name.into(),
        dtype: dtype.into(),
        size,
        read: true,
    };
    let mut config = dataset(FormatKind::Arrow);
    config.arrow.columns = vec![
        column("feat", "float32", 4),
        column("id", "int64", 1),
        column("txt", "string", 1),
        column("blob", "binary", 16),
        column("half", "float16", 1),
        column("flag", "bool", 1),
        column("vec", "list", 3),
    ];
    let format = format_from_config(&config).unwrap();
    let path = dir.path().join("columns.arrow");
    generate(&*format, &path, &l);
    assert_eq!(
        python("arrow-schema", &[s(&path)]),
        "7 feat:fixed_size_list<item: float not null>[4]|id:int64|txt:string|blob:binary|\
         half:halffloat|flag:bool|vec:fixed_size_list<item: float not null>[3]"
    );

    // pyarrow's file, in batches of 4 rows: 10 rows, the last batch of 2.
    let theirs = dir.path().join("py.arrow");
    python("arrow-write", &[s(&theirs)]);
    let mut config = dataset(FormatKind::Arrow);
    config.arrow.generation_batch_size = 4;
    let format = format_from_config(&config).unwrap();
    let l = layout(10, &[100], ElementType::Uint8, Compression::None);
    assert_eq!(read_all(&*format, &theirs, &l, 10).len(), 10);
    // Batches of another size than the file's are refused, naming the key.
    config.arrow.generation_batch_size = 5;
    let format = format_from_config(&config).unwrap();
    let mut reader = format.reader(&l);
    let error = reader
        .open(&PosixStorage::new(), 0, &theirs)
        .unwrap_err()
        .to_string();
    assert!(error.contains("generation_batch_size"), "{error}");
}
