"""DLRM-style click-through-rate training from a few large fixed-record binary "day" files
(Criteo-terabyte-like preprocessed layout: one 160-byte record per impression), read
BATCH-AT-A-TIME with np.fromfile(f, dtype=record, count=..., offset=...) as torchrec's
binary Criteo loader does. Shuffling is a BLOCK shuffle: each epoch permutes the order of
the fixed 4096-record blocks (= batches) across all day files, but every block itself is
one contiguous sequential read. The DataLoader runs with batch_size=None (the dataset
returns whole batches), 2 worker processes, prefetch_factor=3.

Data set (DATA/, about 48.5 MB):
  DATA/meta.json      {"record_bytes": 160, "days": [["day_0.bin", 100000], ...]}, ~100
                      bytes, read once by the main process.
  DATA/day_0.bin      100,000 records (16,000,000 bytes)
  DATA/day_1.bin       86,000 records (13,760,000 bytes)
  DATA/day_2.bin      117,000 records (18,720,000 bytes)
  record (160 bytes, little endian): int32 label, 13 x float32 dense features,
  26 x int32 categorical ids.
  Blocks: 4096 records = 655,360 bytes; each file ends with a SHORT block: day_0 24 full +
  1,696 records (271,360 bytes), day_1 20 full + 4,080 (652,800 bytes), day_2 28 full +
  2,312 (369,920 bytes): 25 + 21 + 29 = 75 blocks per epoch.

Training: the main process reads meta.json and builds the block table
[(file, first_record, n_records)]. DataLoader(BlockDataset, batch_size=None,
sampler=RandomSampler(generator seeded 5150) -> a new block permutation each epoch,
num_workers=2, persistent_workers=False (workers are re-forked each epoch),
prefetch_factor=3, fork). __getitem__(b): with open(day_file, "rb") as f:
rec = np.fromfile(f, dtype=record, count=n, offset=first_record * 160) (a NEW open per
batch); dense -> log1p, categorical ids -> id % 100003 (hashing), all to tensors. 12 ms
sleep per step (the "embedding + MLP" step). 3 epochs, 225 steps. No checkpoint, no writes.

What a syscall trace sees (strace -ff -e trace=openat,read,pread64,lseek,close,write,fstat):
the main process opens meta.json once (Python text mode: read(100) = 99, read(1) = 0) and
reads no day file. Two worker processes per epoch (6 over the run; batches alternate
between them: 38 / 37 blocks per epoch), 3 blocks in flight per worker (6 at epoch
start). Per block, in the worker (fd A = the Python file, fd B = numpy's dup):
  openat(day_D.bin, O_RDONLY|O_CLOEXEC) = A, fstat(A), ioctl(A, TCGETS), lseek(A, 0,
  SEEK_CUR)   [Python's buffered open]
  fcntl(A, F_DUPFD_CLOEXEC) = B, fcntl(B, F_GETFL), lseek(B, 0, SEEK_CUR), lseek(A, 0,
  SEEK_CUR), fstat(B)   [numpy: os.dup + fdopen(B) to get a FILE*, syncing positions]
  lseek(B, 0, SEEK_SET), lseek(B, OFFSET, SEEK_SET)   [numpy's fseek(offset, SEEK_CUR);
  OFFSET = first_record * 160, a multiple of 655,360]
  fread(n * 160) on B: glibc reads the 4 KiB-multiple part straight into the array (ONE
  read(B, 655360) for a full block) and the rest through its 4 KiB stdio buffer: the 3
  tail blocks are read(B, 270336) + read(B, 4096) -> 1024 (day_0), read(B, 651264) +
  read(B, 4096) -> 1536 (day_1), read(B, 368640) + read(B, 4096) -> 1280 (day_2)
  close(B) [fclose], lseek(A, 0, SEEK_SET), lseek(A, OFFSET + n * 160, SEEK_SET) [numpy
  moving the Python file to where the FILE* stopped], close(A).
  NOTE: all the data is read through the DUPLICATED descriptor B (made by fcntl
  F_DUPFD_CLOEXEC, with a FILE* from fdopen), never through the descriptor that openat
  returned, so a tracer must follow dup/fcntl(F_DUPFD)/fdopen to attribute the reads to
  day_D.bin; if it hooks fread it sees one fread per block on a FILE* from fdopen.
So ONE large read per block (655,360 bytes, or 2 reads for the 3 tail blocks), 7 lseeks
and 2 closes per block, each block exactly once per epoch: per epoch 75 opens, 78 reads
(72 x 655,360 + 3 tails + 3 x 4096-byte stdio refills), 48,480,000 bytes (each file read
completely once), offsets random at block granularity but sequential inside a block;
225 opens / 234 reads / 1,575 lseeks / 145,440,000 bytes over the run. Per worker
process 38 or 37 blocks (24.0-24.6 MB) per epoch. No pread, no mmap, no writes.

Usage: torch_recsys_fromfile_blocks.py DATA [--make | --truth]
needs torch (run with /opt/dlio-reference/venv/bin/python).
"""
import json
import os
import sys
import time

import numpy as np

