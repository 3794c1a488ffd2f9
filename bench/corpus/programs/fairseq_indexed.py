"""fairseq_indexed.py -- fairseq-style IndexedDataset (.idx/.bin) with token-budget batches.

Language-model / translation jobs built on fairseq's legacy "cached=False"
IndexedDataset keep every split as two files: a small .idx file with offset
tables and a .bin file with all documents' token ids back to back.  The .idx
is read once at start-up with buffered reads; the .bin is opened with
open(path, 'rb', buffering=0) and every document is fetched by
seek(data_offsets[i] * element_size) + readinto(np.empty(n, uint16)).
Batches are built the fairseq way ("batch_by_size"): indices ordered by length
(random tie-break), packed greedily under a max_tokens budget counted with
padding, and the list of batches is reshuffled every epoch.

Data set layout (DATA/)
-----------------------
  train.idx / train.bin   6144 documents, valid.idx / valid.bin  512 documents.
  .idx (little endian):  b'TNTIDX\\0\\0' | uint64 version=1 | uint64 dtype code=8
      (uint16), uint64 element_size=2 | uint64 len, uint64 s=len |
      int64 dim_offsets[len+1] | int64 data_offsets[len+1] (in elements) |
      int64 sizes[len].  48-byte header, so train.idx = 48 + 8*(3*6144+2) =
      147,520 bytes and valid.idx = 48 + 8*(3*512+2) = 12,352 bytes.
  .bin: uint16 token ids, document i occupies bytes
      [2*data_offsets[i], 2*data_offsets[i+1]).
  Document lengths ~ round(lognormal(log 2500, 0.7)) clipped to [32, 16384]
  tokens (seed 14004), i.e. at most 64 .. 32768 bytes (observed 402 .. 32768);
  mean 3,171 tokens = 6,341 bytes.  train.bin is 38,997,560 bytes, valid.bin
  3,208,234 bytes.  154 train batches (2 .. 189 documents, mean 39.9) and 14
  validation batches per epoch.

Training loop
-------------
  Start-up: load train.idx and valid.idx.  Batches: max_tokens = 131072,
  max(len) * n_docs <= max_tokens, built once from a seeded length-sort.
  2 epochs; each epoch shuffles the train batch list with
  np.random.RandomState(14004 + epoch), and for each batch reads its documents
  (ascending length order within the batch), pads them into an int64 matrix,
  and sleeps 0.012 s of simulated compute.  After each epoch a validation pass
  reads valid.bin batches in index order (no shuffle) with 0.004 s per batch.
  Single process, main thread only, no prefetch.

What a syscall trace sees (strace, data files only)
---------------------------------------------------
  Start-up, buffered reads of the .idx files (4096-byte BufferedReader):
      train.idx: openat, lseek(fd,0,SEEK_CUR), read 4096 (buffer fill that
        serves the 48-byte header and the first 4048 bytes of dim_offsets),
        read 45112 (rest of dim_offsets, straight into the array),
        read 49160 (data_offsets), read 49152 (sizes), close.
      valid.idx: openat, lseek(fd,0,SEEK_CUR), read 4096, read 4096,
        read 4096, read 64 (tables smaller than the buffer go through it),
        close.  Each .idx is read exactly once (147,520 + 12,352 bytes).
      openat(X.bin, O_RDONLY|O_CLOEXEC) happens lazily on the first document
      access of that split and stays open for the whole run (no close).
  Per document: lseek(bin_fd, 2*data_offsets[i], SEEK_SET) then
      read(bin_fd, 2*len_i) -- exactly one unbuffered read of 64..32768 bytes.
  Per train step: one lseek+read pair per document in the batch
      (from 4 docs for long ones up to 100+ for short ones), offsets scattered
      over the whole train.bin; per epoch every train document exactly once
      (6144 lseek + 6144 read, bytes = train.bin size) and every valid document
      once in ascending-offset order within each size-sorted batch (512 + 512).
  Whole run: 2 x (train.bin + valid.bin) = 84,411,588 bytes in 13,312
  lseek+read pairs on the .bin files, plus 8 reads / 159,872 bytes of .idx:
  84,571,460 bytes, 13,320 read, 13,314 lseek, 4 openat.  The .bin fds are
  closed only at interpreter exit.  Nothing is written.
"""
import json
import os
import struct
import sys
import time

