"""tf.data over raw files: shuffle buffer, parallel map(tf.io.read_file), batch, prefetch.

128 .bin files of random bytes whose sizes are log-uniform between 4 KiB and 256 KiB (so
many small files and a few large ones). The pipeline:
Dataset.from_tensor_slices(sorted paths).shuffle(32, seed, reshuffle_each_iteration=True)
.map(tf.io.read_file, num_parallel_calls=4).batch(8).prefetch(2); a batch is 8 whole-file
byte strings. The shuffle buffer (32) is smaller than the file list (128), so the order is
only a local shuffle: a file comes out at most about 32 places before its sorted position,
and the sorted order shows through. The Python loop iterates the dataset once per epoch and
sleeps 10 ms per batch.

What a syscall trace sees: every data read on TF's own threads (about 4 distinct thread
ids, the parallel map's workers), none on the Python main thread. Per file: openat
(O_RDONLY), one pread64 at offset 0 asking 1 MiB that returns the whole file, one pread64
of the rest of the 1 MiB at the file's end that returns 0, close; no stat. Up to 4 files
are read at the same moment, and the pipeline runs ahead of training by the 2 prefetched
batches plus the batch being built and the map's 4 calls in flight, so reading starts
before the first step and bunches up at the start of each epoch (a new iterator per epoch;
nothing is read across the epoch boundary). Each epoch reads each file exactly once. No
writes.

Usage: tf_map_read_file.py DATA [--make | --truth]
Fixed by the program: 128 files, 1 sample per file, batch 8, 4 parallel map calls, prefetch
2 batches, shuffle buffer 32, 2 epochs of 16 steps, 10 ms compute per step, no checkpoint,
no eval. Needs tensorflow.
"""
import json
import os
import random
import sys
import time

FILES, BATCH, PARALLEL, PREFETCH, BUFFER, EPOCHS, COMPUTE_S = 128, 8, 4, 2, 32, 2, 0.010
LO, HI = 4 << 10, 256 << 10
SEED = 31337
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def file_sizes():
    rng = random.Random(SEED)
    return [int(LO * (HI / LO) ** rng.random()) for _ in range(FILES)]


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".bin")) \
        if os.path.isdir(data) else []


def truth(data):
    s = file_sizes()
    return {
        "program": "tf_map_read_file", "needs": ["tensorflow"], "format": "raw (.bin)",
        "io_library": "tf.io.read_file in tf.data map (TF C++ file system, TF threads)",
        "data_layout": "DATA/*.bin", "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "log-uniform", "range": [LO, HI],
                        "mean": sum(s) / len(s), "median": sorted(s)[len(s) // 2],
                        "min": min(s), "max": max(s), "total": sum(s)},
        "file_size": "as sample_size", "batch_size": BATCH,
        "readers": {"kind": "thread", "count": "TF tf.data thread pool",
                    "num_parallel_calls": PARALLEL},
        "prefetch": {"batches": PREFETCH, "shuffle_buffer": BUFFER},
        "epochs": EPOCHS, "steps_per_epoch": FILES // BATCH,
        "total_steps": EPOCHS * FILES // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch, through a 32-element shuffle buffer (local shuffle)",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole file per sample (tf.io.read_file), up to 4 files read at "
                        "once on TF threads, read ahead by up to 2 batches",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = random.Random(SEED + 1)
    for i, n in enumerate(file_sizes()):
        with open(os.path.join(data, f"rec_{i:04d}.bin"), "wb") as f:
            f.write(rng.randbytes(n))


def train(data):
    import tensorflow as tf
    files = file_names(data)
    ds = (tf.data.Dataset.from_tensor_slices(files)
          .shuffle(BUFFER, seed=SEED, reshuffle_each_iteration=True)
          .map(tf.io.read_file, num_parallel_calls=PARALLEL)
          .batch(BATCH)
          .prefetch(PREFETCH))
    for epoch in range(EPOCHS):
        steps = 0
        for batch in ds:
            assert batch.shape == (BATCH,)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == FILES // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
