"""A PyTorch DataLoader with 4 persistent workers over npy files of gamma-distributed sizes.

162 npy files (1-D uint8 arrays, 128-byte npy header) whose array sizes follow a gamma
distribution (shape 2, scale 24 KiB: mean 48 KiB, mode 24 KiB, long right tail; clipped to
[4 KiB, 384 KiB]). A map-style Dataset returns torch.from_numpy(np.load(path)) for index i;
the DataLoader has batch_size 4, shuffle=True (seeded generator), drop_last=True (162 // 4 =
40 steps, the 2 files left over after the last full batch are skipped, different ones each
epoch), num_workers=4 (fork), persistent_workers=True (the same 4 worker processes serve
all 3 epochs), prefetch_factor=4 (up to 16 batches, 64 files, requested ahead), and a
collate_fn that keeps the batch as a list (the samples differ in length). The main process
sleeps 8 ms per batch.

What a syscall trace sees: 4 forked worker processes (clone, no execve), started at the
first epoch and kept to the end; every data read is in a worker, one whole batch per worker
(the DataLoader hands batches to the workers round robin: 120 files each), none in the main
process. Per file (np.load of a path): openat, fstat, ioctl(TCGETS) (fails: not a tty),
lseek(0, SEEK_CUR), a buffered read of the first 4 KiB (magic and header); then numpy's
fromfile works on a dup of the descriptor (fcntl F_DUPFD_CLOEXEC, F_GETFL, lseeks, fstat,
lseek to 0, a 128-byte read, lseek to 0 again) and reads the file again from offset 0 to
the end through stdio: a 4 KiB read, one read of the bulk, then the short tail; close of
the dup, two lseeks on the original (to 4096, then to the end), close. So the first 4 KiB
is read twice and a file costs its size + 4224 bytes of reads. Each epoch starts with a
burst of up to 16 batches read ahead (the workers run far ahead of an 8 ms step), then about
one batch read per step; nothing is read across an epoch boundary. No writes.

Usage: torch_persistent_gamma.py DATA [--make | --truth]
Fixed by the program: 162 files, 1 sample per file, batch 4, drop_last, 4 persistent
worker processes, prefetch_factor 4, 3 epochs of 40 steps, 8 ms compute per step,
shuffled per epoch, no checkpoint, no eval. Needs torch.
"""
import json
import os
import sys
import time

import numpy as np

FILES, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 162, 4, 4, 4, 3, 0.008
SHAPE_K, SCALE, LO, HI = 2.0, 24 << 10, 4 << 10, 384 << 10
SEED = 2718


def array_sizes():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.gamma(SHAPE_K, SCALE, FILES), LO, HI).astype(np.int64)


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy")) \
        if os.path.isdir(data) else []


def truth(data):
    sizes = array_sizes()
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = FILES // BATCH
    return {
        "program": "torch_persistent_gamma", "needs": ["torch"], "format": "npy",
        "io_library": "numpy.load in torch DataLoader workers",
        "data_layout": "DATA/*.npy", "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "gamma", "shape": SHAPE_K, "scale": SCALE,
                        "clip": [LO, HI], "mean": float(sizes.mean()),
                        "median": float(np.median(sizes)), "min": int(sizes.min()),
                        "max": int(sizes.max()), "total": int(sizes.sum())},
        "file_size": {"header_bytes": 128, "mean": float(np.mean(fsz)) if fsz else None,
                      "min": min(fsz, default=None), "max": max(fsz, default=None),
                      "total": int(sum(fsz))},
        "batch_size": BATCH, "drop_last": True,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": True, "start_method": "fork"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "files_read_per_epoch": steps * BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch (2 left out per epoch by drop_last)", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "np.load of one whole file per sample; each batch read by one worker "
                        "process, up to 16 batches ahead",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i, n in enumerate(array_sizes()):
        x = np.random.default_rng(SEED + 1 + i).integers(0, 255, int(n), dtype=np.uint8)
        np.save(os.path.join(data, f"item_{i:04d}.npy"), x)


def keep_list(batch):
    return batch


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class NpyFiles(Dataset):
        def __init__(self, names):
            self.names = names

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            return torch.from_numpy(np.load(self.names[i]))

    loader = DataLoader(NpyFiles(file_names(data)), batch_size=BATCH, shuffle=True,
                        drop_last=True, num_workers=WORKERS, persistent_workers=True,
                        prefetch_factor=PREFETCH, collate_fn=keep_list,
                        generator=torch.Generator().manual_seed(SEED),
                        multiprocessing_context="fork")
    for epoch in range(EPOCHS):
        steps = 0
        for batch in loader:
            assert len(batch) == BATCH and all(t.dtype == torch.uint8 for t in batch)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == FILES // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
