"""CIFAR-10-style image classification from the original "binary version" files, read with
tf.data.FixedLengthRecordDataset (the successor of the old cifar10_input.py
FixedLengthRecordReader): headerless files of fixed 3073-byte records, two files read in
parallel, a 4096-record shuffle buffer, parallel decode, batch 128, prefetch 2, and a pass
over test_batch.bin after every epoch.

Data set (DATA/cifar-10-batches-bin/, about 49 MB):
  data_batch_1.bin .. data_batch_5.bin  5 x 3000 records x 3073 bytes = 9,219,000 bytes each
                                        (record = 1 label byte + 32*32*3 uint8 pixels, CHW);
  test_batch.bin                        1000 records (3,073,000 bytes);
  batches.meta.txt                      10 class names, one per line (61 bytes).
  (seeded 1013; labels uniform 0-9, pixels a gradient plus noise.)

Training: main thread reads batches.meta.txt once (Python open). Pipeline:
FixedLengthRecordDataset(5 files in fixed order, record_bytes=3073, num_parallel_reads=2)
-> shuffle(4096, seed=1013, reshuffle_each_iteration=True) -> map(decode_raw, transpose to
HWC, /255, random flip; num_parallel_calls=2) -> batch(128, drop_remainder=True) ->
prefetch(2). The Python loop iterates the dataset once per epoch (a fresh iterator each
epoch) and sleeps 12 ms per step: 3 epochs x 117 steps = 351 steps (24 records per epoch
are dropped by drop_remainder, but all bytes are read). After each epoch: test set, no
shuffle, batches of 250 (4 steps, 5 ms each). No checkpoint, nothing written. TensorFlow
prints its usual oneDNN notice on stderr at import.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): all record I/O
is pread64 of 262144 bytes (the reader's 256 KiB input buffer) at consecutive offsets, by
tf.data threads, never by the Python main thread; no lseek. Each epoch, ALL FIVE train
files are opened (openat O_RDONLY) within ~1 ms at the start of the epoch, each by its own
thread (5 new TIDs per epoch; the parallel interleave keeps 2 current + 3 prefetched
"future" inputs), and each of those threads immediately reads the first 256 KiB of its
file. Then the files are consumed in order, two at a time: data_batch_1 and _2 are read
concurrently as fast as the shuffle buffer fills (~36 preads each in ~1.1 s: the 4096-record
buffer = 12.6 MB must be full before the first batch comes out), then _3 and _4 together,
then _5 alone, paced by the training loop (one 256 KiB pread every ~20 ms per file). Per
file: 35 x pread64(262144) = 262144, one short pread64(262144) = 43960 at offset 9175040
and one pread64(218184, 9219000) = 0 at EOF, then close; every file read exactly once per
epoch, 46.1 MB per epoch, 138 MB in all. The last ~0.7 s of each epoch drains the shuffle
buffer with no reads. Eval: test_batch.bin opened by one thread, 11 x 262144 + 189416 +
an EOF pread (ret 0), sequential, 3.07 MB per eval, closed. batches.meta.txt: main thread,
read(8192) = 61, read = 0.

Usage: tf_fixed_length_cifar_bin.py DATA [--make | --truth]
Needs tensorflow.
"""
import json
import os
import sys
import time

import numpy as np

N_SHARDS, PER_SHARD, N_TEST, SIDE = 5, 3000, 1000, 32
RECORD = 1 + 3 * SIDE * SIDE
BATCH, READS, SHUFFLE_BUF, EPOCHS, COMPUTE_S = 128, 2, 4096, 3, 0.012
TEST_BATCH, EVAL_S = 250, 0.005
SEED = 1013
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]


def bin_dir(data):
    return os.path.join(data, "cifar-10-batches-bin")


def train_files(data):
    return [os.path.join(bin_dir(data), "data_batch_%d.bin" % k) for k in range(1, N_SHARDS + 1)]


