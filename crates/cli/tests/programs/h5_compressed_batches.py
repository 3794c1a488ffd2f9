"""Batches of scattered rows from an LZF-compressed, chunked HDF5 dataset, one read each.

DATA/train.h5 holds "features", 1280 rows of 2048 bytes (uint8) in chunks of 16 rows
(32 KiB raw) compressed with LZF: 80 chunks, each stored at its own size, since every row
is random bytes up to a point drawn between 30% and 70% of the row and zeros after it. The
program opens the file once and, each epoch, shuffles the rows, cuts them into batches of 32
and reads each batch with one fancy-index read of its sorted rows (features[idx]): HDF5 reads
every chunk the batch touches, whole, with one read of its stored size, and decompresses it.
Its chunk cache is set to 256 KiB (HDF5's default, 1 MiB in 1.14 and 8 MiB in 2.0, would hold
most of the 80 chunks): it holds 8 decompressed chunks, so the next batch reads most of them
again. A batch touches about 26 chunks; decompressing them takes about a millisecond, short
beside a step's 25 ms of sleep, so that a busy machine's preemptions seldom fall inside a
batch's reads. 3 epochs of 40 steps, main thread only.

Usage: h5_compressed_batches.py DATA [--make]
"""
import os
import random
import sys
import time

import h5py
import numpy as np

ROWS, ROW, CHUNK_ROWS, BATCH, EPOCHS, COMPUTE_S = 1280, 2048, 16, 32, 3, 0.025


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(29)
    rows = rng.integers(0, 255, (ROWS, ROW), dtype=np.uint8)
    ends = rng.integers(int(0.3 * ROW), int(0.7 * ROW), ROWS)
    rows[np.arange(ROW)[None, :] >= ends[:, None]] = 0
    with h5py.File(os.path.join(data, "train.h5"), "w") as f:
        f.create_dataset("features", data=rows, chunks=(CHUNK_ROWS, ROW), compression="lzf")


def train(data):
    rng = random.Random(7)
    with h5py.File(os.path.join(data, "train.h5"), "r", rdcc_nbytes=256 << 10) as f:
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
