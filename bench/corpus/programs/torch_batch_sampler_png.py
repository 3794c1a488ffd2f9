"""A PyTorch DataLoader with a bucketing batch_sampler over PNG files, no worker processes.

DATA holds 126 PNGs in three size buckets (42 each of 64x64, 96x96 and 128x128 RGB noise over
a gradient, so they compress little). A batch_sampler groups the indices by bucket, shuffles
within each bucket and cuts batches of 6 from one bucket, then shuffles the batch order
(seeded per epoch): every batch holds images of one size, as aspect-ratio bucketing does.
DataLoader(batch_sampler=..., num_workers=0): the main process opens each PNG with PIL,
decodes it (.convert("RGB")) and turns it into a tensor; 20 ms of compute per batch.

Usage: torch_batch_sampler_png.py DATA [--make | --truth]
Fixed by the program: 126 PNG files, 1 sample per file, batch 6, num_workers 0, 2 epochs of
21 steps, 20 ms compute per step. Needs torch and pillow.
"""
import json
import os
import random
import sys
import time

import numpy as np
from PIL import Image

SIDES, PER_BUCKET, BATCH, EPOCHS, COMPUTE_S = (64, 96, 128), 42, 6, 2, 0.020
SEED = 17


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".png")) \
        if os.path.isdir(data) else []
    fsz = np.array([os.path.getsize(f) for f in files] or [0])
    return {
        "program": "torch_batch_sampler_png", "needs": ["torch"], "format": "png",
        "io_library": "PIL in torch DataLoader (main process)", "data_layout": "DATA/*.png",
        "num_files": len(SIDES) * PER_BUCKET, "samples_per_file": 1,
        "sample_size": {"dist": "trimodal (3 image sizes)", "sides": SIDES,
                        "mean": float(fsz.mean()), "min": int(fsz.min()), "max": int(fsz.max())},
        "file_size": "as sample_size", "batch_size": BATCH,
        "readers": {"kind": "none", "count": 0, "framework": "torch DataLoader num_workers=0",
                    "sampler": "bucketing batch_sampler"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": len(SIDES) * (PER_BUCKET // BATCH),
        "total_steps": EPOCHS * len(SIDES) * (PER_BUCKET // BATCH),
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "within buckets and batch order, per epoch", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "PIL PNG: open + header read, then the decoder reads the rest; the "
                        "sampler opens every file once before training to read its size",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    i = 0
    for side in SIDES:
        for _ in range(PER_BUCKET):
            yy, xx = np.mgrid[0:side, 0:side]
            base = np.stack([xx * 255 // side, yy * 255 // side, (xx ^ yy) & 255], -1)
            img = np.clip(base + rng.normal(0, 30, (side, side, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(data, f"img_{i:04d}.png"))
            i += 1


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset, Sampler

    class Pngs(Dataset):
        def __init__(self, root):
            self.files = sorted(os.path.join(root, n) for n in os.listdir(root)
                                if n.endswith(".png"))

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            img = Image.open(self.files[i]).convert("RGB")
            return torch.from_numpy(np.asarray(img).copy())

    class Buckets(Sampler):
        def __init__(self, ds):
            self.buckets = {}
            for i, f in enumerate(ds.files):
                with Image.open(f) as im:  # the size from the header, as bucketing tools do
                    self.buckets.setdefault(im.size, []).append(i)
            self.epoch = 0

        def __iter__(self):
            rng = random.Random(SEED + self.epoch)
            batches = []
            for key in sorted(self.buckets):
                idx = self.buckets[key][:]
                rng.shuffle(idx)
                batches += [idx[j:j + BATCH] for j in range(0, len(idx) - BATCH + 1, BATCH)]
            rng.shuffle(batches)
            return iter(batches)

        def __len__(self):
            return sum(len(v) // BATCH for v in self.buckets.values())

    ds = Pngs(data)
    sampler = Buckets(ds)
    loader = DataLoader(ds, batch_sampler=sampler, num_workers=0)
    for epoch in range(EPOCHS):
        sampler.epoch = epoch
        for batch in loader:
            assert batch.shape[0] == BATCH
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
