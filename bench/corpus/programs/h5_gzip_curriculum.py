"""Curriculum-learning training over a gzip-compressed, chunked HDF5 dataset: samples are
stored sorted by difficulty, and epoch e trains only on the easiest 35% / 65% / 100% of
them (a "competence-based" curriculum). Each batch is read with ONE h5py fancy-index call
on the sorted batch indices, so HDF5 decompresses every chunk the batch touches, whole,
even to extract one sample of it (the classic compressed-HDF5 read amplification).

Data set (DATA/, about 44 MB):
  DATA/train.h5  /spec        (3072, 96, 96) int16, 18,432 raw bytes per sample (56.6 MB raw),
                              chunks (8, 96, 96) = 147,456 raw bytes, filters shuffle + gzip
                              level 4, 384 chunks stored at 82-132 KB each (mean 115 KB,
                              harder = noisier = larger chunks later in the file), chunk
                              index = v1 B-tree (8 nodes of 3136 bytes);
                 /label       (3072,) int64, contiguous (24,576 bytes);
                 /difficulty  (3072,) float32, contiguous, ascending (12,288 bytes).
  Spectrogram-like content: sinusoidal ridges plus Gaussian noise whose amplitude grows with
  difficulty (beta(2, 3), seed 87).

Training (main thread only, no workers, no prefetch): h5py.File(train.h5, "r") opened once
for the run; /label and /difficulty read whole once. Epoch e uses samples 0..n_e-1 with
n_e = 1075, 1996, 3072 (fractions 0.35, 0.65, 1.0), permuted (seed 77 + epoch), cut into
batches of 32 (drop_last: 33, 62, 96 steps = 191 steps), each batch's indices sorted and
read by spec[idx] (one H5Dread with a point/hyperslab union selection); the batch is cast
to float32 and the step sleeps 12 ms (decompression adds ~15-20 ms of CPU per step). 3
epochs. Default HDF5 chunk cache (1 MiB: holds ~7 decompressed chunks, too small to help
across batches). No eval, no checkpoint, nothing written.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): one process, one
thread; train.h5 opened once (openat O_RDONLY), all I/O is pread64, no read/lseek. At
open: small metadata preads (8, 48, 48, 512 @ 96, 104 @ end of file, 512/544/328 object
headers); /label = one pread64(24576), /difficulty = one pread64(12288), both near the end
of the file. First batch: the chunk B-tree nodes are read on demand (pread64 of 3136
bytes, 8 in all, then cached in the metadata cache). Then per batch: one pread64 per
DISTINCT chunk touched by the 32 indices (29-31 on average, since 32 random picks out of
n_e/8 chunks mostly land in different chunks), issued in ascending file offset, each
exactly the chunk's stored (compressed) size, 82-132 KB, never split or coalesced. Chunks
are re-read by later batches (no cache across batches): 956 / 1876 / 2958 chunk reads in
epochs 0/1/2 (5790 in all), i.e. 97.7 / 205.7 / 341.5 MB of preads per epoch for
19.5 / 36.6 / 56.6 MB of raw samples used. Epoch e only touches the first n_e/8 chunks,
so the accessed byte range of the file widens each epoch (chunks 0-134 = first 13.8 MB,
0-249 = 27.5 MB, then all 384 = 44.4 MB); the chunk size also grows, since harder
samples compress worse.

Usage: h5_gzip_curriculum.py DATA [--make | --truth]
Needs h5py.
"""
import json
import os
import sys
import time

import numpy as np

N, H, W, CHUNK, N_CLASSES = 3072, 96, 96, 8, 10
BATCH, EPOCHS, COMPUTE_S = 32, 3, 0.012
FRACTIONS = (0.35, 0.65, 1.0)
SEED = 77


def subset_sizes():
    return [int(f * N) for f in FRACTIONS]


