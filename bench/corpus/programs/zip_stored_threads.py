"""ImageNet-style classification reading images straight out of a ZIP archive, as in the
Swin-Transformer / mmcv "zip mode" (a map file of "train.zip@/path/in/zip<TAB>label" lines,
a ZipReader that caches open ZipFile objects), with the per-sample loads done by a
concurrent.futures.ThreadPoolExecutor(2) behind a bounded read-ahead window, and a
validation pass over a second archive after every epoch.

Data set (DATA/, about 61 MB):
  DATA/train.zip      53.7 MB, ZIP_STORED (no compression), 1500 members
                      train/nCC/img_IIIII.npy, written class by class (16 classes); each is
                      an uint8 H x W x 3 .npy (128-byte header) with H, W uniform in 72..144
                      (seed 31): 15.7-62.3 KB, mean ~35 KB; central directory ~103 KB at the
                      end of the file.
  DATA/train_map.txt  1500 lines "train.zip@/train/nCC/img_IIIII.npy<TAB>label" (56 KB).
  DATA/val.zip        7.1 MB, 256 stored members val/img_IIIII.npy, 96 x 96 x 3 (27.8 KB).
  DATA/val_map.txt    256 lines (7.5 KB).

Training: the main thread reads both map files once. One ThreadPoolExecutor(max_workers=2)
lives for the whole run. Each epoch the 1500 samples are permuted (seed 131 + epoch) and
the first 46 x 32 = 1472 are used (drop_last: 28 random samples are not read that epoch).
The main thread keeps up to 3 batches (96 samples) of per-sample futures submitted ahead;
a task does ZipReader.read(train.zip, member) -> np.load(BytesIO) -> random 64x64 crop and
flip. ZipReader keeps one zipfile.ZipFile per (thread, archive), so each pool thread opens
train.zip once on its first task and keeps it. The main thread stacks 32 results, tops
the window up again and sleeps 25 ms. After each epoch the main thread evaluates: val.zip
(its own ZipFile, opened on the first eval and kept) in archive order, batches of 64
(4 steps, 8 ms each). 3 epochs x 46 steps = 138 steps. No checkpoint, nothing written.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): main thread:
train_map.txt and val_map.txt each opened once and read with 8192-byte reads. Each of the 2
pool threads (same 2 TIDs for the whole run) opens train.zip ONCE (O_RDONLY|O_CLOEXEC, its
own fd, never closed until exit) and reads the end-of-central-directory record
(lseek(-22, SEEK_END), read(23) = 22, read(1) = 0, lseek(-42, SEEK_END), read(4096) = 42)
and the central directory (lseek to 53626971, read(102400) + read(4096) = 1122). Then per
member, through the ZipFile's 4 KiB-buffered file: lseek(header_offset, SEEK_SET),
read(4096) (30-byte local header + name + start of the data), a couple of lseek(0,
SEEK_CUR) (tell), ONE read of the remaining whole 4 KiB blocks (k*4096, 12-57 KB, e.g.
24576 or 32768), and a read(4096) for the tail that over-reads into the next member: 3
reads per member, ~4 KB more than the member. Offsets are random across the archive
(shuffled order); both threads read concurrently (~750 members per thread per epoch, split
dynamically), in bursts whenever the window is topped up. Per epoch ~1472 members,
~52.5 MB of member data, ~55.7 MB read. Eval (main thread): the first eval opens val.zip,
reads its EOCD and central directory (read(12288) + read(4096) = 3862), then all later
reads are sequential with no SEEK_SET (the next member is already at the buffer position):
per member read(k*4096) + read(4096), 256 members, 7.1 MB per eval, the same fd for all 3
evals (one lseek(0, SEEK_SET) back to the start at the first member of each eval).

Usage: zip_stored_threads.py DATA [--make | --truth]
numpy + stdlib only (runs with plain python3).
"""
import io
import json
import os
import sys
import threading
import time
import zipfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N_TRAIN, N_CLASSES, N_VAL, VAL_SIDE, MIN_SIDE, MAX_SIDE, CROP = 1500, 16, 256, 96, 72, 144, 64
BATCH, THREADS, AHEAD_BATCHES, EPOCHS, COMPUTE_S = 32, 2, 3, 3, 0.025
VAL_BATCH, EVAL_S = 64, 0.008
SEED = 31


