"""PyTorch IterableDataset streaming raw binary shards (32-byte header + fixed 4 KiB records);
3 DataLoader workers, each taking every 3rd shard via get_worker_info(); batches built in
the main process.

DATA/shards/shard-00000.bin .. shard-00005.bin: 6 files of unequal length (256, 320, 192,
288, 224, 256 records; 1536 in all, about 6.3 MB). Each file: a 32-byte header (magic
b"RAWSHRD1", version, record count, record size 4096, label bytes 4, dtype code, padding),
then the records back to back from offset 32, each 4096 bytes = int32 label + 1023 float32
features.

Each epoch the shard list is permuted (numpy rng seeded 777 + epoch; every worker computes
the same permutation) and worker w of 3 takes shards perm[w::3], i.e. 2 shards per worker.
For each shard the worker does open(path, "rb", buffering=0) (an unbuffered FileIO, so each
.read() is exactly one read syscall), reads the 32-byte header, then reads the records in
blocks of 16: one read of 65536 bytes (16 records) each time (all record counts are multiples
of 16, so every data read is exactly 65536 bytes), stops after the header's record count (no
EOF read), and closes the file before opening the next one. Records pass through a
per-worker shuffle buffer of 64 samples (rng seeded per epoch and worker) and are yielded
one at a time. DataLoader(batch_size=None, identity collate_fn so samples cross the worker
queues as pickled numpy arrays, num_workers=3, prefetch_factor=8, persistent_workers=False,
fork): each worker keeps up to 8 *samples* in flight; the main process takes samples
round-robin from the workers (a worker that runs out of shards drops out), np.stacks 32 of
them into a batch, and sleeps 20 ms per batch. 2 epochs of 48 steps (1536 samples / 32).

What a syscall trace sees (strace -f -e trace=openat,read): importing torch opens many
files and runs "/sbin/ldconfig -p" and "uname -p" child processes (not data); the main
process creates ~34 /dev/shm/sem.* semaphores for the worker queues; each new worker
lazily imports a few .py modules (small reads of .py files) right after the fork. The main
process never opens a shard. Per epoch 3 worker processes are forked anew; each opens its
2 shards one after the other (sequentially, never two at once; e.g. epoch 0: shards 1+4,
2+0, 5+3, epoch 1: 5+0, 2+3, 4+1), and per shard issues read(fd, 32) for the header then
count/16 reads of 65536 bytes at consecutive offsets 32, 65568, 131104, ... (sequential,
whole shard, each byte once per epoch; 12 to 20 block reads per shard) and close. The
three workers read concurrently. Each worker reads 5 blocks (80 records: 64 to fill the
shuffle buffer + its 8-sample prefetch) in a burst when it opens its first shard, then one
64 KiB block per 16 samples it hands out; since the main process takes ~11 samples per
step from each worker, that is about one block read per worker every 1.5 steps (~2 reads
per 20 ms step in all), and a burst of 4 blocks when a worker moves to its second shard.
Total per epoch: 6 opens, 6 header reads, 96 block reads (6.3 MB). No writes to files.

Usage: raw_shards_iterable_stride.py DATA [--make | --truth]
Fixed by the program: 6 shard files (unequal record counts), 4096-byte records, batch 32
(built in the main process), 3 non-persistent worker processes (fork), prefetch_factor 8
samples per worker, 64-sample shuffle buffer per worker, 2 epochs of 48 steps, 20 ms compute
per step, no checkpoint, no eval. Needs torch.
"""
import json
import os
import struct
import sys
import time

import numpy as np

COUNTS = [256, 320, 192, 288, 224, 256]
REC, HDR, BLOCK_RECS, FEATS = 4096, 32, 16, 1023
BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S, SHUF_BUF = 32, 3, 8, 2, 0.020, 64
MAGIC = b"RAWSHRD1"
SEED = 777


def shard_paths(data):
    return [os.path.join(data, "shards", "shard-%05d.bin" % i) for i in range(len(COUNTS))]


