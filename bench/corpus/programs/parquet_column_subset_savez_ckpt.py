"""CLIP-style contrastive head training on a web-scale image/text "shard" data set stored
as Parquet (like LAION / DataComp metadata + precomputed embeddings), reading only 3 of
its 5 columns (label, emb, caption) with pyarrow ParquetFile.iter_batches(columns=...),
files in a shuffled order per epoch, and an atomic checkpoint every 50 steps: np.savez to
a temporary file in the checkpoint directory, then os.replace onto model.npz.

The big column (image_jpeg, raw thumbnail bytes, ~63 % of the data set) is never read:
column projection means the reader fetches only the column chunks of the selected
columns from each row group.

Data set (DATA/, about 59 MB):
  DATA/shards/part-00000.parquet .. part-00005.parquet
      6 files x 3072 rows, 3 row groups of 1024 rows each, zstd compression, columns:
        id          int64
        label       int16 (1000 classes)
        emb         fixed_size_list<float32>[192]   (768 bytes per row, random, not
                    compressible: ~1.16 MB per row group column chunk)
        caption     string, 4-30 words (~20-200 bytes)
        image_jpeg  binary, 1-3 KB of random bytes per row (~2.1 MB per row group
                    chunk, NEVER read by training)
      ~9.9 MB per file (column chunk order in each row group: id ~2.5 KB, label ~2.6
      KB, emb ~1.16 MB, caption ~27 KB, image_jpeg ~2.1 MB). Footer metadata at the end of each file (a few KB).
  DATA/ckpt/model.npz   written by training (W 192 x 512 float32, m, v moments, bias,
                        step: ~1.18 MB); temp file DATA/ckpt/model.tmp.npz.

Training: each epoch the 6 files are visited in a numpy-permuted order (seed 8080 +
epoch); per file pq.ParquetFile(path) (default options: pre_buffer=True, no memory map,
use_threads=True) and iter_batches(batch_size=256, columns=["label", "emb", "caption"]):
12 batches per file (4 per row group), 72 steps per epoch, 2 epochs = 144 steps, 12 ms
of sleep per step. Checkpoint after steps 50 and 100 and at the end (144): np.savez
(uncompressed zip) of 5 arrays to ckpt/model.tmp.npz, then os.replace(tmp, model.npz).
No eval.

What a syscall trace sees: per file visit (12 over the run): openat(part-NNNNN.parquet,
O_RDONLY) and one pread64 of the last 65536 bytes (footer + metadata) on the MAIN thread;
then, because pre_buffer coalesces the adjacent column chunks label + emb + caption of a
row group (they are contiguous in the file), ONE pread64 per row group of ~1.19 MB
(1,188,612-1,191,901 bytes) starting at the label chunk's offset (2471, ~3256856,
~6586898 ...), issued from one of pyarrow's I/O pool threads (a different TID, the same
one for the whole run), when the row group's first batch is requested; then 4 steps pass
with no I/O. The id chunk (just before label) and the image_jpeg chunk (~2.1 MB, just
after caption) are never read, so each file is read in 3 disjoint ~1.19 MB ranges + the
64 KB tail (~37 % of its bytes), close when done. 12 opens, 12 footer preads, 36 data
preads, 43.6 MB over the run. Checkpoints (main thread): openat(ckpt/model.tmp.npz,
O_RDWR|O_CREAT|O_TRUNC|O_CLOEXEC) (np.savez opens "w+b"), then the zipfile writer: per
array a write of the .npy header (~183 B, with the zip local header), one write of the
array data (393216 B for W, m and v; small arrays b and step merged with their header:
2231 B and 194 B), an lseek back + 55-byte rewrite of the zip local header (sizes, CRC)
and an lseek forward; finally the central directory (~280 B) and the end record (58 B),
close, then rename(model.tmp.npz, model.npz) (os.replace). 3
checkpoints of 1,182,902 bytes, ~14 writes each.

Usage: parquet_column_subset_savez_ckpt.py DATA [--make | --truth]
numpy + pyarrow (no extra ML framework).
"""
import json
import os
import sys
import time

import numpy as np

N_FILES, ROWS, RG_ROWS, DIM = 6, 3072, 1024, 192
COLUMNS = ["label", "emb", "caption"]
BATCH, EPOCHS, CKPT_EVERY = 256, 2, 50
STEPS = N_FILES * ROWS // BATCH
COMPUTE_S = 0.012
HIDDEN = 512
SEED = 8080
WORDS = ("a photo of the cat dog car tree red blue small large on in with street beach "
         "city night sky person holding sitting near old new bright dark two three").split()


def file_path(data, i):
    return os.path.join(data, "shards", "part-%05d.parquet" % i)


