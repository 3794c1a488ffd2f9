"""Class-imbalanced detection-style pre-training over a folder of per-sample .pt files
(torch.save of a dict of tensors), balanced with a WeightedRandomSampler and read by a
PyTorch DataLoader with 3 persistent worker processes.

This is the common "I preprocessed my data set once into .pt files" layout: an offline
script decoded the images, resized nothing, attached the boxes and wrote one
torch.save({...}) per sample; training reloads them with torch.load inside
Dataset.__getitem__. Classes are very unbalanced (50/25/12/8/5 %), so the sampler weights
every sample by 1 / (count of its class) and draws with replacement: rare-class files are
read again and again, many frequent-class files are never read in an epoch.

Data set (DATA/, about 11 MB):
  DATA/manifest.csv         header + 360 rows "file,label,height,width,boxes" (7908 B),
                            read once by the main process (csv module) before training.
  DATA/samples/s_0000.pt .. s_0359.pt
      360 files, each torch.save of a dict {"image": uint8 tensor 3 x H x W (H and W
      uniform 64..128), "label": int64 scalar tensor, "boxes": float32 k x 4 (k = 1..6),
      "meta": int32 tensor [index, H, W]}. torch.save writes a zip archive (entries
      s_NNNN/data.pkl, s_NNNN/byteorder, s_NNNN/data/0..3, s_NNNN/version, .data/
      serialization_id, each tensor's storage 64-byte aligned): 14 to 50 KB per file
      (~30 KB mean), the image storage (3*H*W bytes) being almost all of it. Class sizes:
      178, 91, 46, 30, 15 files.

Training: the main process reads manifest.csv, builds per-sample weights 1/count[label] and
a WeightedRandomSampler(weights, num_samples=160, replacement=True, generator seeded
1701). DataLoader(batch_size=10, num_workers=3, persistent_workers=True, pin_memory=False,
prefetch_factor=2, custom collate). __getitem__ = torch.load(path) (weights_only), centre
crop of 56 x 56, float conversion. 3 epochs x 16 steps = 48 steps, 30 ms sleep per step.
The workers are forked once (first epoch) and kept for all three epochs; each epoch the
sampler draws 160 new indices in the main process (the same generator continues). No
eval, no checkpoint.

What a syscall trace sees: the main process opens manifest.csv once (openat, lseek, one
read of 7908 bytes, an empty read, close), then forks 3 worker processes which do every
data read. Per sample, in one worker, on one fd: openat(samples/s_NNNN.pt,
O_RDONLY|O_CLOEXEC), read(4096) at 0 (the zip-magic check through Python's
BufferedReader), lseek(0, SEEK_END) (file size), read(4096) at 0 again, then the zip
reader (miniz, reading through the Python file object) jumps backwards from the end:
lseek + read of the 22-byte end-of-central-directory record, the 42-byte zip64 locator,
the ~731-byte central directory, then local headers / small entries (reads of ~897,
~1015, ~1400 bytes near the end of the file, where data.pkl and the small tensors
live), lseek(0) and read(4096) + ONE big read of the rest of the image storage (10-45
KB), close. ~13 reads and ~13 lseeks per file, the whole file read (some parts twice),
in a seek-heavy non-sequential order. Batches are built by the worker that owns them: 10
samples (10 different or repeated files) per batch, round-robin over the 3 workers, up to
6 batches (2 per worker) in flight ahead of the main loop. Because draws are weighted
with replacement, the 160 draws of an epoch touch only ~112 distinct files: each of the
15 rarest-class files is read ~2.1 times per epoch, while ~84 % of the 178 files of the
biggest class are not read at all in a given epoch. 480 opens, ~6200 reads, ~16 MB read
over the run. No writes.

Usage: torch_pt_dicts_weighted_sampler.py DATA [--make | --truth]
Needs torch (run with /opt/dlio-reference/venv/bin/python); --truth works with numpy only.
"""
import csv
import json
import os
import sys
import time

import numpy as np

N_FILES, N_CLASSES = 360, 5
CLASS_P = [0.50, 0.25, 0.12, 0.08, 0.05]
BATCH, WORKERS, PREFETCH, EPOCHS, STEPS = 10, 3, 2, 3, 16
NUM_SAMPLES = BATCH * STEPS
COMPUTE_S, CROP = 0.030, 56
SEED = 1701


def spec():
    rng = np.random.default_rng(SEED)
    labels = rng.choice(N_CLASSES, N_FILES, p=CLASS_P)
    hs = rng.integers(64, 129, N_FILES)
    ws = rng.integers(64, 129, N_FILES)
    nbox = rng.integers(1, 7, N_FILES)
    return labels, hs, ws, nbox


def weights_of(labels):
    counts = np.bincount(labels, minlength=N_CLASSES)
    return 1.0 / counts[labels], counts


