"""Random aligned 32-row slices of one contiguous (unchunked) HDF5 dataset, one pread a step.

DATA/rows.h5 holds one dataset "x": 4096 x 1024 float32, contiguous layout (h5py
create_dataset with no chunks and no compression), 16 MiB of data starting at file offset
2048 (file 16779264 bytes; column 0 of each row holds its row number, the rest is random).
The file is opened once (h5py.File(path, "r"), default settings) and the dataset looked up
once; each step reads ds[i:i + 32] (32 rows, 131072 bytes) at a start i drawn uniformly from
the 128 multiples of 32 (one random.Random for the run; with replacement, so some slices
come twice in an epoch: 47 and 51 distinct of 64), nothing kept between steps, then sleeps 8
ms as compute. Main thread only, 2 epochs of 64 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write; the same
with HDF5 2.0.0 and 1.14.6), all on the main thread: one openat(O_RDONLY) of rows.h5 (no
O_CLOEXEC), then 8 small preads of superblock, object headers, B-tree, heap and symbol table
(8, 48, 48, 512, 512, 544, 328 and 512 bytes at offsets 0 to 1072), and an lstat of the
path. Then per step exactly one pread64 of 131072 bytes at 2048 + i * 4096 (a contiguous
read larger than HDF5's 64 KiB sieve buffer goes straight into the result buffer; no chunk
cache exists for a contiguous dataset): 4 KiB-aligned row offsets shifted by 2048, so never
page-aligned. No read, no lseek on the file, no other data reads; the same slice read twice
is read from the file twice. 136 preads in all, 128 of them data (16 MiB read, the same
amount as the dataset but with repeats and gaps), 8 ms of no I/O between them. No writes;
the file stays open to the end.

Usage: h5_contiguous_batch_slices.py DATA [--make | --truth]
Fixed by the program: 1 HDF5 file, 4096 rows of 4096 bytes (float32 x 1024) contiguous,
batch 32 rows (one 128 KiB slice), main thread only, no read ahead, 2 epochs of 64 steps,
8 ms compute per step, random aligned slice starts with replacement, no checkpoint, no
eval. Needs h5py and numpy.
"""
import json
import os
import random
import sys
import time

import h5py
import numpy as np

ROWS, COLS, BATCH, EPOCHS, STEPS, COMPUTE_S = 4096, 1024, 32, 2, 64, 0.008
ROW_BYTES = 4 * COLS
SEED = 1024


def path_of(data):
    return os.path.join(data, "rows.h5")


def starts():
    """The batch start rows, per epoch: uniform over the 128 aligned starts, with repeats."""
    rng = random.Random(SEED)
    return [[rng.randrange(ROWS // BATCH) * BATCH for _ in range(STEPS)] for _ in range(EPOCHS)]


def truth(data):
    p = path_of(data)
    st = starts()
    offset = None
    if os.path.exists(p):
        with h5py.File(p, "r") as f:
            offset = f["x"].id.get_offset()
    return {
        "program": "h5_contiguous_batch_slices", "needs": [], "format": "hdf5",
        "io_library": "h5py (ds[i:i+32] slices of a contiguous dataset)",
        "data_layout": "DATA/rows.h5, dataset 'x' float32 4096 x 1024, contiguous",
        "num_files": 1, "samples_per_file": ROWS,
        "sample_size": {"dist": "fixed", "bytes": ROW_BYTES, "note": "one row"},
        "file_size": {"bytes": os.path.getsize(p) if os.path.exists(p) else None,
                      "dataset_bytes": ROWS * ROW_BYTES, "dataset_offset": offset},
        "hdf5": {"layout": "contiguous", "compression": None, "chunk_cache": "n/a",
                 "read_bytes_per_step": BATCH * ROW_BYTES,
                 "note": "a 128 KiB slice is larger than the 64 KiB sieve buffer, so it is "
                         "read straight into the result, one pread per step"},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "random aligned slice start per step (uniform over 128 starts, with "
                   "replacement)",
        "distinct_slices_per_epoch": [len(set(s)) for s in st],
        "rows_read_per_epoch": STEPS * BATCH, "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "file opened once; per step one 131072-byte pread at dataset_offset + "
                        "start * 4096 (start a multiple of 32), main thread",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    x = np.random.default_rng(SEED).standard_normal((ROWS, COLS), dtype=np.float32)
    x[:, 0] = np.arange(ROWS, dtype=np.float32)  # each row starts with its number
    with h5py.File(path_of(data), "w") as f:
        f.create_dataset("x", data=x)  # no chunks=, no compression: contiguous


def train(data):
    with h5py.File(path_of(data), "r") as f:
        ds = f["x"]
        for epoch, st in enumerate(starts()):
            for i in st:
                batch = ds[i:i + BATCH]
                assert batch.shape == (BATCH, COLS) and batch[0, 0] == i
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
