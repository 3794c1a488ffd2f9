"""Protein / token-sequence language-model pre-training with a tf.data input pipeline over
GZIP-compressed TFRecord shards holding variable-length tf.train.Example records:
TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=4) -> shuffle(1024)
-> map(parse, num_parallel_calls=2) -> padded_batch(32) -> prefetch(2), two epochs
(the dataset is iterated afresh each epoch, reshuffling).

Data set (DATA/, 3.7 MB on disk, ~6.2 MB uncompressed):
  DATA/tfrecords/train-00000-of-00008.tfrecord.gz .. train-00007-of-00008.tfrecord.gz
      8 GZIP-compressed TFRecord files (one gzip stream per file, written by
      tf.io.TFRecordWriter with compression_type="GZIP"), 400 records each (3200 in
      all). Each record is a serialized tf.train.Example: "tokens" bytes feature (int16
      token ids, Zipf-like over a 2000-token vocab, length 150..3000 tokens log-uniform
      => 300-6000 bytes), "length" int64, "family" int64 label. Record framing: 8-byte
      length + 4-byte CRC + payload + 4-byte CRC. 437-494 KB per compressed file (the
      Zipf-distributed token ids compress well, ~1.7x).

Training: files sorted by name; TFRecordDataset(..., compression_type="GZIP",
buffer_size=262144, num_parallel_reads=4) interleaves 4 files at a time (cycle of 4,
one record from each in turn; when a file ends the next one takes its slot), then
shuffle(buffer_size=1024, seed=9, reshuffle_each_iteration=True), map(parse_single_example
+ decode_raw int16, truncate to 1024 tokens, num_parallel_calls=2),
padded_batch(32, drop_remainder=True) (pads each batch to its longest sequence),
prefetch(2). 2 epochs x 100 steps = 200 steps, 8 ms of sleep per step. No eval, no
checkpoint.

What a syscall trace sees: everything is read by TensorFlow's own threads, never the
Python main thread: each file is opened and read by a thread of its own (the parallel
interleave's per-input thread; a different TID for every file and every epoch, 16 over
the run). Per epoch each of the 8 files is opened once (openat O_RDONLY|O_CLOEXEC) and read
sequentially from start to end with pread64 of the 256 KiB input buffer: pread64(fd,
262144, 0) = 262144, pread64(fd, 262144, 262144) = 175-232 KB (short, the rest of the
file), then a pread64 at EOF for the remaining buffer space returning 0, and close. Four
files are open at a time: files 0-3 at the start of the epoch, 4-7 as those finish (they
finish at about the same time, as all hold 400 records). The shuffle buffer first fills
with 1024 records (~1/3 of the epoch) before the first batch is produced, so the first
pread of 4 files (1 MiB) comes in a burst at the epoch start, the rest as the buffer
drains. 8 opens, 24 preads (16 carrying data), 3.76 MB read per epoch, 7.5 MB over the
run; no writes.

Usage: tf_gzip_tfrecord_varlen_padded.py DATA [--make | --truth]
Needs tensorflow (run --make and training with /opt/dlio-reference/venv/bin/python);
--truth works with numpy only.
"""
import json
import os
import sys
import time

import numpy as np

N_FILES, PER_FILE, VOCAB = 8, 400, 2000
LMIN, LMAX, MAXLEN = 150, 3000, 1024
BATCH, EPOCHS, SHUFFLE, PAR_READS, PAR_CALLS, PREFETCH = 32, 2, 1024, 4, 2, 2
READ_BUF = 256 * 1024
STEPS = N_FILES * PER_FILE // BATCH
COMPUTE_S = 0.008
SEED = 9


def lengths():
    rng = np.random.default_rng(SEED)
    return np.exp(rng.uniform(np.log(LMIN), np.log(LMAX), N_FILES * PER_FILE)).astype(int)


