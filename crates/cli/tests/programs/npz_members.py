"""A loop over npz files of two arrays each, where a sample is one array: every sample read
opens its file with np.load, reads the zip's directory and the one member it wants, and
closes it, so each file is opened twice per epoch and each opening reads about half of it.

Usage: npz_members.py DATA_DIR [--make]
Fixed by the program: 32 files of two 32 KiB arrays ("a" and "b"), so 64 samples; batch 4;
2 epochs; samples shuffled per epoch; one thread; 20 ms of compute per batch.
"""
import os
import random
import sys
import time

import numpy as np

FILES, ARRAY_BYTES, BATCH, EPOCHS, COMPUTE_S = 32, 32 * 1024, 4, 2, 0.020

data = sys.argv[1]
if "--make" in sys.argv:
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        rng = np.random.default_rng(i)
        np.savez(os.path.join(data, f"pair_{i:04d}.npz"),
                 a=rng.integers(0, 255, ARRAY_BYTES, dtype=np.uint8),
                 b=rng.integers(0, 255, ARRAY_BYTES, dtype=np.uint8))
    sys.exit(0)

names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npz"))
samples = [(f, member) for f in names for member in ("a", "b")]
rng = random.Random(11)
for epoch in range(EPOCHS):
    order = samples[:]
    rng.shuffle(order)
    for step in range(len(order) // BATCH):
        batch = []
        for f, member in order[step * BATCH:(step + 1) * BATCH]:
            with np.load(f) as z:
                batch.append(z[member])
        assert all(b.nbytes == ARRAY_BYTES for b in batch)
        time.sleep(COMPUTE_S)
