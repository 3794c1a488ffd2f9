"""Whole-dataset loads of contiguous HDF5 files up front, then training from memory.

2 HDF5 files each hold "images" (512 x 64 x 64 x 3 uint8, contiguous) and "labels" (512
int64, contiguous). Before training the program reads both datasets of both files whole
(ds[...]: one large read per dataset), concatenates them, and then trains for 2 epochs over
the arrays in memory: a per-epoch shuffled permutation, batches of 32 gathered from memory,
10 ms of compute per step. No file I/O at all during the steps.

Usage: h5_preload.py DATA [--make | --truth]
Fixed by the program: 2 files x 512 samples of 12 KiB (+8 B label), batch 32, 2 epochs of 32
steps, 10 ms compute per step, main thread only. Needs h5py and numpy.
"""
import json
import os
import sys
import time

import h5py
import numpy as np

FILES, PER_FILE, SHAPE, BATCH, EPOCHS, COMPUTE_S = 2, 512, (64, 64, 3), 32, 2, 0.010
SAMPLE_BYTES = SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 5


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "h5_preload", "needs": [], "format": "hdf5", "io_library": "h5py",
        "data_layout": "DATA/*.h5, datasets 'images' and 'labels', contiguous",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES, "label_bytes": 8},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None},
        "hdf5": {"layout": "contiguous"},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": FILES * PER_FILE // BATCH,
        "total_steps": EPOCHS * FILES * PER_FILE // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "samples in memory, per epoch", "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "everything read once before the first step (2 large reads per "
                        "file); the steps do no I/O",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        rng = np.random.default_rng(SEED + i)
        with h5py.File(os.path.join(data, f"train_{i}.h5"), "w") as f:
            f.create_dataset("images", data=rng.integers(0, 255, (PER_FILE,) + SHAPE,
                                                         dtype=np.uint8))
            f.create_dataset("labels", data=rng.integers(0, 10, PER_FILE, dtype=np.int64))


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5"))
    xs, ys = [], []
    for n in names:
        with h5py.File(n, "r") as f:
            xs.append(f["images"][...])
            ys.append(f["labels"][...])
    x, y = np.concatenate(xs), np.concatenate(ys)
    rng = np.random.default_rng(SEED)
    for epoch in range(EPOCHS):
        perm = rng.permutation(len(x))
        for s in range(len(x) // BATCH):
            idx = perm[s * BATCH:(s + 1) * BATCH]
            xb, yb = x[idx], y[idx]
            assert xb.shape == (BATCH,) + SHAPE and yb.shape == (BATCH,)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
