"""Remote-sensing segmentation training over a deep directory tree of per-tile sample
folders (region / acquisition date / tile id / {image.npy, mask.npy, meta.json}). The
data set is RE-INDEXED AT THE START OF EVERY EPOCH, as pipelines fed by a sync job do:
os.walk of the whole tree, os.stat of every image.npy (skipping tiles whose upload is not
complete), and a read of every tile's meta.json to drop cloudy tiles; then a thread
pool loads image + mask of the surviving tiles, one batch ahead of the training loop.

Data set (DATA/, about 35 MB):
  DATA/tiles/rR/YYYY-MM-DD/tile_RR_D_TT/   4 regions x 5 dates x 12 tiles = 240 folders
      image.npy   uint16 (4, 128, 128) (4 spectral bands), np.save: 128-byte header +
                  131072 bytes = 131200 bytes
      mask.npy    uint8 (128, 128) class mask, 128 + 16384 = 16512 bytes
      meta.json   ~277 bytes: tile id, region, date, bbox, crs, band names, cloud_cover
  8 of the 240 folders (chosen by the seed) have NO image.npy (an incomplete upload: only
  mask.npy + meta.json). cloud_cover is uniform in [0, 1): tiles with cloud_cover > 0.7
  are dropped after reading meta.json.

Training: each epoch the main process does os.walk(DATA/tiles) (directory and file lists
sorted), and for every tile folder: os.stat(image.npy) (missing -> skipped; size must be
131200), then json.load(meta.json) (open, read, close) and the cloud filter. The
surviving tiles (same set every epoch; count printed) are shuffled (numpy rng, seed
1207 + epoch) and cut into batches of 8 (drop_last). A ThreadPoolExecutor(4) loads the
samples of batch k+1 (np.load image.npy + np.load mask.npy, random 96 x 96 crop of both)
while batch k is "trained" (30 ms sleep). 3 epochs; steps per epoch = kept // 8 (see
--truth). No eval, no checkpoint, no writes.

What a syscall trace sees: at every epoch start, in the main thread, a metadata storm
over 265 directories (1 + 4 + 20 + 240): per directory openat(O_RDONLY|O_NONBLOCK|
O_CLOEXEC|O_DIRECTORY), fstat, getdents64 (entries) + getdents64 (= 0), close, and one
lstat (newfstatat AT_SYMLINK_NOFOLLOW, os.walk's islink check) per subdirectory; one
stat (newfstatat) of each tile folder's image.npy (8 of 240 failing with ENOENT); and
for the 232 complete tiles a small file read of meta.json (openat, 2 x fstat, 2 x lseek,
read(size + 1) returning the ~277-byte file, read(1) = 0, close). 168 tiles survive
(64 dropped as cloudy), 21 batches per epoch. Then the 4 pool threads (separate thread
ids of the same process) read whole .npy files: image.npy (131200 B) and mask.npy
(16512 B) of each sample. Every np.load is: openat, fstat, lseek, read(4096) of the
buffered header; fcntl(F_DUPFD_CLOEXEC) + fcntl(F_GETFL), and on the duplicate fd:
lseek, fstat, lseek(0) + read(128), lseek(0) + read(4096) + read(size - 4224 rounded
down to 4 KB) + read(4096) returning the last 128 bytes, close(dup); then lseek(fd, 4096)
and lseek(fd, size) on the original fd and close: the header is read 3 times, the whole
file is read once more (size + 4224 bytes per file). The files of one batch are read
by up to 4 threads concurrently, in shuffled tile order, one batch ahead; masks of
incomplete tiles and image/mask of cloudy tiles are never opened. Per epoch: 232
meta.json reads (~64 KB), 336 .npy opens (24.8 MB of files). Over the run 1008 .npy
opens, 74.4 MB of .npy file bytes (78.7 MB read by syscalls). No writes.

Usage: tile_tree_rescan_meta_filter_threads.py DATA [--make | --truth]
numpy only (standard-library os.walk, json, concurrent.futures).
"""
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

