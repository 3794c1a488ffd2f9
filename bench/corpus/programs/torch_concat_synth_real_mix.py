"""Sim-to-real training that mixes two data sources of different formats through a torch
ConcatDataset: rendered ("synthetic") samples stored as float16 .npy files and real
photos stored as PNG files. A custom batch sampler builds every batch of 16 from 12
synthetic + 4 real samples (fixed 3:1 mixing ratio, both sources reshuffled per epoch);
2 DataLoader worker processes; a rolling torch.save checkpoint every 20 steps (temp file +
os.replace).

Data set (DATA/, about 13.5 MB):
  DATA/synth/syn_00000.npy .. syn_00479.npy  480 npy files, float16 3 x 64 x 64
                                             (24576 bytes of data + 128-byte header =
                                             24704 bytes each, 11.9 MB);
  DATA/synth/labels.json                     {"syn_00000.npy": label, ...} (read once);
  DATA/real/<class>/real_NNNN.png            160 RGB 64 x 64 PNGs written by PIL
                                             (8 classes x 20, 8 x 8 colour blocks +
                                             sensor noise, 10,044-10,134 bytes each,
                                             1.61 MB), the class is the folder name.
  DATA/ckpt/last.pt                          written by training (see below).

Training: the main process reads synth/labels.json and lists the real class folders
(sorted), then ds = ConcatDataset([SynthNpy (480), RealPng (160)]) (indices 0..479 are
synthetic, 480..639 real, taken from ds.cumulative_sizes). MixBatchSampler: each epoch it
permutes the synthetic and the real indices (numpy rng seeded 1357 + epoch) and yields 40
batches, batch i = synth_perm[12i:12i+12] + real_perm[4i:4i+4] (all 640 samples once per
epoch). SynthNpy.__getitem__ = np.load(path) (float16 -> float32); RealPng.__getitem__ =
PIL Image.open(path).convert("RGB") -> float32 CHW / 255. DataLoader(ds,
batch_sampler=MixBatchSampler, num_workers=2, prefetch_factor=2, fork, not persistent: 2
new workers per epoch). Main loop: 12 ms sleep per step; every 20 steps
torch.save({"step", "backbone" (3*64*64 x 64 float32 = 3 MB), "head"}) to
DATA/ckpt/last.pt.tmp, then os.replace onto DATA/ckpt/last.pt. 2 epochs, 80 steps, 4
checkpoints. No eval.

What a syscall trace sees (strace -f -e
trace=openat,read,pread64,preadv,readv,lseek,write,writev,rename):
importing torch opens many .so/.py files and runs "/sbin/ldconfig -p" (not data). The main
process: synth/labels.json (openat, 2 lseek, read(9601) = 9600, read(1) = 0, close), then
openat(O_DIRECTORY) of real/ and of the 8 class folders (listing); it never opens a sample
file. Per epoch 2 NEW worker processes are forked (4 worker PIDs over the run) and do all
the sample reads; worker k loads the epoch's batches k, k+2, ... (20 batches, 320 files
each), each batch in sampler order: its 12 npy files, then its 4 PNGs, one file at a time.
Per npy file (np.load): openat(syn_NNNNN.npy, O_RDONLY|O_CLOEXEC) = A, lseek(A, 0,
SEEK_CUR), read(A, 4096) (the Python buffer: magic + header + the start of the data),
then numpy's fromfile on a dup B of A (the dup is not in the trace set): lseek(B, 0,
SEEK_CUR), lseek(B, 0, SEEK_SET), read(B, 128) (header), lseek(B, 0, SEEK_SET), read(B,
4096), read(B, 20480), read(B, 4096) = 128, close(B), then lseek(A, 4096, SEEK_SET),
lseek(A, 24704, SEEK_SET), close(A): 5 reads, 28,928 bytes for the 24,704-byte file. Per
PNG (PIL): openat, lseek(0, SEEK_CUR), lseek(0, SEEK_SET), read(4096) (signature, IHDR
and IDAT start), 2 lseek(SEEK_CUR), read(4096), read(4096) returning the rest (1,852-1,942
bytes; no zero-length read), lseek, close: 3 reads, the whole file once. So each batch
is 16 opens and 12 x 5 + 4 x 3 = 72 reads (~387 KB), the two sources interleaved in every
batch at a fixed 3:1 count ratio (but ~9:1 in bytes). Each epoch starts with a burst of 4
batches (2 workers x prefetch 2) as the new workers start, then about one batch per 12 ms
step; the last steps of an epoch read nothing. Per epoch 640 opens (480 npy + 160 PNG),
2,880 reads, 15.50 MB read (13.89 MB of npy reads for 11.86 MB of npy files + 1.61 MB of
PNG); 27.8 MB of npy + 3.2 MB of PNG reads over the run. Checkpoints (main process,
steps 20, 40, 60, 80): openat(ckpt/last.pt.tmp, O_WRONLY|O_CREAT|O_TRUNC), 2 writev + 1 write
(3,149,793 bytes), close, rename onto ckpt/last.pt (one file left on disk).

Usage: torch_concat_synth_real_mix.py DATA [--make | --truth]
needs torch and Pillow (run with /opt/dlio-reference/venv/bin/python). Writes DATA/ckpt/.
"""
import json
import os
import sys
import time

