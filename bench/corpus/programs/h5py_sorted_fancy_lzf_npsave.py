"""Speech/audio-feature model trained from ONE HDF5 file holding a chunked, LZF-compressed
2-D feature matrix, read with h5py FANCY INDEXING: every mini-batch is a random set of
row indices that is SORTED first (h5py requires increasing indices for point/row
selection), then ds[sorted_idx] is one H5Dread whose selection touches many chunks; HDF5
reads each touched chunk whole (compressed), decompresses it into its chunk cache and
copies out the selected rows. Single process, single thread, no DataLoader. Every 15
steps a checkpoint of the weights is written with np.save (no torch.save), keeping only
the newest 3 files.

Data set (DATA/, 7,493,060 bytes on disk; 13.1 MB of raw features):
  DATA/features.h5   HDF5 (h5py default libver, so a v1 B-tree chunk index):
      /x  uint8 (6400, 2048), chunks (32, 2048) = 64 KiB raw, compression="lzf"
          (200 chunks). Each row is a "log-mel patch": the first k bytes random in
          [0, 64), the rest zeros, k uniform 20-90% of the row, so compressed chunks are
          31,639-43,294 bytes (mean 37,255; 7,450,932 in all), stored in chunk order.
      /y  int32 (6400,) labels, contiguous, no filter (25,600 bytes).
      attrs: n_classes=40, sr=16000, hop=160.

Training: h5py.File(DATA/features.h5, "r") once; y = f["y"][:] once (labels kept in RAM).
3 epochs; per epoch a permutation of the 6400 rows (numpy rng seeded 777 + epoch) cut
into 50 batches of 128; per batch idx = np.sort(perm[b*128:(b+1)*128]) and
xb = f["x"][idx] (-> (128, 2048) uint8). 10 ms sleep per step, 150 steps. After steps
15, 30, ..., 150 (10 times): np.save(DATA/ckpt/w_step%04d.npy, W) with W float32
(2048, 64) (524,416-byte files: 128-byte header + 524,288 bytes), then os.remove of the
checkpoint from 3 saves earlier (7 removals; 3 files remain).

What a syscall trace sees (strace -e trace=openat,read,pread64,lseek,close,write,fstat):
one process, one thread, and HDF5's sec2 file driver reads with pread64 only (no read,
no lseek on the data file; the fd stays open for the whole run). Open: openat(features.h5,
O_RDONLY), fstat, then pread64s of the superblock (8 @0, 48 @0, 48 @48), root object
header (512 @96), local heap / symbol-table B-tree / SNOD (200, 512, 544, 328 bytes).
y[:]: object header (512) + ONE pread64 of 25,600 bytes (the contiguous dataset). First
access of x: its object header (512 @800) and the v1 B-tree root (2616 @1400) and first
leaf (2616); the other 3 leaves (2616 each) are read lazily when a batch first reaches
their chunk range (all within the first batch). 16 metadata preads (41,904 bytes) in
all, each done once: the metadata cache keeps them. Per batch: the 128 sorted rows fall
into 84-105 distinct chunks (expected 200 * (1 - e^(-128/200)) = 94.5) and HDF5 issues
ONE pread64 per touched chunk of exactly its compressed size (31,639-43,294 bytes), at
strictly ASCENDING offsets within the batch (sorted indices, chunks stored in order),
then restarts from a low offset for the next batch: a saw-tooth of ~95 preads per 10 ms
step. Chunks are NEVER reused across batches (the 1 MiB default chunk cache holds 16
decompressed chunks, and the next batch starts from the lowest chunks again), so the
number of chunk preads equals the sum of distinct chunks per batch: 4,778 / 4,764 /
4,760 per epoch (14,302 in all), 177,967,037 / 177,558,925 / 177,331,380 bytes per
epoch: each epoch reads the 7.45 MB of compressed chunks ~24 times (read amplification
~23.8x versus the raw data needed: 13.1 MB). Total 14,318 pread64, 532,899,246 bytes.
Checkpoints (10, after steps 15, 30, ..., 150): openat(ckpt/w_stepNNNN.npy,
O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC), fstat, lseek, write(128) (the .npy header), then
numpy's tofile on a DUP of the fd (fcntl F_DUPFD_CLOEXEC, fdopen): 3 lseeks, fstat,
write(dup, 524288), close(dup), 2 lseeks, close: 524,416 bytes per file, 5,244,160 in
all; from the 4th checkpoint on, each save is followed by unlink() of the checkpoint 3
saves older (7 unlinks; w_step0120/0135/0150.npy remain).

Usage: h5py_sorted_fancy_lzf_npsave.py DATA [--make | --truth]
needs h5py (run with /opt/dlio-reference/venv/bin/python).
"""
import json
import os
import sys
import time

import numpy as np

N_ROWS, ROW_BYTES, CHUNK_ROWS, N_CLASSES = 6400, 2048, 32, 40
BATCH, EPOCHS, CKPT_EVERY, KEEP = 128, 3, 15, 3
W_SHAPE = (2048, 64)
COMPUTE_S = 0.010
SEED = 777


