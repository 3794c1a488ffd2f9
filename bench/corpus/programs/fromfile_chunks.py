"""Raw chunk files of a zarr-like array, read with np.fromfile by a multiprocessing.Pool's imap.

DATA/arr holds a 2048 x 4096 uint8 array cut into an 8 x 8 grid of 256 x 512 chunks, one raw
file per chunk named "row.col" (DATA/arr/0.0 ... DATA/arr/7.7, 128 KiB each, written with
ndarray.tofile, no compression), plus DATA/arr/.zarray (json: shape, chunks, dtype) which the
main process reads once before training to list the chunks. A Pool of 2 processes (fork
start method, created once) runs pool.imap(read_chunk, order, chunksize=1) over each epoch's
seeded shuffle of all 64 chunks; read_chunk is np.fromfile(path, dtype=np.uint8). The main
process takes 4 chunks per step from the imap iterator and sleeps 18 ms. imap has no back
pressure: the workers read the whole epoch's chunks as fast as they can and the results wait
in the parent, so the file reads of an epoch come in a burst at its start, ahead of the steps.
A syscall trace sees, per chunk in a worker, an openat, fstat, ioctl and lseek from Python's
open(), then np.fromfile duplicating the descriptor (fcntl F_DUPFD_CLOEXEC) for a C stdio
stream: on the duplicate, fstats and lseeks (to the end and back, sizing the file), one
128 KiB read straight into the array and a close; then lseeks and a close on the original
descriptor. The data read is on a descriptor that no openat returned. Each chunk then goes to
the parent over a pipe (pickled).

Usage: fromfile_chunks.py DATA [--make | --truth]
Fixed by the program: 64 chunk files of 128 KiB, 1 sample (chunk) per file, batch 4, 2 reader
processes (imap, chunksize 1), 2 epochs of 16 steps, 18 ms compute per step, chunks shuffled
per epoch, no checkpoint, no eval. Needs numpy only.
"""
import json
import multiprocessing as mp
import os
import random
import sys
import time

import numpy as np

GRID, CHUNK, BATCH, PROCS, EPOCHS, COMPUTE_S = 8, (256, 512), 4, 2, 2, 0.018
CHUNK_BYTES = CHUNK[0] * CHUNK[1]
SEED = 2718


def truth(data):
    arr = os.path.join(data, "arr")
    files = [os.path.join(arr, n) for n in os.listdir(arr) if not n.startswith(".")] \
        if os.path.isdir(arr) else []
    fsz = sorted({os.path.getsize(f) for f in files})
    return {
        "program": "fromfile_chunks", "needs": [], "format": "raw chunks (zarr-like)",
        "io_library": "numpy.fromfile in multiprocessing.Pool workers (imap)",
        "data_layout": "DATA/arr/ROW.COL (8 x 8 chunk files), DATA/arr/.zarray",
        "num_files": GRID * GRID, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": CHUNK_BYTES},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if len(fsz) == 1 else fsz or None},
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": PROCS, "framework": "multiprocessing.Pool",
                    "note": "imap, chunksize 1, fork; no back pressure (reads run ahead)"},
        "prefetch": {"batches_in_flight": "unbounded",
                     "note": "imap reads up to a whole epoch ahead"}, "epochs": EPOCHS,
        "steps_per_epoch": GRID * GRID // BATCH, "total_steps": EPOCHS * GRID * GRID // BATCH,
        "compute_s_per_step": COMPUTE_S, "shuffle": "chunks, per epoch", "eval": None,
        "checkpoint": None,
        "side_files": [{"name": "arr/.zarray", "reads": 1, "when": "before training"}],
        "read_pattern": "whole chunk file in one 128 KiB read via np.fromfile; each epoch's "
                        "reads bunched at its start",
    }


def make(data):
    arr = os.path.join(data, "arr")
    os.makedirs(arr, exist_ok=True)
    with open(os.path.join(arr, ".zarray"), "w") as f:
        json.dump({"zarr_format": 2, "shape": [GRID * CHUNK[0], GRID * CHUNK[1]],
                   "chunks": list(CHUNK), "dtype": "|u1", "compressor": None, "order": "C",
                   "fill_value": 0, "filters": None}, f)
    for i in range(GRID):
        for j in range(GRID):
            x = np.random.default_rng(SEED + GRID * i + j).integers(0, 255, CHUNK, np.uint8)
            x.tofile(os.path.join(arr, f"{i}.{j}"))


def read_chunk(path):
    return np.fromfile(path, dtype=np.uint8)


def train(data):
    arr = os.path.join(data, "arr")
    with open(os.path.join(arr, ".zarray")) as f:
        meta = json.load(f)
    rows, cols = (s // c for s, c in zip(meta["shape"], meta["chunks"]))
    names = [os.path.join(arr, f"{i}.{j}") for i in range(rows) for j in range(cols)]
    rng = random.Random(SEED)
    with mp.get_context("fork").Pool(PROCS) as pool:
        for epoch in range(EPOCHS):
            order = names[:]
            rng.shuffle(order)
            it = pool.imap(read_chunk, order, chunksize=1)
            for s in range(len(order) // BATCH):
                batch = [next(it) for _ in range(BATCH)]
                assert all(b.shape == (CHUNK_BYTES,) for b in batch)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
