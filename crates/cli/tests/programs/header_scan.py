"""A loader that scans every file's header before training, as aspect-ratio bucketing does.

DATA holds 48 npy files (uint8), half of 16 KiB and half of 32 KiB. Before training the program
opens each file once and reads its 128-byte npy header (unbuffered) to learn its shape, and
groups the files by shape; then 2 epochs of batches of 4 files of one shape (shuffled within
and across the groups each epoch), each file np.load-ed, 10 ms of compute per step.

Usage: header_scan.py DATA [--make]
"""
import ast
import os
import random
import sys
import time

import numpy as np

FILES, BATCH, EPOCHS, COMPUTE_S = 48, 4, 2, 0.010


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        size = (16 << 10) if i % 2 == 0 else (32 << 10)
        x = np.random.default_rng(i).integers(0, 255, size, dtype=np.uint8)
        np.save(os.path.join(data, f"img_{i:03d}.npy"), x)


def shape_of(path):
    with open(path, "rb", buffering=0) as f:
        header = f.read(128)
    start = header.index(b"{")
    return ast.literal_eval(header[start:header.rindex(b"}") + 1].decode())["shape"]


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy"))
    groups = {}
    for name in names:
        groups.setdefault(shape_of(name), []).append(name)
    rng = random.Random(3)
    for _ in range(EPOCHS):
        batches = []
        for key in sorted(groups):
            files = groups[key][:]
            rng.shuffle(files)
            batches += [files[i:i + BATCH] for i in range(0, len(files), BATCH)]
        rng.shuffle(batches)
        for batch in batches:
            arrays = [np.load(f) for f in batch]
            assert len({a.shape for a in arrays}) == 1
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    if "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
