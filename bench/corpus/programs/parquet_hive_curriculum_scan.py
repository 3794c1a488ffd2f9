"""Language-model pre-training with a data CURRICULUM over a hive-partitioned Parquet corpus
(pyarrow.dataset): epoch e trains only on partitions difficulty <= e (partition pruning:
the other directories' files are never opened), with column projection (2 of 6 columns)
and a row filter on a quality score pushed into the scan; pyarrow's scanner reads the
files with its own I/O thread pool (fragment and batch readahead). Fragment order is
shuffled per epoch; rows are repacked into fixed training batches.

Data set (DATA/corpus/, about 36.9 MB, written by pyarrow.parquet.write_table,
row_group_size 400, snappy, dictionary encoding on by default):
  difficulty=0/part-0.parquet .. part-2.parquet
  difficulty=1/part-0.parquet .. part-2.parquet
  difficulty=2/part-0.parquet .. part-2.parquet     9 files, 4.04-4.17 MB each,
  1200 rows each in 3 row groups of 400. Columns in file order: doc_id int64, source
  string (5 values), quality float32 (uniform 0..1), n_tokens int32, tokens binary (uint16
  token ids, Zipf-like; n_tokens lognormal median 1024, sigma 0.5, clipped 128..4096, so
  256 B .. 8 KiB per row, mean ~2.2 KB), text string (800-2400 random letters, never read by
  training). Per row group the column chunks are ~2.4 KB (doc_id + source), ~2.1 KB
  (quality), ~2.0 KB (n_tokens), ~700 KB (tokens), ~630 KB (text); footer ~21.5 KB.

Training (main thread + pyarrow's C++ thread pools): ds.dataset(DATA/corpus,
format="parquet", partitioning="hive") once (lists the 4 directories, infers the schema
from ONE file's footer). Epoch e keeps the fragments with difficulty <= e (3, 6, 9 files),
permutes them (numpy rng seed 1244 + e) and scans a FileSystemDataset of them with
to_batches(columns=["tokens", "n_tokens"], filter=quality >= 0.2, batch_size=512,
batch_readahead=4, fragment_readahead=2, use_threads=True); the same fragment objects are
reused across epochs, so each file's footer is parsed once. About 80% of the rows pass the
filter (2891 / 5802 / 8681 rows); the main thread repacks them into batches of 48 token
sequences (carry-over inside an epoch, remainder dropped at epoch end: 60 / 120 / 180
steps) and sleeps 12 ms per step. 3 epochs, 360 steps. No eval, no checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek; pyarrow 26): only
pread64 on the Parquet files (no read(), no lseek). Discovery (main thread): openat of
corpus/ and the 3 difficulty=K/ directories (getdents64), then difficulty=0/part-0 opened,
pread64(fd, 65536, size-65536) (the footer speculative tail read), close. Each epoch, each
selected file is opened ONCE, in the permuted order (epoch 0: 0/2, 0/1, 0/0; epoch 1: 1/0,
1/2, 0/1, 0/0, 0/2, 1/1; epoch 2: 0/2, 1/2, 2/1, 1/1, 1/0, 2/2, 0/1, 2/0, 0/0; K/k =
difficulty=K/part-k), by the main thread or a pool thread; at most ~2 files are open at a
time (fragment readahead). On a fragment's FIRST scan a pread64(65536, size-65536) footer
read (3 per epoch, one per newly admitted file; difficulty=0/part-0's footer is thus read
twice in all, at discovery and in epoch 0). Then per row group ONE coalesced pread64 of
678-740 KB covering the quality + n_tokens + tokens column chunks (pre-buffering merges
them; offsets ~2.4 KB, ~1.35 MB and ~2.7 MB into the file), the 3 of a file issued
concurrently from different I/O pool threads and not in offset order. The doc_id/source
chunks (first ~2.4 KB of each row group) and the text chunk (~630 KB, ~46% of the file) are
skipped, so a trace shows 3 large reads with ~630 KB holes between them; files of higher
difficulty are never opened before their epoch. Bytes read per epoch: 6,622,887 /
13,048,112 / 19,433,534 (12 / 21 / 30 preads; less than the raw token bytes because snappy
shrinks the Zipf-like token ids). No files are written.

Usage: parquet_hive_curriculum_scan.py DATA [--make | --truth]
needs pyarrow (run with /opt/dlio-reference/venv/bin/python).
"""
import json
import os
import sys
import time

