"""Galaxy-morphology style image classification from one HDF5 file whose image dataset is
gzip-compressed in chunks of 16 images, read one sample at a time (ds[i]) in random order
by a PyTorch Dataset in 2 DataLoader worker processes (non-persistent, so re-forked every
epoch), with a torch.save checkpoint at the end of every epoch.

This is the classic "my whole data set is one .h5 file" setup (Galaxy10, PCam,
astro/particle-physics images): h5py.File is opened lazily inside each worker (h5py
handles must not be shared across fork), labels are loaded eagerly in the main process,
and __getitem__ does self.images[i]. Since the dataset is chunked 16 images per chunk and
gzip-compressed, every ds[i] makes HDF5 find the chunk in its B-tree and, unless the chunk
sits in the worker's chunk cache (h5py default: 1 MiB, 521 slots, so at most 7 of these
147,456-byte chunks), read the whole compressed chunk and inflate it to return one image.

Data set (DATA/, 11.1 MB):
  DATA/galaxies.h5
      /images   uint8 (1536, 96, 96), chunks (16, 96, 96)
                = 147,456 bytes raw each, 96 chunks, gzip level 4 (no shuffle filter):
                108-120 KB per compressed chunk (Gaussian blobs + sensor noise,
                which compresses poorly).
      /labels   int64 (1536,), contiguous (12 KB), 10 classes.
      /redshift float32 (1536,), contiguous, never read by training.
      root attrs: "survey", "version".
  DATA/ckpt/epoch_0.pt, epoch_1.pt   written by training (torch.save, 1,050,657 B each).

Training: the main process opens galaxies.h5 once, reads /labels whole and closes it. A
RandomSampler (torch generator seeded 77) shuffles the 1536 indices every epoch;
DataLoader(batch_size=24, num_workers=2, persistent_workers=False, prefetch_factor=2,
pin_memory=False). Each worker opens galaxies.h5 on its first __getitem__ and reads
images[i] (one 9,216-byte image decoded from its chunk). 2 epochs x 64 steps = 128 steps,
12 ms sleep per step. At each epoch end the main process torch.save()s a state dict
(conv weights 256 x 1024 float32 + a few small tensors, ~1.05 MB) to DATA/ckpt/epoch_E.pt.
No eval.

What a syscall trace sees: main process: openat(galaxies.h5, O_RDONLY) (HDF5 sec2
driver), ~10 small pread64s (8 to 544 bytes: superblock at 0, root object header,
B-tree "TREE", local heap "HEAP", symbol table "SNOD", /labels object header) and one
pread64 of 12,288 bytes for /labels, close. Then per epoch 2 freshly forked worker
processes (new pids each epoch, 4 in all); each opens galaxies.h5 itself (the same
small metadata preads, plus the /images object header and its chunk B-tree nodes), then
for every sample either nothing (chunk-cache hit, rare) or ONE pread64 of the whole
compressed chunk (108-120 KB, at the chunk's file offset) — no read() calls, all
positional, and never a partial chunk. Each worker handles whole batches (24 samples,
batches alternate between the 2 workers), in random order over 96 chunks, so almost every
sample causes a chunk pread (~94 % miss rate in the 7-chunk cache): ~1440 chunk preads per
epoch (~720 per worker), ~2880 over the run, ~330 MB read to deliver 28 MB of images
(the 11 MB file read ~15 times per epoch). Writes: 2 checkpoint files from the main
process at epoch ends: openat(ckpt/epoch_E.pt, O_WRONLY|O_CREAT|O_TRUNC), ONE writev of
1,049,472 bytes (zip local headers + data.pkl + the 1 MB tensor storage), one write of
1185 bytes (small tensors, central directory), close.

Usage: h5_gzip_rowwise_torch_workers.py DATA [--make | --truth]
Needs torch and h5py (run with /opt/dlio-reference/venv/bin/python); --truth is numpy only.
"""
import json
import os
import sys
import time

import numpy as np

N, H, W, CHUNK, N_CLASSES = 1536, 96, 96, 16, 10
BATCH, WORKERS, PREFETCH, EPOCHS = 24, 2, 2, 2
STEPS = N // BATCH
COMPUTE_S = 0.012
GZIP_LEVEL = 4
CKPT_SHAPE = (256, 1024)
SEED = 77


