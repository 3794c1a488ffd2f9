"""Per-sample reads of chunked HDF5 datasets, files open for the whole run (bug report case c).

4 HDF5 files each hold one dataset "x" of 24 samples (24 x 128 x 256 uint8), chunked one
sample per chunk, uncompressed. The files are opened once (h5py.File, chunk cache off:
rdcc_nbytes=0, so that every epoch reads from the file; with h5py's default 1 MiB cache the
768 KiB of a file would be cached after the first epoch) before training; each epoch visits
all 96 (file, index) pairs in a fresh shuffle and reads one sample at a time (ds[i]: one
chunk, one pread of 32 KiB), 4 samples per step, then sleeps 25 ms.

Usage: h5_chunked_samples.py DATA [--make | --truth]
Fixed by the program: 4 files x 24 samples of 32 KiB, chunk = 1 sample, batch 4, main thread
only, 2 epochs of 24 steps, 25 ms compute per step. Needs h5py and numpy.
"""
import json
import os
import random
import sys
import time

import h5py
import numpy as np

FILES, PER_FILE, SHAPE, BATCH, EPOCHS, COMPUTE_S = 4, 24, (128, 256), 4, 2, 0.025
SAMPLE_BYTES = SHAPE[0] * SHAPE[1]
SEED = 31


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "h5_chunked_samples", "needs": [], "format": "hdf5", "io_library": "h5py",
        "data_layout": "DATA/*.h5, dataset 'x' chunked (1, 128, 256)",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None},
        "hdf5": {"layout": "chunked", "chunk_samples": 1, "compression": None,
                 "chunk_cache": "off (rdcc_nbytes=0)"},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": FILES * PER_FILE // BATCH,
        "total_steps": EPOCHS * FILES * PER_FILE // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "samples across files, per epoch", "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "files opened once; one chunk (one sample) read at a time over the "
                        "whole run",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        x = np.random.default_rng(SEED + i).integers(0, 255, (PER_FILE,) + SHAPE, dtype=np.uint8)
        with h5py.File(os.path.join(data, f"part_{i}.h5"), "w") as f:
            f.create_dataset("x", data=x, chunks=(1,) + SHAPE)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5"))
    files = [h5py.File(n, "r", rdcc_nbytes=0) for n in names]
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