def file_path(data, i):
    return os.path.join(data, "tfrecords", "train-%05d-of-%05d.tfrecord.gz" % (i, N_FILES))


def truth(data):
    ls = lengths()
    return {
        "program": "tf_gzip_tfrecord_varlen_padded", "needs": ["tensorflow"],
        "format": "TFRecord, GZIP-compressed, tf.train.Example with variable-size bytes "
                  "feature",
        "io_library": "tf.data.TFRecordDataset(num_parallel_reads=4, buffer_size=256 KiB)",
        "data_layout": "DATA/tfrecords/train-0000N-of-00008.tfrecord.gz",
        "num_files": N_FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "log-uniform token count 150..3000, 2 bytes per token "
                                "(+~40 B Example/framing overhead), gzip-compressed on "
                                "disk", "min_bytes": int(ls.min() * 2),
                        "max_bytes": int(ls.max() * 2), "mean_bytes": int(ls.mean() * 2),
                        "total_uncompressed_payload_bytes": int(ls.sum() * 2)},
        "batch_size": BATCH,
        "readers": {"kind": "tf.data parallel interleave threads (num_parallel_reads)",
                    "count": PAR_READS},
        "parse_threads": PAR_CALLS,
        "prefetch": {"batches": PREFETCH, "read_buffer_bytes": READ_BUF},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shuffle buffer of 1024 records (seed 9, reshuffled each epoch); file "
                   "order fixed (sorted), 4 files interleaved record by record",
        "eval": None, "checkpoint": None,
        "read_pattern": "each file read whole, sequentially, once per epoch, in 256 KiB "
                        "preads, 4 files open concurrently",
    }


def make(data):
    import tensorflow as tf
    os.makedirs(os.path.join(data, "tfrecords"), exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    ls = lengths()
    ranks = np.arange(1, VOCAB + 1)
    p = 1.0 / ranks ** 1.1
    p /= p.sum()
    opts = tf.io.TFRecordOptions(compression_type="GZIP")
    n = 0
    for i in range(N_FILES):
        with tf.io.TFRecordWriter(file_path(data, i), options=opts) as w:
            for _ in range(PER_FILE):
                L = int(ls[n])
                toks = rng.choice(VOCAB, L, p=p).astype("<i2")
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "tokens": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[toks.tobytes()])),
                    "length": tf.train.Feature(int64_list=tf.train.Int64List(value=[L])),
                    "family": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(rng.integers(0, 50))])),
                }))
                w.write(ex.SerializeToString())
                n += 1


def train(data):
    import tensorflow as tf
    files = sorted(file_path(data, i) for i in range(N_FILES))
    spec = {"tokens": tf.io.FixedLenFeature([], tf.string),
            "length": tf.io.FixedLenFeature([], tf.int64),
            "family": tf.io.FixedLenFeature([], tf.int64)}

    def parse(rec):
        ex = tf.io.parse_single_example(rec, spec)
        toks = tf.io.decode_raw(ex["tokens"], tf.int16)[:MAXLEN]
        return tf.cast(toks, tf.int32), ex["family"]

    ds = tf.data.TFRecordDataset(files, compression_type="GZIP", buffer_size=READ_BUF,
                                 num_parallel_reads=PAR_READS)
    ds = ds.shuffle(SHUFFLE, seed=SEED, reshuffle_each_iteration=True)
    ds = ds.map(parse, num_parallel_calls=PAR_CALLS)
    ds = ds.padded_batch(BATCH, padded_shapes=([None], []), drop_remainder=True)
    ds = ds.prefetch(PREFETCH)
    steps, tokens = 0, 0
    for epoch in range(EPOCHS):
        for toks, fam in ds:
            assert toks.shape[0] == BATCH
            tokens += int(tf.math.count_nonzero(toks))
            time.sleep(COMPUTE_S)
            steps += 1
    print("tf_gzip_tfrecord_varlen_padded: %d steps, %d nonzero tokens" % (steps, tokens))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
