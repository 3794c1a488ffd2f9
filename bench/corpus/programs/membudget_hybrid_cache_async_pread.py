"""Record-shard trainer under a RAM budget: half of the shards are pinned in
memory at start-up, the other half is streamed every epoch by an asyncio
reader (``asyncio.to_thread(os.pread)``, 4 reads in flight, 1 MiB each)
that drops each streamed shard from the page cache afterwards; gradient
accumulation of 4 micro-batches per optimizer step.

Data set (``--make``, seed 15006)
---------------------------------
``DATA/index.json``  list of shards with byte sizes and record counts
``DATA/shards/shard-000.rec`` .. ``shard-015.rec``: 16 files x 1,024
    fixed-size records of 4,096 bytes = 4,194,304 bytes (4 MiB) each,
    64 MiB total.  Record = 16-byte header (<IIII: magic 0x52454331,
    global index, label, payload length 4,080) + 4,080-byte uint8 payload
    (a 60 x 68 grey image).

Training loop
-------------
``MEM_BUDGET = 32 MiB`` -> the first 8 shards (by name) are cached in RAM
at start-up, each with ONE unbuffered ``readinto`` of 4 MiB into a
preallocated bytearray.  Each epoch visits the 16 shards in a shuffled
order (``default_rng(15006 + epoch)``).  Cached shards are served from
RAM in a shuffled record order.  Streamed shards (shard-008..015) are read
by a background thread that runs an asyncio event loop: for each streamed
shard it opens the file (``os.open``, O_RDONLY), schedules its 4 x 1 MiB
chunks as ``asyncio.to_thread(os.pread, fd, 1 MiB, off)`` under an
``asyncio.Semaphore(4)``, shuffles records within each chunk, then calls
``os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` and closes.  Streamed
and cached shards are produced in epoch order into a ``queue.Queue(maxsize
=8)`` of micro-batches (64 records).  Optimizer step = 4 micro-batches
(256 records), 4 steps per shard, 64 steps/epoch, 3 epochs, 192 steps.
Compute: ``time.sleep(0.005)`` per micro-batch = 0.02 s per optimizer step.
No eval, no checkpoint; nothing is written into DATA.

What a syscall trace sees (measured with strace)
------------------------------------------------
* start (main thread): ``openat``+read of index.json; 8 x (``openat``
  O_RDONLY|O_CLOEXEC, ``newfstatat``, ONE ``read`` of 4,194,304 bytes,
  ``close``) for shard-000..007 (32 MiB).  These files are never touched
  again.
* per epoch, a fresh loader thread (and, via ``asyncio.run``, a fresh
  default executor) handles the 8 streamed shards one at a time in the
  epoch's shuffled order: ``openat`` O_RDONLY|O_CLOEXEC from the loader
  thread, then 4 ``pread64`` of 1,048,576 bytes at offsets 0, 1, 2, 3 MiB
  issued concurrently by 4 different executor threads (completion order
  varies), then ``fadvise64(fd, 0, 0, POSIX_FADV_DONTNEED)`` and ``close``
  from the loader thread.  32 preads = 32 MiB per epoch, 24 opens / 96
  preads / 96 MiB over the run; DONTNEED makes the streamed half come from
  storage again every epoch.  Streamed shards are read in bursts separated
  by the trainer's consumption (queue of 8 micro-batches = half a shard).
* No mmap of data, no writes.
"""
import asyncio
import json
import os
import queue
import struct
import sys
import threading
import time

import numpy as np

SEED = 15006
N_SHARDS = 16
RECS = 1024
REC = 4096
HDR = struct.Struct("<IIII")
MAGIC = 0x52454331
MEM_BUDGET = 32 << 20
CHUNK = 1 << 20
IN_FLIGHT = 4
MICRO = 64
ACCUM = 4
QUEUE_MAX = 8
EPOCHS = 3
MICRO_COMPUTE_S = 0.005


def make(data):
    rng = np.random.default_rng(SEED)
    d = os.path.join(data, "shards")
    os.makedirs(d, exist_ok=True)
    index = []
    for s in range(N_SHARDS):
        buf = bytearray(RECS * REC)
        labels = rng.integers(0, 100, size=RECS)
        payload = rng.integers(0, 256, size=(RECS, REC - HDR.size), dtype=np.uint8)
        for r in range(RECS):
            off = r * REC
            HDR.pack_into(buf, off, MAGIC, s * RECS + r, int(labels[r]), REC - HDR.size)
            buf[off + HDR.size:off + REC] = payload[r].tobytes()
        name = "shard-%03d.rec" % s
        with open(os.path.join(d, name), "wb") as f:
            f.write(buf)
        index.append({"file": "shards/" + name, "records": RECS, "record_bytes": REC, "bytes": len(buf)})
    with open(os.path.join(data, "index.json"), "w") as f:
        json.dump({"shards": index, "magic": MAGIC}, f, indent=1)