import numpy as np

NAME = "fairseq_indexed"
SEED = 14004
N_TRAIN, N_VALID = 6144, 512
MAX_TOKENS = 131072
EPOCHS = 2
STEP_SLEEP = 0.012
VALID_SLEEP = 0.004
DTYPE_CODE = 8  # uint16 in fairseq's code table


def doc_lengths(split):
    n = N_TRAIN if split == "train" else N_VALID
    rng = np.random.default_rng([SEED, 0 if split == "train" else 1])
    L = np.round(rng.lognormal(np.log(2500), 0.7, size=n)).astype(np.int64)
    return np.clip(L, 32, 16384)


def idx_size(n):
    return 48 + 8 * (3 * n + 2)


def batch_by_size(sizes, seed):
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(sizes))
    order = order[np.argsort(sizes[order], kind="mergesort")]
    batches, cur, cur_max = [], [], 0
    for i in order:
        m = max(cur_max, int(sizes[i]))
        if cur and m * (len(cur) + 1) > MAX_TOKENS:
            batches.append(np.array(cur))
            cur, m = [], int(sizes[i])
        cur.append(int(i))
        cur_max = m
    if cur:
        batches.append(np.array(cur))
    return batches


def make(data):
    os.makedirs(data, exist_ok=True)
    for split in ("train", "valid"):
        L = doc_lengths(split)
        rng = np.random.default_rng([SEED, 7, len(L)])
        n = len(L)
        data_offsets = np.concatenate([[0], np.cumsum(L)]).astype(np.int64)
        dim_offsets = np.arange(n + 1, dtype=np.int64)
        with open(os.path.join(data, split + ".bin"), "wb") as f:
            for ln in L:
                f.write(rng.integers(4, 50000, size=int(ln), dtype=np.uint16).tobytes())
        with open(os.path.join(data, split + ".idx"), "wb") as f:
            f.write(b"TNTIDX\x00\x00")
            f.write(struct.pack("<Q", 1))
            f.write(struct.pack("<QQ", DTYPE_CODE, 2))
            f.write(struct.pack("<QQ", n, n))
            f.write(dim_offsets.tobytes())
            f.write(data_offsets.tobytes())
            f.write(L.astype(np.int64).tobytes())
    print(f"wrote train/valid .idx/.bin to {data}")


