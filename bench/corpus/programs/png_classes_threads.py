"""An ImageFolder-like tree of PNGs decoded with PIL by a 4-thread pool, one batch at a time.

DATA/train/class_k/img_NNN.png: 5 classes x 40 PNGs (written with PIL, RGB, a gradient plus
strong noise so they compress little), width and height each uniform over 48..128 px
(seeded), so the files are 7 to 43 KiB (mean about 21 KiB, 4.4 MB in all). The class folders
are listed once at start (sorted) into 200 (path, label) pairs. Each epoch shuffles the
pairs (one random.Random for the run) and cuts batches of 16, dropping the last 8 of the
shuffle (200 // 16 = 12 steps); a ThreadPoolExecutor of 4 threads, created once, maps a
loader over the batch (pool.map: Image.open(path).convert("RGB") then np.asarray), so the 4
threads share each batch; then the main thread sleeps 15 ms as compute.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): at
start, on the main thread, openat(O_DIRECTORY) of DATA/train and its 5 class folders. Every
image read is on one of the 4 pool threads (none on the main thread), each thread doing 3 to
5 of a batch's 16 (mostly 4; all 4 threads take part in every batch), the threads created
during the first step. Per image: openat(O_RDONLY|O_CLOEXEC), fstat, lseek(0, SEEK_CUR),
lseek(0, SEEK_SET), a buffered read of 4096 bytes from offset 0 (signature, IHDR and the
start of the single IDAT chunk), two lseek(0, SEEK_CUR), then the decoder's request for the
rest of the IDAT is split by the buffered reader into one read of a multiple of 4096 bytes
(4096 to 36864) straight into the result and one 4096-byte refill that comes back short at
the end of the file; a last lseek(0, SEEK_CUR), close. So 3 reads per image and every file
is read exactly once per visit, front to back, no byte twice. In the first step the first
Image.open also imports PIL's plugin modules (PngImagePlugin and others) on a pool thread:
openat/read of .pyc files under site-packages. 384 image reads in all (192 an epoch; which 8
of the 200 are left out depends on the shuffle), 1152 reads, about 8.4 MB; 16 opens in a burst
at each step's start, then 15 ms with no I/O. No writes.

Usage: png_classes_threads.py DATA [--make | --truth]
Fixed by the program: 200 PNG files in 5 class subfolders, 1 sample per file, batch 16
(drop_last), 4 reader threads, 2 epochs of 12 steps, 15 ms compute per step, shuffled per
epoch, no checkpoint, no eval. Needs pillow and numpy.
"""
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

CLASSES, PER_CLASS, BATCH, THREADS, EPOCHS, COMPUTE_S = 5, 40, 16, 4, 2, 0.015
MIN_SIDE, MAX_SIDE = 48, 128
SEED = 5150


def image_sizes():
    rng = np.random.default_rng(SEED)
    wh = rng.integers(MIN_SIDE, MAX_SIDE + 1, (CLASSES * PER_CLASS, 2))
    return [(int(w), int(h)) for w, h in wh]


def listing(data):
    root = os.path.join(data, "train")
    if not os.path.isdir(root):
        return []
    out = []
    for label, cls in enumerate(sorted(os.listdir(root))):
        d = os.path.join(root, cls)
        out += [(os.path.join(d, n), label) for n in sorted(os.listdir(d)) if n.endswith(".png")]
    return out


def truth(data):
    sizes = image_sizes()
    fsz = np.array([os.path.getsize(p) for p, _ in listing(data)] or [0])
    n = CLASSES * PER_CLASS
    steps = n // BATCH
    return {
        "program": "png_classes_threads", "needs": [], "format": "png",
        "io_library": "PIL (Image.open + convert('RGB')) in a ThreadPoolExecutor",
        "data_layout": "DATA/train/class_k/*.png (5 class subfolders of 40)",
        "num_files": n, "samples_per_file": 1,
        "sample_size": {"dist": "varies (width and height uniform 48..128 px, RGB)",
                        "decoded_bytes_mean": float(np.mean([w * h * 3 for w, h in sizes])),
                        "mean": float(fsz.mean()), "min": int(fsz.min()), "max": int(fsz.max()),
                        "median": float(np.median(fsz)), "total": int(fsz.sum())},
        "file_size": "as sample_size", "batch_size": BATCH, "drop_last": True,
        "readers": {"kind": "thread", "count": THREADS,
                    "note": "pool.map over each batch of 16: the 4 threads share it"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": steps,
        "total_steps": EPOCHS * steps, "files_read_per_epoch": steps * BATCH,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch (the last 8 of each shuffle are not read)",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "per image: open, a 4 KiB buffered read (header and first IDAT "
                        "bytes), then the PNG decoder reads the rest in 64 KiB reads, close; "
                        "4 threads per batch, no overlap with compute",
    }


def make(data):
    rng = np.random.default_rng(SEED + 1)
    sizes = image_sizes()
    for c in range(CLASSES):
        d = os.path.join(data, "train", f"class_{c}")
        os.makedirs(d, exist_ok=True)
        for j in range(PER_CLASS):
            w, h = sizes[c * PER_CLASS + j]
            yy, xx = np.mgrid[0:h, 0:w]
            base = np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, 40 * c)], -1)
            img = np.clip(base + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(d, f"img_{j:03d}.png"))


def load(item):
    path, label = item
    img = Image.open(path).convert("RGB")
    return np.asarray(img), label


def train(data):
    items = listing(data)
    rng = random.Random(SEED)
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            order = items[:]
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                batch = list(pool.map(load, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH and all(x.ndim == 3 for x, _ in batch)
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
