"""Image classification from ONE page-aligned record file (an LMDB-like single data file:
every record starts on a 4 KiB page boundary) with a separate .npy index, read by a torch
DataLoader with 2 PERSISTENT workers; each worker opens the data file lazily on its first
__getitem__ (the usual "open the env once per worker" idiom, keyed on os.getpid()) and keeps
that descriptor for the whole run. Every record is read with ONE os.preadv into three
buffers: a 32-byte record header, the encoded image payload, and a 96-byte metadata
trailer. An evaluation pass over a separate val record file runs in the main process
(num_workers=0) after every epoch, and a torch.save checkpoint is written per epoch.

Data set (DATA/, about 36.9 MB):
  DATA/train.pages   2,400 records; record i at offset idx[i, 0] (a multiple of 4096):
                     32-byte header (magic b"PGR1", uint32 id, uint32 label, uint16 h,
                     uint16 w, uint32 payload_len, uint32 crc32 of the payload, 8 zero
                     bytes), payload_len bytes of "encoded image" (b"\\xff\\xd8" + random
                     bytes, lognormal length median 10 KiB, sigma 0.45, clipped to
                     2-48 KiB), a 96-byte JSON metadata trailer padded with spaces; then
                     zero padding to the next 4 KiB page. 32,432,128 bytes.
  DATA/train.idx.npy int64 (2400, 3): offset, payload_len, label (57,728 bytes).
  DATA/val.pages, DATA/val.idx.npy   the same for 320 val records (4,366,336 bytes).
  DATA/ckpt/epoch_E.pt               written by training.

Training: the main process np.load()s train.idx.npy and val.idx.npy once. DataLoader(train,
batch_size=32, shuffle=True (RandomSampler, torch generator seeded 8642, a new permutation
per epoch), num_workers=2, persistent_workers=True, prefetch_factor=3, fork,
collate: stack of 3 x 64 x 64 uint8 "decoded" tensors + labels). __getitem__(i): if the
dataset has no fd for this pid, fd = os.open(train.pages, O_RDONLY); then n =
os.preadv(fd, [hdr(32), payload(payload_len), meta(96)], offset) into fresh bytearrays;
check the magic and the CRC, "decode" (tile the payload bytes into 3 x 64 x 64). 75 steps
per epoch, 11 ms sleep each. After each epoch the main process evaluates val.pages
through DataLoader(val, batch_size=80, num_workers=0) (its own lazily opened fd in the
main process, kept open), 4 eval steps of 4 ms, and torch.save()s {"epoch", "conv" (64 x
3 x 7 x 7 float32), "fc" (10 x 16384 float32)} (~0.7 MB) to DATA/ckpt/epoch_E.pt.
3 epochs, 225 train steps.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,preadv,readv,lseek):
NOTE: CPython's os.preadv is implemented with the preadv2() system call (flags 0) on Linux,
so with the trace set above (preadv, not preadv2) the record reads are INVISIBLE; trace
with -e trace=openat,read,pread64,preadv,preadv2,readv,lseek,write,writev to see them.
importing torch opens many .so/.py files and runs "/sbin/ldconfig -p" (not data). Main
process, at start: np.load of train.idx.npy (openat, lseek, read(4096) through the Python
buffer, then numpy's fromfile on a dup of the fd (the dup is not traced): 2 lseeks,
read(128) (header), lseek(0), read(4096), read(53248), read(4096) = 384, close; then 2
lseeks and close of the original: 61,952 bytes read for the 57,728-byte file), and the
same for val.idx.npy (4096, 128, 4096, 4096 = 3712: 12,032 bytes for 7,808). The 2
worker processes are forked once (persistent) at the first epoch; each does exactly ONE
openat(train.pages, O_RDONLY|O_CLOEXEC) on its first sample and keeps that fd for the
whole run (never closed, never lseek'ed, no read()). Every train sample is then ONE
preadv2(fd, [{32}, {payload_len}, {96}], 3, OFFSET, 0) in the worker that loads its batch,
returning 32 + payload_len + 96 bytes (2,188-43,088, mean 11,435) at a 4096-aligned
OFFSET (the record's page), random order; the zero padding after each record is never
read. Batches alternate between the workers (worker 0 loads batches 0, 2, 4, ..., 38 of
the 75 per epoch, 32 preadv2 in a burst each: 3,648 and 3,552 preadv2 per worker over the
run). Each epoch starts with a burst of 6 batches (2 workers x prefetch 3, ~190 reads),
then ~32 reads per step. Per epoch 2,400 preadv2, 27,444,285 bytes (each record once) of
the 32.4 MB file. Eval (main process, after each epoch): one openat(val.pages) at the
first eval, fd kept for the rest of the run, 320 preadv2 (3 iovecs) at strictly
ascending page-aligned offsets (0, 16384, 28672, ...; a sequential scan that skips the
padding), 3,735,520 bytes per eval, in ~0.1 s; meanwhile the workers are idle. After each
eval the main process writes ckpt/epoch_E.pt: openat(O_WRONLY|O_CREAT|O_TRUNC), 2 writev
(38,464 + 655,424 bytes) + write(933), close (694,821 bytes each, 3 files); then the
persistent workers immediately refill 6 batches for the next epoch.

Usage: torch_pagefile_preadv_workers.py DATA [--make | --truth]
needs torch (run with /opt/dlio-reference/venv/bin/python). Writes DATA/ckpt/.
"""
import json
import os
import struct
import sys
import time
import zlib

