"""A plain loop over raw files that evaluates every 10 steps and appends a log line each step.

DATA/train holds 160 .bin files and DATA/val 48, raw random bytes, sizes uniform over 32 to
96 KiB (seeded; about 10.6 MB of train and 3.1 MB of val data). Each training epoch shuffles
the train files (one random.Random for the run) and takes 8 per step; a ThreadPoolExecutor
of 2 threads, created once, maps a whole-file reader (open(path, "rb"), f.read(), close)
over the batch, then the main thread sleeps 12 ms as compute. Every 10 training steps,
counted over the run (after steps 10, 20, 30, 40), the main thread runs an evaluation: the
48 val files in name order, 16 per step, read with the same reader but on the main thread, 4
ms of sleep per eval step. The trigger is the step count, not the epoch: with 20 steps an
epoch, the evaluations after steps 10 and 30 are mid-epoch and those after 20 and 40 fall at
the epochs' ends. DATA/train.log is opened with "w" before training (one header line,
truncating an old log) and then, after every training step (before that step's evaluation,
if any), opened with "a", one line appended, closed.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): the
training reads only on the 2 pool threads (created during the first step), each doing 3 to 5
(nearly always 4) of a batch's 8; the val reads and all log writes on the main thread. Per
file read: openat(O_RDONLY|O_CLOEXEC), fstat, two lseek(0, SEEK_CUR), fstat, one read of
st_size + 1 bytes that returns the whole file, then a 1-byte read returning 0 (EOF), close:
2 reads, the file read once, from offset 0. Per log line: openat(O_WRONLY|O_CREAT|O_APPEND),
fstat, lseek(0, SEEK_END), two lseek(0, SEEK_CUR), one write of 42-43 bytes, close (the
first openat has O_TRUNC instead, a 32-byte write). The shape of the run: 10 steps of (8
file reads on 2 threads, 12 ms, 1 log append), then a 48-file burst on the main thread in 3
groups of 16 with 4 ms gaps, and so on; 320 train + 192 val file reads (1024 reads, 33.4 MB
in all), 41 writes (1743 bytes) to train.log. No other writes.

Usage: eval_every_n_steps.py DATA [--make | --truth]
Fixed by the program: 160 train + 48 val files (32-96 KiB, uniform), 1 sample per file,
batch 8, 2 reader threads, 2 epochs of 20 steps, 12 ms compute per step, shuffled per epoch;
eval every 10 steps (4 in all) of 3 steps of 16 files, 4 ms each, main thread; one line
appended to DATA/train.log every step; no checkpoint. Needs numpy only (for --make).
"""
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BATCH, THREADS, EPOCHS, STEPS, COMPUTE_S = 8, 2, 2, 20, 0.012
TRAIN, VAL, VAL_BATCH, VAL_COMPUTE_S, EVAL_EVERY = BATCH * STEPS, 48, 16, 0.004, 10
LO, HI = 32 << 10, 96 << 10
SEED = 1010


def file_sizes(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(LO, HI + 1, n)


def names(data, sub):
    d = os.path.join(data, sub)
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".bin")) \
        if os.path.isdir(d) else []


def truth(data):
    steps = EPOCHS * STEPS
    tr, va = file_sizes(TRAIN, SEED), file_sizes(VAL, SEED + 1)
    log = os.path.join(data, "train.log")
    return {
        "program": "eval_every_n_steps", "needs": [], "format": "raw binary (.bin)",
        "io_library": "open(path, 'rb').read() (train: ThreadPoolExecutor of 2; eval: main "
                      "thread); log appended with open(..., 'a')",
        "data_layout": "DATA/train/*.bin, DATA/val/*.bin; log DATA/train.log",
        "num_files": TRAIN, "samples_per_file": 1,
        "sample_size": {"dist": "uniform", "range": [LO, HI], "mean": float(tr.mean()),
                        "min": int(tr.min()), "max": int(tr.max()), "total": int(tr.sum())},
        "file_size": "as sample_size",
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": THREADS,
                    "note": "pool.map over each training batch of 8; eval on the main thread"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "train files, per epoch",
        "eval": {"folder": "DATA/val", "files": VAL, "every_steps": EVAL_EVERY,
                 "at_steps": list(range(EVAL_EVERY, steps + 1, EVAL_EVERY)),
                 "note": "triggered by the global step count; steps 20 and 40 happen to be "
                         "the last steps of epochs 1 and 2, steps 10 and 30 are mid-epoch",
                 "batch_size": VAL_BATCH, "steps": VAL // VAL_BATCH,
                 "compute_s_per_step": VAL_COMPUTE_S, "readers": "main thread",
                 "order": "by name, no shuffle",
                 "sample_size": {"dist": "uniform", "range": [LO, HI],
                                 "mean": float(va.mean()), "total": int(va.sum())}},
        "checkpoint": None,
        "side_files": [{"name": "train.log", "kind": "write (append)",
                        "writes": 1 + steps, "when": "one header line (truncating) before "
                        "training, then one line appended after every training step",
                        "bytes": os.path.getsize(log) if os.path.exists(log) else None}],
        "read_pattern": "whole file per sample (open, fstat, read to EOF, close), 2 threads "
                        "per training batch; eval reads the 48 val files in name order on "
                        "the main thread",
    }


def make(data):
    for sub, n, seed in (("train", TRAIN, SEED), ("val", VAL, SEED + 1)):
        d = os.path.join(data, sub)
        os.makedirs(d, exist_ok=True)
        rng = np.random.default_rng(seed + 100)
        for i, k in enumerate(file_sizes(n, seed)):
            with open(os.path.join(d, f"{sub}_{i:04d}.bin"), "wb") as f:
                f.write(rng.integers(0, 256, int(k), dtype=np.uint8).tobytes())


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def evaluate(val_files):
    total = 0
    for s in range(len(val_files) // VAL_BATCH):
        batch = [read_file(p) for p in val_files[s * VAL_BATCH:(s + 1) * VAL_BATCH]]
        total += sum(len(b) for b in batch)
        time.sleep(VAL_COMPUTE_S)
    return total


def log_line(log, text):
    with open(log, "a") as f:
        f.write(text + "\n")


def train(data):
    train_files, val_files = names(data, "train"), names(data, "val")
    log = os.path.join(data, "train.log")
    with open(log, "w") as f:
        f.write(f"# train {len(train_files)} files, val {len(val_files)} files\n")
    rng = random.Random(SEED)
    step = 0
    with ThreadPoolExecutor(THREADS) as pool:
        for epoch in range(EPOCHS):
            order = train_files[:]
            rng.shuffle(order)
            for s in range(len(order) // BATCH):
                batch = list(pool.map(read_file, order[s * BATCH:(s + 1) * BATCH]))
                assert len(batch) == BATCH and all(LO <= len(b) <= HI for b in batch)
                time.sleep(COMPUTE_S)
                step += 1
                loss = 1.0 / step
                log_line(log, f"epoch {epoch} step {step} loss {loss:.6f} "
                              f"bytes {sum(len(b) for b in batch)}")
                if step % EVAL_EVERY == 0:
                    evaluate(val_files)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
