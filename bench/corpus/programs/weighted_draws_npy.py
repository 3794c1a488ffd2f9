"""Weighted draws with replacement over npy files (a class-balancing sampler), two threads.

DATA holds 120 npy files, one sample each: a 64 x 64 x 3 float32 array (49152 bytes plus a
128-byte header). The files belong to 3 classes of 60, 40 and 20 files; each epoch draws 96
files with replacement (random.choices), every file weighted by the inverse of its class's
size, as a WeightedRandomSampler balancing the classes does: a rare class's files come
several times in an epoch and a third or so of the common class's not at all. Each step hands
its 8 files to a ThreadPoolExecutor of 2 threads (np.load, pool.map), then sleeps 12 ms.

Usage: weighted_draws_npy.py DATA [--make | --truth]
Fixed by the program: 120 npy files, 96 draws per epoch with replacement, batch 8, 2 reader
threads (no read-ahead), 2 epochs of 12 steps, 12 ms of compute per step, no checkpoint, no
eval. Needs numpy only.
"""
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CLASSES, SHAPE, DRAWS, BATCH, THREADS, EPOCHS, COMPUTE_S = (60, 40, 20), (64, 64, 3), 96, 8, 2, \
    2, 0.012
SEED = 4242


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy")) \
        if os.path.isdir(data) else []


def weights():
    """One weight per file (files in name order, class by class): 1 / the class's size."""
    return [1.0 / size for size in CLASSES for _ in range(size)]


def draws(names):
    rng = random.Random(SEED)
    return [rng.choices(names, weights(), k=DRAWS) for _ in range(EPOCHS)]


def truth(data):
    names = file_names(data)
    fsz = [os.path.getsize(f) for f in names]
    drawn = draws(names) if names else []
    return {
        "program": "weighted_draws_npy", "needs": [], "format": "npy", "io_library": "numpy.load",
        "data_layout": "DATA/c{class}_{i}.npy", "num_files": sum(CLASSES), "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": 4 * SHAPE[0] * SHAPE[1] * SHAPE[2]},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None, "header_bytes": 128},
        "batch_size": BATCH, "readers": {"kind": "thread", "count": THREADS,
                                         "note": "each batch split over the 2 threads"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": DRAWS // BATCH,
        "total_steps": EPOCHS * (DRAWS // BATCH), "compute_s_per_step": COMPUTE_S,
        "shuffle": "weighted draws with replacement, per epoch",
        "distinct_files_per_epoch": [len(set(d)) for d in drawn],
        "distinct_files": len(set(f for d in drawn for f in d)),
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole file per draw via np.load, 2 threads per batch",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    i = 0
    for c, size in enumerate(CLASSES):
        for k in range(size):
            x = np.random.default_rng(SEED + i).random(SHAPE, dtype=np.float32)
            np.save(os.path.join(data, f"c{c}_{k:03d}.npy"), x)
            i += 1


def train(data):
    names = file_names(data)
    with ThreadPoolExecutor(THREADS) as pool:
        for order in draws(names):
            for s in range(len(order) // BATCH):
                batch = list(pool.map(np.load, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH and all(b.shape == SHAPE for b in batch)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
