"""tf.data training over a dataset materialised with tf.data.Dataset.save() (the TF
"snapshot" on-disk format: one directory of shard files per shard_func value plus
metadata), read back with tf.data.Dataset.load() and a custom reader_func that shuffles the
shard list (seeded) and interleaves 2 shards at a time, then shuffle buffer, parallel map,
batch, prefetch. A separately saved validation dataset is loaded and evaluated after every
epoch.

Data set (DATA/, about 46.7 MB):
  DATA/train/                 tf.data.Dataset.save(..., shard_func=id % 8) of 6144 elements
    snapshot.metadata (44 B), dataset_spec.pb (66 B);
    <run id>/00000000.shard/00000000.snapshot .. 00000007.shard/00000000.snapshot
                              8 shard files of 768 elements each (5,381,376 bytes each);
  DATA/val/                   the same for 512 validation elements in ONE shard
                              (3,587,584 bytes).
  An element is {"image": uint8 48 x 48 x 3 (6912 bytes, random 6 x 6 pixel blocks with
  30% noise), "label": int64, "id": int64}, uncompressed (compression=None). A snapshot
  file is a sequence of TFRecord-style records (8-byte length + 4-byte CRC header, payload,
  4-byte CRC), three per element in the order id (14-byte tensor proto), image (6931),
  label (14): 7,007 bytes per element. The <run id> directory name is chosen by
  TensorFlow (not seeded); everything else is deterministic.

Training: tf.data.Dataset.load(DATA/train, reader_func=R) where R(shards) =
shards.shuffle(8, seed=909).interleave(lambda s: s, cycle_length=2, num_parallel_calls=2,
deterministic=True). Because the seeded shuffle inside reader_func is rebuilt for every
iteration of the dataset, the shard order is the SAME every epoch: 6, 4, 2, 5, 3, 7, 0, 1
(pairs (6,4), (2,5), (3,7), (0,1) are read together). Then .shuffle(512, seed=910),
.map(cast/normalise, num_parallel_calls=2), .batch(64, drop_remainder=True), .prefetch(2):
96 steps per epoch, 12 ms sleep per step. After each epoch tf.data.Dataset.load(DATA/val)
(default reader, no shuffle) .map().batch(128): 4 eval steps, 4 ms each. 3 epochs, 288
steps. No checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): all file I/O is
pread64 from TensorFlow's C++ threads (no read(), no lseek on data files). Load time (main
thread): train/snapshot.metadata opened 3 times and dataset_spec.pb once, each read with
pread64(fd, 524288, 0) = 44/66 and pread64(fd, rest, 44/66) = 0. Each epoch: an openat of
the <run id> directory (listing), then the shard files are opened in the order above, up
to 6 at once: the 2 shards being interleaved plus the next ones, which the parallel
interleave opens early and pre-reads 3 elements (18 preads) from. Every shard file is read
strictly sequentially with tiny unbuffered preads, 6 per element: pread64(12) record
header, pread64(18) id, pread64(12), pread64(6935) image, pread64(12), pread64(18) label,
at consecutive offsets (4,608 preads of 5.4 MB per shard, plus a final pread64(12) = 0 at
EOF), then close. A shard's preads come from 1-3 different TF pool threads; two shards are
read concurrently at any time. 8 shard opens, 36,872 preads and 43,051,008 bytes per
epoch. Eval: per epoch val/snapshot.metadata 3 opens + dataset_spec.pb 1 open (the same
metadata preads), the val dir listing, and one sequential pass over the val shard (3,072
+ 1 preads). No files are written.

Usage: tf_saved_dataset_load.py DATA [--make | --truth]
needs tensorflow (run with /opt/dlio-reference/venv/bin/python).
"""
import glob
import json
import os
import sys
import time

import numpy as np

N_TRAIN, N_VAL, N_SHARDS, IMG, N_CLASSES = 6144, 512, 8, (48, 48, 3), 10
CYCLE, SHUFFLE_BUF, BATCH, VAL_BATCH, EPOCHS, PREFETCH = 2, 512, 64, 128, 3, 2
COMPUTE_S, EVAL_S = 0.012, 0.004
SEED = 909