import numpy as np

N_TRAIN, N_VAL, N_CLASSES, PAGE = 2400, 320, 10, 4096
PAY_MEDIAN, PAY_SIGMA, PAY_MIN, PAY_MAX = 10 * 1024, 0.45, 2 * 1024, 48 * 1024
HDR, META, MAGIC = 32, 96, b"PGR1"
BATCH, VAL_BATCH, EPOCHS, WORKERS, PREFETCH = 32, 80, 3, 2, 3
COMPUTE_S, EVAL_S = 0.011, 0.004
SEED = 8642


def split_meta(split):
    n = N_TRAIN if split == "train" else N_VAL
    rng = np.random.default_rng((SEED, 0 if split == "train" else 1))
    pay = np.clip(rng.lognormal(np.log(PAY_MEDIAN), PAY_SIGMA, n), PAY_MIN,
                  PAY_MAX).astype(np.int64)
    labels = rng.integers(0, N_CLASSES, n)
    rec = HDR + pay + META
    span = (rec + PAGE - 1) // PAGE * PAGE
    offs = np.concatenate([[0], np.cumsum(span)[:-1]])
    return offs, pay, labels, span


def truth(data):
    offs, pay, labels, span = split_meta("train")
    voffs, vpay, _, vspan = split_meta("val")
    steps = N_TRAIN // BATCH
    return {
        "program": "torch_pagefile_preadv_workers", "needs": ["torch"],
        "format": "single page-aligned record file (LMDB-like), 32-byte header + payload + "
                  "96-byte trailer per record, separate .npy index",
        "io_library": "os.preadv(fd, [hdr, payload, meta], offset) in torch DataLoader "
                      "workers, fd opened lazily once per worker",
        "data_layout": "DATA/train.pages + train.idx.npy, DATA/val.pages + val.idx.npy",
        "num_files": 1, "samples_per_file": N_TRAIN,
        "sample_size": {"distribution": "payload lognormal (median 10 KiB, sigma 0.45, clip "
                                        "2-48 KiB) + 128 bytes header/trailer",
                        "mean_bytes": int((pay + HDR + META).mean()),
                        "min_bytes": int((pay + HDR + META).min()),
                        "max_bytes": int((pay + HDR + META).max()),
                        "file_bytes": int(span.sum()), "page_bytes": PAGE},
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork, persistent)",
                    "count": WORKERS, "opens_per_worker": 1},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler, torch generator seeded 8642 (new permutation per epoch)",
        "eval": {"when": "after every epoch", "file": "val.pages", "process": "main",
                 "samples": N_VAL, "batch_size": VAL_BATCH, "steps": N_VAL // VAL_BATCH,
                 "order": "sequential", "compute_s_per_step": EVAL_S,
                 "bytes": int((vpay + HDR + META).sum()), "file_bytes": int(vspan.sum())},
        "checkpoint": {"when": "end of every epoch", "library": "torch.save",
                       "files": ["ckpt/epoch_%d.pt" % e for e in range(EPOCHS)]},
        "side_files": [{"path": "train.idx.npy", "reads": "once, main process"},
                       {"path": "val.idx.npy", "reads": "once, main process"}],
        "read_pattern": "one os.preadv (the preadv2 syscall, flags 0) of 3 iovecs (32, "
                        "payload_len, 96) per sample at a 4 KiB-aligned offset; random "
                        "order; each record once per epoch",
        "syscall": "preadv2",
        "reads_per_sample": 1,
        "bytes_per_epoch": int((pay + HDR + META).sum()),
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED + 100)
    for split in ("train", "val"):
        offs, pay, labels, span = split_meta(split)
        with open(os.path.join(data, split + ".pages"), "wb") as f:
            for i in range(len(pay)):
                body = b"\xff\xd8" + rng.bytes(int(pay[i]) - 2)
                hw = int(rng.choice([64, 96, 128]))
                hdr = MAGIC + struct.pack("<IIHHII", i, int(labels[i]), hw, hw, int(pay[i]),
                                          zlib.crc32(body))
                meta = json.dumps({"id": i, "split": split, "src": "cam%d" % (i % 5),
                                   "q": int(rng.integers(60, 96))}).encode().ljust(META)
                assert f.tell() == offs[i]
                f.write(hdr.ljust(HDR, b"\0") + body + meta)
                f.write(b"\0" * (int(span[i]) - HDR - int(pay[i]) - META))
        np.save(os.path.join(data, split + ".idx.npy"),
                np.stack([offs, pay, labels], axis=1).astype(np.int64))


