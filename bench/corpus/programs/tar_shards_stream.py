"""WebDataset-style streaming of tar shards (tarfile in stream mode), several samples per file.

6 tar shards, each 32 samples stored as two members, NNNN.jpg (random bytes, lognormal
length, median 24 KiB, sigma 0.5) and NNNN.cls (a few bytes of label text). Each epoch
shuffles the shard order and streams each shard front to back with tarfile.open(mode="r|")
(which reads the file in 10 KiB records, a stream that never seeks), pairing members into
samples; every 8 samples make a batch, followed by 15 ms of compute. A batch may span two
shards.

Usage: tar_shards_stream.py DATA [--make | --truth]
Fixed by the program: 6 shards x 32 samples, batch 8, main thread only, 2 epochs of 24 steps,
15 ms compute per step, shards shuffled per epoch (samples within a shard in order). stdlib
only (numpy for --make).
"""
import io
import json
import os
import random
import sys
import tarfile
import time

import numpy as np

SHARDS, PER_SHARD, BATCH, EPOCHS, COMPUTE_S = 6, 32, 8, 2, 0.015
MEDIAN, SIGMA = 24 << 10, 0.5
SEED = 64


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".tar")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "tar_shards_stream", "needs": [], "format": "tar (webdataset-like)",
        "io_library": "tarfile.open(mode='r|') stream", "data_layout": "DATA/*.tar",
        "num_files": SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA,
                        "plus": "512 B tar header per member, a .cls member per sample"},
        "file_size": {"bytes": fsz, "mean": sum(fsz) / max(1, len(fsz))},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": SHARDS * PER_SHARD // BATCH,
        "total_steps": EPOCHS * SHARDS * PER_SHARD // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "shards, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "sequential 10240-byte reads through each shard, spread across steps",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for s in range(SHARDS):
        with tarfile.open(os.path.join(data, f"shard_{s:03d}.tar"), "w") as tar:
            for i in range(PER_SHARD):
                key = f"{s * PER_SHARD + i:06d}"
                n = int(np.clip(rng.lognormal(np.log(MEDIAN), SIGMA), 1024, 1 << 20))
                for ext, blob in (("jpg", rng.integers(0, 255, n, dtype=np.uint8).tobytes()),
                                  ("cls", str(int(rng.integers(0, 1000))).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))


def samples(paths):
    for p in paths:
        with tarfile.open(p, mode="r|") as tar:
            cur = {}
            for m in tar:
                key, ext = m.name.rsplit(".", 1)
                cur[ext] = tar.extractfile(m).read()
                if len(cur) == 2:
                    yield cur
                    cur = {}


def train(data):
    shards = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".tar"))
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = shards[:]
        rng.shuffle(order)
        batch = []
        for sample in samples(order):
            batch.append(sample)
            if len(batch) == BATCH:
                assert all("jpg" in b and "cls" in b for b in batch)
                time.sleep(COMPUTE_S)
                batch = []


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
