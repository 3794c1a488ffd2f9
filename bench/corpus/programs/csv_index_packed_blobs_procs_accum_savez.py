"""Two-stage loader over a packed blob file: the main process reads a CSV index
(offset, length, label, shape, crc32 of every image blob), then 2 long-lived worker
processes (multiprocessing.Process, fork) each keep ONE unbuffered file descriptor on the
pack and, for every micro-batch they are handed, sort its blobs by offset and fetch them
with lseek + readinto into a reusable buffer. Training uses gradient accumulation (4
micro-batches per optimizer step) and writes an np.savez checkpoint every 10 optimizer
steps with fsync + atomic rename and rotation (keep the newest 3).

Data set (DATA/, about 33 MB):
  DATA/index.csv     header + 1200 rows "id,offset,length,label,height,width,crc32"
                     (47,902 bytes, CRLF line ends), read once by the main process with
                     the csv module.
  DATA/blobs.pack    1200 raw uint8 H x W x 3 images (H, W uniform 64..128; 12,864 ..
                     48,384 bytes, 27,780 mean) concatenated in id order, each blob
                     starting on a 512-byte boundary (zero padding between blobs);
                     33,646,080 bytes.

Training: per epoch the 1200 ids are shuffled (numpy rng seeded 8086 + epoch) and cut
into 100 micro-batches of 12. Micro-batch j goes to worker j % 2 through that worker's
task queue; the main process keeps 4 micro-batches in flight (2 per worker) and consumes
results strictly in order. Worker: sort the 12 (offset, length) pairs by offset; for each
f.seek(offset); f.readinto(buf[:length]) on open(pack, "rb", buffering=0); zlib.crc32
check; centre crop 56 x 56 x 3; the 12 crops + labels go back through a result queue
(pickled over a pipe). Main loop: 12 ms sleep per micro-batch (forward/backward), and
after every 4th micro-batch an optimizer step (8 ms sleep). 2 epochs = 200 micro-batches =
50 optimizer steps. Every 10 optimizer steps the main process writes
ckpt/ckpt_step00SS.npz: np.savez into an open file ckpt_step00SS.npz.tmp (arrays weights
256x512 float32, momentum 256x512 float32, step, epoch, rng position; 1,049,844 B), flush,
os.fsync, os.replace to the final name, then rewrites ckpt/LATEST (tmp + fsync + rename)
and deletes checkpoints beyond the newest 3. Leftovers of a previous run are removed at
start. No eval.

What a syscall trace sees: main process: index.csv opened once (openat, fstat, lseek,
six read(8192) calls + the EOF read, close). Later the checkpoint writes, 5 times:
openat(ckpt_step00SS.npz.tmp, O_WRONLY|O_CREAT|O_TRUNC), then per array a zip local
header write (~190 B), the payload write (524288 B for weights and momentum, 8 B for the
scalars), an lseek BACK to the local header and a ~60-byte rewrite of it (zipfile
patching sizes/CRC), an lseek forward; then the central directory + end record, fsync,
close, rename to ckpt_step00SS.npz (1,049,844 bytes); LATEST.tmp (18 B write, fsync,
rename). From the 3rd checkpoint on, the oldest one is unlinked (2 unlinks). Two worker
processes (forked once, alive for the whole run) each openat(blobs.pack,
O_RDONLY|O_CLOEXEC) ONCE (plus the fstat of open()) and then issue only
lseek(fd, offset, SEEK_SET) + read(fd, length) pairs: 12 per micro-batch, offsets
ascending within a micro-batch, random across micro-batches, lengths 12.9-48.4 KB
(exact blob lengths, never the padding), ~1200 pairs per worker. Worker pids alternate
by micro-batch (the other reads/writes they make are on queue pipes). 2400 blob reads,
66.7 MB read over the run; no data file is reopened.

Usage: csv_index_packed_blobs_procs_accum_savez.py DATA [--make | --truth]
numpy only (standard-library multiprocessing, csv, zlib).
"""
import csv
import glob
import json
import multiprocessing as mp
import os
import sys
import time
import zlib

import numpy as np

N_BLOBS, N_CLASSES, ALIGN = 1200, 20, 512
MICRO, ACCUM, EPOCHS = 12, 4, 2
WORKERS, IN_FLIGHT = 2, 4
MICRO_STEPS = N_BLOBS // MICRO
OPT_STEPS = MICRO_STEPS // ACCUM
COMPUTE_MICRO_S, COMPUTE_OPT_S = 0.012, 0.008
CKPT_EVERY, KEEP = 10, 3
CROP = 56
W_SHAPE = (256, 512)
SEED = 8086


