"""A PyTorch DataLoader with num_workers=0 reading fixed records of one big file in order.

DATA/records.bin packs 1024 records of 32 KiB back to back (32 MiB). A map-style Dataset
opens it lazily (os.open on the first __getitem__, then kept open for the whole run) and
its __getitem__(i) is one os.pread of 32 KiB at offset i * 32768. DataLoader: batch 16,
SequentialSampler (shuffle=False), num_workers=0, so every read is in the main process, in
the loop, between compute sleeps of 10 ms per batch. A syscall trace sees one openat of the
file, then per step 16 preads of 32 KiB at consecutive offsets, then the compute gap: the file
read front to back three times with the same offsets each epoch, no other files, no threads.

Usage: torch_workers0_seq.py DATA [--make | --truth]
Fixed by the program: 1 file x 1024 records of 32 KiB, batch 16, no worker processes, no
shuffle, 3 epochs of 64 steps, 10 ms compute per step, no checkpoint, no eval. Needs torch.
"""
import json
import os
import sys
import time

import numpy as np

N, RECORD, BATCH, EPOCHS, COMPUTE_S = 1024, 32 << 10, 16, 3, 0.010
SEED = 1601


def truth(data):
    path = os.path.join(data, "records.bin")
    return {
        "program": "torch_workers0_seq", "needs": ["torch"], "format": "raw fixed-size records",
        "io_library": "os.pread in a torch Dataset (DataLoader, num_workers=0)",
        "data_layout": "DATA/records.bin", "num_files": 1, "samples_per_file": N,
        "sample_size": {"dist": "fixed", "bytes": RECORD},
        "file_size": {"bytes": os.path.getsize(path) if os.path.exists(path) else None},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0,
                                         "framework": "torch DataLoader, num_workers=0"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": N // BATCH,
        "total_steps": EPOCHS * N // BATCH, "compute_s_per_step": COMPUTE_S,
        "shuffle": "none (SequentialSampler)", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "one 32 KiB pread per sample at offset index * 32768, sequential; "
                        "file opened once (lazily) and kept open",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    with open(os.path.join(data, "records.bin"), "wb") as f:
        for _ in range(N // 64):
            f.write(rng.integers(0, 255, 64 * RECORD, dtype=np.uint8).tobytes())


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset, SequentialSampler

    class Records(Dataset):
        def __init__(self, path):
            self.path, self.fd = path, None
            self.n = os.path.getsize(path) // RECORD

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDONLY)
            return torch.frombuffer(bytearray(os.pread(self.fd, RECORD, i * RECORD)),
                                    dtype=torch.uint8)

    ds = Records(os.path.join(data, "records.bin"))
    loader = DataLoader(ds, batch_size=BATCH, sampler=SequentialSampler(ds), num_workers=0)
    for epoch in range(EPOCHS):
        for batch in loader:
            assert batch.shape == (BATCH, RECORD)
            time.sleep(COMPUTE_S)
    os.close(ds.fd)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
