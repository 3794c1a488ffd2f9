"""Image-caption (multimodal) training from ONE HDF5 file holding variable-length data:
encoded image bytes in a vlen uint8 dataset and JSON caption records in a vlen UTF-8 string
dataset (the layout many captioning / CLIP-style preprocessing scripts produce), read one
sample at a time with h5py in random order, a custom collate padding both modalities.

Data set (DATA/, about 38.5 MB):
  DATA/pairs.h5 (38,521,640 bytes, written by h5py / HDF5 1.14, default properties):
    /train/image    (1800,) vlen uint8, contiguous: the dataset itself holds only 16-byte
                    heap references (28,800 bytes); each image is an object in the file's
                    global heap. Image bytes b"\\xff\\xd8" + random, lognormal length
                    (median 16 KiB, sigma 0.5, clipped to 4..64 KiB; mean 18,337 B);
    /train/caption  (1800,) vlen UTF-8 str: a JSON record {"caption", "label", "source"},
                    78-184 bytes, also global-heap objects;
    /train/label    (1800,) int64, contiguous (14,400 bytes);
    /val/{image,caption,label}  the same for 200 samples.
  Images and captions were written alternately, so HDF5 packed them together into 820
  global heap collections of 11-64 KiB (1 to ~24 objects each).
  DATA/vocab.json  word -> id map (514 bytes).

Training (main thread only, no workers, no prefetch): vocab.json is read once; pairs.h5 is
opened once; /train/label is read whole. Each epoch permutes the 1800 indices (numpy rng
seed 6061 + epoch) and takes 112 batches of 16 (the last 8 samples dropped); for every
sample it reads img[i] and cap[i] (two separate h5py element reads) and label[i] from
memory; a custom collate pads the image bytes to the batch's longest and tokenises + pads
the captions; 12 ms sleep per step. After each epoch /val is evaluated with 4 sequential
slice reads of 50 (img[s:s+50], cap[s:s+50]), 4 ms each. 3 epochs, 336 steps. No
checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek; HDF5 1.14.6, h5py
3.14): vocab.json: openat, 2 x lseek(0, SEEK_CUR), read(515) = 514, read(1) = 0. pairs.h5
is opened once (O_RDONLY) and read ONLY with pread64 from the main thread: ~30 small
metadata preads at open (8 .. 544 bytes: superblock, object headers, B-tree/heap),
pread64(14400, 2976) for the labels. The reference arrays are read through HDF5's
per-dataset sieve buffer: pread64(fd, N, off) from the requested element to the END of the
dataset (e.g. 4480 or 26176 bytes), re-read only when an index below the cached window is
requested (9 such reads per reference array in epoch 1, none afterwards). The image and
caption bytes themselves come from the global heap: each miss in HDF5's metadata cache
loads a WHOLE collection with two preads, pread64(fd, 4096, C) then pread64(fd, size-4096,
C+4096) (7-60 KiB), even for a 128-byte caption. Per training epoch about 2,740 collection
loads (5,480 preads, ~1.5 per sample: a caption often sits in a collection already cached
with a recent image) moving ~134.8 MB, at random offsets over the first 34.5 MB of the file
- about 4x the 32.9 MB of image payload the epoch consumes. Each eval: 88 collection loads
(~4.0 MB) in ascending order (one of them a collection shared with the last train
objects, below the others), plus (on the first eval only) the val reference arrays
(pread64 3200 bytes each) and labels (1600); the 2nd and 3rd evals add ~11 small metadata
preads (~5 KB) as the /val datasets are looked up again. No read() or lseek on pairs.h5, no
writes.

Usage: h5_vlen_image_caption.py DATA [--make | --truth]
needs h5py (run with /opt/dlio-reference/venv/bin/python).
"""
import json
import os
import sys
import time

import numpy as np

N_TRAIN, N_VAL, BATCH, VAL_BATCH, EPOCHS = 1800, 200, 16, 50, 3
IMG_MEDIAN, IMG_SIGMA, IMG_MIN, IMG_MAX = 16 * 1024, 0.5, 4 * 1024, 64 * 1024
COMPUTE_S, EVAL_S, N_CLASSES = 0.012, 0.004, 20
SEED = 6060
WORDS = ("a man woman child dog cat horse bike car bus train red blue green white black "
         "small large old young sitting standing running riding on in near under next to "
         "the with street park beach field kitchen table window grass snow water").split()


def image_sizes(n, seed):
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(IMG_MEDIAN), IMG_SIGMA, n), IMG_MIN,
                   IMG_MAX).astype(np.int64)


def epoch_order(epoch):
    return np.random.default_rng(SEED + 1 + epoch).permutation(N_TRAIN)


