"""Image-classification training from gzip-compressed tar shards (.tar.gz, WebDataset
naming: NNNNNN.npy + NNNNNN.json per sample), each shard streamed with tarfile in "r|gz"
mode (no seeking, no member index) and decoded WHOLE by a worker of a
concurrent.futures.ProcessPoolExecutor; the main process keeps at most 3 shard futures in
flight (a bounded prefetch queue), pours decoded samples into a seeded shuffle buffer and
batches them. A validation shard is streamed by the main process after every epoch.

Data set (DATA/, about 26.0 MB on disk):
  DATA/train/shard-000000.tar.gz .. shard-000015.tar.gz   16 shards, 96 samples each;
  DATA/val/val-000000.tar.gz                                64 samples.
  Per sample two tar members: NNNNNN.npy (np.save of a 96 x 96 x 3 uint8 image: 8 x 8
  pixel blocks of random colour with 25% of the values replaced by noise, 27,776 bytes
  incl. the 128-byte npy header) and NNNNNN.json ({"label": k, "caption": "..."}, 48-77
  bytes). Written with gzip.GzipFile(compresslevel=6, mtime=0) wrapping
  tarfile.open(mode="w") (GNU format, 512-byte headers/padding); the images compress
  about 1.7:1 (1,557,538..1,561,183 bytes per train shard, 24,962,008 in all; val shard
  1,039,152 bytes).

Training: each epoch permutes the 16 train shards (numpy rng seed 31337 + epoch) and
submits decode_shard(path) for them in that order to a ProcessPoolExecutor(max_workers=2,
fork context, created once for the run), keeping at most 3 submitted and unconsumed
futures (the next shard is submitted as soon as the oldest result is taken). A worker
opens the shard with tarfile.open(path, "r|gz"), iterates the members front to back,
reads each with extractfile().read(), decodes the npy/json pairs and returns the list of
96 (image, label) pairs (pickled back through the pool's pipe, ~2.7 MB per shard). The
main process consumes results in submission order, pushes samples into a 192-sample
shuffle buffer (random pops, rng seeded per epoch; drained at epoch end), forms batches of
32 and sleeps 25 ms per step: 48 steps per epoch. After each epoch the main process
itself streams val/val-000000.tar.gz the same way and evaluates 2 batches of 32 (5 ms
each). 3 epochs, 144 steps. No checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): 2 worker
processes (PIDs fixed for the run; at start-up they do no data I/O). Per shard, in one
worker: openat(shard-XXXXXX.tar.gz, O_RDONLY|O_CLOEXEC), then tarfile's _Stream asks the
buffered file for 10240-byte records, which BufferedReader passes straight through: a run
of read(fd, 10240) = 10240 at consecutive offsets (152 of them), one short final read
(e.g. read(fd, 10240) = 2598) and close - no read() = 0 at EOF, no lseek, no pread. So
each shard is read strictly front to back, whole (153 reads, 1.56 MB), once per epoch by
whichever worker gets it (they alternate roughly: 23 vs 25 shard opens in one run); 24.9
MB of compressed train bytes read per epoch. The reads of a shard come in bursts as the
worker inflates and decodes, with the next shard submitted as soon as the main process
takes a result. Main process: val/val-000000.tar.gz opened once per epoch and read the
same way (101 x read(10240) + one short read, 1,039,152 bytes); otherwise only pipe reads
of the pickled results. No files are written.

Usage: targz_shards_procpool.py DATA [--make | --truth]
numpy + stdlib only (runs with plain python3).
"""
import collections
import gzip
import io
import json
import os
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

import numpy as np

N_SHARDS, PER_SHARD, N_VAL, IMG = 16, 96, 64, (96, 96, 3)
WORKERS, IN_FLIGHT, SHUFFLE_BUF, BATCH, EPOCHS = 2, 3, 192, 32, 3
COMPUTE_S, EVAL_S, N_CLASSES, NOISE, LEVEL = 0.025, 0.005, 10, 0.25, 6
SEED = 31337
MADE_TRAIN_BYTES = 24962008  # total of the 16 train shards as --make writes them (zlib 1.x)
WORDS = ["a", "red", "small", "dog", "cat", "on", "the", "grass", "near", "blue", "car",
         "tree", "house", "two", "people", "walking", "bird", "sky"]


def shard_order(epoch):
    return np.random.default_rng(SEED + epoch).permutation(N_SHARDS)


def shard_name(k):
    return "shard-%06d.tar.gz" % k


