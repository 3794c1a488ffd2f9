"""A PyTorch DataLoader with worker processes over npy files, with a sleep per batch as the
compute: the program bench/fidelity.sh traces, characterises and replays.

Usage: torch_loader.py DATA_DIR [--make]
Fixed by the program: 256 files of 256 KiB (np.save of uint8), batch 16, 2 worker processes
(prefetch_factor 2), shuffled per epoch, 2 epochs, 30 ms of compute per batch.
"""
import os
import sys
import time

import numpy as np

FILES, FILE_BYTES, BATCH, WORKERS, EPOCHS, COMPUTE_S = 256, 256 << 10, 16, 2, 2, 0.030

data = sys.argv[1]
if "--make" in sys.argv:
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        np.save(os.path.join(data, f"img_{i:04d}.npy"),
                np.random.default_rng(i).integers(0, 255, FILE_BYTES - 128, dtype=np.uint8))
    sys.exit(0)

import torch
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __init__(self, root):
        self.names = sorted(os.path.join(root, n) for n in os.listdir(root) if n.endswith(".npy"))

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        return torch.from_numpy(np.load(self.names[i]))


loader = DataLoader(Files(data), batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                    prefetch_factor=2, persistent_workers=True,
                    generator=torch.Generator().manual_seed(5))
for epoch in range(EPOCHS):
    for batch in loader:
        assert batch.shape[0] == BATCH
        time.sleep(COMPUTE_S)