import numpy as np

N_SYNTH, N_CLASSES, REAL_PER_CLASS, HW = 480, 8, 20, 64
N_REAL = N_CLASSES * REAL_PER_CLASS
SYN_PER_BATCH, REAL_PER_BATCH = 12, 4
BATCH = SYN_PER_BATCH + REAL_PER_BATCH
EPOCHS, WORKERS, PREFETCH = 2, 2, 2
COMPUTE_S, CKPT_EVERY = 0.012, 20
SEED = 1357
CLASSES = ["car", "cyclist", "dog", "person", "sign", "tram", "tree", "truck"]


def epoch_batches(epoch, syn_base=0, real_base=N_SYNTH):
    rng = np.random.default_rng(SEED + epoch)
    sp = rng.permutation(N_SYNTH) + syn_base
    rp = rng.permutation(N_REAL) + real_base
    nb = N_SYNTH // SYN_PER_BATCH
    return [[int(i) for i in sp[b * SYN_PER_BATCH:(b + 1) * SYN_PER_BATCH]] +
            [int(i) for i in rp[b * REAL_PER_BATCH:(b + 1) * REAL_PER_BATCH]]
            for b in range(nb)]


def truth(data):
    steps = N_SYNTH // SYN_PER_BATCH
    pngs = []
    for c in CLASSES:
        d = os.path.join(data, "real", c)
        if os.path.isdir(d):
            pngs += [os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)]
    return {
        "program": "torch_concat_synth_real_mix", "needs": ["torch", "pillow"],
        "format": "two sources: float16 .npy files (synthetic) + RGB PNG files (real)",
        "io_library": "torch ConcatDataset of np.load and PIL Image.open datasets, custom "
                      "batch_sampler, DataLoader workers",
        "data_layout": "DATA/synth/syn_NNNNN.npy (480) + synth/labels.json; "
                       "DATA/real/<class>/real_NNNN.png (8 x 20)",
        "num_files": N_SYNTH + N_REAL, "samples_per_file": 1,
        "sources": {"synth": {"files": N_SYNTH, "bytes_each": 24704,
                              "per_batch": SYN_PER_BATCH},
                    "real": {"files": N_REAL, "per_batch": REAL_PER_BATCH,
                             "bytes": {"min": min(pngs), "max": max(pngs),
                                       "total": sum(pngs)} if pngs else
                             {"min": 10044, "max": 10134, "total": 1614892}}},
        "sample_size": {"distribution": "bimodal by source: 24704-byte npy, 10044-10134-byte PNG",
                        "synth_total_bytes": N_SYNTH * 24704},
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork, new per epoch)",
                    "count": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "both sources permuted per epoch (numpy seed 1357 + epoch); every batch "
                   "12 synth + 4 real",
        "eval": None,
        "checkpoint": {"every_steps": CKPT_EVERY, "library": "torch.save",
                       "path": "DATA/ckpt/last.pt (via last.pt.tmp + os.replace)",
                       "steps": list(range(CKPT_EVERY, EPOCHS * steps + 1, CKPT_EVERY)),
                       "params": 3 * HW * HW * 64 + 64 * N_CLASSES + N_CLASSES},
        "side_files": [{"path": "synth/labels.json", "reads": "once, main process"}],
        "read_pattern": "whole-file reads, one file per sample; each file once per epoch",
        "bytes_per_epoch": N_SYNTH * 24704 + (sum(pngs) if pngs else 1614892),
        "syscall_read_bytes_per_epoch": N_SYNTH * 28928 + (sum(pngs) if pngs else 1614892),
        "reads_per_file": {"npy": 5, "png": 3},
    }


