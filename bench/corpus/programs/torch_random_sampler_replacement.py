"""A PyTorch DataLoader over npy files with RandomSampler(replacement=True): repeats in an epoch.

DATA holds 100 npy files, each one sample: a 3 x 48 x 48 float32 array (27648 bytes + a
128-byte npy header = 27776 bytes; 2.8 MB in all). A map-style Dataset returns
torch.from_numpy(np.load(path)) for index i. The sampler is RandomSampler(ds,
replacement=True, num_samples=96, generator seeded once for the run): each epoch is 96
independent uniform draws of the 100 files, so a file can come 2 to 4 times in one epoch and
about a third of the files are not read at all in it (65 and 63 distinct files in the two
epochs, 90 over the run). DataLoader: batch 6 (default collate, stacked), num_workers=2
(fork), persistent_workers=True (the same 2 processes serve both epochs), prefetch_factor 2;
the main process sleeps 10 ms per batch. 2 epochs of 16 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): while
torch is imported the main process runs /sbin/ldconfig -p once (torch's CUDA library finder
calling ctypes.util.find_library; a child writing the library list to a pipe, not the
program's doing). 2 worker processes are forked (clone, no execve) at the first epoch and
kept to the end; every data read is in a worker, none in the main process, the batches dealt
round robin (each worker reads 8 batches, 48 files, per epoch, a repeated file being opened
and read again in full each time). Per file (np.load of a path): openat(O_RDONLY|O_CLOEXEC),
fstat, lseek(0, SEEK_CUR), a buffered 4096-byte read from offset 0 (magic and header); then
numpy's fromfile works on a dup of the descriptor (fcntl F_DUPFD_CLOEXEC, not in the trace
set, so the reads that follow are on a descriptor no openat returned): lseeks, fstat, lseek
to 0, a 128-byte read, lseek to 0, then reads of 4096, 20480 and 4096 (short: 3200) from
offset 0 to the end; close of the dup, lseek(4096), lseek(27776) on the original, close. So
5 reads, 32000 bytes, for a 27776-byte file. Each epoch starts with a burst of about 4
batches (24 files) read before the first step returns (2 workers x prefetch_factor 2 in
flight), then one batch of 6 files per step, and the last 4 steps of an epoch read nothing
(already fetched); nothing is read across an epoch boundary. 192 file reads in all, 960
reads, 6.1 MB. No writes to files.

Usage: torch_random_sampler_replacement.py DATA [--make | --truth]
Fixed by the program: 100 npy files, 1 sample per file, 96 samples drawn with replacement
per epoch, batch 6, 2 persistent worker processes, prefetch_factor 2, 2 epochs of 16
steps, 10 ms compute per step, no checkpoint, no eval. Needs torch.
"""
import json
import os
import sys
import time

import numpy as np

FILES, SHAPE, NUM_SAMPLES, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = \
    100, (3, 48, 48), 96, 6, 2, 2, 2, 0.010
SAMPLE_BYTES = 4 * SHAPE[0] * SHAPE[1] * SHAPE[2]
SEED = 9696


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy")) \
        if os.path.isdir(data) else []


def sampler_draws():
    """The indices the sampler yields, per epoch (same generator as train); None w/o torch."""
    try:
        import torch
        from torch.utils.data import RandomSampler
    except ImportError:
        return None
    s = RandomSampler(range(FILES), replacement=True, num_samples=NUM_SAMPLES,
                      generator=torch.Generator().manual_seed(SEED))
    return [list(s) for _ in range(EPOCHS)]


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = NUM_SAMPLES // BATCH
    draws = sampler_draws()
    expected_distinct = FILES * (1 - (1 - 1 / FILES) ** NUM_SAMPLES)
    return {
        "program": "torch_random_sampler_replacement", "needs": ["torch"], "format": "npy",
        "io_library": "numpy.load in torch DataLoader workers",
        "data_layout": "DATA/*.npy", "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "fixed", "bytes": SAMPLE_BYTES, "dtype": "float32",
                        "shape": list(SHAPE)},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else SAMPLE_BYTES + 128,
                      "header_bytes": 128},
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": True, "start_method": "fork"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler(replacement=True, num_samples=96): 96 independent uniform "
                   "draws of the 100 files per epoch, so some files are read 2-4 times in an "
                   "epoch and about a third not at all",
        "sampler": {"replacement": True, "num_samples": NUM_SAMPLES,
                    "expected_distinct_files_per_epoch": round(expected_distinct, 2),
                    "distinct_files_per_epoch": [len(set(d)) for d in draws] if draws else None,
                    "max_repeats_per_epoch": [max(d.count(i) for i in set(d)) for d in draws]
                    if draws else None,
                    "distinct_files_whole_run": len(set(sum(draws, []))) if draws else None},
        "files_read_per_epoch": NUM_SAMPLES, "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "np.load of one whole file per sample, each batch read by one worker "
                        "process, batches alternating between the 2 workers",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        x = np.random.default_rng(SEED + 1 + i).standard_normal(SHAPE, dtype=np.float32)
        np.save(os.path.join(data, f"item_{i:03d}.npy"), x)


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler

    class NpyFiles(Dataset):
        def __init__(self, names):
            self.names = names

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            return torch.from_numpy(np.load(self.names[i]))

    ds = NpyFiles(file_names(data))
    sampler = RandomSampler(ds, replacement=True, num_samples=NUM_SAMPLES,
                            generator=torch.Generator().manual_seed(SEED))
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=WORKERS,
                        persistent_workers=True, prefetch_factor=PREFETCH,
                        multiprocessing_context="fork")
    for epoch in range(EPOCHS):
        steps = 0
        for batch in loader:
            assert batch.shape == (BATCH,) + SHAPE
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == NUM_SAMPLES // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
