"""kv_btree_pread.py -- an LMDB-style key/value store read by two DataLoader workers.

Many image / feature pipelines pack a whole training set into one LMDB
environment and look records up by key from DataLoader workers.  This program
reproduces that access pattern without the lmdb package: one big page-structured
file with a two-level B-tree-ish index, read exclusively with os.pread at page
offsets (LMDB would mmap the file; here the pages are fetched explicitly, the
way "lmdb with MDB_NOMEMINIT + readahead off" or a pread-based reimplementation
behaves).

Data set layout (DATA/data.kv, one file, page size 4096 bytes)
---------------------------------------------------------------
  page 0                  meta page, 4096 bytes.  struct '<8sIIIIIIQ':
                          magic b'KVBTREE1', version, page_size, n_records=2560,
                          root_page, first_leaf_page, n_leaf_pages=11,
                          value_pages; zero padded to 4096.
  pages 1 .. V            value ("overflow") pages.  Record r starts on a page
                          boundary: a 16-byte header '<IIII' (key, payload_len,
                          label, crc32) followed by payload_len bytes of opaque
                          uint8 payload; zero padded up to the next page.
                          payload_len ~ Uniform{8192 .. 40959} (seed 14001),
                          so a record is 8208 .. 40975 bytes and occupies 3..11
                          pages.
  pages V+1 .. V+11       leaf pages.  16-byte header '<HHI8x' (type=1, count,
                          next_leaf) + up to 255 entries '<IIII' (key,
                          value_page, record_len, 0); keys ascending.
                          10 full leaves of 255 entries + one with 10.
  page V+12               root (branch) page: header '<HHI8x' (type=2, count)
                          + 11 entries '<II' (first key of leaf, leaf page).
  Keys are 2560 distinct random uint32 "hashed ids", stored sorted.  The exact
  total file size (68,018,176 bytes) is printed by --truth as dataset_bytes.

Training loop
-------------
  Main process: KVDataset.__init__ opens the file, preads the meta page and the
  root page, walks the 11 leaf pages with one pread each (a cursor scan that
  collects the key list), and closes the file.  Sample i is the i-th key.
  DataLoader(batch_size=32, shuffle=True with torch.Generator seeded 1234,
  num_workers=2, prefetch_factor=2, persistent_workers=False, drop_last=False).
  2560 / 32 = 80 steps per epoch, 3 epochs = 240 steps, each followed by
  time.sleep(0.015) of simulated compute.  Each worker opens the file lazily on
  its first __getitem__ (the fd of the main process is never inherited), reads
  the meta page and root page, then for every sample:
      pread(fd, 4096, leaf_page*4096)          -> leaf page
      pread(fd, record_len, value_page*4096)   -> 16-byte header + payload
  and turns the payload into a 256-bin byte histogram (float32[256]).  Workers
  are re-created every epoch (persistent_workers=False), so each epoch starts
  with two fresh opens.  No leaf cache: every lookup re-reads its leaf page.

What a syscall trace sees (strace -f, data file only)
-----------------------------------------------------
  Start-up (main pid):  openat(data.kv, O_RDONLY|O_CLOEXEC) ; pread64 4096 @0 ;
      pread64 4096 @root ; 11 x pread64 4096 @leaf pages in page order ; close.
  Per epoch, in each of the 2 worker pids:  openat(data.kv) ; pread64 4096 @0 ;
      pread64 4096 @root_page*4096 ; then per sample two pread64 calls:
      4096 bytes at a leaf page offset (one of 11 distinct offsets near the end
      of the file) followed by record_len (8208..40975) bytes at a
      page-aligned offset in the value area.  Worker w serves batches
      w, w+2, w+4, ... so each worker does 40 batches = 1280 samples per epoch.
      No close: the fd dies with the worker at the end of the epoch.
  Per epoch: 2 openat, 4 + 2*2560 = 5124 pread64 calls, bytes =
      2*8192 + 2560*4096 + sum(record_len) (about 73.2 MB, exact value in
      --truth).  No read/lseek/mmap on the data file at all.
  Whole run: 1 + 6 = 7 openat of data.kv, 13 + 3*5124 = 15385 pread64.
  Value offsets follow the seeded shuffle, so each worker's sequence of
  (size, offset) pairs is identical across runs; only the time interleaving
  of the two workers varies.  The worker <-> main-process result queue shows up as read/write on
  pipes and sockets; those are not data file accesses.  Nothing is written.
"""
import json
import os
import struct
import sys
import time
import zlib

import numpy as np

