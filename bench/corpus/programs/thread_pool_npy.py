"""A thread pool of np.load readers over npy files of lognormal sizes (bug report case a).

Each step takes the next 8 files of a per-epoch shuffle and has a ThreadPoolExecutor of 4
threads np.load them (pool.map: every thread loads about 2 of the 8), then sleeps 20 ms as the
compute. A small metadata file (meta/metadata.json) is opened and parsed every 5 steps
(counting steps over the whole run, from step 0).

Usage: thread_pool_npy.py DATA [--make | --truth]
Fixed by the program: 96 npy files (1-D uint8, 128-byte header), array sizes lognormal
(median 96 KiB, sigma 0.6, clipped to [8 KiB, 1 MiB]), batch 8, 4 reader threads, 3 epochs
of 12 steps, shuffled per epoch, 20 ms of compute per step, no checkpoint, no eval.
Needs numpy only.
"""
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

FILES, BATCH, THREADS, EPOCHS, COMPUTE_S, META_EVERY = 96, 8, 4, 3, 0.020, 5
MEDIAN, SIGMA, LO, HI = 96 << 10, 0.6, 8 << 10, 1 << 20
SEED = 1234


def array_sizes():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(MEDIAN), SIGMA, FILES), LO, HI).astype(np.int64)


def truth(data):
    sizes = array_sizes()
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "thread_pool_npy", "needs": [], "format": "npy", "io_library": "numpy.load",
        "data_layout": "DATA/*.npy", "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA, "clip": [LO, HI],
                        "mean": float(sizes.mean()), "min": int(sizes.min()),
                        "max": int(sizes.max())},
        "file_size": {"header_bytes": 128, "mean": float(np.mean(fsz)) if fsz else None,
                      "min": min(fsz, default=None), "max": max(fsz, default=None),
                      "total": int(sum(fsz))},
        "batch_size": BATCH, "readers": {"kind": "thread", "count": THREADS,
                                         "note": "each batch split over the 4 threads"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": FILES // BATCH,
        "total_steps": EPOCHS * (FILES // BATCH), "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None,
        "side_files": [{"name": "meta/metadata.json", "every_steps": META_EVERY,
                        "reads": len(range(0, EPOCHS * (FILES // BATCH), META_EVERY))}],
        "read_pattern": "whole file per sample via np.load, 4 threads per batch",
    }


def make(data):
    os.makedirs(os.path.join(data, "meta"), exist_ok=True)
    for i, n in enumerate(array_sizes()):
        x = np.random.default_rng(SEED + 1 + i).integers(0, 255, int(n), dtype=np.uint8)
        np.save(os.path.join(data, f"sample_{i:04d}.npy"), x)
    with open(os.path.join(data, "meta", "metadata.json"), "w") as f:
        json.dump({"files": FILES, "classes": 10, "mean": [0.485, 0.456, 0.406],
                   "std": [0.229, 0.224, 0.225], "note": "x" * 120}, f)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy"))
    meta = os.path.join(data, "meta", "metadata.json")
    rng = random.Random(SEED)
    step = 0
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            order = names[:]
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                if step % META_EVERY == 0:
                    with open(meta) as f:
                        json.load(f)
                batch = list(pool.map(np.load, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH and all(b.dtype == np.uint8 for b in batch)
                time.sleep(COMPUTE_S)
                step += 1


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
