"""A tf.data pipeline: TFRecord files interleaved (cycle_length 4), parsed, batched, prefetched.

8 TFRecord files of 64 tf.train.Examples each: "image" (bytes, lognormal length, median
16 KiB, sigma 0.5) and "label" (int64). The pipeline: the file list shuffled per epoch
(seeded), interleave(TFRecordDataset, cycle_length=4, block_length=1) (4 files open at once,
one record from each in turn, on TF's own threads), map(tf.io.parse_single_example), batch 16,
prefetch(2). The Python loop sleeps 15 ms per batch.

Usage: tf_tfrecord_interleave.py DATA [--make | --truth]
Fixed by the program: 8 files x 64 records, batch 16, prefetch 2 batches, cycle_length 4,
2 epochs of 32 steps, 15 ms compute per step. Needs tensorflow.
"""
import json
import os
import sys
import time

import numpy as np

FILES, PER_FILE, BATCH, CYCLE, PREFETCH, EPOCHS, COMPUTE_S = 8, 64, 16, 4, 2, 2, 0.015
MEDIAN, SIGMA = 16 << 10, 0.5
SEED = 6
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".tfrecord")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "tf_tfrecord_interleave", "needs": ["tensorflow"], "format": "tfrecord",
        "io_library": "tf.data.TFRecordDataset (TF C++ file system, TF threads)",
        "data_layout": "DATA/*.tfrecord", "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "lognormal", "median": MEDIAN, "sigma": SIGMA,
                        "plus": "Example framing (~40 B) and 16 B record framing"},
        "file_size": {"bytes": fsz, "mean": sum(fsz) / max(1, len(fsz))},
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": "TF inter-op pool",
                    "interleave_cycle_length": CYCLE},
        "prefetch": {"batches": PREFETCH}, "epochs": EPOCHS,
        "steps_per_epoch": FILES * PER_FILE // BATCH,
        "total_steps": EPOCHS * FILES * PER_FILE // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch (records interleaved across 4 open files)", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "sequential buffered reads through each file (TFRecordDataset buffer), "
                        "4 files open at once",
    }


def make(data):
    import tensorflow as tf
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for i in range(FILES):
        with tf.io.TFRecordWriter(os.path.join(data, f"train_{i:02d}.tfrecord")) as w:
            for _ in range(PER_FILE):
                n = int(np.clip(rng.lognormal(np.log(MEDIAN), SIGMA), 1024, 1 << 20))
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[rng.integers(0, 255, n, dtype=np.uint8).tobytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(rng.integers(0, 1000))]))}))
                w.write(ex.SerializeToString())


def train(data):
    import tensorflow as tf
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".tfrecord"))
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    ds = (tf.data.Dataset.from_tensor_slices(files)
          .shuffle(len(files), seed=SEED, reshuffle_each_iteration=True)
          .interleave(tf.data.TFRecordDataset, cycle_length=CYCLE, block_length=1)
          .map(lambda r: tf.io.parse_single_example(r, spec))
          .batch(BATCH, drop_remainder=True)
          .prefetch(PREFETCH))
    for epoch in range(EPOCHS):
        for batch in ds:
            assert batch["label"].shape[0] == BATCH
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
