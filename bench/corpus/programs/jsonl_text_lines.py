"""JSON-lines text shards read line by line in the main thread, batches across file boundaries.

6 .jsonl files of 280-320 lines each (seeded), every line a JSON object {"id": int, "text":
random printable ascii of lognormal length, median 2 KiB, sigma 0.6, clipped to [64 B, 32 KiB]}
(no characters JSON would escape, so a line is the text plus about 30 bytes). Each epoch visits
the files in a fresh seeded shuffle; a generator walks them with `for line in open(path)` (text
mode, utf-8) and json.loads each line; the training loop cuts the stream into batches of 16
lines, so a batch may span two files (the last partial batch of an epoch is dropped), and sleeps
8 ms per batch. The file stays open while the generator is suspended, so its reads are spread
across the steps. A syscall trace sees one openat (with an fstat, an ioctl and an lseek) per
file per epoch, then sequential 8 KiB reads (the text layer's chunk size), about 5 per step (16
lines of about 2.5 KiB) between the compute sleeps, a short read and an empty read at the end of
the file, then a close and at once the next file's openat, often in the middle of a step: about
90 reads and 19 steps per file, each file read once per epoch.

Usage: jsonl_text_lines.py DATA [--make | --truth]
Fixed by the program: 6 files, 280-320 lines per file (1806 in all), batch 16, main thread
only, 2 epochs of 112 steps, files shuffled per epoch (lines within a file in order), 8 ms
compute per step, no checkpoint, no eval. stdlib only (numpy for --make and --truth).
"""
import json
import os
import random
import sys
import time
from itertools import islice

import numpy as np

FILES, LINES_LO, LINES_HI, BATCH, EPOCHS, COMPUTE_S = 6, 280, 320, 16, 2, 0.008
MEDIAN, SIGMA, LO, HI = 2 << 10, 0.6, 64, 32 << 10
ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                         b" .,;:!?-_()", dtype=np.uint8)
SEED = 4242


def layout():
    rng = np.random.default_rng(SEED)
    lines = rng.integers(LINES_LO, LINES_HI + 1, FILES)
    lens = [np.clip(rng.lognormal(np.log(MEDIAN), SIGMA, n), LO, HI).astype(np.int64)
            for n in lines]
    return [int(n) for n in lines], lens


def truth(data):
    lines, lens = layout()
    allx = np.concatenate(lens)
    total = sum(lines)
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".jsonl")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "jsonl_text_lines", "needs": [], "format": "json lines (text)",
        "io_library": "for line in open(path) + json.loads", "data_layout": "DATA/*.jsonl",
        "num_files": FILES, "samples_per_file": lines,
        "sample_size": {"dist": "lognormal (text field)", "median": MEDIAN, "sigma": SIGMA,
                        "clip": [LO, HI], "plus": "about 30 B of JSON per line",
                        "mean": float(allx.mean()), "min": int(allx.min()),
                        "max": int(allx.max())},
        "file_size": {"bytes": fsz, "total": int(sum(fsz))},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": total // BATCH,
        "total_steps": EPOCHS * (total // BATCH), "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch (lines within a file in order)", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "sequential 8 KiB reads through each file (text-mode buffered), "
                        "spread across steps; batches span file boundaries",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    ident = 0
    for i, lens in enumerate(layout()[1]):
        with open(os.path.join(data, f"part_{i:02d}.jsonl"), "w", newline="\n") as f:
            for n in lens:
                text = ALPHABET[rng.integers(0, len(ALPHABET), int(n))].tobytes().decode()
                f.write(json.dumps({"id": ident, "text": text}) + "\n")
                ident += 1


def records(paths):
    for path in paths:
        for line in open(path, encoding="utf-8"):
            yield json.loads(line)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".jsonl"))
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        stream = records(order)
        while len(batch := list(islice(stream, BATCH))) == BATCH:
            assert all(isinstance(r["id"], int) and r["text"] for r in batch)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
