"""Two-stage "whole-shard" input pipeline, as used by in-house trainers that pack samples
into big flat shard files and keep whole shards in RAM: ONE producer thread
("shard-reader") streams complete shard files (8-16 MB each) into preallocated 16 MiB
bytearrays with f.readinto() in 1 MiB chunks and hands them to the trainer through a
bounded queue.Queue(maxsize=2); the training loop (main thread) then cuts MANY shuffled
mini-batches out of each in-memory shard, so the disk sees a few big sequential bursts
separated by long silent stretches of compute. Buffers are recycled through a second
"free" queue (4 buffers in all: 2 queued + 1 being filled + 1 being consumed), so there is
no allocation per shard.

Data set (DATA/, about 54.3 MB):
  DATA/shards/shard_SS.bin   4 shard files (S = 00..03); each is n_S fixed-size records of
                             6,144 bytes: uint32 label, uint32 sample id, 6,136 bytes of
                             uint8 features. n_S is drawn UNIFORMLY so that shards are
                             8-16 MB (seed 4242): n = 1,920 / 2,320 / 2,416 / 2,176
                             records -> 11,796,480 / 14,254,080 / 14,843,904 / 13,369,344
                             bytes (54,263,808 in all).
  DATA/shards/index.json     {"record_bytes": 6144, "shards": [[name, n_records], ...]}
                             (130 bytes), read once at start by the main thread.

Training: 3 epochs. Per epoch the shard ORDER is a fresh permutation (numpy rng seeded
4242 + epoch) known in advance to the producer, which walks the 12 (epoch, shard) pairs
back to back and blocks whenever 2 filled shards are already queued (or no buffer is
free). Producer, per shard: open(path, "rb", buffering=0); size = os.fstat(fd).st_size;
while pos < size: n = f.readinto(mv[pos:pos + min(1 MiB, size - pos)]); close;
queue.put((epoch, shard, size, buf)). Trainer, per shard: records viewed with
np.frombuffer (no copy), a permutation of the records (rng seeded 99 + 10 * epoch +
shard), batches of 128 records (the remainder of a shard, < 128 records, is dropped), 18
ms sleep per step; then the buffer is returned to the free queue. Steps per shard = n //
128 = 15 / 18 / 18 / 17 -> 68 steps per epoch, 204 steps in all. Shard order per epoch:
[0, 1, 3, 2], [0, 1, 2, 3], [1, 2, 0, 3]. No checkpoint, no writes.

What a syscall trace sees (strace -ff -e trace=openat,read,pread64,lseek,close,write,fstat):
the main thread reads only shards/index.json (Python text mode: openat, fstat,
ioctl(TCGETS), 2 lseek(0, SEEK_CUR), fstat, read(131) = 130, read(1) = 0, close); ALL
shard data is read by the single producer thread "shard-reader" (a different TID in the
same process; numpy's idle BLAS threads do no I/O). Per shard file: openat(shard_SS.bin,
O_RDONLY|O_CLOEXEC), fstat (from open()) + fstat (the size query), then a run of read(fd,
buf, 1048576) calls at strictly increasing file offsets (never an lseek, never a pread, no
EOF read), the last one short (size mod 1 MiB = 262,144 / 622,592 / 163,840 / 786,432
bytes for shards 00..03), then close: 12 / 14 / 15 / 13 reads for shards 00..03, 54 reads
(50 x 1 MiB + 4 short) and 54,263,808 bytes per epoch (every byte of every shard exactly
once per epoch); 12 opens, 162 reads, 162,791,424 bytes over the run. Timing: at start the
producer reads FOUR shards back to back in ~15 ms (the trainer holds the 1st, the 2nd and
3rd sit in the queue, the 4th fills the last free buffer and then blocks in queue.put);
from then on each ~3-6 ms read burst of one whole shard comes right after the trainer
finishes a shard (a buffer is freed), i.e. one burst every 0.27-0.33 s (15-18 steps of 18
ms), with the disk idle in between. The epoch boundary is invisible to I/O: the producer
is already 3 shards into the next epoch's order when the trainer finishes an epoch; the
producer reads the 12th (last) shard when the trainer starts the 9th, then exits, so the
rest of the run has no I/O at all (the last 4 shards, ~1.2 s of steps).

Usage: shard_producer_queue_readinto.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import json
import os
import queue
import sys
import threading
import time

import numpy as np

N_SHARDS, REC, FEAT = 4, 6144, 6136
MIN_MB, MAX_MB = 8e6, 16e6
CHUNK, BUF_BYTES, N_BUFS, QDEPTH = 1 << 20, 16 << 20, 4, 2
BATCH, EPOCHS = 128, 3
COMPUTE_S = 0.018
SEED = 4242


def shard_records():
    rng = np.random.default_rng(SEED)
    return [int(x) for x in rng.integers(int(MIN_MB // REC) + 1, int(MAX_MB // REC), N_SHARDS)]


def shard_name(s):
    return "shard_%02d.bin" % s


def shard_order(epoch):
    return [int(s) for s in np.random.default_rng(SEED + epoch).permutation(N_SHARDS)]


def truth(data):
    recs = shard_records()
    sizes = [n * REC for n in recs]
    reads = [-(-b // CHUNK) for b in sizes]
    steps = sum(n // BATCH for n in recs)
    return {
        "program": "shard_producer_queue_readinto", "needs": [],
        "format": "flat binary shards of fixed 6,144-byte records (+ index.json)",
        "io_library": "Python unbuffered FileIO.readinto(memoryview slice) in 1 MiB chunks "
                      "into preallocated bytearrays, one producer thread",
        "data_layout": "DATA/shards/shard_SS.bin (4 files), DATA/shards/index.json",
        "num_files": N_SHARDS, "samples_per_file": recs,
        "file_bytes": sizes, "total_bytes": sum(sizes),
        "sample_size": {"distribution": "fixed", "bytes": REC,
                        "shard_size_distribution": "uniform 8-16 MB"},
        "batch_size": BATCH,
        "readers": {"kind": "1 producer thread (whole shard files) feeding queue.Queue",
                    "count": 1, "thread_name": "shard-reader",
                    "main_thread_reads": "index.json only"},
        "prefetch": {"queue_maxsize": QDEPTH, "buffers": N_BUFS,
                     "buffer_bytes": BUF_BYTES, "unit": "whole shard"},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "steps_per_shard": [n // BATCH for n in recs],
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order permuted per epoch (seed 4242 + epoch), records permuted "
                   "within each in-memory shard; remainder < 128 records dropped",
        "shard_order_per_epoch": [shard_order(e) for e in range(EPOCHS)],
        "checkpoint": None,
        "side_files": [{"path": "shards/index.json", "reads": "once, main thread"}],
        "read_pattern": "per shard: openat, 2 fstat, sequential read(1 MiB) x ceil(size/1MiB) "
                        "(last one short), close; whole file once per epoch",
        "read_request_bytes": CHUNK,
        "reads_per_shard": reads, "reads_per_epoch": sum(reads),
        "bytes_per_epoch": sum(sizes), "opens_per_epoch": N_SHARDS,
    }


def make(data):
    d = os.path.join(data, "shards")
    os.makedirs(d, exist_ok=True)
    recs = shard_records()
    rng = np.random.default_rng(SEED + 1)
    sid = 0
    for s, n in enumerate(recs):
        hdr = np.empty((n, 2), dtype="<u4")
        hdr[:, 0] = rng.integers(0, 100, n)
        hdr[:, 1] = np.arange(sid, sid + n)
        sid += n
        feat = rng.integers(0, 256, (n, FEAT), dtype=np.uint8)
        with open(os.path.join(d, shard_name(s)), "wb") as f:
            f.write(np.concatenate([hdr.view(np.uint8), feat], axis=1).tobytes())
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"record_bytes": REC, "shards": [[shard_name(s), n]
                                                   for s, n in enumerate(recs)]}, f)


def read_shard(path, buf):
    mv = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        assert size <= len(buf)
        pos = 0
        while pos < size:
            n = f.readinto(mv[pos:pos + min(CHUNK, size - pos)])
            if not n:
                raise IOError("short shard %s" % path)
            pos += n
    return size


def producer(root, names, plan, full, free, errors):
    try:
        for epoch, s in plan:
            buf = free.get()
            size = read_shard(os.path.join(root, names[s]), buf)
            full.put((epoch, s, size, buf))
    except Exception as e:  # surface to the trainer instead of hanging it
        errors.append(e)
    finally:
        full.put(None)


def train(data):
    root = os.path.join(data, "shards")
    with open(os.path.join(root, "index.json")) as f:
        idx = json.load(f)
    assert idx["record_bytes"] == REC
    names = [n for n, _ in idx["shards"]]
    plan = [(e, s) for e in range(EPOCHS) for s in shard_order(e)]
    full, free, errors = queue.Queue(maxsize=QDEPTH), queue.Queue(), []
    for _ in range(N_BUFS):
        free.put(bytearray(BUF_BYTES))
    th = threading.Thread(target=producer, name="shard-reader", daemon=True,
                          args=(root, names, plan, full, free, errors))
    th.start()
    steps, seen, acc, shards = 0, 0, 0, 0
    while True:
        item = full.get()
        if item is None:
            break
        epoch, s, size, buf = item
        n = size // REC
        recs = np.frombuffer(buf, dtype=np.uint8, count=size).reshape(n, REC)
        perm = np.random.default_rng(99 + 10 * epoch + s).permutation(n)
        for b in range(n // BATCH):
            rows = recs[np.sort(perm[b * BATCH:(b + 1) * BATCH])]
            labels = rows[:, :4].copy().view("<u4")[:, 0]
            x = rows[:, 8:].astype(np.float32)
            acc += int(labels.sum()) + int(x[:, :16].sum())
            seen += BATCH
            time.sleep(COMPUTE_S)
            steps += 1
        del recs, rows
        free.put(buf)
        shards += 1
    th.join()
    if errors:
        raise errors[0]
    print("shard_producer_queue_readinto: %d steps, %d shards consumed, %d samples, "
          "checksum %d" % (steps, shards, seen, acc))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
