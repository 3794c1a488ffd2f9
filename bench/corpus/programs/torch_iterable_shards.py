"""A PyTorch IterableDataset over record shards, sharded across 4 workers by get_worker_info.

8 shard files of length-prefixed records (a 4-byte little-endian length, then the payload;
payload lengths lognormal, median 20 KiB, sigma 0.4), 48 records per shard. The
IterableDataset gives worker k of n the shards k, k+n, ... (shard order shuffled per epoch with
a seed shared by all workers) and each worker reads its shards front to back through Python's
buffered file object (f.read(4), f.read(n)). DataLoader: batch 8, 4 worker processes (fork),
prefetch_factor 4, not persistent; the main process sleeps 12 ms per batch. The DataLoader
takes batches from the workers in turn, so each batch is one worker's 8 consecutive records.

Usage: torch_iterable_shards.py DATA [--make | --truth]
Fixed by the program: 8 shards x 48 records, batch 8, 4 worker processes, prefetch_factor 4,
2 epochs of 48 steps, 12 ms compute per step. Needs torch.
"""
import json
import os
import random
import struct
import sys
import time

import numpy as np

SHARDS, PER_SHARD, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 8, 48, 8, 4, 4, 2, 0.012
MEDIAN, SIGMA = 20 << 10, 0.4
SEED = 3


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".rec")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "torch_iterable_shards", "needs": ["torch"], "format": "length-prefixed records",
        "io_library": "python buffered file reads in DataLoader workers",
        "data_layout": "DATA/*.rec", "num_files": SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA,
                        "plus": "4-byte length prefix"},
        "file_size": {"bytes": fsz, "mean": sum(fsz) / max(1, len(fsz))},
        "batch_size": BATCH, "readers": {"kind": "process", "count": WORKERS,
                                         "framework": "torch DataLoader (IterableDataset)",
                                         "sharding": "get_worker_info: shard k::num_workers",
                                         "persistent": False},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": SHARDS * PER_SHARD // BATCH,
        "total_steps": EPOCHS * SHARDS * PER_SHARD // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "shards, per epoch (records within a shard in order)", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "sequential: 8 KiB buffered reads for small records, direct reads "
                        "for records larger than the buffer",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for s in range(SHARDS):
        with open(os.path.join(data, f"shard_{s:02d}.rec"), "wb") as f:
            for _ in range(PER_SHARD):
                n = int(np.clip(rng.lognormal(np.log(MEDIAN), SIGMA), 512, 1 << 20))
                f.write(struct.pack("<I", n))
                f.write(rng.integers(0, 255, n, dtype=np.uint8).tobytes())


def train(data):
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class Records(IterableDataset):
        def __init__(self, root):
            self.shards = sorted(os.path.join(root, n) for n in os.listdir(root)
                                 if n.endswith(".rec"))
            self.epoch = 0

        def __iter__(self):
            info = get_worker_info()
            k, n = (info.id, info.num_workers) if info else (0, 1)
            order = self.shards[:]
            random.Random(SEED + self.epoch).shuffle(order)
            for path in order[k::n]:
                with open(path, "rb") as f:
                    while head := f.read(4):
                        (size,) = struct.unpack("<I", head)
                        yield torch.frombuffer(bytearray(f.read(size)), dtype=torch.uint8)[:512]

    ds = Records(data)
    loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, prefetch_factor=PREFETCH)
    for epoch in range(EPOCHS):
        ds.epoch = epoch
        for batch in loader:
            assert batch.shape[0] == BATCH
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
