"""Keyword-spotting style training over a SQLite database: every sample is one row of
table `samples` (id INTEGER PRIMARY KEY, label, n_frames, feat BLOB), the BLOB holding a
float16 log-mel matrix. A torch DataLoader with 2 worker processes fetches rows by rowid in
random order; each worker opens its OWN read-only sqlite3 connection lazily on its first
sample (sqlite connections must not cross a fork), as one does with sqlite-backed datasets.

Data set (DATA/, about 61 MB):
  DATA/train.sqlite  one SQLite 3 file, page_size 8192 (set at --make), rollback-journal
                     mode, 7461 pages = 61,120,512 bytes. Table meta (3 rows: class names
                     JSON, n_mels, dtype) and table samples with 2400 rows; feat is
                     n_frames x 80 float16 (160 bytes per frame), n_frames uniform 60..240
                     (seed 4242), so blobs are 9.6-38.4 KB, mean 24 KB, 57.6 MB in all.
                     Each row keeps ~1 KB of its payload on its table-leaf page and the rest
                     in a chain of 1-4 overflow pages (mean 2.45); rows were inserted in id
                     order, so a row's overflow pages are consecutive in the file and its
                     leaf page follows them.

Training: the main process opens the database read-only (URI file:...?mode=ro), reads
table meta and the label column of all rows (SELECT label FROM samples ORDER BY id, used
for class weights) and closes it. Then DataLoader(batch_size=32, shuffle=True with a
torch.Generator seeded 4242, num_workers=2, prefetch_factor=2, non-persistent workers, fork)
with a custom collate that pads the batch to its longest utterance. Per sample the worker
runs SELECT label, n_frames, feat FROM samples WHERE id = ? and wraps the blob with
np.frombuffer. The main process sleeps 20 ms per step. 3 epochs x 75 steps = 225 steps.
No eval, no checkpoint, nothing written.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): all database
I/O is pread64 (SQLite's unix VFS never uses read/lseek on the db file), no mmap.
  Main process, once at start: openat(train.sqlite, O_RDONLY|O_NOFOLLOW|O_CLOEXEC),
  pread64(100 @ 0) (header), pread64(8192 @ 0), then the label scan: ~1590 pread64 of
  8192 bytes (13 MB) walking the table's leaf pages in ascending-but-gapped offsets
  (leaf pages sit between the overflow chains; overflow pages are NOT read for this scan),
  a couple of pread64(16 @ 24), close.
  Workers: 2 new worker processes per epoch (6 in all). Each opens train.sqlite once (its
  own fd, kept open until the worker exits at the end of the epoch), pread64(100 @ 0),
  pread64(8192 @ 0), and then per sample (each SELECT is its own read transaction):
  pread64(16 @ 24) (file change counter; also fcntl F_SETLK locks and stat() probes of
  train.sqlite-journal / -wal, outside the traced set), then the b-tree walk: root/interior
  pages (read on first use, then served from the connection's 2 MB page cache), the row's
  leaf page (usually a miss), then its overflow pages as pread64(8192) at consecutive
  ascending offsets. So ~4.5 pread64 per sample: one 16-byte + ~3.5 of 8192 bytes (about
  28 KB per sample, ~34 MB per worker per epoch), random offsets across the whole file
  from sample to sample. Each worker handles alternating batches (32 samples in a burst),
  the two workers reading concurrently, ~2 batches ahead of the consumer per worker.
  Per epoch ~2400 x 16-byte and ~8400 x 8192-byte preads (~69 MB incl. leaf pages, vs
  57.6 MB of blob payload).

Usage: sqlite_blob_rows_workers.py DATA [--make | --truth]
Needs torch (sqlite3 is stdlib).
"""
import json
import os
import sqlite3
import sys
import time

import numpy as np

N, N_MELS, MIN_FRAMES, MAX_FRAMES, N_CLASSES = 2400, 80, 60, 240, 12
BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 32, 2, 2, 3, 0.020
PAGE_SIZE = 8192
SEED = 4242


def db_path(data):
    return os.path.join(data, "train.sqlite")


def lengths():
    rng = np.random.default_rng(SEED)
    return rng.integers(MIN_FRAMES, MAX_FRAMES + 1, N)


