"""Gzip-compressed npy files (one sample each, variable sizes) loaded by a pool of 2 threads.

120 files DATA/sample_NNNN.npy.gz, each a gzip stream (level 6, mtime 0) around one npy file
holding a 1-D int16 array: a random walk (cumulative sum of steps in [-3, 3]), so it
compresses to about 40% of its raw size. The element counts are lognormal (median 64 Ki
elements = 128 KiB raw, sigma 0.5, clipped to [8 Ki, 512 Ki] elements), so both the raw and
the compressed sizes vary from file to file. Each step takes the next 6 files of a per-epoch
shuffle and a ThreadPoolExecutor of 2 threads (created once) loads them with pool.map: each
load is gzip.open(path) + np.load(f) (np.load reads the npy header, then the array, through
the GzipFile, which decompresses as it goes), then the main thread sleeps 12 ms as compute.

What a syscall trace sees: every data read on one of the 2 pool threads, none on the main
thread. Per sample file: openat, fstat, ioctl(TCGETS) (fails: not a tty), lseek(0,
SEEK_CUR), then sequential read()s of the compressed bytes in st_blksize pieces (4 KiB on
most Linux file systems: gzip.open wraps the file in a default io.BufferedReader), a short
last read, two empty reads and a close. The bytes read are the compressed file size, not the
array size; the file is read once, front to back (np.load's seek back over its magic string
stays inside the buffer). No writes.

Usage: gzip_npy_shards.py DATA [--make | --truth]
Fixed by the program: 120 files, 1 sample per file, batch 6, 2 reader threads, no read
ahead, 2 epochs of 20 steps, shuffled per epoch, 12 ms of compute per step, no checkpoint,
no eval, no side files. Needs numpy only (gzip is stdlib).
"""
import gzip
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

FILES, BATCH, THREADS, EPOCHS, COMPUTE_S = 120, 6, 2, 2, 0.012
MEDIAN, SIGMA, LO, HI = 64 << 10, 0.5, 8 << 10, 512 << 10  # in int16 elements
LEVEL, SEED = 6, 4242


def element_counts():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(MEDIAN), SIGMA, FILES), LO, HI).astype(np.int64)


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy.gz")) \
        if os.path.isdir(data) else []


def truth(data):
    raw = element_counts() * 2
    fsz = [os.path.getsize(f) for f in file_names(data)]
    return {
        "program": "gzip_npy_shards", "needs": [], "format": "npy.gz (gzip-compressed npy)",
        "io_library": "gzip.open + numpy.load in a ThreadPoolExecutor",
        "data_layout": "DATA/*.npy.gz", "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "lognormal (decompressed array bytes)", "median": MEDIAN * 2,
                        "sigma": SIGMA, "clip": [LO * 2, HI * 2], "dtype": "int16",
                        "npy_header_bytes": 128, "mean": float(raw.mean()),
                        "min": int(raw.min()), "max": int(raw.max()), "total": int(raw.sum())},
        "file_size": {"note": "compressed bytes on disk (what is read)",
                      "mean": float(np.mean(fsz)) if fsz else None,
                      "min": min(fsz, default=None), "max": max(fsz, default=None),
                      "total": int(sum(fsz)),
                      "ratio_to_raw": sum(fsz) / float((raw + 128).sum()) if fsz else None},
        "batch_size": BATCH, "readers": {"kind": "thread", "count": THREADS,
                                         "framework": "concurrent.futures.ThreadPoolExecutor",
                                         "note": "each batch of 6 split over the 2 threads"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": FILES // BATCH,
        "total_steps": EPOCHS * (FILES // BATCH), "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole compressed file read sequentially in st_blksize (4 KiB) reads "
                        "per sample, on the 2 pool threads; decompression CPU between reads",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i, n in enumerate(element_counts()):
        steps = np.random.default_rng(SEED + 1 + i).integers(-3, 4, int(n))
        x = np.cumsum(steps).astype(np.int16)
        path = os.path.join(data, f"sample_{i:04d}.npy.gz")
        with gzip.GzipFile(path, "wb", compresslevel=LEVEL, mtime=0) as f:
            np.save(f, x)


def load(path):
    with gzip.open(path, "rb") as f:
        return np.load(f)


def train(data):
    names = file_names(data)
    rng = random.Random(SEED)
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            order = names[:]
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                batch = list(pool.map(load, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH and all(b.dtype == np.int16 for b in batch)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