def truth(data):
    files = sorted(glob.glob(os.path.join(data, "train", "*", "*.shard", "*.snapshot")))
    sizes = [os.path.getsize(f) for f in files]
    elem = 7007  # 3 records: 12+18 (id), 12+6935 (image), 12+18 (label)
    steps = N_TRAIN // BATCH
    return {
        "program": "tf_saved_dataset_load", "needs": ["tensorflow"],
        "format": "tf.data.Dataset.save snapshot shards (uncompressed)",
        "io_library": "tf.data.Dataset.load with custom reader_func (shuffled shard order, "
                      "interleave cycle_length 2)",
        "data_layout": "DATA/train/<run id>/0000000K.shard/00000000.snapshot (8) + metadata; "
                       "DATA/val/<run id>/00000000.shard/00000000.snapshot",
        "num_files": N_SHARDS, "samples_per_file": N_TRAIN // N_SHARDS,
        "sample_size": {"distribution": "fixed", "mean_bytes": elem,
                        "payload_bytes": int(np.prod(IMG)) + 16,
                        "total_bytes": N_TRAIN * elem,
                        "shard_file_bytes": sizes or [768 * elem] * N_SHARDS},
        "batch_size": BATCH,
        "readers": {"kind": "tf.data interleave (C++ threads)", "count": CYCLE},
        "prefetch": {"batches": PREFETCH, "shuffle_buffer": SHUFFLE_BUF},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "seeded shard shuffle in reader_func (same order every epoch: 6,4,2,5,3,7,"
                   "0,1) + 512-element shuffle buffer",
        "eval": {"when": "after every epoch", "dataset": "DATA/val", "samples": N_VAL,
                 "batch_size": VAL_BATCH, "steps": N_VAL // VAL_BATCH,
                 "compute_s_per_step": EVAL_S},
        "checkpoint": None,
        "side_files": [{"path": "train/snapshot.metadata", "reads": "3 opens at load"},
                       {"path": "train/dataset_spec.pb", "reads": "once at load"},
                       {"path": "val/snapshot.metadata", "reads": "3 opens per eval"},
                       {"path": "val/dataset_spec.pb", "reads": "once per eval"}],
        "read_pattern": "each shard file read sequentially once per epoch with 6 small "
                        "preads per element (12/18/12/6935/12/18 bytes), 2 shards "
                        "interleaved",
        "shard_order": [6, 4, 2, 5, 3, 7, 0, 1],
        "bytes_per_epoch": sum(sizes) if sizes else N_TRAIN * elem,
    }


def images(n, rng):
    labels = rng.integers(0, N_CLASSES, n)
    blocks = rng.integers(0, 256, (n, IMG[0] // 6, IMG[1] // 6, 3), dtype=np.uint8)
    img = np.repeat(np.repeat(blocks, 6, 1), 6, 2)
    noise = rng.integers(0, 256, img.shape, dtype=np.uint8)
    img = np.where(rng.random(img.shape) < 0.3, noise, img)
    img[:, :4, :4, 0] = (labels * 25)[:, None, None]
    return img.astype(np.uint8), labels.astype(np.int64)


def make(data):
    import tensorflow as tf
    rng = np.random.default_rng(SEED)
    for split, n, shards in (("train", N_TRAIN, N_SHARDS), ("val", N_VAL, 1)):
        img, lab = images(n, rng)
        ds = tf.data.Dataset.from_tensor_slices(
            {"image": img, "label": lab, "id": np.arange(n, dtype=np.int64)})
        ds.save(os.path.join(data, split), compression=None,
                shard_func=lambda e, k=shards: e["id"] % k)


def train(data):
    import tensorflow as tf
    tf.random.set_seed(SEED)

    def reader_func(shards):
        shards = shards.shuffle(N_SHARDS, seed=SEED)
        return shards.interleave(lambda s: s, cycle_length=CYCLE, num_parallel_calls=CYCLE,
                                 deterministic=True)

    def prep(e):
        return tf.cast(e["image"], tf.float32) / 255.0, e["label"]

    ds = (tf.data.Dataset.load(os.path.join(data, "train"), reader_func=reader_func)
          .shuffle(SHUFFLE_BUF, seed=SEED + 1)
          .map(prep, num_parallel_calls=2)
          .batch(BATCH, drop_remainder=True)
          .prefetch(PREFETCH))
    steps, seen = 0, 0
    for epoch in range(EPOCHS):
        for x, y in ds:
            assert x.shape == (BATCH,) + IMG
            seen += int(y.shape[0])
            time.sleep(COMPUTE_S)
            steps += 1
        val = tf.data.Dataset.load(os.path.join(data, "val")).map(prep).batch(VAL_BATCH)
        nv = 0
        for x, y in val:
            nv += int(y.shape[0])
            time.sleep(EVAL_S)
        assert nv == N_VAL
    print("tf_saved_dataset_load: %d steps, %d samples, %d epochs" % (steps, seen, EPOCHS))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
