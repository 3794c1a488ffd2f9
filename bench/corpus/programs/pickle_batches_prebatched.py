"""Pre-batched pickle files, one per step, loaded 2 steps ahead by a 2-thread pool.

40 pickle files (DATA/batch_0000.pkl .. batch_0039.pkl), each one pre-made batch of 16
samples written with pickle.dump (default protocol): a dict of numpy arrays, "x" (uint8 16 x
3 x 64 x 64, 196608 bytes), "y" (int64 16) and "idx" (int64 16), 197145 bytes a file. Each
epoch shuffles the file order (one random.Random for the run). A ThreadPoolExecutor of 2
threads loads files with pickle.load(open(path, "rb")) (no with-block: the file object is
dropped, and so closed, as soon as the load returns); at the start of each epoch the first 2
files are submitted, and each step takes the oldest pending result, submits the file 2
ahead, converts x to float32 and sleeps 12 ms as compute, so the next 2 files load while the
step computes. Nothing is submitted across an epoch boundary (the first step of an epoch
waits for its load). 40 steps an epoch, one file a step.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): the main
thread opens DATA once (O_DIRECTORY, getdents) and reads no data. The 2 pool threads are
created (clone3) by the first two submits and every data read is on one of them, the two
alternating about evenly (about 60 files each over the run). Per file: openat(O_RDONLY|
O_CLOEXEC), newfstatat(fd, "", AT_EMPTY_PATH), (ioctl TCGETS fails), lseek(0, SEEK_CUR), a
buffered read of 4096 bytes at offset 0, one read of 192672 bytes (the rest of the x array,
straight into it), and a last buffered read(4096) that returns the 377-byte tail (y, idx and
the STOP opcode); close, on the same thread. No read at end of file (pickle stops at STOP),
so 3 reads and exactly the file's 197145 bytes per load, front to back. 120 loads (every
file once per epoch), 360 reads, 23.7 MB. At each epoch's start 2 loads start together; then
one load starts per step, overlapping the 12 ms compute. No writes.

Usage: pickle_batches_prebatched.py DATA [--make | --truth]
Fixed by the program: 40 files x 1 pre-made batch of 16 samples, 2 reader threads, 2 files
of prefetch, 3 epochs of 40 steps, 12 ms compute per step, file order shuffled per epoch, no
checkpoint, no eval. Needs numpy only.
"""
import json
import os
import pickle
import random
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

FILES, BATCH, SHAPE, THREADS, AHEAD, EPOCHS, COMPUTE_S = 40, 16, (3, 64, 64), 2, 2, 3, 0.012
SEED = 2024


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".pkl")) \
        if os.path.isdir(data) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    x_bytes = BATCH * SHAPE[0] * SHAPE[1] * SHAPE[2]
    return {
        "program": "pickle_batches_prebatched", "needs": [], "format": "pickle",
        "io_library": "pickle.load(open(path, 'rb')) in a ThreadPoolExecutor",
        "data_layout": "DATA/batch_NNNN.pkl, each a dict {'x': uint8 16x3x64x64, "
                       "'y': int64 16, 'idx': int64 16}",
        "num_files": FILES, "samples_per_file": BATCH,
        "sample_size": {"dist": "fixed", "bytes": x_bytes // BATCH + 16,
                        "note": "a file is one pre-made batch of 16"},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None, "total": sum(fsz)},
        "batch_size": BATCH, "files_per_step": 1,
        "readers": {"kind": "thread", "count": THREADS,
                    "note": "each file loaded whole by one pool thread"},
        "prefetch": {"files_ahead": AHEAD, "note": "the next 2 files load during compute"},
        "epochs": EPOCHS, "steps_per_epoch": FILES, "total_steps": EPOCHS * FILES,
        "compute_s_per_step": COMPUTE_S, "shuffle": "files, per epoch", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "one whole file per step (3 reads, sequential) on a pool thread, "
                        "2 files ahead of the step, overlapping compute",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        rng = np.random.default_rng(SEED + i)
        batch = {"x": rng.integers(0, 255, (BATCH,) + SHAPE, dtype=np.uint8),
                 "y": rng.integers(0, 10, BATCH, dtype=np.int64),
                 "idx": np.arange(i * BATCH, (i + 1) * BATCH, dtype=np.int64)}
        with open(os.path.join(data, f"batch_{i:04d}.pkl"), "wb") as f:
            pickle.dump(batch, f)


def load(path):
    return pickle.load(open(path, "rb"))


def train(data):
    names = file_names(data)
    rng = random.Random(SEED)
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            order = names[:]
            rng.shuffle(order)
            pending = deque(pool.submit(load, p) for p in order[:AHEAD])
            for s in range(len(order)):
                batch = pending.popleft().result()
                if s + AHEAD < len(order):
                    pending.append(pool.submit(load, order[s + AHEAD]))
                x = batch["x"].astype(np.float32) / 255.0
                assert x.shape == (BATCH,) + SHAPE and batch["y"].shape == (BATCH,)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
