"""Shard files of many samples loaded whole, periodic checkpoints and an eval pass per epoch.

DATA/train holds 16 npy shards, each a 32 x 2048 float32 array (32 samples of 8 KiB, 256 KiB
a shard); DATA/eval holds 4 shards of the same shape.
Each epoch shuffles the train shards; each shard is np.load-ed whole when the previous one
is used up, and its 32 samples make 2 steps of 16 (12 ms compute each). Every 10 steps
(counted over the run) the "model" (a 512 KiB float32 array and a small json of metadata)
is saved with np.save into DATA_ckpt/. After each epoch an eval pass loads the 4 eval shards
in name order, 2 steps each of 4 ms compute.

Usage: npy_shards_ckpt_eval.py DATA [--make | --truth]
Fixed by the program: 16 train shards x 32 samples of 8 KiB, batch 16, main thread only,
3 epochs of 32 steps, 12 ms compute per step; checkpoint of 512 KiB every 10 steps (9 in
all); eval over 4 shards (8 steps, 4 ms each) after every epoch. Needs numpy only.
"""
import json
import os
import random
import sys
import time

import numpy as np

TRAIN, EVAL, PER_SHARD, FLOATS, BATCH, EPOCHS = 16, 4, 32, 2048, 16, 3
COMPUTE_S, EVAL_COMPUTE_S, CKPT_EVERY, CKPT_BYTES = 0.012, 0.004, 10, 512 << 10
SEED = 99


def truth(data):
    steps = EPOCHS * TRAIN * PER_SHARD // BATCH
    train_dir = os.path.join(data, "train")
    fsz = [os.path.getsize(os.path.join(train_dir, n)) for n in sorted(os.listdir(train_dir))] \
        if os.path.isdir(train_dir) else []
    return {
        "program": "npy_shards_ckpt_eval", "needs": [], "format": "npy",
        "io_library": "numpy.load (whole shard)",
        "data_layout": "DATA/train/*.npy, DATA/eval/*.npy; checkpoints in DATA_ckpt/",
        "num_files": TRAIN, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "fixed", "bytes": FLOATS * 4},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": TRAIN * PER_SHARD // BATCH, "total_steps": steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "shards, per epoch (samples in order)",
        "eval": {"folder": "DATA/eval", "files": EVAL, "every_epochs": 1,
                 "steps": EVAL * PER_SHARD // BATCH, "compute_s_per_step": EVAL_COMPUTE_S},
        "checkpoint": {"every_steps": CKPT_EVERY, "count": steps // CKPT_EVERY,
                       "bytes": CKPT_BYTES + 128, "writer": "np.save + json"},
        "side_files": [],
        "read_pattern": "one whole-file np.load every 2 steps (a shard feeds 2 batches)",
    }


def make(data):
    rng = np.random.default_rng(SEED)
    for sub, n in (("train", TRAIN), ("eval", EVAL)):
        os.makedirs(os.path.join(data, sub), exist_ok=True)
        for i in range(n):
            np.save(os.path.join(data, sub, f"shard_{i:03d}.npy"),
                    rng.standard_normal((PER_SHARD, FLOATS)).astype(np.float32))


def shard_names(data, sub):
    d = os.path.join(data, sub)
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".npy"))


def train(data):
    train_shards, eval_shards = shard_names(data, "train"), shard_names(data, "eval")
    ckpt_dir = data.rstrip("/") + "_ckpt"
    os.makedirs(ckpt_dir, exist_ok=True)
    weights = np.random.default_rng(SEED).standard_normal(CKPT_BYTES // 4).astype(np.float32)
    rng = random.Random(SEED)
    step = 0
    for epoch in range(EPOCHS):
        order = train_shards[:]
        rng.shuffle(order)
        for path in order:
            shard = np.load(path)
            for s in range(len(shard) // BATCH):
                assert shard[s * BATCH:(s + 1) * BATCH].shape == (BATCH, FLOATS)
                time.sleep(COMPUTE_S)
                step += 1
                weights += 1e-3
                if step % CKPT_EVERY == 0:
                    np.save(os.path.join(ckpt_dir, f"model_{step:05d}.npy"), weights)
                    with open(os.path.join(ckpt_dir, f"model_{step:05d}.json"), "w") as f:
                        json.dump({"step": step, "epoch": epoch}, f)
        for path in eval_shards:
            shard = np.load(path)
            for s in range(len(shard) // BATCH):
                assert shard[s * BATCH:(s + 1) * BATCH].shape == (BATCH, FLOATS)
                time.sleep(EVAL_COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
