"""PyTorch map-style Dataset over a folder of variable-length .npy sequences, a custom
length-bucketing Sampler (ids sorted by length inside each bucket, buckets in random order),
DataLoader(batch_size=16, num_workers=2, drop_last=True) with a padding collate_fn.

Data set (DATA/, about 48 MB):
  DATA/manifest.tsv            text side file, one line per sample "seq_XXXXX.npy<TAB>length"
                               (1544 lines, about 27 KB), read once by the main process;
  DATA/seqs/seq_00000.npy ..   1544 .npy files (format 1.0, 128-byte header), each a float32
  DATA/seqs/seq_01543.npy      array of shape (L, 64), L lognormal (median 96 rows, sigma 0.7,
                               clipped to 16..768), so 256 bytes per row: files are 4224 B to
                               196736 B (128-byte header + L*256), mean about 31 KB.

Sampler (LengthBucketSampler, seeded 31337 + epoch): the manifest lengths are cut into 8
buckets by length (edges 32, 64, 96, 128, 192, 256, 384 rows); each epoch the bucket order
is permuted, and inside each bucket the ids are shuffled and then stable-sorted by length
(so ids of equal length come in random order, lengths ascend within a bucket). The sampler
yields all 1544 ids; the DataLoader groups them 16 at a time (batches may straddle two
buckets) and, because of drop_last=True, the last 8 ids of each epoch's order (1544 = 96*16
+ 8) are never loaded in that epoch. 96 steps per epoch, 3 epochs, 288 steps; the main
process pads each batch to the longest sequence (rounded up to a multiple of 8) and sleeps
12 ms per step.

Readers: torch DataLoader with num_workers=2 (fork start method), prefetch_factor=2,
persistent_workers=False: two worker processes are forked at the start of EVERY epoch (new
PIDs each epoch, 6 worker processes over the run), batch k of an epoch is built by worker
k % 2, and up to 4 batches (64 samples) are in flight; each epoch starts with a burst of
4 batches (64 files) before the first step. Workers are shut down at each epoch's end.
In a worker, __getitem__ does np.load(path) of one whole file: a sample = one file.

What a syscall trace sees (strace -f -e trace=openat,read,lseek,write): importing torch opens
thousands of .so/.py files and runs ldconfig in a child (writes to a pipe), not data. The
main process opens manifest.tsv once: lseek, then read(fd, 8192) four times (8192, 8192,
8192, 2447 bytes) and a read returning 0 at EOF. The data directory is not listed. Each
sample is one openat(seqs/seq_XXXXX.npy, O_RDONLY|O_CLOEXEC) in a worker process, then:
lseek(fd, 0, SEEK_CUR); read(fd, 4096) = 4096 (header + start of data, Python buffered
file); np.load then hands a dup'ed fd to numpy's fromfile (dup not traced): lseek(dup, 0,
SEEK_CUR), lseek(dup, 0, SEEK_SET), read(dup, 128) of the header again, lseek(dup, 0,
SEEK_SET), read(dup, 4096) = 4096, ONE large read of the remaining whole 4 KiB blocks
(e.g. read(dup, 61440) = 61440 for a 65664-byte file; absent for files under 8 KiB) and a
final read(dup, 4096) that returns only the tail ((L*256+128) mod 4096 bytes, e.g. 128);
then lseeks back on the original fd and close. So 5 read syscalls per sample (4 for the
smallest files), every file read whole and sequentially, its first 4 KiB read twice (about
163 MB read over the run for 3 x 48 MB of sample data). Per epoch 1536 files are opened
(the 8 drop_last ids are not), 768 by each of the two worker PIDs of that epoch (6 worker
PIDs over the run), in bucket-sorted order, batch by batch alternating between workers.
The workers also read and write small pickled messages on pipes (4- and ~67-byte reads).
No files are written, no checkpoint, no eval.

Usage: torch_length_bucket_npy.py DATA [--make | --truth]
Needs torch (run with the reference venv).
"""
import json
import os
import sys
import time

import numpy as np

N, DIM, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 1544, 64, 16, 2, 2, 3, 0.012
SEED = 31337
EDGES = [32, 64, 96, 128, 192, 256, 384]
HEADER = 128


def lengths():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(96), 0.7, N), 16, 768).astype(np.int64)


def name(i):
    return "seq_%05d.npy" % i


