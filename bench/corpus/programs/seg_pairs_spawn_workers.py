"""Segmentation pairs (a PNG image + an npy mask per sample) in 2 SPAWNED DataLoader workers.

DATA/images/NNNN.png: 160 RGB 64 x 64 PNGs written by PIL (class blobs plus noise of varying
strength, so 6.6 to 12.1 KB, mean 10.4 KB) and DATA/masks/NNNN.npy: the matching 64 x 64
uint8 class maps (4096 bytes + a 128-byte npy header = 4224 bytes): TWO files per sample,
paired by name. The main process lists DATA/images once (os.listdir) to build the pairs.
A map-style Dataset (module level, so it pickles) returns, for index i, the PIL-decoded
image (Image.open + convert) and np.load of the mask, read back to back in the same
worker. DataLoader: batch 8, shuffle=True (torch generator seeded 3141, a new permutation
per epoch), num_workers=2, multiprocessing_context="spawn" (the default on macOS/Windows;
fresh interpreters, not forks), persistent_workers=True, prefetch_factor 3, custom collate
(stack, HWC -> CHW). The main process sleeps 15 ms per batch. 2 epochs of 20 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write,mmap):
the main process imports torch (it runs "/sbin/ldconfig -p" in a child), lists DATA/images
(openat O_DIRECTORY; no data file is read by the main process at all). Creating the
iterator starts 3 processes by fork+EXECVE of the venv python: multiprocessing's
resource_tracker ("-c from multiprocessing.resource_tracker ...") and the 2 workers ("-c
from multiprocessing.spawn import spawn_main ... --multiprocessing-fork"). Each worker
re-imports everything from scratch: tens of thousands of openat/read/mmap calls on
.py/.pyc/.so files of the standard library, numpy and torch (plus its own "ldconfig -p"
child), and the program file itself (imported as __mp_main__), taking 1.5 s or more before
its first data read; the first sample in each worker also pulls in PIL's PNG plugin. The
workers are kept for both epochs. Per sample, in one worker: the PNG: openat, fstat,
lseek(0, SEEK_CUR), lseek(0, SEEK_SET), read(4096) (signature, IHDR), 2 lseek(SEEK_CUR),
then 4096-byte reads to the end (the last short; 2 or 3 reads, no zero-length read),
lseek(SEEK_CUR), close; then the mask (np.load): openat, fstat, lseek, a buffered 4096-byte
read, then on a dup of the descriptor (the dup is not in the trace set) lseek, fstat, lseek
0, read 128, lseek 0, read 4096, read 4096 (short: 128), close of the dup, lseek(4096),
lseek(4224), close: 4 reads, 8448 bytes, for the 4224-byte file. So about 7 reads and 2
opens per sample, PNG first. Each worker reads 10 whole batches per epoch (80 samples; the
2 workers alternate batches); each epoch starts with the workers reading 6 batches (2
workers x prefetch 3 = 48 samples = 96 files) back to back, as fast as they can; the first
step starts as soon as batch 0 is complete, so this burst overlaps the first few steps;
then about one batch (8 samples, 16 files) per 15 ms step, and the last steps of an epoch
(up to 6) read nothing. 320 sample reads,
640 file reads, 2 x (1.67 MB of PNG + 0.68 MB of npy) read from 2.35 MB on disk. No
writes to files. Run time is about 5 s, mostly the 2 workers' torch imports.

Usage: seg_pairs_spawn_workers.py DATA [--make | --truth]
Fixed by the program: 160 samples of 2 files (PNG + npy), batch 8, 2 persistent SPAWNED
worker processes, prefetch_factor 3, 2 epochs of 20 steps, 15 ms compute per step,
shuffled per epoch, no checkpoint, no eval. Needs torch and pillow.
"""
import json
import os
import sys
import time

import numpy as np

PAIRS, SIDE, CLASSES, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = \
    160, 64, 5, 8, 2, 3, 2, 0.015
SEED = 3141


