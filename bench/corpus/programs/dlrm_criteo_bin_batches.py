"""DLRM-style click-through-rate training over pre-processed Criteo binary "day" files
(the layout of facebookresearch/dlrm's CriteoBinDataset): fixed 160-byte rows, read a
WHOLE batch at a time with one np.fromfile(path, count=, offset=) call by 2 PyTorch
DataLoader workers (batch_size=None: the dataset returns ready batches), batches visited
in a shuffled order; a sequential test-file evaluation after every epoch and a rotating
pair of torch.save checkpoints every 40 steps.

Data set (DATA/, about 34.1 MB):
  DATA/day_0.bin .. day_2.bin   3 train files, 65,536 rows each (10,485,760 bytes each);
  DATA/test.bin                 16,384 rows (2,621,440 bytes);
  DATA/meta.json                row layout, rows per file and the 26 embedding table
                                sizes (341 bytes).
  Each row is 40 little-endian int32 (160 bytes): label (0/1), 13 dense count features
  (geometric, >= 0), 26 categorical ids (Zipf-like, already hashed modulo the table size).
  No headers; rows back to back.
  DATA/checkpoints/             created by training (see below).

Training: the main process reads meta.json once, deletes old DATA/checkpoints/ckpt_*.pt,
and builds the model state in memory (26 embedding tables of 1000 x 16 float32 plus a small
MLP: 445,713 parameters, about 1.8 MB). A batch is 2048 consecutive rows of one day file
(32 batches per file, 96 per epoch; rows never straddle files). Each epoch the 96 batch
numbers are permuted (numpy rng seeded 4242 + epoch) and fed as the sampler of a NEW torch
DataLoader(batch_size=None, num_workers=2, prefetch_factor=2, fork workers, not
persistent). CriteoBatches.__getitem__(b) = np.fromfile(day_{b//32}.bin, int32,
count=2048*40, offset=(b%32)*327680): one 327,680-byte batch read; the worker splits label
/ dense (log1p) / sparse and returns torch tensors. The main loop sleeps 12 ms per step.
Every 40 global steps (40, 80, ..., 280: 7 saves) it writes torch.save(state,
DATA/checkpoints/ckpt_{(step/40) % 2}.pt), i.e. ckpt_1.pt, ckpt_0.pt, ckpt_1.pt, ...
overwriting in place (1,791,121 bytes each). After every epoch, evaluation in the MAIN
process (DataLoader num_workers=0): test.bin's 8 batches in file order, 4 ms each. 3
epochs, 288 steps.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek,write,writev):
meta.json read once by the main process (openat, two lseek(0, SEEK_CUR), read(342) = 341,
read(1) = 0). Per epoch two fresh worker processes (new PIDs, 6 in all) alternate batches
(worker k gets sampler positions k, k+2, ...: 48 batches each per epoch); at start-up each
worker also opens /dev/null and reads ~9 torch/multiprocessing .py source files (library
noise). Per batch, in the worker: openat(day_K.bin, O_RDONLY|O_CLOEXEC) = A (Python open()
inside np.fromfile), numpy dup()s it to B for a C FILE, then lseek(A, 0, SEEK_CUR),
lseek(B, 0, SEEK_CUR), lseek(A, 0, SEEK_CUR), lseek(B, 0, SEEK_SET), lseek(B, OFFSET,
SEEK_SET), ONE read(B, 327680) = 327680 (glibc fread straight into the array), close(B),
lseek(A, 0, SEEK_SET), lseek(A, OFFSET+327680, SEEK_SET) (numpy handing the position back
to the Python file), close(A). So exactly one 320 KiB read per batch at a
multiple-of-327680 offset, 7 lseeks, the 96 offsets of an epoch in random order across the
3 files; every train byte read once per epoch (31,457,280 bytes; 288 train reads in all).
Each received batch also causes socket chatter (torch's fd-passing of the 3 tensors' shared
memory: per tensor the main process connects to a resource-sharer thread of the worker,
reads of 4/31/9/16 bytes and small writes on fresh socket fds) - not file I/O. Eval (main
process): 8 of the same open/dup/lseek/read(327680)/close cycles on test.bin at ascending
offsets 0 .. 2,293,760 (24 in all). Checkpoints (main process): openat(ckpt_N.pt,
O_WRONLY|O_CREAT|O_TRUNC) then torch's C++ zip writer: no write() per tensor but one
writev() per record (a 64..384-byte zip local header + the payload, e.g. the 64,000-byte
embedding tables; small tensors are coalesced), 31 writevs, then a final write(98) (zip64
end records), close. 7 checkpoints (12.5 MB written), 2 files left on disk. The workers
write nothing.

Usage: dlrm_criteo_bin_batches.py DATA [--make | --truth]
needs torch (run with /opt/dlio-reference/venv/bin/python). Writes DATA/checkpoints/.
"""
import glob
import json
import os
import sys
import time