DAYS = [("day_0.bin", 100000), ("day_1.bin", 86000), ("day_2.bin", 117000)]
N_DENSE, N_SPARSE, HASH = 13, 26, 100003
RECORD = np.dtype([("label", "<i4"), ("dense", "<f4", (N_DENSE,)),
                   ("sparse", "<i4", (N_SPARSE,))])
BLOCK, EPOCHS, WORKERS, PREFETCH = 4096, 3, 2, 3
COMPUTE_S = 0.012
SEED = 5150


def blocks():
    out = []
    for name, n in DAYS:
        for start in range(0, n, BLOCK):
            out.append((name, start, min(BLOCK, n - start)))
    return out


def truth(data):
    bl = blocks()
    rb = RECORD.itemsize
    sizes = [n * rb for _, _, n in bl]
    tails = [s for s in sizes if s != BLOCK * rb]
    reads = sum(1 + (s % 4096 != 0 and s >= 4096) for s in sizes)
    return {
        "program": "torch_recsys_fromfile_blocks", "needs": ["torch"],
        "format": "fixed 160-byte binary records (int32 label, 13 float32 dense, 26 int32 "
                  "sparse), 3 large day files + meta.json",
        "io_library": "np.fromfile(open file, dtype, count, offset) per batch (C stdio "
                      "fseek + fread on a dup of the fd) in torch DataLoader workers",
        "data_layout": "DATA/day_{0,1,2}.bin, DATA/meta.json",
        "num_files": len(DAYS), "samples_per_file": [n for _, n in DAYS],
        "file_bytes": [n * rb for _, n in DAYS],
        "sample_size": {"distribution": "fixed", "bytes": rb},
        "batch_size": BLOCK, "batch_bytes": BLOCK * rb,
        "short_tail_batches_bytes": tails,
        "readers": {"kind": "torch DataLoader worker processes (fork, not persistent), "
                            "batch_size=None (dataset returns whole batches)",
                    "count": WORKERS, "processes_over_run": WORKERS * EPOCHS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "shuffle": "block shuffle: RandomSampler over the 75 blocks (torch generator seeded "
                   "5150), contiguous read inside each block",
        "epochs": EPOCHS, "steps_per_epoch": len(bl), "total_steps": EPOCHS * len(bl),
        "compute_s_per_step": COMPUTE_S,
        "checkpoint": None,
        "side_files": [{"path": "meta.json", "reads": "once, main process"}],
        "read_pattern": "per batch: openat, lseek(offset, SEEK_SET), one read of "
                        "655,360 bytes (+1 read(4096) for the 3 short tail blocks), close; "
                        "block order random, each block once per epoch",
        "opens_per_epoch": len(bl), "reads_per_epoch": reads,
        "read_fd": "a dup of the opened fd (fcntl F_DUPFD_CLOEXEC + fdopen inside numpy)",
        "lseeks_per_batch": 7,
        "bytes_per_epoch": sum(sizes),
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for name, n in DAYS:
        rec = np.empty(n, dtype=RECORD)
        rec["label"] = (rng.random(n) < 0.035).astype(np.int32)
        rec["dense"] = np.floor(rng.lognormal(1.0, 1.5, (n, N_DENSE))).astype(np.float32)
        zipf = rng.zipf(1.3, (n, N_SPARSE)) % 5_000_000
        rec["sparse"] = (zipf * 2654435761 % 2**31).astype(np.int32)
        rec.tofile(os.path.join(data, name))
    with open(os.path.join(data, "meta.json"), "w") as f:
        json.dump({"record_bytes": RECORD.itemsize, "days": DAYS}, f)


class BlockDataset:
    def __init__(self, root, table):
        self.root, self.table = root, table

    def __len__(self):
        return len(self.table)

    def __getitem__(self, b):
        import torch
        name, first, n = self.table[b]
        with open(os.path.join(self.root, name), "rb") as f:
            rec = np.fromfile(f, dtype=RECORD, count=n, offset=first * RECORD.itemsize)
        assert len(rec) == n
        dense = torch.from_numpy(np.log1p(rec["dense"]))
        sparse = torch.from_numpy((rec["sparse"] % HASH).astype(np.int64))
        return {"dense": dense, "sparse": sparse,
                "label": torch.from_numpy(rec["label"].astype(np.float32))}


def train(data):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    with open(os.path.join(data, "meta.json")) as f:
        meta = json.load(f)
    assert meta["record_bytes"] == RECORD.itemsize
    table = []
    for name, n in meta["days"]:
        table += [(name, s, min(BLOCK, n - s)) for s in range(0, n, BLOCK)]
    ds = BlockDataset(data, table)
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(SEED))
    loader = DataLoader(ds, batch_size=None, sampler=sampler, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, multiprocessing_context="fork")
    steps, rows, clicks = 0, 0, 0.0
    for epoch in range(EPOCHS):
        for batch in loader:
            assert batch["sparse"].shape[1] == N_SPARSE
            rows += int(batch["label"].shape[0])
            clicks += float(batch["label"].sum())
            time.sleep(COMPUTE_S)
            steps += 1
    print("torch_recsys_fromfile_blocks: %d steps, %d rows, CTR %.4f"
          % (steps, rows, clicks / rows))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
