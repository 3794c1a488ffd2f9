"""A thread pool of readers: each batch's files are read by 4 threads at once, then a sleep as
the compute.

Usage: thread_pool.py DATA_DIR [--make]
Fixed by the program: 128 files of 128 KiB, batch 8, 4 reader threads, 2 epochs, files shuffled
per epoch, 40 ms of compute per batch.
"""
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

FILES, FILE_BYTES, BATCH, THREADS, EPOCHS, COMPUTE_S = 128, 128 << 10, 8, 4, 2, 0.040

data = sys.argv[1]
if "--make" in sys.argv:
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        with open(os.path.join(data, f"img_{i:04d}.bin"), "wb") as f:
            f.write(os.urandom(FILE_BYTES))
    sys.exit(0)


def read_whole(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".bin"))
rng = random.Random(3)
with ThreadPoolExecutor(THREADS) as pool:
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        for step in range(len(order) // BATCH):
            got = list(pool.map(read_whole, order[step * BATCH:(step + 1) * BATCH]))
            assert all(len(g) == FILE_BYTES for g in got)
            time.sleep(COMPUTE_S)
