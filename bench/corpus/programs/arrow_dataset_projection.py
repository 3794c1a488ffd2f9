"""pyarrow.dataset over a directory of Parquet files with COLUMN PROJECTION: only 2 of 5
columns (the small ones) are read, streamed as record batches of 512 rows.

DATA/parquet/part-00000.parquet .. part-00003.parquet: 4 files, each 6000 rows in 3 row
groups of 2000 rows, snappy compression (random data, so nothing really compresses),
9.69-9.71 MB per file (38.8 MB in all). Columns, in file order: id int64, features
fixed_size_list<float32>[64] (256 B/row), text string (lognormal length, median 160 chars),
label int32 (10 values), embedding binary (1024 B/row). Per row group the column chunks are
(pyarrow's default writer tries dictionary encoding first, which bloats the random float
column): id 10.9 KB, features 784 KB (a ~512 KB dictionary page + plain data pages), text
375 KB, label 1.1 KB, embedding 2.06 MB; e.g. in part-00000 row group 0: features at
10865, text at 795222, label at 1170385, embedding at 1171505, row group 1's features at 3243964 ...
The training loop only asks for "features" and "label", which are NOT adjacent in the file
(text lies between them), i.e. it needs ~785 KB of each ~3.2 MB row group (~24%).

Each epoch the file list is permuted (numpy rng seeded 1618 + epoch) and a new
ds.dataset(files, format="parquet") is built and scanned with
to_batches(columns=["features", "label"], batch_size=512, batch_readahead=4,
fragment_readahead=1, use_threads=True): batches never span row groups, so each row group
gives 512, 512, 512, 464 rows -> 48 batches per epoch. The main thread turns each batch into
numpy (features 512 x 64 float32, labels) and sleeps 15 ms. 3 epochs of 48 steps, single
process, but Arrow does the reading on its own I/O thread pool (and decodes on its CPU pool).

What a syscall trace sees (strace -f -e trace=openat,read,pread64,fstat): importing pyarrow
opens its .so files (not data). Per epoch: the MAIN thread opens the first file of the
epoch's order, preads its footer (65536 bytes at file_size - 65536; the 9.4 KB footer fits
in it) to infer the dataset schema and closes it; then the scan: the first file is opened
again (main thread) and the other 3 by an Arrow thread, one after the other, each with 2
fstats; per file one footer pread of the last 65536 bytes, then for each of its 3 row groups
one pread per projected column chunk at the chunk's exact offset and size (pre_buffer: the
features chunk ~784 KB and the label chunk ~1.1 KB, not coalesced as text lies between), by
several Arrow I/O threads (different TIDs) concurrently. The id, text and embedding chunks
(~75% of the file) are never read. So per epoch 5 opens, 5 footer preads + 24 column-chunk
preads = 29 preads, ~9.7 MB of the 38.8 MB data set (87 preads, 29 MB over the run). The
readahead is far deeper than the 4 batches asked for: all 4 files of an epoch are opened and
read in a single burst of ~25 ms at the start of the epoch (pre-buffering fetches whole row
groups' projected chunks as soon as a file is opened), then no I/O at all during the rest of
the epoch (~0.7 s of 15 ms steps); each file stays open until the epoch's scan ends. No
plain read() of the data, no writes.

Usage: arrow_dataset_projection.py DATA [--make | --truth]
Fixed by the program: 4 parquet files x 3 row groups x 2000 rows, 2 of 5 columns read,
record batches of 512 rows (4 per row group, the last 464), Arrow I/O threads, readahead 4
batches / 1 fragment requested (in effect a whole epoch is pre-buffered at once), 3 epochs
of 48 steps, 15 ms compute per step, file order shuffled per epoch, no checkpoint, no
eval. Needs pyarrow.
"""
import json
import os
import sys
import time

import numpy as np

FILES, RG_PER_FILE, RG_ROWS, DIM, EMB = 4, 3, 2000, 64, 1024
BATCH, EPOCHS, COMPUTE_S, READAHEAD = 512, 3, 0.015, 4
COLUMNS = ["features", "label"]
SEED = 1618


