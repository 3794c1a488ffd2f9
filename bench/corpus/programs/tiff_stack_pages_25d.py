"""2.5-D microscopy segmentation trainer reading multi-page TIFF stacks with PIL.

Data set (``--make``, seed 15001)
---------------------------------
``DATA/manifest.csv``            one line per volume: ``file,label,voxel_um`` (12 rows, ~0.3 KB)
``DATA/stacks/stack_000.tif`` .. ``stack_011.tif``
    12 uncompressed, little-endian multi-page TIFFs written by PIL
    (``save_all=True``).  Each stack holds 48 pages ("z-slices") of
    256 x 256 uint16 (mode ``I;16``) = 131,072 pixel bytes per page, one strip
    per page.  Layout: 8-byte header, then for every page a 128-byte IFD
    immediately followed by its 131,072 pixel bytes (page k's IFD at offset
    8 + 131,200*k).  6,297,600 bytes per stack, 75,571,200 bytes (72 MiB) total.

Training loop
-------------
A *sample* is a 2.5-D window of 3 consecutive pages ``z0, z0+1, z0+2`` with
``z0 in {0, 3, ..., 45}``: 16 non-overlapping windows per stack, 192 windows
in all, so one epoch reads every page of every stack exactly once.  The 192
(stack, z0) pairs are shuffled globally every epoch (``np.random.default_rng
(1234 + epoch)``) and cut into batches of 4 -> 48 steps/epoch, 3 epochs,
144 steps.  Batches are produced by a ``ThreadPoolExecutor(max_workers=2)``;
the main thread keeps 2 batches submitted ahead of the one it consumes.
Each window is read as: ``Image.open(path)``; for each of the 3 pages
``im.seek(z)`` and ``np.asarray(im)``; then close.  A 192x192 random crop
is taken in memory.  Compute: ``time.sleep(0.025)`` per step.  No eval, no
checkpoint, nothing is written into DATA during training.

What a syscall trace sees (measured with strace, Pillow 13.0)
--------------------------------------------------------------
* start: one ``openat`` + 8 KiB read of ``manifest.csv`` (296 bytes).
* per window (4 per step, 576 windows, 2,304 stack ``openat`` in total, all
  O_RDONLY):
  - one ``openat`` of the stack for ``Image.open``; PIL then walks the IFD
    chain from page 0 up to page z0+2 through a buffered file object: for
    each IFD an ``lseek`` to 8 + 131,200*k and a 4,096-byte ``read`` (plus
    ``lseek(0, SEEK_END)``/``SEEK_CUR`` probes; ~216 ``lseek`` per window).
    A window starting at z0 costs ~z0+10 4-KiB reads (33 on average);
    19,260 reads = 78.9 MB of mostly re-read IFD areas over the run.
  - pixel data is NOT read with read(): for each of the 3 pages PIL
    re-opens the file by name (a second ``openat``) and ``mmap``s the whole
    file (6,297,600 bytes, PROT_READ, MAP_SHARED) and copies the page's
    131,072 bytes out of the mapping (page faults only, no read syscalls).
    So 4 ``openat`` + 3 whole-file ``mmap`` per window, 393,216 pixel bytes
    touched per window, 1,572,864 per step, ~226 MB over the run.
* Windows hit stacks in random order; 2 threads issue I/O concurrently.
* No pread64, no writes; nothing is written into DATA.
"""
import csv
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

N_STACKS = 12
PAGES = 48
H = W = 256
WIN = 3
WINDOWS_PER_STACK = PAGES // WIN
BATCH = 4
EPOCHS = 3
WORKERS = 2
PREFETCH = 2
COMPUTE_S = 0.025
CROP = 192


