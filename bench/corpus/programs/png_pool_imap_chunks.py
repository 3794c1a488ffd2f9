"""PNG folder with two image-size classes decoded by Pillow in a multiprocessing.Pool(2)
through pool.imap(..., chunksize=8), in a new shuffled order every epoch.

DATA/png/img_00000.png .. img_00399.png: 400 RGB PNGs; each is 256 x 256 with probability
0.3 (seeded: 113 large files of 115-190 KB, mean 165 KB) else 64 x 64 (287 small files of
7-12 KB, mean 10.4 KB); the pixels are a smooth gradient plus noise whose amplitude varies
per image, so sizes also vary inside each class (21.6 MB in all). DATA/labels.json maps
file name -> class (0-9).

The main process reads labels.json once, creates multiprocessing.Pool(2) (fork) once for
the whole run, and each epoch calls pool.imap(load, paths_in_epoch_order, chunksize=8)
with the order a permutation seeded 9001 + epoch. The worker function load(path) does
Image.open(path) -> .convert("RGB") -> .resize((64, 64), BILINEAR) -> np.asarray (12 KB
back to the main process). imap has NO backpressure: the pool's task-handler thread queues
all 50 chunks of the epoch at once and the two workers take chunks of 8 paths as they free
up, so they decode the whole epoch as fast as they can (~0.3-0.5 s of decoding per epoch),
well ahead of the consumer; results come back in order. The main process stacks 16
results into a batch and sleeps 30 ms per step. 3 epochs of 25 steps. After each epoch it
appends one JSON line ({"epoch", "steps", "seconds"}) to DATA/train_log.jsonl (opened in
append mode, written, closed).

What a syscall trace sees (strace -f -e trace=openat,read,write,lseek): the main process
opens labels.json (one read of the whole 8000-byte file + an EOF read) and, after each
epoch, DATA/train_log.jsonl (O_WRONLY|O_CREAT|O_APPEND, one write of ~44 bytes, close). It
never opens a PNG. The 2 pool workers (the same 2 PIDs for all 3 epochs) each open about
half the PNGs per epoch, 8 files in a row per chunk, one file at a time, both workers
concurrently; on its first task each worker also imports PIL (reads of .py/.pyc/.so files).
Per PNG, through a 4 KiB-buffered Python file object: openat(O_RDONLY), a few
lseek(0, SEEK_CUR), a first read of 4096 bytes (signature + IHDR), then the IDAT data:
small files: 1-2 more reads of 4096 (the last one short), so 2-3 reads per file; large
files: 4096, 61440, 4096, 61440, 4096, then the remainder (e.g. 45056 or 49152) and a last
short 4096 read, so 5-7 reads per file (7 for most); no EOF read; each file read exactly
once, close.
Per epoch 400 files, 21.6 MB; the reading happens in a burst in the first ~half of each
epoch (~0.35 s, decode-bound workers, 2 files at a time) and then the workers idle while the
main process works through the remaining steps.

Usage: png_pool_imap_chunks.py DATA [--make | --truth]
Fixed by the program: 400 PNG files (bimodal: 287 of 64 x 64, 113 of 256 x 256), batch 16,
2 pool worker processes (fork, persistent across epochs), imap chunksize 8 with unbounded
read-ahead, 3 epochs of 25 steps, 30 ms compute per step, no checkpoint, no eval, a small
log file appended each epoch. Needs pillow.
"""
import json
import os
import sys
import time

import numpy as np

N, SMALL, LARGE, P_LARGE, OUT = 400, 64, 256, 0.3, 64
BATCH, WORKERS, CHUNKSIZE, EPOCHS, COMPUTE_S = 16, 2, 8, 3, 0.030
SEED = 9001


def png_paths(data):
    return [os.path.join(data, "png", "img_%05d.png" % i) for i in range(N)]


def classes():
    rng = np.random.default_rng(SEED)
    return np.where(rng.random(N) < P_LARGE, LARGE, SMALL)