def bucket_order(lens, epoch):
    rng = np.random.default_rng(SEED + epoch)
    bucket_of = np.searchsorted(EDGES, lens, side="right")
    out = []
    for b in rng.permutation(len(EDGES) + 1):
        ids = np.flatnonzero(bucket_of == b)
        ids = rng.permutation(ids)
        ids = ids[np.argsort(lens[ids], kind="stable")]
        out.extend(int(i) for i in ids)
    return out


def truth(data):
    lens = lengths()
    sizes = HEADER + lens * DIM * 4
    steps = N // BATCH
    return {
        "program": "torch_length_bucket_npy", "needs": ["torch"],
        "format": "npy (one file per variable-length sample) + manifest.tsv",
        "io_library": "numpy.load inside torch DataLoader workers",
        "data_layout": "DATA/seqs/seq_XXXXX.npy float32 (L, 64), DATA/manifest.tsv",
        "num_files": N, "samples_per_file": 1,
        "sample_size": {"dist": "lognormal", "rows_median": 96, "sigma": 0.7,
                        "rows_min": 16, "rows_max": 768, "bytes_per_row": DIM * 4,
                        "header_bytes": HEADER, "min_bytes": int(sizes.min()),
                        "max_bytes": int(sizes.max()), "mean_bytes": int(sizes.mean()),
                        "total_bytes": int(sizes.sum())},
        "batch_size": BATCH, "drop_last": True,
        "readers": {"kind": "process", "count": WORKERS,
                    "framework": "torch.utils.data.DataLoader", "start_method": "fork",
                    "persistent_workers": False,
                    "note": "workers re-forked every epoch; batch k -> worker k % 2"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH,
                     "samples_in_flight": WORKERS * PREFETCH * BATCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "samples_read_per_epoch": steps * BATCH, "samples_dropped_per_epoch": N % BATCH,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "length buckets (8, edges %s) in random order per epoch, ids shuffled then "
                   "stable-sorted by length inside each bucket (seed 31337 + epoch)" % EDGES,
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "manifest.tsv", "reads": "once, main process, whole file"}],
        "file_opens": {"data_per_epoch": steps * BATCH, "total_data": EPOCHS * steps * BATCH,
                       "side": 1},
        "read_pattern": "one whole .npy file per sample (np.load): read(4096) header chunk, "
                        "re-read of the 128-byte header, read(4096), one large read of the "
                        "rest, short read at EOF; files in length-bucket-sorted order",
        "reads_per_sample": 5, "bytes_per_epoch_approx": int(sizes.sum()),
    }


def make(data):
    os.makedirs(os.path.join(data, "seqs"), exist_ok=True)
    lens = lengths()
    rng = np.random.default_rng(SEED + 100)
    with open(os.path.join(data, "manifest.tsv"), "w") as m:
        for i, n in enumerate(lens):
            x = rng.standard_normal((int(n), DIM), dtype=np.float32)
            np.save(os.path.join(data, "seqs", name(i)), x)
            m.write("%s\t%d\n" % (name(i), n))


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset, Sampler

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    names, lens = [], []
    with open(os.path.join(data, "manifest.tsv")) as f:
        for line in f:
            a, b = line.rstrip("\n").split("\t")
            names.append(a)
            lens.append(int(b))
    lens = np.asarray(lens)
    assert len(names) == N

    class SeqFolder(Dataset):
        def __len__(self):
            return len(names)

        def __getitem__(self, i):
            x = np.load(os.path.join(data, "seqs", names[i]))
            return torch.from_numpy(x), i

    class LengthBucketSampler(Sampler):
        def __init__(self):
            self.epoch = 0

        def set_epoch(self, e):
            self.epoch = e

        def __len__(self):
            return N

        def __iter__(self):
            return iter(bucket_order(lens, self.epoch))

    def pad_collate(items):
        longest = max(x.shape[0] for x, _ in items)
        longest = (longest + 7) // 8 * 8
        out = torch.zeros(len(items), longest, DIM)
        mask = torch.zeros(len(items), longest, dtype=torch.bool)
        for k, (x, _) in enumerate(items):
            out[k, :x.shape[0]] = x
            mask[k, :x.shape[0]] = True
        return out, mask, torch.tensor([i for _, i in items])

    sampler = LengthBucketSampler()
    loader = DataLoader(SeqFolder(), batch_size=BATCH, sampler=sampler, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, drop_last=True, collate_fn=pad_collate,
                        persistent_workers=False,
                        multiprocessing_context="fork")
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        steps = 0
        for x, mask, ids in loader:
            assert x.shape[0] == BATCH and x.shape[1] % 8 == 0
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == N // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
