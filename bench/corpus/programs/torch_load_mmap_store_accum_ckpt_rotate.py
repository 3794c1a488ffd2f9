"""Training from ONE big pre-tensorised data set file loaded with
torch.load(mmap=True): the whole training set (4096 uint8 images + labels) was saved by
a preprocessing job as a single torch.save dict; training memory-maps it instead of
reading it, and 2 forked DataLoader workers index into the inherited mapping. Data
therefore arrives through page faults, not read() calls. Gradient accumulation (3
micro-batches per optimizer step) and a rotating, atomically renamed torch.save
checkpoint every 8 optimizer steps (keep the newest 2).

Data set (DATA/, 38,569,925 bytes):
  DATA/store/train_store.pt   torch.save({"x": uint8 tensor (4096, 3, 56, 56),
      "y": int64 tensor (4096,), "meta": {"n": 4096, "shape": [3, 56, 56],
      "classes": 16}}): a zip archive whose entry train_store/data/0 is the 38,535,168-byte
      image storage (64-byte aligned, 9408 bytes per sample, sample i at a fixed offset
      inside that entry), followed by the 32 KB label storage, the pickle, and the zip
      central directory.

Training: torch.load(path, mmap=True, weights_only=True) in the main process: the zip
directory and the pickle are read, and the file is mmap()ed (MAP_PRIVATE) once; x and y
are views into the mapping. DataLoader(dataset, batch_size=32, sampler=RandomSampler(
num_samples=1536, replacement=False, generator seeded 31337), num_workers=2,
prefetch_factor=2, persistent_workers=True, multiprocessing_context="fork").
__getitem__(i) = x[i].float() / 255 (copies 9408 bytes out of the mapping) and y[i].
Per epoch 48 micro-batches (1536 of the 4096 samples, random, without replacement),
2 epochs = 96 micro-batches = 32 optimizer steps (ACCUM = 3). Compute: 12 ms sleep per
micro-batch (forward/backward) + 6 ms per optimizer step. Every 8 optimizer steps the
main process saves {"step", "weights" (256 x 1024 float32), "momentum" (same),
"sampler_epoch"} (2,099,101 bytes) with torch.save to ckpt/step_SSSSSS.pt.tmp, os.replace()s it
to ckpt/step_SSSSSS.pt and deletes all but the 2 newest checkpoints (steps 8, 16, 24, 32
written; 8 and 16 deleted). Leftover checkpoints of a previous run are deleted at start.
No eval.

What a syscall trace sees: the main process opens train_store.pt (38,569,925 bytes)
through torch's zip reader: openat(O_RDONLY|O_CLOEXEC), fstat, read(4096) at 0,
lseek(SEEK_END), read(4096) at 0 again, then reads walking backwards from the end: the
22-byte end-of-central-directory record, the 42-byte zip64 locator, the 98-byte zip64
record, the ~653-byte central directory, local headers / data.pkl (~819 and ~949-byte
reads near the end). It then opens the file a second time (openat O_RDONLY), does ONE
mmap(NULL, 38569925, PROT_READ|PROT_WRITE, MAP_PRIVATE, fd, 0) and closes that fd at
once; three more 4096-byte reads on the first fd (offsets 406, 0 and 38536080: the
storage local headers) and it is closed too. After that there is NO read syscall and no
open of the data file in any process: the 2 DataLoader worker processes (forked once,
kept for both epochs) touch 9408 bytes at a random offset of the mapping per sample,
visible only as page faults / kernel readahead on the file (3072 sample accesses,
~2500 distinct samples, ~24 MB of the file touched); what the workers do open are the
/dev/shm/torch_* shared-memory files carrying finished batches to the main process.
Writes: 4 checkpoints by the main process, each openat(ckpt/step_SSSSSS.pt.tmp,
O_WRONLY|O_CREAT|O_TRUNC), writev(832 B header + 1048576 B weights), writev(128 B +
1048576 B momentum), write(~989 B tail), close, rename to step_SSSSSS.pt (2,099,101
bytes); after the 3rd and 4th checkpoint the oldest is unlinked (steps 8 and 16). At
start the leftovers of a previous run (if any) are unlinked.

Usage: torch_load_mmap_store_accum_ckpt_rotate.py DATA [--make | --truth]
Needs torch (run with /opt/dlio-reference/venv/bin/python); --truth works with numpy only.
"""
import glob
import json
import os
import sys
import time

import numpy as np

N, SHAPE, N_CLASSES = 4096, (3, 56, 56), 16
MICRO, ACCUM, EPOCHS = 32, 3, 2
DRAWS = 1536
MICRO_STEPS = DRAWS // MICRO
OPT_STEPS = MICRO_STEPS // ACCUM
WORKERS, PREFETCH = 2, 2
COMPUTE_MICRO_S, COMPUTE_OPT_S = 0.012, 0.006
CKPT_EVERY, KEEP = 8, 2
W_SHAPE = (256, 1024)
SEED = 31337
SAMPLE_BYTES = int(np.prod(SHAPE))


