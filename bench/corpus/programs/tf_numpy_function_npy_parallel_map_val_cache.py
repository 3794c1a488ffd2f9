"""Small-image classifier trained with a tf.data pipeline over a folder of per-sample .npy
files, the file read done by np.load wrapped in tf.numpy_function inside a parallel map,
with a validation pass after every epoch over a separate val/ folder whose dataset is
.cache()d in memory: the val files are read from disk only during the first pass.

This is the "I already have numpy arrays, I just want tf.data to batch them" pattern:
from_tensor_slices(paths, labels) -> shuffle -> map(tf.numpy_function(np.load)) ->
map(augment) -> batch -> prefetch. tf.numpy_function runs the Python np.load under the
GIL on tf.data's private thread pool.

Data set (DATA/, about 18 MB):
  DATA/train/x_0000.npy .. x_0383.npy   384 files, uint8 112 x 112 x 3, np.save format
                                        1.0: 128-byte header + 37632 bytes = 37760 bytes.
  DATA/val/v_000.npy .. v_095.npy       96 files, same shape and size.
  DATA/train_labels.npy (384 int64, 3200 B), DATA/val_labels.npy (96 int64, 896 B):
                                        loaded by the main process with np.load at start.

Training: tf.random.set_seed(2718). train = from_tensor_slices((paths, labels))
.shuffle(384, seed=2718, reshuffle_each_iteration=True) .map(load, num_parallel_calls=3,
deterministic=True) .map(random crop 96x96 + random flip + /255, num_parallel_calls=3)
.batch(32, drop_remainder=True) .prefetch(2). 3 epochs x 12 steps = 36 steps, 30 ms sleep
per step (whole file read per sample, every train file once per epoch). After every epoch
a validation pass: from_tensor_slices(val paths) .map(load, num_parallel_calls=2) .cache()
.batch(32) .prefetch(1), 3 batches, 10 ms sleep per batch. The first pass reads the 96
val files and fills the in-memory cache; passes 2-3 read nothing from disk. No
checkpoint.

What a syscall trace sees: one process with many threads. The main thread reads the two
label files with np.load. All sample reads run on tf.data worker threads of the same
process (at most 3 at a time for train, 2 for val; ~6 distinct thread ids carry the
train reads over the run). Every np.load of a 37760-byte sample file is: openat
(O_RDONLY|O_CLOEXEC), fstat, lseek, read(4096) (buffered magic + header),
fcntl(F_DUPFD_CLOEXEC) + fcntl(F_GETFL); on the duplicate fd (numpy's fromfile via a C
FILE*): lseek, fstat, lseek(0) + read(128), lseek(0) + read(4096) + read(32768) +
read(4096) returning the last 896 bytes, close(dup); lseek(fd, 4096), lseek(fd, 37760)
and close: i.e. the whole file once plus the header twice more (41984 bytes read per
37760-byte file). 3 x 384 = 1152 train file opens in a shuffled order (a new order each
epoch), 96 val opens (first val pass only; passes 2 and 3 are served from the cache);
~48.4 MB train + 4.0 MB val read by syscalls. No writes.

Usage: tf_numpy_function_npy_parallel_map_val_cache.py DATA [--make | --truth]
Needs tensorflow (run with /opt/dlio-reference/venv/bin/python); --truth and --make
work with numpy only.
"""
import json
import os
import sys
import time

import numpy as np

