"""Per-sample reads of small chunked HDF5 files that fit h5py's chunk cache.

2 HDF5 files each hold "x" (32 x 96 x 128 uint8: 32 samples of 12 KiB, one chunk per
sample, uncompressed), 384 KiB of chunks a file: less than h5py's default chunk cache
(1 MiB per open dataset). The files are opened once with the default cache; each epoch reads
the 64 samples one at a time in a fresh shuffle, 8 per step, 15 ms compute per step. Only
the first epoch reads the file: the later epochs are served from the chunk cache, so the
trace holds 3 epochs of compute but one epoch of reads.

Usage: h5_chunk_cache.py DATA [--make | --truth]
Fixed by the program: 2 files x 32 samples of 12 KiB, chunk = 1 sample, batch 8, main thread
only, 3 epochs of 8 steps, 15 ms compute per step. Needs h5py and numpy.
"""
import json
import os
import random
import sys
import time

import h5py
import numpy as np

FILES, PER_FILE, SHAPE, BATCH, EPOCHS, COMPUTE_S = 2, 32, (96, 128), 8, 3, 0.015
SAMPLE_BYTES = SHAPE[0] * SHAPE[1]
SEED = 12


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "h5_chunk_cache", "needs": [], "format": "hdf5", "io_library": "h5py",
        "data_layout": "DATA/*.h5, dataset 'x' chunked (1, 96, 128)",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None},
        "hdf5": {"layout": "chunked", "chunk_samples": 1, "compression": None,
                 "chunk_cache": "h5py default (1 MiB): the whole file's chunks fit"},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "epochs_with_file_reads": 1,
        "steps_per_epoch": FILES * PER_FILE // BATCH,
        "total_steps": EPOCHS * FILES * PER_FILE // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "samples across files, per epoch", "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "one chunk read per sample in epoch 1; epochs 2-3 read nothing (chunk "
                        "cache)",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        x = np.random.default_rng(SEED + i).integers(0, 255, (PER_FILE,) + SHAPE, dtype=np.uint8)
        with h5py.File(os.path.join(data, f"part_{i}.h5"), "w") as f:
            f.create_dataset("x", data=x, chunks=(1,) + SHAPE)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5"))
    files = [h5py.File(n, "r") for n in names]
    sets = [f["x"] for f in files]
    pairs = [(k, i) for k in range(len(sets)) for i in range(sets[k].shape[0])]
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        rng.shuffle(pairs)
        for s in range(len(pairs) // BATCH):
            batch = [sets[k][i] for k, i in pairs[s * BATCH:(s + 1) * BATCH]]
            assert all(b.shape == SHAPE for b in batch)
            time.sleep(COMPUTE_S)
    for f in files:
        f.close()


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
