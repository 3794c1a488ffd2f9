"""Tabular / feature-vector training (think precomputed speech or recommendation features)
over a few big binary shards of fixed-size records, read in blocks of 512 records with
np.fromfile(path, dtype=record, count=512, offset=...), a first epoch in plain
sequential order and later epochs in a shuffled block order, with ONE background thread
prefetching blocks into a bounded queue while the main thread trains.

This is the "block shuffle" trick used when full random access is too slow: the file is
cut into large contiguous blocks, the block order is shuffled per epoch (the first epoch
is kept sequential as a warm-up / for a deterministic first pass), and the records inside
a block are shuffled in memory.

Data set (DATA/, 48.0 MB):
  DATA/shards/feat_00.bin, feat_01.bin, feat_02.bin
      3 shards, each a 4096-byte header page (b"FREC" magic, then a JSON string: record
      count, record dtype, padded with zeros) followed by 4096 records of 4096 bytes:
      label int32, utt id uint32, 2044 float16 features. 16,781,312 bytes per shard.
  A block = 512 consecutive records = 2 MiB; 8 blocks per shard, 24 blocks in all.

Training: the main thread reads the 4096-byte header of each shard once (open + read),
then starts one thread ("prefetch") that walks the block order of the whole run and, for
each block, calls np.fromfile(shard, dtype=REC, count=512, offset=4096 + b * 2 MiB) and
puts the array in a queue.Queue(maxsize=2). Epoch 0: blocks in file order (shard 0 blocks
0..7, shard 1 ..., shard 2 ...). Epoch 1: the 24 blocks in a permutation (numpy seed
4242 + 1). The main thread takes a block, permutes its 512 records, and runs 4 steps of
batch 128 (8 ms sleep each). 2 epochs x 96 steps = 192 steps. No eval, no checkpoint.

What a syscall trace sees: main thread: per shard one openat, fstat, ioctl, lseek and a
read of 4096 bytes (the header), close (3 files). Then every data read happens on the
prefetch thread (a different TID of the same process): per block np.fromfile on a path —
openat(feat_NN.bin, O_RDONLY|O_CLOEXEC) = 3, lseek(3, 0, SEEK_CUR); numpy dups the
descriptor (fcntl F_DUPFD_CLOEXEC -> 4), lseek(4, 0, SEEK_SET) then lseek(4, 4096 +
b*2097152, SEEK_SET) (np.fromfile's offset is relative to the current position, 0), then
ONE read(4, ..., 2097152) = 2097152, close(4), then lseek(3, 0, SEEK_SET), lseek(3,
offset + 2097152, SEEK_SET) (syncing the Python file position) and close(3): the data
read is on a descriptor no openat returned. So: 24 opens + 24 x 2 MiB reads per epoch, 48 over
the run (100.7 MB), offsets 4096 + k*2097152. Epoch 0 offsets go up monotonically within
each shard and the shards follow one another; epoch 1 jumps between shards and
offsets randomly. The queue (2 slots) keeps the thread at most ~3 blocks ahead: the first
3 blocks are read back-to-back at start, then one 2 MiB read per 4 steps (~every 35 ms),
paced by the consumer. No writes.

Usage: fromfile_block_shuffle_prefetch_thread.py DATA [--make | --truth]
numpy only.
"""
import json
import os
import queue
import sys
import threading
import time

import numpy as np

N_SHARDS, RECS, FEAT, HEADER = 3, 4096, 2044, 4096
REC = np.dtype([("label", "<i4"), ("utt", "<u4"), ("feat", "<f2", (FEAT,))])
BLOCK, BATCH, EPOCHS, QUEUE = 512, 128, 2, 2
BLOCKS_PER_SHARD = RECS // BLOCK
STEPS = N_SHARDS * RECS // BATCH
COMPUTE_S = 0.008
SEED = 4242


def shard_path(data, s):
    return os.path.join(data, "shards", "feat_%02d.bin" % s)


