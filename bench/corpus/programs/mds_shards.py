"""mds_shards.py -- MosaicML-StreamingDataset-style MDS shards read by an IterableDataset.

A local (already downloaded) StreamingDataset cache: an index.json that lists
the shards, and binary .mds shards that start with a sample-offset table.  The
reader copies the real `MDSReader.get_sample_data` idiom: for every single
sample it opens the shard unbuffered (open(path, 'rb', 0)), seeks to the
offset-table slot, reads the 8-byte (begin, end) pair, seeks to `begin` and
reads the sample.  Shards are split across DataLoader workers with
get_worker_info() after an epoch-level seeded shard shuffle.

Data set layout (DATA/)
-----------------------
  index.json               {"version": 2, "shards": [...]} one entry per shard
                           with basename, samples, raw_data.bytes, column
                           names/encodings (5034 bytes; exact size in --truth).
  shard.00000.mds .. shard.00015.mds   16 shards x 256 samples = 4096 samples.
      shard header:  uint32 n = 256, then n+1 uint32 absolute offsets
                     (offset[0] = 4 + 4*257 = 1032) -> 1032-byte header.
      sample:        uint32 size of the variable column (4*L), L int32 tokens,
                     int64 label  ->  12 + 4*L bytes.
      L ~ Uniform{512 .. 4095} (seed 14002) so a sample is 2060 .. 16392 bytes,
      mean 9028 bytes; a shard is about 2.3 MB; 36,996,816 bytes of shards in total.

Training loop
-------------
  The main process reads index.json once.  For epoch e it calls
  dataset.set_epoch(e) and iterates a fresh DataLoader(batch_size=32,
  num_workers=2, prefetch_factor=4, persistent_workers=False).  In each worker:
  shard order = default_rng(14002 + e).permutation(16); worker w takes
  order[w::2] (8 shards), and within a shard visits the 256 samples in the
  permutation default_rng([14002, e, shard]).  Each sample becomes a fixed
  int64[512] token tensor (the first 512 tokens) plus its label.  Every worker
  yields 2048 samples = 64 full batches; the loader alternates workers, so an
  epoch is 128 steps, 2 epochs = 256 steps, each followed by
  time.sleep(0.012) of simulated compute.

What a syscall trace sees (strace -f, data files only)
------------------------------------------------------
  Start-up, main pid: openat(index.json, O_RDONLY|O_CLOEXEC), two lseek(fd, 0,
      SEEK_CUR) from the buffered text wrapper, read(fd, 5035) = 5034 (the
      whole file), read(fd, 1) = 0 at EOF, close.
  Per sample, in a worker pid (6 syscalls, strictly in this order):
      openat(shard.NNNNN.mds, O_RDONLY|O_CLOEXEC)
      lseek(fd, 4 + 4*idx, SEEK_SET)
      read(fd, 8)                      -> (begin, end) from the offset table
      lseek(fd, begin, SEEK_SET)
      read(fd, end - begin)            -> 2060 .. 16392 bytes
      close(fd)
  No pread, no mmap, no buffering: read sizes equal the requested sizes.
  Within a shard the offsets are a permutation of the 256 samples, and the two
  workers walk two disjoint sets of 8 shards concurrently.
  Per epoch: 4096 openat/close, 8192 lseek, 8192 read (4096 of 8 bytes and
      4096 of sample size), bytes = 8*4096 + sum(sample sizes) = 37,013,072.
  Whole run (2 epochs): 8192 shard opens, 16384 reads, 16384 lseeks, plus the
      2 reads of index.json.  Shard headers are never read as a block: each
      sample touches only its own 8-byte slot.  The worker -> main batch
      transfer is pipe/socket traffic, not file I/O.  Nothing is written.
  Each worker's sequence is identical from run to run; how the two workers'
  calls interleave in time is not.
"""
import json
import os
import sys
import time

import numpy as np

NAME = "mds_shards"
SEED = 14002
N_SHARDS = 16
PER_SHARD = 256
MIN_L, MAX_L = 512, 4096
SEQ = 512
BATCH = 32
WORKERS = 2
PREFETCH = 4
EPOCHS = 2
STEP_SLEEP = 0.012
HDR = 4 + 4 * (PER_SHARD + 1)


def layout():
    rng = np.random.default_rng(SEED)
    L = rng.integers(MIN_L, MAX_L, size=(N_SHARDS, PER_SHARD))
    labels = rng.integers(0, 2, size=(N_SHARDS, PER_SHARD))
    sizes = 12 + 4 * L
    return L, labels, sizes


def shard_name(s):
    return f"shard.{s:05d}.mds"


def index_doc(sizes):
    shards = []
    for s in range(N_SHARDS):
        shards.append({
            "column_encodings": ["ndarray:int32", "int"],
            "column_names": ["tokens", "label"],
            "column_sizes": [None, 8],
            "compression": None,
            "format": "mds",
            "hashes": [],
            "raw_data": {"basename": shard_name(s), "bytes": int(HDR + sizes[s].sum()), "hashes": {}},
            "samples": PER_SHARD,
            "size_limit": 1 << 26,
            "version": 2,
            "zip_data": None,
        })
    return {"shards": shards, "version": 2}


