"""Arrow IPC (Feather v2) file read record batch by record batch with
pyarrow.ipc.open_file over a plain OSFile (no memory map), by ONE background reader thread
that runs 2 record batches ahead; the trainer mixes 2 record batches at a time (a
512-row shuffle pool), emits 16 training batches of 32 from them, and saves a numpy
checkpoint (temp file + os.replace) at the end of each epoch.

Data set (DATA/, about 29 MB):
  DATA/train.arrow   one Arrow IPC file (random-access "file" format, uncompressed):
                     schema {image: binary, label: int32, caption: string}, 16 record
                     batches of 256 rows (4096 rows). image blobs are lognormal (median
                     6 KiB, sigma 0.5, clipped to 1-32 KiB, mean ~7 KB), captions
                     20-80 ASCII chars. Each record batch block (flatbuffer metadata +
                     body: offsets and data buffers of the 3 columns, 8-byte aligned) is
                     1.71-1.93 MB; blocks are back to back from offset 232 to 28936976,
                     then the 616-byte footer indexing them and a 10-byte trailer
                     (file size 28937602 bytes).
  DATA/ckpt/ (written by training): model_epoch_1.npz, model_epoch_2.npz (~2.1 MB each).

Training: the main thread opens the file (pa.OSFile(path) + pa.ipc.open_file) and reads
the footer. A daemon thread "arrow-reader" then, for each epoch, reads the record batches
in a permuted order (numpy rng seeded 8080 + epoch) with reader.get_batch(i) and puts
them on a queue.Queue(maxsize=2) (prefetch depth 2 record batches = 512 rows, plus the
one being built). The main thread takes record batches two at a time, concatenates the
512 rows, permutes them (rng seeded 8080 + 1000*epoch + pair), decodes each image blob
(np.frombuffer, crop/pad to 4096 bytes) and yields 16 batches of 32; each step sleeps
10 ms. 128 steps per epoch, 2 epochs, 256 steps. At the end of each epoch the weights
(float32 (4096, 128) + (128,) ~2.1 MB) are np.savez'd to ckpt/model_epoch_E.npz.tmp and
os.replace()d to ckpt/model_epoch_E.npz. No eval.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,write,lseek,rename):
importing pyarrow opens many .so files (not data). train.arrow is opened ONCE by the main
thread (openat(..., O_RDONLY), without O_CLOEXEC) and stays open for the whole run (one
fd, closed at the very end). The footer is read right after the open with 2 pread64s from
an Arrow-internal thread (a TID that is neither the main thread nor the reader thread):
pread64(fd, 10, 28937592) (footer length + "ARROW1") and pread64(fd, 616, 28936976) (the
footer). Then every record batch costs exactly ONE pread64 of its whole block (metadata +
body, 1707656-1928256 bytes) at the block's offset (232, 1799376, 3600624, ...), issued
by the "arrow-reader" thread (one TID): 16 preads per epoch in a random block order, 32
in all, each byte of the file read once per epoch (~28.9 MB per epoch, ~57.9 MB in all).
Reads come in bursts: 5 blocks within ~20 ms at the start (3 to fill the queue and the
reader's hand, 2 more as soon as the trainer takes its first pair), then, each time the
trainer takes its next pair of blocks (every 16 steps, ~0.17 s), a burst of 2
back-to-back block preads (~3.6 MB); the reader holds up to 3 blocks ahead (2 queued + 1 waiting to be put),
so the first 3 blocks of epoch 2 are read before the epoch-1 checkpoint is written. No plain read() on the file, no
lseek. Writes (main thread): per epoch openat(ckpt/model_epoch_E.npz.tmp,
O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC), np.savez's zip writer does write(183) + write(2097152)
(member w), lseek(0) + write(55) to patch the local header, lseek back, then 695/55 (b),
195/59 (epoch) and a final write(179) (central directory), close, then
rename(.tmp -> model_epoch_E.npz) (2098404 bytes per checkpoint, 2 checkpoints).

Usage: arrow_ipc_batches_bgthread_ckpt.py DATA [--make | --truth]
Needs pyarrow (run with the reference venv).
"""
import json
import os
import queue
import sys
import threading
import time

import numpy as np

ROWS_PER_RB, NUM_RB, BATCH, POOL_RB, PREFETCH_RB, EPOCHS, COMPUTE_S = 256, 16, 32, 2, 2, 2, 0.010
SEED = 8080
DECODED = 4096
HIDDEN = 128
N = ROWS_PER_RB * NUM_RB


def blob_lengths():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(6144), 0.5, N), 1024, 32768).astype(np.int64)


def rb_order(epoch):
    return [int(i) for i in np.random.default_rng(SEED + epoch).permutation(NUM_RB)]


def arrow_path(data):
    return os.path.join(data, "train.arrow")


