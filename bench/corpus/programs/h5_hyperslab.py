"""Per-batch hyperslab reads of one contiguous HDF5 file (a slice of consecutive samples).

One HDF5 file holds "images" (1024 x 8192 uint8, contiguous) and "labels" (1024 int32,
contiguous). Each epoch shuffles the 64 batch-aligned block starts; each step reads
images[s:s+16] (one 128 KiB read) and labels[s:s+16] (one 64-byte read) through the one open
file, then sleeps 15 ms. Blocks are shuffled, samples inside a block stay in order.

Usage: h5_hyperslab.py DATA [--make | --truth]
Fixed by the program: 1 file x 1024 samples of 8 KiB, batch 16 read as one slice, 2 epochs of
64 steps, 15 ms compute per step, main thread only. Needs h5py and numpy.
"""
import json
import os
import random
import sys
import time

import h5py
import numpy as np

N, SAMPLE_BYTES, BATCH, EPOCHS, COMPUTE_S = 1024, 8192, 16, 2, 0.015
SEED = 9


def truth(data):
    path = os.path.join(data, "train.h5")
    return {
        "program": "h5_hyperslab", "needs": [], "format": "hdf5", "io_library": "h5py",
        "data_layout": "DATA/train.h5, datasets 'images' (contiguous) and 'labels'",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES, "label_bytes": 4},
        "file_size": {"bytes": os.path.getsize(path) if os.path.exists(path) else None},
        "hdf5": {"layout": "contiguous"},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": N // BATCH, "total_steps": EPOCHS * N // BATCH,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "batch-aligned blocks, per epoch (samples within a block in order)",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "one 128 KiB read (16 samples) + one 64 B label read per step; file "
                        "open for the whole run",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    with h5py.File(os.path.join(data, "train.h5"), "w") as f:
        f.create_dataset("images", data=rng.integers(0, 255, (N, SAMPLE_BYTES), dtype=np.uint8))
        f.create_dataset("labels", data=rng.integers(0, 100, N, dtype=np.int32))


def train(data):
    rng = random.Random(SEED)
    with h5py.File(os.path.join(data, "train.h5"), "r") as f:
        images, labels = f["images"], f["labels"]
        starts = list(range(0, images.shape[0], BATCH))
        for epoch in range(EPOCHS):
            rng.shuffle(starts)
            for s in starts:
                xb = images[s:s + BATCH]
                yb = labels[s:s + BATCH]
                assert xb.shape == (BATCH, SAMPLE_BYTES) and yb.shape == (BATCH,)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
