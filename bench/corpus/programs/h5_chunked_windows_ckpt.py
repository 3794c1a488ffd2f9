"""Contiguous batch windows at random (unaligned) starts from a CHUNKED HDF5 dataset (chunk =
8 samples), with an np.save checkpoint every 40 steps (keep the last 2).

DATA/train.h5 (h5py defaults, 7.1 MB) holds "images": 1024 x 48 x 48 x 3 uint8,
chunked with chunks=(8, 48, 48, 3), no compression, so 128 chunks of 55296 bytes (one chunk =
8 consecutive samples of 6912 bytes), and "labels": 1024 int16, contiguous. The loader
opens the file once (h5py.File, default 1 MiB chunk cache), reads labels[:] once, then each
step picks a random start s in [0, 1000] (numpy rng seeded 31337, NOT aligned to the 8-sample
chunks) and reads the window images[s:s+24] with one slicing call (one H5Dread), which
touches 3 chunks (s % 8 == 0) or 4 chunks (otherwise). 42 steps per epoch (1024 // 24),
3 epochs, 126 steps; 16 ms sleep per step. The "model" is a float32 256 x 512 array,
nudged every step; every 40 global steps (steps 40, 80, 120) it is checkpointed with np.save
into an open file DATA/ckpt/weights_step000040.npy.tmp, which is then os.replace()d to
weights_step000040.npy; after writing a new one, checkpoints older than the last 2 are
deleted (weights_step000040.npy is unlinked after step 120's is written).

What a syscall trace sees (strace -f -e trace=openat,read,pread64,write,lseek,rename,unlink):
a single process, one thread doing all the I/O. openat(train.h5) once (7098008 bytes);
9 small metadata preads at open / first touch (8@0, 48@0, 48@48, 512@96, 512@680, 544@136,
328@1072, 512@800, 512@7093912); labels: one pread of 2048 bytes at 7095960; the chunk
B-tree: 4 preads of 3656 bytes (root node at 1400, leaf nodes at 3599296, 3602952 and one
more) the first time their chunks are looked up. The chunks are stored in index order,
55296 bytes apart from offset 5056 (chunk k at about 5056 + 55296*k; two gaps where B-tree
nodes sit, after chunks 64 and 121). The default chunk cache (1 MiB = 18 chunks) keeps
recent chunks, so a window only reads its chunks that are not cached: one pread of exactly
55296 bytes per missing chunk at that chunk's offset, in ascending order within a window.
With random windows over 128 chunks the hit rate is low (~7%), so nearly every step issues a
burst of 3-4 preads of 55296 bytes (~200 KB) right before its sleep: 423 chunk preads for
126 steps (~3.4 per step), 23.4 MB read over the run (the 7 MB dataset read ~3.3 times).
Writes: DATA/ckpt is mkdir'ed at the start; at steps 40, 80, 120 one openat(O_WRONLY|
O_CREAT|O_TRUNC) of weights_stepNNNNNN.npy.tmp, write(fd, 128) of the .npy header, then
numpy's tofile writes the 524288 data bytes with ONE write on a dup of that fd (plus a few
lseeks), close, rename(.tmp -> .npy), then os.listdir(DATA/ckpt) (an O_DIRECTORY openat);
after step 120's checkpoint also unlink(weights_step000040.npy). Nothing else touches the
data file; it is closed at the end.

Usage: h5_chunked_windows_ckpt.py DATA [--make | --truth]
Fixed by the program: 1 HDF5 file, 1024 samples of 6912 bytes in 8-sample chunks, batch
(window) 24 at random unaligned starts, single process, no prefetch, 3 epochs of 42 steps,
16 ms compute per step, checkpoint (np.save, 512 KiB + 128 B header) every 40 steps keeping
the last 2, no eval. Needs h5py.
"""
import json
import os
import sys
import time

import numpy as np

