"""One small HDF5 file per sample, opened and closed with h5py.File for every sample read.

120 HDF5 files (DATA/sample_0000.h5 .. sample_0119.h5, h5py defaults: superblock v0,
contiguous layout, no compression), each holding one sample: dataset "x" (48 x 48 x 3 uint8,
6912 bytes, at offset 2048) and an integer attribute "label" on the root group; 8960 bytes a
file. Each epoch shuffles the file list (one random.Random for the run) and each step loads
the next 8 on the main thread, each as `with h5py.File(path, "r") as f: f["x"][()],
f.attrs["label"]` (open, read, close), stacks them and sleeps 10 ms as compute. 120 / 8 = 15
steps an epoch, no partial batch, no threads, no read ahead.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write; the same
with HDF5 1.14.6 and 2.0), all on the main thread: openat(O_DIRECTORY) of DATA at start
(getdents). Per sample: openat(O_RDONLY) (no O_CLOEXEC), fstat, flock(LOCK_SH|LOCK_NB) (HDF5
file locking), then 10 preads and no read(): 8 bytes at 0 and 48 at 0 (signature,
superblock), 48 at 48, 512 at 96 (root object header), 80 at 1400, an lstat of the path,
then 512 at 680 (local heap), 544 at 136 (B-tree), 328 at 1072 (symbol table node), 512 at
800 (the object header of "x", with its layout), and 6912 at 2048 (the data, exactly the
dataset), then close (no flock unlock call: close drops the lock). So 9504 bytes read
from an 8960-byte file, 2592 of them in 9 small metadata preads scattered over the first
2 KiB, at the same offsets in every file. 8 opens in a burst at each step's start, then
10 ms with no I/O; 240 opens in all (every file once per epoch), 2400 preads, 2.28 MB.
No writes.

Usage: h5_per_sample_files.py DATA [--make | --truth]
Fixed by the program: 120 files x 1 sample (6912 bytes + label attribute), batch 8, main
thread only, no read ahead, 2 epochs of 15 steps, 10 ms compute per step, shuffled per
epoch, no checkpoint, no eval. Needs h5py and numpy.
"""
import json
import os
import random
import sys
import time

import h5py
import numpy as np

FILES, SHAPE, BATCH, EPOCHS, COMPUTE_S, CLASSES = 120, (48, 48, 3), 8, 2, 0.010, 6
SAMPLE_BYTES = SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 7321


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5")) \
        if os.path.isdir(data) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = FILES // BATCH
    return {
        "program": "h5_per_sample_files", "needs": [], "format": "hdf5", "io_library": "h5py",
        "data_layout": "DATA/sample_NNNN.h5, dataset 'x' (48x48x3 uint8, contiguous) and "
                       "attribute 'label'",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None, "total": sum(fsz)},
        "hdf5": {"layout": "contiguous", "compression": None,
                 "open_per_sample": True},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "files, per epoch", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "per sample: open the file, 9 small metadata preads (8-544 B) in "
                        "the first 2 KiB plus one 6912-byte pread of the data, close; 8 "
                        "files per step, main thread, no overlap with compute",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for i in range(FILES):
        with h5py.File(os.path.join(data, f"sample_{i:04d}.h5"), "w") as f:
            f.create_dataset("x", data=rng.integers(0, 255, SHAPE, dtype=np.uint8))
            f.attrs["label"] = int(rng.integers(0, CLASSES))


def load(path):
    with h5py.File(path, "r") as f:
        return f["x"][()], int(f.attrs["label"])


def train(data):
    names = file_names(data)
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names[:]
        rng.shuffle(order)
        for s in range(len(order) // BATCH):
            batch = [load(p) for p in order[s * BATCH:(s + 1) * BATCH]]
            x = np.stack([b[0] for b in batch])
            assert x.shape == (BATCH,) + SHAPE
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