def truth(data):
    n = N_SHARDS * PER_SHARD
    steps = n // BATCH
    return {
        "program": "tf_fixed_length_cifar_bin", "needs": ["tensorflow"],
        "format": "CIFAR-10 binary: fixed-length records (1 label byte + 3072 CHW pixel bytes), "
                  "no header, no framing",
        "io_library": "tf.data.FixedLengthRecordDataset(num_parallel_reads=2)",
        "data_layout": "DATA/cifar-10-batches-bin/data_batch_{1..5}.bin, test_batch.bin, "
                       "batches.meta.txt",
        "num_files": N_SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"dist": "fixed", "bytes": RECORD, "total_bytes": n * RECORD,
                        "file_bytes": PER_SHARD * RECORD},
        "batch_size": BATCH,
        "readers": {"kind": "tf.data C++ threads", "count": READS,
                    "note": "parallel interleave over the 5 files, cycle_length 2, each "
                            "file read front to back; map(num_parallel_calls=2)"},
        "prefetch": {"kind": "tf.data shuffle buffer + prefetch",
                     "shuffle_buffer_records": SHUFFLE_BUF, "prefetch_batches": 2},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "record-level shuffle buffer of 4096 (seed 1013, reshuffled every epoch); "
                   "file order fixed; drop_remainder (%d records per epoch unused)"
                   % (n - steps * BATCH),
        "eval": {"when": "after every epoch", "files": ["test_batch.bin"], "samples": N_TEST,
                 "batch_size": TEST_BATCH, "steps": N_TEST // TEST_BATCH,
                 "order": "sequential", "compute_s_per_step": EVAL_S,
                 "bytes": N_TEST * RECORD},
        "checkpoint": None,
        "side_files": [{"path": "cifar-10-batches-bin/batches.meta.txt", "reads": "once"}],
        "read_pattern": "each epoch all 5 train files are opened at once (one tf.data "
                        "thread each, first 256 KiB read immediately), then read whole, "
                        "sequentially, with pread64(262144) two files at a time in file order "
                        "(1+2, 3+4, 5); the first ~12.6 MB fill the shuffle buffer in a burst, "
                        "the rest is paced by the steps",
        "bytes_per_epoch": n * RECORD,
    }


def make(data):
    os.makedirs(bin_dir(data), exist_ok=True)
    rng = np.random.default_rng(SEED)

    def write(path, n):
        labels = rng.integers(10, size=n).astype(np.uint8)
        yy = np.linspace(0, 1, SIDE, dtype=np.float32)[None, None, :, None]
        base = (labels[:, None, None, None] * 20 + 60 * yy).astype(np.float32)
        img = np.clip(base + rng.normal(0, 40, (n, 3, SIDE, SIDE)), 0, 255).astype(np.uint8)
        rec = np.concatenate([labels[:, None], img.reshape(n, -1)], axis=1)
        assert rec.shape == (n, RECORD)
        rec.tofile(path)

    for p in train_files(data):
        write(p, PER_SHARD)
    write(os.path.join(bin_dir(data), "test_batch.bin"), N_TEST)
    with open(os.path.join(bin_dir(data), "batches.meta.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n\n")


def train(data):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tf.random.set_seed(SEED)
    with open(os.path.join(bin_dir(data), "batches.meta.txt")) as f:
        classes = [line.strip() for line in f if line.strip()]
    assert len(classes) == 10

    def parse(rec, augment):
        b = tf.io.decode_raw(rec, tf.uint8)
        label = tf.cast(b[0], tf.int32)
        img = tf.transpose(tf.reshape(b[1:], [3, SIDE, SIDE]), [1, 2, 0])
        img = tf.cast(img, tf.float32) / 255.0
        if augment:
            img = tf.image.random_flip_left_right(img)
        return img, label

    ds = tf.data.FixedLengthRecordDataset(train_files(data), record_bytes=RECORD,
                                          num_parallel_reads=READS)
    ds = ds.shuffle(SHUFFLE_BUF, seed=SEED, reshuffle_each_iteration=True)
    ds = ds.map(lambda r: parse(r, True), num_parallel_calls=2)
    ds = ds.batch(BATCH, drop_remainder=True).prefetch(2)
    test = tf.data.FixedLengthRecordDataset(os.path.join(bin_dir(data), "test_batch.bin"),
                                            record_bytes=RECORD)
    test = test.map(lambda r: parse(r, False)).batch(TEST_BATCH).prefetch(1)
    t0, total = time.time(), 0
    for epoch in range(EPOCHS):
        for x, y in ds:
            assert x.shape == (BATCH, SIDE, SIDE, 3)
            time.sleep(COMPUTE_S)
            total += 1
        n = 0
        for x, y in test:
            n += int(x.shape[0])
            time.sleep(EVAL_S)
        assert n == N_TEST
    print("tf_fixed_length_cifar_bin: %d steps, %d epochs, %.1f s"
          % (total, EPOCHS, time.time() - t0))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
