"""tf.data from_generator over npy files, cache() in memory: only the first epoch reads files.

DATA/samples holds 96 npy files, one sample each: a 32 x 32 x 3 float32 array (12288 bytes +
a 128-byte npy header = 12416 bytes; 1.2 MB in all), and DATA/labels.json (1.5 KB) maps file
name to label. The main thread reads labels.json once, then builds
Dataset.from_generator(gen) where gen np.load-s the 96 files in name order, then
.cache() (in memory, no file name), .shuffle(24, seed 4242, reshuffled each epoch),
.batch(8, drop_remainder), .prefetch(2). 3 epochs of 12 steps (a fresh iterator per epoch),
15 ms of compute (sleep) per step on the main thread. Epoch 1 fills the cache as it goes;
epochs 2 and 3 are served from the completed in-memory cache and read NO file at all.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write,mmap):
importing TensorFlow (about 4 s) opens thousands of .py/.pyc/.so files on the main thread;
then labels.json: openat, fstat, lseeks, one 1537-byte read (1536 returned), a 1-byte read
at EOF, close. The data files are read NOT by the main thread but by tf.data runtime
threads running the Python generator (one thread does most of them, another an occasional
one: in one run 86 and 10 of the 96; never two at once), strictly in name order s_000 ..
s_095, one file after the other. Per file (np.load of a path): openat(O_RDONLY|O_CLOEXEC),
fstat, lseek(0, SEEK_CUR), a buffered 4096-byte read from offset 0; then numpy's fromfile
on a dup of the descriptor (the dup is not in the trace set, so its reads are on an fd no
openat returned): lseek(SEEK_CUR), fstat, lseek to 0, a 128-byte read, lseek to 0, reads of
4096, 8192 and 4096 (short: 128) from offset 0 to EOF; close of the dup, lseek(4096),
lseek(12416) on the original, close. So 5 reads, 16640 bytes, for a 12416-byte file, about
1 ms per file. Timing: before the first step returns, a burst of about 31 files (the
24-element shuffle buffer plus the first batch), then about 16 more during the first step
(prefetch 2 batches), then 8 files per 15 ms step; all 96 are read by about step 9 of
epoch 1, and the rest of the run (3 steps of epoch 1, all of epochs 2 and 3) has no data
I/O, only 15 ms steps. 96 file reads, 480 reads, about 1.6 MB in all. No writes to files.

Usage: tf_generator_cache.py DATA [--make | --truth]
Fixed by the program: 96 npy files of 12416 bytes, 1 sample per file, batch 8, shuffle
buffer 24 after an in-memory cache, prefetch 2, generator on a tf.data thread, 3 epochs of
12 steps, 15 ms compute per step; files read only in epoch 1; no checkpoint, no eval.
Needs tensorflow.
"""
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FILES, SHAPE, BATCH, SHUFFLE_BUF, PREFETCH, EPOCHS, COMPUTE_S = 96, (32, 32, 3), 8, 24, 2, 3, 0.015
SAMPLE_BYTES = 4 * SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 4242


def file_names(data):
    d = os.path.join(data, "samples")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".npy")) \
        if os.path.isdir(d) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = FILES // BATCH
    return {
        "program": "tf_generator_cache", "needs": ["tensorflow"], "format": "npy",
        "io_library": "numpy.load inside a Python generator wrapped by "
                      "tf.data.Dataset.from_generator",
        "data_layout": "DATA/samples/*.npy, DATA/labels.json",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES, "dtype": "float32",
                        "shape": list(SHAPE)},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else SAMPLE_BYTES + 128,
                      "header_bytes": 128},
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": 1, "framework": "tf.data",
                    "note": "the generator runs on one tf.data runtime thread (not the main "
                            "thread), pulled by the prefetch thread"},
        "prefetch": {"tf_prefetch_batches": PREFETCH, "shuffle_buffer": SHUFFLE_BUF},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "files read in name order by the generator; a 24-element shuffle buffer "
                   "after the cache reshuffles samples each epoch (seed 4242)",
        "cache": {"kind": "tf.data cache() in memory", "files_read_epoch": [FILES, 0, 0],
                  "note": "epochs 2 and 3 are served from memory: no data file is opened"},
        "files_read_per_epoch": [FILES, 0, 0],
        "eval": None, "checkpoint": None,
        "side_files": [{"name": "labels.json", "reads": 1, "when": "start, main thread"}],
        "read_pattern": "whole-file np.load per sample, sequential name order, first epoch "
                        "only; reads run ahead of compute by the shuffle buffer + prefetch",
    }


def make(data):
    os.makedirs(os.path.join(data, "samples"), exist_ok=True)
    labels = {}
    for i in range(FILES):
        rng = np.random.default_rng(SEED + 1 + i)
        np.save(os.path.join(data, "samples", f"s_{i:03d}.npy"),
                rng.random(SHAPE, dtype=np.float32))
        labels[f"s_{i:03d}.npy"] = int(rng.integers(0, 10))
    with open(os.path.join(data, "labels.json"), "w") as f:
        json.dump(labels, f, sort_keys=True)


def train(data):
    import tensorflow as tf

    names = file_names(data)
    with open(os.path.join(data, "labels.json")) as f:
        labels = json.load(f)

    def gen():
        for p in names:
            yield np.load(p), labels[os.path.basename(p)]

    ds = tf.data.Dataset.from_generator(
        gen, output_signature=(tf.TensorSpec(SHAPE, tf.float32), tf.TensorSpec((), tf.int32)))
    ds = ds.cache().shuffle(SHUFFLE_BUF, seed=SEED, reshuffle_each_iteration=True)
    ds = ds.batch(BATCH, drop_remainder=True).prefetch(PREFETCH)
    for epoch in range(EPOCHS):
        steps = 0
        for x, y in ds:
            assert x.shape == (BATCH,) + SHAPE
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == FILES // BATCH, steps


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
