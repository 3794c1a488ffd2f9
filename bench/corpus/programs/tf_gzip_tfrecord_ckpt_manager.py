"""tf.data over GZIP-compressed TFRecord shards read by TFRecordDataset(num_parallel_reads=2),
shuffle buffer, parallel map (tf.io.parse_single_example + decode_raw), batch, prefetch(2);
a tf.train.CheckpointManager saves the model variables every 50 steps (max_to_keep=2).

Data set (DATA/, about 12 MB on disk):
  DATA/train/train-0000-of-0008.tfrecord.gz .. train-0007-of-0008.tfrecord.gz
    8 GZIP-compressed TFRecord files, 256 records each (2048 samples). Each record is a
    tf.train.Example {"image": bytes (48*48*3 = 6912 raw uint8, a gradient plus small
    noise), "label": int64}; a serialized record is about 6.94 KB, a file about 1.78 MB
    uncompressed and about 1.53 MB gzip-compressed (12.3 MB for the 8 files).
  DATA/ckpt/ (written by training): tf.train.Checkpoint files.

Pipeline (built once, iterated 3 times; TF threadpools limited to 2 threads):
  TFRecordDataset(8 files in name order, compression_type="GZIP", num_parallel_reads=2)
  = parallel interleave of 2 files at a time (cycle 2, block 1: records alternate between
  the two open files, a new file is opened when one is exhausted)
  -> shuffle(buffer_size=512, seed=99, reshuffle_each_iteration=True)
  -> map(parse + decode_raw + cast/scale, num_parallel_calls=2)
  -> batch(32, drop_remainder=True) -> prefetch(2).
  64 steps per epoch, 3 epochs, 192 steps, 10 ms sleep per step in the Python main thread.
  Before the first step of every epoch the shuffle buffer has to fill: 512 records
  (a quarter of the data set, about 2 files' worth) are read and decompressed in a burst.
  Checkpoint: tf.train.Checkpoint(step, w1 float32 (6912, 64), b1 (64,), w2 (64, 10),
  b2 (10,)) = about 1.77 MB; CheckpointManager(DATA/ckpt, max_to_keep=2) saves at global
  steps 50, 100, 150 and once more after the last step (192): 4 saves, the 2 oldest
  deleted. No eval.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,write,rename,unlink,mkdir):
importing tensorflow opens thousands of .so/.py files (not data). The 8 .tfrecord.gz
files are opened once per epoch each (24 opens, O_RDONLY) by tf.data worker threads (many
different TIDs of the one process, new ones each epoch), two files open at a time (the
first two in parallel, e.g. 0001 opened just before 0000). Each open file is read front
to back with pread64(fd, 262144, off) (TF's 256 KiB input buffer for the zlib stream) at
offsets 0, 262144, ..., 1310720: 5 full preads, a 6th short one (~220 KB) reaching EOF, and
a 7th pread at EOF returning 0; the two open files' preads interleave in time. So ~12.3 MB
of compressed bytes per epoch (36.7 MB in all) in large sequential preads, never per
record; bursty at the start of each epoch (the 512-record shuffle buffer fills before
the first batch) and then paced by the consumer. The DATA/ckpt directory is deleted at
start if a previous run left one, then for each save (main thread, steps 50, 100, 150,
192): mkdir ckpt/ckpt-N_temp; openat(ckpt-N_temp/part-00000-of-00001.data-00000-of-00001
.tempstateXXXX, O_WRONLY|O_CREAT|O_TRUNC), write(1769472) + write(3350), rename to the
final temp name; the same for the .index (one write(463)); the temp index is read back
with 3 small pread64s (48@415, 20@395, 382@0) while merging; the data file is renamed to
ckpt/ckpt-N.data-00000-of-00001 (1772822 bytes), ckpt/ckpt-N.index written (write(463)),
the temp index unlinked; then the text file ckpt/checkpoint is rewritten TWICE, each time
as checkpoint.tmp<hex> (one ~170-360 byte write) renamed over ckpt/checkpoint. At the 3rd
and 4th saves ckpt-50.* and ckpt-100.* are unlinked (max_to_keep=2). About 7.1 MB written
in all. The final DATA/ckpt holds checkpoint, ckpt-150.* and ckpt-192.*.

Usage: tf_gzip_tfrecord_ckpt_manager.py DATA [--make | --truth]
Needs tensorflow (run with the reference venv).
"""
import glob
import json
import os
import shutil
import sys
import time

import numpy as np

FILES, PER_FILE, H, W, C = 8, 256, 48, 48, 3
BATCH, SHUFFLE, PREFETCH, READERS, EPOCHS, COMPUTE_S = 32, 512, 2, 2, 3, 0.010
CKPT_EVERY, KEEP = 50, 2
SEED = 99
IMG_BYTES = H * W * C


def shard_name(k):
    return "train-%04d-of-%04d.tfrecord.gz" % (k, FILES)