def truth(data):
    total = sum(COUNTS)
    steps = total // BATCH
    paths = shard_paths(data)
    return {
        "program": "raw_shards_iterable_stride", "needs": ["torch"],
        "format": "raw binary shards (32-byte header + fixed 4096-byte records)",
        "io_library": "unbuffered FileIO (open(..., buffering=0)) inside a torch "
                      "IterableDataset",
        "data_layout": "DATA/shards/shard-0000{0..5}.bin, records from offset 32",
        "num_files": len(COUNTS), "samples_per_file": COUNTS,
        "sample_size": {"dist": "fixed", "bytes": REC,
                        "layout": "int32 label + 1023 float32"},
        "file_sizes": [os.path.getsize(p) if os.path.exists(p) else HDR + c * REC
                       for p, c in zip(paths, COUNTS)],
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader "
                    "(IterableDataset, batch_size=None)", "persistent": False,
                    "start_method": "fork",
                    "note": "worker w reads shards perm[w::3] (get_worker_info); batches of "
                            "32 stacked in the main process"},
        "prefetch": {"prefetch_factor": PREFETCH, "unit": "sample",
                     "samples_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order permuted per epoch (seed 777 + epoch) + 64-sample shuffle "
                   "buffer per worker",
        "eval": None, "checkpoint": None, "side_files": [],
        "file_opens": {"per_epoch": len(COUNTS), "total": len(COUNTS) * EPOCHS,
                       "by": "workers only"},
        "read_pattern": "per shard: read 32 bytes header, then sequential reads of 65536 "
                        "bytes (16 records) to the record count; whole shard once per epoch",
        "read_size_bytes": BLOCK_RECS * REC, "reads_per_epoch": len(COUNTS) + total // 16,
    }


def make(data):
    os.makedirs(os.path.join(data, "shards"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    for p, c in zip(shard_paths(data), COUNTS):
        recs = np.zeros((c, REC // 4), dtype=np.float32)
        recs[:, 1:] = rng.standard_normal((c, FEATS), dtype=np.float32)
        recs.view(np.int32)[:, 0] = rng.integers(0, 10, c)
        with open(p, "wb") as f:
            f.write(MAGIC + struct.pack("<IIIII", 1, c, REC, 4, 1).ljust(HDR - 8, b"\0"))
            f.write(recs.tobytes())


def keep(item):
    return item


def train(data):
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class RawShards(IterableDataset):
        def __init__(self, paths):
            self.paths = paths
            self.epoch = 0

        def set_epoch(self, e):
            self.epoch = e

        def records(self, path):
            with open(path, "rb", buffering=0) as f:
                hdr = f.read(HDR)
                assert hdr[:8] == MAGIC
                _, count, rec, _, _ = struct.unpack("<IIIII", hdr[8:28])
                left = count
                while left:
                    k = min(BLOCK_RECS, left)
                    buf = f.read(k * rec)
                    arr = np.frombuffer(buf, dtype=np.float32).reshape(k, rec // 4)
                    for r in arr:
                        yield r[1:].copy(), int(r[:1].view(np.int32)[0])
                    left -= k

        def __iter__(self):
            info = get_worker_info()
            wid, nw = (info.id, info.num_workers) if info else (0, 1)
            order = np.random.default_rng(SEED + self.epoch).permutation(len(self.paths))
            mine = [self.paths[i] for i in order[wid::nw]]
            rng = np.random.default_rng([SEED, self.epoch, wid])
            buf = []
            for p in mine:
                for item in self.records(p):
                    if len(buf) < SHUF_BUF:
                        buf.append(item)
                        continue
                    j = int(rng.integers(len(buf)))
                    buf[j], item = item, buf[j]
                    yield item
            rng.shuffle(buf)
            yield from buf

    ds = RawShards(shard_paths(data))
    # identity collate: samples cross the worker queue as pickled numpy arrays (no
    # per-sample torch shared-memory tensors)
    loader = DataLoader(ds, batch_size=None, collate_fn=keep, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, persistent_workers=False,
                        multiprocessing_context="fork")
    for epoch in range(EPOCHS):
        ds.set_epoch(epoch)
        xs, ys, steps = [], [], 0
        for x, y in loader:
            xs.append(x)
            ys.append(y)
            if len(xs) == BATCH:
                xb, yb = torch.from_numpy(np.stack(xs)), torch.tensor(ys)
                assert xb.shape == (BATCH, FEATS) and yb.shape == (BATCH,)
                xs, ys = [], []
                time.sleep(COMPUTE_S)
                steps += 1
        assert steps == sum(COUNTS) // BATCH and not xs


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