N, SHAPE, CHUNK, BATCH, EPOCHS, COMPUTE_S = 1024, (48, 48, 3), 8, 24, 3, 0.016
CKPT_EVERY, KEEP, W_SHAPE = 40, 2, (256, 512)
ROW = SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 31337


def h5_path(data):
    return os.path.join(data, "train.h5")


def truth(data):
    p = h5_path(data)
    steps = N // BATCH
    total = EPOCHS * steps
    ckpt_steps = list(range(CKPT_EVERY, total + 1, CKPT_EVERY))
    return {
        "program": "h5_chunked_windows_ckpt", "needs": ["h5py"], "format": "hdf5",
        "io_library": "h5py (chunked dataset, default 1 MiB chunk cache)",
        "data_layout": "DATA/train.h5: images 1024 x 48 x 48 x 3 uint8 chunked (8,48,48,3) "
                       "uncompressed (128 chunks of 55296 bytes); labels 1024 int16 contiguous",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed", "bytes": ROW, "dtype": "uint8", "shape": list(SHAPE)},
        "chunk": {"samples": CHUNK, "bytes": CHUNK * ROW, "count": N // CHUNK},
        "file_size": os.path.getsize(p) if os.path.exists(p) else None,
        "batch_size": BATCH,
        "readers": {"kind": "main", "count": 1, "framework": None},
        "prefetch": None,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": total,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "random unaligned window starts (rng seeded 31337), contiguous windows of "
                   "24 samples; windows may overlap and not every sample is read each epoch",
        "eval": None,
        "checkpoint": {"every_steps": CKPT_EVERY, "at_steps": ckpt_steps,
                       "dir": "DATA/ckpt", "writer": "np.save to .tmp then os.replace",
                       "bytes": 128 + 4 * W_SHAPE[0] * W_SHAPE[1], "keep_last": KEEP,
                       "files": ["weights_step%06d.npy" % s for s in ckpt_steps]},
        "side_files": ["DATA/ckpt/weights_step*.npy (written)"],
        "file_opens": {"total": 1},
        "read_pattern": "per step one window read of 3-4 chunks; each chunk not in the chunk "
                        "cache read with one 55296-byte pread at its offset; labels read "
                        "once; ~10 small metadata preads at open",
    }


def make(data):
    import h5py
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    with h5py.File(h5_path(data), "w") as f:
        f.create_dataset("images", data=rng.integers(0, 256, (N,) + SHAPE, dtype=np.uint8),
                         chunks=(CHUNK,) + SHAPE)
        f.create_dataset("labels", data=rng.integers(0, 10, N).astype(np.int16))


def save_ckpt(ckdir, step, w):
    final = os.path.join(ckdir, "weights_step%06d.npy" % step)
    tmp = final + ".tmp"
    with open(tmp, "wb") as f:
        np.save(f, w)
    os.replace(tmp, final)
    old = sorted(n for n in os.listdir(ckdir) if n.startswith("weights_step")
                 and n.endswith(".npy"))
    for n in old[:-KEEP]:
        os.unlink(os.path.join(ckdir, n))


def train(data):
    import h5py
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    w = np.random.default_rng(SEED + 1).standard_normal(W_SHAPE).astype(np.float32)
    step = 0
    with h5py.File(h5_path(data), "r") as f:
        images, labels = f["images"], f["labels"][:]
        steps = N // BATCH
        for epoch in range(EPOCHS):
            for _ in range(steps):
                s = int(rng.integers(0, N - BATCH + 1))
                x = images[s:s + BATCH]
                y = labels[s:s + BATCH]
                assert x.shape == (BATCH,) + SHAPE and y.shape == (BATCH,)
                w *= np.float32(0.999)
                w[0, :8] += x.mean(axis=(0, 1, 2, 3)) / 255.0
                time.sleep(COMPUTE_S)
                step += 1
                if step % CKPT_EVERY == 0:
                    save_ckpt(ckdir, step, w)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
