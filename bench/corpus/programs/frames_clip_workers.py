"""8-frame clips from raw "video" files, one seek + one read each, in 2 DataLoader workers.

DATA holds 6 raw video files (DATA/video_0.raw ... video_5.raw) of fixed-size frames, each
frame 32 x 32 x 3 uint8 (3072 bytes), 300 to 600 frames per file (seeded), no header. A
map-style Dataset of 80 clips per epoch: the main process draws the clip table at the start
of every epoch (one random.Random for the run: a file uniformly, then a start frame uniform
over the starts where 8 frames fit), and __getitem__(i) opens clip i's file
(open(path, "rb")), f.seek(start * 3072), f.read(8 * 3072) and closes it. DataLoader: batch
4, shuffle=True (seeded generator), num_workers=2 (fork), prefetch_factor=2,
persistent_workers=False (new workers each epoch, which see that epoch's table); the main
process sleeps 12 ms per batch. 2 epochs of 20 steps.

What a syscall trace sees (strace -f): 2 forked worker processes per epoch (clone, no
execve), 4 over the run; all data reads are in the workers, none in the main process (which
only stats the files by path once, to count their frames). Per sample in a worker: openat
(O_RDONLY|O_CLOEXEC), fstat, ioctl(TCGETS) (fails), lseek(0, SEEK_CUR), lseek(start *
3072, SEEK_SET), one read of exactly 24576 bytes (a multiple of the buffer size, so the
buffered reader passes it straight through in one call), close. 160 reads in all, 3932160
bytes, at offsets that are multiples of 3072, spread over the 6 files (the longer files get
no more clips than the shorter ones: the file is drawn uniformly). Each epoch starts with
the workers reading 2 batches each (prefetch_factor 2: 16 samples) while the first batch is
awaited, then one batch of 4 reads per step, the workers taking turns, a batch's 4 reads
back to back in one worker. No writes.

Usage: frames_clip_workers.py DATA [--make | --truth]
Fixed by the program: 6 files of 300-600 frames of 3072 bytes, samples = 8-frame clips (24576
bytes) at random starts, 80 per epoch, batch 4, 2 worker processes, prefetch_factor 2, not
persistent, 2 epochs of 20 steps, 12 ms compute per step, no checkpoint, no eval. Needs
torch.
"""
import json
import os
import random
import sys
import time

import numpy as np

FILES, FRAME, CLIP, BATCH, WORKERS, PREFETCH, EPOCHS, STEPS, COMPUTE_S = \
    6, (32, 32, 3), 8, 4, 2, 2, 2, 20, 0.012
FRAME_BYTES = FRAME[0] * FRAME[1] * FRAME[2]
MIN_FRAMES, MAX_FRAMES = 300, 600
SEED = 2424


def frame_counts():
    rng = random.Random(SEED)
    return [rng.randint(MIN_FRAMES, MAX_FRAMES) for _ in range(FILES)]


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".raw")) \
        if os.path.isdir(data) else []


def clip_table(rng, frames):
    out = []
    for _ in range(STEPS * BATCH):
        f = rng.randrange(len(frames))
        out.append((f, rng.randrange(0, frames[f] - CLIP + 1)))
    return out


def truth(data):
    frames = frame_counts()
    fsz = [os.path.getsize(f) for f in file_names(data)]
    return {
        "program": "frames_clip_workers", "needs": ["torch"], "format": "raw fixed-size frames",
        "io_library": "python buffered file: seek + read, in torch DataLoader workers",
        "data_layout": "DATA/video_N.raw", "num_files": FILES,
        "samples_per_file": round(STEPS * BATCH / FILES, 2),
        "samples_per_file_note": "random 8-frame clips, 80 per epoch over the 6 files, the "
                                 "file drawn uniformly for each clip",
        "sample_size": {"dist": "fixed", "bytes": CLIP * FRAME_BYTES,
                        "frames": CLIP, "frame_bytes": FRAME_BYTES},
        "file_size": {"frames": frames, "bytes": fsz or [n * FRAME_BYTES for n in frames],
                      "total": sum(fsz)},
        "batch_size": BATCH, "readers": {"kind": "process", "count": WORKERS,
                                         "framework": "torch DataLoader", "persistent": False},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "random clip table per epoch (file uniform, start uniform), sampler "
                   "shuffled too", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "per sample: open, one seek to a frame boundary, one 24576-byte read, "
                        "close; in 2 worker processes",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for i, n in enumerate(frame_counts()):
        rng.integers(0, 255, (n,) + FRAME, dtype=np.uint8).tofile(
            os.path.join(data, f"video_{i}.raw"))


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    names = file_names(data)
    frames = [os.path.getsize(n) // FRAME_BYTES for n in names]

    class Clips(Dataset):
        def __init__(self):
            self.table = []

        def __len__(self):
            return STEPS * BATCH

        def __getitem__(self, i):
            f, start = self.table[i]
            with open(names[f], "rb") as fh:
                fh.seek(start * FRAME_BYTES)
                raw = fh.read(CLIP * FRAME_BYTES)
            x = np.frombuffer(raw, dtype=np.uint8).reshape((CLIP,) + FRAME)
            return torch.from_numpy(x.copy())  # frombuffer of bytes is read-only

    ds = Clips()
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, persistent_workers=False,
                        generator=torch.Generator().manual_seed(SEED))
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        ds.table = clip_table(rng, frames)  # the workers are forked at iter(): they see it
        steps = 0
        for batch in loader:
            assert batch.shape == (BATCH, CLIP) + FRAME
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == STEPS


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
