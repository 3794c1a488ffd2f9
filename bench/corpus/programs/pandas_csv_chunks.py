"""CSV shards read in 512-row chunks by pandas in a background thread feeding a bounded queue.

4 .csv shards of 13312 rows each (about 2 MiB): a header line, then id (int), label (int 0-9)
and 16 float columns f00..f15 (standard normal, written "%.6f"), about 160 bytes a row. One
producer thread (started once) reads the shards in a fixed order, every epoch, with
pandas.read_csv(path, chunksize=512) (C parser) and puts each 512-row DataFrame on a
queue.Queue(maxsize=3), then an end-of-epoch marker; the main thread takes one chunk per step
and sleeps 10 ms. The producer runs up to 3 chunks (plus the one it is blocked on) ahead of
training. A syscall trace sees every data read on the producer's thread id, none on the main
thread: per shard per epoch an openat, an fstat and an lseek, then sequential unbuffered reads
of 256 KiB (the C parser's buffer; one read holds about 3.2 chunks of about 80 KiB), a short
last read, two empty reads and a close: 8 full reads per shard, so a read every 3 or 4 steps,
each shard read front to back once per epoch. On its first chunk the producer thread also opens
a few pyarrow .pyc files (pandas 3 imports pyarrow lazily for the str dtype of the column
names).

Usage: pandas_csv_chunks.py DATA [--make | --truth]
Fixed by the program: 4 shards x 13312 rows (26 chunks of 512 rows each), 1 row = 1 sample,
chunk (batch) 512 rows, 1 reader thread, queue depth 3, 2 epochs of 104 steps, shards in a
fixed order, 10 ms compute per step, no checkpoint, no eval. Needs pandas.
"""
import json
import os
import queue
import sys
import threading
import time

import numpy as np

SHARDS, ROWS, CHUNK, FEATS, QDEPTH, EPOCHS, COMPUTE_S = 4, 13312, 512, 16, 3, 2, 0.010
SEED = 777


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".csv")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "pandas_csv_chunks", "needs": ["pandas"], "format": "csv (numeric)",
        "io_library": "pandas.read_csv(chunksize=512) in a producer thread",
        "data_layout": "DATA/*.csv", "num_files": SHARDS, "samples_per_file": ROWS,
        "sample_size": {"dist": "about fixed (one text row)", "columns": 2 + FEATS,
                        "mean": sum(fsz) / (SHARDS * ROWS) if fsz else None},
        "file_size": {"bytes": fsz, "total": sum(fsz)},
        "batch_size": CHUNK, "readers": {"kind": "thread", "count": 1,
                                         "framework": "threading.Thread + queue.Queue"},
        "prefetch": {"queue_maxsize": QDEPTH, "chunks_ahead": QDEPTH + 1},
        "epochs": EPOCHS, "steps_per_epoch": SHARDS * ROWS // CHUNK,
        "total_steps": EPOCHS * SHARDS * ROWS // CHUNK, "compute_s_per_step": COMPUTE_S,
        "shuffle": "none (shards and rows in a fixed order)", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "sequential 256 KiB reads through each shard in the producer thread, "
                        "one read per about 3.2 chunks; each shard read whole once per epoch",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    header = ",".join(["id", "label"] + [f"f{k:02d}" for k in range(FEATS)])
    for s in range(SHARDS):
        cols = np.column_stack([np.arange(ROWS) + s * ROWS, rng.integers(0, 10, ROWS),
                                rng.standard_normal((ROWS, FEATS))])
        np.savetxt(os.path.join(data, f"shard_{s}.csv"), cols, delimiter=",", header=header,
                   comments="", fmt=["%d", "%d"] + ["%.6f"] * FEATS)


def produce(names, q):
    import pandas as pd
    for epoch in range(EPOCHS):
        for path in names:
            with pd.read_csv(path, chunksize=CHUNK) as reader:
                for chunk in reader:
                    q.put(chunk)
        q.put(None)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".csv"))
    q = queue.Queue(maxsize=QDEPTH)
    reader = threading.Thread(target=produce, args=(names, q), daemon=True)
    reader.start()
    for epoch in range(EPOCHS):
        while (chunk := q.get()) is not None:
            assert len(chunk) == CHUNK and chunk.shape[1] == 2 + FEATS
            time.sleep(COMPUTE_S)
    reader.join()


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
