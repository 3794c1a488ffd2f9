"""3-D medical segmentation training (CT-like int16 volumes, 2 volumes per step) whose
volumes live in an "object store" (a local directory standing in for a bucket) and are
fetched the way S3/GCS clients do a multipart download: a HEAD (stat) for the object size,
then the object is split into 256 KiB byte ranges that a pool of 4 threads GETs in
parallel, each range GET being a fresh open + one pread + close (a stateless request); the
parts are assembled in memory. The next batch's objects are fetched while the current step
computes. At the end of each epoch the weights are "uploaded" as a multipart PUT: 4 parts
of 512 KiB written in parallel with os.pwrite into a preallocated file.

Data set (DATA/, about 44 MB):
  DATA/bucket/index.json                 the "ListObjects" result: keys, sizes, labels
                                         (read once at start, 3300 bytes);
  DATA/bucket/volumes/ct_000.vol .. ct_039.vol
      40 objects: a 64-byte header (magic b"CTV1", depth, height 96, width 96, dtype
      code, voxel spacing) then depth x 96 x 96 int16 voxels (18,432 bytes per slice),
      depth uniform 24..100 slices: 0.44-1.84 MB per object (44.2 MB in all), i.e. 2-8
      range GETs each (the last range of an object short).
  DATA/bucket/ckpt/epoch_N.ckpt          written by training: 2 MiB each (raw float32).

Training: index.json is read once (main thread). Each epoch the 40 keys are permuted
(numpy rng seeded 2024 + epoch) and taken 2 per step (20 steps). fetch(key): os.stat
(HEAD) then one pool task per range [k*262144, min(size, (k+1)*262144)); each task does
fd = os.open(path, O_RDONLY), os.pread(fd, length, start), os.close(fd). The pool is a
ThreadPoolExecutor(4) created once; the main thread submits all ranges of batch k+1 (4-16
GETs) before waiting on batch k, so up to 2 batches of ranges are in flight. The step
parses the header, crops a random 16-slice x 64 x 64 patch per volume and sleeps 45 ms. At
each epoch end: the 2 MiB state is written to DATA/bucket/ckpt/epoch_E.ckpt: os.open(...,
O_WRONLY|O_CREAT|O_TRUNC), os.ftruncate to 2 MiB, then 4 pool tasks os.pwrite 524288 bytes
at 0, 524288, 1048576, 1572864 on that one fd, then close. 3 epochs, 60 steps, 3 uploads.
No eval.

What a syscall trace sees (strace -f -e
trace=openat,read,pread64,preadv,readv,lseek,close,pwrite64,ftruncate):
one process, the main thread plus 4 pool threads (created during the first fetch, kept to
the end). index.json: one openat on the main thread, 2 lseek(0, SEEK_CUR), read(3301) =
3300, read(1) = 0, close. The HEAD is a newfstatat(path) on the main thread (not in this
trace set). Every data byte is then read by the 4 pool threads only, each range GET being
openat(ct_NNN.vol, O_RDONLY|O_CLOEXEC), ONE pread64(fd, LEN, START) and close on the same
thread: START = 0, 262144, 524288, ..., LEN = 262144 except the object's last range (8256
to 256064 bytes, whatever is left). No read(), no lseek on volume files. Per object 2 to 8
such open/pread/close triples, usually on several different threads (the ranges of an
object are spread over the pool and complete out of order), and every object is opened
as many times as it has ranges (so ct_009.vol, 8 ranges, is opened 24 times over the run). Per
step the main thread submits the next batch's 2 objects (4-16 ranges, ~2.2 MB) at once:
a burst of that many concurrent opens/preads just after the step starts, then quiet until
the next 45 ms step; at an epoch start 2 batches are submitted back to back. Per epoch
188 opens and 188 preads (every object byte exactly once, 44,184,064 bytes), 564 and
132.6 MB over the run. Checkpoints (end of each epoch): the main thread does
openat(bucket/ckpt/epoch_E.ckpt, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC) and
ftruncate(fd, 2097152); 4 pool threads issue pwrite64(fd, 524288, 0 / 524288 / 1048576 /
1572864) concurrently on that one fd; the main thread closes it (3 files, 6 MiB written).

Usage: objstore_range_get_volumes.py DATA [--make | --truth]
numpy only (runs with plain python3). Writes DATA/bucket/ckpt/.
"""
import json
import os
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N_VOL, H, W, DMIN, DMAX = 40, 96, 96, 24, 100
HEADER, MAGIC, PART = 64, b"CTV1", 256 * 1024
BATCH, EPOCHS, THREADS, COMPUTE_S = 2, 3, 4, 0.045
PATCH_D, PATCH_HW = 16, 64
CKPT_BYTES, CKPT_PARTS = 2 * 1024 * 1024, 4
SEED = 2024


def depths():
    return np.random.default_rng(SEED).integers(DMIN, DMAX + 1, N_VOL)


def obj_sizes():
    return [HEADER + int(d) * H * W * 2 for d in depths()]


def epoch_order(epoch):
    return np.random.default_rng(SEED + epoch).permutation(N_VOL)


def ranges(size):
    return [(s, min(PART, size - s)) for s in range(0, size, PART)]


