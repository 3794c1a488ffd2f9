"""GraphSAGE-style node classification with on-disk CSR graph + node features
opened via ``np.load(mmap_mode="r")``; mini-batches are built by 2-hop
neighbour sampling (fan-out 10, 5) and a feature gather, so the "reads"
are scattered page faults into memory-mapped files.

Data set (``--make``, seed 15005)
---------------------------------
``DATA/graph/meta.json``          num_nodes, num_edges, feat_dim, classes
``DATA/graph/indptr.npy``         int64 [240,001]            1,920,136 B
``DATA/graph/indices.npy``        int32 [2,803,793]          11,215,300 B
    (in-degree per node ~ clipped log-normal, mean 11.7, 1..200; 70 % of
    neighbours within +/-2,000 ids of the node = community locality, 30 %
    uniform)
``DATA/graph/node_feat.npy``      float16 [240,000, 128]  61,440,128 B
    (one row = 256 bytes, 16 rows per 4 KiB page)
``DATA/graph/node_label.npy``     int16 [240,000]            480,128 B
``DATA/split/train_idx.npy``      int64 [24,000]  (10 % of nodes, random)
``DATA/split/valid_idx.npy``      int64 [4,000]
Total 75.3 MB.

Training loop
-------------
indptr, indices and node_feat are opened with ``np.load(...,
mmap_mode="r")``; node_label and the two split files are loaded normally
(small).  Per epoch the 24,000 train seeds are shuffled and cut into
batches of 512 -> 47 steps (the last has 448 seeds), 3 epochs, 141 steps.
For each batch: hop 1 -- gather ``indptr[seeds]``/``indptr[seeds+1]`` and
10 neighbour positions per seed drawn with replacement -> ``indices[pos]``
(5,120 scattered 4-byte loads); hop 2 -- the same with fan-out 5 for the
~2,900 unique hop-1 nodes (~14,600 loads); then
``node_feat[np.unique(all_nodes)]`` (~13,900 rows of 256 B, sorted ids)
and ``node_label[seeds]`` (in RAM).  Compute:
``time.sleep(0.02)`` per step.  Eval after every epoch: the 4,000 valid
nodes in 4 batches of 1,000 with the same sampler (``time.sleep(0.01)``
each).  Nothing is written into DATA.

What a syscall trace sees (measured with strace)
------------------------------------------------
* start: meta.json read; for each of the 3 memory-mapped .npy files numpy
  opens the file 3 times (np.load, open_memmap, np.memmap): 2 buffered
  4,096-byte header ``read``s, ``lseek(0, SEEK_END)``, then ONE ``mmap``
  of the whole file from offset 0 (PROT_READ, MAP_SHARED; data starts at
  byte 128) and ``close``s.  node_label.npy and the 2 split files are read
  with ordinary ``read``s (< 0.7 MB).  13 ``openat`` in total.
* steady state: NO read/pread/lseek syscalls at all.  Data arrives by page
  faults.  Per step (measured offline with the same sampler): ~13,900
  unique nodes -> ~9,100 of the 15,001 feature pages (61 %), ~19,700
  positions in indices.npy -> ~1,900 of its 2,739 pages, and ~470 indptr
  pages (practically all of it).  Once the 75 MB are in the page cache the
  trace is silent; with a cold cache the first steps fault in most of the
  files (kernel read-around on the mappings).
* 141 train steps + 12 eval batches; no writes.
"""
import json
import os
import sys
import time

import numpy as np

SEED = 15005
N = 240_000
F = 128
CLASSES = 47
N_TRAIN, N_VALID = 24_000, 4_000
BATCH = 512
EVAL_BATCH = 1000
FANOUT = (10, 5)
EPOCHS = 3
COMPUTE_S = 0.02
EVAL_S = 0.01


def make(data):
    rng = np.random.default_rng(SEED)
    g, sp = os.path.join(data, "graph"), os.path.join(data, "split")
    os.makedirs(g, exist_ok=True)
    os.makedirs(sp, exist_ok=True)
    deg = np.clip(np.round(rng.lognormal(np.log(8.5), 0.8, size=N)), 1, 200).astype(np.int64)
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    e = int(indptr[-1])
    owner = np.repeat(np.arange(N, dtype=np.int64), deg)
    local = rng.random(e) < 0.7
    nbr = np.where(local, owner + rng.integers(-2000, 2001, size=e), rng.integers(0, N, size=e))
    nbr = np.clip(nbr, 0, N - 1).astype(np.int32)
    np.save(os.path.join(g, "indptr.npy"), indptr)
    np.save(os.path.join(g, "indices.npy"), nbr)
    labels = rng.integers(0, CLASSES, size=N).astype(np.int16)
    centers = rng.standard_normal((CLASSES, F)).astype(np.float32)
    feat = np.lib.format.open_memmap(os.path.join(g, "node_feat.npy"), mode="w+",
                                     dtype=np.float16, shape=(N, F))
    for a in range(0, N, 40_000):
        b = min(N, a + 40_000)
        feat[a:b] = (centers[labels[a:b]] + rng.standard_normal((b - a, F), dtype=np.float32)).astype(np.float16)
    feat.flush()
    del feat
    np.save(os.path.join(g, "node_label.npy"), labels)
    perm = rng.permutation(N)
    np.save(os.path.join(sp, "train_idx.npy"), np.sort(perm[:N_TRAIN]))
    np.save(os.path.join(sp, "valid_idx.npy"), np.sort(perm[N_TRAIN:N_TRAIN + N_VALID]))
    with open(os.path.join(g, "meta.json"), "w") as f:
        json.dump({"num_nodes": N, "num_edges": e, "feat_dim": F, "num_classes": CLASSES,
                   "feat_dtype": "float16", "directed": True}, f)