def sides():
    rng = np.random.default_rng(SEED)
    return rng.integers(MIN_SIDE, MAX_SIDE + 1, (N_TRAIN, 2))


def train_names():
    rng = np.random.default_rng(SEED + 1)
    labels = np.sort(rng.integers(N_CLASSES, size=N_TRAIN))
    return ["train/n%02d/img_%05d.npy" % (c, i) for i, c in enumerate(labels)], labels


def steps_per_epoch():
    return N_TRAIN // BATCH


def npy_bytes(h, w):
    return 128 + int(h) * int(w) * 3


def truth(data):
    hw = sides()
    nb = np.array([npy_bytes(h, w) for h, w in hw])
    steps = steps_per_epoch()
    per_epoch = [int(nb[np.random.default_rng(SEED + 100 + e).permutation(N_TRAIN)[:steps * BATCH]]
                     .sum()) for e in range(EPOCHS)]
    tz = os.path.join(data, "train.zip")
    return {
        "program": "zip_stored_threads", "needs": [],
        "format": "zip archive (ZIP_STORED, uncompressed) of .npy images, Swin-Transformer "
                  "'zip mode' style map file",
        "io_library": "zipfile.ZipFile (one per reader thread) .read(member), np.load(BytesIO)",
        "data_layout": "DATA/train.zip + DATA/train_map.txt, DATA/val.zip + DATA/val_map.txt",
        "num_files": 1, "samples_per_file": N_TRAIN,
        "sample_size": {"dist": "uniform H, W in 72..144 (uint8 HxWx3 .npy, 128-byte header)",
                        "min_bytes": int(nb.min()), "max_bytes": int(nb.max()),
                        "mean_bytes": int(nb.mean()), "total_bytes": int(nb.sum()),
                        "file_bytes": os.path.getsize(tz) if os.path.exists(tz) else None},
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": THREADS,
                    "framework": "concurrent.futures.ThreadPoolExecutor (whole run)",
                    "note": "each thread lazily opens its own zipfile.ZipFile(train.zip) once; "
                            "one task per sample"},
        "prefetch": {"kind": "bounded window of submitted futures",
                     "samples_ahead": AHEAD_BATCHES * BATCH, "batches_ahead": AHEAD_BATCHES},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "permutation per epoch (seed 131 + epoch), drop_last: the %d samples past the "
                   "last full batch are not read that epoch" % (N_TRAIN - steps * BATCH),
        "eval": {"when": "after every epoch", "files": ["val.zip"], "reader": "main thread",
                 "samples": N_VAL, "batch_size": VAL_BATCH, "steps": N_VAL // VAL_BATCH,
                 "order": "archive order", "compute_s_per_step": EVAL_S,
                 "bytes": N_VAL * npy_bytes(VAL_SIDE, VAL_SIDE)},
        "checkpoint": None,
        "side_files": [{"path": "train_map.txt", "reads": "once"},
                       {"path": "val_map.txt", "reads": "once"},
                       {"path": "train.zip central directory",
                        "reads": "once per ZipFile open (2 reader threads)"},
                       {"path": "val.zip central directory", "reads": "once (main thread)"}],
        "read_pattern": "per member: lseek to its local header, read(4096) through the "
                        "ZipFile's buffered file, then one large read of the rest of the "
                        "member data; members in random order; two threads, each on its own fd",
        "bytes_per_epoch": per_epoch,
    }