def truth(data):
    side = classes()
    paths = png_paths(data)
    sizes = [os.path.getsize(p) for p in paths if os.path.exists(p)]
    n_large = int((side == LARGE).sum())
    steps = N // BATCH
    small = [s for s, k in zip(sizes, side) if k == SMALL] if sizes else []
    large = [s for s, k in zip(sizes, side) if k == LARGE] if sizes else []
    return {
        "program": "png_pool_imap_chunks", "needs": ["pillow"], "format": "png",
        "io_library": "PIL.Image.open in multiprocessing.Pool workers (imap, chunksize 8)",
        "data_layout": "DATA/png/img_00000..00399.png + DATA/labels.json",
        "num_files": N, "samples_per_file": 1,
        "sample_size": {"dist": "bimodal", "classes": {
            "64x64": {"count": N - n_large, "mean_file_bytes":
                      int(np.mean(small)) if small else None},
            "256x256": {"count": n_large, "mean_file_bytes":
                        int(np.mean(large)) if large else None}},
            "total_bytes": sum(sizes) if sizes else None},
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "multiprocessing.Pool",
                    "persistent": True, "start_method": "fork",
                    "note": "one Pool for the whole run; each task = a chunk of 8 paths"},
        "prefetch": {"kind": "unbounded (imap queues all chunks of the epoch at once)",
                     "chunksize": CHUNKSIZE},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "permutation of the 400 files per epoch (seed 9001 + epoch)",
        "eval": None, "checkpoint": None,
        "side_files": ["DATA/labels.json (read once by main)",
                       "DATA/train_log.jsonl (appended once per epoch by main)"],
        "file_opens": {"per_epoch": N, "total": N * EPOCHS, "by": "pool workers"},
        "read_pattern": "each PNG read whole, once per epoch, through a 4 KiB buffer: small "
                        "files 2-3 reads of <=4096, large files 5-7 reads (4096, 61440, 4096, "
                        "61440, 4096, rest, short 4096); all reads of an epoch in a burst "
                        "in its first half",
    }


def make(data):
    from PIL import Image
    os.makedirs(os.path.join(data, "png"), exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    labels = {}
    for p, k in zip(png_paths(data), classes()):
        yy, xx = np.mgrid[0:k, 0:k].astype(np.float32) / k
        base = np.stack([yy, xx, (xx + yy) / 2], axis=-1) * 200
        amp = rng.uniform(4, 40)
        img = np.clip(base + rng.normal(0, amp, (k, k, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(img, "RGB").save(p)
        labels[os.path.basename(p)] = int(rng.integers(10))
    with open(os.path.join(data, "labels.json"), "w") as f:
        json.dump(labels, f)


def load(path):
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB").resize((OUT, OUT), Image.BILINEAR)
        return np.asarray(im)


def train(data):
    import multiprocessing as mp
    with open(os.path.join(data, "labels.json")) as f:
        labels = json.load(f)
    paths = np.array(png_paths(data))
    log = os.path.join(data, "train_log.jsonl")
    with mp.get_context("fork").Pool(WORKERS) as pool:
        for epoch in range(EPOCHS):
            t0 = time.time()
            order = paths[np.random.default_rng(SEED + epoch).permutation(N)]
            xs, ys, steps = [], [], 0
            for p, x in zip(order, pool.imap(load, order, chunksize=CHUNKSIZE)):
                xs.append(x)
                ys.append(labels[os.path.basename(p)])
                if len(xs) == BATCH:
                    xb, yb = np.stack(xs), np.array(ys)
                    assert xb.shape == (BATCH, OUT, OUT, 3) and yb.shape == (BATCH,)
                    xs, ys = [], []
                    time.sleep(COMPUTE_S)
                    steps += 1
            assert steps == N // BATCH
            with open(log, "a") as f:
                f.write(json.dumps({"epoch": epoch, "steps": steps,
                                    "seconds": round(time.time() - t0, 3)}) + "\n")


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
