"""One large record "database" file read with os.pread by a 3-thread pool, via a .npy index.

DATA/records.db packs 600 records of lognormal length (median 24 KiB, sigma 0.8, clipped to
[1 KiB, 384 KiB]) back to back, no headers; DATA/records.idx.npy is an int64 array of shape
(600, 2), each row a record's (offset, length). Before training the index is np.load-ed once
and the database opened once with os.open. Each epoch shuffles the 600 record numbers (one
random.Random for the run) and each step hands the next 12 to a ThreadPoolExecutor of 3
threads (pool.map of a fetch that does one os.pread of exactly the record's length at its
offset, so each thread reads about 4 records of the batch), then sleeps 15 ms as compute.

What a syscall trace sees (strace -f): at start, on the main thread, the index load
(np.load of a path): openat, fstat, ioctl(TCGETS) (fails), lseek, a buffered 4096-byte read,
then numpy's fromfile on a dup of the descriptor (fcntl F_DUPFD_CLOEXEC, lseeks, fstat, a
128-byte read of the header, then 4096, 4096 and 1536 bytes from offset 0 again), closes:
13952 bytes read for a 9728-byte file. Then one openat of records.db (O_RDONLY|O_CLOEXEC),
no fstat or lseek, kept open to the end. The 3 pool threads are created (clone3) during the
first step, as pool.map submits to an idle pool. Every data read is a pread64 on that one
descriptor, of exactly one record's length at its offset (1773 to 363489 bytes, mean about
33 KiB), from the 3 threads only (none from the main thread): 12 preads per step at random
offsets, the threads pulling from one queue so a thread does 2 to 7 of them, mostly 3 to 5
(about 440-470 each over the run), then 15 ms with no I/O. 1200 preads in all, every record
read once per epoch, 2 x 20073055 bytes. No writes.

Usage: record_db_pread.py DATA [--make | --truth]
Fixed by the program: 1 database file of 600 records + 1 index file, batch 12, 3 reader
threads, 2 epochs of 50 steps, 15 ms compute per step, records shuffled per epoch, no
checkpoint, no eval. Needs numpy only.
"""
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

RECORDS, BATCH, THREADS, EPOCHS, COMPUTE_S = 600, 12, 3, 2, 0.015
MEDIAN, SIGMA, LO, HI = 24 << 10, 0.8, 1 << 10, 384 << 10
SEED = 6060


def lengths():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(MEDIAN), SIGMA, RECORDS), LO, HI).astype(np.int64)


def truth(data):
    n = lengths()
    db, idx = os.path.join(data, "records.db"), os.path.join(data, "records.idx.npy")
    steps = RECORDS // BATCH
    return {
        "program": "record_db_pread", "needs": [], "format": "raw records + npy index",
        "io_library": "os.pread in a ThreadPoolExecutor; numpy.load for the index",
        "data_layout": "DATA/records.db, DATA/records.idx.npy", "num_files": 1,
        "samples_per_file": RECORDS,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA, "clip": [LO, HI],
                        "mean": float(n.mean()), "min": int(n.min()), "max": int(n.max()),
                        "median_actual": int(np.median(n))},
        "file_size": {"bytes": os.path.getsize(db) if os.path.exists(db) else int(n.sum())},
        "batch_size": BATCH, "readers": {"kind": "thread", "count": THREADS,
                                         "note": "each batch split over the 3 threads"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": steps,
        "total_steps": EPOCHS * steps, "compute_s_per_step": COMPUTE_S,
        "shuffle": "records, per epoch", "eval": None, "checkpoint": None,
        "side_files": [{"name": "records.idx.npy", "reads": 1, "when": "before training",
                        "bytes": os.path.getsize(idx) if os.path.exists(idx)
                        else RECORDS * 16 + 128}],
        "read_pattern": "one pread of exactly one record per sample at a random offset of one "
                        "file kept open, 3 threads per batch, no overlap with compute",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    n = lengths()
    rng = np.random.default_rng(SEED + 1)
    index = np.zeros((RECORDS, 2), dtype=np.int64)
    off = 0
    with open(os.path.join(data, "records.db"), "wb") as out:
        for i, k in enumerate(n):
            out.write(rng.integers(0, 255, int(k), dtype=np.uint8).tobytes())
            index[i] = off, k
            off += int(k)
    np.save(os.path.join(data, "records.idx.npy"), index)


def train(data):
    index = np.load(os.path.join(data, "records.idx.npy"))
    fd = os.open(os.path.join(data, "records.db"), os.O_RDONLY)

    def fetch(i):
        off, k = int(index[i, 0]), int(index[i, 1])
        b = os.pread(fd, k, off)
        assert len(b) == k
        return b

    rng = random.Random(SEED)
    order = list(range(len(index)))
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                batch = list(pool.map(fetch, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH
                time.sleep(COMPUTE_S)
    os.close(fd)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
