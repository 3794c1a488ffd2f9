"""Spectrogram classifier fed by tf.data: per-file ``from_generator`` over
h5py chunked datasets, interleaved across files, with a shuffle buffer,
``batch(drop_remainder=True)``, prefetch, and a per-epoch validation pass.

Data set (``--make``, seed 15004)
---------------------------------
``DATA/h5/train-0.h5`` .. ``train-3.h5``: 4 HDF5 files, each with
    ``/spec``   float32 [625, 64, 128], chunked (16, 64, 128) = 524,288-byte
                chunks, no compression (40 chunks, the last one holds 1 row)
    ``/label``  int32 [625], contiguous
    ~20.0 MiB per file.
``DATA/h5/val.h5``: same layout with 256 rows (16 chunks), ~8 MiB.
Total ~88 MB.  One sample = one [64, 128] float32 = 32,768 bytes.

Training loop
-------------
::

    files = tf.data.Dataset.from_tensor_slices(train_files)
    ds = files.interleave(lambda f: tf.data.Dataset.from_generator(
             gen, args=(f,), output_signature=...),
             cycle_length=3, block_length=8)        # sequential interleave
    ds = ds.shuffle(1024, seed=7).batch(32, drop_remainder=True).prefetch(2)

``gen(path)`` opens the file with ``h5py.File(path, "r")``, visits its 40
chunk-aligned blocks of 16 rows in a per-epoch random order and reads each
block with one hyperslab read ``spec[b*16:(b+1)*16]`` (plus the matching
``label`` slice), then yields its rows one by one.  2,500 samples per
epoch -> 78 full batches (4 samples dropped by ``drop_remainder``), 2
epochs, 156 steps.  Compute: ``time.sleep(0.02)`` per step.  After every
epoch a validation pass reads val.h5 through an un-shuffled
``from_generator`` pipeline, batch 64 (4 batches, ``time.sleep(0.01)``
each).  Nothing is written into DATA.

What a syscall trace sees (measured with strace, h5py 3.14 / HDF5 sec2)
----------------------------------------------------------------------
* The generator runs inside TF's tf.data threads (Python via py_function),
  so reads come from a couple of TF worker threads, not the main thread.
* HDF5 uses ``pread64`` exclusively (no read/lseek, no mmap of data).
* Per file open (8 train opens + 2 val opens over the run): ``openat``
  O_RDONLY, ``fstat``, 11 small metadata ``pread64``s at fixed offsets
  (superblock 8+48+48 B at 0/48, root object header 512 B at 96, local heap,
  group B-tree 544 B, symbol node 328 B, the two dataset object headers
  512 B each, one near the end of the file, and the chunk B-tree 3,136 B
  at offset 1,400); then one ``pread64`` of exactly 524,288 bytes per chunk
  (including the 1-row last chunk, stored full-size) in the per-epoch
  random block order, and one ``pread64`` of 1-2.5 KB that pulls the whole
  ``label`` array into HDF5's sieve buffer (later label slices cause no
  syscalls).  53 preads per train file per epoch.
* Up to 3 train files are open at once (cycle_length=3); their chunk reads
  interleave in groups of 8 samples (a new chunk every 2 groups); the 4th
  file is opened when the first is exhausted.
* Train: 320 chunk preads (4 files x 40 x 2 epochs), 167.9 MB in all;
  val: 32 chunk preads, 16.8 MB.
* No writes.
"""
import json
import os
import sys
import time

import numpy as np

SEED = 15004
N_TRAIN_FILES = 4
ROWS = 625
VAL_ROWS = 256
H, W = 64, 128
CHUNK_ROWS = 16
CYCLE, BLOCK = 3, 8
SHUFFLE_BUF = 1024
BATCH = 32
VAL_BATCH = 64
PREFETCH = 2
EPOCHS = 2
COMPUTE_S = 0.02
EVAL_S = 0.01


def make(data):
    import h5py
    d = os.path.join(data, "h5")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(SEED)
    names = ["train-%d.h5" % i for i in range(N_TRAIN_FILES)] + ["val.h5"]
    for name in names:
        n = VAL_ROWS if name == "val.h5" else ROWS
        with h5py.File(os.path.join(d, name), "w") as f:
            ds = f.create_dataset("spec", shape=(n, H, W), dtype="f4", chunks=(CHUNK_ROWS, H, W))
            for a in range(0, n, 128):
                b = min(n, a + 128)
                ds[a:b] = rng.standard_normal((b - a, H, W), dtype=np.float32)
            f.create_dataset("label", data=rng.integers(0, 12, size=n).astype(np.int32))
            f.attrs["sample_rate"] = 16000


