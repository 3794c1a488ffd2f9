"""Whole-shard np.load of stacked image arrays, samples then streamed from memory in order.

8 npy shards (DATA/shard_00.npy .. shard_07.npy), each one stacked uint8 array of 200 x 3 x
32 x 32 (614400 bytes of data + 128-byte header = 614528 bytes). Each epoch shuffles the
shard order (one random.Random for the run); a generator walks the shards in that order,
np.load-ing each whole (path, no mmap) when the stream reaches it and then yielding its 200
samples from memory in file order. The main thread cuts the stream into batches of 32 that
run across shard boundaries (1600 / 32 = 50 steps an epoch, no partial batch), converts each
to float32 and sleeps 6 ms as compute. No threads, no read ahead.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write), all on
the main thread: openat(O_DIRECTORY) of DATA at start (getdents). Then per shard load:
openat(O_RDONLY|O_CLOEXEC), newfstatat(fd, "", AT_EMPTY_PATH), (ioctl TCGETS fails),
lseek(0, SEEK_CUR), a buffered read of 4096 bytes at offset 0 (magic and header); then
numpy's fromfile on a dup of the descriptor (fcntl F_DUPFD_CLOEXEC): two lseek(0, SEEK_CUR),
newfstatat, lseek(0, SEEK_SET), a 128-byte read, lseek(0, SEEK_SET) again, then reads of
4096, 610304 and 4096 (short: 128) bytes, i.e. the whole file again from offset 0; close of
the dup, lseek(4096) and lseek(614528) on the original, close. So 5 reads and 618752 bytes
per load (the first 4224 bytes twice). 8 loads an epoch, 16 in all (every shard once per
epoch, in a different order), 9.9 MB read; one load every 6.25 steps, about every 40 ms,
with only compute (no I/O) between loads. numpy's OpenBLAS threads are created at import
and do no I/O. No writes.

Usage: npy_stack_shards_seq.py DATA [--make | --truth]
Fixed by the program: 8 shard files x 200 samples of 3072 bytes, batch 32 (batches cross
shard boundaries), main thread only, no read ahead, 2 epochs of 50 steps, 6 ms compute per
step, shard order shuffled per epoch, samples in file order, no checkpoint, no eval.
Needs numpy only.
"""
import json
import os
import random
import sys
import time

import numpy as np

SHARDS, PER_SHARD, SHAPE, BATCH, EPOCHS, COMPUTE_S = 8, 200, (3, 32, 32), 32, 2, 0.006
SAMPLE_BYTES = SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 4417


def shard_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data)
                  if n.startswith("shard_") and n.endswith(".npy")) if os.path.isdir(data) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in shard_names(data)]
    steps = SHARDS * PER_SHARD // BATCH
    return {
        "program": "npy_stack_shards_seq", "needs": [], "format": "npy",
        "io_library": "numpy.load (whole shard)",
        "data_layout": "DATA/shard_NN.npy (uint8 200 x 3 x 32 x 32 each)",
        "num_files": SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES},
        "file_size": {"dist": "fixed", "header_bytes": 128,
                      "bytes": fsz[0] if fsz else PER_SHARD * SAMPLE_BYTES + 128,
                      "total": sum(fsz)},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order, per epoch; samples in file order within a shard",
        "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "np.load of one whole shard (600 KiB, 5 reads, sequential) every "
                        "6.25 steps; samples then from memory in order",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for k in range(SHARDS):
        rng = np.random.default_rng(SEED + k)
        x = rng.integers(0, 255, (PER_SHARD,) + SHAPE, dtype=np.uint8)
        np.save(os.path.join(data, f"shard_{k:02d}.npy"), x)


def samples(shards):
    # Stream samples across shard boundaries: a shard is loaded whole when the stream
    # reaches it, then its samples are handed out from memory in file order.
    for name in shards:
        x = np.load(name)
        for i in range(x.shape[0]):
            yield x[i]


def train(data):
    names = shard_names(data)
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        batch, steps = [], 0
        for x in samples(order):
            batch.append(x)
            if len(batch) == BATCH:
                xb = np.stack(batch).astype(np.float32) / 255.0
                assert xb.shape == (BATCH,) + SHAPE
                time.sleep(COMPUTE_S)
                batch, steps = [], steps + 1
        assert steps == SHARDS * PER_SHARD // BATCH and not batch


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
