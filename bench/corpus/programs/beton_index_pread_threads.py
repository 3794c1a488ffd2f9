"""FFCV-style single "beton" file: index table at the front, variable-size samples read with
os.pread by a pool of 4 threads, quasi-random order per epoch.

DATA/train.beton (25436125 bytes, about 25 MB) is one file:
  offset 0      64-byte header: magic b"BETONLK1", version, num_samples (2048), index offset
                (64), index entry size (16), data offset (36864), zero padding;
  offset 64     the index table: 2048 entries of 16 bytes (sample offset uint64, sample length
                uint32, label uint32), 32768 bytes, ending at 32832;
  offset 36864  the samples, back to back (no alignment), 2048 raw byte blobs whose lengths
                are lognormal (median 10 KiB, sigma 0.6, clipped to 1-64 KiB; mean about
                12 KB, the largest clipped at 65536).

The loader opens the file once with os.open (one fd for the whole run, shared by all
threads), reads the header with one pread (64 bytes at 0) and the whole index with one pread
(32768 bytes at 64), both in the main thread. Each epoch it builds a quasi-random order
(like FFCV's QUASI_RANDOM): the 2048 ids are cut into 32 blocks of 64 consecutive samples
(contiguous in the file), the blocks are permuted and the ids inside each block are
permuted (numpy rng seeded 4242 + epoch). Batches of 32 ids are handed to a
ThreadPoolExecutor of 4 threads, one task per sample, and each task does exactly ONE
os.pread(fd, length, offset) of the sample's exact length and offset from the index (no
read-ahead, no amplification: each byte of the data region is read once per epoch). The main
thread keeps 3 batches in flight (prefetch depth 3 batches = 96 sample reads); the
prefetch queue is drained at each epoch's end, so every epoch starts with a burst of 96
preads before its first step, then about 32 preads (one batch) per step. The main thread
"decodes" (np.frombuffer, pad or crop to 4096 bytes), and sleeps 12 ms per step.
3 epochs of 64 steps (batch 32), 192 steps in all.

What a syscall trace sees (strace -f -e trace=openat,read,pread64): importing numpy opens
many .so/.py files (not data). One openat(train.beton, O_RDONLY|O_CLOEXEC) in the main
thread, pread64(fd, 64, 0), pread64(fd, 32768, 64), then per epoch 2048 pread64s on the
same fd, each of the sample's exact size (1024..65536 bytes, lognormal) at the sample's
exact offset, issued by the 4 pool threads (4 different TIDs of the one process),
concurrently, in the quasi-random order: within a 64-sample block the offsets are random,
and consecutive blocks jump around the file. 6144 sample preads in all, about 76 MB read
(3 passes over the 25 MB data region). No plain read() of the data file, no writes,
no other data files; the fd is closed at the end.

Usage: beton_index_pread_threads.py DATA [--make | --truth]
Fixed by the program: 1 file, 2048 variable-size samples (lognormal, median 10 KiB),
batch 32, 4 reader threads, prefetch 3 batches, 3 epochs of 64 steps, 12 ms compute per
step, no checkpoint, no eval. numpy only.
"""
import collections
import json
import os
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N, BATCH, THREADS, PREFETCH_BATCHES, EPOCHS, COMPUTE_S = 2048, 32, 4, 3, 3, 0.012
BLOCK = 64
HEADER_BYTES, INDEX_OFFSET, ENTRY_BYTES, DATA_OFFSET = 64, 64, 16, 36864
MAGIC = b"BETONLK1"
SEED = 4242
DECODED = 4096
INDEX_DTYPE = np.dtype([("offset", "<u8"), ("length", "<u4"), ("label", "<u4")])


def beton_path(data):
    return os.path.join(data, "train.beton")


def sample_lengths():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(10240), 0.6, N), 1024, 65536).astype(np.int64)