def batches(epoch):
    perm = np.random.default_rng(SEED + epoch).permutation(N_ROWS)
    return [np.sort(perm[b * BATCH:(b + 1) * BATCH]) for b in range(N_ROWS // BATCH)]


def truth(data):
    steps = N_ROWS // BATCH
    chunks = [[len(np.unique(idx // CHUNK_ROWS)) for idx in batches(e)] for e in range(EPOCHS)]
    ck_steps = list(range(CKPT_EVERY, EPOCHS * steps + 1, CKPT_EVERY))
    return {
        "program": "h5py_sorted_fancy_lzf_npsave", "needs": ["h5py"],
        "format": "HDF5: /x uint8 (6400, 2048) chunked (32, 2048) lzf; /y int32 contiguous",
        "io_library": "h5py fancy indexing ds[sorted_idx] (HDF5 sec2 driver, pread64)",
        "data_layout": "DATA/features.h5 (single file), DATA/ckpt/ written by training",
        "num_files": 1, "samples_per_file": N_ROWS,
        "sample_size": {"distribution": "fixed raw row, chunk-compressed", "bytes": ROW_BYTES,
                        "chunk_raw_bytes": CHUNK_ROWS * ROW_BYTES,
                        "n_chunks": N_ROWS // CHUNK_ROWS,
                        "raw_dataset_bytes": N_ROWS * ROW_BYTES,
                        "compression": "lzf (~57% of raw)"},
        "batch_size": BATCH,
        "readers": {"kind": "main thread (single process, h5py)", "count": 1},
        "prefetch": None,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "permutation per epoch (numpy seed 777 + epoch), each batch sorted",
        "distinct_chunks_per_batch": {"per_epoch_sum": [sum(c) for c in chunks],
                                      "min": min(min(c) for c in chunks),
                                      "max": max(max(c) for c in chunks),
                                      "mean": float(np.mean(chunks))},
        "checkpoint": {"library": "np.save", "every_steps": CKPT_EVERY, "steps": ck_steps,
                       "files": ["ckpt/w_step%04d.npy" % s for s in ck_steps],
                       "bytes_each": 128 + int(np.prod(W_SHAPE)) * 4,
                       "keep_last": KEEP, "removed": len(ck_steps) - KEEP},
        "side_reads": [{"what": "/y labels", "bytes": N_ROWS * 4, "reads": "once"},
                       {"what": "HDF5 superblock/object headers/B-tree", "reads": "once"}],
        "read_pattern": "per batch one pread64 per distinct touched chunk (its compressed "
                        "size), ascending offsets within a batch; chunks re-read every batch",
        "syscall": "pread64",
        # measured (deterministic data + lzf): compressed chunk bytes read per epoch
        "chunk_preads_per_epoch": [sum(c) for c in chunks],
        "bytes_per_epoch": [177967037, 177558925, 177331380],
        "compressed_chunk_bytes": {"min": 31639, "max": 43294, "total": 7450932},
        "metadata_preads": 16, "file_bytes": 7493060,
    }


def make(data):
    import h5py
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    k = (rng.uniform(0.2, 0.9, N_ROWS) * ROW_BYTES).astype(np.int64)
    x = rng.integers(0, 64, (N_ROWS, ROW_BYTES), dtype=np.uint8)
    x[np.arange(ROW_BYTES)[None, :] >= k[:, None]] = 0
    y = rng.integers(0, N_CLASSES, N_ROWS).astype(np.int32)
    with h5py.File(os.path.join(data, "features.h5"), "w") as f:
        f.create_dataset("x", data=x, chunks=(CHUNK_ROWS, ROW_BYTES), compression="lzf")
        f.create_dataset("y", data=y)
        f.attrs.update({"n_classes": N_CLASSES, "sr": 16000, "hop": 160})


def train(data):
    import h5py
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    w = np.random.default_rng(SEED + 1).standard_normal(W_SHAPE).astype(np.float32) * 0.01
    saved, steps, acc = [], 0, 0
    with h5py.File(os.path.join(data, "features.h5"), "r") as f:
        assert f.attrs["n_classes"] == N_CLASSES
        y = f["y"][:]
        ds = f["x"]
        assert ds.chunks == (CHUNK_ROWS, ROW_BYTES)
        for epoch in range(EPOCHS):
            for idx in batches(epoch):
                xb = ds[idx]
                yb = y[idx]
                assert xb.shape == (BATCH, ROW_BYTES)
                feats = xb.astype(np.float32) / 64.0
                w[:, :1] += 1e-6 * feats.mean(axis=0)[:, None]   # a token "update"
                acc += int(xb[:, 0].sum()) + int(yb.sum())
                time.sleep(COMPUTE_S)
                steps += 1
                if steps % CKPT_EVERY == 0:
                    path = os.path.join(ckdir, "w_step%04d.npy" % steps)
                    np.save(path, w)
                    saved.append(path)
                    if len(saved) > KEEP:
                        os.remove(saved.pop(0))
    print("h5py_sorted_fancy_lzf_npsave: %d steps, %d checkpoints kept, checksum %d"
          % (steps, len(saved), acc))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