def member(name):
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def to_npy(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED + 2)
    names, labels = train_names()
    with zipfile.ZipFile(os.path.join(data, "train.zip"), "w", zipfile.ZIP_STORED) as zf, \
            open(os.path.join(data, "train_map.txt"), "w") as mf:
        for name, c, (h, w) in zip(names, labels, sides()):
            base = np.linspace(0, 200, int(w), dtype=np.float32)[None, :, None] + c * 3
            img = (base + rng.integers(0, 50, (int(h), int(w), 3))).astype(np.uint8)
            zf.writestr(member(name), to_npy(img))
            mf.write("train.zip@/%s\t%d\n" % (name, c))
    with zipfile.ZipFile(os.path.join(data, "val.zip"), "w", zipfile.ZIP_STORED) as zf, \
            open(os.path.join(data, "val_map.txt"), "w") as mf:
        for i in range(N_VAL):
            c = i % N_CLASSES
            name = "val/img_%05d.npy" % i
            img = rng.integers(0, 255, (VAL_SIDE, VAL_SIDE, 3), dtype=np.uint8)
            zf.writestr(member(name), to_npy(img))
            mf.write("val.zip@/%s\t%d\n" % (name, c))


class ZipReader:
    """Caches one ZipFile per (thread, archive), like Swin's ZipReader caches per process."""
    _local = threading.local()

    @classmethod
    def read(cls, zip_path, member):
        cache = getattr(cls._local, "zips", None)
        if cache is None:
            cache = cls._local.zips = {}
        zf = cache.get(zip_path)
        if zf is None:
            zf = cache[zip_path] = zipfile.ZipFile(zip_path, "r")
        return zf.read(member)


def read_map(data, name):
    out = []
    with open(os.path.join(data, name)) as f:
        for line in f:
            loc, label = line.rstrip("\n").split("\t")
            arc, member = loc.split("@/")
            out.append((os.path.join(data, arc), member, int(label)))
    return out


def load(zip_path, member, seed):
    x = np.load(io.BytesIO(ZipReader.read(zip_path, member)))
    rng = np.random.default_rng(seed)
    top = int(rng.integers(0, x.shape[0] - CROP + 1))
    left = int(rng.integers(0, x.shape[1] - CROP + 1))
    x = x[top:top + CROP, left:left + CROP]
    if rng.random() < 0.5:
        x = x[:, ::-1]
    return np.ascontiguousarray(x)


def evaluate(val):
    n = 0
    for s in range(0, len(val), VAL_BATCH):
        xb = np.stack([np.load(io.BytesIO(ZipReader.read(a, m)))[16:80, 16:80]
                       for a, m, _ in val[s:s + VAL_BATCH]])
        assert xb.shape[1:] == (CROP, CROP, 3)
        n += len(xb)
        time.sleep(EVAL_S)
    return n


def train(data):
    items = read_map(data, "train_map.txt")
    val = read_map(data, "val_map.txt")
    assert len(items) == N_TRAIN and len(val) == N_VAL
    steps, t0 = steps_per_epoch(), time.time()
    total = 0
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for epoch in range(EPOCHS):
            order = np.random.default_rng(SEED + 100 + epoch).permutation(N_TRAIN)[:steps * BATCH]
            todo = iter(order)
            window = deque()

            def top_up():
                while len(window) < AHEAD_BATCHES * BATCH:
                    i = next(todo, None)
                    if i is None:
                        return
                    a, m, y = items[i]
                    window.append((pool.submit(load, a, m, epoch * N_TRAIN + int(i)), y))

            for step in range(steps):
                top_up()
                batch = [window.popleft() for _ in range(BATCH)]
                xb = np.stack([f.result() for f, _ in batch])
                yb = np.array([y for _, y in batch])
                assert xb.shape == (BATCH, CROP, CROP, 3) and yb.shape == (BATCH,)
                top_up()
                time.sleep(COMPUTE_S)
                total += 1
            assert not window
            evaluate(val)
    print("zip_stored_threads: %d steps, %d epochs, %.1f s" % (total, EPOCHS, time.time() - t0))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