def truth(data):
    n_opt = EPOCHS * OPT_STEPS
    ckpt_steps = list(range(CKPT_EVERY, n_opt + 1, CKPT_EVERY))
    p_touch = 1 - (1 - DRAWS / N) ** EPOCHS
    return {
        "program": "torch_load_mmap_store_accum_ckpt_rotate", "needs": ["torch"],
        "format": "single torch.save zip archive holding all samples as one uint8 tensor",
        "io_library": "torch.load(mmap=True, weights_only=True); samples accessed by "
                      "page faults on a MAP_PRIVATE mapping in DataLoader workers",
        "data_layout": "DATA/store/train_store.pt",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES},
        "file_bytes_approx": N * SAMPLE_BYTES + N * 8 + 2000,
        "measured_file_bytes": 38569925,
        "batch_size": MICRO, "grad_accum": ACCUM, "effective_batch": MICRO * ACCUM,
        "readers": {"kind": "torch DataLoader worker processes (fork, persistent), "
                            "no read syscalls: mmap page faults", "count": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": MICRO_STEPS,
        "total_steps": EPOCHS * MICRO_STEPS, "optimizer_steps": n_opt,
        "compute_s_per_step": COMPUTE_MICRO_S, "compute_s_per_optimizer_step": COMPUTE_OPT_S,
        "shuffle": "RandomSampler without replacement, num_samples=1536 of 4096 per epoch, "
                   "torch generator seed 31337",
        "sample_accesses_total": EPOCHS * DRAWS,
        "expected_distinct_samples": int(round(N * p_touch)),
        "eval": None,
        "checkpoint": {"every_optimizer_steps": CKPT_EVERY, "steps": ckpt_steps,
                       "keep": KEEP, "path": "ckpt/step_SSSSSS.pt",
                       "write": "torch.save to .tmp then os.replace; older ones unlinked",
                       "bytes_approx": 2 * 4 * W_SHAPE[0] * W_SHAPE[1] + 1500,
                       "writer": "main process"},
        "side_files": [],
        "read_pattern": "one mmap of the whole store; random 9408-byte sample accesses "
                        "by page fault in 2 worker processes; only small zip/pickle "
                        "reads near the end of the file as read syscalls",
    }


def make(data):
    import torch
    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.join(data, "store"), exist_ok=True)
    y = rng.integers(0, N_CLASSES, N).astype(np.int64)
    x = np.empty((N,) + SHAPE, dtype=np.uint8)
    yy, xx = np.mgrid[0:SHAPE[1], 0:SHAPE[2]]
    patterns = np.stack([128 + 70 * np.sin(xx / (2.0 + c) + yy / (5.0 + c))
                         for c in range(N_CLASSES)])
    for s in range(0, N, 512):
        e = min(s + 512, N)
        noise = rng.normal(0, 25, (e - s,) + SHAPE)
        x[s:e] = np.clip(patterns[y[s:e]][:, None] + noise, 0, 255).astype(np.uint8)
    torch.save({"x": torch.from_numpy(x), "y": torch.from_numpy(y),
                "meta": {"n": N, "shape": list(SHAPE), "classes": N_CLASSES}},
               os.path.join(data, "store", "train_store.pt"))


class MappedStore:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i].float().div_(255.0), self.y[i]


def train(data):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    store = torch.load(os.path.join(data, "store", "train_store.pt"), mmap=True,
                       weights_only=True)
    x, y = store["x"], store["y"]
    assert tuple(x.shape) == (N,) + SHAPE
    ds = MappedStore(x, y)
    sampler = RandomSampler(ds, replacement=False, num_samples=DRAWS,
                            generator=torch.Generator().manual_seed(SEED))
    loader = DataLoader(ds, batch_size=MICRO, sampler=sampler, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, persistent_workers=True,
                        multiprocessing_context="fork")
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    for old in glob.glob(os.path.join(ckdir, "step_*.pt*")):
        os.remove(old)
    g = torch.Generator().manual_seed(SEED + 1)
    weights = torch.randn(W_SHAPE, generator=g) * 0.01
    momentum = torch.zeros(W_SHAPE)
    grad = torch.zeros(W_SHAPE)
    micro, opt_steps, kept = 0, 0, []
    for epoch in range(EPOCHS):
        for xb, yb in loader:
            assert xb.shape == (MICRO,) + SHAPE
            feat = xb.mean(dim=(2, 3))
            grad[:N_CLASSES, :3] += torch.zeros(N_CLASSES, 3).index_add_(0, yb, feat) / ACCUM
            time.sleep(COMPUTE_MICRO_S)
            micro += 1
            if micro % ACCUM == 0:
                momentum.mul_(0.9).add_(grad)
                weights.sub_(0.01 * momentum)
                grad.zero_()
                time.sleep(COMPUTE_OPT_S)
                opt_steps += 1
                if opt_steps % CKPT_EVERY == 0:
                    final = os.path.join(ckdir, "step_%06d.pt" % opt_steps)
                    torch.save({"step": opt_steps, "weights": weights, "momentum": momentum,
                                "sampler_epoch": epoch}, final + ".tmp")
                    os.replace(final + ".tmp", final)
                    kept.append(final)
                    while len(kept) > KEEP:
                        os.remove(kept.pop(0))
    print("torch_load_mmap_store_accum_ckpt_rotate: %d micro-batches, %d optimizer steps, "
          "checkpoints kept %s" % (micro, opt_steps, [os.path.basename(k) for k in kept]))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