def truth(data):
    p = beton_path(data)
    lengths = sample_lengths()
    steps = N // BATCH
    return {
        "program": "beton_index_pread_threads", "needs": [], "format": "custom binary "
        "(FFCV-like beton: header + index table + concatenated samples)",
        "io_library": "os.pread on one shared fd from a ThreadPoolExecutor",
        "data_layout": "DATA/train.beton: 64-byte header, index of 2048 x 16 bytes at 64, "
                       "samples back to back from offset 36864",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "lognormal", "median_bytes": 10240, "sigma": 0.6,
                        "min_bytes": 1024, "max_bytes": 65536,
                        "mean_bytes": int(lengths.mean()), "total_bytes": int(lengths.sum())},
        "file_size": os.path.getsize(p) if os.path.exists(p)
        else int(DATA_OFFSET + lengths.sum()),
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": THREADS,
                    "framework": "concurrent.futures.ThreadPoolExecutor",
                    "note": "one task (one pread) per sample, all on the same fd"},
        "prefetch": {"batches_in_flight": PREFETCH_BATCHES,
                     "samples_in_flight": PREFETCH_BATCHES * BATCH,
                     "note": "queue drained at each epoch end"},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "quasi-random per epoch: 32 blocks of 64 consecutive samples, block order "
                   "permuted and ids permuted inside each block (rng seeded 4242 + epoch)",
        "eval": None, "checkpoint": None, "side_files": [],
        "file_opens": {"total": 1},
        "index_reads": [{"offset": 0, "bytes": HEADER_BYTES},
                        {"offset": INDEX_OFFSET, "bytes": N * ENTRY_BYTES}],
        "read_pattern": "header and index read once (2 preads), then one pread per sample of "
                        "its exact size at its exact offset, random within 64-sample blocks, "
                        "blocks in random order; each sample read once per epoch",
        "reads_per_sample": 1, "bytes_per_epoch": int(lengths.sum()),
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    lengths = sample_lengths()
    rng = np.random.default_rng(SEED + 1)
    labels = rng.integers(0, 100, N).astype(np.uint32)
    index = np.zeros(N, dtype=INDEX_DTYPE)
    index["offset"] = DATA_OFFSET + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    index["length"] = lengths
    index["label"] = labels
    header = MAGIC + struct.pack("<IIQIQ", 1, N, INDEX_OFFSET, ENTRY_BYTES, DATA_OFFSET)
    header = header.ljust(HEADER_BYTES, b"\0")
    with open(beton_path(data), "wb") as f:
        f.write(header)
        f.write(index.tobytes())
        f.write(b"\0" * (DATA_OFFSET - INDEX_OFFSET - N * ENTRY_BYTES))
        for n in lengths:
            f.write(rng.bytes(int(n)))


def quasi_random_order(epoch):
    rng = np.random.default_rng(SEED + epoch)
    blocks = np.arange(N).reshape(-1, BLOCK)
    return np.concatenate([rng.permutation(blocks[b]) for b in rng.permutation(len(blocks))])


def train(data):
    fd = os.open(beton_path(data), os.O_RDONLY | os.O_CLOEXEC)
    header = os.pread(fd, HEADER_BYTES, 0)
    assert header[:8] == MAGIC
    _, n, index_off, entry, data_off = struct.unpack("<IIQIQ", header[8:36])
    index = np.frombuffer(os.pread(fd, n * entry, index_off), dtype=INDEX_DTYPE)

    def read_one(i):
        return os.pread(fd, int(index["length"][i]), int(index["offset"][i]))

    def decode(blobs):
        out = np.zeros((len(blobs), DECODED), dtype=np.uint8)
        for k, b in enumerate(blobs):
            a = np.frombuffer(b, dtype=np.uint8)[:DECODED]
            out[k, :len(a)] = a
        return out

    with ThreadPoolExecutor(THREADS, thread_name_prefix="beton-io") as pool:
        for epoch in range(EPOCHS):
            order = quasi_random_order(epoch)
            batches = [order[s:s + BATCH] for s in range(0, N, BATCH)]
            inflight = collections.deque()
            nxt = 0
            steps = 0
            while steps < len(batches):
                while nxt < len(batches) and len(inflight) < PREFETCH_BATCHES:
                    ids = batches[nxt]
                    inflight.append((ids, [pool.submit(read_one, int(i)) for i in ids]))
                    nxt += 1
                ids, futs = inflight.popleft()
                x = decode([f.result() for f in futs])
                y = index["label"][ids]
                assert x.shape == (BATCH, DECODED) and y.shape == (BATCH,)
                time.sleep(COMPUTE_S)
                steps += 1
            assert steps == N // BATCH
    os.close(fd)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
