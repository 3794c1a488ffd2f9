"""Image classification from a Python shelve database (pickled sample dicts in a dbm.dumb
key-value store, as legacy preprocessing scripts write when no gdbm is available), read BY
KEY in a random order by a 3-thread pool; an evaluation pass over a second shelve (the val
split) after every epoch, read in key order on the main thread.

Data set (DATA/, about 26.1 MB):
  DATA/train.dat, train.dir, train.bak   a dbm.dumb store of 1200 keys "train/00000" ..
                                          "train/01199" (written by shelve through
                                          dbm.dumb.open(..., "n")): train.dat (22.3 MB)
                                          holds the pickled values back to back, each
                                          starting at a 512-byte-aligned offset (zero
                                          padding in between); train.dir (38.8 KB) is the
                                          text index, one line "'train/00017', (OFFSET,
                                          LENGTH)" per key; train.bak is dbm.dumb's copy
                                          of the index.
  DATA/val.dat, val.dir, val.bak         the same for 200 keys "val/00000" .. "val/00199"
                                          (val.dat 3.71 MB).
  A value is pickle (shelve's protocol, 4 in 3.11) of {"jpeg": bytes, "label": int,
  "h": int, "w": int, "src": str}; the "jpeg" blob is b"\\xff\\xd8" + random bytes of
  lognormal length (median 16 KiB, sigma 0.5, clipped to 3-96 KiB), so values (pickles) are
  3,241-71,538 bytes (mean 18,335; 22.0 MB of values in train.dat).

Training: shelve.open(DATA/train, "r") once (dbm.whichdb picks dbm.dumb, which reads the
whole .dir index into a dict), the key list sorted. Each epoch the 1200 keys are permuted
(numpy rng seeded 606 + epoch) and cut into batches of 24 (50 steps); a
ThreadPoolExecutor(3), created once, maps load(key) = shelf[key] over the batch (dbm.dumb
__getitem__: open the .dat file, seek to the value's offset, read exactly LENGTH bytes,
close; then unpickle), the "decode" is a checksum of the blob. The main thread keeps one
batch in flight ahead (batch k+1 is submitted before batch k is consumed) and sleeps 14 ms
per step. After each epoch: shelve.open(DATA/val, "r"), its 200 keys in sorted order, read
on the main thread in batches of 50 (4 eval steps, 5 ms each), closed. 3 epochs, 150 train
steps. No checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,preadv,readv,lseek):
one process; the main thread plus 3 pool threads (created on the first batch, reused to
the end). Opening the train shelf (main thread): dbm.whichdb probes train.pag and train.db
(openat -> ENOENT), opens train.dir and reads 4096 bytes (it wants 1), close; dbm.dumb
then opens train.dat in text mode just to check it exists (openat + lseek(0, SEEK_CUR), no
read, close), and reads the whole train.dir index: openat, lseek, read(8192) x 5 (the last
6019 bytes) + read(8192) = 0, close (38,787 bytes). Then every sample is a NEW open of
train.dat, on whichever pool thread runs it: openat(train.dat, O_RDONLY|O_CLOEXEC),
lseek(fd, 0, SEEK_CUR), lseek(fd, OFFSET, SEEK_SET) (a multiple of 512), then Python's
buffered read(LENGTH): one read of LENGTH rounded DOWN to a multiple of 4096 straight into
the result, plus one read(4096) for the remainder (it fills the 4 KiB buffer, reading past
the value into the zero padding / next value), close. So 2 reads per sample (1 when the
value is shorter than 4096 or a multiple of it: 2 of the 1200), requested sizes 4096 to
69632 (mostly 4096 + 8192..24576), at 512-aligned random offsets; 1 open + 2 lseeks + 2
reads per sample, no pread. Per epoch 1200 opens, ~2398 reads, 24.45 MB read for 22.0 MB
of values (~11% over-read from the 4 KiB tail reads). The 3 threads share each batch
unevenly (they pull tasks from one queue; ~1000-1500 samples each over the run). One
batch is always in flight: a burst of 24 open/read cycles per 14 ms step, 2 batches at
the epoch start. Eval (main thread, after each epoch): the same whichdb probes + val.dir
reads (4096 probe, then 8192 + 0), the val.dat existence open, then 200 per-key cycles
in sorted key order, which is ascending file order (offsets increase, 2 reads each;
4.09 MB read per eval from the 3.71 MB val.dat). Totals: 3601 opens of train.dat,
7194 reads, 73.3 MB; 603 opens of val.dat, 1197 reads, 12.3 MB. No writes.

Usage: shelve_dumbdbm_threads.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import dbm.dumb
import json
import os
import shelve
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N_TRAIN, N_VAL, N_CLASSES = 1200, 200, 20
BLOB_MEDIAN, BLOB_SIGMA, BLOB_MIN, BLOB_MAX = 16 * 1024, 0.5, 3 * 1024, 96 * 1024
BATCH, VAL_BATCH, EPOCHS, THREADS = 24, 50, 3, 3
COMPUTE_S, EVAL_S = 0.014, 0.005
SEED = 606


def split_meta(split):
    n = N_TRAIN if split == "train" else N_VAL
    rng = np.random.default_rng((SEED, 0 if split == "train" else 1))
    sizes = np.clip(rng.lognormal(np.log(BLOB_MEDIAN), BLOB_SIGMA, n), BLOB_MIN,
                    BLOB_MAX).astype(np.int64)
    labels = rng.integers(0, N_CLASSES, n)
    hw = rng.choice([96, 128, 160], size=(n, 2))
    return sizes, labels, hw


def keys_of(split):
    return ["%s/%05d" % (split, i) for i in range(N_TRAIN if split == "train" else N_VAL)]


def epoch_order(epoch):
    return np.random.default_rng(SEED + epoch).permutation(N_TRAIN)


def truth(data):
    out = {}
    for split in ("train", "val"):
        dat = os.path.join(data, split + ".dat")
        out[split] = (os.path.getsize(dat) if os.path.exists(dat)
                      else {"train": 22318844, "val": 3711313}[split])
    sizes, _, _ = split_meta("train")
    vsizes, _, _ = split_meta("val")
    steps = N_TRAIN // BATCH
    return {
        "program": "shelve_dumbdbm_threads", "needs": [],
        "format": "shelve (pickle) values in a dbm.dumb key-value store (.dat values "
                  "512-byte aligned + .dir text index)",
        "io_library": "shelve.open -> dbm.dumb __getitem__ (open .dat, seek, read(len), "
                      "close per key)",
        "data_layout": "DATA/train.{dat,dir,bak} (1200 keys), DATA/val.{dat,dir,bak} "
                       "(200 keys)",
        "num_files": 1, "samples_per_file": N_TRAIN,
        "sample_size": {"distribution": "pickled dict around a lognormal blob (median "
                                        "16 KiB, sigma 0.5, clip 3-96 KiB)",
                        "blob_mean_bytes": int(sizes.mean()),
                        "blob_min_bytes": int(sizes.min()),
                        "blob_max_bytes": int(sizes.max()),
                        "value_mean_bytes": 18335, "value_min_bytes": 3241,
                        "value_max_bytes": 71538,
                        "dat_file_bytes": out["train"]},
        "batch_size": BATCH,
        "readers": {"kind": "ThreadPoolExecutor threads", "count": THREADS},
        "prefetch": {"batches_ahead": 1},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "key permutation per epoch (numpy seed 606 + epoch)",
        "eval": {"when": "after every epoch", "store": "DATA/val", "samples": N_VAL,
                 "batch_size": VAL_BATCH, "steps": N_VAL // VAL_BATCH, "order": "sorted keys",
                 "thread": "main", "compute_s_per_step": EVAL_S,
                 "dat_file_bytes": out["val"], "blob_mean_bytes": int(vsizes.mean())},
        "checkpoint": None,
        "side_files": [{"path": "train.dir", "reads": "once (whole index)"},
                       {"path": "val.dir", "reads": "once per eval"}],
        "read_pattern": "per sample: openat(train.dat), lseek(offset), buffered read of the "
                        "value (2 read syscalls), close; random 512-aligned offsets",
        "opens_per_sample": 1,
        "bytes_per_epoch": 22002018,
        "syscall_read_bytes_per_epoch": 24448252,
        "reads_per_sample": "2 (LENGTH rounded down to 4 KiB + one 4096 tail read)",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED + 100)
    for split in ("train", "val"):
        sizes, labels, hw = split_meta(split)
        base = os.path.join(data, split)
        for ext in (".dat", ".dir", ".bak"):
            if os.path.exists(base + ext):
                os.remove(base + ext)
        db = shelve.Shelf(dbm.dumb.open(base, "n"))
        for i, key in enumerate(keys_of(split)):
            blob = b"\xff\xd8" + rng.bytes(int(sizes[i]) - 2)
            db[key] = {"jpeg": blob, "label": int(labels[i]), "h": int(hw[i, 0]),
                       "w": int(hw[i, 1]), "src": "cam%d" % (i % 7)}
        db.close()


def decode(rec):
    blob = rec["jpeg"]
    assert blob[:2] == b"\xff\xd8"
    return zlib.adler32(blob[:4096]) + len(blob), rec["label"]


def train(data):
    shelf = shelve.open(os.path.join(data, "train"), "r")
    keys = sorted(shelf.keys())
    assert len(keys) == N_TRAIN

    def load(key):
        return decode(shelf[key])

    steps, acc, nval = 0, 0, 0
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for epoch in range(EPOCHS):
            order = epoch_order(epoch)
            batches = [[keys[j] for j in order[s:s + BATCH]]
                       for s in range(0, N_TRAIN, BATCH)]
            pending = pool.map(load, batches[0])
            for i in range(len(batches)):
                nxt = pool.map(load, batches[i + 1]) if i + 1 < len(batches) else None
                res = list(pending)
                acc += sum(r[0] for r in res)
                labels = np.array([r[1] for r in res])
                assert len(labels) == BATCH
                time.sleep(COMPUTE_S)
                steps += 1
                pending = nxt
            val = shelve.open(os.path.join(data, "val"), "r")
            vkeys = sorted(val.keys())
            for s in range(0, len(vkeys), VAL_BATCH):
                res = [decode(val[k]) for k in vkeys[s:s + VAL_BATCH]]
                nval += len(res)
                time.sleep(EVAL_S)
            val.close()
    shelf.close()
    print("shelve_dumbdbm_threads: %d steps, %d epochs, %d val samples, checksum %d"
          % (steps, EPOCHS, nval, acc))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