def save_steps():
    total = EPOCHS * (FILES * PER_FILE // BATCH)
    steps = list(range(CKPT_EVERY, total + 1, CKPT_EVERY))
    if steps[-1] != total:
        steps.append(total)
    return steps


def truth(data):
    steps = FILES * PER_FILE // BATCH
    files = [os.path.join(data, "train", shard_name(k)) for k in range(FILES)]
    on_disk = sum(os.path.getsize(f) for f in files) if all(map(os.path.exists, files)) \
        else None
    saves = save_steps()
    return {
        "program": "tf_gzip_tfrecord_ckpt_manager", "needs": ["tensorflow"],
        "format": "TFRecord, GZIP-compressed, tf.train.Example (raw image bytes + label)",
        "io_library": "tf.data.TFRecordDataset(compression_type='GZIP', num_parallel_reads=2)",
        "data_layout": "DATA/train/train-000K-of-0008.tfrecord.gz",
        "num_files": FILES, "samples_per_file": PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": IMG_BYTES,
                        "serialized_record_bytes_approx": 6940},
        "compressed_bytes_total": on_disk,
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": READERS, "framework": "tf.data parallel "
                    "interleave (num_parallel_reads=2), map num_parallel_calls=2"},
        "prefetch": {"batches": PREFETCH, "shuffle_buffer": SHUFFLE},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "record shuffle buffer 512 (seed 99, reshuffled each epoch); file order "
                   "fixed, 2 files interleaved record by record",
        "eval": None,
        "checkpoint": {"framework": "tf.train.CheckpointManager", "dir": "ckpt",
                       "every_steps": CKPT_EVERY, "at_steps": saves, "max_to_keep": KEEP,
                       "bytes_per_save_approx": 4 * (IMG_BYTES * 64 + 64 + 640 + 10) + 1000,
                       "files_per_save": ["ckpt-N.index", "ckpt-N.data-00000-of-00001",
                                          "checkpoint"]},
        "side_files": [],
        "file_opens": {"data_per_epoch": FILES, "total_data": FILES * EPOCHS},
        "read_pattern": "each gz shard read sequentially in 256 KiB preads (6 + 1 at EOF) by "
                        "tf.data threads,"
                        " two shards at a time; records decompressed and shuffled in memory",
        "reads_per_sample": "none individually (256 KiB compressed chunks)",
    }


def make(data):
    import tensorflow as tf
    os.makedirs(os.path.join(data, "train"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    yy, xx = np.mgrid[0:H, 0:W]
    opts = tf.io.TFRecordOptions(compression_type="GZIP")
    for k in range(FILES):
        with tf.io.TFRecordWriter(os.path.join(data, "train", shard_name(k)), opts) as wr:
            for i in range(PER_FILE):
                a, b, c = rng.uniform(0, 4, 3)
                base = (a * xx + b * yy + c * 10)[..., None] + np.arange(C) * 20
                img = (base + rng.integers(0, 6, (H, W, C))).astype(np.uint8)
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[img.tobytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(rng.integers(0, 10))]))}))
                wr.write(ex.SerializeToString())


def train(data):
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.random.set_seed(SEED)
    files = sorted(glob.glob(os.path.join(data, "train", "*.tfrecord.gz")))
    assert len(files) == FILES
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(rec):
        ex = tf.io.parse_single_example(rec, spec)
        img = tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), (H, W, C))
        return tf.cast(img, tf.float32) / 255.0, ex["label"]

    ds = (tf.data.TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=READERS)
          .shuffle(SHUFFLE, seed=SEED, reshuffle_each_iteration=True)
          .map(parse, num_parallel_calls=2)
          .batch(BATCH, drop_remainder=True)
          .prefetch(PREFETCH))

    rng = np.random.default_rng(SEED)
    step = tf.Variable(0, dtype=tf.int64)
    w1 = tf.Variable(rng.standard_normal((IMG_BYTES, 64), dtype=np.float32) * 0.01)
    b1 = tf.Variable(np.zeros(64, np.float32))
    w2 = tf.Variable(rng.standard_normal((64, 10), dtype=np.float32) * 0.1)
    b2 = tf.Variable(np.zeros(10, np.float32))
    ckpt = tf.train.Checkpoint(step=step, w1=w1, b1=b1, w2=w2, b2=b2)
    ckpt_dir = os.path.join(data, "ckpt")
    if os.path.isdir(ckpt_dir):  # fresh run: drop checkpoints of a previous run
        shutil.rmtree(ckpt_dir)
    manager = tf.train.CheckpointManager(ckpt, os.path.join(data, "ckpt"), max_to_keep=KEEP)
    saves = set(save_steps())
    for epoch in range(EPOCHS):
        n = 0
        for x, y in ds:
            assert x.shape == (BATCH, H, W, C)
            time.sleep(COMPUTE_S)
            b2.assign_add(tf.fill([10], 1e-3))
            step.assign_add(1)
            n += 1
            if int(step) in saves:
                manager.save(checkpoint_number=int(step))
        assert n == FILES * PER_FILE // BATCH, n


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
