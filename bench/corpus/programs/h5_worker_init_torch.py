"""Random rows of one HDF5 file in 2 torch DataLoader workers, the file opened in worker_init_fn.

DATA/train.h5 (h5py defaults, 1.5 MB) holds "images": 512 x 32 x 32 x 3 uint8, contiguous
(unchunked), the raw rows at file offset 2048, 3072 bytes per row, back to back; and
"labels": 512 int64, contiguous, at offset 1574912. The map-style Dataset opens the file in
the main process only to learn its length (then closes it), and the usual "open lazily in
each worker" idiom: worker_init_fn calls dataset.open(), which h5py.File()s the file once
in that worker and reads all labels (labels[:]); __getitem__(i) returns images[i] (one row)
and the label. DataLoader: batch 16, shuffle=True (RandomSampler, torch generator seeded
5150, a new permutation each epoch), num_workers=2, fork, persistent_workers=False (so the
2 workers are forked anew, and the file re-opened, at each epoch), prefetch_factor 2, a
custom collate_fn (np.stack, to float CHW / 255). The main process sleeps 10 ms per batch.
2 epochs of 32 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write,mmap):
importing torch runs "/sbin/ldconfig -p" and an import also runs "uname -p" (child
processes, not data I/O). The main process: openat(train.h5, O_RDONLY), 9 small preads of
HDF5 metadata (8@0, 48@0, 48@48, 512@96, 80@1672, 512@680, 544@136, 328@1072, 512@800), an
lstat, close; nothing else of the file. Per epoch 2 forked workers; each, in worker_init:
openat(train.h5) (its own fd; never closed, the worker just exits at the epoch's end), the
same 9 metadata preads plus 512@1400, then the labels: one pread of 4096 bytes at 1574912.
Then per sample ONE pread of 65536 bytes at 2048 + 3072 * row, NOT 3072: HDF5's 64 KiB
sieve buffer for contiguous data reads the requested row and the 20 that follow (clipped
at the dataset's end, so rows near the end give shorter reads, e.g. 6144 or 33792 bytes); a
row that falls inside the previous window is served from that buffer with no syscall (about
6-12 per worker per epoch). So each worker does about 245-250 data preads per epoch (256
samples), about 16 MB per worker-epoch, 64 MB in all for a 1.5 MB file (a 21x
read amplification). All reads are in the workers; batches alternate between them (worker 0
reads batches 0, 2, 4, ..., 16 preads in a burst each); each epoch starts with a burst of
about 4 batches (2 workers x prefetch 2, ~60 preads; in epoch 2 once the 2 new workers
are forked and have opened the file), mostly before the first step returns, then about
one batch of ~15 preads per 10 ms step, and the last 3-4 steps of an epoch read nothing.
No writes to files.

Usage: h5_worker_init_torch.py DATA [--make | --truth]
Fixed by the program: 1 HDF5 file, 512 samples of 3072 bytes (random rows, permutation per
epoch), batch 16, 2 non-persistent worker processes (fork) each opening the file once per
epoch, prefetch_factor 2, 2 epochs of 32 steps, 10 ms compute per step, no checkpoint, no
eval. Needs torch and h5py.
"""
import json
import os
import sys
import time

import numpy as np

N, SHAPE, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 512, (32, 32, 3), 16, 2, 2, 2, 0.010
ROW_BYTES = SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 5150


def h5_path(data):
    return os.path.join(data, "train.h5")


def truth(data):
    p = h5_path(data)
    steps = N // BATCH
    return {
        "program": "h5_worker_init_torch", "needs": ["torch", "h5py"], "format": "hdf5",
        "io_library": "h5py in torch DataLoader workers (file opened in worker_init_fn)",
        "data_layout": "DATA/train.h5: dataset images (512 x 32 x 32 x 3 uint8, contiguous) "
                       "and labels (512 int64, contiguous)",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed", "bytes": ROW_BYTES, "dtype": "uint8",
                        "shape": list(SHAPE)},
        "file_size": os.path.getsize(p) if os.path.exists(p) else 1579008,
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": False, "start_method": "fork",
                    "note": "each worker opens train.h5 once per epoch in worker_init_fn "
                            "and reads all labels there; workers are re-forked each epoch"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler (shuffle=True, torch generator seeded 5150): a permutation "
                   "of the 512 rows per epoch",
        "eval": None, "checkpoint": None,
        "side_files": [],
        "file_opens": {"main": 1, "per_worker_per_epoch": 1, "total": 1 + WORKERS * EPOCHS},
        "read_pattern": "per sample one 64 KiB pread (HDF5 sieve buffer) at offset "
                        "2048 + 3072*row of a 3072-byte row, random rows, unless the row lies "
                        "in the previous window; labels read whole (one 4096-byte pread) at "
                        "each worker start; ~10 small HDF5 metadata preads at each open",
        "sieve_buffer_bytes": 65536, "images_offset": 2048,
    }


def make(data):
    import h5py
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    with h5py.File(h5_path(data), "w") as f:
        f.create_dataset("images", data=rng.integers(0, 256, (N,) + SHAPE, dtype=np.uint8))
        f.create_dataset("labels", data=rng.integers(0, 10, N).astype(np.int64))
        f.attrs["classes"] = 10


def train(data):
    import h5py
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info

    class H5Rows(Dataset):
        def __init__(self, path):
            self.path = path
            self.f = self.images = self.labels = None
            with h5py.File(path, "r") as f:  # main process: only to learn the length
                self.n = len(f["images"])

        def open(self):
            self.f = h5py.File(self.path, "r")
            self.images = self.f["images"]
            self.labels = self.f["labels"][:]

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return self.images[i], int(self.labels[i])

    def worker_init(worker_id):
        get_worker_info().dataset.open()

    def collate(items):
        x = torch.from_numpy(np.stack([a for a, _ in items])).permute(0, 3, 1, 2)
        return x.float().div_(255.0), torch.tensor([b for _, b in items])

    ds = H5Rows(h5_path(data))
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        worker_init_fn=worker_init, collate_fn=collate,
                        prefetch_factor=PREFETCH, persistent_workers=False,
                        generator=torch.Generator().manual_seed(SEED),
                        multiprocessing_context="fork")
    for epoch in range(EPOCHS):
        steps = 0
        for x, y in loader:
            assert x.shape == (BATCH, SHAPE[2], SHAPE[0], SHAPE[1]) and y.shape == (BATCH,)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == N // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