def make(data):
    rng = np.random.default_rng(15001)
    os.makedirs(os.path.join(data, "stacks"), exist_ok=True)
    rows = []
    yy, xx = np.mgrid[0:H, 0:W]
    for s in range(N_STACKS):
        pages = []
        cy, cx = rng.uniform(60, 196, size=2)
        for z in range(PAGES):
            r = 40 + 20 * np.sin(z / PAGES * np.pi)
            blob = ((yy - cy) ** 2 + (xx - cx) ** 2 < r * r) * 20000
            noise = rng.integers(0, 4000, size=(H, W))
            arr = (blob + noise).astype(np.uint16)
            pages.append(Image.fromarray(arr))
        fn = "stack_%03d.tif" % s
        pages[0].save(os.path.join(data, "stacks", fn), save_all=True,
                      append_images=pages[1:])
        rows.append((fn, int(rng.integers(0, 4)), round(float(rng.uniform(0.1, 0.4)), 3)))
    with open(os.path.join(data, "manifest.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "label", "voxel_um"])
        w.writerows(rows)


def read_window(data, fn, z0, seed):
    with Image.open(os.path.join(data, "stacks", fn)) as im:
        planes = []
        for z in range(z0, z0 + WIN):
            im.seek(z)
            planes.append(np.asarray(im, dtype=np.uint16))
    vol = np.stack(planes)
    r = np.random.default_rng(seed)
    y, x = r.integers(0, H - CROP + 1, size=2)
    return vol[:, y:y + CROP, x:x + CROP]


def load_batch(data, items, seed):
    xs = [read_window(data, fn, z0, seed + i) for i, (fn, z0, _) in enumerate(items)]
    labels = np.array([lab for _, _, lab in items], dtype=np.int64)
    return np.stack(xs).astype(np.float32) / 65535.0, labels


def train(data):
    with open(os.path.join(data, "manifest.csv"), newline="") as f:
        meta = list(csv.DictReader(f))
    windows = [(m["file"], z0, int(m["label"]))
               for m in meta for z0 in range(0, PAGES - WIN + 1, WIN)]
    steps_total = 0
    t0 = time.time()
    w = np.zeros((WIN,), dtype=np.float32)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for epoch in range(EPOCHS):
            order = np.random.default_rng(1234 + epoch).permutation(len(windows))
            batches = [[windows[i] for i in order[b:b + BATCH]]
                       for b in range(0, len(order), BATCH)]
            futs = [pool.submit(load_batch, data, batches[i], epoch * 100000 + i * BATCH)
                    for i in range(min(PREFETCH, len(batches)))]
            for i in range(len(batches)):
                nxt = i + PREFETCH
                if nxt < len(batches):
                    futs.append(pool.submit(load_batch, data, batches[nxt],
                                            epoch * 100000 + nxt * BATCH))
                x, y = futs[i].result()
                futs[i] = None
                w += 1e-3 * x.mean(axis=(0, 2, 3))
                time.sleep(COMPUTE_S)
                steps_total += 1
            print("epoch %d done, steps %d, %.2fs" % (epoch, steps_total, time.time() - t0))
    print("trained %d steps in %.2fs" % (steps_total, time.time() - t0))


def truth():
    page = H * W * 2
    return {
        "program": "tiff_stack_pages_25d",
        "needs": [],
        "format": "tiff (multi-page, uncompressed, uint16)",
        "io_library": "PIL",
        "data_layout": "12 multi-page TIFF stacks (48 pages of 256x256 uint16, one strip/page, pixels mmapped by PIL); "
                       "sample = 3 consecutive pages read via Image.seek; plus manifest.csv",
        "num_files": N_STACKS,
        "samples_per_file": WINDOWS_PER_STACK,
        "sample_size": {"dist": "fixed", "min": WIN * page, "max": WIN * page, "mean": WIN * page},
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": WORKERS},
        "prefetch": PREFETCH,
        "epochs": EPOCHS,
        "steps_per_epoch": N_STACKS * WINDOWS_PER_STACK // BATCH,
        "total_steps": EPOCHS * N_STACKS * WINDOWS_PER_STACK // BATCH,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": True,
        "eval": None,
        "checkpoint": None,
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: tiff_stack_pages_25d.py DATA [--make|--truth]")
    d = sys.argv[1]
    if "--truth" in sys.argv:
        print(json.dumps(truth()))
    elif "--make" in sys.argv:
        make(d)
    else:
        train(d)