REGIONS, N_DATES, TILES = 4, 5, 12
DATES = ["2025-03-04", "2025-04-11", "2025-05-19", "2025-06-26", "2025-08-03"]
BANDS, SIZE, CROP = 4, 128, 96
N_INCOMPLETE, CLOUD_MAX = 8, 0.7
BATCH, THREADS, EPOCHS = 8, 4, 3
COMPUTE_S = 0.030
SEED = 1207
IMG_BYTES = 128 + BANDS * SIZE * SIZE * 2
MASK_BYTES = 128 + SIZE * SIZE


def tile_list():
    out = []
    for r in range(REGIONS):
        for d in range(N_DATES):
            for t in range(TILES):
                out.append(("r%d" % r, DATES[d], "tile_%02d_%d_%02d" % (r, d, t)))
    return out


def spec():
    tiles = tile_list()
    rng = np.random.default_rng(SEED)
    cloud = rng.uniform(0, 1, len(tiles))
    incomplete = np.zeros(len(tiles), bool)
    incomplete[rng.choice(len(tiles), N_INCOMPLETE, replace=False)] = True
    kept = (~incomplete) & (cloud <= CLOUD_MAX)
    return tiles, cloud, incomplete, kept


def truth(data):
    tiles, cloud, incomplete, kept = spec()
    n_kept = int(kept.sum())
    steps = n_kept // BATCH
    n_dirs = 1 + REGIONS + REGIONS * N_DATES + len(tiles)
    return {
        "program": "tile_tree_rescan_meta_filter_threads", "needs": [],
        "format": "per-sample folders: image.npy (uint16 4x128x128) + mask.npy (uint8 "
                  "128x128) + meta.json, 4-level directory tree",
        "io_library": "os.walk + os.stat + json.load (main thread), np.load in "
                      "ThreadPoolExecutor threads",
        "data_layout": "DATA/tiles/rR/YYYY-MM-DD/tile_RR_D_TT/{image.npy,mask.npy,"
                       "meta.json}",
        "num_files": int(3 * len(tiles) - incomplete.sum()),
        "num_samples": len(tiles), "samples_per_file": 1,
        "incomplete_tiles": int(incomplete.sum()),
        "cloudy_tiles_dropped": int(((~incomplete) & (cloud > CLOUD_MAX)).sum()),
        "kept_tiles": n_kept,
        "sample_size": {"dist": "fixed", "image_file_bytes": IMG_BYTES,
                        "mask_file_bytes": MASK_BYTES, "meta_json_bytes_approx": 277},
        "batch_size": BATCH,
        "readers": {"kind": "ThreadPoolExecutor threads of the main process, one batch "
                            "ahead", "count": THREADS},
        "prefetch": {"batches_ahead": 1},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "per-epoch permutation of kept tiles (numpy seed 1207 + epoch), "
                   "drop_last",
        "rescan_per_epoch": {"directories_listed": n_dirs, "stat_calls": len(tiles),
                             "stat_enoent": int(incomplete.sum()),
                             "meta_json_reads": int((~incomplete).sum())},
        "npy_reads_total": EPOCHS * steps * BATCH * 2,
        "bytes_read_npy_total": EPOCHS * steps * BATCH * (IMG_BYTES + MASK_BYTES),
        "bytes_read_npy_syscalls_total": EPOCHS * steps * BATCH
        * (IMG_BYTES + MASK_BYTES + 2 * (4096 + 128)),
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "tiles/**/meta.json", "reads": "every complete tile, "
                        "every epoch", "process": "main thread"}],
        "read_pattern": "per-epoch directory walk + stat + small json reads, then whole "
                        "image.npy + mask.npy per sample in 4 threads, shuffled",
    }