def make(data):
    from PIL import Image
    rng = np.random.default_rng(SEED + 100)
    sdir = os.path.join(data, "synth")
    os.makedirs(sdir, exist_ok=True)
    labels = {}
    yy, xx = np.mgrid[0:HW, 0:HW]
    for i in range(N_SYNTH):
        lab = int(rng.integers(0, N_CLASSES))
        cy, cx, r = rng.integers(12, 52, 2).tolist() + [int(rng.integers(6, 20))]
        img = np.where(((yy - cy) ** 2 + (xx - cx) ** 2) < r * r, lab / N_CLASSES, 0.2)
        img = img[None] * rng.uniform(0.5, 1.0, (3, 1, 1)) + rng.normal(0, 0.05, (3, HW, HW))
        name = "syn_%05d.npy" % i
        np.save(os.path.join(sdir, name), img.astype(np.float16))
        labels[name] = lab
    with open(os.path.join(sdir, "labels.json"), "w") as f:
        json.dump(labels, f)
    for c, cname in enumerate(CLASSES):
        cdir = os.path.join(data, "real", cname)
        os.makedirs(cdir, exist_ok=True)
        for k in range(REAL_PER_CLASS):
            base = rng.integers(40, 200, (8, 8, 3)).astype(np.float64)
            img = np.kron(base, np.ones((8, 8, 1)))
            img += rng.normal(0, 14, img.shape)
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
                os.path.join(cdir, "real_%04d.png" % (c * REAL_PER_CLASS + k)))


def build(data):
    import torch
    from torch.utils.data import ConcatDataset, Dataset, Sampler

    class SynthNpy(Dataset):
        def __init__(self, root):
            with open(os.path.join(root, "labels.json")) as f:
                lab = json.load(f)
            self.items = [(os.path.join(root, k), v) for k, v in sorted(lab.items())]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            path, lab = self.items[i]
            return torch.from_numpy(np.load(path).astype(np.float32)), lab

    class RealPng(Dataset):
        def __init__(self, root):
            self.items = []
            for c, cname in enumerate(sorted(os.listdir(root))):
                for f in sorted(os.listdir(os.path.join(root, cname))):
                    self.items.append((os.path.join(root, cname, f), c))

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            from PIL import Image
            path, lab = self.items[i]
            with Image.open(path) as im:
                a = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
            return torch.from_numpy(a.transpose(2, 0, 1).copy()), lab

    class MixBatchSampler(Sampler):
        def __init__(self, cum):
            self.cum, self.epoch = cum, 0

        def __len__(self):
            return N_SYNTH // SYN_PER_BATCH

        def __iter__(self):
            b = epoch_batches(self.epoch, 0, self.cum[0])
            self.epoch += 1
            return iter(b)

    ds = ConcatDataset([SynthNpy(os.path.join(data, "synth")),
                        RealPng(os.path.join(data, "real"))])
    assert ds.cumulative_sizes == [N_SYNTH, N_SYNTH + N_REAL]
    return ds, MixBatchSampler(ds.cumulative_sizes)


def train(data):
    import torch
    from torch.utils.data import DataLoader
    ds, sampler = build(data)
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    g = torch.Generator().manual_seed(SEED)
    state = {"backbone": torch.randn(3 * HW * HW, 64, generator=g) * 0.01,
             "head.weight": torch.randn(N_CLASSES, 64, generator=g) * 0.1,
             "head.bias": torch.zeros(N_CLASSES)}
    loader = DataLoader(ds, batch_sampler=sampler, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, multiprocessing_context="fork")
    steps, seen, nreal = 0, 0, 0
    for epoch in range(EPOCHS):
        for x, y in loader:
            assert x.shape == (BATCH, 3, HW, HW)
            seen += x.shape[0]
            time.sleep(COMPUTE_S)
            steps += 1
            if steps % CKPT_EVERY == 0:
                tmp = os.path.join(ckdir, "last.pt.tmp")
                torch.save(dict(state, step=steps), tmp)
                os.replace(tmp, os.path.join(ckdir, "last.pt"))
    print("torch_concat_synth_real_mix: %d steps, %d samples, %d epochs"
          % (steps, seen, EPOCHS))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
