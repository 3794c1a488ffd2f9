"""A plain training loop over npy files with a validation pass per epoch and atomic checkpoints.

DATA/train holds 192 npy files and DATA/val 64, each one sample: a 3 x 64 x 64 float32
array (48 KiB of data + a 128-byte npy header). No framework, main thread only. Each epoch
np.load-s the train files in a fresh shuffle (one random.Random for the run), 8 per step,
and sleeps 10 ms per step. Every 10 steps (counted over the run, from step 1) the "model",
a 4 MiB float32 array (1 Mi elements), is saved atomically into DATA/ckpt/: np.save into an
open file DATA/ckpt/model.npy.tmp, then os.replace onto DATA/ckpt/model.npy (one name,
overwritten each time; no fsync). At the end of every epoch a validation pass np.load-s all
64 val files in name order, 16 per step, 3 ms of compute per step.

What a syscall trace sees, all on the main thread. Per npy file read (np.load of a path):
openat, fstat, ioctl(TCGETS) (fails), lseek, a buffered 4 KiB read (magic and header), then
numpy's fromfile on a dup of the descriptor (fcntl F_DUPFD_CLOEXEC, F_GETFL, lseeks, fstat,
lseek to 0, a 128-byte read, lseek to 0) reading the file again from offset 0: 4096, then
45056, then the last 128 bytes; close of the dup, two lseeks, close: 53504 bytes read for a
49280-byte file. 8 such loads per train step, 16 per validation step; the validation pass
is 4 bursts of 16 loads in name order, 3 ms apart, at each epoch's end. Per checkpoint:
openat(model.npy.tmp, O_WRONLY|O_CREAT|O_TRUNC), fstat, ioctl, lseek, a 128-byte write (the
npy header), then on a dup of the descriptor one write of 4194304 bytes, closes, and
rename(model.npy.tmp, model.npy). 7 checkpoints, after steps 10 and 20 (epoch 1), 30 and 40
(epoch 2), 50, 60 and 70 (epoch 3): none at an epoch's end. Nothing is read from DATA/ckpt.

Usage: train_val_ckpt.py DATA [--make | --truth]
Fixed by the program: 192 train files + 64 val files of 49280 bytes, 1 sample per file,
batch 8, main thread only, 3 epochs of 24 steps, 10 ms compute per step, shuffled per epoch;
checkpoint of 4 MiB + 128 B every 10 steps (7 in all); validation of 4 steps of 16 (3 ms
each) after every epoch. Needs numpy only.
"""
import json
import os
import random
import sys
import time

import numpy as np

TRAIN, VAL, SHAPE, BATCH, VAL_BATCH, EPOCHS = 192, 64, (3, 64, 64), 8, 16, 3
COMPUTE_S, VAL_COMPUTE_S, CKPT_EVERY, MODEL_FLOATS = 0.010, 0.003, 10, 1 << 20
SAMPLE_BYTES = 4 * SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 90210


def names(data, sub):
    d = os.path.join(data, sub)
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".npy")) \
        if os.path.isdir(d) else []


def truth(data):
    steps = EPOCHS * (TRAIN // BATCH)
    fsz = [os.path.getsize(f) for f in names(data, "train")]
    return {
        "program": "train_val_ckpt", "needs": [], "format": "npy",
        "io_library": "numpy.load (main thread); np.save + os.replace for checkpoints",
        "data_layout": "DATA/train/*.npy, DATA/val/*.npy; checkpoint DATA/ckpt/model.npy",
        "num_files": TRAIN, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES, "dtype": "float32",
                        "shape": list(SHAPE)},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else SAMPLE_BYTES + 128},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": TRAIN // BATCH, "total_steps": steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "train files, per epoch",
        "eval": {"folder": "DATA/val", "files": VAL, "every_epochs": 1,
                 "batch_size": VAL_BATCH, "steps": VAL // VAL_BATCH,
                 "compute_s_per_step": VAL_COMPUTE_S, "order": "by name, no shuffle"},
        "checkpoint": {"every_steps": CKPT_EVERY, "count": steps // CKPT_EVERY,
                       "at_steps": list(range(CKPT_EVERY, steps + 1, CKPT_EVERY)),
                       "bytes": MODEL_FLOATS * 4 + 128,
                       "writer": "np.save to DATA/ckpt/model.npy.tmp, then os.replace to "
                                 "DATA/ckpt/model.npy", "fsync": False},
        "side_files": [],
        "read_pattern": "np.load of one whole file per sample, main thread, no overlap with "
                        "compute",
    }


def make(data):
    for sub, n, base in (("train", TRAIN, 0), ("val", VAL, 100_000)):
        os.makedirs(os.path.join(data, sub), exist_ok=True)
        for i in range(n):
            x = np.random.default_rng(SEED + base + i).standard_normal(SHAPE, dtype=np.float32)
            np.save(os.path.join(data, sub, f"{sub}_{i:04d}.npy"), x)


def save_checkpoint(ckpt_dir, weights):
    final = os.path.join(ckpt_dir, "model.npy")
    tmp = final + ".tmp"
    with open(tmp, "wb") as f:
        np.save(f, weights)
    os.replace(tmp, final)


def train(data):
    train_files, val_files = names(data, "train"), names(data, "val")
    ckpt_dir = os.path.join(data, "ckpt")
    os.makedirs(ckpt_dir, exist_ok=True)
    weights = np.zeros(MODEL_FLOATS, dtype=np.float32)
    rng = random.Random(SEED)
    step = 0
    for epoch in range(EPOCHS):
        order = train_files[:]
        rng.shuffle(order)
        for s in range(len(order) // BATCH):
            batch = np.stack([np.load(p) for p in order[s * BATCH:(s + 1) * BATCH]])
            assert batch.shape == (BATCH,) + SHAPE
            time.sleep(COMPUTE_S)
            step += 1
            weights += 1e-3
            if step % CKPT_EVERY == 0:
                save_checkpoint(ckpt_dir, weights)
        for s in range(len(val_files) // VAL_BATCH):
            batch = np.stack([np.load(p) for p in val_files[s * VAL_BATCH:(s + 1) * VAL_BATCH]])
            assert batch.shape == (VAL_BATCH,) + SHAPE
            time.sleep(VAL_COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