def file_paths(data):
    return [os.path.join(data, "parquet", "part-%05d.parquet" % i) for i in range(FILES)]


def batches_per_rg():
    return -(-RG_ROWS // BATCH)


def truth(data):
    paths = file_paths(data)
    sizes = [os.path.getsize(p) for p in paths if os.path.exists(p)]
    steps = FILES * RG_PER_FILE * batches_per_rg()
    return {
        "program": "arrow_dataset_projection", "needs": ["pyarrow"], "format": "parquet",
        "io_library": "pyarrow.dataset to_batches (column projection, pre_buffer)",
        "data_layout": "DATA/parquet/part-0000{0..3}.parquet, 3 row groups x 2000 rows each; "
                       "columns id, features (64 float32), text, label, embedding (1024 B)",
        "num_files": FILES, "samples_per_file": RG_PER_FILE * RG_ROWS,
        "row_groups_per_file": RG_PER_FILE, "rows_per_row_group": RG_ROWS,
        "sample_size": {"dist": "fixed (projected)", "bytes": DIM * 4 + 4,
                        "columns_read": COLUMNS, "row_bytes_on_disk_approx": 1615},
        "file_sizes": sizes or None,
        "batch_size": BATCH,
        "batch_sizes_per_row_group": [BATCH] * (RG_ROWS // BATCH) + [RG_ROWS % BATCH],
        "readers": {"kind": "thread", "count": None,
                    "framework": "Arrow I/O and CPU thread pools (single Python process)"},
        "prefetch": {"batch_readahead": READAHEAD, "fragment_readahead": 1},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "file order permuted per epoch (seed 1618 + epoch); rows in file order",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "per file: footer (last 64 KiB pread), then per row group one pread "
                        "per projected column chunk (features ~784 KB, label ~1.1 KB); other "
                        "columns never read; first file of each epoch opened twice (schema "
                        "inference + scan); whole epoch read in a burst at its start",
        "preads_per_epoch": 29,
    }


def make(data):
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(os.path.join(data, "parquet"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    n = RG_PER_FILE * RG_ROWS
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ", dtype=np.uint8)
    for fi, p in enumerate(file_paths(data)):
        feats = rng.standard_normal((n, DIM), dtype=np.float32)
        lens = np.clip(rng.lognormal(np.log(160), 0.5, n), 8, 2000).astype(np.int64)
        chars = letters[rng.integers(0, len(letters), int(lens.sum()))].tobytes().decode()
        offs = np.concatenate([[0], np.cumsum(lens)])
        text = [chars[offs[i]:offs[i + 1]] for i in range(n)]
        emb = rng.bytes(n * EMB)
        table = pa.table({
            "id": pa.array(np.arange(fi * n, (fi + 1) * n, dtype=np.int64)),
            "features": pa.FixedSizeListArray.from_arrays(pa.array(feats.ravel()), DIM),
            "text": pa.array(text, type=pa.string()),
            "label": pa.array(rng.integers(0, 10, n).astype(np.int32)),
            "embedding": pa.array([emb[i * EMB:(i + 1) * EMB] for i in range(n)],
                                  type=pa.binary()),
        })
        pq.write_table(table, p, row_group_size=RG_ROWS, compression="snappy")


def train(data):
    import pyarrow.dataset as ds
    paths = np.array(file_paths(data))
    for epoch in range(EPOCHS):
        files = list(paths[np.random.default_rng(SEED + epoch).permutation(FILES)])
        dataset = ds.dataset(files, format="parquet")
        steps = 0
        for batch in dataset.to_batches(columns=COLUMNS, batch_size=BATCH,
                                        batch_readahead=READAHEAD, fragment_readahead=1,
                                        use_threads=True):
            x = batch.column("features").flatten().to_numpy().reshape(-1, DIM)
            y = batch.column("label").to_numpy()
            assert x.shape[0] == y.shape[0] <= BATCH and x.shape[1] == DIM
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == FILES * RG_PER_FILE * batches_per_rg(), steps


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
