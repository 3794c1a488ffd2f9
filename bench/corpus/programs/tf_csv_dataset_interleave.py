"""Tabular classification (a sensor / credit-scoring style MLP) with tf.data reading CSV
shards through tf.data.experimental.CsvDataset: the shard list is reshuffled every epoch
by list_files, 3 shards are parsed at a time by a parallel interleave (block_length 16,
deterministic=False), then a 4096-row shuffle buffer, batch 384, prefetch 2; a validation
CSV file is evaluated after every epoch.

Data set (DATA/, about 9.7 MB):
  DATA/train/part-00.csv .. part-07.csv   8 CSV shards of 5,760 rows each (46,080 rows),
                                          1,106,765-1,132,193 bytes each (8.97 MB);
  DATA/val.csv                            3,840 rows (748,776 bytes).
  Every file starts with a header line "f00,f01,...,f23,cat,label"; a row is 24 floats
  printed with 4 decimals (signs vary), a categorical int 0..49 and the int label 0..4,
  ~195 bytes per row.

Training: ds = tf.data.Dataset.list_files(DATA/train/part-*.csv, shuffle=True, seed=31)
(a new shard order each epoch) .interleave(lambda f: CsvDataset(f, record_defaults=[24 x
float32, int32, int32], header=True, buffer_size=65536), cycle_length=3, block_length=16,
num_parallel_calls=2, deterministic=False) .shuffle(4096, seed=32) .batch(384,
drop_remainder=True) .map(stack features, num_parallel_calls=2) .prefetch(2). 120 steps
per epoch, 6 ms sleep each. After each epoch: CsvDataset(val.csv, header=True,
buffer_size=65536).batch(960) in file order, 4 eval steps of 3 ms. 2 epochs, 240 train
steps. No checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,preadv,readv,lseek):
importing tensorflow opens hundreds of .so/.py files (not data). list_files lists
DATA/train once (openat O_DIRECTORY, at the first iteration). All CSV I/O is pread64 from
TensorFlow's C++ pool threads (no read(), no lseek on CSV files; the main thread touches
no data file). At the start of each epoch ALL 8 shards are opened within ~7 ms
(openat(part-NN.csv, O_RDONLY), by 5-8 different TF threads), and each gets one
pread64(fd, 65536, 0) right away: the parallel interleave builds the iterators of future
cycle elements early and CsvDataset fills its 64 KiB buffer to skip the header. Then the
shards are consumed in the epoch's list_files order, 3 at a time (cycle_length 3): each
shard is read strictly sequentially in pread64(fd, 65536, OFF) at OFF = 65536, 131072,
... (one every ~20-90 ms under strace while it is in the cycle, paced by parsing and
the consumer),
then a short pread at the tail (2-62 KB) and 2 preads returning 0, and closed; preads of
one file come from 2-3 different TF threads. With the shuffle buffer filled first and
prefetching, the epoch looks like 3 waves of reading (e.g. epoch 1: 6, 5, 0 in the first
~0.5 s; 2, 7, 4; then 3, 1), the 2nd/3rd wave's shards idle (open, first 64 KiB already
read) until they enter the cycle. Per shard 19-20 preads (17 full, 1 short, 2 zero);
per epoch 8 opens, 158 preads, 8,969,106 bytes (every byte once). Eval after each epoch:
val.csv openat by one TF thread, 14 preads on that one thread (11 x 65536 at consecutive
offsets, 27,880 bytes, 0, 0) within ~0.15 s, close (748,776 bytes). No writes.

Usage: tf_csv_dataset_interleave.py DATA [--make | --truth]
needs tensorflow (run with /opt/dlio-reference/venv/bin/python).
"""
import glob
import json
import os
import sys
import time

import numpy as np

N_SHARDS, ROWS_PER_SHARD, N_VAL, N_FEAT, N_CAT, N_CLASSES = 8, 5760, 3840, 24, 50, 5
CYCLE, BLOCK, PAR, SHUFFLE_BUF, BATCH, VAL_BATCH, PREFETCH = 3, 16, 2, 4096, 384, 960, 2
BUFFER = 65536
EPOCHS, COMPUTE_S, EVAL_S = 2, 0.006, 0.003
SEED = 31


def header():
    return ",".join(["f%02d" % i for i in range(N_FEAT)] + ["cat", "label"])


