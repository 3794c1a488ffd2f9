"""Whole parquet files read with pandas.read_parquet, one file per "chunk" of training.

6 parquet files (DATA/part_0.parquet .. part_5.parquet, written by pyarrow with its defaults:
snappy, dictionary tried, statistics), each 3 row groups of 512 rows and 4 columns: id
(int64), label (int32), feat (binary, lognormal lengths, median 2 KiB, sigma 0.4, clipped to
[256 B, 8 KiB], random bytes so snappy cannot shrink them) and caption (string, 12 words,
about 70 bytes). A file is 3.42 to 3.52 MB (20.8 MB in all, over 99% of it the feat column).
Each epoch shuffles the file order (one random.Random for the run); for each file, the whole
file is read into a DataFrame with pd.read_parquet(path) (all columns), its 1536 rows are
shuffled in memory and trained on in 12 batches of 128 (df.iloc), 5 ms of compute each. So
one file load every 12 steps, nothing read between loads. 72 steps an epoch.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): at
start, the main thread opens DATA (O_DIRECTORY, getdents); pyarrow's thread pools (one I/O
thread and 2 CPU threads here, on 2 cores) are started during the first load. Each load
opens the file twice. First, on the main thread, openat(O_RDONLY|O_CLOEXEC), two fstat, one
pread64 of 65536 bytes ending at the end of the file (the footer, 13-15 KB here, fits in
it), close. Then a second openat on the main thread, two fstat, fadvise64(WILLNEED) of the
data region, and a single pread64 of the whole data region, from offset 4 (after the "PAR1"
magic) to the start of the footer (3.41-3.51 MB: pyarrow's pre-buffering coalesces the 12
column chunks of the 3 row groups into one range) on the I/O thread; the close comes from
one of the CPU threads. So 2 preads per load and no read(): 12 loads (each file once per
epoch, a different order each epoch), 24 preads, about 42.3 MB read (the two preads of a
load overlap by about 50 KB before the footer). No lseek and no writes on the data.

Usage: parquet_full_files_pandas.py DATA [--make | --truth]
Fixed by the program: 6 files x 3 row groups x 512 rows (1536 rows a file), batch 128 (12
steps per file), main thread only (plus pyarrow's own pools), 2 epochs of 72 steps, 5 ms
compute per step, files and rows shuffled per epoch, no checkpoint, no eval. Needs pandas,
pyarrow and numpy.
"""
import json
import os
import random
import sys
import time

import numpy as np

FILES, GROUPS, ROWS, BATCH, EPOCHS, COMPUTE_S = 6, 3, 512, 128, 2, 0.005
FEAT_MEDIAN, FEAT_SIGMA, FEAT_LO, FEAT_HI, CAPTION_WORDS = 2048, 0.4, 256, 8192, 12
SEED = 3303


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".parquet")) \
        if os.path.isdir(data) else []


def feat_lengths(k):
    rng = np.random.default_rng(SEED + k)
    n = GROUPS * ROWS
    return np.clip(rng.lognormal(np.log(FEAT_MEDIAN), FEAT_SIGMA, n), FEAT_LO, FEAT_HI) \
        .astype(np.int64)


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    lens = np.concatenate([feat_lengths(k) for k in range(FILES)])
    rows = GROUPS * ROWS
    steps = FILES * rows // BATCH
    return {
        "program": "parquet_full_files_pandas", "needs": ["pandas", "pyarrow"],
        "format": "parquet", "io_library": "pandas.read_parquet (pyarrow engine), whole file",
        "data_layout": "DATA/part_N.parquet, columns id int64, label int32, feat binary, "
                       "caption string; snappy, 3 row groups of 512 rows",
        "num_files": FILES, "samples_per_file": rows, "row_groups_per_file": GROUPS,
        "rows_per_group": ROWS,
        "sample_size": {"dist": "lognormal (feat column)", "median": FEAT_MEDIAN,
                        "sigma": FEAT_SIGMA, "clip": [FEAT_LO, FEAT_HI],
                        "mean": float(lens.mean()), "min": int(lens.min()),
                        "max": int(lens.max()),
                        "plus": "id int64, label int32, caption about 70 bytes"},
        "file_size": {"bytes": fsz, "total": sum(fsz)},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0,
                                         "note": "pyarrow's I/O threads do the reads"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": steps,
        "total_steps": EPOCHS * steps, "compute_s_per_step": COMPUTE_S,
        "shuffle": "file order and rows within a file, per epoch", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "per file load: one 64 KiB pread of the tail (footer) on the main "
                        "thread, then one pread of the whole data region on a pyarrow I/O "
                        "thread; one load every 12 steps, whole file, sequential",
    }


def make(data):
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(data, exist_ok=True)
    words = ["red", "small", "dog", "on", "the", "grass", "a", "blue", "car", "near", "tall",
             "tree", "with", "two", "people", "walking", "old", "house", "river", "bright"]
    for k in range(FILES):
        rng = np.random.default_rng(SEED + 100 + k)
        n = GROUPS * ROWS
        feat = [rng.integers(0, 255, int(m), dtype=np.uint8).tobytes() for m in feat_lengths(k)]
        caption = [" ".join(words[j] for j in rng.integers(0, len(words), CAPTION_WORDS))
                   for _ in range(n)]
        table = pa.table({"id": pa.array(np.arange(n) + k * n, pa.int64()),
                          "label": pa.array(rng.integers(0, 100, n), pa.int32()),
                          "feat": pa.array(feat, pa.binary()),
                          "caption": pa.array(caption, pa.string())})
        pq.write_table(table, os.path.join(data, f"part_{k}.parquet"), row_group_size=ROWS)


def train(data):
    import pandas as pd
    names = file_names(data)
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            # One "chunk of training": the whole file in memory, rows shuffled, then batched.
            df = pd.read_parquet(name)
            perm = np.random.default_rng(rng.randrange(1 << 30)).permutation(len(df))
            for s in range(len(df) // BATCH):
                b = df.iloc[perm[s * BATCH:(s + 1) * BATCH]]
                labels = b["label"].to_numpy()
                feats = [np.frombuffer(v, dtype=np.uint8) for v in b["feat"]]
                assert len(labels) == BATCH and len(feats) == BATCH
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
