"""One torch.save file per sample, torch.load'ed in 2 non-persistent DataLoader workers.

64 .pt files, each torch.save of a dict {"x": 1-D uint8 tensor, "y": int label} (the default
zip container: an uncompressed zip holding data.pkl, the tensor storage as data/0 and a few
small records). Tensor sizes are bimodal: 32 small (normal around 24 KiB, sd 2 KiB) and 32
large (normal around 96 KiB, sd 8 KiB), in a seeded order. A map-style Dataset's
__getitem__(i) is torch.load(path) (weights_only default). DataLoader: batch 4, shuffle with a
seeded torch.Generator, 2 worker processes (fork), prefetch_factor 2, persistent_workers False
(the workers are forked anew each epoch), a collate_fn that keeps the list of dicts; the main
process sleeps 14 ms per batch. Each worker is handed whole batches, so a batch's 4 files are
read by one worker, one after the other. A syscall trace sees 4 worker pids over the run (2 per
epoch) and, per sample, through Python's buffered file: an openat and fstat, a 4 KiB read at
offset 0 (the zip magic check), an lseek to the end for the size, the same 4 KiB read again,
then 4 KiB at end - 4096 and small reads walking back through the end-of-central-directory
records (22, 42, 98 B) and the central directory (about 600 B), a few local headers near the
end, 4 KiB at offset ~256 (data.pkl), offset 0 a third time, then one large read of the rest of
the tensor storage, and a close: about 12 reads and 15 lseeks per file, not a front-to-back
stream.

Usage: torch_load_pt.py DATA [--make | --truth]
Fixed by the program: 64 files, 1 sample per file, batch 4, 2 worker processes, prefetch_factor
2, not persistent, 2 epochs of 16 steps, shuffled per epoch, 14 ms compute per step, no
checkpoint, no eval. Needs torch.
"""
import json
import os
import random
import sys
import time

import numpy as np

FILES, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S, CLASSES = 64, 4, 2, 2, 2, 0.014, 10
SMALL, SMALL_SD, LARGE, LARGE_SD = 24 << 10, 2 << 10, 96 << 10, 8 << 10
SEED = 2024


def tensor_sizes():
    rng = random.Random(SEED)
    big = [False] * (FILES // 2) + [True] * (FILES - FILES // 2)
    rng.shuffle(big)
    return [max(4096, int(rng.gauss(LARGE, LARGE_SD) if b else rng.gauss(SMALL, SMALL_SD)))
            for b in big]


def truth(data):
    s = tensor_sizes()
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".pt")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "torch_load_pt", "needs": ["torch"], "format": "torch.save (zip)",
        "io_library": "torch.load in torch DataLoader workers", "data_layout": "DATA/*.pt",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "bimodal", "modes": [
            {"mean": SMALL, "sd": SMALL_SD, "weight": 0.5},
            {"mean": LARGE, "sd": LARGE_SD, "weight": 0.5}],
            "mean": sum(s) / len(s), "min": min(s), "max": max(s), "total": sum(s)},
        "file_size": {"note": "tensor + zip container overhead (about 1.5 KiB)",
                      "mean": float(np.mean(fsz)) if fsz else None,
                      "min": min(fsz, default=None), "max": max(fsz, default=None),
                      "total": int(sum(fsz))},
        "batch_size": BATCH, "readers": {"kind": "process", "count": WORKERS,
                                         "framework": "torch DataLoader (map-style)",
                                         "persistent": False},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": FILES // BATCH,
        "total_steps": EPOCHS * (FILES // BATCH), "compute_s_per_step": COMPUTE_S,
        "shuffle": "samples, per epoch (seeded torch.Generator)", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "whole file per sample via torch.load (buffered, seeking): 4 KiB at "
                        "offset 0 three times, the zip directory at the end of the file, then "
                        "the records by offset, the storage in one large read; about 12 reads "
                        "and 15 lseeks per file",
    }


def make(data):
    import torch
    os.makedirs(data, exist_ok=True)
    labels = random.Random(SEED + 1)
    for i, n in enumerate(tensor_sizes()):
        x = np.random.default_rng(SEED + 2 + i).integers(0, 255, n, dtype=np.uint8)
        torch.save({"x": torch.from_numpy(x), "y": labels.randrange(CLASSES)},
                   os.path.join(data, f"sample_{i:04d}.pt"))


def keep_list(batch):
    return batch


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class PtFiles(Dataset):
        def __init__(self, root):
            self.paths = sorted(os.path.join(root, n) for n in os.listdir(root)
                                if n.endswith(".pt"))

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            return torch.load(self.paths[i])

    loader = DataLoader(PtFiles(data), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(SEED), num_workers=WORKERS,
                        prefetch_factor=PREFETCH, persistent_workers=False,
                        collate_fn=keep_list)
    for epoch in range(EPOCHS):
        for batch in loader:
            assert len(batch) == BATCH and all(
                b["x"].dtype == torch.uint8 and 0 <= b["y"] < CLASSES for b in batch)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