def truth(data):
    tr, va = image_sizes(N_TRAIN, SEED), image_sizes(N_VAL, SEED + 2)
    steps = N_TRAIN // BATCH
    used = [int(tr[epoch_order(e)[:steps * BATCH]].sum()) for e in range(EPOCHS)]
    return {
        "program": "h5_vlen_image_caption", "needs": ["h5py"],
        "format": "HDF5, vlen uint8 (image bytes) + vlen str (JSON captions) + int64 labels",
        "io_library": "h5py, per-sample dset[i] reads in the main thread",
        "data_layout": "DATA/pairs.h5 (/train/{image,caption,label}, /val/...), "
                       "DATA/vocab.json",
        "num_files": 1, "samples_per_file": N_TRAIN,
        "sample_size": {"distribution": "lognormal image bytes (median 16 KiB, sigma 0.5, "
                                        "clip 4-64 KiB) + 78-184 byte caption",
                        "mean_bytes": int(tr.mean()), "min_bytes": int(tr.min()),
                        "max_bytes": int(tr.max()), "total_bytes": int(tr.sum())},
        "batch_size": BATCH,
        "readers": {"kind": "main thread", "count": 1},
        "prefetch": None,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "permutation per epoch (seed 6061 + epoch), last 8 samples dropped",
        "eval": {"when": "after every epoch", "group": "/val", "samples": N_VAL,
                 "batch_size": VAL_BATCH, "steps": N_VAL // VAL_BATCH,
                 "order": "sequential slices", "compute_s_per_step": EVAL_S,
                 "bytes": int(va.sum())},
        "checkpoint": None,
        "side_files": [{"path": "vocab.json", "reads": "once"},
                       {"path": "pairs.h5:/train/label", "reads": "once (whole dataset)"}],
        "read_pattern": "per sample two vlen element reads; each metadata-cache miss loads a "
                        "whole global heap collection: pread64(4096) + pread64(rest, 8-60 "
                        "KiB) at random offsets; reference arrays via the sieve buffer",
        "collection_loads_per_epoch": "~2740 (measured, HDF5 1.14.6)",
        "payload_bytes_per_epoch": used,
        "bytes_per_epoch": 134_800_000,
    }


def caption(rng, label):
    words = rng.choice(WORDS, int(rng.integers(6, 22)))
    return json.dumps({"caption": " ".join(words), "label": int(label),
                       "source": "synthetic-%d" % int(rng.integers(1000))})


def write_split(h5, name, n, seed):
    import h5py
    rng = np.random.default_rng(seed + 100)
    sizes = image_sizes(n, seed)
    labels = rng.integers(0, N_CLASSES, n)
    g = h5.create_group(name)
    img = g.create_dataset("image", (n,), dtype=h5py.vlen_dtype(np.uint8))
    cap = g.create_dataset("caption", (n,), dtype=h5py.string_dtype("utf-8"))
    g.create_dataset("label", data=labels.astype(np.int64))
    for i in range(n):
        b = np.frombuffer(rng.bytes(int(sizes[i])), dtype=np.uint8).copy()
        b[:2] = (0xFF, 0xD8)
        img[i] = b
        cap[i] = caption(rng, labels[i])


def make(data):
    import h5py
    os.makedirs(data, exist_ok=True)
    with h5py.File(os.path.join(data, "pairs.h5"), "w") as h5:
        write_split(h5, "train", N_TRAIN, SEED)
        write_split(h5, "val", N_VAL, SEED + 2)
    with open(os.path.join(data, "vocab.json"), "w") as f:
        json.dump({w: i + 2 for i, w in enumerate(WORDS)}, f)


def collate(samples, vocab):
    """Pad image bytes to the longest in the batch and tokenise + pad the captions."""
    imgs = [s[0] for s in samples]
    ib = np.zeros((len(imgs), max(len(x) for x in imgs)), dtype=np.uint8)
    for k, x in enumerate(imgs):
        ib[k, :len(x)] = x
    toks = [[vocab.get(w, 1) for w in json.loads(s[1])["caption"].split()] for s in samples]
    tb = np.zeros((len(toks), max(len(t) for t in toks)), dtype=np.int64)
    for k, t in enumerate(toks):
        tb[k, :len(t)] = t
    return ib, np.array([len(x) for x in imgs]), tb, np.array([s[2] for s in samples])


def train(data):
    import h5py
    with open(os.path.join(data, "vocab.json")) as f:
        vocab = json.load(f)
    steps, nbytes = 0, 0
    with h5py.File(os.path.join(data, "pairs.h5"), "r") as h5:
        img, cap = h5["train/image"], h5["train/caption"]
        labels = h5["train/label"][:]
        for epoch in range(EPOCHS):
            order = epoch_order(epoch)
            for s in range(0, N_TRAIN - BATCH + 1, BATCH):
                batch = [(img[i], cap[i], labels[i]) for i in order[s:s + BATCH]]
                ib, il, tb, y = collate(batch, vocab)
                assert ib[:, 0].min() == 0xFF
                nbytes += int(il.sum())
                time.sleep(COMPUTE_S)
                steps += 1
            vimg, vcap, vlab = h5["val/image"], h5["val/caption"], h5["val/label"]
            for s in range(0, N_VAL, VAL_BATCH):
                batch = list(zip(vimg[s:s + VAL_BATCH], vcap[s:s + VAL_BATCH],
                                 vlab[s:s + VAL_BATCH]))
                collate(batch, vocab)
                time.sleep(EVAL_S)
    print("h5_vlen_image_caption: %d steps, %d image bytes, %d epochs" % (steps, nbytes, EPOCHS))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
