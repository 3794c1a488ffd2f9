"""Random per-sample reads of an image dataset and a label dataset in two HDF5 files.

2 HDF5 files (DATA/part_0.h5, DATA/part_1.h5), each with 160 samples in two datasets:
"images" (160 x 64 x 64 x 3 uint8, chunked one image per chunk, 12 KiB a chunk,
uncompressed) and "labels" (160 int64, contiguous, 1280 bytes). Both files are opened once
(h5py.File(path, "r"), default settings) before training, but the datasets are looked up by
name on every access (f["images"][i], f["labels"][i], as a Dataset.__getitem__ often does),
so each access opens the dataset afresh with an empty chunk cache and sieve buffer. Each
epoch visits all 320 (file, index) pairs in a fresh shuffle (one random.Random for the run);
each sample is images[i] then labels[i] from the same file, 8 samples a step, then 15 ms of
sleep as compute.

What a syscall trace sees (the same with HDF5 1.14 and 2.0, whose default chunk cache sizes
differ: the per-access lookup makes the cache irrelevant), all on the main thread: at start,
per file an openat and a few small preads of the superblock and object headers (8 to 544
bytes). Per sample, two preads: one of 12288 bytes at the image's chunk, then one of
(160 - i) * 8 bytes at label i, running to the end of the labels dataset (HDF5's sieve
buffer for a contiguous dataset is filled from the element asked for to the end of the
dataset, at most 64 KiB), so these are 8 to 1280 bytes, uniform over that range, always
ending at the same offset (the end of the file). In the first epoch there are also 8 preads
of 3656 bytes (the v1 B-tree nodes of the two chunk indexes, then kept in HDF5's per-file
metadata cache). Every epoch reads every image again. No writes; the files stay open until
the end.

Usage: h5_two_datasets.py DATA [--make | --truth]
Fixed by the program: 2 files x 160 samples (12288-byte image + 8-byte label), chunk = 1
image, batch 8, main thread only, no read ahead, 2 epochs of 40 steps, 15 ms of compute per
step, shuffled per epoch across both files, no checkpoint, no eval. Needs h5py and numpy.
"""
import json
import os
import random
import sys
import time

import h5py
import numpy as np

FILES, PER_FILE, SHAPE, BATCH, EPOCHS, COMPUTE_S = 2, 160, (64, 64, 3), 8, 2, 0.015
IMAGE_BYTES = SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 808


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".h5")) \
        if os.path.isdir(data) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = FILES * PER_FILE // BATCH
    return {
        "program": "h5_two_datasets", "needs": [], "format": "hdf5", "io_library": "h5py",
        "data_layout": "DATA/*.h5, datasets 'images' (chunked (1, 64, 64, 3)) and 'labels' "
                       "(contiguous int64)",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": IMAGE_BYTES + 8,
                        "parts": {"images": IMAGE_BYTES, "labels": 8}},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else None,
                      "total": sum(fsz)},
        "hdf5": {"layout": {"images": "chunked, 1 image per chunk", "labels": "contiguous"},
                 "compression": None,
                 "chunk_cache": "none in effect (datasets re-opened by name on every access)",
                 "reads_per_sample": 2,
                 "label_read_bytes": "(160 - i) * 8 (sieve buffer refill to end of dataset)"},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "samples across both files, per epoch",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "files opened once; per sample one 12 KiB pread of the image chunk "
                        "and one small pread (8-1280 B) of the labels dataset, random offsets",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for k in range(FILES):
        rng = np.random.default_rng(SEED + k)
        images = rng.integers(0, 255, (PER_FILE,) + SHAPE, dtype=np.uint8)
        labels = rng.integers(0, 1000, PER_FILE, dtype=np.int64)
        with h5py.File(os.path.join(data, f"part_{k}.h5"), "w") as f:
            f.create_dataset("images", data=images, chunks=(1,) + SHAPE)
            f.create_dataset("labels", data=labels)


def sample(f, i):
    # The datasets are looked up by name on every access (as a Dataset.__getitem__ often
    # does), so each access opens the dataset afresh, with a fresh (empty) chunk cache.
    return f["images"][i], f["labels"][i]


def train(data):
    files = [h5py.File(n, "r") for n in file_names(data)]
    pairs = [(k, i) for k in range(len(files)) for i in range(files[k]["labels"].shape[0])]
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        rng.shuffle(pairs)
        for s in range(len(pairs) // BATCH):
            batch = [sample(files[k], i) for k, i in pairs[s * BATCH:(s + 1) * BATCH]]
            assert all(x.shape == SHAPE for x, _ in batch)
            time.sleep(COMPUTE_S)
    for f in files:
        f.close()


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