def pair_names(data):
    d = os.path.join(data, "images")
    if not os.path.isdir(d):
        return []
    stems = sorted(n[:-4] for n in os.listdir(d) if n.endswith(".png"))
    return [(os.path.join(data, "images", s + ".png"), os.path.join(data, "masks", s + ".npy"))
            for s in stems]


class SegPairs:
    """Map-style dataset: sample i = (PNG image i, npy mask i). Module level, so spawn can
    pickle it; torch is imported lazily so --make/--truth do not need it."""

    def __init__(self, pairs):
        self.pairs = pairs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        from PIL import Image
        img_p, mask_p = self.pairs[i]
        with Image.open(img_p) as im:
            img = np.asarray(im.convert("RGB"))
        mask = np.load(mask_p)
        assert img.shape[:2] == mask.shape
        return img, mask


def collate(items):
    import torch
    x = torch.from_numpy(np.stack([a for a, _ in items])).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(np.stack([b for _, b in items])).long()
    return x, y


def truth(data):
    pairs = pair_names(data)
    isz = [os.path.getsize(a) for a, _ in pairs]
    msz = [os.path.getsize(b) for _, b in pairs]
    steps = PAIRS // BATCH
    return {
        "program": "seg_pairs_spawn_workers", "needs": ["torch", "pillow"],
        "format": "png image + npy mask per sample",
        "io_library": "PIL.Image.open + numpy.load in torch DataLoader spawn workers",
        "data_layout": "DATA/images/NNNN.png, DATA/masks/NNNN.npy (same stem)",
        "num_files": 2 * PAIRS, "samples_per_file": 1, "files_per_sample": 2,
        "sample_size": {"image": {"dist": "png, variable", "decoded_bytes": SIDE * SIDE * 3,
                                  "mean": float(np.mean(isz)) if isz else None,
                                  "min": min(isz, default=None), "max": max(isz, default=None)},
                        "mask": {"dist": "fixed", "bytes": SIDE * SIDE, "dtype": "uint8"}},
        "file_size": {"png": {"mean": float(np.mean(isz)) if isz else None,
                              "min": min(isz, default=None), "max": max(isz, default=None),
                              "total": int(sum(isz))},
                      "npy": {"bytes": msz[0] if msz else SIDE * SIDE + 128,
                              "header_bytes": 128}},
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": True, "start_method": "spawn",
                    "note": "spawned workers are fresh interpreters (execve of python) that "
                            "re-import the program, numpy and torch before reading"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler (shuffle=True, torch generator seeded 3141), a new "
                   "permutation per epoch; both files of a sample are read together",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "per sample: whole PNG (PIL) then whole npy (np.load), same worker, "
                        "back to back",
    }


def make(data):
    from PIL import Image
    os.makedirs(os.path.join(data, "images"), exist_ok=True)
    os.makedirs(os.path.join(data, "masks"), exist_ok=True)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE]
    for i in range(PAIRS):
        rng = np.random.default_rng(SEED + i)
        mask = np.zeros((SIDE, SIDE), np.uint8)
        for c in range(1, CLASSES):
            cy, cx, r = rng.integers(8, SIDE - 8, 2).tolist() + [int(rng.integers(4, 20))]
            mask[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = c
        noise = float(rng.uniform(2, 40))  # varies the PNG's compressed size a lot
        img = mask[..., None] * np.array([40, 25, 15]) + rng.normal(60, noise, (SIDE, SIDE, 3))
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
            os.path.join(data, "images", f"{i:04d}.png"))
        np.save(os.path.join(data, "masks", f"{i:04d}.npy"), mask)


def train(data):
    import torch
    from torch.utils.data import DataLoader

    ds = SegPairs(pair_names(data))
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        collate_fn=collate, prefetch_factor=PREFETCH, persistent_workers=True,
                        generator=torch.Generator().manual_seed(SEED),
                        multiprocessing_context="spawn")
    for epoch in range(EPOCHS):
        steps = 0
        for x, y in loader:
            assert x.shape == (BATCH, 3, SIDE, SIDE) and y.shape == (BATCH, SIDE, SIDE)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == PAIRS // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
