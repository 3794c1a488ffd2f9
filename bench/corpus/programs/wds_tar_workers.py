"""WebDataset-style tar shards streamed by a torch IterableDataset, shards split by worker id.

8 tar shards (DATA/shard_000.tar ... shard_007.tar), each 40 samples stored as two members
in key order, NNNN.npy (an npy file of a 3 x 48 x 48 float32 array: 27648 bytes of data +
a 128-byte npy header = 27776 bytes) then NNNN.cls (the label as 1 to 3 bytes of ascii
digits). An IterableDataset gives worker k of the 2 DataLoader workers the shards k, k+2,
k+4, k+6 of the epoch's shard order (a seeded shuffle that every worker computes alike) and
streams each with tarfile.open(path, "r|") (stream mode: no seeks), pairing the members into
samples (np.load of the .npy bytes from memory, int of the .cls text). DataLoader: batch 8,
num_workers=2 (fork), prefetch_factor 2 (the default), not persistent (new workers each
epoch); the main process sleeps 10 ms per batch. Each worker yields 160 samples, exactly 20
batches, and the DataLoader takes batches from the two workers in turn, so every batch is 8
consecutive samples of one shard of one worker.

What a syscall trace sees (strace -f): 2 forked worker processes per epoch (clone, no
execve), 4 over the run; all data reads are in the workers, none in the main process.
Stream mode opens the shard with os.open, not a Python file object, so per shard in a
worker there is an openat(O_RDONLY|O_CLOEXEC) and no fstat, ioctl or lseek; then strictly
sequential read()s of exactly 10240 bytes (tarfile's stream record size) from offset 0 to
the end of the file: 117 reads for a 1198080-byte shard (40 samples x 29696 bytes of
headers, data and padding, 1024 bytes of end-of-archive blocks, padded to a multiple of
10240), no short or empty read at the end, then close. No lseek, no pread, no writes. A
worker reads its 4 shards back to back, one shard over its own 5 batches (every other step
of the run, as the DataLoader alternates between the workers): a burst of about 23 reads
(one batch, 8 x 29696 bytes) per batch, a shard over about 0.16 s, after a larger first
burst at the epoch's start (prefetch_factor 2 keeps each worker up to 2 batches ahead).
Every shard is read once per epoch, 19169280 bytes in all for the run.

Usage: wds_tar_workers.py DATA [--make | --truth]
Fixed by the program: 8 shards x 40 samples (27776 B npy + 1-3 B cls), batch 8, 2 worker
processes (shards split by worker id), prefetch_factor 2, 2 epochs of 40 steps, 10 ms compute
per step, shard order shuffled per epoch (samples within a shard in order), no checkpoint,
no eval. Needs torch.
"""
import io
import json
import os
import random
import sys
import tarfile
import time

import numpy as np

SHARDS, PER_SHARD, SHAPE, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = \
    8, 40, (3, 48, 48), 8, 2, 2, 2, 0.010
NPY_BYTES = 4 * SHAPE[0] * SHAPE[1] * SHAPE[2] + 128
SEED = 4401


def shard_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".tar")) \
        if os.path.isdir(data) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in shard_names(data)]
    steps = SHARDS * PER_SHARD // BATCH
    return {
        "program": "wds_tar_workers", "needs": ["torch"], "format": "tar (webdataset-like)",
        "io_library": "tarfile.open(mode='r|') stream in torch IterableDataset workers",
        "data_layout": "DATA/shard_NNN.tar, members NNNN.npy + NNNN.cls per sample",
        "num_files": SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "fixed", "bytes": NPY_BYTES,
                        "parts": {"npy": NPY_BYTES, "cls": "1-3 bytes"},
                        "plus": "512 B tar header per member, members padded to 512 B"},
        "file_size": {"bytes": fsz, "mean": sum(fsz) / max(1, len(fsz)), "total": sum(fsz)},
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": False, "split": "shards by worker id (k, k+2, ...)"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "shards, per epoch (samples in order)",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "each shard read once per epoch front to back in sequential 10240-byte "
                        "reads (tar stream records) by one worker, spread across its batches",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for s in range(SHARDS):
        with tarfile.open(os.path.join(data, f"shard_{s:03d}.tar"), "w",
                          format=tarfile.USTAR_FORMAT) as tar:
            for i in range(PER_SHARD):
                key = f"{s * PER_SHARD + i:04d}"
                buf = io.BytesIO()
                np.save(buf, rng.standard_normal(SHAPE, dtype=np.float32))
                label = str(int(rng.integers(0, 1000))).encode()
                for ext, blob in (("npy", buf.getvalue()), ("cls", label)):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(blob)
                    info.mtime = 1_700_000_000
                    tar.addfile(info, io.BytesIO(blob))


def train(data):
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class TarShards(IterableDataset):
        def __init__(self, shards):
            self.shards = shards
            self.epoch = 0

        def __iter__(self):
            order = self.shards[:]
            random.Random(SEED * 100 + self.epoch).shuffle(order)
            info = get_worker_info()
            wid, n = (info.id, info.num_workers) if info is not None else (0, 1)
            for path in order[wid::n]:
                with tarfile.open(path, "r|") as tar:
                    cur = {}
                    for m in tar:
                        key, ext = m.name.rsplit(".", 1)
                        cur[ext] = tar.extractfile(m).read()
                        if len(cur) == 2:
                            x = np.load(io.BytesIO(cur["npy"]))
                            yield torch.from_numpy(x), int(cur["cls"])
                            cur = {}

    ds = TarShards(shard_names(data))
    loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, prefetch_factor=PREFETCH,
                        persistent_workers=False)
    for epoch in range(EPOCHS):
        ds.epoch = epoch  # the workers are forked at iter(): they see this epoch's value
        steps = 0
        for x, y in loader:
            assert x.shape == (BATCH,) + SHAPE and y.shape == (BATCH,)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == SHARDS * PER_SHARD // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