def steps_per_epoch():
    return [n // BATCH for n in subset_sizes()]


def epoch_batches(epoch):
    n = subset_sizes()[epoch]
    order = np.random.default_rng(SEED + epoch).permutation(n)
    return [np.sort(order[s * BATCH:(s + 1) * BATCH]) for s in range(n // BATCH)]


def truth(data):
    steps = steps_per_epoch()
    raw = H * W * 2
    chunks_read = [int(sum(len(np.unique(b // CHUNK)) for b in epoch_batches(e)))
                   for e in range(EPOCHS)]
    p = os.path.join(data, "train.h5")
    stored = None
    if os.path.exists(p):
        import h5py
        with h5py.File(p, "r") as f:
            d = f["spec"]
            stored = [d.id.get_chunk_info(k).size for k in range(d.id.get_num_chunks())]
    out = {
        "program": "h5_gzip_curriculum", "needs": ["h5py"],
        "format": "HDF5, chunked int16 dataset with shuffle + gzip(4) filters",
        "io_library": "h5py fancy indexing dset[sorted_indices] per batch, main thread",
        "data_layout": "DATA/train.h5: /spec (3072, 96, 96) int16 chunks (8, 96, 96) gzip; "
                       "/label (3072,) int64, /difficulty (3072,) float32 contiguous",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed raw size, compressed size grows with difficulty",
                        "raw_bytes": raw, "raw_total_bytes": N * raw,
                        "chunk_raw_bytes": raw * CHUNK, "num_chunks": N // CHUNK,
                        "chunk_stored_bytes_min": min(stored) if stored else None,
                        "chunk_stored_bytes_max": max(stored) if stored else None,
                        "chunk_stored_bytes_mean": int(np.mean(stored)) if stored else None,
                        "file_bytes": os.path.getsize(p) if os.path.exists(p) else None},
        "batch_size": BATCH,
        "readers": {"kind": "main thread", "count": 1},
        "prefetch": None,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": int(sum(steps)),
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "curriculum: epoch e draws from the easiest FRACTIONS[e] = %s of the samples "
                   "(stored sorted by difficulty), permuted (seed 77 + epoch), drop_last; "
                   "indices sorted within each batch" % (FRACTIONS,),
        "curriculum": {"fractions": FRACTIONS, "samples": subset_sizes(),
                       "chunk_range_per_epoch": [[0, n // CHUNK] for n in subset_sizes()]},
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "train.h5:/label", "reads": "once, whole"},
                       {"path": "train.h5:/difficulty", "reads": "once, whole"}],
        "chunk_reads_per_epoch": chunks_read,
        "read_pattern": "per batch one H5Dread of 32 sorted indices: each distinct chunk "
                        "touched (~29-31 of 8 samples each) read whole (compressed) with one "
                        "pread64 in ascending offset order, re-read by later batches (bytes read "
                        "~5.7x the raw bytes used); subset grows each epoch",
        "bytes_per_epoch": None,
    }
    if stored:
        per = []
        for e in range(EPOCHS):
            per.append(int(sum(stored[c] for b in epoch_batches(e) for c in np.unique(b // CHUNK))))
        out["bytes_per_epoch"] = per
    return out


def make(data):
    import h5py
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED + 10)
    difficulty = np.sort(rng.beta(2, 3, N)).astype(np.float32)
    freq = np.linspace(0, 1, H, dtype=np.float32)[:, None]
    t = np.linspace(0, 1, W, dtype=np.float32)[None, :]
    with h5py.File(os.path.join(data, "train.h5"), "w") as f:
        d = f.create_dataset("spec", (N, H, W), dtype="int16", chunks=(CHUNK, H, W),
                             compression="gzip", compression_opts=4, shuffle=True)
        for s in range(0, N, 256):
            n = min(256, N - s)
            k = rng.integers(1, 8, (n, 1, 1))
            base = 3000 * np.sin(2 * np.pi * (k * freq + t * k / 3))
            amp = 10 + 4000 * difficulty[s:s + n, None, None] ** 2
            d[s:s + n] = (base + rng.normal(0, 1, (n, H, W)) * amp).astype(np.int16)
        f.create_dataset("label", data=rng.integers(N_CLASSES, size=N))
        f.create_dataset("difficulty", data=difficulty)
        f.attrs["sorted_by"] = "difficulty"


def train(data):
    import h5py
    t0, total = time.time(), 0
    with h5py.File(os.path.join(data, "train.h5"), "r") as f:
        labels = f["label"][:]
        difficulty = f["difficulty"][:]
        assert np.all(np.diff(difficulty) >= 0)
        spec = f["spec"]
        for epoch in range(EPOCHS):
            for idx in epoch_batches(epoch):
                x = spec[idx].astype(np.float32) / 3000.0
                y = labels[idx]
                assert x.shape == (BATCH, H, W) and y.shape == (BATCH,)
                time.sleep(COMPUTE_S)
                total += 1
    print("h5_gzip_curriculum: %d steps, %d epochs, %.1f s" % (total, EPOCHS, time.time() - t0))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