def sample_block(rng, indptr, indices, nodes, fanout):
    start = np.asarray(indptr[nodes])
    deg = np.asarray(indptr[nodes + 1]) - start
    pos = start[:, None] + (rng.random((len(nodes), fanout)) * deg[:, None]).astype(np.int64)
    return np.asarray(indices[pos.ravel()]).astype(np.int64)


def sample_batch(rng, g, seeds):
    frontier = seeds
    layers = [seeds]
    for fo in FANOUT:
        nb = sample_block(rng, g["indptr"], g["indices"], np.unique(frontier), fo)
        layers.append(nb)
        frontier = nb
    nodes = np.unique(np.concatenate(layers))
    x = np.asarray(g["feat"][nodes], dtype=np.float32)
    y = g["labels"][seeds]
    return nodes, x, y


def train(data):
    gd, sp = os.path.join(data, "graph"), os.path.join(data, "split")
    with open(os.path.join(gd, "meta.json")) as f:
        meta = json.load(f)
    g = {
        "indptr": np.load(os.path.join(gd, "indptr.npy"), mmap_mode="r"),
        "indices": np.load(os.path.join(gd, "indices.npy"), mmap_mode="r"),
        "feat": np.load(os.path.join(gd, "node_feat.npy"), mmap_mode="r"),
        "labels": np.load(os.path.join(gd, "node_label.npy")),
    }
    assert g["feat"].shape == (meta["num_nodes"], meta["feat_dim"])
    train_idx = np.load(os.path.join(sp, "train_idx.npy"))
    valid_idx = np.load(os.path.join(sp, "valid_idx.npy"))
    w = np.zeros((F, CLASSES), dtype=np.float32)
    rng = np.random.default_rng(0)
    t0 = time.time()
    step, touched = 0, 0
    for epoch in range(EPOCHS):
        order = np.random.default_rng(SEED + epoch).permutation(train_idx)
        for b in range(0, len(order), BATCH):
            nodes, x, y = sample_batch(rng, g, order[b:b + BATCH])
            touched += len(nodes)
            w += 1e-6 * x[:CLASSES].T
            time.sleep(COMPUTE_S)
            step += 1
        correct = 0
        for b in range(0, len(valid_idx), EVAL_BATCH):
            nodes, x, y = sample_batch(rng, g, valid_idx[b:b + EVAL_BATCH])
            correct += int((x[:len(y)] @ w).argmax(1).shape[0])
            time.sleep(EVAL_S)
        print("epoch %d: step %d, avg nodes/batch %.0f, %.2fs" % (epoch, step, touched / step, time.time() - t0))
    print("trained %d steps in %.2fs" % (step, time.time() - t0))


def truth():
    spe = -(-N_TRAIN // BATCH)
    return {
        "program": "gnn_csr_neighbor_sampling_mmap",
        "needs": [],
        "format": "npy (CSR graph + float16 node features)",
        "io_library": "numpy memmap (np.load mmap_mode='r')",
        "data_layout": "graph/{indptr.npy int64, indices.npy int32 ~2.88M, node_feat.npy f16 [240000,128], "
                       "node_label.npy} + split/{train_idx,valid_idx}.npy; 2-hop neighbour sampling (10,5), "
                       "random row gathers from memory-mapped files",
        "num_files": 7,
        "samples_per_file": N,
        "sample_size": {"dist": "fixed (per node row)", "min": F * 2, "max": F * 2, "mean": F * 2},
        "nodes_per_batch_approx": 13900,
        "batch_size": BATCH,
        "readers": {"kind": "main", "count": 1},
        "prefetch": 0,
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": EPOCHS * spe,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": True,
        "eval": {"every": "epoch", "samples": N_VALID, "batch_size": EVAL_BATCH,
                 "steps": N_VALID // EVAL_BATCH, "compute_s_per_step": EVAL_S},
        "checkpoint": None,
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: gnn_csr_neighbor_sampling_mmap.py DATA [--make|--truth]")
    if "--truth" in sys.argv:
        print(json.dumps(truth()))
    elif "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
