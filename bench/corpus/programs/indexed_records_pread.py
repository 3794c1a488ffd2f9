"""Variable-length records packed in a few large files, read one by one with os.pread by index.

4 data files (.dat) each pack 64 records of lognormal length (median 32 KiB, sigma 0.7,
clipped to [2 KiB, 512 KiB]) back to back; index.json beside them lists each record's
(file, offset, length) and is read once before training. The data files are opened once
(os.open); each epoch shuffles all 256 records and each step preads 8 of them (one os.pread
of exactly the record's length each), then sleeps 15 ms.

Usage: indexed_records_pread.py DATA [--make | --truth]
Fixed by the program: 4 files x 64 records, batch 8, main thread only, 2 epochs of 32 steps,
15 ms compute per step, records shuffled across files per epoch. stdlib only.
"""
import json
import math
import os
import random
import sys
import time

FILES, PER_FILE, BATCH, EPOCHS, COMPUTE_S = 4, 64, 8, 2, 0.015
MEDIAN, SIGMA, LO, HI = 32 << 10, 0.7, 2 << 10, 512 << 10
SEED = 4


def lengths():
    rng = random.Random(SEED)
    return [min(HI, max(LO, int(rng.lognormvariate(math.log(MEDIAN), SIGMA))))
            for _ in range(FILES * PER_FILE)]


def truth(data):
    n = lengths()
    s = sorted(n)
    files = sorted(os.path.join(data, x) for x in os.listdir(data) if x.endswith(".dat")) \
        if os.path.isdir(data) else []
    return {
        "program": "indexed_records_pread", "needs": [], "format": "raw records + json index",
        "io_library": "os.pread", "data_layout": "DATA/*.dat, DATA/index.json",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA, "clip": [LO, HI],
                        "mean": sum(n) / len(n), "min": s[0], "max": s[-1],
                        "median_actual": s[len(s) // 2]},
        "file_size": {"bytes": [os.path.getsize(f) for f in files]},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": FILES * PER_FILE // BATCH,
        "total_steps": EPOCHS * FILES * PER_FILE // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "records across files, per epoch", "eval": None, "checkpoint": None,
        "side_files": [{"name": "index.json", "reads": 1, "when": "before training"}],
        "read_pattern": "one pread of exactly one record per sample, files kept open",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = random.Random(SEED + 1)
    n = lengths()
    index = []
    for f in range(FILES):
        with open(os.path.join(data, f"records_{f}.dat"), "wb") as out:
            off = 0
            for r in range(PER_FILE):
                k = n[f * PER_FILE + r]
                out.write(rng.randbytes(k))
                index.append([f"records_{f}.dat", off, k])
                off += k
    with open(os.path.join(data, "index.json"), "w") as out:
        json.dump(index, out)


def train(data):
    with open(os.path.join(data, "index.json")) as f:
        index = json.load(f)
    fds = {name: os.open(os.path.join(data, name), os.O_RDONLY) for name in {e[0] for e in index}}
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        rng.shuffle(index)
        for s in range(len(index) // BATCH):
            for name, off, k in index[s * BATCH:(s + 1) * BATCH]:
                assert len(os.pread(fds[name], k, off)) == k
            time.sleep(COMPUTE_S)
    for fd in fds.values():
        os.close(fd)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
