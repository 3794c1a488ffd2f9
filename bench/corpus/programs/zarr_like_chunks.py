"""Windows of a chunked 3-D array in a nested directory store, read with np.fromfile + LRU cache.

DATA/arr holds a 64 x 128 x 128 uint8 array cut into 8 x 64 x 64 chunks (a grid of 8 x 2 x
2 = 32 chunks), one raw file per chunk at DATA/arr/i/j/k.bin (32768 bytes, C order, written
with ndarray.tofile, no header, no compression), plus DATA/arr/.zarray (json: shape, chunks,
dtype) which is read once before training. A sample is a 4 x 64 x 64 window: a start z
drawn uniformly from 0..60 along the first axis and one of the 4 (j, k) chunk columns, so it
lies in chunk z // 8 and, when z % 8 > 4, also in the next one along the first axis (3 in 8
windows span 2 chunks). Chunks come through a per-process LRU cache of 4 chunks (an
OrderedDict); a miss is np.fromfile(path, dtype=np.uint8) of the whole chunk file. One
random.Random drives the windows of the whole run; main thread only, batch 4, then 12 ms of
sleep as compute; 3 epochs of 16 steps (an epoch is just 64 fresh random windows).

What a syscall trace sees, all on the main thread: at start the .zarray (openat, fstat,
ioctl, lseeks, one read of 117 bytes returning 116, an empty read, close). Per chunk load
(np.fromfile of a path): openat, fstat, ioctl(TCGETS) (fails), lseek from Python's open(),
then numpy duplicates the descriptor (fcntl F_DUPFD_CLOEXEC, F_GETFL) and on the duplicate
runs fstats and lseeks (to the end and back, sizing the file) and one read of 32768 bytes
straight into the array, close; then two lseeks and a close on the original descriptor:
the data read is on a descriptor that no openat returned. Only cache misses touch the
files: with 4 of the 32 chunks cached and windows spread uniformly, the cache hits only
about 1 access in 8: 263 chunk accesses (192 windows, 71 of them spanning 2 chunks) make
230 loads over the run (every chunk loaded 3 to 11 times), 2 to 8 loads per step (mostly
4 to 6), all in a burst at the step's start, then 12 ms with no I/O. 7536640 bytes of
data read in all; no pread, no writes.

Usage: zarr_like_chunks.py DATA [--make | --truth]
Fixed by the program: 32 chunk files of 32 KiB + .zarray, samples = random 4 x 64 x 64 windows
(1 or 2 chunks each), LRU cache of 4 chunks, batch 4, main thread only, 3 epochs of 16
steps, 12 ms compute per step, no checkpoint, no eval. Needs numpy only.
"""
import json
import os
import random
import sys
import time
from collections import OrderedDict

import numpy as np

SHAPE, CHUNKS, WINDOW, BATCH, EPOCHS, STEPS, COMPUTE_S, CACHE = \
    (64, 128, 128), (8, 64, 64), 4, 4, 3, 16, 0.012, 4