def parse(buf):
    arr = np.frombuffer(buf, dtype=np.uint8).reshape(-1, REC)
    hdr = arr[:, :HDR.size].copy().view("<u4")
    assert (hdr[:, 0] == MAGIC).all()
    return arr[:, HDR.size:], hdr[:, 2].astype(np.int64)


class HybridLoader:
    def __init__(self, data):
        with open(os.path.join(data, "index.json")) as f:
            self.shards = json.load(f)["shards"]
        self.paths = [os.path.join(data, s["file"]) for s in self.shards]
        self.cache = {}
        used = 0
        for i, s in enumerate(self.shards):
            if used + s["bytes"] > MEM_BUDGET:
                break
            buf = bytearray(s["bytes"])
            with open(self.paths[i], "rb", buffering=0) as f:
                n = f.readinto(buf)
            assert n == s["bytes"]
            self.cache[i] = buf
            used += n
        self.cached_bytes = used

    async def _stream_shard(self, i, sem):
        fd = os.open(self.paths[i], os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = self.shards[i]["bytes"]

            async def one(off):
                async with sem:
                    return off, await asyncio.to_thread(os.pread, fd, CHUNK, off)

            parts = await asyncio.gather(*(one(off) for off in range(0, size, CHUNK)))
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        return [p for _, p in sorted(parts)]

    async def _epoch(self, epoch, q):
        sem = asyncio.Semaphore(IN_FLIGHT)
        rng = np.random.default_rng(SEED + epoch)
        for i in rng.permutation(len(self.shards)):
            i = int(i)
            if i in self.cache:
                x, y = parse(self.cache[i])
                order = rng.permutation(len(y))
            else:
                chunks = await self._stream_shard(i, sem)
                x, y = parse(b"".join(chunks))
                per = CHUNK // REC
                order = np.concatenate([c * per + rng.permutation(per) for c in range(len(chunks))])
            for b in range(0, len(order), MICRO):
                sel = order[b:b + MICRO]
                item = (x[sel], y[sel])
                await asyncio.to_thread(q.put, item)
        await asyncio.to_thread(q.put, None)

    def start_epoch(self, epoch):
        q = queue.Queue(maxsize=QUEUE_MAX)
        t = threading.Thread(target=lambda: asyncio.run(self._epoch(epoch, q)), daemon=True)
        t.start()
        return q, t


def train(data):
    t0 = time.time()
    loader = HybridLoader(data)
    print("cached %d shards (%d MiB) in %.2fs" % (len(loader.cache), loader.cached_bytes >> 20, time.time() - t0))
    w = np.zeros(REC - HDR.size, dtype=np.float32)
    step = 0
    for epoch in range(EPOCHS):
        q, t = loader.start_epoch(epoch)
        micro = 0
        while True:
            item = q.get()
            if item is None:
                break
            x, y = item
            w += 1e-6 * x[0]
            time.sleep(MICRO_COMPUTE_S)
            micro += 1
            if micro % ACCUM == 0:
                w *= 0.999
                step += 1
        t.join()
        print("epoch %d: step %d, %.2fs" % (epoch, step, time.time() - t0))
    print("trained %d steps in %.2fs" % (step, time.time() - t0))


def truth():
    spe = N_SHARDS * RECS // (MICRO * ACCUM)
    n_cached = MEM_BUDGET // (RECS * REC)
    return {
        "program": "membudget_hybrid_cache_async_pread",
        "needs": [],
        "format": "fixed-size binary records (4096 B) in 4 MiB shard files",
        "io_library": "os (readinto for cached half; asyncio.to_thread(os.pread) + posix_fadvise for streamed half)",
        "data_layout": "16 shards x 1024 records; shards 0-7 read once into RAM at start-up (32 MiB budget), "
                       "shards 8-15 streamed every epoch in 1 MiB preads, FADV_DONTNEED after each shard",
        "num_files": N_SHARDS,
        "samples_per_file": RECS,
        "sample_size": {"dist": "fixed", "min": REC, "max": REC, "mean": REC},
        "batch_size": MICRO,
        "grad_accumulation": ACCUM,
        "samples_per_step": MICRO * ACCUM,
        "readers": {"kind": "thread (asyncio loop thread + default executor)", "count": IN_FLIGHT},
        "read_size_bytes": {"cached": RECS * REC, "streamed": CHUNK},
        "cached_files": n_cached,
        "streamed_files": N_SHARDS - n_cached,
        "prefetch": QUEUE_MAX,
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": EPOCHS * spe,
        "compute_s_per_step": MICRO_COMPUTE_S * ACCUM,
        "shuffle": True,
        "eval": None,
        "checkpoint": None,
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: membudget_hybrid_cache_async_pread.py DATA [--make|--truth]")
    if "--truth" in sys.argv:
        print(json.dumps(truth()))
    elif "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
