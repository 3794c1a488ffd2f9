"""nanoGPT get_batch: a fresh np.memmap of the token file per micro-batch, 4-step grad accumulation.

DATA/train.bin holds 1 Mi uint16 tokens (2 MiB) and DATA/val.bin 128 Ki tokens (256 KiB), raw
(no header), as nanoGPT's prepare.py writes them; DATA/meta.pkl (about 9 KB) holds a pickled
vocabulary (512 tokens). No framework, main thread only. meta.pkl is read once at the start.
Every micro-batch, exactly like nanoGPT's get_batch, creates a NEW
np.memmap(train.bin, uint16, mode="r"), draws 8 uniform random token offsets (one
np.random.default_rng(1337) for the run) and copies x = tokens[i:i+256], y = tokens[i+1:i+257]
for each (one 514-byte window per sample, at any byte offset, so one or two 4 KiB pages),
then drops the map. An optimizer step (the "step" counted here) is 4 micro-batches with 4 ms
of sleep each (forward + backward), then 6 ms (optimizer): 22 ms and 32 samples per step.
3 "epochs" of 12 steps; after each an estimate_loss pass: 3 batches from train.bin, then 3
from val.bin, each with its own fresh memmap, 2 ms of compute each. No shuffle order (random
offsets with replacement), no checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write,mmap),
all in the one process and thread: meta.pkl: openat, fstat, lseek(0, SEEK_CUR), reads of
4096, 4096 and 724 bytes, close. The first memmap also loads Python's mmap extension module.
Then per micro-batch on the token file: openat(O_RDONLY|O_CLOEXEC), fstat, lseek(0,
SEEK_CUR), lseek(0, SEEK_END) = file size, lseek(0, SEEK_CUR), fstat, mmap(NULL, whole file,
PROT_READ, MAP_SHARED, fd, 0), getcwd, close(fd); then close of a second descriptor (the dup
that Python's mmap object keeps, made with a dup that is not in the trace set) and munmap of
the whole file, about 0.3 ms after the open. NO read or pread of token data at all: the 8
windows are read by page faults inside the mapping, invisible to a syscall trace (the page
cache serves them; the first touches of a cold file would be readahead I/O in the kernel).
So each step is 4 open/mmap/close/munmap bursts of train.bin about 4-5 ms apart followed by
a 6 ms gap; train.bin is mapped 36 x 4 + 3 x 3 = 153 times and val.bin 9 times (3 per eval,
after the 3 train.bin eval maps). 2 MiB mapped each time, about 8 x 514 bytes touched.

Usage: nanogpt_memmap_accum.py DATA [--make | --truth]
Fixed by the program: 2 token files (2 MiB train, 256 KiB val), uint16, windows of 257
tokens (514 bytes) at random offsets, micro-batch 8, 4 micro-batches per step (32 samples),
main thread, 3 epochs of 12 steps, 22 ms compute per step (4 x 4 ms + 6 ms), eval of 3+3
batches after every epoch, no checkpoint. Needs numpy only.
"""
import json
import os
import pickle
import sys
import time

import numpy as np

TRAIN_TOKENS, VAL_TOKENS, VOCAB = 1 << 20, 1 << 17, 512
BATCH, BLOCK, GRAD_ACCUM, EPOCHS, ITERS_PER_EPOCH, EVAL_ITERS = 8, 256, 4, 3, 12, 3
MICRO_S, OPTIM_S, EVAL_S = 0.004, 0.006, 0.002
COMPUTE_S = GRAD_ACCUM * MICRO_S + OPTIM_S
SEED = 1337


