"""A per-sample np.load loop over npz files, with a sleep per batch as the compute.

Usage: npz_loop.py DATA_DIR [--make]
Fixed by the program: 64 files of one 64 KiB sample each, batch 4, 2 epochs, one thread,
files shuffled per epoch, 40 ms of compute per batch.
"""
import os
import random
import sys
import time

import numpy as np

FILES, SAMPLE_BYTES, BATCH, EPOCHS, COMPUTE_S = 64, 64 * 1024, 4, 2, 0.040

data = sys.argv[1]
if "--make" in sys.argv:
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        x = np.random.default_rng(i).integers(0, 255, SAMPLE_BYTES, dtype=np.uint8)
        np.savez(os.path.join(data, f"sample_{i:04d}.npz"), x=x)
    sys.exit(0)

names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npz"))
rng = random.Random(7)
for epoch in range(EPOCHS):
    order = names[:]
    rng.shuffle(order)
    for step in range(len(order) // BATCH):
        batch = [np.load(f)["x"] for f in order[step * BATCH:(step + 1) * BATCH]]
        assert all(b.nbytes == SAMPLE_BYTES for b in batch)
        time.sleep(COMPUTE_S)
