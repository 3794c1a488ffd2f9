"""Batches of scattered rows from a gzip-compressed, chunked HDF5 dataset, one read each.

DATA/train.h5 holds "features", 1280 rows of 4096 bytes (uint8) in chunks of 32 rows
(128 KiB raw) compressed with gzip: 40 chunks, each stored at its own size, since every row
is random bytes up to a point drawn between 30% and 70% of the row and zeros after it. The
program opens the file once and, each epoch, shuffles the rows, cuts them into batches of 32
and reads each batch with one fancy-index read of its sorted rows (features[idx]): HDF5 reads
every chunk the batch touches, whole, with one read of its stored size, and decompresses it.
Its chunk cache is set to 1 MiB (HDF5 1.14's default; 2.0's 8 MiB would hold all 40 chunks):
it holds 8 decompressed chunks, so the next batch reads most of them again. 8 ms of sleep per step, 3 epochs of 40 steps, main thread only.

Usage: h5_compressed_batches.py DATA [--make]
"""
import os
import random
import sys
import time

import h5py
import numpy as np

ROWS, ROW, CHUNK_ROWS, BATCH, EPOCHS, COMPUTE_S = 1280, 4096, 32, 32, 3, 0.008


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(29)
    rows = rng.integers(0, 255, (ROWS, ROW), dtype=np.uint8)
    ends = rng.integers(int(0.3 * ROW), int(0.7 * ROW), ROWS)
    rows[np.arange(ROW)[None, :] >= ends[:, None]] = 0
    with h5py.File(os.path.join(data, "train.h5"), "w") as f:
        f.create_dataset("features", data=rows, chunks=(CHUNK_ROWS, ROW), compression="gzip",
                         compression_opts=1)


def train(data):
    rng = random.Random(7)
    with h5py.File(os.path.join(data, "train.h5"), "r", rdcc_nbytes=1 << 20) as f:
        features = f["features"]
        for _ in range(EPOCHS):
            order = list(range(ROWS))
            rng.shuffle(order)
            for start in range(0, ROWS, BATCH):
                batch = features[sorted(order[start:start + BATCH])]
                assert batch.shape == (BATCH, ROW)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    if "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