def make(data):
    os.makedirs(data, exist_ok=True)
    L, labels, sizes = layout()
    rng = np.random.default_rng(SEED + 1)
    for s in range(N_SHARDS):
        offs = HDR + np.concatenate([[0], np.cumsum(sizes[s])]).astype("<u4")
        with open(os.path.join(data, shard_name(s)), "wb") as f:
            f.write(np.uint32(PER_SHARD).tobytes())
            f.write(offs.tobytes())
            for i in range(PER_SHARD):
                toks = rng.integers(0, 50000, size=int(L[s, i]), dtype="<i4")
                f.write(np.uint32(toks.nbytes).tobytes())
                f.write(toks.tobytes())
                f.write(np.int64(labels[s, i]).tobytes())
    with open(os.path.join(data, "index.json"), "w") as f:
        json.dump(index_doc(sizes), f, sort_keys=True)
    print(f"wrote {N_SHARDS} shards, {N_SHARDS * PER_SHARD} samples to {data}")


def run(data):
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class LocalMDS(IterableDataset):
        def __init__(self, root):
            self.root = root
            with open(os.path.join(root, "index.json")) as f:
                self.index = json.load(f)
            self.shards = self.index["shards"]
            self.epoch = 0

        def set_epoch(self, e):
            self.epoch = e

        def get_sample_data(self, shard, idx):
            filename = os.path.join(self.root, self.shards[shard]["raw_data"]["basename"])
            offset = (1 + idx) * 4
            with open(filename, "rb", 0) as fp:
                fp.seek(offset)
                pair = fp.read(8)
                begin, end = np.frombuffer(pair, np.uint32)
                fp.seek(begin)
                data = fp.read(end - begin)
            return data

        @staticmethod
        def decode(data):
            (nbytes,) = np.frombuffer(data, np.uint32, count=1)
            toks = np.frombuffer(data, "<i4", count=nbytes // 4, offset=4)
            label = int(np.frombuffer(data, "<i8", count=1, offset=4 + nbytes)[0])
            return toks, label

        def __iter__(self):
            wi = get_worker_info()
            wid, nw = (wi.id, wi.num_workers) if wi is not None else (0, 1)
            order = np.random.default_rng(SEED + self.epoch).permutation(len(self.shards))
            for shard in order[wid::nw]:
                for idx in np.random.default_rng([SEED, self.epoch, int(shard)]).permutation(
                        self.shards[shard]["samples"]):
                    toks, label = self.decode(self.get_sample_data(int(shard), int(idx)))
                    yield torch.from_numpy(toks[:SEQ].astype(np.int64)), label

    ds = LocalMDS(data)
    emb = torch.randn(50000, 16)
    t0 = time.time()
    steps = 0
    for epoch in range(EPOCHS):
        ds.set_epoch(epoch)
        loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS,
                            prefetch_factor=PREFETCH, persistent_workers=False)
        tot = 0.0
        for toks, labels in loader:
            tot += float(emb[toks].mean())
            time.sleep(STEP_SLEEP)
            steps += 1
        print(f"epoch {epoch}: steps={steps} t={time.time() - t0:.2f}s", flush=True)
    print(f"finished {steps} steps in {time.time() - t0:.2f}s")


def truth():
    L, labels, sizes = layout()
    n = N_SHARDS * PER_SHARD
    idx_bytes = len(json.dumps(index_doc(sizes), sort_keys=True))
    shard_bytes = {shard_name(s): int(HDR + sizes[s].sum()) for s in range(N_SHARDS)}
    per_epoch_bytes = 8 * n + int(sizes.sum())
    spe = (n // WORKERS // BATCH) * WORKERS
    return {
        "program": NAME,
        "format": "MosaicML MDS shards (uint32 count + uint32 offset table header) + index.json",
        "files": dict({"index.json": idx_bytes}, **shard_bytes),
        "num_files": N_SHARDS + 1,
        "num_shards": N_SHARDS,
        "samples_per_file": PER_SHARD,
        "num_samples": n,
        "shard_header_bytes": HDR,
        "sample_size_bytes": {"mean": float(sizes.mean()), "min": int(sizes.min()),
                              "max": int(sizes.max()), "total_bytes": int(sizes.sum())},
        "dataset_bytes": idx_bytes + sum(shard_bytes.values()),
        "batch_size": BATCH,
        "readers": {"kind": "processes", "api": "torch DataLoader workers over IterableDataset",
                    "count": WORKERS, "persistent": False,
                    "split": "shards partitioned by get_worker_info: order[w::2]"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "sampler": "epoch-seeded shard permutation, per-shard seeded sample permutation",
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": spe * EPOCHS,
        "compute_time_per_step_s": STEP_SLEEP,
        "checkpoints": None,
        "io_api": "open(path,'rb',0) per sample; seek+read(8) offset pair; seek+read(sample)",
        "per_sample_syscalls": ["openat", "lseek", "read 8", "lseek", "read sample", "close"],
        "expected_bytes_read_per_epoch": per_epoch_bytes,
        "expected_bytes_read_total": EPOCHS * per_epoch_bytes + idx_bytes,
        "expected_read_calls": {
            "per_epoch": {"read": 2 * n, "lseek": 2 * n, "openat": n},
            "total": {"read": 2 * n * EPOCHS + 2, "lseek": 2 * n * EPOCHS + 2,
                      "openat": n * EPOCHS + 1},
            "note": "index.json: 2 lseek(SEEK_CUR) + read(size+1)=size + read(1)=0 at start"},
        "expected_bytes_written": 0,
        "deterministic_order": "per worker yes; the two workers interleave in time",
        "needs": ["torch"],
    }


def main():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} DATA [--make|--truth]")
    data = sys.argv[1]
    if "--truth" in sys.argv[2:]:
        print(json.dumps(truth(), indent=2))
    elif "--make" in sys.argv[2:]:
        make(data)
    else:
        run(data)


if __name__ == "__main__":
    main()
