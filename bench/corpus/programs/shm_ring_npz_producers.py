"""Hand-rolled multi-process input pipeline: 2 producer processes (multiprocessing.Process)
read whole .npz shards, shuffle rows within the shard, and write ready batches into a ring
of 6 batch slots in ONE multiprocessing.shared_memory segment; the training process only
receives slot numbers over a queue, copies the batch out, sleeps, and hands the slot back.

Data set (DATA/, about 38 MB):
  DATA/shards/shard_000.npz .. shard_023.npz   24 uncompressed .npz (zip, stored) files,
  each with two members: x.npy = uint8 (128, 3, 64, 64) (1572992 bytes incl. the 128-byte
  npy header) and y.npy = int64 (128,) (1152 bytes), about 1.57 MB per shard; 3072 samples
  of 12288 bytes.

Pipeline: the trainer creates one SharedMemory segment of 6 slots x (32*12288 + 32*8) =
2360832 bytes (POSIX shm under /dev/shm, name psm_...), a free-slot queue holding 0..5 and
a full-slot queue. Producers p = 0, 1 are forked once (persistent across epochs) and attach
to the segment by name. Epoch e: the shard order is a permutation of the 24 shards
(numpy rng seeded 777 + e); producer p takes order[p::2] (12 shards per epoch), and for
each shard does np.load(path) and reads z["x"] and z["y"] completely (the whole shard is
read: one shard = 128 samples), permutes the 128 rows (rng seeded 777 + 1000*e + shard),
and writes 4 batches of 32 into free slots (blocking on the free queue when the trainer
is behind), then moves on; it runs ahead into the next epoch as long as slots are free.
Prefetch depth: 6 batch slots (192 samples) shared by both producers, so at most about
1.5 shards ahead of the consumer. The trainer takes 96 batches per epoch (24 shards x 4),
3 epochs, 288 steps, 10 ms sleep per step, taking batches in arrival order and counting
96 per epoch (a faster producer's first batches of epoch e+1 can be consumed before the
other producer's last ones of epoch e); each producer sends an end marker per epoch. No
eval, no checkpoint.

What a syscall trace sees (strace -f -e trace=openat,read,lseek,write): the trainer
(main PID) opens /dev/shm/psm_XXXX (O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC) once, and
each producer PID opens it again by name (O_RDWR); the segment is then only mmap'ed,
batches move by memory writes (no read/write syscalls for sample data between the
processes, only small pickled slot messages on the queue pipes). The data files are opened
only by the 2 producer PIDs, each shard once per epoch (24 opens per epoch, 72 in all, 36
per producer). Per shard np.load/zipfile does (observed, 19 reads per shard, identical for every shard):
openat(shard_NNN.npz, O_RDONLY|O_CLOEXEC); read(4096) at 0 (the npz magic check, Python
buffered); lseek(0, SEEK_END) and lseek(-22, SEEK_END), read(23) = 22 (end-of-central-
directory record), read(1) = 0; lseek(-42, SEEK_END), read(4096) = 42; lseek to the
central directory, read(4096) = 124; then back to offset 0 and the file is streamed
front to back: read(4096), read(4096), read(253952), then 5 times [read(4096),
read(258048)] (numpy reads the x array in 256 KiB chunks through ZipExtFile over a 4 KiB
buffered file), and a final read(4096) = 1514 that reaches EOF and already contains the
whole y member, so y costs no further read (only lseek(SEEK_CUR)s). Each shard file is
thus read completely and sequentially once per epoch (its last ~170 bytes twice), about
1.57 MB in ~256 KiB reads, 113.7 MB in all; shard files are visited in a random order and
the 2 producers interleave in time. Other traffic: the multiprocessing resource tracker
(a separate forked process) receives small "REGISTER:/psm_..." / "UNREGISTER" writes on
its pipe; slot numbers travel as small pickles on the queue pipes. No data files are
written; the /dev/shm segment is unlinked at the end.

Usage: shm_ring_npz_producers.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import json
import multiprocessing as mp
import os
import sys
import time
from multiprocessing import shared_memory

import numpy as np

SHARDS, PER_SHARD, SHAPE, BATCH = 24, 128, (3, 64, 64), 32
PRODUCERS, SLOTS, EPOCHS, COMPUTE_S = 2, 6, 3, 0.010
SEED = 777
SAMPLE_BYTES = int(np.prod(SHAPE))
X_SLOT = BATCH * SAMPLE_BYTES
SLOT_BYTES = X_SLOT + BATCH * 8


def shard_path(data, k):
    return os.path.join(data, "shards", "shard_%03d.npz" % k)


def shard_order(epoch):
    return np.random.default_rng(SEED + epoch).permutation(SHARDS)


def truth(data):
    steps = SHARDS * PER_SHARD // BATCH
    p = shard_path(data, 0)
    shard_bytes = os.path.getsize(p) if os.path.exists(p) else None
    return {
        "program": "shm_ring_npz_producers", "needs": [],
        "format": "npz (uncompressed zip of two .npy members: x uint8 (128,3,64,64), "
                  "y int64 (128,))",
        "io_library": "numpy.load (zipfile) in multiprocessing.Process producers, batches "
                      "passed through multiprocessing.shared_memory",
        "data_layout": "DATA/shards/shard_000.npz .. shard_023.npz",
        "num_files": SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES, "label_bytes": 8},
        "file_size": shard_bytes,
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": PRODUCERS, "framework": "multiprocessing."
                    "Process (fork), persistent across epochs",
                    "assignment": "producer p reads shards order[p::2] of each epoch"},
        "prefetch": {"slots": SLOTS, "samples_in_flight": SLOTS * BATCH,
                     "shm_segment_bytes": SLOTS * SLOT_BYTES,
                     "note": "producers run ahead across epoch boundaries while slots free"},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order permuted per epoch (seed 777 + epoch), rows permuted within "
                   "each shard (seed 777 + 1000*epoch + shard)",
        "eval": None, "checkpoint": None, "side_files": [],
        "file_opens": {"per_epoch": SHARDS, "total": SHARDS * EPOCHS},
        "read_pattern": "each shard read whole once per epoch by one producer: 5 small zip "
                        "directory reads near the end of the file, then the file streamed "
                        "from offset 0 in 4 KiB + ~252 KiB reads to EOF",
        "reads_per_sample": "whole shard per 128 samples (19 reads per shard)",
        "bytes_per_epoch": SHARDS * PER_SHARD * (SAMPLE_BYTES + 8),
    }


def make(data):
    os.makedirs(os.path.join(data, "shards"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    for k in range(SHARDS):
        x = rng.integers(0, 256, (PER_SHARD,) + SHAPE, dtype=np.uint8)
        y = rng.integers(0, 1000, PER_SHARD).astype(np.int64)
        np.savez(shard_path(data, k), x=x, y=y)


def producer(p, data, shm_name, free_q, full_q):
    shm = shared_memory.SharedMemory(name=shm_name)
    ring = np.ndarray((SLOTS, SLOT_BYTES), dtype=np.uint8, buffer=shm.buf)
    for epoch in range(EPOCHS):
        for k in shard_order(epoch)[p::PRODUCERS]:
            with np.load(shard_path(data, int(k))) as z:
                x, y = z["x"], z["y"]
            perm = np.random.default_rng(SEED + 1000 * epoch + int(k)).permutation(PER_SHARD)
            for s in range(0, PER_SHARD, BATCH):
                ids = perm[s:s + BATCH]
                slot = free_q.get()
                ring[slot, :X_SLOT] = x[ids].reshape(-1)
                ring[slot, X_SLOT:] = y[ids].view(np.uint8)
                full_q.put((slot, epoch, p))
        full_q.put((-1, epoch, p))
    del ring
    shm.close()


def train(data):
    ctx = mp.get_context("fork")
    shm = shared_memory.SharedMemory(create=True, size=SLOTS * SLOT_BYTES)
    free_q, full_q = ctx.Queue(), ctx.Queue()
    for s in range(SLOTS):
        free_q.put(s)
    procs = [ctx.Process(target=producer, args=(p, data, shm.name, free_q, full_q),
                         name="producer-%d" % p, daemon=True) for p in range(PRODUCERS)]
    for pr in procs:
        pr.start()
    ring = np.ndarray((SLOTS, SLOT_BYTES), dtype=np.uint8, buffer=shm.buf)
    steps_per_epoch = SHARDS * PER_SHARD // BATCH
    try:
        ends = 0
        for epoch in range(EPOCHS):
            steps = 0
            while steps < steps_per_epoch:
                slot, e, p = full_q.get()
                if slot < 0:
                    ends += 1
                    continue
                x = ring[slot, :X_SLOT].reshape((BATCH,) + SHAPE).astype(np.float32) / 255.0
                y = ring[slot, X_SLOT:].copy().view(np.int64)
                free_q.put(slot)
                assert x.shape[0] == BATCH and y.shape == (BATCH,) and e >= epoch - 1
                time.sleep(COMPUTE_S)
                steps += 1
        while ends < PRODUCERS:
            assert full_q.get()[0] < 0
            ends += 1
        for pr in procs:
            pr.join()
    finally:
        del ring
        shm.close()
        shm.unlink()


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
