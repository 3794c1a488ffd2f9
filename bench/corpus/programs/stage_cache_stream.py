"""Remote shards staged to a local cache by a download thread, then streamed in 1 MiB chunks.

DATA/remote holds 4 shard files (shard_000.rec .. shard_003.rec, 1.33 to 1.43 MB, 5.5 MB in
all) of 96 length-prefixed records each (a uint32 little-endian length, then the payload;
payloads lognormal, median 12 KiB, sigma 0.5, clipped to [2 KiB, 64 KiB]). DATA/remote plays
the part of a remote store, DATA/cache of a local disk cache (as in WebDataset/LitData/
Mosaic streaming). At start the program creates DATA/cache (removing any leftover first);
at the end it removes it again (shutil.rmtree), so every run starts with an empty cache.
Epoch 1: a "stager" thread copies the shards in name order, each with read(1 MiB)/write
loops into cache/NAME.part, then os.rename to cache/NAME; it stays at most 1 shard ahead of
the consumer (a semaphore: it copies shard 0 and shard 1 at once, then shard k+2 only after
the main thread has finished shard k). The main thread waits for each shard to be staged,
then streams the CACHED copy: open, f.read(1 << 20) in a loop, splitting the records out of
the chunks (records straddle chunk boundaries; the remainder is carried over). Epochs 2 and
3 read only the cache, shard order shuffled ([2, 3, 0, 1] then [1, 3, 0, 2]); the remote
files are never opened again. Records pass through a 32-record shuffle buffer (it spans
shard boundaries and is drained at the epoch's end); batch 16, 12 ms of compute (sleep) per
batch. 3 epochs of 24 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write,mmap):
at start a stat of DATA/cache (absent) and mkdir; at the very end rmtree: openat of
DATA/cache (O_RDONLY), 4 unlinkat of the cached shards, rmdir. Per shard copy, on the
stager thread: openat(remote, O_RDONLY), lseek(0, SEEK_CUR), openat(cache/NAME.part,
O_WRONLY|O_CREAT|O_TRUNC), lseek, then
read(1048576) = 1048576, write(1048576), read(1048576) = the rest (286510 to 385640 bytes),
read(1048576 - rest) = 0 (Python's buffered read trying to fill the 1 MiB), write(rest),
read(1048576) = 0, close, close, rename(NAME.part, NAME). Per shard streamed, on the main
thread: openat(cache/NAME, O_RDONLY), lseek(0, SEEK_CUR), read(1048576) = 1048576, then
(after the batches of that chunk, 2 to 4 steps later) read(1048576) = rest, read(1048576 -
rest) = 0, and 1 to 2 steps later read(1048576) = 0, close. So 4 reads a shard, 2 of them
empty, separated by tens of ms of compute; every read is 1 MiB-sized whatever the record
sizes (sample-sized I/O is not visible at all). In epoch 1 the two threads overlap: shard 0
and 1 are copied back to back at the start, then each later copy right after the main
thread closes the shard before. Totals: 16 remote reads + 8 writes (5.5 MB written) in
epoch 1, 48 reads of the cache (16.4 MB) over the run. No other file writes.

Usage: stage_cache_stream.py DATA [--make | --truth]
Fixed by the program: 4 shards of 96 variable-size records (384 samples), copy to
DATA/cache in epoch 1 by 1 thread (1 shard ahead), 1 MiB streaming reads by the main
thread, shuffle buffer 32, batch 16, 3 epochs of 24 steps, 12 ms compute per step, no
checkpoint, no eval. Needs numpy only.
"""
import json
import os
import random
import shutil
import struct
import sys
import threading
import time

import numpy as np

SHARDS, PER_SHARD, MEDIAN, SIGMA, LO, HI = 4, 96, 12 << 10, 0.5, 2 << 10, 64 << 10
CHUNK, BATCH, SHUFFLE_BUF, EPOCHS, COMPUTE_S, AHEAD = 1 << 20, 16, 32, 3, 0.012, 1
LEN = struct.Struct("<I")
SEED = 2718


def record_sizes():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(MEDIAN), SIGMA, SHARDS * PER_SHARD), LO, HI) \
        .astype(np.int64).reshape(SHARDS, PER_SHARD)


def shard_name(k):
    return f"shard_{k:03d}.rec"


def epoch_shard_orders():
    rng = random.Random(SEED)
    orders = [list(range(SHARDS))]
    for _ in range(EPOCHS - 1):
        o = list(range(SHARDS))
        rng.shuffle(o)
        orders.append(o)
    return orders