import numpy as np

N_DAYS, ROWS_PER_DAY, TEST_ROWS = 3, 65536, 16384
N_DENSE, N_SPARSE = 13, 26
ROW_INTS = 1 + N_DENSE + N_SPARSE
ROW_BYTES = ROW_INTS * 4
BATCH, EPOCHS, WORKERS, PREFETCH = 2048, 3, 2, 2
COMPUTE_S, EVAL_S = 0.012, 0.004
CKPT_EVERY, CKPT_SLOTS = 40, 2
EMB_ROWS, EMB_DIM = 1000, 16
SEED = 4242
BATCHES_PER_DAY = ROWS_PER_DAY // BATCH
BATCH_BYTES = BATCH * ROW_BYTES


def epoch_order(epoch):
    return np.random.default_rng(SEED + epoch).permutation(N_DAYS * BATCHES_PER_DAY)


def n_params():
    mlp = (N_DENSE * 64 + 64) + (64 * 16 + 16) + ((16 + N_SPARSE * 16) * 64 + 64) + (64 + 1)
    return N_SPARSE * EMB_ROWS * EMB_DIM + mlp


def truth(data):
    steps = N_DAYS * BATCHES_PER_DAY
    ckpt_steps = list(range(CKPT_EVERY, EPOCHS * steps + 1, CKPT_EVERY))
    return {
        "program": "dlrm_criteo_bin_batches", "needs": ["torch"],
        "format": "raw binary fixed-size rows (Criteo DLRM .bin: 40 x int32 per row)",
        "io_library": "np.fromfile(path, count=, offset=) per batch inside torch DataLoader "
                      "workers (batch_size=None)",
        "data_layout": "DATA/day_{0,1,2}.bin (train), DATA/test.bin (eval), DATA/meta.json",
        "num_files": N_DAYS, "samples_per_file": ROWS_PER_DAY,
        "sample_size": {"distribution": "fixed", "mean_bytes": ROW_BYTES,
                        "total_bytes": N_DAYS * ROWS_PER_DAY * ROW_BYTES},
        "batch_size": BATCH, "read_size_bytes": BATCH_BYTES,
        "readers": {"kind": "torch DataLoader worker processes (fork, new per epoch)",
                    "count": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "batch-level: permutation of the 96 batch numbers per epoch (seed 4242 + "
                   "epoch); rows inside a batch stay contiguous",
        "eval": {"when": "after every epoch", "file": "test.bin", "process": "main",
                 "steps": TEST_ROWS // BATCH, "batch_size": BATCH, "order": "sequential",
                 "compute_s_per_step": EVAL_S, "bytes": TEST_ROWS * ROW_BYTES},
        "checkpoint": {"every_steps": CKPT_EVERY, "steps": ckpt_steps,
                       "files": ["checkpoints/ckpt_0.pt", "checkpoints/ckpt_1.pt"],
                       "rotation": "slot (step/40) % 2, overwritten in place",
                       "library": "torch.save", "params": n_params(),
                       "bytes_each": 1791121},
        "side_files": [{"path": "meta.json", "reads": "once"}],
        "read_pattern": "one read(327680) per batch at offset (b%32)*327680 of day_{b//32}.bin "
                        "after open + lseeks; offsets random across 3 files; each file opened "
                        "32 times per epoch",
        "reads_per_batch": 1,
        "bytes_per_epoch": N_DAYS * ROWS_PER_DAY * ROW_BYTES,
    }


def gen_rows(n, rng, table_sizes):
    dense = rng.geometric(np.linspace(0.5, 0.01, N_DENSE), size=(n, N_DENSE)) - 1
    sparse = np.empty((n, N_SPARSE), dtype=np.int64)
    for j, t in enumerate(table_sizes):
        sparse[:, j] = (rng.zipf(1.2, n) - 1) % t
    logit = 0.02 * dense[:, 0] - 0.001 * sparse[:, 0] - 1.0
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return np.concatenate([label[:, None], dense, sparse], axis=1).astype("<i4")


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    table_sizes = [EMB_ROWS] * N_SPARSE
    for d in range(N_DAYS):
        gen_rows(ROWS_PER_DAY, rng, table_sizes).tofile(os.path.join(data, "day_%d.bin" % d))
    gen_rows(TEST_ROWS, rng, table_sizes).tofile(os.path.join(data, "test.bin"))
    with open(os.path.join(data, "meta.json"), "w") as f:
        json.dump({"row_ints": ROW_INTS, "dense": N_DENSE, "sparse": N_SPARSE,
                   "train_files": ["day_%d.bin" % d for d in range(N_DAYS)],
                   "rows_per_file": ROWS_PER_DAY, "test_file": "test.bin",
                   "test_rows": TEST_ROWS, "table_sizes": table_sizes}, f)


class CriteoBatches:
    """Map-style dataset whose item b is the whole batch b (DLRM CriteoBinDataset)."""

    def __init__(self, paths, rows_per_file):
        self.paths, self.per = paths, rows_per_file // BATCH

    def __len__(self):
        return len(self.paths) * self.per

    def __getitem__(self, b):
        import torch
        path = self.paths[b // self.per]
        a = np.fromfile(path, dtype="<i4", count=BATCH * ROW_INTS,
                        offset=(b % self.per) * BATCH_BYTES).reshape(BATCH, ROW_INTS)
        return (torch.from_numpy(np.log1p(a[:, 1:1 + N_DENSE].astype(np.float32))),
                torch.from_numpy(a[:, 1 + N_DENSE:].astype(np.int64)),
                torch.from_numpy(a[:, 0].astype(np.float32)))


def build_state(torch):
    g = torch.Generator().manual_seed(SEED)
    st = {"emb.%d" % j: torch.randn(EMB_ROWS, EMB_DIM, generator=g) * 0.01
          for j in range(N_SPARSE)}
    dims = [("bot0", N_DENSE, 64), ("bot1", 64, 16), ("top0", 16 + N_SPARSE * 16, 64),
            ("top1", 64, 1)]
    for name, i, o in dims:
        st[name + ".weight"] = torch.randn(o, i, generator=g) * 0.05
        st[name + ".bias"] = torch.zeros(o)
    return st


def train(data):
    import torch
    from torch.utils.data import DataLoader
    with open(os.path.join(data, "meta.json")) as f:
        meta = json.load(f)
    paths = [os.path.join(data, p) for p in meta["train_files"]]
    ds = CriteoBatches(paths, meta["rows_per_file"])
    test = CriteoBatches([os.path.join(data, meta["test_file"])], meta["test_rows"])
    ckdir = os.path.join(data, "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    for old in glob.glob(os.path.join(ckdir, "ckpt_*.pt")):
        os.remove(old)
    state = build_state(torch)
    step, clicks, seen, ckpts = 0, 0.0, 0, 0
    for epoch in range(EPOCHS):
        order = [int(b) for b in epoch_order(epoch)]
        loader = DataLoader(ds, batch_size=None, sampler=order, num_workers=WORKERS,
                            prefetch_factor=PREFETCH, multiprocessing_context="fork")
        for dense, sparse, label in loader:
            assert dense.shape == (BATCH, N_DENSE) and int(sparse.max()) < EMB_ROWS
            clicks += float(label.sum())
            seen += label.shape[0]
            time.sleep(COMPUTE_S)
            step += 1
            if step % CKPT_EVERY == 0:
                state["step"] = torch.tensor(step)
                torch.save(state, os.path.join(ckdir, "ckpt_%d.pt" % ((step // CKPT_EVERY) % CKPT_SLOTS)))
                ckpts += 1
        n_eval = 0
        for dense, sparse, label in DataLoader(test, batch_size=None, num_workers=0):
            n_eval += label.shape[0]
            time.sleep(EVAL_S)
        assert n_eval == meta["test_rows"]
    print("dlrm_criteo_bin_batches: %d steps, %d rows, ctr %.3f, %d checkpoints"
          % (step, seen, clicks / seen, ckpts))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