def truth(data):
    files = sorted(glob.glob(os.path.join(data, "train", "part-*.csv")))
    sizes = [os.path.getsize(f) for f in files] or None
    val = os.path.join(data, "val.csv")
    steps = N_SHARDS * ROWS_PER_SHARD // BATCH
    return {
        "program": "tf_csv_dataset_interleave", "needs": ["tensorflow"],
        "format": "CSV text with a header line (24 float + 2 int columns)",
        "io_library": "tf.data.experimental.CsvDataset (buffer_size 65536) in a parallel "
                      "interleave",
        "data_layout": "DATA/train/part-00..07.csv + DATA/val.csv",
        "num_files": N_SHARDS, "samples_per_file": ROWS_PER_SHARD,
        "sample_size": {"distribution": "text rows, ~195 bytes",
                        "file_bytes": sizes,
                        "total_bytes": sum(sizes) if sizes else 8969106},
        "batch_size": BATCH,
        "readers": {"kind": "tf.data parallel interleave (C++ threads)",
                    "cycle_length": CYCLE, "num_parallel_calls": PAR,
                    "block_length": BLOCK},
        "prefetch": {"batches": PREFETCH, "shuffle_buffer": SHUFFLE_BUF},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "list_files(shuffle=True, seed=31) reshuffled each epoch + 4096-row "
                   "shuffle buffer (seed 32)",
        "eval": {"when": "after every epoch", "file": "val.csv", "samples": N_VAL,
                 "batch_size": VAL_BATCH, "steps": N_VAL // VAL_BATCH,
                 "compute_s_per_step": EVAL_S,
                 "bytes": os.path.getsize(val) if os.path.exists(val) else 748776},
        "checkpoint": None,
        "read_pattern": "all 8 shards opened at epoch start (one 64 KiB pread each), then read "
                        "sequentially in 65536-byte preads, 3 shards in progress at a time; "
                        "19-20 preads per shard (incl. 2 zero-length at EOF)",
        "preads_per_epoch": 158,
        "read_size_bytes": BUFFER,
        "bytes_per_epoch": sum(sizes) if sizes else 8969106,
    }


def write_csv(path, n, rng):
    x = rng.normal(0, 1, (n, N_FEAT)) * rng.uniform(0.2, 30, N_FEAT)
    cat = rng.integers(0, N_CAT, n)
    w = rng.normal(0, 1, N_FEAT)
    label = np.digitize(x @ w / np.abs(w).sum() + 0.05 * cat, [-2, -0.7, 0.7, 2])
    with open(path, "w") as f:
        f.write(header() + "\n")
        for i in range(n):
            f.write(",".join("%.4f" % v for v in x[i]) + ",%d,%d\n" % (cat[i], label[i]))


def make(data):
    os.makedirs(os.path.join(data, "train"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    for s in range(N_SHARDS):
        write_csv(os.path.join(data, "train", "part-%02d.csv" % s), ROWS_PER_SHARD, rng)
    write_csv(os.path.join(data, "val.csv"), N_VAL, rng)


def train(data):
    import tensorflow as tf
    defaults = [tf.float32] * N_FEAT + [tf.int32, tf.int32]

    def csv(f):
        return tf.data.experimental.CsvDataset(f, defaults, header=True, buffer_size=BUFFER)

    def pack(*cols):
        return tf.stack(cols[:N_FEAT], axis=1), cols[N_FEAT], cols[N_FEAT + 1]

    ds = (tf.data.Dataset.list_files(os.path.join(data, "train", "part-*.csv"),
                                     shuffle=True, seed=SEED)
          .interleave(csv, cycle_length=CYCLE, block_length=BLOCK, num_parallel_calls=PAR,
                      deterministic=False)
          .shuffle(SHUFFLE_BUF, seed=SEED + 1)
          .batch(BATCH, drop_remainder=True)
          .map(pack, num_parallel_calls=PAR)
          .prefetch(PREFETCH))
    val = csv(os.path.join(data, "val.csv")).batch(VAL_BATCH).map(pack)
    steps, seen, correct = 0, 0, 0
    for epoch in range(EPOCHS):
        for x, c, y in ds:
            assert x.shape == (BATCH, N_FEAT)
            seen += int(y.shape[0])
            time.sleep(COMPUTE_S)
            steps += 1
        nv = 0
        for x, c, y in val:
            nv += int(y.shape[0])
            correct += int(tf.reduce_sum(tf.cast(y == 2, tf.int32)))
            time.sleep(EVAL_S)
        assert nv == N_VAL
    print("tf_csv_dataset_interleave: %d steps, %d rows, %d epochs" % (steps, seen, EPOCHS))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