def truth(data):
    sizes = record_sizes()
    shard_bytes = [int(sizes[k].sum()) + LEN.size * PER_SHARD for k in range(SHARDS)]
    chunks = [-(-b // CHUNK) for b in shard_bytes]
    steps = SHARDS * PER_SHARD // BATCH
    return {
        "program": "stage_cache_stream", "needs": [],
        "format": "length-prefixed records (uint32 LE length + payload) in shard files",
        "io_library": "python file objects: 1 MiB read()/write() copy by a download thread; "
                      "1 MiB read() streaming by the main thread, records split from chunks",
        "data_layout": "DATA/remote/shard_NNN.rec (source), staged to DATA/cache/ at run time",
        "num_files": SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA, "clip": [LO, HI],
                        "mean": float(sizes.mean()), "min": int(sizes.min()),
                        "max": int(sizes.max()), "length_prefix_bytes": LEN.size},
        "file_size": {"per_shard": shard_bytes, "total": sum(shard_bytes)},
        "batch_size": BATCH,
        "readers": {"kind": "main+thread", "count": 2,
                    "note": "epoch 1: a download thread copies remote -> cache (1 shard "
                            "ahead of the consumer); the main thread streams the cached "
                            "copies in every epoch"},
        "prefetch": {"download_shards_ahead": AHEAD, "shuffle_buffer_records": SHUFFLE_BUF},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order: name order in epoch 1, shuffled in later epochs "
                   f"({epoch_shard_orders()}); records through a 32-record shuffle buffer",
        "eval": None, "checkpoint": None,
        "staging": {"remote_reads_epoch_1_only": True, "chunk_bytes": CHUNK,
                    "read_syscalls_per_shard": [c + 2 for c in chunks],
                    "write_syscalls_per_shard": chunks,
                    "bytes_written": sum(shard_bytes),
                    "cache_files": [f"cache/{shard_name(k)}" for k in range(SHARDS)],
                    "protocol": "write cache/NAME.part, then os.rename to cache/NAME; cache "
                                "dir created at the start and removed (rmtree: 4 unlinks, "
                                "rmdir) at the end of every run"},
        "side_files": [],
        "read_pattern": "whole-shard sequential streaming in 1 MiB reads (1 MiB, the short "
                        "rest, then 2 empty reads at EOF); records do not align with reads",
    }


def make(data):
    os.makedirs(os.path.join(data, "remote"), exist_ok=True)
    sizes = record_sizes()
    for k in range(SHARDS):
        with open(os.path.join(data, "remote", shard_name(k)), "wb") as f:
            for j, n in enumerate(sizes[k]):
                payload = np.random.default_rng(SEED + 1 + k * PER_SHARD + j) \
                    .integers(0, 256, int(n), dtype=np.uint8).tobytes()
                f.write(LEN.pack(int(n)) + payload)


class Stager(threading.Thread):
    """Copies remote shards into the local cache, at most AHEAD shards before the consumer."""

    def __init__(self, remote, cache, order):
        super().__init__(name="stager", daemon=True)
        self.remote, self.cache, self.order = remote, cache, order
        self.ready = {k: threading.Event() for k in order}
        self.slots = threading.Semaphore(AHEAD + 1)

    def run(self):
        for k in self.order:
            self.slots.acquire()
            src_p = os.path.join(self.remote, shard_name(k))
            dst_p = os.path.join(self.cache, shard_name(k))
            with open(src_p, "rb") as src, open(dst_p + ".part", "wb") as dst:
                while True:
                    b = src.read(CHUNK)
                    if not b:
                        break
                    dst.write(b)
            os.rename(dst_p + ".part", dst_p)
            self.ready[k].set()

    def consumed(self, k):
        self.slots.release()


def stream_records(path):
    """Yield the records of one shard, reading it in 1 MiB chunks."""
    with open(path, "rb") as f:
        buf = b""
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            buf += chunk
            pos = 0
            while pos + LEN.size <= len(buf):
                (n,) = LEN.unpack_from(buf, pos)
                if pos + LEN.size + n > len(buf):
                    break
                yield buf[pos + LEN.size:pos + LEN.size + n]
                pos += LEN.size + n
            buf = buf[pos:]
        assert not buf, "truncated record"


def train(data):
    remote, cache = os.path.join(data, "remote"), os.path.join(data, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    rng = random.Random(SEED + 1)
    orders = epoch_shard_orders()
    stager = Stager(remote, cache, orders[0])
    stager.start()
    for epoch, order in enumerate(orders):
        pool, batch, steps = [], [], 0

        def emit(rec):
            nonlocal batch, steps
            batch.append(np.frombuffer(rec, dtype=np.uint8))
            if len(batch) == BATCH:
                assert sum(len(b) for b in batch) > 0
                time.sleep(COMPUTE_S)
                steps += 1
                batch = []

        for k in order:
            if epoch == 0:
                stager.ready[k].wait()
            for rec in stream_records(os.path.join(cache, shard_name(k))):
                if len(pool) < SHUFFLE_BUF:
                    pool.append(rec)
                    continue
                j = rng.randrange(len(pool))
                pool[j], rec = rec, pool[j]
                emit(rec)
            if epoch == 0:
                stager.consumed(k)
        rng.shuffle(pool)
        for rec in pool:
            emit(rec)
        assert not batch and steps == SHARDS * PER_SHARD // BATCH, steps
    stager.join()
    shutil.rmtree(cache)  # leave DATA as --make left it: every run starts with no cache


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