NAME = "kv_btree_pread"
SEED = 14001
PAGE = 4096
N_RECORDS = 2560
MIN_PAYLOAD, MAX_PAYLOAD = 8192, 40960
LEAF_CAP = (PAGE - 16) // 16          # 255 entries per leaf
REC_HDR = 16
BATCH = 32
WORKERS = 2
PREFETCH = 2
EPOCHS = 3
STEP_SLEEP = 0.015
META_FMT = "<8sIIIIIIQ"


def layout():
    """Deterministic record geometry, shared by --make, --truth and the reader."""
    rng = np.random.default_rng(SEED)
    keys = np.sort(rng.choice(2**32 - 1, size=N_RECORDS, replace=False)).astype(np.uint64)
    lens = rng.integers(MIN_PAYLOAD, MAX_PAYLOAD, size=N_RECORDS)
    labels = rng.integers(0, 1000, size=N_RECORDS)
    rec_len = lens + REC_HDR
    npages = (rec_len + PAGE - 1) // PAGE
    value_page = 1 + np.concatenate([[0], np.cumsum(npages)[:-1]])
    value_pages = int(npages.sum())
    n_leaf = (N_RECORDS + LEAF_CAP - 1) // LEAF_CAP
    first_leaf = 1 + value_pages
    root = first_leaf + n_leaf
    return dict(keys=keys, lens=lens, labels=labels, rec_len=rec_len,
                value_page=value_page, value_pages=value_pages, n_leaf=n_leaf,
                first_leaf=first_leaf, root=root, file_pages=root + 1)


def make(data):
    os.makedirs(data, exist_ok=True)
    L = layout()
    rng = np.random.default_rng(SEED + 1)
    path = os.path.join(data, "data.kv")
    with open(path + ".tmp", "wb") as f:
        meta = struct.pack(META_FMT, b"KVBTREE1", 1, PAGE, N_RECORDS, L["root"],
                           L["first_leaf"], L["n_leaf"], L["value_pages"])
        f.write(meta.ljust(PAGE, b"\0"))
        for r in range(N_RECORDS):
            payload = rng.bytes(int(L["lens"][r]))
            hdr = struct.pack("<IIII", int(L["keys"][r]), len(payload), int(L["labels"][r]),
                              zlib.crc32(payload))
            rec = hdr + payload
            pad = (-len(rec)) % PAGE
            f.write(rec + b"\0" * pad)
        branch = []
        for li in range(L["n_leaf"]):
            lo, hi = li * LEAF_CAP, min(N_RECORDS, (li + 1) * LEAF_CAP)
            nxt = L["first_leaf"] + li + 1 if li + 1 < L["n_leaf"] else 0
            page = bytearray(struct.pack("<HHI8x", 1, hi - lo, nxt))
            for r in range(lo, hi):
                page += struct.pack("<IIII", int(L["keys"][r]), int(L["value_page"][r]),
                                    int(L["rec_len"][r]), 0)
            f.write(bytes(page).ljust(PAGE, b"\0"))
            branch.append((int(L["keys"][lo]), L["first_leaf"] + li))
        page = bytearray(struct.pack("<HHI8x", 2, len(branch), 0))
        for k, p in branch:
            page += struct.pack("<II", k, p)
        f.write(bytes(page).ljust(PAGE, b"\0"))
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: {os.path.getsize(path)} bytes, {N_RECORDS} records")


def parse_branch(page):
    typ, cnt, _ = struct.unpack_from("<HHI", page, 0)
    assert typ == 2
    ent = np.frombuffer(page, dtype="<u4", count=2 * cnt, offset=16).reshape(cnt, 2)
    return ent[:, 0].astype(np.uint64), ent[:, 1].astype(np.int64)


def parse_leaf(page):
    typ, cnt, nxt = struct.unpack_from("<HHI", page, 0)
    assert typ == 1
    ent = np.frombuffer(page, dtype="<u4", count=4 * cnt, offset=16).reshape(cnt, 4)
    return ent, nxt