def make(data):
    tiles, cloud, incomplete, kept = spec()
    rng = np.random.default_rng(SEED + 1)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    for k, (reg, date, tid) in enumerate(tiles):
        d = os.path.join(data, "tiles", reg, date, tid)
        os.makedirs(d, exist_ok=True)
        field = np.sin(xx / (6.0 + k % 5) + rng.uniform(0, 6.28)) * np.cos(yy / 9.0)
        mask = (np.digitize(field, [-0.5, 0.0, 0.5])).astype(np.uint8)
        if not incomplete[k]:
            img = 2000 + 900 * field[None] * np.arange(1, BANDS + 1)[:, None, None] \
                + rng.normal(0, 150, (BANDS, SIZE, SIZE))
            np.save(os.path.join(d, "image.npy"), np.clip(img, 0, 65535).astype(np.uint16))
        np.save(os.path.join(d, "mask.npy"), mask)
        r, di, t = int(reg[1:]), DATES.index(date), k % TILES
        meta = {"tile": tid, "region": reg, "date": date,
                "bbox": [round(10.0 + r + 0.01 * t, 4), round(45.0 + 0.01 * di, 4),
                         round(10.01 + r + 0.01 * t, 4), round(45.01 + 0.01 * di, 4)],
                "crs": "EPSG:32633", "bands": ["B02", "B03", "B04", "B08"],
                "dtype": "uint16", "shape": [BANDS, SIZE, SIZE],
                "cloud_cover": round(float(cloud[k]), 4),
                "processing": {"level": "L2A", "baseline": "05.10"}}
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)


def rescan(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if "meta.json" not in filenames:
            continue
        img = os.path.join(dirpath, "image.npy")
        try:
            st = os.stat(img)
        except FileNotFoundError:
            continue
        if st.st_size != IMG_BYTES:
            continue
        with open(os.path.join(dirpath, "meta.json")) as f:
            meta = json.load(f)
        if meta["cloud_cover"] > CLOUD_MAX:
            continue
        found.append(dirpath)
    return found


def load_tile(args):
    d, seed = args
    rng = np.random.default_rng(seed)
    img = np.load(os.path.join(d, "image.npy"))
    mask = np.load(os.path.join(d, "mask.npy"))
    y0, x0 = rng.integers(0, SIZE - CROP + 1, 2)
    x = img[:, y0:y0 + CROP, x0:x0 + CROP].astype(np.float32) / 4096.0
    return x, mask[y0:y0 + CROP, x0:x0 + CROP].copy()


def train(data):
    root = os.path.join(data, "tiles")
    steps, kept_per_epoch, pix = 0, [], np.zeros(4, dtype=np.int64)
    with ThreadPoolExecutor(THREADS, thread_name_prefix="tile-loader") as pool:
        for epoch in range(EPOCHS):
            tiles = rescan(root)
            kept_per_epoch.append(len(tiles))
            rng = np.random.default_rng(SEED + epoch)
            order = [tiles[i] for i in rng.permutation(len(tiles))]
            batches = [[(d, SEED * 1000 + epoch * 1000 + k + j) for j, d in
                        enumerate(order[k:k + BATCH])]
                       for k in range(0, len(order) - BATCH + 1, BATCH)]
            pending = [pool.submit(load_tile, a) for a in batches[0]] if batches else []
            for b in range(len(batches)):
                samples = [p.result() for p in pending]
                if b + 1 < len(batches):
                    pending = [pool.submit(load_tile, a) for a in batches[b + 1]]
                x = np.stack([s[0] for s in samples])
                m = np.stack([s[1] for s in samples])
                assert x.shape == (BATCH, BANDS, CROP, CROP)
                pix += np.bincount(m.ravel(), minlength=4)
                time.sleep(COMPUTE_S)
                steps += 1
    print("tile_tree_rescan_meta_filter_threads: %d steps, kept tiles per epoch %s, "
          "mask class fractions %s" % (steps, kept_per_epoch,
                                       np.round(pix / pix.sum(), 3).tolist()))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