def spec():
    rng = np.random.default_rng(SEED)
    hs = rng.integers(64, 129, N_BLOBS)
    ws = rng.integers(64, 129, N_BLOBS)
    labels = rng.integers(0, N_CLASSES, N_BLOBS)
    lengths = hs * ws * 3
    offsets = np.zeros(N_BLOBS, dtype=np.int64)
    pos = 0
    for i in range(N_BLOBS):
        offsets[i] = pos
        pos += -(-int(lengths[i]) // ALIGN) * ALIGN
    return hs, ws, labels, lengths, offsets, pos


def truth(data):
    hs, ws, labels, lengths, offsets, pack_bytes = spec()
    n_opt = EPOCHS * OPT_STEPS
    return {
        "program": "csv_index_packed_blobs_procs_accum_savez", "needs": [],
        "format": "one packed binary file of raw uint8 HxWx3 blobs (512-byte aligned) + "
                  "CSV index",
        "io_library": "raw FileIO (open buffering=0): lseek + readinto, in "
                      "multiprocessing.Process workers with persistent fds",
        "data_layout": "DATA/blobs.pack + DATA/index.csv",
        "num_files": 1, "samples_per_file": N_BLOBS, "pack_bytes": int(pack_bytes),
        "sample_size": {"dist": "3*H*W, H,W uniform 64..128",
                        "min_bytes": int(lengths.min()), "max_bytes": int(lengths.max()),
                        "mean_bytes": int(lengths.mean())},
        "batch_size": MICRO, "grad_accum": ACCUM, "effective_batch": MICRO * ACCUM,
        "readers": {"kind": "multiprocessing.Process (fork) workers, one task queue each, "
                            "micro-batch j -> worker j % 2", "count": WORKERS},
        "prefetch": {"micro_batches_in_flight": IN_FLIGHT},
        "epochs": EPOCHS, "steps_per_epoch": MICRO_STEPS,
        "total_steps": EPOCHS * MICRO_STEPS, "optimizer_steps": n_opt,
        "compute_s_per_step": COMPUTE_MICRO_S, "compute_s_per_optimizer_step": COMPUTE_OPT_S,
        "shuffle": "per-epoch permutation of blob ids (numpy seed 8086 + epoch); reads "
                   "sorted by offset within each micro-batch",
        "blob_reads_total": EPOCHS * N_BLOBS,
        "bytes_read_total": int(EPOCHS * lengths.sum()),
        "eval": None,
        "checkpoint": {"every_optimizer_steps": CKPT_EVERY,
                       "steps": list(range(CKPT_EVERY, n_opt + 1, CKPT_EVERY)),
                       "keep": KEEP, "format": "np.savez (zip, stored) via .tmp + fsync + "
                       "os.replace, plus ckpt/LATEST", "writer": "main process",
                       "bytes_approx": 2 * 4 * W_SHAPE[0] * W_SHAPE[1] + 1200},
        "side_files": [{"path": "index.csv", "reads": 1, "process": "main"}],
        "read_pattern": "persistent fd per worker; lseek + exact-length read per blob, "
                        "ascending offsets within a micro-batch, random across",
    }


def make(data):
    hs, ws, labels, lengths, offsets, pack_bytes = spec()
    rng = np.random.default_rng(SEED + 1)
    os.makedirs(data, exist_ok=True)
    rows = []
    with open(os.path.join(data, "blobs.pack"), "wb") as f:
        for i in range(N_BLOBS):
            h, w = int(hs[i]), int(ws[i])
            yy, xx = np.mgrid[0:h, 0:w]
            base = 128 + 60 * np.sin(xx / (2.0 + labels[i] % 7) + yy / 9.0)
            img = np.clip(base[..., None] + rng.normal(0, 20, (h, w, 3)), 0, 255)
            raw = img.astype(np.uint8).tobytes()
            assert f.tell() == offsets[i] and len(raw) == lengths[i]
            pad = -len(raw) % ALIGN
            f.write(raw + b"\0" * pad)
            rows.append((i, int(offsets[i]), len(raw), int(labels[i]), h, w,
                         zlib.crc32(raw)))
    with open(os.path.join(data, "index.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["id", "offset", "length", "label", "height", "width", "crc32"])
        wr.writerows(rows)


def worker_main(pack_path, tasks, results):
    f = open(pack_path, "rb", buffering=0)
    buf = bytearray(128 * 128 * 3)
    mv = memoryview(buf)
    while True:
        task = tasks.get()
        if task is None:
            break
        bid, items = task
        crops, ys = [], []
        for off, ln, label, h, w, crc in sorted(items):
            f.seek(off)
            got = f.readinto(mv[:ln])
            if got != ln or zlib.crc32(mv[:ln]) != crc:
                raise IOError("bad blob at %d" % off)
            img = np.frombuffer(buf, dtype=np.uint8, count=ln).reshape(h, w, 3)
            y0, x0 = (h - CROP) // 2, (w - CROP) // 2
            crops.append(img[y0:y0 + CROP, x0:x0 + CROP].copy())
            ys.append(label)
        results.put((bid, np.stack(crops), np.array(ys)))
    f.close()


def save_ckpt(ckdir, step, epoch, weights, momentum):
    final = os.path.join(ckdir, "ckpt_step%04d.npz" % step)
    with open(final + ".tmp", "wb") as f:
        np.savez(f, weights=weights, momentum=momentum, step=np.int64(step),
                 epoch=np.int64(epoch), rng_pos=np.int64(step * MICRO * ACCUM))
        f.flush()
        os.fsync(f.fileno())
    os.replace(final + ".tmp", final)
    latest = os.path.join(ckdir, "LATEST")
    with open(latest + ".tmp", "w") as f:
        f.write(os.path.basename(final) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(latest + ".tmp", latest)
    return final


def train(data):
    with open(os.path.join(data, "index.csv"), newline="") as f:
        rows = [(int(r["offset"]), int(r["length"]), int(r["label"]), int(r["height"]),
                 int(r["width"]), int(r["crc32"])) for r in csv.DictReader(f)]
    n = len(rows)
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    for old in glob.glob(os.path.join(ckdir, "ckpt_step*")) + \
            glob.glob(os.path.join(ckdir, "LATEST*")):
        os.remove(old)
    batches = []
    for epoch in range(EPOCHS):
        perm = np.random.default_rng(SEED + epoch).permutation(n)
        batches += [(epoch, [rows[i] for i in perm[k:k + MICRO]])
                    for k in range(0, n - MICRO + 1, MICRO)]
    ctx = mp.get_context("fork")
    tasks = [ctx.Queue() for _ in range(WORKERS)]
    results = ctx.Queue()
    procs = [ctx.Process(target=worker_main, name="blob-reader-%d" % w,
                         args=(os.path.join(data, "blobs.pack"), tasks[w], results))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    rng = np.random.default_rng(SEED + 99)
    weights = rng.normal(0, 0.01, W_SHAPE).astype(np.float32)
    momentum = np.zeros(W_SHAPE, np.float32)
    grad = np.zeros(W_SHAPE, np.float32)
    submitted, ready, kept = 0, {}, []
    opt_steps = 0
    try:
        for j in range(len(batches)):
            while submitted < len(batches) and submitted < j + IN_FLIGHT:
                tasks[submitted % WORKERS].put((submitted, batches[submitted][1]))
                submitted += 1
            while j not in ready:
                bid, x, y = results.get(timeout=60)
                ready[bid] = (x, y)
            x, y = ready.pop(j)
            assert x.shape == (MICRO, CROP, CROP, 3)
            feat = x.reshape(MICRO, -1, 3).mean(axis=1) / 255.0
            np.add.at(grad[:N_CLASSES, :3], y, feat / ACCUM)
            time.sleep(COMPUTE_MICRO_S)
            if (j + 1) % ACCUM == 0:
                momentum = 0.9 * momentum + grad
                weights -= 0.01 * momentum
                grad[:] = 0
                time.sleep(COMPUTE_OPT_S)
                opt_steps += 1
                if opt_steps % CKPT_EVERY == 0:
                    kept.append(save_ckpt(ckdir, opt_steps, batches[j][0], weights,
                                          momentum))
                    while len(kept) > KEEP:
                        os.remove(kept.pop(0))
    finally:
        for q in tasks:
            q.put(None)
        for p in procs:
            p.join(timeout=10)
    print("csv_index_packed_blobs_procs_accum_savez: %d micro-batches, %d optimizer "
          "steps, checkpoints kept %s" % (len(batches), opt_steps,
                                          [os.path.basename(k) for k in kept]))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