def truth(data):
    def size(n):
        p = os.path.join(data, n)
        return os.path.getsize(p) if os.path.exists(p) else None

    iters = EPOCHS * ITERS_PER_EPOCH
    window = (BLOCK + 1) * 2
    return {
        "program": "nanogpt_memmap_accum", "needs": [], "format": "raw uint16 token stream (.bin)",
        "io_library": "np.memmap (mode r), re-created for every micro-batch; pickle for meta.pkl",
        "data_layout": "DATA/train.bin, DATA/val.bin, DATA/meta.pkl",
        "num_files": 2, "samples_per_file": None,
        "sample_size": {"dist": "fixed", "tokens": BLOCK + 1, "bytes": window, "dtype": "uint16",
                        "note": "x = tokens[i:i+256], y = tokens[i+1:i+257]: one 514-byte window "
                                "at a uniform random token offset (not aligned to anything)"},
        "file_size": {"train.bin": size("train.bin") or TRAIN_TOKENS * 2,
                      "val.bin": size("val.bin") or VAL_TOKENS * 2,
                      "meta.pkl": size("meta.pkl")},
        "batch_size": BATCH,
        "micro_batches_per_step": GRAD_ACCUM, "samples_per_step": BATCH * GRAD_ACCUM,
        "readers": {"kind": "main", "count": 1},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": ITERS_PER_EPOCH,
        "total_steps": iters,
        "compute_s_per_step": COMPUTE_S,
        "compute_detail": {"per_micro_batch_s": MICRO_S, "optimizer_s": OPTIM_S,
                           "note": "each step: 4 x (memmap + 8 windows + 4 ms), then 6 ms"},
        "shuffle": "none: every window offset drawn uniformly at random "
                   "(np.random.default_rng(1337)), with replacement, no notion of epoch order",
        "eval": {"after_every_epoch": True, "count": EPOCHS,
                 "batches": {"train.bin": EVAL_ITERS, "val.bin": EVAL_ITERS},
                 "batch_size": BATCH, "compute_s_per_batch": EVAL_S,
                 "note": "estimate_loss: 3 fresh memmaps of train.bin then 3 of val.bin"},
        "checkpoint": None,
        "side_files": [{"name": "meta.pkl", "reads": 1, "when": "start"}],
        "memmaps": {"train.bin": iters * GRAD_ACCUM + EPOCHS * EVAL_ITERS,
                    "val.bin": EPOCHS * EVAL_ITERS},
        "windows_read": {"train.bin": BATCH * (iters * GRAD_ACCUM + EPOCHS * EVAL_ITERS),
                         "val.bin": BATCH * EPOCHS * EVAL_ITERS},
        "read_pattern": "no read syscalls for data: each micro-batch opens the token file, "
                        "mmaps all of it, closes the fd, then touches 8 random 514-byte "
                        "windows (page faults); the mapping is dropped after the batch",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    # a Zipf-ish token distribution, like real text
    p = 1.0 / np.arange(1, VOCAB + 1)
    p /= p.sum()
    for name, n in (("train.bin", TRAIN_TOKENS), ("val.bin", VAL_TOKENS)):
        rng.choice(VOCAB, size=n, p=p).astype(np.uint16).tofile(os.path.join(data, name))
    itos = {i: f"tok{i}" for i in range(VOCAB)}
    with open(os.path.join(data, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": VOCAB, "itos": itos,
                     "stoi": {v: k for k, v in itos.items()}}, f)


def train(data):
    with open(os.path.join(data, "meta.pkl"), "rb") as f:
        meta = pickle.load(f)
    assert meta["vocab_size"] == VOCAB
    rng = np.random.default_rng(SEED)

    def get_batch(split):
        # re-created every batch, as nanoGPT does, to avoid a memmap "leak"
        d = np.memmap(os.path.join(data, f"{split}.bin"), dtype=np.uint16, mode="r")
        ix = rng.integers(0, len(d) - BLOCK, size=BATCH)
        x = np.stack([d[i:i + BLOCK].astype(np.int64) for i in ix])
        y = np.stack([d[i + 1:i + 1 + BLOCK].astype(np.int64) for i in ix])
        return x, y

    def estimate_loss():
        out = {}
        for split in ("train", "val"):
            acc = 0.0
            for _ in range(EVAL_ITERS):
                x, y = get_batch(split)
                acc += float(x.mean() - y.mean())
                time.sleep(EVAL_S)
            out[split] = acc / EVAL_ITERS
        return out

    it = 0
    for epoch in range(EPOCHS):
        for _ in range(ITERS_PER_EPOCH):
            for micro in range(GRAD_ACCUM):
                x, y = get_batch("train")
                assert x.shape == (BATCH, BLOCK) and int(x.max()) < VOCAB
                time.sleep(MICRO_S)  # forward + backward of one micro-batch
            time.sleep(OPTIM_S)  # optimizer step, once per GRAD_ACCUM micro-batches
            it += 1
        estimate_loss()
    assert it == EPOCHS * ITERS_PER_EPOCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
