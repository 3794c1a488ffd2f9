"""Row-group reads of parquet files with column selection (pyarrow).

3 parquet files (uncompressed, no dictionary), each 8 row groups of 256 rows with columns
id (int64), label (int32), feat (binary, lognormal lengths, median 1 KiB) and text (string,
about 600 bytes, never read by training). The files are opened once (pq.ParquetFile); each
epoch visits the 24 (file, row group) pairs in a fresh shuffle and reads each with
read_row_group(i, columns=["feat", "label"]) (the two column chunks only), then trains on it
in 4 steps of 64 rows, 10 ms of compute each.

Usage: parquet_rowgroups.py DATA [--make | --truth]
Fixed by the program: 3 files x 8 row groups x 256 rows, batch 64 (4 steps per row group),
main thread only, 2 epochs of 96 steps, 10 ms compute per step. Needs pyarrow and numpy.
"""
import json
import os
import random
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FILES, GROUPS, ROWS, BATCH, EPOCHS, COMPUTE_S = 3, 8, 256, 64, 2, 0.010
FEAT_MEDIAN, FEAT_SIGMA, TEXT_BYTES = 1024, 0.5, 600
SEED = 8


def truth(data):
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".parquet")) \
        if os.path.isdir(data) else []
    fsz = [os.path.getsize(f) for f in files]
    return {
        "program": "parquet_rowgroups", "needs": [], "format": "parquet",
        "io_library": "pyarrow.parquet.ParquetFile.read_row_group(columns=[feat, label])",
        "data_layout": "DATA/*.parquet", "num_files": FILES, "samples_per_file": GROUPS * ROWS,
        "row_groups_per_file": GROUPS, "rows_per_group": ROWS,
        "sample_size": {"dist": "lognormal (feat column)", "median": FEAT_MEDIAN,
                        "sigma": FEAT_SIGMA, "plus": "label int32; text column not read"},
        "file_size": {"bytes": fsz, "total": sum(fsz)},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": FILES * GROUPS * ROWS // BATCH,
        "total_steps": EPOCHS * FILES * GROUPS * ROWS // BATCH,
        "compute_s_per_step": COMPUTE_S, "shuffle": "row groups, per epoch", "eval": None,
        "checkpoint": None, "side_files": [],
        "read_pattern": "one read_row_group per 4 steps: two column chunks (feat, label); the "
                        "text column (about 40% of the bytes) is skipped",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for i in range(FILES):
        n = GROUPS * ROWS
        lens = np.clip(rng.lognormal(np.log(FEAT_MEDIAN), FEAT_SIGMA, n), 64, 16384).astype(int)
        feat = [rng.integers(0, 255, k, dtype=np.uint8).tobytes() for k in lens]
        text = ["".join(chr(97 + c) for c in rng.integers(0, 26, TEXT_BYTES)) for _ in range(n)]
        table = pa.table({"id": pa.array(np.arange(n) + i * n, pa.int64()),
                          "label": pa.array(rng.integers(0, 10, n), pa.int32()),
                          "feat": pa.array(feat, pa.binary()), "text": pa.array(text)})
        pq.write_table(table, os.path.join(data, f"part_{i}.parquet"), row_group_size=ROWS,
                       compression="none", use_dictionary=False, write_statistics=False)


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".parquet"))
    files = [pq.ParquetFile(n) for n in names]
    groups = [(k, g) for k in range(len(files)) for g in range(files[k].num_row_groups)]
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        rng.shuffle(groups)
        for k, g in groups:
            t = files[k].read_row_group(g, columns=["feat", "label"])
            for s in range(t.num_rows // BATCH):
                b = t.slice(s * BATCH, BATCH)
                assert b.num_rows == BATCH
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