import numpy as np

LEVELS, FILES_PER_LEVEL, ROWS_PER_FILE, ROW_GROUP = 3, 3, 1200, 400
TOK_MEDIAN, TOK_SIGMA, TOK_MIN, TOK_MAX = 1024, 0.5, 128, 4096
TEXT_MIN, TEXT_MAX = 800, 2400
BATCH, SCAN_BATCH, EPOCHS, QUALITY_MIN = 48, 512, 3, 0.2
BATCH_READAHEAD, FRAGMENT_READAHEAD = 4, 2
COMPUTE_S = 0.012
SEED = 1234
SOURCES = ["web", "books", "code", "wiki", "forums"]
COLUMNS = ["tokens", "n_tokens"]


def file_rows(level, k):
    rng = np.random.default_rng((SEED, level, k))
    n_tok = np.clip(rng.lognormal(np.log(TOK_MEDIAN), TOK_SIGMA, ROWS_PER_FILE), TOK_MIN,
                    TOK_MAX).astype(np.int32)
    quality = rng.random(ROWS_PER_FILE).astype(np.float32)
    text_len = rng.integers(TEXT_MIN, TEXT_MAX + 1, ROWS_PER_FILE)
    return rng, n_tok, quality, text_len


def epoch_files(epoch):
    files = [(lv, k) for lv in range(min(epoch, LEVELS - 1) + 1) for k in range(FILES_PER_LEVEL)]
    perm = np.random.default_rng(SEED + 10 + epoch).permutation(len(files))
    return [files[i] for i in perm]


def rel_path(level, k):
    return "corpus/difficulty=%d/part-%d.parquet" % (level, k)


