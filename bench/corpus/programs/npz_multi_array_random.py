"""Random whole-sample reads of npz files holding three arrays each, on the main thread.

DATA holds 32 npz files (np.savez: a zip archive, members stored uncompressed, with zip64
extra fields), each one sample of three arrays: "x" float32 128 x 128 (65536 bytes), "y"
int64 x 16 (128 bytes) and "meta" float64 x 6 (48 bytes), each member an npy file with a
128-byte header; 66442 bytes a file, 2.1 MB in all. Each epoch shuffles the files (one
random.Random for the run); a sample is `with np.load(path) as z: z["x"], z["y"], z["meta"]`
(open the archive, read all three members, close). Batch 4, main thread only, then 10 ms of
sleep as compute; 3 epochs of 8 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write), all on
the main thread, one file at a time. Per sample: openat(O_RDONLY|O_CLOEXEC), fstat, lseek(0,
SEEK_CUR), a buffered read of 4096 bytes at offset 0 (np.load checking the zip magic); then
zipfile finds the directory from the end: lseek(0, SEEK_END), lseek(-22, SEEK_END), fstat, a
read of 22 bytes (the end record; 23 asked) and a 0-byte read at EOF, lseek(-42, SEEK_END)
and a 4096-byte read returning 42 (the zip64 locator check, to EOF), lseek to the central
directory and a 4096-byte read returning 178 (the 156-byte directory and the end record, to
EOF). Then the members, in order: lseek(0, SEEK_SET) and a 4096-byte read (x's local header
and npy header), then x's data as reads of 4096, 57344 and 4096 (short: 906, reaching the
end of the file); "y" and "meta" sit in those last 906 bytes, so reading them costs only
lseek(0, SEEK_CUR) calls (tells, no read). So 9 reads per sample, 70780 bytes for a
66442-byte file: the first 4 KiB read twice, the last 178 bytes 2 to 4 times, the bulk once;
the offsets go start, end, start, then run forward to the end. The first sample also imports
the cp437 codec (zipfile). 96 samples (every file 3 times, once an epoch), 864 reads, 6.8
MB; 4 samples in a burst at each step's start, then 10 ms with no I/O. No writes.

Usage: npz_multi_array_random.py DATA [--make | --truth]
Fixed by the program: 32 npz files of 3 arrays (65712 bytes of data), 1 sample per file,
batch 4, main thread only, 3 epochs of 8 steps, 10 ms compute per step, shuffled per
epoch, no checkpoint, no eval. Needs numpy only.
"""
import json
import os
import random
import sys
import time

import numpy as np

FILES, X_SHAPE, Y_LEN, META_LEN, BATCH, EPOCHS, COMPUTE_S = 32, (128, 128), 16, 6, 4, 3, 0.010
SEED = 3232


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npz")) \
        if os.path.isdir(data) else []


def member_bytes():
    return {"x": 4 * X_SHAPE[0] * X_SHAPE[1], "y": 8 * Y_LEN, "meta": 8 * META_LEN}


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    mb = member_bytes()
    steps = FILES // BATCH
    return {
        "program": "npz_multi_array_random", "needs": [], "format": "npz (zip, stored)",
        "io_library": "numpy.load (zipfile), all three members read per sample",
        "data_layout": "DATA/*.npz, members x.npy (float32 128x128), y.npy (int64 16), "
                       "meta.npy (float64 6)",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": sum(mb.values()), "arrays": mb,
                        "npy_header_bytes": 128},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None,
                      "total": int(sum(fsz))},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "files, per epoch", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "per sample: open, read the zip end records and central directory "
                        "near the end of the file, then each member (local header, npy "
                        "header, data) in turn with seeks back; main thread only",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        rng = np.random.default_rng(SEED + i)
        x = rng.standard_normal(X_SHAPE, dtype=np.float32)
        y = rng.integers(0, 100, Y_LEN, dtype=np.int64)
        meta = np.array([i, X_SHAPE[0], X_SHAPE[1], *rng.uniform(0, 1, META_LEN - 3)])
        np.savez(os.path.join(data, f"sample_{i:03d}.npz"), x=x, y=y, meta=meta)


def load(path):
    with np.load(path) as z:
        return z["x"], z["y"], z["meta"]


def train(data):
    names = file_names(data)
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        for s in range(len(order) // BATCH):
            batch = [load(p) for p in order[s * BATCH:(s + 1) * BATCH]]
            assert all(x.shape == X_SHAPE and y.shape == (Y_LEN,) and m.shape == (META_LEN,)
                       for x, y, m in batch)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
