"""Folder of small torch.save'd dict files read by a torch DataLoader with 2 PERSISTENT
workers, an evaluation pass over a separate val folder after every epoch (its own 2
persistent workers), and a torch.save checkpoint per epoch.

DATA/train/sample_00000.pt .. sample_00383.pt (384 files) and DATA/val/sample_00000.pt ..
sample_00095.pt (96 files). Each file is torch.save({"image": uint8 tensor 3 x S x S,
"label": int64 scalar tensor, "id": int}) with S drawn from {36, 40, 48} per sample (seeded),
i.e. a zip archive of 5773, 6733 or 8845 bytes (3888, 4800 or 6912 bytes of pixel storage
+ ~1.9 KB of zip entries / pickle / central directory; 4.4 MB in all). __getitem__(i)
does torch.load(path, weights_only=True) of the whole file, then a deterministic random
32 x 32 crop (torch generator seeded per index, so the same crop every epoch) -> float
3 x 32 x 32 / 255.

Train loader: batch 16, shuffle=True (RandomSampler with a torch generator seeded 2718, a new
permutation each epoch), num_workers=2, persistent_workers=True, pin_memory=False,
prefetch_factor 2, fork: its 2 workers are forked at the first epoch and live for the whole
run. Val loader: batch 32, shuffle=False (files in order), num_workers=2,
persistent_workers=True: 2 more workers, forked at the first eval and kept. Main process:
20 ms sleep per train step, 5 ms per val batch. After each epoch's eval the main process
saves a checkpoint torch.save({"epoch", "model": Linear(3072, 10).state_dict(), "val_batches"})
to DATA/ckpt/epoch_N.pt (124773 bytes). 3 epochs x 24 train steps, each followed by 3 val batches.

What a syscall trace sees (strace -f -e trace=openat,read,lseek,write,writev,close):
importing torch opens many files and runs "/sbin/ldconfig -p" and "uname -p" (not data). The
main process never opens a sample file: it lists DATA/train and DATA/val once (getdents),
mkdirs DATA/ckpt, and writes the checkpoints. Four worker processes in all (2 train, 2 val),
each alive from its first use to the end of the run: the same 2 PIDs read the train set in
all 3 epochs (576 file loads each), and the same 2 val PIDs read the val set 3 times (val
worker 0 loads batches 0 and 2 = 64 files per eval, worker 1 batch 1 = 32). Per sample file,
in the worker that loads it: openat(O_RDONLY), an fstat, then torch's zip reader goes
through a 4 KiB-buffered Python file object with 16-17 lseeks (SEEK_CUR/END/SET) and 12
read() calls: 4096@0, 4096@0 again (after an lseek(0, SEEK_END) size probe), a 4096 read
ending at the file end, then the zip end records (22, 42, 98 bytes), the central directory
(661), two small local-header reads (827, 949), a 4096 read at 339 (data.pkl), and 2-3 reads
(4096 + remainder, e.g. 2637 or 1677) for the pixel storage, then close. So every file is
read ~3.5x over (3.1x-3.9x of its 5.8-8.8 KB; 35.4 MB read in all for 3 x 3.6 MB of files),
in 12 small reads per file. Train workers alternate batches (worker 0 loads batches 0, 2, 4,
...: 16 files in a burst), 2 workers x prefetch 2 = 4 batches (64 files) in flight: at each
epoch start a burst of ~64 file loads, then ~16 per 20 ms step, the last ~3 steps of an
epoch read nothing, and with persistent workers there is no re-fork gap between epochs
(under strace the slowed-down workers become the bottleneck and the loads form a steady
stream of ~40-50 files per 100 ms instead). Each eval: the 2 val workers load all 96 val
files (3 batches of 32, in file order) in one burst. Writes, after each eval, in the main
process: openat(DATA/ckpt/epoch_N.pt, O_WRONLY|O_CREAT|O_TRUNC), ONE writev of 123776 bytes
(an 896-byte zip header part + the 122880-byte weight storage), one write of 997 bytes
(bias, central directory), close: 124773 bytes per checkpoint, 3 checkpoints.

Usage: pt_dicts_persistent_eval.py DATA [--make | --truth]
Fixed by the program: 384 train + 96 val .pt files (5.8-8.8 KB), batch 16 (val 32), 2
persistent train workers + 2 persistent val workers, prefetch_factor 2, 3 epochs of 24
steps, 20 ms compute per step (5 ms per val batch), eval after every epoch, torch.save
checkpoint per epoch. Needs torch.
"""
import json
import os
import sys
import time

import numpy as np

N_TRAIN, N_VAL, SIZES, CROP = 384, 96, (36, 40, 48), 32
BATCH, VAL_BATCH, WORKERS, PREFETCH, EPOCHS = 16, 32, 2, 2, 3
COMPUTE_S, VAL_COMPUTE_S = 0.020, 0.005
SEED = 2718


def split_paths(data, split, n):
    return [os.path.join(data, split, "sample_%05d.pt" % i) for i in range(n)]