class PageRecords:
    def __init__(self, path, index):
        self.path, self.index = path, index
        self.fd, self.pid = None, None

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        import torch
        if self.fd is None or self.pid != os.getpid():
            self.fd, self.pid = os.open(self.path, os.O_RDONLY), os.getpid()
        off, plen, lab = (int(v) for v in self.index[i])
        hdr, payload, meta = bytearray(HDR), bytearray(plen), bytearray(META)
        n = os.preadv(self.fd, [hdr, payload, meta], off)
        assert n == HDR + plen + META and hdr[:4] == MAGIC
        rid, label, h, w, plen2, crc = struct.unpack("<IIHHII", hdr[4:24])
        assert rid == i and plen2 == plen and zlib.crc32(payload) == crc
        img = np.resize(np.frombuffer(payload, dtype=np.uint8), (3, 64, 64))
        return torch.from_numpy(img.copy()), label


def collate(items):
    import torch
    return torch.stack([x for x, _ in items]), torch.tensor([y for _, y in items])


def train(data):
    import torch
    from torch.utils.data import DataLoader
    tr_idx = np.load(os.path.join(data, "train.idx.npy"))
    va_idx = np.load(os.path.join(data, "val.idx.npy"))
    train_ds = PageRecords(os.path.join(data, "train.pages"), tr_idx)
    val_ds = PageRecords(os.path.join(data, "val.pages"), va_idx)
    g = torch.Generator().manual_seed(SEED)
    loader = DataLoader(train_ds, batch_size=BATCH, shuffle=True, generator=g,
                        num_workers=WORKERS, persistent_workers=True,
                        prefetch_factor=PREFETCH, multiprocessing_context="fork",
                        collate_fn=collate, drop_last=True)
    val_loader = DataLoader(val_ds, batch_size=VAL_BATCH, num_workers=0, collate_fn=collate)
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    wg = torch.Generator().manual_seed(SEED + 1)
    state = {"conv": torch.randn(64, 3, 7, 7, generator=wg) * 0.05,
             "fc": torch.randn(N_CLASSES, 64 * 16 * 16, generator=wg) * 0.01}
    steps, seen, nval = 0, 0, 0
    for epoch in range(EPOCHS):
        for x, y in loader:
            assert x.shape == (BATCH, 3, 64, 64)
            seen += int(y.shape[0])
            time.sleep(COMPUTE_S)
            steps += 1
        for x, y in val_loader:
            nval += int(y.shape[0])
            time.sleep(EVAL_S)
        torch.save(dict(state, epoch=epoch), os.path.join(ckdir, "epoch_%d.pt" % epoch))
    print("torch_pagefile_preadv_workers: %d steps, %d samples, %d val samples"
          % (steps, seen, nval))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
