"""Many small CSV time series, one per sample, parsed with csv.reader by a 3-thread pool.

DATA/series/seq_NNNN.csv: 300 CSV files, each a header line (t,f0..f9,target) and 20 to 80
rows (uniform, seeded) of 12 numeric columns (a step index, 10 random-walk features and a
target, 5 decimals), so the files are 1967 to 8080 bytes (mean about 4.8 KB, 1.44 MB in
all). The folder is listed once at start (sorted). Each epoch shuffles the list (one
random.Random for the run) and cuts batches of 12 (300 / 12 = 25 steps, no partial batch); a
ThreadPoolExecutor of 3 threads, created once, maps a loader over the batch (pool.map: with
open(path, newline="") as f, csv.reader, skip the header, float() every field, to a float32
array), so the 3 threads share each batch; then the main thread sleeps 8 ms as compute.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): at
start, on the main thread, openat(O_DIRECTORY) of DATA/series (getdents). Every CSV read is
on one of the 3 pool threads (none on the main thread), the threads created (clone3) during
the first step and each taking about a third of each batch (189 to 212 files each over the
run). Per file (text-mode open): openat(O_RDONLY|O_CLOEXEC), newfstatat(fd, "",
AT_EMPTY_PATH), (ioctl TCGETS fails), lseek(0, SEEK_CUR), one read(8192) that returns the
whole file (every file is under 8 KiB) and one read(8192) that returns 0 at end of file,
close. So 2 reads per file, the whole file once, front to back. 12 opens in a burst at each
step's start, then 8 ms with no I/O; 600 file reads in all (every file once per epoch), 1200
reads, 2.89 MB. No writes.

Usage: csv_small_files_threads.py DATA [--make | --truth]
Fixed by the program: 300 CSV files, 1 sample per file, batch 12, 3 reader threads, 2 epochs
of 25 steps, 8 ms compute per step, shuffled per epoch, no checkpoint, no eval. Needs numpy
only.
"""
import csv
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

FILES, BATCH, THREADS, EPOCHS, COMPUTE_S = 300, 12, 3, 2, 0.008
MIN_ROWS, MAX_ROWS, FEATURES = 20, 80, 10
SEED = 1187


def row_counts():
    rng = np.random.default_rng(SEED)
    return rng.integers(MIN_ROWS, MAX_ROWS + 1, FILES)


def file_names(data):
    d = os.path.join(data, "series")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".csv")) \
        if os.path.isdir(d) else []


def truth(data):
    rows = row_counts()
    fsz = np.array([os.path.getsize(f) for f in file_names(data)] or [0])
    steps = FILES // BATCH
    return {
        "program": "csv_small_files_threads", "needs": [], "format": "csv",
        "io_library": "csv.reader over open(path, newline='') in a ThreadPoolExecutor",
        "data_layout": "DATA/series/seq_NNNN.csv (header t,f0..f9,target + 20-80 rows)",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "rows uniform 20..80, 12 numeric columns",
                        "rows_mean": float(rows.mean()), "mean": float(fsz.mean()),
                        "min": int(fsz.min()), "max": int(fsz.max()),
                        "median": float(np.median(fsz)), "total": int(fsz.sum())},
        "file_size": "as sample_size", "batch_size": BATCH,
        "readers": {"kind": "thread", "count": THREADS,
                    "note": "pool.map over each batch of 12: the 3 threads share it"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": steps,
        "total_steps": EPOCHS * steps, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole small file per sample (one 8 KiB read + EOF read), 3 threads "
                        "per batch, no overlap with compute",
    }


def make(data):
    d = os.path.join(data, "series")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    for i, n in enumerate(row_counts()):
        feats = rng.normal(0, 1, (n, FEATURES)).cumsum(axis=0)
        target = feats[:, :3].mean(axis=1) + rng.normal(0, 0.1, n)
        with open(os.path.join(d, f"seq_{i:04d}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t"] + [f"f{j}" for j in range(FEATURES)] + ["target"])
            for t in range(n):
                w.writerow([t] + [f"{v:.5f}" for v in feats[t]] + [f"{target[t]:.5f}"])


def load(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        next(r)
        rows = [[float(v) for v in row] for row in r]
    a = np.asarray(rows, dtype=np.float32)
    return a[:, 1:-1], a[:, -1]


def train(data):
    names = file_names(data)
    rng = random.Random(SEED)
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            order = names[:]
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                batch = list(pool.map(load, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH and all(x.shape[1] == FEATURES for x, _ in batch)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