def run(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    path = os.path.join(data, "data.kv")

    class KVDataset(Dataset):
        def __init__(self, path):
            self.path = path
            self.fd = None
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            meta = struct.unpack_from(META_FMT, os.pread(fd, PAGE, 0))
            assert meta[0] == b"KVBTREE1" and meta[2] == PAGE
            self.n = meta[3]
            root = os.pread(fd, PAGE, meta[4] * PAGE)
            first_keys, leaf_pages = parse_branch(root)
            keys = []
            page_no = int(leaf_pages[0])
            while page_no:                        # cursor scan over the leaves
                ent, page_no = parse_leaf(os.pread(fd, PAGE, page_no * PAGE))
                keys.append(ent[:, 0].astype(np.uint64))
            os.close(fd)
            self.keys = np.concatenate(keys)
            assert len(self.keys) == self.n

        def _open(self):
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            meta = struct.unpack_from(META_FMT, os.pread(self.fd, PAGE, 0))
            self.branch_keys, self.branch_pages = parse_branch(
                os.pread(self.fd, PAGE, meta[4] * PAGE))

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if self.fd is None:
                self._open()
            key = self.keys[i]
            j = int(np.searchsorted(self.branch_keys, key, side="right")) - 1
            ent, _ = parse_leaf(os.pread(self.fd, PAGE, int(self.branch_pages[j]) * PAGE))
            k = int(np.searchsorted(ent[:, 0], np.uint32(key)))
            assert ent[k, 0] == key
            rec = os.pread(self.fd, int(ent[k, 2]), int(ent[k, 1]) * PAGE)
            rkey, plen, label, crc = struct.unpack_from("<IIII", rec, 0)
            payload = np.frombuffer(rec, dtype=np.uint8, offset=REC_HDR)
            hist = np.bincount(payload, minlength=256).astype(np.float32) / plen
            return torch.from_numpy(hist), int(label)

        def __getstate__(self):
            st = dict(self.__dict__)
            st["fd"] = None
            return st

    ds = KVDataset(path)
    gen = torch.Generator().manual_seed(1234)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, generator=gen,
                        num_workers=WORKERS, prefetch_factor=PREFETCH,
                        persistent_workers=False, drop_last=False)
    w = torch.zeros(256, 1000)
    t0 = time.time()
    steps = 0
    for epoch in range(EPOCHS):
        acc = 0.0
        for x, y in loader:
            logits = x @ w
            acc += float(logits.sum())
            time.sleep(STEP_SLEEP)
            steps += 1
        print(f"epoch {epoch} done, steps={steps}, t={time.time() - t0:.2f}s", flush=True)
    print(f"finished {steps} steps in {time.time() - t0:.2f}s")


def truth():
    L = layout()
    rec = L["rec_len"].astype(np.int64)
    steps_per_epoch = (N_RECORDS + BATCH - 1) // BATCH
    per_epoch_bytes = 2 * WORKERS * PAGE + N_RECORDS * PAGE + int(rec.sum())
    startup_bytes = (2 + L["n_leaf"]) * PAGE
    per_epoch_calls = 2 * WORKERS + 2 * N_RECORDS
    return {
        "program": NAME,
        "format": "single LMDB-like page file (4 KiB pages, value pages + B-tree leaf/root index pages)",
        "files": {"data.kv": L["file_pages"] * PAGE},
        "num_files": 1,
        "samples_per_file": N_RECORDS,
        "num_samples": N_RECORDS,
        "sample_size_bytes": {"what": "record = 16-byte header + payload (one pread each)",
                              "mean": float(rec.mean()), "min": int(rec.min()),
                              "max": int(rec.max()), "total_bytes": int(rec.sum())},
        "dataset_bytes": L["file_pages"] * PAGE,
        "page_size": PAGE,
        "index": {"leaf_pages": L["n_leaf"], "entries_per_leaf": LEAF_CAP, "root_pages": 1},
        "batch_size": BATCH,
        "readers": {"kind": "processes", "api": "torch DataLoader workers (fork)",
                    "count": WORKERS, "persistent": False},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "sampler": "RandomSampler (shuffle=True, torch.Generator seed 1234), batch k -> worker k%2",
        "epochs": EPOCHS,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": steps_per_epoch * EPOCHS,
        "compute_time_per_step_s": STEP_SLEEP,
        "checkpoints": None,
        "io_api": "os.pread on os.open fd (pread64)",
        "access_pattern": "random page-aligned preads: leaf page (4096) then value record per sample",
        "startup_reads": {"pread64": 2 + L["n_leaf"], "bytes": startup_bytes, "openat": 1},
        "expected_bytes_read_per_epoch": per_epoch_bytes,
        "expected_bytes_read_total": startup_bytes + EPOCHS * per_epoch_bytes,
        "expected_read_calls": {"per_epoch": {"pread64": per_epoch_calls},
                                "total": {"pread64": 2 + L["n_leaf"] + EPOCHS * per_epoch_calls}},
        "expected_open_calls": {"per_epoch": WORKERS, "total": 1 + EPOCHS * WORKERS},
        "expected_bytes_written": 0,
        "deterministic_order": True,
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
