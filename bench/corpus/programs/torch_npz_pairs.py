"""A PyTorch DataLoader over npz files that hold two arrays each (bug report case b).

A map-style Dataset whose sample i is array "a" (i even) or "b" (i odd) of file i // 2: every
__getitem__ opens the npz (np.load), reads the zip directory and the one member it wants and
closes it, so each file is opened twice per epoch and each opening reads half its data.
DataLoader: batch 4, shuffle (seeded generator), 2 worker processes (fork), prefetch_factor 2,
workers not persistent (started again each epoch); the main process sleeps 15 ms per batch.

Usage: torch_npz_pairs.py DATA [--make | --truth]
Fixed by the program: 48 npz files (np.savez, stored, two uint8 arrays of 48 KiB each), so 96
samples; batch 4; 2 epochs of 24 steps; 15 ms compute per step. Needs torch.
"""
import json
import os
import sys
import time

import numpy as np

FILES, ARRAY_BYTES, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 48, 48 << 10, 4, 2, 2, 2, 0.015
SEED = 77


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npz")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "torch_npz_pairs", "needs": ["torch"], "format": "npz",
        "io_library": "numpy.load (zipfile) in DataLoader workers",
        "data_layout": "DATA/*.npz", "num_files": FILES, "samples_per_file": 2,
        "sample_size": {"dist": "fixed", "bytes": ARRAY_BYTES,
                        "note": "each sample is one npz member (npy header 128 B + data)"},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None},
        "batch_size": BATCH, "readers": {"kind": "process", "count": WORKERS,
                                         "framework": "torch DataLoader", "persistent": False},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": 2 * FILES // BATCH,
        "total_steps": EPOCHS * 2 * FILES // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "samples, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "each file opened twice per epoch; each opening reads the zip "
                        "directory and one of the two members",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        rng = np.random.default_rng(SEED + i)
        np.savez(os.path.join(data, f"pair_{i:04d}.npz"),
                 a=rng.integers(0, 255, ARRAY_BYTES, dtype=np.uint8),
                 b=rng.integers(0, 255, ARRAY_BYTES, dtype=np.uint8))


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Pairs(Dataset):
        def __init__(self, root):
            self.files = sorted(os.path.join(root, n) for n in os.listdir(root)
                                if n.endswith(".npz"))

        def __len__(self):
            return 2 * len(self.files)

        def __getitem__(self, i):
            with np.load(self.files[i // 2]) as z:
                return torch.from_numpy(z["a" if i % 2 == 0 else "b"])

    loader = DataLoader(Pairs(data), batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, persistent_workers=False,
                        generator=torch.Generator().manual_seed(SEED))
    for epoch in range(EPOCHS):
        for batch in loader:
            assert batch.shape == (BATCH, ARRAY_BYTES)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