GRID = tuple(s // c for s, c in zip(SHAPE, CHUNKS))
CHUNK_BYTES = CHUNKS[0] * CHUNKS[1] * CHUNKS[2]
SEED = 3141


def windows():
    """Every (z, j, k) window of the run, in order."""
    rng = random.Random(SEED)
    return [(rng.randrange(0, SHAPE[0] - WINDOW + 1), rng.randrange(GRID[1]),
             rng.randrange(GRID[2])) for _ in range(EPOCHS * STEPS * BATCH)]


def chunks_of(z, j, k):
    return [(i, j, k) for i in range(z // CHUNKS[0], (z + WINDOW - 1) // CHUNKS[0] + 1)]


def simulate():
    """Chunk loads (cache misses) of the run, and windows spanning two chunks."""
    cache, loads, spans = OrderedDict(), [], 0
    for w in windows():
        cs = chunks_of(*w)
        spans += len(cs) == 2
        for c in cs:
            if c in cache:
                cache.move_to_end(c)
            else:
                loads.append(c)
                cache[c] = True
                if len(cache) > CACHE:
                    cache.popitem(last=False)
    return loads, spans


def truth(data):
    loads, spans = simulate()
    steps = EPOCHS * STEPS
    return {
        "program": "zarr_like_chunks", "needs": [], "format": "raw chunk files (zarr-like "
        "nested directory store)", "io_library": "numpy.fromfile, with an LRU chunk cache",
        "data_layout": "DATA/arr/i/j/k.bin (grid 8 x 2 x 2), DATA/arr/.zarray",
        "num_files": GRID[0] * GRID[1] * GRID[2], "samples_per_file": CHUNKS[0] // WINDOW,
        "samples_per_file_note": "a chunk holds 8 / 4 = 2 non-overlapping windows along the "
                                 "first axis; windows are drawn at random positions",
        "array": {"shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "uint8"},
        "sample_size": {"dist": "fixed", "bytes": WINDOW * CHUNKS[1] * CHUNKS[2],
                        "shape": [WINDOW, CHUNKS[1], CHUNKS[2]],
                        "chunks_per_sample": "1, or 2 when z % 8 > 4",
                        "windows_spanning_2_chunks": spans},
        "file_size": {"dist": "fixed", "bytes": CHUNK_BYTES},
        "cache": {"kind": "LRU, per process", "chunks": CACHE, "chunk_loads": len(loads),
                  "chunk_accesses": EPOCHS * STEPS * BATCH + spans,
                  "bytes_loaded": len(loads) * CHUNK_BYTES,
                  "distinct_chunks_loaded": len(set(loads))},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "random window positions (with replacement), one RNG for the run",
        "eval": None, "checkpoint": None,
        "side_files": [{"name": "arr/.zarray", "reads": 1, "when": "before training"}],
        "read_pattern": "whole 32 KiB chunk files via np.fromfile on cache misses, 2 to 8 "
                        "per step in this run (mostly 4 to 6), main thread",
    }


def make(data):
    root = os.path.join(data, "arr")
    arr = np.random.default_rng(SEED).integers(0, 255, SHAPE, dtype=np.uint8)
    for i in range(GRID[0]):
        for j in range(GRID[1]):
            os.makedirs(os.path.join(root, str(i), str(j)), exist_ok=True)
            for k in range(GRID[2]):
                c = arr[i * CHUNKS[0]:(i + 1) * CHUNKS[0], j * CHUNKS[1]:(j + 1) * CHUNKS[1],
                        k * CHUNKS[2]:(k + 1) * CHUNKS[2]]
                np.ascontiguousarray(c).tofile(os.path.join(root, str(i), str(j), f"{k}.bin"))
    with open(os.path.join(root, ".zarray"), "w") as f:
        json.dump({"shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "|u1",
                   "compressor": None, "order": "C", "zarr_format": 2}, f)


class ChunkStore:
    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, ".zarray")) as f:
            meta = json.load(f)
        self.chunks = tuple(meta["chunks"])
        self.cache = OrderedDict()

    def chunk(self, i, j, k):
        key = (i, j, k)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        c = np.fromfile(os.path.join(self.root, str(i), str(j), f"{k}.bin"), dtype=np.uint8)
        c = c.reshape(self.chunks)
        self.cache[key] = c
        if len(self.cache) > CACHE:
            self.cache.popitem(last=False)
        return c

    def window(self, z, j, k):
        parts = []
        for i in range(z // self.chunks[0], (z + WINDOW - 1) // self.chunks[0] + 1):
            lo = max(z, i * self.chunks[0]) - i * self.chunks[0]
            hi = min(z + WINDOW, (i + 1) * self.chunks[0]) - i * self.chunks[0]
            parts.append(self.chunk(i, j, k)[lo:hi])
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


def train(data):
    store = ChunkStore(os.path.join(data, "arr"))
    ws = windows()
    n = 0
    for epoch in range(EPOCHS):
        for s in range(STEPS):
            batch = np.stack([store.window(*w) for w in ws[n:n + BATCH]])
            n += BATCH
            assert batch.shape == (BATCH, WINDOW, CHUNKS[1], CHUNKS[2])
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
