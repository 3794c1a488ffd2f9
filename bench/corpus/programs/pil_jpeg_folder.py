"""An ImageFolder of JPEGs in class subfolders, decoded with PIL on the main thread.

DATA/train/class_k/img_NNNN.jpg: 4 classes x 40 JPEGs of random sizes (64..192 px a side,
smooth gradients plus noise, quality 90), so the file sizes vary (roughly 5-40 KiB). Each
epoch shuffles the 160 (path, label) pairs; each step opens 8 images with Image.open, decodes
them with .convert("RGB") (which loads the image), resizes to 64 x 64 and stacks them, then
sleeps 20 ms.

Usage: pil_jpeg_folder.py DATA [--make | --truth]
Fixed by the program: 160 JPEG files in 4 subfolders, 1 sample per file, batch 8, main thread
only, 2 epochs of 20 steps, 20 ms compute per step. Needs pillow and numpy.
"""
import json
import os
import random
import sys
import time

import numpy as np
from PIL import Image

CLASSES, PER_CLASS, BATCH, EPOCHS, COMPUTE_S = 4, 40, 8, 2, 0.020
SEED = 42


def listing(data):
    root = os.path.join(data, "train")
    out = []
    for label, cls in enumerate(sorted(os.listdir(root))):
        d = os.path.join(root, cls)
        out += [(os.path.join(d, n), label) for n in sorted(os.listdir(d)) if n.endswith(".jpg")]
    return out


def truth(data):
    files = listing(data) if os.path.isdir(os.path.join(data, "train")) else []
    fsz = np.array([os.path.getsize(p) for p, _ in files]) if files else np.array([0])
    return {
        "program": "pil_jpeg_folder", "needs": [], "format": "jpeg", "io_library": "PIL",
        "data_layout": "DATA/train/class_k/*.jpg (4 class subfolders)",
        "num_files": CLASSES * PER_CLASS, "samples_per_file": 1,
        "sample_size": {"dist": "varies (random image size 64..192 px)",
                        "mean": float(fsz.mean()), "min": int(fsz.min()), "max": int(fsz.max()),
                        "median": float(np.median(fsz))},
        "file_size": "as sample_size", "batch_size": BATCH,
        "readers": {"kind": "none", "count": 0}, "prefetch": 0, "epochs": EPOCHS,
        "steps_per_epoch": CLASSES * PER_CLASS // BATCH,
        "total_steps": EPOCHS * CLASSES * PER_CLASS // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "PIL: header read, then decoder reads the rest; one sample per file",
    }


def make(data):
    rng = np.random.default_rng(SEED)
    for c in range(CLASSES):
        d = os.path.join(data, "train", f"class_{c}")
        os.makedirs(d, exist_ok=True)
        for i in range(PER_CLASS):
            h, w = (int(v) for v in rng.integers(64, 193, 2))
            yy, xx = np.mgrid[0:h, 0:w]
            base = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) * 127 // (h + w))], -1)
            img = np.clip(base + rng.normal(0, 25 + 10 * c, (h, w, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(d, f"img_{i:04d}.jpg"), quality=90)


def train(data):
    files = listing(data)
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        rng.shuffle(files)
        for s in range(len(files) // BATCH):
            batch, labels = [], []
            for path, label in files[s * BATCH:(s + 1) * BATCH]:
                img = Image.open(path).convert("RGB").resize((64, 64))
                batch.append(np.asarray(img))
                labels.append(label)
            assert np.stack(batch).shape == (BATCH, 64, 64, 3)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