def truth(data):
    lens = blob_lengths()
    p = arrow_path(data)
    steps = N // BATCH
    return {
        "program": "arrow_ipc_batches_bgthread_ckpt", "needs": ["pyarrow"],
        "format": "Arrow IPC file (Feather v2, uncompressed), 16 record batches x 256 rows",
        "io_library": "pyarrow.ipc.open_file(pyarrow.OSFile) + RecordBatchFileReader."
                      "get_batch in one background thread",
        "data_layout": "DATA/train.arrow {image: binary, label: int32, caption: string}",
        "num_files": 1, "samples_per_file": N, "record_batches": NUM_RB,
        "rows_per_record_batch": ROWS_PER_RB,
        "sample_size": {"dist": "lognormal", "median_bytes": 6144, "sigma": 0.5,
                        "min_bytes": 1024, "max_bytes": 32768,
                        "mean_bytes": int(lens.mean()), "total_bytes": int(lens.sum())},
        "file_size": os.path.getsize(p) if os.path.exists(p) else None,
        "batch_size": BATCH,
        "readers": {"kind": "thread", "count": 1, "framework": "threading.Thread + "
                    "queue.Queue", "note": "one fd opened once by the main thread"},
        "prefetch": {"record_batches": PREFETCH_RB, "rows": PREFETCH_RB * ROWS_PER_RB,
                     "shuffle_pool_rows": POOL_RB * ROWS_PER_RB},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "record batch order permuted per epoch (seed 8080 + epoch), rows permuted "
                   "within a pool of 2 record batches (512 rows)",
        "eval": None,
        "checkpoint": {"when": "end of each epoch", "count": EPOCHS,
                       "path": "ckpt/model_epoch_E.npz (written as .tmp, then os.replace)",
                       "bytes_approx": 4 * (DECODED * HIDDEN + HIDDEN) + 400},
        "side_files": [],
        "file_opens": {"total": 1},
        "read_pattern": "footer read once (2 small preads at the end); then per record "
                        "batch ONE pread of its whole block (metadata + body, ~1.8 MB) at "
                        "its offset, record batches in random order, from one background "
                        "thread",
        "reads_per_sample": "1 pread per 256-row record batch",
        "bytes_per_epoch_approx": int(lens.sum()) + N * 50,
    }


def make(data):
    import pyarrow as pa
    os.makedirs(data, exist_ok=True)
    lens = blob_lengths()
    rng = np.random.default_rng(SEED + 1)
    words = ["a", "cat", "on", "the", "red", "mat", "dog", "runs", "near", "blue", "car"]
    schema = pa.schema([("image", pa.binary()), ("label", pa.int32()),
                        ("caption", pa.string())])
    with pa.OSFile(arrow_path(data), "wb") as sink:
        with pa.ipc.new_file(sink, schema) as w:
            for b in range(NUM_RB):
                ids = range(b * ROWS_PER_RB, (b + 1) * ROWS_PER_RB)
                imgs = [rng.bytes(int(lens[i])) for i in ids]
                labels = rng.integers(0, 1000, ROWS_PER_RB).astype(np.int32)
                caps = []
                for _ in ids:
                    c = ""
                    target = int(rng.integers(20, 81))
                    while len(c) < target:
                        c += words[int(rng.integers(len(words)))] + " "
                    caps.append(c[:target])
                w.write_batch(pa.record_batch([pa.array(imgs, pa.binary()),
                                               pa.array(labels), pa.array(caps)],
                                              schema=schema))


def train(data):
    import pyarrow as pa
    src = pa.OSFile(arrow_path(data), "rb")
    reader = pa.ipc.open_file(src)
    assert reader.num_record_batches == NUM_RB
    q = queue.Queue(maxsize=PREFETCH_RB)

    def read_loop():
        for epoch in range(EPOCHS):
            for i in rb_order(epoch):
                q.put(reader.get_batch(i))
        q.put(None)

    t = threading.Thread(target=read_loop, name="arrow-reader", daemon=True)
    t.start()

    rng = np.random.default_rng(SEED)
    w = rng.standard_normal((DECODED, HIDDEN), dtype=np.float32) * 0.01
    b = np.zeros(HIDDEN, np.float32)
    os.makedirs(os.path.join(data, "ckpt"), exist_ok=True)
    for epoch in range(EPOCHS):
        steps = 0
        for pair in range(NUM_RB // POOL_RB):
            rbs = [q.get() for _ in range(POOL_RB)]
            imgs = [x for rb in rbs for x in rb.column(0).to_pylist()]
            labels = np.concatenate([rb.column(1).to_numpy() for rb in rbs])
            perm = np.random.default_rng(SEED + 1000 * epoch + pair).permutation(len(imgs))
            for s in range(0, len(perm), BATCH):
                ids = perm[s:s + BATCH]
                x = np.zeros((BATCH, DECODED), dtype=np.uint8)
                for k, i in enumerate(ids):
                    a = np.frombuffer(imgs[i], dtype=np.uint8)[:DECODED]
                    x[k, :len(a)] = a
                y = labels[ids]
                assert y.shape == (BATCH,)
                time.sleep(COMPUTE_S)
                b += 1e-3
                steps += 1
        assert steps == N // BATCH
        final = os.path.join(data, "ckpt", "model_epoch_%d.npz" % (epoch + 1))
        tmp = final + ".tmp"
        with open(tmp, "wb") as f:
            np.savez(f, w=w, b=b, epoch=np.int64(epoch + 1))
        os.replace(tmp, final)
    assert q.get() is None
    t.join()
    src.close()


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