N_TRAIN, N_VAL, N_CLASSES = 384, 96, 10
SHAPE, CROP = (112, 112, 3), 96
BATCH, PARALLEL, VAL_PARALLEL, PREFETCH, EPOCHS = 32, 3, 2, 2, 3
STEPS = N_TRAIN // BATCH
VAL_BATCHES = -(-N_VAL // BATCH)
COMPUTE_S, VAL_COMPUTE_S = 0.030, 0.010
SEED = 2718
NPY_HEADER = 128
FILE_BYTES = NPY_HEADER + int(np.prod(SHAPE))


def train_path(data, i):
    return os.path.join(data, "train", "x_%04d.npy" % i)


def val_path(data, i):
    return os.path.join(data, "val", "v_%03d.npy" % i)


def truth(data):
    return {
        "program": "tf_numpy_function_npy_parallel_map_val_cache", "needs": ["tensorflow"],
        "format": ".npy (format 1.0, uint8 112x112x3), one sample per file",
        "io_library": "np.load inside tf.numpy_function in a tf.data parallel map",
        "data_layout": "DATA/train/x_NNNN.npy (384), DATA/val/v_NNN.npy (96), "
                       "DATA/train_labels.npy, DATA/val_labels.npy",
        "num_files": N_TRAIN, "samples_per_file": 1, "val_files": N_VAL,
        "sample_size": {"dist": "fixed", "bytes": int(np.prod(SHAPE)),
                        "file_bytes": FILE_BYTES},
        "dataset_bytes": (N_TRAIN + N_VAL) * FILE_BYTES + 3200 + 896,
        "batch_size": BATCH,
        "readers": {"kind": "tf.data private thread pool threads of the main process "
                            "(map num_parallel_calls)", "count": PARALLEL,
                    "val_count": VAL_PARALLEL},
        "prefetch": {"tf_prefetch_batches": PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "tf.data shuffle buffer = whole file list (384), seed 2718, reshuffled "
                   "every epoch",
        "eval": {"every": "epoch", "passes": EPOCHS, "batches": VAL_BATCHES,
                 "compute_s_per_batch": VAL_COMPUTE_S,
                 "cache": "in-memory Dataset.cache(): val files read from disk only in "
                          "pass 1", "val_file_reads_total": N_VAL},
        "checkpoint": None,
        "side_files": [{"path": "train_labels.npy", "reads": 1, "process": "main"},
                       {"path": "val_labels.npy", "reads": 1, "process": "main"}],
        "file_reads_total": EPOCHS * N_TRAIN + N_VAL,
        "bytes_read_total_approx": (EPOCHS * N_TRAIN + N_VAL) * FILE_BYTES,
        "bytes_read_syscalls_per_file": FILE_BYTES + 4096 + 128,
        "read_pattern": "whole small .npy file per sample (open, header read, data read, "
                        "close), shuffled file order, tf.data threads",
    }


def make(data):
    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.join(data, "train"), exist_ok=True)
    os.makedirs(os.path.join(data, "val"), exist_ok=True)
    yy, xx = np.mgrid[0:SHAPE[0], 0:SHAPE[1]]

    def image(label):
        base = 128 + 60 * np.sin(xx / (4.0 + label) + rng.uniform(0, 6.28)) \
            + 40 * np.cos(yy / (3.0 + 0.5 * label))
        img = base[..., None] + rng.normal(0, 25, SHAPE)
        return np.clip(img, 0, 255).astype(np.uint8)

    ytr = rng.integers(0, N_CLASSES, N_TRAIN).astype(np.int64)
    yva = rng.integers(0, N_CLASSES, N_VAL).astype(np.int64)
    for i in range(N_TRAIN):
        np.save(train_path(data, i), image(int(ytr[i])))
    for i in range(N_VAL):
        np.save(val_path(data, i), image(int(yva[i])))
    np.save(os.path.join(data, "train_labels.npy"), ytr)
    np.save(os.path.join(data, "val_labels.npy"), yva)


def load_npy(path):
    return np.load(path.decode())


def train(data):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.random.set_seed(SEED)
    ytr = np.load(os.path.join(data, "train_labels.npy"))
    yva = np.load(os.path.join(data, "val_labels.npy"))
    tr_paths = [train_path(data, i) for i in range(N_TRAIN)]
    va_paths = [val_path(data, i) for i in range(N_VAL)]

    def to_sample(path, y):
        x = tf.numpy_function(load_npy, [path], tf.uint8, stateful=False)
        x.set_shape(SHAPE)
        return x, y

    def augment(x, y):
        x = tf.image.random_crop(x, (CROP, CROP, 3))
        x = tf.image.random_flip_left_right(x)
        return tf.cast(x, tf.float32) / 255.0, y

    train_ds = (tf.data.Dataset.from_tensor_slices((tr_paths, ytr))
                .shuffle(N_TRAIN, seed=SEED, reshuffle_each_iteration=True)
                .map(to_sample, num_parallel_calls=PARALLEL, deterministic=True)
                .map(augment, num_parallel_calls=PARALLEL)
                .batch(BATCH, drop_remainder=True)
                .prefetch(PREFETCH))
    val_ds = (tf.data.Dataset.from_tensor_slices((va_paths, yva))
              .map(to_sample, num_parallel_calls=VAL_PARALLEL)
              .cache()
              .batch(BATCH)
              .prefetch(1))
    w = tf.Variable(tf.zeros((N_CLASSES, 3)))
    steps, vals = 0, []
    for epoch in range(EPOCHS):
        for x, y in train_ds:
            feat = tf.reduce_mean(x, axis=(1, 2))
            w.assign_add(0.001 * tf.matmul(tf.one_hot(y, N_CLASSES), feat, transpose_a=True))
            time.sleep(COMPUTE_S)
            steps += 1
        correct, seen = 0, 0
        for x, y in val_ds:
            feat = tf.reduce_mean(tf.cast(x, tf.float32) / 255.0, axis=(1, 2))
            pred = tf.argmax(tf.matmul(feat, w, transpose_b=True), axis=1)
            correct += int(tf.reduce_sum(tf.cast(pred == y, tf.int32)))
            seen += int(y.shape[0])
            time.sleep(VAL_COMPUTE_S)
        vals.append(round(correct / max(seen, 1), 3))
    print("tf_numpy_function_npy_parallel_map_val_cache: %d steps, val acc per epoch %s"
          % (steps, vals))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
