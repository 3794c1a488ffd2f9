"""Random sample indexing into memory-mapped npy files (np.load(mmap_mode="r")).

4 npy files each hold a 256 x 16384 uint8 array (256 samples of 16 KiB). They are mapped
once before training; each epoch draws a fresh permutation of the 1024 (file, row) pairs and
each step copies 32 rows out of the maps (np.array(mm[row])), then sleeps 15 ms. The data
comes in through page faults: no read call moves it, so a syscall trace sees only the opening,
the npy header read and the mmap of each file.

Usage: npy_memmap.py DATA [--make | --truth]
Fixed by the program: 4 files x 256 samples of 16 KiB, batch 32, main thread only, 2 epochs
of 32 steps, 15 ms compute per step. Needs numpy only.
"""
import json
import os
import sys
import time

import numpy as np

FILES, PER_FILE, SAMPLE_BYTES, BATCH, EPOCHS, COMPUTE_S = 4, 256, 16384, 32, 2, 0.015
SEED = 21


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "npy_memmap", "needs": [], "format": "npy",
        "io_library": "numpy.load(mmap_mode='r')", "data_layout": "DATA/*.npy",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": FILES * PER_FILE // BATCH,
        "total_steps": EPOCHS * FILES * PER_FILE // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "samples across files, per epoch", "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "memory-mapped: samples arrive by page faults (invisible to a syscall "
                        "trace); only header reads and mmap calls are traced",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        x = np.random.default_rng(SEED + i).integers(0, 255, (PER_FILE, SAMPLE_BYTES),
                                                     dtype=np.uint8)
        np.save(os.path.join(data, f"shard_{i}.npy"), x)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy"))
    maps = [np.load(n, mmap_mode="r") for n in names]
    pairs = np.array([(k, r) for k in range(len(maps)) for r in range(maps[k].shape[0])])
    rng = np.random.default_rng(SEED)
    for epoch in range(EPOCHS):
        order = pairs[rng.permutation(len(pairs))]
        for s in range(len(order) // BATCH):
            batch = np.stack([np.array(maps[k][r]) for k, r in order[s * BATCH:(s + 1) * BATCH]])
            assert batch.shape == (BATCH, SAMPLE_BYTES)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
