"""A PyTorch DataLoader with 4 persistent workers, torch.save checkpoints and an eval pass.

DATA/train holds 128 npy files (uint8, 64 KiB of data each) and DATA/eval 32 more. The train
DataLoader: map-style Dataset (np.load per sample), batch 8, shuffle (seeded generator),
4 worker processes (fork), prefetch_factor 3, persistent_workers=True (the same workers all
run). The main process sleeps 20 ms per batch and every 6 steps (counted over the run)
torch.save()s a checkpoint of a 1 MiB float32 "model" plus an "optimizer" state of the same
size (about 2 MiB a file) into DATA_ckpt/. After each epoch an eval pass reads DATA/eval
through a second DataLoader (batch 8, 2 workers, not persistent, no shuffle) with 5 ms of
compute per batch.

Usage: torch_ckpt_eval.py DATA [--make | --truth]
Fixed by the program: 128 train files + 32 eval files of 64 KiB + 128 B, 1 sample per file,
batch 8, 3 epochs of 16 steps, 20 ms compute per step, checkpoint every 6 steps (8 in all),
eval of 4 steps after every epoch. Needs torch.
"""
import json
import os
import sys
import time

import numpy as np

TRAIN, EVAL, SAMPLE, BATCH, WORKERS, PREFETCH, EPOCHS = 128, 32, 64 << 10, 8, 4, 3, 3
EVAL_WORKERS, COMPUTE_S, EVAL_COMPUTE_S, CKPT_EVERY, MODEL_FLOATS = 2, 0.020, 0.005, 6, 1 << 18
SEED = 2024


def truth(data):
    steps = EPOCHS * TRAIN // BATCH
    return {
        "program": "torch_ckpt_eval", "needs": ["torch"], "format": "npy",
        "io_library": "numpy.load in DataLoader workers; torch.save",
        "data_layout": "DATA/train/*.npy, DATA/eval/*.npy; checkpoints in DATA_ckpt/",
        "num_files": TRAIN, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE},
        "file_size": {"dist": "fixed", "bytes": SAMPLE + 128},
        "batch_size": BATCH, "readers": {"kind": "process", "count": WORKERS,
                                         "framework": "torch DataLoader", "persistent": True},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": TRAIN // BATCH, "total_steps": steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "files, per epoch",
        "eval": {"folder": "DATA/eval", "files": EVAL, "every_epochs": 1,
                 "steps": EVAL // BATCH, "compute_s_per_step": EVAL_COMPUTE_S,
                 "workers": EVAL_WORKERS},
        "checkpoint": {"every_steps": CKPT_EVERY, "count": steps // CKPT_EVERY,
                       "bytes": 2 * MODEL_FLOATS * 4, "writer": "torch.save (zip)"},
        "side_files": [],
        "read_pattern": "np.load of one whole file per sample, in 4 worker processes",
    }


def make(data):
    for sub, n in (("train", TRAIN), ("eval", EVAL)):
        os.makedirs(os.path.join(data, sub), exist_ok=True)
        for i in range(n):
            x = np.random.default_rng(SEED + i + (0 if sub == "train" else 10_000)).integers(
                0, 255, SAMPLE, dtype=np.uint8)
            np.save(os.path.join(data, sub, f"img_{i:04d}.npy"), x)


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Files(Dataset):
        def __init__(self, root):
            self.names = sorted(os.path.join(root, n) for n in os.listdir(root)
                                if n.endswith(".npy"))

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            return torch.from_numpy(np.load(self.names[i]))

    train_loader = DataLoader(Files(os.path.join(data, "train")), batch_size=BATCH,
                              shuffle=True, num_workers=WORKERS, prefetch_factor=PREFETCH,
                              persistent_workers=True,
                              generator=torch.Generator().manual_seed(SEED))
    eval_loader = DataLoader(Files(os.path.join(data, "eval")), batch_size=BATCH,
                             shuffle=False, num_workers=EVAL_WORKERS)
    ckpt_dir = data.rstrip("/") + "_ckpt"
    os.makedirs(ckpt_dir, exist_ok=True)
    model = torch.zeros(MODEL_FLOATS)
    optim = torch.zeros(MODEL_FLOATS)
    step = 0
    for epoch in range(EPOCHS):
        for batch in train_loader:
            assert batch.shape == (BATCH, SAMPLE)
            time.sleep(COMPUTE_S)
            step += 1
            model += 1
            if step % CKPT_EVERY == 0:
                torch.save({"model": model, "optimizer": optim, "step": step},
                           os.path.join(ckpt_dir, f"ckpt_{step:05d}.pt"))
        for batch in eval_loader:
            assert batch.shape == (BATCH, SAMPLE)
            time.sleep(EVAL_COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