def file_order(epoch):
    return [int(i) for i in np.random.default_rng(SEED + epoch).permutation(N_FILES)]


def ckpt_steps():
    total = EPOCHS * STEPS
    return sorted(set(list(range(CKPT_EVERY, total + 1, CKPT_EVERY)) + [total]))


def truth(data):
    return {
        "program": "parquet_column_subset_savez_ckpt", "needs": ["pyarrow"],
        "format": "Parquet (zstd, 3 row groups of 1024 rows per file)",
        "io_library": "pyarrow.parquet.ParquetFile.iter_batches(columns=[label, emb, "
                      "caption])",
        "data_layout": "DATA/shards/part-00000..00005.parquet",
        "num_files": N_FILES, "samples_per_file": ROWS, "row_groups_per_file": ROWS // RG_ROWS,
        "columns": {"all": ["id", "label", "emb", "caption", "image_jpeg"],
                    "read": COLUMNS},
        "sample_size": {"dist": "variable", "read_bytes_per_row_approx":
                        2 + DIM * 4 + 110, "full_row_bytes_approx": 8 + 2 + DIM * 4 + 110
                        + 2048, "image_jpeg_bytes": "uniform 1024..3072 (not read)"},
        "batch_size": BATCH, "readers": {"kind": "main thread (pyarrow internal CPU "
                                         "thread pool decodes/reads column chunks)",
                                         "count": 1},
        "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "file order permuted per epoch (seed 8080 + epoch); rows in file order",
        "file_order": {str(e): file_order(e) for e in range(EPOCHS)},
        "eval": None,
        "checkpoint": {"every_steps": CKPT_EVERY, "at_steps": ckpt_steps(),
                       "how": "np.savez to ckpt/model.tmp.npz then os.replace -> "
                              "ckpt/model.npz",
                       "bytes_approx": 3 * DIM * HIDDEN * 4 + HIDDEN * 4 + 8 + 5 * 200},
        "read_pattern": "footer pread, then per row group one pread per selected column "
                        "chunk; id and image_jpeg chunks skipped",
    }


def make(data):
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(os.path.join(data, "shards"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    words = np.array(WORDS)
    for i in range(N_FILES):
        n = ROWS
        ids = np.arange(i * n, (i + 1) * n, dtype=np.int64)
        labels = rng.integers(0, 1000, n).astype(np.int16)
        emb = rng.standard_normal((n, DIM), dtype=np.float32)
        caps = [" ".join(words[rng.integers(0, len(words), int(k))])
                for k in rng.integers(4, 31, n)]
        lens = rng.integers(1024, 3073, n)
        blob = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8).tobytes()
        offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        imgs = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offs.tobytes()),
                                                      pa.py_buffer(blob)])
        table = pa.table({
            "id": ids, "label": labels,
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), DIM),
            "caption": pa.array(caps, pa.string()), "image_jpeg": imgs})
        pq.write_table(table, file_path(data, i), row_group_size=RG_ROWS,
                       compression="zstd")


def save_ckpt(ckdir, state):
    tmp = os.path.join(ckdir, "model.tmp.npz")
    np.savez(tmp, **state)
    os.replace(tmp, os.path.join(ckdir, "model.npz"))


def train(data):
    import pyarrow.parquet as pq
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    rng = np.random.default_rng(SEED + 99)
    state = {"W": (rng.standard_normal((DIM, HIDDEN)) * 0.02).astype(np.float32),
             "m": np.zeros((DIM, HIDDEN), np.float32), "v": np.zeros((DIM, HIDDEN), np.float32),
             "b": np.zeros(HIDDEN, np.float32), "step": np.array(0, np.int64)}
    steps, saved, total = 0, 0, EPOCHS * STEPS
    for epoch in range(EPOCHS):
        for i in file_order(epoch):
            pf = pq.ParquetFile(file_path(data, i))
            for rb in pf.iter_batches(batch_size=BATCH, columns=COLUMNS):
                assert rb.num_rows == BATCH
                emb = rb.column(1).flatten().to_numpy().reshape(BATCH, DIM)
                h = emb @ state["W"][:, :8]
                state["m"][:, :8] += 1e-3 * emb.T @ np.tanh(h)
                ncap = sum(len(c) for c in rb.column(2).to_pylist())
                state["b"][0] += ncap * 1e-9
                time.sleep(COMPUTE_S)
                steps += 1
                state["step"] = np.array(steps, np.int64)
                if steps % CKPT_EVERY == 0 or steps == total:
                    save_ckpt(ckdir, state)
                    saved += 1
            pf.close()
    print("parquet_column_subset_savez_ckpt: %d steps, %d checkpoints" % (steps, saved))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