def side_lengths(split, n):
    rng = np.random.default_rng([SEED, 0 if split == "train" else 1])
    return rng.choice(SIZES, n)


def truth(data):
    steps = N_TRAIN // BATCH
    val_steps = -(-N_VAL // VAL_BATCH)
    sizes = []
    for split, n in (("train", N_TRAIN), ("val", N_VAL)):
        for p in split_paths(data, split, n):
            if os.path.exists(p):
                sizes.append(os.path.getsize(p))
    s = side_lengths("train", N_TRAIN)
    return {
        "program": "pt_dicts_persistent_eval", "needs": ["torch"],
        "format": "torch.save zip files (dict of tensors), one sample per file",
        "io_library": "torch.load(path, weights_only=True) in DataLoader workers",
        "data_layout": "DATA/train/sample_00000..00383.pt, DATA/val/sample_00000..00095.pt",
        "num_files": N_TRAIN + N_VAL, "num_train_files": N_TRAIN, "num_val_files": N_VAL,
        "samples_per_file": 1,
        "sample_size": {"dist": "three sizes", "pixel_bytes": [3 * k * k for k in SIZES],
                        "side_counts_train": {int(k): int((s == k).sum()) for k in SIZES},
                        "file_bytes_min": min(sizes) if sizes else None,
                        "file_bytes_max": max(sizes) if sizes else None,
                        "file_bytes_total": sum(sizes) if sizes else None},
        "batch_size": BATCH, "val_batch_size": VAL_BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": True, "start_method": "fork",
                    "note": "2 train workers + 2 separate val workers, all persistent "
                            "(4 worker processes for the whole run)"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler (torch generator seeded 2718), new permutation per epoch; "
                   "val in order",
        "eval": {"every": "epoch", "files": N_VAL, "batch_size": VAL_BATCH,
                 "steps": val_steps, "compute_s_per_step": VAL_COMPUTE_S,
                 "workers": WORKERS, "persistent": True},
        "checkpoint": {"every": "epoch", "dir": "DATA/ckpt", "writer": "torch.save",
                       "files": ["epoch_%d.pt" % e for e in range(EPOCHS)],
                       "bytes": 124773},
        "side_files": ["DATA/ckpt/epoch_N.pt (written)"],
        "file_opens": {"per_epoch": N_TRAIN + N_VAL, "total": EPOCHS * (N_TRAIN + N_VAL)},
        "read_pattern": "each sample file read by torch.load through a 4 KiB-buffered "
                        "file object: 12 reads (22-4096 bytes) + 16-17 lseeks per file, "
                        "~3.5x the file size read; one file per sample",
    }


def make(data):
    import torch
    for split, n in (("train", N_TRAIN), ("val", N_VAL)):
        os.makedirs(os.path.join(data, split), exist_ok=True)
        rng = np.random.default_rng([SEED, 10 if split == "train" else 11])
        for i, (p, k) in enumerate(zip(split_paths(data, split, n), side_lengths(split, n))):
            img = torch.from_numpy(rng.integers(0, 256, (3, k, k), dtype=np.uint8))
            torch.save({"image": img, "label": torch.tensor(int(rng.integers(10))), "id": i}, p)


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class PtFolder(Dataset):
        def __init__(self, root):
            self.paths = sorted(os.path.join(root, n) for n in os.listdir(root)
                                if n.endswith(".pt"))
            self.epoch = 0

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            d = torch.load(self.paths[i], weights_only=True)
            img = d["image"]
            g = torch.Generator().manual_seed(SEED * 1000 + i)
            top, left = (int(v) for v in torch.randint(0, img.shape[1] - CROP + 1, (2,),
                                                       generator=g))
            x = img[:, top:top + CROP, left:left + CROP].float().div_(255.0)
            return x, d["label"]

    train_ds, val_ds = PtFolder(os.path.join(data, "train")), PtFolder(os.path.join(data, "val"))
    common = dict(num_workers=WORKERS, persistent_workers=True, pin_memory=False,
                  prefetch_factor=PREFETCH, multiprocessing_context="fork")
    train_loader = DataLoader(train_ds, batch_size=BATCH, shuffle=True,
                              generator=torch.Generator().manual_seed(SEED), **common)
    val_loader = DataLoader(val_ds, batch_size=VAL_BATCH, shuffle=False, **common)
    torch.manual_seed(SEED)
    model = torch.nn.Linear(3 * CROP * CROP, 10)
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    for epoch in range(EPOCHS):
        steps = 0
        for x, y in train_loader:
            assert x.shape == (BATCH, 3, CROP, CROP) and y.shape == (BATCH,)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == N_TRAIN // BATCH
        vb = 0
        with torch.no_grad():
            for x, y in val_loader:
                assert x.shape[1:] == (3, CROP, CROP)
                time.sleep(VAL_COMPUTE_S)
                vb += 1
        torch.save({"epoch": epoch, "model": model.state_dict(), "val_batches": vb},
                   os.path.join(ckdir, "epoch_%d.pt" % epoch))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