def truth(data):
    nb = lengths() * N_MELS * 2
    steps = (N + BATCH - 1) // BATCH
    p = db_path(data)
    return {
        "program": "sqlite_blob_rows_workers", "needs": ["torch"],
        "format": "SQLite database, one row per sample, float16 features in a BLOB column",
        "io_library": "sqlite3 (stdlib) connection per DataLoader worker, SELECT by rowid",
        "data_layout": "DATA/train.sqlite (page_size 8192, tables meta + samples)",
        "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "uniform frames", "frames_min": MIN_FRAMES,
                        "frames_max": MAX_FRAMES, "bytes_per_frame": N_MELS * 2,
                        "min_bytes": int(nb.min()), "max_bytes": int(nb.max()),
                        "mean_bytes": int(nb.mean()), "total_bytes": int(nb.sum()),
                        "file_bytes": os.path.getsize(p) if os.path.exists(p) else None},
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": False, "start_method": "fork",
                    "note": "each worker opens its own read-only sqlite connection lazily on "
                            "its first sample; new workers (and connections) every epoch"},
        "prefetch": {"kind": "DataLoader prefetch_factor", "per_worker_batches": PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler permutation per epoch (torch.Generator seeded 4242)",
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "train.sqlite table meta", "reads": "once, main process"},
                       {"path": "train.sqlite column samples.label",
                        "reads": "once, main process (full table scan of leaf pages, "
                                 "class weights)"}],
        "read_pattern": "per sample: pread64(16 @ 24) change-counter check, table b-tree "
                        "lookup by rowid (interior pages cached per connection), the leaf "
                        "page, then the blob's 1-4 overflow pages as pread64(8192) at "
                        "consecutive ascending offsets (~3.5 page reads per sample); samples "
                        "in random order, whole batches per worker",
        "bytes_per_epoch": int(nb.sum()),
        "syscall_bytes_per_epoch_approx": 69_000_000,
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    p = db_path(data)
    if os.path.exists(p):
        os.remove(p)
    rng = np.random.default_rng(SEED + 1)
    con = sqlite3.connect(p)
    con.execute("PRAGMA page_size = %d" % PAGE_SIZE)
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY, label INTEGER NOT NULL, "
                "n_frames INTEGER NOT NULL, feat BLOB NOT NULL)")
    con.execute("INSERT INTO meta VALUES (?, ?)",
                ("classes", json.dumps(["kw_%02d" % k for k in range(N_CLASSES)])))
    con.execute("INSERT INTO meta VALUES (?, ?)", ("n_mels", str(N_MELS)))
    con.execute("INSERT INTO meta VALUES (?, ?)", ("dtype", "float16"))
    for i, n in enumerate(lengths()):
        feat = (rng.standard_normal((int(n), N_MELS), dtype=np.float32) * 2 - 4)
        con.execute("INSERT INTO samples VALUES (?, ?, ?, ?)",
                    (i, int(rng.integers(N_CLASSES)), int(n),
                     feat.astype(np.float16).tobytes()))
    con.commit()
    con.close()


class SqliteFeats:
    """Map-style dataset; the connection is opened lazily inside each worker process."""

    def __init__(self, path, n):
        self.path, self.n, self.conn = path, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.conn is None:
            self.conn = sqlite3.connect("file:%s?mode=ro" % self.path, uri=True)
        label, n, blob = self.conn.execute(
            "SELECT label, n_frames, feat FROM samples WHERE id = ?", (int(i),)).fetchone()
        x = np.frombuffer(blob, dtype=np.float16).reshape(n, N_MELS)
        return x, label


def collate(items):
    import torch
    longest = max(x.shape[0] for x, _ in items)
    out = np.zeros((len(items), longest, N_MELS), dtype=np.float32)
    for k, (x, _) in enumerate(items):
        out[k, :x.shape[0]] = x
    return (torch.from_numpy(out), torch.tensor([y for _, y in items]),
            torch.tensor([x.shape[0] for x, _ in items]))


def train(data):
    import torch
    from torch.utils.data import DataLoader
    p = db_path(data)
    con = sqlite3.connect("file:%s?mode=ro" % p, uri=True)
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    classes = json.loads(meta["classes"])
    labels = np.array([r[0] for r in con.execute("SELECT label FROM samples ORDER BY id")])
    con.close()
    assert len(labels) == N
    counts = np.bincount(labels, minlength=len(classes))
    weights = torch.tensor(len(labels) / (len(classes) * counts))
    g = torch.Generator()
    g.manual_seed(SEED)
    loader = DataLoader(SqliteFeats(p, N), batch_size=BATCH, shuffle=True, generator=g,
                        num_workers=WORKERS, prefetch_factor=PREFETCH, collate_fn=collate)
    t0, steps, frames = time.time(), 0, 0
    for epoch in range(EPOCHS):
        for x, y, n in loader:
            assert x.shape[0] == y.shape[0] and x.shape[2] == N_MELS
            frames += int(n.sum())
            _ = float(weights[y].mean())
            time.sleep(COMPUTE_S)
            steps += 1
    assert frames == EPOCHS * int(lengths().sum())
    print("sqlite_blob_rows_workers: %d steps, %d epochs, %.1f s"
          % (steps, EPOCHS, time.time() - t0))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
