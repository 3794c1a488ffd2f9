"""Long-tail image classification where the preprocessing step wrote ONE HDF5 file PER
CLASS, and training uses a custom class-balanced batch sampler (every batch = 3 samples
from each of the 6 classes) with a PyTorch DataLoader of 2 worker processes that open
all six HDF5 files in worker_init_fn and keep them open for the epoch.

Data set (DATA/, about 13.3 MB):
  DATA/classes.json                    list of {"name", "label", "file"} for 6 classes
                                       (~0.4 KB), read once by the main process.
  DATA/classes/class_K.h5, K = 0..5    one file per class, class sizes 400, 260, 160,
      120, 80, 60 (1080 samples). Each file: dataset "images" uint8 (n, 64, 64, 3),
      CONTIGUOUS layout (no chunking, no compression; 12288 bytes per sample, rows back to
      back), dataset "sample_id" int64 (n,), file attributes "label" and "class_name".
      File sizes = 6144 bytes of metadata + n * 12296 bytes (4,924,544 .. 743,904 bytes).

Training: the main process reads classes.json, opens each .h5 once with h5py to read
len(images) (and closes it again before the workers start). ClassBalancedBatchSampler
(numpy rng seeded 9001, state kept across epochs): for each class it walks a random
permutation of that class's rows, drawing 3 rows per batch, re-permuting when the class
is exhausted; the 18 (class, row) pairs of a batch are then shuffled. 30 batches per
epoch, 2 epochs = 60 steps, 25 ms sleep per step. DataLoader(batch_sampler=...,
num_workers=2, prefetch_factor=3, multiprocessing_context="fork",
persistent_workers=False, worker_init_fn opens the 6 files). __getitem__((k, i)) =
images[k][i] (one 12288-byte row), converted to a float CHW tensor. Per epoch each of
the 60 "rare" samples is read 1.5 times on average while only 90 of the 400 class-0 rows
are touched. At the end of each epoch the main process writes a checkpoint
DATA/ckpt/epoch_E.pt (torch.save of a 3 x 65536 float32 state, 788,073 bytes).

What a syscall trace sees: main process: classes.json (open, read, close); six h5py
opens (openat O_RDONLY, no O_CLOEXEC) each followed by ~10 small metadata preads (8, 48,
48, 512, 160, 512, 544, 328, 512 bytes: superblock, root group, object headers) and a
close; two torch.save checkpoints, each openat(ckpt/epoch_E.pt, O_WRONLY|O_CREAT|
O_TRUNC), ONE writev of ~787 KB (640 B of zip headers + the 786432-byte storage) and one
~0.9 KB write of the tail (788,073-byte file), close. The DataLoader forks 2 fresh
workers per epoch (4 worker processes in all); each worker opens all 6 .h5 files once in
worker_init_fn (openat + the same small metadata preads) and keeps them open for the
epoch. Sample reads are pread64 calls issued by the HDF5 sec2 driver in the worker that
owns the batch, at random rows of the contiguous "images" datasets: because a 12288-byte
row is smaller than HDF5's 64 KiB data sieve buffer, almost every row read is a
pread64(fd, 65536, row_offset) (shorter near the end of a dataset), and the rare next row
that falls inside the current sieve window is served without a syscall. Measured: ~1040
data preads (~860 of exactly 65536 B) for the 1080 row reads, ~67 MB read from disk for
13.3 MB of requested rows (5x read amplification). Whole batches alternate between the
2 workers (~260 data preads per worker process); up to 6 batches (108 rows) in flight.
30 h5 opens in all (6 main + 24 worker). The only writes are the 2 checkpoints (plus
the DataLoader's /dev/shm semaphores).

Usage: h5_class_files_balanced_batch_sampler.py DATA [--make | --truth]
Needs torch + h5py (run with /opt/dlio-reference/venv/bin/python); --truth works with
numpy only.
"""
import json
import os
import sys
import time

import numpy as np

COUNTS = [400, 260, 160, 120, 80, 60]
NAMES = ["car", "person", "bicycle", "dog", "traffic_cone", "wheelchair"]
SHAPE = (64, 64, 3)
PER_CLASS = 3
BATCH = PER_CLASS * len(COUNTS)
STEPS, EPOCHS = 30, 2
WORKERS, PREFETCH = 2, 3
COMPUTE_S = 0.025
STATE_N = 65536
SEED = 9001
ROW_BYTES = int(np.prod(SHAPE))