def truth(data):
    sizes = obj_sizes()
    nparts = [len(ranges(s)) for s in sizes]
    steps = N_VOL // BATCH
    return {
        "program": "objstore_range_get_volumes", "needs": [],
        "format": "raw int16 volumes with a 64-byte header, one object (file) per volume",
        "io_library": "os.stat + per-range os.open/os.pread/os.close from a 4-thread pool "
                      "(multipart ranged GET emulation)",
        "data_layout": "DATA/bucket/volumes/ct_000..039.vol + DATA/bucket/index.json",
        "num_files": N_VOL, "samples_per_file": 1,
        "sample_size": {"distribution": "uniform depth 24..100 slices x 18432 bytes + 64",
                        "mean_bytes": int(np.mean(sizes)), "min_bytes": min(sizes),
                        "max_bytes": max(sizes), "total_bytes": sum(sizes)},
        "range_size_bytes": PART,
        "ranges_per_object": {"min": min(nparts), "max": max(nparts), "total": sum(nparts)},
        "batch_size": BATCH,
        "readers": {"kind": "ThreadPoolExecutor threads (one range GET per task)",
                    "count": THREADS},
        "prefetch": {"batches_ahead": 1},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "object permutation per epoch (numpy seed 2024 + epoch)",
        "eval": None,
        "checkpoint": {"when": "end of every epoch", "files": ["bucket/ckpt/epoch_%d.ckpt" % e
                                                                for e in range(EPOCHS)],
                       "bytes_each": CKPT_BYTES,
                       "write_pattern": "ftruncate + 4 parallel pwrite(524288) from pool "
                                        "threads"},
        "side_files": [{"path": "bucket/index.json", "reads": "once"}],
        "read_pattern": "per object: stat, then ceil(size/256 KiB) x (openat, pread64(len, "
                        "start), close) by 4 threads in parallel; every byte once per epoch",
        "opens_per_epoch": sum(nparts),
        "bytes_per_epoch": sum(sizes),
    }


def make(data):
    vdir = os.path.join(data, "bucket", "volumes")
    os.makedirs(vdir, exist_ok=True)
    rng = np.random.default_rng(SEED + 100)
    index = []
    for v, d in enumerate(depths()):
        d = int(d)
        zz = np.linspace(-1, 1, d)[:, None, None]
        yy = np.linspace(-1, 1, H)[None, :, None]
        xx = np.linspace(-1, 1, W)[None, None, :]
        body = np.where(zz ** 2 + yy ** 2 / 0.6 + xx ** 2 / 0.8 < 0.8, 40, -1000)
        vol = (body + rng.normal(0, 25, (d, H, W))).astype("<i2")
        key = "volumes/ct_%03d.vol" % v
        hdr = MAGIC + struct.pack("<IHHH3f", d, H, W, 2, 1.5, 0.8, 0.8)
        with open(os.path.join(data, "bucket", key), "wb") as f:
            f.write(hdr.ljust(HEADER, b"\0"))
            f.write(vol.tobytes())
        index.append({"key": key, "size": HEADER + vol.nbytes, "label": int(v % 3),
                      "etag": "%08x" % int(rng.integers(0, 2 ** 31))})
    with open(os.path.join(data, "bucket", "index.json"), "w") as f:
        json.dump({"bucket": "ct-train", "objects": index}, f, indent=0)


def get_range(path, start, length):
    fd = os.open(path, os.O_RDONLY)
    try:
        return start, os.pread(fd, length, start)
    finally:
        os.close(fd)


def fetch(pool, path):
    size = os.stat(path).st_size
    return size, [pool.submit(get_range, path, s, n) for s, n in ranges(size)]


def assemble(size, futs):
    buf = bytearray(size)
    for f in futs:
        start, part = f.result()
        buf[start:start + len(part)] = part
    hdr = bytes(buf[:HEADER])
    assert hdr[:4] == MAGIC
    d, h, w = struct.unpack("<IHH", hdr[4:12])
    return np.frombuffer(buf, dtype="<i2", offset=HEADER).reshape(d, h, w)


def put_pwrite(fd, off, blob):
    return os.pwrite(fd, blob, off)


def train(data):
    root = os.path.join(data, "bucket")
    with open(os.path.join(root, "index.json")) as f:
        objs = json.load(f)["objects"]
    paths = [os.path.join(root, o["key"]) for o in objs]
    ckdir = os.path.join(root, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    weights = np.random.default_rng(SEED).standard_normal(CKPT_BYTES // 4).astype(np.float32)
    steps, acc = 0, 0.0
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for epoch in range(EPOCHS):
            order = epoch_order(epoch)
            batches = [order[s:s + BATCH] for s in range(0, N_VOL, BATCH)]
            rng = np.random.default_rng((SEED, epoch))
            pending = [fetch(pool, paths[v]) for v in batches[0]]
            for i in range(len(batches)):
                nxt = ([fetch(pool, paths[v]) for v in batches[i + 1]]
                       if i + 1 < len(batches) else None)
                vols = [assemble(size, futs) for size, futs in pending]
                for vol in vols:
                    z = int(rng.integers(0, vol.shape[0] - PATCH_D + 1))
                    y, x = (int(t) for t in rng.integers(0, H - PATCH_HW + 1, 2))
                    acc += float(vol[z:z + PATCH_D, y:y + PATCH_HW, x:x + PATCH_HW].mean())
                time.sleep(COMPUTE_S)
                steps += 1
                pending = nxt
            weights *= 0.999
            blob = weights.tobytes()
            fd = os.open(os.path.join(ckdir, "epoch_%d.ckpt" % epoch),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.ftruncate(fd, CKPT_BYTES)
            part = CKPT_BYTES // CKPT_PARTS
            futs = [pool.submit(put_pwrite, fd, k * part, blob[k * part:(k + 1) * part])
                    for k in range(CKPT_PARTS)]
            assert sum(f.result() for f in futs) == CKPT_BYTES
            os.close(fd)
    print("objstore_range_get_volumes: %d steps, %d epochs, mean HU %.1f"
          % (steps, EPOCHS, acc / (steps * BATCH)))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
