"""A multiprocessing.Pool of 2 reader processes over raw files of bimodal sizes.

80 .bin files: 70% small (normal around 32 KiB, sd 4 KiB) and 30% large (normal around
512 KiB, sd 48 KiB). The Pool (fork, 2 processes, created once) reads each step's 8 files
(pool.map(read_whole, paths, chunksize=1): open, read whole in one unbuffered read, close) and
returns their bytes to the main process, which sleeps 25 ms. Files shuffled per epoch.

Usage: mp_pool_bimodal.py DATA [--make | --truth]
Fixed by the program: 80 files, 1 sample per file, batch 8, 2 reader processes, no read
ahead, 2 epochs of 10 steps, 25 ms compute per step. stdlib + numpy (for --make only).
"""
import json
import multiprocessing as mp
import os
import random
import sys
import time

FILES, BATCH, PROCS, EPOCHS, COMPUTE_S = 80, 8, 2, 2, 0.025
SMALL, SMALL_SD, LARGE, LARGE_SD, P_LARGE = 32 << 10, 4 << 10, 512 << 10, 48 << 10, 0.3
SEED = 13


def file_sizes():
    rng = random.Random(SEED)
    out = []
    for _ in range(FILES):
        if rng.random() < P_LARGE:
            out.append(max(4096, int(rng.gauss(LARGE, LARGE_SD))))
        else:
            out.append(max(4096, int(rng.gauss(SMALL, SMALL_SD))))
    return out


def truth(data):
    s = file_sizes()
    large = [x for x in s if x > 200_000]
    return {
        "program": "mp_pool_bimodal", "needs": [], "format": "raw (.bin)",
        "io_library": "open/read in multiprocessing.Pool workers", "data_layout": "DATA/*.bin",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "bimodal", "modes": [
            {"mean": SMALL, "sd": SMALL_SD, "weight": 1 - P_LARGE},
            {"mean": LARGE, "sd": LARGE_SD, "weight": P_LARGE}],
            "large_files": len(large), "mean": sum(s) / len(s), "min": min(s), "max": max(s),
            "total": sum(s)},
        "file_size": "as sample_size", "batch_size": BATCH,
        "readers": {"kind": "process", "count": PROCS, "framework": "multiprocessing.Pool",
                    "note": "each batch split over the 2 processes; no read ahead"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": FILES // BATCH,
        "total_steps": EPOCHS * FILES // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole file in one read() call",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = random.Random(SEED + 1)
    for i, n in enumerate(file_sizes()):
        with open(os.path.join(data, f"blob_{i:04d}.bin"), "wb") as f:
            f.write(rng.randbytes(n))


def read_whole(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".bin"))
    rng = random.Random(SEED)
    with mp.get_context("fork").Pool(PROCS) as pool:
        for epoch in range(EPOCHS):
            order = names[:]
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                got = pool.map(read_whole, order[s * BATCH:(s + 1) * BATCH], chunksize=1)
                assert len(got) == BATCH and all(got)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