def truth(data):
    labels, hs, ws, nbox = spec()
    w, counts = weights_of(labels)
    p = w / w.sum()
    exp_distinct = float(np.sum(1 - (1 - p) ** NUM_SAMPLES))
    img = 3 * hs * ws
    return {
        "program": "torch_pt_dicts_weighted_sampler", "needs": ["torch"],
        "format": "torch.save zip archives (.pt), one dict of 4 tensors per file",
        "io_library": "torch.load in DataLoader worker processes",
        "data_layout": "DATA/samples/s_0000..0359.pt + DATA/manifest.csv",
        "num_files": N_FILES, "samples_per_file": 1,
        "sample_size": {"dist": "uniform H, W in 64..128, image 3*H*W uint8 + boxes",
                        "image_bytes_min": int(img.min()), "image_bytes_max": int(img.max()),
                        "image_bytes_mean": int(img.mean()),
                        "file_bytes_approx": "image bytes + ~1.3 KB zip/pickle overhead"},
        "class_counts": counts.tolist(),
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork), persistent_workers",
                    "count": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "pin_memory": False,
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "WeightedRandomSampler, weights 1/class count, replacement=True, "
                   "160 draws per epoch (torch generator seeded 1701)",
        "draws_per_epoch": NUM_SAMPLES, "file_reads_total": NUM_SAMPLES * EPOCHS,
        "expected_distinct_files_per_epoch": round(exp_distinct, 1),
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "manifest.csv", "reads": 1, "process": "main"}],
        "read_pattern": "whole small .pt file per sample (open, many small seeks/reads of "
                        "zip headers and central directory, one large read of the image "
                        "storage, close), in 3 worker processes",
    }


def make(data):
    import torch
    labels, hs, ws, nbox = spec()
    sdir = os.path.join(data, "samples")
    os.makedirs(sdir, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    rows = []
    for i in range(N_FILES):
        h, w, k = int(hs[i]), int(ws[i]), int(nbox[i])
        yy, xx = np.mgrid[0:h, 0:w]
        base = (np.sin(yy / (3 + labels[i])) * 60 + np.cos(xx / 5.0) * 60 + 128)
        img = np.clip(base[None] + rng.normal(0, 20, (3, h, w)), 0, 255).astype(np.uint8)
        x0 = rng.uniform(0, w * 0.6, k)
        y0 = rng.uniform(0, h * 0.6, k)
        boxes = np.stack([x0, y0, x0 + rng.uniform(8, w * 0.4, k),
                          y0 + rng.uniform(8, h * 0.4, k)], 1).astype(np.float32)
        name = "s_%04d.pt" % i
        torch.save({"image": torch.from_numpy(img), "label": torch.tensor(int(labels[i])),
                    "boxes": torch.from_numpy(boxes),
                    "meta": torch.tensor([i, h, w], dtype=torch.int32)},
                   os.path.join(sdir, name))
        rows.append((name, int(labels[i]), h, w, k))
    with open(os.path.join(data, "manifest.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["file", "label", "height", "width", "boxes"])
        wr.writerows(rows)


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

    class PtDataset(Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            d = torch.load(self.paths[i])
            img = d["image"]
            _, h, w = img.shape
            y0, x0 = (h - CROP) // 2, (w - CROP) // 2
            img = img[:, y0:y0 + CROP, x0:x0 + CROP].float().div_(255.0)
            return img, d["label"], d["boxes"]

    with open(os.path.join(data, "manifest.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    paths = [os.path.join(data, "samples", r["file"]) for r in rows]
    labels = np.array([int(r["label"]) for r in rows])
    w, _ = weights_of(labels)
    sampler = WeightedRandomSampler(torch.as_tensor(w, dtype=torch.double), NUM_SAMPLES,
                                    replacement=True,
                                    generator=torch.Generator().manual_seed(SEED))
    loader = DataLoader(PtDataset(paths), batch_size=BATCH, sampler=sampler,
                        num_workers=WORKERS, persistent_workers=True, pin_memory=False,
                        prefetch_factor=PREFETCH, collate_fn=collate)
    seen = np.zeros(N_CLASSES, dtype=int)
    steps = 0
    for epoch in range(EPOCHS):
        for imgs, ys, boxes in loader:
            assert imgs.shape == (BATCH, 3, CROP, CROP)
            seen += np.bincount(ys.numpy(), minlength=N_CLASSES)
            time.sleep(COMPUTE_S)
            steps += 1
    print("torch_pt_dicts_weighted_sampler: %d steps, labels seen per class %s"
          % (steps, seen.tolist()))


def collate(items):
    import torch
    return (torch.stack([it[0] for it in items]), torch.stack([it[1] for it in items]),
            [it[2] for it in items])


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