_epoch = [0]


def block_gen(path):
    import h5py
    path = path.decode() if isinstance(path, bytes) else path
    shuffle = os.path.basename(path).startswith("train")
    with h5py.File(path, "r") as f:
        spec, lab = f["spec"], f["label"]
        n = spec.shape[0]
        blocks = np.arange(-(-n // CHUNK_ROWS))
        if shuffle:
            blocks = np.random.default_rng([SEED, _epoch[0], len(path)]).permutation(blocks)
        for b in blocks:
            a, e = int(b) * CHUNK_ROWS, min(n, (int(b) + 1) * CHUNK_ROWS)
            x = spec[a:e]
            y = lab[a:e]
            for i in range(e - a):
                yield x[i], y[i]


def train(data):
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    d = os.path.join(data, "h5")
    train_files = [os.path.join(d, "train-%d.h5" % i) for i in range(N_TRAIN_FILES)]
    sig = (tf.TensorSpec((H, W), tf.float32), tf.TensorSpec((), tf.int32))

    def from_file(f):
        return tf.data.Dataset.from_generator(block_gen, args=(f,), output_signature=sig)

    ds = (tf.data.Dataset.from_tensor_slices(train_files)
          .interleave(from_file, cycle_length=CYCLE, block_length=BLOCK)
          .shuffle(SHUFFLE_BUF, seed=7, reshuffle_each_iteration=True)
          .batch(BATCH, drop_remainder=True)
          .prefetch(PREFETCH))
    val = (tf.data.Dataset.from_generator(block_gen, args=(os.path.join(d, "val.h5"),), output_signature=sig)
           .batch(VAL_BATCH).prefetch(1))
    w = tf.Variable(tf.zeros((W,)))
    t0 = time.time()
    step = 0
    for epoch in range(EPOCHS):
        _epoch[0] = epoch
        for x, y in ds:
            w.assign_add(1e-4 * tf.reduce_mean(x, axis=(0, 1)))
            time.sleep(COMPUTE_S)
            step += 1
        acc = 0.0
        for x, y in val:
            acc += float(tf.reduce_mean(tf.cast(y, tf.float32)))
            time.sleep(EVAL_S)
        print("epoch %d: step %d, val %.3f, %.2fs" % (epoch, step, acc, time.time() - t0))
    print("trained %d steps in %.2fs" % (step, time.time() - t0))


def truth():
    n = N_TRAIN_FILES * ROWS
    spe = n // BATCH
    s = H * W * 4
    return {
        "program": "tf_h5_generator_interleave_val",
        "needs": ["tensorflow"],
        "format": "hdf5 (chunked float32, uncompressed)",
        "io_library": "h5py via tf.data.Dataset.from_generator",
        "data_layout": "4 train .h5 files x /spec [625,64,128] f4 chunks (16,64,128) + /label; val.h5 [256,...]; "
                       "reads are whole-chunk hyperslabs in random chunk order, interleaved over 3 files",
        "num_files": N_TRAIN_FILES + 1,
        "samples_per_file": ROWS,
        "sample_size": {"dist": "fixed", "min": s, "max": s, "mean": s},
        "read_size_bytes": CHUNK_ROWS * s,
        "batch_size": BATCH,
        "readers": {"kind": "tf.data (interleave, cycle_length=3, sequential)", "count": 1},
        "prefetch": PREFETCH,
        "shuffle_buffer": SHUFFLE_BUF,
        "drop_remainder": True,
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": EPOCHS * spe,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": True,
        "eval": {"every": "epoch", "file": "val.h5", "samples": VAL_ROWS, "batch_size": VAL_BATCH,
                 "steps": -(-VAL_ROWS // VAL_BATCH), "compute_s_per_step": EVAL_S},
        "checkpoint": None,
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: tf_h5_generator_interleave_val.py DATA [--make|--truth]")
    if "--truth" in sys.argv:
        print(json.dumps(truth()))
    elif "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