def block_order(epoch):
    blocks = [(s, b) for s in range(N_SHARDS) for b in range(BLOCKS_PER_SHARD)]
    if epoch == 0:
        return blocks
    perm = np.random.default_rng(SEED + epoch).permutation(len(blocks))
    return [blocks[i] for i in perm]


def truth(data):
    assert REC.itemsize == 4096
    return {
        "program": "fromfile_block_shuffle_prefetch_thread", "needs": [],
        "format": "raw fixed-size records (4096 B) in 3 binary shards with a 4 KiB header",
        "io_library": "numpy.fromfile(path, count=512, offset=...) on a prefetch thread",
        "data_layout": "DATA/shards/feat_00..02.bin",
        "num_files": N_SHARDS, "samples_per_file": RECS,
        "sample_size": {"dist": "fixed", "bytes": REC.itemsize},
        "file_size": {"dist": "fixed", "bytes": HEADER + RECS * REC.itemsize},
        "block": {"records": BLOCK, "bytes": BLOCK * REC.itemsize,
                  "blocks_per_epoch": N_SHARDS * BLOCKS_PER_SHARD},
        "batch_size": BATCH,
        "readers": {"kind": "1 background thread (threading.Thread) + queue", "count": 1},
        "prefetch": {"queue_blocks": QUEUE, "steps_per_block": BLOCK // BATCH},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "epoch 0 sequential blocks; epoch 1 block permutation (seed 4243); "
                   "records shuffled inside each block in memory",
        "block_order": {str(e): ["%d:%d" % sb for sb in block_order(e)] for e in range(EPOCHS)},
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "shards/feat_NN.bin header (first 4096 B)", "reads": 1,
                        "thread": "main"}],
        "read_pattern": "one 2 MiB read per block at offset 4096 + b*2 MiB, prefetch thread",
        "bytes_read_total": EPOCHS * N_SHARDS * RECS * REC.itemsize + N_SHARDS * HEADER,
    }


def make(data):
    os.makedirs(os.path.join(data, "shards"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    for s in range(N_SHARDS):
        recs = np.zeros(RECS, dtype=REC)
        recs["label"] = rng.integers(0, 40, RECS)
        recs["utt"] = s * RECS + np.arange(RECS)
        recs["feat"] = rng.standard_normal((RECS, FEAT), dtype=np.float32).astype(np.float16)
        meta = json.dumps({"records": RECS, "record_bytes": REC.itemsize,
                           "dtype": [list(d) if not isinstance(d, str) else d
                                     for d in REC.descr], "shard": s}).encode()
        with open(shard_path(data, s), "wb") as f:
            f.write((b"FREC" + meta).ljust(HEADER, b"\0"))
            recs.tofile(f)


def producer(data, q):
    for epoch in range(EPOCHS):
        for s, b in block_order(epoch):
            arr = np.fromfile(shard_path(data, s), dtype=REC, count=BLOCK,
                              offset=HEADER + b * BLOCK * REC.itemsize)
            q.put((epoch, arr))
        q.put((epoch, None))


def train(data):
    for s in range(N_SHARDS):
        with open(shard_path(data, s), "rb") as f:
            hdr = f.read(HEADER)
        assert hdr[:4] == b"FREC"
        meta = json.loads(hdr[4:].rstrip(b"\0"))
        assert meta["record_bytes"] == REC.itemsize
    q = queue.Queue(maxsize=QUEUE)
    t = threading.Thread(target=producer, args=(data, q), name="prefetch", daemon=True)
    t.start()
    rng = np.random.default_rng(SEED + 100)
    steps, loss = 0, 0.0
    for epoch in range(EPOCHS):
        while True:
            ep, arr = q.get()
            assert ep == epoch
            if arr is None:
                break
            arr = arr[rng.permutation(len(arr))]
            for k in range(0, BLOCK, BATCH):
                batch = arr[k:k + BATCH]
                loss += float(batch["feat"][:, :16].astype(np.float32).mean())
                time.sleep(COMPUTE_S)
                steps += 1
    t.join()
    print("fromfile_block_shuffle_prefetch_thread: %d steps, %d epochs, loss %.4f"
          % (steps, EPOCHS, loss / steps))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