def truth(data):
    return {
        "program": "h5_class_files_balanced_batch_sampler", "needs": ["torch"],
        "format": "HDF5, one file per class, contiguous uint8 dataset 'images' "
                  "(n, 64, 64, 3)",
        "io_library": "h5py (HDF5 sec2 driver, pread) in torch DataLoader workers",
        "data_layout": "DATA/classes/class_0..5.h5 + DATA/classes.json",
        "num_files": len(COUNTS), "samples_per_file": COUNTS,
        "sample_size": {"dist": "fixed", "bytes": ROW_BYTES},
        "dataset_bytes_approx": sum(COUNTS) * (ROW_BYTES + 8) + 6 * 6144,
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork), re-created each "
                            "epoch; h5 files opened in worker_init_fn", "count": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "class-balanced batch sampler: 3 rows per class per batch from "
                   "per-class permutations (re-permuted when exhausted), batch order "
                   "shuffled; numpy rng seed 9001",
        "row_reads_total": EPOCHS * STEPS * BATCH,
        "row_reads_per_class": [EPOCHS * STEPS * PER_CLASS] * len(COUNTS),
        "eval": None,
        "checkpoint": {"every": "epoch", "count": EPOCHS, "path": "ckpt/epoch_E.pt",
                       "writer": "main process, torch.save",
                       "bytes_approx": 3 * 4 * STATE_N + 1500,
                       "syscalls": "openat, one writev (~787 KB), one small write, close"},
        "side_files": [{"path": "classes.json", "reads": 1, "process": "main"},
                       {"path": "classes/class_K.h5", "reads": "metadata only, once "
                        "per file", "process": "main"}],
        "read_pattern": "random rows of contiguous HDF5 datasets across 6 files "
                        "(pread through the 64 KiB HDF5 sieve buffer), files kept open "
                        "per worker per epoch",
        "request_size_on_disk": {"typical_pread_bytes": 65536, "row_bytes": ROW_BYTES,
                                 "measured_data_preads": 1039,
                                 "measured_bytes_read": 66912256},
    }


def make(data):
    import h5py
    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.join(data, "classes"), exist_ok=True)
    yy, xx = np.mgrid[0:SHAPE[0], 0:SHAPE[1]]
    meta, sid = [], 0
    for k, n in enumerate(COUNTS):
        base = 120 + 50 * np.sin(xx / (2.0 + k)) * np.cos(yy / (3.0 + k))
        imgs = np.clip(base[None, ..., None] + rng.normal(0, 30, (n,) + SHAPE), 0, 255)
        rel = "classes/class_%d.h5" % k
        with h5py.File(os.path.join(data, rel), "w") as f:
            f.create_dataset("images", data=imgs.astype(np.uint8))
            f.create_dataset("sample_id", data=np.arange(sid, sid + n, dtype=np.int64))
            f.attrs["label"] = k
            f.attrs["class_name"] = NAMES[k]
        sid += n
        meta.append({"name": NAMES[k], "label": k, "file": rel})
    with open(os.path.join(data, "classes.json"), "w") as f:
        json.dump({"classes": meta}, f, indent=1)


class ClassBalancedBatchSampler:
    def __init__(self, counts, per_class, steps, seed):
        self.counts, self.per_class, self.steps = list(counts), per_class, steps
        self.rng = np.random.default_rng(seed)
        self.perms = [self.rng.permutation(n) for n in self.counts]
        self.pos = [0] * len(self.counts)

    def __len__(self):
        return self.steps

    def __iter__(self):
        for _ in range(self.steps):
            batch = []
            for k, n in enumerate(self.counts):
                for _ in range(self.per_class):
                    if self.pos[k] == n:
                        self.perms[k] = self.rng.permutation(n)
                        self.pos[k] = 0
                    batch.append((k, int(self.perms[k][self.pos[k]])))
                    self.pos[k] += 1
            yield [batch[j] for j in self.rng.permutation(len(batch))]


class PerClassH5:
    def __init__(self, paths):
        self.paths = paths
        self.files = None

    def open(self):
        import h5py
        self.files = [h5py.File(p, "r") for p in self.paths]
        self.images = [f["images"] for f in self.files]

    def __len__(self):
        return sum(COUNTS)

    def __getitem__(self, key):
        import torch
        if self.files is None:
            self.open()
        k, i = key
        x = self.images[k][i]
        return torch.from_numpy(x).permute(2, 0, 1).float().div_(255.0), k


def worker_init(worker_id):
    import torch.utils.data
    torch.utils.data.get_worker_info().dataset.open()


def train(data):
    import h5py
    import torch
    from torch.utils.data import DataLoader
    with open(os.path.join(data, "classes.json")) as f:
        classes = json.load(f)["classes"]
    paths = [os.path.join(data, c["file"]) for c in classes]
    counts = []
    for p in paths:
        with h5py.File(p, "r") as f:
            counts.append(int(f["images"].shape[0]))
    assert counts == COUNTS, counts
    sampler = ClassBalancedBatchSampler(counts, PER_CLASS, STEPS, SEED)
    loader = DataLoader(PerClassH5(paths), batch_sampler=sampler, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, worker_init_fn=worker_init,
                        multiprocessing_context="fork", persistent_workers=False)
    state = torch.zeros(3, STATE_N)
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    seen = np.zeros(len(COUNTS), dtype=int)
    steps = 0
    for epoch in range(EPOCHS):
        for x, y in loader:
            assert x.shape == (BATCH, 3, SHAPE[0], SHAPE[1])
            seen += np.bincount(y.numpy(), minlength=len(COUNTS))
            state[0, :BATCH] += x.mean(dim=(1, 2, 3))
            time.sleep(COMPUTE_S)
            steps += 1
        torch.save({"epoch": epoch, "steps": steps, "state": state.clone()},
                   os.path.join(ckdir, "epoch_%d.pt" % epoch))
    print("h5_class_files_balanced_batch_sampler: %d steps, rows per class %s"
          % (steps, seen.tolist()))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