def truth(data):
    kept, tok_bytes, all_tok = [], [], 0
    for e in range(EPOCHS):
        n, b = 0, 0
        for lv, k in epoch_files(e):
            _, n_tok, q, _ = file_rows(lv, k)
            m = q >= QUALITY_MIN
            n += int(m.sum())
            b += int(n_tok[m].sum()) * 2
        kept.append(n)
        tok_bytes.append(b)
    for lv in range(LEVELS):
        for k in range(FILES_PER_LEVEL):
            all_tok += int(file_rows(lv, k)[1].sum()) * 2
    steps = [n // BATCH for n in kept]
    return {
        "program": "parquet_hive_curriculum_scan", "needs": ["pyarrow"],
        "format": "Parquet (snappy), hive-partitioned by difficulty",
        "io_library": "pyarrow.dataset Scanner.to_batches (columns=, filter=, "
                      "fragment/batch readahead, pyarrow I/O thread pool)",
        "data_layout": "DATA/corpus/difficulty={0,1,2}/part-{0,1,2}.parquet, 3 row groups "
                       "of 400 rows each",
        "num_files": LEVELS * FILES_PER_LEVEL, "samples_per_file": ROWS_PER_FILE,
        "sample_size": {"distribution": "tokens: lognormal uint16 ids (median 1024, sigma "
                                        "0.5, clip 128-4096) + unread text 800-2400 B",
                        "mean_bytes": all_tok // (LEVELS * FILES_PER_LEVEL * ROWS_PER_FILE),
                        "total_bytes": all_tok},
        "batch_size": BATCH,
        "readers": {"kind": "pyarrow I/O + CPU thread pools (C++)", "count": "pool"},
        "prefetch": {"batch_readahead": BATCH_READAHEAD,
                     "fragment_readahead": FRAGMENT_READAHEAD},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": int(sum(steps)),
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "fragment (file) order permuted per epoch (seed 1244 + epoch); rows in "
                   "file order",
        "curriculum": {"epoch_%d" % e: "difficulty <= %d (%d files)" % (min(e, 2),
                                                                        len(epoch_files(e)))
                       for e in range(EPOCHS)},
        "files_per_epoch": [["%d/%d" % f for f in epoch_files(e)] for e in range(EPOCHS)],
        "rows_kept_per_epoch": kept, "row_filter": "quality >= 0.2",
        "projection": COLUMNS,
        "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "per file per epoch: open once; footer pread(65536) on the "
                        "fragment's first scan; one coalesced pread (678-740 KB) per row "
                        "group covering quality+n_tokens+tokens, the text column skipped",
        "preads_per_epoch": [12, 21, 30],
        "token_payload_bytes_per_epoch": tok_bytes,
        "bytes_per_epoch": [6622887, 13048112, 19433534],
    }


def make(data):
    import pyarrow as pa
    import pyarrow.parquet as pq
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     etaoin", dtype=np.uint8)
    for lv in range(LEVELS):
        d = os.path.join(data, "corpus", "difficulty=%d" % lv)
        os.makedirs(d, exist_ok=True)
        for k in range(FILES_PER_LEVEL):
            rng, n_tok, quality, text_len = file_rows(lv, k)
            toks = [rng.zipf(1.3, n).clip(0, 50256).astype("<u2").tobytes() for n in n_tok]
            text = [letters[rng.integers(0, len(letters), n)].tobytes().decode()
                    for n in text_len]
            table = pa.table({
                "doc_id": pa.array(np.arange(ROWS_PER_FILE) + (lv * 10 + k) * 10 ** 6,
                                   pa.int64()),
                "source": pa.array([SOURCES[i] for i in rng.integers(0, 5, ROWS_PER_FILE)]),
                "quality": pa.array(quality, pa.float32()),
                "n_tokens": pa.array(n_tok, pa.int32()),
                "tokens": pa.array(toks, pa.binary()),
                "text": pa.array(text, pa.string()),
            })
            pq.write_table(table, os.path.join(d, "part-%d.parquet" % k),
                           row_group_size=ROW_GROUP, compression="snappy")


def train(data):
    import pyarrow.dataset as ds
    root = os.path.join(data, "corpus")
    dataset = ds.dataset(root, format="parquet", partitioning="hive")
    by_name = {}
    for frag in dataset.get_fragments():
        rel = os.path.relpath(frag.path, data)
        by_name[rel] = frag
    steps, rows, carry = 0, 0, []
    for epoch in range(EPOCHS):
        frags = [by_name[rel_path(lv, k)] for lv, k in epoch_files(epoch)]
        sub = ds.FileSystemDataset(frags, dataset.schema, dataset.format,
                                   filesystem=dataset.filesystem)
        scan = sub.to_batches(columns=COLUMNS, filter=ds.field("quality") >= QUALITY_MIN,
                              batch_size=SCAN_BATCH, batch_readahead=BATCH_READAHEAD,
                              fragment_readahead=FRAGMENT_READAHEAD, use_threads=True)
        carry = []
        for rb in scan:
            toks = rb.column(0).to_pylist()
            n_tok = rb.column(1).to_numpy()
            assert all(len(t) == 2 * n for t, n in zip(toks, n_tok))
            carry.extend(toks)
            while len(carry) >= BATCH:
                batch, carry = carry[:BATCH], carry[BATCH:]
                x = np.zeros((BATCH, 1024), dtype=np.uint16)
                for j, t in enumerate(batch):
                    a = np.frombuffer(t, dtype="<u2")[:1024]
                    x[j, :len(a)] = a
                time.sleep(COMPUTE_S)
                steps += 1
                rows += BATCH
    print("parquet_hive_curriculum_scan: %d steps, %d rows, %d epochs" % (steps, rows, EPOCHS))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