class IndexedDataset:
    """Mirror of fairseq.data.indexed_dataset.IndexedDataset (uncached)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.data_file = None
        self.read_index(prefix + ".idx")

    @staticmethod
    def read_longs(f, n):
        a = np.empty(n, dtype=np.int64)
        f.readinto(a)
        return a

    def read_index(self, path):
        with open(path, "rb") as f:
            magic = f.read(8)
            assert magic == b"TNTIDX\x00\x00", "bad magic"
            (version,) = struct.unpack("<Q", f.read(8))
            assert version == 1
            code, self.element_size = struct.unpack("<QQ", f.read(16))
            assert code == DTYPE_CODE
            self._len, self.s = struct.unpack("<QQ", f.read(16))
            self.dim_offsets = self.read_longs(f, self._len + 1)
            self.data_offsets = self.read_longs(f, self._len + 1)
            self.sizes = self.read_longs(f, self.s)

    def read_data(self):
        self.data_file = open(self.prefix + ".bin", "rb", buffering=0)

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        if not self.data_file:
            self.read_data()
        tensor_size = self.sizes[self.dim_offsets[i]:self.dim_offsets[i + 1]]
        a = np.empty(tensor_size, dtype=np.uint16)
        self.data_file.seek(self.data_offsets[i] * self.element_size)
        self.data_file.readinto(a)
        return a


def collate(docs):
    out = np.zeros((len(docs), max(len(d) for d in docs)), dtype=np.int64)
    for r, d in enumerate(docs):
        out[r, :len(d)] = d
    return out


def run(data):
    train = IndexedDataset(os.path.join(data, "train"))
    valid = IndexedDataset(os.path.join(data, "valid"))
    train_batches = batch_by_size(train.sizes, SEED)
    valid_batches = batch_by_size(valid.sizes, SEED + 100)
    valid_batches.sort(key=lambda b: int(b.min()))
    emb = np.random.default_rng(0).standard_normal((50000, 8)).astype(np.float32)
    t0 = time.time()
    steps = 0
    for epoch in range(EPOCHS):
        order = list(range(len(train_batches)))
        np.random.RandomState(SEED + epoch).shuffle(order)
        ntok = 0
        for b in order:
            x = collate([train[int(i)] for i in train_batches[b]])
            ntok += int((x > 0).sum())
            _ = emb[x[:, :64]].sum()
            time.sleep(STEP_SLEEP)
            steps += 1
        vtok = 0
        for b in valid_batches:
            x = collate([valid[int(i)] for i in np.sort(b)])
            vtok += int((x > 0).sum())
            time.sleep(VALID_SLEEP)
        print(f"epoch {epoch}: steps={steps} train_tokens={ntok} valid_tokens={vtok} "
              f"t={time.time() - t0:.2f}s", flush=True)
    print(f"finished {steps} steps in {time.time() - t0:.2f}s")


def truth():
    Lt, Lv = doc_lengths("train"), doc_lengths("valid")
    tb = batch_by_size(Lt, SEED)
    vb = batch_by_size(Lv, SEED + 100)
    docb = np.concatenate([Lt, Lv]) * 2
    train_bin, valid_bin = int(Lt.sum() * 2), int(Lv.sum() * 2)
    files = {"train.idx": idx_size(N_TRAIN), "train.bin": train_bin,
             "valid.idx": idx_size(N_VALID), "valid.bin": valid_bin}
    per_epoch = train_bin + valid_bin
    bsz = np.array([len(b) for b in tb])
    return {
        "program": NAME,
        "format": "fairseq legacy IndexedDataset (TNTIDX .idx offset tables + raw uint16 .bin)",
        "files": files,
        "num_files": 4,
        "samples_per_file": {"train.bin": N_TRAIN, "valid.bin": N_VALID},
        "num_samples": {"train": N_TRAIN, "valid": N_VALID},
        "sample_size_bytes": {"what": "one document (uint16 tokens)", "mean": float(docb.mean()),
                              "min": int(docb.min()), "max": int(docb.max()),
                              "total_bytes": int(docb.sum())},
        "dataset_bytes": sum(files.values()),
        "batch_size": {"kind": "token budget", "max_tokens": MAX_TOKENS,
                       "docs_per_batch_mean": float(bsz.mean()), "min": int(bsz.min()),
                       "max": int(bsz.max())},
        "readers": {"kind": "main thread", "count": 1},
        "prefetch": None,
        "sampler": "fairseq batch_by_size (seeded length sort), batch list shuffled per epoch "
                   "with RandomState(14004+epoch); validation in fixed order",
        "epochs": EPOCHS,
        "steps_per_epoch": len(tb),
        "valid_batches_per_epoch": len(vb),
        "total_steps": len(tb) * EPOCHS,
        "compute_time_per_step_s": STEP_SLEEP,
        "compute_time_per_valid_batch_s": VALID_SLEEP,
        "checkpoints": None,
        "io_api": ".bin: open(rb, buffering=0) + seek + readinto per document; "
                  ".idx: buffered open + read/readinto",
        "expected_bytes_read_per_epoch": per_epoch,
        "expected_bytes_read_total": EPOCHS * per_epoch + idx_size(N_TRAIN) + idx_size(N_VALID),
        "expected_read_calls": {
            "per_epoch": {"read": N_TRAIN + N_VALID, "lseek": N_TRAIN + N_VALID},
            "total": {"bin_reads": EPOCHS * (N_TRAIN + N_VALID),
                      "bin_lseeks": EPOCHS * (N_TRAIN + N_VALID),
                      "idx_reads": 8, "idx_lseeks": 2,
                      "openat": 4}},
        "expected_bytes_written": 0,
        "deterministic_order": True,
        "needs": [],
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
