"""One pickle file per sample (a dict of a uint8 array and a label), unpickled in the main thread.

96 .pkl files, each a pickled dict {"x": 1-D uint8 array of lognormal size, "y": int label,
"id": int} (pickle protocol 5, array in band). Each epoch shuffles the files (seeded); each
step unpickles the next 6 with pickle.load(open(path, "rb")) (the file object is dropped, and
so closed, as soon as load returns) and sleeps 12 ms. A syscall trace sees, per sample, an
openat, an fstat, an ioctl and an lseek from open(), a 4 KiB buffered read (the pickle header
and the start of the array), one large read of the rest of the array (the unpickler asks the
buffered file for the whole bytes object at once), one short read of the pickle's tail (about
100 B) and a close: the file read whole, front to back, in three reads.

Usage: pickle_samples.py DATA [--make | --truth]
Fixed by the program: 96 files, 1 sample per file, array sizes lognormal (median 48 KiB,
sigma 0.5, clipped to [4 KiB, 512 KiB]), batch 6, main thread only, 2 epochs of 16 steps,
shuffled per epoch, 12 ms compute per step, no checkpoint, no eval. Needs numpy only.
"""
import json
import os
import pickle
import random
import sys
import time

import numpy as np

FILES, BATCH, EPOCHS, COMPUTE_S, CLASSES = 96, 6, 2, 0.012, 10
MEDIAN, SIGMA, LO, HI = 48 << 10, 0.5, 4 << 10, 512 << 10
SEED = 606


def array_sizes():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(MEDIAN), SIGMA, FILES), LO, HI).astype(np.int64)


def truth(data):
    sizes = array_sizes()
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".pkl")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "pickle_samples", "needs": [], "format": "pickle",
        "io_library": "pickle.load (buffered file object)", "data_layout": "DATA/*.pkl",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA, "clip": [LO, HI],
                        "mean": float(sizes.mean()), "min": int(sizes.min()),
                        "max": int(sizes.max())},
        "file_size": {"note": "array + pickle overhead (about 200 B)",
                      "mean": float(np.mean(fsz)) if fsz else None,
                      "min": min(fsz, default=None), "max": max(fsz, default=None),
                      "total": int(sum(fsz))},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": FILES // BATCH,
        "total_steps": EPOCHS * (FILES // BATCH), "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole file per sample via pickle.load, front to back: a 4 KiB read, "
                        "one large read of the rest of the array, a short read of the tail",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    labels = random.Random(SEED + 1)
    for i, n in enumerate(array_sizes()):
        x = np.random.default_rng(SEED + 2 + i).integers(0, 255, int(n), dtype=np.uint8)
        with open(os.path.join(data, f"sample_{i:04d}.pkl"), "wb") as f:
            pickle.dump({"x": x, "y": labels.randrange(CLASSES), "id": i}, f, protocol=5)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".pkl"))
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        for s in range(len(order) // BATCH):
            batch = [pickle.load(open(p, "rb")) for p in order[s * BATCH:(s + 1) * BATCH]]
            assert all(b["x"].dtype == np.uint8 and 0 <= b["y"] < CLASSES for b in batch)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