def truth(data):
    sizes = None
    if os.path.isdir(os.path.join(data, "train")):
        sizes = [os.path.getsize(os.path.join(data, "train", shard_name(k)))
                 for k in range(N_SHARDS)]
    total_gz = sum(sizes) if sizes else MADE_TRAIN_BYTES
    npy_bytes = 128 + int(np.prod(IMG))
    steps = N_SHARDS * PER_SHARD // BATCH
    return {
        "program": "targz_shards_procpool", "needs": [],
        "format": "tar.gz shards (WebDataset naming: .npy image + .json label per sample)",
        "io_library": "tarfile.open(mode='r|gz') streaming, whole shard per "
                      "ProcessPoolExecutor task",
        "data_layout": "DATA/train/shard-0000NN.tar.gz (16), DATA/val/val-000000.tar.gz",
        "num_files": N_SHARDS, "samples_per_file": PER_SHARD,
        "sample_size": {"distribution": "fixed image + small json",
                        "mean_bytes": npy_bytes + 60, "npy_bytes": npy_bytes,
                        "json_bytes": "48-77",
                        "total_bytes": N_SHARDS * PER_SHARD * npy_bytes,
                        "compressed_total_bytes": total_gz,
                        "compression": "gzip level 6, ~1.7:1"},
        "batch_size": BATCH,
        "readers": {"kind": "concurrent.futures.ProcessPoolExecutor (fork), one shard per "
                            "task", "count": WORKERS},
        "prefetch": {"shards_in_flight": IN_FLIGHT, "shuffle_buffer_samples": SHUFFLE_BUF},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order permuted per epoch (seed 31337 + epoch) + 192-sample "
                   "shuffle buffer",
        "eval": {"when": "after every epoch", "file": "val/val-000000.tar.gz",
                 "process": "main", "samples": N_VAL, "batch_size": BATCH,
                 "steps": N_VAL // BATCH, "compute_s_per_step": EVAL_S},
        "checkpoint": None, "side_files": [],
        "read_pattern": "each shard streamed sequentially front to back once per epoch "
                        "by one worker (gzip stream, no seeks)",
        "bytes_per_epoch": total_gz,
    }


def sample_bytes(rng, idx):
    label = int(rng.integers(N_CLASSES))
    blocks = rng.integers(0, 256, (IMG[0] // 8, IMG[1] // 8, 3))
    blocks[..., label % 3] = 25 * label
    img = np.repeat(np.repeat(blocks, 8, 0), 8, 1)
    noisy = rng.random(IMG) < NOISE
    img = np.where(noisy, rng.integers(0, 256, IMG), img).astype(np.uint8)
    b = io.BytesIO()
    np.save(b, img)
    cap = " ".join(rng.choice(WORDS, int(rng.integers(6, 10))))
    meta = json.dumps({"label": label, "caption": cap}).encode()
    return b.getvalue(), meta


def write_shard(path, rng, first, n):
    # gzip header mtime fixed to 0 so --make is byte-for-byte reproducible
    with gzip.GzipFile(path, mode="wb", compresslevel=LEVEL, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for i in range(first, first + n):
            for ext, payload in zip(("npy", "json"), sample_bytes(rng, i)):
                ti = tarfile.TarInfo("%06d.%s" % (i, ext))
                ti.size, ti.mtime, ti.mode = len(payload), 1700000000, 0o644
                tf.addfile(ti, io.BytesIO(payload))


def make(data):
    os.makedirs(os.path.join(data, "train"), exist_ok=True)
    os.makedirs(os.path.join(data, "val"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    for k in range(N_SHARDS):
        write_shard(os.path.join(data, "train", shard_name(k)), rng, k * PER_SHARD, PER_SHARD)
    write_shard(os.path.join(data, "val", "val-000000.tar.gz"), rng, 10 ** 5, N_VAL)


def decode_shard(path):
    out, pending = [], {}
    with tarfile.open(path, mode="r|gz") as tf:
        for m in tf:
            if not m.isfile():
                continue
            key, ext = m.name.rsplit(".", 1)
            payload = tf.extractfile(m).read()
            pending.setdefault(key, {})[ext] = payload
            if len(pending[key]) == 2:
                s = pending.pop(key)
                img = np.load(io.BytesIO(s["npy"]))
                out.append((img, json.loads(s["json"])["label"]))
    return out


def train(data):
    tdir = os.path.join(data, "train")
    steps, seen = 0, 0
    ctx = mp.get_context("fork")
    with ProcessPoolExecutor(max_workers=WORKERS, mp_context=ctx) as pool:
        for epoch in range(EPOCHS):
            rng = np.random.default_rng(SEED + 100 + epoch)
            todo = collections.deque(os.path.join(tdir, shard_name(k))
                                     for k in shard_order(epoch))
            futs = collections.deque()
            buf, batch = [], []

            def emit(sample):
                nonlocal steps, seen, batch
                batch.append(sample)
                if len(batch) == BATCH:
                    x = np.stack([b[0] for b in batch]).astype(np.float32) / 255.0
                    y = np.array([b[1] for b in batch])
                    assert x.shape == (BATCH,) + IMG and y.max() < N_CLASSES
                    time.sleep(COMPUTE_S)
                    steps += 1
                    seen += BATCH
                    batch = []

            while todo or futs:
                while todo and len(futs) < IN_FLIGHT:
                    futs.append(pool.submit(decode_shard, todo.popleft()))
                for s in futs.popleft().result():
                    buf.append(s)
                    if len(buf) >= SHUFFLE_BUF:
                        emit(buf.pop(int(rng.integers(len(buf)))))
            while buf:
                emit(buf.pop(int(rng.integers(len(buf)))))
            assert not batch
            val = decode_shard(os.path.join(data, "val", "val-000000.tar.gz"))
            for s in range(0, len(val), BATCH):
                x = np.stack([v[0] for v in val[s:s + BATCH]])
                time.sleep(EVAL_S)
    print("targz_shards_procpool: %d steps, %d samples, %d epochs" % (steps, seen, EPOCHS))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