def truth(data):
    return {
        "program": "h5_gzip_rowwise_torch_workers", "needs": ["torch", "h5py"],
        "format": "HDF5 (one file), gzip-compressed chunked dataset",
        "io_library": "h5py ds[i] inside torch Dataset.__getitem__, file opened lazily "
                      "per worker",
        "data_layout": "DATA/galaxies.h5: /images uint8 (1536,96,96) chunks (16,96,96) gzip "
                       "4; /labels int64 (1536,); /redshift float32 (unused)",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed", "bytes": H * W, "shape": [H, W]},
        "chunking": {"samples_per_chunk": CHUNK, "chunk_raw_bytes": CHUNK * H * W,
                     "num_chunks": N // CHUNK, "compression": "gzip level 4",
                     "chunk_cache": "h5py default 1 MiB / 521 slots per worker "
                                    "(7 chunks)"},
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork), not persistent, "
                            "re-created each epoch", "count": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler over all 1536 samples each epoch (seeded generator)",
        "eval": None,
        "checkpoint": {"when": "end of every epoch", "how": "torch.save of a state dict",
                       "files": ["ckpt/epoch_%d.pt" % e for e in range(EPOCHS)],
                       "bytes_each_approx": CKPT_SHAPE[0] * CKPT_SHAPE[1] * 4 + 4096},
        "side_files": [{"path": "galaxies.h5:/labels", "reads": 1, "process": "main"}],
        "read_pattern": "per sample: chunk-cache lookup, on miss one pread64 of the whole "
                        "compressed chunk (16 images); random order => ~16x read "
                        "amplification",
    }


def make(data):
    import h5py
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    labels = rng.integers(0, N_CLASSES, N)
    yy, xx = np.mgrid[0:H, 0:W]
    with h5py.File(os.path.join(data, "galaxies.h5"), "w") as f:
        f.attrs["survey"] = "synthetic-DECaLS"
        f.attrs["version"] = 3
        ds = f.create_dataset("images", (N, H, W), dtype=np.uint8, chunks=(CHUNK, H, W),
                              compression="gzip", compression_opts=GZIP_LEVEL)
        for s in range(0, N, CHUNK):
            block = np.empty((CHUNK, H, W), dtype=np.uint8)
            for j in range(CHUNK):
                cy, cx = rng.uniform(30, 66, 2)
                a, b = rng.uniform(4, 20, 2)
                g = 200 * np.exp(-((yy - cy) ** 2 / (2 * a * a) + (xx - cx) ** 2 / (2 * b * b)))
                block[j] = np.clip(g + rng.normal(10, 6, (H, W)), 0, 255).astype(np.uint8)
            ds[s:s + CHUNK] = block
        f.create_dataset("labels", data=labels.astype(np.int64))
        f.create_dataset("redshift", data=rng.uniform(0, 0.4, N).astype(np.float32))


def train(data):
    import h5py
    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler

    path = os.path.join(data, "galaxies.h5")

    class GalaxyH5(Dataset):
        def __init__(self, path):
            self.path = path
            self.images = None
            with h5py.File(path, "r") as f:
                self.labels = f["labels"][:]

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            if self.images is None:
                self.h5 = h5py.File(self.path, "r")
                self.images = self.h5["images"]
            img = self.images[i]
            return torch.from_numpy(img).float().unsqueeze(0).div_(255.0), int(self.labels[i])

    ds = GalaxyH5(path)
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(SEED))
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=WORKERS,
                        persistent_workers=False, prefetch_factor=PREFETCH, pin_memory=False)
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    state = {"conv.weight": torch.zeros(CKPT_SHAPE), "fc.bias": torch.zeros(N_CLASSES),
             "step": torch.tensor(0)}
    steps, hist = 0, np.zeros(N_CLASSES, dtype=int)
    for epoch in range(EPOCHS):
        for x, y in loader:
            assert x.shape == (BATCH, 1, H, W)
            hist += np.bincount(y.numpy(), minlength=N_CLASSES)
            time.sleep(COMPUTE_S)
            steps += 1
        state["conv.weight"].add_(0.01)
        state["step"] = torch.tensor(steps)
        torch.save(state, os.path.join(ckdir, "epoch_%d.pt" % epoch))
    print("h5_gzip_rowwise_torch_workers: %d steps, class histogram %s" % (steps, hist.tolist()))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
